// SPDX-License-Identifier: GPL-2.0-only
/*
 * pldma-probe: user-space checks of the PLDMA engine model from inside the guest, with no driver
 * bound. It maps BAR0 through sysfs, turns on memory decoding and bus mastering in config space,
 * and drives the registers directly. The device sits in its default DMA domain, where no IOVA is
 * mapped, so every DMA it starts must fault in the SMMU.
 *
 *   pldma-probe info       list the engines, their IOMMU groups and ID registers
 *   pldma-probe fault      one unmapped access: exactly one F_TRANSLATION event, fault-wait, NACK
 *   pldma-probe selftest   register-level behaviour: bad input, rejected commands, channel
 *                          independence, interrupt status
 *
 * Output: one "GUEST-TEST: ok NAME" or "GUEST-TEST: not ok NAME - why" line per check.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "guest-test.h"

#include "../../include/hw/exanest-pldma-regs.h"

struct engine {
	char bdf[256];
	char group[16];
	char gtype[32];
	int group_devices;
	volatile uint32_t *regs;
};



static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static uint32_t rd(struct engine *e, unsigned int off)
{
	return e->regs[off / 4];
}

static void wr(struct engine *e, unsigned int off, uint32_t v)
{
	e->regs[off / 4] = v;
}

static unsigned int ch(unsigned int n, unsigned int reg)
{
	return PLDMA_CH_BASE + n * PLDMA_CH_STRIDE + reg;
}

static int map_engine(struct engine *e)
{
	char path[PATH_MAX], link[PATH_MAX];
	uint8_t cmd[2];
	ssize_t n;
	int fd;
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/iommu_group", e->bdf);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0) {
		e->group[0] = 0;
	} else {
		link[n] = 0;
		snprintf(e->group, sizeof(e->group), "%s", strrchr(link, '/') + 1);
		snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%s/type", e->group);
		if (read_file(path, e->gtype, sizeof(e->gtype)))
			e->gtype[0] = 0;
		snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%s/devices", e->group);
		e->group_devices = 0;
		d = opendir(path);
		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.')
				e->group_devices++;
		if (d)
			closedir(d);
	}

	/* Memory decoding and bus mastering: no driver has enabled the device. */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", e->bdf);
	fd = open(path, O_RDWR);
	if (fd < 0 || pread(fd, cmd, 2, 4) != 2)
		return -1;
	cmd[0] |= 0x6; /* PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER */
	if (pwrite(fd, cmd, 2, 4) != 2)
		return -1;
	close(fd);

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource0", e->bdf);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0)
		return -1;
	e->regs = mmap(NULL, PLDMA_MMIO_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return e->regs == MAP_FAILED ? -1 : 0;
}

static int find_engines(struct engine *out, int max)
{
	struct dirent **list;
	char path[PATH_MAX], v[32], d[32];
	int n, found = 0;

	n = scandir("/sys/bus/pci/devices", &list, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *name = list[i]->d_name;

		if (name[0] != '.' && found < max) {
			snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", name);
			if (!read_file(path, v, sizeof(v))) {
				snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/device", name);
				if (!read_file(path, d, sizeof(d)) &&
				    strtoul(v, NULL, 16) == PLDMA_PCI_VENDOR_ID &&
				    strtoul(d, NULL, 16) == PLDMA_PCI_DEVICE_ID) {
					memset(&out[found], 0, sizeof(out[found]));
					snprintf(out[found].bdf, sizeof(out[found].bdf), "%s", name);
					if (!map_engine(&out[found]))
						found++;
				}
			}
		}
		free(list[i]);
	}
	free(list);
	return found;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait until channel n leaves BUSY; returns STATUS. */
static uint32_t wait_settled(struct engine *e, unsigned int n)
{
	double end = now_s() + 2.0;
	uint32_t st;

	do {
		st = rd(e, ch(n, PLDMA_CH_STATUS));
		if ((st & PLDMA_STATUS_STATE_MASK) != PLDMA_STATE_BUSY)
			return st;
		usleep(100);
	} while (now_s() < end);
	return st;
}

static void program(struct engine *e, unsigned int n, uint64_t src, uint64_t dst, uint32_t len)
{
	wr(e, ch(n, PLDMA_CH_SRC_LO), (uint32_t)src);
	wr(e, ch(n, PLDMA_CH_SRC_HI), src >> 32);
	wr(e, ch(n, PLDMA_CH_DST_LO), (uint32_t)dst);
	wr(e, ch(n, PLDMA_CH_DST_HI), dst >> 32);
	wr(e, ch(n, PLDMA_CH_LEN), len);
}

static unsigned int state(uint32_t st)
{
	return st & PLDMA_STATUS_STATE_MASK;
}

static unsigned int err(uint32_t st)
{
	return (st & PLDMA_STATUS_ERR_MASK) >> PLDMA_STATUS_ERR_SHIFT;
}

/* Count SMMU event records of one kind in the kernel log, and remember the last IOVA logged. */
static int count_smmu_events(const char *kind, uint64_t *last_iova)
{
	char buf[8192], pat[64];
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	int count = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	snprintf(pat, sizeof(pat), "event: %s client:", kind);
	for (;;) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n < 0 && errno == EPIPE)
			continue; /* overwritten records */
		if (n <= 0)
			break;
		buf[n] = 0;
		if (strstr(buf, pat)) {
			char *iova = strstr(buf, "iova: ");

			count++;
			if (iova && last_iova)
				*last_iova = strtoull(iova + 6, NULL, 16);
		}
	}
	close(fd);
	return count;
}

