#!/usr/bin/env python3
"""make profile's report (scripts/profile.sh): the insprof plugin's spans named by the guest's
kernel symbols. Usage: profile.py DIR [--top N]. DIR holds console.log (the guest's output:
exanest-bench's JSON lines and its kallsyms between PROFILE-KSYMS-BEGIN/END) and span.1,
span.2, ... ("pc insns execs [crit]" per translation block, one file per span the bench
marked, after a "# paths N" line). Prints each span's instructions and, for every function,
its instructions per span and per unit of work (the last bench line's "faults", else its
"pages"), averaged over the spans; then, where the driver marked critical paths (a fault's
service from the interrupt thread's start or its poll's sight of the fault to its answer),
their instructions per path by function. Under -icount shift=0 an instruction is a nanosecond
of the guest's virtual time."""
import bisect
import collections
import json
import pathlib
import re
import shutil
import subprocess
import sys


def demangle(names):
    """Rust (v0) and C++ names demangled by binutils' c++filt where it is installed, without
    the crate hashes."""
    if not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=False).stdout.splitlines()
    if len(out) != len(names):
        return {n: n for n in names}
    return {n: re.sub(r"\[[0-9a-f]{16}\]", "", o) for n, o in zip(names, out)}


def load(d):
    syms, bench, inside = [], [], False
    for line in (d / "console.log").read_text(errors="replace").splitlines():
        line = line.strip()
        if line == "PROFILE-KSYMS-BEGIN":
            inside = True
        elif line == "PROFILE-KSYMS-END":
            inside = False
        elif inside:
            p = line.split()
            if len(p) >= 3 and p[1] in "tTwW":
                try:
                    a = int(p[0], 16)
                except ValueError:
                    continue
                if a:
                    syms.append((a, p[2] + (" " + p[3] if len(p) > 3 else "")))
        elif line.startswith('{"bench"'):
            try:
                bench.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return sorted(syms), bench


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    d = pathlib.Path(args[0])
    top = int(args[args.index("--top") + 1]) if "--top" in args else 40
    syms, bench = load(d)
    if not syms:
        sys.exit(f"profile.py: no kernel symbols in {d / 'console.log'}")
    spans = sorted(d.glob("span.*"), key=lambda p: int(p.suffix[1:]))
    if not spans:
        sys.exit(f"profile.py: no span in {d}: did the bench mark any (EXANEST_PROF)?")
    addrs = [a for a, _ in syms]
    per_fn, crit_fn = collections.Counter(), collections.Counter()
    totals, paths = [], 0

    def name(pc):
        if pc < 1 << 63:
            return "[user space]"
        i = bisect.bisect_right(addrs, pc) - 1
        return syms[i][1] if i >= 0 else "[unknown]"

    for s in spans:
        total = 0
        for line in s.read_text().splitlines():
            if line.startswith("# paths "):
                paths += int(line.split()[2])
                continue
            pc, n, ex, *crit = line.split()
            pc, ins = int(pc, 16), int(n) * int(ex)
            total += ins
            per_fn[name(pc)] += ins
            if crit:
                crit_fn[name(pc)] += int(n) * int(crit[0])
        totals.append(total)
    last = bench[-1] if bench else {}
    unit, count = next(((k, last[k]) for k in ("faults", "pages") if last.get(k)), (None, 0))
    ns = len(spans)
    print(f"exanest-bench {last.get('bench', '?')}: {ns} span(s), instructions "
          f"{', '.join(str(t) for t in totals)}" +
          (f"; {count} {unit} in the last" if unit else ""))
    grand = sum(totals)
    mod = collections.Counter()
    for name, v in per_fn.items():
        mod["[exanest_dma]" if name.endswith("[exanest_dma]") else
            name if name.startswith("[") else "kernel"] += v
    print("by part: " + ", ".join(f"{k} {100 * v / grand:.1f} %" for k, v in mod.most_common()))
    shown = per_fn.most_common(top)
    names = demangle([n.split(" ")[0] for n, _ in shown + crit_fn.most_common(top)])

    def label(fn):
        """The function's demangled name, then its module if any."""
        sym, _, where = fn.partition(" ")
        return f"{names[sym]}{' ' + where if where else ''}"

    head = f"{'per span':>12} " + (f"{'per ' + unit.rstrip('s'):>10} " if unit else "")
    print(f"{head}{'share':>7}  function")
    for fn, v in shown:
        line = f"{v / ns:12.0f} " + (f"{v / ns / count:10.1f} " if unit else "")
        print(f"{line}{100 * v / grand:6.2f}%  {label(fn)}")
    if not paths:
        return
    crit = sum(crit_fn.values())
    print(f"critical paths (interrupt thread's start or poll's sight of a fault to its answer): "
          f"{paths}, {crit / paths:.0f} instructions per path")
    print(f"{'per path':>12} {'share':>7}  function")
    for fn, v in crit_fn.most_common(top):
        print(f"{v / paths:12.1f} {100 * v / crit:6.2f}%  {label(fn)}")


if __name__ == "__main__":
    main()
