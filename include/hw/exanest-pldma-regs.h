/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * ExaNeSt PLDMA register map, version 2.11.
 *
 * The contract between the driver, the QEMU engine model and a future FPGA
 * implementation on the QFDB. Documentation/pldma-registers.rst explains
 * every field; keep the two in step.
 *
 * The engine has contexts, each with its own channels. On PCI the engine is
 * an SR-IOV physical function (the control plane) and context c issues its
 * DMA as virtual function c, so with the requester ID, StreamID and iommu
 * group of that VF: the SMMU keeps contexts apart.
 *
 * PF BAR0 (PCI) or the "reg" window (devicetree): 128 KiB, little-endian
 * 32-bit registers. The global registers, then one block per context (its
 * interrupt status, its quiesce command, its channels). 64-bit addresses are
 * split into _LO/_HI halves; a 64-bit access to a _LO offset reads or writes
 * both. VF BAR0: 4 KiB, the context's identification and its queue
 * doorbells: the only page user space maps.
 *
 * 2.1 adds user-level queues (one send queue and one completion queue per
 * context, rings in the context's address space); nothing of 2.0 changes
 * meaning. 2.2 lets the kernel move a queue between contexts: the PF reads
 * and sets a queue's indices, re-enables it where they were (Q_CTRL
 * RESTORE, ARM) and sees whether a transfer is in flight (Q_STATUS BUSY,
 * ARMED). It also gives each context a second queue, the kernel's (KQ_*):
 * the same descriptors and completions, with rings in the PF's own DMA
 * space and its doorbell in the PF, and its transfers issued as the
 * context's VF like every other; nothing of 2.1 changes meaning. 2.3 adds
 * the network port (Documentation/network.rst): a node id, the remote key
 * and endpoint tables, counters, PUT operations from channels and queues,
 * and receiver faults reported on a channel of the receiving context
 * (ORIGIN NET_RX); nothing of 2.2 changes meaning. 2.4 adds the mailbox:
 * MAILBOX operations (small messages, PLDMA_MBOX_MAX bytes at most) from the
 * queue into a receive ring in the destination context's address space
 * (CTX_MBOX_*, VF_MBOX_*), in order per sending context; a full ring NACKs
 * RNR and RESUMEs when its reader frees a slot; nothing of 2.3 changes
 * meaning. 2.5 makes remote keys 64 random bits: an rkey no longer holds its
 * entry's index (NET_RKEY_SEL picks any entry), the engine looks the key up
 * with its endpoint among the valid entries (NET_RKEY_KEY_LO/HI; KEY_LO is
 * 2.4's TAG); every key failure is NACKed -ENOKEY (no -EPERM or -ERANGE that
 * would tell a guesser which part was right); and a source node with more
 * than NET_KEYFAIL_LIMIT key failures within a second is quarantined: its
 * ops are dropped until software releases it (NET_QUARANTINE_*). 2.6 adds
 * the mailbox event: armed once (VF_MBOX_ARM, or CTX_MBOX_ARM from the PF),
 * it raises CTX_IRQ MBOX when the ring holds a message its reader has not
 * taken (MBOX_TAIL != MBOX_HEAD), so a reader can sleep; and PUT_IMM, a put
 * whose receiver gets a completion with 32 bits of immediate data in that
 * ring (the second entry's IMM, 2.5's reserved bytes); nothing of 2.5
 * changes meaning. 2.7 shares NET_WINDOW among a peer's ops (the bytes in
 * flight to one node, over all of them), which congestion the fabric marks
 * shrinks (packet bit CE, echoed by ACKs: DCTCP), and counts the port's
 * congestion (NET_CC); nothing of 2.6 changes meaning. 2.8 to 2.10 are
 * noted where they apply. 2.11 adds the fault record ring (CTX_FREC_*): the
 * engine writes a record of every fault to memory, so that the driver learns
 * a fault without reading the channel's registers, and numbers each
 * channel's faults (CH_STATUS FAULT_SEQ) so that an answer names the fault it
 * answers (CH_CTRL SEQ_CHECK); nothing of 2.10 changes meaning.
 *
 * Style: QEMU's (spaces, 80 columns), as the QEMU model includes it.
 */
#ifndef EXANEST_PLDMA_REGS_H
#define EXANEST_PLDMA_REGS_H

#define PLDMA_PCI_VENDOR_ID     0x10ee  /* Xilinx: the engine is FPGA logic */
#define PLDMA_PCI_DEVICE_ID     0xe0da  /* the physical function */
#define PLDMA_PCI_VF_DEVICE_ID  0xe0db  /* a context's virtual function */
#define PLDMA_MMIO_SIZE         0x20000
#define PLDMA_VF_MMIO_SIZE      0x1000
/* SR-IOV: VF n (context n) is function PF + PLDMA_VF_OFFSET + n */
#define PLDMA_VF_OFFSET         1
#define PLDMA_VF_STRIDE         1

/* Global registers */
#define PLDMA_ID                0x000   /* RO: PLDMA_ID_MAGIC */
#define PLDMA_VERSION           0x004   /* RO: major << 16 | minor */
#define PLDMA_CAPS              0x008   /* RO: see PLDMA_CAPS_* */
/* RO: largest LEN a channel accepts, in bytes */
#define PLDMA_MAX_LEN           0x00c
/* RO: bit c = context c has interrupt status (contexts 0-31) */
#define PLDMA_IRQ_SUMMARY_LO    0x010
/* RO: modelled bandwidth, MB/s (0: not modelled) */
#define PLDMA_BANDWIDTH         0x014
/* RO: modelled per-transfer latency, ns */
#define PLDMA_LATENCY           0x018
#define PLDMA_SCRATCH           0x01c   /* RW: no effect, for probing */
/* WO: write PLDMA_RESET_MAGIC to reset every channel of every context */
#define PLDMA_RESET             0x020
/* RO: bit c - 32 = context c has interrupt status (contexts 32-63) */
#define PLDMA_IRQ_SUMMARY_HI    0x024
/* RO: bytes a channel moves per turn on the shared data path */
#define PLDMA_QUANTUM           0x028

