/* SPDX-License-Identifier: GPL-2.0-only */
/* The C shim's functions, called from Rust (iommu.rs, exanest_main.rs declare them again). */
#ifndef EXANEST_SHIM_H
#define EXANEST_SHIM_H

#include <linux/types.h>

struct device;
struct file;
struct iommu_domain;
struct miscdevice;
struct page;
struct poll_table_struct;

phys_addr_t exanest_shim_page_to_phys(struct page *page);
struct iommu_domain *exanest_shim_domain_alloc(struct device *dev);
void exanest_shim_add_poll(struct miscdevice *misc);

/* Defined in Rust (session.rs). */
__poll_t exanest_rust_poll(struct file *file, struct poll_table_struct *pt);

#endif /* EXANEST_SHIM_H */
