// SPDX-License-Identifier: GPL-2.0-only

//! The one fault state machine of a context's channels over the [`Hw`] trait: the core's
//! [`FaultTable`] (which decides) with the engine's registers (which report and take the
//! answer). Every origin goes through it: a copy of the COPY path, a user-level queue
//! transfer, a receiver fault. [`Faults::interrupt`] notes channels in fault-wait,
//! [`Faults::take`] reads one's report and origin once, and [`Faults::end`] decides, writes
//! RESUME or NACK, and checks that the engine took it: one function ends every fault.
//!
//! No lock here: `Faults` lives under `Process::inner` (lock order: process.rs).

use crate::exanest_core::faultsm::MAX_CHANNELS as MAX_CH;
use crate::exanest_core::{
    abi,
    faultsm::{Answer, FaultTable, Origin},
    regs as map,
    stamps::{Kind, Record, Step},
};
use crate::ffi;
use crate::hw::{Command, EngineFault, Hw};
use kernel::prelude::*;

/// Nanoseconds of the fault path's stamp clock, the state machine's time (and the fault log's).
fn now_ns() -> u64 {
    ffi::stamp_ns()
}

/// The channels of a context with `channels` channels, as a mask.
fn all(channels: u32) -> u32 {
    match channels.min(MAX_CH as u32) {
        32.. => u32::MAX,
        c => (1 << c) - 1,
    }
}

/// How a fault ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    /// The decision.
    pub(crate) answer: Answer,
    /// Whether the engine took it: `Err` when the command could not be written (the device is
    /// gone). A channel that no longer held the fault ignores the command.
    pub(crate) written: Result,
}

/// The faults of the context a process holds.
pub(crate) struct Faults {
    table: FaultTable<MAX_CH>,
}

impl Faults {
    pub(crate) const fn new() -> Self {
        Faults {
            table: FaultTable::new(),
        }
    }

    /// The context interrupted for the channels in `pending`: note those in fault-wait, read
    /// once each. Returns whether one is new and the fault thread must run.
    pub(crate) fn interrupt(&mut self, hw: &dyn Hw, pending: u32) -> bool {
        let pending = pending & all(hw.channels()) & map::ctx_irq::CHANNELS;
        let mut new = false;
        for n in (0..MAX_CH as u32).filter(|n| pending & (1 << n) != 0) {
            if matches!(hw.in_fault(n), Ok(true)) && self.table.detected(n, now_ns()) {
                new = true;
            }
        }
        new
    }

    /// Note channel `n`, which the interrupt saw in fault-wait at `at` (ns) without taking the
    /// process's lock (`Process::on_interrupt`). Returns whether it is new. Its state is not
    /// read again: taking it ([`Faults::take`]) does, and forgets it if another server
    /// answered it meanwhile (the core counts a fault when it is taken).
    pub(crate) fn noted(&mut self, n: u32, at: u64) -> bool {
        self.table.detected(n, at)
    }

    /// The channels the fault thread must look at: those noted, and every one when `lost`
    /// (reports may have been lost).
    pub(crate) fn pending(&mut self, hw: &dyn Hw, lost: bool) -> u32 {
        self.table
            .take_pending(if lost { all(hw.channels()) } else { 0 })
    }

    /// The fault thread takes channel `n`'s fault: its report and origin, read once. `None`
    /// (and nothing in service) when the channel is not in fault-wait. The fault's record
    /// `rec` gets the interrupt's time and the thread's. Inlined into its caller, which takes
    /// the report where it keeps it: called, the report was copied out of the result into
    /// the option, and the call and its frame cost as much (a lone fault's path 3,644 -> 3,562
    /// instructions, `make profile`).
    #[inline(always)]
    pub(crate) fn take(
        &mut self,
        hw: &dyn Hw,
        n: u32,
        k: &mut abi::Counters,
        rec: &mut Record,
    ) -> Option<EngineFault> {
        match hw.fault(n) {
            Ok(Some(f)) => {
                let now = now_ns();
                self.table.begin(n, now, k);
                if let Some(t) = self.table.seen(n) {
                    rec.stamp(Step::Irq, t);
                }
                rec.stamp(Step::Thread, now);
                Some(f)
            }
            _ => {
                self.table.end(n);
                None
            }
        }
    }

    /// Channel `n`'s fault `f` is not one the process serves (its copy, queue or endpoint is
    /// gone): it is out of service; a later scan sees it again if it stays.
    pub(crate) fn drop_fault(&mut self, n: u32) {
        self.table.end(n);
    }

    /// Give channel `n`'s fault, taken by an interrupt thread that could not resolve it
    /// without sleeping, back to the fault thread: pending again, counted once.
    pub(crate) fn defer(&mut self, n: u32) {
        self.table.defer(n);
    }

