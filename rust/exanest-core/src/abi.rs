// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The user ABI of `include/uapi/linux/exanest_dma.h`, and the validation of every request.
//!
//! The structs are `#[repr(C)]` copies of the C ones (a host test compares the layouts with the
//! header compiled by the C compiler). Validation returns an [`Errno`]: the glue turns it into
//! the kernel's error, so user space sees exactly the errno documented in Documentation/abi.rst.

/// ABI version reported by `EXANEST_DMA_IOC_INFO`.
pub const ABI_VERSION: u32 = 8;

/// `Info::context` of a file that holds no engine context at the moment (it gets one when it
/// next submits a copy).
pub const NO_CONTEXT: u32 = u32::MAX;

/// Pin and map at registration.
pub const MODE_PIN: u32 = 0;
/// Fault in and map at registration, without pinning.
pub const MODE_PREFAULT: u32 = 1;
/// Map nothing until the engine faults.
pub const MODE_ON_DEMAND: u32 = 2;

/// The engine may read the region (copy source).
pub const ACCESS_READ: u32 = 1 << 0;
/// The engine may write the region (copy destination).
pub const ACCESS_WRITE: u32 = 1 << 1;
/// ABI 4: other nodes' engines may read the region under its rkey (needs [`ACCESS_READ`]).
pub const ACCESS_REMOTE_READ: u32 = 1 << 2;
/// ABI 4: other nodes' engines may write the region under its rkey (needs [`ACCESS_WRITE`]).
pub const ACCESS_REMOTE_WRITE: u32 = 1 << 3;
/// The remote access bits.
pub const ACCESS_REMOTE: u32 = ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE;
/// Every access bit this version knows.
pub const ACCESS_ALL: u32 = ACCESS_READ | ACCESS_WRITE | ACCESS_REMOTE;
/// `Info::node` of an engine without a network port.
pub const NO_NODE: u32 = 0xffff_ffff;

/// ioctl type byte.
pub const IOC_MAGIC: u32 = 0xE5;

/// The generic Linux ioctl encoding (arm64, x86): dir 31:30, size 29:16, type 15:8, nr 7:0.
pub const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (IOC_MAGIC << 8) | nr
}
const IOC_W: u32 = 1;
const IOC_R: u32 = 2;

/// `EXANEST_DMA_IOC_INFO`.
pub const IOC_INFO: u32 = ioc(IOC_R, 0, core::mem::size_of::<Info>());
/// `EXANEST_DMA_IOC_REG`.
pub const IOC_REG: u32 = ioc(IOC_R | IOC_W, 1, core::mem::size_of::<Reg>());
/// `EXANEST_DMA_IOC_DEREG`.
pub const IOC_DEREG: u32 = ioc(IOC_W, 2, core::mem::size_of::<Dereg>());
/// `EXANEST_DMA_IOC_COPY`.
pub const IOC_COPY: u32 = ioc(IOC_R | IOC_W, 3, core::mem::size_of::<Copy>());
/// `EXANEST_DMA_IOC_WAIT`.
pub const IOC_WAIT: u32 = ioc(IOC_R | IOC_W, 4, core::mem::size_of::<Wait>());
/// `EXANEST_DMA_IOC_COUNTERS`.
pub const IOC_COUNTERS: u32 = ioc(IOC_R, 5, core::mem::size_of::<Counters>());

/// `EXANEST_DMA_REG_WINDOW`: the touch-ahead field is set.
pub const REG_WINDOW: u32 = 1 << 0;
/// `EXANEST_DMA_REG_INITIATOR` (ABI 8): the region's remote key works only in ops from node
/// `initiator` (register map 2.9; EOPNOTSUPP on an older engine).
pub const REG_INITIATOR: u32 = 1 << 1;
/// Largest touch-ahead window, in pages.
pub const MAX_WINDOW: u32 = 511;
/// `EXANEST_DMA_WINDOW_ADAPTIVE`: a touch-ahead window that grows on sequential faults.
pub const WINDOW_ADAPTIVE: u32 = u32::MAX;
/// `EXANEST_DMA_ADVISE_WRITE`.
pub const ADVISE_WRITE: u32 = 1 << 0;
/// `EXANEST_DMA_IOC_ADVISE`.
pub const IOC_ADVISE: u32 = ioc(IOC_W, 6, core::mem::size_of::<Advise>());

/// Buckets of [`Latency`].
pub const LATENCY_BUCKETS: usize = 24;
/// `EXANEST_DMA_IOC_LATENCY`.
pub const IOC_LATENCY: u32 = ioc(IOC_R, 7, core::mem::size_of::<Latency>());
/// `EXANEST_DMA_IOC_REGION_STATS`.
pub const IOC_REGION_STATS: u32 = ioc(IOC_R | IOC_W, 8, core::mem::size_of::<RegionStats>());
/// `EXANEST_DMA_IOC_BUDGET`.
pub const IOC_BUDGET: u32 = ioc(IOC_R | IOC_W, 9, core::mem::size_of::<Budget>());

/// `EXANEST_DMA_IOC_QUEUE_CREATE` (ABI 3).
pub const IOC_QUEUE_CREATE: u32 = ioc(IOC_R | IOC_W, 0x0a, core::mem::size_of::<Queue>());
/// `EXANEST_DMA_IOC_QUEUE_WAIT` (ABI 3).
pub const IOC_QUEUE_WAIT: u32 = ioc(IOC_R | IOC_W, 0x0b, core::mem::size_of::<QueueWait>());
/// `EXANEST_DMA_IOC_MBOX_CREATE` (ABI 5).
pub const IOC_MBOX_CREATE: u32 = ioc(IOC_W, 0x0c, core::mem::size_of::<Mbox>());
/// `EXANEST_DMA_IOC_NET_COUNTERS` (ABI 6).
pub const IOC_NET_COUNTERS: u32 = ioc(IOC_R, 0x0d, core::mem::size_of::<NetCounters>());
/// `EXANEST_DMA_IOC_MBOX_WAIT` (ABI 7).
pub const IOC_MBOX_WAIT: u32 = ioc(IOC_R | IOC_W, 0x0e, core::mem::size_of::<MboxWait>());
/// Smallest log2 of a queue ring's entries.
pub const QUEUE_LOG2_MIN: u32 = 1;
/// Largest log2 of a queue ring's entries.
pub const QUEUE_LOG2_MAX: u32 = 12;
/// Bytes per SQ and CQ entry.
pub const QUEUE_ENTRY: u64 = 32;
/// Alignment of a queue ring.
pub const QUEUE_ALIGN: u64 = 4096;
/// `EXANEST_DMA_QERR_SQ_FETCH`: a descriptor could not be read.
pub const QERR_SQ_FETCH: u32 = 2;
/// `EXANEST_DMA_QERR_CQ_WRITE`: a completion could not be written.
pub const QERR_CQ_WRITE: u32 = 3;
/// `EXANEST_DMA_EVENT_EVICTED`: the kind of the queue's event entry that says the translation
/// budget evicted pages (`bytes`: how many; `wr_id`: the first address of the last run).
pub const EVENT_EVICTED: u8 = 1;

