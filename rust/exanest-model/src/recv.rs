// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The receiving side's C ABI: [`exanest_core::netrx`]'s table of remote ops, the key check
//! and the answers, as the model's `exanest_net.c` calls them (`exanest_rx_*` in
//! `tests/qemu-model/exanest_core.h`). The C moves the bytes and knows its endpoints; every
//! decision is the core's.

use crate::{header_of, ExanestPkt};
use exanest_core::netrx::{Act, RecvTable, Rkey, RxKind, Slot, Step};
use exanest_core::packet::Header;

/// `ExanestRkey`: an entry of the engine's rkey table.
pub type ExanestRkey = Rkey;

/// `ExanestRxStep`: what a packet or a call asks of the caller.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExanestRxStep {
    /// `EXANEST_RX_NOTHING`, `_PLACE`, `_SERVE` or `_REPORT` ([`Act`]).
    pub what: u32,
    /// The slot PLACE, SERVE and REPORT are about.
    pub slot: u32,
    /// SERVE: the first byte to send.
    pub from: u64,
    /// SERVE: the end of the bytes to send.
    pub to: u64,
    /// `EXANEST_RX_DROPPED`, `_DUPLICATE`, `_RNR`, `_WANT_EP`, `_KEY_FAIL`, `_QUARANTINE`,
    /// `_QUARANTINED`: what to count, and whether the endpoint is wanted.
    pub counts: u32,
    /// Send `answer`.
    pub reply: bool,
    /// The answer (a NACK or RESUME) counts as one sent.
    pub counted: bool,
    /// The answer; no payload.
    pub answer: ExanestPkt,
}

/// `ExanestRxStep.what` values ([`Act`]).
pub const RX_NOTHING: u32 = 0;
/// Place the packet's payload, then `exanest_rx_placed`.
pub const RX_PLACE: u32 = 1;
/// Send READ_RESP packets for `[from, to)`, then `exanest_rx_served`.
pub const RX_SERVE: u32 = 2;
/// Report the slot's fault on an idle channel, and `exanest_rx_hold` it.
pub const RX_REPORT: u32 = 3;
/// A WRITE's block past a gap: place all of the payload or none of it, then
/// `exanest_rx_placed`.
pub const RX_PLACE_AHEAD: u32 = 4;
/// `ExanestRxStep.counts`: the packet was dropped.
pub const RX_DROPPED: u32 = 1 << 0;
/// A duplicate.
pub const RX_DUPLICATE: u32 = 1 << 1;
/// The answer is an RNR NACK.
pub const RX_RNR: u32 = 1 << 2;
/// The endpoint is wanted.
pub const RX_WANT_EP: u32 = 1 << 3;
/// The packet's key failed.
pub const RX_KEY_FAIL: u32 = 1 << 4;
/// That failure quarantined its source.
pub const RX_QUARANTINE: u32 = 1 << 5;
/// The packet came from a quarantined source (dropped).
pub const RX_QUARANTINED: u32 = 1 << 6;

/// `ExanestRxSlot`: a slot of the table as the caller may read it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExanestRxSlot {
    /// `EXANEST_RX_FREE` … `EXANEST_RX_ERROR` ([`exanest_core::netrx::RxState::code`]).
    pub state: u32,
    /// `EXANEST_RX_WRITE`, `_MAILBOX`, `_READ` or `_WRITE_IMM`.
    pub kind: u32,
    /// The op's id at its source.
    pub op_id: u32,
    /// The endpoint it is for.
    pub ep: u32,
    /// The token of the channel reporting its fault, or 0.
    pub holder: u32,
    /// An ended op's positive errno.
    pub err: i32,
    /// Its source node.
    pub src: u16,
    /// Its key (a MAILBOX: the sender's endpoint).
    pub rkey: u64,
    /// Its address here.
    pub addr: u64,
    /// Its length.
    pub len: u64,
    /// Bytes placed (served).
    pub placed: u64,
    /// A fault's address.
    pub fault_addr: u64,
}

/// `ExanestRxSlot.kind` values.
pub const RX_WRITE: u32 = 0;
/// A MAILBOX.
pub const RX_MAILBOX: u32 = 1;
/// A GET this node serves.
pub const RX_READ: u32 = 2;
/// A PUT with immediate data (WRITE_IMM).
pub const RX_WRITE_IMM: u32 = 3;

/// `ExanestRecvTable`: one node's receive table, opaque to C.
pub struct ExanestRecvTable(RecvTable);

fn pkt_of(h: &Header) -> ExanestPkt {
    ExanestPkt {
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
        plen: 0,
        span: h.span,
        ce: u8::from(h.ce),
        payload: core::ptr::null(),
    }
}

