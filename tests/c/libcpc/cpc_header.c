/*
 * <libcpc.h> and <libpctx.h> in the strictest setting a Solaris program may be built with:
 * ISO C99, -pedantic, no feature macro (and as C++ by the test).  Uses every type and constant
 * the headers define.  Prints "header ok".
 */
#include <libcpc.h>
#include <stdio.h>

static int
on_init(pctx_t *pctx, pid_t pid, id_t lwp, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	return (0);
}

int
main(void)
{
	cpc_attr_t attr = { (char *)"picnum", 0 };
	uint_t npic = 0;
	hrtime_t now = gethrtime();
	processorid_t cpu = 0;
	pctx_init_lwpfn_t *init = on_init;
	int constants = CPC_VER_CURRENT + CPC_OVF_NOTIFY_EMT + CPC_COUNT_USER + CPC_COUNT_SYSTEM +
	    CPC_COUNT_HV + CPC_COUNT_SAMPLE_MODE + CPC_HW_SMPL + CPC_BIND_LWP_INHERIT +
	    CPC_CAP_OVERFLOW_INTERRUPT + CPC_CAP_OVERFLOW_PRECISE + CPC_INVALID_EVENT +
	    CPC_HV_NO_ACCESS + CPC_TARGET_CPC + CPC_TARGET_SMPL + PCTX_SYSC_LWP_EXIT_EVENT;

	if (SIGEMT != 16 || EMT_CPCOVF != 1 || constants != 2 + 1 + 2 + 4 + 8 + 16 + 256 + 1 + 1 +
	    2 + 1 + 11 + 0 + 1 + 7 || attr.ca_val != 0 || npic != 0 || now <= 0 || cpu != 0 ||
	    init == NULL || CPC_MAX_EVENT_LEN != 512 || sizeof(CPC_TICKREG_NAME) != 4)
		return (1);
	printf("header ok\n");
	return (0);
}
