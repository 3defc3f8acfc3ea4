#!/usr/bin/env python3
"""Checks the kernel module's stack frames (the kernel stack is 16 KiB without KASAN).

The probe path runs deep below the driver's own frames (dma_alloc, the IOMMU's page table
allocation, the page allocator), so no driver function may reserve more than LIMIT bytes of
stack, except the ones listed in ALLOWED, which return before the path goes deeper (they build a
large value, then move it to the heap). Frames are read from the module's code: the sum of the
immediates of its `sub sp, sp, #N` instructions (arm64), per function. KUnit wrappers run in
the KUnit thread with nothing deep below them, but an interrupt's entry saves its registers on
the thread's stack before it switches to the IRQ stack: they may reserve KUNIT_LIMIT bytes (a
test that kept a 7.5 KiB region table on its stack twice, 15 KiB, overflowed the evaluation
kernel's stack when an interrupt came). Test code is a function of a `tests` module.

A KASAN kernel has twice the stack (32 KiB) and larger frames: `--kunit-limit` says what the
tests may reserve there.

A regression test for the stack overflow at insmod of commit 3bd4463 on the evaluation kernel:
EngineDevices::new reserved 11.4 KiB there, because Contexts::new was inlined into it.

Usage: stack_frames.py MODULE.ko [OBJDUMP] [--kunit-limit BYTES]
"""
import re
import subprocess
import sys

LIMIT = 4096
KUNIT_LIMIT = 8192
ALLOWED = {
    # Writes the context pool (~5.5 KiB, built on the stack first) into a box allocated by its
    # caller; #[inline(never)], calls only memcpy. (Contexts::new, which built it and then
    # called kmalloc below that frame, overflowed the evaluation kernel's stack at insmod once
    # EngineDevices::new grew by 512 bytes: the allocator's own path ran under 11 KiB.)
    "8contexts9fill_pool",
    # Writes a process's region table (~7.5 KiB, built on the stack first) into a box allocated
    # by its caller; #[inline(never)], calls only memcpy. (Process::alloc built it in its 8.5 KiB
    # frame, under which it allocated and started the fault thread: now 2.3 KiB.)
    "7process12fill_regions",
    # Builds the rest of a process's state in place: 2.3 KiB on the evaluation kernel, 10 KiB
    # under KASAN (redzones; its stacks are 32 KiB); #[inline(never)], so its frame is gone
    # before its caller allocates the IOMMU domain.
    "Process5alloc",
}


def frames(ko, objdump):
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", ko], check=True,
                         capture_output=True, text=True).stdout
    fn, tot = None, {}
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            fn = m.group(1)
            tot[fn] = 0
            continue
        m = re.search(r"\bsub\s+sp, sp, #(0x[0-9a-f]+|\d+)(, lsl #12)?", line)
        if m and fn:
            v = int(m.group(1), 0)
            tot[fn] += v * 4096 if m.group(2) else v
    return tot


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    args = list(argv[1:])
    kunit_limit = KUNIT_LIMIT
    if "--kunit-limit" in args:
        i = args.index("--kunit-limit")
        kunit_limit = int(args[i + 1])
        del args[i:i + 2]
    argv = [argv[0]] + args
    objdump = argv[2] if len(argv) > 2 else "llvm-objdump-19"
    limit = lambda f: kunit_limit if "kunit" in f or "5tests" in f else LIMIT
    bad = [(n, f) for f, n in frames(argv[1], objdump).items()
           if n > limit(f) and not any(a in f for a in ALLOWED)]
    for n, f in sorted(bad, reverse=True):
        print(f"{f}: {n} bytes of stack (limit {limit(f)})")
    print(f"stack frames: {len(bad)} over {LIMIT} bytes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
