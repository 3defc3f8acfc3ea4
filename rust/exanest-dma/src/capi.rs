// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The C ABI, declared in `include/exanest_dma.h`.
//!
//! Every `int` function returns 0 or a negative errno: the driver's, unchanged (see
//! [`crate::Error`]), `-EINVAL` for a NULL pointer or bad argument the library refuses
//! itself, or `-EBADF` for a handle that is closed (or never was one: see [`handles`]). Out
//! parameters are always written when non-NULL: on failure with 0 (NULL for the handle), so a
//! program never reads a stale value.

mod handles;

use crate::{Access, Completion, Device, Mode, Queue, QueueCompletion, Remote};
use core::ffi::{c_char, c_int, c_uint, c_void};
use exanest_core::abi;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The C handle of an open device (`struct exanest_dma`): opaque, never dereferenced.
pub enum ExanestDma {}

/// The open device handles.
static DEVICES: handles::Handles<Device> = handles::Handles::new();

/// Write `v` through `p` when it is not NULL.
///
/// # Safety
///
/// `p` is NULL or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: Non-NULL, and valid for a write per this function's contract.
        unsafe { p.write(v) };
    }
}

/// 0, or the negative errno of `e`.
fn ret<T>(r: crate::Result<T>) -> c_int {
    match r {
        Ok(_) => 0,
        Err(e) => -e.errno(),
    }
}

/// Store a new handle in `*out` (NULL on failure).
///
/// # Safety
///
/// `out` is valid for a pointer write (checked for NULL by the caller).
unsafe fn opened(r: crate::Result<Device>, out: *mut *mut ExanestDma) -> c_int {
    let (p, code) = match r.map_err(|e| -e.errno()).and_then(|d| DEVICES.open(d)) {
        Ok(h) => (h as *mut ExanestDma, 0),
        Err(e) => (core::ptr::null_mut(), e),
    };
    // SAFETY: `out` is valid per the contract.
    unsafe { put(out, p) };
    code
}

/// Open `/dev/exanest-dma<index>`; `*out` gets the handle (NULL on failure).
///
/// # Safety
///
/// `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_open(index: u32, out: *mut *mut ExanestDma) -> c_int {
    if out.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: `out` is non-NULL and valid per the contract.
    unsafe { opened(Device::open(index), out) }
}

