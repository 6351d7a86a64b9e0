/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * pmc_host.h: hwpmc-rs extensions to pmc(3), not in FreeBSD's libpmc.
 *
 * libpmc serves a process from one *host*: FreeBSD's hwpmc(4) kernel module, Linux
 * (perf_event_open(2) behind an embedded hwpmc driver) or the deterministic simulated machine.
 * The host is chosen once per process, by the environment variable PMC_HOST=freebsd|linux|sim,
 * else FreeBSD's module if present, else Linux.  These functions say which host serves the
 * process and launch a program to measure in a way every host supports: held before it runs,
 * so PMCs can be attached to it first.
 *
 *	pid_t pid = pmc_spawn(argv);		(held: nothing has run yet)
 *	pmc_attach(pmcid, pid);
 *	pmc_start(pmcid);
 *	pmc_resume(pid);			(it runs)
 *	pmc_wait(pid, &status);			(it has ended; its counts are final)
 *	pmc_read(pmcid, &value);
 *
 * Like the pmc(3) functions, they return 0 (or a pid) on success and -1 with errno set on
 * failure, never exit the process, and check every pointer (EINVAL for NULL).
 */

#ifndef _HWPMC_RS_PMC_HOST_H_
#define _HWPMC_RS_PMC_HOST_H_

#include <sys/types.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The host serving this process: "freebsd", "linux" or "sim".  Returns a static string, or NULL
 * with errno EINVAL if PMC_HOST names no host (the same error then fails every pmc(3) call).
 */
const char	*pmc_host_name(void);

/*
 * Why the calling thread's last failed libpmc call (pmc(3) or this header) failed, in words:
 * the operation, the errno and the reason, e.g. "event: EINVAL (Invalid argument): unknown
 * event `instrutions`; did you mean instructions? ...".  FreeBSD's libpmc prints such reasons
 * with errx(3) and exits; this one returns -1 and keeps the text here.  Returns "" if no call
 * has failed.  The string stays valid until the thread's next failing libpmc call.
 */
const char	*pmc_host_error(void);

/*
 * Launches argv (a NULL-terminated array, as for execvp(3)) held before it runs its program.
 * On FreeBSD and Linux argv[0] is a command, looked up in PATH; the child is forked at once and
 * execs only when resumed, so PMCs attached to it count from its first instruction.  On the
 * simulator argv[0] names a built-in simulated program ("hot-cold": main calls hot, 900 blocks,
 * then cold, 100 blocks, of 10 000 user instructions each, 10 000 000 instructions in all;
 * "forker"; "threads"), made a process of the simulated machine.
 *
 * Returns the child's pid, or -1 with errno: EINVAL (argv NULL or empty), ENOENT (no such
 * command or simulated program), or the error of fork(2).
 */
pid_t		pmc_spawn(char *const _argv[]);

/*
 * Lets a child held by pmc_spawn run its program.  Returns 0, or -1 with errno ESRCH if pid is
 * not a held child of this process.  (On the simulator a child runs while pmc_wait waits.)
 */
int		pmc_resume(pid_t _pid);

/*
 * Waits for a child from pmc_spawn to end and, unless status is NULL, stores its exit status
 * as a shell reports it: the exit code (0-255), or 128 + N if signal N killed it.  On the
 * simulator this runs the simulated machine until the child has exited and the driver has
 * processed everything it left (samples, log records), so counts and logs are complete.
 * Returns 0, or -1 with errno (ECHILD: not a child of this process).
 */
int		pmc_wait(pid_t _pid, int *_status);

/*
 * Counter multiplexing.  A counting PMC allocated with PMC_F_MULTIPLEX (sys/pmc.h) may share a
 * counter with other multiplexed PMCs when there are more than counters: the driver rotates
 * them at every tick, and each counts only during its turns.  PMC_F_GROUP_LEADER starts an
 * event group and PMC_F_GROUP_MEMBER joins the last one: a group is always counted together.
 * Without these flags pmc_allocate fails when the counters run out, as FreeBSD's.
 *
 * pmc_read_scaled stores the count scaled to the whole time the PMC was enabled, value x
 * enabled / running (perf's scaling), in *value, and unless NULL the reference cycles it was
 * enabled in *enabled and on a counter in *running.  A PMC that is not multiplexed gives its
 * count and 0 for both times; one that never had a turn gives 0 with *running 0 (perf's
 * "<not counted>").  Returns 0, or -1 with errno as pmc_read (EINVAL for value NULL).  On
 * FreeBSD's own kernel module, which has no multiplexing, it is pmc_read with times 0.  On the
 * Linux host the times are perf's, in nanoseconds, for every PMC (equal when perf did not
 * rotate it), and a PMC without PMC_F_MULTIPLEX whose event lost its counter fails with EBUSY.
 */
int		pmc_read_scaled(uint32_t _pmc, uint64_t *_value, uint64_t *_enabled,
		    uint64_t *_running);

#ifdef __cplusplus
}
#endif

#endif /* !_HWPMC_RS_PMC_HOST_H_ */
