// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The `FI_EP_RDM` endpoint: messages (`FI_MSG`) and tagged messages (`FI_TAGGED`) over the
//! engine's user-level queue and mailbox (the protocol: `proto.rs`).
//!
//! An endpoint opens its own file of the domain's device (its endpoint id, what `fi_getname`
//! gives) and, at `fi_enable`, that file's queue and mailbox. Every message is one mailbox
//! message from a staging slot the endpoint owns (registered on demand, never pinned): an EAGER
//! one carries the bytes, copied there, so the application's buffer is free at once; a larger
//! one is an RTS naming the application's own buffer, registered for remote reads by the
//! receiver's node alone, which the receiver reads with the engine's get straight into its
//! receive buffer, registered the same way, and then answers FIN. Nothing is pinned: both
//! buffers' pages are faulted in by the engines as the get reaches them.
//!
//! Progress is manual: every CQ read collects the mailbox's messages and the queue's
//! completions; a post only when it finds no free staging slot, a peek before it looks. The state is one lock per endpoint (`State`), taken before a CQ's.

use crate::attr;
use crate::obj::{self, err, lock, serr, CqInner, Entry, Ops};
use crate::proto::{self, Addr, Header, Kind, Matcher, Posted, Rts};
use crate::regcache::{Reg, RegCache, Rights};
use crate::sys;
use core::ffi::{c_int, c_void};
use core::ptr;
use exanest_dma::{Access, Device, Message, Mode, Queue, QueueCompletion, Remote};
use std::collections::{HashMap, VecDeque};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `FI_ADDR_UNSPEC`.
const ADDR_UNSPEC: u64 = u64::MAX;
/// Staging slots: mailbox messages in flight at once (each [`proto::MBOX_MAX`] bytes).
const SLOTS: usize = 256;
/// The queue's rings: a message or a get takes two send descriptors.
const SQ_LOG2: u32 = 10;
const CQ_LOG2: u32 = 10;
/// The mailbox's slots: messages that may wait for the application's progress.
const MBOX_LOG2: u32 = 9;
/// Receives posted at once (`fi_rx_attr.size`).
const RX_SIZE: usize = 256;

/// A send's tag (tagged sends) and remote CQ data (`fi_senddata`, `FI_REMOTE_CQ_DATA`).
#[derive(Clone, Copy, Debug)]
struct Meta {
    tag: Option<u64>,
    data: Option<u64>,
}

/// A receive posted.
#[derive(Clone, Copy, Debug)]
struct Recv {
    ctx: usize,
    buf: usize,
    len: usize,
    /// `FI_MSG` or `FI_TAGGED`.
    kind: u64,
    report: bool,
}

/// What arrived before its receive: an EAGER message's bytes, or an RTS.
#[derive(Debug)]
enum Body {
    Bytes(Vec<u8>),
    Rts(Rts),
}

/// An operation the queue completes (by `wr_id`).
#[derive(Debug)]
enum Pending {
    /// An EAGER send from staging slot `slot`.
    Eager {
        slot: usize,
        ctx: usize,
        kind: u64,
        len: usize,
        report: bool,
        /// `fi_inject`: no completion at all (fi_msg(3)), an error only counted.
        inject: bool,
    },
    /// An RTS: its send's completion frees the slot; FIN completes the send.
    Rts { slot: usize, cookie: u64 },
    /// A FIN.
    Fin { slot: usize },
    /// A one-sided read or write (`fi_read`, `fi_write`), its local buffer registered for it
    /// (`handle`) or, injected, in staging slot `slot`.
    Rma {
        ctx: usize,
        kind: u64,
        len: usize,
        handle: Option<u32>,
        slot: Option<usize>,
        report: bool,
        inject: bool,
    },
    /// A get of a rendezvous message into a receive buffer.
    Get {
        recv: Recv,
        hdr: Header,
        src: Addr,
        cookie: u64,
        handle: u32,
        got: usize,
    },
}

/// A rendezvous send waiting for its FIN.
#[derive(Debug)]
struct RndvSend {
    ctx: usize,
    kind: u64,
    len: usize,
    handle: u32,
    report: bool,
}

/// The engine side of an enabled endpoint.
struct Hw {
    q: Queue,
    staging: Box<[u8]>,
    staging_handle: u32,
    free: Vec<usize>,
    /// Progress's buffers (empty between calls).
    msgs: Vec<Message>,
    comps: Vec<QueueCompletion>,
}

/// An endpoint's state (one lock).
struct State {
    dev: Arc<Device>,
    node: u32,
    endpoint: u32,
    caps: u64,
    tx_op_flags: u64,
    rx_op_flags: u64,
    av: Option<Arc<Mutex<obj::AvInner>>>,
    tx_cq: Option<(Arc<Mutex<CqInner>>, bool)>,
    rx_cq: Option<(Arc<Mutex<CqInner>>, bool)>,
    hw: Option<Hw>,
    m: Matcher<Recv, Body>,
    pending: HashMap<u64, Pending>,
    rndv: HashMap<u64, RndvSend>,
    /// FINs that found no free slot, sent as slots free.
    fins: VecDeque<(Addr, u64, u32)>,
    /// Messages `FI_PEEK | FI_CLAIM` set aside, by the receive's context.
    claimed: HashMap<usize, proto::Arrived<Body>>,
    next_id: u64,
    /// Mailbox messages that no endpoint of ours sent (dropped).
    strays: u64,
    /// Injected sends that failed (fi_inject has no completion to say so).
    inject_errors: u64,
    /// Registrations of finished operations, for the next on the same buffer (regcache.rs).
    regs: RegCache,
}

/// What an endpoint object and the CQs it writes share.
pub struct Shared {
    state: Mutex<State>,
}

/// `fid_ep`.
#[repr(C)]
pub struct Ep {
    fid: sys::fid_ep,
    shared: Arc<Shared>,
}

/// A completion status of the queue as a positive `FI_E*` (0: success).
fn fi_errno(status: i32) -> i32 {
    match status {
        0 => 0,
        // PLDMA_CQE_TIMEOUT: the peer's node stayed silent through the engine's retries.
        -265 => sys::FI_ETIMEDOUT as i32,
        s if (-255..0).contains(&s) => -s,
        _ => sys::FI_EIO as i32,
    }
}

/// A library error as a negative `FI_E*`.
fn lib_err(e: exanest_dma::Error) -> isize {
    let n = e.errno();
    if n == libc::EAGAIN {
        serr(sys::FI_EAGAIN)
    } else {
        -(n.max(1) as isize)
    }
}

impl State {
    fn report_tx(&self, e: Entry, report: bool) {
        if let Some((cq, selective)) = &self.tx_cq {
            if e.err != 0 || report || !selective {
                lock(cq).push(e);
            }
        }
    }

    fn report_rx(&self, e: Entry, report: bool) {
        if let Some((cq, selective)) = &self.rx_cq {
            if e.err != 0 || report || !selective {
                lock(cq).push(e);
            }
        }
    }

