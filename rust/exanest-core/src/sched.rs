// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Copies of one process: cookies, the assignment of copies to engine channels, a FIFO of copies
//! waiting for a channel, and results kept until user space collects them.
//!
//! Fixed storage: at most `Q` copies are known at once (queued, running or finished but not yet
//! waited for); at most `C` run, one per channel.

use super::abi::{Errno, ValidCopy};

/// Where a copy is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyState {
    /// Waiting for a channel.
    Queued,
    /// Running on this channel.
    Running(u32),
    /// Ended: 0 or a negative errno, and the bytes copied.
    Done(i32, u64),
}

/// One copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Cookie, never 0, increasing.
    pub cookie: u64,
    /// The request.
    pub copy: ValidCopy,
    /// Source region handle.
    pub src_handle: u32,
    /// Destination region handle.
    pub dst_handle: u32,
    /// State.
    pub state: CopyState,
}

/// What the caller must do after [`Scheduler::submit`] or [`Scheduler::complete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start {
    /// Program this channel…
    pub channel: u32,
    /// …with this copy.
    pub entry: Entry,
}

/// The copies of one process.
#[derive(Debug)]
pub struct Scheduler<const C: usize, const Q: usize> {
    entries: [Option<Entry>; Q],
    channels: u32,
    next_cookie: u64,
}

impl<const C: usize, const Q: usize> Scheduler<C, Q> {
    /// A scheduler for an engine with `channels` channels (clamped to `1..=C`).
    pub fn new(channels: u32) -> Self {
        Scheduler {
            entries: [None; Q],
            channels: channels.clamp(1, C as u32),
            next_cookie: 1,
        }
    }

    /// Channels the scheduler uses: `0..channels()`.
    pub fn channels(&self) -> u32 {
        self.channels
    }

    /// Use channels `0..n` from now on (clamped to `1..=C`), leaving the others to someone else
    /// (the user-level queue). `Busy` while a copy runs on a channel given up.
    pub fn set_channels(&mut self, n: u32) -> Result<(), Errno> {
        let n = n.clamp(1, C as u32);
        if self.running_mask() >> n != 0 {
            return Err(Errno::Busy);
        }
        self.channels = n;
        Ok(())
    }

    fn channel_busy(&self, ch: u32) -> bool {
        self.entries
            .iter()
            .flatten()
            .any(|e| e.state == CopyState::Running(ch))
    }

    fn free_channel(&self) -> Option<u32> {
        (0..self.channels).find(|&c| !self.channel_busy(c))
    }

    /// Copies known (queued, running, or done and not collected).
    pub fn len(&self) -> usize {
        self.entries.iter().flatten().count()
    }

    /// Whether no copy is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies queued or running.
    pub fn in_flight(&self) -> usize {
        self.entries
            .iter()
            .flatten()
            .filter(|e| !matches!(e.state, CopyState::Done(..)))
            .count()
    }

    /// The copy running on `channel`.
    pub fn running(&self, channel: u32) -> Option<&Entry> {
        self.entries
            .iter()
            .flatten()
            .find(|e| e.state == CopyState::Running(channel))
    }

    /// Bit n set when channel n runs a copy.
    pub fn running_mask(&self) -> u32 {
        self.entries.iter().flatten().fold(0, |m, e| match e.state {
            CopyState::Running(c) => m | (1 << c),
            _ => m,
        })
    }

    /// Whether a finished copy waits to be collected.
    pub fn has_done(&self) -> bool {
        self.entries
            .iter()
            .flatten()
            .any(|e| matches!(e.state, CopyState::Done(..)))
    }

    /// Accept a copy: returns its cookie, and the channel to program now if one is free.
    /// `Again` when `Q` copies are already known.
    pub fn submit(
        &mut self,
        copy: ValidCopy,
        src_handle: u32,
        dst_handle: u32,
    ) -> Result<(u64, Option<Start>), Errno> {
        let slot = self
            .entries
            .iter()
            .position(|e| e.is_none())
            .ok_or(Errno::Again)?;
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let state = match self.free_channel() {
            Some(ch) => CopyState::Running(ch),
            None => CopyState::Queued,
        };
        let entry = Entry {
            cookie,
            copy,
            src_handle,
            dst_handle,
            state,
        };
        self.entries[slot] = Some(entry);
        Ok((
            cookie,
            match state {
                CopyState::Running(channel) => Some(Start { channel, entry }),
                _ => None,
            },
        ))
    }

