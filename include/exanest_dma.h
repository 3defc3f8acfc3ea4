/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * libexanest_dma: C interface of the ExaNeSt DMA user library (rust/exanest-dma).
 * Link with `pkg-config --libs exanest-dma` (a static library).
 *
 * Every function returns 0 or a negative errno; Documentation/abi.rst lists which errno means
 * what. The structs and constants come from the kernel ABI header.
 */
#ifndef EXANEST_DMA_H
#define EXANEST_DMA_H

#include <stddef.h>
#include <stdint.h>
#include <linux/exanest_dma.h>

#ifdef __cplusplus
extern "C" {
#endif

struct exanest_dma;

/* Open /dev/exanest-dma<index>; *out gets the handle. */
int exanest_dma_open(unsigned int index, struct exanest_dma **out);
/* Close a handle: its regions are dropped and its pending copies end. NULL is ignored. */
void exanest_dma_close(struct exanest_dma *dev);
int exanest_dma_info(const struct exanest_dma *dev, struct exanest_dma_info *info);
/* Register [addr, addr + len): access is EXANEST_DMA_ACCESS_*, mode EXANEST_DMA_MODE_*. */
int exanest_dma_reg(const struct exanest_dma *dev, const void *addr, size_t len, uint32_t access,
		    uint32_t mode, uint32_t *handle);
/* The same with a touch-ahead window: pages resolved past a faulting one (on-demand mode). */
int exanest_dma_reg_window(const struct exanest_dma *dev, const void *addr, size_t len,
			   uint32_t access, uint32_t mode, uint32_t window, uint32_t *handle);
/* Map [addr, addr + len) of a prefault or on-demand region now; flags: EXANEST_DMA_ADVISE_*. */
int exanest_dma_advise(const struct exanest_dma *dev, const void *addr, size_t len,
		       uint32_t flags);
int exanest_dma_dereg(const struct exanest_dma *dev, uint32_t handle);
/* Start a copy between registered ranges; *cookie names it. */
int exanest_dma_copy(const struct exanest_dma *dev, const void *src, void *dst, size_t len,
		     uint64_t *cookie);
/* Wait (timeout_ns < 0: forever): 0 if the copy succeeded, else its or the wait's -errno. */
int exanest_dma_wait(const struct exanest_dma *dev, uint64_t cookie, int64_t timeout_ns,
		     uint64_t *bytes);
int exanest_dma_counters(const struct exanest_dma *dev, struct exanest_dma_counters *out);

#ifdef __cplusplus
}
#endif

#endif /* EXANEST_DMA_H */
