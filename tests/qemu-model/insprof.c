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

typedef struct Block {
    uint64_t pc;
    uint64_t insns;
    uint64_t execs;
} Block;

/* Blocks by (pc, length): a block translated again gets the same entry. */
static GHashTable *blocks;
static GMutex lock;
static bool counting;
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

    if (b->execs) {
        fprintf(f, "%016" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
                b->pc, b->insns, b->execs);
        b->execs = 0;
    }
}

static void vcpu_tb_exec(unsigned int vcpu_index, void *udata)
{
    Block *b = udata;

    if (__atomic_load_n(&counting, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&b->execs, 1, __ATOMIC_RELAXED);
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
