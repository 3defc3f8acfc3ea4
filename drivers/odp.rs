// SPDX-License-Identifier: GPL-2.0-only

//! On-demand paging's memory side: the MMU interval notifier of each prefault or on-demand
//! region, the mirror of the pages mapped into the domain without pinning, and faulting pages
//! in with HMM. The fault path that uses them is fault.rs.
//!
//! The notifier callback takes only `Process::map` ([`MapState`]), with a try-lock when the
//! invalidation may not block, so nothing under that lock may enter reclaim: allocations there
//! are atomic or reserved beforehand ([`reserve_nodes`]). Lock order: process.rs.

use crate::error::hmm_errno;
use crate::exanest_core::{abi::Range, fault::touch_ahead};
use crate::ffi::{self, HmmPfn, MniPtr};
use crate::iommu::Domain;
use kernel::{
    bindings,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex},
};

/// What the MMU notifier callback touches: the state behind `Process::map`.
pub(crate) struct MapState {
    /// The domain; taken out (and dropped outside this lock) at teardown.
    pub(crate) domain: Option<Arc<Domain>>,
    /// Pages mapped on demand (not pinned).
    pub(crate) mirror: Mirror,
    /// Invalidations that unmapped something.
    pub(crate) invalidations: u64,
}

impl MapState {
    pub(crate) fn new() -> Self {
        MapState {
            domain: None,
            mirror: Mirror::new(),
            invalidations: 0,
        }
    }
}

/// The MMU interval notifier callback, called by the C shim: unmap what the mm is about to
/// change. Returns false only when it may not block and `map` is busy (the mm then retries).
///
/// # Safety
///
/// `token` is the `Process::map` the notifier was inserted with ([`Notifier::insert`]), alive
/// until the notifier is removed; `mni` is the notifier of this callback.
#[no_mangle]
pub(crate) unsafe extern "C" fn exanest_rust_invalidate(
    token: *mut core::ffi::c_void,
    mni: *mut bindings::mmu_interval_notifier,
    start: usize,
    end: usize,
    blockable: bool,
    cur_seq: usize,
) -> bool {
    // SAFETY: Per the contract, `token` is a live `Mutex<MapState>`: notifiers are removed
    // before the process that owns the lock is freed.
    let map = unsafe { &*token.cast::<Mutex<MapState>>() };
    let mut g = if blockable {
        map.lock()
    } else {
        match map.try_lock() {
            Some(g) => g,
            None => return false,
        }
    };
    // SAFETY: `mni` is the notifier of this callback, and `map`, the lock that orders it
    // against `Mirror::map`'s sequence check, is held.
    unsafe { ffi::set_seq(mni, cur_seq) };
    let ms = &mut *g;
    if let Some(dom) = ms.domain.as_ref() {
        if ms.mirror.unmap_range(dom, start as u64, end as u64) > 0 {
            ms.invalidations += 1;
        }
    }
    true
}
ffi::check_callback!(ffi::raw::exanest_rust_invalidate, exanest_rust_invalidate);

/// The MMU interval notifier over one prefault or on-demand region.
///
/// # Invariants
///
/// `mni` watches exactly the region's range of the process's mm, with the process's
/// `Process::map` as token. It is removed when the last reference goes (`Drop`), which waits
/// for callbacks in progress: the last reference is never dropped under `Process::inner` or
/// `Process::map`. Shared as `Arc<Notifier>` between the region table and the resolvers using
/// it, so a resolver's notifier stays live even if the region goes meanwhile.
pub(crate) struct Notifier {
    mni: MniPtr,
}

impl Notifier {
    /// Watch `range` of `mm`, reporting to `map`.
    ///
    /// # Safety
    ///
    /// `mm` is the live mm of the calling process, and `map` outlives the notifier.
    pub(crate) unsafe fn insert(
        mm: *mut bindings::mm_struct,
        range: &Range,
        map: &Mutex<MapState>,
    ) -> Result<Arc<Self>> {
        let token = core::ptr::from_ref(map).cast();
        // SAFETY: Per the contract: `mm` is live and `map`, the token the callback casts back,
        // outlives the notifier.
        let mni = unsafe { MniPtr::insert(mm, range.start, range.len(), token)? };
        // INVARIANT: Inserted over `range` with `map` as token.
        Ok(Arc::new(Notifier { mni }, GFP_KERNEL)?)
    }
}

/// Pages faulted in by HMM, not yet mapped: their HMM pfns and the notifier sequence.
pub(crate) struct Faulted {
    first: u64,
    pfns: KVec<HmmPfn>,
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
///
/// # Invariants
///
/// Every entry is mapped in the domain, with the access its flags say, and nothing else of the
/// domain is the mirror's; no entry covers a page that `PageMap` (iommu.rs) maps. `pages` is the
/// number of pages the entries cover.
pub(crate) struct Mirror {
    tree: RBTree<u64, u8>,
    blocks: u64,
    pages: u64,
}

impl Mirror {
    pub(crate) fn new() -> Self {
        Mirror {
            tree: RBTree::new(),
            blocks: 0,
            pages: 0,
        }
    }

