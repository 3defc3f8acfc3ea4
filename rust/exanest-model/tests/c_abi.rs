// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `tests/qemu-model/exanest_core.h` must describe this library as the model links it: a C
//! program built with the host's C compiler from the header alone, linked against the static
//! library, prints the layouts, constants and packets it sees, and they must be Rust's.

use exanest_core::netop::rtt::RttTable;
use exanest_core::netop::{DataAct, Kind, SendEvent, SendOp, SendParams};
use exanest_core::netrx::{ep, RecvTable, Rkey, Step};
use exanest_core::packet::{Header, Nack, Op, HEADER};
use exanest_core::regs::net::{RKEY_READ, RKEY_VALID, RKEY_WRITE};
use exanest_model::{
    slot_of, step_of, ExanestPkt, ExanestRkey, ExanestRxSlot, ExanestRxStep, ExanestSendEvent,
    ExanestSendParams, CONSTANTS,
};
use std::collections::BTreeSet;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/qemu-model/exanest_core.h"
);

/// This crate's static library, built by cargo for the host in a target directory of its own
/// (`cargo test` builds only the rlib, and the outer cargo holds its target directory).
fn staticlib() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-abi-target");
    let out = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--offline",
            "--lib",
            "-p",
            "exanest-model",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug/libexanest_model.a")
}

