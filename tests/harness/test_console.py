"""Self-tests of the console judge: it must catch what make check relies on it to catch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from console import judge  # noqa: E402

DONE = ["GUEST-DONE\n"]


class Judge(unittest.TestCase):
    def test_counts_guest_tests(self):
        p, f, probs, _ = judge(["[    1.0] GUEST-TEST: ok a\n", "GUEST-TEST: not ok b - why\n", "GUEST-TEST: ok c\n"] + DONE)
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
            f = judge(line.splitlines(True) + DONE).failed
            self.assertGreaterEqual(f, 1, line)

    def test_ktap_cases(self):
        log = ["KTAP version 1", "1..2", "    KTAP version 1", "    # Subtest: fq", "    1..2",
               "    ok 1 push_pop", "    not ok 2 dedup", "not ok 1 fq",
               "    KTAP version 1", "    1..1", "    ok 1 plan # SKIP no hw", "ok 2 ta"] + DONE
        v = judge([line + "\n" for line in log])
        self.assertEqual((v.passed, v.failed, v.skipped), (1, 1, 1))
        self.assertTrue(any("dedup" in x for x in v.problems))

    def test_clean_boot_log(self):
        log = ["[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]",
               "[    0.1] MAX_LOCKDEP_SUBCLASSES:  8", "[    0.2] Lock dependency validator: Copyright (c) 2006 Red Hat",
               "GUEST-TEST: ok x"] + DONE
        self.assertEqual(judge([line + "\n" for line in log])[:2], (1, 0))


# kselftest-harness output as a test binary prints it on the console (stdout and stderr mixed).
HARNESS = """TAP version 13
1..4
# Starting 4 tests from 3 test cases.
#  RUN           sizes.pin.copy_1_off0_0 ...
#            OK  sizes.pin.copy_1_off0_0
ok 1 sizes.pin.copy_1_off0_0
#  RUN           sizes.on_demand.copy_1_off0_0 ...
# exanest-sizes.c:70:copy_1_off0_0:Expected 0 (0) == st (-14)
# copy_1_off0_0: Test failed
#          FAIL  sizes.on_demand.copy_1_off0_0
not ok 2 sizes.on_demand.copy_1_off0_0
#  RUN           coherence.pin.touch_ahead_window ...
#      SKIP      pin mode maps at registration: the engine takes no fault
#            OK  coherence.pin.touch_ahead_window
ok 3 coherence.pin.touch_ahead_window # SKIP pin mode maps at registration: the engine takes no fault
#  RUN           coherence.prefault.touch_ahead_window ...
#            OK  coherence.prefault.touch_ahead_window
ok 4 coherence.prefault.touch_ahead_window
# FAILED: 3 / 4 tests passed.
# Totals: pass:2 fail:1 xfail:0 xpass:0 skip:1 error:0
"""


class Harness(unittest.TestCase):
    def run_log(self, text):
        return judge(text.splitlines(True) + DONE)

    def test_counts_pass_fail_skip(self):
        v = self.run_log(HARNESS)
        self.assertEqual((v.passed, v.failed, v.skipped), (2, 1, 1), v.problems)
        self.assertEqual(len(v.problems), 1)
        self.assertIn("not ok 2 sizes.on_demand.copy_1_off0_0", v.problems[0])

    def test_skip_is_not_a_pass(self):
        log = "TAP version 13\n1..1\nok 1 f.pin.t # SKIP not in this mode\n# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:1 error:0\n"
        v = self.run_log(log)
        self.assertEqual((v.passed, v.failed, v.skipped), (0, 0, 1))

    def test_all_passing_run(self):
        log = HARNESS.replace("not ok 2", "ok 2").replace("pass:2 fail:1", "pass:3 fail:0")
        v = self.run_log(log)
        self.assertEqual((v.passed, v.failed, v.skipped), (3, 0, 1), v.problems)

    def test_missing_totals_is_a_failure(self):
        log = HARNESS.split("# FAILED")[0].replace("not ok 2", "ok 2")
        v = self.run_log(log)
        self.assertEqual((v.passed, v.failed), (3, 1))
        self.assertIn("Totals", v.problems[0])

    def test_lost_line_is_a_failure(self):
        # A kernel message that split a result line: the line no longer parses, the totals and
        # the plan disagree with what was counted.
        log = HARNESS.replace("ok 4 coherence", "ok 4 cohe[  5.1] smmu: x\nrence").replace("not ok 2", "ok 2")
        log = log.replace("pass:2 fail:1", "pass:3 fail:0")
        v = self.run_log(log)
        self.assertGreaterEqual(v.failed, 1)
        self.assertTrue(any("disagree" in p for p in v.problems), v.problems)

    def test_no_double_count_with_ktap(self):
        # KUnit's KTAP (from dmesg, time-stamped) then two harness runs: each result once.
        log = ["[    3.0] KTAP version 1", "[    3.0] 1..1", "[    3.0]     KTAP version 1",
               "[    3.0]     # Subtest: fq", "[    3.0]     1..2", "[    3.0]     ok 1 push_pop",
               "[    3.0]     ok 2 dedup", "[    3.0]     # Totals: pass:2 fail:0 skip:0 total:2",
               "[    3.0] ok 1 fq", "GUEST-TEST: ok driver-kunit-ran"]
        log += HARNESS.replace("not ok 2", "ok 2").replace("pass:2 fail:1", "pass:3 fail:0").splitlines()
        log += ["TAP version 13", "1..1", "[   9.9] some kernel line", "ok 1 fork.pin.t",
                "# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0"]
        v = judge([line + "\n" for line in log] + DONE)
        self.assertEqual((v.passed, v.failed, v.skipped), (2 + 1 + 3 + 1, 0, 1), v.problems)

    def test_kernel_report_inside_a_run(self):
        log = HARNESS.replace("# FAILED", "[  7.0] WARNING: CPU: 1 PID: 9 at drivers/x.c:1 f\n# FAILED")
        v = self.run_log(log)
        self.assertTrue(any("WARNING" in p for p in v.problems), v.problems)


if __name__ == "__main__":
    unittest.main()
