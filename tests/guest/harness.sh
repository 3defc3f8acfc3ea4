# The guest scripts' test lines (sourced by check.sh, check-qfdb.sh, nodes.sh): every check
# prints one "GUEST-TEST: ok|not ok NAME" line, or, from the kselftest-harness binaries, TAP
# lines; the host harness (scripts/check.sh, tests/harness/console.py) counts both.
t() { if [ "$1" = 0 ]; then echo "GUEST-TEST: ok $2"; else echo "GUEST-TEST: not ok $2 - $3"; fi; }
# topic NAME [ARGS]: one kselftest-harness binary, its time, and any exit status but 0 or 1
# (not found, killed: its lines would be lost silently) reported.
topic() {
	local name=$1 t0 rc
	shift
	t0=$(cut -d' ' -f1 /proc/uptime)
	exanest-$name "$@"; rc=$?
	[ "$rc" -le 1 ] || t 1 "exanest-$name" "exit status $rc"
	echo "GUEST-TIME: exanest-$name $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s"
}
# expect NAME PATTERN CMD...: run CMD, show its output, and one test line: whether a line of it
# matches PATTERN (grep's basic regular expression).
expect() {
	local name=$1 pat=$2 out
	shift 2
	out=$("$@" 2>&1); echo "$out"
	echo "$out" | grep -q "$pat"; t $? "$name" "$out"
}
