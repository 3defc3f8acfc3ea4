// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The ExaNeSt PLDMA register map, version 2.6: contexts (each an SR-IOV virtual function on
//! PCI, so its own StreamID), each with its channels and (2.1) its user-level queues: a send
//! queue of [`Sqe`] descriptors and a completion queue of [`Cqe`] entries, rings in the
//! context's address space, with their doorbells in the context's VF page.
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

/// 2.3: the network port's global registers (Documentation/network.rst). Table entries are
/// written through a window: select, write the fields, then the control register commits.
pub mod net {
    /// Read-only: the node id (bits 15:0) and [`NODE_LINK`].
    pub const NODE: usize = 0x100;
    /// Read-only: bytes an op may have in flight.
    pub const WINDOW: usize = 0x104;
    /// Read-only: one-way link latency, ns.
    pub const LINK_LATENCY: usize = 0x108;
    /// Read-only: link bandwidth, MB/s.
    pub const LINK_BW: usize = 0x10c;
    /// First retransmission timeout in us (doubles at each timeout).
    pub const RTO_US: usize = 0x110;
    /// Timeouts in a row before an op ends with [`super::Error::Timeout`].
    pub const RETRIES: usize = 0x114;
    /// Injection: sent packets dropped per million.
    pub const DROP_PPM: usize = 0x118;
    /// Injection: sent packets with one bit flipped per million.
    pub const CORRUPT_PPM: usize = 0x11c;
    /// The endpoint [`EP_CTX`] is about.
    pub const EP_SEL: usize = 0x120;
    /// The selected endpoint's context ([`EP_CTX_MASK`], [`EP_RESIDENT`]).
    pub const EP_CTX: usize = 0x124;
    /// The rkey table entry the window is about (2.5: any free entry; the key names it).
    pub const RKEY_SEL: usize = 0x128;
    /// 2.5: the entry's key, low half (2.3 and 2.4: the tag, the rkey's high 32 bits, with
    /// the entry's index its low 32).
    pub const RKEY_KEY_LO: usize = 0x12c;
    /// The region's first byte (VA), low half.
    pub const RKEY_BASE_LO: usize = 0x130;
    /// High half of [`RKEY_BASE_LO`].
    pub const RKEY_BASE_HI: usize = 0x134;
    /// The region's length in bytes, low half.
    pub const RKEY_LEN_LO: usize = 0x138;
    /// High half of [`RKEY_LEN_LO`].
    pub const RKEY_LEN_HI: usize = 0x13c;
    /// The endpoint owning the region.
    pub const RKEY_EP: usize = 0x140;
    /// [`RKEY_VALID`] and the rights; writing it commits the entry.
    pub const RKEY_CTRL: usize = 0x144;
    /// 2.5: the entry's key, high half: an rkey is 64 random bits, looked up with its
    /// endpoint among the valid entries.
    pub const RKEY_KEY_HI: usize = 0x148;
    /// 2.5: key failures from one source node within one second before the engine
    /// quarantines it (0: never).
    pub const KEYFAIL_LIMIT: usize = 0x14c;
    /// 2.5: the source node [`SRC_KEYFAILS`] is about.
    pub const SRC_SEL: usize = 0x150;
    /// 2.5, read-only: key failures from node [`SRC_SEL`] since it was last released
    /// (saturating).
    pub const SRC_KEYFAILS: usize = 0x154;
    /// 2.5: bit n = node n is quarantined (its ops are dropped); write-one-to-release.
    pub const QUARANTINE_LO: usize = 0x158;
    /// [`QUARANTINE_LO`] for nodes 32-63.
    pub const QUARANTINE_HI: usize = 0x15c;
    /// 2.7, read-only congestion counters: counter n at `CC_BASE + 4 * n`, free-running u32.
    pub const CC_BASE: usize = 0x160;
    /// Congestion counter: data packets the ingress queue had no room for.
    pub const CC_INGRESS_DROPS: usize = 0;
    /// Congestion counter: data packets the ingress queue marked congestion experienced.
    pub const CC_CE_MARKED: usize = 1;
    /// Congestion counter: ACKs received that echo a mark, and GET data received marked.
    pub const CC_ECE_RECEIVED: usize = 2;
    /// Congestion counter: times a peer's window was cut.
    pub const CC_WINDOW_CUTS: usize = 3;
    /// Congestion counter: tail-loss probes sent.
    pub const CC_TAIL_PROBES: usize = 4;
    /// Not a counter: the ingress queue's longest since RESET or a write to it, bytes.
    pub const CC_QUEUE_PEAK: usize = 5;
    /// Number of congestion counters.
    pub const CC_COUNTERS: usize = 6;
    /// Read-only counters: counter n at `CNT_BASE + 4 * n`, free-running u32.
    pub const CNT_BASE: usize = 0x180;
    /// Counter: packets sent.
    pub const CNT_TX_PACKETS: usize = 0;
    /// Counter: packets received.
    pub const CNT_RX_PACKETS: usize = 1;
    /// Counter: packets dropped (malformed, checksum, another node, no room).
    pub const CNT_RX_DROPPED: usize = 2;
    /// Counter: packets with a bad checksum.
    pub const CNT_RX_BAD_CRC: usize = 3;
    /// Counter: FAULT, NOT_READY and SEQUENCE NACKs sent.
    pub const CNT_NACKS_SENT: usize = 4;
    /// Counter: NACKs received.
    pub const CNT_NACKS_RECEIVED: usize = 5;
    /// Counter: RESUMEs sent.
    pub const CNT_RESUMES_SENT: usize = 6;
    /// Counter: RESUMEs received.
    pub const CNT_RESUMES_RECEIVED: usize = 7;
    /// Counter: payload bytes sent again.
    pub const CNT_RETRANS_BYTES: usize = 8;
    /// Counter: retransmission timeouts.
    pub const CNT_TIMEOUTS: usize = 9;
    /// Counter: data packets dropped as duplicates or beyond a gap.
    pub const CNT_DUPLICATES: usize = 10;
    /// Counter: packets the drop injection dropped.
    pub const CNT_INJECTED_DROPS: usize = 11;
    /// Counter: packets the corruption injection changed.
    pub const CNT_INJECTED_CORRUPT: usize = 12;
    /// Counter: error NACKs sent.
    pub const CNT_ERROR_NACKS: usize = 13;
    /// Counter: bytes placed for remote ops.
    pub const CNT_PLACED_BYTES: usize = 14;
    /// Counter: probes of a paused op (the receiver owes a RESUME; not timeouts).
    pub const CNT_PROBES: usize = 15;
    /// 2.4, counter: mailbox messages placed in this node's rings.
    pub const CNT_MBOX_PLACED: usize = 16;
    /// 2.4, counter: RNR NACKs sent (a full ring).
    pub const CNT_RNR_SENT: usize = 17;
    /// 2.5, counter: key failures (every source).
    pub const CNT_KEY_FAILS: usize = 18;
    /// 2.5, counter: packets dropped from quarantined sources.
    pub const CNT_QUARANTINED: usize = 19;
    /// Number of counters.
    pub const COUNTERS: usize = 20;
    /// 2.4, write-one-to-clear: [`IRQ_EP_WANTED`].
    pub const IRQ: usize = 0x1d0;
    /// [`IRQ`]: an endpoint without a context received an op; the engine interrupts.
    pub const IRQ_EP_WANTED: u32 = 1 << 0;
    /// 2.8, injection: sent packets held back per million (later ones overtake them).
    pub const REORDER_PPM: usize = 0x1d4;
    /// 2.8, injection: the longest a held packet waits, us (at random; 0 reads 1).
    pub const REORDER_US: usize = 0x1d8;
    /// 2.9: the node the entry's key is bound to, with [`RKEY_BOUND`] (committed with
    /// [`RKEY_CTRL`]).
    pub const RKEY_NODE: usize = 0x1dc;
    /// 2.4, read-only: bitmap of the endpoints with ops waiting for a context, 32 a word.
    pub const EP_WANTED: usize = 0x1e0;
    /// Words of [`EP_WANTED`].
    pub const EP_WANTED_WORDS: usize = 8;
    /// Node ids are below this.
    pub const MAX_NODES: usize = 64;
    /// Endpoints are below this.
    pub const MAX_EPS: usize = 256;
    /// Entries of the rkey table.
    pub const MAX_RKEYS: usize = 256;
    /// Remote ops the engine receives at once.
    pub const RX_OPS: usize = 64;
    /// [`NODE`]: the node id.
    pub const NODE_ID_MASK: u32 = 0xffff;
    /// [`NODE`]: a backend is attached and its link is up.
    pub const NODE_LINK: u32 = 1 << 16;
    /// [`EP_CTX`]: the context.
    pub const EP_CTX_MASK: u32 = 0xff;
    /// [`EP_CTX`]: the endpoint holds the context; writing it RESUMEs its NOT_READY ops.
    pub const EP_RESIDENT: u32 = 1 << 31;
    /// 2.5, [`EP_CTX`]: a process holds the endpoint; writing it without ends the
    /// endpoint's unfinished receive ops.
    pub const EP_OPEN: u32 = 1 << 30;
    /// 2.5, [`EP_CTX`]: the endpoint's process has a mailbox; a MAILBOX for an endpoint
    /// without [`EP_OPEN`] and this is refused at once and wakes no one.
    pub const EP_MBOX: u32 = 1 << 29;
    /// [`RKEY_CTRL`]: the entry is valid.
    pub const RKEY_VALID: u32 = 1 << 0;
    /// [`RKEY_CTRL`]: remote read.
    pub const RKEY_READ: u32 = 1 << 1;
    /// [`RKEY_CTRL`]: remote write.
    pub const RKEY_WRITE: u32 = 1 << 2;
    /// 2.9, [`RKEY_CTRL`]: the key works only in packets from node [`RKEY_NODE`] (the
    /// initiator it was handed to); from any other, it fails as a wrong key does.
    pub const RKEY_BOUND: u32 = 1 << 3;

