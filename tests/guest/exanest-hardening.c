// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-hardening: the defects of the hardening issue (#10), each in every memory mode where
 * it applies.
 *
 * - Regions over the same pages in different modes share the IOMMU mappings: every pair of
 *   modes, registered in both orders, deregistered in both orders, with copies through each
 *   region; a pin taking over a 2 MiB IOMMU block of an on-demand region.
 * - Every error path of a registration gives back exactly the page pins it took: a page is
 *   pinned while a pin region holds it and unpinned after (seen through fork, which copies a
 *   DMA-pinned page for the child and shares any other).
 * - Fault-in may block for as long as user space wants (userfaultfd): such a fault is served
 *   when user space serves it, holds no driver lock meanwhile, and a SIGKILL ends the process
 *   within a second.
 * - Page tables allocated atomically under the notifier's lock may fail under pressure
 *   (fail_page_alloc makes them fail): the mapping is retried after reclaim, not NACKed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "exanest-test.h"

DEVICE_FIXTURE(hard);

FIXTURE_VARIANT(hard) {
	MODE_FIELDS;
};

FIXTURE_VARIANT_ADD(hard, pin) {
	PIN_MODE,
};

FIXTURE_VARIANT_ADD(hard, prefault) {
	PREFAULT_MODE,
};

FIXTURE_VARIANT_ADD(hard, on_demand) {
	ON_DEMAND_MODE,
};

static const uint32_t all_modes[] = {
	EXANEST_DMA_MODE_PIN, EXANEST_DMA_MODE_PREFAULT, EXANEST_DMA_MODE_ON_DEMAND,
};

static const char *mode_name(uint32_t m)
{
	return m == EXANEST_DMA_MODE_PIN ? "pin" :
	       m == EXANEST_DMA_MODE_PREFAULT ? "prefault" : "on-demand";
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The PFN backing the page at p (root reads PFNs), or 0 when not present. */
static uint64_t pfn_of(const void *p)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	uint64_t e = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &e, 8, (off_t)((uintptr_t)p / 4096) * 8) != 8)
		e = 0;
	close(fd);
	return (e >> 63) & 1 ? e & ((1ull << 55) - 1) : 0;
}

/*
 * Whether the page at p is DMA-pinned, as the mm sees it: fork() gives the child its own copy of
 * a pinned private page (page_needs_cow_for_dma()) and shares any other. 1 pinned, 0 not, -1 the
 * probe failed. The page must be present and not written by anyone meanwhile.
 */
