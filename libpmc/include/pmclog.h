/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * pmclog.h: pmclog(3), the parser of hwpmc(4) logs, as FreeBSD's lib/libpmc/pmclog.h declares it
 * (amd64 layout).  struct pmclog_ev is implemented by the pmclog crate (pmclog/src/capi.rs, 4184
 * bytes on LP64) and exported by libpmc; libpmc/tests/headers.rs checks that every size and offset
 * here equals the Rust definition.
 *
 *	void *parser = pmclog_open(fd);		(or PMCLOG_FD_NONE, then pmclog_feed)
 *	struct pmclog_ev ev;
 *	while (pmclog_read(parser, &ev) == 0)
 *		switch (ev.pl_type) { case PMCLOG_TYPE_CALLCHAIN: ... ev.pl_u.pl_cc ... }
 *	(ev.pl_state says why it stopped: PMCLOG_EOF, PMCLOG_REQUIRE_DATA or PMCLOG_ERROR)
 *	pmclog_close(parser);
 *
 * Where this implementation differs from FreeBSD's (CLOSELOG ends the log, a truncated record is
 * an error, unknown PMCALLOCATE events are named rather than rejected, ...) is documented in
 * pmclog/src/capi.rs.
 */

#ifndef _HWPMC_RS_PMCLOG_H_
#define _HWPMC_RS_PMCLOG_H_

#include <sys/types.h>
#include <stdint.h>
#include <sys/pmclog.h>

