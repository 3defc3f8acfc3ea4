// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The receiving side of the link (Documentation/network.rst, "Receiving"): the table of the
//! remote ops a node receives, the key check, and every answer the node sends for them.
//!
//! A WRITE is placed in order: data past a gap is dropped and the gap NACKed once (SEQUENCE),
//! data before it is a duplicate and ACKed again. A page that does not translate stops the op
//! there: NACK FAULT, the fault reported to the driver on a channel, RESUME once resolved. A
//! MAILBOX is one packet, named by its sender's endpoint (the key field) and a random cookie
//! (the address field, so that an off-path node cannot forge its answers), placed once in the
//! destination's ring (a full ring NACKs RNR and
//! RESUMEs when its reader frees a slot). A READ_REQ is served from the op's source, at most
//! [`READ_MAX`] bytes a request, and only a fault is kept. What a node serves another waits in
//! its port until the link takes it: at most the read cap ([`RecvTable::set_read_cap`], as
//! InfiniBand's `max_rd_atomic` bounds a responder's reads) per requesting node; a request that
//! would pass it is NACKed RNR, so a 64-byte request cannot draw an unbounded amount of data
//! (Transport v2, defect 5). An endpoint with no resident context NACKs NOT_READY and RESUMEs
//! when it becomes resident.
//!
//! The table holds [`RX_OPS`] ops: a new op takes a free slot, else the oldest finished one,
//! else one idle for longer than the caller's idle time (its sender gave up, was killed or
//! forged it; a fault a channel holds is never taken). With none to take, the op is NACKed RNR
//! and nothing is kept; its sender probes. Keyless ops (MAILBOX) hold at most [`KEYLESS`]
//! unfinished slots, so forged messages cannot take the table from keyed work.
//!
//! The caller (the engine model, `tests/qemu-model/exanest_net.c`, through the C ABI of
//! `rust/exanest-model`) moves the bytes and knows its endpoints: it says what the packet's
//! endpoint can take ([`ep`]), places or serves what a [`Step`] asks and reports back, sends
//! the [`Reply`] and counts what the step reports. Times are ns on the caller's clock.

mod history;
pub use history::{Admit, History, Past, QUIET_NS, REACH, WINDOW};

use crate::abi::MBOX_MAX;
use crate::packet::{Header, Nack, Op, ECE, MTU};
use crate::regs::cqe_status;
use crate::regs::net::{MAX_NODES, RKEY_BOUND, RKEY_READ, RKEY_VALID, RKEY_WRITE, RX_OPS};

/// Bad address: the driver could not resolve a receiver fault and wrote no errno (positive
/// errno, as NACKs carry it negated).
pub const EFAULT: i32 = 14;
/// The endpoint has no mailbox.
pub const ECONNREFUSED: i32 = 111;
/// The op is finished and forgotten, or too old to tell.
pub const ESTALE: i32 = 116;
/// The op's sender ended it (ABORT): what its slot says, nobody is answered.
pub const ECANCELED: i32 = 125;
/// Every key failure: no such key for this endpoint, or not with this right, or not over
/// this range (positive errno, as NACKs carry it negated).
pub const ENOKEY: i32 = 126;

/// The blocks of a WRITE that a receiver places out of order: whole ones, each one packet of
/// [`MTU`] bytes at an offset that is a multiple of it (Transport v2, selective
/// retransmission). An ACK's `status` says which blocks past its offset are placed.
pub const BLOCK: u64 = MTU as u64;

/// The engine's page: the granule its translations are looked up in (`PLDMA_PAGE`).
pub const PAGE: u64 = 4096;

/// Slots that keyless ops (MAILBOX) may hold unfinished at most.
pub const KEYLESS: usize = 16;
/// Bytes one READ_REQ is served at most, whatever it asks.
pub const READ_MAX: u64 = 1 << 20;
/// The read cap of a new table: READ_RESP bytes a requesting node may have waiting in this
/// node's port.
pub const READ_CAP: u64 = 256 << 10;

/// What the packet's endpoint can take, as the caller sees it: flags for
/// [`RecvTable::on_packet`].
pub mod ep {
    /// A context is resident on the endpoint, and its function can move bytes.
    pub const READY: u32 = 1 << 0;
    /// The resident context has a mailbox.
    pub const MBOX_ON: u32 = 1 << 1;
    /// The resident context's mailbox ring has a free slot.
    pub const MBOX_ROOM: u32 = 1 << 2;
    /// A process holds the endpoint (resident or not).
    pub const OPEN: u32 = 1 << 3;
    /// The endpoint's process has a mailbox (resident or not).
    pub const MBOX_OWNED: u32 = 1 << 4;
}

/// An entry of the rkey table, as the engine's registers hold it (laid out as C does: the
/// engine model's table is an array of them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rkey {
    /// [`RKEY_VALID`] and the rights.
    pub ctrl: u32,
    /// The endpoint it is for.
    pub ep: u32,
    /// The key: 64 random bits (register map 2.5).
    pub key: u64,
    /// First byte of the region.
    pub base: u64,
    /// Bytes of the region.
    pub len: u64,
    /// 2.9, with [`RKEY_BOUND`]: the only node whose packets may use the key.
    pub node: u32,
}

/// Whether op `h` may use its whole range with its key and `right` ([`RKEY_READ`] or
/// [`RKEY_WRITE`]). The key is looked up with the packet's endpoint among the valid entries of
/// `keys`; checked at every packet, so a key revoked mid-op stops it at the next one. Every
/// failure is the same [`ENOKEY`]: no answer tells a guesser that the key, the endpoint, the
/// right, the range or (a key [`RKEY_BOUND`] to one initiator, 2.9) the source was right.
pub fn rkey_check(keys: &[Rkey], h: &Header, right: u32) -> Result<(), i32> {
    let e = keys
        .iter()
        .find(|e| e.ctrl & RKEY_VALID != 0 && e.key == h.rkey && e.ep == h.endpoint)
        .ok_or(ENOKEY)?;
    let inside = h.addr >= e.base && h.len <= e.len && h.addr - e.base <= e.len - h.len;
    let from = e.ctrl & RKEY_BOUND == 0 || e.node == u32::from(h.src);
    if e.ctrl & right == 0 || !inside || !from {
        return Err(ENOKEY);
    }
    Ok(())
}

/// Key failures a source may have within [`KEYFAIL_WINDOW_NS`] before it is quarantined, by
/// default (the engine's `NET_KEYFAIL_LIMIT` after reset).
pub const KEYFAIL_LIMIT: u32 = 256;
/// The window [`KEYFAIL_LIMIT`] counts in: one second.
pub const KEYFAIL_WINDOW_NS: u64 = 1_000_000_000;

/// Key failures per source node, and the nodes quarantined for them: a node with more than
/// the limit within one window is quarantined, and its ops are dropped until software
/// releases it. Honest failures (a key revoked mid-op: a window of packets and a few probes)
/// stay far below the limit; a guesser at line rate reaches it within microseconds.
#[derive(Clone, Debug)]
struct KeyGuard {
    limit: u32,
    /// Per node: failures since it was last released (saturating).
    total: [u32; MAX_NODES],
    /// Per node: when its current window began, and its failures in it.
    window: [(u64, u32); MAX_NODES],
    /// Bit n: node n is quarantined.
    quarantined: u64,
}

impl KeyGuard {
    fn new() -> Self {
        KeyGuard {
            limit: KEYFAIL_LIMIT,
            total: [0; MAX_NODES],
            window: [(0, 0); MAX_NODES],
            quarantined: 0,
        }
    }

    fn is_quarantined(&self, src: u16) -> bool {
        usize::from(src) < MAX_NODES && self.quarantined & (1 << src) != 0
    }

    /// A key failure from `src` at `now`: whether it quarantined the node.
    fn failed(&mut self, src: u16, now: u64) -> bool {
        let n = usize::from(src);
        if n >= MAX_NODES {
            return false;
        }
        self.total[n] = self.total[n].saturating_add(1);
        let (start, count) = &mut self.window[n];
        if *count == 0 || now.saturating_sub(*start) >= KEYFAIL_WINDOW_NS {
            *start = now;
            *count = 0;
        }
        *count = count.saturating_add(1);
        if self.limit != 0 && *count > self.limit && !self.is_quarantined(src) {
            self.quarantined |= 1 << src;
            return true;
        }
        false
    }

    /// Release the nodes of `mask`, and forget their failures.
    fn release(&mut self, mask: u64) {
        for n in 0..MAX_NODES {
            if mask & (1 << n) != 0 {
                self.total[n] = 0;
                self.window[n] = (0, 0);
            }
        }
        self.quarantined &= !mask;
    }
}

/// Where a received op is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxState {
    /// The slot holds no op.
    #[default]
    Free,
    /// Placing in order.
    Receiving,
    /// Placing (or serving) stopped at a fault being resolved.
    Faulted,
    /// Its endpoint holds no context.
    NotReady,
    /// A MAILBOX, or a WRITE_IMM's last packet: the ring is full.
    Rnr,
    /// Every byte placed (a GET's responder: nothing pending).
    Done,
    /// Refused: [`Slot::err`].
    Error,
}

impl RxState {
    /// The value the C ABI gives it.
    pub const fn code(self) -> u32 {
        match self {
            RxState::Free => 0,
            RxState::Receiving => 1,
            RxState::Faulted => 2,
            RxState::NotReady => 3,
            RxState::Rnr => 4,
            RxState::Done => 5,
            RxState::Error => 6,
        }
    }
}

/// What a received op is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxKind {
    /// A PUT this node places.
    #[default]
    Write,
    /// A MAILBOX message for an endpoint's ring.
    Mailbox,
    /// A GET this node serves.
    Read,
    /// A PUT with immediate data (WRITE_IMM): placed as a PUT; its last packet also writes a
    /// completion with the immediate in the endpoint's mailbox ring.
    WriteImm,
}

/// One slot of the table: a remote op, named by its source node and op id.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slot {
    state: RxState,
    kind: RxKind,
    src: u16,
    op_id: u32,
    ep: u32,
    rkey: u64,
    addr: u64,
    len: u64,
    /// Bytes placed: [0, placed) (a GET's responder: served up to it).
    placed: u64,
    /// [`RxState::Error`]: the positive errno its NACKs carry.
    err: i32,
    /// The gap at `placed` was NACKed SEQUENCE.
    gap_nacked: bool,
    /// The offset of the packet past the gap that was last NACKed SEQUENCE: a packet past it
    /// at or below it is of the sender's next round (it went back), whose first packet, the
    /// gap's, was lost too.
    gap_off: u64,
    /// The packet NACKed (fault, not ready, RNR): its RESUME echoes this sequence number.
    nack_seq: u32,
    /// When the op's last packet came.
    last_ns: u64,
    /// [`RxState::Faulted`]: the caller's token of the channel that reports it, or 0.
    holder: u32,
    /// [`RxState::Faulted`]: the address that did not translate.
    fault_addr: u64,
    /// [`RxKind::WriteImm`]: the immediate data.
    imm: u32,
    /// [`RxKind::Write`]: the whole blocks placed out of order past `placed`: bit i is block
    /// `placed.div_ceil(BLOCK) + i` ([`Slot::advance`]).
    sack: u64,
    /// Packets placed in order and not ACKed yet (ACKs are coalesced:
    /// [`RecvTable::set_acks`]).
    owed: u32,
    /// When the first of them came.
    owed_at: u64,
    /// The sequence number of the first of them, which their ACK echoes.
    owed_seq: u32,
    /// A page ahead of the data that does not translate ([`RecvTable::fault_ahead`]): its
    /// offset in the op (past `placed` when it was found), or 0 for none.
    ahead: u64,
    /// Its address.
    ahead_addr: u64,
    /// The caller's token of the channel that reports it, or 0 for none.
    ahead_holder: u32,
    /// The sequence number of the packet whose placing found it: its NACK AHEAD and RESUME
    /// echo it.
    ahead_seq: u32,
}

impl Slot {
    /// Where the op is.
    pub fn state(&self) -> RxState {
        self.state
    }
    /// What the op is.
    pub fn kind(&self) -> RxKind {
        self.kind
    }
    /// The op's source node.
    pub fn src(&self) -> u16 {
        self.src
    }
    /// The op's id at its source.
    pub fn op_id(&self) -> u32 {
        self.op_id
    }
    /// The endpoint the op is for.
    pub fn ep(&self) -> u32 {
        self.ep
    }
    /// The op's key (a MAILBOX: its sender's endpoint).
    pub fn rkey(&self) -> u64 {
        self.rkey
    }
    /// The op's remote address (here).
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// The op's length.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the op has no bytes (never: every op received has some).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes placed (served).
    pub fn placed(&self) -> u64 {
        self.placed
    }
    /// [`RxState::Error`]: the positive errno.
    pub fn err(&self) -> i32 {
        self.err
    }
    /// [`RxState::Faulted`]: the token of the channel reporting it, or 0.
    pub fn holder(&self) -> u32 {
        self.holder
    }
    /// [`RxState::Faulted`]: the address that did not translate.
    pub fn fault_addr(&self) -> u64 {
        self.fault_addr
    }
    /// The page ahead of the data that a channel reports ([`RecvTable::fault_ahead`]), as
    /// (its offset in the op, its address, the channel's token), if one does.
    pub fn ahead(&self) -> Option<(u64, u64, u32)> {
        (self.ahead_holder != 0).then_some((self.ahead, self.ahead_addr, self.ahead_holder))
    }
    /// [`RxKind::WriteImm`]: the immediate data.
    pub fn imm(&self) -> u32 {
        self.imm
    }

    /// Whether packet `h` is part of this op: its key, range and endpoint (and a WRITE_IMM's
    /// immediate).
    fn is_op_of(&self, h: &Header) -> bool {
        self.named_by(h) && (self.kind != RxKind::WriteImm || self.imm == h.status as u32)
    }

    /// Whether `h` names this op: its key, range and endpoint (an ABORT names an op so).
    fn named_by(&self, h: &Header) -> bool {
        self.rkey == h.rkey && self.addr == h.addr && self.len == h.len && self.ep == h.endpoint
    }

    /// The bit of the out-of-order map that WRITE packet `h` of `plen` bytes, past `placed`,
    /// would set: a whole block ([`BLOCK`] bytes, or the op's last bytes) that starts a block
    /// within the map's reach. `None` for any other packet: it is taken in order only.
    fn ahead_bit(&self, h: &Header, plen: u64) -> Option<u64> {
        if self.kind != RxKind::Write
            || h.offset <= self.placed
            || h.offset % BLOCK != 0
            || plen == 0
            || plen != BLOCK.min(self.len - h.offset)
        {
            return None;
        }
        let k = (h.offset / BLOCK).checked_sub(self.placed.div_ceil(BLOCK))?;
        (k < 64).then_some(1 << k)
    }

    /// `placed` moves up to `to`: the map follows it, and the blocks it holds that come next
    /// are taken in, as far as they go on.
    fn advance(&mut self, to: u64) {
        let mut base = self.placed.div_ceil(BLOCK);
        self.placed = to;
        loop {
            let now = self.placed.div_ceil(BLOCK);
            self.sack = self.sack.checked_shr((now - base) as u32).unwrap_or(0);
            base = now;
            if self.placed % BLOCK != 0 || self.placed >= self.len || self.sack & 1 == 0 {
                break;
            }
            self.placed = (self.placed + BLOCK).min(self.len);
        }
    }

