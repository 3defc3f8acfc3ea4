#!/usr/bin/env bash
# Build qemu-system-aarch64 from Debian's QEMU source with the PLDMA engine model compiled in.
# Cached under $CACHE/qemu-<key>; prints the path of the binary on stdout. The unpacked source
# stays next to it in $CACHE/qemu-<key>/src: the model tests use its python/ package
# (qemu.machine) and `make check` its scripts/checkpatch.pl.
. "$(dirname "$0")/common.sh"
"$TOP/scripts/setup-host.sh"
# Build chatter goes to stderr; stdout carries only the result path.
exec 3>&1 1>&2

# Bump RECIPE when this script changes how QEMU is built (the key covers the inputs, the core's
# protocol code that the model links among them).
RECIPE=5
KEY=$(echo "$RECIPE $(rustc --version) $(hash_of "$TOP/scripts/versions.env" \
	"$TOP/tests/qemu-model/exanest_pldma.c" "$TOP/tests/qemu-model/exanest_pldma.h" \
	"$TOP/tests/qemu-model/exanest_net.c" "$TOP/tests/qemu-model/exanest_core.h" \
	"$TOP/tests/qemu-model/trace-events" "$TOP/tests/qemu-model/exanest.mak" "$TOP/include/hw" \
	"$TOP/tests/qemu-model/insprof.c" "$TOP/tests/qemu-model/exanest_pldma_fdt.h" \
	"$TOP/tests/qemu-model/arm_mmu500.c" "$TOP/tests/qemu-model/arm_mmu500.h" \
	"$TOP/tests/qemu-model/trace-events-mmu500" "$TOP/tests/qemu-model/patches" \
	"$TOP/rust/Cargo.toml" "$TOP/rust/Cargo.lock" "$TOP/rust/exanest-core/Cargo.toml" \
	"$TOP/rust/exanest-core/src" "$TOP/rust/exanest-model/Cargo.toml" \
	"$TOP/rust/exanest-model/src")" | sha256sum | cut -c1-16)
OUT="$CACHE/qemu-$KEY"
BIN="$OUT/build/qemu-system-aarch64"
if [ -e "$OUT/.done" ]; then echo "$BIN" >&3; exit 0; fi
build_lock
if [ -e "$OUT/.done" ]; then echo "$BIN" >&3; exit 0; fi

log "qemu $KEY: unpacking QEMU ${QEMU_DEB_VERSION}"
rm -rf "$OUT"; mkdir -p "$OUT"
tar -C "$OUT" -xf "$DL/qemu.orig.tar.xz" --exclude='*/roms/*'
mv "$OUT"/qemu-* "$OUT/src"
cd "$OUT/src"

# The protocol code of the no_std core, as the static library the model calls (its C ABI:
# tests/qemu-model/exanest_core.h).
log "qemu $KEY: building the core's static library (rust/exanest-model)"
cargo build --quiet --release --locked --manifest-path "$TOP/rust/Cargo.toml" -p exanest-model \
	--target-dir "$OUT/rust" || die "cargo build of rust/exanest-model failed"
CORE_LIB="$OUT/rust/release/libexanest_model.a"

# The engine model: sources, register header, trace events, Kconfig symbol, meson rule.
cp "$TOP/tests/qemu-model/exanest_pldma.c" "$TOP/tests/qemu-model/exanest_pldma.h" \
	"$TOP/tests/qemu-model/exanest_net.c" "$TOP/tests/qemu-model/exanest_core.h" hw/misc/
cp "$TOP/include/hw/exanest-pldma-regs.h" hw/misc/
cat "$TOP/tests/qemu-model/trace-events" >>hw/misc/trace-events
cat >>hw/misc/Kconfig <<'KC'

config EXANEST_PLDMA
    bool
    default y if TEST_DEVICES
    depends on PCI
KC
cat >>hw/misc/meson.build <<MB
exanest_core = declare_dependency(link_args: ['$CORE_LIB', '-lpthread', '-ldl', '-lm'])
system_ss.add(when: 'CONFIG_EXANEST_PLDMA',
              if_true: [files('exanest_pldma.c', 'exanest_net.c'), exanest_core])
MB
cp "$TOP/tests/qemu-model/exanest.mak" configs/devices/aarch64-softmmu/exanest.mak
cp "$TOP/tests/qemu-model/exanest_pldma_fdt.h" include/hw/misc/

# The MMU-500 (SMMUv2) model, beside QEMU's SMMUv3 (it uses smmu-common.c's page table walker).
cp "$TOP/tests/qemu-model/arm_mmu500.c" hw/arm/
cp "$TOP/tests/qemu-model/arm_mmu500.h" include/hw/arm/
cat "$TOP/tests/qemu-model/trace-events-mmu500" >>hw/arm/trace-events
cat >>hw/arm/Kconfig <<'KC'

config ARM_MMU500
    bool
    default y if ARM_VIRT
    select ARM_SMMUV3
KC
echo "arm_ss.add(when: 'CONFIG_ARM_MMU500', if_true: files('arm_mmu500.c'))" >>hw/arm/meson.build

# The virt board takes both as dynamic sysbus devices with their devicetree nodes.
for p in "$TOP"/tests/qemu-model/patches/*.patch; do
	patch -p1 -s --no-backup-if-mismatch <"$p" || die "QEMU patch $(basename "$p") does not apply"
done

# The +ds tarball strips the edk2 firmware blobs that pc-bios/meson.build lists: empty stand-ins.
for f in $(sed -n "s/^ *'\(edk2-[a-z0-9_-]*\.fd\)',$/\1/p" pc-bios/meson.build); do
	[ -e "pc-bios/$f.bz2" ] || bzip2 -c </dev/null >"pc-bios/$f.bz2"
done

log "qemu $KEY: configuring"
mkdir -p "$OUT/build"; cd "$OUT/build"
"$OUT/src/configure" --python=/usr/bin/python3 --target-list=aarch64-softmmu \
	--without-default-features --without-default-devices \
	--with-devices-aarch64=exanest --enable-fdt=system --enable-tcg --enable-plugins \
	--disable-docs --disable-install-blobs --disable-werror >configure.log 2>&1 ||
	{ tail -30 configure.log >&2; die "QEMU configure failed (log: $OUT/build/configure.log)"; }
log "qemu $KEY: building (about 3 minutes at -j2)"
ninja -j"$(nproc)" qemu-system-aarch64 >ninja.log 2>&1 ||
	{ grep -B2 -A8 'error' ninja.log | head -60 >&2; die "QEMU build failed (log: $OUT/build/ninja.log)"; }
for d in exanest-pldma exanest-pldma-platform arm-mmu500; do
	"$BIN" -device help 2>/dev/null | grep -q "\"$d\"" || die "built QEMU lacks the $d device"
done
for d in virtio-net-pci virtio-blk-pci; do
	"$BIN" -device help 2>/dev/null | grep -q "\"$d\"" || die "built QEMU lacks the $d device"
done
# The instruction profiler of make profile (scripts/profile.sh), a TCG plugin.
gcc -O2 -shared -fPIC -Wall -Werror $(pkg-config --cflags glib-2.0) -I"$OUT/src/include/qemu" \
	-o "$OUT/build/insprof.so" "$TOP/tests/qemu-model/insprof.c" || die "building the insprof plugin failed"
touch "$OUT/.done"
log "qemu $KEY: done"
echo "$BIN" >&3
