#!/usr/bin/env python3
"""Host tests of the MMU-500 (SMMUv2) model and of the engine's platform front-end behind it,
driven through QEMU's qtest protocol (as test_model.py drives the PCIe front-end).

No guest kernel runs: the test plays arm-smmu.c. It builds VMSAv8-64 page tables in guest RAM,
programs stream matching, context banks and TLB maintenance as Linux's arm-smmu.c does, and has
the engine (a sysbus device on the virt board's platform bus, one StreamID per context) copy
through them. The interrupt lines are read from the GIC distributor's pending registers (a
level-triggered line reads pending while it is asserted).

Usage: QEMU=/path/to/qemu-system-aarch64 test_mmu500.py [-v]
"""
import os
import re
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_model  # noqa: E402
from test_model import QEMU, R, RAM, RAM_SIZE, Qtest  # noqa: E402

SID = 0x200                 # the engine's own StreamID; context n's is SID + 1 + n
PAGE = 4096
GICD = 0x08000000           # the virt board's GIC distributor
PBUS_SPI = 112              # the virt board's first platform bus SPI
TABLES = RAM + 0x100000     # page tables, 1 MiB of them
IOVA = 0x10000000           # where the tests map buffers

# The MMU-500's registers (Arm IHI 0062, arm-smmu.h): global space 0, 1, a bank's page
SCR0, SACR, IDR0, IDR1, IDR2, IDR7 = 0x0, 0x10, 0x20, 0x24, 0x28, 0x3C
GFSR, GFSYNR0, GFSYNR1 = 0x48, 0x50, 0x54
TLBIALLNSNH, TLBGSYNC, TLBGSTATUS = 0x68, 0x70, 0x74
SMR, S2CR = 0x800, 0xC00
CBAR, CBFRSYNRA, CBA2R = 0x1000, 0x1400, 0x1800
CB_BASE = 0x10000
SCTLR, RESUME, TCR2, TTBR0, TCR, MAIR0 = 0x0, 0x8, 0x10, 0x20, 0x30, 0x38
FSR, FAR, FSYNR0 = 0x58, 0x60, 0x68
TLBIVA, TLBIASID, TLBIALL, TLBSYNC, TLBSTATUS = 0x600, 0x610, 0x618, 0x7F0, 0x7F4

SCR0_CLIENTPD, SCR0_GFRE, SCR0_GFIE, SCR0_USFCFG = 1 << 0, 1 << 1, 1 << 2, 1 << 10
GFSR_ICF, GFSR_USF, GFSR_SMCF, GFSR_UCBF = 1 << 0, 1 << 1, 1 << 2, 1 << 3
SCTLR_M, SCTLR_CFRE, SCTLR_CFIE = 1 << 0, 1 << 5, 1 << 6
FSR_TF, FSR_PF, FSR_MULTI = 1 << 1, 1 << 3, 1 << 31
S2CR_TRANS, S2CR_BYPASS, S2CR_FAULT = 0, 1, 2

# Page table descriptors (VMSAv8-64, 4 KiB granule)
PTE_VALID, PTE_TABLE, PTE_PAGE = 1, 3, 3
PTE_AF, PTE_RDONLY = 1 << 10, 1 << 7
T0SZ = 25                   # a 39-bit input range: the walk starts at level 1


