// SPDX-License-Identifier: GPL-2.0-only

//! A process's use of one engine: its IOMMU domain, registered regions, copies and counters,
//! from open to release, and the ioctls of include/uapi/linux/exanest_dma.h.
//!
//! Lock order (whole module): `Engine::state` → `Session::inner` → `Session::map`, and
//! `Session::fault_lock` → `Session::inner` (never nested with `Engine::state`). `map` is also taken by the MMU notifier callback, from reclaim among other
//! places: nothing under it allocates with reclaim (odp.rs).
//! `Session::inner` is a mutex: every path that takes it runs in process context (ioctls, the
//! interrupt thread, release, unbind).

use crate::abi::{self, Errno, Range};
use crate::engine::{Engine, Hw};
use crate::fault::FaultQueue;
use crate::iommu::{Domain, PageMap};
use crate::odp::{self, FaultTarget, Mirror, Notifier};
use crate::region::RegionTable;
use crate::regs::{self, FaultCause, State};
use crate::sched::{Scheduler, Start};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    bindings,
    fs::File,
    ioctl::_IOC_SIZE,
    mm::Mm,
    new_poll_condvar,
    page::PAGE_SHIFT,
    prelude::*,
    sync::aref::ARef,
    sync::{
        new_mutex,
        poll::{PollCondVar, PollTable},
        Arc, ArcBorrow, CondVarTimeoutResult, Mutex,
    },
    time::{msecs_to_jiffies, Instant, Monotonic},
    transmute::{AsBytes, FromBytes},
    types::ForeignOwnable,
    uaccess::UserSlice,
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
};

/// EPOLLIN | EPOLLRDNORM (uapi eventpoll.h; bindgen cannot see through `__force` casts).
const POLLIN_MASK: u32 = 0x0001 | 0x0040;
/// EPOLLERR | EPOLLHUP.
const POLLHUP_MASK: u32 = 0x0008 | 0x0010;

/// The poll file operation, called by the C shim's `.poll`.
///
/// # Safety
///
/// `file` is an open file of an exanest misc device (its private data is the `Arc<Session>` that
/// `open` stored) and `pt` the poll table of the current poll call.
#[no_mangle]
pub(crate) unsafe extern "C" fn exanest_rust_poll(
    file: *mut bindings::file,
    pt: *mut bindings::poll_table_struct,
) -> bindings::__poll_t {
    // SAFETY: Per the contract, the private data is an `Arc<Session>` from `into_foreign`, alive
    // until release, which cannot run during poll.
    let session: ArcBorrow<'_, Session> = unsafe { <Arc<Session>>::borrow((*file).private_data) };
    // SAFETY: `file` is valid for the duration of the call.
    let f = unsafe { File::from_raw_file(file) };
    // SAFETY: `pt` is the poll table of this call (or NULL), valid for its duration.
    let table = unsafe { PollTable::from_raw(pt) };
    session.poll_mask(f, table)
}

/// The MMU interval notifier callback, called by the C shim.
///
/// # Safety
///
/// `token` is the session the notifier was inserted for (notifiers are removed before their
/// session is freed) and `mni` the notifier.
#[no_mangle]
pub(crate) unsafe extern "C" fn exanest_rust_invalidate(
    token: *mut core::ffi::c_void,
    mni: *mut bindings::mmu_interval_notifier,
    start: usize,
    end: usize,
    blockable: bool,
    cur_seq: usize,
) -> bool {
    // SAFETY: Per the contract.
    let session = unsafe { &*token.cast::<Session>() };
    session.invalidate(mni, start as u64, end as u64, blockable, cur_seq)
}

/// The monotonic clock in nanoseconds (callable in any context).
fn ktime_ns() -> u64 {
    // SAFETY: ktime_get() may be called from any context, hard IRQ included.
    u64::try_from(unsafe { bindings::ktime_get() }).unwrap_or(0)
}

/// Microseconds since `t`.
fn micros(t: Instant<Monotonic>) -> u64 {
    u64::try_from(t.elapsed().as_micros_ceil()).unwrap_or(0)
}

/// Microseconds from `a` to `b`.
fn micros_between(a: Instant<Monotonic>, b: Instant<Monotonic>) -> u64 {
    u64::try_from((b - a).as_micros_ceil()).unwrap_or(0)
}

/// Regions one process may hold.
pub(crate) const MAX_REGIONS: usize = 64;
/// Copies one process may have queued, running or finished but not yet waited for.
pub(crate) const MAX_INFLIGHT: usize = 64;
/// Most channels the scheduler handles.
const MAX_CH: usize = regs::MAX_CHANNELS;
/// Faults the IOMMU fault handler can queue before the engine's own reports take over.
const FAULT_QUEUE: usize = 64;
/// Touch-ahead window of regions registered without one: adaptive (1 page, doubling on
/// sequential faults up to 511), chosen from the evaluation's sweep (Documentation/evaluation.rst):
/// as few faults as a large window on streams, as little memory as a small one on sparse access.
const DEFAULT_WINDOW: u64 = abi::WINDOW_ADAPTIVE as u64;
/// A channel that keeps faulting at the same address after its fault was resolved is NACKed.
const MAX_REFAULTS: u32 = 8;

