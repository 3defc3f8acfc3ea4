// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The translation budget: how many pages the on-demand mirror of one process may keep mapped
//! in its IOMMU domain, and which pages go when it is over. Every fault-in maps a *run* (the
//! faulting page and its touch-ahead); runs are remembered in the order they were faulted, and
//! the least recently faulted go first. An evicted run is unmapped (the IOTLB with it) and
//! faults in again when the engine next touches it. Pinned pages are not the mirror's and never
//! go.
//!
//! Fixed storage: the last `N` runs. When more are faulted, the oldest is forgotten: its pages
//! stay mapped, out of the budget's reach, until the mm or a deregistration unmaps them.
//!
//! A run that only touches an older one (a stream's next fault, just past its last run) is
//! taken into it while the two span at most [`RunLru::set_merge_max`]: a stream then keeps
//! one run per [`merge_span`] instead of one per fault, which keeps the runs few (their
//! index is sorted: a fault inserting into the middle of 1024 runs moved up to 2 KiB, about
//! 0.6 us of a fault's service under -icount), and fewer of a stream's pages are forgotten.

/// One run: pages `[start, end)` (byte addresses).
pub type Run = (u64, u64);

/// A ring slot whose run was taken into a newer one.
const DEAD: Run = (0, 0);

/// The runs faulted in, oldest first.
///
/// The runs remembered never overlap (a new run takes in those it overlaps), so sorted by
/// start they are sorted by end too, and the runs a new one overlaps are neighbours in that
/// order: `order` keeps the ring slots of the live runs sorted by start, and a fault finds
/// what it overlaps by binary search instead of looking at every run (1024 of them cost the
/// fault path 21 us per fault under -icount: the fault log's *map* stage).
#[derive(Debug)]
pub struct RunLru<const N: usize> {
    /// The ring, oldest first from `head`; [`DEAD`] for a run taken into a newer one.
    runs: [Run; N],
    head: usize,
    /// Slots used, dead ones included.
    used: usize,
    /// The slots of the live runs, by start; `live` of them.
    order: [u16; N],
    live: usize,
    /// The longest run that touching runs are merged into (0: they are not).
    merge_max: u64,
}

/// Most pages a run merged from touching runs spans: 2 MiB of 4 KiB pages, as a huge page.
pub const MERGE_PAGES: u64 = 512;

/// The span, in pages, up to which touching runs merge under a budget of `limit` pages (0: no
/// budget): [`MERGE_PAGES`], and at most an eighth of the budget, so that the newest run of
/// each of a copy's streams stays well within it (evicting a run frees at most an eighth of
/// it, and the two runs a copy is faulting on never evict each other).
pub const fn merge_span(limit: u64) -> u64 {
    if limit == 0 || limit / 8 >= MERGE_PAGES {
        MERGE_PAGES
    } else {
        limit / 8
    }
}

impl<const N: usize> Default for RunLru<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> RunLru<N> {
    const FITS: () = assert!(N > 0 && N <= 1 << 16, "slots are u16");

    /// No run.
    pub const fn new() -> Self {
        let () = Self::FITS;
        RunLru {
            runs: [DEAD; N],
            head: 0,
            used: 0,
            order: [0; N],
            live: 0,
            merge_max: 0,
        }
    }

    /// Runs that touch merge while they span at most `max` (the unit of the runs; 0: never).
    /// Merged runs already remembered stay as they are.
    pub fn set_merge_max(&mut self, max: u64) {
        self.merge_max = max;
    }

    /// Runs remembered.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no run is remembered.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The run in slot `order[i]`.
    fn at(&self, i: usize) -> Run {
        self.runs[usize::from(self.order[i])]
    }

