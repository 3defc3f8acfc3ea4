#!/usr/bin/env bash
# Generate the Rust declarations of the C shim from drivers/exanest_shim.h with bindgen, for
# drivers/ffi.rs (which includes them): the header is the only declaration of the interface.
# Usage: shim-bindings.sh KERNEL_BUILD_DIR OUTPUT.rs   (rewrites OUTPUT only when it changes)
. "$(dirname "$0")/common.sh"
KB=${1:?kernel build dir}
OUT=${2:?output file}
KS="$KB/source"
export PATH="$HOME/.cargo/bin:$PATH"
mkdir -p "$(dirname "$OUT")"
# Kernel structs and typedefs are not generated: the output names them, and ffi.rs resolves
# them from kernel::bindings. Integer types use the kernel's own C type mapping (kernel::ffi).
bindgen "$TOP/drivers/exanest_shim.h" --use-core --ctypes-prefix kernel::ffi --no-layout-tests \
	--no-doc-comments --allowlist-function 'exanest_(shim|rust)_.*' --allowlist-var '(exanest|EXANEST)_.*' \
	--blocklist-type '.*' -o "$OUT.tmp" -- \
	-nostdinc -isystem "$(clang-"$LLVM_VERSION" -print-resource-dir)/include" \
	-I"$KS/arch/arm64/include" -I"$KB/arch/arm64/include/generated" -I"$KS/include" \
	-I"$KB/include" -I"$KS/arch/arm64/include/uapi" -I"$KB/arch/arm64/include/generated/uapi" \
	-I"$KS/include/uapi" -I"$KB/include/generated/uapi" -include "$KS/include/linux/kconfig.h" \
	-D__KERNEL__ --target=aarch64-linux-gnu
if cmp -s "$OUT.tmp" "$OUT"; then rm -f "$OUT.tmp"; else mv "$OUT.tmp" "$OUT"; fi
