// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The one fault state machine of an engine context's channels, for every origin of a fault:
//! a copy of the COPY path, a transfer of the user-level queue, and a receiver fault of a
//! remote op. It decides; the driver reads the registers, resolves, and writes the answer.
//!
//! Per engine channel, a fault goes through four steps:
//!
//! 1. [`FaultTable::detected`]: the interrupt saw the channel in fault-wait. It is stamped
//!    and marked pending for the fault thread. A second report of a fault already being
//!    served changes nothing.
//! 2. [`FaultTable::take_pending`] and [`FaultTable::begin`]: the fault thread takes it (it
//!    reads the channel's report, and finds it in fault-wait), and notes when it first did
//!    (how long it waited, `Latency::queue`, is recorded once it is answered: the engine
//!    does not wait for the recording). It is counted (`faults`) here, once however often it is taken: a
//!    detection is not a fault until the channel's report confirms it, so the driver need not
//!    read the channel's state again when it notes an interrupt (another server may have
//!    answered the fault since; then the channel is not taken and [`FaultTable::end`] forgets
//!    the detection). A fault found without its interrupt (lost, or a RESUME the engine did
//!    not take) is stamped here.
//! 3. The driver resolves it (no lock held), then [`FaultTable::decide`] turns the result into
//!    an [`Answer`]: RESUME when resolved, unless the same transfer keeps faulting at the same
//!    address ([`MAX_REFAULTS`], then NACK with EFAULT); NACK with EIO for a fault that is not
//!    a missing translation; NACK with the resolver's errno otherwise. It records the whole
//!    service time (`Latency::total`) and the counters (`faults_resolved`, `retransmissions`,
//!    `nacks`).
//! 4. [`FaultTable::end`]: the answer was written, or the channel no longer held the fault.
//!
//! Between 1 and 4 the channel is *in service* ([`FaultTable::in_service`]): the process
//! keeps its context, so the answer reaches the channel that holds the fault.
//!
//! Times are nanoseconds of one monotonic clock, passed in by the caller; the histograms are
//! in microseconds.

use super::abi::{Counters, Latency};
use super::regs::FaultCause;

/// Most channels a table tracks (the register map's channels per context).
pub const MAX_CHANNELS: usize = super::regs::MAX_CHANNELS;

/// A fault that keeps coming back at the same address of the same transfer after being
/// resolved is NACKed with EFAULT at its `MAX_REFAULTS + 1`-th report.
pub const MAX_REFAULTS: u32 = 8;

/// Linux errno numbers the state machine answers with (asm-generic numbering).
pub const EIO: i32 = 5;
/// See [`EIO`].
pub const EFAULT: i32 = 14;

/// Where the transfer a channel holds came from, as its ORIGIN register says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Started by registers (START) on this very channel: a copy on the context's channel of
    /// the same number (engines without a kernel queue).
    Start,
    /// A descriptor of the context's kernel queue: a copy in slot `slot` (its WRID).
    Kernel {
        /// The kernel queue slot (the copy's channel as the COPY path numbers them).
        slot: u32,
    },
    /// A descriptor of the user-level queue, at SQ index `index` modulo 2^16.
    Queue {
        /// The SQ index.
        index: u32,
    },
    /// A receiver fault of a remote op, reported on an idle channel.
    NetRx {
        /// The sending node.
        src: u32,
        /// The sender's op id.
        opid: u32,
    },
}

/// A fault's origin, as the driver identifies it: the [`Source`] with what makes one transfer
/// distinct from the next on the same channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A copy of the COPY path, on its channel (slot), by cookie.
    Copy {
        /// The channel or kernel queue slot the copy runs on.
        slot: u32,
        /// The copy's cookie.
        cookie: u64,
    },
    /// A user-level queue transfer, by SQ index.
    Queue {
        /// The SQ index, modulo 2^16.
        index: u32,
    },
    /// A receiver fault, by sender and op id.
    NetRx {
        /// The sending node.
        src: u32,
        /// The sender's op id.
        opid: u32,
    },
}

/// What ends a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Retransmit from the faulting offset.
    Resume,
    /// End the transfer with this (positive) errno.
    Nack(i32),
}

/// The state of one channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chan {
    /// When the fault was first seen; `Some` while it is in service.
    seen: Option<u64>,
    /// Whether the fault in service was taken (and counted) already.
    counted: bool,
    /// When the fault in service was first taken.
    taken: Option<u64>,
    /// The last fault decided on this channel, and how often in a row it was the same.
    last: Option<(Origin, u64, u32)>,
}

/// The faults of one context's channels (up to 32).
#[derive(Clone, Debug)]
pub struct FaultTable<const N: usize> {
    ch: [Chan; N],
    /// Channels detected in fault-wait that the fault thread has not taken yet.
    pending: u32,
}

