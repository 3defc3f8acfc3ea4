#!/usr/bin/env bash
# make profile: where the guest's time goes, exactly. Boots the evaluation kernel under
# -icount shift=0 (an instruction is a nanosecond of virtual time) with the insprof TCG plugin
# (tests/qemu-model/insprof.c), runs one exanest-bench command with EXANEST_PROF set (the bench
# marks the spans it times: the copies of fault-service, the populate loop of cpu-fault), and
# prints the instructions each kernel and module function executed in them, on every vCPU
# (tests/eval/profile.py; Documentation/design.rst, "Profiling").
# Usage: profile.sh [BENCH [ARG...]]   (default: fault-service --reps 1)
. "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || set -- fault-service --reps 1
case "$*" in *,*) die "profile.sh: no commas in the bench's arguments" ;; esac
eval_image
PLUGIN="$(dirname "$QEMU")/insprof.so"
[ -e "$PLUGIN" ] || die "no insprof plugin next to $QEMU"
OUT="$TOP/build/profile"
rm -rf "$OUT"; mkdir -p "$OUT"
log "profile: exanest-bench $*, QEMU -icount shift=0,sleep=off with insprof"
QEMU="$QEMU" KERNEL="$KB/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs-eval.cpio" TIMEOUT=1800 \
	QEMU_MEM=4G QEMU_APPEND="exanest.prof=$(IFS=,; echo "$*")" \
	"$TOP/scripts/run-qemu.sh" /usr/share/exanest/profile.sh -icount shift=0,sleep=off \
	-plugin "$PLUGIN,out=$OUT/span" >"$OUT/console.log" 2>&1 ||
	{ tail -30 "$OUT/console.log" >&2; die "the profiling run failed (log: $OUT/console.log)"; }
python3 "$TOP/tests/eval/profile.py" "$OUT"
