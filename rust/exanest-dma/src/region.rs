// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Registered buffers, and copies between them.
//!
//! A region owns its buffer (a [`Buffer`]: a `Vec<u8>`, a `Box<[u8]>`, a `&'static` slice, or
//! memory of your own) from registration until it is dropped or [`Registered::into_inner`]
//! hands the buffer back, and the engine only ever works on memory that a region owns. So
//! whatever safe code does, `mem::forget` included, the engine never writes memory that Rust
//! has handed back:
//!
//! - A copy's [`Pending`] borrows both regions. [`Pending::wait`], or dropping it, collects the
//!   copy. If it is forgotten instead, the [`Device`] still knows the copy: it keeps every
//!   copy it started until it is collected, and a region waits for the copies that name it
//!   before it gives its bytes to Rust ([`Registered::as_slice`], [`Registered::as_mut_slice`])
//!   or goes ([`Registered::into_inner`], drop).
//! - A forgotten region leaks its buffer: it stays registered, and allocated, until the file is
//!   closed, and no other value can ever be given that memory.
//! - When the driver refuses a deregistration because the engine still uses the region
//!   (`EBUSY`: work this library did not start, such as a [`Device::copy_raw`]), the buffer is
//!   leaked, not freed: a drop says so on standard error, and [`Registered::into_inner`]
//!   returns the error.
//!
//! ```no_run
//! use exanest_dma::{Device, Mode};
//! let dev = Device::open(0)?;
//! let src = dev.register(vec![7u8; 4096], Mode::OnDemand)?;
//! let mut dst = dev.register_mut(vec![0u8; 4096], Mode::OnDemand)?;
//! let pending = dev.copy(&src, 0, &mut dst, 0, 4096)?;
//! std::mem::forget(pending); // the copy is still known to `dev`
//! assert_eq!(dst.as_slice(), &[7u8; 4096][..]); // waits for it first
//! let bytes: Vec<u8> = dst.into_inner()?; // deregistered: the buffer is Rust's again
//! # Ok::<(), exanest_dma::Error>(())
//! ```

use crate::{Access, Device, Error, Mode, Result};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Memory that a region can own and hand to the engine.
///
/// # Safety
///
/// For the whole life of the value, moves included, [`Buffer::as_ptr`] and [`Buffer::len`]
/// return the same values, and those `len` bytes stay valid memory of this process that only
/// the value's owner reaches (writable too, for [`BufferMut`]). The memory is given back only
/// when the value is dropped: a value that is never dropped keeps it for ever. `Vec<u8>`,
/// `Box<[u8]>` and `&'static` slices are such values; so can be your own `mmap`ed memory.
pub unsafe trait Buffer: Send + 'static {
    /// The first byte.
    fn as_ptr(&self) -> *const u8;
    /// The length in bytes.
    fn len(&self) -> usize;
    /// Whether it has no byte (a region of it cannot be registered).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A [`Buffer`] the engine may write.
///
/// # Safety
///
/// As for [`Buffer`]; [`BufferMut::as_mut_ptr`] returns [`Buffer::as_ptr`]'s address.
pub unsafe trait BufferMut: Buffer {
    /// The first byte, writable.
    fn as_mut_ptr(&mut self) -> *mut u8;
}

// SAFETY: A vector's heap buffer does not move when the vector does, and only `Vec`'s own
// methods, which the region does not call, would reallocate it. Its bytes are freed on drop.
unsafe impl Buffer for Vec<u8> {
    fn as_ptr(&self) -> *const u8 {
        <[u8]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}
// SAFETY: As for the `Buffer` impl; `as_mut_ptr` is the same heap buffer.
unsafe impl BufferMut for Vec<u8> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(self)
    }
}
// SAFETY: A boxed slice's heap memory does not move with the box, and is freed on drop.
unsafe impl Buffer for Box<[u8]> {
    fn as_ptr(&self) -> *const u8 {
        <[u8]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}
// SAFETY: As for the `Buffer` impl.
unsafe impl BufferMut for Box<[u8]> {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(self)
    }
}
// SAFETY: `'static` memory is never given back; the shared borrow lets nobody write it.
unsafe impl Buffer for &'static [u8] {
    fn as_ptr(&self) -> *const u8 {
        <[u8]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}
