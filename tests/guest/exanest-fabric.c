// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * The libfabric provider's endpoint through libfabric's own API (Documentation/libfabric.rst):
 * one process, two RDM endpoints on the guest's two engines (nodes 0 and 1, cabled through a
 * hub), each in its own domain, addresses exchanged in process. What fi_pingpong and Open MPI
 * do not reach: tag matching with ignored bits, directed receives, peek/claim/discard, cancel,
 * truncation, remote CQ data, inject and its limit, messages that arrive before their receive,
 * rendezvous into fresh malloc'd memory neither side touched, a send to an endpoint that
 * does not exist, and FI_RMA's writes and reads under registered keys. Built against Debian's libfabric 1.17 (dynamically), run where the guest has
 * the Debian disk (tests/guest/check.sh).
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kselftest_harness.h"
#include "fabric-pair.h"

FIXTURE(fab) {
	struct side s[2];
};

FIXTURE_SETUP(fab)
{
	const char *why = open_pair(self->s, FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_RMA,
				    FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);

	ASSERT_EQ(NULL, why) TH_LOG("%s", why);
}

FIXTURE_TEARDOWN(fab)
{
	for (int k = 0; k < 2; k++)
		close_side(&self->s[k]);
}

/* Read side @k's CQ once into its stash; returns -FI_EAVAIL with @err filled for an error. */
static int poll_side(struct side *s, struct fi_cq_err_entry *err)
{
	struct fi_cq_tagged_entry e;
	ssize_t r = fi_cq_read(s->cq, &e, 1);

	if (r == 1 && s->n < STASH) {
		s->stash[s->n++] = e;
		return 1;
	}
	if (r == -FI_EAVAIL) {
		memset(err, 0, sizeof(*err));
		fi_cq_readerr(s->cq, err, 0);
		return -FI_EAVAIL;
	}
	return 0;
}

/*
 * Wait (both sides progressing) for side @k's completion with context @ctx: 0 and the entry, or
 * the error's FI_E* (positive) and @err, or -1 after 20 s.
 */
static int wait_ctx(struct side *s, int k, void *ctx, struct fi_cq_tagged_entry *out,
		    struct fi_cq_err_entry *err)
{
	struct timespec t0, t;
	struct fi_cq_err_entry e;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		for (int j = 0; j < s[k].n; j++) {
			if (s[k].stash[j].op_context == ctx) {
				*out = s[k].stash[j];
				s[k].stash[j] = s[k].stash[--s[k].n];
				return 0;
			}
		}
		if (poll_side(&s[k], &e) == -FI_EAVAIL) {
			if (e.op_context == ctx) {
				if (err)
					*err = e;
				return e.err;
			}
		}
		poll_side(&s[!k], &e);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return -1;
	}
}

static void fill(unsigned char *b, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 31 + seed);
}

static int check(const unsigned char *b, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(i * 31 + seed))
			return 0;
	return 1;
}

/* Eager and rendezvous sizes around the threshold, up to 8 MiB, into malloc'd memory that
 * neither side touched before (the receiver's is never touched by its CPU until the check). */
TEST_F(fab, sizes_into_fresh_memory)
{
	static const size_t sizes[] = { 0, 1, 232, 233, 4096, 65537, 1 << 20, 8 << 20 };
	struct fi_cq_tagged_entry e;
	int ctx_s, ctx_r;

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *src = malloc(n + 1), *dst = malloc(n + 1);

		fill(src, n, i);
		ASSERT_EQ(0, fi_trecv(self->s[1].ep, dst, n, NULL, FI_ADDR_UNSPEC, 7, 0, &ctx_r));
		ASSERT_EQ(0, fi_tsend(self->s[0].ep, src, n, NULL, self->s[0].peer, 7, &ctx_s));
		ASSERT_EQ(0, wait_ctx(self->s, 1, &ctx_r, &e, NULL)) TH_LOG("size %zu", n);
		EXPECT_EQ(n, e.len);
		EXPECT_EQ(7, e.tag);
		EXPECT_EQ(FI_RECV | FI_TAGGED, e.flags & (FI_RECV | FI_TAGGED));
		ASSERT_EQ(0, wait_ctx(self->s, 0, &ctx_s, &e, NULL)) TH_LOG("size %zu", n);
		EXPECT_EQ(FI_SEND | FI_TAGGED, e.flags & (FI_SEND | FI_TAGGED));
		EXPECT_TRUE(check(dst, n, i)) TH_LOG("size %zu: bytes differ", n);
		free(src);
		free(dst);
	}
}

