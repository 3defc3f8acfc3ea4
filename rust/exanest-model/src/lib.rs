// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The `no_std` core's protocol code as the QEMU engine model calls it: a C ABI over
//! [`exanest_core::packet`] (the packet format), [`exanest_core::netop`] (the sending side
//! of an op: PUT, MAILBOX and GET) and [`exanest_core::netrx`] (the receiving side: the table
//! of remote ops, the key check and the answers; [`recv`]), built as a static library that `scripts/build-qemu.sh` links into
//! QEMU. The model keeps no copy of what lives here; `cargo test` tests the code that runs.
//!
//! The ABI is declared once, in `tests/qemu-model/exanest_core.h`, and `tests/c_abi.rs` checks
//! that header against this file: it compiles a C program with the header, links it against
//! this library and compares layouts, constants and behaviour. It uses `std` (QEMU is a
//! process): a panic aborts at the `extern "C"` boundary, it never unwinds into C.

mod recv;
pub use recv::*;
pub mod replay;

use exanest_core::netop::cc::Flow;
use exanest_core::netop::rtt::RttTable;
use exanest_core::netop::{
    DataAct, Kind, SendEvent, SendOp, SendParams, SendState, EHOSTUNREACH, UNHEARD_NS,
};
use exanest_core::netrx::{self, RxState};
use exanest_core::packet::{BadPacket, Header, Nack, Op, ECE, HEADER, MTU};

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
    /// A request's word on its sender's finished ops ([`Header::span`]; 0 says nothing).
    pub span: u16,
    /// Congestion experienced ([`Header::ce`]): 1 if marked, else 0 (any other value reads as
    /// marked).
    pub ce: u8,
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
        BadPacket::Checksum => -6,
    }
}

pub(crate) fn header_of(k: &ExanestPkt) -> Option<Header> {
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
        span: k.span,
        ce: k.ce != 0,
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
        span: h.span,
        ce: u8::from(h.ce),
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

/// `ExanestSendParams`: how an op is sent ([`SendParams`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExanestSendParams {
    /// `EXANEST_SEND_PUT` (also a MAILBOX) or `EXANEST_SEND_GET`.
    pub kind: u32,
    /// Bytes per packet (PUT) or per read request (GET).
    pub mtu: u32,
    /// Most bytes in flight.
    pub window: u64,
    /// First retransmission timeout.
    pub rto_ns: u64,
    /// Cap of the backed-off timeout.
    pub max_rto_ns: u64,
    /// Unanswered timeouts or probes in a row before ETIMEDOUT.
    pub max_retries: u32,
    /// How long a gap the ACKs show may wait before its blocks are sent again.
    pub reorder_ns: u64,
    /// The tail-loss probe's timeout; 0: none.
    pub pto_ns: u64,
    /// Not 0: send the first packet alone until the receiver answers it
    /// ([`SendParams::first_alone`]; the peer's [`exanest_rtt_first_alone`]).
    pub first_alone: u32,
    /// Not 0: the peer never answered ([`exanest_rtt_heard`]); an op with no answer ends with
    /// EHOSTUNREACH at the first timeout this long after it started
    /// ([`SendParams::unheard_ns`]; `EXANEST_SEND_UNHEARD_NS`).
    pub unheard_ns: u64,
}

/// `ExanestSendEvent`: what an event asks of the caller, and what it counted.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExanestSendEvent {
    /// `EXANEST_SEND_NOTHING`, `_COMPLETED`, `_PROBE` or `_LOCAL_FAULT`.
    pub what: u32,
    /// COMPLETED: 0, or a positive errno.
    pub status: i32,
    /// PROBE: the offset to probe at.
    pub offset: u64,
    /// NACKs acted on (NACK AHEAD too).
    pub nacks: u32,
    /// RESUMEs acted on.
    pub resumes: u32,
    /// Timeouts (of data, not of probes) found needed; one found spurious is not counted
    /// ([`SendOp::needed`]).
    pub timeouts: u32,
    /// Probes asked for.
    pub probes: u32,
    /// Tail-loss probes (the last block sent again, before a timeout).
    pub tail_probes: u32,
    /// A tail-loss probe the event judged: [`PROBE_SPURIOUS`], [`PROBE_NEEDED`], or 0 (none):
    /// the caller gives it to the peer's [`ExanestRttTable`] ([`exanest_rtt_probe_judged`])
    /// and [`exanest_send_retime`]s its ops.
    pub probe_verdict: u32,
    /// The receiver's first answer to the op, if the event was it: [`FIRST_FAULTED`] (a NACK
    /// FAULT of its first bytes), [`FIRST_PLACED`], or 0: the caller gives it to the peer's
    /// [`ExanestRttTable`] ([`exanest_rtt_first_answered`]).
    pub first_answer: u32,
    /// A round trip the event measured (an ACK of the packet being timed), or 0: the caller
    /// gives it to the peer's [`ExanestRttTable`] and [`exanest_send_retime`]s its ops.
    pub rtt_ns: u64,
}

