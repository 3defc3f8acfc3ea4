// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-queues: the user-level queue (ABI 3, register map 2.2), on the raw ABI. A process
 * posts copies by writing descriptors into its own send ring and ringing the doorbell page of
 * its context, which it maps; completions land in its completion ring. No system call per copy:
 *  - copies of random sizes, in every memory mode, complete once each, out of order, with the
 *    data verified; on-demand pages fault and are resolved by the kernel meanwhile;
 *  - 10,000 copies under a seccomp filter that allows write and exit_group only, with their
 *    faults: the kernel resolves them without the process calling it;
 *  - a copy to an address in no region ends with -EFAULT, to a read-only region with -EACCES,
 *    a descriptor with flags with the engine's BAD_FLAGS;
 *  - QUEUE_WAIT sleeps until the completion is there, and times out when it is not;
 *  - every argument error of QUEUE_CREATE, QUEUE_WAIT and the doorbell's mmap has its errno;
 *  - a forked child inherits no doorbell and may not map one;
 *  - more processes with queues than contexts (four more, at least 16) all make
 *    progress with their data verified: an idle queue's context goes to another process, and
 *    its doorbell faults it back (register map 2.2);
 *  - a process killed with copies posted writes nothing after its death;
 *  - small buffers in one page, one pinned read-only and one writable in any mode: copies into
 *    the writable one complete, and the page is read-only for the device again once it goes;
 *  - transfers started together on every channel fault together on neighbouring pages, and are
 *    resolved together (batched resolution).
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <time.h>

#include "exanest-queue.h"

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Whether debugfs's stats of instance 0 have the line want. */
static bool stats_has(const char *want)
{
	static char buf[65536];
	int dfd = open("/sys/kernel/debug/exanest-dma0/stats", O_RDONLY);
	ssize_t n;

	if (dfd < 0)
		return false;
	n = read(dfd, buf, sizeof(buf) - 1);
	close(dfd);
	buf[n > 0 ? n : 0] = 0;
	return strstr(buf, want) != NULL;
}

FIXTURE(queue) {
	int fd;
	struct q q;
	uint8_t *src, *dst;
	uint32_t hs, hd;
};

FIXTURE_VARIANT(queue) {
	MODE_FIELDS;
};

FIXTURE_VARIANT_ADD(queue, pin) { PIN_MODE };
FIXTURE_VARIANT_ADD(queue, prefault) { PREFAULT_MODE };
FIXTURE_VARIANT_ADD(queue, on_demand) { ON_DEMAND_MODE };

#define BUF (8 * MIB)

FIXTURE_SETUP(queue)
{
	int ret;

	self->fd = dev_open(0);
	ASSERT_LE(0, self->fd);
	self->src = big_alloc(BUF);
	self->dst = big_alloc(BUF);
	ASSERT_TRUE(self->src && self->dst);
	fill(self->src, BUF, 7);
	/* The destination is never touched before the engine writes it. */
	ASSERT_EQ(0, reg(self->fd, self->src, BUF, EXANEST_DMA_ACCESS_READ, variant->mode,
			 NO_WINDOW, &self->hs));
	ASSERT_EQ(0, reg(self->fd, self->dst, BUF, EXANEST_DMA_ACCESS_WRITE, variant->mode,
			 NO_WINDOW, &self->hd));
	ret = q_create(&self->q, self->fd, 6, 6);
	if (ret == -EOPNOTSUPP)
		SKIP(return, "the engine has no user-level queue");
	ASSERT_EQ(0, ret);
}

FIXTURE_TEARDOWN(queue)
{
	close(self->fd);
}

/*
 * 2,000 copies of random sizes between random offsets, up to 48 outstanding: each completes
 * once, with its length, and the destination equals the source where it was copied.
 */
TEST_F_TIMEOUT(queue, copies_complete, 120)
{
	enum { N = 2000, MAXLEN = 64 * 1024 };
	static uint32_t len[N], off[N];
	static uint8_t seen[N];
	uint8_t busy[BUF / MAXLEN] = { 0 };
	char want[96];
	uint64_t s = 0x1234567;
	uint32_t posted = 0, done = 0, faulted = 0, out_of_order = 0, last = 0;
	struct exanest_dma_counters k;
	struct cqe c;

	/* Disjoint destinations: chunk i of the destination buffer is copy i's. */
	for (int i = 0; i < N; i++) {
		len[i] = 1 + rnd(&s) % MAXLEN;
		off[i] = rnd(&s) % (BUF - MAXLEN);
	}
	while (done < N) {
		while (posted < N && posted - done < 48 && !busy[posted % (BUF / MAXLEN)]) {
			uint64_t d = (uint64_t)(posted % (BUF / MAXLEN)) * MAXLEN;

			if (!q_post(&self->q, self->src + off[posted], self->dst + d, len[posted],
				    posted))
				break;
			busy[posted % (BUF / MAXLEN)] = 1;
			posted++;
		}
		ASSERT_TRUE(q_next(&self->q, &c));
		ASSERT_LT(c.wr_id, N);
		ASSERT_EQ(0, seen[c.wr_id]);
		seen[c.wr_id] = 1;
		EXPECT_EQ(0, c.status);
		EXPECT_EQ(len[c.wr_id], c.bytes);
		if (c.fault)
			faulted++;
		if (c.wr_id < last)
			out_of_order++;
		last = c.wr_id;
		/* Verify at once: the chunk is posted again once free. */
		{
			uint64_t d = (uint64_t)(c.wr_id % (BUF / MAXLEN)) * MAXLEN;

			EXPECT_EQ(0, memcmp(self->src + off[c.wr_id], self->dst + d, len[c.wr_id]));
			busy[c.wr_id % (BUF / MAXLEN)] = 0;
		}
		done++;
	}
	k = counters(self->fd);
	TH_LOG("%s: %u copies, %u took faults, %u completed out of order; engine faults %llu",
	       variant->name, N, faulted, out_of_order, (unsigned long long)k.faults);
	EXPECT_EQ(self->q.tail, self->q.head);
	EXPECT_EQ(N, db_read(&self->q, PLDMA_VF_CQ_TAIL));
	/* debugfs shows the queue under the file's context. */
	snprintf(want, sizeof(want), "queue channels 0x%x cq 0x%llx entries 64",
		 self->q.info.channels, (unsigned long long)(uintptr_t)self->q.cq);
	EXPECT_TRUE(stats_has(want));
	EXPECT_EQ(N, db_read(&self->q, PLDMA_VF_SQ_HEAD));
	if (variant->faults) {
		EXPECT_LT(0, faulted);
		EXPECT_LT(0, k.faults);
		EXPECT_EQ(k.faults_resolved, k.faults);
		EXPECT_EQ(0, k.nacks);
	} else {
		EXPECT_EQ(0, faulted);
	}
	/* Copy completions are not COPY's: the ioctl counters of copies stay 0. */
	EXPECT_EQ(0, k.copies);
}