/* A tagged receive takes the tag in the bits ignore leaves; another waits for its own. */
TEST_F(fab, tags_and_ignored_bits)
{
	char a[8] = "first", b[8] = "second", ra[8] = { 0 }, rb[8] = { 0 };
	struct fi_cq_tagged_entry e;
	int c1, c2, cs1, cs2;

	ASSERT_EQ(0, fi_trecv(self->s[1].ep, ra, 8, NULL, FI_ADDR_UNSPEC, 0x1200, 0xff, &c1));
	/* Tag 0x1300 does not fit c1: it waits, unexpected, and c2 takes it later. */
	ASSERT_EQ(0, fi_tsend(self->s[0].ep, b, 8, NULL, self->s[0].peer, 0x1300, &cs2));
	ASSERT_EQ(0, fi_tsend(self->s[0].ep, a, 8, NULL, self->s[0].peer, 0x12ab, &cs1));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &c1, &e, NULL));
	EXPECT_EQ(0x12ab, e.tag);
	EXPECT_STREQ("first", ra);
	ASSERT_EQ(0, fi_trecv(self->s[1].ep, rb, 8, NULL, FI_ADDR_UNSPEC, 0x1300, 0, &c2));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &c2, &e, NULL));
	EXPECT_STREQ("second", rb);
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cs1, &e, NULL));
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cs2, &e, NULL));
}

/* Messages that came before their receives are matched in arrival order; untagged and tagged
 * ones do not match each other. */
TEST_F(fab, unexpected_messages_keep_their_order)
{
	struct fi_cq_tagged_entry e;
	int cs[10], cr[10], ct, cts;
	char t[4] = "tag", rt[4];

	ASSERT_EQ(0, fi_tsend(self->s[0].ep, t, 4, NULL, self->s[0].peer, 5, &cts));
	for (int i = 0; i < 10; i++) {
		int v = i;

		ASSERT_EQ(0, fi_send(self->s[0].ep, &v, sizeof(v), NULL, self->s[0].peer, &cs[i]));
	}
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(0, wait_ctx(self->s, 0, &cs[i], &e, NULL));
	for (int i = 0; i < 10; i++) {
		int v = -1;

		ASSERT_EQ(0, fi_recv(self->s[1].ep, &v, sizeof(v), NULL, FI_ADDR_UNSPEC, &cr[i]));
		ASSERT_EQ(0, wait_ctx(self->s, 1, &cr[i], &e, NULL));
		EXPECT_EQ(i, v);
		EXPECT_EQ(FI_RECV | FI_MSG, e.flags & (FI_RECV | FI_MSG));
	}
	ASSERT_EQ(0, fi_trecv(self->s[1].ep, rt, 4, NULL, FI_ADDR_UNSPEC, 5, 0, &ct));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &ct, &e, NULL));
	EXPECT_STREQ("tag", rt);
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cts, &e, NULL));
}

/* FI_PEEK finds nothing (FI_ENOMSG), then a message without taking it; FI_PEEK | FI_CLAIM sets
 * it aside and FI_CLAIM takes it; a claimed rendezvous message discarded still completes its
 * send. */
