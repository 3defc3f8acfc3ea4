// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The kernel queue of a context (register map 2.2), as the driver's COPY path uses it: up to
//! [`SLOTS`] copies at once, slot `k` posted as a descriptor whose `wr_id` is `k`, its end
//! taken from the completion the engine writes for it. What a slot reports is what a channel
//! reported before the kernel queue existed: still running, done, or an engine error
//! ([`Ended::report`]). The rings and registers are the driver's; this is the bookkeeping.

use super::abi::Errno;
use super::regs::{cqe_status_of, error_of_cqe_status, origin, Cqe, Error, QueueEntry, Sqe, State};

/// Entries of each ring, as log2: one per slot.
pub const LOG2: u32 = 3;
/// Entries of each ring.
pub const ENTRIES: u32 = 1 << LOG2;
/// Copies the kernel queue carries at once.
pub const SLOTS: usize = ENTRIES as usize;

/// How a slot's copy ended, from its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The completion's status: 0, an engine error, or (NACK) the channel's NACK status.
    pub status: i32,
    /// Bytes copied.
    pub bytes: u32,
    /// The transfer's last fault address, 0 if none.
    pub fault_addr: u64,
}

impl Ended {
    /// The state and error a channel would have reported: DONE, or ERROR with the engine's
    /// error (a NACK, whatever status the driver gave it, is ABORTED).
    pub fn report(&self) -> (State, Error) {
        if self.status == 0 {
            return (State::Done, Error::None);
        }
        match error_of_cqe_status(self.status) {
            Some(e) => (State::Error, e),
            None => (State::Error, Error::Aborted),
        }
    }
}

/// A slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Free.
    Idle,
    /// Posted, its completion not seen yet.
    Busy,
    /// Ended, until the slot is posted again.
    Ended(Ended),
}

/// The driver's side of one kernel queue: whether it is enabled, its two indices (free-running,
/// as the engine's) and its slots.
#[derive(Debug)]
pub struct KernelQueue {
    enabled: bool,
    tail: u32,
    head: u32,
    slots: [Slot; SLOTS],
    /// The SQ index each slot was last posted at.
    posted: [u32; SLOTS],
}

impl Default for KernelQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl KernelQueue {
    /// A queue not enabled yet.
    pub const fn new() -> Self {
        KernelQueue {
            enabled: false,
            tail: 0,
            head: 0,
            slots: [Slot::Idle; SLOTS],
            posted: [0; SLOTS],
        }
    }

    /// The engine stopped the queue (QUIESCE, RESET): indices back to 0, every slot idle (the
    /// caller ends the copies it had), to be enabled again before the next post.
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// Whether the queue is enabled.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The engine enabled it (its indices are 0).
    pub fn set_enabled(&mut self) {
        *self = Self::new();
        self.enabled = true;
    }

    /// Post slot `k`: the descriptor to write at the returned SQ index, and SQ_TAIL after it.
    /// `Inval` for a slot out of range, `Busy` for one that runs.
    pub fn post(
        &mut self,
        k: u32,
        src: u64,
        dst: u64,
        len: u32,
    ) -> Result<(u32, QueueEntry, u32), Errno> {
        let slot = self.slots.get_mut(k as usize).ok_or(Errno::Inval)?;
        if *slot == Slot::Busy {
            return Err(Errno::Busy);
        }
        *slot = Slot::Busy;
        let index = self.tail;
        self.posted[k as usize] = index;
        self.tail = self.tail.wrapping_add(1);
        let d = Sqe {
            src,
            dst,
            len,
            flags: 0,
            wr_id: u64::from(k),
        };
        Ok((index, d.encode(), self.tail))
    }

    /// The next completion to read: its CQ index, while the engine's CQ_TAIL is past it.
    pub fn next_completion(&self, cq_tail: u32) -> Option<u32> {
        (self.head != cq_tail).then_some(self.head)
    }

