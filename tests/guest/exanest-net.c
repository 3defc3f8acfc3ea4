// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-net: remote puts between the guest's two engines, whose network ports are cabled back
 * to back (scripts/run-qemu.sh: node 0 is /dev/exanest-dma0, node 1 /dev/exanest-dma1), on the
 * raw ABI (4) and register map 2.3 (Documentation/network.rst):
 *  - a process on node 1 registers malloc'd memory it never touched with remote write access and
 *    hands its address, rkey and endpoint to a process on node 0 (a pipe), which puts 8 MiB
 *    there from its user-level queue: the receiving engine faults, NACKs, node 1's driver
 *    resolves the faults on the receiver's mm and RESUMEs, the sender retransmits; the data
 *    arrives exactly, and the receiver's counters show the faults resolved;
 *  - a forged rkey, a key of a deregistered region, a read-only mapping and an unmapped one end
 *    the put with ENOKEY, ENOKEY, EACCES and EFAULT, and the receiver's buffer is unchanged;
 *  - the receiver killed during a put: the sender's put ends with an error, and both nodes
 *    take the next put;
 *  - gets: back into memory the reader never touched (its own faults), and from memory the
 *    other side never touched (the responder's faults, resolved by its kernel before it sends).
 *
 * The same tests run between two guests (scripts/run-nodes.py, tests/guest/nodes.sh): with
 * EXANEST_NET_PEER=J in its environment the sender's side runs here and the receiver on node J,
 * another QEMU process with its own kernel, where "exanest-net --serve" starts receivers on
 * request. Requests and answers are text lines out of band through the consoles ("GUEST-OOB J
 * ..." out, read back on stdin), each tagged so that a late answer is never taken for the next.
 */
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <termios.h>

#include "exanest-queue.h"

#define PUT_LEN (8 * MIB)

/* What the receiver hands the sender. */
struct target {
	uint64_t addr, rkey;
	uint32_t endpoint, node;
};

/* Post a PUT or a GET (two entries) and ring: false when the SQ has no room for both. */
static bool q_remote(struct q *q, uint32_t op, uint64_t src, uint64_t dst, uint32_t len,
		     uint64_t wr_id, const struct target *t)
{
	uint8_t *d;
	uint64_t rkey = t->rkey;
	uint16_t peer = (uint16_t)t->node;

	if (q->tail + 2 - q->completed > q->sq_n || q->tail + 2 - q->sq_head > q->sq_n) {
		q->sq_head = db_read(q, PLDMA_VF_SQ_HEAD);
		if (q->tail + 2 - q->sq_head > q->sq_n)
			return false;
	}
	if (!q_push(q, src, dst, len, op, wr_id))
		return false;
	d = q->sq + (q->tail & (q->sq_n - 1)) * PLDMA_SQE_SIZE;
	memset(d, 0, PLDMA_SQE_SIZE);
	memcpy(d + PLDMA_SQE_NET_RKEY_OFF, &rkey, 8);
	memcpy(d + PLDMA_SQE_NET_PEER_OFF, &peer, 2);
	memcpy(d + PLDMA_SQE_NET_EP_OFF, &t->endpoint, 4);
	q->tail++;
	/* The second entry ends with the first: one completion for both. */
	q->completed++;
	q_ring(q);
	return true;
}

static bool q_put(struct q *q, const void *src, uint64_t dst, uint32_t len, uint64_t wr_id,
		  const struct target *t)
{
	return q_remote(q, PLDMA_OP_PUT, (uintptr_t)src, dst, len, wr_id, t);
}

/* Wait for the next completion (30 s at most). */
static int cqe_wait(struct q *q, struct cqe *c)
{
	struct timespec t0, now;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!q_poll(q, c)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 30)
			return -ETIMEDOUT;
	}
	return 0;
}

