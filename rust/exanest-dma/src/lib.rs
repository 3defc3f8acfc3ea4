// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! User library for the ExaNeSt DMA driver.
//!
//! ```no_run
//! use exanest_dma::{Device, Mode};
//! let dev = Device::open(0)?;
//! let s = dev.register(vec![7u8; 1 << 20], Mode::Pin)?; // the engine may read it
//! let mut d = dev.register_mut(vec![0u8; 1 << 20], Mode::OnDemand)?; // and write this one
//! let bytes = dev.copy(&s, 0, &mut d, 0, 1 << 20)?.wait()?;
//! assert_eq!(bytes, 1 << 20);
//! assert_eq!(d.as_slice(), s.as_slice());
//! let dst: Vec<u8> = d.into_inner()?; // deregistered: the buffer is the program's again
//! # Ok::<(), exanest_dma::Error>(())
//! ```
//!
//! Every [`Mode`] works the same way: [`Mode::Pin`] pins and maps the buffer at registration,
//! [`Mode::Prefault`] maps it without pinning, and [`Mode::OnDemand`] maps nothing until the
//! engine touches it (the driver resolves the engine's page faults). A region owns its buffer
//! (any [`Buffer`]: a `Vec<u8>`, a `Box<[u8]>`, a `&'static` slice) until it is dropped or
//! handed back, so nothing safe code does, `mem::forget` included, can leave the engine
//! writing memory that Rust has handed back (see [`region`]). [`Device::register`] lets the
//! engine read the buffer (a copy source), [`Device::register_mut`] write it (a destination).
//!
//! [`Device::create_queue`] gives the file's user-level [`Queue`]: copies posted and their
//! completions polled without a system call (see [`queue`]). [`Device::register_remote`] lets
//! other nodes put into a buffer, and [`Queue::put`] puts into theirs (see [`remote`]).
//!
//! Errors carry the errno the driver returned, exactly as `Documentation/abi.rst` lists it
//! ([`Error`]). The C ABI of this crate is declared in `include/exanest_dma.h` (see [`capi`]);
//! `Documentation/user-programs.rst` shows how to build a C or Rust program for the guest.

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub use exanest_core::abi::{Errno, Mode, UnknownMode};
/// An error the engine itself reports for a transfer ([`Error::Engine`]).
pub use exanest_core::regs::Error as EngineError;

use exanest_core::abi;

pub mod capi;
pub mod mailbox;
pub mod queue;
pub mod region;
pub mod remote;

pub use mailbox::{Message, PutCompletion};
pub use queue::{Completion as QueueCompletion, Queue, QueueError, QueueEvents};
pub use region::{Buffer, BufferMut, Pending, Region, RegionMut, Registered};
pub use remote::{Remote, RemoteAccess, RemoteRegion};

/// An error of this library.
///
/// One mapping, [`Error::from_errno`] and its inverse [`Error::errno`]: the request errors
/// of the ABI (`EINVAL`, `EOVERFLOW`, `EFAULT`, `EACCES`, `ENOENT`, `ENOSPC`, `EAGAIN`, `E2BIG`,
/// `EOPNOTSUPP`, `EBUSY`) are [`Error::Abi`]; every other errno of a system call (`EPERM`,
/// `ENODEV`, `ETIMEDOUT`, `EINTR`, `ENOTTY`, …) is [`Error::Os`] with the number unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A system call failed with one of the ABI's request errors (see `Documentation/abi.rst`
    /// for what each means for each call; `ENOENT` from [`Device::open`]: no such device node).
    Abi(Errno),
    /// A system call failed with another errno (positive).
    Os(i32),
    /// The wait worked but the copy itself failed with this errno (positive): `EFAULT`,
    /// `EACCES`, `ECANCELED`, `ENODEV` or `EIO`, see `Documentation/abi.rst`.
    Copy(i32),
    /// The library refused the request without making a system call; says why. Its
    /// [`Error::errno`] is `EINVAL`.
    Invalid(&'static str),
    /// The engine ended the transfer with an error of its own: a completion status from
    /// `PLDMA_CQE_BAD_LEN` (-257) to `PLDMA_CQE_TIMEOUT` (-265), see
    /// `Documentation/pldma-registers.rst`. Its [`Error::errno`] is the status negated.
    Engine(EngineError),
}

