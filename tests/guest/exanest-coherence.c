// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-coherence: the device's view of memory follows the process's mm, in every memory
 * mode: CPU writes (COW), MADV_DONTNEED, mprotect, file mappings, transparent huge pages (split,
 * collapse, 2 MiB IOMMU blocks), compaction, swap; engine faults, touch-ahead, strided streams,
 * advise, and the statistics that count them.
 *
 * Pinned pages do not follow the mm: where the mm replaces a pinned page (MADV_DONTNEED), the
 * device keeps the old one, and the variant says so.
 */
#include <pthread.h>
#include <stdlib.h>

#include "exanest-test.h"

#define PAGE 4096

DEVICE_FIXTURE(coherence);

FIXTURE_VARIANT(coherence) {
	MODE_FIELDS;
	bool dontneed_sees_dma;	/* after MADV_DONTNEED, the next DMA is seen by the CPU */
	int mprotect_ro_status;	/* status of a copy into a region made read-only */
	bool blocks_at_reg;	/* registration maps THP as 2 MiB IOMMU blocks */
};

FIXTURE_VARIANT_ADD(coherence, pin) {
	PIN_MODE,
	.dontneed_sees_dma = false,	/* the DMA lands in the old, pinned page */
	.mprotect_ro_status = 0,	/* the pinned pages stay writable for the device */
	.blocks_at_reg = false,
};

FIXTURE_VARIANT_ADD(coherence, prefault) {
	PREFAULT_MODE,
	.dontneed_sees_dma = true,
	.mprotect_ro_status = -EACCES,
	.blocks_at_reg = true,
};

FIXTURE_VARIANT_ADD(coherence, on_demand) {
	ON_DEMAND_MODE,
	.dontneed_sees_dma = true,
	.mprotect_ro_status = -EACCES,
	.blocks_at_reg = false,
};

#define LEN (4 << 20)

/*
 * Make the engine fault on the registered destination: on demand it does anyway; prefault
 * mapped it at registration, so drop it from the mm (the notifier unmaps it and the engine
 * refaults); pinned pages never fault: SKIP.
 */
#define FAULT_ON_DST_OR_SKIP(dst, len)						\
	do {									\
		if (variant->pins)						\
			SKIP(return, "pin mode: pinned pages are mapped, the engine never faults"); \
		if (!variant->faults)						\
			ASSERT_EQ(0, madvise(dst, len, MADV_DONTNEED));		\
	} while (0)

/* Register src (read) and dst (write) of LEN in the variant's mode. */
static void reg2(struct __test_metadata *_metadata, int fd, uint32_t mode, uint8_t *src,
		 uint8_t *dst, size_t len, uint32_t *hs, uint32_t *hd)
{
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, reg(fd, src, len, RD, mode, NO_WINDOW, hs));
	ASSERT_EQ(0, reg(fd, dst, len, WR, mode, NO_WINDOW, hd));
}

/* Check dst == src, except for a page the mm dropped under a pinned region: zero there. */
static void check_after_drop(struct __test_metadata *_metadata, bool sees, const uint8_t *dst,
			     const uint8_t *src, size_t len, size_t off, size_t dlen)
{
	if (sees) {
		EXPECT_EQ(0, memcmp(dst, src, len));
		return;
	}
	EXPECT_EQ(0, memcmp(dst, src, off));
	EXPECT_TRUE(all_bytes(dst + off, dlen, 0)) TH_LOG("the dropped page is the CPU's new one");
	EXPECT_EQ(0, memcmp(dst + off + dlen, src + off + dlen, len - off - dlen));
}

/* An untouched source reads as zero; nothing touched is pinned outside pin mode. */
TEST_F(coherence, untouched_source_reads_zero)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	c0 = counters(self->fd);
	memset(dst, 0x5a, 64); /* touch one page of the destination only */
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	EXPECT_EQ(0, dst[0]);
	EXPECT_EQ(0, dst[LEN - 1]);
	EXPECT_EQ(0, memcmp(dst, src, LEN));
	EXPECT_EQ(variant->pins ? 2 * PAGES(LEN) : 0, c1.pages_pinned);
	if (variant->faults) {
		EXPECT_LT(c0.faults, c1.faults);
		EXPECT_EQ(c1.faults, c1.faults_resolved);
	} else {
		EXPECT_EQ(0, c1.faults);
	}
	TH_LOG("%llu engine faults resolved for %d MiB (%llu reported by the SMMU), %llu pages mapped, %llu by touch-ahead",
	       (unsigned long long)c1.faults_resolved, LEN >> 20,
	       (unsigned long long)c1.iommu_faults, (unsigned long long)c1.pages_mapped,
	       (unsigned long long)c1.touch_ahead_pages);
}

/*
 * Whether the module was loaded with smmu_fault_events=1, which tests/guest/check.sh says
 * with EXANEST_SMMU_EVENTS=1 when it runs the tests of the SMMU's reports.
 */