// SAFETY: Plain `#[repr(C)]` integer structs without padding: every bit pattern is valid and
// every byte is initialised.
unsafe impl FromBytes for abi::Info {}
// SAFETY: See above.
unsafe impl AsBytes for abi::Info {}
// SAFETY: See above.
unsafe impl FromBytes for abi::Reg {}
// SAFETY: See above.
unsafe impl AsBytes for abi::Reg {}
// SAFETY: See above.
unsafe impl FromBytes for abi::Dereg {}
// SAFETY: See above.
unsafe impl FromBytes for abi::Copy {}
// SAFETY: See above.
unsafe impl AsBytes for abi::Copy {}
// SAFETY: See above.
unsafe impl FromBytes for abi::Wait {}
// SAFETY: See above.
unsafe impl AsBytes for abi::Wait {}
// SAFETY: See above.
unsafe impl AsBytes for abi::Counters {}
// SAFETY: See above.
unsafe impl FromBytes for abi::Advise {}
// SAFETY: See above.
unsafe impl AsBytes for abi::Latency {}
// SAFETY: See above.
unsafe impl FromBytes for abi::RegionStats {}
// SAFETY: See above.
unsafe impl AsBytes for abi::RegionStats {}

/// The kernel error for each ABI error.
pub(crate) fn errno(e: Errno) -> Error {
    match e {
        Errno::Inval => EINVAL,
        Errno::Overflow => EOVERFLOW,
        Errno::Fault => EFAULT,
        Errno::Acces => EACCES,
        Errno::NoEnt => ENOENT,
        Errno::NoSpc => ENOSPC,
        Errno::Again => EAGAIN,
        Errno::TooBig => E2BIG,
        Errno::OpNotSupp => EOPNOTSUPP,
        Errno::Busy => EBUSY,
    }
}

/// What the MMU notifier callback touches, under `Session::map`.
struct MapState {
    /// The domain; taken out (and dropped outside this lock) at teardown.
    domain: Option<Arc<Domain>>,
    /// Pages mapped on demand (not pinned).
    mirror: Mirror,
    /// Invalidations that unmapped something.
    invalidations: u64,
}

struct Inner {
    /// Torn down (release or unbind): every call fails with ENODEV.
    dead: bool,
    pages: PageMap,
    regions: RegionTable<MAX_REGIONS>,
    sched: Scheduler<MAX_CH, MAX_INFLIGHT>,
    /// The MMU notifier of each prefault or on-demand region.
    notifiers: KVec<(u32, Notifier)>,
    /// Channels the engine reported in fault-wait, for the fault worker.
    fault_pending: u32,
    /// The errno a channel's NACKed transfer ends with (0: none).
    chan_errno: [i32; MAX_CH],
    /// Last fault address of each channel and how often it came back.
    refaults: [(u64, u32); MAX_CH],
    /// When each channel's pending fault was reported by the engine.
    fault_at: [Option<Instant<Monotonic>>; MAX_CH],
    /// Fault resolution times.
    latency: abi::Latency,
    counters: abi::Counters,
}

/// One open file of an engine.
#[pin_data]
pub(crate) struct Session {
    engine: Arc<Engine>,
    /// The address space of the process that opened the engine (mmgrab'd for identity checks).
    mm: ARef<Mm>,
    va_end: u64,
    #[pin]
    inner: Mutex<Inner>,
    /// The domain and the on-demand mappings: the lock the MMU notifier takes.
    #[pin]
    map: Mutex<MapState>,
    /// Notified whenever a copy ends; poll() waits on it.
    #[pin]
    done: PollCondVar,
    /// Filled by the IOMMU fault handler, drained by the fault worker.
    faults: FaultQueue<FAULT_QUEUE>,
    /// Faults the IOMMU fault handler was called for.
    iommu_faults: AtomicU64,
    /// The fault worker.
    #[pin]
    work: Work<Session>,
    /// Held while faults are resolved and while notifiers are removed.
    #[pin]
    fault_lock: Mutex<()>,
}

impl_has_work! {
    impl HasWork<Self> for Session { self.work }
}

impl WorkItem for Session {
    type Pointer = Arc<Session>;

    fn run(this: Arc<Session>) {
        this.service_faults();
    }
}

/// The IOMMU fault handler: record and kick the worker. May run in hard-IRQ context
/// (arm-smmu, `dev` NULL) or in the SMMUv3 event thread; allocates nothing, takes no lock.
///
/// # Safety
///
/// `token` is the session pointer given to `Domain::attach`; the domain (and so this handler)
/// is gone before the session is freed.
unsafe extern "C" fn exanest_iommu_fault(
    _domain: *mut bindings::iommu_domain,
    _dev: *mut bindings::device,
    iova: usize,
    flags: i32,
    token: *mut core::ffi::c_void,
) -> i32 {
    // SAFETY: Per the contract, `token` came from `Arc::into_raw`-equivalent `&*arc` of a live
    // session.
    let session = unsafe { ArcBorrow::<Session>::from_raw(token.cast()) };
    let write = flags as u32 & bindings::IOMMU_FAULT_WRITE != 0;
    record_fault(
        &session.faults,
        &session.iommu_faults,
        iova as u64,
        write,
        || session.kick(),
    );
    0
}

/// The part of the IOMMU fault handler that must be safe in hard-IRQ context: count, record
/// (deduplicated, no allocation), and kick the worker.
fn record_fault(
    queue: &FaultQueue<FAULT_QUEUE>,
    count: &AtomicU64,
    iova: u64,
    write: bool,
    kick: impl FnOnce(),
) {
    count.fetch_add(1, Ordering::Relaxed);
    queue.push_at(iova, write, PAGE_SHIFT as u32, ktime_ns());
    // Even when the push was a duplicate or overflowed: a kick of a queued worker is free,
    // and after an overflow the worker must look at every channel.
    kick();
}

