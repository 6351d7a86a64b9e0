/*
 * Every error path of the pmc(3) functions a program can reach: each call fails with -1 (NULL
 * for the name functions) and the errno FreeBSD documents, and the process keeps running (an
 * unknown event name does not exit, as it does with FreeBSD's libpmc).
 *
 * Run with PMC_HOST=linux or PMC_HOST=sim.  Prints "errors ok" at the end.
 */
#define _DEFAULT_SOURCE
#include <sys/types.h>

#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <pmc.h>
#include <pmc_host.h>
#include <string.h>

#include "client_check.h"

/* A PMC id nobody allocated: TSC class, process counting mode, row 0xEE. */
#define BAD_ID	PMC_ID_MAKE_ID(0xFFF, PMC_MODE_TC, PMC_CLASS_TSC, 0xEE)

static void
before_init(void)
{
	const struct pmc_cpuinfo *ci;
	struct pmc_pmcinfo *pi;

	/* The functions reading pmc_init's cache: ENXIO until it ran. */
	FAILS_WITH(pmc_ncpu(), ENXIO);
	FAILS_WITH(pmc_npmc(0), ENXIO);
	FAILS_WITH(pmc_cpuinfo(&ci), ENXIO);
	FAILS_WITH(pmc_pmcinfo(0, &pi), ENXIO);
	/* pmc_allocate: FreeBSD's libpmc knows no event class before pmc_init: EINVAL. */
	pmc_id_t pmc;
	FAILS_WITH(pmc_allocate("page-faults", PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0), EINVAL);
	EXPECT(strstr(pmc_host_error(), "pmc_init") != NULL);
}

static void
names(void)
{
	NULL_WITH(pmc_name_of_class((enum pmc_class)999), EINVAL);
	NULL_WITH(pmc_name_of_class((enum pmc_class)1), EINVAL);	/* K7: retired */
	NULL_WITH(pmc_name_of_capability((enum pmc_caps)0), EINVAL);
	NULL_WITH(pmc_name_of_capability((enum pmc_caps)(PMC_CAP_READ | PMC_CAP_WRITE)), EINVAL);
	NULL_WITH(pmc_name_of_capability((enum pmc_caps)0x4000), EINVAL);
	NULL_WITH(pmc_name_of_mode((enum pmc_mode)4), EINVAL);
	NULL_WITH(pmc_name_of_state((enum pmc_state)7), EINVAL);
	NULL_WITH(pmc_name_of_disposition(PMC_DISP_UNKNOWN), EINVAL);
	NULL_WITH(pmc_name_of_cputype((enum pmc_cputype)2), EINVAL);
	NULL_WITH(pmc_name_of_event((enum pmc_event)5), EINVAL);
	/* and the good ones */
	EXPECT(strcmp(pmc_name_of_class(PMC_CLASS_IAP), "IAP") == 0);
	EXPECT(strcmp(pmc_name_of_capability(PMC_CAP_READ), "READ") == 0);
	EXPECT(strcmp(pmc_name_of_mode(PMC_MODE_TS), "TS") == 0);
	EXPECT(strcmp(pmc_name_of_state(PMC_STATE_RUNNING), "RUNNING") == 0);
	EXPECT(strcmp(pmc_name_of_disposition(PMC_DISP_THREAD), "THREAD") == 0);
	EXPECT(strcmp(pmc_name_of_cputype(PMC_CPU_INTEL_SKYLAKE), "INTEL_SKYLAKE") == 0);
	EXPECT(strcmp(pmc_name_of_event(PMC_EV_TSC_TSC), "TSC") == 0);
}

