// SPDX-License-Identifier: GPL-2.0-only

//! The fault thread's work for one process (fault.rs describes the path top to bottom): the
//! IOMMU's reports, then every engine channel in fault-wait through the one fault state
//! machine (fault/machine.rs), and the resolver that makes a faulting page reachable: region,
//! VMA, touch-ahead window, fault-in (odp.rs), map (mirror.rs). With no fault waiting, the
//! thread maps ahead of the transfers it RESUMEd (the core's `ahead`): resume first, map the
//! rest after, while the engine runs.

use crate::exanest_core::{
    abi::{self, Range},
    ahead::{self, Chunk},
    fault::{Adaptive, Plan},
    faultsm::{Answer, Origin, Source},
    regs::FaultCause,
    stamps::{Record, Step},
};
use crate::fault::{
    access, reclaim_for_tables, retry_lost_region, Ended, Transfer, Within, MAX_RETRIES,
    WOULD_BLOCK,
};
use crate::ffi;
use crate::hw::{Context, EngineFault};
use crate::mm::mirror::BLOCK_PAGES;
use crate::mm::odp::{self, FaultTarget, Nodes};
use crate::process::channel::each_channel;
use crate::process::queue::QueueState;
use crate::process::{InnerGuard, Process};
use core::sync::atomic::Ordering;
use kernel::{
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::Arc,
};

/// The fault thread's work (ffi.rs `FaultThread`), run after each kick.
///
/// # Safety
///
/// `token` is the `Process` the thread was started for (process.rs); the thread is stopped
/// before the process is freed, so it is live for the call.
pub(crate) unsafe fn fault_work(token: *mut core::ffi::c_void) {
    // SAFETY: Per the contract, `token` points to a live `Process`.
    let process = unsafe { &*token.cast::<Process>() };
    // Whether it served everything matters only to an interrupt thread's poll.
    let _ = process.serve(false);
}

/// How a pass over the process's faults ended (`Process::service_faults`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Everything reported was served.
    Done,
    /// An interrupt thread stopped where it would have slept: the fault thread goes on.
    HandOff,
    /// Nothing can be served: the process is torn down or holds no context.
    Stopped,
}

/// How a channel's fault went (`Process::answer_fault`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Served {
    /// Answered: RESUME or NACK.
    Answered,
    /// Given back to the fault thread: it could not be resolved without sleeping.
    HandedOff,
}

/// A channel's fault taken for service ([`Process::take_fault`]), not answered yet.
pub(super) struct Taken {
    /// The channel.
    pub(super) n: u32,
    /// The context it was taken on, which the answer goes to.
    ctx: Arc<Context>,
    /// The engine's report.
    pub(super) f: EngineFault,
    origin: Origin,
    /// End (exclusive) of the transfer's bytes in the faulting direction.
    limit: u64,
    /// Where to resolve it.
    pub(super) within: Within,
    /// Its steps' times.
    pub(super) rec: Record,
    /// Its answer, if the resolution wrote it as soon as the page was mapped ([`Early`]).
    ended: Option<Ended>,
}

/// A taken fault's answer, written by its resolution as soon as the faulting page is mapped:
/// under the locks that mapped it, before the translation budget's bookkeeping and the
/// resolution's own, none of which the engine waits for ([`Process::fault_and_map_with`]).
/// [`Process::answer_fault`] does the rest of the answer's work after it.
pub(super) struct Early<'a> {
    n: u32,
    ctx: &'a Context,
    f: &'a EngineFault,
    origin: Origin,
    ended: Option<Ended>,
}

impl Early<'_> {
    /// Decide and write the answer of a fault whose page is now mapped, once.
    fn answer(&mut self, inner: &mut super::Inner, rec: &mut Record) {
        if self.ended.is_some() || inner.dead {
            return;
        }
        let (k, lat) = inner.chans.counting();
        self.ended = Some(inner.engine_faults.end(
            self.ctx,
            self.n,
            self.f,
            self.origin,
            Ok(()),
            k,
            lat,
            rec,
        ));
    }
}

/// What a fault needs, as [`Process::prepare_in`] found it.
pub(super) enum Prep {
    /// Nothing: resolved up to this end (the page was reachable already).
    Done(u64),
    /// Reachable already, in map-ahead's step: a lead from `next` on (`done`, the page's end,
    /// if the lead fails).
    Lead { next: u64, done: u64 },
    /// A fault-in and a map.
    Fault(Pending),
}

/// A fault's resolution as planned: its region, address and fault-in, and the region's
/// adaptive window before the plan (restored if the resolution is handed off).
pub(super) struct Pending {
    pub(super) h: u32,
    pub(super) addr: u64,
    pub(super) write: bool,
    pub(super) target: FaultTarget,
    saved: Option<Adaptive>,
}

/// What a resolution is asked: the faulting address and direction, the end (exclusive) of the
/// bytes the transfer still accesses that way (`u64::MAX`: unknown), the region to resolve in,
/// and whether it must not sleep on the mm (`nowait`, else [`WOULD_BLOCK`]).
#[derive(Clone, Copy)]
pub(super) struct Ask {
    pub(super) addr: u64,
    pub(super) write: bool,
    pub(super) limit: u64,
    pub(super) within: Within,
    pub(super) nowait: bool,
}

