// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-errors: every bad argument gets its documented errno (Documentation/abi.rst), in
 * every memory mode; memory the mode cannot use is refused at registration (pin, prefault) or
 * NACKed by the copy (on-demand), and the session goes on.
 */
#include <stdlib.h>

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "exanest-test.h"

DEVICE_FIXTURE(errors);

FIXTURE_VARIANT(errors) {
	MODE_FIELDS;
	int reg_prot_none;	/* REG of a PROT_NONE mapping */
	int reg_unmapped;	/* REG of an unmapped range */
	int reg_readonly_write;	/* REG for writing of a read-only mapping */
	int copy_after_munmap;	/* status of a copy from a region munmap'ed after REG */
	int reg_over_memlock;	/* REG of 1 MiB under a 64 KiB RLIMIT_MEMLOCK, no CAP_IPC_LOCK */
	int locked_kib;		/* VmLck after a 32 KiB REG */
};

FIXTURE_VARIANT_ADD(errors, pin) {
	PIN_MODE,
	.reg_prot_none = -EFAULT,
	.reg_unmapped = -EFAULT,
	.reg_readonly_write = -EFAULT,
	.copy_after_munmap = 0,		/* the pinned pages stay with the device */
	.reg_over_memlock = -ENOMEM,	/* pinned pages count against RLIMIT_MEMLOCK */
	.locked_kib = 32,
};

FIXTURE_VARIANT_ADD(errors, prefault) {
	PREFAULT_MODE,
	.reg_prot_none = -EACCES,
	.reg_unmapped = -EFAULT,
	.reg_readonly_write = -EACCES,
	.copy_after_munmap = -EFAULT,	/* the notifier unmapped them: the fault is NACKed */
	.reg_over_memlock = 0,		/* nothing pinned, nothing charged */
	.locked_kib = 0,
};

FIXTURE_VARIANT_ADD(errors, on_demand) {
	ON_DEMAND_MODE,
	.reg_prot_none = 0,		/* nothing is looked at before the engine faults */
	.reg_unmapped = 0,
	.reg_readonly_write = 0,
	.copy_after_munmap = -EFAULT,
	.reg_over_memlock = 0,
	.locked_kib = 0,
};

/* A second open of the engine gets a context of its own (EBUSY only once all are taken:
 * exanest-contexts). */
TEST_F(errors, second_open_gets_another_context)
{
	struct exanest_dma_info a = { 0 }, b = { 0 };
	int fd2 = dev_open(0);

	ASSERT_LE(0, fd2) TH_LOG("second open: %s", strerror(errno));
	EXPECT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_INFO, &a));
	EXPECT_EQ(0, xioctl(fd2, EXANEST_DMA_IOC_INFO, &b));
	EXPECT_NE(a.context, b.context);
	close(fd2);
}

TEST_F(errors, reopen_after_close)
{
	RELEASE_DEVICE();
	self->fd = dev_open(0);
	EXPECT_LE(0, self->fd) TH_LOG("reopen: %s", strerror(errno));
}

TEST_F(errors, reg_bad_arguments)
{
	uint8_t *buf = big_alloc(8192);
	struct exanest_dma_reg r;
	uint32_t m = variant->mode;
	int fd = self->fd;

	ASSERT_NE(NULL, buf);
	memset(buf, 1, 8192);
	EXPECT_EQ(-EINVAL, reg(fd, buf, 0, RD, m, NO_WINDOW, NULL));
	EXPECT_EQ(-EOVERFLOW, reg(fd, (void *)(uintptr_t)UINT64_MAX, 2, RD, m, NO_WINDOW, NULL));
	EXPECT_EQ(-EFAULT, reg(fd, (void *)(1ull << 48), 4096, RD, m, NO_WINDOW, NULL));
	EXPECT_EQ(-EINVAL, reg(fd, buf, 4096, 0, m, NO_WINDOW, NULL));
	EXPECT_EQ(-EINVAL, reg(fd, buf, 4096, 4, m, NO_WINDOW, NULL));
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = RD,
				      .mode = m, .flags = 2 };
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_REG, &r)) TH_LOG("unknown flag");
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = RD,
				      .mode = m, .rkey = 1 };
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_REG, &r)) TH_LOG("rkey set on input");
	/* ABI 4: a remote right needs its local one. */
	EXPECT_EQ(-EINVAL, reg(fd, buf, 4096, RD | EXANEST_DMA_ACCESS_REMOTE_WRITE, m, NO_WINDOW,
			       NULL));
	EXPECT_EQ(-EINVAL, reg(fd, buf, 4096, 16, m, NO_WINDOW, NULL));
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = RD,
				      .mode = m, .initiator = 1 };
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_REG, &r)) TH_LOG("initiator");
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = RD,
				      .mode = 7 };
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_REG, &r)) TH_LOG("unknown mode");
	EXPECT_EQ(-EFAULT, xioctl(fd, EXANEST_DMA_IOC_REG, (void *)16)) TH_LOG("bad pointer");
	/* The touch-ahead window: too big, or set without its flag. */
	EXPECT_EQ(-EINVAL, reg(fd, buf, 4096, RD, m, EXANEST_DMA_MAX_WINDOW + 1, NULL));
	r = (struct exanest_dma_reg){ .addr = (uintptr_t)buf, .length = 4096, .access = RD,
				      .mode = m, .touch_ahead = 3 };
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_REG, &r)) TH_LOG("window without flag");
	EXPECT_EQ(0, counters(fd).regions);
}

