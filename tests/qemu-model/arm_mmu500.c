/*
 * Arm CoreLink MMU-500 (SMMUv2) model: the IOMMU in front of the
 * programmable logic of a Zynq UltraScale+ (Documentation/qfdb.rst).
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * What is modelled (Arm SMMU architecture v2, IHI 0062; the MMU-500 TRM):
 *  - The global register spaces (sCR0, sACR, SMMU_IDR0..7, the global fault
 *    registers, the global TLB maintenance operations), stream matching
 *    (SMRn/S2CRn, 15-bit StreamIDs with masks) and the context bank
 *    attribute registers (CBARn, CBA2Rn, CBFRSYNRAn).
 *  - Context banks with stage 1 translation in the AArch64 (VMSAv8-64)
 *    format, 4 KiB and 64 KiB granules: SCTLR, TCR, TCR2, TTBR0/1, MAIR0/1,
 *    the fault registers (FSR, FAR, FSYNR0) and TLB maintenance by VA, by
 *    VA in all ASIDs, by ASID and of the whole bank, with TLBSYNC. The
 *    page table walk is QEMU's (smmu-common.c, smmu_ptw()).
 *  - A TLB, tagged by VMID and ASID like the hardware's: a translation the
 *    guest changed without invalidating keeps being used, so a driver that
 *    forgets an invalidation sees the stale entry, as it would on a board.
 *  - Faults in terminate mode: the transaction aborts, the bank records the
 *    first fault in FSR/FAR/FSYNR0 (MULTI for the next ones until FSR is
 *    cleared) and raises its context interrupt (bank n: interrupt n) while a
 *    fault is recorded and SCTLR.CFIE is set; global faults (unmatched
 *    stream, S2CR fault, a bad context bank) go to sGFSR and the global
 *    interrupt.
 *
 * What is not: stage 2 and nested translation (SMMU_IDR0.S2TS/NTS are 0, so
 * Linux uses stage 1 only, as it does on the ZynqMP), the AArch32 formats,
 * address translation operations (IDR0.ATOSNS is 1), the secure side and
 * extended StreamIDs. Stall mode (SCTLR.CFCFG) is not modelled: QEMU's DMA
 * API cannot hold a transaction, and no arm-smmu.c implementation for
 * MMU-500 sets CFCFG (only Qualcomm's Adreno SMMU does); a bank with CFCFG
 * set terminates, and the model says so once (LOG_UNIMP).
 *
 * Masters: a sysbus device that issues DMA through the MMU-500 holds a link
 * to it and asks arm_mmu500_stream_as() for the address space of each
 * StreamID it drives. Interrupts: output 0 is the global fault interrupt,
 * outputs 1..num-cb the context interrupts, level-triggered.
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "qapi/error.h"
#include "hw/irq.h"
#include "hw/qdev-properties.h"
#include "hw/registerfields.h"
#include "hw/arm/smmu-common.h"
#include "migration/vmstate.h"
#include "system/device_tree.h"
#include "trace.h"
#include "hw/arm/arm_mmu500.h"

/* Global register space 0 */
REG32(SCR0, 0x0)
    FIELD(SCR0, CLIENTPD, 0, 1)
    FIELD(SCR0, GFRE, 1, 1)
    FIELD(SCR0, GFIE, 2, 1)
    FIELD(SCR0, GCFGFRE, 4, 1)
    FIELD(SCR0, GCFGFIE, 5, 1)
    FIELD(SCR0, USFCFG, 10, 1)
REG32(SCR1, 0x4)
REG32(SACR, 0x10)
REG32(IDR0, 0x20)
    FIELD(IDR0, NUMSMRG, 0, 8)
    FIELD(IDR0, NUMSIDB, 9, 4)
    FIELD(IDR0, CTTW, 14, 1)
    FIELD(IDR0, NUMIRPT, 16, 8)
    FIELD(IDR0, PTFS_NO_AARCH32S, 24, 1)
    FIELD(IDR0, PTFS_NO_AARCH32, 25, 1)
    FIELD(IDR0, ATOSNS, 26, 1)
    FIELD(IDR0, SMS, 27, 1)
    FIELD(IDR0, S1TS, 30, 1)
REG32(IDR1, 0x24)
    FIELD(IDR1, NUMCB, 0, 8)
    FIELD(IDR1, NUMS2CB, 16, 8)
    FIELD(IDR1, NUMPAGENDXB, 28, 3)
    FIELD(IDR1, PAGESIZE, 31, 1)
REG32(IDR2, 0x28)
    FIELD(IDR2, IAS, 0, 4)
    FIELD(IDR2, OAS, 4, 4)
    FIELD(IDR2, UBS, 8, 4)
    FIELD(IDR2, PTFS_4K, 12, 1)
    FIELD(IDR2, PTFS_16K, 13, 1)
    FIELD(IDR2, PTFS_64K, 14, 1)
REG32(IDR7, 0x3c)
    FIELD(IDR7, MINOR, 0, 4)
    FIELD(IDR7, MAJOR, 4, 4)
REG64(GFAR, 0x40)
REG32(GFSR, 0x48)
    FIELD(GFSR, ICF, 0, 1)
    FIELD(GFSR, USF, 1, 1)
    FIELD(GFSR, SMCF, 2, 1)
    FIELD(GFSR, UCBF, 3, 1)
    FIELD(GFSR, MULTI, 31, 1)
REG32(GFSRRESTORE, 0x4c)
REG32(GFSYNR0, 0x50)
    FIELD(GFSYNR0, WNR, 1, 1)
REG32(GFSYNR1, 0x54)
REG32(GFSYNR2, 0x58)
REG32(TLBIVMID, 0x64)
REG32(TLBIALLNSNH, 0x68)
REG32(TLBIALLH, 0x6c)
REG32(TLBGSYNC, 0x70)
REG32(TLBGSTATUS, 0x74)
REG32(SMR0, 0x800)
    FIELD(SMR, ID, 0, 15)
    FIELD(SMR, MASK, 16, 15)
    FIELD(SMR, VALID, 31, 1)
REG32(S2CR0, 0xc00)
    FIELD(S2CR, CBNDX, 0, 8)
    FIELD(S2CR, TYPE, 16, 2)

