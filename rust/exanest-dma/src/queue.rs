// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The user-level queue (ABI 3): post copies and collect their completions without a system
//! call.
//!
//! ```no_run
//! use exanest_dma::{Device, Mode, QueueCompletion};
//! let dev = Device::open(0)?;
//! let s = dev.register(vec![7u8; 4096], Mode::OnDemand)?;
//! let d = dev.register_mut(vec![0u8; 4096], Mode::OnDemand)?;
//! let mut q = dev.create_queue(6, 6)?; // 64 descriptors, 64 completions
//! // SAFETY: both ranges lie in registered regions, which live until the completion is
//! // polled; nothing reads `d` before.
//! unsafe { q.post(s.addr(), d.addr(), 4096, 42)? };
//! let mut done = [QueueCompletion::default(); 8];
//! let n = loop {
//!     match q.poll(&mut done) {
//!         0 => q.wait(None)?, // arm the CQ event and sleep
//!         n => break n,
//!     }
//! };
//! assert_eq!((n, done[0].wr_id, done[0].status), (1, 42, 0));
//! # Ok::<(), exanest_dma::Error>(())
//! ```
//!
//! The library allocates the two rings (anonymous memory, whole pages) and maps the doorbell
//! page; the driver pins the rings and programs the engine's queue of the file's context. A
//! copy is a 32-byte descriptor written into the send queue (SQ), then published by a write of
//! the SQ's new tail to the doorbell page; the engine writes one 32-byte completion (CQE) per
//! copy into the completion queue (CQ), **in the order copies end**, not the order they were
//! posted: a completion names its copy by the `wr_id` it was posted with. Faults on on-demand
//! memory are resolved by the driver as for `EXANEST_DMA_IOC_COPY`, with no call from here.
//!
//! At most [`Queue::capacity`] copies (the smaller ring's entries) are outstanding, posted and
//! not yet polled; beyond, posting fails with `EAGAIN` until [`Queue::poll`] has collected some.
//! That keeps the engine from ever having a completion it has no room for.
//!
//! The ring logic (`Ring`: indices, full and empty, the CQE phase, parsing) works on plain
//! memory and a `Doorbell`, so host tests run it against a simulated engine.

use crate::{Device, Error, Result};
use core::ptr::NonNull;
use exanest_core::abi::{self, Errno};
use exanest_core::regs::{self, cq_phase, Cqe, Sqe};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// One ended copy of a [`Queue`], as the engine reported it (`struct exanest_dma_completion`
/// in `include/exanest_dma.h`, same layout).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// The `wr_id` the copy was posted with.
    pub wr_id: u64,
    /// 0 when every byte was copied; otherwise a negative errno that the driver gave a fault
    /// it could not resolve (`-EFAULT`: an address in no region registered on the device's
    /// file; `-EACCES`: a region without the access the copy needs), or an engine error
    /// `-257..=-262` (`exanest_core::regs::cqe_status`: bad length, address wrap, abort, no bus
    /// master, overlap, bad flags).
    pub status: i32,
    /// Bytes copied.
    pub bytes: u32,
    /// The address of the copy's last fault, 0 if it took none.
    pub fault_addr: u64,
}

impl Completion {
    /// `Ok(bytes)`, or the copy's error: [`Error::Copy`] with the positive errno of a
    /// negative-errno status, [`Error::Engine`] for an engine status
    /// ([`Error::from_status`]).
    pub fn result(self) -> Result<u32> {
        Error::from_status(self.status).map_or(Ok(self.bytes), Err)
    }
}

impl From<Cqe> for Completion {
    fn from(c: Cqe) -> Self {
        Completion {
            wr_id: c.wr_id,
            status: c.status,
            bytes: c.bytes,
            fault_addr: c.fault_addr,
        }
    }
}

/// Why a queue stopped (`EXANEST_DMA_QERR_*`); the engine takes nothing more from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueError {
    /// `abi::QERR_SQ_FETCH` (a descriptor could not be read) or `abi::QERR_CQ_WRITE` (a
    /// completion could not be written).
    pub code: u32,
    /// The address the error is about.
    pub addr: u64,
}

/// The registers of the doorbell page that the ring logic uses (offsets of
/// `exanest_core::regs::vf`: `SQ_TAIL`, `SQ_HEAD`, `CQ_HEAD`, `CQ_ARM`).
pub(crate) trait Doorbell {
    /// Read the 32-bit register at `off`.
    fn read(&self, off: usize) -> u32;
    /// Write the 32-bit register at `off`.
    fn write(&mut self, off: usize, v: u32);
}

/// Order the normal-memory stores before it (descriptors) before the device-memory store after
/// it (the doorbell).
#[inline(always)]
fn store_barrier() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: A barrier instruction: it reads and writes no memory and no register. It is not
    // marked `nomem`, so the compiler keeps memory accesses on their side of it too.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// Order the loads before it before the loads and stores after it: a CQE's PHASE before the
