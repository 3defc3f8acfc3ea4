/*
 * ExaNeSt PLDMA engine model: a PCIe DMA copy engine with contexts. It
 * addresses memory with IOVAs through the platform IOMMU, stalls a channel
 * on a translation fault and retransmits on RESUME.
 *
 * Register map: include/hw/exanest-pldma-regs.h (copied next to this file at
 * build time) and Documentation/pldma-registers.rst, version 2.4.
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Design notes:
 *  - The engine is an SR-IOV physical function (TYPE_EXANEST_PLDMA, the
 *    control plane: every register of every context is in its BAR0) with
 *    one virtual function per context (TYPE_EXANEST_PLDMA_VF). Context c
 *    issues all its DMA as VF c: through that VF's address space, so with
 *    its requester ID and, behind the SMMU, its StreamID. A context whose VF
 *    is disabled, or has bus mastering off, cannot move data (NO_MASTER).
 *    The PF's own bus-master bit plays no part in context DMA. Interrupts
 *    come from the PF only.
 *  - One data path, shared by every channel of every context, moves at most
 *    PLDMA_STEP bytes per turn at the modelled bandwidth. A channel becomes
 *    ready for the data path latency-ns after START or RESUME (its latency
 *    timer), and again when each of its turns is through. The arbiter (one
 *    timer) gives the data path round-robin to the contexts that have a
 *    ready channel, and within a context round-robin to its ready channels.
 *    A turn copies its bytes when it starts and then holds the data path for
 *    bytes / bandwidth; what follows the turn (the channel's next turn, DONE
 *    or FAULT) happens when the data path is through with them.
 *  - Before touching memory a turn checks translation page by page with
 *    dma_memory_valid(). The first page that does not translate is the
 *    fault: one IOMMU event per fault, instead of the one-per-4-bytes that a
 *    failing pci_dma_read/write would cause. The pages before it are copied
 *    and charged to the data path, and the channel enters FAULT when the
 *    data path reaches the faulting page.
 *  - Registers programmed by the guest are latched at START, so nothing the
 *    guest writes while a transfer runs can change it; every length and
 *    address is checked before use.
 *  - Queues (2.1): each context has a send queue and a completion queue,
 *    rings in its own address space that the engine reads and writes as
 *    its VF. The doorbells are in the VF's page. The engine takes a
 *    descriptor (pldma_q_pump) whenever the queue is enabled and not in
 *    error, a descriptor is posted, a channel the queue may use is free and
 *    the CQ has room for every queue transfer in flight plus this one; it
 *    then starts it on that channel as START would. Descriptors are taken
 *    at the instant that allows it (doorbell, a channel freed, CQ_HEAD
 *    moved): fetching costs no modelled time. A queue transfer's end writes
 *    a CQE instead of raising the channel's interrupt; a fault still raises
 *    it, for the driver to resolve.
 *  - Queue DMA could reach the engine's own registers (a ring in a BAR).
 *    Nothing may break then: the pump does not nest, and code that does
 *    queue DMA checks the queue's generation afterwards (reads of the
 *    engine's registers have no side effects).
 *  - Guest mistakes are logged with LOG_GUEST_ERROR; the engine's activity
 *    goes to the exanest_pldma_* trace events.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "qemu/units.h"
#include "qemu/timer.h"
#include "qemu/module.h"
#include "qapi/error.h"
#include "hw/irq.h"
#include "system/device_tree.h"
#include "hw/misc/exanest_pldma_fdt.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/pcie.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "qemu/cutils.h"
#include "hw/registerfields.h"
#include "migration/vmstate.h"
#include "system/dma.h"
#include "qom/object.h"
#include "trace.h"
#include "exanest-pldma-regs.h"
#include "exanest_pldma.h"


/* Config space layout, PF and VF alike. */
#define PLDMA_PCIE_CAP_OFFSET   0x80
#define PLDMA_ARI_CAP_OFFSET    0x100
#define PLDMA_SRIOV_CAP_OFFSET  0x160   /* PF only */

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
    FIELD(CAPS, SRIOV, 11, 1)
    FIELD(CAPS, NET, 12, 1)
    FIELD(CAPS, MAILBOX, 13, 1)
    FIELD(CAPS, FREC, 14, 1)
    FIELD(CAPS, NCTX, PLDMA_CAPS_NCTX_SHIFT, 8)
REG32(MAX_LEN, PLDMA_MAX_LEN)
REG32(IRQ_SUMMARY_LO, PLDMA_IRQ_SUMMARY_LO)
REG32(BANDWIDTH, PLDMA_BANDWIDTH)
REG32(LATENCY, PLDMA_LATENCY)
REG32(SCRATCH, PLDMA_SCRATCH)
REG32(RESET, PLDMA_RESET)
REG32(IRQ_SUMMARY_HI, PLDMA_IRQ_SUMMARY_HI)
REG32(QUANTUM, PLDMA_QUANTUM)

/* Context registers, relative to the context's block. */
REG32(CTX_IRQ_STATUS, PLDMA_CTX_IRQ_STATUS)
    FIELD(CTX_IRQ_STATUS, CHANNELS, 0, 8)
    FIELD(CTX_IRQ_STATUS, CQ, 8, 1)
    FIELD(CTX_IRQ_STATUS, QERR, 9, 1)
    FIELD(CTX_IRQ_STATUS, KCQ, 10, 1)
    FIELD(CTX_IRQ_STATUS, KQERR, 11, 1)
    FIELD(CTX_IRQ_STATUS, MBOX, 12, 1)
    FIELD(CTX_IRQ_STATUS, FREC_LOST, 13, 1)
REG32(CTX_CTRL, PLDMA_CTX_CTRL)
    FIELD(CTX_CTRL, QUIESCE, 0, 1)
REG32(CTX_STATUS, PLDMA_CTX_STATUS)
    FIELD(CTX_STATUS, ACTIVE, 0, 1)
    FIELD(CTX_STATUS, FUNCTION, 1, 1)
REG32(CTX_SQ_BASE_LO, PLDMA_CTX_SQ_BASE_LO)
REG32(CTX_SQ_BASE_HI, PLDMA_CTX_SQ_BASE_HI)
REG32(CTX_CQ_BASE_LO, PLDMA_CTX_CQ_BASE_LO)
REG32(CTX_CQ_BASE_HI, PLDMA_CTX_CQ_BASE_HI)
REG32(CTX_Q_CFG, PLDMA_CTX_Q_CFG)
    FIELD(CTX_Q_CFG, SQ, PLDMA_Q_CFG_SQ_SHIFT, 5)
    FIELD(CTX_Q_CFG, CQ, PLDMA_Q_CFG_CQ_SHIFT, 5)
    FIELD(CTX_Q_CFG, CHAN, PLDMA_Q_CFG_CHAN_SHIFT, 8)
REG32(CTX_Q_CTRL, PLDMA_CTX_Q_CTRL)
    FIELD(CTX_Q_CTRL, ENABLE, 0, 1)
    FIELD(CTX_Q_CTRL, RESTORE, 1, 1)
    FIELD(CTX_Q_CTRL, ARM, 2, 1)
REG32(CTX_Q_STATUS, PLDMA_CTX_Q_STATUS)
    FIELD(CTX_Q_STATUS, ENABLED, 0, 1)
    FIELD(CTX_Q_STATUS, ERROR, 1, 1)
    FIELD(CTX_Q_STATUS, EVT_LOST, 2, 1)
    FIELD(CTX_Q_STATUS, BUSY, 3, 1)
    FIELD(CTX_Q_STATUS, ARMED, 4, 1)
    FIELD(CTX_Q_STATUS, ERR, PLDMA_Q_STATUS_ERR_SHIFT, 8)
REG32(CTX_Q_ERR_LO, PLDMA_CTX_Q_ERR_LO)
REG32(CTX_Q_ERR_HI, PLDMA_CTX_Q_ERR_HI)
REG32(CTX_EVT_POST, PLDMA_CTX_EVT_POST)
    FIELD(CTX_EVT_POST, COUNT, 0, 24)
    FIELD(CTX_EVT_POST, KIND, PLDMA_EVT_POST_KIND_SHIFT, 8)
REG32(CTX_EVT_ARG_LO, PLDMA_CTX_EVT_ARG_LO)
REG32(CTX_EVT_ARG_HI, PLDMA_CTX_EVT_ARG_HI)
REG32(CTX_Q_SQ_TAIL, PLDMA_CTX_Q_SQ_TAIL)
REG32(CTX_Q_SQ_HEAD, PLDMA_CTX_Q_SQ_HEAD)
REG32(CTX_Q_CQ_HEAD, PLDMA_CTX_Q_CQ_HEAD)
REG32(CTX_Q_CQ_TAIL, PLDMA_CTX_Q_CQ_TAIL)
REG32(CTX_KQ_SQ_BASE_LO, PLDMA_CTX_KQ_SQ_BASE_LO)
REG32(CTX_KQ_SQ_BASE_HI, PLDMA_CTX_KQ_SQ_BASE_HI)
REG32(CTX_KQ_CQ_BASE_LO, PLDMA_CTX_KQ_CQ_BASE_LO)
REG32(CTX_KQ_CQ_BASE_HI, PLDMA_CTX_KQ_CQ_BASE_HI)
REG32(CTX_KQ_CFG, PLDMA_CTX_KQ_CFG)
REG32(CTX_KQ_CTRL, PLDMA_CTX_KQ_CTRL)
REG32(CTX_KQ_STATUS, PLDMA_CTX_KQ_STATUS)
REG32(CTX_KQ_ERR_LO, PLDMA_CTX_KQ_ERR_LO)
REG32(CTX_KQ_ERR_HI, PLDMA_CTX_KQ_ERR_HI)
REG32(CTX_KQ_SQ_TAIL, PLDMA_CTX_KQ_SQ_TAIL)
REG32(CTX_KQ_SQ_HEAD, PLDMA_CTX_KQ_SQ_HEAD)
REG32(CTX_KQ_CQ_HEAD, PLDMA_CTX_KQ_CQ_HEAD)
REG32(CTX_KQ_CQ_TAIL, PLDMA_CTX_KQ_CQ_TAIL)
REG32(CTX_MBOX_BASE_LO, PLDMA_CTX_MBOX_BASE_LO)
REG32(CTX_MBOX_BASE_HI, PLDMA_CTX_MBOX_BASE_HI)
REG32(CTX_MBOX_CFG, PLDMA_CTX_MBOX_CFG)
    FIELD(CTX_MBOX_CFG, LOG2, 0, 5)
    FIELD(CTX_MBOX_CFG, ENABLE, 31, 1)
REG32(CTX_MBOX_HEAD, PLDMA_CTX_MBOX_HEAD)
REG32(CTX_MBOX_TAIL, PLDMA_CTX_MBOX_TAIL)
REG32(CTX_MBOX_ARM, PLDMA_CTX_MBOX_ARM)
    FIELD(CTX_MBOX_ARM, ONCE, 0, 1)
REG32(CTX_FREC_BASE_LO, PLDMA_CTX_FREC_BASE_LO)
REG32(CTX_FREC_BASE_HI, PLDMA_CTX_FREC_BASE_HI)
REG32(CTX_FREC_CFG, PLDMA_CTX_FREC_CFG)
    FIELD(CTX_FREC_CFG, LOG2, 0, 5)
    FIELD(CTX_FREC_CFG, ENABLE, 31, 1)
REG32(CTX_FREC_HEAD, PLDMA_CTX_FREC_HEAD)
REG32(CTX_FREC_TAIL, PLDMA_CTX_FREC_TAIL)

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
    FIELD(CH_CTRL, SEQ_CHECK, 9, 1)
    FIELD(CH_CTRL, SEQ, PLDMA_CTRL_SEQ_SHIFT, 8)
REG32(CH_STATUS, PLDMA_CH_STATUS)
    FIELD(CH_STATUS, STATE, 0, 4)
    FIELD(CH_STATUS, ERR, PLDMA_STATUS_ERR_SHIFT, 8)
    FIELD(CH_STATUS, REJECTED, 16, 1)
    FIELD(CH_STATUS, FAULT_SEQ, PLDMA_STATUS_FAULT_SEQ_SHIFT, 8)
REG32(CH_FAULT_LO, PLDMA_CH_FAULT_LO)
REG32(CH_FAULT_HI, PLDMA_CH_FAULT_HI)
REG32(CH_FAULT_INFO, PLDMA_CH_FAULT_INFO)
    FIELD(CH_FAULT_INFO, WRITE, 0, 1)
    FIELD(CH_FAULT_INFO, CAUSE, PLDMA_FAULT_CAUSE_SHIFT, 8)
REG32(CH_DONE_BYTES, PLDMA_CH_DONE_BYTES)
REG32(CH_FAULTS, PLDMA_CH_FAULTS)
REG32(CH_ORIGIN, PLDMA_CH_ORIGIN)
    FIELD(CH_ORIGIN, SQ_INDEX, 0, 16)
    FIELD(CH_ORIGIN, KERNEL, 30, 1)
    FIELD(CH_ORIGIN, QUEUE, 31, 1)
REG32(CH_WRID_LO, PLDMA_CH_WRID_LO)
REG32(CH_WRID_HI, PLDMA_CH_WRID_HI)
REG32(CH_NACK_STATUS, PLDMA_CH_NACK_STATUS)

/* A VF's page. */
REG32(VF_ID, PLDMA_VF_ID)
REG32(VF_VERSION, PLDMA_VF_VERSION)
REG32(VF_CONTEXT, PLDMA_VF_CONTEXT)
REG32(VF_SQ_TAIL, PLDMA_VF_SQ_TAIL)
REG32(VF_SQ_HEAD, PLDMA_VF_SQ_HEAD)
REG32(VF_CQ_HEAD, PLDMA_VF_CQ_HEAD)
REG32(VF_CQ_TAIL, PLDMA_VF_CQ_TAIL)
REG32(VF_CQ_ARM, PLDMA_VF_CQ_ARM)
    FIELD(VF_CQ_ARM, ONCE, 0, 1)
REG32(VF_MBOX_HEAD, PLDMA_VF_MBOX_HEAD)
REG32(VF_MBOX_TAIL, PLDMA_VF_MBOX_TAIL)
REG32(VF_MBOX_ARM, PLDMA_VF_MBOX_ARM)

QEMU_BUILD_BUG_ON(R_CAPS_NCHAN_MASK != PLDMA_CAPS_NCHAN_MASK);
QEMU_BUILD_BUG_ON(R_CAPS_RESUME_MASK != PLDMA_CAPS_RESUME);
QEMU_BUILD_BUG_ON(R_CAPS_INTX_MASK != PLDMA_CAPS_INTX);
QEMU_BUILD_BUG_ON(R_CAPS_TIMING_MASK != PLDMA_CAPS_TIMING);
QEMU_BUILD_BUG_ON(R_CAPS_SRIOV_MASK != PLDMA_CAPS_SRIOV);
QEMU_BUILD_BUG_ON(R_CAPS_NET_MASK != PLDMA_CAPS_NET);
QEMU_BUILD_BUG_ON(R_CAPS_MAILBOX_MASK != PLDMA_CAPS_MAILBOX);
QEMU_BUILD_BUG_ON(R_CAPS_FREC_MASK != PLDMA_CAPS_FREC);
QEMU_BUILD_BUG_ON(R_CTX_IRQ_STATUS_FREC_LOST_MASK != PLDMA_CTX_IRQ_FREC_LOST);
QEMU_BUILD_BUG_ON(R_CTX_FREC_CFG_LOG2_MASK != PLDMA_FREC_CFG_LOG2_MASK ||
                  R_CTX_FREC_CFG_ENABLE_MASK != PLDMA_FREC_CFG_ENABLE);