/*
 * Errors end the copy, not the queue: an address in no region (-EFAULT), a write into a region
 * registered read-only (-EACCES), descriptor flags (the engine's BAD_FLAGS) and length 0
 * (BAD_LEN). Each completion names its copy; the queue goes on working after them.
 */
TEST_F_TIMEOUT(queue, errors_end_the_copy_not_the_queue, 60)
{
	uint8_t *stray = big_alloc(2 * MIB);
	struct cqe c;

	ASSERT_NE(NULL, stray);
	ASSERT_TRUE(q_post(&self->q, self->src, stray + 8192, 4096, 1));
	ASSERT_TRUE(q_next(&self->q, &c));
	EXPECT_EQ(1, c.wr_id);
	EXPECT_EQ(-EFAULT, c.status);
	EXPECT_EQ(0, c.bytes);
	EXPECT_EQ((uintptr_t)stray + 8192, c.fault);

	ASSERT_TRUE(q_post(&self->q, self->src, self->src + 4 * MIB, 4096, 2));
	ASSERT_TRUE(q_next(&self->q, &c));
	EXPECT_EQ(2, c.wr_id);
	EXPECT_EQ(-EACCES, c.status);

	ASSERT_TRUE(q_push(&self->q, (uintptr_t)self->src, (uintptr_t)self->dst, 64, 1u << 4, 3));
	ASSERT_TRUE(q_push(&self->q, (uintptr_t)self->src, (uintptr_t)self->dst, 0, 0, 4));
	q_ring(&self->q);
	ASSERT_TRUE(q_next(&self->q, &c));
	EXPECT_EQ(3, c.wr_id);
	EXPECT_EQ(PLDMA_CQE_BAD_FLAGS, c.status);
	ASSERT_TRUE(q_next(&self->q, &c));
	EXPECT_EQ(4, c.wr_id);
	EXPECT_EQ(PLDMA_CQE_BAD_LEN, c.status);

	ASSERT_TRUE(q_post(&self->q, self->src + 100, self->dst + 200, 100000, 5));
	ASSERT_TRUE(q_next(&self->q, &c));
	EXPECT_EQ(5, c.wr_id);
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(100000, c.bytes);
	EXPECT_EQ(0, memcmp(self->src + 100, self->dst + 200, 100000));
	/* The stray buffer was never written. */
	EXPECT_TRUE(all_bytes(stray, 2 * MIB, 0));
	munmap(stray, 2 * MIB);
}

/*
 * QUEUE_WAIT sleeps until the completion is in the CQ; with nothing posted it times out. poll()
 * wakes on the CQ event.
 */
TEST_F_TIMEOUT(queue, wait_sleeps_until_the_completion, 60)
{
	struct pollfd pfd = { .fd = self->fd, .events = POLLIN };
	struct exanest_dma_queue_wait w;
	struct timespec t0, t1;
	struct cqe c;
	int64_t ns;

	ASSERT_TRUE(q_post(&self->q, self->src, self->dst, 4 * MIB, 77));
	ASSERT_EQ(0, q_wait(&self->q, 10 * SEC, &w));
	EXPECT_EQ(0, w.error);
	ASSERT_TRUE(q_poll(&self->q, &c));
	EXPECT_EQ(77, c.wr_id);
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(0, memcmp(self->src, self->dst, 4 * MIB));

	EXPECT_EQ(-ETIMEDOUT, q_wait(&self->q, 0, NULL));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT_EQ(-ETIMEDOUT, q_wait(&self->q, 50 * 1000 * 1000, NULL));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ns = (t1.tv_sec - t0.tv_sec) * SEC + (t1.tv_nsec - t0.tv_nsec);
	EXPECT_LE(50 * 1000 * 1000, ns);
	/* With no timeout. */
	ASSERT_TRUE(q_post(&self->q, self->src, self->dst + 4 * MIB, 64, 78));
	ASSERT_EQ(0, q_wait(&self->q, -1, &w));
	ASSERT_TRUE(q_poll(&self->q, &c));
	EXPECT_EQ(78, c.wr_id);

	/*
	 * poll(): armed, the CQ event makes the file readable until QUEUE_WAIT looks (as a
	 * completion channel's event until it is read). Events of the arms above are consumed
	 * first: one may still be on its way from the interrupt thread, later than any fixed
	 * sleep when the host deschedules the guest (make check saw one past 20 ms, twice), so
	 * look until none came for 200 ms, for 10 s at most.
	 */
	for (int i = 0; i < 50; i++) {
		EXPECT_EQ(-ETIMEDOUT, q_wait(&self->q, 0, NULL));
		usleep(200000);
		if (poll(&pfd, 1, 0) == 0)
			break;
	}
	EXPECT_EQ(-ETIMEDOUT, q_wait(&self->q, 0, NULL));
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	ASSERT_TRUE(q_post(&self->q, self->src, self->dst + 5 * MIB, 2 * MIB, 79));
	ASSERT_EQ(1, poll(&pfd, 1, 10000));
	EXPECT_EQ(POLLIN, pfd.revents);
	/* QUEUE_WAIT looks (not armed again): the event is consumed. */
	ASSERT_EQ(0, q_look(&self->q, 0, &w));
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	/*
	 * Armed while the CQE is still untaken, the event fires at once (CQ_ARM,
	 * Documentation/pldma-registers.rst): readable again, until QUEUE_WAIT looks. (So
	 * q_wait(), which arms, may leave the file readable after it found the completion:
	 * the event of its own arm can come after its look: make check at ad08163 failed so,
	 * and 1 run in 40 with the guest's CPUs kept busy.)
	 */
	db_write(&self->q, PLDMA_VF_CQ_ARM, PLDMA_VF_CQ_ARM_ONCE);
	ASSERT_EQ(1, poll(&pfd, 1, 10000));
	EXPECT_EQ(POLLIN, pfd.revents);
	ASSERT_EQ(0, q_look(&self->q, 0, &w));
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	ASSERT_TRUE(q_poll(&self->q, &c));
	EXPECT_EQ(79, c.wr_id);
	EXPECT_EQ(0, c.status);
}