static void
null_pointers(const char *event)
{
	const char **evnames;
	int nevents;
	pmc_id_t pmc;

	FAILS_WITH(pmc_allocate(NULL, PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0), EINVAL);
	FAILS_WITH(pmc_allocate(event, PMC_MODE_TC, 0, PMC_CPU_ANY, NULL, 0), EINVAL);
	FAILS_WITH(pmc_read(BAD_ID, NULL), EINVAL);
	FAILS_WITH(pmc_rw(BAD_ID, 0, NULL), EINVAL);
	FAILS_WITH(pmc_capabilities(BAD_ID, NULL), EINVAL);
	FAILS_WITH(pmc_width(BAD_ID, NULL), EINVAL);
	FAILS_WITH(pmc_get_msr(BAD_ID, NULL), EINVAL);
	FAILS_WITH(pmc_get_driver_stats(NULL), EINVAL);
	FAILS_WITH(pmc_cpuinfo(NULL), EINVAL);
	FAILS_WITH(pmc_pmcinfo(0, NULL), EINVAL);
	FAILS_WITH(pmc_event_names_of_class(PMC_CLASS_SOFT, NULL, &nevents), EINVAL);
	FAILS_WITH(pmc_event_names_of_class(PMC_CLASS_SOFT, &evnames, NULL), EINVAL);
	FAILS_WITH(pmc_spawn(NULL), EINVAL);
	EXPECT(pmc_pmu_pmcallocate(NULL, NULL) == EINVAL);
}

static void
bad_allocations(const char *event)
{
	const char **evnames;
	int nevents;
	pmc_id_t pmc;

	pmc = 12345;
	FAILS_WITH(pmc_allocate("no-such-event-xyz", PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0),
	    EINVAL);
	EXPECT(pmc == 12345);
	/* Still running, and libpmc says why. */
	EXPECT(strstr(pmc_host_error(), "no-such-event-xyz") != NULL);
	FAILS_WITH(pmc_allocate("page-faults,bogus=1", PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0),
	    EINVAL);
	FAILS_WITH(pmc_allocate(event, (enum pmc_mode)9, 0, PMC_CPU_ANY, &pmc, 0), EINVAL);
	FAILS_WITH(pmc_allocate(event, (enum pmc_mode)-1, 0, PMC_CPU_ANY, &pmc, 0), EINVAL);
	/* a flag PMCALLOCATE does not take */
	FAILS_WITH(pmc_allocate(event, PMC_MODE_TC, 0x40000000, PMC_CPU_ANY, &pmc, 0), EINVAL);
	FAILS_WITH(pmc_allocate(event, PMC_MODE_TC, PMC_F_NEWVALUE, PMC_CPU_ANY, &pmc, 0), EINVAL);
	/* a process PMC takes PMC_CPU_ANY */
	FAILS_WITH(pmc_allocate(event, PMC_MODE_TC, 0, 0, &pmc, 0), EINVAL);
	EXPECT(pmc == 12345);
	FAILS_WITH(pmc_event_names_of_class((enum pmc_class)999, &evnames, &nevents), EINVAL);
}

static void
bad_ids(void)
{
	pmc_value_t value;
	uint32_t word;

	FAILS_WITH(pmc_start(BAD_ID), EINVAL);
	FAILS_WITH(pmc_stop(BAD_ID), EINVAL);
	FAILS_WITH(pmc_read(BAD_ID, &value), EINVAL);
	FAILS_WITH(pmc_write(BAD_ID, 1), EINVAL);
	FAILS_WITH(pmc_rw(BAD_ID, 1, &value), EINVAL);
	FAILS_WITH(pmc_set(BAD_ID, 1000), EINVAL);
	FAILS_WITH(pmc_attach(BAD_ID, 0), EINVAL);
	FAILS_WITH(pmc_detach(BAD_ID, 0), EINVAL);
	FAILS_WITH(pmc_capabilities(BAD_ID, &word), EINVAL);
	FAILS_WITH(pmc_width(BAD_ID, &word), EINVAL);
	FAILS_WITH(pmc_get_msr(BAD_ID, &word), EINVAL);
	FAILS_WITH(pmc_release(BAD_ID), EINVAL);
}

static void
logs(void)
{
	int fd, dir;

	/* No log yet. */
	FAILS_WITH(pmc_flush_logfile(), EINVAL);
	FAILS_WITH(pmc_writelog(1), EINVAL);
	FAILS_WITH(pmc_configure_logfile(-1), EINVAL);

	/* Descriptors a log cannot go to. */
	CHECK(fd = open("/dev/null", O_RDONLY));
	FAILS_WITH(pmc_configure_logfile(fd), EBADF);
	CHECK(close(fd));
	FAILS_WITH(pmc_configure_logfile(fd), EBADF);	/* closed */
	CHECK(dir = open("/", O_RDONLY));
	FAILS_WITH(pmc_configure_logfile(dir), EBADF);
	CHECK(close(dir));

	/* One log at a time. */
	CHECK(fd = open("/dev/null", O_WRONLY));
	CHECK(pmc_configure_logfile(fd));
	FAILS_WITH(pmc_configure_logfile(fd), EBUSY);
	CHECK(pmc_writelog(2));
	CHECK(pmc_flush_logfile());
	CHECK(pmc_configure_logfile(-1));
	FAILS_WITH(pmc_flush_logfile(), EINVAL);
	CHECK(close(fd));
}

