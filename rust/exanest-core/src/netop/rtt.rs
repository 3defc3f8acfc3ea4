// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The round trip to each peer, measured (RFC 6298), and the timeouts that follow from it: the
//! retransmission timeout, `SRTT + 4 * RTTVAR` within the floor and cap the caller sets, and the
//! tail-loss probe's, `2 * SRTT` (RFC 8985), doubled for each probe in a row found spurious
//! (its packet was late, not lost: the peer is not run for a while, as a guest whose vCPUs the
//! host does not schedule), back to `2 * SRTT` at the first one needed. Ops to one peer share what their ACKs measured, so
//! that a new op starts with the link's timeouts, not the first-timeout register's. The table
//! keeps each peer's congestion window too ([`super::cc::Window`]): the ops to a peer share it.
//!
//! Times are nanoseconds on whatever monotonic clock the caller uses.

use super::cc::{Flow, Window};

/// The clock granularity of RFC 6298's `max(G, 4 * RTTVAR)`: the least margin over `SRTT`.
pub const GRANULARITY_NS: u64 = 1_000;

/// Peers [`RttTable`] keeps; the least recently used one makes room for a new one.
pub const PEERS: usize = 64;

/// Doublings of the tail-loss probe's timeout at most (spurious probes in a row): 2 SRTT
/// times 1024, past any retransmission timeout but the longest, where the timeout takes over.
pub const PTO_SHIFT_MAX: u32 = 10;

/// One peer's round-trip estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rtt {
    /// Smoothed round trip; 0 before the first sample.
    srtt: u64,
    /// Its mean deviation.
    rttvar: u64,
    /// Samples taken.
    samples: u64,
    /// Tail-loss probes found spurious in a row (at most [`PTO_SHIFT_MAX`]): the probe's
    /// timeout doubles with each.
    pto_shift: u32,
    /// The peer NACKed FAULT the first bytes of the last op it answered first: its memory is
    /// cold, and the next ops send their first packet alone
    /// ([`super::SendParams::first_alone`]).
    cold: bool,
    /// The peer answered something ([`RttTable::answered`]).
    heard: bool,
}

impl Rtt {
    /// A sample of `ns` (one packet's send to the ACK that echoes it): RFC 6298, 2.2 and 2.3.
    pub fn sample(&mut self, ns: u64) {
        let ns = ns.max(1);
        if self.samples == 0 {
            self.srtt = ns;
            self.rttvar = ns / 2;
        } else {
            let dev = self.srtt.abs_diff(ns);
            self.rttvar = (self.rttvar - self.rttvar / 4).saturating_add(dev / 4);
            self.srtt = (self.srtt - self.srtt / 8).saturating_add(ns / 8);
        }
        self.samples += 1;
    }

    /// The smoothed round trip, if anything was measured.
    pub fn srtt(&self) -> Option<u64> {
        (self.samples > 0).then_some(self.srtt)
    }

    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The retransmission timeout: `SRTT + max(G, 4 * RTTVAR)`, at least `floor` (before any
    /// sample: `floor`, the first timeout) and at most `cap`.
    pub fn rto(&self, floor: u64, cap: u64) -> u64 {
        let est = match self.srtt() {
            Some(s) => s.saturating_add(self.rttvar.saturating_mul(4).max(GRANULARITY_NS)),
            None => 0,
        };
        est.max(floor).min(cap.max(floor))
    }

    /// The tail-loss probe's timeout: `2 * SRTT`, doubled for each spurious probe in a row
    /// ([`Rtt::probe_judged`]), below the retransmission timeout `rto`; 0 (no probe) before
    /// any sample, or when it would not come before the timeout.
    pub fn pto(&self, rto: u64) -> u64 {
        let p = self.srtt().map(|s| {
            s.saturating_mul(2)
                .max(GRANULARITY_NS)
                .saturating_mul(1 << self.pto_shift)
        });
        match p {
            Some(p) if p < rto => p,
            _ => 0,
        }
    }

    /// A tail-loss probe was judged ([`super::SendOp::take_probe_verdict`]): `spurious` (the
    /// packet it sent again was answered first) doubles the probe's timeout, up to
    /// [`PTO_SHIFT_MAX`] times; a needed one (a loss) takes it back to `2 * SRTT`.
    pub fn probe_judged(&mut self, spurious: bool) {
        self.pto_shift = if spurious {
            (self.pto_shift + 1).min(PTO_SHIFT_MAX)
        } else {
            0
        };
    }
}

/// The round trips to up to [`PEERS`] peers, by node, and their windows.
#[derive(Clone, Debug)]
pub struct RttTable {
    /// (node, last use, estimate, windows: writes, reads); a last use of 0 is a free entry.
    peers: [(u16, u64, Rtt, [Window; 2]); PEERS],
    /// The use count, for the least recently used entry.
    clock: u64,
}

impl Default for RttTable {
    fn default() -> Self {
        Self::new()
    }
}

impl RttTable {
    /// A table that has measured nothing.
    pub const fn new() -> Self {
        RttTable {
            peers: [(
                0,
                0,
                Rtt {
                    srtt: 0,
                    rttvar: 0,
                    samples: 0,
                    pto_shift: 0,
                    cold: false,
                    heard: false,
                },
                [Window::new(); 2],
            ); PEERS],
            clock: 0,
        }
    }

