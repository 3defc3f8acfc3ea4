// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Batched resolution: which of the faults served at once one fault-in resolves together.
//!
//! A process's server takes every fault its channels hold when it looks (several channels,
//! each stopped at a page: a queue's transfers, receives in flight). Faults in one region whose
//! touch-ahead windows lie close together are faulted in by one `hmm_range_fault` over their
//! span, with only their windows requested ([`PageMask`]), and mapped under one lock: one mmap
//! lock, one walk, one notifier sequence, and the pages of different faults that are contiguous
//! in one IOMMU map call. That walk also visits the pages between the windows (it does not
//! fault them in): a gap of up to [`BATCH_GAP`] pages costs less than the fixed part of a
//! second fault-in (the mmap lock, the VMA lookup, the walk down to the page table, the
//! notifier's sequence), a larger one more.

/// Pages between two windows at most for one fault-in to take both.
pub const BATCH_GAP: u64 = 32;
/// Pages a batch spans at most: the bits of a [`PageMask`].
pub const BATCH_SPAN: u64 = 512;

/// Words of a [`PageMask`].
pub const MASK_WORDS: usize = (BATCH_SPAN / 64) as usize;

/// A set of pages among the [`BATCH_SPAN`] from a batch's first: those its fault-in asks for.
/// Bit `i % 64` of word `i / 64` is page `i`, as the kernel's `test_bit` reads an array of
/// 64-bit `unsigned long`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageMask([u64; MASK_WORDS]);

impl PageMask {
    /// No page.
    pub const fn new() -> Self {
        PageMask([0; MASK_WORDS])
    }

    /// Add pages `[from, to)` (from the batch's first). False, and nothing added, if they do
    /// not fit in the span.
    pub fn add(&mut self, from: u64, to: u64) -> bool {
        if from > to || to > BATCH_SPAN {
            return false;
        }
        for i in from..to {
            self.0[(i / 64) as usize] |= 1 << (i % 64);
        }
        true
    }

    /// Whether page `i` (from the batch's first) is in the set.
    pub fn has(&self, i: u64) -> bool {
        i < BATCH_SPAN && self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Pages in the set.
    pub fn count(&self) -> u64 {
        self.0.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The bitmap, for the fault-in.
    pub fn words(&self) -> &[u64; MASK_WORDS] {
        &self.0
    }
}

/// Which pages of a range a fault-in asks for: only their pfns name pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Every page.
    All,
    /// The first `run` pages of every `stride` (a strided plan).
    Strided {
        /// Pages asked for at each stride point.
        run: u64,
        /// Pages from one stride point to the next.
        stride: u64,
    },
    /// The pages of a batch's mask (from the range's first page).
    Mask(PageMask),
}

impl Want {
    /// Whether page `i` of the range is asked for.
    pub fn has(&self, i: u64) -> bool {
        match self {
            Want::All => true,
            Want::Strided { run, stride } => i % (*stride).max(1) < *run,
            Want::Mask(m) => m.has(i),
        }
    }

