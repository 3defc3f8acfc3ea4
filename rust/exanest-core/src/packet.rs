// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The link's packet format (Documentation/network.rst): a 64-byte little-endian header and up
//! to [`MTU`] bytes of payload, covered by a CRC32C. Shared by the engine model's port, the
//! driver and the tests; decoding checks everything a hostile peer could get wrong and never
//! panics.

/// Bytes of the header.
pub const HEADER: usize = 64;
/// Most payload bytes per packet.
pub const MTU: usize = 4096;
/// First two bytes of every packet ("EX" in the high byte, "DA" in the low one).
pub const MAGIC: u16 = 0xEDA0;
/// Format version: 2 gave the header's last reserved bits a meaning ([`Header::span`]).
pub const VERSION: u8 = 2;

/// What a packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Put data at `offset` of the op (RDMA write).
    Write,
    /// Ask for the op's bytes from `offset` on (RDMA read request).
    ReadReq,
    /// Data of a read, at `offset`.
    ReadResp,
    /// The receiver placed the op's bytes below `offset`.
    Ack,
    /// The receiver dropped the op's data from `offset` on: see [`Nack`].
    Nack,
    /// The receiver resolved what it NACKed: send again from `offset`.
    Resume,
    /// A small message for the destination context's receive ring.
    Mailbox,
    /// Put data at `offset` of the op, as [`Op::Write`], for a put with immediate data: every
    /// packet carries the 32 bits in `status`, and the receiver writes a completion with them
    /// in the endpoint's mailbox ring once the op's last byte is placed.
    WriteImm,
    /// The sender ended the op without finishing it (it gave up, or its context was stopped:
    /// its process exited or was killed): the receiver forgets it at once. Names the op as its
    /// other packets do (key, address, length, endpoint); `status` is 0.
    Abort,
}

impl Op {
    /// The op's wire value.
    pub const fn code(self) -> u8 {
        match self {
            Op::Write => 1,
            Op::ReadReq => 2,
            Op::ReadResp => 3,
            Op::Ack => 4,
            Op::Nack => 5,
            Op::Resume => 6,
            Op::Mailbox => 7,
            Op::WriteImm => 8,
            Op::Abort => 9,
        }
    }

    /// The op a wire value names, if any.
    pub const fn from_code(c: u8) -> Option<Op> {
        Some(match c {
            1 => Op::Write,
            2 => Op::ReadReq,
            3 => Op::ReadResp,
            4 => Op::Ack,
            5 => Op::Nack,
            6 => Op::Resume,
            7 => Op::Mailbox,
            8 => Op::WriteImm,
            9 => Op::Abort,
            _ => return None,
        })
    }

    /// Whether packets of this op carry payload.
    pub const fn has_payload(self) -> bool {
        matches!(self, Op::Write | Op::ReadResp | Op::Mailbox | Op::WriteImm)
    }
}

/// Why a receiver NACKed, in a NACK's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nack {
    /// A page fault at `offset`: the receiver resolves it and sends RESUME.
    Fault,
    /// Not ready (no context resident): RESUME follows.
    NotReady,
    /// Data arrived beyond a gap (a packet was lost): send again from `offset` at once.
    Sequence,
    /// Receiver not ready (the mailbox's ring is full): RESUME follows when its reader frees a
    /// slot.
    Rnr,
    /// A page of the op at `offset`, past the data placed so far, does not translate: the
    /// receiver resolves it while the data before it still comes, and RESUMEs from `offset`.
    /// The sender sends nothing from `offset` on until then; what it sent below is placed as
    /// it comes (Documentation/network.rst, "Translations ahead of the data").
    Ahead,
    /// The op cannot complete: this errno (positive) ends it at the sender.
    Error(i32),
}

impl Nack {
    /// The `status` field's value.
    pub const fn status(self) -> i32 {
        match self {
            Nack::Fault => 1,
            Nack::NotReady => 2,
            Nack::Sequence => 3,
            Nack::Rnr => 4,
            Nack::Ahead => 5,
            Nack::Error(e) => -e,
        }
    }

    /// The reason a `status` encodes; `None` for a value no receiver sends.
    pub const fn from_status(s: i32) -> Option<Nack> {
        match s {
            1 => Some(Nack::Fault),
            2 => Some(Nack::NotReady),
            3 => Some(Nack::Sequence),
            4 => Some(Nack::Rnr),
            5 => Some(Nack::Ahead),
            s if s < 0 && s > -4096 => Some(Nack::Error(-s)),
            _ => None,
        }
    }
}

