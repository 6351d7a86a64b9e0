/*
 * The semantics of the v2 API that do not depend on what is counted, with exact numbers on the
 * simulator (a set bound to the calling thread counts nothing there: the simulated machine runs
 * none of this process's code, so every value is its preset) and real counts on the Linux host
 * (page faults of pages this program touches).
 *
 * Request walk order, copied attribute names, presets, cpc_request_preset and
 * cpc_set_request_preset with cpc_set_restart, cpc_disable/cpc_enable freezing values and
 * hrtime, buffer arithmetic, the event and attribute walkers.
 */
#include <sys/types.h>
#include <sys/mman.h>

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

static char walk_log[512];

static void
log_request(void *arg, int index, const char *event, uint64_t preset, uint_t flags, int nattrs,
    const cpc_attr_t *attrs)
{
	char line[128];
	int i;

	(void)arg;
	snprintf(line, sizeof(line), "%d:%s:%" PRIu64 ":%u", index, event, preset, flags);
	strcat(walk_log, line);
	for (i = 0; i < nattrs; i++) {
		snprintf(line, sizeof(line), ":%s=%" PRIu64, attrs[i].ca_name, attrs[i].ca_val);
		strcat(walk_log, line);
	}
	strcat(walk_log, ";");
}

static int names, last_is_picnum, generic_on_fixed0, papi_in_platform;

static void
count_attr(void *arg, const char *attr)
{
	(void)arg;
	names++;
	last_is_picnum = strcmp(attr, "picnum") == 0;
}

static void
generic_pic(void *arg, uint_t picno, const char *event)
{
	(void)arg; (void)picno;
	EXPECT(strncmp(event, "PAPI", 4) == 0);
	generic_on_fixed0 += strcmp(event, "PAPI_tot_ins") == 0 ? 1 : 100;
}

static void
platform_all(void *arg, const char *event)
{
	(void)arg;
	if (strncmp(event, "PAPI", 4) == 0)
		papi_in_platform++;
}

static uint64_t
get(cpc_t *cpc, cpc_buf_t *buf, int index)
{
	uint64_t v;

	CHECK(cpc_buf_get(cpc, buf, index, &v));
	return (v);
}