/// `ExanestSendEvent.probe_verdict`: the packet the probe sent again was late, not lost.
pub const PROBE_SPURIOUS: u32 = 1;
/// `ExanestSendEvent.probe_verdict`: it was lost.
pub const PROBE_NEEDED: u32 = 2;
/// `ExanestSendEvent.first_answer`: the receiver placed the op's first bytes.
pub const FIRST_PLACED: u32 = 1;
/// `ExanestSendEvent.first_answer`: it NACKed FAULT them.
pub const FIRST_FAULTED: u32 = 2;

/// `ExanestSendEvent.what` values.
pub const SEND_NOTHING: u32 = 0;
/// The op ended.
pub const SEND_COMPLETED: u32 = 1;
/// Send a probe.
pub const SEND_PROBE: u32 = 2;
/// GET: this side's memory faulted.
pub const SEND_LOCAL_FAULT: u32 = 3;
/// [`exanest_send_data_act`]: drop the data ([`DataAct::Drop`]).
pub const DATA_DROP: u32 = 0;
/// Place what translates ([`DataAct::Place`]).
pub const DATA_PLACE: u32 = 1;
/// A whole block past a gap: all of it or none ([`DataAct::PlaceAhead`]).
pub const DATA_PLACE_AHEAD: u32 = 2;
/// `ExanestSendParams.kind` values.
pub const SEND_PUT: u32 = 0;
/// A GET.
pub const SEND_GET: u32 = 1;

/// `ExanestSendOp`: the sending side of one op, opaque to C.
pub struct ExanestSendOp(SendOp);

/// A new sending side, holding an ended op of 0 bytes until [`exanest_send_start`]; free it
/// with [`exanest_send_free`].
#[no_mangle]
pub extern "C" fn exanest_send_new() -> *mut ExanestSendOp {
    Box::into_raw(Box::new(ExanestSendOp(SendOp::new(
        0,
        SendParams::default(),
    ))))
}

/// Free what [`exanest_send_new`] returned (null is ignored).
///
/// # Safety
///
/// `op` is null or came from [`exanest_send_new`] and is not used again.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_free(op: *mut ExanestSendOp) {
    if !op.is_null() {
        // SAFETY: `op` came from `Box::into_raw` in `exanest_send_new` and is freed once.
        drop(unsafe { Box::from_raw(op) });
    }
}

/// Start a new op of `len` bytes on `op`, sent as `*p` says.
///
/// # Safety
///
/// `op` came from [`exanest_send_new`]; `p` points to a valid `ExanestSendParams`.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_start(
    op: *mut ExanestSendOp,
    len: u64,
    p: *const ExanestSendParams,
) {
    // SAFETY: the caller passes a live op from `exanest_send_new` and valid parameters,
    // neither aliased for this call.
    let (op, p) = unsafe { (&mut *op, &*p) };
    op.0 = SendOp::new(
        len,
        SendParams {
            kind: if p.kind == SEND_GET {
                Kind::Get
            } else {
                Kind::Put
            },
            window: p.window,
            mtu: p.mtu,
            rto_ns: p.rto_ns,
            max_rto_ns: p.max_rto_ns,
            max_retries: p.max_retries,
            reorder_ns: p.reorder_ns,
            pto_ns: p.pto_ns,
            first_alone: p.first_alone != 0,
            unheard_ns: p.unheard_ns,
        },
    );
}