/// One struct of the header as Rust lays it out: its C name, and each field's offset.
struct Layout {
    c_type: &'static str,
    fields: Vec<(&'static str, usize)>,
    size: usize,
}

/// The layout of `$t`, named the same in C, with these fields.
macro_rules! layout {
    ($t:ident: $($f:ident),+) => {
        Layout {
            c_type: stringify!($t),
            fields: vec![$((stringify!($f), offset_of!($t, $f))),+],
            size: size_of::<$t>(),
        }
    };
}

/// Every struct the header declares, every field of it.
fn layouts() -> Vec<Layout> {
    vec![
        layout!(ExanestPkt: op, src, dst, ep, op_id, seq, status, rkey, addr, len, offset, plen,
                span, ce, payload),
        layout!(ExanestSendParams: kind, mtu, window, rto_ns, max_rto_ns, max_retries,
                reorder_ns, pto_ns, first_alone, unheard_ns),
        layout!(ExanestSendEvent: what, status, offset, nacks, resumes, timeouts, probes,
                tail_probes, probe_verdict, first_answer, rtt_ns),
        layout!(ExanestRkey: ctrl, ep, key, base, len),
        layout!(ExanestRxStep: what, slot, from, to, counts, reply, counted, answer),
        layout!(ExanestRxSlot: state, kind, op_id, ep, holder, err, src, rkey, addr, len, placed,
                fault_addr),
    ]
}

/// The C side of the send scenario: a PUT paused by a fault, probed, resumed and ACKed, then
/// timing out; a GET with a gap and a local fault. One line per call.
const SEND_SCENARIO: &str = r#"
static void ev(const char *name, ExanestSendEvent e)
{
	printf("%s %u %d %llu %u %u %u %u %u %llu\n", name, e.what, e.status,
	       (unsigned long long)e.offset, e.nacks, e.resumes, e.timeouts, e.probes,
	       e.tail_probes, (unsigned long long)e.rtt_ns);
}

static void peek(const char *name, ExanestSendOp *op)
{
	uint64_t off = 0;
	uint32_t n = 0;
	bool r = exanest_send_peek(op, &off, &n);

	printf("%s %d %llu %u\n", name, r, (unsigned long long)off, n);
}

static void send_scenario(void)
{
	ExanestSendOp *op = exanest_send_new();
	ExanestSendParams p = { .kind = EXANEST_SEND_PUT, .mtu = 4096, .window = 8192,
				.rto_ns = 100, .max_rto_ns = 400, .max_retries = 2,
				.reorder_ns = 50 };
	ExanestSendEvent e;
	int64_t d;

	exanest_send_start(op, 10000, &p);
	peek("put.peek1", op);
	printf("put.sent1 %llu", (unsigned long long)exanest_send_sent(op, 0, 4096, 0));
	printf(" %u\n", exanest_send_seq(op));
	printf("put.sent2 %llu", (unsigned long long)exanest_send_sent(op, 4096, 4096, 1));
	printf(" %u\n", exanest_send_seq(op));
	peek("put.peek2", op);
	printf("put.flight1 %llu\n", (unsigned long long)exanest_send_in_flight(op));
	ev("put.ack", exanest_send_ack(op, 4096, 0, 0, 2));
	printf("put.flight2 %llu\n", (unsigned long long)exanest_send_in_flight(op));
	ev("put.nack", exanest_send_nack(op, 4096, EXANEST_NACK_FAULT, 1, 3));
	exanest_send_withdrawn(op, 6000);
	printf("put.paused %d %llu\n", exanest_send_paused(op),
	       (unsigned long long)exanest_send_in_flight(op));
	d = exanest_send_deadline(op);
	printf("put.deadline %lld\n", (long long)d);
	ev("put.timeout1", exanest_send_timeout(op, d));
	printf("put.probe %u\n", exanest_send_seq(op));
	ev("put.answer", exanest_send_nack(op, 4096, EXANEST_NACK_FAULT, 2, d + 1));
	ev("put.bogus", exanest_send_nack(op, 4096, 9, 2, d + 1));
	ev("put.resume", exanest_send_resume(op, 4096, 1, d + 2));
	ev("put.dup-resume", exanest_send_resume(op, 4096, 1, d + 2));
	peek("put.peek3", op);
	printf("put.sent3 %llu\n", (unsigned long long)exanest_send_sent(op, 4096, 4096, d + 3));
	exanest_send_postpone(op, d + 50);
	d = exanest_send_deadline(op);
	printf("put.deadline2 %lld\n", (long long)d);
	/* Each timeout goes back and the packet goes again: a timeout with
	 * nothing sent since the last would count nothing. */
	ev("put.timeout2", exanest_send_timeout(op, d));
	exanest_send_sent(op, 4096, 4096, d);
	d = exanest_send_deadline(op);
	ev("put.timeout3", exanest_send_timeout(op, d));
	exanest_send_sent(op, 4096, 4096, d);
	ev("put.timeout4", exanest_send_timeout(op, exanest_send_deadline(op)));
	printf("put.acked %llu %lld\n", (unsigned long long)exanest_send_acked(op),
	       (long long)exanest_send_deadline(op));

	p.kind = EXANEST_SEND_GET;
	exanest_send_start(op, 9000, &p);
	printf("get.sent1 %llu\n", (unsigned long long)exanest_send_sent(op, 0, 4096, 0));
	printf("get.sent2 %llu\n", (unsigned long long)exanest_send_sent(op, 4096, 4096, 0));
	printf("get.act %u %u %u\n", exanest_send_data_act(op, 0, 4096),
	       exanest_send_data_act(op, 4096, 4096), exanest_send_data_act(op, 100, 50));
	ev("get.gap", exanest_send_data(op, 4096, 0, 4096, 0, 1));
	peek("get.peek1", op);
	ev("get.data", exanest_send_data(op, 0, 100, 4096, 0, 2));
	printf("get.acked %llu %lld\n", (unsigned long long)exanest_send_acked(op),
	       (long long)exanest_send_deadline(op));
	/* A page found unmapped before it is asked for: no timer until RESUME. */
	exanest_send_start(op, 9000, &p);
	exanest_send_sent(op, 0, 4096, 0);
	ev("get.whole", exanest_send_data(op, 0, 4096, 4096, 0, 2));
	printf("get.armed %lld\n", (long long)exanest_send_deadline(op));
	exanest_send_local_fault(op);
	printf("get.local %llu %lld\n", (unsigned long long)exanest_send_acked(op),
	       (long long)exanest_send_deadline(op));

	/* Three blocks timed, measured, retimed; the tail lost, probed. */
	ExanestRttTable *t = exanest_rtt_new();
	uint64_t rto = 0, pto = 0, srtt;

	p.kind = EXANEST_SEND_PUT;
	p.window = 3 * 4096;
	exanest_send_start(op, 3 * 4096, &p);
	for (int i = 0; i < 3; i++) {
		printf("tlp.seq%d %u", i, exanest_send_seq(op));
		printf(" %llu\n", (unsigned long long)exanest_send_sent(op, i * 4096ull, 4096, 10 + i));
	}
	ev("tlp.ack", exanest_send_ack(op, 4096, 0, 0, 30));
	ev("tlp.ack-stale", exanest_send_ack(op, 4096, 0, 0, 31));
	exanest_rtt_sample(t, 3, 20000);
	exanest_rtt_sample(t, 3, 24000);
	srtt = exanest_rtt_timeouts(t, 3, 10, 1000000, &rto, &pto);
	printf("rtt.3 %llu %llu %llu\n", (unsigned long long)srtt, (unsigned long long)rto,
	       (unsigned long long)pto);
	srtt = exanest_rtt_timeouts(t, 4, 10, 1000000, &rto, &pto);
	printf("rtt.4 %llu %llu %llu\n", (unsigned long long)srtt, (unsigned long long)rto,
	       (unsigned long long)pto);
	exanest_send_retime(op, 200, 40, 31);
	ev("tlp.ack2", exanest_send_ack(op, 8192, 0, 1, 32));
	d = exanest_send_deadline(op);
	printf("tlp.deadline %lld\n", (long long)d);
	ev("tlp.probe", exanest_send_timeout(op, d));
	peek("tlp.peek", op);
	printf("tlp.seq3 %u", exanest_send_seq(op));
	printf(" %llu\n", (unsigned long long)exanest_send_sent(op, 8192, 4096, d));
	e = exanest_send_ack(op, 12288, 0, 2, d + 5);
	ev("tlp.late", e);
	printf("tlp.verdict %u\n", e.probe_verdict);
	exanest_rtt_probe_judged(t, 3, true);
	srtt = exanest_rtt_timeouts(t, 3, 10, 1000000, &rto, &pto);
	printf("rtt.spurious %llu %llu %llu\n", (unsigned long long)srtt,
	       (unsigned long long)rto, (unsigned long long)pto);
	exanest_rtt_clear(t);
	srtt = exanest_rtt_timeouts(t, 3, 10, 1000000, &rto, &pto);
	printf("rtt.clear %llu %llu %llu\n", (unsigned long long)srtt, (unsigned long long)rto,
	       (unsigned long long)pto);
	exanest_rtt_free(t);
	exanest_rtt_free(NULL);
	exanest_send_free(op);
	exanest_send_free(NULL);
}
"#;

/// The C side of the receive scenario: a WRITE placed, then faulting, reported, held,
/// probed and resumed; a forged key; a MAILBOX into a full ring, woken, then with no context;
/// a READ_REQ refused, then served until a fault the driver refuses; a reset.
const RECV_SCENARIO: &str = r#"
static void st(const char *name, ExanestRxStep e)
{
	printf("%s %u %u %llu %llu %u %d %d %u %u %u %u %u %llu %llu %llu %llu %d %u\n",
	       name, e.what, e.slot, (unsigned long long)e.from,
	       (unsigned long long)e.to, e.counts, e.reply, e.counted, e.answer.op,
	       e.answer.src, e.answer.dst, e.answer.ep, e.answer.op_id,
	       (unsigned long long)e.answer.rkey, (unsigned long long)e.answer.addr,
	       (unsigned long long)e.answer.len, (unsigned long long)e.answer.offset,
	       e.answer.status, e.answer.seq);
}

static void slot(const char *name, ExanestRecvTable *t, uint32_t i)
{
	ExanestRxSlot r = { 0 };
	bool ok = exanest_rx_slot(t, i, &r);

	printf("%s %d %u %u %u %u %u %d %u %llu %llu %llu %llu %llu\n", name, ok,
	       r.state, r.kind, r.op_id, r.ep, r.holder, r.err, r.src,
	       (unsigned long long)r.rkey, (unsigned long long)r.addr,
	       (unsigned long long)r.len, (unsigned long long)r.placed,
	       (unsigned long long)r.fault_addr);
}

static void recv_scenario(void)
{
	static ExanestRkey keys[4];
	static const uint8_t pay[10];
	ExanestRecvTable *t = exanest_rx_new(9);
	ExanestPkt k = { .op = EXANEST_PKT_WRITE, .src = 1, .dst = 9, .ep = 7,
			 .op_id = 10, .seq = 3, .rkey = 0xabcd00000003ull,
			 .addr = 0x10000, .len = 8192, .plen = 4096 };
	ExanestPkt m = { .op = EXANEST_PKT_MAILBOX, .src = 2, .dst = 9, .ep = 7,
			 .op_id = 1, .rkey = 5, .len = 10, .plen = 10,
			 .payload = pay };
	ExanestPkt r = { .op = EXANEST_PKT_READ_REQ, .src = 3, .dst = 9, .ep = 7,
			 .op_id = 4, .seq = 8, .status = 65536,
			 .rkey = 0xabcd00000003ull, .addr = 0x10000, .len = 16384,
			 .offset = 4096 };
	const uint32_t rdy = EXANEST_RX_EP_READY;
	const uint32_t owner = EXANEST_RX_EP_OPEN | EXANEST_RX_MBOX_OWNED;
	ExanestRxStep e;
	bool held;

	keys[3] = (ExanestRkey) { .ctrl = 1 | 4, .ep = 7,
				  .key = 0xabcd00000003ull, .base = 0x10000,
				  .len = 1 << 20 };
	e = exanest_rx_packet(t, &k, keys, 4, rdy, 100, 1000);
	st("rx.write", e);
	st("rx.placed", exanest_rx_placed(t, e.slot, &k, 4096, false, 0));
	k.offset = 4096;
	k.seq = 4;
	e = exanest_rx_packet(t, &k, keys, 4, rdy, 101, 1000);
	st("rx.write2", e);
	st("rx.fault", exanest_rx_placed(t, e.slot, &k, 100, true, 0x11064));
	held = exanest_rx_hold(t, e.slot, 5);
	printf("rx.hold %d %d\n", held, exanest_rx_hold(t, e.slot, 6));
	slot("rx.slot", t, e.slot);
	slot("rx.slot-past", t, 64);
	k.plen = 0;
	k.seq = 5;
	st("rx.probe", exanest_rx_packet(t, &k, keys, 4, rdy, 102, 1000));
	st("rx.resolved-other", exanest_rx_resolved(t, e.slot, 6));
	st("rx.resolved", exanest_rx_resolved(t, e.slot, 5));
	k.rkey = 0xabce00000003ull;
	st("rx.badkey", exanest_rx_packet(t, &k, keys, 4, rdy, 103, 1000));
	st("rx.mbox-rnr", exanest_rx_packet(t, &m, NULL, 0,
					    owner | rdy | EXANEST_RX_MBOX_ON, 104,
					    1000));
	slot("rx.mbox-slot", t, 1);
	st("rx.wake", exanest_rx_wake(t, 1));
	st("rx.mbox-none", exanest_rx_packet(t, &m, NULL, 0, owner, 105, 1000));
	st("rx.close", exanest_rx_close(t, 1, 7));
	st("rx.mbox-closed", exanest_rx_packet(t, &m, NULL, 0, 0, 105, 1000));
	st("rx.read-no-right", exanest_rx_packet(t, &r, keys, 4, rdy, 106, 1000));
	keys[3].ctrl |= 2;
	e = exanest_rx_packet(t, &r, keys, 4, rdy, 107, 1000);
	st("rx.read", e);
	st("rx.served", exanest_rx_served(t, e.slot, &r, 8192, true, 0x12000));
	printf("rx.hold2 %d\n", exanest_rx_hold(t, e.slot, 7));
	exanest_rx_release(t, e.slot, 7);
	printf("rx.hold3 %d\n", exanest_rx_hold(t, e.slot, 8));
	st("rx.refused", exanest_rx_refused(t, e.slot, 8, -12));
	st("rx.read-again", exanest_rx_packet(t, &r, keys, 4, rdy, 108, 1000));
	exanest_rx_set_read_cap(t, 4096);
	printf("rx.reading %llu\n", (unsigned long long)exanest_rx_reading(t, r.src));
	r.op_id += 100;
	st("rx.read-capped", exanest_rx_packet(t, &r, keys, 4, rdy, 108, 1000));
	r.op_id -= 100;
	exanest_rx_read_sent(t, r.src, 1ull << 40);
	printf("rx.read-sent %llu\n", (unsigned long long)exanest_rx_reading(t, r.src));
	exanest_rx_set_keyfail_limit(t, 1);
	r.src = 4;
	r.rkey = 1;
	st("rx.guess1", exanest_rx_packet(t, &r, keys, 4, rdy, 109, 1000));
	st("rx.guess2", exanest_rx_packet(t, &r, keys, 4, rdy, 110, 1000));
	st("rx.guess3", exanest_rx_packet(t, &r, keys, 4, rdy, 111, 1000));
	printf("rx.guard %u %u %llu\n", exanest_rx_keyfail_limit(t),
	       exanest_rx_keyfails(t, 4),
	       (unsigned long long)exanest_rx_quarantined(t));
	exanest_rx_release_nodes(t, 1ull << 4);
	printf("rx.released %u %llu %u\n", exanest_rx_keyfails(t, 4),
	       (unsigned long long)exanest_rx_quarantined(t),
	       exanest_rx_keyfails(t, 1000000));
	exanest_rx_reset(t);
	slot("rx.reset", t, 0);
	printf("rx.reset-limit %u\n", exanest_rx_keyfail_limit(t));
	exanest_rx_set_acks(t, 2, 1000);
	k = (ExanestPkt) { .op = EXANEST_PKT_WRITE, .src = 1, .dst = 9, .ep = 7,
			   .op_id = 50, .seq = 1, .rkey = 0xabcd00000003ull,
			   .addr = 0x10000, .len = 8192, .plen = 4096 };
	e = exanest_rx_packet(t, &k, keys, 4, rdy, 200, 1000);
	st("rx.coalesced", exanest_rx_placed(t, e.slot, &k, 4096, false, 0));
	{
		uint64_t due = 0;
		ExanestPkt a = { 0 };
		bool owed = exanest_rx_ack_due(t, &due);

		printf("rx.ack-due %d %llu\n", owed, (unsigned long long)due);
		printf("rx.flush-early %d\n", exanest_rx_flush_ack(t, 1199, &a));
		owed = exanest_rx_flush_ack(t, 1200, &a);
		printf("rx.flush %d %u %u %u %llu %d %u\n", owed, a.op, a.dst,
		       a.op_id, (unsigned long long)a.offset, a.status, a.seq);
		printf("rx.flush-again %d\n", exanest_rx_flush_ack(t, 1200, &a));
	}
	st("rx.ahead", exanest_rx_fault_ahead(t, e.slot, true, 7, 0x11000, 9));
	st("rx.ahead-again", exanest_rx_fault_ahead(t, e.slot, false, 0, 0x11000,
						    10));
	st("rx.ahead-resolved", exanest_rx_resolved(t, e.slot, 9));
	exanest_rx_free(t);
	exanest_rx_free(NULL);
}
"#;

/// A step as `st()` prints it.
fn st(e: ExanestRxStep) -> String {
    let a = e.answer;
    format!(
        "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
        e.what,
        e.slot,
        e.from,
        e.to,
        e.counts,
        u8::from(e.reply),
        u8::from(e.counted),
        a.op,
        a.src,
        a.dst,
        a.ep,
        a.op_id,
        a.rkey,
        a.addr,
        a.len,
        a.offset,
        a.status,
        a.seq
    )
}

/// A slot as `slot()` prints it.
fn slot(t: &RecvTable, i: usize) -> String {
    let r = t.slot(i).map(slot_of);
    let ok = r.is_some();
    let r = r.unwrap_or_default();
    format!(
        "{} {} {} {} {} {} {} {} {} {} {} {} {}",
        u8::from(ok),
        r.state,
        r.kind,
        r.op_id,
        r.ep,
        r.holder,
        r.err,
        r.src,
        r.rkey,
        r.addr,
        r.len,
        r.placed,
        r.fault_addr
    )
}

/// The scenario of `RECV_SCENARIO`, run on the core directly.
fn recv_expected() -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut keys = [Rkey::default(); 4];
    keys[3] = Rkey {
        ctrl: RKEY_VALID | RKEY_WRITE,
        ep: 7,
        key: 0xabcd_0000_0003,
        base: 0x10000,
        len: 1 << 20,
        node: 0,
    };
    let mut t = RecvTable::new(9);
    let mut k = Header {
        op: Op::Write,
        src: 1,
        dst: 9,
        endpoint: 7,
        op_id: 10,
        seq: 3,
        status: 0,
        rkey: 0xabcd_0000_0003,
        addr: 0x10000,
        len: 8192,
        offset: 0,
        span: 0,
        ce: false,
    };
    let m = Header {
        op: Op::Mailbox,
        src: 2,
        op_id: 1,
        seq: 0,
        rkey: 5,
        addr: 0,
        len: 10,
        ..k
    };
    let r = Header {
        op: Op::ReadReq,
        src: 3,
        op_id: 4,
        seq: 8,
        status: 65536,
        len: 16384,
        offset: 4096,
        ..k
    };
    let owner = ep::OPEN | ep::MBOX_OWNED;
    let rdy = ep::READY;
    let mut push = |name: &'static str, s: &Step| -> ExanestRxStep {
        let e = step_of(s);
        out.push((name, st(e)));
        e
    };
    let e = push("rx.write", &t.on_packet(&k, 4096, &keys, rdy, 100, 1000));
    let i = e.slot as usize;
    push("rx.placed", &t.placed(i, &k, 4096, None));
    k.offset = 4096;
    k.seq = 4;
    push("rx.write2", &t.on_packet(&k, 4096, &keys, rdy, 101, 1000));
    push("rx.fault", &t.placed(i, &k, 100, Some(0x11064)));
    let held = (t.hold(i, 5), t.hold(i, 6));
    let mut lines = vec![(
        "rx.hold",
        format!("{} {}", u8::from(held.0), u8::from(held.1)),
    )];
    lines.push(("rx.slot", slot(&t, i)));
    lines.push(("rx.slot-past", slot(&t, 64)));
    k.seq = 5;
    push("rx.probe", &t.on_packet(&k, 0, &keys, rdy, 102, 1000));
    push("rx.resolved-other", &t.resolved(i, 6));
    push("rx.resolved", &t.resolved(i, 5));
    k.rkey = 0xabce_0000_0003;
    push("rx.badkey", &t.on_packet(&k, 0, &keys, rdy, 103, 1000));
    push(
        "rx.mbox-rnr",
        &t.on_packet(&m, 10, &[], owner | rdy | ep::MBOX_ON, 104, 1000),
    );
    lines.push(("rx.mbox-slot", slot(&t, 1)));
    push("rx.wake", &t.wake(1));
    push("rx.mbox-none", &t.on_packet(&m, 10, &[], owner, 105, 1000));
    push("rx.close", &t.close(1, 7));
    push("rx.mbox-closed", &t.on_packet(&m, 10, &[], 0, 105, 1000));
    push(
        "rx.read-no-right",
        &t.on_packet(&r, 0, &keys, rdy, 106, 1000),
    );
    keys[3].ctrl |= RKEY_READ;
    let e = push("rx.read", &t.on_packet(&r, 0, &keys, rdy, 107, 1000));
    let j = e.slot as usize;
    push("rx.served", &t.served(j, &r, 8192, Some(0x12000)));
    lines.push(("rx.hold2", u8::from(t.hold(j, 7)).to_string()));
    t.release(j, 7);
    lines.push(("rx.hold3", u8::from(t.hold(j, 8)).to_string()));
    push("rx.refused", &t.refused(j, 8, -12));
    push("rx.read-again", &t.on_packet(&r, 0, &keys, rdy, 108, 1000));
    t.set_read_cap(4096);
    lines.push(("rx.reading", t.reading(r.src).to_string()));
    let capped = Header {
        op_id: r.op_id + 100,
        ..r
    };
    push(
        "rx.read-capped",
        &t.on_packet(&capped, 0, &keys, rdy, 108, 1000),
    );
    t.read_sent(r.src, 1 << 40);
    lines.push(("rx.read-sent", t.reading(r.src).to_string()));
    t.set_keyfail_limit(1);
    let g = Header {
        src: 4,
        rkey: 1,
        ..r
    };
    push("rx.guess1", &t.on_packet(&g, 0, &keys, rdy, 109, 1000));
    push("rx.guess2", &t.on_packet(&g, 0, &keys, rdy, 110, 1000));
    push("rx.guess3", &t.on_packet(&g, 0, &keys, rdy, 111, 1000));
    lines.push((
        "rx.guard",
        format!(
            "{} {} {}",
            t.keyfail_limit(),
            t.keyfails(4),
            t.quarantined()
        ),
    ));
    t.release_nodes(1 << 4);
    lines.push((
        "rx.released",
        format!("{} {} 0", t.keyfails(4), t.quarantined()),
    ));
    t.reset();
    lines.push(("rx.reset", slot(&t, 0)));
    lines.push(("rx.reset-limit", t.keyfail_limit().to_string()));
    t.set_acks(2, 1000);
    let w = Header {
        op: Op::Write,
        src: 1,
        dst: 9,
        endpoint: 7,
        op_id: 50,
        seq: 1,
        status: 0,
        rkey: 0xabcd_0000_0003,
        addr: 0x10000,
        len: 8192,
        offset: 0,
        span: 0,
        ce: false,
    };
    let e = step_of(&t.on_packet(&w, 4096, &keys, rdy, 200, 1000));
    let c = step_of(&t.placed(e.slot as usize, &w, 4096, None));
    lines.push(("rx.coalesced", st(c)));
    let due = t.ack_due();
    lines.push((
        "rx.ack-due",
        format!("{} {}", u8::from(due.is_some()), due.unwrap_or(0)),
    ));
    lines.push((
        "rx.flush-early",
        u8::from(t.flush_ack(1199).is_some()).to_string(),
    ));
    let a = t.flush_ack(1200).map(|r| r.header);
    lines.push((
        "rx.flush",
        a.map_or("0".into(), |a| {
            format!(
                "1 {} {} {} {} {} {}",
                a.op.code(),
                a.dst,
                a.op_id,
                a.offset,
                a.status,
                a.seq
            )
        }),
    ));
    lines.push((
        "rx.flush-again",
        u8::from(t.flush_ack(1200).is_some()).to_string(),
    ));
    let i = e.slot as usize;
    let ahead = |s: Option<Step>| st(step_of(&s.unwrap_or_default()));
    lines.push(("rx.ahead", ahead(t.fault_ahead(i, Some(7), 0x11000, 9))));
    lines.push(("rx.ahead-again", ahead(t.fault_ahead(i, None, 0x11000, 10))));
    lines.push(("rx.ahead-resolved", st(step_of(&t.resolved(i, 9)))));
    out.extend(lines);
    out
}

