// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Map-ahead: resume first, map the rest of the transfer after (Documentation/design.rst,
//! "Map-ahead").
//!
//! A fault is resolved with its touch-ahead window ([`crate::fault::touch_ahead`]) and
//! RESUMEd at once. What the faulting transfer still has to access past that window (up to its
//! limit: a copy's end, a remote op's end at the receiver) is then planned here as a *job*, and
//! the process's fault thread maps it in chunks of [`CHUNK`] pages while the engine runs: the
//! engine's data overlaps the resolution instead of waiting for it fault after fault, and a
//! remote sender resends one window per op instead of one per fault.
//!
//! The thread takes a chunk only when no fault waits, so a fault (the engine overtook the
//! mapper, or another transfer faulted) waits at most one chunk's mapping. A later fault of
//! the same region and direction that meets a job's range joins it: the job then never maps
//! behind that fault (the engine is past it). At most `N` jobs are kept; a new one past that
//! replaces the one planned longest ago. A chunk that fails ends its job: the engine meets the
//! error itself and the fault path reports it.
//!
//! Pages are page frame numbers of the process's address space (the IOVA is the VA).

/// Pages a job maps past the faulting window at most: the transfer faults again there and a
/// new job goes on.
pub const MAX_PAGES: u64 = 4096;

/// Pages one step of the fault thread maps at most, a step ending at a multiple of it: 512 KiB
/// of 4 KiB pages. A fault that comes meanwhile waits for the step: 128 fresh pages' fault-in,
/// where 2 MiB steps made a receiver's faults wait 385 us at p50 behind 1.1 ms of fault-in
/// (90-98 us now). Two `make evaluate` runs (eval kernel, medians of 5 runs each) against
/// 2 MiB steps: a cold 8 MiB put 7,494 -> 6,717 / 6,713 us, 1 MiB churn on demand 893 -> 794 /
/// 789 us, eight cold senders 0.89 -> 1.13 of one; but a sequential 8 MiB copy faults 4.5
/// times per MiB instead of 1.2 and takes 8,866 / 9,403 us instead of 8,914, and copies under
/// a budget half their working set pass in 6,776 / 6,070 us instead of 5,562. A step that
/// meets a transparent huge page still maps all of it, as one IOMMU block
/// ([`crate::fault::widen_to_block`]).
pub const CHUNK: u64 = 128;

/// Pages a fault that overtook the mapper maps at least before its RESUME ([`Ahead::lead`]):
/// two steps' worth (one step: a sequential 8 MiB copy into fresh memory faulted 2.0 times per
/// MiB; two: 1.62 and 1.88; exanest-bench touch-ahead, eval kernel, -icount).
pub const LEAD: u64 = 2 * CHUNK;

/// Pages the first fault of a long transfer maps before its RESUME, at least: the mapper
/// starts only once the engine runs again, and the engine is at the window's end within a few
/// microseconds, before the mapper's first step is mapped. An adaptive window that started at
/// one page took four more faults on each side to grow past that (a sequential 8 MiB copy
/// faulted at pages 0, 2, 6, 14 and 30 of its destination).
pub const FIRST: u64 = 32;

/// Pages a transfer has left from its first fault on, at least, for [`FIRST`] to apply: a
/// shorter one is RESUMEd at once as before (mapping [`FIRST`] pages first made `register` +
/// a 1 MiB copy slower).
pub const LONG: u64 = 4 * CHUNK;

/// The pages the first fault of a transfer with `run` pages left from it (`u64::MAX`: not
/// known) maps at least before its RESUME: [`FIRST`] for a long transfer, else none (the
/// touch-ahead window decides).
pub fn first_window(run: u64) -> u64 {
    if run != u64::MAX && run >= LONG {
        FIRST
    } else {
        0
    }
}

/// A step of a job: map pages `[first, first + pages)` of region `handle`, for reading, or
/// writing too when `write`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The region's handle.
    pub handle: u32,
    /// Whether the engine writes the pages.
    pub write: bool,
    /// The first page.
    pub first: u64,
    /// Pages, at least 1.
    pub pages: u64,
    /// The job's slot, for [`Ahead::failed`].
    slot: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Job {
    handle: u32,
    write: bool,
    /// The first page handed to the mapper since the job was planned or last joined past it.
    from: u64,
    /// The next page to map.
    next: u64,
    /// Past the last page to map.
    end: u64,
    /// When it was planned or last joined, on the planner's own count.
    stamp: u64,
    /// Where the engine first overtook the mapper ([`Ahead::lead`]), if it did.
    caught: Option<u64>,
}