/*
 * 2.3: the network port (Documentation/network.rst). NET_NODE is read-only;
 * the rest are read-write unless marked. Table entries are written through
 * a window: select the entry, write its fields, then write its control
 * register, which commits the whole entry at once. No packet is placed with
 * an entry after the write that changed it.
 */
#define PLDMA_NET_NODE          0x100   /* RO: PLDMA_NET_NODE_* */
#define PLDMA_NET_WINDOW        0x104   /* RO: bytes in flight per peer */
#define PLDMA_NET_LINK_LATENCY  0x108   /* RO: ns, one way */
#define PLDMA_NET_LINK_BW       0x10c   /* RO: MB/s (0: not modelled) */
/* first retransmission timeout, us (doubles at each timeout); 0 reads 1 */
#define PLDMA_NET_RTO_US        0x110
/* timeouts in a row before an op ends with PLDMA_ERR_TIMEOUT */
#define PLDMA_NET_RETRIES       0x114
/* fault injection on sent packets, per million: dropped, one bit flipped */
#define PLDMA_NET_DROP_PPM      0x118
#define PLDMA_NET_CORRUPT_PPM   0x11c
/* the endpoint table: endpoint EP_SEL's context */
#define PLDMA_NET_EP_SEL        0x120
#define PLDMA_NET_EP_CTX        0x124   /* PLDMA_NET_EP_* */
/* the remote key table: entry RKEY_SEL (any entry: the key names it) */
#define PLDMA_NET_RKEY_SEL      0x128
#define PLDMA_NET_RKEY_KEY_LO   0x12c   /* 2.5: the rkey, 64 random bits */
#define PLDMA_NET_RKEY_BASE_LO  0x130   /* the region: first byte (VA) */
#define PLDMA_NET_RKEY_BASE_HI  0x134
#define PLDMA_NET_RKEY_LEN_LO   0x138   /* the region's length, bytes */
#define PLDMA_NET_RKEY_LEN_HI   0x13c
#define PLDMA_NET_RKEY_EP       0x140   /* the endpoint owning the region */
#define PLDMA_NET_RKEY_CTRL     0x144   /* PLDMA_NET_RKEY_*; commits */
#define PLDMA_NET_RKEY_KEY_HI   0x148   /* 2.5 */
/* 2.5: key failures from one node within a second before quarantine; 0: off */
#define PLDMA_NET_KEYFAIL_LIMIT 0x14c
#define PLDMA_NET_SRC_SEL       0x150   /* 2.5: node of SRC_KEYFAILS */
/* 2.5, RO: key failures from node SRC_SEL since released (saturating) */
#define PLDMA_NET_SRC_KEYFAILS  0x154
/* 2.5: bit n = node n quarantined (its ops dropped); write 1 to release */
#define PLDMA_NET_QUARANTINE_LO 0x158
#define PLDMA_NET_QUARANTINE_HI 0x15c   /* nodes 32-63 */
/* 2.7, RO: congestion counter n at PLDMA_NET_CC_BASE + 4 n, free-running u32 */
#define PLDMA_NET_CC_BASE       0x160
/* data packets the ingress queue had no room for (dropped) */
#define PLDMA_NET_CC_INGRESS_DROPS      0
/* data packets the ingress queue marked congestion experienced */
#define PLDMA_NET_CC_CE_MARKED          1
/* ACKs received that echo a mark, and GET data received marked */
#define PLDMA_NET_CC_ECE_RECEIVED       2
/* times a peer's window was cut */
#define PLDMA_NET_CC_WINDOW_CUTS        3
/* tail-loss probes sent */
#define PLDMA_NET_CC_TAIL_PROBES        4
/* not a counter: the ingress queue's longest, bytes (a write clears it) */
#define PLDMA_NET_CC_QUEUE_PEAK         5
#define PLDMA_NET_CC_COUNTERS   6
/* RO: counter n at PLDMA_NET_CNT_BASE + 4 n, free-running u32 */
#define PLDMA_NET_CNT_BASE      0x180
#define PLDMA_NET_CNT_TX_PACKETS        0
#define PLDMA_NET_CNT_RX_PACKETS        1
/* malformed, bad checksum, not for this node, or no room for its op */
#define PLDMA_NET_CNT_RX_DROPPED        2
#define PLDMA_NET_CNT_RX_BAD_CRC        3
#define PLDMA_NET_CNT_NACKS_SENT        4
#define PLDMA_NET_CNT_NACKS_RECEIVED    5
#define PLDMA_NET_CNT_RESUMES_SENT      6
#define PLDMA_NET_CNT_RESUMES_RECEIVED  7
/* payload bytes sent again (a NACK, a timeout, a SEQUENCE NACK) */
#define PLDMA_NET_CNT_RETRANS_BYTES     8
#define PLDMA_NET_CNT_TIMEOUTS          9
/* data packets dropped as duplicates or beyond a gap */
#define PLDMA_NET_CNT_DUPLICATES        10
#define PLDMA_NET_CNT_INJECTED_DROPS    11
#define PLDMA_NET_CNT_INJECTED_CORRUPT  12
/* error NACKs sent (a key failure, the driver's NACK) */
#define PLDMA_NET_CNT_ERROR_NACKS       13
#define PLDMA_NET_CNT_PLACED_BYTES      14
/* probes of a paused op (no timeouts: the receiver owes a RESUME) */
#define PLDMA_NET_CNT_PROBES            15
/* 2.4: mailbox messages placed in this node's rings */
#define PLDMA_NET_CNT_MBOX_PLACED       16
/* 2.4: RNR NACKs sent (a full ring) */
#define PLDMA_NET_CNT_RNR_SENT          17
/* 2.5: key failures (every source), packets dropped from quarantined nodes */
#define PLDMA_NET_CNT_KEY_FAILS         18
#define PLDMA_NET_CNT_QUARANTINED       19
#define PLDMA_NET_COUNTERS      20
/*
 * 2.4: NET_IRQ, RW1C: EP_WANTED, an endpoint without a context received an
 * op (NACKed NOT_READY): its bit in NET_EP_WANTED is set, and the engine's
 * interrupt is raised until software clears this bit.
 */
