// SPDX-License-Identifier: GPL-2.0-only
/*
 * pldma-probe: user-space checks of the PLDMA engine model (register map 2.0) from inside the
 * guest, with no driver bound. It maps the physical function's BAR0 through sysfs, turns on its
 * memory decoding in config space, and drives the registers directly.
 *
 * A context issues its DMA as its SR-IOV virtual function, so the DMA checks need a VF with bus
 * mastering on. User space cannot reach the config space of a VF the kernel did not create, so
 * `fault` has the kernel create VF 0 through the pci-pf-stub driver (CONFIG_PCI_PF_STUB: bound to
 * the PF with driver_override, then sriov_numvfs), turns the VF's bus mastering on through its
 * sysfs config, and removes the VF and unbinds the stub again at the end, leaving the PF as it
 * was after boot. The VF sits in its own iommu group, in its default DMA domain, where no IOVA is
 * mapped: every DMA of context 0 must fault in the SMMU, under the VF's StreamID.
 *
 *   pldma-probe info       list the engines: identity, contexts, SR-IOV layout, iommu groups
 *   pldma-probe fault      context 0's DMA as VF 0: exactly one F_TRANSLATION event, for the VF,
 *                          fault-wait, RESUME, NACK, channel independence, QUIESCE; and a
 *                          disabled VF or one without bus mastering: NO_MASTER and no DMA
 *   pldma-probe selftest   register-level behaviour without DMA: identity, SR-IOV layout, bad
 *                          input, rejected commands, absent contexts and channels, per-context
 *                          interrupt status, IRQ_SUMMARY, QUIESCE, RESET
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "guest-test.h"

#include "../../include/hw/exanest-pldma-regs.h"

/* PCI config space (include/uapi/linux/pci_regs.h) */
#define CFG_COMMAND		0x04
#define CMD_MEMORY		0x2
#define CMD_MASTER		0x4
#define EXT_CAP_SRIOV		0x10
#define SRIOV_CTRL		0x08
#define SRIOV_CTRL_VFE		0x01
#define SRIOV_CTRL_MSE		0x08
#define SRIOV_TOTAL_VF		0x0e
#define SRIOV_NUM_VF		0x10
#define SRIOV_VF_OFFSET		0x14
#define SRIOV_VF_STRIDE		0x16
#define SRIOV_VF_DID		0x1a

#define PF_STUB "/sys/bus/pci/drivers/pci-pf-stub"

struct engine {
	char bdf[256];
	char group[16];
	char gtype[32];
	int group_devices;
	int cfg;		/* sysfs config, read-write */
	unsigned int sriov;	/* SR-IOV capability offset, 0: none */
	unsigned int nctx, nchan;
	int enabled;		/* by this program, through sysfs */
	volatile uint32_t *regs;
};

