// SPDX-License-Identifier: GPL-2.0-only

//! On-demand paging's memory side: the MMU interval notifier of each prefault or on-demand
//! region, faulting pages in with HMM, and mapping them into the mirror (mirror.rs) once their
//! sequence is checked. The fault path that uses them is fault.rs.
//!
//! The notifier callback takes only `Process::map` ([`MapState`]), with a try-lock when the
//! invalidation may not block, so nothing under that lock may enter reclaim: allocations there
//! are atomic or reserved beforehand ([`reserve_nodes`]). Lock order: process.rs.

use crate::error::hmm_errno;
use crate::exanest_core::{
    abi::Range,
    batch::{batch_len, PageMask, Want},
    fault::{touch_ahead, widen_to_block, InvalLog, Plan},
};
use crate::fault::WOULD_BLOCK;
use crate::ffi::{self, MniPtr};
use crate::mm::budget::Budget;
use crate::mm::iommu::Domain;
pub(crate) use crate::mm::mirror::{reserve_nodes, Faulted, Mirror, Nodes};
use crate::mm::mirror::{BLOCK_ORDER, BLOCK_PAGES};
use kernel::{
    bindings,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::{Arc, Mutex},
};

/// What the MMU notifier callback touches: the state behind `Process::map`.
pub(crate) struct MapState {
    /// The domain; taken out (and dropped outside this lock) at teardown.
    pub(crate) domain: Option<Arc<Domain>>,
    /// Pages mapped on demand (not pinned).
    pub(crate) mirror: Mirror,
    /// Invalidations that unmapped something.
    pub(crate) invalidations: u64,
    /// The translation budget of the mirror.
    pub(crate) budget: Budget,
    /// The last invalidations, for a resolver to tell which of its pages one touched.
    pub(crate) inval: InvalLog<INVAL_LOG>,
}

/// Invalidations [`MapState::inval`] remembers: past that many during one fault-in, the
/// resolver faults in again.
const INVAL_LOG: usize = 16;

impl MapState {
    /// No domain yet, nothing mapped, a budget of `budget` pages.
    pub(crate) fn new(budget: u64) -> Result<Self> {
        Ok(MapState {
            domain: None,
            mirror: Mirror::new(),
            invalidations: 0,
            budget: Budget::new(budget)?,
            inval: InvalLog::new(),
        })
    }
}

/// The MMU interval notifier callback, called by the C shim: unmap what the mm is about to
/// change. Returns false only when it may not block and `map` is busy (the mm then retries).
///
/// # Safety
///
/// `token` is the `Process::map` the notifier was inserted with ([`Notifier::insert`]), alive
/// until the notifier is removed; `mni` is the notifier of this callback.
#[no_mangle]
pub(crate) unsafe extern "C" fn exanest_rust_invalidate(
    token: *mut core::ffi::c_void,
    mni: *mut bindings::mmu_interval_notifier,
    start: usize,
    end: usize,
    blockable: bool,
    cur_seq: usize,
) -> bool {
    // The process outlives every reference to its notifiers: the region table holds them until
    // teardown, whose caller drops them before the process can go, and a resolver holds one only
    // while it keeps the process alive (an ioctl's caller holds the file; the fault thread is
    // stopped by teardown first). A callback runs only while its notifier is inserted.
    // SAFETY: `token` is the `Process::map` this notifier was inserted with, which lives as long
    // as the process; the last reference removes the notifier, waiting for this callback.
    let map = unsafe { &*token.cast::<Mutex<MapState>>() };
    let mut g = if blockable {
        map.lock()
    } else {
        match map.try_lock() {
            Some(g) => g,
            None => return false,
        }
    };
    // SAFETY: `mni` is this callback's notifier, inserted for the whole callback; `set_seq` needs
    // the lock its `read_retry` users (`map_faulted`) hold, `Process::map`, held here.
    unsafe { ffi::set_seq(mni, cur_seq) };
    let ms = &mut *g;
    // Before the mm changes a page of the range: a resolver that faulted pages in meanwhile
    // maps none that it touches (`map_faulted`).
    ms.inval.record(start as u64, end as u64);
    if let Some(dom) = ms.domain.as_ref() {
        if ms.mirror.unmap_range(&**dom, start as u64, end as u64) > 0 {
            ms.invalidations += 1;
        }
    }
    true
}
ffi::check_callback!(ffi::raw::exanest_rust_invalidate, exanest_rust_invalidate);

