/*
 * ExaNeSt PLDMA engine model: a PCI DMA copy engine that addresses memory
 * with IOVAs through the platform IOMMU, stalls a channel on a translation
 * fault and retransmits on RESUME.
 *
 * Register map: include/hw/exanest-pldma-regs.h (copied next to this file at
 * build time) and Documentation/pldma-registers.rst.
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Design notes:
 *  - Every channel copies in steps of at most PLDMA_QUANTUM bytes, paced on
 *    QEMU_CLOCK_VIRTUAL by a bandwidth shared by all channels (the data path)
 *    and a per-transfer (and per-retransmission) latency. A step moves its
 *    bytes when its timer fires and then holds the data path for
 *    bytes / bandwidth; the channel's next event (next step, DONE or FAULT)
 *    comes when the data path is through with them.
 *  - Before touching memory a step checks translation page by page with
 *    dma_memory_valid(). The first page that does not translate is the
 *    fault: one IOMMU event per fault, instead of the one-per-4-bytes that a
 *    failing pci_dma_read/write would cause. The pages before it are copied
 *    and charged to the data path, and the channel enters FAULT when the
 *    data path reaches the faulting page.
 *  - Registers programmed by the guest are latched at START, so nothing the
 *    guest writes while a transfer runs can change it; every length and
 *    address is checked before use.
 *  - Guest mistakes are logged with LOG_GUEST_ERROR; the engine's activity
 *    goes to the exanest_pldma_* trace events.
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/units.h"
#include "qemu/timer.h"
#include "qemu/module.h"
#include "qapi/error.h"
#include "hw/pci/pci_device.h"
#include "hw/qdev-properties.h"
#include "hw/registerfields.h"
#include "migration/vmstate.h"
#include "system/dma.h"
#include "qom/object.h"
#include "trace.h"
#include "exanest-pldma-regs.h"

#define TYPE_EXANEST_PLDMA "exanest-pldma"
OBJECT_DECLARE_SIMPLE_TYPE(PldmaState, EXANEST_PLDMA)

#define PLDMA_QUANTUM (64 * KiB)
#define PLDMA_PAGE 4096ULL

/*
 * The register map in QEMU's registerfields.h form. Offsets come from the
 * shared header; the field layouts are checked against its masks below.
 */
REG32(ID, PLDMA_ID)
REG32(VERSION, PLDMA_VERSION)
    FIELD(VERSION, MINOR, 0, 16)
    FIELD(VERSION, MAJOR, 16, 16)
REG32(CAPS, PLDMA_CAPS)
    FIELD(CAPS, NCHAN, 0, 8)
    FIELD(CAPS, RESUME, 8, 1)
    FIELD(CAPS, INTX, 9, 1)
    FIELD(CAPS, TIMING, 10, 1)
REG32(MAX_LEN, PLDMA_MAX_LEN)
REG32(IRQ_STATUS, PLDMA_IRQ_STATUS)
REG32(BANDWIDTH, PLDMA_BANDWIDTH)
REG32(LATENCY, PLDMA_LATENCY)
REG32(SCRATCH, PLDMA_SCRATCH)
REG32(RESET, PLDMA_RESET)

/* Channel registers, relative to the channel's block. */
REG32(CH_SRC_LO, PLDMA_CH_SRC_LO)
REG32(CH_SRC_HI, PLDMA_CH_SRC_HI)
REG32(CH_DST_LO, PLDMA_CH_DST_LO)
REG32(CH_DST_HI, PLDMA_CH_DST_HI)
REG32(CH_LEN, PLDMA_CH_LEN)
REG32(CH_CTRL, PLDMA_CH_CTRL)
    FIELD(CH_CTRL, START, 0, 1)
    FIELD(CH_CTRL, RESUME, 1, 1)
    FIELD(CH_CTRL, NACK, 2, 1)
    FIELD(CH_CTRL, STROBES, 0, 3)
    FIELD(CH_CTRL, IRQ_EN, 8, 1)