impl Error {
    /// The error of a system call that failed with `errno` (positive).
    pub fn from_errno(errno: i32) -> Self {
        Errno::from_code(errno).map_or(Error::Os(errno), Error::Abi)
    }

    fn last() -> Self {
        Self::from_errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }

    /// The positive errno this error stands for (the C functions return its negation).
    pub fn errno(self) -> i32 {
        match self {
            Error::Abi(e) => e.code(),
            Error::Os(e) | Error::Copy(e) => e,
            Error::Invalid(_) => libc::EINVAL,
            Error::Engine(e) => -exanest_core::regs::cqe_status_of(e),
        }
    }

    /// The error of a completion status (negative): an engine error for `-257..=-511`,
    /// [`Error::Copy`] with the errno otherwise. `None` for 0.
    pub fn from_status(status: i32) -> Option<Self> {
        match status {
            0 => None,
            s => Some(
                exanest_core::regs::error_of_cqe_status(s)
                    .map_or(Error::Copy(s.saturating_neg()), Error::Engine),
            ),
        }
    }

    /// Whether a bounded wait ran out of time (`ETIMEDOUT`).
    pub fn is_timeout(self) -> bool {
        self == Error::Os(libc::ETIMEDOUT)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Abi(e) => write!(
                f,
                "{} ({})",
                std::io::Error::from_raw_os_error(e.code()),
                e.name()
            ),
            Error::Os(e) => write!(f, "{}", std::io::Error::from_raw_os_error(e)),
            Error::Copy(e) => write!(f, "copy failed: {}", std::io::Error::from_raw_os_error(e)),
            Error::Invalid(why) => write!(f, "invalid request: {why}"),
            Error::Engine(e) => write!(
                f,
                "engine error: {}",
                engine_text(e).to_str().unwrap_or_default()
            ),
        }
    }
}

impl std::error::Error for Error {}

/// What an engine error means, with the status's name in the register map (also
/// `exanest_dma_strerror`'s text for it).
pub(crate) fn engine_text(e: EngineError) -> &'static std::ffi::CStr {
    match e {
        EngineError::BadLen => c"length zero or above the engine's maximum (PLDMA_CQE_BAD_LEN)",
        EngineError::BadAddr => c"an address range wraps past 2^64 (PLDMA_CQE_BAD_ADDR)",
        EngineError::Aborted => c"the transfer was aborted (PLDMA_CQE_ABORTED)",
        EngineError::NoMaster => c"the engine's bus mastering is off (PLDMA_CQE_NO_MASTER)",
        EngineError::Overlap => c"source and destination overlap (PLDMA_CQE_OVERLAP)",
        EngineError::BadFlags => c"a descriptor's flags are not valid (PLDMA_CQE_BAD_FLAGS)",
        EngineError::NoLink => c"no network port, or its link is down (PLDMA_CQE_NO_LINK)",
        EngineError::Remote => c"the receiver refused the operation",
        EngineError::Timeout => {
            c"the peer stayed silent through the engine's retries (PLDMA_CQE_TIMEOUT)"
        }
        EngineError::None | EngineError::Unknown(_) => {
            c"an engine error this library does not know"
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Invalid(why) => std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
            e => std::io::Error::from_raw_os_error(e.errno()),
        }
    }
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// What the engine may do with a region ([`Device::register_raw`]; the safe calls derive it
/// from the borrow).
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
    /// The `EXANEST_DMA_ACCESS_*` bits.
    pub const fn bits(self) -> u32 {
        match self {
            Access::Read => abi::ACCESS_READ,
            Access::Write => abi::ACCESS_WRITE,
            Access::ReadWrite => abi::ACCESS_READ | abi::ACCESS_WRITE,
        }
    }

    /// The access of `EXANEST_DMA_ACCESS_*` bits; `None` for 0 or unknown bits.
    pub const fn from_bits(bits: u32) -> Option<Access> {
        match bits {
            abi::ACCESS_READ => Some(Access::Read),
            abi::ACCESS_WRITE => Some(Access::Write),
            x if x == abi::ACCESS_READ | abi::ACCESS_WRITE => Some(Access::ReadWrite),
            _ => None,
        }
    }
}

