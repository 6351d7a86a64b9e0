/* A program with a known call chain, for the unwinding tests: main -> a -> b -> c, where c
 * spends the time.
 *
 *   chain [ITERATIONS]        c spins ITERATIONS times
 *   chain COUNT read          c reads a MiB of /dev/zero COUNT times (in the kernel)
 *   chain COUNT clock         c reads the clock COUNT times (in the vDSO)
 *
 * Built with `cc -O2 -fomit-frame-pointer` (no frame pointers: a frame-pointer walk from c does
 * not find b, a and main). `noipa` keeps each function a function of its own (no inlining,
 * cloning or tail calls), and each caller adds to its callee's result, so the calls stay calls.
 * c keeps %rbp busy with junk while it runs, as code without frame pointers may. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int reading, clocking;

__attribute__((noipa)) unsigned long c(unsigned long n) {
    if (reading) {
        static char buf[1 << 20];
        int fd = open("/dev/zero", O_RDONLY);
        unsigned long got = 0;
        for (unsigned long i = 0; i < n && fd >= 0; i++)
            got += (unsigned long)read(fd, buf, sizeof buf);
        return got;
    }
    if (clocking) {
        struct timespec ts;
        unsigned long sum = 0;
        for (unsigned long i = 0; i < n; i++) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            sum += (unsigned long)ts.tv_nsec;
        }
        return sum;
    }
    unsigned long x = 0, junk = n * 0x9e3779b97f4a7c15ul;
    for (unsigned long i = 0; i < n; i++) {
        x += i ^ junk;
        /* %rbp holds junk here, as any register may in code without frame pointers. */
        __asm__ volatile("mov %1, %%rbp\n\tadd %%rbp, %0" : "+r"(x) : "r"(junk) : "rbp");
    }
    __asm__ volatile("" : "+r"(junk));
    return x + junk;
}

__attribute__((noipa)) unsigned long b(unsigned long n) {
    return c(n) + 3;
}

__attribute__((noipa)) unsigned long a(unsigned long n) {
    return b(n) + 2;
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 400000000ul;
    reading = argc > 2 && strcmp(argv[2], "read") == 0;
    clocking = argc > 2 && strcmp(argv[2], "clock") == 0;
    return (int)(a(n) + 1 == 0);
}
