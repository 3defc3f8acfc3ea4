// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Differential replay (Transport v2: "keep a differential test that replays recorded pcaps
//! through the core"): the packets a node's port received, as QEMU's `filter-dump` recorded
//! them on its link, go through a fresh [`RecvTable`] of the core, and the answers it gives
//! are compared, one by one and in order, with the answers the node sent on the same
//! recording. The model calls the same core, so a difference is the model's own doing: how it
//! decodes, what it tells the core of its endpoints and placement, when it answers, or a
//! packet it answered that the core would not have (or the reverse).
//!
//! What the replay assumes of the recording (`test_net.py`'s `Replay` makes it so): the node
//! receives only (it starts no op of its own), every byte its ops place translates (no
//! receiver fault), its endpoints hold what the caller says, its port injects no loss on what
//! it sends (the peer's may: a packet lost or damaged on the way is the peer's), and ACKs are
//! not coalesced (`ack-every=1`): the pcap's timestamps are microseconds, too coarse to replay
//! when an owed ACK's timer fires against a packet that comes within the same microsecond.
//! The time the core is given is the recording's, in ns.

use exanest_core::netrx::{Act, RecvTable, Rkey};
use exanest_core::packet::{Header, Op};
use std::string::String;
use std::vec::Vec;

/// One packet of a recording: when it passed (µs since the first), and its bytes.
pub struct Record<'a> {
    /// Microseconds since the recording's first packet.
    pub us: u64,
    /// The frame as captured.
    pub bytes: &'a [u8],
    /// Whether the capture kept all of it (`filter-dump`'s `maxlen` cuts frames).
    pub whole: bool,
}

/// The records of a classic pcap file (either byte order, microsecond timestamps).
pub fn records(pcap: &[u8]) -> Result<Vec<Record<'_>>, String> {
    let word = |b: &[u8], big: bool| {
        let a = [b[0], b[1], b[2], b[3]];
        if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    if pcap.len() < 24 {
        return Err("not a pcap file: shorter than its header".into());
    }
    let big = match word(pcap, false) {
        0xA1B2_C3D4 => false,
        0xD4C3_B2A1 => true,
        m => return Err(std::format!("not a pcap file (magic {m:#x})")),
    };
    let mut out = Vec::new();
    let mut at = 24;
    let mut first = None;
    while at < pcap.len() {
        let h = pcap
            .get(at..at + 16)
            .ok_or_else(|| std::format!("a record header cut at byte {at}"))?;
        let (sec, usec) = (word(&h[0..], big), word(&h[4..], big));
        let (incl, orig) = (word(&h[8..], big) as usize, word(&h[12..], big) as usize);
        let bytes = pcap
            .get(at + 16..at + 16 + incl)
            .ok_or_else(|| std::format!("a record cut at byte {at}"))?;
        let t = u64::from(sec) * 1_000_000 + u64::from(usec);
        let t0 = *first.get_or_insert(t);
        out.push(Record {
            us: t.saturating_sub(t0),
            bytes,
            whole: incl == orig,
        });
        at += 16 + incl;
    }
    Ok(out)
}

/// What the replayed node is: its id, its keys and what each endpoint can take
/// ([`exanest_core::netrx::ep`]; an endpoint not listed has nothing).
pub struct Node {
    /// The node's id (packets to it are replayed; packets from it are its answers).
    pub node: u16,
    /// Its rkey table.
    pub keys: Vec<Rkey>,
    /// (endpoint, flags).
    pub eps: Vec<(u32, u32)>,
}

/// An answer as compared: op, destination, op id, echoed sequence, offset, status, span.
pub type Answer = (Op, u16, u32, u32, u64, i32, u16);

fn answer(h: &Header) -> Answer {
    (h.op, h.dst, h.op_id, h.seq, h.offset, h.status, h.span)
}

