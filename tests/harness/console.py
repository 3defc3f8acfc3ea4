#!/usr/bin/env python3
"""Judge a guest console log: count GUEST-TEST, KUnit (KTAP) and kselftest-harness (TAP) results
and find kernel reports.

Usage: console.py LOG [--no-done] [--reports-only]
Prints one line per failure and a final "console: P passed, F failed, S skipped" line; exits
non-zero when anything failed. Kernel reports (Oops, BUG, WARNING, KASAN, UBSAN, lockdep,
DEBUG_OBJECTS, hung tasks, soft and hard lockups, RCU stalls, panic) and a missing GUEST-DONE
marker (crash or timeout) count as failures.

The console prints warnings and worse only (tests/guest/init), so the guest's check.sh ends with
the whole kernel log (dmesg) between GUEST-DMESG-BEGIN and GUEST-DMESG-END lines: that block is
scanned for the same reports and nothing else (its KTAP lines are not counted again). A kind of
report already counted, from the console or earlier in the block, is not counted again from the
block. A run that reached GUEST-DONE without a complete block fails.

Three result formats share the console:
- "GUEST-TEST: ok NAME" / "GUEST-TEST: not ok NAME - why" (scripts and pldma-probe);
- KTAP from the module's KUnit suites, copied from dmesg (so with a "[ time]" prefix), after a
  "KTAP version" line: nested cases count, a suite line only when it has no cases;
- TAP from the kselftest-harness test binaries, after an unprefixed "TAP version" line, up to its
  "# Totals:" line: "ok N NAME", "not ok N NAME", "ok N NAME # SKIP why" (skipped, neither passed
  nor failed), "# XFAIL" (passed), "# XPASS" (failed). A run must end with "# Totals:" agreeing
  with its lines and its "1..N" plan, or it counts as a failure (a crash, or lines lost).
"""
import re
import sys
from collections import namedtuple

GUEST = re.compile(r"GUEST-TEST: ")
TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
KTAP = re.compile(r"^(\s*)(ok|not ok) (\d+) ([^#]*?)(\s+#\s*(.*))?$")
TAP = re.compile(r"^(ok|not ok) (\d+) (\S+)(?:\s+#\s*(.*))?$")
TAP_PLAN = re.compile(r"^1\.\.(\d+)$")
TAP_RUN = re.compile(r"^#\s+RUN\s+(\S+) \.\.\.")
# What a failed EXPECT or ASSERT prints: "# exanest-queues.c:240:wait_sleeps...:Expected ...".
TAP_SAID = re.compile(r"^# (\S+\.c:\d+:.*)$")
# A kernel message printed into the middle of a test's line, up to the line's end.
MIDLINE = re.compile(r"\[\s*\d+\.\d+\] .*$")
TAP_TOTALS = re.compile(r"^# Totals: pass:(\d+) fail:(\d+) xfail:(\d+) xpass:(\d+) skip:(\d+) error:(\d+)")
DMESG_BEGIN, DMESG_END = "GUEST-DMESG-BEGIN", "GUEST-DMESG-END"
REPORTS = [
    (re.compile(r"Internal error: Oops|\bOops\b"), "kernel Oops"),
    # The detectors of the debugging kernel (drivers/kernel-debug.config), before the generic
    # "BUG: " and "KASAN" so that the failure names them. Formats: kernel/hung_task.c,
    # kernel/watchdog.c (pr_fmt "watchdog: "), kernel/rcu/tree_stall.h, tree_exp.h (pr_fmt
    # "rcu: ") and tasks.h, mm/kasan/report.c, lib/debugobjects.c (pr_fmt "ODEBUG: ").
    (re.compile(r"\bINFO: task .+:\d+ blocked( in I/O wait)? for more than \d+ seconds\."), "hung task"),
    (re.compile(r"\bwatchdog: BUG: soft lockup - CPU#\d+ stuck for \d+s!"), "soft lockup"),
    (re.compile(r"\bwatchdog: CPU\d+: Watchdog detected hard LOCKUP on cpu \d+"), "hard lockup"),
    (re.compile(r"\brcu: INFO: \S+ (detected (expedited )?stalls on CPUs/tasks|self-detected stall on CPU"
                r"|detected (stall|expedited stalls), but suppressed full report)"
                r"|\bINFO: rcu_tasks detected stalls on tasks"), "RCU stall"),
    (re.compile(r"\bBUG: KASAN: |\bKASAN: .+ in range \["), "KASAN report"),
    (re.compile(r"\bODEBUG: (?!selftest passed)"), "DEBUG_OBJECTS report"),
    (re.compile(r"kernel BUG at|\bBUG: "), "kernel BUG"),
    (re.compile(r"\bWARNING: "), "kernel WARNING (or lockdep)"),
    (re.compile(r"KASAN|UBSAN"), "sanitizer report"),
    (re.compile(r"possible recursive locking|possible circular locking|inconsistent lock state"), "lockdep report"),
    (re.compile(r"Kernel panic"), "kernel panic"),
    (re.compile(r"sleeping function called from invalid context"), "sleep in atomic context"),
    # kernel/irq/spurious.c: a level interrupt no handler claims, then disabled for good (an
    # IOMMU's fault interrupt silenced so: its faults never reach their handler again).
    (re.compile(r"\birq \d+: nobody cared"), "unhandled interrupt (disabled)"),
]