/// The MMU interval notifier over one prefault or on-demand region.
///
/// # Invariants
///
/// `mni` watches exactly the region's range of the process's mm, with the process's
/// `Process::map` as token. It is removed when the last reference goes (`Drop`), which waits
/// for callbacks in progress: the last reference is never dropped under `Process::inner` or
/// `Process::map`. Shared as `Arc<Notifier>` between the region table and the resolvers using
/// it, so a resolver's notifier stays live even if the region goes meanwhile.
pub(crate) struct Notifier {
    mni: MniPtr,
}

impl Notifier {
    /// Watch `range` of `mm`, reporting to `map`.
    ///
    /// # Safety
    ///
    /// `mm` is the live mm of the calling process, and `map` outlives the notifier.
    pub(crate) unsafe fn insert(
        mm: *mut bindings::mm_struct,
        range: &Range,
        map: &Mutex<MapState>,
    ) -> Result<Arc<Self>> {
        let token = core::ptr::from_ref(map).cast();
        // SAFETY: `mm` is live (contract). `map` is the token that the callback dereferences;
        // per the contract it outlives the notifier, whose removal (when the last `Arc` goes)
        // waits for the callbacks in progress.
        let mni = unsafe { MniPtr::insert(mm, range.start, range.len(), token)? };
        // INVARIANT: Inserted over `range` with `map` as token.
        Ok(Arc::new(Notifier { mni }, GFP_KERNEL)?)
    }
}

/// Map the faulted pages `f` into `ms`'s domain (see [`Mirror::map_current`]), but for those
/// that an invalidation recorded since `mark` (taken before the fault-in) touched; `None` (the
/// caller faults again) if one touched a faulting page (`faulting`: the one a fault stopped
/// at, or each of a batch's), or the log lost track.
/// Those pages fault again when the engine reaches them, so an invalidation elsewhere in the
/// region does not make the resolution start over. The caller holds `Process::map`, the lock
/// behind `ms`, and accounts for the pages with [`account_mapped`] before it lets it go.
pub(crate) fn map_faulted(
    ms: &mut MapState,
    mni: &Notifier,
    f: &Faulted,
    faulting: &[u64],
    nodes: &mut Nodes,
    pinned: impl Fn(u64) -> bool,
    mark: u64,
) -> Result<Option<u64>> {
    let MapState {
        domain,
        mirror,
        inval,
        ..
    } = ms;
    let page = |vpn: u64| (vpn << PAGE_SHIFT, (vpn + 1) << PAGE_SHIFT);
    let moved = mni.mni.read_retry(f.seq);
    if moved
        && faulting.iter().any(|&vpn| {
            let (s, e) = page(vpn);
            inval.hits(mark, s, e)
        })
    {
        return Ok(None);
    }
    let touched = |vpn: u64| {
        let (s, e) = page(vpn);
        moved && inval.hits(mark, s, e)
    };
    let dom = domain.as_ref().ok_or(ENODEV)?;
    // The invalidation callback records its range under `Process::map` (the lock behind `ms`,
    // which the caller holds) before the mm changes a page; `mark` was taken before the
    // fault-in's `mmu_interval_read_begin`, which waited for any invalidation in progress.
    let skip = |vpn| pinned(vpn) || touched(vpn);
    // SAFETY: The pages `skip` does not leave out were touched by no invalidation since `mark`
    // (above): they are what the mm maps now, and stay so while the caller holds the lock.
    let n = unsafe { mirror.map_current(&**dom, f, nodes, skip) }?;
    Ok(Some(n))
}

/// The translation budget's bookkeeping of what [`map_faulted`] mapped of `f`, under the same
/// hold of the lock behind `ms` (it may evict other pages to keep within the budget).
pub(crate) fn account_mapped(ms: &mut MapState, f: &Faulted) {
    let MapState {
        domain,
        mirror,
        budget,
        ..
    } = ms;
    if let Some(dom) = domain.as_ref() {
        budget.mapped(mirror, &**dom, f.first << PAGE_SHIFT, f.end());
    }
}

