// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! User library for the ExaNeSt DMA driver.
//!
//! ```no_run
//! use exanest_dma::{Access, Device, Mode};
//! let dev = Device::open(0)?;
//! let src = vec![7u8; 1 << 20];
//! let mut dst = vec![0u8; 1 << 20];
//! let s = dev.register(&src, Access::Read, Mode::Pin)?;
//! let mut d = dev.register_mut(&mut dst, Access::Write, Mode::Pin)?;
//! dev.copy(&s, 0, &mut d, 0, 1 << 20)?.wait()?;
//! drop((s, d));
//! assert_eq!(src, dst);
//! # Ok::<(), exanest_dma::Error>(())
//! ```
//!
//! The same calls work for every memory mode; [`Mode::Pin`] is the one the driver implements
//! today, and the others fail with [`Error::NotSupported`] until it does.
//!
//! The C ABI of this crate is declared in `include/exanest_dma.h` (see [`capi`]).

use exanest_core::abi;
use std::fmt;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

pub mod capi;

/// An error: the errno the driver (or the C library) returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The device is busy: another process has it open (EBUSY), or a region is in use.
    Busy,
    /// No such device (ENOENT/ENODEV): not loaded, unbound, or a bad index.
    NoDevice,
    /// The memory mode is not implemented by this driver (EOPNOTSUPP).
    NotSupported,
    /// An address is outside every registered region or not mapped (EFAULT).
    BadAddress,
    /// The region does not allow this access (EACCES).
    Access,
    /// Too many regions or copies (ENOSPC, EAGAIN).
    Limit,
    /// A wait timed out (ETIMEDOUT).
    Timeout,
    /// A copy ended with this errno (positive).
    Copy(i32),
    /// Any other errno (positive).
    Os(i32),
}

impl Error {
    fn from_errno(e: i32) -> Self {
        match e {
            libc::EBUSY => Error::Busy,
            libc::ENOENT | libc::ENODEV | libc::ENXIO => Error::NoDevice,
            libc::EOPNOTSUPP => Error::NotSupported,
            libc::EFAULT => Error::BadAddress,
            libc::EACCES => Error::Access,
            libc::ENOSPC | libc::EAGAIN => Error::Limit,
            libc::ETIMEDOUT => Error::Timeout,
            e => Error::Os(e),
        }
    }

    fn last() -> Self {
        Self::from_errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }

    /// The positive errno this error stands for.
    pub fn errno(self) -> i32 {
        match self {
            Error::Busy => libc::EBUSY,
            Error::NoDevice => libc::ENODEV,
            Error::NotSupported => libc::EOPNOTSUPP,
            Error::BadAddress => libc::EFAULT,
            Error::Access => libc::EACCES,
            Error::Limit => libc::EAGAIN,
            Error::Timeout => libc::ETIMEDOUT,
            Error::Copy(e) | Error::Os(e) => e,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = std::io::Error::from_raw_os_error(self.errno());
        match self {
            Error::Copy(_) => write!(f, "copy failed: {what}"),
            _ => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for Error {}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// What the engine may do with a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read it (copy source).
    Read,
    /// Write it (copy destination).
    Write,
    /// Both.
    ReadWrite,
}

impl Access {
    fn bits(self) -> u32 {
        match self {
            Access::Read => abi::ACCESS_READ,
            Access::Write => abi::ACCESS_WRITE,
            Access::ReadWrite => abi::ACCESS_READ | abi::ACCESS_WRITE,
        }
    }
}

/// How the driver makes a region's memory reachable by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Pin and map at registration.
    Pin,
    /// Fault in and map at registration, without pinning.
    Prefault,
    /// Map nothing until the engine touches it.
    OnDemand,
}

impl Mode {
    fn raw(self) -> u32 {
        match self {
            Mode::Pin => abi::MODE_PIN,
            Mode::Prefault => abi::MODE_PREFAULT,
            Mode::OnDemand => abi::MODE_ON_DEMAND,
        }
    }
}

/// Engine and driver facts.
pub type Info = abi::Info;
/// Driver statistics.
pub type Counters = abi::Counters;
/// Fault resolution times (log2 histograms in microseconds), whole and by stage.
pub type Latency = abi::Latency;
/// One log2 histogram in microseconds.
pub type Histogram = abi::Histogram;

/// An open engine instance (`/dev/exanest-dmaN`).
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
}

fn ioctl<T>(fd: &OwnedFd, cmd: u32, arg: &mut T) -> Result<()> {
    // SAFETY: `arg` is a live, exclusively borrowed struct of the type the ioctl number encodes.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg as *mut T) };
    if r < 0 {
        Err(Error::last())
    } else {
        Ok(())
    }
}

impl Device {
    /// Open `/dev/exanest-dma<index>`.
    pub fn open(index: u32) -> Result<Self> {
        Self::open_path(&format!("/dev/exanest-dma{index}"))
    }

