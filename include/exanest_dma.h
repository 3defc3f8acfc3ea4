/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * libexanest_dma: C interface of the ExaNeSt DMA user library (rust/exanest-dma).
 * Build against it with `pkg-config --static --cflags --libs exanest-dma` (a static library);
 * Documentation/user-programs.rst shows how to build a program for the guest and run it there.
 *
 * Errors: every int function returns 0 or a negative errno. It is the errno the driver
 * returned, unchanged (Documentation/abi.rst lists which one means what for each call),
 * -EINVAL for a NULL pointer (a NULL address included) or an argument the library refuses
 * itself, or -EBADF for a handle that was closed or destroyed: handles are never reused, so a
 * stale one never reaches another device or queue. Out parameters are always written when not
 * NULL, with 0 (NULL for a handle) on failure, so a failed call never leaves a stale value
 * behind. exanest_dma_strerror() says what any of these, or an engine status, means.
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

/* What err means: a negative (or positive) errno, or an engine status of a completion (-257
 * PLDMA_CQE_BAD_LEN to -265 PLDMA_CQE_TIMEOUT, Documentation/pldma-registers.rst), which
 * strerror() does not know. Never NULL. */
const char *exanest_dma_strerror(int err);

/* Open /dev/exanest-dma<index>; *out gets the handle. -ENOENT: no such device. Any number of
 * processes may open it: each gets an engine context when it needs one (Documentation/abi.rst,
 * "Contexts"). -EMFILE: 65535 handles are open in this process. */
int exanest_dma_open(unsigned int index, struct exanest_dma **out);
/* The same for a device node given by path. */
int exanest_dma_open_path(const char *path, struct exanest_dma **out);
/* Close a handle: its regions are dropped and its pending copies end, unless a queue created
 * on it is still alive (the queue keeps the device's file open: its regions and puts work
 * until it is destroyed too). NULL and a closed handle are ignored; any later call with the
 * handle gives -EBADF. */
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
 * The counters of the engine's network port, the same for every process on it: packets, NACKs
 * and RESUMEs sent and received, bytes sent again, timeouts, duplicates dropped...
 * -EOPNOTSUPP without a port; *out is zero on failure.
 */
int exanest_dma_net_counters(const struct exanest_dma *dev, struct exanest_dma_net_counters *out);
/*
 * The translation budget, in pages the on-demand mirror may keep mapped: set it to pages (0 keeps
 * it) and read it back in *out, with the pages evicted so far, the evictions and the pages
 * mapped now. -E2BIG above the module's max_budget_pages; *out is zero on failure.
 */
int exanest_dma_budget(const struct exanest_dma *dev, uint64_t pages,
		       struct exanest_dma_budget *out);

/*
 * The user-level queue (ABI 3): post copies and poll their completions with no system call.
 * A device file has one queue for its whole life (-EEXIST for a second one, even after
 * exanest_dma_queue_destroy()); the library allocates its rings and maps its doorbell page.
 * The queue keeps the device's file open, so it may outlive the struct exanest_dma handle.
 * Not for a forked child: the rings and the doorbell are not mapped there.
 *
 * Completions come in the order copies end, not the order they were posted: a completion
 * names its copy by the wr_id it was posted with. At most the queue's capacity (the smaller
 * ring's entries) of copies are outstanding, posted and not yet polled: beyond, posting fails
 * with -EAGAIN until exanest_dma_queue_poll() has collected some. The engine writes a copy's
 * destination until its completion has been polled: do not touch it before. Addresses must lie
 * in regions registered on the same device (any mode; on-demand faults are resolved by the
 * driver with no call from the program).
 */
struct exanest_dma_queue_h;

/* One ended copy. status: 0 when every byte was copied; otherwise a negative errno (-EFAULT:
 * an address in no registered region, -EACCES: a region without the access needed) or an engine
 * status, -257 (PLDMA_CQE_BAD_LEN) to -265 (PLDMA_CQE_TIMEOUT), see
 * Documentation/pldma-registers.rst; exanest_dma_strerror() says what either means. */
struct exanest_dma_completion {
	uint64_t wr_id;		/* the wr_id the copy was posted with */
	int32_t status;
	uint32_t bytes;		/* bytes copied */
	uint64_t fault_addr;	/* the address of the copy's last fault, 0 if none */
};

/* Create the device file's queue: 1 << sq_log2 descriptors, 1 << cq_log2 completions, each
 * log2 in 1..12 (-EINVAL otherwise); *out gets the handle. The driver's errors: -EEXIST (the
 * file has or had a queue), -EBUSY (no engine context free for a queue), -EOPNOTSUPP (engine
 * older than 2.1), -EPERM (not the process that opened the device), -ENODEV. */
int exanest_dma_queue_create(struct exanest_dma *dev, unsigned int sq_log2, unsigned int cq_log2,
			     struct exanest_dma_queue_h **out);
