// SPDX-License-Identifier: GPL-2.0-only
/*
 * exanest-fork: processes and the memory they share, in every memory mode: a DMA after fork
 * lands in the parent's copy only, a child that inherited the file cannot register memory, and
 * a process that exits with copies in flight (or waiting on faults) leaves the engine free.
 */
#include <stdlib.h>
#include <sys/wait.h>

#include "exanest-test.h"

DEVICE_FIXTURE(fork);

FIXTURE_VARIANT(fork) {
	MODE_FIELDS;
};

FIXTURE_VARIANT_ADD(fork, pin) {
	PIN_MODE,
};

FIXTURE_VARIANT_ADD(fork, prefault) {
	PREFAULT_MODE,
};

FIXTURE_VARIANT_ADD(fork, on_demand) {
	ON_DEMAND_MODE,
};

/*
 * Parent and child write after fork; the DMA lands in the parent's copy only (COW: the device
 * mapping must follow the parent; a pinned page stays the parent's, the child gets a copy).
 */
TEST_F(fork, dma_lands_in_parent)
{
	enum { LEN = 1 << 20 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd;
	int pipefd[2], status = -1;
	pid_t pid;
	char c;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, LEN, 9);
	memset(dst, 1, LEN);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, NO_WINDOW, &hd));
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN)); /* dst mapped for the device */
	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Child: write its copy, wait for the parent's DMA, check it kept its own data. */
		memset(dst, 2, LEN);
		if (read(pipefd[0], &c, 1) != 1)
			_exit(3);
		_exit(all_bytes(dst, LEN, 2) ? 0 : 1);
	}
	memset(dst, 3, LEN); /* the parent writes after fork */
	fill(src, LEN, 10);
	EXPECT_EQ(0, copy_wait(self->fd, src, dst, LEN));
	ASSERT_EQ(1, write(pipefd[1], "x", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, memcmp(src, dst, LEN)) TH_LOG("the DMA lands in the parent's copy");
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the child's copy was written by the DMA: status %#x", status);
}

/* Registration from another process than the opener: EPERM, in the child; the parent goes on. */
TEST_F(fork, reg_from_child_eperm)
{
	uint8_t *buf = big_alloc(8192);
	int status = -1;
	pid_t pid;

	ASSERT_NE(NULL, buf);
	memset(buf, 1, 8192);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(reg(self->fd, buf, 4096, RD, variant->mode, NO_WINDOW, NULL) == -EPERM ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) TH_LOG("status %#x", status);
	EXPECT_EQ(0, reg(self->fd, buf, 4096, RD, variant->mode, NO_WINDOW, NULL));
}

/*
 * A child that inherited the file can make the engine touch neither its memory nor the
 * parent's: COPY, DEREG, WAIT and ADVISE are EPERM there, with the parent's handles, cookie and
 * addresses (the child's copies of them). Closing the inherited file works, and the parent's
 * regions, copy and results are untouched.
 */
TEST_F(fork, child_calls_eperm)
{
	enum { LEN = 8192 };
	uint8_t *src = big_alloc(LEN), *dst = big_alloc(LEN);
	uint32_t hs, hd;
	uint64_t cookie;
	int status = -1, st = -1;
	pid_t pid;

	ASSERT_NE(NULL, src);
	ASSERT_NE(NULL, dst);
	fill(src, LEN, 11);
	memset(dst, 0, LEN);
	ASSERT_EQ(0, reg(self->fd, src, LEN, RD, variant->mode, NO_WINDOW, &hs));
	ASSERT_EQ(0, reg(self->fd, dst, LEN, WR, variant->mode, NO_WINDOW, &hd));
	ASSERT_EQ(0, copy(self->fd, src, dst, LEN, &cookie));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int bad = 0;

		bad |= (copy(self->fd, src, dst, LEN, NULL) != -EPERM) << 0;
		bad |= (dereg(self->fd, hs) != -EPERM) << 1;
		bad |= (wait_cookie(self->fd, cookie, 0, NULL, NULL) != -EPERM) << 2;
		bad |= (advise(self->fd, dst, 4096, EXANEST_DMA_ADVISE_WRITE) != -EPERM) << 3;
		bad |= (close(self->fd) != 0) << 4;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("child: failed checks (bit 0 copy, 1 dereg, 2 wait, 3 advise, 4 close): %#x",
		       WIFEXITED(status) ? WEXITSTATUS(status) : status);
	/* The parent's copy is still its own to collect, once, and did its work. */
	EXPECT_EQ(0, wait_cookie(self->fd, cookie, 20 * SEC, &st, NULL));
	EXPECT_EQ(0, st);
	EXPECT_EQ(0, memcmp(src, dst, LEN));
	EXPECT_EQ(0, dereg(self->fd, hs));
	EXPECT_EQ(0, dereg(self->fd, hd));
}

/*
 * Exit with copies in flight: the child leaves mid-copy (on demand, with faults pending); the
 * engine is free again and works.
 */
TEST_F_TIMEOUT(fork, exit_with_copies_in_flight, 60)
{
	uint8_t *a = big_alloc(1 << 20), *b = big_alloc(1 << 20);
	int status = -1;
	pid_t pid;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	RELEASE_DEVICE();
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int cfd = dev_open(0), n = 0;
		uint8_t *x = big_alloc(32 << 20), *y = big_alloc(32 << 20);

		if (cfd < 0 || !x || !y ||
		    reg(cfd, x, 32 << 20, RD, variant->mode, NO_WINDOW, NULL) ||
		    reg(cfd, y, 32 << 20, WR, variant->mode, NO_WINDOW, NULL))
			_exit(2);
		/* 8 copies of 4 MiB: the last ones still queued at exit. */
		for (int i = 0; i < 8; i++)
			n += !copy(cfd, x + i * (4 << 20), y + i * (4 << 20), 4 << 20, NULL);
		_exit(n == 8 ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) TH_LOG("status %#x", status);
	self->fd = dev_open(0);
	ASSERT_LE(0, self->fd) TH_LOG("reopen: %s", strerror(errno));
	fill(a, 1 << 20, 11);
	ASSERT_EQ(0, reg(self->fd, a, 1 << 20, RD, variant->mode, NO_WINDOW, NULL));
	ASSERT_EQ(0, reg(self->fd, b, 1 << 20, WR, variant->mode, NO_WINDOW, NULL));
	EXPECT_EQ(0, copy_wait(self->fd, a, b, 1 << 20));
	EXPECT_EQ(0, memcmp(a, b, 1 << 20));
}

TEST_HARNESS_MAIN