static int page_pinned(const void *p)
{
	uint64_t mine = pfn_of(p), theirs = 0;
	int pipefd[2], status;
	pid_t pid;

	if (!mine || pipe(pipefd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		uint64_t v = pfn_of(p);

		_exit(write(pipefd[1], &v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	if (read(pipefd[0], &theirs, sizeof(theirs)) != sizeof(theirs))
		theirs = 0;
	waitpid(pid, &status, 0);
	close(pipefd[0]);
	close(pipefd[1]);
	if (!theirs)
		return -1;
	return theirs != mine;
}

/*
 * Two regions over the same pages, the variant's mode first and each mode second: the second
 * starts in the middle of the first's second page, so they share pages without sharing a start.
 * Copies through each region read and write the shared pages, then the regions go in both
 * orders, and again a copy through the one left. No registration fails, no copy fails, and io-
 * pgtable never warns (the console check fails the run on a WARNING).
 */
TEST_F(hard, overlapping_regions_in_every_pair_of_modes)
{
	enum { LEN = 64 << 10, OFF = 4096 + 512 };
	uint8_t *buf = big_alloc(LEN), *out = big_alloc(LEN);
	uint32_t hout;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, out);
	memset(out, 0, LEN);
	ASSERT_EQ(0, reg(self->fd, out, LEN, RD | WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hout));
	for (unsigned int m2 = 0; m2 < 3; m2++) {
		for (int first_goes_first = 0; first_goes_first < 2; first_goes_first++) {
			uint32_t mode2 = all_modes[m2], ha, hb, hgone, hleft;
			uint8_t *left_start;
			uint64_t left_len;

			fill(buf, LEN, m2 * 2 + first_goes_first);
			ASSERT_EQ(0, reg(self->fd, buf, LEN, RD | WR, variant->mode, NO_WINDOW, &ha));
			ASSERT_EQ(0, reg(self->fd, buf + OFF, LEN - OFF, RD | WR, mode2, NO_WINDOW,
					 &hb))
				TH_LOG("%s over %s", mode_name(mode2), variant->name);
			/* Through the first, all of it; through the second, its part. */
			EXPECT_EQ(0, copy_wait(self->fd, buf, out, LEN));
			EXPECT_EQ(0, memcmp(buf, out, LEN));
			memset(out, 0, LEN);
			EXPECT_EQ(0, copy_wait(self->fd, buf + OFF, out, LEN - OFF));
			EXPECT_EQ(0, memcmp(buf + OFF, out, LEN - OFF));
			/* Device writes into the shared pages through the second region. */
			fill(out, LEN, 99);
			EXPECT_EQ(0, copy_wait(self->fd, out, buf + OFF, LEN - OFF));
			EXPECT_EQ(0, memcmp(buf + OFF, out, LEN - OFF))
				TH_LOG("write through %s over %s", mode_name(mode2), variant->name);
			hgone = first_goes_first ? ha : hb;
			hleft = first_goes_first ? hb : ha;
			left_start = first_goes_first ? buf + OFF : buf;
			left_len = first_goes_first ? LEN - OFF : LEN;
			EXPECT_EQ(0, dereg(self->fd, hgone));
			fill(left_start, left_len, 7 + m2);
			memset(out, 0, LEN);
			EXPECT_EQ(0, copy_wait(self->fd, left_start, out, left_len))
				TH_LOG("copy through the region left (%s/%s, %s went first)",
				       variant->name, mode_name(mode2),
				       first_goes_first ? "first" : "second");
			EXPECT_EQ(0, memcmp(left_start, out, left_len));
			EXPECT_EQ(0, dereg(self->fd, hleft));
		}
	}
	EXPECT_EQ(0, dereg(self->fd, hout));
	EXPECT_EQ(0, counters(self->fd).pages_pinned) TH_LOG("every pin was given back");
	EXPECT_EQ(0, counters(self->fd).pages_mapped) TH_LOG("every mapping was removed");
}

/*
 * An on-demand region whose first fault mapped a 2 MiB IOMMU block, then a pin over one page in
 * the middle of it: the pin takes the page over (the block goes), and copies through both
 * regions still see the memory.
 */
TEST_F(hard, pin_inside_an_iommu_block)
{
	enum { LEN = 2 << 20 };
	uint8_t *buf = thp_alloc(LEN), *out = big_alloc(LEN);
	struct exanest_dma_counters c;
	uint32_t hb, hp, ho;

	if (variant->mode == EXANEST_DMA_MODE_PIN)
		SKIP(return, "the block comes from an on-demand or prefault region");
	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, out);
	madvise(buf, LEN, MADV_HUGEPAGE);
	fill(buf, LEN, 3);
	ASSERT_EQ(0, reg(self->fd, out, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, &ho));
	ASSERT_EQ(0, reg(self->fd, buf, LEN, RD | WR, variant->mode, 511, &hb));
	EXPECT_EQ(0, copy_wait(self->fd, buf, out, LEN));
	c = counters(self->fd);
	if (c.huge_mappings == 0)
		SKIP(goto out, "no transparent huge page here: nothing mapped as a block");
	ASSERT_EQ(0, reg(self->fd, buf + (1 << 20), 4096, RD | WR, EXANEST_DMA_MODE_PIN,
			 NO_WINDOW, &hp));
	EXPECT_EQ(1, page_pinned(buf + (1 << 20)));
	fill(buf, LEN, 4);
	memset(out, 0, LEN);
	EXPECT_EQ(0, copy_wait(self->fd, buf, out, LEN));
	EXPECT_EQ(0, memcmp(buf, out, LEN));
	EXPECT_EQ(0, dereg(self->fd, hp));
	EXPECT_EQ(0, page_pinned(buf + (1 << 20)));
	fill(buf, LEN, 5);
	EXPECT_EQ(0, copy_wait(self->fd, buf, out, LEN));
	EXPECT_EQ(0, memcmp(buf, out, LEN));
out:
	EXPECT_EQ(0, dereg(self->fd, hb));
	EXPECT_EQ(0, dereg(self->fd, ho));
}

/*
 * Two regions in one page in different modes (the reproducer: pin + prefault), then a
 * pin registration that fails half-way (its range runs into a hole): afterwards the page is
 * pinned exactly while a pin region holds it, and can be pinned again.
 */
TEST_F(hard, registration_errors_give_back_exactly_their_pins)
{
	uint8_t *buf = big_alloc(4 * 4096);
	uint32_t ha, hb, hc;

	ASSERT_NE(NULL, buf);
	memset(buf, 1, 4 * 4096);
	ASSERT_EQ(0, munmap(buf + 2 * 4096, 4096)); /* a hole at the third page */
	EXPECT_EQ(0, page_pinned(buf));
	ASSERT_EQ(0, reg(self->fd, buf, 64, RD | WR, variant->mode, NO_WINDOW, &ha));
	ASSERT_EQ(0, reg(self->fd, buf + 64, 64, RD | WR,
			 variant->mode == EXANEST_DMA_MODE_PIN ? EXANEST_DMA_MODE_PREFAULT :
								  EXANEST_DMA_MODE_PIN,
			 NO_WINDOW, &hb)) TH_LOG("a second region in the same page");
	EXPECT_EQ(1, page_pinned(buf));
	/* Pinning from the first page into the hole fails; the first two pages keep one pin. */
	EXPECT_EQ(-EFAULT, reg(self->fd, buf, 3 * 4096, RD | WR, EXANEST_DMA_MODE_PIN, NO_WINDOW,
			       NULL));
	EXPECT_EQ(1, page_pinned(buf));
	EXPECT_EQ(0, page_pinned(buf + 4096)) TH_LOG("the failed registration's pin stayed");
	EXPECT_EQ(0, dereg(self->fd, ha));
	EXPECT_EQ(0, dereg(self->fd, hb));
	EXPECT_EQ(0, page_pinned(buf)) TH_LOG("a pin outlived its regions");
	/* The page can be pinned again, and is unpinned again. */
	ASSERT_EQ(0, reg(self->fd, buf, 4096, RD, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hc));
	EXPECT_EQ(1, page_pinned(buf));
	EXPECT_EQ(0, dereg(self->fd, hc));
	EXPECT_EQ(0, page_pinned(buf));
	EXPECT_EQ(0, counters(self->fd).pages_pinned);
}

/* A userfaultfd over [p, p + len) for missing pages, or -1. */
static int uffd_over(void *p, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register r = {
		.range = { .start = (uintptr_t)p, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &r)) {
		close(fd);
		return -1;
	}
	return fd;
}

struct server {
	int uffd;
	uint8_t fill;
	int served;
	volatile int stop;
};

/* Serve every missing-page fault of the uffd with a page of s->fill, until told to stop. */
static void *serve(void *arg)
{
	struct server *s = arg;
	static uint8_t page[4096] __attribute__((aligned(4096)));

	memset(page, s->fill, sizeof(page));
	while (!s->stop) {
		struct pollfd pfd = { .fd = s->uffd, .events = POLLIN };
		struct uffd_msg msg;
		struct uffdio_copy c;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		if (read(s->uffd, &msg, sizeof(msg)) != sizeof(msg)) {
			if (errno == EAGAIN)
				continue;
			return NULL;
		}
		if (msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		c = (struct uffdio_copy){ .dst = msg.arg.pagefault.address & ~4095ull,
					  .src = (uintptr_t)page, .len = 4096 };
		if (ioctl(s->uffd, UFFDIO_COPY, &c) && errno != EEXIST)
			return NULL;
		__atomic_add_fetch(&s->served, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/*
 * Memory whose faults a userfaultfd serves: the engine's faults on it (or the registration's, in
 * pin and prefault modes) wait for the server, and the copy reads what it supplied.
 */
TEST_F(hard, userfaultfd_serves_engine_faults)
{
	enum { LEN = 8 * 4096 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct server s = { .fill = 0x5a };
	uint32_t hs, hd;
	pthread_t t;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	s.uffd = uffd_over(src, LEN);
	if (s.uffd < 0)
		SKIP(return, "no userfaultfd: %s", strerror(errno));
	ASSERT_EQ(0, pthread_create(&t, NULL, serve, &s));
	memset(dst, 0, LEN);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, NO_WINDOW, &hd));
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_TRUE(all_bytes(dst, LEN, 0x5a)) TH_LOG("the copy read what the server supplied");
	EXPECT_LE(1, __atomic_load_n(&s.served, __ATOMIC_SEQ_CST));
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
	s.stop = 1;
	pthread_join(t, NULL);
	close(s.uffd);
}

/*
 * The pid of process pid's fault thread (exanest-fault/<pid>), or -1 when there is none: the
 * tasks that exist, from /proc's directory (trying every pid up to pid_max cost 14 s a scan
 * under the test kernel).
 */
static pid_t fault_thread_of(pid_t pid)
{
	char want[32], path[64], comm[64];
	DIR *proc = opendir("/proc");
	struct dirent *e;
	pid_t found = -1;

	if (!proc)
		return -1;
	snprintf(want, sizeof(want), "exanest-fault/%d\n", pid);
	while (found < 0 && (e = readdir(proc))) {
		int p = atoi(e->d_name), fd;
		ssize_t n;

		if (p <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/comm", p);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		comm[n > 0 ? n : 0] = 0;
		if (!strcmp(comm, want))
			found = p;
	}
	closedir(proc);
	return found;
}

static bool fault_thread_alive(pid_t pid)
{
	return fault_thread_of(pid) > 0;
}

/*
 * A userfaultfd whose faults are never served (another process holds it open and only reads the
 * fault message). The child's copy (or, in pin and prefault modes, its registration) waits on
 * it. Meanwhile the child's other calls do not wait (ADVISE of another region returns), and a
 * SIGKILL ends the child within a second; its fault thread is gone, and the engine is free.
 */
TEST_F_TIMEOUT(hard, userfaultfd_never_served_then_sigkill, 60)
{
	enum { LEN = 4 * 4096 };
	int to_parent[2], to_child[2], from_holder[2], status;
	struct uffd_msg msg;
	pid_t child, holder;
	char c;
	double t0, dt;

	ASSERT_EQ(0, pipe(to_parent));
	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(from_holder));
	RELEASE_DEVICE(); /* the child owns the engine */
	child = fork();
	ASSERT_LE(0, child);
	if (!child) {
		uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN), *other = big_alloc(LEN);
		struct exanest_dma_copy cp;
		uint32_t h;
		int uffd, fd, ret;

		if (!src || !dst || !other)
			_exit(10);
		uffd = uffd_over(src, LEN);
		if (uffd < 0)
			_exit(11);
		holder = fork();
		if (!holder) {
			/* Hold the uffd, report the first fault, never serve it. */
			struct pollfd pfd = { .fd = uffd, .events = POLLIN };

			while (poll(&pfd, 1, -1) == 1 && read(uffd, &msg, sizeof(msg)) != sizeof(msg))
				;
			(void)!write(from_holder[1], &msg, sizeof(msg));
			pause();
			_exit(0);
		}
		(void)!write(to_parent[1], &holder, sizeof(holder));
		fd = dev_open(0);
		if (fd < 0)
			_exit(12);
		memset(dst, 0, LEN);
		memset(other, 1, LEN);
		if (variant->mode == EXANEST_DMA_MODE_ON_DEMAND) {
			if (reg(fd, src, LEN, RD, variant->mode, NO_WINDOW, &h) ||
			    reg(fd, dst, LEN, WR, variant->mode, NO_WINDOW, &h) ||
			    reg(fd, other, LEN, RD, variant->mode, NO_WINDOW, &h))
				_exit(13);
			cp = (struct exanest_dma_copy){ .src = (uintptr_t)src,
							.dst = (uintptr_t)dst, .length = LEN };
			if (xioctl(fd, EXANEST_DMA_IOC_COPY, &cp))
				_exit(14);
			/* Once the fault waits in the uffd: ADVISE another region, report. */
			if (read(to_child[0], &c, 1) != 1)
				_exit(15);
			ret = advise(fd, other, LEN, 0);
			(void)!write(to_parent[1], &ret, sizeof(ret));
			wait_cookie(fd, cp.cookie, -1, NULL, NULL);
		} else {
			/* The registration itself faults the memory in (pinning, or prefault). */
			reg(fd, src, LEN, RD, variant->mode, NO_WINDOW, &h);
		}
		_exit(16);
	}
	ASSERT_EQ(sizeof(holder), read(to_parent[0], &holder, sizeof(holder)));
	ASSERT_EQ(sizeof(msg), read(from_holder[0], &msg, sizeof(msg)));
	EXPECT_EQ(UFFD_EVENT_PAGEFAULT, msg.event);
	if (variant->mode == EXANEST_DMA_MODE_ON_DEMAND) {
		struct pollfd pfd = { .fd = to_parent[0], .events = POLLIN };
		int ret = -1;

		ASSERT_EQ(1, write(to_child[1], "g", 1));
		EXPECT_EQ(1, poll(&pfd, 1, 5000)) TH_LOG("ADVISE waits behind the stuck fault");
		if (pfd.revents & POLLIN)
			EXPECT_EQ(sizeof(ret), read(to_parent[0], &ret, sizeof(ret)));
		EXPECT_EQ(0, ret);
	}
	usleep(100000);
	/* The scan below would see no thread if it could not find one. */
	EXPECT_TRUE(fault_thread_alive(child)) TH_LOG("the child has no fault thread to look for");
	t0 = now_s();
	kill(child, SIGKILL);
	ASSERT_EQ(child, waitpid(child, &status, 0));
	dt = now_s() - t0;
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) TH_LOG("status %#x", status);
	EXPECT_GT(1.0, dt) TH_LOG("the killed process took %.3f s to die", dt);
	for (int i = 0; i < 50 && fault_thread_alive(child); i++)
		usleep(20000);
	EXPECT_FALSE(fault_thread_alive(child)) TH_LOG("the fault thread outlived its process");
	/* The engine is free and works; then the holder goes too. */
	self->fd = dev_open(0);
	EXPECT_LE(0, self->fd) TH_LOG("reopen: %s", strerror(errno));
	if (self->fd >= 0) {
		uint8_t *a = big_alloc(4096), *b = big_alloc(4096);
		uint32_t h;

		memset(a, 7, 4096);
		memset(b, 0, 4096);
		EXPECT_EQ(0, reg(self->fd, a, 4096, RD, variant->mode, NO_WINDOW, &h));
		EXPECT_EQ(0, reg(self->fd, b, 4096, WR, variant->mode, NO_WINDOW, &h));
		EXPECT_EQ(0, copy_wait(self->fd, a, b, 4096));
		EXPECT_TRUE(all_bytes(b, 4096, 7));
	}
	kill(holder, SIGKILL);
}

/* The "name value" line of a cgroup's memory.stat, or -1. */
static long long memstat(const char *cg, const char *name)
{
	char path[128], line[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.stat", cg);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(name);

		if (!strncmp(line, name, n) && line[n] == ' ')
			v = atoll(line + n + 1);
	}
	fclose(f);
	return v;
}

/*
 * What the driver allocates as a process's memory grows (the IOMMU page tables, the mirror's
 * nodes, pin arrays...) is charged to the process's memory cgroup, also when the fault thread
 * allocates it for an on-demand fault: 8192 pages mapped in 4 KiB pages take at least 16 leaf
 * tables of 4 KiB (sec_pagetables) besides the driver's slab; the user pages alone are charged
 * as anon. (Before the mirror kept a node per 2 MiB, its node per page alone was 512 KiB of
 * slab here.)
 */
TEST_F(hard, driver_memory_is_charged_to_the_memcg)
{
	enum { LEN = 16 << 20 };
	const char *cg = "/sys/fs/cgroup/exanest-hard";
	char pid[32];
	uint8_t *src, *dst;
	long long slab, tables, before, after;
	uint32_t hs, hd;

	sysfs_write("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
	mkdir(cg, 0755);
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (!sysfs_write("/sys/fs/cgroup/exanest-hard/cgroup.procs", pid))
		SKIP(return, "no memory cgroup here");
	src = big_alloc(LEN);
	dst = big_alloc(LEN);
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	madvise(src, LEN, MADV_NOHUGEPAGE);
	madvise(dst, LEN, MADV_NOHUGEPAGE);
	memset(src, 1, LEN);
	memset(dst, 0, LEN);
	slab = memstat(cg, "slab_unreclaimable");
	tables = memstat(cg, "sec_pagetables");
	ASSERT_LE(0, slab);
	ASSERT_LE(0, tables);
	before = slab + tables;
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, 511, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, 511, &hd));
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	after = memstat(cg, "slab_unreclaimable") + memstat(cg, "sec_pagetables");
	/*
	 * memory.stat flushes a cgroup's per-CPU counters only past MEMCG_CHARGE_BATCH updates
	 * per CPU (pages, for page tables: 19 here are below it), else every 2 s (the periodic
	 * flush): CI once read 9 KiB, then 9 KiB, on demand. Wait for that flush, 4 s at most.
	 */
	for (int i = 0; i < 40 && after < before + (48 << 10); i++) {
		usleep(100 * 1000);
		after = memstat(cg, "slab_unreclaimable") + memstat(cg, "sec_pagetables");
	}
	TH_LOG("unreclaimable slab %lld KiB and IOMMU page tables %lld KiB of the cgroup, then %lld KiB in all",
	       slab >> 10, tables >> 10, after >> 10);
	EXPECT_LE(before + (48 << 10), after) TH_LOG("the driver's memory was not charged");
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
	sysfs_write("/sys/fs/cgroup/cgroup.procs", pid);
	rmdir(cg);
}

/* Write val to /sys/kernel/debug/fail_page_alloc/name. */
static bool fpa(const char *name, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/kernel/debug/fail_page_alloc/%s", name);
	return sysfs_write(path, val);
}

/*
 * The first page-table allocations of a mapping fail (fail_page_alloc, atomic allocations only,
 * in the thread that maps: the fault thread on demand, this process otherwise). The driver
 * reclaims and retries: the registration and the copy succeed.
 */
TEST_F(hard, atomic_page_table_failures_are_retried)
{
	enum { LEN = 16 * 4096 };
	/* A fresh 1 GiB-aligned range: its page tables do not exist yet. */
	uint8_t *src = mmap((void *)(0x5000000000ull + (variant->mode << 30)), LEN,
			    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			    -1, 0);
	uint8_t *dst = big_alloc(LEN);
	char path[64];
	pid_t who;
	uint32_t hs, hd;
	int ret;

	ASSERT_NE(MAP_FAILED, src);
	ASSERT_NE(NULL, dst);
	if (access("/sys/kernel/debug/fail_page_alloc", F_OK))
		SKIP(return, "no fail_page_alloc in this kernel");
	fill(src, LEN, 21);
	memset(dst, 0, LEN);
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hd));
	who = variant->mode == EXANEST_DMA_MODE_ON_DEMAND ? fault_thread_of(getpid()) : getpid();
	ASSERT_LT(0, who);
	snprintf(path, sizeof(path), "/proc/%d/make-it-fail", who);
	ASSERT_TRUE(fpa("task-filter", "Y") && fpa("ignore-gfp-wait", "Y") &&
		    fpa("ignore-gfp-highmem", "N") && fpa("min-order", "0") &&
		    fpa("verbose", "0") && fpa("interval", "1") && fpa("probability", "100") &&
		    fpa("times", "3"));
	ASSERT_TRUE(sysfs_write(path, "1"));
	ret = reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs);
	if (!ret)
		ret = copy_wait(self->fd, src, dst, LEN);
	sysfs_write(path, "0");
	fpa("probability", "0");
	EXPECT_EQ(0, ret) TH_LOG("a failed atomic page-table allocation became %s", strerror(-ret));
	EXPECT_EQ(0, memcmp(src, dst, LEN));
}

TEST_HARNESS_MAIN