struct vf {
	char bdf[256];
	char group[16];
	char gtype[32];
	int group_devices;
	int cfg;
	unsigned int sid;	/* StreamID = requester ID = bus << 8 | devfn */
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

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

static uint32_t rd(struct engine *e, unsigned int off)
{
	return e->regs[off / 4];
}

static void wr(struct engine *e, unsigned int off, uint32_t v)
{
	e->regs[off / 4] = v;
}

/* Register reg of context x's block. */
static unsigned int cx(unsigned int x, unsigned int reg)
{
	return PLDMA_CTX_BASE + x * PLDMA_CTX_STRIDE + reg;
}

/* Register reg of channel n of context x. */
static unsigned int ch(unsigned int x, unsigned int n, unsigned int reg)
{
	return cx(x, PLDMA_CH_BASE + n * PLDMA_CH_STRIDE + reg);
}

static uint32_t cfg_rd(int fd, unsigned int off, int size)
{
	uint32_t v = 0;

	if (pread(fd, &v, size, off) != size)
		return ~0u;
	return v;
}

static int cfg_wr(int fd, unsigned int off, uint32_t v, int size)
{
	return pwrite(fd, &v, size, off) == size ? 0 : -1;
}

static unsigned int find_ext_cap(int fd, unsigned int id)
{
	unsigned int off = 0x100;

	for (int i = 0; off && i < 64; i++) {
		uint32_t hdr = cfg_rd(fd, off, 4);

		if (hdr == ~0u)
			return 0;
		if ((hdr & 0xffff) == id)
			return off;
		off = hdr >> 20;
	}
	return 0;
}

/* The iommu group of a PCI function: its number, type and device count. */
static void iommu_group(const char *bdf, char *group, size_t glen, char *gtype, size_t tlen,
			int *devices)
{
	char path[PATH_MAX], link[PATH_MAX];
	struct dirent *de;
	ssize_t n;
	DIR *d;

	group[0] = gtype[0] = 0;
	*devices = 0;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/iommu_group", bdf);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return;
	link[n] = 0;
	snprintf(group, glen, "%s", strrchr(link, '/') + 1);
	snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%s/type", group);
	if (read_file(path, gtype, tlen))
		gtype[0] = 0;
	snprintf(path, sizeof(path), "/sys/kernel/iommu_groups/%s/devices", group);
	d = opendir(path);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			(*devices)++;
	if (d)
		closedir(d);
}

static volatile uint32_t *map_bar0(const char *bdf, size_t size)
{
	char path[PATH_MAX];
	void *p;
	int fd;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource0", bdf);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static int map_engine(struct engine *e)
{
	char path[PATH_MAX], on[8];
	uint32_t caps;

	iommu_group(e->bdf, e->group, sizeof(e->group), e->gtype, sizeof(e->gtype),
		    &e->group_devices);

	/* No driver has enabled the device: have the kernel enable it (memory decoding, and the
	 * root port above it, which forwards nothing until enabled); main() undoes it. The PF's
	 * bus mastering plays no part in context DMA (each context's VF issues its own).
	 */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/enable", e->bdf);
	if (read_file(path, on, sizeof(on)))
		return -1;
	if (!strcmp(on, "0")) {
		if (write_file(path, "1"))
			return -1;
		e->enabled = 1;
	}
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", e->bdf);
	e->cfg = open(path, O_RDWR);
	if (e->cfg < 0)
		return -1;
	e->sriov = find_ext_cap(e->cfg, EXT_CAP_SRIOV);

	e->regs = map_bar0(e->bdf, PLDMA_MMIO_SIZE);
	if (!e->regs)
		return -1;
	caps = rd(e, PLDMA_CAPS);
	e->nchan = caps & PLDMA_CAPS_NCHAN_MASK;
	e->nctx = (caps & PLDMA_CAPS_NCTX_MASK) >> PLDMA_CAPS_NCTX_SHIFT;
	if (e->nchan > PLDMA_MAX_CHANNELS)
		e->nchan = PLDMA_MAX_CHANNELS;
	if (e->nctx > PLDMA_MAX_CONTEXTS)
		e->nctx = PLDMA_MAX_CONTEXTS;
	return 0;
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

/* Wait until channel n of context x leaves BUSY; returns STATUS. */
static uint32_t wait_settled(struct engine *e, unsigned int x, unsigned int n)
{
	double end = now_s() + 2.0;
	uint32_t st;

	do {
		st = rd(e, ch(x, n, PLDMA_CH_STATUS));
		if ((st & PLDMA_STATUS_STATE_MASK) != PLDMA_STATE_BUSY)
			return st;
		usleep(100);
	} while (now_s() < end);
	return st;
}

static void program(struct engine *e, unsigned int x, unsigned int n, uint64_t src, uint64_t dst,
		    uint32_t len)
{
	wr(e, ch(x, n, PLDMA_CH_SRC_LO), (uint32_t)src);
	wr(e, ch(x, n, PLDMA_CH_SRC_HI), src >> 32);
	wr(e, ch(x, n, PLDMA_CH_DST_LO), (uint32_t)dst);
	wr(e, ch(x, n, PLDMA_CH_DST_HI), dst >> 32);
	wr(e, ch(x, n, PLDMA_CH_LEN), len);
}

static unsigned int state(uint32_t st)
{
	return st & PLDMA_STATUS_STATE_MASK;
}

static unsigned int err(uint32_t st)
{
	return (st & PLDMA_STATUS_ERR_MASK) >> PLDMA_STATUS_ERR_SHIFT;
}

static uint32_t irq_summary(struct engine *e, unsigned int x)
{
	return rd(e, x < 32 ? PLDMA_IRQ_SUMMARY_LO : PLDMA_IRQ_SUMMARY_HI) >> (x % 32) & 1;
}

/* SMMU event records in the kernel log ("event: KIND client: DEV sid: 0xN ... iova: 0xA"). */
struct smmu_event {
	char kind[32];
	char client[64];
	unsigned int sid;
	uint64_t iova;
};

#define MAX_EVENTS 256
static struct smmu_event ev[MAX_EVENTS];

/* Every SMMU event in the kernel log, oldest first, into ev[]; the count (at most MAX_EVENTS). */
static int smmu_events(void)
{
	char buf[8192];
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	int count = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	for (;;) {
		char *p, *q;

		n = read(fd, buf, sizeof(buf) - 1);
		if (n < 0 && errno == EPIPE)
			continue; /* overwritten records */
		if (n <= 0)
			break;
		buf[n] = 0;
		p = strstr(buf, "event: ");
		if (!p || !strstr(p, " client: ") || count == MAX_EVENTS)
			continue;
		memset(&ev[count], 0, sizeof(ev[count]));
		sscanf(p, "event: %31s client: %63s", ev[count].kind, ev[count].client);
		q = strstr(p, " sid: ");
		if (q)
			ev[count].sid = strtoul(q + 6, NULL, 16);
		q = strstr(p, " iova: ");
		if (q)
			ev[count].iova = strtoull(q + 7, NULL, 16);
		count++;
	}
	close(fd);
	return count;
}

/* The SMMU events logged after the first `before` ones, waiting a moment for the driver's
 * threaded interrupt handler to log them. Fills *last with the newest.
 */
static int new_smmu_events(int before, struct smmu_event *last)
{
	int n = 0;

	for (int i = 0; i < 50; i++) {
		n = smmu_events();
		if (n > before)
			break;
		usleep(20000);
	}
	usleep(200000);
	n = smmu_events();
	if (n > before && last)
		*last = ev[n - 1];
	return n < 0 ? -1 : n - before;
}

static int cmd_info(struct engine *e, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t ver = rd(&e[i], PLDMA_VERSION), caps = rd(&e[i], PLDMA_CAPS);

		printf("engine %s: id %#x version %u.%u contexts %u channels %u caps %#x max-len %u quantum %u bandwidth %u MB/s latency %u ns\n",
		       e[i].bdf, rd(&e[i], PLDMA_ID), ver >> 16, ver & 0xffff, e[i].nctx,
		       e[i].nchan, caps, rd(&e[i], PLDMA_MAX_LEN), rd(&e[i], PLDMA_QUANTUM),
		       rd(&e[i], PLDMA_BANDWIDTH), rd(&e[i], PLDMA_LATENCY));
		if (e[i].sriov)
			printf("engine %s: SR-IOV at %#x: TotalVFs %u NumVFs %u VF offset %u stride %u VF device %#x\n",
			       e[i].bdf, e[i].sriov, cfg_rd(e[i].cfg, e[i].sriov + SRIOV_TOTAL_VF, 2),
			       cfg_rd(e[i].cfg, e[i].sriov + SRIOV_NUM_VF, 2),
			       cfg_rd(e[i].cfg, e[i].sriov + SRIOV_VF_OFFSET, 2),
			       cfg_rd(e[i].cfg, e[i].sriov + SRIOV_VF_STRIDE, 2),
			       cfg_rd(e[i].cfg, e[i].sriov + SRIOV_VF_DID, 2));
		printf("engine %s: iommu group %s (%s, %d device%s)\n", e[i].bdf,
		       e[i].group[0] ? e[i].group : "none", e[i].gtype, e[i].group_devices,
		       e[i].group_devices == 1 ? "" : "s");
	}
	return 0;
}

/* --- VF 0, created by the kernel through pci-pf-stub ------------------------------------ */

static int sysfs_pf(struct engine *e, const char *attr, const char *val)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", e->bdf, attr);
	return write_file(path, val);
}

static void vf_destroy(struct engine *e, struct vf *vf)
{
	if (vf->regs)
		munmap((void *)vf->regs, PLDMA_VF_MMIO_SIZE);
	if (vf->cfg > 0)
		close(vf->cfg);
	memset(vf, 0, sizeof(*vf));
	sysfs_pf(e, "sriov_numvfs", "0");
	write_file(PF_STUB "/unbind", e->bdf);
	sysfs_pf(e, "driver_override", "\n");
}

/* Bind pci-pf-stub to the PF, have it enable one VF, and open that VF (context 0). */
static int vf_create(struct engine *e, struct vf *vf)
{
	char path[PATH_MAX], link[PATH_MAX];
	unsigned int dom, bus, dev, fn;
	ssize_t n;

	memset(vf, 0, sizeof(*vf));
	vf->cfg = -1;
	if (sysfs_pf(e, "driver_override", "pci-pf-stub") ||
	    write_file(PF_STUB "/bind", e->bdf) || sysfs_pf(e, "sriov_numvfs", "1"))
		return -1;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/virtfn0", e->bdf);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -1;
	link[n] = 0;
	snprintf(vf->bdf, sizeof(vf->bdf), "%s", strrchr(link, '/') + 1);
	if (sscanf(vf->bdf, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
		return -1;
	vf->sid = bus << 8 | dev << 3 | fn;
	iommu_group(vf->bdf, vf->group, sizeof(vf->group), vf->gtype, sizeof(vf->gtype),
		    &vf->group_devices);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", vf->bdf);
	vf->cfg = open(path, O_RDWR);
	if (vf->cfg < 0)
		return -1;
	/* Memory decoding only, for now: bus mastering is what the checks turn on. */
	if (cfg_wr(vf->cfg, CFG_COMMAND, CMD_MEMORY, 2))
		return -1;
	vf->regs = map_bar0(vf->bdf, PLDMA_VF_MMIO_SIZE);
	return vf->regs ? 0 : -1;
}

static void vf_master(struct vf *vf, int on)
{
	cfg_wr(vf->cfg, CFG_COMMAND, CMD_MEMORY | (on ? CMD_MASTER : 0), 2);
}

/* The VF is context 0's function: its own group, its identity page, and bus mastering gates
 * the context's DMA (the PF's plays no part).
 */
static void check_vf(struct engine *e, struct vf *vf)
{
	uint32_t st;
	int before, events;

	printf("context 0: VF %s, StreamID %#x, iommu group %s (%s, %d device%s)\n", vf->bdf,
	       vf->sid, vf->group, vf->gtype, vf->group_devices, vf->group_devices == 1 ? "" : "s");
	result(vf->group[0] && vf->group_devices == 1 && !strncmp(vf->gtype, "DMA", 3) &&
	       strcmp(vf->group, e->group) != 0, "vf-own-iommu-group",
	       "VF %s group '%s' type '%s' devices %d, PF group '%s'", vf->bdf, vf->group,
	       vf->gtype, vf->group_devices, e->group);
	result(vf->regs[PLDMA_VF_ID / 4] == PLDMA_VF_ID_MAGIC &&
	       vf->regs[PLDMA_VF_VERSION / 4] == rd(e, PLDMA_VERSION) &&
	       vf->regs[PLDMA_VF_CONTEXT / 4] == 0, "vf-identity", "id %#x version %#x context %u",
	       vf->regs[PLDMA_VF_ID / 4], vf->regs[PLDMA_VF_VERSION / 4],
	       vf->regs[PLDMA_VF_CONTEXT / 4]);

	/* VF 0 enabled, bus mastering off: no DMA, NO_MASTER, nothing reaches the SMMU. */
	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	vf_master(vf, 0);
	before = smmu_events();
	result((rd(e, cx(0, PLDMA_CTX_STATUS)) & PLDMA_CTX_FUNCTION) == 0, "vf-master-off-status",
	       "ctx status %#x", rd(e, cx(0, PLDMA_CTX_STATUS)));
	program(e, 0, 0, 0x7f1234560000ull, 0x7f1234580000ull, 4096);
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_NO_MASTER,
	       "vf-master-required", "status %#x", st);
	vf_master(vf, 1);
	result((rd(e, cx(0, PLDMA_CTX_STATUS)) & PLDMA_CTX_FUNCTION) != 0, "vf-master-on-status",
	       "ctx status %#x", rd(e, cx(0, PLDMA_CTX_STATUS)));
	/* Context 1 has no function (NumVFs is 1). */
	if (e->nctx > 1) {
		program(e, 1, 0, 0x7f1234560000ull, 0x7f1234580000ull, 4096);
		wr(e, ch(1, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
		st = rd(e, ch(1, 0, PLDMA_CH_STATUS));
		result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_NO_MASTER,
		       "disabled-vf-no-master", "ctx 1 status %#x", st);
	}
	events = new_smmu_events(before, NULL);
	result(events == 0, "no-master-no-dma", "%d SMMU events", events);
}

/* One DMA of context 0 from an unmapped IOVA: exactly one F_TRANSLATION, for VF 0. */
static void check_vf_fault(struct engine *e, struct vf *vf)
{
	const uint64_t src = 0x7f1234560000ull + 0x123, dst = 0x7f1234580000ull;
	struct smmu_event last = { 0 };
	uint32_t st, info;
	int before, events;
	uint64_t fa;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	before = smmu_events();
	program(e, 0, 0, src, dst, 4096);
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START | PLDMA_CTRL_IRQ_EN);
	st = wait_settled(e, 0, 0);
	fa = rd(e, ch(0, 0, PLDMA_CH_FAULT_LO)) |
	     (uint64_t)rd(e, ch(0, 0, PLDMA_CH_FAULT_HI)) << 32;
	info = rd(e, ch(0, 0, PLDMA_CH_FAULT_INFO));
	result(state(st) == PLDMA_STATE_FAULT, "fault-wait", "status %#x", st);
	result(fa == src && !(info & PLDMA_FAULT_WRITE) &&
	       (info & PLDMA_FAULT_CAUSE_MASK) >> PLDMA_FAULT_CAUSE_SHIFT == PLDMA_CAUSE_TRANSLATION,
	       "fault-latches", "fault addr %#" PRIx64 " info %#x", fa, info);
	result(rd(e, ch(0, 0, PLDMA_CH_DONE_BYTES)) == 0 && rd(e, ch(0, 0, PLDMA_CH_FAULTS)) == 1,
	       "fault-progress", "done %u faults %u", rd(e, ch(0, 0, PLDMA_CH_DONE_BYTES)),
	       rd(e, ch(0, 0, PLDMA_CH_FAULTS)));
	result(rd(e, cx(0, PLDMA_CTX_IRQ_STATUS)) == 1 && irq_summary(e, 0) &&
	       (rd(e, cx(0, PLDMA_CTX_STATUS)) & PLDMA_CTX_ACTIVE), "fault-interrupt-status",
	       "ctx irq %#x summary %#x ctx status %#x", rd(e, cx(0, PLDMA_CTX_IRQ_STATUS)),
	       rd(e, PLDMA_IRQ_SUMMARY_LO), rd(e, cx(0, PLDMA_CTX_STATUS)));

	events = new_smmu_events(before, &last);
	printf("smmu: %d event(s) for the access, last %s client %s sid %#x iova %#" PRIx64 "\n",
	       events, last.kind, last.client, last.sid, last.iova);
	result(events == 1 && !strcmp(last.kind, "F_TRANSLATION") && last.iova == src,
	       "one-smmu-event", "%d events, last %s iova %#" PRIx64 " (want 1 F_TRANSLATION at %#"
	       PRIx64 ")", events, last.kind, last.iova, src);
	result(events >= 1 && last.sid == vf->sid && !strcmp(last.client, vf->bdf),
	       "event-is-the-vfs", "client %s sid %#x, want VF %s sid %#x (PF %s)", last.client,
	       last.sid, vf->bdf, vf->sid, e->bdf);

	/* Retransmission without a mapping faults again, at the same place. */
	wr(e, cx(0, PLDMA_CTX_IRQ_STATUS), 1);
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_RESUME);
	st = wait_settled(e, 0, 0);
	result(state(st) == PLDMA_STATE_FAULT && rd(e, ch(0, 0, PLDMA_CH_FAULTS)) == 2,
	       "resume-refaults", "status %#x faults %u", st, rd(e, ch(0, 0, PLDMA_CH_FAULTS)));

	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_NACK);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_ABORTED, "nack-aborts",
	       "status %#x", st);
}