/* The COPY ioctl keeps working beside the queue (on the kernel queue, register map 2.2). */
TEST_F_TIMEOUT(queue, copy_ioctl_beside_the_queue, 60)
{
	struct exanest_dma_info i = { 0 };
	struct cqe c;

	ASSERT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_INFO, &i));
	/* Register map 2.2: the queue and COPY's kernel queue share every channel. */
	EXPECT_EQ((1u << i.channels) - 1, self->q.info.channels);
	EXPECT_EQ(i.context, self->q.info.context);
	for (int n = 0; n < 7; n++)
		ASSERT_TRUE(q_post(&self->q, self->src + n * MIB, self->dst + n * MIB, MIB, n));
	EXPECT_EQ(0, copy_wait(self->fd, self->src, self->dst + 8 * MIB - 65536, 65536));
	for (int n = 0; n < 7; n++) {
		ASSERT_TRUE(q_next(&self->q, &c));
		EXPECT_EQ(0, c.status);
	}
	EXPECT_EQ(0, memcmp(self->src, self->dst, 7 * MIB));
	EXPECT_EQ(0, memcmp(self->src, self->dst + 8 * MIB - 65536, 65536));
}

/*
 * COPY and WAIT on the kernel queue (register map 2.2): each copy is a descriptor of the
 * context's kernel queue and its end a completion, which debugfs counts for the file.
 */
TEST_F_TIMEOUT(queue, copies_take_the_kernel_queue, 60)
{
	char want[80];

	for (int n = 0; n < 3; n++)
		ASSERT_EQ(0, copy_wait(self->fd, self->src + n * 4096, self->dst + n * 4096, 4096));
	EXPECT_EQ(0, memcmp(self->src, self->dst, 3 * 4096));
	snprintf(want, sizeof(want), "kernel queue posted 3 completed 3");
	EXPECT_TRUE(stats_has(want)) TH_LOG("debugfs stats has no \"%s\"", want);
}

/* The fault log's summary into text: its length, or -1. */
static ssize_t fault_log_text(char *text, size_t size)
{
	int fd = open(FAULT_LOG, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, text, size - 1);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	return n > 0 ? n : -1;
}

/* The fault log's count of records `key` ("kept", "batched"...): -1 if it has none. */
static long fault_log_count(const char *key)
{
	char text[4096], k[32];
	const char *at;
	long v;

	if (fault_log_text(text, sizeof(text)) < 0)
		return -1;
	snprintf(k, sizeof(k), "\"%s\": ", key);
	at = strstr(text, k);
	if (!at || sscanf(at + strlen(k), "%ld", &v) != 1)
		return -1;
	return v;
}

/*
 * Batched resolution (issue 23): a doorbell starts a transfer on every channel of the
 * context at once, each 4 KiB from a fresh source page to a fresh destination page next to
 * the others', in regions with window 0 (a fault maps its page, nothing more), so every
 * channel stops on a fault at the same time. The server takes them together and resolves
 * neighbouring pages with one fault-in and one map: the fault log counts records resolved
 * with others. Every copy completes with its data, every fault is resolved, none NACKed.
 */
TEST_F_TIMEOUT(queue, neighbouring_faults_resolve_together, 120)
{
	enum { ROUNDS = 16, MAXCH = 8, LEN = ROUNDS * MAXCH * 4096 };
	uint32_t ch = self->q.info.channels < MAXCH ? self->q.info.channels : MAXCH;
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters k0, k;
	long batched, kept;
	uint32_t hs, hd;
	char text[4096];
	struct cqe c;
	bool was_on;

	if (!variant->faults)
		SKIP(return, "%s: copies take no faults", variant->name);
	if (ch < 2)
		SKIP(return, "the queue has %u channel", ch);
	if (fault_log_text(text, sizeof(text)) < 0)
		SKIP(return, "no fault log (debugfs)");
	ASSERT_TRUE(src && dst);
	fill(src, LEN, 11);
	ASSERT_EQ(0, reg(self->fd, src, LEN, EXANEST_DMA_ACCESS_READ, variant->mode, 0, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, variant->mode, 0, &hd));
	was_on = strstr(text, "\"stamps\": true") != NULL;
	ASSERT_EQ(0, fault_log_cmd("on"));
	ASSERT_EQ(0, fault_log_cmd("clear"));
	k0 = counters(self->fd);
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t at = (uint64_t)r * ch * 4096;

		for (uint32_t i = 0; i < ch; i++)
			ASSERT_TRUE(q_push(&self->q, (uintptr_t)(src + at + i * 4096),
					   (uintptr_t)(dst + at + i * 4096), 4096, 0, i));
		q_ring(&self->q);
		for (uint32_t i = 0; i < ch; i++) {
			ASSERT_TRUE(q_next(&self->q, &c));
			EXPECT_EQ(0, c.status);
			EXPECT_EQ(4096, c.bytes);
		}
		EXPECT_EQ(0, memcmp(src + at, dst + at, ch * 4096));
	}
	k = counters(self->fd);
	batched = fault_log_count("batched");
	kept = fault_log_count("kept");
	TH_LOG("%s: %u channels, %d rounds: %llu faults, %ld logged, %ld resolved with others; "
	       "%llu IOMMU reports, %llu pages resolved, %llu ahead",
	       variant->name, ch, ROUNDS, (unsigned long long)(k.faults - k0.faults), kept,
	       batched, (unsigned long long)(k.iommu_faults - k0.iommu_faults),
	       (unsigned long long)(k.pages_resolved - k0.pages_resolved),
	       (unsigned long long)(k.touch_ahead_pages - k0.touch_ahead_pages));
	fault_log_text(text, sizeof(text));
	TH_LOG("%s", text);
	EXPECT_LT(0, batched);
	EXPECT_LE(batched, kept);
	EXPECT_LE((long long)ROUNDS * ch, (long long)(k.faults - k0.faults));
	EXPECT_EQ(k.faults_resolved - k0.faults_resolved, k.faults - k0.faults);
	EXPECT_EQ(k0.nacks, k.nacks);
	ASSERT_EQ(0, fault_log_cmd(was_on ? "on" : "off"));
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
}

