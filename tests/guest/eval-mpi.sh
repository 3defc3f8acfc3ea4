# make evaluate's libfabric and MPI part (issue 24; Documentation/libfabric.rst), sourced where
# the Debian disk is attached and the driver loaded: the guest's two engines, cabled back to
# back, one process on each (FI_EXANEST_DEVICE_NAME picks its engine; the control sockets go over
# the loopback interface). One JSON line per measurement, for tests/eval/report.py.
#
# EVAL_MPI_PART=icount (eval.sh's runs, under -icount, where the model's link rate holds in the
# guest's clock): the provider's streaming bandwidth, 1 MiB messages, 16 in flight, one thread
# driving both endpoints (exanest-fi-bw, "fi-bw"); and fi_pingpong (libfabric-bin's) -e rdm of
# 1 MiB, one message at a time between two processes, its MB/s ("fi-pingpong-icount").
#
# EVAL_MPI_PART=wall (a boot of its own without -icount, scripts/evaluate.sh: under -icount QEMU
# runs the two vCPUs in turn on one thread, and a process spinning on its CQ holds the other's
# answer back until the next timer, which inflates every hand-over between two processes), each
# figure on the host's clock as the guest sees it, EVAL_RUNS times:
# - exanest-bench net-pingpong, the raw user-level queue's 8-byte ping-pong ("net-pingpong-wall");
# - fi_pingpong -e rdm 8 B: its usec/xfer, half a round trip, the mean ("fi-pingpong");
# - NetPIPE (NPopenmpi over Open MPI's pml cm, mtl ofi and the provider) at 8 B: its time per
#   transfer, half a round trip, the best of its trials ("netpipe");
# - examples/mpi-stencil.c on 2 ranks with fresh buffers each iteration, and reused
#   ("mpi-stencil").
if [ -x /usr/bin/fi_pingpong ] && [ -x /usr/bin/mpirun ] && [ -e /dev/exanest-dma1 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	# Open MPI's launcher refuses a node named "(none)", the kernel's default.
	[ "$(hostname)" != "(none)" ] || hostname guest
	# fi_pingpong SIZE ITERS BENCH: server on engine 1, client on engine 0.
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
		# "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec": the line after the header.
		echo "$out" | awk -v s="$1" -v n="$2" -v b="$3" '
			/usec\/xfer/ { h = 1; next }
			h && NF >= 8 { printf "{\"bench\": \"%s\", \"size\": %d, \"iters\": %d, \"mb_per_s\": %s, \"usec_per_xfer\": %s}\n", b, s, n, $6, $7; found = 1; exit }
			END { if (!found) printf "{\"bench\": \"%s\", \"size\": %d, \"error\": \"no result\"}\n", b, s }'
	}
	if [ "${EVAL_MPI_PART:-wall}" = icount ]; then
		exanest-fi-bw 1048576 16 64
		fpp 1048576 40 fi-pingpong-icount
	else
		# mpirun with one rank on each engine (an application context each).
		mpi="mpirun --mca plm_rsh_agent exanest-rsh --mca pml cm --mca mtl ofi
			--mca mtl_ofi_provider_include exanest --mca btl self --mca oob_tcp_if_include lo
			-x FI_PROVIDER_PATH"
		on2() { timeout 600 $mpi -np 1 env FI_EXANEST_DEVICE_NAME=exanest-dma0 "$@" : \
			-np 1 env FI_EXANEST_DEVICE_NAME=exanest-dma1 "$@" 2>&1; }
		r=1
		while [ "$r" -le "${EVAL_RUNS:-1}" ]; do
			exanest-bench net-pingpong --count 2000 |
				sed 's/"bench":"net-pingpong"/"bench":"net-pingpong-wall"/'
			fpp 8 2000 fi-pingpong
			rm -f /tmp/np8.out
			on2 NPopenmpi -l 8 -u 8 -p 0 -n 2000 -o /tmp/np8.out >/tmp/np8.log
			if [ -s /tmp/np8.out ]; then
				awk '{ printf "{\"bench\": \"netpipe\", \"size\": %d, \"usec_per_xfer\": %.3f}\n", $1, $3 * 1e6; exit }' /tmp/np8.out
			else
				echo "{\"bench\": \"netpipe\", \"size\": 8, \"error\": \"$(tail -1 /tmp/np8.log | tr -d '"\\')\"}"
			fi
			for mode in fresh reuse; do
				out=$(on2 mpi-stencil $([ $mode = reuse ] && echo --reuse))
				echo "$out" | grep '^mpi-stencil'
				echo "$out" | sed -n 's/^mpi-stencil: ok (\([0-9]*\) ranks, \([0-9]*\) x \([0-9]*\) grid, \([0-9]*\) iterations.*: \([0-9.]*\) ms an iteration.*/{"bench": "mpi-stencil", "mode": "'$mode'", "ranks": \1, "rows": \2, "cols": \3, "iters": \4, "ms_per_iter": \5}/p' |
					grep . || echo "{\"bench\": \"mpi-stencil\", \"mode\": \"$mode\", \"error\": \"$(echo "$out" | tail -1 | tr -d '"\\')\"}"
			done
			r=$((r + 1))
		done
	fi
fi
