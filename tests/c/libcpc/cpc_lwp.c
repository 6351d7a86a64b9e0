/*
 * Per-LWP counts on the Linux host: two threads each bind their own set with cpc_bind_curlwp
 * and read their own page faults while the other thread runs: the toucher counts the PAGES
 * fresh pages it writes (at least 90%: a few may come as huge pages), the idler far fewer.
 * Then a bind without CPC_BIND_LWP_INHERIT does not count a thread created after it.
 * Prints "toucher N", "idler N" and "uninherited N".
 */
#include <sys/types.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

#define PAGES 2000

static pthread_barrier_t both;
static long page;

/* The page faults of the calling thread between the two barriers; touches pages if `touch`. */
static uint64_t
own_faults(int touch)
{
	cpc_t *cpc;
	cpc_set_t *set;
	cpc_buf_t *before, *after, *diff;
	uint64_t faults;

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL));
	CHECK_PTR(before = cpc_buf_create(cpc, set));
	CHECK_PTR(after = cpc_buf_create(cpc, set));
	CHECK_PTR(diff = cpc_buf_create(cpc, set));
	CHECK(cpc_bind_curlwp(cpc, set, 0));
	CHECK(cpc_set_sample(cpc, set, before));
	pthread_barrier_wait(&both);
	if (touch)
		touch_fresh_pages(page, PAGES);
	pthread_barrier_wait(&both);
	CHECK(cpc_set_sample(cpc, set, after));
	cpc_buf_sub(cpc, diff, after, before);
	CHECK(cpc_buf_get(cpc, diff, 0, &faults));
	CHECK(cpc_unbind(cpc, set));
	return (faults);
}

static void *
toucher(void *result)
{
	*(uint64_t *)result = own_faults(1);
	return (NULL);
}

static void *
idler(void *result)
{
	*(uint64_t *)result = own_faults(0);
	return (NULL);
}

static void *
touch_only(void *arg)
{
	(void)arg;
	touch_fresh_pages(page, PAGES);
	return (NULL);
}

int
main(void)
{
	pthread_t a, b, c;
	uint64_t touched = 0, idled = 0, uninherited;
	cpc_t *cpc;
	cpc_set_t *set;
	cpc_buf_t *before, *after, *diff;

	page = sysconf(_SC_PAGESIZE);
	EXPECT(pthread_barrier_init(&both, NULL, 2) == 0);
	EXPECT(pthread_create(&a, NULL, toucher, &touched) == 0);
	EXPECT(pthread_create(&b, NULL, idler, &idled) == 0);
	EXPECT(pthread_join(a, NULL) == 0);
	EXPECT(pthread_join(b, NULL) == 0);
	printf("toucher %" PRIu64 "\nidler %" PRIu64 "\n", touched, idled);
	EXPECT(touched >= PAGES * 9 / 10);
	EXPECT(idled < PAGES / 10);

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL));
	CHECK_PTR(before = cpc_buf_create(cpc, set));
	CHECK_PTR(after = cpc_buf_create(cpc, set));
	CHECK_PTR(diff = cpc_buf_create(cpc, set));
	CHECK(cpc_bind_curlwp(cpc, set, 0));
	CHECK(cpc_set_sample(cpc, set, before));
	EXPECT(pthread_create(&c, NULL, touch_only, NULL) == 0);
	EXPECT(pthread_join(c, NULL) == 0);
	CHECK(cpc_set_sample(cpc, set, after));
	cpc_buf_sub(cpc, diff, after, before);
	CHECK(cpc_buf_get(cpc, diff, 0, &uninherited));
	printf("uninherited %" PRIu64 "\n", uninherited);
	EXPECT(uninherited < PAGES / 10);
	CHECK(cpc_close(cpc));
	return (0);
}