    fn src_addr(&self, src: Addr) -> u64 {
        self.av
            .as_ref()
            .map_or(obj::ADDR_NOTAVAIL, |a| lock(a).find(src))
    }

    /// Post one mailbox message (header + body) to `to` from a free staging slot.
    fn post_msg(&mut self, to: Addr, hdr: &Header, body: &[u8]) -> Result<(u64, usize), isize> {
        let Some(hw) = self.hw.as_mut() else {
            return Err(serr(sys::FI_EOPBADSTATE));
        };
        let Some(slot) = hw.free.pop() else {
            return Err(serr(sys::FI_EAGAIN));
        };
        let at = slot * proto::MBOX_MAX;
        hw.staging[at..at + proto::HDR].copy_from_slice(&hdr.encode());
        hw.staging[at + proto::HDR..at + proto::HDR + body.len()].copy_from_slice(body);
        let addr = hw.staging.as_ptr() as u64 + at as u64;
        let id = self.next_id;
        self.next_id += 1;
        match hw
            .q
            .send(addr, (proto::HDR + body.len()) as u32, to.0, to.1, id)
        {
            Ok(()) => Ok((id, slot)),
            Err(e) => {
                hw.free.push(slot);
                Err(lib_err(e))
            }
        }
    }

    fn send(
        &mut self,
        buf: usize,
        len: usize,
        dest: u64,
        ctx: usize,
        meta: Meta,
        flags: u64,
    ) -> isize {
        let Meta { tag, data } = meta;
        if self.hw.is_none() {
            return serr(sys::FI_EOPBADSTATE);
        }
        let Some(to) = self.av.as_ref().and_then(|a| lock(a).get(dest)) else {
            return serr(sys::FI_EINVAL);
        };
        let inject = flags & sys::FI_INJECT as u64 != 0;
        if len > u32::MAX as usize || (inject && len > proto::EAGER_MAX) {
            return serr(sys::FI_EMSGSIZE);
        }
        let report = !inject && flags & sys::FI_COMPLETION as u64 != 0;
        let kind = if tag.is_some() {
            sys::FI_TAGGED as u64
        } else {
            sys::FI_MSG as u64
        };
        let hflags = if tag.is_some() { proto::F_TAGGED } else { 0 }
            | if data.is_some() { proto::F_DATA } else { 0 };
        let mut hdr = Header {
            kind: Kind::Eager,
            flags: hflags,
            len: len as u32,
            tag: tag.unwrap_or(0),
            data: data.unwrap_or(0),
        };
        self.progress_if_full();
        if len <= proto::EAGER_MAX {
            let body = if len == 0 {
                &[][..]
            } else {
                // SAFETY: the application's buffer of `len` bytes, readable for the call.
                unsafe { core::slice::from_raw_parts(buf as *const u8, len) }
            };
            match self.post_msg(to, &hdr, body) {
                Ok((id, slot)) => {
                    self.pending.insert(
                        id,
                        Pending::Eager {
                            slot,
                            ctx,
                            kind,
                            len,
                            report,
                            inject,
                        },
                    );
                    0
                }
                Err(e) => e,
            }
        } else {
            // SAFETY: the application's buffer stays valid until the send completes
            // (fi_msg(3)); the engine only reads it, under a key for the receiver's node.
            let reg = unsafe {
                self.register(
                    buf,
                    len,
                    exanest_core::abi::ACCESS_READ | exanest_core::abi::ACCESS_REMOTE_READ,
                    Some(to.0),
                )
            };
            let Reg { handle, rkey } = match reg {
                Ok(x) => x,
                Err(e) => return lib_err(e),
            };
            let cookie = self.next_id;
            hdr.kind = Kind::Rts;
            let body = Rts {
                addr: buf as u64,
                rkey,
                cookie,
            }
            .encode();
            match self.post_msg(to, &hdr, &body) {
                Ok((id, slot)) => {
                    self.pending.insert(id, Pending::Rts { slot, cookie });
                    self.rndv.insert(
                        cookie,
                        RndvSend {
                            ctx,
                            kind,
                            len,
                            handle,
                            report,
                        },
                    );
                    0
                }
                Err(e) => {
                    self.unregister(handle);
                    e
                }
            }
        }
    }

    fn recv(
        &mut self,
        buf: usize,
        len: usize,
        src: u64,
        ctx: usize,
        tag: Option<(u64, u64)>,
        flags: u64,
    ) -> isize {
        if self.hw.is_none() {
            return serr(sys::FI_EOPBADSTATE);
        }
        let from = if src != ADDR_UNSPEC && self.caps & sys::FI_DIRECTED_RECV as u64 != 0 {
            match self.av.as_ref().and_then(|a| lock(a).get(src)) {
                Some(a) => Some(a),
                None => return serr(sys::FI_EINVAL),
            }
        } else {
            None
        };
        let kind = if tag.is_some() {
            sys::FI_TAGGED as u64
        } else {
            sys::FI_MSG as u64
        };
        let (t, ignore) = tag.unwrap_or((0, 0));
        let report = flags & sys::FI_COMPLETION as u64 != 0;
        let r = Recv {
            ctx,
            buf,
            len,
            kind,
            report,
        };
        let p = Posted {
            tagged: tag.is_some(),
            src: from,
            tag: t,
            ignore,
            op: r,
        };
        let peek = flags & sys::FI_PEEK as u64 != 0;
        let claim = tag.is_some() && flags & sys::FI_CLAIM != 0;
        if peek {
            // A peek looks at what has arrived: collect it first. A receive posted without
            // looking is matched when the next progress collects the mailbox, in the same order.
            self.progress();
            let found = if claim { self.m.take_arrived(&p) } else { None };
            let e = match (&found, self.m.peek(&p)) {
                (Some(a), _) | (None, Some(a)) => Entry {
                    ctx,
                    flags: sys::FI_RECV as u64
                        | kind
                        | if a.hdr.flags & proto::F_DATA != 0 {
                            sys::FI_REMOTE_CQ_DATA as u64
                        } else {
                            0
                        },
                    len: a.hdr.len as usize,
                    data: a.hdr.data,
                    tag: a.hdr.tag,
                    src: self.src_addr(a.src),
                    ..Default::default()
                },
                (None, None) => Entry {
                    ctx,
                    flags: sys::FI_RECV as u64 | kind,
                    err: sys::FI_ENOMSG as i32,
                    ..Default::default()
                },
            };
            if let Some(a) = found {
                self.claimed.insert(ctx, a);
            }
            self.report_rx(e, true);
            return 0;
        }
        if claim {
            let Some(a) = self.claimed.remove(&ctx) else {
                return serr(sys::FI_EINVAL);
            };
            if flags & sys::FI_DISCARD != 0 {
                self.discard(a);
                self.report_rx(
                    Entry {
                        ctx,
                        flags: sys::FI_RECV as u64 | kind,
                        ..Default::default()
                    },
                    report,
                );
            } else {
                self.deliver(r, a);
            }
            return 0;
        }
        if let Some((p, a)) = self.m.post(p) {
            self.deliver(p.op, a);
        }
        0
    }