/// The program: layout and constants, then a packet encoded through the header's prototypes,
/// decoded back, and a damaged copy's verdict.
fn program() -> String {
    let mut c =
        String::from("#include <stdio.h>\n#include <string.h>\n#include \"exanest_core.h\"\n");
    c += SEND_SCENARIO;
    c += RECV_SCENARIO;
    c += "\
         int main(void)\n{\n\
         \tstatic uint8_t pkt[EXANEST_PKT_HDR + EXANEST_PKT_MTU], pay[100];\n\
         \tExanestPkt k = { 0 }, d;\n\tint32_t r;\n\n";
    for l in layouts() {
        let t = l.c_type;
        for (f, _) in &l.fields {
            c += &format!("\tprintf(\"{t}.{f} %zu\\n\", offsetof({t}, {f}));\n");
        }
        c += &format!("\tprintf(\"{t}.sizeof %zu\\n\", sizeof({t}));\n");
    }
    c += "\tsend_scenario();\n\trecv_scenario();\n";
    for (name, _) in CONSTANTS {
        c += &format!("\tprintf(\"{name} %lld\\n\", (long long){name});\n");
    }
    c += "\tfor (int i = 0; i < 100; i++)\n\t\tpay[i] = (uint8_t)(i * 7);\n\
          \tk.op = EXANEST_PKT_WRITE; k.src = 1; k.dst = 2; k.ep = 0x01020304; k.op_id = 77;\n\
          \tk.seq = 5; k.status = 0; k.rkey = 0xdeadbeef00000003ull; k.addr = 0x7f0012345000ull;\n\
          \tk.len = 3 * EXANEST_PKT_MTU; k.offset = EXANEST_PKT_MTU; k.plen = 100; k.payload = pay;\n\
          \tk.span = 0xbeef; k.ce = 1;\n\
          \tr = exanest_pkt_encode(&k, pkt);\n\
          \tprintf(\"encode %d\\n\", r);\n\
          \tmemcpy(pkt + EXANEST_PKT_HDR, pay, 100);\n\
          \tprintf(\"bytes\");\n\
          \tfor (int i = 0; i < EXANEST_PKT_HDR + 100; i++)\n\t\tprintf(\" %02x\", pkt[i]);\n\
          \tprintf(\"\\n\");\n\
          \tr = exanest_pkt_decode(pkt, EXANEST_PKT_HDR + 100, &d);\n\
          \tprintf(\"decode %d %u %u %u %u %u %u %d %llu %llu %llu %llu %u %u %u %d\\n\", r, d.op,\n\
          \t       d.src, d.dst, d.ep, d.op_id, d.seq, d.status, (unsigned long long)d.rkey,\n\
          \t       (unsigned long long)d.addr, (unsigned long long)d.len,\n\
          \t       (unsigned long long)d.offset, d.plen, d.span, d.ce,\n\
          \t       d.payload == pkt + EXANEST_PKT_HDR);\n\
          \tpkt[EXANEST_PKT_HDR + 50] ^= 4;\n\
          \tprintf(\"damaged %d\\n\", exanest_pkt_decode(pkt, EXANEST_PKT_HDR + 100, &d));\n\
          \tk.op = EXANEST_PKT_ACK;\n\
          \tprintf(\"ack-with-payload %d\\n\", exanest_pkt_encode(&k, pkt));\n\
          \tprintf(\"nack-valid %d %d %d\\n\", exanest_nack_valid(EXANEST_NACK_RNR),\n\
          \t       exanest_nack_valid(-14), exanest_nack_valid(9));\n\
          \tExanestRttTable *t = exanest_rtt_new();\n\
          \tuint64_t w0 = exanest_rtt_window(t, 3, false, 65536);\n\
          \tuint64_t full = exanest_rtt_grant(t, 3, false, 65536, 65536 - 4096, 4096, 4096);\n\
          \tbool cut = exanest_rtt_ack(t, 3, false, 65536, 4096, true);\n\
          \tprintf(\"cap %llu\\n\", (unsigned long long)exanest_cc_cap(65536, 2000, 5000));\n\
          \tprintf(\"cc %llu %llu %d %llu %llu %llu %llu\\n\", (unsigned long long)w0,\n\
          \t       (unsigned long long)full, cut,\n\
          \t       (unsigned long long)exanest_rtt_window(t, 3, false, 65536),\n\
          \t       (unsigned long long)exanest_rtt_grant(t, 3, false, 65536, 32768, 4096, 4096),\n\
          \t       (unsigned long long)exanest_rtt_grant(t, 3, false, 65536, 0, 4096, 4096),\n\
          \t       (unsigned long long)exanest_rtt_grant(t, 3, true, 65536, 4096, 32768, 4096));\n\
          \texanest_rtt_free(t);\n\
          \treturn 0;\n}\n";
    c
}