REG32(CH_STATUS, PLDMA_CH_STATUS)
    FIELD(CH_STATUS, STATE, 0, 4)
    FIELD(CH_STATUS, ERR, PLDMA_STATUS_ERR_SHIFT, 8)
    FIELD(CH_STATUS, REJECTED, 16, 1)
REG32(CH_FAULT_LO, PLDMA_CH_FAULT_LO)
REG32(CH_FAULT_HI, PLDMA_CH_FAULT_HI)
REG32(CH_FAULT_INFO, PLDMA_CH_FAULT_INFO)
    FIELD(CH_FAULT_INFO, WRITE, 0, 1)
    FIELD(CH_FAULT_INFO, CAUSE, PLDMA_FAULT_CAUSE_SHIFT, 8)
REG32(CH_DONE_BYTES, PLDMA_CH_DONE_BYTES)
REG32(CH_FAULTS, PLDMA_CH_FAULTS)

QEMU_BUILD_BUG_ON(R_CAPS_NCHAN_MASK != PLDMA_CAPS_NCHAN_MASK);
QEMU_BUILD_BUG_ON(R_CAPS_RESUME_MASK != PLDMA_CAPS_RESUME);
QEMU_BUILD_BUG_ON(R_CAPS_INTX_MASK != PLDMA_CAPS_INTX);
QEMU_BUILD_BUG_ON(R_CAPS_TIMING_MASK != PLDMA_CAPS_TIMING);
QEMU_BUILD_BUG_ON(R_CH_CTRL_START_MASK != PLDMA_CTRL_START);
QEMU_BUILD_BUG_ON(R_CH_CTRL_RESUME_MASK != PLDMA_CTRL_RESUME);
QEMU_BUILD_BUG_ON(R_CH_CTRL_NACK_MASK != PLDMA_CTRL_NACK);
QEMU_BUILD_BUG_ON(R_CH_CTRL_STROBES_MASK != PLDMA_CTRL_STROBES);
QEMU_BUILD_BUG_ON(R_CH_CTRL_IRQ_EN_MASK != PLDMA_CTRL_IRQ_EN);
QEMU_BUILD_BUG_ON(R_CH_STATUS_STATE_MASK != PLDMA_STATUS_STATE_MASK);
QEMU_BUILD_BUG_ON(R_CH_STATUS_ERR_MASK != PLDMA_STATUS_ERR_MASK);
QEMU_BUILD_BUG_ON(R_CH_STATUS_REJECTED_MASK != PLDMA_STATUS_REJECTED);
QEMU_BUILD_BUG_ON(R_CH_FAULT_INFO_WRITE_MASK != PLDMA_FAULT_WRITE);
QEMU_BUILD_BUG_ON(R_CH_FAULT_INFO_CAUSE_MASK != PLDMA_FAULT_CAUSE_MASK);
QEMU_BUILD_BUG_ON(PLDMA_CH_BASE + PLDMA_MAX_CHANNELS * PLDMA_CH_STRIDE >
                  PLDMA_MMIO_SIZE);

/* What a busy channel's timer does next, besides copying. */
typedef enum PldmaPending {
    PLDMA_PEND_NONE,    /* copy the next step */
    PLDMA_PEND_DONE,    /* all bytes copied: enter DONE */
    PLDMA_PEND_FAULT,   /* bytes before a fault copied: enter FAULT */
} PldmaPending;

typedef struct PldmaChannel {
    struct PldmaState *dev;
    unsigned index;
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
    PldmaPending pending;
    uint64_t pend_addr;    /* the fault PLDMA_PEND_FAULT will raise */
    uint32_t pend_info;
    uint64_t fault_addr;
    uint32_t fault_info;
    uint32_t done;
    uint32_t faults;
    QEMUTimer *timer;
    uint8_t *bounce;
} PldmaChannel;

