#!/usr/bin/env bash
# Boot the guest under the project's QEMU: virt with an SMMUv3, two PLDMA engines, each an SR-IOV
# PCIe endpoint behind its own pcie-root-port (so each engine and each of its contexts, a virtual
# function, has its own StreamID and IOMMU group), the console on stdio. The engines' network
# ports are cabled back to back through a hub: nodes 0 and 1 (Documentation/network.rst).
# Usage: run-qemu.sh RUN [extra QEMU args...]   RUN is demo, check or shell (see tests/guest/init).
# Environment: QEMU, KERNEL, INITRD (set by the Makefile), TIMEOUT seconds (0 = none),
# QEMU_APPEND (more kernel arguments), PLDMA_OPTS (engine properties, e.g. bandwidth=1000 or
# contexts=4), ENGINES (how many engines on the hub, default 2),
# QEMU_MEM (guest memory, default 2G), QEMU_SMP (CPUs, default 2).
# One node of several (scripts/run-nodes.py): NODE is this guest's node id, NETDEV the -netdev
# option of its link (e.g. stream,server=off,addr.type=unix,addr.path=S); the guest then has one
# engine, cabled to that netdev, and PCAP (a file, then filter-dump options: ",maxlen=128")
# records the link.
# The libfabric and MPI runs (Documentation/libfabric.rst): GUEST_DISK, the Debian image of
# scripts/build-guest-debian.sh, attached read-only as a virtio disk; ETHDEV, the -netdev option
# of a second NIC (virtio-net) that the guest of node NODE configures as 169.254.0.(NODE+1).
# The QFDB under emulation (Documentation/qfdb.rst): PLATFORM=mmu500 puts the engines on the
# board's platform bus behind an Arm MMU-500 (SMMUv2, Linux's arm-smmu.c) instead of PCIe behind
# the SMMUv3: engine i's own StreamID is 0x200 + 64 i, its context n's 0x200 + 64 i + 1 + n (an
# HP port's AXI ID scheme); MMU500_OPTS are the MMU-500's properties (e.g. num-cb=8).
. "$(dirname "$0")/common.sh"
RUN=${1:?demo, check or shell}; shift
: "${QEMU:?}" "${KERNEL:?}" "${INITRD:?}"
TIMEOUT=${TIMEOUT:-0}
opts=${PLDMA_OPTS:+,$PLDMA_OPTS}

ip=
[ -z "${ETHDEV:-}" ] || ip="exanest.ip=169.254.0.$((${NODE:-0} + 1)) "

iommu=iommu=smmuv3,
[ "${PLATFORM:-}" != mmu500 ] || iommu=
cmd=("$QEMU" -machine "virt,${iommu}gic-version=3" -cpu max -smp "${QEMU_SMP:-2}"
	-m "${QEMU_MEM:-2G}" -nographic -nic none -no-reboot
	-kernel "$KERNEL" -initrd "$INITRD"
	-append "console=ttyAMA0 log_buf_len=1M panic=-1 oops=panic exanest.run=$RUN $ip${QEMU_APPEND:-}")
# An engine: engine_dev INDEX NETDEV-ID NODE-ID
engine_dev() {
	if [ "${PLATFORM:-}" = mmu500 ]; then
		cmd+=(-device "exanest-pldma-platform,iommu=smmu0,stream-id=$((0x200 + 64 * $1)),netdev=$2,node-id=$3$opts")
	else
		cmd+=(-device "pcie-root-port,id=rp$1,chassis=$(($1 + 1)),slot=$1,addr=$(printf 0x%x $(($1 + 4)))"
			-device "exanest-pldma,bus=rp$1,netdev=$2,node-id=$3$opts")
	fi
}
[ "${PLATFORM:-}" != mmu500 ] || cmd+=(-device "arm-mmu500,id=smmu0${MMU500_OPTS:+,$MMU500_OPTS}")
if [ -n "${NODE:-}" ]; then
	# Another QEMU, behind a socket (and the switch): the round trip is the host's, hundreds of
	# microseconds, not the modelled link's; the peer window's cap follows it
	# (Documentation/network.rst, "Congestion"), unless PLDMA_OPTS says otherwise.
	case "$opts" in
	*net-rtt-ns=*) ;;
	*) opts="$opts,net-rtt-ns=500000" ;;
	esac
	cmd+=(-netdev "${NETDEV:?NETDEV for node $NODE},id=link")
	engine_dev 0 link "$NODE"
	[ -z "${PCAP:-}" ] || cmd+=(-object "filter-dump,id=dump,netdev=link,file=$PCAP")
else
	# ENGINES (default 2) engines on one hub, node i behind root port i (make evaluate's
	# incast has nine).
	for ((i = 0; i < ${ENGINES:-2}; i++)); do
		cmd+=(-netdev "hubport,id=link$i,hubid=0")
		engine_dev "$i" "link$i" "$i"
	done
fi
if [ -n "${GUEST_DISK:-}" ]; then
	cmd+=(-drive "file=$GUEST_DISK,if=none,format=raw,readonly=on,id=debian"
		-device virtio-blk-pci,drive=debian)
fi
if [ -n "${ETHDEV:-}" ]; then
	cmd+=(-netdev "$ETHDEV,id=eth" -device "virtio-net-pci,romfile=,netdev=eth,mac=52:54:00:e0:00:$(printf %02x "${NODE:-0}")")
fi
cmd+=("$@")
if [ "$TIMEOUT" != 0 ]; then
	exec timeout --foreground -k 10 "$TIMEOUT" "${cmd[@]}" </dev/null
fi
exec "${cmd[@]}"