/* Global register space 1, the page after */
REG32(CBAR0, 0x0)
    FIELD(CBAR, VMID, 0, 8)
    FIELD(CBAR, TYPE, 16, 2)
    FIELD(CBAR, IRPTNDX, 24, 8)
REG32(CBFRSYNRA0, 0x400)
REG32(CBA2R0, 0x800)
    FIELD(CBA2R, VA64, 0, 1)

/* A context bank's page */
REG32(CB_SCTLR, 0x0)
    FIELD(CB_SCTLR, M, 0, 1)
    FIELD(CB_SCTLR, AFFD, 3, 1)
    FIELD(CB_SCTLR, CFRE, 5, 1)
    FIELD(CB_SCTLR, CFIE, 6, 1)
    FIELD(CB_SCTLR, CFCFG, 7, 1)
REG32(CB_ACTLR, 0x4)
REG32(CB_RESUME, 0x8)
REG32(CB_TCR2, 0x10)
    FIELD(CB_TCR2, PASIZE, 0, 3)
    FIELD(CB_TCR2, AS, 4, 1)
    FIELD(CB_TCR2, TBI0, 5, 1)
    FIELD(CB_TCR2, TBI1, 6, 1)
REG64(CB_TTBR0, 0x20)
REG64(CB_TTBR1, 0x28)
    FIELD(CB_TTBR, ADDR, 0, 48)
    FIELD(CB_TTBR, ASID, 48, 16)
REG32(CB_TCR, 0x30)
    FIELD(CB_TCR, T0SZ, 0, 6)
    FIELD(CB_TCR, EPD0, 7, 1)
    FIELD(CB_TCR, TG0, 14, 2)
    FIELD(CB_TCR, T1SZ, 16, 6)
    FIELD(CB_TCR, EPD1, 23, 1)
    FIELD(CB_TCR, TG1, 30, 2)
REG32(CB_CONTEXTIDR, 0x34)
REG32(CB_MAIR0, 0x38)
REG32(CB_MAIR1, 0x3c)
REG64(CB_PAR, 0x50)
REG32(CB_FSR, 0x58)
    FIELD(CB_FSR, TF, 1, 1)
    FIELD(CB_FSR, AFF, 2, 1)
    FIELD(CB_FSR, PF, 3, 1)
    FIELD(CB_FSR, EF, 4, 1)
    FIELD(CB_FSR, ASF, 7, 1)
    FIELD(CB_FSR, FORMAT, 9, 2)
    FIELD(CB_FSR, SS, 30, 1)
    FIELD(CB_FSR, MULTI, 31, 1)
REG32(CB_FSRRESTORE, 0x5c)
REG64(CB_FAR, 0x60)
REG32(CB_FSYNR0, 0x68)
    FIELD(CB_FSYNR0, PLVL, 0, 2)
    FIELD(CB_FSYNR0, WNR, 4, 1)
    FIELD(CB_FSYNR0, S1CBNDX, 16, 8)
REG32(CB_FSYNR1, 0x6c)
REG64(CB_TLBIVA, 0x600)
REG64(CB_TLBIVAA, 0x608)
REG32(CB_TLBIASID, 0x610)
REG32(CB_TLBIALL, 0x618)
REG64(CB_TLBIVAL, 0x620)
REG64(CB_TLBIVAAL, 0x628)
REG32(CB_TLBSYNC, 0x7f0)
REG32(CB_TLBSTATUS, 0x7f4)

#define S2CR_TYPE_TRANS         0
#define S2CR_TYPE_BYPASS        1
#define S2CR_TYPE_FAULT         2
#define CBAR_TYPE_S1_S2BYPASS   1
/* Every FSR bit that says a fault is recorded (arm-smmu.h's FSR_FAULT) */
#define CB_FSR_FAULT            0xc00001feu
/* The FSR.FORMAT of a fault in the AArch64 format */
#define CB_FSR_FORMAT_AARCH64   2
#define MMU500_TLB_MAX          8192

/* A TLB entry's tag: like the hardware's, VMID and ASID, no bank */
typedef struct ArmMmu500TlbKey {
    uint64_t iova;          /* aligned to the entry's size */
    uint16_t vmid, asid;
    uint8_t granule, level;
} ArmMmu500TlbKey;

static guint mmu500_tlb_hash(gconstpointer v)
{
    const ArmMmu500TlbKey *k = v;

    return g_int64_hash(&k->iova) ^ (k->vmid << 16 | k->asid) ^
           (k->granule << 8 | k->level) << 24;
}

static gboolean mmu500_tlb_equal(gconstpointer a, gconstpointer b)
{
    const ArmMmu500TlbKey *x = a, *y = b;

    return x->iova == y->iova && x->vmid == y->vmid && x->asid == y->asid &&
           x->granule == y->granule && x->level == y->level;
}

static unsigned mmu500_level_shift(unsigned level, unsigned granule)
{
    return granule + (VMSA_LEVELS - 1 - level) * (granule - 3);
}

static bool mmu500_is_global(hwaddr off)
{
    return off < MMU500_CB_BASE;
}

/* Interrupts */

static bool mmu500_cb_irq_pending(ArmMmu500Cb *cb)
{
    return (cb->fsr & CB_FSR_FAULT) && FIELD_EX32(cb->sctlr, CB_SCTLR, CFIE);
}

/*
 * Context bank n raises context interrupt n: in SMMUv2 each bank has its
 * own, and CBARn.IRPTNDX is SMMUv1's (Linux's arm-smmu.c writes it only
 * there, and leaves it 0 on an MMU-500).
 */
static void mmu500_update_irq(ArmMmu500State *s)
{
    for (unsigned n = 0; n < s->num_cb; n++) {
        qemu_set_irq(s->context_irq[n], mmu500_cb_irq_pending(&s->cb[n]));
    }
    qemu_set_irq(s->global_irq,
                 s->gfsr && (FIELD_EX32(s->scr0, SCR0, GFIE) ||
                             FIELD_EX32(s->scr0, SCR0, GCFGFIE)));
}

/* Faults */