/// `struct exanest_dma_queue`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queue {
    /// Send queue ring.
    pub sq_addr: u64,
    /// Completion queue ring.
    pub cq_addr: u64,
    /// log2 of the SQ's entries.
    pub sq_log2: u32,
    /// log2 of the CQ's entries.
    pub cq_log2: u32,
    /// Zero.
    pub flags: u32,
    /// Out: the context.
    pub context: u32,
    /// Out: the queue's channels.
    pub channels: u32,
    /// Zero.
    pub reserved: u32,
    /// Out: mmap offset of the doorbell page.
    pub doorbell_offset: u64,
}

/// `struct exanest_dma_queue_wait`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueWait {
    /// Free-running index of the completion waited for.
    pub cq_head: u32,
    /// Zero.
    pub flags: u32,
    /// Timeout; negative waits forever, zero polls.
    pub timeout_ns: i64,
    /// Out: 0 or a `QERR_*`.
    pub error: u32,
    /// Zero.
    pub reserved: u32,
    /// Out: the address the queue error is about.
    pub error_addr: u64,
}

/// Bytes of a mailbox slot (`EXANEST_DMA_MBOX_SLOT`): a 64-byte header, then the message.
pub const MBOX_SLOT: u64 = 320;
/// Bytes of a mailbox message, at most (`EXANEST_DMA_MBOX_MAX`).
pub const MBOX_MAX: u32 = 256;
/// Largest log2 of a mailbox ring's slots.
pub const MBOX_LOG2_MAX: u32 = 12;

/// `struct exanest_dma_mbox` (ABI 5).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mbox {
    /// The receive ring: 2^`log2` slots of [`MBOX_SLOT`] bytes, 4 KiB aligned, zeroed.
    pub addr: u64,
    /// log2 of the ring's slots, 1..[`MBOX_LOG2_MAX`].
    pub log2: u32,
    /// Zero.
    pub flags: u32,
}

/// `struct exanest_dma_mbox_wait` (ABI 7): sleep until the mailbox holds a message its reader
/// has not taken.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MboxWait {
    /// Timeout; negative waits forever, zero polls.
    pub timeout_ns: i64,
    /// Zero.
    pub flags: u32,
    /// Out: the messages the ring holds that the reader has not taken (at least 1).
    pub pending: u32,
}

/// Check an `EXANEST_DMA_IOC_MBOX_WAIT` request: flags and the out field zero.
pub fn check_mbox_wait(w: &MboxWait) -> Result<(), Errno> {
    if w.flags != 0 || w.pending != 0 {
        return Err(Errno::Inval);
    }
    Ok(())
}

/// Check an `EXANEST_DMA_IOC_MBOX_CREATE` request: flags zero, the size in range, the ring
/// aligned (`Inval`) and inside the address space (`Overflow`, `Fault`). The ring in whole pages.
pub fn check_mbox(m: &Mbox, lim: &Limits) -> Result<Range, Errno> {
    if m.flags != 0 || !(1..=MBOX_LOG2_MAX).contains(&m.log2) || m.addr % QUEUE_ALIGN != 0 {
        return Err(Errno::Inval);
    }
    let len = (MBOX_SLOT << m.log2).div_ceil(QUEUE_ALIGN) * QUEUE_ALIGN;
    Range::new(m.addr, len, lim.va_end)
}

/// A queue request that passed the checks: the two rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidQueue {
    /// The send queue ring.
    pub sq: Range,
    /// The completion queue ring.
    pub cq: Range,
    /// log2 of the SQ's entries.
    pub sq_log2: u32,
    /// log2 of the CQ's entries.
    pub cq_log2: u32,
}

/// Check an `EXANEST_DMA_IOC_QUEUE_CREATE` request: flags, reserved and out fields zero, ring
/// sizes in range, rings aligned, inside the address space and disjoint (`Inval`; `Overflow` or
/// `Fault` from [`Range::new`] for an address the device cannot reach).
pub fn check_queue(q: &Queue, lim: &Limits) -> Result<ValidQueue, Errno> {
    if q.flags != 0 || q.context != 0 || q.channels != 0 || q.reserved != 0 {
        return Err(Errno::Inval);
    }
    if q.doorbell_offset != 0 {
        return Err(Errno::Inval);
    }
    let size = |l: u32| {
        if (QUEUE_LOG2_MIN..=QUEUE_LOG2_MAX).contains(&l) {
            Ok(QUEUE_ENTRY << l)
        } else {
            Err(Errno::Inval)
        }
    };
    let (sq_len, cq_len) = (size(q.sq_log2)?, size(q.cq_log2)?);
    if q.sq_addr % QUEUE_ALIGN != 0 || q.cq_addr % QUEUE_ALIGN != 0 {
        return Err(Errno::Inval);
    }
    // Whole pages: the rings are pinned and mapped by the page.
    let pages = |l: u64| l.div_ceil(QUEUE_ALIGN) * QUEUE_ALIGN;
    let sq = Range::new(q.sq_addr, pages(sq_len), lim.va_end)?;
    let cq = Range::new(q.cq_addr, pages(cq_len), lim.va_end)?;
    if sq.overlaps(&cq) {
        return Err(Errno::Inval);
    }
    Ok(ValidQueue {
        sq,
        cq,
        sq_log2: q.sq_log2,
        cq_log2: q.cq_log2,
    })
}

/// Check an `EXANEST_DMA_IOC_QUEUE_WAIT` request.
pub fn check_queue_wait(w: &QueueWait) -> Result<(), Errno> {
    if w.flags != 0 || w.error != 0 || w.reserved != 0 || w.error_addr != 0 {
        return Err(Errno::Inval);
    }
    Ok(())
}

/// A log2 histogram of durations in microseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// Bucket 0: under 2 us; bucket i: [2^i, 2^(i+1)) us; the last: longer.
    pub buckets: [u64; LATENCY_BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: [0; LATENCY_BUCKETS],
        }
    }
}

/// `struct exanest_dma_latency`: fault resolution times, whole and by stage.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Engine fault interrupt to RESUME or NACK.
    pub total: Histogram,
    /// Interrupt to the fault worker taking the channel.
    pub queue: Histogram,
    /// Each `hmm_range_fault`.
    pub fault_in: Histogram,
    /// Each IOMMU map of the faulted pages.
    pub map: Histogram,
    /// From the IOMMU fault handler's call to the page mapped.
    pub handler: Histogram,
}