def spi_pending(q, spi):
    """Whether SPI @spi's (level-triggered) line is asserted."""
    intid = 32 + spi
    return bool(q.readl(GICD + 0x200 + intid // 32 * 4) >> (intid % 32) & 1)


class PlatformQtest(Qtest):
    """A virt board with an MMU-500 and the engine behind it on the platform bus."""

    def __init__(self, num_cb=16, props="contexts=4,bandwidth=1000,latency-ns=5000"):
        if not QEMU:
            raise unittest.SkipTest("QEMU not set")
        if test_model.QEMUQtestMachine is None:
            raise RuntimeError(test_model.IMPORT_ERROR)
        self.vm = test_model.QEMUQtestMachine(QEMU, base_temp_dir=tempfile.gettempdir(), args=[
            "-machine", "virt", "-cpu", "max", "-nodefaults", "-nic", "none",
            "-m", f"{RAM_SIZE >> 20}M",
            "-device", f"arm-mmu500,id=smmu0,num-cb={num_cb}",
            "-device", f"exanest-pldma-platform,iommu=smmu0,stream-id={SID:#x},{props}"])
        self.vm.launch()
        mtree = self.vm.cmd("human-monitor-command", command_line="info mtree")

        def region(name):
            m = re.search(r"([0-9a-f]+)-[0-9a-f]+ \(prio \d+, i/o\): " + re.escape(name) + r"\r?\n",
                          mtree)
            if not m:
                raise RuntimeError(f"{name} not found in the memory tree")
            return int(m.group(1), 16)
        self.smmu = region("arm-mmu500")
        self.bar = region("exanest-pldma-mmio")
        self.vf_bar = region("exanest-pldma-ctx-pages")
        self.num_cb = num_cb
        # The platform bus gives out its interrupts in the order of the devices.
        self.smmu_spi = PBUS_SPI
        self.engine_spi = PBUS_SPI + 1 + num_cb
        self.nctx = self.reg(R["PLDMA_CAPS"]) >> R["PLDMA_CAPS_NCTX_SHIFT"] & 0xFF
        self.nchan = self.reg(R["PLDMA_CAPS"]) & R["PLDMA_CAPS_NCHAN_MASK"]
        self.next_table = TABLES

    # The MMU-500's registers
    def gr(self, off):
        return self.readl(self.smmu + off)

    def set_gr(self, off, val):
        self.writel(self.smmu + off, val)

    def cb(self, n, off):
        return self.readl(self.smmu + CB_BASE + n * PAGE + off)

    def cbq(self, n, off):
        return int(self.cmd(f"readq {self.smmu + CB_BASE + n * PAGE + off:#x}"), 16)

    def set_cb(self, n, off, val):
        self.writel(self.smmu + CB_BASE + n * PAGE + off, val)

    def set_cbq(self, n, off, val):
        self.writeq(self.smmu + CB_BASE + n * PAGE + off, val)

    def global_irq(self):
        return spi_pending(self, self.smmu_spi)

    def context_irq(self, i):
        return spi_pending(self, self.smmu_spi + 1 + i)

    # Page tables
    def alloc_table(self):
        t = self.next_table
        self.next_table += PAGE
        self.mem_write(t, bytes(PAGE))
        return t

    def map(self, root, iova, pa, readonly=False):
        """Map the 4 KiB page at @iova to @pa in the tables at @root (levels 1-3)."""
        table = root
        for level in (1, 2):
            idx = iova >> (39 - 9 * level) & 0x1FF
            (desc,) = struct.unpack("<Q", self.mem_read(table + idx * 8, 8))
            if not desc & PTE_VALID:
                nxt = self.alloc_table()
                self.mem_write(table + idx * 8, struct.pack("<Q", nxt | PTE_TABLE))
                table = nxt
            else:
                table = desc & 0xFFFFFFFFF000
        idx = iova >> 12 & 0x1FF
        pte = pa | PTE_PAGE | PTE_AF | (PTE_RDONLY if readonly else 0) | 3 << 8
        self.mem_write(table + idx * 8, struct.pack("<Q", pte))

    def map_block(self, root, iova, pa):
        """Map the 2 MiB block at @iova to @pa (a level 2 block descriptor)."""
        idx = iova >> 30 & 0x1FF
        (desc,) = struct.unpack("<Q", self.mem_read(root + idx * 8, 8))
        if not desc & PTE_VALID:
            l2 = self.alloc_table()
            self.mem_write(root + idx * 8, struct.pack("<Q", l2 | PTE_TABLE))
        else:
            l2 = desc & 0xFFFFFFFFF000
        self.mem_write(l2 + (iova >> 21 & 0x1FF) * 8,
                       struct.pack("<Q", pa | PTE_VALID | PTE_AF | 3 << 8))

    def unmap(self, root, iova):
        table = root
        for level in (1, 2):
            idx = iova >> (39 - 9 * level) & 0x1FF
            (desc,) = struct.unpack("<Q", self.mem_read(table + idx * 8, 8))
            table = desc & 0xFFFFFFFFF000
        self.mem_write(table + (iova >> 12 & 0x1FF) * 8, bytes(8))

    # What arm-smmu.c does
    def reset_smmu(self, usfcfg=True):
        """arm_smmu_device_reset(): banks off, SMRs invalid, TLB flushed, faults on."""
        self.set_gr(GFSR, self.gr(GFSR))
        for i in range(self.gr(IDR0) & 0xFF):
            self.set_gr(SMR + 4 * i, 0)
            self.set_gr(S2CR + 4 * i, S2CR_FAULT << 16)
        for n in range(self.num_cb):
            self.set_cb(n, SCTLR, 0)
            self.set_cb(n, FSR, 0xFFFFFFFF)
        self.set_gr(TLBIALLNSNH, 0)
        self.set_gr(TLBGSYNC, 0)
        self.assertfree_sync()
        self.set_gr(SCR0, SCR0_GFRE | SCR0_GFIE | (SCR0_USFCFG if usfcfg else 0))

    def assertfree_sync(self):
        if self.gr(TLBGSTATUS) & 1:
            raise AssertionError("sTLBGSTATUS.GSACTIVE stays set")

    def bank(self, n, sids, asid=None):
        """Context bank @n, stage 1 with S2 bypass, AArch64, for the streams @sids (SMR n+i).
        Returns the root of its (empty) page tables."""
        asid = n if asid is None else asid
        root = self.alloc_table()
        self.set_gr(CBAR + 4 * n, 1 << 16 | n << 24)          # S1 with S2 bypass, IRPTNDX n
        self.set_gr(CBA2R + 4 * n, 1)                          # VA64
        self.set_cb(n, TCR2, 5 | 1 << 4)                       # 48-bit PA, 16-bit ASIDs
        self.set_cbq(n, TTBR0, root | asid << 48)
        self.set_cbq(n, 0x28, asid << 48)                      # TTBR1: unused
        self.set_cb(n, TCR, T0SZ | 1 << 23)                    # TG0 4 KiB, EPD1
        self.set_cb(n, MAIR0, 0xFF)
        self.set_cb(n, SCTLR, SCTLR_M | SCTLR_CFRE | SCTLR_CFIE)
        for i, sid in enumerate(sids):
            self.set_gr(SMR + 4 * (2 * n + i), 1 << 31 | sid)
            self.set_gr(S2CR + 4 * (2 * n + i), S2CR_TRANS << 16 | n)
        return root

    def tlbi_va(self, n, iova, asid):
        self.set_cbq(n, TLBIVA, iova >> 12 | asid << 48)
        self.set_cb(n, TLBSYNC, 0)
        if self.cb(n, TLBSTATUS) & 1:
            raise AssertionError("TLBSTATUS.SACTIVE stays set")


class Mmu500Test(unittest.TestCase):
    num_cb = 4

    @classmethod
    def setUpClass(cls):
        cls.q = PlatformQtest(num_cb=cls.num_cb)

    @classmethod
    def tearDownClass(cls):
        cls.q.close()

    def setUp(self):
        q = self.q
        q.set_reg(R["PLDMA_RESET"], R["PLDMA_RESET_MAGIC"])
        q.next_table = TABLES
        q.reset_smmu()

    def tearDown(self):
        self.assertTrue(self.q.alive(), "QEMU died")

    def copy(self, src, dst, length, ctx=0, n=0):
        q = self.q
        q.program(n, src, dst, length, R["PLDMA_CTRL_START"] | R["PLDMA_CTRL_IRQ_EN"], ctx)
        q.run_until_settled(n, ctx)
        return q.status(n, ctx)

    def fault_addr(self, n=0, ctx=0):
        q = self.q
        return q.chreg(n, R["PLDMA_CH_FAULT_LO"], ctx) | q.chreg(n, R["PLDMA_CH_FAULT_HI"], ctx) << 32


class Identification(Mmu500Test):
    def test_id_registers_say_what_arm_smmu_needs(self):
        q = self.q
        idr0, idr1, idr2 = q.gr(IDR0), q.gr(IDR1), q.gr(IDR2)
        self.assertTrue(idr0 & 1 << 30, "S1TS")
        self.assertFalse(idr0 & (1 << 29 | 1 << 28), "no stage 2, no nesting")
        self.assertTrue(idr0 & 1 << 27, "SMS: stream matching")
        self.assertTrue(idr0 & 1 << 26, "ATOSNS: no translation operations")
        self.assertEqual(idr0 >> 9 & 0xF, 15, "NUMSIDB")
        self.assertEqual(idr0 & 0xFF, 48, "NUMSMRG")
        self.assertEqual(idr1 & 0xFF, self.num_cb, "NUMCB")
        self.assertEqual(idr1 >> 28 & 7, 3, "NUMPAGENDXB: 16 pages a half")
        self.assertFalse(idr1 & 1 << 31, "4 KiB register pages")
        self.assertTrue(idr2 & 1 << 12 and idr2 & 1 << 14, "4 KiB and 64 KiB granules")
        self.assertEqual(q.gr(IDR7) >> 4 & 0xF, 2, "MMU-500 r2")

    def test_smr_keeps_only_implemented_bits(self):
        # arm_smmu_test_smr_masks(): write all ones to ID, then MASK, read back what stuck.
        q = self.q
        q.set_gr(SMR, 0xFFFF)
        self.assertEqual(q.gr(SMR) & 0xFFFF, 0x7FFF)
        q.set_gr(SMR, 0xFFFF << 16)
        self.assertEqual(q.gr(SMR) >> 16, 0xFFFF)   # VALID + 15 mask bits
        q.set_gr(SMR, 0)

    def test_banks_past_numcb_are_raz_wi(self):
        q = self.q
        q.set_cb(self.num_cb, TCR, 0x1234)
        self.assertEqual(q.cb(self.num_cb, TCR), 0)
        q.set_cb(self.num_cb - 1, TCR, 0x1234)
        self.assertEqual(q.cb(self.num_cb - 1, TCR), 0x1234)


class Translation(Mmu500Test):
    def test_clients_bypass_until_enabled(self):
        q = self.q
        q.set_gr(SCR0, SCR0_CLIENTPD)
        q.mem_write(RAM + 0x400000, b"bypass" * 100)
        self.assertEqual(self.copy(RAM + 0x400000, RAM + 0x500000, 600)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + 0x500000, 600), b"bypass" * 100)

    def test_copy_through_scattered_pages(self):
        q = self.q
        root = q.bank(0, [SID + 1])
        # Source and destination: 3 IOVA-contiguous pages each, physically scattered.
        src_pa = [RAM + 0x900000, RAM + 0x700000, RAM + 0x800000]
        dst_pa = [RAM + 0xA03000, RAM + 0xA01000, RAM + 0xA05000]
        for i in range(3):
            q.map(root, IOVA + i * PAGE, src_pa[i])
            q.map(root, IOVA + 0x100000 + i * PAGE, dst_pa[i])
            q.mem_write(src_pa[i], bytes([i + 1]) * PAGE)
            q.mem_write(dst_pa[i], bytes(PAGE))
        st = self.copy(IOVA + 100, IOVA + 0x100000 + 100, 3 * PAGE - 200)
        self.assertEqual(st[0], R["PLDMA_STATE_DONE"], st)
        for i in range(3):
            want = bytes([i + 1]) * PAGE
            got = q.mem_read(dst_pa[i], PAGE)
            lo, hi = (100 if i == 0 else 0), (PAGE - 100 if i == 2 else PAGE)
            self.assertEqual(got[lo:hi], want[lo:hi], f"page {i}")
        self.assertEqual(q.gr(GFSR), 0)
        self.assertEqual(q.cb(0, FSR), 0)

    def test_a_2mib_block(self):
        q = self.q
        root = q.bank(0, [SID + 1])
        q.map_block(root, IOVA, RAM + 0x1000000)
        q.map(root, IOVA + 0x200000, RAM + 0x3000000)
        q.mem_write(RAM + 0x1000000 + 0x1FF000, b"\x5A" * PAGE)
        self.assertEqual(self.copy(IOVA + 0x1FF000, IOVA + 0x200000, PAGE)[0],
                         R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + 0x3000000, PAGE), b"\x5A" * PAGE)

    def test_each_context_its_own_stream_and_bank(self):
        q = self.q
        roots = [q.bank(n, [SID + 1 + n]) for n in range(2)]
        for n in range(2):
            q.map(roots[n], IOVA, RAM + 0xB00000 + n * PAGE)           # same IOVA
            q.map(roots[n], IOVA + PAGE, RAM + 0xC00000 + n * PAGE)
            q.mem_write(RAM + 0xB00000 + n * PAGE, bytes([0x10 + n]) * PAGE)
        for n in range(2):
            self.assertEqual(self.copy(IOVA, IOVA + PAGE, PAGE, ctx=n)[0], R["PLDMA_STATE_DONE"])
            self.assertEqual(q.mem_read(RAM + 0xC00000 + n * PAGE, PAGE), bytes([0x10 + n]) * PAGE)

    def test_bypass_and_fault_s2cr(self):
        q = self.q
        q.set_gr(SMR, 1 << 31 | (SID + 1))
        q.set_gr(S2CR, S2CR_BYPASS << 16)
        q.mem_write(RAM + 0x400000, b"\x77" * 64)
        self.assertEqual(self.copy(RAM + 0x400000, RAM + 0x410000, 64)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + 0x410000, 64), b"\x77" * 64)
        q.set_gr(S2CR, S2CR_FAULT << 16)
        self.assertEqual(self.copy(RAM + 0x400000, RAM + 0x410000, 64)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.gr(GFSR) & GFSR_ICF, GFSR_ICF)
        self.assertEqual(q.gr(GFSYNR1), SID + 1)

    def test_masked_smr_matches_a_range_of_streams(self):
        q = self.q
        root = q.bank(0, [])
        q.set_gr(SMR, 1 << 31 | 3 << 16 | (SID + 1))      # SID+1 .. SID+4 (mask 3)
        q.set_gr(S2CR, S2CR_TRANS << 16 | 0)
        q.map(root, IOVA, RAM + 0xD00000)
        q.map(root, IOVA + PAGE, RAM + 0xD10000)
        q.mem_write(RAM + 0xD00000, b"\x42" * 32)
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 32, ctx=2)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + 0xD10000, 32), b"\x42" * 32)


