#!/usr/bin/env python3
"""The PLDMA register table, generated from include/hw/exanest-pldma-regs.h by the C compiler.

The header is the single source of the register map: the QEMU model is compiled with it, the
Rust map is checked against it (rust/exanest-core/tests/c_header.rs), and this module turns it
into a Python table without interpreting any C: it lists the header's macro names, writes a C
program that prints each one's value, and lets the compiler (``$CC``, default ``cc``) evaluate
them. A macro that is not an integer constant fails the compilation. Values are signed (the CQE
status codes are negative).

Usage: regtable.py [OUT.json]   print (or write) the table as JSON
       import regtable; R = regtable.load()
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HEADER = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "../../include/hw/exanest-pldma-regs.h"))


def names(header=HEADER):
    """Every object-like PLDMA_ macro the header defines, in order."""
    out = []
    with open(header, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*#\s*define\s+(PLDMA_\w+)\s", line)
            if m:
                out.append(m.group(1))
    return out


def generate(header=HEADER):
    """{name: value} for every PLDMA_ macro, as the C compiler evaluates it."""
    macros = names(header)
    if not macros:
        raise RuntimeError(f"{header}: no PLDMA_ definitions")
    prog = ["#include <stdio.h>", f'#include "{header}"', "int main(void)", "{"]
    prog += [f'\tprintf("%s %lld\\n", "{n}", (long long)({n}));' for n in macros]
    prog += ["\treturn 0;", "}"]
    with tempfile.TemporaryDirectory(prefix="pldma-regtable-") as d:
        src, exe = os.path.join(d, "regtable.c"), os.path.join(d, "regtable")
        with open(src, "w", encoding="utf-8") as f:
            f.write("\n".join(prog) + "\n")
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-o", exe, src], check=True)
        text = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    table = {}
    for line in text.splitlines():
        name, value = line.split()
        table[name] = int(value)
    return table


_cache = None


def load():
    """The table, generated once per process."""
    global _cache
    if _cache is None:
        _cache = generate()
    return _cache


if __name__ == "__main__":
    out = json.dumps(generate(), indent=1) + "\n"
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(out)
    else:
        sys.stdout.write(out)