    /// The link's settings a privileged user may change (the driver's debugfs `link` file):
    /// their names, registers and largest values, in the order the file lists them.
    pub const TUNABLES: [(&str, usize, u32); 7] = [
        ("rto_us", RTO_US, 10_000_000),
        ("retries", RETRIES, 1000),
        ("drop_ppm", DROP_PPM, 1_000_000),
        ("corrupt_ppm", CORRUPT_PPM, 1_000_000),
        ("key_fail_limit", KEYFAIL_LIMIT, 1_000_000),
        ("reorder_ppm", REORDER_PPM, 1_000_000),
        ("reorder_us", REORDER_US, 1_000_000),
    ];

    /// The register map minor version that brought tunable register `reg` (the port came with
    /// 2.3): an engine of an older map has no such register.
    pub const fn tunable_since(reg: usize) -> u32 {
        match reg {
            KEYFAIL_LIMIT => 5,
            REORDER_PPM | REORDER_US => 8,
            _ => 3,
        }
    }

    /// Parse what is written to the `link` file: `NAME VALUE` pairs (space, `=` or newline
    /// separated), each a [`TUNABLES`] name and a decimal value in range. The register and
    /// value of each pair, in order, into `out`: how many. None for anything else (nothing is
    /// to be written then: the caller writes only after the whole input parsed).
    pub fn parse_tunables(input: &[u8], out: &mut [(usize, u32); TUNABLES.len()]) -> Option<usize> {
        let mut words = input
            .split(|b| b.is_ascii_whitespace() || *b == b'=')
            .filter(|w| !w.is_empty());
        let mut n = 0;
        while let Some(name) = words.next() {
            let &(_, reg, max) = TUNABLES.iter().find(|t| t.0.as_bytes() == name)?;
            let value = words.next()?;
            if value.is_empty() || value.len() > 10 || !value.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let v = value.iter().fold(0u64, |a, d| a * 10 + u64::from(d - b'0'));
            if v > u64::from(max) || n == out.len() {
                return None;
            }
            out[n] = (reg, v as u32);
            n += 1;
        }
        (n > 0).then_some(n)
    }

    /// Parse what is written to the `quarantine` file: `release N` (a node id) or
    /// `release all`, several separated by spaces or newlines. The mask of the nodes to
    /// release (bit n: node n); None for anything else.
    pub fn parse_release(input: &[u8]) -> Option<u64> {
        let mut words = input
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty());
        let mut mask = 0u64;
        let mut any = false;
        while let Some(w) = words.next() {
            if w != b"release" {
                return None;
            }
            let node = words.next()?;
            if node == b"all" {
                mask = u64::MAX;
            } else {
                if node.is_empty() || node.len() > 2 || !node.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                let n = node
                    .iter()
                    .fold(0usize, |a, d| a * 10 + usize::from(d - b'0'));
                if n >= MAX_NODES {
                    return None;
                }
                mask |= 1 << n;
            }
            any = true;
        }
        any.then_some(mask)
    }
}

/// 2.3: a channel's network registers, at `CH_NET_BASE + n * CH_NET_STRIDE` in its context's
/// block.
pub mod ch_net {
    /// Block of channel 0.
    pub const BASE: usize = 0x300;
    /// Distance between channels' blocks.
    pub const STRIDE: usize = 0x20;
    /// The operation, [`OP_COPY`], [`OP_PUT`] or [`OP_GET`].
    pub const OP: usize = 0x00;
    /// The remote node.
    pub const PEER: usize = 0x04;
    /// The remote endpoint.
    pub const EP: usize = 0x08;
    /// The remote key, low half.
    pub const RKEY_LO: usize = 0x0c;
    /// High half of [`RKEY_LO`].
    pub const RKEY_HI: usize = 0x10;
    /// Read-only: the op id of the current or last network op.
    pub const OPID: usize = 0x14;
    /// Read-only, `NET_RX` channels: the sending node.
    pub const SRC: usize = 0x18;
    /// Read-only: the receiver's status (a negative errno) of [`super::Error::Remote`].
    pub const STATUS: usize = 0x1c;
    /// A local copy.
    pub const OP_COPY: u32 = 0;
    /// An RDMA write to a remote node.
    pub const OP_PUT: u32 = 1;
    /// An RDMA read from a remote node: `SRC` the remote address, `DST` local.
    pub const OP_GET: u32 = 2;
    /// 2.4: a message of at most [`super::mbox::MAX`] bytes into the mailbox of `EP` at `PEER`.
    pub const OP_MAILBOX: u32 = 3;
    /// 2.6: a PUT with 32 bits of immediate data ([`SQE_IMM_OFF`]): once its last byte is
    /// placed, the receiver writes a completion with them in the endpoint's mailbox ring
    /// ([`super::mbox::FLAG_PUT_IMM`]). From a descriptor only (`OP` ends it `BAD_FLAGS`).
    pub const OP_PUT_IMM: u32 = 4;
    /// The op field of [`OP`] and of a descriptor's flags.
    pub const OP_MASK: u32 = 0xf;
    /// A PUT's second queue entry: the remote key (u64).
    pub const SQE_RKEY_OFF: usize = 0;
    /// A PUT's second queue entry: the remote node (u16).
    pub const SQE_PEER_OFF: usize = 8;
    /// A PUT's second queue entry: 0 (u16).
    pub const SQE_RSVD0_OFF: usize = 10;
    /// A PUT's second queue entry: the remote endpoint (u32).
    pub const SQE_EP_OFF: usize = 12;
    /// 2.6, a PUT_IMM's second queue entry: the immediate data (u32; 0 for the other ops).
    pub const SQE_IMM_OFF: usize = 16;
    /// A PUT's second queue entry: 12 bytes of 0 (2.5 and before: 16, from offset 16).
    pub const SQE_RSVD1_OFF: usize = 20;
}

