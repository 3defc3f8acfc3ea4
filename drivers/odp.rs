// SPDX-License-Identifier: GPL-2.0-only

//! On-demand paging: resolving the engine's faults on the owning mm, and keeping the IOMMU
//! domain coherent with it through MMU interval notifiers. Nothing here pins memory.
//!
//! Two sources report a fault. The IOMMU fault handler ([`exanest_iommu_fault`], called by
//! arm-smmu-v3 with this project's patch from its event thread, or by arm-smmu from hard-IRQ
//! context) only records the page in the session's preallocated [`FaultQueue`] and kicks the
//! fault worker. The engine's interrupt reports each channel that stopped in fault-wait, with
//! the faulting address; it covers SMMU events that were lost (queue overflow, rate limits).
//! The worker resolves both the same way:
//!
//! 1. find the region (EFAULT if none, EACCES if it lacks the access);
//! 2. `mmget_not_zero` (EFAULT once the process is gone), then under the mmap read lock look
//!    up the VMA and check VM_READ/VM_WRITE (EACCES);
//! 3. plan a touch-ahead window inside the VMA, the region and the transfer;
//! 4. `hmm_range_fault` (through the shim), which calls `handle_mm_fault` for what is missing;
//! 5. under `Session::inner`, retry if the notifier sequence moved, else map the pages.
//!
//! Lock order (whole module): `Session::fault_lock` → (mmap lock, inside HMM);
//! `Engine::state` → `Session::inner` → `Session::map`. The notifier callback takes only
//! `Session::map` (try-lock when the invalidation may not block), so nothing under `map` may
//! enter reclaim: allocations there are atomic or reserved beforehand. Notifiers are removed
//! with `fault_lock` held and `inner`/`map` released, so no resolution uses one that is going
//! away and no invalidation waits on us.

