// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-contexts: many processes on one engine. Each open file gets its own context, whose DMA
 * the engine issues as that context's SR-IOV virtual function: its own StreamID, its own IOMMU
 * domain. The SMMU, not the driver's bookkeeping, keeps one process's DMA out of another's
 * memory:
 *  - contexts are handed out one per open while some are free; more files than contexts share
 *    them: a context goes from an idle holder to a process that copies;
 *  - sixteen processes at once, each on its own context, in a mix of memory modes, random copies
 *    verified;
 *  - two processes with the same virtual addresses (a fork) each copy their own memory;
 *  - a context that no process holds, programmed directly through the engine's registers to
 *    copy between another process's addresses, is refused by the SMMU: nothing is read or
 *    written, and the driver stops the context;
 *  - a process killed with a copy in flight writes nothing after its death, and its context
 *    is handed out again and works.
 */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "exanest-test.h"

#include "../../include/hw/exanest-pldma-regs.h"

/* No device is opened for the test: each test opens what it needs. */
FIXTURE(contexts) {
	int unused;
};

FIXTURE_SETUP(contexts)
{
}

FIXTURE_TEARDOWN(contexts)
{
}

static int info(int fd, struct exanest_dma_info *i)
{
	memset(i, 0, sizeof(*i));
	return xioctl(fd, EXANEST_DMA_IOC_INFO, i);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * SEC + ts.tv_nsec;
}

