// SPDX-License-Identifier: GPL-2.0-only
/*
 * C shim of the ExaNeSt DMA module: wrappers for what Rust cannot reach through kernel::bindings
 * (static inline functions, macros, fields of anonymous structs). No decision lives here: the
 * callers, in Rust, decide.
 */
#include <linux/fs.h>
#include <linux/hmm.h>
#include <linux/jiffies.h>
#include <linux/memcontrol.h>
#include <linux/sched/signal.h>
#include <linux/iommu.h>
#include <linux/irq_work.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/of.h>
#include <linux/of_platform.h>
#include <linux/platform_device.h>
#include <linux/pci.h>
#include <linux/file.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/clocksource.h>
#include <clocksource/arm_arch_timer.h>
#include <asm/arch_timer.h>

#include "exanest_shim.h"

const __poll_t exanest_shim_pollin = EPOLLIN | EPOLLRDNORM;
const __poll_t exanest_shim_pollhup = EPOLLERR | EPOLLHUP;

/*
 * The fault path's stamps: the architected counter (arch_timer_read_counter(), with its
 * errata workarounds) scaled to nanoseconds, the clock that ktime_get() reads too, without
 * the timekeeper's sequence count and clocksource indirection around it (ktime_get_ns() is 67
 * instructions a read under -icount, and a fault takes seven stamps: the engine's writes'
 * fault service 5.76 -> 5.60 us at p50). The scale (mult << 32 | shift) is computed at the
 * first read.
 */
static u64 exanest_stamp_scale;

static u64 exanest_stamp_scale_get(void)
{
	u64 scale = READ_ONCE(exanest_stamp_scale);

	if (unlikely(!scale)) {
		u32 mult, shift;

		clocks_calc_mult_shift(&mult, &shift, arch_timer_get_cntfrq(), NSEC_PER_SEC, 3600);
		scale = (u64)mult << 32 | shift;
		WRITE_ONCE(exanest_stamp_scale, scale);
	}
	return scale;
}

u64 exanest_shim_stamp_ns(void)
{
	u64 scale = exanest_stamp_scale_get();

	return mul_u64_u32_shr(arch_timer_read_counter(), scale >> 32, (u32)scale);
}

/* Whether a CPU reads the counter through an erratum's workaround. */
static bool exanest_counter_has_wa(void)
{
#ifdef CONFIG_ARM_ARCH_TIMER_OOL_WORKAROUND
	int cpu;

	for_each_possible_cpu(cpu)
		if (per_cpu(timer_unstable_counter_workaround, cpu))
			return true;
#endif
	return false;
}

/*
 * The stamps' scale, with EXANEST_STAMP_DIRECT set when the caller may read CNTVCT_EL0 itself
 * (ISB, then MRS: arch_timer_read_cntvct_el0() without ECV) instead of calling
 * exanest_shim_stamp_ns(): no CPU needs a workaround to read the counter, and
 * arch_timer_read_counter() reads that same counter (three reads in order, each no earlier
 * than the one before: the physical counter with a virtual offset fails this). Inline, a
 * stamp is 9 instructions instead of 37 (-icount, make profile).
 */
u64 exanest_shim_stamp_setup(void)
{
	u64 scale = exanest_stamp_scale_get(), a, b, c;

	if (!IS_ENABLED(CONFIG_ARM64) || exanest_counter_has_wa())
		return scale;
	a = arch_timer_read_cntvct_el0();
	b = arch_timer_read_counter();
	c = arch_timer_read_cntvct_el0();
	return a <= b && b <= c ? scale | EXANEST_STAMP_DIRECT : scale;
}

phys_addr_t exanest_shim_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

struct iommu_domain *exanest_shim_domain_alloc(struct device *dev)
{
	return iommu_paging_domain_alloc(dev);
}

/*
 * On-demand paging: HMM and the interval notifier, whose helpers are static inline or whose
 * structures Rust cannot see (linux/hmm.h).
 */

/*
 * Whether page i of a range is asked for: with a mask (a bitmap with a bit per page of the
 * range), if its bit is set; with a stride, if it is in its first run; else all of them.
 */
