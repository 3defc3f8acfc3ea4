// SPDX-License-Identifier: GPL-2.0-only

//! The process's side of sharing contexts (contexts.rs decides who gets one): taking a context
//! ([`Process::bind_context`]: the domain attached to its function, the queue and the mailbox
//! restored, the endpoint pointed at it) and giving it up while idle
//! ([`Process::unbind_if_idle`]: the doorbell parked, the queue stopped where it is, the
//! mailbox's indices saved, the context stopped, the domain detached).

use crate::ffi;
use crate::hw::{Context, Hw};
use crate::process::{Inner, Process};
use core::sync::atomic::Ordering;
use kernel::{prelude::*, sync::Arc};

impl Process {
    /// Take context `ctx`, whose function no domain is attached to: attach the process's
    /// domain to it. Returns when (monotonic ns).
    pub(crate) fn bind_context(&self, ctx: Arc<Context>) -> Result<u64> {
        let dom = self.domain().ok_or(ENODEV)?;
        let mut g = self.inner.lock();
        if g.dead {
            return Err(ENODEV);
        }
        // The context may have been stopped with work of a process that is gone: it starts
        // clean (quiesce also clears its interrupt status).
        ctx.reset();
        dom.attach(ctx.dev().clone())?;
        let now = ffi::ktime_ns();
        self.queue_return(&mut g, &ctx);
        // The mailbox's ring where it was, before a message can come (mailbox.rs).
        if let Some(m) = g.mbox.as_ref() {
            // A ring the engine refuses now stays disabled: its messages are refused as for a
            // process without a mailbox, and MBOX_CREATE is not retried here.
            let _ = ctx.mbox_restore(m);
        }
        // Other nodes reach the process's endpoint through this context now (remote.rs). An
        // MMIO write fails only for an offset past the BAR, which probe checked.
        let mbox = g.mbox.is_some();
        let _ = self.engine.ep_set(self.endpoint, Some(ctx.index()), mbox);
        // The reset above cleared every channel: no fault of the context is left.
        g.engine_faults.clear();
        self.irq_faults.store(0, Ordering::SeqCst);
        g.bound = Some((ctx, now));
        // A mailbox waiter arms its event on this context now (mailbox.rs).
        self.done.notify_all();
        Ok(now)
    }

    /// Give the context up if the process is idle (`Inner::idle`, and the engine has nothing
    /// of its queue in flight): stop it and detach the domain. Returns whether it did.
    pub(crate) fn unbind_if_idle(&self) -> bool {
        // A queue's doorbell first, without `inner` (zapping calls the mm's notifiers), and only
        // if the engine has nothing of the queue in flight now.
        let queue = {
            let g = self.inner.lock();
            if !self.idle(&g) {
                return false;
            }
            match g.hw() {
                Some(ctx) if g.queue.exists() && !g.dead => {
                    if !ctx.queue_quiet() {
                        return false;
                    }
                    true
                }
                _ => false,
            }
        };
        if queue {
            self.doorbell_park();
        }
        let mut g = self.inner.lock();
        if let Some(ctx) = g.hw() {
            // Rechecked with the doorbell stopped: the queue stops where it is, or the
            // process keeps its context and its doorbell.
            if !self.idle(&g) || !self.queue_leave(&mut g, &ctx) {
                self.doorbell_open(&ctx);
                return false;
            }
        }
        if let Some((ctx, _)) = g.bound.take() {
            // Not through this context any more: NACKed NOT_READY until it has another. An
            // MMIO write fails only for an offset past the BAR, which probe checked.
            let _ = self.engine.ep_set(self.endpoint, None, g.mbox.is_some());
            // No message lands now: the mailbox's indices go with the process.
            if let Some(m) = g.mbox.as_mut() {
                if let Ok((head, tail)) = ctx.mbox_save() {
                    (m.head, m.tail) = (head, tail);
                }
            }
            ctx.reset();
            // Idle: no fault was in service; none of the reset context is left.
            g.engine_faults.clear();
            self.irq_faults.store(0, Ordering::SeqCst);
            if let Some(d) = self.domain() {
                d.detach();
            }
        }
        true
    }

    /// Whether the process holds a context.
    pub(crate) fn holds_context(&self) -> bool {
        self.inner.lock().bound.is_some()
    }

    /// A first look at whether the context could be taken from the process (rechecked by
    /// [`Process::unbind_if_idle`]), and whether it has a queue that keeps its context for
    /// good (its engine cannot move queues, register map 2.1).
    pub(crate) fn idleness(&self) -> (bool, bool) {
        let g = self.inner.lock();
        let has = g.queue.exists() && !g.dead;
        let fixed = g.hw().is_some_and(|c| !c.can_move_queue());
        // A queue's idleness is the engine's to say (the doorbell may still ring).
        let quiet = !has || g.hw().is_none_or(|c| c.queue_quiet());
        (self.idle(&g) && quiet, has && fixed)
    }

    /// [`Inner::idle`], and no fault handed over by an interrupt waits to be noted: a fault
    /// keeps the context until it is answered.
    fn idle(&self, g: &Inner) -> bool {
        g.idle() && self.irq_faults.load(Ordering::SeqCst) == 0
    }

    /// The engine the process opened.
    pub(crate) fn engine(&self) -> &Arc<crate::hw::Engine> {
        &self.engine
    }

    /// The endpoint other nodes address the process by (`hw::net::NO_ENDPOINT` if none).
    pub(crate) fn endpoint(&self) -> u32 {
        self.endpoint
    }
}
