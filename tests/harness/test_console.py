"""Self-tests of the console judge: it must catch what make check relies on it to catch."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from console import judge  # noqa: E402

# The end of a check run: the kernel log read back (tests/guest/check.sh), then init's marker.
DMESG = ["GUEST-DMESG-BEGIN\n", "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]\n",
         "GUEST-DMESG-END\n"]
DONE = DMESG + ["GUEST-DONE\n"]


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

    def assert_report(self, line, kind):
        v = judge(line.splitlines(True) + DONE)
        self.assertEqual(v.failed, 1, (line, v.problems))
        self.assertTrue(v.problems[0].startswith(kind + ": "), (kind, v.problems))

    # The formats of the pinned kernel's detectors (see REPORTS in console.py).
    def test_hung_task(self):
        self.assert_report("[  41.2] INFO: task exanest-fork:212 blocked for more than 10 seconds.", "hung task")
        self.assert_report("[  41.2] INFO: task kworker/1:2:33 blocked in I/O wait for more than 12 seconds.",
                           "hung task")
        # The lines that follow a report are not reports of their own.
        v = judge(["[  41.3] INFO: task exanest-fork:212 is blocked on a mutex likely owned by task rmmod:230.\n",
                   "[  41.3]       Not tainted 7.3.4-exanest #1\n"] + DONE)
        self.assertEqual(v.failed, 0, v.problems)

    def test_unhandled_interrupt(self):
        # kernel/irq/spurious.c, as the MMU-500's context interrupt raised it once (the model
        # routed every bank's fault to interrupt 0).
        self.assert_report('[  16.8] irq 15: nobody cared (try booting with the "irqpoll" option)',
                           "unhandled interrupt (disabled)")

    def test_soft_lockup(self):
        self.assert_report("[  30.0] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [exanest-sizes:140]",
                           "soft lockup")

    def test_hard_lockup(self):
        self.assert_report("[  30.0] watchdog: CPU0: Watchdog detected hard LOCKUP on cpu 1", "hard lockup")

    def test_rcu_stalls(self):
        for line in ["[  60.1] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:",
                     "[  60.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
                     "[  60.1] rcu: INFO: rcu_preempt self-detected stall on CPU",
                     "[  60.1] rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-... } 5254 jiffies",
                     "[  60.1] rcu: INFO: rcu_preempt detected stall, but suppressed full report due to a stuck CSD-lock.",
                     "[  60.1] rcu: INFO: rcu_sched detected expedited stalls, but suppressed full report due to a "
                     "stuck CSD-lock.",
                     "[  60.1] INFO: rcu_tasks detected stalls on tasks:"]:
            self.assert_report(line, "RCU stall")
        # RCU's boot messages are no stall.
        v = judge(["[    0.0] rcu: Hierarchical RCU implementation.\n",
                   "[    0.0] rcu: RCU calculated value of scheduler-enlistment delay is 25 jiffies.\n"] + DONE)
        self.assertEqual(v.failed, 0, v.problems)

    def test_kasan(self):
        self.assert_report("[  12.0] BUG: KASAN: slab-use-after-free in exanest_dma::region::lookup+0x1c/0x90",
                           "KASAN report")
        self.assert_report("[  12.0] KASAN: maybe wild-memory-access in range [0x0003-0x000b]", "KASAN report")

    def test_debug_objects(self):
        self.assert_report("[  20.0] ODEBUG: free active (active state 0) object: 00000000c0ffee00 object type: "
                           "work_struct hint: exanest_fault_work+0x0/0x40", "DEBUG_OBJECTS report")
        self.assert_report("[  20.0] ODEBUG: object 00000000c0ffee00 is on stack 0000000012345678, but NOT annotated.",
                           "DEBUG_OBJECTS report")
        v = judge(["[    0.3] ODEBUG: selftest passed\n"] + DONE)
        self.assertEqual(v.failed, 0, v.problems)

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
        # With the line that failed, as the test printed it.
        self.assertIn("exanest-sizes.c:70:copy_1_off0_0:Expected 0 (0) == st (-14)", v.problems[0])

    def test_failure_names_only_its_own_lines(self):
        # A line printed by a test that then passed is not another test's.
        log = HARNESS.replace("#            OK  sizes.pin.copy_1_off0_0",
                              "# exanest-sizes.c:9:copy_1_off0_0:note\n#            OK  sizes.pin.copy_1_off0_0")
        v = self.run_log(log)
        self.assertEqual(len(v.problems), 1, v.problems)
        self.assertNotIn("exanest-sizes.c:9:", v.problems[0])

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

    def test_a_kernel_message_after_a_whole_result_line(self):
        # As make check saw it: the kernel's console printed an SMMU event between a result
        # line's name and its newline. The name is the running test's, so the line counts.
        log = HARNESS.replace("ok 4 coherence.prefault.touch_ahead_window\n",
                              "ok 4 coherence.prefault.touch_ahead_window[  501.2] arm-smmu-v3 "
                              "9050000.smmuv3: unpriv data read\n\n")
        v = self.run_log(log)
        self.assertEqual((v.passed, v.failed, v.skipped), (2, 1, 1), v.problems)
        self.assertFalse(any("disagree" in p or "plan" in p for p in v.problems), v.problems)

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


# The end of a check run with its kernel log read back: the KUnit KTAP copied to the console and
# again in the dmesg block, info-level lines the console did not print.
KTAP_COPY = ["[    3.0] KTAP version 1", "[    3.0] 1..1", "[    3.0]     KTAP version 1",
             "[    3.0]     # Subtest: fq", "[    3.0]     1..2", "[    3.0]     ok 1 push_pop",
             "[    3.0]     ok 2 dedup", "[    3.0] ok 1 fq"]
BOOT = ["[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]",
        "[    0.000000] Kernel command line: console=ttyAMA0 panic=-1 oops=panic exanest.run=check",
        "[    0.000000] rcu: Hierarchical RCU implementation.", "[    0.3] ODEBUG: selftest passed"]


def check_run(console, dmesg, begin="GUEST-DMESG-BEGIN", end="GUEST-DMESG-END"):
    log = KTAP_COPY + ["GUEST-TEST: ok driver-kunit-ran"] + console
    if begin:
        log.append(begin)
    log += BOOT + KTAP_COPY + ["[    3.1] exanest_dma: loaded"] + dmesg
    if end:
        log.append(end)
    return judge([line + "\n" for line in log + ["GUEST-DONE"]])


class DmesgReadback(unittest.TestCase):
    def test_clean_block_counts_nothing_twice(self):
        v = check_run([], [])
        self.assertEqual((v.passed, v.failed, v.skipped), (3, 0, 0), v.problems)

    def test_missing_block_is_a_failure(self):
        v = check_run([], [], begin=None, end=None)
        self.assertEqual(v.failed, 1, v.problems)
        self.assertIn("without the dmesg readback", v.problems[0])
        self.assertIn("missing", v.problems[0])

    def test_unended_block_is_a_failure(self):
        v = check_run([], [], end=None)
        self.assertEqual(v.failed, 1, v.problems)
        self.assertIn("did not end", v.problems[0])
        # Without GUEST-DONE (a crash or a timeout, maybe during the readback): one failure.
        v = judge(["GUEST-TEST: ok a\n", "GUEST-DMESG-BEGIN\n", "[    0.0] Booting Linux\n"])
        self.assertEqual((v.passed, v.failed), (1, 1), v.problems)
        self.assertIn("did not reach GUEST-DONE", v.problems[0])

    def test_report_only_in_the_block(self):
        hung = "[  41.2] INFO: task exanest-fork:212 blocked for more than 10 seconds."
        v = check_run([], [hung])
        self.assertEqual(v.failed, 1, v.problems)
        self.assertEqual(v.problems[0], "hung task (in the dmesg readback): " + hung[9:])

    def test_report_on_the_console_counted_once(self):
        warn = "[  7.0] WARNING: CPU: 1 PID: 9 at drivers/x.c:1 f"
        v = check_run([warn], [warn, "[  8.0] WARNING: CPU: 0 PID: 12 at drivers/x.c:2 g"])
        self.assertEqual(v.failed, 1, v.problems)
        self.assertTrue(v.problems[0].startswith("kernel WARNING"), v.problems)

    def test_each_kind_once_from_the_block(self):
        odebug = "[  20.0] ODEBUG: free active (active state 0) object: 000000001 object type: timer_list hint: f"
        lockup = "[  30.0] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [exanest-sizes:140]"
        v = check_run(["[  7.0] WARNING: CPU: 1 PID: 9 at drivers/x.c:1 f"], [odebug, odebug, lockup, lockup])
        self.assertEqual(v.failed, 3, v.problems)
        for p, start in zip(v.problems, ["kernel WARNING (or lockdep): ", "DEBUG_OBJECTS report (in the dmesg",
                                         "soft lockup (in the dmesg"]):
            self.assertTrue(p.startswith(start), v.problems)


if __name__ == "__main__":
    unittest.main()


class ReportsOnly(unittest.TestCase):
    """make run-prog: a program's own output is not judged, the kernel's reports are."""

    def run_main(self, lines):
        import subprocess
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.writelines(lines)
        try:
            r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "console.py"),
                                f.name, "--reports-only"], capture_output=True, text=True)
        finally:
            os.unlink(f.name)
        return r.returncode, r.stdout.splitlines()

    def test_a_failed_test_line_is_not_a_report(self):
        rc, out = self.run_main(["GUEST-TEST: not ok mine - the program's own\n"] + DONE)
        self.assertEqual((rc, out[-1]), (0, "run-prog: kernel log: no kernel report(s)"))

    def test_a_warning_is(self):
        rc, out = self.run_main(["[ 3.1] WARNING: CPU: 1 PID: 77 at mm/gup.c:12 foo\n"] + DONE)
        self.assertEqual((rc, out[-1]), (1, "run-prog: kernel log: 1 kernel report(s)"))

    def test_a_crash_is(self):
        rc, out = self.run_main(["hello\n"])
        self.assertEqual(rc, 1, out)