/// What [`fault_in`] needs to know about the region of the fault.
pub(crate) struct FaultTarget {
    /// The region's handle, checked again under `Process::inner` before mapping.
    pub(crate) handle: u32,
    pub(crate) region: Range,
    pub(crate) notifier: Arc<Notifier>,
    /// Touch-ahead window in pages.
    pub(crate) window: u64,
    /// End (exclusive) of the bytes the engine still has to access, or `u64::MAX`.
    pub(crate) limit: u64,
    /// A strided plan (the adaptive policy recognised a constant stride), which replaces the
    /// window: its pages, within the VMA and the region (not `limit`: it plans the transfers
    /// to come).
    pub(crate) strided: Option<Plan>,
    /// Whether a fault on a transparent huge page resolves all of it, to be mapped as one
    /// block ([`widen_to_block`]): an engine fault with a window that may be more than its
    /// page and a budget that has room for it.
    pub(crate) blocks: bool,
    /// Resolve without sleeping on the mm, or fail with [`WOULD_BLOCK`]: a resolution in an
    /// interrupt thread, which must not wait for user space (userfaultfd), I/O or a writer of
    /// the mmap lock.
    pub(crate) nowait: bool,
    /// Where the invalidation log was when the resolution was planned, if it was read then
    /// (under the lock the planning took anyway): the first fault-in's mark, taken earlier
    /// than the fault-in, so that it covers more invalidations, never fewer.
    pub(crate) mark: Option<u64>,
}

/// Check the VMA and fault the touch-ahead window at `addr` in, into `out`. Runs with no
/// driver lock held: HMM takes the mmap lock and may sleep in the mm's fault handler for as
/// long as that takes (userfaultfd, FUSE). Its sleeps are killable: a fatal signal to the
/// caller (the process, or the fault thread stopped at teardown) ends them with EINTR. With
/// `t.nowait` the mmap lock is taken once, without waiting, for the VMA and the fault-in
/// together. On an error, `out` holds nothing to map.
pub(crate) fn fault_in(
    mm: &ffi::FaultMm,
    addr: u64,
    write: bool,
    t: &FaultTarget,
    out: &mut Faulted,
) -> Result {
    in_vma(mm, addr, write, t.nowait, |span, locked| {
        fault_in_vma(addr, t, span, out, |out, first, last, want| {
            hmm(t, locked, first, last, write, want, out)
        })
    })
}

/// Run `f` with the range of the VMA at `addr` of `mm` (EFAULT if none; EACCES without the
/// access): with `nowait`, under the mmap read lock taken without waiting (WOULD_BLOCK if
/// contended) and held for all of `f`, which gets the VMA for the fault-in; else after the
/// lock was dropped (HMM takes it again and may sleep), and `f` gets no VMA.
fn in_vma<T>(
    mm: &ffi::FaultMm,
    addr: u64,
    write: bool,
    nowait: bool,
    f: impl FnOnce(&Range, Option<&kernel::mm::virt::VmaRef>) -> Result<T>,
) -> Result<T> {
    if nowait {
        return mm.try_with_vma(addr, |vma| f(&vma_span(vma, write)?, Some(vma)));
    }
    let user = mm.mmget_not_zero().ok_or(EFAULT)?;
    let span = {
        let guard = user.mmap_read_lock();
        vma_span(guard.vma_lookup(addr as usize).ok_or(EFAULT)?, write)?
    };
    f(&span, None)
}

/// The range of `vma`, if it allows the access (EACCES if not).
fn vma_span(vma: &kernel::mm::virt::VmaRef, write: bool) -> Result<Range> {
    let need = if write {
        kernel::mm::virt::flags::WRITE
    } else {
        kernel::mm::virt::flags::READ
    };
    if vma.flags() & need == 0 {
        return Err(EACCES);
    }
    Ok(Range {
        start: vma.start() as u64,
        end: vma.end() as u64,
    })
}

/// [`fault_in`] in the VMA `vma` at `addr`, into `out`, faulting pages in with
/// `hmm(out, first, last, want)`.
fn fault_in_vma(
    addr: u64,
    t: &FaultTarget,
    vma: &Range,
    out: &mut Faulted,
    hmm: impl Fn(&mut Faulted, u64, u64, Want) -> Result,
) -> Result {
    let page_end = |end: u64| end.div_ceil(PAGE_SIZE as u64);
    let strided = t
        .strided
        .filter(|p| p.first == addr >> PAGE_SHIFT)
        .map(|p| p.clamp(page_end(vma.end)).clamp(page_end(t.region.end)))
        .filter(Plan::is_strided);
    if let Some(p) = strided {
        let want = Want::Strided {
            run: p.run,
            stride: p.stride,
        };
        match hmm(out, p.first, p.end, want) {
            // A predicted page that cannot be faulted in (past the end of a file, say) must
            // not fail the fault: the window's pages are faulted in instead (unless it would
            // have slept: the fault thread then follows the plan).
            Err(e) if e != EINTR && e != WOULD_BLOCK => {}
            res => return res,
        }
    }
    let window = touch_ahead(addr, t.window, PAGE_SHIFT as u32, vma, &t.region, t.limit);
    hmm(out, window.0, window.1, Want::All)?;
    let vpn = addr >> PAGE_SHIFT;
    let huge = out
        .pfns
        .get((vpn - window.0) as usize)
        .is_some_and(|p| p.order() >= BLOCK_ORDER);
    if t.blocks && huge {
        let (first, last) =
            widen_to_block(window, vpn, BLOCK_PAGES, PAGE_SHIFT as u32, vma, &t.region);
        if (first, last) != window {
            // The rest of a resident huge page: a walk of its PMD. Should it fail (the huge
            // page was split meanwhile and part of it is gone), the window alone will do,
            // faulted in again (`out` no longer holds it).
            return match hmm(out, first, last, Want::All) {
                Err(e) if e == EINTR => Err(e),
                Err(_) => hmm(out, window.0, window.1, Want::All),
                wide => wide,
            };
        }
    }
    Ok(())
}

