# Open MPI across the guests over the engine (issue 24; Documentation/libfabric.rst), sourced by
# nodes.sh after fabric.sh on every node of a multi-node run with the Debian disk, with $node
# and $partner set. Every node serves Open MPI's remote shell (exanest-rsh) on the second NIC;
# node 0 launches, forcing the engine's provider (pml cm, mtl ofi, exanest only: no TCP or
# shared-memory transport can carry a message unnoticed) and checking its engine placed at
# least the bytes MPI moved to it:
# - with two nodes: mpirun -np 2 hostname; NetPIPE (NPopenmpi) from 1 B to 256 KiB, 10 round
#   trips a size, nothing pinned for it, then over TCP on the second NIC as the baseline; the mpi4py program (point to point, collectives, Put and
#   Get through osc pt2pt) on 2 ranks, one a guest, and on 4, two a guest (the engine loops
#   messages between ranks of one node back at its port); a peer killed mid-job; the
#   application examples/mpi-stencil.c with fresh buffers on a lossy link;
# - with four: the mpi4py program and mpi-stencil on 4 ranks, one a guest, through the switch.
# The other nodes wait for node 0's jobs to end before their own tests.
if [ -x /usr/bin/mpirun ] && [ "$partner" -lt "${nodes:-2}" ]; then
	exanest-rsh -d >/tmp/exanest-rshd.log 2>&1 &
	if [ "$node" = 0 ]; then
		export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
		mpi="mpirun --mca plm_rsh_agent exanest-rsh --mca oob_tcp_if_include eth0
			--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanest
			--mca btl self,vader --mca osc pt2pt -x FI_PROVIDER_PATH"
		hosts="node$node,node$partner"
		placed() { sed -n 's/.*"placed_bytes": \([0-9]*\).*/\1/p' /sys/kernel/debug/exanest-dma0/engine; }
		mrun() { out=$(timeout 300 $mpi "$@" 2>&1); rc=$?; echo "$out" | sed "s/^/  mpirun: /"; return $rc; }

		t0=$(cut -d' ' -f1 /proc/uptime)
	fi
	if [ "$node" = 0 ] && [ "${nodes:-2}" = 2 ]; then
		mrun -np 2 -H "$hosts" hostname
		[ $rc = 0 ] && echo "$out" | grep -qx "node$node" && echo "$out" | grep -qx "node$partner"
		t $? "node$node-mpirun-hostname" "mpirun -np 2 hostname (exit $rc)"

		b0=$(placed)
		rm -f /tmp/np.out
		# Nothing pinned for the data: the most memory any process here has locked while it
		# runs (VmLck, where the driver charges what it pins) stays the endpoint's two queue
		# rings, 2 x 32 KiB, whatever the message size (a verbs provider pins every buffer).
		echo 0 >/tmp/vmlck.max
		(
			m=0
			while :; do
				v=$(cat /proc/[0-9]*/status 2>/dev/null | awk '/^VmLck:/ { if ($2 > m) m = $2 } END { print m + 0 }')
				[ "$v" -le "$m" ] || { m=$v; echo "$m" >/tmp/vmlck.max; }
				sleep 0.2
			done
		) &
		sampler=$!
		mrun -np 2 -H "$hosts" --mca mtl_base_verbose 10 NPopenmpi -l 1 -u 262144 -p 0 -n 10 -o /tmp/np.out
		kill $sampler
		b1=$(placed)
		lck=$(cat /tmp/vmlck.max)
		echo "  NPopenmpi: at most $lck kB locked by one process here (VmLck)"
		[ "$lck" -le 64 ]
		t $? "node$node-mpi-nothing-pinned" "a process had $lck kB locked during NPopenmpi (the queue rings are 64)"
		# Each size: 10 round trips, so 10 times its bytes came to this node.
		moved=$(awk '{ s += $1 } END { printf "%d", s * 10 }' /tmp/np.out 2>/dev/null)
		echo "  NPopenmpi: engine placed $((b1 - b0)) bytes here, MPI moved ${moved:-0} bytes here"
		[ $rc = 0 ] && [ "$(wc -l </tmp/np.out)" -ge 30 ] &&
			[ "$(echo "$out" | grep -c 'mtl:ofi:provider: exanest-dma')" = 2 ] &&
			[ "${moved:-0}" -gt 0 ] && [ $((b1 - b0)) -ge "$moved" ]
		t $? "node$node-mpi-netpipe" "NPopenmpi (exit $rc; engine $((b1 - b0)) bytes, MPI ${moved:-0})"

		# The baseline in the same boot: the same NetPIPE over TCP on the second NIC (pml ob1,
		# btl tcp), which must not touch the engine; the two side by side (wall clock in the
		# guests, debug kernels: not a measure of the engine, no time asserted).
		b0=$(placed)
		rm -f /tmp/np-tcp.out
		out=$(timeout 300 mpirun --mca plm_rsh_agent exanest-rsh --mca oob_tcp_if_include eth0 \
			--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 -np 2 -H "$hosts" \
			NPopenmpi -l 1 -u 262144 -p 0 -n 10 -o /tmp/np-tcp.out 2>&1); rc=$?
		b1=$(placed)
		echo "  NPopenmpi: time per transfer (NetPIPE's, us), engine / TCP on the second NIC:"
		awk 'NR == FNR { e[$1] = $3 * 1e6; next } ($1 in e) { printf "  NPopenmpi: %8d B %10.1f %10.1f\n", $1, e[$1], $3 * 1e6 }' \
			/tmp/np.out /tmp/np-tcp.out 2>/dev/null | awk 'NR % 4 == 1'
		[ $rc = 0 ] && [ "$(wc -l </tmp/np-tcp.out)" -ge 30 ] && [ $((b1 - b0)) -lt 65536 ]
		t $? "node$node-mpi-netpipe-tcp" "NPopenmpi over TCP (exit $rc; engine placed $((b1 - b0)) bytes meanwhile)"

		# A peer killed mid-job (examples/mpi-stencil.c --die-at: rank 1, on the other node,
		# SIGKILLs itself at its 5th iteration, rank 0 waiting in MPI_Sendrecv): the job ends,
		# with Open MPI's report of the killed rank, within the timeout, never a hang; the
		# next jobs run on the same engines (the kernel log is judged as always).
		out=$(timeout 120 $mpi -np 2 -H "$hosts" mpi-stencil --die-at 5 2>&1); rc=$?
		echo "$out" | sed "s/^/  mpirun: /" | head -n 12
		[ $rc != 0 ] && [ $rc != 124 ] && echo "$out" | grep -q "rank 1 .*on signal 9"
		t $? "node$node-mpi-peer-killed" "mpi-stencil with rank 1 killed (exit $rc, 124: timed out)"

		# The application with fresh buffers each iteration, never registered, received into
		# before any CPU touches them, on a lossy link (1 % of each engine's packets dropped,
		# 0.1 % corrupted): every value must match the serial run bit for bit, and the engine
		# here must have placed at least the halos rank 0 received.
		lossy() {
			echo "drop_ppm $1 corrupt_ppm $2" >/sys/kernel/debug/exanest-dma0/link
			exanest-rsh "node$partner" "echo drop_ppm $1 corrupt_ppm $2 >/sys/kernel/debug/exanest-dma0/link"
		}
		drops() { sed -n 's/.*"injected_drops": \([0-9]*\).*/\1/p' /sys/kernel/debug/exanest-dma0/engine; }
		lossy 10000 1000
		b0=$(placed); d0=$(drops)
		mrun -np 2 -H "$hosts" mpi-stencil
		b1=$(placed); d1=$(drops)
		lossy 0 0
		halos=$(echo "$out" | sed -n 's/.* \([0-9]*\) bytes of halos received by rank 0$/\1/p')
		echo "  mpi-stencil: engine placed $((b1 - b0)) bytes here, ${halos:-0} of halos; $((d1 - d0)) packets dropped here"
		[ $rc = 0 ] && echo "$out" | grep -q "^mpi-stencil: ok (2 ranks.*fresh buffers" &&
			[ "${halos:-0}" -gt 0 ] && [ $((b1 - b0)) -ge "$halos" ] && [ $((d1 - d0)) -gt 0 ]
		t $? "node$node-mpi-stencil-fresh-lossy" "mpi-stencil, fresh buffers, lossy link (exit $rc; engine $((b1 - b0)) bytes, halos ${halos:-0}; $((d1 - d0)) drops)"
	fi
	if [ "$node" = 0 ]; then
		# One rank a guest; and with two guests, two a guest too (ranks 0 and 1, partners in the
		# program, on one node: the engine loops their messages back).
		h=$(i=0; while [ $i -lt "${nodes:-2}" ]; do printf 'node%s,' $i; i=$((i + 1)); done)
		set -- "${nodes:-2}:${h%,}"
		[ "${nodes:-2}" != 2 ] || set -- "$@" "4:node$node:2,node$partner:2"
		for run in "$@"; do
			np=${run%%:*}
			b0=$(placed)
			mrun -np "$np" -H "${run#*:}" python3 /usr/share/exanest/mpi4py-test.py
			b1=$(placed)
			[ $rc = 0 ] && echo "$out" | grep -q "^mpi4py: ok ($np ranks" && [ $((b1 - b0)) -ge $((1 << 20)) ]
			t $? "node$node-mpi4py-np$np-${run#*:}" "mpi4py, $np ranks on ${run#*:} (exit $rc; engine placed $((b1 - b0)) bytes)"
		done
		if [ "${nodes:-2}" != 2 ]; then
			# The application on every guest, through the switch; rank 0's halos came through
			# this node's engine.
			b0=$(placed)
			mrun -np "${nodes}" -H "${h%,}" mpi-stencil
			b1=$(placed)
			halos=$(echo "$out" | sed -n 's/.* \([0-9]*\) bytes of halos received by rank 0$/\1/p')
			[ $rc = 0 ] && echo "$out" | grep -q "^mpi-stencil: ok ($nodes ranks.*fresh buffers" &&
				[ "${halos:-0}" -gt 0 ] && [ $((b1 - b0)) -ge "$halos" ]
			t $? "node$node-mpi-stencil-np$nodes" "mpi-stencil, $nodes ranks on ${h%,} (exit $rc; engine $((b1 - b0)) bytes, halos ${halos:-0})"
		fi
		echo "GUEST-TIME: mpi $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s"
		# The other nodes go on to their own tests now (through the remote shell: a console
		# line between nodes would make them partners, run-nodes.py's "bye" logic).
		i=1
		while [ $i -lt "${nodes:-2}" ]; do exanest-rsh "node$i" touch /tmp/mpi-done; i=$((i + 1)); done
	else
		# The MPI jobs have this node to themselves until node 0 says they ended (the engine
		# tests' lossy engines and killed receivers would stall them): at most 10 minutes.
		i=0
		while [ ! -e /tmp/mpi-done ] && [ $i -lt 600 ]; do sleep 1; i=$((i + 1)); done
		[ -e /tmp/mpi-done ]; t $? "node$node-mpi-done" "node 0's MPI jobs did not end within 10 minutes"
	fi
fi
