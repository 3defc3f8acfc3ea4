// SPDX-License-Identifier: GPL-2.0-only

//! The channel state machine of one process's copies, over the [`Hw`] trait: start a copy on a
//! free channel, take the engine's reports (done, error), end a copy whose fault was NACKed
//! with the fault path's errno, and start the next queued copy on the freed channel. The
//! queue itself is the core's [`Scheduler`]; faults, of copies as of every other origin, are
//! the fault state machine's (fault/machine.rs).
//!
//! Interrupts may be lost or repeated: every interrupt looks at the channels it names and at
//! every running one, and a report is acted on only when it matches what the channel runs
//! (a second DONE for a finished copy changes nothing).
//!
//! No lock here: a `Channels` lives under `Process::inner` (lock order: process.rs).

use crate::exanest_core::{
    abi::{self, Errno, ValidCopy},
    faultsm::{Answer, Origin},
    regs::{self as map, Error as ChError, State},
    sched::{Entry, Scheduler, Start},
};
use crate::fault::{Ended, Transfer, Within};
use crate::hw::Hw;
use kernel::{page::PAGE_SIZE, prelude::*};

/// Most channels the scheduler handles.
pub(crate) const MAX_CH: usize = map::MAX_CHANNELS;

/// The channels whose bits are set in `mask` (those below [`MAX_CH`]), lowest first: one step
/// per channel set, not one per channel (a fault's path walks such masks four times).
pub(crate) fn each_channel(mask: u32) -> impl Iterator<Item = u32> {
    let mut rest = mask & ((1u32 << MAX_CH) - 1);
    core::iter::from_fn(move || {
        let n = rest.trailing_zeros();
        rest &= rest.wrapping_sub(1);
        (n < 32).then_some(n)
    })
}

/// Copies one process may have queued, running or finished but not yet waited for.
pub(crate) const MAX_INFLIGHT: usize = 64;

/// The copies of one process and the engine channels they run on.
pub(crate) struct Channels {
    /// The copies (read-only outside this file).
    pub(super) sched: Scheduler<MAX_CH, MAX_INFLIGHT>,
    /// The errno a channel's NACKed transfer ends with (0: none).
    nack_errno: [i32; MAX_CH],
    /// Counters of copies and faults (the rest of `Counters` is filled by stats.rs).
    pub(super) counters: abi::Counters,
    /// Fault service times.
    pub(super) latency: abi::Latency,
}

impl Channels {
    /// The counters and the fault service times, together (the fault table records in both).
    pub(crate) fn counting(&mut self) -> (&mut abi::Counters, &mut abi::Latency) {
        (&mut self.counters, &mut self.latency)
    }

    pub(crate) fn new(channels: u32) -> Self {
        Channels {
            sched: Scheduler::new(channels),
            nack_errno: [0; MAX_CH],
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

    /// The engine interrupted for the channels in `pending`: end the copies that ended. A
    /// channel in fault-wait is the fault path's (fault/machine.rs).
    pub(crate) fn interrupt(&mut self, hw: &dyn Hw, pending: u32, ended: &mut impl FnMut(&Entry)) {
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
                _ => {}
            }
        }
    }

    /// The end of the range of the running copy that reads (or, for a `write`, writes) the
    /// page at `page`: how much of the transfer a fault there has still to come, when the
    /// IOMMU reports it before the engine says whose it is. `u64::MAX` when no copy holds the
    /// page (a queue transfer's, or another node's).
    pub(crate) fn copy_end(&self, page: u64, write: bool) -> u64 {
        let mut mask = self.sched.running_mask();
        while mask != 0 {
            let n = mask.trailing_zeros();
            mask &= mask - 1;
            if let Some(e) = self.sched.running(n) {
                let r = if write { &e.copy.dst } else { &e.copy.src };
                if r.start < page.saturating_add(PAGE_SIZE as u64) && page < r.end {
                    return r.end;
                }
            }
        }
        u64::MAX
    }