fn run_c(dir: &Path) -> Vec<(String, String)> {
    let src = dir.join("abi.c");
    let exe = dir.join("abi");
    std::fs::write(&src, program()).unwrap();
    let inc = Path::new(HEADER_FILE).parent().unwrap();
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(inc)
        .arg(&src)
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("run the host C compiler (cc)");
    assert!(
        out.status.success(),
        "the header does not compile or link:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap_or((l, ""));
            (a.to_string(), b.to_string())
        })
        .collect()
}

fn get<'a>(out: &'a [(String, String)], key: &str) -> &'a str {
    &out.iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("C printed no {key}"))
        .1
}

fn ev(e: SendEvent, s: &mut SendOp, before: (u32, u32, u32, u32, u32)) -> String {
    let (what, status, offset) = match e {
        SendEvent::None => (0, 0, 0),
        SendEvent::Completed(st) => (1, st, 0),
        SendEvent::Probe(o) => (2, 0, o),
        SendEvent::LocalFault => (3, 0, 0),
    };
    format!(
        "{what} {status} {offset} {} {} {} {} {} {}",
        s.nacks - before.0,
        s.resumes - before.1,
        s.needed - before.2,
        s.probes - before.3,
        s.tail_probes - before.4,
        s.take_rtt_sample().map_or(0, |r| r.max(1))
    )
}

