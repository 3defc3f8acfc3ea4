// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `tests/qemu-model/exanest_core.h` must describe this library as the model links it: a C
//! program built with the host's C compiler from the header alone, linked against the static
//! library, prints the layouts, constants and packets it sees, and they must be Rust's.

use exanest_core::packet::{Header, Nack, Op, HEADER};
use exanest_model::{ExanestPkt, CONSTANTS};
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

const FIELDS: &[&str] = &[
    "op", "src", "dst", "ep", "op_id", "seq", "status", "rkey", "addr", "len", "offset", "plen",
    "payload",
];

fn rust_layout() -> Vec<(String, usize)> {
    let offs = [
        offset_of!(ExanestPkt, op),
        offset_of!(ExanestPkt, src),
        offset_of!(ExanestPkt, dst),
        offset_of!(ExanestPkt, ep),
        offset_of!(ExanestPkt, op_id),
        offset_of!(ExanestPkt, seq),
        offset_of!(ExanestPkt, status),
        offset_of!(ExanestPkt, rkey),
        offset_of!(ExanestPkt, addr),
        offset_of!(ExanestPkt, len),
        offset_of!(ExanestPkt, offset),
        offset_of!(ExanestPkt, plen),
        offset_of!(ExanestPkt, payload),
    ];
    let mut v: Vec<(String, usize)> = FIELDS
        .iter()
        .zip(offs)
        .map(|(f, o)| (format!("offsetof.{f}"), o))
        .collect();
    v.push(("sizeof".into(), size_of::<ExanestPkt>()));
    v
}

/// The program: layout and constants, then a packet encoded through the header's prototypes,
/// decoded back, and a damaged copy's verdict.
fn program() -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <string.h>\n#include \"exanest_core.h\"\n\
         int main(void)\n{\n\
         \tstatic uint8_t pkt[EXANEST_PKT_HDR + EXANEST_PKT_MTU], pay[100];\n\
         \tExanestPkt k = { 0 }, d;\n\tint32_t r;\n\n",
    );
    for f in FIELDS {
        c += &format!("\tprintf(\"offsetof.{f} %zu\\n\", offsetof(ExanestPkt, {f}));\n");
    }
    c += "\tprintf(\"sizeof %zu\\n\", sizeof(ExanestPkt));\n";
    for (name, _) in CONSTANTS {
        c += &format!("\tprintf(\"{name} %lld\\n\", (long long){name});\n");
    }
    c += "\tfor (int i = 0; i < 100; i++)\n\t\tpay[i] = (uint8_t)(i * 7);\n\
          \tk.op = EXANEST_PKT_WRITE; k.src = 1; k.dst = 2; k.ep = 0x01020304; k.op_id = 77;\n\
          \tk.seq = 5; k.status = 0; k.rkey = 0xdeadbeef00000003ull; k.addr = 0x7f0012345000ull;\n\
          \tk.len = 3 * EXANEST_PKT_MTU; k.offset = EXANEST_PKT_MTU; k.plen = 100; k.payload = pay;\n\
          \tr = exanest_pkt_encode(&k, pkt);\n\
          \tprintf(\"encode %d\\n\", r);\n\
          \tmemcpy(pkt + EXANEST_PKT_HDR, pay, 100);\n\
          \tprintf(\"bytes\");\n\
          \tfor (int i = 0; i < EXANEST_PKT_HDR + 100; i++)\n\t\tprintf(\" %02x\", pkt[i]);\n\
          \tprintf(\"\\n\");\n\
          \tr = exanest_pkt_decode(pkt, EXANEST_PKT_HDR + 100, &d);\n\
          \tprintf(\"decode %d %u %u %u %u %u %u %d %llu %llu %llu %llu %u %d\\n\", r, d.op, d.src,\n\
          \t       d.dst, d.ep, d.op_id, d.seq, d.status, (unsigned long long)d.rkey,\n\
          \t       (unsigned long long)d.addr, (unsigned long long)d.len,\n\
          \t       (unsigned long long)d.offset, d.plen, d.payload == pkt + EXANEST_PKT_HDR);\n\
          \tpkt[EXANEST_PKT_HDR + 50] ^= 4;\n\
          \tprintf(\"damaged %d\\n\", exanest_pkt_decode(pkt, EXANEST_PKT_HDR + 100, &d));\n\
          \tk.op = EXANEST_PKT_ACK;\n\
          \tprintf(\"ack-with-payload %d\\n\", exanest_pkt_encode(&k, pkt));\n\
          \tprintf(\"nack-valid %d %d %d\\n\", exanest_nack_valid(EXANEST_NACK_RNR),\n\
          \t       exanest_nack_valid(-14), exanest_nack_valid(9));\n\
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

#[test]
fn header_matches_the_library() {
    let dir = std::env::temp_dir().join(format!("exanest-c-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = run_c(&dir);
    std::fs::remove_dir_all(&dir).ok();

    for (k, v) in rust_layout() {
        assert_eq!(get(&out, &k), v.to_string(), "{k}");
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
            "0 {} {} {} {} {} {} {} {} {} {} {} 100 1",
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
            h.offset
        )
    );
    assert_eq!(get(&out, "damaged"), "-6");
    assert_eq!(get(&out, "ack-with-payload"), "-1");
    assert_eq!(get(&out, "nack-valid"), "1 1 0");
    assert!(Nack::from_status(-14).is_some());
}
