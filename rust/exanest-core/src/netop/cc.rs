// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The window of bytes in flight to one peer, over all the ops to it, and how congestion the
//! fabric reports moves it: DCTCP (RFC 8257) on the receiver's per-packet echoes.
//!
//! - **The cap.** At most `cap` bytes (the engine's window, near the link's bandwidth-delay
//!   product) are sent and not yet placed to one peer, however many ops run to it: a burst of
//!   ops is one flow to the fabric, not one flow per op.
//! - **Congestion.** A queue in the fabric past its marking threshold sets congestion
//!   experienced in the packets it holds ([`crate::packet::Header::ce`]); the receiver echoes
//!   it in the ACK ([`crate::packet::ECE`]). Over each round (a window's worth of bytes ACKed)
//!   the window keeps `alpha`, a moving average of the fraction of ACKs that echoed a mark
//!   (gain 1/16, starting at 1), and the first echo of a round cuts the window by
//!   `alpha / 2`; a round with no echo grows it by a packet, up to the cap. Senders to one
//!   receiver so keep its queue near the threshold, and share its link: equal rounds cut each
//!   by the same fraction.
//! - **Never stuck.** A peer with nothing in flight may always be sent a packet, whatever the
//!   window (it never drops below a packet).
//! - **Reads too.** Data a GET asks a peer for comes back through this node's own ingress: a
//!   second window per peer ([`Flow::Reads`]) bounds the bytes asked and not yet placed, and
//!   follows the marks the READ_RESP data arrives with (no echo needed: the requester sees
//!   them). Eight responders answering one requester so share its port as eight writers do.
//!
//! Loss is not congestion here: a packet lost on the link is recovered by the op
//! ([`super::SendOp`]) and leaves the window alone (a fabric that drops on congestion marks
//! first).

use crate::packet::MTU;

/// Which way the data of a window's ops flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// PUT, PUT_IMM, MAILBOX: this node sends the data to the peer.
    Writes,
    /// GET: the peer sends the data this node asked for.
    Reads,
}

/// The least the window shrinks to: one packet.
pub const MIN_WINDOW: u64 = MTU as u64;

/// The least cap: four packets.
pub const MIN_CAP: u64 = 4 * MTU as u64;

/// The most in flight to one peer: twice the bandwidth-delay product of a link of `bw_mbs`
/// (MB/s, bytes per microsecond) and round trip `rtt_ns`, at least [`MIN_CAP`], at most
/// `window` (the engine's register; also when the bandwidth is not known, 0). Twice, so that
/// the link stays busy while an ACK is late by a round trip; near it, so that eight senders
/// into one port start with a few caps queued, not eight windows (IRN's BDP cap). The round
/// trip is the fabric's with no queue, known from its make (IRN's is too), not measured: one
/// measured while the queue that the cap keeps short is long would raise the cap.
pub fn cap(window: u64, bw_mbs: u64, rtt_ns: u64) -> u64 {
    if bw_mbs == 0 {
        return window;
    }
    let bdp = bw_mbs.saturating_mul(rtt_ns) / 1000;
    bdp.saturating_mul(2).max(MIN_CAP).min(window)
}

/// `alpha`'s unit: 1 is `ALPHA_ONE`.
const ALPHA_ONE: u32 = 1 << 10;

/// DCTCP's gain `g`, as a shift: `alpha += (F - alpha) / 16`.
const GAIN_SHIFT: u32 = 4;

/// One peer's window (DCTCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The window, bytes; 0 until congestion first cut it: the cap.
    cwnd: u64,
    /// The fraction of ACKs that echoed a mark, moving average, in 1/[`ALPHA_ONE`].
    alpha: u32,
    /// Bytes ACKed in this round.
    round_bytes: u64,
    /// ACKs in this round, and those of them that echoed a mark.
    round_acks: u32,
    round_marked: u32,
    /// The window was cut in this round (once per round).
    cut: bool,
    /// Cuts, all rounds.
    cuts: u64,
}

impl Default for Window {
    fn default() -> Self {
        Self::new()
    }
}

impl Window {
    /// A window at its cap, that has seen no congestion.
    pub const fn new() -> Self {
        Window {
            cwnd: 0,
            alpha: ALPHA_ONE,
            round_bytes: 0,
            round_acks: 0,
            round_marked: 0,
            cut: false,
            cuts: 0,
        }
    }

    /// The window now, bytes: at most `cap`, at least [`MIN_WINDOW`].
    pub fn size(&self, cap: u64) -> u64 {
        let w = if self.cwnd == 0 {
            cap
        } else {
            self.cwnd.min(cap)
        };
        w.max(MIN_WINDOW)
    }