    /// End channel `n`'s fault `f` of `origin`, resolved with `res`: decide, write RESUME or
    /// NACK, and check that it was written. A copy's NACK carries `ABORTED` (the copy ends
    /// with the errno the channel state machine keeps); a queue transfer's or a receive's
    /// carries the errno. The fault's record `rec` gets the answer and its time.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn end(
        &mut self,
        hw: &dyn Hw,
        n: u32,
        f: &EngineFault,
        origin: Origin,
        res: Result,
        k: &mut abi::Counters,
        lat: &mut abi::Latency,
        rec: &mut Record,
    ) -> Ended {
        let rep = &f.report;
        let res = res.map_err(|e| -e.to_errno());
        let answer = self
            .table
            .decide(n, (origin, rep.fault_addr, rep.fault_cause), res);
        let cmd = match (answer, origin) {
            (Answer::Resume, _) => Command::Resume,
            (Answer::Nack(_), Origin::Copy { .. }) => Command::Nack {
                status: map::cqe_status::ABORTED,
            },
            (Answer::Nack(e), _) => Command::Nack { status: -e },
        };
        let written = hw.answer(n, cmd, f.seq);
        ffi::prof_mark(ffi::Mark::End);
        // The counting after the answer, which the engine does not wait for.
        let now = now_ns();
        rec.stamp(Step::Answered, now);
        self.table.answered(n, answer, now, k, lat);
        rec.kind = match origin {
            Origin::Copy { .. } => Kind::Copy,
            Origin::Queue { .. } => Kind::Queue,
            Origin::NetRx { .. } => Kind::NetRx,
        };
        rec.write = rep.fault_write;
        rec.errno = match answer {
            Answer::Resume => 0,
            Answer::Nack(e) => u16::try_from(e).unwrap_or(u16::MAX),
        };
        self.table.end(n);
        Ended { answer, written }
    }

    /// Whether a fault is noted or being served: the process keeps its context meanwhile, so
    /// that the answer reaches the channel holding the fault (`Inner::idle`).
    pub(crate) fn in_service(&self) -> bool {
        self.table.in_service()
    }

    /// The context was reset or given up: no fault is left to serve on it.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
    }
}

#[kunit_tests(exanest_dma_fault_machine)]
mod tests {
    use super::*;
    use crate::exanest_core::{
        faultsm::{Source, EFAULT as CORE_EFAULT, MAX_REFAULTS},
        regs::{FaultCause, State},
    };
    use crate::hw::fake::FakeHw;

    fn setup() -> (
        Faults,
        kernel::sync::Arc<FakeHw>,
        abi::Counters,
        abi::Latency,
    ) {
        (
            Faults::new(),
            FakeHw::new(4).unwrap(),
            abi::Counters::default(),
            abi::Latency::default(),
        )
    }

    /// Serve channel `n`'s fault as the fault thread does, with `res` from the resolver.
    fn serve(
        f: &mut Faults,
        hw: &FakeHw,
        n: u32,
        origin: Origin,
        res: Result,
        k: &mut abi::Counters,
        lat: &mut abi::Latency,
    ) -> Option<Ended> {
        let mut rec = Record::default();
        let t = f.take(hw, n, k, &mut rec)?;
        Some(f.end(hw, n, &t, origin, res, k, lat, &mut rec))
    }

    /// A fault noted from the interrupt (no register read) that another server answered
    /// before this one took it: taking it finds the channel busy, forgets it, counts nothing.
    #[test]
    fn noted_fault_answered_meanwhile() {
        let (mut f, hw, mut k, _) = setup();
        hw.start_busy(2);
        hw.page_fault(2, 0x80_2000, false, 0, FaultCause::Translation);
        // The interrupt thread saw it in fault-wait; the other server answers it first.
        hw.answer(2, Command::Resume, None).unwrap();
        assert!(f.noted(2, 1_000));
        assert!(f.in_service());
        assert_eq!(f.pending(&*hw, false), 1 << 2);
        let mut rec = Record::default();
        assert!(f.take(&*hw, 2, &mut k, &mut rec).is_none());
        assert!(!f.in_service());
        assert_eq!(k.faults, 0);
        // Its next fault is noted and counted anew.
        hw.page_fault(2, 0x80_3000, false, 0, FaultCause::Translation);
        assert!(f.noted(2, 2_000));
        assert_eq!(f.pending(&*hw, false), 1 << 2);
        assert!(f.take(&*hw, 2, &mut k, &mut rec).is_some());
        assert_eq!(k.faults, 1);
    }