QEMU_BUILD_BUG_ON(R_CH_CTRL_SEQ_CHECK_MASK != PLDMA_CTRL_SEQ_CHECK ||
                  R_CH_CTRL_SEQ_MASK != PLDMA_CTRL_SEQ_MASK);
QEMU_BUILD_BUG_ON(R_CH_STATUS_FAULT_SEQ_MASK != PLDMA_STATUS_FAULT_SEQ_MASK);
/* A record's fields fit before its stamp, and records divide a page. */
QEMU_BUILD_BUG_ON(PLDMA_FREC_DONE_OFF + 4 > PLDMA_FREC_STAMP_OFF ||
                  PLDMA_FREC_STAMP_OFF + 4 != PLDMA_FREC_SIZE);
QEMU_BUILD_BUG_ON(PLDMA_PAGE % PLDMA_FREC_SIZE);
QEMU_BUILD_BUG_ON(R_CTX_MBOX_CFG_LOG2_MASK != PLDMA_MBOX_CFG_LOG2_MASK ||
                  R_CTX_MBOX_CFG_ENABLE_MASK != PLDMA_MBOX_CFG_ENABLE);
QEMU_BUILD_BUG_ON(PLDMA_MBOX_DATA_OFF + PLDMA_MBOX_MAX != PLDMA_MBOX_SLOT);
/* The network registers sit between the globals and the contexts. */
QEMU_BUILD_BUG_ON(PLDMA_QUANTUM >= PLDMA_NET_NODE ||
                  PLDMA_NET_CNT_BASE + 4 * PLDMA_NET_COUNTERS >
                  PLDMA_CTX_BASE);
QEMU_BUILD_BUG_ON(PLDMA_CH_BASE + PLDMA_MAX_CHANNELS * PLDMA_CH_STRIDE >
                  PLDMA_CH_NET_BASE ||
                  PLDMA_CH_NET_BASE + PLDMA_MAX_CHANNELS *
                  PLDMA_CH_NET_STRIDE > PLDMA_CTX_STRIDE);
QEMU_BUILD_BUG_ON(PLDMA_SQE_NET_RSVD1_OFF + 12 != PLDMA_SQE_SIZE);
QEMU_BUILD_BUG_ON(PLDMA_SQE_NET_IMM_OFF + 4 != PLDMA_SQE_NET_RSVD1_OFF);
QEMU_BUILD_BUG_ON(R_CAPS_NCTX_MASK != PLDMA_CAPS_NCTX_MASK);
QEMU_BUILD_BUG_ON(R_CTX_CTRL_QUIESCE_MASK != PLDMA_CTX_QUIESCE);
QEMU_BUILD_BUG_ON(R_CTX_STATUS_ACTIVE_MASK != PLDMA_CTX_ACTIVE);
QEMU_BUILD_BUG_ON(R_CTX_STATUS_FUNCTION_MASK != PLDMA_CTX_FUNCTION);
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
QEMU_BUILD_BUG_ON(R_CTX_IRQ_STATUS_CHANNELS_MASK != PLDMA_CTX_IRQ_CHANNELS);
QEMU_BUILD_BUG_ON(R_CTX_IRQ_STATUS_CQ_MASK != PLDMA_CTX_IRQ_CQ);
QEMU_BUILD_BUG_ON(R_CTX_IRQ_STATUS_QERR_MASK != PLDMA_CTX_IRQ_QERR);
QEMU_BUILD_BUG_ON(R_CTX_Q_CFG_SQ_MASK != PLDMA_Q_CFG_SQ_MASK);
QEMU_BUILD_BUG_ON(R_CTX_Q_CFG_CQ_MASK != PLDMA_Q_CFG_CQ_MASK);
QEMU_BUILD_BUG_ON(R_CTX_Q_CFG_CHAN_MASK != PLDMA_Q_CFG_CHAN_MASK);
QEMU_BUILD_BUG_ON(R_CTX_Q_CTRL_ENABLE_MASK != PLDMA_Q_CTRL_ENABLE);
QEMU_BUILD_BUG_ON(R_CTX_Q_CTRL_RESTORE_MASK != PLDMA_Q_CTRL_RESTORE);
QEMU_BUILD_BUG_ON(R_CTX_Q_CTRL_ARM_MASK != PLDMA_Q_CTRL_ARM);
QEMU_BUILD_BUG_ON(R_CTX_Q_STATUS_BUSY_MASK != PLDMA_Q_STATUS_BUSY);
QEMU_BUILD_BUG_ON(R_CTX_Q_STATUS_ARMED_MASK != PLDMA_Q_STATUS_ARMED);
QEMU_BUILD_BUG_ON(R_CTX_IRQ_STATUS_KCQ_MASK != PLDMA_CTX_IRQ_KCQ);
QEMU_BUILD_BUG_ON(R_CTX_IRQ_STATUS_KQERR_MASK != PLDMA_CTX_IRQ_KQERR);
QEMU_BUILD_BUG_ON(R_CTX_IRQ_STATUS_MBOX_MASK != PLDMA_CTX_IRQ_MBOX);
QEMU_BUILD_BUG_ON(R_CTX_MBOX_ARM_ONCE_MASK != PLDMA_MBOX_ARM_ONCE);
QEMU_BUILD_BUG_ON(R_CH_ORIGIN_KERNEL_MASK != PLDMA_ORIGIN_KERNEL);
QEMU_BUILD_BUG_ON(R_CTX_Q_STATUS_ENABLED_MASK != PLDMA_Q_STATUS_ENABLED);
QEMU_BUILD_BUG_ON(R_CTX_Q_STATUS_ERROR_MASK != PLDMA_Q_STATUS_ERROR);
QEMU_BUILD_BUG_ON(R_CTX_Q_STATUS_ERR_MASK != PLDMA_Q_STATUS_ERR_MASK);
QEMU_BUILD_BUG_ON(R_CH_ORIGIN_QUEUE_MASK != PLDMA_ORIGIN_QUEUE);
QEMU_BUILD_BUG_ON(R_CH_ORIGIN_SQ_INDEX_MASK != PLDMA_ORIGIN_SQ_INDEX_MASK);
QEMU_BUILD_BUG_ON(R_VF_CQ_ARM_ONCE_MASK != PLDMA_VF_CQ_ARM_ONCE);
/* Every channel has its interrupt status bit below the queue's bits. */
QEMU_BUILD_BUG_ON(PLDMA_MAX_CHANNELS > 8);
/* The queue registers sit between the context's and its channels'. */
QEMU_BUILD_BUG_ON(PLDMA_CTX_STATUS >= PLDMA_CTX_SQ_BASE_LO ||
                  PLDMA_CTX_EVT_ARG_HI >= PLDMA_CH_BASE);
QEMU_BUILD_BUG_ON(R_CTX_Q_STATUS_EVT_LOST_MASK != PLDMA_Q_STATUS_EVT_LOST);
QEMU_BUILD_BUG_ON(R_CTX_EVT_POST_COUNT_MASK != PLDMA_EVT_POST_COUNT_MASK ||
                  R_CTX_EVT_POST_KIND_MASK != PLDMA_EVT_POST_KIND_MASK);
QEMU_BUILD_BUG_ON(PLDMA_CH_NACK_STATUS >= PLDMA_CH_STRIDE);
QEMU_BUILD_BUG_ON(PLDMA_VF_CQ_ARM >= PLDMA_VF_MMIO_SIZE);
/*
 * Queue entries: the fields fill the entry, and no entry crosses a page
 * (rings are page-aligned, entries divide the page).
 */
QEMU_BUILD_BUG_ON(PLDMA_SQE_WRID_OFF + 8 != PLDMA_SQE_SIZE);
QEMU_BUILD_BUG_ON(PLDMA_CQE_RSVD_OFF + 4 != PLDMA_CQE_SIZE);
QEMU_BUILD_BUG_ON(PLDMA_Q_RING_ALIGN != PLDMA_PAGE);
QEMU_BUILD_BUG_ON(PLDMA_PAGE % PLDMA_SQE_SIZE || PLDMA_PAGE % PLDMA_CQE_SIZE);
/* A CQE's status for an engine error is -(PLDMA_CQE_ERR_BASE + error). */
#define PLDMA_CQE_OF(e) (-(PLDMA_CQE_ERR_BASE + (e)))
QEMU_BUILD_BUG_ON(PLDMA_CQE_BAD_LEN != PLDMA_CQE_OF(PLDMA_ERR_BAD_LEN));
QEMU_BUILD_BUG_ON(PLDMA_CQE_BAD_ADDR != PLDMA_CQE_OF(PLDMA_ERR_BAD_ADDR));
QEMU_BUILD_BUG_ON(PLDMA_CQE_ABORTED != PLDMA_CQE_OF(PLDMA_ERR_ABORTED));
QEMU_BUILD_BUG_ON(PLDMA_CQE_NO_MASTER != PLDMA_CQE_OF(PLDMA_ERR_NO_MASTER));
QEMU_BUILD_BUG_ON(PLDMA_CQE_OVERLAP != PLDMA_CQE_OF(PLDMA_ERR_OVERLAP));
QEMU_BUILD_BUG_ON(PLDMA_CQE_BAD_FLAGS != PLDMA_CQE_OF(PLDMA_ERR_BAD_FLAGS));
QEMU_BUILD_BUG_ON(PLDMA_CQE_NO_LINK != PLDMA_CQE_OF(PLDMA_ERR_NO_LINK) ||
                  PLDMA_CQE_TIMEOUT != PLDMA_CQE_OF(PLDMA_ERR_TIMEOUT));
/* The blocks nest without overlapping, and every context fits in BAR0. */
QEMU_BUILD_BUG_ON(PLDMA_QUANTUM >= PLDMA_CTX_BASE);
QEMU_BUILD_BUG_ON(PLDMA_CTX_CTRL >= PLDMA_CH_BASE ||
                  PLDMA_CTX_STATUS >= PLDMA_CH_BASE);
QEMU_BUILD_BUG_ON(PLDMA_CH_BASE + PLDMA_MAX_CHANNELS * PLDMA_CH_STRIDE >
                  PLDMA_CTX_STRIDE);
QEMU_BUILD_BUG_ON(PLDMA_CTX_BASE + PLDMA_MAX_CONTEXTS * PLDMA_CTX_STRIDE >
                  PLDMA_MMIO_SIZE);
/* One summary bit per context; CAPS.NCTX holds the count. */
QEMU_BUILD_BUG_ON(PLDMA_MAX_CONTEXTS > 64);
QEMU_BUILD_BUG_ON(PLDMA_MAX_CHANNELS > 32);

/* What the end of a channel's data path turn does. */

/*
 * The address space of context x's DMA, if it may issue any (the front-end
 * says: on PCIe VF x, enabled and a bus master), else NULL.
 */
AddressSpace *pldma_ctx_master(PldmaContext *x)
{
    return x->dev->bus->ctx_as(x->dev, x->index);
}

void pldma_update_irq(PldmaState *s)
{
    bool level = false;

    for (unsigned i = 0; i < s->nctx; i++) {
        level |= s->ctx[i].irq_status != 0;
    }
    level |= s->net.irq != 0;
    s->bus->set_irq(s, level);
}

static void pldma_q_complete(PldmaChannel *c);

/* A transfer of the channel that a descriptor started, not a START. */
static bool pldma_ch_queued(PldmaChannel *c)
{
    return FIELD_EX32(c->origin, CH_ORIGIN, QUEUE);
}

/* The queue whose descriptor channel c's transfer is (if it is one). */
static PldmaQueue *pldma_ch_queue(PldmaChannel *c)
{
    return FIELD_EX32(c->origin, CH_ORIGIN, KERNEL) ? &c->ctx->kq :
                                                      &c->ctx->q;
}

/* Neither BUSY nor in FAULT: START, or the queue, may take the channel. */
static bool pldma_ch_free(PldmaChannel *c)
{
    return c->state != PLDMA_STATE_BUSY && c->state != PLDMA_STATE_FAULT;
}

/* The fault record ring (2.11) */

/*
 * Channel c entered FAULT, its fault registers set: the fault gets its
 * number, and its record in the ring if the ring is enabled, has room and
 * takes the write (as the PF, STAMP last); else FREC_LOST. The caller raises
 * the channel's interrupt status bit after this.
 */
void pldma_frec_fault(PldmaChannel *c)
{
    PldmaContext *x = c->ctx;
    AddressSpace *own = x->dev->bus->own_as(x->dev);
    uint8_t rec[PLDMA_FREC_SIZE] = { 0 };
    bool write = FIELD_EX32(c->fault_info, CH_FAULT_INFO, WRITE);
    uint64_t base = write ? c->a_dst : c->a_src;
    uint64_t end = base + c->a_len < base ? UINT64_MAX : base + c->a_len;
    uint32_t idx = x->frec_tail;
    uint64_t at;

    c->fault_seq++;
    if (!(x->frec_cfg & PLDMA_FREC_CFG_ENABLE)) {
        return;
    }
    at = x->a_frec_base + (uint64_t)(idx & (x->frec_n - 1)) * PLDMA_FREC_SIZE;
    stq_le_p(rec + PLDMA_FREC_ADDR_OFF, c->fault_addr);
    stl_le_p(rec + PLDMA_FREC_INFO_OFF, c->fault_info);
    stl_le_p(rec + PLDMA_FREC_ORIGIN_OFF, c->origin);
    stq_le_p(rec + PLDMA_FREC_WRID_OFF, c->wr_id);
    stq_le_p(rec + PLDMA_FREC_END_OFF, end);
    stl_le_p(rec + PLDMA_FREC_NET_SRC_OFF, c->rx_src);
    stl_le_p(rec + PLDMA_FREC_NET_OPID_OFF, c->op_id);
    stl_le_p(rec + PLDMA_FREC_CHAN_OFF, c->index | (uint32_t)c->fault_seq << 8);
    stl_le_p(rec + PLDMA_FREC_DONE_OFF, c->done);
    stl_le_p(rec + PLDMA_FREC_STAMP_OFF, idx + 1);
    if (x->frec_tail - x->frec_head >= x->frec_n ||
        !own ||
        pldma_dma_write(own, at, rec, PLDMA_FREC_STAMP_OFF) != MEMTX_OK ||
        pldma_dma_write(own, at + PLDMA_FREC_STAMP_OFF,
                        rec + PLDMA_FREC_STAMP_OFF, 4) != MEMTX_OK) {
        trace_exanest_pldma_frec_lost(x->index, c->index, idx,
                                      x->frec_head);
        x->irq_status |= R_CTX_IRQ_STATUS_FREC_LOST_MASK;
        pldma_update_irq(x->dev);
        return;
    }
    x->frec_tail = idx + 1;
}

