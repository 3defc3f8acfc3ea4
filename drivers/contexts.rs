// SPDX-License-Identifier: GPL-2.0-only

//! The engine's contexts shared by the processes that have the engine open, which may be more
//! than there are contexts: binding a process's domain to a context's function, and taking a
//! context from an idle holder when none is free. The policy (which context, who waits, the time
//! slice) is the core's `ctxpool`, tested on the host; this file carries its decisions out.
//!
//! A process moves between contexts with its domain: the domain is detached from the old
//! context's function and attached to the new one's, and keeps every mapping meanwhile (pinned
//! pages, the on-demand mirror). Only an idle holder loses its context: nothing queued or
//! running, checked under its `inner`, which its submissions take too. A holder with a
//! user-level queue (register map 2.2) is idle when the engine has nothing of its queue in
//! flight and nothing posted it has not taken: its doorbell is zapped first, so that nothing
//! rings meanwhile, the engine is asked, and the queue stops where it is (userq.rs). The
//! process's next doorbell access faults, waits for a context like a copy does, and the queue
//! goes on there, where it stopped.
//!
//! Everything here runs under `Instance::state` (device.rs), first in the lock order
//! (process.rs); it takes a process's `inner` (and, to find the domain, `map`) beneath it, and
//! zaps a doorbell with neither held.

use crate::exanest_core::ctxpool::{ContextPool, Grant};
use crate::ffi;
use crate::hw::{Context, Hw};
use crate::process::Process;
use core::mem::MaybeUninit;
use kernel::{prelude::*, sync::Arc};

/// Most contexts an engine has (the register map's limit).
const MAX_CONTEXTS: usize = crate::exanest_core::regs::MAX_CONTEXTS;
/// Processes that can wait in the queue at once; more wait outside it and retry.
const MAX_WAITERS: usize = 256;

/// The engine's context pool (the core's), a process named by its address.
type Pool = ContextPool<usize, MAX_CONTEXTS, MAX_WAITERS>;
/// How long a holder keeps its context while others wait (monotonic ns): 10 ms.
pub(crate) const SLICE_NS: u64 = 10_000_000;

/// A process, as the pool names it: the address of its state.
fn id(p: &Process) -> usize {
    core::ptr::from_ref(p) as usize
}

/// The contexts of one engine, the processes using it, and who holds which.
pub(crate) struct Contexts {
    /// Context n.
    slots: KVec<Arc<Context>>,
    /// Every process with the engine open, holding a context or not.
    procs: KVec<Arc<Process>>,
    /// On the heap: several KiB, which the probe's stack (16 KiB without KASAN) cannot spare.
    pool: KBox<Pool>,
    /// Attaches the IOMMU refused for want of a translation context (ENOSPC), for debugfs.
    refused: u64,
}

/// Write a pool of `n` contexts into `b`. Not inlined: its frame holds the pool while it is
/// built (a frame of 11 KiB on arm64), and it calls nothing but `memcpy`
/// (tests/lint/stack_frames.py).
#[inline(never)]
fn fill_pool(b: KBox<MaybeUninit<Pool>>, n: usize) -> KBox<Pool> {
    b.write(ContextPool::new(n, SLICE_NS))
}

impl Contexts {
    /// The contexts `slots`, nobody holding any.
    pub(crate) fn new(slots: KVec<Arc<Context>>) -> Result<Self> {
        let n = slots.len();
        // Allocated here, built in `fill_pool`: the pool is built on the stack first, and no
        // frame that holds it may have the allocator (reclaim) run below it.
        let pool = fill_pool(KBox::new_uninit(GFP_KERNEL)?, n);
        Ok(Contexts {
            slots,
            procs: KVec::new(),
            pool,
            refused: 0,
        })
    }

    /// A context to allocate domains for (every context's function sits behind the same IOMMU).
    pub(crate) fn any(&self) -> Option<&Arc<Context>> {
        self.slots.first()
    }

    /// How often the IOMMU refused to attach a domain for want of a translation context.
    pub(crate) fn iommu_refused(&self) -> u64 {
        self.refused
    }

    /// Every process with the engine open.
    pub(crate) fn procs(&self) -> &[Arc<Process>] {
        &self.procs
    }

    /// A process opened the engine: it takes a context if one is free, else it gets one when it
    /// first submits a copy.
    pub(crate) fn add(&mut self, p: &Arc<Process>) -> Result {
        self.procs.push(p.clone(), GFP_KERNEL)?;
        if let Some(slot) = self.pool.free() {
            // A free context whose function cannot take the domain leaves the process without
            // one; its first copy tries again.
            if self.bind(slot, p) == Err(ENOSPC) {
                self.refused += 1;
            }
        }
        Ok(())
    }

    /// A process is gone (torn down, which stopped its context and detached its domain).
    pub(crate) fn remove(&mut self, p: &Process) {
        let me = id(p);
        self.pool.release(me);
        self.pool.leave_queue(me);
        self.procs.retain(|q| id(q) != me);
    }

