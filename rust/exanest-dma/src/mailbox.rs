// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The mailbox (ABI 5, register map 2.4; Documentation/network.rst, "The mailbox"): small
//! messages, up to 256 bytes, between processes on different nodes, in order per sender.
//!
//! A queue gets a mailbox with [`Queue::create_mailbox`]: a receive ring of `1 << log2` slots in
//! fresh anonymous memory the library maps (the driver registers it on demand: a page of it the
//! engine faults on is resolved like any receiver fault), which other nodes' engines write. The
//! reader takes messages with [`Queue::recv`], no system call: a slot is complete when its stamp
//! says so, and reading frees it (the doorbell page's `MBOX_HEAD`). A full ring makes senders
//! wait (RNR) until the reader frees a slot; nothing is lost or delivered twice.
//! [`Queue::recv_wait`] sleeps until a message comes (ABI 7, register map 2.6), and poll() on
//! the device's file is readable while the ring holds one not taken, so an event loop can wait
//! for messages and completions at once.
//!
//! [`Queue::send`] posts a message from a registered buffer to an endpoint of a node, like a
//! put; its completion comes on the queue: status 0 once the receiving ring holds it,
//! `-ECONNREFUSED` when that endpoint has no mailbox, `-EHOSTUNREACH` within about a second
//! when its node never answered this engine (no such node, or no link to it), the engine's
//! `PLDMA_CQE_TIMEOUT` (-265, [`crate::Error::Engine`] from [`crate::QueueCompletion::result`])
//! when its ring stayed full or its node, heard from before, silent through the engine's
//! retries.

use crate::queue::{load_barrier, Mapping, Queue};
use crate::{Error, Result};
use exanest_core::abi;
use exanest_core::regs::{ch_net, mbox, vf, PutSqe, Sqe};
use std::time::{Duration, Instant};

/// What the mailbox took: a message, or (register map 2.6) the completion of a put with
/// immediate data into this process ([`Queue::put_imm`]).
#[derive(Clone)]
pub struct Message {
    /// The sending node.
    pub node: u32,
    /// The sending process's endpoint there (its `Device::info().endpoint`); `u32::MAX` for a
    /// put's completion (a put names only its key).
    pub endpoint: u32,
    len: usize,
    data: [u8; mbox::MAX as usize],
    put: Option<PutCompletion>,
}

/// The completion of a put with immediate data into this process: every byte of the put is
/// in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutCompletion {
    /// The sender's immediate data.
    pub imm: u32,
    /// The put's first byte, in this process.
    pub addr: u64,
    /// The put's length.
    pub len: u64,
}

impl Message {
    /// The message's bytes (none for a put's completion).
    pub fn data(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// A put's completion: its immediate data, address and length; `None` for a message.
    pub fn put(&self) -> Option<PutCompletion> {
        self.put
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("node", &self.node)
            .field("endpoint", &self.endpoint)
            .field("len", &self.len)
            .field("put", &self.put)
            .finish_non_exhaustive()
    }
}

/// The reading side of a mailbox ring: its memory and the next index to read.
pub(crate) struct MboxRing {
    map: Mapping,
    log2: u32,
    head: u32,
}

impl MboxRing {
    /// A ring of `1 << log2` slots in fresh (zeroed) memory.
    fn new(log2: u32) -> Result<Self> {
        let bytes = ((abi::MBOX_SLOT as usize) << log2).next_multiple_of(4096);
        Ok(Self {
            map: Mapping::anon(bytes)?,
            log2,
            head: 0,
        })
    }

    /// The field at `off` of the slot of index `head`.
    fn field(&self, off: usize) -> u32 {
        let slot = (self.head & ((1 << self.log2) - 1)) as usize * mbox::SLOT;
        let base = self.map.ptr.as_ptr().cast::<u8>();
        // SAFETY: `slot + off` is a 4-byte aligned field of a slot inside the ring, which
        // `self.map` keeps mapped; the engine writes it, so the read is volatile and no
        // reference to the ring is ever made.
        u32::from_le(unsafe { base.add(slot + off).cast::<u32>().read_volatile() })
    }

    /// Whether the next slot is a put's completion (completed by the engine).
    pub(crate) fn next_is_put(&self) -> bool {
        self.ready() && {
            load_barrier();
            self.field(mbox::FLAGS_OFF) & mbox::FLAG_PUT_IMM != 0
        }
    }

    /// Whether the slot of index `head` holds a message the engine has completed.
    fn ready(&self) -> bool {
        self.field(mbox::STAMP_OFF) == self.head.wrapping_add(1)
    }

