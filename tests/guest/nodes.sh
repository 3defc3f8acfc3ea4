# The two-guest run (exanest.run=nodes, started by scripts/run-nodes.py): every guest is one
# node, with one engine whose network port reaches the other guests over a unix socket. Node 0
# runs the network tests (exanest-net) with their receivers on node 1, a separate QEMU process
# with its own kernel, which serves them (exanest-net --serve) until node 0 says "bye". Results
# as in check.sh: GUEST-TEST lines and kselftest TAP, then the kernel log (tests/harness/console.py).
t() { if [ "$1" = 0 ]; then echo "GUEST-TEST: ok $2"; else echo "GUEST-TEST: not ok $2 - $3"; fi; }

insmod /lib/exanest_dma.ko; t $? node-driver-load "insmod failed"
engine=/sys/kernel/debug/exanest-dma0/engine
node=$(sed -n 's/.*"node": \([0-9]*\).*/\1/p' $engine)
grep -q '"link": true' $engine; t $? "node$node-link-up" "$(cat $engine)"
if [ "$node" = 0 ]; then
	t0=$(cut -d' ' -f1 /proc/uptime)
	EXANEST_NET_PEER=1 exanest-net; rc=$?
	[ "$rc" -le 1 ] || t 1 "exanest-net (two guests)" "exit status $rc"
	echo "GUEST-TIME: exanest-net-two-guests $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s"
	echo "GUEST-OOB 1 bye"
else
	exanest-net --serve; t $? "node$node-served" "exanest-net --serve failed"
fi
cat $engine
# No timeout on either side over the tests (a link that loses nothing).
grep -q '"timeouts": 0,' $engine; t $? "node$node-no-timeouts" "$(cat $engine)"
rmmod exanest_dma; t $? "node$node-driver-unload" "rmmod failed"

echo "GUEST-DMESG-BEGIN"
dmesg
echo "GUEST-DMESG-END"
