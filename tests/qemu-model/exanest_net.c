/*
 * ExaNeSt PLDMA engine model: the network port (register map 2.3).
 *
 * Copyright (c) 2026 The ExaNeSt DMA developers
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Design notes (Documentation/network.rst has the protocol):
 *  - The port is a NIC front-end on QEMU's network layer (qemu_new_nic,
 *    the "netdev" property): packets go out with qemu_send_packet() and come
 *    in through NetClientInfo.receive, so any backend links two engines: a
 *    hub in one QEMU, a stream or dgram socket between two.
 *  - The link: a packet leaves when the link has sent the ones before it,
 *    at link-bandwidth, and no earlier than the data path read its payload;
 *    it reaches the far end link-latency-ns later. The sender's port holds
 *    it until then (one timer), so in one QEMU both ends see exact virtual
 *    time. Injection (NET_DROP_PPM, NET_CORRUPT_PPM) acts as the packet
 *    leaves, from a seeded generator, so runs repeat.
 *  - Sending a PUT is a channel's transfer: each data path turn reads the
 *    source as the context's VF (a local fault stops it as for a copy) and
 *    sends what the op's window allows, MTU-sized. ACKs slide the window,
 *    NACKs and RESUMEs move it, one timer per channel retransmits: the
 *    state machine of rust/exanest-core/src/netop.rs (SendOp).
 *  - Receiving is not a channel's: the core's RecvTable (netrx.rs) checks
 *    a WRITE (its key, range and right, its endpoint's context) and says
 *    where to place it, in order, as the receiving context's VF. A fault
 *    stops the op: NACK FAULT, and the fault is reported on an idle channel
 *    of that context (ORIGIN NET_RX), where the driver resolves it as any
 *    other and answers RESUME or NACK; the core says what to send. With no
 *    idle channel the report waits for one.
 *  - Every packet field is checked before use; bad packets are dropped and
 *    counted, never answered with anything but a NACK.
 *  - A MAILBOX (2.4) is sent as a one-packet PUT whose packet op is MAILBOX,
 *    its rkey field the sending endpoint; a context's messages to one
 *    destination leave one at a time, in the order they started
 *    (mbox_order). The receiver places it
 *    in the next slot of the endpoint's context's ring, STAMP last, and ACKs;
 *    a full ring NACKs RNR and RESUMEs once the reader frees a slot (HEAD),
 *    a ring page that does not translate NACKs FAULT and is reported like a
 *    receiver fault. The receive op table keeps every message placed once.
 *  - Congestion (2.7): the bytes in flight to one peer, over all its ops,
 *    stay within its window (netop/cc.rs: NET_WINDOW at most, cut by the
 *    ACKs that echo congestion, DCTCP). With rx-queue set, the port models
 *    the fabric's last hop to it: data packets go through a queue at the
 *    link's rate (one sender at line rate never waits in it; several do),
 *    marked CE past ecn-threshold bytes queued and dropped when full;
 *    answers (no payload) pass ahead of it.
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/guest-random.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "net/net.h"
#include "system/dma.h"
#include "trace.h"
#include "exanest_pldma.h"
#include "exanest_core.h"

static void net_count(PldmaState *s, unsigned n, uint32_t by)
{
    s->net.cnt[n] += by;
}

static void net_count_cc(PldmaState *s, unsigned n, uint32_t by)
{
    s->net.cc[n] += by;
}

/* xorshift64*: the injection's generator */
static uint64_t net_rand(PldmaNet *n)
{
    n->rng ^= n->rng >> 12;
    n->rng ^= n->rng << 25;
    n->rng ^= n->rng >> 27;
    return n->rng * 0x2545F4914F6CDD1DULL;
}

/* A MAILBOX's cookie: 63 bits (address + length never wraps), never 0. */
static uint64_t net_cookie(PldmaNet *n)
{
    uint64_t c;

    do {
        n->cookie_rng ^= n->cookie_rng >> 12;
        n->cookie_rng ^= n->cookie_rng << 25;
        n->cookie_rng ^= n->cookie_rng >> 27;
        c = (n->cookie_rng * 0x2545F4914F6CDD1DULL) >> 1;
    } while (!c);
    return c;
}

bool pldma_net_link(PldmaState *s)
{
    NetClientState *nc = s->net.nic ? qemu_get_queue(s->net.nic) : NULL;

    return nc && nc->peer && !nc->link_down;
}

/* The link's bandwidth, MB/s: link-bandwidth, or the data path's (0: none). */
static uint32_t net_bw(PldmaState *s)
{
    return s->net.link_bw_mbs ? s->net.link_bw_mbs : s->bandwidth_mbs;
}

static int64_t net_link_ns(PldmaState *s, uint64_t bytes)
{
    uint32_t bw = net_bw(s);

    return bw ? (int64_t)(bytes * 1000 / bw) : 0;
}

/*
 * The longest prefix of [addr, addr + n) that translates for @as in
 * direction @dir, checked page by page: the first page that does not is the
 * fault (one IOMMU event), at addr + the returned length.
 */
static uint64_t net_valid_prefix(AddressSpace *as, uint64_t addr, uint64_t n,
                                 DMADirection dir)
{
    uint64_t good = 0;

    while (good < n) {
        uint64_t piece = MIN(n - good, PLDMA_PAGE -
                             ((addr + good) & (PLDMA_PAGE - 1)));

        if (!dma_memory_valid(as, addr + good, piece, dir,
                              MEMTXATTRS_UNSPECIFIED)) {
            break;
        }
        good += piece;
    }
    return good;
}

static void net_receive(PldmaState *s, const uint8_t *buf, size_t size);

/* Packet @p leaves the port: served bytes stop counting against its node. */
static void net_tx_gone(PldmaState *s, const PldmaTxPacket *p)
{
    if (p->op == EXANEST_PKT_READ_RESP) {
        exanest_rx_read_sent(s->net.rxt, p->dst, p->len - EXANEST_PKT_HDR);
    }
}

/* The link: send what has reached the far end. */
static void net_tx_timer(void *opaque)
{
    PldmaState *s = opaque;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    PldmaTxPacket *p;

    while ((p = QSIMPLEQ_FIRST(&s->net.txq)) && p->at <= now) {
        QSIMPLEQ_REMOVE_HEAD(&s->net.txq, next);
        net_tx_gone(s, p);
        if (p->dst == s->net.node) {
            /*
             * Loopback: a packet for this node's own endpoints (processes on
             * one node talking through the engine, as MPI ranks do) turns
             * round at the port, as a NIC's loopback does, and comes in like
             * any other.
             */
            trace_exanest_pldma_net_sent(p->op, p->dst, p->op_id, p->offset,
                                         p->len);
            net_receive(s, p->data, p->len);
        } else if (s->net.nic) {
            ssize_t r = qemu_send_packet(qemu_get_queue(s->net.nic), p->data,
                                         p->len);

            trace_exanest_pldma_net_sent(p->op, p->dst, p->op_id, p->offset,
                                         r);
        }
        g_free(p);
    }
    if (p) {
        timer_mod(s->net.tx_timer, p->at);
    }
}

/* Queue @p by when it arrives, after those arriving no later. */
static void net_tx_queue(PldmaNet *n, PldmaTxPacket *p)
{
    PldmaTxPacket *q, *after = QSIMPLEQ_LAST(&n->txq, PldmaTxPacket, next);

    if (after && after->at > p->at) {
        after = NULL;
        QSIMPLEQ_FOREACH(q, &n->txq, next) {
            if (q->at > p->at) {
                break;
            }
            after = q;
        }
    }
    if (after) {
        QSIMPLEQ_INSERT_AFTER(&n->txq, after, p, next);
    } else {
        QSIMPLEQ_INSERT_HEAD(&n->txq, p, next);
    }
}

/*
 * Put a packet on the link, leaving no earlier than @ready (when its payload
 * was read); its checksum is computed here, then injection may drop it or
 * flip one bit of it. Packets without payload (answers, requests, probes)
 * have a lane of their own: they do not wait behind the data queued before
 * them (Transport v2, defect 5), so the queue stays in arrival order.
 */
/*
 * A request's span (the core's Header::span): the op ids from this engine's
 * oldest unfinished network op to @op_id, both counted, so that its
 * receiver knows every op before that one finished here, and can tell a
 * late op from a stray copy of a finished one. A channel still busy with
 * an op counts (one not yet launched counts its last id: older, which only
 * claims less). 0, which claims nothing, when @op_id is no op in flight or
 * is 65,535 ids or more past the oldest.
 */
static uint16_t net_span(PldmaState *s, uint16_t peer, uint32_t op_id)
{
    uint32_t next, far = 0, d;
    bool any = false;

    if (peer >= PLDMA_NET_MAX_NODES) {
        return 0;
    }
    next = s->net.next_op_id[peer];
    for (unsigned i = 0; i < s->nctx; i++) {
        for (unsigned j = 0; j < s->nchan; j++) {
            PldmaChannel *c = &s->ctx[i].ch[j];

            if (c->a_op == PLDMA_OP_COPY || (c->origin & PLDMA_ORIGIN_NET_RX) ||
                c->a_peer != peer || !c->op_id ||
                (c->state != PLDMA_STATE_BUSY &&
                 c->state != PLDMA_STATE_FAULT)) {
                continue;
            }
            far = MAX(far, next - c->op_id);
            any = true;
        }
    }
    d = op_id - (next - far);
    if (!any || (int32_t)d < 0 || d >= UINT16_MAX) {
        return 0;
    }
    return d + 1;
}

static void net_tx(PldmaState *s, const ExanestPkt *req, int64_t ready)
{
    ExanestPkt q = *req, *k = &q;
    PldmaNet *n = &s->net;
    size_t len = EXANEST_PKT_HDR + k->plen;
    PldmaTxPacket *p = g_malloc0(sizeof(*p) + len);
    uint8_t *b = p->data;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    int64_t depart;
    int32_t enc;

    if (k->src == n->node &&
        (k->op == EXANEST_PKT_WRITE || k->op == EXANEST_PKT_WRITE_IMM ||
         k->op == EXANEST_PKT_MAILBOX || k->op == EXANEST_PKT_READ_REQ)) {
        k->span = net_span(s, k->dst, k->op_id);
    }
    /* The core's encoding: header and checksum (rust/exanest-model). */
    enc = exanest_pkt_encode(k, b);
    g_assert(enc == 0);
    if (k->plen) {
        memcpy(b + EXANEST_PKT_HDR, k->payload, k->plen);
    }
    p->len = len;

    if (k->plen) {
        depart = MAX(MAX(now, ready), n->tx_free_ns) + net_link_ns(s, len);
        n->tx_free_ns = depart;
    } else {
        depart = MAX(now, ready) + net_link_ns(s, len);
    }
    p->depart = depart;
    p->at = depart + n->link_latency_ns;
    p->op = k->op;
    p->dst = k->dst;
    p->op_id = k->op_id;
    p->offset = k->offset;
    net_count(s, PLDMA_NET_CNT_TX_PACKETS, 1);
    trace_exanest_pldma_net_tx(k->op, k->dst, k->op_id, k->offset, k->plen,
                               k->status, p->at);

    if (n->drop_ppm && net_rand(n) % 1000000 < n->drop_ppm) {
        net_count(s, PLDMA_NET_CNT_INJECTED_DROPS, 1);
        net_tx_gone(s, p);
        g_free(p);
        return;
    }
    if (n->corrupt_ppm && net_rand(n) % 1000000 < n->corrupt_ppm) {
        uint64_t bit = net_rand(n) % (len * 8);

        b[bit / 8] ^= 1u << (bit % 8);
        net_count(s, PLDMA_NET_CNT_INJECTED_CORRUPT, 1);
    }
    if (n->reorder_ppm && net_rand(n) % 1000000 < n->reorder_ppm) {
        /* 2.8: held back on the way; the packets after it overtake it. */
        p->at += 1 + net_rand(n) % ((uint64_t)MAX(n->reorder_us, 1) * 1000);
    }
    net_tx_queue(n, p);
    if (!timer_pending(n->tx_timer) ||
        timer_expire_time_ns(n->tx_timer) > p->at) {
        timer_mod(n->tx_timer, p->at);
    }
}

