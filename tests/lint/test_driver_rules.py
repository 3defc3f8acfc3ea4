"""Self-tests of driver_rules.py: each rule fails on a tree that breaks it."""
import io
import pathlib
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import driver_rules  # noqa: E402

LOCKS = "//! # Lock order\n"


def run(files):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            pathlib.Path(d, name).parent.mkdir(parents=True, exist_ok=True)
            pathlib.Path(d, name).write_text(text)
        out = io.StringIO()
        with redirect_stdout(out):
            rc = driver_rules.main(["x", d])
        return rc, out.getvalue()


class Layout(unittest.TestCase):
    def test_folder_module_files_are_checked(self):
        rc, out = run({"a.rs": LOCKS + "mod c;\n", "a/c.rs": "fn f() {\n    let _ = g();\n}\n"})
        self.assertEqual(rc, 1)
        self.assertIn("a/c.rs:2: `let _ =` without a comment", out)

    def test_clean_tree_passes(self):
        rc, out = run({"a.rs": LOCKS + "use crate::b;\n", "b.rs": "fn f() {}\n"})
        self.assertEqual(rc, 0, out)

    def test_discarded_result_needs_a_reason(self):
        rc, out = run({"a.rs": LOCKS + "fn f() {\n    let _ = g();\n}\n"})
        self.assertEqual(rc, 1)
        self.assertIn("a.rs:3: `let _ =` without a comment", out)
        ok = LOCKS + "fn f() {\n    // g fails only when nothing is left to do.\n    let _ = g();\n}\n"
        self.assertEqual(run({"a.rs": ok})[0], 0)
        tests = LOCKS + "fn f() {}\n#[kunit_tests(t)]\nmod tests { fn t() { let _ = g(); } }\n"
        self.assertEqual(run({"a.rs": tests})[0], 0)

    def test_unsafe_needs_safety(self):
        rc, out = run({"a.rs": LOCKS + "fn f() {\n    unsafe { g() };\n}\n"})
        self.assertIn("unsafe without a // SAFETY: comment", out)
        ok = LOCKS + "fn f() {\n    // SAFETY: g has no contract.\n    unsafe { g() };\n}\n"
        self.assertEqual(run({"a.rs": ok})[0], 0)

    def test_see_above(self):
        rc, out = run({"a.rs": LOCKS + "// SAFETY: See above.\nunsafe impl Send for X {}\n"})
        self.assertIn("does not stand alone", out)

    def test_lock_order_once(self):
        rc, out = run({"a.rs": LOCKS, "b.rs": LOCKS})
        self.assertIn("lock order is written in 2 files", out)
        rc, out = run({"a.rs": "fn f() {}\n"})
        self.assertIn("lock order is written in 0 files", out)


if __name__ == "__main__":
    unittest.main()