    /// `fi_read` or `fi_write` (`write`) of `len` bytes between `buf` here and `raddr` under
    /// `key` at `dest`'s endpoint: the engine's get or put, the local buffer registered on
    /// demand for the op (or, injected, copied into a staging slot).
    // fi_read's and fi_write's own arguments.
    #[allow(clippy::too_many_arguments)]
    fn rma(
        &mut self,
        write: bool,
        buf: usize,
        len: usize,
        dest: u64,
        raddr: u64,
        key: u64,
        ctx: usize,
        flags: u64,
    ) -> isize {
        if self.hw.is_none() {
            return serr(sys::FI_EOPBADSTATE);
        }
        if self.caps & sys::FI_RMA as u64 == 0 {
            return serr(sys::FI_EOPNOTSUPP);
        }
        let Some(to) = self.av.as_ref().and_then(|a| lock(a).get(dest)) else {
            return serr(sys::FI_EINVAL);
        };
        let inject = flags & sys::FI_INJECT as u64 != 0;
        if len > u32::MAX as usize || (inject && (!write || len > proto::EAGER_MAX)) {
            return serr(sys::FI_EMSGSIZE);
        }
        let report = flags & sys::FI_COMPLETION as u64 != 0;
        let kind = sys::FI_RMA as u64
            | if write {
                sys::FI_WRITE as u64
            } else {
                sys::FI_READ as u64
            };
        self.progress_if_full();
        if len == 0 {
            if !inject {
                self.report_tx(
                    Entry {
                        ctx,
                        flags: kind,
                        ..Default::default()
                    },
                    report,
                );
            }
            return 0;
        }
        let (src, handle, slot) = if inject {
            let Some(hw) = self.hw.as_mut() else {
                return serr(sys::FI_EOPBADSTATE);
            };
            let Some(slot) = hw.free.pop() else {
                return serr(sys::FI_EAGAIN);
            };
            let at = slot * proto::MBOX_MAX;
            // SAFETY: the application's buffer of `len` bytes, readable for the call.
            let b = unsafe { core::slice::from_raw_parts(buf as *const u8, len) };
            hw.staging[at..at + len].copy_from_slice(b);
            (hw.staging.as_ptr() as u64 + at as u64, None, Some(slot))
        } else {
            let access = if write { Access::Read } else { Access::Write };
            // SAFETY: the application's buffer stays valid, and (a read's) unread, until the
            // op completes (fi_rma(3)); the engine reads or writes only [buf, buf + len).
            match unsafe { self.register(buf, len, access.bits(), None) } {
                Ok(r) => (buf as u64, Some(r.handle), None),
                Err(e) => return lib_err(e),
            }
        };
        let remote = Remote {
            addr: raddr,
            len: len as u64,
            rkey: key,
            node: to.0,
            endpoint: to.1,
        };
        let id = self.next_id;
        self.next_id += 1;
        let Some(hw) = self.hw.as_mut() else {
            return serr(sys::FI_EOPBADSTATE);
        };
        let r = if write {
            hw.q.put(src, len as u32, &remote, 0, id)
        } else {
            // SAFETY: registered writable above; the application does not read the buffer
            // before the op completes.
            unsafe { hw.q.get(src, len as u32, &remote, 0, id) }
        };
        match r {
            Ok(()) => {
                self.pending.insert(
                    id,
                    Pending::Rma {
                        ctx,
                        kind,
                        len,
                        handle,
                        slot,
                        report,
                        inject,
                    },
                );
                0
            }
            Err(e) => {
                if let Some(h) = handle {
                    self.unregister(h);
                }
                if let Some(s) = slot {
                    self.free(s);
                }
                lib_err(e)
            }
        }
    }

    /// A claimed message the application discards: a rendezvous sender still gets its FIN.
    fn discard(&mut self, a: proto::Arrived<Body>) {
        if let Body::Rts(rts) = a.body {
            self.fin(a.src, rts.cookie, 0);
        }
    }

    /// Deliver an arrived message into a matched receive.
    fn deliver(&mut self, r: Recv, a: proto::Arrived<Body>) {
        let msg_len = a.hdr.len as usize;
        let got = msg_len.min(r.len);
        let flags = sys::FI_RECV as u64
            | r.kind
            | if a.hdr.flags & proto::F_DATA != 0 {
                sys::FI_REMOTE_CQ_DATA as u64
            } else {
                0
            };
        let src = self.src_addr(a.src);
        let entry = |e: i32| Entry {
            ctx: r.ctx,
            flags,
            len: got,
            buf: r.buf,
            data: a.hdr.data,
            tag: a.hdr.tag,
            src,
            err: e,
            olen: msg_len - got,
        };
        match a.body {
            Body::Bytes(ref b) => {
                // SAFETY: the receive buffer has r.len >= got bytes, writable until the
                // receive completes (fi_msg(3)).
                unsafe { ptr::copy_nonoverlapping(b.as_ptr(), r.buf as *mut u8, got) };
                let e = if got < msg_len {
                    sys::FI_ETRUNC as i32
                } else {
                    0
                };
                self.report_rx(entry(e), r.report);
            }
            Body::Rts(rts) => {
                if got == 0 {
                    self.fin(a.src, rts.cookie, 0);
                    let e = if got < msg_len {
                        sys::FI_ETRUNC as i32
                    } else {
                        0
                    };
                    self.report_rx(entry(e), r.report);
                    return;
                }
                // SAFETY: the receive buffer stays valid and is not read by the application
                // until the receive completes; the engine writes only [buf, buf + got).
                let reg = unsafe { self.register(r.buf, got, Access::Write.bits(), None) };
                let handle = match reg {
                    Ok(r) => r.handle,
                    Err(e) => {
                        self.fin(a.src, rts.cookie, e.errno() as u32);
                        self.report_rx(entry(e.errno()), r.report);
                        return;
                    }
                };
                let from = Remote {
                    addr: rts.addr,
                    len: msg_len as u64,
                    rkey: rts.rkey,
                    node: a.src.0,
                    endpoint: a.src.1,
                };
                let id = self.next_id;
                self.next_id += 1;
                let Some(hw) = self.hw.as_mut() else { return };
                // SAFETY: registered writable above; the buffer is the receive's, not read
                // before the get's completion is polled (and the receive completes).
                match unsafe { hw.q.get(r.buf as u64, got as u32, &from, 0, id) } {
                    Ok(()) => {
                        self.pending.insert(
                            id,
                            Pending::Get {
                                recv: r,
                                hdr: a.hdr,
                                src: a.src,
                                cookie: rts.cookie,
                                handle,
                                got,
                            },
                        );
                    }
                    Err(e) => {
                        self.unregister(handle);
                        self.fin(a.src, rts.cookie, e.errno() as u32);
                        self.report_rx(entry(e.errno()), r.report);
                    }
                }
            }
        }
    }