/// A step as C reads it.
pub fn step_of(s: &Step) -> ExanestRxStep {
    let (what, slot, from, to) = match s.act {
        Act::Nothing => (RX_NOTHING, 0, 0, 0),
        Act::Place(i) => (RX_PLACE, i, 0, 0),
        Act::PlaceAhead(i) => (RX_PLACE_AHEAD, i, 0, 0),
        Act::Serve { slot, from, to } => (RX_SERVE, slot, from, to),
        Act::Report(i) => (RX_REPORT, i, 0, 0),
    };
    let counts = [
        (s.dropped, RX_DROPPED),
        (s.duplicate, RX_DUPLICATE),
        (s.rnr, RX_RNR),
        (s.want_ep, RX_WANT_EP),
        (s.key_failed, RX_KEY_FAIL),
        (s.quarantine, RX_QUARANTINE),
        (s.quarantined, RX_QUARANTINED),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .fold(0, |all, (_, bit)| all | bit);
    let empty = ExanestPkt {
        op: 0,
        src: 0,
        dst: 0,
        ep: 0,
        op_id: 0,
        seq: 0,
        status: 0,
        rkey: 0,
        addr: 0,
        len: 0,
        offset: 0,
        plen: 0,
        span: 0,
        ce: 0,
        payload: core::ptr::null(),
    };
    ExanestRxStep {
        what,
        // A slot index is below RX_OPS.
        slot: slot as u32,
        from,
        to,
        counts,
        reply: s.reply.is_some(),
        counted: s.reply.is_some_and(|r| r.counted),
        answer: s.reply.map_or(empty, |r| pkt_of(&r.header)),
    }
}

/// A slot as C reads it.
pub fn slot_of(r: &Slot) -> ExanestRxSlot {
    ExanestRxSlot {
        state: r.state().code(),
        kind: match r.kind() {
            RxKind::Write => RX_WRITE,
            RxKind::Mailbox => RX_MAILBOX,
            RxKind::Read => RX_READ,
            RxKind::WriteImm => RX_WRITE_IMM,
        },
        op_id: r.op_id(),
        ep: r.ep(),
        holder: r.holder(),
        err: r.err(),
        src: r.src(),
        rkey: r.rkey(),
        addr: r.addr(),
        len: r.len(),
        placed: r.placed(),
        fault_addr: r.fault_addr(),
    }
}

/// A new, empty table for node `node`; free it with [`exanest_rx_free`].
#[no_mangle]
pub extern "C" fn exanest_rx_new(node: u16) -> *mut ExanestRecvTable {
    Box::into_raw(Box::new(ExanestRecvTable(RecvTable::new(node))))
}

/// Free what [`exanest_rx_new`] returned (null is ignored).
///
/// # Safety
///
/// `t` is null or came from [`exanest_rx_new`] and is not used again.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_free(t: *mut ExanestRecvTable) {
    if !t.is_null() {
        // SAFETY: `t` came from `Box::into_raw` in `exanest_rx_new` and is freed once.
        drop(unsafe { Box::from_raw(t) });
    }
}

/// The table `t`, for a call.
///
/// # Safety
///
/// `t` came from [`exanest_rx_new`], is not freed, and no other reference to it is live.
unsafe fn table<'a>(t: *mut ExanestRecvTable) -> &'a mut RecvTable {
    // SAFETY: the caller's contract above.
    unsafe { &mut (*t).0 }
}

/// The engine was reset: every op goes.
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_reset(t: *mut ExanestRecvTable) {
    // SAFETY: forwarded from the caller.
    unsafe { table(t) }.reset()
}

/// Packet `*k` (WRITE, READ_REQ or MAILBOX) arrived: `keys[0..nkeys)` is the rkey table,
/// `ep` what its endpoint can take (`EXANEST_RX_EP_*`), `idle_ns` how long an unfinished op
/// may go without a packet before its slot may be taken.
///
/// # Safety
///
/// As [`table`]; `k` points to a valid `ExanestPkt`, and `keys` to `nkeys` entries (or is
/// null with `nkeys` 0).
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_packet(
    t: *mut ExanestRecvTable,
    k: *const ExanestPkt,
    keys: *const ExanestRkey,
    nkeys: u32,
    ep: u32,
    now: u64,
    idle_ns: u64,
) -> ExanestRxStep {
    // SAFETY: the caller passes a valid packet.
    let k = unsafe { &*k };
    let keys: &[Rkey] = if keys.is_null() || nkeys == 0 {
        &[]
    } else {
        // SAFETY: the caller guarantees `nkeys` readable entries at `keys`.
        unsafe { core::slice::from_raw_parts(keys, nkeys as usize) }
    };
    let Some(h) = header_of(k) else {
        return step_of(&Step {
            dropped: true,
            ..Step::default()
        });
    };
    // SAFETY: forwarded from the caller.
    let t = unsafe { table(t) };
    step_of(&t.on_packet(&h, usize::from(k.plen), keys, ep, now, idle_ns))
}

