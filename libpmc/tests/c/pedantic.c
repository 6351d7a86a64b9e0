/*
 * Compiled (not linked) by libpmc/tests/headers.rs as ISO C and as C++ with every warning an
 * error: the headers must be clean, self-consistent and declare every pmc(3) and pmclog(3)
 * function with exactly FreeBSD's signature (each is assigned to a pointer of that type, which
 * fails to compile if a parameter or return type differs).
 */
#include <pmc.h>
#include <pmclog.h>
#include <sys/pmc.h>
#include <sys/pmclog.h>
/* The include guards: a second inclusion must be harmless. */
#include <pmc.h>
#include <pmclog.h>

#include <stddef.h>

typedef void (*any_function)(void);

struct signature {
	const char *name;
	any_function function;
};

/* Holds a pointer of FreeBSD's exact type, so the assignment checks the declaration. */
#define CHECK(name, ret, args) \
	static ret (*const check_##name) args = name

CHECK(pmc_allocate, int, (const char *, enum pmc_mode, uint32_t, int, pmc_id_t *, uint64_t));
CHECK(pmc_attach, int, (pmc_id_t, pid_t));
CHECK(pmc_capabilities, int, (pmc_id_t, uint32_t *));
CHECK(pmc_configure_logfile, int, (int));
CHECK(pmc_flush_logfile, int, (void));
CHECK(pmc_close_logfile, int, (void));
CHECK(pmc_detach, int, (pmc_id_t, pid_t));
CHECK(pmc_disable, int, (int, int));
CHECK(pmc_enable, int, (int, int));
CHECK(pmc_get_driver_stats, int, (struct pmc_driverstats *));
CHECK(pmc_get_msr, int, (pmc_id_t, uint32_t *));
CHECK(pmc_init, int, (void));
CHECK(pmc_read, int, (pmc_id_t, pmc_value_t *));
CHECK(pmc_release, int, (pmc_id_t));
CHECK(pmc_rw, int, (pmc_id_t, pmc_value_t, pmc_value_t *));
CHECK(pmc_set, int, (pmc_id_t, pmc_value_t));
CHECK(pmc_start, int, (pmc_id_t));
CHECK(pmc_stop, int, (pmc_id_t));
CHECK(pmc_width, int, (pmc_id_t, uint32_t *));
CHECK(pmc_write, int, (pmc_id_t, pmc_value_t));
CHECK(pmc_writelog, int, (uint32_t));
CHECK(pmc_ncpu, int, (void));
CHECK(pmc_npmc, int, (int));
CHECK(pmc_cpuinfo, int, (const struct pmc_cpuinfo **));
CHECK(pmc_pmcinfo, int, (int, struct pmc_pmcinfo **));
CHECK(pmc_name_of_capability, const char *, (enum pmc_caps));
CHECK(pmc_name_of_class, const char *, (enum pmc_class));
CHECK(pmc_name_of_cputype, const char *, (enum pmc_cputype));
CHECK(pmc_name_of_disposition, const char *, (enum pmc_disp));
CHECK(pmc_name_of_event, const char *, (enum pmc_event));
CHECK(pmc_name_of_mode, const char *, (enum pmc_mode));
CHECK(pmc_name_of_state, const char *, (enum pmc_state));
CHECK(pmc_event_names_of_class, int, (enum pmc_class, const char ***, int *));
CHECK(pmc_pmu_enabled, int, (void));
CHECK(pmc_pmu_print_counters, void, (const char *));
CHECK(pmc_pmu_print_counter_desc, void, (const char *));
CHECK(pmc_pmu_print_counter_desc_long, void, (const char *));
CHECK(pmc_pmu_print_counter_full, void, (const char *));
CHECK(pmc_pmu_sample_rate_get, uint64_t, (const char *));
CHECK(pmc_pmu_pmcallocate, int, (const char *, struct pmc_op_pmcallocate *));
CHECK(pmc_pmu_event_get_by_idx, const char *, (const char *, int));
CHECK(pmc_pmu_idx_get_by_event, int, (const char *, const char *));
CHECK(pmclog_open, void *, (int));
CHECK(pmclog_feed, int, (void *, char *, int));
CHECK(pmclog_read, int, (void *, struct pmclog_ev *));
CHECK(pmclog_close, void, (void *));

#define ENTRY(name) { #name, (any_function)check_##name }

const struct signature pedantic_signatures[] = {
	ENTRY(pmc_allocate), ENTRY(pmc_attach), ENTRY(pmc_capabilities),
	ENTRY(pmc_configure_logfile), ENTRY(pmc_flush_logfile), ENTRY(pmc_close_logfile),
	ENTRY(pmc_detach), ENTRY(pmc_disable), ENTRY(pmc_enable), ENTRY(pmc_get_driver_stats),
	ENTRY(pmc_get_msr), ENTRY(pmc_init), ENTRY(pmc_read), ENTRY(pmc_release), ENTRY(pmc_rw),
	ENTRY(pmc_set), ENTRY(pmc_start), ENTRY(pmc_stop), ENTRY(pmc_width), ENTRY(pmc_write),
	ENTRY(pmc_writelog), ENTRY(pmc_ncpu), ENTRY(pmc_npmc), ENTRY(pmc_cpuinfo),
	ENTRY(pmc_pmcinfo), ENTRY(pmc_name_of_capability), ENTRY(pmc_name_of_class),
	ENTRY(pmc_name_of_cputype), ENTRY(pmc_name_of_disposition), ENTRY(pmc_name_of_event),
	ENTRY(pmc_name_of_mode), ENTRY(pmc_name_of_state), ENTRY(pmc_event_names_of_class),
	ENTRY(pmc_pmu_enabled), ENTRY(pmc_pmu_print_counters), ENTRY(pmc_pmu_print_counter_desc),
	ENTRY(pmc_pmu_print_counter_desc_long), ENTRY(pmc_pmu_print_counter_full),
	ENTRY(pmc_pmu_sample_rate_get), ENTRY(pmc_pmu_pmcallocate), ENTRY(pmc_pmu_event_get_by_idx),
	ENTRY(pmc_pmu_idx_get_by_event), ENTRY(pmclog_open), ENTRY(pmclog_feed),
	ENTRY(pmclog_read), ENTRY(pmclog_close)
};

/* The macros, as a FreeBSD program uses them. */
int pedantic_macros(pmc_id_t id, enum pmc_mode mode, const struct pmclog_ev *ev);

int
pedantic_macros(pmc_id_t id, enum pmc_mode mode, const struct pmclog_ev *ev)
{
	struct pmc_op_pmcallocate pa;
	union pmclog_entry entry;
	uint32_t header = 0;
	int n = 0;

	pa.pm_cpu = PMC_CPU_ANY;
	pa.pm_md.pm_iap.pm_iap_config = IAP_EVSEL(0xC0) | IAP_UMASK(0) | IAP_USR | IAP_OS |
	    IAP_EDGE | IAP_INT | IAP_ANY | IAP_EN | IAP_INV | IAP_CMASK(1);
	pa.pm_md.pm_amd.pm_amd_sub_class = PMC_AMD_SUB_CLASS_L3_CACHE;
	n += (int)pa.pm_cpu + (int)pa.pm_md.pm_iap.pm_iap_config;
	n += (int)(PMC_ID_MAKE_ID(0xFFF, PMC_MODE_TC, PMC_CLASS_IAP, 3) == 0xFFF30703);
	n += (int)PMC_ID_TO_ROWINDEX(id) + (int)PMC_ID_TO_CLASS(id) + (int)PMC_ID_TO_MODE(id) +
	    (int)PMC_ID_TO_CPU(id) + (int)(id == PMC_ID_INVALID);
	n += PMC_IS_COUNTING_MODE(mode) + PMC_IS_SYSTEM_MODE(mode) + PMC_IS_SAMPLING_MODE(mode) +
	    PMC_IS_VIRTUAL_MODE(mode);
	n += (int)(PMC_VERSION >> 24) + EDOOFUS + EPROGMISMATCH;
	n += (int)(ev->pl_type == PMCLOG_TYPE_CALLCHAIN && ev->pl_state == PMCLOG_OK);
	n += (int)PMC_CALLCHAIN_CPUFLAGS_TO_CPU(ev->pl_u.pl_cc.pl_cpuflags) +
	    (int)PMC_CALLCHAIN_CPUFLAGS_TO_USERMODE(ev->pl_u.pl_cc.pl_cpuflags) +
	    (int)PMC_CALLCHAIN_TO_CPUFLAGS(1U, PMC_CC_F_MULTIPART);
	n += (int)(PMCLOG_HEADER_CHECK_MAGIC(header) + PMCLOG_HEADER_TO_TYPE(header) +
	    PMCLOG_HEADER_TO_LENGTH(header));
	n += (int)sizeof(entry) + PMCLOG_FD_NONE + (int)sizeof(struct pmc_pmcinfo);
	return (n);
}