#ifdef __cplusplus
extern "C" {
#endif

/* pl_state: what pmclog_read found. */
enum pmclog_state {
	PMCLOG_OK = 0,			/* a record was read */
	PMCLOG_EOF = 1,			/* end of the log (or CLOSELOG) */
	PMCLOG_REQUIRE_DATA = 2,	/* input used up: feed or read more */
	PMCLOG_ERROR = 3		/* malformed log or failed read; see errno */
};

#define PMCLOG_FD_NONE		(-1)	/* pmclog_open: a parser fed with pmclog_feed */

/* CALLCHAIN (pl_cc). */
struct pmclog_ev_callchain {
	uint32_t	pl_pid;
	uint32_t	pl_tid;
	uint32_t	pl_pmcid;
	uint32_t	pl_cpuflags;	/* CPU << 16 | PMC_CC_F_* */
	uint32_t	pl_cpuflags2;	/* unused, 0 */
	uint32_t	pl_npc;		/* valid entries of pl_pc */
	uintfptr_t	pl_pc[PMC_CALLCHAIN_DEPTH_MAX]; /* sampled PC, then return addresses */
};

/* CLOSELOG (pl_cl) and DROPNOTIFY (pl_dn) carry no data. */
__PMC_EXTENSION struct pmclog_ev_closelog {
};

__PMC_EXTENSION struct pmclog_ev_dropnotify {
};

/* INITIALIZE (pl_i). */
struct pmclog_ev_initialize {
	uint32_t	pl_version;	/* the driver's PMC_VERSION */
	uint32_t	pl_arch;	/* enum pmc_cputype */
	uint64_t	pl_tsc_freq;	/* TSC frequency in Hz, 0 if none */
	struct timespec	pl_ts;		/* wall-clock time at configuration */
	char		pl_cpuid[PMCLOG_PATH_MAX]; /* kern.hwpmc.cpuid */
};

/* MAP_IN (pl_mi). */
struct pmclog_ev_map_in {
	pid_t		pl_pid;		/* -1 for kernel mappings */
	uintfptr_t	pl_start;
	char		pl_pathname[PMCLOG_PATH_MAX];
};

/* MAP_OUT (pl_mo). */
struct pmclog_ev_map_out {
	pid_t		pl_pid;
	uintfptr_t	pl_start;
	uintfptr_t	pl_end;
};

/* PMCALLOCATE (pl_a). */
struct pmclog_ev_pmcallocate {
	uint32_t	pl_event;	/* enum pmc_event, or PMU index (PMC_F_EV_PMU) */
	const char	*pl_evname;	/* owned by the parser (see capi.rs) */
	uint32_t	pl_flags;	/* PMC_F_* */
	pmc_id_t	pl_pmcid;
	pmc_value_t	pl_rate;	/* reload count (sampling) or initial count */
};

/* PMCALLOCATEDYN (pl_ad). */
struct pmclog_ev_pmcallocatedyn {
	uint32_t	pl_event;
	char		pl_evname[PMC_NAME_MAX];
	uint32_t	pl_flags;
	pmc_id_t	pl_pmcid;
};

/* PMCATTACH (pl_t). */
struct pmclog_ev_pmcattach {
	pmc_id_t	pl_pmcid;
	pid_t		pl_pid;
	char		pl_pathname[PMCLOG_PATH_MAX];
};

/* PMCDETACH (pl_d). */
struct pmclog_ev_pmcdetach {
	pmc_id_t	pl_pmcid;
	pid_t		pl_pid;
};

/* PROCCSW (pl_c). */
struct pmclog_ev_proccsw {
	pid_t		pl_pid;
	pid_t		pl_tid;
	pmc_id_t	pl_pmcid;
	pmc_value_t	pl_value;	/* the count for this stay on the CPU */
};

/* PROC_CREATE (pl_pc). */
struct pmclog_ev_proccreate {
	pid_t		pl_pid;
	uint32_t	pl_flags;	/* the process's p_flag */
	char		pl_pcomm[PMCLOG_COMM_LEN];
};

/* PROCEXEC (pl_x). */
struct pmclog_ev_procexec {
	pid_t		pl_pid;
	pmc_id_t	pl_pmcid;
	uint64_t	pl_baseaddr;	/* AT_BASE: the dynamic loader's load address */
	uint64_t	pl_dynaddr;	/* load base of a PIE */
	char		pl_pathname[PMCLOG_PATH_MAX];
};

/* PROCEXIT (pl_e). */
struct pmclog_ev_procexit {
	uint32_t	pl_pid;
	pmc_id_t	pl_pmcid;
	pmc_value_t	pl_value;
};

/* PROCFORK (pl_f). */
struct pmclog_ev_procfork {
	pid_t		pl_oldpid;
	pid_t		pl_newpid;
};

/* SYSEXIT (pl_se). */
struct pmclog_ev_sysexit {
	pid_t		pl_pid;
};

/* THR_CREATE (pl_tc). */
struct pmclog_ev_threadcreate {
	pid_t		pl_tid;
	pid_t		pl_pid;
	uint32_t	pl_flags;	/* the process's p_flag */
	char		pl_tdname[PMCLOG_COMM_LEN];
};

/* THR_EXIT (pl_te). */
struct pmclog_ev_threadexit {
	pid_t		pl_tid;
};

/* USERDATA (pl_u). */
struct pmclog_ev_userdata {
	uint32_t	pl_userdata;	/* from PMC_OP_WRITELOG */
};

/* One record as pmclog_read returns it; read the pl_u member that pl_type names. */
struct pmclog_ev {
	enum pmclog_state pl_state;	/* state after pmclog_read */
	off_t		pl_offset;	/* byte offset of the record's end in the stream */
	size_t		pl_count;	/* records so far, from 1 */
	struct timespec	pl_ts;		/* the record's TSC in tv_sec, 0 in tv_nsec */
	enum pmclog_type pl_type;	/* PMCLOG_TYPE_* */
	void		*pl_data;	/* the raw record, until the next pmclog_read */
	int		pl_len;		/* its length in bytes */
	union pmclog_ev_u {
		struct pmclog_ev_callchain	pl_cc;
		struct pmclog_ev_closelog	pl_cl;
		struct pmclog_ev_dropnotify	pl_dn;
		struct pmclog_ev_initialize	pl_i;
		struct pmclog_ev_map_in		pl_mi;
		struct pmclog_ev_map_out	pl_mo;
		struct pmclog_ev_pmcallocate	pl_a;
		struct pmclog_ev_pmcallocatedyn	pl_ad;
		struct pmclog_ev_pmcattach	pl_t;
		struct pmclog_ev_pmcdetach	pl_d;
		struct pmclog_ev_proccsw	pl_c;
		struct pmclog_ev_proccreate	pl_pc;
		struct pmclog_ev_procexec	pl_x;
		struct pmclog_ev_procexit	pl_e;
		struct pmclog_ev_procfork	pl_f;
		struct pmclog_ev_sysexit	pl_se;
		struct pmclog_ev_threadcreate	pl_tc;
		struct pmclog_ev_threadexit	pl_te;
		struct pmclog_ev_userdata	pl_u;
	} pl_u;
};

void	*pmclog_open(int _fd);
int	pmclog_feed(void *_cookie, char *_data, int _len);
int	pmclog_read(void *_cookie, struct pmclog_ev *_ev);
void	pmclog_close(void *_cookie);

#ifdef __cplusplus
}
#endif

#endif /* !_HWPMC_RS_PMCLOG_H_ */
