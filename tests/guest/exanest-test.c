// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-test: guest end-to-end tests of the exanest_dma driver through its raw ioctl ABI
 * (include/uapi/linux/exanest_dma.h). Each check prints one "GUEST-TEST: ok|not ok NAME" line.
 *
 *   exanest-test copy        copy correctness: 1 B .. 64 MiB, unaligned, page-crossing
 *   exanest-test channels    more copies than channels at once, each verified
 *   exanest-test errors      every bad argument gets its documented errno
 *   exanest-test twoproc     two processes on two instances at once
 *   exanest-test teardown    close and exit with copies in flight, unbind with an open file
 *   exanest-test poll        poll() readiness follows copy completion
 *   exanest-test odp         on-demand and prefault modes: faults, NACKs, invalidations
 *   exanest-test odp-more    file mappings, THP, swap, all channels, munmap race, exit
 *   exanest-test fork        DMA after fork lands in the parent's copy
 *   exanest-test isolation   two processes, two instances, one address: no cross-talk
 *   exanest-test window      per-region touch-ahead, advise (prefetch)
 *   exanest-test demo        one copy through the SMMU, verified, with the counters
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "guest-test.h"

#include <linux/exanest_dma.h>



static int dev_open(int inst)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/exanest-dma%d", inst);
	return open(path, O_RDWR | O_CLOEXEC);
}

/* ioctl returning 0 or -errno */
static int xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static int reg_mode(int fd, const void *addr, uint64_t len, uint32_t access, uint32_t mode,
		    uint32_t *handle)
{
	struct exanest_dma_reg r = { .addr = (uintptr_t)addr, .length = len, .access = access,
				     .mode = mode };
	int ret = xioctl(fd, EXANEST_DMA_IOC_REG, &r);

	if (!ret && handle)
		*handle = r.handle;
	return ret;
}

static int reg(int fd, const void *addr, uint64_t len, uint32_t access, uint32_t *handle)
{
	return reg_mode(fd, addr, len, access, EXANEST_DMA_MODE_PIN, handle);
}

static int dereg(int fd, uint32_t handle)
{
	struct exanest_dma_dereg d = { .handle = handle };

	return xioctl(fd, EXANEST_DMA_IOC_DEREG, &d);
}

static int copy(int fd, const void *src, void *dst, uint64_t len, uint64_t *cookie)
{
	struct exanest_dma_copy c = { .src = (uintptr_t)src, .dst = (uintptr_t)dst, .length = len };
	int ret = xioctl(fd, EXANEST_DMA_IOC_COPY, &c);

	if (!ret && cookie)
		*cookie = c.cookie;
	return ret;
}

/* 0 and the copy's status in *status, or -errno of the wait itself */
static int wait_cookie(int fd, uint64_t cookie, int64_t timeout_ns, int *status, uint64_t *bytes)
{
	struct exanest_dma_wait w = { .cookie = cookie, .timeout_ns = timeout_ns };
	int ret = xioctl(fd, EXANEST_DMA_IOC_WAIT, &w);

	if (!ret) {
		if (status)
			*status = w.status;
		if (bytes)
			*bytes = w.bytes_done;
	}
	return ret;
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static void *big_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Copy len bytes from src+so to dst+do through the engine and check every byte around it. */
static int one_copy(int fd, size_t len, size_t so, size_t doff, unsigned int seed, char *why,
		    size_t whylen)
{
	size_t total = len + 8192;
	uint8_t *src = big_alloc(total), *dst = big_alloc(total);
	uint32_t hs, hd;
	uint64_t cookie, bytes = 0;
	int st = -1, ret, ok = 0;

	if (!src || !dst) {
		snprintf(why, whylen, "mmap failed");
		goto out;
	}
	fill(src, total, seed);
	memset(dst, 0xa5, total);
	ret = reg(fd, src + so, len, EXANEST_DMA_ACCESS_READ, &hs);
	if (ret) {
		snprintf(why, whylen, "reg src: %s", strerror(-ret));
		goto out;
	}
	ret = reg(fd, dst + doff, len, EXANEST_DMA_ACCESS_WRITE, &hd);
	if (ret) {
		snprintf(why, whylen, "reg dst: %s", strerror(-ret));
		dereg(fd, hs);
		goto out;
	}
	ret = copy(fd, src + so, dst + doff, len, &cookie);
	if (!ret)
		ret = wait_cookie(fd, cookie, 10000000000ll, &st, &bytes);
	if (ret || st || bytes != len) {
		snprintf(why, whylen, "copy/wait %d status %d bytes %" PRIu64, ret, st, bytes);
	} else if (memcmp(src + so, dst + doff, len)) {
		snprintf(why, whylen, "data differs");
	} else {
		ok = 1;
		for (size_t i = 0; i < doff && ok; i++)
			ok = dst[i] == 0xa5;
		for (size_t i = doff + len; i < total && ok; i++)
			ok = dst[i] == 0xa5;
		if (!ok)
			snprintf(why, whylen, "wrote outside the destination");
	}
	if (dereg(fd, hs) || dereg(fd, hd)) {
		snprintf(why, whylen, "dereg failed");
		ok = 0;
	}
out:
	if (src)
		munmap(src, total);
	if (dst)
		munmap(dst, total);
	return ok;
}

static void t_copy(void)
{
	static const size_t sizes[] = { 1, 3, 64, 4095, 4096, 4097, 65537, (1 << 20) + 5,
					16 << 20, 64 << 20 };
	static const size_t offs[][2] = { { 0, 0 }, { 1, 7 }, { 4093, 5 } };
	int fd = dev_open(0);
	char why[200], name[64];
	int ok = 1;

	result(fd >= 0, "open", "%s", strerror(errno));
	if (fd < 0)
		return;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (size_t j = 0; j < 3; j++) {
			if (sizes[i] >= (16 << 20) && j == 1)
				continue;
			why[0] = 0;
			ok = one_copy(fd, sizes[i], offs[j][0], offs[j][1], i * 3 + j, why, sizeof(why));
			snprintf(name, sizeof(name), "copy-%zu-off%zu-%zu", sizes[i], offs[j][0], offs[j][1]);
			result(ok, name, "%s", why);
		}
	}
	/* Source and destination in one page, registered as two regions sharing it. */
	{
		uint8_t *page = big_alloc(4096);
		uint32_t h1, h2;
		uint64_t cookie;
		int st = -1;

		fill(page, 2048, 99);
		ok = page && !reg(fd, page, 2048, EXANEST_DMA_ACCESS_READ, &h1) &&
		     !reg(fd, page + 2048, 2048, EXANEST_DMA_ACCESS_WRITE, &h2) &&
		     !copy(fd, page, page + 2048, 2048, &cookie) &&
		     !wait_cookie(fd, cookie, -1, &st, NULL) && st == 0 &&
		     !memcmp(page, page + 2048, 2048);
		result(ok, "copy-shared-page", "status %d", st);
		dereg(fd, h1);
		dereg(fd, h2);
	}
	{
		struct exanest_dma_counters c;

		ok = !xioctl(fd, EXANEST_DMA_IOC_COUNTERS, &c);
		printf("counters: copies %llu errors %llu bytes %llu regions %llu pinned %llu\n",
		       (unsigned long long)c.copies, (unsigned long long)c.copy_errors,
		       (unsigned long long)c.bytes, (unsigned long long)c.regions,
		       (unsigned long long)c.pages_pinned);
		result(ok && c.copies >= 26 && c.copy_errors == 0 && c.regions == 0 &&
		       c.pages_pinned == 0, "counters", "copies %llu regions %llu pinned %llu",
		       (unsigned long long)c.copies, (unsigned long long)c.regions,
		       (unsigned long long)c.pages_pinned);
	}
	close(fd);
}