/* Memory the mode cannot use: pin and prefault look at it at registration, on-demand not. */
TEST_F(errors, reg_bad_memory)
{
	uint8_t *none = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *ro = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct exanest_dma_counters c;
	uint32_t h[4];
	int n = 0, ret;

	ASSERT_NE(MAP_FAILED, none);
	ASSERT_NE(MAP_FAILED, ro);
	ret = reg(self->fd, none, 8192, RD, variant->mode, NO_WINDOW, &h[n]);
	EXPECT_EQ(variant->reg_prot_none, ret) TH_LOG("PROT_NONE");
	n += !ret;
	munmap(none, 8192);
	ret = reg(self->fd, none, 8192, RD, variant->mode, NO_WINDOW, &h[n]);
	EXPECT_EQ(variant->reg_unmapped, ret) TH_LOG("unmapped");
	n += !ret;
	ret = reg(self->fd, ro, 8192, WR, variant->mode, NO_WINDOW, &h[n]);
	EXPECT_EQ(variant->reg_readonly_write, ret) TH_LOG("read-only for writing");
	n += !ret;
	ret = reg(self->fd, ro, 8192, RD, variant->mode, NO_WINDOW, &h[n]);
	EXPECT_EQ(0, ret) TH_LOG("read-only for reading");
	n += !ret;
	for (int i = 0; i < n; i++) {
		EXPECT_EQ(0, dereg(self->fd, h[i]));
	}
	/* The refusals leave nothing registered, mapped or pinned. */
	c = counters(self->fd);
	EXPECT_EQ(0, c.regions);
	EXPECT_EQ(0, c.pages_mapped);
	EXPECT_EQ(0, c.pages_pinned);
}

TEST_F(errors, dereg_errors)
{
	struct exanest_dma_dereg d = { .handle = 1, .flags = 2 };

	EXPECT_EQ(-ENOENT, dereg(self->fd, 12345));
	EXPECT_EQ(-ENOENT, dereg(self->fd, 0));
	EXPECT_EQ(-EINVAL, xioctl(self->fd, EXANEST_DMA_IOC_DEREG, &d));
}

TEST_F(errors, unknown_ioctl)
{
	EXPECT_EQ(-ENOTTY, xioctl(self->fd, _IO(EXANEST_DMA_IOC_MAGIC, 0x7f), NULL));
}

