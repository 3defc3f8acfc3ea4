#!/usr/bin/env python3
"""Host tests of the PLDMA engine model, driven through QEMU's qtest protocol.

No guest kernel runs: the test plays the guest, assigns BAR0 through ECAM, puts data in guest RAM
and advances the virtual clock itself, so copy results and timing are exact. The SMMU is left
disabled (bypass), so IOVA = guest physical address; an address outside RAM stands in for an
untranslatable one. Fault reporting through the SMMU itself is checked in the guest
(tests/guest/pldma-probe.c).

QEMU is started and spoken to by QEMU's own Python test machinery (qemu.machine.QEMUQtestMachine,
from the python/ directory of the pinned QEMU source that scripts/build-qemu.sh built). Register
offsets and values come from one table that the C compiler generates from the header the model
is compiled with (regtable.py).

Usage: QEMU=/path/to/qemu-system-aarch64 test_model.py [-v]
       (QEMU_PYTHON=/path/to/qemu/src/python when the binary is not in scripts/build-qemu.sh's
       cache layout, <dir>/build/qemu-system-aarch64 next to <dir>/src)
"""
import base64
import os
import random
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import regtable  # noqa: E402

QEMU = os.environ.get("QEMU")
QEMU_PYTHON = os.environ.get("QEMU_PYTHON") or (
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(QEMU))), "src", "python")
    if QEMU else None)
if QEMU_PYTHON:
    sys.path.insert(0, QEMU_PYTHON)
try:
    from qemu.machine import QEMUQtestMachine
    from qemu.machine.machine import VMLaunchFailure
except ImportError as e:
    QEMUQtestMachine = None
    IMPORT_ERROR = f"QEMU's python package not found in {QEMU_PYTHON}: {e}"

R = regtable.load()
RAM = 0x40000000
RAM_SIZE = 256 << 20
BAR = 0x10000000
SLOT = 4
UNMAPPED = RAM + RAM_SIZE  # first byte past RAM: no memory there


def machine(args):
    """A QEMUQtestMachine for the virt board with the SMMUv3, not launched yet."""
    if not QEMU:
        raise unittest.SkipTest("QEMU not set")
    if QEMUQtestMachine is None:
        raise RuntimeError(IMPORT_ERROR)
    # The machine makes (and on shutdown removes) its own directory for sockets and its log.
    return QEMUQtestMachine(QEMU, base_temp_dir=tempfile.gettempdir(), args=[
        "-machine", "virt,iommu=smmuv3", "-cpu", "max", "-nodefaults", "-nic", "none",
        "-m", f"{RAM_SIZE >> 20}M", *args])


