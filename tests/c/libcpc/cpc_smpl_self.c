/*
 * An SMPL request of the calling thread on the Linux host: sampling every page fault
 * (preset UINT64_MAX: period 1) while touching 64 fresh pages keeps smpl_nrecs = 16 records,
 * each a user-space instruction pointer; the counting request of the same set counts the faults.
 * With the argument "notify" the request also has CPC_OVF_NOTIFY_EMT: one SIGEMT (si_code
 * EMT_CPCOVF) when the 16 records are in, and no more.  Prints "records N faults M" and, with
 * "notify", "signals N".
 */
#include <sys/types.h>
#include <sys/mman.h>

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

static volatile sig_atomic_t signals, bad_code;

static void
on_emt(int sig, siginfo_t *info, void *context)
{
	(void)context;
	if (sig != SIGEMT || info->si_code != EMT_CPCOVF)
		bad_code = 1;
	signals++;
}

int
main(int argc, char **argv)
{
	int notify = argc > 1 && strcmp(argv[1], "notify") == 0;
	struct timespec ms = { 0, 1000000 };
	cpc_t *cpc;
	cpc_set_t *set;
	cpc_buf_t *buf;
	cpc_attr_t nrecs = { "smpl_nrecs", 16 };
	long page = sysconf(_SC_PAGESIZE);
	uint64_t faults, ip;
	uint_t records, i;
	int counting, sampling;

	handle_signal(SIGEMT, on_emt);
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(counting = cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(sampling = cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX,
	    CPC_COUNT_USER | CPC_HW_SMPL | (notify ? CPC_OVF_NOTIFY_EMT : 0), 1, &nrecs));
	CHECK_PTR(buf = cpc_buf_create(cpc, set));
	CHECK(cpc_bind_curlwp(cpc, set, 0));

	touch_fresh_pages(page, 64);
	for (i = 0; notify && i < 2000 && signals == 0; i++)
		nanosleep(&ms, NULL);
	/* Time for a wrong second signal. */
	for (i = 0; notify && i < 50; i++)
		nanosleep(&ms, NULL);

	CHECK(cpc_set_sample(cpc, set, buf));
	CHECK(cpc_buf_get(cpc, buf, counting, &faults));
	CHECK(cpc_buf_smpl_rec_count(cpc, buf, sampling, &records));
	printf("records %u faults %" PRIu64 "\n", records, faults);
	EXPECT(faults >= 64 && records == 16);
	for (i = 0; i < records; i++) {
		CHECK(cpc_buf_smpl_get_item(cpc, buf, sampling, (int)i, 0, &ip));
		EXPECT(ip != 0);
	}
	if (notify) {
		printf("signals %d\n", (int)signals);
		EXPECT(signals == 1 && !bad_code);
	} else {
		EXPECT(signals == 0);
	}
	CHECK(cpc_close(cpc));
	return (0);
}