/// Value of the ID register ("EXNS").
pub const ID_MAGIC: u32 = 0x4558_4e53;
/// Register map major version this crate speaks.
pub const VERSION_MAJOR: u32 = 2;
/// Register map minor version this crate speaks.
pub const VERSION_MINOR: u32 = 11;
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
    /// Write-one-to-clear, see [`super::ctx_irq`]: bit n set when channel n of the context
    /// raised its interrupt; the queue's events above.
    pub const IRQ_STATUS: usize = 0x000;
    /// Write-only command strobes, see [`super::ctx_ctrl`].
    pub const CTRL: usize = 0x004;
    /// Read-only, see [`super::ctx_status`].
    pub const STATUS: usize = 0x008;
    /// 2.1: send queue ring IOVA, low half (4 KiB aligned).
    pub const SQ_BASE_LO: usize = 0x010;
    /// 2.1: send queue ring IOVA, high half.
    pub const SQ_BASE_HI: usize = 0x014;
    /// 2.1: completion queue ring IOVA, low half (4 KiB aligned).
    pub const CQ_BASE_LO: usize = 0x018;
    /// 2.1: completion queue ring IOVA, high half.
    pub const CQ_BASE_HI: usize = 0x01c;
    /// 2.1: ring sizes and the channels the queue may use, see [`super::q_cfg`].
    pub const Q_CFG: usize = 0x020;
    /// 2.1: [`super::q_ctrl::ENABLE`].
    pub const Q_CTRL: usize = 0x024;
    /// 2.1: read-only, see [`super::QStatus`].
    pub const Q_STATUS: usize = 0x028;
    /// 2.1: read-only IOVA a queue error is about, low half.
    pub const Q_ERR_LO: usize = 0x02c;
    /// 2.1: read-only IOVA a queue error is about, high half.
    pub const Q_ERR_HI: usize = 0x030;
    /// 2.1: write-only: post an event entry in the CQ, see [`super::evt_post`].
    pub const EVT_POST: usize = 0x034;
    /// 2.1: the next event entry's `wr_id`, low half.
    pub const EVT_ARG_LO: usize = 0x038;
    /// 2.1: the next event entry's `wr_id`, high half.
    pub const EVT_ARG_HI: usize = 0x03c;
    /// 2.2: the queue's SQ producer index, as the VF page has it; writable while the queue is
    /// disabled (see [`super::q_ctrl::RESTORE`]).
    pub const Q_SQ_TAIL: usize = 0x040;
    /// 2.2: the queue's SQ consumer index.
    pub const Q_SQ_HEAD: usize = 0x044;
    /// 2.2: the queue's CQ consumer index.
    pub const Q_CQ_HEAD: usize = 0x048;
    /// 2.2: the queue's CQ producer index.
    pub const Q_CQ_TAIL: usize = 0x04c;
    /// 2.2: the kernel queue's send ring, an address the PF issues, low half.
    pub const KQ_SQ_BASE_LO: usize = 0x060;
    /// 2.2: high half.
    pub const KQ_SQ_BASE_HI: usize = 0x064;
    /// 2.2: the kernel queue's completion ring, an address the PF issues, low half.
    pub const KQ_CQ_BASE_LO: usize = 0x068;
    /// 2.2: high half.
    pub const KQ_CQ_BASE_HI: usize = 0x06c;
    /// 2.2: as [`Q_CFG`].
    pub const KQ_CFG: usize = 0x070;
    /// 2.2: [`super::q_ctrl::ENABLE`] only.
    pub const KQ_CTRL: usize = 0x074;
    /// 2.2: read-only, as [`Q_STATUS`].
    pub const KQ_STATUS: usize = 0x078;
    /// 2.2: read-only IOVA a kernel queue error is about, low half.
    pub const KQ_ERR_LO: usize = 0x07c;
    /// 2.2: high half.
    pub const KQ_ERR_HI: usize = 0x080;
    /// 2.2: the kernel queue's SQ producer index: writing it rings its doorbell.
    pub const KQ_SQ_TAIL: usize = 0x084;
    /// 2.2: read-only SQ consumer index.
    pub const KQ_SQ_HEAD: usize = 0x088;
    /// 2.2: CQ consumer index, written by the kernel.
    pub const KQ_CQ_HEAD: usize = 0x08c;
    /// 2.2: read-only CQ producer index.
    pub const KQ_CQ_TAIL: usize = 0x090;
    /// 2.4: the mailbox ring's address ([`super::mbox`]), low half.
    pub const MBOX_BASE_LO: usize = 0x0a0;
    /// High half of [`MBOX_BASE_LO`].
    pub const MBOX_BASE_HI: usize = 0x0a4;
    /// 2.4: the ring's size and [`super::mbox::CFG_ENABLE`].
    pub const MBOX_CFG: usize = 0x0a8;
    /// 2.4: the reader's index (free-running), as [`super::vf::MBOX_HEAD`].
    pub const MBOX_HEAD: usize = 0x0ac;
    /// 2.4: messages placed (free-running); writable while the mailbox is disabled.
    pub const MBOX_TAIL: usize = 0x0b0;
    /// 2.6: write [`super::mbox::ARM_ONCE`] to arm the mailbox event, as
    /// [`super::vf::MBOX_ARM`]; reads `ARM_ONCE` while it is armed.
    pub const MBOX_ARM: usize = 0x0b4;
    /// 2.11: the fault record ring's address, low half ([`super::frec`]), issued by the PF.
    pub const FREC_BASE_LO: usize = 0x0c0;
    /// 2.11: the fault record ring's address, high half.
    pub const FREC_BASE_HI: usize = 0x0c4;
    /// 2.11: the fault record ring's log2 of records and enable ([`super::frec`]).
    pub const FREC_CFG: usize = 0x0c8;
    /// 2.11: the reader's index (free-running): records before it are free.
    pub const FREC_HEAD: usize = 0x0cc;
    /// 2.11, read-only: records written (free-running).
    pub const FREC_TAIL: usize = 0x0d0;
}