/* FREC_CFG written: ENABLE 0 -> 1 latches the ring, if it is a good one. */
static void pldma_frec_cfg(PldmaContext *x, uint32_t val)
{
    uint32_t known = R_CTX_FREC_CFG_LOG2_MASK | R_CTX_FREC_CFG_ENABLE_MASK;
    uint32_t log2 = FIELD_EX32(val, CTX_FREC_CFG, LOG2);
    bool was = x->frec_cfg & PLDMA_FREC_CFG_ENABLE;
    uint64_t size = (uint64_t)PLDMA_FREC_SIZE << log2;

    if (val & ~known) {
        qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: unknown "
                      "FREC_CFG bits 0x%x ignored\n", x->index, val & ~known);
    }
    if (!FIELD_EX32(val, CTX_FREC_CFG, ENABLE)) {
        x->frec_cfg = val & R_CTX_FREC_CFG_LOG2_MASK;
        return;
    }
    if (was) {
        x->frec_cfg = (val & R_CTX_FREC_CFG_LOG2_MASK) |
                      PLDMA_FREC_CFG_ENABLE;
        return; /* latched already: LOG2 takes effect at the next enable */
    }
    if (log2 < 1 || log2 > PLDMA_FREC_LOG2_MAX ||
        x->frec_base % PLDMA_FREC_SIZE || x->frec_base + size < x->frec_base) {
        qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: fault record "
                      "ring 0x%" PRIx64 " of 2^%u records refused\n",
                      x->index, x->frec_base, log2);
        x->frec_cfg = val & R_CTX_FREC_CFG_LOG2_MASK;
        return;
    }
    x->frec_cfg = val & known;
    x->a_frec_base = x->frec_base;
    x->frec_n = 1u << log2;
    x->frec_head = x->frec_tail = 0;
}

/*
 * Enter a final or waiting state and raise the channel's interrupt. A queue
 * transfer raises it for a fault only (whatever IRQ_EN says: the driver has
 * to resolve the fault); its end writes a CQE instead.
 */
void pldma_notify(PldmaChannel *c, uint32_t state, uint32_t err)
{
    PldmaContext *x = c->ctx;

    trace_exanest_pldma_state(x->index, c->index, state, err);
    c->state = state;
    c->err = err;
    c->ready = false;
    c->pending = PLDMA_PEND_NONE;
    if (state == PLDMA_STATE_FAULT) {
        pldma_frec_fault(c);
    }
    if (c->a_op == PLDMA_OP_MAILBOX && state != PLDMA_STATE_FAULT) {
        pldma_net_mbox_next(x);
    }
    if (pldma_ch_queued(c)) {
        if (state == PLDMA_STATE_FAULT) {
            x->irq_status |= 1u << c->index;
            pldma_update_irq(x->dev);
        } else {
            pldma_q_complete(c);
        }
        return;
    }
    if (c->irq_en) {
        x->irq_status |= 1u << c->index;
        pldma_update_irq(x->dev);
    }
    if (state != PLDMA_STATE_FAULT) {
        pldma_pump(x); /* the channel is free: a queue may take it */
    }
}

static void pldma_raise_fault(PldmaChannel *c, uint64_t addr, uint32_t info)
{
    c->fault_addr = addr;
    c->fault_info = info;
    c->faults++;
    pldma_notify(c, PLDMA_STATE_FAULT, PLDMA_ERR_NONE);
}

uint32_t pldma_fault_info(bool write, uint32_t cause)
{
    uint32_t info = 0;

    info = FIELD_DP32(info, CH_FAULT_INFO, WRITE, write);
    return FIELD_DP32(info, CH_FAULT_INFO, CAUSE, cause);
}

int64_t pldma_xfer_ns(PldmaState *s, uint64_t bytes)
{
    if (!s->bandwidth_mbs) {
        return 0;
    }
    /* MB/s is bytes per microsecond. */
    return (int64_t)(bytes * 1000 / s->bandwidth_mbs);
}

/*
 * The longest prefix of the turn [src, src + n) -> [dst, dst + n) that
 * translates for the issuing function, checked piece by piece (a piece stays
 * within one source and one destination page), source then destination.
 * *fault is set to 0 (the source) or 1 (the destination) for the first piece
 * that does not translate, and stays -1 when everything does. That check
 * cost exactly one IOMMU event, and it is the fault.
 */
static uint64_t pldma_translated(AddressSpace *fn, uint64_t src, uint64_t dst,
                                 uint64_t n, int *fault)
{
    AddressSpace *as = fn;
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

/*
 * Channel c's turn on the data path, which is free at @now: copy up to
 * PLDMA_STEP bytes as the context's VF and hold the data path for them.
 * Sets s->turn when the turn has an end to wait for.
 */
static void pldma_turn(PldmaState *s, PldmaChannel *c, int64_t now)
{
    PldmaContext *x = c->ctx;
    AddressSpace *fn = pldma_ctx_master(x);
    uint64_t n, off, src, dst;
    int fault;

    if (!fn) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u ch%u: VF %u disabled or not a "
                      "bus master, transfer stopped\n",
                      x->index, c->index, x->index);
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_NO_MASTER);
        return;
    }

    if (c->a_op != PLDMA_OP_COPY) {
        pldma_net_turn(s, c, fn, now);
        return;
    }
    src = c->a_src + c->done;
    dst = c->a_dst + c->done;
    n = MIN((uint64_t)(c->a_len - c->done), PLDMA_STEP);

    /*
     * Copy what translated; a fault leaves the channel to stop in
     * fault-wait, so the retransmission starts at the faulting piece.
     */
    off = pldma_translated(fn, src, dst, n, &fault);
    if (off) {
        if (pldma_dma_read(fn, src, s->bounce, off) != MEMTX_OK) {
            pldma_raise_fault(c, src, pldma_fault_info(false, PLDMA_CAUSE_BUS));
            return;
        }
        if (pldma_dma_write(fn, dst, s->bounce, off) != MEMTX_OK) {
            pldma_raise_fault(c, dst, pldma_fault_info(true, PLDMA_CAUSE_BUS));
            return;
        }
    }

    /* The bytes copied hold the shared data path, fault or not. */
    s->path_free_ns = now + pldma_xfer_ns(s, off);
    trace_exanest_pldma_step(x->index, c->index, c->done, off, now,
                             s->path_free_ns);
    c->done += off;

    if (fault >= 0) {
        c->pending = PLDMA_PEND_FAULT;
        c->pend_addr = (fault ? dst : src) + off;
        c->pend_info = pldma_fault_info(fault == 1, PLDMA_CAUSE_TRANSLATION);
        trace_exanest_pldma_fault(x->index, c->index, fault, c->pend_addr,
                                  PLDMA_CAUSE_TRANSLATION, s->path_free_ns);
    } else if (c->done == c->a_len) {
        c->pending = PLDMA_PEND_DONE;
    } else {
        c->pending = PLDMA_PEND_NONE;
    }
    s->turn = c;
}

/* The data path is through with channel c's turn. */
static void pldma_turn_end(PldmaChannel *c)
{
    if (c->state != PLDMA_STATE_BUSY) {
        return;
    }
    switch (c->pending) {
    case PLDMA_PEND_DONE:
        pldma_notify(c, PLDMA_STATE_DONE, PLDMA_ERR_NONE);
        break;
    case PLDMA_PEND_FAULT:
        pldma_raise_fault(c, c->pend_addr, c->pend_info);
        break;
    case PLDMA_PEND_NONE:
        c->ready = true;
        break;
    case PLDMA_PEND_WAIT:
        break; /* an ACK, RESUME or timeout makes it ready */
    }
}

/*
 * The next turn: round-robin over the contexts that have a ready channel,
 * starting after the context served last, then round-robin over that
 * context's ready channels, starting after its channel served last.
 */
static PldmaChannel *pldma_pick(PldmaState *s)
{
    for (unsigned i = 0; i < s->nctx; i++) {
        PldmaContext *x = &s->ctx[(s->next_ctx + i) % s->nctx];

        for (unsigned j = 0; j < s->nchan; j++) {
            PldmaChannel *c = &x->ch[(x->next_ch + j) % s->nchan];

            if (c->ready) {
                s->next_ctx = (x->index + 1) % s->nctx;
                x->next_ch = (c->index + 1) % s->nchan;
                c->ready = false;
                return c;
            }
        }
    }
    return NULL;
}

/*
 * Arbiter timer: the data path is free. End the turn that held it, then
 * start the next one, if any channel is ready; the timer fires again when
 * that turn's bytes are through (at once for a turn that moved nothing).
 * With no channel ready the arbiter sleeps until pldma_arbiter_kick().
 */
static void pldma_arbiter(void *opaque)
{
    PldmaState *s = opaque;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    PldmaChannel *c;

    if (now < s->path_free_ns) {
        timer_mod(s->arbiter, s->path_free_ns);
        return;
    }
    c = s->turn;
    s->turn = NULL;
    if (c) {
        pldma_turn_end(c);
    }
    c = pldma_pick(s);
    if (c) {
        pldma_turn(s, c, now);
        timer_mod(s->arbiter, MAX(now, s->path_free_ns));
    }
}

/* A channel became ready: make sure the arbiter looks when it can. */
void pldma_arbiter_kick(PldmaState *s)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);

    timer_mod_anticipate(s->arbiter, MAX(now, s->path_free_ns));
}

/* Latency timer: a started or resumed channel is ready for the data path. */
static void pldma_latency_done(void *opaque)
{
    PldmaChannel *c = opaque;

    if (c->state == PLDMA_STATE_BUSY) {
        c->ready = true;
        pldma_arbiter_kick(c->ctx->dev);
    }
}

/* START or RESUME accepted: BUSY, ready for the data path after latency. */
static void pldma_kick(PldmaChannel *c)
{
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);

    c->state = PLDMA_STATE_BUSY;
    c->err = PLDMA_ERR_NONE;
    c->ready = false;
    c->pending = PLDMA_PEND_NONE;
    timer_mod(c->latency, now + c->ctx->dev->latency_ns);
}

/*
 * Stop channel c at once: no pending latency, no place in the arbiter's
 * queue, and if its turn holds the data path, nothing happens when that
 * turn ends (the data path stays busy for the bytes already moved).
 */
void pldma_cancel(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;

    timer_del(c->latency);
    pldma_net_stop(c);
    c->ready = false;
    c->pending = PLDMA_PEND_NONE;
    if (s->turn == c) {
        s->turn = NULL;
    }
}

static bool pldma_wraps(uint64_t a, uint64_t len)
{
    return a + len < a;
}

/*
 * Start the transfer latched in a_src, a_dst, a_len: START, or a descriptor
 * the queue took (whose flags must be 0). Checks the request first.
 */
/* A network op (2.3): its own checks, then the same start. */
static void pldma_launch_net(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;
    uint32_t err = pldma_net_launch(c);

    if (!err && (!c->a_len || c->a_len > s->max_len)) {
        err = PLDMA_ERR_BAD_LEN;
    } else if (!err && (pldma_wraps(c->a_src, c->a_len) ||
                        pldma_wraps(c->a_dst, c->a_len))) {
        err = PLDMA_ERR_BAD_ADDR;
    } else if (!err && !pldma_ctx_master(c->ctx)) {
        err = PLDMA_ERR_NO_MASTER;
    }
    if (err) {
        pldma_notify(c, PLDMA_STATE_ERROR, err);
    } else {
        pldma_kick(c);
    }
}

static void pldma_launch(PldmaChannel *c, bool bad_flags)
{
    PldmaContext *x = c->ctx;
    PldmaState *s = x->dev;

    c->done = 0;
    c->faults = 0;
    c->fault_addr = 0;
    c->fault_info = 0;
    c->nack_status = PLDMA_CQE_ABORTED;
    trace_exanest_pldma_start(x->index, c->index, c->a_src, c->a_dst,
                              c->a_len);

    if (bad_flags) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_BAD_FLAGS);
    } else if (c->a_op != PLDMA_OP_COPY) {
        pldma_launch_net(c);
    } else if (!c->a_len || c->a_len > s->max_len) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_BAD_LEN);
    } else if (pldma_wraps(c->a_src, c->a_len) ||
               pldma_wraps(c->a_dst, c->a_len)) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_BAD_ADDR);
    } else if (c->a_src < c->a_dst + c->a_len &&
               c->a_dst < c->a_src + c->a_len) {
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_OVERLAP);
    } else if (!pldma_ctx_master(x)) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u ch%u: START with VF %u disabled "
                      "or not a bus master\n", x->index, c->index, x->index);
        pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_NO_MASTER);
    } else {
        pldma_kick(c);
    }
}

static void pldma_start(PldmaChannel *c)
{
    c->a_src = c->src;
    c->a_dst = c->dst;
    c->a_len = c->len;
    c->a_op = c->net_op;
    c->a_peer = c->net_peer;
    c->a_ep = c->net_ep;
    c->a_rkey = c->net_rkey;
    c->a_imm = 0;
    c->origin = 0;
    c->wr_id = 0;
    /* PUT_IMM from a descriptor only: its immediate is in the second entry. */
    pldma_launch(c, c->a_op > PLDMA_OP_MAILBOX);
}

/* Queues (2.1) */

static void pldma_q_error(PldmaQueue *q, uint32_t err, uint64_t addr)
{
    PldmaContext *x = q->ctx;

    trace_exanest_pldma_q_error(x->index, err, addr);
    q->err = err;
    q->err_addr = addr;
    x->irq_status |= q->kernel ? R_CTX_IRQ_STATUS_KQERR_MASK :
                                 R_CTX_IRQ_STATUS_QERR_MASK;
    pldma_update_irq(x->dev);
}

/*
 * One queue entry at @addr, read or written as the context's VF (the user's
 * queue) or as the PF (the kernel's). Checked like a data path piece first,
 * so an entry that does not translate costs one IOMMU event. An entry never
 * crosses a page.
 */
static bool pldma_q_dma(PldmaQueue *q, uint64_t addr, void *buf,
                        unsigned len, DMADirection dir)
{
    PldmaContext *x = q->ctx;
    AddressSpace *fn;

    if (q->kernel) {
        fn = x->dev->bus->own_as(x->dev);
    } else {
        fn = pldma_ctx_master(x);
    }
    if (!fn && q->kernel) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: kernel queue access with the PF "
                      "not a bus master\n", x->index);
        return false;
    }
    if (!fn) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: queue access with VF %u "
                      "disabled or not a bus master\n", x->index, x->index);
        return false;
    }
    if (!dma_memory_valid(fn, addr, len, dir, MEMTXATTRS_UNSPECIFIED)) {
        return false;
    }
    return dma_memory_rw(fn, addr, buf, len, dir, MEMTXATTRS_UNSPECIFIED) ==
           MEMTX_OK;
}

/*
 * The armed CQ event fires once the CQ holds a CQE software has not taken.
 * The kernel queue's fires at every CQE, armed or not.
 */
static void pldma_q_event(PldmaQueue *q)
{
    PldmaContext *x = q->ctx;

    if (q->kernel) {
        return;
    }
    if (q->armed && q->cq_tail != q->cq_head) {
        trace_exanest_pldma_q_event(x->index, q->cq_tail, q->cq_head);
        q->armed = false;
        x->irq_status |= R_CTX_IRQ_STATUS_CQ_MASK;
        pldma_update_irq(x->dev);
    }
}

