/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR MIT */
/*
 * ExaNeSt DMA user ABI, version 7 (3 adds the user-level queue: QUEUE_CREATE, QUEUE_WAIT, mmap;
 * 4 adds remote access: the REMOTE access bits, a region's rkey, the node and endpoint in INFO;
 * 5 adds the mailbox: MBOX_CREATE, and MAILBOX entries in the send queue; 6 adds NET_COUNTERS;
 * 7 adds MBOX_WAIT, and poll() readable on a message in the mailbox; 8 adds REG_INITIATOR, a
 * remote key bound to the one node it is handed to).
 *
 * One character device per engine instance: /dev/exanest-dma<N>. Each open file uses one of the
 * engine's contexts while it needs one: open is never refused for want of a context, and a file
 * whose context went to another (idle files give theirs up) gets one back when it next submits
 * work (Documentation/abi.rst, "Model"). The context's own IOMMU domain, attached to the
 * function its DMA is issued as, maps that process's virtual addresses, so every address below
 * is a plain user virtual address, and the SMMU keeps contexts out of each other's memory.
 *
 * Rules common to every ioctl:
 *  - structs are fixed-size, explicitly padded, and their size is part of the ioctl number;
 *  - every "flags" and "reserved" field must be zero unless a flag below is defined for it
 *    (EINVAL otherwise), so that later versions can give them meaning;
 *  - out fields are written only on success.
 *
 * Documentation/abi.rst describes the errors of each call, with a C example.
 */
#ifndef _UAPI_LINUX_EXANEST_DMA_H
#define _UAPI_LINUX_EXANEST_DMA_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define EXANEST_DMA_ABI_VERSION		8

/* exanest_dma_info.context of a file that holds no engine context at the moment. */
#define EXANEST_DMA_NO_CONTEXT		0xffffffffu

/* Memory modes of a registered region. */
#define EXANEST_DMA_MODE_PIN		0	/* pin and map at registration */
#define EXANEST_DMA_MODE_PREFAULT	1	/* fault in and map at registration, no pinning */
#define EXANEST_DMA_MODE_ON_DEMAND	2	/* map nothing until the engine faults */

/* Access rights of a registered region (bitmask, at least one). */
#define EXANEST_DMA_ACCESS_READ		(1u << 0)	/* the engine may read it (copy source) */
#define EXANEST_DMA_ACCESS_WRITE	(1u << 1)	/* the engine may write it (copy destination) */
/* ABI 4: other nodes may read (get) or write (put) it under its rkey; each needs its local bit. */
#define EXANEST_DMA_ACCESS_REMOTE_READ	(1u << 2)
#define EXANEST_DMA_ACCESS_REMOTE_WRITE	(1u << 3)

/* exanest_dma_info.node of an engine without a network port. */
#define EXANEST_DMA_NO_NODE		0xffffffffu

/* EXANEST_DMA_IOC_INFO: what this instance and driver support. */
struct exanest_dma_info {
	__u32 abi_version;	/* out: EXANEST_DMA_ABI_VERSION */
	__u32 hw_version;	/* out: engine VERSION register (major << 16 | minor) */
	__u32 channels;		/* out: channels of this file's context */
	__u32 modes;		/* out: bit (1 << mode) for each implemented mode */
	__u64 max_transfer;	/* out: largest copy length in bytes */
	__u32 max_regions;	/* out: regions one process may hold */
	__u32 max_inflight;	/* out: copies one process may have in flight */
	__u32 context;		/* out: this file's context, or EXANEST_DMA_NO_CONTEXT (ABI 2) */
	__u32 contexts;		/* out: the engine's contexts (since ABI 2) */
	__u32 node;		/* out: the engine's network node, or EXANEST_DMA_NO_NODE (ABI 4) */
	__u32 endpoint;		/* out: this file's endpoint, by which other nodes address it
				 * (ABI 4) */
	__u64 reserved[2];	/* out: zero */
};

/* Flags of struct exanest_dma_reg. */
#define EXANEST_DMA_REG_WINDOW		(1u << 0)	/* touch_ahead is set */
/*
 * ABI 8: the region's remote key works only in ops from node `initiator` (a REMOTE access bit
 * is needed; EOPNOTSUPP on an engine older than register map 2.9); from any other node it
 * fails as a wrong key does (ENOKEY), and counts toward that node's quarantine.
 */
