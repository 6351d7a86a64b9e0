/*
 * Measured by cputrack's end-to-end tests on the Linux host: touches 64 fresh pages, forks a
 * child that touches 256 and exits, waits for it, then executes itself as "stage2", which
 * touches 128 pages and exits 0.  Page faults are at least the pages touched.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <string.h>
#include <unistd.h>

static void
touch(int pages)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, (size_t)page * pages, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int i;

	if (p == MAP_FAILED)
		_exit(2);
	(void)madvise(p, (size_t)page * pages, MADV_NOHUGEPAGE);
	for (i = 0; i < pages; i++)
		p[(long)i * page] = 1;
}

int
main(int argc, char **argv)
{
	pid_t child;
	int status;

	if (argc > 1 && strcmp(argv[1], "stage2") == 0) {
		touch(128);
		return (0);
	}
	touch(64);
	child = fork();
	if (child < 0)
		return (2);
	if (child == 0) {
		touch(256);
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child || status != 0)
		return (2);
	execl("/proc/self/exe", argv[0], "stage2", (char *)NULL);
	return (2);
}