    /// A copy (START) faults: noted once, taken with its origin, RESUMEd, out of service.
    #[test]
    fn copy_fault_resumed() {
        let (mut f, hw, mut k, mut lat) = setup();
        hw.start_busy(1);
        hw.page_fault(1, 0x80_1000, true, 0x1000, FaultCause::Translation);
        assert!(f.interrupt(&*hw, hw.take_irq_status()));
        // A duplicate interrupt.
        assert!(!f.interrupt(&*hw, 1 << 1));
        // Counted when taken.
        assert_eq!(k.faults, 0);
        assert!(f.in_service());
        assert_eq!(f.pending(&*hw, false), 1 << 1);
        let mut rec = Record::default();
        let t = f.take(&*hw, 1, &mut k, &mut rec).unwrap();
        assert_eq!(k.faults, 1);
        assert_eq!(t.source, Source::Start);
        assert_eq!(
            (t.report.fault_addr, t.report.fault_write),
            (0x80_1000, true)
        );
        let o = Origin::Copy { slot: 1, cookie: 3 };
        let e = f.end(&*hw, 1, &t, o, Ok(()), &mut k, &mut lat, &mut rec);
        assert_eq!(
            e,
            Ended {
                answer: Answer::Resume,
                written: Ok(())
            }
        );
        assert_eq!((hw.state(1), hw.with(|s| s.resumes)), (State::Busy, 1));
        assert!(!f.in_service());
        assert_eq!((k.faults_resolved, k.retransmissions, k.nacks), (1, 1, 0));
        assert_eq!(lat.queue.buckets.iter().sum::<u64>(), 1);
        assert_eq!(lat.total.buckets.iter().sum::<u64>(), 1);
        // Its record: the interrupt, the thread taking it, the answer, in that order.
        let (irq, thread, answered) = (
            rec.at(Step::Irq).unwrap(),
            rec.at(Step::Thread).unwrap(),
            rec.at(Step::Answered).unwrap(),
        );
        assert!(irq <= thread && thread <= answered);
        assert_eq!(rec.at(Step::FaultIn), None);
        assert_eq!((rec.kind, rec.write, rec.errno), (Kind::Copy, true, 0));
    }

    /// A copy's NACK says ABORTED to the engine (the copy keeps the errno), a bus fault is
    /// EIO whatever the resolver said.
    #[test]
    fn copy_nack_is_aborted() {
        let (mut f, hw, mut k, mut lat) = setup();
        hw.start_busy(0);
        hw.page_fault(0, 0x10_0000, false, 0, FaultCause::Bus);
        let o = Origin::Copy { slot: 0, cookie: 1 };
        let e = serve(&mut f, &hw, 0, o, Ok(()), &mut k, &mut lat).unwrap();
        assert_eq!(e.answer, Answer::Nack(EIO.to_errno().abs()));
        assert_eq!(hw.state(0), State::Error);
        assert_eq!(hw.with(|s| s.nack_status[0]), map::cqe_status::ABORTED);
        assert_eq!(k.nacks, 1);
    }

    /// A user-level queue transfer's fault: its SQ index is its origin, its NACK carries the
    /// resolver's errno.
    #[test]
    fn queue_fault_nack_errno() {
        let (mut f, hw, mut k, mut lat) = setup();
        let mut rec = Record::default();
        hw.start_busy(2);
        hw.set_source(2, Source::Queue { index: 17 });
        hw.page_fault(2, 0x4000, false, 0, FaultCause::Translation);
        assert!(f.interrupt(&*hw, hw.take_irq_status()));
        let t = f.take(&*hw, 2, &mut k, &mut rec).unwrap();
        assert_eq!(t.source, Source::Queue { index: 17 });
        let o = Origin::Queue { index: 17 };
        let e = f.end(&*hw, 2, &t, o, Err(EACCES), &mut k, &mut lat, &mut rec);
        assert_eq!(e.answer, Answer::Nack(EACCES.to_errno().abs()));
        assert_eq!((rec.kind, rec.errno), (Kind::Queue, 13));
        assert_eq!(hw.with(|s| s.nack_status[2]), EACCES.to_errno());
    }

    /// A receiver fault, reported on an idle channel, is served as a receive even where the
    /// COPY path runs a copy on that channel number: ORIGIN decides, not the copy's state.
    #[test]
    fn receive_fault_by_origin() {
        let (mut f, hw, mut k, mut lat) = setup();
        let mut rec = Record::default();
        hw.net_rx_fault(0, 0x9000, 2, 41);
        assert!(f.interrupt(&*hw, hw.take_irq_status()));
        let t = f.take(&*hw, 0, &mut k, &mut rec).unwrap();
        assert_eq!(t.source, Source::NetRx { src: 2, opid: 41 });
        assert!(t.report.fault_write);
        let o = Origin::NetRx { src: 2, opid: 41 };
        let e = f.end(&*hw, 0, &t, o, Ok(()), &mut k, &mut lat, &mut rec);
        assert_eq!(e.answer, Answer::Resume);
        // RESUME answers the sender; the channel is idle again.
        assert_eq!(hw.state(0), State::Idle);
    }