/// 2.11, the fault record ring: when a channel of the context enters fault-wait, the engine
/// writes a record of the fault (what the channel's fault registers say) at `FREC_TAIL` mod
/// 2^LOG2, [`STAMP_OFF`] last, before it raises the channel's interrupt status bit; the
/// record of free-running index `i` is complete when its stamp reads `i + 1`. No room (or a
/// failed write): no record, and [`super::ctx_irq::FREC_LOST`]; the registers still say
/// everything.
pub mod frec {
    /// `FREC_CFG`: log2 of the records.
    pub const CFG_LOG2_MASK: u32 = 0x1f;
    /// `FREC_CFG`: the engine writes records.
    pub const CFG_ENABLE: u32 = 1 << 31;
    /// Largest log2 of the records.
    pub const LOG2_MAX: u32 = 12;
    /// Bytes of a record (and the ring's alignment).
    pub const SIZE: usize = 64;
    /// The faulting address (u64), as `FAULT_LO`/`_HI`.
    pub const ADDR_OFF: usize = 0;
    /// `FAULT_INFO` (u32).
    pub const INFO_OFF: usize = 8;
    /// `ORIGIN` (u32).
    pub const ORIGIN_OFF: usize = 12;
    /// `WRID_LO`/`_HI` (u64).
    pub const WRID_OFF: usize = 16;
    /// The end of the faulting transfer's bytes in the faulting direction (u64), as `SRC` or
    /// `DST` plus `LEN` read in fault-wait (2.10).
    pub const END_OFF: usize = 24;
    /// `CH_NET_SRC` (u32): a receiver fault's sending node.
    pub const NET_SRC_OFF: usize = 32;
    /// `CH_NET_OPID` (u32).
    pub const NET_OPID_OFF: usize = 36;
    /// The channel (bits 7:0) and its fault number for this fault (bits 15:8) (u32).
    pub const CHAN_OFF: usize = 40;
    /// `DONE_BYTES` (u32).
    pub const DONE_OFF: usize = 44;
    /// The record's free-running index + 1 (u32), written last: the record is complete.
    pub const STAMP_OFF: usize = 60;
}

/// Fields of [`ctx::EVT_POST`]: the event entry's `bytes` (a count) and its kind (not 0),
/// which the entry carries in its flags ([`Cqe::KIND_SHIFT`]).
pub mod evt_post {
    /// Mask of the count.
    pub const COUNT_MASK: u32 = 0x00ff_ffff;
    /// Shift of the kind.
    pub const KIND_SHIFT: u32 = 24;
    /// Mask of the kind.
    pub const KIND_MASK: u32 = 0xff00_0000;

    /// The EVT_POST value for an event of `kind` (1..=255) with `count` (saturated to 24
    /// bits).
    pub const fn encode(kind: u8, count: u64) -> u32 {
        let c = if count > COUNT_MASK as u64 {
            COUNT_MASK
        } else {
            count as u32
        };
        ((kind as u32) << KIND_SHIFT) | c
    }
}

/// Bits of [`ctx::IRQ_STATUS`].
pub mod ctx_irq {
    /// Bit n: channel n raised its interrupt (for a queue transfer: a fault only).
    pub const CHANNELS: u32 = 0xff;
    /// 2.1: the armed completion queue event fired.
    pub const CQ: u32 = 1 << 8;
    /// 2.1: the queue stopped on an error.
    pub const QERR: u32 = 1 << 9;
    /// 2.2: the kernel queue wrote a completion (every one raises it).
    pub const KCQ: u32 = 1 << 10;
    /// 2.2: the kernel queue stopped on an error.
    pub const KQERR: u32 = 1 << 11;
    /// 2.6: the armed mailbox event fired: the ring holds a message its reader has not taken.
    pub const MBOX: u32 = 1 << 12;
    /// 2.11: a fault's record found no room in the fault record ring ([`super::frec`]).
    pub const FREC_LOST: u32 = 1 << 13;
}

/// Fields of [`ctx::Q_CFG`], latched when the queue is enabled.
pub mod q_cfg {
    /// Shift of log2 of the send queue's entries.
    pub const SQ_SHIFT: u32 = 0;
    /// Mask of log2 of the send queue's entries.
    pub const SQ_MASK: u32 = 0x1f;
    /// Shift of log2 of the completion queue's entries.
    pub const CQ_SHIFT: u32 = 8;
    /// Mask of log2 of the completion queue's entries.
    pub const CQ_MASK: u32 = 0x1f00;
    /// Shift of the mask of channels the queue may use (0: every channel).
    pub const CHAN_SHIFT: u32 = 16;
    /// Mask of the mask of channels the queue may use.
    pub const CHAN_MASK: u32 = 0xff_0000;
    /// Smallest log2 of a ring's entries.
    pub const LOG2_MIN: u32 = 1;
    /// Largest log2 of a ring's entries.
    pub const LOG2_MAX: u32 = 12;
    /// Alignment of a ring's base, bytes.
    pub const RING_ALIGN: u64 = 0x1000;

    /// The Q_CFG value for rings of `1 << log2_sq` and `1 << log2_cq` entries, the queue using
    /// the channels in `channels` (bit n: channel n; 0: all). `None` when a size is out of
    /// range.
    pub const fn encode(log2_sq: u32, log2_cq: u32, channels: u8) -> Option<u32> {
        if log2_sq < LOG2_MIN || log2_sq > LOG2_MAX || log2_cq < LOG2_MIN || log2_cq > LOG2_MAX {
            return None;
        }
        Some((log2_sq << SQ_SHIFT) | (log2_cq << CQ_SHIFT) | ((channels as u32) << CHAN_SHIFT))
    }
}

/// Bits of [`ctx::Q_CTRL`].
pub mod q_ctrl {
    /// 0 to 1: latch the bases and Q_CFG and set the indices to 0; 1 to 0: stop the queue,
    /// aborting its transfers in flight.
    pub const ENABLE: u32 = 1 << 0;
    /// 2.2, with ENABLE 0 to 1: keep the indices the kernel wrote (`Q_SQ_TAIL`..`Q_CQ_TAIL`)
    /// and take the descriptors posted between them; indices more than a ring apart are
    /// `BAD_RING`.
    pub const RESTORE: u32 = 1 << 1;
    /// 2.2, with ENABLE: arm the CQ event, as the VF's CQ_ARM does.
    pub const ARM: u32 = 1 << 2;
}

/// A user-level queue's free-running indices (register map 2.2), as the kernel saves them when
/// it takes the queue's context away and restores them on the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueIndices {
    /// Descriptors posted.
    pub sq_tail: u32,
    /// Descriptors the engine took.
    pub sq_head: u32,
    /// Completions software consumed.
    pub cq_head: u32,
    /// Completions the engine wrote.
    pub cq_tail: u32,
    /// The CQ event was armed.
    pub armed: bool,
}

impl QueueIndices {
    /// Whether a queue in this state, with `st` its status, may leave its context: nothing in
    /// flight and nothing posted that the engine has not taken, so that stopping it loses no
    /// work; or stopped on an error, which it keeps.
    pub const fn movable(&self, st: &QStatus) -> bool {
        st.error || (st.enabled && !st.busy && self.sq_head == self.sq_tail)
    }

    /// The Q_CTRL value that enables the queue again where it was.
    pub const fn restore_ctrl(&self) -> u32 {
        q_ctrl::ENABLE | q_ctrl::RESTORE | if self.armed { q_ctrl::ARM } else { 0 }
    }
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
// The queue registers sit between the context's registers and its channels'.
const _: () = assert!(ctx::STATUS < ctx::SQ_BASE_LO && ctx::Q_ERR_HI < CH_BASE);
// A channel's queue registers fit in its block; the doorbells in the VF's page.
const _: () = assert!(ch::NACK_STATUS < CH_STRIDE && vf::CQ_ARM < VF_MMIO_SIZE);

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
    /// 2.1, read-write: send queue producer index (free-running); writing it rings the doorbell.
    pub const SQ_TAIL: usize = 0x040;
    /// 2.1, read-only: descriptors the engine has taken (free-running).
    pub const SQ_HEAD: usize = 0x044;
    /// 2.1, read-write: completion queue consumer index (free-running), written by software.
    pub const CQ_HEAD: usize = 0x048;
    /// 2.1, read-only: completion queue entries written (free-running).
    pub const CQ_TAIL: usize = 0x04c;
    /// 2.1, write-only: [`super::VF_CQ_ARM_ONCE`] arms the completion queue event.
    pub const CQ_ARM: usize = 0x050;
    /// 2.4, read-write: the mailbox reader's index (free-running); writing it frees slots.
    pub const MBOX_HEAD: usize = 0x054;
    /// 2.4, read-only: messages placed in the ring (free-running).
    pub const MBOX_TAIL: usize = 0x058;
    /// 2.6, write-only: [`super::mbox::ARM_ONCE`] arms the mailbox event.
    pub const MBOX_ARM: usize = 0x05c;
}

