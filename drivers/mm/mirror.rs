// SPDX-License-Identifier: GPL-2.0-only

//! The on-demand mirror: which pages the domain maps without pinning them (prefault and
//! on-demand regions), as HMM faulted them in, with 2 MiB blocks for transparent huge pages.
//! It lives under `Process::map` (odp.rs's `MapState`), the lock the MMU notifier takes; the
//! notifier and the fault-in are odp.rs's. Lock order: process.rs.

use crate::exanest_core::batch::Want;
use crate::ffi::HmmPfn;
use crate::mm::iommu::IoPageTable;
use kernel::{
    bindings,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    rbtree::{Entry, RBTree, RBTreeNodeReservation},
};

/// Pages faulted in by HMM, not yet mapped: their HMM pfns and the notifier sequence. A
/// strided fault-in or a batch's requested only some pages from `first` (`want`): only those
/// are mapped ([`Faulted::requested`]).
pub(crate) struct Faulted {
    pub(super) first: u64,
    pub(super) pfns: Pfns,
    pub(super) seq: usize,
    pub(super) write: bool,
    pub(super) want: Want,
}

/// Pages whose pfns [`Pfns`] keeps in place: a fault of a page or a short window (the usual one
/// on the engine's interrupt thread) allocates nothing.
const FEW_PFNS: usize = 16;

/// The HMM pfns of a fault-in, one per page: in place for at most [`FEW_PFNS`] pages, else
/// allocated (charged to the memory cgroup of the process, as the fault-in runs in its scope).
pub(crate) struct Pfns(Store);

/// Where [`Pfns`] keeps its entries.
enum Store {
    Few { len: usize, buf: [HmmPfn; FEW_PFNS] },
    Many(KVec<HmmPfn>),
}

impl Pfns {
    /// No entry.
    const fn empty() -> Self {
        Pfns(Store::Few {
            len: 0,
            buf: [HmmPfn::ZERO; FEW_PFNS],
        })
    }

    /// Make the entries `n` empty ones: in place where they fit (only those `n` cleared), else
    /// allocated (charged to the memory cgroup of the process, as a fault-in runs in its scope).
    pub(crate) fn reset(&mut self, n: usize) -> Result {
        if n > FEW_PFNS {
            self.0 = Store::Many(KVec::from_elem(HmmPfn::ZERO, n, GFP_KERNEL_ACCOUNT)?);
            return Ok(());
        }
        if let Store::Many(_) = self.0 {
            *self = Self::empty();
        }
        if let Store::Few { len, buf } = &mut self.0 {
            // A lone page's entry stored, not cleared by a call to `memset`.
            match n {
                1 => buf[0] = HmmPfn::ZERO,
                _ => buf[..n].fill(HmmPfn::ZERO),
            }
            *len = n;
        }
        Ok(())
    }

    /// `n` empty entries.
    pub(crate) fn new(n: usize) -> Result<Self> {
        let mut p = Self::empty();
        p.reset(n)?;
        Ok(p)
    }
}

impl core::ops::Deref for Pfns {
    type Target = [HmmPfn];

    fn deref(&self) -> &[HmmPfn] {
        match &self.0 {
            Store::Few { len, buf } => &buf[..*len],
            Store::Many(v) => v,
        }
    }
}

impl core::ops::DerefMut for Pfns {
    fn deref_mut(&mut self) -> &mut [HmmPfn] {
        match &mut self.0 {
            Store::Few { len, buf } => &mut buf[..*len],
            Store::Many(v) => v,
        }
    }
}

impl Faulted {
    /// Nothing faulted in yet: the place a fault-in fills ([`crate::mm::odp::fault_in`]), on
    /// the resolver's stack, so that its pages are not copied on the way back.
    pub(crate) const fn new() -> Self {
        Faulted {
            first: 0,
            pfns: Pfns::empty(),
            seq: 0,
            write: false,
            want: Want::All,
        }
    }

    /// One past the last byte faulted in.
    pub(crate) fn end(&self) -> u64 {
        (self.first + self.pfns.len() as u64) << PAGE_SHIFT
    }

    /// Whether one page was faulted in (a lone fault's).
    pub(crate) fn is_lone(&self) -> bool {
        self.pfns.len() == 1
    }

    /// Whether page `vpn` (in the range) was requested, so that its pfn names a present page.
    fn requested(&self, vpn: u64) -> bool {
        self.want.has(vpn - self.first)
    }

    /// Pages requested.
    fn requested_pages(&self) -> usize {
        self.want.count(self.pfns.len() as u64) as usize
    }
}

/// Pages in a 2 MiB IOMMU block (4 KiB pages).
pub(crate) const BLOCK_PAGES: u64 = 512;
/// The CPU mapping order of a page that a 2 MiB block can map (a PMD-mapped huge page).
pub(crate) const BLOCK_ORDER: u32 = 9;
/// Mirror entry flag: mapped writable.
const M_WRITE: u8 = 1;
/// Mirror entry flag: the first page of a 2 MiB block.
const M_BLOCK: u8 = 2;
/// Words of a [`Slot`]'s bitmaps: a bit per page of a 2 MiB span.
const WORDS: usize = BLOCK_PAGES as usize / 64;