/*
 * Channel c's queue transfer ended (DONE, or ERROR, NACK included). The
 * channel goes back to IDLE, free for the next descriptor; the transfer's
 * CQE is written at CQ_TAIL, then CQ_TAIL moves, then the CQ event fires if
 * armed. A stopped queue (disabled, or in error) writes no CQE.
 */
static void pldma_q_complete(PldmaChannel *c)
{
    PldmaContext *x = c->ctx;
    PldmaQueue *q = pldma_ch_queue(c);
    uint8_t cqe[PLDMA_CQE_SIZE] = { 0 };
    int32_t status = PLDMA_CQE_SUCCESS;
    unsigned gen = q->gen;
    uint32_t slot;
    uint64_t addr;
    bool ok;

    if (c->state == PLDMA_STATE_ERROR) {
        status = c->err == PLDMA_ERR_ABORTED ? (int32_t)c->nack_status :
                 c->err == PLDMA_ERR_REMOTE ? c->net_status :
                 PLDMA_CQE_OF((int32_t)c->err);
    }
    stq_le_p(cqe + PLDMA_CQE_WRID_OFF, c->wr_id);
    stl_le_p(cqe + PLDMA_CQE_STATUS_OFF, status);
    stl_le_p(cqe + PLDMA_CQE_BYTES_OFF, c->done);
    stq_le_p(cqe + PLDMA_CQE_FAULT_OFF, c->fault_addr);
    trace_exanest_pldma_state(x->index, c->index, PLDMA_STATE_IDLE,
                              PLDMA_ERR_NONE);
    c->state = PLDMA_STATE_IDLE;
    c->err = PLDMA_ERR_NONE;
    if (!q->enabled || q->err) {
        trace_exanest_pldma_q_drop(x->index, c->index, c->wr_id, status);
        return;
    }

    /* Phase: 1 on the first pass through the ring, 0 on the next, ... */
    slot = q->cq_tail + q->cq_writing;
    if (!((slot / q->cq_n) & 1)) {
        stl_le_p(cqe + PLDMA_CQE_FLAGS_OFF, PLDMA_CQE_PHASE);
    }
    addr = q->a_cq_base + (uint64_t)(slot & (q->cq_n - 1)) * PLDMA_CQE_SIZE;
    trace_exanest_pldma_q_cqe(x->index, c->index, slot, addr, c->wr_id,
                              status, c->done);
    q->cq_writing++;
    ok = pldma_q_dma(q, addr, cqe, sizeof(cqe), DMA_DIRECTION_FROM_DEVICE);
    if (gen != q->gen) {
        return; /* the write reached the engine, which stopped the queue */
    }
    q->cq_writing--;
    if (!ok) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: writing %sCQE %u at 0x%" PRIx64
                      " failed, queue stopped\n", x->index,
                      q->kernel ? "kernel " : "", slot, addr);
        pldma_q_error(q, PLDMA_QERR_CQ_WRITE, addr);
        return;
    }
    q->cq_tail++;
    if (q->kernel) {
        x->irq_status |= R_CTX_IRQ_STATUS_KCQ_MASK;
        pldma_update_irq(x->dev);
    }
    pldma_q_event(q);
    pldma_pump(x); /* the channel is free: a queue may take it */
}

/*
 * The CQ entries taken: written, being written, and reserved for the queue
 * transfers in flight (whose CQEs must always find room).
 */
static uint64_t pldma_q_cq_used(PldmaQueue *q)
{
    PldmaContext *x = q->ctx;
    uint64_t used = (uint64_t)(uint32_t)(q->cq_tail - q->cq_head) +
                    q->cq_writing;

    for (unsigned n = 0; n < x->dev->nchan; n++) {
        PldmaChannel *c = &x->ch[n];

        if (!pldma_ch_free(c) && pldma_ch_queued(c) &&
            pldma_ch_queue(c) == q) {
            used++;
        }
    }
    return used;
}

/*
 * EVT_POST: write an event entry at CQ_TAIL, as a completion is written
 * (phase, CQ_TAIL, the armed event), with EVENT and the kind in its flags,
 * EVT_ARG as its wr_id and the count as its bytes. Only when the CQ has room
 * besides the entries reserved for transfers in flight: otherwise the event
 * is dropped and Q_STATUS.EVT_LOST says so.
 */
static void pldma_q_post(PldmaContext *x, uint32_t val)
{
    PldmaQueue *q = &x->q;
    uint8_t cqe[PLDMA_CQE_SIZE] = { 0 };
    uint32_t kind = FIELD_EX32(val, CTX_EVT_POST, KIND);
    uint32_t flags = PLDMA_CQE_EVENT | kind << PLDMA_CQE_KIND_SHIFT;
    unsigned gen = q->gen;
    uint32_t slot;
    uint64_t addr;
    bool ok;

    if (!kind || !q->enabled || q->err) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: EVT_POST 0x%x ignored (%s)\n",
                      x->index, val, !kind ? "kind 0" : "queue stopped");
        return;
    }
    slot = q->cq_tail + q->cq_writing;
    if (pldma_q_cq_used(q) >= q->cq_n) {
        trace_exanest_pldma_q_post(x->index, slot, q->evt_arg, val, 1);
        q->evt_lost = true;
        return;
    }
    if (!((slot / q->cq_n) & 1)) {
        flags |= PLDMA_CQE_PHASE;
    }
    stq_le_p(cqe + PLDMA_CQE_WRID_OFF, q->evt_arg);
    stl_le_p(cqe + PLDMA_CQE_BYTES_OFF, FIELD_EX32(val, CTX_EVT_POST, COUNT));
    stl_le_p(cqe + PLDMA_CQE_FLAGS_OFF, flags);
    addr = q->a_cq_base + (uint64_t)(slot & (q->cq_n - 1)) * PLDMA_CQE_SIZE;
    trace_exanest_pldma_q_post(x->index, slot, q->evt_arg, val, 0);
    q->cq_writing++;
    ok = pldma_q_dma(q, addr, cqe, sizeof(cqe), DMA_DIRECTION_FROM_DEVICE);
    if (gen != q->gen) {
        return; /* the write reached the engine, which stopped the queue */
    }
    q->cq_writing--;
    if (!ok) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: writing event entry %u at 0x%"
                      PRIx64 " failed, queue stopped\n", x->index, slot, addr);
        pldma_q_error(q, PLDMA_QERR_CQ_WRITE, addr);
        return;
    }
    q->cq_tail++;
    pldma_q_event(q);
}

/*
 * Start the descriptor @d, entry @idx of @q's SQ, on channel c; @d2 is the
 * next entry, a PUT's second half.
 */
static void pldma_q_start(PldmaQueue *q, PldmaChannel *c, const uint8_t *d,
                          const uint8_t *d2, uint32_t idx, uint64_t addr)
{
    PldmaContext *x = c->ctx;
    uint32_t flags = ldl_le_p(d + PLDMA_SQE_FLAGS_OFF);
    uint32_t op = flags & PLDMA_OP_MASK;
    bool bad = (flags & ~PLDMA_OP_MASK) ||
               op > PLDMA_OP_PUT_IMM;

    c->a_src = ldq_le_p(d + PLDMA_SQE_SRC_OFF);
    c->a_dst = ldq_le_p(d + PLDMA_SQE_DST_OFF);
    c->a_len = ldl_le_p(d + PLDMA_SQE_LEN_OFF);
    c->wr_id = ldq_le_p(d + PLDMA_SQE_WRID_OFF);
    c->a_op = op;
    c->a_peer = c->a_ep = c->a_imm = 0;
    c->a_rkey = 0;
    if (op != PLDMA_OP_COPY && op <= PLDMA_OP_PUT_IMM) {
        c->a_rkey = ldq_le_p(d2 + PLDMA_SQE_NET_RKEY_OFF);
        c->a_peer = lduw_le_p(d2 + PLDMA_SQE_NET_PEER_OFF);
        c->a_ep = ldl_le_p(d2 + PLDMA_SQE_NET_EP_OFF);
        c->a_imm = ldl_le_p(d2 + PLDMA_SQE_NET_IMM_OFF);
        bad |= (op != PLDMA_OP_PUT_IMM && c->a_imm) ||
               lduw_le_p(d2 + PLDMA_SQE_NET_RSVD0_OFF) ||
               !buffer_is_zero(d2 + PLDMA_SQE_NET_RSVD1_OFF,
                               PLDMA_SQE_SIZE - PLDMA_SQE_NET_RSVD1_OFF);
    }
    c->origin = FIELD_DP32(R_CH_ORIGIN_QUEUE_MASK, CH_ORIGIN, SQ_INDEX, idx);
    c->origin = FIELD_DP32(c->origin, CH_ORIGIN, KERNEL, q->kernel);
    trace_exanest_pldma_q_fetch(x->index, c->index, idx, addr, c->wr_id);
    if (bad) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: descriptor %u has flags 0x%x\n",
                      x->index, idx, flags);
    }
    pldma_launch(c, bad);
}

/* The address of SQ entry @idx. */
static uint64_t pldma_q_sqe(PldmaQueue *q, uint32_t idx)
{
    return q->a_sq_base + (uint64_t)(idx & (q->sq_n - 1)) * PLDMA_SQE_SIZE;
}

/* Read SQ entry @idx; a failure puts the queue in error. */
static bool pldma_q_read_sqe(PldmaQueue *q, uint32_t idx, uint8_t *d)
{
    uint64_t addr = pldma_q_sqe(q, idx);

    if (!pldma_q_dma(q, addr, d, PLDMA_SQE_SIZE, DMA_DIRECTION_TO_DEVICE)) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: reading %sdescriptor %u at 0x%"
                      PRIx64 " failed, queue stopped\n", q->ctx->index,
                      q->kernel ? "kernel " : "", idx, addr);
        pldma_q_error(q, PLDMA_QERR_SQ_FETCH, addr);
        return false;
    }
    return true;
}

/*
 * Take one descriptor, if the queue may: enabled and not in error, a
 * descriptor posted (SQ_HEAD != SQ_TAIL), a free channel that the queue may
 * use (the lowest-numbered one is taken), and room in the CQ for every queue
 * transfer in flight plus this one. Returns whether it took one.
 */
static bool pldma_q_fetch(PldmaQueue *q)
{
    PldmaContext *x = q->ctx;
    PldmaState *s = x->dev;
    PldmaChannel *c = NULL;
    uint8_t d[PLDMA_SQE_SIZE], d2[PLDMA_SQE_SIZE] = { 0 };
    uint64_t used, addr;
    uint32_t idx = q->sq_head, op;

    if (!q->enabled || q->err || q->sq_head == q->sq_tail) {
        return false;
    }
    used = pldma_q_cq_used(q);
    for (unsigned n = 0; n < s->nchan; n++) {
        PldmaChannel *ch = &x->ch[n];

        if (!c && pldma_ch_free(ch) && (q->chmask & (1u << n))) {
            c = ch;
        }
    }
    if (!c || used >= q->cq_n) {
        return false;
    }
    addr = pldma_q_sqe(q, idx);
    /* A read: it may reach the engine's registers, but changes nothing. */
    if (!pldma_q_read_sqe(q, idx, d)) {
        return false;
    }
    op = ldl_le_p(d + PLDMA_SQE_FLAGS_OFF) & PLDMA_OP_MASK;
    if (op != PLDMA_OP_COPY && op <= PLDMA_OP_PUT_IMM) {
        /* Two entries: wait for the second, then take both. */
        if (q->sq_tail - q->sq_head < 2 || !pldma_q_read_sqe(q, idx + 1, d2)) {
            return false;
        }
    }
    q->sq_head += op != PLDMA_OP_COPY && op <= PLDMA_OP_PUT_IMM ? 2 : 1;
    pldma_q_start(q, c, d, d2, idx, addr);
    return true;
}

/*
 * Take descriptors while the queue may. Called whenever that may have
 * become possible: doorbell, CQ_HEAD moved, a channel freed. It does not
 * nest: a call from inside (a descriptor that ends at once, a CQE write
 * reaching the doorbell) returns, and the running loop looks again.
 */
static void pldma_q_pump(PldmaQueue *q)
{
    if (q->pumping) {
        return;
    }
    q->pumping = true;
    while (pldma_q_fetch(q)) {
        /* one descriptor per call */
    }
    q->pumping = false;
}

/* A channel of the context is free: both queues may take it. */
void pldma_pump(PldmaContext *x)
{
    pldma_net_channel_freed(x);
    pldma_q_pump(&x->kq);
    pldma_q_pump(&x->q);
}

/*
 * Q_CTRL.ENABLE 0 -> 1: latch the bases and Q_CFG, the indices to 0 (or,
 * with @restore, kept as the PF set them), no error. A bad configuration,
 * or restored indices more than a ring apart, puts the queue in error at
 * once (BAD_RING).
 */
static void pldma_q_enable(PldmaQueue *q, bool restore)
{
    PldmaContext *x = q->ctx;
    PldmaState *s = x->dev;
    unsigned lsq = FIELD_EX32(q->cfg, CTX_Q_CFG, SQ);
    unsigned lcq = FIELD_EX32(q->cfg, CTX_Q_CFG, CQ);
    uint32_t chans = MAKE_64BIT_MASK(0, s->nchan);
    uint32_t mask = FIELD_EX32(q->cfg, CTX_Q_CFG, CHAN);
    const char *why = NULL;
    uint64_t bad = 0;

    q->enabled = true;
    q->gen++;
    if (!restore) {
        q->sq_tail = q->sq_head = q->cq_head = q->cq_tail = 0;
    }
    q->cq_writing = 0;
    q->armed = false;
    q->err = PLDMA_QERR_NONE;
    q->err_addr = 0;
    q->evt_lost = false;
    q->a_sq_base = q->sq_base;
    q->a_cq_base = q->cq_base;
    q->chmask = mask ? mask & chans : chans;
    q->sq_n = q->cq_n = 0;
    if (lsq < PLDMA_Q_LOG2_MIN || lsq > PLDMA_Q_LOG2_MAX ||
        lcq < PLDMA_Q_LOG2_MIN || lcq > PLDMA_Q_LOG2_MAX) {
        why = "a ring size out of range";
    } else if (q->a_sq_base % PLDMA_Q_RING_ALIGN ||
               pldma_wraps(q->a_sq_base, PLDMA_SQE_SIZE << lsq)) {
        why = "a misaligned or wrapping SQ base";
        bad = q->a_sq_base;
    } else if (q->a_cq_base % PLDMA_Q_RING_ALIGN ||
               pldma_wraps(q->a_cq_base, PLDMA_CQE_SIZE << lcq)) {
        why = "a misaligned or wrapping CQ base";
        bad = q->a_cq_base;
    } else if (!q->chmask) {
        why = "no channel the engine has";
    } else if (restore && (q->sq_tail - q->sq_head > (1u << lsq) ||
                           q->cq_tail - q->cq_head > (1u << lcq))) {
        why = "restored indices more than a ring apart";
    }
    if (why) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: %squeue enabled with %s "
                      "(Q_CFG 0x%x)\n", x->index, q->kernel ? "kernel " : "",
                      why, q->cfg);
        pldma_q_error(q, PLDMA_QERR_BAD_RING, bad);
        return;
    }
    q->sq_n = 1u << lsq;
    q->cq_n = 1u << lcq;
    trace_exanest_pldma_q_enable(x->index, q->a_sq_base, q->sq_n,
                                 q->a_cq_base, q->cq_n, q->chmask);
}

