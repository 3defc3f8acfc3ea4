// SPDX-License-Identifier: GPL-2.0-only

//! Remote access (register map 2.3, Documentation/network.rst): what other nodes reach a
//! process by, and what the engine does for them on its behalf.
//!
//! - **Endpoints.** Each process on an engine with a network port holds an endpoint id
//!   (0-255), the stable name other nodes address it by. The engine's endpoint table says
//!   which context it holds now: set when contexts.rs gives it one, cleared before it is taken.
//! - **Remote keys.** A region registered with a remote right gets an rkey: an entry of the
//!   engine's key table (its index, the rkey's low 32 bits) with a random tag (the high 32
//!   bits), bound to the process's endpoint, the region's range and rights. The entry is
//!   committed before the caller learns the key, and revoked (the engine's VALID bit cleared)
//!   before any page of the region is unmapped or unpinned: DEREG and teardown revoke first.
//!   A process with remote keys may lose its context while idle: an op for it then makes it
//!   resident again (resident.rs).
//! - **Receiver faults.** A remote put into a page that does not translate is NACKed by the
//!   engine, which reports the fault on an idle channel of the receiving context (ORIGIN
//!   NET_RX). The fault thread resolves it on the process's mm like a local fault (fault.rs)
//!   and writes RESUME, which the engine sends on to the sender; or NACK with the resolver's
//!   errno (EFAULT: no VMA, EACCES: no permission), which ends the sender's op with it.

use crate::engine::Engine;
use crate::error::{CtxError, CtxResult};
use crate::exanest_core::{
    abi::{self, ValidReg},
    regs::net,
};
use crate::netregs as nr;
use crate::process::{Inner, Process};
use kernel::{bindings, io::register::Array, prelude::*};

/// The endpoint of a process that has none: the engine has no port, or every endpoint is held.
pub(crate) const NO_ENDPOINT: u32 = u32::MAX;

/// The port's counters by index (`net::CNT_*`), as debugfs names them.
const COUNTER_NAMES: [&str; net::COUNTERS] = [
    "tx_packets",
    "rx_packets",
    "rx_dropped",
    "rx_bad_crc",
    "nacks_sent",
    "nacks_received",
    "resumes_sent",
    "resumes_received",
    "retransmitted_bytes",
    "timeouts",
    "duplicates",
    "injected_drops",
    "injected_corruptions",
    "error_nacks",
    "placed_bytes",
    "probes",
    "mbox_placed",
    "rnr_sent",
];

impl Engine {
    /// debugfs `engine`'s network part (stats.rs): `, "node": N, "link": B, "net": {...}`,
    /// nothing without a port (a counter that cannot be read, the device gone, reads 0).
    pub(crate) fn write_net(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.node == abi::NO_NODE {
            return Ok(());
        }
        let link = self.link().unwrap_or(false);
        write!(
            f,
            ", \"node\": {}, \"link\": {link}, \"net\": {{",
            self.node
        )?;
        for (i, name) in COUNTER_NAMES.iter().enumerate() {
            let v = self.net_counter(i).unwrap_or(0);
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}\"{name}\": {v}")?;
        }
        write!(f, "}}")
    }

    /// EXANEST_DMA_IOC_NET_COUNTERS: the port's counters. EOPNOTSUPP without a port, ENODEV
    /// once the device is gone.
    pub(crate) fn net_counters(&self) -> Result<abi::NetCounters> {
        if self.node == abi::NO_NODE {
            return Err(EOPNOTSUPP);
        }
        let mut c = abi::NetCounters {
            node: self.node,
            link: self.link()?.into(),
            ..Default::default()
        };
        for i in 0..net::COUNTERS {
            c.set(i, self.net_counter(i)?.into());
        }
        Ok(c)
    }

    /// Whether the port has a peer.
    fn link(&self) -> Result<bool> {
        let v = self.regs.read(nr::NET_NODE).map_err(|_| ENODEV)?;
        Ok(v.link())
    }

    /// Counter `i` of the port (`net::CNT_*`).
    fn net_counter(&self, i: usize) -> Result<u32> {
        let at = nr::NET_CNT::try_at(i).ok_or(EINVAL)?;
        Ok(self.regs.read(at).map_err(|_| ENODEV)?.value().get())
    }

    /// An endpoint for a new process, or [`NO_ENDPOINT`].
    pub(crate) fn endpoint_alloc(&self) -> u32 {
        if self.node == abi::NO_NODE {
            return NO_ENDPOINT;
        }
        self.endpoints.alloc(net::MAX_EPS).unwrap_or(NO_ENDPOINT)
    }

    /// The process holding `ep` is gone: no context for it, and the id is free again.
    pub(crate) fn endpoint_free(&self, ep: u32) {
        if ep != NO_ENDPOINT {
            // An MMIO write fails only for an offset past the BAR, which probe checked.
            let _ = self.ep_set(ep, None);
            self.endpoints.free(ep);
        }
    }

    /// Endpoint `ep` holds context `ctx` now, or none.
    pub(crate) fn ep_set(&self, ep: u32, ctx: Option<u32>) -> Result {
        if ep == NO_ENDPOINT {
            return Ok(());
        }
        let _win = self.net_win.lock();
        let r = &self.regs;
        r.write((), nr::NET_EP_SEL::zeroed().with_value(ep))?;
        let v = match ctx {
            Some(c) => nr::NET_EP_CTX::zeroed()
                .try_with_ctx(c)?
                .with_resident(true),
            None => nr::NET_EP_CTX::zeroed(),
        };
        r.write((), v)
    }

    /// Commit entry `idx` of the key table (`ctrl` not VALID revokes it).
    fn rkey_write(
        &self,
        idx: u32,
        tag: u32,
        ep: u32,
        (base, len): (u64, u64),
        ctrl: nr::NET_RKEY_CTRL,
    ) -> Result {
        let _win = self.net_win.lock();
        let r = &self.regs;
        r.write((), nr::NET_RKEY_SEL::zeroed().with_value(idx))?;
        r.write((), nr::NET_RKEY_TAG::zeroed().with_value(tag))?;
        r.write((), nr::NET_RKEY_BASE_LO::zeroed().with_value(base as u32))?;
        r.write(
            (),
            nr::NET_RKEY_BASE_HI::zeroed().with_value((base >> 32) as u32),
        )?;
        r.write((), nr::NET_RKEY_LEN_LO::zeroed().with_value(len as u32))?;
        r.write(
            (),
            nr::NET_RKEY_LEN_HI::zeroed().with_value((len >> 32) as u32),
        )?;
        r.write((), nr::NET_RKEY_EP::zeroed().with_value(ep))?;
        // The commit: the engine takes the whole entry from here on.
        r.write((), ctrl)
    }
}

