// SPDX-License-Identifier: GPL-2.0-only

//! The engine's hardware operations: the engine as a whole ([`Engine`]: identification, the
//! interrupt summary, reset) and one context of it behind the small [`Hw`] trait ([`Context`],
//! and for KUnit a fake one, fake.rs). A context is what one process drives: its channels, its
//! interrupt status, and the device its DMA is issued as (on PCI its SR-IOV virtual function,
//! so its own StreamID and IOMMU group). Register values stay typed from the `register!` map
//! (regs.rs) to the MMIO access; the core's enums name the field values.
//!
//! With a kernel queue (register map 2.2, kqueue.rs), the [`Hw`] channels of a context are
//! the queue's slots: COPY's transfers are descriptors, their ends completions, and a slot in
//! fault-wait is the engine channel whose ORIGIN and WRID name it. Without one they are the
//! engine's channels, STARTed by registers. The user-level queue's registers are ctxqueue.rs.
//!
//! Nothing here locks but the kernel queue's own leaf spinlock: callers serialise channel
//! commands under `Process::inner` (process.rs).

use crate::exanest_core::{abi, idmap::IdMap};
use crate::exanest_core::{
    faultsm::Source,
    kqueue::Slot,
    regs::{self as map, Error as ChError, FaultCause, State},
};
use crate::kqueue::KernelQueue;
use crate::netregs;
use crate::regs as hw;
use kernel::{
    device,
    io::{mem::DevresIoMem, register::Array, Io, IoCapable, IoLoc, MmioBackend, Region},
    new_spinlock, pci,
    prelude::*,
    sync::{aref::ARef, Arc, SpinLock},
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

/// A channel in fault-wait: what it reports, and where its transfer came from (ORIGIN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EngineFault {
    /// The channel's report.
    pub(crate) report: ChannelReport,
    /// Where the transfer came from.
    pub(crate) source: Source,
}

/// What ends a fault on the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// RESUME: retransmit from the faulting offset.
    Resume,
    /// NACK: end the transfer; a queue transfer's completion, or a remote op's sender, gets
    /// `status` (a negative errno, or a `cqe_status` value).
    Nack { status: i32 },
}