#define EXANEST_DMA_REG_INITIATOR	(1u << 1)
#define EXANEST_DMA_MAX_WINDOW		511		/* largest touch_ahead, in pages */
#define EXANEST_DMA_WINDOW_ADAPTIVE	0xffffffffu	/* touch_ahead that grows on streams */

/* EXANEST_DMA_IOC_REG: register [addr, addr + length) for DMA. */
struct exanest_dma_reg {
	__u64 addr;		/* in: start, any alignment */
	__u64 length;		/* in: bytes, > 0 */
	__u32 access;		/* in: EXANEST_DMA_ACCESS_* */
	__u32 mode;		/* in: EXANEST_DMA_MODE_* */
	__u32 flags;		/* in: EXANEST_DMA_REG_* */
	__u32 handle;		/* out: region handle, never 0 */
	__u32 touch_ahead;	/* in, with EXANEST_DMA_REG_WINDOW: pages resolved past a
				 * faulting one (on-demand), 0..EXANEST_DMA_MAX_WINDOW, or
				 * EXANEST_DMA_WINDOW_ADAPTIVE */
	__u32 initiator;	/* in, with EXANEST_DMA_REG_INITIATOR: the node, below 64 (ABI 8);
				 * 0 without */
	__u64 rkey;		/* in: 0; out: the remote key, with a REMOTE access bit (ABI 4) */
};

/* EXANEST_DMA_IOC_DEREG: drop a region. EBUSY while a copy in flight uses it. */
struct exanest_dma_dereg {
	__u32 handle;		/* in */
	__u32 flags;		/* in: 0 */
};

/* EXANEST_DMA_IOC_COPY: start copying length bytes from src to dst. */
struct exanest_dma_copy {
	__u64 src;		/* in: inside a region with ACCESS_READ */
	__u64 dst;		/* in: inside a region with ACCESS_WRITE */
	__u64 length;		/* in: bytes, 1..max_transfer */
	__u32 flags;		/* in: 0 */
	__u32 channel;		/* out: channel (2.2: kernel queue slot) it runs on;
				 * 0xffffffff while it waits in the file's FIFO for one */
	__u64 cookie;		/* out: pass to EXANEST_DMA_IOC_WAIT; never 0 */
};

/* EXANEST_DMA_IOC_WAIT: wait for a copy to end and collect its result. */
struct exanest_dma_wait {
	__u64 cookie;		/* in */
	__s64 timeout_ns;	/* in: < 0 waits forever, 0 polls */
	__u32 flags;		/* in: 0 */
	__s32 status;		/* out: 0, or the negative errno the copy ended with */
	__u64 bytes_done;	/* out: bytes copied */
};

/* Flags of struct exanest_dma_advise. */
#define EXANEST_DMA_ADVISE_WRITE	(1u << 0)	/* map for device writes too */

/*
 * EXANEST_DMA_IOC_ADVISE: fault in and map [addr, addr + length) now, without pinning, so that
 * the engine takes no fault there (like ibv_advise_mr() PREFETCH). The range must lie in one
 * prefault or on-demand region (a pinned one is already mapped: nothing to do).
 */
struct exanest_dma_advise {
	__u64 addr;		/* in */
	__u64 length;		/* in: bytes, > 0 */
	__u32 flags;		/* in: EXANEST_DMA_ADVISE_* */
	__u32 reserved;		/* in: 0 */
};

/* EXANEST_DMA_IOC_COUNTERS: statistics of this open file and of the instance. */
struct exanest_dma_counters {
	__u64 copies;		/* copies completed successfully */
	__u64 copy_errors;	/* copies ended with an error */
	__u64 bytes;		/* bytes copied */
	__u64 regions;		/* regions registered now */
	__u64 pages_mapped;	/* pages mapped in the IOMMU domain now */
	__u64 pages_pinned;	/* pages pinned now */
	__u64 faults;		/* engine faults taken (channel stopped in fault-wait) */
	__u64 faults_resolved;	/* faults resolved and resumed */
	__u64 nacks;		/* faults NACKed (the copy ends with the errno) */
	__u64 invalidations;	/* MMU-notifier invalidations that unmapped pages */
	__u64 iommu_faults;	/* faults the IOMMU reported (none unless smmu_fault_events=1) */
	__u64 pages_resolved;	/* pages faulted in and mapped on demand */
	__u64 touch_ahead_pages;	/* of which past the faulting page */
	__u64 retransmissions;	/* RESUMEs after a resolved fault */
	__u64 huge_mappings;	/* 2 MiB IOMMU blocks mapped for transparent huge pages */
	__u64 evicted_pages;	/* pages unmapped to stay within the budget (since ABI 2) */
};