/*
 * The receiver stopped op @op_id to node @dst: its data packets still in
 * this port, not yet sent, are not sent at all (the link goes on with the
 * rest). Returns the lowest offset withdrawn, or UINT64_MAX.
 */
static uint64_t net_tx_withdraw(PldmaState *s, uint16_t dst, uint32_t op_id)
{
    PldmaNet *n = &s->net;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL), busy = now;
    uint64_t low = UINT64_MAX;
    PldmaTxPacket *p, *nx;

    QSIMPLEQ_FOREACH_SAFE(p, &n->txq, next, nx) {
        if ((p->op == EXANEST_PKT_WRITE || p->op == EXANEST_PKT_WRITE_IMM ||
             p->op == EXANEST_PKT_MAILBOX) &&
            p->dst == dst && p->op_id == op_id &&
            p->depart > now) {
            low = MIN(low, p->offset);
            trace_exanest_pldma_net_withdrawn(dst, op_id, p->offset);
            QSIMPLEQ_REMOVE(&n->txq, p, PldmaTxPacket, next);
            g_free(p);
        } else {
            busy = MAX(busy, p->depart);
        }
    }
    n->tx_free_ns = MIN(n->tx_free_ns, busy);
    return low;
}

/* Sending side (SendOp) */

/* The channel sending op @op_id to node @peer, if any. */
static PldmaChannel *net_sender(PldmaState *s, uint32_t peer, uint32_t op_id)
{
    for (unsigned i = 0; i < s->nctx; i++) {
        for (unsigned j = 0; j < s->nchan; j++) {
            PldmaChannel *c = &s->ctx[i].ch[j];

            if (c->a_op != PLDMA_OP_COPY && c->op_id == op_id &&
                c->a_peer == peer &&
                (c->state == PLDMA_STATE_BUSY ||
                 c->state == PLDMA_STATE_FAULT) &&
                !(c->origin & PLDMA_ORIGIN_NET_RX)) {
                return c;
            }
        }
    }
    return NULL;
}

/*
 * A MAILBOX of c's context to the same destination (node, endpoint) started
 * before c's is not finished yet: messages are ordered per destination, so
 * one stuck on a full ring holds back no other destination's.
 */
static bool net_mbox_behind(PldmaChannel *c)
{
    PldmaContext *x = c->ctx;

    if (c->a_op != PLDMA_OP_MAILBOX) {
        return false;
    }
    for (unsigned n = 0; n < x->dev->nchan; n++) {
        PldmaChannel *o = &x->ch[n];

        if (o != c && o->a_op == PLDMA_OP_MAILBOX &&
            o->a_peer == c->a_peer && o->a_ep == c->a_ep &&
            !(o->origin & PLDMA_ORIGIN_NET_RX) &&
            (o->state == PLDMA_STATE_BUSY || o->state == PLDMA_STATE_FAULT) &&
            o->mbox_order < c->mbox_order) {
            return true;
        }
    }
    return false;
}

/* A channel of ours that sends (or waits for) an op to a peer. */
static bool net_sending(PldmaChannel *c)
{
    return c->a_op != PLDMA_OP_COPY && c->op_id &&
           !(c->origin & PLDMA_ORIGIN_NET_RX) &&
           (c->state == PLDMA_STATE_BUSY || c->state == PLDMA_STATE_FAULT);
}

/*
 * The most in flight to a peer: NET_WINDOW at most, near twice the link's
 * bandwidth-delay product (netop/cc.rs). The round trip with no queue is
 * net-rtt-ns, or by default this link's: a full packet read by the data
 * path and sent, its ACK back.
 */
static uint64_t net_cap(PldmaState *s)
{
    PldmaNet *n = &s->net;
    uint64_t rtt = n->rtt_ns;

    if (!rtt) {
        rtt = pldma_xfer_ns(s, EXANEST_PKT_MTU) +
              net_link_ns(s, EXANEST_PKT_HDR + EXANEST_PKT_MTU) +
              net_link_ns(s, EXANEST_PKT_HDR) +
              2 * (uint64_t)n->link_latency_ns;
    }
    return exanest_cc_cap(n->window, net_bw(s), rtt);
}

/*
 * The bytes in flight with node @peer over all the ops to it: sent (@get:
 * asked by a GET) and not yet placed.
 */
static uint64_t net_peer_flight(PldmaState *s, uint32_t peer, bool get)
{
    uint64_t sum = 0;

    for (unsigned i = 0; i < s->nctx; i++) {
        for (unsigned j = 0; j < s->nchan; j++) {
            PldmaChannel *c = &s->ctx[i].ch[j];

            if (c->a_peer == peer && net_sending(c) &&
                (c->a_op == PLDMA_OP_GET) == get) {
                sum += exanest_send_in_flight(c->snd);
            }
        }
    }
    return sum;
}

/*
 * What channel c may send now, by its op's window and its peer's (writes,
 * or a GET's reads, whose requests are cut to the whole blocks the window
 * has room for): true and *off, *n.
 */
static bool net_next(PldmaChannel *c, uint64_t *off, uint32_t *n)
{
    PldmaState *s = c->ctx->dev;
    bool get = c->a_op == PLDMA_OP_GET;
    uint64_t g, flight;

    if (!exanest_send_peek(c->snd, off, n) || net_mbox_behind(c)) {
        return false;
    }
    if (c->a_peer >= PLDMA_NET_MAX_NODES) {
        return true;
    }
    flight = net_peer_flight(s, c->a_peer, get);
    g = exanest_rtt_grant(s->net.rtt, c->a_peer, get, net_cap(s), flight, *n,
                          get ? EXANEST_PKT_MTU : *n);
    if (g) {
        *n = g;
        return true;
    }
    trace_exanest_pldma_net_blocked(c->a_peer, c->op_id, get, flight, *n);
    s->net.peer_blocked |= 1ULL << c->a_peer;
    return false;
}

static bool net_can_send(PldmaState *s, PldmaChannel *c)
{
    uint64_t off;
    uint32_t n;

    return net_next(c, &off, &n);
}

static void net_wake(PldmaChannel *c);

/*
 * Channels that wait for node @peer's window look again, once this event is
 * through.
 */
static void net_peer_kick(PldmaState *s, uint32_t peer)
{
    if (peer < PLDMA_NET_MAX_NODES && (s->net.peer_blocked >> peer & 1)) {
        qemu_bh_schedule(s->net.cc_bh);
    }
}

static void net_cc_bh(void *opaque)
{
    PldmaState *s = opaque;
    uint64_t m = s->net.peer_blocked;

    s->net.peer_blocked = 0;
    for (unsigned i = 0; i < s->nctx; i++) {
        for (unsigned j = 0; j < s->nchan; j++) {
            PldmaChannel *c = &s->ctx[i].ch[j];

            if (c->a_peer < PLDMA_NET_MAX_NODES && (m >> c->a_peer & 1) &&
                net_sending(c)) {
                net_wake(c);
            }
        }
    }
}

/* A MAILBOX of @x ended: the next one may go. */
void pldma_net_mbox_next(PldmaContext *x)
{
    for (unsigned n = 0; n < x->dev->nchan; n++) {
        if (x->ch[n].a_op == PLDMA_OP_MAILBOX) {
            net_wake(&x->ch[n]);
        }
    }
}

/* Channel c may send again: make it ready for the data path. */
static void net_wake(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;

    if (c->state != PLDMA_STATE_BUSY || !net_can_send(s, c)) {
        return;
    }
    if (s->turn == c) {
        if (c->pending == PLDMA_PEND_WAIT) {
            c->pending = PLDMA_PEND_NONE;
        }
    } else if (!c->ready && !timer_pending(c->latency)) {
        c->ready = true;
        pldma_arbiter_kick(s);
    }
}

