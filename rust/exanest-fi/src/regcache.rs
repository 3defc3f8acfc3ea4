// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The endpoint's cache of on-demand registrations (the decision logic; `ep.rs` makes the
//! calls).
//!
//! A rendezvous send registers the application's buffer for the receiver's reads, the receiver
//! registers its receive buffer for the get, and an RMA registers its local buffer. A
//! deregistration unmaps the pages that no other registration covers (Documentation/abi.rst,
//! DEREG), so the next message from the same buffer faults every page in again, at both ends
//! (a receiver's fault is NACKed over the link and retransmitted). The cache keeps a finished
//! operation's registration and gives it to the next operation on the same range with the same
//! rights, so a buffer reused (NetPIPE, MPI's own buffers) faults once.
//!
//! Nothing is pinned either way: a cached registration is a range of virtual addresses, kept
//! coherent by the driver's MMU notifier. Memory freed and mapped again under it is faulted in
//! afresh; memory unmapped under it gives the next operation's fault `EFAULT`, as it would
//! give a fresh registration's. What a cached registration holds is a region of the file
//! (at most 64, `max_regions`) and, for a send, a key of the engine's table (256 for all
//! processes), readable by the one node the message went to until the entry is evicted:
//! hence a small bound (`FI_MR_CACHE_MAX_COUNT`, default [`DEFAULT_MAX`]; 0 turns the cache off)
//! and eviction of the least recently used idle entries when the driver says `ENOSPC`.

/// Entries kept by default (`FI_MR_CACHE_MAX_COUNT` overrides).
pub const DEFAULT_MAX: usize = 16;

/// Idle entries with a remote key kept at most (within the bound): the engine's key table has
/// 256 entries for every process on the node, and another process cannot make this one give
/// its keys back, so each endpoint keeps few (64 endpoints on a node fill the table).
pub const KEYED_MAX: usize = 4;

/// The rights a registration was made with: the `EXANEST_DMA_ACCESS_*` bits and the one node
/// its key works for (`None`: no key, or any node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rights {
    pub access: u32,
    pub node: Option<u32>,
}

/// A registration: the driver's handle and its remote key (0 without a remote right).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    pub handle: u32,
    pub rkey: u64,
}

#[derive(Debug)]
struct Entry {
    start: u64,
    end: u64,
    rights: Rights,
    reg: Reg,
    /// Operations using it now.
    users: u32,
    /// When last handed out (the cache's clock).
    used: u64,
}

/// Counters, for the provider's log and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

/// The cache: at most `max` idle entries are kept (entries in use are never evicted).
#[derive(Debug)]
pub struct RegCache {
    entries: Vec<Entry>,
    max: usize,
    clock: u64,
    stats: Stats,
}

impl RegCache {
    /// A cache keeping at most `max` entries (0: none, every registration goes with its op).
    pub fn new(max: usize) -> Self {
        RegCache {
            entries: Vec::with_capacity(max + 1),
            max,
            clock: 0,
            stats: Stats::default(),
        }
    }

