// SPDX-License-Identifier: GPL-2.0-only
/*
 * C shim of the ExaNeSt DMA module: wrappers for static inline kernel functions that Rust cannot
 * call through kernel::bindings. No logic lives here.
 */
#include <linux/fs.h>
#include <linux/hmm.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/memcontrol.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/iommu.h>
#include <linux/irq_work.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/file.h>
#include <linux/poll.h>
#include <linux/slab.h>

#include "exanest_shim.h"

const __poll_t exanest_shim_pollin = EPOLLIN | EPOLLRDNORM;
const __poll_t exanest_shim_pollhup = EPOLLERR | EPOLLHUP;

phys_addr_t exanest_shim_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

struct iommu_domain *exanest_shim_domain_alloc(struct device *dev)
{
	return iommu_paging_domain_alloc(dev);
}

/*
 * The Rust miscdevice abstraction has no poll. Every engine's misc device gets one shared copy of
 * the file operations the abstraction generated, with .poll added. It lives until module unload,
 * which the files' module reference delays until no file is open.
 */
static struct file_operations exanest_fops;
static DEFINE_MUTEX(exanest_fops_lock);

static __poll_t exanest_shim_poll(struct file *file, struct poll_table_struct *pt)
{
	return exanest_rust_poll(file, pt);
}

void exanest_shim_add_poll(struct miscdevice *misc)
{
	mutex_lock(&exanest_fops_lock);
	if (!exanest_fops.open) {
		exanest_fops = *misc->fops;
		exanest_fops.poll = exanest_shim_poll;
	}
	mutex_unlock(&exanest_fops_lock);
	/* misc_open() reads ->fops under misc_mtx for each open. */
	WRITE_ONCE(misc->fops, &exanest_fops);
}

/*
 * On-demand paging: HMM and the interval notifier, whose helpers are static inline or whose
 * structures Rust cannot see (linux/hmm.h).
 */

/*
 * Fault in [start, end) of the notifier's mm for device access (read, or write too) and return
 * one HMM pfn per page in pfns and the notifier sequence to check with
 * exanest_shim_read_retry() under the driver lock. Takes the mmap lock itself.
 */
int exanest_shim_hmm_fault(struct mmu_interval_notifier *mni, unsigned long start,
			   unsigned long end, bool write, unsigned long *pfns,
			   unsigned long *seq)
{
	struct hmm_range range = {
		.notifier = mni,
		.start = start,
		.end = end,
		.hmm_pfns = pfns,
		.default_flags = HMM_PFN_REQ_FAULT | (write ? HMM_PFN_REQ_WRITE : 0),
	};
	int ret;

	ret = hmm_range_fault_unlocked_timeout(&range,
					       msecs_to_jiffies(HMM_RANGE_DEFAULT_TIMEOUT));
	*seq = range.notifier_seq;
	return ret;
}

bool exanest_shim_read_retry(struct mmu_interval_notifier *mni, unsigned long seq)
{
	return mmu_interval_read_retry(mni, seq);
}

phys_addr_t exanest_shim_hmm_pfn_to_phys(unsigned long hpfn)
{
	return page_to_phys(hmm_pfn_to_page(hpfn));
}

bool exanest_shim_hmm_pfn_writable(unsigned long hpfn)
{
	return !!(hpfn & HMM_PFN_WRITE);
}

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
 * The fault thread of one process: runs exanest_rust_fault_work(token) after every kick. A kernel
 * thread rather than a work item because fault-in may sleep for as long as user space wants
 * (userfaultfd, FUSE), and only a thread can be told to give up: the thread accepts SIGKILL,
 * which ends killable waits in the fault path (mmap lock, handle_userfault, GUP) with -EINTR.
 */
struct exanest_thread {
	struct task_struct *task;
	void *token;
	unsigned long kicked;
	bool stopping;
};

