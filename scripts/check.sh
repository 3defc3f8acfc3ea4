#!/usr/bin/env bash
# make check: every test of the project, in phases, with timings and one closing count line.
# Fails on any test failure, a build failure, a timeout, or a kernel report in the guest console.
. "$(dirname "$0")/common.sh"
. "$TOP/scripts/lint-env.sh"
cd "$TOP"
LOGS="$TOP/build/logs"
mkdir -p "$LOGS"
export PATH="$HOME/.cargo/bin:$PATH"

PASSED=0 FAILED=0 SKIPPED=0
TIMINGS=()
FAILS=()

pass() { PASSED=$((PASSED + ${1:-1})); }
fail() { FAILED=$((FAILED + 1)); FAILS+=("$1"); echo "FAIL: $1"; }

# phase NAME FUNCTION: run one phase, time it.
phase() {
	local name=$1 t0=$SECONDS
	echo "=== $name"
	"$2" || true
	TIMINGS+=("$(printf '%-14s %5ds' "$name" $((SECONDS - t0)))")
}

show_log() { echo "--- last lines of $1:"; tail -n "${2:-40}" "$1"; }

p_setup() {
	if "$TOP/scripts/setup-host.sh" >"$LOGS/setup.log" 2>&1; then pass; else
		fail "host set-up"; show_log "$LOGS/setup.log"; summary; exit 1; fi
}

p_host_tests() {
	local log="$LOGS/cargo-test.log" p f d
	local -A selftests
	# The Python self-tests wait on sockets more than they compute (the switch's quiet periods):
	# they run beside cargo test, each into its own log, and are counted after it.
	for d in harness lint eval; do
		python3 -m unittest discover -s "tests/$d" -p 'test_*.py' >"$LOGS/$d.log" 2>&1 &
		selftests[$d]=$!
	done
	(cd rust && cargo test --workspace --all-targets 2>&1) >"$log"
	p=$(awk '/^test result:/ {s += $4} END {print s + 0}' "$log")
	f=$(awk '/^test result:/ {s += $6} END {print s + 0}' "$log")
	pass "$p"
	if [ "$f" != 0 ] || ! grep -q '^test result:' "$log"; then
		fail "cargo test ($f failed)"; show_log "$log"
	fi
	echo "cargo test: $p passed, $f failed"
	for d in harness lint eval; do
		if wait "${selftests[$d]}"; then
			pass "$(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' "$LOGS/$d.log")"
		else
			fail "$d self-tests"; show_log "$LOGS/$d.log"
		fi
	done
}

# The QEMU model and its register header against QEMU's own scripts/checkpatch.pl, taken from the
# pinned QEMU tarball (lint runs before the QEMU build). --strict: a WARNING fails too.
lint_model() {
	local dir="$TOP/build/lint" log="$LOGS/model-checkpatch.log" out
	rm -rf "$dir"; mkdir -p "$dir"
	if ! tar -xJf "$DL/qemu.orig.tar.xz" -C "$dir" --wildcards --strip-components=1 \
		'qemu-*/scripts/checkpatch.pl' 2>"$log"; then
		fail "QEMU checkpatch: cannot extract it from $DL/qemu.orig.tar.xz"; show_log "$log" 5; return
	fi
	local f
	for f in tests/qemu-model/exanest_pldma.c tests/qemu-model/exanest_pldma.h \
		tests/qemu-model/exanest_net.c tests/qemu-model/exanest_core.h \
		tests/qemu-model/insprof.c tests/qemu-model/arm_mmu500.c tests/qemu-model/arm_mmu500.h \
		tests/qemu-model/exanest_pldma_fdt.h; do
		if perl "$dir/scripts/checkpatch.pl" --strict --no-tree -f "$f" >"$log" 2>&1; then pass; else
			fail "QEMU checkpatch ($f)"; show_log "$log" 30; fi
	done
	# The register header is shared with the guest tools and a future FPGA design, under
	# (GPL-2.0-only OR MIT): QEMU's checkpatch notes that it prefers GPL-2.0-or-later. That note
	# is the one message tolerated; any other WARNING or ERROR fails.
	out=$(perl "$dir/scripts/checkpatch.pl" --no-tree -f include/hw/exanest-pldma-regs.h 2>&1 || true)
	if echo "$out" | grep -q '^total: 0 errors' && ! echo "$out" | grep -E '^(ERROR|WARNING):' |
		grep -v -q "^WARNING: Saw acceptable license '(GPL-2.0-only OR MIT) '"; then pass; else
		fail "QEMU checkpatch (include/hw/exanest-pldma-regs.h)"; echo "$out" | head -30; fi
}