/// The peer's timeouts changed at `now`: the op's first retransmission timeout is `rto_ns`
/// from the next one armed, its tail-loss probe's `pto_ns` ([`SendOp::retime`]).
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_retime(
    op: *mut ExanestSendOp,
    rto_ns: u64,
    pto_ns: u64,
    now: u64,
) {
    // SAFETY: forwarded from the caller.
    unsafe { op_mut(op) }.retime(rto_ns, pto_ns, now)
}

/// Borrow the op behind a C pointer.
///
/// # Safety
///
/// `op` came from [`exanest_send_new`], is not freed, and nothing else uses it meanwhile.
unsafe fn op_mut<'a>(op: *mut ExanestSendOp) -> &'a mut SendOp {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*op).0 }
}

/// Run `f` on the op and report its event with the counters it moved.
///
/// # Safety
///
/// As [`op_mut`].
unsafe fn event(
    op: *mut ExanestSendOp,
    f: impl FnOnce(&mut SendOp) -> SendEvent,
) -> ExanestSendEvent {
    // SAFETY: forwarded from the caller.
    let s = unsafe { op_mut(op) };
    let before = (
        s.nacks + s.aheads,
        s.resumes,
        s.needed,
        s.probes,
        s.tail_probes,
    );
    let ev = f(s);
    let mut out = ExanestSendEvent {
        nacks: s.nacks + s.aheads - before.0,
        resumes: s.resumes - before.1,
        timeouts: s.needed - before.2,
        probes: s.probes - before.3,
        tail_probes: s.tail_probes - before.4,
        probe_verdict: match s.take_probe_verdict() {
            Some(true) => PROBE_SPURIOUS,
            Some(false) => PROBE_NEEDED,
            None => 0,
        },
        first_answer: match s.take_first_verdict() {
            Some(true) => FIRST_FAULTED,
            Some(false) => FIRST_PLACED,
            None => 0,
        },
        rtt_ns: s.take_rtt_sample().map_or(0, |r| r.max(1)),
        ..Default::default()
    };
    match ev {
        SendEvent::None => {}
        SendEvent::Completed(st) => {
            out.what = SEND_COMPLETED;
            out.status = st;
        }
        SendEvent::Probe(off) => {
            out.what = SEND_PROBE;
            out.offset = off;
        }
        SendEvent::LocalFault => out.what = SEND_LOCAL_FAULT,
    }
    out
}

/// The next packet (GET: request) the window allows: true with `*off` and `*n`, or false.
///
/// # Safety
///
/// `op` came from [`exanest_send_new`]; `off` and `n` point to writable values.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_peek(
    op: *const ExanestSendOp,
    off: *mut u64,
    n: *mut u32,
) -> bool {
    // SAFETY: the caller passes a live op and writable outputs.
    let (op, off, n) = unsafe { (&(*op).0, &mut *off, &mut *n) };
    match op.peek() {
        Some((o, len)) => {
            *off = o;
            *n = len;
            true
        }
        None => false,
    }
}

/// `n` bytes at `off` went out (a prefix of what peek offered): the bytes of them sent before.
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_sent(
    op: *mut ExanestSendOp,
    off: u64,
    n: u32,
    now: u64,
) -> u64 {
    // SAFETY: forwarded from the caller.
    unsafe { op_mut(op) }.on_sent(off, n, now)
}

/// The packets from `low` on never left (withdrawn from the port after a NACK).
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_withdrawn(op: *mut ExanestSendOp, low: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { op_mut(op) }.on_withdrawn(low)
}

/// The timer fired while this side stalls on its own fault: wait again, budget untouched.
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_postpone(op: *mut ExanestSendOp, now: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { op_mut(op) }.postpone(now)
}

/// GET: this side found its destination unmapped at what is placed, before asking past it,
/// and raises its own fault: no timer runs until the RESUME.
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_local_fault(op: *mut ExanestSendOp) {
    // SAFETY: forwarded from the caller.
    unsafe { op_mut(op) }.local_fault()
}

