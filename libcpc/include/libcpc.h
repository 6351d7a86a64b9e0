/*
 * libcpc: the Solaris/illumos CPU performance counter library, API version 2 (cpc(3CPC)),
 * over hwpmc-rs's libpmc.  Link with -lcpc (libcpc.so) or libcpc.a (and -lpctx, which links to
 * them, for libpctx's functions).
 *
 * Solaris programs compile unchanged: the Solaris types Linux lacks (uint_t, hrtime_t,
 * processorid_t) are defined here, and so is gethrtime(), the clock of cpc_buf_hrtime().
 *
 * Overflow signals: Linux has no SIGEMT on x86 and arm.  There this header defines SIGEMT as
 * SIGSTKFLT (16), which the kernel never raises on those architectures, and EMT_CPCOVF as 1
 * (illumos' x86 value), so a program written for
 *     sigaction(SIGEMT, ...) ... if (info->si_code == EMT_CPCOVF) ...
 * compiles unchanged.  On the Linux host an overflow of a set bound with cpc_bind_curlwp stops the
 * set and sends the thread SIGEMT with si_code EMT_CPCOVF and si_addr the sampled instruction,
 * about a millisecond after the overflow; libcpc uses SIGRTMAX - 1 internally for that, so a
 * program using overflow signals must leave it alone.  On the simulator host the overflows are
 * those of a simulated program a set is bound to with cpc_bind_pctx: the machine stops right
 * after the overflowing block and the thread running pctx_run gets SIGEMT (EMT_CPCOVF) before
 * it goes on; in that thread cpc_request_preset and cpc_set_restart act on the set that
 * signalled.  There cpc_bind_curlwp of such a request fails with ENOTSUP (the calling thread
 * runs no simulated code); on Linux, cpc_bind_pctx of one does.
 *
 * Where illumos leaves room, see the crate documentation of libcpc (`cargo doc -p libcpc`).
 */
#ifndef _LIBCPC_H
#define _LIBCPC_H

/*
 * What illumos's <libcpc.h> includes, so that programs relying on it (strerror, memcpy,
 * siginfo_t, ucontext_t, processorid_t, pctx_t) build unchanged.
 */
#include <sys/types.h>
#include <inttypes.h>
#include <stdint.h>
#include <libpctx.h>
#include <stdarg.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef __sun
/* uint_t comes with <libpctx.h>.  __extension__: ISO C90 has no long long, GCC and Clang do. */
#if defined(__GNUC__) && !defined(__cplusplus)
__extension__ typedef long long hrtime_t;
#else
typedef long long hrtime_t;
#endif
typedef int processorid_t;
#endif

#ifndef SIGEMT
#ifdef SIGSTKFLT
#define SIGEMT SIGSTKFLT
#else
#define SIGEMT 16	/* SIGSTKFLT on x86 and arm Linux */
#endif
#endif
#ifndef EMT_CPCOVF
#define EMT_CPCOVF 1
#endif

#define CPC_VER_CURRENT 2

/* Request flags. */
#define CPC_OVF_NOTIFY_EMT	0x1
#define CPC_COUNT_USER		0x2
#define CPC_COUNT_SYSTEM	0x4
#define CPC_COUNT_HV		0x8
#define CPC_COUNT_SAMPLE_MODE	0x10
/* Oracle Solaris 11.4's SMPL request flag; Oracle publishes no value, this library uses 0x100. */
#define CPC_HW_SMPL		0x100

/* Bind flags. */
#define CPC_BIND_LWP_INHERIT	0x1
/* hwpmc-rs extension: the set takes turns on the counters with other such sets (one group). */
#define CPC_BIND_MULTIPLEX	0x1000

/* Capabilities. */
#define CPC_CAP_OVERFLOW_INTERRUPT	0x1
#define CPC_CAP_OVERFLOW_PRECISE	0x2

/* Limits. */
#define CPC_MAX_EVENT_LEN	512
#define CPC_MAX_ATTR_LEN	32
#define CPC_MAX_IMPL_NAME	512
#define CPC_MAX_CPUREF		1024

/* The x86 name of the tick register (the tools' column label). */
#define CPC_TICKREG_NAME	"tsc"

/* Error subcodes passed to the error handler. */
#define CPC_INVALID_EVENT		1
#define CPC_INVALID_PICNUM		2
#define CPC_INVALID_ATTRIBUTE		3
#define CPC_ATTRIBUTE_OUT_OF_RANGE	4
#define CPC_RESOURCE_UNAVAIL		5
#define CPC_PIC_NOT_CAPABLE		6
#define CPC_REQ_INVALID_FLAGS		7
#define CPC_CONFLICTING_REQS		8
#define CPC_ATTR_REQUIRES_PRIVILEGE	9
#define CPC_PBIND_FAILED		10
#define CPC_HV_NO_ACCESS		11

typedef struct __cpc cpc_t;
typedef struct __cpc_set cpc_set_t;
typedef struct __cpc_buf cpc_buf_t;

typedef struct {
	char		*ca_name;
	uint64_t	ca_val;
} cpc_attr_t;

typedef void (cpc_errhndlr_t)(const char *fn, int subcode, const char *fmt, va_list ap);

extern cpc_t *cpc_open(int ver);
extern int cpc_close(cpc_t *cpc);

extern uint_t cpc_npic(cpc_t *cpc);
extern uint_t cpc_caps(cpc_t *cpc);
extern const char *cpc_cciname(cpc_t *cpc);
extern const char *cpc_cpuref(cpc_t *cpc);

extern int cpc_seterrhndlr(cpc_t *cpc, cpc_errhndlr_t *fn);

