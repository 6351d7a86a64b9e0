/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * sys/pmc.h: the user-visible part of FreeBSD's <sys/pmc.h> for hwpmc-rs, the interface between
 * libpmc and the hwpmc(4) driver.  On amd64 every type, value, structure, member name and padding
 * is FreeBSD's (V10 API), so a program written for FreeBSD compiles unchanged and the structures
 * can be handed to a FreeBSD kernel as they are.
 *
 * The Rust mirror is hwpmc::abi (driver/src/abi.rs); libpmc/tests/headers.rs checks that every
 * size, offset and value here equals it.  Kernel-only parts of FreeBSD's header (struct pmc,
 * struct pmc_owner, the PMC_FN hooks, ...) are not here.
 */

#ifndef _HWPMC_RS_SYS_PMC_H_
#define _HWPMC_RS_SYS_PMC_H_

#include <sys/types.h>
#include <stdint.h>
#include <errno.h>

#if defined(__GNUC__) || defined(__clang__)
#define __PMC_EXTENSION __extension__
#else
#define __PMC_EXTENSION
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define PMC_MODULE_NAME		"hwpmc"

/*
 * PMC_VERSION: MAJOR << 24 | MINOR << 16 | PATCH.  libpmc refuses a driver whose major differs.
 * The minor the driver reports (2) lets clients built for minors 0 to 2 in; the exact upstream
 * minor is not confirmed, so it is kept equal to hwpmc::abi::PMC_VERSION.
 */
#define PMC_VERSION_MAJOR	0x0A
#define PMC_VERSION_MINOR	0x02
#define PMC_VERSION_PATCH	0x0000
#define PMC_VERSION		(PMC_VERSION_MAJOR << 24 | PMC_VERSION_MINOR << 16 | \
				 PMC_VERSION_PATCH)

/*
 * FreeBSD errno values that other C libraries lack.
 *
 *   EDOOFUS        "programming error": PMC_OP_PMCSTART of a PMC that needs a log file
 *                  when none is configured.
 *   EPROGMISMATCH  "program version wrong": the driver's PMC_VERSION major (or, for
 *                  GETMODULEVERSION, major.minor) differs from the library's.
 *
 * On FreeBSD they are the system's (88 and 75).  Elsewhere libpmc reports them as 0x100 plus
 * FreeBSD's number, 344 and 331: on Linux 88 and 75 are ENOTSOCK and EOVERFLOW, while no Linux
 * errno is above 133, so these never collide with a real error.  The Rust library uses the same
 * numbers (pmc::error::EDOOFUS, pmc::error::EPROGMISMATCH).  strerror(3) does not know them;
 * test errno against these names.
 */
#if defined(__FreeBSD__)
#ifndef EDOOFUS
#define EDOOFUS			88
#endif
#ifndef EPROGMISMATCH
#define EPROGMISMATCH		75
#endif
#else
#ifndef EDOOFUS
#define EDOOFUS			344
#endif
#ifndef EPROGMISMATCH
#define EPROGMISMATCH		331
#endif
#endif

/* uintfptr_t: a code address as the log records it (64 bits, as on amd64). */
#if !defined(__FreeBSD__) && !defined(_UINTFPTR_T_DECLARED)
typedef uint64_t uintfptr_t;
#define _UINTFPTR_T_DECLARED
#endif

typedef uint32_t pmc_id_t;	/* a PMC: see PMC_ID_MAKE_ID */
typedef uint64_t pmc_value_t;	/* a counter's value */

