# The libfabric provider between guests (issue 24; Documentation/libfabric.rst), sourced by
# nodes.sh on every node of a multi-node run after the driver is loaded, with $node set:
# the second NIC reaches the partner node (node XOR 1); and where the Debian disk is mounted
# (GUEST_DISK, scripts/build-guest-debian.sh), Debian's libfabric 1.17 loads libexanest-fi.so from
# FI_PROVIDER_PATH and lists the engine as an FI_EP_RDM domain, narrowed by hints the way
# fi_getinfo(3) says, beside its own tcp provider on the second NIC.
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