#define PLDMA_NET_IRQ           0x1d0
#define PLDMA_NET_IRQ_EP_WANTED (1u << 0)
/*
 * 2.8: injection on sent packets, per million: held back (each for a time at
 * random up to NET_REORDER_US, 0 reads 1), so that later ones overtake them
 */
#define PLDMA_NET_REORDER_PPM   0x1d4
#define PLDMA_NET_REORDER_US    0x1d8
/*
 * 2.9: the node the NET_RKEY_SEL entry's key is bound to (with
 * PLDMA_NET_RKEY_BOUND; committed by NET_RKEY_CTRL)
 */
#define PLDMA_NET_RKEY_NODE     0x1dc
/*
 * 2.4, RO: bit (ep % 32) of word ep / 32: endpoint ep has ops waiting for a
 * context; cleared when NET_EP_CTX makes it RESIDENT.
 */
#define PLDMA_NET_EP_WANTED     0x1e0
#define PLDMA_NET_EP_WANTED_WORDS 8
#define PLDMA_NET_MAX_NODES     64      /* node ids 0..63 */
#define PLDMA_NET_MAX_EPS       256     /* endpoints 0..255 */
#define PLDMA_NET_MAX_RKEYS     256     /* rkey table entries */
/* receive ops the engine tracks at once (oldest finished ones recycled) */
#define PLDMA_NET_RX_OPS        64
/* NET_NODE */
#define PLDMA_NET_NODE_ID_MASK  0x0000ffffu
/* a network backend is attached and its link is up */
#define PLDMA_NET_NODE_LINK     (1u << 16)
/* NET_EP_CTX: bits 7:0 the context, valid with RESIDENT */
#define PLDMA_NET_EP_CTX_MASK   0x000000ffu
/*
 * The endpoint's process holds that context. Writing it with RESIDENT
 * RESUMEs every op NACKed NOT_READY for the endpoint.
 */
#define PLDMA_NET_EP_RESIDENT   (1u << 31)
/*
 * 2.5: a process holds the endpoint (OPEN), and has a mailbox (MBOX). A
 * MAILBOX for an endpoint without both is refused at once (-ECONNREFUSED)
 * and wakes no one (no EP_WANTED). Writing NET_EP_CTX without OPEN ends the
 * endpoint's unfinished receive ops (NACKed) for its next process.
 */
#define PLDMA_NET_EP_OPEN       (1u << 30)
#define PLDMA_NET_EP_MBOX       (1u << 29)
/* NET_RKEY_CTRL */
#define PLDMA_NET_RKEY_VALID    (1u << 0)
#define PLDMA_NET_RKEY_READ     (1u << 1)       /* remote read (get) */
#define PLDMA_NET_RKEY_WRITE    (1u << 2)       /* remote write (put) */
/* 2.9: only packets from node NET_RKEY_NODE may use the key; others fail it */
#define PLDMA_NET_RKEY_BOUND    (1u << 3)

#define PLDMA_ID_MAGIC          0x45584e53u     /* "EXNS" */
#define PLDMA_VERSION_MAJOR     2
#define PLDMA_VERSION_MINOR     11
#define PLDMA_RESET_MAGIC       0x52535421u     /* "RST!" */

/* channels per context */
#define PLDMA_CAPS_NCHAN_MASK   0x000000ffu
/* fault-wait + resume/NACK supported */
#define PLDMA_CAPS_RESUME       (1u << 8)
#define PLDMA_CAPS_INTX         (1u << 9)       /* wired (INTx / SPI) IRQ */
/* BANDWIDTH/LATENCY are meaningful */
#define PLDMA_CAPS_TIMING       (1u << 10)
/* contexts are SR-IOV virtual functions (else: context 0 is the PF) */
#define PLDMA_CAPS_SRIOV        (1u << 11)
/* 2.3: a network port (see PLDMA_NET_*) */
#define PLDMA_CAPS_NET          (1u << 12)
/* 2.4: the mailbox (CTX_MBOX_*, PLDMA_OP_MAILBOX) */
#define PLDMA_CAPS_MAILBOX      (1u << 13)
/* 2.11: the fault record ring (CTX_FREC_*) and fault numbers */
#define PLDMA_CAPS_FREC         (1u << 14)
#define PLDMA_CAPS_NCTX_SHIFT   16
#define PLDMA_CAPS_NCTX_MASK    0x00ff0000u     /* number of contexts */

/* Context blocks: context c at PLDMA_CTX_BASE + c * PLDMA_CTX_STRIDE */
#define PLDMA_CTX_BASE          0x1000
#define PLDMA_CTX_STRIDE        0x400
#define PLDMA_MAX_CONTEXTS      64