int
main(void)
{
	const char *host, *event, *other_event;
	struct pmc_pmcinfo *pi;
	struct pmc_op_pmcallocate pa;
	char *no_program[] = { NULL, NULL };
	pmc_value_t value;
	pmc_id_t pmc, other, logged;
	uint32_t msr;
	int ncpu, sim, r;

	CHECK_PTR(host = pmc_host_name());
	sim = strcmp(host, "sim") == 0;
	event = sim ? "instructions" : "page-faults";
	other_event = sim ? "unhalted-cycles" : "page-faults";

	before_init();
	names();
	/* An id of a process that owns no PMC: ESRCH, as FreeBSD's pmc_find_pmc. */
	FAILS_WITH(pmc_start(BAD_ID), ESRCH);

	CHECK(pmc_init());
	CHECK(ncpu = pmc_ncpu());
	FAILS_WITH(pmc_npmc(-1), EINVAL);
	FAILS_WITH(pmc_npmc(ncpu), EINVAL);
	FAILS_WITH(pmc_pmcinfo(ncpu, &pi), EINVAL);

	null_pointers(event);
	bad_allocations(event);

	/* From here this process owns a PMC, and a bad id is EINVAL. */
	CHECK(pmc_allocate(event, PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0));
	bad_ids();

	/* No PMC monitors this process yet: ESRCH; then one does, but not this one: EINVAL. */
	FAILS_WITH(pmc_detach(pmc, 0), ESRCH);
	FAILS_WITH(pmc_get_msr(pmc, &msr), EINVAL);	/* not attached to its owner */
	FAILS_WITH(pmc_attach(pmc, -5), EINVAL);
	FAILS_WITH(pmc_attach(pmc, 999999), ESRCH);
	CHECK(pmc_attach(pmc, 0));
	FAILS_WITH(pmc_attach(pmc, 0), EEXIST);
	CHECK(pmc_allocate(other_event, PMC_MODE_TC, 0, PMC_CPU_ANY, &other, 0));
	FAILS_WITH(pmc_detach(other, 0), EINVAL);
	CHECK(pmc_release(other));
	CHECK(pmc_start(pmc));
	CHECK(pmc_start(pmc));				/* already running: no-op */
	FAILS_WITH(pmc_write(pmc, 5), EBUSY);
	FAILS_WITH(pmc_rw(pmc, 5, &value), EBUSY);
	FAILS_WITH(pmc_set(pmc, 5000), EBUSY);
	CHECK(pmc_stop(pmc));
	CHECK(pmc_write(pmc, 5));

	logs();

	/* A PMC that logs process exits needs a log to start. */
	CHECK(pmc_allocate(other_event, PMC_MODE_TC, PMC_F_LOG_PROCEXIT, PMC_CPU_ANY, &logged,
	    0));
	CHECK(pmc_attach(logged, 0));
	FAILS_WITH(pmc_start(logged), EDOOFUS);
	CHECK(pmc_release(logged));
	FAILS_WITH(pmc_release(logged), EINVAL);

	/* pmc_pmu_pmcallocate returns the errno value itself, as FreeBSD's. */
	memset(&pa, 0, sizeof(pa));
	r = pmc_pmu_pmcallocate("no-such-event-xyz", &pa);
	EXPECT(r == (pmc_pmu_enabled() ? ENOENT : EOPNOTSUPP));

	/* Launching what does not exist. */
	no_program[0] = sim ? "no-such-program" : "/no/such/program";
	FAILS_WITH(pmc_spawn(no_program), ENOENT);
	if (!sim)
		FAILS_WITH(pmc_resume(999999), ESRCH);

	CHECK(pmc_release(pmc));
	/* The last PMC is gone, and with it the owner: ESRCH again. */
	FAILS_WITH(pmc_release(pmc), ESRCH);

	printf("errors ok\n");
	return (0);
}