    /// Take the completion at the index [`KernelQueue::next_completion`] gave: its slot ends.
    /// Returns CQ_HEAD after it. A completion naming no running slot (which the engine never
    /// writes) is passed over.
    pub fn complete(&mut self, c: &Cqe) -> u32 {
        self.head = self.head.wrapping_add(1);
        if let Some(slot) = usize::try_from(c.wr_id)
            .ok()
            .and_then(|k| self.slots.get_mut(k))
        {
            if *slot == Slot::Busy {
                *slot = Slot::Ended(Ended {
                    status: c.status,
                    bytes: c.bytes,
                    fault_addr: c.fault_addr,
                });
            }
        }
        self.head
    }

    /// The queue stopped on an error: every running slot ends with `e`.
    pub fn fail(&mut self, e: Error) {
        for s in self.slots.iter_mut().filter(|s| **s == Slot::Busy) {
            *s = Slot::Ended(Ended {
                status: cqe_status_of(e),
                bytes: 0,
                fault_addr: 0,
            });
        }
    }

    /// Descriptors posted and completions taken since the queue was enabled (SQ_TAIL and
    /// CQ_HEAD).
    pub fn indices(&self) -> (u32, u32) {
        (self.tail, self.head)
    }

    /// Slot `k` (idle when out of range).
    pub fn slot(&self, k: u32) -> Slot {
        self.slots.get(k as usize).copied().unwrap_or(Slot::Idle)
    }

    /// The running slot whose descriptor was posted at SQ index `sq_index` modulo 2^16, which
    /// is what an engine channel's ORIGIN says of the kernel queue transfer it runs: found
    /// without asking the engine for the transfer's WRID (an MMIO read). `None` when no running
    /// slot or more than one matches (a slot running for 2^16 posts): then WRID says.
    pub fn slot_at(&self, sq_index: u32) -> Option<u32> {
        let mut found = None;
        for (k, (s, &at)) in self.slots.iter().zip(&self.posted).enumerate() {
            if *s == Slot::Busy && at & origin::SQ_INDEX_MASK == sq_index & origin::SQ_INDEX_MASK {
                if found.is_some() {
                    return None;
                }
                found = Some(k as u32);
            }
        }
        found
    }

