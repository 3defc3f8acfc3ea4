// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! A lock-free allocator of small ids (`0..64 * N`): the engine's endpoints and remote key
//! table entries (Documentation/network.rst), which processes take and give back from any
//! context without a lock.

use core::sync::atomic::{AtomicU64, Ordering};

/// `64 * N` ids, each free or taken.
pub struct IdMap<const N: usize> {
    words: [AtomicU64; N],
}

impl<const N: usize> Default for IdMap<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> IdMap<N> {
    /// Every id free.
    pub const fn new() -> Self {
        IdMap {
            words: [const { AtomicU64::new(0) }; N],
        }
    }

    /// Take the lowest free id below `limit`, if any.
    pub fn alloc(&self, limit: usize) -> Option<u32> {
        let limit = limit.min(64 * N);
        for (w, word) in self.words.iter().enumerate() {
            if w * 64 >= limit {
                break;
            }
            let mut cur = word.load(Ordering::Relaxed);
            loop {
                let free = !cur;
                if free == 0 {
                    break;
                }
                let bit = free.trailing_zeros() as usize;
                if w * 64 + bit >= limit {
                    break;
                }
                match word.compare_exchange_weak(
                    cur,
                    cur | (1 << bit),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some((w * 64 + bit) as u32),
                    Err(now) => cur = now,
                }
            }
        }
        None
    }

    /// Give `id` back; false if it was not taken (or is out of range).
    pub fn free(&self, id: u32) -> bool {
        let (w, bit) = (id as usize / 64, id % 64);
        match self.words.get(w) {
            Some(word) => word.fetch_and(!(1 << bit), Ordering::AcqRel) & (1 << bit) != 0,
            None => false,
        }
    }

    /// How many ids are taken.
    pub fn taken(&self) -> u32 {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::sync::Arc;
    use std::vec::Vec;

    #[test]
    fn lowest_first_and_limits() {
        let m = IdMap::<2>::new();
        assert_eq!(m.alloc(100), Some(0));
        assert_eq!(m.alloc(100), Some(1));
        assert!(m.free(0));
        assert!(!m.free(0), "freed twice");
        assert!(!m.free(128), "out of range");
        assert_eq!(m.alloc(100), Some(0));
        for i in 2..100 {
            assert_eq!(m.alloc(100), Some(i));
        }
        assert_eq!(m.alloc(100), None, "the limit");
        assert_eq!(m.alloc(1000), Some(100), "clamped to 128");
        assert_eq!(m.taken(), 101);
    }

    #[test]
    fn concurrent_takers_get_distinct_ids() {
        let m = Arc::new(IdMap::<4>::new());
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    for _ in 0..32 {
                        got.push(m.alloc(256).unwrap());
                    }
                    got
                })
            })
            .collect();
        let mut all: Vec<u32> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 256);
        assert_eq!(m.alloc(256), None);
    }
}
