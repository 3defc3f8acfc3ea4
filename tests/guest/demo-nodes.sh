# The demo's second part (exanest.run=demo-nodes, started by scripts/run-nodes.py from
# `make demo`): two guests, two kernels, one engine each, linked over a unix socket. Node 1
# serves: it says its address (node and endpoint) out of band, through the consoles, and waits
# in its mailbox. Node 0 says hello there, gets a key back through its own mailbox, puts 8 MiB
# into memory node 1's process never touched, gets it back and says done. Both print their
# engine's counters.
SIZE=8388608
counters() {
	echo "node $1 engine counters (debugfs exanest-dma0/engine):"
	sed -n 's/.*"net": {\(.*\)}}/\1/p' /sys/kernel/debug/exanest-dma0/engine |
		tr ',' '\n' | sed 's/^ */  /' |
		grep -E 'nacks|resumes|retransmitted|timeouts|probes|placed|mbox|rnr'
}
insmod /lib/exanest_dma.ko || exit 1
node=$(sed -n 's/.*"node": \([0-9]*\).*/\1/p' /sys/kernel/debug/exanest-dma0/engine)
if [ "$node" = 1 ]; then
	echo "=== Node 1: a process with a mailbox, waiting for a hello ==="
	nodes-rs serve $SIZE | while read -r line; do
		echo "$line"
		case "$line" in
		address:*) set -- $line; echo "GUEST-OOB 0 demo-peer $2 $3" ;;
		esac
	done
	counters 1
else
	echo "=== Node 0: waiting for node 1's address (out of band, through the consoles) ==="
	stty -echo 2>/dev/null
	while read -r word peer ep; do
		[ "$word" = demo-peer ] && break
	done
	echo "node 1's process is endpoint $ep of node $peer"
	echo
	echo "=== Two nodes: a put of 8 MiB into malloc'd memory another node's process never touched, and a get back ==="
	echo "(two guests, each its own kernel and engine, linked by -netdev stream on a unix socket;"
	echo " a hello and the key go through the engines' mailboxes; each first write of a page"
	echo " faults in node 1's SMMU, node 1's engine NACKs it, node 1's kernel resolves it, the"
	echo " engine RESUMEs the writer, which retransmits; then node 0 gets the bytes back into"
	echo " memory it never touched, its own faults resolved by its own kernel)"
	nodes-rs send "$peer" "$ep" $SIZE
	counters 0
fi
rmmod exanest_dma