static int64_t net_now(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

/*
 * The retransmission timeout's floor (NET_RTO_US), ns: the first timeout of
 * an op to a peer whose round trip is not measured yet; once it is, an op's
 * timeout is SRTT + 4 RTTVAR (RFC 6298) when that is longer.
 */
static uint64_t net_rto_ns(PldmaState *s)
{
    return (uint64_t)MAX(s->net.rto_us, 1) * 1000;
}

/* The cap of the backed-off timeout: 64 doublings, and at least a second. */
static uint64_t net_rto_cap_ns(PldmaState *s)
{
    return MAX(net_rto_ns(s) * 64, NANOSECONDS_PER_SECOND);
}

/*
 * The reordering tolerance: how long a gap below blocks the receiver placed
 * past it waits before its blocks are sent again. While it waits, the window
 * does not move: so it is of the link's round trip (as RACK's quarter of the
 * least RTT), four packets' time and a latency each way (12 us at the
 * default 2 GB/s and 2 us), at most a quarter of the first timeout. A link
 * that holds packets back longer (make check's switch: 300 us) gets a block
 * sent twice, never a byte placed twice. (A tolerance of 1 ms cost 80 % of
 * the throughput at 1 % loss: make evaluate's net-loss, 1802 -> 343 MB/s.)
 */
static uint64_t net_reorder_ns(PldmaState *s)
{
    uint64_t rtt = 4 * (uint64_t)net_link_ns(s, EXANEST_PKT_HDR +
                                             EXANEST_PKT_MTU) +
                   2 * (uint64_t)s->net.link_latency_ns;

    return MIN(net_rto_ns(s) / 4, rtt);
}

/*
 * A GET asks in half windows: the next request is on its way while the data
 * of the last one comes.
 */
static uint64_t net_get_chunk(PldmaState *s)
{
    return MAX(s->net.window / 2, EXANEST_PKT_MTU);
}

/* The op's timer runs at its deadline, or not at all. */
static void net_timer(PldmaChannel *c)
{
    int64_t d = exanest_send_deadline(c->snd);

    c->done = exanest_send_acked(c->snd);
    if (d < 0) {
        timer_del(c->rto);
    } else if (!timer_pending(c->rto) || timer_expire_time_ns(c->rto) != d) {
        timer_mod(c->rto, d);
    }
}

/* Count what an event of the op counted. */
static void net_count_event(PldmaState *s, const ExanestSendEvent *e)
{
    net_count(s, PLDMA_NET_CNT_NACKS_RECEIVED, e->nacks);
    net_count(s, PLDMA_NET_CNT_RESUMES_RECEIVED, e->resumes);
    net_count(s, PLDMA_NET_CNT_TIMEOUTS, e->timeouts);
    net_count_cc(s, PLDMA_NET_CC_TAIL_PROBES, e->tail_probes);
}

/* The op ended: DONE, or ERROR with @err (and @status for REMOTE). */
static void net_end(PldmaChannel *c, uint32_t err, int32_t status)
{
    timer_del(c->rto);
    pldma_cancel(c);
    c->net_status = status;
    pldma_notify(c, err ? PLDMA_STATE_ERROR : PLDMA_STATE_DONE, err);
}

/* The endpoint holding context @x, or UINT32_MAX. */
static uint32_t net_ctx_ep(PldmaContext *x)
{
    PldmaNet *n = &x->dev->net;

    for (uint32_t ep = 0; ep < PLDMA_NET_MAX_EPS; ep++) {
        if ((n->ep[ep] & (PLDMA_NET_EP_RESIDENT | PLDMA_NET_EP_CTX_MASK)) ==
            (PLDMA_NET_EP_RESIDENT | x->index)) {
            return ep;
        }
    }
    return UINT32_MAX;
}

uint32_t pldma_net_launch(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;
    ExanestSendParams p = {
        .kind = c->a_op == PLDMA_OP_GET ? EXANEST_SEND_GET : EXANEST_SEND_PUT,
        .mtu = c->a_op == PLDMA_OP_GET ? net_get_chunk(s) : EXANEST_PKT_MTU,
        .window = s->net.window,
        .max_rto_ns = net_rto_cap_ns(s),
        .max_retries = s->net.retries,
        .reorder_ns = net_reorder_ns(s),
    };

    /* The timeouts of the peer's measured round trip (netop/rtt.rs). */
    exanest_rtt_timeouts(s->net.rtt, c->a_peer, net_rto_ns(s),
                         net_rto_cap_ns(s), &p.rto_ns, &p.pto_ns);
    /* Its memory faulted at the last op's first packet: the first one alone */
    p.first_alone = exanest_rtt_first_alone(s->net.rtt, c->a_peer);
    /* A peer that never answered: no such node, or no link to it, soon told */
    p.unheard_ns = exanest_rtt_heard(s->net.rtt, c->a_peer) ?
                   0 : EXANEST_SEND_UNHEARD_NS;

    c->op_id = 0;
    c->get_hold = 0;
    c->rx = -1;
    c->rx_src = 0;
    c->net_status = 0;
    exanest_send_start(c->snd, c->a_len, &p);
    if (c->a_op == PLDMA_OP_COPY || c->a_op > PLDMA_OP_PUT_IMM) {
        return PLDMA_ERR_BAD_FLAGS;
    }
    if (c->a_op == PLDMA_OP_MAILBOX) {
        if (c->a_len > PLDMA_MBOX_MAX) {
            return PLDMA_ERR_BAD_LEN;
        }
        /*
         * The replies name the sender by its endpoint, in the rkey field, and
         * the message by a cookie, in the address field: 63 random bits that
         * an off-path node cannot guess to forge an answer (hardware draws
         * them from a random source; the model from its seeded generator,
         * so that runs repeat).
         */
        c->a_rkey = net_ctx_ep(c->ctx);
        c->a_dst = net_cookie(&s->net);
        c->mbox_order = ++c->ctx->mbox_started;
    }
    /* An op to this node's own endpoints needs no link: it loops back. */
    if (!pldma_net_link(s) && c->a_peer != s->net.node) {
        qemu_log_mask(LOG_GUEST_ERROR,
                      "exanest-pldma: ctx%u ch%u: network op with no link\n",
                      c->ctx->index, c->index);
        return PLDMA_ERR_NO_LINK;
    }
    if (c->a_peer >= PLDMA_NET_MAX_NODES) {
        return PLDMA_ERR_BAD_ADDR;
    }
    /* The peer's sequence (0 names no op: skipped). */
    do {
        c->op_id = ++s->net.next_op_id[c->a_peer];
    } while (!c->op_id);
    return PLDMA_ERR_NONE;
}

/* The packet op of channel c's data (and probes): WRITE, WRITE_IMM, MAILBOX. */
static uint8_t net_data_op(PldmaChannel *c)
{
    switch (c->a_op) {
    case PLDMA_OP_MAILBOX:
        return EXANEST_PKT_MAILBOX;
    case PLDMA_OP_PUT_IMM:
        return EXANEST_PKT_WRITE_IMM;
    default:
        return EXANEST_PKT_WRITE;
    }
}

/* The remote address of channel c's op: a PUT's destination, a GET's source. */
static uint64_t net_raddr(PldmaChannel *c)
{
    return c->a_op == PLDMA_OP_GET ? c->a_src : c->a_dst;
}

/* A GET's READ_REQ for [off, off + n). */
static void net_read_req(PldmaState *s, PldmaChannel *c, uint64_t off,
                         uint64_t n)
{
    ExanestPkt k = {
        .op = EXANEST_PKT_READ_REQ, .src = s->net.node, .dst = c->a_peer,
        .ep = c->a_ep, .op_id = c->op_id, .seq = exanest_send_seq(c->snd),
        .rkey = c->a_rkey, .addr = c->a_src, .len = c->a_len,
        .offset = off, .status = (int32_t)n,
    };

    net_tx(s, &k, 0);
}

/*
 * A GET's turn: ask for what the window allows, in half windows, so that
 * the next request is on its way while the data of the last one comes.
 * The data path is not held: the responder's engine reads, this one places
 * as the data arrives.
 *
 * It asks only for data whose destination translates, in whole packets: a
 * page that does not translate (the check records the fault in the SMMU,
 * whose report the driver resolves at once) stops the asking there. Once
 * everything asked before it is placed, the page is checked again: it is
 * asked for if the driver mapped it meanwhile, else it is this engine's own
 * fault, raised before any data for it was asked. (Data asked into a page
 * that does not translate would be dropped on arrival, with the window
 * behind it, and asked again: two guests, the demo's get of 8 MiB into
 * memory never touched, 12 faults, 374 KB asked again before this check.)
 */
static void net_get_turn(PldmaState *s, PldmaChannel *c, AddressSpace *as,
                         int64_t now)
{
    uint64_t off, good, end;
    uint32_t n;

    c->pending = PLDMA_PEND_WAIT;
    while (net_next(c, &off, &n)) {
        if (c->get_hold == off + 1 && exanest_send_acked(c->snd) < off) {
            break;  /* checked, did not translate: ask once the rest is in */
        }
        c->get_hold = 0;
        good = net_valid_prefix(as, c->a_dst + off, n,
                                DMA_DIRECTION_FROM_DEVICE);
        end = good < n ? QEMU_ALIGN_DOWN(off + good, EXANEST_PKT_MTU) : off + n;
        if (end <= off) {
            if (exanest_send_acked(c->snd) == off) {
                exanest_send_local_fault(c->snd);
                c->pending = PLDMA_PEND_FAULT;
                c->pend_addr = c->a_dst + off + good;
                c->pend_info = pldma_fault_info(true, PLDMA_CAUSE_TRANSLATION);
            } else {
                c->get_hold = off + 1;
            }
            break;
        }
        net_count(s, PLDMA_NET_CNT_RETRANS_BYTES,
                  exanest_send_sent(c->snd, off, end - off, now));
        net_read_req(s, c, off, end - off);
    }
    net_timer(c);
    s->path_free_ns = now;
    s->turn = c;
}

/*
 * Channel c's turn on the data path for its PUT: read and send up to a
 * quantum of what the window allows, packet by packet. A source page that
 * does not translate ends the turn there, in FAULT once the data path is
 * through.
 */
void pldma_net_turn(PldmaState *s, PldmaChannel *c, AddressSpace *fn,
                    int64_t now)
{
    AddressSpace *as = fn;
    uint64_t moved = 0;

    if (c->a_op == PLDMA_OP_GET) {
        net_get_turn(s, c, as, now);
        return;
    }
    uint64_t off;
    uint32_t n;

    c->pending = PLDMA_PEND_WAIT;
    while (moved < PLDMA_STEP && net_next(c, &off, &n)) {
        uint64_t src = c->a_src + off;
        uint64_t good = net_valid_prefix(as, src, n, DMA_DIRECTION_TO_DEVICE);
        ExanestPkt k;

        if (good && pldma_dma_read(fn, src, s->bounce, good) != MEMTX_OK) {
            good = 0;
        }
        if (good) {
            moved += good;
            k = (ExanestPkt) {
                .op = net_data_op(c),
                .src = s->net.node, .dst = c->a_peer,
                .ep = c->a_ep, .op_id = c->op_id,
                .seq = exanest_send_seq(c->snd),
                .status = (int32_t)c->a_imm, .rkey = c->a_rkey,
                .addr = c->a_dst, .len = c->a_len,
                .offset = off, .plen = good, .payload = s->bounce,
            };
            net_count(s, PLDMA_NET_CNT_RETRANS_BYTES,
                      exanest_send_sent(c->snd, off, good, now));
            net_tx(s, &k, now + pldma_xfer_ns(s, moved));
        }
        if (good < n) {
            c->pending = PLDMA_PEND_FAULT;
            c->pend_addr = src + good;
            c->pend_info = pldma_fault_info(false, PLDMA_CAUSE_TRANSLATION);
            break;
        }
    }
    net_timer(c);
    s->path_free_ns = now + pldma_xfer_ns(s, moved);
    trace_exanest_pldma_step(c->ctx->index, c->index, c->done, moved, now,
                             s->path_free_ns);
    if (c->pending == PLDMA_PEND_WAIT && net_can_send(s, c)) {
        c->pending = PLDMA_PEND_NONE;
    }
    s->turn = c;
}

/*
 * After an event of channel c's op: count it, end the op if it ended (an
 * error NACK's errno as the receiver sent it), else run its timer and let
 * it send.
 */
static void net_after(PldmaChannel *c, const ExanestSendEvent *e,
                      uint32_t err)
{
    PldmaState *s = c->ctx->dev;

    net_count_event(s, e);
    if (e->timeouts) {
        trace_exanest_pldma_net_needed(c->ctx->index, c->index, c->op_id,
                                       c->a_op, c->done, e->timeouts, e->what,
                                       err);
    }
    if (e->tail_probes) {
        trace_exanest_pldma_net_tail_probe(c->ctx->index, c->index, c->op_id,
                                           c->done);
    }
    if (e->probe_verdict) {
        exanest_rtt_probe_judged(s->net.rtt, c->a_peer,
                                 e->probe_verdict == EXANEST_PROBE_SPURIOUS);
    }
    if (e->first_answer) {
        exanest_rtt_first_answered(s->net.rtt, c->a_peer, e->first_answer);
    }
    if (e->rtt_ns || e->probe_verdict) {
        /* A round trip measured, a probe judged: the peer's timeouts */
        uint64_t rto, pto, srtt;

        if (e->rtt_ns) {
            exanest_rtt_sample(s->net.rtt, c->a_peer, e->rtt_ns);
        }
        srtt = exanest_rtt_timeouts(s->net.rtt, c->a_peer, net_rto_ns(s),
                                    net_rto_cap_ns(s), &rto, &pto);
        exanest_send_retime(c->snd, rto, pto, net_now());
        trace_exanest_pldma_net_rtt(c->a_peer, e->rtt_ns, srtt, rto, pto);
    }
    net_timer(c);
    net_peer_kick(s, c->a_peer);
    if (e->what == EXANEST_SEND_COMPLETED) {
        if (!e->status) {
            net_end(c, PLDMA_ERR_NONE, 0);
        } else {
            if (err != PLDMA_ERR_REMOTE) {
                pldma_net_abort(c);  /* it gave up: the receiver may be alive */
            }
            net_end(c, err, err == PLDMA_ERR_REMOTE ? -e->status : 0);
        }
        return;
    }
    net_wake(c);
}

/*
 * @bytes more placed with node @peer (writes: its ACK; @reads: its READ_RESP
 * data), marked congestion experienced or not: the window follows.
 */
static void net_cc_placed(PldmaState *s, uint32_t peer, bool reads,
                          uint64_t bytes, bool marked)
{
    uint64_t cap = net_cap(s);

    net_count_cc(s, PLDMA_NET_CC_ECE_RECEIVED, marked);
    if (exanest_rtt_ack(s->net.rtt, peer, reads, cap, bytes, marked)) {
        net_count_cc(s, PLDMA_NET_CC_WINDOW_CUTS, 1);
        trace_exanest_pldma_net_window(peer, reads,
                                       exanest_rtt_window(s->net.rtt, peer,
                                                          reads, cap));
    }
}

static void net_on_ack(PldmaChannel *c, uint64_t off, uint32_t sack,
                       uint32_t echo, bool ece)
{
    PldmaState *s = c->ctx->dev;
    uint64_t before = exanest_send_acked(c->snd);
    ExanestSendEvent e = exanest_send_ack(c->snd, off, sack, echo, net_now());

    /* The peer's window follows the echoes (a GET has no ACKs). */
    net_cc_placed(s, c->a_peer, false, exanest_send_acked(c->snd) - before,
                  ece);
    net_after(c, &e, PLDMA_ERR_NONE);
}

static void net_on_nack(PldmaChannel *c, uint64_t off, int32_t status,
                        uint32_t echo)
{
    PldmaState *s = c->ctx->dev;
    ExanestSendEvent e = exanest_send_nack(c->snd, off, status, echo,
                                           net_now());

    if (e.nacks && e.what != EXANEST_SEND_COMPLETED &&
        c->a_op != PLDMA_OP_GET && status != EXANEST_NACK_AHEAD) {
        /*
         * Stop sending at once: what has not left yet will not (AHEAD: what
         * is below the page still goes).
         */
        exanest_send_withdrawn(c->snd,
                               net_tx_withdraw(s, c->a_peer, c->op_id));
    }
    net_after(c, &e, PLDMA_ERR_REMOTE);
}

static void net_on_resume(PldmaChannel *c, uint64_t off, uint32_t echo)
{
    ExanestSendEvent e = exanest_send_resume(c->snd, off, echo, net_now());

    net_after(c, &e, PLDMA_ERR_NONE);
}

/*
 * A paused op's timer: the receiver owes a RESUME. Ask where it is with a
 * probe (a WRITE of no payload at the paused offset), which it answers with
 * its op's state: NACK again while the fault is being resolved, RESUME if
 * that was lost. Probes back off and are bounded like retransmissions, but
 * are not timeouts: a slow fault is not a lost packet.
 */
static void net_probe(PldmaChannel *c, uint64_t off)
{
    PldmaState *s = c->ctx->dev;
    ExanestPkt k = {
        .op = net_data_op(c),
        .src = s->net.node, .dst = c->a_peer, .ep = c->a_ep,
        .op_id = c->op_id, .seq = exanest_send_seq(c->snd),
        .status = (int32_t)c->a_imm, .rkey = c->a_rkey,
        .addr = c->a_dst, .len = c->a_len, .offset = off,
    };

    net_count(s, PLDMA_NET_CNT_PROBES, 1);
    if (c->a_op == PLDMA_OP_GET) {
        /* A GET's probe is its request again: data if the fault is gone. */
        net_read_req(s, c, off, MIN(net_get_chunk(s), c->a_len - off));
        return;
    }
    net_tx(s, &k, 0);
}

/*
 * The op's timer: the core goes back to the last byte placed, probes a
 * paused op, or gives up (ETIMEDOUT after its retries).
 */
static void net_rto_fired(void *opaque)
{
    PldmaChannel *c = opaque;
    ExanestSendEvent e;

    if (c->state == PLDMA_STATE_FAULT) {
        /* The driver has the source fault: not the peer's. */
        exanest_send_postpone(c->snd, net_now());
        net_timer(c);
        return;
    }
    if (c->state != PLDMA_STATE_BUSY || c->a_op == PLDMA_OP_COPY) {
        return;
    }
    e = exanest_send_timeout(c->snd, net_now());
    if (e.timeouts) {
        trace_exanest_pldma_net_timeout(c->ctx->index, c->index, c->op_id,
                                        c->done, e.timeouts);
    }
    if (e.what == EXANEST_SEND_PROBE) {
        net_probe(c, e.offset);
    }
    /*
     * A peer that never answered: no such node, or no link to it. The op ends
     * REMOTE with CH_NET_STATUS -EHOSTUNREACH, not TIMEOUT.
     */
    net_after(c, &e, e.what == EXANEST_SEND_COMPLETED &&
                     e.status == EXANEST_EHOSTUNREACH ? PLDMA_ERR_REMOTE :
                                                        PLDMA_ERR_TIMEOUT);
}

/* The token a channel holds a receive op's fault by: never 0. */
static uint32_t net_token(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;

    return c->ctx->index * s->nchan + (uint32_t)(c - c->ctx->ch) + 1;
}

/*
 * Channel c stops (NACK, QUIESCE, RESET): no retransmission; a receiver
 * fault it reported waits for another channel.
 */
/*
 * Channel c's op ends unfinished (QUIESCE, a NACK command, RESET, its queue
 * stopped, or it gave up): if it is a network op this node started, tell the
 * receiver (ABORT, named as the op's packets name it), so that it forgets the
 * op at once instead of after its idle time. Best effort: an ABORT that is
 * lost leaves the idle time to do it.
 */
void pldma_net_abort(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;
    ExanestPkt k;

    if (c->a_op == PLDMA_OP_COPY || c->a_op > PLDMA_OP_PUT_IMM ||
        (c->origin & PLDMA_ORIGIN_NET_RX) || !c->op_id ||
        (c->state != PLDMA_STATE_BUSY && c->state != PLDMA_STATE_FAULT) ||
        !pldma_net_link(s)) {
        return;
    }
    k = (ExanestPkt) {
        .op = EXANEST_PKT_ABORT, .src = s->net.node, .dst = c->a_peer,
        .ep = c->a_ep, .op_id = c->op_id, .seq = exanest_send_seq(c->snd),
        .rkey = c->a_rkey, .addr = net_raddr(c), .len = c->a_len,
    };
    trace_exanest_pldma_net_abort(c->ctx->index, c->index, c->a_peer,
                                  c->op_id);
    net_tx(s, &k, net_now());
}

void pldma_net_stop(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;

    timer_del(c->rto);
    net_peer_kick(s, c->a_peer);    /* what it had in flight is not */
    if ((c->origin & PLDMA_ORIGIN_NET_RX) && c->rx >= 0) {
        exanest_rx_release(s->net.rxt, c->rx, net_token(c));
    }
}

/*
 * Receiving side: the core's RecvTable (rust/exanest-core/src/netrx.rs)
 * decides; this moves the bytes, knows the endpoints and reports faults.
 */

/*
 * How long an unfinished op may go without a packet before its slot may be
 * taken: twice the longest a live sender waits between two probes (its
 * backoff cap, as this node's own senders run it). A sender that gave up, was
 * killed or forged the op sends nothing more, and its slot comes back.
 */
static uint64_t net_rx_idle_ns(PldmaState *s)
{
    return 2 * net_rto_cap_ns(s);
}

/* The context resident on endpoint @ep, or NULL. */
static PldmaContext *net_ep_ctx(PldmaState *s, uint32_t ep)
{
    uint32_t e = s->net.ep[ep];

    return (e & PLDMA_NET_EP_RESIDENT) ?
           &s->ctx[e & PLDMA_NET_EP_CTX_MASK] : NULL;
}

/* Whether @x's ring has a free slot. */
static bool net_mbox_room(PldmaContext *x)
{
    return x->mbox_tail - x->mbox_head < x->mbox_n;
}

/* What endpoint @ep can take, for the core (EXANEST_RX_EP_*). */
static uint32_t net_ep_flags(PldmaState *s, uint32_t ep)
{
    PldmaContext *x = net_ep_ctx(s, ep);
    uint32_t f = 0;

    if (s->net.ep[ep] & PLDMA_NET_EP_OPEN) {
        f |= EXANEST_RX_EP_OPEN;
    }
    if (s->net.ep[ep] & PLDMA_NET_EP_MBOX) {
        f |= EXANEST_RX_MBOX_OWNED;
    }
    if (!x) {
        return f;
    }
    if (pldma_ctx_master(x)) {
        f |= EXANEST_RX_EP_READY;
    }
    if ((x->mbox_cfg & PLDMA_MBOX_CFG_ENABLE) && x->mbox_n) {
        f |= EXANEST_RX_MBOX_ON;
    }
    if (net_mbox_room(x)) {
        f |= EXANEST_RX_MBOX_ROOM;
    }
    return f;
}

/*
 * Endpoint @ep holds no context, and an op came for it: want it (2.4), and
 * tell the driver with NET_IRQ the first time.
 */
static void net_want_ep(PldmaState *s, uint32_t ep)
{
    uint32_t bit = 1u << (ep % 32);

    if (!(s->net.ep_wanted[ep / 32] & bit)) {
        s->net.ep_wanted[ep / 32] |= bit;
        s->net.irq |= PLDMA_NET_IRQ_EP_WANTED;
        pldma_update_irq(s);
    }
}

/* Count what step @e says, want endpoint @ep if it says so, send its answer. */
static void net_rx_do(PldmaState *s, const ExanestRxStep *e, uint32_t ep)
{
    if (e->counts & EXANEST_RX_DROPPED) {
        net_count(s, PLDMA_NET_CNT_RX_DROPPED, 1);
    }
    if (e->counts & EXANEST_RX_DUPLICATE) {
        net_count(s, PLDMA_NET_CNT_DUPLICATES, 1);
    }
    if (e->counts & EXANEST_RX_RNR) {
        net_count(s, PLDMA_NET_CNT_RNR_SENT, 1);
    }
    if (e->counts & EXANEST_RX_WANT_EP) {
        net_want_ep(s, ep);
    }
    if (e->counts & EXANEST_RX_KEY_FAIL) {
        net_count(s, PLDMA_NET_CNT_KEY_FAILS, 1);
    }
    if (e->counts & EXANEST_RX_QUARANTINED) {
        net_count(s, PLDMA_NET_CNT_QUARANTINED, 1);
    }
    if (!e->reply) {
        return;
    }
    if (e->counted && e->answer.op == EXANEST_PKT_NACK) {
        net_count(s, e->answer.status < 0 ? PLDMA_NET_CNT_ERROR_NACKS :
                                            PLDMA_NET_CNT_NACKS_SENT, 1);
    } else if (e->counted && e->answer.op == EXANEST_PKT_RESUME) {
        net_count(s, PLDMA_NET_CNT_RESUMES_SENT, 1);
    }
    net_tx(s, &e->answer, 0);
}

/* The first owed ACK's time, on the ACK timer (if one is owed). */
static void net_ack_arm(PldmaState *s)
{
    uint64_t at;

    if (exanest_rx_ack_due(s->net.rxt, &at) &&
        (!timer_pending(s->net.ack_timer) ||
         (int64_t)at < timer_expire_time_ns(s->net.ack_timer))) {
        timer_mod(s->net.ack_timer, at);
    }
}

/* Owed ACKs that waited their delay go (coalesced ACKs). */
static void net_ack_timer(void *opaque)
{
    PldmaState *s = opaque;
    ExanestPkt a;

    while (exanest_rx_flush_ack(s->net.rxt, net_now(), &a)) {
        net_tx(s, &a, 0);
    }
    net_ack_arm(s);
}

/* An idle channel of @x, or NULL. */
static PldmaChannel *net_idle_channel(PldmaContext *x)
{
    for (unsigned n = 0; n < x->dev->nchan; n++) {
        if (x->ch[n].state == PLDMA_STATE_IDLE) {
            return &x->ch[n];
        }
    }
    return NULL;
}

/* Channel @c, which holds slot @i (@r), reports its page at @addr: FAULT. */
static void net_rx_fault_on(PldmaChannel *c, uint32_t i, const ExanestRxSlot *r,
                            uint64_t addr)
{
    PldmaContext *x = c->ctx;

    c->origin = PLDMA_ORIGIN_NET_RX;
    c->rx = i;
    c->rx_src = r->src;
    c->op_id = r->op_id;
    c->a_op = PLDMA_OP_COPY;
    /*
     * 2.10: the op's range here (a READ_REQ's source, a WRITE's destination;
     * none for a MAILBOX, whose ring slot is all it writes), which SRC, DST
     * and LEN read in FAULT: the driver maps the rest of it ahead
     */
    c->a_src = r->kind == EXANEST_RX_READ ? r->addr : 0;
    c->a_dst = r->kind == EXANEST_RX_WRITE ||
               r->kind == EXANEST_RX_WRITE_IMM ? r->addr : 0;
    c->a_len = r->kind == EXANEST_RX_MAILBOX ? 0 : r->len;
    c->wr_id = 0;
    c->done = r->placed;
    c->nack_status = PLDMA_CQE_ABORTED;
    c->fault_addr = addr;
    c->fault_info = pldma_fault_info(r->kind != EXANEST_RX_READ,
                                     PLDMA_CAUSE_TRANSLATION);
    c->faults = 1;
    c->state = PLDMA_STATE_FAULT;
    c->err = PLDMA_ERR_NONE;
    trace_exanest_pldma_fault(x->index, c - x->ch, r->kind != EXANEST_RX_READ,
                              addr, PLDMA_CAUSE_TRANSLATION, 0);
    pldma_frec_fault(c);
    x->irq_status |= 1u << (c - x->ch);
    pldma_update_irq(x->dev);
}

/* Report slot @i's fault on an idle channel of @x, if one is. */
static void net_rx_report(PldmaContext *x, uint32_t i)
{
    PldmaState *s = x->dev;
    PldmaChannel *c = net_idle_channel(x);
    ExanestRxSlot r;

    if (c && exanest_rx_slot(s->net.rxt, i, &r) &&
        exanest_rx_hold(s->net.rxt, i, net_token(c))) {
        net_rx_fault_on(c, i, &r, r.fault_addr);
    }
}

/* Step @e of an op of @x's endpoint @ep: do it, and report its fault. */
static void net_rx_after(PldmaContext *x, const ExanestRxStep *e, uint32_t ep)
{
    net_rx_do(x->dev, e, ep);
    if (e->what == EXANEST_RX_REPORT) {
        net_rx_report(x, e->slot);
    }
}

/* A channel of @x went idle: a receiver fault waiting for one takes it. */
void pldma_net_channel_freed(PldmaContext *x)
{
    PldmaState *s = x->dev;
    ExanestRxSlot r;

    for (uint32_t i = 0; exanest_rx_slot(s->net.rxt, i, &r); i++) {
        if (r.state == EXANEST_RX_FAULTED && !r.holder &&
            net_ep_ctx(s, r.ep) == x) {
            net_rx_report(x, i);
            if (exanest_rx_slot(s->net.rxt, i, &r) && !r.holder) {
                return; /* no idle channel left */
            }
        }
    }
}

static void net_rx_look_ahead(PldmaContext *x, uint32_t i, uint64_t end,
                              bool has_seq, uint32_t seq);

/* The driver resolved the fault channel c reports: RESUME the sender. */
void pldma_net_rx_resume(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;
    ExanestRxStep e;

    c->state = PLDMA_STATE_IDLE;
    c->origin = 0;
    if (c->rx >= 0) {
        e = exanest_rx_resolved(s->net.rxt, c->rx, net_token(c));
        net_rx_do(s, &e, 0);
        if (e.reply && e.answer.op == EXANEST_PKT_RESUME &&
            c->rx < PLDMA_NET_RX_OPS) {
            /* The data comes on from there: look on from there too. */
            uint64_t *miss = &s->net.la_miss[c->rx];

            if (*miss && e.answer.addr + e.answer.offset >= *miss - 1) {
                *miss = 0;
            }
            net_rx_look_ahead(c->ctx, c->rx, e.answer.offset, false, 0);
        }
    }
    pldma_pump(c->ctx);
}

/* The driver could not resolve it: NACK the op with CH_NACK_STATUS. */
void pldma_net_rx_nack(PldmaChannel *c)
{
    PldmaState *s = c->ctx->dev;
    ExanestRxStep e;

    c->state = PLDMA_STATE_IDLE;
    c->origin = 0;
    if (c->rx >= 0) {
        e = exanest_rx_refused(s->net.rxt, c->rx, net_token(c),
                               (int32_t)c->nack_status);
        net_rx_do(s, &e, 0);
    }
    pldma_pump(c->ctx);
}

/*
 * Place WRITE @k as context x's VF @fn. Returns the bytes placed; fewer than
 * k->plen when a destination page does not translate (*fault: the first).
 */
static uint64_t net_place(AddressSpace *fn, const ExanestPkt *k,
                          uint64_t *fault)
{
    uint64_t dst = k->addr + k->offset;
    uint64_t good = net_valid_prefix(fn, dst, k->plen,
                                     DMA_DIRECTION_FROM_DEVICE);

    if (good && pldma_dma_write(fn, dst, k->payload, good) != MEMTX_OK) {
        good = 0;
    }
    *fault = dst + good;
    return good;
}

static uint64_t net_mbox_slot(PldmaContext *x);
static bool net_mbox_commit(AddressSpace *fn, PldmaContext *x, uint64_t slot,
                            uint8_t *hdr);
static bool net_imm_place(AddressSpace *fn, PldmaContext *x,
                          const ExanestPkt *k, uint64_t *fault);

/*
 * Slot @i of @x, a WRITE placed in order up to @end: look up to a distance
 * ahead (property rx-lookahead, bytes; 0: never) for a page of the op that
 * does not translate, as a device with an address translation cache fetches
 * translations before its data needs them; each page is looked at once. The
 * first one missing is reported on an idle channel of @x, as a receiver's
 * fault is, and its sender NACKed AHEAD from it (echoing packet @seq; with
 * !@has_seq, what the op's last page ahead echoed): the sender sends nothing
 * from there until that fault's RESUME, while the data before it still comes
 * and is placed (netrx::RecvTable::fault_ahead). None is looked at past it
 * until the data or its RESUME passes it. (The SMMU records the miss too, if
 * its CD says so: the driver's default is not to.)
 */
static void net_rx_look_ahead(PldmaContext *x, uint32_t i, uint64_t end,
                              bool has_seq, uint32_t seq)
{
    PldmaState *s = x->dev;
    PldmaNet *n = &s->net;
    AddressSpace *as = pldma_ctx_master(x);
    ExanestRxSlot r;
    PldmaChannel *c;
    ExanestRxStep e;
    uint64_t op, page, last;

    if (!n->rx_lookahead || i >= PLDMA_NET_RX_OPS ||
        !exanest_rx_slot(n->rxt, i, &r) || end >= r.len ||
        (r.kind != EXANEST_RX_WRITE && r.kind != EXANEST_RX_WRITE_IMM)) {
        return;
    }
    op = (uint64_t)r.src << 32 | r.op_id;
    if (n->la_op[i] != op) {
        n->la_op[i] = op;
        n->la_miss[i] = 0;
        n->la_next[i] = 0;
    }
    if (n->la_miss[i] && r.addr + end <= n->la_miss[i] - 1) {
        return;     /* the data has not passed the last miss yet */
    }
    n->la_miss[i] = 0;
    last = QEMU_ALIGN_DOWN(r.addr + MIN(end + n->rx_lookahead, r.len) - 1,
                           PLDMA_PAGE);
    page = MAX(QEMU_ALIGN_DOWN(r.addr + end, PLDMA_PAGE), n->la_next[i]);
    while (page <= last &&
           dma_memory_valid(as, page, 1, DMA_DIRECTION_FROM_DEVICE,
                            MEMTXATTRS_UNSPECIFIED)) {
        page += PLDMA_PAGE;
    }
    n->la_next[i] = MAX(n->la_next[i], MIN(page, last) + PLDMA_PAGE);
    if (page > last) {
        return;
    }
    n->la_miss[i] = page + 1;
    trace_exanest_pldma_net_lookahead(r.src, r.op_id, end, page);
    c = net_idle_channel(x);
    if (!c) {
        return;     /* the data meets it, as a fault */
    }
    e = exanest_rx_fault_ahead(n->rxt, i, has_seq, seq, page, net_token(c));
    if (e.reply) {
        net_rx_do(s, &e, 0);
        net_rx_fault_on(c, i, &r, page);
    }
}

/*
 * PLACE for WRITE or WRITE_IMM @k, on the core's slot @i. The last packet of
 * a WRITE_IMM then writes the put's completion in the endpoint's ring (the
 * core checked that it has room); if that does not translate, the packet
 * counts as not placed and the fault is the slot's (resolved, RESUMEd, sent
 * again: its bytes are written again, the same).
 */
static void net_rx_write(PldmaState *s, const ExanestPkt *k, uint32_t i,
                         bool ahead)
{
    PldmaContext *x = net_ep_ctx(s, k->ep);
    AddressSpace *fn = pldma_ctx_master(x);
    uint64_t fault = k->addr + k->offset, got = 0;
    ExanestRxStep e;

    /* A block past a gap: all of it, or none (its fault is met in order). */
    if (!ahead ||
        net_valid_prefix(fn, fault, k->plen,
                         DMA_DIRECTION_FROM_DEVICE) == k->plen) {
        got = net_place(fn, k, &fault);
    }

    net_count(s, PLDMA_NET_CNT_PLACED_BYTES, got);
    trace_exanest_pldma_net_place(x->index, k->src, k->op_id, k->offset, got);
    if (k->op == EXANEST_PKT_WRITE_IMM && got == k->plen &&
        k->offset + k->plen == k->len && !net_imm_place(fn, x, k, &fault)) {
        got = 0;
    }
    e = exanest_rx_placed(s->net.rxt, i, k, got, got < k->plen, fault);
    net_rx_after(x, &e, k->ep);
    if (!ahead && got == k->plen) {
        net_rx_look_ahead(x, i, k->offset + got, true, k->seq);
    }
    if (!e.reply && !timer_pending(s->net.ack_timer)) {
        /*
         * An ACK owed from now: due after the delay. A pending timer is due
         * no later (for an older one); when it fires it arms for the rest.
         */
        timer_mod(s->net.ack_timer, net_now() + s->net.ack_delay_ns);
    }
}

/* The address of the next slot of @x's ring. */
static uint64_t net_mbox_slot(PldmaContext *x)
{
    return x->a_mbox_base +
           (uint64_t)(x->mbox_tail & (x->mbox_n - 1)) * PLDMA_MBOX_SLOT;
}

/*
 * 2.6: the completion of PUT_IMM @k in the next slot of @x's ring as @fn:
 * the header (FLAGS PUT_IMM, the immediate, the put's address and length),
 * then STAMP. False with *fault the slot's address when it does not
 * translate.
 */
static bool net_imm_place(AddressSpace *fn, PldmaContext *x,
                          const ExanestPkt *k, uint64_t *fault)
{
    uint64_t slot = net_mbox_slot(x);
    uint8_t hdr[PLDMA_MBOX_DATA_OFF] = { 0 };

    *fault = slot;
    if (!x->mbox_n || x->mbox_tail - x->mbox_head >= x->mbox_n ||
        net_valid_prefix(fn, slot, PLDMA_MBOX_DATA_OFF,
                         DMA_DIRECTION_FROM_DEVICE) < PLDMA_MBOX_DATA_OFF) {
        return false;
    }
    stw_le_p(hdr + PLDMA_MBOX_SRC_NODE_OFF, k->src);
    stl_le_p(hdr + PLDMA_MBOX_SRC_EP_OFF, UINT32_MAX);
    stl_le_p(hdr + PLDMA_MBOX_LEN_OFF, k->len);
    stl_le_p(hdr + PLDMA_MBOX_OPID_OFF, k->op_id);
    stl_le_p(hdr + PLDMA_MBOX_FLAGS_OFF, PLDMA_MBOX_FLAG_PUT_IMM);
    stl_le_p(hdr + PLDMA_MBOX_IMM_OFF, (uint32_t)k->status);
    stq_le_p(hdr + PLDMA_MBOX_ADDR_OFF, k->addr);
    if (!net_mbox_commit(fn, x, slot, hdr)) {
        return false;
    }
    trace_exanest_pldma_net_place(x->index, k->src, k->op_id, k->len, 0);
    return true;
}

/*
 * Complete the next slot of @x's ring, at @slot, as @fn: the header @hdr
 * (PLDMA_MBOX_STAMP_OFF bytes), then STAMP, which the reader takes the slot
 * by, then TAIL; a message or a put's completion counts as placed, and the
 * armed mailbox event may fire. False when a write fails.
 */
static bool net_mbox_commit(AddressSpace *fn, PldmaContext *x, uint64_t slot,
                            uint8_t *hdr)
{
    if (pldma_dma_write(fn, slot, hdr, PLDMA_MBOX_STAMP_OFF)) {
        return false;
    }
    /* STAMP last: the reader takes the slot once it reads tail + 1. */
    smp_wmb();
    stl_le_p(hdr + PLDMA_MBOX_STAMP_OFF, x->mbox_tail + 1);
    if (pldma_dma_write(fn, slot + PLDMA_MBOX_STAMP_OFF,
                        hdr + PLDMA_MBOX_STAMP_OFF, 4)) {
        return false;
    }
    x->mbox_tail++;
    net_count(x->dev, PLDMA_NET_CNT_MBOX_PLACED, 1);
    pldma_mbox_event(x);
    return true;
}

/*
 * Place MAILBOX @k in the next slot of @x's ring as @fn: the message, the
 * header, then STAMP. Returns the bytes of the slot that translate: all of
 * them (PLDMA_MBOX_DATA_OFF + len) once placed.
 */
static uint64_t net_mbox_place(AddressSpace *fn, PldmaContext *x,
                               const ExanestPkt *k)
{
    uint64_t slot = net_mbox_slot(x);
    uint64_t want = PLDMA_MBOX_DATA_OFF + k->len;
    uint64_t good = net_valid_prefix(fn, slot, want,
                                     DMA_DIRECTION_FROM_DEVICE);
    uint8_t hdr[PLDMA_MBOX_DATA_OFF] = { 0 };

    if (good < want) {
        return good;
    }
    stw_le_p(hdr + PLDMA_MBOX_SRC_NODE_OFF, k->src);
    stl_le_p(hdr + PLDMA_MBOX_SRC_EP_OFF, (uint32_t)k->rkey);
    stl_le_p(hdr + PLDMA_MBOX_LEN_OFF, k->len);
    stl_le_p(hdr + PLDMA_MBOX_OPID_OFF, k->op_id);
    if (pldma_dma_write(fn, slot + PLDMA_MBOX_DATA_OFF, k->payload, k->len) ||
        !net_mbox_commit(fn, x, slot, hdr)) {
        return 0;
    }
    return want;
}

/*
 * PLACE for MAILBOX @k (2.4), on the core's slot @i: the next slot of the
 * ring of the endpoint's context; a slot that does not translate is a fault
 * reported like a receiver's.
 */
static void net_rx_mailbox(PldmaState *s, const ExanestPkt *k, uint32_t i)
{
    PldmaContext *x = net_ep_ctx(s, k->ep);
    uint64_t slot = net_mbox_slot(x);
    uint64_t want = PLDMA_MBOX_DATA_OFF + k->len;
    uint64_t got = net_mbox_place(pldma_ctx_master(x), x, k);
    ExanestRxStep e;

    if (got == want) {
        trace_exanest_pldma_net_place(x->index, k->src, k->op_id, 0, k->len);
        net_count(s, PLDMA_NET_CNT_PLACED_BYTES, k->len);
    }
    e = exanest_rx_placed(s->net.rxt, i, k, got == want ? k->len : 0,
                          got < want, slot + got);
    net_rx_after(x, &e, k->ep);
}

/* @x's reader freed slots: RESUME the messages its ring NACKed RNR. */
void pldma_net_mbox_freed(PldmaContext *x)
{
    PldmaState *s = x->dev;
    ExanestRxSlot r;
    ExanestRxStep e;

    for (uint32_t i = 0; net_mbox_room(x) &&
         exanest_rx_slot(s->net.rxt, i, &r); i++) {
        if (r.state == EXANEST_RX_RNR_WAIT && net_ep_ctx(s, r.ep) == x) {
            e = exanest_rx_wake(s->net.rxt, i);
            net_rx_do(s, &e, r.ep);
        }
    }
}

/*
 * SERVE for READ_REQ @k, on the core's slot: send [from, to) of the op's
 * source as READ_RESP packets, read as the endpoint's context's VF. A page
 * that does not translate stops it there (the core NACKs FAULT, reported
 * like a receiver's fault, RESUME once resolved).
 */
static void net_rx_serve(PldmaState *s, const ExanestPkt *k,
                         const ExanestRxStep *step)
{
    PldmaContext *x = net_ep_ctx(s, k->ep);
    AddressSpace *fn = pldma_ctx_master(x);
    AddressSpace *as = fn;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    uint64_t off = step->from, sent = 0;
    uint8_t buf[EXANEST_PKT_MTU];
    ExanestRxStep e;

    while (off < step->to) {
        uint64_t len = MIN(step->to - off, EXANEST_PKT_MTU);
        uint64_t src = k->addr + off;
        uint64_t good = net_valid_prefix(as, src, len, DMA_DIRECTION_TO_DEVICE);

        if (good && pldma_dma_read(fn, src, buf, good) != MEMTX_OK) {
            good = 0;
        }
        if (good) {
            sent += good;
            net_tx(s, &(ExanestPkt) {
                .op = EXANEST_PKT_READ_RESP, .src = s->net.node,
                .dst = k->src, .ep = k->ep, .op_id = k->op_id, .seq = k->seq,
                .rkey = k->rkey, .addr = k->addr, .len = k->len,
                .offset = off, .plen = good, .payload = buf,
            }, now + pldma_xfer_ns(s, sent));
            off += good;
        }
        if (good < len) {
            e = exanest_rx_served(s->net.rxt, step->slot, k, off, true,
                                  src + good);
            net_rx_after(x, &e, k->ep);
            return;
        }
    }
    e = exanest_rx_served(s->net.rxt, step->slot, k, off, false, 0);
    net_rx_do(s, &e, k->ep);
}

/* A WRITE, READ_REQ, MAILBOX or ABORT for this node: what the core says. */
static void net_rx(PldmaState *s, const ExanestPkt *k)
{
    ExanestRxStep e = exanest_rx_packet(s->net.rxt, k, s->net.rkeys,
                                        PLDMA_NET_MAX_RKEYS,
                                        net_ep_flags(s, k->ep), net_now(),
                                        net_rx_idle_ns(s));

    net_rx_do(s, &e, k->ep);
    if (e.counts & EXANEST_RX_QUARANTINE) {
        trace_exanest_pldma_net_quarantine(k->src,
                                           exanest_rx_keyfails(s->net.rxt,
                                                               k->src));
    }
    if (e.what == EXANEST_RX_PLACE && k->op == EXANEST_PKT_MAILBOX) {
        net_rx_mailbox(s, k, e.slot);
    } else if (e.what == EXANEST_RX_PLACE ||
               e.what == EXANEST_RX_PLACE_AHEAD) {
        net_rx_write(s, k, e.slot, e.what == EXANEST_RX_PLACE_AHEAD);
    } else if (e.what == EXANEST_RX_SERVE) {
        net_rx_serve(s, k, &e);
    }
}

/*
 * READ_RESP data for GET channel c, placed as the context's VF: in order, or
 * a whole block past a gap where it goes, all of it or none (the core says
 * which, and asks again for the gaps).
 */
static void net_get_data(PldmaChannel *c, const ExanestPkt *k)
{
    PldmaState *s = c->ctx->dev;
    AddressSpace *fn = pldma_ctx_master(c->ctx);
    ExanestPkt d = {
        .addr = c->a_dst, .offset = k->offset, .plen = k->plen,
        .payload = k->payload,
    };
    uint32_t act = exanest_send_data_act(c->snd, k->offset, k->plen);
    ExanestSendEvent e;
    uint64_t fault = 0;
    uint64_t got = 0;
    uint64_t before;

    if (c->state != PLDMA_STATE_BUSY || act == EXANEST_DATA_DROP) {
        net_count(s, PLDMA_NET_CNT_DUPLICATES, 1);
        if (c->state == PLDMA_STATE_BUSY) {
            /* Past a gap, the core asks again from it (once per gap). */
            e = exanest_send_data(c->snd, k->offset, 0, k->plen, k->seq,
                                  net_now());
            net_after(c, &e, PLDMA_ERR_NONE);
        }
        return;
    }
    if (!fn) {
        net_end(c, PLDMA_ERR_NO_MASTER, 0);
        return;
    }
    if (act == EXANEST_DATA_PLACE ||
        net_valid_prefix(fn, c->a_dst + k->offset,
                         k->plen, DMA_DIRECTION_FROM_DEVICE) == k->plen) {
        got = net_place(fn, &d, &fault);
    }
    net_count(s, PLDMA_NET_CNT_PLACED_BYTES, got);
    trace_exanest_pldma_net_place(c->ctx->index, k->src, k->op_id, k->offset,
                                  got);
    before = exanest_send_acked(c->snd);
    e = exanest_send_data(c->snd, k->offset, got, k->plen, k->seq, net_now());
    /* The reads' window follows the data's marks (no echo: seen here). */
    net_cc_placed(s, c->a_peer, true, exanest_send_acked(c->snd) - before,
                  k->ce);
    if (e.what == EXANEST_SEND_LOCAL_FAULT) {
        /* This engine's own fault: the driver resolves it, RESUME asks on. */
        net_timer(c);
        c->fault_addr = fault;
        c->fault_info = pldma_fault_info(true, PLDMA_CAUSE_TRANSLATION);
        c->faults++;
        pldma_cancel(c);
        pldma_notify(c, PLDMA_STATE_FAULT, PLDMA_ERR_NONE);
        return;
    }
    net_after(c, &e, PLDMA_ERR_NONE);
}

/*
 * Decode and check @buf with the core (rust/exanest-model), then what only
 * this node knows: false (and counted) for a packet to drop.
 */
static bool net_decode(PldmaState *s, const uint8_t *buf, size_t size,
                       ExanestPkt *k)
{
    int32_t r = exanest_pkt_decode(buf, size, k);

    if (r == EXANEST_BAD_CHECKSUM) {
        net_count(s, PLDMA_NET_CNT_RX_BAD_CRC, 1);
    }
    if (r) {
        return false;
    }
    return k->dst == s->net.node && k->src < PLDMA_NET_MAX_NODES &&
           k->ep < PLDMA_NET_MAX_EPS;
}

/* A packet for this node, decoded: to the side it is for. */
static void net_dispatch(PldmaState *s, const ExanestPkt *k)
{
    PldmaChannel *c;

    trace_exanest_pldma_net_rx(k->op, k->src, k->op_id, k->offset, k->plen,
                               k->status);
    switch (k->op) {
    case EXANEST_PKT_WRITE:
    case EXANEST_PKT_WRITE_IMM:
    case EXANEST_PKT_READ_REQ:
    case EXANEST_PKT_MAILBOX:
    case EXANEST_PKT_ABORT:
        net_rx(s, k);
        break;
    case EXANEST_PKT_READ_RESP:
        c = net_sender(s, k->src, k->op_id);
        if (!c || c->a_op != PLDMA_OP_GET || c->a_ep != k->ep ||
            c->a_rkey != k->rkey || c->a_src != k->addr ||
            c->a_len != k->len) {
            net_count(s, PLDMA_NET_CNT_RX_DROPPED, 1);
            break;
        }
        net_get_data(c, k);
        break;
    case EXANEST_PKT_ACK:
    case EXANEST_PKT_NACK:
    case EXANEST_PKT_RESUME:
        c = net_sender(s, k->src, k->op_id);
        if (!c || c->a_ep != k->ep || c->a_rkey != k->rkey ||
            net_raddr(c) != k->addr || c->a_len != k->len) {
            net_count(s, PLDMA_NET_CNT_RX_DROPPED, 1);
            break;
        }
        if (k->op == EXANEST_PKT_ACK) {
            /* The peer is heard through exanest_rtt_ack, as by GET data */
            if (c->a_op != PLDMA_OP_GET) {
                net_on_ack(c, k->offset, (uint32_t)k->status, k->seq,
                           k->span & EXANEST_PKT_ECE);
            }
            break;
        }
        exanest_rtt_answered(s->net.rtt, k->src);
        if (k->op == EXANEST_PKT_RESUME) {
            net_on_resume(c, k->offset, k->seq);
        } else if (exanest_nack_valid(k->status)) {
            net_on_nack(c, k->offset, k->status, k->seq);
        } else {
            net_count(s, PLDMA_NET_CNT_RX_DROPPED, 1);
        }
        break;
    }
}

/* The ingress queue delivers what is due. */
static void net_rx_timer(void *opaque)
{
    PldmaState *s = opaque;
    PldmaNet *n = &s->net;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    PldmaRxPacket *p;

    while ((p = QSIMPLEQ_FIRST(&n->rxq)) && p->at <= now) {
        QSIMPLEQ_REMOVE_HEAD(&n->rxq, next);
        net_dispatch(s, &p->k);
        g_free(p);
    }
    if (p) {
        timer_mod(n->rx_timer, p->at);
    }
}

/*
 * The fabric's last hop to this port (rx-queue, 2.7): a data packet waits
 * behind those queued before it, drained at the link's rate, so one sender
 * at line rate never waits and several do. Past ecn-threshold bytes queued
 * it is marked congestion experienced; with no room it is dropped. Returns
 * whether it is for now (false: queued, or dropped).
 */
static bool net_ingress(PldmaState *s, size_t size, ExanestPkt *k)
{
    PldmaNet *n = &s->net;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
    uint32_t bw = net_bw(s);
    uint64_t queued = 0;
    PldmaRxPacket *p;

    if (!k->plen || !n->rx_queue || !bw) {
        return true;
    }
    if (n->rx_free_ns > now) {
        queued = (uint64_t)(n->rx_free_ns - now) * bw / 1000;
    }
    if (queued + size > n->rx_queue) {
        net_count_cc(s, PLDMA_NET_CC_INGRESS_DROPS, 1);
        trace_exanest_pldma_net_ingress_drop(k->src, k->op_id, k->offset,
                                             queued);
        return false;
    }
    if (n->ecn_threshold && queued > n->ecn_threshold) {
        k->ce = 1;
    }
    net_count_cc(s, PLDMA_NET_CC_CE_MARKED, k->ce);
    n->cc[PLDMA_NET_CC_QUEUE_PEAK] = MAX(n->cc[PLDMA_NET_CC_QUEUE_PEAK],
                                         queued + size);
    n->rx_free_ns = MAX(now, n->rx_free_ns + net_link_ns(s, size));
    if (n->rx_free_ns <= now) {
        return true;
    }
    p = g_malloc0(sizeof(*p) + k->plen);
    memcpy(p->data, k->payload, k->plen);
    p->k = *k;
    p->k.payload = p->data;
    p->at = n->rx_free_ns;
    QSIMPLEQ_INSERT_TAIL(&n->rxq, p, next);
    if (!timer_pending(n->rx_timer)) {
        timer_mod(n->rx_timer, p->at);
    }
    return false;
}

/* A packet in from the link, or from this port's own loopback. */
static void net_receive(PldmaState *s, const uint8_t *buf, size_t size)
{
    ExanestPkt k;

    net_count(s, PLDMA_NET_CNT_RX_PACKETS, 1);
    if (!net_decode(s, buf, size, &k)) {
        net_count(s, PLDMA_NET_CNT_RX_DROPPED, 1);
        trace_exanest_pldma_net_drop(size);
        return;
    }
    if (net_ingress(s, size, &k)) {
        net_dispatch(s, &k);
    }
}

static ssize_t pldma_net_receive(NetClientState *nc, const uint8_t *buf,
                                 size_t size)
{
    net_receive(qemu_get_nic_opaque(nc), buf, size);
    return size;
}

/*
 * EP_CTX written with RESIDENT: RESUME the ops it NACKed NOT_READY, and
 * report the faults no channel holds on the endpoint's context; the endpoint
 * is not wanted any more.
 */
static void net_ep_resident(PldmaState *s, uint32_t ep)
{
    PldmaContext *x = net_ep_ctx(s, ep);
    ExanestRxSlot r;
    ExanestRxStep e;

    s->net.ep_wanted[ep / 32] &= ~(1u << (ep % 32));
    for (uint32_t i = 0; x && exanest_rx_slot(s->net.rxt, i, &r); i++) {
        if (r.ep != ep) {
            continue;
        }
        if (r.state == EXANEST_RX_FAULTED && !r.holder) {
            net_rx_report(x, i);
        }
        if (r.state == EXANEST_RX_NOT_READY) {
            e = exanest_rx_wake(s->net.rxt, i);
            net_rx_do(s, &e, ep);
        }
    }
}

/*
 * EP_CTX written without OPEN: the endpoint's process is gone. Its
 * unfinished receive ops end (NACKed), and it is not wanted any more.
 */
static void net_ep_closed(PldmaState *s, uint32_t ep)
{
    ExanestRxSlot r;
    ExanestRxStep e;

    s->net.ep_wanted[ep / 32] &= ~(1u << (ep % 32));
    for (uint32_t i = 0; exanest_rx_slot(s->net.rxt, i, &r); i++) {
        if (r.ep == ep) {
            e = exanest_rx_close(s->net.rxt, i, ep);
            net_rx_do(s, &e, ep);
        }
    }
}

/* Registers */

bool pldma_net_read(PldmaState *s, hwaddr addr, uint64_t *val)
{
    PldmaNet *n = &s->net;

    if (addr >= PLDMA_NET_CNT_BASE &&
        addr < PLDMA_NET_CNT_BASE + 4 * PLDMA_NET_COUNTERS) {
        *val = n->cnt[(addr - PLDMA_NET_CNT_BASE) / 4];
        return true;
    }
    if (addr >= PLDMA_NET_CC_BASE &&
        addr < PLDMA_NET_CC_BASE + 4 * PLDMA_NET_CC_COUNTERS) {
        *val = n->cc[(addr - PLDMA_NET_CC_BASE) / 4];
        return true;
    }
    if (addr >= PLDMA_NET_EP_WANTED &&
        addr < PLDMA_NET_EP_WANTED + 4 * PLDMA_NET_EP_WANTED_WORDS) {
        *val = n->ep_wanted[(addr - PLDMA_NET_EP_WANTED) / 4];
        return true;
    }
    switch (addr) {
    case PLDMA_NET_IRQ:
        *val = n->irq;
        break;
    case PLDMA_NET_NODE:
        *val = n->node | (pldma_net_link(s) ? PLDMA_NET_NODE_LINK : 0);
        break;
    case PLDMA_NET_WINDOW:
        *val = n->window;
        break;
    case PLDMA_NET_LINK_LATENCY:
        *val = n->link_latency_ns;
        break;
    case PLDMA_NET_LINK_BW:
        *val = net_bw(s);
        break;
    case PLDMA_NET_RTO_US:
        *val = MAX(n->rto_us, 1);
        break;
    case PLDMA_NET_RETRIES:
        *val = n->retries;
        break;
    case PLDMA_NET_DROP_PPM:
        *val = n->drop_ppm;
        break;
    case PLDMA_NET_CORRUPT_PPM:
        *val = n->corrupt_ppm;
        break;
    case PLDMA_NET_REORDER_PPM:
        *val = n->reorder_ppm;
        break;
    case PLDMA_NET_REORDER_US:
        *val = MAX(n->reorder_us, 1);
        break;
    case PLDMA_NET_EP_SEL:
        *val = n->ep_sel;
        break;
    case PLDMA_NET_EP_CTX:
        *val = n->ep[n->ep_sel];
        break;
    case PLDMA_NET_RKEY_SEL:
        *val = n->rkey_sel;
        break;
    case PLDMA_NET_RKEY_KEY_LO:
        *val = (uint32_t)n->rkey_win.key;
        break;
    case PLDMA_NET_RKEY_KEY_HI:
        *val = n->rkey_win.key >> 32;
        break;
    case PLDMA_NET_KEYFAIL_LIMIT:
        *val = exanest_rx_keyfail_limit(n->rxt);
        break;
    case PLDMA_NET_SRC_SEL:
        *val = n->src_sel;
        break;
    case PLDMA_NET_SRC_KEYFAILS:
        *val = exanest_rx_keyfails(n->rxt, n->src_sel);
        break;
    case PLDMA_NET_QUARANTINE_LO:
        *val = (uint32_t)exanest_rx_quarantined(n->rxt);
        break;
    case PLDMA_NET_QUARANTINE_HI:
        *val = exanest_rx_quarantined(n->rxt) >> 32;
        break;
    case PLDMA_NET_RKEY_BASE_LO:
        *val = n->rkey_win.base;
        break;
    case PLDMA_NET_RKEY_BASE_HI:
        *val = n->rkey_win.base >> 32;
        break;
    case PLDMA_NET_RKEY_LEN_LO:
        *val = n->rkey_win.len;
        break;
    case PLDMA_NET_RKEY_LEN_HI:
        *val = n->rkey_win.len >> 32;
        break;
    case PLDMA_NET_RKEY_EP:
        *val = n->rkey_win.ep;
        break;
    case PLDMA_NET_RKEY_NODE:
        *val = n->rkey_win.node;
        break;
    case PLDMA_NET_RKEY_CTRL:
        *val = n->rkeys[n->rkey_sel].ctrl;
        break;
    default:
        return false;
    }
    return true;
}

static void net_set_lo(uint64_t *r, uint32_t v)
{
    *r = deposit64(*r, 0, 32, v);
}

static void net_set_hi(uint64_t *r, uint32_t v)
{
    *r = deposit64(*r, 32, 32, v);
}

bool pldma_net_write(PldmaState *s, hwaddr addr, uint32_t val)
{
    PldmaNet *n = &s->net;

    switch (addr) {
    case PLDMA_NET_IRQ:
        n->irq &= ~val;
        pldma_update_irq(s);
        break;
    case PLDMA_NET_CC_BASE + 4 * PLDMA_NET_CC_QUEUE_PEAK:
        n->cc[PLDMA_NET_CC_QUEUE_PEAK] = 0;     /* measure from now */
        break;
    case PLDMA_NET_RTO_US:
        n->rto_us = val;
        break;
    case PLDMA_NET_RETRIES:
        n->retries = val;
        break;
    case PLDMA_NET_DROP_PPM:
        n->drop_ppm = MIN(val, 1000000);
        break;
    case PLDMA_NET_CORRUPT_PPM:
        n->corrupt_ppm = MIN(val, 1000000);
        break;
    case PLDMA_NET_REORDER_PPM:
        n->reorder_ppm = MIN(val, 1000000);
        break;
    case PLDMA_NET_REORDER_US:
        n->reorder_us = MIN(val, 1000000);
        break;
    case PLDMA_NET_EP_SEL:
        n->ep_sel = val % PLDMA_NET_MAX_EPS;
        break;
    case PLDMA_NET_EP_CTX:
        if ((val & PLDMA_NET_EP_RESIDENT) &&
            (val & PLDMA_NET_EP_CTX_MASK) >= s->nctx) {
            qemu_log_mask(LOG_GUEST_ERROR, "exanest-pldma: endpoint %u: "
                          "no context %u\n", n->ep_sel,
                          val & PLDMA_NET_EP_CTX_MASK);
            break;
        }
        n->ep[n->ep_sel] = val & (PLDMA_NET_EP_RESIDENT | PLDMA_NET_EP_OPEN |
                                  PLDMA_NET_EP_MBOX | PLDMA_NET_EP_CTX_MASK);
        if (!(val & PLDMA_NET_EP_OPEN)) {
            net_ep_closed(s, n->ep_sel);
        } else if (val & PLDMA_NET_EP_RESIDENT) {
            net_ep_resident(s, n->ep_sel);
        }
        break;
    case PLDMA_NET_RKEY_SEL:
        n->rkey_sel = val % PLDMA_NET_MAX_RKEYS;
        break;
    case PLDMA_NET_RKEY_KEY_LO:
        net_set_lo(&n->rkey_win.key, val);
        break;
    case PLDMA_NET_RKEY_KEY_HI:
        net_set_hi(&n->rkey_win.key, val);
        break;
    case PLDMA_NET_KEYFAIL_LIMIT:
        exanest_rx_set_keyfail_limit(n->rxt, val);
        break;
    case PLDMA_NET_SRC_SEL:
        n->src_sel = val % PLDMA_NET_MAX_NODES;
        break;
    case PLDMA_NET_QUARANTINE_LO:
        exanest_rx_release_nodes(n->rxt, val);
        break;
    case PLDMA_NET_QUARANTINE_HI:
        exanest_rx_release_nodes(n->rxt, (uint64_t)val << 32);
        break;
    case PLDMA_NET_RKEY_BASE_LO:
        net_set_lo(&n->rkey_win.base, val);
        break;
    case PLDMA_NET_RKEY_BASE_HI:
        net_set_hi(&n->rkey_win.base, val);
        break;
    case PLDMA_NET_RKEY_LEN_LO:
        net_set_lo(&n->rkey_win.len, val);
        break;
    case PLDMA_NET_RKEY_LEN_HI:
        net_set_hi(&n->rkey_win.len, val);
        break;
    case PLDMA_NET_RKEY_EP:
        n->rkey_win.ep = val;
        break;
    case PLDMA_NET_RKEY_NODE:
        n->rkey_win.node = val % PLDMA_NET_MAX_NODES;
        break;
    case PLDMA_NET_RKEY_CTRL:
        n->rkey_win.ctrl = val & (PLDMA_NET_RKEY_VALID | PLDMA_NET_RKEY_READ |
                                  PLDMA_NET_RKEY_WRITE | PLDMA_NET_RKEY_BOUND);
        n->rkeys[n->rkey_sel] = n->rkey_win;
        trace_exanest_pldma_net_rkey(n->rkey_sel, n->rkey_win.key,
                                     n->rkey_win.ep, n->rkey_win.base,
                                     n->rkey_win.len, n->rkey_win.ctrl,
                                     n->rkey_win.node);
        break;
    default:
        return false;
    }
    return true;
}

bool pldma_ch_net_read(PldmaChannel *c, hwaddr off, uint64_t *val)
{
    switch (off) {
    case PLDMA_CH_NET_OP:
        *val = c->net_op;
        break;
    case PLDMA_CH_NET_PEER:
        *val = c->net_peer;
        break;
    case PLDMA_CH_NET_EP:
        *val = c->net_ep;
        break;
    case PLDMA_CH_NET_RKEY_LO:
        *val = (uint32_t)c->net_rkey;
        break;
    case PLDMA_CH_NET_RKEY_HI:
        *val = c->net_rkey >> 32;
        break;
    case PLDMA_CH_NET_OPID:
        *val = c->op_id;
        break;
    case PLDMA_CH_NET_SRC:
        *val = c->rx_src;
        break;
    case PLDMA_CH_NET_STATUS:
        *val = (uint32_t)c->net_status;
        break;
    default:
        return false;
    }
    return true;
}

bool pldma_ch_net_write(PldmaChannel *c, hwaddr off, uint32_t val)
{
    switch (off) {
    case PLDMA_CH_NET_OP:
        c->net_op = val & PLDMA_OP_MASK;
        break;
    case PLDMA_CH_NET_PEER:
        c->net_peer = val & 0xffff;
        break;
    case PLDMA_CH_NET_EP:
        c->net_ep = val;
        break;
    case PLDMA_CH_NET_RKEY_LO:
        net_set_lo(&c->net_rkey, val);
        break;
    case PLDMA_CH_NET_RKEY_HI:
        net_set_hi(&c->net_rkey, val);
        break;
    default:
        return false; /* the read-only ones too */
    }
    return true;
}

/* Life cycle */

static void pldma_net_set_link(NetClientState *nc)
{
    /* NET_NODE.LINK reads the link state; ops see it at their start. */
}

static NetClientInfo pldma_net_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .receive = pldma_net_receive,
    .link_status_changed = pldma_net_set_link,
};