use crate::abi::Range;
use crate::fault::touch_ahead;
use crate::iommu::Domain;
use kernel::{
    bindings,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

#[allow(improper_ctypes)]
extern "C" {
    fn exanest_shim_hmm_fault(
        mni: *mut bindings::mmu_interval_notifier,
        start: usize,
        end: usize,
        write: bool,
        pfns: *mut usize,
        seq: *mut usize,
    ) -> i32;
    fn exanest_shim_read_retry(mni: *mut bindings::mmu_interval_notifier, seq: usize) -> bool;
    fn exanest_shim_hmm_pfn_to_phys(hpfn: usize) -> bindings::phys_addr_t;
    fn exanest_shim_hmm_pfn_writable(hpfn: usize) -> bool;
    fn exanest_shim_hmm_pfn_order(hpfn: usize) -> u32;
    fn exanest_shim_notifier_insert(
        mm: *mut bindings::mm_struct,
        start: usize,
        length: usize,
        token: *mut core::ffi::c_void,
        err: *mut i32,
    ) -> *mut bindings::mmu_interval_notifier;
    fn exanest_shim_notifier_remove(mni: *mut bindings::mmu_interval_notifier);
    fn exanest_shim_set_seq(mni: *mut bindings::mmu_interval_notifier, cur_seq: usize);
}

/// An MMU interval notifier over one region. Removed explicitly ([`Notifier::remove`]), never
/// on drop: removal waits for invalidations, so it must not run under `Session::inner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Notifier(*mut bindings::mmu_interval_notifier);

// SAFETY: The notifier is a C object usable from any thread; the driver serialises its removal
// against its use with `Session::fault_lock`.
unsafe impl Send for Notifier {}

impl Notifier {
    /// Watch `range` of `mm`; invalidations call `exanest_rust_invalidate(token, …)`.
    pub(crate) fn insert(
        mm: *mut bindings::mm_struct,
        range: &Range,
        token: *const core::ffi::c_void,
    ) -> Result<Self> {
        let mut err = 0;
        // SAFETY: `mm` is the live mm of the calling process (the owner of the session), and
        // `token` stays valid until the notifier is removed.
        let mni = unsafe {
            exanest_shim_notifier_insert(
                mm,
                range.start as usize,
                range.len() as usize,
                token.cast_mut(),
                &mut err,
            )
        };
        if mni.is_null() {
            return Err(Error::from_errno(err));
        }
        Ok(Notifier(mni))
    }

    /// Stop watching. Waits for invalidations in progress.
    ///
    /// # Safety
    ///
    /// Called once, without `Session::inner` held, with `Session::fault_lock` held.
    pub(crate) unsafe fn remove(self) {
        // SAFETY: Per the contract, the notifier is live and not used concurrently.
        unsafe { exanest_shim_notifier_remove(self.0) };
    }

    /// Record the invalidation sequence (from the invalidate callback, under `inner`).
    ///
    /// # Safety
    ///
    /// `mni` is the notifier passed to the callback.
    pub(crate) unsafe fn set_seq(mni: *mut bindings::mmu_interval_notifier, cur_seq: usize) {
        // SAFETY: Per the contract.
        unsafe { exanest_shim_set_seq(mni, cur_seq) };
    }

    fn raw(&self) -> *mut bindings::mmu_interval_notifier {
        self.0
    }
}

/// Pages faulted in by HMM, not yet mapped: their HMM pfns and the notifier sequence.
pub(crate) struct Faulted {
    first: u64,
    pfns: KVec<usize>,
    seq: usize,
    write: bool,
}

impl Faulted {
    /// One past the last byte faulted in.
    pub(crate) fn end(&self) -> u64 {
        (self.first + self.pfns.len() as u64) << PAGE_SHIFT
    }
}

/// Pages in a 2 MiB IOMMU block (4 KiB pages).
const BLOCK_PAGES: u64 = 512;
/// Mirror entry flag: mapped writable.
const M_WRITE: u8 = 1;
/// Mirror entry flag: the first page of a 2 MiB block.
const M_BLOCK: u8 = 2;

/// The map of pages mirrored into the domain (not pinned): virtual page number → flags. A
/// 2 MiB block (for a transparent huge page) has one entry, at its first page.
pub(crate) struct Mirror {
    tree: RBTree<u64, u8>,
    blocks: u64,
}

impl Mirror {
    pub(crate) fn new() -> Self {
        Mirror {
            tree: RBTree::new(),
            blocks: 0,
        }
    }

    /// Pages mapped now.
    pub(crate) fn len(&self) -> u64 {
        self.tree
            .values()
            .map(|f| if f & M_BLOCK != 0 { BLOCK_PAGES } else { 1 })
            .sum()
    }

    /// 2 MiB blocks mapped so far.
    pub(crate) fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The entry mapping `vpn`: its first page and flags.
    fn entry(&self, vpn: u64) -> Option<(u64, u8)> {
        if let Some(f) = self.tree.get(&vpn) {
            return Some((vpn, *f));
        }
        let head = vpn & !(BLOCK_PAGES - 1);
        match self.tree.get(&head) {
            Some(f) if f & M_BLOCK != 0 => Some((head, *f)),
            _ => None,
        }
    }

    /// Whether `vpn` is mapped with at least the access asked.
    pub(crate) fn covers(&self, vpn: u64, write: bool) -> bool {
        matches!(self.entry(vpn), Some((_, f)) if f & M_WRITE != 0 || !write)
    }

    fn any_in(&self, first: u64, last: u64) -> bool {
        self.tree
            .cursor_lower_bound(&first)
            .is_some_and(|c| *c.current().0 < last)
            || self.entry(first).is_some()
    }

    fn unmap_entry(&mut self, dom: &Domain, head: u64) {
        if let Some(f) = self.tree.remove(&head) {
            let size = if f & M_BLOCK != 0 {
                BLOCK_PAGES as usize * PAGE_SIZE
            } else {
                PAGE_SIZE
            };
            dom.unmap(head << PAGE_SHIFT, size);
        }
    }

    /// Map the faulted pages, unless an invalidation ran since they were faulted in (then the
    /// caller faults again). Returns the pages newly mapped, or `None` to ask for a retry.
    /// `skip(vpn)` is true for pages the domain already maps otherwise (pinned). Where the
    /// CPU maps a transparent huge page and the whole of it was faulted in, one 2 MiB block
    /// is mapped.
    ///
    /// Runs under `Session::map`, which the notifier takes: it allocates nothing that could
    /// enter reclaim. `nodes` are tree nodes reserved beforehand, one per page of `f`.
    pub(crate) fn map(
        &mut self,
        dom: &Domain,
        mni: Notifier,
        f: &Faulted,
        nodes: &mut KVec<RBTreeNodeReservation<u64, u8>>,
        skip: impl Fn(u64) -> bool,
    ) -> Result<Option<u64>> {
        // SAFETY: `mni` is live: the caller holds `fault_lock`.
        if unsafe { exanest_shim_read_retry(mni.raw(), f.seq) } {
            return Ok(None);
        }
        let n = f.pfns.len();
        let bp = BLOCK_PAGES as usize;
        let mut mapped = 0;
        let mut i = 0;
        while i < n {
            let vpn = f.first + i as u64;
            let hpfn = f.pfns[i];
            // Writable only for a write fault on a writable PTE: the mm then knows the page
            // may be dirtied (HMM made it so).
            // SAFETY: `hpfn` came from a successful hmm_range_fault and the sequence has not
            // moved, so it names a valid, present page.
            let writable = f.write && unsafe { exanest_shim_hmm_pfn_writable(hpfn) };
            let prot = bindings::IOMMU_READ | if writable { bindings::IOMMU_WRITE } else { 0 };
            let flags = if writable { M_WRITE } else { 0 };
            // SAFETY: As above.
            let phys = unsafe { exanest_shim_hmm_pfn_to_phys(hpfn) };
            // SAFETY: As above.
            let order = unsafe { exanest_shim_hmm_pfn_order(hpfn) };
            let block = vpn % BLOCK_PAGES == 0
                && i + bp <= n
                && order >= 9
                && phys % (BLOCK_PAGES << PAGE_SHIFT) == 0
                && !self.any_in(vpn, vpn + BLOCK_PAGES)
                && !(vpn..vpn + BLOCK_PAGES).any(&skip);
            if block {
                let Some(node) = nodes.pop() else {
                    return Err(ENOMEM);
                };
                dom.map_size(vpn << PAGE_SHIFT, phys, bp * PAGE_SIZE, prot, true)?;
                self.tree.insert(node.into_node(vpn, flags | M_BLOCK));
                self.blocks += 1;
                mapped += BLOCK_PAGES;
                i += bp;
                continue;
            }
            i += 1;
            if skip(vpn) || self.covers(vpn, writable) {
                continue;
            }
            // Mapped with less access, alone or in a block: unmap that first.
            if let Some((head, _)) = self.entry(vpn) {
                self.unmap_entry(dom, head);
            }
            let Some(node) = nodes.pop() else {
                return Err(ENOMEM);
            };
            dom.map(vpn << PAGE_SHIFT, phys, prot, true)?;
            self.tree.insert(node.into_node(vpn, flags));
            mapped += 1;
        }
        Ok(Some(mapped))
    }

    /// Unmap every mirrored page in `[start, end)` (bytes), whole blocks included. Returns
    /// the entries unmapped.
    pub(crate) fn unmap_range(&mut self, dom: &Domain, start: u64, end: u64) -> u64 {
        let (mut first, last) = (start >> PAGE_SHIFT, end.div_ceil(PAGE_SIZE as u64));
        let mut n = 0;
        // A block that starts before the range but covers its first page goes too.
        if let Some((head, _)) = self.entry(first) {
            first = first.min(head);
        }
        loop {
            let next = self
                .tree
                .cursor_lower_bound(&first)
                .map(|c| *c.current().0)
                .filter(|&v| v < last);
            let Some(vpn) = next else {
                break;
            };
            self.unmap_entry(dom, vpn);
            n += 1;
        }
        n
    }
}

/// Tree nodes for the pages of `f`, reserved without any lock held.
pub(crate) fn reserve_nodes(f: &Faulted) -> Result<KVec<RBTreeNodeReservation<u64, u8>>> {
    let mut v = KVec::with_capacity(f.pfns.len(), GFP_KERNEL)?;
    for _ in 0..f.pfns.len() {
        v.push(RBTreeNodeReservation::new(GFP_KERNEL)?, GFP_KERNEL)?;
    }
    Ok(v)
}

/// Errors of `hmm_range_fault`, as the copy's errno.
fn hmm_errno(ret: i32) -> Error {
    match -ret {
        x if x == EPERM.to_errno().abs() => EACCES,
        x if x == EBUSY.to_errno().abs() => ETIMEDOUT,
        x if x == EINTR.to_errno().abs() => EINTR,
        _ => EFAULT,
    }
}

/// What [`fault_in`] needs to know about the region of the fault.
pub(crate) struct FaultTarget {
    pub(crate) region: Range,
    pub(crate) notifier: Notifier,
    /// Touch-ahead window in pages.
    pub(crate) window: u64,
    /// End (exclusive) of the bytes the engine still has to access, or `u64::MAX`.
    pub(crate) limit: u64,
}

/// Steps 2–4 of the resolution: check the VMA and fault the window in. Runs without
/// `Session::inner`, with `fault_lock` held (so the notifier stays).
pub(crate) fn fault_in(
    mm: &kernel::mm::Mm,
    addr: u64,
    write: bool,
    t: &FaultTarget,
) -> Result<Faulted> {
    let user = mm.mmget_not_zero().ok_or(EFAULT)?;
    let vma = {
        let guard = user.mmap_read_lock();
        let vma = guard.vma_lookup(addr as usize).ok_or(EFAULT)?;
        let flags = vma.flags();
        let need = if write {
            kernel::mm::virt::flags::WRITE
        } else {
            kernel::mm::virt::flags::READ
        };
        if flags & need == 0 {
            return Err(EACCES);
        }
        Range {
            start: vma.start() as u64,
            end: vma.end() as u64,
        }
    };
    let (first, last) = touch_ahead(addr, t.window, PAGE_SHIFT as u32, &vma, &t.region, t.limit);
    let n = (last - first) as usize;
    let mut pfns = KVec::from_elem(0usize, n, GFP_KERNEL)?;
    let mut seq = 0usize;
    // SAFETY: The notifier is live (the caller holds `fault_lock`); `pfns` has `n` entries.
    let ret = unsafe {
        exanest_shim_hmm_fault(
            t.notifier.raw(),
            (first << PAGE_SHIFT) as usize,
            (last << PAGE_SHIFT) as usize,
            write,
            pfns.as_mut_ptr(),
            &mut seq,
        )
    };
    drop(user);
    if ret != 0 {
        return Err(hmm_errno(ret));
    }
    Ok(Faulted {
        first,
        pfns,
        seq,
        write,
    })
}