static bool smmu_events(void)
{
	const char *s = getenv("EXANEST_SMMU_EVENTS");

	return s && !strcmp(s, "1");
}

/*
 * Whether the engines sit behind arm-smmu.c (SMMUv2: the QFDB's MMU-500), which reports every
 * context fault and cannot be asked not to (IOMMU_CAP_NO_FAULT_EVENTS, kernel patch 0006, is
 * arm-smmu-v3's).
 */
static bool behind_arm_smmu_v2(void)
{
	return driver_bound("/sys/bus/platform/drivers/arm-smmu", ".iommu");
}

/*
 * With the SMMU's fault events kept (smmu_fault_events=1), the patched arm-smmu-v3 hands
 * every translation fault to the driver's handler.
 */
TEST_F(coherence, smmu_reports_faults_to_handler)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd;

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages are mapped, the engine never faults");
	if (!smmu_events())
		SKIP(return, "the SMMU records no fault of the driver's domains (default)");
	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	FAULT_ON_DST_OR_SKIP(dst, LEN);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_LT(0, counters(self->fd).iommu_faults);
}

/*
 * By default the driver asks the IOMMU not to record its domains' faults (kernel patch 0006:
 * CD.R clear on SMMUv3): the engine's reports alone resolve every fault, and the SMMU reports
 * none of them.
 */
TEST_F(coherence, smmu_records_no_fault_by_default)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c;
	uint32_t hs, hd;

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages are mapped, the engine never faults");
	if (smmu_events())
		SKIP(return, "loaded with smmu_fault_events=1");
	if (behind_arm_smmu_v2())
		SKIP(return, "arm-smmu.c (the MMU-500) reports every context fault and cannot be "
		     "asked not to: kernel patch 0006 is arm-smmu-v3's (smmu_reports_faults_to_handler "
		     "checks the reports reach the handler)");
	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	FAULT_ON_DST_OR_SKIP(dst, LEN);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(dst, src, LEN));
	c = counters(self->fd);
	EXPECT_LT(0, c.faults_resolved);
	EXPECT_EQ(0, c.iommu_faults);
}

/* One fault maps the pages ahead of it too. */
TEST_F(coherence, touch_ahead_maps_ahead)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages are mapped, the engine never faults");
	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	FAULT_ON_DST_OR_SKIP(dst, LEN);
	c0 = counters(self->fd);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	EXPECT_LT(c0.touch_ahead_pages, c1.touch_ahead_pages);
	EXPECT_LT(c1.faults - c0.faults, c1.pages_resolved - c0.pages_resolved);
	if (variant->faults) {
		EXPECT_EQ(c1.pages_resolved, c1.pages_mapped) TH_LOG("every mapped page resolved");
	}
}

/* Statistics: the latency histogram counts every fault. */
TEST_F(coherence, latency_histogram_counts_every_fault)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_latency lat;
	struct exanest_dma_counters c;
	uint64_t total = 0;
	uint32_t hs, hd;

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages are mapped, the engine never faults");
	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	FAULT_ON_DST_OR_SKIP(dst, LEN);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c = counters(self->fd);
	ASSERT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_LATENCY, &lat));
	for (int i = 0; i < EXANEST_DMA_LATENCY_BUCKETS; i++)
		total += lat.total[i];
	EXPECT_LT(0, total);
	EXPECT_EQ(c.faults_resolved + c.nacks, total);
}

struct pcts {
	unsigned long n, p50, p90, p99, max;
};

/*
 * The fault log's summary: faults pushed, kept, and stage `stage`'s percentiles (n 0: none);
 * "read.STAGE" and "write.STAGE" over the faults where the engine read or wrote (by_access);
 * -EPROTO if it does not parse, -ERANGE if it says keeping a record costs nothing.
 */
static int fault_log_read(unsigned long *faults, unsigned long *kept, const char *stage,
			  struct pcts *p)
{
	const char *dot = strchr(stage, '.');
	char text[4096], key[32];
	int fd = open(FAULT_LOG, O_RDONLY);
	unsigned long record_ns;
	const char *s;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	text[n] = 0;
	if (sscanf(text, "{\"stamps\": %*[a-z], \"record_ns\": %lu, \"faults\": %lu, \"kept\": %lu",
		   &record_ns, faults, kept) != 3)
		return -EPROTO;
	/* What keeping a record costs, timed when the log was created: never nothing. */
	if (record_ns == 0)
		return -ERANGE;
	*p = (struct pcts){ 0 };
	s = text;
	if (dot) {
		char *end;

		snprintf(key, sizeof(key), "\"%.*s\": {", (int)(dot - stage), stage);
		s = strstr(text, "\"by_access\": {");
		s = s ? strstr(s, key) : NULL;
		if (!s)
			return -EPROTO;
		/* The section alone: "{}" when empty, else its stages, each "{...}", then "}". */
		s += strlen(key) - 1;
		end = *(s + 1) == '}' ? (char *)s + 1 : strstr(s, "}}");
		if (!end)
			return -EPROTO;
		end[1] = 0;
		stage = dot + 1;
	}
	snprintf(key, sizeof(key), "\"%s\": {", stage);
	s = strstr(s, key);
	if (s && sscanf(s + strlen(key), "\"n\": %lu, \"p50\": %lu, \"p90\": %lu, \"p99\": %lu, \"max\": %lu",
			&p->n, &p->p50, &p->p90, &p->p99, &p->max) != 5)
		return -EPROTO;
	return 0;
}

