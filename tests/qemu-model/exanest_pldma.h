/*
 * ExaNeSt PLDMA engine model: the state shared by the engine
 * (exanest_pldma.c) and its network port (exanest_net.c).
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef EXANEST_PLDMA_H
#define EXANEST_PLDMA_H

#include "hw/pci/pci_device.h"
#include "hw/sysbus.h"
#include "system/dma.h"
#include "hw/arm/arm_mmu500.h"
#include "hw/misc/exanest_pldma_fdt.h"
#include "net/net.h"
#include "qemu/timer.h"
#include "exanest-pldma-regs.h"
#include "exanest_core.h"

/* The PCIe front-end: the engine as an SR-IOV PF, a VF per context */
#define TYPE_EXANEST_PLDMA "exanest-pldma"
OBJECT_DECLARE_SIMPLE_TYPE(PldmaPciState, EXANEST_PLDMA)
#define TYPE_EXANEST_PLDMA_VF "exanest-pldma-vf"
OBJECT_DECLARE_SIMPLE_TYPE(PldmaVfState, EXANEST_PLDMA_VF)
/* The platform front-end: in PL address space, behind an MMU-500 */
OBJECT_DECLARE_SIMPLE_TYPE(PldmaPlatState, EXANEST_PLDMA_PLATFORM)

typedef struct PldmaState PldmaState;

/* Bytes per data path turn: the value of the QUANTUM register. */
#define PLDMA_STEP (64 * KiB)
#define PLDMA_PAGE 4096ULL

typedef enum PldmaPending {
    PLDMA_PEND_NONE,    /* bytes remain: the channel is ready again */
    PLDMA_PEND_DONE,    /* all bytes copied: enter DONE */
    PLDMA_PEND_FAULT,   /* bytes before a fault copied: enter FAULT */
    PLDMA_PEND_WAIT,    /* a network op's window is full: wait for ACKs */
} PldmaPending;

typedef struct PldmaContext PldmaContext;

typedef struct PldmaChannel {
    PldmaContext *ctx;
    unsigned index;         /* within its context */
    /* Programmed by the guest. */
    uint64_t src, dst;
    uint32_t len;
    bool irq_en;
    /* Latched at START. */
    uint64_t a_src, a_dst;
    uint32_t a_len;
    /* Progress and status. */
    uint32_t state, err;
    bool rejected;
    bool ready;             /* BUSY and waiting for a data path turn */
    PldmaPending pending;   /* valid while the channel's turn runs */
    uint64_t pend_addr;     /* the fault PLDMA_PEND_FAULT will raise */
    uint32_t pend_info;
    uint64_t fault_addr;
    uint32_t fault_info;
    uint32_t done;
    uint32_t faults;
    uint8_t fault_seq;      /* 2.11: faults since RESET, modulo 256 */
    /* Where the transfer came from: ORIGIN, and its descriptor's wr_id. */
    uint32_t origin;
    uint64_t wr_id;
    uint32_t nack_status;   /* the CQE status of a NACK */
    QEMUTimer *latency;     /* START/RESUME: ready latency-ns later */
    /* 2.3: network registers, as programmed, then latched at START. */
    uint32_t net_op, net_peer, net_ep;
    uint64_t net_rkey;
    uint32_t a_op, a_peer, a_ep;
    uint32_t a_imm;         /* 2.6: a PUT_IMM's immediate data */
    uint64_t a_rkey;
    /*
     * A network op's sending side: the core's state machine (exanest_core.h),
     * which done mirrors (the bytes placed, for the registers and the CQE);
     * rto runs at its deadline.
     */
    uint32_t op_id;
    struct ExanestSendOp *snd;
    int32_t net_status;     /* ERROR(REMOTE): the receiver's -errno */
    QEMUTimer *rto;
    int rx;                 /* ORIGIN NET_RX: the receive op it reports */
    uint32_t rx_src;        /* ORIGIN NET_RX: the sending node */
    uint64_t mbox_order;    /* 2.4, a MAILBOX: when it started, per context */
    uint64_t get_hold;      /* a GET: 1 + where it stopped asking */
} PldmaChannel;

