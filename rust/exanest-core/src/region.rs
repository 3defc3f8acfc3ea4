// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Bookkeeping of the memory regions a process registered: handles, lookups by address range
//! and access, and the count of copies in flight that use each region (so that a region cannot
//! be dropped under a running copy).

use super::abi::{Errno, Range, ValidReg};

/// One registered region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Handle given to user space, never 0.
    pub handle: u32,
    /// Address range.
    pub range: Range,
    /// `ACCESS_*` bits.
    pub access: u32,
    /// `MODE_*`.
    pub mode: u32,
    /// Touch-ahead window in pages.
    pub window: u32,
    /// Whether the driver maps faulting transfers ahead in it ([`ValidReg::map_ahead`]).
    pub map_ahead: bool,
    /// Copies in flight that use the region.
    pub users: u32,
    /// Engine faults resolved or NACKed in the region.
    pub faults: u64,
    /// Pages faulted in and mapped on demand.
    pub pages_resolved: u64,
    /// State of the adaptive touch-ahead window (used when `window` is `WINDOW_ADAPTIVE`).
    pub adapt: super::fault::Adaptive,
}

/// At most `N` regions, in fixed storage (no allocation after creation).
#[derive(Debug)]
pub struct RegionTable<const N: usize> {
    slots: [Option<Region>; N],
    next: u32,
}

