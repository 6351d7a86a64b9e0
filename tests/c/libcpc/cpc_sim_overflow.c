/*
 * Overflow signals on the simulator host: a set bound through libpctx to the simulated
 * "hot-cold" (10 000 000 user instructions in 1 000 blocks of 10 000, 1 000 branches each)
 * whose instruction request has CPC_OVF_NOTIFY_EMT and the preset UINT64_MAX - 999 999:
 * every 1 000 000 instructions the counters stop and the thread running pctx_run gets SIGEMT
 * (SIGSTKFLT on Linux) with si_code EMT_CPCOVF and si_addr the sampled instruction.  The
 * handler samples the frozen set — the instruction counter has wrapped to exactly 0, the
 * branch counter (no flag, preset 0) holds the 100 000 branches of the period — and restarts
 * it from its presets.  Exactly 10 signals.
 *
 * With the argument "norestart" the handler does not restart: one signal, and the set stays
 * frozen at the first overflow until the end.  With "preset", the handler of the 5th signal
 * sets the instruction request's preset to UINT64_MAX - 1 999 999 before restarting: 5
 * periods of 1 000 000, then 2 of 2 000 000 and 1 000 000 instructions left: 7 signals.
 *
 * A second argument names the simulated CPU (PMC_SIM_MODEL, e.g. zen4).
 *
 * Run with PMC_HOST=sim.  Prints the number of signals and the values at the end.
 */
#include <sys/types.h>

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>

#include <libcpc.h>

#include "check.h"

#define PERIOD 1000000

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *in_handler, *at_end;
static int restart = 1, represet;
static uint64_t period = PERIOD;
static volatile sig_atomic_t signals, bad_code, bad_value, restart_failed;

static void
on_emt(int sig, siginfo_t *info, void *context)
{
	uint64_t ins, br;

	(void)context;
	if (sig != SIGEMT || info->si_code != EMT_CPCOVF || info->si_addr == NULL)
		bad_code = 1;
	if (cpc_set_sample(cpc, set, in_handler) != 0 ||
	    cpc_buf_get(cpc, in_handler, 0, &ins) != 0 ||
	    cpc_buf_get(cpc, in_handler, 1, &br) != 0 || ins != 0 || br != period / 10)
		bad_value = 1;
	signals++;
	if (represet && signals == 5) {
		period = 2 * PERIOD;
		if (cpc_request_preset(cpc, 0, UINT64_MAX - (period - 1)) != 0)
			restart_failed = 1;
	}
	if (restart && cpc_set_restart(cpc, set) != 0)
		restart_failed = 1;
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
	CHECK(cpc_set_sample(cpc, set, at_end));
	return (0);
}

int
main(int argc, char **args)
{
	char *argv[] = { "hot-cold", NULL };
	pctx_t *pctx;
	uint64_t ins, br;

	if (argc > 1 && strcmp(args[1], "norestart") == 0)
		restart = 0;
	if (argc > 1 && strcmp(args[1], "preset") == 0)
		represet = 1;
	if (argc > 2)
		CHECK(setenv("PMC_SIM_MODEL", args[2], 1));
	handle_signal(SIGEMT, on_emt);

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	EXPECT(cpc_caps(cpc) & CPC_CAP_OVERFLOW_INTERRUPT);
	CHECK_PTR(set = cpc_set_create(cpc));
	EXPECT(cpc_set_add_request(cpc, set, "PAPI_tot_ins", UINT64_MAX - (PERIOD - 1),
	    CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) == 0);
	EXPECT(cpc_set_add_request(cpc, set, "PAPI_br_ins", 0, CPC_COUNT_USER, 0, NULL) == 1);
	CHECK_PTR(in_handler = cpc_buf_create(cpc, set));
	CHECK_PTR(at_end = cpc_buf_create(cpc, set));
	/* Without a set of its own or a signal received, this thread has nothing to restart. */
	FAILS_WITH(cpc_set_restart(cpc, set), EINVAL);

	CHECK_PTR(pctx = pctx_create(argv[0], argv, NULL, 0, NULL));
	CHECK(pctx_set_events(pctx, PCTX_INIT_LWP_EVENT, init_lwp, PCTX_FINI_LWP_EVENT, fini_lwp,
	    PCTX_NULL_EVENT));
	CHECK(pctx_run(pctx, 0, 0, NULL));

	CHECK(cpc_buf_get(cpc, at_end, 0, &ins));
	CHECK(cpc_buf_get(cpc, at_end, 1, &br));
	printf("signals %d\ninstructions %" PRIu64 "\nbranches %" PRIu64 "\n", (int)signals, ins,
	    br);
	EXPECT(!bad_code && !bad_value && !restart_failed);
	CHECK(cpc_unbind(cpc, set));
	/* The set that signalled is gone: nothing to restart. */
	FAILS_WITH(cpc_set_restart(cpc, set), EINVAL);
	pctx_release(pctx);
	CHECK(cpc_close(cpc));
	return (0);
}
