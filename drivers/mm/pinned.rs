// SPDX-License-Identifier: GPL-2.0-only

//! Pin mode's memory: pages pinned for the engine and mapped into the domain.
//!
//! [`PageMap`] keeps one entry per pinned page with the number of regions that use it, so
//! regions may share pages (two small buffers in one page) and a page is unmapped only when its
//! last region goes. A pin takes a page over from the on-demand mirror (odp.rs, which faults
//! the rest of an evicted 2 MiB block in again on demand); the mirror never maps a pinned page.
//! Pages are pinned by [`PinRun::pin`] with no driver lock held, then adopted under
//! `Process::inner` and `Process::map`, all or nothing: an error gives back exactly what the run
//! took.
//!
//! A page's mapping carries the union of the rights of every region over it, in any mode
//! ([`PageMap::sync_rights`]): a page pinned read-only for a pin region is made writable when a
//! writable region of any mode covers it (re-pinned for writing by [`PinRun::pin_for_write`],
//! which breaks copy-on-write as a CPU write would), and mapped read-only again when the last
//! such region goes. A pin taken for writing is kept until the page's last pin region goes.
//!
//! Nothing here locks: the [`PageMap`] lives under `Process::inner`, the domain under
//! `Process::map` (lock order: process.rs).

use crate::exanest_core::region::Cover;
use crate::ffi;
use crate::mm::iommu::Domain;
use core::ptr::NonNull;
use kernel::{
    bindings,
    error::to_result,
    mm::Mm,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::aref::ARef,
};

/// One pinned, mapped page.
///
/// # Invariants
///
/// `page` holds exactly one pin of ours (`FOLL_LONGTERM`, with `FOLL_WRITE` when `pin_write`),
/// charged once to the owner's `locked_vm`, and the page is mapped at its virtual address in the
/// domain while the entry exists, writable when `write` (which implies `pin_write`). `refs` > 0.
pub(crate) struct PageEntry {
    /// The pinned page (one pin, ours).
    page: NonNull<bindings::page>,
    /// Mapped writable for the device.
    write: bool,
    /// Pinned for writing (the device may have written the page: it is unpinned dirty).
    pin_write: bool,
    /// Regions using the page.
    refs: u32,
}

// SAFETY: A pinned page may be unpinned from any thread; the entry is only a pointer and flags.
unsafe impl Send for PageEntry {}

/// Pages to pin in one `pin_user_pages_fast` call.
const PIN_BATCH: usize = 512;

/// Charge `n` pages to `mm`'s `locked_vm` (`inc`), or give them back. ENOMEM over
/// `RLIMIT_MEMLOCK` without `CAP_IPC_LOCK`; giving back never fails. Takes the mmap lock.
fn account(mm: &Mm, n: u64, inc: bool) -> Result {
    if n == 0 {
        return Ok(());
    }
    // SAFETY: `mm` is alive (the caller holds a reference, an mmgrab); `account_locked_vm`
    // takes the mmap lock itself and only updates `locked_vm`, valid even after the last user
    // of the mm has gone.
    to_result(unsafe { bindings::account_locked_vm(mm.as_raw(), n as usize, inc) })
}

/// What [`PageMap::adopt`] did with one page of a run, so that a failure can undo it.
#[derive(Clone, Copy)]
enum Adopted {
    /// An adequate entry existed: one more use of it.
    Shared,
    /// A new entry took the run's page.
    New,
    /// A read-only pin was replaced by the run's writable one; the old page is kept here.
    Upgraded(NonNull<bindings::page>),
}

/// Pages of one registration, pinned and charged to `RLIMIT_MEMLOCK` with no driver lock held,
/// then handed to [`PageMap::adopt`]. What the map did not take is unpinned and uncharged on
/// drop, with no driver lock held.
///
/// # Invariants
///
/// Every non-null `pages[i]` holds one pin of ours on the page at `first + i`. `charged` pages
/// are charged to `mm` on behalf of the run. Every page in `released` holds one pin of ours.
pub(crate) struct PinRun {
    mm: ARef<Mm>,
    first: u64,
    write: bool,
    pages: KVVec<*mut bindings::page>,
    charged: u64,
    done: KVVec<Adopted>,
    released: KVVec<*mut bindings::page>,
}

// SAFETY: The run only holds pins, which may be released from any thread.
unsafe impl Send for PinRun {}

