/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * libexanest_dma: C interface of the ExaNeSt DMA user library (rust/exanest-dma).
 * Build against it with `pkg-config --static --cflags --libs exanest-dma` (a static library);
 * Documentation/user-programs.rst shows how to build a program for the guest and run it there.
 *
 * Errors: every int function returns 0 or a negative errno. It is the errno the driver
 * returned, unchanged (Documentation/abi.rst lists which one means what for each call), or
 * -EINVAL for a NULL pointer or an argument the library refuses itself. Out parameters are
 * always written when not NULL, with 0 (NULL for a handle) on failure, so a failed call never
 * leaves a stale value behind.
 *
 * The structs and constants come from the kernel ABI header.
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

/* Open /dev/exanest-dma<index>; *out gets the handle. -ENOENT: no such device; -EBUSY: another
 * process has it open. */
int exanest_dma_open(unsigned int index, struct exanest_dma **out);
/* The same for a device node given by path. */
int exanest_dma_open_path(const char *path, struct exanest_dma **out);
/* Close a handle: its regions are dropped and its pending copies end. NULL is ignored. */
void exanest_dma_close(struct exanest_dma *dev);
/* The device's file descriptor (>= 0), for poll(): POLLIN while a finished copy waits to be
 * collected with exanest_dma_wait(), POLLHUP once the device is gone. The handle keeps owning
 * it: do not close it. -EINVAL for NULL. */
int exanest_dma_fd(const struct exanest_dma *dev);
int exanest_dma_info(const struct exanest_dma *dev, struct exanest_dma_info *info);
/* Register [addr, addr + len): access is EXANEST_DMA_ACCESS_*, mode EXANEST_DMA_MODE_*;
 * *handle names the region. */
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
/*
 * Wait for a copy: timeout_ns < 0 forever, 0 just looks. The return value is the wait's, the
 * copy's result is in *status:
 *   0          the wait collected the copy: *status is 0 if it succeeded, else the copy's
 *              negative errno (-EFAULT, -EACCES, -ECANCELED, -ENODEV, -EIO); *bytes is what
 *              it copied;
 *   -ETIMEDOUT, -EINTR   the copy is still running: wait again;
 *   -ENOENT    no such copy (unknown or already collected cookie).
 * On a failed wait *status and *bytes are 0. status must not be NULL; bytes may be.
 */
int exanest_dma_wait(const struct exanest_dma *dev, uint64_t cookie, int64_t timeout_ns,
		     int32_t *status, uint64_t *bytes);
int exanest_dma_counters(const struct exanest_dma *dev, struct exanest_dma_counters *out);
/*
 * The translation budget, in pages the on-demand mirror may keep mapped: set it to pages (0 keeps
 * it) and read it back in *out, with the pages evicted so far, the evictions and the pages
 * mapped now. -E2BIG above the module's max_budget_pages; *out is zero on failure.
 */
int exanest_dma_budget(const struct exanest_dma *dev, uint64_t pages,
		       struct exanest_dma_budget *out);

#ifdef __cplusplus
}
#endif

#endif /* EXANEST_DMA_H */