/// Open a device node by path; `*out` gets the handle (NULL on failure).
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string; `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_open_path(
    path: *const c_char,
    out: *mut *mut ExanestDma,
) -> c_int {
    if out.is_null() {
        return -libc::EINVAL;
    }
    if path.is_null() {
        // SAFETY: `out` is non-NULL and valid per the contract.
        unsafe { put(out, core::ptr::null_mut()) };
        return -libc::EINVAL;
    }
    // SAFETY: `path` is a non-NULL NUL-terminated string per the contract.
    let path = unsafe { core::ffi::CStr::from_ptr(path) };
    let r = match path.to_str() {
        Ok(p) => Device::open_path(p),
        Err(_) => Err(crate::Error::Invalid("the path is not UTF-8")),
    };
    // SAFETY: `out` is non-NULL and valid per the contract.
    unsafe { opened(r, out) }
}

/// Close a handle (NULL, and a handle already closed, are ignored). Regions and pending
/// copies end with it, unless a queue keeps the device's file open.
///
/// # Safety
///
/// No other thread uses `dev` meanwhile.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_close(dev: *mut ExanestDma) {
    // A closed or unknown handle has nothing to close.
    if let Ok(d) = DEVICES.close(dev as usize) {
        drop(d);
    }
}

macro_rules! dev {
    ($p:expr) => {
        match DEVICES.get($p as usize) {
            // SAFETY: An open handle's device stays where it is until `exanest_dma_close`,
            // which the caller does not run on another thread meanwhile.
            Ok(d) => unsafe { d.as_ref() },
            Err(e) => return e,
        }
    };
}

/// The device's file descriptor, for `poll()` (readable while a finished copy waits to be
/// collected); `-EINVAL` for NULL. It stays owned by the handle.
///
/// # Safety
///
/// `dev` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_fd(dev: *const ExanestDma) -> c_int {
    dev!(dev).as_raw_fd()
}

/// A text for a status or a negative errno of this library: an engine error (`-257` to
/// `-511`: what the engine reported, with the status's name in the register map) or, for any
/// other value, `strerror` of the errno (either sign). Never NULL; the text is static, or
/// `strerror`'s.
#[no_mangle]
pub extern "C" fn exanest_dma_strerror(err: c_int) -> *const c_char {
    match exanest_core::regs::error_of_cqe_status(-err.saturating_abs()) {
        Some(e) => crate::engine_text(e).as_ptr(),
        // SAFETY: `strerror` takes any int and returns a NUL-terminated string.
        None => unsafe { libc::strerror(err.saturating_abs()) },
    }
}

/// Engine and driver facts.
///
/// # Safety
///
/// `dev` is a live handle; `info` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_info(dev: *const ExanestDma, info: *mut abi::Info) -> c_int {
    if info.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: Non-NULL, and valid for a write per the contract.
    unsafe { info.write(abi::Info::default()) };
    let r = dev!(dev).info();
    // SAFETY: `info` was checked non-NULL and is valid for a write per the contract.
    unsafe { info.write(r.unwrap_or_default()) };
    ret(r)
}

/// Register `[addr, addr + len)` with `EXANEST_DMA_ACCESS_*` bits and an `EXANEST_DMA_MODE_*`.
///
/// # Safety
///
/// `dev` is a live handle; the memory stays valid until deregistered; `handle` is writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_reg(
    dev: *const ExanestDma,
    addr: *const c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    handle: *mut u32,
) -> c_int {
    // SAFETY: `reg` has this function's contract.
    unsafe { reg(dev, addr, len, access_bits, mode_raw, None, handle) }
}

/// [`exanest_dma_reg`] with a touch-ahead window in pages (on-demand mode).
///
/// # Safety
///
/// As for `exanest_dma_reg`.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_reg_window(
    dev: *const ExanestDma,
    addr: *const c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    window: u32,
    handle: *mut u32,
) -> c_int {
    // SAFETY: `reg` has this function's contract.
    unsafe { reg(dev, addr, len, access_bits, mode_raw, Some(window), handle) }
}

/// # Safety
///
/// As for `exanest_dma_reg`.
unsafe fn reg(
    dev: *const ExanestDma,
    addr: *const c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    window: Option<u32>,
    handle: *mut u32,
) -> c_int {
    if handle.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: `handle` is non-NULL and writable per the contract.
    unsafe { handle.write(0) };
    let d = dev!(dev);
    let (Some(a), Some(m)) = (Access::from_bits(access_bits), Mode::from_raw(mode_raw)) else {
        return -libc::EINVAL;
    };
    // SAFETY: The caller keeps the memory valid and leaves it to the engine until
    // deregistration, which is `register_raw_window`'s contract.
    let r = unsafe { d.register_raw_window(addr as u64, len as u64, a, m, window) };
    // SAFETY: `handle` was checked non-NULL and is writable per the contract.
    unsafe { handle.write(*r.as_ref().unwrap_or(&0)) };
    ret(r)
}

/// Map `[addr, addr + len)` of a prefault or on-demand region now (`flags`:
/// `EXANEST_DMA_ADVISE_*`).
///
/// # Safety
///
/// `dev` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_advise(
    dev: *const ExanestDma,
    addr: *const c_void,
    len: usize,
    flags: u32,
) -> c_int {
    let d = dev!(dev);
    if flags & !abi::ADVISE_WRITE != 0 {
        return -libc::EINVAL;
    }
    ret(d.advise(addr as u64, len as u64, flags & abi::ADVISE_WRITE != 0))
}

/// Drop a region.
///
/// # Safety
///
/// `dev` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_dereg(dev: *const ExanestDma, handle: u32) -> c_int {
    ret(dev!(dev).deregister(handle))
}

/// Start copying `len` bytes; `*cookie` identifies the copy for `exanest_dma_wait` (0 on
/// failure).
///
/// # Safety
///
/// `dev` is a live handle; both ranges lie in registered regions; `cookie` is writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_copy(
    dev: *const ExanestDma,
    src: *const c_void,
    dst: *mut c_void,
    len: usize,
    cookie: *mut u64,
) -> c_int {
    if cookie.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: `cookie` is non-NULL and writable per the contract.
    unsafe { cookie.write(0) };
    let d = dev!(dev);
    // SAFETY: The caller does not touch `dst` until the copy is waited for, which is
    // `copy_raw`'s contract.
    let r = unsafe { d.copy_raw(src as u64, dst as u64, len as u64) };
    // SAFETY: `cookie` was checked non-NULL and is writable per the contract.
    unsafe { cookie.write(*r.as_ref().unwrap_or(&0)) };
    ret(r)
}

/// Wait for a copy (`timeout_ns` < 0: forever; 0: just look).
///
/// Returns 0 when the wait collected the copy: then `*status` is 0 or the copy's negative errno
/// and `*bytes` (may be NULL) what it copied. Otherwise the wait's negative errno (`-ENOENT`
/// unknown cookie; `-ETIMEDOUT` and `-EINTR`: the copy is still pending), with `*status` and
/// `*bytes` 0. `status` must not be NULL (`-EINVAL`).
///
/// # Safety
///
/// `dev` is a live handle; `status` is writable; `bytes` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_wait(
    dev: *const ExanestDma,
    cookie: u64,
    timeout_ns: i64,
    status: *mut i32,
    bytes: *mut u64,
) -> c_int {
    // SAFETY: `bytes` is NULL or writable per the contract.
    unsafe { put(bytes, 0) };
    if status.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: `status` is non-NULL and writable per the contract.
    unsafe { status.write(0) };
    let d = dev!(dev);
    let timeout = u64::try_from(timeout_ns).ok().map(Duration::from_nanos);
    let r = d.wait_completion(cookie, timeout);
    let c = r.unwrap_or(Completion {
        status: 0,
        bytes: 0,
    });
    // SAFETY: `status` was checked non-NULL and is writable; `bytes` is NULL or writable.
    unsafe {
        status.write(c.status);
        put(bytes, c.bytes);
    }
    ret(r)
}

/// Statistics.
///
/// # Safety
///
/// `dev` is a live handle; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_counters(
    dev: *const ExanestDma,
    out: *mut abi::Counters,
) -> c_int {
    if out.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: Non-NULL, and valid for a write per the contract.
    unsafe { out.write(abi::Counters::default()) };
    let r = dev!(dev).counters();
    // SAFETY: `out` was checked non-NULL and is valid for a write per the contract.
    unsafe { out.write(r.unwrap_or_default()) };
    ret(r)
}

/// The counters of the engine's network port (`*out` zero on failure; -EOPNOTSUPP without a
/// port).
///
/// # Safety
///
/// `dev` is a live handle; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_net_counters(
    dev: *const ExanestDma,
    out: *mut abi::NetCounters,
) -> c_int {
    if out.is_null() {
        return -libc::EINVAL;
    }
    let r = dev!(dev).net_counters();
    // SAFETY: `out` was checked non-NULL and is valid for a write per the contract.
    unsafe { out.write(r.unwrap_or_default()) };
    ret(r)
}

/// The translation budget: set it to `pages` (0: keep it) and report it in `*out` (the budget,
/// pages evicted so far, evictions, pages the on-demand mirror maps now). -E2BIG above the
/// module's `max_budget_pages`.
///
/// # Safety
///
/// `dev` is a live handle; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_budget(
    dev: *const ExanestDma,
    pages: u64,
    out: *mut abi::Budget,
) -> c_int {
    if out.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: Non-NULL, and valid for a write per the contract.
    unsafe { out.write(abi::Budget::default()) };
    let r = dev!(dev).budget((pages != 0).then_some(pages));
    // SAFETY: `out` was checked non-NULL and is valid for a write per the contract.
    unsafe { out.write(r.unwrap_or_default()) };
    ret(r)
}

/// The C handle of a user-level queue (`struct exanest_dma_queue_h`): opaque, never
/// dereferenced.
pub enum ExanestDmaQueue {}

/// The open queue handles.
static QUEUES: handles::Handles<Queue> = handles::Handles::new();

/// The queue of handle `p`, or the errno of a NULL (`-EINVAL`) or closed (`-EBADF`) one.
///
/// # Safety
///
/// No other thread uses or destroys the queue while the reference lives.
unsafe fn queue_of<'a>(p: *const ExanestDmaQueue) -> Result<&'a mut Queue, c_int> {
    // SAFETY: An open handle's queue stays where it is until `exanest_dma_queue_destroy`; the
    // caller keeps other threads off it.
    QUEUES.get(p as usize).map(|mut q| unsafe { q.as_mut() })
}

macro_rules! queue {
    ($p:expr) => {
        // SAFETY: The caller does not use the handle from two threads at once.
        match unsafe { queue_of($p) } {
            Ok(q) => q,
            Err(e) => return e,
        }
    };
}

/// Create the file's user-level queue: `1 << sq_log2` descriptors, `1 << cq_log2` completions
/// (each log2 1..12); `*out` gets the handle (NULL on failure). The queue keeps the device's
/// file open: it may outlive `dev`.
///
/// # Safety
///
/// `dev` is NULL or a live handle; `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_create(
    dev: *const ExanestDma,
    sq_log2: c_uint,
    cq_log2: c_uint,
    out: *mut *mut ExanestDmaQueue,
) -> c_int {
    if out.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: `out` is non-NULL and valid for a pointer write per the contract.
    unsafe { out.write(core::ptr::null_mut()) };
    let d = dev!(dev);
    match d
        .create_queue(sq_log2, cq_log2)
        .map_err(|e| -e.errno())
        .and_then(|q| QUEUES.open(q))
    {
        Ok(h) => {
            // SAFETY: As above.
            unsafe { out.write(h as *mut ExanestDmaQueue) };
            0
        }
        Err(e) => e,
    }
}

