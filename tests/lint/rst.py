#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""Every reStructuredText document under Documentation/ parses: docutils reports no error
(a malformed table, a broken section, an unclosed literal), which a reader's renderer would
otherwise show as raw text or drop. Run with the linters' venv (scripts/lint-env.sh), whose
docutils is pinned. Usage: rst.py [FILE...] (default: Documentation/**/*.rst)."""

import io
import pathlib
import re
import sys

import docutils.core
import docutils.utils


def problems(path):
    """docutils' messages of level ERROR or worse for path: 'file:line: (ERROR/3) text', each
    with the first line of its detail."""
    stream = io.StringIO()
    docutils.core.publish_doctree(
        path.read_text(), source_path=str(path),
        settings_overrides={"report_level": docutils.utils.Reporter.ERROR_LEVEL,
                            "halt_level": docutils.utils.Reporter.SEVERE_LEVEL + 1,
                            "warning_stream": stream})
    lines = stream.getvalue().splitlines()
    heads = [i for i, line in enumerate(lines) if re.search(r":\d+: \((ERROR|SEVERE)/\d\)", line)]
    return [lines[i] + (f" {lines[i + 1]}" if i + 1 < len(lines) else "") for i in heads]


def main(argv):
    top = pathlib.Path(__file__).resolve().parents[2]
    files = [pathlib.Path(a) for a in argv] or sorted((top / "Documentation").rglob("*.rst"))
    bad = 0
    for f in files:
        for p in problems(f):
            print(p)
            bad += 1
    print(f"rst: {len(files)} documents, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