    /// What is known of `node`, if anything.
    pub fn get(&self, node: u16) -> Option<&Rtt> {
        self.peers
            .iter()
            .find(|(n, used, _, _)| *used != 0 && *n == node)
            .map(|(_, _, r, _)| r)
    }

    /// `node`'s entry, used now: a peer not in the table takes the entry of the one used least
    /// recently.
    fn entry(&mut self, node: u16) -> &mut (u16, u64, Rtt, [Window; 2]) {
        self.clock += 1;
        let clock = self.clock;
        let i = match self
            .peers
            .iter()
            .position(|(n, used, _, _)| *used != 0 && *n == node)
        {
            Some(i) => i,
            None => {
                let i = (0..PEERS).min_by_key(|&i| self.peers[i].1).unwrap_or(0);
                self.peers[i] = (node, 0, Rtt::default(), [Window::new(); 2]);
                i
            }
        };
        let e = &mut self.peers[i];
        e.1 = clock;
        e
    }

    /// A sample of the round trip to `node`.
    pub fn sample(&mut self, node: u16, ns: u64) {
        let r = &mut self.entry(node).2;
        r.sample(ns);
        r.heard = true;
    }

    /// `node` answered an op of this node with a NACK or RESUME (checked to be of an op in
    /// flight to it; its ACKs and GET data are heard through [`RttTable::on_ack`], which each
    /// of them calls already).
    pub fn answered(&mut self, node: u16) {
        self.entry(node).2.heard = true;
    }

    /// Whether `node` ever answered since the table was cleared (a peer the table forgot, as
    /// the least recently used of more than [`PEERS`], counts as never heard): an op to one
    /// that never did gives up sooner, with EHOSTUNREACH ([`super::SendParams::unheard_ns`]).
    pub fn heard(&self, node: u16) -> bool {
        self.get(node).is_some_and(|r| r.heard)
    }

    /// The first answer of an op to `node` ([`super::SendOp::take_first_verdict`]): `faulted`,
    /// a NACK FAULT of its first bytes, or not. The peer's next ops send their first packet
    /// alone after one that faulted, until one is placed without.
    pub fn first_answered(&mut self, node: u16, faulted: bool) {
        let r = &mut self.entry(node).2;
        r.cold = faulted;
        r.heard = true;
    }

    /// Whether an op to `node` sends its first packet alone ([`RttTable::first_answered`]).
    pub fn first_alone(&self, node: u16) -> bool {
        self.get(node).is_some_and(|r| r.cold)
    }

    /// A tail-loss probe to `node` was judged, `spurious` or needed ([`Rtt::probe_judged`]).
    pub fn probe_judged(&mut self, node: u16, spurious: bool) {
        self.entry(node).2.probe_judged(spurious);
    }

