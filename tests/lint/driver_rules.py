#!/usr/bin/env python3
"""Checks the driver's source rules that the compiler does not, on every Rust file under drivers/
(the module boundaries are the compiler's: folder modules with private fields):

- every `unsafe` block or `unsafe impl` has a `// SAFETY:` comment just above it, and no
  SAFETY comment leans on another ("See above");
- the lock order is written in exactly one file (a `# Lock order` section);
- every result discarded with `let _ =` says why in a comment just above it (outside tests).

Prints one line per problem and exits 1 if there is any.
"""
import pathlib
import re
import sys

TOP = pathlib.Path(__file__).resolve().parents[2]


def code_without_tests(text):
    """The file up to its KUnit module (`#[kunit_tests(...)]`)."""
    m = re.search(r"^#\[kunit_tests\(", text, re.M)
    return text[: m.start()] if m else text


def main(argv):
    drivers = pathlib.Path(argv[1]) if len(argv) > 1 else TOP / "drivers"
    files = sorted(drivers.glob("*.rs")) + sorted(drivers.glob("*/**/*.rs"))
    problems = []
    lock_order_files = []
    for f in files:
        text = f.read_text()
        lines = text.splitlines()
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
    for p in problems:
        print(p)
    print(f"driver rules: {len(files)} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
