// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-race: deregistration against everything that can be in flight at the same time, on
 * both CPUs: fault service, prefault, advise, munmap, and process exit. Each race runs
 * EXANEST_RACE_ITER iterations (10000 unless the environment says otherwise; `make soak` runs
 * more) of the deregistering side while the other side loops.
 *
 * Each test's harness timeout is 4 hours, `make soak`'s whole run: the iteration count sets the
 * time (10000 process exits, four at a time, take about 4 minutes under the KASAN kernel), and
 * the guest run's own timeout (45 minutes in make check) catches a hang.
 *
 * A race lost by the driver shows as a mapping left behind: after every region is gone, the
 * domain must map no page (COUNTERS pages_mapped 0) and pin none. A page left mapped with no
 * notifier over it is one the engine could still reach after the mm freed it. The console check
 * fails the run on any KASAN, lockdep or WARNING report the races provoke.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "exanest-test.h"

DEVICE_FIXTURE(race);

static long iterations(void)
{
	const char *s = getenv("EXANEST_RACE_ITER");

	return s ? atol(s) : 10000;
}

static void on_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % 2, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

enum { LEN = 16 * 4096, TAIL = 16 * 4096 };

struct race {
	int fd;
	uint8_t *buf;		/* LEN bytes the other side works on, then TAIL more */
	uint8_t *dst;
	volatile int stop;
	long iter;
	long dereg_ok, other_ok;
	bool alone;		/* the deregistered region is the only one: nothing stays mapped */
	int bad;		/* an unexpected result, as -errno or a code */
	const char *what;
};

static void bad(struct race *r, const char *what, int v)
{
	if (!r->bad) {
		r->bad = v ? v : -1;
		r->what = what;
	}
}

/* The deregistering side: a region over buf and its tail, registered and deregistered. */
static void *deregister_loop(void *arg)
{
	struct race *r = arg;
	uint32_t h;

	on_cpu(0);
	for (long i = 0; i < r->iter && !r->bad; i++) {
		int ret = reg(r->fd, r->buf, LEN + TAIL, RD | WR, EXANEST_DMA_MODE_ON_DEMAND, 31, &h);

		if (ret) {
			bad(r, "REG", ret);
			break;
		}
		if (i % 2)
			advise(r->fd, r->buf + LEN, TAIL, EXANEST_DMA_ADVISE_WRITE);
		/* EBUSY while a copy the other side posted holds it. */
		while ((ret = dereg(r->fd, h)) == -EBUSY)
			sched_yield();
		if (ret) {
			bad(r, "DEREG", ret);
			break;
		}
		/*
		 * With no region left, nothing may stay mapped: a resolution that lost the race
		 * must not map after the deregistration unmapped (it would map pages no notifier
		 * watches any more).
		 */
		if (r->alone && counters(r->fd).pages_mapped != 0) {
			bad(r, "a mapping outlived its region (pages_mapped after DEREG)", -EEXIST);
			break;
		}
		r->dereg_ok++;
	}
	r->stop = 1;
	return NULL;
}

static void run(struct __test_metadata *_metadata, struct race *r, void *(*other)(void *))
{
	pthread_t a, b;
	struct exanest_dma_counters c;

	r->iter = iterations();
	ASSERT_EQ(0, pthread_create(&b, NULL, other, r));
	ASSERT_EQ(0, pthread_create(&a, NULL, deregister_loop, r));
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	EXPECT_EQ(0, r->bad) TH_LOG("%s: %s", r->what, strerror(-r->bad));
	EXPECT_EQ(r->iter, r->dereg_ok);
	TH_LOG("%ld deregistrations, %ld operations on the other side", r->dereg_ok, r->other_ok);
	c = counters(r->fd);
	EXPECT_EQ(0, c.regions);
	EXPECT_EQ(0, c.pages_mapped) TH_LOG("a mapping outlived every region");
	EXPECT_EQ(0, c.pages_pinned);
}

/* Copies through a region of its own over buf, refaulted every time (MADV_DONTNEED). */
static void *copy_loop(void *arg)
{
	struct race *r = arg;
	uint32_t hs, hd;
	int ret;

	on_cpu(1);
	if (reg(r->fd, r->buf, LEN, RD, EXANEST_DMA_MODE_ON_DEMAND, 0, &hs) ||
	    reg(r->fd, r->dst, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hd)) {
		bad(r, "REG (copy side)", -errno);
		return NULL;
	}
	while (!r->stop) {
		madvise(r->buf, LEN + TAIL, MADV_DONTNEED);
		memset(r->dst, 0xff, LEN);
		ret = copy_wait(r->fd, r->buf, r->dst, LEN);
		if (ret || !all_bytes(r->dst, LEN, 0)) {
			bad(r, "copy", ret);
			break;
		}
		r->other_ok++;
	}
	dereg(r->fd, hs);
	dereg(r->fd, hd);
	return NULL;
}

