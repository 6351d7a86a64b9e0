/*
 * Checks shared by the C clients of tests/tests/c_libcpc.rs.  A failed check prints where,
 * what and errno to stderr and exits with status 1.
 */
#ifndef CPC_CHECK_H
#define CPC_CHECK_H

#include <sys/mman.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(what) \
	do { \
		fprintf(stderr, "%s:%d: check failed: %s (errno %d: %s)\n", __FILE__, __LINE__, \
		    what, errno, strerror(errno)); \
		exit(1); \
	} while (0)

/* The call must succeed (return >= 0, or non-NULL for CHECK_PTR). */
#define CHECK(call) do { if ((call) < 0) FAIL(#call); } while (0)
#define CHECK_PTR(call) do { if ((call) == NULL) FAIL(#call); } while (0)
/* The condition must hold. */
#define EXPECT(cond) do { if (!(cond)) FAIL(#cond); } while (0)
/* The call must return -1 with errno `err`. */
#define FAILS_WITH(call, err) \
	do { \
		int r_; \
		errno = 0; \
		r_ = (int)(call); \
		if (r_ != -1 || errno != (err)) { \
			fprintf(stderr, "%s:%d: %s returned %d, errno %d (%s); expected -1, %s\n", \
			    __FILE__, __LINE__, #call, r_, errno, strerror(errno), #err); \
			exit(1); \
		} \
	} while (0)
/* The call must return NULL with errno `err`. */
#define NULL_WITH(call, err) \
	do { \
		errno = 0; \
		if ((call) != NULL || errno != (err)) { \
			fprintf(stderr, "%s:%d: %s: expected NULL, errno %s; errno %d\n", __FILE__, \
			    __LINE__, #call, #err, errno); \
			exit(1); \
		} \
	} while (0)

/* Touches `n` fresh base pages (no huge page): n page faults. */
static inline void
touch_fresh_pages(long page, int n)
{
	char *pages;
	int i;

	pages = mmap(NULL, (size_t)page * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	EXPECT(pages != MAP_FAILED);
	CHECK(madvise(pages, (size_t)page * n, MADV_NOHUGEPAGE));
	for (i = 0; i < n; i++)
		pages[i * page] = 1;
	CHECK(munmap(pages, (size_t)page * n));
}

/* Installs `handler` (SA_SIGINFO) for signal `sig`. */
static inline void
handle_signal(int sig, void (*handler)(int, siginfo_t *, void *))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(sig, &sa, NULL));
}

#endif /* !CPC_CHECK_H */
