// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Device page faults: the queue the IOMMU fault handler fills, and the touch-ahead planner.
//!
//! The handler may run in hard-IRQ context (arm-smmu, the QFDB's MMU-500) or in the SMMUv3
//! event thread: it only records the fault here (no allocation, no lock, no sleep) and kicks the
//! worker that resolves it. Faults are few per transfer, so a small queue is scanned linearly to
//! drop duplicates: one page already waiting is not queued twice.
//!
//! The queue has one producer (the handler: one fault context per domain, so calls do not
//! overlap) and one consumer (the worker).

use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::abi::Range;

/// A recorded fault: the page-aligned IOVA, and whether the access was a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Page-aligned faulting address.
    pub page: u64,
    /// The access was a write.
    pub write: bool,
}

const EMPTY: u64 = u64::MAX;

/// A single-producer, single-consumer queue of faults with `N` slots (N a power of two).
pub struct FaultQueue<const N: usize> {
    slots: [AtomicU64; N],
    /// When each fault was recorded (the caller's clock, e.g. ktime in ns).
    stamps: [AtomicU64; N],
    head: AtomicU32,
    tail: AtomicU32,
    overflow: AtomicBool,
}

impl<const N: usize> Default for FaultQueue<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> FaultQueue<N> {
    const MASK: u32 = {
        assert!(N.is_power_of_two() && N <= 1 << 16);
        (N - 1) as u32
    };

    /// An empty queue.
    pub const fn new() -> Self {
        FaultQueue {
            slots: [const { AtomicU64::new(EMPTY) }; N],
            stamps: [const { AtomicU64::new(0) }; N],
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            overflow: AtomicBool::new(false),
        }
    }

    fn encode(f: Fault) -> u64 {
        f.page | u64::from(f.write)
    }

    /// Producer: record a fault on the page holding `iova`. Returns false when it was already
    /// queued (dedup) or the queue was full (the overflow flag is then set).
    pub fn push(&self, iova: u64, write: bool, page_shift: u32) -> bool {
        self.push_at(iova, write, page_shift, 0)
    }

    /// [`FaultQueue::push`] with the time the fault was reported (returned by
    /// [`FaultQueue::pop_stamped`]).
    pub fn push_at(&self, iova: u64, write: bool, page_shift: u32, stamp: u64) -> bool {
        let page = (iova >> page_shift) << page_shift;
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        // Dedup against what waits: a write fault covers a read fault of the same page.
        let mut i = tail;
        while i != head {
            let v = self.slots[(i & Self::MASK) as usize].load(Ordering::Relaxed);
            if v & !1 == page && (v & 1 == 1 || !write) {
                return false;
            }
            i = i.wrapping_add(1);
        }
        if head.wrapping_sub(tail) as usize >= N {
            self.overflow.store(true, Ordering::Release);
            return false;
        }
        self.stamps[(head & Self::MASK) as usize].store(stamp, Ordering::Relaxed);
        self.slots[(head & Self::MASK) as usize]
            .store(Self::encode(Fault { page, write }), Ordering::Relaxed);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Consumer: the oldest fault.
    pub fn pop(&self) -> Option<Fault> {
        self.pop_stamped().map(|(f, _)| f)
    }

    /// Consumer: the oldest fault and the time it was recorded.
    pub fn pop_stamped(&self) -> Option<(Fault, u64)> {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        if tail == head {
            return None;
        }
        let v = self.slots[(tail & Self::MASK) as usize].swap(EMPTY, Ordering::Relaxed);
        let stamp = self.stamps[(tail & Self::MASK) as usize].load(Ordering::Relaxed);
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some((
            Fault {
                page: v & !1,
                write: v & 1 == 1,
            },
            stamp,
        ))
    }

    /// Consumer: when the fault waiting on the page holding `iova` (read or write) was
    /// recorded, if one waits; it stays queued.
    pub fn stamp_of(&self, iova: u64, page_shift: u32) -> Option<u64> {
        let page = (iova >> page_shift) << page_shift;
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        let mut i = tail;
        while i != head {
            let at = (i & Self::MASK) as usize;
            if self.slots[at].load(Ordering::Relaxed) & !1 == page {
                return Some(self.stamps[at].load(Ordering::Relaxed));
            }
            i = i.wrapping_add(1);
        }
        None
    }

    /// Consumer: whether faults were dropped since the last call (then every stalled channel
    /// must be looked at, not only the queued faults).
    pub fn take_overflow(&self) -> bool {
        self.overflow.swap(false, Ordering::AcqRel)
    }

    /// Faults waiting.
    pub fn len(&self) -> usize {
        self.head
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail.load(Ordering::Acquire)) as usize
    }