/* Get len bytes from t->addr + off into dst, and wait for its completion. */
static int get_wait(struct q *q, void *dst, const struct target *t, uint64_t off, uint32_t len,
		    struct cqe *c)
{
	if (!q_remote(q, PLDMA_OP_GET, t->addr + off, (uintptr_t)dst, len, 0x66, t))
		return -ENOSPC;
	return cqe_wait(q, c);
}

/* Put len bytes from src to t->addr + off, and wait for its completion. */
static int put_wait(struct q *q, const void *src, const struct target *t, uint64_t off,
		    uint32_t len, struct cqe *c)
{
	if (!q_put(q, src, t->addr + off, len, 0x77, t))
		return -ENOSPC;
	return cqe_wait(q, c);
}

static uint32_t sum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i++)
		s = s * 31 + p[i];
	return s;
}

/*
 * The receiving process (on device dev: node 1 in this guest, or the serving guest's engine):
 * registers len bytes (prot as mapped, munmapped after
 * registration when unmap) with remote write access, sends the target, then waits for a byte:
 * 'v' verifies the pattern seed 7 and answers 1/0, 's' answers the checksum, 'c' its counters.
 */
static void receiver(int dev, int rd, int wr, size_t len, int prot, bool unmap)
{
	struct exanest_dma_info info = { 0 };
	struct exanest_dma_reg r = { 0 };
	struct target t = { 0 };
	int fd = dev_open(dev);
	uint8_t *buf, cmd;

	buf = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fd < 0 || buf == MAP_FAILED || xioctl(fd, EXANEST_DMA_IOC_INFO, &info))
		_exit(2);
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = len,
				      .access = RD | WR | EXANEST_DMA_ACCESS_REMOTE_WRITE |
						EXANEST_DMA_ACCESS_REMOTE_READ,
				      .mode = EXANEST_DMA_MODE_ON_DEMAND };
	if (xioctl(fd, EXANEST_DMA_IOC_REG, &r))
		_exit(3);
	if (unmap)
		munmap(buf, len);
	t = (struct target){ .addr = (uintptr_t)buf, .rkey = r.rkey, .endpoint = info.endpoint,
			     .node = info.node };
	if (write(wr, &t, sizeof(t)) != sizeof(t))
		_exit(4);
	while (read(rd, &cmd, 1) == 1) {
		if (cmd == 'v') {
			uint8_t *want = malloc(len);
			uint8_t ok;

			fill(want, len, 7);
			ok = !memcmp(buf, want, len);
			free(want);
			if (write(wr, &ok, 1) != 1)
				_exit(5);
		} else if (cmd == 's') {
			uint32_t s = sum(buf, len);

			if (write(wr, &s, sizeof(s)) != sizeof(s))
				_exit(5);
		} else if (cmd == 'c') {
			struct exanest_dma_counters k = counters(fd);

			if (write(wr, &k, sizeof(k)) != sizeof(k))
				_exit(5);
		} else if (cmd == 'd') {
			struct exanest_dma_dereg d = { .handle = r.handle };
			int32_t ret = xioctl(fd, EXANEST_DMA_IOC_DEREG, &d);

			if (write(wr, &ret, sizeof(ret)) != sizeof(ret))
				_exit(5);
		}
	}
	_exit(0);
}

/*
 * Out of band, between guests: "GUEST-OOB J TEXT" on stdout reaches node J's stdin as TEXT
 * (scripts/run-nodes.py). Lines are written whole, with one write.
 */
static void oob_send(int node, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "GUEST-OOB %d ", node);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	if (write(1, line, n) != n)
		perror("oob");
}

/* The next line of stdin, within timeout_ms: its length, or -1. */
static int oob_line(char *buf, int size, int timeout_ms)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };
	int n = 0;

	while (n < size - 1) {
		if (poll(&p, 1, timeout_ms) != 1 || read(0, buf + n, 1) != 1)
			return -1;
		if (buf[n] == '\n' || buf[n] == '\r') {
			if (n == 0)
				continue;
			break;
		}
		n++;
	}
	buf[n] = 0;
	return n;
}

