// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The libfabric objects other than the endpoint: fabric, event queue, domain, address vector
//! and completion queue. Each is a `#[repr(C)]` box whose first field is libfabric's `fid_*`
//! struct, so the `fid` pointer an application holds is the box; `close` frees it. What an
//! object shares with others (a CQ its endpoints write, an AV they read) is behind an `Arc`.
//!
//! Locks: an endpoint's state, then a CQ's (an endpoint's progress writes completions); never
//! the other way (a CQ read collects its endpoints first, then progresses each unlocked).

use crate::attr;
use crate::ep;
use crate::sys;
use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// `-FI_E*` as a C int.
pub const fn err(e: u32) -> c_int {
    -(e as c_int)
}

/// `-FI_E*` as an ssize_t.
pub const fn serr(e: u32) -> isize {
    -(e as isize)
}

/// `FI_ADDR_NOTAVAIL`.
pub const ADDR_NOTAVAIL: u64 = u64::MAX;

/// Locks `m`, whatever a panicking holder left: the state stays consistent between calls.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- Operations an object does not have: libfabric's convention, -FI_ENOSYS. ----

unsafe extern "C" fn no_bind(_: *mut sys::fid, _: *mut sys::fid, _: u64) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_control(_: *mut sys::fid, _: c_int, _: *mut c_void) -> c_int {
    err(sys::FI_ENOSYS)
}
pub(crate) unsafe extern "C" fn no_ops_open(
    _: *mut sys::fid,
    _: *const c_char,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}

/// An `fi_ops` with `close` and the given bind and control.
pub(crate) const fn fi_ops(
    close: unsafe extern "C" fn(*mut sys::fid) -> c_int,
    bind: Option<unsafe extern "C" fn(*mut sys::fid, *mut sys::fid, u64) -> c_int>,
    control: Option<unsafe extern "C" fn(*mut sys::fid, c_int, *mut c_void) -> c_int>,
) -> sys::fi_ops {
    sys::fi_ops {
        size: core::mem::size_of::<sys::fi_ops>(),
        close: Some(close),
        bind: match bind {
            Some(b) => Some(b),
            None => Some(no_bind),
        },
        control: match control {
            Some(c) => Some(c),
            None => Some(no_control),
        },
        ops_open: Some(no_ops_open),
        tostr: None,
        ops_set: None,
    }
}

/// `fi_close` of an object that holds nothing but memory: its box freed (what it shares with
/// others goes with the last `Arc`).
///
/// # Safety
/// `f` is the fid of a `T` boxed by its open function, closed once (fi_close(3)).
pub(crate) unsafe extern "C" fn close_box<T>(f: *mut sys::fid) -> c_int {
    // SAFETY: the caller's contract: a boxed T, repr(C) with its fid first, closed once.
    drop(unsafe { Box::from_raw(f.cast::<T>()) });
    0
}

/// A `fid` header.
fn fid(fclass: u32, context: *mut c_void, ops: *const sys::fi_ops) -> sys::fid {
    sys::fid {
        fclass: fclass as usize,
        context,
        ops: ops.cast_mut(),
    }
}

/// An ops table in static memory, which libfabric's inline calls read through a `*mut`.
pub(crate) struct Ops<T>(pub T);
// SAFETY: the tables are never written after initialisation; libfabric only reads them.
unsafe impl<T> Sync for Ops<T> {}
impl<T> Ops<T> {
    pub(crate) const fn ptr(&'static self) -> *mut T {
        (&self.0 as *const T).cast_mut()
    }
}

// ================================ fabric ================================

/// `fid_fabric`.
#[repr(C)]
pub struct Fabric {
    fid: sys::fid_fabric,
}

static FABRIC_FI_OPS: Ops<sys::fi_ops> = Ops(fi_ops(close_box::<Fabric>, None, None));