    /// Whether no fault waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Pages to resolve for a fault at `addr`: the faulting page and up to `window` pages after it,
/// never past the VMA, the region or the rest of the transfer (`limit`, exclusive end of the
/// bytes the engine still has to access in this direction). Returns page frame numbers
/// `[first, last)`, never empty.
pub fn touch_ahead(
    addr: u64,
    window: u64,
    page_shift: u32,
    vma: &Range,
    region: &Range,
    limit: u64,
) -> (u64, u64) {
    let first = addr >> page_shift;
    let page_end = |end: u64| ((end - 1) >> page_shift) + 1;
    let mut last = first.saturating_add(1).saturating_add(window);
    for end in [vma.end, region.end, limit] {
        if end > addr {
            last = last.min(page_end(end));
        }
    }
    (first, last.max(first + 1))
}

/// `[first, last)` (pages, a window from [`touch_ahead`]) joined to the naturally aligned block
/// of `block` pages that holds page `vpn`, when the whole block lies inside the VMA and the
/// region; `[first, last)` unchanged otherwise.
///
/// For a fault on a transparent huge page: the page is resident whole, so resolving all of it
/// costs no memory, and the IOMMU maps it as one block (one map call, one IOTLB entry). A
/// window alone would map the huge page's first pages one by one, and the map-ahead after it
/// (whose steps end at multiples of [`crate::ahead::CHUNK`]) the rest of it one by one too:
/// a sequential transfer over huge pages got a block for every other one.
pub fn widen_to_block(
    (first, last): (u64, u64),
    vpn: u64,
    block: u64,
    page_shift: u32,
    vma: &Range,
    region: &Range,
) -> (u64, u64) {
    let start = vpn - vpn % block.max(1);
    let Some(end) = start.checked_add(block) else {
        return (first, last);
    };
    // In bytes, without wrapping at the top of the address space.
    let byte = |page: u64| u128::from(page) << page_shift;
    let inside = |r: &Range| byte(start) >= u128::from(r.start) && byte(end) <= u128::from(r.end);
    if block <= 1 || !inside(vma) || !inside(region) {
        return (first, last);
    }
    (first.min(start), last.max(end))
}

/// Window value asking for the adaptive policy ([`Adaptive`]) instead of a fixed window.
pub const ADAPTIVE_WINDOW: u32 = u32::MAX;

/// What one fault resolves: `run` pages every `stride` pages from `first`, up to page `end`
/// (exclusive). A contiguous window is one run (`stride == run`); a strided plan maps the
/// pages a constant-stride access pattern will touch, and not those between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The faulting page, the first of the first run.
    pub first: u64,
    /// Pages mapped at each stride point (at least 1).
    pub run: u64,
    /// Pages from one stride point to the next (at least `run`).
    pub stride: u64,
    /// One past the last page of the plan.
    pub end: u64,
}

impl Plan {
    /// `pages` pages from `first` (at least one).
    pub const fn contiguous(first: u64, pages: u64) -> Self {
        let pages = if pages == 0 { 1 } else { pages };
        Plan {
            first,
            run: pages,
            stride: pages,
            end: first.saturating_add(pages),
        }
    }

    /// Whether the plan maps pages between its runs (else it is one contiguous range).
    pub const fn is_strided(&self) -> bool {
        self.stride > self.run && self.end - self.first > self.stride
    }

    /// Whether page `vpn` is one the plan maps.
    pub const fn wants(&self, vpn: u64) -> bool {
        vpn >= self.first && vpn < self.end && (vpn - self.first) % self.stride < self.run
    }

    /// Pages the plan maps.
    pub const fn pages(&self) -> u64 {
        let span = self.end - self.first;
        (span / self.stride) * self.run + min(span % self.stride, self.run)
    }

    /// The plan cut at page `end` (exclusive), never before its first page.
    pub const fn clamp(self, end: u64) -> Self {
        let end = if end < self.end { end } else { self.end };
        Plan {
            end: if end > self.first {
                end
            } else {
                self.first + 1
            },
            ..self
        }
    }
}

const fn min(a: u64, b: u64) -> u64 {
    if a < b {
        a
    } else {
        b
    }
}

/// Stride points a stream's first strided plan maps; each fault that continues the stream
/// where the last plan ended doubles it.
pub const STRIDE_FIRST: u64 = 8;
/// Most pages a strided plan spans, first to last (HMM's pfn array for one fault).
pub const STRIDE_MAX_SPAN: u64 = 4096;