/// A packet's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the packet is.
    pub op: Op,
    /// Sending node.
    pub src: u16,
    /// Receiving node.
    pub dst: u16,
    /// The receiving side's endpoint: a stable id of its process's context.
    pub endpoint: u32,
    /// The operation this packet belongs to, chosen by the node that started it.
    pub op_id: u32,
    /// Sequence number of the packet within its operation, for duplicate suppression.
    pub seq: u32,
    /// NACK: [`Nack::status`]; READ_REQ: the bytes asked for; WRITE_IMM: the immediate data;
    /// otherwise 0.
    pub status: i32,
    /// The remote key the operation names.
    pub rkey: u64,
    /// The remote virtual address of the operation's first byte.
    pub addr: u64,
    /// The operation's length in bytes.
    pub len: u64,
    /// This packet's byte offset within the operation (ACK: bytes placed; NACK, RESUME: where
    /// to go on from).
    pub offset: u64,
    /// A request's (WRITE, WRITE_IMM, MAILBOX, READ_REQ) word on its sender's older ops: the
    /// op ids from the sender's oldest unfinished op to this one, both counted, so that every
    /// op of the sender before `op_id - (span - 1)` is finished there (it has its last answer,
    /// or gave up) and no packet of one can be of use. 0 says nothing (an answer, or more than
    /// 65,535 ids behind). Receivers keep what finished ops they forgot from it
    /// ([`crate::netrx`]). An ACK's: [`ECE`] when the packet it answers came marked
    /// [`Header::ce`] (the rest 0).
    pub span: u16,
    /// Congestion experienced: the fabric met this packet in a queue past its marking
    /// threshold and set the bit (bit 7 of the op byte, covered by the checksum, which the
    /// marker computes again, as an IP router does for the ECN field). The receiver echoes it
    /// in the ACK ([`ECE`]); the sender's window to the peer follows the echoes
    /// ([`crate::netop::cc`]). Senders send it clear.
    pub ce: bool,
}

/// An ACK's [`Header::span`] bit: the packet it answers came marked [`Header::ce`].
pub const ECE: u16 = 1;

/// The op byte's bit that carries [`Header::ce`].
const CE_BIT: u8 = 0x80;

/// Why a packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadPacket {
    /// Shorter than a header, or longer than a header and an MTU.
    Size,
    /// Not this protocol, or another version of it.
    Magic,
    /// An op code nobody sends.
    Op,
    /// The payload length field disagrees with the packet, the op carries none but has some,
    /// or the payload lies outside the operation.
    Length,
    /// The checksum does not match: corrupted on the link.
    Checksum,
}

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

const CRC: [u32; 256] = crc_table();

/// CRC32C (Castagnoli, reflected, as iSCSI and ext4 use it) of `parts` in turn.
pub fn crc32c(parts: &[&[u8]]) -> u32 {
    let mut c = !0u32;
    for p in parts {
        for &b in p.iter() {
            c = CRC[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
        }
    }
    !c
}

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

fn get<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[off..off + N]);
    a
}