    /// A run was faulted in. Older runs that overlap it are taken into it (the new run is
    /// widened to cover them): evicting them apart later would unmap what the new run just
    /// mapped, and forgetting them would leave their pages outside it mapped and out of the
    /// budget's reach (a strided plan's span overlaps older runs that are still mapped; a
    /// budget that such pages keep over evicts the only other run at every fault, and a copy
    /// whose source and destination evict each other never ends). So are the runs that touch
    /// it, while the whole spans at most the merge span ([`RunLru::set_merge_max`]): a
    /// stream's pages then go together, the oldest first. Returns the oldest run when
    /// there was no room for the new one: it is forgotten, and the caller leaves its pages
    /// mapped (evicting them would make the ring an implicit budget of `N` runs).
    pub fn push(&mut self, mut run: Run) -> Option<Run> {
        // The live runs that end after the new one starts, from the first, while they start
        // before it ends: those it overlaps; and the runs that touch it on either side, while
        // the merged run spans at most `merge_max`.
        let mut first =
            self.order[..self.live].partition_point(|&s| self.runs[usize::from(s)].1 <= run.0);
        if first > 0 {
            let l = self.at(first - 1);
            if l.1 == run.0 && run.1 - l.0 <= self.merge_max {
                first -= 1;
            }
        }
        let mut past = first;
        while past < self.live {
            let r = self.at(past);
            if r.0 > run.1 || (r.0 == run.1 && r.1 - run.0.min(r.0) > self.merge_max) {
                break;
            }
            run = (run.0.min(r.0), run.1.max(r.1));
            self.runs[usize::from(self.order[past])] = DEAD;
            past += 1;
        }
        self.order.copy_within(past..self.live, first);
        self.live -= past - first;
        let mut out = None;
        // Still in order: what came before `first` ends before the new run starts (a run taken
        // in started after them), what came after it starts after the new run ends, so the new
        // run goes at `first`, one place lower if the pop below removes a run before it.
        let mut at = first;
        if self.used == N {
            self.compact();
            if self.used == N {
                out = self.pop().map(|(r, i)| {
                    if i < at {
                        at -= 1;
                    }
                    r
                });
            }
        }
        let slot = (self.head + self.used) % N;
        self.runs[slot] = run;
        self.used += 1;
        self.order.copy_within(at..self.live, at + 1);
        self.order[at] = slot as u16;
        self.live += 1;
        out
    }

    /// Free the dead slots: the live runs move to the front of the ring, in their order.
    fn compact(&mut self) {
        if self.live == self.used {
            return;
        }
        let mut moved = [0u16; N];
        let mut kept = 0;
        for i in 0..self.used {
            let from = (self.head + i) % N;
            let r = self.runs[from];
            if r == DEAD {
                continue;
            }
            let to = (self.head + kept) % N;
            self.runs[from] = DEAD;
            self.runs[to] = r;
            moved[from] = to as u16;
            kept += 1;
        }
        for s in self.order[..self.live].iter_mut() {
            *s = moved[usize::from(*s)];
        }
        self.used = kept;
    }

    /// Take the oldest run out: it, and where it was in the order.
    fn pop(&mut self) -> Option<(Run, usize)> {
        while self.used > 0 && self.runs[self.head] == DEAD {
            self.head = (self.head + 1) % N;
            self.used -= 1;
        }
        if self.used == 0 {
            return None;
        }
        let r = self.runs[self.head];
        let i = self.order[..self.live].partition_point(|&s| self.runs[usize::from(s)].0 < r.0);
        self.order.copy_within(i + 1..self.live, i);
        self.live -= 1;
        self.runs[self.head] = DEAD;
        self.head = (self.head + 1) % N;
        self.used -= 1;
        Some((r, i))
    }

    /// The least recently faulted run, to evict: never the newest, which the engine is about
    /// to use (evicting it would make the engine fault on it again at once, for ever).
    pub fn evict(&mut self) -> Option<Run> {
        if self.live < 2 {
            return None;
        }
        self.pop().map(|(r, _)| r)
    }

    /// Forget every run (the mirror was emptied).
    pub fn clear(&mut self) {
        self.runs = [DEAD; N];
        self.head = 0;
        self.used = 0;
        self.live = 0;
    }
}