/*
 * The engine's fault log (debugfs faults) keeps one record per fault answered, with exact
 * (not bucketed) percentiles per stage; `off` stops it, `clear` empties it, anything else is
 * EINVAL.
 */
TEST_F(coherence, fault_log_times_every_fault)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	unsigned long faults, kept, answered;
	struct exanest_dma_counters c0, c1;
	struct pcts total, fault_in, rd, wr;
	uint32_t hs, hd;

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages are mapped, the engine never faults");
	ASSERT_EQ(-EINVAL, fault_log_cmd("clear all"));
	ASSERT_EQ(0, fault_log_cmd("on\n"));
	ASSERT_EQ(0, fault_log_cmd("clear\n"));
	ASSERT_EQ(0, fault_log_read(&faults, &kept, "total", &total));
	EXPECT_EQ(0, faults);
	EXPECT_EQ(0, total.n);
	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	FAULT_ON_DST_OR_SKIP(dst, LEN);
	c0 = counters(self->fd);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	answered = c1.faults_resolved + c1.nacks - c0.faults_resolved - c0.nacks;
	ASSERT_EQ(0, fault_log_read(&faults, &kept, "total", &total));
	ASSERT_EQ(0, fault_log_read(&faults, &kept, "fault_in", &fault_in));
	EXPECT_LT(0, answered);
	EXPECT_EQ(answered, faults);
	EXPECT_EQ(faults, kept);
	EXPECT_EQ(kept, total.n);
	EXPECT_LT(0, fault_in.n) TH_LOG("no fault-in timed");
	EXPECT_LT(0, total.p50);
	EXPECT_LE(total.p50, total.p90);
	EXPECT_LE(total.p90, total.p99);
	EXPECT_LE(total.p99, total.max);
	/* Every fault-in lies inside its fault's service. */
	EXPECT_LE(fault_in.max, total.max);
	/* Split by the engine's access: every fault is a read or a write; the copy wrote. */
	ASSERT_EQ(0, fault_log_read(&faults, &kept, "read.total", &rd));
	ASSERT_EQ(0, fault_log_read(&faults, &kept, "write.total", &wr));
	EXPECT_EQ(total.n, rd.n + wr.n);
	EXPECT_LT(0, wr.n);
	EXPECT_LE(wr.max, total.max);
	EXPECT_EQ(0, memcmp(dst, src, LEN));

	/* Off: the next faults are not kept. */
	ASSERT_EQ(0, fault_log_cmd("off"));
	ASSERT_EQ(0, madvise(dst, LEN, MADV_DONTNEED));
	c0 = counters(self->fd);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	EXPECT_LT(c0.faults_resolved, c1.faults_resolved);
	ASSERT_EQ(0, fault_log_cmd("on"));
	ASSERT_EQ(0, fault_log_read(&faults, &kept, "total", &total));
	EXPECT_EQ(answered, faults);
	ASSERT_EQ(0, fault_log_cmd("clear"));
	ASSERT_EQ(0, fault_log_read(&faults, &kept, "total", &total));
	EXPECT_EQ(0, kept);
}

/* Per-region statistics and the debugfs view name the mode and count the region's faults. */
TEST_F(coherence, region_stats_and_debugfs)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_region_stats rs;
	char text[8192] = "", want[64];
	uint32_t hs, hd;
	ssize_t n = -1;
	int dfd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	rs = (struct exanest_dma_region_stats){ .handle = hd };
	ASSERT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_REGION_STATS, &rs));
	EXPECT_EQ(variant->mode, rs.mode);
	if (variant->faults) {
		EXPECT_LT(0, rs.faults);
		EXPECT_LE(PAGES(LEN), rs.pages_resolved);
	} else {
		EXPECT_EQ(0, rs.faults);
	}
	dfd = open("/sys/kernel/debug/exanest-dma0/stats", O_RDONLY);
	ASSERT_LE(0, dfd) TH_LOG("debugfs: %s", strerror(errno));
	n = read(dfd, text, sizeof(text) - 1);
	close(dfd);
	ASSERT_LT(0, n);
	text[n] = 0;
	snprintf(want, sizeof(want), "mode %s ", variant->name);
	EXPECT_NE(NULL, strstr(text, want)) TH_LOG("no '%s' in: %.300s", want, text);
	EXPECT_NE(NULL, strstr(text, "resolve-latency-us p50 <")) TH_LOG("%.300s", text);
}

