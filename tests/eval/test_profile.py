"""profile.py (make profile's report) on a made-up run: blocks named by the right symbol,
per span and per unit of work, critical paths per path; no span, no report."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

PROFILE = pathlib.Path(__file__).with_name("profile.py")

CONSOLE = """[    1.0] boot noise
{"bench":"fault-service","faults":4,"us_per_fault":1.0}
PROFILE-KSYMS-BEGIN
ffff800080010000 T handle_mm_fault
ffff800080010400 t do_pte_missing
ffff800080020000 d some_data
ffff800090000000 t exanest_shim_stamp_ns\t[exanest_dma]
PROFILE-KSYMS-END
"""


def run(files):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            (pathlib.Path(d) / name).write_text(text)
        return subprocess.run([sys.executable, str(PROFILE), d], capture_output=True,
                              text=True, check=False)


class Profile(unittest.TestCase):
    def test_blocks_named_and_divided(self):
        spans = {
            # handle_mm_fault: 10 insns x 4 + 2 x 2 = 44; do_pte_missing 6 x 2 = 12 (its
            # block starts past the function's first address); the module 3 x 8 = 24; user 20.
            "span.1": "ffff800080010000 10 4\nffff800080010010 2 2\nffff800080010408 6 2\n"
                      "ffff800090000004 3 8\n0000aaaabbbb0000 5 4\n",
            # A second span of the same work: per-span figures are the mean.
            "span.2": "ffff800080010000 10 4\nffff800080010010 2 2\nffff800080010408 6 2\n"
                      "ffff800090000004 3 8\n0000aaaabbbb0000 5 4\n",
        }
        r = run({"console.log": CONSOLE, **spans})
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("2 span(s), instructions 100, 100; 4 faults in the last", lines[0])
        rows = {ln.split("%  ", 1)[1]: ln.split()[:2] for ln in lines[3:]}
        self.assertEqual(rows["handle_mm_fault"], ["44", "11.0"])
        self.assertEqual(rows["do_pte_missing"], ["12", "3.0"])
        self.assertEqual(rows["exanest_shim_stamp_ns [exanest_dma]"], ["24", "6.0"])
        self.assertEqual(rows["[user space]"], ["20", "5.0"])
        self.assertIn("kernel 56.0 %", lines[1])
        self.assertIn("[exanest_dma] 24.0 %", lines[1])

    def test_critical_paths_per_path(self):
        # 3 paths over two spans; crit counts: handle_mm_fault 10 x 3 + 2 x 1 = 32 and the
        # module's 3 x 2 = 6 in span 1, handle_mm_fault 10 x 1 = 10 in span 2: 48 in all.
        spans = {
            "span.1": "# paths 2\nffff800080010000 10 4 3\nffff800080010010 2 2 1\n"
                      "ffff800090000004 3 8 2\n0000aaaabbbb0000 5 4\n",
            "span.2": "# paths 1\nffff800080010000 10 4 1\nffff800090000004 3 8\n",
        }
        r = run({"console.log": CONSOLE, **spans})
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.split("critical paths", 1)
        self.assertEqual(len(out), 2, r.stdout)
        self.assertIn(": 3, 16 instructions per path", out[1].splitlines()[0])
        rows = {ln.split("%  ", 1)[1]: ln.split()[:2] for ln in out[1].splitlines()[2:]}
        self.assertEqual(rows["handle_mm_fault"], ["14.0", "87.50%"])
        self.assertEqual(rows["exanest_shim_stamp_ns [exanest_dma]"], ["2.0", "12.50%"])
        # The whole spans' table still counts every execution.
        self.assertIn("2 span(s), instructions 88, 64", r.stdout)

    def test_no_critical_path_no_table(self):
        r = run({"console.log": CONSOLE, "span.1": "# paths 0\nffff800080010000 1 1\n"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("critical paths", r.stdout)

    def test_no_span_is_an_error(self):
        r = run({"console.log": CONSOLE})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no span", r.stderr)

    def test_no_symbols_is_an_error(self):
        r = run({"console.log": '{"bench":"cpu-fault","pages":1}\n', "span.1": "ffff800080010000 1 1\n"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no kernel symbols", r.stderr)


if __name__ == "__main__":
    unittest.main()
