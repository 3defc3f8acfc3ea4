// SPDX-License-Identifier: GPL-2.0-only

//! The network port's registers (register map 2.3 to 2.6, Documentation/pldma-registers.rst, "The
//! network port") in the kernel's `register!` style, beside regs.rs: the node id, the
//! endpoint and remote key tables that remote.rs programs, and a context's mailbox ring (2.4,
//! mailbox.rs). Their field values are the core's
//! (`exanest_core::regs::net`); the KUnit suite below checks the offsets against the core's
//! map, which the host tests check against the C header.

use kernel::io::register;
use kernel::prelude::*;

register! {
    /// The node id (bits 15:0) and whether the link is up (`net::NODE_LINK`).
    pub(crate) NET_NODE(u32) @ 0x100 {
        15:0 id;
        16:16 link => bool;
    }

    /// The endpoint that NET_EP_CTX is about.
    pub(crate) NET_EP_SEL(u32) @ 0x120 {
        31:0 value;
    }

    /// The selected endpoint's context and `net::EP_RESIDENT`; writing it with RESIDENT
    /// RESUMEs the ops it NACKed NOT_READY.
    pub(crate) NET_EP_CTX(u32) @ 0x124 {
        7:0 ctx;
        /// 2.5: the process has a mailbox (a MAILBOX may wake it).
        29:29 mbox => bool;
        /// 2.5: a process holds the endpoint; written without, its unfinished ops end.
        30:30 open => bool;
        31:31 resident => bool;
    }

    /// The rkey table entry the window is about (2.5: any free one; the key names it).
    pub(crate) NET_RKEY_SEL(u32) @ 0x128 {
        31:0 value;
    }

    /// 2.5: the entry's key, 64 random bits: low half.
    pub(crate) NET_RKEY_KEY_LO(u32) @ 0x12c {
        31:0 value;
    }

    /// The region's first byte, low half.
    pub(crate) NET_RKEY_BASE_LO(u32) @ 0x130 {
        31:0 value;
    }

    /// The region's first byte, high half.
    pub(crate) NET_RKEY_BASE_HI(u32) @ 0x134 {
        31:0 value;
    }

    /// The region's length, low half.
    pub(crate) NET_RKEY_LEN_LO(u32) @ 0x138 {
        31:0 value;
    }

    /// The region's length, high half.
    pub(crate) NET_RKEY_LEN_HI(u32) @ 0x13c {
        31:0 value;
    }

    /// The endpoint owning the region.
    pub(crate) NET_RKEY_EP(u32) @ 0x140 {
        31:0 value;
    }

    /// `net::RKEY_VALID` and the rights; writing it commits the entry.
    pub(crate) NET_RKEY_CTRL(u32) @ 0x144 {
        0:0 valid => bool;
        1:1 read => bool;
        2:2 write => bool;
        3:3 bound => bool;
    }

    /// 2.9: the node the entry's key is bound to, with `bound` in [`NET_RKEY_CTRL`].
    pub(crate) NET_RKEY_NODE(u32) @ 0x1dc {
        31:0 value;
    }

    /// 2.5: the entry's key, high half.
    pub(crate) NET_RKEY_KEY_HI(u32) @ 0x148 {
        31:0 value;
    }

    /// 2.5: key failures from one source node within a second before the engine quarantines
    /// it (0: never); the `link` file's `key_fail_limit` (link.rs).
    pub(crate) NET_KEYFAIL_LIMIT(u32) @ 0x14c {
        31:0 value;
    }

    /// 2.5: the source node NET_SRC_KEYFAILS is about.
    pub(crate) NET_SRC_SEL(u32) @ 0x150 {
        31:0 value;
    }

    /// 2.5: key failures from node NET_SRC_SEL since it was last released (saturating).
    pub(crate) NET_SRC_KEYFAILS(u32) @ 0x154 {
        31:0 value;
    }

    /// 2.5: quarantined nodes 0-31, one bit each; write one to release (link.rs).
    pub(crate) NET_QUARANTINE_LO(u32) @ 0x158 {
        31:0 value;
    }

    /// 2.5: quarantined nodes 32-63.
    pub(crate) NET_QUARANTINE_HI(u32) @ 0x15c {
        31:0 value;
    }

    /// 2.4: context c's mailbox ring, low half of its address (mailbox.rs).
    pub(crate) MBOX_BASE_LO(u32)[NCTX, stride = CTX_STRIDE] @ 0x10a0 {
        31:0 value;
    }

    /// 2.4: high half.
    pub(crate) MBOX_BASE_HI(u32)[NCTX, stride = CTX_STRIDE] @ 0x10a4 {
        31:0 value;
    }

    /// 2.4: log2 of the ring's slots and `mbox::CFG_ENABLE`.
    pub(crate) MBOX_CFG(u32)[NCTX, stride = CTX_STRIDE] @ 0x10a8 {
        4:0 log2;
        31:31 enable => bool;
    }

    /// 2.4, write-one-to-clear: `net::IRQ_EP_WANTED` (resident.rs).
    pub(crate) NET_IRQ(u32) @ 0x1d0 {
        0:0 ep_wanted => bool;
    }

    /// 2.4: the endpoints with ops waiting for a context, 32 a word.
    pub(crate) NET_EP_WANTED(u32)[EP_WORDS, stride = 4] @ 0x1e0 {
        31:0 value;
    }

    /// 2.4: the ring's reader index, as the VF's (mailbox.rs).
    pub(crate) MBOX_HEAD(u32)[NCTX, stride = CTX_STRIDE] @ 0x10ac {
        31:0 value;
    }

    /// 2.4: messages placed; writable while the mailbox is disabled.
    pub(crate) MBOX_TAIL(u32)[NCTX, stride = CTX_STRIDE] @ 0x10b0 {
        31:0 value;
    }

    /// 2.6: arms the mailbox event (`mbox::ARM_ONCE`), which raises CTX_IRQ MBOX once the ring
    /// holds a message not taken; reads it while armed (mailbox.rs).
    pub(crate) MBOX_ARM(u32)[NCTX, stride = CTX_STRIDE] @ 0x10b4 {
        0:0 once => bool;
    }

    /// 2.3: the op id of channel n's current or last network op; array index
    /// `c * NET_CH_PER_CTX + n` for channel n of context c ([`net_ch`]).
    pub(crate) CH_NET_OPID(u32)[NNCH, stride = NET_CH_STRIDE] @ 0x1314 {
        31:0 value;
    }

    /// 2.3: the sending node of the receiver fault a `NET_RX` channel reports ([`net_ch`]).
    pub(crate) CH_NET_SRC(u32)[NNCH, stride = NET_CH_STRIDE] @ 0x1318 {
        31:0 value;
    }

    /// The port's counters, free-running (`net::CNT_*`).
    pub(crate) NET_CNT(u32)[COUNTERS, stride = 4] @ 0x180 {
        31:0 value;
    }

    /// 2.7: the port's congestion counters (`net::CC_*`).
    pub(crate) NET_CC(u32)[CC_COUNTERS, stride = 4] @ 0x160 {
        31:0 value;
    }
}

