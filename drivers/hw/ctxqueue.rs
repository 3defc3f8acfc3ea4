// SPDX-License-Identifier: GPL-2.0-only

//! A context's queue registers: the user-level queue's (register map 2.1; its indices, moving
//! it between contexts, 2.2) and the kernel queue's (2.2, whose rings kqueue.rs keeps). The
//! context itself, its channels and the [`Hw`](crate::hw::Hw) trait are engine.rs.
//!
//! Nothing here locks: callers hold the context's holder's `Process::inner` (process.rs).

use crate::exanest_core::regs as map;
use crate::hw::kqueue::KqRegs;
use crate::hw::regs as hw;
use crate::hw::{Context, Feature};
use kernel::{io::register::Array, prelude::*};

impl Context {
    /// Whether the engine has the user-level queue (register map 2.1 or later).
    pub(crate) fn has_queue(&self) -> bool {
        self.engine.has(Feature::Queue) && self.doorbell.is_some()
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
        self.has_queue() && self.engine.has(Feature::MovableQueue)
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

    /// NACK channel `n`'s queue transfer (in the fault `seq`, if given): its completion reports
    /// `status` (a negative errno).
    pub(crate) fn nack_with(&self, n: u32, status: i32, seq: Option<u8>) -> Result {
        let c = self.ch(n)?;
        self.engine.regs.write(
            hw::CH_NACK_STATUS::try_at(c).ok_or(EINVAL)?,
            hw::CH_NACK_STATUS::zeroed().with_value(status as u32),
        )?;
        self.ch_nack(n, seq)
    }
}

impl KqRegs for Context {
    fn kq_enable(&self, sq: u64, cq: u64, cfg: u32) -> Result {
        let c = self.ctx();
        let r = &self.engine.regs;
        let (slo, shi) = map::split64(sq);
        let (clo, chi) = map::split64(cq);
        let v = |x| hw::KQ_CFG::from_raw(x);
        r.write(
            hw::KQ_SQ_BASE_LO::try_at(c).ok_or(EINVAL)?,
            hw::KQ_SQ_BASE_LO::from_raw(slo),
        )?;
        r.write(
            hw::KQ_SQ_BASE_HI::try_at(c).ok_or(EINVAL)?,
            hw::KQ_SQ_BASE_HI::from_raw(shi),
        )?;
        r.write(
            hw::KQ_CQ_BASE_LO::try_at(c).ok_or(EINVAL)?,
            hw::KQ_CQ_BASE_LO::from_raw(clo),
        )?;
        r.write(
            hw::KQ_CQ_BASE_HI::try_at(c).ok_or(EINVAL)?,
            hw::KQ_CQ_BASE_HI::from_raw(chi),
        )?;
        r.write(hw::KQ_CFG::try_at(c).ok_or(EINVAL)?, v(cfg))?;
        r.write(
            hw::KQ_CTRL::try_at(c).ok_or(EINVAL)?,
            hw::KQ_CTRL::zeroed().with_enable(true),
        )?;
        if self.kq_failed() {
            return Err(EIO);
        }
        Ok(())
    }

    fn kq_doorbell(&self, tail: u32) -> Result {
        let at = hw::KQ_SQ_TAIL::try_at(self.ctx()).ok_or(EINVAL)?;
        self.engine.regs.write(at, hw::KQ_SQ_TAIL::from_raw(tail))
    }

    fn kq_cq_tail(&self) -> Result<u32> {
        let at = hw::KQ_CQ_TAIL::try_at(self.ctx()).ok_or(EINVAL)?;
        Ok(self.engine.regs.read(at)?.value().get())
    }

    fn kq_cq_head(&self, head: u32) -> Result {
        let at = hw::KQ_CQ_HEAD::try_at(self.ctx()).ok_or(EINVAL)?;
        self.engine.regs.write(at, hw::KQ_CQ_HEAD::from_raw(head))
    }

    fn kq_failed(&self) -> bool {
        hw::KQ_STATUS::try_at(self.ctx())
            .and_then(|at| self.engine.regs.read(at).ok())
            .is_none_or(|st| st.error())
    }

    fn kq_channels(&self) -> u32 {
        self.engine.channels
    }
}