impl<const N: usize> Default for RegionTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> RegionTable<N> {
    /// An empty table.
    pub const fn new() -> Self {
        RegionTable {
            slots: [None; N],
            next: 1,
        }
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn slot_of(&self, handle: u32) -> Option<usize> {
        if handle == 0 {
            return None;
        }
        self.slots
            .iter()
            .position(|s| matches!(s, Some(r) if r.handle == handle))
    }

    /// Add a region; returns its handle. `NoSpc` when full.
    pub fn insert(&mut self, reg: &ValidReg) -> Result<u32, Errno> {
        let free = self
            .slots
            .iter()
            .position(|s| s.is_none())
            .ok_or(Errno::NoSpc)?;
        // A fresh handle: not 0 and not in use (the table holds at most N < 2^32 handles).
        let mut handle = self.next;
        while handle == 0 || self.slot_of(handle).is_some() {
            handle = handle.wrapping_add(1);
        }
        self.next = handle.wrapping_add(1);
        self.slots[free] = Some(Region {
            handle,
            range: reg.range,
            access: reg.access,
            mode: reg.mode,
            window: reg.window,
            map_ahead: reg.map_ahead,
            users: 0,
            faults: 0,
            pages_resolved: 0,
            adapt: super::fault::Adaptive::new(1, u64::from(super::abi::MAX_WINDOW)),
        });
        Ok(handle)
    }

    /// The region with this handle.
    pub fn get(&self, handle: u32) -> Option<&Region> {
        self.slot_of(handle).and_then(|i| self.slots[i].as_ref())
    }

    /// The region with this handle, to update its counters.
    pub fn get_mut(&mut self, handle: u32) -> Option<&mut Region> {
        self.slot_of(handle).and_then(|i| self.slots[i].as_mut())
    }

    /// Remove a region: `NoEnt` for an unknown handle, `Busy` while copies use it.
    pub fn remove(&mut self, handle: u32) -> Result<Region, Errno> {
        let i = self.slot_of(handle).ok_or(Errno::NoEnt)?;
        match self.slots[i] {
            Some(r) if r.users > 0 => Err(Errno::Busy),
            Some(r) => {
                self.slots[i] = None;
                Ok(r)
            }
            None => Err(Errno::NoEnt),
        }
    }

    /// Remove every region, whatever its users (teardown); calls `f` on each.
    pub fn drain(&mut self, mut f: impl FnMut(Region)) {
        for s in self.slots.iter_mut() {
            if let Some(r) = s.take() {
                f(r);
            }
        }
    }

    /// Iterate over the regions.
    pub fn iter(&self) -> impl Iterator<Item = &Region> {
        self.slots.iter().flatten()
    }

    /// The handle of a region that contains all of `range` and allows `access`.
    /// `Fault` when no region contains it, `Acces` when those that do lack the access.
    pub fn find(&self, range: &Range, access: u32) -> Result<u32, Errno> {
        self.find_with(range, access, |_| true)
    }

    /// [`RegionTable::find`] among the regions for which `pred` holds.
    pub fn find_with(
        &self,
        range: &Range,
        access: u32,
        pred: impl Fn(&Region) -> bool,
    ) -> Result<u32, Errno> {
        let i = self.find_slot(range, access, pred)?;
        self.slots[i].map(|r| r.handle).ok_or(Errno::Fault)
    }

    /// [`RegionTable::find_with`]'s slot.
    #[inline(always)]
    fn find_slot(
        &self,
        range: &Range,
        access: u32,
        pred: impl Fn(&Region) -> bool,
    ) -> Result<usize, Errno> {
        let mut contained = false;
        for (i, s) in self.slots.iter().enumerate() {
            let Some(r) = s.as_ref().filter(|r| pred(r)) else {
                continue;
            };
            if r.range.contains(range) {
                if r.access & access == access {
                    return Ok(i);
                }
                contained = true;
            }
        }
        Err(if contained {
            Errno::Acces
        } else {
            Errno::Fault
        })
    }

    /// [`RegionTable::find_with`], but region `own` first (a transfer's own region, which it
    /// holds), taken if it contains `range`, allows `access` and `pred` holds for it: the
    /// region found, to update, with one look at the table where the handle found and then
    /// the region took two (inlined into the fault's path: called, it cost more than the look
    /// it saves).
    #[inline(always)]
    pub fn find_own_mut(
        &mut self,
        own: Option<u32>,
        range: &Range,
        access: u32,
        pred: impl Fn(&Region) -> bool,
    ) -> Result<&mut Region, Errno> {
        let fits = |r: &Region| pred(r) && r.range.contains(range) && r.access & access == access;
        let i = match own.and_then(|h| self.slot_of(h)) {
            Some(i) if self.slots[i].as_ref().is_some_and(fits) => i,
            _ => self.find_slot(range, access, &pred)?,
        };
        self.slots[i].as_mut().ok_or(Errno::Fault)
    }

    /// For a fault reported by page (the IOMMU's report): a region among those for which `pred`
    /// holds that has some byte of the page `[page, page + size)` and allows `access`, and the
    /// first such byte. A region may start or end inside the page, so the page's first byte
    /// need not be in it. `Fault` when no region meets the page, `Acces` when those that do
    /// lack the access.
    pub fn find_in_page(
        &self,
        page: u64,
        size: u64,
        access: u32,
        pred: impl Fn(&Region) -> bool,
    ) -> Result<(u32, u64), Errno> {
        let end = page.saturating_add(size);
        let mut met = false;
        for r in self.iter().filter(|r| pred(r)) {
            if r.range.start < end && page < r.range.end {
                if r.access & access == access {
                    return Ok((r.handle, r.range.start.max(page)));
                }
                met = true;
            }
        }
        Err(if met { Errno::Acces } else { Errno::Fault })
    }

    /// Bytes registered: the sum of the regions' lengths (overlaps counted twice, as each
    /// region is its own registration).
    pub fn bytes(&self) -> u64 {
        self.iter().map(|r| r.range.len()).sum()
    }

    /// Count one more copy using the region.
    pub fn hold(&mut self, handle: u32) -> Result<(), Errno> {
        let i = self.slot_of(handle).ok_or(Errno::NoEnt)?;
        if let Some(r) = self.slots[i].as_mut() {
            r.users += 1;
        }
        Ok(())
    }

    /// A copy using the region ended.
    pub fn release(&mut self, handle: u32) {
        if let Some(i) = self.slot_of(handle) {
            if let Some(r) = self.slots[i].as_mut() {
                r.users = r.users.saturating_sub(1);
            }
        }
    }
}

/// The parts of `[start, end)` (bytes) that none of `keep` touches, handed to `part` as page
/// ranges `[first, last)` of `1 << shift` bytes, in order: a page that a range of `keep` overlaps
/// even in part is kept. At most `N` ranges of `keep` are looked at (a region table's size).
/// Deregistration unmaps only these: a page another region still covers stays mapped, watched
/// by that region's notifier.
pub fn uncovered<const N: usize>(
    start: u64,
    end: u64,
    keep: impl IntoIterator<Item = (u64, u64)>,
    shift: u32,
    mut part: impl FnMut(u64, u64),
) {
    let (first, last) = (start >> shift, end.div_ceil(1 << shift));
    let mut k = [(0u64, 0u64); N];
    let mut n = 0;
    for (s, e) in keep {
        let (s, e) = (s >> shift, e.div_ceil(1 << shift));
        if s < last && first < e && n < N {
            k[n] = (s, e);
            n += 1;
        }
    }
    k[..n].sort_unstable();
    let mut at = first;
    for &(s, e) in &k[..n] {
        if s > at {
            part(at, s.min(last));
        }
        at = at.max(e);
        if at >= last {
            return;
        }
    }
    if at < last {
        part(at, last);
    }
}

/// The pages (of `1 << shift` bytes) that a set of byte ranges touches, even in part, as at most
/// `N` sorted, merged page ranges (a region table's size). The rights of a pinned page are the
/// union of the regions over it: it is mapped writable exactly where the writable regions'
/// cover says so (Documentation/abi.rst, "Modes").
pub struct Cover<const N: usize> {
    k: [(u64, u64); N],
    n: usize,
}

impl<const N: usize> Cover<N> {
    /// The cover of `ranges` (`[start, end)` in bytes); empty ones touch nothing, and past the
    /// `N`th range nothing is looked at.
    pub fn new(ranges: impl IntoIterator<Item = (u64, u64)>, shift: u32) -> Self {
        let mut k = [(0u64, 0u64); N];
        let mut n = 0;
        for (s, e) in ranges {
            if s < e && n < N {
                k[n] = (s >> shift, e.div_ceil(1 << shift));
                n += 1;
            }
        }
        k[..n].sort_unstable();
        // Merge overlapping and adjacent page ranges in place.
        let mut m = 0;
        for i in 0..n {
            if m > 0 && k[i].0 <= k[m - 1].1 {
                k[m - 1].1 = k[m - 1].1.max(k[i].1);
            } else {
                k[m] = k[i];
                m += 1;
            }
        }
        Cover { k, n: m }
    }

