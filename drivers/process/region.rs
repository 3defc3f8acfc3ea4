// SPDX-License-Identifier: GPL-2.0-only

//! Registered regions and their modes (Documentation/abi.rst, "Modes"):
//!
//! - **pin**: pinned and mapped at registration ([`crate::mm::pinned::PageMap`]);
//! - **prefault**: faulted in and mapped at registration, not pinned, kept coherent by the
//!   region's MMU notifier;
//! - **on-demand**: nothing mapped until the engine faults (fault.rs).
//!
//! Registration, deregistration, and advise (map part of a region now).

use crate::error::{CtxError, CtxResult};
use crate::exanest_core::{
    abi::{self, Range},
    region::{uncovered, Cover},
    stamps::Record,
};
use crate::fault::{reclaim_for_tables, retry_lost_region, MAX_RETRIES};
use crate::mm::odp::{FaultTarget, MapState, Notifier};
use crate::mm::pinned::{reserve_entries, PinRun};
use crate::process::{Inner, Process, MAX_REGIONS};
use kernel::{page::PAGE_SHIFT, prelude::*, sync::Arc};

impl Process {
    /// EXANEST_DMA_IOC_REG: returns the new region's handle.
    pub(crate) fn register(&self, req: &abi::Reg) -> Result<u32> {
        // The caller first: another process learns nothing from the engine, not even which of
        // its requests would be valid.
        self.check_caller()?;
        let mut lim = self.limits();
        if req.access & abi::ACCESS_REMOTE != 0 {
            // Other nodes' puts and gets stream through the region: from its first fault on,
            // resolve the most ahead (unless the caller chose a window).
            lim.default_window = abi::MAX_WINDOW;
        }
        let v = abi::check_reg(req, &lim)?;
        if v.mode == abi::MODE_PIN {
            return self.register_pinned(&v);
        }
        // Watch the range before anything can be mapped in it. Inserted without `inner`:
        // insertion may take mm locks that an invalidation holds while it waits for `map`.
        // SAFETY: `check_caller` passed, so `self.mm` is the current process's live mm; `map`
        // is a field of `self`, which outlives its notifiers (removed at deregistration or
        // teardown, before the process is freed).
        let notifier = unsafe { Notifier::insert(self.mm.as_raw(), &v.range, &self.map)? };
        let handle = {
            let mut g = self.inner.lock();
            let inner = &mut *g;
            if inner.dead {
                return Err(ENODEV);
            }
            self.check_bytes(inner, &v)?;
            let h = inner.regions.insert(&v)?;
            if let Err(e) = inner
                .notifiers
                .push((h, notifier.clone()), GFP_KERNEL_ACCOUNT)
            {
                // Inserted just above, under the same lock: removing it cannot fail.
                let _ = inner.regions.remove(h);
                return Err(e.into());
            }
            if v.mode == abi::MODE_PREFAULT {
                // A fresh handle: holding it cannot fail.
                let _ = inner.regions.hold(h);
            }
            inner.publish_claims(&self.claims);
            h
        };
        // Our reference goes here, outside `inner`: on an error above it was the last one.
        drop(notifier);
        if v.access & abi::ACCESS_WRITE != 0 {
            let (first, last) = v.range.pages(PAGE_SHIFT as u32);
            self.sync_pin_rights_or_keep(first, last);
        }
        if v.mode == abi::MODE_PREFAULT {
            // Held while it is faulted in, as a copy holds its regions: a DEREG of a guessed
            // handle meanwhile is EBUSY, not a registration that ends with ENOENT.
            let write = v.access & abi::ACCESS_WRITE != 0;
            let res = self.prefault_region(handle, &v.range, write);
            self.inner.lock().regions.release(handle);
            if let Err(e) = res {
                self.drop_unreported(handle);
                return Err(e);
            }
        }
        Ok(handle)
    }