/*
 * EXANEST_DMA_IOC_BUDGET: the translation budget of the file's context, the most pages the
 * on-demand mirror (prefault and on-demand regions) keeps mapped in the IOMMU; past it the least
 * recently faulted pages are unmapped and fault in again when next used. Pinned pages do not
 * count and are never unmapped.
 */
struct exanest_dma_budget {
	__u64 pages;		/* in: new budget (0: keep it); out: the budget */
	__u64 evicted_pages;	/* out: pages evicted so far */
	__u64 evictions;	/* out: evictions so far */
	__u64 mapped_pages;	/* out: pages the on-demand mirror maps now */
	__u64 reserved[2];	/* zero */
};

/*
 * EXANEST_DMA_IOC_LATENCY: how long fault resolutions took, as log2 histograms in microseconds:
 * bucket 0 counts durations under 2 us, bucket i (i > 0) those in [2^i, 2^(i+1)) us, the last
 * bucket everything longer.
 */
#define EXANEST_DMA_LATENCY_BUCKETS	24
struct exanest_dma_latency {
	__u64 total[EXANEST_DMA_LATENCY_BUCKETS];	/* engine fault interrupt to RESUME/NACK */
	__u64 queue[EXANEST_DMA_LATENCY_BUCKETS];	/* interrupt to the fault worker taking it */
	__u64 fault_in[EXANEST_DMA_LATENCY_BUCKETS];	/* each hmm_range_fault (handle_mm_fault) */
	__u64 map[EXANEST_DMA_LATENCY_BUCKETS];		/* each IOMMU map of the faulted pages */
	__u64 handler[EXANEST_DMA_LATENCY_BUCKETS];	/* IOMMU fault handler to page mapped */
};

/* EXANEST_DMA_IOC_REGION_STATS: the counters of one region. */
struct exanest_dma_region_stats {
	__u32 handle;		/* in */
	__u32 mode;		/* out: EXANEST_DMA_MODE_* */
	__u64 faults;		/* out: engine faults resolved or NACKed in the region */
	__u64 pages_resolved;	/* out: pages faulted in and mapped on demand */
	__u64 reserved[2];	/* out: zero */
};

/*
 * The user-level queue (ABI 3): post copies and collect their completions with no system call.
 * A file creates at most one queue, which lives until the file is closed. On a register map 2.2
 * engine an idle queue's context may go to another file: its doorbell then faults a context back
 * and the queue goes on where it stopped (2.1: the queue keeps its context, EBUSY beyond as many
 * queues as contexts). The rings are
 * the caller's memory: page-aligned, (1 << log2) entries of 32 bytes each, pinned by the driver
 * and mapped at their addresses in the context's IOMMU domain; the driver zeroes the CQ. The
 * doorbell page is mapped with mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
 * doorbell_offset), by the process that opened the file only; it is not inherited by fork().
 * Entry and register formats: Documentation/pldma-registers.rst, "User-level queues";
 * Documentation/abi.rst, "User-level queue".
 */
#define EXANEST_DMA_QUEUE_LOG2_MIN	1
#define EXANEST_DMA_QUEUE_LOG2_MAX	12
#define EXANEST_DMA_QUEUE_ENTRY		32	/* bytes per SQ and CQ entry */

/* EXANEST_DMA_IOC_QUEUE_CREATE */
struct exanest_dma_queue {
	__u64 sq_addr;		/* in: send queue ring, 4 KiB aligned */
	__u64 cq_addr;		/* in: completion queue ring, 4 KiB aligned, zeroed by the driver */
	__u32 sq_log2;		/* in: log2 of the SQ's entries, 1..12 */
	__u32 cq_log2;		/* in: log2 of the CQ's entries, 1..12 */
	__u32 flags;		/* in: 0 */
	__u32 context;		/* out: the engine context the queue posts to */
	__u32 channels;		/* out: mask of the channels the queue's copies run on */
	__u32 reserved;		/* in: 0 */
	__u64 doorbell_offset;	/* out: mmap offset of the doorbell page */
};