// SAFETY: `'static` memory is never given back; the exclusive borrow is the only access.
unsafe impl Buffer for &'static mut [u8] {
    fn as_ptr(&self) -> *const u8 {
        <[u8]>::as_ptr(self)
    }
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}
// SAFETY: As for the `Buffer` impl.
unsafe impl BufferMut for &'static mut [u8] {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        <[u8]>::as_mut_ptr(self)
    }
}

/// What the engine may do with a [`Registered`] buffer: read it ([`Region`]) or write it
/// ([`RegionMut`]). Sealed.
pub trait Right: sealed::Sealed {
    /// The access the region is registered with.
    const ACCESS: Access;
}

/// The engine reads the buffer (a copy source).
#[derive(Debug)]
pub enum Read {}
/// The engine writes the buffer (a copy destination).
#[derive(Debug)]
pub enum Write {}

impl Right for Read {
    const ACCESS: Access = Access::Read;
}
impl Right for Write {
    const ACCESS: Access = Access::Write;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Read {}
    impl Sealed for super::Write {}
}

/// A registered buffer that the region owns: deregistered on drop, after every copy that uses
/// it has ended (see the [module documentation](self)).
#[derive(Debug)]
pub struct Registered<'d, B: Buffer, R: Right> {
    dev: &'d Device,
    handle: u32,
    addr: u64,
    len: usize,
    mode: Mode,
    buf: ManuallyDrop<B>,
    _right: PhantomData<R>,
}

/// A registered buffer the engine may read ([`Device::register`]).
pub type Region<'d, B = Vec<u8>> = Registered<'d, B, Read>;
/// A registered buffer the engine may write ([`Device::register_mut`]).
pub type RegionMut<'d, B = Vec<u8>> = Registered<'d, B, Write>;

/// A copy the device started and nobody has collected yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InFlight {
    cookie: u64,
    src: u32,
    dst: u32,
}

/// The copies a [`Device`] started with [`Device::copy`] and that nobody has collected yet.
#[derive(Debug, Default)]
pub(crate) struct CopiesInFlight(Mutex<Vec<InFlight>>);

impl CopiesInFlight {
    fn add(&self, c: InFlight) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(c);
    }

    fn remove(&self, cookie: u64) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|c| c.cookie != cookie);
    }
}

impl Device {
    /// Wait for every copy that names region `handle` and that nobody collected (its
    /// [`Pending`] was forgotten). The table stays locked meanwhile, so a region that a copy
    /// shares with another cannot go while the other one waits for it; only forgotten copies
    /// are ever waited for here, since a live [`Pending`] borrows its regions.
    fn settle(&self, handle: u32) {
        let mut t = self.copies.0.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(i) = t.iter().position(|c| c.src == handle || c.dst == handle) {
            // Only an interrupted wait leaves the copy running; every other outcome, an error
            // included, means the driver has finished with it.
            while self.wait_completion(t[i].cookie, None) == Err(Error::Os(libc::EINTR)) {}
            t.swap_remove(i);
        }
    }

