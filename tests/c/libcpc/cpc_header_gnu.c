/*
 * What a program gets from <libcpc.h> alone, as on illumos, whose <libcpc.h> includes
 * <string.h>, <ucontext.h>, <signal.h>, <sys/processor.h> and <libpctx.h> (which includes
 * <fcntl.h>): strerror, memcpy and strdupa, ucontext_t and siginfo_t, processorid_t, pctx_t,
 * F_SETFL and O_APPEND.  Built in the GNU modes (strdupa is a GNU extension) and as C++ with
 * implicit declarations as errors.  Exits 0 (it has no <stdio.h> to print with).
 */
#include <libcpc.h>

int
main(void)
{
	char copy[8];
	const char *text = strerror(0);
	char *dup = strdupa("abc");
	ucontext_t context;
	siginfo_t info;
	processorid_t cpu = 0;
	pctx_t *pctx = 0;
	int fcntl_bits = F_SETFL | O_APPEND;

	memcpy(copy, "ok", 3);
	memset(&context, 0, sizeof(context));
	memset(&info, 0, sizeof(info));
	if (text == 0 || dup[0] != 'a' || copy[0] != 'o' || cpu != 0 || pctx != 0 ||
	    fcntl_bits == 0 || info.si_signo != 0)
		return (1);
	return (0);
}
