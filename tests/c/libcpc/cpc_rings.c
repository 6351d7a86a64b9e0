/*
 * CPC_COUNT_USER and CPC_COUNT_SYSTEM (and the nouser and sys attributes) on the Linux host's
 * software events: page faults of this thread taken in user mode (touching fresh pages) and in
 * system mode (read(2) copying into fresh pages) are counted by the requests of those modes
 * only; a request of neither mode counts nothing; a user-mode SMPL request records user
 * addresses only.  Prints "user U system S" (the faults of each phase) and "rings ok".
 */
#include <sys/types.h>
#include <sys/mman.h>

#include <inttypes.h>
#include <stdint.h>
#include <unistd.h>

#include <libcpc.h>

#include "check.h"

#define PAGES 256

/* Reads PAGES pages of zeros from a memory file into PAGES fresh pages: the faults on the
 * destination are taken by the kernel's copy, in system mode. */
static void
read_into_fresh_pages(long page, int fd)
{
	char *to = mmap(NULL, (size_t)page * PAGES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ssize_t got;

	EXPECT(to != MAP_FAILED);
	CHECK(madvise(to, (size_t)page * PAGES, MADV_NOHUGEPAGE));
	got = pread(fd, to, (size_t)page * PAGES, 0);
	EXPECT(got == (ssize_t)page * PAGES);
}

int
main(void)
{
	cpc_t *cpc;
	cpc_set_t *set;
	cpc_buf_t *before, *after, *diff;
	cpc_attr_t nouser = { "nouser", 1 }, sys = { "sys", 1 }, nrecs = { "smpl_nrecs", 64 };
	long page = sysconf(_SC_PAGESIZE);
	uint64_t user, system, both, none, attr_none, attr_both, ip;
	int r_user, r_system, r_both, r_none, r_attr_none, r_attr_both, r_smpl;
	uint_t records, i;
	int fd;

	CHECK(fd = memfd_create("cpc-rings", 0));
	CHECK(ftruncate(fd, (off_t)page * PAGES));
	CHECK_PTR(cpc = cpc_open(CPC_VER_CURRENT));
	CHECK_PTR(set = cpc_set_create(cpc));
	CHECK(r_user = cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 0, NULL));
	CHECK(r_system = cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_SYSTEM, 0, NULL));
	CHECK(r_both = cpc_set_add_request(cpc, set, "page-faults", 0,
	    CPC_COUNT_USER | CPC_COUNT_SYSTEM, 0, NULL));
	CHECK(r_none = cpc_set_add_request(cpc, set, "page-faults", 0, 0, 0, NULL));
	CHECK(r_attr_none = cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 1,
	    &nouser));
	CHECK(r_attr_both = cpc_set_add_request(cpc, set, "page-faults", 0, CPC_COUNT_USER, 1,
	    &sys));
	CHECK(r_smpl = cpc_set_add_request(cpc, set, "page-faults", UINT64_MAX,
	    CPC_COUNT_USER | CPC_HW_SMPL, 1, &nrecs));
	CHECK_PTR(before = cpc_buf_create(cpc, set));
	CHECK_PTR(after = cpc_buf_create(cpc, set));
	CHECK_PTR(diff = cpc_buf_create(cpc, set));
	CHECK(cpc_bind_curlwp(cpc, set, 0));

	/* System mode (first: a wrong SMPL record of it would be kept). */
	CHECK(cpc_set_sample(cpc, set, before));
	read_into_fresh_pages(page, fd);
	CHECK(cpc_set_sample(cpc, set, after));
	cpc_buf_sub(cpc, diff, after, before);
	CHECK(cpc_buf_get(cpc, diff, r_user, &user));
	CHECK(cpc_buf_get(cpc, diff, r_system, &system));
	CHECK(cpc_buf_get(cpc, diff, r_both, &both));
	printf("system phase: user %" PRIu64 " system %" PRIu64 " both %" PRIu64 "\n", user,
	    system, both);
	EXPECT(system >= PAGES / 2 && user < PAGES / 8 && both >= system);

	/* User mode. */
	CHECK(cpc_set_sample(cpc, set, before));
	touch_fresh_pages(page, PAGES);
	CHECK(cpc_set_sample(cpc, set, after));
	cpc_buf_sub(cpc, diff, after, before);
	CHECK(cpc_buf_get(cpc, diff, r_user, &user));
	CHECK(cpc_buf_get(cpc, diff, r_system, &system));
	CHECK(cpc_buf_get(cpc, diff, r_both, &both));
	printf("user phase: user %" PRIu64 " system %" PRIu64 " both %" PRIu64 "\n", user, system,
	    both);
	EXPECT(user >= PAGES && system < PAGES / 8 && both >= user);

	/* Neither mode: nothing, ever; sys as an attribute: both modes. */
	CHECK(cpc_buf_get(cpc, after, r_none, &none));
	CHECK(cpc_buf_get(cpc, after, r_attr_none, &attr_none));
	CHECK(cpc_buf_get(cpc, after, r_attr_both, &attr_both));
	CHECK(cpc_buf_get(cpc, after, r_both, &both));
	EXPECT(none == 0 && attr_none == 0 && attr_both == both);

	/* The user-mode SMPL request recorded user addresses only. */
	CHECK(cpc_buf_smpl_rec_count(cpc, after, r_smpl, &records));
	EXPECT(records == 64);
	for (i = 0; i < records; i++) {
		CHECK(cpc_buf_smpl_get_item(cpc, after, r_smpl, (int)i, 0, &ip));
		if (ip == 0 || ip >= 0x800000000000ull) {
			fprintf(stderr, "record %u: ip %#" PRIx64 " is no user address\n", i, ip);
			exit(1);
		}
	}
	CHECK(cpc_close(cpc));
	printf("rings ok\n");
	return (0);
}
