// SPDX-License-Identifier: GPL-2.0-only

//! The fault path, top to bottom:
//!
//! 1. **SMMU handler** (handler.rs): called by arm-smmu-v3 (with this project's patch) from its
//!    event thread, or by arm-smmu from hard-IRQ context. It only records the page in the
//!    process's preallocated fault queue and asks for it to be served: the engine's report of
//!    the same fault normally comes within microseconds and its interrupt thread serves both;
//!    a timer wakes the fault thread for reports still queued 50 us later.
//! 2. **Queue**: the fault queue (deduplicated, no allocation), and the engine's own reports of
//!    channels in fault-wait, which cover SMMU events that were lost (queue overflow, rate
//!    limits). The engine's reports go through one state machine whatever the faulting
//!    transfer's origin, a copy, a user-level queue transfer or a remote op's receive
//!    ([`machine`], deciding with the core's `faultsm`).
//! 3. **Resolver** (`Process::resolve`, resolve.rs), in the worker: find the region (EFAULT if none,
//!    EACCES if it lacks the access); `mmget_not_zero` (EFAULT once the process is gone); under
//!    the mmap read lock check the VMA (EACCES); plan a touch-ahead window inside the VMA, the
//!    region and the transfer; fault it in with HMM (odp.rs); under `Process::map`, retry if
//!    the notifier sequence moved, else map the pages.
//! 4. **Resume or NACK** (`Process::answer_fault`, resolve.rs, and [`Faults::end`]): the channel
//!    retransmits from the faulting offset, or its transfer ends with the resolver's errno: a
//!    copy's through the channel state machine (channel.rs), a queue transfer's in its
//!    completion, a receive's at the remote sender.
//!
//! The engine's interrupt thread serves the faults it sees itself when it can do so without
//! sleeping on the mm (`Process::serve`, resolve.rs), and hands the others over.
//! The worker is the process's fault thread (ffi.rs, its work in resolve.rs), not a work item: fault-in may sleep as long
//! as the mm wants (userfaultfd, FUSE), and teardown stops the thread, which makes such a sleep
//! end (SIGKILL to the thread) instead of waiting for it. No driver lock is held across
//! fault-in; `inner` and `map` are taken only around the table lookups and the mapping, where
//! the region is looked up again (order: process.rs). Retries are bounded: a fault that keeps
//! losing to invalidations ends with EAGAIN, and page tables that cannot be allocated after
//! reclaim with ENOMEM.

pub(crate) mod handler;
pub(crate) mod log;
mod machine;

pub(crate) use machine::{Ended, Faults};

use crate::exanest_core::{abi, faultsm::Origin};

/// Regions per file (`ENOSPC` past it).
pub(crate) const MAX_REGIONS: usize = 64;
/// Deregistered regions whose faults the handler still claims (process.rs, `Inner::gone`).
pub(crate) const GONE_CLAIMS: usize = 8;
/// The ranges the handler claims faults in: the regions, and the last deregistered ones.
pub(crate) const CLAIMS: usize = MAX_REGIONS + GONE_CLAIMS;
/// Faults the IOMMU fault handler can queue before the engine's own reports take over.
pub(crate) const FAULT_QUEUE: usize = 64;
use kernel::prelude::*;

/// The transfer a fault belongs to, as the process knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Transfer {
    /// How the fault state machine tells it apart from the next.
    pub(crate) origin: Origin,
    /// End (exclusive) of the bytes the transfer still accesses in the faulting direction.
    pub(crate) limit: u64,
    /// The region to resolve it in.
    pub(crate) within: Within,
}

/// Which region a fault is resolved in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Within {
    /// The region of the copy that faulted (the engine's report), which the copy holds; any
    /// region the address is in if that one does not cover it.
    Region(u32),
    /// Any region the address is in: a queue transfer's fault (the engine's report names no
    /// region).
    Any,
    /// Any region the address is in, for a remote op's fault at this receiver. Its first fault
    /// maps no first stretch before the RESUME ([`crate::exanest_core::ahead::FIRST`]): the
    /// sender waits for that answer, and the receiver's map-ahead and look-ahead map the op.
    Remote,
    /// Any region that overlaps the page at the address: the IOMMU's report, whose address is
    /// the start of the faulting page, not the faulting byte, so a region that begins inside
    /// the page counts.
    Page,
}

/// A resolution in an interrupt thread (`Process::serve_inline`, resolve.rs) stopped where it
/// would have slept on the mm, or reclaimed: the fault thread resolves the fault instead. Never
/// leaves the driver.
pub(crate) const WOULD_BLOCK: Error = EINPROGRESS;

/// Attempts of `Process::fault_and_map` (resolve.rs) against invalidations, and against failed atomic
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
    use crate::exanest_core::abi::Range;
    use crate::exanest_core::fault::touch_ahead;
    use crate::process::DEFAULT_WINDOW;
    use kernel::page::PAGE_SHIFT;

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
            initiator: None,
            map_ahead: true,
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