/// What the mirror maps of one 2 MiB-aligned span of pages (a *slot*): a bit per page mapped,
/// and per page mapped writable; or one 2 MiB block mapping the whole span. One tree node per
/// slot, not per page: a fault-in of a 512 KiB map-ahead step reserves one node where it
/// reserved 128 (0.40 us a page of 2.0 us, first-touch, eval kernel), and a mapped GiB takes
/// 512 nodes of 192 bytes instead of 262,144 of 64.
#[derive(Clone, Copy, Default)]
pub(crate) struct Slot {
    mapped: [u64; WORDS],
    write: [u64; WORDS],
    /// One block: every bit of `mapped` set, `write` all set or all clear.
    block: bool,
}

impl Slot {
    fn has(&self, i: usize) -> bool {
        self.mapped[i / 64] >> (i % 64) & 1 != 0
    }

    /// Page `i`'s entry flags (mapped or not).
    fn flags(&self, i: usize) -> u8 {
        let w = if self.write[i / 64] >> (i % 64) & 1 != 0 {
            M_WRITE
        } else {
            0
        };
        w | if self.block { M_BLOCK } else { 0 }
    }

    fn set(&mut self, i: usize, flags: u8) {
        let bit = 1u64 << (i % 64);
        self.mapped[i / 64] |= bit;
        if flags & M_WRITE != 0 {
            self.write[i / 64] |= bit;
        } else {
            self.write[i / 64] &= !bit;
        }
    }

    /// Pages `from..from + n` mapped with `flags`.
    fn set_run(&mut self, from: usize, n: usize, flags: u8) {
        for i in from..from + n {
            self.set(i, flags);
        }
    }

    fn clear(&mut self, i: usize) {
        let bit = !(1u64 << (i % 64));
        self.mapped[i / 64] &= bit;
        self.write[i / 64] &= bit;
    }

    /// A whole block with `flags`' access.
    fn block(flags: u8) -> Self {
        let w = if flags & M_WRITE != 0 { !0 } else { 0 };
        Slot {
            mapped: [!0; WORDS],
            write: [w; WORDS],
            block: true,
        }
    }

    fn is_empty(&self) -> bool {
        self.mapped.iter().all(|&w| w == 0)
    }