static bool exanest_hmm_wanted(unsigned long i, unsigned long run, unsigned long stride,
			       const unsigned long *mask)
{
	if (mask)
		return test_bit(i, mask);
	return !stride || i % stride < run;
}

/*
 * vma_lookup() for the thread that serves a process's faults under the mmap read lock of its
 * mm, fault after fault in the same VMA: the VMA it found last (*hint), if no writer has held
 * the mmap lock since it was found there and it holds addr; else vma_lookup()'s, which becomes
 * the hint. VMAs are changed and freed only under the mmap write lock, and every write lock
 * moves the mm's lock sequence (mm_lock_seq, CONFIG_PER_VMA_LOCK: what uprobes' speculative
 * lookup relies on), which is stable under the read lock: the hint is used only while the
 * sequence is the one *hint_seq recorded with it (written after the hint, read before it:
 * a hint read with the current sequence was found under this very hold or a concurrent one
 * of the same lock). The maple tree walk was 117 of a device fault's 4,082 instructions
 * (-icount). hint and hint_seq belong to mm alone: a VMA of another mm must never be found
 * there.
 */
struct vm_area_struct *exanest_shim_vma_lookup(struct mm_struct *mm, unsigned long addr,
					       struct vm_area_struct **hint,
					       unsigned int *hint_seq)
{
#ifdef CONFIG_PER_VMA_LOCK
	unsigned int seq = READ_ONCE(mm->mm_lock_seq.sequence);
	struct vm_area_struct *vma;

	mmap_assert_locked(mm);
	if (READ_ONCE(*hint_seq) == seq) {
		/* Pairs with the smp_wmb() below: the hint written before its sequence. */
		smp_rmb();
		vma = READ_ONCE(*hint);
		if (vma && addr >= vma->vm_start && addr < vma->vm_end)
			return vma;
	}
	vma = vma_lookup(mm, addr);
	if (vma) {
		WRITE_ONCE(*hint, vma);
		/* Pairs with the smp_rmb() above: the hint before its sequence. */
		smp_wmb();
		WRITE_ONCE(*hint_seq, seq);
	}
	return vma;
#else
	return vma_lookup(mm, addr);
#endif
}

/* Whether a snapshot's pfn is a present page (and writable, for a write). */
static bool exanest_hmm_present(unsigned long p, bool write)
{
	return (p & HMM_PFN_VALID) && (!write || (p & HMM_PFN_WRITE));
}

/*
 * Whether every page asked for is present in the snapshot that hmm_range_fault() took with no
 * fault requested.
 */
static bool exanest_hmm_all_present(struct hmm_range *range, bool write, unsigned long run,
				    unsigned long stride, const unsigned long *mask)
{
	unsigned long i, n = (range->end - range->start) >> PAGE_SHIFT;

	for (i = 0; i < n; i++)
		if (exanest_hmm_wanted(i, run, stride, mask) &&
		    !exanest_hmm_present(range->hmm_pfns[i], write))
			return false;
	return true;
}

/*
 * The snapshot of a lone page of vma, under a fresh notifier sequence (range->notifier_seq),
 * for the thread that holds the mmap lock, with no fault requested: hmm_range_fault_vma() of
 * one page, which kernel patch 0008 looks up in vma without the generic page walk when it is
 * a normal page present with the access asked, or when nothing is there (the walk cost 1.2 us
 * for the one page, -icount: as much as the fault itself, 1.7 us; the lookup 0.53; the VMA
 * not looked up again, 0.12 less). Returns whether the page is present (with write access,
 * for a write).
 */
static bool exanest_lookup_one(struct hmm_range *range, struct vm_area_struct *vma, bool write)
{
	range->notifier_seq = mmu_interval_read_begin(range->notifier);
	range->hmm_pfns[0] = 0;
	return !hmm_range_fault_vma(range, vma) && exanest_hmm_present(range->hmm_pfns[0], write);
}