impl PinRun {
    /// Pin the pages `first..last` of the current process (whose mm is `mm`) for device reads,
    /// and writes when `write`, after charging them to its `RLIMIT_MEMLOCK` (ENOMEM over it).
    /// EFAULT (or the errno of `pin_user_pages_fast`) if a page cannot be pinned.
    pub(crate) fn pin(mm: &ARef<Mm>, first: u64, last: u64, write: bool) -> Result<Self> {
        let mut run = Self::empty(mm, first, last, write)?;
        account(mm, run.pages.len() as u64, true)?;
        run.charged = run.pages.len() as u64;
        let mut flags = bindings::FOLL_LONGTERM;
        if write {
            flags |= bindings::FOLL_WRITE;
        }
        run.pin_batches(|addr, batch, pages| {
            // SAFETY: `pages` has room for `batch` entries (`pin_batches`); the range is user
            // memory of the current process (the caller checked that it opened the engine).
            let ret =
                unsafe { bindings::pin_user_pages_fast(addr as usize, batch as i32, flags, pages) };
            ret as isize
        })?;
        Ok(run)
    }

    /// Pin the pages `first..last` of `mm` (any thread's, the fault thread's too) for device
    /// writes, charging nothing: each replaces a read-only pin of [`PageMap`], whose charge it
    /// takes over ([`PageMap::upgrade`]). Breaks copy-on-write as a CPU write would; EFAULT (or
    /// `pin_user_pages_remote`'s errno) if a page cannot be written, EFAULT if the process is
    /// gone.
    pub(crate) fn pin_for_write(mm: &ARef<Mm>, first: u64, last: u64) -> Result<Self> {
        let mut run = Self::empty(mm, first, last, true)?;
        let user = mm.mmget_not_zero().ok_or(EFAULT)?;
        let flags = bindings::FOLL_LONGTERM | bindings::FOLL_WRITE;
        let _guard = user.mmap_read_lock();
        run.pin_batches(|addr, batch, pages| {
            // SAFETY: `pages` has room for `batch` entries (`pin_batches`); `user` keeps the
            // mm's users (and so its address space) alive, and its mmap lock is held
            // (`_guard`), as a null `locked` asks: GUP does not drop it.
            unsafe {
                bindings::pin_user_pages_remote(
                    user.as_raw(),
                    addr as usize,
                    batch,
                    flags,
                    pages,
                    core::ptr::null_mut(),
                )
            }
        })?;
        Ok(run)
    }

    /// Pin every page of the run, [`PIN_BATCH`] at a time: `pin(addr, batch, pages)` pins
    /// `batch` pages from `addr` into `pages` and returns how many it pinned, or an errno.
    fn pin_batches(
        &mut self,
        pin: impl Fn(u64, usize, *mut *mut bindings::page) -> isize,
    ) -> Result {
        let n = self.pages.len();
        let mut at = 0;
        while at < n {
            let batch = (n - at).min(PIN_BATCH);
            let addr = (self.first + at as u64) << PAGE_SHIFT;
            // SAFETY: `at < n`, the length of `pages`.
            let pages = unsafe { self.pages.as_mut_ptr().add(at) };
            // `at + batch <= n`: `pages` has room for `batch` entries.
            let ret = pin(addr, batch, pages);
            at += self.landed(at, batch, ret)?;
        }
        Ok(())
    }

    /// A run of `last - first` null pages, nothing charged.
    fn empty(mm: &ARef<Mm>, first: u64, last: u64, write: bool) -> Result<Self> {
        let n = (last - first) as usize;
        let mut run = PinRun {
            mm: mm.clone(),
            first,
            write,
            pages: KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?,
            charged: 0,
            done: KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?,
            released: KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?,
        };
        // Pinned in place: every entry is null until a pin lands in it.
        run.pages
            .resize(n, core::ptr::null_mut(), GFP_KERNEL_ACCOUNT)?;
        Ok(run)
    }

    /// A pin call for the `batch` pages from `at` returned `ret`: keep what landed, and return
    /// how many did (all of them), or the error.
    fn landed(&mut self, at: usize, batch: usize, ret: isize) -> Result<usize> {
        let got = usize::try_from(ret).unwrap_or(0).min(batch);
        // INVARIANT: Only the first `got` entries of the batch hold pins: the call may have
        // left pointers to pages it did not keep in the others.
        for p in &mut self.pages[at + got..at + batch] {
            *p = core::ptr::null_mut();
        }
        if ret < 0 {
            return Err(Error::from_errno(ret as i32));
        }
        if got < batch {
            return Err(EFAULT);
        }
        Ok(got)
    }
}