static void t_channels(void)
{
	/* Long copies (8 MiB, about 4 ms each, more when sharing the data path), submitted back to
	 * back without printing: the first four find the four channels free. */
	enum { N = 16, LEN = 8 << 20 };
	int fd = dev_open(0);
	struct exanest_dma_info info;
	uint8_t *src = big_alloc(N * LEN), *dst = big_alloc(N * LEN);
	uint64_t cookies[N];
	uint32_t hs, hd;
	int ok = fd >= 0 && src && dst, used[16] = { 0 };

	if (ok)
		ok = !xioctl(fd, EXANEST_DMA_IOC_INFO, &info) && info.channels >= 4;
	fill(src, (size_t)N * LEN, 5);
	ok = ok && !reg(fd, src, (uint64_t)N * LEN, EXANEST_DMA_ACCESS_READ, &hs) &&
	     !reg(fd, dst, (uint64_t)N * LEN, EXANEST_DMA_ACCESS_WRITE, &hd);
	for (int i = 0; ok && i < N; i++) {
		struct exanest_dma_copy c = { .src = (uintptr_t)(src + i * LEN),
					      .dst = (uintptr_t)(dst + i * LEN), .length = LEN };

		ok = !xioctl(fd, EXANEST_DMA_IOC_COPY, &c);
		cookies[i] = c.cookie;
		if (c.channel < 16)
			used[c.channel] = 1;
	}
	for (int i = 0; ok && i < N; i++) {
		int st = -1;

		ok = !wait_cookie(fd, cookies[i], 10000000000ll, &st, NULL) && st == 0;
	}
	ok = ok && !memcmp(src, dst, (size_t)N * LEN);
	result(ok, "all-channels-copies", NULL);
	ok = 1;
	for (unsigned int c = 0; c < 4 && c < 16; c++)
		ok &= used[c];
	result(ok, "all-channels-used", "channels started directly: %d%d%d%d", used[0], used[1],
	       used[2], used[3]);
	close(fd);
}

#define EXPECT(name, expr, want)                                                          \
	do {                                                                              \
		int got_ = (expr);                                                        \
		result(got_ == -(want), name, "got %d (%s), want %s", got_,               \
		       got_ ? strerror(-got_) : "success", strerror(want));                \
	} while (0)

static void t_errors(void)
{
	int fd = dev_open(0), fd2;
	uint8_t *buf = big_alloc(64 << 20), *ro, *big;
	uint32_t hr, hw, handles[80];
	uint64_t cookie;
	struct exanest_dma_reg r;
	struct exanest_dma_copy c;
	struct exanest_dma_wait w;
	struct exanest_dma_dereg d;
	const size_t H = 32 << 20;
	int n;

	if (fd < 0 || !buf) {
		result(0, "errors-setup", "%s", strerror(errno));
		return;
	}
	memset(buf, 1, 64 << 20);
	fd2 = dev_open(0);
	result(fd2 < 0 && errno == EBUSY, "second-open-ebusy", "fd %d errno %d", fd2, errno);
	if (fd2 >= 0)
		close(fd2);

	EXPECT("reg-zero-length", reg(fd, buf, 0, EXANEST_DMA_ACCESS_READ, NULL), EINVAL);
	EXPECT("reg-overflow", reg(fd, (void *)(uintptr_t)UINT64_MAX, 2, EXANEST_DMA_ACCESS_READ, NULL), EOVERFLOW);
	EXPECT("reg-above-aperture", reg(fd, (void *)(1ull << 48), 4096, EXANEST_DMA_ACCESS_READ, NULL), EFAULT);
	EXPECT("reg-no-access", reg(fd, buf, 4096, 0, NULL), EINVAL);
	EXPECT("reg-unknown-access", reg(fd, buf, 4096, 4, NULL), EINVAL);
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = 1, .flags = 2 };
	EXPECT("reg-unknown-flag", xioctl(fd, EXANEST_DMA_IOC_REG, &r), EINVAL);
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = 1, .reserved = 1 };
	EXPECT("reg-reserved", xioctl(fd, EXANEST_DMA_IOC_REG, &r), EINVAL);
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = 1, .mode = 7 };
	EXPECT("reg-bad-mode", xioctl(fd, EXANEST_DMA_IOC_REG, &r), EINVAL);
	big = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT("reg-prot-none", reg(fd, big, 8192, EXANEST_DMA_ACCESS_READ, NULL), EFAULT);
	munmap(big, 8192);
	EXPECT("reg-unmapped", reg(fd, big, 8192, EXANEST_DMA_ACCESS_READ, NULL), EFAULT);
	ro = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	EXPECT("reg-readonly-for-write", reg(fd, ro, 8192, EXANEST_DMA_ACCESS_WRITE, NULL), EFAULT);
	EXPECT("reg-readonly-for-read", reg(fd, ro, 8192, EXANEST_DMA_ACCESS_READ, &hr), 0);
	dereg(fd, hr);
	EXPECT("reg-bad-pointer", xioctl(fd, EXANEST_DMA_IOC_REG, (void *)16), EFAULT);

	EXPECT("dereg-unknown", dereg(fd, 12345), ENOENT);
	EXPECT("dereg-zero", dereg(fd, 0), ENOENT);
	d = (struct exanest_dma_dereg){ .handle = 1, .flags = 2 };
	EXPECT("dereg-flags", xioctl(fd, EXANEST_DMA_IOC_DEREG, &d), EINVAL);

	EXPECT("reg-src", reg(fd, buf, H, EXANEST_DMA_ACCESS_READ, &hr), 0);
	EXPECT("reg-dst", reg(fd, buf + H, H, EXANEST_DMA_ACCESS_WRITE, &hw), 0);
	EXPECT("copy-zero-length", copy(fd, buf, buf + H, 0, NULL), EINVAL);
	EXPECT("copy-too-big", copy(fd, buf, buf + H, (1ull << 30) + 1, NULL), E2BIG);
	EXPECT("copy-overflow", copy(fd, (void *)(uintptr_t)(UINT64_MAX - 8), buf, 64, NULL), EOVERFLOW);
	EXPECT("copy-src-unregistered", copy(fd, buf + 2 * H, buf + H, 64, NULL), EFAULT);
	EXPECT("copy-src-past-region", copy(fd, buf + H - 32, buf + H + 4096, 64, NULL), EFAULT);
	EXPECT("copy-dst-not-writable", copy(fd, buf, buf + 4096, 64, NULL), EACCES);
	EXPECT("copy-src-not-readable", copy(fd, buf + H, buf + H + 4096, 64, NULL), EACCES);
	EXPECT("copy-overlap", copy(fd, buf, buf + 32, 64, NULL), EINVAL);
	c = (struct exanest_dma_copy){ .src = (uintptr_t)buf, .dst = (uintptr_t)(buf + H), .length = 64, .flags = 8 };
	EXPECT("copy-unknown-flag", xioctl(fd, EXANEST_DMA_IOC_COPY, &c), EINVAL);

	/* A copy in flight holds its regions. */
	/* Nothing printed in between: a console write can take longer than a copy. */
	n = copy(fd, buf, buf + H, H, &cookie);
	r.flags = dereg(fd, hr);
	EXPECT("copy-ok", n, 0);
	EXPECT("dereg-busy", (int)r.flags, EBUSY);
	w = (struct exanest_dma_wait){ .cookie = cookie, .flags = 1 };
	EXPECT("wait-flags", xioctl(fd, EXANEST_DMA_IOC_WAIT, &w), EINVAL);
	EXPECT("wait-done", wait_cookie(fd, cookie, -1, NULL, NULL), 0);
	EXPECT("wait-twice", wait_cookie(fd, cookie, -1, NULL, NULL), ENOENT);
	EXPECT("wait-unknown", wait_cookie(fd, 999999, 0, NULL, NULL), ENOENT);
	EXPECT("wait-zero-cookie", wait_cookie(fd, 0, 0, NULL, NULL), ENOENT);

	/* Too many copies known at once: the 65th gets EAGAIN. */
	for (n = 0; n < 80; n++)
		if (copy(fd, buf, buf + H, 64, &cookie))
			break;
	result(n == 64 && copy(fd, buf, buf + H, 64, NULL) == -EAGAIN, "too-many-inflight-eagain",
	       "accepted %d", n);
	for (uint64_t k = cookie - n + 1; k <= cookie; k++)
		wait_cookie(fd, k, -1, NULL, NULL);

	EXPECT("dereg-src", dereg(fd, hr), 0);
	EXPECT("dereg-dst", dereg(fd, hw), 0);
	/* Too many regions: the 65th gets ENOSPC. */
	for (n = 0; n < 80; n++)
		if (reg(fd, buf + n * 64, 64, EXANEST_DMA_ACCESS_READ, &handles[n]))
			break;
	result(n == 64 && reg(fd, buf, 64, EXANEST_DMA_ACCESS_READ, NULL) == -ENOSPC,
	       "too-many-regions-enospc", "accepted %d", n);
	for (int i = 0; i < n; i++)
		dereg(fd, handles[i]);

	EXPECT("unknown-ioctl", xioctl(fd, _IO(EXANEST_DMA_IOC_MAGIC, 0x7f), NULL), ENOTTY);
	{
		struct exanest_dma_counters cnt;

		xioctl(fd, EXANEST_DMA_IOC_COUNTERS, &cnt);
		result(cnt.regions == 0 && cnt.pages_pinned == 0, "errors-leave-nothing-pinned",
		       "regions %llu pinned %llu", (unsigned long long)cnt.regions,
		       (unsigned long long)cnt.pages_pinned);
	}
	close(fd);
	fd = dev_open(0);
	result(fd >= 0, "reopen-after-close", "%s", strerror(errno));
	close(fd);
}