/*
 * exanest_shim_hmm_fault() for a thread that must not sleep on the mm (the engine's interrupt
 * thread serving a fault inline), called with the mmap read lock of vma's mm held, which it
 * keeps: -EWOULDBLOCK when the range is not in vma, vma is not anonymous or lacks the access,
 * or when a fault would wait (for I/O, a page lock, userfaultfd: FAULT_FLAG_RETRY_NOWAIT) or
 * fails. The fault thread then resolves it the way that may sleep, and gives any error. Faults
 * in the missing pages asked for one by one, as HMM would, then takes the snapshot under a
 * fresh notifier sequence (mmu_interval_read_begin() under the mmap lock: the lock order of
 * an invalidation under it). A single page for writing is faulted in without a snapshot
 * first: it is the page that faulted, and a device writes mostly to memory never touched,
 * where the snapshot would only find it missing. A single page for reading gets the snapshot
 * first: a device reads mostly what the CPU wrote, present in the mm though not in the IOMMU,
 * which the snapshot alone resolves (handle_mm_fault() on a present page walks the page table
 * only to mark it young; window-0 copy, read faults' fault-in 2.27 -> 1.82 us at p50). A lone
 * page's snapshot is exanest_lookup_one()'s (fault-in 1.82 -> 1.12 us for a read, 3.48 -> 2.79
 * for a write, GUP's lookup in between); a page it does not find after the fault (made
 * read-only again meanwhile, say) goes to the fault thread, which resolves it through HMM.
 */
/*
 * handle_mm_fault() of the page at addr of vma, under its mm's mmap read lock, which the caller
 * holds and keeps: 0 once faulted in, else nonzero (a fault that would wait, or failed). With
 * RETRY_NOWAIT the lock is kept, but for a fault that completed (which an anonymous VMA's
 * never does): the caller's lock is taken again, and vma must not be used after that.
 */
static int exanest_fault_page(struct vm_area_struct *vma, unsigned long addr, unsigned int flags)
{
	vm_fault_t f = handle_mm_fault(vma, addr, flags, NULL);

	if (f & VM_FAULT_COMPLETED) {
		mmap_read_lock(vma->vm_mm);
		return 1;
	}
	return (f & (VM_FAULT_RETRY | VM_FAULT_ERROR)) ? 1 : 0;
}

static int exanest_hmm_fault_locked(struct hmm_range *range, struct vm_area_struct *vma,
				    bool write, unsigned long run, unsigned long stride,
				    const unsigned long *mask)
{
	struct mm_struct *mm = range->notifier->mm;
	unsigned int flags = FAULT_FLAG_REMOTE | FAULT_FLAG_ALLOW_RETRY | FAULT_FLAG_RETRY_NOWAIT |
			     (write ? FAULT_FLAG_WRITE : 0);
	unsigned long need = write ? VM_WRITE : VM_READ;
	unsigned long i, n = (range->end - range->start) >> PAGE_SHIFT;
	bool snapshot = n > 1 || !write;

	mmap_assert_locked(mm);
	if (vma->vm_mm != mm || range->start < vma->vm_start || range->end > vma->vm_end ||
	    !vma_is_anonymous(vma) || !(vma->vm_flags & need))
		return -EWOULDBLOCK;
	range->default_flags = 0;
	range->pfn_flags_mask = 0;
	if (n == 1 && exanest_hmm_wanted(0, run, stride, mask)) {
		/* A lone page, the interrupt thread's usual fault: the loop below, unrolled. */
		if (!write && exanest_lookup_one(range, vma, false))
			return 0;
		if (exanest_fault_page(vma, range->start, flags))
			return -EWOULDBLOCK;
		return exanest_lookup_one(range, vma, write) ? 0 : -EWOULDBLOCK;
	}
	if (snapshot && n == 1) {
		if (exanest_lookup_one(range, vma, write))
			return 0;
	} else if (snapshot) {
		range->notifier_seq = mmu_interval_read_begin(range->notifier);
		if (hmm_range_fault(range))
			return -EWOULDBLOCK;
		if (exanest_hmm_all_present(range, write, run, stride, mask))
			return 0;
	}
	for (i = 0; i < n; i++) {
		if (!exanest_hmm_wanted(i, run, stride, mask) ||
		    (snapshot && exanest_hmm_present(range->hmm_pfns[i], write)))
			continue;
		if (exanest_fault_page(vma, range->start + (i << PAGE_SHIFT), flags))
			return -EWOULDBLOCK;
	}
	/* The faults may have invalidated the range (a COW break): a fresh sequence. */
	if (n == 1)
		return exanest_lookup_one(range, vma, write) ? 0 : -EWOULDBLOCK;
	range->notifier_seq = mmu_interval_read_begin(range->notifier);
	if (hmm_range_fault(range) || !exanest_hmm_all_present(range, write, run, stride, mask))
		return -EWOULDBLOCK;
	return 0;
}