struct PldmaState {
    PCIDevice parent_obj;
    MemoryRegion mmio;
    /* Properties. */
    uint32_t nchan;
    uint32_t bandwidth_mbs; /* MB/s = bytes per us; 0 = infinitely fast */
    uint32_t latency_ns;
    uint32_t max_len;
    /* State. */
    uint32_t irq_status;
    uint32_t scratch;
    int64_t bus_free_ns;   /* the shared data path is busy until then */
    PldmaChannel ch[PLDMA_MAX_CHANNELS];
};

static void pldma_update_irq(PldmaState *s)
{
    pci_set_irq(PCI_DEVICE(s), s->irq_status != 0);
}

/* Enter a final or waiting state and raise the channel's interrupt. */
static void pldma_notify(PldmaChannel *c, uint32_t state, uint32_t err)
{
    PldmaState *s = c->dev;

    trace_exanest_pldma_state(c->index, state, err);
    c->state = state;
    c->err = err;
    c->pending = PLDMA_PEND_NONE;
    if (c->irq_en) {
        s->irq_status |= 1u << c->index;
        pldma_update_irq(s);
    }
}

static void pldma_raise_fault(PldmaChannel *c, uint64_t addr, uint32_t info)
{
    c->fault_addr = addr;
    c->fault_info = info;
    c->faults++;
    pldma_notify(c, PLDMA_STATE_FAULT, PLDMA_ERR_NONE);
}

static uint32_t pldma_fault_info(bool write, uint32_t cause)
{
    uint32_t info = 0;

    info = FIELD_DP32(info, CH_FAULT_INFO, WRITE, write);
    return FIELD_DP32(info, CH_FAULT_INFO, CAUSE, cause);
}

static int64_t pldma_xfer_ns(PldmaState *s, uint64_t bytes)
{
    if (!s->bandwidth_mbs) {
        return 0;
    }
    /* MB/s is bytes per microsecond. */
    return (int64_t)(bytes * 1000 / s->bandwidth_mbs);
}

/*
 * The longest prefix of the step [src, src + n) -> [dst, dst + n) that
 * translates, checked piece by piece (a piece stays within one source and
 * one destination page), source then destination. *fault is set to 0 (the
 * source) or 1 (the destination) for the first piece that does not
 * translate, and stays -1 when everything does. That check cost exactly one
 * IOMMU event, and it is the fault.
 */
static uint64_t pldma_translated(PCIDevice *pdev, uint64_t src, uint64_t dst,
                                 uint64_t n, int *fault)
{
    AddressSpace *as = pci_get_address_space(pdev);
    uint64_t off = 0;

    *fault = -1;
    while (off < n) {
        uint64_t piece = MIN(n - off,
                             PLDMA_PAGE - ((src + off) & (PLDMA_PAGE - 1)));

        piece = MIN(piece, PLDMA_PAGE - ((dst + off) & (PLDMA_PAGE - 1)));
        if (!dma_memory_valid(as, src + off, piece, DMA_DIRECTION_TO_DEVICE,
                              MEMTXATTRS_UNSPECIFIED)) {
            *fault = 0;
            break;
        }
        if (!dma_memory_valid(as, dst + off, piece,
                              DMA_DIRECTION_FROM_DEVICE,
                              MEMTXATTRS_UNSPECIFIED)) {
            *fault = 1;
            break;
        }
        off += piece;
    }
    return off;
}