/* Wait for the queue's outstanding copies (unless it stopped on an error), then free it. NULL
 * and a destroyed handle are ignored; any later call with the handle gives -EBADF. */
void exanest_dma_queue_destroy(struct exanest_dma_queue_h *q);
/* Post a copy of len bytes from src to dst (one doorbell write). -EAGAIN: capacity copies are
 * outstanding, poll first; -EIO: the queue stopped (exanest_dma_queue_error()). */
int exanest_dma_queue_post(struct exanest_dma_queue_h *q, uint64_t src, uint64_t dst,
			   uint32_t len, uint64_t wr_id);
/* The same in two steps: push writes descriptors, ring publishes all of them with one doorbell
 * write. */
int exanest_dma_queue_push(struct exanest_dma_queue_h *q, uint64_t src, uint64_t dst,
			   uint32_t len, uint64_t wr_id);
int exanest_dma_queue_ring(struct exanest_dma_queue_h *q);
/* Collect up to n completions into out[]; returns how many (>= 0, 0 when none is ready). Never
 * blocks, makes no system call. */
int exanest_dma_queue_poll(struct exanest_dma_queue_h *q, struct exanest_dma_completion *out,
			   unsigned int n);
/* Sleep until a completion is ready to poll (timeout_ns < 0: no limit; 0: just look); rings
 * the doorbell first for pushed descriptors. -ETIMEDOUT, -EINTR; -EIO: the queue stopped;
 * -EINVAL: no copy is outstanding. */
int exanest_dma_queue_wait(struct exanest_dma_queue_h *q, int64_t timeout_ns);
/* Copies posted and not yet polled (>= 0). */
int exanest_dma_queue_outstanding(const struct exanest_dma_queue_h *q);
/* Capacity (most copies outstanding), engine context and channel mask; each pointer may be
 * NULL. */
int exanest_dma_queue_info(const struct exanest_dma_queue_h *q, uint32_t *capacity,
			   uint32_t *context, uint32_t *channels);
/* Why the queue stopped: *code 0 while it runs, else EXANEST_DMA_QERR_*; *addr the address the
 * error is about. Each pointer may be NULL. */
int exanest_dma_queue_error(const struct exanest_dma_queue_h *q, uint32_t *code, uint64_t *addr);
/* The upcall: event entries the kernel had the engine post in the CQ, read by
 * exanest_dma_queue_poll() since the last call, which resets them. EVICTED entries say the
 * translation budget (exanest_dma_budget()) unmapped pages of this process; they fault in again
 * when next used. *out is zeroed on failure. */
struct exanest_dma_queue_events {
	uint64_t evictions;		/* EVICTED entries */
	uint64_t evicted_pages;		/* pages they evicted */
	uint64_t last_evicted_addr;	/* first address of the last run evicted */
	uint64_t unknown;		/* entries of kinds this library does not know */
};
int exanest_dma_queue_events(struct exanest_dma_queue_h *q, struct exanest_dma_queue_events *out);

/*
 * Remote access (ABI 4). A buffer other nodes may write is described to them by a struct
 * exanest_dma_remote, which programs exchange by any means; a put names it.
 */
struct exanest_dma_remote {
	uint64_t addr;		/* the buffer's first byte, a virtual address of its process */
	uint64_t len;		/* bytes */
	uint64_t rkey;		/* its remote key */
	uint32_t node;		/* the receiving engine's node */
	uint32_t endpoint;	/* the receiving process's endpoint */
};

/* Register [addr, addr + len) for other nodes, with the rights they get in access
 * (EXANEST_DMA_ACCESS_REMOTE_WRITE: puts, EXANEST_DMA_ACCESS_REMOTE_READ: gets; -EINVAL without
 * either; each brings the local right it needs), in a mode (EXANEST_DMA_MODE_*); *target gets
 * what a writer needs. A put under a key without the write right, or a get under one without
 * the read right, completes with -ENOKEY, as one under a wrong key. -EOPNOTSUPP: no network
 * port; -ENOSPC: the key table is full. The rkey is revoked when the region is deregistered,
 * before its pages go. */
int exanest_dma_reg_remote(const struct exanest_dma *dev, void *addr, size_t len, uint32_t access,
			   uint32_t mode, uint32_t *handle, struct exanest_dma_remote *target);
/* exanest_dma_reg_remote, the key bound to node initiator (ABI 8): it works only in that node's
 * ops; from any other node, even one that learnt it, an op under it completes with -ENOKEY and
 * counts toward that node's quarantine. -EOPNOTSUPP: an engine older than register map 2.9;
 * -EINVAL: a node id of 64 or more. */
int exanest_dma_reg_remote_for(const struct exanest_dma *dev, void *addr, size_t len,
			       uint32_t access, uint32_t mode, uint32_t initiator, uint32_t *handle,
			       struct exanest_dma_remote *target);