/// An adaptive touch-ahead policy, like the kernel's readahead, which also recognises constant
/// strides:
/// - a fault right where the last resolved window ended is a sequential stream, and the window
///   doubles (up to `max`);
/// - a fault at the same distance from the last one as that one was from the one before
///   (a stride, forward) starts a strided stream: the plan maps the next [`STRIDE_FIRST`]
///   stride points (the transfer's pages at each, `run`), and each fault where the last plan
///   ended doubles that, up to `max + 1` pages and [`STRIDE_MAX_SPAN`]; a planned stride point
///   that faults again (the mm changed its page) gets the minimum window and the stream goes
///   on;
/// - any other fault starts over from `min`.
///
/// Sparse access then maps little more than it touches, and sequential and strided streams
/// soon take few faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adaptive {
    /// Page just past the last resolved window (`u64::MAX`: none yet).
    next: u64,
    /// The window the next sequential fault gets.
    window: u64,
    min: u64,
    max: u64,
    /// Page of the last fault that did not continue a window (`u64::MAX`: none yet).
    last: u64,
    /// Distance from the fault before the last to the last (0: none, or backwards).
    stride: u64,
    /// Stride points the next strided plan maps.
    count: u64,
    /// The stride point just past the last strided plan (`u64::MAX`: none).
    snext: u64,
}

impl Adaptive {
    /// A policy starting at `min` pages and growing to `max`.
    pub const fn new(min: u64, max: u64) -> Self {
        Adaptive {
            next: u64::MAX,
            window: min,
            min,
            max,
            last: u64::MAX,
            stride: 0,
            count: STRIDE_FIRST,
            snext: u64::MAX,
        }
    }

    /// The contiguous window for a fault at page `vpn` (no stride is planned).
    pub fn window_for(&mut self, vpn: u64) -> u64 {
        self.plan_for(vpn, u64::MAX).run - 1
    }

    /// The plan for a fault at page `vpn`, whose transfer touches `run` pages from it (at least
    /// 1; `u64::MAX` when not known, which plans no stride). The caller clamps it to the VMA,
    /// the region and, unless it is strided, the transfer.
    pub fn plan_for(&mut self, vpn: u64, run: u64) -> Plan {
        let run = run.max(1);
        if vpn == self.next {
            // The rest of a run (or a sequential stream): strides are counted from where runs
            // start, so a stream of runs longer than the window is still recognised.
            self.window = (self.window * 2 + 1).min(self.max);
            return Plan::contiguous(vpn, self.window + 1);
        }
        if self.snext != u64::MAX
            && vpn < self.snext
            && vpn >= self.snext.saturating_sub(self.count * self.stride)
            && (self.snext - vpn) % self.stride == 0
        {
            // A stride point the last plan mapped, faulting again (the mm changed the page, or
            // a budget evicted it): the minimum window there, and the stream goes on.
            return Plan::contiguous(vpn, self.min + 1);
        }
        let prev = core::mem::replace(&mut self.last, vpn);
        let continues = vpn == self.snext;
        let repeats = prev != u64::MAX && vpn > prev && vpn - prev == self.stride;
        if self.stride > run && (continues || repeats) {
            if continues {
                self.count = self.count.saturating_mul(2);
            }
            let stride = self.stride;
            let by_pages = ((self.max + 1) / run).max(1);
            let by_span = (STRIDE_MAX_SPAN / stride).max(1);
            self.count = self.count.min(by_pages).min(by_span);
            self.snext = vpn.saturating_add(self.count * stride);
            self.window = self.min;
            return Plan {
                first: vpn,
                run,
                stride,
                end: vpn.saturating_add((self.count - 1) * stride + run),
            };
        }
        // Not a stream (yet): the distance from the last fault is the stride to look for.
        self.stride = if prev != u64::MAX && vpn > prev {
            vpn - prev
        } else {
            0
        };
        self.count = STRIDE_FIRST;
        self.snext = u64::MAX;
        self.window = self.min;
        Plan::contiguous(vpn, self.window + 1)
    }

    /// The fault just planned got a window of `window` pages past its page, wider than the
    /// plan's (a long transfer's first stretch, or a lead on map-ahead): a fault that goes on
    /// where it ended doubles from it, instead of from the plan's (a sequential copy's
    /// destination faulted at pages 32, 36 and 44 after a 32-page first stretch).
    pub fn widened(&mut self, window: u64) {
        self.window = self.window.max(window.min(self.max));
    }

    /// Whether a fault at page `vpn` goes on where the last resolved window ended (a
    /// sequential stream), rather than starting one.
    pub fn continues(&self, vpn: u64) -> bool {
        vpn == self.next
    }

    /// The fault was resolved up to page `end` (exclusive).
    pub fn resolved(&mut self, end: u64) {
        self.next = end;
    }
}

/// The address ranges whose faults the IOMMU fault handler claims, readable without a lock in
/// any context (hard IRQ included): a sequence count around `N` (start, end) slots, rewritten
/// whole by [`ClaimTable::publish`]. Writers are serialised by the caller (the driver's region
/// lock); a reader retries while a write is in progress, a bounded number of times.
pub struct ClaimTable<const N: usize> {
    seq: AtomicU32,
    len: AtomicU32,
    starts: [AtomicU64; N],
    ends: [AtomicU64; N],
}

impl<const N: usize> Default for ClaimTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> ClaimTable<N> {
    /// Reads a reader tries before it gives up on a table that keeps changing.
    pub const READ_TRIES: u32 = 4;