impl Session {
    /// Open the engine for the current process: EBUSY if another file has it.
    pub(crate) fn open(engine: Arc<Engine>) -> Result<Arc<Self>> {
        let task = kernel::current!();
        let mm: ARef<Mm> = ARef::from(&**task.mm().ok_or(EINVAL)?);
        let mut st = engine.state.lock();
        if st.dead {
            return Err(ENODEV);
        }
        if st.owner.is_some() {
            return Err(EBUSY);
        }
        // The IOMMU core does not check the aperture: user addresses above it must be refused.
        // Every SMMU stage-1 domain here has a 48-bit aperture; `open` checks it below.
        let va_end = 1u64 << 48;
        let channels = engine.channels;
        let session_engine = engine.clone();
        let session = Arc::pin_init(
            try_pin_init!(Session {
                engine: session_engine,
                mm,
                va_end,
                inner <- new_mutex!(Inner {
                    dead: false,
                    pages: PageMap::new(),
                    regions: RegionTable::new(),
                    sched: Scheduler::new(channels),
                    notifiers: KVec::new(),
                    fault_pending: 0,
                    chan_errno: [0; MAX_CH],
                    refaults: [(0, 0); MAX_CH],
                    fault_at: [None; MAX_CH],
                    latency: abi::Latency::default(),
                    counters: abi::Counters::default(),
                }, "Session::inner"),
                map <- new_mutex!(MapState {
                    domain: None,
                    mirror: Mirror::new(),
                    invalidations: 0,
                }, "Session::map"),
                done <- new_poll_condvar!("Session::done"),
                faults: FaultQueue::new(),
                iommu_faults: AtomicU64::new(0),
                work <- new_work!("Session::work"),
                fault_lock <- new_mutex!((), "Session::fault_lock"),
            }? Error),
            GFP_KERNEL,
        )?;
        let token = core::ptr::from_ref::<Session>(&session).cast_mut().cast();
        // SAFETY: The session outlives its domain: teardown drops the domain, and the session
        // is only freed after its teardown (release or unbind).
        let domain =
            unsafe { Domain::attach(engine.dev.clone(), Some(exanest_iommu_fault), token)? };
        if domain.aperture_end() < va_end {
            return Err(ENODEV);
        }
        let domain = Arc::new(domain, GFP_KERNEL)?;
        session.map.lock().domain = Some(domain);
        st.owner = Some(session.clone());
        Ok(session)
    }

    fn limits(&self) -> abi::Limits {
        abi::Limits {
            va_end: self.va_end,
            max_transfer: u64::from(self.engine.max_len),
            modes: (1 << abi::MODE_PIN) | (1 << abi::MODE_PREFAULT) | (1 << abi::MODE_ON_DEMAND),
            default_window: DEFAULT_WINDOW as u32,
        }
    }

    /// Calls that touch memory must come from the process that opened the engine.
    fn check_caller(&self) -> Result {
        let task = kernel::current!();
        match task.mm() {
            Some(mm) if core::ptr::eq(mm.as_raw(), self.mm.as_raw()) => Ok(()),
            _ => Err(EPERM),
        }
    }

    fn info(&self) -> abi::Info {
        abi::Info {
            abi_version: abi::ABI_VERSION,
            hw_version: self.engine.hw_version,
            channels: self.engine.channels,
            modes: self.limits().modes,
            max_transfer: u64::from(self.engine.max_len),
            max_regions: MAX_REGIONS as u32,
            max_inflight: MAX_INFLIGHT as u32,
            reserved: [0; 4],
        }
    }

    fn register(&self, req: &abi::Reg) -> Result<u32> {
        let v = abi::check_reg(req, &self.limits()).map_err(errno)?;
        self.check_caller()?;
        if v.mode == abi::MODE_PIN {
            return self.register_pinned(&v);
        }
        // Watch the range before anything can be mapped in it. Inserted without `inner`:
        // insertion may take mm locks that an invalidation holds while it waits for `inner`.
        let token = core::ptr::from_ref(self).cast();
        let notifier = Notifier::insert(self.mm.as_raw(), &v.range, token)?;
        let handle = {
            let mut g = self.inner.lock();
            let inner = &mut *g;
            let r = if inner.dead {
                Err(ENODEV)
            } else {
                inner.regions.insert(&v).map_err(errno)
            };
            match r {
                Ok(h) => match inner.notifiers.push((h, notifier), GFP_KERNEL) {
                    Ok(()) => Ok(h),
                    Err(e) => {
                        let _ = inner.regions.remove(h);
                        Err(e.into())
                    }
                },
                Err(e) => Err(e),
            }
        };
        let handle = match handle {
            Ok(h) => h,
            Err(e) => {
                let _g = self.fault_lock.lock();
                // SAFETY: Not recorded anywhere, so removed once; `fault_lock` held, `inner` not.
                unsafe { notifier.remove() };
                return Err(e);
            }
        };
        if v.mode == abi::MODE_PREFAULT {
            let write = v.access & abi::ACCESS_WRITE != 0;
            let res = {
                let _g = self.fault_lock.lock();
                self.prefault(&v.range, &v.range, write, notifier)
            };
            if let Err(e) = res {
                let _ = self.deregister(&abi::Dereg { handle, flags: 0 });
                return Err(e);
            }
        }
        Ok(handle)
    }

    /// Fault in and map `range` of `region` now (prefault mode, advise), without pinning.
    /// Called with `fault_lock` held.
    fn prefault(&self, range: &Range, region: &Range, write: bool, notifier: Notifier) -> Result {
        let mut addr = range.start;
        while addr < range.end {
            let target = FaultTarget {
                region: *region,
                notifier,
                window: u64::from(abi::MAX_WINDOW),
                limit: range.end,
            };
            let (next, _) = self.fault_and_map(addr, write, &target)?;
            addr = next.max(addr + 1);
        }
        Ok(())
    }

