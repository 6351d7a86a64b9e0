/*
 * Overflow signals on the Linux host: a request counting page faults with CPC_OVF_NOTIFY_EMT and
 * the preset UINT64_MAX - 15 overflows every 16 faults.  Each overflow stops the set and sends
 * SIGEMT (SIGSTKFLT on Linux, as libcpc.h defines it) with si_code EMT_CPCOVF and si_addr the
 * sampled instruction; the handler samples the frozen set (the overflowed counter has wrapped:
 * (preset + events) mod 2^64, the events past the overflow) and restarts it from its preset.
 *
 * Each batch of 16 fresh pages brings at least one signal.  The count is per process, and the
 * host's own threads fault now and then (reading a restarted counter's new ring, for one), so
 * a batch may bring one more: 10 batches give 10 to 20 signals.  Prints "signals ok".
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

#define PERIOD 16

static cpc_t *cpc;
static cpc_set_t *set;
static cpc_buf_t *in_handler;
static volatile sig_atomic_t signals, bad_code, bad_value, restart_failed;

static void
on_emt(int sig, siginfo_t *info, void *context)
{
	uint64_t faults;

	(void)context;
	if (sig != SIGEMT || info->si_code != EMT_CPCOVF || info->si_addr == NULL)
		bad_code = 1;
	if (cpc_set_sample(cpc, set, in_handler) != 0 ||
	    cpc_buf_get(cpc, in_handler, 0, &faults) != 0 || faults >= UINT32_MAX)
		bad_value = 1;	/* not wrapped past the overflow */
	if (cpc_set_restart(cpc, set) != 0)
		restart_failed = 1;
	signals++;
}

/* Waits up to `ms` milliseconds for `n` signals. */
static void
wait_for(int n, int ms)
{
	struct timespec one = { 0, 1000000 };
	int i;

	for (i = 0; i < ms && signals < n; i++)
		nanosleep(&one, NULL);
}

int
main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int batch;

	handle_signal(SIGEMT, on_emt);

	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	EXPECT(cpc_caps(cpc) & CPC_CAP_OVERFLOW_INTERRUPT);
	CHECK_PTR(set = cpc_set_create(cpc));
	EXPECT(cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX - (PERIOD - 1),
	    CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL) == 0);
	EXPECT(cpc_set_add_request(cpc, set, "task-clock", 0, CPC_COUNT_USER, 0, NULL) == 1);
	CHECK_PTR(in_handler = cpc_buf_create(cpc, set));
	CHECK(cpc_bind_curlwp(cpc, set, 0));

	for (batch = 1; batch <= 10; batch++) {
		int before = signals;

		touch_fresh_pages(page, PERIOD);
		wait_for(before + 1, 2000);
		EXPECT(signals > before);
	}
	EXPECT(signals >= 10 && signals <= 20);
	printf("signals ok\n");
	EXPECT(!bad_code && !bad_value && !restart_failed);
	CHECK(cpc_unbind(cpc, set));
	CHECK(cpc_close(cpc));
	return (0);
}
