// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: kernel patch 0008's lookup of a one-page range in hmm_range_fault()
 * and hmm_range_fault_vma() (hmm_range_one() in mm/hmm.c), which the
 * driver's lone-page faults take, against HMM's generic page walk, on a user
 * mapping of the test's own mm. A range of one page must give what a range of
 * two pages (the walk) gives for its first page, with the same result: a
 * hole, a page faulted in for writing, a present page asked for nothing, the
 * zero page (which the lookup leaves to the walk), and a write asked of a
 * read-only mapping (-EPERM); a VMA that does not hold the range is -EINVAL.
 * Built into the module with KUnit, run when it is loaded (make check).
 *
 * Copyright (c) 2026 ExaNeSt DMA developers
 */

#include <kunit/test.h>
#include <linux/hmm.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/mmu_notifier.h>

static bool hmm_one_invalidate(struct mmu_interval_notifier *mni,
			       const struct mmu_notifier_range *range,
			       unsigned long cur_seq)
{
	mmu_interval_set_seq(mni, cur_seq);
	return true;
}

static const struct mmu_interval_notifier_ops hmm_one_ops = {
	.invalidate = hmm_one_invalidate,
};

/*
 * hmm_range_fault() of @npages from @addr, each asking @req, under the mmap
 * read lock, again while an invalidation moved the notifier's sequence; with
 * @in, hmm_range_fault_vma() with the VMA that holds @in.
 */
static int hmm_one_fault(struct mmu_interval_notifier *mni, unsigned long addr,
			 unsigned long npages, unsigned long req,
			 unsigned long *pfns, unsigned long in)
{
	struct vm_area_struct *vma;
	struct mm_struct *mm = mni->mm;
	struct hmm_range range = {
		.notifier = mni,
		.start = addr,
		.end = addr + npages * PAGE_SIZE,
		.hmm_pfns = pfns,
		.default_flags = req,
	};
	unsigned long i;
	int ret;

	do {
		for (i = 0; i < npages; i++)
			pfns[i] = 0;
		range.notifier_seq = mmu_interval_read_begin(mni);
		mmap_read_lock(mm);
		vma = in ? vma_lookup(mm, in) : NULL;
		if (!in)
			ret = hmm_range_fault(&range);
		else if (vma)
			ret = hmm_range_fault_vma(&range, vma);
		else
			ret = -EFAULT;
		mmap_read_unlock(mm);
	} while (ret == -EBUSY);
	return ret;
}

/*
 * Page @addr asked @req alone (the lookup, then the walk if it declines), alone
 * in its VMA given (hmm_range_fault_vma()) and with the next page (the walk):
 * same result, same entry. Returns the entry.
 */
static unsigned long hmm_one_same(struct kunit *test,
				  struct mmu_interval_notifier *mni,
				  unsigned long addr, unsigned long req,
				  int want)
{
	unsigned long one[1], vma[1], two[2];

	KUNIT_EXPECT_EQ(test, hmm_one_fault(mni, addr, 1, req, one, 0), want);
	KUNIT_EXPECT_EQ(test, hmm_one_fault(mni, addr, 1, req, vma, addr), want);
	KUNIT_EXPECT_EQ(test, hmm_one_fault(mni, addr, 2, req, two, 0), want);
	if (!want) {
		KUNIT_EXPECT_EQ(test, one[0], two[0]);
		KUNIT_EXPECT_EQ(test, vma[0], two[0]);
	}
	return one[0];
}

static void hmm_one_matches_the_walk(struct kunit *test)
{
	unsigned long addr, ro, p;
	struct mmu_interval_notifier *mni;

	addr = kunit_vm_mmap(test, NULL, 0, 4 * PAGE_SIZE,
			     PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE,
			     0);
	KUNIT_ASSERT_TRUE_MSG(test, addr && addr < TASK_SIZE,
			      "no user mapping: %lx", addr);
	ro = kunit_vm_mmap(test, NULL, 0, 2 * PAGE_SIZE, PROT_READ,
			   MAP_ANONYMOUS | MAP_PRIVATE, 0);
	KUNIT_ASSERT_TRUE_MSG(test, ro && ro < TASK_SIZE,
			      "no user mapping: %lx", ro);
	mni = kunit_kzalloc(test, sizeof(*mni), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, mni);
	KUNIT_ASSERT_EQ(test, mmu_interval_notifier_insert(mni, current->mm, 0,
							   TASK_SIZE,
							   &hmm_one_ops), 0);

	/* A hole, nothing asked: no entry. */
	p = hmm_one_same(test, mni, addr, 0, 0);
	KUNIT_EXPECT_FALSE(test, p & HMM_PFN_VALID);

	/* A write asked: faulted in, valid and writable. */
	p = hmm_one_same(test, mni, addr,
			 HMM_PFN_REQ_FAULT | HMM_PFN_REQ_WRITE, 0);
	KUNIT_EXPECT_TRUE(test, p & HMM_PFN_VALID);
	KUNIT_EXPECT_TRUE(test, p & HMM_PFN_WRITE);
	KUNIT_EXPECT_EQ(test, hmm_pfn_to_map_order(p), 0U);

	/* The present page asked for nothing, or for reading: the same page. */
	KUNIT_EXPECT_EQ(test, hmm_one_same(test, mni, addr, 0, 0), p);
	KUNIT_EXPECT_EQ(test, hmm_one_same(test, mni, addr, HMM_PFN_REQ_FAULT, 0),
			p);

	/* A read asked of a page never written: the zero page, valid, read-only. */
	p = hmm_one_same(test, mni, addr + 2 * PAGE_SIZE, HMM_PFN_REQ_FAULT, 0);
	KUNIT_EXPECT_TRUE(test, p & HMM_PFN_VALID);
	KUNIT_EXPECT_FALSE(test, p & HMM_PFN_WRITE);

	/* A write asked of a read-only mapping: refused. */
	hmm_one_same(test, mni, ro, HMM_PFN_REQ_FAULT | HMM_PFN_REQ_WRITE,
		     -EPERM);

	/* A VMA that does not hold the range: refused before any lookup. */
	KUNIT_EXPECT_EQ(test, hmm_one_fault(mni, addr, 1, 0, &p, ro), -EINVAL);

	mmu_interval_notifier_remove(mni);
}

static struct kunit_case hmm_one_cases[] = {
	KUNIT_CASE(hmm_one_matches_the_walk),
	{}
};

static struct kunit_suite hmm_one_suite = {
	.name = "exanest_dma_hmm_one",
	.test_cases = hmm_one_cases,
};

kunit_test_suite(hmm_one_suite);