impl Drop for PinRun {
    fn drop(&mut self) {
        for p in Iterator::chain(self.pages.iter_mut(), self.released.iter_mut()) {
            if !p.is_null() {
                // SAFETY: By the type invariant the page holds one pin of ours, which nothing
                // else releases; the device does not map it (the map did not take it, or
                // unmapped it before handing it back), so it cannot have been written by it.
                unsafe { bindings::unpin_user_page(*p) };
                *p = core::ptr::null_mut();
            }
        }
        // Giving locked memory back cannot fail (`account_locked_vm` checks only increases).
        let _ = account(&self.mm, self.charged, false);
    }
}

/// Map `e`'s page at `vpn` anew with `e`'s rights, in place of what the domain maps there.
fn remap(dom: &Domain, vpn: u64, e: &PageEntry) {
    let iova = vpn << PAGE_SHIFT;
    // SAFETY: `e.page` holds our pin (`PageEntry` invariant).
    let phys = unsafe { ffi::page_to_phys(e.page) };
    let prot = bindings::IOMMU_READ | if e.write { bindings::IOMMU_WRITE } else { 0 };
    dom.unmap(iova, PAGE_SIZE);
    // The table that held the entry is still there: this cannot need memory.
    let _ = dom.map(iova, phys, prot, true);
}

/// Tree nodes for the entries a run may add: `v` is filled up to `n`, with no driver lock held.
pub(crate) fn reserve_entries(
    v: &mut KVVec<RBTreeNodeReservation<u64, PageEntry>>,
    n: u64,
) -> Result {
    while (v.len() as u64) < n {
        v.push(
            RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?,
            GFP_KERNEL_ACCOUNT,
        )?;
    }
    Ok(())
}

/// The pinned and mapped pages of one domain, keyed by virtual page number. Every pinned page
/// is charged once to the owner's `RLIMIT_MEMLOCK` (`locked_vm`, with `account_locked_vm`): over
/// the limit pinning fails with ENOMEM, unless the caller has `CAP_IPC_LOCK`.
pub(crate) struct PageMap {
    tree: RBTree<u64, PageEntry>,
    pinned: u64,
    /// The owner's mm, charged for the pinned pages.
    mm: ARef<Mm>,
}

impl PageMap {
    pub(crate) fn new(mm: ARef<Mm>) -> Self {
        PageMap {
            tree: RBTree::new(),
            pinned: 0,
            mm,
        }
    }

    /// Pages pinned (and mapped) now.
    pub(crate) fn pinned(&self) -> u64 {
        self.pinned
    }

    /// Whether `vpn` is pinned and mapped with at least the access asked.
    pub(crate) fn covers(&self, vpn: u64, write: bool) -> bool {
        matches!(self.tree.get(&vpn), Some(e) if e.write || !write)
    }

    /// Whether `vpn` is pinned (then its mapping is this map's, not the mirror's).
    pub(crate) fn has(&self, vpn: u64) -> bool {
        self.tree.get(&vpn).is_some()
    }

    /// Take the pages of `run` into the map, all or nothing: a page already pinned with enough
    /// access gets one more use (the run's pin goes back), a read-only one is replaced by the
    /// run's writable pin, any other is mapped anew, after `evict(vpn)` took it from the
    /// on-demand mirror (odp.rs) if that mapped it. Called under `Process::inner` and
    /// `Process::map` (so page tables are allocated atomically: ENOMEM asks the caller to
    /// reclaim without the locks and try again). On
    /// error the map, the mirror's remaining entries and the run are as they were, except for
    /// mirror entries evicted (faulted in again on demand).
    pub(crate) fn adopt(
        &mut self,
        dom: &Domain,
        mut evict: impl FnMut(u64),
        run: &mut PinRun,
        nodes: &mut KVVec<RBTreeNodeReservation<u64, PageEntry>>,
    ) -> Result {
        run.done.clear();
        for i in 0..run.pages.len() {
            match self.adopt_one(dom, &mut evict, run, i, nodes) {
                // Capacity is the run's length: no allocation.
                Ok(a) => run.done.push(a, GFP_ATOMIC)?,
                Err(e) => {
                    self.undo(dom, run);
                    return Err(e);
                }
            }
        }
        // Old pins of upgraded pages go back with the run, outside the locks.
        for a in run.done.iter() {
            if let Adopted::Upgraded(old) = *a {
                run.released.push(old.as_ptr(), GFP_ATOMIC)?;
            }
        }
        run.done.clear();
        Ok(())
    }