Verdict = namedtuple("Verdict", "passed failed problems skipped")


class _TapRun:
    """One kselftest-harness run, from "TAP version" to "# Totals:"."""

    def __init__(self):
        self.plan = None
        self.counts = {"pass": 0, "fail": 0, "xfail": 0, "xpass": 0, "skip": 0}
        self.last = None
        self.running = None  # the test the last "#  RUN" line named
        self.said = []  # the running test's failed expectations ("# FILE.c:LINE:...")

    def result(self, ok, name, directive):
        self.last = name
        word = directive.split()[0].upper() if directive.strip() else ""
        if word == "SKIP":
            self.counts["skip"] += 1
            return "skip"
        if word == "XFAIL" and ok:
            self.counts["xfail"] += 1
            return "pass"
        if word == "XPASS" and ok:
            self.counts["xpass"] += 1
            return "fail"
        self.counts["pass" if ok else "fail"] += 1
        return "pass" if ok else "fail"

    def check_totals(self, m):
        """Problems with the "# Totals:" line m against the lines and the plan."""
        totals = dict(zip(["pass", "fail", "xfail", "xpass", "skip"], map(int, m.groups()[:5])))
        problems = []
        if totals != self.counts:
            problems.append(f"kselftest totals {totals} disagree with the TAP lines {self.counts} (lines lost?)")
        seen = sum(self.counts.values())
        if self.plan is not None and seen != self.plan:
            problems.append(f"kselftest plan 1..{self.plan} but {seen} results (after {self.last})")
        if int(m.group(6)):
            problems.append(f"kselftest reports {m.group(6)} error(s)")
        return problems