/* Context registers, relative to the context's block */
/* RW1C: see PLDMA_CTX_IRQ_* */
#define PLDMA_CTX_IRQ_STATUS    0x000
/* WO: commands (write-one strobes) */
#define PLDMA_CTX_CTRL          0x004
#define PLDMA_CTX_STATUS        0x008   /* RO */
/* 2.1, kernel only: the context's queues (see below) */
#define PLDMA_CTX_SQ_BASE_LO    0x010   /* RW: send queue ring IOVA */
#define PLDMA_CTX_SQ_BASE_HI    0x014
#define PLDMA_CTX_CQ_BASE_LO    0x018   /* RW: completion queue ring IOVA */
#define PLDMA_CTX_CQ_BASE_HI    0x01c
#define PLDMA_CTX_Q_CFG         0x020   /* RW: ring sizes, channels */
#define PLDMA_CTX_Q_CTRL        0x024   /* RW: ENABLE */
#define PLDMA_CTX_Q_STATUS      0x028   /* RO */
/* RO: the IOVA a queue error is about */
#define PLDMA_CTX_Q_ERR_LO      0x02c
#define PLDMA_CTX_Q_ERR_HI      0x030
/* 2.1, WO: post an event entry in the CQ (PLDMA_EVT_POST_*) */
#define PLDMA_CTX_EVT_POST      0x034
/* 2.1, RW: the event entry's wr_id */
#define PLDMA_CTX_EVT_ARG_LO    0x038
#define PLDMA_CTX_EVT_ARG_HI    0x03c
/*
 * 2.2, the queue's free-running indices, as the VF page has them. RW while
 * the queue is disabled (ENABLE with RESTORE starts from them), RO (writes
 * ignored) while it is enabled; disabling keeps them, QUIESCE and RESET
 * zero them.
 */
#define PLDMA_CTX_Q_SQ_TAIL     0x040
#define PLDMA_CTX_Q_SQ_HEAD     0x044
#define PLDMA_CTX_Q_CQ_HEAD     0x048
#define PLDMA_CTX_Q_CQ_TAIL     0x04c
/*
 * 2.2, the kernel queue: as the queue above (same layouts: Q_CFG, Q_CTRL
 * ENABLE only, Q_STATUS without EVT_LOST and ARMED), but its rings are
 * addresses the PF issues (the kernel's DMA space, not the context's), its
 * doorbell and indices are these PF registers, every CQE it writes raises
 * CTX_IRQ KCQ (no arming) and it takes no event entries.
 */
#define PLDMA_CTX_KQ_SQ_BASE_LO 0x060
#define PLDMA_CTX_KQ_SQ_BASE_HI 0x064
#define PLDMA_CTX_KQ_CQ_BASE_LO 0x068
#define PLDMA_CTX_KQ_CQ_BASE_HI 0x06c
#define PLDMA_CTX_KQ_CFG        0x070
#define PLDMA_CTX_KQ_CTRL       0x074
#define PLDMA_CTX_KQ_STATUS     0x078   /* RO */
#define PLDMA_CTX_KQ_ERR_LO     0x07c   /* RO */
#define PLDMA_CTX_KQ_ERR_HI     0x080   /* RO */
/* RW: writing it rings the kernel queue's doorbell */
#define PLDMA_CTX_KQ_SQ_TAIL    0x084
#define PLDMA_CTX_KQ_SQ_HEAD    0x088   /* RO */
#define PLDMA_CTX_KQ_CQ_HEAD    0x08c   /* RW */
#define PLDMA_CTX_KQ_CQ_TAIL    0x090   /* RO */

/*
 * 2.4, the mailbox's receive ring: 2^LOG2 slots of PLDMA_MBOX_SLOT bytes at
 * MBOX_BASE, an address of the context's (its VF issues the writes), 64-byte
 * aligned. BASE and CFG are latched when CFG.ENABLE goes from 0 to 1 (a bad
 * configuration leaves it 0); the free-running indices are RW while the
 * mailbox is disabled, and HEAD (the reader's index, as VF_MBOX_HEAD) is RW
 * always. QUIESCE and RESET disable it and zero the indices.
 */
#define PLDMA_CTX_MBOX_BASE_LO  0x0a0
#define PLDMA_CTX_MBOX_BASE_HI  0x0a4
#define PLDMA_CTX_MBOX_CFG      0x0a8
#define PLDMA_CTX_MBOX_HEAD     0x0ac
#define PLDMA_CTX_MBOX_TAIL     0x0b0   /* RW while disabled, else RO */
/*
 * 2.6: write PLDMA_MBOX_ARM_ONCE to arm the mailbox event, as VF_MBOX_ARM;
 * reads PLDMA_MBOX_ARM_ONCE while it is armed. Disabling the mailbox (and
 * QUIESCE, RESET) disarms it.
 */
#define PLDMA_CTX_MBOX_ARM      0x0b4
#define PLDMA_MBOX_ARM_ONCE     (1u << 0)
/* MBOX_CFG */
#define PLDMA_MBOX_CFG_LOG2_MASK 0x0000001fu   /* slots, log2: 1..12 */
#define PLDMA_MBOX_CFG_ENABLE   (1u << 31)
#define PLDMA_MBOX_LOG2_MAX     12
#define PLDMA_MBOX_MAX          256     /* bytes of a message, at most */
/*
 * A slot, little-endian: the header, then the message. The engine writes
 * the message and the header, then STAMP last: the slot of index i (free-
 * running) is complete when its STAMP reads i + 1. The reader takes slots
 * in order and writes HEAD past them: that frees them.
 */
#define PLDMA_MBOX_SLOT         320
#define PLDMA_MBOX_SRC_NODE_OFF 0       /* u16: the sending node */
#define PLDMA_MBOX_SRC_EP_OFF   4       /* u32: the sending endpoint */
#define PLDMA_MBOX_LEN_OFF      8       /* u32: bytes of the message */
#define PLDMA_MBOX_OPID_OFF     12      /* u32: the sender's op id */
/* 2.6: u32, 0 a message, PLDMA_MBOX_FLAG_PUT_IMM a PUT_IMM's completion */
#define PLDMA_MBOX_FLAGS_OFF    16
/*
 * 2.6: the slot completes a PUT_IMM to the endpoint: no message; LEN is the
 * put's length, IMM its data, ADDR its first byte here, SRC_EP 0xffffffff.
 */