/*
 * Fault in [start, end) of the notifier's mm for device access (read, or write too) and return
 * one HMM pfn per page in pfns and the notifier sequence to check with
 * exanest_shim_read_retry() under the driver lock. With vma NULL, takes the mmap lock itself
 * and may sleep; else the caller holds the mmap read lock of vma's mm and must not sleep on the
 * mm (exanest_hmm_fault_locked()). With a mask (a bit per page of the range), only the pages
 * whose bit is set are faulted in; else with a stride (in pages, > 0), only the first run pages
 * of every stride. The others are reported as they are (HMM_PFN_VALID only if present), and
 * must not be used.
 */
int exanest_shim_hmm_fault(struct mmu_interval_notifier *mni, struct vm_area_struct *vma,
			   unsigned long start, unsigned long end, bool write, unsigned long run,
			   unsigned long stride, const unsigned long *mask, unsigned long *pfns,
			   unsigned long *seq)
{
	unsigned long req = HMM_PFN_REQ_FAULT | (write ? HMM_PFN_REQ_WRITE : 0);
	struct hmm_range range = {
		.notifier = mni,
		.start = start,
		.end = end,
		.hmm_pfns = pfns,
		.default_flags = req,
	};
	unsigned long i;
	int ret;

	if (vma) {
		ret = exanest_hmm_fault_locked(&range, vma, write, run, stride, mask);
		*seq = range.notifier_seq;
		return ret;
	}
	if (stride || mask) {
		/* Per-page requests: the input pfns say which pages to fault in. */
		range.default_flags = 0;
		range.pfn_flags_mask = HMM_PFN_REQ_FAULT | HMM_PFN_REQ_WRITE;
		for (i = 0; i < (end - start) >> PAGE_SHIFT; i++)
			pfns[i] = exanest_hmm_wanted(i, run, stride, mask) ? req : 0;
	}

	ret = hmm_range_fault_unlocked_timeout(&range,
					       msecs_to_jiffies(HMM_RANGE_DEFAULT_TIMEOUT));
	*seq = range.notifier_seq;
	return ret;
}

bool exanest_shim_read_retry(struct mmu_interval_notifier *mni, unsigned long seq)
{
	return mmu_interval_read_retry(mni, seq);
}

/*
 * The bits of an HMM pfn entry (linux/hmm.h) that the driver tests itself for every page it
 * maps (a call per test cost some 20 instructions a page, -icount): the write flag, and the
 * flag bits above the pfn.
 */
const unsigned long exanest_shim_hmm_pfn_write = HMM_PFN_WRITE;
const unsigned long exanest_shim_hmm_pfn_flags = HMM_PFN_FLAGS;

/* Order of the CPU mapping of the page (9 for a PMD-mapped THP with 4 KiB pages). */
unsigned int exanest_shim_hmm_pfn_order(unsigned long hpfn)
{
	return hmm_pfn_to_map_order(hpfn);
}

struct exanest_mni {
	struct mmu_interval_notifier mni;
	void *token;
};

static bool exanest_invalidate(struct mmu_interval_notifier *mni,
			       const struct mmu_notifier_range *range,
			       unsigned long cur_seq)
{
	struct exanest_mni *e = container_of(mni, struct exanest_mni, mni);

	return exanest_rust_invalidate(e->token, mni, range->start, range->end,
				       mmu_notifier_range_blockable(range), cur_seq);
}

static const struct mmu_interval_notifier_ops exanest_mni_ops = {
	.invalidate = exanest_invalidate,
};

/* Watch [start, start + length) of mm; invalidations call exanest_rust_invalidate(token...). */
struct mmu_interval_notifier *exanest_shim_notifier_insert(struct mm_struct *mm,
							   unsigned long start,
							   unsigned long length, void *token,
							   int *err)
{
	struct exanest_mni *e = kzalloc(sizeof(*e), GFP_KERNEL);

	if (!e) {
		*err = -ENOMEM;
		return NULL;
	}
	e->token = token;
	*err = mmu_interval_notifier_insert(&e->mni, mm, start, length, &exanest_mni_ops);
	if (*err) {
		kfree(e);
		return NULL;
	}
	return &e->mni;
}

