// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Copies through the user-level queue: queue [COPIES]
 *
 * Registers two malloc'd buffers on demand before anything touches them (the source is filled
 * afterwards; the destination is first written by the engine), then keeps the queue full with
 * copies of various sizes, each to its own destination range, polls their completions (which
 * come in the order copies end, named by wr_id) and checks every status, byte count and byte.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <exanest_dma.h>

#define SRC_SIZE (1u << 20)

static const uint32_t sizes[] = { 1, 3, 64, 100, 512, 4095, 4096, 4097, 12345, 33333 };

struct copy {
	size_t src, dst;	/* offsets */
	uint32_t len;
	int done;
};

int main(int argc, char **argv)
{
	unsigned int n = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 0) : 1000;
	struct copy *c = calloc(n ? n : 1, sizeof(*c));
	struct exanest_dma_completion comp[16];
	struct exanest_dma_queue_h *q = NULL;
	struct exanest_dma *dev = NULL;
	unsigned int posted = 0, done = 0, reordered = 0, bad = 0;
	size_t dst_size = 0;
	uint32_t hs, hd, cap = 0;
	char *src, *dst;
	int err;

	for (unsigned int i = 0; i < n; i++) {
		c[i].len = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		c[i].src = (size_t)i * 4099 % (SRC_SIZE - c[i].len);
		c[i].dst = dst_size;
		dst_size += c[i].len;
	}
	src = malloc(SRC_SIZE);
	dst = malloc(dst_size ? dst_size : 1); /* never touched before the engine writes it */

	err = exanest_dma_open(0, &dev);
	if (!err)
		err = exanest_dma_reg(dev, src, SRC_SIZE, EXANEST_DMA_ACCESS_READ,
				      EXANEST_DMA_MODE_ON_DEMAND, &hs);
	if (!err)
		err = exanest_dma_reg(dev, dst, dst_size, EXANEST_DMA_ACCESS_WRITE,
				      EXANEST_DMA_MODE_ON_DEMAND, &hd);
	if (!err)
		err = exanest_dma_queue_create(dev, 5, 5, &q); /* 32 descriptors, 32 completions */
	if (!err)
		err = exanest_dma_queue_info(q, &cap, NULL, NULL);
	for (size_t i = 0; !err && i < SRC_SIZE; i++)
		src[i] = (char)(i * 7 % 251);

	while (!err && done < n) {
		/* Keep the queue full: post until -EAGAIN (capacity copies outstanding). */
		while (posted < n) {
			struct copy *p = &c[posted];

			err = exanest_dma_queue_post(q, (uintptr_t)(src + p->src),
						     (uintptr_t)(dst + p->dst), p->len, posted);
			if (err == -EAGAIN) {
				err = 0;
				break;
			}
			if (err)
				break;
			posted++;
		}
		if (err)
			break;
		int k = exanest_dma_queue_poll(q, comp, sizeof(comp) / sizeof(comp[0]));

		if (k < 0) {
			err = k;
			break;
		}
		if (k == 0) {
			err = exanest_dma_queue_wait(q, -1); /* arm the CQ event, sleep */
			continue;
		}
		for (int j = 0; j < k; j++) {
			uint64_t id = comp[j].wr_id;

			if (id >= n || c[id].done || comp[j].status || comp[j].bytes != c[id].len) {
				fprintf(stderr, "queue: bad completion: wr_id %llu status %d bytes %u\n",
					(unsigned long long)id, comp[j].status, comp[j].bytes);
				bad++;
				continue;
			}
			c[id].done = 1;
			reordered += id != done + j;
		}
		done += k;
	}
	if (err) {
		uint32_t code = 0;
		uint64_t addr = 0;

		exanest_dma_queue_error(q, &code, &addr);
		fprintf(stderr, "exanest-dma: %s (queue error %u at %#llx)\n", strerror(-err), code,
			(unsigned long long)addr);
		return 1;
	}
	for (unsigned int i = 0; i < n; i++)
		bad += memcmp(dst + c[i].dst, src + c[i].src, c[i].len) != 0;
	printf("queue: %u copies, data %s (capacity %u, %u completions out of post order)\n", n,
	       bad ? "DIFFERS" : "verified", cap, reordered);
	exanest_dma_queue_destroy(q);
	exanest_dma_close(dev);
	free(src);
	free(dst);
	free(c);
	return bad != 0;
}