#define PLDMA_MBOX_FLAG_PUT_IMM (1u << 0)
#define PLDMA_MBOX_IMM_OFF      20      /* u32, 2.6: the put's immediate data */
#define PLDMA_MBOX_ADDR_OFF     24      /* u64, 2.6: the put's address here */
#define PLDMA_MBOX_STAMP_OFF    60      /* u32: the slot's index + 1 */
#define PLDMA_MBOX_DATA_OFF     64

/*
 * 2.11, the fault record ring: 2^LOG2 records of PLDMA_FREC_SIZE bytes at
 * FREC_BASE, an address the PF issues (the kernel's DMA space, as the kernel
 * queue's rings), PLDMA_FREC_SIZE aligned. When a channel of the context
 * enters FAULT (whatever its transfer's origin), the engine writes a record of
 * the fault at FREC_TAIL mod 2^LOG2, STAMP last, moves FREC_TAIL, and only
 * then sets the channel's CTX_IRQ_STATUS bit: the record says what the
 * channel's fault registers say, and the reader learns the fault from memory.
 * The record of free-running index i is complete when its STAMP reads i + 1.
 * The reader writes FREC_HEAD past the records it took, which frees them.
 * With no room (FREC_TAIL - FREC_HEAD = 2^LOG2), or when the write fails, the
 * engine writes no record and raises CTX_IRQ FREC_LOST; the fault itself is
 * raised as always (its registers say everything). BASE and CFG are latched
 * when CFG.ENABLE goes from 0 to 1 (a bad configuration leaves it 0), which
 * zeroes both indices; HEAD is RW, TAIL RO. QUIESCE and RESET disable the
 * ring.
 */
#define PLDMA_CTX_FREC_BASE_LO  0x0c0
#define PLDMA_CTX_FREC_BASE_HI  0x0c4
#define PLDMA_CTX_FREC_CFG      0x0c8
#define PLDMA_CTX_FREC_HEAD     0x0cc
#define PLDMA_CTX_FREC_TAIL     0x0d0   /* RO */
/* FREC_CFG */
#define PLDMA_FREC_CFG_LOG2_MASK 0x0000001fu   /* records, log2: 1..12 */
#define PLDMA_FREC_CFG_ENABLE   (1u << 31)
#define PLDMA_FREC_LOG2_MAX     12
/* A record, little-endian */
#define PLDMA_FREC_SIZE         64
#define PLDMA_FREC_ADDR_OFF     0       /* u64: FAULT_LO/HI */
#define PLDMA_FREC_INFO_OFF     8       /* u32: FAULT_INFO */
#define PLDMA_FREC_ORIGIN_OFF   12      /* u32: ORIGIN */
#define PLDMA_FREC_WRID_OFF     16      /* u64: WRID_LO/HI */
/*
 * u64: the end of the faulting transfer's bytes in the faulting direction,
 * as SRC or DST (a write: DST), plus LEN, read in FAULT (2.10)
 */
#define PLDMA_FREC_END_OFF      24
#define PLDMA_FREC_NET_SRC_OFF  32      /* u32: CH_NET_SRC (NET_RX) */
#define PLDMA_FREC_NET_OPID_OFF 36      /* u32: CH_NET_OPID */
/* u32: bits 7:0 the channel, 15:8 its FAULT_SEQ for this fault */
#define PLDMA_FREC_CHAN_OFF     40
#define PLDMA_FREC_DONE_OFF     44      /* u32: DONE_BYTES */
#define PLDMA_FREC_STAMP_OFF    60      /* u32: the record's index + 1 */

/*
 * 2.3: channel n's network registers at PLDMA_CH_NET_BASE +
 * n * PLDMA_CH_NET_STRIDE in the context's block. A START with NET_OP PUT
 * sends LEN bytes from SRC to DST, a virtual address of endpoint NET_EP at
 * node NET_PEER, under NET_RKEY; DONE_BYTES is what the receiver placed.
 */
#define PLDMA_CH_NET_BASE       0x300
#define PLDMA_CH_NET_STRIDE     0x20
#define PLDMA_CH_NET_OP         0x00    /* RW: PLDMA_OP_* */
#define PLDMA_CH_NET_PEER       0x04    /* RW: the remote node */
#define PLDMA_CH_NET_EP         0x08    /* RW: the remote endpoint */
#define PLDMA_CH_NET_RKEY_LO    0x0c    /* RW: the remote key */
#define PLDMA_CH_NET_RKEY_HI    0x10
/* RO: the op id of the channel's current or last network op */
#define PLDMA_CH_NET_OPID       0x14
/* RO, NET_RX channels: the sending node */
#define PLDMA_CH_NET_SRC        0x18
/* RO: ERROR(REMOTE): the receiver's status, a negative errno */
#define PLDMA_CH_NET_STATUS     0x1c
/* operations (NET_OP, and a descriptor's flags bits 3:0) */
#define PLDMA_OP_COPY           0
#define PLDMA_OP_PUT            1
/* SRC a virtual address of endpoint NET_EP at NET_PEER, DST local */
#define PLDMA_OP_GET            2
/*
 * 2.4: LEN (1..PLDMA_MBOX_MAX) bytes from SRC to the mailbox of endpoint
 * NET_EP at NET_PEER (DST and NET_RKEY unused, 0); a context's messages leave
 * one at a time, in the order they were started.
 */
#define PLDMA_OP_MAILBOX        3
/*
 * 2.6: a PUT with 32 bits of immediate data (the second entry's IMM): once
 * its last byte is placed, the receiver writes a completion with them in the
 * endpoint's mailbox ring (PLDMA_MBOX_FLAG_PUT_IMM); the last packet waits
 * (RNR) while the ring is full, and a process without a mailbox refuses it
 * (-ECONNREFUSED). From a descriptor only: NET_OP PUT_IMM ends BAD_FLAGS.
 */
