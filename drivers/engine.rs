// SPDX-License-Identifier: GPL-2.0-only

//! One PLDMA engine instance: register access behind the [`Hw`] trait, and interrupt dispatch.
//!
//! Lock order (whole module): `Engine::state` → `Session::inner`. The interrupt thread takes
//! `Engine::state` only to find the owner, releases it, then takes `Session::inner`.

use crate::hwregs as hw;
use crate::regs::{self, FaultInfo, Status};
use crate::session::Session;
use kernel::{
    device,
    io::{mem::DevresIoMem, register::Array, Io, IoCapable, IoLoc, MmioBackend, Region},
    irq, pci,
    prelude::*,
    sync::aref::ARef,
    sync::new_mutex,
    sync::Arc,
    sync::Mutex,
};

/// Size of the register window.
pub(crate) const BAR0_SIZE: usize = regs::MMIO_SIZE;

/// What a channel reports when it stops.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChannelReport {
    pub(crate) status: Status,
    pub(crate) done_bytes: u32,
    pub(crate) fault_addr: u64,
    pub(crate) fault: FaultInfo,
}

/// The engine operations the driver uses (an FPGA, the QEMU model, or a KUnit fake).
pub(crate) trait Hw: Send + Sync {
    /// Program channel `n` and start it, with its interrupt enabled.
    fn start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result;
    /// Retransmit a transfer in fault-wait from its faulting offset.
    fn resume(&self, n: u32) -> Result;
    /// End a busy or faulted transfer.
    fn nack(&self, n: u32) -> Result;
    /// The channel's state and latches.
    fn report(&self, n: u32) -> Result<ChannelReport>;
    /// Read and acknowledge the interrupt status (bit n = channel n).
    fn take_irq_status(&self) -> u32;
    /// Whether any interrupt is pending, without acknowledging it.
    fn irq_pending(&self) -> bool;
}

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
    fn read<T, L>(&self, loc: L) -> Result<T>
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
    fn write<T, L>(&self, loc: L, val: T) -> Result
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

/// Who owns the engine.
pub(crate) struct EngineState {
    /// The session of the process that has the engine open.
    pub(crate) owner: Option<Arc<Session>>,
    /// The device is gone (unbound): no new sessions.
    pub(crate) dead: bool,
}

/// One engine instance, shared by the PCI driver data, its interrupt handler and open files.
#[pin_data]
pub(crate) struct Engine {
    regs: Regs,
    /// The device, for the IOMMU calls.
    pub(crate) dev: ARef<device::Device>,
    /// Channels.
    pub(crate) channels: u32,
    /// Largest transfer.
    pub(crate) max_len: u32,
    /// VERSION register.
    pub(crate) hw_version: u32,
    /// Instance number (the N of /dev/exanest-dmaN).
    pub(crate) index: u32,
    #[pin]
    pub(crate) state: Mutex<EngineState>,
}

impl Engine {
    pub(crate) fn new(
        regs: Regs,
        dev: ARef<device::Device>,
        index: u32,
    ) -> Result<impl PinInit<Self, Error>> {
        let id = regs.read(hw::ID)?.into_raw();
        let version = regs.read(hw::VERSION)?.into_raw();
        let caps = regs::Caps(regs.read(hw::CAPS)?.into_raw());
        let max_len = regs.read(hw::MAX_LEN)?.into_raw();
        if id != regs::ID_MAGIC || version >> 16 != regs::VERSION_MAJOR {
            dev_err!(
                dev,
                "not a PLDMA v{} engine (id {:#x} version {:#x})\n",
                regs::VERSION_MAJOR,
                id,
                version
            );
            return Err(ENODEV);
        }
        if caps.channels() == 0 || !caps.has(regs::Caps::INTX) {
            dev_err!(dev, "unusable engine capabilities {:#x}\n", caps.0);
            return Err(ENODEV);
        }
        Ok(try_pin_init!(Engine {
            regs,
            dev,
            channels: caps.channels() as u32,
            max_len,
            hw_version: version,
            index,
            state <- new_mutex!(EngineState { owner: None, dead: false }, "Engine::state"),
        }? Error))
    }

    /// Channel `n` as a register array index: EINVAL beyond the engine's channels.
    fn ch(&self, n: u32) -> Result<usize> {
        if n >= self.channels {
            return Err(EINVAL);
        }
        Ok(n as usize)
    }

    /// Stop every channel (teardown, unbind).
    pub(crate) fn reset(&self) {
        let _ = self.regs.write((), hw::RESET::from_raw(regs::RESET_MAGIC));
    }

