// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Remote access (ABI 4, register map 2.3): put into another node's process's memory by its
//! virtual address, from the user-level queue, with no system call.
//!
//! ```no_run
//! use exanest_dma::{Device, Mode, QueueCompletion, Remote};
//! // On node 1: a buffer other nodes may write, never touched here.
//! let dev1 = Device::open(1)?;
//! let region = dev1.register_remote(vec![0u8; 1 << 20], Mode::OnDemand)?;
//! let to: Remote = region.target(); // send this to the writer, out of band
//! // On node 0: put 1 MiB there.
//! let dev0 = Device::open(0)?;
//! let src = dev0.register(vec![7u8; 1 << 20], Mode::OnDemand)?;
//! let mut q = dev0.create_queue(4, 4)?;
//! q.put(src.addr(), 1 << 20, &to, 0, 1)?;
//! let mut c = [QueueCompletion::default(); 1];
//! while q.poll(&mut c) == 0 {
//!     q.wait(None)?;
//! }
//! assert_eq!((c[0].status, c[0].bytes), (0, 1 << 20));
//! let inbox: Vec<u8> = region.into_inner()?; // the key revoked: node 1's bytes to read
//! assert_eq!(inbox, vec![7u8; 1 << 20]);
//! # Ok::<(), exanest_dma::Error>(())
//! ```
//!
//! The receiver registers a buffer with [`Device::register_remote`]: the driver gives it a
//! remote key (rkey) bound to the process's endpoint, the buffer's range and the right to
//! write it, and revokes the key when the region is dropped or [`RemoteRegion::into_inner`]
//! hands the buffer back (which the region owns until then, as a [`crate::RegionMut`] does). The
//! receiver hands the writer a [`Remote`] (node, endpoint, rkey, address, length), by any
//! means. The writer's [`Queue::put`] names it; the put completes, like a copy, with a
//! completion on the writer's queue: its status is 0, or the receiver's refusal as a negative
//! errno (`-ENOKEY` a key that is not, or no longer, the region's, or without the right, or
//! outside its range: one errno for every key failure, register map 2.5; `-EFAULT` or
//! `-EACCES` memory the receiver's kernel could not make writable), `-EHOSTUNREACH` within about
//! a second when the receiver's node never answered this engine (no such node, or no link to
//! it), or `PLDMA_CQE_TIMEOUT` when the receiver's node, heard from before, stays silent.
//!
//! [`Queue::get`] reads the other way, under the same key (a region registered with
//! [`Device::register_remote`] may be read as well as written).
//!
//! The receiver's memory may be in any mode: an on-demand buffer is faulted in as puts reach
//! it. The receiving engine NACKs each fault to the writer, the receiver's kernel resolves it,
//! and the engine RESUMEs the writer, which retransmits from there (Documentation/network.rst).

use crate::queue::Queue;
use crate::region::{BufferMut, RegionMut};
use crate::{Device, Error, Mode, Result};
use exanest_core::abi;
use exanest_core::regs::{ch_net, PutSqe, Sqe};

/// Where a put goes: a buffer another process registered with [`Device::register_remote`],
/// as that process describes it. `#[repr(C)]`: the C ABI's `struct exanest_dma_remote`, and
/// what programs exchange.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Remote {
    /// The buffer's first byte, a virtual address of the receiving process.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The remote key the driver gave it.
    pub rkey: u64,
    /// The receiving engine's node.
    pub node: u32,
    /// The receiving process's endpoint on it.
    pub endpoint: u32,
}

impl Remote {
    /// Bytes of [`Remote::to_bytes`].
    pub const BYTES: usize = 32;

    /// The struct's bytes, little-endian, in field order: what a mailbox message or any other
    /// channel carries to the writer.
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.rkey.to_le_bytes());
        b[24..28].copy_from_slice(&self.node.to_le_bytes());
        b[28..32].copy_from_slice(&self.endpoint.to_le_bytes());
        b
    }

    /// The target [`Remote::to_bytes`] made; `None` for fewer than [`Remote::BYTES`] bytes.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let u64_at = |i: usize| Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
        let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        Some(Remote {
            addr: u64_at(0)?,
            len: u64_at(8)?,
            rkey: u64_at(16)?,
            node: u32_at(24)?,
            endpoint: u32_at(28)?,
        })
    }
}