/* No echo of what the console feeds us (it would go back out among the results). */
static void oob_quiet(void)
{
	struct termios t;

	if (!tcgetattr(0, &t)) {
		t.c_lflag &= ~(ECHO | ECHONL);
		tcsetattr(0, TCSANOW, &t);
	}
}

/*
 * The receiver's side: a process forked here on node 1 (pipes), or on another guest, through
 * the server there.
 */
struct peer {
	int node;		/* the serving guest's node, or -1: a local child */
	int dev;		/* a local child's device */
	pid_t child;
	int to_child, from_child;
	unsigned int tag;
};

/* Ask the serving guest: "REQ TAG FROM ..." and wait for "ANS TAG ..." (the rest in ans). */
static int remote_ask(struct peer *p, char *ans, int size, const char *fmt, ...)
{
	char req[256], line[2600], want[32];
	struct exanest_dma_info info = { 0 };
	int fd = dev_open(0), n;
	va_list ap;

	if (fd >= 0)
		xioctl(fd, EXANEST_DMA_IOC_INFO, &info);
	close(fd);
	p->tag = (p->tag + 1) | ((unsigned int)getpid() << 12);
	va_start(ap, fmt);
	vsnprintf(req, sizeof(req), fmt, ap);
	va_end(ap);
	oob_send(p->node, "REQ %x %u %s", p->tag, info.node, req);
	n = snprintf(want, sizeof(want), "ANS %x ", p->tag);
	for (;;) {
		if (oob_line(line, sizeof(line), 60000) < 0)
			return -ETIMEDOUT;
		if (!strncmp(line, want, n))
			break;
	}
	snprintf(ans, size, "%s", line + n);
	return strncmp(ans, "error", 5) ? 0 : -EIO;
}

static int hex_decode(const char *h, void *out, size_t n)
{
	uint8_t *o = out;

	for (size_t i = 0; i < n; i++) {
		unsigned int b;

		if (sscanf(h + 2 * i, "%2x", &b) != 1)
			return -EIO;
		o[i] = b;
	}
	return 0;
}

static void peer_stop(struct peer *p)
{
	char ans[64];

	if (p->node >= 0) {
		remote_ask(p, ans, sizeof(ans), "kill");
		return;
	}
	if (p->child > 0) {
		close(p->to_child);
		close(p->from_child);
		kill(p->child, SIGKILL);
		waitpid(p->child, NULL, 0);
	}
	p->child = 0;
}

/* Start a receiver of len bytes (prot, unmapped after registration when unmap): its target. */
static int peer_start(struct peer *p, size_t len, int prot, bool unmap, struct target *t)
{
	int down[2], up[2];

	if (p->node >= 0) {
		char ans[256];
		unsigned long long addr, rkey;
		int ret = remote_ask(p, ans, sizeof(ans), "start %zu %d %d", len, prot, unmap);

		if (ret)
			return ret;
		if (sscanf(ans, "%llx %llx %u %u", &addr, &rkey, &t->endpoint, &t->node) != 4)
			return -EIO;
		t->addr = addr;
		t->rkey = rkey;
		return 0;
	}
	if (pipe(down) || pipe(up))
		return -errno;
	p->child = fork();
	if (p->child < 0)
		return -errno;
	if (!p->child) {
		close(down[1]);
		close(up[0]);
		receiver(p->dev, down[0], up[1], len, prot, unmap);
	}
	close(down[0]);
	close(up[1]);
	p->to_child = down[1];
	p->from_child = up[0];
	if (read(p->from_child, t, sizeof(*t)) != sizeof(*t))
		return -EIO;
	return 0;
}

/* Ask the receiver (a command byte of receiver()) for n bytes. */
static int peer_ask(struct peer *p, char cmd, void *out, size_t n)
{
	if (p->node >= 0) {
		char ans[2600];
		int ret = remote_ask(p, ans, sizeof(ans), "ask %c %zu", cmd, n);

		return ret ?: hex_decode(ans, out, n);
	}
	if (write(p->to_child, &cmd, 1) != 1)
		return -EIO;
	return read(p->from_child, out, n) == (ssize_t)n ? 0 : -EIO;
}