unsafe extern "C" fn no_pep(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_info,
    _: *mut *mut sys::fid_pep,
    _: *mut c_void,
) -> c_int {
    // No connected endpoints (FI_EP_MSG), so no passive ones.
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_wait(
    _: *mut sys::fid_fabric,
    _: *mut sys::fi_wait_attr,
    _: *mut *mut sys::fid_wait,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_trywait(_: *mut sys::fid_fabric, _: *mut *mut sys::fid, _: c_int) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn domain2(
    f: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    dom: *mut *mut sys::fid_domain,
    flags: u64,
    ctx: *mut c_void,
) -> c_int {
    if flags != 0 {
        return err(sys::FI_EINVAL);
    }
    // SAFETY: libfabric's arguments, passed on.
    unsafe { open_domain(f, info, dom, ctx) }
}

static FABRIC_OPS: Ops<sys::fi_ops_fabric> = Ops(sys::fi_ops_fabric {
    size: core::mem::size_of::<sys::fi_ops_fabric>(),
    domain: Some(open_domain),
    passive_ep: Some(no_pep),
    eq_open: Some(open_eq),
    wait_open: Some(no_wait),
    trywait: Some(no_trywait),
    domain2: Some(domain2),
});

/// `fi_fabric`: the fabric named `exanest`.
///
/// # Safety
/// libfabric's arguments: `attr` valid, `out` writable.
pub unsafe extern "C" fn open_fabric(
    attr: *mut sys::fi_fabric_attr,
    out: *mut *mut sys::fid_fabric,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `attr` is NULL or valid (libfabric passes the application's).
    let name = unsafe { attr.as_ref() }.and_then(|a| {
        // SAFETY: a NUL-terminated name or NULL.
        (!a.name.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(a.name) })
    });
    if name.is_some_and(|n| n.to_bytes() != attr::NAME.as_bytes()) || out.is_null() {
        return err(sys::FI_EINVAL);
    }
    let f = Box::new(Fabric {
        fid: sys::fid_fabric {
            fid: fid(sys::FI_CLASS_FABRIC, context, FABRIC_FI_OPS.ptr()),
            ops: FABRIC_OPS.ptr(),
            api_version: attr::API_VERSION,
        },
    });
    // SAFETY: `out` is writable (checked non-NULL).
    unsafe { *out = Box::into_raw(f).cast() };
    0
}

// ================================ event queue ================================

/// `fid_eq`: the events an RDM endpoint has none of (no connections); what the application
/// writes with `fi_eq_write` it reads back.
#[repr(C)]
pub struct Eq {
    fid: sys::fid_eq,
    events: Mutex<VecDeque<(u32, Vec<u8>)>>,
}

static EQ_FI_OPS: Ops<sys::fi_ops> = Ops(fi_ops(close_box::<Eq>, None, None));

unsafe extern "C" fn eq_read(
    eq: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    // SAFETY: `eq` is an Eq's fid.
    let eq = unsafe { &*eq.cast::<Eq>() };
    let mut q = lock(&eq.events);
    let Some((ev, data)) = q.front() else {
        return serr(sys::FI_EAGAIN);
    };
    if len < data.len() {
        return serr(sys::FI_ETOOSMALL);
    }
    // SAFETY: `event` NULL or writable; `buf` has `len` >= data.len() bytes.
    unsafe {
        if !event.is_null() {
            *event = *ev;
        }
        ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), data.len());
    }
    let n = data.len() as isize;
    if flags & sys::FI_PEEK as u64 == 0 {
        q.pop_front();
    }
    n
}
unsafe extern "C" fn eq_readerr(
    _: *mut sys::fid_eq,
    _: *mut sys::fi_eq_err_entry,
    _: u64,
) -> isize {
    serr(sys::FI_EAGAIN)
}
unsafe extern "C" fn eq_write(
    eq: *mut sys::fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    // SAFETY: `eq` is an Eq's fid; `buf` has `len` bytes.
    let eq = unsafe { &*eq.cast::<Eq>() };
    let data = if len == 0 {
        Vec::new()
    } else {
        // SAFETY: `buf` has `len` bytes (fi_eq(3)).
        unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
    };
    lock(&eq.events).push_back((event, data));
    len as isize
}
unsafe extern "C" fn eq_sread(
    eq: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    let end = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    loop {
        // SAFETY: the caller's arguments, passed on.
        let r = unsafe { eq_read(eq, event, buf, len, flags) };
        if r != serr(sys::FI_EAGAIN) || end.is_some_and(|e| Instant::now() >= e) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
unsafe extern "C" fn eq_strerror(
    _: *mut sys::fid_eq,
    _: c_int,
    _: *const c_void,
    _: *mut c_char,
    _: usize,
) -> *const c_char {
    c"exanest: no provider error".as_ptr()
}

static EQ_OPS: Ops<sys::fi_ops_eq> = Ops(sys::fi_ops_eq {
    size: core::mem::size_of::<sys::fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
});

unsafe extern "C" fn open_eq(
    _f: *mut sys::fid_fabric,
    _attr: *mut sys::fi_eq_attr,
    out: *mut *mut sys::fid_eq,
    context: *mut c_void,
) -> c_int {
    if out.is_null() {
        return err(sys::FI_EINVAL);
    }
    let eq = Box::new(Eq {
        fid: sys::fid_eq {
            fid: fid(sys::FI_CLASS_EQ, context, EQ_FI_OPS.ptr()),
            ops: EQ_OPS.ptr(),
        },
        events: Mutex::new(VecDeque::new()),
    });
    // SAFETY: `out` is writable.
    unsafe { *out = Box::into_raw(eq).cast() };
    0
}

// ================================ domain ================================

/// What a domain's children share: its file of the device and its offer. The domain's one
/// endpoint (`ep_cnt` 1) uses the same file, so that the keys of the domain's memory
/// registrations name that endpoint (the engine binds a key to the file's endpoint).
#[derive(Debug)]
pub struct DomainInner {
    /// `/dev/exanest-dma<index>`, opened by `fi_domain`.
    pub dev: Arc<exanest_dma::Device>,
    /// The offer it was opened with.
    pub offer: attr::Offer,
}

/// `fid_domain`.
#[repr(C)]
pub struct Domain {
    fid: sys::fid_domain,
    /// Shared with its endpoints.
    pub inner: Arc<DomainInner>,
}

static DOMAIN_FI_OPS: Ops<sys::fi_ops> = Ops(fi_ops(close_box::<Domain>, None, None));

unsafe extern "C" fn no_sep(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_info,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_cntr(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_cntr_attr,
    _: *mut *mut sys::fid_cntr,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_poll(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_poll_attr,
    _: *mut *mut sys::fid_poll,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_stx(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_tx_attr,
    _: *mut *mut sys::fid_stx,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_srx(
    _: *mut sys::fid_domain,
    _: *mut sys::fi_rx_attr,
    _: *mut *mut sys::fid_ep,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_atomic(
    _: *mut sys::fid_domain,
    _: sys::fi_datatype,
    _: sys::fi_op,
    _: *mut sys::fi_atomic_attr,
    _: u64,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_coll(
    _: *mut sys::fid_domain,
    _: sys::fi_collective_op,
    _: *mut sys::fi_collective_attr,
    _: u64,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn endpoint2(
    d: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    flags: u64,
    ctx: *mut c_void,
) -> c_int {
    if flags != 0 {
        return err(sys::FI_EINVAL);
    }
    // SAFETY: libfabric's arguments, passed on.
    unsafe { ep::open(d, info, ep, ctx) }
}

static DOMAIN_OPS: Ops<sys::fi_ops_domain> = Ops(sys::fi_ops_domain {
    size: core::mem::size_of::<sys::fi_ops_domain>(),
    av_open: Some(open_av),
    cq_open: Some(open_cq),
    endpoint: Some(ep::open),
    scalable_ep: Some(no_sep),
    cntr_open: Some(no_cntr),
    poll_open: Some(no_poll),
    stx_ctx: Some(no_stx),
    srx_ctx: Some(no_srx),
    query_atomic: Some(no_atomic),
    query_collective: Some(no_coll),
    endpoint2: Some(endpoint2),
});

/// `fid_mr`: a memory registration. With a remote access, the memory is registered on the
/// domain's file on demand (nothing pinned), for other nodes' engines to read or write under
/// its key (`FI_MR_PROV_KEY`: the engine's rkey) at its virtual addresses (`FI_MR_VIRT_ADDR`);
/// local access alone needs nothing (no `FI_MR_LOCAL`).
#[repr(C)]
pub struct Mr {
    fid: sys::fid_mr,
    dev: Arc<exanest_dma::Device>,
    handle: Option<u32>,
}

unsafe extern "C" fn mr_close(f: *mut sys::fid) -> c_int {
    // SAFETY: the fid of an Mr boxed by `mr_new`, closed once.
    let mr = unsafe { Box::from_raw(f.cast::<Mr>()) };
    if let Some(h) = mr.handle {
        // The key is revoked and the memory's mappings dropped; a remote op still on it
        // completes with a key error at its initiator.
        if let Err(e) = mr.dev.deregister(h) {
            return -(e.errno().max(1));
        }
    }
    0
}

static MR_FI_OPS: Ops<sys::fi_ops> = Ops(fi_ops(mr_close, None, None));

/// The `EXANEST_DMA_ACCESS_*` bits for libfabric's access flags, or None when only local
/// access is asked for (which needs no registration).
pub fn access_bits(access: u64) -> Option<u32> {
    use exanest_core::abi::{ACCESS_READ, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, ACCESS_WRITE};
    let mut bits = 0;
    if access & sys::FI_REMOTE_READ as u64 != 0 {
        bits |= ACCESS_READ | ACCESS_REMOTE_READ;
    }
    if access & sys::FI_REMOTE_WRITE as u64 != 0 {
        bits |= ACCESS_WRITE | ACCESS_REMOTE_WRITE;
    }
    (bits != 0).then_some(bits)
}

/// Register `[buf, buf + len)` of the domain `d` with `access`.
///
/// # Safety
/// `d` is a Domain's fid; `mr` NULL or writable.
unsafe fn mr_new(
    d: *mut sys::fid,
    buf: usize,
    len: usize,
    access: u64,
    ctx: *mut c_void,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    if mr.is_null() {
        return err(sys::FI_EINVAL);
    }
    // SAFETY: a Domain's fid (the domain's mr ops are only reached through one).
    let dom = unsafe { &*d.cast::<Domain>() }.inner.clone();
    let (handle, key) = match access_bits(access) {
        None => (None, 0),
        Some(_) if len == 0 || buf == 0 => return err(sys::FI_EINVAL),
        Some(bits) => {
            // SAFETY: the application keeps the memory mapped while it is registered
            // (FI_MR_ALLOCATED); other nodes reach it only under the key, until fi_close.
            let r = unsafe {
                dom.dev.register_raw_access(
                    buf as u64,
                    len as u64,
                    bits,
                    exanest_dma::Mode::OnDemand,
                )
            };
            match r {
                Ok((h, k)) => (Some(h), k),
                Err(e) => return -(e.errno().max(1)),
            }
        }
    };
    let m = Box::new(Mr {
        fid: sys::fid_mr {
            fid: fid(sys::FI_CLASS_MR, ctx, MR_FI_OPS.ptr()),
            mem_desc: ptr::null_mut(),
            key,
        },
        dev: dom.dev.clone(),
        handle,
    });
    // SAFETY: `mr` is writable.
    unsafe { *mr = Box::into_raw(m).cast() };
    0
}

unsafe extern "C" fn mr_reg(
    d: *mut sys::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    _offset: u64,
    _requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    ctx: *mut c_void,
) -> c_int {
    if flags != 0 {
        return err(sys::FI_EBADFLAGS);
    }
    // SAFETY: libfabric's arguments, passed on.
    unsafe { mr_new(d, buf as usize, len, access, ctx, mr) }
}

unsafe extern "C" fn mr_regv(
    d: *mut sys::fid,
    iov: *const sys::iovec,
    count: usize,
    access: u64,
    _offset: u64,
    _requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    ctx: *mut c_void,
) -> c_int {
    if flags != 0 || count != 1 || iov.is_null() {
        return err(sys::FI_EINVAL);
    }
    // SAFETY: one iovec (mr_iov_limit 1).
    let (b, l) = unsafe { ((*iov).iov_base as usize, (*iov).iov_len) };
    // SAFETY: libfabric's arguments, passed on.
    unsafe { mr_new(d, b, l, access, ctx, mr) }
}

unsafe extern "C" fn mr_regattr(
    d: *mut sys::fid,
    attr: *const sys::fi_mr_attr,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    // SAFETY: `attr` NULL or valid (fi_mr(3)).
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return err(sys::FI_EINVAL);
    };
    if flags != 0 || a.iov_count != 1 || a.mr_iov.is_null() {
        return err(sys::FI_EINVAL);
    }
    // SAFETY: one iovec.
    let (b, l) = unsafe { ((*a.mr_iov).iov_base as usize, (*a.mr_iov).iov_len) };
    // SAFETY: libfabric's arguments, passed on.
    unsafe { mr_new(d, b, l, a.access, a.context, mr) }
}

static MR_OPS: Ops<sys::fi_ops_mr> = Ops(sys::fi_ops_mr {
    size: core::mem::size_of::<sys::fi_ops_mr>(),
    reg: Some(mr_reg),
    regv: Some(mr_regv),
    regattr: Some(mr_regattr),
});

/// `fi_domain`: the engine context `info` names.
///
/// # Safety
/// libfabric's arguments.
pub unsafe extern "C" fn open_domain(
    _f: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    out: *mut *mut sys::fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `info` is NULL or an fi_info (from fi_getinfo, possibly edited).
    let want = unsafe { info.as_ref() }
        .and_then(|i| unsafe { i.domain_attr.as_ref() })
        .and_then(|d| (!d.name.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(d.name) }))
        .and_then(|n| n.to_str().ok().map(str::to_owned));
    let Some(offer) = crate::offers()
        .into_iter()
        .find(|o| want.as_deref().is_none_or(|w| w == o.domain))
    else {
        return err(sys::FI_ENODEV);
    };
    if out.is_null() {
        return err(sys::FI_EINVAL);
    }
    let Some(index) = offer
        .domain
        .strip_prefix("exanest-dma")
        .and_then(|n| n.parse().ok())
    else {
        return err(sys::FI_ENODEV);
    };
    let dev = match exanest_dma::Device::open(index) {
        Ok(d) => Arc::new(d),
        Err(e) => return -(e.errno().max(1)),
    };
    let d = Box::new(Domain {
        fid: sys::fid_domain {
            fid: fid(sys::FI_CLASS_DOMAIN, context, DOMAIN_FI_OPS.ptr()),
            ops: DOMAIN_OPS.ptr(),
            mr: MR_OPS.ptr(),
        },
        inner: Arc::new(DomainInner { dev, offer }),
    });
    // SAFETY: `out` is writable.
    unsafe { *out = Box::into_raw(d).cast() };
    0
}

// ================================ address vector ================================

/// The addresses an AV holds: `fi_addr_t` is the index, in both `FI_AV_MAP` and `FI_AV_TABLE`.
#[derive(Debug, Default)]
pub struct AvInner {
    addrs: Vec<Option<crate::proto::Addr>>,
    index: HashMap<crate::proto::Addr, u64>,
}

impl AvInner {
    /// The endpoint at `fi_addr`.
    pub fn get(&self, a: u64) -> Option<crate::proto::Addr> {
        self.addrs.get(usize::try_from(a).ok()?).copied().flatten()
    }

    /// The `fi_addr_t` of `addr`, or `FI_ADDR_NOTAVAIL`.
    pub fn find(&self, addr: crate::proto::Addr) -> u64 {
        self.index.get(&addr).copied().unwrap_or(ADDR_NOTAVAIL)
    }
}

/// `fid_av`.
#[repr(C)]
pub struct Av {
    fid: sys::fid_av,
    /// Shared with the endpoints bound to it.
    pub inner: Arc<Mutex<AvInner>>,
}

static AV_FI_OPS: Ops<sys::fi_ops> = Ops(fi_ops(close_box::<Av>, None, None));

/// An address's bytes as (node, endpoint), or None for one that names no endpoint.
fn parse_addr(b: &[u8]) -> Option<crate::proto::Addr> {
    let node = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
    let ep = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
    (ep != attr::ANY_ENDPOINT && node <= u32::from(u16::MAX)).then_some((node, ep))
}

unsafe extern "C" fn av_insert(
    av: *mut sys::fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut u64,
    flags: u64,
    _ctx: *mut c_void,
) -> c_int {
    if flags != 0 || (count > 0 && addr.is_null()) {
        return err(sys::FI_EINVAL);
    }
    // SAFETY: `av` is an Av's fid; `addr` holds `count` addresses of ADDR_LEN bytes, `fi_addr`
    // is NULL or has room for `count` (fi_av(3)).
    let av = unsafe { &*av.cast::<Av>() };
    // SAFETY: `addr` holds `count` addresses of ADDR_LEN bytes.
    let bytes = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), count * attr::ADDR_LEN) };
    let mut t = lock(&av.inner);
    let mut done = 0;
    for (i, b) in bytes.chunks(attr::ADDR_LEN).enumerate() {
        let out = match parse_addr(b) {
            Some(a) => {
                let idx = match t.index.get(&a) {
                    Some(&x) => x,
                    None => {
                        t.addrs.push(Some(a));
                        let x = (t.addrs.len() - 1) as u64;
                        t.index.insert(a, x);
                        x
                    }
                };
                done += 1;
                idx
            }
            None => ADDR_NOTAVAIL,
        };
        if !fi_addr.is_null() {
            // SAFETY: room for `count` entries.
            unsafe { *fi_addr.add(i) = out };
        }
    }
    done
}
unsafe extern "C" fn no_insertsvc(
    _: *mut sys::fid_av,
    _: *const c_char,
    _: *const c_char,
    _: *mut u64,
    _: u64,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn no_insertsym(
    _: *mut sys::fid_av,
    _: *const c_char,
    _: usize,
    _: *const c_char,
    _: usize,
    _: *mut u64,
    _: u64,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}
unsafe extern "C" fn av_remove(
    av: *mut sys::fid_av,
    fi_addr: *mut u64,
    count: usize,
    _flags: u64,
) -> c_int {
    // SAFETY: `av` is an Av's fid; `fi_addr` holds `count` addresses.
    let av = unsafe { &*av.cast::<Av>() };
    let list = if count == 0 {
        &[][..]
    } else {
        // SAFETY: `fi_addr` holds `count` addresses.
        unsafe { core::slice::from_raw_parts(fi_addr, count) }
    };
    let mut t = lock(&av.inner);
    for &a in list {
        let Some(slot) = usize::try_from(a).ok().and_then(|i| t.addrs.get_mut(i)) else {
            return err(sys::FI_EINVAL);
        };
        if let Some(x) = slot.take() {
            t.index.remove(&x);
        }
    }
    0
}
unsafe extern "C" fn av_lookup(
    av: *mut sys::fid_av,
    fi_addr: u64,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    // SAFETY: `av` is an Av's fid; `addrlen` valid, `addr` has `*addrlen` bytes.
    let av = unsafe { &*av.cast::<Av>() };
    let Some((node, ep)) = lock(&av.inner).get(fi_addr) else {
        return err(sys::FI_ENOENT);
    };
    let b = attr::addr_bytes(node, ep);
    // SAFETY: `addrlen` valid and `addr` has `*addrlen` bytes (fi_av(3)).
    unsafe {
        let room = *addrlen;
        ptr::copy_nonoverlapping(b.as_ptr(), addr.cast::<u8>(), room.min(b.len()));
        *addrlen = b.len();
    }
    0
}
/// `fi_av_straddr`: "exanest://NODE:ENDPOINT".
pub(crate) unsafe extern "C" fn av_straddr(
    _av: *mut sys::fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    // SAFETY: `addr` has ADDR_LEN bytes; `len` valid, `buf` has `*len` bytes.
    let b = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), attr::ADDR_LEN) };
    let node = u32::from_le_bytes(b[0..4].try_into().unwrap_or_default());
    let ep = u32::from_le_bytes(b[4..8].try_into().unwrap_or_default());
    let s = format!("exanest://{node}:{ep}\0");
    // SAFETY: `len` valid and `buf` has `*len` bytes (fi_av(3)).
    unsafe {
        let room = *len;
        if room > 0 {
            let n = (s.len()).min(room);
            ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, n);
            *buf.add(n - 1) = 0;
        }
        *len = s.len();
    }
    buf
}
unsafe extern "C" fn no_av_set(
    _: *mut sys::fid_av,
    _: *mut sys::fi_av_set_attr,
    _: *mut *mut sys::fid_av_set,
    _: *mut c_void,
) -> c_int {
    err(sys::FI_ENOSYS)
}

static AV_OPS: Ops<sys::fi_ops_av> = Ops(sys::fi_ops_av {
    size: core::mem::size_of::<sys::fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(no_insertsvc),
    insertsym: Some(no_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(no_av_set),
});

unsafe extern "C" fn open_av(
    _d: *mut sys::fid_domain,
    attr: *mut sys::fi_av_attr,
    out: *mut *mut sys::fid_av,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `attr` NULL or valid.
    if let Some(a) = unsafe { attr.as_ref() } {
        // Named (shared) AVs and asynchronous inserts are not offered.
        if !a.name.is_null() || a.flags & sys::FI_EVENT as u64 != 0 || a.rx_ctx_bits != 0 {
            return err(sys::FI_ENOSYS);
        }
    }
    if out.is_null() {
        return err(sys::FI_EINVAL);
    }
    let av = Box::new(Av {
        fid: sys::fid_av {
            fid: fid(sys::FI_CLASS_AV, context, AV_FI_OPS.ptr()),
            ops: AV_OPS.ptr(),
        },
        inner: Arc::new(Mutex::new(AvInner::default())),
    });
    // SAFETY: `out` is writable.
    unsafe { *out = Box::into_raw(av).cast() };
    0
}

// ================================ completion queue ================================

/// One completion, every format's fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct Entry {
    /// `op_context`, as an address.
    pub ctx: usize,
    /// `FI_SEND`, `FI_RECV`, `FI_MSG`, `FI_TAGGED`, `FI_REMOTE_CQ_DATA`.
    pub flags: u64,
    /// Bytes.
    pub len: usize,
    /// The receive buffer, as an address.
    pub buf: usize,
    /// Remote CQ data.
    pub data: u64,
    /// The tag.
    pub tag: u64,
    /// The source (fi_cq_readfrom).
    pub src: u64,
    /// 0, or the positive `FI_E*` of an error completion.
    pub err: i32,
    /// Bytes not delivered (`FI_ETRUNC`).
    pub olen: usize,
}

/// A CQ's completions and the endpoints that write it.
#[derive(Debug, Default)]
pub struct CqInner {
    entries: VecDeque<Entry>,
    errors: VecDeque<Entry>,
    eps: Vec<Weak<ep::Shared>>,
}

impl CqInner {
    /// Queue `e` (an error one if `e.err != 0`).
    pub fn push(&mut self, e: Entry) {
        if e.err != 0 {
            self.errors.push_back(e);
        } else {
            self.entries.push_back(e);
        }
    }

    /// An endpoint writes this CQ: its reads progress the endpoint.
    pub fn attach(&mut self, ep: Weak<ep::Shared>) {
        self.eps.retain(|w| w.strong_count() > 0);
        self.eps.push(ep);
    }
}

/// `fid_cq`.
#[repr(C)]
pub struct Cq {
    fid: sys::fid_cq,
    format: u32,
    /// Shared with the endpoints bound to it.
    pub inner: Arc<Mutex<CqInner>>,
}

static CQ_FI_OPS: Ops<sys::fi_ops> = Ops(fi_ops(close_box::<Cq>, None, None));

/// The bytes of one entry in `format`.
fn entry_size(format: u32) -> usize {
    match format {
        sys::fi_cq_format_FI_CQ_FORMAT_CONTEXT => core::mem::size_of::<sys::fi_cq_entry>(),
        sys::fi_cq_format_FI_CQ_FORMAT_MSG => core::mem::size_of::<sys::fi_cq_msg_entry>(),
        sys::fi_cq_format_FI_CQ_FORMAT_DATA => core::mem::size_of::<sys::fi_cq_data_entry>(),
        _ => core::mem::size_of::<sys::fi_cq_tagged_entry>(),
    }
}

/// Write `e` in `format` at `p`.
///
/// # Safety
/// `p` has `entry_size(format)` writable bytes.
unsafe fn write_entry(format: u32, p: *mut u8, e: &Entry) {
    let t = sys::fi_cq_tagged_entry {
        op_context: e.ctx as *mut c_void,
        flags: e.flags,
        len: e.len,
        buf: e.buf as *mut c_void,
        data: e.data,
        tag: e.tag,
    };
    // The formats are prefixes of the tagged entry (fi_cq(3)).
    // SAFETY: `p` has entry_size(format) bytes, at most the tagged entry's.
    unsafe {
        ptr::copy_nonoverlapping(
            (&t as *const sys::fi_cq_tagged_entry).cast::<u8>(),
            p,
            entry_size(format),
        )
    };
}

/// Progress the endpoints that write `cq` (unlocked), then take up to `count` entries.
/// Progress the endpoints bound to `cq`, taken out of its lock first (an endpoint's lock comes
/// before a CQ's): on the stack for the usual one or two, so a CQ read allocates nothing.
fn progress_bound(cq: &Cq) {
    const FEW: usize = 4;
    let mut few: [Option<Arc<ep::Shared>>; FEW] = Default::default();
    let mut more = Vec::new();
    for (i, e) in lock(&cq.inner)
        .eps
        .iter()
        .filter_map(Weak::upgrade)
        .enumerate()
    {
        match few.get_mut(i) {
            Some(slot) => *slot = Some(e),
            None => more.push(e),
        }
    }
    for e in few.iter().flatten().chain(more.iter()) {
        e.progress();
    }
}

fn cq_take(cq: &Cq, buf: *mut c_void, count: usize, src: *mut u64) -> isize {
    progress_bound(cq);
    let mut q = lock(&cq.inner);
    if !q.errors.is_empty() {
        return serr(sys::FI_EAVAIL);
    }
    let n = count.min(q.entries.len());
    if n == 0 {
        return serr(sys::FI_EAGAIN);
    }
    let size = entry_size(cq.format);
    for i in 0..n {
        let Some(e) = q.entries.pop_front() else {
            break;
        };
        // SAFETY: the application's buffer holds `count` entries of the CQ's format, and
        // `src`, when given, `count` addresses.
        unsafe {
            write_entry(cq.format, buf.cast::<u8>().add(i * size), &e);
            if !src.is_null() {
                *src.add(i) = e.src;
            }
        }
    }
    n as isize
}

unsafe extern "C" fn cq_read(cq: *mut sys::fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: `cq` is a Cq's fid.
    cq_take(unsafe { &*cq.cast::<Cq>() }, buf, count, ptr::null_mut())
}
unsafe extern "C" fn cq_readfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
) -> isize {
    // SAFETY: `cq` is a Cq's fid.
    cq_take(unsafe { &*cq.cast::<Cq>() }, buf, count, src)
}
unsafe extern "C" fn cq_readerr(
    cq: *mut sys::fid_cq,
    buf: *mut sys::fi_cq_err_entry,
    _flags: u64,
) -> isize {
    // SAFETY: `cq` is a Cq's fid; `buf` a writable error entry.
    let cq = unsafe { &*cq.cast::<Cq>() };
    let Some(e) = lock(&cq.inner).errors.pop_front() else {
        return serr(sys::FI_EAGAIN);
    };
    // SAFETY: as above. err_data is left as the application set it (none given).
    unsafe {
        let b = &mut *buf;
        b.op_context = e.ctx as *mut c_void;
        b.flags = e.flags;
        b.len = e.len;
        b.buf = e.buf as *mut c_void;
        b.data = e.data;
        b.tag = e.tag;
        b.olen = e.olen;
        b.err = e.err;
        b.prov_errno = e.err;
        b.err_data_size = 0;
    }
    1
}
unsafe extern "C" fn cq_sreadfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: `cq` is a Cq's fid.
    let c = unsafe { &*cq.cast::<Cq>() };
    let end = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    loop {
        let r = cq_take(c, buf, count, src);
        if r != serr(sys::FI_EAGAIN) {
            return r;
        }
        if end.is_some_and(|e| Instant::now() >= e) {
            return r;
        }
        let eps: Vec<_> = lock(&c.inner)
            .eps
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        ep::wait_any(&eps, Duration::from_millis(10));
    }
}
unsafe extern "C" fn cq_sread(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: the caller's arguments, passed on.
    unsafe { cq_sreadfrom(cq, buf, count, ptr::null_mut(), cond, timeout) }
}
unsafe extern "C" fn cq_signal(_: *mut sys::fid_cq) -> c_int {
    0
}
unsafe extern "C" fn cq_strerror(
    _: *mut sys::fid_cq,
    prov_errno: c_int,
    _: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // prov_errno is the completion's FI_E*, an errno: the C library's text for it.
    // SAFETY: strerror returns a NUL-terminated string.
    let s = unsafe { libc::strerror(prov_errno) }.cast_const();
    if !buf.is_null() && len > 0 {
        // SAFETY: `s` is NUL-terminated; `buf` has `len` bytes.
        unsafe {
            let n = core::ffi::CStr::from_ptr(s).to_bytes().len().min(len - 1);
            ptr::copy_nonoverlapping(s, buf, n);
            *buf.add(n) = 0;
        }
    }
    s
}

