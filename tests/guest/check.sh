# Guest end-to-end tests (sourced by /init with exanest.run=check). Every check prints one
# "GUEST-TEST: ok|not ok NAME" line, or, from the kselftest-harness binaries, one TAP line
# ("ok N NAME", "not ok N NAME", "ok N NAME # SKIP why"); the host harness
# (scripts/check.sh, tests/harness/console.py) counts both.
#
# The tests come in two parts, a (everything but b) and b (the deregistration races, the ioctl
# fuzzer and unbinding with files open): exanest.run=check runs a then b, and
# exanest.run=check-a or check-b one of them (to rerun a part while working on it).
. /usr/share/exanest/harness.sh
part=${1:-all}
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }

if want a; then
case "$(uname -r)" in
*-exanest) t 0 kernel-patched ;;
*) t 1 kernel-patched "uname -r is $(uname -r)" ;;
esac
ls /sys/class/iommu 2>/dev/null | grep -q smmu; t $? smmuv3-present "no SMMU in /sys/class/iommu"
# The kernel's io-pgtable-arm KUnit suite, built in and run at boot: with patch 0007's case
# (map_pages_array: pages out of order across two tables of leaves, an overlapping range).
dmesg | grep -qE '^\[[^]]*\] +ok [0-9]+ io-pgtable-arm-test$'
t $? kernel-io-pgtable-kunit "$(dmesg | grep -E 'io-pgtable-arm-test|test failed for fmt' | tail -n 3)"