    /// Pages mapped now; kept as entries come and go, so reading it walks nothing (the MMU
    /// notifier's lock is held).
    pub(crate) fn len(&self) -> u64 {
        self.pages
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
            let n = entry_pages(f);
            dom.unmap(head << PAGE_SHIFT, n as usize * PAGE_SIZE);
            self.pages -= n;
        }
    }

    /// Unmap the entry covering `vpn`, a whole block if it is one: `PageMap` takes the page
    /// over (the rest of a block is faulted in again on demand).
    pub(crate) fn evict(&mut self, dom: &Domain, vpn: u64) {
        if let Some((head, _)) = self.entry(vpn) {
            self.unmap_entry(dom, head);
        }
    }

    /// Map the faulted pages, unless an invalidation ran since they were faulted in (then the
    /// caller faults again). Returns the pages newly mapped, or `None` to ask for a retry.
    /// `pinned(vpn)` is true for pages that `PageMap` maps: they are left to it, and no block
    /// covers them. Where the CPU maps a transparent huge page and the whole of it was faulted
    /// in, one 2 MiB block is mapped.
    ///
    /// Runs under `Process::map`, which the notifier takes: it allocates nothing that could
    /// enter reclaim (page tables are atomic allocations; ENOMEM tells the caller to reclaim
    /// without the lock and try again). `nodes` are tree nodes reserved beforehand, one per
    /// page of `f`. On an error, what was mapped stays mapped and recorded.
    pub(crate) fn map(
        &mut self,
        dom: &Domain,
        mni: &Notifier,
        f: &Faulted,
        nodes: &mut KVec<RBTreeNodeReservation<u64, u8>>,
        pinned: impl Fn(u64) -> bool,
    ) -> Result<Option<u64>> {
        if mni.mni.read_retry(f.seq) {
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
            let writable = f.write && hpfn.writable();
            let prot = bindings::IOMMU_READ | if writable { bindings::IOMMU_WRITE } else { 0 };
            let flags = if writable { M_WRITE } else { 0 };
            // SAFETY: The caller holds `Process::map`, the lock the invalidation callback takes
            // before it records a new sequence, and `read_retry` just said the sequence of
            // these pfns has not moved: the pages are still the ones mapped.
            let phys = unsafe { hpfn.phys() };
            let order = hpfn.order();
            let block = vpn % BLOCK_PAGES == 0
                && i + bp <= n
                && order >= 9
                && phys % (BLOCK_PAGES << PAGE_SHIFT) == 0
                && !self.any_in(vpn, vpn + BLOCK_PAGES)
                && !(vpn..vpn + BLOCK_PAGES).any(&pinned);
            if block {
                let Some(node) = nodes.pop() else {
                    return Err(ENOMEM);
                };
                dom.map_size(vpn << PAGE_SHIFT, phys, bp * PAGE_SIZE, prot, true)?;
                self.tree.insert(node.into_node(vpn, flags | M_BLOCK));
                self.blocks += 1;
                self.pages += BLOCK_PAGES;
                mapped += BLOCK_PAGES;
                i += bp;
                continue;
            }
            i += 1;
            if pinned(vpn) || self.covers(vpn, writable) {
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
            self.pages += 1;
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

/// Pages an entry with flags `f` covers.
fn entry_pages(f: u8) -> u64 {
    if f & M_BLOCK != 0 {
        BLOCK_PAGES
    } else {
        1
    }
}

/// Tree nodes for the pages of `f`, reserved without any lock held.
pub(crate) fn reserve_nodes(f: &Faulted) -> Result<KVec<RBTreeNodeReservation<u64, u8>>> {
    let mut v = KVec::with_capacity(f.pfns.len(), GFP_KERNEL_ACCOUNT)?;
    for _ in 0..f.pfns.len() {
        v.push(
            RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?,
            GFP_KERNEL_ACCOUNT,
        )?;
    }
    Ok(v)
}

/// What [`fault_in`] needs to know about the region of the fault.
pub(crate) struct FaultTarget {
    /// The region's handle, checked again under `Process::inner` before mapping.
    pub(crate) handle: u32,
    pub(crate) region: Range,
    pub(crate) notifier: Arc<Notifier>,
    /// Touch-ahead window in pages.
    pub(crate) window: u64,
    /// End (exclusive) of the bytes the engine still has to access, or `u64::MAX`.
    pub(crate) limit: u64,
}

/// Check the VMA and fault the touch-ahead window at `addr` in. Runs with no driver lock held:
/// HMM takes the mmap lock and may sleep in the mm's fault handler for as long as that takes
/// (userfaultfd, FUSE). Its sleeps are killable: a fatal signal to the caller (the process, or
/// the fault thread stopped at teardown) ends them with EINTR.
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
    let mut pfns = KVec::from_elem(
        HmmPfn::default(),
        (last - first) as usize,
        GFP_KERNEL_ACCOUNT,
    )?;
    let seq = t
        .notifier
        .mni
        .hmm_fault(first << PAGE_SHIFT, last << PAGE_SHIFT, write, &mut pfns)
        .map_err(hmm_errno)?;
    drop(user);
    Ok(Faulted {
        first,
        pfns,
        seq,
        write,
    })
}