/* Timer: copy the next step of a busy channel, or complete it. */
static void pldma_step(void *opaque)
{
    PldmaChannel *c = opaque;
    PldmaState *s = c->dev;
    PCIDevice *pdev = PCI_DEVICE(s);
    uint64_t n, off, src, dst;
    int64_t now, start;
    int fault;

    if (c->state != PLDMA_STATE_BUSY) {
        return;
    }
    switch (c->pending) {
    case PLDMA_PEND_DONE:
        pldma_notify(c, PLDMA_STATE_DONE, PLDMA_ERR_NONE);
        return;
    case PLDMA_PEND_FAULT:
        pldma_raise_fault(c, c->pend_addr, c->pend_info);
        return;
    case PLDMA_PEND_NONE:
        break;
    }
    if (!(pci_get_word(pdev->config + PCI_COMMAND) & PCI_COMMAND_MASTER)) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_NO_MASTER);
        return;
    }

    src = c->a_src + c->done;
    dst = c->a_dst + c->done;
    n = MIN((uint64_t)(c->a_len - c->done), PLDMA_QUANTUM);

    /*
     * Copy what translated; a fault leaves the channel to stop in
     * fault-wait, so the retransmission starts at the faulting piece.
     */
    off = pldma_translated(pdev, src, dst, n, &fault);
    if (off) {
        if (pci_dma_read(pdev, src, c->bounce, off) != MEMTX_OK) {
            pldma_raise_fault(c, src, pldma_fault_info(false, PLDMA_CAUSE_BUS));
            return;
        }
        if (pci_dma_write(pdev, dst, c->bounce, off) != MEMTX_OK) {
            pldma_raise_fault(c, dst, pldma_fault_info(true, PLDMA_CAUSE_BUS));
            return;
        }
    }

    /* The bytes copied hold the shared data path, fault or not. */
    now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    start = MAX(now, s->bus_free_ns);
    s->bus_free_ns = start + pldma_xfer_ns(s, off);
    trace_exanest_pldma_step(c->index, c->done, off, start, s->bus_free_ns);
    c->done += off;

    if (fault >= 0) {
        uint64_t addr = (fault ? dst : src) + off;
        uint32_t info = pldma_fault_info(fault == 1, PLDMA_CAUSE_TRANSLATION);

        trace_exanest_pldma_fault(c->index, fault, addr,
                                  PLDMA_CAUSE_TRANSLATION, s->bus_free_ns);
        if (s->bus_free_ns <= now) {
            pldma_raise_fault(c, addr, info);
            return;
        }
        c->pending = PLDMA_PEND_FAULT;
        c->pend_addr = addr;
        c->pend_info = info;
    } else if (c->done == c->a_len) {
        c->pending = PLDMA_PEND_DONE;
    }
    timer_mod(c->timer, s->bus_free_ns);
}

static void pldma_kick(PldmaChannel *c)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);

    c->state = PLDMA_STATE_BUSY;
    c->err = PLDMA_ERR_NONE;
    c->pending = PLDMA_PEND_NONE;
    timer_mod(c->timer, now + c->dev->latency_ns);
}

static bool pldma_wraps(uint64_t a, uint64_t len)
{
    return a + len < a;
}

static void pldma_start(PldmaChannel *c)
{
    PldmaState *s = c->dev;
    PCIDevice *pdev = PCI_DEVICE(s);

    c->a_src = c->src;
    c->a_dst = c->dst;
    c->a_len = c->len;
    c->done = 0;
    c->faults = 0;
    c->fault_addr = 0;
    c->fault_info = 0;
    trace_exanest_pldma_start(c->index, c->a_src, c->a_dst, c->a_len);

    if (!c->a_len || c->a_len > s->max_len) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_BAD_LEN);
    } else if (pldma_wraps(c->a_src, c->a_len) ||
               pldma_wraps(c->a_dst, c->a_len)) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_BAD_ADDR);
    } else if (c->a_src < c->a_dst + c->a_len &&
               c->a_dst < c->a_src + c->a_len) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_OVERLAP);
    } else if (!(pci_get_word(pdev->config + PCI_COMMAND) &
                 PCI_COMMAND_MASTER)) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_NO_MASTER);
    } else {
        pldma_kick(c);
    }
}