static void mmu500_global_fault(ArmMmu500State *s, uint32_t bit, uint16_t sid,
                                hwaddr addr, bool write)
{
    trace_arm_mmu500_global_fault(sid, addr, bit);
    if (!FIELD_EX32(s->scr0, SCR0, GFRE) &&
        !FIELD_EX32(s->scr0, SCR0, GCFGFRE)) {
        return;
    }
    if (s->gfsr & ~R_GFSR_MULTI_MASK) {
        s->gfsr |= R_GFSR_MULTI_MASK;
    } else {
        s->gfsr |= bit;
        s->gfar = addr;
        s->gfsynr[0] = write ? R_GFSYNR0_WNR_MASK : 0;
        s->gfsynr[1] = sid;
        s->gfsynr[2] = 0;
    }
    mmu500_update_irq(s);
}

static uint32_t mmu500_fsr_bit(SMMUPTWEventType type)
{
    switch (type) {
    case SMMU_PTW_ERR_ACCESS:
        return R_CB_FSR_AFF_MASK;
    case SMMU_PTW_ERR_PERMISSION:
        return R_CB_FSR_PF_MASK;
    case SMMU_PTW_ERR_ADDR_SIZE:
        return R_CB_FSR_ASF_MASK;
    case SMMU_PTW_ERR_WALK_EABT:
        return R_CB_FSR_EF_MASK;
    default:
        return R_CB_FSR_TF_MASK;
    }
}

static void mmu500_context_fault(ArmMmu500State *s, unsigned n, uint16_t sid,
                                 hwaddr iova, bool write, uint32_t bit,
                                 unsigned level)
{
    ArmMmu500Cb *cb = &s->cb[n];

    trace_arm_mmu500_context_fault(n, sid, iova, write, bit);
    if (!FIELD_EX32(cb->sctlr, CB_SCTLR, CFRE)) {
        return;
    }
    if (cb->fsr & CB_FSR_FAULT) {
        cb->fsr |= R_CB_FSR_MULTI_MASK;
    } else {
        cb->fsr = bit | CB_FSR_FORMAT_AARCH64 << R_CB_FSR_FORMAT_SHIFT;
        cb->far = iova;
        cb->fsynr[0] = FIELD_DP32(0, CB_FSYNR0, PLVL, level & 3);
        cb->fsynr[0] = FIELD_DP32(cb->fsynr[0], CB_FSYNR0, WNR, write);
        cb->fsynr[0] = FIELD_DP32(cb->fsynr[0], CB_FSYNR0, S1CBNDX, n);
        cb->fsynr[1] = 0;
        cb->cbfrsynra = sid;
    }
    mmu500_update_irq(s);
}

/* The TLB */

static void mmu500_tlb_flush_all(ArmMmu500State *s)
{
    trace_arm_mmu500_tlb_inv("all", 0, 0, 0);
    g_hash_table_remove_all(s->tlb);
}

typedef struct ArmMmu500TlbMatch {
    int vmid, asid;         /* -1: any */
    uint64_t va;            /* with has_va */
    bool has_va;
} ArmMmu500TlbMatch;

static gboolean mmu500_tlb_match(gpointer key, gpointer value, gpointer data)
{
    ArmMmu500TlbKey *k = key;
    SMMUTLBEntry *e = value;
    ArmMmu500TlbMatch *m = data;

    if (m->vmid >= 0 && k->vmid != m->vmid) {
        return false;
    }
    if (m->asid >= 0 && k->asid != m->asid) {
        return false;
    }
    return !m->has_va || (m->va & ~e->entry.addr_mask) == e->entry.iova;
}

static void mmu500_tlb_inv(ArmMmu500State *s, const char *op, int vmid,
                           int asid, bool has_va, uint64_t va)
{
    ArmMmu500TlbMatch m = {
        .vmid = vmid, .asid = asid, .va = va, .has_va = has_va,
    };

    trace_arm_mmu500_tlb_inv(op, vmid, asid, va);
    /*
     * By VA: an entry for it can be of any level and either granule; look
     * each up (no scan of the whole TLB when the ASID is known).
     */
    if (has_va && asid >= 0 && vmid >= 0) {
        static const uint8_t granules[] = { 12, 16 };

        for (unsigned g = 0; g < ARRAY_SIZE(granules); g++) {
            for (unsigned level = 1; level < VMSA_LEVELS; level++) {
                unsigned shift = mmu500_level_shift(level, granules[g]);
                ArmMmu500TlbKey k = {
                    .iova = shift < 64 ? va & ~((1ULL << shift) - 1) : 0,
                    .vmid = vmid, .asid = asid,
                    .granule = granules[g], .level = level,
                };

                g_hash_table_remove(s->tlb, &k);
            }
        }
        return;
    }
    g_hash_table_foreach_remove(s->tlb, mmu500_tlb_match, &m);
}

/* Translation */

/* What sid's transaction does: bypass, fault, or context bank *n */
typedef enum {
    MMU500_BYPASS,
    MMU500_FAULT,
    MMU500_TRANSLATE,
} ArmMmu500Route;

static ArmMmu500Route mmu500_route(ArmMmu500State *s, uint16_t sid,
                                   hwaddr addr, bool write, unsigned *n)
{
    int match = -1;
    uint32_t s2cr;

    if (FIELD_EX32(s->scr0, SCR0, CLIENTPD)) {
        return MMU500_BYPASS;
    }
    for (unsigned i = 0; i < s->num_smr; i++) {
        uint32_t smr = s->smr[i];
        uint32_t mask = FIELD_EX32(smr, SMR, MASK);

        if (!FIELD_EX32(smr, SMR, VALID) ||
            ((sid ^ FIELD_EX32(smr, SMR, ID)) & ~mask)) {
            continue;
        }
        if (match >= 0) {
            mmu500_global_fault(s, R_GFSR_SMCF_MASK, sid, addr, write);
            return MMU500_FAULT;
        }
        match = i;
    }
    if (match < 0) {
        if (FIELD_EX32(s->scr0, SCR0, USFCFG)) {
            mmu500_global_fault(s, R_GFSR_USF_MASK, sid, addr, write);
            return MMU500_FAULT;
        }
        return MMU500_BYPASS;
    }
    s2cr = s->s2cr[match];
    switch (FIELD_EX32(s2cr, S2CR, TYPE)) {
    case S2CR_TYPE_BYPASS:
        return MMU500_BYPASS;
    case S2CR_TYPE_TRANS:
        *n = FIELD_EX32(s2cr, S2CR, CBNDX);
        if (*n >= s->num_cb ||
            FIELD_EX32(s->cb[*n].cbar, CBAR, TYPE) != CBAR_TYPE_S1_S2BYPASS) {
            qemu_log_mask(LOG_GUEST_ERROR, "arm-mmu500: stream 0x%x maps to "
                          "context bank %u, which is not a stage 1 bank\n",
                          sid, *n);
            mmu500_global_fault(s, R_GFSR_UCBF_MASK, sid, addr, write);
            return MMU500_FAULT;
        }
        return MMU500_TRANSLATE;
    default:
        mmu500_global_fault(s, R_GFSR_ICF_MASK, sid, addr, write);
        return MMU500_FAULT;
    }
}

