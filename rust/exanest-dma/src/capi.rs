// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The C ABI, declared in `include/exanest_dma.h`. Every function returns 0 or a negative errno.

use crate::{Access, Device, Error, Mode};
use exanest_core::abi;
use std::time::Duration;

/// The C handle: an open device.
pub struct ExanestDma(Device);

fn code(r: crate::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => -e.errno(),
    }
}

fn access(bits: u32) -> Option<Access> {
    match bits {
        abi::ACCESS_READ => Some(Access::Read),
        abi::ACCESS_WRITE => Some(Access::Write),
        abi::ACCESS_ALL => Some(Access::ReadWrite),
        _ => None,
    }
}

fn mode(raw: u32) -> Option<Mode> {
    match raw {
        abi::MODE_PIN => Some(Mode::Pin),
        abi::MODE_PREFAULT => Some(Mode::Prefault),
        abi::MODE_ON_DEMAND => Some(Mode::OnDemand),
        _ => None,
    }
}

/// Open `/dev/exanest-dma<index>`; `*out` gets the handle.
///
/// # Safety
///
/// `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_open(index: u32, out: *mut *mut ExanestDma) -> i32 {
    if out.is_null() {
        return -libc::EINVAL;
    }
    match Device::open(index) {
        Ok(d) => {
            // SAFETY: `out` is valid per the contract.
            unsafe { *out = Box::into_raw(Box::new(ExanestDma(d))) };
            0
        }
        Err(e) => -e.errno(),
    }
}

/// Close a handle (NULL is ignored). Regions and pending copies end with it.
///
/// # Safety
///
/// `dev` must come from `exanest_dma_open` and not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_close(dev: *mut ExanestDma) {
    if !dev.is_null() {
        // SAFETY: Per the contract, `dev` is ours and not used again.
        drop(unsafe { Box::from_raw(dev) });
    }
}

macro_rules! dev {
    ($p:expr) => {
        // SAFETY: The caller passes a handle from `exanest_dma_open` (checked for NULL).
        match unsafe { $p.as_ref() } {
            Some(d) => &d.0,
            None => return -libc::EINVAL,
        }
    };
}

/// Engine and driver facts.
///
/// # Safety
///
/// `dev` is a live handle; `info` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_info(dev: *const ExanestDma, info: *mut abi::Info) -> i32 {
    let d = dev!(dev);
    if info.is_null() {
        return -libc::EINVAL;
    }
    code(d.info().map(|i| {
        // SAFETY: Checked non-NULL; valid per the contract.
        unsafe { *info = i }
    }))
}

/// Register `[addr, addr + len)` with `EXANEST_DMA_ACCESS_*` bits and an `EXANEST_DMA_MODE_*`.
///
/// # Safety
///
/// `dev` is a live handle; the memory stays valid until deregistered; `handle` is writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_reg(
    dev: *const ExanestDma,
    addr: *const core::ffi::c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    handle: *mut u32,
) -> i32 {
    // SAFETY: Same contract.
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
    addr: *const core::ffi::c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    window: u32,
    handle: *mut u32,
) -> i32 {
    // SAFETY: Same contract.
    unsafe { reg(dev, addr, len, access_bits, mode_raw, Some(window), handle) }
}

/// # Safety
///
/// As for `exanest_dma_reg`.
unsafe fn reg(
    dev: *const ExanestDma,
    addr: *const core::ffi::c_void,
    len: usize,
    access_bits: u32,
    mode_raw: u32,
    window: Option<u32>,
    handle: *mut u32,
) -> i32 {
    let d = dev!(dev);
    let (Some(a), Some(m)) = (access(access_bits), mode(mode_raw)) else {
        return -libc::EINVAL;
    };
    if handle.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: The caller keeps the memory valid until deregistration.
    match unsafe { d.register_raw_window(addr as u64, len as u64, a, m, window) } {
        Ok(h) => {
            // SAFETY: Checked non-NULL; valid per the contract.
            unsafe { *handle = h };
            0
        }
        Err(e) => -e.errno(),
    }
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
    addr: *const core::ffi::c_void,
    len: usize,
    flags: u32,
) -> i32 {
    if flags & !abi::ADVISE_WRITE != 0 {
        return -libc::EINVAL;
    }
    code(dev!(dev).advise(addr as u64, len as u64, flags & abi::ADVISE_WRITE != 0))
}

/// Drop a region.
///
/// # Safety
///
/// `dev` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_dereg(dev: *const ExanestDma, handle: u32) -> i32 {
    code(dev!(dev).deregister(handle))
}

/// Start copying `len` bytes; `*cookie` identifies the copy for `exanest_dma_wait`.
///
/// # Safety
///
/// `dev` is a live handle; both ranges lie in registered regions; `cookie` is writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_copy(
    dev: *const ExanestDma,
    src: *const core::ffi::c_void,
    dst: *mut core::ffi::c_void,
    len: usize,
    cookie: *mut u64,
) -> i32 {
    let d = dev!(dev);
    if cookie.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: The caller does not touch `dst` until the copy is waited for.
    match unsafe { d.copy_raw(src as u64, dst as u64, len as u64) } {
        Ok(c) => {
            // SAFETY: Checked non-NULL; valid per the contract.
            unsafe { *cookie = c };
            0
        }
        Err(e) => -e.errno(),
    }
}

/// Wait for a copy (`timeout_ns` < 0: forever). 0 when it succeeded; its negative errno when it
/// failed; or the wait's own error. `bytes` (may be NULL) gets the bytes copied.
///
/// # Safety
///
/// `dev` is a live handle; `bytes` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn exanest_dma_wait(
    dev: *const ExanestDma,
    cookie: u64,
    timeout_ns: i64,
    bytes: *mut u64,
) -> i32 {
    let d = dev!(dev);
    let timeout = u64::try_from(timeout_ns).ok().map(Duration::from_nanos);
    match d.wait_cookie(cookie, timeout) {
        Ok(b) => {
            if !bytes.is_null() {
                // SAFETY: Non-NULL and writable per the contract.
                unsafe { *bytes = b };
            }
            0
        }
        Err(Error::Copy(e)) | Err(Error::Os(e)) => -e,
        Err(e) => -e.errno(),
    }
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
) -> i32 {
    let d = dev!(dev);
    if out.is_null() {
        return -libc::EINVAL;
    }
    code(d.counters().map(|c| {
        // SAFETY: Checked non-NULL; valid per the contract.
        unsafe { *out = c }
    }))
}