TEST_F(fab, peek_claim_discard)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	struct fi_context pctx, cctx;
	char msg[16] = "peeked", got[16] = { 0 };
	size_t big = 1 << 20;
	char *bigbuf = malloc(big);
	int cs, cs2;
	struct iovec iov = { .iov_base = got, .iov_len = sizeof(got) };
	struct fi_msg_tagged m = {
		.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 9,
		.context = &pctx,
	};

	ASSERT_EQ(0, fi_trecvmsg(self->s[1].ep, &m, FI_PEEK));
	EXPECT_EQ(FI_ENOMSG, wait_ctx(self->s, 1, &pctx, &e, &err));
	ASSERT_EQ(0, fi_tsenddata(self->s[0].ep, msg, sizeof(msg), NULL, 0xfeed,
				  self->s[0].peer, 9, &cs));
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cs, &e, NULL));
	/* Peek until it has arrived; it stays. */
	do {
		ASSERT_EQ(0, fi_trecvmsg(self->s[1].ep, &m, FI_PEEK));
	} while (wait_ctx(self->s, 1, &pctx, &e, &err) == FI_ENOMSG);
	EXPECT_EQ(sizeof(msg), e.len);
	EXPECT_EQ(9, e.tag);
	EXPECT_EQ(0xfeed, e.data);
	EXPECT_EQ(0, got[0]);
	m.context = &cctx;
	ASSERT_EQ(0, fi_trecvmsg(self->s[1].ep, &m, FI_PEEK | FI_CLAIM));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &cctx, &e, NULL));
	/* Claimed: another peek finds nothing. */
	m.context = &pctx;
	ASSERT_EQ(0, fi_trecvmsg(self->s[1].ep, &m, FI_PEEK));
	EXPECT_EQ(FI_ENOMSG, wait_ctx(self->s, 1, &pctx, &e, &err));
	m.context = &cctx;
	ASSERT_EQ(0, fi_trecvmsg(self->s[1].ep, &m, FI_CLAIM));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &cctx, &e, NULL));
	EXPECT_STREQ("peeked", got);
	EXPECT_EQ(FI_REMOTE_CQ_DATA, e.flags & FI_REMOTE_CQ_DATA);

	/* A rendezvous message claimed, then discarded: its sender completes. */
	m.tag = 10;
	ASSERT_EQ(0, fi_tsend(self->s[0].ep, bigbuf, big, NULL, self->s[0].peer, 10, &cs2));
	do {
		ASSERT_EQ(0, fi_trecvmsg(self->s[1].ep, &m, FI_PEEK | FI_CLAIM));
	} while (wait_ctx(self->s, 1, &cctx, &e, &err) == FI_ENOMSG);
	EXPECT_EQ(big, e.len);
	ASSERT_EQ(0, fi_trecvmsg(self->s[1].ep, &m, FI_CLAIM | FI_DISCARD));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &cctx, &e, NULL));
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cs2, &e, NULL));
	free(bigbuf);
}

/* A posted receive cancelled completes with FI_ECANCELED; one not posted is FI_ENOENT. */
TEST_F(fab, cancel)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char buf[8];
	int ctx, other;

	ASSERT_EQ(0, fi_trecv(self->s[1].ep, buf, 8, NULL, FI_ADDR_UNSPEC, 77, 0, &ctx));
	ASSERT_EQ(0, fi_cancel(&self->s[1].ep->fid, &ctx));
	EXPECT_EQ(FI_ECANCELED, wait_ctx(self->s, 1, &ctx, &e, &err));
	EXPECT_EQ(-FI_ENOENT, fi_cancel(&self->s[1].ep->fid, &other));
}

/* A message longer than its buffer: FI_ETRUNC with the bytes that did not fit (olen), the
 * buffer's bytes delivered; eager and rendezvous; the sender completes normally. */
TEST_F(fab, truncation)
{
	static const size_t sizes[] = { 100, 1 << 20 };
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int cs, cr;

	for (int i = 0; i < 2; i++) {
		size_t n = sizes[i];
		unsigned char *src = malloc(n), dst[16];

		fill(src, n, 3);
		ASSERT_EQ(0, fi_trecv(self->s[1].ep, dst, sizeof(dst), NULL, FI_ADDR_UNSPEC, 1, 0, &cr));
		ASSERT_EQ(0, fi_tsend(self->s[0].ep, src, n, NULL, self->s[0].peer, 1, &cs));
		EXPECT_EQ(FI_ETRUNC, wait_ctx(self->s, 1, &cr, &e, &err));
		EXPECT_EQ(n - sizeof(dst), err.olen);
		EXPECT_EQ(sizeof(dst), err.len);
		EXPECT_TRUE(check(dst, sizeof(dst), 3));
		ASSERT_EQ(0, wait_ctx(self->s, 0, &cs, &e, NULL));
		free(src);
	}
}