class Qtest:
    def __init__(self, props="", extra=()):
        dev = f"exanest-pldma,addr={SLOT:#x}" + (f",{props}" if props else "")
        self.vm = machine(["-device", dev, *extra])
        self.vm.launch()
        self.ecam = self._find_ecam()
        self.cfg_write(0x10, BAR)            # BAR0
        self.cfg_write(0x04, 0x0006)         # memory decoding + bus mastering

    def close(self):
        self.vm.shutdown()

    def alive(self):
        return self.vm.is_running()

    def cmd(self, line, accept_fail=False):
        resp = self.vm.qtest(line)
        if not resp:
            raise RuntimeError(f"QEMU closed the qtest socket after '{line[:60]}'")
        resp = resp.rstrip("\n")
        if accept_fail and resp.startswith("FAIL "):
            return resp[5:]
        if not resp.startswith("OK"):
            raise RuntimeError(f"qtest '{line[:60]}' -> {resp}")
        return resp[3:]

    # Guest physical accesses
    def readl(self, addr):
        return int(self.cmd(f"readl {addr:#x}"), 16)

    def writel(self, addr, val):
        self.cmd(f"writel {addr:#x} {val & 0xffffffff:#x}")

    def writeq(self, addr, val):
        self.cmd(f"writeq {addr:#x} {val & (2**64 - 1):#x}")

    def mem_write(self, addr, data):
        for off in range(0, len(data), 1 << 20):
            part = data[off:off + (1 << 20)]
            self.cmd(f"b64write {addr + off:#x} {len(part):#x} {base64.b64encode(part).decode()}")

    def mem_read(self, addr, size):
        out = b""
        for off in range(0, size, 1 << 20):
            n = min(1 << 20, size - off)
            out += base64.b64decode(self.cmd(f"b64read {addr + off:#x} {n:#x}"))
        return out

    def step(self, ns=None):
        return int(self.cmd(f"clock_step {ns}" if ns is not None else "clock_step"))

    def now(self):
        # "clock_set 0" never moves the clock back; it answers with the current time.
        return int(self.cmd("clock_set 0", accept_fail=True))

    # PCI config space through ECAM
    def _find_ecam(self):
        for base in (0x4010000000, 0x3F000000):
            if self.readl(base + (SLOT << 15)) == R["PLDMA_PCI_DEVICE_ID"] << 16 | R["PLDMA_PCI_VENDOR_ID"]:
                return base + (SLOT << 15)
        raise RuntimeError("engine not found in ECAM")

    def cfg_write(self, off, val):
        self.writel(self.ecam + off, val)

    def cfg_read(self, off):
        return self.readl(self.ecam + off)

    # Engine registers
    def reg(self, off):
        return self.readl(BAR + off)

    def set_reg(self, off, val):
        self.writel(BAR + off, val)

    def chreg(self, n, off):
        return self.reg(R["PLDMA_CH_BASE"] + n * R["PLDMA_CH_STRIDE"] + off)

    def set_chreg(self, n, off, val):
        self.set_reg(R["PLDMA_CH_BASE"] + n * R["PLDMA_CH_STRIDE"] + off, val)

    def program(self, n, src, dst, length, ctrl=None):
        self.set_chreg(n, R["PLDMA_CH_SRC_LO"], src)
        self.set_chreg(n, R["PLDMA_CH_SRC_HI"], src >> 32)
        self.set_chreg(n, R["PLDMA_CH_DST_LO"], dst)
        self.set_chreg(n, R["PLDMA_CH_DST_HI"], dst >> 32)
        self.set_chreg(n, R["PLDMA_CH_LEN"], length)
        if ctrl is not None:
            self.set_chreg(n, R["PLDMA_CH_CTRL"], ctrl)

    def status(self, n):
        st = self.chreg(n, R["PLDMA_CH_STATUS"])
        return (st & R["PLDMA_STATUS_STATE_MASK"],
                (st & R["PLDMA_STATUS_ERR_MASK"]) >> R["PLDMA_STATUS_ERR_SHIFT"],
                bool(st & R["PLDMA_STATUS_REJECTED"]))

    def run_until_settled(self, n, limit_ns=10**10):
        """Advance virtual time to each pending timer until channel n leaves BUSY."""
        start = self.now()
        while self.status(n)[0] == R["PLDMA_STATE_BUSY"]:
            t = self.step()
            if t - start > limit_ns:
                raise AssertionError(f"channel {n} still busy after {limit_ns} ns")
        return self.now() - start


class ModelTest(unittest.TestCase):
    props = "bandwidth=1000,latency-ns=5000"

    @classmethod
    def setUpClass(cls):
        cls.q = Qtest(cls.props)

    @classmethod
    def tearDownClass(cls):
        cls.q.close()

    def setUp(self):
        self.q.set_reg(R["PLDMA_RESET"], R["PLDMA_RESET_MAGIC"])
        self.q.set_reg(R["PLDMA_IRQ_STATUS"], 0xFFFFFFFF)

    def tearDown(self):
        self.assertTrue(self.q.alive(), "QEMU died")

    def copy(self, n, src, dst, length, ctrl=R["PLDMA_CTRL_START"]):
        self.q.program(n, src, dst, length, ctrl)
        return self.q.run_until_settled(n)


class Identity(ModelTest):
    def test_id_version_caps(self):
        q = self.q
        self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])
        self.assertEqual(q.reg(R["PLDMA_VERSION"]), R["PLDMA_VERSION_MAJOR"] << 16 | R["PLDMA_VERSION_MINOR"])
        caps = q.reg(R["PLDMA_CAPS"])
        self.assertEqual(caps & R["PLDMA_CAPS_NCHAN_MASK"], 4)
        for bit in ("PLDMA_CAPS_RESUME", "PLDMA_CAPS_INTX", "PLDMA_CAPS_TIMING"):
            self.assertTrue(caps & R[bit], bit)
        self.assertEqual(q.reg(R["PLDMA_BANDWIDTH"]), 1000)
        self.assertEqual(q.reg(R["PLDMA_LATENCY"]), 5000)
        self.assertEqual(q.reg(R["PLDMA_MAX_LEN"]), 1 << 30)

    def test_intx_pin(self):
        self.assertEqual((self.q.cfg_read(0x3C) >> 8) & 0xFF, 1, "interrupt pin INTA")


