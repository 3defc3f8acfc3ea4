// SPDX-License-Identifier: GPL-2.0-only

//! The user-level queue's state (register map 2.1, ABI 3): the rings' pin regions, completion
//! events, queue errors, and the faults of its channels. The queue's design (creation, moving
//! between contexts, faults, waiting) is described where the process uses it, userq.rs.
//!
//! No lock of its own: a queue lives under `Process::inner` (lock order: process.rs).

use crate::channel::{micros, MAX_CH, MAX_REFAULTS};
use crate::engine::{ChannelReport, Context, Hw};
use crate::exanest_core::{
    abi::{self, Range},
    regs::{self as map, State},
};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    time::{Instant, Monotonic},
};

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
    pub(crate) sq_handle: u32,
    pub(crate) cq_handle: u32,
    /// The send ring's address.
    pub(crate) sq: u64,
    /// The completion ring.
    pub(crate) cq: Range,
    pub(crate) cq_log2: u32,
    /// The Q_CFG value the queue was enabled with.
    pub(crate) cfg: u32,
    /// Where the queue stopped when its context was taken (register map 2.2); `None` while it
    /// runs on the process's context.
    pub(crate) parked: Option<map::QueueIndices>,
    /// Times the queue left a context for another process (register map 2.2).
    pub(crate) moves: u64,
    /// Pages the budget evicted while the queue had no context, and the last run's address:
    /// their event is posted when it has one again.
    pub(crate) evicted: (u64, u64),
    /// The queue's channels (bit n: channel n).
    pub(crate) mask: u32,
    /// The queue stopped: (`EXANEST_DMA_QERR_*`, the address).
    pub(crate) error: Option<(u32, u64)>,
    /// Completion events and queue errors seen: a wait sleeps while it stays.
    pub(crate) events: u64,
    /// `events` when QUEUE_WAIT last looked: poll() is readable while they differ.
    pub(crate) acked: u64,
    /// When each channel's fault-wait was first seen; `Some` while it is being served.
    fault_at: [Option<Instant<Monotonic>>; MAX_CH],
    /// Per channel: the last fault's transfer (SQ index) and address, and how often it came
    /// back.
    refaults: [(u32, u64, u32); MAX_CH],
    /// Channels seen in fault-wait that the fault thread has not taken yet.
    pending: u32,
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
            fault_at: [None; MAX_CH],
            refaults: [(0, 0, 0); MAX_CH],
            pending: 0,
        }
    }

    /// Channel `n` of the queue is in fault-wait for a queue transfer: its report and SQ
    /// index, noting when it was first seen (a fault found without its interrupt counts from
    /// now) and recording how long it waited. `None` once it is not.
    pub(crate) fn fault_wait(
        &mut self,
        ctx: &Context,
        n: u32,
        k: &mut abi::Counters,
        lat: &mut abi::Latency,
    ) -> Option<(ChannelReport, u32)> {
        let i = n as usize;
        if self.mask & (1 << n) == 0 {
            return None;
        }
        match (ctx.ch_report(n), ctx.origin(n)) {
            (Ok(r), Ok(Some(index))) if r.state == State::Fault => {
                let t = *self.fault_at[i].get_or_insert_with(|| {
                    // Found without its interrupt (lost): served now.
                    k.faults += 1;
                    Instant::now()
                });
                lat.queue.record(micros(t));
                Some((r, index))
            }
            _ => {
                self.fault_at[i] = None;
                None
            }
        }
    }

    /// The fault thread decided about channel `n`'s fault (transfer `index`, at `addr`):
    /// RESUME (`Ok`) or NACK with the errno its completion reports. A fault of one transfer
    /// that keeps coming back at the same address after being resolved is NACKed with EFAULT.
    pub(crate) fn decide(
        &mut self,
        ctx: &Context,
        n: u32,
        (index, addr): (u32, u64),
        res: Result,
        k: &mut abi::Counters,
        lat: &mut abi::Latency,
    ) {
        let i = n as usize;
        if let Some(t) = self.fault_at[i].take() {
            lat.total.record(micros(t));
        }
        let (li, la, count) = self.refaults[i];
        let count = if (li, la) == (index, addr) {
            count + 1
        } else {
            1
        };
        self.refaults[i] = (index, addr, count);
        let res = match res {
            Ok(()) if count > MAX_REFAULTS => Err(EFAULT),
            r => r,
        };
        // A channel the queue no longer runs (disabled meanwhile) rejects the command.
        let _ = match res {
            Ok(()) => {
                k.faults_resolved += 1;
                k.retransmissions += 1;
                ctx.ch_resume(n)
            }
            Err(e) => {
                k.nacks += 1;
                ctx.nack_with(n, e.to_errno())
            }
        };
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
    /// completion events and errors, and note the queue's channels that entered fault-wait.
    /// Returns whether the fault thread must run.
    pub(crate) fn interrupt(&mut self, ctx: &Context, pending: u32, k: &mut abi::Counters) -> bool {
        let QueueState::Ready(q) = self else {
            return false;
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
        let mut fault = false;
        for n in 0..ctx.channels().min(MAX_CH as u32) {
            let i = n as usize;
            if (pending & q.mask) & (1 << n) == 0 || q.fault_at[i].is_some() {
                continue;
            }
            let faulted = ctx.ch_report(n).is_ok_and(|r| r.state == State::Fault);
            if faulted && ctx.origin(n).is_ok_and(|o| o.is_some()) {
                k.faults += 1;
                q.fault_at[i] = Some(Instant::now());
                q.pending |= 1 << n;
                fault = true;
            }
        }
        fault
    }

    /// Whether a completion event or a queue error came since QUEUE_WAIT last looked
    /// (poll() is readable).
    pub(crate) fn event_pending(&self) -> bool {
        matches!(self, QueueState::Ready(q) if q.events != q.acked)
    }

    /// The queue's channels the fault thread must look at: those seen in fault-wait, and all of
    /// them when `all` (interrupts may have been lost).
    pub(crate) fn take_pending(&mut self, all: bool) -> u32 {
        match self {
            QueueState::Ready(q) => core::mem::take(&mut q.pending) | if all { q.mask } else { 0 },
            _ => 0,
        }
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