/// The map-ahead jobs of one process.
#[derive(Clone, Copy, Debug)]
pub struct Ahead<const N: usize> {
    jobs: [Option<Job>; N],
    /// The slot the next chunk is looked for from (round robin).
    turn: usize,
    /// Plans made, as the jobs' stamps.
    clock: u64,
}

impl<const N: usize> Default for Ahead<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Ahead<N> {
    /// No job.
    pub const fn new() -> Self {
        Ahead {
            jobs: [None; N],
            turn: 0,
            clock: 0,
        }
    }

    /// A fault of region `handle` (`write`: the engine writes) was resolved up to page `done`
    /// (exclusive), and its transfer accesses pages up to `end` (exclusive): plan pages
    /// `[done, end)`, at most `cap` of them. A job of the same region and direction whose
    /// range the new one meets takes it (never going back behind `done`); else a free slot,
    /// else the slot planned longest ago. Returns whether anything is planned.
    pub fn plan(&mut self, handle: u32, write: bool, done: u64, end: u64, cap: u64) -> bool {
        let end = end.min(done.saturating_add(cap.min(MAX_PAGES)));
        if end <= done {
            return false;
        }
        self.clock += 1;
        let stamp = self.clock;
        let meets =
            |j: &Job| j.handle == handle && j.write == write && done <= j.end && end >= j.next;
        if let Some(j) = self.jobs.iter_mut().flatten().find(|j| meets(j)) {
            if done > j.next {
                j.from = done;
            }
            // The engine went back (another transfer over the range): overtaken afresh.
            if j.caught.is_some_and(|c| done <= c) {
                j.caught = None;
            }
            j.next = j.next.max(done);
            j.end = j.end.max(end);
            j.stamp = stamp;
            return true;
        }
        let slot = match self.jobs.iter().position(Option::is_none) {
            Some(i) => i,
            None => (0..N)
                .min_by_key(|&i| self.jobs[i].map_or(0, |j| j.stamp))
                .unwrap_or(0),
        };
        if let Some(s) = self.jobs.get_mut(slot) {
            *s = Some(Job {
                handle,
                write,
                from: done,
                next: done,
                end,
                stamp,
                caught: None,
            });
            return true;
        }
        false
    }

    /// The next step, up to the next multiple of `chunk` pages (at least 1 page), taken from
    /// the jobs in turn, so that transfers that fault at once are mapped ahead alike. A job
    /// whose last step this is ends.
    pub fn next(&mut self, chunk: u64) -> Option<Chunk> {
        for k in 0..N {
            let slot = (self.turn + k) % N;
            let Some(j) = self.jobs[slot].as_mut() else {
                continue;
            };
            let chunk = chunk.max(1);
            let pages = (j.end - j.next).min(chunk - j.next % chunk);
            let c = Chunk {
                handle: j.handle,
                write: j.write,
                first: j.next,
                pages,
                slot,
            };
            j.next += pages;
            if j.next >= j.end {
                self.jobs[slot] = None;
            }
            self.turn = (slot + 1) % N;
            return Some(c);
        }
        None
    }

    /// A fault at `page` of region `handle` (`write`: the engine writes) where a job is
    /// mapping: the engine overtook the mapper, at a page the job still has to map or in the
    /// step it took last, after the mapper took a step since the job was planned or joined
    /// past it. From the second time on, returns the pages the fault should map before its
    /// RESUME, as (first, count): from the job's next page (or `page`, if later) up to the
    /// step boundary at least [`LEAD`] pages on, within the job.
    ///
    /// RESUMEd after its window alone, the engine met a mapper slower than itself again a few
    /// pages on (a sequential 8 MiB copy into fresh memory: 3.1 faults/MiB); with a lead it
    /// runs on while the mapper, which never waited, goes ahead. But the engine waits for the
    /// lead, where it would have run beside the mapper, so none is taken before the mapper
    /// has shown itself the slower: not before it has worked (faults that come before it
    /// took a step are the adaptive window growing, as the thread serves faults first, and
    /// the second report of the page that planned the job, the SMMU's or the engine's, finds
    /// it mapped), nor when the engine first catches up with it within its first step (the
    /// mapper just begun). The other report of a fault that took a lead takes none. A 1 MiB
    /// read of never-touched memory (zero pages, which the mapper maps
    /// faster than the engine reads them) lost 190 us of 770 to leads taken there.
    /// `None`: no lead (a first overtaking is noted).
    pub fn lead(&mut self, handle: u32, write: bool, page: u64) -> Option<(u64, u64)> {
        let j = self.jobs.iter_mut().flatten().find(|j| {
            j.handle == handle
                && j.write == write
                && j.from < j.next
                && j.from.max(j.next.saturating_sub(CHUNK)) <= page
                && page < j.end
        })?;
        match j.caught {
            // The other report of a fault seen already (the SMMU's or the engine's).
            Some(c) if page <= c => return None,
            // The first time, within the mapper's first step.
            None if page < j.from.saturating_add(CHUNK) => {
                j.caught = Some(page);
                return None;
            }
            _ => j.caught = Some(page),
        }
        let first = page.max(j.next);
        let stop = first
            .saturating_add(LEAD)
            .div_ceil(CHUNK)
            .saturating_mul(CHUNK)
            .min(j.end);
        (stop > first).then_some((first, stop - first))
    }