    /// The copy running on `channel` ended with `status` (0 or -errno) after `bytes`. Returns
    /// that copy, and the next queued copy to program on the freed channel, if any.
    pub fn complete(
        &mut self,
        channel: u32,
        status: i32,
        bytes: u64,
    ) -> (Option<Entry>, Option<Start>) {
        let mut ended = None;
        for e in self.entries.iter_mut().flatten() {
            if e.state == CopyState::Running(channel) {
                e.state = CopyState::Done(status, bytes);
                ended = Some(*e);
            }
        }
        if ended.is_none() {
            return (None, None);
        }
        // FIFO: the oldest queued copy takes the channel.
        let next = self
            .entries
            .iter_mut()
            .flatten()
            .filter(|e| e.state == CopyState::Queued)
            .min_by_key(|e| e.cookie);
        let start = next.map(|e| {
            e.state = CopyState::Running(channel);
            Start { channel, entry: *e }
        });
        (ended, start)
    }

    /// The copy with this cookie.
    pub fn get(&self, cookie: u64) -> Option<&Entry> {
        self.entries.iter().flatten().find(|e| e.cookie == cookie)
    }

    /// Collect a finished copy: its status and bytes, and forget it. `NoEnt` for an unknown
    /// cookie; `Ok(None)` while it has not finished.
    pub fn reap(&mut self, cookie: u64) -> Result<Option<(i32, u64)>, Errno> {
        let slot = self
            .entries
            .iter()
            .position(|e| matches!(e, Some(x) if x.cookie == cookie))
            .ok_or(Errno::NoEnt)?;
        match self.entries[slot] {
            Some(Entry {
                state: CopyState::Done(st, bytes),
                ..
            }) => {
                self.entries[slot] = None;
                Ok(Some((st, bytes)))
            }
            _ => Ok(None),
        }
    }

