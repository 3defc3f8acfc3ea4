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

/// One run: pages `[start, end)` (byte addresses).
pub type Run = (u64, u64);

/// The runs faulted in, oldest first.
#[derive(Debug)]
pub struct RunLru<const N: usize> {
    runs: [Run; N],
    head: usize,
    len: usize,
}

impl<const N: usize> Default for RunLru<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> RunLru<N> {
    /// No run.
    pub const fn new() -> Self {
        RunLru {
            runs: [(0, 0); N],
            head: 0,
            len: 0,
        }
    }

    /// Runs remembered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no run is remembered.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A run was faulted in. Older runs that overlap it are taken into it (the new run is
    /// widened to cover them): evicting them apart later would unmap what the new run just
    /// mapped, and forgetting them would leave their pages outside it mapped and out of the
    /// budget's reach (a strided plan's span overlaps older runs that are still mapped; a
    /// budget that such pages keep over evicts the only other run at every fault, and a copy
    /// whose source and destination evict each other never ends). Returns the oldest run when
    /// there was no room for the new one: it is forgotten, and the caller leaves its pages
    /// mapped (evicting them would make the ring an implicit budget of `N` runs).
    pub fn push(&mut self, mut run: Run) -> Option<Run> {
        let mut kept = 0;
        for i in 0..self.len {
            let r = self.runs[(self.head + i) % N];
            if r.0 < run.1 && run.0 < r.1 {
                run = (run.0.min(r.0), run.1.max(r.1));
                continue;
            }
            self.runs[(self.head + kept) % N] = r;
            kept += 1;
        }
        self.len = kept;
        let mut out = None;
        if self.len == N {
            out = self.pop();
        }
        self.runs[(self.head + self.len) % N] = run;
        self.len += 1;
        out
    }

    fn pop(&mut self) -> Option<Run> {
        if self.len == 0 {
            return None;
        }
        let r = self.runs[self.head];
        self.head = (self.head + 1) % N;
        self.len -= 1;
        Some(r)
    }

    /// The least recently faulted run, to evict: never the newest, which the engine is about
    /// to use (evicting it would make the engine fault on it again at once, for ever).
    pub fn evict(&mut self) -> Option<Run> {
        if self.len < 2 {
            return None;
        }
        self.pop()
    }

    /// Forget every run (the mirror was emptied).
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
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

    #[test]
    fn budget_zero_is_unlimited() {
        assert!(!over(1 << 40, 0));
        assert!(!over(256, 256));
        assert!(over(257, 256));
    }

    /// A sequential stream through a buffer four times the budget, one run per fault: the
    /// mapped pages never exceed the budget plus one run, and each run is faulted exactly once
    /// per pass (nothing is evicted before older runs).
    #[test]
    fn stream_stays_within_budget() {
        let (budget, run, total) = (256u64, 16u64, 1024u64);
        let mut l: RunLru<64> = RunLru::new();
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
                    for p in r.0..r.1 {
                        m.remove(&p);
                    }
                };
                if let Some(r) = l.push((s, s + run)) {
                    gone(r, &mut mapped);
                    evicted += 1;
                }
                while over(mapped.len() as u64, budget) {
                    let r = l.evict().expect("a run to evict");
                    gone(r, &mut mapped);
                    evicted += 1;
                }
                assert!(
                    mapped.len() as u64 <= budget,
                    "pass {pass}: {}",
                    mapped.len()
                );
            }
        }
        assert!(evicted >= 2 * (total - budget) / run);
    }
}