    /// The copy on channel `slot`, whose transfer faulted in the direction `write`: `None`
    /// when none runs there.
    pub(crate) fn fault_of(&self, slot: u32, write: bool) -> Option<Transfer> {
        let e = self.sched.running(slot)?;
        let (limit, region) = if write {
            (e.copy.dst.end, e.dst_handle)
        } else {
            (e.copy.src.end, e.src_handle)
        };
        Some(Transfer {
            origin: Origin::Copy {
                slot,
                cookie: e.cookie,
            },
            limit,
            within: Within::Region(region),
        })
    }

    /// The fault path ended the fault of the copy on `slot` (`e`): a NACKed copy ends with the
    /// decision's errno when the engine reports it aborted; a copy whose answer could not be
    /// written (the device is gone) ends now with ENODEV, with the bytes the channel still
    /// reports as copied (none once its registers are gone).
    pub(crate) fn fault_ended(
        &mut self,
        hw: &dyn Hw,
        slot: u32,
        e: &Ended,
        ended: &mut impl FnMut(&Entry),
    ) {
        let i = slot as usize;
        if i >= MAX_CH {
            return;
        }
        if let Answer::Nack(errno) = e.answer {
            self.nack_errno[i] = -errno;
        }
        if e.written.is_err() && self.sched.running(slot).is_some() {
            let done = hw.report(slot).map_or(0, |r| r.done_bytes);
            self.finish(hw, slot, ENODEV.to_errno(), u64::from(done), ended);
        }
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
    }
}

#[kunit_tests(exanest_dma_channel)]
mod tests {
    use super::*;
    use crate::exanest_core::{abi::Range, faultsm::MAX_REFAULTS, regs::FaultCause};
    use crate::fault::Faults;
    use crate::hw::fake::FakeHw;
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

    /// The channels of a mask, lowest first, none past the last channel.
    #[test]
    fn each_channel_walks_the_bits_set() {
        // The bits past the eighth channel are not channels.
        let mut it = each_channel(0b1010_0101 | 1 << MAX_CH | 1 << 31);
        for want in [0, 2, 5, 7] {
            assert_eq!(it.next(), Some(want));
        }
        assert_eq!(it.next(), None);
        assert_eq!(each_channel(0).count(), 0);
        assert_eq!(each_channel(u32::MAX).count(), MAX_CH);
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
        ch.interrupt(&*hw, irq, &mut |_| rel += 2);
        assert_eq!(ch.reap(c), Ok(Some((0, LEN))));
        assert_eq!((rel, ch.counters.copies, ch.counters.bytes), (2, 1, LEN));
        assert_eq!(ch.reap(c), Err(Errno::NoEnt));
    }

    /// Serve the fault of the copy on channel `n` as the fault thread does: take it, find its
    /// copy, end it with the resolver's `res`.
    fn serve(ch: &mut Channels, f: &mut Faults, hw: &FakeHw, n: u32, res: Result) -> Ended {
        let mut lat = ch.latency;
        let mut rec = Default::default();
        let t = f.take(hw, n, &mut ch.counters, &mut rec).unwrap();
        let c = ch.fault_of(n, t.report.fault_write).unwrap();
        let e = f.end(
            hw,
            n,
            &t,
            c.origin,
            res,
            &mut ch.counters,
            &mut lat,
            &mut rec,
        );
        ch.fault_ended(hw, n, &e, &mut |_| ());
        ch.latency = lat;
        e
    }

