/*
 * An SMPL request of the calling thread on the Linux host: sampling every page fault
 * (preset UINT64_MAX: period 1) while touching 64 fresh pages keeps smpl_nrecs = 16 records,
 * each a user-space instruction pointer; the counting request of the same set counts the faults.
 * Prints "records N faults M".
 */
#include <sys/types.h>
#include <sys/mman.h>

#include <inttypes.h>
#include <stdint.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

int
main(void)
{
	cpc_t *cpc;
	cpc_set_t *set;
	cpc_buf_t *buf;
	cpc_attr_t nrecs = { "smpl_nrecs", 16 };
	long page = sysconf(_SC_PAGESIZE);
	uint64_t faults, ip;
	uint_t records, i;
	int counting, sampling;

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(counting = cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(sampling = cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX,
	    CPC_COUNT_USER | CPC_HW_SMPL, 1, &nrecs));
	CHECK_PTR(buf = cpc_buf_create(cpc, set));
	CHECK(cpc_bind_curlwp(cpc, set, 0));

	touch_fresh_pages(page, 64);

	CHECK(cpc_set_sample(cpc, set, buf));
	CHECK(cpc_buf_get(cpc, buf, counting, &faults));
	CHECK(cpc_buf_smpl_rec_count(cpc, buf, sampling, &records));
	printf("records %u faults %" PRIu64 "\n", records, faults);
	EXPECT(faults >= 64 && records == 16);
	for (i = 0; i < records; i++) {
		CHECK(cpc_buf_smpl_get_item(cpc, buf, sampling, (int)i, 0, &ip));
		EXPECT(ip != 0);
	}
	CHECK(cpc_close(cpc));
	return (0);
}
