/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A user-level queue as a test program drives it, on the raw ABI (shared by exanest-queues.c
 * and exanest-net.c): create it, map its doorbell, post descriptors, poll and wait for
 * completions.
 */
#ifndef EXANEST_QUEUE_H
#define EXANEST_QUEUE_H

#include <sys/mman.h>
#include <time.h>

#include "exanest-test.h"

#include "../../include/hw/exanest-pldma-regs.h"

#define PAGE 4096

/* A queue as a program drives it. */
struct q {
	int fd;
	uint8_t *sq, *cq;
	volatile uint32_t *db;
	uint32_t sq_n, cq_n;
	uint32_t tail;		/* descriptors posted */
	uint32_t head;		/* CQ entries consumed: completions and events */
	uint32_t completed;	/* completions consumed */
	uint64_t events, evicted, last_evicted;	/* event entries seen (EVICTED) */
	uint32_t sq_head;	/* SQ_HEAD as last read */
	struct exanest_dma_queue info;
};

struct cqe {
	uint64_t wr_id;
	int32_t status;
	uint32_t bytes;
	uint64_t fault;
};

static inline void wmb_dev(void)
{
#ifdef __aarch64__
	__asm__ volatile("dmb oshst" ::: "memory");
#else
	__sync_synchronize();
#endif
}

static inline void rmb_dev(void)
{
#ifdef __aarch64__
	__asm__ volatile("dmb oshld" ::: "memory");
#else
	__sync_synchronize();
#endif
}