    /// A receive that keeps faulting at the same address is NACKed with EFAULT at the
    /// refault limit, its sender told so.
    #[test]
    fn receive_refault_limit_nack() {
        let (mut f, hw, mut k, mut lat) = setup();
        let o = Origin::NetRx { src: 1, opid: 7 };
        let mut last = None;
        for _ in 0..=MAX_REFAULTS {
            hw.net_rx_fault(3, 0x2000, 1, 7);
            f.interrupt(&*hw, hw.take_irq_status());
            last = serve(&mut f, &hw, 3, o, Ok(()), &mut k, &mut lat);
        }
        assert_eq!(last.unwrap().answer, Answer::Nack(CORE_EFAULT));
        assert_eq!(hw.with(|s| (s.resumes, s.nacks)), (MAX_REFAULTS, 1));
        assert_eq!(hw.with(|s| s.nack_status[3]), EFAULT.to_errno());
        assert_eq!(k.faults, u64::from(MAX_REFAULTS) + 1);
    }

    /// A RESUME the engine did not take (the channel stays in fault-wait): the scan of every
    /// channel finds it again, counts it, and RESUMEs it again.
    #[test]
    fn lost_resume_served_again() {
        let (mut f, hw, mut k, mut lat) = setup();
        hw.start_busy(1);
        hw.page_fault(1, 0x7000, false, 0, FaultCause::Translation);
        hw.with(|s| s.lose_resumes = 1);
        f.interrupt(&*hw, hw.take_irq_status());
        let o = Origin::Copy { slot: 1, cookie: 9 };
        assert_eq!(f.pending(&*hw, false), 1 << 1);
        serve(&mut f, &hw, 1, o, Ok(()), &mut k, &mut lat).unwrap();
        // The RESUME was lost.
        assert_eq!(hw.state(1), State::Fault);
        assert!(!f.in_service());
        // The thread's next pass looks at every channel (it served one).
        assert_eq!(f.pending(&*hw, true), 0b1111);
        assert!(serve(&mut f, &hw, 0, o, Ok(()), &mut k, &mut lat).is_none());
        serve(&mut f, &hw, 1, o, Ok(()), &mut k, &mut lat).unwrap();
        assert_eq!((hw.state(1), hw.with(|s| s.resumes)), (State::Busy, 1));
        assert_eq!((k.faults, k.faults_resolved), (2, 2));
    }

    /// A command the engine cannot take (device gone) is reported, and the fault is out of
    /// service.
    #[test]
    fn answer_on_gone_device() {
        let (mut f, hw, mut k, mut lat) = setup();
        let mut rec = Record::default();
        hw.start_busy(0);
        hw.page_fault(0, 0x7000, false, 0, FaultCause::Translation);
        let t = f.take(&*hw, 0, &mut k, &mut rec).unwrap();
        hw.with(|s| s.gone = true);
        let o = Origin::Copy { slot: 0, cookie: 1 };
        let e = f.end(&*hw, 0, &t, o, Ok(()), &mut k, &mut lat, &mut rec);
        assert_eq!(e.written, Err(ENODEV));
        assert!(!f.in_service());
    }

    /// A fault in service keeps the context (a receive taken, not yet answered, included);
    /// clearing forgets it.
    #[test]
    fn in_service_until_answered() {
        let (mut f, hw, mut k, mut lat) = setup();
        let mut rec = Record::default();
        hw.net_rx_fault(2, 0x3000, 4, 1);
        assert!(f.interrupt(&*hw, hw.take_irq_status()));
        // Noted.
        assert!(f.in_service());
        assert_eq!(f.pending(&*hw, false), 1 << 2);
        let t = f.take(&*hw, 2, &mut k, &mut rec).unwrap();
        // Taken, being resolved.
        assert!(f.in_service());
        let o = Origin::NetRx { src: 4, opid: 1 };
        f.end(&*hw, 2, &t, o, Ok(()), &mut k, &mut lat, &mut rec);
        assert!(!f.in_service());
        hw.net_rx_fault(2, 0x3000, 4, 2);
        f.interrupt(&*hw, hw.take_irq_status());
        f.clear();
        assert!(!f.in_service());
    }
}