    /// Send FIN (cookie, status) to `to`, now or when a slot frees.
    fn fin(&mut self, to: Addr, cookie: u64, status: u32) {
        let hdr = Header {
            kind: Kind::Fin,
            flags: 0,
            len: status,
            tag: cookie,
            data: 0,
        };
        match self.post_msg(to, &hdr, &[]) {
            Ok((id, slot)) => {
                self.pending.insert(id, Pending::Fin { slot });
            }
            Err(_) => self.fins.push_back((to, cookie, status)),
        }
    }

    /// Collect the mailbox's messages and the queue's completions.
    fn progress(&mut self) {
        let Some(hw) = self.hw.as_mut() else { return };
        // The endpoint's own buffers, kept between calls: collecting allocates nothing.
        let mut msgs = core::mem::take(&mut hw.msgs);
        let mut comps = core::mem::take(&mut hw.comps);
        while let Some(m) = hw.q.recv() {
            msgs.push(m);
        }
        let mut c = [QueueCompletion::default(); 32];
        loop {
            let n = hw.q.poll(&mut c);
            comps.extend_from_slice(&c[..n]);
            if n < c.len() {
                break;
            }
        }
        self.handle(&mut msgs, &mut comps);
        if let Some(hw) = self.hw.as_mut() {
            msgs.clear();
            comps.clear();
            hw.msgs = msgs;
            hw.comps = comps;
        }
    }

    /// What [`State::progress`] collected: messages first, then completions.
    fn handle(&mut self, msgs: &mut Vec<Message>, comps: &mut Vec<QueueCompletion>) {
        for m in msgs.drain(..) {
            if m.put().is_some() {
                continue;
            }
            let d = m.data();
            let src = (m.node, m.endpoint);
            let Some(hdr) = Header::decode(d) else {
                self.strays += 1;
                continue;
            };
            match hdr.kind {
                Kind::Eager | Kind::Rts => {
                    let body = if hdr.kind == Kind::Eager {
                        Body::Bytes(d[proto::HDR..].to_vec())
                    } else {
                        match Rts::decode(&d[proto::HDR..]) {
                            Some(r) => Body::Rts(r),
                            None => {
                                self.strays += 1;
                                continue;
                            }
                        }
                    };
                    if let Some((p, a)) = self.m.arrive(src, hdr, body) {
                        self.deliver(p.op, a);
                    }
                }
                Kind::Fin => {
                    let Some(s) = self.rndv.remove(&hdr.tag) else {
                        self.strays += 1;
                        continue;
                    };
                    self.unregister(s.handle); // The receiver is done reading it.
                    let e = Entry {
                        ctx: s.ctx,
                        flags: sys::FI_SEND as u64 | s.kind,
                        len: s.len,
                        err: hdr.len as i32,
                        ..Default::default()
                    };
                    self.report_tx(e, s.report);
                }
            }
        }
        for c in comps.drain(..) {
            let Some(p) = self.pending.remove(&c.wr_id) else {
                continue;
            };
            let e = fi_errno(c.status);
            match p {
                Pending::Eager {
                    slot,
                    ctx,
                    kind,
                    len,
                    report,
                    inject,
                } => {
                    self.free(slot);
                    if inject {
                        self.inject_errors += u64::from(e != 0);
                        continue;
                    }
                    self.report_tx(
                        Entry {
                            ctx,
                            flags: sys::FI_SEND as u64 | kind,
                            len,
                            err: e,
                            ..Default::default()
                        },
                        report,
                    );
                }
                Pending::Rts { slot, cookie } => {
                    self.free(slot);
                    if e != 0 {
                        if let Some(s) = self.rndv.remove(&cookie) {
                            self.unregister(s.handle); // The RTS never arrived.
                            self.report_tx(
                                Entry {
                                    ctx: s.ctx,
                                    flags: sys::FI_SEND as u64 | s.kind,
                                    len: s.len,
                                    err: e,
                                    ..Default::default()
                                },
                                s.report,
                            );
                        }
                    }
                }
                Pending::Fin { slot } => self.free(slot),
                Pending::Rma {
                    ctx,
                    kind,
                    len,
                    handle,
                    slot,
                    report,
                    inject,
                } => {
                    if let Some(h) = handle {
                        self.unregister(h); // The op is over.
                    }
                    if let Some(s) = slot {
                        self.free(s);
                    }
                    if inject {
                        self.inject_errors += u64::from(e != 0);
                    } else {
                        let entry = Entry {
                            ctx,
                            flags: kind,
                            len,
                            err: e,
                            ..Default::default()
                        };
                        self.report_tx(entry, report);
                    }
                }
                Pending::Get {
                    recv,
                    hdr,
                    src,
                    cookie,
                    handle,
                    got,
                } => {
                    self.unregister(handle); // The get is over.
                    self.fin(src, cookie, e as u32);
                    let msg_len = hdr.len as usize;
                    let err = if e != 0 {
                        e
                    } else if got < msg_len {
                        sys::FI_ETRUNC as i32
                    } else {
                        0
                    };
                    let flags = sys::FI_RECV as u64
                        | recv.kind
                        | if hdr.flags & proto::F_DATA != 0 {
                            sys::FI_REMOTE_CQ_DATA as u64
                        } else {
                            0
                        };
                    let entry = Entry {
                        ctx: recv.ctx,
                        flags,
                        len: got,
                        buf: recv.buf,
                        data: hdr.data,
                        tag: hdr.tag,
                        src: self.src_addr(src),
                        err,
                        olen: msg_len - got,
                    };
                    self.report_rx(entry, recv.report);
                }
            }
        }
        while let Some((to, cookie, status)) = self.fins.pop_front() {
            let hdr = Header {
                kind: Kind::Fin,
                flags: 0,
                len: status,
                tag: cookie,
                data: 0,
            };
            match self.post_msg(to, &hdr, &[]) {
                Ok((id, slot)) => {
                    self.pending.insert(id, Pending::Fin { slot });
                }
                Err(_) => {
                    self.fins.push_front((to, cookie, status));
                    break;
                }
            }
        }
    }