static inline void *ring_alloc(uint32_t log2)
{
	size_t len = ((32u << log2) + PAGE - 1) & ~(size_t)(PAGE - 1);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static inline int create_raw(int fd, void *sq, void *cq, uint32_t ls, uint32_t lc,
		      struct exanest_dma_queue *out)
{
	struct exanest_dma_queue r = { .sq_addr = (uintptr_t)sq, .cq_addr = (uintptr_t)cq,
				       .sq_log2 = ls, .cq_log2 = lc };
	int ret = xioctl(fd, EXANEST_DMA_IOC_QUEUE_CREATE, &r);

	if (out)
		*out = r;
	return ret;
}

static inline void *map_doorbell(int fd, size_t len, int prot, int flags, off_t off)
{
	return mmap(NULL, len, prot, flags, fd, off);
}

/* Create a queue on fd and map its doorbell: 0 or -errno. */
static inline int q_create(struct q *q, int fd, uint32_t ls, uint32_t lc)
{
	void *db;
	int ret;

	memset(q, 0, sizeof(*q));
	q->fd = fd;
	q->sq = ring_alloc(ls);
	q->cq = ring_alloc(lc);
	if (!q->sq || !q->cq)
		return -ENOMEM;
	/* The driver zeroes the CQ: make sure it does. */
	memset(q->cq, 0xff, 32u << lc);
	ret = create_raw(fd, q->sq, q->cq, ls, lc, &q->info);
	if (ret)
		return ret;
	db = map_doorbell(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, q->info.doorbell_offset);
	if (db == MAP_FAILED)
		return -errno;
	q->db = db;
	q->sq_n = 1u << ls;
	q->cq_n = 1u << lc;
	return 0;
}

static inline uint32_t db_read(struct q *q, uint32_t off)
{
	return q->db[off / 4];
}

static inline void db_write(struct q *q, uint32_t off, uint32_t v)
{
	q->db[off / 4] = v;
}

/* Write one descriptor (no doorbell): false when the SQ or the CQ has no room. */
static inline bool q_push(struct q *q, uint64_t src, uint64_t dst, uint32_t len, uint32_t flags,
		   uint64_t wr_id)
{
	uint8_t *d;

	if (q->tail - q->completed >= (q->sq_n < q->cq_n ? q->sq_n : q->cq_n))
		return false;
	if (q->tail - q->sq_head >= q->sq_n) {
		q->sq_head = db_read(q, PLDMA_VF_SQ_HEAD);
		if (q->tail - q->sq_head >= q->sq_n)
			return false;
	}
	d = q->sq + (q->tail & (q->sq_n - 1)) * PLDMA_SQE_SIZE;
	memcpy(d + PLDMA_SQE_SRC_OFF, &src, 8);
	memcpy(d + PLDMA_SQE_DST_OFF, &dst, 8);
	memcpy(d + PLDMA_SQE_LEN_OFF, &len, 4);
	memcpy(d + PLDMA_SQE_FLAGS_OFF, &flags, 4);
	memcpy(d + PLDMA_SQE_WRID_OFF, &wr_id, 8);
	q->tail++;
	return true;
}

static inline void q_ring(struct q *q)
{
	wmb_dev();
	db_write(q, PLDMA_VF_SQ_TAIL, q->tail);
}

static inline bool q_post(struct q *q, const void *src, void *dst, uint32_t len, uint64_t wr_id)
{
	if (!q_push(q, (uintptr_t)src, (uintptr_t)dst, len, 0, wr_id))
		return false;
	q_ring(q);
	return true;
}

/*
 * Take one completion if there is one; the consumer index goes to the engine at once. Event
 * entries on the way are counted, not returned.
 */
static inline bool q_poll(struct q *q, struct cqe *c)
{
	for (;;) {
		uint8_t *e = q->cq + (q->head & (q->cq_n - 1)) * PLDMA_CQE_SIZE;
		uint32_t flags = *(volatile uint32_t *)(e + PLDMA_CQE_FLAGS_OFF);
		uint32_t pass = q->head / q->cq_n;

		if ((flags & PLDMA_CQE_PHASE) != ((pass & 1) ? 0u : 1u))
			return false;
		rmb_dev();
		memcpy(&c->wr_id, e + PLDMA_CQE_WRID_OFF, 8);
		memcpy(&c->status, e + PLDMA_CQE_STATUS_OFF, 4);
		memcpy(&c->bytes, e + PLDMA_CQE_BYTES_OFF, 4);
		memcpy(&c->fault, e + PLDMA_CQE_FAULT_OFF, 8);
		q->head++;
		db_write(q, PLDMA_VF_CQ_HEAD, q->head);
		if (!(flags & PLDMA_CQE_EVENT)) {
			q->completed++;
			return true;
		}
		if (((flags & PLDMA_CQE_KIND_MASK) >> PLDMA_CQE_KIND_SHIFT) ==
		    EXANEST_DMA_EVENT_EVICTED) {
			q->events++;
			q->evicted += c->bytes;
			q->last_evicted = c->wr_id;
		}
	}
}

/*
 * QUEUE_WAIT for the completion at the head, not armed: with timeout 0, a look whether it is
 * there (0, else -ETIMEDOUT), which consumes the CQ event poll() reports.
 */
static inline int q_look(struct q *q, int64_t timeout_ns, struct exanest_dma_queue_wait *out)
{
	struct exanest_dma_queue_wait w = { .cq_head = q->head, .timeout_ns = timeout_ns };
	int ret = xioctl(q->fd, EXANEST_DMA_IOC_QUEUE_WAIT, &w);

	if (out)
		*out = w;
	return ret;
}

/* Arm the CQ event, then QUEUE_WAIT (q_look()). */
static inline int q_wait(struct q *q, int64_t timeout_ns, struct exanest_dma_queue_wait *out)
{
	db_write(q, PLDMA_VF_CQ_ARM, PLDMA_VF_CQ_ARM_ONCE);
	return q_look(q, timeout_ns, out);
}

/* Busy-poll one completion, for at most 10 s (CLOCK_MONOTONIC). */
static inline bool q_next(struct q *q, struct cqe *c)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (q_poll(q, c))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			return false;
	}
}

#endif /* EXANEST_QUEUE_H */