    /// The out-of-order map as an ACK at `placed` carries it in `status`: bit i is the block
    /// `placed / BLOCK + 1 + i` (Documentation/network.rst).
    fn sack_field(&self) -> i32 {
        let m = if self.placed % BLOCK == 0 {
            self.sack >> 1
        } else {
            self.sack
        };
        m as u32 as i32
    }

    /// Forget the page ahead (resolved, met by the data, or given up): (the token of the
    /// channel that reported it, its offset), (0, 0) for none.
    fn take_ahead(&mut self) -> (u32, u64) {
        (
            core::mem::take(&mut self.ahead_holder),
            core::mem::take(&mut self.ahead),
        )
    }

    /// Whether the slot may be taken at `now`: free, finished, or idle past `idle_ns` and not
    /// a fault a channel holds.
    fn reusable(&self, now: u64, idle_ns: u64) -> bool {
        match self.state {
            RxState::Free | RxState::Done | RxState::Error => true,
            _ => {
                self.holder == 0
                    && self.ahead_holder == 0
                    && now.saturating_sub(self.last_ns) > idle_ns
            }
        }
    }
}

/// An answer to send: the header (no payload), and whether the NACK or RESUME it is counts
/// as one sent (an answer that repeats where an op stands does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The answer's header: to the op's source, about the op.
    pub header: Header,
    /// Count it (NACKs and RESUMEs).
    pub counted: bool,
}

/// What the caller does next for a packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Act {
    /// Nothing more.
    #[default]
    Nothing,
    /// Place the packet's payload (a WRITE: at its offset; a MAILBOX: in the ring's next slot;
    /// a WRITE_IMM: at its offset, and for its last packet then the completion with the
    /// immediate in the ring's next slot), then call [`RecvTable::placed`] with this slot.
    Place(usize),
    /// A WRITE's block out of order, past a gap: place the payload at its offset only if all
    /// of it translates (else none of it: a fault there is met, and reported, when the op's
    /// bytes come to it in order), then call [`RecvTable::placed`] with this slot.
    PlaceAhead(usize),
    /// Send the op's source bytes `[from, to)` as READ_RESP packets, then call
    /// [`RecvTable::served`] with this slot.
    Serve {
        /// The op's slot.
        slot: usize,
        /// First byte to send.
        from: u64,
        /// End of the bytes to send.
        to: u64,
    },
    /// Report this slot's fault to the driver on an idle channel of its endpoint's context,
    /// and [`RecvTable::hold`] it if one takes it.
    Report(usize),
}

/// What a packet (or a call) asks of the caller: an answer to send, an act, and what to count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Send this.
    pub reply: Option<Reply>,
    /// Then do this.
    pub act: Act,
    /// The packet was dropped: malformed for its op, or not the op it claims to be part of.
    pub dropped: bool,
    /// The packet was a duplicate (or data past a gap).
    pub duplicate: bool,
    /// The reply is an RNR NACK (a full table or ring).
    pub rnr: bool,
    /// The endpoint holds no context and an op came for it: the driver should make it
    /// resident.
    pub want_ep: bool,
    /// The packet's key failed (counted per source, and in all).
    pub key_failed: bool,
    /// That failure quarantined its source node.
    pub quarantine: bool,
    /// The packet came from a quarantined node and was dropped (also `dropped`).
    pub quarantined: bool,
}

impl Step {
    fn reply(r: Reply) -> Step {
        Step {
            reply: Some(r),
            ..Step::default()
        }
    }
    fn dropped() -> Step {
        Step {
            dropped: true,
            ..Step::default()
        }
    }
    fn duplicate(reply: Option<Reply>) -> Step {
        Step {
            reply,
            duplicate: true,
            ..Step::default()
        }
    }
}

/// The receive-op table of one node.
#[derive(Clone, Debug)]
pub struct RecvTable {
    node: u16,
    slots: [Slot; RX_OPS],
    /// Per source node: which of its ops it is done with, and how the ones this table
    /// forgot ended.
    past: [History; MAX_NODES],
    guard: KeyGuard,
    /// Per requesting node: READ_RESP bytes served and not yet gone on the link.
    reading: [u64; MAX_NODES],
    /// The most `reading` may reach for one node.
    read_cap: u64,
    /// ACK one in this many packets placed in order (1: every one).
    ack_every: u32,
    /// How long an owed ACK may wait for the packets that would make it due.
    ack_delay_ns: u64,
    /// The time of the packet [`RecvTable::on_packet`] last saw: a PLACE's
    /// [`RecvTable::placed`] follows it at once.
    clock: u64,
}

impl RecvTable {
    /// The empty table of node `node`.
    pub fn new(node: u16) -> Self {
        RecvTable {
            node,
            slots: [Slot::default(); RX_OPS],
            past: core::array::from_fn(|_| History::default()),
            guard: KeyGuard::new(),
            reading: [0; MAX_NODES],
            read_cap: READ_CAP,
            ack_every: 1,
            ack_delay_ns: 0,
            clock: 0,
        }
    }

    /// Coalesce ACKs (Transport v2): of the packets of an op placed in order, ACK one in
    /// `every` (at least 1: all), and any that waits `delay_ns` for the next. An ACK is
    /// cumulative, so one answers them all, and echoes the first; it goes at once for an op's
    /// last packet, a packet marked CE (DCTCP's echo, which then covers the unmarked packets
    /// owed before it too: at most `every - 1` counted marked that were not), a block placed
    /// out of order or a duplicate (the sender's selective retransmission reads those ACKs'
    /// maps), and a probe. The caller sends what [`RecvTable::flush_ack`] returns once
    /// [`RecvTable::ack_due`] has passed.
    pub fn set_acks(&mut self, every: u32, delay_ns: u64) {
        self.ack_every = every.max(1);
        self.ack_delay_ns = delay_ns;
    }

    /// When the first owed ACK is due, if one is owed.
    pub fn ack_due(&self) -> Option<u64> {
        self.slots
            .iter()
            .filter(|r| r.owed != 0)
            .map(|r| r.owed_at.saturating_add(self.ack_delay_ns))
            .min()
    }

    /// An owed ACK due at `now`, to send (call again until `None`).
    pub fn flush_ack(&mut self, now: u64) -> Option<Reply> {
        let delay = self.ack_delay_ns;
        loop {
            let i = self
                .slots
                .iter()
                .position(|r| r.owed != 0 && r.owed_at.saturating_add(delay) <= now)?;
            let r = &mut self.slots[i];
            r.owed = 0;
            if !matches!(r.state, RxState::Receiving | RxState::Done) {
                // Faulted, refused or aborted since: its answer said where the op stands.
                continue;
            }
            let seq = r.owed_seq;
            let (h, r) = (self.request_of(i, seq), &self.slots[i]);
            return Some(self.answer(&h, Op::Ack, r.placed, r.sack_field()));
        }
    }

    /// The engine was reset: every op goes, forgotten as it stood (one placed in full as
    /// done, any other as failed: its sender's next packet is refused ESTALE, and a late
    /// packet of an op that ended before is not placed as a new op's). What ops were
    /// forgotten is kept: op ids keep counting at the senders.
    pub fn reset(&mut self) {
        for r in self.slots {
            if r.state != RxState::Free && r.kind != RxKind::Read {
                if let Some(p) = self.past.get_mut(usize::from(r.src)) {
                    p.forget(r.op_id, r.state == RxState::Done);
                }
            }
        }
        self.slots = [Slot::default(); RX_OPS];
        self.guard = KeyGuard::new();
        self.reading = [0; MAX_NODES];
    }

    /// The READ_RESP bytes one requesting node may have waiting in this node's port (at least
    /// one packet's worth): a request beyond is NACKed RNR until the link has taken enough.
    pub fn set_read_cap(&mut self, bytes: u64) {
        self.read_cap = bytes.max(crate::packet::MTU as u64);
    }

    /// READ_RESP bytes served to node `dst` and still waiting in the port (0 past the ids).
    pub fn reading(&self, dst: u16) -> u64 {
        self.reading.get(usize::from(dst)).copied().unwrap_or(0)
    }

    /// `n` bytes of READ_RESP for node `dst` left the port (sent, or dropped on the way).
    pub fn read_sent(&mut self, dst: u16, n: u64) {
        if let Some(r) = self.reading.get_mut(usize::from(dst)) {
            *r = r.saturating_sub(n);
        }
    }

    /// Key failures a source may have within a second before it is quarantined (0: never).
    pub fn set_keyfail_limit(&mut self, limit: u32) {
        self.guard.limit = limit;
    }

    /// The limit [`RecvTable::set_keyfail_limit`] set.
    pub fn keyfail_limit(&self) -> u32 {
        self.guard.limit
    }

    /// Key failures from node `src` since it was last released (saturating; 0 past the
    /// node ids).
    pub fn keyfails(&self, src: u16) -> u32 {
        self.guard.total.get(usize::from(src)).copied().unwrap_or(0)
    }

    /// The quarantined nodes: bit n is node n.
    pub fn quarantined(&self) -> u64 {
        self.guard.quarantined
    }

    /// Release the nodes of `mask` from quarantine, and forget their key failures.
    pub fn release_nodes(&mut self, mask: u64) {
        self.guard.release(mask);
    }

    /// Slot `i`, if there is one.
    pub fn slot(&self, i: usize) -> Option<&Slot> {
        self.slots.get(i)
    }

    fn find(&self, src: u16, op_id: u32) -> Option<usize> {
        self.slots
            .iter()
            .position(|r| r.state != RxState::Free && r.src == src && r.op_id == op_id)
    }

    /// An answer to packet `h`'s sender about its op: `op` at `offset` with `status`,
    /// echoing `h`'s sequence number.
    fn answer(&self, h: &Header, op: Op, offset: u64, status: i32) -> Reply {
        Reply {
            header: Header {
                op,
                src: self.node,
                dst: h.src,
                endpoint: h.endpoint,
                op_id: h.op_id,
                seq: h.seq,
                status,
                rkey: h.rkey,
                addr: h.addr,
                len: h.len,
                offset,
                // An ACK echoes congestion the packet it answers met (DCTCP's per-packet
                // echo: every placed packet is ACKed).
                span: if op == Op::Ack && h.ce { ECE } else { 0 },
                ce: false,
            },
            counted: op != Op::Ack,
        }
    }

    /// The answer to what slot `i` NACKed (a RESUME, or the NACK that ends it): it echoes the
    /// packet NACKed.
    fn reply_to(&self, i: usize, op: Op, status: i32) -> Reply {
        let r = &self.slots[i];
        self.answer(&self.request_of(i, r.nack_seq), op, r.placed, status)
    }

    /// A request of op `i` as its sender sent it, with sequence number `seq`: what an answer
    /// that no packet just asked for (a RESUME, an owed ACK) answers.
    fn request_of(&self, i: usize, seq: u32) -> Header {
        let r = &self.slots[i];
        Header {
            op: Op::Write,
            src: r.src,
            dst: self.node,
            endpoint: r.ep,
            op_id: r.op_id,
            seq,
            status: 0,
            rkey: r.rkey,
            addr: r.addr,
            len: r.len,
            offset: r.placed,
            span: 0,
            ce: false,
        }
    }

    /// Keyless ops that hold a slot and are not finished.
    fn keyless_held(&self, now: u64, idle_ns: u64) -> usize {
        self.slots
            .iter()
            .filter(|r| r.kind == RxKind::Mailbox && !r.reusable(now, idle_ns))
            .count()
    }

