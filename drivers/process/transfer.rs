// SPDX-License-Identifier: GPL-2.0-only

//! Copies of a process: submit (EXANEST_DMA_IOC_COPY), the engine's interrupt, and collecting
//! the result (EXANEST_DMA_IOC_WAIT, poll). The channel state machine itself is channel.rs.

use crate::error::{CtxError, CtxResult};
use crate::exanest_core::{abi, regs as map};
use crate::ffi;
use crate::hw::{Context, Hw};
use crate::process::channel::each_channel;
use crate::process::{Inner, Process};
use core::sync::atomic::Ordering;
use kernel::{
    fs::File,
    prelude::*,
    sync::{poll::PollTable, CondVarTimeoutResult, MutexGuard},
    time::{msecs_to_jiffies, Jiffies},
};

/// How long the interrupt thread looks for the next fault of a context whose faults it has
/// just served, before it lets the line go (ns of the fault path's stamp clock): a window-0
/// copy's next fault comes about 4 us after its RESUME (the model's per-transfer latency and
/// the page's data).
const POLL_NS: u64 = 10_000;

/// The most faults the interrupt thread serves by polling in one run, with the line masked:
/// other contexts' interrupts wait for at most these.
const POLL_FAULTS: u32 = 16;

impl Process {
    /// Queue a copy between two registered regions; start it if a channel is free. Returns the
    /// cookie and the channel (`u32::MAX` when queued).
    pub(crate) fn copy(&self, req: &abi::Copy) -> CtxResult<(u64, u32)> {
        self.check_caller()?;
        let v = abi::check_copy(req, &self.limits())?;
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return Err(ENODEV.into());
        }
        // The context was taken from the process after the grant (it was idle): device.rs
        // gets it one again.
        let Some(ctx) = inner.hw() else {
            return Err(CtxError::Lost);
        };
        let src = inner.regions.find(&v.src, abi::ACCESS_READ)?;
        let dst = inner.regions.find(&v.dst, abi::ACCESS_WRITE)?;
        let (cookie, start) = inner.chans.submit(v, src, dst)?;
        // Both regions exist (found above), so holding them cannot fail.
        let _ = inner.regions.hold(src);
        let _ = inner.regions.hold(dst);
        let channel = match start {
            Some(s) => {
                let (chans, mut release) = inner.chans_releasing();
                let mut ended = false;
                chans.start(&*ctx, s, &mut |e| {
                    release(e);
                    ended = true;
                });
                if ended {
                    // The device is gone: the copy ended at once; wake poll(). Only then: an
                    // unconditional wake-up here cost 30 us per small copy (bench latency,
                    // 64 B: 92 us instead of 60 us, icount).
                    self.done.notify_all();
                }
                s.channel
            }
            None => u32::MAX,
        };
        Ok((cookie, channel))
    }

    /// Faults stream (a transfer that faults page after page): look for the next fault of
    /// `ctx` in its fault record ring for up to [`POLL_NS`] after each one, and serve it at
    /// once, as an interrupt would but without the interrupt's delivery, the thread's wake-up
    /// and the dispatch (2.1 us of a fault's service at the median, -icount), at most
    /// [`POLL_FAULTS`] faults. The interrupt thread runs this with the line masked
    /// (`IRQF_ONESHOT`): the engine's interrupts for these faults come once it returns, and
    /// find them answered; it stops as soon as another context raises the interrupt. A polled
    /// fault's service starts when the poll found its record.
    fn poll_faults(&self, ctx: &Context) {
        let mut deadline = ffi::stamp_ns().saturating_add(POLL_NS);
        let mut served = 0;
        while served < POLL_FAULTS {
            // Another context's interrupt waits while this thread polls (the line is masked):
            // it goes first (16 processes faulting at once: service p99 18.7 -> 436 us with
            // the poll alone).
            if ctx.others_raised() {
                return;
            }
            let chans = ctx.recorded_faults();
            let now = ffi::stamp_ns();
            if chans == 0 {
                if now >= deadline {
                    return;
                }
                core::hint::spin_loop();
                continue;
            }
            ffi::prof_mark(ffi::Mark::Begin);
            // The first sight of a fault stamps it (its interrupt may have come already). A
            // server that stopped short of done (the process torn down, a fault handed to the
            // fault thread, map-ahead to do) ends the poll: what is left is the fault
            // thread's.
            if !self.serve_inline(chans, now) {
                return;
            }
            served += 1;
            deadline = ffi::stamp_ns().saturating_add(POLL_NS);
        }
    }

    /// Serve the faults of channels `chans` of the process's context in this (interrupt)
    /// thread, first seen at `at`: each is stamped there unless an earlier sight stamped it.
    /// Returns whether the server got through them all ([`Process::serve`]).
    fn serve_inline(&self, chans: u32, at: u64) -> bool {
        for n in each_channel(chans) {
            // Kept when set: the earlier sight is the fault's start.
            let _ = self.irq_at[n as usize].compare_exchange(
                0,
                at,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        self.irq_faults.fetch_or(chans, Ordering::SeqCst);
        self.serve(true)
    }

    /// The engine raised its interrupt at `at` (the hard handler's stamp, 0 if unknown) for the
    /// channels in `pending` (the interrupt thread), and (bits 8 and 9) for the user-level
    /// queue; `ctx` is the context that raised it.
    pub(crate) fn on_interrupt(&self, ctx: &Context, pending: u32, at: u64) {
        // Only channels in fault-wait: serve them here, without sleeping on the mm, unless a
        // server is at work already (the fault thread, woken by the IOMMU's report), which
        // then takes them, so that this thread does not wait for `inner` behind it (60 % of
        // window-0 faults, the fault log off: 4 us more per fault, exanest-bench
        // fault-service, -icount). Serving here saves the fault thread's wake-up: window-0
        // copies 19.9 -> 16.8 us per fault, 16 processes faulting at once 46,000 -> 65,000
        // faults/s (exanest-bench fault-service, storm; Documentation/design.rst, "Where faults
        // are served"). The server notes them under `inner`.
        let chans = pending & map::ctx_irq::CHANNELS;
        if chans != 0
            && chans == pending
            && each_channel(chans).all(|n| matches!(ctx.in_fault(n), Ok(true)))
        {
            // A fault's service starts at its interrupt, in the hard handler (the CPU's fault
            // at its trap): the thread's wake-up and the dispatch to the process are its too.
            let now = if at != 0 { at } else { ffi::stamp_ns() };
            // What this thread allocates for the process (the faults below and those it polls)
            // is charged to the process's memory cgroup: entered once for them all.
            let _memcg = ffi::MemcgScope::enter(&self.mm);
            // The first interrupt of a fault stamps it.
            let done = self.serve_inline(chans, now);
            // Not with the SMMU's reports kept: its event thread, an interrupt thread of the
            // same priority, must get its turn between faults (Documentation/design.rst,
            // "Where faults are served").
            if done && !crate::module_parameters::smmu_fault_events.value() {
                self.poll_faults(ctx);
            }
            return;
        }
        let mut g = self.inner.lock();
        if g.dead {
            return;
        }
        // Interrupts come from the context the process holds, which it cannot lose while it
        // has copies on it.
        let Some(ctx) = g.hw() else {
            return;
        };
        let inner = &mut *g;
        inner.queue.interrupt(&ctx, pending);
        // Channels in fault-wait, whatever their transfer's origin (fault/machine.rs).
        let fault = inner.engine_faults.interrupt(&*ctx, pending);
        let (chans, mut release) = inner.chans_releasing();
        let mut ended = false;
        chans.interrupt(&*ctx, pending & map::ctx_irq::CHANNELS, &mut |e| {
            release(e);
            ended = true;
        });
        if fault {
            // The fault worker resolves it (or NACKs it) and resumes the channel.
            self.kick();
        }
        // Woken under `inner` (`wait` rechecks under it) when a waiter may have something new
        // to see: a copy ended, or a queue, kernel queue or mailbox event. An interrupt that
        // only noted faults changes nothing a waiter looks at: waking the copy's waiter at
        // every fault put it on the fault's path, contending for `inner` with the fault
        // thread (fault log: map stage 21.5 us at p50, exanest-bench fault-service, icount).
        if ended || !fault || pending & !map::ctx_irq::CHANNELS != 0 {
            self.done.notify_all();
        }
    }

    /// Wait for a copy to end (`timeout_ns` < 0: forever): its status and bytes.
    pub(crate) fn wait(&self, req: &abi::Wait) -> Result<(i32, u64)> {
        // Another process (a forked child) must not collect, or wait for, the opener's copies.
        self.check_caller()?;
        abi::check_wait(req)?;
        let mut jiffies = Process::timeout_jiffies(req.timeout_ns);
        let mut g = self.inner.lock();
        loop {
            if let Some(r) = g.chans.reap(req.cookie)? {
                return Ok(r);
            }
            if g.dead {
                return Err(ENODEV);
            }
            self.sleep_done(&mut g, &mut jiffies)?;
        }
    }

    /// A wait's timeout in jiffies: `None` (no limit) for a negative `timeout_ns`.
    pub(crate) fn timeout_jiffies(timeout_ns: i64) -> Option<Jiffies> {
        if timeout_ns < 0 {
            return None;
        }
        let ms = timeout_ns.unsigned_abs().div_ceil(1_000_000);
        Some(msecs_to_jiffies(u32::try_from(ms).unwrap_or(u32::MAX)))
    }

    /// Sleep on `done` under `g` (released meanwhile) for what is left of `jiffies` (`None`: no
    /// limit), which is updated: ETIMEDOUT once nothing is left, ERESTARTSYS on a signal. The
    /// caller looks again at what it waits for after each return.
    pub(crate) fn sleep_done(
        &self,
        g: &mut MutexGuard<'_, Inner>,
        jiffies: &mut Option<Jiffies>,
    ) -> Result {
        match *jiffies {
            Some(0) => Err(ETIMEDOUT),
            Some(j) => match self.done.wait_interruptible_timeout(g, j) {
                CondVarTimeoutResult::Timeout => {
                    *jiffies = Some(0);
                    Ok(())
                }
                CondVarTimeoutResult::Woken { jiffies: left } => {
                    *jiffies = Some(left);
                    Ok(())
                }
                CondVarTimeoutResult::Signal { .. } => Err(ERESTARTSYS),
            },
            None if self.done.wait_interruptible(g) => Err(ERESTARTSYS),
            None => Ok(()),
        }
    }

    /// poll(): readable when a finished copy waits to be collected, when the user-level
    /// queue's CQ event (or an error) came since QUEUE_WAIT last looked, or (2.6) while the
    /// mailbox holds a message not taken (which arms its event otherwise, mailbox.rs); HUP once
    /// the device is gone.
    pub(crate) fn poll_mask(&self, file: &File, table: PollTable<'_>) -> u32 {
        table.register_wait(file, &self.done);
        let g = self.inner.lock();
        if g.chans.has_done()
            || g.queue.event_pending()
            || (!g.dead && self.mbox_pending(&g).is_some_and(|n| n != 0))
        {
            ffi::poll_readable()
        } else if g.dead {
            ffi::poll_hangup()
        } else {
            0
        }
    }
}
