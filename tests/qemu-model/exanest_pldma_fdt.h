/*
 * ExaNeSt PLDMA engine model, platform front-end: its devicetree node, for
 * the platform bus of QEMU's virt board (hw/core/sysbus-fdt.c).
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef HW_MISC_EXANEST_PLDMA_FDT_H
#define HW_MISC_EXANEST_PLDMA_FDT_H

#include "hw/sysbus.h"

#define TYPE_EXANEST_PLDMA_PLATFORM "exanest-pldma-platform"

/*
 * The engine's node (binding exanest,pldma.yaml) under @parent: its
 * register windows at @mmio[0] (the engine) and @mmio[1] (the contexts'
 * pages), its interrupt SPI @spi, and a child node per context with the
 * context's StreamID in "iommus" when it is behind an MMU-500.
 */
void exanest_pldma_fdt_node(SysBusDevice *sbd, void *fdt, const char *parent,
                            const uint64_t *mmio, uint32_t spi);

#endif