    fn register_buffer<B: Buffer, R: Right>(
        &self,
        buf: B,
        mode: Mode,
    ) -> Result<Registered<'_, B, R>> {
        let (addr, len) = (buf.as_ptr() as u64, buf.len());
        // SAFETY: The region owns `buf` (`Buffer`: its bytes stay put and valid until it is
        // dropped) and hands it back only after deregistering; Rust reaches the bytes only
        // through the region, which waits for the engine first.
        let handle = unsafe { self.register_raw(addr, len as u64, R::ACCESS, mode)? };
        Ok(Registered::new(self, handle, buf, mode))
    }

    /// Register a buffer the engine may read (a copy source). The region owns it; on an error
    /// the buffer is dropped.
    pub fn register<B: Buffer>(&self, buf: B, mode: Mode) -> Result<Region<'_, B>> {
        self.register_buffer(buf, mode)
    }

    /// Register a buffer the engine may write (a copy destination). The region owns it; on an
    /// error the buffer is dropped.
    pub fn register_mut<B: BufferMut>(&self, buf: B, mode: Mode) -> Result<RegionMut<'_, B>> {
        self.register_buffer(buf, mode)
    }

    /// Copy `len` bytes from `src` at `src_off` to `dst` at `dst_off`. Both regions stay
    /// borrowed until the returned [`Pending`] is waited for or dropped.
    pub fn copy<'a, S: Buffer, D: BufferMut>(
        &'a self,
        src: &'a Region<'_, S>,
        src_off: usize,
        dst: &'a mut RegionMut<'_, D>,
        dst_off: usize,
        len: usize,
    ) -> Result<Pending<'a>> {
        if !core::ptr::eq(src.dev, self) || !core::ptr::eq(dst.dev, self) {
            return Err(Error::Invalid("a region of another device"));
        }
        let in_bounds = |off: usize, size: usize| off.checked_add(len).is_some_and(|e| e <= size);
        if !in_bounds(src_off, src.len) {
            return Err(Error::Invalid("the copy reaches past the source region"));
        }
        if !in_bounds(dst_off, dst.len) {
            return Err(Error::Invalid(
                "the copy reaches past the destination region",
            ));
        }
        // SAFETY: Both ranges lie inside registered buffers that the regions own; the copy is
        // recorded before anything can drop either region, which waits for it.
        let cookie = unsafe {
            self.copy_raw(
                src.addr + src_off as u64,
                dst.addr + dst_off as u64,
                len as u64,
            )?
        };
        self.copies.add(InFlight {
            cookie,
            src: src.handle,
            dst: dst.handle,
        });
        Ok(Pending {
            dev: self,
            cookie,
            result: None,
            _regions: PhantomData,
        })
    }
}

impl<'d, B: Buffer, R: Right> Registered<'d, B, R> {
    pub(crate) fn new(dev: &'d Device, handle: u32, buf: B, mode: Mode) -> Self {
        Registered {
            dev,
            handle,
            addr: buf.as_ptr() as u64,
            len: buf.len(),
            mode,
            buf: ManuallyDrop::new(buf),
            _right: PhantomData,
        }
    }

    /// The driver's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The buffer's start: the virtual address the engine is given.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (the driver refuses to register one, so never true).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory mode it was registered with.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The buffer's bytes, once every copy into it has ended (a [`RegionMut`] waits for the
    /// copies whose [`Pending`] was forgotten; a live one borrows the region).
    pub fn as_slice(&self) -> &[u8] {
        if matches!(R::ACCESS, Access::Write) {
            self.dev.settle(self.handle);
        }
        // SAFETY: The region owns a buffer of `len` bytes at `addr`, and no copy writes it:
        // a pending one borrows the region mutably, a forgotten one was waited for above.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }

    /// The buffer's bytes to change, once every copy that reads or writes them has ended.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.dev.settle(self.handle);
        // SAFETY: The region owns a buffer of `len` bytes at `addr` (`Buffer`: valid for as
        // long as it lives); no copy uses it: a pending one borrows the region, a forgotten
        // one was waited for above.
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u8, self.len) }
    }

    /// Deregister the region once no copy uses it: the buffer is Rust's again. When the driver
    /// refuses (`EBUSY`: work this library did not start uses the region), the buffer is leaked
    /// rather than handed back, and the error returned.
    pub fn into_inner(self) -> Result<B> {
        let mut this = ManuallyDrop::new(self);
        match this.release() {
            // SAFETY: `this` is never used or dropped again, so the buffer is taken once.
            Ok(()) => Ok(unsafe { ManuallyDrop::take(&mut this.buf) }),
            Err(e) => Err(e),
        }
    }

    /// Wait for the copies that use the region, then deregister it. `Ok` when the engine can
    /// no longer reach the buffer.
    fn release(&mut self) -> Result<()> {
        self.dev.settle(self.handle);
        match self.dev.deregister(self.handle) {
            // Every other error means the driver holds no region by this handle for this
            // process: unknown (ENOENT), the process torn down with its domain (ENODEV), a
            // forked child's copy of the region (EPERM: the engine works for the parent),
            // or no engine behind the file at all (ENOTTY).
            Err(e @ Error::Abi(crate::Errno::Busy)) => Err(e),
            _ => Ok(()),
        }
    }
}

