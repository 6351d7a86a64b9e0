/*
 * Reads a log written by the Rust encoder (pmclog::encode) through the on-disk structures of
 * <sys/pmclog.h> and prints every field, one a line, for libpmc/tests/headers.rs to compare with
 * the records it encoded:
 *
 *	fixed <struct> <bytes>		(sizeof, or the offset of the variable part)
 *	rec <n> header magic <m> type <t> length <l> tsc <tsc>
 *	rec <n> <field> <value>		(integers in decimal, strings between quotes)
 *
 * Usage: records <log file>
 */
#include <sys/pmclog.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXED(T) printf("fixed %s %zu\n", #T, sizeof(struct T))
#define VARIABLE(T, m) printf("fixed %s %zu\n", #T, offsetof(struct T, m))

#define U(field) printf("rec %d %s %llu\n", n, #field, (unsigned long long)(e.field))
#define S(field, len) printf("rec %d %s \"%.*s\"\n", n, #field, (int)(len), e.field)

static void
sizes(void)
{
	VARIABLE(pmclog_callchain, pl_pc);
	FIXED(pmclog_closelog);
	FIXED(pmclog_dropnotify);
	FIXED(pmclog_initialize);
	VARIABLE(pmclog_map_in, pl_pathname);
	FIXED(pmclog_map_out);
	FIXED(pmclog_pmcallocate);
	VARIABLE(pmclog_pmcattach, pl_pathname);
	FIXED(pmclog_pmcdetach);
	FIXED(pmclog_proccsw);
	FIXED(pmclog_proccreate);
	VARIABLE(pmclog_procexec, pl_pathname);
	FIXED(pmclog_procexit);
	FIXED(pmclog_procfork);
	FIXED(pmclog_sysexit);
	FIXED(pmclog_threadcreate);
	FIXED(pmclog_threadexit);
	FIXED(pmclog_userdata);
	FIXED(pmclog_pmcallocatedyn);
	FIXED(pmclog_header);
	printf("fixed pmclog_entry %zu\n", sizeof(union pmclog_entry));
}