FIXTURE(net) {
	int fd;			/* node 0 */
	struct q q;
	uint8_t *src;
	struct peer peer;
	struct target t;
};

FIXTURE_SETUP(net)
{
	struct exanest_dma_info i0 = { 0 };
	const char *remote = getenv("EXANEST_NET_PEER");
	uint32_t h;

	self->peer = (struct peer){ .node = remote ? atoi(remote) : -1, .dev = 1 };
	self->fd = dev_open(0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_INFO, &i0));
	if (i0.node == EXANEST_DMA_NO_NODE)
		SKIP(return, "the engine has no network port");
	if (!remote)
		ASSERT_EQ(0, i0.node);
	self->src = big_alloc(PUT_LEN);
	ASSERT_NE(NULL, self->src);
	fill(self->src, PUT_LEN, 7);
	ASSERT_EQ(0, reg(self->fd, self->src, PUT_LEN, RD, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW,
			 &h));
	ASSERT_EQ(0, q_create(&self->q, self->fd, 4, 4));
}

FIXTURE_TEARDOWN(net)
{
	peer_stop(&self->peer);
	close(self->fd);
}

/* Start a receiver on the other node and read its target. */
static int start_receiver(FIXTURE_DATA(net) *self, size_t len, int prot, bool unmap)
{
	peer_stop(&self->peer);
	return peer_start(&self->peer, len, prot, unmap, &self->t);
}

static int ask(FIXTURE_DATA(net) *self, char cmd, void *out, size_t n)
{
	return peer_ask(&self->peer, cmd, out, n);
}

/* The thesis's case: 8 MiB into memory the receiver never touched. */
TEST_F(net, put_into_untouched_memory)
{
	struct exanest_dma_counters k;
	struct cqe c;
	uint8_t ok = 0;

	ASSERT_EQ(0, start_receiver(self, PUT_LEN, PROT_READ | PROT_WRITE, false));
	EXPECT_EQ(self->peer.node >= 0 ? self->peer.node : 1, self->t.node);
	EXPECT_NE(0, self->t.rkey);
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, 0, PUT_LEN, &c));
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(PUT_LEN, c.bytes);
	ASSERT_EQ(0, ask(self, 'v', &ok, 1));
	EXPECT_EQ(1, ok) TH_LOG("the receiver's memory differs from what was put");
	ASSERT_EQ(0, ask(self, 'c', &k, sizeof(k)));
	EXPECT_LT(0, k.faults) TH_LOG("no receiver fault: was the memory touched?");
	EXPECT_EQ(k.faults, k.faults_resolved);
	EXPECT_EQ(0, k.nacks);
	EXPECT_LE(PAGES(PUT_LEN), k.pages_resolved + 512 * k.huge_mappings);
	TH_LOG("receiver: %llu faults NACKed and resolved (RESUMEs), %llu pages resolved",
	       (unsigned long long)k.faults, (unsigned long long)k.pages_resolved);
	/* Warm now: a second put takes no fault. */
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, 0, PUT_LEN, &c));
	EXPECT_EQ(0, c.status);
}

