# make evaluate's libfabric and MPI part (issue 24; Documentation/libfabric.rst), sourced by
# eval.sh once per run where the Debian disk is attached, the driver loaded: the guest's two
# engines, cabled back to back, one process on each (FI_EXANEST_DEVICE_NAME picks its engine;
# the control sockets go over the loopback interface). One JSON line per measurement, read by
# tests/eval/report.py beside exanest-bench's net-pingpong (the raw user-level queue):
# - fi_pingpong (libfabric-bin's) -e rdm, 8 B and 1 MiB: its usec/xfer (half a round trip,
#   the mean over the iterations) and MB/s;
# - NetPIPE (NPopenmpi, Open MPI's pml cm over mtl ofi over the provider) at 8 B: its time per
#   transfer (half a round trip, the best of its trials);
# - examples/mpi-stencil.c on 2 ranks with fresh buffers each iteration, and with reused ones.
# Clock: the guest's, under make evaluate's -icount (a nanosecond an instruction).
if [ -x /usr/bin/fi_pingpong ] && [ -x /usr/bin/mpirun ] && [ -e /dev/exanest-dma1 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	# fi_pingpong SIZE ITERS: server on engine 1, client on engine 0.
	fpp() {
		FI_EXANEST_DEVICE_NAME=exanest-dma1 timeout 300 fi_pingpong -p exanest -e rdm -S "$1" -I "$2" \
			>/tmp/fpp-server.out 2>&1 &
		local i=0 out
		while :; do
			out=$(FI_EXANEST_DEVICE_NAME=exanest-dma0 timeout 300 fi_pingpong -p exanest -e rdm \
				-S "$1" -I "$2" 127.0.0.1 2>&1)
			i=$((i + 1))
			echo "$out" | grep -q 'Connection refused' && [ $i -lt 30 ] || break
			sleep 1
		done
		wait
		# "bytes iters total time MB/sec usec/xfer Mxfers/sec": the line after the header.
		echo "$out" | awk -v s="$1" -v n="$2" '
			/usec\/xfer/ { h = 1; next }
			h && NF >= 7 { printf "{\"bench\": \"fi-pingpong\", \"size\": %d, \"iters\": %d, \"mb_per_s\": %s, \"usec_per_xfer\": %s}\n", s, n, $5, $6; found = 1; exit }
			END { if (!found) printf "{\"bench\": \"fi-pingpong\", \"size\": %d, \"error\": \"no result\"}\n", s }'
		echo "$out" | grep -v usec | sed 's/^/fi_pingpong: /' | head -5
	}
	fpp 8 2000
	fpp 1048576 40
	# mpirun with one rank on each engine (an application context each).
	mpi="mpirun --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanest --mca btl self
		--mca oob_tcp_if_include lo -x FI_PROVIDER_PATH"
	on2() { timeout 600 $mpi -np 1 env FI_EXANEST_DEVICE_NAME=exanest-dma0 "$@" : \
		-np 1 env FI_EXANEST_DEVICE_NAME=exanest-dma1 "$@" 2>&1; }
	rm -f /tmp/np8.out
	on2 NPopenmpi -l 8 -u 8 -p 0 -n 2000 -o /tmp/np8.out | sed 's/^/NPopenmpi: /' | tail -3
	if [ -s /tmp/np8.out ]; then
		awk '{ printf "{\"bench\": \"netpipe\", \"size\": %d, \"usec_per_xfer\": %.3f}\n", $1, $3 * 1e6; exit }' /tmp/np8.out
	else
		echo '{"bench": "netpipe", "size": 8, "error": "no result"}'
	fi
	for mode in fresh reuse; do
		out=$(on2 mpi-stencil $([ $mode = reuse ] && echo --reuse))
		echo "$out" | grep '^mpi-stencil' | sed 's/^/  /'
		echo "$out" | sed -n 's/^mpi-stencil: ok (\([0-9]*\) ranks, \([0-9]*\) x \([0-9]*\) grid, \([0-9]*\) iterations.*: \([0-9.]*\) ms an iteration.*/{"bench": "mpi-stencil", "mode": "'$mode'", "ranks": \1, "rows": \2, "cols": \3, "iters": \4, "ms_per_iter": \5}/p' |
			grep . || echo "{\"bench\": \"mpi-stencil\", \"mode\": \"$mode\", \"error\": \"$(echo "$out" | tail -1 | tr -d '"\\')\"}"
	done
fi