    /// `node`'s window for `flow` (a peer not in the table: at its cap).
    pub fn window(&self, node: u16, flow: Flow) -> Window {
        self.peers
            .iter()
            .find(|(n, used, _, _)| *used != 0 && *n == node)
            .map_or_else(Window::new, |e| e.3[flow as usize])
    }

    /// Bytes of `flow` placed (a PUT's ACK from `node`; a GET's data from it), `marked`
    /// congestion experienced or not ([`Window::on_ack`]): whether it cut the window. The
    /// peer is heard ([`RttTable::heard`]).
    pub fn on_ack(&mut self, node: u16, flow: Flow, cap: u64, bytes: u64, marked: bool) -> bool {
        let e = self.entry(node);
        e.2.heard = true;
        e.3[flow as usize].on_ack(cap, bytes, marked)
    }

    /// The retransmission and tail-loss probe timeouts of an op to `node`: (rto, pto), as
    /// [`Rtt::rto`] and [`Rtt::pto`].
    pub fn timeouts(&self, node: u16, floor: u64, cap: u64) -> (u64, u64) {
        let r = self.get(node).copied().unwrap_or_default();
        let rto = r.rto(floor, cap);
        (rto, r.pto(rto))
    }

    /// Forget every peer (the engine's reset).
    pub fn clear(&mut self) {
        *self = Self::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer whose memory faulted at an op's first packet gets its next ops' first packets
    /// alone, until one is placed; peers are apart.
    #[test]
    fn first_packets_alone_after_a_fault() {
        let mut t = RttTable::new();
        assert!(!t.first_alone(3), "a peer not seen");
        t.first_answered(3, true);
        assert!(t.first_alone(3) && !t.first_alone(4));
        t.sample(3, 1000);
        assert!(t.first_alone(3), "a round trip changes nothing");
        t.first_answered(3, false);
        assert!(!t.first_alone(3));
        t.clear();
        assert!(!t.first_alone(3));
    }

    /// A peer is heard once it answers anything, or a round trip to it is measured; a table
    /// cleared (the engine's reset) has heard nobody.
    #[test]
    fn peers_are_heard_once_they_answer() {
        let mut t = RttTable::new();
        assert!(!t.heard(3));
        t.answered(3);
        assert!(t.heard(3) && !t.heard(4));
        t.sample(4, 1000);
        t.first_answered(5, true);
        assert!(t.heard(4) && t.heard(5));
        t.on_ack(6, Flow::Reads, 1 << 20, 4096, false);
        assert!(t.heard(6));
        t.clear();
        assert!(!t.heard(3) && !t.heard(4) && !t.heard(5) && !t.heard(6));
    }

    /// Spurious tail-loss probes in a row double the probe's timeout, up to where the
    /// retransmission timeout takes over; a needed one takes it back to two round trips.
    #[test]
    fn spurious_probes_lengthen_the_probe_timeout() {
        let mut t = RttTable::new();
        t.sample(3, 100_000);
        let rto = 10_000_000;
        assert_eq!(t.timeouts(3, rto, u64::MAX), (rto, 200_000));
        t.probe_judged(3, true);
        assert_eq!(t.timeouts(3, rto, u64::MAX).1, 400_000);
        for _ in 0..4 {
            t.probe_judged(3, true);
        }
        assert_eq!(t.timeouts(3, rto, u64::MAX).1, 6_400_000);
        t.probe_judged(3, true);
        assert_eq!(
            t.timeouts(3, rto, u64::MAX).1,
            0,
            "past the timeout: no probe"
        );
        // Another peer's probes are its own.
        t.sample(4, 100_000);
        assert_eq!(t.timeouts(4, rto, u64::MAX).1, 200_000);
        t.probe_judged(3, false);
        assert_eq!(
            t.timeouts(3, rto, u64::MAX).1,
            200_000,
            "a loss: quick again"
        );
        // The doubling stops at PTO_SHIFT_MAX, never overflows.
        for _ in 0..100 {
            t.probe_judged(3, true);
        }
        assert_eq!(
            t.get(3).map(|r| r.pto(u64::MAX)),
            Some(200_000 << PTO_SHIFT_MAX)
        );
    }

    /// RFC 6298's arithmetic: the first sample sets SRTT and RTTVAR = R/2; later ones move
    /// them by 1/8 and 1/4; the timeout is SRTT + 4 RTTVAR within its floor and cap.
    #[test]
    fn rfc6298_estimate() {
        let mut r = Rtt::default();
        assert_eq!(
            (r.srtt(), r.rto(10_000, 1 << 40), r.pto(10_000)),
            (None, 10_000, 0)
        );
        r.sample(100_000);
        assert_eq!(r.srtt(), Some(100_000));
        assert_eq!(r.rto(1, u64::MAX), 100_000 + 4 * 50_000);
        r.sample(200_000);
        // RTTVAR = 3/4 * 50000 + 1/4 * |100000 - 200000|; SRTT = 7/8 * 100000 + 1/8 * 200000.
        assert_eq!(r.srtt(), Some(112_500));
        assert_eq!(r.rto(1, u64::MAX), 112_500 + 4 * 62_500);
        assert_eq!(r.rto(1_000_000, u64::MAX), 1_000_000, "the floor");
        assert_eq!(r.rto(1, 300_000), 300_000, "the cap");
        assert_eq!(r.pto(r.rto(1, u64::MAX)), 225_000);
        assert_eq!(r.pto(200_000), 0, "no probe after the timeout");
        // A steady round trip: RTTVAR decays, the timeout comes down to SRTT + G.
        for _ in 0..200 {
            r.sample(10_000);
        }
        assert!(
            r.srtt().is_some_and(|s| (10_000..10_008).contains(&s)),
            "{r:?}"
        );
        assert!(r.rto(1, u64::MAX) <= 10_008 + 4 * GRANULARITY_NS);
        assert!(r.rto(1, u64::MAX) >= 10_000 + GRANULARITY_NS);
        // Huge samples saturate, never wrap.
        r.sample(u64::MAX);
        r.sample(u64::MAX);
        assert!(r.rto(1, u64::MAX) >= r.srtt().unwrap());
    }

    /// Peers are kept apart; a new peer past [`PEERS`] takes the least recently used entry.
    #[test]
    fn table_per_peer_least_recently_used() {
        let mut t = RttTable::new();
        assert_eq!(t.timeouts(3, 10_000, 1 << 30), (10_000, 0));
        t.sample(3, 4_000);
        t.sample(9, 400_000);
        assert_eq!(t.get(3).and_then(Rtt::srtt), Some(4_000));
        assert_eq!(t.get(9).and_then(Rtt::srtt), Some(400_000));
        assert_eq!(t.timeouts(3, 10_000, 1 << 30), (12_000, 8_000));
        assert_eq!(t.timeouts(9, 10_000, 1 << 30), (1_200_000, 800_000));
        // Fill the table: node 3, used again, stays; node 9, the oldest, goes.
        for n in 100..100 + PEERS as u16 - 2 {
            t.sample(n, 1_000);
        }
        t.sample(3, 4_000);
        t.sample(500, 1_000);
        assert!(t.get(9).is_none());
        assert_eq!(t.get(3).map(Rtt::samples), Some(2));
        assert_eq!(t.get(500).map(Rtt::samples), Some(1));
        // Windows are per peer and go with their entry.
        assert_eq!(t.window(3, Flow::Writes).size(64 << 10), 64 << 10);
        assert!(t.on_ack(3, Flow::Writes, 64 << 10, 4096, true));
        assert_eq!(t.window(3, Flow::Writes).size(64 << 10), 32 << 10);
        assert_eq!(
            t.window(3, Flow::Reads).size(64 << 10),
            64 << 10,
            "reads: their own"
        );
        assert!(t.on_ack(3, Flow::Reads, 64 << 10, 4096, true));
        assert_eq!(t.window(3, Flow::Reads).size(64 << 10), 32 << 10);
        assert_eq!(t.window(500, Flow::Writes).size(64 << 10), 64 << 10);
        assert_eq!(t.get(3).map(Rtt::samples), Some(2), "the estimate stays");
        t.clear();
        assert!(t.get(3).is_none());
        assert_eq!(t.window(3, Flow::Writes).size(64 << 10), 64 << 10);
    }
}