/* CPU types (kern.hwpmc.cpuinfo, INITIALIZE's pl_arch).  Gaps are retired types. */
enum pmc_cputype {
	PMC_CPU_AMD_K8 = 0x01,
	PMC_CPU_INTEL_CORE = 0x87,
	PMC_CPU_INTEL_CORE2 = 0x88,
	PMC_CPU_INTEL_CORE2EXTREME = 0x89,
	PMC_CPU_INTEL_ATOM = 0x8A,
	PMC_CPU_INTEL_COREI7 = 0x8B,
	PMC_CPU_INTEL_WESTMERE = 0x8C,
	PMC_CPU_INTEL_SANDYBRIDGE = 0x8D,
	PMC_CPU_INTEL_IVYBRIDGE = 0x8E,
	PMC_CPU_INTEL_SANDYBRIDGE_XEON = 0x8F,
	PMC_CPU_INTEL_IVYBRIDGE_XEON = 0x90,
	PMC_CPU_INTEL_HASWELL = 0x91,
	PMC_CPU_INTEL_ATOM_SILVERMONT = 0x92,
	PMC_CPU_INTEL_NEHALEM_EX = 0x93,
	PMC_CPU_INTEL_WESTMERE_EX = 0x94,
	PMC_CPU_INTEL_HASWELL_XEON = 0x95,
	PMC_CPU_INTEL_BROADWELL = 0x96,
	PMC_CPU_INTEL_BROADWELL_XEON = 0x97,
	PMC_CPU_INTEL_SKYLAKE = 0x98,
	PMC_CPU_INTEL_SKYLAKE_XEON = 0x99,
	PMC_CPU_INTEL_ATOM_GOLDMONT = 0x9A,
	PMC_CPU_INTEL_ICELAKE = 0x9B,
	PMC_CPU_INTEL_ICELAKE_XEON = 0x9C,
	PMC_CPU_INTEL_ALDERLAKE = 0x9D,
	PMC_CPU_INTEL_ATOM_GOLDMONT_P = 0x9E,
	PMC_CPU_INTEL_ATOM_TREMONT = 0x9F,
	PMC_CPU_INTEL_EMERALD_RAPIDS = 0xA0,
	PMC_CPU_INTEL_ALDERLAKEN = 0xA1,
	PMC_CPU_INTEL_GRANITE_RAPIDS = 0xA2,
	PMC_CPU_INTEL_METEOR_LAKE = 0xA3,
	PMC_CPU_INTEL_SAPPHIRE_RAPIDS = 0xA4,
	PMC_CPU_PPC_7450 = 0x300,
	PMC_CPU_PPC_E500 = 0x340,
	PMC_CPU_PPC_970 = 0x380,
	PMC_CPU_PPC_POWER8 = 0x390,
	PMC_CPU_GENERIC = 0x400,
	PMC_CPU_ARMV7_CORTEX_A5 = 0x500,
	PMC_CPU_ARMV7_CORTEX_A7 = 0x501,
	PMC_CPU_ARMV7_CORTEX_A8 = 0x502,
	PMC_CPU_ARMV7_CORTEX_A9 = 0x503,
	PMC_CPU_ARMV7_CORTEX_A15 = 0x504,
	PMC_CPU_ARMV7_CORTEX_A17 = 0x505,
	PMC_CPU_ARMV8_CORTEX_A53 = 0x600,
	PMC_CPU_ARMV8_CORTEX_A57 = 0x601,
	PMC_CPU_ARMV8_CORTEX_A76 = 0x602
};

#define PMC_CPU_FIRST		PMC_CPU_AMD_K8
#define PMC_CPU_LAST		PMC_CPU_ARMV8_CORTEX_A76

/* Classes of PMCs.  Gaps are retired classes. */
enum pmc_class {
	PMC_CLASS_TSC = 0x00,		/* the time-stamp counter */
	PMC_CLASS_K8 = 0x02,		/* AMD core counters */
	PMC_CLASS_IBS = 0x03,		/* AMD instruction-based sampling */
	PMC_CLASS_IAF = 0x06,		/* Intel fixed-function counters */
	PMC_CLASS_IAP = 0x07,		/* Intel programmable counters */
	PMC_CLASS_UCF = 0x08,		/* Intel uncore fixed counters */
	PMC_CLASS_UCP = 0x09,		/* Intel uncore programmable counters */
	PMC_CLASS_PPC7450 = 0x0D,
	PMC_CLASS_PPC970 = 0x0E,
	PMC_CLASS_SOFT = 0x0F,		/* software events */
	PMC_CLASS_ARMV7 = 0x10,
	PMC_CLASS_ARMV8 = 0x11,
	PMC_CLASS_E500 = 0x13,
	PMC_CLASS_POWER8 = 0x15,
	PMC_CLASS_DMC620_PMU_CD2 = 0x16,
	PMC_CLASS_DMC620_PMU_C = 0x17,
	PMC_CLASS_CMN600_PMU = 0x18,
	PMC_CLASS_RAPL = 0x19,		/* RAPL energy counters */
	PMC_CLASS_PERF = 0x1A		/* APERF/MPERF (value not confirmed upstream) */
};

#define PMC_CLASS_FIRST		PMC_CLASS_TSC
#define PMC_CLASS_LAST		PMC_CLASS_PERF

/*
 * Events.  The static blocks; IAP, UCP and modern AMD events are PMU-table indexes
 * (PMC_F_EV_PMU) and SOFT events are numbered by the driver (PMC_OP_GETDYNEVENTINFO).
 */
enum pmc_event {
	PMC_EV_TSC_TSC = 0x1000,

	PMC_EV_IBS_FETCH = 0x2000,
	PMC_EV_IBS_OP = 0x2001,

