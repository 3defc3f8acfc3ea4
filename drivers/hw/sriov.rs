// SPDX-License-Identifier: GPL-2.0-only

//! The contexts' functions: on PCI, each engine context issues its DMA as an SR-IOV virtual
//! function, so with its own requester ID, hence its own SMMU StreamID and IOMMU group, to which
//! the owning process's domain is attached (process.rs). QEMU's SMMUv3 has no substreams (PASID),
//! so a StreamID per context is what lets the SMMU keep contexts apart.
//!
//! The physical function's driver enables the VFs at probe and drives them itself: a VF needs
//! no driver of its own, only bus mastering (its DMA is checked against its own command
//! register) and its IOMMU group. No driver matches the VF's device ID (this one matches only
//! the PF's); an administrator binding one by hand (`driver_override`) cannot while a process's
//! domain is attached (the IOMMU core refuses a driver whose group is not on its default
//! domain). The VFs are disabled again when the physical function is unbound, after every
//! process has let go of its context (device.rs).

use crate::ffi;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{bindings, device, device::Core, pci, prelude::*, sync::aref::ARef};

/// The virtual functions of one engine, enabled until [`Functions::disable`] or drop.
pub(crate) struct Functions {
    /// The physical function; its driver (this one) is bound for as long as `self` lives.
    pf: *mut bindings::pci_dev,
    /// SR-IOV is enabled.
    enabled: AtomicBool,
    /// Virtual function n = context n, referenced.
    vfs: KVec<ARef<device::Device>>,
    /// Physical address of virtual function n's BAR0: context n's doorbell page.
    doorbells: KVec<u64>,
}

// SAFETY: `pf` is only used to disable SR-IOV, which the PCI core allows from any thread that
// may sleep; the references in `vfs` are thread-safe device references.
unsafe impl Send for Functions {}
// SAFETY: The one `&self` use of `pf`, `disable`, happens once (`enabled` is swapped).
unsafe impl Sync for Functions {}

impl Functions {
    /// Enable `n` virtual functions of `pdev` and turn on their bus mastering.
    pub(crate) fn enable(pdev: &pci::Device<Core<'_>>, n: u32) -> Result<Self> {
        let dev: &device::Device = pdev.as_ref();
        // SAFETY: `dev` is the `dev` field of a `struct pci_dev` (a PCI device's `device`).
        let pf = unsafe { kernel::container_of!(ffi::raw_dev(dev), bindings::pci_dev, dev) };
        let nr = i32::try_from(n).map_err(|_| EINVAL)?;
        // SAFETY: `pf` is the bound physical function whose probe is running, and SR-IOV is
        // disabled on it (a fresh probe, or disabled by the last drop).
        kernel::error::to_result(unsafe { bindings::pci_enable_sriov(pf, nr) })?;
        let mut f = Functions {
            pf,
            enabled: AtomicBool::new(true),
            vfs: KVec::new(),
            doorbells: KVec::new(),
        };
        // Each VF by its index, as the PCI core places it (the exported routing-ID lookup).
        for id in 0..nr {
            // SAFETY: `pf` is live (its probe is running) and SR-IOV is enabled on it.
            let vf = unsafe { ffi::pci_get_vf(pf, id) };
            if vf.is_null() {
                return Err(ENODEV);
            }
            // SAFETY: `vf` is live and referenced; setting the bus-master bit in its command
            // register is what its DMA needs, and no driver of its own races with it.
            unsafe { bindings::pci_set_master(vf) };
            // SAFETY: As above: the VF's BAR0 decodes once its memory space is enabled.
            unsafe { ffi::vf_memory_on(vf) };
            // SAFETY: `vf` is live and referenced; its resources were assigned when SR-IOV
            // was enabled.
            let bar = unsafe { (*vf).resource[0].start };
            // SAFETY: `vf` is live and referenced; `get_device` takes a reference of its own.
            let d = unsafe { device::Device::get_device(&raw mut (*vf).dev) };
            // SAFETY: The lookup's reference, dropped once the device holds its own.
            unsafe { bindings::pci_dev_put(vf) };
            f.vfs.push(d, GFP_KERNEL)?;
            f.doorbells.push(bar, GFP_KERNEL)?;
        }
        Ok(f)
    }

    /// The device each context's DMA is issued as, by context index.
    pub(crate) fn devices(&self) -> &[ARef<device::Device>] {
        &self.vfs
    }

    /// The physical address of each context's doorbell page (its VF's BAR0), by context index.
    pub(crate) fn doorbells(&self) -> &[u64] {
        &self.doorbells
    }

    /// Disable the virtual functions: from the physical function's unbind (the PCI core checks
    /// that SR-IOV is off when `remove` returns), once no process holds a context. The
    /// references to the VFs stay valid until drop; nothing uses them for DMA any more.
    pub(crate) fn disable(&self) {
        if self.enabled.swap(false, Ordering::AcqRel) {
            // `pci_disable_sriov_remove` (kernel patch 0004) takes the PCI core's rescan/remove
            // lock unless the PF's own removal holds it.
            // SAFETY: `pf` is the bound PF, a valid `pci_dev` (its unbind or failed probe runs);
            // SR-IOV was enabled by `enable` and not disabled since (`enabled`).
            unsafe { bindings::pci_disable_sriov_remove(self.pf) };
        }
    }
}

impl Drop for Functions {
    fn drop(&mut self) {
        // A failed probe: unbind did not run.
        self.disable();
    }
}