impl Process {
    /// Serve the process's faults: in its fault thread (`inline` false), or in the engine's
    /// interrupt thread, which noted them (`inline`: `Process::on_interrupt`, transfer.rs).
    /// One server at a time (`Process::serving`): a server that finds another at work leaves
    /// its faults to it, which looks for more after it stops. An inline server resolves
    /// without sleeping on the mm and maps nothing ahead: what it cannot do, it hands to the
    /// fault thread (kicked). Resolving in the thread that got the report costs no wake-up
    /// and no context switch (Documentation/design.rst, "Where faults are served"). Returns
    /// whether this server served everything there was: false when another server was at
    /// work, when it handed off to the fault thread (which then has work), or when nothing
    /// can be served.
    pub(crate) fn serve(&self, inline: bool) -> bool {
        loop {
            if self.serving.swap(true, Ordering::SeqCst) {
                // The server at work sees what brought this one: it looks again below.
                return false;
            }
            let pass = self.service_faults(inline);
            self.serving.store(false, Ordering::SeqCst);
            // Against the IOMMU handler's fence: it queued a report and then saw this server
            // at work (it arms no kick), or this sees the report below.
            core::sync::atomic::fence(Ordering::SeqCst);
            match pass {
                Pass::HandOff => {
                    self.kick();
                    return false;
                }
                // Reports left are served once there is a context again (or never).
                Pass::Stopped => return false,
                Pass::Done if inline => {
                    // The engine's interrupt comes again for the faults it raised meanwhile;
                    // the IOMMU's reports queued meanwhile (their handler saw this server at
                    // work) go to the fault thread. Not through the deferred kick: only the
                    // IOMMU handler arms it, which teardown's detach waits for; this thread
                    // may run after teardown cancelled it (a timer armed then outlived its
                    // process: KASAN, exanest-race).
                    if !self.faults.is_empty() {
                        self.kick();
                        return false;
                    }
                    return true;
                }
                Pass::Done => {}
            }
            // Reports that came while serving, from a server that found this one at work
            // (SeqCst: it set them before it looked at `serving`).
            if self.irq_faults.load(Ordering::SeqCst) == 0 && self.faults.is_empty() {
                return true;
            }
        }
    }

    /// The fault worker: serve every channel that the engine reported in fault-wait, then
    /// resolve what the IOMMU reported, then, if it reported something (or reports were lost),
    /// look at every channel (an IOMMU report may come without an engine report, or before
    /// it). `nowait`: in an interrupt thread, which must not sleep on
    /// the mm and leaves map-ahead to the fault thread; it stops where it would sleep
    /// ([`Pass::HandOff`]), with the fault it could not finish given back (to the queue, or
    /// to the fault table).
    fn service_faults(&self, nowait: bool) -> Pass {
        // What the thread allocates for the process is charged to the process's memory cgroup
        // (an interrupt thread entered the scope once for all it serves: `on_interrupt`).
        let _memcg = (!nowait).then(|| ffi::MemcgScope::enter(&self.mm));
        loop {
            // The channels the engine reported first, several at once resolved together where
            // they are close (batch.rs): their RESUME waits for nothing else. The IOMMU's
            // report of the same page, usually first (Documentation/design.rst, "Where faults
            // are served"), is then found resolved below.
            let mut g = self.inner.lock();
            if g.dead {
                return Pass::Stopped;
            }
            // The context borrowed under the lock (no reference taken and dropped).
            let inner = &mut *g;
            let noted = inner.bound.as_ref().map(|(ctx, _)| {
                let noted = self.irq_faults.swap(0, Ordering::SeqCst);
                for n in each_channel(noted) {
                    let at = self.irq_at[n as usize].swap(0, Ordering::Relaxed);
                    let at = if at == 0 { ffi::stamp_ns() } else { at };
                    inner.engine_faults.noted(n, at);
                }
                inner.engine_faults.pending(&**ctx, false)
            });
            // The first fault is taken and planned under the same hold.
            let served = self.serve_channels(noted.unwrap_or(0), nowait, Some(g));
            let mut busy = served.answered;
            if served.handed_off {
                return Pass::HandOff;
            }
            // The IOMMU's reports, then, if some came (or were lost), every channel the engine
            // may hold a fault on that it did not report (yet).
            match self.serve_reported(noted, nowait) {
                Ok(answered) => busy |= answered,
                Err(pass) => return pass,
            }
            if noted.is_none() {
                // No context: the reports left are served once there is one again (or never).
                return Pass::Stopped;
            }
            if nowait {
                // One pass: faults the engine raised meanwhile raise its interrupt again once
                // this thread returns, and the IOMMU's event thread (an interrupt thread of
                // the same priority, maybe on this CPU) gets its turn in between. Looping here
                // served a whole copy's faults in one call while the IOMMU's events waited,
                // to be handled after their regions were gone (logged as unhandled; test
                // kernel, exanest-bench fault-service). Map-ahead is the fault thread's.
                return if self.inner.lock().ahead.is_empty() {
                    Pass::Done
                } else {
                    Pass::HandOff
                };
            }
            // No fault waits: a step of map-ahead, then look for faults again.
            if !busy && !self.map_ahead() {
                return Pass::Done;
            }
        }
    }