void pldma_net_channel_init(PldmaChannel *c)
{
    c->rto = timer_new_ns(QEMU_CLOCK_VIRTUAL, net_rto_fired, c);
    c->snd = exanest_send_new();
}

void pldma_net_channel_exit(PldmaChannel *c)
{
    timer_free(c->rto);
    exanest_send_free(c->snd);
    c->snd = NULL;
}

/* After the properties are checked (pldma_realize). */
void pldma_net_realize(PldmaState *s)
{
    PldmaNet *n = &s->net;
    DeviceState *d = s->dev;

    QSIMPLEQ_INIT(&n->txq);
    n->rxt = exanest_rx_new(n->node);
    n->rtt = exanest_rtt_new();
    /*
     * Op ids count per peer, from a random first id at power-up (InfiniBand's
     * random start PSN): a receiver never takes a new op of this engine for
     * one of its previous power-up (Transport v2, defect 2). RESET keeps
     * counting. With net-seed, from the seed, so that runs repeat.
     */
    if (n->seed) {
        uint64_t x = n->seed ^ (n->node + 1) * 0x9E3779B97F4A7C15ULL;

        for (unsigned i = 0; i < PLDMA_NET_MAX_NODES; i++) {
            x += 0x9E3779B97F4A7C15ULL;
            n->next_op_id[i] = ((x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ULL) >> 32;
        }
    } else {
        qemu_guest_getrandom_nofail(n->next_op_id, sizeof(n->next_op_id));
    }
    /*
     * What one requester may have waiting in the port, served: two of its
     * requests in flight on each of two channels (a GET asks in half windows).
     */
    exanest_rx_set_read_cap(n->rxt, 4 * (uint64_t)n->window);
    /*
     * Coalesced ACKs: an owed ACK waits for the next packet for two packets'
     * time on the link (the next one of a burst comes within one), 1 us at
     * least.
     */
    n->ack_delay_ns = MAX(2 * net_link_ns(s, EXANEST_PKT_HDR + 4096), 1000);
    exanest_rx_set_acks(n->rxt, n->ack_every, n->ack_delay_ns);
    n->ack_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, net_ack_timer, s);
    n->tx_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, net_tx_timer, s);
    QSIMPLEQ_INIT(&n->rxq);
    n->rx_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, net_rx_timer, s);
    n->cc_bh = qemu_bh_new_guarded(net_cc_bh, s, &d->mem_reentrancy_guard);
    qemu_macaddr_default_if_unset(&n->conf.macaddr);
    n->nic = qemu_new_nic(&pldma_net_info, &n->conf,
                          object_get_typename(OBJECT(d)), d->id,
                          &d->mem_reentrancy_guard, s);
}