	PMC_EV_K8_FP_DISPATCHED_FPU_OPS = 0x2080,
	PMC_EV_K8_FP_CYCLES_WITH_NO_FPU_OPS_RETIRED = 0x2081,
	PMC_EV_K8_FP_DISPATCHED_FPU_FAST_FLAG_OPS = 0x2082,
	PMC_EV_K8_LS_SEGMENT_REGISTER_LOAD = 0x2083,
	PMC_EV_K8_LS_MICROARCHITECTURAL_RESYNC_BY_SELF_MODIFYING_CODE = 0x2084,
	PMC_EV_K8_LS_MICROARCHITECTURAL_RESYNC_BY_SNOOP = 0x2085,
	PMC_EV_K8_LS_BUFFER2_FULL = 0x2086,
	PMC_EV_K8_LS_LOCKED_OPERATION = 0x2087,
	PMC_EV_K8_LS_MICROARCHITECTURAL_LATE_CANCEL = 0x2088,
	PMC_EV_K8_LS_RETIRED_CFLUSH_INSTRUCTIONS = 0x2089,
	PMC_EV_K8_LS_RETIRED_CPUID_INSTRUCTIONS = 0x208A,
	PMC_EV_K8_DC_ACCESS = 0x208B,
	PMC_EV_K8_DC_MISS = 0x208C,
	PMC_EV_K8_DC_REFILL_FROM_L2 = 0x208D,
	PMC_EV_K8_DC_REFILL_FROM_SYSTEM = 0x208E,
	PMC_EV_K8_DC_COPYBACK = 0x208F,
	PMC_EV_K8_DC_L1_DTLB_MISS_AND_L2_DTLB_HIT = 0x2090,
	PMC_EV_K8_DC_L1_DTLB_MISS_AND_L2_DTLB_MISS = 0x2091,
	PMC_EV_K8_DC_MISALIGNED_DATA_REFERENCE = 0x2092,
	PMC_EV_K8_DC_MICROARCHITECTURAL_LATE_CANCEL = 0x2093,
	PMC_EV_K8_DC_MICROARCHITECTURAL_EARLY_CANCEL = 0x2094,
	PMC_EV_K8_DC_ONE_BIT_ECC_ERROR = 0x2095,
	PMC_EV_K8_DC_DISPATCHED_PREFETCH_INSTRUCTIONS = 0x2096,
	PMC_EV_K8_DC_DCACHE_ACCESSES_BY_LOCKS = 0x2097,
	PMC_EV_K8_BU_CPU_CLK_UNHALTED = 0x2098,
	PMC_EV_K8_BU_INTERNAL_L2_REQUEST = 0x2099,
	PMC_EV_K8_BU_FILL_REQUEST_L2_MISS = 0x209A,
	PMC_EV_K8_BU_FILL_INTO_L2 = 0x209B,
	PMC_EV_K8_IC_FETCH = 0x209C,
	PMC_EV_K8_IC_MISS = 0x209D,
	PMC_EV_K8_IC_REFILL_FROM_L2 = 0x209E,
	PMC_EV_K8_IC_REFILL_FROM_SYSTEM = 0x209F,
	PMC_EV_K8_IC_L1_ITLB_MISS_AND_L2_ITLB_HIT = 0x20A0,
	PMC_EV_K8_IC_L1_ITLB_MISS_AND_L2_ITLB_MISS = 0x20A1,
	PMC_EV_K8_IC_MICROARCHITECTURAL_RESYNC_BY_SNOOP = 0x20A2,
	PMC_EV_K8_IC_INSTRUCTION_FETCH_STALL = 0x20A3,
	PMC_EV_K8_IC_RETURN_STACK_HIT = 0x20A4,
	PMC_EV_K8_IC_RETURN_STACK_OVERFLOW = 0x20A5,
	PMC_EV_K8_FR_RETIRED_X86_INSTRUCTIONS = 0x20A6,
	PMC_EV_K8_FR_RETIRED_UOPS = 0x20A7,
	PMC_EV_K8_FR_RETIRED_BRANCHES = 0x20A8,
	PMC_EV_K8_FR_RETIRED_BRANCHES_MISPREDICTED = 0x20A9,
	PMC_EV_K8_FR_RETIRED_TAKEN_BRANCHES = 0x20AA,
	PMC_EV_K8_FR_RETIRED_TAKEN_BRANCHES_MISPREDICTED = 0x20AB,
	PMC_EV_K8_FR_RETIRED_FAR_CONTROL_TRANSFERS = 0x20AC,
	PMC_EV_K8_FR_RETIRED_RESYNCS = 0x20AD,
	PMC_EV_K8_FR_RETIRED_NEAR_RETURNS = 0x20AE,
	PMC_EV_K8_FR_RETIRED_NEAR_RETURNS_MISPREDICTED = 0x20AF,
	PMC_EV_K8_FR_RETIRED_TAKEN_BRANCHES_MISPREDICTED_BY_ADDR_MISCOMPARE = 0x20B0,
	PMC_EV_K8_FR_RETIRED_FPU_INSTRUCTIONS = 0x20B1,
	PMC_EV_K8_FR_RETIRED_FASTPATH_DOUBLE_OP_INSTRUCTIONS = 0x20B2,
	PMC_EV_K8_FR_INTERRUPTS_MASKED_CYCLES = 0x20B3,
	PMC_EV_K8_FR_INTERRUPTS_MASKED_WHILE_PENDING_CYCLES = 0x20B4,
	PMC_EV_K8_FR_TAKEN_HARDWARE_INTERRUPTS = 0x20B5,
	PMC_EV_K8_FR_DECODER_EMPTY = 0x20B6,
	PMC_EV_K8_FR_DISPATCH_STALLS = 0x20B7,
	PMC_EV_K8_FR_DISPATCH_STALL_FROM_BRANCH_ABORT_TO_RETIRE = 0x20B8,
	PMC_EV_K8_FR_DISPATCH_STALL_FOR_SERIALIZATION = 0x20B9,
	PMC_EV_K8_FR_DISPATCH_STALL_FOR_SEGMENT_LOAD = 0x20BA,
	PMC_EV_K8_FR_DISPATCH_STALL_WHEN_REORDER_BUFFER_IS_FULL = 0x20BB,
	PMC_EV_K8_FR_DISPATCH_STALL_WHEN_RESERVATION_STATIONS_ARE_FULL = 0x20BC,
	PMC_EV_K8_FR_DISPATCH_STALL_WHEN_FPU_IS_FULL = 0x20BD,
	PMC_EV_K8_FR_DISPATCH_STALL_WHEN_LS_IS_FULL = 0x20BE,
	PMC_EV_K8_FR_DISPATCH_STALL_WHEN_WAITING_FOR_ALL_TO_BE_QUIET = 0x20BF,
	PMC_EV_K8_FR_DISPATCH_STALL_WHEN_FAR_XFER_OR_RESYNC_BRANCH_PENDING = 0x20C0,
	PMC_EV_K8_FR_FPU_EXCEPTIONS = 0x20C1,
	PMC_EV_K8_FR_NUMBER_OF_BREAKPOINTS_FOR_DR0 = 0x20C2,
	PMC_EV_K8_FR_NUMBER_OF_BREAKPOINTS_FOR_DR1 = 0x20C3,
	PMC_EV_K8_FR_NUMBER_OF_BREAKPOINTS_FOR_DR2 = 0x20C4,
	PMC_EV_K8_FR_NUMBER_OF_BREAKPOINTS_FOR_DR3 = 0x20C5,
	PMC_EV_K8_NB_MEMORY_CONTROLLER_PAGE_ACCESS_EVENT = 0x20C6,
	PMC_EV_K8_NB_MEMORY_CONTROLLER_PAGE_TABLE_OVERFLOW = 0x20C7,
	PMC_EV_K8_NB_MEMORY_CONTROLLER_DRAM_COMMAND_SLOTS_MISSED = 0x20C8,
	PMC_EV_K8_NB_MEMORY_CONTROLLER_TURNAROUND = 0x20C9,
	PMC_EV_K8_NB_MEMORY_CONTROLLER_BYPASS_SATURATION = 0x20CA,
	PMC_EV_K8_NB_SIZED_COMMANDS = 0x20CB,
	PMC_EV_K8_NB_PROBE_RESULT = 0x20CC,
	PMC_EV_K8_NB_HT_BUS0_BANDWIDTH = 0x20CD,
	PMC_EV_K8_NB_HT_BUS1_BANDWIDTH = 0x20CE,
	PMC_EV_K8_NB_HT_BUS2_BANDWIDTH = 0x20CF,

