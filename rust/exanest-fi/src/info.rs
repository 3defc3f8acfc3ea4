// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `struct fi_info` in and out: the application's hints read into [`Hints`], and an [`Offer`]
//! that fits written out as a `fi_info` that libfabric's `fi_freeinfo` frees (every part from
//! the C allocator, as its `free` expects).

use crate::attr::{self, Fit, Hints, Offer, SideHints};
use crate::sys;
use core::ffi::{c_char, CStr};
use core::ptr;

/// A NUL-terminated C string's text, or None for NULL (or text that is not UTF-8, which no
/// name of ours is).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid for the call.
unsafe fn text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .ok()
        .map(str::to_owned)
}

/// # Safety
/// `p` is NULL or points to a valid `fi_tx_attr`.
unsafe fn tx_hints(p: *const sys::fi_tx_attr) -> SideHints {
    // SAFETY: NULL or valid, by the caller's contract.
    match unsafe { p.as_ref() } {
        None => SideHints::default(),
        Some(t) => SideHints {
            caps: t.caps,
            mode: t.mode,
            op_flags: t.op_flags,
            msg_order: t.msg_order,
            comp_order: t.comp_order,
            inject_size: t.inject_size,
            size: t.size,
            iov_limit: t.iov_limit,
        },
    }
}

/// # Safety
/// `p` is NULL or points to a valid `fi_rx_attr`.
unsafe fn rx_hints(p: *const sys::fi_rx_attr) -> SideHints {
    // SAFETY: NULL or valid, by the caller's contract.
    match unsafe { p.as_ref() } {
        None => SideHints::default(),
        Some(r) => SideHints {
            caps: r.caps,
            mode: r.mode,
            op_flags: r.op_flags,
            msg_order: r.msg_order,
            comp_order: r.comp_order,
            inject_size: 0,
            size: r.size,
            iov_limit: r.iov_limit,
        },
    }
}

/// The hints an application passed to `fi_getinfo`.
///
/// # Safety
/// `h` points to a valid `fi_info` whose attribute pointers are each NULL or valid, as
/// fi_getinfo(3) requires of hints.
pub unsafe fn hints(h: &sys::fi_info) -> Hints {
    let mut out = Hints {
        caps: h.caps,
        mode: h.mode,
        addr_format: h.addr_format,
        // SAFETY (this and the next three): the attribute pointers are NULL or valid.
        // SAFETY: the attribute pointers are NULL or valid.
        tx: unsafe { tx_hints(h.tx_attr) },
        // SAFETY: as above.
        rx: unsafe { rx_hints(h.rx_attr) },
        ..Default::default()
    };
    // SAFETY: as above.
    if let Some(e) = unsafe { h.ep_attr.as_ref() } {
        out.ep_type = e.type_ as u32;
        out.max_msg_size = e.max_msg_size;
        out.tx_ctx_cnt = e.tx_ctx_cnt;
        out.rx_ctx_cnt = e.rx_ctx_cnt;
    }
    // SAFETY: as above; the names are NULL or NUL-terminated strings.
    if let Some(d) = unsafe { h.domain_attr.as_ref() } {
        // SAFETY: as above.
        out.domain_name = unsafe { text(d.name) };
        out.mr_mode = d.mr_mode;
        out.cq_data_size = d.cq_data_size;
        out.progress = [d.data_progress as u32, d.control_progress as u32];
    }
    // SAFETY: as above.
    if let Some(f) = unsafe { h.fabric_attr.as_ref() } {
        // SAFETY: as above.
        out.fabric_name = unsafe { text(f.name) };
    }
    out
}

/// A zeroed `T` from the C allocator, or None when it has no memory.
fn calloc<T>() -> Option<*mut T> {
    // SAFETY: calloc has no preconditions; a NULL result is handled.
    let p = unsafe { libc::calloc(1, core::mem::size_of::<T>()) }.cast::<T>();
    (!p.is_null()).then_some(p)
}

/// `s` as a C string from the C allocator.
fn strdup(s: &str) -> Option<*mut c_char> {
    let p = calloc_bytes(s.len() + 1)?.cast::<c_char>();
    // SAFETY: `p` has s.len() + 1 zeroed bytes; s.len() are copied, the NUL stays.
    unsafe { ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), p, s.len()) };
    Some(p)
}

fn calloc_bytes(n: usize) -> Option<*mut u8> {
    // SAFETY: calloc has no preconditions; a NULL result is handled.
    let p = unsafe { libc::calloc(1, n) }.cast::<u8>();
    (!p.is_null()).then_some(p)
}

/// Frees a `fi_info` chain built here (`fi_freeinfo`'s work, for the chains libfabric never saw).
///
/// # Safety
/// `info` is NULL or the head of a chain that [`build`] made and nothing else refers to.
pub unsafe fn free_chain(mut info: *mut sys::fi_info) {
    while !info.is_null() {
        // SAFETY: every node and every part of it came from the C allocator in `build`, and
        // unset parts are NULL, which free accepts.
        unsafe {
            let i = &mut *info;
            let next = i.next;
            if let Some(d) = i.domain_attr.as_mut() {
                libc::free(d.name.cast());
            }
            if let Some(f) = i.fabric_attr.as_mut() {
                libc::free(f.name.cast());
                libc::free(f.prov_name.cast());
            }
            for p in [
                i.tx_attr.cast(),
                i.rx_attr.cast(),
                i.ep_attr.cast(),
                i.domain_attr.cast(),
                i.fabric_attr.cast(),
                i.src_addr,
                i.dest_addr,
            ] {
                libc::free(p);
            }
            libc::free(info.cast());
            info = next;
        }
    }
}

