// SPDX-License-Identifier: GPL-2.0-only

//! The engine's hardware operations: the engine as a whole ([`Engine`]: identification, the
//! interrupt summary, reset) and one context of it behind the small [`Hw`] trait ([`Context`],
//! and for KUnit a fake one, fake.rs). A context is what one process drives: its channels, its
//! interrupt status, and the device its DMA is issued as (on PCI its SR-IOV virtual function,
//! so its own StreamID and IOMMU group). Register values stay typed from the `register!` map
//! (regs.rs) to the MMIO access; the core's enums name the field values.
//!
//! Nothing here locks: callers serialise channel commands under `Process::inner` (process.rs).

use crate::exanest_core::regs::{self as map, Error as ChError, FaultCause, State};
use crate::regs as hw;
use kernel::{
    device,
    io::{mem::DevresIoMem, register::Array, Io, IoCapable, IoLoc, MmioBackend, Region},
    pci,
    prelude::*,
    sync::{aref::ARef, Arc},
};

/// Size of the register window.
pub(crate) const BAR0_SIZE: usize = map::MMIO_SIZE;

/// What a channel reports when it stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChannelReport {
    /// STATUS.state.
    pub(crate) state: State,
    /// STATUS.error (meaningful in [`State::Error`]).
    pub(crate) error: ChError,
    /// Bytes of the transfer already copied.
    pub(crate) done_bytes: u32,
    /// IOVA of the faulting access (meaningful in [`State::Fault`]).
    pub(crate) fault_addr: u64,
    /// The fault was on the destination (a write).
    pub(crate) fault_write: bool,
    /// Why the access faulted.
    pub(crate) fault_cause: FaultCause,
}

/// The operations on one context that the driver uses: an FPGA, the QEMU model, or the KUnit
/// fake. Channel numbers are the context's own (0 to `channels() - 1`).
pub(crate) trait Hw: Send + Sync {
    /// Channels the context has.
    fn channels(&self) -> u32;
    /// Program channel `n` and start it, with its interrupt enabled.
    fn start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result;
    /// Retransmit a transfer in fault-wait from its faulting offset.
    fn resume(&self, n: u32) -> Result;
    /// End a busy or faulted transfer (it then reports [`ChError::Aborted`]).
    fn nack(&self, n: u32) -> Result;
    /// The channel's state and latches.
    fn report(&self, n: u32) -> Result<ChannelReport>;
    /// Read and acknowledge the context's interrupt status (bit n = channel n; 2.1: bit 8 the
    /// completion queue event, bit 9 the queue error, `map::ctx_irq`).
    fn take_irq_status(&self) -> u32;
    /// Stop every channel of the context (quiesce): no DMA of the context follows.
    fn reset(&self);
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

/// One engine's registers and what its identification registers said at probe.
pub(crate) struct Engine {
    regs: Regs,
    /// Channels per context.
    pub(crate) channels: u32,
    /// Contexts.
    pub(crate) contexts: u32,
    /// Contexts are SR-IOV virtual functions (else the one context is the device itself).
    pub(crate) sriov: bool,
    /// Largest transfer.
    pub(crate) max_len: u32,
    /// VERSION register.
    pub(crate) version: hw::VERSION,
    /// Modelled bandwidth (MB/s) and latency (ns), when CAPS.timing says they mean something.
    pub(crate) timing: Option<(u32, u32)>,
}

impl Engine {
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
        Ok(Engine {
            regs,
            channels,
            contexts,
            sriov: caps.sriov(),
            max_len,
            version,
            timing,
        })
    }

    /// Contexts with interrupt status (bit c = context c).
    pub(crate) fn irq_summary(&self) -> u64 {
        let lo = self
            .regs
            .read(hw::IRQ_SUMMARY_LO)
            .map_or(0, |v| v.contexts().get());
        let hi = self
            .regs
            .read(hw::IRQ_SUMMARY_HI)
            .map_or(0, |v| v.contexts().get());
        u64::from(lo) | (u64::from(hi) << 32)
    }

    /// Stop every channel of every context.
    pub(crate) fn reset(&self) {
        let _ = self
            .regs
            .write((), hw::RESET::zeroed().with_magic(map::RESET_MAGIC));
    }
}

