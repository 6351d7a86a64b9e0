/*
 * cpc_enable(3CPC), Example 1 ("Use cpc_enable and cpc_disable to minimize code needed by
 * application"), as illumos-gate's usr/src/man/man3cpc/cpc_enable.3cpc prints it, after the
 * one include its SYNOPSIS names.  Run normally, "no harm will ensue": with no set bound
 * cpc_enable and cpc_disable fail (EINVAL) and the program goes on.  (main falls off its end
 * as on the page: its exit status is 0 in C99 and later, unspecified in C89.)
 */
#include <libcpc.h>

int
main(int argc, char *argv[])
{
   cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
    /* ... application code ... */
 
   if (cpc != NULL)
           (void) cpc_enable(cpc);
 
    /* ==> Code to be measured goes here <== */
 
   if (cpc != NULL)
           (void) cpc_disable(cpc);
 
    /* ... other application code */
}