/*
 * A DEREG unmaps only what no other region covers: the pages a second region over the same
 * memory still covers stay mapped (read-only ones; a writable one only under a region that
 * allows writes), so a copy through that region does not fault again. Without it, a copy
 * racing with another region's DEREG could fault at one address over and over, and end with
 * the refault limit's EFAULT (dereg_vs_fault_service, below).
 */
TEST_F(race, dereg_keeps_what_another_region_covers)
{
	uint8_t *buf = big_alloc(LEN), *dst = big_alloc(LEN);
	struct exanest_dma_counters c0, c1, c2;
	uint32_t hs, hr, hd;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, dst);
	memset(buf, 7, LEN);
	ASSERT_EQ(0, reg(self->fd, buf, LEN, RD, EXANEST_DMA_MODE_ON_DEMAND, 0, &hs));
	ASSERT_EQ(0, reg(self->fd, buf, LEN, RD | WR, EXANEST_DMA_MODE_ON_DEMAND, 0, &hr));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, EXANEST_DMA_MODE_PIN, NO_WINDOW, &hd));
	ASSERT_EQ(0, copy_wait(self->fd, buf, dst, LEN));
	c0 = counters(self->fd);
	ASSERT_EQ(0, dereg(self->fd, hr));
	c1 = counters(self->fd);
	EXPECT_EQ(c0.pages_mapped, c1.pages_mapped) TH_LOG("read-only pages of a region left went");
	ASSERT_EQ(0, copy_wait(self->fd, buf, dst, LEN));
	c2 = counters(self->fd);
	EXPECT_EQ(c1.faults, c2.faults) TH_LOG("the copy faulted again");
	EXPECT_TRUE(all_bytes(dst, LEN, 7));
	/* Writable now, under a region that allows writes; it goes, and they go with it. */
	ASSERT_EQ(0, reg(self->fd, buf, LEN, RD | WR, EXANEST_DMA_MODE_ON_DEMAND, 0, &hr));
	ASSERT_EQ(0, advise(self->fd, buf, LEN, EXANEST_DMA_ADVISE_WRITE));
	c1 = counters(self->fd);
	ASSERT_EQ(0, dereg(self->fd, hr));
	c2 = counters(self->fd);
	EXPECT_EQ(c1.pages_mapped - LEN / 4096, c2.pages_mapped)
		TH_LOG("a writable page outlived the last region that allows writes");
	ASSERT_EQ(0, dereg(self->fd, hs));
	ASSERT_EQ(0, dereg(self->fd, hd));
	EXPECT_EQ(0, counters(self->fd).pages_mapped);
}

TEST_F_TIMEOUT(race, dereg_vs_fault_service, 14400)
{
	struct race r = { .fd = self->fd, .buf = big_alloc(LEN + TAIL), .dst = big_alloc(LEN) };

	ASSERT_NE(NULL, r.buf);
	ASSERT_NE(NULL, r.dst);
	run(_metadata, &r, copy_loop);
}

/* Prefault registrations of its own over the same pages, and invalidations. */
static void *prefault_loop(void *arg)
{
	struct race *r = arg;
	uint32_t h;
	int ret;

	on_cpu(1);
	while (!r->stop) {
		ret = reg(r->fd, r->buf, LEN + TAIL, RD | WR, EXANEST_DMA_MODE_PREFAULT, NO_WINDOW,
			  &h);
		if (ret) {
			bad(r, "REG prefault", ret);
			break;
		}
		if (r->other_ok % 4 == 0)
			madvise(r->buf, LEN, MADV_DONTNEED);
		ret = dereg(r->fd, h);
		if (ret) {
			bad(r, "DEREG prefault", ret);
			break;
		}
		r->other_ok++;
	}
	return NULL;
}

TEST_F_TIMEOUT(race, dereg_vs_prefault, 14400)
{
	struct race r = { .fd = self->fd, .buf = big_alloc(LEN + TAIL) };

	ASSERT_NE(NULL, r.buf);
	run(_metadata, &r, prefault_loop);
}

/*
 * ADVISE of the range: mapped when the other side's region is there, EFAULT when not, EAGAIN
 * when the region kept being deregistered under it (abi.rst).
 */
