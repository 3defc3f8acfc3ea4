// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-concurrency: more copies than channels, two processes on two instances (and at the
 * same virtual address), poll(), munmap racing a copy, and teardown with copies in flight:
 * close, unbind with the file open, rebind. In every memory mode.
 */
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "exanest-test.h"

DEVICE_FIXTURE(concurrency);

FIXTURE_VARIANT(concurrency) {
	MODE_FIELDS;
	bool munmap_may_nack;	/* a copy racing munmap of its destination may end -EFAULT */
};

FIXTURE_VARIANT_ADD(concurrency, pin) {
	PIN_MODE,
	.munmap_may_nack = false,	/* the pinned pages outlive the mapping */
};

FIXTURE_VARIANT_ADD(concurrency, prefault) {
	PREFAULT_MODE,
	.munmap_may_nack = true,
};

FIXTURE_VARIANT_ADD(concurrency, on_demand) {
	ON_DEMAND_MODE,
	.munmap_may_nack = true,
};

/*
 * More copies than channels: long copies (4 MiB, about 2 ms each, more when sharing the data
 * path), submitted back to back without printing: the first four find the four channels free.
 * Each copy has its own pair of regions, so that on demand each stream grows its own adaptive
 * touch-ahead window (sixteen streams through one region keep it small: one fault per page).
 */
/*
 * Submit n copies of len bytes, copy i from src + i * len to dst + i * len, and mark in used[]
 * the channels they started on directly. Returns how many were accepted.
 */
static int submit_copies(int fd, uint8_t *src, uint8_t *dst, size_t len, int n,
			 uint64_t *cookies, int *used)
{
	for (int i = 0; i < n; i++) {
		struct exanest_dma_copy c = { .src = (uintptr_t)(src + (size_t)i * len),
					      .dst = (uintptr_t)(dst + (size_t)i * len),
					      .length = len };

		if (xioctl(fd, EXANEST_DMA_IOC_COPY, &c))
			return i;
		cookies[i] = c.cookie;
		if (c.channel < 15)
			used[c.channel] = 1;
		else
			used[15]++; /* queued: no channel free */
	}
	return n;
}

/* Wait for n copies: how many of the waits failed or ended with a non-zero status. */
static int wait_copies(int fd, const uint64_t *cookies, int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		int st = -1;

		bad += wait_cookie(fd, cookies[i], 20 * SEC, &st, NULL) != 0 || st != 0;
	}
	return bad;
}

TEST_F_TIMEOUT(concurrency, all_channels, 90)
{
	enum { N = 16, LEN = 4 << 20 };
	uint8_t *src = big_alloc((size_t)N * LEN), *dst = big_alloc((size_t)N * LEN);
	struct exanest_dma_info info;
	uint64_t cookies[N];
	uint32_t h[2 * N];
	int used[16] = { 0 };

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_INFO, &info));
	ASSERT_LE(4, info.channels);
	fill(src, (size_t)N * LEN, 5);
	for (int i = 0; i < N; i++) {
		ASSERT_EQ(0, reg(self->fd, src + (size_t)i * LEN, LEN, RD, variant->mode, NO_WINDOW,
				 &h[2 * i]));
		ASSERT_EQ(0, reg(self->fd, dst + (size_t)i * LEN, LEN, WR, variant->mode, NO_WINDOW,
				 &h[2 * i + 1]));
	}
	ASSERT_EQ(N, submit_copies(self->fd, src, dst, LEN, N, cookies, used));
	EXPECT_EQ(0, wait_copies(self->fd, cookies, N));
	EXPECT_EQ(0, memcmp(src, dst, (size_t)N * LEN));
	/*
	 * With every channel free, four copies in a row start on four channels. A copy that ends
	 * before the next is submitted (a slow host: 4 MiB is 2 ms of the engine's time, which
	 * runs on the host's clock here) frees its channel for it: then try again, for a while.
	 */
	for (int t = 0; t < 200 && !(used[0] && used[1] && used[2] && used[3]); t++) {
		memset(used, 0, sizeof(used));
		ASSERT_EQ(4, submit_copies(self->fd, src, dst, LEN, 4, cookies, used));
		EXPECT_EQ(0, wait_copies(self->fd, cookies, 4));
	}
	EXPECT_TRUE(used[0] && used[1] && used[2] && used[3])
		TH_LOG("channels started directly: %d%d%d%d, %d queued", used[0], used[1], used[2],
		       used[3], used[15]);
	for (int i = 0; i < 2 * N; i++) {
		EXPECT_EQ(0, dereg(self->fd, h[i]));
	}
}

