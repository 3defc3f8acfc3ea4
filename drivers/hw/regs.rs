// SPDX-License-Identifier: GPL-2.0-only

//! The PLDMA register map (Documentation/pldma-registers.rst) in the kernel's `register!` style:
//! the only description of the registers the driver's MMIO accesses use (engine.rs).
//!
//! The offsets and field positions mirror `rust/exanest-core/src/regs.rs`, which the host tests
//! check against the C header of the QEMU model; the KUnit suite below checks that these
//! definitions agree with it.

use crate::exanest_core::regs::{Error as ChError, FaultCause, State};
use kernel::io::register;
use kernel::num::Bounded;
use kernel::prelude::*;

/// Field values as the core's enums, in both directions (`=>` fields below).
macro_rules! field_enum {
    ($ty:ty, $bits:literal) => {
        impl From<Bounded<u32, $bits>> for $ty {
            fn from(v: Bounded<u32, $bits>) -> Self {
                // A field of at most 8 bits: the cast keeps every bit.
                <$ty>::from_field(v.get() as u8)
            }
        }

        impl From<$ty> for Bounded<u32, $bits> {
            fn from(v: $ty) -> Self {
                Bounded::<u32, $bits>::try_new(u32::from(v.field()))
                    .unwrap_or(Bounded::<u32, $bits>::new::<0>())
            }
        }
    };
}
field_enum!(State, 4);
field_enum!(ChError, 8);
field_enum!(FaultCause, 8);

/// Distance between two channels' register blocks.
const STRIDE: usize = crate::exanest_core::regs::CH_STRIDE;
/// The channel arrays are flat over all contexts: channel n of context c is entry
/// `regs::ch_index(c, n)`, which leaves room for the context registers between two contexts'
/// channels.
const NCH: usize =
    crate::exanest_core::regs::MAX_CONTEXTS * crate::exanest_core::regs::CH_PER_CTX_STRIDE;
/// Distance between two contexts' blocks.
const CTX_STRIDE: usize = crate::exanest_core::regs::CTX_STRIDE;
/// Contexts the register map has room for.
const NCTX: usize = crate::exanest_core::regs::MAX_CONTEXTS;

