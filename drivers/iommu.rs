// SPDX-License-Identifier: GPL-2.0-only

//! The per-process IOMMU domain.
//!
//! A [`Domain`] is a paging domain attached to one engine while one process owns it; its IOVAs
//! are that process's virtual addresses. Each IOVA page is mapped by one owner at a time: a
//! pinned page by the pinned-page map (pinned.rs), else a page faulted in on demand by the
//! mirror (odp.rs).
//!
//! Nothing here locks: the domain lives under `Process::map` (lock order: process.rs).

use crate::ffi;
use core::ptr::NonNull;
use kernel::{bindings, device, error::to_result, page::PAGE_SIZE, prelude::*, sync::aref::ARef};

/// An IOMMU paging domain attached to a device; detached and freed on drop.
///
/// # Invariants
///
/// `raw` is a live paging domain, allocated for `dev` and attached to it, with the fault
/// handler installed at attach; nothing else frees or detaches it.
pub(crate) struct Domain {
    raw: NonNull<bindings::iommu_domain>,
    dev: ARef<device::Device>,
}

// SAFETY: The IOMMU API may be called on a domain from any thread; the domain has no thread
// affinity.
unsafe impl Send for Domain {}
// SAFETY: `&Domain` only maps and unmaps, which the IOMMU core serialises per domain (the page
// table code takes its own lock); concurrent callers of the driver hold `Process::map` anyway.
unsafe impl Sync for Domain {}

impl Domain {
    /// Allocate a paging domain for `dev`, install the fault handler, and attach it, replacing
    /// the default DMA domain. The handler is installed before the attach unless `late`: the
    /// IOMMU core installs a handler and its token with plain stores, so a fault reported
    /// while they change could see one without the other. `late` (a module parameter) exists
    /// to test that the SMMU driver looks the handler up when a fault is reported; no DMA can
    /// run between the attach and the handler here, since no copy can be queued yet.
    ///
    /// # Safety
    ///
    /// `token` must stay valid for `handler` until the domain is dropped.
    pub(crate) unsafe fn attach(
        dev: ARef<device::Device>,
        handler: bindings::iommu_fault_handler_t,
        token: *mut core::ffi::c_void,
        late: bool,
    ) -> Result<Self> {
        let raw = ffi::domain_alloc(&dev)?;
        if !late {
            // SAFETY: `raw` is a fresh domain that nothing else uses; the caller keeps `token`
            // valid for `handler` as long as the domain lives.
            unsafe { bindings::iommu_set_fault_handler(raw.as_ptr(), handler, token) };
        }
        // SAFETY: `raw` is a domain we own, not attached anywhere, and `dev` a valid device.
        let ret = unsafe { bindings::iommu_attach_device(raw.as_ptr(), ffi::raw_dev(&dev)) };
        if ret != 0 {
            // SAFETY: Allocated above, never attached.
            unsafe { bindings::iommu_domain_free(raw.as_ptr()) };
            return Err(Error::from_errno(ret));
        }
        if late {
            // SAFETY: `raw` is live and attached; no DMA of this process can run yet (see
            // above), and the caller keeps `token` valid as long as the domain lives.
            unsafe { bindings::iommu_set_fault_handler(raw.as_ptr(), handler, token) };
        }
        // INVARIANT: Allocated for `dev` and attached to it above.
        Ok(Domain { raw, dev })
    }

    /// End of the usable IOVA range (exclusive): the domain's aperture.
    pub(crate) fn aperture_end(&self) -> u64 {
        // SAFETY: `raw` is a live domain (type invariant); the geometry is set at allocation and
        // not changed afterwards.
        let end = unsafe { (*self.raw.as_ptr()).geometry.aperture_end };
        end.saturating_add(1)
    }

    /// Map one page. `atomic` when called under a lock that an MMU notifier takes (the page
    /// tables are then allocated without entering reclaim, which could call that notifier).
    pub(crate) fn map(&self, iova: u64, phys: u64, prot: u32, atomic: bool) -> Result {
        self.map_size(iova, phys, PAGE_SIZE, prot, atomic)
    }

    /// Map `size` bytes (a page or an aligned block the domain supports).
    pub(crate) fn map_size(
        &self,
        iova: u64,
        phys: u64,
        size: usize,
        prot: u32,
        atomic: bool,
    ) -> Result {
        // Page tables are charged to the memory cgroup of the process the mapping is for (the
        // fault thread runs in its scope). Atomic failures are expected under pressure: the
        // caller reclaims and retries, so they are not reported.
        let gfp = if atomic {
            let account = bindings::GFP_KERNEL_ACCOUNT & !bindings::GFP_KERNEL;
            bindings::GFP_ATOMIC | bindings::__GFP_NOWARN | account
        } else {
            bindings::GFP_KERNEL_ACCOUNT
        };
        // SAFETY: `raw` is a live domain (type invariant). Mapping never touches the memory at
        // `phys`; what makes the mapping correct (a pin, or an HMM sequence check under the
        // notifier's lock) is the caller's business, as `iommu_map` allows.
        to_result(unsafe {
            bindings::iommu_map(
                self.raw.as_ptr(),
                iova as usize,
                phys,
                size,
                prot as i32,
                gfp,
            )
        })
    }

    pub(crate) fn unmap(&self, iova: u64, size: usize) -> usize {
        // SAFETY: `raw` is a live domain (type invariant). iommu_unmap() flushes the IOTLB
        // before returning.
        unsafe { bindings::iommu_unmap(self.raw.as_ptr(), iova as usize, size) }
    }
}

/// What the on-demand mirror (odp.rs) needs of a domain: map and unmap. KUnit gives it a fake
/// that also checks that no IOVA is mapped twice.
pub(crate) trait IoPageTable {
    /// Map `size` bytes at `iova` (see [`Domain::map_size`]).
    fn map_size(&self, iova: u64, phys: u64, size: usize, prot: u32, atomic: bool) -> Result;
    /// Unmap `size` bytes at `iova`; returns the bytes unmapped (see [`Domain::unmap`]).
    fn unmap(&self, iova: u64, size: usize) -> usize;
}

impl IoPageTable for Domain {
    fn map_size(&self, iova: u64, phys: u64, size: usize, prot: u32, atomic: bool) -> Result {
        Domain::map_size(self, iova, phys, size, prot, atomic)
    }

    fn unmap(&self, iova: u64, size: usize) -> usize {
        Domain::unmap(self, iova, size)
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `raw` is attached to `dev`, and this is its only
        // detach; after it the device is back on its default domain and nothing else
        // references `raw` (it is not `Clone`), so it is freed once.
        unsafe {
            bindings::iommu_detach_device(self.raw.as_ptr(), ffi::raw_dev(&self.dev));
            bindings::iommu_domain_free(self.raw.as_ptr());
        }
    }
}