impl Histogram {
    /// The bucket of a duration in microseconds.
    pub fn bucket(us: u64) -> usize {
        let b = if us < 2 {
            0
        } else {
            63 - us.leading_zeros() as usize
        };
        b.min(LATENCY_BUCKETS - 1)
    }

    /// Count one duration.
    pub fn record(&mut self, us: u64) {
        self.buckets[Self::bucket(us)] += 1;
    }

    /// The smallest duration bound (us) below which at least `pct` percent of the samples lie,
    /// as the upper edge of a bucket; `None` without samples.
    pub fn percentile(&self, pct: u64) -> Option<u64> {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return None;
        }
        let want = (total * pct).div_ceil(100);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some(2u64 << i);
            }
        }
        Some(u64::MAX)
    }
}

/// `struct exanest_dma_region_stats`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// In: the region.
    pub handle: u32,
    /// `MODE_*`.
    pub mode: u32,
    /// Engine faults resolved or NACKed in the region.
    pub faults: u64,
    /// Pages faulted in and mapped on demand.
    pub pages_resolved: u64,
    /// Zero.
    pub reserved: [u64; 2],
}

/// `struct exanest_dma_budget`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// In: the new budget in pages, 0 to keep it. Out: the budget.
    pub pages: u64,
    /// Out: pages evicted so far.
    pub evicted_pages: u64,
    /// Out: evictions so far (a fault-in that unmapped older runs counts once).
    pub evictions: u64,
    /// Out: pages the on-demand mirror maps now.
    pub mapped_pages: u64,
    /// Zero.
    pub reserved: [u64; 2],
}

/// The errors the driver reports, by name; the glue maps them to kernel error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// Malformed request: zero length, unknown flag, mode or access bit, non-zero reserved field,
    /// overlapping copy.
    Inval,
    /// `addr + length` wraps around the address space.
    Overflow,
    /// Address outside what the device can reach, or outside every registered region.
    Fault,
    /// The region does not allow this access.
    Acces,
    /// Unknown handle or cookie.
    NoEnt,
    /// Too many regions.
    NoSpc,
    /// Too many copies in flight.
    Again,
    /// Length above the engine's maximum transfer.
    TooBig,
    /// Mode not implemented yet.
    OpNotSupp,
    /// The region is in use by a copy in flight.
    Busy,
}

impl Errno {
    /// Every variant, for tables and tests.
    pub const ALL: [Errno; 10] = [
        Errno::Inval,
        Errno::Overflow,
        Errno::Fault,
        Errno::Acces,
        Errno::NoEnt,
        Errno::NoSpc,
        Errno::Again,
        Errno::TooBig,
        Errno::OpNotSupp,
        Errno::Busy,
    ];

    /// The positive Linux errno number (asm-generic numbering, as on arm64 and x86), e.g.
    /// `Errno::NoEnt.code() == 2`. The one mapping: the driver returns `-code()`, the user
    /// library maps an errno back with [`Errno::from_code`].
    pub const fn code(self) -> i32 {
        match self {
            Errno::Inval => 22,
            Errno::Overflow => 75,
            Errno::Fault => 14,
            Errno::Acces => 13,
            Errno::NoEnt => 2,
            Errno::NoSpc => 28,
            Errno::Again => 11,
            Errno::TooBig => 7,
            Errno::OpNotSupp => 95,
            Errno::Busy => 16,
        }
    }

    /// The variant whose [`Errno::code`] is `code` (positive); `None` for any other errno.
    pub fn from_code(code: i32) -> Option<Errno> {
        Errno::ALL.into_iter().find(|e| e.code() == code)
    }

    /// The C name, e.g. `"ENOENT"`.
    pub const fn name(self) -> &'static str {
        match self {
            Errno::Inval => "EINVAL",
            Errno::Overflow => "EOVERFLOW",
            Errno::Fault => "EFAULT",
            Errno::Acces => "EACCES",
            Errno::NoEnt => "ENOENT",
            Errno::NoSpc => "ENOSPC",
            Errno::Again => "EAGAIN",
            Errno::TooBig => "E2BIG",
            Errno::OpNotSupp => "EOPNOTSUPP",
            Errno::Busy => "EBUSY",
        }
    }
}

/// The memory modes of a region, by name: the `MODE_*` values of the ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// [`MODE_PIN`]: pin and map at registration.
    Pin,
    /// [`MODE_PREFAULT`]: fault in and map at registration, without pinning.
    Prefault,
    /// [`MODE_ON_DEMAND`]: map nothing until the engine faults.
    OnDemand,
}

impl Mode {
    /// Every mode, in `MODE_*` order.
    pub const ALL: [Mode; 3] = [Mode::Pin, Mode::Prefault, Mode::OnDemand];

    /// The `MODE_*` value.
    pub const fn raw(self) -> u32 {
        match self {
            Mode::Pin => MODE_PIN,
            Mode::Prefault => MODE_PREFAULT,
            Mode::OnDemand => MODE_ON_DEMAND,
        }
    }

    /// The mode of a `MODE_*` value; `None` for an unknown one.
    pub const fn from_raw(raw: u32) -> Option<Mode> {
        match raw {
            MODE_PIN => Some(Mode::Pin),
            MODE_PREFAULT => Some(Mode::Prefault),
            MODE_ON_DEMAND => Some(Mode::OnDemand),
            _ => None,
        }
    }

    /// The name the CLI, the benchmark, debugfs and the documentation use: `pin`, `prefault`,
    /// `on-demand`.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Pin => "pin",
            Mode::Prefault => "prefault",
            Mode::OnDemand => "on-demand",
        }
    }
}

impl core::fmt::Display for Mode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.pad(self.name())
    }
}

/// A name that is not one of [`Mode::name`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownMode;

impl core::fmt::Display for UnknownMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("unknown mode (expected pin, prefault or on-demand)")
    }
}

impl core::str::FromStr for Mode {
    type Err = UnknownMode;

    /// Parse a [`Mode::name`] (exactly, lower case).
    fn from_str(s: &str) -> Result<Self, UnknownMode> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or(UnknownMode)
    }
}

impl From<Mode> for u32 {
    fn from(m: Mode) -> u32 {
        m.raw()
    }
}

impl TryFrom<u32> for Mode {
    type Error = Errno;

    /// An unknown `MODE_*` value is `Errno::Inval`, as `check_reg` reports it.
    fn try_from(raw: u32) -> Result<Self, Errno> {
        Mode::from_raw(raw).ok_or(Errno::Inval)
    }
}

