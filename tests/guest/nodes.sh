# The two-guest run (exanest.run=nodes, started by scripts/run-nodes.py): every guest is one
# node, with one engine whose network port reaches the other guests over a unix socket (or,
# with more than two, through the host's switch). Each even node runs the network tests
# (exanest-net) with their receivers on the next node, a separate QEMU process with its own
# kernel, which serves them (exanest-net --serve) until the even node says "bye": first
# every test on a link that loses nothing, after which no op may have waited for a timeout;
# then the lossy link's (1 % of the packets dropped, 0.1 % corrupted). Results as in check.sh:
# GUEST-TEST lines and kselftest TAP, then the kernel log (tests/harness/console.py).
. /usr/share/exanest/harness.sh

# Swap on zram, for the paged-out receiver.
if [ -e /sys/block/zram0/disksize ] || { [ -e /sys/class/zram-control/hot_add ] && cat /sys/class/zram-control/hot_add >/dev/null; }; then
	echo 256M >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon /dev/zram0
	t $? zram-swap-on "zram swap set-up failed"
fi

insmod /lib/exanest_dma.ko; t $? node-driver-load "insmod failed"
engine=/sys/kernel/debug/exanest-dma0/engine
node=$(sed -n 's/.*"node": \([0-9]*\).*/\1/p' $engine)
grep -q '"link": true' $engine; t $? "node$node-link-up" "$(cat $engine)"
nodes=$(sed -n 's/.*exanest.nodes=\([0-9]*\).*/\1/p' /proc/cmdline)
# The second NIC, and the libfabric provider where the Debian disk is attached.
. /usr/share/exanest/fabric.sh
# Open MPI over the engine, where the Debian disk is attached.
. /usr/share/exanest/mpi.sh
# The MPI jobs ran on a lossy link too: the no-timeouts tests below count from here.
timeouts() { sed -n 's/.*"timeouts": \([0-9]*\),.*/\1/p' $engine; }
tb=$(timeouts)
# Guests are QEMU processes on a loaded host: one can go unscheduled for longer than the default
# first retransmission timeout (10 ms of host time, since no -icount), and its peer's timer then
# fires on packets that were late, not lost. The engine does not count such a timeout: the first
# answer after it that echoes a packet sent before it (an ACK, a NACK or RESUME, GET data; the
# Eifel test) shows it spurious; a FAULT NACK that comes so late still pauses the op until its
# RESUME; and a timer that fires when nothing was sent since the op resumed counts nothing. So the
# multi-guest runs keep the default floor, as a user's would (Transport v2: the 1 s override is
# gone); the no-timeouts tests below count the timeouts judged needed (from after the MPI jobs).
peer=$((node + 1))
# exanest.linkloss=switch: the host's switch loses, damages, duplicates and reorders packets
# (scripts/check.sh sets it so): only the lossy tests, the link's loss instead of the engines'.
if grep -q 'exanest.linkloss=switch' /proc/cmdline; then
	if [ $((node % 2)) = 0 ] && [ "$peer" -lt "${nodes:-2}" ]; then
		t0=$(cut -d' ' -f1 /proc/uptime)
		EXANEST_NET_LINK_LOSS=1 EXANEST_NET_PEER=$peer exanest-net -f lossy; rc=$?
		[ "$rc" -le 1 ] || t 1 "exanest-net -f lossy (lossy switch)" "exit status $rc"
		echo "GUEST-TIME: exanest-net-lossy-switch $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s"
		echo "GUEST-OOB $peer bye"
	elif [ $((node % 2)) = 1 ]; then
		exanest-net --serve; t $? "node$node-served" "exanest-net --serve failed"
	else
		read -r _
	fi
elif [ $((node % 2)) = 0 ] && [ "$peer" -lt "${nodes:-2}" ]; then
	t0=$(cut -d' ' -f1 /proc/uptime)
	EXANEST_NET_PEER=$peer exanest-net -F lossy; rc=$?
	[ "$rc" -le 1 ] || t 1 "exanest-net (two guests)" "exit status $rc"
	echo "GUEST-TIME: exanest-net-two-guests $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s"
	cat $engine
	[ "$(timeouts)" = "$tb" ]; t $? "node$node-no-timeouts" "$tb timeouts before: $(cat $engine)"
	t0=$(cut -d' ' -f1 /proc/uptime)
	EXANEST_NET_PEER=$peer exanest-net -f lossy; rc=$?
	[ "$rc" -le 1 ] || t 1 "exanest-net -f lossy (two guests)" "exit status $rc"
	echo "GUEST-TIME: exanest-net-lossy-two-guests $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s"
	echo "GUEST-OOB $peer bye"
elif [ $((node % 2)) = 1 ]; then
	exanest-net --serve; t $? "node$node-served" "exanest-net --serve failed"
	# The serving node's ops (the puts back of both_directions_at_once) on a link that lost nothing
	# then; on the lossy link it only answers.
	[ "$(timeouts)" = "$tb" ]; t $? "node$node-no-timeouts" "$tb timeouts before: $(cat $engine)"
else
	read -r _ # no partner: wait for "bye"
fi
cat $engine
rmmod exanest_dma; t $? "node$node-driver-unload" "rmmod failed"

echo "GUEST-DMESG-BEGIN"
dmesg
echo "GUEST-DMESG-END"
