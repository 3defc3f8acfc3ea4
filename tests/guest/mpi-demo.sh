# make mpi (exanest.run=mpi, two guests by scripts/run-nodes.py with the Debian disk): an MPI job
# across the two guests over the engine, the way a user runs one. Every node loads the driver and
# serves Open MPI's remote shell (exanest-rsh) on the second NIC; node 0 runs mpirun, forcing the
# engine's provider: fi_pingpong (8 B), NetPIPE from 1 B to 1 MiB, the same over TCP on the second NIC (the
# baseline), then the mpi4py program, then examples/mpi-stencil.c with fresh buffers each
# iteration and with reused ones; then both engines' counters. Documentation/libfabric.rst.
insmod /lib/exanest_dma.ko || exit 1
engine=/sys/kernel/debug/exanest-dma0/engine
node=$(sed -n 's/.*"node": \([0-9]*\).*/\1/p' $engine)
exanest-rsh -d >/tmp/exanest-rshd.log 2>&1 &
if [ "$node" = 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	set -- --mca plm_rsh_agent exanest-rsh --mca oob_tcp_if_include eth0 \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include exanest \
		--mca btl self,vader --mca osc pt2pt -x FI_PROVIDER_PATH -np 2 -H node0,node1
	# libfabric's own ping-pong first (libfabric-bin), node 1 serving through the remote shell.
	echo "\$ fi_pingpong -p exanest -e rdm -S 8 -I 2000 node1"
	exanest-rsh node1 "timeout 120 fi_pingpong -p exanest -e rdm -S 8 -I 2000" >/tmp/fpp-server.out 2>&1 &
	server=$!
	i=0
	while :; do
		out=$(timeout 120 fi_pingpong -p exanest -e rdm -S 8 -I 2000 node1 2>&1)
		i=$((i + 1))
		echo "$out" | grep -q 'Connection refused' && [ $i -lt 30 ] || break
		sleep 1
	done
	echo "$out"
	# The server's remote shell (not the remote-shell daemon above, which never ends).
	wait $server
	echo "\$ mpirun $* NPopenmpi -u 1048576 -n 20 -p 0"
	mpirun "$@" NPopenmpi -u 1048576 -n 20 -p 0 2>&1
	echo "\$ mpirun ... --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0 NPopenmpi ...   # the TCP baseline"
	mpirun --mca plm_rsh_agent exanest-rsh --mca oob_tcp_if_include eth0 --mca pml ob1 \
		--mca btl tcp,self --mca btl_tcp_if_include eth0 -np 2 -H node0,node1 \
		NPopenmpi -u 1048576 -n 20 -p 0 2>&1
	echo "\$ mpirun ... python3 mpi4py-test.py"
	mpirun "$@" python3 /usr/share/exanest/mpi4py-test.py 2>&1
	echo "\$ mpirun ... mpi-stencil; mpirun ... mpi-stencil --reuse"
	mpirun "$@" mpi-stencil 2>&1
	mpirun "$@" mpi-stencil --reuse 2>&1
	echo "engine of node 0: $(sed 's/.*"net": \({[^}]*}\).*/\1/' $engine)"
	echo "GUEST-OOB 1 bye"
else
	read -r _
	echo "engine of node 1: $(sed 's/.*"net": \({[^}]*}\).*/\1/' $engine)"
fi