/// An ACK of everything below `off` and of the blocks of `sack`, answering the packet of
/// sequence number `echo`.
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_ack(
    op: *mut ExanestSendOp,
    off: u64,
    sack: u32,
    echo: u32,
    now: u64,
) -> ExanestSendEvent {
    // SAFETY: forwarded from the caller.
    unsafe { event(op, |s| s.on_ack(off, sack, echo, now)) }
}

/// GET: what to do with `n` bytes of READ_RESP data at `off` ([`SendOp::data_act`]):
/// `EXANEST_DATA_DROP`, `_PLACE` or `_PLACE_AHEAD`; then [`exanest_send_data`] says what was
/// placed.
///
/// # Safety
///
/// `op` came from [`exanest_send_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_data_act(op: *const ExanestSendOp, off: u64, n: u64) -> u32 {
    // SAFETY: the caller passes a live op from `exanest_send_new`.
    match unsafe { &(*op).0 }.data_act(off, n) {
        DataAct::Drop => DATA_DROP,
        DataAct::Place => DATA_PLACE,
        DataAct::PlaceAhead => DATA_PLACE_AHEAD,
    }
}

/// `ExanestRttTable`: the round trips to the peers ([`RttTable`]), opaque to C.
pub struct ExanestRttTable(RttTable);

/// A table that has measured nothing; free it with [`exanest_rtt_free`].
#[no_mangle]
pub extern "C" fn exanest_rtt_new() -> *mut ExanestRttTable {
    Box::into_raw(Box::new(ExanestRttTable(RttTable::new())))
}

/// Free what [`exanest_rtt_new`] returned (null is ignored).
///
/// # Safety
///
/// `t` is null or came from [`exanest_rtt_new`] and is not used again.
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_free(t: *mut ExanestRttTable) {
    if !t.is_null() {
        // SAFETY: `t` came from `Box::into_raw` in `exanest_rtt_new` and is freed once.
        drop(unsafe { Box::from_raw(t) });
    }
}

/// A round trip of `ns` to `node`, measured.
///
/// # Safety
///
/// `t` came from [`exanest_rtt_new`], is not freed, and nothing else uses it meanwhile.
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_sample(t: *mut ExanestRttTable, node: u16, ns: u64) {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*t).0 }.sample(node, ns)
}

/// A tail-loss probe to `node` was judged, `spurious` or needed ([`RttTable::probe_judged`]).
///
/// # Safety
///
/// As [`exanest_rtt_sample`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_probe_judged(
    t: *mut ExanestRttTable,
    node: u16,
    spurious: bool,
) {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*t).0 }.probe_judged(node, spurious)
}

/// The first answer of an op to `node` (an event's `first_answer`, not 0): after
/// [`FIRST_FAULTED`] the peer's next ops send their first packet alone, after
/// [`FIRST_PLACED`] no longer ([`RttTable::first_answered`]).
///
/// # Safety
///
/// As [`exanest_rtt_sample`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_first_answered(
    t: *mut ExanestRttTable,
    node: u16,
    answer: u32,
) {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*t).0 }.first_answered(node, answer == FIRST_FAULTED)
}

/// `node` answered an op of this node ([`RttTable::answered`]).
///
/// # Safety
///
/// `t` came from [`exanest_rtt_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_answered(t: *mut ExanestRttTable, node: u16) {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*t).0 }.answered(node)
}

/// Whether `node` ever answered ([`RttTable::heard`]).
///
/// # Safety
///
/// `t` came from [`exanest_rtt_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_heard(t: *const ExanestRttTable, node: u16) -> bool {
    // SAFETY: the caller's contract above.
    unsafe { &(*t).0 }.heard(node)
}

/// Whether an op to `node` sends its first packet alone ([`RttTable::first_alone`]).
///
/// # Safety
///
/// `t` came from [`exanest_rtt_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_first_alone(t: *const ExanestRttTable, node: u16) -> bool {
    // SAFETY: the caller's contract above.
    unsafe { &(*t).0 }.first_alone(node)
}