/// One context of an engine: its registers, and the device its DMA is issued as, to which its
/// process's IOMMU domain is attached.
pub(crate) struct Context {
    /// The engine.
    pub(crate) engine: Arc<Engine>,
    /// The context's index.
    pub(crate) index: u32,
    /// The device the context's DMA is issued as: its virtual function, or the engine itself.
    pub(crate) dev: ARef<device::Device>,
    /// Physical address of the context's doorbell page (its VF's BAR0), which user space maps
    /// to drive the context's user-level queue; `None` without SR-IOV.
    pub(crate) doorbell: Option<u64>,
}

impl Context {
    /// Channel `n` of this context as a register array index: EINVAL beyond its channels.
    fn ch(&self, n: u32) -> Result<usize> {
        if n >= self.engine.channels {
            return Err(EINVAL);
        }
        map::ch_index(self.index as usize, n as usize).ok_or(EINVAL)
    }

    /// `CH_CTRL` of channel `n` with only the interrupt enable set.
    fn ctrl(&self, n: u32) -> Result<(hw::CH_CTRL, usize)> {
        Ok((hw::CH_CTRL::zeroed().with_irq_en(true), self.ch(n)?))
    }

    fn write_ctrl(&self, c: usize, v: hw::CH_CTRL) -> Result {
        self.engine
            .regs
            .write(hw::CH_CTRL::try_at(c).ok_or(EINVAL)?, v)
    }

    fn ctx(&self) -> usize {
        self.index as usize
    }

    /// Whether the engine has the user-level queue (register map 2.1 or later).
    pub(crate) fn has_queue(&self) -> bool {
        self.engine.version.minor().get() >= 1 && self.doorbell.is_some()
    }

    /// Configure and enable the context's user-level queue: rings at IOVAs `sq` and `cq`,
    /// `cfg` a [`map::q_cfg::encode`] value. Its state after the enable edge.
    pub(crate) fn queue_enable(&self, sq: u64, cq: u64, cfg: u32) -> Result<map::QStatus> {
        self.queue_program(sq, cq, cfg)?;
        self.engine.regs.write(
            hw::Q_CTRL::try_at(self.ctx()).ok_or(EINVAL)?,
            hw::Q_CTRL::zeroed().with_enable(true),
        )?;
        Ok(self.queue_status()?.0)
    }

    /// Write the queue's ring bases and `cfg`, taken at the next enable.
    fn queue_program(&self, sq: u64, cq: u64, cfg: u32) -> Result {
        let c = self.ctx();
        let r = &self.engine.regs;
        let (slo, shi) = map::split64(sq);
        let (clo, chi) = map::split64(cq);
        r.write(
            hw::SQ_BASE_LO::try_at(c).ok_or(EINVAL)?,
            hw::SQ_BASE_LO::zeroed().with_value(slo),
        )?;
        r.write(
            hw::SQ_BASE_HI::try_at(c).ok_or(EINVAL)?,
            hw::SQ_BASE_HI::zeroed().with_value(shi),
        )?;
        r.write(
            hw::CQ_BASE_LO::try_at(c).ok_or(EINVAL)?,
            hw::CQ_BASE_LO::zeroed().with_value(clo),
        )?;
        r.write(
            hw::CQ_BASE_HI::try_at(c).ok_or(EINVAL)?,
            hw::CQ_BASE_HI::zeroed().with_value(chi),
        )?;
        r.write(
            hw::Q_CFG::try_at(c).ok_or(EINVAL)?,
            hw::Q_CFG::from_raw(cfg),
        )
    }

    /// Whether the engine can move a user-level queue between contexts (register map 2.2):
    /// a queue holder's context may then be taken while its queue is idle.
    pub(crate) fn can_move_queue(&self) -> bool {
        self.has_queue() && self.engine.version.minor().get() >= 2
    }

    /// The queue's indices and whether its CQ event is armed.
    fn queue_indices(&self, st: &map::QStatus) -> Result<map::QueueIndices> {
        let c = self.ctx();
        let r = &self.engine.regs;
        Ok(map::QueueIndices {
            sq_tail: r
                .read(hw::Q_SQ_TAIL::try_at(c).ok_or(EINVAL)?)?
                .value()
                .get(),
            sq_head: r
                .read(hw::Q_SQ_HEAD::try_at(c).ok_or(EINVAL)?)?
                .value()
                .get(),
            cq_head: r
                .read(hw::Q_CQ_HEAD::try_at(c).ok_or(EINVAL)?)?
                .value()
                .get(),
            cq_tail: r
                .read(hw::Q_CQ_TAIL::try_at(c).ok_or(EINVAL)?)?
                .value()
                .get(),
            armed: st.armed,
        })
    }

