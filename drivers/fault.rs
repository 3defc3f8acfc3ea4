// SPDX-License-Identifier: GPL-2.0-only

//! The fault path, top to bottom:
//!
//! 1. **SMMU handler** (handler.rs): called by arm-smmu-v3 (with this project's patch) from its
//!    event thread, or by arm-smmu from hard-IRQ context. It only records the page in the
//!    process's preallocated fault queue and kicks the worker.
//! 2. **Queue**: the fault queue (deduplicated, no allocation), and the engine's own reports of
//!    channels in fault-wait (channel.rs), which cover SMMU events that were lost (queue
//!    overflow, rate limits).
//! 3. **Resolver** ([`Process::resolve`]), in the worker: find the region (EFAULT if none,
//!    EACCES if it lacks the access); `mmget_not_zero` (EFAULT once the process is gone); under
//!    the mmap read lock check the VMA (EACCES); plan a touch-ahead window inside the VMA, the
//!    region and the transfer; fault it in with HMM (odp.rs); under `Process::map`, retry if
//!    the notifier sequence moved, else map the pages.
//! 4. **Resume or NACK** ([`Process::service_channel`]): the channel retransmits from the
//!    faulting offset, or its copy ends with the resolver's errno (channel.rs decides).
//!
//! The worker is the process's fault thread (ffi.rs), not a work item: fault-in may sleep as long
//! as the mm wants (userfaultfd, FUSE), and teardown stops the thread, which makes such a sleep
//! end (SIGKILL to the thread) instead of waiting for it. No driver lock is held across
//! fault-in; `inner` and `map` are taken only around the table lookups and the mapping, where
//! the region is looked up again (order: process.rs). Retries are bounded: a fault that keeps
//! losing to invalidations ends with EAGAIN, and page tables that cannot be allocated after
//! reclaim with ENOMEM.

use crate::channel::micros;
use crate::exanest_core::{
    abi::{self, Range},
    regs::FaultCause,
};
use crate::ffi;
use crate::odp::{self, FaultTarget};
use crate::process::Process;
use kernel::{
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::Arc,
    time::{Instant, Monotonic},
};

/// The fault thread's work (ffi.rs `FaultThread`), called by the shim after each kick.
///
/// # Safety
///
/// `token` is the `Process` the thread was started for (process.rs); the thread is stopped
/// before the process is freed, so it is live for the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn exanest_rust_fault_work(token: *mut core::ffi::c_void) {
    // SAFETY: Per the contract, `token` points to a live `Process`.
    let process = unsafe { &*token.cast::<Process>() };
    process.service_faults();
}
ffi::check_callback!(ffi::raw::exanest_rust_fault_work, exanest_rust_fault_work);

/// Which region a fault is resolved in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Within {
    /// The region of the copy that faulted (the engine's report), which the copy holds; any
    /// region the address is in if that one does not cover it.
    Region(u32),
    /// Any region the address is in: a queue transfer's or a remote op's fault (the engine's
    /// report names no region).
    Any,
    /// Any region that overlaps the page at the address: the IOMMU's report, whose address is
    /// the start of the faulting page, not the faulting byte, so a region that begins inside
    /// the page counts.
    Page,
}

impl Process {
    /// The fault worker: resolve what the IOMMU reported, then serve every channel that the
    /// engine reported in fault-wait (every running one when IOMMU reports were lost or came
    /// without an engine report).
    fn service_faults(&self) {
        // What the thread allocates for the process is charged to the process's memory cgroup.
        let _memcg = ffi::MemcgScope::enter(&self.mm);
        loop {
            let mut busy = false;
            while let Some((f, stamp)) = self.faults.pop_stamped() {
                busy = true;
                // Errors are the channel's business: it reports the same fault.
                if self
                    .resolve(f.page, f.write, u64::MAX, Within::Page)
                    .is_ok()
                {
                    let us = ffi::ktime_ns().saturating_sub(stamp) / 1000;
                    self.inner.lock().chans.latency.handler.record(us);
                }
            }
            let all = self.faults.take_overflow() || busy;
            let (pending, queued, net, channels) = {
                let mut g = self.inner.lock();
                if g.dead {
                    return;
                }
                let queued = g.queue.take_pending(all);
                let net = core::mem::take(&mut g.net_rx) | if all { u32::MAX } else { 0 };
                (
                    g.chans.take_fault_pending(all),
                    queued,
                    net,
                    self.engine.channels,
                )
            };
            for n in 0..channels {
                // Receiver faults of remote ops (remote.rs).
                if net & (1 << n) != 0 && self.service_net_rx(n) {
                    busy = true;
                }
                if pending & (1 << n) != 0 && self.service_channel(n) {
                    busy = true;
                }
                // The user-level queue's channels (userq.rs).
                if queued & (1 << n) != 0 && self.service_queue_channel(n) {
                    busy = true;
                }
            }
            if !busy {
                return;
            }
        }
    }

