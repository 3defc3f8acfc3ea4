// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * The C API's error reporting, on the host: /dev/null stands in for the device, so every call
 * that reaches the kernel fails with ENOTTY. Checks the return values and that out parameters
 * are written on failure. Built and run by tests/capi.rs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <exanest_dma.h>

static int failed;

/* The Rust side has the same layout (queue::tests::completion_layout_is_the_c_struct). */
_Static_assert(sizeof(struct exanest_dma_completion) == 24, "completion size");
_Static_assert(offsetof(struct exanest_dma_completion, fault_addr) == 16, "completion layout");
/* And for the remote target (remote::tests::remote_layout_is_the_c_struct). */
_Static_assert(sizeof(struct exanest_dma_remote) == 32, "remote size");
_Static_assert(offsetof(struct exanest_dma_remote, rkey) == 16, "remote layout");
_Static_assert(offsetof(struct exanest_dma_remote, endpoint) == 28, "remote layout");
/* And for a message (capi::tests::message_layout_is_the_c_struct). */
_Static_assert(sizeof(struct exanest_dma_message) == 32, "message size");
_Static_assert(offsetof(struct exanest_dma_message, imm) == 16, "message layout");
_Static_assert(offsetof(struct exanest_dma_message, addr) == 24, "message layout");

static void check(int ok, const char *what, long got)
{
	printf("%s %s (got %ld)\n", ok ? "ok" : "FAIL", what, got);
	failed |= !ok;
}