/* The CPU writes the source after registration: the DMA sees the new data (the zero page the
 * device had is replaced: the CPU's write faults, the notifier unmaps it).
 */
TEST_F(coherence, sees_cpu_writes)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0;
	uint32_t hs, hd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c0 = counters(self->fd);
	fill(src, LEN, 77);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(dst, src, LEN));
	if (variant->notifier) {
		EXPECT_LT(c0.invalidations, counters(self->fd).invalidations) TH_LOG("COW unmaps");
	} else {
		EXPECT_EQ(0, counters(self->fd).invalidations);
	}
}

/* A thread that drops 1-64 pages of a buffer at random, once a millisecond, until told. */
struct dropper {
	uint8_t *buf;
	size_t len;
	volatile bool stop;
	unsigned int seed;
	unsigned long drops;
};

static void *drop_pages(void *arg)
{
	struct dropper *d = arg;

	while (!d->stop) {
		size_t pages = d->len / PAGE;
		size_t n = 1 + rand_r(&d->seed) % 64;
		size_t at = rand_r(&d->seed) % pages;

		if (at + n > pages)
			n = pages - at;
		madvise(d->buf + at * PAGE, n * PAGE, MADV_DONTNEED);
		d->drops++;
		usleep(1000);
	}
	return NULL;
}

/*
 * Invalidations elsewhere in a region do not fail copies (issue 23): 1 MiB copies into a
 * destination of which a few pages are dropped (MADV_DONTNEED) once a millisecond all
 * complete, as a CPU memcpy into it would (each dropped page faults again). The region has one
 * notifier: before, any invalidation in it while a fault was being resolved made the resolver
 * start over, and after 8 times the copy ended -EAGAIN (about 30 % of the copies).
 */
TEST_F(coherence, dontneed_elsewhere_does_not_fail_copies)
{
	enum { CLEN = 1 << 20, COPIES = 24 };
	uint8_t *src = big_alloc(CLEN), *dst = big_alloc(CLEN);
	struct dropper d = { .buf = dst, .len = CLEN, .seed = 23 };
	int failed = 0, last = 0;
	uint32_t hs, hd;
	pthread_t t;

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages do not follow the mm");
	ASSERT_NE(NULL, src);
	fill(src, CLEN, 9);
	reg2(_metadata, self->fd, variant->mode, src, dst, CLEN, &hs, &hd);
	ASSERT_EQ(0, pthread_create(&t, NULL, drop_pages, &d));
	for (int i = 0; i < COPIES; i++) {
		int st = copy_wait(self->fd, src, dst, CLEN);

		if (st) {
			failed++;
			last = st;
		}
	}
	d.stop = true;
	pthread_join(t, NULL);
	TH_LOG("%d of %d copies failed (last %d), %lu drops", failed, COPIES, last, d.drops);
	EXPECT_EQ(0, failed);
	EXPECT_LT(0, d.drops);
}

/* MADV_DONTNEED on the destination: unmapped, then refaulted by the next DMA. */
TEST_F(coherence, dontneed_then_dma)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	fill(src, LEN, 78);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	ASSERT_EQ(0, madvise(dst, LEN, MADV_DONTNEED));
	EXPECT_EQ(0, dst[100]);
	c0 = counters(self->fd);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	check_after_drop(_metadata, variant->dontneed_sees_dma, dst, src, LEN, 0, LEN);
	if (variant->notifier) {
		EXPECT_LT(c0.faults, c1.faults) TH_LOG("refaults after the invalidation");
	} else {
		EXPECT_EQ(c0.faults, c1.faults);
	}
}

/* mprotect: a read-only destination gets a NACK with EACCES; writable again, it works. */
TEST_F(coherence, mprotect_readonly_then_restored)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	fill(src, LEN, 79);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	ASSERT_EQ(0, mprotect(dst, LEN, PROT_READ));
	EXPECT_EQ(variant->mprotect_ro_status, copy_wait(self->fd, src, dst, LEN));
	ASSERT_EQ(0, mprotect(dst, LEN, PROT_READ | PROT_WRITE));
	memset(dst, 0, LEN);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(dst, src, LEN));
}

/*
 * The destination unmapped and mapped again in its place between two copies, read-only, then
 * writable: each copy is served in the VMA there now. The fault path reuses the VMA it found
 * last while no writer has held the mmap lock since (exanest_shim_vma_lookup()); a hint that
 * outlived its VMA would let the device write through the freed, writable VMA (a
 * use-after-free under KASAN) or refuse the writable one. Pinned pages stay the device's.
 */
