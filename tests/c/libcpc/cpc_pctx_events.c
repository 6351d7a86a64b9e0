/*
 * libpctx's events on the simulator host: runs the simulated program argv[1] under pctx_run
 * with a handler for every event and prints one line per call, the controlled process's pid
 * written "P" (and any other pid as "C<pid>" when it is not P), so the caller can check the
 * exact sequence. The set of the first LWP counts PAPI_tot_ins, printed at its fini_lwp.
 *
 * Run with PMC_HOST=sim.
 */
#include <sys/types.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include <libcpc.h>

#include "check.h"

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static pid_t root;
static int cookie, bound;

static void
pid_text(pid_t pid, char *out, size_t len)
{
	if (pid == root)
		(void)snprintf(out, len, "P");
	else
		(void)snprintf(out, len, "C%d", (int)pid);
}

static void
line(const char *what, pid_t pid, id_t lwp)
{
	char p[32];

	pid_text(pid, p, sizeof (p));
	printf("%s %s %d\n", what, p, (int)lwp);
}

static int
init_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	EXPECT(arg == (void *)&cookie);
	if (root == 0)
		root = pid;	/* the first init_lwp is the created process's */
	line("init_lwp", pid, lwp);
	/* The set stays bound across an exec (counting is per process). */
	if (pid == root && lwp == 1 && !bound) {
		CHECK(cpc_bind_pctx(cpc, pctx, lwp, set, 0));
		bound = 1;
	}
	return (0);
}

static int
fini_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	uint64_t v;

	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("fini_lwp", pid, lwp);
	if (pid == root && lwp == 1) {
		CHECK(cpc_set_sample(cpc, set, buf));
		CHECK(cpc_buf_get(cpc, buf, 0, &v));
		printf("PAPI_tot_ins %" PRIu64 "\n", v);
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
	char c[32];

	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	EXPECT((pid_t)child > 0 && (pid_t)child != root);
	pid_text((pid_t)child, c, sizeof (c));
	line("fork", parent, (id_t)lwp);
	printf("child %s\n", c[0] == 'C' ? "new" : "same");
}

static int
exec_(pctx_t *pctx, pid_t pid, id_t lwp, char *cmd, void *arg)
{
	(void)pctx;
	EXPECT(arg == (void *)&cookie);
	line("exec", pid, lwp);
	printf("command %s\n", cmd);
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

int
main(int argc, char **argv)
{
	pctx_t *pctx;

	EXPECT(argc == 2);
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(cpc_set_add_request(cpc, set, "PAPI_tot_ins", 0, CPC_COUNT_USER, 0, NULL));
	CHECK_PTR(buf = cpc_buf_create(cpc, set));
	CHECK_PTR(pctx = pctx_create(argv[1], &argv[1], &cookie, 0, NULL));
	CHECK(pctx_set_events(pctx, PCTX_INIT_LWP_EVENT, init_lwp, PCTX_FINI_LWP_EVENT, fini_lwp,
	    PCTX_SYSC_LWP_CREATE_EVENT, lwp_create, PCTX_SYSC_LWP_EXIT_EVENT, lwp_exit,
	    PCTX_SYSC_FORK_EVENT, fork_, PCTX_SYSC_EXEC_EVENT, exec_, PCTX_SYSC_EXIT_EVENT, exit_,
	    PCTX_NULL_EVENT));
	EXPECT(pctx_set_events(pctx, 8, init_lwp, PCTX_NULL_EVENT) == -1 && errno == EINVAL);
	CHECK(pctx_run(pctx, 0, 0, NULL));
	pctx_release(pctx);
	CHECK(cpc_close(cpc));
	printf("events ok\n");
	return (0);
}
