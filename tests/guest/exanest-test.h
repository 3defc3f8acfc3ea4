/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shared by the guest end-to-end tests of the exanest_dma driver (exanest-sizes.c,
 * exanest-coherence.c, exanest-fork.c, exanest-errors.c, exanest-concurrency.c, and the ioctl
 * fuzzer exanest-fuzz.c): the raw ioctl helpers and the three memory modes every scenario runs
 * in.
 *
 * The tests are written on the kernel's kselftest harness (tools/testing/selftests/
 * kselftest_harness.h, taken from the pinned kernel source when the initramfs is built). Each
 * topic is one fixture with three variants, pin, prefault and on_demand; each test runs in its
 * own process, once per variant, and reports one TAP line "ok N fixture.variant.test" (or
 * "not ok", or "ok N ... # SKIP reason" where the scenario does not apply to the mode).
 */
#ifndef EXANEST_TEST_H
#define EXANEST_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/exanest_dma.h>

#include "kselftest_harness.h"

/*
 * What every mode does, written once; each topic's FIXTURE_VARIANT starts with these fields and
 * adds the expectations of its own scenarios.
 */
#define MODE_FIELDS							\
	uint32_t mode;		/* EXANEST_DMA_MODE_* */			\
	const char *name;	/* as debugfs prints it */			\
	bool pins;		/* registration pins the pages */		\
	bool maps_at_reg;	/* registration maps the pages */		\
	bool faults;		/* a first copy takes engine faults */		\
	bool notifier		/* an MMU notifier follows the mm */

#define PIN_MODE							\
	.mode = EXANEST_DMA_MODE_PIN, .name = "pin", .pins = true,		\
	.maps_at_reg = true, .faults = false, .notifier = false
#define PREFAULT_MODE							\
	.mode = EXANEST_DMA_MODE_PREFAULT, .name = "prefault", .pins = false,	\
	.maps_at_reg = true, .faults = false, .notifier = true
#define ON_DEMAND_MODE							\
	.mode = EXANEST_DMA_MODE_ON_DEMAND, .name = "on-demand", .pins = false,	\
	.maps_at_reg = false, .faults = true, .notifier = true

#define SEC 1000000000ll
#define MIB (1 << 20)
#define PAGES(len) ((uint64_t)(len) >> 12)
/* No EXANEST_DMA_REG_WINDOW: the region gets the driver's default touch-ahead. */
#define NO_WINDOW (-1)

static inline int dev_open(int inst)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/exanest-dma%d", inst);
	return open(path, O_RDWR | O_CLOEXEC);
}

/* ioctl returning 0 or -errno */
static inline int xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

/*
 * Register [addr, addr + len) in a mode; window >= 0 sets the touch-ahead window
 * (EXANEST_DMA_REG_WINDOW), NO_WINDOW leaves the default. Returns 0 or -errno.
 */
static inline int reg(int fd, const void *addr, uint64_t len, uint32_t access, uint32_t mode,
		      int64_t window, uint32_t *handle)
{
	struct exanest_dma_reg r = { .addr = (uintptr_t)addr, .length = len, .access = access,
				     .mode = mode };
	int ret;

	if (window >= 0) {
		r.flags = EXANEST_DMA_REG_WINDOW;
		r.touch_ahead = (uint32_t)window;
	}
	ret = xioctl(fd, EXANEST_DMA_IOC_REG, &r);
	if (!ret && handle)
		*handle = r.handle;
	return ret;
}

#define RD EXANEST_DMA_ACCESS_READ
#define WR EXANEST_DMA_ACCESS_WRITE

static inline int dereg(int fd, uint32_t handle)
{
	struct exanest_dma_dereg d = { .handle = handle };

	return xioctl(fd, EXANEST_DMA_IOC_DEREG, &d);
}