    /// A fault took pages up to `end` (exclusive) of a job of region `handle` (`write`) as its
    /// lead ([`Ahead::lead`]): the job goes on past them, so that the mapper, running beside
    /// the fault's server, does not fault the same pages in again. A job left with nothing
    /// ends.
    pub fn claim(&mut self, handle: u32, write: bool, end: u64) {
        for s in self.jobs.iter_mut() {
            if let Some(j) = s
                .as_mut()
                .filter(|j| j.handle == handle && j.write == write)
            {
                if j.next < end {
                    j.next = end;
                }
                if j.next >= j.end {
                    *s = None;
                }
            }
        }
    }

    /// Step `c` failed: its job ends (if it still maps that region that way).
    pub fn failed(&mut self, c: &Chunk) {
        if let Some(s) = self.jobs.get_mut(c.slot) {
            if s.is_some_and(|j| j.handle == c.handle && j.write == c.write) {
                *s = None;
            }
        }
    }

    /// Region `handle` is gone: its jobs end.
    pub fn forget(&mut self, handle: u32) {
        for s in self.jobs.iter_mut() {
            if s.is_some_and(|j| j.handle == handle) {
                *s = None;
            }
        }
    }

    /// Every job ends.
    pub fn clear(&mut self) {
        self.jobs = [None; N];
    }

    /// Whether no job is planned.
    pub fn is_empty(&self) -> bool {
        self.jobs.iter().all(Option::is_none)
    }

