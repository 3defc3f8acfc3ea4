/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Result lines of the guest test programs: "GUEST-TEST: ok NAME" or "GUEST-TEST: not ok NAME -
 * why", each written with one write() so that kernel console output cannot split it.
 */
#ifndef GUEST_TEST_H
#define GUEST_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static int failures;
/* Appended to every test name (e.g. "@0000:00:04.0"); empty by default. */
static const char *result_suffix = "";

static void result(int ok, const char *name, const char *fmt, ...)
{
	char line[512];
	int n;
	va_list ap;

	n = snprintf(line, sizeof(line), "GUEST-TEST: %s %s%s", ok ? "ok" : "not ok", name,
		     result_suffix);
	if (!ok && fmt && n < (int)sizeof(line)) {
		n += snprintf(line + n, sizeof(line) - n, " - ");
		va_start(ap, fmt);
		if (n < (int)sizeof(line))
			n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
	}
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	fflush(stdout);
	if (write(STDOUT_FILENO, line, n) != n)
		perror("write");
	if (!ok)
		failures++;
}

#endif /* GUEST_TEST_H */
