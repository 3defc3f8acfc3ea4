// SPDX-License-Identifier: GPL-2.0-only

//! The user-level queue's state (register map 2.1, ABI 3): the rings' pin regions, completion
//! events, queue errors, and the faults of its channels. The queue's design (creation, moving
//! between contexts, faults, waiting) is described where the process uses it, userq.rs.
//!
//! No lock of its own: a queue lives under `Process::inner` (lock order: process.rs).

use crate::exanest_core::{
    abi::{self, Range},
    regs as map,
};
use crate::hw::Context;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{page::PAGE_SIZE, prelude::*};

/// Where the doorbell of a process's queue leads ([`Doorbell`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DoorbellState {
    /// No queue, or it is gone (with the process or the device): an access gets SIGBUS.
    None,
    /// The queue has no context: the doorbell's next fault waits for one (userq.rs).
    Parked,
    /// The doorbell page (physical address) of the context the queue runs on.
    At(u64),
}

/// A [`DoorbellState`] that mmap and the doorbell's fault read without `Process::inner`
/// (they run under the mmap lock). Kept in one word: 0 for none, 1 for parked, otherwise the
/// page's address (page-aligned, so neither).
pub(crate) struct Doorbell(AtomicU64);

impl Doorbell {
    const NONE: u64 = 0;
    const PARKED: u64 = 1;

    pub(crate) const fn new() -> Self {
        Doorbell(AtomicU64::new(Self::NONE))
    }

    pub(crate) fn get(&self) -> DoorbellState {
        match self.0.load(Ordering::Acquire) {
            Self::NONE => DoorbellState::None,
            Self::PARKED => DoorbellState::Parked,
            phys => DoorbellState::At(phys),
        }
    }

    /// Set it; a context without a doorbell page (`At(0)`, or a misaligned one) is none.
    pub(crate) fn set(&self, s: DoorbellState) {
        let v = match s {
            DoorbellState::At(phys) if phys > Self::PARKED && phys % PAGE_SIZE as u64 == 0 => phys,
            DoorbellState::Parked => Self::PARKED,
            DoorbellState::None | DoorbellState::At(_) => Self::NONE,
        };
        self.0.store(v, Ordering::Release);
    }
}

/// The queue of a process (`Inner::queue`, process.rs).
pub(crate) enum QueueState {
    /// None (yet).
    None,
    /// Being created: the context is kept, no second creation may start.
    Creating,
    /// Enabled on the process's context.
    Ready(KBox<UserQueue>),
}

/// An enabled user-level queue.
pub(crate) struct UserQueue {
    /// The rings' pin regions, held by the queue (DEREG is EBUSY).
    pub(super) sq_handle: u32,
    pub(super) cq_handle: u32,
    /// The send ring's address.
    pub(super) sq: u64,
    /// The completion ring.
    pub(super) cq: Range,
    pub(super) cq_log2: u32,
    /// The Q_CFG value the queue was enabled with.
    pub(super) cfg: u32,
    /// Where the queue stopped when its context was taken (register map 2.2); `None` while it
    /// runs on the process's context.
    pub(super) parked: Option<map::QueueIndices>,
    /// Times the queue left a context for another process (register map 2.2).
    pub(super) moves: u64,
    /// Pages the budget evicted while the queue had no context, and the last run's address:
    /// their event is posted when it has one again.
    pub(super) evicted: (u64, u64),
    /// The queue's channels (bit n: channel n).
    pub(super) mask: u32,
    /// The queue stopped: (`EXANEST_DMA_QERR_*`, the address).
    pub(super) error: Option<(u32, u64)>,
    /// Completion events and queue errors seen: a wait sleeps while it stays.
    pub(super) events: u64,
    /// `events` when QUEUE_WAIT last looked: poll() is readable while they differ.
    pub(super) acked: u64,
}

impl UserQueue {
    /// A queue enabled with these rings and channels.
    pub(crate) fn new(
        (sq_handle, cq_handle): (u32, u32),
        v: &abi::ValidQueue,
        cfg: u32,
        mask: u32,
    ) -> Self {
        UserQueue {
            sq_handle,
            cq_handle,
            sq: v.sq.start,
            cq: v.cq,
            cq_log2: v.cq_log2,
            cfg,
            parked: None,
            moves: 0,
            evicted: (0, 0),
            mask,
            error: None,
            events: 0,
            acked: 0,
        }
    }
}

impl QueueState {
    /// Whether the process has, or is creating, a queue.
    pub(crate) fn exists(&self) -> bool {
        !matches!(self, QueueState::None)
    }

    /// Whether the queue lets its context go, if the engine is idle for it: no queue, or a
    /// ready one on an engine that can move queues (`movable`); not while it is being created.
    pub(crate) fn may_move(&self, movable: bool) -> bool {
        match self {
            QueueState::None => true,
            QueueState::Creating => false,
            QueueState::Ready(_) => movable,
        }
    }

    /// The engine interrupted the process's context with `pending` (`CTX_IRQ_STATUS`): count
    /// completion events and errors. (Its channels' faults are the fault state machine's.)
    pub(crate) fn interrupt(&mut self, ctx: &Context, pending: u32) {
        let QueueState::Ready(q) = self else {
            return;
        };
        if pending & (map::ctx_irq::CQ | map::ctx_irq::QERR) != 0 {
            q.events += 1;
        }
        if pending & map::ctx_irq::QERR != 0 {
            if let Ok((st, addr)) = ctx.queue_status() {
                if st.error {
                    q.error = Some((u32::from(st.code.field()), addr));
                }
            }
        }
    }

    /// Whether a completion event or a queue error came since QUEUE_WAIT last looked
    /// (poll() is readable).
    pub(crate) fn event_pending(&self) -> bool {
        matches!(self, QueueState::Ready(q) if q.events != q.acked)
    }
}

#[kunit_tests(exanest_dma_queue)]
mod tests {
    use super::*;

    /// Every state comes back as it was set; a context without a doorbell page is none.
    #[test]
    fn doorbell_states() {
        let d = Doorbell::new();
        assert_eq!(d.get(), DoorbellState::None);
        d.set(DoorbellState::At(0x4010_2000));
        assert_eq!(d.get(), DoorbellState::At(0x4010_2000));
        d.set(DoorbellState::Parked);
        assert_eq!(d.get(), DoorbellState::Parked);
        d.set(DoorbellState::At(0));
        assert_eq!(d.get(), DoorbellState::None);
        d.set(DoorbellState::At(0x4010_2001));
        // A misaligned page is none.
        assert_eq!(d.get(), DoorbellState::None);
    }
}
