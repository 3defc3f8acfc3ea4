# Paths and pins of the linters, shared by scripts/setup-host.sh and scripts/lint-*.sh.
# Source it after common.sh; do not run it.
# shellcheck shell=bash

# dtschema, yamllint and docutils from PyPI. They are pinned here rather than in versions.env
# because the kernel and QEMU cache keys hash versions.env, and a linter must not invalidate
# those builds.
DTSCHEMA_VERSION=2026.9
YAMLLINT_VERSION=1.38.0
# Every package they pull in, pinned too (the versions pip resolved for dtschema 2026.9 on
# Python 3.11), so that a new release cannot change the verdict.
LINT_PIP_PKGS=(
	"dtschema==$DTSCHEMA_VERSION" "yamllint==$YAMLLINT_VERSION"
	attrs==26.1.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 pathspec==1.1.1
	pylibfdt==1.7.2.post2 PyYAML==6.0.3 referencing==0.37.0 rfc3987==1.3.8 rpds-py==2026.9.1
	ruamel.yaml==0.19.1 typing_extensions==4.16.0
	# tests/lint/rst.py: every document under Documentation/ parses.
	docutils==0.21.2
)
LINT_VENV="$CACHE/lint-venv-$(printf '%s\n' "${LINT_PIP_PKGS[@]}" | sha256sum | cut -c1-12)"

# A pristine copy of the pinned kernel source, only for the linters: checkpatch.pl runs in it
# (it looks at the tree) and `make dt_binding_check` validates our bindings copied into it.
LINT_KDIR="$CACHE/lint-kernel-$KERNEL_SRC_VERSION"
LINT_KSRC="$LINT_KDIR/src"

# lint_lock: serialise the linters that use $LINT_KDIR (several clones share the cache).
lint_lock() { exec 8>"$CACHE/.lint.lock"; flock 8; }

# lint_kernel_tree: unpack the pinned kernel source into $LINT_KSRC once. Call with lint_lock held.
lint_kernel_tree() {
	[ -e "$LINT_KDIR/.done" ] && return 0
	local tarball="$DL/linux-source-$KERNEL_SRC_VERSION.tar.xz"
	[ -e "$tarball" ] || die "$tarball is missing: run scripts/setup-host.sh"
	log "unpacking $KERNEL_SRC_PKG $KERNEL_SRC_VERSION for the linters"
	rm -rf "$LINT_KDIR"
	mkdir -p "$LINT_KDIR"
	tar -C "$LINT_KDIR" -xf "$tarball"
	mv "$LINT_KDIR"/linux-source-* "$LINT_KSRC"
	touch "$LINT_KDIR/.done"
}

# lint_tools: fail unless the pinned linters are installed.
lint_tools() {
	[ -x "$LINT_VENV/bin/dt-validate" ] && [ -x "$LINT_VENV/bin/yamllint" ] ||
		die "dtschema/yamllint missing in $LINT_VENV: run scripts/setup-host.sh"
	"$LINT_VENV/bin/dt-validate" --version | grep -qx "$DTSCHEMA_VERSION" ||
		die "dtschema in $LINT_VENV is not $DTSCHEMA_VERSION: run scripts/setup-host.sh"
}
