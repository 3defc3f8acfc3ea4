// SPDX-License-Identifier: GPL-2.0-only

//! The engine as a whole: its register window ([`Regs`]), what its identification registers
//! say ([`Engine::probe`]), the interrupt summary, and reset. Its network port's tables are
//! net.rs; one context of it is context.rs.

use crate::exanest_core::regs as map;
use crate::exanest_core::{abi, idmap::IdMap};
use crate::hw::netregs;
use crate::hw::regs as hw;
use kernel::{
    device,
    io::{mem::DevresIoMem, Io, IoCapable, IoLoc, MmioBackend, Region},
    new_spinlock, pci,
    prelude::*,
    sync::{Arc, SpinLock},
};

/// Size of the register window.
pub(crate) const BAR0_SIZE: usize = map::MMIO_SIZE;

/// The register window: a PCI BAR, or the devicetree `reg` of the platform device. Both are
/// revoked when the device is unbound, after which every access fails with ENODEV.
pub(crate) enum Regs {
    /// BAR0 of the PCI function.
    Pci(pci::DevresBar<BAR0_SIZE>),
    /// The first memory resource of the platform device.
    Platform(DevresIoMem<BAR0_SIZE>),
}

/// The register window's type, for the `register!` locations.
type Window = Region<BAR0_SIZE>;

impl Regs {
    /// Read a register; ENODEV once the device is gone.
    pub(crate) fn read<T, L>(&self, loc: L) -> Result<T>
    where
        L: IoLoc<Window, T>,
        MmioBackend: IoCapable<L::IoType>,
    {
        match self {
            Regs::Pci(b) => b.try_access().ok_or(ENODEV)?.try_read(loc),
            Regs::Platform(m) => m.try_access().ok_or(ENODEV)?.try_read(loc),
        }
    }

    /// Write a register; ENODEV once the device is gone.
    pub(crate) fn write<T, L>(&self, loc: L, val: T) -> Result
    where
        L: IoLoc<Window, T>,
        MmioBackend: IoCapable<L::IoType>,
    {
        match self {
            Regs::Pci(b) => b.try_access().ok_or(ENODEV)?.try_write(loc, val),
            Regs::Platform(m) => m.try_access().ok_or(ENODEV)?.try_write(loc, val),
        }
    }
}

/// What the driver uses of each register map minor version (Documentation/pldma-registers.rst,
/// "Changes from ..."): every version gate of the driver names one of these
/// ([`Engine::has`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Feature {
    /// 2.1: the user-level queue.
    Queue,
    /// 2.2: a user-level queue that moves between contexts, and the kernel queue.
    MovableQueue,
    /// 2.5: the network port this driver speaks (64-bit keys; 2.3 and 2.4 are not used).
    Net,
    /// 2.6: the mailbox's event (poll, MBOX_WAIT).
    MboxEvent,
    /// 2.9: keys bound to an initiator.
    BoundKeys,
    /// 2.10: a channel in FAULT reads its transfer's range (map-ahead).
    FaultRange,
    /// 2.11: the fault record ring, and numbered faults.
    FaultRecords,
}

impl Feature {
    /// Every feature, oldest first.
    pub(crate) const ALL: [Feature; 7] = [
        Feature::Queue,
        Feature::MovableQueue,
        Feature::Net,
        Feature::MboxEvent,
        Feature::BoundKeys,
        Feature::FaultRange,
        Feature::FaultRecords,
    ];

    /// The minor version that brought it.
    pub(crate) const fn since(self) -> u32 {
        match self {
            Feature::Queue => 1,
            Feature::MovableQueue => 2,
            Feature::Net => 5,
            Feature::MboxEvent => 6,
            Feature::BoundKeys => 9,
            Feature::FaultRange => 10,
            Feature::FaultRecords => 11,
        }
    }
}

/// One engine's registers and what its identification registers said at probe.
pub(crate) struct Engine {
    pub(super) regs: Regs,
    /// Channels per context.
    pub(super) channels: u32,
    /// Contexts.
    pub(super) contexts: u32,
    /// Contexts are SR-IOV virtual functions (else the one context is the device itself).
    pub(super) sriov: bool,
    /// Largest transfer.
    pub(super) max_len: u32,
    /// VERSION register.
    pub(super) version: hw::VERSION,
    /// Modelled bandwidth (MB/s) and latency (ns), when CAPS.timing says they mean something.
    pub(super) timing: Option<(u32, u32)>,
    /// The network node id (register map 2.3), `abi::NO_NODE` without a port (remote.rs).
    pub(super) node: u32,
    /// The endpoints processes hold (remote.rs).
    pub(super) endpoints: IdMap<4>,
    /// The remote key table entries regions hold (remote.rs).
    pub(super) rkeys: IdMap<4>,
    /// Serialises the network tables' register windows (select, fields, commit): a leaf lock.
    pub(super) net_win: Arc<SpinLock<()>>,
}

