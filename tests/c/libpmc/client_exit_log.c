/*
 * An owner that exits without closing its log: what it logged is in the file all the same, as
 * FreeBSD's driver writes out an exiting owner's log.  A child process configures the log,
 * writes a user record (pmc_writelog) and exits; the parent reads the file with pmclog(3).
 *
 * Usage: client_exit_log DIR.  Prints "exit log ok".
 */
#include <sys/wait.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <pmc.h>
#include <pmclog.h>

#include "client_check.h"

#define MARK	0x5eedu

int
main(int argc, char **argv)
{
	char path[4096];
	struct pmclog_ev ev;
	void *parser;
	int fd, status, found = 0;
	pid_t child;

	EXPECT(argc == 2);
	snprintf(path, sizeof(path), "%s/exit.log", argv[1]);
	CHECK(child = fork());
	if (child == 0) {
		CHECK(pmc_init());
		CHECK(fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
		CHECK(pmc_configure_logfile(fd));
		CHECK(pmc_writelog(MARK));
		exit(0);	/* no pmc_close_logfile */
	}
	CHECK(waitpid(child, &status, 0));
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(fd = open(path, O_RDONLY));
	CHECK_PTR(parser = pmclog_open(fd));
	while (pmclog_read(parser, &ev) == 0)
		if (ev.pl_type == PMCLOG_TYPE_USERDATA && ev.pl_u.pl_u.pl_userdata == MARK)
			found = 1;
	EXPECT(ev.pl_state == PMCLOG_EOF);
	EXPECT(found);
	pmclog_close(parser);
	printf("exit log ok\n");
	return 0;
}