register! {
    /// Identification magic, "EXNS".
    pub(crate) ID(u32) @ 0x000 {
        31:0 value;
    }

    /// Register map version.
    pub(crate) VERSION(u32) @ 0x004 {
        15:0 minor;
        31:16 major;
    }

    /// Capabilities.
    pub(crate) CAPS(u32) @ 0x008 {
        7:0 channels;
        8:8 resume => bool;
        9:9 intx => bool;
        10:10 timing => bool;
        11:11 sriov => bool;
        12:12 net => bool;
        13:13 mailbox => bool;
        14:14 frec => bool;
        23:16 contexts;
    }

    /// Largest transfer length in bytes.
    pub(crate) MAX_LEN(u32) @ 0x00c {
        31:0 value;
    }

    /// Contexts 0-31 with interrupt status (bit c = context c).
    pub(crate) IRQ_SUMMARY_LO(u32) @ 0x010 {
        31:0 contexts;
    }

    /// Modelled data-path bandwidth in MB/s (0: instantaneous); meaningful with CAPS.timing.
    pub(crate) BANDWIDTH(u32) @ 0x014 {
        31:0 mbps;
    }

    /// Modelled per-transfer latency in ns; meaningful with CAPS.timing.
    pub(crate) LATENCY(u32) @ 0x018 {
        31:0 ns;
    }

    /// Write the magic to reset every channel of every context.
    pub(crate) RESET(u32) @ 0x020 {
        31:0 magic;
    }

    /// Contexts 32-63 with interrupt status (bit c - 32 = context c).
    pub(crate) IRQ_SUMMARY_HI(u32) @ 0x024 {
        31:0 contexts;
    }

    /// Bytes a channel moves per turn on the shared data path.
    pub(crate) QUANTUM(u32) @ 0x028 {
        31:0 bytes;
    }

    /// The context's interrupt status, write one to clear: per channel, and (2.1) the
    /// completion queue event and the queue error.
    pub(crate) CTX_IRQ_STATUS(u32)[NCTX, stride = CTX_STRIDE] @ 0x1000 {
        7:0 channels;
        8:8 cq => bool;
        9:9 qerr => bool;
        10:10 kcq => bool;
        11:11 kqerr => bool;
        12:12 mbox => bool;
        13:13 frec_lost => bool;
    }

    /// Context commands.
    pub(crate) CTX_CTRL(u32)[NCTX, stride = CTX_STRIDE] @ 0x1004 {
        0:0 quiesce => bool;
    }

    /// Context status.
    pub(crate) CTX_STATUS(u32)[NCTX, stride = CTX_STRIDE] @ 0x1008 {
        0:0 active => bool;
        1:1 function => bool;
    }

    /// 2.1: send queue ring IOVA, low half.
    pub(crate) SQ_BASE_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x1010 {
        31:0 value;
    }

    /// 2.1: send queue ring IOVA, high half.
    pub(crate) SQ_BASE_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x1014 {
        31:0 value;
    }

    /// 2.1: completion queue ring IOVA, low half.
    pub(crate) CQ_BASE_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x1018 {
        31:0 value;
    }

    /// 2.1: completion queue ring IOVA, high half.
    pub(crate) CQ_BASE_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x101c {
        31:0 value;
    }

    /// 2.1: ring sizes and the queue's channels, latched at enable.
    pub(crate) Q_CFG(u32)[NCTX, stride = CTX_STRIDE] @ 0x1020 {
        4:0 log2_sq;
        12:8 log2_cq;
        23:16 channels;
    }

    /// 2.1: queue enable.
    pub(crate) Q_CTRL(u32)[NCTX, stride = CTX_STRIDE] @ 0x1024 {
        0:0 enable => bool;
        1:1 restore => bool;
        2:2 arm => bool;
    }

    /// 2.1: queue state and error.
    pub(crate) Q_STATUS(u32)[NCTX, stride = CTX_STRIDE] @ 0x1028 {
        0:0 enabled => bool;
        1:1 error => bool;
        2:2 evt_lost => bool;
        3:3 busy => bool;
        4:4 armed => bool;
        15:8 code;
    }

    /// 2.1: the IOVA the queue error is about, low half.
    pub(crate) Q_ERR_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x102c {
        31:0 value;
    }

    /// 2.1: the IOVA the queue error is about, high half.
    pub(crate) Q_ERR_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x1030 {
        31:0 value;
    }

    /// 2.1: post an event entry in the CQ: its count and kind.
    pub(crate) EVT_POST(u32)[NCTX, stride = CTX_STRIDE] @ 0x1034 {
        23:0 count;
        31:24 kind;
    }

    /// 2.1: the next event entry's `wr_id`, low half.
    pub(crate) EVT_ARG_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x1038 {
        31:0 value;
    }

    /// 2.1: the next event entry's `wr_id`, high half.
    pub(crate) EVT_ARG_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x103c {
        31:0 value;
    }

    /// 2.2: the queue's SQ producer index (set while the queue is disabled).
    pub(crate) Q_SQ_TAIL(u32)[NCTX, stride = CTX_STRIDE] @ 0x1040 {
        31:0 value;
    }

    /// 2.2: the queue's SQ consumer index.
    pub(crate) Q_SQ_HEAD(u32)[NCTX, stride = CTX_STRIDE] @ 0x1044 {
        31:0 value;
    }

    /// 2.2: the queue's CQ consumer index.
    pub(crate) Q_CQ_HEAD(u32)[NCTX, stride = CTX_STRIDE] @ 0x1048 {
        31:0 value;
    }

    /// 2.2: the queue's CQ producer index.
    pub(crate) Q_CQ_TAIL(u32)[NCTX, stride = CTX_STRIDE] @ 0x104c {
        31:0 value;
    }

    /// 2.2: the kernel queue's send and completion rings (addresses the PF issues), its
    /// configuration (as Q_CFG), enable, status (as Q_STATUS), doorbell (SQ_TAIL) and CQ
    /// indices.
    pub(crate) KQ_SQ_BASE_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x1060 { 31:0 value; }
    /// 2.2: high half.
    pub(crate) KQ_SQ_BASE_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x1064 { 31:0 value; }
    /// 2.2: the kernel queue's completion ring, low half.
    pub(crate) KQ_CQ_BASE_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x1068 { 31:0 value; }
    /// 2.2: high half.
    pub(crate) KQ_CQ_BASE_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x106c { 31:0 value; }
    /// 2.2: as Q_CFG.
    pub(crate) KQ_CFG(u32)[NCTX, stride = CTX_STRIDE] @ 0x1070 {
        4:0 log2_sq;
        12:8 log2_cq;
        23:16 channels;
    }
    /// 2.2: the kernel queue's enable.
    pub(crate) KQ_CTRL(u32)[NCTX, stride = CTX_STRIDE] @ 0x1074 { 0:0 enable => bool; }
    /// 2.2: as Q_STATUS (no EVT_LOST, no ARMED).
    pub(crate) KQ_STATUS(u32)[NCTX, stride = CTX_STRIDE] @ 0x1078 {
        0:0 enabled => bool;
        1:1 error => bool;
        3:3 busy => bool;
        15:8 code;
    }
    /// 2.2: the kernel queue's SQ producer index: writing it rings its doorbell.
    pub(crate) KQ_SQ_TAIL(u32)[NCTX, stride = CTX_STRIDE] @ 0x1084 { 31:0 value; }
    /// 2.2: the kernel queue's CQ consumer index.
    pub(crate) KQ_CQ_HEAD(u32)[NCTX, stride = CTX_STRIDE] @ 0x108c { 31:0 value; }
    /// 2.2: the kernel queue's CQ producer index.
    pub(crate) KQ_CQ_TAIL(u32)[NCTX, stride = CTX_STRIDE] @ 0x1090 { 31:0 value; }
    /// 2.11: the fault record ring's address (the PF's DMA space), low half.
    pub(crate) FREC_BASE_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x10c0 { 31:0 value; }
    /// 2.11: the fault record ring's address, high half.
    pub(crate) FREC_BASE_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x10c4 { 31:0 value; }
    /// 2.11: the fault record ring's size and enable (0 -> 1 latches, indices to 0).
    pub(crate) FREC_CFG(u32)[NCTX, stride = CTX_STRIDE] @ 0x10c8 {
        4:0 log2;
        31:31 enable => bool;
    }
    /// 2.11: the reader's index: the records before it are free.
    pub(crate) FREC_HEAD(u32)[NCTX, stride = CTX_STRIDE] @ 0x10cc { 31:0 value; }

    /// Source IOVA, low half.
    pub(crate) CH_SRC_LO(u32)[NCH, stride = STRIDE] @ 0x1100 {
        31:0 value;
    }

    /// Source IOVA, high half.
    pub(crate) CH_SRC_HI(u32)[NCH, stride = STRIDE] @ 0x1104 {
        31:0 value;
    }

    /// Destination IOVA, low half.
    pub(crate) CH_DST_LO(u32)[NCH, stride = STRIDE] @ 0x1108 {
        31:0 value;
    }

    /// Destination IOVA, high half.
    pub(crate) CH_DST_HI(u32)[NCH, stride = STRIDE] @ 0x110c {
        31:0 value;
    }

    /// Transfer length in bytes.
    pub(crate) CH_LEN(u32)[NCH, stride = STRIDE] @ 0x1110 {
        31:0 value;
    }

    /// Commands (one strobe per write) and the interrupt enable.
    pub(crate) CH_CTRL(u32)[NCH, stride = STRIDE] @ 0x1114 {
        0:0 start => bool;
        1:1 resume => bool;
        2:2 nack => bool;
        8:8 irq_en => bool;
        9:9 seq_check => bool;
        31:24 seq;
    }

    /// State, error code and the rejected-command flag.
    pub(crate) CH_STATUS(u32)[NCH, stride = STRIDE] @ 0x1118 {
        3:0 state => State;
        15:8 error => ChError;
        16:16 rejected => bool;
        31:24 fault_seq;
    }

    /// IOVA of the faulting access, low half.
    pub(crate) CH_FAULT_LO(u32)[NCH, stride = STRIDE] @ 0x111c {
        31:0 value;
    }

    /// IOVA of the faulting access, high half.
    pub(crate) CH_FAULT_HI(u32)[NCH, stride = STRIDE] @ 0x1120 {
        31:0 value;
    }

    /// Direction and cause of the last fault.
    pub(crate) CH_FAULT_INFO(u32)[NCH, stride = STRIDE] @ 0x1124 {
        0:0 write => bool;
        15:8 cause => FaultCause;
    }

    /// Bytes of the transfer already copied.
    pub(crate) CH_DONE_BYTES(u32)[NCH, stride = STRIDE] @ 0x1128 {
        31:0 value;
    }

    /// 2.1: where the transfer came from: the send queue (and its SQ index), or START.
    pub(crate) CH_ORIGIN(u32)[NCH, stride = STRIDE] @ 0x1130 {
        15:0 sq_index;
        29:29 net_rx => bool;
        30:30 kernel => bool;
        31:31 queue => bool;
    }

    /// 2.1: the `wr_id` of the channel's queue transfer, low half.
    pub(crate) CH_WRID_LO(u32)[NCH, stride = STRIDE] @ 0x1134 { 31:0 value; }

    /// 2.1: the status the next NACK of the channel's queue transfer reports in its CQE.
    pub(crate) CH_NACK_STATUS(u32)[NCH, stride = STRIDE] @ 0x113c {
        31:0 value;
    }
}

