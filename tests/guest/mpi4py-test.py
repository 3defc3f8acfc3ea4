#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""The mpi4py program of the MPI runs (tests/guest/mpi.sh; Documentation/libfabric.rst): point to
point, collectives and one-sided Get/Put (osc pt2pt), every result checked, on buffers freshly
allocated each round and never registered. Prints one "mpi4py: ok ..." line on rank 0, or
raises (a non-zero exit, which mpirun reports)."""
import mpi4py

# Open MPI's one-sided component over a PML (osc pt2pt) refuses MPI_THREAD_MULTIPLE, mpi4py's
# default; the program is single-threaded.
mpi4py.rc.thread_level = "single"
from mpi4py import MPI  # noqa: E402 (after the thread level is set)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
peer = rank ^ 1

# Point to point, tagged, every size from eager to rendezvous, fresh buffers each time.
for n in (1, 100, 232, 233, 4096, 65536, 1 << 20):
    if peer < size:
        out = bytearray((rank * 7 + i) % 251 for i in range(n))
        inb = bytearray(n)
        if rank % 2 == 0:
            comm.Send([out, MPI.BYTE], dest=peer, tag=n % 1000)
            comm.Recv([inb, MPI.BYTE], source=peer, tag=n % 1000)
        else:
            comm.Recv([inb, MPI.BYTE], source=peer, tag=n % 1000)
            comm.Send([out, MPI.BYTE], dest=peer, tag=n % 1000)
        want = bytes((peer * 7 + i) % 251 for i in range(n))
        assert bytes(inb) == want, f"rank {rank}: {n} bytes from {peer} differ"

# Pickled objects, any source.
if rank == 0:
    got = sorted(comm.recv(source=MPI.ANY_SOURCE, tag=7) for _ in range(size - 1))
    assert got == [("hello", r) for r in range(1, size)], got
else:
    comm.send(("hello", rank), dest=0, tag=7)

# Collectives.
assert comm.bcast({"k": 42} if rank == 0 else None, root=0) == {"k": 42}
assert comm.allreduce(rank, op=MPI.SUM) == size * (size - 1) // 2
assert comm.gather(rank * rank, root=0) == ([r * r for r in range(size)] if rank == 0 else None)
assert comm.alltoall([rank * 100 + r for r in range(size)]) == [r * 100 + rank for r in range(size)]
comm.Barrier()

# One-sided: every rank exposes 4 KiB; each puts its rank into the next one's window and gets
# the previous one's back.
win_mem = bytearray(4096)
win = MPI.Win.Create(win_mem, comm=comm)
nxt, prv = (rank + 1) % size, (rank - 1) % size
win.Fence()
win.Put([bytearray([rank + 1] * 64), MPI.BYTE], nxt, target=0)
win.Fence()
assert win_mem[:64] == bytearray([prv + 1] * 64), f"rank {rank}: put from {prv} missing"
got = bytearray(64)
win.Fence()
win.Get([got, MPI.BYTE], prv, target=0)
win.Fence()
assert got == bytearray([((prv - 1) % size) + 1] * 64), f"rank {rank}: get from {prv} wrong"
win.Free()

comm.Barrier()
if rank == 0:
    print(f"mpi4py: ok ({size} ranks: point to point 1 B to 1 MiB, objects, bcast, allreduce, "
          f"gather, alltoall, Put and Get)", flush=True)
