// SPDX-License-Identifier: GPL-2.0-only

//! One PLDMA engine instance: register access behind the [`Hw`] trait, and interrupt dispatch.
//!
//! Lock order (whole module): `Engine::state` → `Session::inner`. The interrupt thread takes
//! `Engine::state` only to find the owner, releases it, then takes `Session::inner`.

use crate::regs::{self, ch, ctrl, global, FaultInfo, Status};
use crate::session::Session;
use kernel::{
    device,
    io::{mem::DevresIoMem, Io},
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

impl Regs {
    fn read(&self, off: usize) -> Result<u32> {
        match self {
            Regs::Pci(b) => b.try_access().ok_or(ENODEV)?.try_read32(off),
            Regs::Platform(m) => m.try_access().ok_or(ENODEV)?.try_read32(off),
        }
    }

    fn write(&self, off: usize, val: u32) -> Result {
        match self {
            Regs::Pci(b) => b.try_access().ok_or(ENODEV)?.try_write32(val, off),
            Regs::Platform(m) => m.try_access().ok_or(ENODEV)?.try_write32(val, off),
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
        let id = regs.read(global::ID)?;
        let version = regs.read(global::VERSION)?;
        let caps = regs::Caps(regs.read(global::CAPS)?);
        let max_len = regs.read(global::MAX_LEN)?;
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

    fn chreg(&self, n: u32, reg: usize) -> Result<usize> {
        if n >= self.channels {
            return Err(EINVAL);
        }
        regs::ch_reg(n as usize, reg).ok_or(EINVAL)
    }

    fn write(&self, off: usize, val: u32) -> Result {
        self.regs.write(off, val)
    }

    fn read(&self, off: usize) -> Result<u32> {
        self.regs.read(off)
    }

    /// Stop every channel (teardown, unbind).
    pub(crate) fn reset(&self) {
        let _ = self.write(global::RESET, regs::RESET_MAGIC);
    }

    /// The device is going away: stop DMA and take the domain away from any session still
    /// open; its file then fails every call with ENODEV until it is closed.
    pub(crate) fn unbind(&self) {
        let mut st = self.state.lock();
        st.dead = true;
        if let Some(s) = st.owner.take() {
            s.teardown_locked();
        }
        self.reset();
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
        let (slo, shi) = regs::split64(src);
        let (dlo, dhi) = regs::split64(dst);
        self.write(self.chreg(n, ch::SRC_LO)?, slo)?;
        self.write(self.chreg(n, ch::SRC_HI)?, shi)?;
        self.write(self.chreg(n, ch::DST_LO)?, dlo)?;
        self.write(self.chreg(n, ch::DST_HI)?, dhi)?;
        self.write(self.chreg(n, ch::LEN)?, len)?;
        self.write(self.chreg(n, ch::CTRL)?, ctrl::START | ctrl::IRQ_EN)
    }

    fn nack(&self, n: u32) -> Result {
        self.write(self.chreg(n, ch::CTRL)?, ctrl::NACK | ctrl::IRQ_EN)
    }

    fn report(&self, n: u32) -> Result<ChannelReport> {
        Ok(ChannelReport {
            status: Status::decode(self.read(self.chreg(n, ch::STATUS)?)?),
            done_bytes: self.read(self.chreg(n, ch::DONE_BYTES)?)?,
            fault_addr: regs::join64(
                self.read(self.chreg(n, ch::FAULT_LO)?)?,
                self.read(self.chreg(n, ch::FAULT_HI)?)?,
            ),
            fault: FaultInfo::decode(self.read(self.chreg(n, ch::FAULT_INFO)?)?),
        })
    }

    fn take_irq_status(&self) -> u32 {
        let st = self.read(global::IRQ_STATUS).unwrap_or(0);
        if st != 0 {
            let _ = self.write(global::IRQ_STATUS, st);
        }
        st
    }

    fn irq_pending(&self) -> bool {
        self.read(global::IRQ_STATUS).is_ok_and(|st| st != 0)
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
