#!/usr/bin/env python3
"""Host tests of the PLDMA engine model (register map 2.1), driven through QEMU's qtest protocol.

No guest kernel runs: the test plays the guest. It sets up the PCIe hierarchy through ECAM (the
engine's physical function sits behind a pcie-root-port, so on bus 1 with its virtual functions,
one per context, at functions 1..contexts), assigns the PF's BAR0 and the VFs' BAR through the
SR-IOV capability, enables the VFs and their bus mastering, puts data in guest RAM and advances
the virtual clock itself, so copy results and timing are exact. The SMMU is left disabled
(bypass), so IOVA = guest physical address; an address outside RAM stands in for an
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
import copy
import gc
import os
import random
import re
import struct
import sys
import tempfile
import unittest
import warnings

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
BAR = 0x10000000            # PF BAR0 (128 KiB)
VF_BAR = 0x10100000         # the SR-IOV VF BAR0: VF n's page at VF_BAR + n * 4 KiB
WINDOW = 2 << 20            # the root port's memory window, from BAR
BUS = 1                     # the root port's secondary bus: the PF at devfn 0
UNMAPPED = RAM + RAM_SIZE   # first byte past RAM: no memory there
STEP = 64 << 10             # bytes per data path turn (the QUANTUM register)
ROOT_PORT = "pcie-root-port,id=rp1,chassis=1,slot=1"

# PCI config space (include/standard-headers/linux/pci_regs.h)
PCI_COMMAND, PCI_STATUS = 0x04, 0x06
CMD_MEMORY, CMD_MASTER = 0x2, 0x4
STATUS_INTERRUPT = 0x8      # INTx asserted
EXT_CAP_ARI, EXT_CAP_SRIOV = 0x0E, 0x10
SRIOV_CTRL, SRIOV_INITIAL_VF, SRIOV_TOTAL_VF, SRIOV_NUM_VF = 0x08, 0x0C, 0x0E, 0x10
SRIOV_VF_OFFSET, SRIOV_VF_STRIDE, SRIOV_VF_DID, SRIOV_BAR = 0x14, 0x16, 0x1A, 0x24
SRIOV_CTRL_VFE, SRIOV_CTRL_MSE, SRIOV_CTRL_ARI = 0x01, 0x08, 0x10


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


def ch_range(q, n, ctx):
    """Channel @n of context @ctx's SRC, DST and LEN, as read."""
    def reg64(lo, hi):
        return q.chreg(n, R[hi], ctx) << 32 | q.chreg(n, R[lo], ctx)
    return (reg64("PLDMA_CH_SRC_LO", "PLDMA_CH_SRC_HI"),
            reg64("PLDMA_CH_DST_LO", "PLDMA_CH_DST_HI"),
            q.chreg(n, R["PLDMA_CH_LEN"], ctx))

class Qtest:
    """One QEMU with one engine behind a pcie-root-port, set up as a guest's PCI code would."""

    def __init__(self, props="", extra=(), vm=None, port=1):
        """One engine behind root port `port` (bus `port`, BARs at BAR + (port - 1) * WINDOW).
        With `vm`, the engine is one of several that an already launched QEMU has (see
        engines_args), else this launches a QEMU with just this one."""
        self.bus = port
        self.bar = BAR + (port - 1) * WINDOW
        self.vf_bar = VF_BAR + (port - 1) * WINDOW
        if vm is None:
            dev = "exanest-pldma,bus=rp1" + (f",{props}" if props else "")
            vm = machine(["-device", ROOT_PORT, "-device", dev, *extra])
            vm.launch()
        self.vm = vm
        self.ecam = self._find_ecam()
        self._setup_root_port(port)
        self.pf = self.ecam + (self.bus << 20)
        ident = self.readl(self.pf)
        if ident != R["PLDMA_PCI_DEVICE_ID"] << 16 | R["PLDMA_PCI_VENDOR_ID"]:
            raise RuntimeError(f"engine not found at {self.bus:02x}:00.0 (id {ident:#x})")
        self.sriov = self.find_ext_cap(self.pf, EXT_CAP_SRIOV)
        self.writel(self.pf + 0x10, self.bar)                      # BAR0
        self.writel(self.pf + self.sriov + SRIOV_BAR, self.vf_bar)  # VF BAR0
        # Memory decoding only: the PF's bus mastering plays no part in context DMA.
        self.writew(self.pf + PCI_COMMAND, CMD_MEMORY)
        self.nctx = self.reg(R["PLDMA_CAPS"]) >> R["PLDMA_CAPS_NCTX_SHIFT"] & 0xFF
        self.nchan = self.reg(R["PLDMA_CAPS"]) & R["PLDMA_CAPS_NCHAN_MASK"]
        self.enable_vfs(self.nctx)

    def close(self):
        self.vm.shutdown()
        # QEMU's qtest machine leaves a socket object of its socketpair to the garbage
        # collector: collect it now, quietly, rather than warn about it at exit.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()

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

    def readw(self, addr):
        return int(self.cmd(f"readw {addr:#x}"), 16)

    def writel(self, addr, val):
        self.cmd(f"writel {addr:#x} {val & 0xffffffff:#x}")

    def writew(self, addr, val):
        self.cmd(f"writew {addr:#x} {val & 0xffff:#x}")

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
            if self.readl(base) & 0xFFFF == 0x1B36:  # the GPEX host bridge at 00:00.0
                return base
        raise RuntimeError("ECAM not found")

    def _setup_root_port(self, port):
        found = 0
        for dev in range(1, 32):
            rp = self.ecam + (dev << 15)
            if self.readl(rp) == 0x000C1B36:  # pcie-root-port
                found += 1
                if found == port:
                    break
        else:
            raise RuntimeError(f"pcie-root-port {port} not found on bus 0")
        bus, bar = self.bus, self.bar
        self.writel(rp + 0x18, bus << 16 | bus << 8)             # primary 0, secondary, subordinate
        self.writel(rp + 0x20, ((bar + WINDOW - 1) >> 16 & 0xFFF0) << 16 | (bar >> 16 & 0xFFF0))
        self.writel(rp + 0x24, 0x0000FFF0)                      # no prefetchable window
        self.writew(rp + PCI_COMMAND, CMD_MEMORY | CMD_MASTER)
        self.rp = rp

    def find_ext_cap(self, fn, cap_id):
        off = 0x100
        while off:
            hdr = self.readl(fn + off)
            if hdr & 0xFFFF == cap_id:
                return off
            off = hdr >> 20
        raise RuntimeError(f"extended capability {cap_id:#x} not found")

    def vf(self, ctx):
        """ECAM address of context ctx's VF: function PLDMA_VF_OFFSET + ctx * stride (ARI)."""
        return self.pf + ((R["PLDMA_VF_OFFSET"] + ctx * R["PLDMA_VF_STRIDE"]) << 12)

    def sriov_write(self, off, val, width=2):
        (self.writew if width == 2 else self.writel)(self.pf + self.sriov + off, val)

    def sriov_read(self, off):
        return self.readw(self.pf + self.sriov + off)

    def disable_vfs(self):
        self.sriov_write(SRIOV_CTRL, 0)

    def enable_vfs(self, n, master=True):
        """SR-IOV on with n VFs (contexts 0..n-1), memory decoding and bus mastering on each."""
        self.disable_vfs()
        self.sriov_write(SRIOV_NUM_VF, n)
        self.sriov_write(SRIOV_CTRL, SRIOV_CTRL_VFE | SRIOV_CTRL_MSE | SRIOV_CTRL_ARI)
        for ctx in range(n):
            self.writew(self.vf(ctx) + PCI_COMMAND, CMD_MEMORY | (CMD_MASTER if master else 0))

    def set_vf_master(self, ctx, on):
        self.writew(self.vf(ctx) + PCI_COMMAND, CMD_MEMORY | (CMD_MASTER if on else 0))

    def intx(self):
        """The PF's INTx level, as its config status register shows it."""
        return bool(self.readw(self.pf + PCI_STATUS) & STATUS_INTERRUPT)

    # Engine registers
    def reg(self, off):
        return self.readl(self.bar + off)

    def set_reg(self, off, val):
        self.writel(self.bar + off, val)

    def ctx_off(self, ctx, off):
        return R["PLDMA_CTX_BASE"] + ctx * R["PLDMA_CTX_STRIDE"] + off

    def ctxreg(self, ctx, off):
        return self.reg(self.ctx_off(ctx, off))

    def set_ctxreg(self, ctx, off, val):
        self.set_reg(self.ctx_off(ctx, off), val)

    def ch_off(self, n, off, ctx=0):
        return self.ctx_off(ctx, R["PLDMA_CH_BASE"] + n * R["PLDMA_CH_STRIDE"] + off)

    def chreg(self, n, off, ctx=0):
        return self.reg(self.ch_off(n, off, ctx))

    def set_chreg(self, n, off, val, ctx=0):
        self.set_reg(self.ch_off(n, off, ctx), val)

    def vfreg(self, ctx, off):
        return self.readl(self.vf_bar + ctx * R["PLDMA_VF_MMIO_SIZE"] + off)

    def program(self, n, src, dst, length, ctrl=None, ctx=0):
        self.set_chreg(n, R["PLDMA_CH_SRC_LO"], src, ctx)
        self.set_chreg(n, R["PLDMA_CH_SRC_HI"], src >> 32, ctx)
        self.set_chreg(n, R["PLDMA_CH_DST_LO"], dst, ctx)
        self.set_chreg(n, R["PLDMA_CH_DST_HI"], dst >> 32, ctx)
        self.set_chreg(n, R["PLDMA_CH_LEN"], length, ctx)
        if ctrl is not None:
            self.set_chreg(n, R["PLDMA_CH_CTRL"], ctrl, ctx)

    def status(self, n, ctx=0):
        st = self.chreg(n, R["PLDMA_CH_STATUS"], ctx)
        return (st & R["PLDMA_STATUS_STATE_MASK"],
                (st & R["PLDMA_STATUS_ERR_MASK"]) >> R["PLDMA_STATUS_ERR_SHIFT"],
                bool(st & R["PLDMA_STATUS_REJECTED"]))

    def busy(self, n, ctx=0):
        return self.status(n, ctx)[0] == R["PLDMA_STATE_BUSY"]

    def run_until_settled(self, n, ctx=0, limit_ns=10**10):
        """Advance virtual time to each pending timer until channel n leaves BUSY."""
        start = self.now()
        while self.busy(n, ctx):
            t = self.step()
            if t - start > limit_ns:
                raise AssertionError(f"ctx {ctx} channel {n} still busy after {limit_ns} ns")
        return self.now() - start

    def settle_times(self, chans, limit_ns=10**10):
        """Advance time until every (ctx, ch) in chans left BUSY; {(ctx, ch): ns after now}."""
        start, out = self.now(), {}
        while True:
            for c in chans:
                if c not in out and not self.busy(c[1], c[0]):
                    out[c] = self.now() - start
            if len(out) == len(chans):
                return out
            if self.step() - start > limit_ns:
                raise AssertionError(f"still busy after {limit_ns} ns: {set(chans) - set(out)}")


def sqe(src, dst, length, wr_id, flags=0):
    """A send queue entry's 32 bytes."""
    return struct.pack("<QQIIQ", src, dst, length, flags, wr_id)


def s32(v):
    """A register's 32 bits as the signed value a CQE status would be."""
    return v - (1 << 32) if v & (1 << 31) else v


class Cqe:
    """A completion queue entry, decoded from its 32 bytes."""

    def __init__(self, raw):
        (self.wr_id, self.status, self.bytes, self.fault,
         self.flags, self.rsvd) = struct.unpack("<QiIQII", raw)
        self.phase = self.flags & R["PLDMA_CQE_PHASE"]

    def __repr__(self):
        return (f"Cqe(wr_id={self.wr_id:#x}, status={self.status}, bytes={self.bytes}, "
                f"fault={self.fault:#x}, flags={self.flags:#x})")


class Ring:
    """A context's queues as the driver sets them up and user space drives them: the rings in
    RAM, the configuration in the PF's context block, the doorbells in the context's VF page."""

    def __init__(self, q, ctx, sq, cq, log_sq=3, log_cq=3, chans=0, enable=True):
        self.q, self.ctx, self.sq, self.cq = q, ctx, sq, cq
        self.log_sq, self.log_cq = log_sq, log_cq
        self.nsq, self.ncq = 1 << log_sq, 1 << log_cq
        self.tail = 0   # software's SQ tail
        self.head = 0   # software's CQ head
        if RAM <= sq < UNMAPPED:
            q.mem_write(sq, bytes(32 * self.nsq))
        if RAM <= cq < UNMAPPED:
            q.mem_write(cq, bytes(32 * self.ncq))
        self.configure(sq, cq, log_sq | log_cq << 8 | chans << 16)
        if enable:
            self.enable()

    @classmethod
    def view(cls, q, ctx):
        """The queue of context ctx as it is, to read: nothing programmed."""
        r = cls.__new__(cls)
        r.q, r.ctx = q, ctx
        return r

    def configure(self, sq, cq, cfg):
        q, ctx = self.q, self.ctx
        q.set_ctxreg(ctx, R["PLDMA_CTX_SQ_BASE_LO"], sq)
        q.set_ctxreg(ctx, R["PLDMA_CTX_SQ_BASE_HI"], sq >> 32)
        q.set_ctxreg(ctx, R["PLDMA_CTX_CQ_BASE_LO"], cq)
        q.set_ctxreg(ctx, R["PLDMA_CTX_CQ_BASE_HI"], cq >> 32)
        q.set_ctxreg(ctx, R["PLDMA_CTX_Q_CFG"], cfg)

    def enable(self, on=True):
        self.q.set_ctxreg(self.ctx, R["PLDMA_CTX_Q_CTRL"], R["PLDMA_Q_CTRL_ENABLE"] if on else 0)
        if on:
            self.tail = self.head = 0

    def status(self):
        """(enabled, error, code) from Q_STATUS."""
        st = self.q.ctxreg(self.ctx, R["PLDMA_CTX_Q_STATUS"])
        return (bool(st & R["PLDMA_Q_STATUS_ENABLED"]), bool(st & R["PLDMA_Q_STATUS_ERROR"]),
                (st & R["PLDMA_Q_STATUS_ERR_MASK"]) >> R["PLDMA_Q_STATUS_ERR_SHIFT"])

    def err_addr(self):
        return (self.q.ctxreg(self.ctx, R["PLDMA_CTX_Q_ERR_LO"])
                | self.q.ctxreg(self.ctx, R["PLDMA_CTX_Q_ERR_HI"]) << 32)

    def vf(self, off):
        return self.q.vfreg(self.ctx, R[off])

    def set_vf(self, off, val):
        self.q.writel(self.q.vf_bar + self.ctx * R["PLDMA_VF_MMIO_SIZE"] + R[off], val)

    def indices(self):
        """(SQ_TAIL, SQ_HEAD, CQ_HEAD, CQ_TAIL) from the VF page."""
        return tuple(self.vf(r) for r in ("PLDMA_VF_SQ_TAIL", "PLDMA_VF_SQ_HEAD",
                                          "PLDMA_VF_CQ_HEAD", "PLDMA_VF_CQ_TAIL"))

    def write(self, descs):
        """Put (src, dst, len, wr_id[, flags]) descriptors in the SQ, without the doorbell."""
        for d in descs:
            self.q.mem_write(self.sq + (self.tail % self.nsq) * 32, sqe(*d))
            self.tail += 1

    def doorbell(self):
        self.set_vf("PLDMA_VF_SQ_TAIL", self.tail)

    def post(self, descs):
        self.write(descs)
        self.doorbell()

    def cqe(self, i):
        """The CQE in the slot of free-running index i."""
        return Cqe(self.q.mem_read(self.cq + (i % self.ncq) * 32, 32))

    def phase(self, i):
        """The phase the engine writes at free-running index i: 1 on the first pass."""
        return 1 - ((i >> self.log_cq) & 1)

    def reap(self, advance=True):
        """The new CQEs up to CQ_TAIL, each checked for its phase; then CQ_HEAD past them."""
        tail, out = self.vf("PLDMA_VF_CQ_TAIL"), []
        while self.head != tail:
            c = self.cqe(self.head)
            if c.phase != self.phase(self.head) or c.flags & ~1 or c.rsvd:
                raise AssertionError(f"CQE {self.head}: {c} (phase {self.phase(self.head)} expected)")
            out.append(c)
            self.head = (self.head + 1) & 0xFFFFFFFF
        if advance:
            self.set_vf("PLDMA_VF_CQ_HEAD", self.head)
        return out

    def run_until_cq(self, n, limit_ns=10**10):
        """Advance time to each pending timer until CQ_TAIL reaches n; the time it took."""
        start = self.q.now()
        while self.vf("PLDMA_VF_CQ_TAIL") < n:
            if self.q.step() - start > limit_ns:
                raise AssertionError(f"ctx {self.ctx}: CQ_TAIL {self.vf('PLDMA_VF_CQ_TAIL')} < {n} "
                                     f"after {limit_ns} ns")
        return self.q.now() - start


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
        self.q.enable_vfs(self.q.nctx)

    def tearDown(self):
        self.assertTrue(self.q.alive(), "QEMU died")

    def copy(self, n, src, dst, length, ctrl=R["PLDMA_CTRL_START"], ctx=0):
        self.q.program(n, src, dst, length, ctrl, ctx)
        return self.q.run_until_settled(n, ctx)


