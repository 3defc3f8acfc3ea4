// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The ExaNeSt PLDMA register map, version 2.0: contexts (each an SR-IOV virtual function on
//! PCI, so its own StreamID), each with its channels.
//!
//! Mirrors `include/hw/exanest-pldma-regs.h` (used by the QEMU model) and
//! `Documentation/pldma-registers.rst`; a host test checks every constant against the C header.

/// PCI vendor ID of the engine model (Xilinx: the engine is FPGA logic).
pub const PCI_VENDOR_ID: u16 = 0x10ee;
/// PCI device ID of the engine model's physical function.
pub const PCI_DEVICE_ID: u16 = 0xe0da;
/// PCI device ID of a context's virtual function.
pub const PCI_VF_DEVICE_ID: u16 = 0xe0db;
/// Size of the register window (PF BAR0 or the devicetree `reg`).
pub const MMIO_SIZE: usize = 0x20000;
/// Size of a virtual function's BAR0 (the context's page).
pub const VF_MMIO_SIZE: usize = 0x1000;
/// SR-IOV: context n is function PF + `VF_OFFSET` + n * `VF_STRIDE`.
pub const VF_OFFSET: usize = 1;
/// SR-IOV: routing-ID distance between two contexts' functions.
pub const VF_STRIDE: usize = 1;

/// Global register offsets.
pub mod global {
    /// Read-only magic, [`super::ID_MAGIC`].
    pub const ID: usize = 0x000;
    /// Read-only `major << 16 | minor`.
    pub const VERSION: usize = 0x004;
    /// Read-only capabilities, see [`super::Caps`].
    pub const CAPS: usize = 0x008;
    /// Read-only largest accepted transfer length in bytes.
    pub const MAX_LEN: usize = 0x00c;
    /// Read-only: bit c set while context c (0-31) has interrupt status.
    pub const IRQ_SUMMARY_LO: usize = 0x010;
    /// Read-only modelled bandwidth in MB/s.
    pub const BANDWIDTH: usize = 0x014;
    /// Read-only modelled per-transfer latency in ns.
    pub const LATENCY: usize = 0x018;
    /// Read-write register without effect.
    pub const SCRATCH: usize = 0x01c;
    /// Write [`super::RESET_MAGIC`] to reset every channel of every context.
    pub const RESET: usize = 0x020;
    /// Read-only: bit c - 32 set while context c (32-63) has interrupt status.
    pub const IRQ_SUMMARY_HI: usize = 0x024;
    /// Read-only: bytes a channel moves per turn on the shared data path.
    pub const QUANTUM: usize = 0x028;
}

/// Value of the ID register ("EXNS").
pub const ID_MAGIC: u32 = 0x4558_4e53;
/// Register map major version this crate speaks.
pub const VERSION_MAJOR: u32 = 2;
/// Register map minor version this crate speaks.
pub const VERSION_MINOR: u32 = 0;
/// Value that resets the engine when written to [`global::RESET`].
pub const RESET_MAGIC: u32 = 0x5253_5421;

/// Offset of context 0's block.
pub const CTX_BASE: usize = 0x1000;
/// Distance between two contexts' blocks.
pub const CTX_STRIDE: usize = 0x400;
/// Most contexts the register map has room for.
pub const MAX_CONTEXTS: usize = 64;

/// Context register offsets, relative to the context's block.
pub mod ctx {
    /// Write-one-to-clear: bit n set when channel n of the context raised its interrupt.
    pub const IRQ_STATUS: usize = 0x000;
    /// Write-only command strobes, see [`super::ctx_ctrl`].
    pub const CTRL: usize = 0x004;
    /// Read-only, see [`super::ctx_status`].
    pub const STATUS: usize = 0x008;
}

/// Command strobes of [`ctx::CTRL`].
pub mod ctx_ctrl {
    /// Stop every channel of the context: each returns to IDLE with no interrupt, the
    /// context's interrupt status clears, and no DMA of the context follows the write.
    pub const QUIESCE: u32 = 1 << 0;
}

/// Bits of [`ctx::STATUS`].
pub mod ctx_status {
    /// A channel of the context is busy or in fault-wait.
    pub const ACTIVE: u32 = 1 << 0;
    /// The context's function is enabled, with bus mastering on.
    pub const FUNCTION: u32 = 1 << 1;
}

/// Absolute offset of register `reg` of context `c`, or `None` when out of range.
pub const fn ctx_reg(c: usize, reg: usize) -> Option<usize> {
    if c >= MAX_CONTEXTS || reg >= CH_BASE {
        None
    } else {
        Some(CTX_BASE + c * CTX_STRIDE + reg)
    }
}