/* Run in a child: eight copies through instance inst, verified; 0 on success. */
static int copier(int inst, uint32_t mode, unsigned int seed)
{
	int fd = dev_open(inst);

	if (fd < 0)
		return 2;
	for (int i = 0; i < 8; i++) {
		size_t len = (1 << 20) + i * 4099, total = len + 8192;
		uint8_t *src = big_alloc(total), *dst = big_alloc(total);
		uint32_t hs, hd;

		if (!src || !dst)
			return 3;
		fill(src, total, seed + i);
		if (reg(fd, src + i, len, RD, mode, NO_WINDOW, &hs) ||
		    reg(fd, dst + 2 * i, len, WR, mode, NO_WINDOW, &hd) ||
		    copy_wait(fd, src + i, dst + 2 * i, len) ||
		    memcmp(src + i, dst + 2 * i, len) || dereg(fd, hs) || dereg(fd, hd))
			return 1;
		munmap(src, total);
		munmap(dst, total);
	}
	close(fd);
	return 0;
}

TEST_F_TIMEOUT(concurrency, two_processes_two_instances, 60)
{
	pid_t pid[2];
	int status[2] = { -1, -1 };

	RELEASE_DEVICE();
	for (int p = 0; p < 2; p++) {
		pid[p] = fork();
		ASSERT_LE(0, pid[p]);
		if (!pid[p])
			_exit(copier(p, variant->mode, 100 * (p + 1)));
	}
	for (int p = 0; p < 2; p++) {
		ASSERT_EQ(pid[p], waitpid(pid[p], &status[p], 0));
		EXPECT_TRUE(WIFEXITED(status[p]) && WEXITSTATUS(status[p]) == 0)
			TH_LOG("instance %d: status %#x", p, status[p]);
	}
}

/* Two processes on two instances, at the same virtual address: each engine sees only its own
 * process's memory.
 */