    /// Fault in the window at `addr` and map it, retrying while invalidations race with it.
    /// Returns the end of what was faulted in and the pages newly mapped. Called with
    /// `fault_lock` held.
    fn fault_and_map(&self, addr: u64, write: bool, target: &FaultTarget) -> Result<(u64, u64)> {
        loop {
            let t0 = Instant::<Monotonic>::now();
            let f = odp::fault_in(&self.mm, addr, write, target)?;
            let t1 = Instant::<Monotonic>::now();
            let mut nodes = odp::reserve_nodes(&f)?;
            let mut g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            let mut m = self.map.lock();
            let ms = &mut *m;
            let dom = ms.domain.as_ref().ok_or(ENODEV)?;
            let pages = &g.pages;
            let mapped = ms.mirror.map(dom, target.notifier, &f, &mut nodes, |vpn| {
                pages.covers(vpn, write)
            })?;
            g.latency.fault_in.record(micros_between(t0, t1));
            if let Some(n) = mapped {
                g.latency.map.record(micros(t1));
                g.counters.pages_resolved += n;
                return Ok((f.end(), n));
            }
        }
    }

    fn register_pinned(&self, v: &abi::ValidReg) -> Result<u32> {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return Err(ENODEV);
        }
        if inner.regions.len() >= MAX_REGIONS {
            return Err(ENOSPC);
        }
        // Pinning may enter reclaim, which may call the MMU notifier: only `inner` is held.
        let dom = self.map.lock().domain.clone().ok_or(ENODEV)?;
        let (first, last) = v.range.pages(PAGE_SHIFT as u32);
        let write = v.access & abi::ACCESS_WRITE != 0;
        inner.pages.map_pinned(&dom, first, last, write)?;
        match inner.regions.insert(v) {
            Ok(h) => Ok(h),
            Err(e) => {
                inner.pages.unmap_pages(&dom, first, last);
                Err(errno(e))
            }
        }
    }

    fn deregister(&self, req: &abi::Dereg) -> Result {
        let handle = abi::check_dereg(req).map_err(errno)?;
        let notifier = {
            let mut g = self.inner.lock();
            let inner = &mut *g;
            if inner.dead {
                return Err(ENODEV);
            }
            let r = inner.regions.remove(handle).map_err(errno)?;
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
                let mut m = self.map.lock();
                let ms = &mut *m;
                if let Some(dom) = ms.domain.as_ref() {
                    ms.mirror.unmap_range(dom, r.range.start, r.range.end);
                }
            }
            notifier
        };
        if let Some(n) = notifier {
            let _g = self.fault_lock.lock();
            // SAFETY: Taken out of `notifiers`, so removed once; `fault_lock` held, `inner` not.
            unsafe { n.remove() };
        }
        Ok(())
    }

    fn start(&self, inner: &mut Inner, s: Start) {
        let e = s.entry;
        inner.chan_errno[s.channel as usize] = 0;
        inner.refaults[s.channel as usize] = (0, 0);
        let len = e.copy.src.len() as u32;
        if let Err(err) = self
            .engine
            .start(s.channel, e.copy.src.start, e.copy.dst.start, len)
        {
            // The device is gone: end the copy here.
            self.finish(inner, s.channel, err.to_errno(), 0);
        }
    }

    fn copy(&self, req: &abi::Copy) -> Result<(u64, u32)> {
        let v = abi::check_copy(req, &self.limits()).map_err(errno)?;
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return Err(ENODEV);
        }
        let src = inner
            .regions
            .find(&v.src, abi::ACCESS_READ)
            .map_err(errno)?;
        let dst = inner
            .regions
            .find(&v.dst, abi::ACCESS_WRITE)
            .map_err(errno)?;
        let (cookie, start) = inner.sched.submit(v, src, dst).map_err(errno)?;
        // Both regions exist (found above), so holding them cannot fail.
        let _ = inner.regions.hold(src);
        let _ = inner.regions.hold(dst);
        let channel = match start {
            Some(s) => {
                let ch = s.channel;
                self.start(inner, s);
                ch
            }
            None => u32::MAX,
        };
        Ok((cookie, channel))
    }

    /// A copy ended on `channel`: account, release its regions, start the next queued copy.
    fn finish(&self, inner: &mut Inner, channel: u32, status: i32, bytes: u64) {
        let (ended, next) = inner.sched.complete(channel, status, bytes);
        if let Some(e) = ended {
            inner.regions.release(e.src_handle);
            inner.regions.release(e.dst_handle);
            inner.counters.bytes += bytes;
            if status == 0 {
                inner.counters.copies += 1;
            } else {
                inner.counters.copy_errors += 1;
            }
        }
        if let Some(s) = next {
            self.start(inner, s);
        }
        self.done.notify_all();
    }

    /// Queue the fault worker (any context).
    fn kick(&self) {
        // SAFETY: `self` lives in an `Arc` (sessions are only created by `Arc::pin_init`).
        let arc: Arc<Session> = unsafe { ArcBorrow::from_raw(self) }.into();
        // Already queued: the queued run will see this fault too.
        let _ = workqueue::system_highpri().enqueue(arc);
    }

    /// The engine raised its interrupt for the channels in `pending`.
    pub(crate) fn on_interrupt(&self, pending: u32) {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return;
        }
        for n in 0..self.engine.channels {
            if pending & (1 << n) == 0 {
                continue;
            }
            let Ok(rep) = self.engine.report(n) else {
                continue;
            };
            match rep.status.state {
                State::Done => self.finish(inner, n, 0, u64::from(rep.done_bytes)),
                State::Error => {
                    let err = match rep.status.error {
                        regs::Error::Aborted if inner.chan_errno[n as usize] != 0 => {
                            inner.chan_errno[n as usize]
                        }
                        regs::Error::Aborted => ECANCELED.to_errno(),
                        regs::Error::NoMaster => EIO.to_errno(),
                        _ => EINVAL.to_errno(),
                    };
                    self.finish(inner, n, err, u64::from(rep.done_bytes));
                }
                State::Fault => {
                    // The fault worker resolves it (or NACKs it) and resumes the channel.
                    inner.counters.faults += 1;
                    inner.fault_pending |= 1 << n;
                    inner.fault_at[n as usize] = Some(Instant::now());
                    self.kick();
                }
                _ => {}
            }
        }
    }

    /// The fault worker: resolve what the IOMMU reported, then service every channel that the
    /// engine reported in fault-wait (all running ones when IOMMU reports were lost).
    fn service_faults(&self) {
        let _g = self.fault_lock.lock();
        loop {
            let mut busy = false;
            while let Some((f, stamp)) = self.faults.pop_stamped() {
                busy = true;
                // Errors are the channel's business: it reports the same fault.
                if self.resolve(f.page, f.write, u64::MAX).is_ok() {
                    let us = ktime_ns().saturating_sub(stamp) / 1000;
                    self.inner.lock().latency.handler.record(us);
                }
            }
            let overflow = self.faults.take_overflow();
            let pending = {
                let mut g = self.inner.lock();
                if g.dead {
                    return;
                }
                let mut p = core::mem::take(&mut g.fault_pending);
                if overflow {
                    p |= g.sched.running_mask();
                }
                p
            };
            for n in 0..self.engine.channels {
                if pending & (1 << n) != 0 {
                    busy = true;
                    self.service_channel(n);
                }
            }
            if !busy {
                return;
            }
        }
    }

    /// Resolve the fault channel `n` waits on, then resume it, or NACK it with the errno.
    fn service_channel(&self, n: u32) {
        {
            let mut g = self.inner.lock();
            if let Some(t) = g.fault_at[n as usize] {
                g.latency.queue.record(micros(t));
            }
        }
        let Ok(rep) = self.engine.report(n) else {
            return;
        };
        if rep.status.state != State::Fault {
            return;
        }
        let limit = {
            let g = self.inner.lock();
            match g.sched.running(n) {
                Some(e) if rep.fault.write => e.copy.dst.end,
                Some(e) => e.copy.src.end,
                None => u64::MAX,
            }
        };
        let res = match rep.fault.cause {
            FaultCause::Translation => self.resolve(rep.fault_addr, rep.fault.write, limit),
            _ => Err(EIO),
        };
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return;
        }
        let i = n as usize;
        if let Some(t) = inner.fault_at[i].take() {
            inner.latency.total.record(micros(t));
        }
        if let Ok(one) = Range::new(rep.fault_addr, 1, u64::MAX) {
            let access = if rep.fault.write {
                abi::ACCESS_WRITE
            } else {
                abi::ACCESS_READ
            };
            if let Ok(h) = inner.regions.find(&one, access) {
                if let Some(r) = inner.regions.get_mut(h) {
                    r.faults += 1;
                }
            }
        }
        let (last, count) = inner.refaults[i];
        let count = if last == rep.fault_addr { count + 1 } else { 1 };
        inner.refaults[i] = (rep.fault_addr, count);
        let res = match res {
            Ok(()) if count > MAX_REFAULTS => Err(EFAULT),
            r => r,
        };
        match res {
            Ok(()) => {
                inner.counters.faults_resolved += 1;
                inner.counters.retransmissions += 1;
                if self.engine.resume(n).is_err() {
                    self.finish(inner, n, ENODEV.to_errno(), u64::from(rep.done_bytes));
                }
            }
            Err(e) => {
                inner.counters.nacks += 1;
                inner.chan_errno[i] = e.to_errno();
                if self.engine.nack(n).is_err() {
                    self.finish(inner, n, ENODEV.to_errno(), u64::from(rep.done_bytes));
                }
            }
        }
    }

    /// Make the page at `addr` reachable by the engine (read, or write too), with touch-ahead
    /// up to `limit`. Called with `fault_lock` held.
    fn resolve(&self, addr: u64, write: bool, limit: u64) -> Result {
        let target = {
            let mut g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            let vpn = addr >> PAGE_SHIFT;
            if g.pages.covers(vpn, write) || self.map.lock().mirror.covers(vpn, write) {
                // Already resolved: both fault sources reported it.
                return Ok(());
            }
            let access = if write {
                abi::ACCESS_WRITE
            } else {
                abi::ACCESS_READ
            };
            let one = Range::new(addr, 1, u64::MAX).map_err(errno)?;
            let h = g
                .regions
                .find_with(&one, access, |r| r.mode != abi::MODE_PIN)
                .map_err(errno)?;
            let r = g.regions.get_mut(h).ok_or(EFAULT)?;
            let window = if r.window == abi::WINDOW_ADAPTIVE {
                r.adapt.window_for(addr >> PAGE_SHIFT)
            } else {
                u64::from(r.window)
            };
            let region = r.range;
            let notifier = g
                .notifiers
                .iter()
                .find(|(x, _)| *x == h)
                .map(|(_, n)| *n)
                .ok_or(EFAULT)?;
            (
                h,
                FaultTarget {
                    region,
                    notifier,
                    window,
                    limit,
                },
            )
        };
        let (h, target) = target;
        let (end, mapped) = self.fault_and_map(addr, write, &target)?;
        let mut g = self.inner.lock();
        g.counters.touch_ahead_pages += mapped.saturating_sub(1);
        if let Some(r) = g.regions.get_mut(h) {
            r.pages_resolved += mapped;
            r.adapt.resolved(end >> PAGE_SHIFT);
        }
        Ok(())
    }

    /// The debugfs view of the session: counters, regions, the latency histogram.
    pub(crate) fn write_stats(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (c, lat) = (self.counters(), self.inner.lock().latency);
        writeln!(f, "{c}")?;
        let g = self.inner.lock();
        for r in g.regions.iter() {
            writeln!(
                f,
                "region {} mode {} {:#x}-{:#x} access {} window {} faults {} pages-resolved {}",
                r.handle,
                ["pin", "prefault", "on-demand"][(r.mode as usize).min(2)],
                r.range.start,
                r.range.end,
                r.access,
                r.window,
                r.faults,
                r.pages_resolved
            )?;
        }
        drop(g);
        for (name, h) in [
            ("resolve-latency-us", &lat.total),
            ("queue-us", &lat.queue),
            ("fault-in-us", &lat.fault_in),
            ("map-us", &lat.map),
            ("handler-us", &lat.handler),
        ] {
            write!(f, "{name}")?;
            for (i, n) in h.buckets.iter().enumerate() {
                if *n != 0 {
                    write!(f, " <{}:{}", 2u64 << i, n)?;
                }
            }
            writeln!(
                f,
                "\n{name} p50 <{} p99 <{}",
                h.percentile(50).unwrap_or(0),
                h.percentile(99).unwrap_or(0)
            )?;
        }
        Ok(())
    }

    /// EXANEST_DMA_IOC_ADVISE: map a sub-range of a prefault or on-demand region now.
    fn advise(&self, req: &abi::Advise) -> Result {
        let (range, write) = abi::check_advise(req, &self.limits()).map_err(errno)?;
        self.check_caller()?;
        let _f = self.fault_lock.lock();
        let (region, notifier) = {
            let g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            let access = if write {
                abi::ACCESS_WRITE
            } else {
                abi::ACCESS_READ
            };
            let h = g.regions.find(&range, access).map_err(errno)?;
            let r = g.regions.get(h).ok_or(EFAULT)?;
            if r.mode == abi::MODE_PIN {
                // Pinned regions are mapped from registration on.
                return Ok(());
            }
            let n = g
                .notifiers
                .iter()
                .find(|(x, _)| *x == h)
                .map(|(_, n)| *n)
                .ok_or(EFAULT)?;
            (r.range, n)
        };
        self.prefault(&range, &region, write, notifier)
    }

    /// The MMU notifier callback: unmap what the mm is about to change.
    fn invalidate(
        &self,
        mni: *mut bindings::mmu_interval_notifier,
        start: u64,
        end: u64,
        blockable: bool,
        cur_seq: usize,
    ) -> bool {
        let mut g = if blockable {
            self.map.lock()
        } else {
            match self.map.try_lock() {
                Some(g) => g,
                None => return false,
            }
        };
        // SAFETY: `mni` is the notifier of this callback; `map`, the lock that orders it
        // against `Mirror::map`, is held.
        unsafe { Notifier::set_seq(mni, cur_seq) };
        let ms = &mut *g;
        if let Some(dom) = ms.domain.as_ref() {
            if ms.mirror.unmap_range(dom, start, end) > 0 {
                ms.invalidations += 1;
            }
        }
        true
    }

    fn wait(&self, req: &abi::Wait) -> Result<(i32, u64)> {
        abi::check_wait(req).map_err(errno)?;
        let deadline_ms = if req.timeout_ns < 0 {
            None
        } else {
            let ms = req.timeout_ns.unsigned_abs().div_ceil(1_000_000);
            Some(u32::try_from(ms).unwrap_or(u32::MAX))
        };
        let mut jiffies = deadline_ms.map(msecs_to_jiffies);
        let mut g = self.inner.lock();
        loop {
            if let Some(r) = g.sched.reap(req.cookie).map_err(errno)? {
                return Ok(r);
            }
            if g.dead {
                return Err(ENODEV);
            }
            match jiffies {
                Some(0) => return Err(ETIMEDOUT),
                Some(j) => match self.done.wait_interruptible_timeout(&mut g, j) {
                    CondVarTimeoutResult::Timeout => jiffies = Some(0),
                    CondVarTimeoutResult::Woken { jiffies: left } => jiffies = Some(left),
                    CondVarTimeoutResult::Signal { .. } => return Err(ERESTARTSYS),
                },
                None => {
                    if self.done.wait_interruptible(&mut g) {
                        return Err(ERESTARTSYS);
                    }
                }
            }
        }
    }

    /// poll(): readable when a finished copy waits to be collected; HUP once the device is gone.
    fn poll_mask(&self, file: &File, table: PollTable<'_>) -> u32 {
        table.register_wait(file, &self.done);
        let g = self.inner.lock();
        if g.sched.has_done() {
            POLLIN_MASK
        } else if g.dead {
            POLLHUP_MASK
        } else {
            0
        }
    }

    fn counters(&self) -> abi::Counters {
        let g = self.inner.lock();
        let mut c = g.counters;
        c.regions = g.regions.len() as u64;
        let m = self.map.lock();
        c.pages_mapped = g.pages.pinned() + m.mirror.len();
        c.pages_pinned = g.pages.pinned();
        c.invalidations = m.invalidations;
        c.huge_mappings = m.mirror.blocks();
        c.iommu_faults = self.iommu_faults.load(Ordering::Relaxed);
        c
    }

    /// Stop the engine's work for this session and give everything back: end copies, unmap and
    /// unpin every page, detach the domain. Idempotent. Called with `Engine::state` held.
    /// Returns the notifiers, which the caller removes once it has released `Engine::state`.
    fn teardown(&self, status: Error) -> KVec<(u32, Notifier)> {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return KVec::new();
        }
        inner.dead = true;
        // Stop the channels first: no DMA may run once pages go back to the process.
        self.engine.reset();
        inner.sched.abort_all(status.to_errno(), |_| {});
        inner.regions.drain(|_| {});
        let dom = {
            let mut m = self.map.lock();
            let ms = &mut *m;
            if let Some(dom) = ms.domain.as_ref() {
                ms.mirror.unmap_range(dom, 0, u64::MAX);
            }
            ms.domain.take()
        };
        if let Some(dom) = dom {
            inner.pages.clear(&dom);
            // Detached and freed when the last user drops it, outside `map`.
            drop(dom);
        }
        self.done.notify_all();
        core::mem::take(&mut inner.notifiers)
    }

    /// Remove notifiers taken out by `teardown` (without `Engine::state` or `inner`).
    pub(crate) fn remove_notifiers(&self, notifiers: KVec<(u32, Notifier)>) {
        let _g = self.fault_lock.lock();
        for (_, n) in notifiers {
            // SAFETY: Taken out of `inner.notifiers`, so removed once; `fault_lock` held.
            unsafe { n.remove() };
        }
    }

    /// The file is closed (last reference).
    pub(crate) fn shutdown(&self, status: Error) {
        let notifiers = {
            let mut st = self.engine.state.lock();
            let n = self.teardown(status);
            if st.owner.as_ref().is_some_and(|o| core::ptr::eq(&**o, self)) {
                st.owner = None;
            }
            n
        };
        self.remove_notifiers(notifiers);
    }

    /// Unbind: called with `Engine::state` held by the caller, which then removes the returned
    /// notifiers with [`Session::remove_notifiers`].
    pub(crate) fn teardown_locked(&self) -> KVec<(u32, Notifier)> {
        self.teardown(ENODEV)
    }

    /// The ioctl entry point.
    pub(crate) fn ioctl(this: ArcBorrow<'_, Session>, cmd: u32, arg: usize) -> Result<isize> {
        let slice = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd));
        match cmd {
            abi::IOC_INFO => {
                slice.writer().write(&this.info())?;
            }
            abi::IOC_REG => {
                let (mut r, mut w) = slice.reader_writer();
                let mut req: abi::Reg = r.read()?;
                req.handle = this.register(&req)?;
                if let Err(e) = w.write(&req) {
                    // User space cannot learn the handle: drop the region again.
                    let _ = this.deregister(&abi::Dereg {
                        handle: req.handle,
                        flags: 0,
                    });
                    return Err(e);
                }
            }
            abi::IOC_DEREG => {
                let req: abi::Dereg = slice.reader().read()?;
                this.deregister(&req)?;
            }
            abi::IOC_COPY => {
                let (mut r, mut w) = slice.reader_writer();
                let mut req: abi::Copy = r.read()?;
                let (cookie, channel) = this.copy(&req)?;
                req.cookie = cookie;
                req.channel = channel;
                w.write(&req)?;
            }
            abi::IOC_WAIT => {
                let (mut r, mut w) = slice.reader_writer();
                let mut req: abi::Wait = r.read()?;
                let (status, bytes) = this.wait(&req)?;
                req.status = status;
                req.bytes_done = bytes;
                w.write(&req)?;
            }
            abi::IOC_COUNTERS => {
                slice.writer().write(&this.counters())?;
            }
            abi::IOC_ADVISE => {
                let req: abi::Advise = slice.reader().read()?;
                this.advise(&req)?;
            }
            abi::IOC_LATENCY => {
                let l = this.inner.lock().latency;
                slice.writer().write(&l)?;
            }
            abi::IOC_REGION_STATS => {
                let (mut r, mut w) = slice.reader_writer();
                let req: abi::RegionStats = r.read()?;
                let g = this.inner.lock();
                let reg = g.regions.get(req.handle).ok_or(ENOENT)?;
                let out = abi::RegionStats {
                    handle: req.handle,
                    mode: reg.mode,
                    faults: reg.faults,
                    pages_resolved: reg.pages_resolved,
                    reserved: [0; 2],
                };
                drop(g);
                w.write(&out)?;
            }
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }
}