/// rest of the CQE, the CQEs read before the CQ_HEAD write that gives their slots back.
#[inline(always)]
pub(crate) fn load_barrier() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: As in `store_barrier`.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// Order everything before it (the CQ_ARM write) before everything after it (the CQ read).
#[inline(always)]
fn full_barrier() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: As in `store_barrier`.
    unsafe {
        core::arch::asm!("dmb osh", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// The producer and consumer side of one queue: the SQ and CQ memory, the free-running indices
/// and the doorbell. Knows nothing of the device file, so host tests drive it with a simulated
/// engine.
pub(crate) struct Ring<D> {
    /// The SQ: `1 << sq_log2` entries of 32 bytes.
    sq: NonNull<u64>,
    /// The CQ: `1 << cq_log2` entries of 32 bytes.
    cq: NonNull<u64>,
    sq_log2: u32,
    cq_log2: u32,
    /// Index of the next descriptor to write.
    tail: u32,
    /// The SQ_TAIL last written to the doorbell.
    rung: u32,
    /// SQ_HEAD as last read (the engine's is at least this).
    sq_head: u32,
    /// Index of the next CQE to read.
    cq_head: u32,
    /// Descriptors written and their CQEs not yet read.
    outstanding: u32,
    /// Event entries read and not yet taken.
    events: QueueEvents,
    db: D,
}

/// The event entries the kernel had the engine post in the CQ (the upcall), since they were
/// last taken ([`Queue::take_events`]). Event entries complete no copy.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueEvents {
    /// EVICTED entries: the translation budget unmapped pages of this process.
    pub evictions: u64,
    /// The pages they evicted, summed.
    pub evicted_pages: u64,
    /// The first address of the last run evicted (0 before any).
    pub last_evicted_addr: u64,
    /// Entries of kinds this library does not know.
    pub unknown: u64,
}

impl<D: Doorbell> Ring<D> {
    /// A ring pair whose four indices are all `start` (0 for a queue just created).
    ///
    /// # Safety
    ///
    /// `sq` must be valid for volatile writes and `cq` for volatile reads of `(1 << log2) * 32`
    /// bytes each, 8-byte aligned, disjoint, for the life of the `Ring`, and no Rust reference
    /// may cover them meanwhile; the CQ entries of indices `start..start + (1 << cq_log2)` must
    /// hold the phase opposite to [`cq_phase`] of their index (a zeroed CQ for `start` 0).
    pub(crate) unsafe fn new(
        sq: NonNull<u64>,
        cq: NonNull<u64>,
        sq_log2: u32,
        cq_log2: u32,
        start: u32,
        db: D,
    ) -> Self {
        Ring {
            sq,
            cq,
            sq_log2,
            cq_log2,
            tail: start,
            rung: start,
            sq_head: start,
            cq_head: start,
            outstanding: 0,
            events: QueueEvents::default(),
            db,
        }
    }

    /// Most copies outstanding at once: the smaller ring's entries.
    pub(crate) fn capacity(&self) -> u32 {
        1 << self.sq_log2.min(self.cq_log2)
    }

    /// Copies written (rung or not) whose completion has not been read.
    pub(crate) fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// Index of the next CQE to read.
    pub(crate) fn cq_head(&self) -> u32 {
        self.cq_head
    }

    /// Whether descriptors have been written that the doorbell does not cover yet.
    #[cfg(test)]
    pub(crate) fn unrung(&self) -> bool {
        self.tail != self.rung
    }

    /// Write a descriptor without ringing the doorbell. `Again` when [`Ring::capacity`] copies
    /// are outstanding, or (never under that rule, but checked) the SQ is full.
    pub(crate) fn push(&mut self, sqe: &Sqe) -> core::result::Result<(), Errno> {
        self.push_entries(&[&sqe.encode()])
    }

    /// Write the two entries of one operation (a PUT or a GET: register map 2.3) without
    /// ringing the doorbell; one completion comes for both. `Again` as for [`Ring::push`], or
    /// when the SQ has no room for both.
    pub(crate) fn push_pair(
        &mut self,
        first: &regs::QueueEntry,
        second: &regs::QueueEntry,
    ) -> core::result::Result<(), Errno> {
        self.push_entries(&[first, second])
    }

    /// Write `entries`, one operation (one completion), at the SQ's tail if they all fit.
    fn push_entries(&mut self, entries: &[&regs::QueueEntry]) -> core::result::Result<(), Errno> {
        if self.outstanding >= self.capacity() {
            return Err(Errno::Again);
        }
        let n = 1u32 << self.sq_log2;
        let k = entries.len() as u32;
        if self.tail.wrapping_sub(self.sq_head) + k > n {
            let h = self.db.read(regs::vf::SQ_HEAD);
            // A value past the tail is not the engine's (a queue reset): keep the cached one.
            if self.tail.wrapping_sub(h) <= n {
                self.sq_head = h;
            }
            if self.tail.wrapping_sub(self.sq_head) + k > n {
                return Err(Errno::Again);
            }
        }
        for e in entries {
            let slot = regs::ring_offset(self.tail, self.sq_log2) / 8;
            for (i, w) in e.chunks_exact(8).enumerate() {
                let w = u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]));
                // SAFETY: `slot + i` is a word of the entry of index `tail`, inside the SQ's
                // `1 << sq_log2` entries (room for all of them was checked above), which
                // `new`'s contract makes valid for volatile writes.
                unsafe { self.sq.as_ptr().add(slot + i).write_volatile(w) };
            }
            self.tail = self.tail.wrapping_add(1);
        }
        self.outstanding += 1;
        Ok(())
    }

    /// Publish the descriptors written since the last ring: a store barrier, then SQ_TAIL.
    pub(crate) fn ring(&mut self) {
        if self.tail != self.rung {
            store_barrier();
            self.db.write(regs::vf::SQ_TAIL, self.tail);
            self.rung = self.tail;
        }
    }

    /// The low word of the `flags`/reserved pair of the CQE of index `i`, PHASE in bit 0.
    fn cqe_flags(&self, i: u32) -> u32 {
        let off = (regs::ring_offset(i, self.cq_log2) + Cqe::FLAGS_OFF) / 4;
        // SAFETY: `off` is the flags word of an entry inside the CQ's `1 << cq_log2` entries,
        // which `new`'s contract makes valid for volatile reads (4-byte aligned: 8-aligned
        // base, 32-byte entries, offset 24).
        u32::from_le(unsafe { self.cq.as_ptr().cast::<u32>().add(off).read_volatile() })
    }

    /// Whether the CQE of index `cq_head` has been written.
    pub(crate) fn ready(&self) -> bool {
        (self.cqe_flags(self.cq_head) & Cqe::PHASE != 0) == cq_phase(self.cq_head, self.cq_log2)
    }

    /// The event entries read since the last call, which resets them.
    pub(crate) fn take_events(&mut self) -> QueueEvents {
        core::mem::take(&mut self.events)
    }

    /// Read up to `max` new completions, handing each to `f` in CQ order, then write CQ_HEAD
    /// once. Event entries on the way are counted ([`Ring::take_events`]), not handed over.
    /// Returns how many completions.
    pub(crate) fn poll_with(&mut self, max: usize, mut f: impl FnMut(Completion)) -> usize {
        let mut k = 0;
        let start = self.cq_head;
        while k < max && self.ready() {
            load_barrier();
            let slot = regs::ring_offset(self.cq_head, self.cq_log2) / 8;
            let mut b = [0u8; 32];
            for (i, w) in b.chunks_exact_mut(8).enumerate() {
                // SAFETY: A word of the entry of index `cq_head`, inside the CQ, valid for
                // volatile reads per `new`'s contract.
                let v = unsafe { self.cq.as_ptr().add(slot + i).read_volatile() };
                w.copy_from_slice(&v.to_ne_bytes());
            }
            let cqe = Cqe::decode(&b);
            self.cq_head = self.cq_head.wrapping_add(1);
            if cqe.flags & Cqe::EVENT != 0 {
                let kind = (cqe.flags & Cqe::KIND_MASK) >> Cqe::KIND_SHIFT;
                if kind == u32::from(exanest_core::abi::EVENT_EVICTED) {
                    self.events.evictions += 1;
                    self.events.evicted_pages += u64::from(cqe.bytes);
                    self.events.last_evicted_addr = cqe.wr_id;
                } else {
                    self.events.unknown += 1;
                }
                continue;
            }
            f(cqe.into());
            self.outstanding = self.outstanding.saturating_sub(1);
            k += 1;
        }
        if self.cq_head != start {
            // The entries' reads complete before the engine may reuse their slots.
            load_barrier();
            self.db.write(regs::vf::CQ_HEAD, self.cq_head);
        }
        k
    }

    /// Write a register of the doorbell page (the mailbox's MBOX_HEAD), after the loads
    /// before it.
    pub(crate) fn db_write(&mut self, off: usize, v: u32) {
        load_barrier();
        self.db.write(off, v);
    }

    /// Arm the CQ event: the engine raises it at the next CQE (at once if one is unread).
    pub(crate) fn arm(&mut self) {
        self.db.write(regs::vf::CQ_ARM, regs::VF_CQ_ARM_ONCE);
        full_barrier();
    }
}

