/*
 * Checks shared by the C clients of tests/tests/c_libpmc.rs.  A failed check prints where,
 * what, errno and libpmc's reason (pmc_host_error) to stderr and exits with status 1.
 */
#ifndef CLIENT_CHECK_H
#define CLIENT_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmc_host.h>

static void
client_fail(const char *file, int line, const char *what)
{
	int saved = errno;

	fprintf(stderr, "%s:%d: check failed: %s (errno %d: %s; libpmc: %s)\n", file, line, what,
	    saved, strerror(saved), pmc_host_error());
	exit(1);
}

/* The call must succeed (return >= 0, or a non-NULL pointer for CHECK_PTR). */
#define CHECK(call) \
	do { \
		if ((call) < 0) \
			client_fail(__FILE__, __LINE__, #call); \
	} while (0)

#define CHECK_PTR(call) \
	do { \
		if ((call) == NULL) \
			client_fail(__FILE__, __LINE__, #call); \
	} while (0)

/* The condition must hold. */
#define EXPECT(cond) \
	do { \
		if (!(cond)) \
			client_fail(__FILE__, __LINE__, #cond); \
	} while (0)

/* The call must fail with -1 and errno `err`. */
#define FAILS_WITH(call, err) \
	do { \
		int fails_result_; \
		errno = 0; \
		fails_result_ = (int)(call); \
		if (fails_result_ != -1 || errno != (err)) { \
			fprintf(stderr, "%s:%d: %s returned %d, errno %d (%s); expected -1, errno %d (%s)\n", \
			    __FILE__, __LINE__, #call, fails_result_, errno, strerror(errno), (err), \
			    #err); \
			exit(1); \
		} \
	} while (0)

/* The call must return NULL with errno `err`. */
#define NULL_WITH(call, err) \
	do { \
		const void *null_result_; \
		errno = 0; \
		null_result_ = (call); \
		if (null_result_ != NULL || errno != (err)) { \
			fprintf(stderr, "%s:%d: %s returned %p, errno %d; expected NULL, errno %d (%s)\n", \
			    __FILE__, __LINE__, #call, null_result_, errno, (err), #err); \
			exit(1); \
		} \
	} while (0)

#endif /* !CLIENT_CHECK_H */
