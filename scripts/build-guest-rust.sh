#!/usr/bin/env bash
# Build the user library, its examples and the tools for the aarch64 guest (static binaries),
# install the library (headers, static library, pkg-config file) into a sysroot, and build the
# C examples against that sysroot the way a user's program is built. The cross-build settings
# are rust/exanest-dma/guest.toml; std is built from the Debian rust-src that setup-host.sh
# installed. Documentation/user-programs.rst describes the same steps for your own program.
# Environment: SYSROOT, where to install the library (default build/guest-bin/sysroot; this is
# what `make install-lib PREFIX=...` sets). Prints the output dir.
. "$(dirname "$0")/common.sh"
exec 3>&1 1>&2
export PATH="$HOME/.cargo/bin:$PATH"
# One target directory per clone: cargo does not copy a fresh artifact out again, so clones
# sharing a directory would pick up each other's binaries.
export CARGO_TARGET_DIR="$CACHE/guest-target-$(echo "$TOP" | sha256sum | cut -c1-12)"
T=aarch64-unknown-linux-gnu
OUT="$TOP/build/guest-bin"
SYS=${SYSROOT:-$OUT/sysroot}
mkdir -p "$OUT"
cd "$TOP/rust"
RUSTC_BOOTSTRAP=1 cargo --config "$TOP/rust/exanest-dma/guest.toml" build --quiet --release --locked \
	-p exanest-dma -p exanest-tools --bins --examples --lib
R="$CARGO_TARGET_DIR/$T/release"
cp "$R/exanest-cli" "$R/exanest-bench" "$OUT/"
cp "$R/examples/copy" "$OUT/copy-rs"
cp "$R/examples/odp" "$OUT/odp-rs"
cp "$R/examples/put" "$OUT/put-rs"
cp "$R/examples/mailbox" "$OUT/mailbox-rs"
cp "$R/examples/nodes" "$OUT/nodes-rs"
cp "$R/examples/forget" "$OUT/forget-rs"
# The libfabric provider, a shared library that the guest's Debian libfabric loads
# (Documentation/libfabric.rst): glibc's dynamic linking, so a build of its own (guest.toml there).
CARGO_TARGET_DIR="$CARGO_TARGET_DIR-fi" RUSTC_BOOTSTRAP=1 cargo --config "$TOP/rust/exanest-fi/guest.toml" \
	build --quiet --release --locked -p exanest-fi --lib
cp "$CARGO_TARGET_DIR-fi/$T/release/libexanest_fi.so" "$OUT/libexanest-fi.so"
# The installed library: headers, the static library and its pkg-config file.
mkdir -p "$SYS/include/linux" "$SYS/lib/pkgconfig"
cp "$R/libexanest_dma.a" "$SYS/lib/"
cp "$TOP/include/exanest_dma.h" "$SYS/include/"
cp "$TOP/include/uapi/linux/exanest_dma.h" "$SYS/include/linux/"
sed "s|@PREFIX@|$SYS|" "$TOP/rust/exanest-dma/exanest-dma.pc.in" >"$SYS/lib/pkgconfig/exanest-dma.pc"
# The C examples, built the way a user would: with pkg-config, statically.
PKG="pkg-config --static"
export PKG_CONFIG_PATH="$SYS/lib/pkgconfig"
for ex in copy odp queue put; do
	# shellcheck disable=SC2046
	aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror $($PKG --cflags exanest-dma) \
		-o "$OUT/$ex-c" "$TOP/examples/$ex.c" $($PKG --libs exanest-dma) 2>"$OUT/$ex-c.ld.log"
done
# The C library's guest test, built the same way.
# shellcheck disable=SC2046
aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror $($PKG --cflags exanest-dma) \
	-o "$OUT/exanest-lib" "$TOP/tests/guest/exanest-lib.c" $($PKG --libs exanest-dma) \
	2>"$OUT/exanest-lib.ld.log"
echo "$OUT" >&3