    /// An empty table: every address is refused.
    pub const fn new() -> Self {
        ClaimTable {
            seq: AtomicU32::new(0),
            len: AtomicU32::new(0),
            starts: [const { AtomicU64::new(0) }; N],
            ends: [const { AtomicU64::new(0) }; N],
        }
    }

    /// Replace the ranges with `ranges` (`[start, end)` each; at most `N`, the rest ignored).
    /// One writer at a time.
    pub fn publish<I: IntoIterator<Item = (u64, u64)>>(&self, ranges: I) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let mut n = 0;
        for (start, end) in ranges.into_iter().take(N) {
            self.starts[n].store(start, Ordering::Relaxed);
            self.ends[n].store(end, Ordering::Relaxed);
            n += 1;
        }
        self.len.store(n as u32, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Whether `[addr, addr + size)` meets a published range; `None` when writes kept racing
    /// with the read [`Self::READ_TRIES`] times.
    pub fn claims(&self, addr: u64, size: u64) -> Option<bool> {
        let end = addr.saturating_add(size);
        for _ in 0..Self::READ_TRIES {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 != 0 {
                core::hint::spin_loop();
                continue;
            }
            let n = (self.len.load(Ordering::Relaxed) as usize).min(N);
            let mut hit = false;
            for i in 0..n {
                let (a, b) = (
                    self.starts[i].load(Ordering::Relaxed),
                    self.ends[i].load(Ordering::Relaxed),
                );
                hit |= a < end && addr < b;
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return Some(hit);
            }
        }
        None
    }
}

/// The last `N` invalidations of a process's memory, as the MMU notifier callback reports them
/// (byte ranges), so that a resolver whose pages' sequence moved while it faulted them in can
/// tell which of its pages an invalidation touched (Transport v2's companion, issue 23: an
/// invalidation anywhere in a region no longer makes every resolution in it start over). The
/// resolver notes [`InvalLog::mark`] before its fault-in; at map time, pages that no
/// invalidation since the mark touched are still the ones the mm maps.
#[derive(Clone, Copy, Debug)]
pub struct InvalLog<const N: usize> {
    ranges: [(u64, u64); N],
    /// Invalidations recorded, ever.
    count: u64,
}

impl<const N: usize> Default for InvalLog<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> InvalLog<N> {
    /// Nothing recorded.
    pub const fn new() -> Self {
        InvalLog {
            ranges: [(0, 0); N],
            count: 0,
        }
    }

    /// The mm invalidates `[start, end)`.
    pub fn record(&mut self, start: u64, end: u64) {
        if N > 0 {
            self.ranges[(self.count % N as u64) as usize] = (start, end);
        }
        self.count += 1;
    }

    /// Where the log is now, for [`InvalLog::hits`] later.
    pub fn mark(&self) -> u64 {
        self.count
    }