/*
 * A context's send and completion queues: the user's (2.1), whose rings the
 * context's VF reads and writes, or the kernel's (2.2), whose rings the PF
 * does.
 */
typedef struct PldmaQueue {
    PldmaContext *ctx;
    bool kernel;
    /* Programmed by the driver. */
    uint64_t sq_base, cq_base;
    uint32_t cfg;
    bool enabled;           /* Q_CTRL.ENABLE, so Q_STATUS.ENABLED */
    /* Latched when enabled. */
    uint64_t a_sq_base, a_cq_base;
    uint32_t sq_n, cq_n;    /* entries, powers of two (0: bad config) */
    uint32_t chmask;        /* the channels the queue may take */
    /* The indices, free-running. */
    uint32_t sq_tail, sq_head, cq_head, cq_tail;
    uint32_t cq_writing;    /* CQEs being written: their slots are taken */
    bool armed;             /* the CQ event fires at the next CQE */
    uint32_t err;           /* PLDMA_QERR_*: stopped unless NONE */
    uint64_t err_addr;
    uint64_t evt_arg;       /* EVT_ARG: the next event entry's wr_id */
    bool evt_lost;          /* an event found the CQ full (until enabled) */
    unsigned gen;           /* changes whenever the queue starts or stops */
    bool pumping;           /* pldma_q_pump() is running */
} PldmaQueue;

struct PldmaContext {
    struct PldmaState *dev;
    unsigned index;         /* = the index of the VF issuing its DMA */
    /* bit n: channel n raised its interrupt; CQ event; queue error */
    uint32_t irq_status;
    unsigned next_ch;       /* round-robin: the channel asked first */
    PldmaChannel ch[PLDMA_MAX_CHANNELS];
    PldmaQueue q;           /* the user's queue, its doorbells in the VF */
    PldmaQueue kq;          /* the kernel's queue (2.2), all in the PF */
    /* 2.4: the mailbox's receive ring, as programmed, then latched. */
    uint64_t mbox_base, a_mbox_base;
    uint32_t mbox_cfg;      /* PLDMA_MBOX_CFG_*, ENABLE as it is */
    uint32_t mbox_n;        /* slots (latched) */
    uint32_t mbox_head, mbox_tail;
    bool mbox_armed;        /* 2.6: the mailbox event is armed */
    uint64_t mbox_started;  /* MAILBOX ops started: their order */
    /* 2.11: the fault record ring, as programmed, then latched. */
    uint64_t frec_base, a_frec_base;
    uint32_t frec_cfg;      /* PLDMA_FREC_CFG_*, ENABLE as it is */
    uint32_t frec_n;        /* records (latched) */
    uint32_t frec_head, frec_tail;
};

/* A packet on its way over the link. */
typedef struct PldmaTxPacket {
    QSIMPLEQ_ENTRY(PldmaTxPacket) next;
    int64_t depart;         /* when the link sends it */
    int64_t at;             /* when it reaches the far end */
    uint8_t op;             /* what it is, to withdraw it */
    uint16_t dst;
    uint32_t op_id;
    uint64_t offset;
    size_t len;
    uint8_t data[];
} PldmaTxPacket;

/* A data packet the ingress queue holds (2.7), decoded: delivered at @at */
typedef struct PldmaRxPacket {
    QSIMPLEQ_ENTRY(PldmaRxPacket) next;
    int64_t at;
    ExanestPkt k;           /* k.payload points at data */
    uint8_t data[];
} PldmaRxPacket;

/* An rkey table entry: the core reads the table as it is (exanest_core.h) */
typedef ExanestRkey PldmaRkey;

