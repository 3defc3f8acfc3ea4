// SPDX-License-Identifier: GPL-2.0-only

//! A process's use of one engine: its IOMMU domain, registered regions, copies and counters,
//! from open to release, and the ioctls of include/uapi/linux/exanest_dma.h.
//!
//! Lock order (whole module): `Engine::state` → `Session::inner`.
//! `Session::inner` is a mutex: every path that takes it runs in process context (ioctls, the
//! interrupt thread, release, unbind).

use crate::abi::{self, Errno};
use crate::engine::{Engine, Hw};
use crate::iommu::{Domain, PageMap};
use crate::region::RegionTable;
use crate::regs::{self, State};
use crate::sched::{Scheduler, Start};
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
    time::msecs_to_jiffies,
    transmute::{AsBytes, FromBytes},
    types::ForeignOwnable,
    uaccess::UserSlice,
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

/// Regions one process may hold.
pub(crate) const MAX_REGIONS: usize = 64;
/// Copies one process may have queued, running or finished but not yet waited for.
pub(crate) const MAX_INFLIGHT: usize = 64;
/// Most channels the scheduler handles.
const MAX_CH: usize = regs::MAX_CHANNELS;

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

struct Inner {
    /// Torn down (release or unbind): every call fails with ENODEV.
    dead: bool,
    domain: Option<Domain>,
    pages: PageMap,
    regions: RegionTable<MAX_REGIONS>,
    sched: Scheduler<MAX_CH, MAX_INFLIGHT>,
    /// The channel's last fault was NACKed by us: its ABORTED end means EFAULT.
    nacked_fault: [bool; MAX_CH],
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
    /// Notified whenever a copy ends; poll() waits on it.
    #[pin]
    done: PollCondVar,
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
        let domain = Domain::attach(engine.dev.clone())?;
        // The IOMMU core does not check the aperture: user addresses above it must be refused.
        let va_end = domain.aperture_end().min(1u64 << 48);
        let channels = engine.channels;
        let session_engine = engine.clone();
        let session = Arc::pin_init(
            try_pin_init!(Session {
                engine: session_engine,
                mm,
                va_end,
                inner <- new_mutex!(Inner {
                    dead: false,
                    domain: Some(domain),
                    pages: PageMap::new(),
                    regions: RegionTable::new(),
                    sched: Scheduler::new(channels),
                    nacked_fault: [false; MAX_CH],
                    counters: abi::Counters::default(),
                }, "Session::inner"),
                done <- new_poll_condvar!("Session::done"),
            }? Error),
            GFP_KERNEL,
        )?;
        st.owner = Some(session.clone());
        Ok(session)
    }

    fn limits(&self) -> abi::Limits {
        abi::Limits {
            va_end: self.va_end,
            max_transfer: u64::from(self.engine.max_len),
            modes: 1 << abi::MODE_PIN,
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
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return Err(ENODEV);
        }
        if inner.regions.len() >= MAX_REGIONS {
            return Err(ENOSPC);
        }
        let dom = inner.domain.as_ref().ok_or(ENODEV)?;
        let (first, last) = v.range.pages(PAGE_SHIFT as u32);
        let write = v.access & abi::ACCESS_WRITE != 0;
        inner.pages.map_pinned(dom, first, last, write)?;
        match inner.regions.insert(&v) {
            Ok(h) => {
                inner.counters.regions = inner.regions.len() as u64;
                Ok(h)
            }
            Err(e) => {
                inner.pages.unmap_pages(dom, first, last);
                Err(errno(e))
            }
        }
    }

    fn deregister(&self, req: &abi::Dereg) -> Result {
        let handle = abi::check_dereg(req).map_err(errno)?;
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return Err(ENODEV);
        }
        let r = inner.regions.remove(handle).map_err(errno)?;
        if let Some(dom) = inner.domain.as_ref() {
            let (first, last) = r.range.pages(PAGE_SHIFT as u32);
            inner.pages.unmap_pages(dom, first, last);
        }
        inner.counters.regions = inner.regions.len() as u64;
        Ok(())
    }

    fn start(&self, inner: &mut Inner, s: Start) {
        let e = s.entry;
        inner.nacked_fault[s.channel as usize] = false;
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
                        regs::Error::Aborted if inner.nacked_fault[n as usize] => EFAULT,
                        regs::Error::Aborted => ECANCELED,
                        regs::Error::NoMaster => EIO,
                        _ => EINVAL,
                    };
                    self.finish(inner, n, err.to_errno(), u64::from(rep.done_bytes));
                }
                State::Fault => {
                    // Pinned memory never faults unless the device was handed an address we
                    // did not map: refuse it.
                    inner.counters.faults += 1;
                    inner.counters.nacks += 1;
                    inner.nacked_fault[n as usize] = true;
                    pr_warn!(
                        "exanest_dma: channel {} faulted at {:#x} ({}), NACK\n",
                        n,
                        rep.fault_addr,
                        if rep.fault.write { "write" } else { "read" }
                    );
                    if self.engine.nack(n).is_err() {
                        self.finish(inner, n, ENODEV.to_errno(), u64::from(rep.done_bytes));
                    }
                }
                _ => {}
            }
        }
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
        c.pages_mapped = g.pages.pinned();
        c.pages_pinned = g.pages.pinned();
        c
    }

    /// Stop the engine's work for this session and give everything back: end copies, unmap and
    /// unpin every page, detach the domain. Idempotent. Called with `Engine::state` held.
    fn teardown(&self, status: Error) {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return;
        }
        inner.dead = true;
        // Stop the channels first: no DMA may run once pages go back to the process.
        self.engine.reset();
        inner.sched.abort_all(status.to_errno(), |_| {});
        inner.regions.drain(|_| {});
        if let Some(dom) = inner.domain.take() {
            inner.pages.clear(&dom);
            drop(dom);
        }
        self.done.notify_all();
    }

    /// The file is closed (last reference), or the device is unbound.
    pub(crate) fn shutdown(&self, status: Error) {
        let mut st = self.engine.state.lock();
        self.teardown(status);
        if st.owner.as_ref().is_some_and(|o| core::ptr::eq(&**o, self)) {
            st.owner = None;
        }
    }

    /// Unbind: called with `Engine::state` held by the caller.
    pub(crate) fn teardown_locked(&self) {
        self.teardown(ENODEV);
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
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }
}

#[kunit_tests(exanest_dma_session)]
mod tests {
    use super::*;
    use crate::abi::{Range, ValidCopy, ValidReg};

    fn vreg(start: u64, len: u64, access: u32) -> ValidReg {
        ValidReg {
            range: Range::new(start, len, 1 << 48).unwrap(),
            access,
            mode: abi::MODE_PIN,
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