def judge(lines, expect_done=True):
    passed, failed, skipped, problems = 0, 0, 0, []
    in_ktap, suite_cases = False, 0
    tap = None
    done = False
    dmesg = None   # None: no dmesg block yet; "in": inside it; "end": after it
    kinds = set()  # the kinds of report counted

    def unfinished(run):
        return f"kselftest run ended without its '# Totals:' line (crash or hang after {run.last})"

    for raw in lines:
        raw = raw.rstrip("\r\n")
        stamped = TS.match(raw) is not None
        line = TS.sub("", raw)
        # Kernel messages can land in the middle of a test's line: search, don't anchor.
        g = GUEST.search(line)
        if g:
            rest = line[g.end():]
            if rest.startswith("ok "):
                passed += 1
            else:
                failed += 1
                problems.append(rest)
            continue
        if "GUEST-DONE" in line:
            done = True
            continue
        if DMESG_BEGIN in line:
            dmesg = "in"
            continue
        if DMESG_END in line:
            dmesg = "end" if dmesg == "in" else dmesg
            continue
        if dmesg == "in":
            # The kernel log read back: reports only, each kind once (most were on the console).
            for pat, what in REPORTS:
                if pat.search(line):
                    if what not in kinds:
                        kinds.add(what)
                        failed += 1
                        problems.append(f"{what} (in the dmesg readback): {line.strip()}")
                    break
            continue
        for pat, what in REPORTS:
            if pat.search(line):
                kinds.add(what)
                failed += 1
                problems.append(f"{what}: {line.strip()}")
                break
        # kselftest-harness TAP: printed by a test binary, so never with a kernel time stamp.
        if not stamped and line.startswith("TAP version"):
            if tap is not None:
                failed += 1
                problems.append(unfinished(tap))
            tap, in_ktap = _TapRun(), False
            continue
        if tap is not None:
            if stamped:
                continue
            m = TAP.match(line)
            if not m:
                # A kernel message that landed after a whole result line (its name is the
                # running test's: not cut) is not part of it.
                m = TAP.match(MIDLINE.sub("", line))
                m = m if m and m.group(3) == tap.running else None
            if m:
                what = tap.result(m.group(1) == "ok", m.group(3), m.group(4) or "")
                if what == "pass":
                    passed += 1
                elif what == "skip":
                    skipped += 1
                else:
                    failed += 1
                    # With what the test said (the first three), so that a failure seen
                    # once names its line.
                    said = "".join(f"; {x}" for x in tap.said[:3])
                    problems.append(f"kselftest: {line.strip()}{said}")
                tap.said = []
                continue
            m = TAP_PLAN.match(line)
            if m:
                tap.plan = int(m.group(1))
                continue
            m = TAP_RUN.match(line)
            if m:
                tap.running, tap.said = m.group(1), []
                continue
            m = TAP_SAID.match(line)
            if m:
                tap.said.append(m.group(1))
                continue
            m = TAP_TOTALS.match(line)
            if m:
                bad = tap.check_totals(m)
                failed += len(bad)
                problems += bad
                tap = None
            continue
        if line.startswith("KTAP version"):
            in_ktap = True
            continue
        m = KTAP.match(line) if in_ktap else None
        if m:
            depth = len(m.group(1).expandtabs()) // 4
            ok = m.group(2) == "ok"
            directive = (m.group(6) or "").upper()
            if depth >= 1:
                suite_cases += 1
                if directive.startswith("SKIP"):
                    skipped += 1
                    continue
                if ok:
                    passed += 1
                else:
                    failed += 1
                    problems.append(f"KUnit: {line.strip()}")
            else:
                if suite_cases == 0:
                    if directive.startswith("SKIP"):
                        skipped += 1
                    else:
                        passed += ok
                        failed += not ok
                        if not ok:
                            problems.append(f"KUnit suite: {line.strip()}")
                suite_cases = 0
    if tap is not None:
        failed += 1
        problems.append(unfinished(tap))
    if expect_done and not done:
        failed += 1
        problems.append("the guest did not reach GUEST-DONE (crash, hang or timeout)")
    elif done and dmesg != "end":
        failed += 1
        why = "it did not end" if dmesg else "missing"
        problems.append(f"the guest reached GUEST-DONE without the dmesg readback ({DMESG_BEGIN}): {why}")
    return Verdict(passed, failed, problems, skipped)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    with open(sys.argv[1], errors="replace") as f:
        v = judge(f, "--no-done" not in sys.argv)
    if "--reports-only" in sys.argv:
        # make run-prog: the program's own output is not judged, only the kernel's.
        kinds = tuple(name for _, name in REPORTS) + ("the guest",)
        bad = [p for p in v.problems if p.startswith(kinds)]
        for p in bad:
            print(f"run-prog: kernel log: {p}")
        print(f"run-prog: kernel log: {len(bad) or 'no'} kernel report(s)")
        return 1 if bad else 0
    for p in v.problems:
        print(f"FAIL: {p}")
    print(f"console: {v.passed} passed, {v.failed} failed, {v.skipped} skipped")
    return 1 if v.failed else 0


if __name__ == "__main__":
    sys.exit(main())