/// Destroy a queue handle (NULL, and a handle already destroyed, are ignored): waits for its
/// outstanding copies, unless the queue stopped on an error, then unmaps the rings and the
/// doorbell. Every later call with the handle gives `-EBADF`.
///
/// # Safety
///
/// No other thread uses `q` meanwhile.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_destroy(q: *mut ExanestDmaQueue) {
    // A closed or unknown handle has nothing to destroy.
    if let Ok(q) = QUEUES.close(q as usize) {
        drop(q);
    }
}

/// Write a copy's descriptor without ringing the doorbell (`exanest_dma_queue_ring` does).
/// `-EAGAIN` when as many copies as the queue's capacity are outstanding; `-EIO` once the
/// queue has stopped.
///
/// # Safety
///
/// `q` is NULL or a live handle; the caller does not touch `[dst, dst + len)` until the copy's
/// completion has been polled.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_push(
    q: *mut ExanestDmaQueue,
    src: u64,
    dst: u64,
    len: u32,
    wr_id: u64,
) -> c_int {
    let q = queue!(q);
    // SAFETY: The caller gives `Queue::push`'s guarantees.
    ret(unsafe { q.push(src, dst, len, wr_id) })
}

/// Publish the descriptors pushed since the last ring.
///
/// # Safety
///
/// `q` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_ring(q: *mut ExanestDmaQueue) -> c_int {
    queue!(q).ring();
    0
}