/* A directed receive waits for its source; one naming an address not in the AV is refused. */
TEST_F(fab, directed_receive)
{
	struct fi_cq_tagged_entry e;
	int x = 42, y = 0, cs, cr;

	EXPECT_EQ(-FI_EINVAL, fi_trecv(self->s[1].ep, &y, 4, NULL, 12345, 3, 0, &cr));
	ASSERT_EQ(0, fi_trecv(self->s[1].ep, &y, 4, NULL, self->s[1].peer, 3, 0, &cr));
	ASSERT_EQ(0, fi_tsend(self->s[0].ep, &x, 4, NULL, self->s[0].peer, 3, &cs));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &cr, &e, NULL));
	EXPECT_EQ(42, y);
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cs, &e, NULL));
}

/* fi_tinject: delivered, no completion at the sender, the buffer free at once; over
 * inject_size (232 B, the eager limit) it is FI_EMSGSIZE. */
TEST_F(fab, inject)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char big[233] = { 0 }, msg[8] = "inject", got[8] = { 0 };
	int cr;

	ASSERT_EQ(0, fi_trecv(self->s[1].ep, got, 8, NULL, FI_ADDR_UNSPEC, 4, 0, &cr));
	ASSERT_EQ(0, fi_tinject(self->s[0].ep, msg, 8, self->s[0].peer, 4));
	memset(msg, 'x', sizeof(msg));
	ASSERT_EQ(0, wait_ctx(self->s, 1, &cr, &e, NULL));
	EXPECT_STREQ("inject", got);
	EXPECT_EQ(0, self->s[0].n) TH_LOG("an inject completed at the sender");
	EXPECT_EQ(-FI_EAGAIN, fi_cq_read(self->s[0].cq, &e, 1));
	EXPECT_EQ(-FI_EMSGSIZE, fi_tinject(self->s[0].ep, big, sizeof(big), self->s[0].peer, 4));
	(void)err;
}

/*
 * A send to an endpoint no process holds on the peer's node is refused (FI_ECONNREFUSED); to
 * an endpoint id past the engine's table (256), the peer drops it unanswered, as it does what
 * a stranger sends, and the send times out (FI_ETIMEDOUT).
 */
TEST_F(fab, send_to_no_endpoint)
{
	static const struct { uint32_t ep; int err; } cases[] = {
		{ 200, FI_ECONNREFUSED }, { 4000, FI_ETIMEDOUT },
	};
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	unsigned char addr[8];
	fi_addr_t nobody;
	size_t len = sizeof(addr);
	int cs;

	for (int i = 0; i < 2; i++) {
		len = sizeof(addr);
		ASSERT_EQ(0, fi_av_lookup(self->s[0].av, self->s[0].peer, addr, &len));
		memcpy(addr + 4, &cases[i].ep, 4);
		ASSERT_EQ(1, fi_av_insert(self->s[0].av, addr, 1, &nobody, 0, NULL));
		ASSERT_EQ(0, fi_tsend(self->s[0].ep, "x", 1, NULL, nobody, 1, &cs));
		EXPECT_EQ(cases[i].err, wait_ctx(self->s, 0, &cs, &e, &err))
			TH_LOG("endpoint %u", cases[i].ep);
	}
}

/*
 * Two endpoints on one node (as two MPI ranks on one guest): the engine loops their messages
 * back at its port; eager and rendezvous, both ways.
 */
