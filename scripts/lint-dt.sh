#!/usr/bin/env bash
# Validate the devicetree bindings under Documentation/devicetree/bindings/ as the kernel does:
# each is copied to the same path in a pristine copy of the pinned kernel tree, and
# `make dt_binding_check DT_SCHEMA_FILES=...` runs dt-doc-validate, yamllint, the DTS style check
# and dt-validate of the examples, with dtschema and yamllint at the versions of lint-env.sh.
# dt_binding_check only applies a binding's own schema to its example when DT_SCHEMA_FILES is
# given, so each example is then validated again against every schema of the kernel (as a DTB
# using the binding would be by `make dtbs_check`). Fails on any diagnostic: the kernel's make
# ignores them.
#
# lint-dt.sh --dtb FILE NODE...: validate the nodes NODE (paths) of the devicetree blob FILE, one
# that QEMU made (make check dumps the MMU-500 machine's), against every schema of the kernel and
# ours, with the processed schema that a run without --dtb built. Fails on any diagnostic about
# those nodes, a compatible without a schema included.
. "$(dirname "$0")/common.sh"
. "$TOP/scripts/lint-env.sh"
lint_tools
export PATH="$LINT_VENV/bin:$PATH"

if [ "${1:-}" = --dtb ]; then
	dtb=${2:?--dtb FILE NODE...}; shift 2
	schema="$LINT_KDIR/build/Documentation/devicetree/bindings/processed-schema.json"
	[ -e "$schema" ] || die "no processed schema: run scripts/lint-dt.sh first"
	diag=$(dt-validate -m -s "$schema" "$dtb" 2>&1)
	bad=0
	for node in "$@"; do
		if ! python3 -c 'import libfdt, sys
libfdt.Fdt(open(sys.argv[1], "rb").read()).path_offset(sys.argv[2])' "$dtb" "$node" 2>/dev/null; then
			echo "FAIL: $dtb has no node $node"; bad=1; continue
		fi
		# dt-validate names a node by its path, or by its name and compatible.
		d=$(echo "$diag" | grep -F -e "$node:" -e " ${node##*/} (" || true)
		if [ -n "$d" ]; then
			echo "FAIL: $node in $dtb:"; echo "$d" | sed 's/^/  /'; bad=1
		else
			echo "ok: $node (every kernel schema and ours)"
		fi
	done
	exit $bad
fi

BINDINGS="$TOP/Documentation/devicetree/bindings"
mapfile -t files < <(cd "$BINDINGS" 2>/dev/null && find . -name '*.yaml' | sed 's|^\./||' | LC_ALL=C sort)
[ ${#files[@]} -gt 0 ] || die "no binding under Documentation/devicetree/bindings"
bad=0
# A binding outside bindings/ would never be checked (and its \$id cannot match its path).
stray=$(cd "$TOP/Documentation" && find . -name '*.yaml' ! -path './devicetree/bindings/*')
if [ -n "$stray" ]; then
	echo "FAIL: YAML outside Documentation/devicetree/bindings/: $stray"
	bad=1
fi

lint_lock
lint_kernel_tree
KB="$LINT_KDIR/build"
MANIFEST="$LINT_KDIR/ours"
# Remove the bindings a previous run (of any clone) copied in; copy ours, keeping the mtime of an
# unchanged copy so that make does not rebuild the processed schema (2 minutes) for nothing.
if [ -e "$MANIFEST" ]; then
	while read -r f; do
		printf '%s\n' "${files[@]}" | grep -qxF "$f" || rm -f "$LINT_KSRC/Documentation/devicetree/bindings/$f"
	done <"$MANIFEST"
fi
printf '%s\n' "${files[@]}" >"$MANIFEST"
for f in "${files[@]}"; do
	dst="$LINT_KSRC/Documentation/devicetree/bindings/$f"
	mkdir -p "$(dirname "$dst")"
	cmp -s "$BINDINGS/$f" "$dst" || cp "$BINDINGS/$f" "$dst"
done

schema_files=$(IFS=:; echo "${files[*]}")
log "dt_binding_check DT_SCHEMA_FILES=$schema_files"
out=$(make -C "$LINT_KSRC" O="$KB" ARCH=arm64 LLVM="$LLVM" -j1 \
	dt_binding_check DT_SCHEMA_FILES="$schema_files" 2>&1) || { echo "$out"; echo "FAIL: make dt_binding_check"; exit 1; }
echo "$out"
# Only kbuild's progress lines are expected: anything else is a diagnostic.
diag=$(echo "$out" | grep -v -E '^make(\[[0-9]+\])?: (Entering|Leaving) directory|^  [A-Z]+( \[C\])? +[^ ]' || true)
if [ -n "$diag" ]; then
	echo "FAIL: dt_binding_check reported:"
	echo "$diag" | sed 's/^/  /'
	bad=1
fi

for f in "${files[@]}"; do
	dtb="$KB/Documentation/devicetree/bindings/${f%.yaml}.example.dtb"
	if ! grep -q '^examples:' "$BINDINGS/$f"; then
		echo "FAIL: $f has no example"
		bad=1
		continue
	fi
	[ -e "$dtb" ] || { echo "FAIL: $f: no example DTB was built"; bad=1; continue; }
	diag=$(dt-validate -m -s "$KB/Documentation/devicetree/bindings/processed-schema.json" "$dtb" 2>&1)
	if [ -n "$diag" ]; then
		echo "FAIL: the example of $f against every kernel schema:"
		echo "$diag" | sed 's/^/  /'
		bad=1
	else
		echo "ok: $f (dt_binding_check; its example against every kernel schema)"
	fi
done
[ $bad = 0 ] && echo "devicetree bindings: ${#files[@]} checked, no diagnostic"
exit $bad