    /// A registration of `[buf, buf + len)` with `access` (`EXANEST_DMA_ACCESS_*`; a remote
    /// right's key for `node` alone), on demand: the cached one that covers it, or a new one,
    /// for which the least recently used idle entries make room when the driver says `ENOSPC`.
    /// Give it back with [`State::unregister`] when the operation is over.
    ///
    /// # Safety
    ///
    /// The memory stays valid, and is not used in a way that conflicts with the access, until
    /// the operation using the registration is over. The registration may outlive it, cached:
    /// the engine touches memory only in an operation, which this endpoint starts on a range
    /// the application handed over for it (a local right), or, under a key for `node`, reads
    /// it (a remote read changes nothing; a page no longer mapped ends the op with `EFAULT`).
    unsafe fn register(
        &mut self,
        buf: usize,
        len: usize,
        access: u32,
        node: Option<u32>,
    ) -> Result<Reg, exanest_dma::Error> {
        let (addr, len) = (buf as u64, len as u64);
        let rights = Rights { access, node };
        if let Some(r) = self.regs.get(addr, len, rights) {
            return Ok(r);
        }
        loop {
            // SAFETY: the caller's guarantees.
            let made = unsafe {
                self.dev
                    .register_raw_access_for(addr, len, access, Mode::OnDemand, node)
            };
            match made {
                Ok((handle, rkey)) => {
                    let r = Reg { handle, rkey };
                    let dev = &self.dev;
                    // Idle ones it covers go; nothing is in flight on them.
                    self.regs.insert(addr, len, rights, r, |h| {
                        let _ = dev.deregister(h);
                    });
                    return Ok(r);
                }
                Err(e) if e.errno() == libc::ENOSPC => match self.regs.evict_lru() {
                    // Idle: nothing is in flight on it.
                    Some(h) => {
                        let _ = self.dev.deregister(h);
                    }
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// An operation using registration `handle` is over: it stays cached, or goes.
    fn unregister(&mut self, handle: u32) {
        let dev = &self.dev;
        // Nothing is in flight on a handle the cache lets go.
        self.regs.release(handle, |h| {
            let _ = dev.deregister(h);
        });
    }

    /// Posts need a free staging slot: progress (which frees the slots of finished messages)
    /// only when none is, and leave the rest to the CQ reads, not every post.
    fn progress_if_full(&mut self) {
        if self.hw.as_ref().is_some_and(|h| h.free.is_empty()) {
            self.progress();
        }
    }

    fn free(&mut self, slot: usize) {
        if let Some(hw) = self.hw.as_mut() {
            hw.free.push(slot);
        }
    }

    fn enable(&mut self) -> c_int {
        if self.hw.is_some() {
            return 0;
        }
        if self.av.is_none() {
            return err(sys::FI_ENOAV);
        }
        if self.tx_cq.is_none() || self.rx_cq.is_none() {
            return err(sys::FI_ENOCQ);
        }
        let mut q = match self.dev.create_queue(SQ_LOG2, CQ_LOG2) {
            Ok(q) => q,
            Err(e) => return -(e.errno().max(1)),
        };
        if let Err(e) = q.create_mailbox(MBOX_LOG2) {
            return -(e.errno().max(1));
        }
        let staging = vec![0u8; SLOTS * proto::MBOX_MAX].into_boxed_slice();
        // SAFETY: the staging memory is the endpoint's, kept until after its deregistration
        // (Hw's drop); the engine only reads it, while the endpoint writes slots not in flight.
        let handle = match unsafe {
            self.dev.register_raw(
                staging.as_ptr() as u64,
                staging.len() as u64,
                Access::Read,
                Mode::OnDemand,
            )
        } {
            Ok(h) => h,
            Err(e) => return -(e.errno().max(1)),
        };
        self.hw = Some(Hw {
            q,
            staging,
            staging_handle: handle,
            free: (0..SLOTS).rev().collect(),
            msgs: Vec::new(),
            comps: Vec::new(),
        });
        0
    }
}

impl Shared {
    /// Collect what the engine finished (a CQ read's work).
    pub fn progress(&self) {
        lock(&self.state).progress();
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let dev = &self.dev;
        // Closing: the operations are over (or go with the file's queue).
        self.regs.clear(|h| {
            let _ = dev.deregister(h);
        });
        if let Some(hw) = self.hw.take() {
            // The staging memory is deregistered before it is freed; the queue goes with the
            // file (the registrations of sends and gets in flight with it).
            let _ = self.dev.deregister(hw.staging_handle); // Closing anyway: nothing to tell.
            drop(hw);
        }
    }
}

/// Sleep until one of `eps`'s files is readable (a message or a completion), at most `t`.
pub fn wait_any(eps: &[Arc<Shared>], t: Duration) {
    let mut fds: Vec<libc::pollfd> = eps
        .iter()
        .map(|e| libc::pollfd {
            fd: lock(&e.state).dev.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `fds` is a valid array of fds.len() pollfds.
    unsafe {
        libc::poll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            t.as_millis() as c_int,
        )
    };
}

// ---------------------------------------------------------------- the C ABI

/// # Safety
/// `ep` is an Ep's fid (or its `fid`).
unsafe fn shared<'a, T>(ep: *mut T) -> &'a Shared {
    // SAFETY: the caller's contract; Ep is repr(C) with the fid first.
    unsafe { &(*ep.cast::<Ep>()).shared }
}

unsafe extern "C" fn ep_bind(f: *mut sys::fid, b: *mut sys::fid, flags: u64) -> c_int {
    // SAFETY: `f` is an Ep's fid; `b` a fid of ours.
    let sh = unsafe { shared(f) };
    // SAFETY: `b` is NULL or a fid libfabric hands over, an object of ours.
    let Some(bf) = (unsafe { b.as_ref() }) else {
        return err(sys::FI_EINVAL);
    };
    let mut st = lock(&sh.state);
    match bf.fclass as u32 {
        // SAFETY: a fid of class FI_CLASS_AV is an Av (obj.rs).
        sys::FI_CLASS_AV => st.av = Some(unsafe { &*b.cast::<obj::Av>() }.inner.clone()),
        sys::FI_CLASS_CQ => {
            // SAFETY: a CQ's fid is a Cq.
            let cq = unsafe { &*b.cast::<obj::Cq>() }.inner.clone();
            let selective = flags & sys::FI_SELECTIVE_COMPLETION != 0;
            if flags & sys::FI_TRANSMIT as u64 != 0 {
                st.tx_cq = Some((cq.clone(), selective));
            }
            if flags & sys::FI_RECV as u64 != 0 {
                st.rx_cq = Some((cq.clone(), selective));
            }
            drop(st);
            // SAFETY: as above; the Ep outlives nothing here (the CQ keeps a weak reference).
            let arc = unsafe { &(*f.cast::<Ep>()).shared }.clone();
            lock(&cq).attach(Arc::downgrade(&arc));
            return 0;
        }
        // No connections on an RDM endpoint: its EQ never gets an event.
        sys::FI_CLASS_EQ => {}
        _ => return err(sys::FI_ENOSYS),
    }
    0
}

unsafe extern "C" fn ep_control(f: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: `f` is an Ep's fid.
    let sh = unsafe { shared(f) };
    let mut st = lock(&sh.state);
    match cmd as u32 {
        sys::FI_ENABLE => st.enable(),
        sys::FI_GETOPSFLAG | sys::FI_SETOPSFLAG => {
            // SAFETY: `arg` points to the u64 of flags (fi_endpoint(3)).
            let Some(flags) = (unsafe { arg.cast::<u64>().as_mut() }) else {
                return err(sys::FI_EINVAL);
            };
            let tx = *flags & sys::FI_TRANSMIT as u64 != 0;
            let rx = *flags & sys::FI_RECV as u64 != 0;
            if tx == rx {
                return err(sys::FI_EINVAL);
            }
            let dir = sys::FI_TRANSMIT as u64 | sys::FI_RECV as u64;
            let slot = if tx {
                &mut st.tx_op_flags
            } else {
                &mut st.rx_op_flags
            };
            if cmd as u32 == sys::FI_GETOPSFLAG {
                *flags = (*flags & dir) | *slot;
            } else {
                *slot = *flags & !dir;
            }
            0
        }
        _ => err(sys::FI_ENOSYS),
    }
}

static EP_FI_OPS: Ops<sys::fi_ops> = Ops(obj::fi_ops(
    obj::close_box::<Ep>,
    Some(ep_bind),
    Some(ep_control),
));

unsafe extern "C" fn ep_cancel(f: sys::fid_t, ctx: *mut c_void) -> isize {
    // SAFETY: `f` is an Ep's fid.
    let sh = unsafe { shared(f) };
    let mut st = lock(&sh.state);
    match st.m.cancel(|r| r.ctx == ctx as usize) {
        Some(p) => {
            let e = Entry {
                ctx: p.op.ctx,
                flags: sys::FI_RECV as u64 | p.op.kind,
                buf: p.op.buf,
                err: sys::FI_ECANCELED as i32,
                ..Default::default()
            };
            st.report_rx(e, true);
            0
        }
        None => serr(sys::FI_ENOENT),
    }
}
unsafe extern "C" fn ep_getopt(
    _: sys::fid_t,
    _: c_int,
    _: c_int,
    _: *mut c_void,
    _: *mut usize,
) -> c_int {
    err(sys::FI_ENOPROTOOPT)
}
unsafe extern "C" fn ep_setopt(
    _: sys::fid_t,
    _: c_int,
    _: c_int,
    _: *const c_void,
    _: usize,
) -> c_int {
    err(sys::FI_ENOPROTOOPT)
}
unsafe extern "C" fn no_tx_ctx(
    _: *mut sys::fid_ep,
    _: c_int,
    _: *mut sys::fi_tx_attr,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_rx_ctx(
    _: *mut sys::fid_ep,
    _: c_int,
    _: *mut sys::fi_rx_attr,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn rx_size_left(ep: *mut sys::fid_ep) -> isize {
    // SAFETY: an Ep's fid.
    let st = lock(&unsafe { shared(ep) }.state);
    RX_SIZE.saturating_sub(st.m.posted()) as isize
}
unsafe extern "C" fn tx_size_left(ep: *mut sys::fid_ep) -> isize {
    // SAFETY: an Ep's fid.
    let st = lock(&unsafe { shared(ep) }.state);
    st.hw.as_ref().map_or(0, |h| h.free.len()) as isize
}

static EP_OPS: Ops<sys::fi_ops_ep> = Ops(sys::fi_ops_ep {
    size: core::mem::size_of::<sys::fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(no_tx_ctx),
    rx_ctx: Some(no_rx_ctx),
    rx_size_left: Some(rx_size_left),
    tx_size_left: Some(tx_size_left),
});

unsafe extern "C" fn cm_getname(f: sys::fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: an Ep's fid; `addrlen` valid and `addr` has `*addrlen` bytes.
    let st = lock(&unsafe { shared(f) }.state);
    let b = attr::addr_bytes(st.node, st.endpoint);
    // SAFETY: `addrlen` is NULL or valid (fi_cm(3)).
    let Some(len) = (unsafe { addrlen.as_mut() }) else {
        return err(sys::FI_EINVAL);
    };
    let room = *len;
    *len = b.len();
    if room < b.len() {
        return err(sys::FI_ETOOSMALL);
    }
    // SAFETY: as above.
    unsafe { ptr::copy_nonoverlapping(b.as_ptr(), addr.cast::<u8>(), b.len()) };
    0
}
unsafe extern "C" fn cm_setname(_: sys::fid_t, _: *mut c_void, _: usize) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn cm_getpeer(_: *mut sys::fid_ep, _: *mut c_void, _: *mut usize) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn cm_connect(
    _: *mut sys::fid_ep,
    _: *const c_void,
    _: *const c_void,
    _: usize,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn cm_listen(_: *mut sys::fid_pep) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn cm_accept(_: *mut sys::fid_ep, _: *const c_void, _: usize) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn cm_reject(
    _: *mut sys::fid_pep,
    _: sys::fid_t,
    _: *const c_void,
    _: usize,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn cm_shutdown(_: *mut sys::fid_ep, _: u64) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn cm_join(
    _: *mut sys::fid_ep,
    _: *const c_void,
    _: u64,
    _: *mut *mut sys::fid_mc,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}

static CM_OPS: Ops<sys::fi_ops_cm> = Ops(sys::fi_ops_cm {
    size: core::mem::size_of::<sys::fi_ops_cm>(),
    setname: Some(cm_setname),
    getname: Some(cm_getname),
    getpeer: Some(cm_getpeer),
    connect: Some(cm_connect),
    listen: Some(cm_listen),
    accept: Some(cm_accept),
    reject: Some(cm_reject),
    shutdown: Some(cm_shutdown),
    join: Some(cm_join),
});

/// The one buffer of an iov of at most one entry.
///
/// # Safety
/// `iov` holds `count` entries when `count` > 0.
unsafe fn one_iov(iov: *const sys::iovec, count: usize) -> Result<(usize, usize), isize> {
    match count {
        0 => Ok((0, 0)),
        // SAFETY: one entry.
        1 => Ok(unsafe { ((*iov).iov_base as usize, (*iov).iov_len) }),
        _ => Err(serr(sys::FI_EINVAL)),
    }
}

fn op_send(
    ep: *mut sys::fid_ep,
    buf: usize,
    len: usize,
    dest: u64,
    ctx: usize,
    meta: Meta,
    flags: Option<u64>,
) -> isize {
    // SAFETY: an Ep's fid (libfabric's dispatch).
    let sh = unsafe { shared(ep) };
    let mut st = lock(&sh.state);
    let flags = flags.unwrap_or(st.tx_op_flags);
    st.send(buf, len, dest, ctx, meta, flags)
}

fn op_recv(
    ep: *mut sys::fid_ep,
    buf: usize,
    len: usize,
    src: u64,
    ctx: usize,
    tag: Option<(u64, u64)>,
    flags: Option<u64>,
) -> isize {
    // SAFETY: an Ep's fid (libfabric's dispatch).
    let sh = unsafe { shared(ep) };
    let mut st = lock(&sh.state);
    let flags = flags.unwrap_or(st.rx_op_flags);
    st.recv(buf, len, src, ctx, tag, flags)
}

unsafe extern "C" fn msg_recv(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _d: *mut c_void,
    src: u64,
    ctx: *mut c_void,
) -> isize {
    op_recv(ep, buf as usize, len, src, ctx as usize, None, None)
}
unsafe extern "C" fn msg_recvv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _d: *mut *mut c_void,
    count: usize,
    src: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` entries.
    match unsafe { one_iov(iov, count) } {
        Ok((b, l)) => op_recv(ep, b, l, src, ctx as usize, None, None),
        Err(e) => e,
    }
}
unsafe extern "C" fn msg_recvmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg,
    flags: u64,
) -> isize {
    // SAFETY: `msg` valid (fi_msg(3)).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return serr(sys::FI_EINVAL);
    };
    // SAFETY: `msg_iov` holds `iov_count` entries (fi_msg(3)).
    match unsafe { one_iov(m.msg_iov, m.iov_count) } {
        Ok((b, l)) => op_recv(ep, b, l, m.addr, m.context as usize, None, Some(flags)),
        Err(e) => e,
    }
}
unsafe extern "C" fn msg_send(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _d: *mut c_void,
    dest: u64,
    ctx: *mut c_void,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        ctx as usize,
        Meta {
            tag: None,
            data: None,
        },
        None,
    )
}
unsafe extern "C" fn msg_sendv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _d: *mut *mut c_void,
    count: usize,
    dest: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` entries.
    match unsafe { one_iov(iov, count) } {
        Ok((b, l)) => op_send(
            ep,
            b,
            l,
            dest,
            ctx as usize,
            Meta {
                tag: None,
                data: None,
            },
            None,
        ),
        Err(e) => e,
    }
}
unsafe extern "C" fn msg_sendmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg,
    flags: u64,
) -> isize {
    // SAFETY: `msg` valid (fi_msg(3)).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return serr(sys::FI_EINVAL);
    };
    let data = (flags & sys::FI_REMOTE_CQ_DATA as u64 != 0).then_some(m.data);
    // SAFETY: `msg_iov` holds `iov_count` entries (fi_msg(3)).
    match unsafe { one_iov(m.msg_iov, m.iov_count) } {
        Ok((b, l)) => op_send(
            ep,
            b,
            l,
            m.addr,
            m.context as usize,
            Meta { tag: None, data },
            Some(flags),
        ),
        Err(e) => e,
    }
}
unsafe extern "C" fn msg_inject(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        0,
        Meta {
            tag: None,
            data: None,
        },
        Some(sys::FI_INJECT as u64),
    )
}
unsafe extern "C" fn msg_senddata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _d: *mut c_void,
    data: u64,
    dest: u64,
    ctx: *mut c_void,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        ctx as usize,
        Meta {
            tag: None,
            data: Some(data),
        },
        None,
    )
}
unsafe extern "C" fn msg_injectdata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        0,
        Meta {
            tag: None,
            data: Some(data),
        },
        Some(sys::FI_INJECT as u64),
    )
}

static MSG_OPS: Ops<sys::fi_ops_msg> = Ops(sys::fi_ops_msg {
    size: core::mem::size_of::<sys::fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
});

unsafe extern "C" fn t_recv(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _d: *mut c_void,
    src: u64,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    op_recv(
        ep,
        buf as usize,
        len,
        src,
        ctx as usize,
        Some((tag, ignore)),
        None,
    )
}
unsafe extern "C" fn t_recvv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _d: *mut *mut c_void,
    count: usize,
    src: u64,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` entries.
    match unsafe { one_iov(iov, count) } {
        Ok((b, l)) => op_recv(ep, b, l, src, ctx as usize, Some((tag, ignore)), None),
        Err(e) => e,
    }
}
unsafe extern "C" fn t_recvmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    // SAFETY: `msg` valid (fi_tagged(3)).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return serr(sys::FI_EINVAL);
    };
    // SAFETY: `msg_iov` holds `iov_count` entries (fi_tagged(3)).
    match unsafe { one_iov(m.msg_iov, m.iov_count) } {
        Ok((b, l)) => op_recv(
            ep,
            b,
            l,
            m.addr,
            m.context as usize,
            Some((m.tag, m.ignore)),
            Some(flags),
        ),
        Err(e) => e,
    }
}
unsafe extern "C" fn t_send(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _d: *mut c_void,
    dest: u64,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        ctx as usize,
        Meta {
            tag: Some(tag),
            data: None,
        },
        None,
    )
}
unsafe extern "C" fn t_sendv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _d: *mut *mut c_void,
    count: usize,
    dest: u64,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` entries.
    match unsafe { one_iov(iov, count) } {
        Ok((b, l)) => op_send(
            ep,
            b,
            l,
            dest,
            ctx as usize,
            Meta {
                tag: Some(tag),
                data: None,
            },
            None,
        ),
        Err(e) => e,
    }
}
unsafe extern "C" fn t_sendmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    // SAFETY: `msg` valid (fi_tagged(3)).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return serr(sys::FI_EINVAL);
    };
    let data = (flags & sys::FI_REMOTE_CQ_DATA as u64 != 0).then_some(m.data);
    // SAFETY: `msg_iov` holds `iov_count` entries (fi_tagged(3)).
    match unsafe { one_iov(m.msg_iov, m.iov_count) } {
        Ok((b, l)) => op_send(
            ep,
            b,
            l,
            m.addr,
            m.context as usize,
            Meta {
                tag: Some(m.tag),
                data,
            },
            Some(flags),
        ),
        Err(e) => e,
    }
}
unsafe extern "C" fn t_inject(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
    tag: u64,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        0,
        Meta {
            tag: Some(tag),
            data: None,
        },
        Some(sys::FI_INJECT as u64),
    )
}
unsafe extern "C" fn t_senddata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _d: *mut c_void,
    data: u64,
    dest: u64,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        ctx as usize,
        Meta {
            tag: Some(tag),
            data: Some(data),
        },
        None,
    )
}
unsafe extern "C" fn t_injectdata(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
    tag: u64,
) -> isize {
    op_send(
        ep,
        buf as usize,
        len,
        dest,
        0,
        Meta {
            tag: Some(tag),
            data: Some(data),
        },
        Some(sys::FI_INJECT as u64),
    )
}