static unsigned mmu500_tg0_granule(unsigned tg)
{
    return tg == 1 ? 16 : tg == 2 ? 14 : 12;
}

static unsigned mmu500_tg1_granule(unsigned tg)
{
    return tg == 1 ? 14 : tg == 3 ? 16 : 12;
}

static const uint8_t mmu500_pa_bits[] = { 32, 36, 40, 42, 44, 48, 48, 48 };

/* Bank n's stage 1 configuration; false if it is not one the model walks */
static bool mmu500_cb_cfg(ArmMmu500State *s, unsigned n, SMMUTransCfg *cfg)
{
    ArmMmu500Cb *cb = &s->cb[n];
    bool as16 = FIELD_EX32(cb->tcr2, CB_TCR2, AS);

    memset(cfg, 0, sizeof(*cfg));
    if (!FIELD_EX32(cb->cba2r, CBA2R, VA64)) {
        qemu_log_mask(LOG_UNIMP, "arm-mmu500: context bank %u uses an "
                      "AArch32 format (CBA2R.VA64 0)\n", n);
        return false;
    }
    cfg->stage = SMMU_STAGE_1;
    cfg->aa64 = true;
    cfg->record_faults = FIELD_EX32(cb->sctlr, CB_SCTLR, CFRE);
    cfg->affd = FIELD_EX32(cb->sctlr, CB_SCTLR, AFFD);
    cfg->oas = mmu500_pa_bits[FIELD_EX32(cb->tcr2, CB_TCR2, PASIZE)];
    cfg->tbi = FIELD_EX32(cb->tcr2, CB_TCR2, TBI0) |
               FIELD_EX32(cb->tcr2, CB_TCR2, TBI1) << 1;
    cfg->asid = FIELD_EX64(cb->ttbr[0], CB_TTBR, ASID) & (as16 ? 0xffff : 0xff);
    cfg->tt[0].tsz = FIELD_EX32(cb->tcr, CB_TCR, T0SZ);
    cfg->tt[0].granule_sz = mmu500_tg0_granule(FIELD_EX32(cb->tcr, CB_TCR,
                                                          TG0));
    cfg->tt[0].ttb = FIELD_EX64(cb->ttbr[0], CB_TTBR, ADDR);
    cfg->tt[0].disabled = FIELD_EX32(cb->tcr, CB_TCR, EPD0);
    cfg->tt[1].tsz = FIELD_EX32(cb->tcr, CB_TCR, T1SZ);
    cfg->tt[1].granule_sz = mmu500_tg1_granule(FIELD_EX32(cb->tcr, CB_TCR,
                                                          TG1));
    cfg->tt[1].ttb = FIELD_EX64(cb->ttbr[1], CB_TTBR, ADDR);
    cfg->tt[1].disabled = FIELD_EX32(cb->tcr, CB_TCR, EPD1);
    for (unsigned i = 0; i < 2; i++) {
        SMMUTransTableInfo *tt = &cfg->tt[i];

        if (tt->granule_sz == 14) {
            qemu_log_mask(LOG_UNIMP, "arm-mmu500: context bank %u: 16 KiB "
                          "granule (SMMU_IDR2.PTFS_16K is 0)\n", n);
            tt->disabled = true;
        }
        /* The walker's input sizes for a 48-bit VA */
        if (!tt->disabled && (tt->tsz < 16 || tt->tsz > 39)) {
            qemu_log_mask(LOG_GUEST_ERROR, "arm-mmu500: context bank %u: "
                          "T%uSZ %u is out of range\n", n, i, tt->tsz);
            tt->disabled = true;
        }
    }
    return true;
}

static SMMUTLBEntry *mmu500_tlb_lookup(ArmMmu500State *s, SMMUTransCfg *cfg,
                                       uint16_t vmid, hwaddr iova)
{
    SMMUTransTableInfo *tt = select_tt(cfg, iova);

    if (!tt) {
        return NULL;
    }
    for (unsigned level = 1; level < VMSA_LEVELS; level++) {
        unsigned shift = mmu500_level_shift(level, tt->granule_sz);
        ArmMmu500TlbKey k = {
            .iova = iova & ~((1ULL << shift) - 1),
            .vmid = vmid, .asid = cfg->asid,
            .granule = tt->granule_sz, .level = level,
        };
        SMMUTLBEntry *e = g_hash_table_lookup(s->tlb, &k);

        if (e) {
            return e;
        }
    }
    return NULL;
}