class Faults(Mmu500Test):
    def test_terminate_records_interrupts_and_resume_retransmits(self):
        q = self.q
        root = q.bank(0, [SID + 1])
        q.map(root, IOVA, RAM + 0xE00000)
        q.map(root, IOVA + 0x10000, RAM + 0xE10000)
        # The destination's second page is not mapped.
        data = os.urandom(2 * PAGE)
        q.mem_write(RAM + 0xE00000, data[:PAGE])
        q.map(root, IOVA + PAGE, RAM + 0xE01000)
        q.mem_write(RAM + 0xE01000, data[PAGE:])
        self.assertFalse(q.context_irq(0))
        st = self.copy(IOVA, IOVA + 0x10000, 2 * PAGE)
        self.assertEqual(st[0], R["PLDMA_STATE_FAULT"], st)
        self.assertEqual(self.fault_addr(), IOVA + 0x11000)
        fsr = q.cb(0, FSR)
        self.assertEqual(fsr & 0xFF, FSR_TF, hex(fsr))
        self.assertEqual(fsr >> 9 & 3, 2, "FSR.FORMAT: AArch64")
        self.assertEqual(q.cbq(0, FAR), IOVA + 0x11000)
        self.assertTrue(q.cb(0, FSYNR0) & 1 << 4, "FSYNR0.WNR: a write")
        self.assertEqual(q.gr(CBFRSYNRA), SID + 1)
        self.assertTrue(q.context_irq(0), "the context interrupt is asserted")
        self.assertFalse(q.context_irq(1))
        self.assertFalse(q.global_irq())
        # What the driver does: map the page, clear FSR (the line drops), RESUME the channel.
        q.map(root, IOVA + 0x11000, RAM + 0xE11000)
        q.set_cb(0, FSR, fsr)
        self.assertEqual(q.cb(0, FSR), 0)
        self.assertFalse(q.context_irq(0), "clearing FSR drops the line")
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"])
        q.run_until_settled(0)
        self.assertEqual(q.status(0)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + 0xE10000, PAGE) + q.mem_read(RAM + 0xE11000, PAGE), data)

    def test_each_bank_raises_its_own_context_interrupt(self):
        # As arm-smmu.c programs an MMU-500: CBARn.IRPTNDX left 0 (it is SMMUv1's field).
        q = self.q
        for n in range(2):
            q.bank(n, [SID + 1 + n])
            q.set_gr(CBAR + 4 * n, 1 << 16)
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 8, ctx=1)[0], R["PLDMA_STATE_FAULT"])
        self.assertTrue(q.cb(1, FSR) & FSR_TF)
        self.assertEqual(q.cb(0, FSR), 0)
        self.assertTrue(q.context_irq(1), "bank 1's fault raises context interrupt 1")
        self.assertFalse(q.context_irq(0), "not interrupt 0, whose handler reads bank 0's FSR")
        q.set_cb(1, FSR, q.cb(1, FSR))
        self.assertFalse(q.context_irq(1))

    def test_a_second_fault_sets_multi_and_keeps_the_first(self):
        q = self.q
        q.bank(0, [SID + 1])
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 8, n=0)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(self.copy(IOVA + 0x50000, IOVA + PAGE, 8, n=1)[0], R["PLDMA_STATE_FAULT"])
        fsr = q.cb(0, FSR)
        self.assertEqual(fsr & (FSR_TF | FSR_MULTI), FSR_TF | FSR_MULTI, hex(fsr))
        self.assertEqual(q.cbq(0, FAR), IOVA, "the first fault's address stays")
        self.assertFalse(q.cb(0, FSYNR0) & 1 << 4, "the first fault was a read")

    def test_write_to_a_read_only_page_is_a_permission_fault(self):
        q = self.q
        root = q.bank(0, [SID + 1])
        q.map(root, IOVA, RAM + 0xF00000)
        q.map(root, IOVA + PAGE, RAM + 0xF01000, readonly=True)
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 16)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.cb(0, FSR) & 0xFF, FSR_PF)
        self.assertEqual(self.fault_addr(), IOVA + PAGE)
        # Reading it is allowed.
        q.set_cb(0, FSR, q.cb(0, FSR))
        q.map(root, IOVA + 2 * PAGE, RAM + 0xF02000)
        self.assertEqual(self.copy(IOVA + PAGE, IOVA + 2 * PAGE, 16, n=1)[0], R["PLDMA_STATE_DONE"])

    def test_faults_not_recorded_without_cfre(self):
        q = self.q
        q.bank(0, [SID + 1])
        q.set_cb(0, SCTLR, SCTLR_M)
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 8)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.cb(0, FSR), 0)
        self.assertFalse(q.context_irq(0))

    def test_unmatched_stream_is_a_global_fault(self):
        q = self.q
        self.assertFalse(q.global_irq())
        self.assertEqual(self.copy(RAM, RAM + PAGE, 8, ctx=3)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.gr(GFSR), GFSR_USF)
        self.assertEqual(q.gr(GFSYNR1), SID + 4)
        self.assertTrue(q.global_irq())
        q.set_gr(GFSR, GFSR_USF)
        self.assertFalse(q.global_irq())

    def test_unmatched_stream_bypasses_without_usfcfg(self):
        q = self.q
        q.reset_smmu(usfcfg=False)
        q.mem_write(RAM, b"\x33" * 8)
        self.assertEqual(self.copy(RAM, RAM + PAGE, 8, ctx=3)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + PAGE, 8), b"\x33" * 8)

    def test_two_matching_smrs_are_a_conflict(self):
        q = self.q
        q.bank(0, [SID + 1, SID + 1])
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 8)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.gr(GFSR) & GFSR_SMCF, GFSR_SMCF)