TEST_F(coherence, destination_remapped_between_copies)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	fill(src, LEN, 81);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(dst, src, LEN));
	ASSERT_EQ(0, munmap(dst, LEN));
	ASSERT_EQ(dst, mmap(dst, LEN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	EXPECT_EQ(variant->mprotect_ro_status, copy_wait(self->fd, src, dst, LEN));
	EXPECT_TRUE(variant->pins || all_bytes(dst, LEN, 0)) TH_LOG("nothing written when refused");
	ASSERT_EQ(0, munmap(dst, LEN));
	ASSERT_EQ(dst, mmap(dst, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			    -1, 0));
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	check_after_drop(_metadata, variant->dontneed_sees_dma, dst, src, LEN, 0, LEN);
	ASSERT_EQ(0, munmap(dst, LEN));
	ASSERT_EQ(0, munmap(src, LEN));
}

/* File-backed: a private mapping as source, a shared one as destination (the data must reach
 * the file).
 */
TEST_F(coherence, file_mappings)
{
	char path[] = "/tmp/exanest-file-XXXXXX";
	uint8_t *src = big_alloc(2 * LEN), *dst = big_alloc(2 * LEN), *check = malloc(LEN);
	uint8_t *priv, *shared;
	uint32_t hs, hd, h1, h2;
	int file = mkstemp(path);

	ASSERT_LE(0, file);
	unlink(path);
	ASSERT_NE(NULL, check);
	reg2(_metadata, self->fd, variant->mode, src, dst, 2 * LEN, &hs, &hd);
	fill(src, 2 * LEN, 21);
	ASSERT_EQ(0, ftruncate(file, LEN));
	ASSERT_EQ(LEN, pwrite(file, src, LEN, 0));
	priv = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, file, 0);
	ASSERT_NE(MAP_FAILED, priv);
	ASSERT_EQ(0, reg(self->fd, priv, LEN, RD, variant->mode, NO_WINDOW, &h1));
	EXPECT_EQ(0, copy_wait(self->fd, priv, dst, LEN)) TH_LOG("private file source");
	EXPECT_EQ(0, memcmp(dst, src, LEN));
	EXPECT_EQ(0, dereg(self->fd, h1));
	shared = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
	ASSERT_NE(MAP_FAILED, shared);
	ASSERT_EQ(0, reg(self->fd, shared, LEN, WR, variant->mode, NO_WINDOW, &h2));
	EXPECT_EQ(0, copy_wait(self->fd, src + LEN, shared, LEN)) TH_LOG("shared file destination");
	ASSERT_EQ(LEN, pread(file, check, LEN, 0));
	EXPECT_EQ(0, memcmp(check, src + LEN, LEN)) TH_LOG("the data reached the file");
	EXPECT_EQ(0, dereg(self->fd, h2));
	close(file);
}

/* A transparent huge page region as destination; then split under the mapping. */
TEST_F(coherence, thp_destination_split_then_dma)
{
	uint8_t *src = big_alloc(2 * LEN), *thp = thp_alloc(LEN);
	uint32_t hs, h1;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, thp);
	fill(src, 2 * LEN, 30);
	madvise(thp, LEN, MADV_HUGEPAGE);
	thp[0] = 1; /* fault in as huge pages */
	thp[2 << 20] = 1;
	ASSERT_EQ(0, reg(self->fd, src, 2 * LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, thp, LEN, WR, variant->mode, NO_WINDOW, &h1));
	EXPECT_EQ(0, copy_wait(self->fd, src, thp, LEN));
	EXPECT_EQ(0, memcmp(thp, src, LEN));
	/* Split the huge page under the mapping: the next DMA must still land right. */
	ASSERT_EQ(0, madvise(thp + 4096, 4096, MADV_DONTNEED));
	EXPECT_EQ(0, copy_wait(self->fd, src + LEN, thp, LEN));
	check_after_drop(_metadata, variant->dontneed_sees_dma, thp, src + LEN, LEN, 4096, 4096);
}

/* A fault on a transparent huge page resolves all of it and maps it as one 2 MiB block, even
 * with a window smaller than the huge page: a copy out of two huge pages maps both as blocks.
 * (It used to map the window page by page and, map-ahead stepping to the next block boundary,
 * the rest of that huge page too: one block of two.)
 */
TEST_F(coherence, thp_fault_maps_whole_block)
{
	uint8_t *thp = thp_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;

	if (variant->pins)
		SKIP(return, "pin mode maps pinned pages one by one, never as 2 MiB blocks");
	ASSERT_NE(NULL, thp);
	ASSERT_NE(NULL, dst);
	ASSERT_EQ(0, madvise(thp, LEN, MADV_HUGEPAGE));
	ASSERT_EQ(0, madvise(dst, LEN, MADV_NOHUGEPAGE)); /* only the source's blocks count */
	fill(thp, LEN, 33); /* two huge pages */
	c0 = counters(self->fd);
	ASSERT_EQ(0, reg(self->fd, thp, LEN, RD, variant->mode, 16, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, NO_WINDOW, &hd));
	EXPECT_EQ(0, copy_wait(self->fd, thp, dst, LEN));
	c1 = counters(self->fd);
	EXPECT_EQ(0, memcmp(thp, dst, LEN));
	EXPECT_EQ(c0.huge_mappings + 2, c1.huge_mappings)
		TH_LOG("%llu of the source's two huge pages mapped as blocks",
		       (unsigned long long)(c1.huge_mappings - c0.huge_mappings));
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
}