impl<B: Buffer, R: Right> Drop for Registered<'_, B, R> {
    fn drop(&mut self) {
        match self.release() {
            // SAFETY: Dropped once, here; the field is not used again.
            Ok(()) => unsafe { ManuallyDrop::drop(&mut self.buf) },
            Err(e) => eprintln!(
                "exanest-dma: region {} ({} bytes at {:#x}) could not be deregistered ({e}): \
                 the engine still uses it, so its buffer is leaked rather than freed",
                self.handle, self.len, self.addr
            ),
        }
    }
}

/// A copy in flight. Waiting collects its result; dropping it waits too. Forgetting it is safe:
/// the regions then wait for the copy before they hand their bytes back.
#[derive(Debug)]
pub struct Pending<'a> {
    dev: &'a Device,
    cookie: u64,
    /// The result once collected (the driver forgets the cookie then).
    result: Option<Result<u64>>,
    _regions: PhantomData<&'a mut ()>,
}

/// A wait's outcome for a pending copy: `Ok(None)` when a bounded wait ran out of time, and
/// whether the driver has handed out the copy's result (every outcome but a bounded wait's
/// `ETIMEDOUT` and `EINTR`, after which the copy is still pending).
fn settle_wait(r: Result<u64>, bounded: bool) -> (Result<Option<u64>>, bool) {
    match r {
        Err(e) if e.is_timeout() && bounded => (Ok(None), false),
        Err(e @ Error::Os(libc::EINTR)) => (Err(e), false),
        r => (r.map(Some), true),
    }
}