impl<const N: usize> Default for FaultTable<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> FaultTable<N> {
    /// A table with no fault.
    pub const fn new() -> Self {
        FaultTable {
            ch: [Chan {
                seen: None,
                counted: false,
                taken: None,
                last: None,
            }; N],
            pending: 0,
        }
    }

    /// Step 1: the interrupt found channel `n` in fault-wait at `now`. Returns true when it is
    /// new (the fault thread must run); a fault already in service changes nothing. It is
    /// counted when taken ([`FaultTable::begin`]).
    pub fn detected(&mut self, n: u32, now: u64) -> bool {
        let Some(c) = self.ch.get_mut(n as usize) else {
            return false;
        };
        if c.seen.is_some() {
            return false;
        }
        c.seen = Some(now);
        self.pending |= 1 << n;
        true
    }

    /// Step 2: the channels the fault thread must look at: those detected, and every one in
    /// `also` (when reports may have been lost).
    pub fn take_pending(&mut self, also: u32) -> u32 {
        core::mem::take(&mut self.pending) | also
    }

    /// Step 2: the fault thread took channel `n`'s fault at `now`: the fault is counted the
    /// first time it is taken, and how long it waited until then (`Latency::queue`) is
    /// recorded once it is answered ([`FaultTable::answered`]). A fault not detected before
    /// (its interrupt was lost) is stamped now.
    pub fn begin(&mut self, n: u32, now: u64, k: &mut Counters) {
        let Some(c) = self.ch.get_mut(n as usize) else {
            return;
        };
        if c.seen.is_none() {
            c.seen = Some(now);
        }
        if !c.counted {
            c.counted = true;
            c.taken = Some(now);
            k.faults += 1;
        }
    }

    /// Step 2 again: channel `n`'s fault, taken by a server that could not finish it without
    /// sleeping (an interrupt thread), goes back to the fault thread: still detected (its
    /// first report's time is kept, it is not counted again), and pending.
    pub fn defer(&mut self, n: u32) {
        if self.ch.get(n as usize).is_some_and(|c| c.seen.is_some()) {
            self.pending |= 1 << n;
        }
    }

    /// Step 3: the fault thread resolved channel `n`'s fault of `origin` at `addr` with
    /// `resolved` (`Err`: a positive errno); `cause` is what the engine reported. Returns the
    /// answer to write; [`FaultTable::answered`] counts it once it is written (the engine
    /// does not wait for the counting).
    pub fn decide(
        &mut self,
        n: u32,
        f: (Origin, u64, FaultCause),
        resolved: Result<(), i32>,
    ) -> Answer {
        let (origin, addr, cause) = f;
        let Some(c) = self.ch.get_mut(n as usize) else {
            return Answer::Nack(EIO);
        };
        let count = match c.last {
            Some((o, a, count)) if o == origin && a == addr => count.saturating_add(1),
            _ => 1,
        };
        c.last = Some((origin, addr, count));
        match (cause, resolved) {
            (FaultCause::Bus | FaultCause::Unknown(_), _) => Answer::Nack(EIO),
            (FaultCause::Translation, Ok(())) if count > MAX_REFAULTS => Answer::Nack(EFAULT),
            (FaultCause::Translation, Ok(())) => Answer::Resume,
            (FaultCause::Translation, Err(e)) => Answer::Nack(e),
        }
    }

    /// Step 3, counted: channel `n`'s fault got `answer` ([`FaultTable::decide`]'s), written
    /// at `now`; it took `Latency::total` from its first sight, of which `Latency::queue`
    /// until it was first taken.
    pub fn answered(
        &mut self,
        n: u32,
        answer: Answer,
        now: u64,
        k: &mut Counters,
        lat: &mut Latency,
    ) {
        let Some(c) = self.ch.get(n as usize) else {
            return;
        };
        if let Some(t) = c.seen {
            lat.total.record(now.saturating_sub(t) / 1000);
            if let Some(taken) = c.taken {
                lat.queue.record(taken.saturating_sub(t) / 1000);
            }
        }
        match answer {
            Answer::Resume => {
                k.faults_resolved += 1;
                k.retransmissions += 1;
            }
            Answer::Nack(_) => k.nacks += 1,
        }
    }

    /// When channel `n`'s fault in service was first seen (detected, or taken without its
    /// interrupt).
    pub fn seen(&self, n: u32) -> Option<u64> {
        self.ch.get(n as usize)?.seen
    }

