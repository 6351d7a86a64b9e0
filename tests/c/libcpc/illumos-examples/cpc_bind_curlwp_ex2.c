/*
 * cpc_bind_curlwp(3CPC), Example 2 ("Write a signal handler to catch overflow signals"), as
 * illumos-gate's usr/src/man/man3cpc/cpc_bind_curlwp.3cpc prints it: the page gives the
 * handler and the setup code "positioned after the code that opens the CPC library and creates
 * a set", building on Example 1.  Assembled here with Example 1's includes, its error() and
 * _lwp_self() (see cpc_bind_curlwp_ex1.c), and these changes, each marked "[assembly]":
 *  - the handler's "(cpc_request_preset(...) != 0)" lacks its "if" (a syntax error on the
 *    page) and names ind1 and val1, which the page never declares: they are declared here and
 *    set to the request's index and PRESET;
 *  - PC and SP are illumos's <sys/regset.h> names of the registers; on Linux x86-64 they are
 *    REG_RIP and REG_RSP (GNU extensions: this program is built with _GNU_SOURCE or as C++);
 *  - the global `index` is renamed by a macro: glibc's <string.h> declares index(3) in the
 *    modes that also declare bzero, which the example uses;
 *  - main() opens the library and creates the set, takes the event from $EVENT (default
 *    PAPI_tot_ins), and its computation touches 4 000 new 4 KiB pages of a static array (one
 *    page fault each; no malloc, whose lock a signal handler calling libcpc could find held).
 * The handler prints a line per overflow and restarts the counters; the program ends with a
 * "signals N" line of the handler's count.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>
#include <libcpc.h>
#include <errno.h>

static void
error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void) vfprintf(stderr, fmt, ap);
	va_end(ap);
	(void) fputc('\n', stderr);
	exit(2);
}

static int
_lwp_self(void)
{
	return (1);
}

/* [assembly] */
#if defined(__x86_64__) && !defined(PC)
#define PC REG_RIP
#define SP REG_RSP
#endif
#if defined(__aarch64__) && !defined(PC)
#define PC 0
#define SP 1
#endif
#define index request_index
int ind1;
uint64_t val1;
volatile sig_atomic_t signals;
static volatile char area[20 * 200 * 4096];

cpc_t     *cpc;
cpc_set_t *set;
cpc_buf_t *buf;
int       index;

void
emt_handler(int sig, siginfo_t *sip, void *arg)
{
     ucontext_t *uap = arg;
     uint64_t val;

     if (sig != SIGEMT || sip->si_code != EMT_CPCOVF) {
         psignal(sig, "example");
         psiginfo(sip, "example");
         return;
     }   

     (void) printf("lwp%d - si_addr %p ucontext: %%pc %p %%sp %p\n",
         _lwp_self(), (void *)sip->si_addr,
#if defined(__x86_64__)
         (void *)uap->uc_mcontext.gregs[PC],
         (void *)uap->uc_mcontext.gregs[SP]);
#else
         (void *)uap, (void *)uap); /* [assembly] no gregs on this architecture */
#endif

     if (cpc_set_sample(cpc, set, buf) != 0)
         error("cannot sample: %s", strerror(errno));

     cpc_buf_get(cpc, buf, index, &val);

     (void) printf("0x%" PRIx64"\n", val);
     (void) fflush(stdout);
     signals++; /* [assembly] */

     /*
     * Update a request's preset and restart the counters. Counters which 
     * have not been preset with cpc_request_preset() will resume counting 
     * from their current value. 
     */
     if (cpc_request_preset(cpc, ind1, val1) != 0) /* [assembly] "if" */
        error("cannot set preset for request %d: %s", ind1, 
             strerror(errno)); 
        if (cpc_set_restart(cpc, set) != 0)                                   
             error("cannot restart lwp%d: %s", _lwp_self(), strerror(errno));
}

int
main(void)
{
	int iter;
	char *event;

	if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL)
		error("perf counters unavailable: %s", strerror(errno));
	if ((event = getenv("EVENT")) == NULL)
		event = "PAPI_tot_ins";
	if ((set = cpc_set_create(cpc)) == NULL)
		error("could not create set: %s", strerror(errno));
	{
#define PRESET (UINT64_MAX - 999ull)
 
     struct sigaction act;
     /* ... */
     act.sa_sigaction = emt_handler;
     bzero(&act.sa_mask, sizeof (act.sa_mask));
     act.sa_flags = SA_RESTART|SA_SIGINFO;
     if (sigaction(SIGEMT, &act, NULL) == -1)
         error("sigaction: %s", strerror(errno));
 
     if ((index = cpc_set_add_request(cpc, set, event, PRESET,
        CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL)) != 0)
        error("cannot add request to set: %s", strerror(errno));
 
     if ((buf = cpc_buf_create(cpc, set)) == NULL)
        error("cannot create buffer: %s", strerror(errno));
 
     ind1 = index; /* [assembly] */
     val1 = PRESET;
     if (cpc_bind_curlwp(cpc, set, 0) == -1)
         error("cannot bind lwp%d: %s", _lwp_self(), strerror(errno));
 
     for (iter = 1; iter <= 20; iter++) {
         /* ==> Computation to be measured goes here <== */
         /*
          * [assembly] 200 pages of `area` touched for the first time: 200 page faults.
          * No malloc here: the handler's libcpc calls allocate, and a signal arriving in the
          * middle of malloc would find its lock held (see the report of issue 25).
          */
         size_t i;

         for (i = 0; i < 200; i++)
             area[((size_t)(iter - 1) * 200 + i) * 4096] = 1;
     }
 
     /*
      * [assembly] The Linux host relays overflows from a watcher thread, about a millisecond
      * late: wait for the first (up to 2 s), so that it comes before the set is unbound.
      */
     for (iter = 0; iter < 2000 && signals == 0; iter++)
         usleep(1000);
 
     cpc_unbind(cpc, set);      /* done */
	}
	(void) printf("signals %d\n", (int)signals);
	return (0);
}
