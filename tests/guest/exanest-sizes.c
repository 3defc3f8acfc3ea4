// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-sizes: copy correctness in every memory mode: 1 B .. 64 MiB, unaligned and
 * page-crossing, source and destination in one page; what registration maps and pins; the
 * counters of a session.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "exanest-test.h"

DEVICE_FIXTURE(sizes);

FIXTURE_VARIANT(sizes) {
	MODE_FIELDS;
};

FIXTURE_VARIANT_ADD(sizes, pin) {
	PIN_MODE,
};

FIXTURE_VARIANT_ADD(sizes, prefault) {
	PREFAULT_MODE,
};

FIXTURE_VARIANT_ADD(sizes, on_demand) {
	ON_DEMAND_MODE,
};

TEST_F(sizes, info)
{
	struct exanest_dma_info info;

	ASSERT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_INFO, &info));
	EXPECT_EQ(EXANEST_DMA_ABI_VERSION, info.abi_version);
	EXPECT_LE(4, info.channels);
	EXPECT_TRUE(info.modes & (1u << variant->mode)) TH_LOG("modes %#x", info.modes);
	EXPECT_EQ(1ull << 30, info.max_transfer);
}

/*
 * Copy len bytes from src+so to dst+doff through the engine, both regions in the variant's
 * mode, and check every byte around the destination, the faults the mode takes and that
 * deregistration leaves nothing mapped or pinned.
 */
static void one_copy(struct __test_metadata *_metadata, int fd, const FIXTURE_VARIANT(sizes) *variant,
		     size_t len, size_t so, size_t doff, unsigned int seed)
{
	size_t total = len + 8192;
	uint8_t *src = big_alloc(total), *dst = big_alloc(total);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;
	uint64_t cookie = 0, bytes = 0;
	int st = -1;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, total, seed);
	memset(dst, 0xa5, total);
	ASSERT_EQ(0, reg(fd, src + so, len, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(fd, dst + doff, len, WR, variant->mode, NO_WINDOW, &hd));
	c0 = counters(fd);
	ASSERT_EQ(0, copy(fd, src + so, dst + doff, len, &cookie));
	ASSERT_EQ(0, wait_cookie(fd, cookie, 10 * SEC, &st, &bytes));
	c1 = counters(fd);
	EXPECT_EQ(0, st);
	EXPECT_EQ(len, bytes);
	EXPECT_EQ(0, memcmp(src + so, dst + doff, len)) TH_LOG("data differs");
	EXPECT_TRUE(all_bytes(dst, doff, 0xa5)) TH_LOG("wrote before the destination");
	EXPECT_TRUE(all_bytes(dst + doff + len, total - doff - len, 0xa5))
		TH_LOG("wrote past the destination");
	if (variant->faults) {
		EXPECT_LT(c0.faults, c1.faults);
	} else {
		EXPECT_EQ(c0.faults, c1.faults);
	}
	EXPECT_EQ(0, dereg(fd, hs));
	EXPECT_EQ(0, dereg(fd, hd));
	c1 = counters(fd);
	EXPECT_EQ(0, c1.regions);
	EXPECT_EQ(0, c1.pages_pinned);
	EXPECT_EQ(0, c1.pages_mapped);
	munmap(src, total);
	munmap(dst, total);
}