/*
 * Two small buffers in one page, as malloc places them (issue 23): the first registered read-only
 * in pin mode, the second writable in the variant's mode, in both orders. Copies into the
 * second, by COPY and through the queue, complete: the page's pin is made writable while a
 * writable region covers it (abi.rst, "Modes"). Once that region goes, the page is read-only for
 * the device again: a queue copy into it, which only the IOMMU checks, ends with -EACCES and
 * writes nothing. Before, the first copy ended with -EACCES (prefault, on-demand), and a pin made
 * writable by a writable pin region stayed writable after it (pin).
 */
TEST_F_TIMEOUT(queue, read_only_pin_shares_a_page_with_a_writable_region, 60)
{
	uint8_t *page = big_alloc(4096), *a, *b;
	uint32_t ha, hb;
	struct cqe c;

	ASSERT_NE(NULL, page);
	a = page + 64;
	b = page + 2048;
	for (int pin_first = 1; pin_first >= 0; pin_first--) {
		memset(page, 0, 4096);
		fill(a, 100, 3 + pin_first);
		if (pin_first)
			ASSERT_EQ(0, reg(self->fd, a, 100, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, &ha));
		ASSERT_EQ(0, reg(self->fd, b, 100, RD | WR, variant->mode, NO_WINDOW, &hb));
		if (!pin_first)
			ASSERT_EQ(0, reg(self->fd, a, 100, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, &ha));
		EXPECT_EQ(0, copy_wait(self->fd, a, b, 100))
			TH_LOG("COPY into a %s region beside a read-only pin (%s first)", variant->name,
			       pin_first ? "pin" : variant->name);
		EXPECT_EQ(0, memcmp(a, b, 100));
		memset(b, 0, 100);
		ASSERT_TRUE(q_post(&self->q, a, b, 100, 10 + pin_first));
		ASSERT_TRUE(q_next(&self->q, &c));
		EXPECT_EQ(10 + pin_first, c.wr_id);
		EXPECT_EQ(0, c.status) TH_LOG("queue copy into the writable region");
		EXPECT_EQ(0, memcmp(a, b, 100));
		/* The writable region goes: the page is read-only for the device again. */
		EXPECT_EQ(0, dereg(self->fd, hb));
		memset(b, 0x5a, 100);
		ASSERT_TRUE(q_post(&self->q, self->src, b, 100, 20 + pin_first));
		ASSERT_TRUE(q_next(&self->q, &c));
		EXPECT_EQ(20 + pin_first, c.wr_id);
		EXPECT_EQ(-EACCES, c.status) TH_LOG("a write into the read-only pin's page");
		EXPECT_TRUE(all_bytes(b, 100, 0x5a));
		EXPECT_EQ(0, dereg(self->fd, ha));
	}
	munmap(page, 4096);
}

/*
 * The same page mapped read-only when the regions come (only an on-demand region may be
 * registered writable over it): a device write into it ends with -EACCES, as a CPU write
 * would fault. Once the process makes it writable, the next write's fault pins it for writing
 * and the copy completes.
 */
TEST_F_TIMEOUT(queue, read_only_pin_made_writable_by_mprotect, 60)
{
	uint8_t *page = big_alloc(4096), *a, *b;
	uint32_t ha, hb;

	if (variant->mode != EXANEST_DMA_MODE_ON_DEMAND)
		SKIP(return, "only an on-demand region registers writable over a read-only mapping");
	ASSERT_NE(NULL, page);
	a = page + 64;
	b = page + 2048;
	memset(page, 0, 4096);
	fill(a, 100, 9);
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ));
	ASSERT_EQ(0, reg(self->fd, a, 100, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, &ha));
	ASSERT_EQ(0, reg(self->fd, b, 100, RD | WR, variant->mode, NO_WINDOW, &hb));
	EXPECT_EQ(-EACCES, copy_wait(self->fd, a, b, 100));
	EXPECT_TRUE(all_bytes(b, 100, 0));
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ | PROT_WRITE));
	EXPECT_EQ(0, copy_wait(self->fd, a, b, 100)) TH_LOG("the fault pins the page for writing");
	EXPECT_EQ(0, memcmp(a, b, 100));
	EXPECT_EQ(0, dereg(self->fd, hb));
	EXPECT_EQ(0, dereg(self->fd, ha));
	munmap(page, 4096);
}

/* The tests below open what they need. */
FIXTURE(queue_abi) {
	int unused;
};

FIXTURE_SETUP(queue_abi)
{
}

FIXTURE_TEARDOWN(queue_abi)
{
}

/*
 * Allow write and exit_group, kill the process on any other system call (or another
 * architecture's calling convention).
 */