/// Post a copy: push and ring. Errors as for `exanest_dma_queue_push`.
///
/// # Safety
///
/// As for `exanest_dma_queue_push`.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_post(
    q: *mut ExanestDmaQueue,
    src: u64,
    dst: u64,
    len: u32,
    wr_id: u64,
) -> c_int {
    let q = queue!(q);
    // SAFETY: The caller gives `Queue::post`'s guarantees.
    ret(unsafe { q.post(src, dst, len, wr_id) })
}

/// Collect up to `n` completions into `out[0..count)`; returns the count (>= 0), or `-EINVAL`
/// for a NULL handle or a NULL `out` with `n` > 0 (then the `n` entries of a non-NULL `out`
/// are zeroed). Entries past the count are left alone.
///
/// # Safety
///
/// `q` is NULL or a live handle; `out` is NULL or valid for writes of `n` entries.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_poll(
    q: *mut ExanestDmaQueue,
    out: *mut QueueCompletion,
    n: c_uint,
) -> c_int {
    let n = (n as usize).min(c_int::MAX as usize);
    if q.is_null() || (out.is_null() && n > 0) {
        if !out.is_null() {
            for i in 0..n {
                // SAFETY: `out` is valid for writes of `n` entries per the contract.
                unsafe { out.add(i).write(QueueCompletion::default()) };
            }
        }
        return -libc::EINVAL;
    }
    let mut i = 0;
    queue!(q).poll_with(n, |c| {
        // SAFETY: `poll_with` hands out at most `n` completions, and `out` is valid for
        // writes of `n` entries per the contract.
        unsafe { out.add(i).write(c) };
        i += 1;
    }) as c_int
}