/*
 * Stop the queue: no fetch, no CQE. @abort: its transfers in flight return
 * to IDLE at once, without a CQE, and their interrupt bits clear (Q_CTRL
 * ENABLE 1 -> 0; QUIESCE and RESET stop every channel themselves).
 */
static void pldma_q_stop(PldmaQueue *q, bool abort)
{
    PldmaContext *x = q->ctx;

    if (q->enabled) {
        trace_exanest_pldma_q_stop(x->index);
    }
    q->enabled = false;
    q->gen++;
    q->armed = false;
    q->cq_writing = 0;
    for (unsigned n = 0; abort && n < x->dev->nchan; n++) {
        PldmaChannel *c = &x->ch[n];

        if (pldma_ch_queued(c) && pldma_ch_queue(c) == q &&
            !pldma_ch_free(c)) {
            pldma_net_abort(c);
            pldma_cancel(c);
            trace_exanest_pldma_state(x->index, n, PLDMA_STATE_IDLE,
                                      PLDMA_ERR_NONE);
            c->state = PLDMA_STATE_IDLE;
            c->err = PLDMA_ERR_NONE;
            x->irq_status &= ~(1u << n);
        }
    }
    pldma_update_irq(x->dev);
}

/* QUIESCE (@keep: the programmed registers stay) and RESET. */
static void pldma_q_reset(PldmaQueue *q, bool keep)
{
    pldma_q_stop(q, false);
    q->sq_tail = q->sq_head = q->cq_head = q->cq_tail = 0;
    q->err = PLDMA_QERR_NONE;
    q->err_addr = 0;
    q->evt_lost = false;
    if (!keep) {
        q->sq_base = q->cq_base = 0;
        q->cfg = 0;
        q->evt_arg = 0;
    }
}

/* Q_CTRL, or KQ_CTRL (ENABLE only). */
static void pldma_q_ctrl(PldmaQueue *q, uint32_t val)
{
    PldmaContext *x = q->ctx;
    uint32_t known = R_CTX_Q_CTRL_ENABLE_MASK;
    bool en = FIELD_EX32(val, CTX_Q_CTRL, ENABLE);

    if (!q->kernel) {
        known |= R_CTX_Q_CTRL_RESTORE_MASK | R_CTX_Q_CTRL_ARM_MASK;
    }
    if (val & ~known) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u: unknown %s bits 0x%x "
                      "ignored\n", x->index, q->kernel ? "KQ_CTRL" : "Q_CTRL",
                      val & ~known);
        val &= known;
    }
    if (en && !q->enabled) {
        pldma_q_enable(q, FIELD_EX32(val, CTX_Q_CTRL, RESTORE));
    } else if (!en && q->enabled) {
        pldma_q_stop(q, true);
    }
    if (!en || !q->enabled || q->err) {
        return;
    }
    if (FIELD_EX32(val, CTX_Q_CTRL, ARM)) {
        q->armed = true;
    }
    /* Restored: CQEs already waiting, descriptors already posted. */
    pldma_q_event(q);
    pldma_q_pump(q);
}

/* A transfer of the queue is in flight: its channel is busy or faulted. */
static bool pldma_q_busy(PldmaQueue *q)
{
    PldmaContext *x = q->ctx;

    for (unsigned n = 0; n < x->dev->nchan; n++) {
        PldmaChannel *c = &x->ch[n];

        if (pldma_ch_queued(c) && pldma_ch_queue(c) == q &&
            !pldma_ch_free(c)) {
            return true;
        }
    }
    return q->cq_writing != 0;
}

/*
 * CTX_Q_SQ_TAIL..CQ_TAIL: the indices, which the PF sets only while the
 * queue is disabled.
 */
static uint32_t *pldma_q_index(PldmaQueue *q, hwaddr off)
{
    switch (off) {
    case A_CTX_Q_SQ_TAIL:
        return &q->sq_tail;
    case A_CTX_Q_SQ_HEAD:
        return &q->sq_head;
    case A_CTX_Q_CQ_HEAD:
        return &q->cq_head;
    case A_CTX_Q_CQ_TAIL:
        return &q->cq_tail;
    }
    return NULL;
}

static uint32_t pldma_q_status(PldmaQueue *q)
{
    uint32_t st = 0;

    st = FIELD_DP32(st, CTX_Q_STATUS, ENABLED, q->enabled);
    st = FIELD_DP32(st, CTX_Q_STATUS, BUSY, pldma_q_busy(q));
    st = FIELD_DP32(st, CTX_Q_STATUS, ARMED, q->armed);
    st = FIELD_DP32(st, CTX_Q_STATUS, ERROR, q->err != PLDMA_QERR_NONE);
    st = FIELD_DP32(st, CTX_Q_STATUS, EVT_LOST, q->evt_lost);
    return FIELD_DP32(st, CTX_Q_STATUS, ERR, q->err);
}

static void pldma_ctrl(PldmaChannel *c, uint32_t val)
{
    uint32_t cmd = val & R_CH_CTRL_STROBES_MASK;
    unsigned ctx = c->ctx->index;
    bool ok = true;

    c->irq_en = FIELD_EX32(val, CH_CTRL, IRQ_EN);
    if ((cmd == R_CH_CTRL_RESUME_MASK || cmd == R_CH_CTRL_NACK_MASK) &&
        FIELD_EX32(val, CH_CTRL, SEQ_CHECK) &&
        (c->state != PLDMA_STATE_FAULT ||
         FIELD_EX32(val, CH_CTRL, SEQ) != c->fault_seq)) {
        /* 2.11: an answer to a fault the channel is no longer in */
        trace_exanest_pldma_stale_answer(ctx, c->index, cmd,
                                         FIELD_EX32(val, CH_CTRL, SEQ),
                                         c->fault_seq, c->state);
        c->rejected = true;
        return;
    }
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
            trace_exanest_pldma_resume(ctx, c->index, c->done);
            if (c->origin & PLDMA_ORIGIN_NET_RX) {
                pldma_net_rx_resume(c);
            } else {
                pldma_kick(c);
            }
        }
        break;
    case R_CH_CTRL_NACK_MASK:
        if (c->state == PLDMA_STATE_FAULT &&
            (c->origin & PLDMA_ORIGIN_NET_RX)) {
            trace_exanest_pldma_nack(ctx, c->index, c->done);
            pldma_net_rx_nack(c);
        } else if (c->state == PLDMA_STATE_BUSY ||
                   c->state == PLDMA_STATE_FAULT) {
            trace_exanest_pldma_nack(ctx, c->index, c->done);
            pldma_net_abort(c);
            pldma_cancel(c);
            pldma_notify(c, PLDMA_STATE_ERROR, PLDMA_ERR_ABORTED);
        }
        break;
    default:
        ok = false; /* more than one strobe */
        break;
    }
    if (!ok) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u ch%u: command 0x%x rejected in "
                      "state %u\n", ctx, c->index, cmd, c->state);
    }
    c->rejected = !ok;
}

static void pldma_channel_reset(PldmaChannel *c)
{
    pldma_net_abort(c);
    pldma_cancel(c);
    c->src = c->dst = c->a_src = c->a_dst = 0;
    c->len = c->a_len = 0;
    c->irq_en = false;
    c->state = PLDMA_STATE_IDLE;
    c->err = PLDMA_ERR_NONE;
    c->rejected = false;
    c->pend_addr = 0;
    c->pend_info = 0;
    c->fault_addr = 0;
    c->fault_info = 0;
    c->done = 0;
    c->faults = 0;
    c->fault_seq = 0;
    c->origin = 0;
    c->wr_id = 0;
    c->nack_status = PLDMA_CQE_ABORTED;
    c->net_op = c->net_peer = c->net_ep = 0;
    c->a_op = c->a_peer = c->a_ep = 0;
    c->net_rkey = c->a_rkey = 0;
    c->op_id = 0;
    c->net_status = 0;
    c->rx = -1;
    c->rx_src = 0;
}

/* The mailbox (2.4) */

/* Disabled, the indices zeroed (QUIESCE, RESET); BASE and CFG's LOG2 stay. */
static void pldma_mbox_reset(PldmaContext *x)
{
    x->mbox_cfg &= ~PLDMA_MBOX_CFG_ENABLE;
    x->mbox_n = 0;
    x->mbox_head = x->mbox_tail = 0;
    x->mbox_armed = false;
}

/*
 * 2.6: the armed mailbox event fires once the ring holds a message its
 * reader has not taken: after a message is placed, HEAD is written, or the
 * event is armed.
 */
void pldma_mbox_event(PldmaContext *x)
{
    if (x->mbox_armed && x->mbox_n && x->mbox_tail != x->mbox_head) {
        trace_exanest_pldma_mbox_event(x->index, x->mbox_tail, x->mbox_head);
        x->mbox_armed = false;
        x->irq_status |= R_CTX_IRQ_STATUS_MBOX_MASK;
        pldma_update_irq(x->dev);
    }
}

/* MBOX_ARM written, from the PF or the VF (2.6). */
static void pldma_mbox_arm(PldmaContext *x, uint32_t v)
{
    if (v & ~R_CTX_MBOX_ARM_ONCE_MASK) {
        qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: unknown "
                      "MBOX_ARM bits 0x%x ignored\n", x->index,
                      v & ~R_CTX_MBOX_ARM_ONCE_MASK);
    }
    if (!FIELD_EX32(v, CTX_MBOX_ARM, ONCE)) {
        return;
    }
    if (!x->mbox_n) {
        qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: MBOX_ARM "
                      "ignored: the mailbox is disabled\n", x->index);
        return;
    }
    x->mbox_armed = true;
    pldma_mbox_event(x);
}

/* MBOX_CFG written: ENABLE 0 -> 1 latches the ring, if it is a good one. */
static void pldma_mbox_cfg(PldmaContext *x, uint32_t val)
{
    uint32_t known = R_CTX_MBOX_CFG_LOG2_MASK | R_CTX_MBOX_CFG_ENABLE_MASK;
    uint32_t log2 = FIELD_EX32(val, CTX_MBOX_CFG, LOG2);
    bool was = x->mbox_cfg & PLDMA_MBOX_CFG_ENABLE;
    uint64_t size = (uint64_t)PLDMA_MBOX_SLOT << log2;

    if (val & ~known) {
        qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: unknown "
                      "MBOX_CFG bits 0x%x ignored\n", x->index, val & ~known);
    }
    if (!FIELD_EX32(val, CTX_MBOX_CFG, ENABLE)) {
        x->mbox_cfg = val & R_CTX_MBOX_CFG_LOG2_MASK;
        x->mbox_n = 0;
        x->mbox_armed = false;
        return;
    }
    if (was) {
        x->mbox_cfg = (val & R_CTX_MBOX_CFG_LOG2_MASK) |
                      PLDMA_MBOX_CFG_ENABLE;
        return; /* latched already: LOG2 takes effect at the next enable */
    }
    if (log2 < 1 || log2 > PLDMA_MBOX_LOG2_MAX || x->mbox_base % 64 ||
        x->mbox_base + size < x->mbox_base) {
        qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: mailbox ring "
                      "0x%" PRIx64 " of 2^%u slots refused\n", x->index,
                      x->mbox_base, log2);
        x->mbox_cfg = val & R_CTX_MBOX_CFG_LOG2_MASK;
        return;
    }
    x->mbox_cfg = val & known;
    x->a_mbox_base = x->mbox_base;
    x->mbox_n = 1u << log2;
}

/*
 * The reader's index, from the PF or the VF. A value past TAIL is logged and
 * taken: it can only disturb the context's own ring.
 */
static void pldma_mbox_head(PldmaContext *x, uint32_t v)
{
    if (v - x->mbox_head > x->mbox_tail - x->mbox_head) {
        qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: MBOX_HEAD %u "
                      "is not between MBOX_HEAD %u and MBOX_TAIL %u\n",
                      x->index, v, x->mbox_head, x->mbox_tail);
    }
    x->mbox_head = v;
    pldma_mbox_event(x);
    pldma_net_mbox_freed(x);
}

/*
 * CTX_CTRL.QUIESCE: every channel of the context back to IDLE, without an
 * interrupt, and its interrupt status cleared; the queue is disabled and its
 * state cleared. The programmed registers and the progress latches
 * (DONE_BYTES, FAULTS, FAULT_*, ORIGIN, WRID) stay readable. All copying
 * happens at the start of a turn, so after this no byte of the context moves.
 */
static void pldma_quiesce(PldmaContext *x)
{
    PldmaState *s = x->dev;

    trace_exanest_pldma_quiesce(x->index);
    for (unsigned i = 0; i < s->nchan; i++) {
        PldmaChannel *c = &x->ch[i];

        pldma_net_abort(c);
        pldma_cancel(c);
        if (c->state != PLDMA_STATE_IDLE) {
            trace_exanest_pldma_state(x->index, i, PLDMA_STATE_IDLE,
                                      PLDMA_ERR_NONE);
        }
        c->state = PLDMA_STATE_IDLE;
        c->err = PLDMA_ERR_NONE;
    }
    pldma_q_reset(&x->q, true);
    pldma_q_reset(&x->kq, true);
    pldma_mbox_reset(x);
    x->frec_cfg &= ~PLDMA_FREC_CFG_ENABLE;
    x->irq_status = 0;
    pldma_update_irq(s);
}

static void pldma_reset_all(PldmaState *s)
{
    trace_exanest_pldma_reset();
    for (unsigned i = 0; i < s->nctx; i++) {
        PldmaContext *x = &s->ctx[i];

        for (unsigned n = 0; n < s->nchan; n++) {
            pldma_channel_reset(&x->ch[n]);
        }
        pldma_q_reset(&x->q, false);
        pldma_q_reset(&x->kq, false);
        pldma_mbox_reset(x);
        x->mbox_base = 0;
        x->mbox_started = 0;
        x->frec_base = x->a_frec_base = 0;
        x->frec_cfg = x->frec_n = 0;
        x->frec_head = x->frec_tail = 0;
        x->irq_status = 0;
        x->next_ch = 0;
    }
    timer_del(s->arbiter);
    s->turn = NULL;
    s->path_free_ns = 0;
    s->next_ctx = 0;
    pldma_net_reset(s);
    pldma_update_irq(s);
}

static uint32_t pldma_ch_status(PldmaChannel *c)
{
    uint32_t st = 0;

    st = FIELD_DP32(st, CH_STATUS, STATE, c->state);
    st = FIELD_DP32(st, CH_STATUS, ERR, c->err);
    st = FIELD_DP32(st, CH_STATUS, FAULT_SEQ, c->fault_seq);
    return FIELD_DP32(st, CH_STATUS, REJECTED, c->rejected);
}

static uint32_t pldma_ctx_status(PldmaContext *x)
{
    bool active = false;
    uint32_t st = 0;

    for (unsigned i = 0; i < x->dev->nchan; i++) {
        active |= x->ch[i].state == PLDMA_STATE_BUSY ||
                  x->ch[i].state == PLDMA_STATE_FAULT;
    }
    st = FIELD_DP32(st, CTX_STATUS, ACTIVE, active);
    return FIELD_DP32(st, CTX_STATUS, FUNCTION, pldma_ctx_master(x) != NULL);
}