static void *advise_loop(void *arg)
{
	struct race *r = arg;
	int ret;

	on_cpu(1);
	while (!r->stop) {
		ret = advise(r->fd, r->buf, LEN + TAIL, EXANEST_DMA_ADVISE_WRITE);
		if (ret && ret != -EFAULT && ret != -EAGAIN) {
			bad(r, "ADVISE", ret);
			break;
		}
		if (r->other_ok % 8 == 0)
			madvise(r->buf, LEN + TAIL, MADV_DONTNEED);
		r->other_ok++;
	}
	return NULL;
}

TEST_F_TIMEOUT(race, dereg_vs_advise, 14400)
{
	struct race r = { .fd = self->fd, .buf = big_alloc(LEN + TAIL), .alone = true };

	ASSERT_NE(NULL, r.buf);
	run(_metadata, &r, advise_loop);
}

/* The memory goes and comes back at the same address (munmap, mmap MAP_FIXED, touch). */
static void *munmap_loop(void *arg)
{
	struct race *r = arg;

	on_cpu(1);
	while (!r->stop) {
		if (munmap(r->buf, LEN + TAIL) ||
		    mmap(r->buf, LEN + TAIL, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != r->buf) {
			bad(r, "munmap/mmap", -errno);
			break;
		}
		memset(r->buf, 3, 4096);
		r->other_ok++;
	}
	return NULL;
}

TEST_F_TIMEOUT(race, dereg_vs_munmap, 14400)
{
	struct race r = { .fd = self->fd, .buf = big_alloc(LEN + TAIL), .alone = true };

	ASSERT_NE(NULL, r.buf);
	run(_metadata, &r, munmap_loop);
}

/* Processes that exit at once, each in its own lane (see dereg_vs_process_exit). */
enum { LANES = 4 };

/*
 * One lane of dereg_vs_process_exit: iterations lane, lane + LANES, ... below n, one process
 * at a time. Returns 0, or the iteration whose process could not set up (its exit status is
 * 10 or more) plus one.
 */
static long exit_lane(long lane, long n)
{
	for (long i = lane; i < n; i += LANES) {
		int status;
		pid_t pid = fork();

		if (pid < 0)
			return i + 1;
		if (!pid) {
			struct race r = { .buf = big_alloc(LEN + TAIL), .dst = big_alloc(LEN),
					  .iter = 1 << 30 };
			pthread_t a;
			uint64_t cookie;
			uint32_t h;

			r.fd = dev_open(0);
			if (r.fd < 0 || !r.buf || !r.dst)
				_exit(10);
			if (reg(r.fd, r.buf, LEN, RD, EXANEST_DMA_MODE_ON_DEMAND, 0, &h) ||
			    reg(r.fd, r.dst, LEN, WR, EXANEST_DMA_MODE_ON_DEMAND, 0, &h))
				_exit(11);
			pthread_create(&a, NULL, deregister_loop, &r);
			copy(r.fd, r.buf, r.dst, LEN, &cookie);
			if (i % 2)
				_exit(0);	/* exit with all of it in flight */
			for (;;)
				copy_wait(r.fd, r.buf, r.dst, LEN);
		}
		if (i % 2 == 0) {
			usleep(i % 7 * 100);
			kill(pid, SIGKILL);
		}
		if (waitpid(pid, &status, 0) != pid ||
		    (WIFEXITED(status) && WEXITSTATUS(status) >= 10))
			return i + 1;
	}
	return 0;
}

/*
 * A process that exits (or is killed) with regions registered, faults in flight and a
 * deregistration racing on its other thread, EXANEST_RACE_ITER times. LANES processes at a
 * time (each lane one after the other), so that exits also race with each other's opens,
 * registrations and faults on the engine; each lane's processes set up as before.
 */
TEST_F_TIMEOUT(race, dereg_vs_process_exit, 14400)
{
	long n = iterations();
	pid_t lanes[LANES];
	int fd;

	RELEASE_DEVICE();
	for (long l = 0; l < LANES; l++) {
		lanes[l] = fork();
		ASSERT_LE(0, lanes[l]);
		if (!lanes[l]) {
			long bad = exit_lane(l, n);

			if (bad)
				fprintf(stderr, "lane %ld: iteration %ld: a process could not set up\n",
					l, bad - 1);
			_exit(bad ? 1 : 0);
		}
	}
	for (long l = 0; l < LANES; l++) {
		int status;

		ASSERT_EQ(lanes[l], waitpid(lanes[l], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("lane %ld failed (status %#x)", l, status);
	}
	fd = dev_open(0);
	ASSERT_LE(0, fd) TH_LOG("reopen: %s", strerror(errno));
	close(fd);
	TH_LOG("%ld processes exited or were killed mid-flight, %d at a time", n, LANES);
}

TEST_HARNESS_MAIN