    /// Teardown: end every queued and running copy with `status`; calls `f` on each (running
    /// ones first, so the caller can stop their channels).
    pub fn abort_all(&mut self, status: i32, mut f: impl FnMut(&Entry)) {
        for pass in 0..2 {
            for e in self.entries.iter_mut().flatten() {
                let pick = match e.state {
                    CopyState::Running(_) => pass == 0,
                    CopyState::Queued => pass == 1,
                    CopyState::Done(..) => false,
                };
                if pick {
                    f(e);
                    e.state = CopyState::Done(status, 0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Range;
    use crate::testrng::Rng;

    fn vc(n: u64) -> ValidCopy {
        ValidCopy {
            src: Range::new(n << 20, 4096, u64::MAX).unwrap(),
            dst: Range::new((n << 20) + 0x80000, 4096, u64::MAX).unwrap(),
        }
    }

    #[test]
    fn channels_then_queue_then_fifo() {
        let mut s = Scheduler::<4, 8>::new(2);
        let (c1, s1) = s.submit(vc(1), 1, 2).unwrap();
        let (c2, s2) = s.submit(vc(2), 1, 2).unwrap();
        let (c3, s3) = s.submit(vc(3), 1, 2).unwrap();
        let (c4, _) = s.submit(vc(4), 1, 2).unwrap();
        assert_eq!((c1, c2, c3, c4), (1, 2, 3, 4));
        assert_eq!(s1.unwrap().channel, 0);
        assert_eq!(s2.unwrap().channel, 1);
        assert!(s3.is_none());
        assert_eq!(s.running_mask(), 0b11);
        assert_eq!(s.running(1).map(|e| e.cookie), Some(c2));
        assert!(s.running(2).is_none());
        assert_eq!(s.reap(c3), Ok(None));
        assert!(!s.has_done());
        let (ended, next) = s.complete(1, 0, 4096);
        assert!(s.has_done());
        assert_eq!(ended.unwrap().cookie, c2);
        assert_eq!(next.unwrap().entry.cookie, c3);
        assert_eq!(next.unwrap().channel, 1);
        assert_eq!(s.reap(c2), Ok(Some((0, 4096))));
        assert!(!s.has_done());
        assert_eq!(s.reap(c2), Err(Errno::NoEnt));
        assert_eq!(s.complete(3, 0, 0), (None, None), "no copy on that channel");
        let (ended, next) = s.complete(0, -14, 100);
        assert_eq!(ended.unwrap().cookie, c1);
        assert_eq!(next.unwrap().entry.cookie, c4);
        assert_eq!(s.reap(c1), Ok(Some((-14, 100))));
    }

    /// Giving channels up to the user-level queue: refused while a copy runs on one of them;
    /// afterwards copies queue for the channels left.
    #[test]
    fn set_channels_leaves_the_rest() {
        let mut s = Scheduler::<4, 8>::new(3);
        let (_, a) = s.submit(vc(1), 1, 2).unwrap();
        let (b, sb) = s.submit(vc(2), 1, 2).unwrap();
        assert_eq!((a.unwrap().channel, sb.unwrap().channel), (0, 1));
        assert_eq!(s.set_channels(1), Err(Errno::Busy));
        assert_eq!(s.channels(), 3);
        let (ended, next) = s.complete(1, 0, 4096);
        assert_eq!((ended.unwrap().cookie, next), (b, None));
        assert_eq!(s.set_channels(1), Ok(()));
        assert_eq!(s.channels(), 1);
        let (c, sc) = s.submit(vc(3), 1, 2).unwrap();
        assert!(
            sc.is_none(),
            "channel 0 is busy, 1 and 2 are not the scheduler's"
        );
        let (_, next) = s.complete(0, 0, 4096);
        assert_eq!(next.map(|n| (n.entry.cookie, n.channel)), Some((c, 0)));
        assert_eq!(s.set_channels(0), Ok(()));
        assert_eq!(s.channels(), 1, "clamped: at least one channel");
    }

    #[test]
    fn full_is_again_and_abort_ends_everything() {
        let mut s = Scheduler::<4, 3>::new(1);
        for i in 0..3 {
            s.submit(vc(i), 1, 2).unwrap();
        }
        assert_eq!(s.submit(vc(9), 1, 2), Err(Errno::Again));
        let mut order = [0u64; 3];
        let mut n = 0;
        s.abort_all(-125, |e| {
            order[n] = e.cookie;
            n += 1;
        });
        assert_eq!(order, [1, 2, 3]);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.reap(2), Ok(Some((-125, 0))));
    }

    /// Random submit/complete/reap: a channel never runs two copies, every copy is reaped
    /// exactly once with the status it ended with, and queued copies start in cookie order.
    #[test]
    fn property_invariants() {
        let mut rng = Rng::new(7);
        for _ in 0..300 {
            let nch = 1 + rng.below(4) as u32;
            let mut s = Scheduler::<4, 16>::new(nch);
            let mut last_started = 0u64;
            let mut started_fifo = true;
            let mut done: [(u64, i32); 64] = [(0, 0); 64];
            let mut ndone = 0;
            for _ in 0..200 {
                match rng.below(3) {
                    0 => {
                        if let Ok((_, Some(st))) = s.submit(vc(rng.below(100)), 1, 2) {
                            started_fifo &= st.entry.cookie > last_started;
                            last_started = st.entry.cookie;
                        }
                    }
                    1 => {
                        let ch = rng.below(nch as u64) as u32;
                        let status = -(rng.below(3) as i32);
                        let (ended, next) = s.complete(ch, status, 7);
                        if let Some(e) = ended {
                            done[ndone % 64] = (e.cookie, status);
                            ndone += 1;
                        }
                        if let Some(st) = next {
                            assert_eq!(st.channel, ch);
                            // FIFO: no older copy is still queued.
                            assert!(s.entries.iter().flatten().all(|e| e.state
                                != CopyState::Queued
                                || e.cookie > st.entry.cookie));
                        }
                    }
                    _ => {
                        if ndone > 0 {
                            let (cookie, status) = done[(ndone - 1) % 64];
                            if cookie != 0 {
                                assert_eq!(s.reap(cookie), Ok(Some((status, 7))));
                                assert_eq!(s.reap(cookie), Err(Errno::NoEnt));
                                done[(ndone - 1) % 64].0 = 0;
                            }
                        }
                    }
                }
                for ch in 0..nch {
                    let running = s
                        .entries
                        .iter()
                        .flatten()
                        .filter(|e| e.state == CopyState::Running(ch))
                        .count();
                    assert!(running <= 1);
                }
                // No copy waits while a channel is free.
                let queued = s
                    .entries
                    .iter()
                    .flatten()
                    .any(|e| e.state == CopyState::Queued);
                assert!(!queued || s.free_channel().is_none());
            }
            assert!(started_fifo);
        }
    }
}