    /// A pin-mode region: pin (and charge) its pages with no driver lock held, then map them
    /// under `inner` and `map`, taking them over from the on-demand mirror where it maps them.
    fn register_pinned(&self, v: &abi::ValidReg) -> Result<u32> {
        {
            let g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            if g.regions.len() >= MAX_REGIONS {
                return Err(ENOSPC);
            }
            self.check_bytes(&g, v)?;
        }
        let (first, last) = v.range.pages(PAGE_SHIFT as u32);
        let write = v.access & abi::ACCESS_WRITE != 0;
        // Pinning may sleep in the mm's fault handler and enter reclaim: no lock is held.
        let mut run = PinRun::pin(&self.mm, first, last, write)?;
        let mut nodes = KVVec::new();
        let mut tries = 0;
        loop {
            // A node per page, topped up after a failed attempt used some.
            reserve_entries(&mut nodes, last - first)?;
            let mut g = self.inner.lock();
            let inner = &mut *g;
            if inner.dead {
                return Err(ENODEV);
            }
            // Checked again: other registrations may have come meanwhile.
            self.check_bytes(inner, v)?;
            let h = inner.regions.insert(v)?;
            let res = {
                let mut m = self.map.lock();
                let MapState { domain, mirror, .. } = &mut *m;
                let Some(dom) = domain.as_ref() else {
                    // Inserted just above, under the same lock: removing it cannot fail.
                    let _ = inner.regions.remove(h);
                    return Err(ENODEV);
                };
                inner
                    .pages
                    .adopt(dom, |vpn| mirror.evict(&**dom, vpn), &mut run, &mut nodes)
            };
            match res {
                Ok(()) => {
                    drop(g);
                    self.sync_pin_rights_or_keep(first, last);
                    return Ok(h);
                }
                Err(e) => {
                    // Inserted just above, under the same lock: removing it cannot fail.
                    let _ = inner.regions.remove(h);
                    tries += 1;
                    if e != ENOMEM || tries >= MAX_RETRIES {
                        return Err(e);
                    }
                }
            }
            drop(g);
            // Page tables could not be allocated atomically: reclaim without the locks.
            reclaim_for_tables();
        }
    }

    /// ENOSPC when `v` would take the process past its registered-bytes limit.
    fn check_bytes(&self, inner: &crate::process::Inner, v: &abi::ValidReg) -> Result {
        if inner.regions.bytes().saturating_add(v.range.len()) > self.max_bytes {
            return Err(ENOSPC);
        }
        Ok(())
    }

