/*
 * The PMU event functions on the simulator host (a Skylake PMU): pmc_pmu_pmcallocate fills a
 * PMC_F_EV_PMU request as FreeBSD's libpmc does, table indexes and names map both ways, the
 * print functions print, and a table event allocated by name counts exactly ("hot-cold" retires
 * 1 000 000 branches).
 *
 * Run with PMC_HOST=sim.  Prints the lines of pmc_pmu_print_* and "pmu ok".
 */
#include <sys/types.h>

#include <stdint.h>

#include <pmc.h>

#include "client_check.h"

#define BRANCHES "BR_INST_RETIRED.ALL_BRANCHES"

static void
fill_request(void)
{
	struct pmc_op_pmcallocate pa;
	uint32_t config;
	const char *name;

	memset(&pa, 0, sizeof(pa));
	pa.pm_mode = PMC_MODE_TC;
	pa.pm_cpu = PMC_CPU_ANY;
	pa.pm_caps = PMC_CAP_USER;			/* user mode only */
	pa.pm_count = 7;
	EXPECT(pmc_pmu_pmcallocate(BRANCHES, &pa) == 0);
	EXPECT(pa.pm_class == PMC_CLASS_IAP);
	EXPECT(pa.pm_flags & PMC_F_EV_PMU);
	EXPECT(pa.pm_mode == PMC_MODE_TC && pa.pm_cpu == (uint32_t)PMC_CPU_ANY && pa.pm_count == 7);
	config = pa.pm_md.pm_iap.pm_iap_config;
	EXPECT((config & 0xFF) == 0xC4);
	EXPECT(config & IAP_USR);
	EXPECT((config & IAP_OS) == 0);
	EXPECT(pa.pm_caps & PMC_CAP_READ && pa.pm_caps & PMC_CAP_WRITE);
	EXPECT(pa.pm_caps & PMC_CAP_USER && (pa.pm_caps & PMC_CAP_SYSTEM) == 0);

	/* pm_ev is the event's index in this CPU's table. */
	CHECK_PTR(name = pmc_pmu_event_get_by_idx(NULL, (int)pa.pm_ev));
	EXPECT(strcmp(name, BRANCHES) == 0);
	EXPECT(pmc_pmu_idx_get_by_event(NULL, "br_inst_retired.all_branches") == (int)pa.pm_ev);
	EXPECT(pmc_pmu_idx_get_by_event(NULL, "branches") == (int)pa.pm_ev);	/* alias */
	FAILS_WITH(pmc_pmu_idx_get_by_event(NULL, "NO_SUCH.EVENT"), ENOENT);
	NULL_WITH(pmc_pmu_event_get_by_idx(NULL, -1), EINVAL);

	/* Not PMU events. */
	memset(&pa, 0, sizeof(pa));
	EXPECT(pmc_pmu_pmcallocate("NO_SUCH.EVENT", &pa) == ENOENT);
	EXPECT(pmc_pmu_pmcallocate("TSC", &pa) == ENOENT);
}

static void
count_branches(void)
{
	char *argv[] = { "hot-cold", NULL };
	pmc_id_t pmc;
	pmc_value_t branches;
	pid_t pid;
	int status;

	CHECK(pmc_allocate(BRANCHES ",usr", PMC_MODE_TC, 0, PMC_CPU_ANY, &pmc, 0));
	EXPECT(PMC_ID_TO_CLASS(pmc) == PMC_CLASS_IAP);
	CHECK(pid = pmc_spawn(argv));
	CHECK(pmc_attach(pmc, pid));
	CHECK(pmc_start(pmc));
	CHECK(pmc_resume(pid));
	CHECK(pmc_wait(pid, &status));
	CHECK(pmc_read(pmc, &branches));
	CHECK(pmc_release(pmc));
	printf("branches %ju\n", (uintmax_t)branches);
	EXPECT(branches == 1000000);
}

int
main(void)
{
	EXPECT(strcmp(pmc_host_name(), "sim") == 0);
	CHECK(pmc_init());
	EXPECT(pmc_pmu_enabled() == 1);
	EXPECT(pmc_pmu_sample_rate_get(BRANCHES) > 0);
	EXPECT(pmc_pmu_sample_rate_get(NULL) == 65536);
	EXPECT(pmc_pmu_sample_rate_get("no-such-event") == 65536);

	fill_request();
	count_branches();

	printf("-- counters\n");
	pmc_pmu_print_counters("br_inst_retired.all_branches");
	printf("-- desc\n");
	pmc_pmu_print_counter_desc(BRANCHES);
	printf("-- desc_long\n");
	pmc_pmu_print_counter_desc_long(BRANCHES);
	printf("-- full\n");
	pmc_pmu_print_counter_full(BRANCHES);
	printf("pmu ok\n");
	return (0);
}
