// SPDX-License-Identifier: GPL-2.0-only

//! The channel state machine of one process's copies, over the [`Hw`] trait: start a copy on a
//! free channel, take the engine's reports (done, error, fault-wait), resume or NACK a faulted
//! transfer once the fault path has decided, and start the next queued copy on the freed
//! channel. The queue itself is the core's [`Scheduler`].
//!
//! Interrupts may be lost or repeated: every interrupt looks at the channels it names and at
//! every running one, and a report is acted on only when it matches what the channel runs
//! (a second DONE for a finished copy, or a second fault-wait report for a fault already being
//! served, changes nothing).
//!
//! No lock here: a `Channels` lives under `Process::inner` (lock order: process.rs).

use crate::engine::{ChannelReport, Hw};
use crate::exanest_core::{
    abi::{self, Errno, ValidCopy},
    regs::{self as map, Error as ChError, FaultCause, State},
    sched::{Entry, Scheduler, Start},
};
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

/// Most channels the scheduler handles.
pub(crate) const MAX_CH: usize = map::MAX_CHANNELS;
/// Copies one process may have queued, running or finished but not yet waited for.
pub(crate) const MAX_INFLIGHT: usize = 64;
/// A channel that keeps faulting at the same address after its fault was resolved is NACKed.
pub(crate) const MAX_REFAULTS: u32 = 8;

/// Microseconds since `t`.
pub(crate) fn micros(t: Instant<Monotonic>) -> u64 {
    u64::try_from(t.elapsed().as_micros_ceil()).unwrap_or(0)
}

/// A fault-wait the fault path must serve: where, and how far the transfer still goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FaultWait {
    /// The channel's report.
    pub(crate) report: ChannelReport,
    /// End (exclusive) of the bytes the transfer still accesses in the faulting direction.
    pub(crate) limit: u64,
    /// The copy's region in the faulting direction, held by the copy (it cannot go meanwhile).
    pub(crate) region: u32,
}

/// The copies of one process and the engine channels they run on.
pub(crate) struct Channels {
    /// The copies (read-only outside this file).
    pub(crate) sched: Scheduler<MAX_CH, MAX_INFLIGHT>,
    /// The errno a channel's NACKed transfer ends with (0: none).
    nack_errno: [i32; MAX_CH],
    /// Last fault address of each channel and how often it came back.
    refaults: [(u64, u32); MAX_CH],
    /// When each channel's fault-wait was first seen; `Some` while it is being served.
    fault_at: [Option<Instant<Monotonic>>; MAX_CH],
    /// Channels seen in fault-wait that the fault path has not taken yet.
    fault_pending: u32,
    /// Counters of copies and faults (the rest of `Counters` is filled by stats.rs).
    pub(crate) counters: abi::Counters,
    /// Fault service times.
    pub(crate) latency: abi::Latency,
}

impl Channels {
    pub(crate) fn new(channels: u32) -> Self {
        Channels {
            sched: Scheduler::new(channels),
            nack_errno: [0; MAX_CH],
            refaults: [(0, 0); MAX_CH],
            fault_at: [None; MAX_CH],
            fault_pending: 0,
            counters: abi::Counters::default(),
            latency: abi::Latency::default(),
        }
    }

    /// Accept a copy between two held regions. Returns its cookie, and the start to program
    /// with [`Channels::start`] once the caller has counted the regions as used.
    pub(crate) fn submit(
        &mut self,
        v: ValidCopy,
        src: u32,
        dst: u32,
    ) -> Result<(u64, Option<Start>), Errno> {
        self.sched.submit(v, src, dst)
    }

    /// Program a copy on its channel; a device that is gone ends it at once.
    pub(crate) fn start(&mut self, hw: &dyn Hw, s: Start, ended: &mut impl FnMut(&Entry)) {
        let (e, i) = (s.entry, s.channel as usize);
        self.nack_errno[i] = 0;
        self.refaults[i] = (0, 0);
        self.fault_at[i] = None;
        self.fault_pending &= !(1 << s.channel);
        let len = e.copy.src.len() as u32;
        if let Err(err) = hw.start(s.channel, e.copy.src.start, e.copy.dst.start, len) {
            self.finish(hw, s.channel, err.to_errno(), 0, ended);
        }
    }