    /// [`Process::service_faults`]' second half, apart from the lone engine fault's path (its
    /// frame and registers are not set up for it): the IOMMU's reports, then, if some came (or
    /// were lost), every channel the engine may hold a fault on that it did not report (yet),
    /// but those in `noted`. Returns whether a fault was answered, or how the pass ends.
    #[inline(never)]
    fn serve_reported(&self, noted: Option<u32>, nowait: bool) -> Result<bool, Pass> {
        let mut busy = false;
        let mut reported = false;
        while let Some((f, stamp)) = self.faults.pop_stamped() {
            reported = true;
            let mut rec = Record::default();
            rec.stamp(Step::Smmu, stamp);
            rec.stamp(Step::Thread, ffi::stamp_ns());
            // Errors are the channel's business: it reports the same fault.
            let ask = Ask {
                addr: f.page,
                write: f.write,
                limit: u64::MAX,
                within: Within::Page,
                nowait,
            };
            let res = self.resolve(ask, &mut rec, None, None);
            if res == Err(WOULD_BLOCK) {
                self.faults
                    .push_at(f.page, f.write, PAGE_SHIFT as u32, stamp);
                return Err(Pass::HandOff);
            }
            if res.is_ok() {
                let us = ffi::stamp_ns().saturating_sub(stamp) / 1000;
                let mut g = self.inner.lock();
                g.chans.latency.handler.record(us);
                // The engine's report of the fault, if it comes later, takes what this
                // resolution did into its record.
                if self.log.on() && rec.at(Step::FaultIn).is_some() {
                    g.resolutions.put(f.page >> PAGE_SHIFT, f.write, &rec);
                }
            }
        }
        busy |= reported;
        if self.faults.take_overflow() || reported {
            let scan = {
                let mut g = self.inner.lock();
                if g.dead {
                    return Err(Pass::Stopped);
                }
                let Some(ctx) = g.hw() else {
                    return Err(Pass::Stopped);
                };
                // Every channel but those served above, unless an interrupt noted one
                // anew in the table since (an interrupt with a queue event does, under
                // `inner`): taken here, it must be served here.
                let anew = g.engine_faults.pending(&*ctx, false);
                anew | (g.engine_faults.pending(&*ctx, true) & !noted.unwrap_or(0))
            };
            let served = self.serve_channels(scan, nowait, None);
            busy |= served.answered;
            if served.handed_off {
                return Err(Pass::HandOff);
            }
        }
        Ok(busy)
    }

    /// One step of map-ahead: map the next chunk that a RESUMEd transfer will access, from its
    /// first page not mapped yet. Returns whether there was a step to take. Not inlined into
    /// [`Process::service_faults`], whose lone engine fault's path it would only weigh on.
    #[inline(never)]
    fn map_ahead(&self) -> bool {
        let (c, addr, target) = {
            let mut g = self.inner.lock();
            let inner = &mut *g;
            if inner.dead {
                return false;
            }
            let Some(c) = inner.ahead.next(ahead::CHUNK) else {
                return false;
            };
            let end = c.first + c.pages;
            let (first, room) = {
                let m = self.map.lock();
                let first = (c.first..end)
                    .find(|&v| !(inner.pages.covers(v, c.write) || m.mirror.covers(v, c.write)));
                (first, m.budget.bound().saturating_sub(m.mirror.len()))
            };
            let Some(first) = first else {
                return true;
            };
            // Map-ahead never evicts: what the engine uses now outranks what it may use next.
            // Past the budget's room (it was lowered, or the process maps much), the job ends.
            let end = end.min(first.saturating_add(room));
            if end <= first {
                inner.ahead.failed(&c);
                return true;
            }
            let target = match self.ahead_target(inner, &c, first, end, room) {
                Some(t) => t,
                None => {
                    inner.ahead.failed(&c);
                    return true;
                }
            };
            (c, first << PAGE_SHIFT, target)
        };
        match self.fault_and_map(addr, c.write, &target, &mut Record::default(), None) {
            Ok((_, mapped)) => {
                let mut g = self.inner.lock();
                g.chans.counters.touch_ahead_pages += mapped;
                if let Some(r) = g.regions.get_mut(c.handle) {
                    r.pages_resolved += mapped;
                }
            }
            // The engine meets the error itself, and the fault path reports it.
            Err(_) => self.inner.lock().ahead.failed(&c),
        }
        true
    }

    /// The fault-in of pages `[first, end)` of step `c`, with `room` pages left in the
    /// translation budget: `None` if its region no longer covers them with the access, or is
    /// pinned.
    fn ahead_target(
        &self,
        inner: &mut super::Inner,
        c: &Chunk,
        first: u64,
        end: u64,
        room: u64,
    ) -> Option<FaultTarget> {
        let r = inner.regions.get(c.handle)?;
        let want = Range::new(first << PAGE_SHIFT, (end - first) << PAGE_SHIFT, u64::MAX).ok()?;
        if r.mode == abi::MODE_PIN
            || !r.range.contains(&Range::new(want.start, 1, u64::MAX).ok()?)
            || r.access & access(c.write) != access(c.write)
        {
            return None;
        }
        Some(FaultTarget {
            handle: c.handle,
            region: r.range,
            notifier: inner.notifier(c.handle)?,
            window: end - first - 1,
            limit: want.end,
            strided: None,
            // A huge page whole, as a fault maps it, where the budget's room holds the step
            // and a block more (map-ahead never evicts).
            blocks: room >= end - first + BLOCK_PAGES,
            nowait: false,
            mark: None,
        })
    }