/* Run in a child: copy through instance inst, report 0 on success. */
static int copier(int inst, unsigned int seed)
{
	char why[200];
	int fd = dev_open(inst), ok = 1;

	if (fd < 0)
		return 2;
	for (int i = 0; i < 8 && ok; i++)
		ok = one_copy(fd, (1 << 20) + i * 4099, i, 2 * i, seed + i, why, sizeof(why));
	close(fd);
	return ok ? 0 : 1;
}

static void t_twoproc(void)
{
	pid_t a, b;
	int sa = -1, sb = -1;

	a = fork();
	if (!a)
		_exit(copier(0, 100));
	b = fork();
	if (!b)
		_exit(copier(1, 200));
	waitpid(a, &sa, 0);
	waitpid(b, &sb, 0);
	result(WIFEXITED(sa) && !WEXITSTATUS(sa) && WIFEXITED(sb) && !WEXITSTATUS(sb),
	       "two-processes-two-instances", "status %#x %#x", sa, sb);
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return 0;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok;
}

static int start_big_copies(int fd, uint8_t **bufp, size_t len, int count)
{
	uint8_t *buf = big_alloc(2 * len);
	uint32_t hs, hd;
	int n = 0;

	*bufp = buf;
	if (!buf || reg(fd, buf, len, EXANEST_DMA_ACCESS_READ, &hs) ||
	    reg(fd, buf + len, len, EXANEST_DMA_ACCESS_WRITE, &hd))
		return -1;
	for (int i = 0; i < count; i++)
		n += !copy(fd, buf, buf + len, len, NULL);
	return n;
}

static void t_teardown(void)
{
	uint8_t *buf;
	int fd = dev_open(0), n, status = -1;
	pid_t pid;

	n = start_big_copies(fd, &buf, 32 << 20, 8);
	close(fd); /* 8 copies of 32 MiB queued or running */
	munmap(buf, 64 << 20);
	fd = dev_open(0);
	result(n == 8 && fd >= 0, "close-with-copies-in-flight", "started %d, reopen %d", n, fd);
	close(fd);

	pid = fork();
	if (!pid) {
		fd = dev_open(0);
		start_big_copies(fd, &buf, 32 << 20, 8);
		_exit(0); /* exit with the copies in flight */
	}
	waitpid(pid, &status, 0);
	fd = dev_open(0);
	result(fd >= 0, "exit-with-copies-in-flight", "reopen: %s", strerror(errno));

	/* Unbind with the file open and copies running, then bind again. */
	/* 64 copies of 16 MiB: about half a second of engine time, so the last is still queued. */
	n = start_big_copies(fd, &buf, 16 << 20, 64);
	{
		char bdfs[8][32];
		int nb = 0, ok = 1;
		DIR *d = opendir("/sys/bus/pci/drivers/exanest_dma");
		struct dirent *de;

		while (d && (de = readdir(d)) && nb < 8)
			if (!strncmp(de->d_name, "0000:", 5))
				snprintf(bdfs[nb++], sizeof(bdfs[0]), "%.31s", de->d_name);
		if (d)
			closedir(d);
		for (int i = 0; i < nb; i++)
			ok &= sysfs_write("/sys/bus/pci/drivers/exanest_dma/unbind", bdfs[i]);
		result(n > 0 && nb == 2 && ok, "unbind-with-open-file", "copies %d, devices %d", n, nb);
		EXPECT("ioctl-after-unbind", copy(fd, buf, buf + (16 << 20), 64, NULL), ENODEV);
		{
			/* The last of the copies, queued behind the others when the device went. */
			int st = 0, ret = wait_cookie(fd, n, 0, &st, NULL);

			/* The copies' results stay collectable: they ended with -ENODEV. */
			result(ret == 0 && st == -ENODEV, "wait-after-unbind-reports-enodev",
			       "wait %d status %d", ret, st);
		}
		close(fd);
		munmap(buf, 32 << 20);
		fd = dev_open(0);
		result(fd < 0 && errno == ENOENT, "no-device-while-unbound", "open: %s", strerror(errno));
		ok = 1;
		for (int i = 0; i < nb; i++)
			ok &= sysfs_write("/sys/bus/pci/drivers/exanest_dma/bind", bdfs[i]);
		result(nb == 2 && ok, "rebind", NULL);
	}
	{
		char why[200] = "";

		fd = dev_open(0);
		result(fd >= 0 && one_copy(fd, 123457, 3, 9, 7, why, sizeof(why)), "copy-after-rebind",
		       "fd %d %s", fd, why);
		close(fd);
	}
}