TEST_F_TIMEOUT(concurrency, same_address_two_processes_isolated, 60)
{
	void *want = (void *)0x7e0000000000ull;
	pid_t pid[2];
	int status[2] = { -1, -1 };

	RELEASE_DEVICE();
	for (int p = 0; p < 2; p++) {
		pid[p] = fork();
		ASSERT_LE(0, pid[p]);
		if (!pid[p]) {
			int fd = dev_open(p);
			uint8_t *a = mmap(want, 1 << 20, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			uint8_t *b = big_alloc(1 << 20);

			if (fd < 0 || a != want || !b)
				_exit(2);
			memset(a, 'A' + p, 1 << 20);
			usleep(20000); /* both processes have their buffer at the same address now */
			if (reg(fd, a, 1 << 20, RD, variant->mode, NO_WINDOW, NULL) ||
			    reg(fd, b, 1 << 20, WR, variant->mode, NO_WINDOW, NULL))
				_exit(3);
			for (int i = 0; i < 20; i++) {
				if (copy_wait(fd, a, b, 1 << 20) || !all_bytes(b, 1 << 20, 'A' + p))
					_exit(1);
				memset(b, 0, 1 << 20);
			}
			_exit(0);
		}
	}
	for (int p = 0; p < 2; p++) {
		ASSERT_EQ(pid[p], waitpid(pid[p], &status[p], 0));
		EXPECT_TRUE(WIFEXITED(status[p]) && WEXITSTATUS(status[p]) == 0)
			TH_LOG("process %d: status %#x", p, status[p]);
	}
}

/*
 * poll() wakes when a copy ends and reports it until it is collected. Whether the copy still
 * runs when poll() first looks is the guest's virtual time against the copy's 8 ms, which the
 * host can outrun by descheduling QEMU's vCPU: a WAIT that does not sleep (timeout 0) right
 * after that look tells. Still running then means running at the look too, and the look must
 * have said "not ready"; ended by then leaves that look unchecked (and says so).
 */
TEST_F(concurrency, poll)
{
	enum { LEN = 16 << 20 };
	uint8_t *buf = big_alloc(2 * LEN);
	struct pollfd p = { .fd = self->fd, .events = POLLIN };
	uint64_t cookie = 0;
	uint32_t hs, hd;
	int st = -1, r0, r1, r2, w;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, reg(self->fd, buf, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, buf + LEN, LEN, WR, variant->mode, NO_WINDOW, &hd));
	r0 = poll(&p, 1, 0);
	ASSERT_EQ(0, copy(self->fd, buf, buf + LEN, LEN, &cookie)); /* about 8 ms of engine time */
	r1 = poll(&p, 1, 0);
	w = wait_cookie(self->fd, cookie, 0, &st, NULL);
	EXPECT_EQ(0, r0) TH_LOG("ready while idle");
	if (w == -ETIMEDOUT) {
		EXPECT_EQ(0, r1) TH_LOG("ready while the copy runs");
		p.revents = 0;
		r2 = poll(&p, 1, 5000);
		EXPECT_EQ(1, r2);
		EXPECT_TRUE(p.revents & POLLIN) TH_LOG("revents %#x", p.revents);
		EXPECT_EQ(1, poll(&p, 1, 0)) TH_LOG("still ready until the result is collected");
		EXPECT_EQ(0, wait_cookie(self->fd, cookie, 0, &st, NULL));
	} else {
		EXPECT_EQ(0, w);
		TH_LOG("the copy ended before the second look (host delay): its first look unchecked");
	}
	EXPECT_EQ(0, st);
	EXPECT_EQ(0, poll(&p, 1, 0)) TH_LOG("quiet after the result was collected");
}

#define VICTIM (16 << 20)	/* 8 ms of engine time, pinned; much longer on demand */

static void *unmapper(void *arg)
{
	usleep(500);
	munmap(arg, VICTIM);
	return NULL;
}

/* munmap from another thread while the copy runs: NACK or done, never an oops. */
TEST_F_TIMEOUT(concurrency, munmap_during_copy, 60)
{
	uint8_t *victim = big_alloc(VICTIM), *from = big_alloc(VICTIM);
	uint32_t h1, h2;
	pthread_t t;
	int st;

	ASSERT_NE(NULL, victim);
	ASSERT_NE(NULL, from);
	ASSERT_EQ(0, reg(self->fd, from, VICTIM, RD, variant->mode, NO_WINDOW, &h1));
	ASSERT_EQ(0, reg(self->fd, victim, VICTIM, WR, variant->mode, NO_WINDOW, &h2));
	ASSERT_EQ(0, pthread_create(&t, NULL, unmapper, victim));
	st = copy_wait(self->fd, from, victim, VICTIM);
	pthread_join(t, NULL);
	if (variant->munmap_may_nack) {
		EXPECT_TRUE(st == 0 || st == -EFAULT) TH_LOG("status %d", st);
	} else {
		EXPECT_EQ(0, st);
	}
	/* The session is alive: the next call gets its own errno (a read-only destination). */
	EXPECT_EQ(-EACCES, copy_wait(self->fd, from, from + VICTIM / 2, 4096));
	EXPECT_EQ(0, dereg(self->fd, h1));
	EXPECT_EQ(0, dereg(self->fd, h2));
}

