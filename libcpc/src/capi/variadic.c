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