/* poll() wakes when a copy ends and reports it until it is collected. */
static void t_poll(void)
{
	enum { LEN = 16 << 20 };
	int fd = dev_open(0), st = -1, r0, r1, r2;
	uint8_t *buf = big_alloc(2 * LEN);
	uint32_t hs, hd;
	uint64_t cookie = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (fd < 0 || !buf || reg(fd, buf, LEN, EXANEST_DMA_ACCESS_READ, &hs) ||
	    reg(fd, buf + LEN, LEN, EXANEST_DMA_ACCESS_WRITE, &hd)) {
		result(0, "poll-setup", "%s", strerror(errno));
		return;
	}
	r0 = poll(&p, 1, 0);
	copy(fd, buf, buf + LEN, LEN, &cookie); /* about 8 ms of engine time */
	r1 = poll(&p, 1, 0);
	result(r0 == 0 && r1 == 0, "poll-idle-and-running-not-ready", "before %d running %d", r0, r1);
	p.revents = 0;
	r2 = poll(&p, 1, 5000);
	result(r2 == 1 && (p.revents & POLLIN), "poll-wakes-on-completion", "poll %d revents %#x", r2,
	       p.revents);
	wait_cookie(fd, cookie, 0, &st, NULL);
	r0 = poll(&p, 1, 0);
	result(st == 0 && r0 == 0, "poll-quiet-after-collect", "status %d poll %d", st, r0);
	close(fd);
	munmap(buf, 2 * LEN);
}

static struct exanest_dma_counters counters(int fd)
{
	struct exanest_dma_counters c = { 0 };

	xioctl(fd, EXANEST_DMA_IOC_COUNTERS, &c);
	return c;
}

/* Copy and wait; returns the copy's status (0 or -errno), or the ioctl error. */
static int copy_wait(int fd, const void *src, void *dst, uint64_t len)
{
	uint64_t cookie;
	int st = -1, ret = copy(fd, src, dst, len, &cookie);

	if (ret)
		return ret;
	ret = wait_cookie(fd, cookie, 20000000000ll, &st, NULL);
	return ret ? ret : st;
}