class Copy(ModelTest):
    def test_sizes_and_alignments(self):
        q = self.q
        rnd = random.Random(1)
        for length in (1, 3, 4095, 4096, 4097, 65535, 65536, 65537, (1 << 20) + 3):
            for so, do in ((0, 0), (1, 7), (4093, 5)):
                src, dst = RAM + 0x100000 + so, RAM + 0x800000 + do
                data = rnd.randbytes(length)
                q.mem_write(src, data)
                q.mem_write(dst - 1, b"\xAA")
                q.mem_write(dst + length, b"\xBB")
                self.copy(0, src, dst, length)
                st = q.status(0)
                self.assertEqual(st[0], R["PLDMA_STATE_DONE"], f"len {length} off {so}/{do}: {st}")
                self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"]), length)
                got = q.mem_read(dst - 1, length + 2)
                self.assertEqual(got[1:-1], data, f"len {length} off {so}/{do}: data differs")
                self.assertEqual((got[0], got[-1]), (0xAA, 0xBB), "wrote outside the destination")

    def test_all_channels_at_once(self):
        q = self.q
        bufs = []
        for n in range(4):
            data = bytes([n + 1]) * 200000
            src, dst = RAM + 0x1000000 + n * 0x100000, RAM + 0x2000000 + n * 0x100000
            q.mem_write(src, data)
            q.program(n, src, dst, len(data), R["PLDMA_CTRL_START"])
            bufs.append((dst, data))
        for n in range(4):
            q.run_until_settled(n)
            self.assertEqual(q.status(n)[0], R["PLDMA_STATE_DONE"])
        for dst, data in bufs:
            self.assertEqual(q.mem_read(dst, len(data)), data)

    def test_registers_latched_at_start(self):
        q = self.q
        data = os.urandom(300000)
        src, dst = RAM + 0x3000000, RAM + 0x3800000
        q.mem_write(src, data)
        q.program(1, src, dst, len(data), R["PLDMA_CTRL_START"])
        q.step()  # latency over, first quantum copied
        q.program(1, UNMAPPED, UNMAPPED + 0x100000, 7)  # reprogram while busy
        q.run_until_settled(1)
        self.assertEqual(q.status(1)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(dst, len(data)), data)
        self.assertEqual(q.chreg(1, R["PLDMA_CH_LEN"]), 7, "programmed value reads back")