#define PLDMA_OP_PUT_IMM        4
#define PLDMA_OP_MASK           0xfu

/* CTX_IRQ_STATUS: bits 7:0 channel n raised its interrupt */
#define PLDMA_CTX_IRQ_CHANNELS  0x000000ffu
/* 2.1: the armed CQ event fired (CQ_TAIL != CQ_HEAD) */
#define PLDMA_CTX_IRQ_CQ        (1u << 8)
/* 2.1: the queue entered ERROR */
#define PLDMA_CTX_IRQ_QERR      (1u << 9)
/* 2.2: the kernel queue wrote a CQE */
#define PLDMA_CTX_IRQ_KCQ       (1u << 10)
/* 2.2: the kernel queue entered ERROR */
#define PLDMA_CTX_IRQ_KQERR     (1u << 11)
/* 2.6: the armed mailbox event fired (MBOX_TAIL != MBOX_HEAD) */
#define PLDMA_CTX_IRQ_MBOX      (1u << 12)
/* 2.11: a fault's record found no room in the fault record ring */
#define PLDMA_CTX_IRQ_FREC_LOST (1u << 13)

/*
 * CTX_CTRL: stop every channel of the context at once: each returns to IDLE
 * with no interrupt, CTX_IRQ_STATUS clears, and no DMA of the context follows
 * the write.
 */
#define PLDMA_CTX_QUIESCE       (1u << 0)
/* CTX_STATUS */
/* a channel is busy or faulted */
#define PLDMA_CTX_ACTIVE        (1u << 0)
/* the context's function is enabled, with bus mastering on */
#define PLDMA_CTX_FUNCTION      (1u << 1)

/*
 * Channel registers: channel n of a context at
 * PLDMA_CH_BASE + n * PLDMA_CH_STRIDE in the context's block.
 */
#define PLDMA_CH_BASE           0x100
#define PLDMA_CH_STRIDE         0x40
#define PLDMA_MAX_CHANNELS      8

/*
 * SRC, DST and LEN read back what was written, except (2.10) in FAULT: the
 * faulting transfer's own source, destination and length (a descriptor's, or
 * a receiver fault's op here: DST a WRITE's destination, SRC a READ_REQ's
 * source, LEN 0 for a MAILBOX), for the driver to map the rest ahead.
 */
#define PLDMA_CH_SRC_LO         0x00    /* RW: source IOVA */
#define PLDMA_CH_SRC_HI         0x04
#define PLDMA_CH_DST_LO         0x08    /* RW: destination IOVA */
#define PLDMA_CH_DST_HI         0x0c
#define PLDMA_CH_LEN            0x10    /* RW: bytes to copy, 1..MAX_LEN */
/* RW: commands (write-one strobes) + IRQ enable */
#define PLDMA_CH_CTRL           0x14
#define PLDMA_CH_STATUS         0x18    /* RO */
/* RO: IOVA of the access that faulted */
#define PLDMA_CH_FAULT_LO       0x1c
#define PLDMA_CH_FAULT_HI       0x20
/* RO: direction and cause of the last fault */
#define PLDMA_CH_FAULT_INFO     0x24
/* RO: bytes copied so far in this transfer */
#define PLDMA_CH_DONE_BYTES     0x28
#define PLDMA_CH_FAULTS         0x2c    /* RO: faults taken by this transfer */
/* 2.1, RO: where the channel's current or last transfer came from */
#define PLDMA_CH_ORIGIN         0x30
/* 2.1, RO: its descriptor's wr_id (0 for a START) */
#define PLDMA_CH_WRID_LO        0x34
#define PLDMA_CH_WRID_HI        0x38
/* 2.1, WO: the CQE status the next NACK of a queue transfer reports */
#define PLDMA_CH_NACK_STATUS    0x3c

/* CTRL: strobes (read back as 0); exactly one strobe per write, or none */
#define PLDMA_CTRL_START        (1u << 0)       /* IDLE/DONE/ERROR -> BUSY */
/* FAULT -> BUSY, retry from DONE_BYTES */
#define PLDMA_CTRL_RESUME       (1u << 1)
/* BUSY/FAULT -> ERROR(ABORTED); elsewhere a no-op */
#define PLDMA_CTRL_NACK         (1u << 2)
#define PLDMA_CTRL_STROBES      0x7u
/* level: raise IRQ_STATUS on DONE, FAULT, ERROR */
#define PLDMA_CTRL_IRQ_EN       (1u << 8)
/*
 * 2.11, with RESUME or NACK: the command answers the fault whose FAULT_SEQ
 * is CTRL.SEQ, and is rejected (nothing changes, STATUS.REJECTED) when the
 * channel is not in that fault: an answer to a fault that ended cannot end
 * the channel's next one.
 */
#define PLDMA_CTRL_SEQ_CHECK    (1u << 9)
#define PLDMA_CTRL_SEQ_SHIFT    24
#define PLDMA_CTRL_SEQ_MASK     0xff000000u