/* On-demand paging: nothing is pinned or mapped until the engine faults. */
static void t_odp(void)
{
	enum { LEN = 4 << 20 };
	int fd = dev_open(0), st;
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN), *ro, *none;
	uint32_t hs, hd, h;
	struct exanest_dma_counters c0, c1;

	if (fd < 0 || !src || !dst) {
		result(0, "odp-setup", "%s", strerror(errno));
		return;
	}
	/* Untouched source (reads as zero) and untouched destination. */
	EXPECT("odp-reg-src", reg_mode(fd, src, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &hs), 0);
	EXPECT("odp-reg-dst", reg_mode(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &hd), 0);
	c0 = counters(fd);
	result(c0.pages_mapped == 0 && c0.pages_pinned == 0, "odp-nothing-mapped-at-registration",
	       "mapped %llu pinned %llu", (unsigned long long)c0.pages_mapped,
	       (unsigned long long)c0.pages_pinned);
	memset(dst, 0x5a, 64); /* touch one page of the destination only */
	st = copy_wait(fd, src, dst, LEN);
	c1 = counters(fd);
	result(st == 0 && dst[0] == 0 && dst[LEN - 1] == 0 && !memcmp(dst, src, LEN),
	       "odp-untouched-source-reads-zero", "status %d", st);
	result(c1.faults > 0 && c1.faults_resolved == c1.faults && c1.pages_pinned == 0,
	       "odp-faults-resolved-nothing-pinned", "faults %llu resolved %llu pinned %llu",
	       (unsigned long long)c1.faults, (unsigned long long)c1.faults_resolved,
	       (unsigned long long)c1.pages_pinned);
	printf("odp: %llu engine faults resolved for %d MiB (%llu reported by the SMMU), %llu pages mapped, %llu by touch-ahead\n",
	       (unsigned long long)c1.faults_resolved, LEN >> 20,
	       (unsigned long long)c1.iommu_faults, (unsigned long long)c1.pages_mapped,
	       (unsigned long long)c1.touch_ahead_pages);
	/* The patched arm-smmu-v3 hands every translation fault to the driver's handler. */
	result(c1.iommu_faults > 0, "odp-smmu-reports-faults-to-handler", "iommu faults %llu",
	       (unsigned long long)c1.iommu_faults);
	result(c1.pages_resolved == c1.pages_mapped && c1.touch_ahead_pages > 0,
	       "odp-touch-ahead-maps-ahead", "resolved %llu mapped %llu touch-ahead %llu",
	       (unsigned long long)c1.pages_resolved, (unsigned long long)c1.pages_mapped,
	       (unsigned long long)c1.touch_ahead_pages);

	/* Statistics: the latency histogram, per-region counters, debugfs. */
	{
		struct exanest_dma_latency lat;
		struct exanest_dma_region_stats rs = { .handle = hd };
		uint64_t total = 0;
		char text[4096] = "";
		int dfd = open("/sys/kernel/debug/exanest-dma0/stats", O_RDONLY);
		ssize_t n = dfd >= 0 ? read(dfd, text, sizeof(text) - 1) : -1;

		if (n > 0)
			text[n] = 0;
		if (dfd >= 0)
			close(dfd);
		EXPECT("latency-ioctl", xioctl(fd, EXANEST_DMA_IOC_LATENCY, &lat), 0);
		for (int i = 0; i < EXANEST_DMA_LATENCY_BUCKETS; i++)
			total += lat.total[i];
		result(total == c1.faults_resolved + c1.nacks, "latency-histogram-counts-every-fault",
		       "histogram %llu, resolved %llu + nacks %llu", (unsigned long long)total,
		       (unsigned long long)c1.faults_resolved, (unsigned long long)c1.nacks);
		EXPECT("region-stats-ioctl", xioctl(fd, EXANEST_DMA_IOC_REGION_STATS, &rs), 0);
		result(rs.mode == EXANEST_DMA_MODE_ON_DEMAND && rs.faults > 0 && rs.pages_resolved >= LEN >> 12,
		       "region-stats-counts-faults", "mode %u faults %llu pages %llu", rs.mode,
		       (unsigned long long)rs.faults, (unsigned long long)rs.pages_resolved);
		rs.handle = 4242;
		EXPECT("region-stats-unknown-handle", xioctl(fd, EXANEST_DMA_IOC_REGION_STATS, &rs), ENOENT);
		result(strstr(text, "mode on-demand") && strstr(text, "resolve-latency-us p50 <"),
		       "debugfs-stats", "read %zd: %.200s", n, text);
		printf("debugfs exanest-dma0/stats:\n%s", text);
	}

	/* Source written by the CPU now: the DMA must see the new data (the zero page that was
	 * mapped is replaced: the CPU's write faults, the notifier unmaps it). */
	fill(src, LEN, 77);
	st = copy_wait(fd, src, dst, LEN);
	result(st == 0 && !memcmp(dst, src, LEN), "odp-sees-cpu-writes", "status %d", st);
	result(counters(fd).invalidations > c1.invalidations, "odp-cow-invalidates", NULL);

	/* madvise(DONTNEED) on the destination: unmapped, then refaulted by the next DMA. */
	madvise(dst, LEN, MADV_DONTNEED);
	result(dst[100] == 0, "odp-dontneed-zeroes", NULL);
	c0 = counters(fd);
	st = copy_wait(fd, src, dst, LEN);
	c1 = counters(fd);
	result(st == 0 && !memcmp(dst, src, LEN) && c1.faults > c0.faults, "odp-dontneed-refaults",
	       "status %d faults %llu -> %llu", st, (unsigned long long)c0.faults,
	       (unsigned long long)c1.faults);

	/* mprotect: a read-only destination gets a NACK with EACCES; writable again, it works. */
	mprotect(dst, LEN, PROT_READ);
	st = copy_wait(fd, src, dst, LEN);
	result(st == -EACCES, "odp-mprotect-readonly-eacces", "status %d", st);
	mprotect(dst, LEN, PROT_READ | PROT_WRITE);
	memset(dst, 0, LEN);
	st = copy_wait(fd, src, dst, LEN);
	result(st == 0 && !memcmp(dst, src, LEN), "odp-mprotect-restored", "status %d", st);
	dereg(fd, hs);
	dereg(fd, hd);

	/* A read-only mapping registered as destination: NACK, EACCES; the process goes on. */
	ro = mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg_mode(fd, src, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &hs);
	EXPECT("odp-reg-readonly-dst", reg_mode(fd, ro, 1 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &h), 0);
	st = copy_wait(fd, src, ro, 1 << 20);
	result(st == -EACCES, "odp-readonly-dst-nack-eacces", "status %d", st);
	dereg(fd, h);
	/* PROT_NONE source: EACCES. */
	none = mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg_mode(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &hd);
	EXPECT("odp-reg-prot-none", reg_mode(fd, none, 1 << 20, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &h), 0);
	st = copy_wait(fd, none, dst, 1 << 20);
	result(st == -EACCES, "odp-prot-none-nack-eacces", "status %d", st);
	dereg(fd, h);
	/* Unmapped after registration: EFAULT. */
	EXPECT("odp-reg-then-unmap", reg_mode(fd, none, 1 << 20, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &h), 0);
	munmap(none, 1 << 20);
	st = copy_wait(fd, none, dst, 1 << 20);
	result(st == -EFAULT, "odp-unmapped-nack-efault", "status %d", st);
	dereg(fd, h);
	/* The session still works after the NACKs. */
	st = copy_wait(fd, src, dst, LEN);
	result(st == 0 && !memcmp(dst, src, LEN), "odp-works-after-nacks", "status %d", st);
	dereg(fd, hs);
	dereg(fd, hd);

	/* Prefault: mapped at registration, not pinned; the copy takes no fault. */
	{
		uint8_t *p = big_alloc(LEN), *q = big_alloc(LEN);

		fill(p, LEN, 5);
		EXPECT("prefault-reg-src", reg_mode(fd, p, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_PREFAULT, &hs), 0);
		EXPECT("prefault-reg-dst", reg_mode(fd, q, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_PREFAULT, &hd), 0);
		c0 = counters(fd);
		st = copy_wait(fd, p, q, LEN);
		c1 = counters(fd);
		result(st == 0 && !memcmp(p, q, LEN) && c1.faults == c0.faults &&
		       c0.pages_mapped >= 2 * (LEN >> 12) && c0.pages_pinned == 0,
		       "prefault-no-faults-no-pins", "status %d faults %llu -> %llu mapped %llu pinned %llu",
		       st, (unsigned long long)c0.faults, (unsigned long long)c1.faults,
		       (unsigned long long)c0.pages_mapped, (unsigned long long)c0.pages_pinned);
		dereg(fd, hs);
		dereg(fd, hd);
	}
	close(fd);
}

static int reg_window(int fd, const void *addr, uint64_t len, uint32_t access, uint32_t window,
		      uint32_t *handle)
{
	struct exanest_dma_reg r = { .addr = (uintptr_t)addr, .length = len, .access = access,
				     .mode = EXANEST_DMA_MODE_ON_DEMAND,
				     .flags = EXANEST_DMA_REG_WINDOW, .touch_ahead = window };
	int ret = xioctl(fd, EXANEST_DMA_IOC_REG, &r);

	if (!ret && handle)
		*handle = r.handle;
	return ret;
}

static int advise(int fd, const void *addr, uint64_t len, uint32_t flags)
{
	struct exanest_dma_advise a = { .addr = (uintptr_t)addr, .length = len, .flags = flags };

	return xioctl(fd, EXANEST_DMA_IOC_ADVISE, &a);
}