    /// Whether an invalidation recorded since `mark` may have touched `[start, end)`: one
    /// overlaps it, or more than `N` came since (the log lost track: any may have).
    pub fn hits(&self, mark: u64, start: u64, end: u64) -> bool {
        let since = self.count.saturating_sub(mark);
        if since > N as u64 {
            return true;
        }
        (mark..self.count).any(|k| {
            let (s, e) = self.ranges[(k % N as u64) as usize];
            s < end && start < e
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The consumer finds when a queued page was reported, read or write, without taking it.
    /// A window wider than the plan (a first stretch) is where the stream's doubling goes on
    /// from; a narrower one changes nothing, and none passes the maximum.
    #[test]
    fn a_stream_doubles_from_the_window_it_got() {
        let mut a = Adaptive::new(1, 511);
        assert_eq!(a.window_for(0), 1);
        a.widened(31);
        a.resolved(32);
        assert_eq!(
            a.window_for(32),
            63,
            "doubles from the first stretch, not from 1"
        );
        a.widened(3);
        a.resolved(96);
        assert_eq!(a.window_for(96), 127);
        a.widened(10_000);
        a.resolved(224);
        assert_eq!(a.window_for(224), 511, "at most the maximum");
    }

    /// A fault continues a stream where the last resolved window ended, and only there.
    #[test]
    fn a_fault_continues_where_the_last_window_ended() {
        let mut a = Adaptive::new(1, 511);
        assert!(!a.continues(0), "nothing resolved yet");
        let w = a.window_for(10);
        a.resolved(10 + w + 1);
        assert!(a.continues(12));
        assert!(!a.continues(11) && !a.continues(13) && !a.continues(10));
    }

    #[test]
    fn stamp_of_a_queued_page() {
        let q: FaultQueue<4> = FaultQueue::new();
        assert_eq!(q.stamp_of(0x5000, 12), None);
        assert!(q.push_at(0x5123, false, 12, 70));
        assert!(q.push_at(0x9000, true, 12, 80));
        assert_eq!(q.stamp_of(0x5fff, 12), Some(70));
        assert_eq!(q.stamp_of(0x9000, 12), Some(80));
        assert_eq!(q.stamp_of(0x6000, 12), None);
        assert_eq!(q.len(), 2);
        assert_eq!(
            q.pop_stamped(),
            Some((
                Fault {
                    page: 0x5000,
                    write: false
                },
                70
            ))
        );
        assert_eq!(q.stamp_of(0x5000, 12), None);
        assert_eq!(q.stamp_of(0x9000, 12), Some(80));
    }

    /// What the invalidation log tells a resolver: ranges since its mark that overlap its
    /// pages, and "maybe" once more than it holds came since.
    #[test]
    fn inval_log_tells_which_pages_were_touched() {
        let mut l = InvalLog::<4>::new();
        l.record(0x1000, 0x3000);
        let mark = l.mark();
        assert!(!l.hits(mark, 0, u64::MAX), "nothing since the mark");
        l.record(0x8000, 0x9000);
        assert!(l.hits(mark, 0x8000, 0x9000));
        assert!(l.hits(mark, 0x7000, 0x8001));
        assert!(!l.hits(mark, 0x7000, 0x8000), "end exclusive");
        assert!(!l.hits(mark, 0x9000, 0xa000));
        assert!(!l.hits(mark, 0x1000, 0x3000), "before the mark");
        assert!(l.hits(0, 0x1000, 0x2000));
        for k in 0..3 {
            l.record(0x100000 + k * 0x1000, 0x101000 + k * 0x1000);
        }
        assert!(
            !l.hits(mark, 0x9000, 0x10000),
            "four since the mark: all known"
        );
        l.record(0x200000, 0x201000);
        assert!(
            l.hits(mark, 0x9000, 0x10000),
            "five since: the log lost track"
        );
        let mut none = InvalLog::<0>::new();
        let mark = none.mark();
        assert!(!none.hits(mark, 0, 1));
        none.record(0x5000, 0x6000);
        assert!(none.hits(mark, 0, 1), "a log of none knows nothing");
    }
    use crate::testrng::Rng;

    /// Claims: a page meets a range when any byte of it does; an empty table claims nothing;
    /// a republished table forgets what it no longer holds.
    #[test]
    fn claim_table_lookup() {
        let t = ClaimTable::<4>::new();
        assert_eq!(t.claims(0x1000, 0x1000), Some(false));
        t.publish([(0x10_0800, 0x10_2000), (0x20_0000, 0x20_0001)]);
        assert_eq!(t.claims(0x10_0000, 0x1000), Some(true)); // region starts mid-page
        assert_eq!(t.claims(0x10_2000, 0x1000), Some(false)); // end is exclusive
        assert_eq!(t.claims(0x20_0000, 0x1000), Some(true));
        assert_eq!(t.claims(0x30_0000, 0x1000), Some(false));
        assert_eq!(t.claims(u64::MAX - 0xfff, 0x1000), Some(false));
        t.publish([(0x20_0000, 0x20_0001)]);
        assert_eq!(t.claims(0x10_0000, 0x1000), Some(false));
        // More than N ranges: the first N are kept.
        t.publish((0..6).map(|i| (i << 20, (i << 20) + 1)));
        assert_eq!(t.claims(3 << 20, 1), Some(true));
        assert_eq!(t.claims(5 << 20, 1), Some(false));
    }

    /// A reader racing with a writer never sees a mix of two tables. Both tables claim X, at
    /// opposite ends (slot 0 in one, the last slot in the other, the rest empty): only a torn
    /// read (the new slot 0, the old last slot) could refuse X.
    #[test]
    fn claim_table_concurrent_readers_see_whole_tables() {
        extern crate std;
        use std::sync::atomic::{AtomicBool, AtomicU64};
        use std::sync::Arc;
        const X: (u64, u64) = (0x9000, 0xa000);
        let t = Arc::new(ClaimTable::<8>::new());
        let stop = Arc::new(AtomicBool::new(false));
        let mut a = [(0u64, 0u64); 8];
        let mut b = [(0u64, 0u64); 8];
        a[0] = X;
        b[7] = X;
        t.publish(a);
        // Answers the reader got while the writer published: the writer goes on until there
        // are enough of them (the reader may start late on a loaded host), for at most 60 s.
        let seen = Arc::new(AtomicU64::new(0));
        let reader = {
            let (t, stop, seen) = (t.clone(), stop.clone(), seen.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(v) = t.claims(X.0, 0x1000) {
                        assert!(v, "a torn read refused an address both tables claim");
                        seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        let start = std::time::Instant::now();
        let mut i = 0u64;
        while i < 300_000 || seen.load(Ordering::Relaxed) < 1000 {
            t.publish(if i % 2 == 0 { b } else { a });
            i += 1;
            if start.elapsed().as_secs() >= 60 {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        assert!(
            seen.load(Ordering::Relaxed) >= 1000,
            "the reader got {} answers while {i} tables were published",
            seen.load(Ordering::Relaxed)
        );
    }

    #[test]
    fn fifo_and_dedup() {
        let q = FaultQueue::<8>::new();
        assert!(q.push(0x1234, false, 12));
        assert!(!q.push(0x1fff, false, 12), "same page, read again");
        assert!(
            q.push(0x1000, true, 12),
            "a write is more than a queued read"
        );
        assert!(
            !q.push(0x1004, false, 12),
            "a read is covered by the queued write"
        );
        assert!(q.push(0x5000, false, 12));
        assert_eq!(q.len(), 3);
        assert_eq!(
            q.pop(),
            Some(Fault {
                page: 0x1000,
                write: false
            })
        );
        assert_eq!(
            q.pop(),
            Some(Fault {
                page: 0x1000,
                write: true
            })
        );
        assert_eq!(
            q.pop(),
            Some(Fault {
                page: 0x5000,
                write: false
            })
        );
        assert_eq!(q.pop(), None);
        assert!(
            q.push(0x1000, false, 12),
            "popped faults are no longer deduplicated"
        );
    }

    #[test]
    fn overflow_is_reported_once() {
        let q = FaultQueue::<4>::new();
        for i in 0..4 {
            assert!(q.push(i << 12, false, 12));
        }
        assert!(!q.push(9 << 12, false, 12));
        assert!(q.take_overflow());
        assert!(!q.take_overflow());
        assert_eq!(q.pop().unwrap().page, 0);
        assert!(q.push(9 << 12, false, 12));
    }

    /// Random pushes and pops against a model queue: nothing is lost unless the queue is full,
    /// nothing is duplicated while it waits, order is kept.
    #[test]
    fn property_matches_model() {
        let mut rng = Rng::new(3);
        for _ in 0..200 {
            let q = FaultQueue::<16>::new();
            let mut model: [(u64, bool); 64] = [(0, false); 64];
            let (mut h, mut t) = (0usize, 0usize);
            for _ in 0..300 {
                if rng.below(3) > 0 {
                    let page = rng.below(24) << 12;
                    let write = rng.below(2) == 1;
                    let dup =
                        (t..h).any(|i| model[i % 64].0 == page && (model[i % 64].1 || !write));
                    let full = h - t >= 16;
                    let pushed = q.push(page + rng.below(4096), write, 12);
                    assert_eq!(pushed, !dup && !full);
                    if pushed {
                        model[h % 64] = (page, write);
                        h += 1;
                    }
                } else {
                    let got = q.pop();
                    if t == h {
                        assert_eq!(got, None);
                    } else {
                        let (page, write) = model[t % 64];
                        assert_eq!(got, Some(Fault { page, write }));
                        t += 1;
                    }
                }
                assert_eq!(q.len(), h - t);
            }
        }
    }

    #[test]
    fn adaptive_grows_on_streams_and_resets_on_jumps() {
        let mut a = Adaptive::new(1, 511);
        // First fault: the minimum.
        assert_eq!(a.window_for(100), 1);
        a.resolved(102);
        // The stream continues where the window ended: it doubles.
        assert_eq!(a.window_for(102), 3);
        a.resolved(106);
        assert_eq!(a.window_for(106), 7);
        a.resolved(114);
        // A jump (sparse access): back to the minimum.
        assert_eq!(a.window_for(500), 1);
        a.resolved(502);
        let mut w = 0;
        let mut at = 502;
        for _ in 0..20 {
            w = a.window_for(at);
            at += w + 1;
            a.resolved(at);
        }
        assert_eq!(w, 511, "capped");
    }

    /// Sequential faults over N pages take O(log N) faults with the adaptive window, sparse
    /// ones never map more than twice the minimum window per fault.
    #[test]
    fn property_adaptive_fault_counts() {
        let mut a = Adaptive::new(1, 511);
        let (mut vpn, mut faults) = (0u64, 0);
        while vpn < 1 << 16 {
            let w = a.window_for(vpn);
            vpn += w + 1;
            a.resolved(vpn);
            faults += 1;
        }
        assert!(faults < 160, "{faults} faults for 65536 sequential pages");
        let mut rng = Rng::new(5);
        let mut a = Adaptive::new(1, 511);
        for _ in 0..1000 {
            let v = rng.below(1 << 30) * 16;
            let w = a.window_for(v);
            assert!(w <= 3);
            a.resolved(v + w + 1);
        }
    }

    /// Replays accesses `(first page, pages)` against a region of `pages` pages that starts
    /// unmapped, as the driver resolves them: a fault at the first unmapped page of an access,
    /// planned by `a` with the rest of the access as the run, cut at the region's end and,
    /// unless strided, at the access's end. Returns (faults, pages mapped, pages touched).
    fn replay(a: &mut Adaptive, pages: u64, accesses: &[(u64, u64)]) -> (u64, u64, u64) {
        let mut mapped = [false; 1 << 14];
        let (mut faults, mut n_mapped) = (0, 0);
        let mut touched = [false; 1 << 14];
        for &(first, len) in accesses {
            let end = (first + len).min(pages);
            for v in first..end {
                touched[v as usize] = true;
            }
            let mut at = first;
            while let Some(v) = (at..end).find(|&v| !mapped[v as usize]) {
                faults += 1;
                let mut p = a.plan_for(v, end - v).clamp(pages);
                if !p.is_strided() {
                    p = p.clamp(end);
                }
                assert!(p.wants(v), "the faulting page is in its plan");
                let mut count = 0;
                for w in p.first..p.end {
                    if p.wants(w) {
                        count += 1;
                        if !mapped[w as usize] {
                            mapped[w as usize] = true;
                            n_mapped += 1;
                        }
                    }
                }
                assert_eq!(count, p.pages());
                a.resolved(p.end);
                at = v + 1;
            }
        }
        let n_touched = touched.iter().filter(|&&t| t).count() as u64;
        (faults, n_mapped, n_touched)
    }

    /// Recorded traces of 16 MiB regions (4096 pages): strided access takes at most 2 faults
    /// per MiB and maps at most 1.5 times the pages it touches; sequential access, at most 1
    /// fault per MiB with a window of 511; random access plans no stride.
    #[test]
    fn stride_prediction_on_traces() {
        let mib = 16;
        for (stride, run) in [(16u64, 1u64), (16, 2), (4, 1), (64, 3), (2, 1), (511, 1)] {
            let acc: [(u64, u64); 2048] = core::array::from_fn(|i| (i as u64 * stride, run));
            let n = (4096 / stride) as usize;
            let (faults, mapped, touched) = replay(&mut Adaptive::new(1, 511), 4096, &acc[..n]);
            assert!(
                faults <= 2 * mib,
                "stride {stride} run {run}: {faults} faults for {mib} MiB"
            );
            assert!(
                mapped * 2 <= touched * 3,
                "stride {stride} run {run}: {mapped} pages mapped for {touched} touched"
            );
        }
        // The bench's strided pattern (4 KiB every 64 KiB): 8 faults, nothing mapped untouched.
        let acc: [(u64, u64); 256] = core::array::from_fn(|i| (i as u64 * 16, 1));
        assert_eq!(
            replay(&mut Adaptive::new(1, 511), 4096, &acc),
            (8, 256, 256)
        );
        // One sequential transfer of the whole region.
        let (faults, mapped, _) = replay(&mut Adaptive::new(1, 511), 4096, &[(0, 4096)]);
        assert!(faults <= mib, "{faults} faults for {mib} MiB sequential");
        assert_eq!(mapped, 4096);
        // A predicted page that faults again (the mm dropped it) is mapped alone; the stream
        // goes on where the plan ended.
        let mut a = Adaptive::new(1, 511);
        for v in [0, 16] {
            a.plan_for(v, 1);
        }
        let p = a.plan_for(32, 1);
        assert_eq!((p.is_strided(), p.end), (true, 32 + 7 * 16 + 1));
        assert_eq!(a.plan_for(80, 1), Plan::contiguous(80, 2));
        let p = a.plan_for(32 + 8 * 16, 1);
        assert!(p.is_strided() && p.pages() == 16);
        // A stride broken by a jump starts over: no page past the jump is planned from it.
        let mut a = Adaptive::new(1, 511);
        for v in [0, 16, 32] {
            a.plan_for(v, 1);
        }
        let p = a.plan_for(1000, 1);
        assert!(!p.is_strided() && p.pages() == 2);
        assert!(
            !a.plan_for(32 + 8 * 16, 1).is_strided(),
            "the old stream is forgotten"
        );
        // Random pages: a plan never maps more than the minimum window's two pages.
        let mut rng = Rng::new(11);
        let mut a = Adaptive::new(1, 511);
        for _ in 0..1000 {
            let p = a.plan_for(rng.below(1 << 30), 1);
            assert!(p.pages() <= 2);
            a.resolved(p.end);
        }
    }

    #[test]
    fn plan_arithmetic() {
        let p = Plan {
            first: 100,
            run: 2,
            stride: 16,
            end: 100 + 3 * 16 + 2,
        };
        assert!(p.is_strided());
        assert_eq!(p.pages(), 8);
        assert!(p.wants(100) && p.wants(101) && !p.wants(102) && p.wants(116) && p.wants(149));
        assert!(!p.wants(99) && !p.wants(150));
        // Cut inside the last run, then before the second point.
        assert_eq!(p.clamp(149).pages(), 7);
        assert_eq!(p.clamp(110).pages(), 2);
        assert!(!p.clamp(110).is_strided());
        assert_eq!(p.clamp(0).pages(), 1, "never empty");
        let c = Plan::contiguous(7, 0);
        assert_eq!((c.pages(), c.end, c.is_strided()), (1, 8, false));
    }

    #[test]
    fn touch_ahead_clamps() {
        let r = |s: u64, l: u64| Range::new(s, l, u64::MAX).unwrap();
        let vma = r(0x10000, 0x100000);
        let region = r(0x10000, 0x100000);
        // Window of 4 pages after the fault page.
        assert_eq!(
            touch_ahead(0x20010, 4, 12, &vma, &region, u64::MAX),
            (0x20, 0x25)
        );
        // Window 0: only the faulting page.
        assert_eq!(
            touch_ahead(0x20010, 0, 12, &vma, &region, u64::MAX),
            (0x20, 0x21)
        );
        // The transfer ends inside page 0x22: stop there.
        assert_eq!(
            touch_ahead(0x20010, 64, 12, &vma, &region, 0x22001),
            (0x20, 0x23)
        );
        // The VMA ends first.
        let small = r(0x10000, 0x12000);
        assert_eq!(
            touch_ahead(0x20010, 64, 12, &small, &region, u64::MAX),
            (0x20, 0x22)
        );
        // The region ends first.
        let reg = r(0x20000, 0x3000);
        assert_eq!(
            touch_ahead(0x20010, 64, 12, &vma, &reg, u64::MAX),
            (0x20, 0x23)
        );
        // Huge window does not overflow.
        assert_eq!(
            touch_ahead(0x20010, u64::MAX, 12, &vma, &region, u64::MAX).0,
            0x20
        );
    }

    #[test]
    fn widen_to_block_only_whole_blocks_inside() {
        let r = |s: u64, l: u64| Range::new(s, l, u64::MAX).unwrap();
        let (vma, region) = (r(0x4000_0000, 0x80_0000), r(0x4000_0000, 0x80_0000));
        // A 17-page window at the start of a huge page: the whole huge page.
        let w = touch_ahead(0x4020_0000, 16, 12, &vma, &region, u64::MAX);
        assert_eq!(w, (0x40200, 0x40211));
        assert_eq!(
            widen_to_block(w, 0x40200, 512, 12, &vma, &region),
            (0x40200, 0x40400)
        );
        // A fault in its middle: both sides; a window past the block keeps its end.
        assert_eq!(
            widen_to_block((0x40300, 0x40301), 0x40300, 512, 12, &vma, &region),
            (0x40200, 0x40400)
        );
        assert_eq!(
            widen_to_block((0x40300, 0x40500), 0x40300, 512, 12, &vma, &region),
            (0x40200, 0x40500)
        );
        // The block reaches past the region's end, or starts before it: unchanged.
        let short = r(0x4000_0000, 0x3f_f000);
        assert_eq!(
            widen_to_block((0x40200, 0x40201), 0x40200, 512, 12, &vma, &short),
            (0x40200, 0x40201)
        );
        let late = r(0x4000_1000, 0x7f_f000);
        assert_eq!(
            widen_to_block((0x40001, 0x40002), 0x40001, 512, 12, &vma, &late),
            (0x40001, 0x40002)
        );
        // The VMA ends inside the block: unchanged.
        let vshort = r(0x4000_0000, 0x2f_f000);
        assert_eq!(
            widen_to_block((0x40200, 0x40201), 0x40200, 512, 12, &vshort, &region),
            (0x40200, 0x40201)
        );
        // No block size (or 1): unchanged; the top of the address space does not wrap.
        assert_eq!(widen_to_block((5, 6), 5, 0, 12, &vma, &region), (5, 6));
        assert_eq!(widen_to_block((5, 6), 5, 1, 12, &vma, &region), (5, 6));
        let top = u64::MAX >> 12;
        assert_eq!(
            widen_to_block((top, top), top, 512, 12, &vma, &region),
            (top, top)
        );
    }

    #[test]
    fn property_touch_ahead_within_bounds() {
        let mut rng = Rng::new(11);
        for _ in 0..10_000 {
            let vs = rng.below(1 << 20) << 12;
            let vma = Range::new(vs, 1 + rng.below(1 << 24), u64::MAX).unwrap();
            let rs = vma.start + rng.below(vma.len());
            let region = Range::new(rs, 1 + rng.below(vma.end - rs), u64::MAX).unwrap();
            let addr = region.start + rng.below(region.len());
            let limit = addr + 1 + rng.below(1 << 22);
            let window = rng.below(300);
            let (first, last) = touch_ahead(addr, window, 12, &vma, &region, limit);
            assert_eq!(first, addr >> 12);
            assert!(last > first && last - first <= window + 1);
            // Never a page that starts at or past any bound.
            for b in [vma.end, region.end, limit] {
                assert!(
                    (last - 1) << 12 < b,
                    "page {:#x} past bound {b:#x}",
                    last - 1
                );
            }
        }
    }
}