/// Counters the port has.
const COUNTERS: usize = crate::exanest_core::regs::net::COUNTERS;
/// Congestion counters the port has (2.7).
const CC_COUNTERS: usize = crate::exanest_core::regs::net::CC_COUNTERS;
/// Words of the wanted-endpoint bitmap.
const EP_WORDS: usize = crate::exanest_core::regs::net::EP_WANTED_WORDS;
/// Contexts the map has room for, and the distance between their blocks.
const NCTX: usize = crate::exanest_core::regs::MAX_CONTEXTS;
const CTX_STRIDE: usize = crate::exanest_core::regs::CTX_STRIDE;
/// Distance between two channels' network blocks, how many fit in a context's block, and
/// their number in the flat array of [`CH_NET_OPID`] and [`CH_NET_SRC`].
const NET_CH_STRIDE: usize = crate::exanest_core::regs::ch_net::STRIDE;
const NET_CH_PER_CTX: usize = CTX_STRIDE / NET_CH_STRIDE;
const NNCH: usize = NCTX * NET_CH_PER_CTX;

/// The index of channel `n` of context `c` in [`CH_NET_OPID`] and [`CH_NET_SRC`], `None` out
/// of range.
pub(crate) const fn net_ch(c: usize, n: usize) -> Option<usize> {
    if c >= NCTX || n >= crate::exanest_core::regs::MAX_CHANNELS {
        None
    } else {
        Some(c * NET_CH_PER_CTX + n)
    }
}

#[kunit_tests(exanest_netregs)]
mod tests {
    use super::*;
    use crate::exanest_core::regs::{self, net};
    use kernel::io::{register::Array, IoLoc, Region};

    fn off<T, L: IoLoc<Region<{ regs::MMIO_SIZE }>, T>>(l: L) -> usize {
        l.offset()
    }

