// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The Rust register map must equal the C header that the QEMU model is compiled with.

use exanest_core::regs::{
    self, ch, cqe_status, ctrl, ctx_irq, global, origin, q_cfg, q_ctrl, Caps, Cqe, FaultInfo,
    QStatus, Sqe, Status,
};
use std::collections::HashMap;

/// Every `#define` of the header with its value; a negative value (the CQE status codes,
/// written `(-N)`) as its two's complement.
fn header() -> HashMap<String, u64> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../include/hw/exanest-pldma-regs.h"
    );
    let text = std::fs::read_to_string(path).expect("read the C register header");
    let mut defs = HashMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("#define") else {
            continue;
        };
        let rest = rest.split("/*").next().unwrap_or("");
        let Some((name, value)) = rest.trim().split_once(char::is_whitespace) else {
            continue; // the include guard
        };
        let value: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        let parsed = if let Some(neg) = value.strip_prefix("(-") {
            neg.strip_suffix(')')
                .and_then(|n| n.parse::<i64>().ok())
                .map(|n| (-n) as u64)
        } else if let Some(shift) = value.strip_prefix("(1u<<") {
            shift
                .strip_suffix(')')
                .and_then(|s| s.parse::<u32>().ok())
                .map(|s| 1u64 << s)
        } else if let Some(hex) = value.strip_prefix("0x") {
            u64::from_str_radix(hex.trim_end_matches('u'), 16).ok()
        } else {
            value.trim_end_matches('u').parse().ok()
        };
        let parsed = parsed.unwrap_or_else(|| panic!("cannot parse {name} = {value}"));
        defs.insert(name.to_string(), parsed);
    }
    defs
}