/// The doorbell page, mapped from the device (device memory: 32-bit volatile accesses only).
pub(crate) struct Mmio(NonNull<u32>);

impl Doorbell for Mmio {
    fn read(&self, off: usize) -> u32 {
        // SAFETY: `off` is one of the `regs::vf` offsets, inside the 4 KiB doorbell page that
        // the `Queue` owning this keeps mapped; 4-byte aligned.
        u32::from_le(unsafe { self.0.as_ptr().add(off / 4).read_volatile() })
    }

    fn write(&mut self, off: usize, v: u32) {
        // SAFETY: As in `read`.
        unsafe { self.0.as_ptr().add(off / 4).write_volatile(v.to_le()) };
    }
}

/// A memory mapping of this process, unmapped on drop.
pub(crate) struct Mapping {
    pub(crate) ptr: NonNull<libc::c_void>,
    len: usize,
}

impl Mapping {
    /// `len` bytes of fresh anonymous memory (zero, page-aligned), not inherited by a child
    /// (`MADV_DONTFORK`: a child that used the queue would fault instead of writing a copy).
    pub(crate) fn anon(len: usize) -> Result<Self> {
        // SAFETY: A new private anonymous mapping: no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let m = Self::from_mmap(p, len)?;
        // SAFETY: `m` is our mapping of `len` bytes; the advice only affects fork().
        if unsafe { libc::madvise(m.ptr.as_ptr(), len, libc::MADV_DONTFORK) } != 0 {
            return Err(Error::last());
        }
        Ok(m)
    }

    /// The doorbell page of `fd` at `offset`.
    fn doorbell(fd: &OwnedFd, offset: u64) -> Result<Self> {
        let off = libc::off_t::try_from(offset).map_err(|_| Error::Abi(Errno::Inval))?;
        // SAFETY: A new shared mapping of the device file; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                DOORBELL_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        Self::from_mmap(p, DOORBELL_SIZE)
    }

    fn from_mmap(p: *mut libc::c_void, len: usize) -> Result<Self> {
        if p == libc::MAP_FAILED {
            return Err(Error::last());
        }
        NonNull::new(p)
            .map(|ptr| Mapping { ptr, len })
            .ok_or(Error::Os(libc::ENOMEM))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: Our mapping, which nothing uses any more (its `Queue` is being dropped).
        unsafe { libc::munmap(self.ptr.as_ptr(), self.len) };
    }
}

/// Bytes of the doorbell page.
const DOORBELL_SIZE: usize = 4096;

/// Bytes of a ring of `1 << log2` entries: whole pages.
fn ring_bytes(log2: u32) -> usize {
    ((abi::QUEUE_ENTRY as usize) << log2).next_multiple_of(abi::QUEUE_ALIGN as usize)
}

/// The user-level queue of a device file ([`Device::create_queue`]).
///
/// It holds its own descriptor of the device's file (a duplicate), so it keeps the file, and the
/// queue the driver keeps with it, alive after the [`Device`] is dropped. A file has one queue
/// for its whole life: once this is dropped, [`Device::create_queue`] on the same `Device`
/// fails with `EEXIST`.
///
/// **Not for a forked child.** The rings and the doorbell page are not mapped in a child
/// (`MADV_DONTFORK`; the driver does not let the doorbell be inherited): a child must not call
/// anything of a `Queue` it inherited, only drop it (which then just unmaps).
///
/// Dropping the queue first waits for every outstanding copy (so that no destination is still
/// written after it), unless the queue stopped on an error ([`Queue::error`]): then the copies
/// that were running may still write their destinations until the device file is closed. The
/// driver keeps the queue, and the ring pages pinned, until the file is closed: the library
/// unmaps its own mappings of them at once.
pub struct Queue {
    ring: Ring<Mmio>,
    error: Option<QueueError>,
    context: u32,
    channels: u32,
    pid: libc::pid_t,
    // Dropped in this order: the doorbell page, then the file (which, if it was the last
    // reference, makes the driver stop the queue and unpin the rings), then the rings.
    _doorbell: Mapping,
    pub(crate) fd: OwnedFd,
    _sq: Mapping,
    _cq: Mapping,
    /// The mailbox's ring (mailbox.rs), unmapped after the file.
    pub(crate) mbox: Option<crate::mailbox::MboxRing>,
}