#[kunit_tests(exanest_dma_regs)]
mod tests {
    use super::*;
    use crate::exanest_core::regs::{self, ch, ctrl, ctx, global, Status};
    use kernel::io::{register::Array, IoLoc, Region};

    fn off<T, L: IoLoc<Region<{ regs::MMIO_SIZE }>, T>>(l: L) -> usize {
        l.offset()
    }

    /// The `register!` map and the core crate's map (checked against the C header) agree.
    #[test]
    fn offsets_match_core_map() {
        assert_eq!(off(ID), global::ID);
        assert_eq!(off(VERSION), global::VERSION);
        assert_eq!(off(CAPS), global::CAPS);
        assert_eq!(off(MAX_LEN), global::MAX_LEN);
        assert_eq!(off(IRQ_SUMMARY_LO), global::IRQ_SUMMARY_LO);
        assert_eq!(off(IRQ_SUMMARY_HI), global::IRQ_SUMMARY_HI);
        assert_eq!(off(QUANTUM), global::QUANTUM);
        assert_eq!(off(BANDWIDTH), global::BANDWIDTH);
        assert_eq!(off(LATENCY), global::LATENCY);
        assert_eq!(off(RESET), global::RESET);
        // Each context register at its offset in the core map, for context `c`.
        macro_rules! same {
            ($c:expr; $($reg:ident = $o:ident),* $(,)?) => {
                $(assert_eq!(off($reg::at($c)), regs::ctx_reg($c, ctx::$o).unwrap());)*
            };
        }
        for c in [0usize, 1, NCTX - 1] {
            same!(c; CTX_IRQ_STATUS = IRQ_STATUS, CTX_CTRL = CTRL, CTX_STATUS = STATUS);
            same!(c; SQ_BASE_LO = SQ_BASE_LO, SQ_BASE_HI = SQ_BASE_HI, CQ_BASE_LO = CQ_BASE_LO);
            same!(c; CQ_BASE_HI = CQ_BASE_HI, Q_CFG = Q_CFG, Q_CTRL = Q_CTRL, Q_STATUS = Q_STATUS);
            same!(c; Q_ERR_LO = Q_ERR_LO, Q_ERR_HI = Q_ERR_HI, EVT_POST = EVT_POST);
            same!(c; EVT_ARG_LO = EVT_ARG_LO, EVT_ARG_HI = EVT_ARG_HI, Q_SQ_TAIL = Q_SQ_TAIL);
            same!(c; Q_SQ_HEAD = Q_SQ_HEAD, Q_CQ_HEAD = Q_CQ_HEAD, Q_CQ_TAIL = Q_CQ_TAIL);
            same!(c; KQ_SQ_BASE_LO = KQ_SQ_BASE_LO, KQ_SQ_BASE_HI = KQ_SQ_BASE_HI);
            same!(c; KQ_CQ_BASE_LO = KQ_CQ_BASE_LO, KQ_CQ_BASE_HI = KQ_CQ_BASE_HI);
            same!(c; KQ_CFG = KQ_CFG, KQ_CTRL = KQ_CTRL, KQ_STATUS = KQ_STATUS);
            same!(c; KQ_SQ_TAIL = KQ_SQ_TAIL, KQ_CQ_HEAD = KQ_CQ_HEAD, KQ_CQ_TAIL = KQ_CQ_TAIL);
            same!(c; FREC_BASE_LO = FREC_BASE_LO, FREC_BASE_HI = FREC_BASE_HI);
            same!(c; FREC_CFG = FREC_CFG, FREC_HEAD = FREC_HEAD);
        }
        assert!(CTX_STATUS::try_at(NCTX).is_none());
        for (c, k) in [
            (0usize, 0usize),
            (0, 1),
            (1, 3),
            (NCTX - 1, regs::MAX_CHANNELS - 1),
        ] {
            let n = regs::ch_index(c, k).unwrap();
            let at = |r| regs::ch_reg(c, k, r).unwrap();
            assert_eq!(off(CH_SRC_LO::at(n)), at(ch::SRC_LO));
            assert_eq!(off(CH_SRC_HI::at(n)), at(ch::SRC_HI));
            assert_eq!(off(CH_DST_LO::at(n)), at(ch::DST_LO));
            assert_eq!(off(CH_DST_HI::at(n)), at(ch::DST_HI));
            assert_eq!(off(CH_LEN::at(n)), at(ch::LEN));
            assert_eq!(off(CH_CTRL::at(n)), at(ch::CTRL));
            assert_eq!(off(CH_STATUS::at(n)), at(ch::STATUS));
            assert_eq!(off(CH_FAULT_LO::at(n)), at(ch::FAULT_LO));
            assert_eq!(off(CH_FAULT_HI::at(n)), at(ch::FAULT_HI));
            assert_eq!(off(CH_FAULT_INFO::at(n)), at(ch::FAULT_INFO));
            assert_eq!(off(CH_DONE_BYTES::at(n)), at(ch::DONE_BYTES));
            assert_eq!(off(CH_ORIGIN::at(n)), at(ch::ORIGIN));
            assert_eq!(off(CH_WRID_LO::at(n)), at(ch::WRID_LO));
            assert_eq!(off(CH_NACK_STATUS::at(n)), at(ch::NACK_STATUS));
        }
        assert!(CH_STATUS::try_at(NCH).is_none());
    }

