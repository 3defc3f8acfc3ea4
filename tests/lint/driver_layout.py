#!/usr/bin/env python3
"""Checks the driver's layout rules (issue: one concept per file), on drivers/*.rs and the
folder modules' files (drivers/<module>/*.rs, which count as their top-level module):

- no file over MAX_LINES lines;
- no import cycle among the driver's modules (`crate::name` references, tests excluded);
- every `unsafe` block or `unsafe impl` has a `// SAFETY:` comment just above it, and no
  SAFETY comment leans on another ("See above");
- the lock order is written in exactly one file (a `# Lock order` section);
- every result discarded with `let _ =` says why in a comment just above it (outside tests).

Prints one line per problem and exits 1 if there is any.
"""
import pathlib
import re
import sys

MAX_LINES = 500
TOP = pathlib.Path(__file__).resolve().parents[2]


def code_without_tests(text):
    """The file up to its KUnit module (`#[kunit_tests(...)]`)."""
    m = re.search(r"^#\[kunit_tests\(", text, re.M)
    return text[: m.start()] if m else text


def main(argv):
    drivers = pathlib.Path(argv[1]) if len(argv) > 1 else TOP / "drivers"
    files = sorted(drivers.glob("*.rs")) + sorted(drivers.glob("*/**/*.rs"))

    def module(f):
        """The top-level module a file belongs to: its own name, or its top folder's."""
        rel = f.relative_to(drivers)
        return rel.parts[0] if len(rel.parts) > 1 else f.stem

    mods = {module(f) for f in files}
    problems = []
    graph = {}
    lock_order_files = []
    for f in files:
        text = f.read_text()
        lines = text.splitlines()
        if len(lines) > MAX_LINES:
            problems.append(f"{f.relative_to(drivers)}: {len(lines)} lines (limit {MAX_LINES})")
        deps = set(re.findall(r"\bcrate::(\w+)", code_without_tests(text))) & mods
        deps.discard(module(f))
        graph.setdefault(module(f), set()).update(deps)
        if re.search(r"^//! # Lock order", text, re.M):
            lock_order_files.append(str(f.relative_to(drivers)))
        code_lines = len(code_without_tests(text).splitlines())
        for i, line in enumerate(lines):
            if re.search(r"SAFETY:.*\bSee above\b", line, re.I):
                problems.append(f"{f.relative_to(drivers)}:{i + 1}: SAFETY comment that does not stand alone")
            if re.search(r"(^|[^\w])unsafe (\{|impl\b)", line) and not line.lstrip().startswith("//"):
                # The six lines above, and the whole comment block right above the line (a long
                # SAFETY argument may start further up).
                j = i
                while j > 0 and lines[j - 1].lstrip().startswith("//"):
                    j -= 1
                above = "\n".join(lines[max(0, min(j, i - 6)): i + 1])
                if "SAFETY:" not in above:
                    problems.append(f"{f.relative_to(drivers)}:{i + 1}: unsafe without a // SAFETY: comment")
            if i < code_lines and re.match(r"\s*let _ =", line):
                # A comment line among the two lines right above (a statement's comment
                # block ends there).
                if not any(l.lstrip().startswith("//") and not l.lstrip().startswith("//!")
                           for l in lines[max(0, i - 2): i]):
                    problems.append(f"{f.relative_to(drivers)}:{i + 1}: `let _ =` without a comment saying why the result may be dropped")
    if len(lock_order_files) != 1:
        problems.append(f"the lock order is written in {len(lock_order_files)} files: {lock_order_files}")
    # Cycles: depth-first search with colours.
    colour = {m: 0 for m in graph}

    def visit(m, path):
        colour[m] = 1
        for d in sorted(graph.get(m, ())):
            if colour.get(d) == 1:
                cyc = path[path.index(d):] + [d]
                problems.append("import cycle: " + " -> ".join(cyc))
            elif colour.get(d) == 0:
                visit(d, path + [d])
        colour[m] = 2

    for m in sorted(graph):
        if colour[m] == 0:
            visit(m, [m])
    for p in problems:
        print(p)
    print(f"driver layout: {len(files)} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