// SAFETY: The queue's memory is owned by it alone (no other handle to the rings or the doorbell
// exists) and every method that touches it takes `&mut self`, so moving it to another thread
// of the same process is sound. It is not `Sync` (`&Queue` offers only plain reads anyway).
unsafe impl Send for Queue {}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("context", &self.context)
            .field("channels", &self.channels)
            .field("capacity", &self.capacity())
            .field("outstanding", &self.outstanding())
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Device {
    /// Create the file's user-level queue, with a send queue of `1 << sq_log2` descriptors and a
    /// completion queue of `1 << cq_log2` completions (each log2 in 1..=12; `Error::Invalid`
    /// otherwise). The library allocates the rings and maps the doorbell page.
    ///
    /// The driver's errors: `EEXIST` (the file already has, or had, a queue), `EBUSY` (on a 2.1
    /// engine, every context has a queue already; a 2.2 engine moves idle queues between
    /// contexts instead), `EOPNOTSUPP` (an engine older than 2.1), `EPERM` (not the
    /// process that opened the device), `ENODEV`, and `EINVAL`/`EFAULT` for rings it refuses.
    pub fn create_queue(&self, sq_log2: u32, cq_log2: u32) -> Result<Queue> {
        let range = abi::QUEUE_LOG2_MIN..=abi::QUEUE_LOG2_MAX;
        if !range.contains(&sq_log2) || !range.contains(&cq_log2) {
            return Err(Error::Invalid("ring sizes are 2^1 to 2^12 entries"));
        }
        let sq = Mapping::anon(ring_bytes(sq_log2))?;
        let cq = Mapping::anon(ring_bytes(cq_log2))?;
        let fd = self
            .fd
            .try_clone()
            .map_err(|e| Error::from_errno(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let mut req = abi::Queue {
            sq_addr: sq.ptr.as_ptr() as u64,
            cq_addr: cq.ptr.as_ptr() as u64,
            sq_log2,
            cq_log2,
            ..Default::default()
        };
        crate::ioctl(&fd, abi::IOC_QUEUE_CREATE, &mut req)?;
        let doorbell = Mapping::doorbell(&fd, req.doorbell_offset)?;
        // The driver zeroed the CQ and the engine's indices start at 0.
        // SAFETY: The rings are our private mappings of `ring_bytes(log2)` bytes (at least
        // `(1 << log2) * 32`), page-aligned, disjoint, mapped as long as the `Queue` that owns
        // them and the `Ring`; no reference to them is ever made; the CQ is zeroed (above).
        let ring = unsafe {
            Ring::new(
                sq.ptr.cast(),
                cq.ptr.cast(),
                sq_log2,
                cq_log2,
                0,
                Mmio(doorbell.ptr.cast()),
            )
        };
        Ok(Queue {
            ring,
            error: None,
            context: req.context,
            channels: req.channels,
            // SAFETY: getpid has no preconditions.
            pid: unsafe { libc::getpid() },
            _doorbell: doorbell,
            fd,
            _sq: sq,
            _cq: cq,
            mbox: None,
        })
    }
}

impl Queue {
    /// The engine context the queue posts to.
    pub fn context(&self) -> u32 {
        self.context
    }

    /// Mask of the engine channels the queue's copies run on.
    pub fn channels(&self) -> u32 {
        self.channels
    }

    /// Most copies outstanding at once: the smaller ring's entries.
    pub fn capacity(&self) -> u32 {
        self.ring.capacity()
    }

    /// Copies posted (or pushed) whose completion has not been polled yet.
    pub fn outstanding(&self) -> u32 {
        self.ring.outstanding()
    }

    /// Why the queue stopped, once [`Queue::wait`] has reported it (`EIO`).
    pub fn error(&self) -> Option<QueueError> {
        self.error
    }

    fn stopped(&self) -> Result<()> {
        match self.error {
            Some(_) => Err(Error::Os(libc::EIO)),
            None => Ok(()),
        }
    }

    /// Write the descriptor of a copy of `len` bytes from `src` to `dst`, without telling the
    /// engine: [`Queue::ring`] publishes every descriptor pushed so far at once. `wr_id` comes
    /// back in the copy's [`Completion`]. `EAGAIN` when [`Queue::capacity`] copies are
    /// outstanding; `EIO` once the queue has stopped ([`Queue::error`]).
    ///
    /// # Safety
    ///
    /// As for [`Queue::post`].
    pub unsafe fn push(&mut self, src: u64, dst: u64, len: u32, wr_id: u64) -> Result<()> {
        self.stopped()?;
        let sqe = Sqe {
            src,
            dst,
            len,
            flags: 0,
            wr_id,
        };
        self.ring.push(&sqe).map_err(Error::Abi)
    }

    /// The ring, for the remote operations (remote.rs).
    pub(crate) fn ring_mut(&mut self) -> &mut Ring<Mmio> {
        &mut self.ring
    }

    /// Whether the queue stopped (`EIO`), for the remote operations.
    pub(crate) fn check_running(&self) -> Result<()> {
        self.stopped()
    }

    /// Publish the descriptors pushed since the last ring (one doorbell write).
    pub fn ring(&mut self) {
        self.ring.ring();
    }

    /// Post a copy of `len` bytes from `src` to `dst`: push and ring. Errors as for
    /// [`Queue::push`]. The addresses must lie in regions registered on the device's file with
    /// read (source) and write (destination) access, in any mode; otherwise the copy completes
    /// with `-EFAULT` or `-EACCES`.
    ///
    /// # Safety
    ///
    /// The engine writes `[dst, dst + len)` until the copy's completion has been polled: Rust
    /// code must not access that memory, nor hold references to it, until then (and the source
    /// must not be written meanwhile, for a defined result).
    pub unsafe fn post(&mut self, src: u64, dst: u64, len: u32, wr_id: u64) -> Result<()> {
        // SAFETY: The caller gives `post`'s guarantees, which are `push`'s.
        unsafe { self.push(src, dst, len, wr_id)? };
        self.ring.ring();
        Ok(())
    }

    /// Collect up to `out.len()` completions, in the order the copies ended; returns how many
    /// (0 when none is ready). Never blocks, makes no system call.
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        let mut it = out.iter_mut();
        self.ring.poll_with(it.len(), |c| {
            if let Some(slot) = it.next() {
                *slot = c;
            }
        })
    }

    /// [`Queue::poll`], handing each completion to `f` (at most `max`).
    pub fn poll_with(&mut self, max: usize, f: impl FnMut(Completion)) -> usize {
        self.ring.poll_with(max, f)
    }
    /// The event entries (evictions by the translation budget) seen by [`Queue::poll`] since
    /// the last call, which resets them. Polling reads them; they complete no copy.
    pub fn take_events(&mut self) -> QueueEvents {
        self.ring.take_events()
    }

    /// Sleep until a completion is ready to poll (`None`: no time limit; zero: just look).
    /// Rings the doorbell first if descriptors were pushed and not rung. Errors: `ETIMEDOUT`,
    /// `EINTR`; `EIO` when the queue stopped on an error ([`Queue::error`] says which);
    /// `Error::Invalid` when no copy is outstanding (nothing would ever arrive).
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<()> {
        self.stopped()?;
        self.ring.ring();
        if self.ring.ready() {
            return Ok(());
        }
        if self.ring.outstanding() == 0 {
            return Err(Error::Invalid("no copy is outstanding"));
        }
        self.ring.arm();
        if self.ring.ready() {
            return Ok(());
        }
        let mut w = abi::QueueWait {
            cq_head: self.ring.cq_head(),
            timeout_ns: crate::timeout_ns(timeout),
            ..Default::default()
        };
        crate::ioctl(&self.fd, abi::IOC_QUEUE_WAIT, &mut w)?;
        if w.error != 0 {
            self.error = Some(QueueError {
                code: w.error,
                addr: w.error_addr,
            });
            return Err(Error::Os(libc::EIO));
        }
        Ok(())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: getpid has no preconditions.
        if unsafe { libc::getpid() } != self.pid {
            return; // a forked child: nothing of the queue is mapped here
        }
        // Leave no copy writing memory that Rust may get back: collect every completion.
        while self.ring.outstanding() > 0 {
            if self.ring.poll_with(usize::MAX, |_| {}) > 0 {
                continue;
            }
            match self.wait(None) {
                Ok(()) | Err(Error::Os(libc::EINTR)) => {}
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;

    /// Word-aligned ring memory.
    fn ring_mem(log2: u32) -> Vec<u64> {
        vec![0u64; 4usize << log2]
    }

    /// The simulated engine: its registers (the doorbell page) and its view of the rings.
    #[derive(Default)]
    struct Engine {
        sq_tail: u32,
        sq_head: u32,
        cq_head: u32,
        cq_tail: u32,
        armed: bool,
        fired: u32,
        /// Descriptors taken and not yet completed.
        running: VecDeque<Sqe>,
        sq_reads: u32,
        writes: Vec<(usize, u32)>,
    }

    #[derive(Clone)]
    struct Sim(Rc<RefCell<Engine>>);

    impl Doorbell for Sim {
        fn read(&self, off: usize) -> u32 {
            let mut e = self.0.borrow_mut();
            match off {
                regs::vf::SQ_TAIL => e.sq_tail,
                regs::vf::SQ_HEAD => {
                    e.sq_reads += 1;
                    e.sq_head
                }
                regs::vf::CQ_HEAD => e.cq_head,
                regs::vf::CQ_TAIL => e.cq_tail,
                _ => 0,
            }
        }

        fn write(&mut self, off: usize, v: u32) {
            let mut e = self.0.borrow_mut();
            e.writes.push((off, v));
            match off {
                regs::vf::SQ_TAIL => e.sq_tail = v,
                regs::vf::CQ_HEAD => e.cq_head = v,
                regs::vf::CQ_ARM => {
                    e.armed = true;
                    if e.cq_tail != e.cq_head {
                        e.armed = false;
                        e.fired += 1;
                    }
                }
                _ => panic!("write to {off:#x}"),
            }
        }
    }

    /// A ring pair over host memory, with the engine that serves it.
    struct Bench {
        _sq: Vec<u64>,
        cq: Vec<u64>,
        sq_ptr: *const u64,
        cq_ptr: *mut u64,
        sq_log2: u32,
        cq_log2: u32,
        sim: Sim,
        ring: Ring<Sim>,
    }

    impl Bench {
        fn new(sq_log2: u32, cq_log2: u32, start: u32) -> Self {
            let mut sq = ring_mem(sq_log2);
            let mut cq = ring_mem(cq_log2);
            // The CQ as the previous pass left it: each entry with the phase opposite to the
            // one expected at its next index (all 0 for start 0, as the driver zeroes it).
            let m = 1u32 << cq_log2;
            for k in 0..m {
                let i = start.wrapping_add(k);
                let slot = regs::ring_offset(i, cq_log2) / 8;
                let flags = u32::from(!cq_phase(i, cq_log2));
                cq[slot + 3] = u64::from(flags);
            }
            let sim = Sim(Rc::new(RefCell::new(Engine {
                sq_tail: start,
                sq_head: start,
                cq_head: start,
                cq_tail: start,
                ..Default::default()
            })));
            let (sq_ptr, cq_ptr) = (sq.as_mut_ptr(), cq.as_mut_ptr());
            // SAFETY: Both vectors hold `(1 << log2) * 32` bytes, 8-aligned, disjoint, live as
            // long as the `Bench` (moving a Vec does not move its heap buffer); the tests reach
            // them only through raw pointers while the ring lives.
            let ring = unsafe {
                Ring::new(
                    NonNull::new(sq_ptr).unwrap(),
                    NonNull::new(cq_ptr).unwrap(),
                    sq_log2,
                    cq_log2,
                    start,
                    sim.clone(),
                )
            };
            Bench {
                _sq: sq,
                cq,
                sq_ptr,
                cq_ptr,
                sq_log2,
                cq_log2,
                sim,
                ring,
            }
        }

        fn push(&mut self, wr_id: u64) -> core::result::Result<(), Errno> {
            self.ring.push(&Sqe {
                src: 0x1000 + wr_id,
                dst: 0x9000 + wr_id,
                len: 64 + wr_id as u32,
                flags: 0,
                wr_id,
            })
        }

        /// The engine takes what it may: descriptors up to SQ_TAIL while the CQ has room for
        /// every running one plus this.
        fn take(&mut self) {
            let mut e = self.sim.0.borrow_mut();
            let m = 1u32 << self.cq_log2;
            while e.sq_head != e.sq_tail
                && e.cq_tail.wrapping_sub(e.cq_head) + (e.running.len() as u32) < m
            {
                let slot = regs::ring_offset(e.sq_head, self.sq_log2) / 8;
                let mut b = [0u8; 32];
                for i in 0..4 {
                    // SAFETY: Inside the SQ vector, which the ring only writes through its
                    // own pointer (no reference exists).
                    let w = unsafe { self.sq_ptr.add(slot + i).read_volatile() };
                    b[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
                }
                e.running.push_back(Sqe::decode(&b));
                e.sq_head = e.sq_head.wrapping_add(1);
            }
        }

        /// Complete the running descriptor at position `k` (0: the oldest) with `status`.
        fn complete(&mut self, k: usize, status: i32) {
            let mut e = self.sim.0.borrow_mut();
            let m = 1u32 << self.cq_log2;
            assert!(
                e.cq_tail.wrapping_sub(e.cq_head) < m,
                "the engine would overwrite an unread CQE"
            );
            let d = e.running.remove(k).expect("nothing running");
            let cqe = Cqe {
                wr_id: d.wr_id,
                status,
                bytes: if status == 0 { d.len } else { 7 },
                fault_addr: if status == 0 { 0 } else { d.dst + 7 },
                flags: if cq_phase(e.cq_tail, self.cq_log2) {
                    Cqe::PHASE
                } else {
                    0
                },
            }
            .encode();
            let slot = regs::ring_offset(e.cq_tail, self.cq_log2) / 8;
            // Word by word, the flags word (PHASE) last, as the engine writes it.
            for i in 0..4 {
                let w = u64::from_ne_bytes(cqe[i * 8..i * 8 + 8].try_into().unwrap());
                // SAFETY: Inside the CQ vector; the ring only reads it through its pointer.
                unsafe { self.cq_ptr.add(slot + i).write_volatile(w) };
            }
            e.cq_tail = e.cq_tail.wrapping_add(1);
            if e.armed {
                e.armed = false;
                e.fired += 1;
            }
        }

        /// Every new completion (bounded, so that a ring that takes stale entries for new
        /// ones fails the test instead of spinning).
        fn poll(&mut self) -> Vec<Completion> {
            let mut v = Vec::new();
            self.ring.poll_with(8192, |c| v.push(c));
            v
        }

        fn engine(&self) -> std::cell::Ref<'_, Engine> {
            self.sim.0.borrow()
        }
    }

    /// A PUT takes two SQ entries (register map 2.3), both written in order across the ring's
    /// wrap, and one completion's worth of capacity; a full SQ refuses a pair even when fewer
    /// than `capacity` operations are outstanding, until the engine has taken entries.
    #[test]
    fn put_pairs_take_two_entries() {
        use exanest_core::regs::{ch_net, PutSqe};
        let mut b = Bench::new(2, 2, u32::MAX - 2);
        let entry = |i: u32| -> regs::QueueEntry {
            let slot = regs::ring_offset(i, 2) / 8;
            let mut e = [0u8; 32];
            for k in 0..4 {
                // SAFETY: Inside the SQ vector, which the ring only writes through its own
                // pointer (no reference exists).
                let w = unsafe { b.sq_ptr.add(slot + k).read_volatile() };
                e[k * 8..k * 8 + 8].copy_from_slice(&w.to_ne_bytes());
            }
            e
        };
        let first = |n: u64| Sqe {
            src: 0x1000 * n,
            dst: 0x7f00_0000 + n,
            len: 4096,
            flags: ch_net::OP_PUT,
            wr_id: n,
        };
        let second = |n: u64| PutSqe {
            rkey: 0xabcd_0000_0000_0003 + n,
            peer: 1,
            endpoint: 7,
            imm: 0,
        };
        for n in 1..=2 {
            b.ring
                .push_pair(&first(n).encode(), &second(n).encode())
                .unwrap();
        }
        assert_eq!(b.ring.outstanding(), 2);
        assert_eq!(
            b.ring.push_pair(&first(3).encode(), &second(3).encode()),
            Err(Errno::Again),
            "the SQ is full"
        );
        let start = u32::MAX - 2;
        for n in 0..2u32 {
            let i = start.wrapping_add(2 * n);
            assert_eq!(Sqe::decode(&entry(i)), first(u64::from(n) + 1));
            let j = i.wrapping_add(1);
            assert_eq!(PutSqe::decode(&entry(j)), Some(second(u64::from(n) + 1)));
        }
        b.ring.ring();
        assert_eq!(b.engine().sq_tail, start.wrapping_add(4));
        // The engine takes the first pair: room again.
        b.sim.0.borrow_mut().sq_head = start.wrapping_add(2);
        b.ring
            .push_pair(&first(3).encode(), &second(3).encode())
            .unwrap();
        assert_eq!(Sqe::decode(&entry(start.wrapping_add(4))), first(3));
    }

    /// An event entry (as EVT_POST has the engine write it) at the CQ's tail.
    fn post_event(b: &mut Bench, kind: u32, count: u32, arg: u64) {
        let mut e = b.sim.0.borrow_mut();
        let phase = if cq_phase(e.cq_tail, b.cq_log2) {
            Cqe::PHASE
        } else {
            0
        };
        let cqe = Cqe {
            wr_id: arg,
            status: 0,
            bytes: count,
            fault_addr: 0,
            flags: phase | Cqe::EVENT | kind << Cqe::KIND_SHIFT,
        }
        .encode();
        let slot = regs::ring_offset(e.cq_tail, b.cq_log2) / 8;
        for i in 0..4 {
            let w = u64::from_ne_bytes(cqe[i * 8..i * 8 + 8].try_into().unwrap());
            // SAFETY: Inside the CQ vector; the ring only reads it through its pointer.
            unsafe { b.cq_ptr.add(slot + i).write_volatile(w) };
        }
        e.cq_tail = e.cq_tail.wrapping_add(1);
    }

    /// Event entries between completions, across the ring's wrap and the indices' wrap past
    /// 2^32: counted, never handed over as completions, and `outstanding` unchanged by them;
    /// CQ_HEAD covers them.
    #[test]
    fn event_entries_are_counted_not_completed() {
        let mut b = Bench::new(2, 2, u32::MAX - 2);
        for round in 0..6u64 {
            b.push(round).unwrap();
            b.ring.ring();
            b.take();
            post_event(&mut b, 1, 10 + round as u32, 0x7000 + round);
            b.complete(0, 0);
            post_event(&mut b, 9, 1, 0);
            let got = b.poll();
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].wr_id, round);
            assert_eq!(b.ring.outstanding(), 0);
            let cq_tail = b.engine().cq_tail;
            assert_eq!(b.engine().cq_head, cq_tail, "CQ_HEAD covers the events");
        }
        let ev = b.ring.take_events();
        assert_eq!(
            ev,
            QueueEvents {
                evictions: 6,
                evicted_pages: (10..16).sum(),
                last_evicted_addr: 0x7005,
                unknown: 6,
            }
        );
        assert_eq!(b.ring.take_events(), QueueEvents::default(), "taken: reset");
        // An event alone: nothing to hand over, but it is consumed.
        post_event(&mut b, 1, 3, 0x9000);
        assert!(b.poll().is_empty());
        assert_eq!(b.ring.take_events().evicted_pages, 3);
    }

    #[test]
    fn empty_ring_polls_nothing_and_writes_nothing() {
        let mut b = Bench::new(4, 4, 0);
        assert!(!b.ring.ready());
        assert_eq!(b.poll(), vec![]);
        b.ring.ring();
        assert!(b.engine().writes.is_empty(), "no doorbell without news");
        assert_eq!((b.ring.capacity(), b.ring.outstanding()), (16, 0));
        assert_eq!(b.cq.len(), 64);
    }

    #[test]
    fn post_take_complete_poll() {
        let mut b = Bench::new(3, 3, 0);
        for id in 0..3 {
            b.push(id).unwrap();
        }
        assert!(b.ring.unrung());
        b.take();
        assert!(
            b.engine().running.is_empty(),
            "nothing visible before the doorbell"
        );
        b.ring.ring();
        assert!(!b.ring.unrung());
        assert_eq!(
            b.engine().writes,
            vec![(regs::vf::SQ_TAIL, 3)],
            "one ring for three"
        );
        b.take();
        let running: Vec<Sqe> = b.engine().running.iter().copied().collect();
        assert_eq!(
            running[1],
            Sqe {
                src: 0x1001,
                dst: 0x9001,
                len: 65,
                flags: 0,
                wr_id: 1
            }
        );
        // Out of order: the second ends first, with a fault the driver NACKed.
        b.complete(1, -libc::EFAULT);
        b.complete(0, 0);
        let c = b.poll();
        assert_eq!(
            c,
            vec![
                Completion {
                    wr_id: 1,
                    status: -libc::EFAULT,
                    bytes: 7,
                    fault_addr: 0x9008
                },
                Completion {
                    wr_id: 0,
                    status: 0,
                    bytes: 64,
                    fault_addr: 0
                }
            ]
        );
        assert_eq!(c[1].result(), Ok(64));
        assert_eq!(c[0].result(), Err(Error::Copy(libc::EFAULT)));
        assert_eq!(b.ring.outstanding(), 1);
        assert_eq!(
            *b.engine().writes.last().unwrap(),
            (regs::vf::CQ_HEAD, 2),
            "CQ_HEAD written once for the batch"
        );
        assert_eq!(b.engine().writes.len(), 2);
        assert_eq!(b.poll(), vec![]);
        b.complete(0, regs::cqe_status::OVERLAP);
        let c = b.poll();
        assert_eq!((c[0].wr_id, c[0].status), (2, -261));
        assert_eq!(
            c[0].result(),
            Err(Error::Engine(crate::EngineError::Overlap))
        );
        assert_eq!(c[0].result().unwrap_err().errno(), 261);
        assert_eq!(b.ring.outstanding(), 0);
    }

    /// The poll stops at `max` and leaves the rest for the next call.
    #[test]
    fn poll_respects_the_output_size() {
        let mut b = Bench::new(4, 4, 0);
        for id in 0..5 {
            b.push(id).unwrap();
        }
        b.ring.ring();
        b.take();
        for _ in 0..5 {
            b.complete(0, 0);
        }
        let mut got = Vec::new();
        assert_eq!(b.ring.poll_with(2, |c| got.push(c.wr_id)), 2);
        assert_eq!(b.ring.poll_with(2, |c| got.push(c.wr_id)), 2);
        assert_eq!(b.ring.poll_with(2, |c| got.push(c.wr_id)), 1);
        assert_eq!(b.ring.poll_with(2, |c| got.push(c.wr_id)), 0);
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert_eq!(b.engine().cq_head, 5);
    }

    /// Full: `capacity` outstanding copies refuse the next with EAGAIN, whichever ring is the
    /// smaller, and a poll frees room again; the engine never overwrites an unread CQE.
    #[test]
    fn full_is_eagain_until_polled() {
        for (ls, lc) in [(2, 4), (4, 2), (3, 3), (1, 1)] {
            let mut b = Bench::new(ls, lc, 0);
            let cap = 1u32 << ls.min(lc);
            assert_eq!(b.ring.capacity(), cap);
            for id in 0..cap {
                b.push(u64::from(id)).unwrap();
            }
            assert_eq!(b.push(99), Err(Errno::Again));
            b.ring.ring();
            b.take();
            // All taken and completed: still full until polled.
            while !b.engine().running.is_empty() {
                b.complete(0, 0);
            }
            assert_eq!(b.push(99), Err(Errno::Again));
            assert_eq!(b.ring.outstanding(), cap);
            let got = b.poll();
            assert_eq!(got.len() as u32, cap);
            assert_eq!(b.ring.outstanding(), 0);
            for id in 0..cap {
                b.push(100 + u64::from(id)).unwrap();
            }
            assert_eq!(b.push(99), Err(Errno::Again), "{ls} {lc}");
        }
    }

    /// SQ_HEAD is read only when the cached value says the SQ is full, and a value that is not
    /// the engine's (past the tail) is ignored.
    #[test]
    fn sq_head_read_only_when_full() {
        // SQ of 2, CQ of 8: capacity 2, so SQ fullness comes with the outstanding limit;
        // force the SQ check by bumping `outstanding` down behind the ring's back.
        let mut b = Bench::new(1, 3, 0);
        b.push(0).unwrap();
        b.push(1).unwrap();
        assert_eq!(b.engine().sq_reads, 0);
        b.ring.outstanding = 0; // as if both completed without the SQ_HEAD cache moving
        assert_eq!(b.push(2), Err(Errno::Again));
        assert_eq!(
            b.engine().sq_reads,
            1,
            "one SQ_HEAD read when the cache says full"
        );
        b.ring.ring();
        b.take();
        b.push(2).unwrap();
        assert_eq!(b.engine().sq_reads, 2);
        assert_eq!(b.ring.sq_head, 2);
        b.push(3).unwrap();
        assert_eq!(b.engine().sq_reads, 2, "cache says room: no read");
        // A reset engine reads 0: not between head and tail, ignored.
        b.sim.0.borrow_mut().sq_head = 0;
        b.ring.outstanding = 0;
        assert_eq!(b.push(4), Err(Errno::Again));
        assert_eq!(b.ring.sq_head, 2);
    }

    /// Free-running indices across 2^32: slots, phases and the doorbell values wrap with no
    /// glitch; with random out-of-order completion the ring sees every wr_id exactly once.
    #[test]
    fn wraps_past_u32_max_out_of_order() {
        for (ls, lc) in [(2, 2), (3, 2), (2, 5), (1, 1)] {
            let start = u32::MAX - 37;
            let mut b = Bench::new(ls, lc, start);
            let mut rng = 0x2545_f491_4f6c_dd1du64;
            let mut next = |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            let total = 300u64;
            let (mut posted, mut seen) = (0u64, vec![0u32; total as usize]);
            for round in 0.. {
                if !seen.contains(&0) {
                    break;
                }
                assert!(round < 100_000, "{ls} {lc}: no progress: {seen:?}");
                // Post a random number, ringing sometimes per descriptor, sometimes at the end.
                for _ in 0..next(5) {
                    if posted == total {
                        break;
                    }
                    match b.push(posted) {
                        Ok(()) => posted += 1,
                        Err(e) => {
                            assert_eq!(e, Errno::Again);
                            assert_eq!(b.ring.outstanding(), b.ring.capacity());
                            break;
                        }
                    }
                    if next(2) == 0 {
                        b.ring.ring();
                    }
                }
                b.ring.ring();
                b.take();
                for _ in 0..next(4) {
                    let n = b.engine().running.len();
                    if n > 0 {
                        b.complete(next(n as u64) as usize, 0);
                    }
                }
                if next(3) == 0 {
                    for c in b.poll() {
                        assert_eq!(c.bytes, 64 + c.wr_id as u32);
                        seen[c.wr_id as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{seen:?}");
            let end = start.wrapping_add(total as u32);
            let e = b.engine();
            assert_eq!(
                (e.sq_tail, e.sq_head, e.cq_tail, e.cq_head),
                (end, end, end, end)
            );
            assert!(end < start, "the indices went past 2^32");
            assert_eq!(b.ring.outstanding(), 0);
        }
    }

    /// The phase alone tells a new entry from last pass's: a stale entry at the head, written
    /// with the previous pass's phase, is not taken.
    #[test]
    fn stale_phase_is_not_new() {
        let mut b = Bench::new(1, 1, 0);
        for round in 0..6u64 {
            b.push(round).unwrap();
            b.ring.ring();
            b.take();
            assert!(
                !b.ring.ready(),
                "round {round}: last pass's entry looks new"
            );
            b.complete(0, 0);
            assert!(b.ring.ready());
            assert_eq!(b.poll()[0].wr_id, round);
        }
    }

    /// Arming: the event fires at once when a CQE is unread, else at the next CQE.
    #[test]
    fn arm_then_fire() {
        let mut b = Bench::new(2, 2, 0);
        b.push(1).unwrap();
        b.ring.ring();
        b.take();
        b.ring.arm();
        assert_eq!(b.engine().fired, 0);
        b.complete(0, 0);
        assert_eq!(b.engine().fired, 1);
        b.ring.arm();
        assert_eq!(
            b.engine().fired,
            2,
            "armed with an unread CQE: fires at once"
        );
        assert_eq!(b.poll().len(), 1);
    }

    #[test]
    fn completion_layout_is_the_c_struct() {
        assert_eq!(core::mem::size_of::<Completion>(), 24);
        assert_eq!(core::mem::align_of::<Completion>(), 8);
        assert_eq!(core::mem::offset_of!(Completion, wr_id), 0);
        assert_eq!(core::mem::offset_of!(Completion, status), 8);
        assert_eq!(core::mem::offset_of!(Completion, bytes), 12);
        assert_eq!(core::mem::offset_of!(Completion, fault_addr), 16);
    }

    #[test]
    fn ring_sizes_are_whole_pages() {
        assert_eq!(ring_bytes(1), 4096);
        assert_eq!(ring_bytes(7), 4096);
        assert_eq!(ring_bytes(8), 8192);
        assert_eq!(ring_bytes(12), 128 << 10);
    }

    /// Creation on a file that is not the device: the ring sizes are checked first, then the
    /// kernel's answer comes back unchanged (and the rings are unmapped again).
    #[test]
    fn create_on_a_non_device() {
        let dev = Device::open_path("/dev/null").unwrap();
        for (ls, lc) in [(0, 4), (4, 0), (13, 4), (4, 13)] {
            assert!(matches!(dev.create_queue(ls, lc), Err(Error::Invalid(_))));
        }
        assert_eq!(
            dev.create_queue(12, 1).map(|_| ()),
            Err(Error::Os(libc::ENOTTY))
        );
    }
}
