/*
 * The life of a PMC through pmc(3): initialise, describe the machine, allocate, attach, start,
 * stop, read, write, read-and-write, detach and release, plus a log written with
 * pmc_writelog and read back with pmclog(3).
 *
 * Run with PMC_HOST=linux (a page-faults PMC on this process) or PMC_HOST=sim (an instructions
 * PMC on the simulated program "hot-cold"), with a writable directory as argv[1] for the log.
 * Prints what it saw and "lifecycle ok".
 */
#define _DEFAULT_SOURCE
#include <sys/types.h>
#include <sys/mman.h>

#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <pmc.h>
#include <pmclog.h>

#include "client_check.h"

static void
describe_machine(void)
{
	const struct pmc_cpuinfo *ci, *again;
	struct pmc_pmcinfo *pi;
	struct pmc_driverstats stats;
	int ncpu, npmc, i;

	CHECK(ncpu = pmc_ncpu());
	EXPECT(ncpu > 0);
	CHECK(npmc = pmc_npmc(0));
	EXPECT(npmc > 0);
	CHECK(pmc_cpuinfo(&ci));
	CHECK(pmc_cpuinfo(&again));
	EXPECT(ci == again);				/* cached */
	EXPECT((int)ci->pm_ncpu == ncpu && (int)ci->pm_npmc == npmc);
	EXPECT(ci->pm_nclass > 0 && ci->pm_nclass <= PMC_CLASS_MAX);
	printf("cpu %s, %d CPUs, %d rows\n", pmc_name_of_cputype(ci->pm_cputype), ncpu, npmc);
	for (i = 0; i < (int)ci->pm_nclass; i++) {
		CHECK_PTR(pmc_name_of_class(ci->pm_classes[i].pm_class));
		printf("class %s: %u rows of %u bits\n",
		    pmc_name_of_class(ci->pm_classes[i].pm_class), ci->pm_classes[i].pm_num,
		    ci->pm_classes[i].pm_width);
	}

	CHECK(pmc_pmcinfo(0, &pi));
	EXPECT(pi->pm_cpu == 0);
	for (i = 0; i < npmc; i++) {
		/* Every row is free, or used by a process PMC. */
		EXPECT(pi->pm_pmcs[i].pm_rowdisp == PMC_DISP_FREE ||
		    pi->pm_pmcs[i].pm_rowdisp == PMC_DISP_THREAD);
		CHECK_PTR(pmc_name_of_class(pi->pm_pmcs[i].pm_class));
	}
	free(pi);

	CHECK(pmc_get_driver_stats(&stats));
	printf("driver: %u syscalls, %u failed\n", stats.pm_syscalls, stats.pm_syscall_errors);
}