/// Sleep until a completion is ready (`timeout_ns` < 0: no limit; 0: just look). Rings the
/// doorbell first if descriptors were pushed and not rung. `-ETIMEDOUT`, `-EINTR`; `-EIO` when
/// the queue stopped (`exanest_dma_queue_error` says why); `-EINVAL` when no copy is
/// outstanding.
///
/// # Safety
///
/// `q` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_wait(q: *mut ExanestDmaQueue, timeout_ns: i64) -> c_int {
    let q = queue!(q);
    ret(q.wait(u64::try_from(timeout_ns).ok().map(Duration::from_nanos)))
}

/// Copies posted or pushed whose completion has not been polled (>= 0).
///
/// # Safety
///
/// `q` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_outstanding(q: *const ExanestDmaQueue) -> c_int {
    // SAFETY: As in `queue!`.
    match unsafe { queue_of(q) } {
        Ok(q) => q.outstanding() as c_int,
        Err(e) => e,
    }
}

/// The queue's facts: `*capacity`, the most copies outstanding at once; `*context`, the
/// engine context; `*channels`, the mask of its channels. Each pointer may be NULL; all are
/// written with 0 on failure.
///
/// # Safety
///
/// `q` is NULL or a live handle; each pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_info(
    q: *const ExanestDmaQueue,
    capacity: *mut u32,
    context: *mut u32,
    channels: *mut u32,
) -> c_int {
    // SAFETY: As in `queue!`.
    let q = unsafe { queue_of(q) };
    let v = q
        .as_ref()
        .map_or((0, 0, 0), |q| (q.capacity(), q.context(), q.channels()));
    // SAFETY: Each pointer is NULL or writable per the contract.
    unsafe {
        put(capacity, v.0);
        put(context, v.1);
        put(channels, v.2);
    }
    ret(q.map_err(|e| crate::Error::from_errno(-e)))
}

/// Why the queue stopped: `*code` gets 0 while it runs, else `EXANEST_DMA_QERR_*`, and
/// `*addr` the address the error is about (each may be NULL).
///
/// # Safety
///
/// `q` is NULL or a live handle; each pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_error(
    q: *const ExanestDmaQueue,
    code: *mut u32,
    addr: *mut u64,
) -> c_int {
    // SAFETY: As in `queue!`.
    let q = unsafe { queue_of(q) };
    let e = q.as_ref().ok().and_then(|q| q.error());
    // SAFETY: Each pointer is NULL or writable per the contract.
    unsafe {
        put(code, e.map_or(0, |e| e.code));
        put(addr, e.map_or(0, |e| e.addr));
    }
    ret(q.map_err(|e| crate::Error::from_errno(-e)))
}

/// The event entries read since the last call (which resets them) into `*out`, zeroed on
/// failure (`-EINVAL` for a NULL argument).
///
/// # Safety
///
/// `q` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_events(
    q: *mut ExanestDmaQueue,
    out: *mut crate::queue::QueueEvents,
) -> c_int {
    // SAFETY: `out` is NULL or writable (the contract).
    let out = unsafe { out.as_mut() };
    // SAFETY: As in `queue!`.
    let q = unsafe { queue_of(q) };
    match (q, out) {
        (Ok(q), Some(o)) => {
            *o = q.take_events();
            0
        }
        (Err(e), Some(o)) => {
            *o = crate::queue::QueueEvents::default();
            e
        }
        _ => -libc::EINVAL,
    }
}

