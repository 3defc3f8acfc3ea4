// SPDX-License-Identifier: GPL-2.0-only

//! One context of an engine behind the [`Hw`] trait: its channels' registers, its interrupt
//! status, and the device its DMA is issued as.
//!
//! With a kernel queue (register map 2.2, kqueue.rs), the [`Hw`] channels of the COPY path
//! are the queue's slots: COPY's transfers are descriptors, their ends completions. Without
//! one they are the engine's channels, STARTed by registers. Faults are always the engine
//! channels' own, with the ORIGIN of their transfer. The queues' registers are ctxqueue.rs.

use crate::exanest_core::frec::{self, FaultRecord};
use crate::exanest_core::{
    faultsm::Source,
    kqueue::Slot,
    regs::{self as map, Error as ChError, FaultCause, State},
};
use crate::hw::fring::FaultRing;
use crate::hw::kqueue::KernelQueue;
use crate::hw::netregs;
use crate::hw::regs as hw;
use crate::hw::{ChannelReport, Command, Engine, EngineFault, FaultReport, Feature, Hw};
use kernel::{
    device,
    io::register::Array,
    num::Bounded,
    prelude::*,
    sync::{aref::ARef, Arc},
};

/// One context of an engine: its registers, and the device its DMA is issued as, to which its
/// process's IOMMU domain is attached.
pub(crate) struct Context {
    /// The engine.
    pub(super) engine: Arc<Engine>,
    /// The context's index.
    pub(super) index: u32,
    /// The device the context's DMA is issued as: its virtual function, or the engine itself.
    pub(super) dev: ARef<device::Device>,
    /// Physical address of the context's doorbell page (its VF's BAR0), which user space maps
    /// to drive the context's user-level queue; `None` without SR-IOV.
    pub(super) doorbell: Option<u64>,
    /// The context's kernel queue, which COPY's transfers take (register map 2.2 on PCI).
    pub(super) kq: Option<Pin<KBox<KernelQueue>>>,
    /// The context's fault record ring (register map 2.11), enabled from the start and again
    /// after each QUIESCE.
    pub(super) fring: Option<Pin<KBox<FaultRing>>>,
}

impl Context {
    /// The end of the bytes that channel `c` (in FAULT) moves in the faulting direction (a
    /// write: its destination's; a read: its source's), as its SRC or DST and LEN read then.
    fn fault_end(&self, c: usize, write: bool) -> Result<u64> {
        let r = &self.engine.regs;
        let (lo, hi) = if write {
            let lo = r.read(hw::CH_DST_LO::try_at(c).ok_or(EINVAL)?)?;
            let hi = r.read(hw::CH_DST_HI::try_at(c).ok_or(EINVAL)?)?;
            (lo.value().get(), hi.value().get())
        } else {
            let lo = r.read(hw::CH_SRC_LO::try_at(c).ok_or(EINVAL)?)?;
            let hi = r.read(hw::CH_SRC_HI::try_at(c).ok_or(EINVAL)?)?;
            (lo.value().get(), hi.value().get())
        };
        let len = r.read(hw::CH_LEN::try_at(c).ok_or(EINVAL)?)?;
        let base = u64::from(hi) << 32 | u64::from(lo);
        Ok(base.saturating_add(u64::from(len.value().get())))
    }

    /// Context `index` of `engine`, issuing its DMA as `dev`, with its doorbell page at
    /// `doorbell`, its kernel queue `kq` and its fault record ring `fring`, if it has them
    /// (the ring is enabled here).
    pub(crate) fn new(
        engine: &Arc<Engine>,
        index: u32,
        dev: ARef<device::Device>,
        doorbell: Option<u64>,
        kq: Option<Pin<KBox<KernelQueue>>>,
        fring: Option<Pin<KBox<FaultRing>>>,
    ) -> Self {
        let ctx = Context {
            engine: engine.clone(),
            index,
            dev,
            doorbell,
            kq,
            fring,
        };
        ctx.enable_records();
        ctx
    }

