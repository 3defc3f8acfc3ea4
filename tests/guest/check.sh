# Guest end-to-end tests (sourced by /init with exanest.run=check). Every check prints one
# "GUEST-TEST: ok|not ok NAME" line; the host harness (scripts/run-check.sh) counts them.
case "$(uname -r)" in
*-exanest) echo "GUEST-TEST: ok kernel-patched" ;;
*) echo "GUEST-TEST: not ok kernel-patched - uname -r is $(uname -r)" ;;
esac
if [ -d /sys/class/iommu ] && ls /sys/class/iommu | grep -q smmu; then
	echo "GUEST-TEST: ok smmuv3-present"
else
	echo "GUEST-TEST: not ok smmuv3-present - no SMMU in /sys/class/iommu"
fi
# The fault check first: the SMMU driver rate-limits its event log (10 per 5 s).
pldma-probe fault
pldma-probe selftest
for m in /lib/modules/*/kernel/lib/test_hmm.ko; do
	if insmod "$m" && rmmod test_hmm; then
		echo "GUEST-TEST: ok module-load-unload"
	else
		echo "GUEST-TEST: not ok module-load-unload - test_hmm.ko"
	fi
done