class BankRunningOut(Mmu500Test):
    num_cb = 2

    def test_a_stream_mapped_past_the_last_bank_faults(self):
        q = self.q
        self.assertEqual(q.gr(IDR1) & 0xFF, 2)
        q.set_gr(SMR, 1 << 31 | (SID + 1))
        q.set_gr(S2CR, S2CR_TRANS << 16 | 2)            # bank 2 of 0..1
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 8)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.gr(GFSR) & GFSR_UCBF, GFSR_UCBF)
        self.assertTrue(q.global_irq())

    def test_both_banks_serve_two_contexts_and_a_third_waits(self):
        # What arm-smmu.c's ENOSPC means: two domains attached, a third context has no bank
        # until one is freed; then the same bank serves it, with its own tables and ASID.
        q = self.q
        roots = [q.bank(n, [SID + 1 + n]) for n in range(2)]
        for n in range(2):
            q.map(roots[n], IOVA, RAM + 0x1100000 + n * PAGE)
            q.map(roots[n], IOVA + PAGE, RAM + 0x1200000 + n * PAGE)
            self.assertEqual(self.copy(IOVA, IOVA + PAGE, 8, ctx=n)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 8, ctx=2)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.gr(GFSR), GFSR_USF)
        q.set_gr(GFSR, GFSR_USF)
        # Bank 1 goes to context 2: new tables, a new ASID, SMR rewritten, the old ASID flushed.
        q.set_cb(1, SCTLR, 0)
        q.set_cb(1, TLBIASID, 1)
        root = q.bank(1, [SID + 3], asid=7)
        q.map(root, IOVA, RAM + 0x1300000)
        q.map(root, IOVA + PAGE, RAM + 0x1400000)
        q.mem_write(RAM + 0x1300000, b"\x99" * 8)
        q.set_chreg(0, R["PLDMA_CH_CTRL"], R["PLDMA_CTRL_RESUME"], 2)
        q.run_until_settled(0, 2)
        self.assertEqual(q.status(0, 2)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + 0x1400000, 8), b"\x99" * 8)