static int only_write_and_exit(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_AARCH64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* What the filtered child reports through its pipe. */
struct strict_report {
	uint32_t copies, errors, faulted, mismatched, timeouts;
};

/*
 * 10,000 copies with no system call: a child that opened the engine, registered its buffers
 * (on demand, never touched on the destination side) and mapped its doorbell installs a
 * seccomp filter under which any system call but write and exit_group kills it. It posts,
 * polls, verifies the data, writes its report to a pipe and exits. The kernel resolves the
 * faults meanwhile without being called. A control child that makes one other system call
 * under the same filter is killed, so the filter is known to bite.
 */
TEST_F_TIMEOUT(queue_abi, zero_syscalls, 300)
{
	enum { N = 10000, MAXLEN = 800 };
	int p[2], status;
	struct strict_report r = { 0 };
	pid_t pid;

	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		size_t dlen = (size_t)N * MAXLEN;
		uint8_t *src = big_alloc(BUF), *dst = big_alloc(dlen);
		static uint32_t len[N], off[N];
		uint32_t hs, hd, done = 0, posted = 0;
		uint64_t s = 99, spins;
		struct q q;
		struct cqe c;
		int fd = dev_open(0);

		if (fd < 0 || !src || !dst)
			_exit(10);
		fill(src, BUF, 3);
		if (reg(fd, src, BUF, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND,
			NO_WINDOW, &hs) ||
		    reg(fd, dst, dlen, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND,
			NO_WINDOW, &hd))
			_exit(11);
		if (q_create(&q, fd, 6, 6))
			_exit(12);
		for (int i = 0; i < N; i++) {
			len[i] = 1 + rnd(&s) % MAXLEN;
			off[i] = rnd(&s) % (BUF - MAXLEN);
		}
		if (only_write_and_exit())
			_exit(13);
		/* From here on: no system call until write() and exit. */
		while (done < N) {
			while (posted < N && q_push(&q, (uintptr_t)(src + off[posted]),
						    (uintptr_t)(dst + (size_t)posted * MAXLEN),
						    len[posted], 0, posted))
				posted++;
			q_ring(&q);
			for (spins = 0; !q_poll(&q, &c); spins++) {
				if (spins > (1ull << 34)) {
					r.timeouts++;
					goto report;
				}
			}
			done++;
			r.copies++;
			if (c.status || c.bytes != len[c.wr_id])
				r.errors++;
			if (c.fault)
				r.faulted++;
		}
		for (int i = 0; i < N; i++)
			if (memcmp(src + off[i], dst + (size_t)i * MAXLEN, len[i]))
				r.mismatched++;
report:
		if (write(p[1], &r, sizeof(r)) != sizeof(r))
			_exit(14);
		_exit(0);
	}
	close(p[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("child killed by signal %d (a system call under strict seccomp?)",
		       WTERMSIG(status));
	}
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(sizeof(r), read(p[0], &r, sizeof(r)));
	TH_LOG("seccomp filter: %u copies, %u errors, %u took faults, %u mismatched",
	       r.copies, r.errors, r.faulted, r.mismatched);
	EXPECT_EQ(N, r.copies);
	EXPECT_EQ(0, r.errors);
	EXPECT_EQ(0, r.mismatched);
	EXPECT_EQ(0, r.timeouts);
	EXPECT_LT(0, r.faulted);

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (only_write_and_exit())
			_exit(13);
		(void)getppid();
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS);
}

/* Every argument error of QUEUE_CREATE, QUEUE_WAIT and the doorbell's mmap. */
TEST_F_TIMEOUT(queue_abi, argument_errors, 60)
{
	struct exanest_dma_queue_wait w = { 0 };
	struct exanest_dma_queue r, out;
	int fd = dev_open(0);
	uint8_t *sq = ring_alloc(6), *cq = ring_alloc(6), *hole, *ro;
	void *db;

	ASSERT_LE(0, fd);
	ASSERT_TRUE(sq && cq);
	/* No queue yet. */
	EXPECT_EQ(-ENOENT, xioctl(fd, EXANEST_DMA_IOC_QUEUE_WAIT, &w));
	db = map_doorbell(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	EXPECT_EQ(MAP_FAILED, db);
	EXPECT_EQ(ENXIO, errno);

	EXPECT_EQ(-EINVAL, create_raw(fd, sq, cq, 0, 6, NULL));
	EXPECT_EQ(-EINVAL, create_raw(fd, sq, cq, 6, 13, NULL));
	EXPECT_EQ(-EINVAL, create_raw(fd, sq + 64, cq, 6, 6, NULL));
	EXPECT_EQ(-EINVAL, create_raw(fd, sq, sq, 6, 6, NULL));
	r = (struct exanest_dma_queue){ .sq_addr = (uintptr_t)sq, .cq_addr = (uintptr_t)cq,
					.sq_log2 = 6, .cq_log2 = 6, .flags = 1 };
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_QUEUE_CREATE, &r));
	r.flags = 0;
	r.reserved = 1;
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_QUEUE_CREATE, &r));
	r.reserved = 0;
	r.doorbell_offset = 4096;
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_QUEUE_CREATE, &r));
	/* Rings the process cannot write (the CQ) or that are not mapped. */
	hole = mmap(NULL, 8 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	EXPECT_EQ(-EFAULT, create_raw(fd, sq, hole, 6, 6, NULL));
	EXPECT_EQ(-EFAULT, create_raw(fd, hole, cq, 6, 6, NULL));
	EXPECT_EQ(-EFAULT, create_raw(fd, sq, ro, 6, 6, NULL));
	EXPECT_EQ(-EFAULT, create_raw(fd, (void *)(1ull << 48), cq, 6, 6, NULL));
	/* The failures left nothing behind: the queue is created, once. */
	memset(cq, 0x5a, PAGE);
	ASSERT_EQ(0, create_raw(fd, sq, cq, 6, 6, &out));
	EXPECT_TRUE(all_bytes(cq, 64 * 32, 0));
	EXPECT_NE(EXANEST_DMA_NO_CONTEXT, out.context);
	EXPECT_EQ(-EEXIST, create_raw(fd, sq, cq, 6, 6, NULL));
	/* The rings are held by the queue: their regions cannot be dropped. */
	for (uint32_t h = 1; h < 64; h++) {
		int e = dereg(fd, h);

		EXPECT_TRUE(e == -ENOENT || e == -EBUSY) {
			TH_LOG("DEREG of handle %u: %d", h, e);
		}
	}

	/* The doorbell: one page at its offset, shared, not executable. */
	EXPECT_EQ(MAP_FAILED, map_doorbell(fd, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
					   out.doorbell_offset));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_NE(0, out.doorbell_offset);
	EXPECT_EQ(0, out.doorbell_offset % PAGE);
	EXPECT_EQ(MAP_FAILED, map_doorbell(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
					   out.doorbell_offset + PAGE));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, map_doorbell(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, map_doorbell(fd, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE,
					   out.doorbell_offset));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, map_doorbell(fd, PAGE, PROT_READ | PROT_EXEC, MAP_SHARED,
					   out.doorbell_offset));
	EXPECT_EQ(EINVAL, errno);
	db = map_doorbell(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, out.doorbell_offset);
	ASSERT_NE(MAP_FAILED, db);
	/* The page is the context's VF page: its identification, then the indices at 0. */
	EXPECT_EQ(PLDMA_VF_ID_MAGIC, ((volatile uint32_t *)db)[0]);
	EXPECT_EQ(out.context, ((volatile uint32_t *)db)[PLDMA_VF_CONTEXT / 4]);
	EXPECT_EQ(0, ((volatile uint32_t *)db)[PLDMA_VF_CQ_TAIL / 4]);

	w.flags = 1;
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_QUEUE_WAIT, &w));
	w.flags = 0;
	w.reserved = 1;
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_QUEUE_WAIT, &w));
	w.reserved = 0;
	EXPECT_EQ(-ETIMEDOUT, xioctl(fd, EXANEST_DMA_IOC_QUEUE_WAIT, &w));
	munmap(db, PAGE);
	close(fd);
}

