// SPDX-License-Identifier: GPL-2.0-only

//! The per-process IOMMU domain.
//!
//! A [`Domain`] is a paging domain whose IOVAs are one process's virtual addresses. It is
//! attached to the function of the engine context the process holds, and moves with the process
//! from context to context (contexts.rs): its mappings stay while it is detached. Each IOVA page
//! is mapped by one owner at a time: a pinned page by the pinned-page map (pinned.rs), else a
//! page faulted in on demand by the mirror (odp.rs).
//!
//! The domain lives under `Process::map` (lock order: process.rs); its attachment has a lock of
//! its own, `Domain::attached`, last in the order: attaching allocates (and may reclaim, which
//! may call the MMU notifier, which takes `Process::map`), so it is never done under `map`.

use crate::ffi;
use core::ptr::NonNull;
use kernel::{
    bindings, device,
    error::to_result,
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::{aref::ARef, Arc, Mutex},
};

/// How a domain's faults reach its fault handler (module parameters).
#[derive(Clone, Copy)]
pub(crate) struct Reports {
    /// Install the handler after the first attach, not before: exists to test that the SMMU
    /// driver looks the handler up when a fault is reported. No DMA of the process can run
    /// between its first attach and the handler, since it has no copy yet.
    pub(crate) late_handler: bool,
    /// Keep the IOMMU's own report of each fault (an SMMU event, which the SMMU driver hands
    /// to the handler). Off, where the IOMMU can stop recording a domain's faults
    /// (`IOMMU_CAP_NO_FAULT_EVENTS`: this project's kernel patch 6, SMMUv3's CD.R), the
    /// engine's report is the only one: for every fault the engine raises, the IOMMU's is a
    /// duplicate that costs the driver a call from the SMMU's event thread and a deferred pass
    /// of the fault thread (Documentation/design.rst, "The IOMMU's report of a fault").
    pub(crate) iommu_events: bool,
}

/// Where a domain is attached, and whether its fault handler is installed.
struct Attachment {
    dev: Option<ARef<device::Device>>,
    handler_set: bool,
}

/// An IOMMU paging domain, attached to at most one device at a time; detached and freed on drop.
///
/// # Invariants
///
/// `raw` is a live paging domain, allocated by `new`; it is attached to `attached.dev` when that
/// is `Some`, and to nothing otherwise; nothing else frees, attaches or detaches it.
#[pin_data(PinnedDrop)]
pub(crate) struct Domain {
    raw: NonNull<bindings::iommu_domain>,
    handler: bindings::iommu_fault_handler_t,
    token: *mut core::ffi::c_void,
    #[pin]
    attached: Mutex<Attachment>,
}

// SAFETY: The IOMMU API may be called on a domain from any thread; the domain has no thread
// affinity, and `token` is only handed to the IOMMU core.
unsafe impl Send for Domain {}
// SAFETY: `&Domain` maps and unmaps, which the IOMMU core serialises per domain (the page table
// code takes its own lock; concurrent callers of the driver hold `Process::map` anyway), and
// attaches or detaches under `attached`.
unsafe impl Sync for Domain {}

impl Domain {
    /// Allocate a paging domain suited to `dev` (any function of the engine: they sit behind one
    /// SMMU), whose faults go to `handler` with `token` as `reports` says, attached to nothing
    /// yet. The handler is installed before the first attach unless `reports.late_handler`:
    /// the IOMMU core installs a handler and its token with plain stores, so a fault reported
    /// while they change could see one without the other.
    ///
    /// # Safety
    ///
    /// `token` must stay valid for `handler` until the domain is dropped.
    pub(crate) unsafe fn new(
        dev: &device::Device,
        handler: bindings::iommu_fault_handler_t,
        token: *mut core::ffi::c_void,
        reports: Reports,
    ) -> Result<Arc<Self>> {
        let late = reports.late_handler;
        let raw = ffi::domain_alloc(dev)?;
        if !reports.iommu_events && ffi::no_fault_events_capable(dev) {
            // SAFETY: `raw` is a live paging domain, attached to nothing: the request takes
            // effect at its attaches.
            unsafe { bindings::iommu_set_fault_events(raw.as_ptr(), false) };
        }
        if !late {
            // SAFETY: `raw` is live and attached to nothing; the caller keeps `token` valid as
            // long as the domain lives.
            unsafe { bindings::iommu_set_fault_handler(raw.as_ptr(), handler, token) };
        }
        let init = pin_init!(Domain {
            raw,
            handler,
            token,
            attached <- new_mutex!(Attachment { dev: None, handler_set: !late }, "Domain::attached"),
        });
        Arc::pin_init(init, GFP_KERNEL).inspect_err(|_| {
            // SAFETY: Allocated above, never attached, and no `Domain` owns it.
            unsafe { bindings::iommu_domain_free(raw.as_ptr()) };
        })
    }

