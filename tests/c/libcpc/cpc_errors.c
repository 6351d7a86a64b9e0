/*
 * Every errno and error subcode of libcpc (reference §2, §3.3), on the host in PMC_HOST ("sim":
 * the simulated Skylake, 4 general-purpose + 3 fixed counters; "linux": software events).  The
 * error handler records the function and subcode of each call; a failure without a subcode must
 * not call it.  errno is kept across the handler.
 *
 * The first failure (before a handler is set) goes to the default handler, which prints
 * "libcpc: cpc_set_add_request: Unknown event" to stderr (the test checks it).
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <inttypes.h>
#include <stdint.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

static int last_subcode;
static char last_fn[64];
static int handler_calls;

static void
handler(const char *fn, int subcode, const char *fmt, va_list ap)
{
	char message[128];

	snprintf(last_fn, sizeof(last_fn), "%s", fn);
	last_subcode = subcode;
	handler_calls++;
	vsnprintf(message, sizeof(message), fmt, ap);
	EXPECT(message[0] != '\0' && message[strlen(message) - 1] == '\n');
	errno = 0; /* the library restores errno */
}

/* The call fails with EINVAL and the handler got `subcode` from function `fn`. */
#define FAILS_SUB(call, err, fn, subcode) \
	do { \
		int before_ = handler_calls; \
		FAILS_WITH(call, err); \
		if (handler_calls != before_ + 1 || last_subcode != (subcode) || \
		    strcmp(last_fn, (fn)) != 0) { \
			fprintf(stderr, "%s:%d: %s: handler calls %d, subcode %d from %s; " \
			    "expected subcode %s from %s\n", __FILE__, __LINE__, #call, \
			    handler_calls - before_, last_subcode, last_fn, #subcode, fn); \
			exit(1); \
		} \
	} while (0)

/* The call fails with `err` and does not call the handler. */
#define FAILS_NOSUB(call, err) \
	do { \
		int before_ = handler_calls; \
		FAILS_WITH(call, err); \
		if (handler_calls != before_) { \
			fprintf(stderr, "%s:%d: %s called the handler (subcode %d)\n", __FILE__, \
			    __LINE__, #call, last_subcode); \
			exit(1); \
		} \
	} while (0)

static int walked;
static char attrs_seen[512];

static void
collect_attr(void *arg, const char *attr)
{
	(void)arg;
	if (attrs_seen[0] == '\0')
		strcat(attrs_seen, " ");
	if (strlen(attrs_seen) + strlen(attr) + 2 < sizeof(attrs_seen)) {
		strcat(attrs_seen, attr);
		strcat(attrs_seen, " ");
	}
}

static void
count_event(void *arg, uint_t picno, const char *event)
{
	(void)arg; (void)picno; (void)event;
	walked++;
}

static cpc_set_t *
one_request(cpc_t *cpc, const char *event, uint_t flags, uint_t nattrs, cpc_attr_t *attrs)
{
	cpc_set_t *set;

	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(cpc_set_add_request(cpc, set, event, 0, flags, nattrs, attrs));
	return (set);
}

int
main(void)
{
	const char *host = getenv("PMC_HOST");
	int sim = host != NULL && strcmp(host, "sim") == 0;
	const char *event = sim ? "PAPI_tot_ins" : "page-faults";
	cpc_t *cpc, *other;
	cpc_set_t *set, *foreign, *empty, *cpu_set, *lwp_set;
	cpc_buf_t *buf, *small;
	uint64_t value;
	uint_t npic, i;
	cpc_attr_t attr;
	cpc_attr_t two[2];

	NULL_WITH(cpc_open(1), EINVAL);
	NULL_WITH(cpc_open(3), EINVAL);
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(other = cpc_open(CPC_VER_CURRENT));
	npic = cpc_npic(cpc);
	EXPECT(npic == (sim ? 7u : 16u));

	/* cpc_set_add_request: default handler first (stderr), then ours. */
	CHECK_PTR(set = cpc_set_create(cpc));
	FAILS_WITH(cpc_set_add_request(cpc, set, "no_such_event", 0, CPC_COUNT_USER, 0, NULL),
	    EINVAL);
	CHECK(cpc_seterrhndlr(cpc, handler));
	FAILS_SUB(cpc_set_add_request(cpc, set, "no_such_event", 0, CPC_COUNT_USER, 0, NULL),
	    EINVAL, "cpc_set_add_request", CPC_INVALID_EVENT);
	FAILS_SUB(cpc_set_add_request(cpc, set, "12abc", 0, CPC_COUNT_USER, 0, NULL),
	    EINVAL, "cpc_set_add_request", CPC_INVALID_EVENT);
	attr.ca_name = "bogus";
	attr.ca_val = 1;
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 1, &attr),
	    EINVAL, "cpc_set_add_request", CPC_INVALID_ATTRIBUTE);
	attr.ca_name = "";
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 1, &attr),
	    EINVAL, "cpc_set_add_request", CPC_INVALID_ATTRIBUTE);
	attr.ca_name = "picnum";
	attr.ca_val = npic;
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 1, &attr),
	    EINVAL, "cpc_set_add_request", CPC_INVALID_PICNUM);
	if (sim) {
		attr.ca_val = 0; /* a general-purpose counter */
		FAILS_SUB(cpc_set_add_request(cpc, set, "instr_retired.any", 0, CPC_COUNT_USER, 1,
		    &attr), EINVAL, "cpc_set_add_request", CPC_PIC_NOT_CAPABLE);
		attr.ca_val = 4; /* the fixed instruction counter takes no raw code */
		FAILS_SUB(cpc_set_add_request(cpc, set, "0xc0", 0, CPC_COUNT_USER, 1, &attr),
		    EINVAL, "cpc_set_add_request", CPC_PIC_NOT_CAPABLE);
	}
	FAILS_NOSUB(cpc_set_add_request(cpc, NULL, event, 0, CPC_COUNT_USER, 0, NULL), EINVAL);
	FAILS_NOSUB(cpc_set_add_request(NULL, set, event, 0, CPC_COUNT_USER, 0, NULL), EINVAL);
	FAILS_NOSUB(cpc_set_add_request(cpc, set, NULL, 0, CPC_COUNT_USER, 0, NULL), EINVAL);
	CHECK_PTR(foreign = cpc_set_create(other));
	FAILS_NOSUB(cpc_set_add_request(cpc, foreign, event, 0, CPC_COUNT_USER, 0, NULL), EINVAL);
	/* Nothing was added by the failures. */
	CHECK_PTR(buf = cpc_buf_create(cpc, set));
	FAILS_WITH(cpc_buf_get(cpc, buf, 0, &value), EINVAL);
	CHECK(cpc_buf_destroy(cpc, buf));
	/* strtol's quirks: "-1" is a raw code ("" is not: no event at all, refused below). */
	EXPECT(cpc_set_add_request(cpc, set, "-1", 0, CPC_COUNT_USER, 0, NULL) == 0);
	/* ...which need picnum at bind. */
	FAILS_SUB(cpc_bind_curlwp(cpc, set, 0), EINVAL, "cpc_bind_curlwp", CPC_RESOURCE_UNAVAIL);
	CHECK(cpc_set_destroy(cpc, set));

	/* Binds: argument and set checks, no subcode. */
	CHECK_PTR(empty = cpc_set_create(cpc));
	FAILS_NOSUB(cpc_bind_curlwp(cpc, empty, 0), EINVAL);
	FAILS_NOSUB(cpc_bind_cpu(cpc, 0, empty, 0), EINVAL);
	set = one_request(cpc, event, CPC_COUNT_USER, 0, NULL);
	FAILS_NOSUB(cpc_bind_curlwp(cpc, set, 2), EINVAL);
	FAILS_NOSUB(cpc_bind_cpu(cpc, 0, set, 1), EINVAL);
	FAILS_NOSUB(cpc_bind_cpu(cpc, 0, foreign, 0), EINVAL);
	FAILS_NOSUB(cpc_bind_curlwp(cpc, foreign, 0), EINVAL);
	FAILS_SUB(cpc_bind_cpu(cpc, 4096, set, 0), EINVAL, "cpc_bind_cpu", CPC_PBIND_FAILED);
	FAILS_SUB(cpc_bind_cpu(cpc, -1, set, 0), EINVAL, "cpc_bind_cpu", CPC_PBIND_FAILED);
	CHECK(cpc_set_destroy(cpc, set));

	/* More requests than counters. */
	CHECK_PTR(set = cpc_set_create(cpc));
	for (i = 0; i <= npic; i++)
		CHECK(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 0, NULL));
	FAILS_NOSUB(cpc_bind_curlwp(cpc, set, 0), EINVAL);
	CHECK(cpc_set_destroy(cpc, set));

	/*
	 * Request flags outside the known ones: refused when added (illumos refuses them at
	 * bind, with the same errno and subcode).
	 */
	CHECK_PTR(set = cpc_set_create(cpc));
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER | 0x40, 0, NULL), EINVAL,
	    "cpc_set_add_request", CPC_REQ_INVALID_FLAGS);
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, 0xffffffffu, 0, NULL), EINVAL,
	    "cpc_set_add_request", CPC_REQ_INVALID_FLAGS);
	/* An empty event name is no event (illumos's strtol check lets it through). */
	FAILS_SUB(cpc_set_add_request(cpc, set, "", 0, CPC_COUNT_USER, 0, NULL), EINVAL,
	    "cpc_set_add_request", CPC_INVALID_EVENT);
	/* Flags 0 (neither user nor system mode) are valid: the counter counts nothing. */
	CHECK(cpc_set_add_request(cpc, set, event, 0, 0, 0, NULL));
	CHECK(cpc_set_destroy(cpc, set));

	/* The same explicit counter twice. */
	attr.ca_name = "picnum";
	attr.ca_val = 1;
	set = one_request(cpc, event, CPC_COUNT_USER, 1, &attr);
	CHECK(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 1, &attr));
	FAILS_NOSUB(cpc_bind_curlwp(cpc, set, 0), EINVAL);
	CHECK(cpc_set_destroy(cpc, set));

	/*
	 * Overflow signals: both hosts' counters interrupt, but on the simulator the calling
	 * thread runs no simulated code (its sets never overflow): ENOTSUP there.
	 */
	set = one_request(cpc, event, CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL);
	EXPECT(cpc_caps(cpc) & CPC_CAP_OVERFLOW_INTERRUPT);
	if (sim) {
		FAILS_NOSUB(cpc_bind_curlwp(cpc, set, 0), ENOTSUP);
	} else {
		CHECK(cpc_bind_curlwp(cpc, set, 0));
		CHECK(cpc_unbind(cpc, set));
	}
	CHECK(cpc_set_destroy(cpc, set));

	/* SMPL requests: smpl_nrecs is theirs alone, in 1..max, their picnum below smpl_npic. */
	EXPECT(cpc_smpl_npic(cpc) == 1);
	/* smpl_nrecs missing, 0 or over the maximum: refused when added. */
	CHECK_PTR(set = cpc_set_create(cpc));
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER | CPC_HW_SMPL, 0, NULL),
	    EINVAL, "cpc_set_add_request", CPC_ATTRIBUTE_OUT_OF_RANGE);
	attr.ca_name = "smpl_nrecs";
	attr.ca_val = 0;
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER | CPC_HW_SMPL, 1, &attr),
	    EINVAL, "cpc_set_add_request", CPC_ATTRIBUTE_OUT_OF_RANGE);
	attr.ca_val = cpc_get_smpl_max_rec_count(cpc) + 1;
	EXPECT(cpc_get_max_smpl_rec_count(cpc) == cpc_get_smpl_max_rec_count(cpc));
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER | CPC_HW_SMPL, 1, &attr),
	    EINVAL, "cpc_set_add_request", CPC_ATTRIBUTE_OUT_OF_RANGE);
	attr.ca_val = cpc_get_smpl_max_rec_count(cpc);
	CHECK(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER | CPC_HW_SMPL, 1, &attr));
	attr.ca_val = cpc_get_smpl_max_rec_count(cpc) + 1;
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 1, &attr), EINVAL,
	    "cpc_set_add_request", CPC_INVALID_ATTRIBUTE);
	two[0] = attr;
	two[1].ca_name = "picnum";
	two[1].ca_val = 1;
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER | CPC_HW_SMPL, 2, two),
	    EINVAL, "cpc_set_add_request", CPC_INVALID_PICNUM);
	two[0].ca_name = "umask";
	FAILS_SUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER | CPC_HW_SMPL, 1, two),
	    EINVAL, "cpc_set_add_request", CPC_INVALID_ATTRIBUTE);
	CHECK(cpc_set_destroy(cpc, set));

	if (sim) {
		/* Attribute values, checked at bind. */
		two[0].ca_name = "umask";
		two[0].ca_val = 0x100;
		set = one_request(cpc, "0xc0", CPC_COUNT_USER, 0, NULL);
		CHECK(cpc_set_destroy(cpc, set));
		attr.ca_name = "picnum";
		attr.ca_val = 0;
		two[1] = attr;
		set = one_request(cpc, "0xc0", CPC_COUNT_USER, 2, two);
		FAILS_SUB(cpc_bind_curlwp(cpc, set, 0), EINVAL, "cpc_bind_curlwp",
		    CPC_ATTRIBUTE_OUT_OF_RANGE);
		CHECK(cpc_set_destroy(cpc, set));
		two[0].ca_name = "cmask";
		set = one_request(cpc, "0xc0", CPC_COUNT_USER, 2, two);
		FAILS_SUB(cpc_bind_curlwp(cpc, set, 0), EINVAL, "cpc_bind_curlwp",
		    CPC_ATTRIBUTE_OUT_OF_RANGE);
		CHECK(cpc_set_destroy(cpc, set));
		/* A generic event takes no attribute. */
		two[0].ca_name = "edge";
		two[0].ca_val = 1;
		set = one_request(cpc, "PAPI_tot_ins", CPC_COUNT_USER, 1, two);
		FAILS_SUB(cpc_bind_curlwp(cpc, set, 0), EINVAL, "cpc_bind_curlwp",
		    CPC_ATTRIBUTE_OUT_OF_RANGE);
		CHECK(cpc_set_destroy(cpc, set));
		/* Nor does a fixed counter. */
		attr.ca_name = "umask";
		attr.ca_val = 1;
		set = one_request(cpc, "instr_retired.any", CPC_COUNT_USER, 1, &attr);
		FAILS_SUB(cpc_bind_curlwp(cpc, set, 0), EINVAL, "cpc_bind_curlwp",
		    CPC_ATTRIBUTE_OUT_OF_RANGE);
		CHECK(cpc_set_destroy(cpc, set));
		/* Five requests only the four general-purpose counters can count. */
		CHECK_PTR(set = cpc_set_create(cpc));
		for (i = 0; i < 5; i++)
			CHECK(cpc_set_add_request(cpc, set, "PAPI_br_ins", 0, CPC_COUNT_USER, 0,
			    NULL));
		FAILS_SUB(cpc_bind_curlwp(cpc, set, 0), EINVAL, "cpc_bind_curlwp",
		    CPC_RESOURCE_UNAVAIL);
		CHECK(cpc_set_destroy(cpc, set));
	} else {
		/* A raw code no software event has. */
		attr.ca_name = "picnum";
		attr.ca_val = 0;
		set = one_request(cpc, "999", CPC_COUNT_USER, 1, &attr);
		FAILS_SUB(cpc_bind_curlwp(cpc, set, 0), EINVAL, "cpc_bind_curlwp",
		    CPC_INVALID_EVENT);
		CHECK(cpc_set_destroy(cpc, set));
	}

	/* Sampling, buffers, the calling thread's set. */
	set = one_request(cpc, event, CPC_COUNT_USER, 0, NULL);
	CHECK_PTR(buf = cpc_buf_create(cpc, set));
	CHECK_PTR(small = cpc_buf_create(cpc, empty));
	FAILS_NOSUB(cpc_set_sample(cpc, set, buf), EINVAL);
	FAILS_NOSUB(cpc_unbind(cpc, set), EINVAL);
	FAILS_NOSUB(cpc_request_preset(cpc, 0, 1), EINVAL);
	FAILS_NOSUB(cpc_set_restart(cpc, set), EINVAL);
	FAILS_NOSUB(cpc_enable(cpc), EINVAL);
	FAILS_NOSUB(cpc_disable(cpc), EINVAL);
	CHECK(cpc_bind_curlwp(cpc, set, 0));
	FAILS_NOSUB(cpc_set_add_request(cpc, set, event, 0, CPC_COUNT_USER, 0, NULL), EINVAL);
	FAILS_NOSUB(cpc_set_sample(cpc, set, small), EINVAL);
	FAILS_NOSUB(cpc_set_sample(other, set, buf), EINVAL);
	CHECK(cpc_set_sample(cpc, set, buf));
	FAILS_NOSUB(cpc_request_preset(cpc, 1, 1), EINVAL);
	FAILS_NOSUB(cpc_request_preset(cpc, -1, 1), EINVAL);
	FAILS_NOSUB(cpc_enable(cpc), EINVAL);
	CHECK(cpc_disable(cpc));
	FAILS_NOSUB(cpc_disable(cpc), EINVAL);
	CHECK(cpc_enable(cpc));
	FAILS_WITH(cpc_buf_get(cpc, buf, 1, &value), EINVAL);
	FAILS_WITH(cpc_buf_get(cpc, buf, -1, &value), EINVAL);
	FAILS_WITH(cpc_buf_set(cpc, buf, 1, 5), EINVAL);
	FAILS_WITH(cpc_buf_get(other, buf, 0, &value), EINVAL);
	FAILS_WITH(cpc_buf_destroy(other, buf), EINVAL);
	FAILS_WITH(cpc_set_destroy(other, set), EINVAL);

	/* Binding another set to the thread unbinds this one. */
	lwp_set = one_request(cpc, event, CPC_COUNT_USER, 0, NULL);
	CHECK(cpc_bind_curlwp(cpc, lwp_set, 0));
	FAILS_NOSUB(cpc_set_sample(cpc, set, buf), EINVAL);
	FAILS_NOSUB(cpc_unbind(cpc, set), EINVAL);

	/* A CPU bind (privileged: the simulator's tool is root; on Linux, root): invalidates
	 * per-thread sets, excludes per-thread binds and a second set on the same CPU. */
	cpu_set = one_request(cpc, event, CPC_COUNT_USER | CPC_COUNT_SYSTEM, 0, NULL);
	if (sim || geteuid() == 0) {
		CHECK(cpc_bind_cpu(cpc, 0, cpu_set, 0));
		FAILS_NOSUB(cpc_set_sample(cpc, lwp_set, buf), EAGAIN);
		FAILS_NOSUB(cpc_disable(cpc), EAGAIN);
		FAILS_NOSUB(cpc_enable(cpc), EAGAIN);
		FAILS_NOSUB(cpc_bind_curlwp(cpc, set, 0), EAGAIN);
		CHECK_PTR(foreign = cpc_set_create(cpc));
		CHECK(cpc_set_add_request(cpc, foreign, event, 0, CPC_COUNT_USER, 0, NULL));
		FAILS_NOSUB(cpc_bind_cpu(cpc, 0, foreign, 0), EAGAIN);
		CHECK(cpc_set_sample(cpc, cpu_set, buf));
		CHECK(cpc_unbind(cpc, cpu_set));
	} else {
		FAILS_NOSUB(cpc_bind_cpu(cpc, 0, cpu_set, 0), EACCES);
	}
	CHECK(cpc_bind_curlwp(cpc, set, 0));
	CHECK(cpc_set_sample(cpc, set, buf));

	/* cpc_bind_pctx: flags, a thread the process does not have. */
	{
		char *argv[] = { sim ? "hot-cold" : "true", NULL };
		pctx_t *pctx;

		CHECK_PTR(pctx = pctx_create(argv[0], argv, NULL, 0, NULL));
		FAILS_NOSUB(cpc_bind_pctx(cpc, pctx, 1, set, 1), EINVAL);
		FAILS_NOSUB(cpc_bind_pctx(cpc, NULL, 1, set, 0), EINVAL);
		FAILS_NOSUB(cpc_bind_pctx(cpc, pctx, 999999, set, 0), ESRCH);
		{
			cpc_set_t *ovf = one_request(cpc, event, CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT,
			    0, NULL);

			/* The simulator signals the thread that runs its programs; Linux cannot. */
			if (sim) {
				CHECK(cpc_bind_pctx(cpc, pctx, 1, ovf, 0));
				CHECK(cpc_unbind(cpc, ovf));
			} else {
				FAILS_NOSUB(cpc_bind_pctx(cpc, pctx, 1, ovf, 0), ENOTSUP);
			}
			CHECK(cpc_set_destroy(cpc, ovf));
		}
		pctx_release(pctx);
		NULL_WITH(pctx_capture(sim ? 1 : -1, NULL, 0, NULL), sim ? ENOTSUP : ESRCH);
	}

	/* Without privilege, a CPU bind is refused (the Linux host: a system-wide perf event). */
	if (!sim && geteuid() == 0) {
		pid_t child = fork();
		int status;

		CHECK(child);
		if (child == 0) {
			cpc_t *c;
			cpc_set_t *s;

			if (setgid(65534) != 0 || setuid(65534) != 0)
				FAIL("drop privilege");
			CHECK_PTR(c = cpc_open(CPC_VER_CURRENT));
			s = one_request(c, event, CPC_COUNT_USER, 0, NULL);
			FAILS_WITH(cpc_bind_cpu(c, 0, s, 0), EACCES);
			exit(0);
		}
		CHECK(waitpid(child, &status, 0));
		EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}

	/* The event walker of a counter past the last. */
	errno = 0;
	cpc_walk_events_pic(cpc, npic, NULL, count_event);
	EXPECT(errno == EINVAL && walked == 0);
	cpc_walk_events_pic(cpc, 0, NULL, count_event);
	EXPECT(sim ? walked > 0 : walked == 9);

	/*
	 * CPC_OVF_NOTIFY_EMT with any preset binds: 1 (an overflow 2^64 - 1 events away) and
	 * UINT64_MAX (an overflow at the next event), for a count and for a clock.
	 */
	if (!sim) {
		static const char *const overflowing[] = { "page-faults", "task-clock" };
		const uint64_t presets[] = { 1, UINT64_MAX };
		struct sigaction quiet;
		int e, p;

		memset(&quiet, 0, sizeof(quiet));
		quiet.sa_handler = SIG_IGN;
		CHECK(sigaction(SIGEMT, &quiet, NULL));
		for (e = 0; e < 2; e++) {
			for (p = 0; p < 2; p++) {
				CHECK_PTR(set = cpc_set_create(cpc));
				CHECK(cpc_set_add_request(cpc, set, overflowing[e], presets[p],
				    CPC_COUNT_USER | CPC_OVF_NOTIFY_EMT, 0, NULL));
				CHECK(cpc_bind_curlwp(cpc, set, 0));
				CHECK(cpc_unbind(cpc, set));
				CHECK(cpc_set_destroy(cpc, set));
			}
		}
	}

	/* cpc_walk_attrs: the request attributes and picnum; nouser and sys are flags. */
	attrs_seen[0] = '\0';
	cpc_walk_attrs(cpc, NULL, collect_attr);
	EXPECT(strstr(attrs_seen, " nouser ") == NULL && strstr(attrs_seen, " sys ") == NULL);
	EXPECT(strcmp(attrs_seen, sim ? " edge inv umask cmask picnum " : " picnum ") == 0);

	/*
	 * A closed handle is refused like a destroyed set (EINVAL; the handle's memory is not
	 * read): every function taking one.
	 */
	set = one_request(other, event, CPC_COUNT_USER, 0, NULL);
	CHECK_PTR(buf = cpc_buf_create(other, set));
	CHECK(cpc_close(other));
	FAILS_WITH(cpc_close(other), EINVAL);
	NULL_WITH(cpc_set_create(other), EINVAL);
	NULL_WITH(cpc_buf_create(other, set), EINVAL);
	FAILS_WITH(cpc_set_sample(other, set, buf), EINVAL);
	FAILS_WITH(cpc_set_add_request(other, set, event, 0, CPC_COUNT_USER, 0, NULL), EINVAL);
	FAILS_WITH(cpc_bind_curlwp(other, set, 0), EINVAL);
	FAILS_WITH(cpc_seterrhndlr(other, handler), EINVAL);
	errno = 0;
	EXPECT(cpc_npic(other) == 0 && errno == EINVAL);
	errno = 0;
	EXPECT(cpc_caps(other) == 0 && errno == EINVAL);
	errno = 0;
	EXPECT(strcmp(cpc_cciname(other), "") == 0 && errno == EINVAL);
	attrs_seen[0] = '\0';
	cpc_walk_attrs(other, NULL, collect_attr);
	EXPECT(attrs_seen[0] == '\0');

	CHECK(cpc_close(cpc));
	printf("errors ok\n");
	return (0);
}
