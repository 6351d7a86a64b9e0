/*
 * libpctx: control a process for libcpc (the part cpc_bind_pctx and cputrack need).  Over
 * hwpmc-rs's libpmc: pctx_create launches a program held before it runs (a command on Linux and
 * FreeBSD, a built-in program on the simulator), pctx_capture follows a running process.
 * Link with -lpctx (libpctx.so and libpctx.a are links to libcpc's) or -lcpc.
 */
#ifndef _LIBPCTX_H
#define _LIBPCTX_H

#include <sys/types.h>
#include <fcntl.h>
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#if !defined(__sun) && !defined(_LIBCPC_UINT_T)
#define _LIBCPC_UINT_T
typedef unsigned int uint_t;
#endif

/* id_t (an LWP id here): glibc declares it only for some feature macros; strict C99 gets it. */
#if !defined(__sun) && defined(__GLIBC__) && !defined(__id_t_defined)
typedef __id_t id_t;
#define __id_t_defined
#endif

typedef struct __pctx pctx_t;

typedef void (pctx_errfn_t)(const char *fn, const char *fmt, va_list ap);

typedef enum {
	PCTX_NULL_EVENT = 0,
	PCTX_SYSC_EXEC_EVENT,
	PCTX_SYSC_FORK_EVENT,
	PCTX_SYSC_EXIT_EVENT,
	PCTX_SYSC_LWP_CREATE_EVENT,
	PCTX_INIT_LWP_EVENT,
	PCTX_FINI_LWP_EVENT,
	PCTX_SYSC_LWP_EXIT_EVENT
} pctx_event_t;

/*
 * Events: the simulator host reports every event but the periodic tick (LWP ids 1 up in
 * creation order; an exec gets fini_lwp of each LWP, exec with the new program's path, then
 * init_lwp of LWP 1); the Linux host traces the process with ptrace(2) while pctx_run runs
 * (LWP ids are thread ids, the main LWP's the pid; a forked child is let go after the fork
 * handler; a captured process is let go when pctx_run returns) and reports every event too;
 * FreeBSD, which does not trace it, reports PCTX_INIT_LWP_EVENT, PCTX_FINI_LWP_EVENT and
 * PCTX_SYSC_EXIT_EVENT only. As illumos's libpctx does, the fork handler is called as (pctx,
 * parent pid, child pid, lwp id, arg).
 */
typedef int pctx_sysc_execfn_t(pctx_t *, pid_t, id_t, char *, void *);
typedef void pctx_sysc_forkfn_t(pctx_t *, pid_t, id_t, pid_t, void *);
typedef void pctx_sysc_exitfn_t(pctx_t *, pid_t, id_t, int, void *);
typedef int pctx_sysc_lwp_createfn_t(pctx_t *, pid_t, id_t, void *);
typedef int pctx_init_lwpfn_t(pctx_t *, pid_t, id_t, void *);
typedef int pctx_fini_lwpfn_t(pctx_t *, pid_t, id_t, void *);
typedef int pctx_sysc_lwp_exitfn_t(pctx_t *, pid_t, id_t, void *);

extern pctx_t *pctx_create(const char *filename, char *const *argv, void *arg, int verbose,
    pctx_errfn_t *errfn);
extern pctx_t *pctx_capture(pid_t pid, void *arg, int verbose, pctx_errfn_t *errfn);
/*
 * pctx_set_events(pctx, event, handler, ..., PCTX_NULL_EVENT): sets the handler of each event;
 * 0, or -1 (errno EINVAL) for an unknown event, which the error function reports.
 * libcpc_pctx_set_event (this library's) sets one.
 */
extern int pctx_set_events(pctx_t *pctx, ...);
extern int libcpc_pctx_set_event(pctx_t *pctx, int event, void (*handler)(void));
extern int pctx_run(pctx_t *pctx, uint_t msec, uint_t nsamples,
    int (*tick)(pctx_t *, pid_t, id_t, void *));
extern void pctx_release(pctx_t *pctx);
extern void pctx_terminate(pctx_t *pctx);

#ifdef __cplusplus
}
#endif

#endif /* _LIBPCTX_H */