static int exanest_thread_fn(void *data)
{
	struct exanest_thread *t = data;

	allow_signal(SIGKILL);
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (READ_ONCE(t->stopping) || kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		if (!test_and_clear_bit(0, &t->kicked)) {
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		exanest_rust_fault_work(t->token);
	}
	/* kthread_stop() may not have been called yet: wait for it, it always comes. */
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
	return 0;
}

/* Start the fault thread "exanest-fault/<id>", sleeping until kicked. */
struct exanest_thread *exanest_shim_thread_start(void *token, int id, int *err)
{
	struct exanest_thread *t = kzalloc(sizeof(*t), GFP_KERNEL_ACCOUNT);
	struct task_struct *task;

	if (!t) {
		*err = -ENOMEM;
		return NULL;
	}
	t->token = token;
	task = kthread_create(exanest_thread_fn, t, "exanest-fault/%d", id);
	if (IS_ERR(task)) {
		*err = PTR_ERR(task);
		kfree(t);
		return NULL;
	}
	get_task_struct(task);
	t->task = task;
	wake_up_process(task);
	return t;
}

/* Any context, hard IRQ included; after exanest_shim_thread_stop() it does nothing. */
void exanest_shim_thread_kick(struct exanest_thread *t)
{
	set_bit(0, &t->kicked);
	wake_up_process(t->task);
}

/*
 * Make the thread give up what it is doing (SIGKILL) and wait for it to exit. Idempotent; the
 * structure stays valid for kicks until exanest_shim_thread_free().
 */
void exanest_shim_thread_stop(struct exanest_thread *t)
{
	if (READ_ONCE(t->stopping))
		return;
	WRITE_ONCE(t->stopping, true);
	send_sig(SIGKILL, t->task, 1);
	kthread_stop(t->task);
}

void exanest_shim_thread_free(struct exanest_thread *t)
{
	exanest_shim_thread_stop(t);
	put_task_struct(t->task);
	kfree(t);
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
 * pci_disable_sriov() removes the VFs with pci_stop_and_remove_bus_device(), which wants
 * pci_rescan_remove_lock held (drivers/pci/remove.c:128), and no exported function takes it for
 * a driver's remove. When the PF itself is being removed, its remove runs with the lock held,
 * after pci_stop_dev() cleared PCI_DEV_ADDED (drivers/pci/remove.c:24; bit 0 of priv_flags,
 * drivers/pci/pci.h:812, a private header). On rmmod or a sysfs unbind it runs without the lock,
 * which is then taken here, after the PF's device lock, as sriov_numvfs_store() does.
 */
void exanest_shim_disable_sriov(struct pci_dev *pf)
{
	bool removing = !test_bit(0, &pf->priv_flags);

	if (!removing)
		pci_lock_rescan_remove();
	pci_disable_sriov(pf);
	if (!removing)
		pci_unlock_rescan_remove();
}

/*
 * The doorbell page (a context's VF BAR0) is mapped at fault time, never at mmap: its context
 * can be taken from the process while it is idle (contexts.rs), which zaps the mapping, and the
 * next access faults it back. The fault asks Rust for the page under the fault's lock
 * (mmap or VMA lock). When the queue has no context, waiting for one must not hold that lock:
 * taking a context takes the driver's locks, under which pinning takes the mmap lock. So the
 * lock is dropped (the file pinned meanwhile), the wait runs, and the access is retried.
 */
static vm_fault_t exanest_doorbell_fault(struct vm_fault *vmf)
{
	struct file *file = vmf->vma->vm_file;
	int err = exanest_rust_doorbell_fault(file, vmf);

	if (!err)
		return VM_FAULT_NOPAGE;
	if (err == -ENOMEM)
		return VM_FAULT_OOM;
	if (err != -EAGAIN)
		return VM_FAULT_SIGBUS;
	/* A user access may retry; anything else (no GUP reaches a VM_IO page) may not. */
	if (!(vmf->flags & FAULT_FLAG_ALLOW_RETRY) ||
	    (vmf->flags & FAULT_FLAG_RETRY_NOWAIT))
		return VM_FAULT_SIGBUS;
	get_file(file);
	release_fault_lock(vmf);
	/* Its result shows at the retry: the page, SIGBUS, or (on a signal) the signal first. */
	exanest_rust_doorbell_wait(file);
	fput(file);
	return VM_FAULT_RETRY;
}

static const struct vm_operations_struct exanest_doorbell_ops = {
	.fault = exanest_doorbell_fault,
};

/*
 * Set up a new VMA of exactly one page for a context's doorbell: device memory, uncached, as
 * ioremap() maps it for the kernel, VM_IO | VM_PFNMAP, filled by exanest_doorbell_fault().
 */
int exanest_shim_map_doorbell(struct vm_area_struct *vma)
{
	if (vma->vm_end - vma->vm_start != PAGE_SIZE)
		return -EINVAL;
	vma->vm_page_prot = pgprot_device(vma->vm_page_prot);
	vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &exanest_doorbell_ops;
	return 0;
}

/* Map the doorbell page at @phys where @vmf faulted: 0, -ENOMEM, or -EFAULT. */
int exanest_shim_insert_doorbell(struct vm_fault *vmf, phys_addr_t phys)
{
	vm_fault_t ret;

	if (!PAGE_ALIGNED(phys))
		return -EFAULT;
	ret = vmf_insert_pfn(vmf->vma, vmf->address & PAGE_MASK, PHYS_PFN(phys));
	if (ret == VM_FAULT_NOPAGE)
		return 0;
	return ret == VM_FAULT_OOM ? -ENOMEM : -EFAULT;
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
