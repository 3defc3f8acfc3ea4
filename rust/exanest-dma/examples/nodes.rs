// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Two nodes, two kernels (`make demo`'s second part, tests/guest/demo-nodes.sh): a put of
//! SIZE bytes into malloc'd memory a process on another node never touched, and a get back.
//!
//! `nodes serve SIZE` (node 1) prints `address: NODE ENDPOINT`, the one thing the other side
//! learns out of band, then waits for a hello in its mailbox. It answers with the key of SIZE
//! bytes it never touched, waits for "done", checks every byte, and answers with what its side
//! saw. `nodes send NODE ENDPOINT SIZE` (node 0) says hello, takes the key from its own
//! mailbox, puts, gets the bytes back into memory it never touched, says done and prints both
//! sides. Each first write of a page faults in node 1's SMMU: node 1's engine NACKs it, node
//! 1's kernel resolves the fault, its engine RESUMEs the writer, which retransmits.
use exanest_dma::{Device, Message, Mode, Queue, QueueCompletion, Remote};
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The next message of `q`'s mailbox, within `secs`: asleep until it comes (ABI 7).
fn recv(q: &mut Queue, secs: u64) -> Res<Message> {
    q.recv_wait(Some(Duration::from_secs(secs)))
        .map_err(|e| format!("no message within {secs} s: {e}").into())
}

fn complete(q: &mut Queue) -> Res<QueueCompletion> {
    let mut c = [QueueCompletion::default(); 1];
    while q.poll(&mut c) == 0 {
        q.wait(Some(Duration::from_secs(30)))?;
    }
    Ok(c[0])
}

/// Send `bytes` to (node, endpoint) and wait for the send's completion: its status.
fn say(dev: &Device, q: &mut Queue, bytes: &[u8], node: u32, ep: u32) -> Res<i32> {
    let r = dev.register(bytes.to_vec(), Mode::OnDemand)?;
    q.send(r.addr(), r.len().try_into()?, node, ep, 0)?;
    Ok(complete(q)?.status)
}

fn pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 13 % 251) as u8).collect()
}

fn serve(size: usize) -> Res<bool> {
    let dev = Device::open(0)?;
    let mut q = dev.create_queue(4, 4)?;
    q.create_mailbox(4)?;
    let me = dev.info()?;
    println!("address: {} {}", me.node, me.endpoint);
    let hello = recv(&mut q, 300)?;
    println!(
        "node {}: hello from node {} endpoint {}: \"{}\"",
        me.node,
        hello.node,
        hello.endpoint,
        String::from_utf8_lossy(hello.data())
    );
    // Zeroed by the allocator's fresh mmap: no page exists until the engine writes it.
    let region = dev.register_remote(vec![0u8; size], Mode::OnDemand)?;
    let st = say(
        &dev,
        &mut q,
        &region.target().to_bytes(),
        hello.node,
        hello.endpoint,
    )?;
    let done = recv(&mut q, 300)?;
    let k = dev.counters()?;
    // The key revoked, the inbox is the program's to read in place.
    let inbox = region.into_inner()?;
    let ok = st == 0 && done.data() == b"done" && inbox == pattern(size);
    let report = format!(
        "node {}: {} receiver faults NACKed and resolved, {} pages resolved, data {}",
        me.node,
        k.faults_resolved,
        k.pages_resolved,
        if ok { "verified" } else { "DIFFERS" }
    );
    println!("{report}");
    say(&dev, &mut q, report.as_bytes(), done.node, done.endpoint)?;
    Ok(ok)
}

fn send(node: u32, ep: u32, size: usize) -> Res<bool> {
    let dev = Device::open(0)?;
    let mut q = dev.create_queue(4, 4)?;
    q.create_mailbox(4)?;
    let me = dev.info()?;
    let st = say(&dev, &mut q, b"hello, a put is coming", node, ep)?;
    let key = recv(&mut q, 60)?;
    let to = Remote::from_bytes(key.data()).ok_or("a short key")?;
    println!(
        "node {}: key from node {} endpoint {}: {} bytes at {:#x}, rkey {:#x}",
        me.node, key.node, key.endpoint, to.len, to.addr, to.rkey
    );
    let data = pattern(size);
    let src = dev.register(data, Mode::OnDemand)?;
    q.put(src.addr(), size.try_into()?, &to, 0, 1)?;
    let put = complete(&mut q)?;
    let dst = dev.register_mut(vec![0u8; size], Mode::OnDemand)?;
    // SAFETY: `dst` is a writable region; nothing reads it before the completion.
    unsafe { q.get(dst.addr(), size.try_into()?, &to, 0, 2)? };
    let get = complete(&mut q)?;
    let back_ok = get.status == 0 && dst.as_slice() == src.as_slice();
    let own = dev.counters()?.faults_resolved;
    drop(dst);
    let st_done = say(&dev, &mut q, b"done", key.node, key.endpoint)?;
    let theirs = recv(&mut q, 60)?;
    println!(
        "node {}: put {} bytes to node {}: status {}; got them back into memory never touched: \
         status {}, {} faults of its own resolved, data {}",
        me.node,
        put.bytes,
        to.node,
        put.status,
        get.status,
        own,
        if back_ok { "verified" } else { "DIFFERS" }
    );
    println!("{}", String::from_utf8_lossy(theirs.data()));
    let ok = st == 0 && put.status == 0 && back_ok && st_done == 0;
    if ok && theirs.data().ends_with(b"data verified") {
        println!("put {size} bytes to another node and got them back, data verified on both");
        return Ok(true);
    }
    Ok(false)
}

fn main() -> Res<()> {
    let a: Vec<String> = std::env::args().collect();
    let ok = match a.get(1).map(String::as_str) {
        Some("serve") => serve(a.get(2).map_or(Ok(8 << 20), |s| s.parse())?)?,
        Some("send") if a.len() >= 4 => send(
            a[2].parse()?,
            a[3].parse()?,
            a.get(4).map_or(Ok(8 << 20), |s| s.parse())?,
        )?,
        _ => return Err("usage: nodes serve [SIZE] | nodes send NODE ENDPOINT [SIZE]".into()),
    };
    std::process::exit(if ok { 0 } else { 1 });
}