/// The timeouts of an op to `node`: `*rto` (at least `floor`, at most `cap`) and `*pto` (0:
/// no tail-loss probe), as [`RttTable::timeouts`]; the smoothed round trip, or 0 if none was
/// measured.
///
/// # Safety
///
/// `t` came from [`exanest_rtt_new`] and is not freed; `rto` and `pto` point to writable
/// values.
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_timeouts(
    t: *const ExanestRttTable,
    node: u16,
    floor: u64,
    cap: u64,
    rto: *mut u64,
    pto: *mut u64,
) -> u64 {
    // SAFETY: the caller's contract above.
    let t = unsafe { &(*t).0 };
    let (r, p) = t.timeouts(node, floor, cap);
    // SAFETY: the caller passes writable `rto` and `pto`.
    unsafe {
        rto.write(r);
        pto.write(p);
    }
    t.get(node).and_then(|r| r.srtt()).unwrap_or(0)
}

/// The flow of a window: `reads` (a GET's data, asked from the peer) or writes.
fn flow(reads: bool) -> Flow {
    if reads {
        Flow::Reads
    } else {
        Flow::Writes
    }
}

/// How many of `want` bytes may go to (`reads`: be asked from) `node` with `in_flight` bytes
/// (every op of that flow to it, as [`exanest_send_in_flight`] says) in flight: whole `unit`s
/// within its window under `cap`, one `unit` when nothing is in flight, 0 for none
/// ([`exanest_core::netop::cc::Window::grant`]).
///
/// # Safety
///
/// `t` came from [`exanest_rtt_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_grant(
    t: *const ExanestRttTable,
    node: u16,
    reads: bool,
    cap: u64,
    in_flight: u64,
    want: u64,
    unit: u64,
) -> u64 {
    // SAFETY: the caller's contract above.
    unsafe { &(*t).0 }
        .window(node, flow(reads))
        .grant(cap, in_flight, want, unit)
}

/// The most in flight to one peer ([`exanest_core::netop::cc::cap`]): `window` at most, near
/// twice the bandwidth-delay product of a link of `bw_mbs` MB/s whose round trip with no queue
/// is `rtt_ns`. What the window calls take as `cap`.
#[no_mangle]
pub extern "C" fn exanest_cc_cap(window: u64, bw_mbs: u64, rtt_ns: u64) -> u64 {
    exanest_core::netop::cc::cap(window, bw_mbs, rtt_ns)
}

/// `node`'s window now, bytes, within `cap`.
///
/// # Safety
///
/// As [`exanest_rtt_grant`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_window(
    t: *const ExanestRttTable,
    node: u16,
    reads: bool,
    cap: u64,
) -> u64 {
    // SAFETY: the caller's contract above.
    unsafe { &(*t).0 }.window(node, flow(reads)).size(cap)
}

/// `bytes` more placed of a flow with `node` (writes: its ACK, echoing congestion or not;
/// `reads`: its READ_RESP data, marked or not): the window follows
/// ([`exanest_core::netop::cc::Window::on_ack`]). Returns whether it was cut.
///
/// # Safety
///
/// As [`exanest_rtt_sample`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_ack(
    t: *mut ExanestRttTable,
    node: u16,
    reads: bool,
    cap: u64,
    bytes: u64,
    marked: bool,
) -> bool {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*t).0 }.on_ack(node, flow(reads), cap, bytes, marked)
}

/// Forget every peer (the engine's reset).
///
/// # Safety
///
/// As [`exanest_rtt_sample`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rtt_clear(t: *mut ExanestRttTable) {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*t).0 }.clear()
}

/// A PUT's bytes in flight, sent and not yet placed ([`SendOp::in_flight`]).
///
/// # Safety
///
/// `op` came from [`exanest_send_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_in_flight(op: *const ExanestSendOp) -> u64 {
    // SAFETY: the caller's contract above.
    unsafe { &(*op).0 }.in_flight()
}

/// A NACK at `off` with `status`, answering the packet of sequence number `echo` (a status no
/// receiver sends changes nothing).
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_nack(
    op: *mut ExanestSendOp,
    off: u64,
    status: i32,
    echo: u32,
    now: u64,
) -> ExanestSendEvent {
    // SAFETY: forwarded from the caller.
    unsafe {
        event(op, |s| match Nack::from_status(status) {
            Some(why) => s.on_nack(off, why, echo, now),
            None => SendEvent::None,
        })
    }
}

