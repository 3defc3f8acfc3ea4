// SPDX-License-Identifier: GPL-2.0-only OR MIT
/* DMA into a freshly malloc'd, never-touched buffer: nothing pinned, faults resolved on demand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <exanest_dma.h>

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 16 << 20;
	char *src = malloc(n), *dst = malloc(n); /* dst: never touched before the DMA */
	struct exanest_dma *dev;
	struct exanest_dma_counters c;
	uint32_t hs, hd;
	uint64_t cookie;
	int32_t status = 0; /* the copy's result; err is the calls' */
	int err;

	memset(src, 'x', n);
	err = exanest_dma_open(0, &dev);
	if (!err)
		err = exanest_dma_reg(dev, src, n, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND, &hs);
	if (!err)
		err = exanest_dma_reg(dev, dst, n, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_ON_DEMAND, &hd);
	if (!err)
		err = exanest_dma_copy(dev, src, dst, n, &cookie);
	if (!err)
		err = exanest_dma_wait(dev, cookie, -1, &status, NULL);
	if (!err)
		err = exanest_dma_counters(dev, &c);
	if (err || status) {
		fprintf(stderr, "exanest-dma: %s%s\n", err ? "" : "copy failed: ",
			strerror(err ? -err : -status));
		return 1;
	}
	printf("copied %zu bytes on demand: %llu faults resolved, %llu pages pinned, data %s\n", n,
	       (unsigned long long)c.faults_resolved, (unsigned long long)c.pages_pinned,
	       memcmp(src, dst, n) ? "DIFFERS" : "verified");
	exanest_dma_close(dev);
	return memcmp(src, dst, n) != 0;
}