static IOMMUTLBEntry mmu500_translate(IOMMUMemoryRegion *mr, hwaddr addr,
                                      IOMMUAccessFlags flag, int iommu_idx)
{
    ArmMmu500Stream *st = container_of(mr, ArmMmu500Stream, iommu);
    ArmMmu500State *s = st->s;
    bool write = flag & IOMMU_WO;
    IOMMUTLBEntry entry = {
        .target_as = &address_space_memory,
        .iova = addr & ~(hwaddr)(MMU500_PAGE - 1),
        .translated_addr = addr & ~(hwaddr)(MMU500_PAGE - 1),
        .addr_mask = MMU500_PAGE - 1,
        .perm = IOMMU_NONE,
    };
    SMMUPTWEventInfo info = { .type = SMMU_PTW_ERR_NONE };
    SMMUTransCfg cfg;
    SMMUTLBEntry *e;
    unsigned n = 0;
    uint16_t vmid;

    switch (mmu500_route(s, st->sid, addr, write, &n)) {
    case MMU500_BYPASS:
        entry.perm = IOMMU_RW;
        trace_arm_mmu500_bypass(st->sid, addr);
        return entry;
    case MMU500_FAULT:
        return entry;
    case MMU500_TRANSLATE:
        break;
    }
    if (!FIELD_EX32(s->cb[n].sctlr, CB_SCTLR, M)) {
        entry.perm = IOMMU_RW;
        trace_arm_mmu500_bypass(st->sid, addr);
        return entry;
    }
    if (FIELD_EX32(s->cb[n].sctlr, CB_SCTLR, CFCFG) && !s->cfcfg_logged) {
        qemu_log_mask(LOG_UNIMP, "arm-mmu500: stall mode (SCTLR.CFCFG) is "
                      "not modelled: faults terminate\n");
        s->cfcfg_logged = true;
    }
    if (!mmu500_cb_cfg(s, n, &cfg)) {
        mmu500_context_fault(s, n, st->sid, addr, write, R_CB_FSR_TF_MASK, 0);
        return entry;
    }
    vmid = FIELD_EX32(s->cb[n].cbar, CBAR, VMID);
    e = mmu500_tlb_lookup(s, &cfg, vmid, addr);
    if (!e) {
        SMMUTransTableInfo *tt = select_tt(&cfg, addr);

        e = g_new0(SMMUTLBEntry, 1);
        /* Stage 1 alone: smmu_ptw() needs no SMMUState (only nesting does) */
        if (!tt || smmu_ptw(NULL, &cfg, addr, flag, e, &info)) {
            unsigned level = tt ? e->level : 0;

            g_free(e);
            trace_arm_mmu500_walk_fault(n, st->sid, addr, info.type);
            if (flag != IOMMU_NONE) {
                mmu500_context_fault(s, n, st->sid, addr, write,
                                     mmu500_fsr_bit(info.type), level);
            }
            return entry;
        } else {
            ArmMmu500TlbKey *k = g_new0(ArmMmu500TlbKey, 1);

            if (g_hash_table_size(s->tlb) >= MMU500_TLB_MAX) {
                mmu500_tlb_flush_all(s);
            }
            k->iova = e->entry.iova;
            k->vmid = vmid;
            k->asid = cfg.asid;
            k->granule = tt->granule_sz;
            k->level = e->level;
            g_hash_table_insert(s->tlb, k, e);
            trace_arm_mmu500_tlb_miss(n, cfg.asid, addr,
                                      e->entry.translated_addr);
        }
    } else if (write && !(e->entry.perm & IOMMU_WO)) {
        trace_arm_mmu500_walk_fault(n, st->sid, addr, SMMU_PTW_ERR_PERMISSION);
        mmu500_context_fault(s, n, st->sid, addr, write, R_CB_FSR_PF_MASK,
                             e->level);
        return entry;
    }
    entry.iova = addr & ~e->entry.addr_mask;
    entry.translated_addr = e->entry.translated_addr;
    entry.addr_mask = e->entry.addr_mask;
    entry.perm = e->entry.perm;
    return entry;
}

static int mmu500_notify_flag_changed(IOMMUMemoryRegion *iommu,
                                      IOMMUNotifierFlag old,
                                      IOMMUNotifierFlag new, Error **errp)
{
    if (new != IOMMU_NOTIFIER_NONE) {
        error_setg(errp, "arm-mmu500 does not notify mapping changes");
        return -EINVAL;
    }
    return 0;
}

AddressSpace *arm_mmu500_stream_as(ArmMmu500State *s, uint16_t sid)
{
    ArmMmu500Stream *st = g_hash_table_lookup(s->streams,
                                              GUINT_TO_POINTER(sid));
    g_autofree char *name = NULL;

    if (st) {
        return &st->as;
    }
    st = g_new0(ArmMmu500Stream, 1);
    st->s = s;
    st->sid = sid;
    name = g_strdup_printf("arm-mmu500-sid-0x%x", sid);
    memory_region_init_iommu(&st->iommu, sizeof(st->iommu),
                             TYPE_ARM_MMU500_IOMMU_MEMORY_REGION, OBJECT(s),
                             name, UINT64_MAX);
    address_space_init(&st->as, MEMORY_REGION(&st->iommu), name);
    g_hash_table_insert(s->streams, GUINT_TO_POINTER(sid), st);
    return &st->as;
}

/* Registers */

static uint32_t mmu500_idr(ArmMmu500State *s, unsigned i)
{
    uint32_t v = 0;

    switch (i) {
    case 0:
        v = FIELD_DP32(v, IDR0, S1TS, 1);
        v = FIELD_DP32(v, IDR0, SMS, 1);
        v = FIELD_DP32(v, IDR0, ATOSNS, 1);
        v = FIELD_DP32(v, IDR0, PTFS_NO_AARCH32, 1);
        v = FIELD_DP32(v, IDR0, PTFS_NO_AARCH32S, 1);
        v = FIELD_DP32(v, IDR0, NUMIRPT, 1);
        v = FIELD_DP32(v, IDR0, CTTW, 1);   /* QEMU's memory is coherent */
        v = FIELD_DP32(v, IDR0, NUMSIDB, MMU500_SID_BITS);
        v = FIELD_DP32(v, IDR0, NUMSMRG, s->num_smr);
        return v;
    case 1:
        v = FIELD_DP32(v, IDR1, NUMPAGENDXB, MMU500_NUMPAGENDXB);
        v = FIELD_DP32(v, IDR1, NUMCB, s->num_cb);
        return v;
    case 2:
        v = FIELD_DP32(v, IDR2, IAS, 5);    /* 48 bits */
        v = FIELD_DP32(v, IDR2, OAS, 5);
        v = FIELD_DP32(v, IDR2, UBS, 5);    /* 49-bit upstream bus */
        v = FIELD_DP32(v, IDR2, PTFS_4K, 1);
        v = FIELD_DP32(v, IDR2, PTFS_64K, 1);
        return v;
    case 7:
        v = FIELD_DP32(v, IDR7, MAJOR, 2);  /* r2p4 */
        v = FIELD_DP32(v, IDR7, MINOR, 4);
        return v;
    default:
        return 0;
    }
}