/* Touch-ahead per region, and advise (prefetch). */
static void t_window(void)
{
	enum { LEN = 4 << 20 };
	int fd = dev_open(0), st;
	uint64_t f[3];
	uint32_t window[3] = { 0, 16, 256 }, hs, hd;

	for (int i = 0; i < 3; i++) {
		uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
		struct exanest_dma_counters c0, c1;

		fill(src, LEN, i);
		reg_window(fd, src, LEN, EXANEST_DMA_ACCESS_READ, window[i], &hs);
		reg_window(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, window[i], &hd);
		c0 = counters(fd);
		st = copy_wait(fd, src, dst, LEN);
		c1 = counters(fd);
		f[i] = c1.faults - c0.faults;
		printf("touch-ahead %u pages: %llu faults for 2 x %d MiB\n", window[i],
		       (unsigned long long)f[i], LEN >> 20);
		result(st == 0 && !memcmp(src, dst, LEN), "window-copy", "window %u status %d",
		       window[i], st);
		dereg(fd, hs);
		dereg(fd, hd);
		munmap(src, LEN);
		munmap(dst, LEN);
	}
	/* Window 0: one fault per page (src and dst); a larger window: fewer. */
	result(f[0] >= 2 * (LEN >> 12) && f[1] * 8 < f[0] && f[2] < f[1], "window-fewer-faults",
	       "faults %llu %llu %llu", (unsigned long long)f[0], (unsigned long long)f[1],
	       (unsigned long long)f[2]);
	{
		struct exanest_dma_reg r = { .addr = 0x10000, .length = 4096, .access = 1,
					     .mode = EXANEST_DMA_MODE_ON_DEMAND,
					     .flags = EXANEST_DMA_REG_WINDOW,
					     .touch_ahead = EXANEST_DMA_MAX_WINDOW + 1 };

		EXPECT("reg-window-too-big", xioctl(fd, EXANEST_DMA_IOC_REG, &r), EINVAL);
		r.flags = 0;
		r.touch_ahead = 3;
		EXPECT("reg-window-without-flag", xioctl(fd, EXANEST_DMA_IOC_REG, &r), EINVAL);
	}
	/* Advise: map ahead, then the copy takes no fault. */
	{
		uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN), *pinned = big_alloc(4096);
		struct exanest_dma_counters c0, c1;
		uint32_t hp;

		fill(src, LEN, 99);
		reg_mode(fd, src, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &hs);
		reg_mode(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &hd);
		EXPECT("advise-src", advise(fd, src, LEN, 0), 0);
		EXPECT("advise-dst-write", advise(fd, dst, LEN, EXANEST_DMA_ADVISE_WRITE), 0);
		c0 = counters(fd);
		st = copy_wait(fd, src, dst, LEN);
		c1 = counters(fd);
		result(st == 0 && !memcmp(src, dst, LEN) && c1.faults == c0.faults && c1.pages_pinned == 0,
		       "advise-then-no-faults", "status %d faults %llu -> %llu", st,
		       (unsigned long long)c0.faults, (unsigned long long)c1.faults);
		EXPECT("advise-write-on-read-region", advise(fd, src, 4096, EXANEST_DMA_ADVISE_WRITE), EACCES);
		EXPECT("advise-outside-regions", advise(fd, src + LEN, 4096, 0), EFAULT);
		EXPECT("advise-bad-flags", advise(fd, src, 4096, 8), EINVAL);
		EXPECT("advise-zero-length", advise(fd, src, 0, 0), EINVAL);
		reg(fd, pinned, 4096, EXANEST_DMA_ACCESS_READ, &hp);
		EXPECT("advise-pinned-noop", advise(fd, pinned, 4096, 0), 0);
		dereg(fd, hp);
		dereg(fd, hs);
		dereg(fd, hd);
	}
	close(fd);
}

static void *unmapper(void *arg)
{
	usleep(500);
	munmap(arg, 64 << 20);
	return NULL;
}