    /// Enable the fault record ring, if the context has one (at creation, and after QUIESCE,
    /// which disables it). Should a register be out of reach, the ring stays disabled and
    /// faults are read from the channels' registers.
    fn enable_records(&self) {
        let Some(f) = &self.fring else {
            return;
        };
        let r = &self.engine.regs;
        let c = self.ctx();
        let (lo, hi) = map::split64(f.base());
        let (Some(b_lo), Some(b_hi), Some(cfg)) = (
            hw::FREC_BASE_LO::try_at(c),
            hw::FREC_BASE_HI::try_at(c),
            hw::FREC_CFG::try_at(c),
        ) else {
            return;
        };
        let log2 = Bounded::<u32, 5>::try_new(frec::LOG2).unwrap_or(Bounded::<u32, 5>::new::<1>());
        f.enabling();
        // MMIO writes fail only for an offset past the BAR, which probe checked (each of the
        // three).
        let _ = r.write(b_lo, hw::FREC_BASE_LO::zeroed().with_value(lo));
        // As above.
        let _ = r.write(b_hi, hw::FREC_BASE_HI::zeroed().with_value(hi));
        // As above: the ring is enabled from here on.
        let _ = r.write(
            cfg,
            hw::FREC_CFG::zeroed().with_log2(log2).with_enable(true),
        );
    }

    /// Whether another context of the engine raises the interrupt (one register read): a
    /// server polling for this context's next fault gives the line back then.
    pub(crate) fn others_raised(&self) -> bool {
        self.engine.irq_summary() & !(1u64 << (self.index % 64)) != 0
    }

    /// The channels with a fault recorded and not taken yet, as a mask, from the fault record
    /// ring alone (no register read); 0 without a ring.
    pub(crate) fn recorded_faults(&self) -> u32 {
        self.fring.as_ref().map_or(0, |f| {
            f.recorded_mask(self.engine.channels, |h| self.free_records(h))
        })
    }

    /// Write FREC_HEAD: the records before `head` are free.
    fn free_records(&self, head: u32) {
        if let Some(at) = hw::FREC_HEAD::try_at(self.ctx()) {
            // An MMIO write fails only for an offset past the BAR, which probe checked.
            let _ = self
                .engine
                .regs
                .write(at, hw::FREC_HEAD::zeroed().with_value(head));
        }
    }

    /// Where a faulting transfer came from, by its ORIGIN `o`; `net` gives a receiver fault's
    /// sender and op id, `slot` a kernel queue transfer's slot.
    fn source(
        o: hw::CH_ORIGIN,
        net: impl FnOnce() -> Result<(u32, u32)>,
        slot: impl FnOnce() -> Result<u32>,
    ) -> Result<Source> {
        Ok(if o.net_rx() {
            let (src, opid) = net()?;
            Source::NetRx { src, opid }
        } else if o.queue() && o.kernel() {
            Source::Kernel { slot: slot()? }
        } else if o.queue() {
            Source::Queue {
                index: o.sq_index().get(),
            }
        } else {
            Source::Start
        })
    }

    /// The fault `rec` recorded, as the registers would have said it.
    fn recorded_fault(&self, rec: &FaultRecord) -> Result<EngineFault> {
        let info = hw::CH_FAULT_INFO::from_raw(rec.info);
        let report = FaultReport {
            fault_addr: rec.addr,
            fault_write: info.write(),
            fault_cause: info.cause(),
        };
        // A kernel queue transfer's slot is its WRID, which the record has.
        let source = Self::source(
            hw::CH_ORIGIN::from_raw(rec.origin),
            || Ok((rec.net_src, rec.net_opid)),
            || u32::try_from(rec.wr_id).map_err(|_| EINVAL),
        )?;
        let end = match source {
            Source::Queue { .. } | Source::NetRx { .. } => rec.end,
            _ => u64::MAX,
        };
        Ok(EngineFault {
            report,
            source,
            end,
            seq: Some(rec.seq),
        })
    }

    /// The context's index in the engine.
    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    /// The device the context's DMA is issued as.
    pub(crate) fn dev(&self) -> &ARef<device::Device> {
        &self.dev
    }

    /// The physical address of the context's doorbell page, if it has one.
    pub(crate) fn doorbell(&self) -> Option<u64> {
        self.doorbell
    }

    /// The context's kernel queue, if it has one.
    pub(crate) fn kq(&self) -> Option<&KernelQueue> {
        self.kq.as_deref()
    }

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

    /// `CH_CTRL` of channel `n` with the interrupt enable set, naming (2.11) the fault `seq`.
    fn answer_ctrl(&self, n: u32, seq: Option<u8>) -> Result<(hw::CH_CTRL, usize)> {
        let (ctrl, c) = self.ctrl(n)?;
        Ok(match seq {
            Some(s) => (
                ctrl.with_seq_check(true)
                    .with_seq(Bounded::<u32, 8>::from(s)),
                c,
            ),
            None => (ctrl, c),
        })
    }

