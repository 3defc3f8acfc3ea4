// SPDX-License-Identifier: GPL-2.0-only

//! The per-process IOMMU domain and the pinned pages mapped into it.
//!
//! A [`Domain`] is a paging domain attached to one engine while one process owns it; its IOVAs
//! are that process's virtual addresses. [`PageMap`] keeps one entry per pinned page with the
//! number of regions that use it, so regions may share pages (two small buffers in one page) and
//! a page is unmapped only when its last region goes.
//!
//! Nothing here locks: the domain lives under `Process::map`, the [`PageMap`] under
//! `Process::inner` (lock order: process.rs).

use crate::ffi;
use core::ptr::NonNull;
use kernel::{
    bindings, device,
    error::to_result,
    mm::Mm,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    rbtree::RBTree,
    sync::aref::ARef,
};

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
        let gfp = if atomic {
            bindings::GFP_ATOMIC
        } else {
            bindings::GFP_KERNEL
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

/// One pinned, mapped page.
///
/// # Invariants
///
/// `page` holds exactly one pin of ours (`FOLL_LONGTERM`, writable when `write`), and the page
/// is mapped at its virtual address in the domain with that access while the entry exists.
/// `refs` > 0.
struct PageEntry {
    /// The pinned page (one pin, ours).
    page: NonNull<bindings::page>,
    /// Mapped writable for the device.
    write: bool,
    /// Regions using the page.
    refs: u32,
}

// SAFETY: A pinned page may be unpinned from any thread; the entry is only a pointer and flags.
unsafe impl Send for PageEntry {}

/// Pages to pin in one `pin_user_pages_fast` call.
const PIN_BATCH: usize = 512;

/// The pinned and mapped pages of one domain, keyed by virtual page number. Every pinned page
/// is charged once to the owner's `RLIMIT_MEMLOCK` (`locked_vm`), as `ib_umem` does: over the
/// limit pinning fails with ENOMEM, unless the caller has `CAP_IPC_LOCK`.
pub(crate) struct PageMap {
    tree: RBTree<u64, PageEntry>,
    scratch: KVec<*mut bindings::page>,
    pinned: u64,
    /// The owner's mm, charged for the pinned pages.
    mm: ARef<Mm>,
}

// SAFETY: `scratch` only holds page pointers between a pin call and their insertion into `tree`
// within one method call; between calls it holds no meaningful pointer. The tree's entries are
// `Send`.
unsafe impl Send for PageMap {}

impl PageMap {
    pub(crate) fn new(mm: ARef<Mm>) -> Self {
        PageMap {
            tree: RBTree::new(),
            scratch: KVec::new(),
            pinned: 0,
            mm,
        }
    }

    /// Charge `n` pages to the owner's `locked_vm` (`inc`), or give them back. ENOMEM over
    /// `RLIMIT_MEMLOCK` without `CAP_IPC_LOCK`; giving back never fails.
    fn account(&self, n: u64, inc: bool) -> Result {
        if n == 0 {
            return Ok(());
        }
        // SAFETY: `mm` is kept alive by its `ARef` (mmgrab); `account_locked_vm` takes the
        // mmap lock itself and only updates `locked_vm`, which is valid even after the
        // process's last user of the mm has gone.
        to_result(unsafe { bindings::account_locked_vm(self.mm.as_raw(), n as usize, inc) })
    }

    /// Pages pinned (and mapped) now.
    pub(crate) fn pinned(&self) -> u64 {
        self.pinned
    }

    /// Whether `vpn` is pinned and mapped with at least the access asked.
    pub(crate) fn covers(&self, vpn: u64, write: bool) -> bool {
        self.adequate(vpn, write)
    }

    fn adequate(&self, vpn: u64, write: bool) -> bool {
        matches!(self.tree.get(&vpn), Some(e) if e.write || !write)
    }

    /// Pin and map the pages `first..last` of the current process, for device reads, and
    /// writes when `write`. All or nothing: on error nothing new stays pinned or mapped.
    pub(crate) fn map_pinned(
        &mut self,
        dom: &Domain,
        first: u64,
        last: u64,
        write: bool,
    ) -> Result {
        let mut vpn = first;
        while vpn < last {
            if let Some(e) = self.tree.get_mut(&vpn) {
                if e.write || !write {
                    e.refs += 1;
                    vpn += 1;
                    continue;
                }
            }
            // A run of pages that need a (new or writable) pin.
            let mut end = vpn + 1;
            while end < last && ((end - vpn) as usize) < PIN_BATCH && !self.adequate(end, write) {
                end += 1;
            }
            if let Err(e) = self.pin_run(dom, vpn, end, write) {
                self.unmap_pages(dom, first, vpn);
                return Err(e);
            }
            vpn = end;
        }
        Ok(())
    }

    fn pin_run(&mut self, dom: &Domain, first: u64, end: u64, write: bool) -> Result {
        let n = (end - first) as usize;
        self.scratch.clear();
        self.scratch.resize(n, core::ptr::null_mut(), GFP_KERNEL)?;
        let mut flags = bindings::FOLL_LONGTERM;
        if write {
            flags |= bindings::FOLL_WRITE;
        }
        // SAFETY: `scratch` has room for `n` page pointers; the range is user memory of the
        // current process (the caller checked that it owns the session).
        let got = unsafe {
            bindings::pin_user_pages_fast(
                (first << PAGE_SHIFT) as usize,
                n as i32,
                flags,
                self.scratch.as_mut_ptr(),
            )
        };
        if got < 0 {
            return Err(Error::from_errno(got));
        }
        let got = got as usize;
        // Pages pinned for the first time (not an upgrade of a read-only pin) are charged.
        let fresh = |m: &Self, from: u64| (from..end).filter(|v| m.tree.get(v).is_none()).count();
        let charged = if got < n {
            0
        } else {
            fresh(self, first) as u64
        };
        if got == n {
            if let Err(e) = self.account(charged, true) {
                // SAFETY: The `n` entries were pinned by the call above and not installed.
                unsafe {
                    bindings::unpin_user_pages_dirty_lock(self.scratch.as_mut_ptr(), n, false)
                };
                return Err(e);
            }
        }
        if got < n {
            // SAFETY: The first `got` entries were pinned by the call above.
            unsafe { bindings::unpin_user_pages_dirty_lock(self.scratch.as_mut_ptr(), got, false) };
            return Err(EFAULT);
        }
        for i in 0..n {
            let page = self.scratch[i];
            if let Err(e) = self.install(dom, first + i as u64, page, write) {
                // Charged but not installed: given back here; installed ones by `unmap_pages`.
                let _ = self.account(fresh(self, first + i as u64) as u64, false);
                // SAFETY: Pages `i..n` were pinned above and not installed.
                unsafe {
                    bindings::unpin_user_pages_dirty_lock(
                        self.scratch.as_mut_ptr().add(i),
                        n - i,
                        false,
                    )
                };
                self.unmap_pages(dom, first, first + i as u64);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Map a freshly pinned `page` at `vpn`, taking over the pin; replaces a read-only entry.
    fn install(
        &mut self,
        dom: &Domain,
        vpn: u64,
        page: *mut bindings::page,
        write: bool,
    ) -> Result {
        let page = NonNull::new(page).ok_or(EFAULT)?;
        let iova = vpn << PAGE_SHIFT;
        // SAFETY: `page` was just pinned by `pin_run` and the pin is not released yet.
        let phys = unsafe { ffi::page_to_phys(page) };
        let prot = bindings::IOMMU_READ | if write { bindings::IOMMU_WRITE } else { 0 };
        let mut refs = 0;
        if let Some(old) = self.tree.remove(&vpn) {
            // Upgrade to writable: the new pin is what the process sees now.
            dom.unmap(iova, PAGE_SIZE);
            // SAFETY: By the `PageEntry` invariant `old.page` holds one pin of ours; the IOMMU
            // no longer maps it (unmapped just above, IOTLB flushed).
            unsafe { bindings::unpin_user_page(old.page.as_ptr()) };
            self.pinned -= 1;
            refs = old.refs;
        }
        if let Err(e) = dom.map(iova, phys, prot, false) {
            // SAFETY: `page` holds the pin `pin_run` took and that nothing else released.
            unsafe { bindings::unpin_user_page(page.as_ptr()) };
            // Pages that lost their entry are gone for the regions that used them.
            if refs > 0 {
                pr_warn!("exanest_dma: remap of page {:#x} failed: {:?}\n", iova, e);
            }
            return Err(e);
        }
        self.tree
            .try_create_and_insert(
                vpn,
                PageEntry {
                    page,
                    write,
                    refs: refs + 1,
                },
                GFP_KERNEL,
            )
            .inspect_err(|_| {
                dom.unmap(iova, PAGE_SIZE);
                // SAFETY: `page` holds the pin `pin_run` took; the mapping of it is gone.
                unsafe { bindings::unpin_user_page(page.as_ptr()) };
            })?;
        self.pinned += 1;
        Ok(())
    }

    /// Drop one use of each page `first..last`; unmap, unpin and uncharge those nobody uses
    /// any more.
    pub(crate) fn unmap_pages(&mut self, dom: &Domain, first: u64, last: u64) {
        let mut gone = 0;
        for vpn in first..last {
            let Some(e) = self.tree.get_mut(&vpn) else {
                continue;
            };
            e.refs -= 1;
            if e.refs > 0 {
                continue;
            }
            gone += u64::from(self.release(dom, vpn));
        }
        let _ = self.account(gone, false);
    }

    /// Remove the entry of `vpn`: unmap the page, then unpin it. Returns whether there was one
    /// (the caller gives back its charge).
    fn release(&mut self, dom: &Domain, vpn: u64) -> bool {
        let Some(e) = self.tree.remove(&vpn) else {
            return false;
        };
        dom.unmap(vpn << PAGE_SHIFT, PAGE_SIZE);
        let mut page = e.page.as_ptr();
        // SAFETY: By the `PageEntry` invariant this is our one pin of the page; the device
        // can no longer reach it (unmapped and the IOTLB flushed), and a page it could write
        // is marked dirty.
        unsafe { bindings::unpin_user_pages_dirty_lock(&mut page, 1, e.write) };
        self.pinned -= 1;
        true
    }

    /// Unmap, unpin and uncharge everything (teardown).
    pub(crate) fn clear(&mut self, dom: &Domain) {
        let mut gone = 0;
        loop {
            let Some(vpn) = self.tree.keys().next().copied() else {
                break;
            };
            gone += u64::from(self.release(dom, vpn));
        }
        let _ = self.account(gone, false);
    }
}