class Faults(ModelTest):
    def test_fault_mid_transfer_latches_exact_place(self):
        q = self.q
        # The source runs off the end of RAM: 3 pages copy, then the 4th faults.
        src = UNMAPPED - 3 * 4096 - 100
        dst = RAM + 0x4000000
        q.mem_write(src, bytes(range(256)) * 48 + bytes(100))
        q.program(2, src, dst, 5 * 4096, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"])
        q.run_until_settled(2)
        state, err, _ = q.status(2)
        self.assertEqual(state, R["PLDMA_STATE_FAULT"])
        fa = q.chreg(2, R["PLDMA_CH_FAULT_LO"]) | q.chreg(2, R["PLDMA_CH_FAULT_HI"]) << 32
        self.assertEqual(fa, UNMAPPED)
        info = q.chreg(2, R["PLDMA_CH_FAULT_INFO"])
        self.assertEqual(info & R["PLDMA_FAULT_WRITE"], 0, "a source fault is a read")
        self.assertEqual(q.chreg(2, R["PLDMA_CH_DONE_BYTES"]), UNMAPPED - src)
        self.assertEqual(q.mem_read(dst, UNMAPPED - src), q.mem_read(src, UNMAPPED - src))
        self.assertEqual(q.reg(R["PLDMA_IRQ_STATUS"]), 1 << 2)
        # Resume without a mapping: faults again at the same place, counts a second fault.
        q.set_chreg(2, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"] | R["PLDMA_CTRL_IRQ_EN"])
        self.assertEqual(q.status(2)[0], R["PLDMA_STATE_BUSY"])
        q.run_until_settled(2)
        self.assertEqual(q.status(2)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.chreg(2, R["PLDMA_CH_FAULTS"]), 2)
        q.set_chreg(2, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"])
        self.assertEqual(q.status(2)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_ABORTED"]))

    def test_destination_fault_is_a_write(self):
        q = self.q
        dst = UNMAPPED - 4096
        q.program(0, RAM, dst, 3 * 4096, R["PLDMA_CTRL_START"])
        q.run_until_settled(0)
        self.assertEqual(q.status(0)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.chreg(0, R["PLDMA_CH_FAULT_INFO"]) & R["PLDMA_FAULT_WRITE"], 1)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_FAULT_LO"]), UNMAPPED & 0xFFFFFFFF)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"]), 4096)

    def test_fault_stalls_only_its_channel(self):
        q = self.q
        data = os.urandom(500000)
        src, dst = RAM + 0x5000000, RAM + 0x5800000
        q.mem_write(src, data)
        q.program(0, UNMAPPED + 0x10000, RAM, 4096, R["PLDMA_CTRL_START"])
        q.program(3, src, dst, len(data), R["PLDMA_CTRL_START"])
        q.run_until_settled(3)
        self.assertEqual(q.status(0)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.status(3)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(dst, len(data)), data)

    def test_nack_while_busy_stops_copying(self):
        q = self.q
        src, dst = RAM + 0x6000000, RAM + 0x6800000
        q.mem_write(src, b"\x55" * (1 << 20))
        q.mem_write(dst, b"\x00" * (1 << 20))
        q.program(1, src, dst, 1 << 20, R["PLDMA_CTRL_START"])
        q.step()
        q.step()
        q.set_chreg(1, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"])
        done = q.chreg(1, R["PLDMA_CH_DONE_BYTES"])
        self.assertTrue(0 < done < 1 << 20, done)
        q.step(10**8)
        self.assertEqual(q.chreg(1, R["PLDMA_CH_DONE_BYTES"]), done)
        self.assertEqual(q.mem_read(dst + done, 4096), bytes(4096), "copied after NACK")

    def test_no_bus_master(self):
        q = self.q
        q.cfg_write(0x04, 0x0002)
        try:
            q.program(0, RAM, RAM + 0x100000, 4096, R["PLDMA_CTRL_START"])
            self.assertEqual(q.status(0)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_NO_MASTER"]))
        finally:
            q.cfg_write(0x04, 0x0006)


class BadInput(ModelTest):
    def start(self, src, dst, length):
        self.q.program(0, src, dst, length, R["PLDMA_CTRL_START"])
        return self.q.status(0)

    def test_rejections(self):
        E = R
        self.assertEqual(self.start(RAM, RAM + 0x100000, 0)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_LEN"]))
        self.assertEqual(self.start(RAM, RAM + 0x100000, (1 << 30) + 1)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_LEN"]))
        self.assertEqual(self.start(2**64 - 100, RAM, 4096)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_ADDR"]))
        self.assertEqual(self.start(RAM, 2**64 - 1, 2)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_ADDR"]))
        self.assertEqual(self.start(RAM, RAM + 10, 4096)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_OVERLAP"]))
        self.assertEqual(self.start(RAM + 10, RAM, 4096)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_OVERLAP"]))

    def test_commands_in_wrong_state(self):
        q = self.q
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"])
        self.assertEqual(q.status(0), (R["PLDMA_STATE_IDLE"], 0, True))
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"])
        self.assertEqual(q.status(0), (R["PLDMA_STATE_IDLE"], 0, False), "NACK when idle is a no-op")
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_RESUME"])
        self.assertEqual(q.status(0), (R["PLDMA_STATE_IDLE"], 0, True))
        q.program(0, RAM, RAM + 0x100000, 1 << 20, R["PLDMA_CTRL_START"])
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_START"])
        self.assertEqual(q.status(0), (R["PLDMA_STATE_BUSY"], 0, True), "START while busy")
        q.run_until_settled(0)
        self.assertEqual(q.status(0)[0], R["PLDMA_STATE_DONE"])

    def test_64bit_access_splits(self):
        q = self.q
        q.writeq(BAR + R["PLDMA_CH_BASE"] + R["PLDMA_CH_SRC_LO"], 0x1122334455667788)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_SRC_LO"]), 0x55667788)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_SRC_HI"]), 0x11223344)

    def test_random_register_programming(self):
        """Random writes anywhere in the window with time passing: QEMU survives, state stays sane."""
        q = self.q
        rnd = random.Random(7)
        interesting = [0, 1, 4096, 2**32 - 1, RAM, RAM + 0x100000, UNMAPPED, 2**31, 0xFFFFFFFF]
        for i in range(3000):
            off = rnd.randrange(0, R["PLDMA_MMIO_SIZE"], 4)
            if rnd.random() < 0.5:
                off = R["PLDMA_CH_BASE"] + rnd.randrange(5) * R["PLDMA_CH_STRIDE"] + rnd.randrange(0, 0x40, 4)
            val = rnd.choice(interesting) if rnd.random() < 0.5 else rnd.getrandbits(32)
            if off == R["PLDMA_RESET"] and rnd.random() < 0.5:
                val = R["PLDMA_RESET_MAGIC"]
            q.set_reg(off, val)
            if i % 50 == 0:
                q.step(rnd.randrange(1, 10**6))
            if i % 200 == 0:
                for n in range(4):
                    st = q.status(n)
                    self.assertLessEqual(st[0], R["PLDMA_STATE_ERROR"], f"ch{n} state {st}")
                    self.assertLessEqual(q.chreg(n, R["PLDMA_CH_DONE_BYTES"]), 1 << 30)
        self.assertTrue(q.alive())
        self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])
        # Still a working engine afterwards.
        q.cfg_write(0x04, 0x0006)
        q.set_reg(R["PLDMA_RESET"], R["PLDMA_RESET_MAGIC"])
        q.mem_write(RAM + 0x7000000, b"after fuzz")
        self.copy(0, RAM + 0x7000000, RAM + 0x7100000, 10)
        self.assertEqual(q.mem_read(RAM + 0x7100000, 10), b"after fuzz")


class Timing(ModelTest):
    props = "bandwidth=1000,latency-ns=5000"  # 1000 MB/s: 1 byte per ns

    def test_single_transfer_time(self):
        q = self.q
        t = self.copy(0, RAM, RAM + 0x1000000, 1 << 20)
        # latency + bytes / bandwidth, exactly (the clock only moves to timer deadlines)
        self.assertEqual(t, 5000 + (1 << 20))

    def test_channels_share_bandwidth(self):
        q = self.q
        q.program(0, RAM, RAM + 0x1000000, 1 << 20, R["PLDMA_CTRL_START"])
        q.program(1, RAM + 0x200000, RAM + 0x2000000, 1 << 20, R["PLDMA_CTRL_START"])
        start = q.now()
        while q.status(0)[0] == R["PLDMA_STATE_BUSY"] or q.status(1)[0] == R["PLDMA_STATE_BUSY"]:
            q.step()
        elapsed = q.now() - start
        # Two MiB through one 1000 MB/s data path: about 2.1 ms, not 1.05 ms.
        self.assertGreaterEqual(elapsed, 2 << 20)
        self.assertLess(elapsed, (2 << 20) + 100000)

    def test_resume_pays_latency_again(self):
        q = self.q
        q.program(0, UNMAPPED, RAM, 4096, R["PLDMA_CTRL_START"])
        t0 = q.run_until_settled(0)
        self.assertEqual(t0, 5000)
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"])
        self.assertEqual(q.run_until_settled(0), 5000)

    def test_fault_charges_the_bytes_copied_before_it(self):
        """A step that faults after copying N bytes holds the data path for N bytes, and the
        channel enters FAULT when the data path reaches the faulting page, not at once."""
        q = self.q
        copied = 3 * 4096
        q.program(2, UNMAPPED - copied, RAM + 0x4000000, 5 * 4096,
                  R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"])
        q.step(5000 + copied - 1)  # 1 byte per ns: one ns before the data path is through
        self.assertEqual(q.status(2)[0], R["PLDMA_STATE_BUSY"])
        self.assertEqual(q.chreg(2, R["PLDMA_CH_FAULTS"]), 0)
        self.assertEqual(q.reg(R["PLDMA_IRQ_STATUS"]), 0, "fault raised before its time")
        q.step(1)
        self.assertEqual(q.status(2)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.chreg(2, R["PLDMA_CH_FAULTS"]), 1)
        self.assertEqual(q.chreg(2, R["PLDMA_CH_DONE_BYTES"]), copied)
        self.assertEqual(q.reg(R["PLDMA_IRQ_STATUS"]), 1 << 2)

    def test_faulting_transfer_cost(self):
        """The virtual-time cost of a faulting transfer, START to FAULT: latency + copied bytes."""
        for copied in (0, 100, 4096, 3 * 4096 + 100, 70000):
            with self.subTest(copied=copied):
                self.setUp()
                self.q.program(0, UNMAPPED - copied, RAM + 0x4000000, copied + 8192,
                               R["PLDMA_CTRL_START"])
                self.assertEqual(self.q.run_until_settled(0), 5000 + copied)
                self.assertEqual(self.q.status(0)[0], R["PLDMA_STATE_FAULT"])
                self.assertEqual(self.q.chreg(0, R["PLDMA_CH_DONE_BYTES"]), copied)

    def test_bytes_before_a_fault_share_the_data_path(self):
        """Another channel waits for the bytes a faulting channel moved."""
        q = self.q
        copied = 3 * 4096
        q.program(0, UNMAPPED - copied, RAM + 0x4000000, 5 * 4096, R["PLDMA_CTRL_START"])
        q.program(1, RAM, RAM + 0x1000000, 1 << 20, R["PLDMA_CTRL_START"])
        t = q.run_until_settled(1)
        self.assertEqual(q.status(1)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.status(0)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(t, 5000 + (1 << 20) + copied)


class Migration(unittest.TestCase):
    def test_migration_is_blocked(self):
        """The device is unmigratable: a migration fails at once and names it."""
        path = os.path.join(tempfile.mkdtemp(prefix="pldma-migrate-"), "state")
        q = Qtest()
        try:
            r = q.vm.qmp("migrate", uri=f"file:{path}")
            self.assertIn("error", r, r)
            self.assertIn("exanest-pldma", r["error"]["desc"])
            self.assertTrue(q.alive())
            self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])
        finally:
            q.close()


class Tracing(unittest.TestCase):
    def test_trace_events_follow_a_faulting_transfer(self):
        """The model's trace events (QEMU's -trace, log back end) report what the engine did."""
        log = os.path.join(tempfile.mkdtemp(prefix="pldma-trace-"), "trace.log")
        q = Qtest("bandwidth=1000,latency-ns=5000", extra=("-trace", "exanest_pldma_*", "-D", log))
        try:
            t0 = q.now()
            q.program(0, UNMAPPED - 4096, RAM + 0x100000, 3 * 4096, R["PLDMA_CTRL_START"])
            q.run_until_settled(0)
            self.assertEqual(q.status(0)[0], R["PLDMA_STATE_FAULT"])
        finally:
            q.close()
        with open(log, encoding="utf-8") as f:
            text = f.read()
        self.assertRegex(text, rf"exanest_pldma_start ch 0 src {UNMAPPED - 4096:#x} "
                               rf"dst {RAM + 0x100000:#x} len 12288")
        m = re.search(r"exanest_pldma_step ch 0 at byte 0: (\d+) bytes on the data path "
                      r"from (\d+) to (\d+) ns", text)
        self.assertIsNotNone(m, text)
        self.assertEqual([int(x) for x in m.groups()], [4096, t0 + 5000, t0 + 5000 + 4096])
        m = re.search(r"exanest_pldma_fault ch 0 write 0 at (0x[0-9a-f]+) cause (\d+), "
                      r"raised at (\d+) ns", text)
        self.assertIsNotNone(m, text)
        self.assertEqual((int(m[1], 16), int(m[2]), int(m[3])),
                         (UNMAPPED, R["PLDMA_CAUSE_TRANSLATION"], t0 + 5000 + 4096))
        self.assertRegex(text, rf"exanest_pldma_state ch 0 state {R['PLDMA_STATE_FAULT']} error 0")
        self.assertIn("exanest_pldma_mmio_write", text)


class Properties(unittest.TestCase):
    def test_channel_count_and_max_len(self):
        q = Qtest("channels=16,max-len=8192")
        try:
            self.assertEqual(q.reg(R["PLDMA_CAPS"]) & 0xFF, 16)
            q.program(15, RAM, RAM + 0x100000, 8193, R["PLDMA_CTRL_START"])
            self.assertEqual(q.status(15)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_BAD_LEN"]))
            q.program(15, RAM, RAM + 0x100000, 8192, R["PLDMA_CTRL_START"])
            q.run_until_settled(15)
            self.assertEqual(q.status(15)[0], R["PLDMA_STATE_DONE"])
        finally:
            q.close()

    def test_bad_properties_refused(self):
        for props in ("channels=0", "channels=17", "max-len=0"):
            vm = machine(["-device", f"exanest-pldma,{props}"])
            with self.assertRaises(VMLaunchFailure, msg=props) as cm:
                vm.launch()
            self.assertNotEqual(cm.exception.exitcode, 0, props)
            self.assertIn("exanest-pldma", cm.exception.output, props)


if __name__ == "__main__":
    unittest.main()
