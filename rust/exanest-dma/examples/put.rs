// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! A put into another node's never-touched memory (ABI 4): `put [BYTES]`. The guest's two
//! engines are two nodes cabled back to back; here one program holds a buffer on node 1 that
//! other nodes may write, and puts into it from node 0's user-level queue. The receiving
//! engine NACKs each first write of a page, node 1's driver resolves the fault and the engine
//! RESUMEs the writer. Then it gets the bytes back into memory node 0 never touched.
//! (examples/put.c does the same from two processes.)
use exanest_dma::{Device, Mode, QueueCompletion};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let size: usize = std::env::args().nth(1).map_or(Ok(4 << 20), |s| s.parse())?;
    let node1 = Device::open(1)?;
    // Zeroed by the allocator's fresh mmap: no page exists until the engine writes it.
    let region = node1.register_remote(vec![0u8; size], Mode::OnDemand)?;
    let to = region.target();

    let node0 = Device::open(0)?;
    let data: Vec<u8> = (0..size).map(|i| (i * 13 % 251) as u8).collect();
    let src = node0.register(data, Mode::OnDemand)?;
    let mut q = node0.create_queue(4, 4)?;
    q.put(src.addr(), size.try_into()?, &to, 0, 7)?;
    let mut c = [QueueCompletion::default(); 1];
    while q.poll(&mut c) == 0 {
        q.wait(None)?;
    }
    let k = node1.counters()?;
    // And back, into memory node 0's side never touched.
    let dst = node0.register_mut(vec![0u8; size], Mode::OnDemand)?;
    // SAFETY: `dst` is a writable region; nothing reads it before the completion.
    unsafe { q.get(dst.addr(), size.try_into()?, &to, 0, 8)? };
    let mut g = [QueueCompletion::default(); 1];
    while q.poll(&mut g) == 0 {
        q.wait(None)?;
    }
    let back_same = g[0].status == 0 && dst.as_slice() == src.as_slice();
    // The key revoked, the inbox is the program's to read in place.
    let inbox = region.into_inner()?;
    let same = c[0].status == 0 && inbox == src.as_slice();
    println!(
        "put {} bytes to node {} endpoint {}: status {}, {} receiver faults NACKed and resolved, data {}",
        c[0].bytes,
        to.node,
        to.endpoint,
        c[0].status,
        k.faults_resolved,
        if same { "verified" } else { "DIFFERS" }
    );
    println!(
        "got {} bytes back: status {}, data {}",
        g[0].bytes,
        g[0].status,
        if back_same { "verified" } else { "DIFFERS" }
    );
    drop(dst);
    std::process::exit(if same && back_same { 0 } else { 1 });
}
