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
//!
//! `MBOX_WAIT` (ABI 7, register map 2.6) sleeps until the ring holds a message the process has
//! not taken (MBOX_TAIL != MBOX_HEAD), and poll() is readable while it does. Both look under
//! `inner` and arm the mailbox event when there is none: the event's interrupt (CTX_IRQ MBOX,
//! transfer.rs `on_interrupt`) takes `inner` to wake them, so none is lost between the look and
//! the sleep. The process keeps no context for a wait: while it has none, its saved indices
//! answer, and a message for it brings a context back (resident.rs), whose binding wakes the
//! waiters to arm the event there (bind.rs).

use crate::error::{CtxError, CtxResult};
use crate::exanest_core::abi;
use crate::hw::net::MboxState;
use crate::hw::Feature;
use crate::process::{Inner, Process};
use kernel::prelude::*;

impl Process {
    /// EXANEST_DMA_IOC_MBOX_CREATE, with the process holding a context (device.rs). EINVAL for
    /// a bad request, EOPNOTSUPP without a mailbox on the engine, ENOENT without a queue,
    /// EEXIST for a second mailbox.
    pub(crate) fn mbox_create(&self, req: &abi::Mbox) -> CtxResult {
        self.check_caller()?;
        let ring = abi::check_mbox(req, &self.limits())?;
        // The mailbox came with 2.4, before the port this driver speaks (2.5).
        if self.engine.node() == abi::NO_NODE {
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
            // A MAILBOX may wake the process from now on (2.5). An MMIO write fails only
            // for an offset past the BAR, which probe checked.
            let _ = self.engine.ep_set(self.endpoint, Some(ctx.index()), true);
            Ok(())
        })();
        drop(g);
        if res.is_err() {
            self.drop_unreported(handle);
        }
        res
    }

    /// EXANEST_DMA_IOC_MBOX_WAIT: until the mailbox holds a message not taken (`pending`, at
    /// least 1), or the timeout (ETIMEDOUT). ENOENT without a mailbox, EOPNOTSUPP on an engine
    /// older than 2.6, ERESTARTSYS on a signal.
    pub(crate) fn mbox_wait(&self, req: &abi::MboxWait) -> Result<abi::MboxWait> {
        self.check_caller()?;
        abi::check_mbox_wait(req)?;
        if !self.engine.has(Feature::MboxEvent) {
            return Err(EOPNOTSUPP);
        }
        let mut jiffies = Process::timeout_jiffies(req.timeout_ns);
        let mut g = self.inner.lock();
        loop {
            if g.dead {
                return Err(ENODEV);
            }
            let pending = self.mbox_pending(&g).ok_or(ENOENT)?;
            if pending != 0 {
                return Ok(abi::MboxWait { pending, ..*req });
            }
            self.sleep_done(&mut g, &mut jiffies)?;
        }
    }

    /// The messages of the process's mailbox not taken yet, arming its event when there are
    /// none (poll() and MBOX_WAIT, under `inner`): `None` without a mailbox. An engine older
    /// than 2.6 has no event: 0 there (poll() is not readable for its mailbox).
    pub(crate) fn mbox_pending(&self, g: &Inner) -> Option<u32> {
        let m = g.mbox.as_ref()?;
        Some(match g.hw() {
            Some(ctx) if self.engine.has(Feature::MboxEvent) => {
                // An MMIO access fails only for an offset past the BAR, which probe checked.
                ctx.mbox_pending_or_arm().unwrap_or(0)
            }
            Some(_) => 0,
            // No message lands while the process holds no context: its saved indices.
            None => m.tail.wrapping_sub(m.head),
        })
    }
}