/// Offset of channel 0's registers in a context's block.
pub const CH_BASE: usize = 0x100;
/// Distance between two channels' register blocks.
pub const CH_STRIDE: usize = 0x40;
/// Most channels a context has room for.
pub const MAX_CHANNELS: usize = 8;
// A context's channels fit in its block, after its registers.
const _: () = assert!(CH_BASE + MAX_CHANNELS * CH_STRIDE <= CTX_STRIDE);

/// Channel blocks between two contexts' first channels (the stride of the flat array of all
/// channels that [`ch_index`] indexes).
pub const CH_PER_CTX_STRIDE: usize = CTX_STRIDE / CH_STRIDE;

/// Virtual function BAR0 register offsets (a context's page).
pub mod vf {
    /// Read-only magic, [`super::VF_ID_MAGIC`].
    pub const ID: usize = 0x000;
    /// Read-only, as [`super::global::VERSION`].
    pub const VERSION: usize = 0x004;
    /// Read-only: the context's index.
    pub const CONTEXT: usize = 0x008;
}

/// Value of a virtual function's ID register ("EXNV").
pub const VF_ID_MAGIC: u32 = 0x4558_4e56;

/// Channel register offsets, relative to the channel's block.
pub mod ch {
    /// Source IOVA, low half.
    pub const SRC_LO: usize = 0x00;
    /// Source IOVA, high half.
    pub const SRC_HI: usize = 0x04;
    /// Destination IOVA, low half.
    pub const DST_LO: usize = 0x08;
    /// Destination IOVA, high half.
    pub const DST_HI: usize = 0x0c;
    /// Transfer length in bytes.
    pub const LEN: usize = 0x10;
    /// Command strobes and interrupt enable.
    pub const CTRL: usize = 0x14;
    /// Read-only state, error code and rejected flag.
    pub const STATUS: usize = 0x18;
    /// IOVA of the faulting access, low half.
    pub const FAULT_LO: usize = 0x1c;
    /// IOVA of the faulting access, high half.
    pub const FAULT_HI: usize = 0x20;
    /// Direction and cause of the last fault.
    pub const FAULT_INFO: usize = 0x24;
    /// Bytes copied so far in the current transfer.
    pub const DONE_BYTES: usize = 0x28;
    /// Faults taken by the current transfer.
    pub const FAULTS: usize = 0x2c;
}

/// Index of channel `n` of context `c` in the flat array of channel blocks that starts at
/// `CTX_BASE + CH_BASE` with stride `CH_STRIDE`, or `None` when out of range.
pub const fn ch_index(c: usize, n: usize) -> Option<usize> {
    if c >= MAX_CONTEXTS || n >= MAX_CHANNELS {
        None
    } else {
        Some(c * CH_PER_CTX_STRIDE + n)
    }
}

/// Absolute offset of register `reg` of channel `n` of context `c`, or `None` when out of range.
pub const fn ch_reg(c: usize, n: usize, reg: usize) -> Option<usize> {
    match ch_index(c, n) {
        Some(i) if reg < CH_STRIDE => Some(CTX_BASE + CH_BASE + i * CH_STRIDE + reg),
        _ => None,
    }
}

/// Capability bits of [`global::CAPS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps(pub u32);

impl Caps {
    /// Mask of the channel count.
    pub const NCHAN_MASK: u32 = 0xff;
    /// Fault-wait with resume and NACK.
    pub const RESUME: u32 = 1 << 8;
    /// Wired interrupt.
    pub const INTX: u32 = 1 << 9;
    /// BANDWIDTH and LATENCY are meaningful.
    pub const TIMING: u32 = 1 << 10;
    /// Contexts are SR-IOV virtual functions (else context 0 is the physical function).
    pub const SRIOV: u32 = 1 << 11;
    /// Shift of the context count.
    pub const NCTX_SHIFT: u32 = 16;
    /// Mask of the context count.
    pub const NCTX_MASK: u32 = 0xff << 16;

    /// Number of contexts, clamped to what the register map can address.
    pub const fn contexts(self) -> usize {
        let n = ((self.0 & Self::NCTX_MASK) >> Self::NCTX_SHIFT) as usize;
        if n > MAX_CONTEXTS {
            MAX_CONTEXTS
        } else {
            n
        }
    }

    /// Number of channels per context, clamped to what the register map can address.
    pub const fn channels(self) -> usize {
        let n = (self.0 & Self::NCHAN_MASK) as usize;
        if n > MAX_CHANNELS {
            MAX_CHANNELS
        } else {
            n
        }
    }