/// 2.4: the mailbox's receive ring (Documentation/network.rst, "The mailbox"): 2^log2 slots of
/// [`SLOT`] bytes in the receiving context's address space.
pub mod mbox {
    /// `MBOX_CFG`: log2 of the slots.
    pub const CFG_LOG2_MASK: u32 = 0x1f;
    /// `MBOX_CFG`: the mailbox takes messages.
    pub const CFG_ENABLE: u32 = 1 << 31;
    /// Largest log2 of the slots.
    pub const LOG2_MAX: u32 = 12;
    /// Bytes of a message, at most.
    pub const MAX: u32 = 256;
    /// Bytes of a slot: the header, then the message.
    pub const SLOT: usize = 320;
    /// The sending node (u16).
    pub const SRC_NODE_OFF: usize = 0;
    /// The sending endpoint (u32).
    pub const SRC_EP_OFF: usize = 4;
    /// Bytes of the message (u32).
    pub const LEN_OFF: usize = 8;
    /// The sender's op id (u32).
    pub const OPID_OFF: usize = 12;
    /// The slot's free-running index + 1 (u32), written last: the slot is complete.
    pub const STAMP_OFF: usize = 60;
    /// 2.6: what the slot holds (u32): 0 a message, [`FLAG_PUT_IMM`] a put's completion.
    pub const FLAGS_OFF: usize = 16;
    /// 2.6, [`FLAGS_OFF`]: the slot is the completion of a PUT_IMM to the endpoint: no message;
    /// `LEN` is the put's length, [`IMM_OFF`] its immediate data, [`ADDR_OFF`] its address
    /// here, `SRC_EP` unknown (`u32::MAX`: the put names only its key).
    pub const FLAG_PUT_IMM: u32 = 1 << 0;
    /// 2.6: a put's immediate data (u32).
    pub const IMM_OFF: usize = 20;
    /// 2.6: a put's first byte here (u64).
    pub const ADDR_OFF: usize = 24;
    /// The message.
    pub const DATA_OFF: usize = 64;
    /// 2.6, `MBOX_ARM`: arm the mailbox event once. It fires (`ctx_irq::MBOX`) when the ring
    /// holds a message the reader has not taken (`MBOX_TAIL != MBOX_HEAD`): at once if it
    /// does already, else at the next message placed.
    pub const ARM_ONCE: u32 = 1 << 0;
}

/// Value of a virtual function's ID register ("EXNV").
pub const VF_ID_MAGIC: u32 = 0x4558_4e56;
/// Value written to [`vf::CQ_ARM`] to arm the completion queue event.
pub const VF_CQ_ARM_ONCE: u32 = 1 << 0;

/// Channel register offsets, relative to the channel's block.
///
/// `SRC`, `DST` and `LEN` read back what was written, except (2.10) in fault-wait: then the
/// faulting transfer's own range (a descriptor's, or a receiver fault's op here: `DST` a
/// WRITE's destination, `SRC` a READ_REQ's source, `LEN` 0 for a MAILBOX), up to whose end
/// the driver maps ahead.
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
    /// 2.1, read-only: where the current or last transfer came from, see [`super::origin`].
    pub const ORIGIN: usize = 0x30;
    /// 2.1, read-only: its descriptor's wr_id, low half (0 for a START).
    pub const WRID_LO: usize = 0x34;
    /// 2.1, read-only: its descriptor's wr_id, high half.
    pub const WRID_HI: usize = 0x38;
    /// 2.1, write-only: the CQE status the next NACK of a queue transfer reports.
    pub const NACK_STATUS: usize = 0x3c;
}

/// Bits of [`ch::ORIGIN`].
pub mod origin {
    /// The transfer came from the send queue (else from START).
    pub const QUEUE: u32 = 1 << 31;
    /// 2.2, with `QUEUE`: from the kernel queue's.
    pub const KERNEL: u32 = 1 << 30;
    /// 2.3: a receiver fault of a remote op, reported on this channel (RESUME and NACK answer
    /// the remote sender).
    pub const NET_RX: u32 = 1 << 29;
    /// The send queue index of its descriptor, modulo 2^16.
    pub const SQ_INDEX_MASK: u32 = 0xffff;
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
    /// 2.3: the engine has a network port ([`net`]).
    pub const NET: u32 = 1 << 12;
    /// 2.4: the mailbox ([`mbox`]).
    pub const MAILBOX: u32 = 1 << 13;
    /// 2.11: the fault record ring ([`frec`]) and fault numbers ([`Status::FAULT_SEQ_MASK`]).
    pub const FREC: u32 = 1 << 14;
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
    /// 2.11, with RESUME or NACK: answer only the fault numbered [`SEQ_MASK`]'s value (else
    /// rejected): an answer to a fault that ended cannot end the channel's next one.
    pub const SEQ_CHECK: u32 = 1 << 9;
    /// 2.11: shift of the fault number a [`SEQ_CHECK`] answer names.
    pub const SEQ_SHIFT: u32 = 24;
    /// 2.11: mask of the fault number a [`SEQ_CHECK`] answer names.
    pub const SEQ_MASK: u32 = 0xff00_0000;
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
    /// 2.1: a queue descriptor's flags are not 0 (queue transfers only).
    BadFlags,
    /// 2.3: a network op with no port or its link down.
    NoLink,
    /// 2.3: the receiver refused the op ([`ch_net::STATUS`] says why).
    Remote,
    /// 2.3: the peer stayed silent through the retries.
    Timeout,
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
            6 => Error::BadFlags,
            7 => Error::NoLink,
            8 => Error::Remote,
            9 => Error::Timeout,
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
            Error::BadFlags => 6,
            Error::NoLink => 7,
            Error::Remote => 8,
            Error::Timeout => 9,
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
    /// 2.11: shift of the channel's fault number (its faults modulo 256).
    pub const FAULT_SEQ_SHIFT: u32 = 24;
    /// 2.11: mask of the channel's fault number.
    pub const FAULT_SEQ_MASK: u32 = 0xff00_0000;

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

/// Why a queue stopped, bits 15:8 of [`ctx::Q_STATUS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueError {
    /// No error.
    None,
    /// Enabled with a bad configuration: a base misaligned or wrapping, a ring size out of
    /// range, or a channel mask naming no channel of the engine.
    BadRing,
    /// Reading a descriptor failed (translation, bus, or the VF not bus-mastering).
    SqFetch,
    /// Writing a completion queue entry failed.
    CqWrite,
    /// A value this version does not know.
    Unknown(u8),
}

impl QueueError {
    /// The error for the value of the Q_STATUS.error field.
    pub const fn from_field(v: u8) -> Self {
        match v {
            0 => QueueError::None,
            1 => QueueError::BadRing,
            2 => QueueError::SqFetch,
            3 => QueueError::CqWrite,
            e => QueueError::Unknown(e),
        }
    }

    /// The value of the Q_STATUS.error field for this error.
    pub const fn field(self) -> u8 {
        match self {
            QueueError::None => 0,
            QueueError::BadRing => 1,
            QueueError::SqFetch => 2,
            QueueError::CqWrite => 3,
            QueueError::Unknown(v) => v,
        }
    }
}