    /// The bound from the environment's `FI_MR_CACHE_MAX_COUNT` (libfabric's name for its own
    /// cache's bound), [`DEFAULT_MAX`] without it or when it is not a number.
    pub fn max_from(var: Option<&str>) -> usize {
        var.and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_MAX)
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Entries held (in use or idle).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A registration covering `[addr, addr + len)` with `rights`, now used once more; `None`
    /// (a miss) when there is none: register, then [`RegCache::insert`].
    pub fn get(&mut self, addr: u64, len: u64, rights: Rights) -> Option<Reg> {
        let end = addr.saturating_add(len);
        self.clock += 1;
        let now = self.clock;
        match self
            .entries
            .iter_mut()
            .find(|e| e.rights == rights && e.start <= addr && end <= e.end)
        {
            Some(e) => {
                e.users += 1;
                e.used = now;
                self.stats.hits += 1;
                Some(e.reg)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// A registration just made for `[addr, addr + len)`, used once. Idle entries with the same
    /// rights inside its range are of no more use: `dereg` gets their handles.
    pub fn insert(
        &mut self,
        addr: u64,
        len: u64,
        rights: Rights,
        reg: Reg,
        dereg: impl FnMut(u32),
    ) {
        let end = addr.saturating_add(len);
        self.drop_where(dereg, |e| {
            e.users == 0 && e.rights == rights && addr <= e.start && e.end <= end
        });
        self.clock += 1;
        self.entries.push(Entry {
            start: addr,
            end,
            rights,
            reg,
            users: 1,
            used: self.clock,
        });
    }

    /// One use of `handle` is over. Past the bound, or past [`KEYED_MAX`] idle entries with a
    /// remote key, `dereg` gets the least recently used idle entries' handles (this one's with a
    /// bound of 0). A handle the cache does not hold goes to `dereg` at once.
    pub fn release(&mut self, handle: u32, mut dereg: impl FnMut(u32)) {
        match self.entries.iter_mut().find(|e| e.reg.handle == handle) {
            Some(e) => e.users = e.users.saturating_sub(1),
            None => {
                dereg(handle);
                return;
            }
        }
        let keyed_max = self.max.min(KEYED_MAX);
        while self.idle_keyed() > keyed_max {
            match self.evict_lru_where(|e| e.reg.rkey != 0) {
                Some(h) => dereg(h),
                None => break,
            }
        }
        while self.entries.len() > self.max {
            match self.evict_lru() {
                Some(h) => dereg(h),
                None => break,
            }
        }
    }

    fn idle_keyed(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.users == 0 && e.reg.rkey != 0)
            .count()
    }

    /// The least recently used idle entry, out of the cache (its handle is the caller's to
    /// deregister): for a registration the driver refused with `ENOSPC`. `None`: every entry is
    /// in use.
    pub fn evict_lru(&mut self) -> Option<u32> {
        self.evict_lru_where(|_| true)
    }

    fn evict_lru_where(&mut self, f: impl Fn(&Entry) -> bool) -> Option<u32> {
        let (i, _) = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.users == 0 && f(e))
            .min_by_key(|(_, e)| e.used)?;
        self.stats.evictions += 1;
        Some(self.entries.swap_remove(i).reg.handle)
    }

    /// Every entry out (the endpoint closes).
    pub fn clear(&mut self, dereg: impl FnMut(u32)) {
        self.drop_where(dereg, |_| true);
    }

    fn drop_where(&mut self, mut dereg: impl FnMut(u32), f: impl Fn(&Entry) -> bool) {
        let mut i = 0;
        while i < self.entries.len() {
            if f(&self.entries[i]) {
                dereg(self.entries.swap_remove(i).reg.handle);
            } else {
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Rights = Rights {
        access: 1,
        node: None,
    };

    fn reg(h: u32) -> Reg {
        Reg {
            handle: h,
            rkey: u64::from(h) << 8,
        }
    }

    fn released(c: &mut RegCache, h: u32) -> Vec<u32> {
        let mut v = Vec::new();
        c.release(h, |x| v.push(x));
        v
    }

    #[test]
    fn a_reused_range_hits_and_a_covered_one_too() {
        let mut c = RegCache::new(4);
        assert_eq!(c.get(0x1000, 0x2000, R), None);
        c.insert(0x1000, 0x2000, R, reg(1), |_| panic!("nothing to drop"));
        assert!(released(&mut c, 1).is_empty());
        assert_eq!(c.get(0x1000, 0x2000, R), Some(reg(1)));
        assert_eq!(c.get(0x1800, 0x100, R), Some(reg(1)), "inside the range");
        assert_eq!(c.get(0x1800, 0x2000, R), None, "past its end");
        assert_eq!(c.get(0x800, 0x100, R), None, "before its start");
        assert_eq!(
            c.stats(),
            Stats {
                hits: 2,
                misses: 3,
                evictions: 0
            }
        );
    }

    #[test]
    fn other_rights_or_another_node_miss() {
        let mut c = RegCache::new(4);
        let to1 = Rights {
            access: 5,
            node: Some(1),
        };
        c.insert(0x1000, 0x1000, to1, reg(1), |_| {});
        released(&mut c, 1);
        assert_eq!(
            c.get(
                0x1000,
                0x1000,
                Rights {
                    node: Some(2),
                    ..to1
                }
            ),
            None
        );
        assert_eq!(c.get(0x1000, 0x1000, Rights { access: 4, ..to1 }), None);
        assert_eq!(c.get(0x1000, 0x1000, to1), Some(reg(1)));
    }

    #[test]
    fn past_the_bound_the_least_recently_used_idle_entry_goes() {
        let mut c = RegCache::new(2);
        for h in 1..=3u32 {
            let a = u64::from(h) << 20;
            assert_eq!(c.get(a, 64, R), None);
            c.insert(a, 64, R, reg(h), |_| {});
        }
        assert_eq!(
            released(&mut c, 2),
            vec![2],
            "over the bound: the only idle one goes"
        );
        assert_eq!(c.len(), 2);
        assert!(released(&mut c, 1).is_empty(), "at the bound");
        assert!(released(&mut c, 3).is_empty());
        assert_eq!(
            c.get(1 << 20, 64, R),
            Some(reg(1)),
            "1 is now the more recent"
        );
        c.insert(4 << 20, 64, R, reg(4), |_| {});
        assert_eq!(released(&mut c, 4), vec![3], "3 is the least recently used");
        released(&mut c, 1);
        assert_eq!(c.stats().evictions, 2);
    }

    #[test]
    fn few_remote_keys_stay_idle_whatever_the_bound() {
        let mut c = RegCache::new(16);
        let keyed = |h: u32| Reg {
            handle: h,
            rkey: 0x100 + u64::from(h),
        };
        let local = |h: u32| Reg { handle: h, rkey: 0 };
        for h in 1..=6u32 {
            c.insert(u64::from(h) << 20, 64, R, keyed(h), |_| {});
            c.insert(u64::from(h) << 30, 64, R, local(100 + h), |_| {});
        }
        let mut gone = Vec::new();
        for h in 1..=6u32 {
            c.release(h, |x| gone.push(x));
            c.release(100 + h, |x| gone.push(x));
        }
        assert_eq!(
            gone,
            vec![1, 2],
            "past 4 idle keys, the oldest keyed ones go"
        );
        assert_eq!(c.len(), 10, "the local ones stay, within the bound of 16");
    }

    #[test]
    fn an_entry_in_use_is_never_evicted() {
        let mut c = RegCache::new(0);
        c.insert(0x1000, 8, R, reg(1), |_| {});
        assert_eq!(c.get(0x1000, 8, R), Some(reg(1)), "twice in use");
        assert_eq!(c.evict_lru(), None);
        assert!(released(&mut c, 1).is_empty(), "still used once");
        assert_eq!(
            released(&mut c, 1),
            vec![1],
            "a bound of 0 keeps nothing idle"
        );
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn a_larger_registration_replaces_the_idle_ones_it_covers() {
        let mut c = RegCache::new(8);
        c.insert(0x1000, 0x100, R, reg(1), |_| {});
        c.insert(0x1000, 0x200, R, reg(2), |_| {});
        released(&mut c, 1);
        let mut gone = Vec::new();
        c.insert(0x1000, 0x1000, R, reg(3), |h| gone.push(h));
        assert_eq!(gone, vec![1], "2 is in use, kept");
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn an_unknown_handle_is_deregistered_at_once_and_clear_empties() {
        let mut c = RegCache::new(8);
        assert_eq!(released(&mut c, 9), vec![9]);
        c.insert(0x1000, 8, R, reg(1), |_| {});
        c.insert(0x2000, 8, R, reg(2), |_| {});
        let mut all = Vec::new();
        c.clear(|h| all.push(h));
        all.sort();
        assert_eq!(all, vec![1, 2]);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn the_bound_comes_from_the_environment() {
        assert_eq!(RegCache::max_from(None), DEFAULT_MAX);
        assert_eq!(RegCache::max_from(Some("0")), 0);
        assert_eq!(RegCache::max_from(Some(" 40 ")), 40);
        assert_eq!(RegCache::max_from(Some("lots")), DEFAULT_MAX);
    }
}
