#!/usr/bin/env bash
# Build the arm64 guest kernel: pinned Debian source + drivers/patches + allnoconfig +
# drivers/kernel.config (+ drivers/kernel-debug.config for the test kernel).
# Usage: build-kernel.sh [debug|eval]
#   debug (default): the test kernel of make check/demo/shell (lockdep, KASAN, hung tasks...);
#   eval: the evaluation kernel of make evaluate, same source and patches, no debugging options.
# The result is cached under $CACHE/kernel-<key>, where <key> hashes everything that affects it.
# Prints the build directory (usable as KDIR for out-of-tree modules) on stdout.
. "$(dirname "$0")/common.sh"
"$TOP/scripts/setup-host.sh"
# Build chatter goes to stderr; stdout carries only the result path.
exec 3>&1 1>&2

FLAVOUR=${1:-debug}
case "$FLAVOUR" in
debug) FRAGMENTS=("$TOP/drivers/kernel.config" "$TOP/drivers/kernel-debug.config") ;;
eval) FRAGMENTS=("$TOP/drivers/kernel.config") ;;
*) die "usage: build-kernel.sh [debug|eval]" ;;
esac
# Bump RECIPE when this script changes how the kernel is built (the key covers the inputs).
RECIPE=2
KEY=$(echo "$RECIPE $FLAVOUR $(hash_of "$TOP/scripts/versions.env" "$TOP/drivers/patches" "${FRAGMENTS[@]}")" | sha256sum | cut -c1-16)
OUT="$CACHE/kernel-$KEY"
if [ -e "$OUT/.done" ]; then echo "$OUT/build" >&3; exit 0; fi
build_lock
if [ -e "$OUT/.done" ]; then echo "$OUT/build" >&3; exit 0; fi

export PATH="$HOME/.cargo/bin:$PATH"
RUST_LIB_SRC="$CACHE/rust-src-$RUST_VERSION/library"
MK=(make -s ARCH=arm64 LLVM="$LLVM" RUST_LIB_SRC="$RUST_LIB_SRC" -j"$(nproc)")

log "kernel $KEY ($FLAVOUR): unpacking $KERNEL_SRC_PKG $KERNEL_SRC_VERSION"
rm -rf "$OUT"; mkdir -p "$OUT/build"
tar -C "$OUT" -xf "$DL/linux-source-$KERNEL_SRC_VERSION.tar.xz"
mv "$OUT"/linux-source-* "$OUT/src"
while read -r p; do
	case "$p" in ''|'#'*) continue ;; esac
	log "applying $p"
	patch -d "$OUT/src" -p1 -s --no-backup-if-mismatch <"$TOP/drivers/patches/$p" || die "patch $p does not apply"
done <"$TOP/drivers/patches/series"

cd "$OUT/src"
"${MK[@]}" O="$OUT/build" rustavailable >/dev/null || die "the Rust toolchain is not usable for the kernel (see 'make rustavailable')"
"${MK[@]}" O="$OUT/build" allnoconfig
scripts/kconfig/merge_config.sh -m -O "$OUT/build" "$OUT/build/.config" "${FRAGMENTS[@]}" >/dev/null
"${MK[@]}" O="$OUT/build" olddefconfig
# Every symbol of the fragment must have taken effect.
bad=0
while IFS= read -r line; do
	case "$line" in CONFIG_*=*) ;; *) continue ;; esac
	sym=${line%%=*} val=${line#*=}
	if [ "$val" = n ]; then
		grep -q "^$sym=" "$OUT/build/.config" && { echo "config: $sym should be off" >&2; bad=1; }
	else
		grep -qx "$line" "$OUT/build/.config" || { echo "config: $line did not stick ($(grep "^$sym=\|# $sym " "$OUT/build/.config"))" >&2; bad=1; }
	fi
done < <(cat "${FRAGMENTS[@]}")
[ $bad = 0 ] || die "kernel config fragments did not apply; fix ${FRAGMENTS[*]#"$TOP"/}"

log "kernel $KEY ($FLAVOUR): building (12 to 20 minutes at -j2)"
"${MK[@]}" O="$OUT/build" Image modules
"${MK[@]}" O="$OUT/build" INSTALL_MOD_PATH="$OUT/modroot" INSTALL_MOD_STRIP=1 modules_install
touch "$OUT/.done"
log "kernel $KEY: done"
echo "$OUT/build" >&3