    /// EXANEST_DMA_IOC_REG as the call asks it: the region and, with a remote right, its rkey,
    /// granted while the process holds a context ([`CtxError::Lost`] otherwise: the region is
    /// gone again and device.rs calls again once it has one). The reply: `req` with the handle
    /// and the rkey.
    pub(crate) fn register_call(&self, req: &abi::Reg) -> CtxResult<abi::Reg> {
        let handle = self.register(req)?;
        let mut out = abi::Reg { handle, ..*req };
        if req.access & abi::ACCESS_REMOTE != 0 {
            // `register` checked the request already: this cannot fail.
            let granted = abi::check_reg(req, &self.limits())
                .map_err(CtxError::from)
                .and_then(|v| self.grant_rkey(handle, &v));
            match granted {
                Ok(rkey) => out.rkey = rkey,
                Err(e) => {
                    self.drop_unreported(handle);
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Drop region `handle`, which user space never learnt of: its REG failed after the
    /// region was made (no rkey), or its reply could not be written. Only a copy started with
    /// a guessed handle can keep it (EBUSY): it then stays registered, unknown to the caller,
    /// until the file is closed (Documentation/abi.rst, REG).
    pub(crate) fn drop_unreported(&self, handle: u32) {
        if let Err(e) = self.deregister(&abi::Dereg { handle, flags: 0 }) {
            pr_debug!("exanest: region {handle} of a failed REG stays ({e:?})\n");
        }
    }

    /// EXANEST_DMA_IOC_DEREG. Under `inner` the region goes and its pages are unmapped (the
    /// IOTLB synced), so a resolver that faulted pages in for it finds it gone when it comes
    /// back to map them (fault.rs). The notifier is removed last, with no lock held.
    pub(crate) fn deregister(&self, req: &abi::Dereg) -> Result {
        self.check_caller()?;
        let handle = abi::check_dereg(req)?;
        let (notifier, r): (Option<Arc<Notifier>>, _) = {
            let mut g = self.inner.lock();
            let inner = &mut *g;
            if inner.dead {
                return Err(ENODEV);
            }
            let r = inner.regions.remove(handle)?;
            if r.mode != abi::MODE_PIN {
                inner.gone(&r.range);
            }
            inner.ahead.forget(handle);
            // Other nodes first: nothing is placed with the region's rkey from here on.
            self.revoke_rkey(inner, handle);
            inner.publish_claims(&self.claims);
            let mut notifier = None;
            if let Some(i) = inner.notifiers.iter().position(|(h, _)| *h == handle) {
                notifier = Some(inner.notifiers.remove(i)?.1);
            }
            if r.mode == abi::MODE_PIN {
                let dom = self.map.lock().domain.clone();
                if let Some(dom) = dom {
                    let (first, last) = r.range.pages(PAGE_SHIFT as u32);
                    inner.pages.unmap_pages(&dom, first, last);
                }
            } else {
                // Only what no other prefault or on-demand region touches: the pages another
                // region covers stay mapped, watched by that region's notifier, so a copy
                // through it does not fault again for this DEREG (a fault that kept coming back
                // that way ended in the refault limit's EFAULT).
                // A page mapped writable stays only where a region that allows writes covers it.
                let keep = |write_only: bool| {
                    inner
                        .regions
                        .iter()
                        .filter(|x| x.mode != abi::MODE_PIN)
                        .filter(move |x| !write_only || x.access & abi::ACCESS_WRITE != 0)
                        .map(|x| (x.range.start, x.range.end))
                };
                let (start, end, shift) = (r.range.start, r.range.end, PAGE_SHIFT as u32);
                let mut m = self.map.lock();
                let ms = &mut *m;
                if let Some(dom) = ms.domain.as_ref() {
                    let mirror = &mut ms.mirror;
                    uncovered::<MAX_REGIONS>(start, end, keep(false), shift, |a, b| {
                        mirror.unmap_range(&**dom, a << shift, b << shift);
                    });
                    uncovered::<MAX_REGIONS>(start, end, keep(true), shift, |a, b| {
                        mirror.unmap_writable(&**dom, a << shift, b << shift);
                    });
                }
            }
            (notifier, r)
        };
        // Removed here (if no resolver still holds it), without `inner` or `map`.
        drop(notifier);
        if r.access & abi::ACCESS_WRITE != 0 {
            // Pinned pages that no writable region covers any more are mapped read-only again.
            let (first, last) = r.range.pages(PAGE_SHIFT as u32);
            self.sync_pin_rights_or_keep(first, last);
        }
        Ok(())
    }

    /// Give the pinned pages `first..last` the rights of the regions over them (pinned.rs):
    /// writable where a writable region of any mode covers them, read-only elsewhere. A page
    /// pinned read-only that must become writable is pinned again for writing (with no driver
    /// lock held), which fails where the process could not write it either (EFAULT: a
    /// read-only mapping), or EFAULT/ENODEV once the process or the device is gone; the
    /// page then stays read-only. Mapping read-only never fails.
    pub(crate) fn sync_pin_rights(&self, first: u64, last: u64) -> Result {
        let mut at = first;
        loop {
            let need = self
                .with_pins(|inner, dom, writable| inner.pages.sync_rights(dom, at, last, writable))?
                .flatten();
            let Some((a, b)) = need else {
                return Ok(());
            };
            // Faults the pages in for writing and may sleep: no driver lock is held.
            let mut run = crate::mm::pinned::PinRun::pin_for_write(&self.mm, a, b)?;
            self.with_pins(|inner, dom, writable| inner.pages.upgrade(dom, &mut run, writable))?
                .transpose()?;
            // The old pins go back here, outside the locks.
            drop(run);
            at = b;
        }
    }

    /// [`Self::sync_pin_rights`] where the caller's own call succeeds anyway: a page that
    /// cannot be made writable stays read-only, and a device write to it ends with EACCES
    /// (the fault path tries again, resolve.rs).
    fn sync_pin_rights_or_keep(&self, first: u64, last: u64) {
        if let Err(e) = self.sync_pin_rights(first, last) {
            pr_debug!("exanest: pinned pages keep their rights ({e:?})\n");
        }
    }

    /// Run `f` on the process's state, its domain and the cover of its writable regions, under
    /// `inner` and `map`, unless no page is pinned (`None`). ENODEV once the process or its
    /// domain is gone.
    fn with_pins<T>(
        &self,
        f: impl FnOnce(&mut Inner, &crate::mm::iommu::Domain, &Cover<MAX_REGIONS>) -> T,
    ) -> Result<Option<T>> {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return Err(ENODEV);
        }
        if inner.pages.pinned() == 0 {
            // Nothing to give rights to (most registrations): no cover to build.
            return Ok(None);
        }
        let writable = Cover::<MAX_REGIONS>::new(
            inner
                .regions
                .iter()
                .filter(|r| r.access & abi::ACCESS_WRITE != 0)
                .map(|r| (r.range.start, r.range.end)),
            PAGE_SHIFT as u32,
        );
        let m = self.map.lock();
        let dom = m.domain.as_ref().ok_or(ENODEV)?;
        Ok(Some(f(inner, dom, &writable)))
    }

    /// EXANEST_DMA_IOC_ADVISE: map a sub-range of a prefault or on-demand region now.
    pub(crate) fn advise(&self, req: &abi::Advise) -> Result {
        self.check_caller()?;
        let (range, write) = abi::check_advise(req, &self.limits())?;
        // Deregistered meanwhile: another region may hold the range; look again.
        retry_lost_region(|| {
            let handle = {
                let g = self.inner.lock();
                if g.dead {
                    return Err(ENODEV);
                }
                let h = g.regions.find(&range, crate::fault::access(write))?;
                if g.regions.get(h).ok_or(EFAULT)?.mode == abi::MODE_PIN {
                    // Pinned regions are mapped from registration on.
                    return Ok(());
                }
                h
            };
            self.prefault_region(handle, &range, write)
        })
    }

    /// Fault in and map `range` of region `handle` now (prefault mode, advise), without
    /// pinning.
    fn prefault_region(&self, handle: u32, range: &Range, write: bool) -> Result {
        let (region, notifier) = {
            let g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            let r = g.regions.get(handle).ok_or(ENOENT)?;
            (r.range, g.notifier(handle).ok_or(EFAULT)?)
        };
        let target = FaultTarget {
            handle,
            region,
            notifier,
            window: u64::from(abi::MAX_WINDOW),
            limit: range.end,
            strided: None,
            // The range asked for, no more.
            blocks: false,
            nowait: false,
            mark: None,
        };
        let mut addr = range.start;
        while addr < range.end {
            let (next, _) =
                self.fault_and_map(addr, write, &target, &mut Record::default(), None)?;
            addr = next.max(addr + 1);
        }
        Ok(())
    }
}

#[kunit_tests(exanest_dma_region)]
mod tests {
    use super::*;
    use crate::exanest_core::{abi::ValidReg, region::RegionTable};

    fn vreg(start: u64, len: u64, access: u32, mode: u32) -> ValidReg {
        ValidReg {
            range: Range::new(start, len, 1 << 48).unwrap(),
            access,
            mode,
            window: 0,
            initiator: None,
            map_ahead: true,
        }
    }

    fn r(s: u64, l: u64) -> Range {
        Range::new(s, l, 1 << 48).unwrap()
    }

    const RW: u32 = abi::ACCESS_READ | abi::ACCESS_WRITE;

    /// An empty table, on the heap: one on the test's stack (7.5 KiB, built then moved) left
    /// too little of the 16 KiB stack for an interrupt's entry (the evaluation kernel
    /// overflowed it in `overlapping_regions`).
    #[inline(never)]
    fn table() -> KBox<RegionTable<MAX_REGIONS>> {
        KBox::new(RegionTable::new(), GFP_KERNEL).unwrap()
    }

    /// A range is found in the region that contains all of it, with the access asked.
    #[test]
    fn lookup_by_containment_and_access() {
        let mut t = table();
        let src = t
            .insert(&vreg(0x10000, 0x4000, abi::ACCESS_READ, 0))
            .unwrap();
        let dst = t
            .insert(&vreg(0x20000, 0x4000, abi::ACCESS_WRITE, 0))
            .unwrap();
        assert_eq!(t.find(&r(0x10800, 0x100), abi::ACCESS_READ), Ok(src));
        assert_eq!(t.find(&r(0x23f00, 0x100), abi::ACCESS_WRITE), Ok(dst));
        // Straddling the end of a region, or outside all: EFAULT; wrong access: EACCES.
        let e = |x| Error::from(t.find(&x, abi::ACCESS_READ).unwrap_err());
        assert_eq!(e(r(0x13f00, 0x200)), EFAULT);
        assert_eq!(e(r(0x30000, 0x10)), EFAULT);
        assert_eq!(e(r(0x20800, 0x100)), EACCES);
    }

    /// Overlapping regions share pages: either serves a lookup, and removing one leaves the
    /// other's lookups intact.
    #[test]
    fn overlapping_regions() {
        let mut t = table();
        let a = t.insert(&vreg(0x10000, 0x8000, RW, abi::MODE_PIN)).unwrap();
        let b = t
            .insert(&vreg(0x14000, 0x8000, RW, abi::MODE_ON_DEMAND))
            .unwrap();
        assert_ne!(a, b);
        let mid = r(0x15000, 0x1000);
        assert!(matches!(t.find(&mid, RW), Ok(h) if h == a || h == b));
        assert!(t.remove(a).is_ok());
        assert_eq!(t.find(&mid, RW), Ok(b));
        assert_eq!(t.find(&r(0x1a000, 0x1000), RW), Ok(b));
        assert!(t.find(&r(0x10000, 0x1000), RW).is_err());
    }

    /// The fault resolver only considers regions that are not pinned.
    #[test]
    fn resolver_skips_pinned() {
        let mut t = table();
        t.insert(&vreg(0x10000, 0x8000, RW, abi::MODE_PIN)).unwrap();
        let one = r(0x11000, 1);
        let not_pin = |x: &crate::exanest_core::region::Region| x.mode != abi::MODE_PIN;
        assert_eq!(t.find_with(&one, RW, not_pin), Err(abi::Errno::Fault));
        let od = t
            .insert(&vreg(0x10000, 0x2000, RW, abi::MODE_ON_DEMAND))
            .unwrap();
        assert_eq!(t.find_with(&one, RW, not_pin), Ok(od));
    }

    /// A region in use by a copy cannot go (EBUSY); an unknown handle is ENOENT.
    #[test]
    fn busy_and_unknown_handles() {
        let mut t = table();
        let h = t.insert(&vreg(0x10000, 0x1000, RW, 0)).unwrap();
        t.hold(h).unwrap();
        assert_eq!(Error::from(t.remove(h).unwrap_err()), EBUSY);
        t.release(h);
        assert!(t.remove(h).is_ok());
        assert_eq!(Error::from(t.remove(h).unwrap_err()), ENOENT);
        assert_eq!(Error::from(t.hold(h).unwrap_err()), ENOENT);
        assert_eq!(Error::from(t.remove(0).unwrap_err()), ENOENT);
    }

    /// The table holds MAX_REGIONS regions with distinct non-zero handles; one more is ENOSPC.
    #[test]
    fn limit_and_unique_handles() {
        let mut t = table();
        let mut seen = KVec::new();
        for i in 0..MAX_REGIONS as u64 {
            let h = t.insert(&vreg(0x10000 * (i + 1), 0x1000, RW, 0)).unwrap();
            assert!(h != 0 && !seen.contains(&h));
            seen.push(h, GFP_KERNEL).unwrap();
        }
        let e = t.insert(&vreg(0x1000, 0x1000, RW, 0)).unwrap_err();
        assert_eq!(Error::from(e), ENOSPC);
        assert_eq!(t.len(), MAX_REGIONS);
    }

    /// Registration requests are validated before anything happens, with abi.rst's errnos.
    #[test]
    fn registration_validation() {
        let lim = abi::Limits {
            va_end: 1 << 48,
            max_transfer: 1 << 30,
            modes: 7,
            default_window: 0,
        };
        let req = |addr, length, access, mode| abi::Reg {
            addr,
            length,
            access,
            mode,
            ..Default::default()
        };
        let e = |q: abi::Reg| Error::from(abi::check_reg(&q, &lim).unwrap_err());
        assert_eq!(e(req(0x1000, 0, RW, 0)), EINVAL);
        assert_eq!(e(req(u64::MAX - 10, 0x100, RW, 0)), EOVERFLOW);
        assert_eq!(e(req(1 << 48, 0x100, RW, 0)), EFAULT);
        assert_eq!(e(req(0x1000, 0x100, 1 << 7, 0)), EINVAL);
        assert_eq!(e(req(0x1000, 0x100, RW, 9)), EINVAL);
        assert!(abi::check_reg(&req(0x1000, 0x100, RW, abi::MODE_ON_DEMAND), &lim).is_ok());
        let lim_pin_only = abi::Limits { modes: 1, ..lim };
        let q = req(0x1000, 0x100, RW, abi::MODE_PREFAULT);
        let e = Error::from(abi::check_reg(&q, &lim_pin_only).unwrap_err());
        assert_eq!(e, EOPNOTSUPP);
    }
}