# The engine model without a driver. The fault check first: the SMMU driver rate-limits its
# event log (10 per 5 s).
pldma-probe fault
pldma-probe selftest
for m in /lib/modules/*/kernel/lib/test_hmm.ko; do
	insmod "$m" && rmmod test_hmm; t $? kernel-module-load-unload "test_hmm.ko"
done

# Swap on zram, for the on-demand paging swap test.
if [ -e /sys/block/zram0/disksize ] || { [ -e /sys/class/zram-control/hot_add ] && cat /sys/class/zram-control/hot_add >/dev/null; }; then
	echo 256M >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon /dev/zram0
	t $? zram-swap-on "zram swap set-up failed"
fi

fi

# The driver.
if [ -e /lib/exanest_dma.ko ] && want a; then
	# The module's KUnit suites run at load and log KTAP at info level, which the console
	# (level 5) does not print: copy the new KTAP lines of the kernel log to the console.
	n0=$(dmesg | wc -l)
	insmod /lib/exanest_dma.ko; t $? driver-load "insmod failed"
	dmesg | tail -n +$((n0 + 1)) | grep -E '^\[[^]]*\] *(KTAP version|#|ok |not ok |[0-9]+\.\.[0-9]+)'
	ktap=$(dmesg | tail -n +$((n0 + 1)) | grep -cE '^\[[^]]*\] +ok [0-9]+ ')
	[ "$ktap" -ge 30 ]; t $? driver-kunit-ran "only $ktap KUnit cases reported"
	n=$(ls /dev/exanest-dma* 2>/dev/null | wc -l)
	[ "$n" = 2 ]; t $? driver-two-devices "found $n /dev/exanest-dma*"
	# The end-to-end tests, one kselftest-harness binary per topic, each scenario in the three
	# memory modes (pin, prefault, on_demand): TAP lines that the host harness counts too.
	# The hardening defects last (exanest-hardening).
	for name in sizes errors contexts queues net coherence fork hardening; do
		topic $name
	done
	# The user library: its C and Rust examples and the CLI.
	expect example-c "copied 1000003 bytes, data verified" copy-c 1000003
	expect example-rust "copied 3000001 bytes, data verified" copy-rs 3000001
	expect example-odp-c "copied 20000003 bytes on demand: [1-9][0-9]* faults resolved, 0 pages pinned, data verified" odp-c 20000003
	expect example-odp-rust "copied 9000001 bytes on demand: [1-9][0-9]* faults resolved, 0 pages pinned, data verified" odp-rs 9000001
	# The library's soundness: a copy's Pending and a region forgotten (mem::forget), the
	# destination dropped with the copy in flight; freed buffers poisoned and kept, untouched.
	expect example-forget-rust "^forget: nothing written after the drop" forget-rs
	# The C library on the device: stale queue handles, remote rights (GUEST-TEST lines).
	exanest-lib; rc=$?
	[ "$rc" -le 1 ] || t 1 exanest-lib "exit status $rc"
	# The libfabric provider through libfabric's API, between the guest's two engines, where
	# the Debian disk is attached (Documentation/libfabric.rst).
	if [ -x /bin/exanest-fabric ] && [ -e /usr/lib/aarch64-linux-gnu/libfabric.so.1 ]; then
		exanest-fabric; rc=$?
		[ "$rc" -le 1 ] || t 1 exanest-fabric "exit status $rc"
	fi
	# The user-level queue: 1000 copies of 1 B to 33 KB kept 32 deep, on demand, polled.
	expect example-queue-c "^queue: 1000 copies, data verified" queue-c 1000
	# Remote puts (ABI 4): node 0 into node 1's never-touched memory, faults NACKed and resolved.
	out=$(put-c 8388611 2>&1); echo "$out"
	echo "$out" | grep -q "receiver on node 1: the put's completion came through its mailbox (immediate 0x600d, 8388611 bytes), [1-9][0-9]* faults NACKed and resolved" &&
		echo "$out" | grep -q "got 8388611 bytes back into untouched memory, status 0, [1-9][0-9]* faults of its own resolved, data verified" &&
		echo "$out" | grep -q "^put 8388611 bytes to another node and got them back, data verified on both"
	t $? example-put-c "$out"
	out=$(put-rs 4194307 2>&1); echo "$out"
	echo "$out" | grep -q "put 4194307 bytes to node 1 endpoint [0-9]*: status 0, [1-9][0-9]* receiver faults NACKed and resolved, data verified" &&
		echo "$out" | grep -q "got 4194307 bytes back: status 0, data verified"
	t $? example-put-rust "$out"
	# The mailbox (ABI 5): a hello, a key sent back through it, a put with that key and with
	# immediate data (ABI 7), whose completion comes through the mailbox.
	expect example-mailbox-rust "A put 1048579 bytes into memory B never touched (.*completion (immediate 0xd09e, 1048579 bytes at 0x[0-9a-f]*); statuses 0 0 0; data verified" mailbox-rs 1048579
	expect cli-copy "15728640 bytes .* data verified" exanest-cli -d 1 copy --size 5M --count 3 --src-offset 3 --dst-offset 1
	expect cli-counters-fresh-session "^copies 0 errors 0" exanest-cli -d 1 counters
	out=$(exanest-cli info 2>&1)
	echo "$out" | grep -q "channels *4"; t $? cli-info "$out"
	expect cli-copy-on-demand "8388608 bytes .* data verified" exanest-cli copy --size 8M --mode on-demand
	# Advised, the copy takes no fault, unless the mm invalidated some of the pages meanwhile
	# (compaction migrates pages: CI once saw 2 faults re-resolving 10 pages).
	expect cli-advise-no-faults "^faults 0 \|invalidations [1-9]" exanest-cli copy --size 2M --mode on-demand --advise
	# The translation budget through the library: 256 pages for an 8 MiB on-demand copy.
	out=$(exanest-cli copy --size 8M --mode on-demand --budget 256 2>&1); echo "$out"
	echo "$out" | grep -q "8388608 bytes .* data verified" &&
		echo "$out" | grep -q "^budget 256 pages: evicted [1-9][0-9]* pages in [1-9]"
	t $? cli-budget-evicts "$out"
	# The benchmark's short smoke run; scripts/check.sh checks its numbers are sane, and the
	# engine figures it is quoted with come from the device (debugfs).
	cat /sys/kernel/debug/exanest-dma0/engine
	grep -q '"bandwidth_mbps": [1-9]' /sys/kernel/debug/exanest-dma0/engine
	t $? debugfs-engine-timing "$(cat /sys/kernel/debug/exanest-dma0/engine)"
	echo '{"run": 1}'
	exanest-bench all --quick
	exanest-bench memlock --quick
	exanest-bench thp --quick
	# Moving a queue between contexts needs more queues than contexts: the driver with one.
	rmmod exanest_dma && insmod /lib/exanest_dma.ko contexts=1 >/dev/null 2>&1
	exanest-bench queue-move --quick
	# A receiver whose context another process took: a put, or a message to its mailbox,
	# makes it resident again.
	# And a REG whose argument changes under it acts on one read of it.
	exanest-net -r net.non_resident_receiver -r net.non_resident_mailbox \
		-r global.reg_argument_read_once; rc=$?
	[ "$rc" -le 1 ] || t 1 "exanest-net non_resident_receiver" "exit status $rc"
	rmmod exanest_dma && insmod /lib/exanest_dma.ko >/dev/null 2>&1
	t $? driver-reload-after-queue-move "insmod failed"
	exanest-bench net --quick
	exanest-bench net-cold --quick
	exanest-bench net-small-cold --quick
	exanest-bench net-many --quick
	exanest-bench net-loss --quick
	exanest-bench net-mailbox --quick
	exanest-bench net-pingpong --quick
	# Unload with an open file is refused; after close it works.
	exec 3</dev/exanest-dma0
	rmmod exanest_dma 2>/dev/null; [ $? != 0 ]; t $? driver-unload-refused-while-open "rmmod succeeded"
	exec 3<&-
	rmmod exanest_dma; t $? driver-unload "rmmod failed"
	[ ! -e /dev/exanest-dma0 ]; t $? driver-unload-removes-devices "/dev/exanest-dma0 still there"
	# A fault handler installed after the attach still gets the SMMU's reports: the SMMUv3
	# patch looks the handler up when the fault arrives, not when the domain is attached.
	# The SMMU's reports come from its event thread, after the engine's own: a copy whose faults
	# the engine's reports resolved can end before that thread ran (CI saw "faults 12 (iommu
	# 0)" once, at a91f243). The handler is looked for in up to three copies.
	insmod /lib/exanest_dma.ko fault_handler_late=1 smmu_fault_events=1 >/dev/null 2>&1
	for i in 1 2 3; do
		out=$(exanest-cli copy --size 4M --mode on-demand 2>&1); echo "$out"
		! echo "$out" | grep -q "^faults [1-9][0-9]* (iommu [1-9][0-9]*)" || break
	done
	echo "$out" | grep -q "^faults [1-9][0-9]* (iommu [1-9][0-9]*)"
	t $? odp-fault-handler-set-after-attach "$out"
	rmmod exanest_dma
	# The SMMU's reports, which the driver turns off by default (kernel patch 0006), kept:
	# its handler gets every fault, and resolves a fault by itself.
	insmod /lib/exanest_dma.ko smmu_fault_events=1 >/dev/null 2>&1
	export EXANEST_SMMU_EVENTS=1
	topic coherence -t smmu_reports_faults_to_handler -t iommu_report_resolves_region_inside_a_page
	unset EXANEST_SMMU_EVENTS
	rmmod exanest_dma
	# More processes than contexts: the module uses four contexts per engine (module
	# parameter), and the contexts tests run again on them (sixteen processes on four).
	insmod /lib/exanest_dma.ko contexts=4 >/dev/null 2>&1
	topic contexts
	# The user-level queues on four contexts: sixteen processes with queues share them (an idle
	# queue's context moves to a waiting process, its doorbell faults one back).
	exanest-queues -f queue_abi; rc=$?
	[ "$rc" -le 1 ] || t 1 "exanest-queues (contexts=4)" "exit status $rc"
	rmmod exanest_dma
	# No translation budget (budget_pages=0: unlimited): the touch-ahead window and the
	# map-ahead are not bounded to nothing by it (a 4 MiB on-demand copy faulted on every page
	# when a window was capped at a quarter of the limit taken as 0).
	insmod /lib/exanest_dma.ko budget_pages=0 >/dev/null 2>&1
	out=$(exanest-cli copy --size 4M --mode on-demand 2>&1); echo "$out"
	f=$(echo "$out" | sed -n 's/^faults \([0-9]*\).*/\1/p')
	[ -n "$f" ] && [ "$f" -lt 64 ] && echo "$out" | grep -q "data verified"
	t $? budget-zero-is-unlimited "$out"
	rmmod exanest_dma
	# The per-process limit on registered memory (module parameter): REG past it is ENOSPC.
	insmod /lib/exanest_dma.ko max_registered_mib=3 >/dev/null 2>&1
	expect registered-bytes-limit "(ENOSPC)" exanest-cli copy --size 2M --mode on-demand
	expect registered-bytes-under-limit "1048576 bytes .* data verified" exanest-cli copy --size 1M --mode on-demand
	rmmod exanest_dma
fi

if [ -e /lib/exanest_dma.ko ] && want b; then
	# Part b: the hardening's races, the ioctl fuzzer and unbinding with files open.
	insmod /lib/exanest_dma.ko; t $? driver-load-b "insmod failed"
	# The deregistration races (10000 iterations each), the ioctl fuzzer (100000 random
	# calls from four threads while a fifth remaps the memory; it prints its seed first, for
	# a replay with -s). Concurrency last: it unbinds and rebinds the devices.
	for name in race fuzz concurrency; do
		topic $name
	done
	rmmod exanest_dma
fi

# The whole kernel log, last: the console prints warnings and worse only (/init), so a report
# below that level reached the ring buffer alone. console.py scans this block for kernel
# reports (and counts nothing else in it); a run without it fails.
echo "GUEST-DMESG-BEGIN"
dmesg
echo "GUEST-DMESG-END"