/// Call `f` with the table and packet `*k`'s header (a dropped step if `*k` is no packet).
///
/// # Safety
///
/// As [`table`]; `k` points to a valid `ExanestPkt`.
unsafe fn with_packet(
    t: *mut ExanestRecvTable,
    k: *const ExanestPkt,
    f: impl FnOnce(&mut RecvTable, &Header) -> Step,
) -> ExanestRxStep {
    // SAFETY: the caller passes a valid packet.
    let Some(h) = header_of(unsafe { &*k }) else {
        return step_of(&Step {
            dropped: true,
            ..Step::default()
        });
    };
    // SAFETY: forwarded from the caller.
    step_of(&f(unsafe { table(t) }, &h))
}

/// The PLACE of packet `*k` on `slot` placed `got` bytes; `fault` says whether the rest did
/// not translate, from `fault_addr`.
///
/// # Safety
///
/// As [`with_packet`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_placed(
    t: *mut ExanestRecvTable,
    slot: u32,
    k: *const ExanestPkt,
    got: u64,
    fault: bool,
    fault_addr: u64,
) -> ExanestRxStep {
    // SAFETY: forwarded from the caller.
    unsafe {
        with_packet(t, k, |t, h| {
            t.placed(slot as usize, h, got, fault.then_some(fault_addr))
        })
    }
}

/// The SERVE of READ_REQ `*k` on `slot` sent the bytes up to `upto`; `fault` says whether
/// it stopped there on a source address that did not translate, `fault_addr`.
///
/// # Safety
///
/// As [`with_packet`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_served(
    t: *mut ExanestRecvTable,
    slot: u32,
    k: *const ExanestPkt,
    upto: u64,
    fault: bool,
    fault_addr: u64,
) -> ExanestRxStep {
    // SAFETY: forwarded from the caller.
    unsafe {
        with_packet(t, k, |t, h| {
            t.served(slot as usize, h, upto, fault.then_some(fault_addr))
        })
    }
}

/// Slot `i`, into `*out`: false (and `*out` untouched) past the table.
///
/// # Safety
///
/// `t` came from [`exanest_rx_new`] and is not freed; `out` points to a writable
/// `ExanestRxSlot`.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_slot(
    t: *const ExanestRecvTable,
    i: u32,
    out: *mut ExanestRxSlot,
) -> bool {
    // SAFETY: the caller passes a live table.
    let Some(r) = unsafe { &(*t).0 }.slot(i as usize) else {
        return false;
    };
    let v = slot_of(r);
    // SAFETY: the caller guarantees a writable, aligned `ExanestRxSlot` at `out`.
    unsafe { out.write(v) };
    true
}

/// Channel `token` (not 0) reports slot `i`'s fault: whether it may.
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_hold(t: *mut ExanestRecvTable, i: u32, token: u32) -> bool {
    // SAFETY: forwarded from the caller.
    unsafe { table(t) }.hold(i as usize, token)
}

/// Placing packet `seq` (`has_seq` false: the RESUME of the slot's last page ahead) of slot
/// `i` found that its page at `addr`, past the bytes placed, does not translate, and idle
/// channel `token` (not 0) can report it: the NACK AHEAD to send (`reply` false: not taken,
/// nothing changed; [`exanest_core::netrx::RecvTable::fault_ahead`]).
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_fault_ahead(
    t: *mut ExanestRecvTable,
    i: u32,
    has_seq: bool,
    seq: u32,
    addr: u64,
    token: u32,
) -> ExanestRxStep {
    // SAFETY: forwarded from the caller.
    let s = unsafe { table(t) }.fault_ahead(i as usize, has_seq.then_some(seq), addr, token);
    step_of(&s.unwrap_or_default())
}

/// Channel `token` stopped with slot `i`'s fault unanswered: it waits for another channel.
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_release(t: *mut ExanestRecvTable, i: u32, token: u32) {
    // SAFETY: forwarded from the caller.
    unsafe { table(t) }.release(i as usize, token)
}

/// The driver resolved the fault channel `token` reports on slot `i`: the RESUME to send.
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_resolved(
    t: *mut ExanestRecvTable,
    i: u32,
    token: u32,
) -> ExanestRxStep {
    // SAFETY: forwarded from the caller.
    step_of(&unsafe { table(t) }.resolved(i as usize, token))
}

/// The driver could not resolve it: the NACK (with `status`, the driver's negative errno).
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_refused(
    t: *mut ExanestRecvTable,
    i: u32,
    token: u32,
    status: i32,
) -> ExanestRxStep {
    // SAFETY: forwarded from the caller.
    step_of(&unsafe { table(t) }.refused(i as usize, token, status))
}