/* STATUS */
#define PLDMA_STATUS_STATE_MASK 0x0000000fu
#define PLDMA_STATE_IDLE        0
#define PLDMA_STATE_BUSY        1
#define PLDMA_STATE_DONE        2
/* fault-wait: waiting for RESUME or NACK */
#define PLDMA_STATE_FAULT       3
#define PLDMA_STATE_ERROR       4
#define PLDMA_STATUS_ERR_SHIFT  8
#define PLDMA_STATUS_ERR_MASK   0x0000ff00u
#define PLDMA_ERR_NONE          0
#define PLDMA_ERR_BAD_LEN       1       /* LEN is 0 or above MAX_LEN */
/* SRC + LEN or DST + LEN wraps past 2^64 */
#define PLDMA_ERR_BAD_ADDR      2
#define PLDMA_ERR_ABORTED       3       /* NACK from the driver */
/* the context's function is disabled, or its bus mastering is off */
#define PLDMA_ERR_NO_MASTER     4
/* source and destination ranges overlap */
#define PLDMA_ERR_OVERLAP       5
/* 2.1: a queue descriptor's flags are not 0 (queue transfers only) */
#define PLDMA_ERR_BAD_FLAGS     6
/* 2.3: a network op with no port, or its link down */
#define PLDMA_ERR_NO_LINK       7
/* 2.3: the receiver refused the op (CH_NET_STATUS says why) */
#define PLDMA_ERR_REMOTE        8
/* 2.3: the peer stayed silent through NET_RETRIES timeouts */
#define PLDMA_ERR_TIMEOUT       9
/* last command was invalid in this state, ignored */
#define PLDMA_STATUS_REJECTED   (1u << 16)
/*
 * 2.11: the channel's faults, modulo 256: one more each time it enters FAULT
 * (RESET zeroes it). A fault record carries it too.
 */
#define PLDMA_STATUS_FAULT_SEQ_SHIFT 24
#define PLDMA_STATUS_FAULT_SEQ_MASK 0xff000000u

/* FAULT_INFO */
/* 0: reading the source, 1: writing the destination */
#define PLDMA_FAULT_WRITE       (1u << 0)
#define PLDMA_FAULT_CAUSE_SHIFT 8
#define PLDMA_FAULT_CAUSE_MASK  0x0000ff00u
/* the IOMMU found no valid translation */
#define PLDMA_CAUSE_TRANSLATION 1
/* the access itself failed after translation */
#define PLDMA_CAUSE_BUS         2

/* ORIGIN (2.1) */
/* the transfer came from the send queue (else: a START) */
#define PLDMA_ORIGIN_QUEUE      (1u << 31)
/* 2.2, with QUEUE: from the kernel queue */
#define PLDMA_ORIGIN_KERNEL     (1u << 30)
/*
 * 2.3: the channel holds a receiver fault of a remote node's op, not a
 * transfer of its own: RESUME sends RESUME, NACK sends an error NACK with
 * CH_NACK_STATUS; either way the channel goes back to IDLE (no CQE, no
 * interrupt). FAULT_* and DONE_BYTES (bytes placed) describe the fault.
 */
#define PLDMA_ORIGIN_NET_RX     (1u << 29)
/* the SQ index (mod 2^16) of its descriptor */
#define PLDMA_ORIGIN_SQ_INDEX_MASK 0x0000ffffu

/* Q_CFG (2.1): latched when Q_CTRL.ENABLE goes from 0 to 1 */
/* log2 of the SQ entries, PLDMA_Q_LOG2_MIN..PLDMA_Q_LOG2_MAX */
#define PLDMA_Q_CFG_SQ_SHIFT    0
#define PLDMA_Q_CFG_SQ_MASK     0x0000001fu
/* log2 of the CQ entries, PLDMA_Q_LOG2_MIN..PLDMA_Q_LOG2_MAX */
#define PLDMA_Q_CFG_CQ_SHIFT    8
#define PLDMA_Q_CFG_CQ_MASK     0x00001f00u
/* bit 16 + n: the queue may use channel n; all 0: every channel */
#define PLDMA_Q_CFG_CHAN_SHIFT  16
#define PLDMA_Q_CFG_CHAN_MASK   0x00ff0000u
#define PLDMA_Q_LOG2_MIN        1
#define PLDMA_Q_LOG2_MAX        12
/* rings are aligned to this, in bytes */
#define PLDMA_Q_RING_ALIGN      0x1000

/* Q_CTRL (2.1) */
/* 0 -> 1: latch bases and Q_CFG, indices to 0; 1 -> 0: stop the queue */
#define PLDMA_Q_CTRL_ENABLE     (1u << 0)
/*
 * 2.2, with ENABLE 0 -> 1: keep the indices (CTX_Q_SQ_TAIL..CQ_TAIL) instead
 * of zeroing them, and take the descriptors posted between them; indices
 * more than a ring apart put the queue in error (BAD_RING). Reads as 0.
 */
#define PLDMA_Q_CTRL_RESTORE    (1u << 1)
/* 2.2, with ENABLE: arm the CQ event, as VF CQ_ARM does. Reads as 0. */
#define PLDMA_Q_CTRL_ARM        (1u << 2)

/* Q_STATUS (2.1) */
#define PLDMA_Q_STATUS_ENABLED  (1u << 0)
/* stopped on an error: no fetch, no CQE until re-enabled */
#define PLDMA_Q_STATUS_ERROR    (1u << 1)
/* an event found no room in the CQ and was dropped (until the next enable) */
#define PLDMA_Q_STATUS_EVT_LOST (1u << 2)
/* 2.2: a queue transfer is in flight (a channel busy or faulted for it) */
#define PLDMA_Q_STATUS_BUSY     (1u << 3)
/* 2.2: the CQ event is armed */
#define PLDMA_Q_STATUS_ARMED    (1u << 4)
#define PLDMA_Q_STATUS_ERR_SHIFT 8
#define PLDMA_Q_STATUS_ERR_MASK 0x0000ff00u
#define PLDMA_QERR_NONE         0
/* a base misaligned or wrapping, a size or channel mask out of range */
#define PLDMA_QERR_BAD_RING     1
/* reading a descriptor failed (translation, bus, no bus mastering) */
#define PLDMA_QERR_SQ_FETCH     2
/* writing a CQE failed (translation, bus, no bus mastering) */
#define PLDMA_QERR_CQ_WRITE     3