int
main(int argc, char **argv)
{
	static union pmclog_entry e;	/* aligned, as the format asks readers to copy records */
	static char log[1 << 20];
	size_t len, at;
	FILE *f;
	int n;

	if (argc != 2 || (f = fopen(argv[1], "rb")) == NULL) {
		fprintf(stderr, "usage: records <log file>\n");
		return (2);
	}
	len = fread(log, 1, sizeof(log), f);
	fclose(f);
	sizes();

	for (at = 0, n = 1; at + 4 <= len; n++) {
		uint32_t h, length;
		size_t i;

		memcpy(&h, log + at, sizeof(h));
		length = PMCLOG_HEADER_TO_LENGTH(h);
		if (length < sizeof(struct pmclog_header) || length > sizeof(e) || at + length > len) {
			fprintf(stderr, "bad record at %zu\n", at);
			return (1);
		}
		memset(&e, 0, sizeof(e));
		memcpy(&e, log + at, length);
		at += length;
		printf("rec %d header magic %lu type %lu length %lu tsc %llu\n", n,
		    (unsigned long)PMCLOG_HEADER_TO_MAGIC(e.pl_cl.pl_header),
		    (unsigned long)PMCLOG_HEADER_TO_TYPE(e.pl_cl.pl_header),
		    (unsigned long)PMCLOG_HEADER_TO_LENGTH(e.pl_cl.pl_header),
		    (unsigned long long)e.pl_cl.pl_tsc);

		switch (PMCLOG_HEADER_TO_TYPE(h)) {
		case PMCLOG_TYPE_CLOSELOG:
		case PMCLOG_TYPE_DROPNOTIFY:
			break;
		case PMCLOG_TYPE_INITIALIZE:
			U(pl_i.pl_version);
			U(pl_i.pl_cpu);
			U(pl_i.pl_tsc_freq);
			U(pl_i.pl_ts.tv_sec);
			U(pl_i.pl_ts.tv_nsec);
			S(pl_i.pl_cpuid, PMC_CPUID_LEN);
			break;
		case PMCLOG_TYPE_PMCALLOCATE:
			U(pl_a.pl_pmcid);
			U(pl_a.pl_event);
			U(pl_a.pl_flags);
			U(pl_a.pl_rate);
			break;
		case PMCLOG_TYPE_PMCALLOCATEDYN:
			U(pl_ad.pl_pmcid);
			U(pl_ad.pl_event);
			U(pl_ad.pl_flags);
			S(pl_ad.pl_evname, PMC_NAME_MAX);
			break;
		case PMCLOG_TYPE_PMCATTACH:
			U(pl_t.pl_pmcid);
			U(pl_t.pl_pid);
			S(pl_t.pl_pathname, PMCLOG_PATH_MAX);
			break;
		case PMCLOG_TYPE_PMCDETACH:
			U(pl_d.pl_pmcid);
			U(pl_d.pl_pid);
			break;
		case PMCLOG_TYPE_PROCCSW:
			U(pl_c.pl_value);
			U(pl_c.pl_pmcid);
			U(pl_c.pl_pid);
			U(pl_c.pl_tid);
			break;
		case PMCLOG_TYPE_PROCEXEC:
			U(pl_x.pl_pid);
			U(pl_x.pl_pmcid);
			U(pl_x.pl_baseaddr);
			U(pl_x.pl_dynaddr);
			S(pl_x.pl_pathname, PMCLOG_PATH_MAX);
			break;
		case PMCLOG_TYPE_PROCEXIT:
			U(pl_e.pl_pmcid);
			U(pl_e.pl_pid);
			U(pl_e.pl_value);
			break;
		case PMCLOG_TYPE_PROCFORK:
			U(pl_f.pl_oldpid);
			U(pl_f.pl_newpid);
			break;
		case PMCLOG_TYPE_SYSEXIT:
			U(pl_se.pl_pid);
			break;
		case PMCLOG_TYPE_USERDATA:
			U(pl_u.pl_userdata);
			break;
		case PMCLOG_TYPE_MAP_IN:
			U(pl_mi.pl_pid);
			U(pl_mi.pl_start);
			S(pl_mi.pl_pathname, PMCLOG_PATH_MAX);
			break;
		case PMCLOG_TYPE_MAP_OUT:
			U(pl_mo.pl_pid);
			U(pl_mo.pl_start);
			U(pl_mo.pl_end);
			break;
		case PMCLOG_TYPE_CALLCHAIN:
			U(pl_cc.pl_pid);
			U(pl_cc.pl_tid);
			U(pl_cc.pl_pmcid);
			U(pl_cc.pl_cpuflags);
			printf("rec %d cpu %lu user %lu\n", n,
			    (unsigned long)PMC_CALLCHAIN_CPUFLAGS_TO_CPU(e.pl_cc.pl_cpuflags),
			    (unsigned long)PMC_CALLCHAIN_CPUFLAGS_TO_USERMODE(e.pl_cc.pl_cpuflags));
			for (i = 0; i < (length - offsetof(struct pmclog_callchain, pl_pc)) / 8; i++)
				printf("rec %d pl_cc.pl_pc[%zu] %llu\n", n, i,
				    (unsigned long long)e.pl_cc.pl_pc[i]);
			break;
		case PMCLOG_TYPE_THR_CREATE:
			U(pl_tc.pl_tid);
			U(pl_tc.pl_pid);
			U(pl_tc.pl_flags);
			S(pl_tc.pl_tdname, PMCLOG_COMM_LEN);
			break;
		case PMCLOG_TYPE_THR_EXIT:
			U(pl_te.pl_tid);
			break;
		case PMCLOG_TYPE_PROC_CREATE:
			U(pl_pc.pl_pid);
			U(pl_pc.pl_flags);
			S(pl_pc.pl_pcomm, PMCLOG_COMM_LEN);
			break;
		default:
			fprintf(stderr, "unknown record type %lu\n",
			    (unsigned long)PMCLOG_HEADER_TO_TYPE(h));
			return (1);
		}
	}
	if (at != len) {
		fprintf(stderr, "%zu stray bytes at the end\n", len - at);
		return (1);
	}
	return (ferror(stdout) ? 1 : 0);
}