/* IRQ_SUMMARY_LO (first = 0) or _HI (first = 32). */
static uint32_t pldma_irq_summary(PldmaState *s, unsigned first)
{
    uint32_t v = 0;

    for (unsigned i = first; i < s->nctx && i < first + 32; i++) {
        if (s->ctx[i].irq_status) {
            v |= 1u << (i - first);
        }
    }
    return v;
}

static bool pldma_ch_read(PldmaChannel *c, hwaddr off, uint64_t *val)
{
    bool fault = c->state == PLDMA_STATE_FAULT;

    switch (off) {
    /* 2.10: in FAULT, the faulting transfer's own (latched) range */
    case A_CH_SRC_LO:
        *val = extract64(fault ? c->a_src : c->src, 0, 32);
        return true;
    case A_CH_SRC_HI:
        *val = extract64(fault ? c->a_src : c->src, 32, 32);
        return true;
    case A_CH_DST_LO:
        *val = extract64(fault ? c->a_dst : c->dst, 0, 32);
        return true;
    case A_CH_DST_HI:
        *val = extract64(fault ? c->a_dst : c->dst, 32, 32);
        return true;
    case A_CH_LEN:
        *val = fault ? c->a_len : c->len;
        return true;
    case A_CH_CTRL:
        *val = FIELD_DP32(0, CH_CTRL, IRQ_EN, c->irq_en);
        return true;
    case A_CH_STATUS:
        *val = pldma_ch_status(c);
        return true;
    case A_CH_FAULT_LO:
        *val = extract64(c->fault_addr, 0, 32);
        return true;
    case A_CH_FAULT_HI:
        *val = extract64(c->fault_addr, 32, 32);
        return true;
    case A_CH_FAULT_INFO:
        *val = c->fault_info;
        return true;
    case A_CH_DONE_BYTES:
        *val = c->done;
        return true;
    case A_CH_FAULTS:
        *val = c->faults;
        return true;
    case A_CH_ORIGIN:
        *val = c->origin;
        return true;
    case A_CH_WRID_LO:
        *val = extract64(c->wr_id, 0, 32);
        return true;
    case A_CH_WRID_HI:
        *val = extract64(c->wr_id, 32, 32);
        return true;
    case A_CH_NACK_STATUS:
        *val = 0; /* write-only */
        return true;
    }
    return false;
}

static bool pldma_ch_write(PldmaChannel *c, hwaddr off, uint32_t val)
{
    switch (off) {
    case A_CH_SRC_LO:
        c->src = deposit64(c->src, 0, 32, val);
        return true;
    case A_CH_SRC_HI:
        c->src = deposit64(c->src, 32, 32, val);
        return true;
    case A_CH_DST_LO:
        c->dst = deposit64(c->dst, 0, 32, val);
        return true;
    case A_CH_DST_HI:
        c->dst = deposit64(c->dst, 32, 32, val);
        return true;
    case A_CH_LEN:
        c->len = val;
        return true;
    case A_CH_CTRL:
        pldma_ctrl(c, val);
        return true;
    case A_CH_NACK_STATUS:
        c->nack_status = val;
        return true;
    }
    return false;
}

/* The kernel queue's registers (2.2) in the context block. */
static bool pldma_kq_read(PldmaQueue *kq, hwaddr off, uint64_t *val)
{
    switch (off) {
    case A_CTX_KQ_SQ_BASE_LO:
        *val = extract64(kq->sq_base, 0, 32);
        return true;
    case A_CTX_KQ_SQ_BASE_HI:
        *val = extract64(kq->sq_base, 32, 32);
        return true;
    case A_CTX_KQ_CQ_BASE_LO:
        *val = extract64(kq->cq_base, 0, 32);
        return true;
    case A_CTX_KQ_CQ_BASE_HI:
        *val = extract64(kq->cq_base, 32, 32);
        return true;
    case A_CTX_KQ_CFG:
        *val = kq->cfg;
        return true;
    case A_CTX_KQ_CTRL:
        *val = FIELD_DP32(0, CTX_Q_CTRL, ENABLE, kq->enabled);
        return true;
    case A_CTX_KQ_STATUS:
        *val = pldma_q_status(kq);
        return true;
    case A_CTX_KQ_ERR_LO:
        *val = extract64(kq->err_addr, 0, 32);
        return true;
    case A_CTX_KQ_ERR_HI:
        *val = extract64(kq->err_addr, 32, 32);
        return true;
    case A_CTX_KQ_SQ_TAIL:
        *val = kq->sq_tail;
        return true;
    case A_CTX_KQ_SQ_HEAD:
        *val = kq->sq_head;
        return true;
    case A_CTX_KQ_CQ_HEAD:
        *val = kq->cq_head;
        return true;
    case A_CTX_KQ_CQ_TAIL:
        *val = kq->cq_tail;
        return true;
    }
    return false;
}

/*
 * KQ_SQ_TAIL is the kernel queue's doorbell, KQ_CQ_HEAD gives CQ entries
 * back: both ignored (and logged) while the queue is disabled, and taken as
 * they are otherwise, as the VF's doorbells are.
 */
static bool pldma_kq_write(PldmaQueue *kq, hwaddr off, uint32_t val)
{
    uint32_t cfg_mask = R_CTX_Q_CFG_SQ_MASK | R_CTX_Q_CFG_CQ_MASK |
                        R_CTX_Q_CFG_CHAN_MASK;
    unsigned ctx = kq->ctx->index;

    switch (off) {
    case A_CTX_KQ_SQ_BASE_LO:
        kq->sq_base = deposit64(kq->sq_base, 0, 32, val);
        return true;
    case A_CTX_KQ_SQ_BASE_HI:
        kq->sq_base = deposit64(kq->sq_base, 32, 32, val);
        return true;
    case A_CTX_KQ_CQ_BASE_LO:
        kq->cq_base = deposit64(kq->cq_base, 0, 32, val);
        return true;
    case A_CTX_KQ_CQ_BASE_HI:
        kq->cq_base = deposit64(kq->cq_base, 32, 32, val);
        return true;
    case A_CTX_KQ_CFG:
        if (val & ~cfg_mask) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma: ctx%u: unknown KQ_CFG bits 0x%x "
                          "ignored\n", ctx, val & ~cfg_mask);
        }
        kq->cfg = val & cfg_mask;
        return true;
    case A_CTX_KQ_CTRL:
        pldma_q_ctrl(kq, val);
        return true;
    case A_CTX_KQ_SQ_TAIL:
    case A_CTX_KQ_CQ_HEAD:
        if (!kq->enabled) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma: ctx%u: write 0x%x to kernel queue "
                          "index 0x%" HWADDR_PRIx " ignored: the queue is "
                          "disabled\n", ctx, val, off);
            return true;
        }
        if (off == A_CTX_KQ_SQ_TAIL) {
            kq->sq_tail = val;
        } else {
            kq->cq_head = val;
        }
        pldma_q_pump(kq);
        return true;
    }
    return false;
}

static bool pldma_ctx_read(PldmaContext *x, hwaddr off, uint64_t *val)
{
    PldmaQueue *q = &x->q;

    if (off >= PLDMA_CH_NET_BASE) {
        hwaddr n = (off - PLDMA_CH_NET_BASE) / PLDMA_CH_NET_STRIDE;

        return n < x->dev->nchan &&
               pldma_ch_net_read(&x->ch[n], (off - PLDMA_CH_NET_BASE) %
                                 PLDMA_CH_NET_STRIDE, val);
    }
    switch (off) {
    case A_CTX_IRQ_STATUS:
        *val = x->irq_status;
        return true;
    case A_CTX_CTRL:
        *val = 0; /* write-only */
        return true;
    case A_CTX_STATUS:
        *val = pldma_ctx_status(x);
        return true;
    case A_CTX_SQ_BASE_LO:
        *val = extract64(q->sq_base, 0, 32);
        return true;
    case A_CTX_SQ_BASE_HI:
        *val = extract64(q->sq_base, 32, 32);
        return true;
    case A_CTX_CQ_BASE_LO:
        *val = extract64(q->cq_base, 0, 32);
        return true;
    case A_CTX_CQ_BASE_HI:
        *val = extract64(q->cq_base, 32, 32);
        return true;
    case A_CTX_Q_CFG:
        *val = q->cfg;
        return true;
    case A_CTX_Q_CTRL:
        *val = FIELD_DP32(0, CTX_Q_CTRL, ENABLE, q->enabled);
        return true;
    case A_CTX_Q_STATUS:
        *val = pldma_q_status(q);
        return true;
    case A_CTX_Q_ERR_LO:
        *val = extract64(q->err_addr, 0, 32);
        return true;
    case A_CTX_Q_ERR_HI:
        *val = extract64(q->err_addr, 32, 32);
        return true;
    case A_CTX_EVT_POST:
        *val = 0; /* write-only */
        return true;
    case A_CTX_EVT_ARG_LO:
        *val = extract64(q->evt_arg, 0, 32);
        return true;
    case A_CTX_EVT_ARG_HI:
        *val = extract64(q->evt_arg, 32, 32);
        return true;
    case A_CTX_Q_SQ_TAIL:
    case A_CTX_Q_SQ_HEAD:
    case A_CTX_Q_CQ_HEAD:
    case A_CTX_Q_CQ_TAIL:
        *val = *pldma_q_index(q, off);
        return true;
    case A_CTX_MBOX_BASE_LO:
        *val = extract64(x->mbox_base, 0, 32);
        return true;
    case A_CTX_MBOX_BASE_HI:
        *val = extract64(x->mbox_base, 32, 32);
        return true;
    case A_CTX_MBOX_CFG:
        *val = x->mbox_cfg;
        return true;
    case A_CTX_MBOX_HEAD:
        *val = x->mbox_head;
        return true;
    case A_CTX_MBOX_TAIL:
        *val = x->mbox_tail;
        return true;
    case A_CTX_MBOX_ARM:
        *val = x->mbox_armed ? R_CTX_MBOX_ARM_ONCE_MASK : 0;
        return true;
    case A_CTX_FREC_BASE_LO:
        *val = extract64(x->frec_base, 0, 32);
        return true;
    case A_CTX_FREC_BASE_HI:
        *val = extract64(x->frec_base, 32, 32);
        return true;
    case A_CTX_FREC_CFG:
        *val = x->frec_cfg;
        return true;
    case A_CTX_FREC_HEAD:
        *val = x->frec_head;
        return true;
    case A_CTX_FREC_TAIL:
        *val = x->frec_tail;
        return true;
    }
    return pldma_kq_read(&x->kq, off, val);
}

static bool pldma_ctx_write(PldmaContext *x, hwaddr off, uint32_t val)
{
    PldmaQueue *q = &x->q;
    uint32_t cfg_mask = R_CTX_Q_CFG_SQ_MASK | R_CTX_Q_CFG_CQ_MASK |
                        R_CTX_Q_CFG_CHAN_MASK;

    if (off >= PLDMA_CH_NET_BASE) {
        hwaddr n = (off - PLDMA_CH_NET_BASE) / PLDMA_CH_NET_STRIDE;

        return n < x->dev->nchan &&
               pldma_ch_net_write(&x->ch[n], (off - PLDMA_CH_NET_BASE) %
                                  PLDMA_CH_NET_STRIDE, val);
    }

    switch (off) {
    case A_CTX_IRQ_STATUS:
        x->irq_status &= ~val;
        pldma_update_irq(x->dev);
        return true;
    case A_CTX_CTRL:
        if (val & ~R_CTX_CTRL_QUIESCE_MASK) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma: ctx%u: unknown CTX_CTRL bits "
                          "0x%x ignored\n", x->index,
                          val & ~R_CTX_CTRL_QUIESCE_MASK);
        }
        if (FIELD_EX32(val, CTX_CTRL, QUIESCE)) {
            pldma_quiesce(x);
        }
        return true;
    case A_CTX_SQ_BASE_LO:
        q->sq_base = deposit64(q->sq_base, 0, 32, val);
        return true;
    case A_CTX_SQ_BASE_HI:
        q->sq_base = deposit64(q->sq_base, 32, 32, val);
        return true;
    case A_CTX_CQ_BASE_LO:
        q->cq_base = deposit64(q->cq_base, 0, 32, val);
        return true;
    case A_CTX_EVT_ARG_LO:
        q->evt_arg = deposit64(q->evt_arg, 0, 32, val);
        return true;
    case A_CTX_EVT_ARG_HI:
        q->evt_arg = deposit64(q->evt_arg, 32, 32, val);
        return true;
    case A_CTX_EVT_POST:
        pldma_q_post(x, val);
        return true;
    case A_CTX_CQ_BASE_HI:
        q->cq_base = deposit64(q->cq_base, 32, 32, val);
        return true;
    case A_CTX_Q_CFG:
        if (val & ~cfg_mask) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma: ctx%u: unknown Q_CFG bits 0x%x "
                          "ignored\n", x->index, val & ~cfg_mask);
        }
        q->cfg = val & cfg_mask;
        return true;
    case A_CTX_Q_CTRL:
        pldma_q_ctrl(q, val);
        return true;
    case A_CTX_Q_SQ_TAIL:
    case A_CTX_Q_SQ_HEAD:
    case A_CTX_Q_CQ_HEAD:
    case A_CTX_Q_CQ_TAIL:
        if (q->enabled) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma: ctx%u: write 0x%x to queue index "
                          "0x%" HWADDR_PRIx " ignored: the queue is "
                          "enabled\n", x->index, val, off);
            return true;
        }
        *pldma_q_index(q, off) = val;
        return true;
    case A_CTX_MBOX_BASE_LO:
        x->mbox_base = deposit64(x->mbox_base, 0, 32, val);
        return true;
    case A_CTX_MBOX_BASE_HI:
        x->mbox_base = deposit64(x->mbox_base, 32, 32, val);
        return true;
    case A_CTX_MBOX_CFG:
        pldma_mbox_cfg(x, val);
        return true;
    case A_CTX_MBOX_HEAD:
        pldma_mbox_head(x, val);
        return true;
    case A_CTX_MBOX_TAIL:
        if (x->mbox_cfg & PLDMA_MBOX_CFG_ENABLE) {
            qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: ctx%u: write 0x%x "
                          "to MBOX_TAIL ignored: the mailbox is enabled\n",
                          x->index, val);
            return true;
        }
        x->mbox_tail = val;
        return true;
    case A_CTX_MBOX_ARM:
        pldma_mbox_arm(x, val);
        return true;
    case A_CTX_FREC_BASE_LO:
        x->frec_base = deposit64(x->frec_base, 0, 32, val);
        return true;
    case A_CTX_FREC_BASE_HI:
        x->frec_base = deposit64(x->frec_base, 32, 32, val);
        return true;
    case A_CTX_FREC_CFG:
        pldma_frec_cfg(x, val);
        return true;
    case A_CTX_FREC_HEAD:
        /* A value past TAIL can only disturb the context's own ring. */
        x->frec_head = val;
        return true;
    case A_CTX_FREC_TAIL:
        return true; /* read-only */
    }
    return pldma_kq_write(&x->kq, off, val);
}

