// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `exanest-replay`: replay a node's recorded link through the core and compare its answers
//! with the node's ([`exanest_model::replay`]).
//!
//! ```text
//! exanest-replay --node N [--key KEY,BASE,LEN,EP,CTRL ...] [--ep EP,FLAGS ...] FILE.pcap
//! ```
//!
//! Numbers in decimal or 0x hex; FLAGS are `exanest_core::netrx::ep`'s. Prints what it
//! replayed; exits 1 at the first difference (printed), 2 on bad arguments or a file it
//! cannot replay.

use exanest_core::netrx::Rkey;
use exanest_model::replay::{replay, Node};
use std::process::exit;

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn nums(s: &str, n: usize) -> Option<Vec<u64>> {
    let v: Option<Vec<u64>> = s.split(',').map(num).collect();
    v.filter(|v| v.len() == n)
}

fn usage(why: &str) -> ! {
    eprintln!("exanest-replay: {why}");
    eprintln!("usage: exanest-replay --node N [--key KEY,BASE,LEN,EP,CTRL ...] [--ep EP,FLAGS ...] FILE.pcap");
    exit(2)
}

fn main() {
    let mut node = Node {
        node: 0,
        keys: Vec::new(),
        eps: Vec::new(),
    };
    let (mut file, mut have_node) = (None, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--node" => {
                node.node = val().parse().unwrap_or_else(|_| usage("--node: a node id"));
                have_node = true;
            }
            "--key" => {
                let v = nums(&val(), 5).unwrap_or_else(|| usage("--key KEY,BASE,LEN,EP,CTRL"));
                node.keys.push(Rkey {
                    key: v[0],
                    base: v[1],
                    len: v[2],
                    ep: v[3] as u32,
                    ctrl: v[4] as u32,
                    node: 0,
                });
            }
            "--ep" => {
                let v = nums(&val(), 2).unwrap_or_else(|| usage("--ep EP,FLAGS"));
                node.eps.push((v[0] as u32, v[1] as u32));
            }
            f if !f.starts_with("--") && file.is_none() => file = Some(f.to_string()),
            _ => usage(&format!("unknown argument {a}")),
        }
    }
    let (Some(file), true) = (file, have_node) else {
        usage("a file and --node are needed")
    };
    let bytes = std::fs::read(&file).unwrap_or_else(|e| usage(&format!("{file}: {e}")));
    let r = replay(&bytes, &node).unwrap_or_else(|e| {
        eprintln!("exanest-replay: {file}: {e}");
        exit(2)
    });
    println!(
        "{file}: {} packets to node {} replayed ({} damaged on the way), {} answers, {} bytes served",
        r.requests,
        node.node,
        r.undecodable,
        r.recorded.len(),
        r.served.0
    );
    if let Some(d) = r.difference() {
        println!("DIFFERENT: {d}");
        exit(1);
    }
    println!("every answer the node sent is the core's");
}
