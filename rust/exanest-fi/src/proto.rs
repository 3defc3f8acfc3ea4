// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The provider's wire protocol and its matching, in plain Rust (the host tests run them): what
//! an endpoint puts in a mailbox message, and which posted receive a message goes to.
//!
//! Every message between endpoints is one mailbox message (at most 256 bytes, delivered in
//! order per sender and reliably by the engine, Documentation/network.rst), a 24-byte header
//! then a body:
//!
//! - **EAGER**: the message's bytes (at most [`EAGER_MAX`]);
//! - **RTS** (rendezvous, larger messages): where the receiver reads it from, the sender's
//!   buffer registered for remote reads by this receiver's node only: address, rkey and the
//!   sender's cookie. The receiver, once a receive matches, gets the bytes straight into the
//!   receive buffer (zero copy, pages faulted in on demand on both sides) and answers
//!   **FIN** with the cookie and a status; the sender then completes the send.
//!
//! Matching follows fi_msg(3) and fi_tagged(3): receives are matched in the order they were
//! posted, messages in the order they arrived; a tagged receive takes a tagged message whose
//! tag equals its tag in the bits `ignore` leaves, from its source when it names one
//! (`FI_DIRECTED_RECV`).

use std::collections::VecDeque;

/// The mailbox's largest message.
pub const MBOX_MAX: usize = 256;
/// Bytes of the header.
pub const HDR: usize = 24;
/// The largest message sent eagerly, in one mailbox message.
pub const EAGER_MAX: usize = MBOX_MAX - HDR;
/// Bytes of an RTS's body.
pub const RTS_BODY: usize = 24;

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The message's bytes follow.
    Eager = 1,
    /// Ready to send: the receiver reads the message from the sender's buffer.
    Rts = 2,
    /// The receiver has read a rendezvous message (or failed to): the sender may complete.
    Fin = 3,
}

/// The header's flag: a tagged message (`fi_tsend`).
pub const F_TAGGED: u8 = 1;
/// The header's flag: remote CQ data (`fi_senddata`).
pub const F_DATA: u8 = 2;

/// A message's header: kind, flags, the message's length, its tag and its remote CQ data (for
/// FIN: `tag` is the sender's cookie and `len` the status, 0 or a positive errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What it is.
    pub kind: Kind,
    /// `F_*`.
    pub flags: u8,
    /// The message's length.
    pub len: u32,
    /// The tag (or FIN's cookie).
    pub tag: u64,
    /// Remote CQ data.
    pub data: u64,
}

impl Header {
    /// The header's bytes, little-endian.
    pub fn encode(&self) -> [u8; HDR] {
        let mut b = [0; HDR];
        b[0] = self.kind as u8;
        b[1] = self.flags;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..24].copy_from_slice(&self.data.to_le_bytes());
        b
    }

    /// The header of a received message, or None for one no endpoint of ours sent (too short,
    /// an unknown kind, reserved bytes set, or an EAGER whose length is not its body's).
    pub fn decode(m: &[u8]) -> Option<Header> {
        if m.len() < HDR || m[2] != 0 || m[3] != 0 || m[1] & !(F_TAGGED | F_DATA) != 0 {
            return None;
        }
        let kind = match m[0] {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Fin,
            _ => return None,
        };
        let h = Header {
            kind,
            flags: m[1],
            len: u32::from_le_bytes(m[4..8].try_into().ok()?),
            tag: u64::from_le_bytes(m[8..16].try_into().ok()?),
            data: u64::from_le_bytes(m[16..24].try_into().ok()?),
        };
        let ok = match kind {
            Kind::Eager => m.len() - HDR == h.len as usize,
            Kind::Rts => m.len() == HDR + RTS_BODY && h.len as usize > EAGER_MAX,
            Kind::Fin => m.len() == HDR,
        };
        ok.then_some(h)
    }

    /// Whether it is tagged.
    pub fn tagged(&self) -> bool {
        self.flags & F_TAGGED != 0
    }
}

/// An RTS's body: where the receiver reads the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rts {
    /// The sender's buffer.
    pub addr: u64,
    /// Its rkey (bound to the receiver's node).
    pub rkey: u64,
    /// The sender's cookie, for FIN.
    pub cookie: u64,
}

impl Rts {
    /// The body's bytes.
    pub fn encode(&self) -> [u8; RTS_BODY] {
        let mut b = [0; RTS_BODY];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..16].copy_from_slice(&self.rkey.to_le_bytes());
        b[16..24].copy_from_slice(&self.cookie.to_le_bytes());
        b
    }

    /// The body of a received RTS (after its header).
    pub fn decode(b: &[u8]) -> Option<Rts> {
        if b.len() != RTS_BODY {
            return None;
        }
        Some(Rts {
            addr: u64::from_le_bytes(b[0..8].try_into().ok()?),
            rkey: u64::from_le_bytes(b[8..16].try_into().ok()?),
            cookie: u64::from_le_bytes(b[16..24].try_into().ok()?),
        })
    }
}