    /// The slot a new op would take: a free one, else the oldest finished one, else the
    /// longest idle one; none when every slot holds a live op, or when a keyless op would pass
    /// [`KEYLESS`] of them.
    fn room(&self, keyless: bool, now: u64, idle_ns: u64) -> Option<usize> {
        if keyless && self.keyless_held(now, idle_ns) >= KEYLESS {
            return None;
        }
        let rank = |r: &Slot| match r.state {
            RxState::Free => 0,
            RxState::Done | RxState::Error => 1,
            _ if r.reusable(now, idle_ns) => 2,
            _ => 3,
        };
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, r)| rank(r) < 3)
            .min_by_key(|(_, r)| (rank(r), r.last_ns))
            .map(|(i, _)| i)
    }

    /// Whether request `h` is of its source's sequence ([`History::admit`]). A source that
    /// restarted (quiet, no op of it live here, a request of no sequence known) loses what its
    /// old ops held here: their slots are freed, so that a new op with a reused id, key,
    /// address and length is not taken for an old one.
    fn admit_source(&mut self, h: &Header, now: u64, idle_ns: u64) -> bool {
        // Whether an op of the source is live here: asked only of a request far from its
        // sequence, not of every packet.
        let slots = &self.slots;
        let live = || {
            slots
                .iter()
                .any(|r| r.src == h.src && !r.reusable(now, idle_ns))
        };
        let Some(p) = self.past.get_mut(usize::from(h.src)) else {
            return true;
        };
        match p.admit(h.op_id, now, live) {
            Admit::Known => true,
            Admit::Stray => false,
            Admit::Restarted => {
                for r in self.slots.iter_mut().filter(|r| r.src == h.src) {
                    *r = Slot::default();
                }
                true
            }
        }
    }

    /// What op `h`, which no slot holds, is: new, or one of the past ([`History`]).
    fn past(&self, h: &Header) -> Past {
        self.past
            .get(usize::from(h.src))
            .map_or(Past::New, |p| p.past(h.op_id))
    }

    /// Take request `h`'s word on its sender's finished ops ([`Header::span`]).
    fn learn(&mut self, h: &Header) {
        if let Some(p) = self.past.get_mut(usize::from(h.src)) {
            p.learn(h.op_id, h.span);
        }
    }

    /// The answer to a packet of an op of the past: a finished one ACKed again, all of it
    /// (its last ACK may have been lost), any other refused ESTALE (its sender, if it still
    /// waits, ends the op with it); `None` for a new op.
    fn of_the_past(&self, h: &Header) -> Option<Step> {
        match self.past(h) {
            Past::New => None,
            Past::Done => Some(Step::duplicate(Some(self.answer(h, Op::Ack, h.len, 0)))),
            Past::Finished | Past::TooOld | Past::Failed => {
                Some(Step::reply(self.answer(h, Op::Nack, 0, -ESTALE)))
            }
        }
    }

    /// A slot for new op `h` of `kind` ([`RecvTable::room`]), taken.
    fn take(&mut self, h: &Header, kind: RxKind, now: u64, idle_ns: u64) -> Option<usize> {
        let i = self.room(kind == RxKind::Mailbox, now, idle_ns)?;
        let old = self.slots[i];
        if matches!(old.state, RxState::Done | RxState::Error) && old.kind != RxKind::Read {
            // Forgotten: how it ended is kept.
            if let Some(p) = self.past.get_mut(usize::from(old.src)) {
                p.forget(old.op_id, old.state == RxState::Done);
            }
        }
        self.slots[i] = Slot {
            state: RxState::Receiving,
            kind,
            src: h.src,
            op_id: h.op_id,
            ep: h.endpoint,
            rkey: h.rkey,
            addr: h.addr,
            len: h.len,
            last_ns: now,
            imm: if kind == RxKind::WriteImm {
                h.status as u32
            } else {
                0
            },
            ..Slot::default()
        };
        Some(i)
    }

    /// Whether the endpoint's ring cannot take what packet `h` of op `i` would put in it (a
    /// message, or a put's completion): no mailbox, NACK ECONNREFUSED and the op ends; no free
    /// slot, NACK RNR and the op waits for one ([`RecvTable::wake`]). Both from `off`.
    fn ring_refuses(&mut self, i: usize, h: &Header, ep_flags: u32, off: u64) -> Option<Step> {
        let r = &mut self.slots[i];
        if ep_flags & ep::MBOX_OWNED == 0 || ep_flags & ep::MBOX_ON == 0 {
            r.state = RxState::Error;
            r.err = ECONNREFUSED;
            return Some(Step::reply(self.answer(h, Op::Nack, off, -ECONNREFUSED)));
        }
        if ep_flags & ep::MBOX_ROOM == 0 {
            r.state = RxState::Rnr;
            r.nack_seq = h.seq;
            return Some(self.rnr_at(h, off));
        }
        None
    }

    /// No slot for op `h`: NACK RNR, keeping nothing; its sender probes.
    fn full(&self, h: &Header) -> Step {
        self.rnr_at(h, 0)
    }

    /// NACK RNR for packet `h`, from `offset`.
    fn rnr_at(&self, h: &Header, offset: u64) -> Step {
        Step {
            rnr: true,
            ..Step::reply(self.answer(h, Op::Nack, offset, Nack::Rnr.status()))
        }
    }

    /// A slot for op `h`, new to this node; or the step that answers an op of the past
    /// ([`RecvTable::of_the_past`]) or finds no slot (NACK RNR: never a silent drop).
    fn admit(&mut self, h: &Header, kind: RxKind, now: u64, idle_ns: u64) -> Result<usize, Step> {
        if let Some(step) = self.of_the_past(h) {
            return Err(step);
        }
        self.take(h, kind, now, idle_ns).ok_or_else(|| self.full(h))
    }

    /// A probe of an op this node keeps nothing of: one refused for a full table. From offset
    /// 0, RESUME it if a slot can be had now, else NACK RNR again; any other offset (this node
    /// was reset) is dropped.
    fn unknown_probe(&self, h: &Header, keyless: bool, now: u64, idle_ns: u64) -> Step {
        if let Some(step) = self.of_the_past(h) {
            return step;
        }
        if h.offset != 0 {
            return Step::dropped();
        }
        if self.room(keyless, now, idle_ns).is_some() {
            Step::reply(self.answer(h, Op::Resume, 0, 0))
        } else {
            self.full(h)
        }
    }

    /// Op `h`'s key does not allow it (`err`): NACK it with `err` from `off`, and count the
    /// failure against its source (which may quarantine it). Only the op's
    /// own packets (its key, endpoint and range: a key revoked mid-op) end the op that node
    /// and id name; a packet that merely claims them, with another key, changes nothing of it.
    fn refuse(&mut self, i: Option<usize>, h: &Header, err: i32, off: u64, now: u64) -> Step {
        if let Some(r) = i.map(|i| &mut self.slots[i]) {
            if r.is_op_of(h) && r.state != RxState::Faulted {
                r.state = RxState::Error;
                r.err = err;
            }
        }
        Step {
            key_failed: true,
            quarantine: self.guard.failed(h.src, now),
            ..Step::reply(self.answer(h, Op::Nack, off, -err))
        }
    }

    /// The answer to a request (a probe, a READ_REQ) of an op that is faulted or waiting:
    /// NACK again, not counted (the first NACK was).
    fn still(&self, i: usize, h: &Header) -> Step {
        let r = &self.slots[i];
        let why = match r.state {
            RxState::Faulted => Nack::Fault,
            RxState::Rnr => Nack::Rnr,
            _ => Nack::NotReady,
        };
        Step::reply(Reply {
            counted: false,
            ..self.answer(h, Op::Nack, r.placed, why.status())
        })
    }

    /// A probe (a WRITE or MAILBOX of no payload) of a known op: where it stands.
    fn probe(&self, i: usize, h: &Header) -> Step {
        let r = &self.slots[i];
        match r.state {
            RxState::Done => Step::reply(self.answer(h, Op::Ack, r.placed, 0)),
            RxState::Error => Step::reply(self.answer(h, Op::Nack, r.placed, -r.err)),
            RxState::Faulted | RxState::NotReady | RxState::Rnr => self.still(i, h),
            // Every byte below a page ahead that is still being resolved is placed: the sender
            // waits for its RESUME, as for a fault's.
            RxState::Receiving if r.ahead_holder != 0 && r.placed >= r.ahead => {
                Step::reply(Reply {
                    counted: false,
                    ..self.answer(h, Op::Nack, r.placed, Nack::Fault.status())
                })
            }
            // The RESUME was lost.
            RxState::Receiving | RxState::Free => {
                Step::reply(self.answer(h, Op::Resume, r.placed, 0))
            }
        }
    }

    /// A packet of known op `i`: a probe is answered with where the op stands; data of an op
    /// finished (ACKed again), refused (NACKed again) or waiting (a fault, no context, a full
    /// ring: dropped) is a duplicate. None for data of an op still receiving.
    fn known(&self, i: usize, h: &Header, plen: usize) -> Option<Step> {
        if plen == 0 {
            return Some(self.probe(i, h));
        }
        let r = &self.slots[i];
        match r.state {
            RxState::Receiving => None,
            RxState::Done => Some(Step::duplicate(Some(self.answer(h, Op::Ack, r.placed, 0)))),
            RxState::Error => Some(Step::reply(self.answer(h, Op::Nack, r.placed, -r.err))),
            _ => Some(Step::duplicate(None)),
        }
    }

    /// Op `i`'s endpoint holds no context: NACK NOT_READY from `off`, and want the endpoint.
    fn not_ready(&mut self, i: usize, h: &Header, off: u64) -> Step {
        let r = &mut self.slots[i];
        r.state = RxState::NotReady;
        r.nack_seq = h.seq;
        r.placed = off;
        Step {
            want_ep: true,
            ..Step::reply(self.answer(h, Op::Nack, off, Nack::NotReady.status()))
        }
    }

    /// Packet `h` with `plen` bytes of payload arrived for this node. `keys` is the rkey
    /// table, `ep_flags` what its endpoint can take ([`ep`]), `idle_ns` how long an unfinished
    /// op may go without a packet before its slot may be taken.
    pub fn on_packet(
        &mut self,
        h: &Header,
        plen: usize,
        keys: &[Rkey],
        ep_flags: u32,
        now: u64,
        idle_ns: u64,
    ) -> Step {
        self.clock = now;
        if matches!(h.op, Op::Write | Op::WriteImm | Op::Mailbox | Op::ReadReq)
            && self.guard.is_quarantined(h.src)
        {
            return Step {
                quarantined: true,
                ..Step::dropped()
            };
        }
        if matches!(h.op, Op::Write | Op::WriteImm | Op::Mailbox | Op::ReadReq)
            && !self.admit_source(h, now, idle_ns)
        {
            return Step::dropped();
        }
        match h.op {
            Op::Write | Op::WriteImm => self.write(h, plen, keys, ep_flags, now, idle_ns),
            Op::Mailbox => self.mailbox(h, plen, ep_flags, now, idle_ns),
            Op::ReadReq => self.read_req(h, keys, ep_flags, now, idle_ns),
            Op::Abort => self.abort(h),
            // Answers and read data are the sending side's.
            Op::ReadResp | Op::Ack | Op::Nack | Op::Resume => Step::dropped(),
        }
    }

    fn write(
        &mut self,
        h: &Header,
        plen: usize,
        keys: &[Rkey],
        ep_flags: u32,
        now: u64,
        idle_ns: u64,
    ) -> Step {
        let kind = if h.op == Op::WriteImm {
            RxKind::WriteImm
        } else {
            RxKind::Write
        };
        let found = self.find(h.src, h.op_id);
        if let Err(e) = rkey_check(keys, h, RKEY_WRITE) {
            // No state for a packet its key does not allow: refuse, and forget.
            let off = found
                .map(|i| &self.slots[i])
                .filter(|r| r.rkey == h.rkey)
                .map_or(0, |r| r.placed);
            return self.refuse(found, h, e, off, now);
        }
        self.learn(h);
        let i = match found {
            Some(i) => i,
            None if plen == 0 => return self.unknown_probe(h, false, now, idle_ns),
            None => match self.admit(h, kind, now, idle_ns) {
                Ok(i) => i,
                Err(step) => return step,
            },
        };
        let r = &mut self.slots[i];
        if r.kind != kind || !r.is_op_of(h) {
            return Step::dropped(); // not the op it claims to be part of
        }
        r.last_ns = now;
        if r.state == RxState::Rnr && ep_flags & ep::MBOX_ROOM != 0 {
            r.state = RxState::Receiving; // a WRITE_IMM: a ring slot is free now, its RESUME lost
        }
        if let Some(step) = self.known(i, h, plen) {
            return step;
        }
        let r = &mut self.slots[i];
        let placed = r.placed;
        if h.offset > placed && ep_flags & ep::READY != 0 {
            if let Some(bit) = r.ahead_bit(h, plen as u64) {
                // A whole block past a gap: placed where it goes, and the gap left to the
                // sender, which resends only what the ACKs' maps say is missing.
                if r.sack & bit != 0 {
                    return Step::duplicate(Some(self.ack(i, h)));
                }
                return Step {
                    act: Act::PlaceAhead(i),
                    ..Step::default()
                };
            }
        }
        if h.offset > placed {
            return self.gap(i, h);
        }
        if h.offset < placed {
            return Step::duplicate(Some(self.ack(i, h)));
        }
        if ep_flags & ep::READY == 0 {
            return self.not_ready(i, h, placed);
        }
        if kind == RxKind::WriteImm && h.offset + plen as u64 == h.len {
            // The last packet places the completion too: a ring must take it.
            if let Some(step) = self.ring_refuses(i, h, ep_flags, placed) {
                return step;
            }
        }
        Step {
            act: Act::Place(i),
            ..Step::default()
        }
    }

    fn mailbox(&mut self, h: &Header, plen: usize, ep_flags: u32, now: u64, idle_ns: u64) -> Step {
        if h.len == 0
            || h.len > u64::from(MBOX_MAX)
            || h.offset != 0
            || (plen != 0 && plen as u64 != h.len)
        {
            return Step::dropped();
        }
        let found = self.find(h.src, h.op_id).filter(|&i| {
            let r = &self.slots[i];
            r.kind == RxKind::Mailbox && r.is_op_of(h)
        });
        if ep_flags & ep::OPEN == 0 || ep_flags & ep::MBOX_OWNED == 0 {
            // No such endpoint, or no mailbox: refused at once, nothing kept and nobody
            // woken. A message placed before it went is still ACKed.
            if let Some(i) = found {
                let r = &mut self.slots[i];
                if matches!(r.state, RxState::Done | RxState::Error) {
                    r.last_ns = now;
                    return self.known(i, h, plen).unwrap_or_default();
                }
                r.state = RxState::Error;
                r.err = ECONNREFUSED;
                r.holder = 0;
            }
            return Step::reply(self.answer(h, Op::Nack, 0, -ECONNREFUSED));
        }
        self.learn(h);
        let i = match self.find(h.src, h.op_id) {
            Some(i) => i,
            None if plen == 0 => return self.unknown_probe(h, true, now, idle_ns),
            None => match self.admit(h, RxKind::Mailbox, now, idle_ns) {
                Ok(i) => i,
                Err(step) => return step,
            },
        };
        let r = &mut self.slots[i];
        if r.kind != RxKind::Mailbox || !r.is_op_of(h) {
            return Step::dropped(); // not the op it claims to be: its cookie, its sender
        }
        r.last_ns = now;
        if r.state == RxState::Rnr && ep_flags & ep::MBOX_ROOM != 0 {
            r.state = RxState::Receiving; // a slot is free now: its RESUME was lost
        }
        if let Some(step) = self.known(i, h, plen) {
            return step;
        }
        if ep_flags & ep::READY == 0 {
            return self.not_ready(i, h, 0);
        }
        if let Some(step) = self.ring_refuses(i, h, ep_flags, 0) {
            return step;
        }
        Step {
            act: Act::Place(i),
            ..Step::default()
        }
    }

    fn read_req(
        &mut self,
        h: &Header,
        keys: &[Rkey],
        ep_flags: u32,
        now: u64,
        idle_ns: u64,
    ) -> Step {
        let found = self.find(h.src, h.op_id);
        if let Err(e) = rkey_check(keys, h, RKEY_READ) {
            return self.refuse(found, h, e, h.offset, now);
        }
        self.learn(h);
        // At most READ_MAX bytes per request, whatever it asks (decoding checked the offset),
        // and at most the read cap waiting for the requester: beyond, RNR, and a new op keeps
        // nothing (the requester probes, and is served once the link has taken what waits).
        let ask = u64::from(h.status as u32)
            .min(READ_MAX)
            .min(self.read_cap)
            .min(h.len - h.offset);
        let capped = self.reading(h.src).saturating_add(ask) > self.read_cap;
        if capped && found.is_none() {
            return self.rnr_at(h, h.offset);
        }
        let i = match found {
            Some(i) => i,
            None => match self.take(h, RxKind::Read, now, idle_ns) {
                Some(i) => {
                    // The responder keeps nothing but a fault.
                    self.slots[i].state = RxState::Done;
                    i
                }
                None => return self.full(h),
            },
        };
        let r = &mut self.slots[i];
        if r.kind != RxKind::Read || !r.is_op_of(h) {
            return Step::dropped();
        }
        r.last_ns = now;
        match r.state {
            RxState::Faulted | RxState::NotReady => return self.still(i, h),
            RxState::Error => {
                let err = r.err;
                return Step::reply(self.answer(h, Op::Nack, h.offset, -err));
            }
            _ => {}
        }
        if ep_flags & ep::READY == 0 {
            return self.not_ready(i, h, h.offset);
        }
        if capped {
            return self.rnr_at(h, h.offset);
        }
        let to = h.offset + ask;
        Step {
            act: Act::Serve {
                slot: i,
                from: h.offset,
                to,
            },
            ..Step::default()
        }
    }

    /// Slot `i` of a [`Act::Place`] for packet `h`: `got` bytes were placed (a WRITE: of its
    /// payload; a MAILBOX: all of it, or 0; a WRITE_IMM's last packet: all of it once the
    /// completion is in the ring too, or 0), and `fault` is the address that did not translate
    /// if not all of them were.
    pub fn placed(&mut self, i: usize, h: &Header, got: u64, fault: Option<u64>) -> Step {
        let Some(r) = self.slots.get_mut(i) else {
            return Step::dropped();
        };
        if r.state != RxState::Receiving || r.src != h.src || r.op_id != h.op_id {
            return Step::dropped();
        }
        if h.offset > r.placed {
            // Out of order (PlaceAhead): kept only if all of it went in.
            let bit = if fault.is_none() && got > 0 {
                h.offset
                    .checked_div(BLOCK)
                    .and_then(|b| b.checked_sub(r.placed.div_ceil(BLOCK)))
                    .filter(|&k| k < 64)
                    .map_or(0, |k| 1u64 << k)
            } else {
                0
            };
            if bit != 0 {
                r.sack |= bit;
                return Step::duplicate(Some(self.ack(i, h)));
            }
            // Its page does not translate yet: the gap is NACKed, as data past it that
            // cannot be placed is (the sender goes back to it; the fault is met there).
            return self.gap(i, h);
        }
        let to = r.placed + got;
        // Blocks held past a gap: the ACK that says how far they now take the op goes at once.
        let held = r.sack != 0;
        r.advance(to);
        r.gap_nacked = false;
        if let Some(addr) = fault {
            r.state = RxState::Faulted;
            r.nack_seq = h.seq;
            r.fault_addr = addr;
            r.holder = 0;
            r.owed = 0;
            let placed = r.placed;
            let nack = self.answer(h, Op::Nack, placed, Nack::Fault.status());
            let r = &mut self.slots[i];
            if r.ahead_holder != 0 && r.ahead_addr / PAGE == addr / PAGE {
                // The data came to the page ahead before it was resolved (a packet sent
                // before the NACK AHEAD came): the channel that reports that page reports
                // this fault.
                r.holder = r.take_ahead().0;
                return Step::reply(nack);
            }
            return Step {
                act: Act::Report(i),
                ..Step::reply(nack)
            };
        }
        if r.placed == r.len {
            r.state = RxState::Done;
        } else if got > 0 && !h.ce && !held && r.owed + 1 < self.ack_every {
            // Owed: the next packet's ACK, or the delay, answers it.
            if r.owed == 0 {
                r.owed_at = self.clock;
                r.owed_seq = h.seq;
            }
            r.owed += 1;
            return Step::default();
        }
        Step::reply(self.ack(i, h))
    }

    /// Packet `h` of op `i` came past a gap and is not placed: NACK SEQUENCE from the gap, so
    /// that its sender goes back to it at once; once a round: the packets that follow are
    /// dropped silently, until one at or below the last one NACKed comes (the sender went
    /// back, and the gap's packet was lost again).
    fn gap(&mut self, i: usize, h: &Header) -> Step {
        let r = &mut self.slots[i];
        if r.gap_nacked && h.offset > r.gap_off {
            return Step::duplicate(None);
        }
        r.gap_nacked = true;
        r.gap_off = h.offset;
        r.owed = 0;
        let placed = r.placed;
        Step::duplicate(Some(self.answer(
            h,
            Op::Nack,
            placed,
            Nack::Sequence.status(),
        )))
    }

    /// The ACK of op `i` to packet `h`: where its bytes are placed up to, and which blocks
    /// past that are placed too.
    fn ack(&mut self, i: usize, h: &Header) -> Reply {
        let r = &mut self.slots[i];
        // With packets owed an ACK, it echoes the first of them (as TCP's timestamps do
        // with delayed ACKs, RFC 7323 4.3): the sender's round trip is then never short, and
        // an ACK that comes after a timeout shows the packet sent before it that arrived
        // (the Eifel test), not a copy sent after it.
        let seq = if r.owed != 0 { r.owed_seq } else { h.seq };
        r.owed = 0;
        let r = &self.slots[i];
        let h = Header { seq, ..*h };
        self.answer(&h, Op::Ack, r.placed, r.sack_field())
    }

    /// Slot `i` of a [`Act::Serve`] for READ_REQ `h`: the bytes up to `upto` were sent, and
    /// `fault` is the source address that did not translate if the bytes stopped there.
    pub fn served(&mut self, i: usize, h: &Header, upto: u64, fault: Option<u64>) -> Step {
        let Some(r) = self.slots.get_mut(i) else {
            return Step::dropped();
        };
        if r.kind != RxKind::Read || r.src != h.src || r.op_id != h.op_id {
            return Step::dropped();
        }
        // What went into the port for the requester, until the link takes it (read_sent).
        if let Some(w) = self.reading.get_mut(usize::from(h.src)) {
            *w = w.saturating_add(upto.saturating_sub(h.offset));
        }
        let r = &mut self.slots[i];
        r.placed = upto.min(r.len);
        let Some(addr) = fault else {
            return Step::default();
        };
        r.state = RxState::Faulted;
        r.nack_seq = h.seq;
        r.fault_addr = addr;
        r.holder = 0;
        let placed = r.placed;
        Step {
            act: Act::Report(i),
            ..Step::reply(self.answer(h, Op::Nack, placed, Nack::Fault.status()))
        }
    }

    /// A channel (the caller's `token`, not 0) reports slot `i`'s fault: whether it may (a
    /// fault no channel holds yet).
    pub fn hold(&mut self, i: usize, token: u32) -> bool {
        match self.slots.get_mut(i) {
            Some(r) if token != 0 && r.state == RxState::Faulted && r.holder == 0 => {
                r.holder = token;
                true
            }
            _ => false,
        }
    }

    /// The channel `token` stopped (NACK, QUIESCE, RESET) with slot `i`'s fault unanswered:
    /// the fault waits for another channel.
    pub fn release(&mut self, i: usize, token: u32) {
        if let Some(r) = self.slots.get_mut(i) {
            if token != 0 && r.holder == token {
                r.holder = 0;
            }
            if token != 0 && r.ahead_holder == token {
                // Nobody resolves the page ahead now: the data meets it, as a fault.
                r.take_ahead();
            }
        }
    }

    /// Placing packet `seq` of op `i` in order found that the op's page at `addr`, past the
    /// bytes placed, does not translate (the engine looks ahead of the data: the model's
    /// `rx-lookahead`), and channel `token` (idle, not 0) can report it. `seq` None: the
    /// RESUME of the op's last page ahead found it (the engine looks on from there), and its
    /// NACK and RESUME echo what that one's did. The op goes on
    /// receiving the data below that page, and its sender is NACKed AHEAD from the page's
    /// offset (or the op's, if the op starts inside that page): it sends nothing from there
    /// until the RESUME that the channel's resolution sends ([`RecvTable::resolved`]).
    /// `None` (nothing changes, and the channel is not taken) for a page below what is
    /// placed, an op that does not place in order (a GET's responder, a MAILBOX) or is not
    /// receiving, or one with a page ahead reported already.
    pub fn fault_ahead(
        &mut self,
        i: usize,
        seq: Option<u32>,
        addr: u64,
        token: u32,
    ) -> Option<Step> {
        let r = self.slots.get_mut(i)?;
        let off = (addr / PAGE * PAGE).max(r.addr).checked_sub(r.addr)?;
        if token == 0
            || r.state != RxState::Receiving
            || !matches!(r.kind, RxKind::Write | RxKind::WriteImm)
            || r.ahead_holder != 0
            || r.holder != 0
            || off < r.placed
            || off >= r.len
        {
            return None;
        }
        r.ahead = off;
        r.ahead_addr = addr;
        r.ahead_holder = token;
        r.ahead_seq = seq.unwrap_or(r.ahead_seq);
        let seq = r.ahead_seq;
        let h = self.request_of(i, seq);
        Some(Step::reply(self.answer(
            &h,
            Op::Nack,
            off,
            Nack::Ahead.status(),
        )))
    }

    /// The channel `token` that reports slot `i`'s page ahead is done with it: the sender may
    /// send from the page's offset on (RESUME from there, echoing the packet whose placing
    /// found it). `None` when the channel reports no page ahead of the slot.
    fn ahead_done(&mut self, i: usize, token: u32) -> Option<Reply> {
        let r = self.slots.get_mut(i)?;
        if token == 0 || r.ahead_holder != token {
            return None;
        }
        let (_, off) = r.take_ahead();
        let seq = r.ahead_seq;
        Some(self.answer(&self.request_of(i, seq), Op::Resume, off, 0))
    }

    /// The driver resolved the fault that channel `token` reports on slot `i`: RESUME the
    /// sender from where placing stopped. A GET's responder keeps nothing: its next request
    /// is served.
    pub fn resolved(&mut self, i: usize, token: u32) -> Step {
        if let Some(resume) = self.ahead_done(i, token) {
            return Step::reply(resume);
        }
        let Some(r) = self.slots.get_mut(i) else {
            return Step::default();
        };
        if token == 0 || r.state != RxState::Faulted || r.holder != token {
            return Step::default();
        }
        r.holder = 0;
        r.gap_nacked = false;
        r.state = if r.kind == RxKind::Read {
            RxState::Done
        } else {
            RxState::Receiving
        };
        Step::reply(self.reply_to(i, Op::Resume, 0))
    }

    /// The driver could not resolve the fault that channel `token` reports on slot `i`: NACK
    /// the op with `status`, the negative errno the driver wrote (anything else, such as an
    /// engine error's CQE status, is -[`EFAULT`]).
    pub fn refused(&mut self, i: usize, token: u32, status: i32) -> Step {
        let Some(r) = self.slots.get_mut(i) else {
            return Step::default();
        };
        let ahead = token != 0 && r.ahead_holder == token;
        if ahead {
            // The page ahead cannot be mapped: the op fails, as it would when its data came.
            r.take_ahead();
            if matches!(r.state, RxState::Done | RxState::Error) {
                return Step::default();
            }
        } else if token == 0 || r.state != RxState::Faulted || r.holder != token {
            return Step::default();
        }
        let errno = if status < 0 && status > -cqe_status::ERR_BASE {
            -status
        } else {
            EFAULT
        };
        r.holder = 0;
        r.state = RxState::Error;
        r.err = errno;
        Step::reply(self.reply_to(i, Op::Nack, -errno))
    }

    /// ABORT: the sender of op `h` ended it unfinished (it gave up, or its context stopped).
    /// An unfinished op of its (named as its packets name it: key, range, endpoint, and a
    /// message's cookie) ends at once, nothing answered, so its slot comes back without
    /// waiting for the idle time; a fault a channel is resolving ends too, and that channel's
    /// report then changes nothing. A finished op, or one this ABORT does not name, stays.
    fn abort(&mut self, h: &Header) -> Step {
        let Some(i) = self.find(h.src, h.op_id) else {
            return Step::dropped();
        };
        let r = &mut self.slots[i];
        if !r.named_by(h) {
            return Step::dropped();
        }
        if !matches!(r.state, RxState::Free | RxState::Done | RxState::Error) {
            r.state = RxState::Error;
            r.err = ECANCELED;
            r.holder = 0;
            r.take_ahead();
        }
        Step::default()
    }

    /// Endpoint `ep` was closed (its process is gone; the id may be reused): slot `i`, if it
    /// is an unfinished op of it, ends, and its sender is NACKed (ENOKEY for a keyed op, whose
    /// key went with the process; ECONNREFUSED for a message). A finished op stays, so that a
    /// duplicate is still ACKed. Nothing of the old process reaches the endpoint's next one.
    pub fn close(&mut self, i: usize, ep: u32) -> Step {
        let Some(r) = self.slots.get_mut(i) else {
            return Step::default();
        };
        if r.ep != ep || matches!(r.state, RxState::Free | RxState::Done | RxState::Error) {
            return Step::default();
        }
        let err = if r.kind == RxKind::Mailbox {
            ECONNREFUSED
        } else {
            ENOKEY
        };
        r.state = RxState::Error;
        r.err = err;
        r.holder = 0;
        r.take_ahead();
        Step::reply(self.reply_to(i, Op::Nack, -err))
    }

    /// What slot `i` waited for came: its endpoint is resident (NOT_READY) or its ring has
    /// room (RNR). RESUME its sender; any other state changes nothing.
    pub fn wake(&mut self, i: usize) -> Step {
        let Some(r) = self.slots.get_mut(i) else {
            return Step::default();
        };
        if !matches!(r.state, RxState::NotReady | RxState::Rnr) {
            return Step::default();
        }
        r.gap_nacked = false;
        r.state = if r.kind == RxKind::Read {
            RxState::Done
        } else {
            RxState::Receiving
        };
        Step::reply(self.reply_to(i, Op::Resume, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    const IDLE: u64 = 1_000_000;
    /// An open endpoint whose process has a mailbox, resident or not.
    const HELD: u32 = ep::OPEN | ep::MBOX_OWNED;
    const ALL: u32 = HELD | ep::READY | ep::MBOX_ON | ep::MBOX_ROOM;

    /// Key [`KEY`] of endpoint 7, in entry 3, with rights `ctrl`, over
    /// [0x10000, 0x10000 + 1 MiB).
    fn keys(ctrl: u32) -> Vec<Rkey> {
        let mut k = std::vec![Rkey::default(); 256];
        k[3] = Rkey {
            ctrl: RKEY_VALID | ctrl,
            ep: 7,
            key: KEY,
            base: 0x10000,
            len: 1 << 20,
            node: 0,
        };
        k
    }

    const KEY: u64 = 0x5ee1_abcd_0bad_f00d;

    fn pkt(op: Op, src: u16, op_id: u32, offset: u64, len: u64) -> Header {
        Header {
            op,
            src,
            dst: 9,
            endpoint: 7,
            op_id,
            seq: 0,
            status: 0,
            rkey: KEY,
            addr: 0x10000,
            len,
            offset,
            span: 0,
            ce: false,
        }
    }

    fn mbox(src: u16, op_id: u32, len: u64) -> Header {
        Header {
            rkey: 5, // the sender's endpoint
            addr: 0,
            ..pkt(Op::Mailbox, src, op_id, 0, len)
        }
    }

    /// The reply's op, offset and status.
    fn said(s: &Step) -> Option<(Op, u64, i32)> {
        s.reply
            .map(|r| (r.header.op, r.header.offset, r.header.status))
    }

    fn slot_of(s: &Step) -> usize {
        match s.act {
            Act::Place(i) | Act::PlaceAhead(i) | Act::Report(i) | Act::Serve { slot: i, .. } => i,
            Act::Nothing => panic!("no slot in {s:?}"),
        }
    }

    /// ABORT (the sender gave up, or its context was stopped): the unfinished op it names ends
    /// at once and its slot comes back, with no answer; an ABORT with another key, range,
    /// endpoint, source or cookie changes nothing; a finished op stays (its duplicates are
    /// still ACKed); a fault a channel is resolving ends, and the channel's report then
    /// changes nothing.
    #[test]
    fn an_abort_ends_the_op_it_names() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        // A full table: 64 unfinished puts of node 1; a 65th is RNR.
        for id in 0..RX_OPS as u32 {
            let h = pkt(Op::Write, 1, 100 + id, 0, 8192);
            let i = slot_of(&t.on_packet(&h, 4096, &k, ALL, 0, IDLE));
            t.placed(i, &h, 4096, None);
        }
        let late = pkt(Op::Write, 2, 7, 0, 4096);
        assert!(t.on_packet(&late, 4096, &k, ALL, 1, IDLE).rnr);
        let abort = pkt(Op::Abort, 1, 130, 0, 8192);
        let i = t.find(1, 130).unwrap();
        for forged in [
            Header {
                rkey: KEY ^ 1,
                ..abort
            },
            Header {
                endpoint: 8,
                ..abort
            },
            Header { len: 4096, ..abort },
            Header {
                addr: 0x20000,
                ..abort
            },
            Header { src: 2, ..abort },
            Header {
                op_id: 999,
                ..abort
            },
        ] {
            assert!(t.on_packet(&forged, 0, &k, ALL, 2, IDLE).dropped);
            assert_eq!(t.slot(i).unwrap().state(), RxState::Receiving);
        }
        let s = t.on_packet(&abort, 0, &k, ALL, 3, IDLE);
        assert_eq!((s.reply, s.act, s.dropped), (None, Act::Nothing, false));
        let r = t.slot(i).unwrap();
        assert_eq!((r.state(), r.err()), (RxState::Error, ECANCELED));
        // Its slot comes back at once, not after the idle time.
        assert_eq!(
            t.on_packet(&late, 4096, &k, ALL, 4, IDLE).act,
            Act::Place(i)
        );
        // A finished op stays finished: its last packet is ACKed again.
        let j = t.find(1, 131).unwrap();
        let h = pkt(Op::Write, 1, 131, 4096, 8192);
        assert_eq!(t.on_packet(&h, 4096, &k, ALL, 5, IDLE).act, Act::Place(j));
        t.placed(j, &h, 4096, None);
        t.on_packet(&pkt(Op::Abort, 1, 131, 0, 8192), 0, &k, ALL, 6, IDLE);
        assert_eq!(t.slot(j).unwrap().state(), RxState::Done);
        assert_eq!(
            said(&t.on_packet(&h, 4096, &k, ALL, 7, IDLE)),
            Some((Op::Ack, 8192, 0))
        );
        // A fault a channel holds: ended; the channel's RESUME then changes nothing.
        let m = t.find(1, 132).unwrap();
        let h = pkt(Op::Write, 1, 132, 4096, 8192);
        t.on_packet(&h, 4096, &k, ALL, 8, IDLE);
        assert_eq!(t.placed(m, &h, 0, Some(0x11000)).act, Act::Report(m));
        assert!(t.hold(m, 3));
        t.on_packet(&pkt(Op::Abort, 1, 132, 0, 8192), 0, &k, ALL, 9, IDLE);
        assert_eq!(t.slot(m).unwrap().state(), RxState::Error);
        assert_eq!(t.resolved(m, 3), Step::default());
        // A message is named by its cookie too.
        let mut t = RecvTable::new(9);
        let msg = Header {
            addr: 0x5eed,
            ..mbox(1, 1, 10)
        };
        let s = t.on_packet(&msg, 10, &[], HELD, 0, IDLE);
        let i = t.find(1, 1).unwrap();
        assert_eq!(t.slot(i).unwrap().state(), RxState::NotReady, "{s:?}");
        let abort = Header {
            op: Op::Abort,
            ..msg
        };
        assert!(
            t.on_packet(
                &Header {
                    addr: 0x5eee,
                    ..abort
                },
                0,
                &[],
                HELD,
                1,
                IDLE
            )
            .dropped
        );
        t.on_packet(&abort, 0, &[], HELD, 2, IDLE);
        assert_eq!(t.slot(i).unwrap().state(), RxState::Error);
    }

    /// Coalesced ACKs: one in two packets placed in order is ACKed, echoing the first one,
    /// and an owed ACK goes after the delay; at once for a marked packet (ECE), the op's last
    /// packet, a block placed past a gap and a duplicate. A fault NACKs where the op stands,
    /// which answers what was owed. A table that coalesces nothing ACKs every packet.
    #[test]
    fn acks_are_coalesced() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        t.set_acks(2, 1000);
        let b = BLOCK;
        let p = |off: u64, seq: u32| Header {
            seq,
            ..pkt(Op::Write, 1, 10, off, 8 * b)
        };
        let place = |t: &mut RecvTable, h: &Header, now: u64, got: u64| {
            let s = t.on_packet(h, b as usize, &k, ALL, now, IDLE);
            match s.act {
                Act::Place(i) | Act::PlaceAhead(i) => {
                    let fault = (got < b).then_some(0x10000 + h.offset + got);
                    t.placed(i, h, got, fault)
                }
                _ => s,
            }
        };
        assert_eq!(said(&place(&mut t, &p(0, 0), 100, b)), None, "owed");
        assert_eq!(t.ack_due(), Some(1100));
        let s = place(&mut t, &p(b, 1), 150, b);
        assert_eq!(said(&s), Some((Op::Ack, 2 * b, 0)));
        assert_eq!(
            s.reply.unwrap().header.seq,
            0,
            "echoes the first packet owed"
        );
        assert_eq!(t.ack_due(), None);
        // Owed, then the delay.
        assert_eq!(said(&place(&mut t, &p(2 * b, 2), 200, b)), None);
        assert_eq!(t.flush_ack(1199), None, "not due yet");
        let r = t.flush_ack(1200).expect("due");
        assert_eq!(
            (r.header.op, r.header.offset, r.header.seq),
            (Op::Ack, 3 * b, 2)
        );
        assert_eq!((r.header.dst, r.header.op_id, r.header.src), (1, 10, 9));
        assert_eq!(t.flush_ack(1200), None, "sent once");
        // A marked packet at once, with ECE.
        let s = place(
            &mut t,
            &Header {
                ce: true,
                ..p(3 * b, 3)
            },
            1300,
            b,
        );
        assert_eq!(said(&s), Some((Op::Ack, 4 * b, 0)));
        assert_eq!(s.reply.unwrap().header.span, ECE);
        // A block past a gap at once (the sender reads its map), a duplicate at once.
        let s = place(&mut t, &p(6 * b, 4), 1400, b);
        assert_eq!(said(&s), Some((Op::Ack, 4 * b, 0b10)));
        let s = place(&mut t, &p(0, 5), 1410, b);
        assert_eq!(said(&s), Some((Op::Ack, 4 * b, 0b10)));
        // In order again with blocks held past the gap: at once.
        let s = place(&mut t, &p(4 * b, 6), 1420, b);
        assert_eq!(said(&s), Some((Op::Ack, 5 * b, 0b1)));
        // Owed, then a fault: the NACK says where the op stands; nothing more is owed.
        let s = place(&mut t, &p(5 * b, 7), 1430, b);
        assert_eq!(
            said(&s),
            Some((Op::Ack, 7 * b, 0)),
            "block 6 was held: 5 and 6 go in"
        );
        let s = place(&mut t, &p(7 * b, 8), 1440, 0);
        assert_eq!(said(&s), Some((Op::Nack, 7 * b, Nack::Fault.status())));
        assert_eq!(t.ack_due(), None);
        // The op's last packet: at once.
        let i = t.find(1, 10).unwrap();
        assert!(t.hold(i, 3));
        t.resolved(i, 3);
        let s = place(&mut t, &p(7 * b, 9), 1500, b);
        assert_eq!(said(&s), Some((Op::Ack, 8 * b, 0)));
        // Owed, then a fault of the next packet, so nothing is owed.
        let mut t = RecvTable::new(9);
        t.set_acks(4, 1000);
        assert_eq!(said(&place(&mut t, &p(0, 0), 0, b)), None);
        assert_eq!(said(&place(&mut t, &p(b, 1), 0, b)), None);
        let s = place(&mut t, &p(2 * b, 2), 0, 0);
        assert_eq!(said(&s), Some((Op::Nack, 2 * b, Nack::Fault.status())));
        assert_eq!((t.ack_due(), t.flush_ack(5000)), (None, None));
        // Not coalescing: every packet.
        let mut t = RecvTable::new(9);
        assert_eq!(said(&place(&mut t, &p(0, 0), 0, b)), Some((Op::Ack, b, 0)));
        assert_eq!(
            said(&place(&mut t, &p(b, 1), 0, b)),
            Some((Op::Ack, 2 * b, 0))
        );
    }

    /// A put with immediate data (WRITE_IMM): placed as a put, its last packet only when the
    /// endpoint's ring can take the completion. A full ring NACKs RNR at the last packet (the
    /// bytes before it stay placed) and a slot freed RESUMEs from there; a process without a
    /// mailbox refuses it, ECONNREFUSED; the finished op is ACKed again, never completed twice;
    /// the immediate is part of the op's identity; a ring page that faults is NACKed FAULT.
    #[test]
    fn a_put_with_immediate_completes_in_the_ring() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let imm = |h: Header| Header {
            status: 0xfeed_f00d_u32 as i32,
            ..h
        };
        let h0 = imm(pkt(Op::WriteImm, 1, 10, 0, 8192));
        let h1 = imm(pkt(Op::WriteImm, 1, 10, 4096, 8192));
        let s = t.on_packet(&h0, 4096, &k, ALL & !ep::MBOX_ROOM, 0, IDLE);
        let i = slot_of(&s);
        assert_eq!(s.act, Act::Place(i), "not the last packet: no ring needed");
        assert_eq!(
            said(&t.placed(i, &h0, 4096, None)),
            Some((Op::Ack, 4096, 0))
        );
        let r = t.slot(i).unwrap();
        assert_eq!((r.kind(), r.imm()), (RxKind::WriteImm, 0xfeed_f00d));
        // The last packet, the ring full: RNR from 4096; the table keeps the op.
        let s = t.on_packet(&h1, 4096, &k, ALL & !ep::MBOX_ROOM, 1, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 4096, Nack::Rnr.status())));
        assert!(s.rnr);
        assert_eq!(t.slot(i).unwrap().state(), RxState::Rnr);
        let s = t.on_packet(&h1, 0, &k, ALL & !ep::MBOX_ROOM, 2, IDLE);
        assert_eq!(
            s.reply.map(|r| r.header.op),
            Some(Op::Nack),
            "a probe: still full"
        );
        // A slot freed: RESUME from 4096, and the last packet places data and completion.
        let s = t.wake(i);
        assert_eq!(said(&s), Some((Op::Resume, 4096, 0)));
        let s = t.on_packet(&h1, 4096, &k, ALL, 3, IDLE);
        assert_eq!(s.act, Act::Place(i));
        // The completion's slot did not translate: NACK FAULT, nothing counted placed.
        let s = t.placed(i, &h1, 0, Some(0xabc000));
        assert_eq!(said(&s), Some((Op::Nack, 4096, Nack::Fault.status())));
        assert_eq!(s.act, Act::Report(i));
        assert!(t.hold(i, 5));
        let s = t.resolved(i, 5);
        assert_eq!(said(&s), Some((Op::Resume, 4096, 0)));
        let s = t.on_packet(&h1, 4096, &k, ALL, 4, IDLE);
        assert_eq!(s.act, Act::Place(i));
        assert_eq!(
            said(&t.placed(i, &h1, 4096, None)),
            Some((Op::Ack, 8192, 0))
        );
        assert_eq!(t.slot(i).unwrap().state(), RxState::Done);
        // Its last packet again (the ACK was lost): ACKed, not placed (no second completion).
        let s = t.on_packet(&h1, 4096, &k, ALL, 5, IDLE);
        assert_eq!((said(&s), s.act), (Some((Op::Ack, 8192, 0)), Act::Nothing));
        // Another immediate is another op's: not this one's packet.
        let other = Header { status: 1, ..h1 };
        assert!(t.on_packet(&other, 4096, &k, ALL, 6, IDLE).dropped);
        // A one-packet put to a process without a mailbox: ECONNREFUSED, nothing placed.
        let h = imm(pkt(Op::WriteImm, 1, 11, 0, 4096));
        for flags in [ALL & !ep::MBOX_OWNED, ALL & !ep::MBOX_ON] {
            let mut t = RecvTable::new(9);
            let s = t.on_packet(&h, 4096, &k, flags, 7, IDLE);
            assert_eq!(said(&s), Some((Op::Nack, 0, -ECONNREFUSED)));
            assert_eq!(s.act, Act::Nothing);
        }
        // A plain write of the same op id is not the WRITE_IMM's.
        let s = t.on_packet(&pkt(Op::Write, 1, 10, 0, 8192), 4096, &k, ALL, 8, IDLE);
        assert!(s.dropped);
    }

    #[test]
    fn a_write_is_placed_in_order_and_answered() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let h = pkt(Op::Write, 1, 10, 0, 8192);
        let s = t.on_packet(&h, 4096, &k, ALL, 0, IDLE);
        let i = slot_of(&s);
        assert_eq!((s.reply, s.act), (None, Act::Place(i)));
        let s = t.placed(i, &h, 4096, None);
        assert_eq!(said(&s), Some((Op::Ack, 4096, 0)));
        let a = s.reply.unwrap();
        assert_eq!((a.header.src, a.header.dst, a.counted), (9, 1, false));
        assert_eq!(a.header.span, 0, "not marked: no echo");
        // Past a gap: NACK SEQUENCE once a round: then silence for what follows, until a
        // packet at or below the one NACKed (the sender went back: the next round); before
        // it: a duplicate, ACKed.
        let far = pkt(Op::Write, 1, 10, 6000, 8192);
        let s = t.on_packet(&far, 100, &k, ALL, 1, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 4096, Nack::Sequence.status())));
        assert!(s.duplicate);
        let further = pkt(Op::Write, 1, 10, 8092, 8192);
        let s = t.on_packet(&further, 100, &k, ALL, 2, IDLE);
        assert_eq!((s.reply, s.duplicate), (None, true));
        let s = t.on_packet(&far, 100, &k, ALL, 2, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 4096, Nack::Sequence.status())));
        let s = t.on_packet(&h, 4096, &k, ALL, 3, IDLE);
        assert_eq!((said(&s), s.duplicate), (Some((Op::Ack, 4096, 0)), true));
        // A packet the fabric marked (congestion experienced): its ACK echoes it.
        let h2 = Header {
            ce: true,
            ..pkt(Op::Write, 1, 10, 4096, 8192)
        };
        let s = t.on_packet(&h2, 4096, &k, ALL, 4, IDLE);
        assert_eq!(s.act, Act::Place(i));
        let s = t.placed(i, &h2, 4096, None);
        assert_eq!(said(&s), Some((Op::Ack, 8192, 0)));
        let a = s.reply.unwrap().header;
        assert_eq!(
            (a.span, a.ce),
            (ECE, false),
            "echoed, and the ACK itself unmarked"
        );
        assert_eq!(t.slot(i).unwrap().state(), RxState::Done);
        // Finished: data and probes are ACKed in full.
        let s = t.on_packet(&h2, 4096, &k, ALL, 5, IDLE);
        assert_eq!((said(&s), s.duplicate), (Some((Op::Ack, 8192, 0)), true));
        let s = t.on_packet(&pkt(Op::Write, 1, 10, 0, 8192), 0, &k, ALL, 6, IDLE);
        assert_eq!(said(&s), Some((Op::Ack, 8192, 0)));
    }

    #[test]
    fn keys_refuse_and_only_their_own_op_ends() {
        let mut t = RecvTable::new(9);
        let w = keys(RKEY_WRITE);
        let h = pkt(Op::Write, 1, 10, 0, 8192);
        let refused = |t: &mut RecvTable, h: &Header, k: &[Rkey]| {
            let s = t.on_packet(h, 4096, k, ALL, 0, IDLE);
            assert_eq!(s.act, Act::Nothing);
            said(&s).map(|(op, _, st)| (op, st))
        };
        let nack = |e: i32| Some((Op::Nack, -e));
        // Every way a key fails is the same ENOKEY (register map 2.5: no oracle).
        let r = keys(RKEY_READ);
        for (why, bad, k) in [
            (
                "another key",
                Header {
                    rkey: KEY ^ 0x100,
                    ..h
                },
                &w,
            ),
            (
                "a high bit",
                Header {
                    rkey: KEY ^ (1 << 40),
                    ..h
                },
                &w,
            ),
            ("another endpoint", Header { endpoint: 8, ..h }, &w),
            ("no write right", h, &r),
            (
                "before the region",
                Header {
                    addr: 0x10000 - 1,
                    ..h
                },
                &w,
            ),
            (
                "longer than the region",
                Header {
                    len: (1 << 20) + 1,
                    ..h
                },
                &w,
            ),
            (
                "past the region's end",
                Header {
                    addr: 0x10000 + (1 << 20) - 8191,
                    ..h
                },
                &w,
            ),
        ] {
            assert_eq!(refused(&mut t, &bad, k), nack(ENOKEY), "{why}");
        }
        assert!((0..RX_OPS).all(|i| t.slot(i).unwrap().state() == RxState::Free));
        // A forged packet naming a live op, with another key, leaves the op alone.
        let i = slot_of(&t.on_packet(&h, 4096, &w, ALL, 0, IDLE));
        t.placed(i, &h, 4096, None);
        let forged = Header {
            rkey: KEY ^ 1,
            offset: 4096,
            ..h
        };
        assert_eq!(refused(&mut t, &forged, &w), nack(ENOKEY));
        assert_eq!(t.slot(i).unwrap().state(), RxState::Receiving);
        // Its own packet, once the key is revoked, ends it.
        let h2 = Header { offset: 4096, ..h };
        let s = t.on_packet(&h2, 4096, &[], ALL, 1, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 4096, -ENOKEY)));
        assert_eq!(t.slot(i).unwrap().state(), RxState::Error);
        let s = t.on_packet(&Header { offset: 0, ..h2 }, 0, &w, ALL, 2, IDLE);
        assert_eq!(
            said(&s),
            Some((Op::Nack, 4096, -ENOKEY)),
            "a probe learns the end"
        );
    }

    /// A page ahead of the data that does not translate (the engine's look-ahead): the op
    /// goes on placing below it, its sender is NACKed AHEAD from it, and the channel that
    /// reports it RESUMEs from it; data that reaches it first faults on that channel's
    /// report, not a second one; one that cannot be mapped ends the op.
    #[test]
    fn a_page_ahead_is_reported_while_the_data_comes() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let at = |off: u64| Header {
            seq: (off / 4096) as u32,
            ..pkt(Op::Write, 2, 5, off, 65536)
        };
        let place = |t: &mut RecvTable, off: u64| {
            let i = slot_of(&t.on_packet(&at(off), 4096, &k, ALL, 1, IDLE));
            t.placed(i, &at(off), 4096, None);
            i
        };
        let i = place(&mut t, 0);
        assert_eq!(t.fault_ahead(i, Some(0), 0x13000, 0), None, "no channel");
        assert_eq!(
            t.fault_ahead(i, Some(0), 0x10000, 7),
            None,
            "placed already"
        );
        // Page 3 is missing: NACK AHEAD from its offset, echoing packet 0.
        let s = t.fault_ahead(i, Some(0), 0x13005, 7).unwrap();
        assert_eq!(said(&s), Some((Op::Nack, 12288, Nack::Ahead.status())));
        assert_eq!((s.reply.unwrap().header.seq, s.act), (0, Act::Nothing));
        assert_eq!(t.slot(i).unwrap().ahead(), Some((12288, 0x13005, 7)));
        assert_eq!(t.fault_ahead(i, Some(0), 0x14000, 8), None, "one at a time");
        // The data below it is placed meanwhile; a probe at it is told to wait, uncounted.
        place(&mut t, 4096);
        place(&mut t, 8192);
        assert_eq!(t.slot(i).unwrap().placed(), 12288);
        let p = t.on_packet(&at(12288), 0, &k, ALL, 2, IDLE);
        assert_eq!(said(&p), Some((Op::Nack, 12288, Nack::Fault.status())));
        assert!(!p.reply.unwrap().counted);
        // Only its channel resolves it: RESUME from the page, echoing packet 0, once.
        assert_eq!(t.resolved(i, 8), Step::default());
        let s = t.resolved(i, 7);
        assert_eq!(said(&s), Some((Op::Resume, 12288, 0)));
        assert_eq!(s.reply.unwrap().header.seq, 0);
        assert_eq!(t.resolved(i, 7), Step::default(), "once");
        assert_eq!(t.slot(i).unwrap().ahead(), None);
        // Page 5, found on from the RESUME (echoing what it echoed), and the data gets there
        // first: its fault is channel 7's report, with no second one.
        let s = t.fault_ahead(i, None, 0x15000, 7).unwrap();
        assert_eq!(s.reply.unwrap().header.seq, 0);
        place(&mut t, 12288);
        place(&mut t, 16384);
        assert_eq!(
            t.on_packet(&at(20480), 4096, &k, ALL, 3, IDLE).act,
            Act::Place(i)
        );
        let s = t.placed(i, &at(20480), 0, Some(0x15000));
        assert_eq!(said(&s), Some((Op::Nack, 20480, Nack::Fault.status())));
        assert_eq!(s.act, Act::Nothing);
        let r = *t.slot(i).unwrap();
        assert_eq!(
            (r.state(), r.holder(), r.ahead()),
            (RxState::Faulted, 7, None)
        );
        assert_eq!(said(&t.resolved(i, 7)), Some((Op::Resume, 20480, 0)));
        // A channel that stops forgets its page (the data meets it); one that cannot map it
        // ends the op.
        t.fault_ahead(i, Some(5), 0x17000, 4).unwrap();
        t.release(i, 4);
        assert_eq!(t.slot(i).unwrap().ahead(), None);
        t.fault_ahead(i, Some(5), 0x17000, 4).unwrap();
        assert_eq!(said(&t.refused(i, 4, -14)), Some((Op::Nack, 20480, -14)));
        assert_eq!(t.slot(i).unwrap().state(), RxState::Error);
    }

    #[test]
    fn a_fault_is_reported_held_and_resumed() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let h = Header {
            seq: 41,
            ..pkt(Op::Write, 2, 5, 0, 8192)
        };
        let i = slot_of(&t.on_packet(&h, 4096, &k, ALL, 0, IDLE));
        let s = t.placed(i, &h, 1000, Some(0x10000 + 1000));
        assert_eq!(said(&s), Some((Op::Nack, 1000, Nack::Fault.status())));
        assert_eq!((s.act, s.reply.unwrap().counted), (Act::Report(i), true));
        let r = *t.slot(i).unwrap();
        assert_eq!(
            (r.state(), r.fault_addr(), r.holder()),
            (RxState::Faulted, 0x11000 - 3096, 0)
        );
        // Data while faulted is dropped; a probe is told again, not counted.
        let d = t.on_packet(&Header { offset: 1000, ..h }, 3096, &k, ALL, 1, IDLE);
        assert_eq!((d.reply, d.duplicate), (None, true));
        let p = t.on_packet(
            &Header {
                offset: 1000,
                seq: 50,
                ..h
            },
            0,
            &k,
            ALL,
            1,
            IDLE,
        );
        assert_eq!(said(&p), Some((Op::Nack, 1000, Nack::Fault.status())));
        assert_eq!(
            (p.reply.unwrap().counted, p.reply.unwrap().header.seq),
            (false, 50)
        );
        // One channel holds it; another cannot; only the holder answers it.
        assert!(!t.hold(i, 0));
        assert!(t.hold(i, 3));
        assert!(!t.hold(i, 4));
        assert_eq!(t.resolved(i, 4), Step::default());
        t.release(i, 4);
        assert_eq!(t.slot(i).unwrap().holder(), 3);
        t.release(i, 3);
        assert!(t.hold(i, 4));
        let s = t.resolved(i, 4);
        assert_eq!(said(&s), Some((Op::Resume, 1000, 0)));
        assert_eq!(
            s.reply.unwrap().header.seq,
            41,
            "it echoes the packet NACKed"
        );
        assert_eq!(t.resolved(i, 4), Step::default(), "once");
        // Its RESUME lost: a probe gets it again.
        let p = t.on_packet(&Header { offset: 1000, ..h }, 0, &k, ALL, 2, IDLE);
        assert_eq!(said(&p), Some((Op::Resume, 1000, 0)));
        // A second fault, which the driver cannot resolve.
        let h2 = Header {
            offset: 1000,
            seq: 42,
            ..h
        };
        assert_eq!(t.on_packet(&h2, 4096, &k, ALL, 3, IDLE).act, Act::Place(i));
        t.placed(i, &h2, 0, Some(0x10000 + 1000));
        assert!(t.hold(i, 1));
        assert_eq!(said(&t.refused(i, 1, -12)), Some((Op::Nack, 1000, -12)));
        let p = t.on_packet(&h2, 0, &k, ALL, 4, IDLE);
        assert_eq!(said(&p), Some((Op::Nack, 1000, -12)));
        // An engine error's status (or none) ends it with EFAULT.
        let h3 = pkt(Op::Write, 2, 6, 0, 4096);
        let j = slot_of(&t.on_packet(&h3, 4096, &k, ALL, 5, IDLE));
        t.placed(j, &h3, 0, Some(0x10000));
        assert!(t.hold(j, 1));
        let st = -(cqe_status::ERR_BASE + 3);
        assert_eq!(said(&t.refused(j, 1, st)), Some((Op::Nack, 0, -EFAULT)));
    }

    #[test]
    fn no_context_waits_and_wakes() {
        let k = keys(RKEY_WRITE | RKEY_READ);
        let mut t = RecvTable::new(9);
        let h = Header {
            seq: 3,
            ..pkt(Op::Write, 1, 1, 0, 4096)
        };
        let s = t.on_packet(&h, 4096, &k, 0, 0, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 0, Nack::NotReady.status())));
        assert!(s.want_ep);
        let i = t.find(1, 1).unwrap();
        let p = t.on_packet(&h, 0, &k, 0, 1, IDLE);
        assert_eq!(
            (said(&p), p.reply.unwrap().counted),
            (Some((Op::Nack, 0, 2)), false)
        );
        let w = t.wake(i);
        assert_eq!(
            (said(&w), w.reply.unwrap().header.seq),
            (Some((Op::Resume, 0, 0)), 3)
        );
        assert_eq!(t.wake(i), Step::default(), "once");
        assert_eq!(t.on_packet(&h, 4096, &k, ALL, 2, IDLE).act, Act::Place(i));
        // A GET's responder too, from the request's offset.
        let r = Header {
            status: 4096,
            ..pkt(Op::ReadReq, 1, 2, 8192, 65536)
        };
        let s = t.on_packet(&r, 0, &k, 0, 3, IDLE);
        assert_eq!((said(&s), s.want_ep), (Some((Op::Nack, 8192, 2)), true));
        let j = t.find(1, 2).unwrap();
        assert_eq!(said(&t.wake(j)), Some((Op::Resume, 8192, 0)));
        let s = t.on_packet(&r, 0, &k, ALL, 4, IDLE);
        assert_eq!(
            s.act,
            Act::Serve {
                slot: j,
                from: 8192,
                to: 8192 + 4096
            }
        );
    }

    #[test]
    fn mailbox_messages() {
        let mut t = RecvTable::new(9);
        let m = Header {
            seq: 8,
            ..mbox(1, 1, 100)
        };
        // Malformed for a mailbox: dropped, nothing kept.
        for bad in [
            Header { len: 0, ..m },
            Header {
                len: u64::from(MBOX_MAX) + 1,
                ..m
            },
            Header { offset: 1, ..m },
        ] {
            assert!(t.on_packet(&bad, 0, &[], ALL, 0, IDLE).dropped);
        }
        assert!(t.on_packet(&m, 99, &[], ALL, 0, IDLE).dropped);
        assert_eq!(t.find(1, 1), None);
        // A full ring: RNR, then room (its RESUME lost): taken on the retransmission.
        let s = t.on_packet(&m, 100, &[], HELD | ep::READY | ep::MBOX_ON, 0, IDLE);
        assert_eq!(
            (said(&s), s.rnr),
            (Some((Op::Nack, 0, Nack::Rnr.status())), true)
        );
        let i = t.find(1, 1).unwrap();
        assert_eq!(t.slot(i).unwrap().state(), RxState::Rnr);
        assert_eq!(t.on_packet(&m, 100, &[], ALL, 1, IDLE).act, Act::Place(i));
        assert_eq!(said(&t.placed(i, &m, 100, None)), Some((Op::Ack, 100, 0)));
        let s = t.on_packet(&m, 100, &[], ALL, 2, IDLE);
        assert_eq!((said(&s), s.duplicate), (Some((Op::Ack, 100, 0)), true));
        // An endpoint with no mailbox refuses; one with no context waits.
        let s = t.on_packet(&mbox(1, 2, 10), 10, &[], ep::READY, 3, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 0, -ECONNREFUSED)));
        let s = t.on_packet(&mbox(1, 3, 10), 10, &[], HELD, 3, IDLE);
        assert!(s.want_ep);
        // RNR woken when the reader frees a slot; a ring slot that faults is reported.
        let m4 = mbox(1, 4, 10);
        t.on_packet(&m4, 10, &[], HELD | ep::READY | ep::MBOX_ON, 4, IDLE);
        let j = t.find(1, 4).unwrap();
        assert_eq!(said(&t.wake(j)), Some((Op::Resume, 0, 0)));
        assert_eq!(t.on_packet(&m4, 10, &[], ALL, 5, IDLE).act, Act::Place(j));
        let s = t.placed(j, &m4, 0, Some(0x5000));
        assert_eq!((said(&s), s.act), (Some((Op::Nack, 0, 1)), Act::Report(j)));
        // Another sender's message claiming the op id of this one is not it, nor one with
        // another cookie; the answers carry the message's cookie.
        let other = Header { rkey: 6, ..m4 };
        assert!(t.on_packet(&other, 10, &[], ALL, 6, IDLE).dropped);
        let forged = Header { addr: 0x1234, ..m4 };
        assert!(t.on_packet(&forged, 0, &[], ALL, 6, IDLE).dropped);
        let c = Header {
            addr: 0x7fff_0000_1234_5678,
            ..mbox(1, 20, 10)
        };
        let k = slot_of(&t.on_packet(&c, 10, &[], ALL, 7, IDLE));
        let s = t.placed(k, &c, 10, None);
        assert_eq!(s.reply.unwrap().header.addr, c.addr);
    }

    /// Transport v2, defects 6 and 11: a keyless packet creates no state and wakes no
    /// process unless its endpoint owns a mailbox; a closed endpoint's unfinished ops end.
    #[test]
    fn keyless_packets_wake_only_a_mailbox_owner() {
        let mut t = RecvTable::new(9);
        for flags in [
            0,
            ep::OPEN,
            ep::MBOX_OWNED,
            ep::OPEN | ep::READY | ep::MBOX_ON,
        ] {
            for plen in [10, 0] {
                let s = t.on_packet(&mbox(1, 1, 10), plen, &[], flags, 0, IDLE);
                assert_eq!(said(&s), Some((Op::Nack, 0, -ECONNREFUSED)), "{flags:#x}");
                assert!(!s.want_ep && s.reply.unwrap().counted);
                assert_eq!(t.find(1, 1), None, "nothing kept");
            }
        }
        // An owner not resident is woken; once it is gone, its message is refused.
        let m = mbox(1, 2, 10);
        assert!(t.on_packet(&m, 10, &[], HELD, 1, IDLE).want_ep);
        let i = t.find(1, 2).unwrap();
        let s = t.on_packet(&m, 10, &[], ep::OPEN, 2, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 0, -ECONNREFUSED)));
        assert_eq!(t.slot(i).unwrap().state(), RxState::Error);
        // A message placed before the mailbox went is still ACKed.
        let m3 = mbox(1, 3, 10);
        let j = slot_of(&t.on_packet(&m3, 10, &[], ALL, 3, IDLE));
        t.placed(j, &m3, 10, None);
        let s = t.on_packet(&m3, 10, &[], 0, 4, IDLE);
        assert_eq!(said(&s), Some((Op::Ack, 10, 0)));
        // Closing the endpoint ends what waits on it, once, and leaves what finished.
        let k = keys(RKEY_WRITE);
        let w = Header {
            seq: 4,
            ..pkt(Op::Write, 2, 9, 0, 8192)
        };
        assert!(t.on_packet(&w, 4096, &k, HELD, 5, IDLE).want_ep);
        let m5 = Header {
            seq: 5,
            ..mbox(2, 10, 10)
        };
        assert!(t.on_packet(&m5, 10, &[], HELD, 5, IDLE).want_ep);
        let (wi, mi) = (t.find(2, 9).unwrap(), t.find(2, 10).unwrap());
        let s = t.close(wi, 7);
        assert_eq!(
            (said(&s), s.reply.unwrap().header.seq),
            (Some((Op::Nack, 0, -ENOKEY)), 4)
        );
        assert_eq!(said(&t.close(mi, 7)), Some((Op::Nack, 0, -ECONNREFUSED)));
        assert_eq!(t.close(mi, 7), Step::default(), "once");
        assert_eq!(t.close(j, 7), Step::default(), "a finished message stays");
        assert_eq!(t.close(RX_OPS, 7), Step::default());
        let s = t.on_packet(&Header { offset: 0, ..w }, 0, &k, ALL, 6, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 0, -ENOKEY)), "a probe learns it");
    }

    #[test]
    fn a_full_table_answers_rnr_and_keeps_nothing() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        for id in 0..RX_OPS as u32 {
            let h = pkt(Op::Write, 1, id, 0, 8192);
            let s = t.on_packet(&h, 4096, &k, ALL, 0, IDLE);
            t.placed(slot_of(&s), &h, 4096, None);
        }
        let h = pkt(Op::Write, 2, 1, 0, 8192);
        let s = t.on_packet(&h, 4096, &k, ALL, 10, IDLE);
        assert_eq!(
            (said(&s), s.rnr),
            (Some((Op::Nack, 0, Nack::Rnr.status())), true)
        );
        assert_eq!(t.find(2, 1), None);
        // Its probe: RNR while full; dropped past offset 0 (nothing of it was ever kept).
        let probe = t.on_packet(&h, 0, &k, ALL, 11, IDLE);
        assert!(probe.rnr);
        assert!(
            t.on_packet(&Header { offset: 4096, ..h }, 0, &k, ALL, 11, IDLE)
                .dropped
        );
        // Once a slot is idle past the idle time, the probe is RESUMEd and the op admitted.
        let probe = t.on_packet(&h, 0, &k, ALL, IDLE + 1, IDLE);
        assert_eq!(said(&probe), Some((Op::Resume, 0, 0)));
        let s = t.on_packet(&h, 4096, &k, ALL, IDLE + 2, IDLE);
        assert!(matches!(s.act, Act::Place(_)));
        assert_eq!(t.find(1, 0), None, "the longest idle op went");
    }

    #[test]
    fn keyless_messages_hold_a_share_and_held_faults_stay() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        for id in 0..KEYLESS as u32 {
            let s = t.on_packet(&mbox(3, id, 10), 10, &[], HELD, 0, IDLE);
            assert!(s.want_ep, "message {id}");
        }
        let s = t.on_packet(&mbox(3, 99, 10), 10, &[], HELD, 0, IDLE);
        assert!(s.rnr, "past its share, a keyless op gets no slot");
        let p = t.on_packet(&mbox(3, 99, 10), 0, &[], HELD, 0, IDLE);
        assert!(p.rnr);
        // Keyed work still has room, all of it.
        for id in 0..(RX_OPS - KEYLESS) as u32 {
            let h = pkt(Op::Write, 1, id, 0, 8192);
            let s = t.on_packet(&h, 4096, &k, ALL, 1, IDLE);
            let i = slot_of(&s);
            if id == 0 {
                t.placed(i, &h, 0, Some(0x10000));
                assert!(t.hold(i, 7));
            }
        }
        // Idle past the idle time, every slot goes but the fault a channel holds.
        for id in 100..100 + RX_OPS as u32 - 1 {
            let h = pkt(Op::Write, 4, id, 0, 8192);
            assert!(matches!(
                t.on_packet(&h, 4096, &k, ALL, 3 * IDLE, IDLE).act,
                Act::Place(_)
            ));
        }
        assert!(
            t.on_packet(
                &pkt(Op::Write, 4, 999, 0, 8192),
                4096,
                &k,
                ALL,
                3 * IDLE,
                IDLE
            )
            .rnr
        );
        assert_eq!(
            t.slot(t.find(1, 0).unwrap()).unwrap().state(),
            RxState::Faulted
        );
    }

    /// Selective retransmission (Transport v2, IRN): a WRITE's whole block past a gap is
    /// placed where it goes (all of it or none), and each ACK's `status` maps the blocks
    /// placed past its offset (bit i: block `offset / BLOCK + 1 + i`); when the gap fills,
    /// the blocks past it count at once. Anything else past a gap is NACKed SEQUENCE as
    /// before: a packet that starts mid-block, a WRITE_IMM (its completion needs every byte
    /// before its last), an endpoint with no context.
    #[test]
    fn blocks_past_a_gap_are_placed_and_mapped() {
        const B: u64 = BLOCK;
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let at = |off: u64| pkt(Op::Write, 1, 5, off, 5 * B);
        let send = |t: &mut RecvTable, off: u64, got: Option<u64>| {
            let s = t.on_packet(&at(off), B as usize, &k, ALL, 1, IDLE);
            match (s.act, got) {
                (Act::PlaceAhead(i) | Act::Place(i), Some(got)) => {
                    let fault = (got < B).then_some(0x10000 + off + got);
                    let r = t.placed(i, &at(off), got, fault);
                    (s.act, said(&r), r.act)
                }
                _ => (s.act, said(&s), Act::Nothing),
            }
        };
        // Block 2 first: placed ahead, ACK 0 with block 2's bit (bit 1).
        let (act, ack, _) = send(&mut t, 2 * B, Some(B));
        assert_eq!(act, Act::PlaceAhead(0));
        assert_eq!(ack, Some((Op::Ack, 0, 0b10)));
        // Block 4 does not translate: not kept, no fault reported (none of it was placed),
        // and the gap NACKed at once (SEQUENCE), once: the sender goes back to it.
        let (act, ack, then) = send(&mut t, 4 * B, Some(0));
        let seq = Nack::Sequence.status();
        assert_eq!(
            (act, ack, then),
            (Act::PlaceAhead(0), Some((Op::Nack, 0, seq)), Act::Nothing)
        );
        assert_eq!(t.slot(0).unwrap().state(), RxState::Receiving);
        assert_eq!(
            send(&mut t, 4 * B, Some(0)).1,
            Some((Op::Nack, 0, seq)),
            "next round"
        );
        // Block 3, then block 2 again: a duplicate, ACKed with the map, not placed.
        assert_eq!(send(&mut t, 3 * B, Some(B)).1, Some((Op::Ack, 0, 0b110)));
        let (act, ack, _) = send(&mut t, 2 * B, None);
        assert_eq!((act, ack), (Act::Nothing, Some((Op::Ack, 0, 0b110))));
        // Past the gap but mid-block: in order only (and below the packet NACKed last, so
        // NACKed: a round of the sender's after it).
        let mid = t.on_packet(&at(B + 100), 100, &k, ALL, 1, IDLE);
        assert_eq!(
            (mid.act, said(&mid)),
            (Act::Nothing, Some((Op::Nack, 0, seq)))
        );
        // Block 0 in order: ACK 4096, blocks 2 and 3 mapped from block 2 (bits 0, 1).
        let (act, ack, _) = send(&mut t, 0, Some(B));
        assert_eq!((act, ack), (Act::Place(0), Some((Op::Ack, B, 0b11))));
        // Block 1 fills the gap: 2 and 3 count at once.
        assert_eq!(send(&mut t, B, Some(B)).1, Some((Op::Ack, 4 * B, 0)));
        assert_eq!(send(&mut t, 4 * B, Some(B)).1, Some((Op::Ack, 5 * B, 0)));
        assert_eq!(t.slot(0).unwrap().state(), RxState::Done);

        // A WRITE_IMM past a gap, and a WRITE to an endpoint with no context: in order only.
        let imm = Header {
            op: Op::WriteImm,
            ..pkt(Op::Write, 2, 1, 0, 4 * B)
        };
        let s = t.on_packet(&imm, B as usize, &k, ALL, 2, IDLE);
        t.placed(slot_of(&s), &imm, B, None);
        let s = t.on_packet(
            &Header {
                offset: 2 * B,
                ..imm
            },
            B as usize,
            &k,
            ALL,
            2,
            IDLE,
        );
        assert_eq!(said(&s), Some((Op::Nack, B, Nack::Sequence.status())));
        let w = pkt(Op::Write, 3, 1, 0, 4 * B);
        let s = t.on_packet(&w, B as usize, &k, ALL, 3, IDLE);
        t.placed(slot_of(&s), &w, B, None);
        let far = Header { offset: 2 * B, ..w };
        let s = t.on_packet(&far, B as usize, &k, ALL & !ep::READY, 3, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, B, Nack::Sequence.status())));
    }

    /// A reset forgets every op as it stood (model qtest Keys.test_wrong_index caught it: a
    /// put refused mid-way, then both engines reset, and its packets still on the link placed
    /// as a new op's blocks): a late packet of an op under way or refused before the reset is
    /// refused ESTALE, never placed; a finished op is ACKed again; an op never seen is new.
    #[test]
    fn a_reset_forgets_its_ops_as_they_stood() {
        const B: u64 = BLOCK;
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let op = |id: u32, off: u64| pkt(Op::Write, 1, id, off, 4 * B);
        for (id, blocks) in [(1, 1), (2, 4)] {
            for n in 0..blocks {
                let s = t.on_packet(&op(id, n * B), B as usize, &k, ALL, 1, IDLE);
                t.placed(slot_of(&s), &op(id, n * B), B, None);
            }
        }
        t.reset();
        let late = t.on_packet(&op(1, 2 * B), B as usize, &k, ALL, 2, IDLE);
        assert_eq!(late.act, Act::Nothing);
        assert_eq!(said(&late), Some((Op::Nack, 0, -ESTALE)));
        assert_eq!(
            said(&t.on_packet(&op(2, 3 * B), B as usize, &k, ALL, 2, IDLE)),
            Some((Op::Ack, 4 * B, 0))
        );
        let new = t.on_packet(&op(4, 2 * B), B as usize, &k, ALL, 2, IDLE);
        assert_eq!(new.act, Act::PlaceAhead(slot_of(&new)));
    }

    /// A finished op the table forgot: a copy of it is ACKed again, all of it, and placed
    /// nothing (C9-105: its last ACK may have been lost); a failed one is refused ESTALE, and
    /// so is any op its sender said it is done with. Probes too; per source; kept over a reset.
    #[test]
    fn forgotten_ops_are_acked_again_or_refused() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        for id in 0..=RX_OPS as u32 {
            let h = pkt(Op::Write, 1, id, 0, 4096);
            let s = t.on_packet(&h, 4096, &k, ALL, u64::from(id), IDLE);
            let fault = (id == 1).then_some(0x10000);
            t.placed(slot_of(&s), &h, if id == 1 { 0 } else { 4096 }, fault);
            if id == 1 {
                // Op 1 fails: its page does not translate and the fault is refused.
                let i = t.find(1, 1).unwrap();
                assert!(t.hold(i, 5));
                t.refused(i, 5, -14);
            }
        }
        let h = pkt(Op::Write, 1, RX_OPS as u32 + 1, 0, 4096);
        let s = t.on_packet(&h, 4096, &k, ALL, 99, IDLE);
        t.placed(slot_of(&s), &h, 4096, None);
        // Ops 0 and 1 went for ops 64 and 65.
        assert_eq!(t.find(1, 0), None);
        assert_eq!(t.find(1, 1), None);
        let done = pkt(Op::Write, 1, 0, 0, 4096);
        let s = t.on_packet(&done, 4096, &k, ALL, 100, IDLE);
        assert_eq!(said(&s), Some((Op::Ack, 4096, 0)));
        assert_eq!(s.act, Act::Nothing);
        assert!(s.duplicate);
        assert_eq!(
            said(&t.on_packet(&done, 0, &k, ALL, 100, IDLE)),
            Some((Op::Ack, 4096, 0))
        );
        let failed = pkt(Op::Write, 1, 1, 0, 4096);
        assert_eq!(
            said(&t.on_packet(&failed, 4096, &k, ALL, 100, IDLE)),
            Some((Op::Nack, 0, -ESTALE))
        );
        assert_eq!(
            said(&t.on_packet(&failed, 0, &k, ALL, 100, IDLE)),
            Some((Op::Nack, 0, -ESTALE))
        );
        // Another node's op 0 is new; the table is per source.
        assert!(matches!(
            t.on_packet(&pkt(Op::Write, 2, 0, 0, 4096), 4096, &k, ALL, 100, IDLE)
                .act,
            Act::Place(_)
        ));
        t.reset();
        assert_eq!(
            said(&t.on_packet(&failed, 4096, &k, ALL, 100, IDLE)),
            Some((Op::Nack, 0, -ESTALE))
        );
        // Node 1 says that its ops before 500 are finished (op 502 is the third-oldest that
        // is not): op 0 is then a stray copy, refused, and op 499 too, never placed.
        let word = Header {
            span: 3,
            ..pkt(Op::Write, 1, 502, 0, 4096)
        };
        assert!(matches!(
            t.on_packet(&word, 4096, &k, ALL, 101, IDLE).act,
            Act::Place(_)
        ));
        for id in [0, 499] {
            assert_eq!(
                said(&t.on_packet(&pkt(Op::Write, 1, id, 0, 4096), 4096, &k, ALL, 102, IDLE)),
                Some((Op::Nack, 0, -ESTALE)),
                "op {id}"
            );
        }
        assert!(matches!(
            t.on_packet(&pkt(Op::Write, 1, 500, 0, 4096), 4096, &k, ALL, 103, IDLE)
                .act,
            Act::Place(_)
        ));
    }

    /// The failure seen in make check (Transport v2): a sender's ops run side by side, so
    /// op 0's first packet can come after ops 1..300 finished and were forgotten (its source
    /// page was faulting at its sender). Op 0 is new, not ESTALE: its sender said so.
    #[test]
    fn a_restarted_sender_s_reused_op_is_placed_not_acked() {
        // Transport v2's defect 2: a sender powers up again and its op ids start again; a new
        // op with the same key, address, length and endpoint as a finished one used to be ACKed
        // in full with nothing written. Ids now start at a random first id per peer, and a
        // source quiet for QUIET_NS with no op live that comes back with ids of no sequence
        // known has restarted.
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        for id in 1..=3u32 {
            let h = Header {
                span: 1,
                ..pkt(Op::Write, 1, id, 0, 4096)
            };
            let s = t.on_packet(&h, 4096, &k, ALL, u64::from(id), IDLE);
            t.placed(slot_of(&s), &h, 4096, None);
        }
        // The same op id again (its first id drew the same: 2^-32), at once: a duplicate.
        let again = Header {
            span: 1,
            ..pkt(Op::Write, 1, 2, 0, 4096)
        };
        let s = t.on_packet(&again, 4096, &k, ALL, 10, IDLE);
        assert_eq!(s.reply.map(|r| r.header.op), Some(Op::Ack));
        assert!(!matches!(s.act, Act::Place(_)));
        // Restarted a second later from another first id, same key, address and length.
        let new = Header {
            span: 1,
            ..pkt(Op::Write, 1, 0x8000_0002, 0, 4096)
        };
        let s = t.on_packet(&new, 4096, &k, ALL, 10 + QUIET_NS, IDLE);
        assert!(matches!(s.act, Act::Place(_)), "{s:?}");
        // An op of the old sequence is dropped now, unanswered.
        let s = t.on_packet(&again, 4096, &k, ALL, 11 + QUIET_NS, IDLE);
        assert!(s.dropped && s.reply.is_none(), "{s:?}");
    }

    #[test]
    fn a_forged_far_op_id_locks_nobody_out() {
        // Defect 3: one forged MAILBOX whose id is 2^31 - 1 past the floor, with a span, used
        // to put every honest op of its source below the floor (ESTALE) for 2^31 ops.
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let h = Header {
            span: 1,
            ..pkt(Op::Write, 1, 100, 0, 4096)
        };
        let s = t.on_packet(&h, 4096, &k, ALL, 1, IDLE);
        t.placed(slot_of(&s), &h, 4096, None);
        let forged = Header {
            span: 1,
            ..mbox(1, 100 + i32::MAX as u32, 10)
        };
        let s = t.on_packet(&forged, 10, &[], ALL, 2, IDLE);
        assert!(s.dropped && s.reply.is_none(), "{s:?}");
        let next = Header {
            span: 1,
            ..pkt(Op::Write, 1, 101, 0, 4096)
        };
        let s = t.on_packet(&next, 4096, &k, ALL, 3, IDLE);
        assert!(matches!(s.act, Act::Place(_)), "{s:?}");
    }

    #[test]
    fn a_late_op_is_new_whatever_finished_after_it() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        for id in 1..=300u32 {
            let h = Header {
                span: (id + 1) as u16, // op 0 is the oldest unfinished
                ..pkt(Op::Write, 1, id, 0, 4096)
            };
            let s = t.on_packet(&h, 4096, &k, ALL, u64::from(id), IDLE);
            t.placed(slot_of(&s), &h, 4096, None);
        }
        let late = Header {
            span: 1,
            ..pkt(Op::Write, 1, 0, 0, 4096)
        };
        let s = t.on_packet(&late, 4096, &k, ALL, 400, IDLE);
        assert!(matches!(s.act, Act::Place(_)), "{s:?}");
        // And its probe, had its first packet been refused for a full table.
        let mut t2 = RecvTable::new(9);
        for id in 1..=300u32 {
            let h = Header {
                span: (id + 1) as u16,
                ..pkt(Op::Write, 1, id, 0, 4096)
            };
            let s = t2.on_packet(&h, 4096, &k, ALL, u64::from(id), IDLE);
            t2.placed(slot_of(&s), &h, 4096, None);
        }
        let probe = Header {
            span: 1,
            ..pkt(Op::Write, 1, 0, 0, 4096)
        };
        assert_eq!(
            said(&t2.on_packet(&probe, 0, &k, ALL, 400, IDLE)),
            Some((Op::Resume, 0, 0))
        );
    }

    /// Op ids wrap around: ops on both sides of the wrap are placed, and the ones forgotten
    /// before it are still known after it (serial arithmetic, not plain comparison).
    #[test]
    fn op_ids_wrap_around() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let first = u32::MAX - 70;
        for n in 0..=RX_OPS as u32 + 10 {
            let id = first.wrapping_add(n);
            let h = pkt(Op::Write, 1, id, 0, 4096);
            let s = t.on_packet(&h, 4096, &k, ALL, u64::from(n), IDLE);
            assert!(matches!(s.act, Act::Place(_)), "op {id:#x}: {s:?}");
            assert_eq!(
                said(&t.placed(slot_of(&s), &h, 4096, None)),
                Some((Op::Ack, 4096, 0))
            );
        }
        // The first ops went for the last ones, past the wrap: still ACKed again, not placed.
        let old = pkt(Op::Write, 1, first, 0, 4096);
        let s = t.on_packet(&old, 4096, &k, ALL, 100, IDLE);
        assert_eq!(said(&s), Some((Op::Ack, 4096, 0)));
        assert_eq!(s.act, Act::Nothing);
        // A new op past the wrap is new.
        let new = pkt(Op::Write, 1, first.wrapping_add(200), 0, 4096);
        assert!(matches!(
            t.on_packet(&new, 4096, &k, ALL, 101, IDLE).act,
            Act::Place(_)
        ));
    }

    /// A requester has at most the read cap of READ_RESP waiting in the port (Transport v2,
    /// defect 5): a request is clamped to it, one that would pass it is NACKed RNR with
    /// nothing kept, and it is served again once the link has taken enough; other requesters
    /// have their own.
    #[test]
    fn reads_waiting_in_the_port_are_capped_per_requester() {
        let k = keys(RKEY_READ);
        let mut t = RecvTable::new(9);
        t.set_read_cap(64 << 10);
        let req = |src: u16, op_id: u32, ask: i32| Header {
            status: ask,
            ..pkt(Op::ReadReq, src, op_id, 0, 1 << 20)
        };
        let r = req(1, 1, 1 << 20);
        let s = t.on_packet(&r, 0, &k, ALL, 0, IDLE);
        let i = slot_of(&s);
        assert_eq!(
            s.act,
            Act::Serve {
                slot: i,
                from: 0,
                to: 64 << 10
            },
            "clamped"
        );
        assert_eq!(t.served(i, &r, 64 << 10, None), Step::default());
        assert_eq!(t.reading(1), 64 << 10);
        // Full: any request of node 1 is RNR, and nothing of it is kept.
        let r2 = req(1, 2, 4096);
        let s = t.on_packet(&r2, 0, &k, ALL, 1, IDLE);
        assert_eq!(
            (said(&s), s.rnr),
            (Some((Op::Nack, 0, Nack::Rnr.status())), true)
        );
        assert!(t.find(1, 2).is_none());
        // Node 3 has its own.
        assert!(matches!(
            t.on_packet(&req(3, 1, 4096), 0, &k, ALL, 2, IDLE).act,
            Act::Serve { .. }
        ));
        // The link took 8 KiB: a 4 KiB request fits, an 8 KiB and 4 KiB one then does not.
        t.read_sent(1, 8192);
        let s = t.on_packet(&r2, 0, &k, ALL, 3, IDLE);
        let j = slot_of(&s);
        assert_eq!(
            s.act,
            Act::Serve {
                slot: j,
                from: 0,
                to: 4096
            }
        );
        t.served(j, &r2, 4096, None);
        assert!(t.on_packet(&req(1, 3, 8192), 0, &k, ALL, 4, IDLE).rnr);
        t.read_sent(1, u64::MAX);
        assert_eq!(t.reading(1), 0, "saturating");
        assert!(matches!(
            t.on_packet(&req(1, 3, 8192), 0, &k, ALL, 5, IDLE).act,
            Act::Serve { .. }
        ));
        // A reset forgets what waited; the cap is at least one packet.
        t.served(i, &r, 1 << 20, None);
        t.reset();
        assert_eq!(t.reading(1), 0);
        t.set_read_cap(1);
        let s = t.on_packet(&req(1, 9, 1 << 20), 0, &k, ALL, 6, IDLE);
        assert!(matches!(s.act, Act::Serve { from: 0, to, .. } if to == crate::packet::MTU as u64));
    }

    #[test]
    fn reads_are_served_a_megabyte_at_a_time() {
        let k = keys(RKEY_READ);
        let mut t = RecvTable::new(9);
        t.set_read_cap(4 * READ_MAX);
        assert!(t
            .on_packet(&pkt(Op::Write, 1, 1, 0, 4096), 4096, &k, ALL, 0, IDLE)
            .reply
            .is_some());
        let r = Header {
            status: -1,
            seq: 6,
            ..pkt(Op::ReadReq, 1, 1, 4096, 1 << 20)
        };
        let s = t.on_packet(&r, 0, &k, ALL, 0, IDLE);
        let i = slot_of(&s);
        assert_eq!(
            s.act,
            Act::Serve {
                slot: i,
                from: 4096,
                to: 1 << 20
            }
        );
        let big = Header {
            status: 4 << 20,
            ..pkt(Op::ReadReq, 1, 2, 0, 1 << 20)
        };
        let s = t.on_packet(&big, 0, &k, ALL, 0, IDLE);
        assert!(matches!(s.act, Act::Serve { from: 0, to, .. } if to == READ_MAX));
        let none = Header { status: 0, ..r };
        assert!(matches!(
            t.on_packet(&none, 0, &k, ALL, 0, IDLE).act,
            Act::Serve {
                from: 4096,
                to: 4096,
                ..
            }
        ));
        // A source fault: NACK FAULT where it stopped, requests told again, RESUME once
        // resolved, and the next request is served.
        let s = t.served(i, &r, 8192, Some(0x10000 + 8192));
        assert_eq!(
            (said(&s), s.act),
            (Some((Op::Nack, 8192, 1)), Act::Report(i))
        );
        let again = t.on_packet(&r, 0, &k, ALL, 1, IDLE);
        assert_eq!(said(&again), Some((Op::Nack, 8192, 1)));
        assert!(t.hold(i, 2));
        let s = t.resolved(i, 2);
        assert_eq!(
            (said(&s), s.reply.unwrap().header.seq),
            (Some((Op::Resume, 8192, 0)), 6)
        );
        let r2 = Header { offset: 8192, ..r };
        assert!(matches!(
            t.on_packet(&r2, 0, &k, ALL, 2, IDLE).act,
            Act::Serve { from: 8192, .. }
        ));
        // Write rights do not read.
        let s = t.on_packet(&r, 0, &keys(RKEY_WRITE), ALL, 3, IDLE);
        assert_eq!(said(&s), Some((Op::Nack, 4096, -ENOKEY)));
    }

    #[test]
    fn calls_out_of_turn_change_nothing() {
        let mut t = RecvTable::new(9);
        let h = pkt(Op::Write, 1, 1, 0, 4096);
        assert!(t.placed(RX_OPS, &h, 10, None).dropped);
        assert!(t.placed(0, &h, 10, None).dropped);
        assert!(t.served(0, &h, 10, None).dropped);
        assert!(!t.hold(RX_OPS + 5, 1));
        t.release(RX_OPS, 1);
        assert_eq!(t.resolved(0, 1), Step::default());
        assert_eq!(t.refused(RX_OPS, 1, -5), Step::default());
        assert_eq!(t.wake(0), Step::default());
        for op in [Op::Ack, Op::Nack, Op::Resume, Op::ReadResp] {
            assert!(
                t.on_packet(&Header { op, ..h }, 0, &[], ALL, 0, IDLE)
                    .dropped
            );
        }
        assert!((0..RX_OPS).all(|i| t.slot(i).unwrap().state() == RxState::Free));
    }

    #[test]
    fn keys_are_looked_up_with_their_endpoint_in_any_entry() {
        let mut k = std::vec![Rkey::default(); 256];
        k[200] = Rkey {
            ctrl: RKEY_VALID | RKEY_WRITE,
            ep: 9,
            key: KEY,
            base: 0x10000,
            len: 1 << 20,
            node: 0,
        };
        k[17] = Rkey { ep: 7, ..k[200] };
        let h = pkt(Op::Write, 1, 1, 0, 4096);
        assert_eq!(rkey_check(&k, &h, RKEY_WRITE), Ok(()));
        assert_eq!(
            rkey_check(&k, &Header { endpoint: 9, ..h }, RKEY_WRITE),
            Ok(())
        );
        assert_eq!(
            rkey_check(&k, &Header { endpoint: 8, ..h }, RKEY_WRITE),
            Err(ENOKEY)
        );
        assert_eq!(rkey_check(&k, &h, RKEY_READ), Err(ENOKEY));
        k[17].ctrl = 0;
        assert_eq!(rkey_check(&k, &h, RKEY_WRITE), Err(ENOKEY), "revoked");
        assert_eq!(rkey_check(&[], &h, RKEY_WRITE), Err(ENOKEY));
    }

    /// 2.9: a key bound to one initiator works in its packets only; from any other source it
    /// fails as a wrong key does (the same ENOKEY, and counted against that source), so a key
    /// seen on the link or leaked is no use to another node.
    #[test]
    fn a_bound_key_works_for_its_initiator_only() {
        let mut k = keys(RKEY_WRITE);
        k[3].ctrl |= RKEY_BOUND;
        k[3].node = 5;
        let from = |src: u16| Header {
            src,
            ..pkt(Op::Write, 1, 1, 0, 4096)
        };
        assert_eq!(rkey_check(&k, &from(5), RKEY_WRITE), Ok(()));
        assert_eq!(rkey_check(&k, &from(4), RKEY_WRITE), Err(ENOKEY));
        assert_eq!(rkey_check(&k, &from(6), RKEY_WRITE), Err(ENOKEY));
        let mut t = RecvTable::new(9);
        let s = t.on_packet(&from(4), 4096, &k, ALL, 0, IDLE);
        assert!(s.key_failed, "counted against the source");
        assert_eq!(t.keyfails(4), 1);
        let s = t.on_packet(&from(5), 4096, &k, ALL, 1, IDLE);
        assert!(!s.key_failed);
        assert!(matches!(s.act, Act::Place(_)), "{:?}", s.act);
        // Unbound again: any source.
        k[3].ctrl &= !RKEY_BOUND;
        assert_eq!(rkey_check(&k, &from(4), RKEY_WRITE), Ok(()));
    }

    #[test]
    fn a_guesser_is_quarantined_and_released() {
        let k = keys(RKEY_WRITE);
        let mut t = RecvTable::new(9);
        let guess = |t: &mut RecvTable, g: u64, now: u64| {
            let h = Header {
                rkey: g,
                ..pkt(Op::Write, 5, g as u32, 0, 4096)
            };
            t.on_packet(&h, 4096, &k, ALL, now, IDLE)
        };
        // Failures spread over more than a second never add up to a quarantine.
        for i in 0..2 * u64::from(KEYFAIL_LIMIT) {
            let s = guess(&mut t, i, i * (KEYFAIL_WINDOW_NS / 200));
            assert!(s.key_failed && !s.quarantine && !s.quarantined, "guess {i}");
        }
        assert_eq!(t.keyfails(5), 2 * KEYFAIL_LIMIT);
        assert_eq!(t.quarantined(), 0);
        // Past the limit within one: quarantined, once; from then on nothing is answered.
        let at = 100 * KEYFAIL_WINDOW_NS;
        for i in 0..=u64::from(KEYFAIL_LIMIT) {
            let s = guess(&mut t, i, at + i);
            assert_eq!(s.quarantine, i == u64::from(KEYFAIL_LIMIT), "guess {i}");
            assert!(s.reply.is_some());
        }
        assert_eq!(t.quarantined(), 1 << 5);
        let s = guess(&mut t, 7, at + 1000);
        assert!(s.quarantined && s.dropped && s.reply.is_none() && !s.key_failed);
        // Even its right key, and its mailbox messages: the node is cut off.
        let good = pkt(Op::Write, 5, 1000, 0, 4096);
        assert!(t.on_packet(&good, 4096, &k, ALL, at, IDLE).quarantined);
        assert!(
            t.on_packet(&mbox(5, 1001, 8), 8, &[], ALL, at, IDLE)
                .quarantined
        );
        // Other nodes are not.
        let other = pkt(Op::Write, 6, 1, 0, 4096);
        assert!(matches!(
            t.on_packet(&other, 4096, &k, ALL, at, IDLE).act,
            Act::Place(_)
        ));
        // Released: its failures forgotten, its ops taken again.
        t.release_nodes(1 << 5);
        assert_eq!((t.quarantined(), t.keyfails(5)), (0, 0));
        assert!(matches!(
            t.on_packet(&good, 4096, &k, ALL, at, IDLE).act,
            Act::Place(_)
        ));
        // Limit 0: never quarantined. A reset brings back the default.
        t.set_keyfail_limit(0);
        for i in 0..1000 {
            assert!(!guess(&mut t, i, at + 2 * KEYFAIL_WINDOW_NS).quarantine);
        }
        t.reset();
        assert_eq!((t.keyfail_limit(), t.keyfails(5)), (KEYFAIL_LIMIT, 0));
        // Node ids past the table are counted nowhere, and never quarantined.
        assert!(!guess_from(&mut t, 64, &k).quarantine);
        assert_eq!(t.keyfails(64), 0);
    }

    fn guess_from(t: &mut RecvTable, src: u16, k: &[Rkey]) -> Step {
        let h = Header {
            rkey: 1,
            ..pkt(Op::Write, src, 1, 0, 4096)
        };
        t.on_packet(&h, 4096, k, ALL, 0, IDLE)
    }
}