impl Header {
    /// The header's bytes for a packet with `payload`, checksum included. `None` when the
    /// payload is longer than [`MTU`] or the op carries none but is given some.
    pub fn encode(&self, payload: &[u8]) -> Option<[u8; HEADER]> {
        if payload.len() > MTU || (!self.op.has_payload() && !payload.is_empty()) {
            return None;
        }
        let mut b = [0u8; HEADER];
        put(&mut b, 0, &MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.op.code() | if self.ce { CE_BIT } else { 0 };
        put(&mut b, 4, &self.src.to_le_bytes());
        put(&mut b, 6, &self.dst.to_le_bytes());
        put(&mut b, 8, &self.endpoint.to_le_bytes());
        put(&mut b, 12, &self.op_id.to_le_bytes());
        put(&mut b, 16, &self.seq.to_le_bytes());
        put(&mut b, 20, &self.status.to_le_bytes());
        put(&mut b, 24, &self.rkey.to_le_bytes());
        put(&mut b, 32, &self.addr.to_le_bytes());
        put(&mut b, 40, &self.len.to_le_bytes());
        put(&mut b, 48, &self.offset.to_le_bytes());
        put(&mut b, 56, &(payload.len() as u16).to_le_bytes());
        put(&mut b, 58, &self.span.to_le_bytes());
        let crc = crc32c(&[&b, payload]);
        put(&mut b, 60, &crc.to_le_bytes());
        Some(b)
    }

    /// Decode a whole packet: its header and payload, or why it is refused.
    pub fn decode(pkt: &[u8]) -> Result<(Header, &[u8]), BadPacket> {
        if pkt.len() < HEADER || pkt.len() > HEADER + MTU {
            return Err(BadPacket::Size);
        }
        if u16::from_le_bytes(get(pkt, 0)) != MAGIC || pkt[2] != VERSION {
            return Err(BadPacket::Magic);
        }
        let op = Op::from_code(pkt[3] & !CE_BIT).ok_or(BadPacket::Op)?;
        let plen = u16::from_le_bytes(get(pkt, 56)) as usize;
        let payload = &pkt[HEADER..];
        if plen != payload.len() || (!op.has_payload() && plen != 0) {
            return Err(BadPacket::Length);
        }
        let mut h = [0u8; HEADER];
        h.copy_from_slice(&pkt[..HEADER]);
        let crc = u32::from_le_bytes(get(&h, 60));
        put(&mut h, 60, &[0; 4]);
        if crc32c(&[&h, payload]) != crc {
            return Err(BadPacket::Checksum);
        }
        let hd = Header {
            op,
            src: u16::from_le_bytes(get(pkt, 4)),
            dst: u16::from_le_bytes(get(pkt, 6)),
            endpoint: u32::from_le_bytes(get(pkt, 8)),
            op_id: u32::from_le_bytes(get(pkt, 12)),
            seq: u32::from_le_bytes(get(pkt, 16)),
            status: i32::from_le_bytes(get(pkt, 20)),
            rkey: u64::from_le_bytes(get(pkt, 24)),
            addr: u64::from_le_bytes(get(pkt, 32)),
            len: u64::from_le_bytes(get(pkt, 40)),
            offset: u64::from_le_bytes(get(pkt, 48)),
            span: u16::from_le_bytes(get(pkt, 58)),
            ce: pkt[3] & CE_BIT != 0,
        };
        // Payload outside the operation (or an offset past it) is malformed, not an error
        // the receiver should answer.
        let end = hd
            .offset
            .checked_add(plen as u64)
            .ok_or(BadPacket::Length)?;
        if end > hd.len || hd.addr.checked_add(hd.len).is_none() {
            return Err(BadPacket::Length);
        }
        Ok((hd, payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn hdr(op: Op) -> Header {
        Header {
            op,
            src: 1,
            dst: 2,
            endpoint: 0x0102_0304,
            op_id: 77,
            seq: 5,
            status: 0,
            rkey: 0xdead_beef_0000_0003,
            addr: 0x7f00_1234_5000,
            len: 3 * MTU as u64,
            offset: MTU as u64,
            span: 0xbeef,
            ce: false,
        }
    }

    fn packet(h: &Header, payload: &[u8]) -> Vec<u8> {
        let mut p = h.encode(payload).unwrap().to_vec();
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn crc32c_known_values() {
        // RFC 3720 B.4 test vectors.
        assert_eq!(crc32c(&[&[0u8; 32]]), 0x8A91_36AA);
        assert_eq!(crc32c(&[&[0xffu8; 32]]), 0x62A8_AB43);
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&[&inc]), 0x46DD_794E);
        assert_eq!(crc32c(&[&inc[..10], &inc[10..]]), 0x46DD_794E);
        assert_eq!(crc32c(&[b"123456789"]), 0xE306_9283);
    }

    #[test]
    fn every_op_round_trips() {
        let data: Vec<u8> = (0..MTU).map(|i| (i * 7) as u8).collect();
        for op in [
            Op::Write,
            Op::ReadReq,
            Op::ReadResp,
            Op::Ack,
            Op::Nack,
            Op::Resume,
            Op::Mailbox,
            Op::WriteImm,
            Op::Abort,
        ] {
            let payload: &[u8] = if op.has_payload() { &data } else { &[] };
            let mut h = hdr(op);
            if op == Op::Nack {
                h.status = Nack::Error(14).status();
            }
            if op == Op::WriteImm {
                h.status = 0xdead_beef_u32 as i32; // any 32 bits of immediate data
            }
            let p = packet(&h, payload);
            let (d, pl) = Header::decode(&p).unwrap();
            assert_eq!(d, h);
            assert_eq!(pl, payload);
        }
        assert_eq!(Nack::from_status(Nack::Fault.status()), Some(Nack::Fault));
        assert_eq!(
            Nack::from_status(Nack::NotReady.status()),
            Some(Nack::NotReady)
        );
        assert_eq!(Nack::from_status(3), Some(Nack::Sequence));
        assert_eq!(Nack::from_status(Nack::Rnr.status()), Some(Nack::Rnr));
        assert_eq!(Nack::from_status(Nack::Ahead.status()), Some(Nack::Ahead));
        assert_eq!(Nack::from_status(6), None);
        assert_eq!(Nack::from_status(-13), Some(Nack::Error(13)));
        assert_eq!(Nack::from_status(0), None);
        assert_eq!(Nack::from_status(i32::MIN), None);
    }

    #[test]
    fn malformed_packets_are_refused() {
        let h = hdr(Op::Write);
        let good = packet(&h, &[9u8; 100]);
        assert!(Header::decode(&good).is_ok());
        assert_eq!(Header::decode(&good[..HEADER - 1]), Err(BadPacket::Size));
        let mut long = good.clone();
        long.resize(HEADER + MTU + 1, 0);
        assert_eq!(Header::decode(&long), Err(BadPacket::Size));
        // Every single bit flipped anywhere is caught.
        for i in 0..good.len() * 8 {
            let mut p = good.clone();
            p[i / 8] ^= 1 << (i % 8);
            assert!(Header::decode(&p).is_err(), "bit {i} flipped went through");
        }
        // A payload the length field does not cover.
        let mut p = good.clone();
        p.push(0);
        assert_eq!(Header::decode(&p), Err(BadPacket::Length));
        // Ops without payload refuse one at both ends.
        assert_eq!(hdr(Op::Ack).encode(&[1]), None);
        assert_eq!(h.encode(&[0u8; MTU + 1]), None);
        // Payload past the end of the operation, or an operation that wraps.
        let past = Header {
            offset: h.len - 50,
            ..h
        };
        assert_eq!(
            Header::decode(&packet(&past, &[1u8; 100])),
            Err(BadPacket::Length)
        );
        let wraps = Header {
            addr: u64::MAX - 10,
            ..h
        };
        assert_eq!(
            Header::decode(&packet(&wraps, &[1u8; 100])),
            Err(BadPacket::Length)
        );
        let huge = Header {
            offset: u64::MAX - 10,
            len: u64::MAX,
            addr: 0,
            ..h
        };
        assert_eq!(
            Header::decode(&packet(&huge, &[1u8; 100])),
            Err(BadPacket::Length)
        );
        // An unknown op code, with a valid checksum.
        let mut p = good.clone();
        p[3] = 99;
        p[60..64].copy_from_slice(&[0; 4]);
        let crc = crc32c(&[&p[..HEADER], &p[HEADER..]]);
        p[60..64].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Header::decode(&p), Err(BadPacket::Op));
        // The format before 2 (bytes 58-59 reserved), with a valid checksum.
        let mut p = good.clone();
        p[2] = 1;
        p[60..64].copy_from_slice(&[0; 4]);
        let crc = crc32c(&[&p[..HEADER], &p[HEADER..]]);
        p[60..64].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Header::decode(&p), Err(BadPacket::Magic));
    }

    #[test]
    fn the_span_is_bytes_58_and_59() {
        let p = packet(&hdr(Op::Write), &[7u8; 10]);
        assert_eq!(&p[58..60], &0xbeef_u16.to_le_bytes());
        assert_eq!(p[2], VERSION);
    }

    /// Congestion experienced is bit 7 of the op byte: it round-trips on every op, leaves the
    /// op alone, and the checksum covers it (a marker that does not compute it again has its
    /// packet refused).
    #[test]
    fn congestion_experienced_is_bit_7_of_the_op_byte() {
        for op in [Op::Write, Op::Mailbox, Op::ReadResp, Op::Ack] {
            let payload: &[u8] = if op.has_payload() { &[3u8; 10] } else { &[] };
            let h = Header {
                ce: true,
                ..hdr(op)
            };
            let p = packet(&h, payload);
            assert_eq!(p[3], op.code() | 0x80);
            assert_eq!(Header::decode(&p).map(|(d, _)| d), Ok(h));
            let clear = packet(&hdr(op), payload);
            assert_eq!(clear[3], op.code());
            assert_eq!(Header::decode(&clear).map(|(d, _)| d.ce), Ok(false));
            let mut unmarked = p.clone();
            unmarked[3] &= 0x7f;
            assert_eq!(Header::decode(&unmarked), Err(BadPacket::Checksum));
        }
    }
}