#[test]
fn rust_register_map_matches_c_header() {
    let h = header();
    let expect: &[(&str, u64)] = &[
        ("PLDMA_PCI_VENDOR_ID", regs::PCI_VENDOR_ID.into()),
        ("PLDMA_PCI_DEVICE_ID", regs::PCI_DEVICE_ID.into()),
        ("PLDMA_PCI_VF_DEVICE_ID", regs::PCI_VF_DEVICE_ID.into()),
        ("PLDMA_MMIO_SIZE", regs::MMIO_SIZE as u64),
        ("PLDMA_VF_MMIO_SIZE", regs::VF_MMIO_SIZE as u64),
        ("PLDMA_VF_OFFSET", regs::VF_OFFSET as u64),
        ("PLDMA_VF_STRIDE", regs::VF_STRIDE as u64),
        ("PLDMA_ID", global::ID as u64),
        ("PLDMA_VERSION", global::VERSION as u64),
        ("PLDMA_CAPS", global::CAPS as u64),
        ("PLDMA_MAX_LEN", global::MAX_LEN as u64),
        ("PLDMA_IRQ_SUMMARY_LO", global::IRQ_SUMMARY_LO as u64),
        ("PLDMA_IRQ_SUMMARY_HI", global::IRQ_SUMMARY_HI as u64),
        ("PLDMA_QUANTUM", global::QUANTUM as u64),
        ("PLDMA_BANDWIDTH", global::BANDWIDTH as u64),
        ("PLDMA_LATENCY", global::LATENCY as u64),
        ("PLDMA_SCRATCH", global::SCRATCH as u64),
        ("PLDMA_RESET", global::RESET as u64),
        ("PLDMA_ID_MAGIC", regs::ID_MAGIC.into()),
        ("PLDMA_VERSION_MAJOR", regs::VERSION_MAJOR.into()),
        ("PLDMA_VERSION_MINOR", regs::VERSION_MINOR.into()),
        ("PLDMA_RESET_MAGIC", regs::RESET_MAGIC.into()),
        ("PLDMA_CAPS_NCHAN_MASK", Caps::NCHAN_MASK.into()),
        ("PLDMA_CAPS_RESUME", Caps::RESUME.into()),
        ("PLDMA_CAPS_INTX", Caps::INTX.into()),
        ("PLDMA_CAPS_TIMING", Caps::TIMING.into()),
        ("PLDMA_CAPS_SRIOV", Caps::SRIOV.into()),
        ("PLDMA_CAPS_NET", Caps::NET.into()),
        ("PLDMA_CAPS_FREC", Caps::FREC.into()),
        ("PLDMA_CTX_FREC_BASE_LO", regs::ctx::FREC_BASE_LO as u64),
        ("PLDMA_CTX_FREC_BASE_HI", regs::ctx::FREC_BASE_HI as u64),
        ("PLDMA_CTX_FREC_CFG", regs::ctx::FREC_CFG as u64),
        ("PLDMA_CTX_FREC_HEAD", regs::ctx::FREC_HEAD as u64),
        ("PLDMA_CTX_FREC_TAIL", regs::ctx::FREC_TAIL as u64),
        ("PLDMA_FREC_CFG_LOG2_MASK", regs::frec::CFG_LOG2_MASK.into()),
        ("PLDMA_FREC_CFG_ENABLE", regs::frec::CFG_ENABLE.into()),
        ("PLDMA_FREC_LOG2_MAX", regs::frec::LOG2_MAX.into()),
        ("PLDMA_FREC_SIZE", regs::frec::SIZE as u64),
        ("PLDMA_FREC_ADDR_OFF", regs::frec::ADDR_OFF as u64),
        ("PLDMA_FREC_INFO_OFF", regs::frec::INFO_OFF as u64),
        ("PLDMA_FREC_ORIGIN_OFF", regs::frec::ORIGIN_OFF as u64),
        ("PLDMA_FREC_WRID_OFF", regs::frec::WRID_OFF as u64),
        ("PLDMA_FREC_END_OFF", regs::frec::END_OFF as u64),
        ("PLDMA_FREC_NET_SRC_OFF", regs::frec::NET_SRC_OFF as u64),
        ("PLDMA_FREC_NET_OPID_OFF", regs::frec::NET_OPID_OFF as u64),
        ("PLDMA_FREC_CHAN_OFF", regs::frec::CHAN_OFF as u64),
        ("PLDMA_FREC_DONE_OFF", regs::frec::DONE_OFF as u64),
        ("PLDMA_FREC_STAMP_OFF", regs::frec::STAMP_OFF as u64),
        ("PLDMA_CTX_IRQ_FREC_LOST", ctx_irq::FREC_LOST.into()),
        ("PLDMA_CTRL_SEQ_CHECK", ctrl::SEQ_CHECK.into()),
        ("PLDMA_CTRL_SEQ_SHIFT", ctrl::SEQ_SHIFT.into()),
        ("PLDMA_CTRL_SEQ_MASK", ctrl::SEQ_MASK.into()),
        (
            "PLDMA_STATUS_FAULT_SEQ_SHIFT",
            Status::FAULT_SEQ_SHIFT.into(),
        ),
        ("PLDMA_STATUS_FAULT_SEQ_MASK", Status::FAULT_SEQ_MASK.into()),
        ("PLDMA_CAPS_MAILBOX", Caps::MAILBOX.into()),
        ("PLDMA_CAPS_NCTX_SHIFT", Caps::NCTX_SHIFT.into()),
        ("PLDMA_CAPS_NCTX_MASK", Caps::NCTX_MASK.into()),
        ("PLDMA_CTX_BASE", regs::CTX_BASE as u64),
        ("PLDMA_CTX_STRIDE", regs::CTX_STRIDE as u64),
        ("PLDMA_MAX_CONTEXTS", regs::MAX_CONTEXTS as u64),
        ("PLDMA_CTX_IRQ_STATUS", regs::ctx::IRQ_STATUS as u64),
        ("PLDMA_CTX_CTRL", regs::ctx::CTRL as u64),
        ("PLDMA_CTX_STATUS", regs::ctx::STATUS as u64),
        ("PLDMA_CTX_QUIESCE", regs::ctx_ctrl::QUIESCE.into()),
        ("PLDMA_CTX_ACTIVE", regs::ctx_status::ACTIVE.into()),
        ("PLDMA_CTX_FUNCTION", regs::ctx_status::FUNCTION.into()),
        ("PLDMA_VF_ID", regs::vf::ID as u64),
        ("PLDMA_VF_VERSION", regs::vf::VERSION as u64),
        ("PLDMA_VF_CONTEXT", regs::vf::CONTEXT as u64),
        ("PLDMA_VF_ID_MAGIC", regs::VF_ID_MAGIC.into()),
        ("PLDMA_CH_BASE", regs::CH_BASE as u64),
        ("PLDMA_CH_STRIDE", regs::CH_STRIDE as u64),
        ("PLDMA_MAX_CHANNELS", regs::MAX_CHANNELS as u64),
        ("PLDMA_CH_SRC_LO", ch::SRC_LO as u64),
        ("PLDMA_CH_SRC_HI", ch::SRC_HI as u64),
        ("PLDMA_CH_DST_LO", ch::DST_LO as u64),
        ("PLDMA_CH_DST_HI", ch::DST_HI as u64),
        ("PLDMA_CH_LEN", ch::LEN as u64),
        ("PLDMA_CH_CTRL", ch::CTRL as u64),
        ("PLDMA_CH_STATUS", ch::STATUS as u64),
        ("PLDMA_CH_FAULT_LO", ch::FAULT_LO as u64),
        ("PLDMA_CH_FAULT_HI", ch::FAULT_HI as u64),
        ("PLDMA_CH_FAULT_INFO", ch::FAULT_INFO as u64),
        ("PLDMA_CH_DONE_BYTES", ch::DONE_BYTES as u64),
        ("PLDMA_CH_FAULTS", ch::FAULTS as u64),
        ("PLDMA_CTRL_START", ctrl::START.into()),
        ("PLDMA_CTRL_RESUME", ctrl::RESUME.into()),
        ("PLDMA_CTRL_NACK", ctrl::NACK.into()),
        ("PLDMA_CTRL_STROBES", ctrl::STROBES.into()),
        ("PLDMA_CTRL_IRQ_EN", ctrl::IRQ_EN.into()),
        ("PLDMA_STATUS_STATE_MASK", Status::STATE_MASK.into()),
        ("PLDMA_STATUS_ERR_SHIFT", Status::ERR_SHIFT.into()),
        ("PLDMA_STATUS_ERR_MASK", Status::ERR_MASK.into()),
        ("PLDMA_STATUS_REJECTED", Status::REJECTED.into()),
        ("PLDMA_FAULT_WRITE", FaultInfo::WRITE.into()),
        ("PLDMA_FAULT_CAUSE_SHIFT", FaultInfo::CAUSE_SHIFT.into()),
        ("PLDMA_FAULT_CAUSE_MASK", FaultInfo::CAUSE_MASK.into()),
        // 2.3: the network port
        ("PLDMA_NET_NODE", regs::net::NODE as u64),
        ("PLDMA_NET_WINDOW", regs::net::WINDOW as u64),
        ("PLDMA_NET_LINK_LATENCY", regs::net::LINK_LATENCY as u64),
        ("PLDMA_NET_LINK_BW", regs::net::LINK_BW as u64),
        ("PLDMA_NET_RTO_US", regs::net::RTO_US as u64),
        ("PLDMA_NET_RETRIES", regs::net::RETRIES as u64),
        ("PLDMA_NET_DROP_PPM", regs::net::DROP_PPM as u64),
        ("PLDMA_NET_CORRUPT_PPM", regs::net::CORRUPT_PPM as u64),
        ("PLDMA_NET_REORDER_PPM", regs::net::REORDER_PPM as u64),
        ("PLDMA_NET_REORDER_US", regs::net::REORDER_US as u64),
        ("PLDMA_NET_RKEY_NODE", regs::net::RKEY_NODE as u64),
        ("PLDMA_NET_EP_SEL", regs::net::EP_SEL as u64),
        ("PLDMA_NET_EP_CTX", regs::net::EP_CTX as u64),
        ("PLDMA_NET_RKEY_SEL", regs::net::RKEY_SEL as u64),
        ("PLDMA_NET_RKEY_KEY_LO", regs::net::RKEY_KEY_LO as u64),
        ("PLDMA_NET_RKEY_KEY_HI", regs::net::RKEY_KEY_HI as u64),
        ("PLDMA_NET_KEYFAIL_LIMIT", regs::net::KEYFAIL_LIMIT as u64),
        ("PLDMA_NET_SRC_SEL", regs::net::SRC_SEL as u64),
        ("PLDMA_NET_SRC_KEYFAILS", regs::net::SRC_KEYFAILS as u64),
        ("PLDMA_NET_QUARANTINE_LO", regs::net::QUARANTINE_LO as u64),
        ("PLDMA_NET_QUARANTINE_HI", regs::net::QUARANTINE_HI as u64),
        ("PLDMA_NET_CC_BASE", regs::net::CC_BASE as u64),
        (
            "PLDMA_NET_CC_INGRESS_DROPS",
            regs::net::CC_INGRESS_DROPS as u64,
        ),
        ("PLDMA_NET_CC_CE_MARKED", regs::net::CC_CE_MARKED as u64),
        (
            "PLDMA_NET_CC_ECE_RECEIVED",
            regs::net::CC_ECE_RECEIVED as u64,
        ),
        ("PLDMA_NET_CC_WINDOW_CUTS", regs::net::CC_WINDOW_CUTS as u64),
        ("PLDMA_NET_CC_TAIL_PROBES", regs::net::CC_TAIL_PROBES as u64),
        ("PLDMA_NET_CC_QUEUE_PEAK", regs::net::CC_QUEUE_PEAK as u64),
        ("PLDMA_NET_CC_COUNTERS", regs::net::CC_COUNTERS as u64),
        ("PLDMA_NET_RKEY_BASE_LO", regs::net::RKEY_BASE_LO as u64),
        ("PLDMA_NET_RKEY_BASE_HI", regs::net::RKEY_BASE_HI as u64),
        ("PLDMA_NET_RKEY_LEN_LO", regs::net::RKEY_LEN_LO as u64),
        ("PLDMA_NET_RKEY_LEN_HI", regs::net::RKEY_LEN_HI as u64),
        ("PLDMA_NET_RKEY_EP", regs::net::RKEY_EP as u64),
        ("PLDMA_NET_RKEY_CTRL", regs::net::RKEY_CTRL as u64),
        ("PLDMA_NET_CNT_BASE", regs::net::CNT_BASE as u64),
        ("PLDMA_NET_CNT_TX_PACKETS", regs::net::CNT_TX_PACKETS as u64),
        ("PLDMA_NET_CNT_RX_PACKETS", regs::net::CNT_RX_PACKETS as u64),
        ("PLDMA_NET_CNT_RX_DROPPED", regs::net::CNT_RX_DROPPED as u64),
        ("PLDMA_NET_CNT_RX_BAD_CRC", regs::net::CNT_RX_BAD_CRC as u64),
        ("PLDMA_NET_CNT_NACKS_SENT", regs::net::CNT_NACKS_SENT as u64),
        (
            "PLDMA_NET_CNT_NACKS_RECEIVED",
            regs::net::CNT_NACKS_RECEIVED as u64,
        ),
        (
            "PLDMA_NET_CNT_RESUMES_SENT",
            regs::net::CNT_RESUMES_SENT as u64,
        ),
        (
            "PLDMA_NET_CNT_RESUMES_RECEIVED",
            regs::net::CNT_RESUMES_RECEIVED as u64,
        ),
        (
            "PLDMA_NET_CNT_RETRANS_BYTES",
            regs::net::CNT_RETRANS_BYTES as u64,
        ),
        ("PLDMA_NET_CNT_TIMEOUTS", regs::net::CNT_TIMEOUTS as u64),
        ("PLDMA_NET_CNT_DUPLICATES", regs::net::CNT_DUPLICATES as u64),
        (
            "PLDMA_NET_CNT_INJECTED_DROPS",
            regs::net::CNT_INJECTED_DROPS as u64,
        ),
        (
            "PLDMA_NET_CNT_INJECTED_CORRUPT",
            regs::net::CNT_INJECTED_CORRUPT as u64,
        ),
        (
            "PLDMA_NET_CNT_ERROR_NACKS",
            regs::net::CNT_ERROR_NACKS as u64,
        ),
        (
            "PLDMA_NET_CNT_PLACED_BYTES",
            regs::net::CNT_PLACED_BYTES as u64,
        ),
        ("PLDMA_NET_CNT_PROBES", regs::net::CNT_PROBES as u64),
        (
            "PLDMA_NET_CNT_MBOX_PLACED",
            regs::net::CNT_MBOX_PLACED as u64,
        ),
        ("PLDMA_NET_CNT_RNR_SENT", regs::net::CNT_RNR_SENT as u64),
        ("PLDMA_NET_CNT_KEY_FAILS", regs::net::CNT_KEY_FAILS as u64),
        (
            "PLDMA_NET_CNT_QUARANTINED",
            regs::net::CNT_QUARANTINED as u64,
        ),
        ("PLDMA_NET_COUNTERS", regs::net::COUNTERS as u64),
        ("PLDMA_NET_IRQ", regs::net::IRQ as u64),
        ("PLDMA_NET_IRQ_EP_WANTED", regs::net::IRQ_EP_WANTED.into()),
        ("PLDMA_NET_EP_WANTED", regs::net::EP_WANTED as u64),
        (
            "PLDMA_NET_EP_WANTED_WORDS",
            regs::net::EP_WANTED_WORDS as u64,
        ),
        ("PLDMA_NET_MAX_NODES", regs::net::MAX_NODES as u64),
        ("PLDMA_NET_MAX_EPS", regs::net::MAX_EPS as u64),
        ("PLDMA_NET_MAX_RKEYS", regs::net::MAX_RKEYS as u64),
        ("PLDMA_NET_RX_OPS", regs::net::RX_OPS as u64),
        ("PLDMA_NET_NODE_ID_MASK", regs::net::NODE_ID_MASK.into()),
        ("PLDMA_NET_NODE_LINK", regs::net::NODE_LINK.into()),
        ("PLDMA_NET_EP_CTX_MASK", regs::net::EP_CTX_MASK.into()),
        ("PLDMA_NET_EP_RESIDENT", regs::net::EP_RESIDENT.into()),
        ("PLDMA_NET_EP_OPEN", regs::net::EP_OPEN.into()),
        ("PLDMA_NET_EP_MBOX", regs::net::EP_MBOX.into()),
        ("PLDMA_NET_RKEY_VALID", regs::net::RKEY_VALID.into()),
        ("PLDMA_NET_RKEY_READ", regs::net::RKEY_READ.into()),
        ("PLDMA_NET_RKEY_WRITE", regs::net::RKEY_WRITE.into()),
        ("PLDMA_NET_RKEY_BOUND", regs::net::RKEY_BOUND.into()),
        ("PLDMA_CH_NET_BASE", regs::ch_net::BASE as u64),
        ("PLDMA_CH_NET_STRIDE", regs::ch_net::STRIDE as u64),
        ("PLDMA_CH_NET_OP", regs::ch_net::OP as u64),
        ("PLDMA_CH_NET_PEER", regs::ch_net::PEER as u64),
        ("PLDMA_CH_NET_EP", regs::ch_net::EP as u64),
        ("PLDMA_CH_NET_RKEY_LO", regs::ch_net::RKEY_LO as u64),
        ("PLDMA_CH_NET_RKEY_HI", regs::ch_net::RKEY_HI as u64),
        ("PLDMA_CH_NET_OPID", regs::ch_net::OPID as u64),
        ("PLDMA_CH_NET_SRC", regs::ch_net::SRC as u64),
        ("PLDMA_CH_NET_STATUS", regs::ch_net::STATUS as u64),
        ("PLDMA_OP_COPY", regs::ch_net::OP_COPY.into()),
        ("PLDMA_OP_PUT", regs::ch_net::OP_PUT.into()),
        ("PLDMA_OP_GET", regs::ch_net::OP_GET.into()),
        ("PLDMA_OP_MAILBOX", regs::ch_net::OP_MAILBOX.into()),
        ("PLDMA_OP_PUT_IMM", regs::ch_net::OP_PUT_IMM.into()),
        ("PLDMA_SQE_NET_IMM_OFF", regs::ch_net::SQE_IMM_OFF as u64),
        ("PLDMA_MBOX_FLAGS_OFF", regs::mbox::FLAGS_OFF as u64),
        ("PLDMA_MBOX_FLAG_PUT_IMM", regs::mbox::FLAG_PUT_IMM.into()),
        ("PLDMA_MBOX_IMM_OFF", regs::mbox::IMM_OFF as u64),
        ("PLDMA_MBOX_ADDR_OFF", regs::mbox::ADDR_OFF as u64),
        // 2.4: the mailbox
        ("PLDMA_CTX_MBOX_BASE_LO", regs::ctx::MBOX_BASE_LO as u64),
        ("PLDMA_CTX_MBOX_BASE_HI", regs::ctx::MBOX_BASE_HI as u64),
        ("PLDMA_CTX_MBOX_CFG", regs::ctx::MBOX_CFG as u64),
        ("PLDMA_CTX_MBOX_HEAD", regs::ctx::MBOX_HEAD as u64),
        ("PLDMA_CTX_MBOX_TAIL", regs::ctx::MBOX_TAIL as u64),
        ("PLDMA_CTX_MBOX_ARM", regs::ctx::MBOX_ARM as u64),
        ("PLDMA_MBOX_ARM_ONCE", regs::mbox::ARM_ONCE.into()),
        ("PLDMA_MBOX_CFG_LOG2_MASK", regs::mbox::CFG_LOG2_MASK.into()),
        ("PLDMA_MBOX_CFG_ENABLE", regs::mbox::CFG_ENABLE.into()),
        ("PLDMA_MBOX_LOG2_MAX", regs::mbox::LOG2_MAX.into()),
        ("PLDMA_MBOX_MAX", regs::mbox::MAX.into()),
        ("PLDMA_MBOX_SLOT", regs::mbox::SLOT as u64),
        ("PLDMA_MBOX_SRC_NODE_OFF", regs::mbox::SRC_NODE_OFF as u64),
        ("PLDMA_MBOX_SRC_EP_OFF", regs::mbox::SRC_EP_OFF as u64),
        ("PLDMA_MBOX_LEN_OFF", regs::mbox::LEN_OFF as u64),
        ("PLDMA_MBOX_OPID_OFF", regs::mbox::OPID_OFF as u64),
        ("PLDMA_MBOX_STAMP_OFF", regs::mbox::STAMP_OFF as u64),
        ("PLDMA_MBOX_DATA_OFF", regs::mbox::DATA_OFF as u64),
        ("PLDMA_VF_MBOX_HEAD", regs::vf::MBOX_HEAD as u64),
        ("PLDMA_VF_MBOX_TAIL", regs::vf::MBOX_TAIL as u64),
        ("PLDMA_VF_MBOX_ARM", regs::vf::MBOX_ARM as u64),
        ("PLDMA_OP_MASK", regs::ch_net::OP_MASK.into()),
        ("PLDMA_SQE_NET_RKEY_OFF", regs::ch_net::SQE_RKEY_OFF as u64),
        ("PLDMA_SQE_NET_PEER_OFF", regs::ch_net::SQE_PEER_OFF as u64),
        (
            "PLDMA_SQE_NET_RSVD0_OFF",
            regs::ch_net::SQE_RSVD0_OFF as u64,
        ),
        ("PLDMA_SQE_NET_EP_OFF", regs::ch_net::SQE_EP_OFF as u64),
        (
            "PLDMA_SQE_NET_RSVD1_OFF",
            regs::ch_net::SQE_RSVD1_OFF as u64,
        ),
        // 2.1: queues
        ("PLDMA_CTX_SQ_BASE_LO", regs::ctx::SQ_BASE_LO as u64),
        ("PLDMA_CTX_SQ_BASE_HI", regs::ctx::SQ_BASE_HI as u64),
        ("PLDMA_CTX_CQ_BASE_LO", regs::ctx::CQ_BASE_LO as u64),
        ("PLDMA_CTX_CQ_BASE_HI", regs::ctx::CQ_BASE_HI as u64),
        ("PLDMA_CTX_Q_CFG", regs::ctx::Q_CFG as u64),
        ("PLDMA_CTX_Q_CTRL", regs::ctx::Q_CTRL as u64),
        ("PLDMA_CTX_Q_STATUS", regs::ctx::Q_STATUS as u64),
        ("PLDMA_CTX_Q_ERR_LO", regs::ctx::Q_ERR_LO as u64),
        ("PLDMA_CTX_Q_ERR_HI", regs::ctx::Q_ERR_HI as u64),
        ("PLDMA_CTX_EVT_POST", regs::ctx::EVT_POST as u64),
        ("PLDMA_CTX_EVT_ARG_LO", regs::ctx::EVT_ARG_LO as u64),
        ("PLDMA_CTX_EVT_ARG_HI", regs::ctx::EVT_ARG_HI as u64),
        ("PLDMA_CTX_Q_SQ_TAIL", regs::ctx::Q_SQ_TAIL as u64),
        ("PLDMA_CTX_Q_SQ_HEAD", regs::ctx::Q_SQ_HEAD as u64),
        ("PLDMA_CTX_Q_CQ_HEAD", regs::ctx::Q_CQ_HEAD as u64),
        ("PLDMA_CTX_Q_CQ_TAIL", regs::ctx::Q_CQ_TAIL as u64),
        ("PLDMA_CTX_KQ_SQ_BASE_LO", regs::ctx::KQ_SQ_BASE_LO as u64),
        ("PLDMA_CTX_KQ_SQ_BASE_HI", regs::ctx::KQ_SQ_BASE_HI as u64),
        ("PLDMA_CTX_KQ_CQ_BASE_LO", regs::ctx::KQ_CQ_BASE_LO as u64),
        ("PLDMA_CTX_KQ_CQ_BASE_HI", regs::ctx::KQ_CQ_BASE_HI as u64),
        ("PLDMA_CTX_KQ_CFG", regs::ctx::KQ_CFG as u64),
        ("PLDMA_CTX_KQ_CTRL", regs::ctx::KQ_CTRL as u64),
        ("PLDMA_CTX_KQ_STATUS", regs::ctx::KQ_STATUS as u64),
        ("PLDMA_CTX_KQ_ERR_LO", regs::ctx::KQ_ERR_LO as u64),
        ("PLDMA_CTX_KQ_ERR_HI", regs::ctx::KQ_ERR_HI as u64),
        ("PLDMA_CTX_KQ_SQ_TAIL", regs::ctx::KQ_SQ_TAIL as u64),
        ("PLDMA_CTX_KQ_SQ_HEAD", regs::ctx::KQ_SQ_HEAD as u64),
        ("PLDMA_CTX_KQ_CQ_HEAD", regs::ctx::KQ_CQ_HEAD as u64),
        ("PLDMA_CTX_KQ_CQ_TAIL", regs::ctx::KQ_CQ_TAIL as u64),
        ("PLDMA_CTX_IRQ_KCQ", ctx_irq::KCQ.into()),
        ("PLDMA_CTX_IRQ_KQERR", ctx_irq::KQERR.into()),
        ("PLDMA_CTX_IRQ_MBOX", ctx_irq::MBOX.into()),
        ("PLDMA_ORIGIN_KERNEL", origin::KERNEL.into()),
        ("PLDMA_ORIGIN_NET_RX", origin::NET_RX.into()),
        (
            "PLDMA_EVT_POST_COUNT_MASK",
            regs::evt_post::COUNT_MASK.into(),
        ),
        (
            "PLDMA_EVT_POST_KIND_SHIFT",
            regs::evt_post::KIND_SHIFT.into(),
        ),
        ("PLDMA_EVT_POST_KIND_MASK", regs::evt_post::KIND_MASK.into()),
        ("PLDMA_CTX_IRQ_CHANNELS", ctx_irq::CHANNELS.into()),
        ("PLDMA_CTX_IRQ_CQ", ctx_irq::CQ.into()),
        ("PLDMA_CTX_IRQ_QERR", ctx_irq::QERR.into()),
        ("PLDMA_CH_ORIGIN", ch::ORIGIN as u64),
        ("PLDMA_CH_WRID_LO", ch::WRID_LO as u64),
        ("PLDMA_CH_WRID_HI", ch::WRID_HI as u64),
        ("PLDMA_CH_NACK_STATUS", ch::NACK_STATUS as u64),
        ("PLDMA_ORIGIN_QUEUE", origin::QUEUE.into()),
        ("PLDMA_ORIGIN_SQ_INDEX_MASK", origin::SQ_INDEX_MASK.into()),
        ("PLDMA_Q_CFG_SQ_SHIFT", q_cfg::SQ_SHIFT.into()),
        ("PLDMA_Q_CFG_SQ_MASK", q_cfg::SQ_MASK.into()),
        ("PLDMA_Q_CFG_CQ_SHIFT", q_cfg::CQ_SHIFT.into()),
        ("PLDMA_Q_CFG_CQ_MASK", q_cfg::CQ_MASK.into()),
        ("PLDMA_Q_CFG_CHAN_SHIFT", q_cfg::CHAN_SHIFT.into()),
        ("PLDMA_Q_CFG_CHAN_MASK", q_cfg::CHAN_MASK.into()),
        ("PLDMA_Q_LOG2_MIN", q_cfg::LOG2_MIN.into()),
        ("PLDMA_Q_LOG2_MAX", q_cfg::LOG2_MAX.into()),
        ("PLDMA_Q_RING_ALIGN", q_cfg::RING_ALIGN),
        ("PLDMA_Q_CTRL_ENABLE", q_ctrl::ENABLE.into()),
        ("PLDMA_Q_CTRL_RESTORE", q_ctrl::RESTORE.into()),
        ("PLDMA_Q_CTRL_ARM", q_ctrl::ARM.into()),
        ("PLDMA_Q_STATUS_ENABLED", QStatus::ENABLED.into()),
        ("PLDMA_Q_STATUS_ERROR", QStatus::ERROR.into()),
        ("PLDMA_Q_STATUS_EVT_LOST", QStatus::EVT_LOST.into()),
        ("PLDMA_Q_STATUS_BUSY", QStatus::BUSY.into()),
        ("PLDMA_Q_STATUS_ARMED", QStatus::ARMED.into()),
        ("PLDMA_Q_STATUS_ERR_SHIFT", QStatus::ERR_SHIFT.into()),
        ("PLDMA_Q_STATUS_ERR_MASK", QStatus::ERR_MASK.into()),
        ("PLDMA_SQE_SIZE", Sqe::SIZE as u64),
        ("PLDMA_SQE_SRC_OFF", Sqe::SRC_OFF as u64),
        ("PLDMA_SQE_DST_OFF", Sqe::DST_OFF as u64),
        ("PLDMA_SQE_LEN_OFF", Sqe::LEN_OFF as u64),
        ("PLDMA_SQE_FLAGS_OFF", Sqe::FLAGS_OFF as u64),
        ("PLDMA_SQE_WRID_OFF", Sqe::WRID_OFF as u64),
        ("PLDMA_CQE_SIZE", Cqe::SIZE as u64),
        ("PLDMA_CQE_WRID_OFF", Cqe::WRID_OFF as u64),
        ("PLDMA_CQE_STATUS_OFF", Cqe::STATUS_OFF as u64),
        ("PLDMA_CQE_BYTES_OFF", Cqe::BYTES_OFF as u64),
        ("PLDMA_CQE_FAULT_OFF", Cqe::FAULT_OFF as u64),
        ("PLDMA_CQE_FLAGS_OFF", Cqe::FLAGS_OFF as u64),
        ("PLDMA_CQE_RSVD_OFF", Cqe::RSVD_OFF as u64),
        ("PLDMA_CQE_PHASE", Cqe::PHASE.into()),
        ("PLDMA_CQE_EVENT", Cqe::EVENT.into()),
        ("PLDMA_CQE_KIND_SHIFT", Cqe::KIND_SHIFT.into()),
        ("PLDMA_CQE_KIND_MASK", Cqe::KIND_MASK.into()),
        ("PLDMA_CQE_SUCCESS", signed(cqe_status::SUCCESS)),
        ("PLDMA_CQE_ERR_BASE", signed(cqe_status::ERR_BASE)),
        ("PLDMA_CQE_BAD_LEN", signed(cqe_status::BAD_LEN)),
        ("PLDMA_CQE_BAD_ADDR", signed(cqe_status::BAD_ADDR)),
        ("PLDMA_CQE_ABORTED", signed(cqe_status::ABORTED)),
        ("PLDMA_CQE_NO_MASTER", signed(cqe_status::NO_MASTER)),
        ("PLDMA_CQE_OVERLAP", signed(cqe_status::OVERLAP)),
        ("PLDMA_CQE_BAD_FLAGS", signed(cqe_status::BAD_FLAGS)),
        ("PLDMA_CQE_NO_LINK", signed(cqe_status::NO_LINK)),
        ("PLDMA_CQE_TIMEOUT", signed(cqe_status::TIMEOUT)),
        ("PLDMA_VF_SQ_TAIL", regs::vf::SQ_TAIL as u64),
        ("PLDMA_VF_SQ_HEAD", regs::vf::SQ_HEAD as u64),
        ("PLDMA_VF_CQ_HEAD", regs::vf::CQ_HEAD as u64),
        ("PLDMA_VF_CQ_TAIL", regs::vf::CQ_TAIL as u64),
        ("PLDMA_VF_CQ_ARM", regs::vf::CQ_ARM as u64),
        ("PLDMA_VF_CQ_ARM_ONCE", regs::VF_CQ_ARM_ONCE.into()),
    ];
    for (name, rust) in expect {
        assert_eq!(h.get(*name), Some(rust), "{name}: C header vs Rust");
    }
    // Every #define of the header is covered above or by the enum checks below.
    let enums = [
        ("PLDMA_STATE_", 5),
        ("PLDMA_ERR_", 10),
        ("PLDMA_CAUSE_", 2),
        ("PLDMA_QERR_", 4),
    ];
    for (prefix, n) in enums {
        assert_eq!(
            h.keys().filter(|k| k.starts_with(prefix)).count(),
            n,
            "{prefix}*"
        );
    }
    let covered = expect.len() + enums.iter().map(|e| e.1).sum::<usize>();
    assert_eq!(
        h.len(),
        covered,
        "the C header has constants the Rust map lacks"
    );
}