/* Register a buffer of 2 x len and start count copies through it; returns how many started. */
static int start_big_copies(int fd, uint32_t mode, uint8_t **bufp, size_t len, int count)
{
	uint8_t *buf = big_alloc(2 * len);
	int n = 0;

	*bufp = buf;
	if (!buf || reg(fd, buf, len, RD, mode, NO_WINDOW, NULL) ||
	    reg(fd, buf + len, len, WR, mode, NO_WINDOW, NULL))
		return -1;
	for (int i = 0; i < count; i++)
		n += !copy(fd, buf, buf + len, len, NULL);
	return n;
}

/* Close with copies queued or running: the engine is free again. */
TEST_F_TIMEOUT(concurrency, close_with_copies_in_flight, 60)
{
	uint8_t *buf;
	/* 8 copies of 8 MiB, about 32 ms of engine time: queued or running at the close. */
	int n = start_big_copies(self->fd, variant->mode, &buf, 8 << 20, 8);

	EXPECT_EQ(8, n);
	RELEASE_DEVICE();
	munmap(buf, 16 << 20);
	self->fd = dev_open(0);
	EXPECT_LE(0, self->fd) TH_LOG("reopen: %s", strerror(errno));
}

/* Unbind with the file open and copies running, then bind again. */
static sigjmp_buf sigbus_env;
static volatile sig_atomic_t got_sigbus;

static void on_sigbus(int sig)
{
	(void)sig;
	got_sigbus = 1;
	siglongjmp(sigbus_env, 1);
}

/* The driver's sysfs directory and its bound engines: PCI functions, or platform devices. */
struct engines {
	const char *drv;
	int nb;
	char names[8][32];
};

static struct engines engine_devices(void)
{
	static const char *const dirs[] = { "/sys/bus/pci/drivers/exanest_dma",
					    "/sys/bus/platform/drivers/exanest_dma" };
	static const char *const marks[] = { "0000:", ".dma" };
	struct engines e = { .drv = dirs[0] };

	for (int i = 0; i < 2 && !e.nb; i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *de;

		if (!d)
			continue;
		e.drv = dirs[i];
		while ((de = readdir(d)) && e.nb < 8)
			if (strstr(de->d_name, marks[i]))
				snprintf(e.names[e.nb++], sizeof(e.names[0]), "%.31s", de->d_name);
		closedir(d);
	}
	return e;
}

