#!/usr/bin/env bash
# Install everything the build needs on a Debian 12 (bookworm) amd64 host. Idempotent: a second
# run only checks. Needs root (or sudo) for apt; everything else goes under $CACHE.
. "$(dirname "$0")/common.sh"

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
. "$TOP/scripts/lint-env.sh"
STAMP="$CACHE/.host-setup-$(hash_of "$TOP/scripts/versions.env" "$TOP/scripts/setup-host.sh" "$TOP/scripts/lint-env.sh")"
# Fast path: already done for these versions, and the tools are still there.
if [ -e "$STAMP" ] && command -v "clang-$LLVM_VERSION" aarch64-linux-gnu-gcc meson ninja >/dev/null &&
	PATH="$HOME/.cargo/bin:$PATH" command -v bindgen >/dev/null && [ -x "$LINT_VENV/bin/dt-validate" ]; then
	exit 0
fi

grep -q 'VERSION_CODENAME=bookworm' /etc/os-release ||
	die "this set-up is written for Debian 12 (bookworm); see README for the list of what it installs"

# 1. Apt sources: bookworm-backports (meson, QEMU source) and trixie-backports (kernel source,
#    rust-src). Pinned low so nothing is upgraded from them unless asked by name.
if [ ! -e /etc/apt/sources.list.d/exanest-backports.sources ]; then
	log "adding bookworm-backports and trixie-backports apt sources"
	$SUDO tee /etc/apt/sources.list.d/exanest-backports.sources >/dev/null <<'SRC'
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	$SUDO tee /etc/apt/preferences.d/exanest-trixie >/dev/null <<'PIN'
Package: *
Pin: release n=trixie-backports
Pin-Priority: 1
PIN
	$SUDO apt-get update -qq
fi

# The guest's shell and tools come from Debian's arm64 busybox-static (downloaded, not installed).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	log "enabling the arm64 package lists (for the guest's busybox)"
	$SUDO dpkg --add-architecture arm64
	$SUDO apt-get update -qq
fi

# 2. Packages. libfabric-dev: the headers the provider's bindings are made from (the guest's
#    Debian libfabric is the same 1.17); libfabric-bin: fi_info, with which the host tests load
#    the provider into a real libfabric; e2fsprogs: mkfs.ext4 -d for the guests' Debian disk.
PKGS="clang-$LLVM_VERSION lld-$LLVM_VERSION llvm-$LLVM_VERSION libclang-$LLVM_VERSION-dev
 gcc-aarch64-linux-gnu libc6-dev-arm64-cross flex bison bc libelf-dev libssl-dev cpio xz-utils
 ninja-build libglib2.0-dev libpixman-1-dev libfdt-dev pkg-config python3-venv zstd rsync
 make perl kmod dpkg-dev e2fsprogs libfabric-dev libfabric-bin patch"
missing=$(for p in $PKGS; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"; done)
if [ -n "$missing" ]; then
	log "installing: $(echo $missing)"
	$SUDO apt-get update -qq
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null ||
		die "apt-get install failed for: $missing (check the Debian mirror is reachable)"
fi
for p in meson python3-pycotap; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' && continue
	log "installing $p from bookworm-backports"
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports "$p" >/dev/null ||
		die "cannot install $p from bookworm-backports"
done

# 3. Rust: the host rustc must be the pinned one (the kernel's Rust is built with it).
have=$(rustc --version 2>/dev/null | awk '{print $2}')
[ "$have" = "$RUST_VERSION" ] ||
	die "rustc $RUST_VERSION required (found '${have:-none}'); install it with rustup or change RUST_VERSION in scripts/versions.env"

# rust-src for the same version, from Debian (rustup cannot add components here).
RUST_SRC_DIR="$CACHE/rust-src-$RUST_VERSION"
if [ ! -d "$RUST_SRC_DIR/library/core" ]; then
	log "fetching Debian rust-src $RUST_VERSION"
	ver=$(apt-cache madison rust-src | awk -v v="$RUST_VERSION" '$3 ~ "^"v"[+~-]" {print $3; exit}')
	[ -n "$ver" ] || die "Debian has no rust-src for rustc $RUST_VERSION (see 'apt-cache madison rust-src'); pick a RUST_VERSION it has"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -qq "rust-src=$ver") || die "apt-get download rust-src=$ver failed"
	dpkg -x "$tmp"/rust-src_*.deb "$tmp/x"
	rm -rf "$RUST_SRC_DIR"; mkdir -p "$RUST_SRC_DIR"
	mv "$tmp/x/usr/lib/rustlib/src/rust/library" "$RUST_SRC_DIR/library"
	[ -e "$tmp/x/usr/lib/rustlib/src/rust/Cargo.lock" ] && cp "$tmp/x/usr/lib/rustlib/src/rust/Cargo.lock" "$RUST_SRC_DIR/"
	rm -rf "$tmp"