class Identity(ModelTest):
    def test_id_version_caps(self):
        q = self.q
        self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])
        self.assertEqual(q.reg(R["PLDMA_VERSION"]), 2 << 16 | 11)
        self.assertEqual(q.reg(R["PLDMA_VERSION"]), R["PLDMA_VERSION_MAJOR"] << 16 | R["PLDMA_VERSION_MINOR"])
        caps = q.reg(R["PLDMA_CAPS"])
        self.assertEqual(caps & R["PLDMA_CAPS_NCHAN_MASK"], 4, "default channels per context")
        self.assertEqual((caps & R["PLDMA_CAPS_NCTX_MASK"]) >> R["PLDMA_CAPS_NCTX_SHIFT"], 16,
                         "default contexts")
        for bit in ("PLDMA_CAPS_RESUME", "PLDMA_CAPS_INTX", "PLDMA_CAPS_TIMING", "PLDMA_CAPS_SRIOV",
                    "PLDMA_CAPS_NET", "PLDMA_CAPS_MAILBOX", "PLDMA_CAPS_FREC"):
            self.assertTrue(caps & R[bit], bit)
        self.assertEqual(q.reg(R["PLDMA_BANDWIDTH"]), 1000)
        self.assertEqual(q.reg(R["PLDMA_LATENCY"]), 5000)
        self.assertEqual(q.reg(R["PLDMA_MAX_LEN"]), 1 << 30)
        self.assertEqual(q.reg(R["PLDMA_QUANTUM"]), STEP)

    def test_pci_identity_and_sriov_layout(self):
        q = self.q
        self.assertEqual(q.readl(q.pf + 0x08) >> 8, 0x088000, "class: other system peripheral")
        self.assertEqual(q.readl(q.pf + 0x08) & 0xFF, R["PLDMA_VERSION_MAJOR"], "revision")
        q.find_ext_cap(q.pf, EXT_CAP_ARI)
        self.assertEqual(q.sriov_read(SRIOV_TOTAL_VF), 16)
        self.assertEqual(q.sriov_read(SRIOV_INITIAL_VF), 16)
        self.assertEqual(q.sriov_read(SRIOV_VF_OFFSET), R["PLDMA_VF_OFFSET"])
        self.assertEqual(q.sriov_read(SRIOV_VF_STRIDE), R["PLDMA_VF_STRIDE"])
        self.assertEqual(q.sriov_read(SRIOV_VF_DID), R["PLDMA_PCI_VF_DEVICE_ID"])
        # BAR sizes, with decoding off: PF BAR0 128 KiB, the VF BAR0 4 KiB, both 32-bit memory.
        q.writew(q.pf + PCI_COMMAND, 0)
        q.disable_vfs()
        try:
            q.writel(q.pf + 0x10, 0xFFFFFFFF)
            self.assertEqual(q.readl(q.pf + 0x10), (~(R["PLDMA_MMIO_SIZE"] - 1)) & 0xFFFFFFFF)
            q.sriov_write(SRIOV_BAR, 0xFFFFFFFF, 4)
            self.assertEqual(q.readl(q.pf + q.sriov + SRIOV_BAR),
                             (~(R["PLDMA_VF_MMIO_SIZE"] - 1)) & 0xFFFFFFFF)
            self.assertEqual(q.readl(q.pf + q.sriov + SRIOV_BAR + 4), 0, "one 32-bit VF BAR")
        finally:
            q.writel(q.pf + 0x10, BAR)
            q.sriov_write(SRIOV_BAR, VF_BAR, 4)
            q.writew(q.pf + PCI_COMMAND, CMD_MEMORY)
            q.enable_vfs(q.nctx)
        self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])

    def test_intx_pin(self):
        self.assertEqual((self.q.readl(self.q.pf + 0x3C) >> 8) & 0xFF, 1, "PF interrupt pin INTA")
        self.assertEqual((self.q.readl(self.q.vf(0) + 0x3C) >> 8) & 0xFF, 0, "VFs have no INTx")

    def test_vf_identity_registers(self):
        q = self.q
        for ctx in range(q.nctx):
            with self.subTest(ctx=ctx):
                self.assertEqual(q.vfreg(ctx, R["PLDMA_VF_ID"]), R["PLDMA_VF_ID_MAGIC"])
                self.assertEqual(q.vfreg(ctx, R["PLDMA_VF_VERSION"]), q.reg(R["PLDMA_VERSION"]))
                self.assertEqual(q.vfreg(ctx, R["PLDMA_VF_CONTEXT"]), ctx)
                self.assertEqual(q.vfreg(ctx, 0x00C), 0, "undefined offsets read 0")
                self.assertEqual(q.vfreg(ctx, 0xFFC), 0, "undefined offsets read 0")
        # Writes are ignored.
        q.writel(VF_BAR + 3 * R["PLDMA_VF_MMIO_SIZE"] + R["PLDMA_VF_CONTEXT"], 7)
        q.writel(VF_BAR + 3 * R["PLDMA_VF_MMIO_SIZE"] + 0x10, 7)
        self.assertEqual(q.vfreg(3, R["PLDMA_VF_CONTEXT"]), 3)
        self.assertEqual(q.vfreg(3, 0x10), 0)

    def test_vfs_exist_only_when_enabled(self):
        q = self.q
        q.enable_vfs(2)
        self.assertEqual(q.readl(q.vf(1)) & 0xFFFF, 0xFFFF, "VF vendor reads as all ones (SR-IOV)")
        self.assertNotEqual(q.readl(q.vf(1) + 0x3C), 0xFFFFFFFF, "VF 1 is there")
        self.assertEqual(q.readl(q.vf(2) + 0x3C), 0xFFFFFFFF, "VF 2 is not enabled")
        self.assertEqual(q.vfreg(1, R["PLDMA_VF_CONTEXT"]), 1)
        self.assertEqual(q.vfreg(2, R["PLDMA_VF_ID"]), 0xFFFFFFFF, "no VF 2 page")
        q.disable_vfs()
        self.assertEqual(q.readl(q.vf(0) + 0x3C), 0xFFFFFFFF, "VFs gone with VF Enable")


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

    def test_every_context_and_channel_at_once(self):
        q = self.q
        bufs = []
        for ctx in range(q.nctx):
            for n in range(q.nchan):
                i = ctx * q.nchan + n
                data = bytes([i + 1]) * 70000
                src, dst = RAM + 0x1000000 + i * 0x20000, RAM + 0x2000000 + i * 0x20000
                q.mem_write(src, data)
                q.program(n, src, dst, len(data), R["PLDMA_CTRL_START"], ctx)
                bufs.append((ctx, n, dst, data))
        for ctx, n, dst, data in bufs:
            q.run_until_settled(n, ctx)
            self.assertEqual(q.status(n, ctx)[0], R["PLDMA_STATE_DONE"], f"ctx {ctx} ch {n}")
            self.assertEqual(q.mem_read(dst, len(data)), data, f"ctx {ctx} ch {n}")

    def test_registers_latched_at_start(self):
        q = self.q
        data = os.urandom(300000)
        src, dst = RAM + 0x3000000, RAM + 0x3800000
        q.mem_write(src, data)
        q.program(1, src, dst, len(data), R["PLDMA_CTRL_START"], ctx=5)
        q.step()  # latency over, first quantum copied
        q.program(1, UNMAPPED, UNMAPPED + 0x100000, 7, ctx=5)  # reprogram while busy
        q.run_until_settled(1, ctx=5)
        self.assertEqual(q.status(1, ctx=5)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(dst, len(data)), data)
        self.assertEqual(q.chreg(1, R["PLDMA_CH_LEN"], ctx=5), 7, "programmed value reads back")

    def test_pf_bus_master_plays_no_part(self):
        """Context DMA is the VF's: it works with the PF's bus mastering off, and on."""
        q = self.q
        for pf_cmd in (CMD_MEMORY, CMD_MEMORY | CMD_MASTER):
            q.writew(q.pf + PCI_COMMAND, pf_cmd)
            data = os.urandom(5000)
            q.mem_write(RAM + 0x900000, data)
            self.copy(2, RAM + 0x900000, RAM + 0xA00000, len(data), ctx=1)
            self.assertEqual(q.status(2, ctx=1)[0], R["PLDMA_STATE_DONE"], f"PF command {pf_cmd:#x}")
            self.assertEqual(q.mem_read(RAM + 0xA00000, len(data)), data)
        q.writew(q.pf + PCI_COMMAND, CMD_MEMORY)


class Contexts(ModelTest):
    def test_vf_without_bus_mastering_is_no_master(self):
        q = self.q
        q.set_vf_master(1, False)
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_STATUS"]) & R["PLDMA_CTX_FUNCTION"], 0)
        self.assertEqual(q.ctxreg(0, R["PLDMA_CTX_STATUS"]) & R["PLDMA_CTX_FUNCTION"],
                         R["PLDMA_CTX_FUNCTION"])
        q.mem_write(RAM + 0x200000, b"context 0 still works")
        q.mem_write(RAM + 0x300000, bytes(21))
        q.program(0, RAM + 0x200000, RAM + 0x300000, 21,
                  R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=1)
        self.assertEqual(q.status(0, ctx=1)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_NO_MASTER"]))
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"]), 1)
        self.assertEqual(q.mem_read(RAM + 0x300000, 21), bytes(21))
        self.copy(0, RAM + 0x200000, RAM + 0x400000, 21, ctx=0)
        self.assertEqual(q.mem_read(RAM + 0x400000, 21), b"context 0 still works")
        # Bus mastering back on: the context works.
        q.set_vf_master(1, True)
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_STATUS"]) & R["PLDMA_CTX_FUNCTION"],
                         R["PLDMA_CTX_FUNCTION"])
        self.copy(0, RAM + 0x200000, RAM + 0x300000, 21, ctx=1)
        self.assertEqual(q.mem_read(RAM + 0x300000, 21), b"context 0 still works")

    def test_disabled_vf_is_no_master(self):
        """NumVFs = 2: contexts 2 and up have no function to issue their DMA."""
        q = self.q
        q.enable_vfs(2)
        for ctx in (2, q.nctx - 1):
            q.program(0, RAM, RAM + 0x100000, 64, R["PLDMA_CTRL_START"], ctx=ctx)
            self.assertEqual(q.status(0, ctx)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_NO_MASTER"]))
            self.assertEqual(q.ctxreg(ctx, R["PLDMA_CTX_STATUS"]), 0)
        for ctx in (0, 1):
            self.copy(3, RAM, RAM + 0x100000 + ctx * 0x1000, 64, ctx=ctx)
            self.assertEqual(q.status(3, ctx)[0], R["PLDMA_STATE_DONE"])
        q.disable_vfs()
        q.program(0, RAM, RAM + 0x100000, 64, R["PLDMA_CTRL_START"], ctx=0)
        self.assertEqual(q.status(0)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_NO_MASTER"]))

    def test_function_lost_mid_transfer(self):
        """A running transfer whose VF goes away stops at its next turn: ERROR/NO_MASTER."""
        q = self.q
        src, dst = RAM + 0x600000, RAM + 0x700000
        q.mem_write(src, b"\x77" * (1 << 20))
        q.mem_write(dst, bytes(1 << 20))
        q.program(1, src, dst, 1 << 20, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=3)
        q.step()  # the first turn
        done = q.chreg(1, R["PLDMA_CH_DONE_BYTES"], ctx=3)
        self.assertEqual(done, STEP)
        q.set_vf_master(3, False)
        q.run_until_settled(1, ctx=3)
        self.assertEqual(q.status(1, ctx=3)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_NO_MASTER"]))
        self.assertEqual(q.chreg(1, R["PLDMA_CH_DONE_BYTES"], ctx=3), done)
        self.assertEqual(q.mem_read(dst + done, 4096), bytes(4096), "copied without bus mastering")
        self.assertEqual(q.ctxreg(3, R["PLDMA_CTX_IRQ_STATUS"]), 1 << 1)

    def test_ctx_irq_status_and_summary(self):
        q = self.q
        self.assertFalse(q.intx())
        bad = R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"]
        q.program(1, RAM, RAM + 0x100000, 0, bad, ctx=2)        # BAD_LEN at once
        q.program(0, RAM, RAM + 0x100000, 0, bad, ctx=5)
        q.program(3, RAM, RAM + 0x100000, 0, bad, ctx=5)
        q.program(2, RAM, RAM + 0x100000, 0, R["PLDMA_CTRL_START"], ctx=7)  # no IRQ_EN
        self.assertEqual(q.ctxreg(2, R["PLDMA_CTX_IRQ_STATUS"]), 0b0010)
        self.assertEqual(q.ctxreg(5, R["PLDMA_CTX_IRQ_STATUS"]), 0b1001)
        self.assertEqual(q.ctxreg(7, R["PLDMA_CTX_IRQ_STATUS"]), 0)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 2 | 1 << 5)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_HI"]), 0)
        self.assertTrue(q.intx())
        # RW1C, per context: other bits and other contexts stay.
        q.set_ctxreg(5, R["PLDMA_CTX_IRQ_STATUS"], 0b1000)
        self.assertEqual(q.ctxreg(5, R["PLDMA_CTX_IRQ_STATUS"]), 0b0001)
        self.assertEqual(q.ctxreg(2, R["PLDMA_CTX_IRQ_STATUS"]), 0b0010)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 2 | 1 << 5)
        q.set_ctxreg(5, R["PLDMA_CTX_IRQ_STATUS"], 0xFFFFFFFF)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 2)
        self.assertTrue(q.intx())
        # The summary is read-only.
        q.set_reg(R["PLDMA_IRQ_SUMMARY_LO"], 0xFFFFFFFF)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 2)
        q.set_ctxreg(2, R["PLDMA_CTX_IRQ_STATUS"], 0b0010)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 0)
        self.assertFalse(q.intx(), "INTx follows the contexts' status")

    def test_quiesce(self):
        """QUIESCE: a busy and a faulted channel return to IDLE, no interrupt, no more bytes;
        other contexts carry on."""
        q = self.q
        irq = R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"]
        src, dst = RAM + 0x800000, RAM + 0x900000
        q.mem_write(src, b"\x5A" * (1 << 20))
        q.mem_write(dst, bytes(1 << 20))
        q.program(0, src, dst, 1 << 20, irq, ctx=4)                          # streams
        q.program(1, UNMAPPED, RAM + 0xA00000, 4096, irq, ctx=4)            # faults
        q.program(2, RAM, RAM + 0xB00000, 100, irq, ctx=4)                   # done
        q.program(0, RAM + 0xC00000, RAM + 0xD00000, 1 << 20, irq, ctx=6)    # another context
        q.run_until_settled(1, ctx=4)
        q.run_until_settled(2, ctx=4)
        self.assertEqual(q.status(1, ctx=4)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.status(2, ctx=4)[0], R["PLDMA_STATE_DONE"])
        self.assertTrue(q.busy(0, ctx=4))
        self.assertEqual(q.ctxreg(4, R["PLDMA_CTX_IRQ_STATUS"]), 0b110)
        self.assertEqual(q.ctxreg(4, R["PLDMA_CTX_STATUS"]),
                         R["PLDMA_CTX_ACTIVE"] | R["PLDMA_CTX_FUNCTION"])
        done = q.chreg(0, R["PLDMA_CH_DONE_BYTES"], ctx=4)
        self.assertTrue(0 < done < 1 << 20, done)

        q.set_ctxreg(4, R["PLDMA_CTX_CTRL"], R["PLDMA_CTX_QUIESCE"])
        for n in range(q.nchan):
            self.assertEqual(q.status(n, ctx=4), (R["PLDMA_STATE_IDLE"], 0, False), f"ch {n}")
        self.assertEqual(q.ctxreg(4, R["PLDMA_CTX_IRQ_STATUS"]), 0)
        self.assertEqual(q.ctxreg(4, R["PLDMA_CTX_STATUS"]), R["PLDMA_CTX_FUNCTION"])
        self.assertEqual(q.ctxreg(4, R["PLDMA_CTX_CTRL"]), 0, "write-only")
        self.assertFalse(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]) & 1 << 4)
        # Context 6 finishes, the clock runs on: context 4 moves no byte and raises nothing.
        q.run_until_settled(0, ctx=6)
        self.assertEqual(q.status(0, ctx=6)[0], R["PLDMA_STATE_DONE"])
        q.step(10**8)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"], ctx=4), done, "progress latch kept")
        self.assertEqual(q.mem_read(dst + done, (1 << 20) - done), bytes((1 << 20) - done),
                         "copied after QUIESCE")
        self.assertEqual(q.ctxreg(4, R["PLDMA_CTX_IRQ_STATUS"]), 0)
        for n in range(q.nchan):
            self.assertEqual(q.status(n, ctx=4)[0], R["PLDMA_STATE_IDLE"])
        # A quiesced context takes new work.
        t = self.copy(0, src, dst, 1 << 20, ctx=4)
        self.assertEqual(t, 5000 + (1 << 20))
        self.assertEqual(q.mem_read(dst, 1 << 20), b"\x5A" * (1 << 20))

    def test_quiesce_while_its_turn_holds_the_data_path(self):
        """The bytes of a turn already moved keep the data path busy; the turn's end does
        nothing to the quiesced channel, even once it is started again."""
        q = self.q
        q.program(0, RAM, RAM + 0x1000000, 1 << 20, R["PLDMA_CTRL_START"], ctx=2)
        q.step(5000)  # the first turn took the data path: 64 KiB until 5000 + 65536
        self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"], ctx=2), STEP)
        q.set_ctxreg(2, R["PLDMA_CTX_CTRL"], R["PLDMA_CTX_QUIESCE"])
        q.program(0, RAM + 0x200000, RAM + 0x2000000, 100, R["PLDMA_CTRL_START"], ctx=2)
        q.program(0, RAM + 0x300000, RAM + 0x3000000, 100, R["PLDMA_CTRL_START"], ctx=3)
        t = q.settle_times([(2, 0), (3, 0)])
        # Both become ready 5000 ns after their START, then wait for the quiesced turn's
        # bytes (65536 - 5000 ns more), then one after the other: 100 ns each.
        self.assertEqual(sorted(t.values()), [65536 + 100, 65536 + 200])
        self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"], ctx=2), 100)

    def test_absent_contexts_and_channels(self):
        q = self.q
        q.program(0, RAM, RAM + 0x100000, 64, ctx=0)
        # Context 16 (of 16) and channel 4 (of 4): reads 0, writes ignored.
        for off in (q.ctx_off(16, R["PLDMA_CTX_IRQ_STATUS"]), q.ch_off(0, R["PLDMA_CH_SRC_LO"], 16),
                    q.ch_off(4, R["PLDMA_CH_SRC_LO"], 0), q.ch_off(7, R["PLDMA_CH_LEN"], 15),
                    q.ctx_off(63, R["PLDMA_CTX_STATUS"])):
            q.set_reg(off, 0x12345678)
            self.assertEqual(q.reg(off), 0, f"offset {off:#x}")
        q.set_reg(q.ch_off(4, R["PLDMA_CH_CTRL"], 0), R["PLDMA_CTRL_START"])
        q.set_reg(q.ch_off(0, R["PLDMA_CH_CTRL"], 16), R["PLDMA_CTRL_START"])
        q.step(10**7)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_SRC_LO"], 0), RAM, "no aliasing into context 0")
        for n in range(q.nchan):
            self.assertEqual(q.status(n, 0), (R["PLDMA_STATE_IDLE"], 0, False))
        # Past the last context block and between blocks: unknown offsets.
        for off in (0x11000, 0x1FFFC, 0x0FFC, q.ctx_off(0, 0x0C), q.ctx_off(1, 0x3FC)):
            q.set_reg(off, 0xFFFFFFFF)
            self.assertEqual(q.reg(off), 0, f"offset {off:#x}")
        self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])

    def test_reset_covers_every_context(self):
        q = self.q
        for ctx in (0, 9, 15):
            q.program(1, UNMAPPED, RAM, 4096, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=ctx)
            q.run_until_settled(1, ctx)
            self.assertEqual(q.status(1, ctx)[0], R["PLDMA_STATE_FAULT"])
        q.program(2, RAM, RAM + 0x1000000, 1 << 20, R["PLDMA_CTRL_START"], ctx=4)
        self.assertTrue(q.intx())
        q.set_reg(R["PLDMA_RESET"], R["PLDMA_RESET_MAGIC"])
        for ctx in (0, 4, 9, 15):
            self.assertEqual(q.ctxreg(ctx, R["PLDMA_CTX_STATUS"]) & R["PLDMA_CTX_ACTIVE"], 0)
            self.assertEqual(q.ctxreg(ctx, R["PLDMA_CTX_IRQ_STATUS"]), 0)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 0)
        self.assertFalse(q.intx())
        self.assertEqual(q.chreg(2, R["PLDMA_CH_LEN"], ctx=4), 0, "RESET clears the registers")