/// Endpoint `ep` was closed: slot `i`, if an unfinished op of it, ends (the NACK to send).
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_close(
    t: *mut ExanestRecvTable,
    i: u32,
    ep: u32,
) -> ExanestRxStep {
    // SAFETY: forwarded from the caller.
    step_of(&unsafe { table(t) }.close(i as usize, ep))
}

/// What slot `i` waited for came (its endpoint resident, its ring's room): the RESUME.
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_wake(t: *mut ExanestRecvTable, i: u32) -> ExanestRxStep {
    // SAFETY: forwarded from the caller.
    step_of(&unsafe { table(t) }.wake(i as usize))
}

/// Key failures a source may have within a second before quarantine (`NET_KEYFAIL_LIMIT`;
/// 0: never).
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_set_keyfail_limit(t: *mut ExanestRecvTable, limit: u32) {
    // SAFETY: forwarded from the caller.
    unsafe { table(t) }.set_keyfail_limit(limit)
}

/// The limit [`exanest_rx_set_keyfail_limit`] set (the default after a reset).
///
/// # Safety
///
/// `t` came from [`exanest_rx_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_keyfail_limit(t: *const ExanestRecvTable) -> u32 {
    // SAFETY: the caller passes a live table.
    unsafe { &(*t).0 }.keyfail_limit()
}

/// Key failures from node `src` since it was last released.
///
/// # Safety
///
/// `t` came from [`exanest_rx_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_keyfails(t: *const ExanestRecvTable, src: u32) -> u32 {
    // SAFETY: the caller passes a live table.
    let t = unsafe { &(*t).0 };
    u16::try_from(src).map_or(0, |s| t.keyfails(s))
}

/// The quarantined nodes: bit n is node n.
///
/// # Safety
///
/// `t` came from [`exanest_rx_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_quarantined(t: *const ExanestRecvTable) -> u64 {
    // SAFETY: the caller passes a live table.
    unsafe { &(*t).0 }.quarantined()
}

/// Release the nodes of `mask` from quarantine, and forget their key failures.
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_release_nodes(t: *mut ExanestRecvTable, mask: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { table(t) }.release_nodes(mask)
}

/// The READ_RESP bytes one requesting node may have waiting in the port
/// ([`RecvTable::set_read_cap`]).
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_set_read_cap(t: *mut ExanestRecvTable, bytes: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { table(t) }.set_read_cap(bytes)
}

/// `n` bytes of READ_RESP for node `dst` left the port ([`RecvTable::read_sent`]).
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_read_sent(t: *mut ExanestRecvTable, dst: u32, n: u64) {
    // SAFETY: forwarded from the caller.
    let t = unsafe { table(t) };
    if let Ok(d) = u16::try_from(dst) {
        t.read_sent(d, n);
    }
}

/// READ_RESP bytes for node `dst` still waiting in the port ([`RecvTable::reading`]).
///
/// # Safety
///
/// `t` came from [`exanest_rx_new`] and is not freed.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_reading(t: *const ExanestRecvTable, dst: u32) -> u64 {
    // SAFETY: the caller passes a live table.
    let t = unsafe { &(*t).0 };
    u16::try_from(dst).map_or(0, |d| t.reading(d))
}

/// Coalesce ACKs: one in `every` packets placed in order, or after `delay_ns`
/// ([`RecvTable::set_acks`]).
///
/// # Safety
///
/// As [`table`].
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_set_acks(t: *mut ExanestRecvTable, every: u32, delay_ns: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { table(t) }.set_acks(every, delay_ns)
}

/// When the first owed ACK is due, in `*at`: false when none is owed ([`RecvTable::ack_due`]).
///
/// # Safety
///
/// `t` came from [`exanest_rx_new`] and is not freed; `at` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_ack_due(t: *const ExanestRecvTable, at: *mut u64) -> bool {
    // SAFETY: the caller passes a live table.
    let t = unsafe { &(*t).0 };
    match t.ack_due() {
        Some(d) => {
            // SAFETY: the caller passes a writable `at`.
            unsafe { *at = d };
            true
        }
        None => false,
    }
}

/// An owed ACK due at `now`, in `*answer`: false when none is (call until false;
/// [`RecvTable::flush_ack`]).
///
/// # Safety
///
/// As [`table`]; `answer` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn exanest_rx_flush_ack(
    t: *mut ExanestRecvTable,
    now: u64,
    answer: *mut ExanestPkt,
) -> bool {
    // SAFETY: forwarded from the caller.
    match unsafe { table(t) }.flush_ack(now) {
        Some(r) => {
            // SAFETY: the caller passes a writable `answer`.
            unsafe { *answer = pkt_of(&r.header) };
            true
        }
        None => false,
    }
}
