/*
 * Calls a cpc_errhndlr_t: (fn, subcode, fmt, ap).  The messages libcpc passes contain no
 * conversions, so `ap` carries no arguments; it is still a real va_list, so a handler may hand
 * fmt and ap to vfprintf(3).
 */
#include <stdarg.h>

typedef void (cpc_errhndlr_fn)(const char *fn, int subcode, const char *fmt, va_list ap);

static void
cpc_errhndlr_va(cpc_errhndlr_fn *handler, const char *fn, int subcode, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	handler(fn, subcode, fmt, ap);
	va_end(ap);
}

void
libcpc_call_errhndlr(cpc_errhndlr_fn *handler, const char *fn, int subcode, const char *fmt)
{
	cpc_errhndlr_va(handler, fn, subcode, fmt);
}


/* libcpc_pctx_set_event (capi/pctx.rs): sets the handler of one event, 0 or -1 with errno. */
extern int libcpc_pctx_set_event(void *pctx, int event, void (*handler)(void));

/*
 * pctx_set_events(pctx, event, handler, ..., PCTX_NULL_EVENT), reached through the exported
 * trampoline `pctx_set_events` of capi/pctx.rs, which jumps here with the caller's registers
 * and stack untouched: the exported symbol must be a Rust item for the shared library to
 * export it, and only C can read a variadic argument list.
 */
int
libcpc_pctx_set_events_va(void *pctx, ...)
{
	va_list ap;
	int event, result = 0;

	va_start(ap, pctx);
	/* 0 is PCTX_NULL_EVENT, the end of the list. */
	while (result == 0 && (event = va_arg(ap, int)) != 0)
		result = libcpc_pctx_set_event(pctx, event, va_arg(ap, void (*)(void)));
	va_end(ap);
	return (result);
}

typedef void (pctx_errfn_fn)(const char *fn, const char *fmt, va_list ap);

static void
pctx_errfn_va(pctx_errfn_fn *handler, const char *fn, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	handler(fn, fmt, ap);
	va_end(ap);
}

/*
 * Calls a pctx_errfn_t: (fn, fmt, ap) with `arg` in `ap`, for the one %s `fmt` may hold (as
 * illumos's libpctx passes the program's name).
 */
void
libcpc_call_pctx_errfn(pctx_errfn_fn *handler, const char *fn, const char *fmt, const char *arg)
{
	pctx_errfn_va(handler, fn, fmt, arg);
}