/// Register `[addr, addr + len)` for other nodes with `access_bits` (`EXANEST_DMA_ACCESS_*`,
/// at least one remote right; each remote right brings the local one with it), in
/// `mode_raw`; `*handle` names the region and `*target` is what a writer puts to (its rkey,
/// node and endpoint included). Both are zeroed on failure.
///
/// # Safety
///
/// `dev` is NULL or a live handle; the memory stays valid until deregistered; `handle` and
/// `target` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_reg_remote(
    dev: *const ExanestDma,
    addr: *mut c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    handle: *mut u32,
    target: *mut Remote,
) -> c_int {
    // SAFETY: The caller's contract is this one's.
    unsafe {
        reg_remote(
            dev,
            (addr, len),
            access_bits,
            mode_raw,
            None,
            handle,
            target,
        )
    }
}

/// [`exanest_dma_reg_remote`], the key bound to node `initiator` (ABI 8): it works only in
/// that node's ops.
///
/// # Safety
///
/// As for [`exanest_dma_reg_remote`].
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_reg_remote_for(
    dev: *const ExanestDma,
    addr: *mut c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    initiator: u32,
    handle: *mut u32,
    target: *mut Remote,
) -> c_int {
    // SAFETY: The caller's contract is this one's.
    unsafe {
        reg_remote(
            dev,
            (addr, len),
            access_bits,
            mode_raw,
            Some(initiator),
            handle,
            target,
        )
    }
}

/// Both registrations of remote memory.
///
/// # Safety
///
/// As for [`exanest_dma_reg_remote`].
unsafe fn reg_remote(
    dev: *const ExanestDma,
    (addr, len): (*mut c_void, usize),
    access_bits: u32,
    mode_raw: u32,
    initiator: Option<u32>,
    handle: *mut u32,
    target: *mut Remote,
) -> c_int {
    // SAFETY: `handle` and `target` are NULL or writable per the contract.
    unsafe {
        put(handle, 0);
        put(target, Remote::default());
    }
    let d = dev!(dev);
    let Some(m) = Mode::from_raw(mode_raw) else {
        return -libc::EINVAL;
    };
    let Some(access) = crate::remote::remote_access(access_bits) else {
        return -libc::EINVAL;
    };
    if addr.is_null() {
        return -libc::EINVAL;
    }
    let info = match d.info() {
        Ok(i) => i,
        Err(e) => return -e.errno(),
    };
    // SAFETY: The caller keeps the memory valid until deregistration and accepts that other
    // nodes write it meanwhile: `register_raw_access`'s contract.
    let r = unsafe { d.register_raw_access_for(addr as u64, len as u64, access, m, initiator) };
    if let Ok((h, rkey)) = r {
        let t = Remote {
            addr: addr as u64,
            len: len as u64,
            rkey,
            node: info.node,
            endpoint: info.endpoint,
        };
        // SAFETY: As above.
        unsafe {
            put(handle, h);
            put(target, t);
        }
    }
    ret(r)
}

/// Put `len` bytes from `src` to byte `offset` of `*to` (one doorbell write); its completion
/// comes on the queue with `wr_id`. `-EINVAL` for a range outside `*to`; `-EAGAIN` and `-EIO`
/// as for `exanest_dma_queue_post`.
///
/// # Safety
///
/// `q` is NULL or a live handle; `to` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_put(
    q: *mut ExanestDmaQueue,
    src: u64,
    len: u32,
    to: *const Remote,
    offset: u64,
    wr_id: u64,
) -> c_int {
    let q = queue!(q);
    // SAFETY: NULL or readable per the contract.
    let Some(to) = (unsafe { to.as_ref() }) else {
        return -libc::EINVAL;
    };
    ret(q.put(src, len, to, offset, wr_id))
}

