// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Engine contexts shared by more processes than there are: who holds each context, who waits
//! for one, and which idle context a waiting process takes (the virtualisation policy).
//!
//! A process holds at most one context. It gets one when it needs the engine (at open when one
//! is free, else when it submits a copy), and keeps it until it closes, or until the context is
//! taken from it, which happens only while it is *idle* (nothing queued or running on it).
//!
//! The policy, fair in the sense that no process waits for ever while others are served:
//! - a free context goes first, then the least recently granted idle one (LRU);
//! - processes that find none wait in one FIFO; only its head may take a context, so no later
//!   arrival overtakes a waiter;
//! - a holder keeps its context for as long as nobody waits; once somebody does, a holder whose
//!   time slice (since it got the context) is over must queue like everybody else before it
//!   submits more, so that its context becomes idle and goes to the head of the queue. A
//!   process streaming copies therefore cannot keep a context from the others for more than a
//!   slice plus the time its copies already submitted take.
//!
//! Fixed storage: `N` contexts, `W` waiters (a process that finds the queue full waits
//! outside it and retries, which is the same as waiting at its end).

/// What [`ContextPool::request`] tells a process that needs a context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant<H> {
    /// Keep the context it holds (its index).
    Keep(usize),
    /// Take this context, after taking it from `victim` (idle) when there is one; then call
    /// [`ContextPool::bind`].
    Take {
        /// The context.
        slot: usize,
        /// Its idle holder, which loses it.
        victim: Option<H>,
    },
    /// Wait, and ask again.
    Wait,
}

#[derive(Clone, Copy, Debug)]
struct Slot<H> {
    holder: Option<H>,
    /// When the holder got it (monotonic ns).
    since: u64,
}

/// The contexts of one engine and the processes waiting for one. `H` names a process.
#[derive(Debug)]
pub struct ContextPool<H: Copy + Eq, const N: usize, const W: usize> {
    slots: [Slot<H>; N],
    used: usize,
    queue: [Option<H>; W],
    waiting: usize,
    slice_ns: u64,
}

impl<H: Copy + Eq + core::fmt::Debug, const N: usize, const W: usize> ContextPool<H, N, W> {
    /// A pool of `contexts` contexts (clamped to `1..=N`), with a time slice of `slice_ns`.
    pub fn new(contexts: usize, slice_ns: u64) -> Self {
        ContextPool {
            slots: [Slot {
                holder: None,
                since: 0,
            }; N],
            used: contexts.clamp(1, N),
            queue: [None; W],
            waiting: 0,
            slice_ns,
        }
    }

    /// Contexts in the pool.
    pub fn contexts(&self) -> usize {
        self.used
    }

    /// Who holds context `slot`.
    pub fn holder(&self, slot: usize) -> Option<H> {
        self.slots.get(slot).and_then(|s| s.holder)
    }

    /// The context `who` holds.
    pub fn held_by(&self, who: H) -> Option<usize> {
        self.slots[..self.used]
            .iter()
            .position(|s| s.holder == Some(who))
    }

