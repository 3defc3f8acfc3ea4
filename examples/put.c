// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * A put into another node's memory, and a get back: put [BYTES]
 *
 * Two processes, two nodes: the guest's two engines, cabled back to back (node 0 is
 * /dev/exanest-dma0, node 1 /dev/exanest-dma1). The receiver, on node 1, mallocs BYTES and
 * registers them for remote writing without ever touching them, then hands the writer their
 * description (struct exanest_dma_remote) through a pipe. The writer, on node 0, puts BYTES of a
 * pattern there from its user-level queue, with immediate data, and polls the completion. Each
 * first write of a page faults in the receiver's SMMU: the receiving engine NACKs it, the
 * receiver's kernel resolves the fault and the engine RESUMEs the writer, which retransmits.
 * The receiver sleeps in its mailbox until the put's completion comes (register map 2.6: after
 * every byte of the put, with the writer's immediate), then checks every byte and prints its
 * fault counters. Then the writer gets the bytes back into another
 * buffer it never touched: this time the faults are its own, resolved by its own kernel.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <exanest_dma.h>

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 13 % 251);
}

static int receiver(size_t n, int to_writer, int from_writer)
{
	struct exanest_dma_remote target;
	struct exanest_dma_counters k;
	struct exanest_dma_queue_h *q = NULL;
	struct exanest_dma_message m;
	struct exanest_dma *dev = NULL;
	/* The writer puts into it, then gets it back. */
	uint32_t rights = EXANEST_DMA_ACCESS_REMOTE_WRITE | EXANEST_DMA_ACCESS_REMOTE_READ;
	uint8_t *buf = malloc(n), go;
	uint32_t h;
	size_t bad = 0;
	int err;

	err = exanest_dma_open(1, &dev);
	if (!err)
		err = exanest_dma_reg_remote(dev, buf, n, rights, EXANEST_DMA_MODE_ON_DEMAND,
					     &h, &target);
	/* A mailbox, for the put's completion. */
	if (!err)
		err = exanest_dma_queue_create(dev, 2, 2, &q);
	if (!err)
		err = exanest_dma_queue_mailbox(q, 2);
	if (err) {
		fprintf(stderr, "receiver: %s\n", strerror(-err));
		return 1;
	}
	if (write(to_writer, &target, sizeof(target)) != sizeof(target))
		return 1;
	/* Asleep until the put's completion comes: every byte of it is there by then. */
	err = exanest_dma_queue_recv_msg(q, NULL, 0, &m, 30000000000LL);
	if (err == 1)
		err = (m.flags & EXANEST_DMA_MESSAGE_PUT_IMM) && m.imm == 0x600d && m.len == n &&
		      m.addr == (uintptr_t)buf ? 0 : -EBADMSG;
	else if (err == 0)
		err = -ENOMSG;
	for (size_t i = 0; i < n; i++)
		bad += buf[i] != pattern(i);
	if (!err)
		err = exanest_dma_counters(dev, &k);
	if (err || bad) {
		fprintf(stderr, "receiver: %zu bytes differ (%s)\n", bad, strerror(-err));
		return 1;
	}
	printf("receiver on node %u: the put's completion came through its mailbox (immediate "
	       "%#x, %u bytes), %llu faults NACKed and resolved, %llu RESUMEs, %llu pages "
	       "faulted in, data verified\n", target.node, m.imm, m.len,
	       (unsigned long long)k.faults_resolved, (unsigned long long)k.retransmissions,
	       (unsigned long long)k.pages_resolved);
	fflush(stdout);
	/* The writer gets the bytes back: keep them registered until it is done. */
	if (read(from_writer, &go, 1) != 1)
		return 1;
	exanest_dma_queue_destroy(q);
	exanest_dma_close(dev);
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8u << 20;
	struct exanest_dma_completion c;
	struct exanest_dma_remote to;
	struct exanest_dma_queue_h *q = NULL;
	struct exanest_dma *dev = NULL;
	int up[2], down[2], st = 1, err;
	uint8_t *src, *back;
	size_t bad = 0;
	uint32_t h, hb;
	pid_t pid;

	if (!n || n > 1u << 30 || pipe(up) || pipe(down))
		return 2;
	pid = fork();
	if (pid == 0) {
		st = receiver(n, up[1], down[0]);
		fflush(stdout); /* _exit() does not flush stdio, and stdout may be a pipe */
		_exit(st);
	}
	src = malloc(n);
	for (size_t i = 0; i < n; i++)
		src[i] = pattern(i);
	err = read(up[0], &to, sizeof(to)) == sizeof(to) ? 0 : -EIO;
	if (!err)
		err = exanest_dma_open(0, &dev);
	if (!err)
		err = exanest_dma_reg(dev, src, n, EXANEST_DMA_ACCESS_READ,
				      EXANEST_DMA_MODE_ON_DEMAND, &h);
	if (!err)
		err = exanest_dma_queue_create(dev, 4, 4, &q);
	if (!err)
		err = exanest_dma_queue_put_imm(q, (uintptr_t)src, (uint32_t)n, &to, 0, 0x600d, 1);
	while (!err && exanest_dma_queue_poll(q, &c, 1) == 0)
		err = exanest_dma_queue_wait(q, -1);
	if (err) {
		fprintf(stderr, "writer: %s\n", strerror(-err));
	} else if (c.status) {
		fprintf(stderr, "writer: the put ended with status %d\n", c.status);
	} else {
		printf("writer on node 0: put %u bytes with immediate data 0x600d into node %u's "
		       "untouched memory (endpoint %u), status 0\n", c.bytes, to.node, to.endpoint);
	}
	/* Get it back into memory this process never touched. */
	back = malloc(n);
	if (!err && !c.status)
		err = exanest_dma_reg(dev, back, n, EXANEST_DMA_ACCESS_WRITE,
				      EXANEST_DMA_MODE_ON_DEMAND, &hb);
	if (!err && !c.status)
		err = exanest_dma_queue_get(q, (uintptr_t)back, (uint32_t)n, &to, 0, 2);
	while (!err && !c.status && exanest_dma_queue_poll(q, &c, 1) == 0)
		err = exanest_dma_queue_wait(q, -1);
	if (!err && !c.status) {
		struct exanest_dma_counters k;

		for (size_t i = 0; i < n; i++)
			bad += back[i] != pattern(i);
		err = exanest_dma_counters(dev, &k);
		printf("writer on node 0: got %u bytes back into untouched memory, status %d, "
		       "%llu faults of its own resolved, %s\n", c.bytes, c.status,
		       (unsigned long long)k.faults_resolved, bad ? "DATA DIFFERS" : "data verified");
	}
	if (write(down[1], "g", 1) != 1 || waitpid(pid, &st, 0) != pid)
		st = 1;
	exanest_dma_queue_destroy(q);
	exanest_dma_close(dev);
	if (err || c.status || bad || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	printf("put %zu bytes to another node and got them back, data verified on both\n", n);
	return 0;
}