    /// Whether page `page` is touched by one of the ranges.
    pub fn covers(&self, page: u64) -> bool {
        // The first range that ends after the page: the page is in it or in none.
        let i = self.k[..self.n].partition_point(|&(_, e)| e <= page);
        i < self.n && self.k[i].0 <= page
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{ACCESS_READ, ACCESS_WRITE, MODE_PIN};
    use crate::testrng::Rng;

    fn gaps(start: u64, end: u64, keep: &[(u64, u64)]) -> ([(u64, u64); 8], usize) {
        let (mut out, mut n) = ([(0, 0); 8], 0);
        uncovered::<7>(start, end, keep.iter().copied(), 12, |a, b| {
            out[n] = (a, b);
            n += 1;
        });
        (out, n)
    }

    /// Deregistration unmaps only the pages no other region touches.
    #[test]
    fn uncovered_pages() {
        // Nothing kept: every page of the range, partial pages included.
        let (o, n) = gaps(0x1800, 0x5100, &[]);
        assert_eq!(&o[..n], &[(1, 6)]);
        // A region inside, one touching the start in part, one past the end.
        let (o, n) = gaps(
            0x0,
            0x10000,
            &[(0x3000, 0x5000), (0x0, 0x1001), (0x20000, 0x30000)],
        );
        assert_eq!(&o[..n], &[(2, 3), (5, 16)]);
        // Overlapping and unsorted kept ranges merge; one covering everything leaves nothing.
        let (o, n) = gaps(0x0, 0x8000, &[(0x5000, 0x7000), (0x2000, 0x6000)]);
        assert_eq!(&o[..n], &[(0, 2), (7, 8)]);
        let (_, n) = gaps(0x1000, 0x3000, &[(0x0, 0x10000)]);
        assert_eq!(n, 0);
        // The copy's own region over the first half of a region with a tail: the tail goes.
        let (o, n) = gaps(0x10000, 0x30000, &[(0x10000, 0x20000)]);
        assert_eq!(&o[..n], &[(0x20, 0x30)]);
    }

    fn vreg(start: u64, len: u64, access: u32) -> ValidReg {
        ValidReg {
            range: Range::new(start, len, u64::MAX).unwrap(),
            access,
            mode: MODE_PIN,
            window: 0,
            initiator: None,
            map_ahead: true,
        }
    }

    #[test]
    fn insert_find_remove() {
        let mut t = RegionTable::<2>::new();
        let a = t.insert(&vreg(0x1000, 0x3000, ACCESS_READ)).unwrap();
        let b = t.insert(&vreg(0x10000, 0x1000, ACCESS_WRITE)).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.insert(&vreg(0, 1, ACCESS_READ)), Err(Errno::NoSpc));
        let r = |s, l| Range::new(s, l, u64::MAX).unwrap();
        assert_eq!(t.find(&r(0x1800, 0x100), ACCESS_READ), Ok(a));
        assert_eq!(t.find(&r(0x1800, 0x100), ACCESS_WRITE), Err(Errno::Acces));
        assert_eq!(t.find(&r(0x3800, 0x1000), ACCESS_READ), Err(Errno::Fault));
        assert_eq!(t.find(&r(0x20000, 1), ACCESS_READ), Err(Errno::Fault));
        assert_eq!(
            t.find_with(&r(0x1800, 0x100), ACCESS_READ, |x| x.handle != a),
            Err(Errno::Fault)
        );
        // A transfer's own region is taken when it fits, else the first that does.
        let rw = ACCESS_READ | ACCESS_WRITE;
        let mut u = RegionTable::<3>::new();
        let x = u.insert(&vreg(0x1000, 0x4000, rw)).unwrap();
        let y = u.insert(&vreg(0x2000, 0x1000, rw)).unwrap();
        let z = u.insert(&vreg(0x2000, 0x1000, ACCESS_READ)).unwrap();
        let page = r(0x2000, 0x1000);
        let own = |u: &mut RegionTable<3>, h, access| {
            u.find_own_mut(h, &page, access, |_| true).map(|r| r.handle)
        };
        assert_eq!(own(&mut u, Some(y), ACCESS_WRITE), Ok(y));
        assert_eq!(own(&mut u, Some(z), ACCESS_READ), Ok(z));
        // Lacking the access, or not containing the range: the table's first that does.
        assert_eq!(own(&mut u, Some(z), ACCESS_WRITE), Ok(x));
        assert_eq!(
            u.find_own_mut(Some(y), &r(0x1000, 0x2000), ACCESS_READ, |_| true)
                .map(|r| r.handle),
            Ok(x)
        );
        // Unknown or no handle: as `find_with`, the predicate too.
        assert_eq!(own(&mut u, Some(99), ACCESS_WRITE), Ok(x));
        assert_eq!(own(&mut u, None, ACCESS_READ), Ok(x));
        assert_eq!(
            u.find_own_mut(Some(y), &page, ACCESS_WRITE, |r| r.handle == z)
                .map(|r| r.handle),
            Err(Errno::Acces)
        );
        assert_eq!(
            u.find_own_mut(None, &r(0x9000, 1), ACCESS_READ, |_| true)
                .map(|r| r.handle),
            Err(Errno::Fault)
        );
        // Found to update.
        u.find_own_mut(Some(y), &page, ACCESS_READ, |_| true)
            .unwrap()
            .faults += 1;
        assert_eq!(u.get(y).map(|r| r.faults), Some(1));
        t.hold(a).unwrap();
        assert_eq!(t.remove(a), Err(Errno::Busy));
        t.release(a);
        assert_eq!(t.remove(a).unwrap().handle, a);
        assert_eq!(t.remove(a), Err(Errno::NoEnt));
        assert_eq!(t.remove(0), Err(Errno::NoEnt));
        // A handle is not reused right away.
        let c = t.insert(&vreg(0x1000, 0x1000, ACCESS_READ)).unwrap();
        assert!(c != a && c != b);
    }