    /// The copy on `channel` ended: account, hand it to `ended`, start the next queued copy.
    fn finish(
        &mut self,
        hw: &dyn Hw,
        channel: u32,
        status: i32,
        bytes: u64,
        ended: &mut impl FnMut(&Entry),
    ) {
        let (done, next) = self.sched.complete(channel, status, bytes);
        if let Some(e) = done {
            ended(&e);
            self.counters.bytes += bytes;
            if status == 0 {
                self.counters.copies += 1;
            } else {
                self.counters.copy_errors += 1;
            }
        }
        if let Some(s) = next {
            self.start(hw, s, ended);
        }
    }

    /// The engine interrupted for the channels in `pending`. Returns true when a channel
    /// entered fault-wait and the fault path must run.
    pub(crate) fn interrupt(
        &mut self,
        hw: &dyn Hw,
        pending: u32,
        ended: &mut impl FnMut(&Entry),
    ) -> bool {
        let mut fault = false;
        let look = pending | self.sched.running_mask();
        for n in 0..hw.channels().min(MAX_CH as u32) {
            if look & (1 << n) == 0 || self.sched.running(n).is_none() {
                continue;
            }
            let Ok(rep) = hw.report(n) else {
                continue;
            };
            let i = n as usize;
            match rep.state {
                State::Done => self.finish(hw, n, 0, u64::from(rep.done_bytes), ended),
                State::Error => {
                    let err = match rep.error {
                        ChError::Aborted if self.nack_errno[i] != 0 => self.nack_errno[i],
                        ChError::Aborted => ECANCELED.to_errno(),
                        ChError::NoMaster => EIO.to_errno(),
                        _ => EINVAL.to_errno(),
                    };
                    self.finish(hw, n, err, u64::from(rep.done_bytes), ended);
                }
                State::Fault if self.fault_at[i].is_none() => {
                    self.counters.faults += 1;
                    self.fault_pending |= 1 << n;
                    self.fault_at[i] = Some(Instant::now());
                    fault = true;
                }
                _ => {}
            }
        }
        fault
    }

    /// The channels the fault path must look at: those seen in fault-wait, and every running
    /// one when `all` (fault reports may have been lost).
    pub(crate) fn take_fault_pending(&mut self, all: bool) -> u32 {
        let p = core::mem::take(&mut self.fault_pending);
        if all {
            p | self.sched.running_mask()
        } else {
            p
        }
    }

    /// What channel `n` waits on, if it is in fault-wait for a copy it runs.
    pub(crate) fn fault_wait(&mut self, hw: &dyn Hw, n: u32) -> Option<FaultWait> {
        let e = *self.sched.running(n)?;
        let report = hw.report(n).ok()?;
        if report.state != State::Fault {
            return None;
        }
        let i = n as usize;
        match self.fault_at[i] {
            Some(t) => self.latency.queue.record(micros(t)),
            // Found without its interrupt (lost): served now.
            None => {
                self.counters.faults += 1;
                self.fault_at[i] = Some(Instant::now());
            }
        }
        let (limit, region) = if report.fault_write {
            (e.copy.dst.end, e.dst_handle)
        } else {
            (e.copy.src.end, e.src_handle)
        };
        Some(FaultWait {
            report,
            limit,
            region,
        })
    }