    /// The message in the slot of index `head`, if the engine has completed it; the caller
    /// then frees the slot.
    fn take(&mut self) -> Option<Message> {
        let slot = (self.head & ((1 << self.log2) - 1)) as usize * mbox::SLOT;
        let base = self.map.ptr.as_ptr().cast::<u8>();
        let field = |off: usize| self.field(off);
        if !self.ready() {
            return None;
        }
        // The stamp before the rest of the slot (the engine wrote it last).
        load_barrier();
        let put = (field(mbox::FLAGS_OFF) & mbox::FLAG_PUT_IMM != 0).then(|| PutCompletion {
            imm: field(mbox::IMM_OFF),
            addr: u64::from(field(mbox::ADDR_OFF)) | u64::from(field(mbox::ADDR_OFF + 4)) << 32,
            len: u64::from(field(mbox::LEN_OFF)),
        });
        let len = if put.is_some() {
            0
        } else {
            (field(mbox::LEN_OFF) as usize).min(mbox::MAX as usize)
        };
        let mut m = Message {
            node: field(mbox::SRC_NODE_OFF) & 0xffff,
            endpoint: field(mbox::SRC_EP_OFF),
            len,
            data: [0; mbox::MAX as usize],
            put,
        };
        // SAFETY: The slot's message bytes lie inside the ring (`DATA_OFF + MAX == SLOT`), the
        // engine does not write them again before the slot is freed, and `m.data` is ours.
        unsafe {
            core::ptr::copy_nonoverlapping(
                base.add(slot + mbox::DATA_OFF),
                m.data.as_mut_ptr(),
                len,
            )
        };
        self.head = self.head.wrapping_add(1);
        Some(m)
    }
}

impl Queue {
    /// Give the queue's file a mailbox of `1 << log2` slots (1..=12): other nodes can then
    /// [`Queue::send`] to its endpoint. The driver's errors: `EEXIST` (one already),
    /// `EOPNOTSUPP` (an engine without a network port or older than 2.4), `ENODEV`, `EPERM`.
    pub fn create_mailbox(&mut self, log2: u32) -> Result<()> {
        if !(1..=abi::MBOX_LOG2_MAX).contains(&log2) {
            return Err(Error::Invalid("a mailbox has 2^1 to 2^12 slots"));
        }
        if self.mbox.is_some() {
            return Err(Error::Os(libc::EEXIST));
        }
        let ring = MboxRing::new(log2)?;
        let mut req = abi::Mbox {
            addr: ring.map.ptr.as_ptr() as u64,
            log2,
            flags: 0,
        };
        crate::ioctl(&self.fd, abi::IOC_MBOX_CREATE, &mut req)?;
        self.mbox = Some(ring);
        Ok(())
    }

    /// Whether the queue has a mailbox.
    pub(crate) fn has_mailbox(&self) -> bool {
        self.mbox.is_some()
    }

    /// Whether the mailbox's next entry is a put's completion ([`Message::put`]), not a
    /// message: the C API's plain receives leave it to `exanest_dma_queue_recv_msg`.
    pub(crate) fn next_is_put(&self) -> bool {
        self.mbox.as_ref().is_some_and(MboxRing::next_is_put)
    }

    /// The next message (or put completion) of the mailbox, if one has come; taking it frees
    /// its slot. `None` without a mailbox too.
    pub fn recv(&mut self) -> Option<Message> {
        let m = self.mbox.as_mut()?.take()?;
        let head = self.mbox.as_ref().map_or(0, |r| r.head);
        self.ring_mut().db_write(vf::MBOX_HEAD, head);
        Some(m)
    }

    /// Sleep until the mailbox holds a message (`None`: no time limit; zero: just look), then
    /// take it. Errors: `ETIMEDOUT`, `EINTR`; `Error::Invalid` without a mailbox; the driver's
    /// `EOPNOTSUPP` on an engine older than register map 2.6. The file needs no context while
    /// it sleeps: a message for it brings one back.
    pub fn recv_wait(&mut self, timeout: Option<Duration>) -> Result<Message> {
        let end = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(m) = self.recv() {
                return Ok(m);
            }
            let left = end.map(|e| e.saturating_duration_since(Instant::now()));
            self.wait_message(left)?;
        }
    }

    /// Sleep until the mailbox holds a message not taken (`None`: no time limit; zero: just
    /// look): the messages waiting, at least 1. Errors as [`Queue::recv_wait`].
    pub fn wait_message(&mut self, timeout: Option<Duration>) -> Result<u32> {
        let Some(r) = self.mbox.as_ref() else {
            return Err(Error::Invalid("the queue has no mailbox"));
        };
        if r.ready() {
            return Ok(1);
        }
        let mut w = abi::MboxWait {
            timeout_ns: crate::timeout_ns(timeout),
            ..Default::default()
        };
        crate::ioctl(&self.fd, abi::IOC_MBOX_WAIT, &mut w)?;
        Ok(w.pending)
    }