	PMC_EV_IAF_INSTR_RETIRED_ANY = 0x10000,
	PMC_EV_IAF_CPU_CLK_UNHALTED_CORE = 0x10001,
	PMC_EV_IAF_CPU_CLK_UNHALTED_REF = 0x10002,

	PMC_EV_RAPL_ENERGY_PKG = 0x14700,
	PMC_EV_RAPL_ENERGY_CORES = 0x14701,
	PMC_EV_RAPL_ENERGY_DRAM = 0x14702,

	PMC_EV_SOFT_FIRST = 0x20000,
	PMC_EV_SOFT_LAST = 0x20FFF
};

#define PMC_EV_TSC_FIRST	PMC_EV_TSC_TSC
#define PMC_EV_TSC_LAST		PMC_EV_TSC_TSC
#define PMC_EV_IBS_FIRST	PMC_EV_IBS_FETCH
#define PMC_EV_IBS_LAST		PMC_EV_IBS_OP
#define PMC_EV_K8_FIRST		PMC_EV_K8_FP_DISPATCHED_FPU_OPS
#define PMC_EV_K8_LAST		PMC_EV_K8_NB_HT_BUS2_BANDWIDTH
#define PMC_EV_IAF_FIRST	PMC_EV_IAF_INSTR_RETIRED_ANY
#define PMC_EV_IAF_LAST		PMC_EV_IAF_CPU_CLK_UNHALTED_REF
#define PMC_EV_RAPL_FIRST	PMC_EV_RAPL_ENERGY_PKG
#define PMC_EV_RAPL_LAST	PMC_EV_RAPL_ENERGY_DRAM