TEST_F(errors, region_stats_unknown_handle)
{
	struct exanest_dma_region_stats rs = { .handle = 4242 };

	EXPECT_EQ(-ENOENT, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
}

/* REGION_STATS takes a handle only: out fields and reserved words set on input are EINVAL. */
TEST_F(errors, region_stats_fields_must_be_zero)
{
	uint8_t *buf = big_alloc(4096);
	struct exanest_dma_region_stats rs;
	uint32_t h;

	ASSERT_EQ(0, reg(self->fd, buf, 4096, RD, variant->mode, NO_WINDOW, &h));
	rs = (struct exanest_dma_region_stats){ .handle = h, .mode = 1 };
	EXPECT_EQ(-EINVAL, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
	rs = (struct exanest_dma_region_stats){ .handle = h, .faults = 1 };
	EXPECT_EQ(-EINVAL, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
	rs = (struct exanest_dma_region_stats){ .handle = h, .pages_resolved = 1 };
	EXPECT_EQ(-EINVAL, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
	rs = (struct exanest_dma_region_stats){ .handle = h, .reserved = { 0, 1 } };
	EXPECT_EQ(-EINVAL, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
	rs = (struct exanest_dma_region_stats){ .handle = h };
	EXPECT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
	EXPECT_EQ(variant->mode, rs.mode);
	EXPECT_EQ(0, dereg(self->fd, h));
}

/* A buffer of 2 * H: a readable region over its first half, a writable one over the second. */
struct two_regions {
	uint8_t *buf;
	uint32_t hr, hw;
};

static void two_regions(struct __test_metadata *_metadata, int fd, uint32_t mode, size_t H,
			struct two_regions *t)
{
	t->buf = big_alloc(3 * H);
	ASSERT_NE(NULL, t->buf);
	memset(t->buf, 1, 2 * H);
	ASSERT_EQ(0, reg(fd, t->buf, H, RD, mode, NO_WINDOW, &t->hr));
	ASSERT_EQ(0, reg(fd, t->buf + H, H, WR, mode, NO_WINDOW, &t->hw));
}

TEST_F(errors, copy_bad_arguments)
{
	const size_t H = 1 << 20;
	struct two_regions t;
	struct exanest_dma_copy c;
	uint8_t *buf;
	int fd = self->fd;

	two_regions(_metadata, fd, variant->mode, H, &t);
	buf = t.buf;
	EXPECT_EQ(-EINVAL, copy(fd, buf, buf + H, 0, NULL)) TH_LOG("zero length");
	EXPECT_EQ(-E2BIG, copy(fd, buf, buf + H, (1ull << 30) + 1, NULL));
	EXPECT_EQ(-EOVERFLOW, copy(fd, (void *)(uintptr_t)(UINT64_MAX - 8), buf, 64, NULL));
	EXPECT_EQ(-EFAULT, copy(fd, buf + 2 * H, buf + H, 64, NULL)) TH_LOG("src unregistered");
	EXPECT_EQ(-EFAULT, copy(fd, buf + H - 32, buf + H + 4096, 64, NULL)) TH_LOG("past region");
	EXPECT_EQ(-EACCES, copy(fd, buf, buf + 4096, 64, NULL)) TH_LOG("dst not writable");
	EXPECT_EQ(-EACCES, copy(fd, buf + H, buf + H + 4096, 64, NULL)) TH_LOG("src not readable");
	EXPECT_EQ(-EINVAL, copy(fd, buf, buf + 32, 64, NULL)) TH_LOG("overlap");
	c = (struct exanest_dma_copy){ .src = (uintptr_t)buf, .dst = (uintptr_t)(buf + H),
				       .length = 64, .flags = 8 };
	EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_COPY, &c)) TH_LOG("unknown flag");
	EXPECT_EQ(0, counters(fd).copies);
}

/*
 * A copy in flight holds its regions; its cookie is collected once. The copies queued ahead of
 * the deregistration are 32 x 16 MiB, 270 ms of engine time at the model's 2 GB/s (the virtual
 * clock runs with the host's), and still a host that deschedules the guest can let all of
 * them end before DEREG (make check saw it twice). So DEREG's answer is checked against what
 * was in flight after it: 0 only if the last copy had ended by then (a WAIT of it with no
 * timeout collects it), EBUSY otherwise; and EBUSY must be seen, in one of 5 tries.
 */
TEST_F_TIMEOUT(errors, copy_in_flight_holds_regions, 120)
{
	enum { N = 32, TRIES = 5 };
	const size_t H = 16 << 20;
	struct two_regions t;
	struct exanest_dma_wait w;
	uint64_t cookies[N] = { 0 };
	int fd = self->fd, ret = 0, busy = 0, n, last;

	for (int k = 0; k < TRIES && busy != -EBUSY; k++) {
		two_regions(_metadata, fd, variant->mode, H, &t);
		/* Nothing printed in between: a console write can take longer than a copy. */
		for (n = 0, ret = 0; n < N && !ret; n++)
			ret = copy(fd, t.buf, t.buf + H, H, &cookies[n]);
		busy = dereg(fd, t.hr);
		last = wait_cookie(fd, cookies[N - 1], 0, NULL, NULL);
		ASSERT_EQ(0, ret);
		ASSERT_EQ(N, n);
		if (busy == 0) {
			EXPECT_EQ(0, last) TH_LOG("DEREG took a region a copy still held");
		} else {
			EXPECT_EQ(-EBUSY, busy);
		}
		w = (struct exanest_dma_wait){ .cookie = cookies[N - 1], .flags = 1 };
		EXPECT_EQ(-EINVAL, xioctl(fd, EXANEST_DMA_IOC_WAIT, &w)) TH_LOG("wait flags");
		for (int i = 0; i < N - (last == 0); i++) {
			EXPECT_EQ(0, wait_cookie(fd, cookies[i], -1, NULL, NULL)) TH_LOG("copy %d", i);
		}
		EXPECT_EQ(-ENOENT, wait_cookie(fd, cookies[N - 1], -1, NULL, NULL)) TH_LOG("twice");
		EXPECT_EQ(busy ? 0 : -ENOENT, dereg(fd, t.hr));
		EXPECT_EQ(0, dereg(fd, t.hw));
		munmap(t.buf, 3 * H);
	}
	EXPECT_EQ(-EBUSY, busy) TH_LOG("no DEREG while copies ran, in %d tries", TRIES);
	EXPECT_EQ(-ENOENT, wait_cookie(fd, 999999, 0, NULL, NULL)) TH_LOG("unknown cookie");
	EXPECT_EQ(-ENOENT, wait_cookie(fd, 0, 0, NULL, NULL)) TH_LOG("cookie 0");
}

/* Too many copies known at once: the 65th gets EAGAIN. */
TEST_F(errors, too_many_inflight_eagain)
{
	const size_t H = 1 << 20;
	struct two_regions t;
	uint64_t cookie = 0;
	int fd = self->fd, n;

	two_regions(_metadata, fd, variant->mode, H, &t);
	for (n = 0; n < 80; n++)
		if (copy(fd, t.buf, t.buf + H, 64, &cookie))
			break;
	EXPECT_EQ(64, n);
	EXPECT_EQ(-EAGAIN, copy(fd, t.buf, t.buf + H, 64, NULL));
	for (uint64_t k = cookie - n + 1; k <= cookie; k++) {
		EXPECT_EQ(0, wait_cookie(fd, k, -1, NULL, NULL));
	}
	EXPECT_EQ(0, copy_wait(fd, t.buf, t.buf + H, 64)) TH_LOG("room again after the waits");
}

/* Too many regions: the 65th gets ENOSPC. */
TEST_F(errors, too_many_regions_enospc)
{
	uint8_t *buf = big_alloc(80 * 64);
	uint32_t handles[80];
	struct exanest_dma_counters c;
	int n;

	ASSERT_NE(NULL, buf);
	memset(buf, 1, 80 * 64);
	for (n = 0; n < 80; n++)
		if (reg(self->fd, buf + n * 64, 64, RD, variant->mode, NO_WINDOW, &handles[n]))
			break;
	EXPECT_EQ(64, n);
	EXPECT_EQ(-ENOSPC, reg(self->fd, buf, 64, RD, variant->mode, NO_WINDOW, NULL));
	for (int i = 0; i < n; i++) {
		EXPECT_EQ(0, dereg(self->fd, handles[i]));
	}
	c = counters(self->fd);
	EXPECT_EQ(0, c.regions);
	EXPECT_EQ(0, c.pages_pinned);
	EXPECT_EQ(0, c.pages_mapped);
}

TEST_F(errors, advise_errors)
{
	enum { LEN = 1 << 20 };
	uint8_t *src = big_alloc(2 * LEN);
	uint32_t hs;

	ASSERT_NE(NULL, src);
	fill(src, LEN, 3);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	EXPECT_EQ(-EACCES, advise(self->fd, src, 4096, EXANEST_DMA_ADVISE_WRITE))
		TH_LOG("write on a read region");
	EXPECT_EQ(-EFAULT, advise(self->fd, src + LEN, 4096, 0)) TH_LOG("outside every region");
	EXPECT_EQ(-EINVAL, advise(self->fd, src, 4096, 8)) TH_LOG("unknown flags");
	EXPECT_EQ(-EINVAL, advise(self->fd, src, 0, 0)) TH_LOG("zero length");
	EXPECT_EQ(0, advise(self->fd, src, LEN, 0));
	EXPECT_EQ(0, dereg(self->fd, hs));
}

/* A read-only mapping registered as destination. */
TEST_F(errors, readonly_destination)
{
	enum { LEN = 1 << 20 };
	uint8_t *src = big_alloc(2 * LEN);
	uint8_t *ro = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t hs, hd, h = 0;
	int ret;

	ASSERT_NE(NULL, src);
	ASSERT_NE(MAP_FAILED, ro);
	fill(src, LEN, 4);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, src + LEN, LEN, WR, variant->mode, NO_WINDOW, &hd));
	ret = reg(self->fd, ro, LEN, WR, variant->mode, NO_WINDOW, &h);
	EXPECT_EQ(variant->reg_readonly_write, ret);
	if (!ret) {
		/* Registered: the engine's write faults and the driver NACKs it. */
		EXPECT_EQ(-EACCES, copy_wait(self->fd, src, ro, LEN));
		EXPECT_EQ(1, counters(self->fd).copy_errors);
		EXPECT_EQ(0, dereg(self->fd, h));
	}
	/* The session goes on. */
	EXPECT_EQ(0, copy_wait(self->fd, src, src + LEN, LEN));
	EXPECT_EQ(0, memcmp(src, src + LEN, LEN));
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
}

/* A PROT_NONE source. */
TEST_F(errors, prot_none_source)
{
	enum { LEN = 1 << 20 };
	uint8_t *dst = big_alloc(LEN);
	uint8_t *none = mmap(NULL, LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t hd, h = 0;
	int ret;

	ASSERT_NE(NULL, dst);
	ASSERT_NE(MAP_FAILED, none);
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, NO_WINDOW, &hd));
	ret = reg(self->fd, none, LEN, RD, variant->mode, NO_WINDOW, &h);
	EXPECT_EQ(variant->reg_prot_none, ret);
	if (!ret) {
		EXPECT_EQ(-EACCES, copy_wait(self->fd, none, dst, LEN));
		EXPECT_EQ(0, dereg(self->fd, h));
	}
	EXPECT_EQ(0, dereg(self->fd, hd));
}