/* The network port (2.3). */
typedef struct PldmaNet {
    NICConf conf;
    NICState *nic;
    /* Properties. */
    uint32_t node;
    uint32_t window;
    uint32_t link_latency_ns;
    uint32_t link_bw_mbs;   /* 0: the data path's bandwidth property */
    uint64_t seed;
    uint32_t rx_queue;      /* 2.7: the ingress queue, bytes (0: none) */
    uint32_t ecn_threshold; /* 2.7: it marks past this many (0: never) */
    uint32_t rtt_ns;        /* 2.7: the fabric's round trip (0: the link's) */
    uint32_t ack_every;     /* ACK one in this many packets placed in order */
    uint32_t rx_lookahead;  /* check translations this far ahead of WRITEs */
    /* Registers. */
    uint32_t rto_us, retries, drop_ppm, corrupt_ppm;
    uint32_t reorder_ppm, reorder_us;   /* 2.8 */
    uint32_t ep_sel, rkey_sel, src_sel;
    PldmaRkey rkey_win;     /* the entry being written */
    uint32_t ep[PLDMA_NET_MAX_EPS];
    PldmaRkey rkeys[PLDMA_NET_MAX_RKEYS];
    uint32_t cnt[PLDMA_NET_COUNTERS];
    uint32_t cc[PLDMA_NET_CC_COUNTERS];
    uint32_t irq;           /* NET_IRQ (2.4) */
    uint32_t ep_wanted[PLDMA_NET_EP_WANTED_WORDS];
    /* Sending. */
    uint32_t next_op_id[PLDMA_NET_MAX_NODES];  /* per peer, from a random id */
    uint64_t rng;
    uint64_t cookie_rng;    /* MAILBOX cookies: a generator of their own */
    int64_t tx_free_ns;     /* the link is busy sending until then */
    QSIMPLEQ_HEAD(, PldmaTxPacket) txq;
    QEMUTimer *tx_timer;
    /* Bit n: a channel waits for node n's window; the BH wakes them. */
    uint64_t peer_blocked;
    QEMUBH *cc_bh;
    /* The ingress queue (2.7): it delivers until rx_free_ns. */
    int64_t rx_free_ns;
    QSIMPLEQ_HEAD(, PldmaRxPacket) rxq;
    QEMUTimer *rx_timer;
    /* Coalesced ACKs: the owed ones go when this fires. */
    QEMUTimer *ack_timer;
    uint64_t ack_delay_ns;  /* how long an owed ACK waits */
    /* Receiving: the core's table of remote ops (RecvTable). */
    ExanestRecvTable *rxt;
    /* Per receive slot: its op (source << 32 | op id), 1 + its last miss. */
    uint64_t la_op[PLDMA_NET_RX_OPS], la_miss[PLDMA_NET_RX_OPS];
    uint64_t la_next[PLDMA_NET_RX_OPS];     /* the next page to look at */
    /* The round trip and the window of each peer (RttTable). */
    ExanestRttTable *rtt;
} PldmaNet;

/*
 * What differs between the front-ends: who issues the engine's DMA, and its
 * interrupt line.
 */
typedef struct PldmaBusOps {
    /* Context @ctx's DMA, or NULL while it may not be a bus master */
    AddressSpace *(*ctx_as)(PldmaState *s, unsigned ctx);
    /* The engine's own DMA (kernel queues, fault records), or NULL */
    AddressSpace *(*own_as)(PldmaState *s);
    void (*set_irq)(PldmaState *s, bool level);
    /* CAPS.SRIOV: the contexts are virtual functions (else AXI IDs) */
    bool sriov;
} PldmaBusOps;

/* The engine, whichever front-end holds it */
struct PldmaState {
    DeviceState *dev;       /* the front-end */
    const PldmaBusOps *bus;
    MemoryRegion mmio;
    /* Properties. */
    uint32_t nctx;
    uint32_t nchan;         /* per context */
    uint32_t bandwidth_mbs; /* MB/s = bytes per us; 0 = infinitely fast */
    uint32_t latency_ns;
    uint32_t max_len;
    /* State. */
    uint32_t scratch;
    PldmaContext *ctx;
    /* The shared data path. */
    QEMUTimer *arbiter;     /* fires when the data path is free again */
    PldmaChannel *turn;     /* whose bytes hold it now, or NULL */
    int64_t path_free_ns;   /* it is busy until then */
    unsigned next_ctx;      /* round-robin: the context asked first */
    uint8_t *bounce;        /* one turn's bytes */
    PldmaNet net;
};

