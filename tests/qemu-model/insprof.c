/*
 * insprof: a TCG plugin that counts the guest instructions executed in
 * each translation block, between markers (make profile, scripts/profile.sh).
 *
 * The guest toggles counting by executing HINT #100 (0xd5032c9f), a NOP in
 * the unallocated hint space (exanest-bench does it around the span it times
 * when EXANEST_PROF is set). At each marker that ends a span, the counts go
 * to OUT.N (N = 1, 2, ... per span) as "pc insns execs" lines, one per block
 * executed, and start again from zero. Under -icount shift=0 an instruction
 * is a nanosecond of the guest's virtual time, so the counts are its time,
 * exactly, on whichever vCPU.
 *
 * A second count per block is the critical path's: from HINT #101 (the
 * driver's interrupt thread starts, or its poll sees a fault) to HINT #102
 * (the driver wrote the fault's RESUME or NACK; a path ends) or HINT #103
 * (the thread returns; a path is dropped, not counted), on every vCPU: under
 * -icount the virtual clock counts every vCPU's instructions, so what the
 * other vCPUs execute meanwhile is the path's time too. (Nor could a vCPU's
 * own path be told apart: without CF_PARALLEL, as -icount runs, QEMU passes
 * callbacks the index of the vCPU that translated the block, a constant, not
 * that of the vCPU executing it.) Blocks are counted whole when they start
 * on the path, so a path's count is exact to a block at each end. Such lines
 * have a fourth column, and the span's file starts with "# paths N".
 *
 * Copyright (c) 2026 ExaNeSt DMA developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>
#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define INSPROF_MARK 0xd5032c9fu
#define INSPROF_CRIT_BEGIN 0xd5032cbfu
#define INSPROF_CRIT_END 0xd5032cdfu
#define INSPROF_CRIT_DROP 0xd5032cffu

typedef struct Block {
    uint64_t pc;
    uint64_t insns;
    uint64_t execs;
    uint64_t crit;
} Block;

/* Blocks by (pc, length): a block translated again gets the same entry. */
static GHashTable *blocks;
static GMutex lock;
static bool counting;
static bool crit;
static uint64_t paths;
static int marks;
static char *out_path;

static guint block_hash(gconstpointer p)
{
    const Block *b = p;

    return g_int64_hash(&b->pc) ^ (guint)b->insns;
}

static gboolean block_equal(gconstpointer a, gconstpointer b)
{
    const Block *x = a, *y = b;

    return x->pc == y->pc && x->insns == y->insns;
}

static void dump_block(gpointer key, gpointer value, gpointer f)
{
    Block *b = key;

    if (b->crit) {
        fprintf(f, "%016" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
                b->pc, b->insns, b->execs, b->crit);
    } else if (b->execs) {
        fprintf(f, "%016" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
                b->pc, b->insns, b->execs);
    }
    b->execs = 0;
    b->crit = 0;
}

static void vcpu_tb_exec(unsigned int vcpu_index, void *udata)
{
    Block *b = udata;

    if (__atomic_load_n(&counting, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&b->execs, 1, __ATOMIC_RELAXED);
        if (__atomic_load_n(&crit, __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&b->crit, 1, __ATOMIC_RELAXED);
        }
    }
}

/* HINT #101, #102 or #103 (udata: the instruction word). */
static void vcpu_crit(unsigned int vcpu_index, void *udata)
{
    uint32_t word = (uint32_t)(uintptr_t)udata;
    bool was = __atomic_exchange_n(&crit, word == INSPROF_CRIT_BEGIN,
                                   __ATOMIC_RELAXED);

    if (word == INSPROF_CRIT_END && was &&
        __atomic_load_n(&counting, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&paths, 1, __ATOMIC_RELAXED);
    }
}

static void vcpu_mark(unsigned int vcpu_index, void *udata)
{
    g_autofree char *path = NULL;
    FILE *f;

    g_mutex_lock(&lock);
    __atomic_store_n(&counting, !counting, __ATOMIC_RELAXED);
    marks++;
    if (!counting) {
        path = g_strdup_printf("%s.%d", out_path, marks / 2);
        f = fopen(path, "w");
        if (f) {
            fprintf(f, "# paths %" PRIu64 "\n",
                    __atomic_exchange_n(&paths, 0, __ATOMIC_RELAXED));
            g_hash_table_foreach(blocks, dump_block, f);
            fclose(f);
        } else {
            fprintf(stderr, "insprof: cannot write %s\n", path);
        }
    }
    g_mutex_unlock(&lock);
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t i, n = qemu_plugin_tb_n_insns(tb);
    Block key = { .pc = qemu_plugin_tb_vaddr(tb), .insns = n };
    Block *b;

    g_mutex_lock(&lock);
    b = g_hash_table_lookup(blocks, &key);
    if (!b) {
        b = g_new0(Block, 1);
        *b = key;
        g_hash_table_add(blocks, b);
    }
    g_mutex_unlock(&lock);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_tb_exec,
                                         QEMU_PLUGIN_CB_NO_REGS, b);
    for (i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint32_t word = 0;

        if (qemu_plugin_insn_size(insn) == sizeof(word) &&
            qemu_plugin_insn_data(insn, &word, sizeof(word)) == sizeof(word) &&
            word == INSPROF_MARK) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_mark,
                                                   QEMU_PLUGIN_CB_NO_REGS,
                                                   NULL);
        } else if (word == INSPROF_CRIT_BEGIN || word == INSPROF_CRIT_END ||
                   word == INSPROF_CRIT_DROP) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_crit,
                                                   QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)word);
        }
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info,
                                           int argc, char **argv)
{
    int i;

    out_path = g_strdup("insprof.out");
    for (i = 0; i < argc; i++) {
        if (g_str_has_prefix(argv[i], "out=")) {
            g_free(out_path);
            out_path = g_strdup(argv[i] + strlen("out="));
        } else {
            fprintf(stderr, "insprof: unknown option %s\n", argv[i]);
            return -1;
        }
    }
    blocks = g_hash_table_new(block_hash, block_equal);
    qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
    return 0;
}
