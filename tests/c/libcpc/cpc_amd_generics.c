/*
 * The generic (PAPI_*) events of AMD's core counters on the simulator's AMD models: the model
 * named by the argument (zen4, zen2 or k10) is selected through PMC_SIM_MODEL before the first
 * call.  Prints the counter interface, the generic events the walkers list (all, then per
 * counter), and the exact counts of "hot-cold" (10 000 000 user instructions, 1 000 000
 * branches of which 10 000 mispredicted, 12 500 000 core cycles) through generic events and
 * a raw code placed with picnum, on 4 counters (family 10h has 4).
 *
 * Run with PMC_HOST=sim.
 */
#include <sys/types.h>

#include <inttypes.h>
#include <stdint.h>

#include <libcpc.h>

#include "check.h"

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *at_end;
static int bound, sampled;
static unsigned walked_all, walked_pic[8];
static int last_subcode;

static int
init_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pid; (void)arg;
	CHECK(cpc_bind_pctx(cpc, pctx, lwp, set, 0));
	bound++;
	return (0);
}

static int
fini_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	CHECK(cpc_set_sample(cpc, set, at_end));
	sampled++;
	return (0);
}

static void
generic_all(void *arg, const char *event)
{
	(void)arg;
	EXPECT(strncmp(event, "PAPI", 4) == 0);
	printf("%s%s", walked_all++ ? " " : "generic ", event);
}

static void
generic_pic(void *arg, uint_t picno, const char *event)
{
	(void)arg;
	EXPECT(strncmp(event, "PAPI", 4) == 0);
	EXPECT(picno < 8);
	walked_pic[picno]++;
}

static void
errfn(const char *fn, int subcode, const char *fmt, va_list ap)
{
	(void)fn; (void)fmt; (void)ap;
	last_subcode = subcode;
}

int
main(int argc, char **args)
{
	char *argv[] = { "hot-cold", NULL };
	pctx_t *pctx;
	uint_t pic, npic;
	uint64_t ins, cyc, msp, raw;
	int i_ins, i_cyc, i_msp, i_raw;
	cpc_attr_t last_pic = { "picnum", 0 };
	cpc_attr_t edge = { "edge", 1 };

	EXPECT(argc == 2);
	CHECK(setenv("PMC_SIM_MODEL", args[1], 1));
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	npic = cpc_npic(cpc);
	EXPECT(npic <= 8);
	printf("%s, %u counters, caps %#x\n", cpc_cciname(cpc), npic, cpc_caps(cpc));

	cpc_walk_generic_events_all(cpc, NULL, generic_all);
	printf("\n");
	for (pic = 0; pic < npic; pic++) {
		cpc_walk_generic_events_pic(cpc, pic, NULL, generic_pic);
		/* Every AMD counter counts every event. */
		EXPECT(walked_pic[pic] == walked_all);
	}

	/* A generic event takes no attribute but picnum. */
	cpc_seterrhndlr(cpc, errfn);
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(cpc_set_add_request(cpc, set, "PAPI_tot_ins", 0, CPC_COUNT_USER, 1, &edge));
	FAILS_WITH(cpc_bind_curlwp(cpc, set, 0), EINVAL);
	EXPECT(last_subcode == CPC_ATTRIBUTE_OUT_OF_RANGE);
	CHECK(cpc_set_destroy(cpc, set));

	last_pic.ca_val = npic - 1;
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(i_ins = cpc_set_add_request(cpc, set, "PAPI_tot_ins", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(i_cyc = cpc_set_add_request(cpc, set, "PAPI_tot_cyc", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(i_msp = cpc_set_add_request(cpc, set, "PAPI_br_msp", 0, CPC_COUNT_USER, 0, NULL));
	/* AMD's retired branches as a raw code, on the last counter. */
	CHECK(i_raw = cpc_set_add_request(cpc, set, "0xc2", 0, CPC_COUNT_USER, 1, &last_pic));
	CHECK_PTR(at_end = cpc_buf_create(cpc, set));

	CHECK_PTR(pctx = pctx_create(argv[0], argv, NULL, 0, NULL));
	CHECK(pctx_set_events(pctx, PCTX_INIT_LWP_EVENT, init_lwp, PCTX_FINI_LWP_EVENT, fini_lwp,
	    PCTX_NULL_EVENT));
	CHECK(pctx_run(pctx, 0, 0, NULL));
	EXPECT(bound == 1 && sampled == 1);

	CHECK(cpc_buf_get(cpc, at_end, i_ins, &ins));
	CHECK(cpc_buf_get(cpc, at_end, i_cyc, &cyc));
	CHECK(cpc_buf_get(cpc, at_end, i_msp, &msp));
	CHECK(cpc_buf_get(cpc, at_end, i_raw, &raw));
	printf("PAPI_tot_ins %" PRIu64 "\nPAPI_tot_cyc %" PRIu64 "\nPAPI_br_msp %" PRIu64
	    "\n0xc2 %" PRIu64 "\n", ins, cyc, msp, raw);

	CHECK(cpc_unbind(cpc, set));
	pctx_release(pctx);
	CHECK(cpc_close(cpc));
	return (0);
}
