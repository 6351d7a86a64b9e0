/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * sys/pmclog.h: the hwpmc(4) log format, as FreeBSD's <sys/pmclog.h> declares it for user space:
 * the record types, the record header and the on-disk layout of every record (amd64).
 *
 * A log is a plain sequence of records with no file header; INITIALIZE comes first.  Each record
 * starts with a 16-byte header; its length (header included) is rounded up to a multiple of 4 and
 * records are only 4-byte aligned in a stream, so copy a record into an aligned buffer (union
 * pmclog_entry is big enough for any) before reading its 64-bit members.  Bytes the writer does not
 * set (pl_spare, some pl_pad, the bytes after a path's NUL) may hold anything.
 *
 * The Rust encoder and decoder are in the pmclog crate; libpmc/tests/headers.rs checks these
 * structures against records it encodes.  Most programs read logs with pmclog(3) (<pmclog.h>).
 */

#ifndef _HWPMC_RS_SYS_PMCLOG_H_
#define _HWPMC_RS_SYS_PMCLOG_H_

#include <sys/pmc.h>
#include <time.h>
/* struct timespec: <time.h> of a strict ISO C99 glibc compile does not declare it. */
#if defined(__GLIBC__) && !defined(__USE_POSIX199309) && !defined(__USE_ISOC11)
#include <bits/types/struct_timespec.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Record types: bits 23..16 of the header word. */
enum pmclog_type {
	PMCLOG_TYPE_CLOSELOG = 1,	/* the log was closed; the last record */
	PMCLOG_TYPE_DROPNOTIFY = 2,	/* the driver dropped data */
	PMCLOG_TYPE_INITIALIZE = 3,	/* the first record */
	PMCLOG_TYPE_MAPPINGCHANGE = 4,	/* retired; never written */
	PMCLOG_TYPE_PMCALLOCATE = 5,
	PMCLOG_TYPE_PMCATTACH = 6,
	PMCLOG_TYPE_PMCDETACH = 7,
	PMCLOG_TYPE_PROCCSW = 8,
	PMCLOG_TYPE_PROCEXEC = 9,
	PMCLOG_TYPE_PROCEXIT = 10,
	PMCLOG_TYPE_PROCFORK = 11,
	PMCLOG_TYPE_SYSEXIT = 12,
	PMCLOG_TYPE_USERDATA = 13,
	PMCLOG_TYPE_MAP_IN = 14,
	PMCLOG_TYPE_MAP_OUT = 15,
	PMCLOG_TYPE_CALLCHAIN = 16,
	PMCLOG_TYPE_PMCALLOCATEDYN = 17,
	PMCLOG_TYPE_THR_CREATE = 18,
	PMCLOG_TYPE_THR_EXIT = 19,
	PMCLOG_TYPE_PROC_CREATE = 20
};

/* The header word: MAGIC (8 bits) | TYPE (8) | LENGTH (16, bytes, header included). */
#define PMCLOG_HEADER_MAGIC		0xEEU
#define PMCLOG_HEADER_TO_LENGTH(H)	((H) & 0x0000FFFF)
#define PMCLOG_HEADER_TO_TYPE(H)	(((H) & 0x00FF0000) >> 16)
#define PMCLOG_HEADER_TO_MAGIC(H)	(((H) & 0xFF000000) >> 24)
#define PMCLOG_HEADER_CHECK_MAGIC(H)	(PMCLOG_HEADER_TO_MAGIC(H) == PMCLOG_HEADER_MAGIC)

/* CALLCHAIN's pl_cpuflags: CPU << 16 | PMC_CC_F_* flags. */
#define PMC_CALLCHAIN_CPUFLAGS_TO_CPU(CF)	(((CF) >> 16) & 0xFFFF)
#define PMC_CALLCHAIN_CPUFLAGS_TO_USERMODE(CF)	((CF) & PMC_CC_F_USERSPACE)
#define PMC_CALLCHAIN_TO_CPUFLAGS(CPU, FLAGS)	(((CPU) << 16) | ((FLAGS) & 0xFFFF))

/* Sizes of the records' string fields: PATH_MAX and MAXCOMLEN + 1 of FreeBSD. */
#define PMCLOG_PATH_MAX		1024
#define PMCLOG_COMM_LEN		20

#if defined(__GNUC__) || defined(__clang__)
#define __PMCLOG_PACKED __attribute__((__packed__))
#else
#define __PMCLOG_PACKED
#endif

#define PMCLOG_ENTRY_HEADER \
	uint32_t	pl_header;	/* MAGIC | TYPE | LENGTH */ \
	uint32_t	pl_spare;	/* not written */ \
	uint64_t	pl_tsc;		/* timestamp (TSC) */

struct pmclog_header {
	PMCLOG_ENTRY_HEADER
} __PMCLOG_PACKED;

/* CALLCHAIN: 32 + 8 * n bytes (n = number of PCs). */
struct pmclog_callchain {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pid;
	uint32_t	pl_tid;
	uint32_t	pl_pmcid;
	uint32_t	pl_cpuflags;	/* PMC_CALLCHAIN_TO_CPUFLAGS(cpu, PMC_CC_F_*) */
	uintfptr_t	pl_pc[PMC_CALLCHAIN_DEPTH_MAX]; /* sampled PC, then return addresses */
} __PMCLOG_PACKED;

/* CLOSELOG: 16 bytes. */
struct pmclog_closelog {
	PMCLOG_ENTRY_HEADER
} __PMCLOG_PACKED;

/* DROPNOTIFY: 16 bytes. */
struct pmclog_dropnotify {
	PMCLOG_ENTRY_HEADER
} __PMCLOG_PACKED;

/* INITIALIZE: 112 bytes. */
struct pmclog_initialize {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_version;	/* the driver's PMC_VERSION */
	uint32_t	pl_cpu;		/* enum pmc_cputype */
	uint64_t	pl_tsc_freq;	/* TSC frequency in Hz, 0 if none */
	struct timespec	pl_ts;		/* wall-clock time at configuration */
	char		pl_cpuid[PMC_CPUID_LEN]; /* kern.hwpmc.cpuid */
} __PMCLOG_PACKED;

/* MAP_IN: 32 + strlen(path) + 1 bytes, rounded up to 4. */
struct pmclog_map_in {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pid;		/* -1 for kernel mappings */
	uint32_t	pl_pad;
	uintfptr_t	pl_start;
	char		pl_pathname[PMCLOG_PATH_MAX];
} __PMCLOG_PACKED;

/* MAP_OUT: 40 bytes. */
struct pmclog_map_out {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pid;
	uint32_t	pl_pad;
	uintfptr_t	pl_start;
	uintfptr_t	pl_end;
} __PMCLOG_PACKED;

/* PMCALLOCATE: 40 bytes. */
struct pmclog_pmcallocate {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pmcid;
	uint32_t	pl_event;	/* enum pmc_event, or PMU index (PMC_F_EV_PMU) */
	uint32_t	pl_flags;	/* PMC_F_* */
	uint32_t	pl_pad;
	uint64_t	pl_rate;	/* reload count (sampling) or initial count */
} __PMCLOG_PACKED;

/* PMCATTACH: 24 + strlen(path) + 1 bytes, rounded up to 4. */
struct pmclog_pmcattach {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pmcid;
	uint32_t	pl_pid;
	char		pl_pathname[PMCLOG_PATH_MAX];
} __PMCLOG_PACKED;

/* PMCDETACH: 24 bytes. */
struct pmclog_pmcdetach {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pmcid;
	uint32_t	pl_pid;
} __PMCLOG_PACKED;

/* PROCCSW: 40 bytes. */
struct pmclog_proccsw {
	PMCLOG_ENTRY_HEADER
	uint64_t	pl_value;	/* the count while on the CPU */
	uint32_t	pl_pmcid;
	uint32_t	pl_pid;
	uint32_t	pl_tid;
	uint32_t	pl_pad;
} __PMCLOG_PACKED;

/* PROC_CREATE: 44 bytes. */
struct pmclog_proccreate {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pid;
	uint32_t	pl_flags;	/* the process's p_flag */
	char		pl_pcomm[PMCLOG_COMM_LEN];
} __PMCLOG_PACKED;

/* PROCEXEC: 40 + strlen(path) + 1 bytes, rounded up to 4. */
struct pmclog_procexec {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pid;
	uint32_t	pl_pmcid;
	uint64_t	pl_baseaddr;	/* AT_BASE: the dynamic loader's load address */
	uint64_t	pl_dynaddr;	/* load base of a PIE */
	char		pl_pathname[PMCLOG_PATH_MAX];
} __PMCLOG_PACKED;

/* PROCEXIT: 32 bytes. */
struct pmclog_procexit {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pmcid;
	uint32_t	pl_pid;
	uint64_t	pl_value;
} __PMCLOG_PACKED;

/* PROCFORK: 24 bytes. */
struct pmclog_procfork {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_oldpid;
	uint32_t	pl_newpid;
} __PMCLOG_PACKED;

/* SYSEXIT: 24 bytes. */
struct pmclog_sysexit {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pid;
	uint32_t	pl_pad;
} __PMCLOG_PACKED;

/* THR_CREATE: 52 bytes. */
struct pmclog_threadcreate {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_tid;
	uint32_t	pl_pid;
	uint32_t	pl_flags;	/* the process's p_flag */
	uint32_t	pl_pad;
	char		pl_tdname[PMCLOG_COMM_LEN];
} __PMCLOG_PACKED;

/* THR_EXIT: 24 bytes. */
struct pmclog_threadexit {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_tid;
	uint32_t	pl_pad;
} __PMCLOG_PACKED;

/* USERDATA: 24 bytes. */
struct pmclog_userdata {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_userdata;	/* from PMC_OP_WRITELOG */
	uint32_t	pl_pad;
} __PMCLOG_PACKED;

/*
 * PMCALLOCATEDYN: 96 bytes.  This is the documented layout.  FreeBSD kernels (and hwpmc-rs, to be
 * byte-compatible) write a 64-bit rate at offset 32 where pl_evname starts and the name at offset
 * 40, cut to its first 56 bytes; a reader should look for the name at 40 when 32 is not text.
 */
struct pmclog_pmcallocatedyn {
	PMCLOG_ENTRY_HEADER
	uint32_t	pl_pmcid;
	uint32_t	pl_event;
	uint32_t	pl_flags;
	uint32_t	pl_pad;
	char		pl_evname[PMC_NAME_MAX];
} __PMCLOG_PACKED;

/* Only used to size buffers: any record fits. */
union pmclog_entry {
	struct pmclog_callchain		pl_cc;
	struct pmclog_closelog		pl_cl;
	struct pmclog_dropnotify	pl_dn;
	struct pmclog_initialize	pl_i;
	struct pmclog_map_in		pl_mi;
	struct pmclog_map_out		pl_mo;
	struct pmclog_pmcallocate	pl_a;
	struct pmclog_pmcallocatedyn	pl_ad;
	struct pmclog_pmcattach		pl_t;
	struct pmclog_pmcdetach		pl_d;
	struct pmclog_proccsw		pl_c;
	struct pmclog_proccreate	pl_pc;
	struct pmclog_procexec		pl_x;
	struct pmclog_procexit		pl_e;
	struct pmclog_procfork		pl_f;
	struct pmclog_sysexit		pl_se;
	struct pmclog_threadcreate	pl_tc;
	struct pmclog_threadexit	pl_te;
	struct pmclog_userdata		pl_u;
};

#ifdef __cplusplus
}
#endif

#endif /* !_HWPMC_RS_SYS_PMCLOG_H_ */