static CQ_OPS: Ops<sys::fi_ops_cq> = Ops(sys::fi_ops_cq {
    size: core::mem::size_of::<sys::fi_ops_cq>(),
    read: Some(cq_read),
    readfrom: Some(cq_readfrom),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    sreadfrom: Some(cq_sreadfrom),
    signal: Some(cq_signal),
    strerror: Some(cq_strerror),
});

unsafe extern "C" fn open_cq(
    _d: *mut sys::fid_domain,
    attr: *mut sys::fi_cq_attr,
    out: *mut *mut sys::fid_cq,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `attr` NULL or valid.
    let (format, wait) = match unsafe { attr.as_ref() } {
        Some(a) => (a.format, a.wait_obj),
        None => (
            sys::fi_cq_format_FI_CQ_FORMAT_UNSPEC,
            sys::fi_wait_obj_FI_WAIT_NONE,
        ),
    };
    let format = match format {
        sys::fi_cq_format_FI_CQ_FORMAT_UNSPEC => sys::fi_cq_format_FI_CQ_FORMAT_CONTEXT,
        f @ (sys::fi_cq_format_FI_CQ_FORMAT_CONTEXT
        | sys::fi_cq_format_FI_CQ_FORMAT_MSG
        | sys::fi_cq_format_FI_CQ_FORMAT_DATA
        | sys::fi_cq_format_FI_CQ_FORMAT_TAGGED) => f,
        _ => return err(sys::FI_ENOSYS),
    };
    // fi_cq_sread waits on the endpoints' files; no other wait object is offered.
    if !matches!(
        wait,
        sys::fi_wait_obj_FI_WAIT_NONE | sys::fi_wait_obj_FI_WAIT_UNSPEC
    ) {
        return err(sys::FI_ENOSYS);
    }
    if out.is_null() {
        return err(sys::FI_EINVAL);
    }
    let cq = Box::new(Cq {
        fid: sys::fid_cq {
            fid: fid(sys::FI_CLASS_CQ, context, CQ_FI_OPS.ptr()),
            ops: CQ_OPS.ptr(),
        },
        format,
        inner: Arc::new(Mutex::new(CqInner::default())),
    });
    // SAFETY: `out` is writable.
    unsafe { *out = Box::into_raw(cq).cast() };
    0
}
