/*
 * libpctx as a program written for illumos links it: as pctx_capture(3CPC)'s SYNOPSIS says
 * (cc file -lpctx, or with -lcpc too), declaring its own prototypes of the functions it calls
 * (no <libpctx.h>), and finding pctx_set_events with dlsym(3C) in libpctx.so.
 *
 * Arguments: a program for pctx_create (the simulator's "hot-cold", or a command on Linux).
 * pctx_set_events sets the init_lwp handler (variadic call, several pairs), refuses an unknown
 * event through the error function; pctx_run runs the program, whose init_lwp is reported.
 * Prints "init_lwp 1", "unknown event reported", "dlsym ok", "link ok".
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
typedef struct __pctx pctx_t;
typedef void (pctx_errfn_t)(const char *fn, const char *fmt, va_list ap);
extern pctx_t *pctx_create(const char *, char *const *, void *, int, pctx_errfn_t *);
extern int pctx_set_events(pctx_t *pctx, ...);
extern int pctx_run(pctx_t *, unsigned int, unsigned int, int (*)(pctx_t *, pid_t, id_t, void *));
extern void pctx_release(pctx_t *);
#ifdef __cplusplus
}
#endif

/* The values of illumos's pctx_event_t. */
enum { NULL_EVENT = 0, EXIT_EVENT = 3, INIT_LWP_EVENT = 5, FINI_LWP_EVENT = 6 };

static int init_lwps, reported;

static int
on_init_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	init_lwps++;
	return (0);
}

static int
on_fini_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	return (0);
}

static void
on_error(const char *fn, const char *fmt, va_list ap)
{
	char text[256];

	vsnprintf(text, sizeof(text), fmt, ap);
	if (strcmp(fn, "set_events") == 0 && strcmp(text, "unknown event type 2a\n") == 0)
		reported++;
	else
		fprintf(stderr, "unexpected error report: %s: %s", fn, text);
}

int
main(int argc, char **argv)
{
	pctx_t *pctx;
	void *lib;
	int (*found)(pctx_t *, ...);

	if (argc < 2)
		return (1);
	if ((pctx = pctx_create(argv[1], argv + 1, NULL, 0, on_error)) == NULL) {
		perror("pctx_create");
		return (1);
	}
	if (pctx_set_events(pctx, INIT_LWP_EVENT, on_init_lwp, FINI_LWP_EVENT, on_fini_lwp,
	    EXIT_EVENT, NULL, NULL_EVENT) != 0) {
		perror("pctx_set_events");
		return (1);
	}
	if (pctx_set_events(pctx, 42, on_init_lwp, NULL_EVENT) != -1 || reported != 1) {
		fprintf(stderr, "an unknown event was not refused and reported\n");
		return (1);
	}
	if (pctx_run(pctx, 0, 0, NULL) != 0) {
		perror("pctx_run");
		return (1);
	}
	pctx_release(pctx);
	printf("init_lwp %d\nunknown event reported\n", init_lwps);

	if ((lib = dlopen("libpctx.so", RTLD_NOW)) == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return (1);
	}
	*(void **)&found = dlsym(lib, "pctx_set_events");
	if (found == NULL) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return (1);
	}
	printf("dlsym ok\nlink ok\n");
	return (0);
}