    /// Pages mapped.
    #[cfg(CONFIG_KUNIT)]
    fn pages(&self) -> u64 {
        self.mapped.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The first page mapped at index `i` or above.
    fn next_mapped(&self, i: usize) -> Option<usize> {
        let mut w = i / 64;
        let mut bits = *self.mapped.get(w)? & (!0u64 << (i % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            w += 1;
            bits = *self.mapped.get(w)?;
        }
    }
}

/// Tree nodes reserved for the slots a fault-in may need ([`reserve_nodes`]).
pub(crate) type Nodes = KVec<RBTreeNodeReservation<u64, Slot>>;

/// Page `vpn`'s slot, and its index there.
fn slot_of(vpn: u64) -> (u64, usize) {
    (vpn / BLOCK_PAGES, (vpn % BLOCK_PAGES) as usize)
}

/// The map of pages mirrored into the domain (not pinned): for each 2 MiB span with a page
/// mapped, its [`Slot`]. An *entry* is a page mapped alone, or a 2 MiB block (for a transparent
/// huge page), at its first page.
///
/// # Invariants
///
/// Every page a slot marks is mapped in the domain, with the access it says, and nothing else
/// of the domain is the mirror's; no slot marks a page that `PageMap` (iommu.rs) maps; no slot
/// is empty. `pages` is the number of pages the slots mark.
pub(crate) struct Mirror {
    tree: RBTree<u64, Slot>,
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
        let (k, i) = slot_of(vpn);
        let s = self.tree.get(&k)?;
        if s.block {
            return Some((k * BLOCK_PAGES, s.flags(0)));
        }
        s.has(i).then(|| (vpn, s.flags(i)))
    }

    /// Whether `vpn` is mapped with at least the access asked.
    pub(crate) fn covers(&self, vpn: u64, write: bool) -> bool {
        matches!(self.entry(vpn), Some((_, f)) if f & M_WRITE != 0 || !write)
    }

    /// The first slot at `k` or above: its key.
    fn next_slot(&self, k: u64) -> Option<u64> {
        self.tree.cursor_lower_bound(&k).map(|c| *c.current().0)
    }

    /// Whether a page of `[first, last)` is mapped.
    fn any_in(&self, first: u64, last: u64) -> bool {
        let mut k = first / BLOCK_PAGES;
        while let Some(key) = self.next_slot(k) {
            let base = key * BLOCK_PAGES;
            if base >= last {
                return false;
            }
            let from = first.saturating_sub(base) as usize;
            let hit = self.tree.get(&key).and_then(|s| s.next_mapped(from));
            if hit.is_some_and(|i| base + (i as u64) < last) {
                return true;
            }
            k = key + 1;
        }
        false
    }

    /// Unmap the entry covering `vpn`, a whole block if it is one: `PageMap` takes the page
    /// over, or a fault maps it again with more access (the rest of a block is faulted in
    /// again on demand).
    pub(crate) fn evict(&mut self, dom: &impl IoPageTable, vpn: u64) {
        let (k, i) = slot_of(vpn);
        let Some(s) = self.tree.get_mut(&k) else {
            return;
        };
        if s.block {
            self.tree.remove(&k);
            unmap_pages(dom, k * BLOCK_PAGES, BLOCK_PAGES);
            self.pages -= BLOCK_PAGES;
        } else if s.has(i) {
            s.clear(i);
            if s.is_empty() {
                self.tree.remove(&k);
            }
            unmap_pages(dom, vpn, 1);
            self.pages -= 1;
        }
    }

    /// Slot `k`, made from a node of `nodes` if it has none yet.
    fn slot_mut(&mut self, k: u64, nodes: &mut Nodes) -> Result<&mut Slot> {
        match self.tree.entry(k) {
            Entry::Occupied(o) => Ok(o.into_mut()),
            Entry::Vacant(v) => {
                let node = nodes.pop().ok_or(ENOMEM)?;
                Ok(v.insert(Slot::default(), node))
            }
        }
    }

    /// Tree nodes that mapping `f` may take: one per 2 MiB span it covers with no slot yet (at
    /// most one per page requested). Looked at under the lock, so that a fault in a span
    /// mapped already allocates none (a window-0 fault did, for one page, every time).
    #[inline]
    pub(crate) fn nodes_needed(&self, f: &Faulted) -> usize {
        let pages = f.pfns.len() as u64;
        if pages == 0 {
            return 0;
        }
        let k = f.first / BLOCK_PAGES;
        let need = if k == (f.first + pages - 1) / BLOCK_PAGES {
            // One span (a fault's, usually): a lookup, not a cursor.
            usize::from(self.tree.get(&k).is_none())
        } else {
            self.nodes_for(f.first, f.first + pages)
        };
        need.min(f.requested_pages())
    }

    /// Nodes that marking pages `[first, end)` takes.
    fn nodes_for(&self, first: u64, end: u64) -> usize {
        let (first, last) = (first / BLOCK_PAGES, (end - 1) / BLOCK_PAGES);
        if first == last {
            // One span (a fault's, usually): a lookup, not a cursor.
            return usize::from(self.tree.get(&first).is_none());
        }
        let mut present = 0;
        let mut k = first;
        while let Some(key) = self.next_slot(k).filter(|&key| key <= last) {
            present += 1;
            k = key + 1;
        }
        (last - first + 1 - present) as usize
    }

    /// Map the faulted pages `f` (odp.rs `map_faulted` checks their sequence first). Returns
    /// the pages newly mapped. `skip(vpn)` is true for pages left out: those that `PageMap`
    /// maps (left to it), and those an invalidation touched since the fault-in (they fault
    /// again); no block covers them. Where the CPU maps a transparent huge page and
    /// the whole of it was faulted in, one 2 MiB block is mapped.
    ///
    /// Runs under `Process::map`, which the notifier takes: it allocates nothing that could
    /// enter reclaim (page tables are atomic allocations; ENOMEM tells the caller to reclaim
    /// without the lock and try again). `nodes` are tree nodes reserved beforehand
    /// ([`reserve_nodes`]). On an error, what was mapped stays mapped and recorded; a lone page
    /// that needs a slot when `nodes` is empty maps nothing (ENOMEM), which the resolver takes
    /// for its cue to reserve one (it maps a lone page before it looks for the node it needs).
    ///
    /// # Safety
    ///
    /// The pages of `f` that `skip` does not leave out are still the ones the mm maps, and stay
    /// so for the call: the caller holds the lock the invalidation callback takes, and found
    /// under it that no invalidation touched them since the fault-in (or `dom` never touches
    /// memory, as KUnit's fake).
    pub(crate) unsafe fn map_current(
        &mut self,
        dom: &impl IoPageTable,
        f: &Faulted,
        nodes: &mut Nodes,
        skip: impl Fn(u64) -> bool,
    ) -> Result<u64> {
        let n = f.pfns.len();
        let bp = BLOCK_PAGES as usize;
        // Pages a strided fault-in did not request are not looked at (their pfns may name
        // nothing).
        let skip = |vpn| skip(vpn) || !f.requested(vpn);
        if n == 1 && !skip(f.first) {
            // SAFETY: Per this function's contract, for the one page `skip` leaves in.
            if let Some(res) = unsafe { self.map_one(dom, f, nodes) } {
                return res;
            }
        }
        // Nothing of the range mirrored yet (the usual first fault): no page needs looking up.
        // One page: its entry (one walk of the tree, where `any_in` takes two).
        let fresh = if n == 1 {
            self.entry(f.first).is_none()
        } else {
            !self.any_in(f.first, f.first + n as u64)
        };
        let mut run = Run::new();
        let mut mapped = 0;
        let mut i = 0;
        while i < n {
            let vpn = f.first + i as u64;
            if skip(vpn) {
                // Not this mirror's (pinned), or not current (invalidated): nothing read of it.
                mapped += self.map_run(dom, &mut run, nodes)?;
                i += 1;
                continue;
            }
            let hpfn = f.pfns[i];
            // Writable only for a write fault on a writable PTE: the mm then knows the page
            // may be dirtied (HMM made it so).
            let writable = f.write && hpfn.writable();
            let flags = if writable { M_WRITE } else { 0 };
            // The invalidation callback records the range under `Process::map` before the mm
            // changes a page of it; the caller holds that lock (contract).
            // SAFETY: Per the contract no invalidation touched this page since the fault-in
            // (`skip` left out those that one did), and none can while the lock is held: it
            // is still the page the mm maps.
            let phys = unsafe { hpfn.phys() };
            let block = vpn % BLOCK_PAGES == 0
                && i + bp <= n
                && hpfn.order() >= BLOCK_ORDER
                && phys % (BLOCK_PAGES << PAGE_SHIFT) == 0
                && (fresh || !self.any_in(vpn, vpn + BLOCK_PAGES))
                && !(vpn..vpn + BLOCK_PAGES).any(&skip);
            if block {
                mapped += self.map_run(dom, &mut run, nodes)?;
                // Nothing of the span is mapped (checked above): its slot is new.
                let Some(node) = nodes.pop() else {
                    return Err(ENOMEM);
                };
                dom.map_size(vpn << PAGE_SHIFT, phys, bp * PAGE_SIZE, prot(flags), true)?;
                self.tree
                    .insert(node.into_node(vpn / BLOCK_PAGES, Slot::block(flags)));
                self.blocks += 1;
                self.pages += BLOCK_PAGES;
                mapped += BLOCK_PAGES;
                i += bp;
                continue;
            }
            i += 1;
            if !fresh && self.covers(vpn, writable) {
                continue;
            }
            if !fresh {
                // Mapped with less access, alone or in a block: unmap that first.
                if self.entry(vpn).is_some() {
                    mapped += self.map_run(dom, &mut run, nodes)?;
                    self.evict(dom, vpn);
                }
            }
            if !run.extend(vpn, phys, flags) {
                mapped += self.map_run(dom, &mut run, nodes)?;
                run.start(vpn, phys, flags);
            }
        }
        mapped += self.map_run(dom, &mut run, nodes)?;
        Ok(mapped)
    }

    /// [`Mirror::map_current`] of a fault-in of one page that is not skipped (a lone fault's,
    /// the usual one): one walk of the tree finds its slot, and the page is mapped with one
    /// call, without the general loop's run (512 bytes cleared), its check that the range is
    /// fresh and its second walk (a window-0 fault's critical path 4,289 -> 4,148
    /// instructions, `make profile`). `None` when the page is mapped with less access than
    /// it needs (a read-only page written): the general loop evicts it first.
    ///
    /// # Safety
    ///
    /// As [`Mirror::map_current`]'s, for the page of `f`.
    unsafe fn map_one(
        &mut self,
        dom: &impl IoPageTable,
        f: &Faulted,
        nodes: &mut Nodes,
    ) -> Option<Result<u64>> {
        let vpn = f.first;
        let hpfn = f.pfns[0];
        // As in the general loop: writable only for a write fault on a writable PTE.
        let writable = f.write && hpfn.writable();
        let flags = if writable { M_WRITE } else { 0 };
        // SAFETY: Per the contract, no invalidation touched the page since the fault-in, and
        // none can while the caller holds the lock: it is still the page the mm maps.
        let phys = unsafe { hpfn.phys() };
        let (k, i) = slot_of(vpn);
        let map = || dom.map_array(vpn << PAGE_SHIFT, &[phys], prot(flags), true);
        let slot = match self.tree.entry(k) {
            Entry::Occupied(o) => {
                let s = o.into_mut();
                if s.block || s.has(i) {
                    if s.flags(if s.block { 0 } else { i }) & M_WRITE != 0 || !writable {
                        return Some(Ok(0));
                    }
                    return None;
                }
                if let Err(e) = map() {
                    return Some(Err(e));
                }
                s
            }
            Entry::Vacant(v) => {
                let Some(node) = nodes.pop() else {
                    return Some(Err(ENOMEM));
                };
                // On an error the node is freed (a caller that tries again reserves more).
                if let Err(e) = map() {
                    return Some(Err(e));
                }
                v.insert(Slot::default(), node)
            }
        };
        slot.set(i, flags);
        self.pages += 1;
        Some(Ok(1))
    }

    /// Map `run` (consecutive pages, none mirrored yet) with one call and mark each page in
    /// its slot; `run` is left empty. Returns the pages mapped.
    fn map_run(&mut self, dom: &impl IoPageTable, run: &mut Run, nodes: &mut Nodes) -> Result<u64> {
        let r = &*run;
        if r.pages == 0 {
            return Ok(0);
        }
        let end = r.vpn + r.pages;
        let (k, i) = slot_of(r.vpn);
        if end <= (k + 1) * BLOCK_PAGES {
            // Within one span (a fault's run, usually): one walk of the tree finds its slot or
            // where it goes, before anything is mapped.
            let slot = match self.tree.entry(k) {
                Entry::Occupied(o) => {
                    Self::map_pages(dom, r)?;
                    o.into_mut()
                }
                Entry::Vacant(v) => {
                    let node = nodes.pop().ok_or(ENOMEM)?;
                    // On an error the node is freed (a caller that tries again reserves more).
                    Self::map_pages(dom, r)?;
                    v.insert(Slot::default(), node)
                }
            };
            slot.set_run(i, r.pages as usize, r.flags);
        } else {
            // Across spans: every slot it lacks has a node before anything is mapped.
            if nodes.len() < self.nodes_for(r.vpn, end) {
                return Err(ENOMEM);
            }
            Self::map_pages(dom, r)?;
            let mut vpn = r.vpn;
            while vpn < end {
                let (k, i) = slot_of(vpn);
                let stop = end.min((k + 1) * BLOCK_PAGES);
                // Enough nodes for the slots the run lacks (checked above).
                self.slot_mut(k, nodes)?
                    .set_run(i, (stop - vpn) as usize, r.flags);
                vpn = stop;
            }
        }
        let pages = r.pages;
        self.pages += pages;
        run.pages = 0;
        Ok(pages)
    }

    /// Map run `r` in the domain, page by page (never as a block, which could not be unmapped
    /// in part): one walk of the IOMMU's page table for the pages that share a table of it
    /// (kernel patch 0007, `iommu_map_array`), where a call per physically contiguous run
    /// walked it from the top for each fresh page (0.62 us a call, first-touch, eval kernel).
    fn map_pages(dom: &impl IoPageTable, r: &Run) -> Result {
        dom.map_array(
            r.vpn << PAGE_SHIFT,
            &r.phys[..r.pages as usize],
            prot(r.flags),
            true,
        )
    }

    /// Unmap every mirrored page in `[start, end)` (bytes), whole blocks included. Returns
    /// the entries unmapped. Consecutive pages go with one call, hence one IOTLB flush.
    pub(crate) fn unmap_range(&mut self, dom: &impl IoPageTable, start: u64, end: u64) -> u64 {
        self.unmap_matching(dom, start, end, false)
    }

    /// Unmap the pages mapped writable in `[start, end)` (bytes), whole blocks included; the
    /// read-only ones stay. Returns the entries unmapped.
    pub(crate) fn unmap_writable(&mut self, dom: &impl IoPageTable, start: u64, end: u64) -> u64 {
        self.unmap_matching(dom, start, end, true)
    }

    fn unmap_matching(
        &mut self,
        dom: &impl IoPageTable,
        start: u64,
        end: u64,
        writable_only: bool,
    ) -> u64 {
        let (first, last) = (start >> PAGE_SHIFT, end.div_ceil(PAGE_SIZE as u64));
        let mut n = 0;
        // Pages out of the slots, still to unmap: `pages` from `vpn0`.
        let (mut vpn0, mut pages) = (0, 0);
        let mut k = first / BLOCK_PAGES;
        while let Some(key) = self.next_slot(k) {
            let base = key * BLOCK_PAGES;
            if base >= last {
                break;
            }
            k = key + 1;
            let Some(s) = self.tree.get_mut(&key) else {
                break;
            };
            if s.block {
                // A block that starts before the range but covers its first page goes too.
                if writable_only && s.flags(0) & M_WRITE == 0 {
                    continue;
                }
                self.tree.remove(&key);
                unmap_pages(dom, vpn0, pages);
                pages = 0;
                unmap_pages(dom, base, BLOCK_PAGES);
                self.pages -= BLOCK_PAGES;
                n += 1;
                continue;
            }
            let (lo, hi) = (first.saturating_sub(base), (last - base).min(BLOCK_PAGES));
            let mut gone = 0;
            let mut i = lo as usize;
            while let Some(j) = s.next_mapped(i).filter(|&j| (j as u64) < hi) {
                i = j + 1;
                let vpn = base + j as u64;
                if writable_only && s.flags(j) & M_WRITE == 0 {
                    // Kept: the run of pages to unmap ends before it.
                    unmap_pages(dom, vpn0, pages);
                    pages = 0;
                    continue;
                }
                s.clear(j);
                gone += 1;
                if pages > 0 && vpn == vpn0 + pages {
                    pages += 1;
                } else {
                    unmap_pages(dom, vpn0, pages);
                    (vpn0, pages) = (vpn, 1);
                }
            }
            if s.is_empty() {
                self.tree.remove(&key);
            }
            self.pages -= gone;
            n += gone;
        }
        unmap_pages(dom, vpn0, pages);
        n
    }
}

/// Unmap `pages` pages from `vpn` (none if 0).
fn unmap_pages(dom: &impl IoPageTable, vpn: u64, pages: u64) {
    if pages > 0 {
        dom.unmap(vpn << PAGE_SHIFT, pages as usize * PAGE_SIZE);
    }
}

/// Pages a [`Run`] holds at most: its addresses stay on the stack (512 bytes), and a 512 KiB
/// step of map-ahead takes two calls.
const RUN_PAGES: usize = 64;

/// Pages to map with one call: consecutive in the IOVA space, each at its own physical address
/// (`phys`, the first `pages` entries), with the same access.
struct Run {
    vpn: u64,
    phys: [u64; RUN_PAGES],
    pages: u64,
    flags: u8,
}

impl Run {
    fn new() -> Self {
        Run {
            vpn: 0,
            phys: [0; RUN_PAGES],
            pages: 0,
            flags: 0,
        }
    }