/* Put len bytes from src (a readable region of this file) to byte offset of *to, with no system
 * call; the completion comes on the queue with wr_id, its status 0 or the receiver's refusal
 * (-ENOKEY, -ERANGE, -EPERM, -EFAULT, -EACCES) or PLDMA's TIMEOUT (-265). -EINVAL: the range is
 * not inside *to. */
int exanest_dma_queue_put(struct exanest_dma_queue_h *q, uint64_t src, uint32_t len,
			  const struct exanest_dma_remote *to, uint64_t offset, uint64_t wr_id);
/* Get len bytes from byte offset of *from into dst (a writable region of this file), with no
 * system call; do not touch [dst, dst + len) until its completion is polled. Errors as for a
 * put. */
int exanest_dma_queue_get(struct exanest_dma_queue_h *q, uint64_t dst, uint32_t len,
			  const struct exanest_dma_remote *from, uint64_t offset, uint64_t wr_id);

/*
 * The mailbox (ABI 5): messages of up to 256 bytes between processes on different nodes, in
 * order per sender. Give the queue's file a mailbox of 2^log2 slots (1..12): -EEXIST (one
 * already), -EOPNOTSUPP (no network port, or an engine older than 2.4).
 */
int exanest_dma_queue_mailbox(struct exanest_dma_queue_h *q, uint32_t log2);
/* Send len bytes (1..256) from src (a readable region of this file) to the mailbox of endpoint
 * at node, with no system call; the completion comes on the queue with wr_id: status 0 once the
 * receiving ring holds it, -ECONNREFUSED (no mailbox there), PLDMA's TIMEOUT (-265). */
int exanest_dma_queue_send(struct exanest_dma_queue_h *q, uint64_t src, uint32_t len,
			   uint32_t node, uint32_t endpoint, uint64_t wr_id);
/* Take the next message of the mailbox, with no system call: its length (its first cap bytes
 * copied to buf, the sender in *node and *endpoint when not NULL), 0 when none has come (or no
 * mailbox); -ENOMSG, taking nothing, when the next entry is a put's completion (recv_msg). */
int exanest_dma_queue_recv(struct exanest_dma_queue_h *q, void *buf, size_t cap, uint32_t *node,
			   uint32_t *endpoint);
/* Sleep until a message comes (timeout_ns < 0: no limit; 0: just look), then take it as
 * exanest_dma_queue_recv does: its length, -ETIMEDOUT, -EINTR, -EINVAL (no mailbox), -EOPNOTSUPP
 * (an engine older than register map 2.6), -ENOMSG (a put's completion). The file keeps no
 * engine context while it sleeps. poll() on exanest_dma_fd() is readable while a message
 * waits, too (ABI 7). */
int exanest_dma_queue_recv_wait(struct exanest_dma_queue_h *q, void *buf, size_t cap,
				uint32_t *node, uint32_t *endpoint, int64_t timeout_ns);

/*
 * Put with immediate data (register map 2.6; verbs' write with immediate, libfabric's
 * FI_REMOTE_CQ_DATA): as exanest_dma_queue_put, and once every byte is placed the receiving
 * process's mailbox gets a completion with imm, the put's address there and its length. The
 * put's completion here: -ECONNREFUSED when the receiver has no mailbox; a full ring makes the
 * put wait (RNR) like a message.
 */
int exanest_dma_queue_put_imm(struct exanest_dma_queue_h *q, uint64_t src, uint32_t len,
			      const struct exanest_dma_remote *to, uint64_t offset, uint32_t imm,
			      uint64_t wr_id);

/* What exanest_dma_queue_recv_msg took: a message, or a put's completion (flags). */
struct exanest_dma_message {
	uint32_t node;		/* the sending node */
	uint32_t endpoint;	/* the sending endpoint; 0xffffffff for a put's completion */
	uint32_t len;		/* the message's bytes (those copied: at most cap), or the put's */
	uint32_t flags;		/* EXANEST_DMA_MESSAGE_PUT_IMM, or 0 */
	uint32_t imm;		/* a put's immediate data */
	uint32_t reserved;
	uint64_t addr;		/* a put's first byte, in this process */
};

#define EXANEST_DMA_MESSAGE_PUT_IMM	1u

/* Take the next message or put completion (timeout_ns as for recv_wait; 0: just look): 1 with
 * *m filled (a message's first cap bytes in buf), 0 when nothing came with timeout_ns 0,
 * -ETIMEDOUT, -EINTR, -EINVAL (no mailbox, m NULL), -EOPNOTSUPP. */
int exanest_dma_queue_recv_msg(struct exanest_dma_queue_h *q, void *buf, size_t cap,
			       struct exanest_dma_message *m, int64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* EXANEST_DMA_H */