/// An endpoint's address: its engine's node and its endpoint there.
pub type Addr = (u32, u32);

/// A posted receive, as matching sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posted<T> {
    /// A tagged receive (`fi_trecv`).
    pub tagged: bool,
    /// Only from this source (`FI_DIRECTED_RECV`), or from any.
    pub src: Option<Addr>,
    /// The tag.
    pub tag: u64,
    /// Tag bits that need not match.
    pub ignore: u64,
    /// What the endpoint keeps with it (the buffer, the context...).
    pub op: T,
}

/// A message that came before its receive, as matching sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrived<U> {
    /// Its source.
    pub src: Addr,
    /// Its header.
    pub hdr: Header,
    /// What the endpoint keeps with it (the bytes, or the RTS).
    pub body: U,
}

fn fits<T>(p: &Posted<T>, src: Addr, hdr: &Header) -> bool {
    p.tagged == hdr.tagged()
        && p.src.is_none_or(|s| s == src)
        && (!p.tagged || (p.tag ^ hdr.tag) & !p.ignore == 0)
}

/// The receives posted and the messages arrived that no receive took yet.
#[derive(Debug)]
pub struct Matcher<T, U> {
    posted: VecDeque<Posted<T>>,
    arrived: VecDeque<Arrived<U>>,
}

impl<T, U> Default for Matcher<T, U> {
    fn default() -> Self {
        Matcher {
            posted: VecDeque::new(),
            arrived: VecDeque::new(),
        }
    }
}

impl<T, U> Matcher<T, U> {
    /// A message arrived: the first posted receive it fits, taken; or None, and the message is
    /// kept for a later receive.
    pub fn arrive(&mut self, src: Addr, hdr: Header, body: U) -> Option<(Posted<T>, Arrived<U>)> {
        let a = Arrived { src, hdr, body };
        match self.posted.iter().position(|p| fits(p, src, &a.hdr)) {
            Some(i) => Some((self.posted.remove(i)?, a)),
            None => {
                self.arrived.push_back(a);
                None
            }
        }
    }

    /// A receive posted: the first message that arrived before and fits it, taken; or None,
    /// and the receive waits.
    pub fn post(&mut self, p: Posted<T>) -> Option<(Posted<T>, Arrived<U>)> {
        match self.arrived.iter().position(|a| fits(&p, a.src, &a.hdr)) {
            Some(i) => {
                let a = self.arrived.remove(i)?;
                Some((p, a))
            }
            None => {
                self.posted.push_back(p);
                None
            }
        }
    }

    /// `FI_PEEK`: the first arrived message that would fit `p`, left in place.
    pub fn peek(&self, p: &Posted<T>) -> Option<&Arrived<U>> {
        self.arrived.iter().find(|a| fits(p, a.src, &a.hdr))
    }

    /// `FI_CLAIM` after a peek, or a receive that must not wait: the first arrived message
    /// that fits `p`, taken.
    pub fn take_arrived(&mut self, p: &Posted<T>) -> Option<Arrived<U>> {
        let i = self.arrived.iter().position(|a| fits(p, a.src, &a.hdr))?;
        self.arrived.remove(i)
    }

    /// `fi_cancel`: the first posted receive for which `is` holds, taken.
    pub fn cancel(&mut self, is: impl Fn(&T) -> bool) -> Option<Posted<T>> {
        let i = self.posted.iter().position(|p| is(&p.op))?;
        self.posted.remove(i)
    }

    /// Receives posted and waiting.
    pub fn posted(&self) -> usize {
        self.posted.len()
    }