    /// Start again (empty, as [`Mirror::map_run`] leaves a run) with page `vpn` at `phys`.
    fn start(&mut self, vpn: u64, phys: u64, flags: u8) {
        (self.vpn, self.phys[0], self.pages, self.flags) = (vpn, phys, 1, flags);
    }

    /// Add page `vpn` at `phys` if it continues the run and there is room.
    fn extend(&mut self, vpn: u64, phys: u64, flags: u8) -> bool {
        let next = self.pages > 0
            && self.pages < RUN_PAGES as u64
            && vpn == self.vpn + self.pages
            && flags == self.flags;
        if next {
            self.phys[self.pages as usize] = phys;
            self.pages += 1;
        }
        next
    }
}

/// The IOMMU access of an entry with flags `f`.
fn prot(f: u8) -> u32 {
    bindings::IOMMU_READ
        | if f & M_WRITE != 0 {
            bindings::IOMMU_WRITE
        } else {
            0
        }
}

/// Top `nodes` up to `n` tree nodes ([`Mirror::nodes_needed`]), without any lock held (those
/// left unused are freed with the vector).
pub(crate) fn reserve_nodes(nodes: &mut Nodes, n: usize) -> Result {
    while nodes.len() < n {
        nodes.push(
            RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?,
            GFP_KERNEL_ACCOUNT,
        )?;
    }
    Ok(())
}

#[kunit_tests(exanest_dma_mirror)]
mod tests {
    use super::*;
    use crate::hw::fake::FakeTable;