    /// Attach the domain to `dev` (a context's function, on its default domain): EBUSY when it
    /// is attached elsewhere.
    pub(crate) fn attach(&self, dev: ARef<device::Device>) -> Result {
        let mut a = self.attached.lock();
        if a.dev.is_some() {
            return Err(EBUSY);
        }
        // SAFETY: `raw` is live and attached to nothing (type invariant, `a.dev` is `None`);
        // `dev` is a live device, referenced.
        let ret = unsafe { bindings::iommu_attach_device(self.raw.as_ptr(), ffi::raw_dev(&dev)) };
        to_result(ret)?;
        if !a.handler_set {
            // SAFETY: `raw` is live; the creator keeps `token` valid as long as the domain lives.
            unsafe {
                bindings::iommu_set_fault_handler(self.raw.as_ptr(), self.handler, self.token)
            };
            a.handler_set = true;
        }
        // INVARIANT: Attached to `dev` above.
        a.dev = Some(dev);
        Ok(())
    }

    /// Detach the domain from its device, which goes back to its default domain. The caller
    /// has stopped the device's DMA first.
    pub(crate) fn detach(&self) {
        let mut a = self.attached.lock();
        if let Some(dev) = a.dev.take() {
            // SAFETY: By the type invariant `raw` is attached to `dev`; after this it is
            // attached to nothing, which `a.dev` now says.
            unsafe { bindings::iommu_detach_device(self.raw.as_ptr(), ffi::raw_dev(&dev)) };
        }
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
        let gfp = map_gfp(atomic);
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

    /// Map page `i` of the range at `iova` to `phys[i]` (page-aligned addresses), with one walk
    /// of the page table per table of it (kernel patch 0007); `atomic` as [`Domain::map`]'s. On
    /// an error nothing of the range stays mapped.
    pub(crate) fn map_array(&self, iova: u64, phys: &[u64], prot: u32, atomic: bool) -> Result {
        // SAFETY: `raw` is a live domain (type invariant); `phys` is valid for `phys.len()`
        // reads for the call. Mapping never touches the memory at those addresses; what makes
        // the mappings correct is the caller's business, as for `iommu_map`.
        to_result(unsafe {
            bindings::iommu_map_array(
                self.raw.as_ptr(),
                iova as usize,
                phys.as_ptr(),
                phys.len(),
                prot as i32,
                map_gfp(atomic),
            )
        })
    }

    pub(crate) fn unmap(&self, iova: u64, size: usize) -> usize {
        // SAFETY: `raw` is a live domain (type invariant). iommu_unmap() flushes the IOTLB
        // before returning.
        unsafe { bindings::iommu_unmap(self.raw.as_ptr(), iova as usize, size) }
    }
}

/// The allocation flags of a mapping's page tables: charged to the memory cgroup of the
/// process the mapping is for (the fault thread runs in its scope). Atomic failures are
/// expected under pressure: the caller reclaims and retries, so they are not reported.
fn map_gfp(atomic: bool) -> bindings::gfp_t {
    if atomic {
        let account = bindings::GFP_KERNEL_ACCOUNT & !bindings::GFP_KERNEL;
        bindings::GFP_ATOMIC | bindings::__GFP_NOWARN | account
    } else {
        bindings::GFP_KERNEL_ACCOUNT
    }
}

/// What the on-demand mirror (odp.rs) needs of a domain: map and unmap. KUnit gives it a fake
/// that also checks that no IOVA is mapped twice.
pub(crate) trait IoPageTable {
    /// Map `size` bytes at `iova` (see [`Domain::map_size`]).
    fn map_size(&self, iova: u64, phys: u64, size: usize, prot: u32, atomic: bool) -> Result;
    /// Map page `i` at `iova` on to `phys[i]` (see [`Domain::map_array`]).
    fn map_array(&self, iova: u64, phys: &[u64], prot: u32, atomic: bool) -> Result;
    /// Unmap `size` bytes at `iova`; returns the bytes unmapped (see [`Domain::unmap`]).
    fn unmap(&self, iova: u64, size: usize) -> usize;
}

impl IoPageTable for Domain {
    fn map_size(&self, iova: u64, phys: u64, size: usize, prot: u32, atomic: bool) -> Result {
        Domain::map_size(self, iova, phys, size, prot, atomic)
    }

    fn map_array(&self, iova: u64, phys: &[u64], prot: u32, atomic: bool) -> Result {
        Domain::map_array(self, iova, phys, prot, atomic)
    }

    fn unmap(&self, iova: u64, size: usize) -> usize {
        Domain::unmap(self, iova, size)
    }
}

#[pinned_drop]
impl PinnedDrop for Domain {
    fn drop(self: Pin<&mut Self>) {
        self.detach();
        // SAFETY: `raw` is live and, detached above, attached to nothing; nothing else
        // references it (`Domain` is not `Clone`), so it is freed once.
        unsafe { bindings::iommu_domain_free(self.raw.as_ptr()) };
    }
}
