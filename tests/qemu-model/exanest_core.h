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
#define EXANEST_PKT_WRITE_IMM   8   /* WRITE, with the immediate in status */
#define EXANEST_PKT_ABORT       9   /* the sender ended the op unfinished */
/* An ACK's span: the packet it answers came marked congestion experienced */
#define EXANEST_PKT_ECE         1

/* NACK status: these, or a negative errno that ends the op */
#define EXANEST_NACK_FAULT      1
#define EXANEST_NACK_NOT_READY  2
#define EXANEST_NACK_SEQUENCE   3
#define EXANEST_NACK_RNR        4
#define EXANEST_NACK_AHEAD      5   /* a page ahead: nothing from it on */

/* Why exanest_pkt_decode() refused a packet */
#define EXANEST_BAD_SIZE        (-1)
#define EXANEST_BAD_MAGIC       (-2)
#define EXANEST_BAD_OP          (-3)
#define EXANEST_BAD_LENGTH      (-4)
#define EXANEST_BAD_CHECKSUM    (-6)

/* A packet's fields; payload points at plen bytes (may be NULL if plen is 0) */
typedef struct ExanestPkt {
    uint8_t op;
    uint16_t src, dst;
    uint32_t ep, op_id, seq;
    int32_t status;
    uint64_t rkey, addr, len, offset;
    uint16_t plen;
    /*
     * A request's word on its sender's finished ops: the op ids from its
     * oldest unfinished op to this one, both counted (0 says nothing).
     */
    uint16_t span;
    /*
     * Congestion experienced (1): the fabric met the packet in a queue past its
     * marking threshold (bit 7 of the op byte); an ACK's span echoes it as
     * EXANEST_PKT_ECE.
     */
    uint8_t ce;
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

/*
 * The sending side of one op (exanest-core's netop.rs, SendOp): a PUT or a
 * MAILBOX sends data and takes ACKs; a GET sends read requests and places
 * the data that comes back, in order. It decides what to send, when to go
 * back, pause, probe and give up; the caller moves the bytes, runs one timer
 * at exanest_send_deadline() and counts what each event reports. Times are
 * ns on the caller's clock.
 */
typedef struct ExanestSendOp ExanestSendOp;

/* ExanestSendParams.kind */
#define EXANEST_SEND_PUT        0
#define EXANEST_SEND_GET        1

typedef struct ExanestSendParams {
    uint32_t kind;
    uint32_t mtu;           /* bytes per packet (PUT) or read request (GET) */
    uint64_t window;        /* most bytes in flight */
    uint64_t rto_ns;        /* first retransmission timeout */
    uint64_t max_rto_ns;    /* cap of the backed-off timeout */
    uint32_t max_retries;   /* unanswered timeouts or probes before ETIMEDOUT */
    uint64_t reorder_ns;    /* a gap the ACKs show waits this, then resent */
    uint64_t pto_ns;        /* tail-loss probe after this silence; 0: none */
    /* not 0: the first packet alone until answered (exanest_rtt_first_alone) */
    uint32_t first_alone;
    /*
     * not 0: the peer never answered (exanest_rtt_heard): with no answer, the
     * op ends EHOSTUNREACH at the first timeout this long after it started
     */
    uint64_t unheard_ns;
} ExanestSendParams;

/* An op to a peer never heard from waits this long (unheard_ns) */
#define EXANEST_SEND_UNHEARD_NS 1000000000
/* Its end then (COMPLETED's status): no such node, or no link to it */
#define EXANEST_EHOSTUNREACH    113

/* ExanestSendEvent.what */
#define EXANEST_SEND_NOTHING    0
#define EXANEST_SEND_COMPLETED  1   /* ended: status 0, or a positive errno */
#define EXANEST_SEND_PROBE      2   /* send a probe at offset */
#define EXANEST_SEND_LOCAL_FAULT 3  /* GET: this side's memory faulted */

/* ExanestSendEvent.first_answer: its first bytes placed, or NACKed FAULT */
#define EXANEST_FIRST_PLACED    1
#define EXANEST_FIRST_FAULTED   2

/* ExanestSendEvent.probe_verdict: the probed packet was late, or lost */
#define EXANEST_PROBE_SPURIOUS  1
#define EXANEST_PROBE_NEEDED    2

typedef struct ExanestSendEvent {
    uint32_t what;
    int32_t status;
    uint64_t offset;
    uint32_t nacks, resumes, timeouts, probes;  /* what the event counted */
    uint32_t tail_probes;   /* the last block sent again before a timeout */
    uint32_t probe_verdict; /* a tail probe judged: EXANEST_PROBE_*, 0 none */
    uint32_t first_answer;  /* the receiver's first: EXANEST_FIRST_*, 0 none */
    uint64_t rtt_ns;        /* a round trip measured (0: none), to the table */
} ExanestSendEvent;

/* An op of 0 bytes, ended, until exanest_send_start(); NULL never */
ExanestSendOp *exanest_send_new(void);
void exanest_send_free(ExanestSendOp *op);
void exanest_send_start(ExanestSendOp *op, uint64_t len,
                        const ExanestSendParams *p);
/* The next packet (GET: request) the window allows: true and *off, *n */
bool exanest_send_peek(const ExanestSendOp *op, uint64_t *off, uint32_t *n);
/* n bytes at off went out, a prefix of the peek: returns those sent before */
uint64_t exanest_send_sent(ExanestSendOp *op, uint64_t off, uint32_t n,
                           uint64_t now);
/* The sequence number of the next packet sent: data, probe or read request */
uint32_t exanest_send_seq(ExanestSendOp *op);
/* The packets from low on never left (withdrawn after a NACK) */
void exanest_send_withdrawn(ExanestSendOp *op, uint64_t low);
/* The timer fired while this side stalls on its own fault: wait again */
void exanest_send_postpone(ExanestSendOp *op, uint64_t now);
/* GET: its destination unmapped at what is placed, nothing asked past it */
void exanest_send_local_fault(ExanestSendOp *op);
/*
 * An ACK: the receiver placed [0, off), and the blocks of sack (an ACK's
 * status; bit i: block off / EXANEST_PKT_MTU + 1 + i), answering the packet
 * whose sequence number it echoes (the one timed: a round trip, rtt_ns)
 */
ExanestSendEvent exanest_send_ack(ExanestSendOp *op, uint64_t off,
                                  uint32_t sack, uint32_t echo, uint64_t now);
/* The peer's timeouts changed at now: rto_ns from the next one armed, pto_ns */
void exanest_send_retime(ExanestSendOp *op, uint64_t rto_ns, uint64_t pto_ns,
                         uint64_t now);
/*
 * A NACK or RESUME echoes the sequence number of the packet it answers (a
 * RESUME: the packet NACKed, or a probe): a stale one changes nothing.
 */
ExanestSendEvent exanest_send_nack(ExanestSendOp *op, uint64_t off,
                                   int32_t status, uint32_t echo,
                                   uint64_t now);
ExanestSendEvent exanest_send_resume(ExanestSendOp *op, uint64_t off,
                                     uint32_t echo, uint64_t now);
/* exanest_send_data_act() */
#define EXANEST_DATA_DROP       0   /* not wanted: report it placed 0 */
#define EXANEST_DATA_PLACE      1   /* in order: place what translates */
#define EXANEST_DATA_PLACE_AHEAD 2  /* a whole block past a gap: all or none */

/* GET: what to do with READ_RESP data at off, n bytes, before placing it */
uint32_t exanest_send_data_act(const ExanestSendOp *op, uint64_t off,
                               uint64_t n);
/*
 * GET: READ_RESP data at off, placed of its n bytes placed here, echoing the
 * sequence number echo of the request it answers
 */
ExanestSendEvent exanest_send_data(ExanestSendOp *op, uint64_t off,
                                   uint64_t placed, uint64_t n, uint32_t echo,
                                   uint64_t now);
ExanestSendEvent exanest_send_timeout(ExanestSendOp *op, uint64_t now);
uint64_t exanest_send_acked(const ExanestSendOp *op);
/* Bytes sent (a GET's: asked) and not yet placed (0 paused or done) */
uint64_t exanest_send_in_flight(const ExanestSendOp *op);
bool exanest_send_paused(const ExanestSendOp *op);
/* When the timer must fire, or -1 for never */
int64_t exanest_send_deadline(const ExanestSendOp *op);

/*
 * The round trip to each peer (exanest-core's netop/rtt.rs, RFC 6298), from
 * the ops' rtt_ns, and the timeouts of an op to it: rto = SRTT + 4 RTTVAR
 * within [floor, cap] (floor before any sample), pto = 2 SRTT doubled for
 * each spurious tail probe in a row (0: none).
 * 64 peers, the least recently used one replaced.
 */
typedef struct ExanestRttTable ExanestRttTable;

ExanestRttTable *exanest_rtt_new(void);
void exanest_rtt_free(ExanestRttTable *t);
void exanest_rtt_sample(ExanestRttTable *t, uint16_t node, uint64_t ns);
/*
 * A tail probe to node was judged (an event's probe_verdict): spurious ones
 * in a row double its probe timeout, a needed one takes it back to 2 SRTT.
 */
void exanest_rtt_probe_judged(ExanestRttTable *t, uint16_t node,
                              bool spurious);
/*
 * An op to node was first answered (an event's first_answer, not 0): after
 * EXANEST_FIRST_FAULTED the peer's next ops send their first packet alone
 * (ExanestSendParams.first_alone), after EXANEST_FIRST_PLACED no longer.
 */
void exanest_rtt_first_answered(ExanestRttTable *t, uint16_t node,
                                uint32_t answer);
bool exanest_rtt_first_alone(const ExanestRttTable *t, uint16_t node);
/*
 * node answered an op of this node with a NACK or RESUME (its ACKs and GET
 * data count through exanest_rtt_ack); whether it ever answered since the clear
 */
void exanest_rtt_answered(ExanestRttTable *t, uint16_t node);
bool exanest_rtt_heard(const ExanestRttTable *t, uint16_t node);
/* *rto and *pto of an op to node; returns SRTT, or 0 before any sample */
uint64_t exanest_rtt_timeouts(const ExanestRttTable *t, uint16_t node,
                              uint64_t floor, uint64_t cap, uint64_t *rto,
                              uint64_t *pto);
void exanest_rtt_clear(ExanestRttTable *t);
/*
 * Each peer's windows over all the ops to it (netop/cc.rs, DCTCP), one for
 * writes and one for reads (a GET's data, asked): at most cap bytes in
 * flight, cut by the ACKs that echo congestion (reads: by the marked data),
 * never below a packet; nothing in flight always grants a unit.
 */
/*
 * The cap: window at most, near twice the bandwidth-delay product of a link
 * of bw_mbs MB/s whose round trip with no queue is rtt_ns.
 */
uint64_t exanest_cc_cap(uint64_t window, uint64_t bw_mbs, uint64_t rtt_ns);
/* How many of want bytes may go: whole units, one when idle, 0 for none */
uint64_t exanest_rtt_grant(const ExanestRttTable *t, uint16_t node,
                           bool reads, uint64_t cap, uint64_t in_flight,
                           uint64_t want, uint64_t unit);
uint64_t exanest_rtt_window(const ExanestRttTable *t, uint16_t node,
                            bool reads, uint64_t cap);
/* bytes more placed, marked or not: true if it cut the window */
bool exanest_rtt_ack(ExanestRttTable *t, uint16_t node, bool reads,
                     uint64_t cap, uint64_t bytes, bool marked);

/*
 * The receiving side (exanest-core's netrx.rs, RecvTable): the table of the
 * remote ops a node receives, the key check and every answer. The caller
 * moves the bytes and knows its endpoints: it passes each WRITE, READ_REQ
 * and MAILBOX with what the endpoint can take, does what the step asks
 * (PLACE, then exanest_rx_placed(); SERVE, then exanest_rx_served(); REPORT:
 * a fault to report on an idle channel, exanest_rx_hold()), sends the answer
 * and counts what the step says. Times are ns on the caller's clock.
 */
typedef struct ExanestRecvTable ExanestRecvTable;

/* An entry of the rkey table, as the engine's registers hold it */
typedef struct ExanestRkey {
    uint32_t ctrl, ep;          /* valid and rights (PLDMA_NET_RKEY_*), owner */
    uint64_t key;               /* 64 random bits (register map 2.5) */
    uint64_t base, len;         /* the region */
    uint32_t node;              /* 2.9: with NET_RKEY_BOUND, the initiator */
} ExanestRkey;

/* What the packet's endpoint can take (exanest_rx_packet's ep) */
#define EXANEST_RX_EP_READY     1   /* a context is resident, with a function */
#define EXANEST_RX_MBOX_ON      2   /* it has a mailbox */
#define EXANEST_RX_MBOX_ROOM    4   /* its ring has a free slot */
#define EXANEST_RX_EP_OPEN      8   /* a process holds it */
#define EXANEST_RX_MBOX_OWNED   16  /* that process has a mailbox */

/* ExanestRxStep.what */
#define EXANEST_RX_NOTHING      0
#define EXANEST_RX_PLACE        1   /* place the payload, exanest_rx_placed() */
#define EXANEST_RX_SERVE        2   /* send [from, to), exanest_rx_served() */
#define EXANEST_RX_REPORT       3   /* report slot's fault, exanest_rx_hold() */
#define EXANEST_RX_PLACE_AHEAD  4   /* a block past a gap: all of it or none */

/* ExanestRxStep.counts */
#define EXANEST_RX_DROPPED      1
#define EXANEST_RX_DUPLICATE    2
#define EXANEST_RX_RNR          4   /* the answer is an RNR NACK */
#define EXANEST_RX_WANT_EP      8   /* the endpoint holds no context: want it */
#define EXANEST_RX_KEY_FAIL     16  /* the key failed: count it */
#define EXANEST_RX_QUARANTINE   32  /* which quarantined its source */
#define EXANEST_RX_QUARANTINED  64  /* dropped: from a quarantined source */

typedef struct ExanestRxStep {
    uint32_t what, slot;
    uint64_t from, to;
    uint32_t counts;
    bool reply;             /* send answer (to the op's source) */
    bool counted;           /* a NACK or RESUME to count as sent */
    ExanestPkt answer;      /* no payload */
} ExanestRxStep;

/* ExanestRxSlot.state */
#define EXANEST_RX_FREE         0
#define EXANEST_RX_RECEIVING    1
#define EXANEST_RX_FAULTED      2
#define EXANEST_RX_NOT_READY    3
#define EXANEST_RX_RNR_WAIT     4
#define EXANEST_RX_DONE         5
#define EXANEST_RX_ERROR        6

/* ExanestRxSlot.kind */
#define EXANEST_RX_WRITE        0
#define EXANEST_RX_MAILBOX      1
#define EXANEST_RX_READ         2
#define EXANEST_RX_WRITE_IMM    3

/* Unfinished slots keyless ops (MAILBOX) may hold at most */
#define EXANEST_RX_KEYLESS      16

typedef struct ExanestRxSlot {
    uint32_t state, kind, op_id, ep;
    uint32_t holder;        /* the token of the channel reporting its fault */
    int32_t err;            /* EXANEST_RX_ERROR: positive errno */
    uint16_t src;
    uint64_t rkey, addr, len, placed, fault_addr;
} ExanestRxSlot;

ExanestRecvTable *exanest_rx_new(uint16_t node);
void exanest_rx_free(ExanestRecvTable *t);
void exanest_rx_reset(ExanestRecvTable *t);
ExanestRxStep exanest_rx_packet(ExanestRecvTable *t, const ExanestPkt *k,
                                const ExanestRkey *keys, uint32_t nkeys,
                                uint32_t ep, uint64_t now, uint64_t idle_ns);
/* PLACE placed got bytes; fault: the rest did not translate, at fault_addr */
ExanestRxStep exanest_rx_placed(ExanestRecvTable *t, uint32_t slot,
                                const ExanestPkt *k, uint64_t got,
                                bool fault, uint64_t fault_addr);
/* SERVE sent up to upto; fault: it stopped there, at source fault_addr */
ExanestRxStep exanest_rx_served(ExanestRecvTable *t, uint32_t slot,
                                const ExanestPkt *k, uint64_t upto,
                                bool fault, uint64_t fault_addr);
bool exanest_rx_slot(const ExanestRecvTable *t, uint32_t i,
                     ExanestRxSlot *out);
/* Channel token (not 0) reports slot i's fault: whether it may */
bool exanest_rx_hold(ExanestRecvTable *t, uint32_t i, uint32_t token);
/*
 * Placing packet seq of slot i (has_seq false: the RESUME of its last page
 * ahead) found its page at addr, past the bytes placed, missing, and idle
 * channel token can report it: the NACK AHEAD (reply false: not taken)
 */
ExanestRxStep exanest_rx_fault_ahead(ExanestRecvTable *t, uint32_t i,
                                     bool has_seq, uint32_t seq,
                                     uint64_t addr, uint32_t token);
/* Channel token stopped: the fault waits for another channel */
void exanest_rx_release(ExanestRecvTable *t, uint32_t i, uint32_t token);
/* The driver resolved it (the RESUME), or refused it with status (the NACK) */
ExanestRxStep exanest_rx_resolved(ExanestRecvTable *t, uint32_t i,
                                  uint32_t token);
ExanestRxStep exanest_rx_refused(ExanestRecvTable *t, uint32_t i,
                                 uint32_t token, int32_t status);
/* What slot i waited for came (a resident endpoint, ring room): RESUME */
ExanestRxStep exanest_rx_wake(ExanestRecvTable *t, uint32_t i);
/* Endpoint ep closed: slot i, if an unfinished op of it, ends (the NACK) */
ExanestRxStep exanest_rx_close(ExanestRecvTable *t, uint32_t i, uint32_t ep);
/*
 * Key failures per source: more than the limit within a second quarantine
 * the source (its ops dropped) until released (NET_KEYFAIL_LIMIT, 0: never;
 * NET_SRC_KEYFAILS; NET_QUARANTINE_*).
 */
void exanest_rx_set_keyfail_limit(ExanestRecvTable *t, uint32_t limit);
uint32_t exanest_rx_keyfail_limit(const ExanestRecvTable *t);
uint32_t exanest_rx_keyfails(const ExanestRecvTable *t, uint32_t src);
uint64_t exanest_rx_quarantined(const ExanestRecvTable *t);
void exanest_rx_release_nodes(ExanestRecvTable *t, uint64_t mask);
/*
 * READ_RESP waiting in the port, per requesting node: a READ_REQ that would
 * pass the cap is NACKed RNR (Transport v2, defect 5); the caller tells what
 * left the port (sent, or dropped on the way).
 */
void exanest_rx_set_read_cap(ExanestRecvTable *t, uint64_t bytes);
void exanest_rx_read_sent(ExanestRecvTable *t, uint32_t dst, uint64_t n);
uint64_t exanest_rx_reading(const ExanestRecvTable *t, uint32_t dst);
/*
 * Coalesced ACKs: one in every packets placed in order is ACKed, and an owed
 * ACK goes delay_ns after its first packet came: the caller arms a timer for
 * exanest_rx_ack_due() and sends what exanest_rx_flush_ack() gives then.
 */
void exanest_rx_set_acks(ExanestRecvTable *t, uint32_t every,
                         uint64_t delay_ns);
bool exanest_rx_ack_due(const ExanestRecvTable *t, uint64_t *at);
bool exanest_rx_flush_ack(ExanestRecvTable *t, uint64_t now,
                          ExanestPkt *answer);

#endif