    /// Retransmit engine channel `n`'s transfer in fault-wait (the fault `seq`, if given) from
    /// its faulting offset.
    pub(crate) fn ch_resume(&self, n: u32, seq: Option<u8>) -> Result {
        let (ctrl, c) = self.answer_ctrl(n, seq)?;
        self.write_ctrl(c, ctrl.with_resume(true))
    }

    /// End engine channel `n`'s busy or faulted transfer (if `seq` is given: only while it is in
    /// that fault).
    pub(crate) fn ch_nack(&self, n: u32, seq: Option<u8>) -> Result {
        let (ctrl, c) = self.answer_ctrl(n, seq)?;
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

    // A fault recorded in the ring (2.11) needs no register read.
    fn in_fault(&self, n: u32) -> Result<bool> {
        if let Some(f) = &self.fring {
            if f.recorded(n, |h| self.free_records(h)) {
                return Ok(true);
            }
        }
        let st = self
            .engine
            .regs
            .read(hw::CH_STATUS::try_at(self.ch(n)?).ok_or(EINVAL)?)?;
        Ok(st.state() == State::Fault)
    }

    // From its record (2.11) if the ring has one; else from the registers, STATUS first: a
    // channel not in fault-wait (most of a scan's) costs one read. No DONE_BYTES: the fault
    // path does not need it.
    fn fault(&self, n: u32) -> Result<Option<EngineFault>> {
        if let Some(rec) = self
            .fring
            .as_ref()
            .and_then(|f| f.take(n, |h| self.free_records(h)))
        {
            return self.recorded_fault(&rec).map(Some);
        }
        let c = self.ch(n)?;
        let r = &self.engine.regs;
        let st = r.read(hw::CH_STATUS::try_at(c).ok_or(EINVAL)?)?;
        if st.state() != State::Fault {
            return Ok(None);
        }
        let seq = if self.engine.has(Feature::FaultRecords) {
            let s = st.fault_seq().get() as u8;
            if let Some(f) = &self.fring {
                f.taken_by_registers(n, s);
            }
            Some(s)
        } else {
            None
        };
        let lo = r.read(hw::CH_FAULT_LO::try_at(c).ok_or(EINVAL)?)?;
        let hi = r.read(hw::CH_FAULT_HI::try_at(c).ok_or(EINVAL)?)?;
        let info = r.read(hw::CH_FAULT_INFO::try_at(c).ok_or(EINVAL)?)?;
        let report = FaultReport {
            fault_addr: map::join64(lo.value().get(), hi.value().get()),
            fault_write: info.write(),
            fault_cause: info.cause(),
        };
        let o = r.read(hw::CH_ORIGIN::try_at(c).ok_or(EINVAL)?)?;
        // A kernel queue transfer's slot from ORIGIN's index, as the kernel queue posted it;
        // WRID (one more read) only when the index names no single running slot.
        let source = Self::source(
            o,
            || {
                let i = netregs::net_ch(self.ctx(), n as usize).ok_or(EINVAL)?;
                let src = r.read(netregs::CH_NET_SRC::try_at(i).ok_or(EINVAL)?)?;
                let opid = r.read(netregs::CH_NET_OPID::try_at(i).ok_or(EINVAL)?)?;
                Ok((src.value().get(), opid.value().get()))
            },
            || match self.kq().and_then(|q| q.slot_at(o.sq_index().get())) {
                Some(k) => Ok(k),
                None => Ok(r
                    .read(hw::CH_WRID_LO::try_at(c).ok_or(EINVAL)?)?
                    .value()
                    .get()),
            },
        )?;
        // A copy's end is the driver's own (channel.rs): the engine's is read only for the
        // transfers the driver did not start.
        let end = match source {
            Source::Queue { .. } | Source::NetRx { .. } if self.engine.has(Feature::FaultRange) => {
                self.fault_end(c, report.fault_write)?
            }
            _ => u64::MAX,
        };
        Ok(Some(EngineFault {
            report,
            source,
            end,
            seq,
        }))
    }

    fn answer(&self, n: u32, cmd: Command, seq: Option<u8>) -> Result {
        match cmd {
            Command::Resume => self.ch_resume(n, seq),
            Command::Nack { status } => self.nack_with(n, status, seq),
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
            .with_kqerr(st.kqerr())
            .with_mbox(st.mbox())
            .with_frec_lost(st.frec_lost());
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
        // QUIESCE disabled the fault record ring: its records go, and it starts again at 0.
        if let Some(f) = &self.fring {
            f.stopped();
        }
        self.enable_records();
    }
}
