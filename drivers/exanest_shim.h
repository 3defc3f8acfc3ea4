/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The C shim's functions, called from Rust. drivers/ffi.rs is generated from this header by
 * bindgen at build time, so this is the only declaration of the interface.
 */
#ifndef EXANEST_SHIM_H
#define EXANEST_SHIM_H

#include <linux/types.h>

struct device;
struct file;
struct iommu_domain;
struct mm_struct;
struct mmu_interval_notifier;
struct page;
struct pci_dev;
struct poll_table_struct;
struct address_space;
struct vm_area_struct;
struct vm_fault;
struct vm_operations_struct;

/* EPOLLIN | EPOLLRDNORM and EPOLLERR | EPOLLHUP (bindgen cannot expand the __force casts). */
extern const __poll_t exanest_shim_pollin;
extern const __poll_t exanest_shim_pollhup;

u64 exanest_shim_stamp_ns(void);
/* exanest_shim_stamp_setup()'s flag, above the scale's shift (< 64) in its low 32 bits. */
#define EXANEST_STAMP_DIRECT 0x100
u64 exanest_shim_stamp_setup(void);
phys_addr_t exanest_shim_page_to_phys(struct page *page);
struct iommu_domain *exanest_shim_domain_alloc(struct device *dev);

int exanest_shim_hmm_fault(struct mmu_interval_notifier *mni, struct vm_area_struct *vma,
			   unsigned long start, unsigned long end, bool write, unsigned long run,
			   unsigned long stride, const unsigned long *mask, unsigned long *pfns,
			   unsigned long *seq);
bool exanest_shim_read_retry(struct mmu_interval_notifier *mni, unsigned long seq);
struct vm_area_struct *exanest_shim_vma_lookup(struct mm_struct *mm, unsigned long addr,
					       struct vm_area_struct **hint,
					       unsigned int *hint_seq);
extern const unsigned long exanest_shim_hmm_pfn_write;
extern const unsigned long exanest_shim_hmm_pfn_flags;
unsigned int exanest_shim_hmm_pfn_order(unsigned long hpfn);
struct mmu_interval_notifier *exanest_shim_notifier_insert(struct mm_struct *mm,
							   unsigned long start,
							   unsigned long length, void *token,
							   int *err);
void exanest_shim_notifier_remove(struct mmu_interval_notifier *mni);
void exanest_shim_set_seq(struct mmu_interval_notifier *mni, unsigned long cur_seq);
bool exanest_shim_call_in_hardirq(void (*fn)(void *arg), void *arg);
unsigned long exanest_shim_hmm_pfn_make(unsigned long pfn, bool write, unsigned int order);

void exanest_shim_allow_sigkill(void);
void exanest_shim_set_state_interruptible(void);
void exanest_shim_set_state_running(void);
bool exanest_shim_memcg_enter(struct mm_struct *mm, void **old);
void exanest_shim_memcg_exit(void *old);
void exanest_shim_map_doorbell(struct vm_area_struct *vma,
			       const struct vm_operations_struct *ops);
/* A vm_fault_t (linux/mm_types.h is too heavy for the bindings). */
unsigned int exanest_shim_insert_pfn(struct vm_fault *vmf, unsigned long pfn);
struct file *exanest_shim_vmf_file(struct vm_fault *vmf);
void exanest_shim_release_fault_lock(struct vm_fault *vmf);
void exanest_shim_vf_memory_on(struct pci_dev *vf);
struct pci_dev *exanest_shim_pci_get_vf(struct pci_dev *pf, int id);
struct address_space *exanest_shim_vma_mapping(struct vm_area_struct *vma);
struct device *exanest_shim_of_context_create(struct device *parent, u32 n, void *owner);
void exanest_shim_of_context_destroy(struct device *dev, void *owner);
void exanest_shim_zap(struct address_space *mapping, u64 offset);

/* Defined in Rust (device.rs, odp.rs, fault.rs). */
bool exanest_rust_invalidate(void *token, struct mmu_interval_notifier *mni,
			     unsigned long start, unsigned long end, bool blockable,
			     unsigned long cur_seq);

#endif /* EXANEST_SHIM_H */
