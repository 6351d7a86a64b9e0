/*
 * Counting its own page faults on the Linux host: touching N fresh pages (huge pages off) is
 * counted as N page faults, within 10%.  pmc_read_scaled gives the same count with perf's
 * times: enabled some nanoseconds, on a counter all of them (a software event never waits).
 *
 * Run with PMC_HOST=linux.  Prints "page-faults <count> pages <N>".
 */
#define _DEFAULT_SOURCE
#include <sys/types.h>
#include <sys/mman.h>

#include <stdint.h>
#include <unistd.h>

#include <pmc.h>
#include <pmc_host.h>

#include "client_check.h"

#define PAGES 20000

int
main(void)
{
	pmc_id_t pmc;
	pmc_value_t faults;
	uint64_t scaled, enabled, running;
	long page;
	size_t i;
	volatile char *memory;
	const char *host;

	CHECK_PTR(host = pmc_host_name());
	EXPECT(strcmp(host, "linux") == 0);
	CHECK(pmc_init());

	page = sysconf(_SC_PAGESIZE);
	EXPECT(page > 0);
	memory = mmap(NULL, (size_t)page * PAGES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(memory != MAP_FAILED);
	/* One fault per base page, not one per 2 MB huge page. */
	CHECK(madvise((void *)memory, (size_t)page * PAGES, MADV_NOHUGEPAGE));

	CHECK(pmc_allocate("page-faults", PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0));
	CHECK(pmc_attach(pmc, 0));
	CHECK(pmc_start(pmc));
	for (i = 0; i < PAGES; i++)
		memory[i * (size_t)page] = 1;
	CHECK(pmc_stop(pmc));
	CHECK(pmc_read(pmc, &faults));
	CHECK(pmc_read_scaled(pmc, &scaled, &enabled, &running));
	CHECK(pmc_release(pmc));
	EXPECT(scaled == faults);
	EXPECT(enabled > 0);
	EXPECT(running == enabled);

	printf("page-faults %ju pages %d\n", (uintmax_t)faults, PAGES);
	EXPECT(faults >= PAGES * 9 / 10);
	EXPECT(faults <= PAGES * 11 / 10);
	return (0);
}
