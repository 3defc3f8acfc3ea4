// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-lib: the C library (include/exanest_dma.h) on the guest's two engines, for what the
 * host test (rust/exanest-dma/tests/capi.c, on /dev/null) cannot reach: a destroyed queue
 * handle gives -EBADF and reaches no live queue, and reg_remote's rights hold on the link (a
 * put under a read-only key and a get under a write-only key end -ENOKEY, nothing written).
 * Built against the installed library by scripts/build-guest-rust.sh; one GUEST-TEST line per
 * check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <exanest_dma.h>

static int failed;

static void t(int ok, const char *name, int got)
{
	if (ok)
		printf("GUEST-TEST: ok %s\n", name);
	else
		printf("GUEST-TEST: not ok %s - got %d (%s)\n", name, got, exanest_dma_strerror(got));
	failed |= !ok;
}

/* One remote op to completion: its status, or the call's error. */
static int op(struct exanest_dma_queue_h *q, int put, void *local, uint32_t len,
	      const struct exanest_dma_remote *r)
{
	struct exanest_dma_completion c;
	int err = put ? exanest_dma_queue_put(q, (uintptr_t)local, len, r, 0, 1) :
			exanest_dma_queue_get(q, (uintptr_t)local, len, r, 0, 2);

	while (!err && exanest_dma_queue_poll(q, &c, 1) == 0)
		err = exanest_dma_queue_wait(q, 10 * 1000000000ll);
	return err ? err : c.status;
}

static int all(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

int main(void)
{
	enum { N = 64 << 10 };
	struct exanest_dma *a = NULL, *b = NULL, *c = NULL;
	struct exanest_dma_queue_h *q = NULL, *stale = NULL;
	struct exanest_dma_remote ro, wo;
	uint8_t *src = malloc(N), *dst = malloc(N), *in_ro = malloc(N), *in_wo = malloc(N);
	uint32_t h, cap = 7;
	int r;

	if (!src || !dst || !in_ro || !in_wo || exanest_dma_open(0, &a) || exanest_dma_open(0, &c) ||
	    exanest_dma_open(1, &b)) {
		t(0, "lib-setup", -errno);
		return 1;
	}
	memset(src, 0x5a, N);
	memset(dst, 0, N);
	memset(in_ro, 0x11, N);
	memset(in_wo, 0x22, N);

	/* A NULL address: refused by the library, whatever the mode. */
	r = exanest_dma_reg(a, NULL, N, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &h);
	t(r == -EINVAL && h == 0, "lib-reg-null-einval", r);

	/* A destroyed queue handle reaches nothing, not even the queue created after it. */
	r = exanest_dma_queue_create(c, 4, 4, &stale);
	t(r == 0 && stale, "lib-queue-create", r);
	exanest_dma_queue_destroy(stale);
	r = exanest_dma_queue_create(a, 4, 4, &q);
	t(r == 0 && q, "lib-queue-create-second", r);
	r = exanest_dma_queue_post(stale, (uintptr_t)src, (uintptr_t)dst, 64, 9);
	t(r == -EBADF, "lib-stale-queue-post-ebadf", r);
	r = exanest_dma_queue_outstanding(stale);
	t(r == -EBADF, "lib-stale-queue-outstanding-ebadf", r);
	r = exanest_dma_queue_info(stale, &cap, NULL, NULL);
	t(r == -EBADF && cap == 0, "lib-stale-queue-info-ebadf", r);
	t(exanest_dma_queue_outstanding(q) == 0, "lib-live-queue-untouched",
	  exanest_dma_queue_outstanding(q));
	exanest_dma_queue_destroy(stale); /* a second destroy is ignored */

	/* Remote rights: a read-only and a write-only region on node 1. */
	r = exanest_dma_reg(a, src, N, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &h);
	if (!r)
		r = exanest_dma_reg(a, dst, N, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &h);
	if (!r)
		r = exanest_dma_reg_remote(b, in_ro, N, EXANEST_DMA_ACCESS_REMOTE_READ,
					   EXANEST_DMA_MODE_ON_DEMAND, &h, &ro);
	if (!r)
		r = exanest_dma_reg_remote(b, in_wo, N, EXANEST_DMA_ACCESS_REMOTE_WRITE,
					   EXANEST_DMA_MODE_ON_DEMAND, &h, &wo);
	t(r == 0, "lib-reg-remote-rights", r);
	if (!r) {
		r = op(q, 1, src, N, &ro);
		t(r == -ENOKEY && all(in_ro, N, 0x11), "lib-put-read-only-key-enokey", r);
		r = op(q, 0, dst, N, &wo);
		t(r == -ENOKEY && all(dst, N, 0), "lib-get-write-only-key-enokey", r);
		r = op(q, 1, src, N, &wo);
		t(r == 0 && all(in_wo, N, 0x5a), "lib-put-write-only-key", r);
		r = op(q, 0, dst, N, &ro);
		t(r == 0 && all(dst, N, 0x11), "lib-get-read-only-key", r);
	}
	exanest_dma_queue_destroy(q);
	exanest_dma_close(a);
	exanest_dma_close(b);
	exanest_dma_close(c);
	return failed;
}