#define COPY_TEST(len, so, doff, seed)						\
	TEST_F_TIMEOUT(sizes, copy_##len##_off##so##_##doff, 120)		\
	{									\
		one_copy(_metadata, self->fd, variant, len, so, doff, seed);	\
	}

/* Sizes around a page and a MiB, aligned, unaligned (1, 7) and page-crossing (4093, 5). */
COPY_TEST(1, 0, 0, 0)
COPY_TEST(1, 1, 7, 1)
COPY_TEST(1, 4093, 5, 2)
COPY_TEST(3, 0, 0, 3)
COPY_TEST(3, 1, 7, 4)
COPY_TEST(3, 4093, 5, 5)
COPY_TEST(64, 0, 0, 6)
COPY_TEST(64, 1, 7, 7)
COPY_TEST(64, 4093, 5, 8)
COPY_TEST(4095, 0, 0, 9)
COPY_TEST(4095, 1, 7, 10)
COPY_TEST(4095, 4093, 5, 11)
COPY_TEST(4096, 0, 0, 12)
COPY_TEST(4096, 1, 7, 13)
COPY_TEST(4096, 4093, 5, 14)
COPY_TEST(4097, 0, 0, 15)
COPY_TEST(4097, 1, 7, 16)
COPY_TEST(4097, 4093, 5, 17)
COPY_TEST(65537, 0, 0, 18)
COPY_TEST(65537, 1, 7, 19)
COPY_TEST(65537, 4093, 5, 20)
COPY_TEST(1048581, 0, 0, 21)
COPY_TEST(1048581, 1, 7, 22)
COPY_TEST(1048581, 4093, 5, 23)
COPY_TEST(16777216, 0, 0, 24)
COPY_TEST(16777216, 4093, 5, 26)
COPY_TEST(67108864, 0, 0, 27)
COPY_TEST(67108864, 4093, 5, 29)

/* Source and destination in one page, registered as two regions sharing it. */
TEST_F(sizes, copy_shared_page)
{
	uint8_t *page = big_alloc(4096);
	uint32_t h1, h2;

	ASSERT_NE(NULL, page);
	fill(page, 2048, 99);
	ASSERT_EQ(0, reg(self->fd, page, 2048, RD, variant->mode, NO_WINDOW, &h1));
	ASSERT_EQ(0, reg(self->fd, page + 2048, 2048, WR, variant->mode, NO_WINDOW, &h2));
	EXPECT_EQ(0, copy_wait(self->fd, page, page + 2048, 2048));
	EXPECT_EQ(0, memcmp(page, page + 2048, 2048));
	EXPECT_EQ(0, dereg(self->fd, h1));
	EXPECT_EQ(0, dereg(self->fd, h2));
}

/* What registration maps and pins, per mode; the first copy's faults. */
TEST_F(sizes, registration_maps_and_pins)
{
	enum { LEN = 4 << 20 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, LEN, 5);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, NO_WINDOW, &hd));
	c0 = counters(self->fd);
	EXPECT_EQ(2, c0.regions);
	if (variant->maps_at_reg) {
		EXPECT_LE(2 * PAGES(LEN), c0.pages_mapped);
	} else {
		EXPECT_EQ(0, c0.pages_mapped);
	}
	EXPECT_EQ(variant->pins ? 2 * PAGES(LEN) : 0, c0.pages_pinned);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	if (variant->faults) {
		EXPECT_LT(c0.faults, c1.faults);
		EXPECT_LE(2 * PAGES(LEN), c1.pages_mapped);
	} else {
		EXPECT_EQ(c0.faults, c1.faults);
	}
	EXPECT_EQ(c0.pages_pinned, c1.pages_pinned);
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
}

/* A session's counters: every copy and byte, no error, nothing left after deregistration. */
TEST_F(sizes, counters)
{
	static const size_t lens[] = { 1, 4097, 1 << 20, 3 << 20 };
	uint8_t *src = big_alloc(4 << 20), *dst = big_alloc(4 << 20);
	struct exanest_dma_counters c;
	uint64_t bytes = 0;
	uint32_t hs, hd;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	c = counters(self->fd);
	EXPECT_EQ(0, c.copies) TH_LOG("a fresh session starts at zero");
	fill(src, 4 << 20, 6);
	ASSERT_EQ(0, reg(self->fd, src, 4 << 20, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, 4 << 20, WR, variant->mode, NO_WINDOW, &hd));
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		EXPECT_EQ(0, copy_wait(self->fd, src, dst, lens[i]));
		bytes += lens[i];
	}
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
	c = counters(self->fd);
	TH_LOG("copies %llu errors %llu bytes %llu regions %llu mapped %llu pinned %llu faults %llu",
	       (unsigned long long)c.copies, (unsigned long long)c.copy_errors,
	       (unsigned long long)c.bytes, (unsigned long long)c.regions,
	       (unsigned long long)c.pages_mapped, (unsigned long long)c.pages_pinned,
	       (unsigned long long)c.faults);
	EXPECT_EQ(4, c.copies);
	EXPECT_EQ(0, c.copy_errors);
	EXPECT_EQ(bytes, c.bytes);
	EXPECT_EQ(0, c.regions);
	EXPECT_EQ(0, c.pages_mapped);
	EXPECT_EQ(0, c.pages_pinned);
	if (variant->faults) {
		EXPECT_EQ(c.faults, c.faults_resolved);
	} else {
		EXPECT_EQ(0, c.faults);
	}
}

TEST_HARNESS_MAIN