/// `struct exanest_dma_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Info {
    /// ABI version.
    pub abi_version: u32,
    /// Engine VERSION register.
    pub hw_version: u32,
    /// Channels of this file's context.
    pub channels: u32,
    /// Bit (1 << mode) per implemented mode.
    pub modes: u32,
    /// Largest copy.
    pub max_transfer: u64,
    /// Regions per process.
    pub max_regions: u32,
    /// Copies in flight per process.
    pub max_inflight: u32,
    /// This file's context (ABI 2).
    pub context: u32,
    /// The engine's contexts (ABI 2).
    pub contexts: u32,
    /// ABI 4: the engine's network node id, or [`NO_NODE`].
    pub node: u32,
    /// ABI 4: this file's endpoint, the id other nodes address it by.
    pub endpoint: u32,
    /// Zero.
    pub reserved: [u64; 2],
}

/// `struct exanest_dma_reg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reg {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u64,
    /// `ACCESS_*` bits.
    pub access: u32,
    /// `MODE_*`.
    pub mode: u32,
    /// Zero.
    pub flags: u32,
    /// Out: handle.
    pub handle: u32,
    /// Touch-ahead pages, with [`REG_WINDOW`].
    pub touch_ahead: u32,
    /// ABI 8, with [`REG_INITIATOR`]: the only node whose ops the remote key works in;
    /// zero without.
    pub initiator: u32,
    /// In: zero. Out, ABI 4: the remote key, with a remote access bit (0 without).
    pub rkey: u64,
}

/// `struct exanest_dma_advise`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Advise {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u64,
    /// `ADVISE_*` flags.
    pub flags: u32,
    /// Zero.
    pub reserved: u32,
}

/// `struct exanest_dma_dereg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dereg {
    /// Handle to drop.
    pub handle: u32,
    /// Zero.
    pub flags: u32,
}

/// `struct exanest_dma_copy`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copy {
    /// Source address.
    pub src: u64,
    /// Destination address.
    pub dst: u64,
    /// Length in bytes.
    pub length: u64,
    /// Zero.
    pub flags: u32,
    /// Out: channel.
    pub channel: u32,
    /// Out: cookie.
    pub cookie: u64,
}

/// `struct exanest_dma_wait`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wait {
    /// Cookie of the copy.
    pub cookie: u64,
    /// Timeout; negative waits forever, zero polls.
    pub timeout_ns: i64,
    /// Zero.
    pub flags: u32,
    /// Out: 0 or a negative errno.
    pub status: i32,
    /// Out: bytes copied.
    pub bytes_done: u64,
}

/// `struct exanest_dma_counters`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Copies completed.
    pub copies: u64,
    /// Copies ended with an error.
    pub copy_errors: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Regions registered now.
    pub regions: u64,
    /// Pages mapped now.
    pub pages_mapped: u64,
    /// Pages pinned now.
    pub pages_pinned: u64,
    /// Engine faults.
    pub faults: u64,
    /// Faults resolved.
    pub faults_resolved: u64,
    /// Faults NACKed.
    pub nacks: u64,
    /// Invalidations that unmapped pages.
    pub invalidations: u64,
    /// Faults the IOMMU reported.
    pub iommu_faults: u64,
    /// Pages faulted in and mapped on demand.
    pub pages_resolved: u64,
    /// Of which past the faulting page.
    pub touch_ahead_pages: u64,
    /// RESUMEs after a resolved fault.
    pub retransmissions: u64,
    /// 2 MiB IOMMU blocks mapped for transparent huge pages.
    pub huge_mappings: u64,
    /// Pages unmapped to keep within the translation budget (ABI 2).
    pub evicted_pages: u64,
}

/// `struct exanest_dma_net_counters` (ABI 6): the network port's counters, in the order of
/// the engine's counter registers (`regs::net::CNT_*`) after `node` and `link`: the
/// [`NetCounters::FIELDS`] of register map 2.4 (2.5's key failures and quarantine drops are in
/// debugfs, `engine` and `quarantine`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// This engine's node id.
    pub node: u32,
    /// 1 while the port has a peer.
    pub link: u32,
    /// Packets sent.
    pub tx_packets: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Received and dropped.
    pub rx_dropped: u64,
    /// Of which with a bad checksum.
    pub rx_bad_crc: u64,
    /// FAULT, NOT_READY, SEQUENCE and RNR NACKs sent.
    pub nacks_sent: u64,
    /// NACKs received.
    pub nacks_received: u64,
    /// RESUMEs sent.
    pub resumes_sent: u64,
    /// RESUMEs received.
    pub resumes_received: u64,
    /// Payload bytes sent again.
    pub retransmitted_bytes: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Data packets dropped as duplicates or beyond a gap.
    pub duplicates: u64,
    /// Packets the drop injection dropped.
    pub injected_drops: u64,
    /// Packets the corruption injection changed.
    pub injected_corruptions: u64,
    /// Error NACKs sent.
    pub error_nacks: u64,
    /// Bytes placed for remote ops.
    pub placed_bytes: u64,
    /// Probes of a paused op.
    pub probes: u64,
    /// Mailbox messages placed.
    pub mbox_placed: u64,
    /// RNR NACKs sent.
    pub rnr_sent: u64,
}

impl NetCounters {
    /// The engine's counters the structure holds: `regs::net::CNT_*` below it.
    pub const FIELDS: usize = 18;

    /// Set counter `i` (`regs::net::CNT_*`) to `v`; false for an index it does not have.
    pub fn set(&mut self, i: usize, v: u64) -> bool {
        let f = match i {
            0 => &mut self.tx_packets,
            1 => &mut self.rx_packets,
            2 => &mut self.rx_dropped,
            3 => &mut self.rx_bad_crc,
            4 => &mut self.nacks_sent,
            5 => &mut self.nacks_received,
            6 => &mut self.resumes_sent,
            7 => &mut self.resumes_received,
            8 => &mut self.retransmitted_bytes,
            9 => &mut self.timeouts,
            10 => &mut self.duplicates,
            11 => &mut self.injected_drops,
            12 => &mut self.injected_corruptions,
            13 => &mut self.error_nacks,
            14 => &mut self.placed_bytes,
            15 => &mut self.probes,
            16 => &mut self.mbox_placed,
            17 => &mut self.rnr_sent,
            _ => return false,
        };
        *f = v;
        true
    }
}