impl Pending<'_> {
    /// The driver's cookie.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    fn collect(&mut self, timeout: Option<Duration>) -> Result<Option<u64>> {
        if let Some(r) = self.result {
            return r.map(Some);
        }
        let (r, collected) = settle_wait(
            self.dev.wait_cookie(self.cookie, timeout),
            timeout.is_some(),
        );
        if collected {
            self.result = Some(r.map(|b| b.unwrap_or(0)));
            self.dev.copies.remove(self.cookie);
        }
        r
    }

    /// Wait for the copy; `Ok(bytes copied)`, the copy's error ([`Error::Copy`]), or the
    /// wait's (`EINTR`; the copy stays pending and dropping `Pending` waits again).
    pub fn wait(mut self) -> Result<u64> {
        self.collect(None)?.ok_or(Error::Os(libc::ETIMEDOUT))
    }

    /// Wait at most `timeout` (zero: just look): `Ok(Some(bytes))` when the copy is done,
    /// `Ok(None)` while it is still running. Once done, every further wait returns the same
    /// result.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<u64>> {
        self.collect(Some(timeout))
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        // Only `EINTR` leaves the result uncollected: the engine may still write the
        // destination, so wait again. Any other error is the copy's own outcome, kept in
        // `result`, which nobody asks for any more.
        while self.result.is_none() {
            let _ = self.collect(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Errno;

    #[test]
    fn region_accessors_and_copy_bounds() {
        let dev = Device::open_path("/dev/null").unwrap();
        let other = Device::open_path("/dev/null").unwrap();
        let src = vec![1u8; 64];
        let dst = vec![0u8; 32];
        let (sp, dp) = (src.as_ptr() as u64, dst.as_ptr() as u64);
        // Built by hand: `/dev/null` cannot register (dropping them deregisters: ENOTTY,
        // which means no engine holds them, so the buffers are freed).
        let s: Region<'_> = Registered::new(&dev, 7, src, Mode::Prefault);
        let mut d: RegionMut<'_> = Registered::new(&dev, 8, dst, Mode::OnDemand);
        assert_eq!((s.handle(), s.addr(), s.len()), (7, sp, 64));
        assert_eq!((d.addr(), d.len()), (dp, 32));
        assert_eq!((s.mode(), d.mode()), (Mode::Prefault, Mode::OnDemand));
        assert!(!d.is_empty());
        assert_eq!(d.as_slice(), &[0u8; 32]);
        d.as_mut_slice()[3] = 9;
        assert_eq!(d.as_slice()[3], 9);
        // Out of bounds: refused before any system call.
        let past = |r: Result<Pending<'_>>| matches!(r, Err(Error::Invalid(_)));
        assert!(past(dev.copy(&s, 0, &mut d, 0, 33)));
        assert!(past(dev.copy(&s, 1, &mut d, 0, 64)));
        assert!(past(dev.copy(&s, usize::MAX, &mut d, 0, 2)));
        assert!(past(dev.copy(&s, 0, &mut d, 31, 2)));
        // Regions of one device, a copy asked of another.
        assert!(past(other.copy(&s, 0, &mut d, 0, 2)));
        // In bounds: the system call is made (and fails on `/dev/null`), and nothing is left
        // in flight.
        assert_eq!(
            dev.copy(&s, 32, &mut d, 0, 32).map(|_| ()).unwrap_err(),
            Error::Os(libc::ENOTTY)
        );
        assert!(dev.copies.0.lock().unwrap().is_empty());
        // The buffer comes back (ENOTTY: nothing holds it).
        let v = d.into_inner().unwrap();
        assert_eq!((v.len(), v[3]), (32, 9));
    }

    #[test]
    fn buffers_keep_their_address() {
        let v = vec![5u8; 100];
        let p = Buffer::as_ptr(&v);
        let moved = Box::new(v);
        assert_eq!(Buffer::as_ptr(&*moved), p);
        assert_eq!(Buffer::len(&*moved), 100);
        let b: Box<[u8]> = vec![1u8; 3].into_boxed_slice();
        assert_eq!((Buffer::len(&b), b.is_empty()), (3, false));
        let s: &'static mut [u8] = Box::leak(vec![0u8; 8].into_boxed_slice());
        let mut s2 = s;
        assert_eq!(
            BufferMut::as_mut_ptr(&mut s2) as *const u8,
            Buffer::as_ptr(&s2)
        );
        assert!(Buffer::is_empty(&Vec::<u8>::new()));
    }

    /// A forgotten copy is waited for by its regions: the table hands its cookie to `settle`.
    /// On `/dev/null`, WAIT is ENOTTY (the driver's answer for a finished copy would be its
    /// result): either way the copy no longer counts.
    #[test]
    fn forgotten_copies_are_settled_by_their_regions() {
        let dev = Device::open_path("/dev/null").unwrap();
        for (cookie, src, dst) in [(1, 7, 8), (2, 9, 8), (3, 7, 10)] {
            dev.copies.add(InFlight { cookie, src, dst });
        }
        dev.settle(8);
        let left: Vec<_> = dev
            .copies
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.cookie)
            .collect();
        assert_eq!(left, [3]);
        dev.settle(7);
        assert!(dev.copies.0.lock().unwrap().is_empty());
        // A collected copy leaves the table.
        dev.copies.add(InFlight {
            cookie: 4,
            src: 1,
            dst: 2,
        });
        let mut p = Pending {
            dev: &dev,
            cookie: 4,
            result: None,
            _regions: PhantomData,
        };
        assert_eq!(p.wait_timeout(Duration::ZERO), Err(Error::Os(libc::ENOTTY)));
        assert!(dev.copies.0.lock().unwrap().is_empty());
    }

    #[test]
    fn wait_outcomes() {
        let t = Err(Error::Os(libc::ETIMEDOUT));
        assert_eq!(settle_wait(t, true), (Ok(None), false));
        assert_eq!(
            settle_wait(t, false),
            (t.map(Some), true),
            "unbounded: no retry loop"
        );
        let i = Err(Error::Os(libc::EINTR));
        assert_eq!(settle_wait(i, true), (i.map(Some), false));
        assert_eq!(settle_wait(Ok(5), true), (Ok(Some(5)), true));
        let c = Err(Error::Copy(libc::EFAULT));
        assert_eq!(settle_wait(c, true), (c.map(Some), true));
        let n = Err(Error::Abi(Errno::NoEnt));
        assert_eq!(settle_wait(n, false), (n.map(Some), true));
    }
}