TEST_F(fab, two_endpoints_on_one_node)
{
	struct side t[2];
	struct fi_cq_tagged_entry e;
	char name[2][16];
	size_t len, sizes[] = { 64, 1 << 20 };
	int cs, cr;

	memset(t, 0, sizeof(t));
	ASSERT_EQ(0, open_side(&t[0], self->s[0].info));
	ASSERT_EQ(0, open_side(&t[1], self->s[0].info));
	for (int k = 0; k < 2; k++) {
		len = sizeof(name[k]);
		ASSERT_EQ(0, fi_getname(&t[k].ep->fid, name[k], &len));
	}
	ASSERT_EQ(0, memcmp(name[0], name[1], 4)) TH_LOG("not the same node");
	for (int k = 0; k < 2; k++)
		ASSERT_EQ(1, fi_av_insert(t[k].av, name[!k], 1, &t[k].peer, 0, NULL));
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 2; i++) {
			size_t n = sizes[i];
			unsigned char *src = malloc(n), *dst = malloc(n);

			fill(src, n, 11 + k);
			ASSERT_EQ(0, fi_trecv(t[!k].ep, dst, n, NULL, FI_ADDR_UNSPEC, 2, 0, &cr));
			ASSERT_EQ(0, fi_tsend(t[k].ep, src, n, NULL, t[k].peer, 2, &cs));
			ASSERT_EQ(0, wait_ctx(t, !k, &cr, &e, NULL)) TH_LOG("%zu B from %d", n, k);
			ASSERT_EQ(0, wait_ctx(t, k, &cs, &e, NULL));
			EXPECT_TRUE(check(dst, n, 11 + k));
			free(src);
			free(dst);
		}
	}
	for (int k = 0; k < 2; k++)
		close_side(&t[k]);
}

/*
 * FI_RMA: side 1 registers 8 MiB of fresh malloc'd memory for remote reads and writes (on
 * demand: nothing pinned, nothing touched); side 0 writes it (the engine's put) and reads it back
 * (its get) into fresh memory, and injects a small write; a write under a key without the
 * write right, and one under a key closed since, complete with ENOKEY.
 */
TEST_F(fab, rma_write_read_inject_and_keys)
{
	size_t n = 8 << 20;
	unsigned char *target = malloc(n), *src = malloc(n), *back = malloc(n), small[100];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	struct fid_mr *mr, *ro;
	uint64_t key, rokey;
	int cw, cr, cx;
	struct timespec t0, t;

	ASSERT_EQ(0, fi_mr_reg(self->s[1].dom, target, n, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
			       &mr, NULL));
	key = fi_mr_key(mr);
	ASSERT_NE(0, key);
	fill(src, n, 21);
	ASSERT_EQ(0, fi_write(self->s[0].ep, src, n, NULL, self->s[0].peer, (uintptr_t)target,
			      key, &cw));
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cw, &e, NULL));
	EXPECT_EQ(FI_RMA | FI_WRITE, e.flags & (FI_RMA | FI_WRITE));
	EXPECT_TRUE(check(target, n, 21)) TH_LOG("the write's bytes differ");
	ASSERT_EQ(0, fi_read(self->s[0].ep, back, n, NULL, self->s[0].peer, (uintptr_t)target,
			     key, &cr));
	ASSERT_EQ(0, wait_ctx(self->s, 0, &cr, &e, NULL));
	EXPECT_EQ(FI_RMA | FI_READ, e.flags & (FI_RMA | FI_READ));
	EXPECT_TRUE(check(back, n, 21)) TH_LOG("the read's bytes differ");

	/* An injected write: no completion; its bytes arrive. */
	memset(small, 0x5a, sizeof(small));
	ASSERT_EQ(0, fi_inject_write(self->s[0].ep, small, sizeof(small), self->s[0].peer,
				     (uintptr_t)target + 1, key));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (memcmp(target + 1, small, sizeof(small))) {
		poll_side(&self->s[0], &err);
		clock_gettime(CLOCK_MONOTONIC, &t);
		ASSERT_LT(t.tv_sec - t0.tv_sec, 20) TH_LOG("the injected write never arrived");
	}
	EXPECT_EQ(0, self->s[0].n) TH_LOG("an injected write completed");

	/* No write right: ENOKEY at the initiator, the memory untouched. */
	ASSERT_EQ(0, fi_mr_reg(self->s[1].dom, target, 4096, FI_REMOTE_READ, 0, 0, 0, &ro, NULL));
	rokey = fi_mr_key(ro);
	ASSERT_EQ(0, fi_write(self->s[0].ep, src + 4096, 4096, NULL, self->s[0].peer,
			      (uintptr_t)target, rokey, &cx));
	EXPECT_EQ(ENOKEY, wait_ctx(self->s, 0, &cx, &e, &err));
	EXPECT_EQ(0x5a, target[1]);
	fi_close(&ro->fid);
	/* A closed registration's key works no more. */
	ASSERT_EQ(0, fi_close(&mr->fid));
	ASSERT_EQ(0, fi_write(self->s[0].ep, src, 4096, NULL, self->s[0].peer, (uintptr_t)target,
			      key, &cx));
	EXPECT_EQ(ENOKEY, wait_ctx(self->s, 0, &cx, &e, &err));
	free(target);
	free(src);
	free(back);
}