/// A buffer other nodes may write and read, registered with [`Device::register_remote`]. The
/// region owns it; its rkey is revoked, and the region deregistered, on drop or
/// [`RemoteRegion::into_inner`].
#[derive(Debug)]
pub struct RemoteRegion<'d, B: BufferMut = Vec<u8>> {
    reg: RegionMut<'d, B>,
    target: Remote,
}

impl<B: BufferMut> RemoteRegion<'_, B> {
    /// What a writer needs to put into the buffer.
    pub fn target(&self) -> Remote {
        self.target
    }

    /// The driver's handle of the region.
    pub fn handle(&self) -> u32 {
        self.reg.handle()
    }

    /// A copy of the buffer's bytes as they are now. Other nodes may be writing it meanwhile:
    /// the bytes are read one by one, volatile, never through a reference. To read them in
    /// place, take the buffer back with [`RemoteRegion::into_inner`].
    pub fn snapshot(&self) -> Vec<u8> {
        let p = self.target.addr as *const u8;
        (0..self.target.len as usize)
            // SAFETY: The region owns its buffer of `len` bytes at `addr`, so the memory is
            // valid; volatile reads do not assume that nothing else (the engine) writes it.
            .map(|i| unsafe { p.add(i).read_volatile() })
            .collect()
    }

    /// Revoke the key and deregister the region: no node can reach the buffer any more, and
    /// it is the program's again. `EBUSY` as for [`crate::Registered::into_inner`].
    pub fn into_inner(self) -> Result<B> {
        self.reg.into_inner()
    }
}

/// The access of a region registered for other nodes with `bits` (`EXANEST_DMA_ACCESS_*`): each
/// remote right with the local one it needs (the engine reaches the region through the same
/// mapping). `None` without a remote right or with unknown bits.
pub(crate) fn remote_access(bits: u32) -> Option<u32> {
    if bits & abi::ACCESS_REMOTE == 0 || bits & !abi::ACCESS_ALL != 0 {
        return None;
    }
    let local = |remote, local| if bits & remote != 0 { local } else { 0 };
    Some(
        bits | local(abi::ACCESS_REMOTE_READ, abi::ACCESS_READ)
            | local(abi::ACCESS_REMOTE_WRITE, abi::ACCESS_WRITE),
    )
}

/// What other nodes may do with a [`RemoteRegion`] ([`Device::register_remote_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteAccess {
    /// Get from it.
    Read,
    /// Put into it (and send nothing else: a get with its key is `-ENOKEY`).
    Write,
    /// Both.
    ReadWrite,
}

impl RemoteAccess {
    /// The `EXANEST_DMA_ACCESS_*` bits, each remote right with its local one.
    pub const fn bits(self) -> u32 {
        match self {
            RemoteAccess::Read => abi::ACCESS_READ | abi::ACCESS_REMOTE_READ,
            RemoteAccess::Write => abi::ACCESS_WRITE | abi::ACCESS_REMOTE_WRITE,
            RemoteAccess::ReadWrite => abi::ACCESS_ALL,
        }
    }
}

impl Device {
    /// Register `[addr, addr + len)` with `access` (`EXANEST_DMA_ACCESS_*`, remote bits
    /// included) in `mode`: its handle and rkey (0 without a remote bit).
    ///
    /// # Safety
    ///
    /// As for [`Device::register_raw`]; with a remote bit, other nodes may write (or read) the
    /// memory until the region is deregistered.
    pub unsafe fn register_raw_access(
        &self,
        addr: u64,
        len: u64,
        access: u32,
        mode: Mode,
    ) -> Result<(u32, u64)> {
        // SAFETY: The caller gives this function's guarantees, which are that one's.
        unsafe { self.register_raw_access_for(addr, len, access, mode, None) }
    }

