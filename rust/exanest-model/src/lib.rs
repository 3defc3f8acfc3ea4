// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The `no_std` core's protocol code as the QEMU engine model calls it: a C ABI over
//! [`exanest_core::packet`], built as a static library that `scripts/build-qemu.sh` links into
//! QEMU. The model keeps no copy of what lives here; `cargo test` tests the code that runs.
//!
//! The ABI is declared once, in `tests/qemu-model/exanest_core.h`, and `tests/c_abi.rs` checks
//! that header against this file: it compiles a C program with the header, links it against
//! this library and compares layouts, constants and behaviour. It uses `std` (QEMU is a
//! process): a panic aborts at the `extern "C"` boundary, it never unwinds into C.

use exanest_core::packet::{BadPacket, Header, Nack, Op, HEADER, MTU};

/// A packet's header fields as the model holds them (`ExanestPkt` in the C header); `payload`
/// points at `plen` bytes that the packet carries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExanestPkt {
    /// Op code: [`Op`]'s wire value.
    pub op: u8,
    /// Sending node.
    pub src: u16,
    /// Receiving node.
    pub dst: u16,
    /// Receiving endpoint.
    pub ep: u32,
    /// The op's id at its sender.
    pub op_id: u32,
    /// Packet sequence within the op.
    pub seq: u32,
    /// NACK status ([`Nack::status`]), or a READ_REQ's byte count; 0 otherwise.
    pub status: i32,
    /// Remote key.
    pub rkey: u64,
    /// Remote address of the op's first byte.
    pub addr: u64,
    /// The op's length.
    pub len: u64,
    /// This packet's offset in the op.
    pub offset: u64,
    /// Payload bytes.
    pub plen: u16,
    /// The payload (may be null when `plen` is 0).
    pub payload: *const u8,
}

/// Why [`exanest_pkt_decode`] refused a packet: its negative return values.
pub const fn bad_code(b: BadPacket) -> i32 {
    match b {
        BadPacket::Size => -1,
        BadPacket::Magic => -2,
        BadPacket::Op => -3,
        BadPacket::Length => -4,
        BadPacket::Reserved => -5,
        BadPacket::Checksum => -6,
    }
}

fn header_of(k: &ExanestPkt) -> Option<Header> {
    Some(Header {
        op: Op::from_code(k.op)?,
        src: k.src,
        dst: k.dst,
        endpoint: k.ep,
        op_id: k.op_id,
        seq: k.seq,
        status: k.status,
        rkey: k.rkey,
        addr: k.addr,
        len: k.len,
        offset: k.offset,
    })
}

/// Write the 64 header bytes of packet `*k` (checksum over header and payload included) to
/// `hdr`. Returns 0, or -1 when `*k` is no packet: an unknown op, a payload longer than the
/// MTU, or payload on an op that carries none.
///
/// # Safety
///
/// `k` points to a valid `ExanestPkt` whose `payload` points to `plen` readable bytes (or
/// `plen` is 0), and `hdr` to 64 writable bytes that overlap neither.
#[no_mangle]
pub unsafe extern "C" fn exanest_pkt_encode(k: *const ExanestPkt, hdr: *mut u8) -> i32 {
    // SAFETY: the caller passes a valid, aligned `ExanestPkt` (this function's contract).
    let k = unsafe { &*k };
    let payload: &[u8] = if k.plen == 0 {
        &[]
    } else {
        // SAFETY: the caller guarantees `plen` readable bytes at `payload` when `plen` != 0.
        unsafe { core::slice::from_raw_parts(k.payload, usize::from(k.plen)) }
    };
    let Some(bytes) = header_of(k).and_then(|h| h.encode(payload)) else {
        return -1;
    };
    // SAFETY: the caller guarantees 64 writable bytes at `hdr`, disjoint from `*k` and the
    // payload; `bytes` is a local array.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), hdr, HEADER) };
    0
}

/// Decode and check the packet `buf[0..size)`: 0 with `*k` filled (`k->payload` points into
/// `buf`), or a negative reason ([`bad_code`]) with `*k` untouched.
///
/// # Safety
///
/// `buf` points to `size` readable bytes and `k` to a writable `ExanestPkt`.
#[no_mangle]
pub unsafe extern "C" fn exanest_pkt_decode(
    buf: *const u8,
    size: usize,
    k: *mut ExanestPkt,
) -> i32 {
    // SAFETY: the caller guarantees `size` readable bytes at `buf`, alive for this call.
    let pkt = unsafe { core::slice::from_raw_parts(buf, size) };
    let (h, payload) = match Header::decode(pkt) {
        Ok(d) => d,
        Err(b) => return bad_code(b),
    };
    let out = ExanestPkt {
        op: h.op.code(),
        src: h.src,
        dst: h.dst,
        ep: h.endpoint,
        op_id: h.op_id,
        seq: h.seq,
        status: h.status,
        rkey: h.rkey,
        addr: h.addr,
        len: h.len,
        offset: h.offset,
        // A decoded payload is at most MTU bytes.
        plen: payload.len() as u16,
        payload: payload.as_ptr(),
    };
    // SAFETY: the caller guarantees that `k` points to a writable, aligned `ExanestPkt`.
    unsafe { k.write(out) };
    0
}

/// Whether a NACK's `status` is one that a receiver sends ([`Nack::from_status`]).
#[no_mangle]
pub extern "C" fn exanest_nack_valid(status: i32) -> bool {
    Nack::from_status(status).is_some()
}

/// The constants the header defines, by name: what `tests/c_abi.rs` compares.
pub const CONSTANTS: &[(&str, i64)] = &[
    ("EXANEST_PKT_HDR", HEADER as i64),
    ("EXANEST_PKT_MTU", MTU as i64),
    ("EXANEST_PKT_WRITE", Op::Write.code() as i64),
    ("EXANEST_PKT_READ_REQ", Op::ReadReq.code() as i64),
    ("EXANEST_PKT_READ_RESP", Op::ReadResp.code() as i64),
    ("EXANEST_PKT_ACK", Op::Ack.code() as i64),
    ("EXANEST_PKT_NACK", Op::Nack.code() as i64),
    ("EXANEST_PKT_RESUME", Op::Resume.code() as i64),
    ("EXANEST_PKT_MAILBOX", Op::Mailbox.code() as i64),
    ("EXANEST_NACK_FAULT", Nack::Fault.status() as i64),
    ("EXANEST_NACK_NOT_READY", Nack::NotReady.status() as i64),
    ("EXANEST_NACK_SEQUENCE", Nack::Sequence.status() as i64),
    ("EXANEST_NACK_RNR", Nack::Rnr.status() as i64),
    ("EXANEST_BAD_SIZE", bad_code(BadPacket::Size) as i64),
    ("EXANEST_BAD_MAGIC", bad_code(BadPacket::Magic) as i64),
    ("EXANEST_BAD_OP", bad_code(BadPacket::Op) as i64),
    ("EXANEST_BAD_LENGTH", bad_code(BadPacket::Length) as i64),
    ("EXANEST_BAD_RESERVED", bad_code(BadPacket::Reserved) as i64),
    ("EXANEST_BAD_CHECKSUM", bad_code(BadPacket::Checksum) as i64),
];