static uint64_t mmu500_read_global(ArmMmu500State *s, hwaddr off)
{
    if (off >= 2 * MMU500_PAGE) {
        return 0;   /* the implementation-defined pages: RAZ */
    }
    if (off >= MMU500_PAGE) {
        off -= MMU500_PAGE;
        if (off < A_CBAR0 + 4 * s->num_cb) {
            return s->cb[(off - A_CBAR0) / 4].cbar;
        }
        if (off >= A_CBFRSYNRA0 && off < A_CBFRSYNRA0 + 4 * s->num_cb) {
            return s->cb[(off - A_CBFRSYNRA0) / 4].cbfrsynra;
        }
        if (off >= A_CBA2R0 && off < A_CBA2R0 + 4 * s->num_cb) {
            return s->cb[(off - A_CBA2R0) / 4].cba2r;
        }
        return 0;
    }
    if (off >= A_SMR0 && off < A_SMR0 + 4 * s->num_smr) {
        return s->smr[(off - A_SMR0) / 4];
    }
    if (off >= A_S2CR0 && off < A_S2CR0 + 4 * s->num_smr) {
        return s->s2cr[(off - A_S2CR0) / 4];
    }
    switch (off) {
    case A_SCR0:
        return s->scr0;
    case A_SACR:
        return s->sacr;
    case A_IDR0 ... A_IDR7:
        return mmu500_idr(s, (off - A_IDR0) / 4);
    case A_GFAR:
        return s->gfar;
    case A_GFAR + 4:
        return s->gfar >> 32;
    case A_GFSR:
        return s->gfsr;
    case A_GFSYNR0 ... A_GFSYNR2:
        return s->gfsynr[(off - A_GFSYNR0) / 4];
    case A_TLBGSTATUS:
        return 0;   /* maintenance completes at once: GSACTIVE 0 */
    default:
        return 0;
    }
}

static uint64_t mmu500_read_cb(ArmMmu500State *s, unsigned n, hwaddr off)
{
    ArmMmu500Cb *cb = &s->cb[n];

    switch (off) {
    case A_CB_SCTLR:
        return cb->sctlr;
    case A_CB_ACTLR:
        return cb->actlr;
    case A_CB_TCR2:
        return cb->tcr2;
    case A_CB_TTBR0:
    case A_CB_TTBR1:
        return cb->ttbr[(off - A_CB_TTBR0) / 8];
    case A_CB_TTBR0 + 4:
    case A_CB_TTBR1 + 4:
        return cb->ttbr[(off - A_CB_TTBR0) / 8] >> 32;
    case A_CB_TCR:
        return cb->tcr;
    case A_CB_CONTEXTIDR:
        return cb->contextidr;
    case A_CB_MAIR0:
    case A_CB_MAIR1:
        return cb->mair[(off - A_CB_MAIR0) / 4];
    case A_CB_PAR:
        return cb->par;
    case A_CB_PAR + 4:
        return cb->par >> 32;
    case A_CB_FSR:
        return cb->fsr;
    case A_CB_FAR:
        return cb->far;
    case A_CB_FAR + 4:
        return cb->far >> 32;
    case A_CB_FSYNR0:
    case A_CB_FSYNR1:
        return cb->fsynr[(off - A_CB_FSYNR0) / 4];
    case A_CB_TLBSTATUS:
        return 0;   /* SACTIVE 0: TLBSYNC completes at once */
    default:
        return 0;
    }
}

static uint64_t mmu500_read(void *opaque, hwaddr addr, unsigned size)
{
    ArmMmu500State *s = opaque;
    uint64_t v;

    if (mmu500_is_global(addr)) {
        v = mmu500_read_global(s, addr);
        if (size == 8) {
            v = (uint32_t)v | mmu500_read_global(s, addr + 4) << 32;
        }
    } else {
        unsigned n = (addr - MMU500_CB_BASE) / MMU500_PAGE;
        hwaddr off = (addr - MMU500_CB_BASE) % MMU500_PAGE;

        if (n >= s->num_cb) {
            v = 0;
        } else if (size == 8 && (off == A_CB_TTBR0 || off == A_CB_TTBR1 ||
                                 off == A_CB_PAR || off == A_CB_FAR)) {
            v = mmu500_read_cb(s, n, off);
        } else {
            v = (uint32_t)mmu500_read_cb(s, n, off);
            if (size == 8) {
                v |= (uint64_t)(uint32_t)mmu500_read_cb(s, n, off + 4) << 32;
            }
        }
    }
    if (size == 4) {
        v = (uint32_t)v;
    }
    trace_arm_mmu500_read(addr, v, size);
    return v;
}

static uint32_t mmu500_smr_write_mask(void)
{
    return R_SMR_VALID_MASK | R_SMR_MASK_MASK | R_SMR_ID_MASK;
}

static void mmu500_write_global(ArmMmu500State *s, hwaddr off, uint32_t v)
{
    if (off >= 2 * MMU500_PAGE) {
        return;     /* the implementation-defined pages: WI */
    }
    if (off >= MMU500_PAGE) {
        off -= MMU500_PAGE;
        if (off < A_CBAR0 + 4 * s->num_cb) {
            s->cb[(off - A_CBAR0) / 4].cbar = v;
            mmu500_update_irq(s);
        } else if (off >= A_CBA2R0 && off < A_CBA2R0 + 4 * s->num_cb) {
            s->cb[(off - A_CBA2R0) / 4].cba2r = v & R_CBA2R_VA64_MASK;
        }
        return;
    }
    if (off >= A_SMR0 && off < A_SMR0 + 4 * s->num_smr) {
        s->smr[(off - A_SMR0) / 4] = v & mmu500_smr_write_mask();
        return;
    }
    if (off >= A_S2CR0 && off < A_S2CR0 + 4 * s->num_smr) {
        s->s2cr[(off - A_S2CR0) / 4] = v;
        return;
    }
    switch (off) {
    case A_SCR0:
        s->scr0 = v;
        mmu500_update_irq(s);
        return;
    case A_SACR:
        s->sacr = v;
        return;
    case A_GFSR:
        s->gfsr &= ~v;
        mmu500_update_irq(s);
        return;
    case A_GFSRRESTORE:
        s->gfsr = v;
        mmu500_update_irq(s);
        return;
    case A_TLBIVMID:
        mmu500_tlb_inv(s, "vmid", v & 0xffff, -1, false, 0);
        return;
    case A_TLBIALLNSNH:
    case A_TLBIALLH:
        mmu500_tlb_flush_all(s);
        return;
    case A_TLBGSYNC:
        return;
    default:
        qemu_log_mask(LOG_GUEST_ERROR, "arm-mmu500: write 0x%x to read-only "
                      "or unknown register 0x%" HWADDR_PRIx "\n", v, off);
        return;
    }
}

