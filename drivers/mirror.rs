// SPDX-License-Identifier: GPL-2.0-only

//! The on-demand mirror: which pages the domain maps without pinning them (prefault and
//! on-demand regions), as HMM faulted them in, with 2 MiB blocks for transparent huge pages.
//! It lives under `Process::map` (odp.rs's `MapState`), the lock the MMU notifier takes; the
//! notifier and the fault-in are odp.rs's. Lock order: process.rs.

use crate::ffi::HmmPfn;
use crate::iommu::IoPageTable;
use kernel::{
    bindings,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

/// Pages faulted in by HMM, not yet mapped: their HMM pfns and the notifier sequence.
pub(crate) struct Faulted {
    pub(crate) first: u64,
    pub(crate) pfns: KVec<HmmPfn>,
    pub(crate) seq: usize,
    pub(crate) write: bool,
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

    fn unmap_entry(&mut self, dom: &impl IoPageTable, head: u64) {
        if let Some(f) = self.tree.remove(&head) {
            let n = entry_pages(f);
            dom.unmap(head << PAGE_SHIFT, n as usize * PAGE_SIZE);
            self.pages -= n;
        }
    }

    /// Unmap the entry covering `vpn`, a whole block if it is one: `PageMap` takes the page
    /// over (the rest of a block is faulted in again on demand).
    pub(crate) fn evict(&mut self, dom: &impl IoPageTable, vpn: u64) {
        if let Some((head, _)) = self.entry(vpn) {
            self.unmap_entry(dom, head);
        }
    }

    /// Map the faulted pages `f` (odp.rs `map_faulted` checks their sequence first). Returns
    /// the pages newly mapped. `pinned(vpn)` is true for pages that `PageMap` maps: they are
    /// left to it, and no block covers them. Where the CPU maps a transparent huge page and
    /// the whole of it was faulted in, one 2 MiB block is mapped.
    ///
    /// Runs under `Process::map`, which the notifier takes: it allocates nothing that could
    /// enter reclaim (page tables are atomic allocations; ENOMEM tells the caller to reclaim
    /// without the lock and try again). `nodes` are tree nodes reserved beforehand, one per
    /// page of `f`. On an error, what was mapped stays mapped and recorded.
    ///
    /// # Safety
    ///
    /// The pages of `f` are still the ones the mm maps, and stay so for the call: the caller
    /// holds the lock the invalidation callback takes, and found `f`'s sequence unchanged
    /// under it (or `dom` never touches memory, as KUnit's fake).
    pub(crate) unsafe fn map_current(
        &mut self,
        dom: &impl IoPageTable,
        f: &Faulted,
        nodes: &mut KVec<RBTreeNodeReservation<u64, u8>>,
        pinned: impl Fn(u64) -> bool,
    ) -> Result<u64> {
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
            // The invalidation callback records a new sequence under `Process::map` before the mm
            // changes a page of the range; the caller holds that lock (contract).
            // SAFETY: Per the contract the sequence of these pfns is unchanged and cannot change
            // while the lock is held: they are still the pages the mm maps.
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
            dom.map_size(vpn << PAGE_SHIFT, phys, PAGE_SIZE, prot, true)?;
            self.tree.insert(node.into_node(vpn, flags));
            self.pages += 1;
            mapped += 1;
        }
        Ok(mapped)
    }

    /// Unmap every mirrored page in `[start, end)` (bytes), whole blocks included. Returns
    /// the entries unmapped.
    pub(crate) fn unmap_range(&mut self, dom: &impl IoPageTable, start: u64, end: u64) -> u64 {
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

#[kunit_tests(exanest_dma_mirror)]
mod tests {
    use super::*;
    use core::cell::RefCell;

    /// A page table that maps nothing for real and refuses to map an IOVA twice (io-pgtable
    /// answers EEXIST, with a WARN).
    struct FakeTable {
        mapped: RefCell<KVec<(u64, usize)>>,
    }

    impl FakeTable {
        fn new() -> Self {
            FakeTable {
                mapped: RefCell::new(KVec::new()),
            }
        }

        fn pages(&self) -> u64 {
            self.mapped
                .borrow()
                .iter()
                .map(|&(_, s)| (s / PAGE_SIZE) as u64)
                .sum()
        }
    }

    impl IoPageTable for FakeTable {
        fn map_size(&self, iova: u64, _phys: u64, size: usize, _prot: u32, atomic: bool) -> Result {
            assert!(atomic, "the mirror maps under the notifier's lock");
            let mut m = self.mapped.borrow_mut();
            let end = iova + size as u64;
            if m.iter().any(|&(a, s)| a < end && iova < a + s as u64) {
                return Err(EEXIST);
            }
            m.push((iova, size), GFP_KERNEL)?;
            Ok(())
        }

        fn unmap(&self, iova: u64, size: usize) -> usize {
            let mut m = self.mapped.borrow_mut();
            let end = iova + size as u64;
            let before: usize = m.iter().map(|&(_, s)| s).sum();
            m.retain(|e| !(iova <= e.0 && e.0 + e.1 as u64 <= end));
            before - m.iter().map(|&(_, s)| s).sum::<usize>()
        }
    }

    /// `n` pages from `first`, as HMM returns them (a THP is mapped with order 9).
    fn faulted(first: u64, n: usize, write: bool, order: u32) -> Faulted {
        let mut pfns = KVec::new();
        for i in 0..n {
            let pfn = 0x40000 + first as usize + i;
            pfns.push(HmmPfn::for_test(pfn, write, order), GFP_KERNEL)
                .unwrap();
        }
        Faulted {
            first,
            pfns,
            seq: 0,
            write,
        }
    }

    fn map(m: &mut Mirror, t: &FakeTable, f: &Faulted, pinned: impl Fn(u64) -> bool) -> u64 {
        let mut nodes = reserve_nodes(f).unwrap();
        // SAFETY: The fake table never touches the pages.
        unsafe { m.map_current(t, f, &mut nodes, pinned) }.unwrap()
    }

    /// The page count kept as entries come and go equals a walk of the entries and what the
    /// table maps, through single pages, overlaps, a write upgrade, a 2 MiB block, an eviction
    /// and range unmaps; no IOVA is ever mapped twice (the fake would refuse it).
    #[test]
    fn mirror_counts_what_it_maps() {
        let (mut m, t) = (Mirror::new(), FakeTable::new());
        let check = |m: &Mirror, t: &FakeTable| {
            let walked: u64 = m.tree.values().map(|&f| entry_pages(f)).sum();
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
}
