/*
 * Arm CoreLink MMU-500 (SMMUv2) model: the IOMMU in front of the
 * programmable logic of a Zynq UltraScale+ (Documentation/qfdb.rst).
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_ARM_MMU500_H
#define HW_ARM_MMU500_H

#include "hw/sysbus.h"
#include "exec/memory.h"
#include "qom/object.h"

#define TYPE_ARM_MMU500 "arm-mmu500"
OBJECT_DECLARE_SIMPLE_TYPE(ArmMmu500State, ARM_MMU500)
#define TYPE_ARM_MMU500_IOMMU_MEMORY_REGION "arm-mmu500-iommu-memory-region"

/* Geometry: 4 KiB register pages, 16 of global space, 16 of context banks */
#define MMU500_PAGE             0x1000
#define MMU500_NUMPAGENDXB      3
#define MMU500_CB_BASE          (MMU500_PAGE << (MMU500_NUMPAGENDXB + 1))
#define MMU500_MMIO_SIZE        (2 * MMU500_CB_BASE)
#define MMU500_MAX_CB           16   /* fits the context bank half */
#define MMU500_MAX_SMR          128
#define MMU500_SID_BITS         15

typedef struct ArmMmu500Cb {
    /* Global register space 1 */
    uint32_t cbar, cba2r, cbfrsynra;
    /* The bank's page */
    uint32_t sctlr, actlr, tcr, tcr2, contextidr, mair[2];
    uint64_t ttbr[2], par, far;
    uint32_t fsr, fsynr[2];
} ArmMmu500Cb;

/* One StreamID's view of memory: what its master's DMA goes through */
typedef struct ArmMmu500Stream {
    IOMMUMemoryRegion iommu;
    AddressSpace as;
    struct ArmMmu500State *s;
    uint16_t sid;
} ArmMmu500Stream;

struct ArmMmu500State {
    SysBusDevice parent_obj;
    MemoryRegion mmio;
    qemu_irq global_irq;
    qemu_irq context_irq[MMU500_MAX_CB];
    /* Properties */
    uint32_t num_cb, num_smr;
    /* Global register space 0 */
    uint32_t scr0, sacr;
    uint32_t gfsr, gfsynr[3];
    uint64_t gfar;
    uint32_t smr[MMU500_MAX_SMR], s2cr[MMU500_MAX_SMR];
    ArmMmu500Cb cb[MMU500_MAX_CB];
    /* The TLB: ArmMmu500TlbKey -> SMMUTLBEntry */
    GHashTable *tlb;
    /* StreamID -> ArmMmu500Stream, made on a master's first request */
    GHashTable *streams;
    uint32_t phandle;       /* of its devicetree node, 0 until made */
    bool cfcfg_logged;
};

/*
 * The address space that DMA with StreamID @sid goes through. A master
 * (a sysbus device with a link to the MMU-500) asks for one per StreamID
 * it issues, when it is realized.
 */
AddressSpace *arm_mmu500_stream_as(ArmMmu500State *s, uint16_t sid);

/*
 * Its devicetree node (compatible "arm,mmu-500", Linux's arm-smmu.c), under
 * @parent at @base, its interrupts the SPIs @spi[0] (global) and @spi[1..]
 * (one per context bank). Returns its phandle.
 */
uint32_t arm_mmu500_fdt_node(ArmMmu500State *s, void *fdt, const char *parent,
                             uint64_t base, const uint32_t *spi,
                             unsigned nspi);

/* The phandle of its devicetree node, for a master's "iommus" */
uint32_t arm_mmu500_phandle(ArmMmu500State *s, void *fdt);

#endif