fn counters(s: &SendOp) -> (u32, u32, u32, u32, u32) {
    (s.nacks, s.resumes, s.needed, s.probes, s.tail_probes)
}

fn peek(s: &SendOp) -> String {
    match s.peek() {
        Some((o, n)) => format!("1 {o} {n}"),
        None => "0 0 0".into(),
    }
}

/// The scenario of `SEND_SCENARIO`, run on the core directly.
fn send_expected() -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut p = SendParams {
        kind: Kind::Put,
        mtu: 4096,
        window: 8192,
        rto_ns: 100,
        max_rto_ns: 400,
        max_retries: 2,
        reorder_ns: 50,
        pto_ns: 0,
        first_alone: false,
        unheard_ns: 0,
    };
    let mut s = SendOp::new(10000, p);
    macro_rules! event {
        ($name:expr, $call:expr) => {{
            let b = counters(&s);
            let e = $call;
            out.push(($name, ev(e, &mut s, b)));
        }};
    }
    out.push(("put.peek1", peek(&s)));
    let a = s.on_sent(0, 4096, 0);
    out.push(("put.sent1", format!("{a} {}", s.take_seq())));
    let a = s.on_sent(4096, 4096, 1);
    out.push(("put.sent2", format!("{a} {}", s.take_seq())));
    out.push(("put.peek2", peek(&s)));
    out.push(("put.flight1", s.in_flight().to_string()));
    event!("put.ack", s.on_ack(4096, 0, 0, 2));
    out.push(("put.flight2", s.in_flight().to_string()));
    event!("put.nack", s.on_nack(4096, Nack::Fault, 1, 3));
    s.on_withdrawn(6000);
    out.push(("put.paused", format!("1 {}", s.in_flight())));
    let d = s.deadline().unwrap();
    out.push(("put.deadline", d.to_string()));
    event!("put.timeout1", s.on_timeout(d));
    out.push(("put.probe", s.take_seq().to_string()));
    event!("put.answer", s.on_nack(4096, Nack::Fault, 2, d + 1));
    out.push(("put.bogus", "0 0 0 0 0 0 0 0 0".into()));
    event!("put.resume", s.on_resume(4096, 1, d + 2));
    event!("put.dup-resume", s.on_resume(4096, 1, d + 2));
    out.push(("put.peek3", peek(&s)));
    out.push(("put.sent3", s.on_sent(4096, 4096, d + 3).to_string()));
    s.postpone(d + 50);
    let d = s.deadline().unwrap();
    out.push(("put.deadline2", d.to_string()));
    event!("put.timeout2", s.on_timeout(d));
    s.on_sent(4096, 4096, d);
    let d = s.deadline().unwrap();
    event!("put.timeout3", s.on_timeout(d));
    s.on_sent(4096, 4096, d);
    event!("put.timeout4", s.on_timeout(s.deadline().unwrap()));
    out.push((
        "put.acked",
        format!("{} {}", s.acked(), s.deadline().map_or(-1, |d| d as i64)),
    ));
    p.kind = Kind::Get;
    s = SendOp::new(9000, p);
    out.push(("get.sent1", s.on_sent(0, 4096, 0).to_string()));
    out.push(("get.sent2", s.on_sent(4096, 4096, 0).to_string()));
    let code = |a| match a {
        DataAct::Drop => 0,
        DataAct::Place => 1,
        DataAct::PlaceAhead => 2,
    };
    out.push((
        "get.act",
        format!(
            "{} {} {}",
            code(s.data_act(0, 4096)),
            code(s.data_act(4096, 4096)),
            code(s.data_act(100, 50))
        ),
    ));
    event!("get.gap", s.on_data(4096, 0, 4096, 1));
    out.push(("get.peek1", peek(&s)));
    event!("get.data", s.on_data(0, 100, 4096, 2));
    out.push((
        "get.acked",
        format!("{} {}", s.acked(), s.deadline().map_or(-1, |d| d as i64)),
    ));
    s = SendOp::new(9000, p);
    s.on_sent(0, 4096, 0);
    event!("get.whole", s.on_data(0, 4096, 4096, 2));
    out.push((
        "get.armed",
        s.deadline().map_or(-1, |d| d as i64).to_string(),
    ));
    s.local_fault();
    out.push((
        "get.local",
        format!("{} {}", s.acked(), s.deadline().map_or(-1, |d| d as i64)),
    ));
    let mut t = RttTable::new();
    p.kind = Kind::Put;
    p.window = 3 * 4096;
    s = SendOp::new(3 * 4096, p);
    for i in 0..3u64 {
        let q = s.take_seq();
        let a = s.on_sent(i * 4096, 4096, 10 + i);
        out.push((
            ["tlp.seq0", "tlp.seq1", "tlp.seq2"][i as usize],
            format!("{q} {a}"),
        ));
    }
    event!("tlp.ack", s.on_ack(4096, 0, 0, 30));
    event!("tlp.ack-stale", s.on_ack(4096, 0, 0, 31));
    t.sample(3, 20_000);
    t.sample(3, 24_000);
    let srtt = |t: &RttTable, n| t.get(n).and_then(|r| r.srtt()).unwrap_or(0);
    let (rto, pto) = t.timeouts(3, 10, 1_000_000);
    out.push(("rtt.3", format!("{} {rto} {pto}", srtt(&t, 3))));
    let (rto, pto) = t.timeouts(4, 10, 1_000_000);
    out.push(("rtt.4", format!("{} {rto} {pto}", srtt(&t, 4))));
    s.retime(200, 40, 31);
    event!("tlp.ack2", s.on_ack(8192, 0, 1, 32));
    let d = s.deadline().unwrap();
    out.push(("tlp.deadline", d.to_string()));
    event!("tlp.probe", s.on_timeout(d));
    out.push(("tlp.peek", peek(&s)));
    let q = s.take_seq();
    let a = s.on_sent(8192, 4096, d);
    out.push(("tlp.seq3", format!("{q} {a}")));
    let before = counters(&s);
    let e = s.on_ack(12288, 0, 2, d + 5);
    let v = s.take_probe_verdict();
    out.push(("tlp.late", ev(e, &mut s, before)));
    out.push((
        "tlp.verdict",
        v.map_or(0, |v| if v { 1 } else { 2 }).to_string(),
    ));
    t.probe_judged(3, true);
    let (rto, pto) = t.timeouts(3, 10, 1_000_000);
    out.push(("rtt.spurious", format!("{} {rto} {pto}", srtt(&t, 3))));
    t.clear();
    let (rto, pto) = t.timeouts(3, 10, 1_000_000);
    out.push(("rtt.clear", format!("{} {rto} {pto}", srtt(&t, 3))));
    out
}

