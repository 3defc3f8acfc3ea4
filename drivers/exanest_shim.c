// SPDX-License-Identifier: GPL-2.0-only
/*
 * C shim of the ExaNeSt DMA module: wrappers for static inline kernel functions that Rust cannot
 * call through kernel::bindings. No logic lives here.
 */
#include <linux/iommu.h>
#include <linux/mm.h>

#include "exanest_shim.h"

phys_addr_t exanest_shim_page_to_phys(struct page *page)
{
	return page_to_phys(page);
}

struct iommu_domain *exanest_shim_domain_alloc(struct device *dev)
{
	return iommu_paging_domain_alloc(dev);
}