    /// Random operations against a plain list: lookups agree, handles stay unique and non-zero.
    #[test]
    fn property_matches_model() {
        let mut rng = Rng::new(42);
        for _round in 0..200 {
            let mut t = RegionTable::<8>::new();
            let mut model: [Option<(u32, Range, u32)>; 64] = [None; 64];
            for _ in 0..100 {
                match rng.below(3) {
                    0 => {
                        let start = rng.below(64) << 12;
                        let len = 1 + rng.below(16 << 12);
                        let access = 1 + rng.below(3) as u32;
                        let v = vreg(start, len, access);
                        let live = model.iter().flatten().count();
                        match t.insert(&v) {
                            Ok(h) => {
                                assert!(h != 0);
                                assert!(model.iter().flatten().all(|m| m.0 != h));
                                let free = model.iter().position(|m| m.is_none()).unwrap();
                                model[free] = Some((h, v.range, access));
                            }
                            Err(e) => {
                                assert_eq!(e, Errno::NoSpc);
                                assert_eq!(live, 8);
                            }
                        }
                    }
                    1 => {
                        if let Some(i) = (0..64).find(|&i| model[i].is_some() && rng.below(2) == 0)
                        {
                            let (h, _, _) = model[i].unwrap();
                            assert!(t.remove(h).is_ok());
                            model[i] = None;
                        }
                    }
                    _ => {
                        let q = Range::new(rng.below(80 << 12), 1 + rng.below(8 << 12), u64::MAX)
                            .unwrap();
                        let access = 1 + rng.below(3) as u32;
                        let containing: usize =
                            model.iter().flatten().filter(|m| m.1.contains(&q)).count();
                        let ok = model
                            .iter()
                            .flatten()
                            .any(|m| m.1.contains(&q) && m.2 & access == access);
                        match t.find(&q, access) {
                            Ok(h) => {
                                let m = model.iter().flatten().find(|m| m.0 == h).unwrap();
                                assert!(m.1.contains(&q) && m.2 & access == access);
                            }
                            Err(Errno::Acces) => assert!(!ok && containing > 0),
                            Err(Errno::Fault) => assert_eq!(containing, 0),
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                    }
                }
                assert_eq!(t.len(), model.iter().flatten().count());
            }
        }
    }

    #[test]
    fn find_in_page_meets_regions_inside_the_page() {
        let mut t = RegionTable::<4>::new();
        let reg = |start, len, access| ValidReg {
            range: Range::new(start, len, 1 << 48).unwrap(),
            access,
            mode: MODE_PIN,
            window: 0,
            initiator: None,
            map_ahead: true,
        };
        // Starts in the middle of page 0x10000, ends in the middle of page 0x11000.
        let h = t.insert(&reg(0x10800, 0x1000, ACCESS_READ)).unwrap();
        assert_eq!(
            t.find(&Range::new(0x10000, 1, 1 << 48).unwrap(), ACCESS_READ),
            Err(Errno::Fault)
        );
        assert_eq!(
            t.find_in_page(0x10000, 0x1000, ACCESS_READ, |_| true),
            Ok((h, 0x10800))
        );
        assert_eq!(
            t.find_in_page(0x11000, 0x1000, ACCESS_READ, |_| true),
            Ok((h, 0x11000))
        );
        assert_eq!(
            t.find_in_page(0x12000, 0x1000, ACCESS_READ, |_| true),
            Err(Errno::Fault)
        );
        assert_eq!(
            t.find_in_page(0x10000, 0x1000, ACCESS_WRITE, |_| true),
            Err(Errno::Acces)
        );
        assert_eq!(
            t.find_in_page(0x10000, 0x1000, ACCESS_READ, |_| false),
            Err(Errno::Fault)
        );
    }

    #[test]
    fn bytes_sums_every_region() {
        let mut t = RegionTable::<4>::new();
        let reg = |start, len| ValidReg {
            range: Range::new(start, len, 1 << 48).unwrap(),
            access: ACCESS_READ,
            mode: MODE_PIN,
            window: 0,
            initiator: None,
            map_ahead: true,
        };
        assert_eq!(t.bytes(), 0);
        let a = t.insert(&reg(0x10000, 0x3000)).unwrap();
        t.insert(&reg(0x11000, 0x800)).unwrap();
        assert_eq!(t.bytes(), 0x3800);
        t.remove(a).unwrap();
        assert_eq!(t.bytes(), 0x800);
    }

    /// A pinned page is writable where a writable region touches it, even in part.
    #[test]
    fn cover_of_ranges() {
        let c = Cover::<4>::new(
            [(0x5000, 0x7001), (0x1800, 0x2000), (0x2000, 0x3000), (9, 9)],
            12,
        );
        let covered: [u64; 5] = [1, 2, 5, 6, 7];
        for page in 0..10 {
            assert_eq!(c.covers(page), covered.contains(&page), "page {page}");
        }
        // Nothing past the N-th range is looked at; nothing covers nothing.
        let c = Cover::<1>::new([(0x1000, 0x2000), (0x3000, 0x4000)], 12);
        assert!(c.covers(1) && !c.covers(3));
        assert!(!Cover::<4>::new([], 12).covers(0));
        // Random ranges against a page-by-page answer.
        let mut rng = Rng::new(7);
        for _ in 0..200 {
            let mut r = [(0u64, 0u64); 6];
            for x in &mut r {
                let s = rng.below(0x20000);
                *x = (s, s + rng.below(0x6000));
            }
            let c = Cover::<6>::new(r, 12);
            for page in 0..0x30 {
                let want = r
                    .iter()
                    .any(|&(s, e)| s < e && s >> 12 <= page && page < e.div_ceil(0x1000));
                assert_eq!(c.covers(page), want);
            }
        }
    }
}
