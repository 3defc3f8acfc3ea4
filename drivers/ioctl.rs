// SPDX-License-Identifier: GPL-2.0-only

//! The ioctls of include/uapi/linux/exanest_dma.h: dispatch, copy-in and copy-out only. What
//! each one does is a method of [`Process`] in the file of its concept.

use crate::exanest_core::abi;
use crate::process::Process;
use kernel::{
    ioctl::_IOC_SIZE,
    prelude::*,
    sync::ArcBorrow,
    transmute::{AsBytes, FromBytes},
    uaccess::UserSlice,
};

/// Marks the ABI structs as plain bytes for `UserSlice` reads and writes.
macro_rules! plain_abi_struct {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: `$t` is `#[repr(C)]` with only integer fields (and arrays of them) and no
        // padding: rust/exanest-core/tests/uapi_layout.rs checks its size and every field
        // offset against the C header. So every bit pattern is a valid value, and every byte
        // of a value is initialised.
        unsafe impl FromBytes for $t {}
        // SAFETY: `$t` is `#[repr(C)]` with only integer fields and no padding (checked
        // against the C header by rust/exanest-core/tests/uapi_layout.rs), so all its bytes
        // are initialised.
        unsafe impl AsBytes for $t {}
    )*};
}

plain_abi_struct!(
    abi::Info,
    abi::Reg,
    abi::Dereg,
    abi::Copy,
    abi::Wait,
    abi::Counters,
    abi::Advise,
    abi::Latency,
    abi::RegionStats,
    abi::Budget,
    abi::Queue,
    abi::QueueWait,
    abi::Mbox,
    abi::NetCounters,
);

/// Whether call `cmd` needs the process to hold a context (device.rs gets it one, then
/// dispatches, and again if it lost it meanwhile: ENOLINK): COPY, QUEUE_CREATE, MBOX_CREATE, and
/// a REG that asks for a remote right, whose endpoint must be resident (remote.rs).
pub(crate) fn needs_context(cmd: u32, arg: usize) -> bool {
    match cmd {
        abi::IOC_COPY | abi::IOC_QUEUE_CREATE | abi::IOC_MBOX_CREATE => true,
        abi::IOC_REG => {
            let slice = UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<abi::Reg>());
            slice
                .reader()
                .read::<abi::Reg>()
                .is_ok_and(|r| r.access & abi::ACCESS_REMOTE != 0)
        }
        _ => false,
    }
}

/// [`dispatch`] for a call that did not get a context first. A REG whose argument changed
/// under us to ask for remote access (the caller's own race) gets EAGAIN.
pub(crate) fn dispatch_direct(this: ArcBorrow<'_, Process>, cmd: u32, arg: usize) -> Result<isize> {
    dispatch(this, cmd, arg).map_err(|e| if e == ENOLINK { EAGAIN } else { e })
}

/// The ioctl entry point.
pub(crate) fn dispatch(this: ArcBorrow<'_, Process>, cmd: u32, arg: usize) -> Result<isize> {
    let slice = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd));
    match cmd {
        abi::IOC_INFO => {
            slice.writer().write(&this.info()?)?;
        }
        abi::IOC_REG => {
            let (mut r, mut w) = slice.reader_writer();
            let mut req: abi::Reg = r.read()?;
            req.handle = this.register(&req)?;
            if req.access & abi::ACCESS_REMOTE != 0 {
                // Checked by `register` already.
                let v = abi::check_reg(&abi::Reg { handle: 0, ..req }, &this.limits())
                    .map_err(Error::from)
                    .and_then(|v| this.grant_rkey(req.handle, &v));
                match v {
                    Ok(rkey) => req.rkey = rkey,
                    Err(e) => {
                        let _ = this.deregister(&abi::Dereg {
                            handle: req.handle,
                            flags: 0,
                        });
                        return Err(e);
                    }
                }
            }
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
            slice.writer().write(&this.latency()?)?;
        }
        abi::IOC_BUDGET => {
            let (mut r, mut w) = slice.reader_writer();
            let req: abi::Budget = r.read()?;
            w.write(&this.budget(&req)?)?;
        }
        abi::IOC_REGION_STATS => {
            let (mut r, mut w) = slice.reader_writer();
            let req: abi::RegionStats = r.read()?;
            w.write(&this.region_stats(&req)?)?;
        }
        abi::IOC_QUEUE_CREATE => {
            let (mut r, mut w) = slice.reader_writer();
            let req: abi::Queue = r.read()?;
            // On a copy-out failure the queue stays: the file has it, and a second create
            // says EEXIST.
            w.write(&this.queue_create(&req)?)?;
        }
        abi::IOC_QUEUE_WAIT => {
            let (mut r, mut w) = slice.reader_writer();
            let req: abi::QueueWait = r.read()?;
            w.write(&this.queue_wait(&req)?)?;
        }
        abi::IOC_MBOX_CREATE => {
            let req: abi::Mbox = slice.reader().read()?;
            this.mbox_create(&req)?;
        }
        abi::IOC_NET_COUNTERS => {
            slice.writer().write(&this.engine.net_counters()?)?;
        }
        _ => return Err(ENOTTY),
    }
    Ok(0)
}