    /// An HMM pfn entry as the kernel's layout makes it (`exanest_shim_hmm_pfn_make`) is
    /// decoded by the driver's own tests of its bits: the page's address, its write flag and
    /// the order of the CPU's mapping.
    #[test]
    fn hmm_pfns_decode_as_the_kernel_makes_them() {
        for (pfn, write, order) in [(0x4_0000, true, 0), (0x12_3456, false, 9), (1, true, 18)] {
            let p = HmmPfn::for_test(pfn, write, order);
            // SAFETY: A test value: the address is only compared.
            assert_eq!(unsafe { p.phys() }, (pfn as u64) << PAGE_SHIFT);
            assert_eq!(p.writable(), write);
            assert_eq!(p.order(), order);
        }
    }

    /// `n` pages from `first`, as HMM returns them (a THP is mapped with order 9).
    fn faulted(first: u64, n: usize, write: bool, order: u32) -> Faulted {
        faulted_at(first, n, write, order, |i| 0x40000 + first as usize + i)
    }

    /// [`faulted`], page `i` at pfn `pfn(i)`.
    fn faulted_at(
        first: u64,
        n: usize,
        write: bool,
        order: u32,
        pfn: impl Fn(usize) -> usize,
    ) -> Faulted {
        let mut pfns = Pfns::new(n).unwrap();
        for (i, p) in pfns.iter_mut().enumerate() {
            *p = HmmPfn::for_test(pfn(i), write, order);
        }
        Faulted {
            first,
            pfns,
            seq: 0,
            write,
            want: Want::All,
        }
    }