#define PMC_EV_DYN_COUNT	0x1000	/* room for SOFT events */

#define PMC_EVENT_FIRST		PMC_EV_TSC_TSC
#define PMC_EVENT_LAST		PMC_EV_SOFT_LAST

/* Modes: system-wide or per-process ("thread"), sampling or counting. */
enum pmc_mode {
	PMC_MODE_SS = 0,	/* system-wide sampling on one CPU */
	PMC_MODE_SC = 1,	/* system-wide counting on one CPU */
	PMC_MODE_TS = 2,	/* process sampling */
	PMC_MODE_TC = 3		/* process counting */
};

#define PMC_MODE_FIRST		PMC_MODE_SS
#define PMC_MODE_LAST		PMC_MODE_TC

#define PMC_IS_COUNTING_MODE(mode) \
	((mode) == PMC_MODE_SC || (mode) == PMC_MODE_TC)
#define PMC_IS_SYSTEM_MODE(mode) \
	((mode) == PMC_MODE_SS || (mode) == PMC_MODE_SC)
#define PMC_IS_SAMPLING_MODE(mode) \
	((mode) == PMC_MODE_SS || (mode) == PMC_MODE_TS)
#define PMC_IS_VIRTUAL_MODE(mode) \
	((mode) == PMC_MODE_TS || (mode) == PMC_MODE_TC)

/* The state of a PMC, and of a row for PMC_OP_PMCADMIN. */
enum pmc_state {
	PMC_STATE_DISABLED = 0,
	PMC_STATE_FREE = 1,
	PMC_STATE_ALLOCATED = 2,
	PMC_STATE_STOPPED = 3,
	PMC_STATE_RUNNING = 4,
	PMC_STATE_DELETED = 5,
	PMC_STATE_MAX = 6
};

#define PMC_STATE_FIRST		PMC_STATE_DISABLED
#define PMC_STATE_LAST		PMC_STATE_MAX

/* Who may use a row. */
enum pmc_disp {
	PMC_DISP_STANDALONE = 0,	/* used by a system-mode PMC */
	PMC_DISP_FREE = 1,		/* free for either kind */
	PMC_DISP_THREAD = 2,		/* used by process-mode PMCs */
	PMC_DISP_UNKNOWN = 3
};

#define PMC_DISP_FIRST		PMC_DISP_STANDALONE
#define PMC_DISP_LAST		PMC_DISP_THREAD

/* Capabilities of a class, and those an allocation asks for. */
enum pmc_caps {
	PMC_CAP_INTERRUPT = 0x1,	/* interrupts on overflow (sampling) */
	PMC_CAP_USER = 0x2,		/* counts in user mode */
	PMC_CAP_SYSTEM = 0x4,		/* counts in kernel mode */
	PMC_CAP_EDGE = 0x8,		/* counts edges */
	PMC_CAP_THRESHOLD = 0x10,	/* has a threshold */
	PMC_CAP_READ = 0x20,		/* can be read */
	PMC_CAP_WRITE = 0x40,		/* can be written */
	PMC_CAP_INVERT = 0x80,		/* can invert the threshold comparison */
	PMC_CAP_QUALIFIER = 0x100,	/* has event qualifiers */
	PMC_CAP_PRECISE = 0x200,	/* precise sampling */
	PMC_CAP_TAGGING = 0x400,	/* tagging */
	PMC_CAP_CASCADE = 0x800,	/* cascading */
	PMC_CAP_SYSWIDE = 0x1000,	/* one counter for the whole system */
	PMC_CAP_DOMWIDE = 0x2000	/* one counter per NUMA domain */
};

#define PMC_CAP_FIRST		PMC_CAP_INTERRUPT
#define PMC_CAP_LAST		PMC_CAP_DOMWIDE

