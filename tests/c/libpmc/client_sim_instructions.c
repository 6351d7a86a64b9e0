/*
 * Counting a simulated program's instructions on the simulator host: "hot-cold" retires exactly
 * 10 000 000 user instructions, and a process-counting PMC attached before it runs sees all of
 * them and nothing else.
 *
 * Run with PMC_HOST=sim.  Prints "instructions <count>".
 */
#include <sys/types.h>

#include <stdint.h>

#include <pmc.h>

#include "client_check.h"

int
main(void)
{
	char *argv[] = { "hot-cold", NULL };
	pmc_id_t pmc;
	pmc_value_t instructions;
	pid_t pid;
	int status;
	const char *host;

	CHECK_PTR(host = pmc_host_name());
	EXPECT(strcmp(host, "sim") == 0);
	CHECK(pmc_init());

	CHECK(pmc_allocate("instructions", PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0));
	CHECK(pid = pmc_spawn(argv));
	CHECK(pmc_attach(pmc, pid));
	CHECK(pmc_start(pmc));
	CHECK(pmc_resume(pid));
	status = -1;
	CHECK(pmc_wait(pid, &status));
	EXPECT(status == 0);
	CHECK(pmc_read(pmc, &instructions));
	CHECK(pmc_stop(pmc));
	CHECK(pmc_release(pmc));

	printf("instructions %ju\n", (uintmax_t)instructions);
	EXPECT(instructions == 10000000);
	return (0);
}