    /// [`Device::register_raw_access`], the rkey bound to node `initiator` if given (ABI 8:
    /// it works only in ops from that node; `EOPNOTSUPP` on an engine older than register map
    /// 2.9, `EINVAL` without a remote bit or for a node id of 64 or more).
    ///
    /// # Safety
    ///
    /// As for [`Device::register_raw_access`].
    pub unsafe fn register_raw_access_for(
        &self,
        addr: u64,
        len: u64,
        access: u32,
        mode: Mode,
        initiator: Option<u32>,
    ) -> Result<(u32, u64)> {
        if addr == 0 {
            return Err(Error::Invalid("a NULL address"));
        }
        let mut r = abi::Reg {
            addr,
            length: len,
            access,
            mode: mode.raw(),
            flags: if initiator.is_some() {
                abi::REG_INITIATOR
            } else {
                0
            },
            initiator: initiator.unwrap_or(0),
            ..Default::default()
        };
        crate::ioctl(&self.fd, abi::IOC_REG, &mut r)?;
        Ok((r.handle, r.rkey))
    }

    /// Register a buffer that other nodes may write and read (and this process's engine read
    /// and write): its [`RemoteRegion::target`] is what a writer puts to, or a reader gets from. `EOPNOTSUPP` without a
    /// network port; `ENOSPC` when the engine's key table is full.
    pub fn register_remote<B: BufferMut>(&self, buf: B, mode: Mode) -> Result<RemoteRegion<'_, B>> {
        self.register_remote_with(buf, mode, RemoteAccess::ReadWrite)
    }

    /// [`Device::register_remote`] with the rights other nodes get: a put under a key
    /// without the write right, or a get under one without the read right, ends `-ENOKEY`.
    pub fn register_remote_with<B: BufferMut>(
        &self,
        buf: B,
        mode: Mode,
        access: RemoteAccess,
    ) -> Result<RemoteRegion<'_, B>> {
        self.register_remote_inner(buf, mode, access, None)
    }

    /// [`Device::register_remote_with`], for node `initiator` only (ABI 8, register map 2.9):
    /// the key works only in that node's ops. From any other node, even one that learnt the
    /// key, an op under it ends `-ENOKEY`, as under a wrong key, and counts toward that node's
    /// quarantine. `EOPNOTSUPP` on an older engine; `EINVAL` for a node id of 64 or more.
    pub fn register_remote_for<B: BufferMut>(
        &self,
        buf: B,
        mode: Mode,
        access: RemoteAccess,
        initiator: u32,
    ) -> Result<RemoteRegion<'_, B>> {
        self.register_remote_inner(buf, mode, access, Some(initiator))
    }

    fn register_remote_inner<B: BufferMut>(
        &self,
        buf: B,
        mode: Mode,
        access: RemoteAccess,
        initiator: Option<u32>,
    ) -> Result<RemoteRegion<'_, B>> {
        let info = self.info()?;
        let (addr, len) = (buf.as_ptr() as u64, buf.len());
        let access = access.bits();
        // SAFETY: The region owns `buf` (`Buffer`: its bytes stay put and valid until it is
        // dropped) and is deregistered, its rkey revoked first, before it hands `buf` back;
        // Rust reads it meanwhile only volatile, through `snapshot`.
        let r = unsafe { self.register_raw_access_for(addr, len as u64, access, mode, initiator) };
        let (handle, rkey) = r?;
        Ok(RemoteRegion {
            reg: RegionMut::new(self, handle, buf, mode),
            target: Remote {
                addr,
                len: len as u64,
                rkey,
                node: info.node,
                endpoint: info.endpoint,
            },
        })
    }
}

impl Queue {
    fn remote_op(
        &mut self,
        (op, imm): (u32, u32),
        (src, dst, len): (u64, u64, u32),
        to: &Remote,
        offset: u64,
        wr_id: u64,
    ) -> Result<()> {
        self.check_running()?;
        let end = offset.checked_add(u64::from(len));
        if len == 0 || end.is_none_or(|e| e > to.len) || to.node > u32::from(u16::MAX) {
            return Err(Error::Abi(abi::Errno::Inval));
        }
        let first = Sqe {
            src,
            dst,
            len,
            flags: op,
            wr_id,
        };
        let second = PutSqe {
            rkey: to.rkey,
            peer: to.node as u16,
            endpoint: to.endpoint,
            imm,
        };
        let ring = self.ring_mut();
        ring.push_pair(&first.encode(), &second.encode())
            .map_err(Error::Abi)?;
        ring.ring();
        Ok(())
    }

