// SPDX-License-Identifier: GPL-2.0-only

//! Batched resolution (the core's `batch`): the faults a server finds on several channels of
//! the process at once are taken together; those in one region whose windows lie close
//! together are resolved by one fault-in over their span (odp.rs's `fault_in_batch`: one mmap
//! lock, one HMM walk, one notifier sequence) and one map under one lock, then each is
//! answered as it would have been alone. A queue's transfers and receives in flight stop on
//! neighbouring pages together. Faults of the process's other contexts (another open file) are
//! another server's. No lock of its own: `Process::inner` and `Process::map` as resolve.rs
//! takes them (lock order: process.rs).

use crate::exanest_core::{
    batch::batch_len,
    fault::touch_ahead,
    regs::FaultCause,
    stamps::{Record, Step},
};
use crate::fault::WOULD_BLOCK;
use crate::mm::odp::{self, Member};
use crate::process::resolve::{Ask, Pending, Prep, Served, Taken};
use crate::process::{InnerGuard, Process};
use core::sync::atomic::Ordering;
use kernel::{page::PAGE_SHIFT, prelude::*, sync::Arc};

/// Faults taken at once (their records on the heap, [`Process::serve_batch`]); the rest of the
/// channels pending wait for the next round.
const BATCH_FAULTS: usize = 8;

/// How serving several channels went ([`Process::serve_channels`]).
pub(super) struct Channels {
    /// A fault was answered.
    pub(super) answered: bool,
    /// A resolution would have slept: its fault, and the channels not taken yet, are the fault
    /// thread's.
    pub(super) handed_off: bool,
}

impl Process {
    /// Serve the faults of the channels in `pending`, [`BATCH_FAULTS`] at a time: take them,
    /// resolve them (together where the core's `batch_len` says), answer each. A fault found
    /// alone (the usual case, also when a scan looks at every channel) is served as alone,
    /// with none of a batch's bookkeeping: taken and planned under one hold of `inner`, the
    /// caller's `held` if it holds it (it noted the channels under it), which this ends.
    pub(super) fn serve_channels(
        &self,
        pending: u32,
        nowait: bool,
        held: Option<InnerGuard<'_>>,
    ) -> Channels {
        let mut out = Channels {
            answered: false,
            handed_off: false,
        };
        let mut rest = pending;
        let mut held = held;
        while rest != 0 {
            let n = rest.trailing_zeros();
            rest &= !(1 << n);
            let mut g = held.take().unwrap_or_else(|| self.inner.lock());
            // Served in place when alone: a taken fault is not copied out of the option.
            let mut first = self.take_fault_in(&mut g, n);
            let Some(alone) = first.as_mut() else {
                continue;
            };
            // Others to take: each under its own hold (`take_next`).
            let g = if rest == 0 {
                Some(g)
            } else {
                drop(g);
                None
            };
            let handed_off = match self.take_next(&mut rest) {
                None => self.serve_alone(alone, nowait, &mut out, g),
                Some(second) => {
                    drop(g);
                    let Some(first) = first.take() else {
                        continue;
                    };
                    self.serve_batch(first, second, &mut rest, nowait, &mut out)
                }
            };
            if handed_off {
                out.handed_off = true;
                self.defer_channels(rest);
                return out;
            }
        }
        out
    }

    /// Resolve and answer taken fault `t` alone, planned under `held` if the caller holds
    /// `inner`. Returns whether it was handed off.
    #[inline(always)]
    fn serve_alone(
        &self,
        t: &mut Taken,
        nowait: bool,
        out: &mut Channels,
        held: Option<InnerGuard<'_>>,
    ) -> bool {
        let res = self.resolve_taken(t, nowait, held);
        let served = self.answer_fault(t, res, nowait);
        out.answered |= served == Served::Answered;
        served == Served::HandedOff
    }

    /// A server hands off: the channels `mask`, not taken yet, are the fault thread's too:
    /// pending again if detected, noted again if found by a scan.
    fn defer_channels(&self, mask: u32) {
        if mask == 0 {
            return;
        }
        let mut g = self.inner.lock();
        for m in (0..32).filter(|m| mask & (1 << m) != 0) {
            g.engine_faults.defer(m);
        }
        drop(g);
        self.irq_faults.fetch_or(mask, Ordering::SeqCst);
    }

    /// The fault of the first channel left in `rest` that holds one, taken (the channels
    /// looked at leave `rest`).
    fn take_next(&self, rest: &mut u32) -> Option<Taken> {
        while *rest != 0 {
            let n = rest.trailing_zeros();
            *rest &= !(1 << n);
            if let Some(t) = self.take_fault(n) {
                return Some(t);
            }
        }
        None
    }