static void pldma_ctrl(PldmaChannel *c, uint32_t val)
{
    uint32_t cmd = val & R_CH_CTRL_STROBES_MASK;
    bool ok = true;

    c->irq_en = FIELD_EX32(val, CH_CTRL, IRQ_EN);
    switch (cmd) {
    case 0:
        return;
    case R_CH_CTRL_START_MASK:
        ok = c->state != PLDMA_STATE_BUSY && c->state != PLDMA_STATE_FAULT;
        if (ok) {
            pldma_start(c);
        }
        break;
    case R_CH_CTRL_RESUME_MASK:
        ok = c->state == PLDMA_STATE_FAULT;
        if (ok) {
            trace_exanest_pldma_resume(c->index, c->done);
            pldma_kick(c);
        }
        break;
    case R_CH_CTRL_NACK_MASK:
        if (c->state == PLDMA_STATE_BUSY || c->state == PLDMA_STATE_FAULT) {
            trace_exanest_pldma_nack(c->index, c->done);
            timer_del(c->timer);
            pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_ABORTED);
        }
        break;
    default:
        ok = false; /* more than one strobe */
        break;
    }
    if (!ok) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ch%u: command 0x%x rejected in state %u\n",
                      c->index, cmd, c->state);
    }
    c->rejected = !ok;
}

static void pldma_channel_reset(PldmaChannel *c)
{
    timer_del(c->timer);
    c->src = c->dst = c->a_src = c->a_dst = 0;
    c->len = c->a_len = 0;
    c->irq_en = false;
    c->state = PLDMA_STATE_IDLE;
    c->err = PLDMA_ERR_NONE;
    c->rejected = false;
    c->pending = PLDMA_PEND_NONE;
    c->pend_addr = 0;
    c->pend_info = 0;
    c->fault_addr = 0;
    c->fault_info = 0;
    c->done = 0;
    c->faults = 0;
}

static void pldma_reset_all(PldmaState *s)
{
    trace_exanest_pldma_reset();
    for (unsigned i = 0; i < s->nchan; i++) {
        pldma_channel_reset(&s->ch[i]);
    }
    s->irq_status = 0;
    s->bus_free_ns = 0;
    pldma_update_irq(s);
}

static uint32_t pldma_ch_status(PldmaChannel *c)
{
    uint32_t st = 0;

    st = FIELD_DP32(st, CH_STATUS, STATE, c->state);
    st = FIELD_DP32(st, CH_STATUS, ERR, c->err);
    return FIELD_DP32(st, CH_STATUS, REJECTED, c->rejected);
}

static uint64_t pldma_ch_read(PldmaChannel *c, hwaddr off)
{
    switch (off) {
    case A_CH_SRC_LO:
        return extract64(c->src, 0, 32);
    case A_CH_SRC_HI:
        return extract64(c->src, 32, 32);
    case A_CH_DST_LO:
        return extract64(c->dst, 0, 32);
    case A_CH_DST_HI:
        return extract64(c->dst, 32, 32);
    case A_CH_LEN:
        return c->len;
    case A_CH_CTRL:
        return FIELD_DP32(0, CH_CTRL, IRQ_EN, c->irq_en);
    case A_CH_STATUS:
        return pldma_ch_status(c);
    case A_CH_FAULT_LO:
        return extract64(c->fault_addr, 0, 32);
    case A_CH_FAULT_HI:
        return extract64(c->fault_addr, 32, 32);
    case A_CH_FAULT_INFO:
        return c->fault_info;
    case A_CH_DONE_BYTES:
        return c->done;
    case A_CH_FAULTS:
        return c->faults;
    }
    qemu_log_mask(LOG_GUEST_ERROR,
                  "exanest-pldma: ch%u: read of unknown offset 0x%"
                  HWADDR_PRIx "\n", c->index, off);
    return 0;
}