/* Stop watching; waits for invalidations in progress. Call without the driver lock. */
void exanest_shim_notifier_remove(struct mmu_interval_notifier *mni)
{
	mmu_interval_notifier_remove(mni);
	kfree(container_of(mni, struct exanest_mni, mni));
}

/* Under the driver lock, from the invalidate callback. */
void exanest_shim_set_seq(struct mmu_interval_notifier *mni, unsigned long cur_seq)
{
	mmu_interval_set_seq(mni, cur_seq);
}

/*
 * The fault thread's loop is Rust's (ffi.rs, FaultThread); these are the inline or macro parts
 * of a kernel thread's life that Rust cannot call.
 */
void exanest_shim_allow_sigkill(void)
{
	allow_signal(SIGKILL);
}

void exanest_shim_set_state_interruptible(void)
{
	set_current_state(TASK_INTERRUPTIBLE);
}

void exanest_shim_set_state_running(void)
{
	__set_current_state(TASK_RUNNING);
}

/*
 * Charge what the current (fault) thread allocates with __GFP_ACCOUNT to the memory cgroup of
 * mm's owner. Returns false (nothing to undo) without memory cgroups.
 */
bool exanest_shim_memcg_enter(struct mm_struct *mm, void **old)
{
#ifdef CONFIG_MEMCG
	struct mem_cgroup *memcg = get_mem_cgroup_from_mm(mm);

	*old = set_active_memcg(memcg);
	return true;
#else
	return false;
#endif
}

void exanest_shim_memcg_exit(void *old)
{
#ifdef CONFIG_MEMCG
	struct mem_cgroup *memcg = set_active_memcg(old);

	mem_cgroup_put(memcg);
#endif
}

#if IS_ENABLED(CONFIG_KUNIT)
/* KUnit: run fn(arg) in hard-IRQ context (an irq_work raised on this CPU); report if it was. */
struct exanest_hardirq_call {
	struct irq_work work;
	void (*fn)(void *arg);
	void *arg;
	bool in_hardirq;
};

static void exanest_hardirq_fn(struct irq_work *work)
{
	struct exanest_hardirq_call *c = container_of(work, struct exanest_hardirq_call, work);

	c->in_hardirq = in_hardirq();
	c->fn(c->arg);
}

bool exanest_shim_call_in_hardirq(void (*fn)(void *arg), void *arg)
{
	struct exanest_hardirq_call c = {
		.work = IRQ_WORK_INIT_HARD(exanest_hardirq_fn),
		.fn = fn,
		.arg = arg,
	};

	if (!irq_work_queue(&c.work))
		return false;
	irq_work_sync(&c.work);
	return c.in_hardirq;
}

/* KUnit: an HMM pfn as hmm_range_fault() returns it for a present page. */
unsigned long exanest_shim_hmm_pfn_make(unsigned long pfn, bool write, unsigned int order)
{
	return pfn | HMM_PFN_VALID | (write ? HMM_PFN_WRITE : 0) |
	       ((unsigned long)order << HMM_PFN_ORDER_SHIFT);
}
#endif

/*
 * Set up a new VMA for a context's doorbell page: device memory, uncached, as ioremap() maps it
 * for the kernel, VM_IO | VM_PFNMAP, filled by @ops' fault (device.rs).
 */
void exanest_shim_map_doorbell(struct vm_area_struct *vma,
			       const struct vm_operations_struct *ops)
{
	vma->vm_page_prot = pgprot_device(vma->vm_page_prot);
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = ops;
}

/* Map @pfn at the page @vmf faulted in: its vm_fault_t. */
unsigned int exanest_shim_insert_pfn(struct vm_fault *vmf, unsigned long pfn)
{
	return (__force unsigned int)vmf_insert_pfn(vmf->vma, vmf->address & PAGE_MASK, pfn);
}

/* The file the faulting VMA maps. */
struct file *exanest_shim_vmf_file(struct vm_fault *vmf)
{
	return vmf->vma->vm_file;
}

