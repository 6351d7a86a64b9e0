/* A program that runs code it generated, and names it the way JIT compilers do for perf: it
 * copies a loop into anonymous memory, makes it executable and writes /tmp/perf-PID.map.
 *
 *   jit ITERATIONS            names it in /tmp/perf-PID.map (and prints the path, so that the
 *                             test that ran it can remove it)
 *   jit ITERATIONS DIR        names it in a jitdump file DIR/jit-PID.dump instead, mapped
 *                             executable as perf's convention asks
 *
 * jitted_hot_loop counts ITERATIONS down to 0 (ITERATIONS > 0). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* x86-64: 1: dec %rdi; jne 1b; ret */
static const unsigned char loop[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};

/* Writes DIR/jit-PID.dump: the header, then one code-load record naming `size` bytes at
 * `code`; maps it executable (how a profiler learns where it is). */
static int write_jitdump(const char *dir, const unsigned char *code, size_t size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/jit-%d.dump", dir, (int)getpid());
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return -1;
    uint32_t header[6] = {0x4A695444, 1, 40, 62 /* EM_X86_64 */, 0, (uint32_t)getpid()};
    uint64_t header_rest[2] = {0, 0};
    static const char name[] = "jitted_dump_loop";
    uint32_t prefix[2] = {0 /* JIT_CODE_LOAD */, (uint32_t)(16 + 40 + sizeof name + size)};
    uint64_t timestamp = 0;
    uint32_t ids[2] = {(uint32_t)getpid(), (uint32_t)getpid()};
    uint64_t load[4] = {(uint64_t)(uintptr_t)code, (uint64_t)(uintptr_t)code, size, 0};
    if (write(fd, header, sizeof header) < 0 || write(fd, header_rest, sizeof header_rest) < 0 ||
        write(fd, prefix, sizeof prefix) < 0 || write(fd, &timestamp, sizeof timestamp) < 0 ||
        write(fd, ids, sizeof ids) < 0 || write(fd, load, sizeof load) < 0 ||
        write(fd, name, sizeof name) < 0 || write(fd, code, size) < 0)
        return -1;
    if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
        return -1;
    return 0;
}

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
    if (argc > 2) {
        if (write_jitdump(argv[2], code, sizeof loop) != 0)
            return 1;
        ((void (*)(unsigned long))code)(n);
        return 0;
    }
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