p_lint() {
	local patches dt
	# The kernel's checkpatch.pl --strict on the patch series and the C shim, and
	# dt_binding_check of the devicetree binding (pinned dtschema; 2 minutes when it changed):
	# two single-threaded jobs that need nothing below, run beside it.
	"$TOP/scripts/lint-patches.sh" >"$LOGS/lint-patches.log" 2>&1 &
	patches=$!
	"$TOP/scripts/lint-dt.sh" >"$LOGS/lint-dt.log" 2>&1 &
	dt=$!
	# What the compiler does not check: SAFETY comments, dropped results explained, one lock order.
	if python3 tests/lint/driver_rules.py >"$LOGS/driver-rules.log" 2>&1; then pass; else
		fail "driver rules"; show_log "$LOGS/driver-rules.log" 20; fi
	# One register map: the rst tables and the driver's register! blocks against the C header.
	if python3 tests/lint/regmap.py >"$LOGS/regmap.log" 2>&1; then pass; else
		fail "register map (tests/lint/regmap.py)"; show_log "$LOGS/regmap.log" 30; fi
	# Every document parses (docutils pinned in the linters' venv): a malformed table renders
	# as raw text, unnoticed.
	if "$LINT_VENV/bin/python3" tests/lint/rst.py >"$LOGS/rst.log" 2>&1; then pass; else
		fail "Documentation: reStructuredText that does not parse (tests/lint/rst.py)"
		show_log "$LOGS/rst.log" 20; fi
	lint_model
	if (cd rust && cargo fmt --all -- --check) >"$LOGS/fmt.log" 2>&1; then pass; else
		fail "rustfmt"; show_log "$LOGS/fmt.log" 20; fi
	if (cd rust && cargo clippy --workspace --all-targets -- -D warnings) >"$LOGS/clippy.log" 2>&1; then pass; else
		fail "clippy"; show_log "$LOGS/clippy.log" 30; fi
	if wait "$patches"; then pass; else
		fail "checkpatch --strict (patches, C shim)"; show_log "$LOGS/lint-patches.log" 30; fi
	if wait "$dt"; then pass; else
		fail "devicetree binding (dt_binding_check)"; show_log "$LOGS/lint-dt.log" 30; fi
}

p_builds() {
	if KBUILD=$("$TOP/scripts/build-kernel.sh" 2>"$LOGS/kernel.log"); then pass; else
		fail "kernel build"; show_log "$LOGS/kernel.log"; fi
	if QEMU=$("$TOP/scripts/build-qemu.sh" 2>"$LOGS/qemu-build.log"); then pass; else
		fail "QEMU build"; show_log "$LOGS/qemu-build.log"; fi
	# The guests' Debian user space (libfabric, Open MPI) for the two-guest run's fabric tests.
	if GUEST_DISK=$("$TOP/scripts/build-guest-debian.sh" 2>"$LOGS/guest-debian.log"); then pass; else
		fail "the guests' Debian disk"; show_log "$LOGS/guest-debian.log"; GUEST_DISK=; fi
	export KBUILD QEMU GUEST_DISK
}