/// A decoded [`ctx::Q_STATUS`] value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QStatus {
    /// The queue is enabled (Q_CTRL.ENABLE).
    pub enabled: bool,
    /// The queue stopped on an error: no fetch, no completion until re-enabled.
    pub error: bool,
    /// An event found no room in the CQ and was dropped (until the next enable).
    pub evt_lost: bool,
    /// 2.2: a queue transfer is in flight.
    pub busy: bool,
    /// 2.2: the CQ event is armed.
    pub armed: bool,
    /// Why (meaningful when `error`).
    pub code: QueueError,
}

impl QStatus {
    /// The enabled bit.
    pub const ENABLED: u32 = 1 << 0;
    /// The error bit.
    pub const ERROR: u32 = 1 << 1;
    /// The lost-event bit.
    pub const EVT_LOST: u32 = 1 << 2;
    /// The busy bit (2.2).
    pub const BUSY: u32 = 1 << 3;
    /// The armed bit (2.2).
    pub const ARMED: u32 = 1 << 4;
    /// Shift of the error code.
    pub const ERR_SHIFT: u32 = 8;
    /// Mask of the error code.
    pub const ERR_MASK: u32 = 0xff00;

    /// Decode a raw Q_STATUS value.
    pub const fn decode(raw: u32) -> Self {
        QStatus {
            enabled: raw & Self::ENABLED != 0,
            error: raw & Self::ERROR != 0,
            evt_lost: raw & Self::EVT_LOST != 0,
            busy: raw & Self::BUSY != 0,
            armed: raw & Self::ARMED != 0,
            code: QueueError::from_field(((raw & Self::ERR_MASK) >> Self::ERR_SHIFT) as u8),
        }
    }

    /// Encode back to the raw register value.
    pub const fn encode(self) -> u32 {
        (if self.enabled { Self::ENABLED } else { 0 })
            | (if self.error { Self::ERROR } else { 0 })
            | (if self.evt_lost { Self::EVT_LOST } else { 0 })
            | (if self.busy { Self::BUSY } else { 0 })
            | (if self.armed { Self::ARMED } else { 0 })
            | ((self.code.field() as u32) << Self::ERR_SHIFT)
    }
}

/// A queue entry's bytes: both entry kinds are 32 bytes, little-endian.
pub type QueueEntry = [u8; 32];

const fn get_le(b: &QueueEntry, off: usize, n: usize) -> u64 {
    let mut v = 0u64;
    let mut i = n;
    while i > 0 {
        i -= 1;
        v = (v << 8) | b[off + i] as u64;
    }
    v
}

const fn put_le(mut b: QueueEntry, off: usize, n: usize, v: u64) -> QueueEntry {
    let mut i = 0;
    while i < n {
        b[off + i] = (v >> (8 * i)) as u8;
        i += 1;
    }
    b
}

/// A send queue entry: one copy request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sqe {
    /// Source IOVA.
    pub src: u64,
    /// Destination IOVA.
    pub dst: u64,
    /// Bytes to copy, 1..MAX_LEN.
    pub len: u32,
    /// Must be 0 (else the completion reports [`cqe_status::BAD_FLAGS`]).
    pub flags: u32,
    /// Software's identifier, returned in the completion.
    pub wr_id: u64,
}

impl Sqe {
    /// Bytes per entry.
    pub const SIZE: usize = 32;
    /// Byte offset of `src` (u64).
    pub const SRC_OFF: usize = 0;
    /// Byte offset of `dst` (u64).
    pub const DST_OFF: usize = 8;
    /// Byte offset of `len` (u32).
    pub const LEN_OFF: usize = 16;
    /// Byte offset of `flags` (u32).
    pub const FLAGS_OFF: usize = 20;
    /// Byte offset of `wr_id` (u64).
    pub const WRID_OFF: usize = 24;

    /// The entry's bytes, as the engine reads them.
    pub const fn encode(&self) -> QueueEntry {
        let b = put_le([0; 32], Self::SRC_OFF, 8, self.src);
        let b = put_le(b, Self::DST_OFF, 8, self.dst);
        let b = put_le(b, Self::LEN_OFF, 4, self.len as u64);
        let b = put_le(b, Self::FLAGS_OFF, 4, self.flags as u64);
        put_le(b, Self::WRID_OFF, 8, self.wr_id)
    }

    /// Decode an entry's bytes.
    pub const fn decode(b: &QueueEntry) -> Self {
        Sqe {
            src: get_le(b, Self::SRC_OFF, 8),
            dst: get_le(b, Self::DST_OFF, 8),
            len: get_le(b, Self::LEN_OFF, 4) as u32,
            flags: get_le(b, Self::FLAGS_OFF, 4) as u32,
            wr_id: get_le(b, Self::WRID_OFF, 8),
        }
    }
}

/// 2.3: a PUT's second send queue entry: where the data goes. The first is an [`Sqe`] whose
/// `src` is local, `dst` the remote virtual address, and `flags` [`ch_net::OP_PUT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutSqe {
    /// The remote key of the receiver's region.
    pub rkey: u64,
    /// The receiving node.
    pub peer: u16,
    /// The receiving process's endpoint.
    pub endpoint: u32,
    /// A PUT_IMM's immediate data (0 for the other ops).
    pub imm: u32,
}

impl PutSqe {
    /// The entry's bytes, as the engine reads them (reserved fields 0).
    pub const fn encode(&self) -> QueueEntry {
        let b = put_le([0; 32], ch_net::SQE_RKEY_OFF, 8, self.rkey);
        let b = put_le(b, ch_net::SQE_PEER_OFF, 2, self.peer as u64);
        let b = put_le(b, ch_net::SQE_IMM_OFF, 4, self.imm as u64);
        put_le(b, ch_net::SQE_EP_OFF, 4, self.endpoint as u64)
    }

    /// Decode an entry's bytes; `None` if a reserved field is not 0 (the engine's BAD_FLAGS).
    pub const fn decode(b: &QueueEntry) -> Option<Self> {
        if get_le(b, ch_net::SQE_RSVD0_OFF, 2) != 0
            || get_le(b, ch_net::SQE_RSVD1_OFF, 4) != 0
            || get_le(b, ch_net::SQE_RSVD1_OFF + 4, 8) != 0
        {
            return None;
        }
        Some(PutSqe {
            rkey: get_le(b, ch_net::SQE_RKEY_OFF, 8),
            peer: get_le(b, ch_net::SQE_PEER_OFF, 2) as u16,
            endpoint: get_le(b, ch_net::SQE_EP_OFF, 4) as u32,
            imm: get_le(b, ch_net::SQE_IMM_OFF, 4) as u32,
        })
    }
}

/// Status values of a completion queue entry ([`Cqe::status`]).
pub mod cqe_status {
    /// The copy completed.
    pub const SUCCESS: i32 = 0;
    /// An engine error `e` reports `-(ERR_BASE + e)`, see [`super::cqe_status_of`].
    pub const ERR_BASE: i32 = 256;
    /// [`super::Error::BadLen`].
    pub const BAD_LEN: i32 = -257;
    /// [`super::Error::BadAddr`].
    pub const BAD_ADDR: i32 = -258;
    /// [`super::Error::Aborted`]: NACK with CH_NACK_STATUS left as it was at the fetch.
    pub const ABORTED: i32 = -259;
    /// [`super::Error::NoMaster`].
    pub const NO_MASTER: i32 = -260;
    /// [`super::Error::Overlap`].
    pub const OVERLAP: i32 = -261;
    /// [`super::Error::BadFlags`].
    pub const BAD_FLAGS: i32 = -262;
    /// [`super::Error::NoLink`].
    pub const NO_LINK: i32 = -263;
    /// [`super::Error::Timeout`]. ([`super::Error::Remote`] reports the receiver's errno.)
    pub const TIMEOUT: i32 = -265;
}