#[kunit_tests(exanest_dma_session)]
mod tests {
    use super::*;
    use crate::abi::{ValidCopy, ValidReg};

    fn vreg(start: u64, len: u64, access: u32) -> ValidReg {
        ValidReg {
            range: Range::new(start, len, 1 << 48).unwrap(),
            access,
            mode: abi::MODE_PIN,
            window: 0,
        }
    }

    /// Every ABI error maps to the errno Documentation/abi.rst promises.
    #[test]
    fn errno_mapping() {
        assert_eq!(errno(Errno::Inval), EINVAL);
        assert_eq!(errno(Errno::Overflow), EOVERFLOW);
        assert_eq!(errno(Errno::Fault), EFAULT);
        assert_eq!(errno(Errno::Acces), EACCES);
        assert_eq!(errno(Errno::NoEnt), ENOENT);
        assert_eq!(errno(Errno::NoSpc), ENOSPC);
        assert_eq!(errno(Errno::Again), EAGAIN);
        assert_eq!(errno(Errno::TooBig), E2BIG);
        assert_eq!(errno(Errno::OpNotSupp), EOPNOTSUPP);
        assert_eq!(errno(Errno::Busy), EBUSY);
    }

    /// The IOMMU fault handler's recording path, called from hard-IRQ context (as arm-smmu
    /// calls it on the QFDB): it allocates nothing and takes no sleeping lock (lockdep and
    /// DEBUG_ATOMIC_SLEEP would report it), and the worker it queues from there runs.
    #[test]
    fn fault_handler_records_from_hard_irq() {
        use kernel::sync::Completion;
        #[pin_data]
        struct Ctx {
            q: FaultQueue<FAULT_QUEUE>,
            n: AtomicU64,
            #[pin]
            ran: Completion,
            #[pin]
            work: Work<Ctx>,
        }
        impl_has_work! { impl HasWork<Self> for Ctx { self.work } }
        impl WorkItem for Ctx {
            type Pointer = Arc<Ctx>;
            fn run(this: Arc<Ctx>) {
                this.ran.complete_all();
            }
        }
        extern "C" fn in_irq(arg: *mut core::ffi::c_void) {
            // SAFETY: `arg` is the `Ctx` below, alive until `call_in_hardirq` returned.
            let ctx = unsafe { ArcBorrow::<Ctx>::from_raw(arg.cast()) };
            let kick = || {
                let _ = workqueue::system_highpri().enqueue(Arc::<Ctx>::from(ctx));
            };
            record_fault(&ctx.q, &ctx.n, 0x7f12_3456_7abc, true, kick);
            record_fault(&ctx.q, &ctx.n, 0x7f12_3456_7000, false, || {});
            record_fault(&ctx.q, &ctx.n, 0x7f12_3456_9000, false, || {});
        }
        extern "C" {
            fn exanest_shim_call_in_hardirq(
                f: extern "C" fn(*mut core::ffi::c_void),
                arg: *mut core::ffi::c_void,
            ) -> bool;
        }
        let ctx = Arc::pin_init(
            pin_init!(Ctx {
                q: FaultQueue::new(),
                n: AtomicU64::new(0),
                ran <- Completion::new(),
                work <- new_work!("test"),
            }),
            GFP_KERNEL,
        )
        .unwrap();
        let arg = core::ptr::from_ref::<Ctx>(&ctx).cast_mut().cast();
        // SAFETY: `ctx` outlives the call, which waits for the irq_work to finish.
        let hard = unsafe { exanest_shim_call_in_hardirq(in_irq, arg) };
        assert!(hard);
        ctx.ran.wait_for_completion();
        assert_eq!(ctx.n.load(Ordering::Relaxed), 3);
        // The read of the page already queued for a write is a duplicate.
        assert_eq!(ctx.q.len(), 2);
        let f = ctx.q.pop().unwrap();
        assert_eq!((f.page, f.write), (0x7f12_3456_7000, true));
        assert_eq!(ctx.q.pop().map(|f| f.page), Some(0x7f12_3456_9000));
    }

