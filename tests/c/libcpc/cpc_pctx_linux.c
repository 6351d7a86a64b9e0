/*
 * libpctx's events on the Linux host, traced with ptrace: this program runs itself as the
 * target ("target" argument) under pctx_run, with a handler for every event, and prints one
 * line per call: the target's pid written "P", its main LWP (id = pid) "M", another LWP "T".
 *
 * The target starts a thread and joins it, forks a child that exits at once and waits for
 * it, then executes itself as "stage2", which touches pages and exits with status 5.  The set
 * bound to the main LWP counts page faults, checked nonzero at each fini_lwp of the main LWP.
 *
 * With the argument "capture", captures a forked child (pctx_capture) for two ticks instead,
 * then checks that the child runs untraced again (TracerPid 0 in /proc/PID/status).
 *
 * Run with PMC_HOST=linux.
 */
#include <sys/types.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static pid_t root;
static int cookie, bound;
static char self[PATH_MAX];

static void
line(const char *what, pid_t pid, id_t lwp)
{
	printf("%s %s %s\n", what, pid == root ? "P" : "other",
	    (pid_t)lwp == pid ? "M" : "T");
}

static int
init_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	EXPECT(arg == (void *)&cookie);
	if (root == 0)
		root = pid;	/* the first init_lwp is the created process's */
	line("init_lwp", pid, lwp);
	/* Counting is per process: the set goes on the main LWP, and stays across the exec. */
	if ((pid_t)lwp == pid && !bound) {
		CHECK(cpc_bind_pctx(cpc, pctx, lwp, set, 0));
		bound = 1;
	}
	return (0);
}

static int
fini_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	uint64_t faults;

	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("fini_lwp", pid, lwp);
	if ((pid_t)lwp == pid) {
		CHECK(cpc_set_sample(cpc, set, buf));
		CHECK(cpc_buf_get(cpc, buf, 0, &faults));
		EXPECT(faults > 0);
	}
	return (0);
}

static int
lwp_create(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("lwp_create", pid, lwp);
	return (0);
}

static int
lwp_exit(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("lwp_exit", pid, lwp);
	return (0);
}

/* Called as illumos's libpctx calls it: parent pid, child pid, lwp. */
static void
fork_(pctx_t *pctx, pid_t parent, id_t child, pid_t lwp, void *arg)
{
	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("fork", parent, (id_t)lwp);
	printf("child %s\n", (pid_t)child > 0 && (pid_t)child != root ? "new" : "same");
}

static int
exec_(pctx_t *pctx, pid_t pid, id_t lwp, char *cmd, void *arg)
{
	char psargs[PATH_MAX + 8];

	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("exec", pid, lwp);
	/* The new command line, as illumos's pr_psargs: cut to 79 bytes. */
	(void) snprintf(psargs, sizeof (psargs), "%s stage2", self);
	psargs[79] = '\0';
	printf("command %s\n", strcmp(cmd, psargs) == 0 ? "self stage2" : cmd);
	return (0);
}

static void
exit_(pctx_t *pctx, pid_t pid, id_t lwp, int status, void *arg)
{
	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("exit", pid, lwp);
	printf("status %d\n", status);
}

static void *
worker(void *arg)
{
	return (arg);
}

/* The measured program. */
static int
target(char *argv0, int stage2)
{
	pthread_t thread;
	pid_t child;
	int status;

	if (stage2) {
		touch_fresh_pages(sysconf(_SC_PAGESIZE), 16);
		return (5);
	}
	if (pthread_create(&thread, NULL, worker, NULL) != 0 || pthread_join(thread, NULL) != 0)
		return (2);
	child = fork();
	if (child == 0)
		_exit(0);
	if (child < 0 || waitpid(child, &status, 0) != child)
		return (2);
	execl("/proc/self/exe", argv0, "stage2", (char *)NULL);
	return (2);
}

static int ticks;

static int
tick(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	ticks++;
	return (0);
}

/* The TracerPid line of process `pid`'s status. */
static int
tracer_of(pid_t pid)
{
	char path[64], text[4096], *at;
	FILE *f;
	size_t n;

	(void)snprintf(path, sizeof (path), "/proc/%d/status", (int)pid);
	CHECK_PTR(f = fopen(path, "r"));
	n = fread(text, 1, sizeof (text) - 1, f);
	(void)fclose(f);
	text[n] = '\0';
	CHECK_PTR(at = strstr(text, "TracerPid:"));
	return (atoi(at + strlen("TracerPid:")));
}

/* Captures a running child for two ticks: it is traced meanwhile, untraced after. */
static int
capture(void)
{
	pctx_t *pctx;
	pid_t child;
	int status;

	child = fork();
	CHECK(child);
	if (child == 0) {
		for (;;)
			(void)pause();
	}
	CHECK_PTR(pctx = pctx_capture(child, &cookie, 0, NULL));
	CHECK(pctx_run(pctx, 10, 2, tick));
	EXPECT(ticks == 2);
	pctx_release(pctx);
	printf("capture ticks %d tracer %d\n", ticks, tracer_of(child));
	CHECK(kill(child, SIGKILL));
	EXPECT(waitpid(child, &status, 0) == child && WIFSIGNALED(status));
	return (0);
}

int
main(int argc, char **argv)
{
	char *target_argv[] = { self, "target", NULL };
	pctx_t *pctx;
	ssize_t n;

	if (argc > 1 && strcmp(argv[1], "target") == 0)
		return (target(argv[0], 0));
	if (argc > 1 && strcmp(argv[1], "stage2") == 0)
		return (target(argv[0], 1));
	if (argc > 1 && strcmp(argv[1], "capture") == 0)
		return (capture());
	CHECK(n = readlink("/proc/self/exe", self, sizeof (self) - 1));
	self[n] = '\0';
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL));
	CHECK_PTR(buf = cpc_buf_create(cpc, set));
	CHECK_PTR(pctx = pctx_create(self, target_argv, &cookie, 0, NULL));
	CHECK(pctx_set_events(pctx, PCTX_INIT_LWP_EVENT, init_lwp, PCTX_FINI_LWP_EVENT, fini_lwp,
	    PCTX_SYSC_LWP_CREATE_EVENT, lwp_create, PCTX_SYSC_LWP_EXIT_EVENT, lwp_exit,
	    PCTX_SYSC_FORK_EVENT, fork_, PCTX_SYSC_EXEC_EVENT, exec_, PCTX_SYSC_EXIT_EVENT, exit_,
	    PCTX_NULL_EVENT));
	CHECK(pctx_run(pctx, 0, 0, NULL));
	pctx_release(pctx);
	CHECK(cpc_close(cpc));
	printf("events ok\n");
	return (0);
}
