// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * An MPI application the way HPC codes are written, on the engine through Open MPI and the
 * libfabric provider (Documentation/libfabric.rst), that never registers a buffer: a Jacobi
 * solver of the heat equation on a grid split by rows among the ranks. Every iteration
 * exchanges halo rows with both neighbours (MPI_Sendrecv, 32 KiB each way: the provider's
 * rendezvous, the receiver's engine reading the sender's buffer), and every 10th reduces the
 * residual (MPI_Allreduce). At the end rank 0 gathers the grid and compares it, bit for bit,
 * with the same iterations run serially.
 *
 * By default every buffer is fresh memory each iteration: the halos are received into new
 * malloc'd buffers that no CPU touched, and the grid is a new block each iteration, with
 * glibc's mmap threshold fixed at 16 KiB so that each of them is new pages from the kernel
 * (glibc would otherwise keep freed blocks and hand them back), unmapped again by free().
 * --reuse allocates them once (the comparison make evaluate draws). Nothing is pinned for
 * any of it: the engines fault the pages in.
 *
 *   mpi-stencil [--rows R] [--cols N] [--iters I] [--reuse] [--die-at K]
 *
 * R rows a rank (default 32), N columns (default 4096), I iterations (default 30). --die-at K:
 * rank 1 kills itself (SIGKILL) at iteration K, the failure test of tests/guest/mpi.sh.
 * Prints one line on rank 0; exit status 0 when the grid is right.
 */
#include <malloc.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
	int rows, cols, iters, reuse, die_at;
};

/* The grid's first values: global row @gi (1..G), column @j. */
static double init_value(long gi, long j)
{
	return (double)((gi * 31 + j * 17) % 97) / 97.0;
}

/* Fixed boundaries: the row above the grid is hot, the row below it cold. */
#define TOP 1.0
#define BOTTOM 0.0

/* One Jacobi step of rows 1..@rows of @old (with halo rows 0 and @rows + 1) into @new. */
static double step(const double *old, double *new, int rows, int n)
{
	double res = 0;

	for (int i = 1; i <= rows; i++) {
		const double *up = old + (long)(i - 1) * n, *me = old + (long)i * n;
		const double *down = old + (long)(i + 1) * n;
		double *out = new + (long)i * n;

		out[0] = me[0];
		out[n - 1] = me[n - 1];
		for (int j = 1; j < n - 1; j++) {
			double v = 0.25 * (up[j] + down[j] + me[j - 1] + me[j + 1]);
			double d = v > me[j] ? v - me[j] : me[j] - v;

			out[j] = v;
			if (d > res)
				res = d;
		}
	}
	return res;
}

static void fill_row(double *row, int n, double v)
{
	for (int j = 0; j < n; j++)
		row[j] = v;
}

static void *alloc(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fprintf(stderr, "mpi-stencil: out of memory (%zu bytes)\n", n);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return p;
}