    /// Processes waiting.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    fn position(&self, who: H) -> Option<usize> {
        self.queue[..self.waiting]
            .iter()
            .position(|q| *q == Some(who))
    }

    fn enqueue(&mut self, who: H) {
        if self.position(who).is_none() && self.waiting < W {
            self.queue[self.waiting] = Some(who);
            self.waiting += 1;
        }
    }

    /// Take `who` out of the queue (it got a context, gave up, or closed).
    pub fn leave_queue(&mut self, who: H) {
        if let Some(i) = self.position(who) {
            self.queue.copy_within(i + 1..self.waiting, i);
            self.waiting -= 1;
            self.queue[self.waiting] = None;
        }
    }

    /// A free context, else the least recently granted one whose holder is idle
    /// (`idle(holder)`).
    fn candidate(&self, idle: &impl Fn(H) -> bool) -> Option<(usize, Option<H>)> {
        let live = &self.slots[..self.used];
        if let Some(i) = live.iter().position(|s| s.holder.is_none()) {
            return Some((i, None));
        }
        live.iter()
            .enumerate()
            .filter(|(_, s)| s.holder.is_some_and(idle))
            .min_by_key(|(_, s)| s.since)
            .map(|(i, s)| (i, s.holder))
    }

    /// Whether `who` keeps the context it holds at `now` without further ado: nobody waits, or
    /// its slice is not over (and it is not queued itself). The fast path of
    /// [`ContextPool::request`], which needs no idleness of anybody.
    pub fn keeps(&self, who: H, now: u64) -> bool {
        match self.held_by(who) {
            Some(i) => {
                self.position(who).is_none()
                    && (self.waiting == 0
                        || now.saturating_sub(self.slots[i].since) < self.slice_ns)
            }
            None => false,
        }
    }

    /// `who` needs a context at `now` (it is about to submit a copy). `idle(h)` says whether
    /// holder `h` has nothing queued or running.
    pub fn request(&mut self, who: H, now: u64, idle: impl Fn(H) -> bool) -> Grant<H> {
        if let Some(i) = self.held_by(who) {
            let expired = now.saturating_sub(self.slots[i].since) >= self.slice_ns;
            let queued = self.position(who).is_some();
            if !queued && (self.waiting == 0 || !expired) {
                return Grant::Keep(i);
            }
            if self.position(who) == Some(0) {
                // Its turn again (its own context is the first idle one it may take).
                self.leave_queue(who);
                self.slots[i].since = now;
                return Grant::Keep(i);
            }
            self.enqueue(who);
            return Grant::Wait;
        }
        let head = match self.position(who) {
            Some(p) => p == 0,
            None => self.waiting == 0,
        };
        if head {
            if let Some((slot, victim)) = self.candidate(&idle) {
                return Grant::Take { slot, victim };
            }
        }
        self.enqueue(who);
        Grant::Wait
    }

    /// `who` took context `slot` at `now` (after [`Grant::Take`], or at open when one is free).
    pub fn bind(&mut self, slot: usize, who: H, now: u64) {
        if slot >= self.used {
            return;
        }
        self.release(who);
        self.leave_queue(who);
        self.slots[slot] = Slot {
            holder: Some(who),
            since: now,
        };
    }

    /// `who` gives its context up (it closed, or lost it): the context is free.
    pub fn release(&mut self, who: H) {
        for s in self.slots[..self.used].iter_mut() {
            if s.holder == Some(who) {
                s.holder = None;
            }
        }
    }

    /// A free context, if any (for a process that opens: it takes one only if free).
    pub fn free(&self) -> Option<usize> {
        self.slots[..self.used]
            .iter()
            .position(|s| s.holder.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testrng::Rng;

    type Pool = ContextPool<u32, 8, 32>;

    #[test]
    fn free_first_then_lru_idle_then_wait() {
        let mut p = Pool::new(2, 1000);
        assert_eq!(
            p.request(1, 0, |_| true),
            Grant::Take {
                slot: 0,
                victim: None
            }
        );
        p.bind(0, 1, 0);
        assert_eq!(
            p.request(2, 1, |_| true),
            Grant::Take {
                slot: 1,
                victim: None
            }
        );
        p.bind(1, 2, 1);
        // Both idle: the least recently granted (1's) goes.
        assert_eq!(
            p.request(3, 2, |_| true),
            Grant::Take {
                slot: 0,
                victim: Some(1)
            }
        );
        p.bind(0, 3, 2);
        assert_eq!(p.held_by(1), None);
        assert_eq!(p.held_by(3), Some(0));
        // Nobody idle: wait, in order.
        assert_eq!(p.request(1, 3, |_| false), Grant::Wait);
        assert_eq!(
            p.request(4, 3, |_| true),
            Grant::Wait,
            "4 may not overtake 1"
        );
        assert_eq!(
            p.request(1, 4, |h| h == 2),
            Grant::Take {
                slot: 1,
                victim: Some(2)
            }
        );
        p.bind(1, 1, 4);
        assert_eq!(p.waiting(), 1);
    }

    #[test]
    fn busy_holders_are_never_robbed() {
        let mut p = Pool::new(1, 10);
        p.bind(0, 1, 0);
        for t in 0..100 {
            assert_eq!(p.request(2, t, |_| false), Grant::Wait);
        }
        assert_eq!(p.holder(0), Some(1));
    }

    #[test]
    fn holder_keeps_its_context_while_nobody_waits() {
        let mut p = Pool::new(1, 10);
        p.bind(0, 1, 0);
        assert!(p.keeps(1, 1_000_000));
        assert!(!p.keeps(2, 0));
        assert_eq!(p.request(1, 1_000_000, |_| false), Grant::Keep(0));
        // Somebody waits: within its slice it keeps it, after it no more.
        assert_eq!(p.request(2, 1_000_001, |_| false), Grant::Wait);
        p.bind(0, 1, 1_000_001);
        assert!(p.keeps(1, 1_000_005));
        assert!(!p.keeps(1, 1_000_011));
    }

    #[test]
    fn expired_holder_queues_behind_waiters() {
        let mut p = Pool::new(1, 10);
        p.bind(0, 1, 0);
        assert_eq!(p.request(2, 1, |_| false), Grant::Wait);
        // Within its slice, 1 keeps going although 2 waits.
        assert_eq!(p.request(1, 5, |_| false), Grant::Keep(0));
        // Its slice is over: it queues (behind 2), submits nothing, and goes idle.
        assert_eq!(p.request(1, 20, |_| false), Grant::Wait);
        assert_eq!(
            p.request(2, 21, |h| h == 1),
            Grant::Take {
                slot: 0,
                victim: Some(1)
            }
        );
        p.bind(0, 2, 21);
        // 1 is head now and gets it back once 2 is idle and its slice is over.
        assert_eq!(p.request(1, 22, |_| false), Grant::Wait);
        assert_eq!(p.request(2, 40, |_| false), Grant::Wait);
        assert_eq!(
            p.request(1, 41, |_| true),
            Grant::Take {
                slot: 0,
                victim: Some(2)
            }
        );
    }

    #[test]
    fn leaving_the_queue_lets_the_next_one_in() {
        let mut p = Pool::new(1, 10);
        p.bind(0, 1, 0);
        assert_eq!(p.request(2, 1, |_| false), Grant::Wait);
        assert_eq!(p.request(3, 1, |_| false), Grant::Wait);
        p.leave_queue(2);
        p.release(1);
        assert_eq!(
            p.request(3, 2, |_| true),
            Grant::Take {
                slot: 0,
                victim: None
            }
        );
    }

    /// Sixteen processes on four contexts, each wanting the engine for a random while and then
    /// being idle: everybody is served, and nobody waits much longer than the others.
    #[test]
    fn sixteen_on_four_nobody_starves() {
        const P: u32 = 16;
        let mut p: ContextPool<u32, 4, 32> = ContextPool::new(4, 50);
        let mut rng = Rng::new(7);
        // Per process: work left in its current burst (0: idle), turns served, longest wait.
        let mut busy = [0u32; P as usize];
        let mut served = [0u32; P as usize];
        let mut waited = [0u64; P as usize];
        let mut since = [None::<u64>; P as usize];
        for now in 0..200_000u64 {
            // Holders work off their bursts.
            for h in 0..P {
                if p.held_by(h).is_some() && busy[h as usize] > 0 {
                    busy[h as usize] -= 1;
                }
            }
            let who = (rng.next() % u64::from(P)) as u32;
            let w = who as usize;
            let b = busy;
            match p.request(who, now, |h| b[h as usize] == 0) {
                Grant::Keep(_) => {
                    if busy[w] == 0 {
                        busy[w] = 1 + (rng.next() % 20) as u32;
                        served[w] += 1;
                    }
                    since[w] = None;
                }
                Grant::Take { slot, victim } => {
                    if let Some(v) = victim {
                        assert_eq!(busy[v as usize], 0, "a busy holder was robbed");
                    }
                    p.bind(slot, who, now);
                    busy[w] = 1 + (rng.next() % 20) as u32;
                    served[w] += 1;
                    if let Some(s) = since[w].take() {
                        waited[w] = waited[w].max(now - s);
                    }
                }
                Grant::Wait => {
                    since[w].get_or_insert(now);
                }
            }
        }
        let min = *served.iter().min().unwrap();
        let max = *served.iter().max().unwrap();
        assert!(min > 0, "a process was never served: {served:?}");
        assert!(max < 3 * min, "unfair service: {served:?}");
        let worst = *waited.iter().max().unwrap();
        assert!(worst < 20_000, "a wait of {worst} ticks: {waited:?}");
    }
}