/* Touches `pages` fresh pages of this process. */
static void
touch_pages(size_t pages)
{
	volatile char *memory;
	long page;
	size_t i;

	page = sysconf(_SC_PAGESIZE);
	memory = mmap(NULL, (size_t)page * pages, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT(memory != MAP_FAILED);
	for (i = 0; i < pages; i++)
		memory[i * (size_t)page] = 1;
	CHECK(munmap((void *)memory, (size_t)page * pages));
}

/* Lets the target do something countable: the simulated program runs to its end. */
static void
run_target(int sim, pid_t target)
{
	int status;

	if (sim) {
		CHECK(pmc_resume(target));
		CHECK(pmc_wait(target, &status));
		EXPECT(status == 0);
	} else
		touch_pages(1000);
}

static void
count(int sim)
{
	char *argv[] = { "hot-cold", NULL };
	const char *event, **evnames;
	pmc_id_t pmc, other;
	pmc_value_t v1, v2, old;
	uint32_t caps, width, bit;
	pid_t target;
	int nevents, i;

	event = sim ? "instructions" : "page-faults";
	CHECK(pmc_allocate(event, PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0));
	EXPECT(PMC_ID_TO_MODE(pmc) == PMC_MODE_TC);
	EXPECT(PMC_ID_TO_CPU(pmc) == 0xFFF);
	printf("%s: PMC 0x%08x of class %s\n", event, pmc, pmc_name_of_class(PMC_ID_TO_CLASS(pmc)));

	CHECK(pmc_capabilities(pmc, &caps));
	for (bit = PMC_CAP_FIRST; bit <= PMC_CAP_LAST; bit <<= 1)
		if (caps & bit)
			printf("  capability %s\n", pmc_name_of_capability((enum pmc_caps)bit));
	CHECK(pmc_width(pmc, &width));
	EXPECT(width > 0 && width <= 64);

	CHECK(pmc_event_names_of_class((enum pmc_class)PMC_ID_TO_CLASS(pmc), &evnames, &nevents));
	EXPECT(nevents > 0);
	for (i = 0; i < nevents; i++)
		CHECK_PTR(evnames[i]);
	printf("class %s has %d events, the first %s\n", pmc_name_of_class(PMC_ID_TO_CLASS(pmc)),
	    nevents, evnames[0]);
	free(evnames);

	/* A second PMC, so the owner lives on when the first is released. */
	CHECK(pmc_allocate(sim ? "unhalted-cycles" : event, PMC_MODE_TC, 0, PMC_CPU_ANY, &other, 0));
	EXPECT(other != pmc);

	if (sim)
		CHECK(target = pmc_spawn(argv));
	else
		target = 0;
	CHECK(pmc_attach(pmc, target));
	CHECK(pmc_start(pmc));
	run_target(sim, target);
	CHECK(pmc_stop(pmc));
	CHECK(pmc_read(pmc, &v1));
	CHECK(pmc_read(pmc, &v2));
	printf("counted %ju\n", (uintmax_t)v1);
	EXPECT(v1 > 0);
	EXPECT(v2 == v1);				/* stopped: it does not move */
	if (sim)
		EXPECT(v1 == 10000000);

	CHECK(pmc_write(pmc, 1000));
	CHECK(pmc_read(pmc, &v1));
	EXPECT(v1 == 1000);
	CHECK(pmc_rw(pmc, 5, &old));
	EXPECT(old == 1000);
	CHECK(pmc_read(pmc, &v1));
	if (v1 != 5)
		printf("read after pmc_rw(5): %ju\n", (uintmax_t)v1);
	EXPECT(v1 == 5);

	if (!sim) {
		/* It counts on from the value written. */
		CHECK(pmc_start(pmc));
		touch_pages(500);
		CHECK(pmc_stop(pmc));
		CHECK(pmc_read(pmc, &v2));
		EXPECT(v2 > 5);
		CHECK(pmc_detach(pmc, 0));
	}

	CHECK(pmc_release(pmc));
	FAILS_WITH(pmc_read(pmc, &v1), EINVAL);
	CHECK(pmc_release(other));
}

static void
log_userdata(const char *dir)
{
	char path[4096];
	struct pmclog_ev ev;
	void *parser;
	int fd, found, records;

	snprintf(path, sizeof(path), "%s/lifecycle.pmclog", dir);
	CHECK(fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	CHECK(pmc_configure_logfile(fd));
	CHECK(close(fd));		/* libpmc keeps its own reference */
	CHECK(pmc_writelog(0xC0FFEE));
	CHECK(pmc_flush_logfile());
	CHECK(pmc_close_logfile());

	CHECK(fd = open(path, O_RDONLY));
	CHECK_PTR(parser = pmclog_open(fd));
	found = records = 0;
	while (pmclog_read(parser, &ev) == 0) {
		if (records++ == 0)
			EXPECT(ev.pl_type == PMCLOG_TYPE_INITIALIZE);
		if (ev.pl_type == PMCLOG_TYPE_USERDATA && ev.pl_u.pl_u.pl_userdata == 0xC0FFEE)
			found++;
	}
	EXPECT(ev.pl_state == PMCLOG_EOF);		/* the CLOSELOG record */
	EXPECT(found == 1);
	pmclog_close(parser);
	CHECK(close(fd));
	printf("log: %d records before CLOSELOG, USERDATA found\n", records);
}

int
main(int argc, char **argv)
{
	const char *host;
	int sim;

	EXPECT(argc == 2);
	CHECK_PTR(host = pmc_host_name());
	sim = strcmp(host, "sim") == 0;
	printf("host %s\n", host);

	CHECK(pmc_init());
	CHECK(pmc_init());				/* again: a no-op */
	describe_machine();
	count(sim);
	log_userdata(argv[1]);

	printf("lifecycle ok\n");
	return (0);
}
