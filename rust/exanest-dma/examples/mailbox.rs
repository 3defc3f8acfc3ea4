// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Exchanging a remote key through the mailbox (ABI 5): `mailbox [BYTES]`. The guest's two
//! engines are two nodes cabled back to back; A holds a file on node 0, B one on node 1, each
//! with a queue and a mailbox. All A knows of B at first is its node and endpoint (what a job
//! launcher would hand out). A says hello; the message names A's node and endpoint, so B can
//! answer: with the key of a buffer it never touched. A puts BYTES into it with immediate data
//! (register map 2.6): B's mailbox gets the put's completion after its last byte, and B checks
//! every byte. Messages go through the rings with no system call; a reader with nothing
//! to read sleeps until a message comes (`Queue::recv_wait`).
use exanest_dma::{Device, Message, Mode, Queue, QueueCompletion, Remote};
use std::time::Duration;

/// The next message of `q`'s mailbox, within 10 s: asleep until it comes (ABI 7).
fn recv(q: &mut Queue) -> Result<Message, Box<dyn std::error::Error>> {
    q.recv_wait(Some(Duration::from_secs(10)))
        .map_err(|e| format!("no message within 10 s: {e}").into())
}

/// The next completion of `q`: its status.
fn complete(q: &mut Queue) -> Result<i32, Box<dyn std::error::Error>> {
    let mut c = [QueueCompletion::default(); 1];
    while q.poll(&mut c) == 0 {
        q.wait(Some(Duration::from_secs(10)))?;
    }
    Ok(c[0].status)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let size: usize = std::env::args().nth(1).map_or(Ok(1 << 20), |s| s.parse())?;
    let (a, b) = (Device::open(0)?, Device::open(1)?);
    let (mut qa, mut qb) = (a.create_queue(4, 4)?, b.create_queue(4, 4)?);
    qa.create_mailbox(4)?;
    qb.create_mailbox(4)?;
    let bi = b.info()?;

    // A: hello, to the one address it knows.
    let hello = b"hello, I have data for you".to_vec();
    let h = a.register(hello.clone(), Mode::OnDemand)?;
    qa.send(h.addr(), hello.len().try_into()?, bi.node, bi.endpoint, 1)?;
    let st = complete(&mut qa)?;
    // B: the hello says who sent it; answer with the key of memory never touched.
    let m = recv(&mut qb)?;
    let region = b.register_remote(vec![0u8; size], Mode::OnDemand)?;
    let key = region.target().to_bytes();
    let k = b.register(key.to_vec(), Mode::OnDemand)?;
    qb.send(k.addr(), key.len().try_into()?, m.node, m.endpoint, 2)?;
    let st_b = complete(&mut qb)?;
    // A: the key; a put with immediate data, whose completion tells B it landed.
    let reply = recv(&mut qa)?;
    let to = Remote::from_bytes(reply.data()).ok_or("a short key")?;
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 253) as u8).collect();
    let src = a.register(data, Mode::OnDemand)?;
    qa.put_imm(src.addr(), size.try_into()?, &to, 0, 0xd09e, 3)?;
    let st_put = complete(&mut qa)?;
    // B: the put's completion, after its last byte; check.
    let fin = recv(&mut qb)?;
    let put = fin.put().ok_or("a message, not the put's completion")?;
    let faults = b.counters()?.faults_resolved;
    let ok = [st, st_b, st_put] == [0; 3]
        && m.data() == &hello[..]
        && put.imm == 0xd09e
        && put.addr == to.addr
        && put.len == size as u64
        && region.into_inner()? == src.as_slice();
    println!(
        "mailbox: A (node {} endpoint {}) said hello to B (node {} endpoint {}); B answered \
         with its key; A put {} bytes into memory B never touched ({} faults resolved on B's \
         side, its ring's included), with immediate data: B's mailbox had the put's \
         completion (immediate {:#x}, {} bytes at {:#x}); statuses {} {} {}; data {}",
        m.node,
        m.endpoint,
        bi.node,
        bi.endpoint,
        size,
        faults,
        put.imm,
        put.len,
        put.addr,
        st,
        st_b,
        st_put,
        if ok { "verified" } else { "DIFFERS" }
    );
    drop((h, k, src));
    std::process::exit(if ok { 0 } else { 1 });
}