    /// Field encodings agree with the core crate's.
    #[test]
    fn fields_match_core_map() {
        let c = CH_CTRL::zeroed().with_start(true).with_irq_en(true);
        assert_eq!(c.into_raw(), ctrl::START | ctrl::IRQ_EN);
        assert_eq!(CH_CTRL::zeroed().with_nack(true).into_raw(), ctrl::NACK);
        assert_eq!(CH_CTRL::zeroed().with_resume(true).into_raw(), ctrl::RESUME);
        let raw = 4 | (3 << 8) | Status::REJECTED;
        let st = CH_STATUS::from_raw(raw);
        assert_eq!(st.state(), State::Error);
        assert_eq!(st.error(), ChError::Aborted);
        assert!(st.rejected());
        let caps = CAPS::from_raw(
            4 | regs::Caps::RESUME
                | regs::Caps::INTX
                | regs::Caps::SRIOV
                | (16 << regs::Caps::NCTX_SHIFT),
        );
        let info = CH_FAULT_INFO::from_raw(1 | (1 << 8));
        assert!(info.write());
        assert_eq!(info.cause(), FaultCause::Translation);
        assert_eq!(caps.channels().get(), 4);
        assert!(caps.resume() && caps.intx() && !caps.timing() && caps.sriov());
        assert_eq!(caps.contexts().get(), 16);
        assert_eq!(
            CTX_CTRL::zeroed().with_quiesce(true).into_raw(),
            regs::ctx_ctrl::QUIESCE
        );
        let cs = CTX_STATUS::from_raw(regs::ctx_status::ACTIVE | regs::ctx_status::FUNCTION);
        assert!(cs.active() && cs.function());
        let irq = CTX_IRQ_STATUS::from_raw(regs::ctx_irq::CQ | regs::ctx_irq::QERR | 0x5);
        assert!(irq.cq() && irq.qerr());
        assert_eq!(irq.channels().get(), 0x5);
        let cfg = regs::q_cfg::encode(5, 12, 0b1110).unwrap();
        let q = Q_CFG::from_raw(cfg);
        assert_eq!(
            (q.log2_sq().get(), q.log2_cq().get(), q.channels().get()),
            (5, 12, 0b1110)
        );
        assert_eq!(
            Q_CTRL::zeroed().with_enable(true).into_raw(),
            regs::q_ctrl::ENABLE
        );
        let raw = regs::QStatus {
            enabled: true,
            error: true,
            evt_lost: false,
            busy: true,
            armed: false,
            code: regs::QueueError::CqWrite,
        }
        .encode();
        let qs = Q_STATUS::from_raw(raw);
        assert!(qs.enabled() && qs.error() && qs.busy() && !qs.armed());
        assert!(Q_STATUS::from_raw(regs::QStatus::ARMED).armed());
        let idx = regs::QueueIndices {
            armed: true,
            ..Default::default()
        };
        let c = Q_CTRL::from_raw(idx.restore_ctrl());
        assert!(c.enable() && c.restore() && c.arm());
        assert_eq!(qs.code().get(), 3);
        let e = EVT_POST::from_raw(regs::evt_post::encode(1, 0x1_2345_6789));
        assert_eq!((e.kind().get(), e.count().get()), (1, 0xff_ffff));
        assert!(Q_STATUS::from_raw(regs::QStatus::EVT_LOST).evt_lost());
        let o = CH_ORIGIN::from_raw(regs::origin::QUEUE | 0x1234);
        assert!(o.queue() && !o.kernel());
        assert!(CH_ORIGIN::from_raw(regs::origin::KERNEL).kernel());
        assert_eq!(o.sq_index().get(), 0x1234);
    }

    /// Every channel state and error survives the typed field in both directions, as the
    /// core encodes it.
    #[test]
    fn status_fields_round_trip() {
        for v in 0u8..16 {
            let s = State::from_field(v);
            let st = CH_STATUS::zeroed().with_state(s);
            assert_eq!(st.state(), s);
            assert_eq!(
                st.into_raw(),
                Status {
                    state: s,
                    error: ChError::None,
                    rejected: false
                }
                .encode()
            );
        }
        for v in 0u8..=255 {
            let e = ChError::from_field(v);
            assert_eq!(CH_STATUS::zeroed().with_error(e).error(), e);
        }
    }

    /// The driver's version gates name minor versions of the map it speaks, oldest first.
    #[test]
    fn features_are_in_the_map() {
        let mut last = 0;
        for f in crate::hw::Feature::ALL {
            assert!(f.since() > last);
            assert!(f.since() <= regs::VERSION_MINOR);
            last = f.since();
        }
    }
}