static void pldma_ch_write(PldmaChannel *c, hwaddr off, uint32_t val)
{
    switch (off) {
    case A_CH_SRC_LO:
        c->src = deposit64(c->src, 0, 32, val);
        return;
    case A_CH_SRC_HI:
        c->src = deposit64(c->src, 32, 32, val);
        return;
    case A_CH_DST_LO:
        c->dst = deposit64(c->dst, 0, 32, val);
        return;
    case A_CH_DST_HI:
        c->dst = deposit64(c->dst, 32, 32, val);
        return;
    case A_CH_LEN:
        c->len = val;
        return;
    case A_CH_CTRL:
        pldma_ctrl(c, val);
        return;
    }
    qemu_log_mask(LOG_GUEST_ERROR,
                  "exanest-pldma: ch%u: write 0x%x to read-only or unknown "
                  "offset 0x%" HWADDR_PRIx "\n", c->index, val, off);
}

static PldmaChannel *pldma_channel_at(PldmaState *s, hwaddr addr,
                                      hwaddr *off)
{
    hwaddr idx;

    if (addr < PLDMA_CH_BASE) {
        return NULL;
    }
    idx = (addr - PLDMA_CH_BASE) / PLDMA_CH_STRIDE;
    if (idx >= s->nchan) {
        return NULL;
    }
    *off = (addr - PLDMA_CH_BASE) % PLDMA_CH_STRIDE;
    return &s->ch[idx];
}

static uint64_t pldma_global_read(PldmaState *s, hwaddr addr, bool *known)
{
    uint32_t v = 0;

    *known = true;
    switch (addr) {
    case A_ID:
        return PLDMA_ID_MAGIC;
    case A_VERSION:
        v = FIELD_DP32(v, VERSION, MAJOR, PLDMA_VERSION_MAJOR);
        return FIELD_DP32(v, VERSION, MINOR, PLDMA_VERSION_MINOR);
    case A_CAPS:
        v = FIELD_DP32(v, CAPS, NCHAN, s->nchan);
        v = FIELD_DP32(v, CAPS, RESUME, 1);
        v = FIELD_DP32(v, CAPS, INTX, 1);
        return FIELD_DP32(v, CAPS, TIMING, 1);
    case A_MAX_LEN:
        return s->max_len;
    case A_IRQ_STATUS:
        return s->irq_status;
    case A_BANDWIDTH:
        return s->bandwidth_mbs;
    case A_LATENCY:
        return s->latency_ns;
    case A_SCRATCH:
        return s->scratch;
    case A_RESET:
        return 0;
    }
    *known = false;
    return 0;
}

static uint64_t pldma_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    PldmaState *s = opaque;
    PldmaChannel *c;
    uint64_t val;
    hwaddr off;
    bool known;

    val = pldma_global_read(s, addr, &known);
    if (!known) {
        c = pldma_channel_at(s, addr, &off);
        if (c) {
            val = pldma_ch_read(c, off);
        } else {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma: read of unknown offset 0x%"
                          HWADDR_PRIx "\n", addr);
        }
    }
    trace_exanest_pldma_mmio_read(addr, val);
    return val;
}

static void pldma_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    PldmaState *s = opaque;
    PldmaChannel *c;
    hwaddr off;

    trace_exanest_pldma_mmio_write(addr, val);
    switch (addr) {
    case A_IRQ_STATUS:
        s->irq_status &= ~(uint32_t)val;
        pldma_update_irq(s);
        return;
    case A_SCRATCH:
        s->scratch = val;
        return;
    case A_RESET:
        if (val == PLDMA_RESET_MAGIC) {
            pldma_reset_all(s);
        }
        return;
    }
    c = pldma_channel_at(s, addr, &off);
    if (c) {
        pldma_ch_write(c, off, val);
        return;
    }
    qemu_log_mask(LOG_GUEST_ERROR,
                  "exanest-pldma: write 0x%" PRIx64 " to read-only or "
                  "unknown offset 0x%" HWADDR_PRIx "\n", val, addr);
}