#[test]
fn rust_enums_match_c_header() {
    let h = header();
    for (name, st) in [
        ("PLDMA_STATE_IDLE", regs::State::Idle),
        ("PLDMA_STATE_BUSY", regs::State::Busy),
        ("PLDMA_STATE_DONE", regs::State::Done),
        ("PLDMA_STATE_FAULT", regs::State::Fault),
        ("PLDMA_STATE_ERROR", regs::State::Error),
    ] {
        assert_eq!(Status::decode(h[name] as u32).state, st, "{name}");
    }
    for (name, e) in [
        ("PLDMA_ERR_NONE", regs::Error::None),
        ("PLDMA_ERR_BAD_LEN", regs::Error::BadLen),
        ("PLDMA_ERR_BAD_ADDR", regs::Error::BadAddr),
        ("PLDMA_ERR_ABORTED", regs::Error::Aborted),
        ("PLDMA_ERR_NO_MASTER", regs::Error::NoMaster),
        ("PLDMA_ERR_OVERLAP", regs::Error::Overlap),
        ("PLDMA_ERR_BAD_FLAGS", regs::Error::BadFlags),
        ("PLDMA_ERR_NO_LINK", regs::Error::NoLink),
        ("PLDMA_ERR_REMOTE", regs::Error::Remote),
        ("PLDMA_ERR_TIMEOUT", regs::Error::Timeout),
    ] {
        assert_eq!(Status::decode((h[name] as u32) << 8).error, e, "{name}");
    }
    for (name, e) in [
        ("PLDMA_QERR_NONE", regs::QueueError::None),
        ("PLDMA_QERR_BAD_RING", regs::QueueError::BadRing),
        ("PLDMA_QERR_SQ_FETCH", regs::QueueError::SqFetch),
        ("PLDMA_QERR_CQ_WRITE", regs::QueueError::CqWrite),
    ] {
        assert_eq!(QStatus::decode((h[name] as u32) << 8).code, e, "{name}");
    }
    for (name, c) in [
        ("PLDMA_CAUSE_TRANSLATION", regs::FaultCause::Translation),
        ("PLDMA_CAUSE_BUS", regs::FaultCause::Bus),
    ] {
        assert_eq!(FaultInfo::decode((h[name] as u32) << 8).cause, c, "{name}");
    }
}

/// A signed header value as [`header`] stores it.
fn signed(v: i32) -> u64 {
    i64::from(v) as u64
}

#[test]
fn cqe_status_codes_follow_the_rule() {
    // The header spells each engine error's CQE status out; it is -(ERR_BASE + PLDMA_ERR_x).
    let h = header();
    for e in [
        "BAD_LEN",
        "BAD_ADDR",
        "ABORTED",
        "NO_MASTER",
        "OVERLAP",
        "BAD_FLAGS",
        "NO_LINK",
        "TIMEOUT",
    ] {
        let err = h[&format!("PLDMA_ERR_{e}")] as i64;
        let st = h[&format!("PLDMA_CQE_{e}")] as i64;
        assert_eq!(st, -(h["PLDMA_CQE_ERR_BASE"] as i64 + err), "PLDMA_CQE_{e}");
        assert_eq!(
            regs::cqe_status_of(Status::decode((err as u32) << 8).error) as i64,
            st,
            "{e}"
        );
    }
}
