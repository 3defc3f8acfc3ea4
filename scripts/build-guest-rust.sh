#!/usr/bin/env bash
# Build the user library, its examples and the tools for the aarch64 guest (static binaries),
# and the C example against the library. std is built from the Debian rust-src that
# setup-host.sh installed (no prebuilt aarch64 std can be fetched here). Prints the output dir.
. "$(dirname "$0")/common.sh"
exec 3>&1 1>&2
export PATH="$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="$CACHE/guest-target"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export RUSTFLAGS="-C target-feature=+crt-static"
T=aarch64-unknown-linux-gnu
OUT="$TOP/build/guest-bin"
mkdir -p "$OUT"
cd "$TOP/rust"
RUSTC_BOOTSTRAP=1 cargo build --quiet --release --locked -Zbuild-std=std,panic_abort --target $T \
	-p exanest-dma -p exanest-tools --bins --examples --lib
R="$CARGO_TARGET_DIR/$T/release"
cp "$R/exanest-cli" "$R/exanest-bench" "$OUT/"
cp "$R/examples/copy" "$OUT/copy-rs"
cp "$R/examples/odp" "$OUT/odp-rs"
# An installed-library layout (what `make install-lib` would put under a prefix): headers,
# the static library and its pkg-config file.
SYS="$OUT/sysroot"
mkdir -p "$SYS/include/linux" "$SYS/lib/pkgconfig"
cp "$R/libexanest_dma.a" "$SYS/lib/"
cp "$TOP/include/exanest_dma.h" "$SYS/include/"
cp "$TOP/include/uapi/linux/exanest_dma.h" "$SYS/include/linux/"
sed "s|@PREFIX@|$SYS|" "$TOP/rust/exanest-dma/exanest-dma.pc.in" >"$SYS/lib/pkgconfig/exanest-dma.pc"
# The C example, built the way a user would: with pkg-config, statically.
PKG="pkg-config --static --define-prefix"
export PKG_CONFIG_PATH="$SYS/lib/pkgconfig"
# shellcheck disable=SC2046
aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror $($PKG --cflags exanest-dma) \
	-o "$OUT/copy-c" "$TOP/examples/copy.c" $($PKG --libs exanest-dma) 2>"$OUT/copy-c.ld.log"
# shellcheck disable=SC2046
aarch64-linux-gnu-gcc -static -O2 -Wall -Wextra -Werror $($PKG --cflags exanest-dma) \
	-o "$OUT/odp-c" "$TOP/examples/odp.c" $($PKG --libs exanest-dma) 2>"$OUT/odp-c.ld.log"
echo "$OUT" >&3