TEST_F_TIMEOUT(concurrency, unbind_with_open_file, 90)
{
	/* The engines' devices: PCI functions, or platform devices (the QFDB machine). */
	const struct engines e = engine_devices();
	const char *const drv = e.drv;
	char bdfs[8][32], path[96];
	int n, st = 0, ret, fd, ok = 1, qfd;
	const int nb = e.nb;
	struct exanest_dma_queue qr = { 0 };
	volatile uint32_t *db;
	uint8_t *buf, *sq;

	ASSERT_EQ(2, nb);
	memcpy(bdfs, e.names, sizeof(bdfs));
	/*
	 * In bus order, so that /dev/exanest-dma0's engine (probed first) goes first: an unbind
	 * disables the engine's virtual functions, which takes the PCI core a second (on the
	 * platform, it destroys the contexts' devices).
	 */
	if (strcmp(bdfs[0], bdfs[1]) > 0) {
		char t[32];

		memcpy(t, bdfs[0], sizeof(t));
		memcpy(bdfs[0], bdfs[1], sizeof(t));
		memcpy(bdfs[1], t, sizeof(t));
	}
	/*
	 * A second file with a user-level queue and its doorbell mapped: unbind must zap the
	 * mapping, whose VF goes away with SR-IOV (on the platform, the engine's window).
	 */
	qfd = dev_open(0);
	ASSERT_LE(0, qfd);
	sq = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sq);
	qr.sq_addr = (uintptr_t)sq;
	qr.cq_addr = (uintptr_t)sq + 4096;
	qr.sq_log2 = qr.cq_log2 = 2;
	ASSERT_EQ(0, xioctl(qfd, EXANEST_DMA_IOC_QUEUE_CREATE, &qr));
	db = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, qfd, qr.doorbell_offset);
	ASSERT_NE(MAP_FAILED, db);
	EXPECT_EQ(0x45584e56u, db[0]) TH_LOG("the VF page's ID");
	/* 64 copies of 16 MiB: about half a second of engine time, so the last is still queued. */
	n = start_big_copies(self->fd, variant->mode, &buf, 16 << 20, 64);
	snprintf(path, sizeof(path), "%s/unbind", drv);
	for (int i = 0; i < nb; i++)
		ok &= sysfs_write(path, bdfs[i]);
	EXPECT_EQ(64, n);
	EXPECT_TRUE(ok) TH_LOG("unbind");
	/*
	 * The doorbell mapping is gone: an access gets SIGBUS (the mapping is not inherited by a
	 * child, so the test itself takes it, with a handler).
	 */
	signal(SIGBUS, on_sigbus);
	if (!sigsetjmp(sigbus_env, 1)) {
		(void)db[0];
		got_sigbus = 0;
	}
	signal(SIGBUS, SIG_DFL);
	EXPECT_EQ(1, got_sigbus) TH_LOG("doorbell still mapped after unbind");
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, qfd,
				   qr.doorbell_offset));
	munmap((void *)db, 4096);
	close(qfd);
	EXPECT_EQ(-ENODEV, copy(self->fd, buf, buf + (16 << 20), 64, NULL)) TH_LOG("ioctl after unbind");
	{
		/* abi.rst: every call but WAIT and COUNTERS is ENODEV once the device is gone. */
		struct exanest_dma_info info;
		struct exanest_dma_latency lat;
		struct exanest_dma_region_stats rs = { .handle = 1 };
		struct exanest_dma_counters cnt;

		EXPECT_EQ(-ENODEV, xioctl(self->fd, EXANEST_DMA_IOC_INFO, &info));
		EXPECT_EQ(-ENODEV, xioctl(self->fd, EXANEST_DMA_IOC_LATENCY, &lat));
		EXPECT_EQ(-ENODEV, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
		EXPECT_EQ(-ENODEV, dereg(self->fd, 1));
		EXPECT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_COUNTERS, &cnt));
	}
	/* The last of the copies, queued behind the others when the device went: its result stays
	 * collectable, -ENODEV.
	 */
	ret = wait_cookie(self->fd, n, 0, &st, NULL);
	EXPECT_EQ(0, ret);
	EXPECT_EQ(-ENODEV, st);
	RELEASE_DEVICE();
	munmap(buf, 32 << 20);
	fd = dev_open(0);
	EXPECT_EQ(-1, fd) TH_LOG("a device while unbound");
	EXPECT_EQ(ENOENT, errno);
	snprintf(path, sizeof(path), "%s/bind", drv);
	ok = 1;
	for (int i = 0; i < nb; i++)
		ok &= sysfs_write(path, bdfs[i]);
	ASSERT_TRUE(ok) TH_LOG("rebind");
	/* A copy after the rebind. */
	self->fd = dev_open(0);
	ASSERT_LE(0, self->fd) TH_LOG("open after rebind: %s", strerror(errno));
	{
		uint8_t *src = big_alloc(1 << 20), *dst = big_alloc(1 << 20);

		ASSERT_NE(NULL, src);
		ASSERT_NE(NULL, dst);
		fill(src, 123457 + 3, 7);
		ASSERT_EQ(0, reg(self->fd, src + 3, 123457, RD, variant->mode, NO_WINDOW, NULL));
		ASSERT_EQ(0, reg(self->fd, dst + 9, 123457, WR, variant->mode, NO_WINDOW, NULL));
		EXPECT_EQ(0, copy_wait(self->fd, src + 3, dst + 9, 123457));
		EXPECT_EQ(0, memcmp(src + 3, dst + 9, 123457));
	}
}

TEST_HARNESS_MAIN
