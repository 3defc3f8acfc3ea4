// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-fuzz: random ioctls on /dev/exanest-dma0 (and /dev/exanest-dma1) from several threads,
 * while another thread maps, unmaps and re-protects the memory they register and copy.
 *
 *   exanest-fuzz [-n CALLS] [-t THREADS] [-s SEED]
 *
 * CALLS (default 100000) ioctls in all, from THREADS threads (default 4), in four rounds on fresh
 * files: one fd shared by every thread, then four fds (dma0, twice more through dup(), and dma1)
 * with a forked child issuing calls on the fds it inherited; again one fd, again four. Closing
 * the files at the end of a round ends the copies still in flight.
 *
 * What is checked (Documentation/abi.rst is the contract):
 *  - every call returns 0 or an errno that abi.rst documents for it (ok_errnos[] below, each with
 *    the abi.rst text it comes from); a command number the driver does not define gets ENOTTY;
 *  - an argument pointer the kernel cannot reach (NULL, a low address, a kernel address, a
 *    PROT_NONE page, a struct straddling into one) gets EFAULT, and a read-only one cannot get a
 *    success from a call that writes its struct back;
 *  - a request the ABI refuses (flags, reserved or out fields set, zero or wrapping lengths,
 *    ranges past 2^48, overlapping copies, a bad mode, access or window) never succeeds;
 *  - only the opener may REG, DEREG, COPY, WAIT and ADVISE: the forked child never succeeds at
 *    them, and EPERM is accepted from no one else;
 *  - what a success returns is sane (a handle and a cookie are never 0, a copy's status is one
 *    abi.rst lists, INFO's reserved words are zero);
 *  - memory never handed to the engine never changes: a guard buffer next to the registered
 *    memory (regions may end right before it and start right after it, in pages they share with
 *    it), never registered and never a copy destination, keeps its pattern (checked by the
 *    mapping thread as it goes, at the end of every round and at the end).
 *
 * The seed is printed first ("exanest-fuzz: seed N"): -s N replays the same requests in every
 * thread (the threads interleave differently). At the end: calls, elapsed time, and per call the
 * count of successes and of each errno.
 *
 * Safety of the fuzzer itself: the engine can only write where a writable region lies, so every
 * REG whose range could be accepted lies in the arena below (never over the guard, never over
 * the fuzzer's own stacks or data), and REG arguments are never read from memory a copy can
 * write. Arguments of the other calls may be: they can do no harm there.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "exanest-test.h"

#define DEFAULT_CALLS	100000
#define DEFAULT_THREADS	4
#define MAX_THREADS	32
#define ROUNDS		4
#define CHILD_SHARE	20	/* the forked child issues 1/CHILD_SHARE of a round's calls */

/* The arena, in pages. */
#define ARGS_R_PAGES	2	/* REG arguments (1 page), COPY arguments (1 page) */
#define SLOT_PAGES	4	/* what the mapper remaps at most at once */
#define ZONE_SLOTS	24	/* slots of each of the two remapped zones */
#define GUARD_PAGES	8
#define GUARD_HEAD	328	/* guard bytes at the end of the page before the guard pages */
#define GUARD_TAIL	184	/* and at the start of the page after them */
#define ARGS_D_PAGES	4	/* shared arguments that copies may write */
#define TAIL_PAGES	64	/* PROT_NONE */

#define MAX_LIVE	10	/* regions a thread keeps */
#define MAX_PENDING	16	/* copies a thread keeps track of */
#define MAX_STALE	16
#define RING		64
#define HIST_MAX	134	/* errnos counted one by one; the last bucket holds the rest */
#define MAX_REPORTS	40
#define VA_LIMIT	(1ull << 48)
#define SURELY_UNKNOWN	(1ull << 40)	/* cookies count up from 1: none ever gets this far */

enum call {
	C_INFO, C_REG, C_DEREG, C_COPY, C_WAIT, C_COUNTERS, C_ADVISE, C_LATENCY, C_REGION_STATS,
	C_BADCMD, NCALLS
};

static const char *const call_name[NCALLS] = {
	"INFO", "REG", "DEREG", "COPY", "WAIT", "COUNTERS", "ADVISE", "LATENCY", "REGION_STATS",
	"unknown-cmd",
};

static const unsigned int call_cmd[NCALLS] = {
	EXANEST_DMA_IOC_INFO, EXANEST_DMA_IOC_REG, EXANEST_DMA_IOC_DEREG, EXANEST_DMA_IOC_COPY,
	EXANEST_DMA_IOC_WAIT, EXANEST_DMA_IOC_COUNTERS, EXANEST_DMA_IOC_ADVISE,
	EXANEST_DMA_IOC_LATENCY, EXANEST_DMA_IOC_REGION_STATS, 0,
};

/*
 * The errnos Documentation/abi.rst documents per call, besides EPERM (accepted only from the
 * forked child, for the five calls the opener alone may make: "REG, DEREG, COPY, WAIT and ADVISE
 * must come from the process (the mm) that opened the device: another process ... gets EPERM")
 * and ENODEV (only after an unbind, which this program does not do). For every call: "Every
 * struct's flags and reserved fields and every out field must be zero on input (EINVAL). A
 * pointer argument the kernel cannot read or write gives EFAULT."
 */
static const int ok_errnos[NCALLS][10] = {
	[C_INFO] = { EFAULT },
	/* EINVAL length 0, access, mode, flags, reserved, window; EOVERFLOW wraps; EFAULT past
	 * 2^48 or not mapped (pin); EACCES prefault; EOPNOTSUPP mode not implemented; ENOSPC
	 * max_regions or max_registered_mib; ENOMEM pin past RLIMIT_MEMLOCK (or no memory for
	 * the driver, which the fuzzer does not expect: no memory pressure here); EAGAIN and EINTR
	 * prefault fault-in retries ran out or a fatal signal.
	 */
	[C_REG] = { EINVAL, EOVERFLOW, EFAULT, EACCES, EOPNOTSUPP, ENOSPC, ENOMEM, EAGAIN, EINTR },
	/* ENOENT unknown handle (or 0); EBUSY a copy in flight uses the region. */
	[C_DEREG] = { EINVAL, EFAULT, ENOENT, EBUSY },
	/* EINVAL length 0, overlap, flags; E2BIG; EOVERFLOW; EFAULT; EACCES; EAGAIN. */
	[C_COPY] = { EINVAL, E2BIG, EOVERFLOW, EFAULT, EACCES, EAGAIN },
	/* ENOENT unknown or already collected cookie; ETIMEDOUT; EINTR on a signal. */
	[C_WAIT] = { EINVAL, EFAULT, ENOENT, ETIMEDOUT, EINTR },
	[C_COUNTERS] = { EFAULT },
	/* EINVAL length 0 or unknown flags; EOVERFLOW; EFAULT outside every region or no memory
	 * behind it; EACCES the region or the mapping lacks the access; EAGAIN the memory or the
	 * region kept changing; EINTR a fatal signal; ENOMEM no memory for the driver.
	 */
	[C_ADVISE] = { EINVAL, EOVERFLOW, EFAULT, EACCES, EAGAIN, EINTR, ENOMEM },
	[C_LATENCY] = { EFAULT },
	/* EINVAL mode, counters or reserved words set; ENOENT unknown handle (or 0). */
	[C_REGION_STATS] = { EINVAL, ENOENT, EFAULT },
	/* Not in abi.rst: the kernel's convention for a command a driver does not know. */
	[C_BADCMD] = { ENOTTY },
};

/* A copy's own status (WAIT's "status"): 0, -EFAULT, -EACCES, -EAGAIN, -ENOMEM, -ECANCELED,
 * -ENODEV, -EIO.
 */
static const int ok_status[] = { 0, -EFAULT, -EACCES, -EAGAIN, -ENOMEM, -ECANCELED, -ENODEV, -EIO };

static bool opener_only(int call)
{
	return call == C_REG || call == C_DEREG || call == C_COPY || call == C_WAIT ||
	       call == C_ADVISE;
}

/* Calls that write their struct back on success. */
static bool writes_back(int call)
{
	return call != C_DEREG && call != C_ADVISE && call != C_BADCMD;
}

/* Where an ioctl's argument points. */
enum ak {
	AK_PRIV,	/* the thread's own page */
	AK_MIS,		/* the same, misaligned */
	AK_STRADDLE,	/* the end of the thread's page, running into a PROT_NONE page */
	AK_RO,		/* a read-only page of the thread, filled at the start */
	AK_NULL,
	AK_LOW,		/* 1 .. 4095 */
	AK_KERNEL,	/* 0xffff000000000000 and the like */
	AK_PROTNONE,	/* the arena's PROT_NONE tail */
	AK_ZONE,	/* memory the mapper remaps, unmaps and re-protects (not REG, COPY) */
	AK_DARGS,	/* shared arguments, in memory copies may write (not REG, COPY) */
	AK_SHARED,	/* shared REG or COPY arguments, written by every thread */
	AK_SHIFTED,	/* the thread's page, 8 to 40 bytes past the struct it wrote */
	NAK
};

static const char *const ak_name[NAK] = {
	"private", "misaligned", "straddling-PROT_NONE", "read-only", "NULL", "low", "kernel",
	"PROT_NONE", "remapped-zone", "shared-dma", "shared", "shifted",
};

static bool ak_stable(enum ak k)
{
	return k == AK_PRIV || k == AK_MIS;
}

static bool ak_unreachable(enum ak k)
{
	return k == AK_STRADDLE || k == AK_NULL || k == AK_LOW || k == AK_KERNEL ||
	       k == AK_PROTNONE;
}

union args {
	struct exanest_dma_info info;
	struct exanest_dma_reg reg;
	struct exanest_dma_dereg dereg;
	struct exanest_dma_copy copy;
	struct exanest_dma_wait wait;
	struct exanest_dma_counters counters;
	struct exanest_dma_advise advise;
	struct exanest_dma_latency latency;
	struct exanest_dma_region_stats region_stats;
	uint8_t raw[1024];
};

struct region {
	uint64_t addr, len;
	uint32_t handle, access, mode;
	int dev;
	bool known;	/* the range is known (registered through a stable argument) */
};

struct worker {
	int id;
	bool child;
	uint64_t rng;
	uint8_t *priv;		/* RW page, PROT_NONE page, read-only page */
	struct region live[MAX_LIVE];
	int nlive;
	struct { uint32_t handle; int dev; } stale[MAX_STALE];
	int nstale;
	struct { uint64_t cookie; int dev; } pend[MAX_PENDING];
	int npend;
	long quota;		/* the child's own count of calls */
	uint64_t hist[NCALLS][HIST_MAX + 1];
	uint64_t status_ok, status_err;
	pthread_t thread;
};

/* The arena: every registrable byte, the guard, the shared arguments. */
static struct {
	size_t pg, slot;
	uint8_t *base, *end;
	uint8_t *args_reg, *args_copy, *zone[2], *f1, *f2, *dargs, *tail;
	uint8_t *guard_lo, *guard_hi;	/* the guard: [guard_lo, guard_hi) */
	uint8_t *guard_expect;
} A;

/* Per instance, for the current round. */
static struct devstate {
	uint32_t ring[RING];
	unsigned int ring_pos;
	uint32_t max_handle;
	uint64_t max_cookie;
	uint64_t swept;		/* the sweep collected every copy below this cookie */
	int sweeping;
} D[2];

static struct {
	uint64_t seed;
	long calls;
	int threads;
	struct exanest_dma_info info;
	int nfd, fd[4], dev[4], ndev;
	int round;
	long quota, issued;
	int stop;
	long failures, reports;
	long guard_checks, guard_bad;
	long map_ops[6];
} G = { .calls = DEFAULT_CALLS, .threads = DEFAULT_THREADS };

static const char *const map_op_name[6] = {
	"munmap", "mmap", "mprotect-ro", "mprotect-none", "mprotect-rw", "madvise-dontneed",
};

/* ---- output: one write() per line, as a TAP comment ---- */

static void __printf(1, 2) say(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	line[0] = '#';
	line[1] = ' ';
	va_start(ap, fmt);
	n = vsnprintf(line + 2, sizeof(line) - 3, fmt, ap) + 2;
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDOUT_FILENO, line, n) != n)
		_exit(KSFT_FAIL);
}