/* Operations: the first argument of the hwpmc system call. */
enum pmc_ops {
	PMC_OP_CONFIGURELOG = 0,	/* struct pmc_op_configurelog */
	PMC_OP_FLUSHLOG = 1,		/* no argument */
	PMC_OP_GETCPUINFO = 2,		/* struct pmc_op_getcpuinfo */
	PMC_OP_GETDRIVERSTATS = 3,	/* struct pmc_op_getdriverstats */
	PMC_OP_GETMODULEVERSION = 4,	/* uint32_t */
	PMC_OP_GETPMCINFO = 5,		/* struct pmc_op_getpmcinfo */
	PMC_OP_PMCADMIN = 6,		/* struct pmc_op_pmcadmin */
	PMC_OP_PMCALLOCATE = 7,		/* struct pmc_op_pmcallocate */
	PMC_OP_PMCATTACH = 8,		/* struct pmc_op_pmcattach */
	PMC_OP_PMCDETACH = 9,		/* struct pmc_op_pmcattach */
	PMC_OP_PMCGETMSR = 10,		/* struct pmc_op_getmsr */
	PMC_OP_PMCRELEASE = 11,		/* struct pmc_op_simple */
	PMC_OP_PMCRW = 12,		/* struct pmc_op_pmcrw */
	PMC_OP_PMCSETCOUNT = 13,	/* struct pmc_op_pmcsetcount */
	PMC_OP_PMCSTART = 14,		/* struct pmc_op_simple */
	PMC_OP_PMCSTOP = 15,		/* struct pmc_op_simple */
	PMC_OP_WRITELOG = 16,		/* struct pmc_op_writelog */
	PMC_OP_CLOSELOG = 17,		/* no argument */
	PMC_OP_GETDYNEVENTINFO = 18,	/* struct pmc_op_getdyneventinfo */
	PMC_OP_GETCAPS = 19		/* struct pmc_op_caps */
};

/* Flags of PMC_OP_PMCALLOCATE (and of PMC_OP_PMCRW: NEWVALUE, OLDVALUE). */
#define PMC_F_UNUSED1		0x00000001 /* was PMC_F_FORCE; not reused */
#define PMC_F_DESCENDANTS	0x00000002 /* follow children of the target */
#define PMC_F_LOG_PROCCSW	0x00000004 /* log PROCCSW records */
#define PMC_F_LOG_PROCEXIT	0x00000008 /* log PROCEXIT records */
#define PMC_F_NEWVALUE		0x00000010 /* PMCRW: write */
#define PMC_F_OLDVALUE		0x00000020 /* PMCRW: read */
#define PMC_F_CALLCHAIN		0x00000080 /* record callchains */
#define PMC_F_USERCALLCHAIN	0x00000100 /* user stack from kernel samples */
#define PMC_F_EV_PMU		0x00000200 /* pm_ev is a PMU table index */
/* hwpmc-rs extension, not FreeBSD's: counter multiplexing (counting PMCs; see pmc_host.h) */
#define PMC_F_MULTIPLEX		0x01000000 /* may share a counter, rotated at the tick */
#define PMC_F_GROUP_LEADER	0x02000000 /* multiplexed; starts an event group */
#define PMC_F_GROUP_MEMBER	0x04000000 /* multiplexed; counted with the last group */
/* hwpmc-rs extension: the core type a PMC counts on, on a hybrid CPU (perf's cpu_core, cpu_atom) */
#define PMC_F_CORE_TYPE_CORE	0x08000000 /* P-cores only, with their encoding */
#define PMC_F_CORE_TYPE_ATOM	0x10000000 /* E-cores only, with their encoding */
/* hwpmc-rs extension: the thread scope of process PMCs (libcpc's cpc_bind_curlwp); not on FreeBSD */
#define PMC_F_THREAD		0x20000000 /* counts only the thread that attaches it */
#define PMC_F_THREAD_INHERIT	0x40000000 /* with PMC_F_THREAD: and the threads it creates */
/* internal to the driver */
#define PMC_F_ATTACHED_TO_OWNER	0x00010000
#define PMC_F_NEEDS_LOGFILE	0x00020000
#define PMC_F_ATTACH_DONE	0x00040000

/* Callchain flags: the low 16 bits of a CALLCHAIN record's pl_cpuflags. */
#define PMC_CC_F_USERSPACE	0x01	/* sampled in user mode */
#define PMC_CC_F_MULTIPART	0x02	/* pl_pc[0] is a multipart header (AMD IBS) */

#define PMC_CALLCHAIN_DEPTH_MAX	512	/* most PCs in a CALLCHAIN record */

/*
 * PMC ids: CPU (12 bits, 0xFFF for process mode) | MODE (4) | CLASS (8) | ROW (8).
 */
#define PMC_ID_TO_ROWINDEX(ID)	((ID) & 0xFF)
#define PMC_ID_TO_CLASS(ID)	(((ID) & 0xFF00) >> 8)
#define PMC_ID_TO_MODE(ID)	(((ID) & 0xF0000) >> 16)
#define PMC_ID_TO_CPU(ID)	(((ID) & 0xFFF00000) >> 20)
#define PMC_ID_MAKE_ID(CPU, MODE, CLASS, ROWINDEX) \
	((((pmc_id_t)(CPU) & 0xFFF) << 20) | (((pmc_id_t)(MODE) & 0xF) << 16) | \
	 (((pmc_id_t)(CLASS) & 0xFF) << 8) | ((pmc_id_t)(ROWINDEX) & 0xFF))