class Faults(ModelTest):
    def test_fault_mid_transfer_latches_exact_place(self):
        q = self.q
        # The source runs off the end of RAM: 3 pages copy, then the 4th faults.
        src = UNMAPPED - 3 * 4096 - 100
        dst = RAM + 0x4000000
        q.mem_write(src, bytes(range(256)) * 48 + bytes(100))
        q.program(2, src, dst, 5 * 4096, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=1)
        q.run_until_settled(2, ctx=1)
        state, err, _ = q.status(2, ctx=1)
        self.assertEqual(state, R["PLDMA_STATE_FAULT"])
        fa = q.chreg(2, R["PLDMA_CH_FAULT_LO"], 1) | q.chreg(2, R["PLDMA_CH_FAULT_HI"], 1) << 32
        self.assertEqual(fa, UNMAPPED)
        info = q.chreg(2, R["PLDMA_CH_FAULT_INFO"], 1)
        self.assertEqual(info & R["PLDMA_FAULT_WRITE"], 0, "a source fault is a read")
        self.assertEqual((info & R["PLDMA_FAULT_CAUSE_MASK"]) >> R["PLDMA_FAULT_CAUSE_SHIFT"],
                         R["PLDMA_CAUSE_TRANSLATION"])
        self.assertEqual(q.chreg(2, R["PLDMA_CH_DONE_BYTES"], 1), UNMAPPED - src)
        self.assertEqual(q.mem_read(dst, UNMAPPED - src), q.mem_read(src, UNMAPPED - src))
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"]), 1 << 2)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 1)
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_STATUS"]) & R["PLDMA_CTX_ACTIVE"],
                         R["PLDMA_CTX_ACTIVE"], "a faulted channel keeps its context active")
        # Resume without a mapping: faults again at the same place, counts a second fault.
        q.set_ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"], 1 << 2)
        q.set_chreg(2, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"] | R["PLDMA_CTRL_IRQ_EN"], 1)
        self.assertEqual(q.status(2, 1)[0], R["PLDMA_STATE_BUSY"])
        q.run_until_settled(2, 1)
        self.assertEqual(q.status(2, 1)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.chreg(2, R["PLDMA_CH_FAULTS"], 1), 2)
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"]), 1 << 2)
        q.set_chreg(2, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"], 1)
        self.assertEqual(q.status(2, 1)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_ABORTED"]))

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
        q.program(1, src, dst + 0x100000, len(data), R["PLDMA_CTRL_START"], ctx=8)
        q.run_until_settled(3)
        q.run_until_settled(1, ctx=8)
        self.assertEqual(q.status(0)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.status(3)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.status(1, ctx=8)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(dst, len(data)), data)
        self.assertEqual(q.mem_read(dst + 0x100000, len(data)), data)

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


class FaultRecords(ModelTest):
    """2.11: the fault record ring: a record of every fault in memory, written before the
    channel's interrupt, STAMP last; fault numbers; answers that name their fault."""
    RING = RAM + 0x7000000

    def setUp(self):
        super().setUp()
        q = self.q
        q.writew(q.pf + PCI_COMMAND, CMD_MEMORY | CMD_MASTER)
        self.addCleanup(q.writew, q.pf + PCI_COMMAND, CMD_MEMORY)

    def frec_setup(self, ctx, log2, base=None):
        q = self.q
        base = self.RING if base is None else base
        q.mem_write(base, bytes(R["PLDMA_FREC_SIZE"] << log2))
        q.set_ctxreg(ctx, R["PLDMA_CTX_FREC_BASE_LO"], base & 0xFFFFFFFF)
        q.set_ctxreg(ctx, R["PLDMA_CTX_FREC_BASE_HI"], base >> 32)
        q.set_ctxreg(ctx, R["PLDMA_CTX_FREC_CFG"], log2 | R["PLDMA_FREC_CFG_ENABLE"])

    def record(self, i, log2):
        raw = self.q.mem_read(self.RING + (i % (1 << log2)) * R["PLDMA_FREC_SIZE"],
                              R["PLDMA_FREC_SIZE"])

        def f(name, size):
            off = R["PLDMA_FREC_" + name + "_OFF"]
            return int.from_bytes(raw[off:off + size], "little")
        chan = f("CHAN", 4)
        return {"addr": f("ADDR", 8), "info": f("INFO", 4), "origin": f("ORIGIN", 4),
                "wrid": f("WRID", 8), "end": f("END", 8), "net_src": f("NET_SRC", 4),
                "opid": f("NET_OPID", 4), "ch": chan & 0xFF, "seq": chan >> 8 & 0xFF,
                "done": f("DONE", 4), "stamp": f("STAMP", 4)}

    def seq(self, n, ctx):
        st = self.q.chreg(n, R["PLDMA_CH_STATUS"], ctx)
        return (st & R["PLDMA_STATUS_FAULT_SEQ_MASK"]) >> R["PLDMA_STATUS_FAULT_SEQ_SHIFT"]

    def answer(self, n, ctx, cmd, seq):
        self.q.set_chreg(n, R["PLDMA_CH_CTRL"], cmd | R["PLDMA_CTRL_IRQ_EN"] |
                         R["PLDMA_CTRL_SEQ_CHECK"] | seq << R["PLDMA_CTRL_SEQ_SHIFT"], ctx)

    def test_a_record_says_what_the_registers_say(self):
        q = self.q
        self.frec_setup(1, 2)
        src, dst = UNMAPPED - 3 * 4096, RAM + 0x4000000
        q.program(2, src, dst, 5 * 4096, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=1)
        q.run_until_settled(2, ctx=1)
        self.assertEqual(q.status(2, ctx=1)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_FREC_TAIL"]), 1)
        self.assertEqual(self.seq(2, 1), 1, "the channel's first fault")
        r = self.record(0, 2)
        reg = lambda off: q.chreg(2, R[off], 1)  # noqa: E731
        self.assertEqual(r, {
            "addr": reg("PLDMA_CH_FAULT_LO") | reg("PLDMA_CH_FAULT_HI") << 32,
            "info": reg("PLDMA_CH_FAULT_INFO"), "origin": reg("PLDMA_CH_ORIGIN"),
            "wrid": 0, "end": src + 5 * 4096, "net_src": 0, "opid": 0, "ch": 2, "seq": 1,
            "done": reg("PLDMA_CH_DONE_BYTES"), "stamp": 1})
        self.assertEqual(r["addr"], UNMAPPED)
        self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"]), 1 << 2)

    def test_answers_name_their_fault(self):
        q = self.q
        self.frec_setup(0, 3)
        q.program(1, RAM, UNMAPPED - 4096, 3 * 4096, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"])
        q.run_until_settled(1)
        self.assertEqual((self.record(0, 3)["seq"], self.seq(1, 0)), (1, 1))
        # An answer to another fault number is rejected and changes nothing.
        self.answer(1, 0, R["PLDMA_CTRL_RESUME"], 2)
        st = q.chreg(1, R["PLDMA_CH_STATUS"])
        self.assertEqual(st & R["PLDMA_STATUS_STATE_MASK"], R["PLDMA_STATE_FAULT"])
        self.assertTrue(st & R["PLDMA_STATUS_REJECTED"])
        # The right one resumes; the transfer faults again: fault 2, the ring's record 1.
        self.answer(1, 0, R["PLDMA_CTRL_RESUME"], 1)
        self.assertEqual(q.status(1)[0], R["PLDMA_STATE_BUSY"])
        q.run_until_settled(1)
        self.assertEqual(self.seq(1, 0), 2)
        self.assertEqual((self.record(1, 3)["seq"], self.record(1, 3)["stamp"]), (2, 2))
        # A NACK naming fault 1 (ended) cannot end fault 2; naming fault 2 it does.
        self.answer(1, 0, R["PLDMA_CTRL_NACK"], 1)
        self.assertEqual(q.status(1)[0], R["PLDMA_STATE_FAULT"])
        self.answer(1, 0, R["PLDMA_CTRL_NACK"], 2)
        self.assertEqual(q.status(1)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_ABORTED"]))
        # Without SEQ_CHECK, answers are 2.10's.
        q.program(1, RAM, UNMAPPED - 4096, 3 * 4096, R["PLDMA_CTRL_START"])
        q.run_until_settled(1)
        q.set_chreg(1, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"])
        self.assertEqual(q.status(1)[0], R["PLDMA_STATE_ERROR"])

    def test_a_full_ring_loses_records_not_faults(self):
        q = self.q
        self.frec_setup(3, 1)
        for n in range(3):
            q.program(n, RAM, UNMAPPED + n * 4096, 4096, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"],
                      ctx=3)
        for n in range(3):
            q.run_until_settled(n, ctx=3)
            self.assertEqual(q.status(n, ctx=3)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.ctxreg(3, R["PLDMA_CTX_FREC_TAIL"]), 2, "two records fit")
        irq = q.ctxreg(3, R["PLDMA_CTX_IRQ_STATUS"])
        self.assertEqual(irq, 0b111 | R["PLDMA_CTX_IRQ_FREC_LOST"], "every fault is raised")
        self.assertEqual(sorted(self.record(i, 1)["ch"] for i in range(2)), [0, 1])
        # The reader frees both; the next fault's record goes to index 2 (slot 0).
        q.set_ctxreg(3, R["PLDMA_CTX_FREC_HEAD"], 2)
        lost = self.record(0, 1)
        missing = ({0, 1, 2} - {self.record(i, 1)["ch"] for i in range(2)}).pop()
        self.answer(missing, 3, R["PLDMA_CTRL_RESUME"], self.seq(missing, 3))
        q.run_until_settled(missing, ctx=3)
        r = self.record(2, 1)
        self.assertEqual((r["stamp"], r["ch"], r["seq"]), (3, missing, 2))
        self.assertNotEqual(r, lost)

    def test_enable_checks_and_quiesce_stops_the_ring(self):
        q = self.q
        cfg = lambda: q.ctxreg(5, R["PLDMA_CTX_FREC_CFG"])  # noqa: E731
        self.frec_setup(5, 13)
        self.assertEqual(cfg() & R["PLDMA_FREC_CFG_ENABLE"], 0, "2^13 records refused")
        self.frec_setup(5, 2, base=self.RING + 32)
        self.assertEqual(cfg() & R["PLDMA_FREC_CFG_ENABLE"], 0, "a misaligned ring refused")
        self.frec_setup(5, 2)
        self.assertEqual(cfg(), 2 | R["PLDMA_FREC_CFG_ENABLE"])
        q.set_ctxreg(5, R["PLDMA_CTX_CTRL"], R["PLDMA_CTX_QUIESCE"])
        self.assertEqual(cfg(), 2, "QUIESCE disables it")
        q.program(0, RAM, UNMAPPED, 4096, R["PLDMA_CTRL_START"], ctx=5)
        q.run_until_settled(0, ctx=5)
        self.assertEqual(q.ctxreg(5, R["PLDMA_CTX_FREC_TAIL"]), 0)
        self.assertEqual(self.record(0, 2)["stamp"], 0, "nothing written while disabled")
        self.assertEqual(self.seq(0, 5), 1, "faults are numbered all the same")
        # Enabled again: indices from 0, and a PF that is not a bus master loses the record.
        self.frec_setup(5, 2)
        q.writew(q.pf + PCI_COMMAND, CMD_MEMORY)
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"] | R["PLDMA_CTRL_IRQ_EN"], 5)
        q.run_until_settled(0, ctx=5)
        self.assertEqual(q.ctxreg(5, R["PLDMA_CTX_FREC_TAIL"]), 0)
        self.assertTrue(q.ctxreg(5, R["PLDMA_CTX_IRQ_STATUS"]) & R["PLDMA_CTX_IRQ_FREC_LOST"])
        self.assertEqual(self.seq(0, 5), 2)


class BadInput(ModelTest):
    def start(self, src, dst, length, ctx=0):
        self.q.program(0, src, dst, length, R["PLDMA_CTRL_START"], ctx)
        return self.q.status(0, ctx)

    def test_rejections(self):
        E = R
        for ctx in (0, 11):
            self.assertEqual(self.start(RAM, RAM + 0x100000, 0, ctx)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_LEN"]))
            self.assertEqual(self.start(RAM, RAM + 0x100000, (1 << 30) + 1, ctx)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_LEN"]))
            self.assertEqual(self.start(2**64 - 100, RAM, 4096, ctx)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_ADDR"]))
            self.assertEqual(self.start(RAM, 2**64 - 1, 2, ctx)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_BAD_ADDR"]))
            self.assertEqual(self.start(RAM, RAM + 10, 4096, ctx)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_OVERLAP"]))
            self.assertEqual(self.start(RAM + 10, RAM, 4096, ctx)[:2], (E["PLDMA_STATE_ERROR"], E["PLDMA_ERR_OVERLAP"]))

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
        q.writeq(BAR + q.ch_off(0, R["PLDMA_CH_SRC_LO"], 3), 0x1122334455667788)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_SRC_LO"], 3), 0x55667788)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_SRC_HI"], 3), 0x11223344)

    def test_random_register_programming(self):
        """Random writes anywhere in the window with time passing: QEMU survives, state stays sane."""
        q = self.q
        rnd = random.Random(7)
        interesting = [0, 1, 4096, 2**32 - 1, RAM, RAM + 0x100000, UNMAPPED, 2**31, 0xFFFFFFFF]
        for i in range(3000):
            off = rnd.randrange(0, R["PLDMA_MMIO_SIZE"], 4)
            if rnd.random() < 0.6:
                off = q.ctx_off(rnd.randrange(17), rnd.choice(
                    [rnd.randrange(0, 0x10, 4),
                     R["PLDMA_CH_BASE"] + rnd.randrange(5) * R["PLDMA_CH_STRIDE"] + rnd.randrange(0, 0x40, 4)]))
            elif rnd.random() < 0.2:
                off = rnd.randrange(0, 0x40, 4)
            val = rnd.choice(interesting) if rnd.random() < 0.5 else rnd.getrandbits(32)
            if off == R["PLDMA_RESET"] and rnd.random() < 0.5:
                val = R["PLDMA_RESET_MAGIC"]
            q.set_reg(off, val)
            if i % 50 == 0:
                q.step(rnd.randrange(1, 10**6))
            if i % 200 == 0:
                for ctx in range(q.nctx):
                    for n in range(q.nchan):
                        st = q.status(n, ctx)
                        self.assertLessEqual(st[0], R["PLDMA_STATE_ERROR"], f"ctx {ctx} ch{n} state {st}")
                        self.assertLessEqual(q.chreg(n, R["PLDMA_CH_DONE_BYTES"], ctx), 1 << 30)
        self.assertTrue(q.alive())
        self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])
        # Still a working engine afterwards.
        q.set_reg(R["PLDMA_RESET"], R["PLDMA_RESET_MAGIC"])
        q.mem_write(RAM + 0x7000000, b"after fuzz")
        self.copy(0, RAM + 0x7000000, RAM + 0x7100000, 10)
        self.assertEqual(q.mem_read(RAM + 0x7100000, 10), b"after fuzz")


class Timing(ModelTest):
    props = "bandwidth=1000,latency-ns=5000"  # 1000 MB/s: 1 byte per ns

    def start_all(self, jobs):
        """START (ctx, ch, len) jobs, 1 MiB apart in RAM; returns their (ctx, ch) keys."""
        for i, (ctx, n, length) in enumerate(jobs):
            self.q.program(n, RAM + i * 0x200000, RAM + 0x4000000 + i * 0x200000, length,
                           R["PLDMA_CTRL_START"], ctx)
        return [(ctx, n) for ctx, n, _ in jobs]

    def test_single_transfer_time(self):
        t = self.copy(0, RAM, RAM + 0x1000000, 1 << 20)
        # latency + bytes / bandwidth, exactly (the clock only moves to timer deadlines)
        self.assertEqual(t, 5000 + (1 << 20))

    def test_channels_share_bandwidth(self):
        q = self.q
        q.program(0, RAM, RAM + 0x1000000, 1 << 20, R["PLDMA_CTRL_START"])
        q.program(1, RAM + 0x200000, RAM + 0x2000000, 1 << 20, R["PLDMA_CTRL_START"])
        t = q.settle_times([(0, 0), (0, 1)])
        # Two MiB through one 1000 MB/s data path, one turn each in turn.
        self.assertEqual(t[(0, 0)], 5000 + (2 << 20) - STEP)
        self.assertEqual(t[(0, 1)], 5000 + (2 << 20))

    def test_round_robin_within_a_context(self):
        q = self.q
        keys = self.start_all([(0, 0, 4 * STEP), (0, 1, 4 * STEP), (0, 3, STEP)])
        t = q.settle_times(keys)
        # Turns: ch0 ch1 ch3 | ch0 ch1 | ch0 ch1 | ch0 ch1
        self.assertEqual(t[(0, 3)], 5000 + 3 * STEP)
        self.assertEqual(t[(0, 0)], 5000 + 8 * STEP)
        self.assertEqual(t[(0, 1)], 5000 + 9 * STEP)

    def test_contexts_share_the_data_path_equally(self):
        """Context 0 streams on 4 channels, context 1 on one: each gets every other turn."""
        q = self.q
        keys = self.start_all([(0, n, 1 << 20) for n in range(4)] + [(1, 0, 1 << 20)])
        t = q.settle_times(keys)
        # Context 1's 16 turns are turns 2, 4, ..., 32; a channel round-robin would make it
        # wait for 4 others each time (done near 5000 + 5 MiB).
        self.assertEqual(t[(1, 0)], 5000 + 32 * STEP)
        self.assertEqual(max(t.values()), 5000 + 80 * STEP)

    def test_small_copy_waits_at_most_one_quantum(self):
        q = self.q
        self.start_all([(0, n, 1 << 20) for n in range(4)])
        q.step(1)
        q.program(2, RAM + 0x3000000, RAM + 0x3100000, 64, R["PLDMA_CTRL_START"], ctx=1)
        t = q.run_until_settled(2, ctx=1)
        # Ready 5000 ns after its START, 1 ns into context 0's first turn: that turn ends, then
        # context 1 is next.
        self.assertLessEqual(t, 5000 + STEP + 64)
        self.assertEqual(t, 5000 + STEP - 1 + 64)
        self.assertEqual(q.status(2, ctx=1)[0], R["PLDMA_STATE_DONE"])

    def test_streaming_contexts_finish_together(self):
        """1 MiB on context 0's four channels against 1 MiB on one channel of context 3."""
        q = self.q
        keys = self.start_all([(0, n, 256 << 10) for n in range(4)] + [(3, 1, 1 << 20)])
        t = q.settle_times(keys)
        ctx0 = max(v for k, v in t.items() if k[0] == 0)
        self.assertLessEqual(abs(ctx0 - t[(3, 1)]), STEP)
        self.assertEqual(max(t.values()), 5000 + (2 << 20))

    def test_resume_pays_latency_again(self):
        q = self.q
        q.program(0, UNMAPPED, RAM, 4096, R["PLDMA_CTRL_START"])
        t0 = q.run_until_settled(0)
        self.assertEqual(t0, 5000)
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"])
        self.assertEqual(q.run_until_settled(0), 5000)

    def test_fault_charges_the_bytes_copied_before_it(self):
        """A turn that faults after copying N bytes holds the data path for N bytes, and the
        channel enters FAULT when the data path reaches the faulting page, not at once."""
        q = self.q
        copied = 3 * 4096
        q.program(2, UNMAPPED - copied, RAM + 0x4000000, 5 * 4096,
                  R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=6)
        q.step(5000 + copied - 1)  # 1 byte per ns: one ns before the data path is through
        self.assertEqual(q.status(2, 6)[0], R["PLDMA_STATE_BUSY"])
        self.assertEqual(q.chreg(2, R["PLDMA_CH_FAULTS"], 6), 0)
        self.assertEqual(q.ctxreg(6, R["PLDMA_CTX_IRQ_STATUS"]), 0, "fault raised before its time")
        q.step(1)
        self.assertEqual(q.status(2, 6)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.chreg(2, R["PLDMA_CH_FAULTS"], 6), 1)
        self.assertEqual(q.chreg(2, R["PLDMA_CH_DONE_BYTES"], 6), copied)
        self.assertEqual(q.ctxreg(6, R["PLDMA_CTX_IRQ_STATUS"]), 1 << 2)

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
        """Another context waits for the bytes a faulting channel moved."""
        q = self.q
        copied = 3 * 4096
        q.program(0, UNMAPPED - copied, RAM + 0x4000000, 5 * 4096, R["PLDMA_CTRL_START"])
        q.program(1, RAM, RAM + 0x1000000, 1 << 20, R["PLDMA_CTRL_START"], ctx=2)
        t = q.run_until_settled(1, ctx=2)
        self.assertEqual(q.status(1, ctx=2)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.status(0)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(t, 5000 + (1 << 20) + copied)


class Queues(ModelTest):
    """User-level queues (2.1): descriptors from the SQ, completions to the CQ, as the VF."""
    props = "bandwidth=1000,latency-ns=5000"  # 1 byte per ns

    SQ = RAM + 0x8000000     # rings: context c's at SQ + c * 0x100000, CQ + c * 0x100000
    CQ = RAM + 0x8080000
    DATA = RAM + 0x9000000   # sources; destinations at DST
    DST = RAM + 0xA000000

    def ring(self, ctx, **kw):
        return Ring(self.q, ctx, self.SQ + ctx * 0x100000, self.CQ + ctx * 0x100000, **kw)

    def data(self, i, length):
        """Source i (1 MiB apart) filled with its own bytes; returns (src, dst, bytes)."""
        src, dst = self.DATA + i * 0x100000, self.DST + i * 0x100000
        payload = bytes([(i * 7 + k) & 0xFF for k in range(251)]) * (length // 251 + 1)
        self.q.mem_write(src, payload[:length])
        self.q.mem_write(dst, bytes(length))
        return src, dst, payload[:length]

    def ctx_irq(self, ctx):
        return self.q.ctxreg(ctx, R["PLDMA_CTX_IRQ_STATUS"])

    def origin(self, n, ctx):
        q = self.q
        return (q.chreg(n, R["PLDMA_CH_ORIGIN"], ctx),
                q.chreg(n, R["PLDMA_CH_WRID_LO"], ctx) | q.chreg(n, R["PLDMA_CH_WRID_HI"], ctx) << 32)

    def test_version_2_2(self):
        q = self.q
        self.assertEqual(q.reg(R["PLDMA_VERSION"]), 2 << 16 | 11, "2.11 keeps 2.2's registers")
        self.assertEqual(q.vfreg(3, R["PLDMA_VF_VERSION"]), 2 << 16 | 11)
        for ctx in (0, 15):
            self.assertEqual([q.ctxreg(ctx, R[r]) for r in (
                "PLDMA_CTX_SQ_BASE_LO", "PLDMA_CTX_CQ_BASE_LO", "PLDMA_CTX_Q_CFG", "PLDMA_CTX_Q_CTRL",
                "PLDMA_CTX_Q_STATUS", "PLDMA_CTX_Q_ERR_LO", "PLDMA_CTX_Q_SQ_TAIL", "PLDMA_CTX_Q_SQ_HEAD",
                "PLDMA_CTX_Q_CQ_HEAD", "PLDMA_CTX_Q_CQ_TAIL")], [0] * 10,
                "queue registers after reset")
            self.assertEqual(Ring.view(q, ctx).indices(), (0, 0, 0, 0))

    def test_post_n_read_n(self):
        """Eight descriptors, one doorbell, four channels: eight CQEs in order, exact timing."""
        q, r = self.q, self.ring(0, log_sq=3, log_cq=4)
        bufs = [self.data(i, 4096) for i in range(8)]
        r.post([(src, dst, 4096, 0x1000 + i) for i, (src, dst, _) in enumerate(bufs)])
        # All four channels took a descriptor at the doorbell: SQ_HEAD 4, nothing done yet.
        self.assertEqual(r.indices(), (8, 4, 0, 0))
        for n in range(4):
            self.assertEqual(q.status(n)[0], R["PLDMA_STATE_BUSY"])
            self.assertEqual(self.origin(n, 0), (R["PLDMA_ORIGIN_QUEUE"] | n, 0x1000 + n))
        self.assertEqual(q.ctxreg(0, R["PLDMA_CTX_STATUS"]) & R["PLDMA_CTX_ACTIVE"], R["PLDMA_CTX_ACTIVE"])
        # The first CQE when the first 4 KiB are through, the last when all 32 KiB are.
        self.assertEqual(r.run_until_cq(1), 5000 + 4096)
        self.assertEqual(r.run_until_cq(8), 8 * 4096 - 4096)
        self.assertEqual(r.indices(), (8, 8, 0, 8))
        cqes = r.reap()
        self.assertEqual([c.wr_id for c in cqes], [0x1000 + i for i in range(8)])
        for c in cqes:
            self.assertEqual((c.status, c.bytes, c.fault, c.flags, c.rsvd),
                             (R["PLDMA_CQE_SUCCESS"], 4096, 0, R["PLDMA_CQE_PHASE"], 0), c)
        for src, dst, data in bufs:
            self.assertEqual(q.mem_read(dst, 4096), data)
        self.assertEqual(r.vf("PLDMA_VF_CQ_HEAD"), 8)
        # Queue transfers raise no channel interrupt; the channels are back to IDLE with their
        # last descriptor's origin latched.
        self.assertEqual(self.ctx_irq(0), 0)
        self.assertFalse(q.intx())
        for n in range(4):
            self.assertEqual(q.status(n), (R["PLDMA_STATE_IDLE"], 0, False))
            self.assertEqual(self.origin(n, 0), (R["PLDMA_ORIGIN_QUEUE"] | (n + 4), 0x1004 + n))
            self.assertEqual(q.chreg(n, R["PLDMA_CH_DONE_BYTES"]), 4096)
        self.assertEqual(q.ctxreg(0, R["PLDMA_CTX_STATUS"]) & R["PLDMA_CTX_ACTIVE"], 0)
        self.assertEqual(r.status(), (True, False, 0))

    def test_ring_wraparound(self):
        """Rings of 4 entries, 13 descriptors: indices run past the rings, the phase toggles at
        each wrap, slots are reused once software has moved CQ_HEAD."""
        q, r = self.q, self.ring(1, log_sq=2, log_cq=2)
        total, done, bufs = 13, [], {}
        while len(done) < total:
            # Post into every free SQ slot (SQ_HEAD tells which the engine has taken).
            free = r.nsq - (r.tail - r.vf("PLDMA_VF_SQ_HEAD"))
            new = []
            for i in range(r.tail, min(total, r.tail + free)):
                bufs[i] = self.data(i, 1000 + i)
                new.append((bufs[i][0], bufs[i][1], 1000 + i, 0xAB00 + i))
            if new:
                r.post(new)
            q.step()
            done += r.reap()
        self.assertEqual([c.wr_id for c in done], [0xAB00 + i for i in range(total)])
        self.assertEqual([c.phase for c in done], [1 - (i >> 2 & 1) for i in range(total)])
        for i, c in enumerate(done):
            self.assertEqual((c.status, c.bytes), (0, 1000 + i))
            self.assertEqual(q.mem_read(bufs[i][1], 1000 + i), bufs[i][2])
        self.assertEqual(r.indices(), (total, total, total, total))
        # Slot 0 was written four times: it holds CQE 12 (fourth pass: phase 0); slot 3 holds
        # CQE 11 (third pass: phase 1).
        self.assertEqual((r.cqe(0).wr_id, r.cqe(0).phase), (0xAB00 + 12, 0))
        self.assertEqual((r.cqe(3).wr_id, r.cqe(3).phase), (0xAB00 + 11, 1))

    def post_event(self, ctx, arg, count, kind=1):
        q = self.q
        q.set_ctxreg(ctx, R["PLDMA_CTX_EVT_ARG_LO"], arg & 0xFFFFFFFF)
        q.set_ctxreg(ctx, R["PLDMA_CTX_EVT_ARG_HI"], arg >> 32)
        q.set_ctxreg(ctx, R["PLDMA_CTX_EVT_POST"], kind << R["PLDMA_EVT_POST_KIND_SHIFT"] | count)

    def test_event_entry(self):
        """EVT_POST writes an event entry at CQ_TAIL like a completion (phase, CQ_TAIL, the armed
        CQ event), with EVENT and the kind in its flags, EVT_ARG as wr_id, the count as bytes;
        between completions, and taking no descriptor's place."""
        q, r = self.q, self.ring(3, log_sq=3, log_cq=2)
        src, dst, data = self.data(0, 4096)
        r.post([(src, dst, 4096, 0x31)])
        self.assertEqual(r.run_until_cq(1), 5000 + 4096)
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        q.set_ctxreg(3, R["PLDMA_CTX_IRQ_STATUS"], R["PLDMA_CTX_IRQ_CQ"])
        r.set_vf("PLDMA_VF_CQ_HEAD", 1)
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        self.assertEqual(self.ctx_irq(3), 0)
        self.post_event(3, 0x7F12_3456_7000, 512, kind=1)
        self.assertEqual(q.ctxreg(3, R["PLDMA_CTX_EVT_ARG_HI"]), 0x7F12)
        self.assertEqual(r.indices()[3], 2, "CQ_TAIL moved")
        self.assertEqual(self.ctx_irq(3), R["PLDMA_CTX_IRQ_CQ"], "the armed event fired")
        e = r.cqe(1)
        self.assertEqual((e.wr_id, e.status, e.bytes, e.fault, e.rsvd),
                         (0x7F12_3456_7000, 0, 512, 0, 0))
        self.assertEqual(e.flags, R["PLDMA_CQE_PHASE"] | R["PLDMA_CQE_EVENT"]
                         | 1 << R["PLDMA_CQE_KIND_SHIFT"])
        # Up to the end of the first pass (phase 1) ...
        self.post_event(3, 1, 1, kind=2)
        self.post_event(3, 2, 2, kind=2)
        self.assertEqual(r.indices()[3], 4)
        self.assertEqual((r.cqe(3).flags, r.cqe(3).wr_id),
                         (R["PLDMA_CQE_PHASE"] | R["PLDMA_CQE_EVENT"] | 2 << 8, 2))
        self.assertEqual(q.ctxreg(3, R["PLDMA_CTX_Q_STATUS"]) & R["PLDMA_Q_STATUS_EVT_LOST"], 0)
        # ... and a descriptor still completes after them, in the next slot: the second pass,
        # phase 0.
        r.set_vf("PLDMA_VF_CQ_HEAD", 4)
        r.post([(src, dst, 100, 0x32)])
        self.assertEqual(r.run_until_cq(5), 5000 + 100)
        self.assertEqual((r.cqe(4).wr_id, r.cqe(4).flags), (0x32, 0))
        # Kind 0 is ignored.
        q.set_ctxreg(3, R["PLDMA_CTX_EVT_POST"], 5)
        self.assertEqual(r.indices()[3], 5)

    def test_event_lost_when_the_cq_is_full(self):
        """An event finds no room when the CQ holds unconsumed entries plus the slots reserved
        for queue transfers in flight: it is dropped, Q_STATUS.EVT_LOST says so until the next
        enable, and the transfer's completion still gets its slot."""
        q, r = self.q, self.ring(4, log_sq=3, log_cq=1)
        src, dst, data = self.data(1, 8192)
        r.post([(src, dst, 8192, 0x41)])
        self.post_event(4, 0x1000, 1)
        self.assertEqual(r.indices()[3], 1, "one slot reserved, one free: posted")
        self.post_event(4, 0x2000, 2)
        self.assertEqual(r.indices()[3], 1, "none free: dropped")
        self.assertTrue(q.ctxreg(4, R["PLDMA_CTX_Q_STATUS"]) & R["PLDMA_Q_STATUS_EVT_LOST"])
        self.assertEqual(r.run_until_cq(2), 5000 + 8192)
        self.assertEqual([(r.cqe(i).wr_id, bool(r.cqe(i).flags & R["PLDMA_CQE_EVENT"]))
                          for i in (0, 1)], [(0x1000, True), (0x41, False)])
        self.assertEqual(q.mem_read(dst, 8192), data)
        # A stopped queue posts nothing; the next enable clears EVT_LOST.
        r.enable(False)
        self.post_event(4, 0x3000, 3)
        r.enable()
        self.assertEqual(q.ctxreg(4, R["PLDMA_CTX_Q_STATUS"]), R["PLDMA_Q_STATUS_ENABLED"])
        self.assertEqual(r.indices(), (0, 0, 0, 0))

    def test_cq_full_backpressure(self):
        """A CQ of 2 entries: the engine takes a descriptor only when the CQ has room for it and
        every queue transfer in flight, so no CQE is ever overwritten."""
        q, r = self.q, self.ring(2, log_sq=3, log_cq=1)
        bufs = [self.data(i, 4096) for i in range(6)]
        r.post([(src, dst, 4096, 0x200 + i) for i, (src, dst, _) in enumerate(bufs)])
        self.assertEqual(r.indices(), (6, 2, 0, 0), "two taken: the CQ has two slots")
        self.assertEqual(r.run_until_cq(2), 5000 + 2 * 4096)
        q.step(10**7)
        self.assertEqual(r.indices(), (6, 2, 0, 2), "CQ full: nothing more taken")
        for n in (2, 3):
            self.assertEqual(self.origin(n, 2), (0, 0), f"channel {n} never used")
        self.assertEqual([(r.cqe(i).wr_id, r.cqe(i).phase) for i in (0, 1)], [(0x200, 1), (0x201, 1)])
        # Software consumes one CQE: one more descriptor, whose CQE lands in the freed slot.
        r.set_vf("PLDMA_VF_CQ_HEAD", 1)
        self.assertEqual(r.indices(), (6, 3, 1, 2))
        self.assertEqual(r.run_until_cq(3), 5000 + 4096)
        q.step(10**7)
        self.assertEqual(r.indices(), (6, 3, 1, 3))
        self.assertEqual([(r.cqe(i).wr_id, r.cqe(i).phase) for i in (2, 1)], [(0x202, 0), (0x201, 1)],
                         "slot 0 reused with phase 0, slot 1 not overwritten")
        # Two consumed: two descriptors at once.
        r.set_vf("PLDMA_VF_CQ_HEAD", 3)
        self.assertEqual(r.indices(), (6, 5, 3, 3))
        self.assertEqual(r.run_until_cq(5), 5000 + 2 * 4096)
        r.head = 3
        # Round-robin: channel 1 (descriptor 4) has its turn before channel 0 (descriptor 3),
        # as channel 0 had the last one.
        self.assertEqual([c.wr_id for c in r.reap()], [0x204, 0x203])
        self.assertEqual(r.run_until_cq(6), 5000 + 4096)
        self.assertEqual([(c.wr_id, c.phase) for c in r.reap()], [(0x205, 1)])
        for src, dst, data in bufs:
            self.assertEqual(q.mem_read(dst, 4096), data)

    def test_fault_out_of_order_then_nack(self):
        """A faulting descriptor waits in FAULT for the driver while later ones complete on the
        other channels (their CQEs come first); NACK then writes its CQE with NACK_STATUS."""
        q, r = self.q, self.ring(3)
        bufs = [self.data(i, 4096) for i in range(6)]
        descs = [(src, dst, 4096, 0x300 + i) for i, (src, dst, _) in enumerate(bufs)]
        descs[0] = (UNMAPPED - 4096, bufs[0][1], 3 * 4096, 0x300)  # 4 KiB copy, then a fault
        r.post(descs)
        # Six 4 KiB turns back to back, the faulting one first.
        self.assertEqual(r.run_until_cq(5), 5000 + 6 * 4096)
        cqes = r.reap()
        self.assertEqual([c.wr_id for c in cqes], [0x301, 0x302, 0x303, 0x304, 0x305])
        self.assertEqual(q.status(0, 3)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(self.origin(0, 3), (R["PLDMA_ORIGIN_QUEUE"] | 0, 0x300))
        self.assertEqual(q.chreg(0, R["PLDMA_CH_FAULT_LO"], 3), UNMAPPED & 0xFFFFFFFF)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"], 3), 4096)
        # 2.10: in FAULT, SRC, DST and LEN read the faulting descriptor's range (the driver
        # maps the rest ahead), not what was written (nothing here).
        self.assertEqual(ch_range(q, 0, 3), (UNMAPPED - 4096, bufs[0][1], 3 * 4096))
        # A fault is the driver's: the channel's interrupt, though IRQ_EN was never set.
        self.assertEqual(q.chreg(0, R["PLDMA_CH_CTRL"], 3), 0)
        self.assertEqual(self.ctx_irq(3), 1 << 0)
        self.assertTrue(q.intx())
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 3)
        # The driver gives up on it with -EFAULT.
        q.set_ctxreg(3, R["PLDMA_CTX_IRQ_STATUS"], 1 << 0)
        q.set_chreg(0, R["PLDMA_CH_NACK_STATUS"], -14, ctx=3)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_NACK_STATUS"], 3), 0, "write-only")
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"], ctx=3)
        self.assertEqual(r.vf("PLDMA_VF_CQ_TAIL"), 6, "the NACK's CQE is written at once")
        (c,) = r.reap()
        self.assertEqual((c.wr_id, c.status, c.bytes, c.fault, c.phase), (0x300, -14, 4096, UNMAPPED, 1))
        self.assertEqual(q.status(0, 3), (R["PLDMA_STATE_IDLE"], 0, False))
        self.assertEqual(ch_range(q, 0, 3), (0, 0, 0), "out of FAULT: what was written")
        self.assertEqual(self.ctx_irq(3), 0)
        self.assertFalse(q.intx())
        self.assertEqual(q.mem_read(bufs[0][1], 4096), q.mem_read(UNMAPPED - 4096, 4096))
        # NACK_STATUS is per transfer: the next one on channel 0 reports ABORTED by default.
        r.post([(UNMAPPED, RAM, 4096, 0x306)])
        self.assertEqual(self.origin(0, 3), (R["PLDMA_ORIGIN_QUEUE"] | 6, 0x306))
        self.assertEqual(q.run_until_settled(0, 3), 5000)
        self.assertEqual(q.status(0, 3)[0], R["PLDMA_STATE_FAULT"])
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"], ctx=3)
        (c,) = r.reap()
        self.assertEqual((c.wr_id, c.status, c.bytes, c.fault), (0x306, R["PLDMA_CQE_ABORTED"], 0, UNMAPPED))
        self.assertEqual(c.phase, 1)
        self.assertEqual(r.indices(), (7, 7, 7, 7))

    def test_nack_while_busy(self):
        q, r = self.q, self.ring(3)
        src, dst, _ = self.data(0, 1 << 20)
        r.post([(src, dst, 1 << 20, 0x77)])
        q.step(5000 + STEP - 1)  # the first quantum is copied, its turn not through
        q.set_chreg(0, R["PLDMA_CH_NACK_STATUS"], -4, ctx=3)
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"], ctx=3)
        (c,) = r.reap()
        self.assertEqual((c.wr_id, c.status, c.bytes, c.fault), (0x77, -4, STEP, 0))
        self.assertEqual(self.ctx_irq(3), 0, "no channel interrupt for a NACKed queue transfer")

    def test_cq_arm_fires_once(self):
        q, r = self.q, self.ring(4)
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        self.assertEqual(r.vf("PLDMA_VF_CQ_ARM"), 0, "write-only")
        q.step(10**6)
        self.assertEqual(self.ctx_irq(4), 0, "armed on an empty CQ: nothing yet")
        bufs = [self.data(i, 4096) for i in range(3)]
        r.post([(src, dst, 4096, 0x400 + i) for i, (src, dst, _) in enumerate(bufs)])
        q.step(5000 + 4096 - 1)
        self.assertEqual(self.ctx_irq(4), 0)
        q.step(1)
        self.assertEqual(r.vf("PLDMA_VF_CQ_TAIL"), 1)
        self.assertEqual(self.ctx_irq(4), R["PLDMA_CTX_IRQ_CQ"], "the first CQE fires the event")
        self.assertTrue(q.intx())
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 4)
        q.set_ctxreg(4, R["PLDMA_CTX_IRQ_STATUS"], R["PLDMA_CTX_IRQ_CQ"])
        self.assertFalse(q.intx())
        r.run_until_cq(3)
        self.assertEqual(self.ctx_irq(4), 0, "once: the later CQEs do not fire it again")
        # Armed with CQEs pending: at once.
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        self.assertEqual(self.ctx_irq(4), R["PLDMA_CTX_IRQ_CQ"])
        q.set_ctxreg(4, R["PLDMA_CTX_IRQ_STATUS"], R["PLDMA_CTX_IRQ_CQ"])
        # Consumed, armed, one more: it fires at that CQE, and only then.
        self.assertEqual(len(r.reap()), 3)
        r.set_vf("PLDMA_VF_CQ_ARM", 2)  # not the arming bit: ignored
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        self.assertEqual(self.ctx_irq(4), 0)
        r.post([(bufs[0][0], bufs[0][1], 100, 0x403)])
        self.assertEqual(r.run_until_cq(4), 5000 + 100)
        self.assertEqual(self.ctx_irq(4), R["PLDMA_CTX_IRQ_CQ"])
        q.set_ctxreg(4, R["PLDMA_CTX_IRQ_STATUS"], R["PLDMA_CTX_IRQ_CQ"])
        r.set_vf("PLDMA_VF_CQ_ARM", 2)
        self.assertEqual(self.ctx_irq(4), 0, "bit 1 does not arm")

    def test_bad_descriptors_complete_at_once(self):
        """Descriptors the engine refuses end at the doorbell, each with its CQE status, and
        raise no interrupt; the channel is free for the next one at once."""
        q, r = self.q, self.ring(5, log_sq=3, log_cq=3)
        src, dst, data = self.data(0, 300)
        bad = [
            ((src, dst, 0, 0x500), R["PLDMA_CQE_BAD_LEN"]),
            ((src, dst, (1 << 30) + 1, 0x501), R["PLDMA_CQE_BAD_LEN"]),
            ((src, dst, 0, 0x502, 0x10), R["PLDMA_CQE_BAD_FLAGS"]),   # flags checked first
            ((src, dst, 300, 0x503, 0x80000000), R["PLDMA_CQE_BAD_FLAGS"]),
            ((2**64 - 100, dst, 4096, 0x504), R["PLDMA_CQE_BAD_ADDR"]),
            ((src, src + 10, 300, 0x505), R["PLDMA_CQE_OVERLAP"]),
        ]
        self.assertEqual(R["PLDMA_CQE_BAD_LEN"], -(256 + R["PLDMA_ERR_BAD_LEN"]))
        r.post([d for d, _ in bad] + [(src, dst, 300, 0x506)])
        self.assertEqual(r.indices(), (7, 7, 0, 6), "six CQEs without time passing")
        cqes = r.reap()
        self.assertEqual([(c.wr_id, c.status, c.bytes) for c in cqes],
                         [(d[3], st, 0) for d, st in bad])
        self.assertEqual(self.ctx_irq(5), 0)
        self.assertFalse(q.intx())
        self.assertEqual(self.origin(0, 5), (R["PLDMA_ORIGIN_QUEUE"] | 6, 0x506),
                         "every one went through channel 0")
        self.assertEqual(r.run_until_cq(7), 5000 + 300)
        (c,) = r.reap()
        self.assertEqual((c.wr_id, c.status, c.bytes), (0x506, 0, 300))
        self.assertEqual(q.mem_read(dst, 300), data)
        self.assertEqual(q.mem_read(src + 10, 10), data[10:20], "the overlapping one copied nothing")

    def test_sq_fetch_failure(self):
        """A descriptor that cannot be read stops the queue: ERROR/SQ_FETCH, bit 9, Q_ERR."""
        q, r = self.q, self.ring(6, log_sq=1, enable=False)
        r.configure(UNMAPPED, r.cq, 1 | 3 << 8)
        r.enable()
        self.assertEqual(r.status(), (True, False, 0), "alignment alone is checked at ENABLE")
        r.post([(RAM, RAM + 0x100000, 64, 0x600)])
        self.assertEqual(r.status(), (True, True, R["PLDMA_QERR_SQ_FETCH"]))
        self.assertEqual(r.err_addr(), UNMAPPED)
        self.assertEqual(self.ctx_irq(6), R["PLDMA_CTX_IRQ_QERR"])
        self.assertTrue(q.intx())
        self.assertEqual(r.indices(), (1, 0, 0, 0), "the descriptor was not taken")
        # Stopped: another doorbell changes nothing.
        r.post([(RAM, RAM + 0x100000, 64, 0x601)])
        q.step(10**6)
        self.assertEqual(r.indices(), (2, 0, 0, 0))
        self.assertEqual(q.status(0, 6)[0], R["PLDMA_STATE_IDLE"])
        # Re-enabling clears the error (the interrupt bit is the driver's to clear).
        r.configure(r.sq, r.cq, 1 | 3 << 8)
        r.enable(False)
        self.assertEqual(r.status(), (False, True, R["PLDMA_QERR_SQ_FETCH"]), "kept until re-enabled")
        r.enable()
        self.assertEqual(r.status(), (True, False, 0))
        self.assertEqual(r.err_addr(), 0)
        self.assertEqual(self.ctx_irq(6), R["PLDMA_CTX_IRQ_QERR"])
        q.set_ctxreg(6, R["PLDMA_CTX_IRQ_STATUS"], R["PLDMA_CTX_IRQ_QERR"])
        self.assertFalse(q.intx())
        src, dst, data = self.data(0, 64)
        r.post([(src, dst, 64, 0x602)])
        r.run_until_cq(1)
        self.assertEqual(r.reap()[0].wr_id, 0x602)
        # The VF without bus mastering cannot read the next descriptor (SQ slot 1).
        q.set_vf_master(6, False)
        r.post([(src, dst, 64, 0x603)])
        self.assertEqual(r.status(), (True, True, R["PLDMA_QERR_SQ_FETCH"]))
        self.assertEqual(r.err_addr(), r.sq + 32)

    def test_cq_write_failure(self):
        q, r = self.q, self.ring(7, enable=False)
        r.configure(r.sq, UNMAPPED, 3 | 3 << 8)
        r.enable()
        src, dst, data = self.data(0, 64)
        r.post([(src, dst, 64, 0x700)])
        self.assertEqual(q.run_until_settled(0, 7), 5000 + 64)
        self.assertEqual(q.mem_read(dst, 64), data, "the copy itself went through")
        self.assertEqual(r.status(), (True, True, R["PLDMA_QERR_CQ_WRITE"]))
        self.assertEqual(r.err_addr(), UNMAPPED)
        self.assertEqual(r.indices(), (1, 1, 0, 0))
        self.assertEqual(self.ctx_irq(7), R["PLDMA_CTX_IRQ_QERR"])
        self.assertEqual(q.status(0, 7)[0], R["PLDMA_STATE_IDLE"])

    def test_error_stops_the_queue_but_not_its_transfers(self):
        """Transfers in flight when the queue stops on an error run on, and end without a CQE."""
        q, r = self.q, self.ring(7, log_sq=1, log_cq=2)
        src, dst, data = self.data(0, 8192)
        r.post([(src, dst, 8192, 0x710), (UNMAPPED, dst, 64, 0x711)])
        self.assertEqual(r.indices(), (2, 2, 0, 0))
        q.set_vf_master(7, False)
        r.post([(src, dst, 64, 0x712)])  # slot 0 again: unreadable without bus mastering
        self.assertEqual(r.status(), (True, True, R["PLDMA_QERR_SQ_FETCH"]))
        self.assertEqual(r.err_addr(), r.sq)
        q.set_vf_master(7, True)
        r.set_vf("PLDMA_VF_CQ_HEAD", 5)   # a CQ_HEAD past CQ_TAIL: logged, taken as written
        q.run_until_settled(0, 7)
        self.assertEqual(q.status(0, 7)[0], R["PLDMA_STATE_IDLE"])
        self.assertEqual(q.mem_read(dst, 8192), data)
        self.assertEqual(r.indices(), (3, 2, 5, 0), "no CQE")
        self.assertEqual(q.status(1, 7)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(self.ctx_irq(7), R["PLDMA_CTX_IRQ_QERR"] | 1 << 1)

    def test_queue_config_errors(self):
        q, r = self.q, self.ring(8, enable=False)
        qerr = R["PLDMA_CTX_IRQ_QERR"]
        # Doorbells of a disabled queue are ignored.
        r.set_vf("PLDMA_VF_SQ_TAIL", 3)
        r.set_vf("PLDMA_VF_CQ_HEAD", 3)
        self.assertEqual(r.indices(), (0, 0, 0, 0))
        self.assertEqual(r.status(), (False, False, 0))
        cases = [
            (r.sq + 0x800, r.cq, 3 | 3 << 8, r.sq + 0x800),       # SQ misaligned
            (r.sq, r.cq + 32, 3 | 3 << 8, r.cq + 32),             # CQ misaligned
            (r.sq, r.cq, 0 | 3 << 8, 0),                          # SQ of 1 entry
            (r.sq, r.cq, 3 | 13 << 8, 0),                         # CQ of 8192 entries
            (r.sq, r.cq, 31 | 31 << 8, 0),
            (2**64 - 4096, r.cq, 12 | 3 << 8, 2**64 - 4096),      # the SQ wraps past 2^64
            (r.sq, 2**64 - 0x10000, 3 | 12 << 8, 2**64 - 0x10000),
            (r.sq, r.cq, 3 | 3 << 8 | 0x80 << 16, 0),             # channel 7 of 4
        ]
        for sq, cq, cfg, bad in cases:
            with self.subTest(sq=hex(sq), cq=hex(cq), cfg=hex(cfg)):
                r.enable(False)
                r.configure(sq, cq, cfg)
                r.enable()
                self.assertEqual(r.status(), (True, True, R["PLDMA_QERR_BAD_RING"]))
                self.assertEqual(r.err_addr(), bad)
                self.assertEqual(self.ctx_irq(8), qerr)
                self.assertTrue(q.intx())
                r.post([(RAM, RAM + 0x100000, 64, 1)])
                self.assertEqual(r.indices(), (1, 0, 0, 0), "nothing taken")
                q.set_ctxreg(8, R["PLDMA_CTX_IRQ_STATUS"], qerr)
        # A good configuration: enabled, no error, no interrupt; channel masks within range.
        for cfg in (1 | 1 << 8, 12 | 12 << 8, 3 | 3 << 8 | 0x81 << 16, 3 | 3 << 8 | 0x08 << 16):
            r.enable(False)
            r.configure(r.sq, r.cq, cfg)
            r.enable()
            self.assertEqual((r.status(), r.err_addr(), self.ctx_irq(8)), ((True, False, 0), 0, 0),
                             hex(cfg))
        self.assertEqual(q.ctxreg(8, R["PLDMA_CTX_Q_CTRL"]), R["PLDMA_Q_CTRL_ENABLE"])
        # The registers read back; Q_CFG keeps its defined bits only.
        q.set_ctxreg(8, R["PLDMA_CTX_Q_CFG"], 0xFFFFFFFF)
        self.assertEqual(q.ctxreg(8, R["PLDMA_CTX_Q_CFG"]), 0x00FF1F1F)
        self.assertEqual(q.ctxreg(8, R["PLDMA_CTX_SQ_BASE_LO"]), r.sq & 0xFFFFFFFF)
        self.assertEqual(q.ctxreg(8, R["PLDMA_CTX_CQ_BASE_HI"]), r.cq >> 32)
        self.assertEqual(r.status(), (True, False, 0), "Q_CFG is latched at ENABLE only")
        # Channel mask 0x08: channel 3 only.
        r.post([(RAM, RAM + 0x100000, 64, 0x800)])
        self.assertEqual(self.origin(3, 8), (R["PLDMA_ORIGIN_QUEUE"], 0x800))
        r.run_until_cq(1)
        # Enabling sets the indices to 0.
        self.assertEqual(r.indices(), (1, 1, 0, 1))
        r.enable(False)
        self.assertEqual(r.indices(), (1, 1, 0, 1), "readable while disabled")
        r.configure(r.sq, r.cq, 3 | 3 << 8)
        r.enable()
        self.assertEqual(r.status(), (True, False, 0))
        self.assertEqual(r.indices(), (0, 0, 0, 0))

    def test_disable_aborts_queue_transfers(self):
        """Q_CTRL.ENABLE 1 -> 0 stops the queue's transfers at once (no CQE, their interrupt
        bits cleared); a START of the driver on another channel runs on."""
        q, r = self.q, self.ring(9, chans=0b0111)
        s0, d0, _ = self.data(0, 1 << 20)
        s1, d1, _ = self.data(1, 1 << 20)
        s2, d2, data2 = self.data(2, 1 << 20)
        r.post([(s0, d0, 1 << 20, 0x900), (UNMAPPED, d1, 4096, 0x901)])
        q.program(3, s2, d2, 1 << 20, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=9)
        q.step(5000 + STEP)   # channel 1 faulted, channel 0 copied its first quantum
        q.step(STEP)
        self.assertEqual(q.status(1, 9)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(self.ctx_irq(9), 1 << 1)
        done = q.chreg(0, R["PLDMA_CH_DONE_BYTES"], 9)
        self.assertTrue(0 < done < 1 << 20)
        r.enable(False)
        self.assertEqual(r.status(), (False, False, 0))
        self.assertEqual([q.status(n, 9)[0] for n in range(4)],
                         [R["PLDMA_STATE_IDLE"]] * 3 + [R["PLDMA_STATE_BUSY"]])
        self.assertEqual(self.ctx_irq(9), 0)
        self.assertGreater(q.run_until_settled(3, 9), 0)
        self.assertEqual(q.status(3, 9)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(d2, 1 << 20), data2)
        self.assertEqual(self.ctx_irq(9), 1 << 3)
        q.step(10**7)
        self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"], 9), done)
        self.assertEqual(q.mem_read(d0 + done, 4096), bytes(4096), "copied after the disable")
        self.assertEqual(r.indices(), (2, 2, 0, 0), "no CQE")
        r.set_vf("PLDMA_VF_SQ_TAIL", 5)
        self.assertEqual(r.indices(), (2, 2, 0, 0), "doorbell of a disabled queue ignored")

    def pf_indices(self, ctx):
        """(SQ_TAIL, SQ_HEAD, CQ_HEAD, CQ_TAIL) as the PF reads them."""
        return tuple(self.q.ctxreg(ctx, R[r]) for r in (
            "PLDMA_CTX_Q_SQ_TAIL", "PLDMA_CTX_Q_SQ_HEAD", "PLDMA_CTX_Q_CQ_HEAD", "PLDMA_CTX_Q_CQ_TAIL"))

    def set_pf_indices(self, ctx, idx):
        for r, v in zip(("PLDMA_CTX_Q_SQ_TAIL", "PLDMA_CTX_Q_SQ_HEAD", "PLDMA_CTX_Q_CQ_HEAD",
                         "PLDMA_CTX_Q_CQ_TAIL"), idx):
            self.q.set_ctxreg(ctx, R[r], v)

    def test_move_a_queue_between_contexts(self):
        """2.2: the kernel stops a queue on one context, reads its indices, and restores them on
        another context with the same rings: the CQEs go on at the next slot with the right
        phase, a descriptor posted while no context ran the queue is taken, and the armed CQ
        event is kept."""
        q = self.q
        r = Ring(q, 2, self.SQ, self.CQ, log_sq=2, log_cq=2)
        bufs = [self.data(i, 64) for i in range(6)]
        r.post([(src, dst, 64, 0x200 + i) for i, (src, dst, _) in enumerate(bufs[:3])])
        r.run_until_cq(3)
        self.assertEqual([c.wr_id for c in r.reap(advance=False)], [0x200, 0x201, 0x202])
        r.set_vf("PLDMA_VF_CQ_HEAD", 2)
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        st = q.ctxreg(2, R["PLDMA_CTX_Q_STATUS"])
        self.assertEqual(st & (R["PLDMA_Q_STATUS_BUSY"] | R["PLDMA_Q_STATUS_ARMED"]), 0,
                         "CQ_HEAD != CQ_TAIL: the armed event fired at once")
        q.set_ctxreg(2, R["PLDMA_CTX_IRQ_STATUS"], R["PLDMA_CTX_IRQ_CQ"])
        r.set_vf("PLDMA_VF_CQ_HEAD", 3)
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        self.assertEqual(q.ctxreg(2, R["PLDMA_CTX_Q_STATUS"]) & R["PLDMA_Q_STATUS_ARMED"],
                         R["PLDMA_Q_STATUS_ARMED"])
        self.assertEqual(self.pf_indices(2), (3, 3, 3, 3))
        self.assertEqual(self.pf_indices(2), r.indices())
        # Stop it: the indices stay.
        r.enable(False)
        self.assertEqual(self.pf_indices(2), (3, 3, 3, 3))
        # A descriptor posted meanwhile (the doorbell page is gone): the kernel sets SQ_TAIL.
        r.tail = 3
        r.write([(bufs[3][0], bufs[3][1], 64, 0x203)])
        # The same rings on context 5, where the queue was.
        r5 = copy.copy(r)
        r5.ctx = 5
        r5.configure(self.SQ, self.CQ, 2 | 2 << 8)
        self.set_pf_indices(5, (4, 3, 3, 3))
        self.assertEqual(self.pf_indices(5), (4, 3, 3, 3))
        q.set_ctxreg(5, R["PLDMA_CTX_Q_CTRL"], R["PLDMA_Q_CTRL_ENABLE"] | R["PLDMA_Q_CTRL_RESTORE"]
                     | R["PLDMA_Q_CTRL_ARM"])
        self.assertEqual(r5.status(), (True, False, 0))
        self.assertEqual(q.ctxreg(5, R["PLDMA_CTX_Q_CTRL"]), R["PLDMA_Q_CTRL_ENABLE"],
                         "RESTORE and ARM read as 0")
        self.assertEqual(r5.indices(), (4, 4, 3, 3), "the posted descriptor was taken")
        r5.tail, r5.head = 4, 3
        r5.post([(src, dst, 64, 0x200 + i) for i, (src, dst, _) in enumerate(bufs[4:], 4)])
        r5.run_until_cq(6)
        self.assertEqual(self.ctx_irq(5), R["PLDMA_CTX_IRQ_CQ"], "the restored arm fired")
        cqes = r5.reap()
        self.assertEqual([c.wr_id for c in cqes], [0x203, 0x204, 0x205])
        for i, (src, dst, data) in enumerate(bufs):
            self.assertEqual(q.mem_read(dst, 64), data, f"copy {i}")
        self.assertEqual(self.pf_indices(5), (6, 6, 6, 6))
        self.assertEqual(r.indices(), (3, 3, 3, 3), "context 2 untouched")

    def test_queue_busy_and_index_rules(self):
        """Q_STATUS.BUSY while a queue transfer is in flight; the PF's index writes are ignored
        while the queue runs; restored indices more than a ring apart are BAD_RING."""
        q, r = self.q, self.ring(6, log_sq=2, log_cq=2)
        src, dst, _ = self.data(0, 1 << 20)
        r.post([(src, dst, 1 << 20, 0x600)])
        self.assertTrue(q.ctxreg(6, R["PLDMA_CTX_Q_STATUS"]) & R["PLDMA_Q_STATUS_BUSY"])
        self.set_pf_indices(6, (9, 9, 9, 9))
        self.assertEqual(self.pf_indices(6), (1, 1, 0, 0), "ignored while enabled")
        r.run_until_cq(1)
        self.assertFalse(q.ctxreg(6, R["PLDMA_CTX_Q_STATUS"]) & R["PLDMA_Q_STATUS_BUSY"])
        r.enable(False)
        for idx in ((5, 0, 0, 0), (1, 1, 0, 5)):
            self.set_pf_indices(6, idx)
            q.set_ctxreg(6, R["PLDMA_CTX_Q_CTRL"],
                         R["PLDMA_Q_CTRL_ENABLE"] | R["PLDMA_Q_CTRL_RESTORE"])
            self.assertEqual(r.status(), (True, True, R["PLDMA_QERR_BAD_RING"]), idx)
            r.enable(False)
        # Without RESTORE, enabling starts from 0 as in 2.1.
        self.set_pf_indices(6, (3, 3, 3, 3))
        r.enable()
        self.assertEqual(self.pf_indices(6), (0, 0, 0, 0))

    KSQ = RAM + 0x8800000    # the kernel queue's rings (in the PF's DMA space: RAM, bypass)
    KCQ = RAM + 0x8880000

    def kq_setup(self, ctx, chans, log2=3):
        """Program and enable context ctx's kernel queue (PF bus mastering on)."""
        q = self.q
        q.writew(q.pf + PCI_COMMAND, CMD_MEMORY | CMD_MASTER)
        self.addCleanup(q.writew, q.pf + PCI_COMMAND, CMD_MEMORY)
        q.mem_write(self.KSQ, bytes(32 << log2))
        q.mem_write(self.KCQ, bytes(32 << log2))
        for r, v in (("PLDMA_CTX_KQ_SQ_BASE_LO", self.KSQ), ("PLDMA_CTX_KQ_SQ_BASE_HI", 0),
                     ("PLDMA_CTX_KQ_CQ_BASE_LO", self.KCQ), ("PLDMA_CTX_KQ_CQ_BASE_HI", 0),
                     ("PLDMA_CTX_KQ_CFG", log2 | log2 << 8 | chans << 16),
                     ("PLDMA_CTX_KQ_CTRL", R["PLDMA_Q_CTRL_ENABLE"])):
            q.set_ctxreg(ctx, R[r], v)

    def kq_post(self, ctx, first, descs, log2=3):
        """Write descriptors at kernel SQ indices first.. and ring the PF doorbell."""
        for i, d in enumerate(descs, first):
            self.q.mem_write(self.KSQ + (i % (1 << log2)) * 32, sqe(*d))
        self.q.set_ctxreg(ctx, R["PLDMA_CTX_KQ_SQ_TAIL"], first + len(descs))

    def kq_indices(self, ctx):
        return tuple(self.q.ctxreg(ctx, R[r]) for r in (
            "PLDMA_CTX_KQ_SQ_TAIL", "PLDMA_CTX_KQ_SQ_HEAD", "PLDMA_CTX_KQ_CQ_HEAD",
            "PLDMA_CTX_KQ_CQ_TAIL"))

    def test_kernel_queue_beside_the_user_queue(self):
        """2.2: the kernel's queue runs beside the user's on one context, each on its channels:
        its rings are the PF's, its doorbell a PF register, its CQEs raise KCQ; the data moves as
        the context's VF; the user's queue sees nothing of it."""
        q = self.q
        r = self.ring(7, chans=0b1110)
        self.kq_setup(7, 0b0001)
        self.assertEqual(q.ctxreg(7, R["PLDMA_CTX_KQ_STATUS"]), R["PLDMA_Q_STATUS_ENABLED"])
        bufs = [self.data(i, 4096) for i in range(7)]
        self.kq_post(7, 0, [(src, dst, 4096, 0xC0 + i) for i, (src, dst, _) in enumerate(bufs[:3])])
        r.post([(src, dst, 4096, 0x70 + i) for i, (src, dst, _) in enumerate(bufs[3:])])
        self.assertEqual(q.chreg(0, R["PLDMA_CH_ORIGIN"], 7),
                         R["PLDMA_ORIGIN_QUEUE"] | R["PLDMA_ORIGIN_KERNEL"] | 0)
        self.assertEqual(q.chreg(1, R["PLDMA_CH_ORIGIN"], 7), R["PLDMA_ORIGIN_QUEUE"] | 0)
        self.assertTrue(q.ctxreg(7, R["PLDMA_CTX_KQ_STATUS"]) & R["PLDMA_Q_STATUS_BUSY"])
        r.run_until_cq(4)
        start = q.now()
        while self.kq_indices(7)[3] < 3:
            self.assertLess(q.step() - start, 10**9)
        self.assertEqual(self.kq_indices(7), (3, 3, 0, 3))
        self.assertTrue(self.ctx_irq(7) & R["PLDMA_CTX_IRQ_KCQ"])
        self.assertFalse(self.ctx_irq(7) & R["PLDMA_CTX_IRQ_CQ"], "the user's CQ is not armed")
        for i in range(3):
            c = Cqe(q.mem_read(self.KCQ + i * 32, 32))
            self.assertEqual((c.wr_id, c.status, c.bytes, c.phase), (0xC0 + i, 0, 4096, 1))
        self.assertEqual(sorted(c.wr_id for c in r.reap()), [0x70 + i for i in range(4)])
        for src, dst, data in bufs:
            self.assertEqual(q.mem_read(dst, 4096), data)
        # The interrupt clears; the next CQE raises it again; CQ_HEAD is the kernel's.
        q.set_ctxreg(7, R["PLDMA_CTX_IRQ_STATUS"], R["PLDMA_CTX_IRQ_KCQ"])
        q.set_ctxreg(7, R["PLDMA_CTX_KQ_CQ_HEAD"], 3)
        self.kq_post(7, 3, [(bufs[0][0], bufs[0][1], 64, 0xC3)])
        start = q.now()
        while self.kq_indices(7)[3] < 4:
            self.assertLess(q.step() - start, 10**9)
        self.assertEqual(self.ctx_irq(7) & R["PLDMA_CTX_IRQ_KCQ"], R["PLDMA_CTX_IRQ_KCQ"])
        self.assertEqual(Cqe(q.mem_read(self.KCQ + 3 * 32, 32)).wr_id, 0xC3)
        # QUIESCE stops it, as it does the user's.
        q.set_ctxreg(7, R["PLDMA_CTX_CTRL"], R["PLDMA_CTX_QUIESCE"])
        self.assertEqual((q.ctxreg(7, R["PLDMA_CTX_KQ_STATUS"]), self.kq_indices(7)),
                         (0, (0, 0, 0, 0)))

    def test_kernel_queue_errors(self):
        """The kernel queue's own errors: KQERR, not QERR; a NACKed transfer's KCQE carries the
        NACK status; its doorbell is ignored while it is disabled."""
        q = self.q
        r = self.ring(8, chans=0b1110)
        self.kq_setup(8, 0b0001)
        # A transfer that faults (no memory there), NACKed by the kernel with -EFAULT.
        self.kq_post(8, 0, [(UNMAPPED, RAM + 0xA00000, 4096, 0xE0)])
        self.assertEqual(q.run_until_settled(0, 8), 5000)
        self.assertEqual(q.status(0, 8)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(self.ctx_irq(8), 1, "a fault raises the channel's interrupt")
        self.assertEqual(q.chreg(0, R["PLDMA_CH_ORIGIN"], 8),
                         R["PLDMA_ORIGIN_QUEUE"] | R["PLDMA_ORIGIN_KERNEL"])
        self.assertEqual(q.chreg(0, R["PLDMA_CH_WRID_LO"], 8), 0xE0)
        q.set_chreg(0, R["PLDMA_CH_NACK_STATUS"], (-14) & 0xFFFFFFFF, 8)
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_NACK"], 8)
        c = Cqe(q.mem_read(self.KCQ, 32))
        self.assertEqual((c.wr_id, c.status, c.fault), (0xE0, -14, UNMAPPED))
        # Without the PF as a bus master, the kernel queue cannot read its descriptor.
        q.writew(q.pf + PCI_COMMAND, CMD_MEMORY)
        self.kq_post(8, 1, [(RAM, RAM + 0xA00000, 64, 0xE1)])
        st = q.ctxreg(8, R["PLDMA_CTX_KQ_STATUS"])
        self.assertEqual((st & R["PLDMA_Q_STATUS_ERROR"], st >> R["PLDMA_Q_STATUS_ERR_SHIFT"]),
                         (R["PLDMA_Q_STATUS_ERROR"], R["PLDMA_QERR_SQ_FETCH"]))
        self.assertEqual(q.ctxreg(8, R["PLDMA_CTX_KQ_ERR_LO"]), self.KSQ + 32)
        self.assertTrue(self.ctx_irq(8) & R["PLDMA_CTX_IRQ_KQERR"])
        self.assertFalse(self.ctx_irq(8) & R["PLDMA_CTX_IRQ_QERR"])
        self.assertEqual(r.status(), (True, False, 0), "the user's queue runs on")
        # Disabled: the doorbell is ignored.
        q.set_ctxreg(8, R["PLDMA_CTX_KQ_CTRL"], 0)
        q.set_ctxreg(8, R["PLDMA_CTX_KQ_SQ_TAIL"], 9)
        self.assertEqual(self.kq_indices(8)[0], 2)

    def test_quiesce_disables_the_queue(self):
        q, r = self.q, self.ring(10)
        src, dst, _ = self.data(0, 1 << 20)
        r.post([(src, dst, 1 << 20, 0xA00 + i) for i in range(6)])
        r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
        q.step(5000 + STEP)
        self.assertEqual(r.indices(), (6, 4, 0, 0))
        q.set_ctxreg(10, R["PLDMA_CTX_CTRL"], R["PLDMA_CTX_QUIESCE"])
        self.assertEqual(r.status(), (False, False, 0))
        self.assertEqual(q.ctxreg(10, R["PLDMA_CTX_Q_CTRL"]), 0)
        self.assertEqual(r.indices(), (0, 0, 0, 0))
        for n in range(q.nchan):
            self.assertEqual(q.status(n, 10)[0], R["PLDMA_STATE_IDLE"])
        cq = q.mem_read(r.cq, 32 * r.ncq)
        q.step(10**8)
        self.assertEqual(q.mem_read(r.cq, 32 * r.ncq), cq, "no CQE after QUIESCE")
        self.assertEqual(self.ctx_irq(10), 0, "nor a CQ event")
        r.set_vf("PLDMA_VF_SQ_TAIL", 9)
        self.assertEqual(r.indices(), (0, 0, 0, 0))
        # The programmed registers stay: enabling again is enough.
        self.assertEqual(q.ctxreg(10, R["PLDMA_CTX_SQ_BASE_LO"]), r.sq & 0xFFFFFFFF)
        r.enable()
        r.post([(src, dst, 64, 0xAFF)])
        self.assertEqual(r.run_until_cq(1), 5000 + 64)
        self.assertEqual(r.reap()[0].wr_id, 0xAFF)

    def test_reset_clears_the_queues(self):
        q, r = self.q, self.ring(11)
        r.post([(RAM, RAM + 0x100000, 64, 1)])
        r.run_until_cq(1)
        q.set_reg(R["PLDMA_RESET"], R["PLDMA_RESET_MAGIC"])
        self.assertEqual(r.status(), (False, False, 0))
        self.assertEqual(r.indices(), (0, 0, 0, 0))
        self.assertEqual([q.ctxreg(11, R[n]) for n in ("PLDMA_CTX_SQ_BASE_LO", "PLDMA_CTX_CQ_BASE_LO",
                                                       "PLDMA_CTX_Q_CFG")], [0, 0, 0])
        self.assertEqual(self.origin(0, 11), (0, 0))

    def test_kernel_start_beside_the_queue(self):
        """With a channel mask the driver keeps channels for its own STARTs: they behave as in
        2.0 (interrupt, DONE kept until the next START), the queue runs on the others."""
        q, r = self.q, self.ring(12, chans=0b0011)
        bufs = [self.data(i, 4096) for i in range(6)]
        ks, kd, kdata = self.data(7, 8192)
        r.post([(src, dst, 4096, 0xC00 + i) for i, (src, dst, _) in enumerate(bufs[:4])])
        q.program(2, ks, kd, 8192, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=12)
        self.assertEqual(r.indices(), (4, 2, 0, 0))
        # Data path: d0 (ch0), d1 (ch1), the START (ch2, 8 KiB), d2 (ch0), d3 (ch1).
        t = q.run_until_settled(2, 12)
        self.assertEqual(t, 5000 + 4 * 4096)
        self.assertEqual(q.status(2, 12)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(self.ctx_irq(12), 1 << 2)
        self.assertEqual(self.origin(2, 12), (0, 0))
        self.assertEqual(q.mem_read(kd, 8192), kdata)
        self.assertEqual(r.run_until_cq(4), 2 * 4096)
        self.assertEqual([c.wr_id for c in r.reap()], [0xC00, 0xC01, 0xC02, 0xC03])
        # More descriptors: channels 2 and 3 stay out of it.
        r.post([(src, dst, 4096, 0xC04 + i) for i, (src, dst, _) in enumerate(bufs[4:])])
        r.run_until_cq(6)
        self.assertEqual(q.status(2, 12)[0], R["PLDMA_STATE_DONE"], "the driver's DONE is kept")
        self.assertEqual(self.origin(3, 12), (0, 0))
        self.assertEqual(self.ctx_irq(12), 1 << 2)
        for src, dst, data in bufs:
            self.assertEqual(q.mem_read(dst, 4096), data)

    def test_start_on_a_channel_the_queue_holds_is_rejected(self):
        """Without a channel mask the queue takes any free channel; a START that finds one
        busy with a queue transfer is rejected, as START on any busy channel."""
        q, r = self.q, self.ring(12)
        src, dst, _ = self.data(0, STEP)
        r.post([(src, dst, STEP, 0xD00 + i) for i in range(4)])
        q.program(1, src, dst + 0x100000, 64, R["PLDMA_CTRL_START"], ctx=12)
        self.assertEqual(q.status(1, 12), (R["PLDMA_STATE_BUSY"], 0, True))
        self.assertEqual(self.origin(1, 12), (R["PLDMA_ORIGIN_QUEUE"] | 1, 0xD01))
        self.assertEqual(q.chreg(1, R["PLDMA_CH_LEN"], 12), 64, "SRC/DST/LEN are the driver's")
        r.run_until_cq(4)
        q.set_chreg(1, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_START"], ctx=12)
        self.assertEqual(self.origin(1, 12), (0, 0))
        self.assertEqual(q.run_until_settled(1, 12), 5000 + 64)
        self.assertEqual(q.status(1, 12), (R["PLDMA_STATE_DONE"], 0, False))

    def test_two_contexts_are_independent(self):
        q = self.q
        a, b = self.ring(13), self.ring(14)
        bufs = [self.data(i, 4096) for i in range(6)]
        a.post([(src, dst, 4096, 0xA000 + i) for i, (src, dst, _) in enumerate(bufs[:3])])
        self.assertEqual(b.indices(), (0, 0, 0, 0), "context 13's doorbell is its own")
        b.post([(src, dst, 4096, 0xB000 + i) for i, (src, dst, _) in enumerate(bufs[3:])])
        # The data path alternates between the contexts: a0 b0 a1 b1 a2 b2.
        t = q.settle_times([(13, 2), (14, 2)])
        self.assertEqual((t[(13, 2)], t[(14, 2)]), (5000 + 5 * 4096, 5000 + 6 * 4096))
        self.assertEqual([c.wr_id for c in a.reap()], [0xA000, 0xA001, 0xA002])
        self.assertEqual([c.wr_id for c in b.reap()], [0xB000, 0xB001, 0xB002])
        for src, dst, data in bufs:
            self.assertEqual(q.mem_read(dst, 4096), data)
        # An error of one context's queue leaves the other's running.
        b.configure(b.sq + 0x100, b.cq, 3 | 3 << 8)
        b.enable(False)
        b.enable()
        self.assertEqual(b.status(), (True, True, R["PLDMA_QERR_BAD_RING"]))
        self.assertEqual(a.status(), (True, False, 0))
        self.assertEqual(self.ctx_irq(13), 0)
        self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 14)
        a.post([(bufs[0][0], bufs[0][1], 64, 0xA003)])
        self.assertEqual(a.run_until_cq(4), 5000 + 64)
        self.assertEqual(a.reap()[0].wr_id, 0xA003)
        # QUIESCE of one context leaves the other's queue enabled.
        q.set_ctxreg(14, R["PLDMA_CTX_CTRL"], R["PLDMA_CTX_QUIESCE"])
        self.assertEqual(a.status(), (True, False, 0))

    def test_rings_in_the_engines_own_registers(self):
        """Queue DMA may reach the engine's registers; QEMU survives and the state stays sane.
        A CQ over the context's own block (context 12's is page-aligned): the CQE's wr_id lands
        on CTX_CTRL and quiesces the context. A CQ over the context's VF page: a CQE rings the
        doorbell. SQs over the registers: they read as descriptors, without side effects."""
        q, ctx = self.q, 12
        blk = BAR + q.ctx_off(ctx, 0)
        self.assertEqual(blk % 4096, 0)
        r = Ring(q, ctx, self.SQ, blk, log_cq=1)
        r.post([(RAM, RAM + 0x100000, 64, 1 << 32)])
        self.assertEqual(q.run_until_settled(0, ctx), 5000 + 64)
        self.assertTrue(q.alive())
        self.assertEqual(r.status(), (False, False, 0), "the CQE's write quiesced the context")
        self.assertEqual(q.status(0, ctx)[0], R["PLDMA_STATE_IDLE"])
        page = VF_BAR + ctx * R["PLDMA_VF_MMIO_SIZE"]
        r = Ring(q, ctx, self.SQ, page, log_cq=2)
        r.post([(RAM, RAM + 0x100000, 64, 7)] * 4)
        q.step(10**7)
        self.assertTrue(q.alive())
        self.assertEqual(r.vf("PLDMA_VF_CONTEXT"), ctx)
        for sq in (blk, page, BAR):
            r = Ring(q, ctx, sq, self.CQ, log_sq=1, log_cq=2)
            r.set_vf("PLDMA_VF_SQ_TAIL", 2)
            q.step(10**6)
            self.assertTrue(q.alive())
            self.assertEqual(q.reg(R["PLDMA_ID"]), R["PLDMA_ID_MAGIC"])

    def test_random_queue_programming(self):
        """Random queue registers, doorbells and ring contents, time passing: QEMU survives,
        the indices stay consistent, and the engine still works afterwards."""
        q = self.q
        rnd = random.Random(11)
        bases = [self.SQ, self.CQ, self.SQ + 0x1000, RAM, UNMAPPED, BAR, BAR + q.ctx_off(2, 0),
                 VF_BAR, VF_BAR + 2 * 4096, 2**64 - 4096, RAM + 0x10]
        regs = ["PLDMA_CTX_SQ_BASE_LO", "PLDMA_CTX_SQ_BASE_HI", "PLDMA_CTX_CQ_BASE_LO",
                "PLDMA_CTX_CQ_BASE_HI", "PLDMA_CTX_Q_CFG", "PLDMA_CTX_Q_CTRL",
                "PLDMA_CTX_IRQ_STATUS", "PLDMA_CTX_CTRL"]
        vfregs = ["PLDMA_VF_SQ_TAIL", "PLDMA_VF_CQ_HEAD", "PLDMA_VF_CQ_ARM", "PLDMA_VF_SQ_HEAD"]
        # Rings of random descriptors: some good, most not.
        descs = b"".join(sqe(rnd.choice([RAM + 0x100000, UNMAPPED - 64, RAM, 2**64 - 8]),
                             rnd.choice([RAM + 0x200000, RAM + 0x300000, UNMAPPED]),
                             rnd.choice([0, 64, 4096, 70000, 1 << 31]), rnd.getrandbits(64),
                             rnd.choice([0, 0, 0, 1])) for _ in range(128))
        q.mem_write(self.SQ, descs)
        q.mem_write(self.SQ + 0x1000, descs)
        for i in range(2000):
            ctx = rnd.randrange(3)
            what = rnd.random()
            if what < 0.3:
                base = rnd.choice(bases)
                q.set_ctxreg(ctx, R[rnd.choice(regs[:4])], base >> (32 if rnd.random() < 0.3 else 0))
            elif what < 0.45:
                q.set_ctxreg(ctx, R["PLDMA_CTX_Q_CFG"], rnd.choice([0x303, 0x101, 0xC0C, rnd.getrandbits(32)]))
            elif what < 0.55:
                q.set_ctxreg(ctx, R[rnd.choice(regs[5:])], rnd.choice([0, 1, 0xFFFFFFFF]))
            elif what < 0.9:
                q.writel(VF_BAR + ctx * 4096 + R[rnd.choice(vfregs)],
                         rnd.choice([rnd.randrange(8), rnd.getrandbits(32), 1]))
            else:
                n = rnd.randrange(q.nchan)
                q.set_chreg(n, R[rnd.choice(["PLDMA_CH_CTRL", "PLDMA_CH_NACK_STATUS"])],
                            rnd.choice([R["PLDMA_CTRL_NACK"], R["PLDMA_CTRL_RESUME"], 1, -5]), ctx)
            if i % 40 == 0:
                q.step(rnd.randrange(1, 10**6))
            if i % 200 == 0:
                for c in range(3):
                    enabled, error, code = Ring.view(q, c).status()
                    self.assertLessEqual(code, R["PLDMA_QERR_CQ_WRITE"])
                    self.assertEqual(error, code != 0)
                    for n in range(q.nchan):
                        self.assertLessEqual(q.status(n, c)[0], R["PLDMA_STATE_ERROR"])
        self.assertTrue(q.alive())
        q.set_reg(R["PLDMA_RESET"], R["PLDMA_RESET_MAGIC"])
        r = self.ring(0)
        src, dst, data = self.data(0, 100)
        r.post([(src, dst, 100, 5)])
        self.assertEqual(r.run_until_cq(1), 5000 + 100)
        self.assertEqual(q.mem_read(dst, 100), data)


class QueueResume(unittest.TestCase):
    """RESUME of a queue transfer, after the driver made its page valid. With the SMMU in
    bypass no address can become valid in RAM, nor in PCI memory (every address there reads,
    as all ones); hot-plugged memory can: the source is where a pc-dimm will appear (memory
    hotplug on virt needs the ACPI GED, which needs firmware: an empty one, as the CPU never
    runs). The transfer faults there; the test plugs the DIMM, fills it and resumes."""

    def test_resume_after_the_page_appears(self):
        fw = os.path.join(tempfile.mkdtemp(prefix="pldma-fw-"), "zero.fd")
        with open(fw, "wb") as f:
            f.write(bytes(4096))
        q = Qtest("bandwidth=1000,latency-ns=5000", extra=(
            "-bios", fw, "-m", f"{RAM_SIZE >> 20}M,slots=1,maxmem=1G",
            "-object", "memory-backend-ram,id=hot,size=64M"))
        try:
            r = Ring(q, 1, RAM + 0x100000, RAM + 0x200000)
            dimm = 0x80000000   # the start of virt's device memory, above this RAM
            src, dst = dimm + 0x3000 - 100, RAM + 0x300000
            q.mem_write(dst, b"\xEE" * 8192)
            r.post([(src, dst, 8192, 0xF00D)])
            self.assertEqual(q.run_until_settled(0, 1), 5000)
            self.assertEqual(q.status(0, 1)[0], R["PLDMA_STATE_FAULT"])
            self.assertEqual(q.chreg(0, R["PLDMA_CH_FAULT_LO"], 1), src)
            self.assertEqual(q.chreg(0, R["PLDMA_CH_DONE_BYTES"], 1), 0)
            self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"]), 1 << 0)
            self.assertEqual(r.vf("PLDMA_VF_CQ_TAIL"), 0)
            # The driver makes the memory valid and resumes: latency and 8 KiB again.
            res = q.vm.qmp("device_add", driver="pc-dimm", id="dimm0", memdev="hot")
            self.assertEqual(res, {"return": {}})
            addr = q.vm.qmp("query-memory-devices")["return"][0]["data"]["addr"]
            self.assertEqual(addr, dimm)
            data = os.urandom(8192)
            q.mem_write(src, data)
            q.set_ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"], 1)
            q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"], 1)
            self.assertEqual(q.status(0, 1)[0], R["PLDMA_STATE_BUSY"])
            self.assertEqual(r.run_until_cq(1), 5000 + 8192)
            (c,) = r.reap()
            self.assertEqual((c.wr_id, c.status, c.bytes, c.fault, c.phase),
                             (0xF00D, 0, 8192, src, 1))
            self.assertEqual(q.chreg(0, R["PLDMA_CH_FAULTS"], 1), 1)
            self.assertEqual(q.mem_read(dst, 8192), data)
            self.assertEqual(q.ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"]), 0,
                             "the completion raises no channel interrupt")
        finally:
            q.close()


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
            q.program(1, UNMAPPED - 4096, RAM + 0x100000, 3 * 4096, R["PLDMA_CTRL_START"], ctx=2)
            q.run_until_settled(1, ctx=2)
            self.assertEqual(q.status(1, ctx=2)[0], R["PLDMA_STATE_FAULT"])
            q.set_ctxreg(2, R["PLDMA_CTX_CTRL"], R["PLDMA_CTX_QUIESCE"])
            q.vfreg(2, R["PLDMA_VF_CONTEXT"])
        finally:
            q.close()
        with open(log, encoding="utf-8") as f:
            text = f.read()
        self.assertRegex(text, rf"exanest_pldma_start ctx 2 ch 1 src {UNMAPPED - 4096:#x} "
                               rf"dst {RAM + 0x100000:#x} len 12288")
        m = re.search(r"exanest_pldma_step ctx 2 ch 1 at byte 0: (\d+) bytes on the data path "
                      r"from (\d+) to (\d+) ns", text)
        self.assertIsNotNone(m, text)
        self.assertEqual([int(x) for x in m.groups()], [4096, t0 + 5000, t0 + 5000 + 4096])
        m = re.search(r"exanest_pldma_fault ctx 2 ch 1 write 0 at (0x[0-9a-f]+) cause (\d+), "
                      r"raised at (\d+) ns", text)
        self.assertIsNotNone(m, text)
        self.assertEqual((int(m[1], 16), int(m[2]), int(m[3])),
                         (UNMAPPED, R["PLDMA_CAUSE_TRANSLATION"], t0 + 5000 + 4096))
        self.assertRegex(text, rf"exanest_pldma_state ctx 2 ch 1 state {R['PLDMA_STATE_FAULT']} error 0")
        self.assertRegex(text, r"exanest_pldma_quiesce ctx 2\b")
        self.assertRegex(text, rf"exanest_pldma_state ctx 2 ch 1 state {R['PLDMA_STATE_IDLE']} error 0")
        self.assertRegex(text, rf"exanest_pldma_vf_read ctx 2 addr {R['PLDMA_VF_CONTEXT']:#x} val 0x2\b")
        self.assertIn("exanest_pldma_mmio_write", text)

    def test_guest_errors_are_logged(self):
        """Guest mistakes go to QEMU's guest_errors log, naming the context and channel."""
        log = os.path.join(tempfile.mkdtemp(prefix="pldma-log-"), "guest.log")
        q = Qtest(extra=("-d", "guest_errors", "-D", log))
        try:
            q.reg(q.ctx_off(16, R["PLDMA_CTX_STATUS"]))
            q.set_reg(q.ch_off(4, R["PLDMA_CH_LEN"], 2), 1)
            q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"], ctx=3)
            q.set_vf_master(5, False)
            q.program(1, RAM, RAM + 0x100000, 64, R["PLDMA_CTRL_START"], ctx=5)
            q.writel(VF_BAR + 6 * R["PLDMA_VF_MMIO_SIZE"], 1)
            q.set_reg(R["PLDMA_IRQ_SUMMARY_HI"], 1)
        finally:
            q.close()
        with open(log, encoding="utf-8") as f:
            text = f.read()
        self.assertRegex(text, r"exanest-pldma: offset 0x5008 is in context 16, but the engine has 16 contexts")
        self.assertRegex(text, r"exanest-pldma: offset 0x1a10 is in channel 4 of context 2, but contexts have 4 channels")
        self.assertRegex(text, r"exanest-pldma: ctx3 ch0: command 0x2 rejected in state 0")
        self.assertRegex(text, r"exanest-pldma: ctx5 ch1: START with VF 5 disabled or not a bus master")
        self.assertRegex(text, r"exanest-pldma-vf: ctx6: write 0x1 to read-only or unknown offset 0x0")
        self.assertRegex(text, r"exanest-pldma: write 0x1 to read-only or unknown offset 0x24")

    def test_trace_events_follow_a_queue(self):
        log = os.path.join(tempfile.mkdtemp(prefix="pldma-trace-"), "trace.log")
        q = Qtest("bandwidth=1000,latency-ns=5000", extra=("-trace", "exanest_pldma_*", "-D", log))
        sq, cq = RAM + 0x100000, RAM + 0x200000
        try:
            r = Ring(q, 2, sq, cq, log_sq=2, log_cq=3)
            r.set_vf("PLDMA_VF_CQ_ARM", R["PLDMA_VF_CQ_ARM_ONCE"])
            r.post([(RAM, RAM + 0x300000, 64, 0xABC)])
            r.run_until_cq(1)
            r.configure(UNMAPPED, cq, 2 | 3 << 8)
            r.enable(False)
            r.enable()
            r.post([(RAM, RAM + 0x300000, 64, 0xDEF)])
        finally:
            q.close()
        with open(log, encoding="utf-8") as f:
            text = f.read()
        self.assertRegex(text, rf"exanest_pldma_q_enable ctx 2 sq {sq:#x} \(4 entries\) "
                               rf"cq {cq:#x} \(8 entries\) channels 0xf")
        self.assertRegex(text, r"exanest_pldma_vf_write ctx 2 addr 0x50 val 0x1\b")
        self.assertRegex(text, r"exanest_pldma_vf_write ctx 2 addr 0x40 val 0x1\b")
        self.assertRegex(text, rf"exanest_pldma_q_fetch ctx 2 ch 0 sq 0 at {sq:#x} wr_id 0xabc")
        self.assertRegex(text, rf"exanest_pldma_q_cqe ctx 2 ch 0 cq 0 at {cq:#x} wr_id 0xabc "
                               r"status 0 bytes 64")
        self.assertRegex(text, r"exanest_pldma_q_event ctx 2 cq_tail 1 cq_head 0")
        self.assertRegex(text, r"exanest_pldma_q_stop ctx 2\b")
        self.assertRegex(text, rf"exanest_pldma_q_error ctx 2 error {R['PLDMA_QERR_SQ_FETCH']} "
                               rf"at {UNMAPPED:#x}")

    def test_queue_guest_errors_are_logged(self):
        log = os.path.join(tempfile.mkdtemp(prefix="pldma-log-"), "guest.log")
        q = Qtest(extra=("-d", "guest_errors", "-D", log))
        try:
            r = Ring(q, 3, RAM + 0x100000, RAM + 0x200000, enable=False)
            r.set_vf("PLDMA_VF_SQ_TAIL", 1)
            r.configure(RAM + 0x100800, RAM + 0x200000, 3 | 3 << 8)
            r.enable()
            r.enable(False)
            r.configure(RAM + 0x100000, RAM + 0x200000, 3 | 3 << 8)
            r.enable()
            r.post([(RAM, RAM + 0x300000, 64, 1, 5)])
            r.set_vf("PLDMA_VF_SQ_TAIL", 100)
            r.set_vf("PLDMA_VF_CQ_HEAD", 50)
            r.set_vf("PLDMA_VF_CQ_ARM", 3)
            q.set_ctxreg(3, R["PLDMA_CTX_Q_CTRL"], 9)
            q.set_ctxreg(3, R["PLDMA_CTX_Q_SQ_TAIL"], 5)
            q.set_ctxreg(3, R["PLDMA_CTX_Q_CFG"], 0xFFFFFFFF)
            q.writel(VF_BAR + 3 * R["PLDMA_VF_MMIO_SIZE"] + R["PLDMA_VF_SQ_HEAD"], 1)
            r = Ring(q, 4, RAM + 0x400000, RAM + 0x500000)
            q.set_vf_master(4, False)
            r.post([(RAM, RAM + 0x300000, 64, 1)])
            r = Ring(q, 5, RAM + 0x600000, UNMAPPED)
            r.post([(RAM, RAM + 0x300000, 0, 1)])
            # The kernel queue: its doorbell while disabled, a bad KQ_CTRL bit, and a
            # descriptor it cannot read with the PF not a bus master.
            q.set_ctxreg(6, R["PLDMA_CTX_KQ_SQ_TAIL"], 1)
            q.set_ctxreg(6, R["PLDMA_CTX_KQ_SQ_BASE_LO"], RAM + 0x700000)
            q.set_ctxreg(6, R["PLDMA_CTX_KQ_CQ_BASE_LO"], RAM + 0x710000)
            q.set_ctxreg(6, R["PLDMA_CTX_KQ_CFG"], 0x303)
            q.set_ctxreg(6, R["PLDMA_CTX_KQ_CTRL"], 3)
            q.set_ctxreg(6, R["PLDMA_CTX_KQ_SQ_TAIL"], 1)
        finally:
            q.close()
        with open(log, encoding="utf-8") as f:
            text = f.read()
        for line in (
                r"exanest-pldma-vf: ctx3: write 0x1 to offset 0x40 ignored: the queue is disabled",
                r"exanest-pldma: ctx3: queue enabled with a misaligned or wrapping SQ base "
                r"\(Q_CFG 0x303\)",
                r"exanest-pldma: ctx3: descriptor 0 has flags 0x5",
                r"exanest-pldma-vf: ctx3: SQ_TAIL 100 is more than 8 entries ahead of SQ_HEAD 1",
                r"exanest-pldma-vf: ctx3: CQ_HEAD 50 is not between CQ_HEAD 0 and CQ_TAIL 8",
                r"exanest-pldma-vf: ctx3: unknown CQ_ARM bits 0x2 ignored",
                r"exanest-pldma: ctx3: unknown Q_CTRL bits 0x8 ignored",
                r"exanest-pldma: ctx3: write 0x5 to queue index 0x40 ignored: the queue is enabled",
                r"exanest-pldma: ctx3: unknown Q_CFG bits 0xff00e0e0 ignored",
                r"exanest-pldma-vf: ctx3: write 0x1 to read-only or unknown offset 0x44",
                r"exanest-pldma: ctx4: queue access with VF 4 disabled or not a bus master",
                rf"exanest-pldma: ctx4: reading descriptor 0 at {RAM + 0x400000:#x} failed, "
                r"queue stopped",
                rf"exanest-pldma: ctx5: writing CQE 0 at {UNMAPPED:#x} failed, queue stopped",
                r"exanest-pldma: ctx6: write 0x1 to kernel queue index 0x84 ignored: the queue "
                r"is disabled",
                r"exanest-pldma: ctx6: unknown KQ_CTRL bits 0x2 ignored",
                r"exanest-pldma: ctx6: kernel queue access with the PF not a bus master",
                rf"exanest-pldma: ctx6: reading kernel descriptor 0 at {RAM + 0x700000:#x} "
                r"failed, queue stopped"):
            self.assertRegex(text, line)


class Properties(unittest.TestCase):
    def test_channel_count_and_max_len(self):
        q = Qtest("contexts=2,channels=8,max-len=8192")
        try:
            caps = q.reg(R["PLDMA_CAPS"])
            self.assertEqual(caps & R["PLDMA_CAPS_NCHAN_MASK"], 8)
            self.assertEqual((caps & R["PLDMA_CAPS_NCTX_MASK"]) >> R["PLDMA_CAPS_NCTX_SHIFT"], 2)
            self.assertEqual(q.sriov_read(SRIOV_TOTAL_VF), 2)
            self.assertEqual(q.sriov_read(SRIOV_INITIAL_VF), 2)
            q.program(7, RAM, RAM + 0x100000, 8193, R["PLDMA_CTRL_START"], ctx=1)
            self.assertEqual(q.status(7, 1)[:2], (R["PLDMA_STATE_ERROR"], R["PLDMA_ERR_BAD_LEN"]))
            q.program(7, RAM, RAM + 0x100000, 8192, R["PLDMA_CTRL_START"], ctx=1)
            q.run_until_settled(7, ctx=1)
            self.assertEqual(q.status(7, 1)[0], R["PLDMA_STATE_DONE"])
            q.set_reg(q.ctx_off(2, R["PLDMA_CTX_IRQ_STATUS"]), 1)
            self.assertEqual(q.reg(q.ctx_off(2, R["PLDMA_CTX_STATUS"])), 0, "no context 2")
        finally:
            q.close()

    def test_64_contexts(self):
        q = Qtest("contexts=64,channels=1,bandwidth=1000,latency-ns=5000")
        try:
            self.assertEqual((q.reg(R["PLDMA_CAPS"]) & R["PLDMA_CAPS_NCTX_MASK"]) >> R["PLDMA_CAPS_NCTX_SHIFT"], 64)
            self.assertEqual(q.sriov_read(SRIOV_TOTAL_VF), 64)
            self.assertEqual(q.vfreg(63, R["PLDMA_VF_CONTEXT"]), 63)
            q.mem_write(RAM, b"context 63")
            q.program(0, RAM, RAM + 0x100000, 10, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=63)
            q.program(0, RAM, RAM + 0x200000, 0, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=40)
            q.program(0, RAM, RAM + 0x200000, 0, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx=31)
            q.run_until_settled(0, ctx=63)
            self.assertEqual(q.mem_read(RAM + 0x100000, 10), b"context 63")
            self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_LO"]), 1 << 31)
            self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_HI"]), 1 << (63 - 32) | 1 << (40 - 32))
            q.set_reg(q.ctx_off(63, R["PLDMA_CTX_IRQ_STATUS"]), 1)
            self.assertEqual(q.reg(R["PLDMA_IRQ_SUMMARY_HI"]), 1 << (40 - 32))
        finally:
            q.close()

    def test_bad_properties_refused(self):
        for props in ("channels=0", "channels=9", "contexts=0", "contexts=65", "max-len=0"):
            vm = machine(["-device", ROOT_PORT, "-device", f"exanest-pldma,bus=rp1,{props}"])
            with self.assertRaises(VMLaunchFailure, msg=props) as cm:
                vm.launch()
            self.assertNotEqual(cm.exception.exitcode, 0, props)
            self.assertIn("exanest-pldma", cm.exception.output, props)

    def test_vf_is_not_user_creatable(self):
        vm = machine(["-device", "exanest-pldma-vf"])
        with self.assertRaises(VMLaunchFailure) as cm:
            vm.launch()
        self.assertIn("exanest-pldma-vf", cm.exception.output)


if __name__ == "__main__":
    unittest.main()