    /// After a fault at `addr` (`write`: the engine writes) was RESUMEd, resolved up to `done`
    /// (exclusive), plan the rest of its transfer up to `limit` ahead: at most a quarter of the
    /// context's translation budget, so that what is mapped ahead does not evict what the
    /// engine is using. Only in a region with the driver's default window: a window its owner
    /// chose (0 included) is what a fault maps, no more.
    fn plan_ahead(&self, inner: &mut super::Inner, addr: u64, write: bool, done: u64, limit: u64) {
        if limit == u64::MAX || limit <= done {
            return;
        }
        let Ok(one) = Range::new(addr, 1, u64::MAX) else {
            return;
        };
        let not_pinned = |r: &crate::exanest_core::region::Region| r.mode != abi::MODE_PIN;
        let Ok(h) = inner.regions.find_with(&one, access(write), not_pinned) else {
            return;
        };
        if inner.regions.get(h).is_none_or(|r| !r.map_ahead) {
            return;
        }
        let cap = self.map.lock().budget.bound() / 4;
        let page_end = ((limit - 1) >> PAGE_SHIFT) + 1;
        inner
            .ahead
            .plan(h, write, done >> PAGE_SHIFT, page_end, cap);
    }

    /// Take channel `n`'s fault, whatever its origin: its report, transfer and record. `None`
    /// when the channel holds no fault of the process's. A fault in service keeps the process's
    /// context (`Inner::idle`) until it is answered ([`Process::answer_fault`]).
    pub(super) fn take_fault(&self, n: u32) -> Option<Taken> {
        self.take_fault_in(&mut self.inner.lock(), n)
    }

    /// [`Process::take_fault`] under `inner`, held by the caller (which may go on to plan the
    /// fault's resolution under the same hold: [`Process::prepare_in`]).
    pub(super) fn take_fault_in(&self, inner: &mut super::Inner, n: u32) -> Option<Taken> {
        let mut rec = Record::default();
        let ctx = inner.hw()?;
        let k = &mut inner.chans.counters;
        let f = inner.engine_faults.take(&*ctx, n, k, &mut rec)?;
        let rep = &f.report;
        let known = match f.source {
            Source::Start => inner.chans.fault_of(n, rep.fault_write),
            Source::Kernel { slot } => inner.chans.fault_of(slot, rep.fault_write),
            // The transfer's end, as the engine reports it (u64::MAX before 2.10).
            Source::Queue { index } => match &inner.queue {
                QueueState::Ready(q) if q.mask & (1 << n) != 0 => Some(Transfer {
                    origin: Origin::Queue { index },
                    limit: f.end,
                    within: Within::Any,
                }),
                _ => None,
            },
            // The op's end here, as the engine reports it (0 for a MAILBOX).
            Source::NetRx { src, opid } => Some(Transfer {
                origin: Origin::NetRx { src, opid },
                limit: f.end,
                within: Within::Remote,
            }),
        };
        let Some(c) = known else {
            // Not the process's (its queue was disabled meanwhile): a later scan sees it
            // again if it stays.
            inner.engine_faults.drop_fault(n);
            return None;
        };
        Some(Taken {
            n,
            ctx,
            f,
            origin: c.origin,
            limit: c.limit,
            within: c.within,
            rec,
            ended: None,
        })
    }

    /// Where a taken fault's resolution may map ahead to: a receive's window is not cut at its
    /// op's end, as the next ops from the sender usually write on into the same buffer (512
    /// puts of 64 B, each into the next cold page: 1 fault where the op's end made it 43-246,
    /// exanest-bench net-small-cold), as the IOMMU's report of the page, which names no op,
    /// always resolved it. Map-ahead still plans the op alone.
    pub(super) fn window_limit(t: &Taken) -> u64 {
        match t.origin {
            Origin::NetRx { .. } => u64::MAX,
            _ => t.limit,
        }
    }

    /// Resolve taken fault `t` alone, whatever its origin (RESUME or NACK follows in
    /// [`Process::answer_fault`]; a RESUME is written as soon as the page is mapped, [`Early`]);
    /// `nowait`: without sleeping on the mm, else [`WOULD_BLOCK`] (the fault goes back to the
    /// fault thread).
    #[inline(always)]
    pub(super) fn resolve_taken(
        &self,
        t: &mut Taken,
        nowait: bool,
        held: Option<InnerGuard<'_>>,
    ) -> Result<u64> {
        let rep = t.f.report;
        if rep.fault_cause != FaultCause::Translation {
            return Err(EIO);
        }
        let limit = Self::window_limit(t);
        let mut early = Early {
            n: t.n,
            ctx: &t.ctx,
            f: &t.f,
            origin: t.origin,
            ended: None,
        };
        let ask = Ask {
            addr: rep.fault_addr,
            write: rep.fault_write,
            limit,
            within: t.within,
            nowait,
        };
        let res = self.resolve(ask, &mut t.rec, Some(&mut early), held);
        t.ended = early.ended;
        res
    }

