// SPDX-License-Identifier: GPL-2.0-only

//! The ioctls of include/uapi/linux/exanest_dma.h: copy-in ([`Request::read`], each argument
//! read once), dispatch ([`Request::execute`]) and copy-out ([`Reply::write`]) only. What each
//! one does is a method of [`Process`] in the file of its concept; device.rs gets the process
//! a context first for the calls that need one.

use crate::error::CtxResult;
use crate::exanest_core::abi;
use crate::process::Process;
use kernel::{
    ioctl::_IOC_SIZE,
    prelude::*,
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
    abi::MboxWait,
    abi::NetCounters,
);

/// One call's argument, read from user memory once, before anything acts on it.
pub(crate) enum Request {
    Info,
    Reg(abi::Reg),
    Dereg(abi::Dereg),
    Copy(abi::Copy),
    Wait(abi::Wait),
    Counters,
    Advise(abi::Advise),
    Latency,
    Budget(abi::Budget),
    RegionStats(abi::RegionStats),
    QueueCreate(abi::Queue),
    QueueWait(abi::QueueWait),
    MboxCreate(abi::Mbox),
    MboxWait(abi::MboxWait),
    NetCounters,
}

/// What a call writes back to its argument.
pub(crate) enum Reply {
    None,
    Info(abi::Info),
    Reg(abi::Reg),
    Copy(abi::Copy),
    Wait(abi::Wait),
    Counters(abi::Counters),
    /// Boxed: 960 bytes, rarely asked for.
    Latency(KBox<abi::Latency>),
    Budget(abi::Budget),
    RegionStats(abi::RegionStats),
    Queue(abi::Queue),
    QueueWait(abi::QueueWait),
    MboxWait(abi::MboxWait),
    NetCounters(abi::NetCounters),
}

impl Request {
    /// Call `cmd`'s argument at `arg`: ENOTTY for an unknown call, EFAULT when it cannot be
    /// read. Calls that only write their struct read nothing.
    pub(crate) fn read(cmd: u32, arg: usize) -> Result<Self> {
        let mut r = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd)).reader();
        Ok(match cmd {
            abi::IOC_INFO => Request::Info,
            abi::IOC_REG => Request::Reg(r.read()?),
            abi::IOC_DEREG => Request::Dereg(r.read()?),
            abi::IOC_COPY => Request::Copy(r.read()?),
            abi::IOC_WAIT => Request::Wait(r.read()?),
            abi::IOC_COUNTERS => Request::Counters,
            abi::IOC_ADVISE => Request::Advise(r.read()?),
            abi::IOC_LATENCY => Request::Latency,
            abi::IOC_BUDGET => Request::Budget(r.read()?),
            abi::IOC_REGION_STATS => Request::RegionStats(r.read()?),
            abi::IOC_QUEUE_CREATE => Request::QueueCreate(r.read()?),
            abi::IOC_QUEUE_WAIT => Request::QueueWait(r.read()?),
            abi::IOC_MBOX_CREATE => Request::MboxCreate(r.read()?),
            abi::IOC_NET_COUNTERS => Request::NetCounters,
            abi::IOC_MBOX_WAIT => Request::MboxWait(r.read()?),
            _ => return Err(ENOTTY),
        })
    }

    /// Whether the call needs the process to hold a context (device.rs gets it one first, and
    /// again when it lost it meanwhile): COPY, QUEUE_CREATE, MBOX_CREATE, and a REG that asks
    /// for a remote right, whose endpoint must be resident (remote.rs).
    pub(crate) fn needs_context(&self) -> bool {
        match self {
            Request::Copy(_) | Request::QueueCreate(_) | Request::MboxCreate(_) => true,
            Request::Reg(r) => r.access & abi::ACCESS_REMOTE != 0,
            _ => false,
        }
    }

    /// Do what the call asks, as the method of [`Process`] that owns it.
    pub(crate) fn execute(&self, p: &Process) -> CtxResult<Reply> {
        Ok(match self {
            Request::Info => Reply::Info(p.info()?),
            Request::Reg(req) => Reply::Reg(p.register_call(req)?),
            Request::Dereg(req) => {
                p.deregister(req)?;
                Reply::None
            }
            Request::Copy(req) => {
                let (cookie, channel) = p.copy(req)?;
                Reply::Copy(abi::Copy {
                    cookie,
                    channel,
                    ..*req
                })
            }
            Request::Wait(req) => {
                let (status, bytes_done) = p.wait(req)?;
                Reply::Wait(abi::Wait {
                    status,
                    bytes_done,
                    ..*req
                })
            }
            Request::Counters => Reply::Counters(p.counters()),
            Request::Advise(req) => {
                p.advise(req)?;
                Reply::None
            }
            Request::Latency => Reply::Latency(KBox::new(p.latency()?, GFP_KERNEL)?),
            Request::Budget(req) => Reply::Budget(p.budget(req)?),
            Request::RegionStats(req) => Reply::RegionStats(p.region_stats(req)?),
            Request::QueueCreate(req) => Reply::Queue(p.queue_create(req)?),
            Request::QueueWait(req) => Reply::QueueWait(p.queue_wait(req)?),
            Request::MboxCreate(req) => {
                p.mbox_create(req)?;
                Reply::None
            }
            Request::MboxWait(req) => Reply::MboxWait(p.mbox_wait(req)?),
            Request::NetCounters => Reply::NetCounters(p.engine().net_counters()?),
        })
    }
}

impl Reply {
    /// Write the reply to the call's argument at `arg` (`cmd`'s size). When a REG's reply
    /// cannot be written, user space cannot learn the handle: the region is dropped again.
    /// Every other call's action stands (Documentation/abi.rst: a COPY runs, a WAIT's result
    /// is consumed, a queue stays).
    pub(crate) fn write(self, p: &Process, cmd: u32, arg: usize) -> Result<isize> {
        let mut w = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd)).writer();
        match self {
            Reply::None => Ok(()),
            Reply::Info(v) => w.write(&v),
            Reply::Reg(v) => w.write(&v).inspect_err(|_| p.drop_unreported(v.handle)),
            Reply::Copy(v) => w.write(&v),
            Reply::Wait(v) => w.write(&v),
            Reply::Counters(v) => w.write(&v),
            Reply::Latency(v) => w.write(&*v),
            Reply::Budget(v) => w.write(&v),
            Reply::RegionStats(v) => w.write(&v),
            Reply::Queue(v) => w.write(&v),
            Reply::QueueWait(v) => w.write(&v),
            Reply::MboxWait(v) => w.write(&v),
            Reply::NetCounters(v) => w.write(&v),
        }?;
        Ok(0)
    }
}