static bool pldma_global_read(PldmaState *s, hwaddr addr, uint64_t *val)
{
    uint32_t v = 0;

    switch (addr) {
    case A_ID:
        *val = PLDMA_ID_MAGIC;
        return true;
    case A_VERSION:
        v = FIELD_DP32(v, VERSION, MAJOR, PLDMA_VERSION_MAJOR);
        *val = FIELD_DP32(v, VERSION, MINOR, PLDMA_VERSION_MINOR);
        return true;
    case A_CAPS:
        v = FIELD_DP32(v, CAPS, NCHAN, s->nchan);
        v = FIELD_DP32(v, CAPS, RESUME, 1);
        v = FIELD_DP32(v, CAPS, INTX, 1);
        v = FIELD_DP32(v, CAPS, TIMING, 1);
        v = FIELD_DP32(v, CAPS, SRIOV, s->bus->sriov);
        v = FIELD_DP32(v, CAPS, NET, 1);
        v = FIELD_DP32(v, CAPS, MAILBOX, 1);
        v = FIELD_DP32(v, CAPS, FREC, 1);
        *val = FIELD_DP32(v, CAPS, NCTX, s->nctx);
        return true;
    case A_MAX_LEN:
        *val = s->max_len;
        return true;
    case A_IRQ_SUMMARY_LO:
        *val = pldma_irq_summary(s, 0);
        return true;
    case A_IRQ_SUMMARY_HI:
        *val = pldma_irq_summary(s, 32);
        return true;
    case A_BANDWIDTH:
        *val = s->bandwidth_mbs;
        return true;
    case A_LATENCY:
        *val = s->latency_ns;
        return true;
    case A_SCRATCH:
        *val = s->scratch;
        return true;
    case A_RESET:
        *val = 0;
        return true;
    case A_QUANTUM:
        *val = PLDMA_STEP;
        return true;
    }
    return pldma_net_read(s, addr, val);
}

static bool pldma_global_write(PldmaState *s, hwaddr addr, uint32_t val)
{
    switch (addr) {
    case A_SCRATCH:
        s->scratch = val;
        return true;
    case A_RESET:
        if (val == PLDMA_RESET_MAGIC) {
            pldma_reset_all(s);
        }
        return true;
    }
    return pldma_net_write(s, addr, val);
}

/*
 * Where a BAR0 offset at or above PLDMA_CTX_BASE lands: its context and, in
 * the context's channel area, its channel. Returns false, after logging
 * why, for a context or channel the engine does not have.
 */
static bool pldma_decode(PldmaState *s, hwaddr addr, PldmaContext **x,
                         PldmaChannel **c, hwaddr *off)
{
    hwaddr ctx = (addr - PLDMA_CTX_BASE) / PLDMA_CTX_STRIDE;
    hwaddr rel = (addr - PLDMA_CTX_BASE) % PLDMA_CTX_STRIDE;
    hwaddr ch;

    *x = NULL;
    *c = NULL;
    *off = rel;
    if (ctx >= PLDMA_MAX_CONTEXTS) {
        return true; /* past the last context block: an unknown offset */
    }
    if (ctx >= s->nctx) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: offset 0x%" HWADDR_PRIx " is in "
                      "context %u, but the engine has %u contexts\n",
                      addr, (unsigned)ctx, s->nctx);
        return false;
    }
    *x = &s->ctx[ctx];
    if (rel < PLDMA_CH_BASE) {
        return true;
    }
    ch = (rel - PLDMA_CH_BASE) / PLDMA_CH_STRIDE;
    if (ch >= PLDMA_MAX_CHANNELS) {
        return true; /* past the channel blocks: an unknown offset */
    }
    if (ch >= s->nchan) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: offset 0x%" HWADDR_PRIx " is in "
                      "channel %u of context %u, but contexts have %u "
                      "channels\n", addr, (unsigned)ch, (unsigned)ctx,
                      s->nchan);
        return false;
    }
    *c = &(*x)->ch[ch];
    *off = (rel - PLDMA_CH_BASE) % PLDMA_CH_STRIDE;
    return true;
}

static uint64_t pldma_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    PldmaState *s = opaque;
    PldmaContext *x = NULL;
    PldmaChannel *c = NULL;
    uint64_t val = 0;
    bool known = false;
    hwaddr off;

    if (addr < PLDMA_CTX_BASE) {
        known = pldma_global_read(s, addr, &val);
    } else if (!pldma_decode(s, addr, &x, &c, &off)) {
        known = true; /* absent context or channel: logged, reads 0 */
    } else if (c) {
        known = pldma_ch_read(c, off, &val);
    } else if (x) {
        known = pldma_ctx_read(x, off, &val);
    }
    if (!known) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: read of unknown offset 0x%"
                      HWADDR_PRIx "\n", addr);
    }
    trace_exanest_pldma_mmio_read(addr, val);
    return val;
}

static void pldma_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    PldmaState *s = opaque;
    PldmaContext *x = NULL;
    PldmaChannel *c = NULL;
    bool known = false;
    hwaddr off;

    trace_exanest_pldma_mmio_write(addr, val);
    if (addr < PLDMA_CTX_BASE) {
        known = pldma_global_write(s, addr, val);
    } else if (!pldma_decode(s, addr, &x, &c, &off)) {
        return; /* absent context or channel: logged, ignored */
    } else if (c) {
        known = pldma_ch_write(c, off, val);
    } else if (x) {
        known = pldma_ctx_write(x, off, val);
    }
    if (!known) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: write 0x%" PRIx64 " to read-only or "
                      "unknown offset 0x%" HWADDR_PRIx "\n", val, addr);
    }
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

/*
 * The engine's half of realizing either front-end: check the properties,
 * make the register window and the contexts. False (and @errp) if a
 * property is out of range.
 */
static bool pldma_engine_realize(PldmaState *s, DeviceState *dev,
                                 const PldmaBusOps *bus, Error **errp)
{
    s->dev = dev;
    s->bus = bus;
    if (s->nctx < 1 || s->nctx > PLDMA_MAX_CONTEXTS) {
        error_setg(errp, "exanest-pldma: contexts must be 1..%d",
                   PLDMA_MAX_CONTEXTS);
        return false;
    }
    if (s->nchan < 1 || s->nchan > PLDMA_MAX_CHANNELS) {
        error_setg(errp, "exanest-pldma: channels must be 1..%d",
                   PLDMA_MAX_CHANNELS);
        return false;
    }
    if (s->max_len < 1 || s->max_len > 1u << 31) {
        error_setg(errp, "exanest-pldma: max-len must be 1..2^31");
        return false;
    }
    if (s->net.node >= PLDMA_NET_MAX_NODES) {
        error_setg(errp, "exanest-pldma: node-id must be 0..%d",
                   PLDMA_NET_MAX_NODES - 1);
        return false;
    }
    if (!s->net.window) {
        error_setg(errp, "exanest-pldma: net-window must be at least 1");
        return false;
    }
    memory_region_init_io(&s->mmio, OBJECT(dev), &pldma_mmio_ops, s,
                          "exanest-pldma-mmio", PLDMA_MMIO_SIZE);
    return true;
}

/* After the front-end's own set-up: the contexts and the port. */
static void pldma_engine_start(PldmaState *s)
{
    s->ctx = g_new0(PldmaContext, s->nctx);
    for (unsigned i = 0; i < s->nctx; i++) {
        PldmaContext *x = &s->ctx[i];

        x->dev = s;
        x->index = i;
        x->q.ctx = x;
        x->kq.ctx = x;
        x->kq.kernel = true;
        for (unsigned n = 0; n < s->nchan; n++) {
            PldmaChannel *c = &x->ch[n];

            c->ctx = x;
            c->index = n;
            c->latency = timer_new_ns(QEMU_CLOCK_VIRTUAL, pldma_latency_done,
                                      c);
            pldma_net_channel_init(c);
        }
    }
    s->arbiter = timer_new_ns(QEMU_CLOCK_VIRTUAL, pldma_arbiter, s);
    s->bounce = g_malloc(PLDMA_STEP);
    pldma_net_realize(s);
    pldma_reset_all(s);
}

static void pldma_engine_exit(PldmaState *s)
{
    for (unsigned i = 0; i < s->nctx; i++) {
        for (unsigned n = 0; n < s->nchan; n++) {
            timer_free(s->ctx[i].ch[n].latency);
            pldma_net_channel_exit(&s->ctx[i].ch[n]);
        }
    }
    timer_free(s->arbiter);
    pldma_net_exit(s);
    g_free(s->ctx);
    g_free(s->bounce);
}

/* The PCIe front-end */

/*
 * Context x's DMA goes out as VF x, if it may: enabled (so NumVFs > x and
 * VF Enable is set in the PF's SR-IOV capability) and with bus mastering on
 * in its own command register.
 */
static AddressSpace *pldma_pci_ctx_as(PldmaState *s, unsigned ctx)
{
    PCIDevice *vf = pcie_sriov_get_vf_at_index(PCI_DEVICE(s->dev), ctx);

    if (!vf || !(pci_get_word(vf->config + PCI_COMMAND) & PCI_COMMAND_MASTER)) {
        return NULL;
    }
    return pci_get_address_space(vf);
}

/* The engine's own DMA goes out as the PF, if it is a bus master. */
static AddressSpace *pldma_pci_own_as(PldmaState *s)
{
    PCIDevice *pf = PCI_DEVICE(s->dev);

    if (!(pci_get_word(pf->config + PCI_COMMAND) & PCI_COMMAND_MASTER)) {
        return NULL;
    }
    return pci_get_address_space(pf);
}

static void pldma_pci_set_irq(PldmaState *s, bool level)
{
    pci_set_irq(PCI_DEVICE(s->dev), level);
}

static const PldmaBusOps pldma_pci_bus = {
    .ctx_as = pldma_pci_ctx_as,
    .own_as = pldma_pci_own_as,
    .set_irq = pldma_pci_set_irq,
    .sriov = true,
};

static void pldma_realize(PCIDevice *pdev, Error **errp)
{
    PldmaState *s = &EXANEST_PLDMA(pdev)->e;

    if (!pldma_engine_realize(s, DEVICE(pdev), &pldma_pci_bus, errp)) {
        return;
    }
    pci_config_set_interrupt_pin(pdev->config, 1); /* INTA# */
    pci_register_bar(pdev, 0, PCI_BASE_ADDRESS_SPACE_MEMORY, &s->mmio);

    if (pcie_endpoint_cap_init(pdev, PLDMA_PCIE_CAP_OFFSET) < 0) {
        error_setg(errp, "exanest-pldma: cannot add the PCIe capability");
        return;
    }
    /* ARI: VFs are functions 1..contexts of the PF's bus. */
    pcie_ari_init(pdev, PLDMA_ARI_CAP_OFFSET);
    /*
     * One VF per context, all created (disabled) now. The PCI core does
     * the rest of the PF's SR-IOV duties: pci_default_write_config() calls
     * pcie_sriov_config_write() (VF Enable, NumVFs) and a device reset calls
     * pcie_sriov_pf_reset(); pldma_exit() calls pcie_sriov_pf_exit().
     */
    if (!pcie_sriov_pf_init(pdev, PLDMA_SRIOV_CAP_OFFSET,
                            TYPE_EXANEST_PLDMA_VF, PLDMA_PCI_VF_DEVICE_ID,
                            s->nctx, s->nctx, PLDMA_VF_OFFSET,
                            PLDMA_VF_STRIDE, errp)) {
        pcie_cap_exit(pdev);
        return;
    }
    pcie_sriov_pf_init_vf_bar(pdev, 0, PCI_BASE_ADDRESS_SPACE_MEMORY,
                              PLDMA_VF_MMIO_SIZE);
    pldma_engine_start(s);
}

static void pldma_exit(PCIDevice *pdev)
{
    pldma_engine_exit(&EXANEST_PLDMA(pdev)->e);
    pcie_sriov_pf_exit(pdev);
    pcie_cap_exit(pdev);
}

static void pldma_qdev_reset(DeviceState *dev)
{
    pldma_reset_all(&EXANEST_PLDMA(dev)->e);
}

/*
 * The engine's properties, with offsets in PldmaState: each front-end takes
 * them shifted to where its PldmaState is (pldma_class_set_props()).
 */
static const Property pldma_engine_properties[] = {
    DEFINE_PROP_UINT32("contexts", PldmaState, nctx, 16),
    DEFINE_PROP_UINT32("channels", PldmaState, nchan, 4),
    DEFINE_PROP_UINT32("bandwidth", PldmaState, bandwidth_mbs, 2000),
    DEFINE_PROP_UINT32("latency-ns", PldmaState, latency_ns, 2000),
    DEFINE_PROP_UINT32("max-len", PldmaState, max_len, 1u << 30),
    /* 2.3: the network port */
    DEFINE_NIC_PROPERTIES(PldmaState, net.conf),
    DEFINE_PROP_UINT32("node-id", PldmaState, net.node, 0),
    DEFINE_PROP_UINT32("net-window", PldmaState, net.window, 64 * KiB),
    DEFINE_PROP_UINT32("link-latency-ns", PldmaState, net.link_latency_ns,
                       1000),
    DEFINE_PROP_UINT32("link-bandwidth", PldmaState, net.link_bw_mbs, 0),
    DEFINE_PROP_UINT64("net-seed", PldmaState, net.seed, 0),
    /* 2.7: the fabric's last hop to this port (0: not modelled) */
    DEFINE_PROP_UINT32("rx-queue", PldmaState, net.rx_queue, 0),
    DEFINE_PROP_UINT32("ecn-threshold", PldmaState, net.ecn_threshold, 0),
    /* 2.7: the fabric's round trip with no queue, ns (0: the link's) */
    DEFINE_PROP_UINT32("net-rtt-ns", PldmaState, net.rtt_ns, 0),
    /* ACK one in this many packets placed in order (1: every one) */
    DEFINE_PROP_UINT32("ack-every", PldmaState, net.ack_every, 2),
    /* Check a WRITE's translations this many bytes ahead of its data */
    DEFINE_PROP_UINT32("rx-lookahead", PldmaState, net.rx_lookahead, 64 * KiB),
};

/*
 * Give front-end class @dc the engine's properties, its PldmaState at
 * offset @e_off, then its own @extra. The array lives as long as the class.
 */
static void pldma_class_set_props(DeviceClass *dc, size_t e_off,
                                  const Property *extra, size_t n_extra)
{
    size_t n = ARRAY_SIZE(pldma_engine_properties);
    Property *p = g_new(Property, n + n_extra);

    for (size_t i = 0; i < n; i++) {
        p[i] = pldma_engine_properties[i];
        p[i].offset += e_off;
    }
    for (size_t i = 0; i < n_extra; i++) {
        p[n + i] = extra[i];
    }
    device_class_set_props_n(dc, p, n + n_extra);
}

