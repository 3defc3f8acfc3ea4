// SPDX-License-Identifier: GPL-2.0-only

//! The mailbox (register map 2.4, ABI 5; Documentation/network.rst, "The mailbox"): a receive
//! ring in the process's memory for the small messages other nodes send to its endpoint.
//!
//! `MBOX_CREATE` registers the ring on demand for the engine to write (a page of it that does
//! not translate is a receiver fault like any other: NACKed, resolved by the fault thread with
//! the process's regions, RESUMEd; remote.rs), holds that region (DEREG of it is EBUSY), and
//! enables the ring on the process's context. Its reader's index is on the doorbell page
//! (`MBOX_HEAD`), so the process needs its queue first. Its context may go to another process
//! while it is idle: contexts.rs saves the ring's indices after the endpoint stops being
//! resident (so no message lands in between) and restores them before it is resident again.
//! QUIESCE at teardown disables the ring; the region goes with the others.

use crate::engine::Context;
use crate::error::{CtxError, CtxResult};
use crate::exanest_core::abi;
use crate::netregs as nr;
use crate::process::{MboxState, Process};
use kernel::{io::register::Array, prelude::*};

impl Process {
    /// EXANEST_DMA_IOC_MBOX_CREATE, with the process holding a context (device.rs). EINVAL for
    /// a bad request, EOPNOTSUPP without a mailbox on the engine, ENOENT without a queue,
    /// EEXIST for a second mailbox.
    pub(crate) fn mbox_create(&self, req: &abi::Mbox) -> CtxResult {
        self.check_caller()?;
        let ring = abi::check_mbox(req, &self.limits())?;
        if self.engine.node == abi::NO_NODE || self.engine.version.minor().get() < 4 {
            return Err(EOPNOTSUPP.into());
        }
        {
            let g = self.inner.lock();
            if g.dead {
                return Err(ENODEV.into());
            }
            if !g.queue.exists() {
                return Err(ENOENT.into());
            }
            if g.mbox.is_some() {
                return Err(EEXIST.into());
            }
        }
        let handle = self.register(&abi::Reg {
            addr: ring.start,
            length: ring.len(),
            access: abi::ACCESS_READ | abi::ACCESS_WRITE,
            mode: abi::MODE_ON_DEMAND,
            ..Default::default()
        })?;
        let mut g = self.inner.lock();
        let res = (|| {
            if g.dead {
                return Err(ENODEV.into());
            }
            if g.mbox.is_some() {
                return Err(EEXIST.into());
            }
            let ctx = g.hw().ok_or(CtxError::Lost)?;
            // Held from here: a DEREG of a guessed handle in between made this fail (ENOENT).
            g.regions.hold(handle)?;
            if let Err(e) = ctx.mbox_enable(ring.start, req.log2) {
                g.regions.release(handle);
                return Err(e.into());
            }
            g.mbox = Some(MboxState {
                base: ring.start,
                log2: req.log2,
                head: 0,
                tail: 0,
            });
            Ok(())
        })();
        drop(g);
        if res.is_err() {
            self.drop_unreported(handle);
        }
        res
    }
}

impl Context {
    /// Enable the mailbox ring of 2^`log2` slots at `base` on this context: EIO when the
    /// engine refuses it.
    pub(crate) fn mbox_enable(&self, base: u64, log2: u32) -> Result {
        let c = self.index as usize;
        let r = &self.engine.regs;
        r.write(
            nr::MBOX_BASE_LO::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_BASE_LO::zeroed().with_value(base as u32),
        )?;
        r.write(
            nr::MBOX_BASE_HI::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_BASE_HI::zeroed().with_value((base >> 32) as u32),
        )?;
        r.write(
            nr::MBOX_CFG::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_CFG::zeroed()
                .try_with_log2(log2)?
                .with_enable(true),
        )?;
        let cfg = r.read(nr::MBOX_CFG::try_at(c).ok_or(EINVAL)?)?;
        if !cfg.enable() {
            return Err(EIO);
        }
        Ok(())
    }

    /// The ring's indices (HEAD, TAIL), before the context is taken from its process.
    pub(crate) fn mbox_save(&self) -> Result<(u32, u32)> {
        let c = self.index as usize;
        let r = &self.engine.regs;
        let head = r.read(nr::MBOX_HEAD::try_at(c).ok_or(EINVAL)?)?;
        let tail = r.read(nr::MBOX_TAIL::try_at(c).ok_or(EINVAL)?)?;
        Ok((head.value().get(), tail.value().get()))
    }

    /// Give this context the ring of `m` where it was: TAIL while the mailbox is disabled (as
    /// QUIESCE left it), enable, then HEAD, which RESUMEs the messages a full ring refused.
    pub(crate) fn mbox_restore(&self, m: &MboxState) -> Result {
        let c = self.index as usize;
        let r = &self.engine.regs;
        r.write(
            nr::MBOX_TAIL::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_TAIL::zeroed().with_value(m.tail),
        )?;
        self.mbox_enable(m.base, m.log2)?;
        r.write(
            nr::MBOX_HEAD::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_HEAD::zeroed().with_value(m.head),
        )
    }
}