/// The operations on one context that the driver uses: an FPGA, the QEMU model, or the KUnit
/// fake. Channel numbers are the context's own (0 to `channels() - 1`). The COPY path's
/// channels (`start`, `report`) are the kernel queue's slots when the context has one
/// (engine.rs's header); faults are the engine channels' own (`fault`, `answer`), whatever
/// their transfer's origin (fault/).
pub(crate) trait Hw: Send + Sync {
    /// Channels the context has.
    fn channels(&self) -> u32;
    /// Program channel `n` and start it, with its interrupt enabled.
    fn start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result;
    /// The channel's state and latches.
    fn report(&self, n: u32) -> Result<ChannelReport>;
    /// Engine channel `n`'s fault, if it is in fault-wait.
    fn fault(&self, n: u32) -> Result<Option<EngineFault>>;
    /// End engine channel `n`'s fault with `cmd`. Refused (EINVAL, or ENODEV once the device
    /// is gone) when it cannot be written; a channel no longer in fault-wait ignores it.
    fn answer(&self, n: u32, cmd: Command) -> Result;
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

/// One engine's registers and what its identification registers said at probe.
pub(crate) struct Engine {
    pub(crate) regs: Regs,
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
    /// The network node id (register map 2.3), `abi::NO_NODE` without a port (remote.rs).
    pub(crate) node: u32,
    /// The endpoints processes hold (remote.rs).
    pub(crate) endpoints: IdMap<4>,
    /// The remote key table entries regions hold (remote.rs).
    pub(crate) rkeys: IdMap<4>,
    /// Serialises the network tables' register windows (select, fields, commit): a leaf lock.
    pub(crate) net_win: Arc<SpinLock<()>>,
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
        let node = if caps.net() {
            regs.read(netregs::NET_NODE)?.id().get()
        } else {
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
        // An MMIO write fails only for an offset past the BAR, which probe checked.
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
    /// The context's kernel queue, which COPY's transfers take (register map 2.2 on PCI).
    pub(crate) kq: Option<Pin<KBox<KernelQueue>>>,
}

impl Context {
    /// Channel `n` of this context as a register array index: EINVAL beyond its channels.
    pub(crate) fn ch(&self, n: u32) -> Result<usize> {
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

    pub(crate) fn ctx(&self) -> usize {
        self.index as usize
    }

    /// The engine channel in fault-wait for the kernel queue's slot `k`: the one whose ORIGIN
    /// names the kernel queue and whose WRID is `k` (kqueue.rs).
    fn kq_channel(&self, k: u32) -> Option<u32> {
        let r = &self.engine.regs;
        (0..self.engine.channels).find(|&n| {
            let Ok(c) = self.ch(n) else { return false };
            let at = |c| Some((hw::CH_STATUS::try_at(c)?, hw::CH_ORIGIN::try_at(c)?));
            let Some((st, o)) = at(c) else { return false };
            r.read(st).is_ok_and(|st| st.state() == State::Fault)
                && r.read(o).is_ok_and(|o| o.queue() && o.kernel())
                && hw::CH_WRID_LO::try_at(c)
                    .and_then(|w| r.read(w).ok())
                    .is_some_and(|w| w.value().get() == k)
        })
    }

    /// Program engine channel `n` and start it, with its interrupt enabled.
    fn ch_start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result {
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

    /// Retransmit engine channel `n`'s transfer in fault-wait from its faulting offset.
    pub(crate) fn ch_resume(&self, n: u32) -> Result {
        let (ctrl, c) = self.ctrl(n)?;
        self.write_ctrl(c, ctrl.with_resume(true))
    }

    /// End engine channel `n`'s busy or faulted transfer.
    pub(crate) fn ch_nack(&self, n: u32) -> Result {
        let (ctrl, c) = self.ctrl(n)?;
        self.write_ctrl(c, ctrl.with_nack(true))
    }

    /// Engine channel `n`'s state and latches.
    pub(crate) fn ch_report(&self, n: u32) -> Result<ChannelReport> {
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
}

impl Hw for Context {
    fn channels(&self) -> u32 {
        self.engine.channels
    }

    // With a kernel queue (register map 2.2), channel `n` of the COPY path is the queue's slot
    // `n` (kqueue.rs); without one, it is engine channel `n`, STARTed by registers.
    fn start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result {
        match &self.kq {
            Some(q) => q.start(self, n, src, dst, len),
            None => self.ch_start(n, src, dst, len),
        }
    }

    fn report(&self, n: u32) -> Result<ChannelReport> {
        let Some(q) = &self.kq else {
            return self.ch_report(n);
        };
        let quiet = |state| ChannelReport {
            state,
            error: ChError::None,
            done_bytes: 0,
            fault_addr: 0,
            fault_write: false,
            fault_cause: FaultCause::Translation,
        };
        match q.slot(self, n) {
            Slot::Ended(e) => {
                let (state, error) = e.report();
                Ok(ChannelReport {
                    error,
                    done_bytes: e.bytes,
                    fault_addr: e.fault_addr,
                    ..quiet(state)
                })
            }
            Slot::Busy => match self.kq_channel(n) {
                Some(c) => self.ch_report(c),
                None => Ok(quiet(State::Busy)),
            },
            Slot::Idle => Ok(quiet(State::Idle)),
        }
    }

    fn fault(&self, n: u32) -> Result<Option<EngineFault>> {
        let report = self.ch_report(n)?;
        if report.state != State::Fault {
            return Ok(None);
        }
        let c = self.ch(n)?;
        let r = &self.engine.regs;
        let o = r.read(hw::CH_ORIGIN::try_at(c).ok_or(EINVAL)?)?;
        let source = if o.net_rx() {
            let i = netregs::net_ch(self.ctx(), n as usize).ok_or(EINVAL)?;
            let src = r.read(netregs::CH_NET_SRC::try_at(i).ok_or(EINVAL)?)?;
            let opid = r.read(netregs::CH_NET_OPID::try_at(i).ok_or(EINVAL)?)?;
            Source::NetRx {
                src: src.value().get(),
                opid: opid.value().get(),
            }
        } else if o.queue() && o.kernel() {
            let wrid = r.read(hw::CH_WRID_LO::try_at(c).ok_or(EINVAL)?)?;
            Source::Kernel {
                slot: wrid.value().get(),
            }
        } else if o.queue() {
            Source::Queue {
                index: o.sq_index().get(),
            }
        } else {
            Source::Start
        };
        Ok(Some(EngineFault { report, source }))
    }

    fn answer(&self, n: u32, cmd: Command) -> Result {
        match cmd {
            Command::Resume => self.ch_resume(n),
            Command::Nack { status } => self.nack_with(n, status),
        }
    }

    fn take_irq_status(&self) -> u32 {
        let at = || hw::CTX_IRQ_STATUS::try_at(self.ctx());
        let Some(Ok(st)) = at().map(|a| self.engine.regs.read(a)) else {
            return 0;
        };
        // The status's fields, and nothing the map does not define.
        let seen = hw::CTX_IRQ_STATUS::zeroed()
            .with_channels(st.channels())
            .with_cq(st.cq())
            .with_qerr(st.qerr())
            .with_kcq(st.kcq())
            .with_kqerr(st.kqerr());
        if let (true, Some(a)) = (seen.into_raw() != 0, at()) {
            // Write-one-to-clear exactly the bits seen (an MMIO write fails only for an
            // offset past the BAR, which probe checked).
            let _ = self.engine.regs.write(a, seen);
        }
        seen.into_raw()
    }

    fn reset(&self) {
        if let Some(at) = hw::CTX_CTRL::try_at(self.ctx()) {
            // An MMIO write fails only for an offset past the BAR, which probe checked.
            let _ = self
                .engine
                .regs
                .write(at, hw::CTX_CTRL::zeroed().with_quiesce(true));
        }
        if let Some(q) = &self.kq {
            q.reset();
        }
    }
}
