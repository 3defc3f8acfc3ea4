/* SPDX-License-Identifier: GPL-2.0-only */
/* The C shim's functions, called from Rust (drivers/iommu.rs declares them again). */
#ifndef EXANEST_SHIM_H
#define EXANEST_SHIM_H

#include <linux/types.h>

struct device;
struct iommu_domain;
struct page;

phys_addr_t exanest_shim_page_to_phys(struct page *page);
struct iommu_domain *exanest_shim_domain_alloc(struct device *dev);

#endif /* EXANEST_SHIM_H */
