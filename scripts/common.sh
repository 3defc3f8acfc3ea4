# Shared helpers for the scripts under scripts/. Source it; do not run it.
# shellcheck shell=bash
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
. "$TOP/scripts/versions.env"

# Everything built or downloaded lives outside the clone, keyed by content hashes.
CACHE=${EXANEST_CACHE:-/var/cache/exanest-dma}
DL="$CACHE/dl"
mkdir -p "$CACHE" "$DL"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# hash_of FILE|DIR... : one sha256 over the contents of the given paths and their names relative
# to the clone, so that the key is the same wherever the clone is.
hash_of() {
	local p
	for p in "$@"; do
		echo "== ${p#"$TOP"/}"
		if [ -d "$p" ]; then
			(cd "$p" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
		elif [ -e "$p" ]; then
			sha256sum <"$p"
		else
			echo "missing"
		fi
	done | sha256sum | cut -c1-16
}

# Serialise builds: the machine has two cores and two builds at once would starve both.
build_lock() { exec 9>"$CACHE/.build.lock"; flock 9; }

KERNEL_VERSION_SHORT=${KERNEL_SRC_PKG#linux-source-}
LLVM="-$LLVM_VERSION"

# eval_image: the evaluation kernel (KB), QEMU (QEMU), the module built against that kernel
# (build/module-eval, its stack frames linted) and the initramfs that boots it
# (build/initramfs-eval.cpio): what make evaluate and make profile boot.
eval_image() {
	KB=$("$TOP/scripts/build-kernel.sh" eval)
	QEMU=$("$TOP/scripts/build-qemu.sh")
	make -s -C "$TOP" --no-print-directory module KDIR="$KB" MODULE_OUT="$TOP/build/module-eval" >/dev/null
	# Its 16 KiB stacks: no frame its KUnit tests or deep calls could overflow (make check lints
	# the test kernel's module, whose KASAN stacks are twice as large).
	python3 "$TOP/tests/lint/stack_frames.py" "$TOP/build/module-eval/exanest_dma.ko" "llvm-objdump-$LLVM_VERSION"
	"$TOP/scripts/build-guest-rust.sh" >/dev/null
	MODULE_KO="$TOP/build/module-eval/exanest_dma.ko" \
		"$TOP/scripts/build-initramfs.sh" "$KB" "$TOP/build/initramfs-eval.cpio"
}
