#!/usr/bin/env bash
# The pinned kernel's scripts/checkpatch.pl --strict on every patch of drivers/patches (in series
# order, run inside a pristine copy of the kernel tree so that its tree checks apply) and on the C
# shim and KUnit suites. Fails on any error, warning or check, or when the series and the patch
# files disagree.
. "$(dirname "$0")/common.sh"
. "$TOP/scripts/lint-env.sh"

lint_lock
lint_kernel_tree
CHECKPATCH=(perl "$LINT_KSRC/scripts/checkpatch.pl" --strict --quiet --color=never)
bad=0

# Every patch file is in the series, and every series entry is a file.
listed=$(grep -v -e '^#' -e '^[[:space:]]*$' "$TOP/drivers/patches/series" | sort)
present=$(cd "$TOP/drivers/patches" && ls -- *.patch | sort)
if [ "$listed" != "$present" ]; then
	echo "drivers/patches/series and the *.patch files differ:"
	diff <(echo "$listed") <(echo "$present") | sed 's/^/  /'
	bad=1
fi

while read -r p; do
	case "$p" in '' | '#'*) continue ;; esac
	f="$TOP/drivers/patches/$p"
	[ -e "$f" ] || continue
	if out=$(cd "$LINT_KSRC" && "${CHECKPATCH[@]}" "$f" 2>&1); then
		echo "ok: $p"
	else
		echo "FAIL: checkpatch --strict $p"
		echo "$out" | sed 's/^/  /'
		bad=1
	fi
done <"$TOP/drivers/patches/series"

# The C shim and the module's C KUnit suites (built out of tree, so the file mode). CONST_STRUCT:
# the shim's file_operations copy is filled in once at module load on purpose (see
# drivers/exanest_shim.c).
for f in "$TOP"/drivers/*.c "$TOP"/drivers/*.h "$TOP"/tests/kunit/*.c; do
	[ -e "$f" ] || continue
	if out=$(cd "$LINT_KSRC" && "${CHECKPATCH[@]}" --ignore CONST_STRUCT -f "$f" 2>&1); then
		echo "ok: ${f#"$TOP"/}"
	else
		echo "FAIL: checkpatch --strict -f ${f#"$TOP"/}"
		echo "$out" | sed 's/^/  /'
		bad=1
	fi
done
exit $bad