/* The ingress queue's packets go (they arrived before a RESET: lost). */
static void net_rx_flush(PldmaState *s)
{
    PldmaRxPacket *p;

    while ((p = QSIMPLEQ_FIRST(&s->net.rxq))) {
        QSIMPLEQ_REMOVE_HEAD(&s->net.rxq, next);
        g_free(p);
    }
    timer_del(s->net.rx_timer);
    s->net.rx_free_ns = 0;
}

void pldma_net_exit(PldmaState *s)
{
    PldmaTxPacket *p;

    while ((p = QSIMPLEQ_FIRST(&s->net.txq))) {
        QSIMPLEQ_REMOVE_HEAD(&s->net.txq, next);
        g_free(p);
    }
    timer_free(s->net.tx_timer);
    net_rx_flush(s);
    timer_free(s->net.rx_timer);
    timer_free(s->net.ack_timer);
    qemu_bh_delete(s->net.cc_bh);
    qemu_del_nic(s->net.nic);
    exanest_rx_free(s->net.rxt);
    s->net.rxt = NULL;
    exanest_rtt_free(s->net.rtt);
    s->net.rtt = NULL;
}

/*
 * RESET: the tables, the counters and the receive ops go; packets on the
 * link still arrive (they left before the reset). Op ids keep counting, so
 * a peer never takes a new op for one it saw before.
 */