    /// Answer taken fault `t`, resolved up to the end `resolved` or not: RESUME or NACK it,
    /// plan map-ahead after a RESUME, end the copy a NACK ends. A resolution that would have
    /// slept gives the fault back to the fault thread ([`Served::HandedOff`]).
    pub(super) fn answer_fault(
        &self,
        t: &mut Taken,
        resolved: Result<u64>,
        nowait: bool,
    ) -> Served {
        let Taken {
            n,
            ref ctx,
            ref f,
            origin,
            limit,
            ref mut rec,
            ..
        } = *t;
        let rep = f.report;
        let res = resolved.map(|_| ());
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return Served::Answered;
        }
        if res == Err(WOULD_BLOCK) {
            inner.engine_faults.defer(n);
            return Served::HandedOff;
        }
        let ended = match t.ended.take() {
            // Written as soon as the page was mapped.
            Some(ended) => ended,
            None => {
                let (k, lat) = inner.chans.counting();
                inner
                    .engine_faults
                    .end(&**ctx, n, f, origin, res, k, lat, rec)
            }
        };
        // The bookkeeping after the answer, which the engine does not wait for.
        if let Ok(one) = Range::new(rep.fault_addr, 1, u64::MAX) {
            if let Ok(h) = inner.regions.find(&one, access(rep.fault_write)) {
                if let Some(r) = inner.regions.get_mut(h) {
                    r.faults += 1;
                }
            }
        }
        if self.log.on() {
            // The SMMU's report of the page, still queued: the fault began then.
            if let Some(at) = self.faults.stamp_of(rep.fault_addr, PAGE_SHIFT as u32) {
                rec.stamp(Step::Smmu, at);
            }
            // The SMMU's report of the page, resolved first: its steps are this fault's.
            let vpn = rep.fault_addr >> PAGE_SHIFT;
            if let Some(r) = inner.resolutions.take(vpn, rep.fault_write) {
                if rec.at(Step::FaultIn).is_none() {
                    rec.merge_resolution(&r);
                }
            }
        }
        if let (Answer::Resume, Ok(()), Ok(done)) = (ended.answer, ended.written, resolved) {
            self.plan_ahead(inner, rep.fault_addr, rep.fault_write, done, limit);
        }
        match origin {
            Origin::Copy { slot, .. } => {
                let (chans, mut release) = inner.chans_releasing();
                chans.fault_ended(&**ctx, slot, &ended, &mut release);
            }
            // Not written only when the device is gone: the queue's and the link's teardown
            // end the transfer (a channel that no longer held the fault ignores the command).
            Origin::Queue { .. } | Origin::NetRx { .. } => {}
        }
        // A RESUME written ends nothing a waiter looks at (the copy goes on): only a NACK, or
        // an answer that could not be written, may have ended a copy.
        let resumed = matches!((ended.answer, ended.written), (Answer::Resume, Ok(())));
        drop(g);
        rec.inline = nowait;
        self.log.push(rec);
        if !resumed {
            self.done.notify_all();
        }
        Served::Answered
    }

    /// Make the page at `ask.addr` reachable by the engine (read, or write too), with
    /// touch-ahead up to `ask.limit`, in the region `ask.within` says; `rec` gets the steps'
    /// times. Returns the end (exclusive) of what was resolved: the window's, or the page's if
    /// it was reachable already. `early`: the taken fault's answer, written as soon as its
    /// page is mapped; `held`: `inner`, if the caller holds it (its fault just taken), for
    /// the plan.
    #[inline(always)]
    pub(super) fn resolve(
        &self,
        ask: Ask,
        rec: &mut Record,
        mut early: Option<&mut Early<'_>>,
        held: Option<InnerGuard<'_>>,
    ) -> Result<u64> {
        let mut held = held;
        retry_lost_region(|| self.resolve_once(&ask, true, rec, early.as_deref_mut(), held.take()))
    }

    /// [`Process::resolve`], once; `lead`: a page found mapped may take a lead on map-ahead.
    #[inline(always)]
    pub(super) fn resolve_once(
        &self,
        ask: &Ask,
        lead: bool,
        rec: &mut Record,
        mut early: Option<&mut Early<'_>>,
        mut held: Option<InnerGuard<'_>>,
    ) -> Result<u64> {
        // The end of the faulting page, mapped already, once a lead from it was taken: what
        // the resolution resolved if the lead fails.
        let mut led = None;
        let mut lead = lead;
        // The ask of a lead's second look: `ask` but for the address. `ask` itself is not
        // copied (a 7-byte copy of its tail, byte by byte, 30 instructions of a lone fault's
        // path, `make profile`).
        let mut moved: Option<Ask> = None;
        let res = loop {
            let g = held.take().unwrap_or_else(|| self.inner.lock());
            let a = moved.as_ref().unwrap_or(ask);
            // Looked at in place: a plan is not copied out of the result (192 bytes).
            match &self.prepare_in(g, a, lead) {
                Ok(Prep::Done(done)) => break Ok(*done),
                // The faulting page is mapped: the lead's mapping may answer it (a second
                // look takes no lead).
                Ok(Prep::Lead { next, done }) => {
                    led = Some(*done);
                    moved = Some(Ask { addr: *next, ..*a });
                    lead = false;
                }
                Ok(Prep::Fault(p)) => {
                    let res = self.fault_and_map(p.addr, a.write, &p.target, rec, early.take());
                    break self.finish(
                        p,
                        res.map(|(end, mapped)| (end, mapped, mapped.saturating_sub(1))),
                    );
                }
                Err(e) => break Err(*e),
            }
        };
        match (res, led) {
            (Err(_), Some(done)) => Ok(done),
            (res, _) => res,
        }
    }

    /// A resolution's first half: what the fault `ask` names needs (see [`Prep`]), with its
    /// region, window and plan; `lead` as [`Process::resolve_once`]'s. Planned under `g`, a
    /// hold of `inner` that it ends (the caller's, when it took the fault under it).
    pub(super) fn prepare_in(&self, g: InnerGuard<'_>, ask: &Ask, lead: bool) -> Result<Prep> {
        let Ask {
            addr,
            write,
            limit,
            within,
            nowait,
        } = *ask;
        // The region's adaptive window before this resolution planned with it.
        let mut saved = None;
        let mut g = g;
        let (h, addr, target) = {
            if g.dead {
                return Err(ENODEV);
            }
            let vpn = addr >> PAGE_SHIFT;
            // What this resolution needs of `map`, in one section: whether the mirror maps the
            // page, the translation budget and its room (for the plan and the block), and the
            // invalidation log's mark (for the fault-in).
            let (mirrored, budget, room, mark) = {
                let m = self.map.lock();
                let limit = m.budget.bound();
                (
                    m.mirror.covers(vpn, write),
                    limit,
                    limit.saturating_sub(m.mirror.len()),
                    m.inval.mark(),
                )
            };
            if g.pages.covers(vpn, write) || mirrored {
                // Already resolved: both fault sources reported it, or map-ahead mapped it
                // meanwhile. In map-ahead's last step the engine overtook the mapper: it takes
                // a lead past the step (what it can at once; else it goes on, and faults there
                // again if the mapper is still behind).
                let done = (vpn + 1) << PAGE_SHIFT;
                let Some(next) = lead.then(|| lead_start(&mut g, vpn, write)).flatten() else {
                    return Ok(Prep::Done(done));
                };
                return Ok(Prep::Lead {
                    next: next << PAGE_SHIFT,
                    done,
                });
            }
            if g.pages.has(vpn) {
                // Pinned read-only by a pin region, which owns the page's mapping: writable
                // once a writable region covers it (Documentation/abi.rst, "Modes"); a page the
                // process cannot write either (EFAULT from the pin) or that no writable region
                // covers is EACCES.
                drop(g);
                if nowait {
                    // Pinning may sleep on the mm.
                    return Err(WOULD_BLOCK);
                }
                match self.sync_pin_rights(vpn, vpn + 1) {
                    Ok(()) | Err(EFAULT) => {}
                    Err(e) => return Err(e),
                }
                let g = self.inner.lock();
                if g.pages.covers(vpn, write) {
                    return Ok(Prep::Done((vpn + 1) << PAGE_SHIFT));
                }
                // Unpinned meanwhile: look again (`retry_lost_region`).
                return Err(if g.pages.has(vpn) { EACCES } else { ENOENT });
            }
            let not_pinned = |r: &crate::exanest_core::region::Region| r.mode != abi::MODE_PIN;
            let one = Range::new(addr, 1, u64::MAX)?;
            let inner = &mut *g;
            let (r, addr) = match within {
                // The copy's own region, which it holds: it cannot go during the fault-in,
                // unlike an overlapping one. (A pinned one cannot fault; others are looked up.)
                Within::Region(h) => (
                    inner
                        .regions
                        .find_own_mut(Some(h), &one, access(write), not_pinned)?,
                    addr,
                ),
                Within::Any | Within::Remote => (
                    inner
                        .regions
                        .find_own_mut(None, &one, access(write), not_pinned)?,
                    addr,
                ),
                Within::Page => {
                    let (h, addr) = inner.regions.find_in_page(
                        addr,
                        PAGE_SIZE as u64,
                        access(write),
                        not_pinned,
                    )?;
                    (inner.regions.get_mut(h).ok_or(EFAULT)?, addr)
                }
            };
            let h = r.handle;
            let notifier = super::notifier_in(&inner.notifiers, h)
                .ok_or(EFAULT)?
                .clone();
            // The end of the transfer in this direction; for an IOMMU report, the one of the
            // copy that holds the page, if one does.
            let end = match limit {
                u64::MAX => inner.chans.copy_end(vpn << PAGE_SHIFT, write),
                end => end,
            };
            // Pages of map-ahead this fault overtook (the core's `Ahead::lead`): only a region
            // mapped ahead has a job to overtake (`plan_ahead`; a window its owner chose never
            // has).
            let overtook = if r.map_ahead {
                inner
                    .ahead
                    .lead(h, write, vpn)
                    .filter(|&(first, _)| first == vpn)
                    .map(|(_, n)| n)
            } else {
                None
            };
            let (window, strided) = if r.window == abi::WINDOW_ADAPTIVE {
                // The pages the transfer touches from the fault on.
                let run = match end {
                    u64::MAX => u64::MAX,
                    end => end.div_ceil(PAGE_SIZE as u64).saturating_sub(vpn).max(1),
                };
                // A resolution handed to the fault thread plans again there: as if this one
                // had not (restored below).
                saved = Some(r.adapt);
                let starts = !r.adapt.continues(vpn);
                let plan = r.adapt.plan_for(vpn, run);
                // A prediction never evicts (as map-ahead): the stride points that fit in the
                // budget's room, or none.
                let points = room / plan.run;
                let strided = Some(Plan {
                    end: plan.end.min(
                        plan.first
                            .saturating_add((points.max(1) - 1) * plan.stride + plan.run),
                    ),
                    ..plan
                })
                .filter(Plan::is_strided);
                // A fault that overtook map-ahead takes a lead on it, within the transfer.
                // The first fault of a long transfer maps a first stretch before its RESUME.
                let lead = match (strided, r.map_ahead, overtook) {
                    (None, true, Some(n)) => n.min(run),
                    (None, true, None) if starts && within != Within::Remote => {
                        ahead::first_window(run)
                    }
                    _ => 0,
                };
                // A window takes at most a quarter of the budget: the engine needs the pages
                // of the transfer's other side mapped too.
                let window = (plan.run.max(lead) - 1).min((budget / 4).saturating_sub(1));
                if strided.is_none() {
                    // A stream goes on from the window it got (a first stretch or a lead).
                    r.adapt.widened(window);
                }
                (window, strided)
            } else {
                (u64::from(r.window), None)
            };
            // A huge page resolved whole takes a block of the budget: not when a window
            // could not (a quarter of it), nor when the window asked is the page alone.
            let blocks = strided.is_none() && r.window != 0 && budget / 4 >= BLOCK_PAGES;
            let target = FaultTarget {
                handle: h,
                region: r.range,
                notifier,
                window,
                limit,
                strided,
                blocks,
                nowait,
                mark: Some(mark),
            };
            // The lead is this fault's: the mapper goes on past it.
            if overtook.is_some() && target.window > 0 {
                g.ahead.claim(h, write, vpn + target.window + 1);
            }
            (h, addr, target)
        };
        Ok(Prep::Fault(Pending {
            h,
            addr,
            write,
            target,
            saved,
        }))
    }

    /// A resolution's second half, after the fault-in and map of `p` gave `res`: the end of
    /// what was resolved, the pages mapped, and those of them past the faulting pages
    /// (touch-ahead's). Handed off ([`WOULD_BLOCK`]), the region's adaptive window goes back
    /// to what it was before `p` planned with it (the fault thread plans again).
    pub(super) fn finish(&self, p: &Pending, res: Result<(u64, u64, u64)>) -> Result<u64> {
        let (end, mapped, ahead) = match res {
            Err(e) => {
                if e == WOULD_BLOCK {
                    self.restore_adapt(p);
                }
                return Err(e);
            }
            Ok(r) => r,
        };
        let mut g = self.inner.lock();
        g.chans.counters.touch_ahead_pages += ahead;
        if let Some(r) = g.regions.get_mut(p.h) {
            r.pages_resolved += mapped;
            r.adapt.resolved(end >> PAGE_SHIFT);
        }
        Ok(end)
    }

    /// The region's adaptive window as it was before `p` planned with it.
    fn restore_adapt(&self, p: &Pending) {
        if let Some(adapt) = p.saved {
            if let Some(r) = self.inner.lock().regions.get_mut(p.h) {
                r.adapt = adapt;
            }
        }
    }

    /// Fault in the window at `addr` and map it, but for the pages an invalidation touched
    /// meanwhile (they fault again when the engine gets there); start over only when one
    /// touched the faulting page itself (at most [`MAX_RETRIES`] times in a row, then EAGAIN:
    /// an invalidation elsewhere in the region is progress, not a retry), and while page
    /// tables cannot be allocated
    /// under `map` (reclaiming in between, at most [`MAX_RETRIES`] times, then ENOMEM).
    /// Returns the end of what was faulted in and the pages newly mapped; `rec` gets the
    /// times of the first fault-in's start, the last one's end and the map. The region is looked
    /// up again under `inner` before anything is mapped: if it was deregistered meanwhile
    /// (deregistration unmaps under `inner` too), nothing is mapped and the result is ENOENT.
    /// Called with no driver lock held (resolver, prefault, advise).
    pub(super) fn fault_and_map(
        &self,
        addr: u64,
        write: bool,
        target: &FaultTarget,
        rec: &mut Record,
        early: Option<&mut Early<'_>>,
    ) -> Result<(u64, u64)> {
        self.fault_and_map_with(target, &[addr >> PAGE_SHIFT], rec, early, |out| {
            odp::fault_in(&self.mm, addr, write, target, out)
        })
    }

    /// [`Process::fault_and_map`] with the fault-in `fault_in`, for the faults at pages
    /// `faulting` (one, or a batch's): an invalidation of any of them starts over.
    pub(super) fn fault_and_map_with(
        &self,
        target: &FaultTarget,
        faulting: &[u64],
        rec: &mut Record,
        mut early: Option<&mut Early<'_>>,
        mut fault_in: impl FnMut(&mut odp::Faulted) -> Result,
    ) -> Result<(u64, u64)> {
        let mut f = odp::Faulted::new();
        let mut raced = 0;
        let mut nomem = 0;
        let mut nodes = Nodes::new();
        let mut planned = target.mark;
        loop {
            // Before the fault-in: the invalidations from here on are the ones that may have
            // changed what it finds.
            let mark = match planned.take() {
                Some(mark) => mark,
                None => self.map.lock().inval.mark(),
            };
            let t0 = ffi::stamp_ns();
            rec.stamp(Step::FaultIn, t0);
            fault_in(&mut f)?;
            let t1 = ffi::stamp_ns();
            rec.set(Step::FaultedIn, t1);
            // The mirror's nodes this mapping takes, reserved without a lock (as many as the
            // mirror lacks, looked at under the locks, then again if it lacks more). A lone
            // page is mapped first: it takes a node only in a 2 MiB span with nothing mapped
            // yet, and then maps nothing (ENOMEM, `Mirror::map_current`) and is mapped again
            // once one is reserved; a lookup of its span before every map cost 54 of a lone
            // fault's 3,740 instructions (`make profile`).
            let lone = f.is_lone();
            let (mut g, mut m, res) = loop {
                let g = self.inner.lock();
                if g.dead {
                    return Err(ENODEV);
                }
                // Still registered, with the notifier the pages were faulted in under.
                if !g.has_notifier(target.handle, &target.notifier) {
                    return Err(ENOENT);
                }
                let mut m = self.map.lock();
                let mut need = if lone { 0 } else { m.mirror.nodes_needed(&f) };
                if nodes.len() >= need {
                    // None reserved: a lone page's ENOMEM may be its lack of a node (once; a
                    // node reserved, ENOMEM is the page tables', reclaimed below).
                    let unreserved = nodes.is_empty();
                    let pages = &g.pages;
                    let res = odp::map_faulted(
                        &mut m,
                        &target.notifier,
                        &f,
                        faulting,
                        &mut nodes,
                        |vpn| pages.has(vpn),
                        mark,
                    );
                    need = match res {
                        Err(e) if e == ENOMEM && lone && unreserved => m.mirror.nodes_needed(&f),
                        _ => 0,
                    };
                    if need == 0 {
                        break (g, m, res);
                    }
                }
                drop(m);
                drop(g);
                odp::reserve_nodes(&mut nodes, need)?;
            };
            // Mapped: the taken fault's answer first, then the translation budget's
            // bookkeeping (which may evict other pages), still under `map`.
            let mapped = match res {
                Ok(Some(n)) => {
                    let t2 = ffi::stamp_ns();
                    rec.set(Step::Mapped, t2);
                    if let Some(e) = early.as_deref_mut() {
                        e.answer(&mut g, rec);
                    }
                    let evicted = m.budget.evicted().0;
                    odp::account_mapped(&mut m, &f);
                    let (evicted, victim) =
                        (m.budget.evicted().0 - evicted, m.budget.last_victim());
                    drop(m);
                    self.queue_evicted(&mut g, evicted, victim);
                    Some((n, t2))
                }
                _ => {
                    drop(m);
                    None
                }
            };
            g.chans
                .latency
                .fault_in
                .record(t1.saturating_sub(t0).div_ceil(1000));
            match res {
                Ok(Some(_)) => {
                    let (n, t2) = mapped.unwrap_or_default();
                    rec.pages = rec.pages.saturating_add(n.try_into().unwrap_or(u32::MAX));
                    g.chans
                        .latency
                        .map
                        .record(t2.saturating_sub(t1).div_ceil(1000));
                    g.chans.counters.pages_resolved += n;
                    return Ok((f.end(), n));
                }
                Ok(None) => {
                    raced += 1;
                    if raced >= MAX_RETRIES {
                        return Err(EAGAIN);
                    }
                }
                Err(e) if e == ENOMEM => {
                    nomem += 1;
                    if target.nowait {
                        // Reclaim is the fault thread's.
                        return Err(WOULD_BLOCK);
                    }
                    if nomem >= MAX_RETRIES {
                        return Err(ENOMEM);
                    }
                    drop(g);
                    reclaim_for_tables();
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Where a fault at page `vpn` (already mapped) takes its lead on map-ahead (the core's
/// `Ahead::lead`): the first page of it, if any.
fn lead_start(g: &mut super::Inner, vpn: u64, write: bool) -> Option<u64> {
    // Every fault's second report finds its page mapped: with no job (a window its owner
    // chose, say) there is no region to look up.
    if g.ahead.is_empty() {
        return None;
    }
    let one = Range::new(vpn << PAGE_SHIFT, 1, u64::MAX).ok()?;
    let not_pinned = |r: &crate::exanest_core::region::Region| r.mode != abi::MODE_PIN;
    let h = g.regions.find_with(&one, access(write), not_pinned).ok()?;
    if g.regions
        .get(h)
        .is_none_or(|r| !r.map_ahead || r.window != abi::WINDOW_ADAPTIVE)
    {
        return None;
    }
    g.ahead
        .lead(h, write, vpn)
        .map(|(first, _)| first)
        .filter(|&f| f > vpn)
}
