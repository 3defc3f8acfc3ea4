// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The Rust ABI structs and ioctl numbers must equal what a C compiler makes of
//! include/uapi/linux/exanest_dma.h.

use exanest_core::abi::{
    self, Advise, Budget, Copy, Counters, Dereg, Info, Latency, Mbox, MboxWait, NetCounters, Queue,
    QueueWait, Reg, RegionStats, Wait,
};
use exanest_core::regs;
use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::process::Command;

/// (C expression, Rust value) pairs: sizes, field offsets and ioctl numbers.
fn expectations() -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = Vec::new();
    macro_rules! st {
        ($c:literal, $t:ty, [$($f:ident),*]) => {
            v.push((format!("sizeof(struct {})", $c), size_of::<$t>() as u64));
            $(v.push((format!("offsetof(struct {}, {})", $c, stringify!($f)), offset_of!($t, $f) as u64));)*
        };
    }
    st!(
        "exanest_dma_info",
        Info,
        [
            abi_version,
            hw_version,
            channels,
            modes,
            max_transfer,
            max_regions,
            max_inflight,
            context,
            contexts,
            node,
            endpoint,
            reserved
        ]
    );
    st!(
        "exanest_dma_reg",
        Reg,
        [
            addr,
            length,
            access,
            mode,
            flags,
            handle,
            touch_ahead,
            initiator,
            rkey
        ]
    );
    st!(
        "exanest_dma_advise",
        Advise,
        [addr, length, flags, reserved]
    );
    st!(
        "exanest_dma_latency",
        Latency,
        [total, queue, fault_in, map, handler]
    );
    st!(
        "exanest_dma_budget",
        Budget,
        [pages, evicted_pages, evictions, mapped_pages, reserved]
    );
    st!(
        "exanest_dma_region_stats",
        RegionStats,
        [handle, mode, faults, pages_resolved, reserved]
    );
    st!("exanest_dma_dereg", Dereg, [handle, flags]);
    st!(
        "exanest_dma_queue",
        Queue,
        [
            sq_addr,
            cq_addr,
            sq_log2,
            cq_log2,
            flags,
            context,
            channels,
            reserved,
            doorbell_offset
        ]
    );
    st!(
        "exanest_dma_queue_wait",
        QueueWait,
        [cq_head, flags, timeout_ns, error, reserved, error_addr]
    );
    st!("exanest_dma_mbox", Mbox, [addr, log2, flags]);
    st!(
        "exanest_dma_mbox_wait",
        MboxWait,
        [timeout_ns, flags, pending]
    );
    st!(
        "exanest_dma_copy",
        Copy,
        [src, dst, length, flags, channel, cookie]
    );
    st!(
        "exanest_dma_wait",
        Wait,
        [cookie, timeout_ns, flags, status, bytes_done]
    );
    st!(
        "exanest_dma_counters",
        Counters,
        [
            copies,
            copy_errors,
            bytes,
            regions,
            pages_mapped,
            pages_pinned,
            faults,
            faults_resolved,
            nacks,
            invalidations,
            iommu_faults,
            pages_resolved,
            touch_ahead_pages,
            retransmissions,
            huge_mappings,
            evicted_pages
        ]
    );
    st!(
        "exanest_dma_net_counters",
        NetCounters,
        [
            node,
            link,
            tx_packets,
            rx_packets,
            rx_dropped,
            rx_bad_crc,
            nacks_sent,
            nacks_received,
            resumes_sent,
            resumes_received,
            retransmitted_bytes,
            timeouts,
            duplicates,
            injected_drops,
            injected_corruptions,
            error_nacks,
            placed_bytes,
            probes,
            mbox_placed,
            rnr_sent
        ]
    );
    for (c, r) in [
        ("EXANEST_DMA_IOC_INFO", abi::IOC_INFO),
        ("EXANEST_DMA_IOC_REG", abi::IOC_REG),
        ("EXANEST_DMA_IOC_DEREG", abi::IOC_DEREG),
        ("EXANEST_DMA_IOC_COPY", abi::IOC_COPY),
        ("EXANEST_DMA_IOC_WAIT", abi::IOC_WAIT),
        ("EXANEST_DMA_IOC_COUNTERS", abi::IOC_COUNTERS),
        ("EXANEST_DMA_IOC_ADVISE", abi::IOC_ADVISE),
        ("EXANEST_DMA_IOC_LATENCY", abi::IOC_LATENCY),
        ("EXANEST_DMA_IOC_REGION_STATS", abi::IOC_REGION_STATS),
        ("EXANEST_DMA_IOC_BUDGET", abi::IOC_BUDGET),
        ("EXANEST_DMA_IOC_QUEUE_CREATE", abi::IOC_QUEUE_CREATE),
        ("EXANEST_DMA_IOC_QUEUE_WAIT", abi::IOC_QUEUE_WAIT),
        ("EXANEST_DMA_IOC_MBOX_CREATE", abi::IOC_MBOX_CREATE),
        ("EXANEST_DMA_IOC_NET_COUNTERS", abi::IOC_NET_COUNTERS),
        ("EXANEST_DMA_IOC_MBOX_WAIT", abi::IOC_MBOX_WAIT),
        ("EXANEST_DMA_MBOX_SLOT", abi::MBOX_SLOT as u32),
        ("EXANEST_DMA_MBOX_MAX", abi::MBOX_MAX),
        ("EXANEST_DMA_MBOX_LOG2_MAX", abi::MBOX_LOG2_MAX),
        (
            "EXANEST_DMA_MBOX_SRC_NODE_OFF",
            regs::mbox::SRC_NODE_OFF as u32,
        ),
        ("EXANEST_DMA_MBOX_SRC_EP_OFF", regs::mbox::SRC_EP_OFF as u32),
        ("EXANEST_DMA_MBOX_LEN_OFF", regs::mbox::LEN_OFF as u32),
        ("EXANEST_DMA_MBOX_FLAGS_OFF", regs::mbox::FLAGS_OFF as u32),
        ("EXANEST_DMA_MBOX_FLAG_PUT_IMM", regs::mbox::FLAG_PUT_IMM),
        ("EXANEST_DMA_MBOX_IMM_OFF", regs::mbox::IMM_OFF as u32),
        ("EXANEST_DMA_MBOX_ADDR_OFF", regs::mbox::ADDR_OFF as u32),
        ("EXANEST_DMA_MBOX_STAMP_OFF", regs::mbox::STAMP_OFF as u32),
        ("EXANEST_DMA_MBOX_DATA_OFF", regs::mbox::DATA_OFF as u32),
        ("EXANEST_DMA_QUEUE_LOG2_MIN", abi::QUEUE_LOG2_MIN),
        ("EXANEST_DMA_QUEUE_LOG2_MAX", abi::QUEUE_LOG2_MAX),
        ("EXANEST_DMA_QUEUE_ENTRY", abi::QUEUE_ENTRY as u32),
        ("EXANEST_DMA_QERR_SQ_FETCH", abi::QERR_SQ_FETCH),
        ("EXANEST_DMA_QERR_CQ_WRITE", abi::QERR_CQ_WRITE),
        ("EXANEST_DMA_LATENCY_BUCKETS", abi::LATENCY_BUCKETS as u32),
        ("EXANEST_DMA_REG_WINDOW", abi::REG_WINDOW),
        ("EXANEST_DMA_MAX_WINDOW", abi::MAX_WINDOW),
        ("EXANEST_DMA_WINDOW_ADAPTIVE", abi::WINDOW_ADAPTIVE),
        ("EXANEST_DMA_ADVISE_WRITE", abi::ADVISE_WRITE),
        ("EXANEST_DMA_ABI_VERSION", abi::ABI_VERSION),
        ("EXANEST_DMA_NO_CONTEXT", abi::NO_CONTEXT),
        ("EXANEST_DMA_MODE_PIN", abi::MODE_PIN),
        ("EXANEST_DMA_MODE_PREFAULT", abi::MODE_PREFAULT),
        ("EXANEST_DMA_MODE_ON_DEMAND", abi::MODE_ON_DEMAND),
        ("EXANEST_DMA_ACCESS_READ", abi::ACCESS_READ),
        ("EXANEST_DMA_ACCESS_WRITE", abi::ACCESS_WRITE),
        ("EXANEST_DMA_ACCESS_REMOTE_READ", abi::ACCESS_REMOTE_READ),
        ("EXANEST_DMA_ACCESS_REMOTE_WRITE", abi::ACCESS_REMOTE_WRITE),
        ("EXANEST_DMA_NO_NODE", abi::NO_NODE),
    ] {
        v.push((format!("(unsigned long long)({c})"), r as u64));
    }
    v
}

#[test]
fn c_and_rust_agree() {
    let exp = expectations();
    let dir = std::env::temp_dir().join(format!("exanest-uapi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut src = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <linux/exanest_dma.h>\nint main(void) {\n",
    );
    for (i, (expr, _)) in exp.iter().enumerate() {
        src += &format!("  printf(\"{i} %llu\\n\", (unsigned long long)({expr}));\n");
    }
    src += "  return 0;\n}\n";
    std::fs::write(dir.join("layout.c"), src).unwrap();
    let inc = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/uapi");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-Wall", "-Werror", "-I", inc, "-o"])
        .arg(dir.join("layout"))
        .arg(dir.join("layout.c"))
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "the uapi header does not compile");
    let out = Command::new(dir.join("layout")).output().unwrap();
    let got: HashMap<usize, u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (i, v) = l.split_once(' ').unwrap();
            (i.parse().unwrap(), v.parse().unwrap())
        })
        .collect();
    for (i, (expr, rust)) in exp.iter().enumerate() {
        assert_eq!(got.get(&i), Some(rust), "{expr}: C vs Rust");
    }
    std::fs::remove_dir_all(&dir).ok();
}