/// Engine and driver facts.
pub type Info = abi::Info;
/// Driver statistics.
pub type Counters = abi::Counters;
/// The translation budget and what it evicted ([`Device::budget`]).
pub type Budget = abi::Budget;
/// Fault resolution times (log2 histograms in microseconds), whole and by stage.
pub type Latency = abi::Latency;
/// The counters of the engine's network port ([`Device::net_counters`]).
pub type NetCounters = abi::NetCounters;
/// One log2 histogram in microseconds.
pub type Histogram = abi::Histogram;

/// How a copy ended, as `EXANEST_DMA_IOC_WAIT` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// 0, or the copy's negative errno.
    pub status: i32,
    /// Bytes copied.
    pub bytes: u64,
}

impl Completion {
    /// `Ok(bytes)`, or the copy's error ([`Error::from_status`]).
    pub fn result(self) -> Result<u64> {
        Error::from_status(self.status).map_or(Ok(self.bytes), Err)
    }
}

/// An open engine instance (`/dev/exanest-dmaN`).
///
/// Its file descriptor ([`AsFd`]) can be `poll()`ed: it is readable while a finished copy
/// waits to be collected, and (ABI 7) while its queue's mailbox holds a message not taken.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
    /// The copies [`Device::copy`] started that nobody has collected yet (region.rs).
    copies: region::CopiesInFlight,
}

fn ioctl<T>(fd: &OwnedFd, cmd: u32, arg: &mut T) -> Result<()> {
    // SAFETY: `fd` is an open descriptor and `arg` a live, exclusively borrowed struct of the
    // type and size that the ioctl number `cmd` encodes, so the kernel reads and writes only it.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg as *mut T) };
    if r < 0 {
        Err(Error::last())
    } else {
        Ok(())
    }
}

/// `timeout` as the ABI's `timeout_ns`: `None` is -1 (forever); saturates at `i64::MAX`.
fn timeout_ns(timeout: Option<Duration>) -> i64 {
    timeout.map_or(-1, |t| i64::try_from(t.as_nanos()).unwrap_or(i64::MAX))
}

impl Device {
    /// Open `/dev/exanest-dma<index>`.
    pub fn open(index: u32) -> Result<Self> {
        Self::open_path(&format!("/dev/exanest-dma{index}"))
    }

    /// Open a device node by path.
    pub fn open_path(path: &str) -> Result<Self> {
        let c = std::ffi::CString::new(path)
            .map_err(|_| Error::Invalid("the path contains a NUL byte"))?;
        // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last());
        }
        // SAFETY: `open` just returned `fd`, so it is a valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Device {
            fd,
            copies: Default::default(),
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

    /// The counters of the engine's network port, the same for every process on it (the
    /// engine's 32-bit registers, which wrap): packets sent, received and dropped, NACKs and
    /// RESUMEs sent and received, bytes sent again, timeouts, duplicates dropped, probes, bytes
    /// and mailbox messages placed. `EOPNOTSUPP` without a port (ABI 6).
    pub fn net_counters(&self) -> Result<NetCounters> {
        let mut c = NetCounters::default();
        ioctl(&self.fd, abi::IOC_NET_COUNTERS, &mut c)?;
        Ok(c)
    }