static int cmd_info(struct engine *e, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t ver = rd(&e[i], PLDMA_VERSION), caps = rd(&e[i], PLDMA_CAPS);

		printf("engine %s: id %#x version %u.%u channels %u caps %#x max-len %u bandwidth %u MB/s latency %u ns\n",
		       e[i].bdf, rd(&e[i], PLDMA_ID), ver >> 16, ver & 0xffff,
		       caps & PLDMA_CAPS_NCHAN_MASK, caps, rd(&e[i], PLDMA_MAX_LEN),
		       rd(&e[i], PLDMA_BANDWIDTH), rd(&e[i], PLDMA_LATENCY));
		printf("engine %s: iommu group %s (%s, %d device%s)\n", e[i].bdf,
		       e[i].group[0] ? e[i].group : "none", e[i].gtype, e[i].group_devices,
		       e[i].group_devices == 1 ? "" : "s");
	}
	return 0;
}

static void check_identity(struct engine *e, int n)
{
	static char sfx[300];

	for (int i = 0; i < n; i++) {
		uint32_t caps = rd(&e[i], PLDMA_CAPS);

		snprintf(sfx, sizeof(sfx), "@%s", e[i].bdf);
		result_suffix = sfx;

		result(rd(&e[i], PLDMA_ID) == PLDMA_ID_MAGIC &&
		       rd(&e[i], PLDMA_VERSION) == (PLDMA_VERSION_MAJOR << 16 | PLDMA_VERSION_MINOR),
		       "model-id-version", "%s: id %#x version %#x", e[i].bdf, rd(&e[i], PLDMA_ID),
		       rd(&e[i], PLDMA_VERSION));
		result((caps & PLDMA_CAPS_NCHAN_MASK) >= 4 && (caps & PLDMA_CAPS_RESUME) &&
		       (caps & PLDMA_CAPS_INTX), "model-caps", "%s: caps %#x", e[i].bdf, caps);
		result(e[i].group[0] && e[i].group_devices == 1 && !strncmp(e[i].gtype, "DMA", 3),
		       "behind-smmu", "%s: group '%s' type '%s' devices %d", e[i].bdf, e[i].group,
		       e[i].gtype, e[i].group_devices);
	}
	result_suffix = "";
	if (n >= 2)
		result(strcmp(e[0].group, e[1].group) != 0, "own-iommu-group",
		       "%s and %s share group %s", e[0].bdf, e[1].bdf, e[0].group);
}

