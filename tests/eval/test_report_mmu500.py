# SPDX-License-Identifier: GPL-2.0-only OR MIT
"""report.py's MMU-500 part of make evaluate: the QFDB machine's boot, tagged {"platform":
"mmu500"} by scripts/evaluate.sh, kept apart from the SMMUv3 runs and shown beside them."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import report  # noqa: E402


def fs(total_p50, from_irq_p50, per_fault):
    st = {"n": 2048, "p50": 0, "p90": 0, "p99": 0, "max": 0}
    stages = {"total": dict(st, p50=total_p50, p90=total_p50, p99=2 * total_p50, max=3 * total_p50),
              "from_irq": dict(st, p50=from_irq_p50, p90=from_irq_p50, p99=2 * from_irq_p50,
                               max=3 * from_irq_p50)}
    return {"bench": "fault-service", "us_per_fault": per_fault, "log": {"stages": stages}}


class Mmu500(unittest.TestCase):
    def setUp(self):
        lines = [{"engine": "exanest-dma0"}]
        for i, (v3, v2) in enumerate([(4000, 6000), (4100, 6100), (3900, 5900)]):
            lines += [{"run": i + 1}, fs(v3, v3, 6.9), {"bench": "cpu-fault", "us_per_fault": 2.0}]
            lines += [dict({"platform": "mmu500"}, **o) for o in
                      ({"run": i + 1}, fs(v2, v2 - 500, 9.1),
                       {"bench": "cpu-fault", "us_per_fault": 2.5})]
        self.tmp = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        self.tmp.write("".join(json.dumps(o) + "\n" for o in lines))
        self.tmp.close()

    def tearDown(self):
        os.unlink(self.tmp.name)

    def test_platform_lines_stay_apart(self):
        runs, mruns = report.load(self.tmp.name), report.load(self.tmp.name, "mmu500")
        self.assertEqual((len(runs), len(mruns)), (3, 3))
        self.assertEqual(report.fault_stage(runs, "total", "p50"), 4.0)
        self.assertEqual(report.fault_stage(mruns, "total", "p50"), 6.0)
        self.assertEqual(report.fault_stage(mruns, "from_irq", "p50"), 5.5)
        self.assertTrue(all("platform" not in o for run in runs for o in run))

    def test_section_shows_both_machines(self):
        out = []
        runs, mruns = report.load(self.tmp.name), report.load(self.tmp.name, "mmu500")
        stages = [("total", "whole service"), ("from_irq", "engine interrupt to RESUME written"),
                  ("report", "SMMU report to engine interrupt")]
        report.mmu500_section(out.append, runs, mruns, stages, lambda v: "-" if v is None else f"{v:.2f}")
        text = "".join(out)
        self.assertIn("Fault service on the MMU-500", text)
        row = next(line for line in text.splitlines() if line.startswith("*total*:"))
        self.assertEqual(row.split()[-4:], ["4.00", "6.00", "8.00", "12.00"])
        row = next(line for line in text.splitlines() if "against the CPU fault" in line)
        self.assertEqual(row.split()[-4:], ["2.00", "x", "2.20", "x"])
        self.assertFalse(any(line.startswith("*report*:") for line in text.splitlines()),
                         "a stage neither machine logged is left out")

    def test_no_section_without_the_boot(self):
        out = []
        report.mmu500_section(out.append, report.load(self.tmp.name), [], [], str)
        self.assertEqual(out, [])


if __name__ == "__main__":
    unittest.main()