    fn map(m: &mut Mirror, t: &FakeTable, f: &Faulted, pinned: impl Fn(u64) -> bool) -> u64 {
        let mut nodes = Nodes::new();
        reserve_nodes(&mut nodes, m.nodes_needed(f)).unwrap();
        // SAFETY: The fake table never touches the pages.
        unsafe { m.map_current(t, f, &mut nodes, pinned) }.unwrap()
    }

    /// A fault-in that fills a resolver's `Faulted` again gets as many entries as it asks for,
    /// all empty (nothing of the fault-in before), in place or allocated either way.
    #[test]
    fn pfns_reset_to_empty_entries() {
        let mut f = Faulted::new();
        assert_eq!(f.pfns.len(), 0);
        assert_eq!(f.end(), 0);
        let full = HmmPfn::for_test(0x1234, true, 0);
        for n in [FEW_PFNS, 3, FEW_PFNS + 1, 600, 2, 0, FEW_PFNS] {
            f.pfns.reset(n).unwrap();
            assert_eq!(f.pfns.len(), n);
            assert_eq!(matches!(f.pfns.0, Store::Few { .. }), n <= FEW_PFNS);
            assert!(f.pfns.iter().all(|p| *p == HmmPfn::ZERO));
            f.pfns.iter_mut().for_each(|p| *p = full);
        }
    }

    /// A fault-in's pfns hold as many entries as it asked for, in place or allocated (on both
    /// sides of the limit), each kept as written; faulted-in pages map from either.
    #[test]
    fn pfns_in_place_and_allocated() {
        for n in [0, 1, FEW_PFNS, FEW_PFNS + 1, 600] {
            let mut p = Pfns::new(n).unwrap();
            assert_eq!(p.len(), n);
            assert_eq!(matches!(p.0, Store::Few { .. }), n <= FEW_PFNS);
            for (i, e) in p.iter_mut().enumerate() {
                *e = HmmPfn::for_test(0x1000 + i, true, 0);
            }
            for (i, e) in p.iter().enumerate() {
                assert_eq!(*e, HmmPfn::for_test(0x1000 + i, true, 0));
            }
        }
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        for (first, n) in [(0x600, FEW_PFNS), (0x800, FEW_PFNS + 1)] {
            assert_eq!(
                map(&mut m, &t, &faulted(first, n, true, 0), |_| false),
                n as u64
            );
        }
        assert_eq!(t.pages(), 2 * FEW_PFNS as u64 + 1);
    }

    /// A strided fault-in maps only the pages it requested (their pfns alone name pages): two
    /// of every eight here, and never a block, even over a THP.
    #[test]
    fn strided_fault_in_maps_only_its_runs() {
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        let mut f = faulted(0x200, 30, true, 0);
        f.want = Want::Strided { run: 2, stride: 8 };
        // One node: the pages share a 2 MiB span.
        assert_eq!(m.nodes_needed(&f), 1);
        assert_eq!(map(&mut m, &t, &f, |_| false), 8);
        for vpn in 0x200..0x21e {
            assert_eq!(m.covers(vpn, true), (vpn - 0x200) % 8 < 2);
        }
        assert_eq!(t.pages(), 8);
        let mut f = faulted(0x400, 512, true, 9);
        f.want = Want::Strided { run: 1, stride: 2 };
        assert_eq!(map(&mut m, &t, &f, |_| false), 256);
        assert_eq!(m.blocks(), 0);
    }