/* The ASID a TLBI by VA names: its bits 63:48 */
static void mmu500_tlbi_va(ArmMmu500State *s, unsigned n, const char *op,
                           uint64_t v, bool all_asids)
{
    ArmMmu500Cb *cb = &s->cb[n];
    bool as16 = FIELD_EX32(cb->tcr2, CB_TCR2, AS);
    uint64_t va = extract64(v, 0, 44) << 12;
    int asid = extract64(v, 48, 16) & (as16 ? 0xffff : 0xff);

    /* The VA's top bits are a sign extension of bit 55 (TTBR1's half) */
    if (extract64(va, 55, 1)) {
        va |= ~MAKE_64BIT_MASK(0, 56);
    }
    mmu500_tlb_inv(s, op, FIELD_EX32(cb->cbar, CBAR, VMID),
                   all_asids ? -1 : asid, true, va);
}

static void mmu500_write_cb(ArmMmu500State *s, unsigned n, hwaddr off,
                            uint64_t v, unsigned size)
{
    ArmMmu500Cb *cb = &s->cb[n];

    switch (off) {
    case A_CB_SCTLR:
        cb->sctlr = v;
        mmu500_update_irq(s);
        return;
    case A_CB_ACTLR:
        cb->actlr = v;
        return;
    case A_CB_RESUME:
        cb->fsr &= ~R_CB_FSR_SS_MASK;
        mmu500_update_irq(s);
        return;
    case A_CB_TCR2:
        cb->tcr2 = v;
        return;
    case A_CB_TTBR0:
    case A_CB_TTBR1:
        if (size == 8) {
            cb->ttbr[(off - A_CB_TTBR0) / 8] = v;
        } else {
            cb->ttbr[(off - A_CB_TTBR0) / 8] =
                deposit64(cb->ttbr[(off - A_CB_TTBR0) / 8], 0, 32, v);
        }
        return;
    case A_CB_TTBR0 + 4:
    case A_CB_TTBR1 + 4:
        cb->ttbr[(off - A_CB_TTBR0) / 8] =
            deposit64(cb->ttbr[(off - A_CB_TTBR0) / 8], 32, 32, v);
        return;
    case A_CB_TCR:
        cb->tcr = v;
        return;
    case A_CB_CONTEXTIDR:
        cb->contextidr = v;
        return;
    case A_CB_MAIR0:
    case A_CB_MAIR1:
        cb->mair[(off - A_CB_MAIR0) / 4] = v;
        return;
    case A_CB_FSR:
        cb->fsr &= ~(uint32_t)v;
        mmu500_update_irq(s);
        return;
    case A_CB_FSRRESTORE:
        cb->fsr = v;
        mmu500_update_irq(s);
        return;
    case A_CB_FAR:
        cb->far = size == 8 ? v : deposit64(cb->far, 0, 32, v);
        return;
    case A_CB_FAR + 4:
        cb->far = deposit64(cb->far, 32, 32, v);
        return;
    case A_CB_FSYNR0:
    case A_CB_FSYNR1:
        cb->fsynr[(off - A_CB_FSYNR0) / 4] = v;
        return;
    case A_CB_TLBIVA:
    case A_CB_TLBIVAL:
        if (size == 8) {
            mmu500_tlbi_va(s, n, "va", v, false);
        } else {
            /* The AArch32 form: invalidating more is allowed */
            mmu500_tlb_inv(s, "va32", FIELD_EX32(cb->cbar, CBAR, VMID), -1,
                           false, 0);
        }
        return;
    case A_CB_TLBIVAA:
    case A_CB_TLBIVAAL:
        if (size == 8) {
            mmu500_tlbi_va(s, n, "vaa", v, true);
        } else {
            mmu500_tlb_inv(s, "vaa32", FIELD_EX32(cb->cbar, CBAR, VMID), -1,
                           false, 0);
        }
        return;
    case A_CB_TLBIASID:
        mmu500_tlb_inv(s, "asid", FIELD_EX32(cb->cbar, CBAR, VMID),
                       v & (FIELD_EX32(cb->tcr2, CB_TCR2, AS) ? 0xffff : 0xff),
                       false, 0);
        return;
    case A_CB_TLBIALL:
        mmu500_tlb_inv(s, "vmid", FIELD_EX32(cb->cbar, CBAR, VMID), -1,
                       false, 0);
        return;
    case A_CB_TLBSYNC:
        return;
    default:
        qemu_log_mask(LOG_GUEST_ERROR, "arm-mmu500: write to read-only or "
                      "unknown register 0x%" HWADDR_PRIx " of context bank "
                      "%u\n", off, n);
        return;
    }
}

static void mmu500_write(void *opaque, hwaddr addr, uint64_t v, unsigned size)
{
    ArmMmu500State *s = opaque;

    trace_arm_mmu500_write(addr, v, size);
    if (mmu500_is_global(addr)) {
        mmu500_write_global(s, addr, v);
        if (size == 8) {
            mmu500_write_global(s, addr + 4, v >> 32);
        }
    } else {
        unsigned n = (addr - MMU500_CB_BASE) / MMU500_PAGE;
        hwaddr off = (addr - MMU500_CB_BASE) % MMU500_PAGE;

        if (n >= s->num_cb) {
            qemu_log_mask(LOG_GUEST_ERROR, "arm-mmu500: write to context "
                          "bank %u of %u\n", n, s->num_cb);
            return;
        }
        switch (off) {
        case A_CB_TTBR0:
        case A_CB_TTBR1:
        case A_CB_FAR:
        case A_CB_TLBIVA:
        case A_CB_TLBIVAA:
        case A_CB_TLBIVAL:
        case A_CB_TLBIVAAL:
            mmu500_write_cb(s, n, off, v, size);
            break;
        default:
            mmu500_write_cb(s, n, off, (uint32_t)v, 4);
            if (size == 8) {
                mmu500_write_cb(s, n, off + 4, v >> 32, 4);
            }
        }
    }
}