static TAGGED_OPS: Ops<sys::fi_ops_tagged> = Ops(sys::fi_ops_tagged {
    size: core::mem::size_of::<sys::fi_ops_tagged>(),
    recv: Some(t_recv),
    recvv: Some(t_recvv),
    recvmsg: Some(t_recvmsg),
    send: Some(t_send),
    sendv: Some(t_sendv),
    sendmsg: Some(t_sendmsg),
    inject: Some(t_inject),
    senddata: Some(t_senddata),
    injectdata: Some(t_injectdata),
});

// fi_read's and fi_write's own arguments, passed through from the C ABI.
#[allow(clippy::too_many_arguments)]
fn op_rma(
    ep: *mut sys::fid_ep,
    write: bool,
    buf: usize,
    len: usize,
    peer: u64,
    raddr: u64,
    key: u64,
    ctx: usize,
    flags: Option<u64>,
) -> isize {
    // SAFETY: an Ep's fid (libfabric's dispatch).
    let sh = unsafe { shared(ep) };
    let mut st = lock(&sh.state);
    let flags = flags.unwrap_or(st.tx_op_flags);
    st.rma(write, buf, len, peer, raddr, key, ctx, flags)
}

unsafe extern "C" fn rma_read(
    ep: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _d: *mut c_void,
    src: u64,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    op_rma(
        ep,
        false,
        buf as usize,
        len,
        src,
        addr,
        key,
        ctx as usize,
        None,
    )
}
unsafe extern "C" fn rma_readv(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _d: *mut *mut c_void,
    count: usize,
    src: u64,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` entries.
    match unsafe { one_iov(iov, count) } {
        Ok((b, l)) => op_rma(ep, false, b, l, src, addr, key, ctx as usize, None),
        Err(e) => e,
    }
}
/// The one local buffer and the one remote range of an `fi_msg_rma`.
///
/// # Safety
/// `m` is a valid `fi_msg_rma` (fi_rma(3)).
unsafe fn rma_msg(m: &sys::fi_msg_rma) -> Result<(usize, usize, u64, u64), isize> {
    // SAFETY: `msg_iov` holds `iov_count` entries.
    let (b, l) = unsafe { one_iov(m.msg_iov, m.iov_count) }?;
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return Err(serr(sys::FI_EINVAL));
    }
    // SAFETY: one entry.
    let r = unsafe { &*m.rma_iov };
    if r.len != l {
        return Err(serr(sys::FI_EINVAL));
    }
    Ok((b, l, r.addr, r.key))
}
unsafe extern "C" fn rma_readmsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_rma,
    flags: u64,
) -> isize {
    // SAFETY: `msg` NULL or valid (fi_rma(3)).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return serr(sys::FI_EINVAL);
    };
    // SAFETY: as above.
    match unsafe { rma_msg(m) } {
        Ok((b, l, a, k)) => op_rma(
            ep,
            false,
            b,
            l,
            m.addr,
            a,
            k,
            m.context as usize,
            Some(flags),
        ),
        Err(e) => e,
    }
}
unsafe extern "C" fn rma_write(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _d: *mut c_void,
    dest: u64,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    op_rma(
        ep,
        true,
        buf as usize,
        len,
        dest,
        addr,
        key,
        ctx as usize,
        None,
    )
}
unsafe extern "C" fn rma_writev(
    ep: *mut sys::fid_ep,
    iov: *const sys::iovec,
    _d: *mut *mut c_void,
    count: usize,
    dest: u64,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` entries.
    match unsafe { one_iov(iov, count) } {
        Ok((b, l)) => op_rma(ep, true, b, l, dest, addr, key, ctx as usize, None),
        Err(e) => e,
    }
}
unsafe extern "C" fn rma_writemsg(
    ep: *mut sys::fid_ep,
    msg: *const sys::fi_msg_rma,
    flags: u64,
) -> isize {
    // SAFETY: `msg` NULL or valid (fi_rma(3)).
    let Some(m) = (unsafe { msg.as_ref() }) else {
        return serr(sys::FI_EINVAL);
    };
    if flags & sys::FI_REMOTE_CQ_DATA as u64 != 0 {
        return serr(sys::FI_ENOSYS);
    }
    // SAFETY: as above.
    match unsafe { rma_msg(m) } {
        Ok((b, l, a, k)) => op_rma(
            ep,
            true,
            b,
            l,
            m.addr,
            a,
            k,
            m.context as usize,
            Some(flags),
        ),
        Err(e) => e,
    }
}
unsafe extern "C" fn rma_inject(
    ep: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
    addr: u64,
    key: u64,
) -> isize {
    op_rma(
        ep,
        true,
        buf as usize,
        len,
        dest,
        addr,
        key,
        0,
        Some(sys::FI_INJECT as u64),
    )
}
unsafe extern "C" fn rma_writedata(
    _: *mut sys::fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: u64,
    _: u64,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    // Remote CQ data on writes is not offered (the engine's immediate has 32 bits).
    serr(sys::FI_ENOSYS)
}
unsafe extern "C" fn rma_injectdata(
    _: *mut sys::fid_ep,
    _: *const c_void,
    _: usize,
    _: u64,
    _: u64,
    _: u64,
    _: u64,
) -> isize {
    serr(sys::FI_ENOSYS)
}