    /// Serve `first`, `second` and the faults of up to [`BATCH_FAULTS`] - 2 more channels of
    /// `rest` together: their state on the heap (a few KiB, not on the interrupt thread's
    /// stack), allocated without sleeping; should that fail, `first` and `second` are served
    /// alone. Returns whether one was handed off.
    #[inline(never)]
    fn serve_batch(
        &self,
        first: Taken,
        second: Taken,
        rest: &mut u32,
        nowait: bool,
        out: &mut Channels,
    ) -> bool {
        let mut handed_off = false;
        let Ok(mut batch) = KVec::<Entry>::with_capacity(BATCH_FAULTS, GFP_NOWAIT) else {
            for mut t in [first, second] {
                handed_off |= self.serve_alone(&mut t, nowait, out, None);
            }
            return handed_off;
        };
        let mut next = [Some(first), Some(second)].into_iter().flatten();
        while batch.len() < BATCH_FAULTS {
            let Some(t) = next.next().or_else(|| self.take_next(rest)) else {
                break;
            };
            // Within the capacity reserved: no allocation.
            if let Err(mut e) = batch.push_within_capacity(Entry::new(t)) {
                handed_off |= self.serve_alone(&mut e.0.t, nowait, out, None);
            }
        }
        self.resolve_together(&mut batch, nowait);
        for e in batch.iter_mut() {
            match self.answer_fault(&mut e.t, e.res, nowait) {
                Served::Answered => out.answered = true,
                Served::HandedOff => handed_off = true,
            }
        }
        handed_off
    }

    /// Resolve the faults of `batch`: each planned as alone, then those planned to fault in,
    /// in one region and direction, batched by the core's `batch_len` (by address), each batch
    /// with one fault-in and one map; the others alone.
    fn resolve_together(&self, batch: &mut [Entry], nowait: bool) {
        for e in batch.iter_mut() {
            let rep = e.t.f.report;
            if rep.fault_cause != FaultCause::Translation {
                e.res = Err(EIO);
                continue;
            }
            let ask = Ask {
                addr: rep.fault_addr,
                write: rep.fault_write,
                limit: Self::window_limit(&e.t),
                within: e.t.within,
                nowait,
            };
            e.res = match self.prepare_in(self.inner.lock(), &ask, true) {
                Ok(Prep::Fault(p)) => {
                    e.plan = Some(p);
                    continue;
                }
                Ok(Prep::Done(done)) => Ok(done),
                Ok(Prep::Lead { next, done }) => {
                    let lead = Ask { addr: next, ..ask };
                    Ok(self
                        .resolve_once(&lead, false, &mut e.t.rec, None, None)
                        .unwrap_or(done))
                }
                // The region went meanwhile: alone, looked up again.
                Err(e2) if e2 == ENOENT => self.resolve(ask, &mut e.t.rec, None, None),
                Err(e2) => Err(e2),
            };
        }
        // The planned ones by region, direction and address.
        let mut order = [0usize; BATCH_FAULTS];
        let mut m = 0;
        for (i, e) in batch.iter().enumerate() {
            if e.plan.is_some() && m < BATCH_FAULTS {
                order[m] = i;
                m += 1;
            }
        }
        let key = |i: &usize| {
            batch[*i]
                .plan
                .as_ref()
                .map_or((0, false, 0), |p| (p.h, p.write, p.addr))
        };
        order[..m].sort_unstable_by_key(key);
        let mut at = 0;
        while at < m {
            let len = Self::batch_at(batch, &order[at..m]);
            if len >= 2 {
                self.resolve_batch(batch, &order[at..at + len]);
            } else {
                let e = &mut batch[order[at]];
                if let Some(p) = e.plan.take() {
                    e.res = self.resolve_planned(&mut e.t, p, nowait);
                }
            }
            at += len.max(1);
        }
    }

    /// How many of the planned faults `order` (sorted), from the first, one fault-in takes:
    /// those in its region and direction, with no strided plan, whose windows (within the
    /// region and their transfers: the VMA is checked by the fault-in) make one batch.
    fn batch_at(batch: &[Entry], order: &[usize]) -> usize {
        let Some(first) = order.first().and_then(|&i| batch[i].plan.as_ref()) else {
            return 0;
        };
        let mut windows = [(0u64, 0u64); BATCH_FAULTS];
        let mut n = 0;
        for &i in order {
            let Some(p) = batch[i].plan.as_ref() else {
                break;
            };
            let t = &p.target;
            if n == BATCH_FAULTS
                || p.h != first.h
                || p.write != first.write
                || !Arc::ptr_eq(&t.notifier, &first.target.notifier)
                || t.strided.is_some()
            {
                break;
            }
            windows[n] = touch_ahead(
                p.addr,
                t.window,
                PAGE_SHIFT as u32,
                &t.region,
                &t.region,
                t.limit,
            );
            n += 1;
        }
        batch_len(&windows[..n]).max(1)
    }