    fn adopt_one(
        &mut self,
        dom: &Domain,
        evict: &mut impl FnMut(u64),
        run: &mut PinRun,
        i: usize,
        nodes: &mut KVVec<RBTreeNodeReservation<u64, PageEntry>>,
    ) -> Result<Adopted> {
        let vpn = run.first + i as u64;
        let iova = vpn << PAGE_SHIFT;
        let page = NonNull::new(run.pages[i]).ok_or(EFAULT)?;
        // SAFETY: `page` holds the run's pin (`PinRun` invariant).
        let phys = unsafe { ffi::page_to_phys(page) };
        let write = run.write;
        let prot = bindings::IOMMU_READ | if write { bindings::IOMMU_WRITE } else { 0 };
        if let Some(e) = self.tree.get_mut(&vpn) {
            // Its mapping's rights follow the regions over it ([`Self::sync_rights`]).
            if e.pin_write || !write {
                e.refs += 1;
                return Ok(Adopted::Shared);
            }
            // Make it writable with the run's pin: the CPU may have replaced a page pinned
            // read-only (a private file page copied on write).
            dom.unmap(iova, PAGE_SIZE);
            if let Err(err) = dom.map(iova, phys, prot, true) {
                // SAFETY: `e.page` holds our pin (`PageEntry` invariant).
                let old = unsafe { ffi::page_to_phys(e.page) };
                // The table that held the entry is still there: this cannot need memory.
                let _ = dom.map(iova, old, bindings::IOMMU_READ, true);
                return Err(err);
            }
            let old = core::mem::replace(&mut e.page, page);
            e.write = true;
            e.pin_write = true;
            e.refs += 1;
            run.pages[i] = core::ptr::null_mut();
            return Ok(Adopted::Upgraded(old));
        }
        evict(vpn);
        let node = nodes.pop().ok_or(ENOMEM)?;
        dom.map(iova, phys, prot, true)?;
        // INVARIANT: The entry takes over the run's pin and its charge; mapped just above.
        self.tree.insert(node.into_node(
            vpn,
            PageEntry {
                page,
                write,
                pin_write: write,
                refs: 1,
            },
        ));
        self.pinned += 1;
        run.pages[i] = core::ptr::null_mut();
        run.charged -= 1;
        Ok(Adopted::New)
    }

    /// Undo what `adopt` did to the pages recorded in `run.done`, last first.
    fn undo(&mut self, dom: &Domain, run: &mut PinRun) {
        while let Some(a) = run.done.pop() {
            let i = run.done.len();
            let vpn = run.first + i as u64;
            let iova = vpn << PAGE_SHIFT;
            match a {
                Adopted::Shared => {
                    if let Some(e) = self.tree.get_mut(&vpn) {
                        e.refs -= 1;
                    }
                }
                Adopted::New => {
                    if let Some(e) = self.tree.remove(&vpn) {
                        dom.unmap(iova, PAGE_SIZE);
                        self.pinned -= 1;
                        run.pages[i] = e.page.as_ptr();
                        run.charged += 1;
                    }
                }
                Adopted::Upgraded(old) => {
                    if let Some(e) = self.tree.get_mut(&vpn) {
                        dom.unmap(iova, PAGE_SIZE);
                        // SAFETY: `old` still holds our pin (kept in `done`).
                        let phys = unsafe { ffi::page_to_phys(old) };
                        // The table that held the entry is still there: this needs no memory.
                        let _ = dom.map(iova, phys, bindings::IOMMU_READ, true);
                        run.pages[i] = core::mem::replace(&mut e.page, old).as_ptr();
                        e.write = false;
                        e.pin_write = false;
                        e.refs -= 1;
                    }
                }
            }
        }
    }

    /// Give the pinned pages `first..last` the rights of the regions over them: writable
    /// exactly where `writable` (the writable regions of every mode) covers them. A page whose
    /// pin allows it is mapped anew with the rights at once; returns the first run of pages
    /// that must be pinned for writing first ([`PinRun::pin_for_write`], then
    /// [`Self::upgrade`]), whose end the caller continues from. Under `Process::inner` and
    /// `Process::map`; needs no memory (a leaf replaced in a table that holds it).
    pub(crate) fn sync_rights<const N: usize>(
        &mut self,
        dom: &Domain,
        first: u64,
        last: u64,
        writable: &Cover<N>,
    ) -> Option<(u64, u64)> {
        let mut need: Option<(u64, u64)> = None;
        let mut cur = self.tree.cursor_lower_bound_mut(&first)?;
        loop {
            let (&vpn, e) = cur.current_mut();
            if vpn >= last {
                break;
            }
            let want = writable.covers(vpn);
            if want && !e.pin_write {
                match need {
                    None => need = Some((vpn, vpn + 1)),
                    Some((a, b)) if b == vpn => need = Some((a, vpn + 1)),
                    // The caller comes back for the rest.
                    Some(_) => break,
                }
            } else if want != e.write {
                e.write = want;
                remap(dom, vpn, e);
            }
            match cur.move_next() {
                Some(next) => cur = next,
                None => break,
            }
        }
        need
    }

