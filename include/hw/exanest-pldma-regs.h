/* SPDX-License-Identifier: (GPL-2.0-only OR MIT) */
/*
 * ExaNeSt PLDMA register map, version 2.0.
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
 * both. VF BAR0: 4 KiB, the context's identification (the page its doorbell
 * registers will join).
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

#define PLDMA_ID_MAGIC          0x45584e53u     /* "EXNS" */
#define PLDMA_VERSION_MAJOR     2
#define PLDMA_VERSION_MINOR     0
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
#define PLDMA_CAPS_NCTX_SHIFT   16
#define PLDMA_CAPS_NCTX_MASK    0x00ff0000u     /* number of contexts */

/* Context blocks: context c at PLDMA_CTX_BASE + c * PLDMA_CTX_STRIDE */
#define PLDMA_CTX_BASE          0x1000
#define PLDMA_CTX_STRIDE        0x400
#define PLDMA_MAX_CONTEXTS      64

/* Context registers, relative to the context's block */
/* RW1C: bit n = channel n of this context raised its interrupt */
#define PLDMA_CTX_IRQ_STATUS    0x000
/* WO: commands (write-one strobes) */
#define PLDMA_CTX_CTRL          0x004
#define PLDMA_CTX_STATUS        0x008   /* RO */

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

/* CTRL: strobes (read back as 0); exactly one strobe per write, or none */
#define PLDMA_CTRL_START        (1u << 0)       /* IDLE/DONE/ERROR -> BUSY */
/* FAULT -> BUSY, retry from DONE_BYTES */
#define PLDMA_CTRL_RESUME       (1u << 1)
/* BUSY/FAULT -> ERROR(ABORTED); elsewhere a no-op */
#define PLDMA_CTRL_NACK         (1u << 2)
#define PLDMA_CTRL_STROBES      0x7u
/* level: raise IRQ_STATUS on DONE, FAULT, ERROR */
#define PLDMA_CTRL_IRQ_EN       (1u << 8)

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
/* last command was invalid in this state, ignored */
#define PLDMA_STATUS_REJECTED   (1u << 16)

/* FAULT_INFO */
/* 0: reading the source, 1: writing the destination */
#define PLDMA_FAULT_WRITE       (1u << 0)
#define PLDMA_FAULT_CAUSE_SHIFT 8
#define PLDMA_FAULT_CAUSE_MASK  0x0000ff00u
/* the IOMMU found no valid translation */
#define PLDMA_CAUSE_TRANSLATION 1
/* the access itself failed after translation */
#define PLDMA_CAUSE_BUS         2

/* VF BAR0: a context's page */
#define PLDMA_VF_ID             0x000   /* RO: PLDMA_VF_ID_MAGIC */
#define PLDMA_VF_VERSION        0x004   /* RO: as PLDMA_VERSION */
#define PLDMA_VF_CONTEXT        0x008   /* RO: the context's index */
#define PLDMA_VF_ID_MAGIC       0x45584e56u     /* "EXNV" */

#endif /* EXANEST_PLDMA_REGS_H */