/// The completion status the engine reports for a transfer that ended with error `e`.
pub const fn cqe_status_of(e: Error) -> i32 {
    -(cqe_status::ERR_BASE + e.field() as i32)
}

/// The engine error a completion status encodes, `None` for success and for the values only a
/// NACK (CH_NACK_STATUS) can produce, such as a negative errno.
pub const fn error_of_cqe_status(status: i32) -> Option<Error> {
    let e = -(status as i64) - cqe_status::ERR_BASE as i64;
    if e >= 1 && e <= 255 {
        Some(Error::from_field(e as u8))
    } else {
        None
    }
}

/// A completion queue entry: one ended transfer, in the order transfers end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    /// The descriptor's `wr_id`.
    pub wr_id: u64,
    /// 0, an engine error ([`cqe_status_of`]) or, after a NACK, CH_NACK_STATUS.
    pub status: i32,
    /// Bytes copied.
    pub bytes: u32,
    /// IOVA of the transfer's last fault, 0 if none.
    pub fault_addr: u64,
    /// [`Cqe::PHASE`]; the other bits are 0.
    pub flags: u32,
}

impl Cqe {
    /// Bytes per entry.
    pub const SIZE: usize = 32;
    /// Byte offset of `wr_id` (u64).
    pub const WRID_OFF: usize = 0;
    /// Byte offset of `status` (i32).
    pub const STATUS_OFF: usize = 8;
    /// Byte offset of `bytes` (u32).
    pub const BYTES_OFF: usize = 12;
    /// Byte offset of `fault_addr` (u64).
    pub const FAULT_OFF: usize = 16;
    /// Byte offset of `flags` (u32).
    pub const FLAGS_OFF: usize = 24;
    /// Byte offset of the reserved word (u32, 0).
    pub const RSVD_OFF: usize = 28;
    /// Flag: 1 on the first pass through the ring, toggling at each wrap.
    pub const PHASE: u32 = 1 << 0;
    /// Flag: an event entry (EVT_POST), not the completion of a descriptor.
    pub const EVENT: u32 = 1 << 1;
    /// Shift of an event entry's kind in `flags`.
    pub const KIND_SHIFT: u32 = 8;
    /// Mask of an event entry's kind in `flags`.
    pub const KIND_MASK: u32 = 0xff00;

    /// The entry's bytes, as the engine writes them.
    pub const fn encode(&self) -> QueueEntry {
        let b = put_le([0; 32], Self::WRID_OFF, 8, self.wr_id);
        let b = put_le(b, Self::STATUS_OFF, 4, self.status as u32 as u64);
        let b = put_le(b, Self::BYTES_OFF, 4, self.bytes as u64);
        let b = put_le(b, Self::FAULT_OFF, 8, self.fault_addr);
        put_le(b, Self::FLAGS_OFF, 4, self.flags as u64)
    }

    /// Decode an entry's bytes.
    pub const fn decode(b: &QueueEntry) -> Self {
        Cqe {
            wr_id: get_le(b, Self::WRID_OFF, 8),
            status: get_le(b, Self::STATUS_OFF, 4) as u32 as i32,
            bytes: get_le(b, Self::BYTES_OFF, 4) as u32,
            fault_addr: get_le(b, Self::FAULT_OFF, 8),
            flags: get_le(b, Self::FLAGS_OFF, 4) as u32,
        }
    }

    /// The entry's phase bit.
    pub const fn phase(&self) -> bool {
        self.flags & Self::PHASE != 0
    }
}

/// The phase bit the engine writes in the entry of free-running index `index` of a ring of
/// `1 << log2_entries` entries: an entry is new when its phase equals this.
pub const fn cq_phase(index: u32, log2_entries: u32) -> bool {
    (index >> log2_entries) & 1 == 0
}

