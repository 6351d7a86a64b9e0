/*
 * libcpc after fork on the Linux host: the process binds a set whose page-fault request
 * overflows every 16 faults with CPC_OVF_NOTIFY_EMT, then forks 50 children one after the
 * other.  Each child binds the set again (its parent's binding is not its own) and must get
 * overflow signals of its own; the parent must keep getting its own between the forks.
 *
 * A child that deadlocks in libcpc (a lock its parent's overflow watcher held at the fork) is
 * ended by its alarm (SIGALRM), a child that gets no signal exits 1: either fails the run.
 * Prints "forks 50 ok".
 *
 * Run with PMC_HOST=linux.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

#define PERIOD 16
#define FORKS 50
/* Seconds a child may take before its alarm ends it as hung. */
#define WATCHDOG 30

static cpc_t *cpc;
static cpc_set_t *set;
static volatile sig_atomic_t signals, restart_failed;

static void
on_emt(int sig, siginfo_t *info, void *context)
{
	(void)sig;
	(void)info;
	(void)context;
	if (cpc_set_restart(cpc, set) != 0)
		restart_failed = 1;
	signals++;
}

/* Faults in pages until `n` more signals came, at most 2 000 batches; whether they came. */
static int
signalled(long page, int n)
{
	struct timespec pause = { 0, 200000 };
	int goal = signals + n;
	int batch;

	for (batch = 0; batch < 2000 && signals < goal; batch++) {
		touch_fresh_pages(page, PERIOD);
		nanosleep(&pause, NULL);
	}
	return (signals >= goal);
}

static void
child(long page)
{
	alarm(WATCHDOG);
	signals = 0;
	if (cpc_bind_curlwp(cpc, set, 0) != 0)
		_exit(2);
	if (!signalled(page, 2) || restart_failed)
		_exit(3);
	if (cpc_unbind(cpc, set) != 0)
		_exit(4);
	_exit(0);
}

int
main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int i, status;
	pid_t pid;

	handle_signal(SIGEMT, on_emt);
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	EXPECT(cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX - (PERIOD - 1),
	    CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) == 0);
	CHECK(cpc_bind_curlwp(cpc, set, 0));
	EXPECT(signalled(page, 1));

	for (i = 0; i < FORKS; i++) {
		CHECK(pid = fork());
		if (pid == 0)
			child(page);
		/* The parent's own signals go on while the child runs. */
		EXPECT(signalled(page, 1));
		EXPECT(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "child %d: %s %d\n", i,
			    WIFSIGNALED(status) ? "killed by signal" : "exit status",
			    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			return (1);
		}
	}
	EXPECT(!restart_failed);
	printf("forks %d ok\n", FORKS);
	CHECK(cpc_unbind(cpc, set));
	CHECK(cpc_close(cpc));
	return (0);
}