/// A RESUME from `off`, echoing the sequence number of the packet NACKed (or probe answered).
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_resume(
    op: *mut ExanestSendOp,
    off: u64,
    echo: u32,
    now: u64,
) -> ExanestSendEvent {
    // SAFETY: forwarded from the caller.
    unsafe { event(op, |s| s.on_resume(off, echo, now)) }
}

/// The sequence number of the next packet sent for the op (data, a probe, a read request).
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_seq(op: *mut ExanestSendOp) -> u32 {
    // SAFETY: forwarded from the caller.
    unsafe { op_mut(op) }.take_seq()
}

/// GET: READ_RESP data at `off`, `placed` of its `n` bytes placed here, answering the
/// request whose sequence number it echoes (`echo`; [`SendOp::data_echo`]).
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_data(
    op: *mut ExanestSendOp,
    off: u64,
    placed: u64,
    n: u64,
    echo: u32,
    now: u64,
) -> ExanestSendEvent {
    // SAFETY: forwarded from the caller.
    unsafe {
        event(op, |s| {
            s.data_echo(echo);
            s.on_data(off, placed, n, now)
        })
    }
}

/// The timer fired at `now`.
///
/// # Safety
///
/// As [`op_mut`].
#[no_mangle]
pub unsafe extern "C" fn exanest_send_timeout(
    op: *mut ExanestSendOp,
    now: u64,
) -> ExanestSendEvent {
    // SAFETY: forwarded from the caller.
    unsafe { event(op, |s| s.on_timeout(now)) }
}

/// Bytes placed at the far end (GET: here).
///
/// # Safety
///
/// `op` came from [`exanest_send_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_acked(op: *const ExanestSendOp) -> u64 {
    // SAFETY: the caller passes a live op.
    unsafe { &(*op).0 }.acked()
}

/// Whether the op waits for the peer's RESUME.
///
/// # Safety
///
/// `op` came from [`exanest_send_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_paused(op: *const ExanestSendOp) -> bool {
    // SAFETY: the caller passes a live op.
    unsafe { &(*op).0 }.state() == SendState::Paused
}

/// When the timer must fire next (ns on the caller's clock), or -1 for never.
///
/// # Safety
///
/// `op` came from [`exanest_send_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_send_deadline(op: *const ExanestSendOp) -> i64 {
    // SAFETY: the caller passes a live op.
    match unsafe { &(*op).0 }.deadline() {
        Some(d) => i64::try_from(d).unwrap_or(i64::MAX),
        None => -1,
    }
}