/// One line, `name value` pairs: what `exanest-cli counters` and debugfs print.
impl core::fmt::Display for Counters {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "copies {} errors {} bytes {} regions {} pages-mapped {} pages-pinned {} faults {} \
             faults-resolved {} nacks {} retransmissions {} invalidations {} iommu-faults {} \
             pages-resolved {} touch-ahead-pages {} huge-mappings {} evicted-pages {}",
            self.copies,
            self.copy_errors,
            self.bytes,
            self.regions,
            self.pages_mapped,
            self.pages_pinned,
            self.faults,
            self.faults_resolved,
            self.nacks,
            self.retransmissions,
            self.invalidations,
            self.iommu_faults,
            self.pages_resolved,
            self.touch_ahead_pages,
            self.huge_mappings,
            self.evicted_pages
        )
    }
}

/// Limits a request is checked against.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One past the highest address the device can use (the IOMMU aperture, e.g. 2^48).
    pub va_end: u64,
    /// Largest copy.
    pub max_transfer: u64,
    /// Modes implemented, as `1 << MODE_*` bits.
    pub modes: u32,
    /// Touch-ahead window of a region registered without [`REG_WINDOW`].
    pub default_window: u32,
}

/// A half-open address range `[start, end)`, never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl Range {
    /// `[addr, addr + len)`, checked: zero length is `Inval`, wrapping is `Overflow`, reaching
    /// past `va_end` is `Fault`.
    pub fn new(addr: u64, len: u64, va_end: u64) -> Result<Self, Errno> {
        if len == 0 {
            return Err(Errno::Inval);
        }
        let end = addr.checked_add(len).ok_or(Errno::Overflow)?;
        if end > va_end {
            return Err(Errno::Fault);
        }
        Ok(Range { start: addr, end })
    }

    /// Length in bytes.
    pub const fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Always false: a range is never empty.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Whether `other` lies entirely inside `self`.
    pub const fn contains(&self, other: &Range) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// Whether the two ranges share a byte.
    pub const fn overlaps(&self, other: &Range) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// First and one-past-last page frame (of `1 << page_shift` bytes) the range touches.
    pub const fn pages(&self, page_shift: u32) -> (u64, u64) {
        (self.start >> page_shift, ((self.end - 1) >> page_shift) + 1)
    }
}

/// A registration request that passed validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidReg {
    /// The registered range.
    pub range: Range,
    /// `ACCESS_*` bits.
    pub access: u32,
    /// `MODE_*`.
    pub mode: u32,
    /// Touch-ahead window in pages.
    pub window: u32,
    /// The node the remote key is bound to ([`REG_INITIATOR`]), if any.
    pub initiator: Option<u32>,
    /// The window is the driver's default (no [`REG_WINDOW`]): the driver also maps the rest
    /// of a faulting transfer ahead ([`super::ahead`]). A window the caller chose is exactly
    /// what a fault maps.
    pub map_ahead: bool,
}

/// Check an `EXANEST_DMA_IOC_REG` request.
pub fn check_reg(r: &Reg, lim: &Limits) -> Result<ValidReg, Errno> {
    if r.flags & !(REG_WINDOW | REG_INITIATOR) != 0 || r.handle != 0 || r.rkey != 0 {
        return Err(Errno::Inval);
    }
    // A key bound to a node: there must be a key (a remote right), and a node id.
    let initiator = if r.flags & REG_INITIATOR != 0 {
        if r.access & (ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE) == 0
            || r.initiator as usize >= super::regs::net::MAX_NODES
        {
            return Err(Errno::Inval);
        }
        Some(r.initiator)
    } else if r.initiator != 0 {
        return Err(Errno::Inval);
    } else {
        None
    };
    let window = if r.flags & REG_WINDOW != 0 {
        if r.touch_ahead > MAX_WINDOW && r.touch_ahead != WINDOW_ADAPTIVE {
            return Err(Errno::Inval);
        }
        r.touch_ahead
    } else {
        if r.touch_ahead != 0 {
            return Err(Errno::Inval);
        }
        lim.default_window
    };
    if r.access == 0 || r.access & !ACCESS_ALL != 0 {
        return Err(Errno::Inval);
    }
    // A remote right needs the local one: the engine reaches the region through the same
    // mapping.
    if (r.access & ACCESS_REMOTE_READ != 0 && r.access & ACCESS_READ == 0)
        || (r.access & ACCESS_REMOTE_WRITE != 0 && r.access & ACCESS_WRITE == 0)
    {
        return Err(Errno::Inval);
    }
    if r.mode > MODE_ON_DEMAND {
        return Err(Errno::Inval);
    }
    let range = Range::new(r.addr, r.length, lim.va_end)?;
    if lim.modes & (1 << r.mode) == 0 {
        return Err(Errno::OpNotSupp);
    }
    Ok(ValidReg {
        range,
        access: r.access,
        mode: r.mode,
        window,
        initiator,
        map_ahead: r.flags & REG_WINDOW == 0,
    })
}

/// Check an `EXANEST_DMA_IOC_ADVISE` request: the range and whether it asks for write access.
pub fn check_advise(a: &Advise, lim: &Limits) -> Result<(Range, bool), Errno> {
    if a.flags & !ADVISE_WRITE != 0 || a.reserved != 0 {
        return Err(Errno::Inval);
    }
    let range = Range::new(a.addr, a.length, lim.va_end)?;
    Ok((range, a.flags & ADVISE_WRITE != 0))
}

/// A copy request that passed the checks that need no region lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidCopy {
    /// Source range.
    pub src: Range,
    /// Destination range.
    pub dst: Range,
}

/// Check an `EXANEST_DMA_IOC_COPY` request (the region lookup comes after).
pub fn check_copy(c: &Copy, lim: &Limits) -> Result<ValidCopy, Errno> {
    if c.flags != 0 || c.channel != 0 || c.cookie != 0 {
        return Err(Errno::Inval);
    }
    let src = Range::new(c.src, c.length, lim.va_end)?;
    let dst = Range::new(c.dst, c.length, lim.va_end)?;
    if c.length > lim.max_transfer {
        return Err(Errno::TooBig);
    }
    if src.overlaps(&dst) {
        return Err(Errno::Inval);
    }
    Ok(ValidCopy { src, dst })
}

/// Check an `EXANEST_DMA_IOC_WAIT` request.
pub fn check_wait(w: &Wait) -> Result<(), Errno> {
    if w.flags != 0 || w.status != 0 || w.bytes_done != 0 {
        return Err(Errno::Inval);
    }
    if w.cookie == 0 {
        return Err(Errno::NoEnt);
    }
    Ok(())
}

/// Check an `EXANEST_DMA_IOC_REGION_STATS` request: the handle, with every out field and the
/// reserved words zero (`Inval` otherwise); handle 0 is `NoEnt`.
pub fn check_region_stats(r: &RegionStats) -> Result<u32, Errno> {
    if r.mode != 0 || r.faults != 0 || r.pages_resolved != 0 || r.reserved != [0; 2] {
        return Err(Errno::Inval);
    }
    if r.handle == 0 {
        return Err(Errno::NoEnt);
    }
    Ok(r.handle)
}

