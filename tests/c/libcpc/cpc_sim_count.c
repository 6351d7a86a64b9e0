/*
 * Counting a simulated program through libpctx and cpc_bind_pctx on the simulator host, with
 * exact numbers: "hot-cold" retires 10 000 000 user instructions in 1 000 blocks, each with
 * 1 000 branches of which 10 mispredicted.  The set has generic events on general-purpose
 * counters, a platform event on the fixed instruction counter (with a preset), and a request
 * that counts in no mode (its value stays its preset).
 *
 * With an argument, counts that simulated program instead ("threads": two threads, counted
 * together) and checks only the values that do not depend on it.
 *
 * Run with PMC_HOST=sim.  Prints each value.
 */
#include <sys/types.h>

#include <inttypes.h>
#include <stdint.h>

#include <libcpc.h>

#include "check.h"

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *at_end;
static int bound, sampled, exited;

static int
init_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pid;
	EXPECT(arg == (void *)&bound);
	/* Counting is per process: the set goes on LWP 1, and counts every LWP. */
	if (lwp != 1)
		return (0);
	CHECK(cpc_bind_pctx(cpc, pctx, lwp, set, 0));
	bound++;
	return (0);
}

static int
fini_lwp(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx; (void)pid; (void)arg;
	if (lwp != 1)
		return (0);
	CHECK(cpc_set_sample(cpc, set, at_end));
	sampled++;
	return (0);
}

static void
on_exit_(pctx_t *pctx, pid_t pid, id_t lwp, int status, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	EXPECT(status == 0);
	exited++;
}

int
main(int argc, char **args)
{
	char *argv[] = { argc > 1 ? args[1] : "hot-cold", NULL };
	int hot_cold = argc == 1;
	pctx_t *pctx;
	uint64_t ins, br, msp, fixed, none;
	int i_ins, i_br, i_msp, i_fixed, i_none;
	cpc_attr_t on_fixed0 = { "picnum", 4 };

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	EXPECT(cpc_npic(cpc) == 7);
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(i_ins = cpc_set_add_request(cpc, set, "PAPI_tot_ins", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(i_br = cpc_set_add_request(cpc, set, "PAPI_br_ins", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(i_msp = cpc_set_add_request(cpc, set, "PAPI_br_msp", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(i_fixed = cpc_set_add_request(cpc, set, "instr_retired.any", 5,
	    CPC_COUNT_USER | CPC_COUNT_SYSTEM, 1, &on_fixed0));
	CHECK(i_none = cpc_set_add_request(cpc, set, "PAPI_tot_cyc", 42, 0, 0, NULL));
	EXPECT(i_ins == 0 && i_br == 1 && i_msp == 2 && i_fixed == 3 && i_none == 4);
	CHECK_PTR(at_end = cpc_buf_create(cpc, set));

	CHECK_PTR(pctx = pctx_create(argv[0], argv, &bound, 0, NULL));
	CHECK(pctx_set_events(pctx, PCTX_INIT_LWP_EVENT, init_lwp, PCTX_FINI_LWP_EVENT, fini_lwp,
	    PCTX_SYSC_EXIT_EVENT, on_exit_, PCTX_NULL_EVENT));
	CHECK(pctx_run(pctx, 0, 0, NULL));
	EXPECT(bound == 1 && sampled == 1 && exited == 1);

	CHECK(cpc_buf_get(cpc, at_end, i_ins, &ins));
	CHECK(cpc_buf_get(cpc, at_end, i_br, &br));
	CHECK(cpc_buf_get(cpc, at_end, i_msp, &msp));
	CHECK(cpc_buf_get(cpc, at_end, i_fixed, &fixed));
	CHECK(cpc_buf_get(cpc, at_end, i_none, &none));
	printf("PAPI_tot_ins %" PRIu64 "\nPAPI_br_ins %" PRIu64 "\nPAPI_br_msp %" PRIu64
	    "\ninstr_retired.any %" PRIu64 "\nnothing %" PRIu64 "\n", ins, br, msp, fixed, none);
	EXPECT(!hot_cold || (ins == 10000000 && br == 1000000 && msp == 10000));
	EXPECT(fixed == ins + 5);
	EXPECT(none == 42);
	EXPECT(cpc_buf_hrtime(cpc, at_end) > 0);

	CHECK(cpc_unbind(cpc, set));
	FAILS_WITH(cpc_unbind(cpc, set), EINVAL);
	pctx_release(pctx);
	CHECK(cpc_close(cpc));
	return (0);
}