#define PMC_ID_INVALID		(~ (pmc_id_t) 0)
#define PMC_CPU_ANY		(~0)	/* pm_cpu of a process-mode PMC */

#define PMC_NAME_MAX		64	/* size of row and event names */
#define PMC_CLASS_MAX		8	/* classes GETCPUINFO describes */
#define PMC_CPUID_LEN		64	/* size of kern.hwpmc.cpuid */

/*
 * Machine-dependent part of PMC_OP_PMCALLOCATE (amd64 <machine/pmc_mdep.h>).
 */

/* pm_iap_config: an IA32_PERFEVTSELx image (<dev/hwpmc/hwpmc_core.h>). */
#define IAP_EVSEL(C)		((C) & 0xFF)
#define IAP_UMASK(C)		(((C) & 0xFF) << 8)
#define IAP_USR			(1U << 16)
#define IAP_OS			(1U << 17)
#define IAP_EDGE		(1U << 18)
#define IAP_INT			(1U << 20)
#define IAP_ANY			(1U << 21)
#define IAP_EN			(1U << 22)
#define IAP_INV			(1U << 23)
#define IAP_CMASK(C)		(((C) & 0xFF) << 24)

/* pm_amd_sub_class */
#define PMC_AMD_SUB_CLASS_CORE		0
#define PMC_AMD_SUB_CLASS_L3_CACHE	1
#define PMC_AMD_SUB_CLASS_DATA_FABRIC	2

struct pmc_md_amd_op_pmcallocate {
	uint64_t	pm_amd_config;		/* PERF_CTL image */
	uint32_t	pm_amd_sub_class;	/* PMC_AMD_SUB_CLASS_* */
};

struct pmc_md_ibs_op_pmcallocate {
	uint32_t	ibs_flag;
	uint32_t	ibs_type;
	uint64_t	ibs_ctl;
	uint64_t	ibs_ctl2;
};

struct pmc_md_iap_op_pmcallocate {
	uint32_t	pm_iap_config;		/* IAP_* bits */
	uint64_t	pm_iap_rsp;		/* offcore response */
};

struct pmc_md_ucf_op_pmcallocate {
	uint16_t	pm_ucf_flags;
};

struct pmc_md_ucp_op_pmcallocate {
	uint32_t	pm_ucp_config;
};

union pmc_md_op_pmcallocate {
	struct pmc_md_amd_op_pmcallocate	pm_amd;
	struct pmc_md_ibs_op_pmcallocate	pm_ibs;
	struct pmc_md_iap_op_pmcallocate	pm_iap;
	struct pmc_md_ucf_op_pmcallocate	pm_ucf;
	struct pmc_md_ucp_op_pmcallocate	pm_ucp;
	uint64_t				__pad[4];
};

/*
 * Arguments of the operations.
 */

/* PMC_OP_PMCALLOCATE (in; pm_pmcid out).  Zero it first. */
struct pmc_op_pmcallocate {
	uint32_t	pm_caps;	/* PMC_CAP_* */
	uint32_t	pm_cpu;		/* CPU, or PMC_CPU_ANY */
	enum pmc_class	pm_class;	/* class of the PMC */
	enum pmc_event	pm_ev;		/* event, or PMU table index (PMC_F_EV_PMU) */
	uint32_t	pm_flags;	/* PMC_F_* */
	enum pmc_mode	pm_mode;	/* mode */
	pmc_id_t	pm_pmcid;	/* [out] the PMC's id */
	pmc_value_t	pm_count;	/* initial count, or sampling reload count */
	union pmc_md_op_pmcallocate pm_md; /* class-specific configuration */
};

/* PMC_OP_PMCADMIN: enable or disable a row. */
struct pmc_op_pmcadmin {
	int		pm_cpu;		/* CPU */
	uint32_t	pm_flags;	/* ignored */
	int		pm_pmc;		/* row index */
	enum pmc_state	pm_state;	/* PMC_STATE_DISABLED or PMC_STATE_FREE */
};

/* PMC_OP_PMCATTACH and PMC_OP_PMCDETACH. */
struct pmc_op_pmcattach {
	pmc_id_t	pm_pmc;		/* the PMC */
	pid_t		pm_pid;		/* the target; 0 for the caller */
};

/* PMC_OP_PMCSETCOUNT. */
struct pmc_op_pmcsetcount {
	pmc_value_t	pm_count;	/* reload (or initial) count */
	pmc_id_t	pm_pmcid;
};

/* PMC_OP_PMCRW: the driver writes back only pm_value. */
struct pmc_op_pmcrw {
	uint32_t	pm_flags;	/* PMC_F_NEWVALUE and/or PMC_F_OLDVALUE */
	pmc_id_t	pm_pmcid;
	pmc_value_t	pm_value;	/* new value in, old value out */
};

