// SPDX-License-Identifier: GPL-2.0-only

//! Remote access (register map 2.3, Documentation/network.rst): what other nodes reach a
//! process by, and what the engine does for them on its behalf.
//!
//! - **Endpoints.** Each process on an engine with a network port holds an endpoint id
//!   (0-255), the stable name other nodes address it by. The engine's endpoint table says
//!   which context it holds now: set when contexts.rs gives it one, cleared before it is taken.
//! - **Remote keys.** A region registered with a remote right gets an rkey: 64 random bits
//!   (register map 2.5), in a free entry of the engine's key table, which looks keys up with
//!   their endpoint; bound to the process's endpoint, the region's range and rights, and
//!   (ABI 8, `EXANEST_DMA_REG_INITIATOR`; register map 2.9) to the one node it is for. The
//!   engine answers every key failure ENOKEY and quarantines a node that fails too often
//!   (link.rs: `key_fail_limit`, debugfs `quarantine`). The entry is
//!   committed before the caller learns the key, and revoked (the engine's VALID bit cleared)
//!   before any page of the region is unmapped or unpinned: DEREG and teardown revoke first.
//!   A process with remote keys may lose its context while idle: an op for it then makes it
//!   resident again (resident.rs).
//! - **Receiver faults.** A remote put into a page that does not translate is NACKed by the
//!   engine, which reports the fault on an idle channel of the receiving context (ORIGIN
//!   NET_RX). The fault thread resolves it on the process's mm like a local fault (fault.rs)
//!   and writes RESUME, which the engine sends on to the sender; or NACK with the resolver's
//!   errno (EFAULT: no VMA, EACCES: no permission), which ends the sender's op with it.

use crate::error::{CtxError, CtxResult};
use crate::exanest_core::abi::{self, ValidReg};
use crate::hw::net::NO_ENDPOINT;
use crate::hw::netregs as nr;
use crate::hw::Feature;
use crate::process::{Inner, Process};
use kernel::{bindings, prelude::*};

impl Process {
    /// REG with a remote right, for region `handle` (`v`): its rkey, committed to the engine's
    /// key table. EOPNOTSUPP without a network port, ENOSPC when the table (or the endpoints)
    /// are full, [`CtxError::Lost`] while the process holds no context (device.rs gets it one
    /// and asks again).
    pub(crate) fn grant_rkey(&self, handle: u32, v: &ValidReg) -> CtxResult<u64> {
        if self.engine.node() == abi::NO_NODE {
            return Err(EOPNOTSUPP.into());
        }
        if v.initiator.is_some() && !self.engine.has(Feature::BoundKeys) {
            // Register map 2.9 binds keys to a node: an older engine cannot.
            return Err(EOPNOTSUPP.into());
        }
        if self.endpoint == NO_ENDPOINT {
            return Err(ENOSPC.into());
        }
        let idx = self.engine.rkey_alloc().ok_or(ENOSPC)?;
        let key = loop {
            // SAFETY: `get_random_u64` has no preconditions and may be called from any context.
            let k = unsafe { bindings::get_random_u64() };
            if k != 0 {
                break k;
            }
        };
        let ctrl = nr::NET_RKEY_CTRL::zeroed()
            .with_valid(true)
            .with_read(v.access & abi::ACCESS_REMOTE_READ != 0)
            .with_write(v.access & abi::ACCESS_REMOTE_WRITE != 0)
            .with_bound(v.initiator.is_some());
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
                    let node = v.initiator.unwrap_or(0);
                    self.engine
                        .rkey_write(idx, key, self.endpoint, (start, len), node, ctrl)
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
                .rkey_write(idx, 0, 0, (0, 0), 0, nr::NET_RKEY_CTRL::zeroed());
            self.engine.rkey_free(idx);
            return Err(e);
        }
        Ok(key)
    }

    /// Revoke region `handle`'s rkey, if it has one: from here on the engine places nothing
    /// with it. Before the region's pages go.
    pub(crate) fn revoke_rkey(&self, inner: &mut Inner, handle: u32) {
        if let Some(i) = inner.rkeys.iter().position(|&(h, _)| h == handle) {
            if let Ok((_, idx)) = inner.rkeys.remove(i) {
                // An MMIO write fails only for an offset past the BAR, which probe checked.
                let _ = self
                    .engine
                    .rkey_write(idx, 0, 0, (0, 0), 0, nr::NET_RKEY_CTRL::zeroed());
                self.engine.rkey_free(idx);
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
