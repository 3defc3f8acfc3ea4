# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""report.py's reading of make mpi's console (tests/guest/mpi-demo.sh) for make evaluate."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import report  # noqa: E402

LOG = """\
[n0] $ fi_pingpong -p exanest -e rdm -S 8 -I 2000 node1
[n0] bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
[n0] 8       2k      =2k      31k         0.61s      0.05     151.40       0.01
[n0] $ mpirun --mca plm_rsh_agent exanest-rsh --mca pml cm --mca mtl ofi -np 2 -H node0,node1 NPopenmpi -u 1048576 -n 20 -p 0
[n0] Now starting the main loop
[n0]   0:       1 bytes     20 times -->      0.04 Mbps in     181.73 usec
[n0]  15:     256 bytes     20 times -->      2.68 Mbps in     728.60 usec
[n0]  16:     384 bytes     20 times -->      5.35 Mbps in     547.25 usec
[n1] engine of node 1: {"tx_packets": 1}
[n0] $ mpirun ... --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 NPopenmpi ...   # the TCP baseline
[n0]   0:       1 bytes     20 times -->      0.01 Mbps in     896.67 usec
[n0]  15:     256 bytes     20 times -->      1.01 Mbps in    1147.13 usec
[n0] $ mpirun ... python3 mpi4py-test.py
[n0]   0:       1 bytes     20 times -->      0.01 Mbps in       1.00 usec
[n0] $ mpirun ... mpi-stencil; mpirun ... mpi-stencil --reuse
[n0] mpi-stencil: ok (2 ranks, 64 x 4096 grid, 30 iterations, fresh buffers; bit-identical to the serial run, residual 0.0272659): 33.596 ms an iteration (MPI_Wtime, the slowest rank); 983040 bytes of halos received by rank 0
[n0] mpi-stencil: ok (2 ranks, 64 x 4096 grid, 30 iterations, reused buffers; bit-identical to the serial run, residual 0.0272659): 16.522 ms an iteration (MPI_Wtime, the slowest rank); 983040 bytes of halos received by rank 0
"""


class MpiLog(unittest.TestCase):
    def test_netpipe_pairs_and_stencil_modes(self):
        out = report.mpi_log(LOG.splitlines())
        np = [o for o in out if o["bench"] == "mpi-netpipe-2guests"]
        # Sizes measured both ways only; lines after another job's command are not NetPIPE's.
        self.assertEqual([(o["size"], o["engine_us"], o["tcp_us"]) for o in np],
                         [(1, 181.73, 896.67), (256, 728.6, 1147.13)])
        fpp = [(o["size"], o["usec_per_xfer"]) for o in out if o["bench"] == "fi-pingpong-2guests"]
        self.assertEqual(fpp, [(8, 151.4)])
        st = {o["mode"]: o["ms_per_iter"] for o in out if o["bench"] == "mpi-stencil-2guests"}
        self.assertEqual(st, {"fresh": 33.596, "reused": 16.522})

    def test_a_failed_stencil_gives_no_figure(self):
        out = report.mpi_log(["[n0] mpi-stencil: FAILED (2 ranks): 3 of 10 values differ"])
        self.assertEqual(out, [])


if __name__ == "__main__":
    unittest.main()