class Invalidation(Mmu500Test):
    def setup_remap(self):
        """A mapping used once (so in the TLB), then changed in memory only."""
        q = self.q
        root = q.bank(0, [SID + 1], asid=5)
        q.map(root, IOVA, RAM + 0x1500000)
        q.map(root, IOVA + PAGE, RAM + 0x1600000)
        q.mem_write(RAM + 0x1500000, b"\x01" * 16)
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 16)[0], R["PLDMA_STATE_DONE"])
        q.map(root, IOVA + PAGE, RAM + 0x1700000)      # not invalidated yet
        q.mem_write(RAM + 0x1500000, b"\x02" * 16)
        return root

    def test_a_stale_entry_is_used_until_tlbiva(self):
        q = self.q
        self.setup_remap()
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 16)[0], R["PLDMA_STATE_DONE"])
        self.assertEqual(q.mem_read(RAM + 0x1600000, 16), b"\x02" * 16, "the TLB's entry")
        q.tlbi_va(0, IOVA + PAGE, asid=4)                # another ASID: no effect
        q.mem_write(RAM + 0x1500000, b"\x03" * 16)
        self.copy(IOVA, IOVA + PAGE, 16)
        self.assertEqual(q.mem_read(RAM + 0x1600000, 16), b"\x03" * 16)
        q.tlbi_va(0, IOVA + PAGE, asid=5)
        q.mem_write(RAM + 0x1500000, b"\x04" * 16)
        self.copy(IOVA, IOVA + PAGE, 16)
        self.assertEqual(q.mem_read(RAM + 0x1700000, 16), b"\x04" * 16, "the new mapping")

    def test_tlbiasid_and_tlbiall(self):
        q = self.q
        self.setup_remap()
        q.set_cb(0, TLBIASID, 5)
        q.set_cb(0, TLBSYNC, 0)
        self.copy(IOVA, IOVA + PAGE, 16)
        self.assertEqual(q.mem_read(RAM + 0x1700000, 16), b"\x02" * 16)
        q.next_table = TABLES
        q.reset_smmu()
        self.setup_remap()
        q.set_gr(TLBIALLNSNH, 0)
        q.set_gr(TLBGSYNC, 0)
        self.copy(IOVA, IOVA + PAGE, 16)
        self.assertEqual(q.mem_read(RAM + 0x1700000, 16), b"\x02" * 16)

    def test_an_unmapped_page_faults_after_tlbiva(self):
        q = self.q
        root = self.setup_remap()
        q.unmap(root, IOVA + PAGE)
        q.tlbi_va(0, IOVA + PAGE, asid=5)
        self.assertEqual(self.copy(IOVA, IOVA + PAGE, 16)[0], R["PLDMA_STATE_FAULT"])
        self.assertEqual(q.cbq(0, FAR), IOVA + PAGE)

    def test_tlbiva_of_a_block_base_drops_the_block(self):
        q = self.q
        root = q.bank(0, [SID + 1], asid=6)
        q.map_block(root, IOVA + 0x200000, RAM + 0x1800000)
        q.map(root, IOVA, RAM + 0x1A00000)
        q.mem_write(RAM + 0x1A00000, b"\x0B" * 16)
        self.copy(IOVA, IOVA + 0x200000 + 0x5000, 16)
        self.assertEqual(q.mem_read(RAM + 0x1805000, 16), b"\x0B" * 16)
        q.map_block(root, IOVA + 0x200000, RAM + 0x1C00000)
        q.tlbi_va(0, IOVA + 0x200000, asid=6)            # the block's base, as io-pgtable does
        self.copy(IOVA, IOVA + 0x200000 + 0x5000, 16)
        self.assertEqual(q.mem_read(RAM + 0x1C05000, 16), b"\x0B" * 16)


class EngineOnThePlatform(Mmu500Test):
    """The platform front-end itself: its windows, its interrupt, the contexts' pages."""

    def test_caps_pages_and_interrupt(self):
        q = self.q
        self.assertEqual(q.nctx, 4)
        for ctx in range(q.nctx):
            self.assertEqual(q.vfreg(ctx, R["PLDMA_VF_ID"]), R["PLDMA_VF_ID_MAGIC"])
            self.assertEqual(q.vfreg(ctx, R["PLDMA_VF_CONTEXT"]), ctx)
        q.set_gr(SCR0, SCR0_CLIENTPD)
        self.assertFalse(spi_pending(q, q.engine_spi))
        self.assertEqual(self.copy(RAM, RAM + PAGE, 8, ctx=1, n=2)[0], R["PLDMA_STATE_DONE"])
        self.assertTrue(spi_pending(q, q.engine_spi), "the channel's interrupt")
        q.set_ctxreg(1, R["PLDMA_CTX_IRQ_STATUS"], 1 << 2)
        self.assertFalse(spi_pending(q, q.engine_spi))


if __name__ == "__main__":
    unittest.main()