int
main(void)
{
	const char *host = getenv("PMC_HOST");
	int sim = host != NULL && strcmp(host, "sim") == 0;
	const char *e0 = sim ? "PAPI_tot_ins" : "page-faults";
	const char *e1 = sim ? "PAPI_br_ins" : "task-clock";
	cpc_t *cpc;
	cpc_set_t *set;
	cpc_buf_t *before, *after, *diff, *frozen, *other;
	char *name;
	cpc_attr_t attr;
	hrtime_t t;
	long page = sysconf(_SC_PAGESIZE);

	/* The LP64 layout of illumos' cpc_attr_t. */
	EXPECT(sizeof(cpc_attr_t) == 16 && offsetof(cpc_attr_t, ca_val) == 8);
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));

	/* Attribute names are copied: the caller may free its own at once. */
	CHECK_PTR(name = strdup("picnum"));
	attr.ca_name = name;
	attr.ca_val = 1;
	EXPECT(cpc_set_add_request(cpc, set, e0, 1000, CPC_COUNT_USER, 0, NULL) == 0);
	EXPECT(cpc_set_add_request(cpc, set, e1, UINT64_MAX - 5, CPC_COUNT_USER | CPC_COUNT_SYSTEM,
	    1, &attr) == 1);
	free(name);
	cpc_walk_requests(cpc, set, NULL, log_request);
	printf("walk %s\n", walk_log);
	{
		char expected[512];

		snprintf(expected, sizeof(expected), "1:%s:%" PRIu64 ":6:picnum=1;0:%s:1000:2;", e1,
		    UINT64_MAX - 5, e0);
		EXPECT(strcmp(walk_log, expected) == 0);
	}

	CHECK_PTR(before = cpc_buf_create(cpc, set));
	CHECK_PTR(after = cpc_buf_create(cpc, set));
	CHECK_PTR(diff = cpc_buf_create(cpc, set));
	CHECK_PTR(frozen = cpc_buf_create(cpc, set));
	EXPECT(cpc_buf_hrtime(cpc, before) == 0 && cpc_buf_tick(cpc, before) == 0);

	CHECK(cpc_bind_curlwp(cpc, set, 0));
	CHECK(cpc_set_sample(cpc, set, before));
	touch_fresh_pages(page, 64);
	CHECK(cpc_set_sample(cpc, set, after));
	EXPECT(cpc_buf_hrtime(cpc, after) >= cpc_buf_hrtime(cpc, before));
	EXPECT(cpc_buf_tick(cpc, after) >= cpc_buf_tick(cpc, before));
	cpc_buf_sub(cpc, diff, after, before);
	printf("%s %" PRIu64 " -> %" PRIu64 " (+%" PRIu64 ")\n", e0, get(cpc, before, 0),
	    get(cpc, after, 0), get(cpc, diff, 0));
	if (sim) {
		/* Presets, and (preset + events) mod 2^64. */
		EXPECT(get(cpc, before, 0) == 1000 && get(cpc, after, 0) == 1000);
		EXPECT(get(cpc, after, 1) == UINT64_MAX - 5);
	} else {
		EXPECT(get(cpc, before, 0) >= 1000);
		EXPECT(get(cpc, diff, 0) >= 64);
		EXPECT(get(cpc, after, 1) > get(cpc, before, 1) || get(cpc, after, 1) < 1000);
	}
	EXPECT(cpc_buf_hrtime(cpc, diff) == cpc_buf_hrtime(cpc, after));
	EXPECT(cpc_buf_tick(cpc, diff) == cpc_buf_tick(cpc, after) - cpc_buf_tick(cpc, before));

	/* Restart from new presets: cpc_request_preset for the running set, and Oracle's
	 * cpc_set_request_preset. */
	CHECK(cpc_request_preset(cpc, 0, 7));
	CHECK(cpc_set_request_preset(cpc, set, 1, 9));
	CHECK(cpc_set_sample(cpc, set, before));
	EXPECT(sim ? get(cpc, before, 0) == 1000 : get(cpc, before, 0) >= 1000);
	CHECK(cpc_set_restart(cpc, set));
	CHECK(cpc_set_sample(cpc, set, after));
	printf("after restart %" PRIu64 " %" PRIu64 "\n", get(cpc, after, 0), get(cpc, after, 1));
	if (sim)
		EXPECT(get(cpc, after, 0) == 7 && get(cpc, after, 1) == 9);
	else
		EXPECT(get(cpc, after, 0) >= 7 && get(cpc, after, 0) < 1000);

	/* Disabled: values and hrtime stay as they were at cpc_disable. */
	CHECK(cpc_disable(cpc));
	CHECK(cpc_set_sample(cpc, set, frozen));
	touch_fresh_pages(page, 64);
	t = cpc_buf_hrtime(cpc, frozen);
	CHECK(cpc_set_sample(cpc, set, after));
	EXPECT(cpc_buf_hrtime(cpc, after) == t);
	EXPECT(get(cpc, after, 0) == get(cpc, frozen, 0));
	CHECK(cpc_enable(cpc));
	touch_fresh_pages(page, 64);
	CHECK(cpc_set_sample(cpc, set, after));
	EXPECT(cpc_buf_hrtime(cpc, after) > t);

	/* Buffer arithmetic: add, copy, zero, set; the destination may alias an operand; a buffer
	 * of another size is left alone. */
	CHECK(cpc_buf_set(cpc, before, 0, 5));
	CHECK(cpc_buf_set(cpc, before, 1, UINT64_MAX));
	cpc_buf_copy(cpc, diff, before);
	cpc_buf_add(cpc, diff, diff, before);
	EXPECT(get(cpc, diff, 0) == 10 && get(cpc, diff, 1) == UINT64_MAX - 1);
	cpc_buf_sub(cpc, diff, diff, diff);
	EXPECT(get(cpc, diff, 0) == 0 && get(cpc, diff, 1) == 0);
	{
		cpc_set_t *one;

		CHECK_PTR(one = cpc_set_create(cpc));
		CHECK(cpc_set_add_request(cpc, one, e0, 0, CPC_COUNT_USER, 0, NULL));
		CHECK_PTR(other = cpc_buf_create(cpc, one));
		CHECK(cpc_buf_set(cpc, other, 0, 77));
		cpc_buf_copy(cpc, before, other);
		EXPECT(get(cpc, before, 0) == 5);
		cpc_buf_add(cpc, other, other, before);
		EXPECT(get(cpc, other, 0) == 77);
		CHECK(cpc_set_destroy(cpc, one));
		/* Its buffer outlives the set. */
		EXPECT(get(cpc, other, 0) == 77);
	}
	cpc_buf_zero(cpc, before);
	EXPECT(get(cpc, before, 0) == 0 && get(cpc, before, 1) == 0);
	EXPECT(cpc_buf_hrtime(cpc, before) == 0 && cpc_buf_tick(cpc, before) == 0);

	/* Walkers. */
	cpc_walk_attrs(cpc, NULL, count_attr);
	EXPECT(names == (sim ? 5 : 1) && last_is_picnum);
	cpc_walk_events_all(cpc, NULL, platform_all);
	EXPECT(papi_in_platform == 0);
	if (sim) {
		cpc_walk_generic_events_pic(cpc, 4, NULL, generic_pic);
		EXPECT(generic_on_fixed0 == 1);
	}

	/* Destroying a bound set unbinds it; closing frees the rest. */
	CHECK(cpc_set_destroy(cpc, set));
	FAILS_WITH(cpc_set_restart(cpc, NULL), EINVAL);
	CHECK(cpc_close(cpc));
	printf("api ok\n");
	return (0);
}