    /// The touch-ahead planner as compiled into the module.
    #[test]
    fn touch_ahead_in_kernel() {
        let r = |s, l| Range::new(s, l, 1 << 48).unwrap();
        let (first, last) = crate::fault::touch_ahead(
            0x20010,
            DEFAULT_WINDOW,
            PAGE_SHIFT as u32,
            &r(0x10000, 0x100000),
            &r(0x20000, 0x3000),
            u64::MAX,
        );
        assert_eq!((first, last), (0x20, 0x23));
    }

    /// The session's region table and scheduler, as compiled into the module: a copy holds its
    /// regions until it completes, and the freed channel goes to the oldest queued copy.
    #[test]
    fn regions_and_scheduler_in_kernel() {
        let mut regions = RegionTable::<MAX_REGIONS>::new();
        let src = regions
            .insert(&vreg(0x10000, 0x4000, abi::ACCESS_READ))
            .unwrap();
        let dst = regions
            .insert(&vreg(0x20000, 0x4000, abi::ACCESS_WRITE))
            .unwrap();
        let r = |s, l| Range::new(s, l, 1 << 48).unwrap();
        assert_eq!(regions.find(&r(0x10800, 0x100), abi::ACCESS_READ), Ok(src));
        assert_eq!(
            regions.find(&r(0x20800, 0x100), abi::ACCESS_READ),
            Err(Errno::Acces)
        );
        let mut sched = Scheduler::<MAX_CH, MAX_INFLIGHT>::new(1);
        let copy = ValidCopy {
            src: r(0x10000, 0x1000),
            dst: r(0x20000, 0x1000),
        };
        let (c1, s1) = sched.submit(copy, src, dst).unwrap();
        let (c2, s2) = sched.submit(copy, src, dst).unwrap();
        assert!(s1.is_some() && s2.is_none());
        regions.hold(src).unwrap();
        assert_eq!(regions.remove(src), Err(Errno::Busy));
        let (ended, next) = sched.complete(0, 0, 0x1000);
        assert_eq!(ended.map(|e| e.cookie), Some(c1));
        assert_eq!(next.map(|s| s.entry.cookie), Some(c2));
        regions.release(src);
        assert!(regions.remove(src).is_ok());
    }
}