/*
 * A forked child has no doorbell (the mapping is not inherited: touching its address faults)
 * and may not map one, create a queue or wait on it (EPERM); the parent's queue works on.
 */
TEST_F_TIMEOUT(queue_abi, child_gets_no_doorbell, 60)
{
	int fd = dev_open(0), status;
	uint8_t *buf = big_alloc(2 * MIB);
	uint32_t h;
	struct q q;
	struct cqe c;
	pid_t pid;

	ASSERT_LE(0, fd);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, reg(fd, buf, 2 * MIB, EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE,
			 EXANEST_DMA_MODE_PIN, NO_WINDOW, &h));
	ASSERT_EQ(0, q_create(&q, fd, 4, 4));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct exanest_dma_queue_wait w = { .timeout_ns = 0 };
		pid_t g;

		if (map_doorbell(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
				 q.info.doorbell_offset) != MAP_FAILED || errno != EPERM)
			_exit(1);
		if (create_raw(fd, q.sq, q.cq, 4, 4, NULL) != -EPERM)
			_exit(2);
		if (xioctl(fd, EXANEST_DMA_IOC_QUEUE_WAIT, &w) != -EPERM)
			_exit(3);
		g = fork();
		if (g == 0) {
			/* The parent's doorbell address: nothing is mapped there in a child. */
			q.db[PLDMA_VF_SQ_TAIL / 4] = 1000;
			_exit(0);
		}
		if (waitpid(g, &status, 0) != g || !WIFSIGNALED(status) ||
		    WTERMSIG(status) != SIGSEGV)
			_exit(4);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0, db_read(&q, PLDMA_VF_SQ_TAIL));
	fill(buf, MIB, 5);
	ASSERT_TRUE(q_post(&q, buf, buf + MIB, MIB, 9));
	ASSERT_TRUE(q_next(&q, &c));
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(0, memcmp(buf, buf + MIB, MIB));
	close(fd);
}

/* What a child of more_queues_than_contexts reports through its pipe. */
struct share_report {
	uint32_t rounds, copies, errors, mismatched, timeouts;
	uint32_t contexts_seen;	/* distinct contexts its doorbell page named */
	uint64_t seen;		/* which: bit c, context c */
};

/*
 * One process sharing the engine: a queue, then ROUNDS rounds of COPIES copies of 4 KiB at
 * random offsets (on-demand destination), each round posted with one doorbell, polled to the
 * end, verified, and followed by a pause in which the process is idle and its context may go
 * to another. The doorbell page's CONTEXT register says which context it is on. It starts its
 * queue when the parent says go (a byte on go_fd), once every process is ready (a byte on
 * ready_fd): so all of them compete from the start, however slowly they were forked.
 */
static struct share_report share_child(uint32_t id, uint32_t rounds, int ready_fd, int go_fd)
{
	enum { COPIES = 8, LEN = 4096, SHARE_BUF = 256 * 1024 };
	struct share_report r = { 0 };
	uint64_t seen = 0, seed = 0x9e3779b97f4a7c15ull * (id + 1);
	uint8_t *src = big_alloc(SHARE_BUF), *dst = big_alloc(SHARE_BUF);
	uint32_t hs, hd;
	struct q q;
	char go;
	int fd;

	r.errors = 1;
	if (!src || !dst)
		return r;
	for (uint32_t k = 0; k < SHARE_BUF; k++)
		src[k] = (uint8_t)(k * 31 + id * 7 + (k >> 12));
	if (write(ready_fd, "r", 1) != 1 || read(go_fd, &go, 1) != 1)
		return r;
	fd = dev_open(0);
	if (fd < 0 || q_create(&q, fd, 4, 4) ||
	    reg(fd, src, SHARE_BUF, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hs) ||
	    reg(fd, dst, SHARE_BUF, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW,
		&hd))
		return r;
	r.errors = 0;
	for (uint32_t round = 0; round < rounds; round++) {
		uint32_t off[COPIES];
		struct cqe c;

		for (uint32_t n = 0; n < COPIES; n++) {
			off[n] = (uint32_t)(rnd(&seed) % (SHARE_BUF / LEN)) * LEN;
			if (!q_push(&q, (uintptr_t)src + off[n], (uintptr_t)dst + off[n], LEN, 0,
				    round * COPIES + n)) {
				r.errors++;
				return r;
			}
		}
		q_ring(&q);
		seen |= 1ull << (db_read(&q, PLDMA_VF_CONTEXT) & 63);
		for (uint32_t n = 0; n < COPIES; n++) {
			if (!q_next(&q, &c)) {
				r.timeouts++;
				return r;
			}
			if (c.status || c.bytes != LEN || c.wr_id / COPIES != round)
				r.errors++;
			r.copies++;
		}
		for (uint32_t n = 0; n < COPIES; n++)
			if (memcmp(dst + off[n], src + off[n], LEN))
				r.mismatched++;
		r.rounds++;
		usleep(1000 + rnd(&seed) % 4000);
	}
	r.contexts_seen = __builtin_popcountll(seen);
	r.seen = seen;
	close(fd);
	return r;
}

/*
 * More processes with a queue than the engine has contexts: four more, and at least 16.
 * Each holds its queue until it exits; the contexts move between them while they are idle
 * (their doorbells are zapped and fault them back). Every process makes progress, with its
 * data verified, and queues are seen to move.
 */
