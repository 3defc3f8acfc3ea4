# The libfabric provider between guests (issue 24; Documentation/libfabric.rst), sourced by
# nodes.sh on every node of a multi-node run after the driver is loaded, with $node set:
# the second NIC reaches the partner node (node XOR 1); and where the Debian disk is mounted
# (GUEST_DISK, scripts/build-guest-debian.sh), Debian's libfabric 1.17 loads libexanest-fi.so from
# FI_PROVIDER_PATH and lists the engine as an FI_EP_RDM domain, narrowed by hints the way
# fi_getinfo(3) says, beside its own tcp provider on the second NIC; and fi_pingpong runs over
# it between the two nodes.
partner=$((node ^ 1))
if grep -q 'exanest.ip=' /proc/cmdline && [ "$partner" -lt "${nodes:-2}" ]; then
	# The partner boots at the same time: up to 60 s for it to answer.
	i=0
	until ping -c 1 -W 2 "node$partner" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 30 ] || break
	done
	[ $i -lt 30 ]; t $? "node$node-eth-ping-node$partner" "node$partner does not answer on eth0 ($(ifconfig eth0 | head -2))"
fi
if [ -x /usr/bin/fi_info ]; then
	# fi_info's listing of one provider, and its exit status; its lines go to the console.
	fab() { out=$(fi_info "$@" 2>&1); rc=$?; echo "$out" | sed "s/^/  fi_info $*: /"; return $rc; }
	fab -p exanest
	[ $rc = 0 ] && echo "$out" | grep -q 'provider: exanest' && echo "$out" | grep -q 'fabric: exanest' &&
		echo "$out" | grep -q 'domain: exanest-dma0' && echo "$out" | grep -q 'type: FI_EP_RDM' &&
		echo "$out" | grep -q 'protocol: FI_PROTO_UNSPEC'
	t $? "node$node-fi-info-exanest" "fi_info -p exanest (exit $rc) does not list the engine's RDM domain"
	# What Open MPI's mtl ofi asks for: tagged messages on a reliable datagram endpoint.
	fab -p exanest -t FI_EP_RDM -c FI_TAGGED
	[ $rc = 0 ] && echo "$out" | grep -q 'provider: exanest'
	t $? "node$node-fi-info-exanest-tagged" "fi_info -p exanest -t FI_EP_RDM -c FI_TAGGED (exit $rc)"
	# What it does not offer: no connected endpoints, no IP addresses.
	fab -p exanest -t FI_EP_MSG
	[ $rc != 0 ] && echo "$out" | grep -q -- '-61$'   # -FI_ENODATA
	t $? "node$node-fi-info-exanest-no-msg-ep" "fi_info -p exanest -t FI_EP_MSG listed something (exit $rc)"
	fab -p exanest -a FI_SOCKADDR_IN
	[ $rc != 0 ]
	t $? "node$node-fi-info-exanest-no-inet" "fi_info -p exanest -a FI_SOCKADDR_IN listed something (exit $rc)"
	# Every provider libfabric has here: ours beside Debian's built-in ones.
	fab -l
	[ $rc = 0 ] && echo "$out" | grep -q '^exanest:' && echo "$out" | grep -q '^tcp:'
	t $? "node$node-fi-info-providers" "fi_info -l (exit $rc) lacks exanest or tcp"
	# The TCP baseline's provider sees the second NIC and its network.
	fab -p tcp -t FI_EP_MSG -d eth0
	[ $rc = 0 ] && echo "$out" | grep -q 'fabric: 169.254.0.0/16'
	t $? "node$node-fi-info-tcp-eth0" "fi_info -p tcp -t FI_EP_MSG -d eth0 (exit $rc) does not show 169.254.0.0/16"
fi
# fi_pingpong (libfabric-bin's, a test we did not write) over the engine, every byte checked
# (-c): RDM endpoints, the names exchanged over the second NIC's TCP (its control socket, port
# 47592), the messages over the engine. Eager (64 B, one mailbox message each), then rendezvous
# (64 KiB: an RTS, the receiver's get from the sender's buffer, a FIN). Node 1 serves, node 0 is
# the client; each checks its engine placed at least the mailbox messages, and for rendezvous
# the bytes, that the run needs (no silent fallback to TCP).
if [ -x /usr/bin/fi_pingpong ] && [ "$partner" -lt "${nodes:-2}" ]; then
	mbox() { sed -n 's/.*"mbox_placed": \([0-9]*\).*/\1/p' /sys/kernel/debug/exanest-dma0/engine; }
	placed() { sed -n 's/.*"placed_bytes": \([0-9]*\).*/\1/p' /sys/kernel/debug/exanest-dma0/engine; }
	for size in 64 65536; do
		iters=200; [ $size -le 64 ] || iters=20
		m0=$(mbox); b0=$(placed)
		if [ $((node % 2)) = 1 ]; then
			out=$(timeout 120 fi_pingpong -c -p exanest -e rdm -S $size -I $iters 2>&1); rc=$?
		else
			i=0
			# The server starts at the same time: the control socket refuses until it listens.
			while :; do
				out=$(timeout 120 fi_pingpong -c -p exanest -e rdm -S $size -I $iters "node$partner" 2>&1); rc=$?
				i=$((i + 1))
				echo "$out" | grep -q 'Connection refused' && [ $i -lt 30 ] || break
				sleep 1
			done
		fi
		echo "$out" | sed "s/^/  fi_pingpong $size: /"
		m1=$(mbox); b1=$(placed)
		echo "  fi_pingpong $size: engine placed $((m1 - m0)) mailbox messages, $((b1 - b0)) bytes"
		[ $rc = 0 ] && [ $((m1 - m0)) -ge $iters ] &&
			{ [ $size -le 64 ] || [ $((b1 - b0)) -ge $((size * iters)) ]; }
		t $? "node$node-fi-pingpong-rdm-$size" "fi_pingpong -S $size (exit $rc; engine: $((m1 - m0)) messages, $((b1 - b0)) bytes)"
	done
fi