/* A source unmapped after registration, then a copy from it; then the session still works. */
TEST_F(errors, unmapped_after_registration)
{
	enum { LEN = 1 << 20 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN), *gone = big_alloc(LEN);
	uint32_t hs, hd, h = 0;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_NE(NULL, gone);
	fill(src, LEN, 8);
	memset(gone, 0x3c, LEN);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, NO_WINDOW, &hd));
	ASSERT_EQ(0, reg(self->fd, gone, LEN, RD, variant->mode, NO_WINDOW, &h));
	munmap(gone, LEN);
	EXPECT_EQ(variant->copy_after_munmap, copy_wait(self->fd, gone, dst, LEN));
	if (!variant->copy_after_munmap) {
		EXPECT_TRUE(all_bytes(dst, LEN, 0x3c)) TH_LOG("the pinned pages' data");
	}
	EXPECT_EQ(0, dereg(self->fd, h));
	/* The session still works after the NACK. */
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(dst, src, LEN));
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
}

TEST_HARNESS_MAIN

/* VmLck of this process, in KiB (-1 if not found). */
static long vm_locked_kib(void)
{
	char line[128];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Give up CAP_IPC_LOCK (effective and permitted), so RLIMIT_MEMLOCK applies. */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d);
}

/*
 * RLIMIT_MEMLOCK, as ib_umem applies it: in a child without CAP_IPC_LOCK and with a 64 KiB
 * limit, pinning 1 MiB is ENOMEM, 32 KiB is charged to VmLck and given back at DEREG. With
 * CAP_IPC_LOCK the limit does not apply. Prefault and on-demand regions pin nothing.
 */