#[test]
fn header_matches_the_library() {
    let dir = std::env::temp_dir().join(format!("exanest-c-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = run_c(&dir);
    std::fs::remove_dir_all(&dir).ok();

    for l in layouts() {
        for (f, o) in &l.fields {
            let k = format!("{}.{f}", l.c_type);
            assert_eq!(get(&out, &k), o.to_string(), "{k}");
        }
        let k = format!("{}.sizeof", l.c_type);
        assert_eq!(get(&out, &k), l.size.to_string(), "{k}");
    }
    for (name, v) in CONSTANTS {
        assert_eq!(get(&out, name), v.to_string(), "{name}");
    }

    // Every constant the header defines is one the library states.
    let text = std::fs::read_to_string(HEADER_FILE).unwrap();
    let defined: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "EXANEST_CORE_H")
        .collect();
    let stated: BTreeSet<&str> = CONSTANTS.iter().map(|(n, _)| *n).collect();
    assert_eq!(defined, stated);

    // The packet C built through the library is the core's encoding, and decodes back.
    let payload: Vec<u8> = (0..100u32).map(|i| (i * 7) as u8).collect();
    let h = Header {
        op: Op::Write,
        src: 1,
        dst: 2,
        endpoint: 0x0102_0304,
        op_id: 77,
        seq: 5,
        status: 0,
        rkey: 0xdead_beef_0000_0003,
        addr: 0x7f00_1234_5000,
        len: 3 * 4096,
        offset: 4096,
        span: 0xbeef,
        ce: true,
    };
    let mut want = h.encode(&payload).unwrap().to_vec();
    want.extend_from_slice(&payload);
    let hex: Vec<String> = want.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(get(&out, "encode"), "0");
    assert_eq!(get(&out, "bytes"), hex.join(" "));
    assert_eq!(get(&out, "bytes").len(), 3 * (HEADER + 100) - 1);
    assert_eq!(
        get(&out, "decode"),
        format!(
            "0 {} {} {} {} {} {} {} {} {} {} {} 100 {} 1 1",
            Op::Write.code(),
            h.src,
            h.dst,
            h.endpoint,
            h.op_id,
            h.seq,
            h.status,
            h.rkey,
            h.addr,
            h.len,
            h.offset,
            h.span
        )
    );
    assert_eq!(get(&out, "damaged"), "-6");
    // The peer's window through the header: at the cap, a mark halves it, nothing in flight
    // always admits a packet.
    assert_eq!(get(&out, "cc"), "65536 4096 1 32768 0 4096 32768");
    assert_eq!(get(&out, "cap"), "20000");
    assert_eq!(get(&out, "ack-with-payload"), "-1");
    assert_eq!(get(&out, "nack-valid"), "1 1 0");

    // The receiving side, through the header, is the core's RecvTable, and the scenario goes
    // where it means to.
    for (k, v) in &recv_expected() {
        assert_eq!(get(&out, k), v, "{k}");
    }
    let field = |k: &str, n: usize| get(&out, k).split(' ').nth(n).unwrap().to_string();
    assert_eq!(field("rx.write", 0), "1", "PLACE");
    assert_eq!(field("rx.fault", 0), "3", "REPORT");
    assert_eq!(
        (field("rx.fault", 7), field("rx.fault", 15)),
        ("5".into(), "4196".into()),
        "NACK at the fault"
    );
    assert_eq!(get(&out, "rx.hold"), "1 0");
    assert_eq!(field("rx.probe", 6), "0", "a probe's answer is not counted");
    assert_eq!(
        field("rx.resolved-other", 5),
        "0",
        "only the holder answers"
    );
    assert_eq!(
        (field("rx.resolved", 7), field("rx.resolved", 17)),
        ("6".into(), "4".into()),
        "RESUME echoes the packet NACKed"
    );
    assert_eq!(field("rx.badkey", 16), "-126");
    assert_eq!(field("rx.mbox-rnr", 4), "4", "RNR");
    assert_eq!(field("rx.mbox-none", 4), "8", "WANT_EP");
    assert_eq!(field("rx.close", 16), "-111", "closed: ECONNREFUSED");
    assert_eq!(field("rx.mbox-closed", 16), "-111");
    assert_eq!(field("rx.read-no-right", 16), "-126");
    assert_eq!(
        (field("rx.read", 2), field("rx.read", 3)),
        ("4096".into(), "16384".into())
    );
    assert_eq!(field("rx.refused", 16), "-12");
    assert_eq!(field("rx.read-again", 16), "-12");
    assert_eq!(
        get(&out, "rx.reading"),
        "4096",
        "served before the fault, waiting"
    );
    assert_eq!(field("rx.read-capped", 4), "4", "RNR: past the read cap");
    assert_eq!(get(&out, "rx.read-sent"), "0");
    assert_eq!(field("rx.reset", 1), "0");
    assert_eq!(field("rx.guess1", 4), "16", "KEY_FAIL");
    assert_eq!(field("rx.guess2", 4), "48", "KEY_FAIL | QUARANTINE");
    assert_eq!(field("rx.guess3", 4), "65", "DROPPED | QUARANTINED");
    assert_eq!(get(&out, "rx.guard"), "1 2 16");
    assert_eq!(get(&out, "rx.released"), "0 0 0");
    assert_eq!(get(&out, "rx.reset-limit"), "256");
    // Coalesced ACKs: the first packet's is owed, due 1000 ns after it came, sent once.
    assert_eq!(field("rx.coalesced", 5), "0", "no answer yet");
    assert_eq!(get(&out, "rx.ack-due"), "1 1200");
    assert_eq!(get(&out, "rx.flush-early"), "0");
    assert_eq!(get(&out, "rx.flush"), "1 4 1 50 4096 0 1");
    assert_eq!(get(&out, "rx.flush-again"), "0");
    // A page ahead: NACK AHEAD from it, echoing packet 7; one at a time; its RESUME.
    assert_eq!(
        (field("rx.ahead", 5), field("rx.ahead", 7)),
        ("1".into(), "5".into())
    );
    assert_eq!(
        (
            field("rx.ahead", 15),
            field("rx.ahead", 16),
            field("rx.ahead", 17)
        ),
        ("4096".into(), "5".into(), "7".into())
    );
    assert_eq!(field("rx.ahead-again", 5), "0", "not taken");
    assert_eq!(
        (
            field("rx.ahead-resolved", 7),
            field("rx.ahead-resolved", 15)
        ),
        ("6".into(), "4096".into())
    );

    // The sending side, through the header, is the core's SendOp.
    let expected = send_expected();
    for (k, v) in &expected {
        assert_eq!(get(&out, k), v, "{k}");
    }
    // The scenario goes where it means to: paused, probed, resumed, given up on; a GET's block
    // past a gap left to the tolerance and its local fault reported.
    assert_eq!(get(&out, "put.timeout1"), "2 0 4096 0 0 0 1 0 0");
    assert_eq!(get(&out, "put.probe"), "2");
    assert_eq!(get(&out, "put.resume"), "0 0 0 0 1 0 0 0 0");
    assert_eq!(get(&out, "put.dup-resume"), "0 0 0 0 0 0 0 0 0", "stale");
    // Given up on: the three timeouts, unjudged until then, were needed.
    assert_eq!(get(&out, "put.timeout4"), "1 110 0 0 0 3 0 0 0");
    assert_eq!(get(&out, "get.act"), "1 2 0");
    // A whole block past the gap, not placed here: left to the reordering tolerance.
    assert_eq!(get(&out, "get.peek1"), "0 0 0");
    assert_eq!(get(&out, "get.data"), "3 0 0 0 0 0 0 0 0");
    // Its own fault found before asking: the timer that the data armed stops.
    assert_ne!(get(&out, "get.armed"), "-1");
    assert_eq!(get(&out, "get.local"), "4096 -1");
    // Timed, measured (the ACK echoing packet 0, 20 ns after it left), retimed, probed: the
    // tail goes again, its probe 40 ns and the reordering tolerance (50) after the last news.
    assert_eq!(get(&out, "tlp.ack"), "0 0 0 0 0 0 0 0 20");
    assert_eq!(get(&out, "tlp.ack-stale"), "0 0 0 0 0 0 0 0 0");
    // SRTT 20000 - 2500 + 3000; RTTVAR 10000 - 2500 + 1000; RTO SRTT + 4 RTTVAR; PTO 2 SRTT.
    assert_eq!(get(&out, "rtt.3"), "20500 54500 41000");
    assert_eq!(get(&out, "rtt.4"), "0 10 0");
    assert_eq!(get(&out, "tlp.deadline"), "122");
    assert_eq!(get(&out, "tlp.probe"), "0 0 0 0 0 0 0 1 0");
    assert_eq!(get(&out, "tlp.peek"), "1 8192 4096");
    // The ACK that ends the op answers the tail's first copy (2), not the probe's (3): the
    // probe was spurious, and the peer's probe timeout doubles.
    assert_eq!(get(&out, "tlp.late"), "1 0 0 0 0 0 0 0 0");
    assert_eq!(get(&out, "tlp.verdict"), "1");
    assert_eq!(get(&out, "rtt.spurious"), "20500 54500 0");
    assert_eq!(get(&out, "rtt.clear"), "0 10 0");
    assert!(Nack::from_status(-14).is_some());
}
