// SPDX-License-Identifier: GPL-2.0-only

//! The hardware: the engine as a whole ([`engine`]: identification, the interrupt summary,
//! reset, the network port's tables), one context of it behind the small [`Hw`] trait
//! ([`context`], and for KUnit a fake one, [`fake`]), a context's queues' registers
//! ([`ctxqueue`], [`kqueue`]: the kernel queue's rings), the register map in the kernel's
//! `register!` style ([`regs`], [`netregs`]), the contexts' SR-IOV functions ([`sriov`]) and the
//! network link's settings ([`link`]). A context is what one process drives: its channels, its
//! interrupt status, and the device its DMA is issued as (on PCI its SR-IOV virtual function,
//! so its own StreamID and IOMMU group). Register values stay typed from the `register!` map
//! to the MMIO access; the core's enums name the field values.
//!
//! Nothing here locks but the kernel queue's own leaf spinlock and the network port's table
//! window: callers serialise channel commands under `Process::inner` (process.rs).

pub(crate) mod context;
pub(crate) mod ctxqueue;
pub(crate) mod engine;
#[cfg(CONFIG_KUNIT)]
pub(crate) mod fake;
pub(crate) mod fring;
pub(crate) mod kqueue;
pub(crate) mod link;
pub(crate) mod net;
pub(crate) mod netregs;
pub(crate) mod ofctx;
pub(crate) mod regs;
pub(crate) mod sriov;

pub(crate) use context::Context;
pub(crate) use engine::{Engine, Feature};

use crate::exanest_core::{
    faultsm::Source,
    regs::{Error as ChError, FaultCause, State},
};
use kernel::prelude::*;

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

/// Where and why a channel in fault-wait faulted (FAULT_LO/HI and FAULT_INFO).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FaultReport {
    /// IOVA of the faulting access.
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
    pub(crate) report: FaultReport,
    /// Where the transfer came from.
    pub(crate) source: Source,
    /// The end of the faulting transfer's bytes in the faulting direction (register map 2.10:
    /// SRC or DST, and LEN, read in FAULT) for a queue transfer or a receiver fault, which the
    /// driver maps ahead to; 0 for none (a MAILBOX's ring slot); `u64::MAX` when the engine
    /// does not say (before 2.10), or for a copy (the driver knows its end).
    pub(crate) end: u64,
    /// The channel's number for this fault (2.11: `CH_STATUS.FAULT_SEQ`, or its record's),
    /// which the answer names; `None` before 2.11.
    pub(crate) seq: Option<u8>,
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
/// (context.rs's header); faults are the engine channels' own (`fault`, `answer`), whatever
/// their transfer's origin (fault/).
pub(crate) trait Hw: Send + Sync {
    /// Channels the context has.
    fn channels(&self) -> u32;
    /// Program channel `n` and start it, with its interrupt enabled.
    fn start(&self, n: u32, src: u64, dst: u64, len: u32) -> Result;
    /// The channel's state and latches.
    fn report(&self, n: u32) -> Result<ChannelReport>;
    /// Engine channel `n`'s fault, if it is in fault-wait. Every register read costs (55-200 ns
    /// of the fault path under -icount, about 1 us over PCIe): a context reads the channel's
    /// state first, and only what a fault needs after it.
    fn fault(&self, n: u32) -> Result<Option<EngineFault>>;
    /// Whether engine channel `n` is in fault-wait: [`Hw::fault`]'s answer without its
    /// report, for the interrupt's classification (a context reads one register instead of
    /// six or more).
    fn in_fault(&self, n: u32) -> Result<bool> {
        Ok(self.fault(n)?.is_some())
    }
    /// End engine channel `n`'s fault with `cmd`. Refused (EINVAL, or ENODEV once the device
    /// is gone) when it cannot be written; a channel no longer in fault-wait ignores it, and
    /// (2.11) one no longer in the fault numbered `seq`, if given.
    fn answer(&self, n: u32, cmd: Command, seq: Option<u8>) -> Result;
    /// Read and acknowledge the context's interrupt status (bit n = channel n; 2.1: bit 8 the
    /// completion queue event, bit 9 the queue error, `map::ctx_irq`).
    fn take_irq_status(&self) -> u32;
    /// Stop every channel of the context (quiesce): no DMA of the context follows.
    fn reset(&self);
}