/*
 * Not migratable, on purpose. Nothing in this project migrates or snapshots
 * a VM: each guest boots from an initramfs for one test or evaluation run.
 * Migration state for transfers in flight (the latency timers, the arbiter
 * and the shared data path's clock, the latched registers, a fault waiting
 * to be raised, the queues' indices and their transfers in flight) would be
 * code that no test exercises, so the device blocks migration and savevm
 * instead: a migration attempt fails cleanly rather than losing or
 * corrupting a transfer. The VFs hold no state of their own (a context's
 * queue is the PF's).
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
    pldma_class_set_props(dc, offsetof(PldmaPciState, e), NULL, 0);
}

/*
 * A context's virtual function: its page (identification and the queue's
 * doorbells, the one page user space maps), no interrupt.
 */

/*
 * A context's page (the one page user space maps): a VF's BAR on PCIe, a
 * page of the second register window on the platform.
 */
static uint64_t pldma_ctx_page_read(void *opaque, hwaddr addr, unsigned size)
{
    PldmaContext *x = opaque;
    unsigned ctx = x->index;
    uint64_t val = 0;
    uint32_t v = 0;

    switch (addr) {
    case A_VF_ID:
        val = PLDMA_VF_ID_MAGIC;
        break;
    case A_VF_VERSION:
        v = FIELD_DP32(v, VERSION, MAJOR, PLDMA_VERSION_MAJOR);
        val = FIELD_DP32(v, VERSION, MINOR, PLDMA_VERSION_MINOR);
        break;
    case A_VF_CONTEXT:
        val = ctx;
        break;
    case A_VF_SQ_TAIL:
        val = x->q.sq_tail;
        break;
    case A_VF_SQ_HEAD:
        val = x->q.sq_head;
        break;
    case A_VF_CQ_HEAD:
        val = x->q.cq_head;
        break;
    case A_VF_CQ_TAIL:
        val = x->q.cq_tail;
        break;
    case A_VF_CQ_ARM:
        break; /* write-only */
    case A_VF_MBOX_HEAD:
        val = x->mbox_head;
        break;
    case A_VF_MBOX_TAIL:
        val = x->mbox_tail;
        break;
    case A_VF_MBOX_ARM:
        break; /* write-only */
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma-vf: ctx%u: read of unknown offset 0x%"
                      HWADDR_PRIx "\n", ctx, addr);
        break;
    }
    trace_exanest_pldma_vf_read(ctx, addr, val);
    return val;
}

/*
 * The doorbells. Ignored (and logged) while the queue is disabled: enabling
 * it sets every index to 0, or to what the PF restored. Values software
 * should not write (an SQ_TAIL more than the ring ahead of SQ_HEAD, a CQ_HEAD
 * past CQ_TAIL) are logged and taken as they are: they can only disturb the
 * context's own queue.
 */
static void pldma_ctx_page_write(void *opaque, hwaddr addr, uint64_t val,
                                 unsigned size)
{
    PldmaContext *x = opaque;
    PldmaQueue *q = &x->q;
    uint32_t v = val;

    trace_exanest_pldma_vf_write(x->index, addr, val);
    if (addr == A_VF_MBOX_HEAD) {
        pldma_mbox_head(x, v);
        return;
    }
    if (addr == A_VF_MBOX_ARM) {
        pldma_mbox_arm(x, v);
        return;
    }
    switch (addr) {
    case A_VF_SQ_TAIL:
    case A_VF_CQ_HEAD:
    case A_VF_CQ_ARM:
        if (!q->enabled) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma-vf: ctx%u: write 0x%x to offset 0x%"
                          HWADDR_PRIx " ignored: the queue is disabled\n",
                          x->index, v, addr);
            return;
        }
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma-vf: ctx%u: write 0x%" PRIx64 " to "
                      "read-only or unknown offset 0x%" HWADDR_PRIx "\n",
                      x->index, val, addr);
        return;
    }

    switch (addr) {
    case A_VF_SQ_TAIL:
        if (!q->err && v - q->sq_head > q->sq_n) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma-vf: ctx%u: SQ_TAIL %u is more than "
                          "%u entries ahead of SQ_HEAD %u\n",
                          x->index, v, q->sq_n, q->sq_head);
        }
        q->sq_tail = v;
        pldma_q_pump(q);
        break;
    case A_VF_CQ_HEAD:
        if (v - q->cq_head > q->cq_tail - q->cq_head) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma-vf: ctx%u: CQ_HEAD %u is not "
                          "between CQ_HEAD %u and CQ_TAIL %u\n",
                          x->index, v, q->cq_head, q->cq_tail);
        }
        q->cq_head = v;
        pldma_q_event(q);
        pldma_q_pump(q);
        break;
    case A_VF_CQ_ARM:
        if (v & ~R_VF_CQ_ARM_ONCE_MASK) {
            qemu_log_mask(LOG_GUEST_ERROR,
                          "exanest-pldma-vf: ctx%u: unknown CQ_ARM bits 0x%x "
                          "ignored\n", x->index, v & ~R_VF_CQ_ARM_ONCE_MASK);
        }
        if (FIELD_EX32(v, VF_CQ_ARM, ONCE)) {
            q->armed = true;
            pldma_q_event(q);
        }
        break;
    }
}

static const MemoryRegionOps pldma_ctx_page_ops = {
    .read = pldma_ctx_page_read,
    .write = pldma_ctx_page_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
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

/* The context whose page VF @vf is: context n is VF n. */
static PldmaContext *pldma_vf_ctx(PCIDevice *vf)
{
    PldmaState *s = &EXANEST_PLDMA(pcie_sriov_get_pf(vf))->e;

    return &s->ctx[pcie_sriov_vf_number(vf)];
}

/* A VF's page: its context is resolved at each access (VFs come and go) */
static uint64_t pldma_vf_read(void *opaque, hwaddr addr, unsigned size)
{
    return pldma_ctx_page_read(pldma_vf_ctx(PCI_DEVICE(opaque)), addr, size);
}

static void pldma_vf_write(void *opaque, hwaddr addr, uint64_t val,
                           unsigned size)
{
    pldma_ctx_page_write(pldma_vf_ctx(PCI_DEVICE(opaque)), addr, val, size);
}

static const MemoryRegionOps pldma_vf_mmio_ops = {
    .read = pldma_vf_read,
    .write = pldma_vf_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
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

static void pldma_vf_realize(PCIDevice *dev, Error **errp)
{
    PldmaVfState *v = EXANEST_PLDMA_VF(dev);

    if (pcie_endpoint_cap_init(dev, PLDMA_PCIE_CAP_OFFSET) < 0) {
        error_setg(errp, "exanest-pldma-vf: cannot add the PCIe capability");
        return;
    }
    pcie_ari_init(dev, PLDMA_ARI_CAP_OFFSET);
    memory_region_init_io(&v->mmio, OBJECT(dev), &pldma_vf_mmio_ops, v,
                          "exanest-pldma-vf-mmio", PLDMA_VF_MMIO_SIZE);
    pcie_sriov_vf_register_bar(dev, 0, &v->mmio);
}

static void pldma_vf_exit(PCIDevice *dev)
{
    pcie_cap_exit(dev);
}

static void pldma_vf_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = pldma_vf_realize;
    k->exit = pldma_vf_exit;
    k->vendor_id = PLDMA_PCI_VENDOR_ID;
    k->device_id = PLDMA_PCI_VF_DEVICE_ID;
    k->revision = PLDMA_VERSION_MAJOR;
    k->class_id = PCI_CLASS_SYSTEM_OTHER;
    dc->desc = "ExaNeSt PLDMA engine context (SR-IOV virtual function)";
    /* Created by its PF, one per context, like igbvf. */
    dc->user_creatable = false;
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

/*
 * The platform front-end: the engine in the programmable logic of a Zynq
 * UltraScale+, its DMA through an MMU-500 (Documentation/qfdb.rst). It
 * drives a distinct AXI ID per context, so each context's DMA carries its
 * own StreamID: the engine's own (kernel queues, fault records) is
 * stream-id, context n's stream-id + 1 + n. Without an MMU-500 it addresses
 * memory directly. Register window 0 is the PF's BAR0, window 1 the
 * contexts' pages (a VF's BAR each), one interrupt.
 */
static AddressSpace *pldma_plat_ctx_as(PldmaState *s, unsigned ctx)
{
    return EXANEST_PLDMA_PLATFORM(s->dev)->ctx_as[ctx];
}

static AddressSpace *pldma_plat_own_as(PldmaState *s)
{
    return EXANEST_PLDMA_PLATFORM(s->dev)->own_as;
}

static void pldma_plat_set_irq(PldmaState *s, bool level)
{
    qemu_set_irq(EXANEST_PLDMA_PLATFORM(s->dev)->irq, level);
}

static const PldmaBusOps pldma_plat_bus = {
    .ctx_as = pldma_plat_ctx_as,
    .own_as = pldma_plat_own_as,
    .set_irq = pldma_plat_set_irq,
};

static AddressSpace *pldma_plat_stream(PldmaPlatState *p, uint32_t sid)
{
    return p->iommu ? arm_mmu500_stream_as(p->iommu, sid) :
                      &address_space_memory;
}

static void pldma_plat_realize(DeviceState *dev, Error **errp)
{
    PldmaPlatState *p = EXANEST_PLDMA_PLATFORM(dev);
    SysBusDevice *sbd = SYS_BUS_DEVICE(dev);
    PldmaState *s = &p->e;

    if (!pldma_engine_realize(s, dev, &pldma_plat_bus, errp)) {
        return;
    }
    if (p->stream_id + 1 + s->nctx > 1u << MMU500_SID_BITS) {
        error_setg(errp, "exanest-pldma-platform: stream-id 0x%x leaves no "
                   "StreamID for context %u", p->stream_id, s->nctx - 1);
        return;
    }
    sysbus_init_mmio(sbd, &s->mmio);
    memory_region_init(&p->ctx_mmio, OBJECT(dev), "exanest-pldma-ctx-pages",
                       (uint64_t)s->nctx * PLDMA_VF_MMIO_SIZE);
    sysbus_init_mmio(sbd, &p->ctx_mmio);
    sysbus_init_irq(sbd, &p->irq);
    p->own_as = pldma_plat_stream(p, p->stream_id);
    p->ctx_as = g_new(AddressSpace *, s->nctx);
    for (unsigned i = 0; i < s->nctx; i++) {
        p->ctx_as[i] = pldma_plat_stream(p, p->stream_id + 1 + i);
    }
    pldma_engine_start(s);
    p->ctx_page = g_new0(MemoryRegion, s->nctx);
    for (unsigned i = 0; i < s->nctx; i++) {
        g_autofree char *name = g_strdup_printf("exanest-pldma-ctx%u", i);

        memory_region_init_io(&p->ctx_page[i], OBJECT(dev),
                              &pldma_ctx_page_ops, &s->ctx[i], name,
                              PLDMA_VF_MMIO_SIZE);
        memory_region_add_subregion(&p->ctx_mmio,
                                    (uint64_t)i * PLDMA_VF_MMIO_SIZE,
                                    &p->ctx_page[i]);
    }
}

static void pldma_plat_unrealize(DeviceState *dev)
{
    PldmaPlatState *p = EXANEST_PLDMA_PLATFORM(dev);

    pldma_engine_exit(&p->e);
    g_free(p->ctx_as);
    g_free(p->ctx_page);
}

static void pldma_plat_reset(DeviceState *dev)
{
    pldma_reset_all(&EXANEST_PLDMA_PLATFORM(dev)->e);
}

void exanest_pldma_fdt_node(SysBusDevice *sbd, void *fdt, const char *parent,
                            const uint64_t *mmio, uint32_t spi)
{
    PldmaPlatState *p = EXANEST_PLDMA_PLATFORM(sbd);
    g_autofree char *node = g_strdup_printf("%s/dma@%" PRIx64, parent,
                                            mmio[0]);
    const char names[] = "engine\0contexts";
    uint32_t phandle = p->iommu ? arm_mmu500_phandle(p->iommu, fdt) : 0;

    qemu_fdt_add_subnode(fdt, node);
    qemu_fdt_setprop_string(fdt, node, "compatible", "exanest,pldma-1.0");
    qemu_fdt_setprop_cells(fdt, node, "reg", mmio[0], PLDMA_MMIO_SIZE,
                           mmio[1], p->e.nctx * PLDMA_VF_MMIO_SIZE);
    qemu_fdt_setprop(fdt, node, "reg-names", names, sizeof(names));
    /* GIC_SPI, level-triggered, active high */
    qemu_fdt_setprop_cells(fdt, node, "interrupts", 0, spi, 4);
    qemu_fdt_setprop(fdt, node, "dma-coherent", NULL, 0);
    if (phandle) {
        qemu_fdt_setprop_cells(fdt, node, "iommus", phandle, p->stream_id);
    }
    qemu_fdt_setprop_cell(fdt, node, "#address-cells", 1);
    qemu_fdt_setprop_cell(fdt, node, "#size-cells", 0);
    for (unsigned i = 0; i < p->e.nctx; i++) {
        g_autofree char *child = g_strdup_printf("%s/context@%x", node, i);

        qemu_fdt_add_subnode(fdt, child);
        qemu_fdt_setprop_string(fdt, child, "compatible",
                                "exanest,pldma-1.0-context");
        qemu_fdt_setprop_cell(fdt, child, "reg", i);
        qemu_fdt_setprop(fdt, child, "dma-coherent", NULL, 0);
        if (phandle) {
            qemu_fdt_setprop_cells(fdt, child, "iommus", phandle,
                                   p->stream_id + 1 + i);
        }
    }
}

static const Property pldma_plat_properties[] = {
    DEFINE_PROP_LINK("iommu", PldmaPlatState, iommu, TYPE_ARM_MMU500,
                     ArmMmu500State *),
    DEFINE_PROP_UINT32("stream-id", PldmaPlatState, stream_id, 0x200),
};

static void pldma_plat_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);

    dc->realize = pldma_plat_realize;
    dc->unrealize = pldma_plat_unrealize;
    dc->desc = "ExaNeSt PLDMA engine in PL address space "
               "(virtual-address DMA through an MMU-500)";
    dc->vmsd = &vmstate_pldma;
    dc->user_creatable = true;
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
    device_class_set_legacy_reset(dc, pldma_plat_reset);
    pldma_class_set_props(dc, offsetof(PldmaPlatState, e),
                          pldma_plat_properties,
                          ARRAY_SIZE(pldma_plat_properties));
}

static const TypeInfo pldma_types[] = {
    {
        .name = TYPE_EXANEST_PLDMA,
        .parent = TYPE_PCI_DEVICE,
        .instance_size = sizeof(PldmaPciState),
        .class_init = pldma_class_init,
        .interfaces = (InterfaceInfo[]) {
            { INTERFACE_PCIE_DEVICE },
            { },
        },
    },
    {
        .name = TYPE_EXANEST_PLDMA_PLATFORM,
        .parent = TYPE_SYS_BUS_DEVICE,
        .instance_size = sizeof(PldmaPlatState),
        .class_init = pldma_plat_class_init,
    },
    {
        .name = TYPE_EXANEST_PLDMA_VF,
        .parent = TYPE_PCI_DEVICE,
        .instance_size = sizeof(PldmaVfState),
        .class_init = pldma_vf_class_init,
        .interfaces = (InterfaceInfo[]) {
            { INTERFACE_PCIE_DEVICE },
            { },
        },
    },
};

DEFINE_TYPES(pldma_types)