    /// Get `len` bytes from byte `offset` of `from` into `dst` (in a region registered
    /// writable on this file), with `wr_id` for its completion; no system call. Errors as for
    /// [`Queue::put`]. A fault on either side is resolved by that side's kernel: the remote
    /// one's before it sends on, this one's before the engine asks again.
    ///
    /// # Safety
    ///
    /// The engine writes `[dst, dst + len)` until the get's completion has been polled: as for
    /// [`Queue::post`]'s destination.
    pub unsafe fn get(
        &mut self,
        dst: u64,
        len: u32,
        from: &Remote,
        offset: u64,
        wr_id: u64,
    ) -> Result<()> {
        let src = from.addr.wrapping_add(offset);
        self.remote_op((ch_net::OP_GET, 0), (src, dst, len), from, offset, wr_id)
    }

    /// Put `len` bytes from `src` (in a region registered readable on this file) to byte
    /// `offset` of `to`, with `wr_id` for its completion; no system call. `EINVAL` when the
    /// range is not inside `to`; `EAGAIN` and `EIO` as for [`Queue::post`]. The engine only
    /// reads local memory, so this is safe; the source should not change until the put's
    /// completion, for a defined result.
    pub fn put(&mut self, src: u64, len: u32, to: &Remote, offset: u64, wr_id: u64) -> Result<()> {
        let dst = to.addr.wrapping_add(offset);
        self.remote_op((ch_net::OP_PUT, 0), (src, dst, len), to, offset, wr_id)
    }

    /// Put as [`Queue::put`], with 32 bits of immediate data (register map 2.6, as verbs'
    /// RDMA write with immediate and libfabric's `FI_REMOTE_CQ_DATA`): once the last byte is
    /// placed, the receiving process's mailbox gets a completion carrying `imm`, the put's
    /// address there and its length ([`crate::Message::put`]), after every byte of the put.
    /// The completion here comes when that is done: `-ECONNREFUSED` when the receiving process
    /// has no mailbox (its bytes may be placed); a full ring makes the put wait (RNR) like a
    /// message.
    pub fn put_imm(
        &mut self,
        src: u64,
        len: u32,
        to: &Remote,
        offset: u64,
        imm: u32,
        wr_id: u64,
    ) -> Result<()> {
        let dst = to.addr.wrapping_add(offset);
        self.remote_op(
            (ch_net::OP_PUT_IMM, imm),
            (src, dst, len),
            to,
            offset,
            wr_id,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// `struct exanest_dma_remote` of include/exanest_dma.h (tests/capi.c asserts the same).
    #[test]
    fn remote_bytes_round_trip() {
        let r = Remote {
            addr: 0x1122_3344_5566_7788,
            len: 1 << 40,
            rkey: 0xdead_beef_0000_0005,
            node: 3,
            endpoint: 255,
        };
        let b = r.to_bytes();
        assert_eq!(b[0], 0x88, "little-endian");
        assert_eq!(Remote::from_bytes(&b), Some(r));
        assert_eq!(Remote::from_bytes(&b[..31]), None);
    }

    #[test]
    fn remote_rights_bring_their_local_ones() {
        use abi::{ACCESS_ALL, ACCESS_WRITE as W};
        use abi::{ACCESS_READ as R, ACCESS_REMOTE_READ as RR, ACCESS_REMOTE_WRITE as RW};
        assert_eq!(remote_access(RW), Some(W | RW));
        assert_eq!(remote_access(RR), Some(R | RR));
        assert_eq!(remote_access(RR | W), Some(R | RR | W));
        assert_eq!(remote_access(RR | RW), Some(ACCESS_ALL));
        assert_eq!(remote_access(R | W), None, "no remote right");
        assert_eq!(remote_access(0), None);
        assert_eq!(remote_access(RW | 1 << 7), None, "unknown bits");
        for a in [
            RemoteAccess::Read,
            RemoteAccess::Write,
            RemoteAccess::ReadWrite,
        ] {
            assert_eq!(remote_access(a.bits()), Some(a.bits()));
        }
    }

    #[test]
    fn remote_layout_is_the_c_struct() {
        assert_eq!(size_of::<Remote>(), 32);
        assert_eq!(offset_of!(Remote, len), 8);
        assert_eq!(offset_of!(Remote, rkey), 16);
        assert_eq!(offset_of!(Remote, node), 24);
        assert_eq!(offset_of!(Remote, endpoint), 28);
    }
}