/*
 * hwpmc-rs extension op, not in enum pmc_ops: a PMC's count with the reference cycles (TSC) it
 * was enabled and on a counter; both 0 for a PMC that is not multiplexed.
 */
#define PMC_OP_PMCREADTIMES	0x100	/* struct pmc_op_pmcreadtimes */
struct pmc_op_pmcreadtimes {
	pmc_id_t	pm_pmcid;
	pmc_value_t	pm_value;	/* the count, as PMC_OP_PMCRW reads it */
	uint64_t	pm_enabled;	/* reference cycles enabled */
	uint64_t	pm_running;	/* reference cycles on a counter */
};

/* One row of PMC_OP_GETPMCINFO. */
struct pmc_info {
	char		pm_name[PMC_NAME_MAX];	/* row name */
	enum pmc_class	pm_class;
	int		pm_enabled;	/* whether the row is enabled */
	enum pmc_disp	pm_rowdisp;	/* STANDALONE, FREE or THREAD */
	pid_t		pm_ownerpid;	/* owner, or -1 */
	enum pmc_mode	pm_mode;	/* current mode */
	enum pmc_event	pm_event;	/* current event */
	uint32_t	pm_flags;	/* current flags */
	pmc_value_t	pm_reloadcount;	/* sampling modes only */
};

/* PMC_OP_GETPMCINFO: pm_cpu in; npmc rows out (see pmc_npmc). */
struct pmc_op_getpmcinfo {
	int32_t		pm_cpu;
	__PMC_EXTENSION struct pmc_info pm_pmcs[]; /* npmc rows */
};

/* One class of PMC_OP_GETCPUINFO. */
struct pmc_classinfo {
	enum pmc_class	pm_class;
	uint32_t	pm_caps;	/* PMC_CAP_* */
	uint32_t	pm_width;	/* counter width in bits */
	uint32_t	pm_num;		/* rows of the class */
};

/* PMC_OP_GETCPUINFO. */
struct pmc_op_getcpuinfo {
	enum pmc_cputype pm_cputype;	/* the kind of CPU */
	uint32_t	pm_ncpu;	/* CPUs (highest id + 1) */
	uint32_t	pm_npmc;	/* rows per CPU */
	uint32_t	pm_nclass;	/* entries used in pm_classes */
	struct pmc_classinfo pm_classes[PMC_CLASS_MAX];
};

/* PMC_OP_CONFIGURELOG: pm_logfd < 0 closes the log. */
struct pmc_op_configurelog {
	int		pm_flags;	/* must be 0 */
	int		pm_logfd;	/* descriptor to log to */
};

/* PMC_OP_GETDRIVERSTATS (the driver's counters truncated to 32 bits). */
struct pmc_op_getdriverstats {
	unsigned int	pm_intr_ignored;	/* interrupts ignored */
	unsigned int	pm_intr_processed;	/* interrupts processed */
	unsigned int	pm_intr_bufferfull;	/* interrupts with a full buffer */
	unsigned int	pm_syscalls;		/* system calls */
	unsigned int	pm_syscall_errors;	/* failed system calls */
	unsigned int	pm_buffer_requests;	/* log buffer requests */
	unsigned int	pm_buffer_requests_failed; /* failed log buffer requests */
	unsigned int	pm_log_sweeps;		/* sample buffer passes */
};

/* PMC_OP_PMCRELEASE, PMC_OP_PMCSTART, PMC_OP_PMCSTOP. */
struct pmc_op_simple {
	pmc_id_t	pm_pmcid;
};

/* PMC_OP_WRITELOG: a USERDATA record. */
struct pmc_op_writelog {
	uint32_t	pm_userdata;
};

/* PMC_OP_PMCGETMSR: the RDPMC index of a self-attached process PMC. */
struct pmc_op_getmsr {
	uint32_t	pm_msr;		/* [out] */
	pmc_id_t	pm_pmcid;	/* [in] */
};

/* One SOFT event of PMC_OP_GETDYNEVENTINFO. */
struct pmc_dyn_event_descr {
	char		pm_ev_name[PMC_NAME_MAX];
	enum pmc_event	pm_ev_code;
};

/* PMC_OP_GETDYNEVENTINFO: pm_class (PMC_CLASS_SOFT) in, events out. */
struct pmc_op_getdyneventinfo {
	enum pmc_class	pm_class;
	unsigned int	pm_nevent;
	struct pmc_dyn_event_descr pm_events[PMC_EV_DYN_COUNT];
};

/* PMC_OP_GETCAPS. */
struct pmc_op_caps {
	pmc_id_t	pm_pmcid;	/* [in] */
	uint32_t	pm_caps;	/* [out] PMC_CAP_* */
};

#ifdef __cplusplus
}
#endif

#endif /* !_HWPMC_RS_SYS_PMC_H_ */