    /// The device is going away: stop DMA and take the domain away from any session still
    /// open; its file then fails every call with ENODEV until it is closed.
    pub(crate) fn unbind(&self) {
        let (owner, notifiers) = {
            let mut st = self.state.lock();
            st.dead = true;
            let owner = st.owner.take();
            let notifiers = owner.as_ref().map(|s| s.teardown_locked());
            self.reset();
            (owner, notifiers)
        };
        if let (Some(s), Some(n)) = (owner, notifiers) {
            s.remove_notifiers(n);
        }
    }

    /// Dispatch an interrupt to the owning session.
    fn dispatch(&self, pending: u32) {
        let owner = self.state.lock().owner.clone();
        if let Some(s) = owner {
            s.on_interrupt(pending);
        }
    }
}

impl Hw for Engine {
    fn start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result {
        let c = self.ch(n)?;
        let (slo, shi) = regs::split64(src);
        let (dlo, dhi) = regs::split64(dst);
        let r = &self.regs;
        r.write(
            hw::CH_SRC_LO::try_at(c).ok_or(EINVAL)?,
            hw::CH_SRC_LO::from_raw(slo),
        )?;
        r.write(
            hw::CH_SRC_HI::try_at(c).ok_or(EINVAL)?,
            hw::CH_SRC_HI::from_raw(shi),
        )?;
        r.write(
            hw::CH_DST_LO::try_at(c).ok_or(EINVAL)?,
            hw::CH_DST_LO::from_raw(dlo),
        )?;
        r.write(
            hw::CH_DST_HI::try_at(c).ok_or(EINVAL)?,
            hw::CH_DST_HI::from_raw(dhi),
        )?;
        r.write(
            hw::CH_LEN::try_at(c).ok_or(EINVAL)?,
            hw::CH_LEN::from_raw(len),
        )?;
        let ctrl = hw::CH_CTRL::zeroed().with_start(true).with_irq_en(true);
        r.write(hw::CH_CTRL::try_at(c).ok_or(EINVAL)?, ctrl)
    }

    fn resume(&self, n: u32) -> Result {
        let c = self.ch(n)?;
        let ctrl = hw::CH_CTRL::zeroed().with_resume(true).with_irq_en(true);
        self.regs.write(hw::CH_CTRL::try_at(c).ok_or(EINVAL)?, ctrl)
    }

    fn nack(&self, n: u32) -> Result {
        let c = self.ch(n)?;
        let ctrl = hw::CH_CTRL::zeroed().with_nack(true).with_irq_en(true);
        self.regs.write(hw::CH_CTRL::try_at(c).ok_or(EINVAL)?, ctrl)
    }

    fn report(&self, n: u32) -> Result<ChannelReport> {
        let c = self.ch(n)?;
        let r = &self.regs;
        let status = r.read(hw::CH_STATUS::try_at(c).ok_or(EINVAL)?)?;
        let lo = r.read(hw::CH_FAULT_LO::try_at(c).ok_or(EINVAL)?)?;
        let hi = r.read(hw::CH_FAULT_HI::try_at(c).ok_or(EINVAL)?)?;
        let info = r.read(hw::CH_FAULT_INFO::try_at(c).ok_or(EINVAL)?)?;
        let done = r.read(hw::CH_DONE_BYTES::try_at(c).ok_or(EINVAL)?)?;
        Ok(ChannelReport {
            status: Status::decode(status.into_raw()),
            done_bytes: done.into_raw(),
            fault_addr: regs::join64(lo.into_raw(), hi.into_raw()),
            fault: FaultInfo::decode(info.into_raw()),
        })
    }

    fn take_irq_status(&self) -> u32 {
        let st = self.regs.read(hw::IRQ_STATUS).map_or(0, |v| v.into_raw());
        if st != 0 {
            let _ = self.regs.write((), hw::IRQ_STATUS::from_raw(st));
        }
        st
    }

    fn irq_pending(&self) -> bool {
        self.regs
            .read(hw::IRQ_STATUS)
            .is_ok_and(|v| v.into_raw() != 0)
    }
}

/// The engine's wired interrupt: a level-triggered line, shared, with the work in the thread.
pub(crate) struct IrqHandler {
    pub(crate) engine: Arc<Engine>,
}

impl irq::ThreadedHandler for IrqHandler {
    fn handle(&self) -> irq::ThreadedIrqReturn {
        if self.engine.irq_pending() {
            // IRQF_ONESHOT keeps the line masked until the thread has acknowledged it.
            irq::ThreadedIrqReturn::WakeThread
        } else {
            irq::ThreadedIrqReturn::None
        }
    }

    fn handle_threaded(&self) -> irq::IrqReturn {
        let pending = self.engine.take_irq_status();
        if pending == 0 {
            return irq::IrqReturn::None;
        }
        self.engine.dispatch(pending);
        irq::IrqReturn::Handled
    }
}
