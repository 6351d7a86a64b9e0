/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * pmc.h: pmc(3), the libpmc API, as FreeBSD's lib/libpmc/pmc.h declares it.  Every function has
 * FreeBSD's name, signature, return convention (0, or -1 with errno; NULL for the name
 * functions) and errno values; EDOOFUS and EPROGMISMATCH are defined by <sys/pmc.h> where the C
 * library lacks them.  A program written for FreeBSD's libpmc compiles and links unchanged
 * against hwpmc-rs's libpmc.so / libpmc.a.
 */

#ifndef _HWPMC_RS_PMC_H_
#define _HWPMC_RS_PMC_H_

#include <sys/types.h>
#include <stdint.h>
#include <sys/pmc.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Driver statistics (pmc_get_driver_stats); the layout of struct pmc_op_getdriverstats. */
struct pmc_driverstats {
	unsigned int	pm_intr_ignored;	/* interrupts ignored */
	unsigned int	pm_intr_processed;	/* interrupts processed */
	unsigned int	pm_intr_bufferfull;	/* interrupts with a full buffer */
	unsigned int	pm_syscalls;		/* system calls */
	unsigned int	pm_syscall_errors;	/* failed system calls */
	unsigned int	pm_buffer_requests;	/* log buffer requests */
	unsigned int	pm_buffer_requests_failed; /* failed log buffer requests */
	unsigned int	pm_log_sweeps;		/* sample buffer passes */
};

/* CPU information (pmc_cpuinfo); the layout of struct pmc_op_getcpuinfo. */
struct pmc_cpuinfo {
	enum pmc_cputype pm_cputype;	/* the kind of CPU */
	uint32_t	pm_ncpu;	/* CPUs (highest id + 1) */
	uint32_t	pm_npmc;	/* rows per CPU */
	uint32_t	pm_nclass;	/* entries used in pm_classes */
	struct pmc_classinfo pm_classes[PMC_CLASS_MAX];
};

/* The rows of one CPU (pmc_pmcinfo); the layout of struct pmc_op_getpmcinfo. */
struct pmc_pmcinfo {
	int32_t		pm_cpu;		/* CPU */
	__PMC_EXTENSION struct pmc_info pm_pmcs[]; /* pmc_npmc(cpu) rows */
};

int	pmc_allocate(const char *_ctrspec, enum pmc_mode _mode, uint32_t _flags,
	    int _cpu, pmc_id_t *_pmcid, uint64_t _count);
int	pmc_attach(pmc_id_t _pmcid, pid_t _pid);
int	pmc_capabilities(pmc_id_t _pmc, uint32_t *_caps);
int	pmc_configure_logfile(int _fd);
int	pmc_flush_logfile(void);
int	pmc_close_logfile(void);
int	pmc_detach(pmc_id_t _pmcid, pid_t _pid);
int	pmc_disable(int _cpu, int _pmc);
int	pmc_enable(int _cpu, int _pmc);
int	pmc_get_driver_stats(struct pmc_driverstats *_gms);
int	pmc_get_msr(pmc_id_t _pmc, uint32_t *_msr);
int	pmc_init(void);
int	pmc_read(pmc_id_t _pmc, pmc_value_t *_value);
int	pmc_release(pmc_id_t _pmc);
int	pmc_rw(pmc_id_t _pmc, pmc_value_t _newvalue, pmc_value_t *_oldvalue);
int	pmc_set(pmc_id_t _pmc, pmc_value_t _value);
int	pmc_start(pmc_id_t _pmc);
int	pmc_stop(pmc_id_t _pmc);
int	pmc_width(pmc_id_t _pmc, uint32_t *_width);
int	pmc_write(pmc_id_t _pmc, pmc_value_t _value);
int	pmc_writelog(uint32_t _udata);

int	pmc_ncpu(void);
int	pmc_npmc(int _cpu);
int	pmc_cpuinfo(const struct pmc_cpuinfo **_cpu_info);
int	pmc_pmcinfo(int _cpu, struct pmc_pmcinfo **_pmc_info);	/* free(3) the result */

const char	*pmc_name_of_capability(enum pmc_caps _c);
const char	*pmc_name_of_class(enum pmc_class _pc);
const char	*pmc_name_of_cputype(enum pmc_cputype _cp);
const char	*pmc_name_of_disposition(enum pmc_disp _pd);
const char	*pmc_name_of_event(enum pmc_event _pe);
const char	*pmc_name_of_mode(enum pmc_mode _pm);
const char	*pmc_name_of_state(enum pmc_state _ps);

int	pmc_event_names_of_class(enum pmc_class _cl, const char ***_eventnames,
	    int *_nevents);	/* free(3) *_eventnames */

/* The PMU event tables (pmu-events JSON) of the running CPU. */
int		pmc_pmu_enabled(void);
void		pmc_pmu_print_counters(const char *_event_name);
void		pmc_pmu_print_counter_desc(const char *_event_name);
void		pmc_pmu_print_counter_desc_long(const char *_event_name);
void		pmc_pmu_print_counter_full(const char *_event_name);
uint64_t	pmc_pmu_sample_rate_get(const char *_event_name);
int		pmc_pmu_pmcallocate(const char *_event_name,
		    struct pmc_op_pmcallocate *_pm);
const char	*pmc_pmu_event_get_by_idx(const char *_cpuid, int _idx);
int		pmc_pmu_idx_get_by_event(const char *_cpuid, const char *_event);

#ifdef __cplusplus
}
#endif

#endif /* !_HWPMC_RS_PMC_H_ */
