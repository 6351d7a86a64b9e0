/*
 * Prints the layout of every structure and the value of every constant of libpmc's C headers,
 * one fact a line, for libpmc/tests/headers.rs to compare with the Rust definitions:
 *
 *	sizeof <struct> <bytes>
 *	offsetof <struct>.<member> <bytes>
 *	fieldsize <struct>.<member> <bytes>
 *	signed <struct>.<member> 0|1		(scalar members)
 *	elemsize <struct>.<member> <bytes>	(flexible array members)
 *	const <NAME> <value as uint32_t>
 *	id ...					(PMC id macros)
 *	mode ...				(PMC_IS_*_MODE macros)
 *	strerror <NAME> <text>
 *
 * Compiled as GNU C (it uses __typeof__ to find a member's signedness).
 */
#include <pmc.h>
#include <pmclog.h>
#include <sys/pmclog.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SIZEOF(name, type) \
	printf("sizeof %s %zu\n", name, sizeof(type))
#define MEMBER(name, type, m) \
	printf("offsetof %s.%s %zu\nfieldsize %s.%s %zu\n", name, #m, offsetof(type, m), \
	    name, #m, sizeof(((type *)0)->m))
#define SCALAR(name, type, m) do { \
	MEMBER(name, type, m); \
	printf("signed %s.%s %d\n", name, #m, (int)((__typeof__(((type *)0)->m))-1 < 0)); \
} while (0)
#define FLEX(name, type, m) \
	printf("offsetof %s.%s %zu\nelemsize %s.%s %zu\n", name, #m, offsetof(type, m), \
	    name, #m, sizeof(((type *)0)->m[0]))
#define CONST(X) \
	printf("const %s %lu\n", #X, (unsigned long)(uint32_t)(X))

static void
sys_pmc_structs(void)
{
#define T struct pmc_op_pmcallocate
#define N "pmc_op_pmcallocate"
	SIZEOF(N, T);
	SCALAR(N, T, pm_caps);
	SCALAR(N, T, pm_cpu);
	SCALAR(N, T, pm_class);
	SCALAR(N, T, pm_ev);
	SCALAR(N, T, pm_flags);
	SCALAR(N, T, pm_mode);
	SCALAR(N, T, pm_pmcid);
	SCALAR(N, T, pm_count);
	MEMBER(N, T, pm_md);
#undef T
#undef N

#define T union pmc_md_op_pmcallocate
#define N "pmc_md_op_pmcallocate"
	SIZEOF(N, T);
	MEMBER(N, T, pm_amd);
	SCALAR(N, T, pm_amd.pm_amd_config);
	SCALAR(N, T, pm_amd.pm_amd_sub_class);
	MEMBER(N, T, pm_ibs);
	SCALAR(N, T, pm_ibs.ibs_flag);
	SCALAR(N, T, pm_ibs.ibs_type);
	SCALAR(N, T, pm_ibs.ibs_ctl);
	SCALAR(N, T, pm_ibs.ibs_ctl2);
	MEMBER(N, T, pm_iap);
	SCALAR(N, T, pm_iap.pm_iap_config);
	SCALAR(N, T, pm_iap.pm_iap_rsp);
	MEMBER(N, T, pm_ucf);
	SCALAR(N, T, pm_ucf.pm_ucf_flags);
	MEMBER(N, T, pm_ucp);
	SCALAR(N, T, pm_ucp.pm_ucp_config);
	MEMBER(N, T, __pad);
#undef T
#undef N

#define T struct pmc_op_pmcadmin
#define N "pmc_op_pmcadmin"
	SIZEOF(N, T);
	SCALAR(N, T, pm_cpu);
	SCALAR(N, T, pm_flags);
	SCALAR(N, T, pm_pmc);
	SCALAR(N, T, pm_state);
#undef T
#undef N

#define T struct pmc_op_pmcattach
#define N "pmc_op_pmcattach"
	SIZEOF(N, T);
	SCALAR(N, T, pm_pmc);
	SCALAR(N, T, pm_pid);
#undef T
#undef N

#define T struct pmc_op_pmcsetcount
#define N "pmc_op_pmcsetcount"
	SIZEOF(N, T);
	SCALAR(N, T, pm_count);
	SCALAR(N, T, pm_pmcid);
#undef T
#undef N

#define T struct pmc_op_pmcrw
#define N "pmc_op_pmcrw"
	SIZEOF(N, T);
	SCALAR(N, T, pm_flags);
	SCALAR(N, T, pm_pmcid);
	SCALAR(N, T, pm_value);
#undef T
#undef N

#define T struct pmc_op_pmcreadtimes
#define N "pmc_op_pmcreadtimes"
	SIZEOF(N, T);
	SCALAR(N, T, pm_pmcid);
	SCALAR(N, T, pm_value);
	SCALAR(N, T, pm_enabled);
	SCALAR(N, T, pm_running);
#undef T
#undef N

#define T struct pmc_info
#define N "pmc_info"
	SIZEOF(N, T);
	MEMBER(N, T, pm_name);
	SCALAR(N, T, pm_class);
	SCALAR(N, T, pm_enabled);
	SCALAR(N, T, pm_rowdisp);
	SCALAR(N, T, pm_ownerpid);
	SCALAR(N, T, pm_mode);
	SCALAR(N, T, pm_event);
	SCALAR(N, T, pm_flags);
	SCALAR(N, T, pm_reloadcount);
#undef T
#undef N

#define T struct pmc_op_getpmcinfo
#define N "pmc_op_getpmcinfo"
	SIZEOF(N, T);
	SCALAR(N, T, pm_cpu);
	FLEX(N, T, pm_pmcs);
#undef T
#undef N

#define T struct pmc_classinfo
#define N "pmc_classinfo"
	SIZEOF(N, T);
	SCALAR(N, T, pm_class);
	SCALAR(N, T, pm_caps);
	SCALAR(N, T, pm_width);
	SCALAR(N, T, pm_num);
#undef T
#undef N

#define T struct pmc_op_getcpuinfo
#define N "pmc_op_getcpuinfo"
	SIZEOF(N, T);
	SCALAR(N, T, pm_cputype);
	SCALAR(N, T, pm_ncpu);
	SCALAR(N, T, pm_npmc);
	SCALAR(N, T, pm_nclass);
	MEMBER(N, T, pm_classes);
#undef T
#undef N

#define T struct pmc_op_configurelog
#define N "pmc_op_configurelog"
	SIZEOF(N, T);
	SCALAR(N, T, pm_flags);
	SCALAR(N, T, pm_logfd);
#undef T
#undef N

#define T struct pmc_op_getdriverstats
#define N "pmc_op_getdriverstats"
	SIZEOF(N, T);
	SCALAR(N, T, pm_intr_ignored);
	SCALAR(N, T, pm_intr_processed);
	SCALAR(N, T, pm_intr_bufferfull);
	SCALAR(N, T, pm_syscalls);
	SCALAR(N, T, pm_syscall_errors);
	SCALAR(N, T, pm_buffer_requests);
	SCALAR(N, T, pm_buffer_requests_failed);
	SCALAR(N, T, pm_log_sweeps);
#undef T
#undef N

#define T struct pmc_op_simple
#define N "pmc_op_simple"
	SIZEOF(N, T);
	SCALAR(N, T, pm_pmcid);
#undef T
#undef N

#define T struct pmc_op_writelog
#define N "pmc_op_writelog"
	SIZEOF(N, T);
	SCALAR(N, T, pm_userdata);
#undef T
#undef N

#define T struct pmc_op_getmsr
#define N "pmc_op_getmsr"
	SIZEOF(N, T);
	SCALAR(N, T, pm_msr);
	SCALAR(N, T, pm_pmcid);
#undef T
#undef N

#define T struct pmc_dyn_event_descr
#define N "pmc_dyn_event_descr"
	SIZEOF(N, T);
	MEMBER(N, T, pm_ev_name);
	SCALAR(N, T, pm_ev_code);
#undef T
#undef N

#define T struct pmc_op_getdyneventinfo
#define N "pmc_op_getdyneventinfo"
	SIZEOF(N, T);
	SCALAR(N, T, pm_class);
	SCALAR(N, T, pm_nevent);
	MEMBER(N, T, pm_events);
#undef T
#undef N

#define T struct pmc_op_caps
#define N "pmc_op_caps"
	SIZEOF(N, T);
	SCALAR(N, T, pm_pmcid);
	SCALAR(N, T, pm_caps);
#undef T
#undef N
}

static void
pmc_structs(void)
{
#define T struct pmc_driverstats
#define N "pmc_driverstats"
	SIZEOF(N, T);
	SCALAR(N, T, pm_intr_ignored);
	SCALAR(N, T, pm_intr_processed);
	SCALAR(N, T, pm_intr_bufferfull);
	SCALAR(N, T, pm_syscalls);
	SCALAR(N, T, pm_syscall_errors);
	SCALAR(N, T, pm_buffer_requests);
	SCALAR(N, T, pm_buffer_requests_failed);
	SCALAR(N, T, pm_log_sweeps);
#undef T
#undef N

#define T struct pmc_cpuinfo
#define N "pmc_cpuinfo"
	SIZEOF(N, T);
	SCALAR(N, T, pm_cputype);
	SCALAR(N, T, pm_ncpu);
	SCALAR(N, T, pm_npmc);
	SCALAR(N, T, pm_nclass);
	MEMBER(N, T, pm_classes);
#undef T
#undef N

#define T struct pmc_pmcinfo
#define N "pmc_pmcinfo"
	SIZEOF(N, T);
	SCALAR(N, T, pm_cpu);
	FLEX(N, T, pm_pmcs);
#undef T
#undef N
}

static void
pmclog_structs(void)
{
#define T struct pmclog_ev
#define N "pmclog_ev"
	SIZEOF(N, T);
	SCALAR(N, T, pl_state);
	SCALAR(N, T, pl_offset);
	SCALAR(N, T, pl_count);
	MEMBER(N, T, pl_ts);
	SCALAR(N, T, pl_type);
	MEMBER(N, T, pl_data);
	SCALAR(N, T, pl_len);
	MEMBER(N, T, pl_u);
#undef T
#undef N

#define T union pmclog_ev_u
#define N "pmclog_ev_u"
	SIZEOF(N, T);
	MEMBER(N, T, pl_cc);
	MEMBER(N, T, pl_cl);
	MEMBER(N, T, pl_dn);
	MEMBER(N, T, pl_i);
	MEMBER(N, T, pl_mi);
	MEMBER(N, T, pl_mo);
	MEMBER(N, T, pl_a);
	MEMBER(N, T, pl_ad);
	MEMBER(N, T, pl_t);
	MEMBER(N, T, pl_d);
	MEMBER(N, T, pl_c);
	MEMBER(N, T, pl_pc);
	MEMBER(N, T, pl_x);
	MEMBER(N, T, pl_e);
	MEMBER(N, T, pl_f);
	MEMBER(N, T, pl_se);
	MEMBER(N, T, pl_tc);
	MEMBER(N, T, pl_te);
	MEMBER(N, T, pl_u);
#undef T
#undef N

#define T struct pmclog_ev_callchain
#define N "pmclog_ev_callchain"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_tid);
	SCALAR(N, T, pl_pmcid);
	SCALAR(N, T, pl_cpuflags);
	SCALAR(N, T, pl_cpuflags2);
	SCALAR(N, T, pl_npc);
	MEMBER(N, T, pl_pc);
#undef T
#undef N

	SIZEOF("pmclog_ev_closelog", struct pmclog_ev_closelog);
	SIZEOF("pmclog_ev_dropnotify", struct pmclog_ev_dropnotify);

#define T struct pmclog_ev_initialize
#define N "pmclog_ev_initialize"
	SIZEOF(N, T);
	SCALAR(N, T, pl_version);
	SCALAR(N, T, pl_arch);
	SCALAR(N, T, pl_tsc_freq);
	MEMBER(N, T, pl_ts);
	MEMBER(N, T, pl_cpuid);
#undef T
#undef N

#define T struct pmclog_ev_map_in
#define N "pmclog_ev_map_in"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_start);
	MEMBER(N, T, pl_pathname);
#undef T
#undef N

#define T struct pmclog_ev_map_out
#define N "pmclog_ev_map_out"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_start);
	SCALAR(N, T, pl_end);
#undef T
#undef N

#define T struct pmclog_ev_pmcallocate
#define N "pmclog_ev_pmcallocate"
	SIZEOF(N, T);
	MEMBER(N, T, pl_evname);
	SCALAR(N, T, pl_rate);
	SCALAR(N, T, pl_event);
	SCALAR(N, T, pl_flags);
	SCALAR(N, T, pl_pmcid);
#undef T
#undef N

#define T struct pmclog_ev_pmcallocatedyn
#define N "pmclog_ev_pmcallocatedyn"
	SIZEOF(N, T);
	MEMBER(N, T, pl_evname);
	SCALAR(N, T, pl_event);
	SCALAR(N, T, pl_flags);
	SCALAR(N, T, pl_pmcid);
#undef T
#undef N

#define T struct pmclog_ev_pmcattach
#define N "pmclog_ev_pmcattach"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pmcid);
	SCALAR(N, T, pl_pid);
	MEMBER(N, T, pl_pathname);
#undef T
#undef N

#define T struct pmclog_ev_pmcdetach
#define N "pmclog_ev_pmcdetach"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pmcid);
	SCALAR(N, T, pl_pid);
#undef T
#undef N

#define T struct pmclog_ev_proccsw
#define N "pmclog_ev_proccsw"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_tid);
	SCALAR(N, T, pl_pmcid);
	SCALAR(N, T, pl_value);
#undef T
#undef N

#define T struct pmclog_ev_proccreate
#define N "pmclog_ev_proccreate"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_flags);
	MEMBER(N, T, pl_pcomm);
#undef T
#undef N

#define T struct pmclog_ev_procexec
#define N "pmclog_ev_procexec"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_pmcid);
	SCALAR(N, T, pl_baseaddr);
	SCALAR(N, T, pl_dynaddr);
	MEMBER(N, T, pl_pathname);
#undef T
#undef N

#define T struct pmclog_ev_procexit
#define N "pmclog_ev_procexit"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_pmcid);
	SCALAR(N, T, pl_value);
#undef T
#undef N

#define T struct pmclog_ev_procfork
#define N "pmclog_ev_procfork"
	SIZEOF(N, T);
	SCALAR(N, T, pl_oldpid);
	SCALAR(N, T, pl_newpid);
#undef T
#undef N

#define T struct pmclog_ev_sysexit
#define N "pmclog_ev_sysexit"
	SIZEOF(N, T);
	SCALAR(N, T, pl_pid);
#undef T
#undef N

#define T struct pmclog_ev_threadcreate
#define N "pmclog_ev_threadcreate"
	SIZEOF(N, T);
	SCALAR(N, T, pl_tid);
	SCALAR(N, T, pl_pid);
	SCALAR(N, T, pl_flags);
	MEMBER(N, T, pl_tdname);
#undef T
#undef N

#define T struct pmclog_ev_threadexit
#define N "pmclog_ev_threadexit"
	SIZEOF(N, T);
	SCALAR(N, T, pl_tid);
#undef T
#undef N

#define T struct pmclog_ev_userdata
#define N "pmclog_ev_userdata"
	SIZEOF(N, T);
	SCALAR(N, T, pl_userdata);
#undef T
#undef N
}

static void
constants(void)
{
	CONST(PMC_VERSION_MAJOR);
	CONST(PMC_VERSION_MINOR);
	CONST(PMC_VERSION_PATCH);
	CONST(PMC_VERSION);

	CONST(PMC_OP_CONFIGURELOG);
	CONST(PMC_OP_FLUSHLOG);
	CONST(PMC_OP_GETCPUINFO);
	CONST(PMC_OP_GETDRIVERSTATS);
	CONST(PMC_OP_GETMODULEVERSION);
	CONST(PMC_OP_GETPMCINFO);
	CONST(PMC_OP_PMCADMIN);
	CONST(PMC_OP_PMCALLOCATE);
	CONST(PMC_OP_PMCATTACH);
	CONST(PMC_OP_PMCDETACH);
	CONST(PMC_OP_PMCGETMSR);
	CONST(PMC_OP_PMCRELEASE);
	CONST(PMC_OP_PMCRW);
	CONST(PMC_OP_PMCSETCOUNT);
	CONST(PMC_OP_PMCSTART);
	CONST(PMC_OP_PMCSTOP);
	CONST(PMC_OP_WRITELOG);
	CONST(PMC_OP_CLOSELOG);
	CONST(PMC_OP_GETDYNEVENTINFO);
	CONST(PMC_OP_GETCAPS);
	CONST(PMC_OP_PMCREADTIMES);

	CONST(PMC_CLASS_TSC);
	CONST(PMC_CLASS_K8);
	CONST(PMC_CLASS_IBS);
	CONST(PMC_CLASS_IAF);
	CONST(PMC_CLASS_IAP);
	CONST(PMC_CLASS_UCF);
	CONST(PMC_CLASS_UCP);
	CONST(PMC_CLASS_PPC7450);
	CONST(PMC_CLASS_PPC970);
	CONST(PMC_CLASS_SOFT);
	CONST(PMC_CLASS_ARMV7);
	CONST(PMC_CLASS_ARMV8);
	CONST(PMC_CLASS_E500);
	CONST(PMC_CLASS_POWER8);
	CONST(PMC_CLASS_DMC620_PMU_CD2);
	CONST(PMC_CLASS_DMC620_PMU_C);
	CONST(PMC_CLASS_CMN600_PMU);
	CONST(PMC_CLASS_RAPL);
	CONST(PMC_CLASS_PERF);
	CONST(PMC_CLASS_FIRST);
	CONST(PMC_CLASS_LAST);

	CONST(PMC_MODE_SS);
	CONST(PMC_MODE_SC);
	CONST(PMC_MODE_TS);
	CONST(PMC_MODE_TC);
	CONST(PMC_MODE_FIRST);
	CONST(PMC_MODE_LAST);

	CONST(PMC_STATE_DISABLED);
	CONST(PMC_STATE_FREE);
	CONST(PMC_STATE_ALLOCATED);
	CONST(PMC_STATE_STOPPED);
	CONST(PMC_STATE_RUNNING);
	CONST(PMC_STATE_DELETED);
	CONST(PMC_STATE_MAX);
	CONST(PMC_STATE_FIRST);
	CONST(PMC_STATE_LAST);

	CONST(PMC_DISP_STANDALONE);
	CONST(PMC_DISP_FREE);
	CONST(PMC_DISP_THREAD);
	CONST(PMC_DISP_UNKNOWN);
	CONST(PMC_DISP_FIRST);
	CONST(PMC_DISP_LAST);

	CONST(PMC_CAP_INTERRUPT);
	CONST(PMC_CAP_USER);
	CONST(PMC_CAP_SYSTEM);
	CONST(PMC_CAP_EDGE);
	CONST(PMC_CAP_THRESHOLD);
	CONST(PMC_CAP_READ);
	CONST(PMC_CAP_WRITE);
	CONST(PMC_CAP_INVERT);
	CONST(PMC_CAP_QUALIFIER);
	CONST(PMC_CAP_PRECISE);
	CONST(PMC_CAP_TAGGING);
	CONST(PMC_CAP_CASCADE);
	CONST(PMC_CAP_SYSWIDE);
	CONST(PMC_CAP_DOMWIDE);
	CONST(PMC_CAP_FIRST);
	CONST(PMC_CAP_LAST);

	CONST(PMC_F_UNUSED1);
	CONST(PMC_F_DESCENDANTS);
	CONST(PMC_F_LOG_PROCCSW);
	CONST(PMC_F_LOG_PROCEXIT);
	CONST(PMC_F_NEWVALUE);
	CONST(PMC_F_OLDVALUE);
	CONST(PMC_F_CALLCHAIN);
	CONST(PMC_F_USERCALLCHAIN);
	CONST(PMC_F_EV_PMU);
	CONST(PMC_F_MULTIPLEX);
	CONST(PMC_F_GROUP_LEADER);
	CONST(PMC_F_GROUP_MEMBER);
	CONST(PMC_F_CORE_TYPE_CORE);
	CONST(PMC_F_CORE_TYPE_ATOM);
	CONST(PMC_F_THREAD);
	CONST(PMC_F_THREAD_INHERIT);
	CONST(PMC_F_ATTACHED_TO_OWNER);
	CONST(PMC_F_NEEDS_LOGFILE);
	CONST(PMC_F_ATTACH_DONE);

	CONST(PMC_CC_F_USERSPACE);
	CONST(PMC_CC_F_MULTIPART);

	CONST(PMC_CPU_AMD_K8);
	CONST(PMC_CPU_INTEL_CORE);
	CONST(PMC_CPU_INTEL_CORE2);
	CONST(PMC_CPU_INTEL_CORE2EXTREME);
	CONST(PMC_CPU_INTEL_ATOM);
	CONST(PMC_CPU_INTEL_COREI7);
	CONST(PMC_CPU_INTEL_WESTMERE);
	CONST(PMC_CPU_INTEL_SANDYBRIDGE);
	CONST(PMC_CPU_INTEL_IVYBRIDGE);
	CONST(PMC_CPU_INTEL_SANDYBRIDGE_XEON);
	CONST(PMC_CPU_INTEL_IVYBRIDGE_XEON);
	CONST(PMC_CPU_INTEL_HASWELL);
	CONST(PMC_CPU_INTEL_ATOM_SILVERMONT);
	CONST(PMC_CPU_INTEL_NEHALEM_EX);
	CONST(PMC_CPU_INTEL_WESTMERE_EX);
	CONST(PMC_CPU_INTEL_HASWELL_XEON);
	CONST(PMC_CPU_INTEL_BROADWELL);
	CONST(PMC_CPU_INTEL_BROADWELL_XEON);
	CONST(PMC_CPU_INTEL_SKYLAKE);
	CONST(PMC_CPU_INTEL_SKYLAKE_XEON);
	CONST(PMC_CPU_INTEL_ATOM_GOLDMONT);
	CONST(PMC_CPU_INTEL_ICELAKE);
	CONST(PMC_CPU_INTEL_ICELAKE_XEON);
	CONST(PMC_CPU_INTEL_ALDERLAKE);
	CONST(PMC_CPU_INTEL_ATOM_GOLDMONT_P);
	CONST(PMC_CPU_INTEL_ATOM_TREMONT);
	CONST(PMC_CPU_INTEL_EMERALD_RAPIDS);
	CONST(PMC_CPU_INTEL_ALDERLAKEN);
	CONST(PMC_CPU_INTEL_GRANITE_RAPIDS);
	CONST(PMC_CPU_INTEL_METEOR_LAKE);
	CONST(PMC_CPU_INTEL_SAPPHIRE_RAPIDS);
	CONST(PMC_CPU_PPC_7450);
	CONST(PMC_CPU_PPC_E500);
	CONST(PMC_CPU_PPC_970);
	CONST(PMC_CPU_PPC_POWER8);
	CONST(PMC_CPU_GENERIC);
	CONST(PMC_CPU_ARMV7_CORTEX_A5);
	CONST(PMC_CPU_ARMV7_CORTEX_A7);
	CONST(PMC_CPU_ARMV7_CORTEX_A8);
	CONST(PMC_CPU_ARMV7_CORTEX_A9);
	CONST(PMC_CPU_ARMV7_CORTEX_A15);
	CONST(PMC_CPU_ARMV7_CORTEX_A17);
	CONST(PMC_CPU_ARMV8_CORTEX_A53);
	CONST(PMC_CPU_ARMV8_CORTEX_A57);
	CONST(PMC_CPU_ARMV8_CORTEX_A76);
	CONST(PMC_CPU_FIRST);
	CONST(PMC_CPU_LAST);

	CONST(PMC_EV_TSC_TSC);
	CONST(PMC_EV_IBS_FETCH);
	CONST(PMC_EV_IBS_OP);
#define K8(E) CONST(PMC_EV_K8_##E)
	K8(FP_DISPATCHED_FPU_OPS);
	K8(FP_CYCLES_WITH_NO_FPU_OPS_RETIRED);
	K8(FP_DISPATCHED_FPU_FAST_FLAG_OPS);
	K8(LS_SEGMENT_REGISTER_LOAD);
	K8(LS_MICROARCHITECTURAL_RESYNC_BY_SELF_MODIFYING_CODE);
	K8(LS_MICROARCHITECTURAL_RESYNC_BY_SNOOP);
	K8(LS_BUFFER2_FULL);
	K8(LS_LOCKED_OPERATION);
	K8(LS_MICROARCHITECTURAL_LATE_CANCEL);
	K8(LS_RETIRED_CFLUSH_INSTRUCTIONS);
	K8(LS_RETIRED_CPUID_INSTRUCTIONS);
	K8(DC_ACCESS);
	K8(DC_MISS);
	K8(DC_REFILL_FROM_L2);
	K8(DC_REFILL_FROM_SYSTEM);
	K8(DC_COPYBACK);
	K8(DC_L1_DTLB_MISS_AND_L2_DTLB_HIT);
	K8(DC_L1_DTLB_MISS_AND_L2_DTLB_MISS);
	K8(DC_MISALIGNED_DATA_REFERENCE);
	K8(DC_MICROARCHITECTURAL_LATE_CANCEL);
	K8(DC_MICROARCHITECTURAL_EARLY_CANCEL);
	K8(DC_ONE_BIT_ECC_ERROR);
	K8(DC_DISPATCHED_PREFETCH_INSTRUCTIONS);
	K8(DC_DCACHE_ACCESSES_BY_LOCKS);
	K8(BU_CPU_CLK_UNHALTED);
	K8(BU_INTERNAL_L2_REQUEST);
	K8(BU_FILL_REQUEST_L2_MISS);
	K8(BU_FILL_INTO_L2);
	K8(IC_FETCH);
	K8(IC_MISS);
	K8(IC_REFILL_FROM_L2);
	K8(IC_REFILL_FROM_SYSTEM);
	K8(IC_L1_ITLB_MISS_AND_L2_ITLB_HIT);
	K8(IC_L1_ITLB_MISS_AND_L2_ITLB_MISS);
	K8(IC_MICROARCHITECTURAL_RESYNC_BY_SNOOP);
	K8(IC_INSTRUCTION_FETCH_STALL);
	K8(IC_RETURN_STACK_HIT);
	K8(IC_RETURN_STACK_OVERFLOW);
	K8(FR_RETIRED_X86_INSTRUCTIONS);
	K8(FR_RETIRED_UOPS);
	K8(FR_RETIRED_BRANCHES);
	K8(FR_RETIRED_BRANCHES_MISPREDICTED);
	K8(FR_RETIRED_TAKEN_BRANCHES);
	K8(FR_RETIRED_TAKEN_BRANCHES_MISPREDICTED);
	K8(FR_RETIRED_FAR_CONTROL_TRANSFERS);
	K8(FR_RETIRED_RESYNCS);
	K8(FR_RETIRED_NEAR_RETURNS);
	K8(FR_RETIRED_NEAR_RETURNS_MISPREDICTED);
	K8(FR_RETIRED_TAKEN_BRANCHES_MISPREDICTED_BY_ADDR_MISCOMPARE);
	K8(FR_RETIRED_FPU_INSTRUCTIONS);
	K8(FR_RETIRED_FASTPATH_DOUBLE_OP_INSTRUCTIONS);
	K8(FR_INTERRUPTS_MASKED_CYCLES);
	K8(FR_INTERRUPTS_MASKED_WHILE_PENDING_CYCLES);
	K8(FR_TAKEN_HARDWARE_INTERRUPTS);
	K8(FR_DECODER_EMPTY);
	K8(FR_DISPATCH_STALLS);
	K8(FR_DISPATCH_STALL_FROM_BRANCH_ABORT_TO_RETIRE);
	K8(FR_DISPATCH_STALL_FOR_SERIALIZATION);
	K8(FR_DISPATCH_STALL_FOR_SEGMENT_LOAD);
	K8(FR_DISPATCH_STALL_WHEN_REORDER_BUFFER_IS_FULL);
	K8(FR_DISPATCH_STALL_WHEN_RESERVATION_STATIONS_ARE_FULL);
	K8(FR_DISPATCH_STALL_WHEN_FPU_IS_FULL);
	K8(FR_DISPATCH_STALL_WHEN_LS_IS_FULL);
	K8(FR_DISPATCH_STALL_WHEN_WAITING_FOR_ALL_TO_BE_QUIET);
	K8(FR_DISPATCH_STALL_WHEN_FAR_XFER_OR_RESYNC_BRANCH_PENDING);
	K8(FR_FPU_EXCEPTIONS);
	K8(FR_NUMBER_OF_BREAKPOINTS_FOR_DR0);
	K8(FR_NUMBER_OF_BREAKPOINTS_FOR_DR1);
	K8(FR_NUMBER_OF_BREAKPOINTS_FOR_DR2);
	K8(FR_NUMBER_OF_BREAKPOINTS_FOR_DR3);
	K8(NB_MEMORY_CONTROLLER_PAGE_ACCESS_EVENT);
	K8(NB_MEMORY_CONTROLLER_PAGE_TABLE_OVERFLOW);
	K8(NB_MEMORY_CONTROLLER_DRAM_COMMAND_SLOTS_MISSED);
	K8(NB_MEMORY_CONTROLLER_TURNAROUND);
	K8(NB_MEMORY_CONTROLLER_BYPASS_SATURATION);
	K8(NB_SIZED_COMMANDS);
	K8(NB_PROBE_RESULT);
	K8(NB_HT_BUS0_BANDWIDTH);
	K8(NB_HT_BUS1_BANDWIDTH);
	K8(NB_HT_BUS2_BANDWIDTH);
#undef K8
	CONST(PMC_EV_IAF_INSTR_RETIRED_ANY);
	CONST(PMC_EV_IAF_CPU_CLK_UNHALTED_CORE);
	CONST(PMC_EV_IAF_CPU_CLK_UNHALTED_REF);
	CONST(PMC_EV_RAPL_ENERGY_PKG);
	CONST(PMC_EV_RAPL_ENERGY_CORES);
	CONST(PMC_EV_RAPL_ENERGY_DRAM);
	CONST(PMC_EV_SOFT_FIRST);
	CONST(PMC_EV_SOFT_LAST);
	CONST(PMC_EV_TSC_FIRST);
	CONST(PMC_EV_TSC_LAST);
	CONST(PMC_EV_IBS_FIRST);
	CONST(PMC_EV_IBS_LAST);
	CONST(PMC_EV_K8_FIRST);
	CONST(PMC_EV_K8_LAST);
	CONST(PMC_EV_IAF_FIRST);
	CONST(PMC_EV_IAF_LAST);
	CONST(PMC_EV_RAPL_FIRST);
	CONST(PMC_EV_RAPL_LAST);
	CONST(PMC_EV_DYN_COUNT);
	CONST(PMC_EVENT_FIRST);
	CONST(PMC_EVENT_LAST);

	CONST(PMC_CPU_ANY);
	CONST(PMC_ID_INVALID);
	CONST(PMC_NAME_MAX);
	CONST(PMC_CLASS_MAX);
	CONST(PMC_CPUID_LEN);
	CONST(PMC_CALLCHAIN_DEPTH_MAX);

	CONST(IAP_EVSEL(~0U));
	CONST(IAP_UMASK(~0U));
	CONST(IAP_USR);
	CONST(IAP_OS);
	CONST(IAP_EDGE);
	CONST(IAP_INT);
	CONST(IAP_ANY);
	CONST(IAP_EN);
	CONST(IAP_INV);
	CONST(IAP_CMASK(~0U));

	CONST(PMCLOG_TYPE_CLOSELOG);
	CONST(PMCLOG_TYPE_DROPNOTIFY);
	CONST(PMCLOG_TYPE_INITIALIZE);
	CONST(PMCLOG_TYPE_MAPPINGCHANGE);
	CONST(PMCLOG_TYPE_PMCALLOCATE);
	CONST(PMCLOG_TYPE_PMCATTACH);
	CONST(PMCLOG_TYPE_PMCDETACH);
	CONST(PMCLOG_TYPE_PROCCSW);
	CONST(PMCLOG_TYPE_PROCEXEC);
	CONST(PMCLOG_TYPE_PROCEXIT);
	CONST(PMCLOG_TYPE_PROCFORK);
	CONST(PMCLOG_TYPE_SYSEXIT);
	CONST(PMCLOG_TYPE_USERDATA);
	CONST(PMCLOG_TYPE_MAP_IN);
	CONST(PMCLOG_TYPE_MAP_OUT);
	CONST(PMCLOG_TYPE_CALLCHAIN);
	CONST(PMCLOG_TYPE_PMCALLOCATEDYN);
	CONST(PMCLOG_TYPE_THR_CREATE);
	CONST(PMCLOG_TYPE_THR_EXIT);
	CONST(PMCLOG_TYPE_PROC_CREATE);

	CONST(PMCLOG_OK);
	CONST(PMCLOG_EOF);
	CONST(PMCLOG_REQUIRE_DATA);
	CONST(PMCLOG_ERROR);
	CONST(PMCLOG_FD_NONE);
	CONST(PMCLOG_HEADER_MAGIC);
	CONST(PMCLOG_PATH_MAX);
	CONST(PMCLOG_COMM_LEN);

	CONST(EDOOFUS);
	CONST(EPROGMISMATCH);
	printf("strerror EDOOFUS %s\n", strerror(EDOOFUS));
	printf("strerror EPROGMISMATCH %s\n", strerror(EPROGMISMATCH));
}

/* PMC_ID_MAKE_ID and PMC_ID_TO_* on ids the Rust side packs the same way. */
static void
ids(void)
{
	static const unsigned int cases[][4] = {
		/* cpu, mode, class, row */
		{ 0xFFF, PMC_MODE_TC, PMC_CLASS_IAP, 3 },
		{ 5, PMC_MODE_SS, PMC_CLASS_IAF, 1 },
		{ 0xFFE, PMC_MODE_SC, PMC_CLASS_PERF, 255 },
		{ 0xFFF, PMC_MODE_TS, PMC_CLASS_SOFT, 0 },
		{ 0, PMC_MODE_SC, PMC_CLASS_TSC, 0 },
		{ 4095, PMC_MODE_TC, PMC_CLASS_RAPL, 17 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pmc_id_t id = PMC_ID_MAKE_ID(cases[i][0], cases[i][1], cases[i][2], cases[i][3]);

		printf("id %u %u %u %u = %lu cpu %lu mode %lu class %lu row %lu\n",
		    cases[i][0], cases[i][1], cases[i][2], cases[i][3], (unsigned long)id,
		    (unsigned long)PMC_ID_TO_CPU(id), (unsigned long)PMC_ID_TO_MODE(id),
		    (unsigned long)PMC_ID_TO_CLASS(id), (unsigned long)PMC_ID_TO_ROWINDEX(id));
	}
}

static void
modes(void)
{
	static const enum pmc_mode all[] = { PMC_MODE_SS, PMC_MODE_SC, PMC_MODE_TS, PMC_MODE_TC };
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		printf("mode %d system %d virtual %d sampling %d counting %d\n", (int)all[i],
		    PMC_IS_SYSTEM_MODE(all[i]), PMC_IS_VIRTUAL_MODE(all[i]),
		    PMC_IS_SAMPLING_MODE(all[i]), PMC_IS_COUNTING_MODE(all[i]));
}

int
main(void)
{
	sys_pmc_structs();
	pmc_structs();
	pmclog_structs();
	constants();
	ids();
	modes();
	return (ferror(stdout) ? 1 : 0);
}