/* Keys that do not allow the put: ENOKEY, and not a byte of the receiver's memory changes. */
TEST_F(net, forged_and_revoked_keys)
{
	struct target forged;
	uint32_t before, after;
	int32_t ret;
	struct cqe c;

	ASSERT_EQ(0, start_receiver(self, MIB, PROT_READ | PROT_WRITE, false));
	ASSERT_EQ(0, ask(self, 's', &before, sizeof(before)));
	forged = self->t;
	forged.rkey ^= 1ull << 40;
	ASSERT_EQ(0, put_wait(&self->q, self->src, &forged, 0, 65536, &c));
	EXPECT_EQ(-ENOKEY, c.status);
	EXPECT_EQ(0, c.bytes);
	forged = self->t;
	forged.endpoint ^= 1;
	ASSERT_EQ(0, put_wait(&self->q, self->src, &forged, 0, 4096, &c));
	EXPECT_EQ(-ENOKEY, c.status) TH_LOG("another endpoint's key");
	/* Past the region: ERANGE. */
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, MIB - 100, 4096, &c));
	EXPECT_EQ(-ERANGE, c.status);
	ASSERT_EQ(0, ask(self, 's', &after, sizeof(after)));
	EXPECT_EQ(before, after);
	/* Deregistered: the key is revoked first. */
	ASSERT_EQ(0, ask(self, 'd', &ret, sizeof(ret)));
	ASSERT_EQ(0, ret);
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, 0, 4096, &c));
	EXPECT_EQ(-ENOKEY, c.status);
	ASSERT_EQ(0, ask(self, 's', &after, sizeof(after)));
	EXPECT_EQ(before, after);
}

/* The receiver's mapping is read-only: its driver NACKs with EACCES. */
TEST_F(net, read_only_receiver)
{
	struct exanest_dma_counters k;
	struct cqe c;

	ASSERT_EQ(0, start_receiver(self, MIB, PROT_READ, false));
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, 0, 65536, &c));
	EXPECT_EQ(-EACCES, c.status);
	EXPECT_EQ(0, c.bytes);
	ASSERT_EQ(0, ask(self, 'c', &k, sizeof(k)));
	EXPECT_LT(0, k.nacks);
}

/* The receiver unmapped the memory after registering it: EFAULT, and nothing else happens. */
TEST_F(net, unmapped_receiver)
{
	struct exanest_dma_counters k;
	struct cqe c;

	ASSERT_EQ(0, start_receiver(self, MIB, PROT_READ | PROT_WRITE, true));
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, 0, 65536, &c));
	EXPECT_EQ(-EFAULT, c.status);
	ASSERT_EQ(0, ask(self, 'c', &k, sizeof(k)));
	EXPECT_LT(0, k.nacks);
}

/* The receiver is killed while a put runs: an error for the sender, and both nodes go on. */
TEST_F(net, receiver_killed_mid_put)
{
	struct cqe c;
	uint8_t ok = 0;

	ASSERT_EQ(0, start_receiver(self, PUT_LEN, PROT_READ | PROT_WRITE, false));
	ASSERT_TRUE(q_put(&self->q, self->src, self->t.addr, PUT_LEN, 0x99, &self->t));
	usleep(2000);
	peer_stop(&self->peer);
	ASSERT_TRUE(q_next(&self->q, &c));
	EXPECT_EQ(0x99, c.wr_id);
	/* Done before the kill, or refused after it: never anything else, and never a hang. */
	EXPECT_TRUE(c.status == 0 || c.status == -ENOKEY || c.status == -EFAULT ||
		    c.status == -ESTALE) TH_LOG("status %d", c.status);
	/* Both nodes take the next put. */
	ASSERT_EQ(0, start_receiver(self, PUT_LEN, PROT_READ | PROT_WRITE, false));
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, 0, PUT_LEN, &c));
	EXPECT_EQ(0, c.status);
	ASSERT_EQ(0, ask(self, 'v', &ok, 1));
	EXPECT_EQ(1, ok);
}