/* THP mapped as 2 MiB IOMMU blocks (by advise, or by prefault's registration); a split unmaps
 * them and the next DMA lands right.
 */
TEST_F(coherence, thp_iommu_blocks)
{
	uint8_t *src = big_alloc(2 * LEN), *thp = thp_alloc(LEN);
	struct exanest_dma_counters c0, c1, c2;
	uint32_t hs, h1;

	if (variant->pins)
		SKIP(return, "pin mode maps pinned pages one by one, never as 2 MiB blocks");
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, thp);
	fill(src, 2 * LEN, 31);
	madvise(thp, LEN, MADV_HUGEPAGE);
	memset(thp, 1, LEN); /* two huge pages, writable */
	ASSERT_EQ(0, reg(self->fd, src, 2 * LEN, RD, variant->mode, NO_WINDOW, &hs));
	c0 = counters(self->fd);
	ASSERT_EQ(0, reg(self->fd, thp, LEN, WR, variant->mode, NO_WINDOW, &h1));
	if (variant->blocks_at_reg) {
		EXPECT_LE(c0.huge_mappings + 2, counters(self->fd).huge_mappings);
	}
	EXPECT_EQ(0, advise(self->fd, thp, LEN, EXANEST_DMA_ADVISE_WRITE));
	EXPECT_EQ(0, advise(self->fd, src, 2 * LEN, 0));
	c1 = counters(self->fd);
	EXPECT_EQ(0, copy_wait(self->fd, src, thp, LEN));
	c2 = counters(self->fd);
	EXPECT_EQ(0, memcmp(thp, src, LEN));
	EXPECT_LE(c0.huge_mappings + 2, c1.huge_mappings);
	EXPECT_EQ(c1.faults, c2.faults);
	ASSERT_EQ(0, madvise(thp + (1 << 20), 4096, MADV_DONTNEED)); /* split the first one */
	EXPECT_EQ(0, copy_wait(self->fd, src + LEN, thp, LEN));
	EXPECT_EQ(0, memcmp(thp, src + LEN, LEN));
}

/* Compaction (page migration) after the pages are mapped: the next DMA must follow (pinned
 * pages are not migrated).
 */
TEST_F(coherence, compaction_then_dma)
{
	uint8_t *src = big_alloc(2 * LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd;
	int cfd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	fill(src, LEN, 22);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	cfd = open("/proc/sys/vm/compact_memory", O_WRONLY);
	ASSERT_LE(0, cfd);
	EXPECT_EQ(1, write(cfd, "1", 1));
	close(cfd);
	fill(src, LEN, 23);
	memset(dst, 0, LEN);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	EXPECT_EQ(0, memcmp(dst, src, LEN));
}

/* THP collapse (MADV_COLLAPSE) of small pages the device has mapped (refused for pinned
 * pages). The range stays MADV_NOHUGEPAGE until just before the collapse: khugepaged could
 * otherwise collapse it first in the background (before the pin, or before the counters are
 * read), and MADV_COLLAPSE of a range that is already huge succeeds with nothing to do.
 */
TEST_F(coherence, thp_collapse_then_dma)
{
	uint8_t *src = big_alloc(LEN), *al = thp_alloc(2 << 20);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, h1;
	int collapsed;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, al);
	fill(src, LEN, 24);
	madvise(al, 2 << 20, MADV_NOHUGEPAGE);
	memset(al, 7, 2 << 20);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, al, 2 << 20, WR, variant->mode, NO_WINDOW, &h1));
	EXPECT_EQ(0, copy_wait(self->fd, src, al, 2 << 20));
	c0 = counters(self->fd);
	madvise(al, 2 << 20, MADV_HUGEPAGE);
	collapsed = !madvise(al, 2 << 20, 25 /* MADV_COLLAPSE */);
	c1 = counters(self->fd);
	TH_LOG("collapse %s", collapsed ? "done" : strerror(errno));
	EXPECT_EQ(0, copy_wait(self->fd, src + (2 << 20), al, 2 << 20));
	EXPECT_EQ(0, memcmp(al, src + (2 << 20), 2 << 20));
	if (variant->notifier && collapsed) {
		EXPECT_LT(c0.invalidations, c1.invalidations);
	}
	if (variant->pins) {
		EXPECT_FALSE(collapsed) TH_LOG("pinned pages cannot be collapsed");
	}
}