    /// Replace the read-only pins of the pages of `run` (pinned for writing) that `writable`
    /// still covers by the run's, and map them writable; the old pins go back with the run,
    /// outside the locks. Pages gone or changed meanwhile keep their entry. Under
    /// `Process::inner` and `Process::map`.
    pub(crate) fn upgrade<const N: usize>(
        &mut self,
        dom: &Domain,
        run: &mut PinRun,
        writable: &Cover<N>,
    ) -> Result {
        for i in 0..run.pages.len() {
            let vpn = run.first + i as u64;
            let Some(page) = NonNull::new(run.pages[i]) else {
                continue;
            };
            match self.tree.get_mut(&vpn) {
                Some(e) if !e.pin_write && writable.covers(vpn) => {
                    let old = core::mem::replace(&mut e.page, page);
                    // Capacity is the run's length: no allocation.
                    run.released.push(old.as_ptr(), GFP_ATOMIC)?;
                    run.pages[i] = core::ptr::null_mut();
                    // INVARIANT: The entry takes over the run's pin (the run charged nothing)
                    // and keeps its charge; mapped anew with the new page just below.
                    e.pin_write = true;
                    e.write = true;
                    remap(dom, vpn, e);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Drop one use of each page `first..last`; unmap, unpin and uncharge those nobody uses
    /// any more, each run of consecutive ones with one unmap.
    pub(crate) fn unmap_pages(&mut self, dom: &Domain, first: u64, last: u64) {
        let mut gone = 0;
        // Pages whose last use went, not yet released: `run.1` from `run.0`, which ends at the
        // page the loop looks at.
        let mut run = (first, 0);
        for vpn in first..last {
            let last_use = match self.tree.get_mut(&vpn) {
                Some(e) => {
                    e.refs -= 1;
                    e.refs == 0
                }
                None => false,
            };
            if last_use {
                run.1 += 1;
            } else {
                gone += self.release_run(dom, run.0, run.1);
                run = (vpn + 1, 0);
            }
        }
        gone += self.release_run(dom, run.0, run.1);
        // Giving locked memory back cannot fail (`account_locked_vm` checks only increases).
        let _ = account(&self.mm, gone, false);
    }

    /// Remove the entries of the `n` pages from `vpn`, which all have one: unmap them with one
    /// call (one IOTLB flush instead of one per page: a DEREG of 1024 pinned pages made 1024),
    /// then unpin them. Returns `n` (the caller gives back their charge).
    fn release_run(&mut self, dom: &Domain, vpn: u64, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let done = (dom.unmap(vpn << PAGE_SHIFT, (n as usize) << PAGE_SHIFT) >> PAGE_SHIFT) as u64;
        // The IOMMU stops at a page it finds unmapped; those after it go one by one.
        for v in vpn + done.min(n)..vpn + n {
            dom.unmap(v << PAGE_SHIFT, PAGE_SIZE);
        }
        for v in vpn..vpn + n {
            let Some(e) = self.tree.remove(&v) else {
                continue;
            };
            let mut page = e.page.as_ptr();
            // SAFETY: By the `PageEntry` invariant this is our one pin of the page; the device
            // can no longer reach it (the run is unmapped and the IOTLB flushed), and a page
            // it could write is marked dirty.
            unsafe { bindings::unpin_user_pages_dirty_lock(&mut page, 1, e.pin_write) };
            self.pinned -= 1;
        }
        n
    }

    /// Unmap, unpin and uncharge everything (teardown), a run of consecutive pages at a time.
    pub(crate) fn clear(&mut self, dom: &Domain) {
        let mut gone = 0;
        loop {
            let Some(vpn) = self.tree.keys().next().copied() else {
                break;
            };
            let mut n = 1;
            while self.tree.get(&(vpn + n)).is_some() {
                n += 1;
            }
            gone += self.release_run(dom, vpn, n);
        }
        // Giving locked memory back cannot fail (`account_locked_vm` checks only increases).
        let _ = account(&self.mm, gone, false);
    }
}