/* Put 8 MiB, then get it back into memory the reader never touched: its own faults. */
TEST_F(net, get_back_into_untouched_memory)
{
	uint8_t *back = big_alloc(PUT_LEN);
	struct target forged;
	uint32_t h;
	struct cqe c;

	ASSERT_NE(NULL, back);
	ASSERT_EQ(0, reg(self->fd, back, PUT_LEN, WR, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, &h));
	ASSERT_EQ(0, start_receiver(self, PUT_LEN, PROT_READ | PROT_WRITE, false));
	ASSERT_EQ(0, put_wait(&self->q, self->src, &self->t, 0, PUT_LEN, &c));
	ASSERT_EQ(0, c.status);
	ASSERT_EQ(0, get_wait(&self->q, back, &self->t, 0, PUT_LEN, &c));
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(PUT_LEN, c.bytes);
	EXPECT_EQ(0, memcmp(back, self->src, PUT_LEN));
	/* A forged key reads nothing. */
	memset(back, 0xAA, 65536);
	forged = self->t;
	forged.rkey ^= 1ull << 50;
	ASSERT_EQ(0, get_wait(&self->q, back, &forged, 0, 65536, &c));
	EXPECT_EQ(-ENOKEY, c.status);
	EXPECT_TRUE(all_bytes(back, 65536, 0xAA));
}

/* A get from memory the responder never touched: its kernel resolves the reads' faults. */
TEST_F(net, get_from_untouched_memory)
{
	struct exanest_dma_counters k;
	uint8_t *dst = big_alloc(2 * MIB);
	uint32_t h;
	struct cqe c;

	ASSERT_NE(NULL, dst);
	memset(dst, 0xAA, 2 * MIB);
	ASSERT_EQ(0, reg(self->fd, dst, 2 * MIB, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, &h));
	ASSERT_EQ(0, start_receiver(self, 2 * MIB, PROT_READ | PROT_WRITE, false));
	ASSERT_EQ(0, get_wait(&self->q, dst, &self->t, 0, 2 * MIB, &c));
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(2 * MIB, c.bytes);
	EXPECT_TRUE(all_bytes(dst, 2 * MIB, 0)) TH_LOG("untouched anonymous memory reads as 0");
	ASSERT_EQ(0, ask(self, 'c', &k, sizeof(k)));
	EXPECT_LT(0, k.faults) TH_LOG("the responder took no fault: was its memory touched?");
	EXPECT_EQ(k.faults, k.faults_resolved);
}

/*
 * The serving guest (exanest-net --serve): receivers on this guest's engine, started, asked and
 * killed on request of the sender's guest, until "bye" or the end of the input.
 */
static int serve(void)
{
	struct peer p = { .node = -1, .dev = 0 };
	struct target t;
	char line[256], out[2600];

	oob_quiet();
	while (oob_line(line, sizeof(line), -1) >= 0) {
		unsigned int tag, from;
		int n = 0, prot, unmap, ret = 0;
		size_t len;
		char cmd;

		if (!strcmp(line, "bye"))
			break;
		if (sscanf(line, "REQ %x %u %n", &tag, &from, &n) != 2 || !n)
			continue;
		if (sscanf(line + n, "start %zu %d %d", &len, &prot, &unmap) == 3) {
			peer_stop(&p);
			ret = peer_start(&p, len, prot, unmap, &t);
			if (ret)
				oob_send(from, "ANS %x error %d", tag, ret);
			else
				oob_send(from, "ANS %x %llx %llx %u %u", tag,
					 (unsigned long long)t.addr, (unsigned long long)t.rkey,
					 t.endpoint, t.node);
		} else if (sscanf(line + n, "ask %c %zu", &cmd, &len) == 2 && len <= 1024) {
			uint8_t bytes[1024];
			int k = 0;

			ret = p.child > 0 ? peer_ask(&p, cmd, bytes, len) : -ESRCH;
			if (ret) {
				oob_send(from, "ANS %x error %d", tag, ret);
				continue;
			}
			for (size_t i = 0; i < len; i++)
				k += sprintf(out + k, "%02x", bytes[i]);
			oob_send(from, "ANS %x %s", tag, out);
		} else if (!strcmp(line + n, "kill")) {
			peer_stop(&p);
			oob_send(from, "ANS %x killed", tag);
		} else {
			oob_send(from, "ANS %x error %d", tag, -EINVAL);
		}
	}
	peer_stop(&p);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--serve"))
		return serve();
	if (getenv("EXANEST_NET_PEER"))
		oob_quiet();
	return test_harness_run(argc, argv);
}