/// Get `len` bytes from byte `offset` of `*from` into `dst` (one doorbell write); its
/// completion comes on the queue with `wr_id`. Errors as for `exanest_dma_queue_put`.
///
/// # Safety
///
/// `q` is NULL or a live handle; `from` is NULL or readable; the caller does not touch
/// `[dst, dst + len)` until the get's completion has been polled.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_get(
    q: *mut ExanestDmaQueue,
    dst: u64,
    len: u32,
    from: *const Remote,
    offset: u64,
    wr_id: u64,
) -> c_int {
    let q = queue!(q);
    // SAFETY: NULL or readable per the contract.
    let Some(from) = (unsafe { from.as_ref() }) else {
        return -libc::EINVAL;
    };
    // SAFETY: The caller gives `Queue::get`'s guarantees.
    ret(unsafe { q.get(dst, len, from, offset, wr_id) })
}

/// Give the queue's file a mailbox of `1 << log2` slots.
///
/// # Safety
///
/// `q` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_mailbox(q: *mut ExanestDmaQueue, log2: u32) -> c_int {
    let q = queue!(q);
    ret(q.create_mailbox(log2))
}

/// Send `len` bytes from `src` to the mailbox of `endpoint` at `node` (one doorbell write).
///
/// # Safety
///
/// `q` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_send(
    q: *mut ExanestDmaQueue,
    src: u64,
    len: u32,
    node: u32,
    endpoint: u32,
    wr_id: u64,
) -> c_int {
    let q = queue!(q);
    ret(q.send(src, len, node, endpoint, wr_id))
}

/// Put with immediate data (`exanest_dma_queue_put` and `imm`): the receiving process's
/// mailbox gets a completion with `imm` once every byte is placed. `-ECONNREFUSED` in the
/// completion when it has no mailbox.
///
/// # Safety
///
/// `q` is NULL or a live handle; `to` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_put_imm(
    q: *mut ExanestDmaQueue,
    src: u64,
    len: u32,
    to: *const Remote,
    offset: u64,
    imm: u32,
    wr_id: u64,
) -> c_int {
    let q = queue!(q);
    // SAFETY: NULL or readable per the contract.
    let Some(to) = (unsafe { to.as_ref() }) else {
        return -libc::EINVAL;
    };
    ret(q.put_imm(src, len, to, offset, imm, wr_id))
}

/// `struct exanest_dma_message`: what `exanest_dma_queue_recv_msg` took.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExanestDmaMessage {
    /// The sending node.
    pub node: u32,
    /// The sending endpoint (`u32::MAX` for a put's completion).
    pub endpoint: u32,
    /// The message's bytes, or the put's length.
    pub len: u32,
    /// `EXANEST_DMA_MESSAGE_PUT_IMM` for a put's completion, else 0.
    pub flags: u32,
    /// A put's immediate data.
    pub imm: u32,
    /// 0.
    pub reserved: u32,
    /// A put's first byte here.
    pub addr: u64,
}

/// `EXANEST_DMA_MESSAGE_PUT_IMM`.
pub const MESSAGE_PUT_IMM: u32 = 1;

/// Take the next message or put completion, sleeping for it as `exanest_dma_queue_recv_wait`
/// (`timeout_ns` 0: just look): 1 with `*m` filled (a message's first `cap` bytes in `buf`),
/// 0 when nothing came with `timeout_ns` 0, or `-errno`.
///
/// # Safety
///
/// `q` is NULL or a live handle; `buf` is NULL (with `cap` 0) or writable for `cap` bytes; `m`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_recv_msg(
    q: *mut ExanestDmaQueue,
    buf: *mut u8,
    cap: usize,
    m: *mut ExanestDmaMessage,
    timeout_ns: i64,
) -> c_int {
    // SAFETY: NULL or writable per the contract.
    let Some(out) = (unsafe { m.as_mut() }) else {
        return -libc::EINVAL;
    };
    *out = ExanestDmaMessage::default();
    let q = queue!(q);
    if buf.is_null() && cap != 0 {
        return -libc::EINVAL;
    }
    let got = if timeout_ns == 0 {
        match q.recv() {
            Some(g) => g,
            None if q.has_mailbox() => return 0,
            None => return -libc::EINVAL,
        }
    } else {
        match q.recv_wait(u64::try_from(timeout_ns).ok().map(Duration::from_nanos)) {
            Ok(g) => g,
            Err(e) => return -e.errno(),
        }
    };
    // SAFETY: The caller gives `message_out`'s guarantees.
    let n = unsafe { message_out(&got, buf, cap, core::ptr::null_mut(), core::ptr::null_mut()) };
    *out = ExanestDmaMessage {
        node: got.node,
        endpoint: got.endpoint,
        len: n as u32,
        ..Default::default()
    };
    if let Some(p) = got.put() {
        *out = ExanestDmaMessage {
            len: p.len as u32,
            flags: MESSAGE_PUT_IMM,
            imm: p.imm,
            addr: p.addr,
            ..*out
        };
    }
    1
}