static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .rows = 32, .cols = 4096, .iters = 30, .die_at = -1 };
	for (int i = 1; i < argc; i++) {
		int *v = NULL;

		if (!strcmp(argv[i], "--reuse"))
			o->reuse = 1;
		else if (!strcmp(argv[i], "--rows"))
			v = &o->rows;
		else if (!strcmp(argv[i], "--cols"))
			v = &o->cols;
		else if (!strcmp(argv[i], "--iters"))
			v = &o->iters;
		else if (!strcmp(argv[i], "--die-at"))
			v = &o->die_at;
		else
			return -1;
		if (v) {
			if (++i == argc)
				return -1;
			*v = atoi(argv[i]);
		}
	}
	return o->rows > 0 && o->cols >= 3 && o->iters > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	int rank, size, up, down, rows, n;
	double *cur, *next = NULL, *hu = NULL, *hd = NULL, t0, t, tmax, res = 0, gres = 0;
	size_t row_bytes, grid_bytes;
	long moved = 0;
	struct opts o;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (parse(argc, argv, &o)) {
		if (!rank)
			fprintf(stderr, "usage: mpi-stencil [--rows R] [--cols N] [--iters I] [--reuse] [--die-at K]\n");
		MPI_Finalize();
		return 2;
	}
	/* Blocks of 16 KiB or more come from mmap() and go back with free(), every time. */
	mallopt(M_MMAP_THRESHOLD, 16384);
	rows = o.rows;
	n = o.cols;
	row_bytes = (size_t)n * sizeof(double);
	grid_bytes = (size_t)(rows + 2) * row_bytes;
	up = rank ? rank - 1 : MPI_PROC_NULL;
	down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;

	cur = alloc(grid_bytes);
	for (int i = 1; i <= rows; i++)
		for (int j = 0; j < n; j++)
			cur[(long)i * n + j] = init_value((long)rank * rows + i, j);
	if (o.reuse) {
		next = alloc(grid_bytes);
		hu = alloc(row_bytes);
		hd = alloc(row_bytes);
	}

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int it = 0; it < o.iters; it++) {
		if (it == o.die_at && rank == 1)
			raise(SIGKILL);
		if (!o.reuse) {
			/* New memory: received into before any CPU touches it. */
			hu = alloc(row_bytes);
			hd = alloc(row_bytes);
		}
		/* My first row up, the lower one's first row into hd; then my last row down. */
		MPI_Sendrecv(cur + n, n, MPI_DOUBLE, up, 0, hd, n, MPI_DOUBLE, down, 0,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Sendrecv(cur + (long)rows * n, n, MPI_DOUBLE, down, 1, hu, n, MPI_DOUBLE, up, 1,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		moved += (up != MPI_PROC_NULL) + (down != MPI_PROC_NULL);
		if (up == MPI_PROC_NULL)
			fill_row(cur, n, TOP);
		else
			memcpy(cur, hu, row_bytes);
		if (down == MPI_PROC_NULL)
			fill_row(cur + (long)(rows + 1) * n, n, BOTTOM);
		else
			memcpy(cur + (long)(rows + 1) * n, hd, row_bytes);
		if (!o.reuse) {
			free(hu);
			free(hd);
			next = alloc(grid_bytes);
		}
		res = step(cur, next, rows, n);
		if (o.reuse) {
			double *x = cur;

			cur = next;
			next = x;
		} else {
			free(cur);
			cur = next;
		}
		if (it % 10 == 9 || it == o.iters - 1)
			MPI_Allreduce(&res, &gres, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	}
	t = (MPI_Wtime() - t0) / o.iters;
	MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

	/* Rank 0 gathers the grid (into new memory) and runs the iterations itself to compare. */
	{
		long g = (long)size * rows, bad = 0, first = -1;
		double *all = rank ? NULL : alloc((size_t)g * row_bytes);

		MPI_Gather(cur + n, rows * n, MPI_DOUBLE, all, rows * n, MPI_DOUBLE, 0,
			   MPI_COMM_WORLD);
		if (!rank) {
			size_t sb = (size_t)(g + 2) * row_bytes;
			double *a = alloc(sb), *b = alloc(sb), sres = 0;

			for (long i = 1; i <= g; i++)
				for (int j = 0; j < n; j++)
					a[i * n + j] = init_value(i, j);
			fill_row(a, n, TOP);
			fill_row(a + (g + 1) * n, n, BOTTOM);
			memcpy(b, a, sb);
			for (int it = 0; it < o.iters; it++) {
				double *x = a;

				sres = step(a, b, (int)g, n);
				a = b;
				b = x;
			}
			for (long k = 0; k < g * n; k++) {
				if (memcmp(&all[k], &a[n + k], sizeof(double))) {
					if (first < 0)
						first = k;
					bad++;
				}
			}
			if (!bad && memcmp(&sres, &gres, sizeof(double)))
				bad = -1;
			if (bad)
				printf("mpi-stencil: FAILED (%d ranks): %ld of %ld values differ from the serial run (first at row %ld, column %ld); residual %.17g, serially %.17g\n",
				       size, bad < 0 ? 0 : bad, g * n, first / n + 1, first % n,
				       gres, sres);
			else
				printf("mpi-stencil: ok (%d ranks, %ld x %d grid, %d iterations, %s buffers; bit-identical to the serial run, residual %.6g): %.3f ms an iteration (MPI_Wtime, the slowest rank); %ld bytes of halos received by rank 0\n",
				       size, g, n, o.iters, o.reuse ? "reused" : "fresh", gres,
				       tmax * 1e3, moved * (long)row_bytes);
			free(a);
			free(b);
			free(all);
		}
		free(cur);
		if (o.reuse) {
			free(next);
			free(hu);
			free(hd);
		}
		MPI_Bcast(&bad, 1, MPI_LONG, 0, MPI_COMM_WORLD);
		MPI_Finalize();
		return bad ? 1 : 0;
	}
}
