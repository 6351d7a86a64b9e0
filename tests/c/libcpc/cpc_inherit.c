/*
 * CPC_BIND_LWP_INHERIT on the Linux host: a thread created after the bind is counted, in the
 * binding thread's values (libpmc's PMC_F_THREAD_INHERIT): 4 threads touching 64 fresh pages
 * each add at least 256.
 * Prints "faults N".
 */
#include <sys/types.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

static void *
worker(void *arg)
{
	touch_fresh_pages(*(long *)arg, 64);
	return (NULL);
}

int
main(void)
{
	cpc_t *cpc;
	cpc_set_t *set;
	cpc_buf_t *before, *after, *diff;
	pthread_t threads[4];
	long page = sysconf(_SC_PAGESIZE);
	uint64_t faults;
	int i;

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL));
	CHECK_PTR(before = cpc_buf_create(cpc, set));
	CHECK_PTR(after = cpc_buf_create(cpc, set));
	CHECK_PTR(diff = cpc_buf_create(cpc, set));
	CHECK(cpc_bind_curlwp(cpc, set, CPC_BIND_LWP_INHERIT));
	CHECK(cpc_set_sample(cpc, set, before));
	for (i = 0; i < 4; i++)
		EXPECT(pthread_create(&threads[i], NULL, worker, &page) == 0);
	for (i = 0; i < 4; i++)
		EXPECT(pthread_join(threads[i], NULL) == 0);
	CHECK(cpc_set_sample(cpc, set, after));
	cpc_buf_sub(cpc, diff, after, before);
	CHECK(cpc_buf_get(cpc, diff, 0, &faults));
	printf("faults %" PRIu64 "\n", faults);
	EXPECT(faults >= 4 * 64);
	CHECK(cpc_close(cpc));
	return (0);
}
