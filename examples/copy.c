// SPDX-License-Identifier: GPL-2.0-only OR MIT
/* Copy a buffer with the engine through libexanest_dma: copy [SIZE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <exanest_dma.h>

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 20;
	char *src = malloc(n), *dst = calloc(1, n);
	struct exanest_dma *dev;
	uint32_t hs, hd;
	uint64_t cookie, bytes;
	int32_t status = 0; /* the copy's result; err is the calls' */
	int err;

	for (size_t i = 0; i < n; i++)
		src[i] = (char)(i * 7 % 251);
	err = exanest_dma_open(0, &dev);
	if (!err)
		err = exanest_dma_reg(dev, src, n, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_PIN, &hs);
	if (!err)
		err = exanest_dma_reg(dev, dst, n, EXANEST_DMA_ACCESS_WRITE, EXANEST_DMA_MODE_PIN, &hd);
	if (!err)
		err = exanest_dma_copy(dev, src, dst, n, &cookie);
	if (!err)
		err = exanest_dma_wait(dev, cookie, -1, &status, &bytes);
	if (err || status) {
		fprintf(stderr, "exanest-dma: %s%s\n", err ? "" : "copy failed: ",
			strerror(err ? -err : -status));
		return 1;
	}
	printf("copied %llu bytes, data %s\n", (unsigned long long)bytes,
	       memcmp(src, dst, n) ? "DIFFERS" : "verified");
	exanest_dma_close(dev);
	return memcmp(src, dst, n) != 0;
}