impl Process {
    /// REG with a remote right, for region `handle` (`v`): its rkey, committed to the engine's
    /// key table. EOPNOTSUPP without a network port, ENOSPC when the table (or the endpoints)
    /// are full, [`CtxError::Lost`] while the process holds no context (device.rs gets it one
    /// and asks again).
    pub(crate) fn grant_rkey(&self, handle: u32, v: &ValidReg) -> CtxResult<u64> {
        if self.engine.node == abi::NO_NODE {
            return Err(EOPNOTSUPP.into());
        }
        if self.endpoint == NO_ENDPOINT {
            return Err(ENOSPC.into());
        }
        let idx = self.engine.rkeys.alloc(net::MAX_RKEYS).ok_or(ENOSPC)?;
        let tag = loop {
            // SAFETY: `get_random_u32` has no preconditions and may be called from any context.
            let t = unsafe { bindings::get_random_u32() };
            if t != 0 {
                break t;
            }
        };
        let ctrl = nr::NET_RKEY_CTRL::zeroed()
            .with_valid(true)
            .with_read(v.access & abi::ACCESS_REMOTE_READ != 0)
            .with_write(v.access & abi::ACCESS_REMOTE_WRITE != 0);
        let mut g = self.inner.lock();
        let res = if g.dead {
            Err(ENODEV.into())
        } else if g.bound.is_none() {
            Err(CtxError::Lost)
        } else if g.regions.get(handle).is_none() {
            Err(ENOENT.into())
        } else {
            g.rkeys
                .push((handle, idx), GFP_KERNEL)
                .map_err(Error::from)
                .and_then(|()| {
                    let (start, len) = (v.range.start, v.range.len());
                    self.engine
                        .rkey_write(idx, tag, self.endpoint, (start, len), ctrl)
                })
                .map_err(CtxError::from)
        };
        if let Err(e) = res {
            if let Some(i) = g.rkeys.iter().position(|&(_, x)| x == idx) {
                // `i` is a valid index: removing it cannot fail.
                let _ = g.rkeys.remove(i);
            }
            // An MMIO write fails only for an offset past the BAR, which probe checked.
            let _ = self
                .engine
                .rkey_write(idx, 0, 0, (0, 0), nr::NET_RKEY_CTRL::zeroed());
            self.engine.rkeys.free(idx);
            return Err(e);
        }
        Ok((u64::from(tag) << 32) | u64::from(idx))
    }

    /// Revoke region `handle`'s rkey, if it has one: from here on the engine places nothing
    /// with it. Before the region's pages go.
    pub(crate) fn revoke_rkey(&self, inner: &mut Inner, handle: u32) {
        if let Some(i) = inner.rkeys.iter().position(|&(h, _)| h == handle) {
            if let Ok((_, idx)) = inner.rkeys.remove(i) {
                // An MMIO write fails only for an offset past the BAR, which probe checked.
                let _ = self
                    .engine
                    .rkey_write(idx, 0, 0, (0, 0), nr::NET_RKEY_CTRL::zeroed());
                self.engine.rkeys.free(idx);
            }
        }
    }

    /// Revoke every rkey of the process (teardown).
    pub(crate) fn revoke_all(&self, inner: &mut Inner) {
        while let Some(&(h, _)) = inner.rkeys.first() {
            self.revoke_rkey(inner, h);
        }
    }
}