/// Byte offset in its ring of the entry of free-running index `index`, in a ring of
/// `1 << log2_entries` entries of 32 bytes.
pub const fn ring_offset(index: u32, log2_entries: u32) -> usize {
    ((index & ((1u32 << log2_entries) - 1)) as usize) * Sqe::SIZE
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
            for e in 0..=6u32 {
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
    fn queue_registers() {
        assert_eq!(ctx_reg(3, ctx::Q_CFG), Some(0x1000 + 3 * 0x400 + 0x20));
        assert_eq!(
            ch_reg(1, 2, ch::NACK_STATUS),
            Some(0x1400 + 0x100 + 2 * 0x40 + 0x3c)
        );
        assert_eq!(q_cfg::encode(4, 5, 0), Some(4 | (5 << 8)));
        assert_eq!(
            q_cfg::encode(12, 1, 0b1100),
            Some(12 | (1 << 8) | (0b1100 << 16))
        );
        assert_eq!(q_cfg::encode(0, 5, 0), None);
        assert_eq!(q_cfg::encode(4, 13, 0), None);
        for e in 0..=255u8 {
            let st = QStatus {
                enabled: e & 1 != 0,
                error: e & 2 != 0,
                evt_lost: e & 4 != 0,
                busy: e & 8 != 0,
                armed: e & 16 != 0,
                code: QueueError::from_field(e),
            };
            assert_eq!(QStatus::decode(st.encode()), st);
        }
        assert_eq!(ctx_reg(2, ctx::Q_SQ_TAIL), Some(0x1000 + 2 * 0x400 + 0x40));
        assert_eq!(ctx::Q_CQ_TAIL - ctx::Q_SQ_TAIL, vf::CQ_TAIL - vf::SQ_TAIL);
        let st = QStatus::decode(QStatus::ENABLED | QStatus::ERROR | (2 << 8));
        assert!(st.enabled && st.error);
        assert_eq!(st.code, QueueError::SqFetch);
        assert_eq!(QStatus::decode(0x7700).code, QueueError::Unknown(0x77));
    }

    #[test]
    fn a_queue_moves_only_when_nothing_is_lost() {
        let on = QStatus::decode(QStatus::ENABLED);
        let idle = QueueIndices {
            sq_tail: 7,
            sq_head: 7,
            cq_head: 5,
            cq_tail: 7,
            armed: false,
        };
        assert!(idle.movable(&on));
        // A transfer in flight: stopping the queue would abort it.
        assert!(!idle.movable(&QStatus { busy: true, ..on }));
        // Posted, not taken yet (the CQ was full): it stays where it runs.
        assert!(!QueueIndices { sq_tail: 8, ..idle }.movable(&on));
        // Disabled without an error: not a queue this context runs.
        assert!(!idle.movable(&QStatus::decode(0)));
        // Stopped on an error: it moves, and keeps it.
        assert!(QueueIndices { sq_tail: 8, ..idle }.movable(&QStatus::decode(QStatus::ERROR)));
        assert_eq!(idle.restore_ctrl(), q_ctrl::ENABLE | q_ctrl::RESTORE);
        assert_eq!(
            QueueIndices {
                armed: true,
                ..idle
            }
            .restore_ctrl(),
            q_ctrl::ENABLE | q_ctrl::RESTORE | q_ctrl::ARM
        );
    }

    #[test]
    fn sqe_layout() {
        let d = Sqe {
            src: 0x1122_3344_5566_7788,
            dst: 0x99aa_bbcc_ddee_ff00,
            len: 0x0102_0304,
            flags: 0,
            wr_id: 0xdead_beef_cafe_f00d,
        };
        let b = d.encode();
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&b[8..16], &0x99aa_bbcc_ddee_ff00u64.to_le_bytes());
        assert_eq!(&b[16..20], &[4, 3, 2, 1]);
        assert_eq!(&b[20..24], &[0; 4]);
        assert_eq!(&b[24..32], &0xdead_beef_cafe_f00du64.to_le_bytes());
        assert_eq!(Sqe::decode(&b), d);
        let odd = Sqe {
            flags: 0x8000_0001,
            ..d
        };
        assert_eq!(Sqe::decode(&odd.encode()), odd);
    }

    #[test]
    fn put_sqe_layout() {
        let p = PutSqe {
            rkey: 0xc0ff_ee11_0000_0005,
            peer: 0x0102,
            endpoint: 0x0a0b_0c0d,
            imm: 0,
        };
        let b = p.encode();
        assert_eq!(&b[0..8], &0xc0ff_ee11_0000_0005u64.to_le_bytes());
        assert_eq!(&b[8..10], &[2, 1]);
        assert_eq!(&b[10..12], &[0, 0]);
        assert_eq!(&b[12..16], &[0x0d, 0x0c, 0x0b, 0x0a]);
        assert_eq!(&b[16..32], &[0; 16]);
        assert_eq!(PutSqe::decode(&b), Some(p));
        // 2.6: a PUT_IMM's immediate at 16; 20..32 stay reserved.
        let q = PutSqe {
            imm: 0xfeed_f00d,
            ..p
        };
        let b2 = q.encode();
        assert_eq!(&b2[16..20], &[0x0d, 0xf0, 0xed, 0xfe]);
        assert_eq!(PutSqe::decode(&b2), Some(q));
        for i in [10, 11, 20, 31] {
            let mut bad = b;
            bad[i] = 1;
            assert_eq!(PutSqe::decode(&bad), None, "byte {i}");
        }
    }

    #[test]
    fn cqe_layout() {
        let c = Cqe {
            wr_id: 42,
            status: -14,
            bytes: 4096,
            fault_addr: 0x5000_0000,
            flags: Cqe::PHASE,
        };
        let b = c.encode();
        assert_eq!(&b[0..8], &42u64.to_le_bytes());
        assert_eq!(&b[8..12], &(-14i32).to_le_bytes());
        assert_eq!(&b[12..16], &4096u32.to_le_bytes());
        assert_eq!(&b[16..24], &0x5000_0000u64.to_le_bytes());
        assert_eq!(&b[24..28], &1u32.to_le_bytes());
        assert_eq!(&b[28..32], &[0; 4]);
        assert_eq!(Cqe::decode(&b), c);
        assert!(c.phase());
        assert!(!Cqe { flags: 0, ..c }.phase());
        let mut raw = [0xffu8; 32];
        raw[24..28].copy_from_slice(&0u32.to_le_bytes());
        let d = Cqe::decode(&raw);
        assert_eq!((d.wr_id, d.status, d.bytes), (u64::MAX, -1, u32::MAX));
        assert!(!d.phase());
    }

    #[test]
    fn cqe_status_mapping() {
        for (e, st) in [
            (Error::BadLen, cqe_status::BAD_LEN),
            (Error::BadAddr, cqe_status::BAD_ADDR),
            (Error::Aborted, cqe_status::ABORTED),
            (Error::NoMaster, cqe_status::NO_MASTER),
            (Error::Overlap, cqe_status::OVERLAP),
            (Error::BadFlags, cqe_status::BAD_FLAGS),
        ] {
            assert_eq!(cqe_status_of(e), st, "{e:?}");
            assert_eq!(error_of_cqe_status(st), Some(e));
        }
        // Success and negative errnos (what a driver writes to NACK_STATUS) are not engine
        // errors; every engine error code maps back.
        for st in [0, -1, -14, -125, -256, i32::MIN, i32::MAX, -(256 + 256)] {
            assert_eq!(error_of_cqe_status(st), None, "{st}");
        }
        for v in 1..=255u8 {
            let e = Error::from_field(v);
            assert_eq!(error_of_cqe_status(cqe_status_of(e)), Some(e));
        }
    }

    #[test]
    fn ring_index_and_phase() {
        // A ring of 4: the first pass has phase 1, the second 0, the third 1 again.
        let phases: [bool; 12] = core::array::from_fn(|i| cq_phase(i as u32, 2));
        assert_eq!(phases[..4], [true; 4]);
        assert_eq!(phases[4..8], [false; 4]);
        assert_eq!(phases[8..], [true; 4]);
        assert_eq!(ring_offset(5, 2), 32);
        assert_eq!(ring_offset(4095, 12), 4095 * 32);
        assert_eq!(ring_offset(4096, 12), 0);
        // The free-running index wraps at 2^32, a multiple of every ring: no phase glitch.
        assert!(!cq_phase(u32::MAX, 1));
        assert!(cq_phase(u32::MAX.wrapping_add(1), 1));
        assert_eq!(ring_offset(u32::MAX, 12), 4095 * 32);
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

    #[test]
    fn quarantine_releases_parse() {
        assert_eq!(net::parse_release(b"release 5\n"), Some(1 << 5));
        assert_eq!(
            net::parse_release(b"release 0 release 63"),
            Some(1 | 1 << 63)
        );
        assert_eq!(net::parse_release(b"release all"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"release",
            b"release 64",
            b"release -1",
            b"release 5x",
            b"release 005",
            b"free 5",
            b"release 5 6",
        ] {
            assert_eq!(net::parse_release(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn link_tunables_parse() {
        let mut out = [(0, 0); net::TUNABLES.len()];
        assert_eq!(Some(1), net::parse_tunables(b"drop_ppm 10000\n", &mut out));
        assert_eq!((net::DROP_PPM, 10000), out[0]);
        assert_eq!(
            Some(2),
            net::parse_tunables(b"drop_ppm=0 corrupt_ppm=1000", &mut out)
        );
        assert_eq!([(net::DROP_PPM, 0), (net::CORRUPT_PPM, 1000)], out[..2]);
        assert_eq!(Some(1), net::parse_tunables(b"rto_us 10000000", &mut out));
        assert_eq!(Some(1), net::parse_tunables(b"key_fail_limit 0", &mut out));
        assert_eq!((net::KEYFAIL_LIMIT, 0), out[0]);
        assert_eq!(
            Some(2),
            net::parse_tunables(b"reorder_ppm 10000 reorder_us 4", &mut out)
        );
        assert_eq!([(net::REORDER_PPM, 10000), (net::REORDER_US, 4)], out[..2]);
        // Each tunable is of a map this core knows; the 2.8 ones are not an older engine's.
        for (_, reg, _) in net::TUNABLES {
            assert!(net::tunable_since(reg) <= VERSION_MINOR);
        }
        assert_eq!(net::tunable_since(net::REORDER_US), 8);
        assert_eq!(net::tunable_since(net::DROP_PPM), 3);
        for bad in [
            &b""[..],
            b"\n",
            b"drop_ppm",
            b"drop_ppm 1000001",
            b"drop_ppm -1",
            b"drop_ppm 0x10",
            b"drop_ppm 99999999999999999999",
            b"retries 1001",
            b"node 3",
            b"drop_ppm 1 corrupt_ppm",
            b"rto_us 1 rto_us 2 rto_us 3 rto_us 4 rto_us 5 rto_us 6 rto_us 7 rto_us 8",
        ] {
            assert_eq!(None, net::parse_tunables(bad, &mut out), "{bad:?}");
        }
    }
}