TEST_F(errors, pinning_counts_against_memlock)
{
	const struct rlimit lim = { 64 << 10, 64 << 10 };
	uint8_t *buf = big_alloc(MIB);
	int status = -1;
	pid_t pid;

	ASSERT_NE(NULL, buf);
	memset(buf, 1, MIB);
	RELEASE_DEVICE();
	for (int capable = 0; capable < 2; capable++) {
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			int fd, bad = 0, ret;
			uint32_t h = 0;

			if (!capable && drop_ipc_lock())
				_exit(100);
			if (setrlimit(RLIMIT_MEMLOCK, &lim))
				_exit(101);
			fd = dev_open(0);
			if (fd < 0)
				_exit(102);
			ret = reg(fd, buf, MIB, RD, variant->mode, NO_WINDOW, &h);
			if (capable) {
				bad |= (ret != 0) << 0;
			} else {
				bad |= (ret != variant->reg_over_memlock) << 1;
				bad |= (vm_locked_kib() != 0) << 2;
			}
			if (!ret)
				bad |= (dereg(fd, h) != 0) << 3;
			if (!capable) {
				bad |= (reg(fd, buf, 32 << 10, RD, variant->mode, NO_WINDOW, &h) != 0) << 4;
				bad |= (vm_locked_kib() != variant->locked_kib) << 5;
				bad |= (dereg(fd, h) != 0) << 6;
				bad |= (vm_locked_kib() != 0) << 7;
			}
			_exit(bad);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("%s: failed checks %#x (1 reg with the capability, 2 reg over the limit, "
			       "4 VmLck after it, 8 dereg, 16 reg of 32 KiB, 32 VmLck %d KiB, 64 dereg, "
			       "128 VmLck after it)", capable ? "CAP_IPC_LOCK" : "no CAP_IPC_LOCK",
			       WIFEXITED(status) ? WEXITSTATUS(status) : status, variant->locked_kib);
	}
}
