# Demo (sourced by /init with exanest.run=demo).
echo "=== ExaNeSt PLDMA engines on this machine ==="
pldma-probe info
echo
echo "=== Engine DMA from an unmapped IOVA: the SMMU must record exactly one translation fault ==="
pldma-probe fault
echo
echo "=== What the SMMU driver logged ==="
dmesg | grep -A6 'event 0x10 received' | tail -8