/*
 * Event entries in the CQ (the upcall): flags has PLDMA_CQE_EVENT and the kind in bits 15:8; an
 * event is no copy's completion. EVICTED: the translation budget evicted `bytes` pages, the last
 * run starting at `wr_id`.
 */
#define EXANEST_DMA_EVENT_EVICTED	1

/* Queue errors (exanest_dma_queue_wait.error): the queue stopped and takes nothing more. */
#define EXANEST_DMA_QERR_SQ_FETCH	2	/* a descriptor could not be read */
#define EXANEST_DMA_QERR_CQ_WRITE	3	/* a completion could not be written */

/*
 * EXANEST_DMA_IOC_MBOX_CREATE (ABI 5): the file's mailbox, a receive ring of 2^log2 slots of
 * EXANEST_DMA_MBOX_SLOT bytes at addr (4 KiB aligned, zeroed by the caller: fresh anonymous
 * memory is), for the messages other nodes send to the file's endpoint (INFO.endpoint). The ring
 * is registered on demand for the engine to write (a page that faults is resolved like data);
 * its reader's index is the doorbell page's MBOX_HEAD, so the file needs its queue first. A slot
 * of free-running index i is complete when its stamp (u32 at EXANEST_DMA_MBOX_STAMP_OFF) reads
 * i + 1; the reader takes slots in order and writes MBOX_HEAD past them to free them (a full ring
 * makes senders wait: RNR). Documentation/network.rst, "The mailbox".
 */
struct exanest_dma_mbox {
	__u64 addr;		/* in: the ring */
	__u32 log2;		/* in: log2 of its slots, 1..EXANEST_DMA_MBOX_LOG2_MAX */
	__u32 flags;		/* in: 0 */
};

/*
 * EXANEST_DMA_IOC_MBOX_WAIT (ABI 7): sleep until the file's mailbox holds a message its reader
 * has not taken (MBOX_TAIL != MBOX_HEAD on the doorbell page), at most timeout_ns (negative:
 * no limit; 0: look only): 0 with pending set, ETIMEDOUT, EINTR on a signal, ENOENT without a
 * mailbox, EOPNOTSUPP on an engine older than register map 2.6. poll() on the file is readable
 * while the mailbox holds such a message, too. The file keeps no context while it sleeps: a
 * message for it brings one back.
 */
struct exanest_dma_mbox_wait {
	__s64 timeout_ns;	/* in */
	__u32 flags;		/* in: 0 */
	__u32 pending;		/* out: messages not taken yet (at least 1) */
};

#define EXANEST_DMA_MBOX_SLOT		320	/* bytes per slot: a header, then the message */
#define EXANEST_DMA_MBOX_MAX		256	/* bytes of a message, at most */
#define EXANEST_DMA_MBOX_LOG2_MAX	12
/* A slot's fields, little-endian: byte offsets. */
#define EXANEST_DMA_MBOX_SRC_NODE_OFF	0	/* u16: the sending node */
#define EXANEST_DMA_MBOX_SRC_EP_OFF	4	/* u32: the sending endpoint */
#define EXANEST_DMA_MBOX_LEN_OFF	8	/* u32: bytes of the message (a put's) */
/* ABI 7: u32, 0 for a message, EXANEST_DMA_MBOX_FLAG_PUT_IMM for the completion of a put with
 * immediate data into this process (no message; SRC_EP 0xffffffff) */
#define EXANEST_DMA_MBOX_FLAGS_OFF	16
#define EXANEST_DMA_MBOX_FLAG_PUT_IMM	1
#define EXANEST_DMA_MBOX_IMM_OFF	20	/* u32: the put's immediate data */
#define EXANEST_DMA_MBOX_ADDR_OFF	24	/* u64: the put's first byte, in this process */
#define EXANEST_DMA_MBOX_STAMP_OFF	60	/* u32: the slot's index + 1, written last */
#define EXANEST_DMA_MBOX_DATA_OFF	64	/* the message */

/*
 * EXANEST_DMA_IOC_QUEUE_WAIT: sleep until the completion of index cq_head is in the CQ (its
 * PHASE bit is the one expected for that index), the queue stopped on an error, or the timeout.
 * The caller arms the CQ event (the doorbell page's CQ_ARM) before it looks at the CQ a last time
 * and calls this; without arming, only the timeout ends the wait.
 */