p_module() {
	if [ ! -e "$TOP/drivers/Kbuild" ] && [ ! -e "$TOP/Kbuild" ]; then
		echo "no driver yet: skipped"
		return
	fi
	local src="$KBUILD/source" key cached
	# A clean rebuild with clippy: every Rust and C warning counts. Cached like the kernel: the
	# module and its build log are kept under the hash of every input (the module's sources,
	# the core crate and headers it includes, the build files, the kernel's build directory,
	# which names the kernel's own key, and the compilers), and a run with the same inputs
	# takes both from there.
	key=$( { find drivers include rust/exanest-core/src -type f -print0 | sort -z |
		xargs -0 sha256sum; sha256sum Kbuild Makefile scripts/shim-bindings.sh scripts/common.sh \
		scripts/versions.env; echo "$KBUILD"; rustc --version; "clang-$LLVM_VERSION" --version; } |
		sha256sum | cut -c1-16)
	cached="$CACHE/module-$key"
	rm -rf "$TOP/build/module"
	if [ -e "$cached/.done" ]; then
		mkdir -p "$TOP/build/module"
		cp "$cached/exanest_dma.ko" "$TOP/build/module/"
		{ echo "(module-$key: from the cache, built with these inputs before)"; cat "$cached/module.log"; } \
			>"$LOGS/module.log"
		pass
	elif make -C "$TOP" module KDIR="$KBUILD" CLIPPY=1 >"$LOGS/module.log" 2>&1; then
		pass
		if ! grep -q 'warning' "$LOGS/module.log"; then
			rm -rf "$cached"; mkdir -p "$cached"
			cp "$TOP/build/module/exanest_dma.ko" "$LOGS/module.log" "$cached/" && touch "$cached/.done"
		fi
	else
		fail "module build"; show_log "$LOGS/module.log"; return; fi
	if grep -q 'warning' "$LOGS/module.log"; then
		fail "module build warnings (clippy or C)"; grep -A8 'warning' "$LOGS/module.log" | head -40
	else pass; fi
	if rustfmt --edition 2021 --config-path "$src/.rustfmt.toml" --check drivers/exanest_main.rs \
		>"$LOGS/module-fmt.log" 2>&1; then pass; else
		fail "rustfmt (drivers/, kernel style)"; show_log "$LOGS/module-fmt.log" 20; fi
	# make board's devicetree overlay (scripts/board.sh), applied to the ZCU102's devicetree from
	# the kernel's source and validated against the binding and every kernel schema.
	if "$TOP/scripts/board.sh" --overlay-only "$KBUILD" "$TOP/build/board" >"$LOGS/board.log" 2>&1 &&
		"$TOP/scripts/lint-dt.sh" --dtb "$TOP/build/board/zynqmp-zcu102-exanest.dtb" \
		/axi/dma@a0000000 /axi/dma@a0000000/context@0 /axi/dma@a0000000/context@f \
		>>"$LOGS/board.log" 2>&1; then pass; else
		fail "make board's overlay on the ZCU102's devicetree"; show_log "$LOGS/board.log" 30; fi
	# No frame that the probe's or open's deep calls could overflow the kernel stack under; the
	# test kernel's KASAN stacks are 32 KiB, so its KUnit tests may take 16 (common.sh's eval_image checks
	# the evaluation kernel's module against 16 KiB stacks).
	if python3 tests/lint/stack_frames.py "$TOP/build/module/exanest_dma.ko" \
		"llvm-objdump-$LLVM_VERSION" --kunit-limit 16384 >"$LOGS/stack-frames.log" 2>&1; then pass; else
		fail "stack frames (tests/lint/stack_frames.py)"; show_log "$LOGS/stack-frames.log" 20; fi
	# CONST_STRUCT: the shim's file_operations copy is written once, on purpose (see the shim).
	if perl "$src/scripts/checkpatch.pl" --no-tree --quiet --strict --ignore CONST_STRUCT \
		-f drivers/*.c drivers/*.h \
		>"$LOGS/checkpatch.log" 2>&1; then pass; else
		fail "checkpatch (C shim)"; show_log "$LOGS/checkpatch.log" 20; fi
}

p_guest_rust() {
	if "$TOP/scripts/build-guest-rust.sh" >"$LOGS/guest-rust.log" 2>&1; then pass; else
		fail "user library and tools for aarch64"; show_log "$LOGS/guest-rust.log"; fi
}

p_model() {
	[ -x "${QEMU:-}" ] || { fail "model tests: no QEMU"; return; }
	local t log ran bad pids=()
	# The engine (test_model.py), its network port, two engines on a hub (test_net.py), and the
	# MMU-500 with the engine's platform front-end behind it (test_mmu500.py), at once: each
	# test starts its own QEMU processes (qtest, no vCPU), so they share nothing.
	for t in test_model test_net test_mmu500; do
		QEMU="$QEMU" timeout 900 python3 "tests/qemu-model/$t.py" -v >"$LOGS/model-$t.log" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	for t in test_model test_net test_mmu500; do
		log="$LOGS/model-$t.log"
		ran=$(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' "$log")
		# One line per failed test or subtest: the count of passes stops at 0.
		bad=$(grep -c -E '^(FAIL|ERROR):' "$log")
		pass $(( ${ran:-0} > bad ? ${ran:-0} - bad : 0 ))
		if [ -z "$ran" ] || [ "$bad" != 0 ] || ! tail -3 "$log" | grep -q '^OK'; then
			fail "model qtest $t ($bad of ${ran:-?} failed)"; show_log "$log" 60
		fi
		echo "model qtest $t: ${ran:-0} run, $bad failed"
	done
	# The MMU-500 machine's devicetree, as QEMU makes it (tests/qemu-model/patches), against
	# every kernel schema and our binding (the lint phase built the processed schema).
	local dtb="$LOGS/qfdb.dtb" pb=/platform-bus@c000000
	"$QEMU" -machine "virt,gic-version=3,dumpdtb=$dtb" -cpu max -nographic -nic none \
		-device arm-mmu500,id=smmu0 -device exanest-pldma-platform,iommu=smmu0,contexts=4 \
		>"$LOGS/qfdb-dtb.log" 2>&1
	if "$TOP/scripts/lint-dt.sh" --dtb "$dtb" $pb/iommu@0 $pb/dma@20000 $pb/dma@20000/context@0 \
		$pb/dma@20000/context@3 >"$LOGS/qfdb-dt.log" 2>&1; then pass; else
		fail "the MMU-500 machine's devicetree against the bindings"; show_log "$LOGS/qfdb-dt.log" 30; fi
}

# Count a guest console's tests (tests/harness/console.py) and show its GUEST- lines, and of the
# kselftest-harness binaries their failures and totals (each followed by the binary's GUEST-TIME
# line); the fuzzer's seed and its failed calls. judge_guest LOG NAME
judge_guest() {
	local log=$1 name=$2 out
	grep -aE '^((\[[ 0-9.]+\] )?GUEST-|not ok [0-9]+ |# Totals: |exanest-fuzz: seed |# FAIL )' \
		"$log" | sed 's/^/  /'
	out=$(python3 tests/harness/console.py "$log")
	echo "$out" | tail -1
	# "console: P passed, F failed, S skipped": skips (a scenario that does not apply to a
	# memory mode) are neither passed nor failed; SKIPPED carries them to the summary.
	set -- $(echo "$out" | tail -1 | awk '{print $2, $4, $6}')
	pass "$1"
	SKIPPED=$(( ${SKIPPED:-0} + ${3:-0} ))
	if [ "$2" != 0 ]; then
		fail "$name ($2 failed)"; echo "$out" | grep '^FAIL' | sed 's/^/  /'; show_log "$log" 60
	fi
}

# The guest tests, in one guest. (Two guests at once, each with a part of the tests, were
# slower: each QEMU's main loop thread, which runs the engine model, and its two vCPU threads
# need the BQL, and four vCPUs and two main loops on two cores ran every test 2.5 to 3.5 times
# slower than one guest does.)
p_guest() {
	[ -x "${QEMU:-}" ] && [ -n "${KBUILD:-}" ] || { fail "guest tests: no kernel or QEMU"; return; }
	local log="$LOGS/guest-check.log" out
	"$TOP/scripts/build-initramfs.sh" "$KBUILD" "$TOP/build/initramfs.cpio" || { fail "initramfs"; return; }
	# With the Debian disk: the libfabric provider's test between the two engines.
	QEMU="$QEMU" KERNEL="$KBUILD/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs.cpio" \
		GUEST_DISK="${GUEST_DISK:-}" TIMEOUT=2700 "$TOP/scripts/run-qemu.sh" check >"$log" 2>&1
	echo "guest exit status $?"
	judge_guest "$log" guest
	# The evaluation's smoke run: the bench works and its numbers are sane (no timings asserted).
	grep -a -E '^\{"(run|bench|engine)"' "$log" >"$LOGS/eval-smoke.jsonl" || true
	out=$(python3 tests/eval/report.py --check "$LOGS/eval-smoke.jsonl")
	echo "$out" | tail -1
	set -- $(echo "$out" | tail -1 | awk '{print $2, $4}')
	pass "$1"
	[ "$2" = 0 ] || { fail "evaluation smoke ($2 failed)"; echo "$out" | grep '^FAIL'; }
}

# The QFDB under emulation (Documentation/qfdb.rst): the guest tests that do not depend on
# SR-IOV (tests/guest/check-qfdb.sh) on the virt board's MMU-500, the engines on the platform bus
# behind it, Linux's arm-smmu.c and the driver's devicetree front-end.
p_guest_qfdb() {
	[ -x "${QEMU:-}" ] && [ -n "${KBUILD:-}" ] || { fail "QFDB guest tests: no kernel or QEMU"; return; }
	local log="$LOGS/guest-qfdb.log"
	PLATFORM=mmu500 QEMU="$QEMU" KERNEL="$KBUILD/arch/arm64/boot/Image" \
		INITRD="$TOP/build/initramfs.cpio" TIMEOUT=1200 "$TOP/scripts/run-qemu.sh" check-qfdb \
		>"$log" 2>&1
	echo "QFDB guest exit status $?"
	judge_guest "$log" "QFDB guest"
}

# Two guests, two QEMU processes with their own kernels, their engines linked by -netdev stream
# on a unix socket (scripts/run-nodes.py): the network tests with the receivers on the other
# node, the link recorded (headers only) and read back. Then four, QFDB-like, through the host's
# switch (scripts/exanest-switch.py): nodes 0 and 2 test against 1 and 3 at once; and four again
# with the switch dropping 1 %, corrupting 0.1 %, duplicating 0.5 % of the packets, holding
# 1 % back by up to 300 us (reordering them), and adding a hostile packet after one in ten (forged
# fields and keys, replays, random bytes): the lossy tests, the engines injecting nothing.
# Every guest pings another over its second NIC (a socket, or run-nodes.py's hub); with the
# Debian disk (two and four guests), fi_info and fi_pingpong over the provider on every pair
# (tests/guest/fabric.sh), and Open MPI over the engine launched from node 0: NetPIPE, its TCP
# baseline, the mpi4py program (tests/guest/mpi.sh).
p_nodes() {
	[ -x "${QEMU:-}" ] && [ -n "${KBUILD:-}" ] || { fail "two-guest tests: no kernel or QEMU"; return; }
	local cfg n i out sw pcap="$LOGS/nodes-pcap"
	# 2-qfdb: two QFDB-like guests (the MMU-500, the engine on the platform bus: run-qemu.sh
	# PLATFORM=mmu500), the network tests between them, without the Debian disk.
	for cfg in 2 4 4-lossy 2-qfdb; do
		n=${cfg%-*}
		rm -rf "$LOGS/nodes$cfg"
		[ "$cfg" != 2 ] || rm -rf "$pcap"
		sw=""
		[ "$cfg" != 4-lossy ] || sw="--drop-ppm 10000 --corrupt-ppm 1000 --dup-ppm 5000 --jitter-us 300 --reorder-ppm 10000 --hostile-ppm 100000 --seed 12"
		# The two and the four guests have the Debian disk: the libfabric provider's and Open
		# MPI's tests (tests/guest/fabric.sh, mpi.sh).
		QEMU="$QEMU" KERNEL="$KBUILD/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs.cpio" \
			QEMU_MEM=1536M QEMU_APPEND="${sw:+exanest.linkloss=switch}" \
			PLATFORM="$([ "$cfg" = 2-qfdb ] && echo mmu500)" \
			GUEST_DISK="$([ "$cfg" = "$n" ] && echo "${GUEST_DISK:-}")" \
			python3 "$TOP/scripts/run-nodes.py" --nodes $n --timeout 900 --switch-opts "$sw" \
			--logs "$LOGS/nodes$cfg" $([ "$cfg" = 2 ] && echo --pcap "$pcap" --pcap-maxlen 128) \
			nodes >"$LOGS/nodes$cfg.log" 2>&1
		echo "$cfg guests: exit status $?"
		grep -aE '^\[n[0-9]+\] ((\[[ 0-9.]+\] )?GUEST-(TEST|TIME)|not ok [0-9]+ |# Totals: |# FAIL )|^run-nodes|^\{"switch"' \
			"$LOGS/nodes$cfg.log" | sed 's/^/  /'
		for ((i = 0; i < n; i++)); do
			out=$(python3 tests/harness/console.py "$LOGS/nodes$cfg/node$i.log")
			echo "$cfg guests, node $i: $(echo "$out" | tail -1)"
			set -- $(echo "$out" | tail -1 | awk '{print $2, $4, $6}')
			pass "$1"
			SKIPPED=$(( ${SKIPPED:-0} + ${3:-0} ))
			if [ "$2" != 0 ]; then
				fail "$cfg guests, node $i ($2 failed)"; echo "$out" | grep '^FAIL' | sed 's/^/  /'
				show_log "$LOGS/nodes$cfg/node$i.log" 60
			fi
		done
		# The lossy switch did drop, damage, duplicate, reorder and forge packets on the way.
		if [ -n "$sw" ]; then
			out=$(grep -a '^{"switch"' "$LOGS/nodes$cfg.log" | tail -1)
			if python3 -c 'import json, sys; c = json.loads(sys.argv[1])["switch"]
sys.exit(0 if all(c[k] > 0 for k in ("dropped", "corrupted", "duplicated", "reordered", "hostile")) else 1)' "$out"
			then pass; else fail "the lossy switch impaired nothing: $out"; fi
		fi
	done
	# make demo's two-guest part: an address out of band, then a hello and a key through the
	# mailboxes, a put and a get with it.
	QEMU="$QEMU" KERNEL="$KBUILD/arch/arm64/boot/Image" INITRD="$TOP/build/initramfs.cpio" \
		python3 "$TOP/scripts/run-nodes.py" --timeout 600 --logs "$LOGS/demo-nodes" demo-nodes \
		>"$LOGS/demo-nodes.log" 2>&1
	if grep -aq '^\[n0\] put 8388608 bytes to another node and got them back, data verified on both' \
		"$LOGS/demo-nodes.log"; then pass; else
		fail "the demo's two-guest part"; show_log "$LOGS/demo-nodes.log" 40; fi
	# The two-guest link as recorded on node 0: receiver faults NACKed and RESUMEd across the
	# socket (the damaged packets it lists are the lossy test's corruption, on purpose).
	out=$(python3 "$TOP/scripts/exanest-pcap.py" --summary "$pcap/node0.pcap" 2>&1)
	echo "$out" | sed 's/^/  pcap: /'
	if echo "$out" | grep -q '^NACK FAULT: [1-9]' && echo "$out" | grep -q '^RESUME '; then
		pass; else fail "two guests: the pcap shows no NACK FAULT and RESUME"; fi
}

summary() {
	echo
	echo "=== timings"
	printf '  %s\n' "${TIMINGS[@]}"
	[ ${#FAILS[@]} = 0 ] || { echo "=== failures"; printf '  %s\n' "${FAILS[@]}"; }
	echo "$PASSED passed, $FAILED failed${SKIPPED:+, $SKIPPED skipped}"
}

phase setup p_setup
phase host-tests p_host_tests
phase lint p_lint
phase builds p_builds
phase module p_module
phase guest-rust p_guest_rust
phase model-qtest p_model
phase guest p_guest
phase guest-qfdb p_guest_qfdb
phase nodes p_nodes
summary
[ "$FAILED" = 0 ]