    /// Messages arrived and waiting.
    pub fn arrived(&self) -> usize {
        self.arrived.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eager(tag: u64, tagged: bool, len: u32) -> Header {
        Header {
            kind: Kind::Eager,
            flags: if tagged { F_TAGGED } else { 0 },
            len,
            tag,
            data: 0,
        }
    }

    fn recv(tagged: bool, src: Option<Addr>, tag: u64, ignore: u64, id: u32) -> Posted<u32> {
        Posted {
            tagged,
            src,
            tag,
            ignore,
            op: id,
        }
    }

    #[test]
    fn headers_round_trip_and_reject_what_we_never_send() {
        let h = Header {
            kind: Kind::Eager,
            flags: F_TAGGED | F_DATA,
            len: 3,
            tag: 1 << 63,
            data: 7,
        };
        let mut m = h.encode().to_vec();
        m.extend_from_slice(b"abc");
        assert_eq!(Header::decode(&m), Some(h));
        // A length that is not the body's, a short message, unknown kinds and flags.
        assert_eq!(Header::decode(&m[..HDR + 2]), None);
        assert_eq!(Header::decode(&m[..HDR - 1]), None);
        let mut bad = m.clone();
        bad[0] = 9;
        assert_eq!(Header::decode(&bad), None);
        bad = m.clone();
        bad[1] = 4;
        assert_eq!(Header::decode(&bad), None);
        bad = m.clone();
        bad[2] = 1;
        assert_eq!(Header::decode(&bad), None);
        // An RTS carries its body, and only for what is too large to go eagerly.
        let r = Rts {
            addr: 0x1000,
            rkey: 0xdead_beef_0000_0001,
            cookie: 42,
        };
        let rh = Header {
            kind: Kind::Rts,
            flags: 0,
            len: EAGER_MAX as u32 + 1,
            tag: 0,
            data: 0,
        };
        let mut rm = rh.encode().to_vec();
        rm.extend_from_slice(&r.encode());
        assert_eq!(Header::decode(&rm), Some(rh));
        assert_eq!(Rts::decode(&rm[HDR..]), Some(r));
        let small = Header {
            len: EAGER_MAX as u32,
            ..rh
        };
        let mut sm = small.encode().to_vec();
        sm.extend_from_slice(&r.encode());
        assert_eq!(Header::decode(&sm), None);
        let fin = Header {
            kind: Kind::Fin,
            flags: 0,
            len: 0,
            tag: 42,
            data: 0,
        };
        assert_eq!(Header::decode(&fin.encode()), Some(fin));
    }

    #[test]
    fn receives_match_in_posting_order_and_messages_in_arrival_order() {
        let mut m: Matcher<u32, &str> = Matcher::default();
        assert!(m.post(recv(false, None, 0, 0, 1)).is_none());
        assert!(m.post(recv(false, None, 0, 0, 2)).is_none());
        let (p, a) = m.arrive((1, 5), eager(0, false, 1), "x").unwrap();
        assert_eq!((p.op, a.body), (1, "x"));
        let (p, _) = m.arrive((1, 5), eager(0, false, 1), "y").unwrap();
        assert_eq!(p.op, 2);
        // No receive: kept, in order.
        assert!(m.arrive((1, 5), eager(0, false, 1), "a").is_none());
        assert!(m.arrive((1, 5), eager(0, false, 1), "b").is_none());
        assert_eq!(m.post(recv(false, None, 0, 0, 3)).unwrap().1.body, "a");
        assert_eq!(m.post(recv(false, None, 0, 0, 4)).unwrap().1.body, "b");
        assert_eq!((m.posted(), m.arrived()), (0, 0));
    }

    #[test]
    fn tags_sources_and_kinds_must_fit() {
        let mut m: Matcher<u32, &str> = Matcher::default();
        // A tagged receive for tag 0x12 with the low 4 bits ignored, from (1, 5) only.
        assert!(m.post(recv(true, Some((1, 5)), 0x10, 0xf, 1)).is_none());
        // Untagged, another source, another tag: none fits.
        assert!(m
            .arrive((1, 5), eager(0x12, false, 1), "untagged")
            .is_none());
        assert!(m
            .arrive((2, 5), eager(0x12, true, 1), "other node")
            .is_none());
        assert!(m
            .arrive((1, 6), eager(0x12, true, 1), "other endpoint")
            .is_none());
        assert!(m
            .arrive((1, 5), eager(0x22, true, 1), "other tag")
            .is_none());
        let (p, a) = m.arrive((1, 5), eager(0x1f, true, 1), "fits").unwrap();
        assert_eq!((p.op, a.body), (1, "fits"));
        // Peek leaves, claim takes; a receive from any source takes the first that fits.
        let any = recv(true, None, 0x12, 0, 2);
        assert_eq!(m.peek(&any).map(|a| a.body), Some("other node"));
        assert_eq!(m.arrived(), 4);
        assert_eq!(m.take_arrived(&any).map(|a| a.body), Some("other node"));
        assert_eq!(m.peek(&any).map(|a| a.body), Some("other endpoint"));
        let untagged = recv(false, None, 0, 0, 3);
        assert_eq!(m.post(untagged).unwrap().1.body, "untagged");
    }

    #[test]
    fn cancel_takes_the_posted_receive_only() {
        let mut m: Matcher<u32, ()> = Matcher::default();
        assert!(m.post(recv(false, None, 0, 0, 1)).is_none());
        assert!(m.post(recv(true, None, 0, 0, 2)).is_none());
        assert_eq!(m.cancel(|&id| id == 2).map(|p| p.op), Some(2));
        assert!(m.cancel(|&id| id == 2).is_none());
        assert_eq!(m.posted(), 1);
    }
}