    /// Resolve the planned fault `p` of `t` alone (as `Process::resolve` would have).
    fn resolve_planned(&self, t: &mut Taken, p: Pending, nowait: bool) -> Result<u64> {
        let res = self.fault_and_map(p.addr, p.write, &p.target, &mut t.rec, None);
        match self.finish(&p, res.map(|(end, n)| (end, n, n.saturating_sub(1)))) {
            // The region went meanwhile: resolved anew, as alone.
            Err(e) if e == ENOENT => self.resolve_taken(t, nowait, None),
            res => res,
        }
    }

    /// Resolve the planned faults `order` of `batch` (by address) with one fault-in and one
    /// map; each gets the end of its own window. Should they not make a batch in the VMA (or
    /// the fault-in fail but for sleeping or a fatal signal), each is resolved alone, as
    /// planned.
    fn resolve_batch(&self, batch: &mut [Entry], order: &[usize]) {
        let Some(lead) = order.first().and_then(|&i| batch[i].plan.as_ref()) else {
            // Not planned (it cannot be, as `resolve_together` orders only the planned): each
            // alone, as planned.
            for &i in order {
                let e = &mut batch[i];
                if let Some(p) = e.plan.take() {
                    let nowait = p.target.nowait;
                    e.res = self.resolve_planned(&mut e.t, p, nowait);
                }
            }
            return;
        };
        let mut members = [Member {
            addr: 0,
            window: 0,
            limit: 0,
        }; BATCH_FAULTS];
        let mut faulting = [0u64; BATCH_FAULTS];
        let mut blocks = false;
        let len = order.len().min(BATCH_FAULTS);
        for (j, &i) in order[..len].iter().enumerate() {
            if let Some(p) = batch[i].plan.as_ref() {
                members[j] = Member {
                    addr: p.addr,
                    window: p.target.window,
                    limit: p.target.limit,
                };
                faulting[j] = p.addr >> PAGE_SHIFT;
                blocks |= p.target.blocks;
            }
        }
        let mut wins = [(0u64, 0u64); BATCH_FAULTS];
        let mut rec = Record::default();
        let (write, nowait) = (lead.write, lead.target.nowait);
        let res = self.fault_and_map_with(&lead.target, &faulting[..len], &mut rec, None, |out| {
            odp::fault_in_batch(
                &self.mm,
                write,
                &lead.target,
                &members[..len],
                blocks,
                &mut wins[..len],
                out,
            )
        });
        // Handed back, each restores the adaptive window it planned with: the last planned
        // first, so that the region gets the window from before the batch.
        let back = matches!(res, Err(e) if e == WOULD_BLOCK || e == EINTR);
        for k in 0..len {
            let j = if back { len - 1 - k } else { k };
            let e = &mut batch[order[j]];
            let Some(p) = e.plan.take() else {
                continue;
            };
            e.res = match res {
                Ok((_, mapped)) => {
                    // The pages mapped, and those past the faults, are the batch's: counted
                    // once, with its first fault.
                    let (n, ahead) = match j {
                        0 => (mapped, mapped.saturating_sub(len as u64)),
                        _ => (0, 0),
                    };
                    for step in [Step::FaultIn, Step::FaultedIn, Step::Mapped] {
                        if let Some(at) = rec.at(step) {
                            e.t.rec.set(step, at);
                        }
                    }
                    e.t.rec.pages = if j == 0 { rec.pages } else { 0 };
                    e.t.rec.batch = len as u8;
                    self.finish(&p, Ok((wins[j].1 << PAGE_SHIFT, n, ahead)))
                }
                Err(err) if err == WOULD_BLOCK || err == EINTR => self.finish(&p, Err(err)),
                Err(_) => self.resolve_planned(&mut e.t, p, nowait),
            };
        }
    }
}

/// A fault of a batch: taken, then planned, then resolved.
struct Entry {
    t: Taken,
    /// Its resolution as planned, until resolved.
    plan: Option<Pending>,
    /// The resolution's end, or its error.
    res: Result<u64>,
}

impl Entry {
    fn new(t: Taken) -> Self {
        Entry {
            t,
            plan: None,
            res: Err(EIO),
        }
    }
}