/* Swap: page the source out to zram, then DMA from it (pinned pages are not reclaimed). */
TEST_F(coherence, swap_out_then_dma)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	fill(src, LEN, 25);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN)); /* source mapped for the device */
	c0 = counters(self->fd);
	ASSERT_EQ(0, madvise(src, LEN, 21 /* MADV_PAGEOUT */));
	memset(dst, 0, LEN);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	EXPECT_EQ(0, memcmp(dst, src, LEN));
	if (variant->notifier) {
		EXPECT_LT(c0.invalidations, c1.invalidations);
	} else {
		EXPECT_EQ(0, c1.invalidations);
	}
}

/* Many faults on all channels at once. */
TEST_F(coherence, faults_on_all_channels)
{
	enum { BIG = 4 << 20 };
	uint8_t *src = big_alloc(BIG), *dst = big_alloc(BIG);
	struct exanest_dma_counters c0;
	uint64_t cookies[16];
	uint32_t hs, hd;
	int n = 0, st = -1;

	if (variant->pins)
		SKIP(return, "pinned pages take no fault");
	reg2(_metadata, self->fd, variant->mode, src, dst, BIG, &hs, &hd);
	fill(src, BIG, 26);
	ASSERT_EQ(0, madvise(dst, BIG, MADV_DONTNEED));
	c0 = counters(self->fd);
	for (int i = 0; i < 16; i++)
		n += !copy(self->fd, src + i * (BIG / 16), dst + i * (BIG / 16), BIG / 16, &cookies[i]);
	ASSERT_EQ(16, n);
	for (int i = 0; i < 16; i++) {
		EXPECT_EQ(0, wait_cookie(self->fd, cookies[i], 20 * SEC, &st, NULL));
		EXPECT_EQ(0, st);
	}
	EXPECT_EQ(0, memcmp(dst, src, BIG));
	EXPECT_LT(c0.faults, counters(self->fd).faults);
}

/* Touch-ahead per region: window 0 takes one fault per page, a larger one fewer. */
TEST_F(coherence, touch_ahead_window)
{
	enum { WLEN = 2 << 20 };
	static const uint32_t window[3] = { 0, 16, 256 };
	uint64_t f[3];

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages are mapped, the engine never faults");
	for (int i = 0; i < 3; i++) {
		uint8_t *src = big_alloc(WLEN), *dst = big_alloc(WLEN);
		struct exanest_dma_counters c0, c1;
		uint32_t hs, hd;

		ASSERT_NE(NULL, src);
		ASSERT_NE(NULL, dst);
		/* 4 KiB pages: a fault on a huge page maps all of it, whatever the window. */
		ASSERT_EQ(0, madvise(src, WLEN, MADV_NOHUGEPAGE));
		ASSERT_EQ(0, madvise(dst, WLEN, MADV_NOHUGEPAGE));
		fill(src, WLEN, i);
		ASSERT_EQ(0, reg(self->fd, src, WLEN, RD, variant->mode, window[i], &hs));
		ASSERT_EQ(0, reg(self->fd, dst, WLEN, WR, variant->mode, window[i], &hd));
		FAULT_ON_DST_OR_SKIP(dst, WLEN);
		c0 = counters(self->fd);
		EXPECT_EQ(0, copy_wait(self->fd, src, dst, WLEN)) TH_LOG("window %u", window[i]);
		c1 = counters(self->fd);
		EXPECT_EQ(0, memcmp(src, dst, WLEN)) TH_LOG("window %u", window[i]);
		f[i] = c1.faults - c0.faults;
		TH_LOG("touch-ahead %u pages: %llu faults for 2 x %d MiB", window[i],
		       (unsigned long long)f[i], WLEN >> 20);
		EXPECT_EQ(0, dereg(self->fd, hs));
		EXPECT_EQ(0, dereg(self->fd, hd));
		munmap(src, WLEN);
		munmap(dst, WLEN);
	}
	/* Window 0: one fault per page, of both buffers (on demand) or the destination (prefault). */
	EXPECT_LE((variant->faults ? 2 : 1) * PAGES(WLEN), f[0]);
	EXPECT_LT(f[1] * 8, f[0]);
	EXPECT_LT(f[2], f[1]);
}

/*
 * Strided copies (4 KiB every 64 KiB, the default window): the adaptive policy recognises the
 * stride and maps the pages the next copies will touch, not those between. The copies fault a
 * few times per region instead of once each, map at most 1.5 pages per page they touch, and a
 * predicted page that the mm drops and the CPU rewrites before its copy is read anew (the
 * notifier unmapped it). Before stride prediction every copy faulted on each region.
 */