/// The constants the header defines, by name: what `tests/c_abi.rs` compares.
pub const CONSTANTS: &[(&str, i64)] = &[
    ("EXANEST_PKT_HDR", HEADER as i64),
    ("EXANEST_SEND_UNHEARD_NS", UNHEARD_NS as i64),
    ("EXANEST_EHOSTUNREACH", EHOSTUNREACH as i64),
    ("EXANEST_PKT_MTU", MTU as i64),
    ("EXANEST_PKT_WRITE", Op::Write.code() as i64),
    ("EXANEST_PKT_READ_REQ", Op::ReadReq.code() as i64),
    ("EXANEST_PKT_READ_RESP", Op::ReadResp.code() as i64),
    ("EXANEST_PKT_ACK", Op::Ack.code() as i64),
    ("EXANEST_PKT_NACK", Op::Nack.code() as i64),
    ("EXANEST_PKT_RESUME", Op::Resume.code() as i64),
    ("EXANEST_PKT_MAILBOX", Op::Mailbox.code() as i64),
    ("EXANEST_PKT_WRITE_IMM", Op::WriteImm.code() as i64),
    ("EXANEST_PKT_ABORT", Op::Abort.code() as i64),
    ("EXANEST_PKT_ECE", ECE as i64),
    ("EXANEST_NACK_FAULT", Nack::Fault.status() as i64),
    ("EXANEST_NACK_NOT_READY", Nack::NotReady.status() as i64),
    ("EXANEST_NACK_SEQUENCE", Nack::Sequence.status() as i64),
    ("EXANEST_NACK_RNR", Nack::Rnr.status() as i64),
    ("EXANEST_NACK_AHEAD", Nack::Ahead.status() as i64),
    ("EXANEST_BAD_SIZE", bad_code(BadPacket::Size) as i64),
    ("EXANEST_BAD_MAGIC", bad_code(BadPacket::Magic) as i64),
    ("EXANEST_BAD_OP", bad_code(BadPacket::Op) as i64),
    ("EXANEST_BAD_LENGTH", bad_code(BadPacket::Length) as i64),
    ("EXANEST_BAD_CHECKSUM", bad_code(BadPacket::Checksum) as i64),
    ("EXANEST_SEND_PUT", SEND_PUT as i64),
    ("EXANEST_SEND_GET", SEND_GET as i64),
    ("EXANEST_SEND_NOTHING", SEND_NOTHING as i64),
    ("EXANEST_SEND_COMPLETED", SEND_COMPLETED as i64),
    ("EXANEST_SEND_PROBE", SEND_PROBE as i64),
    ("EXANEST_SEND_LOCAL_FAULT", SEND_LOCAL_FAULT as i64),
    ("EXANEST_PROBE_SPURIOUS", PROBE_SPURIOUS as i64),
    ("EXANEST_PROBE_NEEDED", PROBE_NEEDED as i64),
    ("EXANEST_FIRST_PLACED", FIRST_PLACED as i64),
    ("EXANEST_FIRST_FAULTED", FIRST_FAULTED as i64),
    ("EXANEST_DATA_DROP", DATA_DROP as i64),
    ("EXANEST_DATA_PLACE", DATA_PLACE as i64),
    ("EXANEST_DATA_PLACE_AHEAD", DATA_PLACE_AHEAD as i64),
    ("EXANEST_RX_EP_READY", netrx::ep::READY as i64),
    ("EXANEST_RX_MBOX_ON", netrx::ep::MBOX_ON as i64),
    ("EXANEST_RX_MBOX_ROOM", netrx::ep::MBOX_ROOM as i64),
    ("EXANEST_RX_EP_OPEN", netrx::ep::OPEN as i64),
    ("EXANEST_RX_MBOX_OWNED", netrx::ep::MBOX_OWNED as i64),
    ("EXANEST_RX_NOTHING", RX_NOTHING as i64),
    ("EXANEST_RX_PLACE", RX_PLACE as i64),
    ("EXANEST_RX_SERVE", RX_SERVE as i64),
    ("EXANEST_RX_REPORT", RX_REPORT as i64),
    ("EXANEST_RX_PLACE_AHEAD", RX_PLACE_AHEAD as i64),
    ("EXANEST_RX_DROPPED", RX_DROPPED as i64),
    ("EXANEST_RX_DUPLICATE", RX_DUPLICATE as i64),
    ("EXANEST_RX_RNR", RX_RNR as i64),
    ("EXANEST_RX_WANT_EP", RX_WANT_EP as i64),
    ("EXANEST_RX_KEY_FAIL", RX_KEY_FAIL as i64),
    ("EXANEST_RX_QUARANTINE", RX_QUARANTINE as i64),
    ("EXANEST_RX_QUARANTINED", RX_QUARANTINED as i64),
    ("EXANEST_RX_FREE", RxState::Free.code() as i64),
    ("EXANEST_RX_RECEIVING", RxState::Receiving.code() as i64),
    ("EXANEST_RX_FAULTED", RxState::Faulted.code() as i64),
    ("EXANEST_RX_NOT_READY", RxState::NotReady.code() as i64),
    ("EXANEST_RX_RNR_WAIT", RxState::Rnr.code() as i64),
    ("EXANEST_RX_DONE", RxState::Done.code() as i64),
    ("EXANEST_RX_ERROR", RxState::Error.code() as i64),
    ("EXANEST_RX_WRITE", RX_WRITE as i64),
    ("EXANEST_RX_MAILBOX", RX_MAILBOX as i64),
    ("EXANEST_RX_READ", RX_READ as i64),
    ("EXANEST_RX_WRITE_IMM", RX_WRITE_IMM as i64),
    ("EXANEST_RX_KEYLESS", netrx::KEYLESS as i64),
];
