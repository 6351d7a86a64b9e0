/*
 * PMCs belong to the process that allocated them (FreeBSD's semantics, DESIGN §5.0): after
 * fork(2) the child owns none of its parent's PMCs — its calls on the parent's ids fail as for
 * any process that owns no PMC (ESRCH) — and the parent's PMCs keep working.
 *
 * Run with PMC_HOST=linux (a page-faults PMC) or PMC_HOST=sim (an instructions PMC; the child
 * gets a simulated machine of its own). Prints "fork ok".
 */
#define _DEFAULT_SOURCE
#include <sys/types.h>
#include <sys/wait.h>

#include <stdint.h>
#include <unistd.h>

#include <string.h>

#include <pmc.h>
#include <pmc_host.h>

#include "client_check.h"

int
main(void)
{
	pmc_id_t pmc;
	pmc_value_t value;
	pid_t child;
	int status;

	const char *event;

	CHECK(pmc_init());
	event = strcmp(pmc_host_name(), "sim") == 0 ? "instructions" : "page-faults";
	CHECK(pmc_allocate(event, PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0));
	CHECK(pmc_attach(pmc, 0));
	CHECK(pmc_start(pmc));

	child = fork();
	CHECK(child);
	if (child == 0) {
		/* The child: none of these PMCs is its own. */
		if (pmc_read(pmc, &value) != -1 || errno != ESRCH)
			_exit(10);
		if (pmc_stop(pmc) != -1 || errno != ESRCH)
			_exit(11);
		if (pmc_release(pmc) != -1 || errno != ESRCH)
			_exit(12);
		_exit(0);
	}
	CHECK(waitpid(child, &status, 0));
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* The parent's PMC is untouched by what the child tried. */
	CHECK(pmc_stop(pmc));
	CHECK(pmc_read(pmc, &value));
	CHECK(pmc_release(pmc));
	printf("fork ok\n");
	return 0;
}