TEST_F(coherence, strided_copies_are_predicted)
{
	enum { STRIDE = 64 << 10, N = LEN / STRIDE };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint64_t faults, mapped, regions = variant->faults ? 2 : 1;
	uint32_t hs, hd;

	if (variant->pins)
		SKIP(return, "pin mode: pinned pages are mapped, the engine never faults");
	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	/* Small pages: dropping one page of a THP would split it, and drop its mappings whole. */
	ASSERT_EQ(0, madvise(src, LEN, MADV_NOHUGEPAGE));
	ASSERT_EQ(0, madvise(dst, LEN, MADV_NOHUGEPAGE));
	fill(src, LEN, 5);
	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	FAULT_ON_DST_OR_SKIP(dst, LEN);
	c0 = counters(self->fd);
	for (int i = 0; i < N; i++) {
		if (i == N / 2) {
			/* Predicted by now (the stream is established): dropped and rewritten. */
			ASSERT_EQ(0, madvise(src + (size_t)(i + 1) * STRIDE, 4096, MADV_DONTNEED));
			memset(src + (size_t)(i + 1) * STRIDE, 0xc3, 4096);
		}
		ASSERT_EQ(0, copy_wait(self->fd, src + (size_t)i * STRIDE, dst + (size_t)i * STRIDE,
				       4096)) TH_LOG("copy %d", i);
	}
	c1 = counters(self->fd);
	for (int i = 0; i < N; i++) {
		EXPECT_EQ(0, memcmp(src + (size_t)i * STRIDE, dst + (size_t)i * STRIDE, 4096))
			TH_LOG("copy %d", i);
	}
	EXPECT_TRUE(all_bytes(dst + (size_t)(N / 2 + 1) * STRIDE, 4096, 0xc3));
	faults = c1.faults - c0.faults;
	mapped = c1.pages_resolved - c0.pages_resolved;
	TH_LOG("%d strided copies: %llu faults, %llu pages mapped for %llu touched", N,
	       (unsigned long long)faults, (unsigned long long)mapped,
	       (unsigned long long)(regions * N));
	/* Without prediction: N faults per region. The dropped page faults once more. */
	EXPECT_GE(regions * N / 4, faults);
	EXPECT_GE(regions * N * 3 / 2, mapped);
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
	munmap(src, LEN);
	munmap(dst, LEN);
}

/* Advise: map ahead, then the copy takes no fault (a pinned region: nothing to do). */
TEST_F(coherence, advise_then_no_faults)
{
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1;
	uint32_t hs, hd;

	reg2(_metadata, self->fd, variant->mode, src, dst, LEN, &hs, &hd);
	fill(src, LEN, 99);
	EXPECT_EQ(0, advise(self->fd, src, LEN, 0));
	EXPECT_EQ(0, advise(self->fd, dst, LEN, EXANEST_DMA_ADVISE_WRITE));
	c0 = counters(self->fd);
	EXPECT_LE(2 * PAGES(LEN), c0.pages_mapped);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	c1 = counters(self->fd);
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	EXPECT_EQ(c0.faults, c1.faults);
	EXPECT_EQ(variant->pins ? 2 * PAGES(LEN) : 0, c1.pages_pinned);
}

TEST_HARNESS_MAIN

static uint64_t hist_sum(const __u64 *h)
{
	uint64_t n = 0;

	for (int i = 0; i < EXANEST_DMA_LATENCY_BUCKETS; i++)
		n += h[i];
	return n;
}

/*
 * The IOMMU reports a fault by page. A region that starts inside the page (here a source of
 * 2 KiB in the middle of one page, the only memory that faults) must still be found, so the
 * IOMMU's report resolves the fault: the `handler` stage counts it. When the engine's report
 * came first, the interrupt thread resolved the page with it, and the IOMMU's report, still
 * queued, is served by the fault thread up to 50 us later (Documentation/design.rst, "Where
 * faults are served"): waited for, up to a second. Only with the SMMU's fault events kept
 * (smmu_fault_events=1).
 */
TEST_F(coherence, iommu_report_resolves_region_inside_a_page)
{
	uint8_t *page = big_alloc(8192), *dst = big_alloc(8192);
	struct exanest_dma_latency lat;
	uint32_t hs, hd;

	if (variant->mode != EXANEST_DMA_MODE_ON_DEMAND)
		SKIP(return, "%s mode: the source is mapped at registration, nothing faults",
		     variant->mode == EXANEST_DMA_MODE_PIN ? "pin" : "prefault");
	if (!smmu_events())
		SKIP(return, "the SMMU records no fault of the driver's domains (default)");
	fill(page, 8192, 61);
	memset(dst, 0, 8192);
	ASSERT_EQ(0, reg(self->fd, page + 0x400, 0x800, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, 8192, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hd));
	EXPECT_EQ(0, copy_wait(self->fd, page + 0x400, dst, 0x800));
	EXPECT_EQ(0, memcmp(page + 0x400, dst, 0x800));
	for (int i = 0; i < 1000; i++) {
		ASSERT_EQ(0, xioctl(self->fd, EXANEST_DMA_IOC_LATENCY, &lat));
		if (hist_sum(lat.handler))
			break;
		usleep(1000);
	}
	EXPECT_LE(1, hist_sum(lat.total)) TH_LOG("the engine faulted on the source");
	EXPECT_LE(1, hist_sum(lat.handler)) TH_LOG("the IOMMU's report resolved no fault");
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
}