    /// The network registers sit where the core's map (checked against the C header) says.
    #[test]
    fn offsets_match_core_map() {
        assert_eq!(off(NET_NODE), net::NODE);
        assert_eq!(off(NET_EP_SEL), net::EP_SEL);
        assert_eq!(off(NET_EP_CTX), net::EP_CTX);
        assert_eq!(off(NET_RKEY_SEL), net::RKEY_SEL);
        assert_eq!(off(NET_RKEY_KEY_LO), net::RKEY_KEY_LO);
        assert_eq!(off(NET_RKEY_KEY_HI), net::RKEY_KEY_HI);
        assert_eq!(off(NET_KEYFAIL_LIMIT), net::KEYFAIL_LIMIT);
        assert_eq!(off(NET_SRC_SEL), net::SRC_SEL);
        assert_eq!(off(NET_SRC_KEYFAILS), net::SRC_KEYFAILS);
        assert_eq!(off(NET_QUARANTINE_LO), net::QUARANTINE_LO);
        assert_eq!(off(NET_QUARANTINE_HI), net::QUARANTINE_HI);
        assert_eq!(off(NET_RKEY_BASE_LO), net::RKEY_BASE_LO);
        assert_eq!(off(NET_RKEY_BASE_HI), net::RKEY_BASE_HI);
        assert_eq!(off(NET_RKEY_LEN_LO), net::RKEY_LEN_LO);
        assert_eq!(off(NET_RKEY_LEN_HI), net::RKEY_LEN_HI);
        assert_eq!(off(NET_RKEY_EP), net::RKEY_EP);
        assert_eq!(off(NET_RKEY_CTRL), net::RKEY_CTRL);
        assert_eq!(off(NET_RKEY_NODE), net::RKEY_NODE);
        assert_eq!(off(NET_CNT::at(0)), net::CNT_BASE);
        assert_eq!(
            off(NET_CNT::at(net::CNT_PROBES)),
            net::CNT_BASE + 4 * net::CNT_PROBES
        );
        assert!(NET_CNT::try_at(net::COUNTERS).is_none());
        assert_eq!(off(NET_CC::at(0)), net::CC_BASE);
        assert_eq!(
            off(NET_CC::at(net::CC_QUEUE_PEAK)),
            net::CC_BASE + 4 * net::CC_QUEUE_PEAK
        );
        assert!(NET_CC::try_at(net::CC_COUNTERS).is_none());
        assert_eq!(off(NET_IRQ), net::IRQ);
        assert_eq!(off(NET_EP_WANTED::at(7)), net::EP_WANTED + 28);
        let ctx = |c: usize, off: usize| regs::CTX_BASE + c * regs::CTX_STRIDE + off;
        assert_eq!(off(MBOX_BASE_LO::at(0)), ctx(0, regs::ctx::MBOX_BASE_LO));
        assert_eq!(off(MBOX_BASE_HI::at(3)), ctx(3, regs::ctx::MBOX_BASE_HI));
        assert_eq!(off(MBOX_CFG::at(5)), ctx(5, regs::ctx::MBOX_CFG));
        assert_eq!(off(MBOX_HEAD::at(1)), ctx(1, regs::ctx::MBOX_HEAD));
        assert_eq!(off(MBOX_TAIL::at(2)), ctx(2, regs::ctx::MBOX_TAIL));
        assert_eq!(off(MBOX_ARM::at(4)), ctx(4, regs::ctx::MBOX_ARM));
        assert_eq!(
            MBOX_ARM::zeroed().with_once(true).into_raw(),
            regs::mbox::ARM_ONCE
        );
        let chn = |c: usize, n: usize, r: usize| {
            ctx(c, regs::ch_net::BASE + n * regs::ch_net::STRIDE + r)
        };
        let at = |c, n| net_ch(c, n).unwrap();
        assert_eq!(
            off(CH_NET_OPID::at(at(0, 0))),
            chn(0, 0, regs::ch_net::OPID)
        );
        assert_eq!(
            off(CH_NET_OPID::at(at(3, 5))),
            chn(3, 5, regs::ch_net::OPID)
        );
        assert_eq!(
            off(CH_NET_SRC::at(at(15, 7))),
            chn(15, 7, regs::ch_net::SRC)
        );
        assert!(net_ch(regs::MAX_CONTEXTS, 0).is_none());
        assert!(net_ch(0, regs::MAX_CHANNELS).is_none());
    }
}
