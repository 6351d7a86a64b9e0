/*
 * pctx_create(filename, argv, ...) executes `filename`, with `argv` as the arguments (argv[0]
 * is only the name the program gets), and pctx_create and pctx_capture report their failures
 * through the error function, or on standard error without one (pctx_capture(3CPC)).
 *
 * Arguments: "run FILE" launches FILE as "renamed-child child", which exits 7 if its argv[0]
 * is "renamed-child" (this program itself: "child" mode), and prints "status N";
 * "fail MISSING" tries a FILE that does not exist, with and without an error function, and a
 * process that does not exist, and prints what the error function got.
 */
#include <libcpc.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int status = -1;

static void
on_exit_event(pctx_t *pctx, pid_t pid, id_t lwp, int code, void *arg)
{
	(void)pctx; (void)pid; (void)lwp; (void)arg;
	status = code;
}

static void
on_error(const char *fn, const char *fmt, va_list ap)
{
	char text[512];

	vsnprintf(text, sizeof(text), fmt, ap);
	printf("errfn %s: %s", fn, text);
}

int
main(int argc, char **argv)
{
	char *child[] = { "renamed-child", "child", NULL };
	pctx_t *pctx;

	if (argc == 2 && strcmp(argv[1], "child") == 0)
		return (strcmp(argv[0], "renamed-child") == 0 ? 7 : 1);
	if (argc != 3)
		return (1);
	if (strcmp(argv[1], "run") == 0) {
		if ((pctx = pctx_create(argv[2], child, NULL, 0, NULL)) == NULL) {
			perror("pctx_create");
			return (1);
		}
		if (pctx_set_events(pctx, PCTX_SYSC_EXIT_EVENT, on_exit_event, PCTX_NULL_EVENT) != 0 ||
		    pctx_run(pctx, 0, 0, NULL) != 0) {
			perror("pctx_run");
			return (1);
		}
		pctx_release(pctx);
		printf("status %d\n", status);
		return (0);
	}
	errno = 0;
	if (pctx_create(argv[2], child, NULL, 0, on_error) != NULL || errno != ENOENT)
		return (1);
	fflush(stdout);
	if (pctx_create(argv[2], child, NULL, 0, NULL) != NULL)
		return (1);
	if (pctx_capture(2000000000, NULL, 0, on_error) != NULL)
		return (1);
	fflush(stdout);
	if (pctx_capture(2000000000, NULL, 0, NULL) != NULL)
		return (1);
	return (0);
}
