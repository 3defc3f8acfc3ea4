/*
 * ExaNeSt PLDMA engine model: the C ABI of the no_std core's protocol code
 * (rust/exanest-model, a static library that scripts/build-qemu.sh links
 * into QEMU). Declared here once; rust/exanest-model/tests/c_abi.rs checks
 * this header against the library: layouts, constants and behaviour.
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef EXANEST_CORE_H
#define EXANEST_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The packet format (Documentation/network.rst; exanest-core's packet.rs) */
#define EXANEST_PKT_HDR         64
#define EXANEST_PKT_MTU         4096

/* Op codes */
#define EXANEST_PKT_WRITE       1
#define EXANEST_PKT_READ_REQ    2
#define EXANEST_PKT_READ_RESP   3
#define EXANEST_PKT_ACK         4
#define EXANEST_PKT_NACK        5
#define EXANEST_PKT_RESUME      6
#define EXANEST_PKT_MAILBOX     7

/* NACK status: these, or a negative errno that ends the op */
#define EXANEST_NACK_FAULT      1
#define EXANEST_NACK_NOT_READY  2
#define EXANEST_NACK_SEQUENCE   3
#define EXANEST_NACK_RNR        4

/* Why exanest_pkt_decode() refused a packet */
#define EXANEST_BAD_SIZE        (-1)
#define EXANEST_BAD_MAGIC       (-2)
#define EXANEST_BAD_OP          (-3)
#define EXANEST_BAD_LENGTH      (-4)
#define EXANEST_BAD_RESERVED    (-5)
#define EXANEST_BAD_CHECKSUM    (-6)

/* A packet's fields; payload points at plen bytes (may be NULL if plen is 0) */
typedef struct ExanestPkt {
    uint8_t op;
    uint16_t src, dst;
    uint32_t ep, op_id, seq;
    int32_t status;
    uint64_t rkey, addr, len, offset;
    uint16_t plen;
    const uint8_t *payload;
} ExanestPkt;

/*
 * Write the EXANEST_PKT_HDR header bytes of packet *k, checksum included, to
 * hdr: 0, or -1 when *k is no packet (an unknown op, payload past the MTU,
 * or payload on an op that carries none).
 */
int32_t exanest_pkt_encode(const ExanestPkt *k, uint8_t *hdr);

/*
 * Decode and check the packet buf[0..size): 0 with *k filled (k->payload
 * points into buf), or an EXANEST_BAD_* reason with *k untouched.
 */
int32_t exanest_pkt_decode(const uint8_t *buf, size_t size, ExanestPkt *k);

/* Whether a NACK's status is one that a receiver sends. */
bool exanest_nack_valid(int32_t status);

#endif