extern cpc_set_t *cpc_set_create(cpc_t *cpc);
extern int cpc_set_destroy(cpc_t *cpc, cpc_set_t *set);
extern int cpc_set_add_request(cpc_t *cpc, cpc_set_t *set, const char *event, uint64_t preset,
    uint_t flags, uint_t nattrs, const cpc_attr_t *attrs);
extern void cpc_walk_requests(cpc_t *cpc, cpc_set_t *set, void *arg,
    void (*action)(void *arg, int index, const char *event, uint64_t preset, uint_t flags,
    int nattrs, const cpc_attr_t *attrs));

extern int cpc_bind_curlwp(cpc_t *cpc, cpc_set_t *set, uint_t flags);
extern int cpc_bind_pctx(cpc_t *cpc, pctx_t *pctx, id_t id, cpc_set_t *set, uint_t flags);
extern int cpc_bind_cpu(cpc_t *cpc, processorid_t id, cpc_set_t *set, uint_t flags);
extern int cpc_unbind(cpc_t *cpc, cpc_set_t *set);
extern int cpc_request_preset(cpc_t *cpc, int index, uint64_t preset);
extern int cpc_set_request_preset(cpc_t *cpc, cpc_set_t *set, int index, uint64_t preset);
extern int cpc_set_restart(cpc_t *cpc, cpc_set_t *set);

extern cpc_buf_t *cpc_buf_create(cpc_t *cpc, cpc_set_t *set);
extern int cpc_buf_destroy(cpc_t *cpc, cpc_buf_t *buf);
extern int cpc_set_sample(cpc_t *cpc, cpc_set_t *set, cpc_buf_t *buf);
extern void cpc_buf_sub(cpc_t *cpc, cpc_buf_t *ds, cpc_buf_t *a, cpc_buf_t *b);
extern void cpc_buf_add(cpc_t *cpc, cpc_buf_t *ds, cpc_buf_t *a, cpc_buf_t *b);
extern void cpc_buf_copy(cpc_t *cpc, cpc_buf_t *ds, cpc_buf_t *src);
extern void cpc_buf_zero(cpc_t *cpc, cpc_buf_t *buf);
extern int cpc_buf_get(cpc_t *cpc, cpc_buf_t *buf, int index, uint64_t *val);
extern int cpc_buf_set(cpc_t *cpc, cpc_buf_t *buf, int index, uint64_t val);
extern hrtime_t cpc_buf_hrtime(cpc_t *cpc, cpc_buf_t *buf);
extern uint64_t cpc_buf_tick(cpc_t *cpc, cpc_buf_t *buf);

extern void cpc_walk_events_all(cpc_t *cpc, void *arg, void (*action)(void *arg, const char *event));
extern void cpc_walk_generic_events_all(cpc_t *cpc, void *arg,
    void (*action)(void *arg, const char *event));
extern void cpc_walk_events_pic(cpc_t *cpc, uint_t picno, void *arg,
    void (*action)(void *arg, uint_t picno, const char *event));
extern void cpc_walk_generic_events_pic(cpc_t *cpc, uint_t picno, void *arg,
    void (*action)(void *arg, uint_t picno, const char *event));
extern void cpc_walk_attrs(cpc_t *cpc, void *arg, void (*action)(void *arg, const char *attr));

/*
 * SMPL (hardware sampling) requests, as Oracle Solaris 11.4: a request with CPC_HW_SMPL and the
 * attribute smpl_nrecs (1..cpc_get_smpl_max_rec_count()) keeps up to smpl_nrecs records in the
 * buffer; each record has one item, "ip" (index 0).  Its preset gives the sampling period as for
 * an overflow request: UINT64_MAX - (n - 1) samples every n-th event (0: the event's default).
 * CPC_TARGET_CPC and CPC_TARGET_SMPL (the `target` of the _common walkers) are this library's
 * names and values; Oracle publishes none.
 */
#define CPC_TARGET_CPC		0
#define CPC_TARGET_SMPL		1

extern uint_t cpc_smpl_npic(cpc_t *cpc);
extern const char *cpc_smpl_iname(cpc_t *cpc);
extern uint_t cpc_get_smpl_max_rec_count(cpc_t *cpc);
extern uint_t cpc_get_max_smpl_rec_count(cpc_t *cpc);
extern void cpc_walk_smpl_recitems(cpc_t *cpc, void *arg,
    void (*action)(void *arg, const char *name, int record_item_index));
extern void cpc_walk_smpl_recitems_req(cpc_t *cpc, cpc_set_t *set, int request_index, void *arg,
    void (*action)(void *arg, const char *name, int record_item_index));
extern int cpc_buf_smpl_rec_count(cpc_t *cpc, cpc_buf_t *buf, int request_index,
    uint_t *rec_count);
extern int cpc_buf_smpl_get_item(cpc_t *cpc, cpc_buf_t *buf, int request_index, int record_index,
    int record_item_index, uint64_t *val);
extern uint64_t *cpc_buf_smpl_get_record(cpc_t *cpc, cpc_buf_t *buf, int request_index,
    int record_index);
extern void cpc_walk_events_all_common(cpc_t *cpc, void *arg, int target,
    void (*action)(void *arg, const char *event));
extern void cpc_walk_events_pic_common(cpc_t *cpc, uint_t picno, void *arg, int target,
    void (*action)(void *arg, uint_t picno, const char *event));
extern void cpc_walk_attrs_common(cpc_t *cpc, void *arg, int target,
    void (*action)(void *arg, const char *attr));

extern int cpc_enable(cpc_t *cpc);
extern int cpc_disable(cpc_t *cpc);

/* Private (illumos SUNWprivate_1.1): makes a running pctx_run() of any set's pctx return. */
extern void cpc_terminate(cpc_t *cpc);

#ifndef __sun
extern hrtime_t gethrtime(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* _LIBCPC_H */