    /// Whether a slot runs.
    pub fn busy(&self) -> bool {
        self.slots.contains(&Slot::Busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regs::cqe_status;

    fn cqe(k: u64, status: i32, bytes: u32) -> Cqe {
        Cqe {
            wr_id: k,
            status,
            bytes,
            fault_addr: 0,
            flags: 0,
        }
    }

    #[test]
    fn posts_and_completions_out_of_order() {
        let mut q = KernelQueue::new();
        assert!(!q.enabled());
        q.set_enabled();
        let (i0, d0, t0) = q.post(0, 0x1000, 0x2000, 64).unwrap();
        let (i1, _, t1) = q.post(3, 0x3000, 0x4000, 128).unwrap();
        assert_eq!((i0, t0, i1, t1), (0, 1, 1, 2));
        assert_eq!(q.indices(), (2, 0));
        let d = Sqe::decode(&d0);
        assert_eq!(
            (d.src, d.dst, d.len, d.flags, d.wr_id),
            (0x1000, 0x2000, 64, 0, 0)
        );
        assert_eq!(q.post(3, 0, 0, 1), Err(Errno::Busy));
        assert_eq!(q.post(SLOTS as u32, 0, 0, 1), Err(Errno::Inval));
        assert!(q.busy());
        // Slot 3 ends first.
        assert_eq!(q.next_completion(2), Some(0));
        assert_eq!(q.complete(&cqe(3, 0, 128)), 1);
        assert_eq!(
            q.slot(3),
            Slot::Ended(Ended {
                status: 0,
                bytes: 128,
                fault_addr: 0
            })
        );
        assert_eq!(q.slot(0), Slot::Busy);
        assert_eq!(q.next_completion(1), None);
        assert_eq!(q.next_completion(2), Some(1));
        q.complete(&cqe(0, cqe_status::ABORTED, 16));
        assert_eq!(
            q.slot(0).clone(),
            Slot::Ended(Ended {
                status: -259,
                bytes: 16,
                fault_addr: 0
            })
        );
        assert!(!q.busy());
        // A slot posted again runs again.
        assert_eq!(q.post(3, 0, 1, 1).unwrap().0, 2);
        assert_eq!(q.slot(3), Slot::Busy);
    }

    /// A faulting transfer's ORIGIN index names its running slot, modulo 2^16; an index of no
    /// running slot, or of two, names none (WRID then says).
    #[test]
    fn slot_at_names_the_running_slot_of_an_index() {
        let mut q = KernelQueue::new();
        q.set_enabled();
        assert_eq!(q.post(5, 0, 1, 1).unwrap().0, 0);
        assert_eq!(q.post(2, 0, 1, 1).unwrap().0, 1);
        assert_eq!(
            (q.slot_at(0), q.slot_at(1), q.slot_at(2)),
            (Some(5), Some(2), None)
        );
        // Slot 2 ends: its index names nothing; posted again, its new index names it.
        q.complete(&cqe(2, 0, 1));
        assert_eq!(q.slot_at(1), None);
        assert_eq!(q.post(2, 0, 1, 1).unwrap().0, 2);
        assert_eq!(q.slot_at(2), Some(2));
        // Modulo 2^16: slot 5 still runs (index 0) when slot 1 is posted at 2^16.
        q.tail = 0x1_0000;
        assert_eq!(q.post(1, 0, 1, 1).unwrap().0, 0x1_0000);
        assert_eq!(q.slot_at(0x1_0000), None, "two running slots match");
        assert_eq!(q.slot_at(0x2_0002), Some(2));
        q.complete(&cqe(5, 0, 1));
        assert_eq!(q.slot_at(0), Some(1));
    }

    #[test]
    fn indices_wrap() {
        let mut q = KernelQueue::new();
        q.set_enabled();
        q.tail = u32::MAX;
        q.head = u32::MAX;
        let (i, _, t) = q.post(1, 0, 1, 1).unwrap();
        assert_eq!((i, t), (u32::MAX, 0));
        assert_eq!(q.next_completion(0), Some(u32::MAX));
        assert_eq!(q.complete(&cqe(1, 0, 1)), 0);
    }

    #[test]
    fn ends_report_what_a_channel_would() {
        let e = |status| {
            Ended {
                status,
                bytes: 0,
                fault_addr: 0,
            }
            .report()
        };
        assert_eq!(e(0), (State::Done, Error::None));
        assert_eq!(
            e(cqe_status_of(Error::BadLen)),
            (State::Error, Error::BadLen)
        );
        assert_eq!(e(cqe_status::ABORTED), (State::Error, Error::Aborted));
        assert_eq!(e(cqe_status::NO_MASTER), (State::Error, Error::NoMaster));
        // A NACK status that is an errno: the copy was NACKed.
        assert_eq!(e(-14), (State::Error, Error::Aborted));
    }

    #[test]
    fn stray_completions_and_failures() {
        let mut q = KernelQueue::new();
        q.set_enabled();
        q.post(2, 0, 1, 1).unwrap();
        // Not a running slot, or no slot at all: passed over.
        q.complete(&cqe(5, 0, 1));
        q.complete(&cqe(1 << 40, 0, 1));
        assert_eq!(q.slot(2), Slot::Busy);
        assert_eq!(q.slot(5), Slot::Idle);
        q.fail(Error::NoMaster);
        assert_eq!(
            q.slot(2),
            Slot::Ended(Ended {
                status: cqe_status::NO_MASTER,
                bytes: 0,
                fault_addr: 0
            })
        );
        q.reset();
        assert!(!q.enabled());
        assert_eq!(q.slot(2), Slot::Idle);
        assert_eq!(q.next_completion(0), None);
    }
}