/// The `fi_info` for `offer` as fitted (`fit`). None when memory runs out
/// (whatever was built is freed).
pub fn build(offer: &Offer, fit: &Fit, api_version: u32) -> Option<*mut sys::fi_info> {
    let info = calloc::<sys::fi_info>()?;
    // SAFETY: `info` is a fresh zeroed fi_info that only this function refers to; each part
    // is attached as soon as it is allocated, so free_chain frees whatever was made.
    let ok = unsafe { fill(&mut *info, offer, fit, api_version) };
    if ok.is_none() {
        // SAFETY: built here, referred to by nothing else.
        unsafe { free_chain(info) };
    }
    ok.map(|()| info)
}

/// # Safety
/// `i` is zeroed and its parts are freed by `free_chain` if this fails part-way.
unsafe fn fill(i: &mut sys::fi_info, offer: &Offer, fit: &Fit, api_version: u32) -> Option<()> {
    i.caps = fit.caps;
    // No mode bit required: FI_CONTEXT and friends, if the application offers them, go unused.
    i.mode = 0;
    i.addr_format = sys::FI_FORMAT_UNSPEC;
    i.src_addrlen = attr::ADDR_LEN;
    let src = calloc_bytes(attr::ADDR_LEN)?;
    i.src_addr = src.cast();
    // SAFETY: `src` has ADDR_LEN bytes.
    unsafe {
        ptr::copy_nonoverlapping(
            attr::addr_bytes(offer.node, attr::ANY_ENDPOINT).as_ptr(),
            src,
            attr::ADDR_LEN,
        )
    };

    i.tx_attr = calloc::<sys::fi_tx_attr>()?;
    // SAFETY: just allocated, zeroed, owned by `i`.
    let tx = unsafe { &mut *i.tx_attr };
    tx.caps = fit.tx_caps;
    tx.op_flags = fit.tx_op_flags;
    tx.msg_order = offer.msg_order;
    tx.comp_order = offer.comp_order;
    tx.inject_size = offer.inject_size;
    tx.size = offer.tx_size;
    tx.iov_limit = 1;
    tx.rma_iov_limit = 1;

    i.rx_attr = calloc::<sys::fi_rx_attr>()?;
    // SAFETY: as above.
    let rx = unsafe { &mut *i.rx_attr };
    rx.caps = fit.rx_caps;
    rx.op_flags = fit.rx_op_flags;
    rx.msg_order = offer.msg_order;
    rx.comp_order = offer.comp_order;
    rx.size = offer.rx_size;
    rx.iov_limit = 1;

    i.ep_attr = calloc::<sys::fi_ep_attr>()?;
    // SAFETY: as above.
    let ep = unsafe { &mut *i.ep_attr };
    ep.type_ = sys::fi_ep_type_FI_EP_RDM;
    ep.protocol = sys::FI_PROTO_UNSPEC;
    ep.protocol_version = 1;
    ep.max_msg_size = offer.max_msg_size;
    ep.mem_tag_format = attr::TAG_GENERIC;
    ep.tx_ctx_cnt = 1;
    ep.rx_ctx_cnt = 1;

    i.domain_attr = calloc::<sys::fi_domain_attr>()?;
    // SAFETY: as above.
    let d = unsafe { &mut *i.domain_attr };
    d.name = strdup(&offer.domain)?;
    d.threading = sys::fi_threading_FI_THREAD_SAFE;
    d.control_progress = sys::fi_progress_FI_PROGRESS_MANUAL;
    d.data_progress = sys::fi_progress_FI_PROGRESS_MANUAL;
    d.resource_mgmt = sys::fi_resource_mgmt_FI_RM_ENABLED;
    d.av_type = sys::fi_av_type_FI_AV_UNSPEC;
    // Nothing to register for sends and receives: any buffer works, the engine faults its
    // pages in (no FI_MR_LOCAL); FI_RMA's remote memory is registered (attr::RMA_MR_MODE).
    d.mr_mode = fit.mr_mode;
    d.mr_key_size = 8;
    d.cq_data_size = offer.cq_data_size;
    d.cq_cnt = 64;
    d.ep_cnt = offer.ep_cnt;
    d.tx_ctx_cnt = 1;
    d.rx_ctx_cnt = 1;
    d.max_ep_tx_ctx = 1;
    d.max_ep_rx_ctx = 1;
    d.cntr_cnt = 0;
    d.mr_iov_limit = 1;
    d.caps = attr::SECONDARY;
    d.mr_cnt = offer.mr_cnt;

    i.fabric_attr = calloc::<sys::fi_fabric_attr>()?;
    // SAFETY: as above.
    let f = unsafe { &mut *i.fabric_attr };
    f.name = strdup(attr::NAME)?;
    // prov_name stays NULL: libfabric names the provider itself (a utility provider layered on
    // this one appends its name to the core's).
    f.prov_version = attr::PROV_VERSION;
    f.api_version = api_version;
    Some(())
}