/* More of the on-demand matrix: file mappings, THP, swap, all channels, races, exit. */
static void t_odp_more(void)
{
	enum { LEN = 8 << 20 };
	int fd = dev_open(0), st, ok;
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd, h1, h2;
	char path[] = "/tmp/exanest-odp-XXXXXX";
	int file;

	fill(src, LEN, 21);
	reg_mode(fd, src, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &hs);
	reg_mode(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &hd);

	/* File-backed: a private mapping as source, a shared one as destination (the data must
	 * reach the file). */
	file = mkstemp(path);
	if (file < 0 || ftruncate(file, 1 << 20)) {
		result(0, "odp-file-setup", "%s", strerror(errno));
	} else {
		uint8_t *priv, *shared, *check = malloc(1 << 20);

		if (pwrite(file, src, 1 << 20, 0) != 1 << 20)
			perror("pwrite");
		priv = mmap(NULL, 1 << 20, PROT_READ, MAP_PRIVATE, file, 0);
		reg_mode(fd, priv, 1 << 20, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &h1);
		st = copy_wait(fd, priv, dst, 1 << 20);
		result(st == 0 && !memcmp(dst, src, 1 << 20), "odp-file-private-source", "status %d", st);
		dereg(fd, h1);
		shared = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
		reg_mode(fd, shared, 1 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &h2);
		st = copy_wait(fd, src + (1 << 20), shared, 1 << 20);
		ok = st == 0 && pread(file, check, 1 << 20, 0) == 1 << 20 &&
		     !memcmp(check, src + (1 << 20), 1 << 20);
		result(ok, "odp-file-shared-destination-reaches-file", "status %d", st);
		dereg(fd, h2);
		munmap(priv, 1 << 20);
		munmap(shared, 1 << 20);
		close(file);
		unlink(path);
		free(check);
	}

	/* A transparent huge page region as destination. */
	{
		uint8_t *raw = big_alloc(8 << 20), *thp = (uint8_t *)(((uintptr_t)raw + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));

		madvise(thp, 4 << 20, MADV_HUGEPAGE);
		thp[0] = 1; /* fault in as huge pages */
		thp[2 << 20] = 1;
		reg_mode(fd, thp, 4 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &h1);
		st = copy_wait(fd, src, thp, 4 << 20);
		result(st == 0 && !memcmp(thp, src, 4 << 20), "odp-thp-destination", "status %d", st);
		/* Split the huge page under the mapping: the next DMA must still land right. */
		madvise(thp + 4096, 4096, MADV_DONTNEED);
		st = copy_wait(fd, src + (4 << 20), thp, 4 << 20);
		result(st == 0 && !memcmp(thp, src + (4 << 20), 4 << 20), "odp-thp-split-then-dma",
		       "status %d", st);
		dereg(fd, h1);
		munmap(raw, 8 << 20);
	}

	/* THP mapped as 2 MiB IOMMU blocks: advise maps whole huge pages; a split unmaps them. */
	{
		uint8_t *raw = big_alloc(8 << 20), *thp = (uint8_t *)(((uintptr_t)raw + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));
		struct exanest_dma_counters c0, c1, c2;

		madvise(thp, 4 << 20, MADV_HUGEPAGE);
		memset(thp, 1, 4 << 20); /* two huge pages, writable */
		reg_mode(fd, thp, 4 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &h1);
		c0 = counters(fd);
		EXPECT("odp-thp-advise", advise(fd, thp, 4 << 20, EXANEST_DMA_ADVISE_WRITE), 0);
		c1 = counters(fd);
		st = copy_wait(fd, src, thp, 4 << 20);
		c2 = counters(fd);
		result(st == 0 && !memcmp(thp, src, 4 << 20) && c1.huge_mappings >= c0.huge_mappings + 2 &&
		       c2.faults == c1.faults, "odp-thp-iommu-blocks",
		       "status %d blocks %llu -> %llu faults %llu -> %llu", st,
		       (unsigned long long)c0.huge_mappings, (unsigned long long)c1.huge_mappings,
		       (unsigned long long)c1.faults, (unsigned long long)c2.faults);
		madvise(thp + (1 << 20), 4096, MADV_DONTNEED); /* split the first huge page */
		st = copy_wait(fd, src + (4 << 20), thp, 4 << 20);
		result(st == 0 && !memcmp(thp, src + (4 << 20), 4 << 20), "odp-thp-block-split-then-dma",
		       "status %d", st);
		dereg(fd, h1);
		munmap(raw, 8 << 20);
	}

	/* Compaction (page migration) after the pages are mapped: the next DMA must follow. */
	{
		int cfd = open("/proc/sys/vm/compact_memory", O_WRONLY);
		struct exanest_dma_counters c0, c1;

		st = copy_wait(fd, src, dst, LEN);
		c0 = counters(fd);
		ok = cfd >= 0 && write(cfd, "1", 1) == 1;
		if (cfd >= 0)
			close(cfd);
		fill(src, LEN, 22);
		memset(dst, 0, LEN);
		st = copy_wait(fd, src, dst, LEN);
		c1 = counters(fd);
		result(ok && st == 0 && !memcmp(dst, src, LEN), "odp-compaction-then-dma",
		       "compact %d status %d invalidations %llu -> %llu", ok, st,
		       (unsigned long long)c0.invalidations, (unsigned long long)c1.invalidations);
	}

	/* THP collapse (MADV_COLLAPSE) of small pages the device has mapped. */
	{
		uint8_t *raw = big_alloc(4 << 20);
		uint8_t *al = (uint8_t *)(((uintptr_t)raw + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));
		struct exanest_dma_counters c0, c1;

		madvise(al, 2 << 20, MADV_NOHUGEPAGE);
		memset(al, 7, 2 << 20);
		madvise(al, 2 << 20, MADV_HUGEPAGE);
		reg_mode(fd, al, 2 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &h1);
		st = copy_wait(fd, src, al, 2 << 20);
		c0 = counters(fd);
		ok = !madvise(al, 2 << 20, 25 /* MADV_COLLAPSE */);
		c1 = counters(fd);
		memset(dst, 0, 4096);
		st = copy_wait(fd, src + (2 << 20), al, 2 << 20);
		result(st == 0 && !memcmp(al, src + (2 << 20), 2 << 20) &&
		       (!ok || c1.invalidations > c0.invalidations), "odp-thp-collapse-then-dma",
		       "collapse %d status %d invalidations %llu -> %llu", ok, st,
		       (unsigned long long)c0.invalidations, (unsigned long long)c1.invalidations);
		dereg(fd, h1);
		munmap(raw, 4 << 20);
	}

	/* Swap: page the source out to zram, then DMA from it. */
	{
		struct exanest_dma_counters c0 = counters(fd), c1;

		st = copy_wait(fd, src, dst, LEN); /* source mapped for the device */
		ok = !madvise(src, LEN, 21 /* MADV_PAGEOUT */);
		memset(dst, 0, LEN);
		st = copy_wait(fd, src, dst, LEN);
		c1 = counters(fd);
		result(ok && st == 0 && !memcmp(dst, src, LEN) && c1.invalidations > c0.invalidations,
		       "odp-swap-out-then-dma", "pageout %d status %d invalidations %llu -> %llu", ok,
		       st, (unsigned long long)c0.invalidations, (unsigned long long)c1.invalidations);
	}

	/* Many faults on all channels at once. */
	{
		uint64_t cookies[16];
		int n = 0;

		madvise(dst, LEN, MADV_DONTNEED);
		for (int i = 0; i < 16; i++)
			n += !copy(fd, src + i * (LEN / 16), dst + i * (LEN / 16), LEN / 16, &cookies[i]);
		ok = n == 16;
		for (int i = 0; i < 16 && ok; i++)
			ok = !wait_cookie(fd, cookies[i], 20000000000ll, &st, NULL) && st == 0;
		result(ok && !memcmp(dst, src, LEN), "odp-faults-on-all-channels", "submitted %d", n);
	}
	dereg(fd, hs);
	dereg(fd, hd);

	/* munmap from another thread while the copy runs: NACK or done, never an oops. */
	{
		uint8_t *victim = big_alloc(64 << 20), *from = big_alloc(64 << 20);
		pthread_t t;

		reg_mode(fd, from, 64 << 20, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &h1);
		reg_mode(fd, victim, 64 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &h2);
		pthread_create(&t, NULL, unmapper, victim);
		st = copy_wait(fd, from, victim, 64 << 20);
		pthread_join(t, NULL);
		result(st == 0 || st == -EFAULT, "odp-munmap-during-copy", "status %d", st);
		st = copy_wait(fd, from, from + (32 << 20), 4096);
		result(st == -EACCES, "odp-session-alive-after-munmap", "status %d", st);
		dereg(fd, h1);
		dereg(fd, h2);
		munmap(from, 64 << 20);
	}
	close(fd);

	/* Exit with faults pending: the child leaves mid-copy; the engine is free again. */
	{
		pid_t pid = fork();
		int status = -1;

		if (!pid) {
			int cfd = dev_open(0);
			uint8_t *a = big_alloc(64 << 20), *b = big_alloc(64 << 20);

			reg_mode(cfd, a, 64 << 20, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, NULL);
			reg_mode(cfd, b, 64 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, NULL);
			for (int i = 0; i < 8; i++)
				copy(cfd, a + i * (8 << 20), b + i * (8 << 20), 8 << 20, NULL);
			_exit(0);
		}
		waitpid(pid, &status, 0);
		fd = dev_open(0);
		result(fd >= 0, "odp-exit-with-faults-pending", "reopen: %s", strerror(errno));
		close(fd);
	}
}

/* Two processes on two instances, at the same virtual address: each engine sees only its
 * own process's memory. */
