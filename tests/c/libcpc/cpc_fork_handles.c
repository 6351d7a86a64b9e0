/*
 * libcpc after a fork that other threads' libcpc calls overlap: three threads ask
 * cpc_npic(3CPC) of one handle over and over while the main thread forks 100 children one
 * after the other.  Each child uses the handle and opens and closes one of its own.  A lock
 * one of the other threads held at the fork would be held in the child for ever; its alarm
 * (SIGALRM) then ends it, and the run fails.
 *
 * Prints "forks 100 ok".
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

#define THREADS 3
#define FORKS 100
/* Seconds a child may take before its alarm ends it as hung. */
#define WATCHDOG 10

static cpc_t *cpc;
static volatile int stop;

static void *
ask(void *arg)
{
	(void)arg;
	while (!stop)
		(void)cpc_npic(cpc);
	return (NULL);
}

static void
child(void)
{
	cpc_t *own;

	alarm(WATCHDOG);
	if (cpc_npic(cpc) == 0)
		_exit(3);
	own = cpc_open(CPC_VER_CURRENT);
	if (own == NULL || cpc_close(own) != 0)
		_exit(4);
	_exit(0);
}

int
main(void)
{
	pthread_t threads[THREADS];
	int i, status;
	pid_t pid;

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	for (i = 0; i < THREADS; i++)
		EXPECT(pthread_create(&threads[i], NULL, ask, NULL) == 0);
	for (i = 0; i < FORKS; i++) {
		CHECK(pid = fork());
		if (pid == 0)
			child();
		EXPECT(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "child %d: %s %d\n", i,
			    WIFEXITED(status) ? "exit" : "signal",
			    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			return (1);
		}
	}
	stop = 1;
	for (i = 0; i < THREADS; i++)
		EXPECT(pthread_join(threads[i], NULL) == 0);
	CHECK(cpc_close(cpc));
	printf("forks %d ok\n", FORKS);
	return (0);
}
