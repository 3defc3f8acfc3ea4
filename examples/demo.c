// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-demo: the driver's raw ioctl ABI (include/uapi/linux/exanest_dma.h) in one program,
 * without the user library. It copies one malloc'd buffer to another by virtual address, first
 * with pinned memory, then on demand into a malloc'd buffer nobody has touched, and prints what
 * the driver did (the counters of EXANEST_DMA_IOC_COUNTERS). `make demo` runs it in the guest.
 *
 * Build (static, for the aarch64 guest):
 *   aarch64-linux-gnu-gcc -static -O2 -I include/uapi -o exanest-demo examples/demo.c
 * Exit status: 0 when both copies were verified, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <linux/exanest_dma.h>

/* Register [addr, addr + len) with an access mask and a mode; the handle, or 0 on failure. */
static uint32_t reg(int fd, const void *addr, uint64_t len, uint32_t access, uint32_t mode)
{
	struct exanest_dma_reg r = { .addr = (uintptr_t)addr, .length = len, .access = access,
				     .mode = mode };

	if (ioctl(fd, EXANEST_DMA_IOC_REG, &r)) {
		perror("EXANEST_DMA_IOC_REG");
		return 0;
	}
	return r.handle;
}

static void dereg(int fd, uint32_t handle)
{
	struct exanest_dma_dereg d = { .handle = handle };

	if (handle && ioctl(fd, EXANEST_DMA_IOC_DEREG, &d))
		perror("EXANEST_DMA_IOC_DEREG");
}

/* Copy and wait for it; the copy's status (0 or -errno), the time it took in *us. */
static int copy_wait(int fd, const void *src, void *dst, uint64_t len, uint64_t *cookie,
		     double *us)
{
	struct exanest_dma_copy c = { .src = (uintptr_t)src, .dst = (uintptr_t)dst, .length = len };
	struct exanest_dma_wait w = { .timeout_ns = -1 };
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (ioctl(fd, EXANEST_DMA_IOC_COPY, &c))
		return -errno;
	w.cookie = c.cookie;
	if (ioctl(fd, EXANEST_DMA_IOC_WAIT, &w))
		return -errno;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*cookie = c.cookie;
	*us = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
	return w.status;
}

static struct exanest_dma_counters counters(int fd)
{
	struct exanest_dma_counters c = { 0 };

	if (ioctl(fd, EXANEST_DMA_IOC_COUNTERS, &c))
		perror("EXANEST_DMA_IOC_COUNTERS");
	return c;
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

/* A pinned copy: 1 MiB from one malloc'd buffer to another. */
static int pinned(int fd)
{
	enum { LEN = 1 << 20 };
	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	struct exanest_dma_counters c;
	uint32_t hs, hd;
	uint64_t cookie = 0;
	double us = 0;
	int st = -1, ok;

	if (!src || !dst)
		return 0;
	fill(src, LEN, 42);
	memset(dst, 0, LEN);
	printf("src %p (malloc, 1 MiB, pattern), dst %p (malloc, zeroed)\n", (void *)src, (void *)dst);
	hs = reg(fd, src, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_PIN);
	hd = reg(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_PIN);
	printf("registered (mode pin): src handle %u, dst handle %u\n", hs, hd);
	ok = hs && hd;
	if (ok)
		st = copy_wait(fd, src, dst, LEN, &cookie, &us);
	printf("copy cookie %llu: status %d, %d bytes in %.1f us (engine DMA by virtual address, through the SMMU)\n",
	       (unsigned long long)cookie, st, LEN, us);
	ok = ok && st == 0 && !memcmp(src, dst, LEN);
	printf("data %s\n", ok ? "verified: dst == src" : "DIFFERS");
	c = counters(fd);
	printf("counters: copies %llu, errors %llu, bytes %llu, regions %llu, pages mapped %llu, pages pinned %llu\n",
	       (unsigned long long)c.copies, (unsigned long long)c.copy_errors,
	       (unsigned long long)c.bytes, (unsigned long long)c.regions,
	       (unsigned long long)c.pages_mapped, (unsigned long long)c.pages_pinned);
	dereg(fd, hs);
	dereg(fd, hd);
	free(src);
	free(dst);
	return ok;
}

/* On demand: 8 MiB into a fresh malloc buffer nobody has touched; the engine faults. */
static int on_demand(int fd)
{
	enum { LEN = 8 << 20 };
	uint8_t *src = malloc(LEN), *dst = malloc(LEN); /* large: their own mmap, untouched */
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;
	uint64_t cookie = 0;
	double us = 0;
	int st = -1, ok;

	if (!src || !dst)
		return 0;
	fill(src, LEN, 43);
	printf("\non demand: src %p (8 MiB, pattern), dst %p (8 MiB malloc, never touched)\n",
	       (void *)src, (void *)dst);
	hs = reg(fd, src, LEN, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND);
	hd = reg(fd, dst, LEN, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND);
	c0 = counters(fd);
	printf("registered (mode on-demand): pages mapped %llu, pages pinned %llu\n",
	       (unsigned long long)c0.pages_mapped, (unsigned long long)c0.pages_pinned);
	ok = hs && hd;
	if (ok)
		st = copy_wait(fd, src, dst, LEN, &cookie, &us);
	c1 = counters(fd);
	ok = ok && st == 0 && !memcmp(src, dst, LEN);
	/* The SMMU reports them too only with the module's smmu_fault_events=1. */
	printf("copy: status %d in %.1f us; the engine faulted %llu times", st, us,
	       (unsigned long long)(c1.faults - c0.faults));
	if (c1.iommu_faults != c0.iommu_faults)
		printf(" (%llu reported by the SMMU too)",
		       (unsigned long long)(c1.iommu_faults - c0.iommu_faults));
	printf(",\n      %llu resolved on the process's mm and retransmitted, %llu pages mapped (%llu by touch-ahead), %llu pinned\n",
	       (unsigned long long)(c1.faults_resolved - c0.faults_resolved),
	       (unsigned long long)c1.pages_mapped, (unsigned long long)c1.touch_ahead_pages,
	       (unsigned long long)c1.pages_pinned);
	printf("data %s\n", ok ? "verified: dst == src" : "DIFFERS");
	dereg(fd, hs);
	dereg(fd, hd);
	free(src);
	free(dst);
	return ok && c1.faults > c0.faults && c1.pages_pinned == 0;
}

int main(void)
{
	struct exanest_dma_info info;
	int fd = open("/dev/exanest-dma0", O_RDWR | O_CLOEXEC), ok;

	if (fd < 0 || ioctl(fd, EXANEST_DMA_IOC_INFO, &info)) {
		fprintf(stderr, "/dev/exanest-dma0: %s\n", strerror(errno));
		return 1;
	}
	printf("/dev/exanest-dma0: ABI %u, engine %u.%u, %u channels, max transfer %llu bytes\n",
	       info.abi_version, info.hw_version >> 16, info.hw_version & 0xffff, info.channels,
	       (unsigned long long)info.max_transfer);
	ok = pinned(fd);
	ok = on_demand(fd) && ok;
	close(fd);
	printf("demo: %s\n", ok ? "both copies verified" : "FAILED");
	return ok ? 0 : 1;
}