/// Whether a mirror of `mapped` pages is over a budget of `budget` pages (0: no budget).
pub fn over(mapped: u64, budget: u64) -> bool {
    budget != 0 && mapped > budget
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn oldest_first_never_the_newest() {
        let mut l: RunLru<4> = RunLru::new();
        assert_eq!(l.evict(), None);
        assert_eq!(l.push((0, 10)), None);
        assert_eq!(l.evict(), None, "the only run is the newest");
        assert_eq!(l.push((10, 20)), None);
        assert_eq!(l.push((20, 30)), None);
        assert_eq!(l.evict(), Some((0, 10)));
        assert_eq!(l.evict(), Some((10, 20)));
        assert_eq!(l.evict(), None);
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn a_run_faulted_again_replaces_the_old_one() {
        let mut l: RunLru<4> = RunLru::new();
        l.push((0, 10));
        l.push((10, 20));
        l.push((5, 12));
        // (0, 10) and (10, 20) overlap the new run: they are taken into it, which is the only
        // run left and the newest; evicting it unmaps them whole.
        assert_eq!(l.len(), 1);
        assert_eq!(l.evict(), None);
        l.push((20, 30));
        assert_eq!(l.evict(), Some((0, 20)));
        // A stream of faults on the same pages never fills the ring with stale copies.
        for _ in 0..100 {
            assert_eq!(l.push((40, 41)), None);
        }
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn full_ring_hands_back_the_oldest() {
        let mut l: RunLru<2> = RunLru::new();
        assert_eq!(l.push((0, 1)), None);
        assert_eq!(l.push((1, 2)), None);
        assert_eq!(l.push((2, 3)), Some((0, 1)));
        assert_eq!(l.push((3, 4)), Some((1, 2)));
        assert_eq!(l.evict(), Some((2, 3)));
        l.clear();
        assert!(l.is_empty());
    }

    /// The ring as it was before the sorted index: every push looks at every run. The index
    /// must not change what is remembered, forgotten or evicted.
    struct Naive {
        runs: std::vec::Vec<Run>,
        cap: usize,
        merge_max: u64,
    }

    impl Naive {
        fn new(cap: usize) -> Self {
            Naive {
                runs: std::vec::Vec::new(),
                cap,
                merge_max: 0,
            }
        }

        fn push(&mut self, mut run: Run) -> Option<Run> {
            // The run ending where the new one starts, if the two fit `merge_max`; then those
            // it overlaps; then, again and again, the one starting where it ends, if they fit.
            let (max, start, end) = (self.merge_max, run.0, run.1);
            self.runs.retain(|r| {
                let t = r.1 == start && end - r.0 <= max;
                if t {
                    run.0 = r.0;
                }
                !t
            });
            self.runs.retain(|r| {
                let o = r.0 < run.1 && run.0 < r.1;
                if o {
                    run = (run.0.min(r.0), run.1.max(r.1));
                }
                !o
            });
            while let Some(i) = self
                .runs
                .iter()
                .position(|r| r.0 == run.1 && r.1 - run.0 <= max)
            {
                run.1 = self.runs.remove(i).1;
            }
            let out = (self.runs.len() == self.cap).then(|| self.runs.remove(0));
            self.runs.push(run);
            out
        }

        fn evict(&mut self) -> Option<Run> {
            (self.runs.len() >= 2).then(|| self.runs.remove(0))
        }
    }

    /// Random pushes (short runs and long spans, overlapping, touching or neither), evictions
    /// and clears give what the plain ring gives, over many wraps of a small ring, with
    /// touching runs merged up to spans of 0 (never), 6 and 40.
    #[test]
    fn sorted_index_matches_the_plain_ring() {
        for seed in 1..=6 {
            let mut rng = crate::testrng::Rng::new(seed);
            let mut l: RunLru<64> = RunLru::new();
            let mut small: RunLru<8> = RunLru::new();
            let mut n = Naive::new(64);
            let mut ns = Naive::new(8);
            let max = [0, 6, 40][seed as usize % 3];
            l.set_merge_max(max);
            small.set_merge_max(max);
            n.merge_max = max;
            ns.merge_max = max;
            for step in 0..20_000 {
                match rng.below(100) {
                    0 => {
                        l.clear();
                        small.clear();
                        n.runs.clear();
                        ns.runs.clear();
                    }
                    1..=15 => {
                        assert_eq!(l.evict(), n.evict(), "step {step}");
                        assert_eq!(small.evict(), ns.evict(), "step {step}");
                    }
                    k => {
                        let start = rng.below(512);
                        let len = if k < 90 {
                            1 + rng.below(4)
                        } else {
                            1 + rng.below(64)
                        };
                        let r = (start, start + len);
                        assert_eq!(l.push(r), n.push(r), "step {step} push {r:?}");
                        assert_eq!(small.push(r), ns.push(r), "step {step} push {r:?}");
                    }
                }
                assert_eq!(l.len(), n.runs.len());
                assert_eq!(small.len(), ns.runs.len());
            }
        }
    }

    /// Streams that run through a full ring many times, up, down and back and forth (the
    /// oldest run leaves at one end of the order while new ones come at either end, so the
    /// new run's place moves when the pop takes a run before it): what is remembered,
    /// forgotten and evicted is what the plain ring gives.
    #[test]
    fn streams_through_a_full_ring_match_the_plain_ring() {
        for max in [0, 5] {
            let mut l: RunLru<16> = RunLru::new();
            let mut n = Naive::new(16);
            l.set_merge_max(max);
            n.merge_max = max;
            let mut check = |r: Run, l: &mut RunLru<16>| {
                assert_eq!(l.push(r), n.push(r), "push {r:?}");
                assert_eq!(l.len(), n.runs.len());
                if r.0 % 7 == 3 {
                    assert_eq!(l.evict(), n.evict(), "evict after {r:?}");
                }
            };
            for i in 0..200u64 {
                check((1000 + i * 2, 1000 + i * 2 + 1), &mut l);
            }
            for i in 0..200u64 {
                check((999 - i * 2, 1000 - i * 2), &mut l);
            }
            for i in 0..400u64 {
                let k = if i % 2 == 0 { 2000 + i } else { 500 - i };
                check((k, k + 1), &mut l);
            }
            // Two streams of touching runs (a copy's source and destination, a page a fault).
            for i in 0..300u64 {
                check((5000 + i, 5001 + i), &mut l);
                check((9000 + i, 9001 + i), &mut l);
            }
        }
    }

    /// Touching runs merge up to the span, on either side; past it a new run starts; runs
    /// that only overlap merge whatever their span. A copy's two streams keep two runs per
    /// span instead of one per fault.
    #[test]
    fn touching_runs_merge_up_to_the_span() {
        let mut l: RunLru<8> = RunLru::new();
        l.set_merge_max(4);
        l.push((10, 11));
        l.push((11, 12));
        l.push((9, 10));
        assert_eq!(l.len(), 1, "merged both ways");
        l.push((12, 14));
        assert_eq!(l.len(), 2, "(9, 12) and (12, 14) would span 5");
        l.push((0, 20));
        assert_eq!(l.len(), 1, "an overlap merges whatever the span");
        l.push((30, 31));
        assert_eq!(l.evict(), Some((0, 20)));
        let mut two: RunLru<1024> = RunLru::new();
        two.set_merge_max(512);
        for p in 0..2048u64 {
            assert_eq!(two.push((p, p + 1)), None);
            assert_eq!(two.push((1 << 20 | p, (1 << 20 | p) + 1)), None);
        }
        assert_eq!(two.len(), 8);
        assert_eq!(two.evict(), Some((0, 512)));
        // Without merging, the same streams fill the ring and forget their oldest runs.
        let mut each: RunLru<1024> = RunLru::new();
        let forgotten = (0..2048u64).filter_map(|p| each.push((p, p + 1))).count();
        assert_eq!(forgotten, 1024);
    }

    /// The merge span: 512 pages, at most an eighth of a budget; no budget, 512.
    #[test]
    fn merge_span_is_an_eighth_of_the_budget_at_most() {
        assert_eq!(merge_span(0), MERGE_PAGES);
        assert_eq!(merge_span(1 << 20), MERGE_PAGES);
        assert_eq!(merge_span(4096), MERGE_PAGES);
        assert_eq!(merge_span(256), 32);
        assert_eq!(merge_span(7), 0);
    }

    #[test]
    fn budget_zero_is_unlimited() {
        assert!(!over(1 << 40, 0));
        assert!(!over(256, 256));
        assert!(over(257, 256));
    }

    /// A sequential stream through a buffer four times the budget, one run per fault, its
    /// runs remembered apart or merged up to the budget's span: the mapped pages never exceed
    /// the budget, and each pass evicts at least what does not fit (nothing is evicted before
    /// older runs).
    #[test]
    fn stream_stays_within_budget() {
        let (budget, run, total) = (256u64, 16u64, 1024u64);
        for max in [0, merge_span(budget)] {
            let mut l: RunLru<64> = RunLru::new();
            l.set_merge_max(max);
            let mut mapped = std::collections::BTreeSet::new();
            let mut evicted = 0;
            for pass in 0..3 {
                for s in (0..total).step_by(run as usize) {
                    if mapped.contains(&s) {
                        continue;
                    }
                    for p in s..s + run {
                        mapped.insert(p);
                    }
                    let gone = |r: Run, m: &mut std::collections::BTreeSet<u64>| {
                        let n = m.len();
                        for p in r.0..r.1 {
                            m.remove(&p);
                        }
                        (n - m.len()) as u64
                    };
                    if let Some(r) = l.push((s, s + run)) {
                        evicted += gone(r, &mut mapped);
                    }
                    while over(mapped.len() as u64, budget) {
                        let r = l.evict().expect("a run to evict");
                        evicted += gone(r, &mut mapped);
                    }
                    assert!(
                        mapped.len() as u64 <= budget,
                        "span {max}, pass {pass}: {}",
                        mapped.len()
                    );
                }
            }
            assert!(evicted >= 2 * (total - budget), "span {max}: {evicted}");
        }
    }
}