static const char *errname(int e)
{
	static const char *const names[] = {
		[EPERM] = "EPERM", [ENOENT] = "ENOENT", [EINTR] = "EINTR", [EIO] = "EIO",
		[E2BIG] = "E2BIG", [EBADF] = "EBADF", [EAGAIN] = "EAGAIN", [ENOMEM] = "ENOMEM",
		[EACCES] = "EACCES", [EFAULT] = "EFAULT", [EBUSY] = "EBUSY", [ENODEV] = "ENODEV",
		[EINVAL] = "EINVAL", [ENOTTY] = "ENOTTY", [ENOSPC] = "ENOSPC",
		[EOVERFLOW] = "EOVERFLOW", [EOPNOTSUPP] = "EOPNOTSUPP", [ETIMEDOUT] = "ETIMEDOUT",
		[ECANCELED] = "ECANCELED", [ERANGE] = "ERANGE",
	};
	static __thread char other[16];

	if (e == 0)
		return "ok";
	if (e > 0 && e < (int)ARRAY_SIZE(names) && names[e])
		return names[e];
	snprintf(other, sizeof(other), "errno %d", e);
	return other;
}

static void __printf(2, 3) failure(struct worker *w, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	__atomic_fetch_add(&G.failures, 1, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&G.reports, 1, __ATOMIC_RELAXED) >= MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	say("FAIL %s %d, round %d: %s", w->child ? "child" : "thread", w->id, G.round + 1, msg);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- randomness: splitmix64, one state per thread ---- */

static uint64_t rnd(struct worker *w)
{
	uint64_t z = (w->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t below(struct worker *w, uint64_t n)
{
	return n ? rnd(w) % n : 0;
}

static bool chance(struct worker *w, unsigned int pct)
{
	return below(w, 100) < pct;
}

static void seed_worker(struct worker *w, int round)
{
	w->rng = G.seed ^ ((uint64_t)(round + 1) << 56) ^
		 ((uint64_t)(w->id + 1) * 0xd1b54a32d192ed03ull);
	rnd(w);
}

/* ---- addresses ---- */

static uint64_t ua(const void *p)
{
	return (uintptr_t)p;
}

/* The guard lies in [guard_lo, guard_hi): nothing registrable reaches into it. */
enum span {
	SPAN_A,		/* [zone A, guard): writable regions too */
	SPAN_AR,	/* [REG arguments, guard): read-only regions only */
	SPAN_B,		/* [guard end, arena end): writable regions too */
	SPAN_DARGS,	/* the shared arguments copies may write, inside SPAN_B */
};

static void span_bounds(enum span s, uint64_t *lo, uint64_t *hi)
{
	switch (s) {
	case SPAN_A:
		*lo = ua(A.zone[0]);
		*hi = ua(A.guard_lo);
		break;
	case SPAN_AR:
		*lo = ua(A.args_reg);
		*hi = ua(A.guard_lo);
		break;
	case SPAN_B:
		*lo = ua(A.guard_hi);
		*hi = ua(A.end);
		break;
	case SPAN_DARGS:
		*lo = ua(A.dargs);
		*hi = ua(A.tail);
		break;
	}
}

/* A range [*addr, *addr + *len) inside span s, of any alignment; often next to the guard. */
static void span_range(struct worker *w, enum span s, __u64 *addr, __u64 *len)
{
	uint64_t lo, hi, a, room, l;
	bool edge = false;

	span_bounds(s, &lo, &hi);
	switch (below(w, 10)) {
	case 0:	/* ending right before the guard, or starting right after it */
		edge = s != SPAN_B;
		a = edge ? hi - 1 - below(w, 3 * A.pg) : lo;
		break;
	case 1:
	case 2:
	case 3:
		a = (lo + below(w, hi - lo)) & ~(uint64_t)(A.pg - 1);
		if (a < lo)
			a = lo;
		break;
	default:
		a = lo + below(w, hi - lo);
		break;
	}
	room = hi - a;
	switch (edge ? 0 : below(w, 10)) {
	case 0:
		l = room;
		break;
	case 1:
	case 2:
	case 3:
		l = 1 + below(w, room);
		break;
	default:
		l = 1 + below(w, room < 65536 ? room : 65536);
		break;
	}
	*addr = a;
	*len = l;
}

/* Addresses no region can cover. */
static uint64_t kernel_addr(struct worker *w)
{
	static const uint64_t k[] = {
		0xffff000000000000ull, 0xffff800008000000ull, 0xfffffffffffff000ull,
		0xffffffffffffffffull, 0x8000000000000000ull, VA_LIMIT, VA_LIMIT + 4096,
		0x00ff000000001000ull,
	};

	return k[below(w, ARRAY_SIZE(k))] + (chance(w, 30) ? below(w, 4096) : 0);
}

/* A length for ranges that need not be sane. */
static uint64_t wild_len(struct worker *w)
{
	switch (below(w, 11)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return 1 + below(w, 64);
	case 3: return 1 + below(w, 65536);
	case 4: return 1 + below(w, 1 << 20);
	case 5: return G.info.max_transfer;
	case 6: return G.info.max_transfer + 1;
	case 7: return UINT64_MAX;
	case 8: return VA_LIMIT;
	case 9: return rnd(w);
	default: return 1 + below(w, A.pg);
	}
}

/* A pointer for a copy's source (guard included) or destination (guard excluded). */
static uint64_t wild_ptr(struct worker *w, bool dst)
{
	__u64 a, l;

	switch (below(w, dst ? 9 : 10)) {
	case 0:
	case 1:
		span_range(w, SPAN_A, &a, &l);
		return a;
	case 2:
	case 3:
		span_range(w, SPAN_B, &a, &l);
		return a;
	case 4:
		span_range(w, SPAN_AR, &a, &l);
		return a;
	case 5:
		return below(w, 4096);
	case 6:
		return kernel_addr(w);
	case 7:
		return VA_LIMIT - below(w, 2 * A.pg) - 1;
	case 8:
		return rnd(w);
	default:
		return ua(A.guard_lo) + below(w, A.guard_hi - A.guard_lo);
	}
}

static bool range_bad(uint64_t addr, uint64_t len)
{
	return len == 0 || addr + len < addr || addr + len > VA_LIMIT;
}

/* ---- request generators: they fill *a and say whether the ABI must refuse it ---- */

/* One of the thread's regions on instance dev: any, or with a known range and access want. */
static struct region *pick_live(struct worker *w, int dev, uint32_t want)
{
	int n = 0, idx[MAX_LIVE];

	for (int i = 0; i < w->nlive; i++)
		if (w->live[i].dev == dev &&
		    (!want || (w->live[i].known && (w->live[i].access & want))))
			idx[n++] = i;
	return n ? &w->live[idx[below(w, n)]] : NULL;
}

static int count_live(struct worker *w, int dev)
{
	int n = 0;

	for (int i = 0; i < w->nlive; i++)
		n += w->live[i].dev == dev;
	return n;
}

static uint32_t pick_handle(struct worker *w, int dev)
{
	struct devstate *d = &D[dev];
	struct region *r;
	unsigned int r100 = below(w, 100);

	r = pick_live(w, dev, 0);
	if (r100 < 45 && r)
		return r->handle;
	if (r100 < 60)
		return __atomic_load_n(&d->ring[below(w, RING)], __ATOMIC_RELAXED);
	if (r100 < 70 && w->nstale)
		return w->stale[below(w, w->nstale)].handle;
	if (r100 < 85)
		return 1 + below(w, __atomic_load_n(&d->max_handle, __ATOMIC_RELAXED) + 8);
	if (r100 < 90)
		return 0;
	return rnd(w);
}

static bool reg_doomed(const struct exanest_dma_reg *r)
{
	bool window = r->flags & EXANEST_DMA_REG_WINDOW;
	bool bound = r->flags & EXANEST_DMA_REG_INITIATOR;

	const uint32_t remote = EXANEST_DMA_ACCESS_REMOTE_READ | EXANEST_DMA_ACCESS_REMOTE_WRITE;
	const uint32_t all = EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE | remote;

	return (r->flags & ~(EXANEST_DMA_REG_WINDOW | EXANEST_DMA_REG_INITIATOR)) || r->handle ||
	       r->rkey ||
	       /* ABI 8: a key bound to a node needs a key and a node id */
	       (!bound && r->initiator) || (bound && (!(r->access & remote) || r->initiator >= 64)) ||
	       (!window && r->touch_ahead) ||
	       (window && r->touch_ahead > EXANEST_DMA_MAX_WINDOW &&
		r->touch_ahead != EXANEST_DMA_WINDOW_ADAPTIVE) ||
	       !r->access || (r->access & ~all) ||
	       /* ABI 4: a remote right needs its local one */
	       ((r->access & EXANEST_DMA_ACCESS_REMOTE_READ) &&
		!(r->access & EXANEST_DMA_ACCESS_READ)) ||
	       ((r->access & EXANEST_DMA_ACCESS_REMOTE_WRITE) &&
		!(r->access & EXANEST_DMA_ACCESS_WRITE)) ||
	       r->mode > EXANEST_DMA_MODE_ON_DEMAND || range_bad(r->addr, r->length);
}

/*
 * A REG request. Its range is in a span, in the NULL page, or one no region can have (past 2^48,
 * wrapping, empty): never over the guard, and writable only where copies may write.
 */
static void gen_reg(struct worker *w, struct exanest_dma_reg *r)
{
	static const uint32_t windows[] = {
		0, 1, 16, EXANEST_DMA_MAX_WINDOW, EXANEST_DMA_MAX_WINDOW + 1,
		EXANEST_DMA_WINDOW_ADAPTIVE, 0x7fffffff,
	};
	unsigned int r100;

	memset(r, 0, sizeof(*r));
	r->mode = below(w, 3);
	if (chance(w, 3))
		r->mode = chance(w, 50) ? 3 + below(w, 8) : (uint32_t)rnd(w);
	r->access = 1 + below(w, 3);
	if (chance(w, 3)) {
		uint32_t x = rnd(w);

		r->access = chance(w, 30) ? 0 : x & ~3u ? x : x | 4;
	}
	if (chance(w, 20)) {
		r->flags = EXANEST_DMA_REG_WINDOW;
		r->touch_ahead = chance(w, 50) ? below(w, EXANEST_DMA_MAX_WINDOW + 1)
					       : windows[below(w, ARRAY_SIZE(windows))];
	}
	if (chance(w, 2))
		r->flags |= 1u << (1 + below(w, 31));
	if (chance(w, 2))
		r->touch_ahead = 1 + below(w, 1000);
	if (chance(w, 2))
		r->handle = 1 + below(w, 100);
	if (chance(w, 2))
		r->initiator = 1 + (uint32_t)below(w, UINT32_MAX);
	if (chance(w, 4)) {
		r->flags |= EXANEST_DMA_REG_INITIATOR;
		r->initiator = below(w, 70);
	}
	if (chance(w, 2))
		r->rkey = rnd(w) | 1;

	r100 = below(w, 100);
	if (r100 < 35) {
		span_range(w, SPAN_A, &r->addr, &r->length);
	} else if (r100 < 45) {
		span_range(w, SPAN_AR, &r->addr, &r->length);
	} else if (r100 < 75) {
		span_range(w, SPAN_B, &r->addr, &r->length);
	} else if (r100 < 85) {
		span_range(w, SPAN_DARGS, &r->addr, &r->length);
	} else if (r100 < 89) {
		r->addr = below(w, 4096);
		r->length = 1 + below(w, 4096 - r->addr);
	} else {
		switch (below(w, 6)) {
		case 0:
			span_range(w, SPAN_B, &r->addr, &r->length);
			r->length = 0;
			break;
		case 1:
			r->addr = kernel_addr(w);
			r->length = wild_len(w);
			break;
		case 2:
			r->addr = UINT64_MAX - below(w, 4096);
			r->length = 4097 + below(w, 1 << 20);
			break;
		case 3:
			r->addr = VA_LIMIT - 1 - below(w, 2 * A.pg);
			r->length = 2 * A.pg + 1 + below(w, 1 << 20);
			break;
		case 4:
			span_range(w, SPAN_A, &r->addr, &r->length);
			r->length = VA_LIMIT + below(w, 1 << 20);
			break;
		default:
			span_range(w, SPAN_B, &r->addr, &r->length);
			r->length = UINT64_MAX - below(w, 16);
			break;
		}
	}
	/* No writable region over the REG and COPY arguments. */
	if (r->addr < ua(A.zone[0]) && r->addr + r->length > ua(A.args_reg) &&
	    !range_bad(r->addr, r->length))
		r->access &= ~EXANEST_DMA_ACCESS_WRITE;
}

/*
 * A REG request that may be read torn, field by field, from the shared arguments or written back
 * over: any mix of its fields with those of another such request is still harmless. Addresses
 * lie in [guard end, PROT_NONE tail) or past 2^48, lengths are at most the tail's, or past 2^48.
 */
static void reg_harmless_mix(struct worker *w, struct exanest_dma_reg *r)
{
	uint64_t tail = (uint64_t)TAIL_PAGES * A.pg;

	if (r->addr < VA_LIMIT && (r->addr < ua(A.guard_hi) || r->addr >= ua(A.tail)))
		r->addr = ua(A.guard_hi) + below(w, ua(A.tail) - ua(A.guard_hi));
	if (r->length > tail && r->length < VA_LIMIT)
		r->length = below(w, tail + 1);
}

static bool copy_doomed(const struct exanest_dma_copy *c)
{
	return c->flags || c->channel || c->cookie || range_bad(c->src, c->length) ||
	       range_bad(c->dst, c->length) || c->length > G.info.max_transfer ||
	       (c->src < c->dst + c->length && c->dst < c->src + c->length);
}

static void gen_copy(struct worker *w, int dev, struct exanest_dma_copy *c)
{
	struct region *s = pick_live(w, dev, EXANEST_DMA_ACCESS_READ);
	struct region *d = pick_live(w, dev, EXANEST_DMA_ACCESS_WRITE);
	static const uint64_t caps[] = { 64, 4096, 65536, UINT64_MAX };

	memset(c, 0, sizeof(*c));
	if (s && d && chance(w, 65)) {
		uint64_t os = below(w, s->len), od = below(w, d->len);
		uint64_t room = s->len - os < d->len - od ? s->len - os : d->len - od;
		uint64_t cap = caps[below(w, 4)];

		c->src = s->addr + os;
		c->dst = d->addr + od;
		c->length = 1 + below(w, room < cap ? room : cap);
	} else {
		c->src = wild_ptr(w, false);
		c->dst = wild_ptr(w, true);
		c->length = chance(w, 50) ? 1 + below(w, 65536) : wild_len(w);
	}
	if (chance(w, 3))
		c->flags = (uint32_t)rnd(w) | 1;
	if (chance(w, 2))
		c->channel = 1 + below(w, 8);
	if (chance(w, 2))
		c->cookie = rnd(w) | 1;
}

static bool wait_doomed(const struct exanest_dma_wait *x)
{
	return x->flags || x->status || x->bytes_done || !x->cookie;
}

static void gen_wait(struct worker *w, int dev, struct exanest_dma_wait *x, int *pend_idx)
{
	uint64_t maxc = __atomic_load_n(&D[dev].max_cookie, __ATOMIC_RELAXED);
	unsigned int r100 = below(w, 100);

	memset(x, 0, sizeof(*x));
	*pend_idx = -1;
	if (r100 < 40 && w->npend) {
		int i = below(w, w->npend);

		if (w->pend[i].dev == dev) {
			*pend_idx = i;
			x->cookie = w->pend[i].cookie;
		} else {
			x->cookie = 1 + below(w, maxc + 2);
		}
	} else if (r100 < 60) {
		x->cookie = (maxc > 8 ? maxc - 8 : 1) + below(w, 11);
	} else if (r100 < 65) {
		x->cookie = 0;
	} else if (r100 < 75) {
		x->cookie = rnd(w) | SURELY_UNKNOWN;
	} else if (r100 < 90) {
		x->cookie = 1 + below(w, maxc + 16);
	} else {
		x->cookie = rnd(w);
	}
	/* Short waits only, unless no copy can have the cookie. */
	if (x->cookie && x->cookie < SURELY_UNKNOWN) {
		x->timeout_ns = chance(w, 50) ? 0 : 1 + below(w, 2000000);
	} else {
		static const int64_t t[] = { -1, INT64_MIN, 0, INT64_MAX, 1000 };

		x->timeout_ns = chance(w, 80) ? t[below(w, 5)] : (int64_t)rnd(w);
	}
	if (chance(w, 3))
		x->flags = (uint32_t)rnd(w) | 1;
	if (chance(w, 2))
		x->status = (int32_t)(rnd(w) | 1);
	if (chance(w, 2))
		x->bytes_done = rnd(w) | 1;
}

static bool advise_doomed(const struct exanest_dma_advise *x)
{
	return (x->flags & ~EXANEST_DMA_ADVISE_WRITE) || x->reserved ||
	       range_bad(x->addr, x->length);
}

static void gen_advise(struct worker *w, int dev, struct exanest_dma_advise *x)
{
	struct region *r = pick_live(w, dev, EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE);

	memset(x, 0, sizeof(*x));
	if (r && chance(w, 65)) {
		uint64_t off = below(w, r->len);

		x->addr = r->addr + off;
		x->length = 1 + below(w, r->len - off);
		if (chance(w, 20) && x->addr > 0) {	/* one byte before the region */
			x->addr--;
			x->length++;
		}
	} else {
		x->addr = wild_ptr(w, false);
		x->length = wild_len(w);
	}
	x->flags = chance(w, 50) ? EXANEST_DMA_ADVISE_WRITE : 0;
	if (chance(w, 3)) {
		uint32_t f = rnd(w);

		x->flags |= f & ~1u ? f : 2;
	}
	if (chance(w, 3))
		x->reserved = (uint32_t)rnd(w) | 1;
}

/* A command number the driver does not define (and that the VFS does not take itself). */
static unsigned int gen_badcmd(struct worker *w)
{
	/* Types of the generic ioctls the VFS answers before the driver (fs/ioctl.c). */
	static const uint8_t vfs_types[] = { 0x00, 0x15, 'T', 'X', 'f', 0x94 };
	unsigned int cmd;

	for (;;) {
		unsigned int real = call_cmd[below(w, C_BADCMD)];
		bool valid = false;
		uint8_t type;

		switch (below(w, 4)) {
		case 0:
			cmd = _IOC(below(w, 4), EXANEST_DMA_IOC_MAGIC, below(w, 256),
				   below(w, 1 << 14));
			break;
		case 1:	/* a real command with another size */
			cmd = real ^ (unsigned int)((1 + below(w, 255)) << 16);
			break;
		case 2:	/* a real command in another direction */
			cmd = real ^ (unsigned int)((1 + below(w, 3)) << 30);
			break;
		default:
			cmd = rnd(w);
			break;
		}
		type = (cmd >> 8) & 0xff;
		for (unsigned int i = 0; i < sizeof(vfs_types); i++)
			if (type == vfs_types[i])
				cmd = (cmd & ~0xff00u) | (EXANEST_DMA_IOC_MAGIC << 8);
		for (int i = 0; i < C_BADCMD; i++)
			valid |= cmd == call_cmd[i];
		/*
		 * Defined, though the fuzzer does not call them (BUDGET would only shrink the
		 * budget; the queue, the mailbox and the port's counters have tests of their own).
		 */
		valid |= cmd == EXANEST_DMA_IOC_BUDGET || cmd == EXANEST_DMA_IOC_QUEUE_CREATE ||
			 cmd == EXANEST_DMA_IOC_QUEUE_WAIT || cmd == EXANEST_DMA_IOC_MBOX_CREATE ||
			 cmd == EXANEST_DMA_IOC_NET_COUNTERS || cmd == EXANEST_DMA_IOC_MBOX_WAIT;
		if (!valid)
			return cmd;
	}
}

/* ---- one call ---- */

struct req {
	int call, fd, dev;
	unsigned int cmd;
	size_t size;
	enum ak ak;
	void *p;
	union args sent;	/* what the thread asked for (what the kernel read, if stable) */
	bool doomed;		/* the ABI must refuse it */
	int pend_idx;
};

static size_t cmd_size(unsigned int cmd)
{
	return _IOC_SIZE(cmd);
}

static enum ak pick_ak(struct worker *w, int call)
{
	unsigned int r100 = below(w, 100);
	enum ak k;

	if (r100 < 62)
		return AK_PRIV;
	if (r100 < 70)
		return AK_MIS;
	k = AK_STRADDLE + below(w, AK_SHIFTED - AK_STRADDLE + 1);
	if (call == C_REG || call == C_COPY) {
		if (k == AK_ZONE || k == AK_DARGS || k == AK_SHIFTED)
			k = AK_SHARED;
	} else if (k == AK_SHARED) {
		k = AK_DARGS;
	}
	return k;
}

/* Word by word, so that a concurrent reader sees each 8-byte field whole. */
static void store_words(void *dst, const void *src, size_t n)
{
	uint64_t *d = dst, v;

	for (size_t i = 0; i < n / 8; i++) {
		memcpy(&v, (const uint8_t *)src + 8 * i, 8);
		__atomic_store_n(&d[i], v, __ATOMIC_RELAXED);
	}
}

static void load_words(void *dst, const void *src, size_t n)
{
	const uint64_t *s = src;
	uint64_t v;

	for (size_t i = 0; i < n / 8; i++) {
		v = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
		memcpy((uint8_t *)dst + 8 * i, &v, 8);
	}
}

#define RO_REG_SLOTS	40	/* REG requests at the start of the read-only page, 48 bytes each */
#define RO_COPY_OFF	2048	/* COPY requests from here, 40 bytes each */
#define RO_COPY_SLOTS	50

/* Put the argument where c->ak says and set c->p; c->sent is what the kernel should find. */
static void place(struct worker *w, struct req *c)
{
	uint8_t *rw = w->priv, *ro = w->priv + 2 * A.pg;
	size_t size = c->size, room;

	switch (c->ak) {
	case AK_PRIV:
		c->p = rw;
		memcpy(c->p, &c->sent, size);
		break;
	case AK_MIS:
		c->p = rw + 1 + below(w, 7);
		memcpy(c->p, &c->sent, size);
		break;
	case AK_STRADDLE:
		room = size > 1 ? 1 + below(w, size - 1) : 0;
		c->p = rw + A.pg - room;
		memcpy(c->p, &c->sent, room);
		break;
	case AK_RO:
		if (c->call == C_REG)
			c->p = ro + 48 * below(w, RO_REG_SLOTS);
		else if (c->call == C_COPY)
			c->p = ro + RO_COPY_OFF + 40 * below(w, RO_COPY_SLOTS);
		else
			c->p = ro + below(w, A.pg - size + 1);
		memcpy(&c->sent, c->p, size);
		break;
	case AK_NULL:
		c->p = NULL;
		break;
	case AK_LOW:
		c->p = (void *)(uintptr_t)(1 + below(w, 4095));
		break;
	case AK_KERNEL:
		c->p = (void *)(uintptr_t)kernel_addr(w);
		break;
	case AK_PROTNONE:
		c->p = A.tail + below(w, (size_t)TAIL_PAGES * A.pg - size);
		break;
	case AK_ZONE:
		/* Not in the last slot of a zone: the struct stays clear of the guard. */
		c->p = A.zone[below(w, 2)] + below(w, (ZONE_SLOTS - 1) * A.slot);
		break;
	case AK_DARGS:
		c->p = A.dargs + below(w, (size_t)ARGS_D_PAGES * A.pg - size + 1);
		memcpy(c->p, &c->sent, size);
		break;
	case AK_SHARED:
		if (c->call == C_REG)
			c->p = A.args_reg + 48 * below(w, A.pg / 48);
		else
			c->p = A.args_copy + 40 * below(w, A.pg / 40);
		store_words(c->p, &c->sent, size);
		break;
	case AK_SHIFTED:
		memcpy(rw, &c->sent, size);
		c->p = rw + 8 * (1 + below(w, 5));
		break;
	default:
		break;
	}
}

static void describe(const struct req *c, char *buf, size_t n)
{
	const union args *a = &c->sent;
	int k;

	k = snprintf(buf, n, "%s (cmd %#x) on fd %d (dma%d), argument %s %p",
		     call_name[c->call], c->cmd, c->fd, c->dev, ak_name[c->ak], c->p);
	if (k < 0 || (size_t)k >= n || !(ak_stable(c->ak) || c->ak == AK_RO || c->ak == AK_SHARED))
		return;
	buf += k;
	n -= k;
	switch (c->call) {
	case C_REG:
		snprintf(buf, n, " {addr %#llx length %#llx access %#x mode %u flags %#x handle %u "
			 "touch_ahead %#x initiator %#x rkey %#llx}",
			 (unsigned long long)a->reg.addr, (unsigned long long)a->reg.length,
			 a->reg.access, a->reg.mode, a->reg.flags, a->reg.handle,
			 a->reg.touch_ahead, a->reg.initiator, (unsigned long long)a->reg.rkey);
		break;
	case C_DEREG:
		snprintf(buf, n, " {handle %u flags %#x}", a->dereg.handle, a->dereg.flags);
		break;
	case C_COPY:
		snprintf(buf, n, " {src %#llx dst %#llx length %#llx flags %#x channel %u "
			 "cookie %llu}",
			 (unsigned long long)a->copy.src, (unsigned long long)a->copy.dst,
			 (unsigned long long)a->copy.length, a->copy.flags, a->copy.channel,
			 (unsigned long long)a->copy.cookie);
		break;
	case C_WAIT:
		snprintf(buf, n, " {cookie %llu timeout_ns %lld flags %#x status %d "
			 "bytes_done %llu}",
			 (unsigned long long)a->wait.cookie, (long long)a->wait.timeout_ns,
			 a->wait.flags, a->wait.status, (unsigned long long)a->wait.bytes_done);
		break;
	case C_ADVISE:
		snprintf(buf, n, " {addr %#llx length %#llx flags %#x reserved %#x}",
			 (unsigned long long)a->advise.addr, (unsigned long long)a->advise.length,
			 a->advise.flags, a->advise.reserved);
		break;
	case C_REGION_STATS:
		snprintf(buf, n, " {handle %u mode %u faults %llu pages_resolved %llu "
			 "reserved %#llx %#llx}",
			 a->region_stats.handle, a->region_stats.mode,
			 (unsigned long long)a->region_stats.faults,
			 (unsigned long long)a->region_stats.pages_resolved,
			 (unsigned long long)a->region_stats.reserved[0],
			 (unsigned long long)a->region_stats.reserved[1]);
		break;
	default:
		break;
	}
}

static bool errno_ok(const struct worker *w, int call, int err)
{
	if (err == EPERM)
		return w->child && opener_only(call);
	for (int i = 0; i < 10 && ok_errnos[call][i]; i++)
		if (ok_errnos[call][i] == err)
			return true;
	return false;
}

/* What a success handed back, from a stable argument. */
static const char *check_out(struct worker *w, const struct req *c, const union args *out)
{
	switch (c->call) {
	case C_INFO:
		if (out->info.abi_version != EXANEST_DMA_ABI_VERSION)
			return "INFO abi_version is not EXANEST_DMA_ABI_VERSION";
		for (int i = 0; i < 2; i++)
			if (out->info.reserved[i])
				return "INFO reserved word not zero";
		if (out->info.context >= out->info.contexts &&
		    out->info.context != EXANEST_DMA_NO_CONTEXT)
			return "INFO context is neither below contexts nor EXANEST_DMA_NO_CONTEXT";
		if (G.info.abi_version && (out->info.modes != G.info.modes ||
					   out->info.max_transfer != G.info.max_transfer))
			return "INFO changed during the run";
		break;
	case C_REG:
		if (!out->reg.handle)
			return "REG handed back handle 0";
		if (!!out->reg.rkey != !!(c->sent.reg.access & (EXANEST_DMA_ACCESS_REMOTE_READ |
								EXANEST_DMA_ACCESS_REMOTE_WRITE)))
			return "REG handed back an rkey without remote access, or none with it";
		break;
	case C_COPY:
		if (!out->copy.cookie)
			return "COPY handed back cookie 0";
		if (out->copy.channel >= G.info.channels && out->copy.channel != UINT32_MAX)
			return "COPY handed back a channel the engine does not have";
		break;
	case C_WAIT: {
		bool known = false;

		for (unsigned int i = 0; i < ARRAY_SIZE(ok_status); i++)
			known |= out->wait.status == ok_status[i];
		if (!known)
			return "WAIT: a copy status abi.rst does not list";
		if (out->wait.bytes_done > G.info.max_transfer)
			return "WAIT: bytes_done above max_transfer";
		if (out->wait.status)
			w->status_err++;
		else
			w->status_ok++;
		break;
	}
	case C_REGION_STATS:
		if (out->region_stats.mode > EXANEST_DMA_MODE_ON_DEMAND)
			return "REGION_STATS: unknown mode";
		if (out->region_stats.reserved[0] || out->region_stats.reserved[1])
			return "REGION_STATS: reserved word not zero";
		break;
	default:
		break;
	}
	return NULL;
}

/* Issue the call, count it, judge it. Returns 0 or the errno; *out gets a stable success. */
static int issue(struct worker *w, struct req *c, union args *out)
{
	const char *why = NULL;
	char desc[600];
	long ret;
	int err;

	ret = ioctl(c->fd, c->cmd, c->p);
	err = ret < 0 ? errno : 0;
	w->hist[c->call][err < HIST_MAX ? err : HIST_MAX]++;

	if (ret > 0) {
		why = "a positive return value";
	} else if (err) {
		bool stable = ak_stable(c->ak);

		if (!errno_ok(w, c->call, err))
			why = err != EPERM ? "an errno abi.rst does not document for this call"
			      : w->child ? "EPERM for a call any holder of the file may make"
			      : "EPERM in the process that opened the file";
		else if (ak_unreachable(c->ak) && c->call != C_BADCMD && err != EFAULT)
			why = "not EFAULT for an argument the kernel cannot reach";
		else if (stable && c->call == C_REG && err == ENOMEM &&
			 c->sent.reg.mode != EXANEST_DMA_MODE_PIN)
			why = "ENOMEM from a REG that pins nothing (abi.rst: pin mode)";
		else if (stable && c->call == C_REG && err == EACCES &&
			 c->sent.reg.mode != EXANEST_DMA_MODE_PREFAULT)
			why = "EACCES from a REG outside prefault mode (abi.rst: prefault)";
		else if (stable && c->call == C_REG && err == EOPNOTSUPP &&
			 c->sent.reg.mode <= EXANEST_DMA_MODE_ON_DEMAND &&
			 (G.info.modes & (1u << c->sent.reg.mode)))
			why = "EOPNOTSUPP for a mode INFO says is implemented";
	} else {
		if (c->call == C_BADCMD)
			why = "an unknown command succeeded";
		else if (ak_unreachable(c->ak))
			why = "success with an argument the kernel cannot reach";
		else if (c->ak == AK_RO && writes_back(c->call))
			why = "success with a read-only argument the call must write back";
		else if (w->child && opener_only(c->call))
			why = "success in a process that did not open the file";
		else if (ak_stable(c->ak) && c->doomed)
			why = "the ABI must refuse this request, and it succeeded";
		if (!why && ak_stable(c->ak)) {
			memcpy(out, c->p, c->size);
			why = check_out(w, c, out);
		}
	}
	if (why) {
		describe(c, desc, sizeof(desc));
		failure(w, "%s -> %ld, %s: %s", desc, ret, errname(err), why);
	}
	return err;
}

/* ---- bookkeeping of handles and cookies ---- */

static void note_handle(int dev, uint32_t h)
{
	struct devstate *d = &D[dev];
	uint32_t m = __atomic_load_n(&d->max_handle, __ATOMIC_RELAXED);
	unsigned int pos = __atomic_fetch_add(&d->ring_pos, 1, __ATOMIC_RELAXED);

	__atomic_store_n(&d->ring[pos % RING], h, __ATOMIC_RELAXED);
	while (h > m && h < (1u << 20) &&
	       !__atomic_compare_exchange_n(&d->max_handle, &m, h, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

static void note_cookie(int dev, uint64_t cookie)
{
	uint64_t m = __atomic_load_n(&D[dev].max_cookie, __ATOMIC_RELAXED);

	while (cookie > m && cookie < SURELY_UNKNOWN &&
	       !__atomic_compare_exchange_n(&D[dev].max_cookie, &m, cookie, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void add_stale(struct worker *w, uint32_t h, int dev)
{
	int i = w->nstale < MAX_STALE ? w->nstale++ : (int)below(w, MAX_STALE);

	w->stale[i].handle = h;
	w->stale[i].dev = dev;
}

static void drop_live(struct worker *w, uint32_t h, int dev)
{
	for (int i = 0; i < w->nlive; i++) {
		if (w->live[i].handle == h && w->live[i].dev == dev) {
			w->live[i] = w->live[--w->nlive];
			add_stale(w, h, dev);
			return;
		}
	}
}

static void drop_pending(struct worker *w, int i)
{
	w->pend[i] = w->pend[--w->npend];
}

/*
 * Collect the copies of instance dev that nobody knows the cookie of (their COPY wrote it back to
 * read-only memory, or to shared memory another call overwrote): cookies count up from 1, so
 * poll every cookie from the first one a previous sweep found still running. One thread at a
 * time per instance.
 */
static void sweep(struct worker *w, int fd, int dev)
{
	struct devstate *d = &D[dev];
	uint64_t maxc = __atomic_load_n(&d->max_cookie, __ATOMIC_RELAXED);
	uint64_t from = d->swept ? d->swept : 1, running = 0;
	union args out;

	if (w->child || __atomic_exchange_n(&d->sweeping, 1, __ATOMIC_ACQUIRE))
		return;
	if (maxc > from + 256)
		from = maxc - 256;
	for (uint64_t k = from; k <= maxc + 2; k++) {
		struct req c = { .call = C_WAIT, .fd = fd, .dev = dev, .cmd = EXANEST_DMA_IOC_WAIT,
				  .size = sizeof(struct exanest_dma_wait), .ak = AK_PRIV };

		c.sent.wait.cookie = k;
		place(w, &c);
		if (issue(w, &c, &out) == ETIMEDOUT && !running)
			running = k;
	}
	d->swept = running ? running : maxc + 1;
	__atomic_store_n(&d->sweeping, 0, __ATOMIC_RELEASE);
}

/* DEREG a handle now, through a stable argument. */
static void dereg_now(struct worker *w, int fd, int dev, uint32_t handle)
{
	struct req c = { .call = C_DEREG, .fd = fd, .dev = dev, .cmd = EXANEST_DMA_IOC_DEREG,
			  .size = sizeof(struct exanest_dma_dereg), .ak = AK_PRIV };
	union args out;

	c.sent.dereg.handle = handle;
	c.doomed = !handle;
	place(w, &c);
	issue(w, &c, &out);
}

static int pick_call(struct worker *w, int dev)
{
	static const struct { int call, weight; } mix[] = {
		{ C_REG, 20 }, { C_DEREG, 12 }, { C_COPY, 22 }, { C_WAIT, 16 }, { C_ADVISE, 8 },
		{ C_REGION_STATS, 5 }, { C_INFO, 3 }, { C_COUNTERS, 3 }, { C_LATENCY, 2 },
		{ C_BADCMD, 9 },
	};
	int r = below(w, 100), call = C_BADCMD;

	for (unsigned int i = 0; i < ARRAY_SIZE(mix); i++) {
		if (r < mix[i].weight) {
			call = mix[i].call;
			break;
		}
		r -= mix[i].weight;
	}
	if (call == C_REG && (w->nlive >= MAX_LIVE || count_live(w, dev) >= MAX_LIVE / 2 + 2))
		call = C_DEREG;
	if (call == C_COPY && w->npend >= MAX_PENDING)
		call = C_WAIT;
	return call;
}

static void one_call(struct worker *w)
{
	int fi = below(w, G.nfd);
	struct req c = { .fd = G.fd[fi], .dev = G.dev[fi], .pend_idx = -1 };
	union args *a = &c.sent, out;
	uint32_t handle = 0;
	int err;

	c.call = pick_call(w, c.dev);
	c.cmd = c.call == C_BADCMD ? gen_badcmd(w) : call_cmd[c.call];
	c.size = cmd_size(c.cmd);
	if (c.size > sizeof(union args))
		c.size = sizeof(union args);
	c.ak = pick_ak(w, c.call);
	memset(a, 0, sizeof(*a));
	switch (c.call) {
	case C_INFO:
	case C_COUNTERS:
	case C_LATENCY:
		/* Out-only structs: what they hold on input does not matter. */
		if (chance(w, 20))
			for (size_t i = 0; i < c.size; i++)
				a->raw[i] = rnd(w);
		break;
	case C_REG:
		gen_reg(w, &a->reg);
		if (c.ak == AK_SHARED)
			reg_harmless_mix(w, &a->reg);
		c.doomed = reg_doomed(&a->reg);
		break;
	case C_DEREG: {
		/* Mostly one of the thread's own when it holds many. */
		struct region *r = pick_live(w, c.dev, 0);

		handle = r && count_live(w, c.dev) > MAX_LIVE / 2 && chance(w, 70) ?
			 r->handle : pick_handle(w, c.dev);
		a->dereg.handle = handle;
		if (chance(w, 4))
			a->dereg.flags = (uint32_t)rnd(w) | 1;
		c.doomed = !a->dereg.handle || a->dereg.flags;
		break;
	}
	case C_COPY:
		gen_copy(w, c.dev, &a->copy);
		c.doomed = copy_doomed(&a->copy);
		break;
	case C_WAIT:
		gen_wait(w, c.dev, &a->wait, &c.pend_idx);
		c.doomed = wait_doomed(&a->wait);
		break;
	case C_ADVISE:
		gen_advise(w, c.dev, &a->advise);
		c.doomed = advise_doomed(&a->advise);
		break;
	case C_REGION_STATS:
		a->region_stats.handle = pick_handle(w, c.dev);
		if (chance(w, 3))
			a->region_stats.mode = 1 + below(w, 3);
		if (chance(w, 2))
			a->region_stats.faults = rnd(w) | 1;
		if (chance(w, 2))
			a->region_stats.pages_resolved = rnd(w) | 1;
		if (chance(w, 2))
			a->region_stats.reserved[below(w, 2)] = rnd(w) | 1;
		c.doomed = !a->region_stats.handle || a->region_stats.mode ||
			   a->region_stats.faults || a->region_stats.pages_resolved ||
			   a->region_stats.reserved[0] || a->region_stats.reserved[1];
		break;
	default:
		for (size_t i = 0; i < 64; i++)
			a->raw[i] = rnd(w);
		break;
	}
	place(w, &c);
	err = issue(w, &c, &out);
	if (w->child)
		return;

	/* Follow the handles and cookies. */
	switch (c.call) {
	case C_REG:
		if (err)
			break;
		if (ak_stable(c.ak)) {
			struct region *r = &w->live[w->nlive < MAX_LIVE ? w->nlive++ : 0];

			*r = (struct region){ .addr = a->reg.addr, .len = a->reg.length,
					      .handle = out.reg.handle, .access = a->reg.access,
					      .mode = a->reg.mode, .dev = c.dev, .known = true };
			note_handle(c.dev, out.reg.handle);
		} else if (c.ak == AK_SHARED) {
			/* The handle, unless another thread wrote over it: keep it to DEREG it. */
			struct exanest_dma_reg back;

			load_words(&back, c.p, sizeof(back));
			note_handle(c.dev, back.handle);
			if (w->nlive < MAX_LIVE)
				w->live[w->nlive++] = (struct region){ .handle = back.handle,
								       .dev = c.dev };
			else
				dereg_now(w, c.fd, c.dev, back.handle);
		}
		break;
	case C_DEREG:
		if (ak_stable(c.ak) && (!err || err == ENOENT))
			drop_live(w, handle, c.dev);
		break;
	case C_COPY:
		if (err == EAGAIN) {
			sweep(w, c.fd, c.dev);
		} else if (!err && ak_stable(c.ak)) {
			note_cookie(c.dev, out.copy.cookie);
			if (w->npend < MAX_PENDING) {
				w->pend[w->npend].cookie = out.copy.cookie;
				w->pend[w->npend++].dev = c.dev;
			}
		} else if (!err && c.ak == AK_SHARED) {
			struct exanest_dma_copy back;

			load_words(&back, c.p, sizeof(back));
			note_cookie(c.dev, back.cookie);
			if (w->npend < MAX_PENDING && back.cookie) {
				w->pend[w->npend].cookie = back.cookie;
				w->pend[w->npend++].dev = c.dev;
			}
		}
		break;
	case C_WAIT:
		if (c.pend_idx >= 0 && ak_stable(c.ak) && !c.doomed && err != ETIMEDOUT &&
		    err != EINTR)
			drop_pending(w, c.pend_idx);
		break;
	default:
		break;
	}
}

/* ---- the guard ---- */

static void guard_check(struct worker *w, const char *when)
{
	size_t n = A.guard_hi - A.guard_lo, first = n, diff = 0;

	__atomic_fetch_add(&G.guard_checks, 1, __ATOMIC_RELAXED);
	if (!memcmp(A.guard_lo, A.guard_expect, n))
		return;
	for (size_t i = 0; i < n; i++) {
		if (A.guard_lo[i] != A.guard_expect[i]) {
			diff++;
			if (first == n)
				first = i;
		}
	}
	if (__atomic_fetch_add(&G.guard_bad, 1, __ATOMIC_RELAXED))
		return;	/* reported once */
	failure(w, "guard changed (%s): %zu of %zu bytes differ, the first at %p (offset %zu: "
		"0x%02x instead of 0x%02x); the guard is [%p, %p), never registered",
		when, diff, n, A.guard_lo + first, first, A.guard_lo[first], A.guard_expect[first],
		A.guard_lo, A.guard_hi);
	memcpy(A.guard_lo, A.guard_expect, n);	/* report a later change again */
	__atomic_store_n(&G.guard_bad, 0, __ATOMIC_RELAXED);
}

/* ---- the mapper: remaps, unmaps and re-protects the zones under the other threads ---- */

enum { PS_RW, PS_RO, PS_NONE, PS_GONE };
static uint8_t pstate[2][ZONE_SLOTS * SLOT_PAGES];

static bool all_mapped(int z, int p0, int np)
{
	for (int i = p0; i < p0 + np; i++)
		if (pstate[z][i] == PS_GONE)
			return false;
	return true;
}

static void set_state(int z, int p0, int np, uint8_t s)
{
	memset(&pstate[z][p0], s, np);
}

static void mapper_op(struct worker *w)
{
	int z = below(w, 2), slot = below(w, ZONE_SLOTS);
	int p0 = slot * SLOT_PAGES + below(w, SLOT_PAGES);
	int np = 1 + below(w, (slot + 1) * SLOT_PAGES - p0);
	uint8_t *addr = A.zone[z] + (size_t)p0 * A.pg;
	size_t len = (size_t)np * A.pg;
	unsigned int r100 = below(w, 100);
	int ret = 0, op;

	if (r100 >= 30 && !all_mapped(z, p0, np))
		r100 = 20;	/* mprotect and madvise want it mapped */
	if (r100 < 12) {
		op = 0;
		ret = munmap(addr, len);
		set_state(z, p0, np, PS_GONE);
	} else if (r100 < 30) {
		int flags = (chance(w, 25) ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_FIXED;

		op = 1;
		ret = mmap(addr, len, PROT_READ | PROT_WRITE, flags, -1, 0) == MAP_FAILED ? -1 : 0;
		set_state(z, p0, np, PS_RW);
	} else if (r100 < 45) {
		op = 2;
		ret = mprotect(addr, len, PROT_READ);
		set_state(z, p0, np, PS_RO);
	} else if (r100 < 53) {
		op = 3;
		ret = mprotect(addr, len, PROT_NONE);
		set_state(z, p0, np, PS_NONE);
	} else if (r100 < 70) {
		op = 4;
		ret = mprotect(addr, len, PROT_READ | PROT_WRITE);
		set_state(z, p0, np, PS_RW);
	} else if (r100 < 80) {
		op = 5;
		ret = madvise(addr, len, MADV_DONTNEED);
	} else {
		/* Write to the writable pages: data for the copies, faults for the notifiers. */
		for (int i = p0; i < p0 + np; i++) {
			uint8_t *page = A.zone[z] + (size_t)i * A.pg;

			if (pstate[z][i] == PS_RW)
				memset(page + below(w, A.pg - 64), (int)rnd(w), 64);
		}
		return;
	}
	__atomic_fetch_add(&G.map_ops[op], 1, __ATOMIC_RELAXED);
	if (ret)
		failure(w, "mapper: %s(%p, %zu) failed: %s", map_op_name[op], addr, len,
			strerror(errno));
}

/* Every zone page mapped, writable and fresh again. */
static int zones_restore(void)
{
	for (int z = 0; z < 2; z++) {
		if (mmap(A.zone[z], ZONE_SLOTS * A.slot, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			return -1;
		set_state(z, 0, ZONE_SLOTS * SLOT_PAGES, PS_RW);
		for (size_t i = 0; i < ZONE_SLOTS * A.slot; i += A.pg)
			A.zone[z][i + (i / A.pg) % 64] = 0xa5;
	}
	return 0;
}

static void *mapper_main(void *arg)
{
	struct worker *w = arg;
	unsigned int ops = 0;

	while (!__atomic_load_n(&G.stop, __ATOMIC_RELAXED)) {
		struct timespec ts = { 0, 20000 + below(w, 180000) };

		mapper_op(w);
		if (++ops % 32 == 0)
			guard_check(w, "while running");
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!__atomic_load_n(&G.stop, __ATOMIC_RELAXED) &&
	       __atomic_fetch_add(&G.issued, 1, __ATOMIC_RELAXED) < G.quota)
		one_call(w);
	return NULL;
}

/* ---- set-up ---- */

/* The arena (see the layout in setup_arena()), every page written once. */
static int setup_arena(void)
{
	size_t pg = A.pg, pages, off = 0;

	A.slot = SLOT_PAGES * pg;
	pages = ARGS_R_PAGES + 2 * ZONE_SLOTS * SLOT_PAGES + 1 + GUARD_PAGES + 1 + ARGS_D_PAGES +
		TAIL_PAGES;
	A.base = big_alloc(pages * pg);
	if (!A.base)
		return -1;
	/*
	 * REG args | COPY args | zone A | F1 | guard pages | F2 | zone B | shared args | tail.
	 * The guard takes the last GUARD_HEAD bytes of F1, the guard pages and the first
	 * GUARD_TAIL bytes of F2: regions may share F1 and F2 with it.
	 */
	A.args_reg = A.base;
	A.args_copy = A.base + pg;
	off = ARGS_R_PAGES * pg;
	A.zone[0] = A.base + off;
	off += ZONE_SLOTS * A.slot;
	A.f1 = A.base + off;
	off += pg + GUARD_PAGES * pg;
	A.f2 = A.base + off;
	off += pg;
	A.zone[1] = A.base + off;
	off += ZONE_SLOTS * A.slot;
	A.dargs = A.base + off;
	off += ARGS_D_PAGES * pg;
	A.tail = A.base + off;
	A.end = A.tail + TAIL_PAGES * pg;
	A.guard_lo = A.f1 + pg - GUARD_HEAD;
	A.guard_hi = A.f2 + GUARD_TAIL;

	memset(A.base, 0, A.tail - A.base);
	fill(A.f1, pg - GUARD_HEAD, 11);
	fill(A.f2 + GUARD_TAIL, pg - GUARD_TAIL, 12);
	A.guard_expect = malloc(A.guard_hi - A.guard_lo);
	if (!A.guard_expect)
		return -1;
	fill(A.guard_expect, A.guard_hi - A.guard_lo, (unsigned int)G.seed ^ 0x5eed);
	memcpy(A.guard_lo, A.guard_expect, A.guard_hi - A.guard_lo);
	if (mprotect(A.tail, TAIL_PAGES * pg, PROT_NONE))
		return -1;
	return zones_restore();
}

/*
 * A thread's pages: one for its arguments, a PROT_NONE one after it, and a read-only one holding
 * REG requests whose fields mix harmlessly, then COPY requests.
 */
static int setup_worker(struct worker *w, int id, bool child)
{
	uint8_t *ro;

	w->id = id;
	w->child = child;
	w->priv = big_alloc(3 * A.pg);
	if (!w->priv)
		return -1;
	ro = w->priv + 2 * A.pg;
	seed_worker(w, -1);
	memset(w->priv, 0, A.pg);
	for (int i = 0; i < RO_REG_SLOTS; i++) {
		struct exanest_dma_reg r;

		gen_reg(w, &r);
		reg_harmless_mix(w, &r);
		memcpy(ro + 48 * i, &r, sizeof(r));
	}
	for (int i = 0; i < RO_COPY_SLOTS; i++) {
		struct exanest_dma_copy c;

		gen_copy(w, 0, &c);
		if (chance(w, 30))
			span_range(w, SPAN_B, &c.src, &c.length);
		memcpy(ro + RO_COPY_OFF + 40 * i, &c, sizeof(c));
	}
	if (mprotect(w->priv + A.pg, A.pg, PROT_NONE) || mprotect(ro, A.pg, PROT_READ))
		return -1;
	return 0;
}

static void opt_usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-n CALLS] [-t THREADS] [-s SEED]\n"
		"  -n CALLS    ioctls in all (default %d)\n"
		"  -t THREADS  threads issuing them (default %d, at most %d)\n"
		"  -s SEED     replay the requests of an earlier run (printed first)\n",
		prog, DEFAULT_CALLS, DEFAULT_THREADS, MAX_THREADS);
}

/* ---- the test ---- */

FIXTURE(fuzz) {
	struct worker *workers;	/* G.threads workers, the mapper, the child */
};

FIXTURE_SETUP(fuzz)
{
	size_t n = (size_t)(G.threads + 2) * sizeof(struct worker);

	A.pg = sysconf(_SC_PAGESIZE);
	self->workers = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->workers);
	memset(self->workers, 0, n);
	ASSERT_EQ(0, setup_arena()) TH_LOG("arena: %s", strerror(errno));
	for (int i = 0; i < G.threads + 2; i++) {
		ASSERT_EQ(0, setup_worker(&self->workers[i], i, i == G.threads + 1))
			TH_LOG("thread pages: %s", strerror(errno));
	}
}

FIXTURE_TEARDOWN(fuzz)
{
}

/*
 * Open instance inst. An open is never EBUSY (files beyond the contexts share them): EBUSY is a
 * failure, but retried for a while to go on.
 */
static int open_again(struct worker *w, int inst)
{
	int fd = dev_open(inst), tries = 0;

	while (fd < 0 && errno == EBUSY && tries++ < 200) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL);
		fd = dev_open(inst);
	}
	if (tries) {
		int e = errno;

		failure(w, "open /dev/exanest-dma%d after its last close: EBUSY, %s after %d ms",
			inst, fd >= 0 ? "opened" : "still busy", 10 * tries);
		errno = e;
	}
	return fd;
}

/* Open the round's files: dma0 (and, for a multi-fd round, two dups of it and dma1). */
static int open_round(struct __test_metadata *_metadata, struct worker *w, bool multi)
{
	union args out;
	struct req c = { .call = C_INFO, .cmd = EXANEST_DMA_IOC_INFO,
			  .size = sizeof(struct exanest_dma_info), .ak = AK_PRIV };
	int fd, busy;

	fd = open_again(w, 0);
	if (fd < 0) {
		TH_LOG("open /dev/exanest-dma0: %s", strerror(errno));
		return -1;
	}
	G.nfd = 1;
	G.fd[0] = fd;
	G.dev[0] = 0;
	G.ndev = 1;
	c.fd = fd;
	place(w, &c);
	if (issue(w, &c, &out) && !G.info.abi_version) {
		TH_LOG("INFO failed: %s", strerror(errno));
		return -1;
	}
	if (!G.info.abi_version)
		memcpy(&G.info, &out.info, sizeof(G.info));
	if (!multi)
		return 0;
	/* A second open gets a context of its own, or none when all are held. */
	busy = dev_open(0);
	if (busy >= 0) {
		struct exanest_dma_info a = { 0 }, b = { 0 };

		if (ioctl(fd, EXANEST_DMA_IOC_INFO, &a) || ioctl(busy, EXANEST_DMA_IOC_INFO, &b) ||
		    (a.context == b.context && b.context != EXANEST_DMA_NO_CONTEXT))
			failure(w, "second open of /dev/exanest-dma0: context %u, the first's is %u",
				b.context, a.context);
		close(busy);
	} else {
		failure(w, "second open of /dev/exanest-dma0: %s", strerror(errno));
	}
	for (int i = 0; i < 2; i++) {
		G.fd[G.nfd] = dup(fd);
		G.dev[G.nfd] = 0;
		if (G.fd[G.nfd] >= 0)
			G.nfd++;
	}
	fd = open_again(w, 1);
	if (fd >= 0) {
		G.fd[G.nfd] = fd;
		G.dev[G.nfd++] = 1;
		G.ndev = 2;
	} else {
		say("no /dev/exanest-dma1 (%s): this round on dma0 only", strerror(errno));
	}
	return 0;
}

static void print_hist(struct worker *ws, int n)
{
	uint64_t tot[HIST_MAX + 1] = { 0 }, all = 0, st_ok = 0, st_err = 0;
	char line[900];

	for (int c = 0; c < NCALLS; c++) {
		uint64_t h[HIST_MAX + 1] = { 0 }, sum = 0;
		int k;

		for (int i = 0; i < n; i++)
			for (int e = 0; e <= HIST_MAX; e++)
				h[e] += ws[i].hist[c][e];
		for (int e = 0; e <= HIST_MAX; e++) {
			sum += h[e];
			tot[e] += h[e];
		}
		all += sum;
		k = snprintf(line, sizeof(line), "%-12s %7llu:", call_name[c],
			     (unsigned long long)sum);
		for (int e = 0; e <= HIST_MAX && k < (int)sizeof(line); e++)
			if (h[e])
				k += snprintf(line + k, sizeof(line) - k, " %s %llu",
					      e == HIST_MAX ? "other" : errname(e),
					      (unsigned long long)h[e]);
		say("%s", line);
	}
	for (int i = 0; i < n; i++) {
		st_ok += ws[i].status_ok;
		st_err += ws[i].status_err;
	}
	{
		int k = snprintf(line, sizeof(line), "%-12s %7llu:", "all",
				 (unsigned long long)all);

		for (int e = 0; e <= HIST_MAX && k < (int)sizeof(line); e++)
			if (tot[e])
				k += snprintf(line + k, sizeof(line) - k, " %s %llu",
					      e == HIST_MAX ? "other" : errname(e),
					      (unsigned long long)tot[e]);
		say("%s", line);
	}
	say("copies collected: %llu with status 0, %llu with an error status",
	    (unsigned long long)st_ok, (unsigned long long)st_err);
}

/* How many calls of one kind ended with err (0: succeeded), in threads ws[0 .. n). */
static uint64_t count_calls(struct worker *ws, int n, int call, int err)
{
	uint64_t s = 0;

	for (int i = 0; i < n; i++)
		s += ws[i].hist[call][err];
	return s;
}

static uint64_t all_calls(struct worker *ws, int n)
{
	uint64_t s = 0;

	for (int c = 0; c < NCALLS; c++)
		for (int e = 0; e <= HIST_MAX; e++)
			s += count_calls(ws, n, c, e);
	return s;
}

TEST_F_TIMEOUT(fuzz, ioctls, 180)
{
	struct worker *ws = self->workers, *mapper = &ws[G.threads], *child = &ws[G.threads + 1];
	double t0 = now(), tr;
	uint64_t calls = 0, reg_ok = 0, copy_ok = 0;

	say("exanest-fuzz: seed %llu, %ld calls, %d threads, %d rounds",
	    (unsigned long long)G.seed, G.calls, G.threads, ROUNDS);
	for (int round = 0; round < ROUNDS; round++) {
		bool multi = round % 2;
		long quota = G.calls / ROUNDS + (round == ROUNDS - 1 ? G.calls % ROUNDS : 0);
		pid_t pid = -1;
		int status;

		G.round = round;
		tr = now();
		memset(D, 0, sizeof(D));
		ASSERT_EQ(0, open_round(_metadata, &ws[0], multi));
		for (int i = 0; i < G.threads + 2; i++) {
			seed_worker(&ws[i], round);
			ws[i].nlive = 0;
			ws[i].nstale = 0;
			ws[i].npend = 0;
		}
		child->quota = multi ? quota / CHILD_SHARE : 0;
		G.quota = quota - child->quota;
		G.issued = 0;
		G.stop = 0;
		ASSERT_EQ(0, pthread_create(&mapper->thread, NULL, mapper_main, mapper));
		for (int i = 0; i < G.threads; i++)
			ASSERT_EQ(0, pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]));
		if (child->quota) {
			/* Fork once the threads hold regions and copies: the child inherits them */
			while (__atomic_load_n(&G.issued, __ATOMIC_RELAXED) < G.quota / 4) {
				struct timespec ts = { 0, 1000000 };

				nanosleep(&ts, NULL);
			}
			pid = fork();
			ASSERT_LE(0, pid);
			if (!pid) {
				long before = G.failures;

				for (long i = 0; i < child->quota; i++)
					one_call(child);
				_exit(G.failures != before);
			}
		}
		for (int i = 0; i < G.threads; i++)
			pthread_join(ws[i].thread, NULL);
		if (pid > 0) {
			EXPECT_EQ(pid, waitpid(pid, &status, 0));
			EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
				TH_LOG("the child ended with status %#x", status);
		}
		__atomic_store_n(&G.stop, 1, __ATOMIC_RELAXED);
		pthread_join(mapper->thread, NULL);
		guard_check(&ws[0], "end of round, files open");
		/* Closing ends the copies still in flight; it must leave the guard alone too. */
		for (int i = 0; i < G.nfd; i++)
			close(G.fd[i]);
		guard_check(&ws[0], "end of round, files closed");
		ASSERT_EQ(0, zones_restore());
		say("round %d/%d: %d fd(s) on %d instance(s), %d threads%s: %llu calls, %.1f s",
		    round + 1, ROUNDS, G.nfd, G.ndev, G.threads,
		    child->quota ? " and a forked child" : "",
		    (unsigned long long)(all_calls(ws, G.threads + 2) - calls), now() - tr);
		calls = all_calls(ws, G.threads + 2);
	}
	guard_check(&ws[0], "end");
	say("%llu ioctls in %.1f s (CLOCK_MONOTONIC), %d threads; mapper: %ld munmap, %ld mmap, "
	    "%ld mprotect, %ld madvise; guard checked %ld times",
	    (unsigned long long)calls, now() - t0, G.threads, G.map_ops[0], G.map_ops[1],
	    G.map_ops[2] + G.map_ops[3] + G.map_ops[4], G.map_ops[5], G.guard_checks);
	print_hist(ws, G.threads + 2);
	reg_ok = count_calls(ws, G.threads, C_REG, 0);
	copy_ok = count_calls(ws, G.threads, C_COPY, 0);
	EXPECT_EQ(0, G.failures) TH_LOG("%ld failures (the first %d are printed above)",
					G.failures, MAX_REPORTS);
	/* A run that never registers or copies anything tests little: the mix must reach them. */
	if (G.calls >= 10000) {
		EXPECT_LT(100ul, reg_ok);
		EXPECT_LT(100ul, copy_ok);
		EXPECT_LT(10ul, count_calls(ws, G.threads, C_WAIT, 0));
	}
}

int main(int argc, char **argv)
{
	struct timespec ts;
	int opt;

	clock_gettime(CLOCK_REALTIME, &ts);
	G.seed = (uint64_t)ts.tv_sec * 1000003u ^ ts.tv_nsec ^ ((uint64_t)getpid() << 32);
	while ((opt = getopt(argc, argv, "n:t:s:h")) != -1) {
		switch (opt) {
		case 'n':
			G.calls = strtol(optarg, NULL, 0);
			break;
		case 't':
			G.threads = atoi(optarg);
			break;
		case 's':
			G.seed = strtoull(optarg, NULL, 0);
			break;
		default:
			opt_usage(argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (G.calls < 1 || G.threads < 1 || G.threads > MAX_THREADS || optind != argc) {
		opt_usage(argv[0]);
		return 2;
	}
	printf("exanest-fuzz: seed %llu\n", (unsigned long long)G.seed);
	fflush(stdout);
	/* The harness's time limit: 3 minutes, more past 150000 calls (2 minutes per 100000). */
	if (G.calls > 150000)
		_fuzz_ioctls_object->timeout = (int)(G.calls / 100000 * 120 + 60);
	optind = 1;
	return test_harness_run(1, argv);
}