int main(void)
{
	struct exanest_dma *dev = (struct exanest_dma *)&failed; /* garbage: must be overwritten */
	struct exanest_dma *dev2 = NULL;
	struct exanest_dma_info info;
	struct exanest_dma_counters c;
	struct exanest_dma_net_counters nc;
	char buf[64];
	uint32_t handle = 77;
	uint64_t cookie = 77, bytes = 77;
	int32_t status = 77;
	struct exanest_dma_queue_h *q;
	struct exanest_dma_completion comp[2];
	uint32_t cap, ctx, qerr;
	struct exanest_dma_queue_events qev;
	int r, fd;

	r = exanest_dma_open_path("/nonexistent/exanest-dma9", &dev);
	check(r == -ENOENT && !dev, "open a missing node: -ENOENT, handle NULL", r);
	check(exanest_dma_open(0, NULL) == -EINVAL, "open into NULL: -EINVAL", 0);
	r = exanest_dma_open_path(NULL, &dev);
	check(r == -EINVAL && !dev, "open NULL path: -EINVAL", r);
	r = exanest_dma_open_path("/dev/null", &dev);
	check(r == 0 && dev, "open /dev/null", r);
	if (r)
		return 1;

	fd = exanest_dma_fd(dev);
	check(fd >= 0 && fcntl(fd, F_GETFD) >= 0, "fd is an open descriptor", fd);
	check(exanest_dma_fd(NULL) == -EINVAL, "fd of NULL: -EINVAL", exanest_dma_fd(NULL));

	memset(&info, 0xff, sizeof(info));
	r = exanest_dma_info(dev, &info);
	check(r == -ENOTTY && info.channels == 0 && info.max_transfer == 0,
	      "info: the kernel's -ENOTTY, struct zeroed", r);

	r = exanest_dma_reg(dev, buf, sizeof(buf), EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_PIN,
			    &handle);
	check(r == -ENOTTY && handle == 0, "reg: -ENOTTY, handle 0", r);
	handle = 77;
	r = exanest_dma_reg(dev, buf, sizeof(buf), 0, EXANEST_DMA_MODE_PIN, &handle);
	check(r == -EINVAL && handle == 0, "reg, access 0: -EINVAL, handle 0", r);
	handle = 77;
	r = exanest_dma_reg_window(dev, buf, sizeof(buf), EXANEST_DMA_ACCESS_WRITE, 9, 4, &handle);
	check(r == -EINVAL && handle == 0, "reg, unknown mode: -EINVAL, handle 0", r);
	r = exanest_dma_dereg(dev, 1);
	check(r == -ENOTTY, "dereg: -ENOTTY", r);
	r = exanest_dma_advise(dev, buf, sizeof(buf), 1u << 5);
	check(r == -EINVAL, "advise, unknown flag: -EINVAL", r);
	r = exanest_dma_advise(dev, buf, sizeof(buf), EXANEST_DMA_ADVISE_WRITE);
	check(r == -ENOTTY, "advise: -ENOTTY", r);

	r = exanest_dma_copy(dev, buf, buf + 32, 32, &cookie);
	check(r == -ENOTTY && cookie == 0, "copy: -ENOTTY, cookie 0", r);
	r = exanest_dma_wait(dev, 1, -1, &status, &bytes);
	check(r == -ENOTTY && status == 0 && bytes == 0, "wait: -ENOTTY, status 0, bytes 0", r);
	status = 77;
	r = exanest_dma_wait(dev, 1, 0, &status, NULL);
	check(r == -ENOTTY && status == 0, "wait, bytes NULL: -ENOTTY, status 0", r);
	bytes = 77;
	r = exanest_dma_wait(dev, 1, 0, NULL, &bytes);
	check(r == -EINVAL && bytes == 0, "wait, status NULL: -EINVAL, bytes 0", r);

	memset(&c, 0xff, sizeof(c));
	r = exanest_dma_counters(dev, &c);
	check(r == -ENOTTY && c.copies == 0 && c.faults == 0, "counters: -ENOTTY, zeroed", r);

	status = 77;
	r = exanest_dma_wait(NULL, 1, 0, &status, NULL);
	check(r == -EINVAL && status == 0, "wait on NULL handle: -EINVAL", r);
	check(exanest_dma_dereg(NULL, 1) == -EINVAL, "dereg on NULL handle: -EINVAL", 0);
	check(exanest_dma_counters(dev, NULL) == -EINVAL, "counters into NULL: -EINVAL", 0);
	memset(&nc, 0xff, sizeof(nc));
	r = exanest_dma_net_counters(dev, &nc);
	check(r == -ENOTTY && nc.node == 0 && nc.retransmitted_bytes == 0 && nc.rnr_sent == 0,
	      "net_counters: -ENOTTY, zeroed", r);
	check(exanest_dma_net_counters(dev, NULL) == -EINVAL, "net_counters into NULL: -EINVAL", 0);

	/* The queue: ring sizes checked by the library, then the kernel's -ENOTTY. */
	q = (struct exanest_dma_queue_h *)&failed;
	r = exanest_dma_queue_create(dev, 0, 4, &q);
	check(r == -EINVAL && !q, "queue_create, sq_log2 0: -EINVAL, handle NULL", r);
	q = (struct exanest_dma_queue_h *)&failed;
	r = exanest_dma_queue_create(dev, 4, 13, &q);
	check(r == -EINVAL && !q, "queue_create, cq_log2 13: -EINVAL, handle NULL", r);
	q = (struct exanest_dma_queue_h *)&failed;
	r = exanest_dma_queue_create(dev, 12, 1, &q);
	check(r == -ENOTTY && !q, "queue_create: -ENOTTY, handle NULL", r);
	q = (struct exanest_dma_queue_h *)&failed;
	r = exanest_dma_queue_create(NULL, 4, 4, &q);
	check(r == -EINVAL && !q, "queue_create on NULL handle: -EINVAL", r);
	check(exanest_dma_queue_create(dev, 4, 4, NULL) == -EINVAL, "queue_create into NULL", 0);
	check(exanest_dma_queue_post(NULL, 0, 0, 1, 0) == -EINVAL, "queue_post on NULL", 0);
	check(exanest_dma_queue_push(NULL, 0, 0, 1, 0) == -EINVAL, "queue_push on NULL", 0);
	check(exanest_dma_queue_ring(NULL) == -EINVAL, "queue_ring on NULL", 0);
	check(exanest_dma_queue_wait(NULL, 0) == -EINVAL, "queue_wait on NULL", 0);
	check(exanest_dma_queue_recv_wait(NULL, buf, sizeof(buf), NULL, NULL, 0) == -EINVAL,
	      "queue_recv_wait on NULL", 0);
	{
		struct exanest_dma_message m;

		memset(&m, 0xff, sizeof(m));
		r = exanest_dma_queue_recv_msg(NULL, buf, sizeof(buf), &m, 0);
		check(r == -EINVAL && m.len == 0 && m.flags == 0 && m.addr == 0,
		      "queue_recv_msg on NULL: -EINVAL, zeroed", r);
		check(exanest_dma_queue_recv_msg((struct exanest_dma_queue_h *)&failed, buf, 1, NULL,
						 0) == -EINVAL, "queue_recv_msg into NULL", 0);
		check(exanest_dma_queue_put_imm(NULL, 0, 1, NULL, 0, 7, 0) == -EINVAL,
		      "queue_put_imm on NULL", 0);
	}
	check(exanest_dma_queue_outstanding(NULL) == -EINVAL, "queue_outstanding on NULL", 0);
	memset(comp, 0xff, sizeof(comp));
	r = exanest_dma_queue_poll(NULL, comp, 2);
	check(r == -EINVAL && comp[0].wr_id == 0 && comp[1].status == 0 && comp[1].fault_addr == 0,
	      "queue_poll on NULL: -EINVAL, out zeroed", r);
	cap = ctx = 77;
	r = exanest_dma_queue_info(NULL, &cap, &ctx, NULL);
	check(r == -EINVAL && cap == 0 && ctx == 0, "queue_info on NULL: -EINVAL, zeroed", r);
	qerr = 77;
	r = exanest_dma_queue_error(NULL, &qerr, NULL);
	check(r == -EINVAL && qerr == 0, "queue_error on NULL: -EINVAL, zeroed", r);
	memset(&qev, 0xff, sizeof(qev));
	r = exanest_dma_queue_events(NULL, &qev);
	check(r == -EINVAL && qev.evictions == 0 && qev.evicted_pages == 0 &&
	      qev.last_evicted_addr == 0 && qev.unknown == 0, "queue_events on NULL: -EINVAL, zeroed",
	      r);
	check(sizeof(qev) == 32, "struct exanest_dma_queue_events is 32 bytes", (int)sizeof(qev));
	exanest_dma_queue_destroy(NULL);

	/* A NULL address is refused before any system call (not -ENOTTY). */
	handle = 77;
	r = exanest_dma_reg(dev, NULL, 64, EXANEST_DMA_ACCESS_READ, EXANEST_DMA_MODE_ON_DEMAND,
			    &handle);
	check(r == -EINVAL && handle == 0, "reg of NULL: -EINVAL, handle 0", r);
	r = exanest_dma_reg_remote(dev, NULL, 64, EXANEST_DMA_ACCESS_REMOTE_WRITE,
				   EXANEST_DMA_MODE_ON_DEMAND, &handle, NULL);
	check(r == -EINVAL, "reg_remote of NULL: -EINVAL", r);
	/* reg_remote's rights: at least one remote right, no unknown bit. */
	r = exanest_dma_reg_remote(dev, buf, 64, EXANEST_DMA_ACCESS_READ | EXANEST_DMA_ACCESS_WRITE,
				   EXANEST_DMA_MODE_ON_DEMAND, &handle, NULL);
	check(r == -EINVAL, "reg_remote without a remote right: -EINVAL", r);
	r = exanest_dma_reg_remote(dev, buf, 64, EXANEST_DMA_ACCESS_REMOTE_READ | (1u << 9),
				   EXANEST_DMA_MODE_ON_DEMAND, &handle, NULL);
	check(r == -EINVAL, "reg_remote with an unknown bit: -EINVAL", r);
	r = exanest_dma_reg_remote(dev, buf, 64, EXANEST_DMA_ACCESS_REMOTE_READ,
				   EXANEST_DMA_MODE_ON_DEMAND, &handle, NULL);
	check(r == -ENOTTY, "reg_remote, read right only: reaches the kernel", r);

	/* What the codes mean, engine statuses included. */
	check(strstr(exanest_dma_strerror(-257), "PLDMA_CQE_BAD_LEN") != NULL,
	      "strerror(-257) names PLDMA_CQE_BAD_LEN", 0);
	check(strstr(exanest_dma_strerror(-265), "PLDMA_CQE_TIMEOUT") != NULL,
	      "strerror(-265) names PLDMA_CQE_TIMEOUT", 0);
	check(strcmp(exanest_dma_strerror(-ENOENT), strerror(ENOENT)) == 0,
	      "strerror(-ENOENT) is strerror's", 0);
	check(strcmp(exanest_dma_strerror(EBADF), strerror(EBADF)) == 0,
	      "strerror(EBADF), either sign", 0);

	exanest_dma_close(dev);
	exanest_dma_close(NULL);
	check(fcntl(fd, F_GETFD) < 0 && errno == EBADF, "close closes the fd", fd);
	/* A closed handle reaches nothing, not even a device opened since in its slot. */
	check(exanest_dma_info(dev, &info) == -EBADF, "info on a closed handle: -EBADF", 0);
	exanest_dma_close(dev);
	r = exanest_dma_open_path("/dev/null", &dev2);
	check(r == 0 && dev2 && dev2 != dev, "a new handle is not the closed one", r);
	check(exanest_dma_dereg(dev, 1) == -EBADF, "dereg on the closed handle: -EBADF", 0);
	check(exanest_dma_dereg(dev2, 1) == -ENOTTY, "the new handle works", 0);
	check(exanest_dma_info((struct exanest_dma *)&info, &info) == -EBADF,
	      "a pointer that never was a handle: -EBADF", 0);
	check(exanest_dma_queue_post((struct exanest_dma_queue_h *)&info, 0, 0, 1, 0) == -EBADF,
	      "queue_post on a value that never was a handle: -EBADF", 0);
	exanest_dma_close(dev2);
	return failed;
}