struct PldmaPciState {
    PCIDevice parent_obj;
    PldmaState e;
};

struct PldmaVfState {
    PCIDevice parent_obj;
    MemoryRegion mmio;
};

struct PldmaPlatState {
    SysBusDevice parent_obj;
    PldmaState e;
    qemu_irq irq;
    /* The contexts' pages (their doorbells): what a VF's BAR is on PCIe */
    MemoryRegion ctx_mmio;
    MemoryRegion *ctx_page;
    /* Properties: the MMU-500 in front of it and its first StreamID */
    ArmMmu500State *iommu;
    uint32_t stream_id;
    /* The engine's DMA as StreamID stream-id, context n's as stream-id+1+n */
    AddressSpace *own_as;
    AddressSpace **ctx_as;
};

/* DMA as @as (a context's or the engine's own), with no attributes */
static inline MemTxResult pldma_dma_read(AddressSpace *as, dma_addr_t addr,
                                         void *buf, dma_addr_t len)
{
    return dma_memory_read(as, addr, buf, len, MEMTXATTRS_UNSPECIFIED);
}

static inline MemTxResult pldma_dma_write(AddressSpace *as, dma_addr_t addr,
                                          const void *buf, dma_addr_t len)
{
    return dma_memory_write(as, addr, buf, len, MEMTXATTRS_UNSPECIFIED);
}

/* The engine (exanest_pldma.c), for the port. */
AddressSpace *pldma_ctx_master(PldmaContext *x);
void pldma_update_irq(PldmaState *s);
void pldma_notify(PldmaChannel *c, uint32_t state, uint32_t err);
void pldma_cancel(PldmaChannel *c);
void pldma_arbiter_kick(PldmaState *s);
void pldma_pump(PldmaContext *x);
int64_t pldma_xfer_ns(PldmaState *s, uint64_t bytes);
uint32_t pldma_fault_info(bool write, uint32_t cause);
void pldma_frec_fault(PldmaChannel *c);

/* The port (exanest_net.c), for the engine. */
void pldma_net_realize(PldmaState *s);
void pldma_net_exit(PldmaState *s);
void pldma_net_reset(PldmaState *s);
void pldma_net_channel_init(PldmaChannel *c);
void pldma_net_channel_exit(PldmaChannel *c);
bool pldma_net_link(PldmaState *s);
/* START or a descriptor latched a network op on c: false to refuse it */
uint32_t pldma_net_launch(PldmaChannel *c);
void pldma_net_turn(PldmaState *s, PldmaChannel *c, AddressSpace *fn,
                    int64_t now);
void pldma_net_stop(PldmaChannel *c);
void pldma_net_abort(PldmaChannel *c);
void pldma_net_rx_resume(PldmaChannel *c);
void pldma_net_rx_nack(PldmaChannel *c);
void pldma_net_channel_freed(PldmaContext *x);
/* 2.4: a MAILBOX of @x ended (DONE, ERROR): the next one may go */
void pldma_net_mbox_next(PldmaContext *x);
/* 2.4: the mailbox's reader freed slots of @x's ring (HEAD written) */
void pldma_net_mbox_freed(PldmaContext *x);
void pldma_mbox_event(PldmaContext *x);
bool pldma_net_read(PldmaState *s, hwaddr addr, uint64_t *val);
bool pldma_net_write(PldmaState *s, hwaddr addr, uint32_t val);
bool pldma_ch_net_read(PldmaChannel *c, hwaddr off, uint64_t *val);
bool pldma_ch_net_write(PldmaChannel *c, hwaddr off, uint32_t val);

#endif /* EXANEST_PLDMA_H */