    /// How many of `want` more bytes may go to (or be asked from) the peer with `in_flight`
    /// bytes sent (asked) and not yet placed: whole `unit`s within the window, or one `unit`
    /// when nothing is in flight; at most `want`, 0 for none. A PUT's packet is its own unit
    /// (all or nothing); a GET's request may be cut to whole blocks.
    pub fn grant(&self, cap: u64, in_flight: u64, want: u64, unit: u64) -> u64 {
        let unit = unit.max(1);
        let room = self.size(cap).saturating_sub(in_flight) / unit * unit;
        let g = if in_flight == 0 { room.max(unit) } else { room };
        g.min(want)
    }

    /// Whether all `n` bytes may go now ([`Window::grant`] with `n` its own unit).
    pub fn admits(&self, cap: u64, in_flight: u64, n: u64) -> bool {
        n == 0 || self.grant(cap, in_flight, n, n) == n
    }

    /// An ACK that placed `bytes` more (0 for one that only maps blocks placed past a gap),
    /// echoing a mark or not. Returns whether it cut the window.
    pub fn on_ack(&mut self, cap: u64, bytes: u64, marked: bool) -> bool {
        let w = self.size(cap);
        let mut cut = false;
        self.round_acks = self.round_acks.saturating_add(1);
        self.round_bytes = self.round_bytes.saturating_add(bytes);
        if marked {
            self.round_marked = self.round_marked.saturating_add(1);
            if !self.cut {
                // The first echo of the round: cut by alpha / 2 (RFC 8257, 3.3).
                let by = w.saturating_mul(u64::from(self.alpha)) / u64::from(2 * ALPHA_ONE);
                self.cwnd = (w - by).max(MIN_WINDOW);
                self.cut = true;
                self.cuts += 1;
                cut = true;
            }
        }
        if self.round_bytes >= w {
            // The round's end: alpha follows the fraction marked; a quiet round grows the
            // window by a packet.
            let f = (u64::from(self.round_marked) * u64::from(ALPHA_ONE)
                / u64::from(self.round_acks.max(1))) as u32;
            self.alpha = self.alpha - (self.alpha >> GAIN_SHIFT) + (f >> GAIN_SHIFT);
            if self.round_marked == 0 && self.cwnd != 0 {
                self.cwnd = (self.size(cap) + MIN_WINDOW).min(cap);
            }
            self.round_bytes = 0;
            self.round_acks = 0;
            self.round_marked = 0;
            self.cut = false;
        }
        cut
    }

    /// DCTCP's `alpha`, in 1/1024.
    pub fn alpha(&self) -> u32 {
        self.alpha
    }

    /// Times congestion cut the window.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 64 << 10;

    /// A round of `acks` ACKs of a packet each, `marked` of them echoing a mark.
    fn round(w: &mut Window, acks: u32, marked: u32) {
        for i in 0..acks {
            w.on_ack(CAP, MTU as u64, i < marked);
        }
    }

    /// At the cap until marked; the first echo halves it (alpha starts at 1), once per round;
    /// quiet rounds grow it back a packet each, up to the cap and never past it.
    #[test]
    fn the_first_mark_halves_and_quiet_rounds_grow_it_back() {
        let mut w = Window::new();
        assert_eq!(w.size(CAP), CAP);
        assert!(!w.on_ack(CAP, MTU as u64, false));
        assert!(w.on_ack(CAP, MTU as u64, true), "the first echo cuts");
        assert_eq!(w.size(CAP), CAP / 2);
        assert!(!w.on_ack(CAP, MTU as u64, true), "once per round");
        assert_eq!(w.size(CAP), CAP / 2);
        // Finish the round quietly, then quiet rounds: a packet more each.
        round(&mut w, 16, 0);
        let after = w.size(CAP);
        round(&mut w, (after / MTU as u64) as u32, 0);
        assert_eq!(w.size(CAP), after + MTU as u64);
        for _ in 0..64 {
            let n = (w.size(CAP) / MTU as u64) as u32;
            round(&mut w, n, 0);
        }
        assert_eq!(w.size(CAP), CAP, "back to the cap, not past it");
        assert_eq!(w.cuts(), 1);
        // A smaller cap (the register written) holds at once.
        assert_eq!(w.size(16 << 10), 16 << 10);
    }

    /// alpha follows the fraction of ACKs marked: rounds with all marked keep it at 1 and halve
    /// the window each round, down to a packet; rounds with a tenth marked bring alpha near a
    /// tenth, so that a cut takes about 5 %.
    #[test]
    fn alpha_follows_the_fraction_marked() {
        let mut w = Window::new();
        for _ in 0..10 {
            let n = (w.size(CAP) / MTU as u64) as u32;
            round(&mut w, n, n);
        }
        assert_eq!(w.alpha(), ALPHA_ONE);
        assert_eq!(w.size(CAP), MIN_WINDOW, "never below a packet");
        let mut w = Window::new();
        for _ in 0..200 {
            // Ten ACKs a round, one marked: the window stays where a round is ten packets.
            let n = (w.size(CAP) / MTU as u64) as u32;
            round(&mut w, n.max(10), 1);
        }
        let a = w.alpha();
        assert!(
            (90..=115).contains(&a),
            "alpha {a} of 1024, a tenth expected"
        );
        let before = w.size(CAP);
        w.on_ack(CAP, 0, true);
        w.on_ack(CAP, 0, true);
        let after = w.size(CAP);
        assert!(
            after < before && before - after <= before / 16,
            "{before} -> {after}"
        );
    }

