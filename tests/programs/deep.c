/* A program with a deep call chain, for the unwinding tests: main -> level x DEPTH -> spin, where
 * spin spends the time.
 *
 *   deep [ITERATIONS [DEPTH]]     (DEPTH defaults to 32)
 *
 * Built with `cc -O2 -fomit-frame-pointer`. `noipa` keeps each call a call, and the empty asm
 * on level's result keeps the compiler from turning the recursion into a loop. spin keeps %rbp
 * busy with junk, as code without frame pointers may. */
#include <stdlib.h>

__attribute__((noipa)) unsigned long spin(unsigned long n) {
    unsigned long x = 0, junk = n * 0x9e3779b97f4a7c15ul;
    for (unsigned long i = 0; i < n; i++) {
        x += i ^ junk;
        __asm__ volatile("mov %1, %%rbp\n\tadd %%rbp, %0" : "+r"(x) : "r"(junk) : "rbp");
    }
    return x;
}

__attribute__((noipa)) unsigned long level(int depth, unsigned long n) {
    unsigned long r = depth <= 1 ? spin(n) : level(depth - 1, n);
    __asm__ volatile("" : "+r"(r));
    return r ^ (unsigned long)depth;
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 400000000ul;
    int depth = argc > 2 ? atoi(argv[2]) : 32;
    return (int)(level(depth, n) == 1);
}