    /// Resolve the fault channel `n` waits on, then resume it, or NACK it with the errno.
    /// Returns whether the channel was in fault-wait.
    fn service_channel(&self, n: u32) -> bool {
        // A channel in fault-wait has a copy on it, so its process keeps its context until the
        // decision below.
        let Some(w) = ({
            let mut g = self.inner.lock();
            let ctx = g.hw();
            ctx.and_then(|c| g.chans.fault_wait(&*c, n))
        }) else {
            return false;
        };
        let rep = w.report;
        let res = match rep.fault_cause {
            FaultCause::Translation => self.resolve(
                rep.fault_addr,
                rep.fault_write,
                w.limit,
                Within::Region(w.region),
            ),
            _ => Err(EIO),
        };
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return true;
        }
        if let Ok(one) = Range::new(rep.fault_addr, 1, u64::MAX) {
            if let Ok(h) = inner.regions.find(&one, access(rep.fault_write)) {
                if let Some(r) = inner.regions.get_mut(h) {
                    r.faults += 1;
                }
            }
        }
        if let Some(ctx) = inner.hw() {
            let (chans, mut ended) = inner.chans_releasing();
            // The decision applied is the copy's: it ends with the NACK's errno or, when the
            // engine took no command, with ENODEV (`decide` ends it). Nothing is left here.
            let _ = chans.decide(&*ctx, n, &w, res, &mut ended);
        }
        drop(g);
        self.done.notify_all();
        true
    }

    /// Make the page at `addr` reachable by the engine (read, or write too), with touch-ahead
    /// up to `limit`, in the region `within` says.
    pub(crate) fn resolve(&self, addr: u64, write: bool, limit: u64, within: Within) -> Result {
        retry_lost_region(|| self.resolve_once(addr, write, limit, within))
    }

    fn resolve_once(&self, addr: u64, write: bool, limit: u64, within: Within) -> Result {
        let (h, addr, target) = {
            let mut g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            let vpn = addr >> PAGE_SHIFT;
            if g.pages.covers(vpn, write) || self.map.lock().mirror.covers(vpn, write) {
                // Already resolved: both fault sources reported it.
                return Ok(());
            }
            if g.pages.has(vpn) {
                // Pinned read-only by a pin region, which owns the page's mapping: a device
                // write through an overlapping region is refused (Documentation/abi.rst).
                return Err(EACCES);
            }
            let not_pinned = |r: &crate::exanest_core::region::Region| r.mode != abi::MODE_PIN;
            let one = Range::new(addr, 1, u64::MAX)?;
            let (h, addr) = match within {
                // The copy's own region, which it holds: it cannot go during the fault-in,
                // unlike an overlapping one. (A pinned one cannot fault; others are looked up.)
                Within::Region(h)
                    if g.regions.get(h).is_some_and(|r| {
                        not_pinned(r)
                            && r.range.contains(&one)
                            && r.access & access(write) == access(write)
                    }) =>
                {
                    (h, addr)
                }
                Within::Region(_) | Within::Any => {
                    (g.regions.find_with(&one, access(write), not_pinned)?, addr)
                }
                Within::Page => {
                    g.regions
                        .find_in_page(addr, PAGE_SIZE as u64, access(write), not_pinned)?
                }
            };
            let notifier = g.notifier(h).ok_or(EFAULT)?;
            let r = g.regions.get_mut(h).ok_or(EFAULT)?;
            let window = if r.window == abi::WINDOW_ADAPTIVE {
                r.adapt.window_for(vpn)
            } else {
                u64::from(r.window)
            };
            let target = FaultTarget {
                handle: h,
                region: r.range,
                notifier,
                window,
                limit,
            };
            (h, addr, target)
        };
        let (end, mapped) = self.fault_and_map(addr, write, &target)?;
        let mut g = self.inner.lock();
        g.chans.counters.touch_ahead_pages += mapped.saturating_sub(1);
        if let Some(r) = g.regions.get_mut(h) {
            r.pages_resolved += mapped;
            r.adapt.resolved(end >> PAGE_SHIFT);
        }
        Ok(())
    }

    /// Fault in the window at `addr` and map it, retrying while invalidations race with it (at
    /// most [`MAX_RETRIES`] times, then EAGAIN) and while page tables cannot be allocated
    /// under `map` (reclaiming in between, at most [`MAX_RETRIES`] times, then ENOMEM).
    /// Returns the end of what was faulted in and the pages newly mapped. The region is looked
    /// up again under `inner` before anything is mapped: if it was deregistered meanwhile
    /// (deregistration unmaps under `inner` too), nothing is mapped and the result is ENOENT.
    /// Called with no driver lock held (resolver, prefault, advise).
    pub(crate) fn fault_and_map(
        &self,
        addr: u64,
        write: bool,
        target: &FaultTarget,
    ) -> Result<(u64, u64)> {
        let mut raced = 0;
        let mut nomem = 0;
        loop {
            let t0 = Instant::<Monotonic>::now();
            let f = odp::fault_in(&self.mm, addr, write, target)?;
            let fault_in_us = micros(t0);
            let t1 = Instant::<Monotonic>::now();
            let mut nodes = odp::reserve_nodes(&f)?;
            let mut g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            // Still registered, with the notifier the pages were faulted in under.
            match g.notifier(target.handle) {
                Some(n) if Arc::ptr_eq(&n, &target.notifier) => {}
                _ => return Err(ENOENT),
            }
            let mut m = self.map.lock();
            let pages = &g.pages;
            let evicted = m.budget.evicted_pages;
            let res = odp::map_faulted(&mut m, &target.notifier, &f, &mut nodes, |vpn| {
                pages.has(vpn)
            });
            let (evicted, victim) = (m.budget.evicted_pages - evicted, m.budget.last_victim);
            drop(m);
            self.queue_evicted(&mut g, evicted, victim);
            g.chans.latency.fault_in.record(fault_in_us);
            match res {
                Ok(Some(n)) => {
                    g.chans.latency.map.record(micros(t1));
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

/// Attempts of [`Process::fault_and_map`] against invalidations, and against failed atomic
/// page-table allocations.
pub(crate) const MAX_RETRIES: u32 = 8;

/// Run `attempt` (a region lookup, then a fault-in) again while it fails with ENOENT, the
/// region having gone during the fault-in (another may hold the address): at most
/// [`MAX_RETRIES`] times, then EAGAIN.
pub(crate) fn retry_lost_region<T>(mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    for _ in 1..MAX_RETRIES {
        match attempt() {
            Err(e) if e == ENOENT => {}
            r => return r,
        }
    }
    match attempt() {
        Err(e) if e == ENOENT => Err(EAGAIN),
        r => r,
    }
}

/// Make room for page tables allocated atomically under `Process::map`: allocate (and free) a
/// few pages the way that may reclaim, with no driver lock held. After it, atomic allocations
/// find free pages above the watermark again unless memory is truly exhausted.
pub(crate) fn reclaim_for_tables() {
    for _ in 0..4 {
        if kernel::page::Page::alloc_page(GFP_KERNEL).is_err() {
            break;
        }
    }
}

/// The access bit a fault in this direction needs.
pub(crate) fn access(write: bool) -> u32 {
    if write {
        abi::ACCESS_WRITE
    } else {
        abi::ACCESS_READ
    }
}

#[kunit_tests(exanest_dma_fault)]
mod tests {
    use super::*;
    use crate::exanest_core::fault::touch_ahead;
    use crate::process::DEFAULT_WINDOW;

    fn r(s: u64, l: u64) -> Range {
        Range::new(s, l, 1 << 48).unwrap()
    }

    const PS: u32 = PAGE_SHIFT as u32;

    /// A fault needs the access bit of its direction.
    #[test]
    fn access_of_direction() {
        assert_eq!(access(true), abi::ACCESS_WRITE);
        assert_eq!(access(false), abi::ACCESS_READ);
    }

    /// The default (adaptive) window, as compiled in, stops at the region's end.
    #[test]
    fn touch_ahead_stops_at_region() {
        let (first, last) = touch_ahead(
            0x20010,
            DEFAULT_WINDOW,
            PS,
            &r(0x10000, 0x100000),
            &r(0x20000, 0x3000),
            u64::MAX,
        );
        assert_eq!((first, last), (0x20, 0x23));
    }

    /// The window stops at the VMA's end, and at the rest of the transfer.
    #[test]
    fn touch_ahead_stops_at_vma_and_transfer() {
        let big = r(0, 1 << 40);
        assert_eq!(
            touch_ahead(0x5000, 100, PS, &r(0, 0x8000), &big, u64::MAX),
            (5, 8)
        );
        assert_eq!(touch_ahead(0x5000, 100, PS, &big, &big, 0x6001), (5, 7));
        // A window of 0 is the faulting page alone.
        assert_eq!(touch_ahead(0x5fff, 0, PS, &big, &big, u64::MAX), (5, 6));
    }

    /// A region registered without a window gets the adaptive one: a stream of faults
    /// through it, resolved as the resolver does (window, then `resolved` at the planned
    /// end), maps ever larger windows, bounded by the region.
    #[test]
    fn region_window_adapts_along_a_stream() {
        use crate::exanest_core::{abi::ValidReg, region::RegionTable};
        let mut t = RegionTable::<4>::new();
        let region = r(0x100_0000, 64 << PAGE_SHIFT);
        let v = ValidReg {
            range: region,
            access: abi::ACCESS_READ,
            mode: abi::MODE_ON_DEMAND,
            window: abi::WINDOW_ADAPTIVE,
        };
        let h = t.insert(&v).unwrap();
        let mut addr = region.start;
        let mut planned = KVec::new();
        while addr < region.end {
            let reg = t.get_mut(h).unwrap();
            let w = reg.adapt.window_for(addr >> PAGE_SHIFT);
            let (first, last) = touch_ahead(addr, w, PS, &region, &reg.range, u64::MAX);
            reg.adapt.resolved(last);
            planned.push(last - first, GFP_KERNEL).unwrap();
            addr = last << PAGE_SHIFT;
        }
        // 2, 4, 8, 16, 32 pages, then the 2 left in the region.
        assert_eq!(&planned[..], &[2, 4, 8, 16, 32, 2]);
    }
}