/* The page faults the driver served for every process on the guest's two engines (the
 * counters line of debugfs exanest-dmaN/stats), -1 if unreadable. */
static long engine_faults(void)
{
	long sum = 0;

	for (int d = 0; d < 2; d++) {
		char path[64], line[1024];
		FILE *f;

		snprintf(path, sizeof(path), "/sys/kernel/debug/exanest-dma%d/stats", d);
		f = fopen(path, "r");
		if (!f)
			return -1;
		while (fgets(line, sizeof(line), f)) {
			char *p = strstr(line, " faults ");

			if (!strncmp(line, "copies ", 7) && p)
				sum += strtol(p + 8, NULL, 10);
		}
		fclose(f);
	}
	return sum;
}

/* Send @n bytes of @src (seed @seed) to @dst by rendezvous; 0 when they arrived right. */
static int send_once(struct side *s, unsigned char *src, unsigned char *dst, size_t n,
		     unsigned int seed)
{
	struct fi_cq_tagged_entry e;
	int ctx_s, ctx_r;

	fill(src, n, seed);
	if (fi_trecv(s[1].ep, dst, n, NULL, FI_ADDR_UNSPEC, 9, 0, &ctx_r) ||
	    fi_tsend(s[0].ep, src, n, NULL, s[0].peer, 9, &ctx_s) ||
	    wait_ctx(s, 1, &ctx_r, &e, NULL) || e.len != n || wait_ctx(s, 0, &ctx_s, &e, NULL))
		return -1;
	return check(dst, n, seed) ? 0 : -2;
}

/*
 * Buffers used again: the registrations of a rendezvous stay cached (regcache.rs), so the
 * pages the first message faulted in stay mapped and the next messages fault none (without the
 * cache every DEREG unmapped them and each message faulted them all in again, at both ends).
 */
TEST_F(fab, reused_buffers_fault_once)
{
	size_t n = 1 << 20;
	unsigned char *src = malloc(n), *dst = malloc(n);
	long f0, f1, f2;

	f0 = engine_faults();
	ASSERT_LE(0, f0) TH_LOG("no debugfs stats");
	ASSERT_EQ(0, send_once(self->s, src, dst, n, 1));
	f1 = engine_faults();
	ASSERT_LT(f0, f1) TH_LOG("the first message into untouched memory faulted nothing");
	for (unsigned int i = 2; i < 6; i++) {
		ASSERT_EQ(0, send_once(self->s, src, dst, n, i)) TH_LOG("message %u", i);
	}
	f2 = engine_faults();
	EXPECT_EQ(f1, f2) TH_LOG("4 messages from and into the same buffers faulted %ld times",
				 f2 - f1);
	free(src);
	free(dst);
}

/*
 * Buffers unmapped and mapped again (mostly at the same addresses) under registrations the
 * cache keeps: the MMU notifier drops the old pages' mappings, so every message reads the new
 * memory and lands in it, never in the freed pages.
 */
TEST_F(fab, unmapped_buffers_under_cached_registrations)
{
	size_t n = 1 << 20;
	void *first = NULL;
	int same = 0;

	for (unsigned int i = 0; i < 6; i++) {
		unsigned char *src = mmap(NULL, n, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		unsigned char *dst = mmap(NULL, n, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ASSERT_NE(MAP_FAILED, src);
		ASSERT_NE(MAP_FAILED, dst);
		if (!first)
			first = src;
		same += src == first;
		ASSERT_EQ(0, send_once(self->s, src, dst, n, 40 + i)) TH_LOG("round %u", i);
		munmap(src, n);
		munmap(dst, n);
	}
	TH_LOG("%d of 6 rounds mapped the sender's buffer at the first one's address", same);
}

TEST_HARNESS_MAIN