    /// Whether every bit of `flag` is set.
    pub const fn has(self, flag: u32) -> bool {
        self.0 & flag == flag
    }
}

/// Command strobes and flags of [`ch::CTRL`].
pub mod ctrl {
    /// Start the programmed transfer.
    pub const START: u32 = 1 << 0;
    /// Retry a transfer in fault-wait from its faulting offset.
    pub const RESUME: u32 = 1 << 1;
    /// End a busy or fault-waiting transfer with [`super::Error::Aborted`].
    pub const NACK: u32 = 1 << 2;
    /// All strobe bits.
    pub const STROBES: u32 = 0x7;
    /// Raise the channel's interrupt on DONE, FAULT and ERROR.
    pub const IRQ_EN: u32 = 1 << 8;
}

/// Channel state, bits 3:0 of [`ch::STATUS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Never started, or reset.
    Idle,
    /// Copying.
    Busy,
    /// Finished successfully.
    Done,
    /// Stopped on a fault; waiting for RESUME or NACK.
    Fault,
    /// Finished with an error.
    Error,
    /// A value this version does not know.
    Unknown(u8),
}

impl State {
    /// The state for the value of the STATUS.state field.
    pub const fn from_field(v: u8) -> Self {
        match v {
            0 => State::Idle,
            1 => State::Busy,
            2 => State::Done,
            3 => State::Fault,
            4 => State::Error,
            s => State::Unknown(s),
        }
    }

    /// The value of the STATUS.state field for this state.
    pub const fn field(self) -> u8 {
        match self {
            State::Idle => 0,
            State::Busy => 1,
            State::Done => 2,
            State::Fault => 3,
            State::Error => 4,
            State::Unknown(v) => v,
        }
    }
}

/// Error code, bits 15:8 of [`ch::STATUS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// No error.
    None,
    /// Length zero or above MAX_LEN.
    BadLen,
    /// An address range wraps past 2^64.
    BadAddr,
    /// Ended by NACK.
    Aborted,
    /// Bus mastering is off.
    NoMaster,
    /// Source and destination overlap.
    Overlap,
    /// A value this version does not know.
    Unknown(u8),
}

impl Error {
    /// The error for the value of the STATUS.error field.
    pub const fn from_field(v: u8) -> Self {
        match v {
            0 => Error::None,
            1 => Error::BadLen,
            2 => Error::BadAddr,
            3 => Error::Aborted,
            4 => Error::NoMaster,
            5 => Error::Overlap,
            e => Error::Unknown(e),
        }
    }

    /// The value of the STATUS.error field for this error.
    pub const fn field(self) -> u8 {
        match self {
            Error::None => 0,
            Error::BadLen => 1,
            Error::BadAddr => 2,
            Error::Aborted => 3,
            Error::NoMaster => 4,
            Error::Overlap => 5,
            Error::Unknown(v) => v,
        }
    }
}

/// A decoded [`ch::STATUS`] value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Channel state.
    pub state: State,
    /// Error code (meaningful in [`State::Error`]).
    pub error: Error,
    /// The last command was invalid in the state it found and was ignored.
    pub rejected: bool,
}

impl Status {
    /// Mask of the state field.
    pub const STATE_MASK: u32 = 0xf;
    /// Shift of the error field.
    pub const ERR_SHIFT: u32 = 8;
    /// Mask of the error field.
    pub const ERR_MASK: u32 = 0xff00;
    /// The rejected flag.
    pub const REJECTED: u32 = 1 << 16;

    /// Decode a raw STATUS value.
    pub const fn decode(raw: u32) -> Self {
        Status {
            state: State::from_field((raw & Self::STATE_MASK) as u8),
            error: Error::from_field(((raw & Self::ERR_MASK) >> Self::ERR_SHIFT) as u8),
            rejected: raw & Self::REJECTED != 0,
        }
    }

    /// Encode back to the raw register value (what the hardware would show).
    pub const fn encode(self) -> u32 {
        let s = self.state.field() as u32 & Self::STATE_MASK;
        let e = self.error.field() as u32;
        s | (e << Self::ERR_SHIFT) | if self.rejected { Self::REJECTED } else { 0 }
    }
}

/// What went wrong in the last fault, from [`ch::FAULT_INFO`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultCause {
    /// No translation in the IOMMU (the driver can resolve it).
    Translation,
    /// The access failed after translation.
    Bus,
    /// A value this version does not know.
    Unknown(u8),
}

impl FaultCause {
    /// The cause for the value of the FAULT_INFO.cause field.
    pub const fn from_field(v: u8) -> Self {
        match v {
            1 => FaultCause::Translation,
            2 => FaultCause::Bus,
            c => FaultCause::Unknown(c),
        }
    }