/* One DMA from an unmapped IOVA: exactly one F_TRANSLATION, fault-wait with the right latches. */
static void check_fault(struct engine *e)
{
	const uint64_t src = 0x7f1234560000ull + 0x123, dst = 0x7f1234580000ull;
	uint64_t iova = 0;
	int before, after;
	uint32_t st, info;
	uint64_t fa;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	before = count_smmu_events("F_TRANSLATION", NULL);
	program(e, 0, src, dst, 4096);
	wr(e, ch(0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = wait_settled(e, 0);
	fa = rd(e, ch(0, PLDMA_CH_FAULT_LO)) | (uint64_t)rd(e, ch(0, PLDMA_CH_FAULT_HI)) << 32;
	info = rd(e, ch(0, PLDMA_CH_FAULT_INFO));
	result(state(st) == PLDMA_STATE_FAULT, "fault-wait", "status %#x", st);
	result(fa == src && !(info & PLDMA_FAULT_WRITE) &&
	       (info & PLDMA_FAULT_CAUSE_MASK) >> PLDMA_FAULT_CAUSE_SHIFT == PLDMA_CAUSE_TRANSLATION,
	       "fault-latches", "fault addr %#" PRIx64 " info %#x", fa, info);
	result(rd(e, ch(0, PLDMA_CH_DONE_BYTES)) == 0 && rd(e, ch(0, PLDMA_CH_FAULTS)) == 1,
	       "fault-progress", "done %u faults %u", rd(e, ch(0, PLDMA_CH_DONE_BYTES)),
	       rd(e, ch(0, PLDMA_CH_FAULTS)));

	/* The SMMU driver logs events from a threaded IRQ: give it a moment. */
	for (int i = 0; i < 50; i++) {
		after = count_smmu_events("F_TRANSLATION", &iova);
		if (after > before)
			break;
		usleep(20000);
	}
	usleep(200000);
	after = count_smmu_events("F_TRANSLATION", &iova);
	printf("smmu: %d F_TRANSLATION event(s) for the access, last iova %#" PRIx64 "\n",
	       after - before, iova);
	result(after - before == 1 && iova == src, "one-smmu-event",
	       "%d events, last iova %#" PRIx64 " (want 1 at %#" PRIx64 ")", after - before, iova,
	       src);

	/* Retransmission without a mapping faults again, at the same place. */
	wr(e, ch(0, PLDMA_CH_CTRL), PLDMA_CTRL_RESUME);
	st = wait_settled(e, 0);
	result(state(st) == PLDMA_STATE_FAULT && rd(e, ch(0, PLDMA_CH_FAULTS)) == 2,
	       "resume-refaults", "status %#x faults %u", st, rd(e, ch(0, PLDMA_CH_FAULTS)));

	wr(e, ch(0, PLDMA_CH_CTRL), PLDMA_CTRL_NACK);
	st = rd(e, ch(0, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_ABORTED, "nack-aborts",
	       "status %#x", st);
}

static void check_bad_input(struct engine *e)
{
	uint32_t max = rd(e, PLDMA_MAX_LEN), st;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	program(e, 1, 0x10000, 0x20000, 0);
	wr(e, ch(1, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(1, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_BAD_LEN, "bad-len-zero",
	       "status %#x", st);

	program(e, 1, 0x10000, 0x20000, max + 1);
	wr(e, ch(1, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(1, PLDMA_CH_STATUS));
	result(max < UINT32_MAX && state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_BAD_LEN,
	       "bad-len-too-big", "max %u status %#x", max, st);

	program(e, 1, UINT64_MAX - 10, 0x20000, 4096);
	wr(e, ch(1, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(1, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_BAD_ADDR, "bad-addr-wrap",
	       "status %#x", st);

	program(e, 1, 0x10000, 0x10800, 4096);
	wr(e, ch(1, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(1, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_OVERLAP, "bad-overlap",
	       "status %#x", st);

	wr(e, ch(1, PLDMA_CH_CTRL), PLDMA_CTRL_RESUME);
	st = rd(e, ch(1, PLDMA_CH_STATUS));
	result((st & PLDMA_STATUS_REJECTED) && state(st) == PLDMA_STATE_ERROR, "resume-rejected",
	       "status %#x", st);

	wr(e, ch(1, PLDMA_CH_CTRL), PLDMA_CTRL_START | PLDMA_CTRL_NACK);
	st = rd(e, ch(1, PLDMA_CH_STATUS));
	result((st & PLDMA_STATUS_REJECTED) != 0, "two-strobes-rejected", "status %#x", st);

	/* Unknown offsets read as zero and ignore writes; the model must not fall over. */
	wr(e, 0xffc, 0xdeadbeef);
	wr(e, ch(15, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	result(rd(e, 0xffc) == 0 && rd(e, PLDMA_ID) == PLDMA_ID_MAGIC, "unknown-offsets", NULL);
	wr(e, PLDMA_SCRATCH, 0xa5a5f00d);
	result(rd(e, PLDMA_SCRATCH) == 0xa5a5f00d, "scratch", "scratch %#x", rd(e, PLDMA_SCRATCH));
}

/* A faulting channel stalls alone; the others take commands and report their own state. */
static void check_independence(struct engine *e)
{
	unsigned int nchan = rd(e, PLDMA_CAPS) & PLDMA_CAPS_NCHAN_MASK;
	uint32_t st, st0, irq;
	int ok = 1;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	for (unsigned int n = 0; n < nchan; n++) {
		program(e, n, 0x100000 + n * 0x10000, 0x200000 + n * 0x10000, 8192);
		wr(e, ch(n, PLDMA_CH_CTRL), PLDMA_CTRL_START | PLDMA_CTRL_IRQ_EN);
	}
	for (unsigned int n = 0; n < nchan; n++) {
		uint64_t fa;

		st = wait_settled(e, n);
		fa = rd(e, ch(n, PLDMA_CH_FAULT_LO)) | (uint64_t)rd(e, ch(n, PLDMA_CH_FAULT_HI)) << 32;
		if (state(st) != PLDMA_STATE_FAULT || fa != 0x100000 + n * 0x10000) {
			printf("channel %u: status %#x fault %#" PRIx64 "\n", n, st, fa);
			ok = 0;
		}
	}
	result(ok, "all-channels-fault", NULL);
	irq = rd(e, PLDMA_IRQ_STATUS);
	result(irq == (1u << nchan) - 1, "irq-status-per-channel", "irq status %#x", irq);

	/* NACK channel 1 only: channel 0 stays in fault-wait with its latches intact. */
	wr(e, PLDMA_IRQ_STATUS, 0x2);
	wr(e, ch(1, PLDMA_CH_CTRL), PLDMA_CTRL_NACK | PLDMA_CTRL_IRQ_EN);
	st = rd(e, ch(1, PLDMA_CH_STATUS));
	st0 = rd(e, ch(0, PLDMA_CH_STATUS));
	irq = rd(e, PLDMA_IRQ_STATUS);
	result(state(st) == PLDMA_STATE_ERROR && state(st0) == PLDMA_STATE_FAULT && (irq & 0x2),
	       "nack-one-channel", "ch1 %#x ch0 %#x irq %#x", st, st0, irq);

	/* START on a channel in fault-wait is refused and changes nothing. */
	wr(e, ch(0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st0 = rd(e, ch(0, PLDMA_CH_STATUS));
	result((st0 & PLDMA_STATUS_REJECTED) && state(st0) == PLDMA_STATE_FAULT,
	       "start-in-fault-rejected", "ch0 %#x", st0);

	wr(e, PLDMA_IRQ_STATUS, 0xffffffff);
	result(rd(e, PLDMA_IRQ_STATUS) == 0, "irq-status-w1c", "irq %#x", rd(e, PLDMA_IRQ_STATUS));
	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	ok = 1;
	for (unsigned int n = 0; n < nchan; n++)
		ok &= state(rd(e, ch(n, PLDMA_CH_STATUS))) == PLDMA_STATE_IDLE;
	result(ok, "reset-idles-all", NULL);
}

int main(int argc, char **argv)
{
	struct engine e[8];
	const char *cmd = argc > 1 ? argv[1] : "info";
	int n = find_engines(e, 8);

	if (n <= 0) {
		result(0, "model-probe", "no exanest-pldma (%04x:%04x) found in /sys/bus/pci",
		       PLDMA_PCI_VENDOR_ID, PLDMA_PCI_DEVICE_ID);
		return 1;
	}
	if (!strcmp(cmd, "info"))
		return cmd_info(e, n);
	if (!strcmp(cmd, "fault")) {
		check_fault(&e[0]);
	} else if (!strcmp(cmd, "selftest")) {
		result(1, "model-probe", NULL);
		check_identity(e, n);
		check_bad_input(&e[0]);
		check_independence(&e[n - 1]);
	} else {
		fprintf(stderr, "usage: %s info|fault|selftest\n", argv[0]);
		return 2;
	}
	return failures ? 1 : 0;
}