/// One fault of a batch ([`fault_in_batch`]): its address, and the window its resolution
/// planned (pages after the faulting one) up to `limit` (as [`FaultTarget`]'s).
#[derive(Clone, Copy)]
pub(crate) struct Member {
    pub(crate) addr: u64,
    pub(crate) window: u64,
    pub(crate) limit: u64,
}

/// Fault in the windows of the faults `members` (in `t`'s region, sorted by address: a batch
/// by the core's `batch_len`) with one HMM call over their span, asking for their windows only,
/// under one mmap lock. Each member's window (pages, `[first, last)`) goes to `wins`. `t`'s own
/// window, limit, plan and blocks are not used. EXDEV when the members are not in one VMA, no
/// longer make one batch in it, or one faulted on a transparent huge page while `blocks` (one
/// of them would map all of it as a block): the caller then resolves them one by one. Other
/// errors as [`fault_in`]'s.
pub(crate) fn fault_in_batch(
    mm: &ffi::FaultMm,
    write: bool,
    t: &FaultTarget,
    members: &[Member],
    blocks: bool,
    wins: &mut [(u64, u64)],
    out: &mut Faulted,
) -> Result {
    let first = members.first().ok_or(EINVAL)?;
    if wins.len() != members.len() {
        return Err(EINVAL);
    }
    let span = |vma: &Range, wins: &mut [(u64, u64)]| -> Result<(u64, u64, PageMask)> {
        for (m, w) in members.iter().zip(wins.iter_mut()) {
            if !(vma.start..vma.end).contains(&m.addr) {
                return Err(EXDEV);
            }
            *w = touch_ahead(m.addr, m.window, PAGE_SHIFT as u32, vma, &t.region, m.limit);
        }
        if batch_len(wins) != wins.len() {
            return Err(EXDEV);
        }
        let first = wins[0].0;
        let last = wins.iter().map(|w| w.1).max().unwrap_or(first + 1);
        let mut mask = PageMask::new();
        for w in wins.iter() {
            if !mask.add(w.0 - first, w.1 - first) {
                return Err(EXDEV);
            }
        }
        Ok((first, last, mask))
    };
    in_vma(mm, first.addr, write, t.nowait, |vma, locked| {
        let (lo, hi, mask) = span(vma, wins)?;
        hmm(t, locked, lo, hi, write, Want::Mask(mask), out)
    })?;
    let huge = |m: &Member| {
        out.pfns
            .get(((m.addr >> PAGE_SHIFT) - out.first) as usize)
            .is_some_and(|p| p.order() >= BLOCK_ORDER)
    };
    if blocks && members.iter().any(huge) {
        return Err(EXDEV);
    }
    Ok(())
}

/// Fault the pages `first..last` that `want` asks for in with HMM, into `out` (in place: a
/// fault's few pfns are not copied on their way back to the resolver).
fn hmm(
    t: &FaultTarget,
    locked: Option<&kernel::mm::virt::VmaRef>,
    first: u64,
    last: u64,
    write: bool,
    want: Want,
    out: &mut Faulted,
) -> Result {
    out.pfns.reset((last - first) as usize)?;
    out.seq = t
        .notifier
        .mni
        .hmm_fault(
            locked,
            first << PAGE_SHIFT,
            last << PAGE_SHIFT,
            write,
            &want,
            &mut out.pfns,
        )
        .map_err(|e| {
            if t.nowait && e == EAGAIN {
                WOULD_BLOCK
            } else {
                hmm_errno(e)
            }
        })?;
    out.first = first;
    out.write = write;
    // Not copied (72 bytes) where it is `All` already, as a lone fault's always is.
    if !matches!((&out.want, &want), (Want::All, Want::All)) {
        out.want = want;
    }
    Ok(())
}