    /// Send `len` bytes (1..=256) from `src` (in a region registered readable on this file) to
    /// the mailbox of `endpoint` at `node`, with `wr_id` for its completion; no system call.
    /// A context's messages arrive at each destination in the order they were sent (one stuck
    /// on a full ring holds back no other destination's). `EINVAL` for a length or node out
    /// of range; `EAGAIN` and `EIO` as for [`Queue::post`].
    pub fn send(&mut self, src: u64, len: u32, node: u32, endpoint: u32, wr_id: u64) -> Result<()> {
        self.check_running()?;
        if len == 0 || len > abi::MBOX_MAX || node > u32::from(u16::MAX) {
            return Err(Error::Abi(abi::Errno::Inval));
        }
        let first = Sqe {
            src,
            dst: 0,
            len,
            flags: ch_net::OP_MAILBOX,
            wr_id,
        };
        let second = PutSqe {
            rkey: 0,
            peer: node as u16,
            endpoint,
            imm: 0,
        };
        let ring = self.ring_mut();
        ring.push_pair(&first.encode(), &second.encode())
            .map_err(Error::Abi)?;
        ring.ring();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Write the slot of index `i` as the engine would: message, header, stamp.
    fn engine_writes(r: &MboxRing, i: u32, node: u16, ep: u32, msg: &[u8], stamp: u32) {
        let slot = (i & ((1 << r.log2) - 1)) as usize * mbox::SLOT;
        // SAFETY: Inside the ring's mapping, which the test owns; no reference to it exists.
        unsafe {
            let b = r.map.ptr.as_ptr().cast::<u8>().add(slot);
            core::ptr::copy_nonoverlapping(msg.as_ptr(), b.add(mbox::DATA_OFF), msg.len());
            b.add(mbox::SRC_NODE_OFF).cast::<u16>().write(node.to_le());
            b.add(mbox::SRC_EP_OFF).cast::<u32>().write(ep.to_le());
            b.add(mbox::LEN_OFF)
                .cast::<u32>()
                .write((msg.len() as u32).to_le());
            b.add(mbox::STAMP_OFF).cast::<u32>().write(stamp.to_le());
        }
    }

    /// A slot with FLAGS PUT_IMM is a put's completion: its immediate, address and length, no
    /// message bytes (whatever LEN says).
    #[test]
    fn a_put_completion_is_no_message() {
        let mut r = MboxRing::new(2).unwrap();
        engine_writes(&r, 0, 2, u32::MAX, &[], 1);
        let slot = 0;
        // SAFETY: Inside the ring's mapping, which the test owns; no reference to it exists.
        unsafe {
            let b = r.map.ptr.as_ptr().cast::<u8>().add(slot);
            b.add(mbox::LEN_OFF).cast::<u32>().write(300u32.to_le());
            b.add(mbox::FLAGS_OFF)
                .cast::<u32>()
                .write(mbox::FLAG_PUT_IMM.to_le());
            b.add(mbox::IMM_OFF)
                .cast::<u32>()
                .write(0xfeed_f00du32.to_le());
            b.add(mbox::ADDR_OFF)
                .cast::<u64>()
                .write(0x7f00_1234_5000u64.to_le());
        }
        let m = r.take().unwrap();
        assert_eq!((m.node, m.endpoint, m.data()), (2, u32::MAX, &[][..]));
        assert_eq!(
            m.put(),
            Some(PutCompletion {
                imm: 0xfeed_f00d,
                addr: 0x7f00_1234_5000,
                len: 300
            })
        );
        engine_writes(&r, 1, 2, 9, b"plain", 2);
        let m = r.take().unwrap();
        assert_eq!((m.data(), m.put()), (&b"plain"[..], None));
    }

    /// Slots are taken in order, each once its stamp is its index + 1: a stale stamp (the
    /// previous lap's) or none is not a message, across wraps of the ring and of the index.
    #[test]
    fn messages_are_taken_in_order_by_their_stamps() {
        let mut r = MboxRing::new(1).unwrap();
        assert!(r.take().is_none(), "a zeroed ring holds nothing");
        engine_writes(&r, 0, 3, 9, b"first", 1);
        engine_writes(&r, 1, 4, 10, &[7; 256], 2);
        let m = r.take().unwrap();
        assert_eq!((m.node, m.endpoint, m.data()), (3, 9, &b"first"[..]));
        let m = r.take().unwrap();
        assert_eq!((m.node, m.endpoint, m.data()), (4, 10, &[7u8; 256][..]));
        assert!(r.take().is_none(), "slot 0 still holds index 0's stamp");
        engine_writes(&r, 2, 5, 11, b"third", 3);
        assert_eq!(r.take().unwrap().data(), b"third");
        // Free-running indices wrap at 2^32.
        r.head = u32::MAX;
        engine_writes(&r, u32::MAX, 1, 1, b"last", 0);
        assert_eq!(r.take().unwrap().data(), b"last");
        assert_eq!(r.head, 0);
        engine_writes(&r, 0, 1, 1, b"stale", 0);
        assert!(r.take().is_none(), "index 0 of the next lap wants stamp 1");
        engine_writes(&r, 0, 1, 1, b"fresh", 1);
        assert_eq!(r.take().unwrap().data(), b"fresh");
    }
}