    /// Whether the context's queue may move now ([`map::QueueIndices::movable`]), as a first
    /// look: the doorbell may still ring.
    pub(crate) fn queue_quiet(&self) -> bool {
        let Ok((st, _)) = self.queue_status() else {
            return false;
        };
        self.queue_indices(&st).is_ok_and(|idx| idx.movable(&st))
    }

    /// Stop the context's queue if it may move ([`map::QueueIndices::movable`]) and return
    /// where it was; `None` (and the queue runs on) if it may not. The caller has made sure no
    /// doorbell of the queue can ring meanwhile (its mapping is zapped), so nothing starts
    /// between the look and the stop.
    pub(crate) fn queue_park(&self) -> Result<Option<map::QueueIndices>> {
        let c = self.ctx();
        let r = &self.engine.regs;
        let st = map::QStatus::decode(r.read(hw::Q_STATUS::try_at(c).ok_or(EINVAL)?)?.into_raw());
        let idx = self.queue_indices(&st)?;
        if !idx.movable(&st) {
            return Ok(None);
        }
        r.write(hw::Q_CTRL::try_at(c).ok_or(EINVAL)?, hw::Q_CTRL::zeroed())?;
        Ok(Some(idx))
    }

    /// Enable the queue parked by [`Context::queue_park`] on this context, with the same rings
    /// and `cfg`, where it was. Its state after the enable edge.
    pub(crate) fn queue_restore(
        &self,
        sq: u64,
        cq: u64,
        cfg: u32,
        idx: &map::QueueIndices,
    ) -> Result<map::QStatus> {
        let c = self.ctx();
        let r = &self.engine.regs;
        self.queue_program(sq, cq, cfg)?;
        r.write(
            hw::Q_SQ_TAIL::try_at(c).ok_or(EINVAL)?,
            hw::Q_SQ_TAIL::zeroed().with_value(idx.sq_tail),
        )?;
        r.write(
            hw::Q_SQ_HEAD::try_at(c).ok_or(EINVAL)?,
            hw::Q_SQ_HEAD::zeroed().with_value(idx.sq_head),
        )?;
        r.write(
            hw::Q_CQ_HEAD::try_at(c).ok_or(EINVAL)?,
            hw::Q_CQ_HEAD::zeroed().with_value(idx.cq_head),
        )?;
        r.write(
            hw::Q_CQ_TAIL::try_at(c).ok_or(EINVAL)?,
            hw::Q_CQ_TAIL::zeroed().with_value(idx.cq_tail),
        )?;
        r.write(
            hw::Q_CTRL::try_at(c).ok_or(EINVAL)?,
            hw::Q_CTRL::from_raw(idx.restore_ctrl()),
        )?;
        Ok(self.queue_status()?.0)
    }

    /// The queue's state, and the IOVA its error is about.
    pub(crate) fn queue_status(&self) -> Result<(map::QStatus, u64)> {
        let c = self.ctx();
        let r = &self.engine.regs;
        let st = r.read(hw::Q_STATUS::try_at(c).ok_or(EINVAL)?)?;
        let lo = r.read(hw::Q_ERR_LO::try_at(c).ok_or(EINVAL)?)?;
        let hi = r.read(hw::Q_ERR_HI::try_at(c).ok_or(EINVAL)?)?;
        Ok((
            map::QStatus::decode(st.into_raw()),
            map::join64(lo.value().get(), hi.value().get()),
        ))
    }

    /// The SQ index (modulo 2^16) of the user-level queue's transfer channel `n` runs (or
    /// last ran); `None` for a START.
    pub(crate) fn origin(&self, n: u32) -> Result<Option<u32>> {
        let c = self.ch(n)?;
        let o = self
            .engine
            .regs
            .read(hw::CH_ORIGIN::try_at(c).ok_or(EINVAL)?)?;
        Ok(o.queue().then(|| o.sq_index().get()))
    }

    /// Have the engine post an event entry of `kind` in the queue's CQ: `count` in its bytes,
    /// `arg` as its `wr_id`. Returns whether the queue has lost an event since it was enabled
    /// (the CQ had no room).
    pub(crate) fn post_event(&self, kind: u8, count: u64, arg: u64) -> Result<bool> {
        let c = self.ctx();
        let r = &self.engine.regs;
        let (lo, hi) = map::split64(arg);
        r.write(
            hw::EVT_ARG_LO::try_at(c).ok_or(EINVAL)?,
            hw::EVT_ARG_LO::zeroed().with_value(lo),
        )?;
        r.write(
            hw::EVT_ARG_HI::try_at(c).ok_or(EINVAL)?,
            hw::EVT_ARG_HI::zeroed().with_value(hi),
        )?;
        r.write(
            hw::EVT_POST::try_at(c).ok_or(EINVAL)?,
            hw::EVT_POST::from_raw(map::evt_post::encode(kind, count)),
        )?;
        Ok(r.read(hw::Q_STATUS::try_at(c).ok_or(EINVAL)?)?.evt_lost())
    }