impl Engine {
    /// Use at most `n` contexts (the `contexts` module parameter), before the engine is shared.
    pub(crate) fn limit_contexts(&mut self, n: u32) {
        self.contexts = self.contexts.min(n);
    }

    /// Channels per context.
    pub(crate) fn channels(&self) -> u32 {
        self.channels
    }

    /// Contexts.
    pub(crate) fn contexts(&self) -> u32 {
        self.contexts
    }

    /// Whether the contexts are SR-IOV virtual functions.
    pub(crate) fn sriov(&self) -> bool {
        self.sriov
    }

    /// The largest transfer, in bytes.
    pub(crate) fn max_len(&self) -> u32 {
        self.max_len
    }

    /// The VERSION register as probe read it.
    pub(crate) fn version(&self) -> hw::VERSION {
        self.version
    }

    /// Modelled bandwidth (MB/s) and latency (ns), if CAPS.timing.
    pub(crate) fn timing(&self) -> Option<(u32, u32)> {
        self.timing
    }

    /// The network node id, `abi::NO_NODE` without a port.
    pub(crate) fn node(&self) -> u32 {
        self.node
    }

    /// Whether the engine's register map has `f`.
    pub(crate) fn has(&self, f: Feature) -> bool {
        self.version.minor().get() >= f.since()
    }

    /// Identify the engine behind `regs`: ENODEV unless it is a PLDMA of this major version
    /// with channels and a wired interrupt.
    pub(crate) fn probe(regs: Regs, dev: &device::Device) -> Result<Self> {
        let id = regs.read(hw::ID)?;
        let version = regs.read(hw::VERSION)?;
        let caps = regs.read(hw::CAPS)?;
        let max_len = regs.read(hw::MAX_LEN)?.value().get();
        if id.value().get() != map::ID_MAGIC || version.major().get() != map::VERSION_MAJOR {
            dev_err!(
                dev,
                "not a PLDMA v{} engine (id {:#x} version {:#x})\n",
                map::VERSION_MAJOR,
                id.value().get(),
                version.into_raw()
            );
            return Err(ENODEV);
        }
        let channels = caps.channels().get();
        let contexts = caps.contexts().get();
        if channels == 0
            || channels as usize > map::MAX_CHANNELS
            || contexts == 0
            || contexts as usize > map::MAX_CONTEXTS
            || !caps.intx()
        {
            dev_err!(dev, "unusable engine capabilities {:#x}\n", caps.into_raw());
            return Err(ENODEV);
        }
        let timing = if caps.timing() {
            let bw = regs.read(hw::BANDWIDTH)?.mbps().get();
            let lat = regs.read(hw::LATENCY)?.ns().get();
            Some((bw, lat))
        } else {
            None
        };
        // The port's keys are 64-bit from register map 2.5 on (remote.rs); an older engine's
        // port is not used.
        let node = if caps.net() && version.minor().get() >= Feature::Net.since() {
            regs.read(netregs::NET_NODE)?.id().get()
        } else {
            if caps.net() {
                dev_warn!(
                    dev,
                    "network port of register map 2.{} not used: it needs 2.{}\n",
                    version.minor().get(),
                    Feature::Net.since()
                );
            }
            abi::NO_NODE
        };
        Ok(Engine {
            regs,
            channels,
            contexts,
            sriov: caps.sriov(),
            max_len,
            version,
            timing,
            node,
            endpoints: IdMap::new(),
            rkeys: IdMap::new(),
            net_win: Arc::pin_init(new_spinlock!((), "Engine::net_win"), GFP_KERNEL)?,
        })
    }

    /// Contexts with interrupt status (bit c = context c). The high word is read only when
    /// a context above 31 is in use: an MMIO read costs about as much as a hundred
    /// instructions on the fault path (more over PCIe), and most engines have fewer.
    pub(crate) fn irq_summary(&self) -> u64 {
        let lo = self
            .regs
            .read(hw::IRQ_SUMMARY_LO)
            .map_or(0, |v| v.contexts().get());
        if self.contexts <= 32 {
            return u64::from(lo);
        }
        let hi = self
            .regs
            .read(hw::IRQ_SUMMARY_HI)
            .map_or(0, |v| v.contexts().get());
        u64::from(lo) | (u64::from(hi) << 32)
    }

    /// Stop every channel of every context.
    pub(crate) fn reset(&self) {
        // An MMIO write fails only for an offset past the BAR, which probe checked.
        let _ = self
            .regs
            .write((), hw::RESET::zeroed().with_magic(map::RESET_MAGIC));
    }
}