/* A 64-bit FNV-1a checksum. */
static uint64_t sum(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

TEST_F(contexts, distinct_contexts_per_open)
{
	struct exanest_dma_info a, b;
	int fa = dev_open(0), fb = dev_open(0);

	ASSERT_LE(0, fa) TH_LOG("open: %s", strerror(errno));
	ASSERT_LE(0, fb) TH_LOG("second open: %s", strerror(errno));
	ASSERT_EQ(0, info(fa, &a));
	ASSERT_EQ(0, info(fb, &b));
	EXPECT_EQ(EXANEST_DMA_ABI_VERSION, a.abi_version);
	EXPECT_LE(2, a.contexts);
	EXPECT_EQ(a.contexts, b.contexts);
	EXPECT_NE(a.context, b.context);
	EXPECT_GT(a.contexts, a.context);
	EXPECT_GT(b.contexts, b.context);
	close(fa);
	close(fb);
}

/*
 * More files than contexts: each of the first takes a free context at open; the next one gets
 * none at open, and takes the least recently granted idle one when it copies; the process that
 * lost it takes one back when it copies again. Data verified each time.
 */
TEST_F(contexts, more_files_than_contexts_share_them)
{
	enum { LEN = 1 << 16 };
	int fds[PLDMA_MAX_CONTEXTS + 1], n, seen[PLDMA_MAX_CONTEXTS] = { 0 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_info i, j;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, LEN, 5);
	fds[0] = dev_open(0);
	ASSERT_LE(0, fds[0]);
	ASSERT_EQ(0, info(fds[0], &i));
	n = (int)i.contexts;
	ASSERT_GE(PLDMA_MAX_CONTEXTS, n);
	seen[i.context] = 1;
	for (int k = 1; k <= n; k++) {
		fds[k] = dev_open(0);
		ASSERT_LE(0, fds[k]) TH_LOG("open %d: %s", k + 1, strerror(errno));
		ASSERT_EQ(0, info(fds[k], &i));
		if (k == n) {
			EXPECT_EQ(EXANEST_DMA_NO_CONTEXT, i.context) TH_LOG("no context was left");
			break;
		}
		ASSERT_GT(n, i.context);
		EXPECT_EQ(0, seen[i.context]) TH_LOG("context %u handed out twice", i.context);
		seen[i.context] = 1;
	}
	for (int k = 0; k <= n; k++) {
		ASSERT_EQ(0, reg(fds[k], src, LEN, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL));
		ASSERT_EQ(0, reg(fds[k], dst, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL));
	}
	/* The last file copies: it takes file 0's context (the least recently granted). */
	ASSERT_EQ(0, info(fds[0], &j));
	memset(dst, 0, LEN);
	EXPECT_EQ(0, copy_wait(fds[n], src, dst, LEN));
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	ASSERT_EQ(0, info(fds[n], &i));
	EXPECT_EQ(j.context, i.context);
	ASSERT_EQ(0, info(fds[0], &i));
	EXPECT_EQ(EXANEST_DMA_NO_CONTEXT, i.context);
	/* File 0 copies again: it takes one back, and its regions are still mapped. */
	memset(dst, 0, LEN);
	EXPECT_EQ(0, copy_wait(fds[0], src, dst, LEN));
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	ASSERT_EQ(0, info(fds[0], &i));
	EXPECT_GT(n, i.context);
	for (int k = 0; k <= n; k++)
		close(fds[k]);
}

/*
 * One of sixteen processes: open a context, report it, wait for the start signal (so that all
 * hold a context at once), then register two buffers in a mode of its own and make random copies
 * between them, each verified. Exit status 0 when every copy was right.
 */
static int worker(int k, int ready_fd, int go_fd)
{
	static const uint32_t modes[] = { EXANEST_DMA_MODE_PIN, EXANEST_DMA_MODE_PREFAULT,
					  EXANEST_DMA_MODE_ON_DEMAND };
	size_t len = (size_t)(1 + k % 4) << 20;
	uint32_t mode = modes[k % 3];
	struct exanest_dma_info i;
	uint8_t *src, *dst, go;
	unsigned int seed = 1000 + k;
	int fd = dev_open(0);

	if (fd < 0 || info(fd, &i)) {
		fprintf(stderr, "worker %d: open or INFO: %s\n", k, strerror(errno));
		dprintf(ready_fd, "!");
		return 2;
	}
	dprintf(ready_fd, "%c", i.context == EXANEST_DMA_NO_CONTEXT ? '-' : 'A' + i.context);
	if (read(go_fd, &go, 1) != 1)
		return 3;
	src = big_alloc(len);
	dst = big_alloc(len);
	if (!src || !dst)
		return 4;
	fill(src, len, k);
	if (reg(fd, src, len, RD, mode, NO_WINDOW, NULL) ||
	    reg(fd, dst, len, RD | WR, mode, NO_WINDOW, NULL))
		return 5;
	for (int it = 0; it < 24; it++) {
		size_t off = (size_t)(rand_r(&seed) % (len / 2));
		size_t n = 1 + (size_t)rand_r(&seed) % (len / 2);
		size_t doff = (size_t)rand_r(&seed) % (len - n + 1);
		int st;

		memset(dst + doff, 0, n);
		st = copy_wait(fd, src + off, dst + doff, n);
		if (st) {
			fprintf(stderr, "worker %d (context %u, mode %u): copy %d: %s\n", k,
				i.context, mode, it, strerror(-st));
			return 6;
		}
		if (memcmp(src + off, dst + doff, n)) {
			fprintf(stderr, "worker %d (context %u): copy %d: data differ\n", k,
				i.context, it);
			return 7;
		}
	}
	close(fd);
	return 0;
}

TEST_F_TIMEOUT(contexts, sixteen_processes_each_on_its_own_context, 300)
{
	enum { N = 16 };
	int ready[2], go[2], status, seen[PLDMA_MAX_CONTEXTS] = { 0 }, fd;
	struct exanest_dma_info i;
	pid_t pids[N];
	char c;

	fd = dev_open(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, info(fd, &i));
	close(fd);
	if (i.contexts < N)
		SKIP(return, "the engine uses %u contexts (sixteen_processes_share_the_contexts)",
		     i.contexts);
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));
	for (int k = 0; k < N; k++) {
		pids[k] = fork();
		ASSERT_LE(0, pids[k]);
		if (!pids[k]) {
			close(ready[0]);
			close(go[1]);
			_exit(worker(k, ready[1], go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	/* All sixteen hold a context at once, each a different one ('A' + context, '!' none). */
	for (int k = 0; k < N; k++) {
		ASSERT_EQ(1, read(ready[0], &c, 1));
		ASSERT_NE('!', c) TH_LOG("a worker could not open a context");
		ASSERT_NE('-', c) TH_LOG("a worker got no context");
		EXPECT_EQ(0, seen[c - 'A']) TH_LOG("context %d handed out twice", c - 'A');
		seen[c - 'A'] = 1;
	}
	for (int k = 0; k < N; k++)
		ASSERT_EQ(1, write(go[1], "g", 1));
	for (int k = 0; k < N; k++) {
		ASSERT_EQ(pids[k], waitpid(pids[k], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("worker %d: status %#x", k, status);
	}
	close(ready[0]);
	close(go[1]);
}

/*
 * More processes than contexts, all copying at once (sixteen on four contexts when the module
 * is loaded with contexts=4; eight more than the contexts otherwise): contexts are taken from
 * idle holders and handed on in turn, so every process makes progress, and every copy is right.
 */
TEST_F_TIMEOUT(contexts, sixteen_processes_share_the_contexts, 600)
{
	int ready[2], go[2], status, fd, n;
	struct exanest_dma_info i;
	pid_t pids[PLDMA_MAX_CONTEXTS + 8];
	char c;

	fd = dev_open(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, info(fd, &i));
	close(fd);
	n = i.contexts <= 8 ? 16 : (int)i.contexts + 8;
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));
	for (int k = 0; k < n; k++) {
		pids[k] = fork();
		ASSERT_LE(0, pids[k]);
		if (!pids[k]) {
			close(ready[0]);
			close(go[1]);
			_exit(worker(k, ready[1], go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	for (int k = 0; k < n; k++) {
		ASSERT_EQ(1, read(ready[0], &c, 1));
		ASSERT_NE('!', c) TH_LOG("a worker could not open the engine");
	}
	for (int k = 0; k < n; k++)
		ASSERT_EQ(1, write(go[1], "g", 1));
	for (int k = 0; k < n; k++) {
		ASSERT_EQ(pids[k], waitpid(pids[k], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("worker %d of %d: status %#x", k, n, status);
	}
	close(ready[0]);
	close(go[1]);
}

/*
 * The same virtual addresses in two processes (a fork after the buffers exist): each registers
 * and copies its own memory, at the same time. Were the two contexts' domains crossed, a process
 * would read or overwrite the other's pages at those addresses.
 */
TEST_F_TIMEOUT(contexts, same_addresses_in_two_processes_stay_apart, 120)
{
	enum { LEN = 2 << 20, ROUNDS = 20 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	int status, bad = 0;
	uint64_t before;
	pid_t pid;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, LEN, 1);
	memset(dst, 0, LEN);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* The child: its own pages (copy on write) with its own pattern. */
		int fd = dev_open(0);

		fill(src, LEN, 2);
		if (fd < 0 || reg(fd, src, LEN, RD, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, NULL) ||
		    reg(fd, dst, LEN, WR, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, NULL))
			_exit(2);
		for (int r = 0; r < ROUNDS; r++) {
			int err;

			memset(dst, 0, LEN);
			err = copy_wait(fd, src, dst, LEN);
			if (err) {
				fprintf(stderr, "child: round %d: copy: %s\n", r, strerror(err < 0 ? -err : err));
				_exit(3);
			}
			if (memcmp(src, dst, LEN)) {
				fprintf(stderr, "child: round %d: data differ\n", r);
				_exit(4);
			}
		}
		_exit(0);
	}
	{
		int fd = dev_open(0);

		ASSERT_LE(0, fd);
		before = sum(src, LEN);
		ASSERT_EQ(0, reg(fd, src, LEN, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL));
		ASSERT_EQ(0, reg(fd, dst, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL));
		for (int r = 0; r < ROUNDS; r++) {
			memset(dst, 0, LEN);
			bad += copy_wait(fd, src, dst, LEN) != 0 || memcmp(src, dst, LEN) != 0;
		}
		close(fd);
	}
	EXPECT_EQ(0, bad);
	EXPECT_EQ(before, sum(src, LEN));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) TH_LOG("child: status %#x", status);
}

/* The PLDMA physical functions, mapped through sysfs (root); returns how many. */
struct pf {
	char path[300];
	volatile uint32_t *regs;
};

static int map_pfs(struct pf *pfs, int max)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		char p[400], buf[32] = "";
		unsigned int ven = 0, dev = 0;
		int fd;
		void *m;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		fd = open(p, O_RDONLY);
		if (fd < 0)
			continue;
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			ven = (unsigned int)strtoul(buf, NULL, 0);
		close(fd);
		snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/device", e->d_name);
		fd = open(p, O_RDONLY);
		memset(buf, 0, sizeof(buf));
		if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0)
			dev = (unsigned int)strtoul(buf, NULL, 0);
		if (fd >= 0)
			close(fd);
		if (ven != PLDMA_PCI_VENDOR_ID || dev != PLDMA_PCI_DEVICE_ID)
			continue;
		snprintf(p, sizeof(p), "/sys/bus/pci/devices/%s/resource0", e->d_name);
		fd = open(p, O_RDWR | O_SYNC);
		if (fd < 0)
			continue;
		m = mmap(NULL, PLDMA_MMIO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			continue;
		snprintf(pfs[n].path, sizeof(pfs[n].path), "%s", e->d_name);
		pfs[n].regs = m;
		n++;
	}
	closedir(d);
	return n;
}

static volatile uint32_t *ch_reg(struct pf *pf, unsigned int ctx, unsigned int ch,
				 unsigned int reg)
{
	return pf->regs + (PLDMA_CTX_BASE + ctx * PLDMA_CTX_STRIDE + PLDMA_CH_BASE +
			   ch * PLDMA_CH_STRIDE + reg) / 4;
}

/*
 * A context nobody holds, programmed directly through the engine's registers (as a buggy or
 * hostile agent with access to the control plane could), copies between this process's
 * addresses, which this process's context maps: the SMMU translates the copy under the idle
 * context's StreamID, finds nothing, and refuses it. Nothing is read or written; the driver,
 * told of a context nobody holds, stops it. This process's own context then still works.
 */
/* Whether an engine is bound as a platform device (the devicetree front-end, the QFDB). */
static bool platform_engine(void)
{
	return driver_bound("/sys/bus/platform/drivers/exanest_dma", ".dma");
}

TEST_F_TIMEOUT(contexts, unheld_context_cannot_reach_another_process, 60)
{
	enum { LEN = 64 << 10 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_info i;
	struct pf pfs[4];
	int fd = dev_open(0), npf, tried = 0;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, info(fd, &i));
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, LEN, 9);
	memset(dst, 0x5a, LEN);
	ASSERT_EQ(0, reg(fd, src, LEN, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL));
	ASSERT_EQ(0, reg(fd, dst, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL));
	npf = map_pfs(pfs, 4);
	if (!npf && platform_engine())
		SKIP(return, "PCI by nature: the agent maps the engine's registers through its PCI BAR's "
		     "sysfs file, which a platform device has not (nor is there /dev/mem); the "
		     "MMU-500's isolation of the contexts' streams is tests/qemu-model/test_mmu500.py's");
	ASSERT_LT(0, npf) TH_LOG("no PLDMA physical function could be mapped through sysfs");
	/* On every engine, the last context: nobody holds it (this process holds the first). */
	for (int e = 0; e < npf; e++) {
		unsigned int ctx = i.contexts - 1, st = 0;
		int64_t t0;

		if (ctx == i.context)
			continue;
		*ch_reg(&pfs[e], ctx, 0, PLDMA_CH_SRC_LO) = (uint32_t)(uintptr_t)src;
		*ch_reg(&pfs[e], ctx, 0, PLDMA_CH_SRC_HI) = (uint32_t)((uintptr_t)src >> 32);
		*ch_reg(&pfs[e], ctx, 0, PLDMA_CH_DST_LO) = (uint32_t)(uintptr_t)dst;
		*ch_reg(&pfs[e], ctx, 0, PLDMA_CH_DST_HI) = (uint32_t)((uintptr_t)dst >> 32);
		*ch_reg(&pfs[e], ctx, 0, PLDMA_CH_LEN) = LEN;
		*ch_reg(&pfs[e], ctx, 0, PLDMA_CH_CTRL) = PLDMA_CTRL_START | PLDMA_CTRL_IRQ_EN;
		tried++;
		/* It faults at once, and the driver quiesces the context: back to IDLE. */
		t0 = now_ns();
		do {
			st = *ch_reg(&pfs[e], ctx, 0, PLDMA_CH_STATUS) & PLDMA_STATUS_STATE_MASK;
			if (st == PLDMA_STATE_IDLE)
				break;
			usleep(1000);
		} while (now_ns() - t0 < 5 * SEC);
		EXPECT_EQ(PLDMA_STATE_IDLE, st) TH_LOG("%s context %u: state %u", pfs[e].path, ctx, st);
		EXPECT_EQ(0, *ch_reg(&pfs[e], ctx, 0, PLDMA_CH_DONE_BYTES))
			TH_LOG("%s context %u copied bytes", pfs[e].path, ctx);
	}
	EXPECT_LT(0, tried);
	EXPECT_TRUE(all_bytes(dst, LEN, 0x5a)) TH_LOG("another context wrote this process's memory");
	/* This process's own context copies as before. */
	EXPECT_EQ(0, copy_wait(fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	for (int e = 0; e < npf; e++)
		munmap((void *)pfs[e].regs, PLDMA_MMIO_SIZE);
	close(fd);
}

/*
 * A process killed with copies in flight: its context is stopped before its pages go back, so
 * nothing lands in its destination (memory shared with the parent here) after it died, and the
 * context is handed out again and works. The process keeps its copies queued until it dies
 * (as many as it may have in flight, alternating between two sources), so the engine is writing
 * the destination whenever the kill comes.
 */
TEST_F_TIMEOUT(contexts, killed_process_writes_nothing_after_exit, 120)
{
	enum { LEN = 16 << 20, COPIES = 32 };	/* at most MAX_INFLIGHT (64) */
	uint8_t *dst = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct exanest_dma_info i;
	uint8_t *src, *d2;
	int ready[2], status, fd;
	uint64_t s1, s2;
	pid_t pid;
	char c;

	ASSERT_NE(MAP_FAILED, dst);
	memset(dst, 0, LEN);
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		uint8_t *a = big_alloc(LEN), *b = big_alloc(LEN);
		struct exanest_dma_info ci;
		int cfd = dev_open(0);

		if (!a || !b || cfd < 0 || info(cfd, &ci))
			_exit(2);
		memset(a, 0xee, LEN);
		memset(b, 0x11, LEN);
		if (reg(cfd, a, LEN, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL) ||
		    reg(cfd, b, LEN, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL) ||
		    reg(cfd, dst, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, NULL))
			_exit(3);
		for (uint64_t k = 0;; k++) {
			uint64_t ck;

			if (k == COPIES)
				dprintf(ready[1], "%c", 'A' + ci.context);
			if (k >= COPIES && wait_cookie(cfd, k + 1 - COPIES, -1, NULL, NULL))
				_exit(4);
			if (copy(cfd, k % 2 ? b : a, dst, LEN, &ck) || ck != k + 1)
				_exit(3);
		}
	}
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	s1 = sum(dst, LEN);
	usleep(200000);
	s2 = sum(dst, LEN);
	EXPECT_EQ(s1, s2) TH_LOG("the dead process's copies went on writing");
	/* The freed context (the lowest free one) is handed out again and copies. */
	fd = dev_open(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, info(fd, &i));
	EXPECT_EQ((unsigned int)(c - 'A'), i.context);
	src = big_alloc(1 << 20);
	d2 = big_alloc(1 << 20);
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, d2);
	fill(src, 1 << 20, 3);
	ASSERT_EQ(0, reg(fd, src, 1 << 20, RD, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, NULL));
	ASSERT_EQ(0, reg(fd, d2, 1 << 20, WR, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, NULL));
	EXPECT_EQ(0, copy_wait(fd, src, d2, 1 << 20));
	EXPECT_EQ(0, memcmp(src, d2, 1 << 20));
	close(fd);
	munmap(dst, LEN);
}

static int budget(int fd, uint64_t pages, struct exanest_dma_budget *out)
{
	memset(out, 0, sizeof(*out));
	out->pages = pages;
	return xioctl(fd, EXANEST_DMA_IOC_BUDGET, out);
}

/*
 * The translation budget: with 256 pages, a 4 MiB on-demand copy (2048 pages of source and
 * destination) evicts the least recently faulted pages as it goes, the mirror never keeps much
 * more than the budget, the data is right, and the counters say how many went. A second pass
 * faults the evicted pages in again. Bad requests get their errno.
 */
TEST_F_TIMEOUT(contexts, budget_evicts_least_recently_faulted, 120)
{
	enum { LEN = 4 << 20, BUDGET = 256 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_budget b;
	struct exanest_dma_counters c0, c1;
	int fd = dev_open(0);
	uint64_t before;

	ASSERT_LE(0, fd);
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, budget(fd, 0, &b));
	EXPECT_LT(BUDGET, b.pages) TH_LOG("default budget %llu", (unsigned long long)b.pages);
	EXPECT_EQ(-E2BIG, budget(fd, UINT64_MAX, &b));
	memset(&b, 0, sizeof(b));
	b.evictions = 1;
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_BUDGET, &b));
	ASSERT_EQ(0, budget(fd, BUDGET, &b));
	EXPECT_EQ(BUDGET, b.pages);
	EXPECT_EQ(0, b.evicted_pages);
	fill(src, LEN, 11);
	ASSERT_EQ(0, reg(fd, src, LEN, RD, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, NULL));
	ASSERT_EQ(0, reg(fd, dst, LEN, WR, EXANEST_DMA_MODE_ON_DEMAND, NO_WINDOW, NULL));
	c0 = counters(fd);
	EXPECT_EQ(0, copy_wait(fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	ASSERT_EQ(0, budget(fd, 0, &b));
	c1 = counters(fd);
	EXPECT_LT(0, b.evicted_pages);
	EXPECT_LT(0, b.evictions);
	EXPECT_EQ(b.evicted_pages, c1.evicted_pages);
	/*
	 * Within the budget, give or take the run just faulted (touch-ahead: up to 511 pages); all
	 * the rest went at least once (pages the copy still used fault in again and may go again).
	 */
	EXPECT_GE(BUDGET + 512, b.mapped_pages);
	EXPECT_LE(2 * PAGES(LEN) - BUDGET - 512, b.evicted_pages);
	/* Again: what was evicted faults in again; the data is right again. */
	memset(dst, 0, LEN);
	EXPECT_EQ(0, copy_wait(fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	EXPECT_LT(c1.pages_resolved, counters(fd).pages_resolved);
	EXPECT_LT(c0.pages_resolved, c1.pages_resolved);
	/* Lowering the budget evicts at once (all but the newest run). */
	ASSERT_EQ(0, budget(fd, 0, &b));
	before = b.evicted_pages;
	ASSERT_EQ(0, budget(fd, 16, &b));
	EXPECT_GE(16 + 512, b.mapped_pages);
	EXPECT_LT(before, b.evicted_pages);
	close(fd);
}

TEST_HARNESS_MAIN
