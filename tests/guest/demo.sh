# Demo (sourced by /init with exanest.run=demo).
echo "=== ExaNeSt PLDMA engines on this machine ==="
pldma-probe info
echo
echo "=== Engine DMA from an unmapped IOVA: the SMMU must record exactly one translation fault ==="
echo "(no driver is bound yet: the engine sits in its default DMA domain, where nothing is mapped;"
echo " the arm-smmu-v3 lines are the kernel logging the SMMU event-queue record)"
pldma-probe fault
echo "The engine waited in FAULT with the faulting IOVA latched; RESUME without a mapping faulted"
echo "again (the second event), and NACK ended the transfer with ERROR/ABORTED."
if [ -e /lib/exanest_dma.ko ]; then
	echo
	echo "=== Loading the driver ==="
	insmod /lib/exanest_dma.ko && ls -l /dev/exanest-dma*
	echo
	echo "=== A copy from one malloc'd buffer to another, by virtual address, through the SMMU ==="
	exanest-demo
	if command -v put-c >/dev/null; then
		echo
		echo "=== Two nodes: a put of 8 MiB into malloc'd memory another node's process never touched, and a get back ==="
		echo "(the guest's two engines are nodes 0 and 1, their network ports cabled back to back;"
		echo " a process on node 1 registers the memory for remote writing, a process on node 0"
		echo " puts into it from its user-level queue; each first write of a page faults in node 1's"
		echo " SMMU, node 1's engine NACKs it, node 1's driver resolves it, the engine RESUMEs the"
		echo " writer, which retransmits; then the writer gets the bytes back into memory it never"
		echo " touched, its own faults resolved by its own kernel)"
		put-c 8388608
		for n in 0 1; do
			echo "node $n engine counters (debugfs exanest-dma$n/engine):"
			sed -n 's/.*"net": {\(.*\)}}/\1/p' /sys/kernel/debug/exanest-dma$n/engine |
				tr ',' '\n' | sed 's/^ */  /' |
				grep -E 'nacks|resumes|retransmitted|timeouts|probes|placed'
		done
	fi
	rmmod exanest_dma
fi
