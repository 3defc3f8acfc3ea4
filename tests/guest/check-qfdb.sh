# The QFDB under emulation (Documentation/qfdb.rst): the guest tests that do not depend on
# SR-IOV, on the virt board's MMU-500 with the engines on the platform bus (scripts/run-qemu.sh
# PLATFORM=mmu500): Linux's arm-smmu.c with its hard-IRQ context fault handler (dev == NULL),
# terminate mode, the 16 context banks, and the devicetree front-end with a device per context.
# The same lines as check.sh (harness.sh).
. /usr/share/exanest/harness.sh

case "$(uname -r)" in
*-exanest) t 0 kernel-patched ;;
*) t 1 kernel-patched "uname -r is $(uname -r)" ;;
esac
dmesg | grep -q 'arm-smmu [0-9a-f]*\.iommu: SMMUv2 with:'
t $? qfdb-mmu500-probed "$(dmesg | grep -i smmu | head -5)"
banks=$(dmesg | sed -n 's/.*arm-smmu .*\t\([0-9]*\) context banks.*/\1/p' | head -1)
[ -n "$banks" ]; t $? qfdb-context-banks "no bank count in the log"

n0=$(dmesg | wc -l)
insmod /lib/exanest_dma.ko; t $? driver-load "insmod failed"
n=$(ls /dev/exanest-dma* 2>/dev/null | wc -l)
[ "$n" = 2 ]; t $? driver-two-devices "found $n /dev/exanest-dma*"
# Each engine, and each of its contexts, in an IOMMU group of its own (its StreamID).
ctxs=$(ls -d /sys/bus/platform/devices/*context@* 2>/dev/null | wc -l)
groups=$(ls /sys/kernel/iommu_groups | wc -l)
[ "$ctxs" -ge 2 ] && [ "$groups" -ge $((ctxs + 2)) ]
t $? qfdb-context-devices "$ctxs context devices, $groups IOMMU groups"
out=$(dmesg | tail -n +$((n0 + 1)) | grep -E '(exanest_dma|arm-smmu) [0-9a-f]+\.' |
	grep -iE 'error|fail|warn')
[ -z "$out" ]; t $? driver-probe-clean "$out"

# The end-to-end tests, as on PCI (their PCI-only cases skip, saying why).
for name in sizes errors queues net coherence fork hardening; do
	topic $name
done
# The contexts tests, on as many contexts as the MMU-500 has banks free for them: the two
# engines' own DMA holds two of the sixteen, so fourteen contexts (module parameter), all of
# which can be held at once. (Sixteen processes each on a context of its own then skips.)
rmmod exanest_dma && insmod /lib/exanest_dma.ko contexts=$((banks - 2)) >/dev/null 2>&1
t $? driver-reload-contexts "insmod contexts=$((banks - 2)) failed"
topic contexts
# One context per engine, as on PCI: a receiver whose context another process took (a put, or
# a message to its mailbox, makes it resident again), a REG read once, and a queue moved
# between contexts.
rmmod exanest_dma && insmod /lib/exanest_dma.ko contexts=1 >/dev/null 2>&1
t $? driver-reload-one-context "insmod contexts=1 failed"
topic net -r net.non_resident_receiver -r net.non_resident_mailbox -r global.reg_argument_read_once
exanest-bench queue-move --quick
# Four contexts: sixteen processes with user-level queues share them.
rmmod exanest_dma && insmod /lib/exanest_dma.ko contexts=4 >/dev/null 2>&1
t $? driver-reload-four-contexts "insmod contexts=4 failed"
topic queues -f queue_abi
# arm-smmu.c reports every context fault from its hard-IRQ handler (dev == NULL), whatever the
# module asks: the handler gets them, and resolves a fault by itself.
rmmod exanest_dma && insmod /lib/exanest_dma.ko smmu_fault_events=1 >/dev/null 2>&1
t $? driver-reload-smmu-events "insmod smmu_fault_events=1 failed"
EXANEST_SMMU_EVENTS=1 topic coherence -t smmu_reports_faults_to_handler \
	-t iommu_report_resolves_region_inside_a_page
rmmod exanest_dma && insmod /lib/exanest_dma.ko >/dev/null 2>&1
t $? driver-reload "insmod failed"
# More processes than the MMU-500 has free banks: twenty-four processes copying at once on one
# engine's sixteen contexts, with fourteen banks. arm-smmu refuses the attaches past the last
# bank (ENOSPC); the driver takes the bank of an idle holder's domain, or the process waits.
topic contexts -t sixteen_processes_share_the_contexts
refused=$(sed -n 's/^iommu_refused //p' /sys/kernel/debug/exanest-dma0/stats)
echo "iommu_refused ${refused:-none} ($banks banks)"
[ "${refused:-0}" -gt 0 ]; t $? qfdb-banks-virtualised "iommu_refused ${refused:-none} with $banks banks"

expect example-c "copied 1000003 bytes, data verified" copy-c 1000003
expect example-odp-c "copied 20000003 bytes on demand: [1-9][0-9]* faults resolved, 0 pages pinned, data verified" odp-c 20000003
expect example-queue-c "^queue: 1000 copies, data verified" queue-c 1000
expect example-put-c "^put 8388611 bytes to another node and got them back, data verified on both" put-c 8388611
expect example-mailbox-rust "statuses 0 0 0; data verified" mailbox-rs 1048579
expect cli-copy-on-demand "8388608 bytes .* data verified" exanest-cli copy --size 8M --mode on-demand
exanest-bench all --quick
# Unbinding the platform devices with files open and copies queued, then binding them again
# (the contexts' devices destroyed and made again), in every memory mode.
topic concurrency
rmmod exanest_dma; t $? driver-unload "rmmod failed"
[ ! -e /dev/exanest-dma0 ]; t $? driver-unload-removes-devices "/dev/exanest-dma0 still there"
[ -z "$(ls -d /sys/bus/platform/devices/*context@* 2>/dev/null)" ]
t $? qfdb-context-devices-removed "$(ls -d /sys/bus/platform/devices/*context@* 2>/dev/null)"

echo "GUEST-DMESG-BEGIN"
dmesg
echo "GUEST-DMESG-END"