static inline int copy(int fd, const void *src, void *dst, uint64_t len, uint64_t *cookie)
{
	struct exanest_dma_copy c = { .src = (uintptr_t)src, .dst = (uintptr_t)dst, .length = len };
	int ret = xioctl(fd, EXANEST_DMA_IOC_COPY, &c);

	if (!ret && cookie)
		*cookie = c.cookie;
	return ret;
}

/* 0 and the copy's status in *status, or -errno of the wait itself */
static inline int wait_cookie(int fd, uint64_t cookie, int64_t timeout_ns, int *status,
			      uint64_t *bytes)
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

/* Copy and wait; returns the copy's status (0 or -errno), or the ioctl error. */
static inline int copy_wait(int fd, const void *src, void *dst, uint64_t len)
{
	uint64_t cookie;
	int st = -1, ret = copy(fd, src, dst, len, &cookie);

	if (ret)
		return ret;
	ret = wait_cookie(fd, cookie, 20 * SEC, &st, NULL);
	return ret ? ret : st;
}

static inline int advise(int fd, const void *addr, uint64_t len, uint32_t flags)
{
	struct exanest_dma_advise a = { .addr = (uintptr_t)addr, .length = len, .flags = flags };

	return xioctl(fd, EXANEST_DMA_IOC_ADVISE, &a);
}

static inline struct exanest_dma_counters counters(int fd)
{
	struct exanest_dma_counters c;

	memset(&c, 0xff, sizeof(c)); /* a failed ioctl shows as absurd counts */
	xioctl(fd, EXANEST_DMA_IOC_COUNTERS, &c);
	return c;
}

/* A pseudo-random pattern (xorshift64), eight bytes a step: the large buffers cost little. */
static inline void fill(uint8_t *p, size_t n, unsigned int seed)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull;
	size_t i = 0;

	for (; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (n - i >= 8)
			memcpy(p + i, &x, 8);
		else
			memcpy(p + i, &x, n - i);
	}
}

/* Anonymous private memory of its own mapping, untouched; NULL on failure. */
static inline uint8_t *big_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* n bytes aligned to 2 MiB inside a fresh mapping of n + 2 MiB (for transparent huge pages) */
static inline uint8_t *thp_alloc(size_t n)
{
	uint8_t *raw = big_alloc(n + (2 << 20));

	return raw ? (uint8_t *)(((uintptr_t)raw + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1))
		   : NULL;
}

/* Whether a device whose name holds @mark is bound to the driver whose sysfs directory is @drv. */
static inline bool driver_bound(const char *drv, const char *mark)
{
	DIR *d = opendir(drv);
	struct dirent *e;
	bool bound = false;

	if (!d)
		return false;
	while (!bound && (e = readdir(d)))
		bound = strstr(e->d_name, mark) != NULL;
	closedir(d);
	return bound;
}

static inline bool all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static inline int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return 0;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok;
}

/* Every topic's fixture: the test process owns instance 0 for the test. */
#define DEVICE_FIXTURE(f)						\
	FIXTURE(f) {							\
		int fd;							\
	};								\
	FIXTURE_SETUP(f)						\
	{								\
		self->fd = dev_open(0);					\
		ASSERT_LE(0, self->fd) TH_LOG("open /dev/exanest-dma0: %s", strerror(errno)); \
	}								\
	FIXTURE_TEARDOWN(f)						\
	{								\
		if (self->fd >= 0)					\
			close(self->fd);				\
	}

/* The engine's fault log (debugfs; Documentation/design.rst, "Fault timings"). */
#define FAULT_LOG "/sys/kernel/debug/exanest-dma0/faults"

/* Write `cmd` to the engine's fault log: 0, or -errno. */
static inline int fault_log_cmd(const char *cmd)
{
	int fd = open(FAULT_LOG, O_WRONLY), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd))
		ret = -errno;
	close(fd);
	return ret;
}

/* Give the instance back (a test that needs both instances, or a fresh open). */
#define RELEASE_DEVICE() do { close(self->fd); self->fd = -1; } while (0)

#endif /* EXANEST_TEST_H */