    /// Step 4: channel `n`'s fault ended (answered, or the channel no longer holds it). A new
    /// report of the channel is a new fault.
    pub fn end(&mut self, n: u32) {
        if let Some(c) = self.ch.get_mut(n as usize) {
            c.seen = None;
            c.counted = false;
            c.taken = None;
        }
        self.pending &= !1u32.checked_shl(n).unwrap_or(0);
    }

    /// Whether a fault is detected or being served: the process keeps its context meanwhile.
    pub fn in_service(&self) -> bool {
        self.pending != 0 || self.ch.iter().any(|c| c.seen.is_some())
    }

    /// Forget every fault (the context was reset or given up): nothing is in service.
    pub fn clear(&mut self) {
        *self = Self::new();
    }
}

#[cfg(test)]
mod tests {
    use super::super::abi::Histogram;
    use super::*;

    type T = FaultTable<4>;

    const COPY: Origin = Origin::Copy { slot: 1, cookie: 7 };
    const RX: Origin = Origin::NetRx { src: 3, opid: 9 };

    fn serve(
        t: &mut T,
        n: u32,
        o: Origin,
        addr: u64,
        r: Result<(), i32>,
        c: &mut Counters,
    ) -> Answer {
        let mut lat = Latency::default();
        t.begin(n, 10, c);
        let a = t.decide(n, (o, addr, FaultCause::Translation), r);
        t.answered(n, a, 20, c, &mut lat);
        t.end(n);
        a
    }

    /// A detected fault is pending once, counted once, and in service until it ends.
    #[test]
    fn detect_take_decide_end() {
        let (mut t, mut k, mut lat) = (T::new(), Counters::default(), Latency::default());
        assert!(!t.in_service());
        assert!(t.detected(2, 100_000));
        assert_eq!(t.seen(2), Some(100_000));
        assert!(!t.detected(2, 150_000), "a second report of the same fault");
        assert_eq!(k.faults, 0, "counted when taken");
        assert!(t.in_service());
        assert_eq!(t.take_pending(0), 1 << 2);
        assert_eq!(t.take_pending(0), 0);
        assert!(t.in_service(), "taken, not answered");
        t.begin(2, 164_000, &mut k);
        assert_eq!(k.faults, 1);
        // Taken again (handed back by a server that could not finish it): its wait ends at
        // its first take.
        t.begin(2, 250_000, &mut k);
        assert_eq!(k.faults, 1);
        let a = t.decide(2, (COPY, 0x1000, FaultCause::Translation), Ok(()));
        assert_eq!(a, Answer::Resume);
        assert_eq!(
            (
                k.faults_resolved,
                lat.total.buckets.iter().sum::<u64>(),
                lat.queue.buckets.iter().sum::<u64>()
            ),
            (0, 0, 0),
            "recorded once answered"
        );
        t.answered(2, a, 300_000, &mut k, &mut lat);
        assert_eq!(lat.total.buckets[Histogram::bucket(200)], 1);
        assert_eq!(lat.queue.buckets[Histogram::bucket(64)], 1);
        assert_eq!(lat.queue.buckets.iter().sum::<u64>(), 1);
        assert_eq!((k.faults_resolved, k.retransmissions, k.nacks), (1, 1, 0));
        assert!(t.in_service(), "decided, not yet written");
        t.end(2);
        assert!(!t.in_service());
        assert_eq!(t.seen(2), None);
        assert!(t.detected(2, 400_000), "the next fault is new");
    }

    /// A fault handed back by a server that could not finish it is pending again, keeps its
    /// first report's time and is counted once; one not in service is not made pending.
    #[test]
    fn deferred_fault_is_pending_again_and_counted_once() {
        let (mut t, mut k) = (T::new(), Counters::default());
        assert!(t.detected(3, 1_000));
        assert_eq!(t.take_pending(0), 1 << 3);
        t.begin(3, 2_000, &mut k);
        t.defer(3);
        assert_eq!(t.take_pending(0), 1 << 3);
        t.begin(3, 9_000, &mut k);
        assert_eq!((k.faults, t.seen(3)), (1, Some(1_000)));
        t.end(3);
        t.defer(3);
        t.defer(40);
        assert_eq!(t.take_pending(0), 0);
        assert!(!t.in_service());
    }

    /// A detection whose channel no longer holds the fault when the thread looks (another
    /// server answered it meanwhile) is forgotten, not counted; the channel's next fault is.
    #[test]
    fn detection_answered_elsewhere_is_not_counted() {
        let (mut t, mut k) = (T::new(), Counters::default());
        assert!(t.detected(3, 1_000));
        assert_eq!(t.take_pending(0), 1 << 3);
        // The channel's report says it is not in fault-wait: not taken.
        t.end(3);
        assert_eq!(k.faults, 0);
        assert!(!t.in_service());
        assert!(t.detected(3, 2_000));
        t.begin(3, 3_000, &mut k);
        t.end(3);
        t.begin(3, 4_000, &mut k);
        assert_eq!(
            k.faults, 2,
            "a fault taken after the last one ended is a new one"
        );
    }

