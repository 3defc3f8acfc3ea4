"""Self-tests of regmap.py: the real map passes, and each kind of drift fails."""
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import regmap  # noqa: E402

TOP = pathlib.Path(__file__).resolve().parents[2]
RST = (TOP / "Documentation/pldma-registers.rst").read_text()
REGS = (TOP / "drivers/hw/regs.rs").read_text()
NETREGS = (TOP / "drivers/hw/netregs.rs").read_text()


def check(rst=RST, regs=REGS, netregs=NETREGS):
    h = regmap.regtable.load()
    table, vf = regmap.header_registers(h)
    problems = []
    regmap.check_rst(h, table, vf, rst, problems)
    with tempfile.TemporaryDirectory() as d:
        files = []
        for name, text in (("regs.rs", regs), ("netregs.rs", netregs)):
            f = pathlib.Path(d, name)
            f.write_text(text)
            files.append(f)
        regmap.TOP, top = pathlib.Path(d), regmap.TOP
        try:
            regmap.check_driver(h, table, files, problems)
        finally:
            regmap.TOP = top
    regmap.check_field_families(h, problems)
    return problems


class RegMap(unittest.TestCase):
    def test_the_map_agrees(self):
        self.assertEqual(check(), [])

    def test_rst_offset_drift(self):
        p = check(rst=RST.replace("0x2c   FAULTS ", "0x2e   FAULTS "))
        self.assertTrue(any("FAULTS at 0x2e, the header says 0x2c" in x for x in p), p)

    def test_rst_missing_row(self):
        p = check(rst=RST.replace("0x058  MBOX_TAIL    RO", "0x058  XMBOX_TAIL   RO"))
        self.assertIn("pldma-registers.rst: no table row for the header's PLDMA_VF_MBOX_TAIL", p)

    def test_driver_offset_drift(self):
        p = check(regs=REGS.replace("CH_ORIGIN(u32)[NCH, stride = STRIDE] @ 0x1130",
                                    "CH_ORIGIN(u32)[NCH, stride = STRIDE] @ 0x1134"))
        self.assertTrue(any("CH_ORIGIN at 0x1134" in x for x in p), p)

    def test_driver_missing_register(self):
        start = NETREGS.index("    /// 2.4, write-one-to-clear")
        end = NETREGS.index("}\n", start) + 2
        p = check(netregs=NETREGS[:start] + NETREGS[end:])
        self.assertTrue(any("no register! declaration of the header's PLDMA_NET_IRQ" in x
                            for x in p), p)

    def test_field_drift_and_untyped_fields(self):
        p = check(regs=REGS.replace("29:29 net_rx => bool;", "28:28 net_rx => bool;"))
        self.assertTrue(any("field net_rx of CH_ORIGIN is 0x10000000" in x for x in p), p)
        p = check(netregs=NETREGS.replace("15:0 id;\n        16:16 link => bool;",
                                          "31:0 value;"))
        self.assertTrue(any("NET_NODE lacks the field id" in x for x in p), p)
        self.assertTrue(any("field value of NET_NODE is not in" in x for x in p), p)


if __name__ == "__main__":
    unittest.main()