    /// The page count kept as entries come and go equals a walk of the entries and what the
    /// table maps, through single pages, overlaps, a write upgrade, a 2 MiB block, an eviction
    /// and range unmaps; no IOVA is ever mapped twice (the fake would refuse it).
    #[test]
    fn mirror_counts_what_it_maps() {
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        let check = |m: &Mirror, t: &FakeTable| {
            let walked: u64 = m.tree.values().map(Slot::pages).sum();
            assert_eq!(m.len(), walked);
            assert_eq!(m.len(), t.pages());
        };
        assert_eq!(
            map(&mut m, &t, &faulted(0x100, 16, false, 0), |_| false),
            16
        );
        check(&m, &t);
        // Overlapping: only the new pages; then the same pages for a write: remapped.
        assert_eq!(map(&mut m, &t, &faulted(0x108, 16, false, 0), |_| false), 8);
        assert_eq!(map(&mut m, &t, &faulted(0x100, 4, true, 0), |_| false), 4);
        check(&m, &t);
        assert_eq!(m.len(), 24);
        // A whole THP: one block of 512 pages.
        assert_eq!(
            map(&mut m, &t, &faulted(0x400, 512, true, 9), |_| false),
            512
        );
        assert_eq!(m.blocks(), 1);
        check(&m, &t);
        // A pin takes one page of the block: the block goes whole.
        m.evict(&t, 0x410);
        assert_eq!(m.len(), 24);
        check(&m, &t);
        // Faulted again with that page pinned: no block, every other page mapped alone.
        assert_eq!(
            map(&mut m, &t, &faulted(0x400, 512, true, 9), |v| v == 0x410),
            511
        );
        assert_eq!(m.blocks(), 1);
        check(&m, &t);
        assert!(!m.covers(0x410, false));
        // Range unmaps, partial and whole.
        assert_eq!(
            m.unmap_range(&t, 0x104 << PAGE_SHIFT, 0x10c << PAGE_SHIFT),
            8
        );
        check(&m, &t);
        m.unmap_range(&t, 0, u64::MAX);
        assert_eq!(m.len(), 0);
        check(&m, &t);
    }

    /// Only the writable pages go: the read-only ones between them stay mapped, and so do the
    /// counts (a deregistration keeps what a read-only region still covers).
    #[test]
    fn unmap_writable_keeps_read_only() {
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        map(&mut m, &t, &faulted(0x100, 8, false, 0), |_| false);
        map(&mut m, &t, &faulted(0x104, 2, true, 0), |_| false);
        map(&mut m, &t, &faulted(0x110, 4, true, 0), |_| false);
        assert_eq!(m.len(), 12);
        assert_eq!(
            m.unmap_writable(&t, 0x100 << PAGE_SHIFT, 0x120 << PAGE_SHIFT),
            6
        );
        assert_eq!((m.len(), t.pages()), (6, 6));
        assert!(m.covers(0x103, false) && m.covers(0x106, false));
        assert!(!m.covers(0x104, false) && !m.covers(0x111, false));
        // A read-only page alone in the range: nothing to unmap.
        assert_eq!(
            m.unmap_writable(&t, 0x100 << PAGE_SHIFT, 0x101 << PAGE_SHIFT),
            0
        );
    }

    /// A fault-in of one page (a lone fault's, [`Mirror::map_one`]) is mapped with one call,
    /// into a new slot or one that exists; not again where it is mapped with the access asked
    /// (alone or in a block), nor where it is pinned; mapped again writable (unmapped first)
    /// where it was read-only and is written, as the general loop does; and with no tree node
    /// reserved for a new slot, nothing is mapped (ENOMEM: the caller reserves and retries).
    #[test]
    fn one_page_maps_alone() {
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        assert_eq!(map(&mut m, &t, &faulted(0x100, 1, true, 0), |_| false), 1);
        assert_eq!((m.len(), t.pages(), t.calls.get()), (1, 1, 1));
        assert_eq!(t.phys_of(0x100 << PAGE_SHIFT), Some(0x40100 << PAGE_SHIFT));
        assert!(m.covers(0x100, true));
        assert_eq!(map(&mut m, &t, &faulted(0x101, 1, false, 0), |_| false), 1);
        assert_eq!((m.len(), t.pages(), t.calls.get()), (2, 2, 2));
        assert!(m.covers(0x101, false) && !m.covers(0x101, true));
        for (vpn, write) in [(0x100, false), (0x100, true), (0x101, false)] {
            assert_eq!(map(&mut m, &t, &faulted(vpn, 1, write, 0), |_| false), 0);
        }
        assert_eq!(t.calls.get(), 2);
        assert_eq!(map(&mut m, &t, &faulted(0x101, 1, true, 0), |_| false), 1);
        assert!(m.covers(0x101, true));
        assert_eq!((m.len(), t.pages(), t.unmaps.get()), (2, 2, 1));
        assert_eq!(
            map(&mut m, &t, &faulted(0x102, 1, true, 0), |v| v == 0x102),
            0
        );
        assert_eq!((m.len(), t.pages()), (2, 2));
        assert_eq!(
            map(&mut m, &t, &faulted(0x400, 512, true, 9), |_| false),
            512
        );
        assert_eq!(m.blocks(), 1);
        let calls = t.calls.get();
        assert_eq!(map(&mut m, &t, &faulted(0x405, 1, true, 9), |_| false), 0);
        assert_eq!(t.calls.get(), calls);
        let mut none = Nodes::new();
        // SAFETY: The fake table never touches the pages.
        let res = unsafe { m.map_current(&t, &faulted(0x800, 1, true, 0), &mut none, |_| false) };
        assert_eq!(res, Err(ENOMEM));
        assert_eq!(
            (m.len(), t.pages(), t.phys_of(0x800 << PAGE_SHIFT)),
            (514, 514, None)
        );
        // The node it lacked, reserved, maps it.
        assert_eq!(m.nodes_needed(&faulted(0x800, 1, true, 0)), 1);
        assert_eq!(map(&mut m, &t, &faulted(0x800, 1, true, 0), |_| false), 1);
        assert_eq!(t.phys_of(0x800 << PAGE_SHIFT), Some(0x40800 << PAGE_SHIFT));
        assert_eq!(m.nodes_needed(&faulted(0x801, 1, true, 0)), 0);
    }

