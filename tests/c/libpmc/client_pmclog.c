/*
 * A pmclog(3) reader over a log made on the simulator host: "hot-cold" sampled with an
 * instructions PMC in process-sampling mode with callchains, logged to a file.  The log is read
 * whole (one pmclog_feed), in random chunk sizes (pmclog_open(PMCLOG_FD_NONE) and pmclog_feed
 * whenever pmclog_read asks for data), and from the descriptor (pmclog_open(fd)); every way
 * must see the same records and the same callchains.
 *
 * Run with PMC_HOST=sim and a writable directory as argv[1].  Prints the record and callchain
 * counts and "pmclog ok".
 */
#define _DEFAULT_SOURCE
#include <sys/types.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <pmc.h>
#include <pmclog.h>

#include "client_check.h"

#define RATE	100000	/* one sample per 100 000 instructions: 100 for hot-cold */

struct summary {
	int records;		/* records read before the end */
	int callchains;		/* CALLCHAIN records */
	uint64_t pcs;		/* program counters in them */
	uint64_t digest;	/* of every callchain's pid, pmcid, cpuflags and PCs, in order */
	enum pmclog_state end;	/* pl_state of the last pmclog_read */
};

static void
account(struct summary *s, const struct pmclog_ev *ev)
{
	const struct pmclog_ev_callchain *cc;
	uint32_t i;

	s->records++;
	if (ev->pl_type != PMCLOG_TYPE_CALLCHAIN)
		return;
	cc = &ev->pl_u.pl_cc;
	s->callchains++;
	s->pcs += cc->pl_npc;
	s->digest = s->digest * 31 + cc->pl_pid;
	s->digest = s->digest * 31 + cc->pl_pmcid;
	s->digest = s->digest * 31 + cc->pl_cpuflags;
	for (i = 0; i < cc->pl_npc; i++)
		s->digest = s->digest * 1000003 + cc->pl_pc[i];
}

/* Reads `len` bytes of log at `data`, fed in chunks of 1 to `max_chunk` bytes (the whole log
 * at once when max_chunk is 0). */
static struct summary
read_fed(char *data, size_t len, int max_chunk)
{
	struct summary s;
	struct pmclog_ev ev;
	void *parser;
	size_t fed, chunk;

	memset(&s, 0, sizeof(s));
	CHECK_PTR(parser = pmclog_open(PMCLOG_FD_NONE));
	fed = 0;
	for (;;) {
		if (pmclog_read(parser, &ev) == 0) {
			account(&s, &ev);
			continue;
		}
		if (ev.pl_state != PMCLOG_REQUIRE_DATA || fed == len)
			break;
		chunk = max_chunk == 0 ? len : 1 + (size_t)rand() % (size_t)max_chunk;
		if (chunk > len - fed)
			chunk = len - fed;
		CHECK(pmclog_feed(parser, data + fed, (int)chunk));
		fed += chunk;
	}
	s.end = ev.pl_state;
	pmclog_close(parser);
	return (s);
}

static struct summary
read_fd(const char *path)
{
	struct summary s;
	struct pmclog_ev ev;
	void *parser;
	int fd;

	memset(&s, 0, sizeof(s));
	CHECK(fd = open(path, O_RDONLY));
	CHECK_PTR(parser = pmclog_open(fd));
	while (pmclog_read(parser, &ev) == 0)
		account(&s, &ev);
	s.end = ev.pl_state;
	pmclog_close(parser);
	CHECK(close(fd));
	return (s);
}

static int
same(const struct summary *a, const struct summary *b)
{
	return (a->records == b->records && a->callchains == b->callchains &&
	    a->pcs == b->pcs && a->digest == b->digest && a->end == b->end);
}

/* Samples hot-cold into the log at `path`; returns the program's pid. */
static pid_t
make_log(const char *path)
{
	char *argv[] = { "hot-cold", NULL };
	pmc_id_t pmc;
	pid_t pid;
	int fd, status;

	CHECK(fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	CHECK(pmc_configure_logfile(fd));
	CHECK(pmc_allocate("instructions", PMC_MODE_TS, PMC_F_CALLCHAIN, PMC_CPU_ANY, &pmc, RATE));
	CHECK(pid = pmc_spawn(argv));
	CHECK(pmc_attach(pmc, pid));
	CHECK(pmc_start(pmc));
	CHECK(pmc_resume(pid));
	CHECK(pmc_wait(pid, &status));
	EXPECT(status == 0);
	CHECK(pmc_stop(pmc));
	CHECK(pmc_release(pmc));
	CHECK(pmc_flush_logfile());
	CHECK(pmc_close_logfile());
	CHECK(close(fd));
	return (pid);
}

static char *
slurp(const char *path, size_t *len)
{
	struct stat st;
	char *data;
	ssize_t n;
	int fd;

	CHECK(fd = open(path, O_RDONLY));
	CHECK(fstat(fd, &st));
	EXPECT(st.st_size > 0);
	CHECK_PTR(data = malloc((size_t)st.st_size));
	CHECK(n = read(fd, data, (size_t)st.st_size));
	EXPECT(n == st.st_size);
	CHECK(close(fd));
	*len = (size_t)n;
	return (data);
}

int
main(int argc, char **argv)
{
	char path[4096];
	struct summary whole, fd, chunked;
	struct pmclog_ev ev;
	void *parser;
	size_t len;
	char *data;
	pid_t pid;
	int round, max_chunk, pids_ok;

	EXPECT(argc == 2);
	EXPECT(strcmp(pmc_host_name(), "sim") == 0);
	CHECK(pmc_init());
	snprintf(path, sizeof(path), "%s/hot-cold.pmclog", argv[1]);
	pid = make_log(path);
	data = slurp(path, &len);

	whole = read_fed(data, len, 0);
	printf("log of %zu bytes: %d records, %d callchains, %ju PCs\n", len, whole.records,
	    whole.callchains, (uintmax_t)whole.pcs);
	EXPECT(whole.end == PMCLOG_EOF);		/* it ends with CLOSELOG */
	EXPECT(whole.callchains > 0);
	EXPECT(whole.callchains == 10000000 / RATE);

	/* Every callchain is hot-cold's. */
	CHECK_PTR(parser = pmclog_open(PMCLOG_FD_NONE));
	CHECK(pmclog_feed(parser, data, (int)len));
	pids_ok = 1;
	while (pmclog_read(parser, &ev) == 0)
		if (ev.pl_type == PMCLOG_TYPE_CALLCHAIN && ev.pl_u.pl_cc.pl_pid != (uint32_t)pid)
			pids_ok = 0;
	pmclog_close(parser);
	EXPECT(pids_ok);

	fd = read_fd(path);
	EXPECT(same(&fd, &whole));

	srand(12345);
	for (round = 0; round < 40; round++) {
		max_chunk = round < 10 ? round + 1 : 1 + rand() % 8192;
		chunked = read_fed(data, len, max_chunk);
		if (!same(&chunked, &whole)) {
			fprintf(stderr, "chunks of at most %d bytes: %d records, %d callchains; "
			    "whole: %d records, %d callchains\n", max_chunk, chunked.records,
			    chunked.callchains, whole.records, whole.callchains);
			return (1);
		}
	}
	free(data);
	printf("pmclog ok\n");
	return (0);
}
