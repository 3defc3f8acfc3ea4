// SPDX-License-Identifier: GPL-2.0-only

//! The translation budget of a process: the most pages its on-demand mirror (prefault and
//! on-demand regions) keeps mapped in the IOMMU. Past it, the least recently faulted runs are
//! unmapped (`iommu_unmap` syncs the IOTLB) and fault in again when the engine next uses them.
//! Pinned pages are not the mirror's: they count against RLIMIT_MEMLOCK and never go. The order
//! of runs and the choice of victims is the core's `budget`, tested on the host.
//!
//! A `Budget` lives under `Process::map` beside the mirror (odp.rs's `MapState`): nothing here
//! allocates (the run list is allocated with the process). Lock order: process.rs.

use crate::exanest_core::budget::{merge_span, over, Run, RunLru};
use crate::mm::iommu::IoPageTable;
use crate::mm::mirror::Mirror;
use kernel::{page::PAGE_SIZE, prelude::*};

/// Runs remembered: a fault-in maps one run (the faulting page and its touch-ahead, up to
/// 512 pages), and a run that touches an older one is merged into it up to 512 pages (less
/// under a small budget: the core's `merge_span`), so 1024 runs follow at least 4 MiB of
/// scattered single-page faults and up to 2 GiB of streams; the pages of older runs stay
/// mapped, out of the budget's reach, until the mm or a deregistration unmaps them. Recording
/// a run moves the index of those after it (sorted by address), so they are kept few.
const RUNS: usize = 1024;

/// The budget and what it did.
pub(crate) struct Budget {
    /// Most pages the mirror keeps mapped.
    pub(super) limit: u64,
    runs: KBox<RunLru<RUNS>>,
    /// Pages evicted so far.
    pub(super) evicted_pages: u64,
    /// Evictions so far (each fault-in or budget change that unmapped something counts once).
    pub(super) evictions: u64,
    /// Start of the last run evicted (for the queue's event, userq.rs).
    pub(super) last_victim: u64,
}

impl Budget {
    /// A budget of `limit` pages.
    pub(crate) fn new(limit: u64) -> Result<Self> {
        let mut b = Budget {
            limit,
            runs: KBox::new(RunLru::new(), GFP_KERNEL_ACCOUNT)?,
            evicted_pages: 0,
            evictions: 0,
            last_victim: 0,
        };
        b.set_limit(limit);
        Ok(b)
    }

    /// Unmap run `r` from the mirror; returns the pages that went.
    fn unmap(mirror: &mut Mirror, dom: &impl IoPageTable, r: Run) -> u64 {
        let before = mirror.len();
        mirror.unmap_range(dom, r.0, r.1);
        before - mirror.len()
    }

    /// The most pages the mirror may keep mapped.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// The most pages the mirror may keep mapped, `u64::MAX` with no budget (a limit of 0:
    /// the module parameter `budget_pages=0`).
    pub(crate) fn bound(&self) -> u64 {
        if self.limit == 0 {
            u64::MAX
        } else {
            self.limit
        }
    }

    /// Set the limit (`BUDGET`), and the span up to which touching runs merge with it (the
    /// core's `merge_span`); [`Budget::enforce`] applies it.
    pub(crate) fn set_limit(&mut self, pages: u64) {
        self.limit = pages;
        self.runs
            .set_merge_max(merge_span(pages) * PAGE_SIZE as u64);
    }

    /// Pages evicted so far, and runs evicted.
    pub(crate) fn evicted(&self) -> (u64, u64) {
        (self.evicted_pages, self.evictions)
    }

    /// The address of the last run evicted.
    pub(crate) fn last_victim(&self) -> u64 {
        self.last_victim
    }

    /// Evict the least recently faulted runs until the mirror is within the budget (never the
    /// newest run).
    pub(crate) fn enforce(&mut self, mirror: &mut Mirror, dom: &impl IoPageTable) {
        let mut gone = 0;
        while over(mirror.len(), self.limit) {
            let Some(r) = self.runs.evict() else {
                break;
            };
            let pages = Self::unmap(mirror, dom, r);
            if pages > 0 {
                self.last_victim = r.0;
            }
            gone += pages;
        }
        self.count(gone);
    }

    /// The fault path mapped run `[start, end)`: remember it, then keep within the budget.
    pub(crate) fn mapped(
        &mut self,
        mirror: &mut Mirror,
        dom: &impl IoPageTable,
        start: u64,
        end: u64,
    ) {
        // A run that falls off the list is forgotten, not evicted (the core's budget.rs).
        let _ = self.runs.push((start, end));
        self.enforce(mirror, dom);
    }

    fn count(&mut self, pages: u64) {
        if pages > 0 {
            self.evicted_pages += pages;
            self.evictions += 1;
        }
    }

    /// The mirror was emptied (teardown): no run is mapped any more.
    pub(crate) fn clear(&mut self) {
        self.runs.clear();
    }
}