    /// Consecutive pages are mapped with one call per run of at most [`RUN_PAGES`] wherever
    /// they are in memory (kernel patch 0007), each at its own address, never as a block, and
    /// can still be unmapped one by one; a pinned page or an existing entry starts a new run.
    #[test]
    fn runs_map_with_one_call() {
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        assert_eq!(map(&mut m, &t, &faulted(0x100, 16, true, 0), |_| false), 16);
        assert_eq!(t.calls.get(), 1);
        // One run, though pages 0..8 and 8..16 are 100 pfns apart, and pages of no order at
        // all in memory after them.
        let scattered = |i: usize| match i {
            0..8 => 0x50000 + i,
            8..16 => 0x50000 + 100 + i,
            _ => 0x70000 - 3 * i,
        };
        assert_eq!(
            map(
                &mut m,
                &t,
                &faulted_at(0x200, 24, true, 0, scattered),
                |_| false
            ),
            24
        );
        assert_eq!(t.calls.get(), 2);
        for i in 0..24 {
            let at = t.phys_of((0x200 + i as u64) << PAGE_SHIFT);
            assert_eq!(at, Some((scattered(i) as u64) << PAGE_SHIFT));
        }
        // Around a pinned page and the entries already there: 0x0f8..0x0ff, then 0x111..0x117.
        let before = t.calls.get();
        assert_eq!(
            map(&mut m, &t, &faulted(0xf8, 32, true, 0), |v| v == 0x110),
            15
        );
        assert_eq!(t.calls.get() - before, 2);
        // A whole aligned 2 MiB of contiguous small pages, at an aligned pfn: pages, no block,
        // in runs of `RUN_PAGES`.
        let before = t.calls.get();
        assert_eq!(
            map(
                &mut m,
                &t,
                &faulted_at(0x400, 512, true, 0, |i| 0x80000 + i),
                |_| false
            ),
            512
        );
        assert_eq!(m.blocks(), 0);
        assert_eq!(t.calls.get() - before, 512 / RUN_PAGES as u64);
        // One page out of the middle of a run.
        assert_eq!(
            m.unmap_range(&t, 0x500 << PAGE_SHIFT, 0x501 << PAGE_SHIFT),
            1
        );
        assert!(!m.covers(0x500, false) && m.covers(0x4ff, true) && m.covers(0x501, true));
        assert_eq!(m.len(), t.pages());
        // Consecutive pages are unmapped with one call: two here, around the hole at 0x500.
        let before = t.unmaps.get();
        assert_eq!(
            m.unmap_range(&t, 0x400 << PAGE_SHIFT, 0x600 << PAGE_SHIFT),
            511
        );
        assert_eq!(t.unmaps.get() - before, 2);
        assert_eq!(m.len(), t.pages());
        m.unmap_range(&t, 0, u64::MAX);
        assert_eq!((m.len(), t.pages()), (0, 0));
    }

    /// A run across a 2 MiB boundary is one call, marked in both slots (a node each; none for
    /// a span with a slot already, nor one with nothing requested); the slot of the last page unmapped
    /// goes, and a lookup past every slot finds nothing.
    #[test]
    fn slots_split_at_2_mib() {
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        let f = faulted(0x3f0, 32, false, 0);
        assert_eq!(m.nodes_needed(&f), 2);
        assert_eq!(map(&mut m, &t, &f, |_| false), 32);
        // Mapped again for writing: the slots are there, no node is needed.
        assert_eq!(m.nodes_needed(&faulted(0x3f8, 16, true, 0)), 0);
        assert_eq!(m.nodes_needed(&faulted(0x3f8, 0x210, true, 0)), 1);
        assert_eq!((t.calls.get(), m.tree.values().count()), (1, 2));
        assert!(m.covers(0x3f0, false) && m.covers(0x40f, false) && !m.covers(0x410, false));
        assert!(!m.covers(0x3f0, true) && m.any_in(0x40f, 0x500) && !m.any_in(0x410, 0x1000));
        let mut f = faulted(0x1000, 1024, false, 0);
        f.want = Want::Strided {
            run: 1,
            stride: 1024,
        };
        assert_eq!(m.nodes_needed(&f), 1);
        assert_eq!(
            m.unmap_range(&t, 0x400 << PAGE_SHIFT, 0x500 << PAGE_SHIFT),
            16
        );
        assert_eq!((m.len(), t.pages(), m.tree.values().count()), (16, 16, 1));
        assert!(!m.any_in(0x400, u64::MAX) && m.any_in(0, 0x3f1));
    }
}
