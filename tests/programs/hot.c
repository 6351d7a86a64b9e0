/* A program with a known hot function, for pmcstat's sampling tests.
 *
 *   hot [ITERATIONS [STATUS]]
 *
 * hot_function runs ITERATIONS iterations (default 400 000 000), cold_function a twentieth of
 * that; then the program exits with STATUS (default 0). Build with
 * `cc -O1 -fno-omit-frame-pointer`. The empty asm keeps the compiler from folding the loops away,
 * and the call to consume() makes both functions non-leaf, so they set up a frame pointer and a
 * frame-pointer walk from a sample inside them finds main as their caller. */
#include <stdlib.h>

__attribute__((noinline)) unsigned long consume(unsigned long x) {
    __asm__ volatile("" : "+r"(x));
    return x;
}

__attribute__((noinline)) unsigned long hot_function(unsigned long n) {
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) {
        x += i;
        __asm__ volatile("" : "+r"(x));
    }
    return consume(x);
}

__attribute__((noinline)) unsigned long cold_function(unsigned long n) {
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) {
        x ^= i;
        __asm__ volatile("" : "+r"(x));
    }
    return consume(x);
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 400000000UL;
    int status = argc > 2 ? atoi(argv[2]) : 0;
    unsigned long r = hot_function(n) + cold_function(n / 20);
    consume(r);
    return status;
}