/* A faulting channel stalls alone; the others take commands and report their own state; QUIESCE
 * stops them all without an interrupt.
 */
static void check_independence(struct engine *e)
{
	uint32_t st, st0, irq;
	int ok = 1;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	for (unsigned int n = 0; n < e->nchan; n++) {
		program(e, 0, n, 0x100000 + n * 0x10000, 0x200000 + n * 0x10000, 8192);
		wr(e, ch(0, n, PLDMA_CH_CTRL), PLDMA_CTRL_START | PLDMA_CTRL_IRQ_EN);
	}
	for (unsigned int n = 0; n < e->nchan; n++) {
		uint64_t fa;

		st = wait_settled(e, 0, n);
		fa = rd(e, ch(0, n, PLDMA_CH_FAULT_LO)) |
		     (uint64_t)rd(e, ch(0, n, PLDMA_CH_FAULT_HI)) << 32;
		if (state(st) != PLDMA_STATE_FAULT || fa != 0x100000 + n * 0x10000) {
			printf("channel %u: status %#x fault %#" PRIx64 "\n", n, st, fa);
			ok = 0;
		}
	}
	result(ok, "all-channels-fault", NULL);
	irq = rd(e, cx(0, PLDMA_CTX_IRQ_STATUS));
	result(irq == (1u << e->nchan) - 1, "irq-status-per-channel", "ctx irq status %#x", irq);

	/* NACK channel 1 only: channel 0 stays in fault-wait with its latches intact. */
	wr(e, cx(0, PLDMA_CTX_IRQ_STATUS), 0x2);
	wr(e, ch(0, 1, PLDMA_CH_CTRL), PLDMA_CTRL_NACK | PLDMA_CTRL_IRQ_EN);
	st = rd(e, ch(0, 1, PLDMA_CH_STATUS));
	st0 = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	irq = rd(e, cx(0, PLDMA_CTX_IRQ_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && state(st0) == PLDMA_STATE_FAULT && (irq & 0x2),
	       "nack-one-channel", "ch1 %#x ch0 %#x irq %#x", st, st0, irq);

	/* START on a channel in fault-wait is refused and changes nothing. */
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st0 = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result((st0 & PLDMA_STATUS_REJECTED) && state(st0) == PLDMA_STATE_FAULT,
	       "start-in-fault-rejected", "ch0 %#x", st0);

	/* QUIESCE: every channel of the context IDLE, its interrupt status clear, and quiet. */
	wr(e, cx(0, PLDMA_CTX_CTRL), PLDMA_CTX_QUIESCE);
	usleep(10000);
	ok = 1;
	for (unsigned int n = 0; n < e->nchan; n++)
		ok &= state(rd(e, ch(0, n, PLDMA_CH_STATUS))) == PLDMA_STATE_IDLE;
	result(ok && rd(e, cx(0, PLDMA_CTX_IRQ_STATUS)) == 0 && !irq_summary(e, 0) &&
	       !(rd(e, cx(0, PLDMA_CTX_STATUS)) & PLDMA_CTX_ACTIVE), "quiesce-idles-context",
	       "ctx irq %#x ctx status %#x", rd(e, cx(0, PLDMA_CTX_IRQ_STATUS)),
	       rd(e, cx(0, PLDMA_CTX_STATUS)));
	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
}

/* Without pci-pf-stub: SR-IOV on through the PF's config space. The VF exists but the kernel
 * does not know it, so nothing can turn its bus mastering on: context 0 is NO_MASTER.
 */
static void check_raw_sriov(struct engine *e)
{
	uint16_t ctrl = cfg_rd(e->cfg, e->sriov + SRIOV_CTRL, 2);
	uint16_t num = cfg_rd(e->cfg, e->sriov + SRIOV_NUM_VF, 2);
	uint32_t st, cst;
	int before, events;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	before = smmu_events();
	cfg_wr(e->cfg, e->sriov + SRIOV_CTRL, ctrl & ~SRIOV_CTRL_VFE, 2);
	cfg_wr(e->cfg, e->sriov + SRIOV_NUM_VF, 1, 2);
	cfg_wr(e->cfg, e->sriov + SRIOV_CTRL, ctrl | SRIOV_CTRL_VFE | SRIOV_CTRL_MSE, 2);
	cst = rd(e, cx(0, PLDMA_CTX_STATUS));
	program(e, 0, 0, 0x7f1234560000ull, 0x7f1234580000ull, 4096);
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	cfg_wr(e->cfg, e->sriov + SRIOV_CTRL, ctrl & ~SRIOV_CTRL_VFE, 2);
	cfg_wr(e->cfg, e->sriov + SRIOV_NUM_VF, num, 2);
	cfg_wr(e->cfg, e->sriov + SRIOV_CTRL, ctrl, 2);
	events = new_smmu_events(before, NULL);
	result(!(cst & PLDMA_CTX_FUNCTION) && state(st) == PLDMA_STATE_ERROR &&
	       err(st) == PLDMA_ERR_NO_MASTER && events == 0, "vf-master-required",
	       "ctx status %#x status %#x, %d SMMU events", cst, st, events);
	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
}

static void check_fault(struct engine *e)
{
	struct vf vf;
	char drv[PATH_MAX], path[PATH_MAX];
	uint16_t ctrl;
	ssize_t n;

	if (!e->sriov) {
		result(0, "sriov-capability", "%s has no SR-IOV capability", e->bdf);
		return;
	}
	if (access(PF_STUB, F_OK)) {
		check_raw_sriov(e);
		result(0, "vf-dma", "no pci-pf-stub driver (CONFIG_PCI_PF_STUB=y): without it user "
		       "space cannot turn a VF's bus mastering on, so context DMA through the SMMU "
		       "is not checked");
		return;
	}
	if (vf_create(e, &vf)) {
		result(0, "vf-create", "%s: pci-pf-stub, sriov_numvfs=1, VF config/resource0: %s",
		       e->bdf, strerror(errno));
		vf_destroy(e, &vf);
		return;
	}
	result(1, "vf-create", NULL);
	check_vf(e, &vf);
	check_vf_fault(e, &vf);
	check_independence(e);
	vf_destroy(e, &vf);

	/* The PF as after boot: no VFs, SR-IOV off, no driver. */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", e->bdf);
	n = readlink(path, drv, sizeof(drv) - 1);
	ctrl = cfg_rd(e->cfg, e->sriov + SRIOV_CTRL, 2);
	result(n < 0 && !(ctrl & SRIOV_CTRL_VFE) &&
	       cfg_rd(e->cfg, e->sriov + SRIOV_NUM_VF, 2) == 0, "sriov-restored",
	       "driver %s, SR-IOV control %#x, NumVFs %u", n < 0 ? "none" : "bound", ctrl,
	       cfg_rd(e->cfg, e->sriov + SRIOV_NUM_VF, 2));
}

/* --- Register-level checks, no DMA -------------------------------------------------------- */

static void check_identity(struct engine *e, int n)
{
	static char sfx[300];

	for (int i = 0; i < n; i++) {
		uint32_t caps = rd(&e[i], PLDMA_CAPS);
		int fd = e[i].cfg;
		unsigned int s = e[i].sriov;

		snprintf(sfx, sizeof(sfx), "@%s", e[i].bdf);
		result_suffix = sfx;

		result(rd(&e[i], PLDMA_ID) == PLDMA_ID_MAGIC &&
		       rd(&e[i], PLDMA_VERSION) == (PLDMA_VERSION_MAJOR << 16 | PLDMA_VERSION_MINOR),
		       "model-id-version", "%s: id %#x version %#x", e[i].bdf, rd(&e[i], PLDMA_ID),
		       rd(&e[i], PLDMA_VERSION));
		result(e[i].nchan >= 1 && e[i].nctx >= 1 && (caps & PLDMA_CAPS_RESUME) &&
		       (caps & PLDMA_CAPS_INTX) && (caps & PLDMA_CAPS_SRIOV) &&
		       rd(&e[i], PLDMA_QUANTUM) >= 4096, "model-caps", "%s: caps %#x quantum %u",
		       e[i].bdf, caps, rd(&e[i], PLDMA_QUANTUM));
		result(s && cfg_rd(fd, s + SRIOV_TOTAL_VF, 2) == e[i].nctx &&
		       cfg_rd(fd, s + SRIOV_VF_OFFSET, 2) == PLDMA_VF_OFFSET &&
		       cfg_rd(fd, s + SRIOV_VF_STRIDE, 2) == PLDMA_VF_STRIDE &&
		       cfg_rd(fd, s + SRIOV_VF_DID, 2) == PLDMA_PCI_VF_DEVICE_ID &&
		       cfg_rd(fd, s + SRIOV_NUM_VF, 2) == 0 &&
		       !(cfg_rd(fd, s + SRIOV_CTRL, 2) & SRIOV_CTRL_VFE), "sriov-layout",
		       "%s: SR-IOV at %#x TotalVFs %u offset %u stride %u VF device %#x NumVFs %u "
		       "control %#x (contexts %u)", e[i].bdf, s, cfg_rd(fd, s + SRIOV_TOTAL_VF, 2),
		       cfg_rd(fd, s + SRIOV_VF_OFFSET, 2), cfg_rd(fd, s + SRIOV_VF_STRIDE, 2),
		       cfg_rd(fd, s + SRIOV_VF_DID, 2), cfg_rd(fd, s + SRIOV_NUM_VF, 2),
		       cfg_rd(fd, s + SRIOV_CTRL, 2), e[i].nctx);
		result(e[i].group[0] && e[i].group_devices == 1 && !strncmp(e[i].gtype, "DMA", 3),
		       "behind-smmu", "%s: group '%s' type '%s' devices %d", e[i].bdf, e[i].group,
		       e[i].gtype, e[i].group_devices);
	}
	result_suffix = "";
	if (n >= 2)
		result(strcmp(e[0].group, e[1].group) != 0, "own-iommu-group",
		       "%s and %s share group %s", e[0].bdf, e[1].bdf, e[0].group);
}

static void check_bad_input(struct engine *e)
{
	uint32_t max = rd(e, PLDMA_MAX_LEN), st;
	unsigned int x = e->nctx - 1;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	program(e, x, 1 % e->nchan, 0x10000, 0x20000, 0);
	wr(e, ch(x, 1 % e->nchan, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(x, 1 % e->nchan, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_BAD_LEN, "bad-len-zero",
	       "status %#x", st);

	program(e, 0, 0, 0x10000, 0x20000, max + 1);
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result(max < UINT32_MAX && state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_BAD_LEN,
	       "bad-len-too-big", "max %u status %#x", max, st);

	program(e, 0, 0, UINT64_MAX - 10, 0x20000, 4096);
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_BAD_ADDR, "bad-addr-wrap",
	       "status %#x", st);

	program(e, 0, 0, 0x10000, 0x10800, 4096);
	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result(state(st) == PLDMA_STATE_ERROR && err(st) == PLDMA_ERR_OVERLAP, "bad-overlap",
	       "status %#x", st);

	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_RESUME);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result((st & PLDMA_STATUS_REJECTED) && state(st) == PLDMA_STATE_ERROR, "resume-rejected",
	       "status %#x", st);

	wr(e, ch(0, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START | PLDMA_CTRL_NACK);
	st = rd(e, ch(0, 0, PLDMA_CH_STATUS));
	result((st & PLDMA_STATUS_REJECTED) != 0, "two-strobes-rejected", "status %#x", st);

	/* Unknown offsets, absent contexts and channels read as zero and ignore writes; the model
	 * must not fall over.
	 */
	wr(e, 0xffc, 0xdeadbeef);
	wr(e, cx(0, 0xfc), 0xdeadbeef);
	if (e->nctx < PLDMA_MAX_CONTEXTS) {
		wr(e, ch(e->nctx, 0, PLDMA_CH_LEN), 0x1234);
		wr(e, ch(e->nctx, 0, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	}
	if (e->nchan < PLDMA_MAX_CHANNELS) {
		wr(e, ch(0, e->nchan, PLDMA_CH_LEN), 0x1234);
		wr(e, ch(0, e->nchan, PLDMA_CH_CTRL), PLDMA_CTRL_START);
	}
	result(rd(e, 0xffc) == 0 && rd(e, cx(0, 0xfc)) == 0 &&
	       (e->nctx == PLDMA_MAX_CONTEXTS || rd(e, ch(e->nctx, 0, PLDMA_CH_LEN)) == 0) &&
	       (e->nchan == PLDMA_MAX_CHANNELS || rd(e, ch(0, e->nchan, PLDMA_CH_LEN)) == 0) &&
	       rd(e, PLDMA_ID) == PLDMA_ID_MAGIC, "unknown-offsets", NULL);
	wr(e, PLDMA_SCRATCH, 0xa5a5f00d);
	result(rd(e, PLDMA_SCRATCH) == 0xa5a5f00d, "scratch", "scratch %#x", rd(e, PLDMA_SCRATCH));
}

/* With SR-IOV off (as after boot) every START ends in NO_MASTER at once: per-context interrupt
 * status, the summary, RW1C, QUIESCE and RESET without any DMA.
 */
static void check_interrupt_status(struct engine *e)
{
	unsigned int last = e->nctx - 1, all = (1u << e->nchan) - 1;
	uint32_t st, irq0, irql;
	int ok = 1;

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	for (unsigned int n = 0; n < e->nchan; n++) {
		program(e, 0, n, 0x100000, 0x200000, 4096);
		wr(e, ch(0, n, PLDMA_CH_CTRL), PLDMA_CTRL_START | PLDMA_CTRL_IRQ_EN);
		program(e, last, n, 0x100000, 0x200000, 4096);
		wr(e, ch(last, n, PLDMA_CH_CTRL), PLDMA_CTRL_START | PLDMA_CTRL_IRQ_EN);
	}
	for (unsigned int n = 0; n < e->nchan; n++) {
		st = rd(e, ch(last, n, PLDMA_CH_STATUS));
		if (state(st) != PLDMA_STATE_ERROR || err(st) != PLDMA_ERR_NO_MASTER) {
			printf("context %u channel %u: status %#x\n", last, n, st);
			ok = 0;
		}
	}
	result(ok && !(rd(e, cx(0, PLDMA_CTX_STATUS)) & PLDMA_CTX_FUNCTION), "no-vf-no-master",
	       "ctx 0 status %#x", rd(e, cx(0, PLDMA_CTX_STATUS)));
	irq0 = rd(e, cx(0, PLDMA_CTX_IRQ_STATUS));
	irql = rd(e, cx(last, PLDMA_CTX_IRQ_STATUS));
	result(irq0 == all && irql == all && irq_summary(e, 0) && irq_summary(e, last),
	       "ctx-irq-status", "ctx 0 %#x ctx %u %#x summary %#x/%#x", irq0, last, irql,
	       rd(e, PLDMA_IRQ_SUMMARY_LO), rd(e, PLDMA_IRQ_SUMMARY_HI));

	wr(e, cx(0, PLDMA_CTX_IRQ_STATUS), 0x1);
	irq0 = rd(e, cx(0, PLDMA_CTX_IRQ_STATUS));
	result(irq0 == (all & ~1u) && rd(e, cx(last, PLDMA_CTX_IRQ_STATUS)) == all,
	       "ctx-irq-status-w1c", "ctx 0 %#x", irq0);

	wr(e, cx(last, PLDMA_CTX_CTRL), PLDMA_CTX_QUIESCE);
	ok = rd(e, cx(last, PLDMA_CTX_IRQ_STATUS)) == 0 && !irq_summary(e, last) &&
	     (last == 0 || irq_summary(e, 0) == ((all & ~1u) != 0));
	for (unsigned int n = 0; n < e->nchan; n++)
		ok &= state(rd(e, ch(last, n, PLDMA_CH_STATUS))) == PLDMA_STATE_IDLE;
	result(ok, "quiesce", "ctx %u irq %#x summary %#x/%#x", last,
	       rd(e, cx(last, PLDMA_CTX_IRQ_STATUS)), rd(e, PLDMA_IRQ_SUMMARY_LO),
	       rd(e, PLDMA_IRQ_SUMMARY_HI));

	wr(e, PLDMA_RESET, PLDMA_RESET_MAGIC);
	ok = rd(e, PLDMA_IRQ_SUMMARY_LO) == 0 && rd(e, PLDMA_IRQ_SUMMARY_HI) == 0;
	for (unsigned int x = 0; x < e->nctx; x++)
		for (unsigned int n = 0; n < e->nchan; n++)
			ok &= state(rd(e, ch(x, n, PLDMA_CH_STATUS))) == PLDMA_STATE_IDLE;
	result(ok, "reset-idles-all", NULL);
}

/* Leave the engines as found: disabled again if this program enabled them. */
static void release_engines(struct engine *e, int n)
{
	char path[PATH_MAX];

	for (int i = 0; i < n; i++) {
		munmap((void *)e[i].regs, PLDMA_MMIO_SIZE);
		close(e[i].cfg);
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/enable", e[i].bdf);
		if (e[i].enabled && write_file(path, "0"))
			perror(path);
	}
}

int main(int argc, char **argv)
{
	struct engine e[8];
	const char *cmd = argc > 1 ? argv[1] : "info";
	int n = find_engines(e, 8), ret = 0;

	if (n <= 0) {
		result(0, "model-probe", "no exanest-pldma (%04x:%04x) found in /sys/bus/pci",
		       PLDMA_PCI_VENDOR_ID, PLDMA_PCI_DEVICE_ID);
		return 1;
	}
	if (!strcmp(cmd, "info")) {
		ret = cmd_info(e, n);
	} else if (!strcmp(cmd, "fault")) {
		check_fault(&e[0]);
	} else if (!strcmp(cmd, "selftest")) {
		result(1, "model-probe", NULL);
		check_identity(e, n);
		check_bad_input(&e[0]);
		check_interrupt_status(&e[n - 1]);
	} else {
		fprintf(stderr, "usage: %s info|fault|selftest\n", argv[0]);
		ret = 2;
	}
	release_engines(e, n);
	return ret ? ret : failures ? 1 : 0;
}