static RMA_OPS: Ops<sys::fi_ops_rma> = Ops(sys::fi_ops_rma {
    size: core::mem::size_of::<sys::fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_readmsg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_writemsg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
});

/// `fi_endpoint`: an RDM endpoint on its own file of the domain's device.
///
/// # Safety
/// libfabric's arguments: `d` a Domain's fid, `info` valid, `out` writable.
pub unsafe extern "C" fn open(
    d: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    out: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `d` is a Domain's fid.
    let dom = unsafe { &*d.cast::<obj::Domain>() }.inner.clone();
    // SAFETY: `info` NULL or valid.
    let i = unsafe { info.as_ref() };
    if out.is_null()
        // SAFETY: the attribute pointers of a valid fi_info are NULL or valid.
        || i.and_then(|i| unsafe { i.ep_attr.as_ref() })
            .is_some_and(|e| e.type_ != sys::fi_ep_type_FI_EP_RDM)
    {
        return err(sys::FI_EINVAL);
    }
    let caps = i.map_or(dom.offer.caps, |i| {
        if i.caps == 0 {
            dom.offer.caps
        } else {
            i.caps
        }
    });
    if caps & !dom.offer.caps != 0 {
        return err(sys::FI_ENODATA);
    }
    // The operations' default flags: with FI_SELECTIVE_COMPLETION, only those with
    // FI_COMPLETION report a successful completion (fi_cq(3)).
    let tx_op_flags = i
        // SAFETY: as above.
        .and_then(|i| unsafe { i.tx_attr.as_ref() })
        .map_or(0, |t| t.op_flags);
    let rx_op_flags = i
        // SAFETY: as above.
        .and_then(|i| unsafe { i.rx_attr.as_ref() })
        .map_or(0, |r| r.op_flags);
    let dev = dom.dev.clone();
    let info = match dev.info() {
        Ok(x) => x,
        Err(e) => return -(e.errno().max(1)),
    };
    let st = State {
        dev,
        node: info.node,
        endpoint: info.endpoint,
        caps,
        tx_op_flags,
        rx_op_flags,
        av: None,
        tx_cq: None,
        rx_cq: None,
        hw: None,
        m: Matcher::default(),
        pending: HashMap::new(),
        rndv: HashMap::new(),
        fins: VecDeque::new(),
        claimed: HashMap::new(),
        next_id: 1,
        strays: 0,
        inject_errors: 0,
        regs: RegCache::new(RegCache::max_from(
            std::env::var("FI_MR_CACHE_MAX_COUNT").ok().as_deref(),
        )),
    };
    let ep = Box::new(Ep {
        fid: sys::fid_ep {
            fid: sys::fid {
                fclass: sys::FI_CLASS_EP as usize,
                context,
                ops: EP_FI_OPS.ptr(),
            },
            ops: EP_OPS.ptr(),
            cm: CM_OPS.ptr(),
            msg: MSG_OPS.ptr(),
            rma: RMA_OPS.ptr(),
            tagged: TAGGED_OPS.ptr(),
            atomic: ptr::null_mut(),
            collective: ptr::null_mut(),
        },
        shared: Arc::new(Shared {
            state: Mutex::new(st),
        }),
    });
    // SAFETY: `out` is writable.
    unsafe { *out = Box::into_raw(ep).cast() };
    0
}