    /// The cap: twice the bandwidth-delay product, within four packets and the register.
    #[test]
    fn the_cap_is_near_the_bandwidth_delay_product() {
        assert_eq!(cap(CAP, 2000, 5_000), 20_000);
        assert_eq!(cap(CAP, 2000, 2_000), MIN_CAP, "four packets at least");
        assert_eq!(cap(CAP, 2000, 400_000), CAP, "the register at most");
        assert_eq!(cap(CAP, 0, 5_000), CAP, "no bandwidth: the register");
        assert_eq!(cap(CAP, u64::MAX, u64::MAX), CAP, "saturates");
    }

    /// A GET's request is cut to the whole blocks the window has room for; one block when
    /// nothing is in flight; all of it when it fits.
    #[test]
    fn a_request_is_granted_whole_blocks() {
        let mut w = Window::new();
        let b = MTU as u64;
        assert_eq!(w.grant(CAP, 0, 32 << 10, b), 32 << 10);
        assert_eq!(w.grant(CAP, CAP - 3 * b - 100, 32 << 10, b), 3 * b);
        assert_eq!(w.grant(CAP, CAP - 100, 32 << 10, b), 0);
        assert_eq!(w.grant(CAP, 0, 100, b), 100, "at most what is wanted");
        for _ in 0..20 {
            w.on_ack(CAP, 0, true);
            round(&mut w, 1, 1);
        }
        assert_eq!(
            w.grant(CAP, 0, 32 << 10, b),
            b,
            "a block when idle, however small"
        );
        assert_eq!(w.grant(CAP, 1, 32 << 10, b), 0);
    }

    /// The peer with nothing in flight is always sent a packet; otherwise the window holds.
    #[test]
    fn nothing_in_flight_always_admits_a_packet() {
        let mut w = Window::new();
        assert!(w.admits(CAP, 0, MTU as u64));
        assert!(w.admits(CAP, CAP - MTU as u64, MTU as u64));
        assert!(!w.admits(CAP, CAP - MTU as u64 + 1, MTU as u64));
        for _ in 0..20 {
            w.on_ack(CAP, 0, true);
            round(&mut w, 1, 1);
        }
        assert_eq!(w.size(CAP), MIN_WINDOW);
        assert!(w.admits(CAP, 0, MTU as u64));
        assert!(!w.admits(CAP, 1, MTU as u64));
        assert!(w.admits(0, 0, MTU as u64), "a cap of 0 is a packet");
        assert!(!w.admits(CAP, u64::MAX, 1), "saturates");
    }

    /// Eight senders through one marking queue (a fluid simulation: a step is a round trip,
    /// in which each sender has a window's worth of packets ACKed, all marked when the queue
    /// was past the threshold): the queue is the windows past the link's bandwidth-delay
    /// product. From unequal starts they converge to equal windows (Jain's index near 1), and
    /// the queue stays near the threshold instead of eight caps.
    #[test]
    fn senders_through_one_marking_queue_converge_to_equal_shares() {
        const BDP: u64 = 16 << 10;
        const K: u64 = 32 << 10;
        let mut ws = [Window::new(); 8];
        // Unequal starts: sender i was cut i times already.
        for (i, w) in ws.iter_mut().enumerate() {
            for _ in 0..i {
                w.on_ack(CAP, 0, true);
                let n = (w.size(CAP) / MTU as u64) as u32;
                round(w, n, 0);
            }
        }
        let mut peak = 0;
        for step in 0..2000 {
            let sizes: [u64; 8] = core::array::from_fn(|i| ws[i].size(CAP));
            let queue = sizes.iter().sum::<u64>().saturating_sub(BDP);
            if step > 500 {
                peak = peak.max(queue);
            }
            let marked = queue > K;
            for (w, size) in ws.iter_mut().zip(sizes) {
                let n = (size / MTU as u64) as u32;
                round(w, n, if marked { n } else { 0 });
            }
        }
        let sizes: [u64; 8] = core::array::from_fn(|i| ws[i].size(CAP));
        let sum: f64 = sizes.iter().map(|&s| s as f64).sum();
        let sq: f64 = sizes.iter().map(|&s| (s as f64) * (s as f64)).sum();
        let jain = sum * sum / (8.0 * sq);
        assert!(jain >= 0.95, "Jain {jain:.3}: {sizes:?}");
        assert!(
            peak <= K + 8 * 2 * MIN_WINDOW,
            "queue peak {peak} against threshold {K}: {sizes:?}"
        );
    }
}