    /// start → fault → resume → done: the fault is served once, then retransmitted.
    #[test]
    fn fault_resume_done() {
        let (mut ch, hw) = setup(2);
        let mut f = Faults::new();
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        hw.page_fault(0, 0x80_1000, true, 0x1000, FaultCause::Translation);
        let irq = hw.take_irq_status();
        assert!(f.interrupt(&*hw, irq));
        ch.interrupt(&*hw, irq, &mut |_| ());
        // A fault does not end the copy.
        assert_eq!(ch.reap(c), Ok(None));
        assert_eq!(f.pending(&*hw, false), 1);
        let w = ch.fault_of(0, true).unwrap();
        assert_eq!(w.limit, 0x80_0000 + LEN);
        assert_eq!(w.within, Within::Region(2));
        assert_eq!(
            serve(&mut ch, &mut f, &hw, 0, Ok(())).answer,
            Answer::Resume
        );
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
        let mut f = Faults::new();
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        hw.page_fault(0, 0x10_2000, false, 0x2000, FaultCause::Translation);
        f.interrupt(&*hw, hw.take_irq_status());
        let e = serve(&mut ch, &mut f, &hw, 0, Err(EFAULT));
        assert_eq!(e.answer, Answer::Nack(-EFAULT.to_errno()));
        assert_eq!(hw.state(0), State::Error);
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| rel += 2);
        assert_eq!(ch.reap(c), Ok(Some((EFAULT.to_errno(), 0x2000))));
        assert_eq!((rel, ch.counters.nacks, ch.counters.copy_errors), (2, 1, 1));
    }

    /// The answer to a copy's fault cannot be written (the device went): the copy ends with
    /// ENODEV at once, its regions given back.
    #[test]
    fn fault_answer_on_gone_device() {
        let (mut ch, hw) = setup(1);
        let mut f = Faults::new();
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        hw.page_fault(0, 0x10_2000, false, 0x1000, FaultCause::Translation);
        let mut lat = ch.latency;
        let mut rec = Default::default();
        let t = f.take(&*hw, 0, &mut ch.counters, &mut rec).unwrap();
        hw.with(|s| s.gone = true);
        let o = ch.fault_of(0, false).unwrap().origin;
        let e = f.end(&*hw, 0, &t, o, Ok(()), &mut ch.counters, &mut lat, &mut rec);
        ch.fault_ended(&*hw, 0, &e, &mut |_| rel += 2);
        assert_eq!(ch.reap(c), Ok(Some((ENODEV.to_errno(), 0x1000))));
        assert_eq!(rel, 2);
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

    /// A lost fault-wait interrupt: the fault path's scan of every channel finds it.
    #[test]
    fn lost_fault_interrupt() {
        let (mut ch, hw) = setup(2);
        let mut f = Faults::new();
        let mut rel = 0;
        submit(&mut ch, &hw, 0, &mut rel);
        hw.page_fault(0, 0x10_0000, false, 0, FaultCause::Translation);
        assert_eq!(f.pending(&*hw, false), 0);
        assert_eq!(f.pending(&*hw, true), 0b11);
        assert_eq!(
            serve(&mut ch, &mut f, &hw, 0, Ok(())).answer,
            Answer::Resume
        );
        assert_eq!(ch.counters.faults, 1);
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

    /// A copy's fault resolved but back at the same address more than MAX_REFAULTS times is
    /// NACKed with EFAULT, which the copy ends with.
    #[test]
    fn refault_limit() {
        let (mut ch, hw) = setup(1);
        let mut f = Faults::new();
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        let mut last = None;
        for _ in 0..=MAX_REFAULTS {
            hw.page_fault(0, 0x10_0000, false, 0, FaultCause::Translation);
            f.interrupt(&*hw, hw.take_irq_status());
            last = Some(serve(&mut ch, &mut f, &hw, 0, Ok(())).answer);
        }
        assert_eq!(last, Some(Answer::Nack(-EFAULT.to_errno())));
        assert_eq!(hw.with(|s| (s.resumes, s.nacks)), (MAX_REFAULTS, 1));
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| ());
        assert_eq!(ch.reap(c), Ok(Some((EFAULT.to_errno(), 0))));
    }

    /// A bus error after translation cannot be resolved: NACKed with EIO.
    #[test]
    fn bus_fault_is_eio() {
        let (mut ch, hw) = setup(1);
        let mut f = Faults::new();
        let mut rel = 0;
        let c = submit(&mut ch, &hw, 0, &mut rel);
        hw.page_fault(0, 0x10_0000, false, 0, FaultCause::Bus);
        let e = serve(&mut ch, &mut f, &hw, 0, Ok(()));
        assert_eq!(e.answer, Answer::Nack(-EIO.to_errno()));
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| ());
        assert_eq!(ch.reap(c), Ok(Some((EIO.to_errno(), 0))));
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
