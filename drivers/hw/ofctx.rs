// SPDX-License-Identifier: GPL-2.0-only

//! The engine's contexts on the devicetree front-end (the QFDB, behind its MMU-500): what the
//! SR-IOV virtual functions are on PCI ([`super::sriov`]). Context n is the child node
//! `context@n` of the engine's node (compatible `exanest,pldma-1.0-context`), with the
//! StreamID of the context's AXI ID in its `iommus`; the driver makes a platform device of it,
//! which the IOMMU puts in a group of its own, and attaches the domain of the process holding
//! the context to that device. Context n's doorbell page is page n of the engine's register
//! window named `contexts` (Documentation/devicetree/bindings/dma/exanest,pldma.yaml).
//!
//! Each device is taken for DMA ownership by the driver when it is made (exanest_shim.c): its
//! stream is blocked while no process holds the context, and, on arm-smmu with kernel patch
//! 0009, holds none of the MMU-500's few context banks.

use crate::ffi;
use core::ptr::NonNull;
use kernel::{bindings, device, platform, prelude::*, sync::aref::ARef};

/// Bytes of one context's doorbell page (a VF's BAR0 on PCI).
const PAGE: u64 = 4096;

/// The contexts' devices of one engine, made at probe, destroyed at unbind.
pub(crate) struct OfContexts {
    /// Context n's device, referenced; the raw pointers are what the shim destroys.
    devs: KVec<ARef<device::Device>>,
    raw: KVec<NonNull<bindings::device>>,
    /// Physical address of context n's doorbell page.
    doorbells: KVec<u64>,
    /// The DMA owner's token: unique to this engine (its address).
    owner: KBox<u8>,
}

// SAFETY: The raw pointers are referenced devices, only destroyed by `drop`, which runs once;
// the shim's calls may come from any thread that may sleep.
unsafe impl Send for OfContexts {}
// SAFETY: `&self` only hands out the references and addresses.
unsafe impl Sync for OfContexts {}

impl OfContexts {
    /// Make the devices of contexts 0..`n` of the engine `pdev` (fewer if its node has fewer
    /// context nodes, counting from 0). ENODEV if it has none, or a context without an IOMMU.
    pub(crate) fn enable(pdev: &platform::Device<device::Core<'_>>, n: u32) -> Result<Self> {
        let parent: &device::Device = pdev.as_ref();
        let win = pdev.resource_by_name(c"contexts").ok_or_else(|| {
            dev_err!(parent, "no \"contexts\" register window (reg-names)\n");
            ENODEV
        })?;
        let (base, size) = (win.start(), win.size());
        let mut c = OfContexts {
            devs: KVec::new(),
            raw: KVec::new(),
            doorbells: KVec::new(),
            owner: KBox::new(0, GFP_KERNEL)?,
        };
        let owner = core::ptr::from_mut(&mut *c.owner).cast::<core::ffi::c_void>();
        for i in 0..n {
            if u64::from(i + 1) * PAGE > size {
                dev_warn!(parent, "the contexts window ends before context {}\n", i);
                break;
            }
            // SAFETY: `parent` is being probed; `owner` lives in `c`, whose drop destroys the
            // devices with it.
            let Some(raw) =
                (unsafe { ffi::of_context_create(parent, i, owner) }).inspect_err(|e| {
                    dev_err!(parent, "context {}: no device of its own: {:?}\n", i, e)
                })?
            else {
                break;
            };
            c.raw.push(raw, GFP_KERNEL)?;
            // SAFETY: `raw` is a live device, referenced until it is destroyed in `drop`;
            // `get_device` takes a reference of its own.
            let d = unsafe { device::Device::get_device(raw.as_ptr()) };
            c.devs.push(d, GFP_KERNEL)?;
            c.doorbells.push(base + u64::from(i) * PAGE, GFP_KERNEL)?;
        }
        if c.devs.is_empty() {
            dev_err!(
                parent,
                "no context node (compatible exanest,pldma-1.0-context)\n"
            );
            return Err(ENODEV);
        }
        Ok(c)
    }

    /// The device each context's DMA is issued as, by context index.
    pub(crate) fn devices(&self) -> &[ARef<device::Device>] {
        &self.devs
    }

    /// The physical address of each context's doorbell page, by context index.
    pub(crate) fn doorbells(&self) -> &[u64] {
        &self.doorbells
    }
}

impl Drop for OfContexts {
    fn drop(&mut self) {
        let owner = core::ptr::from_mut(&mut *self.owner).cast::<core::ffi::c_void>();
        // The references first: the device goes with the shim's.
        self.devs.clear();
        while let Some(raw) = self.raw.pop() {
            // SAFETY: `raw` and `owner` are what `of_context_create` returned and was given;
            // `raw` is dropped from the list here, never used again.
            unsafe { ffi::of_context_destroy(raw, owner) };
        }
    }
}