void pldma_net_reset(PldmaState *s)
{
    PldmaNet *n = &s->net;

    memset(n->ep, 0, sizeof(n->ep));
    memset(n->rkeys, 0, sizeof(n->rkeys));
    memset(&n->rkey_win, 0, sizeof(n->rkey_win));
    memset(n->cnt, 0, sizeof(n->cnt));
    memset(n->cc, 0, sizeof(n->cc));
    n->peer_blocked = 0;
    net_rx_flush(s);
    memset(n->ep_wanted, 0, sizeof(n->ep_wanted));
    n->irq = 0;
    exanest_rx_reset(n->rxt);
    memset(n->la_op, 0, sizeof(n->la_op));
    memset(n->la_miss, 0, sizeof(n->la_miss));
    memset(n->la_next, 0, sizeof(n->la_next));
    timer_del(n->ack_timer);
    exanest_rtt_clear(n->rtt);
    n->ep_sel = n->rkey_sel = n->src_sel = 0;
    n->drop_ppm = n->corrupt_ppm = 0;
    n->reorder_ppm = n->reorder_us = 0;
    n->rto_us = 10000;
    n->retries = 8;
    /* Each node its own sequence, from the same seed. */
    n->rng = (n->seed ? n->seed : 0x9E3779B97F4A7C15ULL) ^
             (n->node + 1) * 0xD1B54A32D192ED03ULL;
    n->rng = n->rng ? n->rng : 1;
    n->cookie_rng = n->rng ^ 0x5DEECE66DULL;
}