/*
 * EVT_POST (2.1): bits 23:0 the event entry's bytes field (a count), bits
 * 31:24 its kind (not 0), which the entry carries in flags bits 15:8.
 */
#define PLDMA_EVT_POST_COUNT_MASK 0x00ffffffu
#define PLDMA_EVT_POST_KIND_SHIFT 24
#define PLDMA_EVT_POST_KIND_MASK 0xff000000u

/* Send queue entry (descriptor), little-endian: byte offsets of its fields */
#define PLDMA_SQE_SIZE          32
#define PLDMA_SQE_SRC_OFF       0       /* u64: source IOVA */
#define PLDMA_SQE_DST_OFF       8       /* u64: destination IOVA */
#define PLDMA_SQE_LEN_OFF       16      /* u32: bytes, 1..MAX_LEN */
/* u32: bits 3:0 PLDMA_OP_* (2.3; COPY before), the rest 0 */
#define PLDMA_SQE_FLAGS_OFF     20
#define PLDMA_SQE_WRID_OFF      24      /* u64: returned in the CQE */

/*
 * 2.3: a PUT or a GET takes two entries: the one above (PUT: SRC local, DST
 * the remote VA; GET: SRC the remote VA, DST local), then this one, at the
 * next SQ index. The engine takes both at once. 2.4: so does a MAILBOX (SRC
 * local, DST 0; RKEY 0).
 */
#define PLDMA_SQE_NET_RKEY_OFF  0       /* u64: the remote key */
#define PLDMA_SQE_NET_PEER_OFF  8       /* u16: the remote node */
#define PLDMA_SQE_NET_RSVD0_OFF 10      /* u16: 0 */
#define PLDMA_SQE_NET_EP_OFF    12      /* u32: the remote endpoint */
#define PLDMA_SQE_NET_IMM_OFF   16      /* u32, 2.6: PUT_IMM's data, else 0 */
#define PLDMA_SQE_NET_RSVD1_OFF 20      /* 12 bytes: 0 */

/* Completion queue entry, little-endian: byte offsets of its fields */
#define PLDMA_CQE_SIZE          32
#define PLDMA_CQE_WRID_OFF      0       /* u64: the descriptor's wr_id */
#define PLDMA_CQE_STATUS_OFF    8       /* i32: PLDMA_CQE_* status */
#define PLDMA_CQE_BYTES_OFF     12      /* u32: bytes copied */
/* u64: IOVA of the transfer's last fault, 0 if none */
#define PLDMA_CQE_FAULT_OFF     16
#define PLDMA_CQE_FLAGS_OFF     24      /* u32: PLDMA_CQE_PHASE, rest 0 */
#define PLDMA_CQE_RSVD_OFF      28      /* u32: 0 */
/* 1 on the first pass through the ring, toggling at each wrap */
#define PLDMA_CQE_PHASE         (1u << 0)
/* 2.1: an event entry (EVT_POST), not the completion of a descriptor */
#define PLDMA_CQE_EVENT         (1u << 1)
/* 2.1: an event entry's kind, from EVT_POST */
#define PLDMA_CQE_KIND_SHIFT    8
#define PLDMA_CQE_KIND_MASK     0x0000ff00u

/*
 * CQE status: 0, or -(PLDMA_CQE_ERR_BASE + PLDMA_ERR_x) for an engine
 * error, or for a NACK the value the driver wrote to CH_NACK_STATUS
 * (PLDMA_CQE_ABORTED unless it wrote one).
 */
#define PLDMA_CQE_SUCCESS       0
#define PLDMA_CQE_ERR_BASE      256
#define PLDMA_CQE_BAD_LEN       (-257)
#define PLDMA_CQE_BAD_ADDR      (-258)
#define PLDMA_CQE_ABORTED       (-259)
#define PLDMA_CQE_NO_MASTER     (-260)
#define PLDMA_CQE_OVERLAP       (-261)
#define PLDMA_CQE_BAD_FLAGS     (-262)
#define PLDMA_CQE_NO_LINK       (-263)
/* ERROR(REMOTE) reports the receiver's status, a negative errno */
#define PLDMA_CQE_TIMEOUT       (-265)

/* VF BAR0: a context's page, the one user space maps */
#define PLDMA_VF_ID             0x000   /* RO: PLDMA_VF_ID_MAGIC */
#define PLDMA_VF_VERSION        0x004   /* RO: as PLDMA_VERSION */
#define PLDMA_VF_CONTEXT        0x008   /* RO: the context's index */
/* 2.1, RW: SQ producer index (free-running); writing it rings the doorbell */
#define PLDMA_VF_SQ_TAIL        0x040
/* 2.1, RO: descriptors the engine has taken (free-running) */
#define PLDMA_VF_SQ_HEAD        0x044
/* 2.1, RW: CQ consumer index (free-running), written by software */
#define PLDMA_VF_CQ_HEAD        0x048
/* 2.1, RO: CQEs written (free-running) */
#define PLDMA_VF_CQ_TAIL        0x04c
/* 2.1, WO: write PLDMA_VF_CQ_ARM_ONCE to arm the CQ event */
#define PLDMA_VF_CQ_ARM         0x050
#define PLDMA_VF_CQ_ARM_ONCE    (1u << 0)
/* 2.4, RW: the mailbox reader's index (free-running); frees slots */
#define PLDMA_VF_MBOX_HEAD      0x054
/* 2.4, RO: messages placed in the ring (free-running) */
#define PLDMA_VF_MBOX_TAIL      0x058
/* 2.6, WO: write PLDMA_MBOX_ARM_ONCE to arm the mailbox event */
#define PLDMA_VF_MBOX_ARM       0x05c
#define PLDMA_VF_ID_MAGIC       0x45584e56u     /* "EXNV" */

#endif /* EXANEST_PLDMA_REGS_H */
