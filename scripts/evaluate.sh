#!/usr/bin/env bash
# make evaluate: run exanest-bench in the guest under a deterministic virtual clock and
# regenerate Documentation/evaluation.rst and its figures.
# Usage: evaluate.sh [--quick] [--runs N]
. "$(dirname "$0")/common.sh"
runs=5 quick=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--runs) runs=$2; shift ;;
	*) die "usage: evaluate.sh [--quick] [--runs N]" ;;
	esac
	shift
done
# The evaluation kernel: the test kernel's source and patches without its debugging options
# (lockdep, KASAN...), so that measured times mean something. Its module and initramfs are kept
# apart from the test kernel's.
eval_image
OUT="$TOP/build/eval"
mkdir -p "$OUT"
log "evaluation: $runs run(s)$([ $quick = 1 ] && echo ', quick'), QEMU -icount shift=0,sleep=off"
t0=$SECONDS
# The Debian disk (libfabric, Open MPI) for the MPI part, unless quick (tests/guest/eval-mpi.sh).
disk=
[ $quick = 1 ] || disk=$("$TOP/scripts/build-guest-debian.sh")
QEMU="$QEMU" KERNEL="$KB/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs-eval.cpio" TIMEOUT=7200 \
	QEMU_MEM=4G QEMU_APPEND="exanest.runs=$runs exanest.quick=$quick" GUEST_DISK="$disk" \
	"$TOP/scripts/run-qemu.sh" /usr/share/exanest/eval.sh -icount shift=0,sleep=off >"$OUT/console.log" 2>&1 ||
	{ tail -30 "$OUT/console.log" >&2; die "the evaluation run failed (log: $OUT/console.log)"; }
# Incast: a second boot with nine engines on the hub, each port with the fabric's last hop to it
# modelled (Documentation/network.rst, "Congestion"), four contexts each.
QEMU="$QEMU" KERNEL="$KB/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs-eval.cpio" TIMEOUT=1800 \
	QEMU_MEM=4G QEMU_APPEND="exanest.runs=$runs exanest.quick=$quick exanest.incast=1" ENGINES=9 \
	PLDMA_OPTS="contexts=4,rx-queue=262144,ecn-threshold=32768" \
	"$TOP/scripts/run-qemu.sh" /usr/share/exanest/eval.sh -icount shift=0,sleep=off >"$OUT/incast.log" 2>&1 ||
	{ tail -30 "$OUT/incast.log" >&2; die "the incast run failed (log: $OUT/incast.log)"; }
# Fault service on the QFDB machine: the engines behind the MMU-500 (arm-smmu.c's hard-IRQ fault
# reports, terminate mode), beside this SMMUv3 run's (Documentation/qfdb.rst).
PLATFORM=mmu500 QEMU="$QEMU" KERNEL="$KB/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs-eval.cpio" \
	TIMEOUT=1800 QEMU_MEM=4G QEMU_APPEND="exanest.runs=$runs exanest.quick=$quick exanest.qfdb=1" \
	"$TOP/scripts/run-qemu.sh" /usr/share/exanest/eval.sh -icount shift=0,sleep=off >"$OUT/qfdb.log" 2>&1 ||
	{ tail -30 "$OUT/qfdb.log" >&2; die "the MMU-500 run failed (log: $OUT/qfdb.log)"; }
# libfabric and MPI against the raw queue, on the host's clock (no -icount: tests/guest/eval-mpi.sh
# says why); then MPI over the engine against MPI over TCP on the second NIC: make mpi's two
# guests on the evaluation kernel (two QEMU processes: a ratio within the boot). Unless quick.
if [ $quick = 0 ]; then
	QEMU="$QEMU" KERNEL="$KB/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs-eval.cpio" TIMEOUT=3600 \
		QEMU_MEM=4G QEMU_APPEND="exanest.runs=$runs exanest.mpiwall=1" GUEST_DISK="$disk" \
		"$TOP/scripts/run-qemu.sh" /usr/share/exanest/eval.sh >"$OUT/mpiwall.log" 2>&1 ||
		{ tail -30 "$OUT/mpiwall.log" >&2; die "the MPI wall-clock run failed (log: $OUT/mpiwall.log)"; }
	QEMU="$QEMU" KERNEL="$KB/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs-eval.cpio" \
		GUEST_DISK="$disk" QEMU_MEM=1536M "$TOP/scripts/run-nodes.py" --timeout 900 mpi \
		>"$OUT/mpi.log" 2>&1 || { tail -30 "$OUT/mpi.log" >&2; die "the MPI run failed (log: $OUT/mpi.log)"; }
fi
{
	grep -a -E '^\{"(run|bench|engine)"' "$OUT/console.log"
	grep -a -E '^\{"bench"' "$OUT/incast.log"
	grep -a -E '^\{"(run|bench)"' "$OUT/qfdb.log" | sed 's/^{/{"platform": "mmu500", /'
	[ $quick = 1 ] || grep -a -E '^\{"bench"' "$OUT/mpiwall.log"
	[ $quick = 1 ] || python3 "$TOP/tests/eval/report.py" --mpi-log "$OUT/mpi.log"
} >"$OUT/raw.jsonl"
# The engine's bandwidth and latency come from the device (debugfs, printed by eval.sh).
grep -q '^{"engine"' "$OUT/raw.jsonl" ||
	die "no engine line in the guest's output: /sys/kernel/debug/exanest-dma0/engine missing? (log: $OUT/console.log)"
log "evaluation: the engine says $(grep -m1 '^{"engine"' "$OUT/raw.jsonl")"
meta="$(sed -n 's/^EVAL-META: //p' "$OUT/console.log" | head -1), the evaluation kernel (no lockdep, no KASAN)"
log "evaluation: guest done in $((SECONDS - t0)) s; writing the report"
if [ $quick = 1 ]; then
	python3 "$TOP/tests/eval/report.py" --check "$OUT/raw.jsonl"
else
	mkdir -p "$TOP/Documentation/eval"
	cp "$OUT/raw.jsonl" "$TOP/Documentation/eval/raw.jsonl"
	python3 "$TOP/tests/eval/report.py" "$OUT/raw.jsonl" "$TOP/Documentation/evaluation.rst" \
		"$TOP/Documentation/eval" --meta "Guest: $meta. Host time for the whole run: $((SECONDS - t0)) s."
	log "wrote Documentation/evaluation.rst and Documentation/eval/*.svg"
fi