    /// The translation budget: set it to `pages` (`None`: keep it), and read what it did
    /// (pages evicted so far, evictions, pages the on-demand mirror maps now). Above the
    /// module's `max_budget_pages`: `Error::Abi(Errno::TooBig)`.
    pub fn budget(&self, pages: Option<u64>) -> Result<Budget> {
        let mut b = Budget {
            pages: pages.unwrap_or(0),
            ..Budget::default()
        };
        ioctl(&self.fd, abi::IOC_BUDGET, &mut b)?;
        Ok(b)
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
        // SAFETY: The caller gives `register_raw`'s guarantees, which are this call's.
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
        if addr == 0 {
            return Err(Error::Invalid("a NULL address"));
        }
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

    /// Wait for a copy by cookie (`None`: forever; zero: just look) and collect how it ended.
    /// The wait's own errors: `ENOENT` unknown cookie, `ETIMEDOUT`, `EINTR` (the copy is then
    /// still pending).
    pub fn wait_completion(&self, cookie: u64, timeout: Option<Duration>) -> Result<Completion> {
        let mut w = abi::Wait {
            cookie,
            timeout_ns: timeout_ns(timeout),
            ..Default::default()
        };
        ioctl(&self.fd, abi::IOC_WAIT, &mut w)?;
        Ok(Completion {
            status: w.status,
            bytes: w.bytes_done,
        })
    }

    /// Wait for a copy by cookie: `Ok(bytes)`, the copy's error ([`Error::Copy`]) or the
    /// wait's ([`Device::wait_completion`]).
    pub fn wait_cookie(&self, cookie: u64, timeout: Option<Duration>) -> Result<u64> {
        self.wait_completion(cookie, timeout)?.result()
    }
}

impl AsFd for Device {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every errno `Documentation/abi.rst` names, with what the library must make of it.
    const DOCUMENTED: [(i32, Option<Errno>); 19] = [
        (libc::EINVAL, Some(Errno::Inval)),
        (libc::EOVERFLOW, Some(Errno::Overflow)),
        (libc::EFAULT, Some(Errno::Fault)),
        (libc::EACCES, Some(Errno::Acces)),
        (libc::ENOENT, Some(Errno::NoEnt)),
        (libc::ENOSPC, Some(Errno::NoSpc)),
        (libc::EAGAIN, Some(Errno::Again)),
        (libc::E2BIG, Some(Errno::TooBig)),
        (libc::EOPNOTSUPP, Some(Errno::OpNotSupp)),
        (libc::EBUSY, Some(Errno::Busy)),
        (libc::EPERM, None),
        (libc::ENODEV, None),
        (libc::ETIMEDOUT, None),
        (libc::EINTR, None),
        (libc::ECANCELED, None),
        (libc::EIO, None),
        (libc::ENOTTY, None),
        (libc::ENXIO, None),
        (libc::EMFILE, None),
    ];

    #[test]
    fn errno_mapping_both_ways() {
        for (code, abi) in DOCUMENTED {
            let e = Error::from_errno(code);
            assert_eq!(e, abi.map_or(Error::Os(code), Error::Abi), "{code}");
            assert_eq!(e.errno(), code, "{e:?}");
            assert_eq!(std::io::Error::from(e).raw_os_error(), Some(code));
        }
        // Every variant of the core's Errno carries the host libc's number.
        for e in Errno::ALL {
            assert!(DOCUMENTED.contains(&(e.code(), Some(e))), "{e:?}");
            assert_eq!(Error::from_errno(e.code()), Error::Abi(e));
        }
        // The two cases the issue named: an unknown handle or cookie, the 65th region.
        assert_eq!(Error::from_errno(libc::ENOENT).errno(), libc::ENOENT);
        assert_eq!(Error::from_errno(libc::ENOSPC).errno(), libc::ENOSPC);
        assert_eq!(Error::from_errno(libc::EAGAIN).errno(), libc::EAGAIN);
        assert_eq!(Error::from_errno(libc::ENODEV).errno(), libc::ENODEV);
    }