    /// Open a device node by path.
    pub fn open_path(path: &str) -> Result<Self> {
        let c = std::ffi::CString::new(path).map_err(|_| Error::Os(libc::EINVAL))?;
        // SAFETY: `c` is a valid NUL-terminated string.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(Device {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Engine and driver facts.
    pub fn info(&self) -> Result<Info> {
        let mut i = Info::default();
        ioctl(&self.fd, abi::IOC_INFO, &mut i)?;
        Ok(i)
    }

    /// How long fault resolutions took.
    pub fn latency(&self) -> Result<Latency> {
        let mut l = Latency::default();
        ioctl(&self.fd, abi::IOC_LATENCY, &mut l)?;
        Ok(l)
    }

    /// Statistics.
    pub fn counters(&self) -> Result<Counters> {
        let mut c = Counters::default();
        ioctl(&self.fd, abi::IOC_COUNTERS, &mut c)?;
        Ok(c)
    }

    /// Register raw memory. Returns the handle.
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` must stay valid memory of this process, not used by Rust code in a
    /// way that conflicts with the engine's access, until [`Device::deregister`].
    pub unsafe fn register_raw(
        &self,
        addr: u64,
        len: u64,
        access: Access,
        mode: Mode,
    ) -> Result<u32> {
        // SAFETY: Same contract.
        unsafe { self.register_raw_window(addr, len, access, mode, None) }
    }

    /// [`Device::register_raw`] with a touch-ahead window (pages resolved past a faulting one,
    /// on-demand mode; `None`: the driver's default).
    ///
    /// # Safety
    ///
    /// As for [`Device::register_raw`].
    pub unsafe fn register_raw_window(
        &self,
        addr: u64,
        len: u64,
        access: Access,
        mode: Mode,
        window: Option<u32>,
    ) -> Result<u32> {
        let mut r = abi::Reg {
            addr,
            length: len,
            access: access.bits(),
            mode: mode.raw(),
            flags: if window.is_some() { abi::REG_WINDOW } else { 0 },
            touch_ahead: window.unwrap_or(0),
            ..Default::default()
        };
        ioctl(&self.fd, abi::IOC_REG, &mut r)?;
        Ok(r.handle)
    }

    /// Fault in and map `[addr, addr + len)` of a prefault or on-demand region now, for device
    /// reads, and writes too when `write` (like `ibv_advise_mr` PREFETCH).
    pub fn advise(&self, addr: u64, len: u64, write: bool) -> Result<()> {
        let mut a = abi::Advise {
            addr,
            length: len,
            flags: if write { abi::ADVISE_WRITE } else { 0 },
            reserved: 0,
        };
        ioctl(&self.fd, abi::IOC_ADVISE, &mut a)
    }

    /// Drop a region by handle.
    pub fn deregister(&self, handle: u32) -> Result<()> {
        let mut d = abi::Dereg { handle, flags: 0 };
        ioctl(&self.fd, abi::IOC_DEREG, &mut d)
    }

    /// Register a buffer the engine may read.
    pub fn register<'a>(&'a self, buf: &'a [u8], access: Access, mode: Mode) -> Result<Region<'a>> {
        if access != Access::Read {
            // A shared borrow cannot be written by the engine.
            return Err(Error::Access);
        }
        // SAFETY: The region borrows `buf` immutably for its lifetime; the engine only reads it.
        let handle =
            unsafe { self.register_raw(buf.as_ptr() as u64, buf.len() as u64, access, mode)? };
        Ok(Region {
            dev: self,
            handle,
            addr: buf.as_ptr() as u64,
            len: buf.len(),
            _buf: PhantomData,
        })
    }

    /// Register a buffer the engine may write (and read).
    pub fn register_mut<'a>(
        &'a self,
        buf: &'a mut [u8],
        access: Access,
        mode: Mode,
    ) -> Result<RegionMut<'a>> {
        // SAFETY: The region borrows `buf` mutably for its lifetime: Rust cannot touch it while
        // the engine may write it.
        let handle =
            unsafe { self.register_raw(buf.as_ptr() as u64, buf.len() as u64, access, mode)? };
        Ok(RegionMut {
            dev: self,
            handle,
            addr: buf.as_mut_ptr() as u64,
            len: buf.len(),
            _buf: PhantomData,
        })
    }

    /// Start a copy between raw addresses inside registered regions. Returns the cookie.
    ///
    /// # Safety
    ///
    /// The destination must not be accessed by Rust code until the copy has been waited for.
    pub unsafe fn copy_raw(&self, src: u64, dst: u64, len: u64) -> Result<u64> {
        let mut c = abi::Copy {
            src,
            dst,
            length: len,
            ..Default::default()
        };
        ioctl(&self.fd, abi::IOC_COPY, &mut c)?;
        Ok(c.cookie)
    }

    /// Wait for a copy by cookie: Ok(bytes) or the copy's error. `None` waits forever.
    pub fn wait_cookie(&self, cookie: u64, timeout: Option<Duration>) -> Result<u64> {
        let mut w = abi::Wait {
            cookie,
            timeout_ns: timeout.map_or(-1, |t| i64::try_from(t.as_nanos()).unwrap_or(i64::MAX)),
            ..Default::default()
        };
        ioctl(&self.fd, abi::IOC_WAIT, &mut w)?;
        if w.status != 0 {
            return Err(Error::Copy(-w.status));
        }
        Ok(w.bytes_done)
    }

    /// Copy `len` bytes from `src` at `src_off` to `dst` at `dst_off`.
    pub fn copy<'d>(
        &'d self,
        src: &Region<'_>,
        src_off: usize,
        dst: &'d mut RegionMut<'_>,
        dst_off: usize,
        len: usize,
    ) -> Result<Pending<'d>> {
        let in_bounds = |off: usize, size: usize| off.checked_add(len).is_some_and(|e| e <= size);
        if !in_bounds(src_off, src.len) || !in_bounds(dst_off, dst.len) {
            return Err(Error::BadAddress);
        }
        // SAFETY: Both ranges are inside registered, borrowed buffers; the destination stays
        // mutably borrowed by the `Pending` until the copy is waited for.
        let cookie = unsafe {
            self.copy_raw(
                src.addr + src_off as u64,
                dst.addr + dst_off as u64,
                len as u64,
            )?
        };
        Ok(Pending {
            dev: self,
            cookie,
            waited: false,
            _dst: PhantomData,
        })
    }
}

/// A registered buffer the engine may read; deregistered on drop.
#[derive(Debug)]
pub struct Region<'a> {
    dev: &'a Device,
    handle: u32,
    addr: u64,
    len: usize,
    _buf: PhantomData<&'a [u8]>,
}

impl Region<'_> {
    /// The driver's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

impl Drop for Region<'_> {
    fn drop(&mut self) {
        let _ = self.dev.deregister(self.handle);
    }
}

/// A registered buffer the engine may write; deregistered on drop.
#[derive(Debug)]
pub struct RegionMut<'a> {
    dev: &'a Device,
    handle: u32,
    addr: u64,
    len: usize,
    _buf: PhantomData<&'a mut [u8]>,
}

impl RegionMut<'_> {
    /// The driver's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The buffer's current contents (no copy may be pending: `copy` borrows the region).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: The region mutably borrows a buffer of `len` bytes at `addr`; no copy into it
        // is pending, since a pending copy borrows `self` mutably.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

impl Drop for RegionMut<'_> {
    fn drop(&mut self) {
        let _ = self.dev.deregister(self.handle);
    }
}

/// A copy in flight. Waiting consumes it; dropping it waits too, so the destination is never
/// handed back to Rust while the engine may still write it.
#[derive(Debug)]
pub struct Pending<'d> {
    dev: &'d Device,
    cookie: u64,
    waited: bool,
    _dst: PhantomData<&'d mut ()>,
}

impl Pending<'_> {
    /// The driver's cookie.
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// Wait for the copy; Ok(bytes copied).
    pub fn wait(mut self) -> Result<u64> {
        self.waited = true;
        self.dev.wait_cookie(self.cookie, None)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.waited {
            let _ = self.dev.wait_cookie(self.cookie, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_device_is_no_device() {
        assert_eq!(
            Device::open_path("/nonexistent/exanest-dma9").unwrap_err(),
            Error::NoDevice
        );
    }

    #[test]
    fn errno_round_trip() {
        for e in [
            libc::EBUSY,
            libc::EOPNOTSUPP,
            libc::EFAULT,
            libc::EACCES,
            libc::ETIMEDOUT,
            libc::E2BIG,
        ] {
            assert_eq!(Error::from_errno(e).errno(), e);
        }
        assert_eq!(Error::from_errno(libc::ENOSPC), Error::Limit);
        assert!(Error::Copy(libc::EFAULT)
            .to_string()
            .contains("copy failed"));
    }

    #[test]
    fn modes_and_access_encode_as_the_abi() {
        assert_eq!(Mode::OnDemand.raw(), abi::MODE_ON_DEMAND);
        assert_eq!(Access::ReadWrite.bits(), abi::ACCESS_ALL);
    }
}