    /// Leave the queue (a waiter gave up).
    pub(crate) fn leave_queue(&mut self, p: &Process) {
        self.pool.leave_queue(id(p));
    }

    /// The process holding context `c`, and the context.
    pub(crate) fn slot(&self, c: usize) -> Option<(&Arc<Context>, Option<&Arc<Process>>)> {
        let ctx = self.slots.get(c)?;
        let holder = self
            .pool
            .holder(c)
            .and_then(|h| self.procs.iter().find(|q| id(q) == h));
        Some((ctx, holder))
    }

    fn find(&self, h: usize) -> Option<&Arc<Process>> {
        self.procs.iter().find(|q| id(q) == h)
    }

    /// Give context `slot` to `p`, whose domain is attached nowhere: attach it to the context's
    /// function.
    fn bind(&mut self, slot: usize, p: &Arc<Process>) -> Result {
        let ctx = self.slots.get(slot).ok_or(EINVAL)?.clone();
        let now = p.bind_context(ctx)?;
        self.pool.bind(slot, id(p), now);
        Ok(())
    }

    /// Take the context from its holder `h`, if `h` is still idle: stop the context and detach
    /// `h`'s domain. Returns whether it did.
    fn unbind_idle(&mut self, h: usize) -> bool {
        let Some(v) = self.find(h).cloned() else {
            // Not a process any more: the context is free.
            self.pool.release(h);
            return true;
        };
        if !v.unbind_if_idle() {
            return false;
        }
        self.pool.release(h);
        true
    }

    /// `p` is about to submit a copy or create its queue: make sure it holds a context.
    /// Returns whether it does; `false` means wait (the caller sleeps without
    /// `Instance::state` and asks again). EBUSY when every context is kept by another process's
    /// user-level queue.
    pub(crate) fn acquire(&mut self, p: &Arc<Process>) -> Result<bool> {
        let me = id(p);
        // The common case, with nobody waiting: the process keeps its context, and nobody's
        // idleness needs looking at.
        if self.pool.keeps(me, ffi::ktime_ns()) {
            return Ok(p.holds_context());
        }
        // Who is idle, as far as the holders' state says now; rechecked when taking.
        let mut idle = [None; MAX_CONTEXTS];
        let mut queues = 0;
        for (c, f) in idle.iter_mut().enumerate().take(self.pool.contexts()) {
            if let Some(h) = self.pool.holder(c) {
                // A holder that is not a process any more holds nothing worth keeping. A queue
                // counts as kept for good if its engine cannot move it (register map 2.1).
                // A queue's idleness is the engine's to say (a first look: the doorbell may
                // still ring; unbind_idle looks again with it stopped).
                let (is_idle, queue) = self.find(h).map_or((true, false), |q| q.idleness());
                if is_idle {
                    *f = Some(h);
                }
                queues += usize::from(queue && h != me);
            }
        }
        // Every context is kept by a user-level queue that cannot move until its file closes:
        // waiting could last forever.
        if queues == self.pool.contexts() {
            self.pool.leave_queue(me);
            return Err(EBUSY);
        }
        let idle_of = |h: usize| idle.contains(&Some(h));
        match self.pool.request(me, ffi::ktime_ns(), idle_of) {
            Grant::Keep(_) => {
                // The pool says it holds one; so does the process, unless a bind failed.
                Ok(p.holds_context())
            }
            Grant::Wait => Ok(false),
            Grant::Take { slot, victim } => {
                if let Some(v) = victim {
                    if !self.unbind_idle(v) {
                        return Ok(false);
                    }
                }
                match self.bind(slot, p) {
                    Ok(()) => Ok(true),
                    // The IOMMU has no translation context left for the domain: on the QFDB's
                    // MMU-500, arm-smmu's context banks, shared with every other master (with
                    // kernel patch 0009 an attached domain holds one, a detached one none).
                    // An idle holder gives its context, and so its bank, up; else wait.
                    Err(e) if e == ENOSPC => {
                        self.refused += 1;
                        if !self.free_a_bank(me) {
                            return Ok(false);
                        }
                        match self.bind(slot, p) {
                            Ok(()) => Ok(true),
                            Err(e) if e == ENOSPC => Ok(false),
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Take a context from an idle holder other than `me`, so that its domain gives its IOMMU
    /// translation context back. Returns whether it did.
    fn free_a_bank(&mut self, me: usize) -> bool {
        for c in 0..self.pool.contexts() {
            let Some(h) = self.pool.holder(c) else {
                continue;
            };
            if h == me || !self.find(h).is_none_or(|q| q.idleness().0) {
                continue;
            }
            if self.unbind_idle(h) {
                return true;
            }
        }
        false
    }

    /// Quiesce context `c` (nobody holds it, yet it interrupted).
    pub(crate) fn quiesce(&self, c: usize) {
        if let Some(ctx) = self.slots.get(c) {
            ctx.reset();
        }
    }
}