    #[test]
    fn error_text() {
        assert_eq!(
            Error::Abi(Errno::NoSpc).to_string(),
            format!(
                "{} (ENOSPC)",
                std::io::Error::from_raw_os_error(libc::ENOSPC)
            )
        );
        assert!(Error::Copy(libc::EFAULT)
            .to_string()
            .starts_with("copy failed: "));
        // A refusal without a system call does not pose as an OS error.
        let e = Error::Invalid("the copy reaches past the source region");
        assert_eq!(
            e.to_string(),
            "invalid request: the copy reaches past the source region"
        );
        assert_eq!(e.errno(), libc::EINVAL);
        let io = std::io::Error::from(e);
        assert_eq!(io.raw_os_error(), None);
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
        assert!(Error::Os(libc::ETIMEDOUT).is_timeout());
        assert!(!Error::Copy(libc::ETIMEDOUT).is_timeout());
    }

    #[test]
    fn engine_statuses_are_engine_errors() {
        use exanest_core::regs::cqe_status as st;
        assert_eq!(Error::from_status(0), None);
        assert_eq!(
            Error::from_status(-libc::EFAULT),
            Some(Error::Copy(libc::EFAULT))
        );
        for (s, e) in [
            (st::BAD_LEN, EngineError::BadLen),
            (st::OVERLAP, EngineError::Overlap),
            (st::TIMEOUT, EngineError::Timeout),
        ] {
            let err = Error::from_status(s).unwrap();
            assert_eq!(err, Error::Engine(e));
            assert_eq!(err.errno(), -s, "the status negated");
            assert!(err.to_string().starts_with("engine error: "), "{err}");
        }
        assert!(Error::Engine(EngineError::Timeout)
            .to_string()
            .contains("PLDMA_CQE_TIMEOUT"));
        assert_eq!(
            Completion {
                status: st::BAD_ADDR,
                bytes: 0
            }
            .result(),
            Err(Error::Engine(EngineError::BadAddr))
        );
    }

    #[test]
    fn missing_device_is_enoent() {
        let e = Device::open_path("/nonexistent/exanest-dma9").unwrap_err();
        assert_eq!(e, Error::Abi(Errno::NoEnt));
        assert!(Device::open_path("/dev/\0null")
            .unwrap_err()
            .to_string()
            .starts_with("invalid request"));
    }

    /// `/dev/null` is a file descriptor that accepts no ioctl: every call must reach the kernel
    /// and come back with its errno, `ENOTTY`, unchanged.
    #[test]
    fn calls_on_a_non_device_give_enotty() {
        let dev = Device::open_path("/dev/null").unwrap();
        assert!(dev.as_raw_fd() >= 0);
        assert_eq!(dev.as_fd().as_raw_fd(), dev.as_raw_fd());
        let enotty = Err(Error::Os(libc::ENOTTY));
        assert_eq!(dev.info().map(|_| ()), enotty);
        assert_eq!(dev.counters().map(|_| ()), enotty);
        assert_eq!(dev.deregister(1), enotty);
        assert_eq!(dev.wait_cookie(1, Some(Duration::ZERO)).map(|_| ()), enotty);
        assert_eq!(dev.register(vec![0u8; 64], Mode::Pin).map(|_| ()), enotty);
    }

    #[test]
    fn completion_results() {
        assert_eq!(
            Completion {
                status: 0,
                bytes: 9
            }
            .result(),
            Ok(9)
        );
        assert_eq!(
            Completion {
                status: -libc::ECANCELED,
                bytes: 4
            }
            .result(),
            Err(Error::Copy(libc::ECANCELED))
        );
    }

    #[test]
    fn access_and_timeout_encode_as_the_abi() {
        // Local access only: the remote bits (ABI 4) are `register_remote`'s.
        assert_eq!(
            Access::ReadWrite.bits(),
            abi::ACCESS_READ | abi::ACCESS_WRITE
        );
        assert_eq!(Access::from_bits(abi::ACCESS_ALL), None);
        for a in [Access::Read, Access::Write, Access::ReadWrite] {
            assert_eq!(Access::from_bits(a.bits()), Some(a));
        }
        assert_eq!(Access::from_bits(0), None);
        assert_eq!(Access::from_bits(4), None);
        assert_eq!(timeout_ns(None), -1);
        assert_eq!(timeout_ns(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ns(Some(Duration::from_micros(3))), 3000);
        assert_eq!(timeout_ns(Some(Duration::MAX)), i64::MAX);
    }
}