static const MemoryRegionOps pldma_mmio_ops = {
    .read = pldma_mmio_read,
    .write = pldma_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    /* 64-bit accesses are split into two 32-bit ones (low half first). */
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
        .unaligned = false,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 4,
    },
};

static void pldma_realize(PCIDevice *pdev, Error **errp)
{
    PldmaState *s = EXANEST_PLDMA(pdev);

    if (s->nchan < 1 || s->nchan > PLDMA_MAX_CHANNELS) {
        error_setg(errp, "exanest-pldma: channels must be 1..%d",
                   PLDMA_MAX_CHANNELS);
        return;
    }
    if (s->max_len < 1 || s->max_len > 1u << 31) {
        error_setg(errp, "exanest-pldma: max-len must be 1..2^31");
        return;
    }
    pci_config_set_interrupt_pin(pdev->config, 1); /* INTA# */
    memory_region_init_io(&s->mmio, OBJECT(s), &pldma_mmio_ops, s,
                          "exanest-pldma-mmio", PLDMA_MMIO_SIZE);
    pci_register_bar(pdev, 0, PCI_BASE_ADDRESS_SPACE_MEMORY, &s->mmio);
    for (unsigned i = 0; i < s->nchan; i++) {
        PldmaChannel *c = &s->ch[i];

        c->dev = s;
        c->index = i;
        c->bounce = g_malloc(PLDMA_QUANTUM);
        c->timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pldma_step, c);
    }
    pldma_reset_all(s);
}

static void pldma_exit(PCIDevice *pdev)
{
    PldmaState *s = EXANEST_PLDMA(pdev);

    for (unsigned i = 0; i < s->nchan; i++) {
        timer_free(s->ch[i].timer);
        g_free(s->ch[i].bounce);
    }
}

static void pldma_qdev_reset(DeviceState *dev)
{
    pldma_reset_all(EXANEST_PLDMA(dev));
}

static const Property pldma_properties[] = {
    DEFINE_PROP_UINT32("channels", PldmaState, nchan, 4),
    DEFINE_PROP_UINT32("bandwidth", PldmaState, bandwidth_mbs, 2000),
    DEFINE_PROP_UINT32("latency-ns", PldmaState, latency_ns, 2000),
    DEFINE_PROP_UINT32("max-len", PldmaState, max_len, 1u << 30),
};

/*
 * Not migratable, on purpose. Nothing in this project migrates or snapshots
 * a VM: each guest boots from an initramfs for one test or evaluation run.
 * Migration state for transfers in flight (the channel timers, the shared
 * data path's clock, the latched registers, a fault waiting to be raised)
 * would be code that no test exercises, so the device blocks migration and
 * savevm instead: a migration attempt fails cleanly rather than losing or
 * corrupting a transfer.
 */
static const VMStateDescription vmstate_pldma = {
    .name = TYPE_EXANEST_PLDMA,
    .unmigratable = 1,
};

static void pldma_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = pldma_realize;
    k->exit = pldma_exit;
    k->vendor_id = PLDMA_PCI_VENDOR_ID;
    k->device_id = PLDMA_PCI_DEVICE_ID;
    k->revision = PLDMA_VERSION_MAJOR;
    k->class_id = PCI_CLASS_SYSTEM_OTHER;
    dc->desc = "ExaNeSt PLDMA engine "
               "(virtual-address DMA with fault retransmission)";
    dc->vmsd = &vmstate_pldma;
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
    device_class_set_legacy_reset(dc, pldma_qdev_reset);
    device_class_set_props(dc, pldma_properties);
}

static const TypeInfo pldma_info = {
    .name = TYPE_EXANEST_PLDMA,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(PldmaState),
    .class_init = pldma_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_CONVENTIONAL_PCI_DEVICE },
        { },
    },
};

static void pldma_register_types(void)
{
    type_register_static(&pldma_info);
}

type_init(pldma_register_types)
