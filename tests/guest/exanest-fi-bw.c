// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * exanest-fi-bw: the libfabric provider's streaming bandwidth (make evaluate,
 * tests/guest/eval-mpi.sh), as osu_bw or fabtests' bandwidth tests measure it: tagged messages
 * of SIZE bytes from an endpoint on the guest's engine 0 to one on engine 1, WINDOW of them in
 * flight, MESSAGES in all after one window to warm up (the pages faulted in, the registrations
 * cached). One thread drives both endpoints, so the figure is the provider's and the engines',
 * not the guest scheduler's hand-overs between two processes. The receive buffers are checked.
 *
 *   exanest-fi-bw [SIZE [WINDOW [MESSAGES]]]      (defaults 1048576 16 64)
 *
 * Prints one JSON line: {"bench": "fi-bw", "size": ..., "window": ..., "messages": ...,
 * "mb_per_s": ...} (bytes over CLOCK_MONOTONIC microseconds), or one with "error".
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fabric-pair.h"

#define MAX_WINDOW 64

static int fail(const char *what, long ret)
{
	printf("{\"bench\": \"fi-bw\", \"error\": \"%s: %ld\"}\n", what, ret);
	return 1;
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Send @n messages of @size, @window in flight; 0, or the failing call's negative result. */
static long stream(struct side *s, unsigned char *src, unsigned char **dst, size_t size,
		   int window, int n)
{
	int busy[MAX_WINDOW] = { 0 }, posted = 0, received = 0, sent = 0;
	static int ctx[MAX_WINDOW];
	struct fi_cq_tagged_entry e;
	long r;

	while (received < n || sent < n) {
		for (int k = 0; posted < n && k < window; k++) {
			if (busy[k])
				continue;
			r = fi_tsend(s[0].ep, src, size, NULL, s[0].peer, 5, NULL);
			if (r == -FI_EAGAIN)
				break;
			if (r)
				return r;
			/* Its receive: the message matches it, or waits for it (RTS, unexpected). */
			ctx[k] = k;
			r = fi_trecv(s[1].ep, dst[k], size, NULL, FI_ADDR_UNSPEC, 5, 0, &ctx[k]);
			if (r)
				return r;
			busy[k] = 1;
			posted++;
		}
		r = fi_cq_read(s[1].cq, &e, 1);
		if (r == 1) {
			if (!e.op_context || e.len != size)
				return -FI_EOTHER;
			if (e.flags & FI_RECV) {
				busy[*(int *)e.op_context] = 0;
				received++;
			}
		} else if (r != -FI_EAGAIN) {
			return r;
		}
		r = fi_cq_read(s[0].cq, &e, 1);
		if (r == 1)
			sent++;
		else if (r != -FI_EAGAIN)
			return r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 20;
	int window = argc > 2 ? atoi(argv[2]) : 16, n = argc > 3 ? atoi(argv[3]) : 64;
	unsigned char *src, *dst[MAX_WINDOW];
	struct side s[2];
	const char *why;
	double t0, t1;
	long r;

	if (!size || window < 1 || window > MAX_WINDOW || n < 1)
		return fail("usage: exanest-fi-bw [SIZE [WINDOW<=64 [MESSAGES]]]", 0);
	why = open_pair(s, FI_MSG | FI_TAGGED, 0);
	if (why)
		return fail(why, 0);
	src = malloc(size);
	for (int k = 0; k < window; k++)
		dst[k] = malloc(size);
	for (size_t b = 0; b < size; b++)
		src[b] = (unsigned char)(b * 7 + 3);
	r = stream(s, src, dst, size, window, window);
	if (r)
		return fail("warm-up", r);
	for (int k = 0; k < window; k++)
		memset(dst[k], 0, size);
	t0 = now_us();
	r = stream(s, src, dst, size, window, n);
	t1 = now_us();
	if (r)
		return fail("stream", r);
	for (int k = 0; k < window && k < n; k++)
		if (memcmp(dst[k], src, size))
			return fail("the bytes differ in receive buffer", k);
	printf("{\"bench\": \"fi-bw\", \"size\": %zu, \"window\": %d, \"messages\": %d, \"mb_per_s\": %.1f}\n",
	       size, window, n, (double)size * n / (t1 - t0));
	for (int k = 0; k < 2; k++)
		close_side(&s[k]);
	return 0;
}
