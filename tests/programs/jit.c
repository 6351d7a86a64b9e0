/* A program that runs code it generated, and names it the way JIT compilers do for perf: it
 * copies a loop into anonymous memory, makes it executable and writes /tmp/perf-PID.map.
 *
 *   jit ITERATIONS
 *
 * jitted_hot_loop counts ITERATIONS down to 0 (ITERATIONS > 0). The program prints the map
 * file's path, so that the test that ran it can remove it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* x86-64: 1: dec %rdi; jne 1b; ret */
static const unsigned char loop[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000000UL;
    if (n == 0)
        return 2;
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 1;
    memcpy(code, loop, sizeof loop);
    if (mprotect(code, 4096, PROT_READ | PROT_EXEC) != 0)
        return 1;
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (map == NULL)
        return 1;
    fprintf(map, "%lx %zx jitted_hot_loop\n", (unsigned long)code, sizeof loop);
    fclose(map);
    printf("%s\n", path);
    fflush(stdout);
    ((void (*)(unsigned long))code)(n);
    return 0;
}