fi
# -Zbuild-std looks for the source inside the sysroot.
SYSROOT_SRC="$(rustc --print sysroot)/lib/rustlib/src/rust"
if [ ! -d "$SYSROOT_SRC/library/core" ]; then
	mkdir -p "$SYSROOT_SRC"
	ln -sfn "$RUST_SRC_DIR/library" "$SYSROOT_SRC/library"
	[ -e "$RUST_SRC_DIR/Cargo.lock" ] && cp "$RUST_SRC_DIR/Cargo.lock" "$SYSROOT_SRC/"
fi

# 4. bindgen-cli at the pinned version.
export PATH="$HOME/.cargo/bin:$PATH"
if ! bindgen --version 2>/dev/null | grep -q " $BINDGEN_VERSION\$"; then
	log "installing bindgen-cli $BINDGEN_VERSION"
	cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION" ||
		die "cargo install bindgen-cli $BINDGEN_VERSION failed"
fi

# Guest busybox (arm64, static).
if [ ! -e "$DL/busybox-arm64" ]; then
	log "fetching busybox-static:arm64"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -qq busybox-static:arm64) || die "apt-get download busybox-static:arm64 failed"
	dpkg -x "$tmp"/busybox-static_*.deb "$tmp/x"
	mv "$tmp/x/bin/busybox" "$DL/busybox-arm64"
	rm -rf "$tmp"
fi

# 5. Kernel source (Debian linux-source, arch all).
if [ ! -e "$DL/linux-source-$KERNEL_SRC_VERSION.tar.xz" ]; then
	log "fetching $KERNEL_SRC_PKG $KERNEL_SRC_VERSION"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -qq "$KERNEL_SRC_PKG=$KERNEL_SRC_VERSION") ||
		die "apt-get download $KERNEL_SRC_PKG=$KERNEL_SRC_VERSION failed (is $KERNEL_SRC_SUITE in apt sources?)"
	dpkg -x "$tmp"/*.deb "$tmp/x"
	mv "$tmp"/x/usr/src/linux-source-*.tar.* "$DL/linux-source-$KERNEL_SRC_VERSION.tar.xz"
	rm -rf "$tmp"
fi

# 6. QEMU source: only the .orig tarball of Debian's source package is downloadable.
if [ ! -e "$DL/qemu.orig.tar.xz" ]; then
	log "fetching QEMU source $QEMU_DEB_VERSION"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get source -qq --download-only "qemu=$QEMU_DEB_VERSION" >/dev/null 2>&1) || true
	f=$(ls "$tmp"/qemu_*.orig.tar.xz 2>/dev/null | head -1)
	[ -n "$f" ] || die "could not download the QEMU $QEMU_DEB_VERSION source (.orig.tar.xz) from bookworm-backports deb-src"
	echo "$QEMU_ORIG_SHA256  $f" | sha256sum -c --quiet || die "QEMU source checksum mismatch: $f"
	mv "$f" "$DL/qemu.orig.tar.xz"
	rm -rf "$tmp"
fi

# 7. Linters (scripts/lint-*.sh): dtschema and yamllint from PyPI, every package pinned, in a venv.
#    The kernel's own checkpatch.pl and dtc are used from the pinned kernel source.
if [ ! -x "$LINT_VENV/bin/dt-validate" ]; then
	log "installing dtschema $DTSCHEMA_VERSION and yamllint $YAMLLINT_VERSION"
	rm -rf "$LINT_VENV"
	if ! { python3 -m venv "$LINT_VENV" &&
		"$LINT_VENV/bin/pip" install -q --disable-pip-version-check "${LINT_PIP_PKGS[@]}"; }; then
		rm -rf "$LINT_VENV"
		die "cannot install dtschema $DTSCHEMA_VERSION and yamllint $YAMLLINT_VERSION from PyPI"
	fi
fi

touch "$STAMP"
log "host set-up complete"