    /// A fault found without its interrupt is counted when taken.
    #[test]
    fn lost_report_counted_at_begin() {
        let (mut t, mut k) = (T::new(), Counters::default());
        assert_eq!(t.take_pending(0b1010), 0b1010);
        t.begin(1, 5, &mut k);
        assert_eq!(k.faults, 1);
        assert!(t.in_service());
        assert!(!t.detected(1, 6), "in service already");
        assert_eq!(k.faults, 1);
    }

    /// Resolver errors NACK with their errno, other causes with EIO whatever the resolver says.
    #[test]
    fn nack_errnos() {
        let (mut t, mut k, mut lat) = (T::new(), Counters::default(), Latency::default());
        assert_eq!(
            serve(&mut t, 0, RX, 0x2000, Err(13), &mut k),
            Answer::Nack(13)
        );
        t.begin(0, 0, &mut k);
        let a = t.decide(0, (RX, 0x3000, FaultCause::Bus), Ok(()));
        assert_eq!(a, Answer::Nack(EIO));
        t.answered(0, a, 1, &mut k, &mut lat);
        let a = t.decide(0, (RX, 0x3000, FaultCause::Unknown(3)), Err(12));
        assert_eq!(a, Answer::Nack(EIO));
        t.answered(0, a, 1, &mut k, &mut lat);
        assert_eq!(k.nacks, 3);
        assert_eq!(k.faults_resolved, 0);
    }

    /// The same transfer faulting at the same address after every resolution is NACKed with
    /// EFAULT at the limit, for every origin.
    #[test]
    fn refault_limit_for_every_origin() {
        let origins = [COPY, Origin::Queue { index: 5 }, RX];
        for o in origins {
            let (mut t, mut k) = (T::new(), Counters::default());
            for i in 0..MAX_REFAULTS {
                assert_eq!(
                    serve(&mut t, 3, o, 0x5000, Ok(()), &mut k),
                    Answer::Resume,
                    "{o:?} {i}"
                );
            }
            assert_eq!(
                serve(&mut t, 3, o, 0x5000, Ok(()), &mut k),
                Answer::Nack(EFAULT)
            );
            assert_eq!((k.faults_resolved, k.nacks), (u64::from(MAX_REFAULTS), 1));
        }
    }

    /// Progress resets the count: another address, another transfer, or another op.
    #[test]
    fn refaults_count_one_transfer_at_one_address() {
        let (mut t, mut k) = (T::new(), Counters::default());
        for i in 0..3 * MAX_REFAULTS {
            // Alternating addresses: never the same twice in a row.
            let a = 0x1000 * u64::from(i % 2 + 1);
            assert_eq!(serve(&mut t, 0, COPY, a, Ok(()), &mut k), Answer::Resume);
        }
        for cookie in 0..3 * u64::from(MAX_REFAULTS) {
            let o = Origin::Copy { slot: 1, cookie };
            assert_eq!(serve(&mut t, 0, o, 0x1000, Ok(()), &mut k), Answer::Resume);
        }
        for opid in 0..3 * MAX_REFAULTS {
            let o = Origin::NetRx { src: 1, opid };
            assert_eq!(serve(&mut t, 0, o, 0x1000, Ok(()), &mut k), Answer::Resume);
        }
        // Channels count apart.
        for _ in 0..MAX_REFAULTS {
            assert_eq!(serve(&mut t, 1, RX, 0x1000, Ok(()), &mut k), Answer::Resume);
            assert_eq!(serve(&mut t, 2, RX, 0x1000, Ok(()), &mut k), Answer::Resume);
        }
        assert_eq!(k.nacks, 0);
    }

    /// Channels beyond the table are refused, not a panic; clear forgets everything.
    #[test]
    fn out_of_range_and_clear() {
        let (mut t, mut k, mut lat) = (T::new(), Counters::default(), Latency::default());
        assert!(!t.detected(4, 0));
        t.begin(9, 0, &mut k);
        let a = t.decide(9, (RX, 0, FaultCause::Translation), Ok(()));
        assert_eq!(a, Answer::Nack(EIO));
        t.answered(9, a, 0, &mut k, &mut lat);
        assert_eq!(k.nacks, 0, "a channel beyond the table counts nothing");
        t.end(31);
        assert!(t.detected(0, 0));
        assert!(t.in_service());
        t.clear();
        assert!(!t.in_service());
        assert_eq!(t.take_pending(0), 0);
    }
}