/// What a replay found.
#[derive(Debug, Default)]
pub struct Report {
    /// Packets replayed to the node (requests that decoded).
    pub requests: usize,
    /// Packets to the node that the core refused to decode (damaged on the way).
    pub undecodable: usize,
    /// Answers the node sent, as recorded.
    pub recorded: Vec<Answer>,
    /// Answers the core gave, replayed.
    pub replayed: Vec<Answer>,
    /// READ_RESP payload bytes the node sent, and those the core asked it to serve.
    pub served: (u64, u64),
}

impl Report {
    /// The first difference, as a sentence, or `None` when the replay matches.
    pub fn difference(&self) -> Option<String> {
        let n = self.recorded.len().max(self.replayed.len());
        for i in 0..n {
            let (a, b) = (self.recorded.get(i), self.replayed.get(i));
            if a != b {
                return Some(std::format!(
                    "answer {i}: the node sent {a:?}, the core says {b:?}"
                ));
            }
        }
        (self.served.0 != self.served.1).then(|| {
            std::format!(
                "the node served {} bytes, the core {}",
                self.served.0,
                self.served.1
            )
        })
    }
}

/// Replay the recording `pcap` of node `n`'s link through a fresh core table.
pub fn replay(pcap: &[u8], n: &Node) -> Result<Report, String> {
    let mut rx = RecvTable::new(n.node);
    let mut rep = Report::default();
    for (k, r) in records(pcap)?.iter().enumerate() {
        if !r.whole {
            return Err(std::format!(
                "record {k} was cut by the capture: the replay needs whole packets"
            ));
        }
        let Ok((h, payload)) = Header::decode(r.bytes) else {
            // Damaged on the way (or not ours): the node dropped it, as the core does. The
            // node's own packets leave it whole.
            if r.bytes.len() >= 8 && u16::from_le_bytes([r.bytes[6], r.bytes[7]]) != n.node {
                return Err(std::format!(
                    "record {k}: the node sent a packet that does not decode"
                ));
            }
            rep.undecodable += 1;
            continue;
        };
        if h.src == n.node {
            match h.op {
                Op::Ack | Op::Nack | Op::Resume => rep.recorded.push(answer(&h)),
                Op::ReadResp => rep.served.0 += payload.len() as u64,
                op => return Err(std::format!("record {k}: the node started an op ({op:?})")),
            }
            continue;
        }
        if h.dst != n.node {
            continue;
        }
        rep.requests += 1;
        let flags = n
            .eps
            .iter()
            .find(|(e, _)| *e == h.endpoint)
            .map_or(0, |&(_, f)| f);
        let now = r.us * 1000;
        let mut step = rx.on_packet(&h, payload.len(), &n.keys, flags, now, u64::MAX);
        if let Some(a) = step.reply {
            rep.replayed.push(answer(&a.header));
        }
        match step.act {
            Act::Place(i) | Act::PlaceAhead(i) => {
                // Every byte translates (the recording's premise).
                step = rx.placed(i, &h, payload.len() as u64, None);
            }
            Act::Serve { slot, from, to } => {
                rep.served.1 += to - from;
                step = rx.served(slot, &h, to, None);
                // What the link takes of it is the port's business: not the replay's.
                rx.read_sent(h.src, to - from);
            }
            Act::Report(_) => {
                return Err(std::format!(
                    "record {k}: a receiver fault, which the replay cannot model"
                ))
            }
            Act::Nothing => continue,
        }
        if let Some(a) = step.reply {
            rep.replayed.push(answer(&a.header));
        }
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use exanest_core::netrx::ep;
    use exanest_core::packet::{Nack, MTU};
    use exanest_core::regs::net::{RKEY_VALID, RKEY_WRITE};

    const KEY: u64 = 0x0123_4567_89ab_cdef;

    fn pcap(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut f = Vec::new();
        for w in [0xA1B2_C3D4u32, 0x0004_0002, 0, 0, 65536, 1] {
            f.extend_from_slice(&w.to_le_bytes());
        }
        f.truncate(24);
        for (us, b) in frames {
            for w in [
                (*us / 1_000_000) as u32,
                (*us % 1_000_000) as u32,
                b.len() as u32,
                b.len() as u32,
            ] {
                f.extend_from_slice(&w.to_le_bytes());
            }
            f.extend_from_slice(b);
        }
        f
    }

    fn frame(h: &Header, payload: &[u8]) -> Vec<u8> {
        let mut v = h.encode(payload).unwrap().to_vec();
        v.extend_from_slice(payload);
        v
    }

    fn write(off: u64, seq: u32) -> Header {
        Header {
            op: Op::Write,
            src: 0,
            dst: 1,
            endpoint: 7,
            op_id: 40,
            seq,
            status: 0,
            rkey: KEY,
            addr: 0x10000,
            len: 3 * MTU as u64,
            offset: off,
            span: 1,
            ce: false,
        }
    }

    fn ans(op: Op, off: u64, seq: u32, status: i32) -> Header {
        Header {
            op,
            src: 1,
            dst: 0,
            seq,
            offset: off,
            status,
            span: 0,
            ..write(0, 0)
        }
    }

    fn node() -> Node {
        Node {
            node: 1,
            keys: std::vec![Rkey {
                ctrl: RKEY_VALID | RKEY_WRITE,
                ep: 7,
                key: KEY,
                base: 0x10000,
                len: 1 << 20,
                node: 0,
            }],
            eps: std::vec![(7, ep::READY | ep::OPEN)],
        }
    }

    /// A recording whose answers the core would give matches; one answer changed, dropped or
    /// added is found, with where; a damaged packet is dropped by both.
    #[test]
    fn a_replay_finds_the_first_difference() {
        let b = MTU as u64;
        let p = std::vec![0x5au8; MTU];
        let mut damaged = frame(&write(b, 1), &p);
        damaged[100] ^= 1;
        let honest = std::vec![
            (0, frame(&write(0, 0), &p)),
            (3, frame(&ans(Op::Ack, b, 0, 0), &[])),
            (5, damaged),
            // Block 2 past the gap at block 1: placed, and ACKed with the map.
            (7, frame(&write(2 * b, 2), &p)),
            (8, frame(&ans(Op::Ack, b, 2, 0b1), &[])),
            (20, frame(&write(b, 3), &p)),
            (21, frame(&ans(Op::Ack, 3 * b, 3, 0), &[])),
        ];
        let r = replay(&pcap(&honest), &node()).unwrap();
        assert_eq!(r.difference(), None, "{r:?}");
        assert_eq!((r.requests, r.undecodable, r.replayed.len()), (3, 1, 3));
        // The node NACKed where the core ACKs.
        let mut other = honest.clone();
        other[1].1 = frame(&ans(Op::Nack, 0, 0, Nack::Fault.status()), &[]);
        let d = replay(&pcap(&other), &node())
            .unwrap()
            .difference()
            .unwrap();
        assert!(d.starts_with("answer 0: the node sent Some((Nack"), "{d}");
        // An answer missing, and one too many.
        let mut fewer = honest.clone();
        fewer.remove(4);
        let d = replay(&pcap(&fewer), &node())
            .unwrap()
            .difference()
            .unwrap();
        assert!(d.starts_with("answer 1:"), "{d}");
        let mut more = honest.clone();
        more.push((30, frame(&ans(Op::Ack, 3 * b, 3, 0), &[])));
        let d = replay(&pcap(&more), &node()).unwrap().difference().unwrap();
        assert!(d.starts_with("answer 3: the node sent Some"), "{d}");
        // Not a pcap; a cut record.
        assert!(replay(b"nope", &node()).is_err());
        let mut cut = pcap(&honest);
        cut.truncate(cut.len() - 1);
        assert!(replay(&cut, &node()).is_err());
    }
}