    /// The fault path decided about channel `n`'s fault: resume the transfer (`Ok`), or NACK
    /// it with the errno the copy will end with. A fault that keeps coming back at the same
    /// address after being resolved is NACKed with EFAULT. Returns the decision applied.
    pub(crate) fn decide(
        &mut self,
        hw: &dyn Hw,
        n: u32,
        w: &FaultWait,
        res: Result,
        ended: &mut impl FnMut(&Entry),
    ) -> Result {
        let i = n as usize;
        if let Some(t) = self.fault_at[i].take() {
            self.latency.total.record(micros(t));
        }
        let addr = w.report.fault_addr;
        let (last, count) = self.refaults[i];
        let count = if last == addr { count + 1 } else { 1 };
        self.refaults[i] = (addr, count);
        let res = match (res, w.report.fault_cause) {
            (_, FaultCause::Bus) | (_, FaultCause::Unknown(_)) => Err(EIO),
            (Ok(()), _) if count > MAX_REFAULTS => Err(EFAULT),
            (r, _) => r,
        };
        let cmd = match res {
            Ok(()) => {
                self.counters.faults_resolved += 1;
                self.counters.retransmissions += 1;
                hw.resume(n)
            }
            Err(e) => {
                self.counters.nacks += 1;
                self.nack_errno[i] = e.to_errno();
                hw.nack(n)
            }
        };
        if cmd.is_err() {
            self.finish(
                hw,
                n,
                ENODEV.to_errno(),
                u64::from(w.report.done_bytes),
                ended,
            );
        }
        res
    }

    /// Collect a finished copy: `Ok(None)` while it runs, `NoEnt` for an unknown cookie.
    pub(crate) fn reap(&mut self, cookie: u64) -> Result<Option<(i32, u64)>, Errno> {
        self.sched.reap(cookie)
    }

    /// Whether a finished copy waits to be collected.
    pub(crate) fn has_done(&self) -> bool {
        self.sched.has_done()
    }

    /// End every queued and running copy with `status` (the engine was reset).
    pub(crate) fn abort_all(&mut self, status: i32) {
        self.sched.abort_all(status, |_| {});
        self.fault_pending = 0;
        self.fault_at = [None; MAX_CH];
    }
}

#[kunit_tests(exanest_dma_channel)]
mod tests {
    use super::*;
    use crate::exanest_core::abi::Range;
    use crate::fake::FakeHw;
    use kernel::sync::Arc;

    const LEN: u64 = 0x3000;

    fn copy(i: u64) -> ValidCopy {
        let r = |a| Range::new(a, LEN, 1 << 48).unwrap();
        ValidCopy {
            src: r(0x10_0000 + i * 0x1_0000),
            dst: r(0x80_0000 + i * 0x1_0000),
        }
    }

    /// Submit and start copy `i`; returns its cookie. `released` counts region releases.
    fn submit(ch: &mut Channels, hw: &FakeHw, i: u64, released: &mut u32) -> u64 {
        let (cookie, start) = ch.submit(copy(i), 1, 2).unwrap();
        if let Some(s) = start {
            ch.start(hw, s, &mut |_| *released += 2);
        }
        cookie
    }

    fn setup(n: u32) -> (Channels, Arc<FakeHw>) {
        (Channels::new(n), FakeHw::new(n).unwrap())
    }

    /// start → done: the channel is programmed, the interrupt completes the copy once.
    #[test]
    fn start_then_done() {
        let (mut ch, hw) = setup(2);
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        assert_eq!(hw.state(0), State::Busy);
        assert_eq!(hw.started_src(0), 0x10_0000);
        assert_eq!(ch.reap(c), Ok(None));
        hw.complete(0);
        let irq = hw.take_irq_status();
        assert!(!ch.interrupt(&*hw, irq, &mut |_| rel += 2));
        assert_eq!(ch.reap(c), Ok(Some((0, LEN))));
        assert_eq!((rel, ch.counters.copies, ch.counters.bytes), (2, 1, LEN));
        assert_eq!(ch.reap(c), Err(Errno::NoEnt));
    }

