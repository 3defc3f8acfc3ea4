#!/usr/bin/env python3
"""Judge a guest console log: count GUEST-TEST and KUnit (KTAP) results and find kernel reports.

Usage: console.py LOG [--expect-done]
Prints one line per failure and a final "console: P passed, F failed" line; exits non-zero when
anything failed. Kernel reports (Oops, BUG, WARNING, KASAN, lockdep, panic) and a missing
GUEST-DONE marker (crash or timeout) count as failures.
"""
import re
import sys

GUEST = re.compile(r"GUEST-TEST: ")
TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
KTAP = re.compile(r"^(\s*)(ok|not ok) (\d+) ([^#]*?)(\s+#\s*(.*))?$")
REPORTS = [
    (re.compile(r"Internal error: Oops|\bOops\b"), "kernel Oops"),
    (re.compile(r"kernel BUG at|\bBUG: "), "kernel BUG"),
    (re.compile(r"\bWARNING: "), "kernel WARNING (or lockdep)"),
    (re.compile(r"KASAN|UBSAN"), "sanitizer report"),
    (re.compile(r"possible recursive locking|possible circular locking|inconsistent lock state"), "lockdep report"),
    (re.compile(r"Kernel panic"), "kernel panic"),
    (re.compile(r"sleeping function called from invalid context"), "sleep in atomic context"),
]


def judge(lines, expect_done=True):
    passed, failed, problems = 0, 0, []
    in_ktap, suite_cases = False, 0
    done = False
    for raw in lines:
        line = TS.sub("", raw.rstrip("\r\n"))
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
        for pat, what in REPORTS:
            if pat.search(line):
                failed += 1
                problems.append(f"{what}: {line.strip()}")
                break
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
                    continue
                if ok:
                    passed += 1
                else:
                    failed += 1
                    problems.append(f"KUnit: {line.strip()}")
            else:
                if suite_cases == 0 and not directive.startswith("SKIP"):
                    passed += ok
                    failed += not ok
                    if not ok:
                        problems.append(f"KUnit suite: {line.strip()}")
                suite_cases = 0
    if expect_done and not done:
        failed += 1
        problems.append("the guest did not reach GUEST-DONE (crash, hang or timeout)")
    return passed, failed, problems


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    with open(sys.argv[1], errors="replace") as f:
        passed, failed, problems = judge(f, "--no-done" not in sys.argv)
    for p in problems:
        print(f"FAIL: {p}")
    print(f"console: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