void exanest_shim_release_fault_lock(struct vm_fault *vmf)
{
	release_fault_lock(vmf);
}

/*
 * Turn on memory decoding in a VF's own command register, so that its BAR (the context's
 * doorbell page) answers. The VF has no driver to do it with pci_enable_device().
 */
void exanest_shim_vf_memory_on(struct pci_dev *vf)
{
	u16 cmd;

	pci_read_config_word(vf, PCI_COMMAND, &cmd);
	if (!(cmd & PCI_COMMAND_MEMORY))
		pci_write_config_word(vf, PCI_COMMAND, cmd | PCI_COMMAND_MEMORY);
}

/*
 * Virtual function id of pf, referenced (pci_dev_put() it), or NULL. pci_domain_nr() and
 * pci_physfn() are inline, and pci_iov_virtfn_bus() is not exported: the VF is looked up on
 * the PF's bus by its exported devfn, and only a VF of this PF is returned.
 */
struct pci_dev *exanest_shim_pci_get_vf(struct pci_dev *pf, int id)
{
	int devfn = pci_iov_virtfn_devfn(pf, id);
	struct pci_dev *vf;

	if (devfn < 0)
		return NULL;
	vf = pci_get_domain_bus_and_slot(pci_domain_nr(pf->bus), pf->bus->number, devfn);
	if (vf && (!vf->is_virtfn || pci_physfn(vf) != pf)) {
		pci_dev_put(vf);
		vf = NULL;
	}
	return vf;
}

/* The address space of the file a new VMA maps (the device inode's, for the doorbell). */
struct address_space *exanest_shim_vma_mapping(struct vm_area_struct *vma)
{
	return vma->vm_file ? vma->vm_file->f_mapping : NULL;
}

/*
 * Zap every mapping of the page at @offset of @mapping: a doorbell whose context is gone. Later
 * accesses fault, and a VM_PFNMAP without a fault handler gets SIGBUS.
 */
void exanest_shim_zap(struct address_space *mapping, u64 offset)
{
	unmap_mapping_range(mapping, offset, PAGE_SIZE, 1);
}

/*
 * Context @n of an engine on the devicetree front-end: a platform device for the child node of
 * @parent's node with compatible "exanest,pldma-1.0-context" and reg @n. The node has its own
 * "iommus" (the context's StreamID), so the device has its own IOMMU group; it is taken for DMA
 * ownership by @owner at once: the IOMMU blocks its DMA until a domain is attached, and (with
 * kernel patch 0009 on arm-smmu) holds no context bank for it meanwhile. Devices are made one
 * at a time, so each default domain gives its bank back before the next is made. Returns the
 * device with a reference for the caller, NULL when there is no such node, ERR_PTR(-ENODEV)
 * when the node has no IOMMU, ERR_PTR(-EBUSY) when the node already has a device.
 */
struct device *exanest_shim_of_context_create(struct device *parent, u32 n, void *owner)
{
	struct platform_device *pdev;
	struct device_node *child;
	int ret;
	u32 reg;

	for_each_available_child_of_node(parent->of_node, child) {
		if (!of_device_is_compatible(child, "exanest,pldma-1.0-context") ||
		    of_property_read_u32(child, "reg", &reg) || reg != n)
			continue;
		pdev = of_platform_device_create(child, NULL, parent);
		of_node_put(child);
		if (!pdev)
			return ERR_PTR(-EBUSY);
		if (!device_iommu_mapped(&pdev->dev)) {
			of_platform_device_destroy(&pdev->dev, NULL);
			return ERR_PTR(-ENODEV);
		}
		ret = iommu_device_claim_dma_owner(&pdev->dev, owner);
		if (ret) {
			of_platform_device_destroy(&pdev->dev, NULL);
			return ERR_PTR(ret);
		}
		return get_device(&pdev->dev);
	}
	return NULL;
}

/* Undo exanest_shim_of_context_create(@dev, @owner), the caller's reference included. */
void exanest_shim_of_context_destroy(struct device *dev, void *owner)
{
	iommu_device_release_dma_owner(dev);
	of_platform_device_destroy(dev, NULL);
	put_device(dev);
}