/// Take the next message: its length, 0 when none has come; `-ENOMSG` (taking nothing) when
/// the next entry is a put's completion (`exanest_dma_queue_recv_msg` takes it).
///
/// # Safety
///
/// `q` is NULL or a live handle; `buf` is NULL (with `cap` 0) or writable for `cap` bytes;
/// `node` and `endpoint` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_recv(
    q: *mut ExanestDmaQueue,
    buf: *mut u8,
    cap: usize,
    node: *mut u32,
    endpoint: *mut u32,
) -> c_int {
    let q = queue!(q);
    if buf.is_null() && cap != 0 {
        return -libc::EINVAL;
    }
    if q.next_is_put() {
        return -libc::ENOMSG;
    }
    match q.recv() {
        // SAFETY: The caller gives `message_out`'s guarantees.
        Some(m) => unsafe { message_out(&m, buf, cap, node, endpoint) },
        None => 0,
    }
}

/// Sleep until a message comes (`timeout_ns` < 0: no limit; 0: just look) and take it: its
/// length, or `-ETIMEDOUT`, `-EINTR`, `-EINVAL` (no mailbox), `-EOPNOTSUPP` (an engine older
/// than register map 2.6), `-ENOMSG` (taking nothing) for a put's completion.
///
/// # Safety
///
/// As [`exanest_dma_queue_recv`].
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_queue_recv_wait(
    q: *mut ExanestDmaQueue,
    buf: *mut u8,
    cap: usize,
    node: *mut u32,
    endpoint: *mut u32,
    timeout_ns: i64,
) -> c_int {
    let q = queue!(q);
    if buf.is_null() && cap != 0 {
        return -libc::EINVAL;
    }
    if let Err(e) = q.wait_message(u64::try_from(timeout_ns).ok().map(Duration::from_nanos)) {
        return -e.errno();
    }
    if q.next_is_put() {
        return -libc::ENOMSG;
    }
    match q.recv() {
        // SAFETY: The caller gives `message_out`'s guarantees.
        Some(m) => unsafe { message_out(&m, buf, cap, node, endpoint) },
        None => -libc::EAGAIN,
    }
}

/// Copy message `m` out: its first `cap` bytes to `buf`, its sender to `*node` and
/// `*endpoint` when not NULL; returns its length.
///
/// # Safety
///
/// `buf` is NULL (with `cap` 0) or writable for `cap` bytes; `node` and `endpoint` are NULL or
/// writable.
unsafe fn message_out(
    m: &crate::Message,
    buf: *mut u8,
    cap: usize,
    node: *mut u32,
    endpoint: *mut u32,
) -> c_int {
    let data = m.data();
    let n = data.len().min(cap);
    if n > 0 {
        // SAFETY: `buf` is writable for `cap >= n` bytes per the contract, and not `data`.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), buf, n) };
    }
    // SAFETY: NULL or writable per the contract.
    if let Some(p) = unsafe { node.as_mut() } {
        *p = m.node;
    }
    // SAFETY: As above.
    if let Some(p) = unsafe { endpoint.as_mut() } {
        *p = m.endpoint;
    }
    data.len() as c_int
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// `struct exanest_dma_message` (tests/capi.c checks the same offsets with the C compiler).
    #[test]
    fn message_layout_is_the_c_struct() {
        assert_eq!(size_of::<ExanestDmaMessage>(), 32);
        assert_eq!(offset_of!(ExanestDmaMessage, len), 8);
        assert_eq!(offset_of!(ExanestDmaMessage, flags), 12);
        assert_eq!(offset_of!(ExanestDmaMessage, imm), 16);
        assert_eq!(offset_of!(ExanestDmaMessage, addr), 24);
    }
}
