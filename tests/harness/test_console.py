"""Self-tests of the console judge: it must catch what make check relies on it to catch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from console import judge  # noqa: E402

DONE = ["GUEST-DONE\n"]


class Judge(unittest.TestCase):
    def test_counts_guest_tests(self):
        p, f, probs = judge(["[    1.0] GUEST-TEST: ok a\n", "GUEST-TEST: not ok b - why\n", "GUEST-TEST: ok c\n"] + DONE)
        self.assertEqual((p, f), (2, 1))
        self.assertIn("not ok b - why", probs)

    def test_missing_done_is_a_failure(self):
        self.assertEqual(judge(["GUEST-TEST: ok a\n"])[:2], (1, 1))

    def test_kernel_reports(self):
        for line in ["[   12.5] Unable to handle kernel paging request; Internal error: Oops: 96000004",
                     "------------[ cut here ]------------\n[ 3.1] WARNING: CPU: 1 PID: 77 at mm/gup.c:12 foo",
                     "BUG: sleeping function called from invalid context at mm/memory.c:1",
                     "WARNING: possible circular locking dependency detected",
                     "BUG: KASAN: slab-use-after-free in bar",
                     "Kernel panic - not syncing: Fatal exception"]:
            p, f, _ = judge(line.splitlines(True) + DONE)
            self.assertGreaterEqual(f, 1, line)

    def test_ktap_cases(self):
        log = ["KTAP version 1", "1..2", "    KTAP version 1", "    # Subtest: fq", "    1..2",
               "    ok 1 push_pop", "    not ok 2 dedup", "not ok 1 fq",
               "    KTAP version 1", "    1..1", "    ok 1 plan # SKIP no hw", "ok 2 ta"] + DONE
        p, f, probs = judge([line + "\n" for line in log])
        self.assertEqual((p, f), (1, 1))
        self.assertTrue(any("dedup" in x for x in probs))

    def test_clean_boot_log(self):
        log = ["[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]",
               "[    0.1] MAX_LOCKDEP_SUBCLASSES:  8", "[    0.2] Lock dependency validator: Copyright (c) 2006 Red Hat",
               "GUEST-TEST: ok x"] + DONE
        self.assertEqual(judge([line + "\n" for line in log])[:2], (1, 0))


if __name__ == "__main__":
    unittest.main()
