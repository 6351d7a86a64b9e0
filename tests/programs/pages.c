/* Touches N distinct pages of fresh anonymous memory (one write each), for pmcstat's page-fault
 * test:   pages N
 * Transparent huge pages are turned off for the region, so every page is its own fault. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long pages = argc > 1 ? strtol(argv[1], NULL, 10) : 1024;
    long size = sysconf(_SC_PAGESIZE);
    volatile char *p = mmap(NULL, (size_t)(pages * size), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 2;
    madvise((void *)p, (size_t)(pages * size), MADV_NOHUGEPAGE);
    for (long i = 0; i < pages; i++)
        p[i * size] = 1;
    return 0;
}