    /// Pages asked for of a range of `n`.
    pub fn count(&self, n: u64) -> u64 {
        match self {
            Want::All => n,
            Want::Strided { run, stride } => {
                let stride = (*stride).max(1);
                (n / stride) * run + (n % stride).min(*run)
            }
            Want::Mask(m) => (0..n.min(BATCH_SPAN)).filter(|&i| m.has(i)).count() as u64,
        }
    }
}

/// Of windows `[first, last)` (pages) sorted by `first`, how many from the first make one
/// batch: each starts at most [`BATCH_GAP`] pages past the end of those before it, and all end
/// within [`BATCH_SPAN`] pages of the first one's start. A window longer than that is a batch
/// alone (its fault-in needs no mask). 0 only for no window.
pub fn batch_len(windows: &[(u64, u64)]) -> usize {
    let Some(&(start, mut end)) = windows.first() else {
        return 0;
    };
    let span_end = start.saturating_add(BATCH_SPAN);
    if end > span_end {
        return 1;
    }
    let mut n = 1;
    for &(first, last) in &windows[1..] {
        if first > end.saturating_add(BATCH_GAP) || last > span_end {
            break;
        }
        end = end.max(last);
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_holds_what_was_added_within_the_span() {
        let mut m = PageMask::new();
        assert!(m.add(0, 1));
        assert!(m.add(63, 66));
        assert!(m.add(BATCH_SPAN - 1, BATCH_SPAN));
        assert!(!m.add(BATCH_SPAN - 1, BATCH_SPAN + 1));
        assert!(!m.add(5, 4));
        assert_eq!(m.count(), 5);
        for i in 0..BATCH_SPAN + 2 {
            let want = matches!(i, 0 | 63 | 64 | 65) || i == BATCH_SPAN - 1;
            assert_eq!(m.has(i), want, "page {i}");
        }
        // The kernel's bit order: page 65 is bit 1 of the second word.
        assert_eq!(m.words()[1], 0b11);
        assert_eq!(m.words()[0], 1 | 1 << 63);
        // Overlapping windows are one set.
        assert!(m.add(0, 2));
        assert_eq!(m.count(), 6);
    }

    #[test]
    fn want_counts_what_it_asks_for() {
        let n = 100;
        for w in [
            Want::All,
            Want::Strided { run: 2, stride: 8 },
            Want::Strided {
                run: 1,
                stride: 1024,
            },
            Want::Mask({
                let mut m = PageMask::new();
                assert!(m.add(3, 9) && m.add(90, 120));
                m
            }),
        ] {
            let walked = (0..n).filter(|&i| w.has(i)).count() as u64;
            assert_eq!(w.count(n), walked, "{w:?}");
        }
        assert_eq!(Want::Strided { run: 2, stride: 8 }.count(100), 26);
        assert!(!Want::Mask(PageMask::new()).has(0));
    }

    #[test]
    fn close_windows_make_a_batch() {
        assert_eq!(batch_len(&[]), 0);
        assert_eq!(batch_len(&[(10, 11)]), 1);
        // Four channels stopped on neighbouring pages, window 0.
        assert_eq!(batch_len(&[(10, 11), (11, 12), (12, 13), (13, 14)]), 4);
        // Overlapping windows (two channels reading the same source).
        assert_eq!(batch_len(&[(10, 20), (10, 20), (15, 40)]), 3);
        // A gap of exactly BATCH_GAP pages joins; one more does not, nor what follows.
        assert_eq!(batch_len(&[(0, 1), (1 + BATCH_GAP, 2 + BATCH_GAP)]), 2);
        assert_eq!(
            batch_len(&[
                (0, 1),
                (2 + BATCH_GAP, 3 + BATCH_GAP),
                (3 + BATCH_GAP, 4 + BATCH_GAP)
            ]),
            1
        );
        // The gap counts from the furthest end so far, not the last window's.
        assert_eq!(batch_len(&[(0, 100), (5, 6), (120, 121)]), 3);
    }

    #[test]
    fn a_batch_fits_its_mask() {
        // Windows that reach past the span stop the batch, however close.
        let w: [(u64, u64); 3] = [(1000, 1200), (1200, 1400), (1400, 1600)];
        assert_eq!(batch_len(&w), 2);
        let n = batch_len(&w);
        let mut m = PageMask::new();
        for &(f, l) in &w[..n] {
            assert!(m.add(f - w[0].0, l - w[0].0));
        }
        assert_eq!(m.count(), 400);
        // A window longer than the span is a batch alone, even with a neighbour.
        assert_eq!(
            batch_len(&[(0, BATCH_SPAN + 1), (BATCH_SPAN + 1, BATCH_SPAN + 2)]),
            1
        );
        assert_eq!(batch_len(&[(0, BATCH_SPAN), (3, 4)]), 2);
        // At the top of the address space.
        assert_eq!(
            batch_len(&[(u64::MAX - 2, u64::MAX - 1), (u64::MAX - 1, u64::MAX)]),
            2
        );
    }
}
