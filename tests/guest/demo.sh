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
	echo
	echo "(the two-node part follows: two guests, started by scripts/run-nodes.py)"
	rmmod exanest_dma
fi