TEST_F_TIMEOUT(queue_abi, more_queues_than_contexts, 300)
{
	enum { ROUNDS = 40 };
	struct exanest_dma_info i = { 0 };
	struct share_report rep[64];
	uint32_t nproc, moved = 0;
	pid_t pid[64];
	int pipes[64][2], ready[2], go[2];
	char b[64];
	int fd;

	fd = dev_open(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xioctl(fd, EXANEST_DMA_IOC_INFO, &i));
	close(fd);
	nproc = i.contexts + 4 < 16 ? 16 : i.contexts + 4;
	ASSERT_GE(64, nproc);
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));
	for (uint32_t n = 0; n < nproc; n++) {
		ASSERT_EQ(0, pipe(pipes[n]));
		pid[n] = fork();
		ASSERT_LE(0, pid[n]);
		if (pid[n] == 0) {
			struct share_report r = share_child(n, ROUNDS, ready[1], go[0]);

			_exit(write(pipes[n][1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
		}
		close(pipes[n][1]);
	}
	/* Every process ready, then all at once. */
	for (uint32_t got = 0; got < nproc;) {
		ssize_t k = read(ready[0], b, nproc - got);

		ASSERT_LT(0, k);
		got += k;
	}
	memset(b, 'g', sizeof(b));
	ASSERT_EQ((ssize_t)nproc, write(go[1], b, nproc));
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	for (uint32_t n = 0; n < nproc; n++) {
		int status = 0;

		memset(&rep[n], 0, sizeof(rep[n]));
		EXPECT_EQ(sizeof(rep[n]), read(pipes[n][0], &rep[n], sizeof(rep[n])));
		close(pipes[n][0]);
		ASSERT_EQ(pid[n], waitpid(pid[n], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		EXPECT_EQ(ROUNDS, rep[n].rounds);
		EXPECT_EQ(ROUNDS * 8, rep[n].copies);
		EXPECT_EQ(0, rep[n].errors);
		EXPECT_EQ(0, rep[n].mismatched);
		EXPECT_EQ(0, rep[n].timeouts);
		moved += rep[n].contexts_seen > 1;
	}
	TH_LOG("%u processes, %u contexts: %u queues ran on more than one context", nproc,
	       i.contexts, moved);
	if (nproc > i.contexts && !moved) {
		/* Seen once in 2026-11-29's CI runs, never since: what each one saw. */
		for (uint32_t n = 0; n < nproc; n++)
			TH_LOG("process %u: %u rounds, contexts 0x%llx", n, rep[n].rounds,
			       (unsigned long long)rep[n].seen);
	}
	if (nproc > i.contexts)
		EXPECT_LT(0, moved);
}

/*
 * A queue on every context, all idle: another file still gets a context, for a copy and then
 * for a queue of its own (register map 2.1 answered EBUSY here). The first queue, whose
 * context went, posts again: its doorbell faults a context back, and the copy completes.
 */
TEST_F_TIMEOUT(queue_abi, idle_queues_lend_their_contexts, 120)
{
	struct exanest_dma_info i = { 0 };
	uint8_t *buf = big_alloc(MIB), *b0 = big_alloc(2 * PAGE);
	struct q qs[64], extra;
	struct cqe c = { 0 };
	uint32_t h, h0;
	int fd;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, b0);
	fd = dev_open(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xioctl(fd, EXANEST_DMA_IOC_INFO, &i));
	close(fd);
	ASSERT_GE(64, i.contexts);
	for (uint32_t n = 0; n < i.contexts; n++) {
		fd = dev_open(0);
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, q_create(&qs[n], fd, 1, 1)) {
			TH_LOG("queue %u of %u", n, i.contexts);
		}
	}
	/* Every context has an idle queue: another file takes one for a copy, then a queue. */
	fd = dev_open(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, reg(fd, buf, MIB, EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE,
			 EXANEST_DMA_MODE_PIN, NO_WINDOW, &h));
	EXPECT_EQ(0, copy_wait(fd, buf, buf + MIB / 2, 4096));
	ASSERT_EQ(0, q_create(&extra, fd, 1, 1));
	ASSERT_TRUE(q_post(&extra, buf, buf + MIB / 2 + 8192, 4096, 7));
	ASSERT_TRUE(q_next(&extra, &c));
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(7, c.wr_id);
	EXPECT_EQ(0, memcmp(buf, buf + MIB / 2 + 8192, 4096));
	/* The first queue's context may have gone: its doorbell brings one back. */
	memset(b0, 0x5a, PAGE);
	ASSERT_EQ(0, reg(qs[0].fd, b0, 2 * PAGE, EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE,
			 EXANEST_DMA_MODE_PIN, NO_WINDOW, &h0));
	ASSERT_TRUE(q_post(&qs[0], b0, b0 + PAGE, PAGE, 9));
	ASSERT_TRUE(q_next(&qs[0], &c));
	EXPECT_EQ(0, c.status);
	EXPECT_EQ(9, c.wr_id);
	EXPECT_EQ(0x5a, b0[2 * PAGE - 1]);
	close(fd);
	for (uint32_t n = 0; n < i.contexts; n++)
		close(qs[n].fd);
}

/*
 * A process killed with 32 copies of 1 MiB posted writes nothing after its death: its queue is
 * stopped before its pages go back. The destination is shared memory the parent watches.
 */
TEST_F_TIMEOUT(queue_abi, killed_process_writes_nothing, 60)
{
	size_t n = 32 * MIB;
	uint8_t *dst = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t before, after;
	int p[2], status;
	char ok;
	pid_t pid;

	ASSERT_NE(MAP_FAILED, dst);
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		uint8_t *src = big_alloc(n);
		int fd = dev_open(0);
		uint32_t hs, hd;
		struct q q;

		if (fd < 0 || !src)
			_exit(1);
		fill(src, n, 11);
		if (reg(fd, src, n, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hs) ||
		    reg(fd, dst, n, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hd) ||
		    q_create(&q, fd, 6, 6))
			_exit(2);
		for (int i = 0; i < 32; i++)
			q_push(&q, (uintptr_t)src + i * MIB, (uintptr_t)dst + i * MIB, MIB, 0, i);
		q_ring(&q);
		if (write(p[1], "x", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(p[1]);
	ASSERT_EQ(1, read(p[0], &ok, 1));
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	before = 0;
	for (size_t i = 0; i < n; i += 8)
		before = before * 31 + *(uint64_t *)(dst + i);
	usleep(300 * 1000);
	after = 0;
	for (size_t i = 0; i < n; i += 8)
		after = after * 31 + *(uint64_t *)(dst + i);
	EXPECT_EQ(before, after);
	munmap(dst, n);
}

/*
 * The upcall: with a translation budget of 256 pages under a 4 MiB workload on demand, the
 * budget evicts, and the process sees each eviction as an event entry in its CQ (kind EVICTED,
 * the pages, the address of the last run evicted); the data is right.
 */
TEST_F_TIMEOUT(queue_abi, eviction_events, 120)
{
	struct exanest_dma_budget b = { .pages = 256 };
	size_t n = 4 * MIB;
	uint8_t *src = big_alloc(n), *dst = big_alloc(n);
	int fd = dev_open(0);
	uint32_t hs, hd, posted = 0, done = 0;
	uint64_t before;
	struct q q;
	struct cqe c;

	ASSERT_LE(0, fd);
	ASSERT_TRUE(src && dst);
	fill(src, n, 21);
	ASSERT_EQ(0, reg(fd, src, n, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND,
			 NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(fd, dst, n, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND,
			 NO_WINDOW, &hd));
	ASSERT_EQ(0, xioctl(fd, EXANEST_DMA_IOC_BUDGET, &b));
	ASSERT_EQ(0, q_create(&q, fd, 6, 6));
	/* Twice over the 4 MiB, 64 KiB a copy, 8 outstanding. */
	while (done < 128) {
		while (posted < 128 && posted - done < 8) {
			size_t off = (size_t)(posted % 64) * 65536;

			ASSERT_TRUE(q_post(&q, src + off, dst + off, 65536, posted));
			posted++;
		}
		ASSERT_TRUE(q_next(&q, &c));
		EXPECT_EQ(0, c.status);
		done++;
	}
	EXPECT_EQ(0, memcmp(src, dst, n));
	memset(&b, 0, sizeof(b));
	ASSERT_EQ(0, xioctl(fd, EXANEST_DMA_IOC_BUDGET, &b));
	TH_LOG("budget 256 pages: %llu pages evicted in %llu evictions; %llu event entries for %llu pages",
	       (unsigned long long)b.evicted_pages, (unsigned long long)b.evictions,
	       (unsigned long long)q.events, (unsigned long long)q.evicted);
	EXPECT_LT(0, b.evicted_pages);
	EXPECT_LT(0, q.events);
	EXPECT_GE(b.evictions, q.events);
	EXPECT_GE(b.evicted_pages, q.evicted);
	EXPECT_TRUE((q.last_evicted >= (uintptr_t)src && q.last_evicted < (uintptr_t)src + n) ||
		    (q.last_evicted >= (uintptr_t)dst && q.last_evicted < (uintptr_t)dst + n));
	EXPECT_EQ(0, q.last_evicted % PAGE);
	/* Lowering the budget evicts at once, and says so on the CQ too. */
	b = (struct exanest_dma_budget){ .pages = 16 };
	before = q.events;
	ASSERT_EQ(0, xioctl(fd, EXANEST_DMA_IOC_BUDGET, &b));
	ASSERT_TRUE(q_post(&q, src, dst, 64, 999));
	ASSERT_TRUE(q_next(&q, &c));
	EXPECT_LT(before, q.events);
	close(fd);
}

/* A 64-bit FNV-1a checksum. */
static uint64_t sum(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/*
 * Isolation through the queue: process B (a fork of A, so with A's addresses) opens its own
 * file, registers its own copy of A's buffers at the same addresses and posts copies naming
 * them, and A's handles: B's memory is what the engine reads and writes, A's stays as it was
 * (checksums). A copy into an address A has and B does not (mapped by A after the fork) ends
 * with -EFAULT in B's CQ, and A's page is untouched.
 */
TEST_F_TIMEOUT(queue_abi, isolation_between_processes, 60)
{
	size_t n = 2 * MIB;
	uint8_t *a = big_alloc(n), *late;
	uint64_t before, late_before;
	uint32_t ha;
	int fd = dev_open(0), p[2], status;
	pid_t pid;
	char go;

	ASSERT_LE(0, fd);
	ASSERT_NE(NULL, a);
	fill(a, n, 31);
	ASSERT_EQ(0, reg(fd, a, n, EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE,
			 EXANEST_DMA_MODE_PIN, NO_WINDOW, &ha));
	before = sum(a, n);
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		uint32_t hb;
		struct q q;
		struct cqe c;
		uint8_t *other;
		int bfd = dev_open(0);

		if (read(p[0], &go, 1) != 1 || bfd < 0)
			_exit(1);
		if (read(p[0], &other, sizeof(other)) != sizeof(other))
			_exit(2);
		/* B's own copy of the pages, at A's addresses. */
		memset(a, 0x11, n);
		if (reg(bfd, a, n, EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE,
			EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, &hb) || q_create(&q, bfd, 4, 4))
			_exit(3);
		/* Copies within "A's" buffer: B's memory moves. */
		if (!q_post(&q, a, a + MIB, MIB, 1) || !q_next(&q, &c) || c.status)
			_exit(4);
		if (!all_bytes(a + MIB, MIB, 0x11))
			_exit(5);
		/* An address only A has. */
		if (!q_post(&q, a, other, 4096, 2) || !q_next(&q, &c) || c.status != -EFAULT)
			_exit(6);
		_exit(0);
	}
	/* Mapped after the fork: B does not have it. */
	late = big_alloc(MIB);
	ASSERT_NE(NULL, late);
	fill(late, MIB, 32);
	late_before = sum(late, MIB);
	go = 'g';
	ASSERT_EQ(1, write(p[1], &go, 1));
	ASSERT_EQ(sizeof(late), write(p[1], &late, sizeof(late)));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(before, sum(a, n));
	EXPECT_EQ(late_before, sum(late, MIB));
	close(fd);
}

TEST_HARNESS_MAIN