    /// Pages planned and not yet handed out as steps.
    pub fn pages(&self) -> u64 {
        self.jobs.iter().flatten().map(|j| j.end - j.next).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    /// A long transfer's first fault maps a first stretch; a shorter one, or one whose end is
    /// not known (an IOMMU report), maps its window alone.
    #[test]
    fn only_a_long_transfer_maps_a_first_stretch() {
        assert_eq!(first_window(LONG), FIRST);
        assert_eq!(first_window(MAX_PAGES), FIRST);
        assert_eq!(first_window(LONG - 1), 0);
        assert_eq!(first_window(1), 0);
        assert_eq!(first_window(u64::MAX), 0, "the transfer's end is not known");
        const { assert!(FIRST < LONG && FIRST < CHUNK) };
    }

    /// Every step until none is left, as (handle, first, pages).
    fn drain<const N: usize>(a: &mut Ahead<N>, chunk: u64) -> std::vec::Vec<(u32, u64, u64)> {
        core::iter::from_fn(|| a.next(chunk))
            .map(|c| (c.handle, c.first, c.pages))
            .collect()
    }

    #[test]
    fn a_job_maps_the_rest_in_chunks_up_to_its_cap() {
        let mut a = Ahead::<4>::new();
        assert!(a.plan(1, true, 100, 300, 1000));
        assert_eq!(a.pages(), 200);
        assert_eq!(
            drain(&mut a, 64),
            [(1, 100, 28), (1, 128, 64), (1, 192, 64), (1, 256, 44)]
        );
        assert!(a.is_empty());
        // Capped: 50 pages past the window, however long the transfer.
        assert!(a.plan(1, true, 100, 1 << 40, 50));
        assert_eq!(a.pages(), 50);
        // And never past MAX_PAGES.
        a.clear();
        assert!(a.plan(1, true, 0, 1 << 40, u64::MAX));
        assert_eq!(a.pages(), MAX_PAGES);
    }

    #[test]
    fn nothing_is_planned_past_the_transfer() {
        let mut a = Ahead::<4>::new();
        assert!(!a.plan(1, true, 300, 300, 1000));
        assert!(!a.plan(1, true, 300, 200, 1000));
        assert!(!a.plan(1, true, 100, 300, 0));
        assert!(a.is_empty());
        assert_eq!(a.next(64), None);
    }

    #[test]
    fn a_fault_past_the_mapper_moves_its_job_on() {
        let mut a = Ahead::<4>::new();
        assert!(a.plan(1, true, 100, 1000, 4096));
        assert_eq!(a.next(64).map(|c| c.first), Some(100));
        // The engine overtook the mapper at 500; its window ended at 520.
        assert!(a.plan(1, true, 520, 1000, 4096));
        assert_eq!(a.pages(), 480);
        assert_eq!(a.next(64).map(|c| c.first), Some(520));
        // A fault behind the mapper (the engine went back) maps nothing twice, and a longer
        // transfer extends the job.
        assert!(a.plan(1, true, 200, 1200, 4096));
        assert_eq!(a.next(64).map(|c| c.first), Some(576));
        assert_eq!(a.pages(), 1200 - 640);
    }

    #[test]
    fn a_fault_that_overtook_the_mapper_takes_a_lead() {
        let mut a = Ahead::<4>::new();
        assert!(a.plan(1, true, 100, 1000, 4096));
        // Before the mapper took a step: the window grows, no lead.
        assert_eq!(a.lead(1, true, 100), None);
        // The engine catches the mapper up within its first step: noted, no lead, whichever
        // of the fault's two reports comes.
        assert_eq!(a.next(CHUNK).map(|c| (c.first, c.pages)), Some((100, 28)));
        assert_eq!(a.lead(1, true, 110), None);
        assert_eq!(a.lead(1, true, 110), None);
        // Later, at the next page to map: up to the step boundary a step on; the fault's other
        // report, or an older page, takes none.
        assert_eq!(a.next(CHUNK).map(|c| (c.first, c.pages)), Some((128, 128)));
        assert_eq!(a.lead(1, true, 256), Some((256, LEAD)));
        assert_eq!(a.lead(1, true, 256), None);
        assert_eq!(a.lead(1, true, 200), None);
        assert_eq!(a.lead(1, true, 260), Some((260, 640 - 260)));
        // Never past the job.
        assert_eq!(a.lead(1, true, 990), Some((990, 10)));
        // Not the job's: before it (the fault that planned it), further behind than the
        // mapper's last step, past its end, another region or direction.
        assert_eq!(a.lead(1, true, 99), None);
        assert_eq!(a.lead(1, true, 127), None);
        assert_eq!(a.lead(1, true, 1000), None);
        assert_eq!(a.lead(2, true, 995), None);
        assert_eq!(a.lead(1, false, 995), None);
        // Taken by a fault, a lead is not the mapper's any more.
        a.claim(1, true, 384);
        assert_eq!(a.next(CHUNK).map(|c| c.first), Some(384));
        assert_eq!(a.lead(1, true, 996), Some((996, 4)));
        // A fault past the mapper joins the job: no lead until the mapper steps again, and
        // the engine, gone back, catches it up afresh.
        assert!(a.plan(1, true, 600, 1000, 4096));
        assert_eq!(a.lead(1, true, 600), None);
        assert_eq!(a.next(CHUNK).map(|c| (c.first, c.pages)), Some((600, 40)));
        assert_eq!(a.lead(1, true, 610), None);
        assert_eq!(a.lead(1, true, 640), Some((640, LEAD)));
        // A claim to the job's end ends it.
        a.claim(1, true, 1000);
        assert!(a.is_empty());
    }

    #[test]
    fn regions_and_directions_are_jobs_of_their_own() {
        let mut a = Ahead::<4>::new();
        assert!(a.plan(1, true, 0, 128, 4096));
        assert!(a.plan(2, true, 0, 128, 4096));
        assert!(a.plan(1, false, 0, 64, 4096));
        // Turn by turn, one chunk each.
        assert_eq!(
            drain(&mut a, 64),
            [(1, 0, 64), (2, 0, 64), (1, 0, 64), (1, 64, 64), (2, 64, 64)]
        );
    }

    #[test]
    fn a_full_table_gives_the_oldest_slot_away() {
        let mut a = Ahead::<2>::new();
        assert!(a.plan(1, true, 0, 10, 4096));
        assert!(a.plan(2, true, 0, 10, 4096));
        // Region 1 joined again: region 2's job is now the oldest.
        assert!(a.plan(1, true, 5, 20, 4096));
        assert!(a.plan(3, true, 0, 10, 4096));
        let mut got = drain(&mut a, 64);
        got.sort();
        assert_eq!(got, [(1, 5, 15), (3, 0, 10)]);
    }

    #[test]
    fn a_failed_step_or_a_gone_region_ends_its_job() {
        let mut a = Ahead::<4>::new();
        assert!(a.plan(1, true, 0, 1000, 4096));
        assert!(a.plan(2, true, 0, 1000, 4096));
        let c = a.next(64).unwrap();
        assert_eq!(c.handle, 1);
        a.failed(&c);
        assert_eq!(a.pages(), 1000);
        a.forget(2);
        assert!(a.is_empty());
        // A step of a job that ended and whose slot was taken again ends nothing.
        assert!(a.plan(3, true, 0, 1000, 4096));
        a.failed(&c);
        assert_eq!(a.pages(), 1000);
    }
}