static const MemoryRegionOps mmu500_ops = {
    .read = mmu500_read,
    .write = mmu500_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 4,
        .max_access_size = 8,
    },
};

/* The device */

static void mmu500_reset_hold(Object *obj, ResetType type)
{
    ArmMmu500State *s = ARM_MMU500(obj);

    s->scr0 = R_SCR0_CLIENTPD_MASK;     /* clients bypass until enabled */
    s->sacr = 0;
    s->gfsr = 0;
    s->gfar = 0;
    memset(s->gfsynr, 0, sizeof(s->gfsynr));
    memset(s->smr, 0, sizeof(s->smr));
    for (unsigned i = 0; i < MMU500_MAX_SMR; i++) {
        s->s2cr[i] = FIELD_DP32(0, S2CR, TYPE, S2CR_TYPE_FAULT);
    }
    memset(s->cb, 0, sizeof(s->cb));
    s->cfcfg_logged = false;
    g_hash_table_remove_all(s->tlb);
    mmu500_update_irq(s);
}

static void mmu500_stream_free(gpointer p)
{
    ArmMmu500Stream *st = p;

    address_space_destroy(&st->as);
    object_unparent(OBJECT(&st->iommu));
    g_free(st);
}

static void mmu500_init(Object *obj)
{
    ArmMmu500State *s = ARM_MMU500(obj);

    s->tlb = g_hash_table_new_full(mmu500_tlb_hash, mmu500_tlb_equal,
                                   g_free, g_free);
    s->streams = g_hash_table_new_full(NULL, NULL, NULL, mmu500_stream_free);
}

static void mmu500_finalize(Object *obj)
{
    ArmMmu500State *s = ARM_MMU500(obj);

    g_hash_table_destroy(s->streams);
    g_hash_table_destroy(s->tlb);
}

static void mmu500_realize(DeviceState *dev, Error **errp)
{
    ArmMmu500State *s = ARM_MMU500(dev);
    SysBusDevice *sbd = SYS_BUS_DEVICE(dev);

    if (s->num_cb < 1 || s->num_cb > MMU500_MAX_CB) {
        error_setg(errp, "arm-mmu500: num-cb must be 1..%d", MMU500_MAX_CB);
        return;
    }
    if (s->num_smr < 1 || s->num_smr > MMU500_MAX_SMR) {
        error_setg(errp, "arm-mmu500: num-smr must be 1..%d", MMU500_MAX_SMR);
        return;
    }
    memory_region_init_io(&s->mmio, OBJECT(s), &mmu500_ops, s, "arm-mmu500",
                          MMU500_MMIO_SIZE);
    sysbus_init_mmio(sbd, &s->mmio);
    sysbus_init_irq(sbd, &s->global_irq);
    for (unsigned i = 0; i < s->num_cb; i++) {
        sysbus_init_irq(sbd, &s->context_irq[i]);
    }
}

uint32_t arm_mmu500_phandle(ArmMmu500State *s, void *fdt)
{
    if (!s->phandle) {
        s->phandle = qemu_fdt_alloc_phandle(fdt);
    }
    return s->phandle;
}

uint32_t arm_mmu500_fdt_node(ArmMmu500State *s, void *fdt, const char *parent,
                             uint64_t base, const uint32_t *spi, unsigned nspi)
{
    g_autofree char *node = g_strdup_printf("%s/iommu@%" PRIx64, parent,
                                            base);
    g_autofree uint32_t *irqs = g_new(uint32_t, 3 * nspi);

    qemu_fdt_add_subnode(fdt, node);
    qemu_fdt_setprop_string(fdt, node, "compatible", "arm,mmu-500");
    qemu_fdt_setprop_cells(fdt, node, "reg", base, MMU500_MMIO_SIZE);
    qemu_fdt_setprop_cell(fdt, node, "#global-interrupts", 1);
    for (unsigned i = 0; i < nspi; i++) {
        irqs[3 * i] = cpu_to_be32(0);           /* GIC_SPI */
        irqs[3 * i + 1] = cpu_to_be32(spi[i]);
        irqs[3 * i + 2] = cpu_to_be32(4);       /* IRQ_TYPE_LEVEL_HIGH */
    }
    qemu_fdt_setprop(fdt, node, "interrupts", irqs, 3 * nspi * 4);
    qemu_fdt_setprop_cell(fdt, node, "#iommu-cells", 1);
    qemu_fdt_setprop_cell(fdt, node, "phandle", arm_mmu500_phandle(s, fdt));
    return s->phandle;
}

static const Property mmu500_properties[] = {
    DEFINE_PROP_UINT32("num-cb", ArmMmu500State, num_cb, 16),
    DEFINE_PROP_UINT32("num-smr", ArmMmu500State, num_smr, 48),
};

/* Not migratable: as the engine model (nothing here migrates a VM) */
static const VMStateDescription vmstate_mmu500 = {
    .name = TYPE_ARM_MMU500,
    .unmigratable = 1,
};

static void mmu500_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    ResettableClass *rc = RESETTABLE_CLASS(klass);

    dc->desc = "Arm CoreLink MMU-500 (SMMUv2), stage 1";
    dc->realize = mmu500_realize;
    dc->vmsd = &vmstate_mmu500;
    dc->user_creatable = true;
    rc->phases.hold = mmu500_reset_hold;
    device_class_set_props(dc, mmu500_properties);
}

static void mmu500_iommu_class_init(ObjectClass *klass, void *data)
{
    IOMMUMemoryRegionClass *imrc = IOMMU_MEMORY_REGION_CLASS(klass);

    imrc->translate = mmu500_translate;
    imrc->notify_flag_changed = mmu500_notify_flag_changed;
}

static const TypeInfo mmu500_types[] = {
    {
        .name = TYPE_ARM_MMU500,
        .parent = TYPE_SYS_BUS_DEVICE,
        .instance_size = sizeof(ArmMmu500State),
        .instance_init = mmu500_init,
        .instance_finalize = mmu500_finalize,
        .class_init = mmu500_class_init,
    },
    {
        .name = TYPE_ARM_MMU500_IOMMU_MEMORY_REGION,
        .parent = TYPE_IOMMU_MEMORY_REGION,
        .class_init = mmu500_iommu_class_init,
    },
};

DEFINE_TYPES(mmu500_types)
