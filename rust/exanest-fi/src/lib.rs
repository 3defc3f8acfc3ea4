// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `libexanest-fi.so`: the ExaNeSt DMA engine's libfabric provider (Documentation/libfabric.rst).
//!
//! libfabric 1.17 loads it from `FI_PROVIDER_PATH` (or its own provider directory) and calls
//! [`fi_prov_ini`]. `fi_getinfo` lists one `FI_EP_RDM` domain per engine context with a network
//! port, narrowed by the application's hints (`attr.rs`, `info.rs`); the fabric, its event
//! queue, the domain, address vectors and completion queues are `obj.rs`; the endpoint, with
//! messages and tagged messages over the engine's mailbox and get, `ep.rs`, on the protocol and
//! matching of `proto.rs`.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
// bindgen types each libfabric macro constant u32 or u64 by its value: the casts to the type
// of the field keep the code the same whichever it chose.
#![allow(clippy::unnecessary_cast)]

pub mod attr;
pub mod ep;
pub mod info;
pub mod obj;
pub mod proto;
pub mod regcache;

/// The bindings of the public libfabric headers (build.rs).
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::pedantic,
    missing_docs,
    unsafe_op_in_unsafe_fn
)]
pub mod sys {
    include!(concat!(env!("OUT_DIR"), "/fi.rs"));
}

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int};
use core::ptr;

/// One domain per engine context with a network port: `/dev/exanest-dma<N>` whose engine has a
/// node id. A device that cannot be opened (absent, busy, not ours to open) is not listed.
pub fn offers() -> Vec<attr::Offer> {
    let only = std::env::var(attr::DEVICE_VAR).ok();
    let mut names: Vec<(u32, String)> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n: u32 = name.strip_prefix("exanest-dma")?.parse().ok()?;
            attr::device_allowed(&name, only.as_deref()).then_some((n, name))
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|(n, name)| {
            let info = exanest_dma::Device::open(n).ok()?.info().ok()?;
            (info.node != exanest_core::abi::NO_NODE).then(|| {
                let mut o = attr::Offer::new(name, info.node, info.max_regions);
                o.max_msg_size = o.max_msg_size.min(info.max_transfer as usize);
                o
            })
        })
        .collect()
}

/// `fi_getinfo`'s answer for `hints` among `offers`: the chain of those that fit, or the
/// (negative) `FI_E*` error.
pub fn getinfo_chain(
    offers: &[attr::Offer],
    hints: Option<&attr::Hints>,
    api_version: u32,
) -> Result<*mut sys::fi_info, c_int> {
    let mut head: *mut sys::fi_info = ptr::null_mut();
    let mut tail: *mut *mut sys::fi_info = &mut head;
    for o in offers {
        let Ok(fit) = o.fit(hints) else { continue };
        let Some(i) = info::build(o, &fit, api_version) else {
            // SAFETY: the chain so far was built here and is referred to by nothing else.
            unsafe { info::free_chain(head) };
            return Err(-(sys::FI_ENOMEM as c_int));
        };
        // SAFETY: `tail` points to `head` or to the last node's `next`, both live.
        unsafe {
            *tail = i;
            tail = &mut (*i).next;
        }
    }
    if head.is_null() {
        Err(-(sys::FI_ENODATA as c_int))
    } else {
        Ok(head)
    }
}

unsafe extern "C" fn getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const sys::fi_info,
    info: *mut *mut sys::fi_info,
) -> c_int {
    if info.is_null() {
        return -(sys::FI_EINVAL as c_int);
    }
    // SAFETY: `info` is libfabric's out-pointer, checked non-NULL.
    unsafe { *info = ptr::null_mut() };
    // Addresses by name (node, service) are not resolved: applications exchange the ones
    // fi_getname gives them (Documentation/libfabric.rst).
    let _ = flags;
    if !node.is_null() || !service.is_null() {
        return -(sys::FI_ENODATA as c_int);
    }
    // SAFETY: libfabric passes the application's hints, NULL or valid (fi_getinfo(3)).
    let h = unsafe { hints.as_ref() }.map(|h| unsafe { info::hints(h) });
    match getinfo_chain(&offers(), h.as_ref(), version) {
        Ok(chain) => {
            // SAFETY: as above.
            unsafe { *info = chain };
            0
        }
        Err(e) => e,
    }
}

unsafe extern "C" fn cleanup() {}

/// The provider's description, which libfabric also writes into (its `context`).
struct Provider(UnsafeCell<sys::fi_provider>);

// SAFETY: libfabric reads and writes the descriptor under its own initialisation lock only.
unsafe impl Sync for Provider {}

static PROVIDER: Provider = Provider(UnsafeCell::new(sys::fi_provider {
    version: attr::PROV_VERSION,
    fi_version: attr::API_VERSION,
    context: sys::fi_context {
        internal: [ptr::null_mut(); 4],
    },
    name: c"exanest".as_ptr(),
    getinfo: Some(getinfo),
    fabric: Some(obj::open_fabric),
    cleanup: Some(cleanup),
}));

/// The entry point libfabric looks up in every `*-fi.so` it loads (`FI_EXT_INI`).
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut sys::fi_provider {
    PROVIDER.0.get()
}