    /// start → fault → resume → done: the fault is served once, then retransmitted.
    #[test]
    fn fault_resume_done() {
        let (mut ch, hw) = setup(2);
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        hw.fault(0, 0x80_1000, true, 0x1000, FaultCause::Translation);
        assert!(ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| ()));
        assert_eq!(ch.take_fault_pending(false), 1);
        let w = ch.fault_wait(&*hw, 0).unwrap();
        assert_eq!((w.report.fault_addr, w.limit), (0x80_1000, 0x80_0000 + LEN));
        assert_eq!(ch.decide(&*hw, 0, &w, Ok(()), &mut |_| ()), Ok(()));
        assert_eq!((hw.state(0), hw.with(|s| s.resumes)), (State::Busy, 1));
        hw.complete(0);
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| ());
        assert_eq!(ch.reap(c), Ok(Some((0, LEN))));
        let k = ch.counters;
        assert_eq!(
            (k.faults, k.faults_resolved, k.retransmissions, k.nacks),
            (1, 1, 1, 0)
        );
    }

    /// start → fault → NACK: the copy ends with the resolver's errno and the bytes done.
    #[test]
    fn fault_nack_errno() {
        let (mut ch, hw) = setup(1);
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        hw.fault(0, 0x10_2000, false, 0x2000, FaultCause::Translation);
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| ());
        let w = ch.fault_wait(&*hw, 0).unwrap();
        assert_eq!(
            ch.decide(&*hw, 0, &w, Err(EFAULT), &mut |_| ()),
            Err(EFAULT)
        );
        assert_eq!(hw.state(0), State::Error);
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| rel += 2);
        assert_eq!(ch.reap(c), Ok(Some((EFAULT.to_errno(), 0x2000))));
        assert_eq!((rel, ch.counters.nacks, ch.counters.copy_errors), (2, 1, 1));
    }

    /// An engine abort the driver did not ask for is ECANCELED; a dead bus master EIO.
    #[test]
    fn engine_errors() {
        let (mut ch, hw) = setup(2);
        let mut rel = 0;
        let a = submit(&mut ch, &hw, 0, &mut rel);
        let b = submit(&mut ch, &hw, 1, &mut rel);
        hw.fail(0, ChError::Aborted);
        hw.fail(1, ChError::NoMaster);
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| ());
        assert_eq!(ch.reap(a), Ok(Some((ECANCELED.to_errno(), 0))));
        assert_eq!(ch.reap(b), Ok(Some((EIO.to_errno(), 0))));
    }

    /// A duplicate DONE interrupt completes nothing more.
    #[test]
    fn duplicate_done_interrupt() {
        let (mut ch, hw) = setup(1);
        let mut rel = 0;
        submit(&mut ch, &hw, 0, &mut rel);
        hw.complete(0);
        ch.interrupt(&*hw, 1, &mut |_| rel += 2);
        ch.interrupt(&*hw, 1, &mut |_| rel += 2);
        assert_eq!((rel, ch.counters.copies), (2, 1));
    }

    /// A duplicate fault-wait interrupt is one fault, served once.
    #[test]
    fn duplicate_fault_interrupt() {
        let (mut ch, hw) = setup(1);
        let mut rel = 0;
        submit(&mut ch, &hw, 0, &mut rel);
        hw.fault(0, 0x10_0000, false, 0, FaultCause::Translation);
        assert!(ch.interrupt(&*hw, 1, &mut |_| ()));
        assert!(!ch.interrupt(&*hw, 1, &mut |_| ()));
        assert_eq!(ch.counters.faults, 1);
        assert_eq!(ch.take_fault_pending(false), 1);
        assert_eq!(ch.take_fault_pending(false), 0);
    }

    /// A lost DONE interrupt: the next interrupt, for another channel, completes both.
    #[test]
    fn lost_done_interrupt() {
        let (mut ch, hw) = setup(2);
        let mut rel = 0;
        let a = submit(&mut ch, &hw, 0, &mut rel);
        let b = submit(&mut ch, &hw, 1, &mut rel);
        hw.complete(0);
        hw.complete(1);
        ch.interrupt(&*hw, 1 << 1, &mut |_| ());
        assert_eq!(ch.reap(a), Ok(Some((0, LEN))));
        assert_eq!(ch.reap(b), Ok(Some((0, LEN))));
    }

    /// A lost fault-wait interrupt: the fault path's scan of running channels finds it.
    #[test]
    fn lost_fault_interrupt() {
        let (mut ch, hw) = setup(2);
        let mut rel = 0;
        submit(&mut ch, &hw, 0, &mut rel);
        hw.fault(0, 0x10_0000, false, 0, FaultCause::Translation);
        assert_eq!(ch.take_fault_pending(false), 0);
        assert_eq!(ch.take_fault_pending(true), 1);
        let w = ch.fault_wait(&*hw, 0).unwrap();
        assert_eq!(ch.counters.faults, 1);
        assert_eq!(ch.decide(&*hw, 0, &w, Ok(()), &mut |_| ()), Ok(()));
        assert_eq!(hw.state(0), State::Busy);
    }

    /// With one channel the second copy queues, and starts when the first ends.
    #[test]
    fn queued_copy_takes_freed_channel() {
        let (mut ch, hw) = setup(1);
        let mut rel = 0;
        let a = submit(&mut ch, &hw, 0, &mut rel);
        let b = submit(&mut ch, &hw, 1, &mut rel);
        assert_eq!(hw.with(|s| s.starts), 1);
        hw.complete(0);
        ch.interrupt(&*hw, 1, &mut |_| ());
        assert_eq!(hw.with(|s| s.starts), 2);
        assert_eq!(hw.started_src(0), 0x11_0000);
        assert_eq!(ch.reap(a), Ok(Some((0, LEN))));
        assert_eq!(ch.reap(b), Ok(None));
    }

    /// A fault resolved but back at the same address more than MAX_REFAULTS times is NACKed.
    #[test]
    fn refault_limit() {
        let (mut ch, hw) = setup(1);
        let mut rel = 0;
        submit(&mut ch, &hw, 0, &mut rel);
        let mut last = Ok(());
        for _ in 0..=MAX_REFAULTS {
            hw.fault(0, 0x10_0000, false, 0, FaultCause::Translation);
            ch.interrupt(&*hw, 1, &mut |_| ());
            let w = ch.fault_wait(&*hw, 0).unwrap();
            last = ch.decide(&*hw, 0, &w, Ok(()), &mut |_| ());
        }
        assert_eq!(last, Err(EFAULT));
        assert_eq!(hw.with(|s| (s.resumes, s.nacks)), (MAX_REFAULTS, 1));
    }

    /// A bus error after translation cannot be resolved: NACKed with EIO.
    #[test]
    fn bus_fault_is_eio() {
        let (mut ch, hw) = setup(1);
        let mut rel = 0;
        submit(&mut ch, &hw, 0, &mut rel);
        hw.fault(0, 0x10_0000, false, 0, FaultCause::Bus);
        ch.interrupt(&*hw, 1, &mut |_| ());
        let w = ch.fault_wait(&*hw, 0).unwrap();
        assert_eq!(ch.decide(&*hw, 0, &w, Ok(()), &mut |_| ()), Err(EIO));
    }

    /// A device that is gone at start ends the copy at once, its regions given back.
    #[test]
    fn start_on_gone_device() {
        let (mut ch, hw) = setup(1);
        hw.with(|s| s.gone = true);
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        assert_eq!(rel, 2);
        assert_eq!(ch.reap(c), Ok(Some((ENODEV.to_errno(), 0))));
    }

    /// Teardown ends queued and running copies with its status.
    #[test]
    fn abort_all_ends_everything() {
        let (mut ch, hw) = setup(1);
        let mut rel = 0;
        let a = submit(&mut ch, &hw, 0, &mut rel);
        let b = submit(&mut ch, &hw, 1, &mut rel);
        ch.abort_all(ECANCELED.to_errno());
        assert_eq!(ch.reap(a), Ok(Some((ECANCELED.to_errno(), 0))));
        assert_eq!(ch.reap(b), Ok(Some((ECANCELED.to_errno(), 0))));
        assert!(!ch.has_done());
    }
}
