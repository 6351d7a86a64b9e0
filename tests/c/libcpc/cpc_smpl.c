/*
 * SMPL requests on the simulator host: "hot-cold" retires 10 000 000 user instructions (9 000 000
 * in hot, then 1 000 000 in cold) and 1 000 000 branches.  A set with a counting request
 * (PAPI_br_ins) and an SMPL request sampling PAPI_tot_ins every 1 000 000 instructions, bound to
 * the program through pctx, keeps min(10, smpl_nrecs) records, each the sampled instruction
 * pointer.  argv[1] is smpl_nrecs.  Prints "records N" and one "ip 0x..." line per record.
 * With argv[2] "notify" the SMPL request also has CPC_OVF_NOTIFY_EMT: the thread running
 * pctx_run gets one SIGEMT (EMT_CPCOVF) when the records are in, and nothing stops; then
 * "signals N" ends the output.
 */
#include <sys/types.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>

#include <libcpc.h>

#include "check.h"

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *buf;
static int items, attrs;
static volatile sig_atomic_t signals, bad_code;

static void
on_emt(int sig, siginfo_t *info, void *context)
{
	(void)context;
	if (sig != SIGEMT || info->si_code != EMT_CPCOVF || info->si_addr == NULL)
		bad_code = 1;
	signals++;
}

static int
init_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pid; (void)arg;
	CHECK(cpc_bind_pctx(cpc, pctx, lwp, set, 0));
	return (0);
}

static int
fini_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	CHECK(cpc_set_sample(cpc, set, buf));
	return (0);
}

static void
item(void *arg, const char *name, int index)
{
	(void)arg;
	EXPECT(strcmp(name, "ip") == 0 && index == 0);
	items++;
}

static void
attr_name(void *arg, const char *name)
{
	(void)arg;
	EXPECT(strcmp(name, attrs == 0 ? "smpl_nrecs" : "picnum") == 0);
	attrs++;
}

static void
no_event(void *arg, const char *event)
{
	(void)arg; (void)event;
	FAIL("called for a bad target");
}

int
main(int argc, char **argv)
{
	char *program[] = { "hot-cold", NULL };
	pctx_t *pctx;
	cpc_attr_t smpl_attrs[1];
	uint64_t branches, ip, *record;
	uint_t records, i;
	int counting, sampling;

	int notify = argc == 3 && strcmp(argv[2], "notify") == 0;

	EXPECT(argc == 2 || notify);
	handle_signal(SIGEMT, on_emt);
	smpl_attrs[0].ca_name = "smpl_nrecs";
	smpl_attrs[0].ca_val = strtoull(argv[1], NULL, 0);

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	EXPECT(cpc_smpl_npic(cpc) == 1 && strlen(cpc_smpl_iname(cpc)) > 0);
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(counting = cpc_set_add_request(cpc, set, "PAPI_br_ins", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(sampling = cpc_set_add_request(cpc, set, "PAPI_tot_ins", UINT64_MAX - 999999,
	    CPC_COUNT_USER | CPC_HW_SMPL | (notify ? CPC_OVF_NOTIFY_EMT : 0), 1, smpl_attrs));
	CHECK_PTR(buf = cpc_buf_create(cpc, set));

	cpc_walk_smpl_recitems(cpc, NULL, item);
	cpc_walk_smpl_recitems_req(cpc, set, sampling, NULL, item);
	EXPECT(items == 2);
	errno = 0;
	cpc_walk_smpl_recitems_req(cpc, set, counting, NULL, item);
	EXPECT(items == 2 && errno == EINVAL);
	cpc_walk_attrs_common(cpc, NULL, CPC_TARGET_SMPL, attr_name);
	EXPECT(attrs == 2);
	errno = 0;
	cpc_walk_events_all_common(cpc, NULL, 7, no_event);
	EXPECT(errno == EINVAL);

	CHECK_PTR(pctx = pctx_create(program[0], program, NULL, 0, NULL));
	CHECK(pctx_set_events(pctx, PCTX_INIT_LWP_EVENT, init_lwp, PCTX_FINI_LWP_EVENT, fini_lwp,
	    PCTX_NULL_EVENT));
	CHECK(pctx_run(pctx, 0, 0, NULL));

	CHECK(cpc_buf_get(cpc, buf, counting, &branches));
	EXPECT(branches == 1000000);
	CHECK(cpc_buf_smpl_rec_count(cpc, buf, sampling, &records));
	printf("records %u\n", records);
	for (i = 0; i < records; i++) {
		CHECK(cpc_buf_smpl_get_item(cpc, buf, sampling, (int)i, 0, &ip));
		CHECK_PTR(record = cpc_buf_smpl_get_record(cpc, buf, sampling, (int)i));
		EXPECT(record[0] == ip);
		printf("ip %#" PRIx64 "\n", ip);
	}
	EXPECT(!bad_code);
	EXPECT(notify || signals == 0);
	if (notify)
		printf("signals %d\n", (int)signals);
	FAILS_WITH(cpc_buf_smpl_rec_count(cpc, buf, counting, &records), EINVAL);
	FAILS_WITH(cpc_buf_smpl_get_item(cpc, buf, sampling, (int)records, 0, &ip), EINVAL);
	FAILS_WITH(cpc_buf_smpl_get_item(cpc, buf, sampling, 0, 1, &ip), EINVAL);
	NULL_WITH(cpc_buf_smpl_get_record(cpc, buf, sampling, -1), EINVAL);
	NULL_WITH(cpc_buf_smpl_get_record(cpc, buf, counting, 0), EINVAL);

	pctx_release(pctx);
	CHECK(cpc_close(cpc));
	return (0);
}