struct exanest_dma_queue_wait {
	__u32 cq_head;		/* in: free-running index of the completion waited for */
	__u32 flags;		/* in: 0 */
	__s64 timeout_ns;	/* in: < 0 waits forever, 0 polls */
	__u32 error;		/* out: 0, or EXANEST_DMA_QERR_* */
	__u32 reserved;		/* in: 0 */
	__u64 error_addr;	/* out: the address the queue error is about */
};

/*
 * EXANEST_DMA_IOC_NET_COUNTERS (ABI 6): the counters of the engine's network port, the same for
 * every file of the instance (and what debugfs's exanest-dmaN/engine says): the engine's 32-bit
 * registers, which wrap. EOPNOTSUPP without a port.
 */
struct exanest_dma_net_counters {
	__u32 node;		/* this engine's node id */
	__u32 link;		/* 1 while the port has a peer (a netdev), else 0 */
	__u64 tx_packets;	/* packets sent */
	__u64 rx_packets;	/* packets received */
	__u64 rx_dropped;	/* received and dropped: malformed, checksum, another node's... */
	__u64 rx_bad_crc;	/* of which with a bad checksum */
	__u64 nacks_sent;	/* FAULT, NOT_READY, SEQUENCE and RNR NACKs sent */
	__u64 nacks_received;	/* NACKs received */
	__u64 resumes_sent;	/* RESUMEs sent */
	__u64 resumes_received;	/* RESUMEs received */
	__u64 retransmitted_bytes;	/* payload bytes sent again */
	__u64 timeouts;		/* retransmission timeouts */
	__u64 duplicates;	/* data packets dropped as duplicates or beyond a gap */
	__u64 injected_drops;	/* packets the drop injection dropped (debugfs link) */
	__u64 injected_corruptions;	/* packets the corruption injection changed */
	__u64 error_nacks;	/* error NACKs sent (bad key, right, range, ...) */
	__u64 placed_bytes;	/* bytes placed for remote ops */
	__u64 probes;		/* probes of a paused op (not timeouts) */
	__u64 mbox_placed;	/* mailbox messages placed */
	__u64 rnr_sent;		/* RNR NACKs sent (a full mailbox ring) */
};

#define EXANEST_DMA_IOC_MAGIC	0xE5
#define EXANEST_DMA_IOC_INFO	_IOR(EXANEST_DMA_IOC_MAGIC, 0x00, struct exanest_dma_info)
#define EXANEST_DMA_IOC_REG	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x01, struct exanest_dma_reg)
#define EXANEST_DMA_IOC_DEREG	_IOW(EXANEST_DMA_IOC_MAGIC, 0x02, struct exanest_dma_dereg)
#define EXANEST_DMA_IOC_COPY	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x03, struct exanest_dma_copy)
#define EXANEST_DMA_IOC_WAIT	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x04, struct exanest_dma_wait)
#define EXANEST_DMA_IOC_COUNTERS _IOR(EXANEST_DMA_IOC_MAGIC, 0x05, struct exanest_dma_counters)
#define EXANEST_DMA_IOC_ADVISE	_IOW(EXANEST_DMA_IOC_MAGIC, 0x06, struct exanest_dma_advise)
#define EXANEST_DMA_IOC_LATENCY	_IOR(EXANEST_DMA_IOC_MAGIC, 0x07, struct exanest_dma_latency)
#define EXANEST_DMA_IOC_REGION_STATS \
	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x08, struct exanest_dma_region_stats)
#define EXANEST_DMA_IOC_BUDGET	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x09, struct exanest_dma_budget)
#define EXANEST_DMA_IOC_QUEUE_CREATE \
	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x0a, struct exanest_dma_queue)
#define EXANEST_DMA_IOC_QUEUE_WAIT \
	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x0b, struct exanest_dma_queue_wait)
#define EXANEST_DMA_IOC_MBOX_CREATE \
	_IOW(EXANEST_DMA_IOC_MAGIC, 0x0c, struct exanest_dma_mbox)
#define EXANEST_DMA_IOC_NET_COUNTERS \
	_IOR(EXANEST_DMA_IOC_MAGIC, 0x0d, struct exanest_dma_net_counters)
#define EXANEST_DMA_IOC_MBOX_WAIT \
	_IOWR(EXANEST_DMA_IOC_MAGIC, 0x0e, struct exanest_dma_mbox_wait)

#endif /* _UAPI_LINUX_EXANEST_DMA_H */