    /// The value of the FAULT_INFO.cause field for this cause.
    pub const fn field(self) -> u8 {
        match self {
            FaultCause::Translation => 1,
            FaultCause::Bus => 2,
            FaultCause::Unknown(v) => v,
        }
    }
}

/// A decoded [`ch::FAULT_INFO`] value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultInfo {
    /// The fault was on the destination (a write); otherwise on the source (a read).
    pub write: bool,
    /// Cause.
    pub cause: FaultCause,
}

impl FaultInfo {
    /// Direction bit.
    pub const WRITE: u32 = 1;
    /// Shift of the cause field.
    pub const CAUSE_SHIFT: u32 = 8;
    /// Mask of the cause field.
    pub const CAUSE_MASK: u32 = 0xff00;

    /// Decode a raw FAULT_INFO value.
    pub const fn decode(raw: u32) -> Self {
        FaultInfo {
            write: raw & Self::WRITE != 0,
            cause: FaultCause::from_field(((raw & Self::CAUSE_MASK) >> Self::CAUSE_SHIFT) as u8),
        }
    }
}

/// Split a 64-bit address into the (LO, HI) register values.
pub const fn split64(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

/// Join (LO, HI) register values into a 64-bit address.
pub const fn join64(lo: u32, hi: u32) -> u64 {
    (lo as u64) | ((hi as u64) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_roundtrip_every_known_value() {
        for s in 0..=4u32 {
            for e in 0..=5u32 {
                for r in [0, Status::REJECTED] {
                    let raw = s | (e << 8) | r;
                    assert_eq!(Status::decode(raw).encode(), raw, "raw {raw:#x}");
                }
            }
        }
    }

    #[test]
    fn status_decodes_fields() {
        let st = Status::decode(4 | (3 << 8) | (1 << 16));
        assert_eq!(st.state, State::Error);
        assert_eq!(st.error, Error::Aborted);
        assert!(st.rejected);
        assert_eq!(Status::decode(9).state, State::Unknown(9));
        assert_eq!(Status::decode(0x4200).error, Error::Unknown(0x42));
    }

    #[test]
    fn channel_offsets() {
        assert_eq!(ch_reg(0, 0, ch::SRC_LO), Some(0x1100));
        assert_eq!(ch_reg(0, 3, ch::STATUS), Some(0x1100 + 3 * 0x40 + 0x18));
        assert_eq!(
            ch_reg(2, 1, ch::LEN),
            Some(0x1000 + 2 * 0x400 + 0x100 + 0x40 + 0x10)
        );
        assert_eq!(ch_reg(0, MAX_CHANNELS, ch::SRC_LO), None);
        assert_eq!(ch_reg(MAX_CONTEXTS, 0, ch::SRC_LO), None);
        assert_eq!(ch_reg(0, 0, CH_STRIDE), None);
        // A context's channels stay inside its block, the last one inside the window.
        assert!(ch_reg(MAX_CONTEXTS - 1, MAX_CHANNELS - 1, ch::FAULTS).unwrap() + 4 <= MMIO_SIZE);
        assert_eq!(ctx_reg(1, ctx::CTRL), Some(0x1404));
        assert_eq!(ctx_reg(MAX_CONTEXTS, 0), None);
        assert_eq!(ctx_reg(0, CH_BASE), None);
    }

    #[test]
    fn caps_and_fault_info() {
        let c = Caps(4 | Caps::RESUME | Caps::INTX);
        assert_eq!(c.channels(), 4);
        assert!(c.has(Caps::RESUME | Caps::INTX));
        assert!(!c.has(Caps::TIMING));
        assert_eq!(Caps(0xff).channels(), MAX_CHANNELS);
        assert_eq!(Caps(4 | (16 << Caps::NCTX_SHIFT)).contexts(), 16);
        assert_eq!(Caps(Caps::NCTX_MASK).contexts(), MAX_CONTEXTS);
        let f = FaultInfo::decode(1 | (1 << 8));
        assert!(f.write);
        assert_eq!(f.cause, FaultCause::Translation);
        assert_eq!(FaultInfo::decode(2 << 8).cause, FaultCause::Bus);
    }

    #[test]
    fn split_join() {
        for v in [
            0u64,
            1,
            0xffff_ffff,
            0x1_0000_0000,
            u64::MAX,
            0x7f12_3456_7000,
        ] {
            let (lo, hi) = split64(v);
            assert_eq!(join64(lo, hi), v);
        }
    }
}