static void t_isolation(void)
{
	void *want = (void *)0x7e0000000000ull;
	pid_t pids[2];
	int status[2];

	for (int p = 0; p < 2; p++) {
		pids[p] = fork();
		if (!pids[p]) {
			int fd = dev_open(p), st;
			uint8_t *a = mmap(want, 1 << 20, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			uint8_t *b = big_alloc(1 << 20);

			if (fd < 0 || a != want || !b)
				_exit(2);
			memset(a, 'A' + p, 1 << 20);
			usleep(20000); /* both processes have their buffer at the same address now */
			reg_mode(fd, a, 1 << 20, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, NULL);
			reg_mode(fd, b, 1 << 20, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, NULL);
			for (int i = 0; i < 20; i++) {
				st = copy_wait(fd, a, b, 1 << 20);
				if (st || b[0] != 'A' + p || b[(1 << 20) - 1] != 'A' + p)
					_exit(1);
			}
			_exit(0);
		}
	}
	for (int p = 0; p < 2; p++)
		waitpid(pids[p], &status[p], 0);
	result(WIFEXITED(status[0]) && !WEXITSTATUS(status[0]) && WIFEXITED(status[1]) &&
	       !WEXITSTATUS(status[1]), "odp-two-processes-isolated", "status %#x %#x", status[0],
	       status[1]);
}

/* fork: parent and child write after fork; the DMA lands in the parent's copy only. */
static void t_fork(void)
{
	enum { LEN = 1 << 20 };
	int fd = dev_open(0), st = -1, status = -1;
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd;
	int pipefd[2];
	pid_t pid;
	char c;

	fill(src, LEN, 9);
	memset(dst, 1, LEN);
	reg_mode(fd, src, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &hs);
	reg_mode(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &hd);
	st = copy_wait(fd, src, dst, LEN); /* dst mapped for the device */
	if (pipe(pipefd))
		return;
	pid = fork();
	if (!pid) {
		/* Child: write its copy, wait for the parent's DMA, check it kept its own data. */
		memset(dst, 2, LEN);
		if (read(pipefd[0], &c, 1) != 1)
			_exit(3);
		for (int i = 0; i < LEN; i++)
			if (dst[i] != 2)
				_exit(1);
		_exit(0);
	}
	memset(dst, 3, LEN); /* parent writes after fork: COW, the device mapping must follow */
	fill(src, LEN, 10);
	st = copy_wait(fd, src, dst, LEN);
	if (write(pipefd[1], "x", 1) != 1)
		perror("write");
	waitpid(pid, &status, 0);
	result(st == 0 && !memcmp(src, dst, LEN), "fork-dma-lands-in-parent", "status %d", st);
	result(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork-child-copy-untouched",
	       "child status %#x", status);
	close(fd);
}

static void t_demo(void)
{
	enum { LEN = 1 << 20 };
	struct exanest_dma_info info;
	struct exanest_dma_counters c;
	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	uint32_t hs = 0, hd = 0;
	uint64_t cookie = 0, bytes = 0;
	struct timespec t0, t1;
	int fd = dev_open(0), st = -1, ok;

	if (fd < 0 || !src || !dst || xioctl(fd, EXANEST_DMA_IOC_INFO, &info)) {
		result(0, "demo-copy", "open /dev/exanest-dma0: %s", strerror(errno));
		return;
	}
	printf("/dev/exanest-dma0: ABI %u, engine %u.%u, %u channels, max transfer %llu bytes\n",
	       info.abi_version, info.hw_version >> 16, info.hw_version & 0xffff, info.channels,
	       (unsigned long long)info.max_transfer);
	fill(src, LEN, 42);
	memset(dst, 0, LEN);
	printf("src %p (malloc, 1 MiB, pattern), dst %p (malloc, zeroed)\n", (void *)src, (void *)dst);
	ok = !reg(fd, src, LEN, EXANEST_DMA_ACCESS_READ, &hs) &&
	     !reg(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, &hd);
	printf("registered (mode pin): src handle %u, dst handle %u\n", hs, hd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok = ok && !copy(fd, src, dst, LEN, &cookie) &&
	     !wait_cookie(fd, cookie, -1, &st, &bytes) && st == 0;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("copy cookie %llu: status %d, %llu bytes in %.1f us (engine DMA by virtual address, through the SMMU)\n",
	       (unsigned long long)cookie, st, (unsigned long long)bytes,
	       (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3);
	ok = ok && !memcmp(src, dst, LEN);
	printf("data %s\n", ok ? "verified: dst == src" : "DIFFERS");
	xioctl(fd, EXANEST_DMA_IOC_COUNTERS, &c);
	printf("counters: copies %llu, errors %llu, bytes %llu, regions %llu, pages mapped %llu, pages pinned %llu\n",
	       (unsigned long long)c.copies, (unsigned long long)c.copy_errors,
	       (unsigned long long)c.bytes, (unsigned long long)c.regions,
	       (unsigned long long)c.pages_mapped, (unsigned long long)c.pages_pinned);
	result(ok, "demo-copy", "status %d", st);
	dereg(fd, hs);
	dereg(fd, hd);

	/* On demand: the destination is a fresh malloc buffer nobody has touched. */
	{
		enum { N = 8 << 20 };
		uint8_t *s2 = malloc(N), *d2 = malloc(N); /* large: its own mmap, untouched */
		struct exanest_dma_counters c0 = counters(fd), c1;

		fill(s2, N, 43);
		printf("\non demand: src %p (8 MiB, pattern), dst %p (8 MiB malloc, never touched)\n",
		       (void *)s2, (void *)d2);
		ok = !reg_mode(fd, s2, N, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &hs) &&
		     !reg_mode(fd, d2, N, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &hd);
		c0 = counters(fd);
		printf("registered (mode on-demand): pages mapped %llu, pages pinned %llu\n",
		       (unsigned long long)c0.pages_mapped, (unsigned long long)c0.pages_pinned);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		st = copy_wait(fd, s2, d2, N);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		c1 = counters(fd);
		ok = ok && st == 0 && !memcmp(s2, d2, N);
		printf("copy: status %d in %.1f us; the engine faulted %llu times (%llu reported by the SMMU),\n"
		       "      %llu resolved on the process's mm and retransmitted, %llu pages mapped (%llu by touch-ahead), %llu pinned\n",
		       st, (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3,
		       (unsigned long long)(c1.faults - c0.faults),
		       (unsigned long long)(c1.iommu_faults - c0.iommu_faults),
		       (unsigned long long)(c1.faults_resolved - c0.faults_resolved),
		       (unsigned long long)c1.pages_mapped, (unsigned long long)c1.touch_ahead_pages,
		       (unsigned long long)c1.pages_pinned);
		printf("data %s\n", ok ? "verified: dst == src" : "DIFFERS");
		result(ok && c1.faults > c0.faults && c1.pages_pinned == 0, "demo-on-demand-copy",
		       "status %d", st);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "copy"))
		t_copy();
	else if (!strcmp(cmd, "channels"))
		t_channels();
	else if (!strcmp(cmd, "errors"))
		t_errors();
	else if (!strcmp(cmd, "twoproc"))
		t_twoproc();
	else if (!strcmp(cmd, "teardown"))
		t_teardown();
	else if (!strcmp(cmd, "demo"))
		t_demo();
	else if (!strcmp(cmd, "poll"))
		t_poll();
	else if (!strcmp(cmd, "odp"))
		t_odp();
	else if (!strcmp(cmd, "fork"))
		t_fork();
	else if (!strcmp(cmd, "odp-more"))
		t_odp_more();
	else if (!strcmp(cmd, "isolation"))
		t_isolation();
	else if (!strcmp(cmd, "window"))
		t_window();
	else {
		fprintf(stderr, "usage: %s copy|channels|errors|twoproc|teardown|poll|odp|odp-more|fork|isolation|window|demo\n", argv[0]);
		return 2;
	}
	return failures ? 1 : 0;
}
