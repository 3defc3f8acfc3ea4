// SPDX-License-Identifier: GPL-2.0-only
/*
 * C shim of the ExaNeSt DMA module: wrappers for static inline kernel functions that Rust cannot
 * call through kernel::bindings. No logic lives here.
 */
#include <linux/fs.h>
#include <linux/iommu.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/poll.h>

#include "exanest_shim.h"

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