    /// NACK channel `n`'s queue transfer: its completion reports `status` (a negative errno).
    pub(crate) fn nack_with(&self, n: u32, status: i32) -> Result {
        let c = self.ch(n)?;
        self.engine.regs.write(
            hw::CH_NACK_STATUS::try_at(c).ok_or(EINVAL)?,
            hw::CH_NACK_STATUS::zeroed().with_value(status as u32),
        )?;
        self.nack(n)
    }
}

impl Hw for Context {
    fn channels(&self) -> u32 {
        self.engine.channels
    }

    fn start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result {
        let (ctrl, c) = self.ctrl(n)?;
        let (slo, shi) = map::split64(src);
        let (dlo, dhi) = map::split64(dst);
        let r = &self.engine.regs;
        let src_lo = hw::CH_SRC_LO::try_at(c).ok_or(EINVAL)?;
        let src_hi = hw::CH_SRC_HI::try_at(c).ok_or(EINVAL)?;
        let dst_lo = hw::CH_DST_LO::try_at(c).ok_or(EINVAL)?;
        let dst_hi = hw::CH_DST_HI::try_at(c).ok_or(EINVAL)?;
        let len_at = hw::CH_LEN::try_at(c).ok_or(EINVAL)?;
        r.write(src_lo, hw::CH_SRC_LO::zeroed().with_value(slo))?;
        r.write(src_hi, hw::CH_SRC_HI::zeroed().with_value(shi))?;
        r.write(dst_lo, hw::CH_DST_LO::zeroed().with_value(dlo))?;
        r.write(dst_hi, hw::CH_DST_HI::zeroed().with_value(dhi))?;
        r.write(len_at, hw::CH_LEN::zeroed().with_value(len))?;
        self.write_ctrl(c, ctrl.with_start(true))
    }

    fn resume(&self, n: u32) -> Result {
        let (ctrl, c) = self.ctrl(n)?;
        self.write_ctrl(c, ctrl.with_resume(true))
    }

    fn nack(&self, n: u32) -> Result {
        let (ctrl, c) = self.ctrl(n)?;
        self.write_ctrl(c, ctrl.with_nack(true))
    }

    fn report(&self, n: u32) -> Result<ChannelReport> {
        let c = self.ch(n)?;
        let r = &self.engine.regs;
        let st = r.read(hw::CH_STATUS::try_at(c).ok_or(EINVAL)?)?;
        let lo = r.read(hw::CH_FAULT_LO::try_at(c).ok_or(EINVAL)?)?;
        let hi = r.read(hw::CH_FAULT_HI::try_at(c).ok_or(EINVAL)?)?;
        let info = r.read(hw::CH_FAULT_INFO::try_at(c).ok_or(EINVAL)?)?;
        let done = r.read(hw::CH_DONE_BYTES::try_at(c).ok_or(EINVAL)?)?;
        Ok(ChannelReport {
            state: st.state(),
            error: st.error(),
            done_bytes: done.value().get(),
            fault_addr: map::join64(lo.value().get(), hi.value().get()),
            fault_write: info.write(),
            fault_cause: info.cause(),
        })
    }

    fn take_irq_status(&self) -> u32 {
        let at = || hw::CTX_IRQ_STATUS::try_at(self.ctx());
        let Some(Ok(st)) = at().map(|a| self.engine.regs.read(a)) else {
            return 0;
        };
        let pending =
            st.into_raw() & (map::ctx_irq::CHANNELS | map::ctx_irq::CQ | map::ctx_irq::QERR);
        if let (true, Some(a)) = (pending != 0, at()) {
            // Write-one-to-clear exactly the bits seen.
            let _ = self.engine.regs.write(a, st);
        }
        pending
    }

    fn reset(&self) {
        if let Some(at) = hw::CTX_CTRL::try_at(self.ctx()) {
            let _ = self
                .engine
                .regs
                .write(at, hw::CTX_CTRL::zeroed().with_quiesce(true));
        }
    }
}