/// Check an `EXANEST_DMA_IOC_BUDGET` request against the largest budget allowed: the new
/// budget (`None`: keep it). Out fields and reserved words must be zero (`Inval`); a budget
/// above `max` is `TooBig`.
pub fn check_budget(b: &Budget, max: u64) -> Result<Option<u64>, Errno> {
    if b.evicted_pages != 0 || b.evictions != 0 || b.mapped_pages != 0 || b.reserved != [0; 2] {
        return Err(Errno::Inval);
    }
    match b.pages {
        0 => Ok(None),
        p if p > max => Err(Errno::TooBig),
        p => Ok(Some(p)),
    }
}

/// Check an `EXANEST_DMA_IOC_DEREG` request.
pub fn check_dereg(d: &Dereg) -> Result<u32, Errno> {
    if d.flags != 0 {
        return Err(Errno::Inval);
    }
    if d.handle == 0 {
        return Err(Errno::NoEnt);
    }
    Ok(d.handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each of the engine's counter registers lands in its own field, the one its name says,
    /// and no index past them is taken.
    #[test]
    fn net_counters_by_register_index() {
        extern crate std;
        use crate::regs::net;
        use std::vec::Vec;
        let all = |c: &NetCounters| {
            [
                c.tx_packets,
                c.rx_packets,
                c.rx_dropped,
                c.rx_bad_crc,
                c.nacks_sent,
                c.nacks_received,
                c.resumes_sent,
                c.resumes_received,
                c.retransmitted_bytes,
                c.timeouts,
                c.duplicates,
                c.injected_drops,
                c.injected_corruptions,
                c.error_nacks,
                c.placed_bytes,
                c.probes,
                c.mbox_placed,
                c.rnr_sent,
            ]
        };
        for i in 0..NetCounters::FIELDS {
            let mut c = NetCounters::default();
            assert!(c.set(i, 1000 + i as u64));
            assert_eq!((c.node, c.link), (0, 0));
            let at: Vec<usize> = (0..NetCounters::FIELDS)
                .filter(|&w| all(&c)[w] != 0)
                .collect();
            assert_eq!(at, [i], "counter {i}");
        }
        assert_eq!(
            NetCounters::FIELDS,
            net::CNT_KEY_FAILS,
            "2.4's counters, all of them"
        );
        for i in NetCounters::FIELDS..=net::COUNTERS {
            assert!(!NetCounters::default().set(i, 1));
        }
        let mut c = NetCounters::default();
        c.set(net::CNT_RETRANS_BYTES, 7);
        c.set(net::CNT_TIMEOUTS, 8);
        c.set(net::CNT_NACKS_RECEIVED, 9);
        c.set(net::CNT_RNR_SENT, 10);
        assert_eq!(
            (
                c.retransmitted_bytes,
                c.timeouts,
                c.nacks_received,
                c.rnr_sent
            ),
            (7, 8, 9, 10)
        );
    }

    fn queue(sq: u64, cq: u64, ls: u32, lc: u32) -> Queue {
        Queue {
            sq_addr: sq,
            cq_addr: cq,
            sq_log2: ls,
            cq_log2: lc,
            ..Default::default()
        }
    }

    /// A mailbox ring: 2..4096 slots of 320 bytes, 4 KiB aligned, whole pages; flags zero.
    #[test]
    fn mbox_checks() {
        let m = |addr, log2, flags| Mbox { addr, log2, flags };
        let r = check_mbox(&m(0x10000, 4, 0), &LIM).unwrap();
        assert_eq!(
            (r.start, r.end),
            (0x10000, 0x12000),
            "16 slots: 5120 bytes, 2 pages"
        );
        let r = check_mbox(&m(0x10000, 12, 0), &LIM).unwrap();
        assert_eq!(r.len(), 320 << 12);
        for bad in [
            m(0x10000, 0, 0),
            m(0x10000, 13, 0),
            m(0x10000, u32::MAX, 0),
            m(0x10040, 4, 0),
            m(0x10000, 4, 1),
        ] {
            assert_eq!(check_mbox(&bad, &LIM), Err(Errno::Inval), "{bad:?}");
        }
        assert_eq!(
            check_mbox(&m(LIM.va_end - 0x1000, 4, 0), &LIM),
            Err(Errno::Fault)
        );
    }

    /// A queue's rings: sizes 2..4096 entries, 4 KiB aligned, whole pages, disjoint; every
    /// out and reserved field zero.
    #[test]
    fn queue_checks() {
        let v = check_queue(&queue(0x10000, 0x20000, 6, 12), &LIM).unwrap();
        assert_eq!((v.sq.start, v.sq.end), (0x10000, 0x11000));
        assert_eq!((v.cq.start, v.cq.end), (0x20000, 0x40000));
        assert_eq!((v.sq_log2, v.cq_log2), (6, 12));
        for (ls, lc) in [(0, 4), (4, 0), (13, 4), (4, 13), (u32::MAX, 4)] {
            assert_eq!(
                check_queue(&queue(0x10000, 0x20000, ls, lc), &LIM),
                Err(Errno::Inval)
            );
        }
        assert_eq!(
            check_queue(&queue(0x10800, 0x20000, 4, 4), &LIM),
            Err(Errno::Inval)
        );
        assert_eq!(
            check_queue(&queue(0x10000, 0x20040, 4, 4), &LIM),
            Err(Errno::Inval)
        );
        // A 4096-entry SQ is 128 KiB: a CQ 64 KiB after its start overlaps it.
        assert_eq!(
            check_queue(&queue(0x10000, 0x20000, 12, 1), &LIM),
            Err(Errno::Inval)
        );
        assert_eq!(
            check_queue(&queue(0x10000, 0x10000, 1, 1), &LIM),
            Err(Errno::Inval)
        );
        assert_eq!(
            check_queue(&queue(LIM.va_end - 0x1000, 0x1000, 8, 1), &LIM),
            Err(Errno::Fault)
        );
        for f in [
            Queue {
                flags: 1,
                ..queue(0x10000, 0x20000, 4, 4)
            },
            Queue {
                context: 1,
                ..queue(0x10000, 0x20000, 4, 4)
            },
            Queue {
                channels: 1,
                ..queue(0x10000, 0x20000, 4, 4)
            },
            Queue {
                reserved: 1,
                ..queue(0x10000, 0x20000, 4, 4)
            },
            Queue {
                doorbell_offset: 1,
                ..queue(0x10000, 0x20000, 4, 4)
            },
        ] {
            assert_eq!(check_queue(&f, &LIM), Err(Errno::Inval));
        }
        let w = QueueWait::default();
        assert_eq!(check_queue_wait(&w), Ok(()));
        assert_eq!(
            check_queue_wait(&QueueWait { flags: 1, ..w }),
            Err(Errno::Inval)
        );
        assert_eq!(
            check_queue_wait(&QueueWait { error: 2, ..w }),
            Err(Errno::Inval)
        );
        assert_eq!(
            check_queue_wait(&QueueWait { reserved: 1, ..w }),
            Err(Errno::Inval)
        );
        assert_eq!(
            check_queue_wait(&QueueWait { error_addr: 1, ..w }),
            Err(Errno::Inval)
        );
    }

    /// MBOX_WAIT takes a timeout of any sign, and nothing in its flags or out field.
    #[test]
    fn mbox_wait_errors() {
        for t in [i64::MIN, -1, 0, 1, i64::MAX] {
            let w = MboxWait {
                timeout_ns: t,
                ..Default::default()
            };
            assert_eq!(check_mbox_wait(&w), Ok(()), "{t}");
            assert_eq!(
                check_mbox_wait(&MboxWait { flags: 1, ..w }),
                Err(Errno::Inval)
            );
            assert_eq!(
                check_mbox_wait(&MboxWait { pending: 1, ..w }),
                Err(Errno::Inval)
            );
        }
    }

    const LIM: Limits = Limits {
        va_end: 1 << 48,
        max_transfer: 1 << 30,
        modes: 1 << MODE_PIN,
        default_window: 16,
    };

    fn reg(addr: u64, length: u64) -> Reg {
        Reg {
            addr,
            length,
            access: ACCESS_READ,
            ..Default::default()
        }
    }

    #[test]
    fn budget_checks() {
        let b = |pages| Budget {
            pages,
            ..Default::default()
        };
        assert_eq!(check_budget(&b(0), 100), Ok(None));
        assert_eq!(check_budget(&b(100), 100), Ok(Some(100)));
        assert_eq!(check_budget(&b(101), 100), Err(Errno::TooBig));
        let mut x = b(5);
        x.evictions = 1;
        assert_eq!(check_budget(&x, 100), Err(Errno::Inval));
        let mut x = b(5);
        x.reserved[1] = 1;
        assert_eq!(check_budget(&x, 100), Err(Errno::Inval));
    }

    #[test]
    fn reg_errors() {
        assert_eq!(check_reg(&reg(0x1000, 0), &LIM), Err(Errno::Inval));
        assert_eq!(check_reg(&reg(u64::MAX, 2), &LIM), Err(Errno::Overflow));
        assert_eq!(check_reg(&reg((1 << 48) - 1, 2), &LIM), Err(Errno::Fault));
        assert!(check_reg(&reg((1 << 48) - 1, 1), &LIM).is_ok());
        let mut r = reg(0x1000, 1);
        r.access = 0;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval));
        r.access = 4;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval));
        r = reg(0x1000, 1);
        r.flags = 4;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval));
        // ABI 8: a key bound to a node needs a key (a remote right) and a node id; without
        // the flag, the field is zero.
        r = reg(0x1000, 1);
        r.initiator = 3;
        assert_eq!(
            check_reg(&r, &LIM),
            Err(Errno::Inval),
            "initiator without the flag"
        );
        r.flags = REG_INITIATOR;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval), "no remote right");
        r.access = ACCESS_WRITE | ACCESS_REMOTE_WRITE;
        assert_eq!(check_reg(&r, &LIM).map(|v| v.initiator), Ok(Some(3)));
        r.initiator = crate::regs::net::MAX_NODES as u32;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval), "no such node");
        r.flags = 0;
        r.initiator = 0;
        assert_eq!(check_reg(&r, &LIM).map(|v| v.initiator), Ok(None));
        r = reg(0x1000, 1);
        r.rkey = 1;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval));
        // Remote rights need the local ones.
        for (access, ok) in [
            (ACCESS_WRITE | ACCESS_REMOTE_WRITE, true),
            (ACCESS_READ | ACCESS_REMOTE_READ, true),
            (ACCESS_READ | ACCESS_WRITE | ACCESS_REMOTE, true),
            (ACCESS_READ | ACCESS_REMOTE_WRITE, false),
            (ACCESS_WRITE | ACCESS_REMOTE_READ, false),
            (ACCESS_REMOTE, false),
            (1 << 4, false),
        ] {
            r = reg(0x1000, 1);
            r.access = access;
            assert_eq!(check_reg(&r, &LIM).is_ok(), ok, "access {access:#x}");
        }
        r = reg(0x1000, 1);
        assert_eq!(check_reg(&r, &LIM).unwrap().window, 16);
        assert!(
            check_reg(&r, &LIM).unwrap().map_ahead,
            "the default window maps ahead"
        );
        r.touch_ahead = 4;
        assert_eq!(
            check_reg(&r, &LIM),
            Err(Errno::Inval),
            "window without the flag"
        );
        r.flags = REG_WINDOW;
        assert_eq!(check_reg(&r, &LIM).unwrap().window, 4);
        assert!(
            !check_reg(&r, &LIM).unwrap().map_ahead,
            "a chosen window is all"
        );
        r.touch_ahead = 0;
        assert_eq!(check_reg(&r, &LIM).unwrap().window, 0);
        r.touch_ahead = MAX_WINDOW + 1;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval));
        r.touch_ahead = WINDOW_ADAPTIVE;
        assert_eq!(check_reg(&r, &LIM).unwrap().window, WINDOW_ADAPTIVE);
        let adv = |addr, length, flags| Advise {
            addr,
            length,
            flags,
            reserved: 0,
        };
        assert_eq!(check_advise(&adv(0x1000, 0, 0), &LIM), Err(Errno::Inval));
        assert_eq!(check_advise(&adv(0x1000, 1, 2), &LIM), Err(Errno::Inval));
        assert_eq!(
            check_advise(&adv(u64::MAX, 2, 0), &LIM),
            Err(Errno::Overflow)
        );
        assert!(
            check_advise(&adv(0x1000, 10, ADVISE_WRITE), &LIM)
                .unwrap()
                .1
        );
        r = reg(0x1000, 1);
        r.mode = MODE_ON_DEMAND;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::OpNotSupp));
        r.mode = 3;
        assert_eq!(check_reg(&r, &LIM), Err(Errno::Inval));
    }

    #[test]
    fn copy_errors() {
        let c = |src, dst, length| Copy {
            src,
            dst,
            length,
            ..Default::default()
        };
        assert_eq!(check_copy(&c(0x1000, 0x9000, 0), &LIM), Err(Errno::Inval));
        assert_eq!(
            check_copy(&c(0x1000, 0x9000, (1 << 30) + 1), &LIM),
            Err(Errno::TooBig)
        );
        assert_eq!(
            check_copy(&c(u64::MAX - 1, 0x9000, 4), &LIM),
            Err(Errno::Overflow)
        );
        assert_eq!(
            check_copy(&c(0x1000, 0x1800, 0x1000), &LIM),
            Err(Errno::Inval)
        );
        let ok = check_copy(&c(0x1000, 0x2000, 0x1000), &LIM).unwrap();
        assert_eq!(ok.src.len(), 0x1000);
        let mut bad = c(0x1000, 0x2000, 1);
        bad.cookie = 5;
        assert_eq!(check_copy(&bad, &LIM), Err(Errno::Inval));
    }

    #[test]
    fn errno_codes_both_ways() {
        // Linux's numbers (include/uapi/asm-generic/errno-base.h and errno.h).
        let linux = [
            (Errno::Inval, 22, "EINVAL"),
            (Errno::Overflow, 75, "EOVERFLOW"),
            (Errno::Fault, 14, "EFAULT"),
            (Errno::Acces, 13, "EACCES"),
            (Errno::NoEnt, 2, "ENOENT"),
            (Errno::NoSpc, 28, "ENOSPC"),
            (Errno::Again, 11, "EAGAIN"),
            (Errno::TooBig, 7, "E2BIG"),
            (Errno::OpNotSupp, 95, "EOPNOTSUPP"),
            (Errno::Busy, 16, "EBUSY"),
        ];
        assert_eq!(linux.len(), Errno::ALL.len());
        for (e, code, name) in linux {
            assert!(Errno::ALL.contains(&e), "{e:?} missing from ALL");
            assert_eq!(e.code(), code, "{e:?}");
            assert_eq!(Errno::from_code(code), Some(e), "{code}");
            assert_eq!(e.name(), name);
        }
        // Errnos the driver returns that are not request errors, and nonsense, map to nothing.
        for code in [0, -2, 1, 4, 5, 19, 25, 110, 125, i32::MAX, i32::MIN] {
            assert_eq!(Errno::from_code(code), None, "{code}");
        }
    }

    #[test]
    fn mode_names_and_values() {
        use core::str::FromStr;
        let table = [
            (Mode::Pin, MODE_PIN, "pin"),
            (Mode::Prefault, MODE_PREFAULT, "prefault"),
            (Mode::OnDemand, MODE_ON_DEMAND, "on-demand"),
        ];
        assert_eq!(table.map(|t| t.0), Mode::ALL);
        for (m, raw, name) in table {
            assert_eq!(m.raw(), raw);
            assert_eq!(u32::from(m), raw);
            assert_eq!(Mode::from_raw(raw), Some(m));
            assert_eq!(Mode::try_from(raw), Ok(m));
            assert_eq!(m.name(), name);
            assert_eq!(Mode::from_str(name), Ok(m));
            // Display writes the name, and honours width (for tables).
            let mut buf = [0u8; 16];
            let mut w = Buf(&mut buf, 0);
            core::fmt::write(&mut w, format_args!("{m}")).unwrap();
            let n = w.1;
            assert_eq!(&buf[..n], name.as_bytes());
            let mut w = Buf(&mut buf, 0);
            core::fmt::write(&mut w, format_args!("{m:>10}")).unwrap();
            assert_eq!(w.1, 10);
            assert_eq!(&buf[10 - name.len()..10], name.as_bytes());
            assert!(buf[..10 - name.len()].iter().all(|&b| b == b' '));
        }
        assert_eq!(Mode::from_raw(3), None);
        assert_eq!(Mode::try_from(u32::MAX), Err(Errno::Inval));
        for bad in ["", "Pin", "PIN", "ondemand", "on_demand", "pin ", "lazy"] {
            assert_eq!(Mode::from_str(bad), Err(UnknownMode), "{bad:?}");
        }
        // The request check agrees on which values are modes.
        for raw in 0..8 {
            let r = Reg {
                addr: 0x1000,
                length: 1,
                access: ACCESS_READ,
                mode: raw,
                ..Default::default()
            };
            let all = Limits {
                modes: 0b111,
                ..LIM
            };
            assert_eq!(check_reg(&r, &all).is_ok(), Mode::from_raw(raw).is_some());
        }
    }

    /// A `fmt::Write` into a byte array (the crate is `no_std`, without alloc).
    struct Buf<'a>(&'a mut [u8], usize);

    impl core::fmt::Write for Buf<'_> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let end = self.1 + s.len();
            self.0
                .get_mut(self.1..end)
                .ok_or(core::fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.1 = end;
            Ok(())
        }
    }

    #[test]
    fn latency_buckets() {
        assert_eq!(Histogram::bucket(0), 0);
        assert_eq!(Histogram::bucket(1), 0);
        assert_eq!(Histogram::bucket(2), 1);
        assert_eq!(Histogram::bucket(3), 1);
        assert_eq!(Histogram::bucket(1000), 9);
        assert_eq!(Histogram::bucket(u64::MAX), LATENCY_BUCKETS - 1);
        let mut l = Histogram::default();
        assert_eq!(l.percentile(50), None);
        for us in [1, 3, 3, 100, 5000] {
            l.record(us);
        }
        assert_eq!(l.percentile(50), Some(4));
        assert_eq!(l.percentile(99), Some(8192));
    }

    #[test]
    fn range_pages() {
        let r = Range::new(0x1fff, 2, u64::MAX).unwrap();
        assert_eq!(r.pages(12), (1, 3));
        let r = Range::new(0x1000, 0x1000, u64::MAX).unwrap();
        assert_eq!(r.pages(12), (1, 2));
        assert!(r.contains(&Range::new(0x1800, 0x800, u64::MAX).unwrap()));
        assert!(!r.contains(&Range::new(0x1800, 0x801, u64::MAX).unwrap()));
    }

    #[test]
    fn region_stats_request() {
        let ok = RegionStats {
            handle: 3,
            ..Default::default()
        };
        assert_eq!(check_region_stats(&ok), Ok(3));
        let zero = RegionStats::default();
        assert_eq!(check_region_stats(&zero), Err(Errno::NoEnt));
        let mode = RegionStats { mode: 1, ..ok };
        let faults = RegionStats { faults: 1, ..ok };
        let pages = RegionStats {
            pages_resolved: 1,
            ..ok
        };
        let res = RegionStats {
            reserved: [0, 1],
            ..ok
        };
        for bad in [mode, faults, pages, res] {
            assert_eq!(check_region_stats(&bad), Err(Errno::Inval));
        }
    }
}
