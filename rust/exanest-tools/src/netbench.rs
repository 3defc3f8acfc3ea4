// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! `exanest-bench net`: remote puts and gets between the guest's two engines, cabled back to
//! back (node 0 writes, node 1 receives; Documentation/network.rst). One process holds both
//! sides, which changes nothing on the wire. Every time is CLOCK_MONOTONIC (`Instant`) in the
//! guest: under `make evaluate`'s `-icount`, virtual time, so the link's modelled latency and
//! bandwidth are what it measures. Node 0's port counters come from the library
//! ([`Device::net_counters`]).
//!
//! - `net`: put and get latency (post to completion, busy polling) and throughput, warm, into a
//!   receiver region that is pinned, prefaulted, or on demand and already faulted in;
//! - `net-cold`: a put into memory the receiver never touched, against a warm put plus the
//!   receiver's CPU time to populate the same pages, and the bytes retransmitted. The sender
//!   sleeps for its completion ([`Queue::wait`]): both nodes are one guest here, whose vCPUs
//!   share one virtual clock under `-icount` (QEMU runs them in turn), so a busy-polling sender
//!   would take the time of the receiver's kernel that a second machine would not lose. The
//!   same put with the sender busy polling is printed beside it (`cold_poll_us`), and the
//!   receiver's side of the cold put stage by stage (its engine's fault log, `receiver_log`);
//! - `net-many`: 1 and 8 processes on node 0, each putting to its own process on node 1,
//!   first into memory the receiver never touched, then warm ([`net_many`]);
//! - `net-small-cold`: many small puts back to back, each into a page the receiver never
//!   touched (the scenario of Fukuoka, Sato and Taura's "Pitfalls of InfiniBand with On-Demand
//!   Paging"): p50, p99 and the worst latency, and the timeouts (there should be none);
//! - `net-loss`: put throughput, warm, with 0, 0.1 % and 1 % of the packets both engines send
//!   dropped (debugfs `link`): the bytes sent again and the timeouts that recovered them; then,
//!   at each loss rate, 64-byte puts one at a time (`net-loss-small`): p50, p99 and the worst
//!   latency, where a lost packet (or its ACK) costs its recovery, a tail-loss probe or a
//!   timeout;
//! - `net-mailbox`: 64-byte mailbox messages, one at a time (send to completion, and send to
//!   the receiver reading it) and kept 8 deep (messages per second);
//! - `net-pingpong`: 8-byte mailbox messages back and forth between two threads, each with its
//!   own file (so its own context) on its own node: the round trip with both busy polling
//!   their rings, and with both asleep in `Queue::recv_wait` (ABI 7) until a message comes;
//! - `net-incast`: eight engines put into never-touched memory of one (`make evaluate` boots
//!   nine on the hub): the aggregate, Jain's index, the timeouts ([`net_incast`]).

use super::{p50_p99, pipe, poll_one, reap, spawn, together, Buf, Gang, Res};
use exanest_dma::{Device, Message, Mode, Queue, QueueCompletion, Remote};
use std::time::{Duration, Instant};

/// How much a port counter grew from `a` to `b` (the engine's are 32 bits, and wrap).
fn grew(a: u64, b: u64) -> u64 {
    b.wrapping_sub(a) & u64::from(u32::MAX)
}

/// `len` bytes of a pattern, registered pinned on `dev` for the engine to read (or write).
fn pinned(dev: &Device, len: usize, access: exanest_dma::Access, seed: u8) -> Res<(Buf, u32)> {
    let mut b = Buf::new(len, false)?;
    b.fill(seed);
    // SAFETY: The caller keeps `b` until it deregisters the region; the engine reaches it only
    // within ops polled to completion.
    let h = unsafe { dev.register_raw(b.addr(), len as u64, access, Mode::Pin)? };
    Ok((b, h))
}

/// One remote op, posted and busy-polled: its time in µs (an error for a failed op).
fn one(q: &mut Queue, put: bool, local: u64, len: usize, to: &Remote) -> Res<f64> {
    one_with(q, put, local, len, to, false)
}

/// [`one`], sleeping in [`Queue::wait`] for the completion when `sleep` (the CPU is then
/// free for other work) instead of busy polling.
fn one_with(
    q: &mut Queue,
    put: bool,
    local: u64,
    len: usize,
    to: &Remote,
    sleep: bool,
) -> Res<f64> {
    let mut c = [QueueCompletion::default(); 1];
    let t = Instant::now();
    if put {
        q.put(local, len as u32, to, 0, 1)?;
    } else {
        // SAFETY: `local` is a writable region of node 0 that nothing reads meanwhile.
        unsafe { q.get(local, len as u32, to, 0, 2)? };
    }
    if sleep {
        while q.poll(&mut c) == 0 {
            q.wait(Some(std::time::Duration::from_secs(10)))?;
        }
    } else {
        poll_one(q, &mut c)?;
    }
    let us = t.elapsed().as_secs_f64() * 1e6;
    if c[0].status != 0 || c[0].bytes as usize != len {
        return Err(format!("remote op: status {} bytes {}", c[0].status, c[0].bytes).into());
    }
    Ok(us)
}

/// Warm put and get latency and throughput, per receiver mode and size (median of `reps`).
pub(crate) fn net(reps: usize, max: usize) -> Res<()> {
    let (n0, n1) = (Device::open(0)?, Device::open(1)?);
    let mut q = n0.create_queue(4, 4)?;
    let (src, hs) = pinned(&n0, max, exanest_dma::Access::Read, 3)?;
    let (dst, hd) = pinned(&n0, max, exanest_dma::Access::Write, 0)?;
    let sizes: Vec<usize> = [64usize, 4096, 65536, 1 << 20, 16 << 20, 64 << 20]
        .into_iter()
        .filter(|&s| s <= max)
        .collect();
    for mode in Mode::ALL {
        let r = n1.register_remote(vec![0u8; max], mode)?;
        let to = r.target();
        // Warm: every page of the receiver's region is faulted in first.
        one(&mut q, true, src.addr(), max, &to)?;
        for &size in &sizes {
            for put in [true, false] {
                let local = if put { src.addr() } else { dst.addr() };
                let mut t = Vec::with_capacity(reps);
                for _ in 0..reps {
                    t.push(one(&mut q, put, local, size, &to)?);
                }
                let (p50, _) = p50_p99(&mut t);
                println!(
                    "{{\"bench\":\"net\",\"op\":\"{}\",\"mode\":\"{}\",\"size\":{size},\"reps\":{reps},\"p50_us\":{p50:.2},\"mb_per_s\":{:.1}}}",
                    if put { "put" } else { "get" },
                    mode,
                    size as f64 / p50
                );
            }
        }
        drop(r);
    }
    n0.deregister(hs)?;
    n0.deregister(hd)?;
    Ok(())
}

/// Touch every page of `n` fresh bytes, as a receiver's CPU would populate them: its time, µs.
fn populate(n: usize, thp: bool) -> Res<f64> {
    let b = Buf::new(n, thp)?;
    let t = Instant::now();
    for off in (0..n).step_by(4096) {
        // SAFETY: Inside our mapping of `n` bytes.
        unsafe { b.ptr.add(off).write_volatile(1) };
    }
    Ok(t.elapsed().as_secs_f64() * 1e6)
}

/// `size` bytes of fresh memory, registered on demand on `dev` for remote writes; in
/// transparent huge pages when `thp` (else never).
fn cold_inbox(dev: &Device, size: usize, thp: bool) -> Res<exanest_dma::RemoteRegion<'_, Buf>> {
    Ok(dev.register_remote(Buf::new(size, thp)?, Mode::OnDemand)?)
}

/// A put into never-touched memory against a warm put plus populating the same pages; the
/// sender sleeps for each completion (see the module's documentation), then busy polls for a
/// second cold put.
pub(crate) fn net_cold(size: usize) -> Res<()> {
    let (n0, n1) = (Device::open(0)?, Device::open(1)?);
    let mut q = n0.create_queue(4, 4)?;
    let (src, hs) = pinned(&n0, size, exanest_dma::Access::Read, 5)?;
    let pop = populate(size, false)?;
    let r = cold_inbox(&n1, size, false)?;
    let to = r.target();
    let p0 = n0.net_counters()?;
    // The receiver's side: its engine's fault log over the cold put.
    let log = "/sys/kernel/debug/exanest-dma1/faults";
    for cmd in ["on", "clear"] {
        std::fs::write(log, cmd).map_err(|e| format!("{log}: {cmd}: {e}"))?;
    }
    let cold = one_with(&mut q, true, src.addr(), size, &to, true)?;
    let receiver_log = std::fs::read_to_string(log)?;
    let p1 = n0.net_counters()?;
    let (re, tmo, nk, pr) = (
        grew(p0.retransmitted_bytes, p1.retransmitted_bytes),
        grew(p0.timeouts, p1.timeouts),
        grew(p0.nacks_received, p1.nacks_received),
        grew(p0.probes, p1.probes),
    );
    let warm = one_with(&mut q, true, src.addr(), size, &to, true)?;
    let faults = n1.counters()?.faults_resolved;
    let ok = r.into_inner()?.slice() == src.slice();
    let r2 = cold_inbox(&n1, size, false)?;
    let cold_poll = one(&mut q, true, src.addr(), size, &r2.target())?;
    let ok = ok && r2.into_inner()?.slice() == src.slice();
    n0.deregister(hs)?;
    println!(
        "{{\"bench\":\"net-cold\",\"size\":{size},\"cold_us\":{cold:.1},\"warm_us\":{warm:.1},\"populate_us\":{pop:.1},\"ratio\":{:.3},\"cold_poll_us\":{cold_poll:.1},\"receiver_faults\":{faults},\"nacks\":{nk},\"retransmitted_bytes\":{re},\"retransmitted_share\":{:.4},\"timeouts\":{tmo},\"probes\":{pr},\"verified\":{ok},\"receiver_log\":{}}}",
        cold / (warm + pop),
        re as f64 / size as f64,
        receiver_log.trim()
    );
    Ok(())
}

/// A count in debugfs `engine`'s JSON of device `dev` (`"name": N`), or 0.
fn engine_field(dev: u32, name: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/sys/kernel/debug/exanest-dma{dev}/engine"))
        .unwrap_or_default();
    let key = format!("\"{name}\": ");
    text.find(&key)
        .and_then(|i| {
            let rest = &text[i + key.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .unwrap_or(0)
}

/// Incast: the guest's engines 0 and 2..=`senders` (one node each, on one hub: `make
/// evaluate` boots nine) each put `size` bytes at once into one region of node 1 that its
/// process never touched (on demand: every page faults at the receiver). One thread per
/// sender, each asleep in [`Queue::wait`] until its put completes; they start together. The
/// aggregate (all bytes over the slowest), Jain's fairness index over the senders'
/// throughputs, the receiver's faults, and what the senders resent and timed out; the time the
/// receiver's CPU takes to populate as many fresh pages; then the same puts again into the
/// region now warm (the link's share alone); the receiving port's congestion counters over
/// both (debugfs `cc`: marks, drops at its ingress queue).
pub(crate) fn net_incast(senders: usize, size: usize) -> Res<()> {
    let idx: Vec<u32> = std::iter::once(0).chain(2..=senders as u32).collect();
    let devs = idx
        .iter()
        .map(|&i| Device::open(i))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("incast needs engines 0-{senders} (ENGINES=9): {e}"))?;
    let n1 = Device::open(1)?;
    let mut srcs = Vec::new();
    let mut queues = Vec::new();
    for (k, d) in devs.iter().enumerate() {
        srcs.push(pinned(d, size, exanest_dma::Access::Read, 11 + k as u8)?);
        queues.push(d.create_queue(4, 4)?);
    }
    let c0 = counters_of(&devs)?;
    let (marks0, drops0) = (
        engine_field(1, "ce_marked"),
        engine_field(1, "ingress_drops"),
    );
    let faults0 = n1.counters()?.faults_resolved;
    let pop = populate(senders * size, false)?;
    let inbox = cold_inbox(&n1, senders * size, false)?;
    let to = inbox.target();
    let cold = incast_round(&mut queues, &srcs, &to, size)?;
    let faults = n1.counters()?.faults_resolved - faults0;
    let (mut resent, mut timeouts, mut nacks) = (0, 0, 0);
    for (d, a) in devs.iter().zip(&c0) {
        let b = d.net_counters()?;
        resent += grew(a.retransmitted_bytes, b.retransmitted_bytes);
        timeouts += grew(a.timeouts, b.timeouts);
        nacks += grew(a.nacks_received, b.nacks_received);
    }
    // The same puts again, into the region now faulted in: the link's share alone.
    let t0 = counters_of(&devs)?;
    let warm = incast_round(&mut queues, &srcs, &to, size)?;
    let warm_timeouts = timeouts_since(&devs, &t0)?;
    // Marks and drops at node 1's ingress queue, both rounds.
    let marks = grew(marks0, engine_field(1, "ce_marked"));
    let drops = grew(drops0, engine_field(1, "ingress_drops"));
    let got = inbox.into_inner()?;
    let same = |got: &Buf| {
        srcs.iter()
            .enumerate()
            .all(|(k, (src, _))| got.slice()[k * size..(k + 1) * size] == *src.slice())
    };
    let ok = same(&got);
    // The same cold puts into memory backed by transparent huge pages: the receiver's CPU
    // populates 2 MiB at a fault instead of 4 KiB (and the fault maps it as one IOMMU block).
    // With 4 KiB pages, populating is what bounds a cold incast here.
    let thp_pop = populate(senders * size, true)?;
    let thp_inbox = cold_inbox(&n1, senders * size, true)?;
    let (h0, thp_faults0) = (counters_of(&devs)?, n1.counters()?.faults_resolved);
    let thp = incast_round(&mut queues, &srcs, &thp_inbox.target(), size)?;
    let thp_faults = n1.counters()?.faults_resolved - thp_faults0;
    let thp_timeouts = timeouts_since(&devs, &h0)?;
    let thp_ok = same(&thp_inbox.into_inner()?);
    for (d, (_, h)) in devs.iter().zip(&srcs) {
        d.deregister(*h)?;
    }
    let (cold_agg, cold_jain, cold_slowest) = shares(&cold, size);
    let (warm_agg, warm_jain, _) = shares(&warm, size);
    let (thp_agg, thp_jain, _) = shares(&thp, size);
    println!(
        "{{\"bench\":\"net-incast\",\"senders\":{senders},\"size\":{size},\"aggregate_mb_per_s\":{cold_agg:.1},\"jain\":{cold_jain:.4},\"slowest_us\":{cold_slowest:.1},\"populate_us\":{pop:.1},\"warm_aggregate_mb_per_s\":{warm_agg:.1},\"warm_jain\":{warm_jain:.4},\"warm_timeouts\":{warm_timeouts},\"receiver_faults\":{faults},\"nacks\":{nacks},\"retransmitted_bytes\":{resent},\"retransmitted_share\":{:.4},\"timeouts\":{timeouts},\"ce_marked\":{marks},\"ingress_drops\":{drops},\"verified\":{ok},\"thp_aggregate_mb_per_s\":{thp_agg:.1},\"thp_jain\":{thp_jain:.4},\"thp_populate_us\":{thp_pop:.1},\"thp_receiver_faults\":{thp_faults},\"thp_timeouts\":{thp_timeouts},\"thp_verified\":{thp_ok}}}",
        resent as f64 / (senders * size) as f64
    );
    Ok(())
}

/// Each engine's network counters now.
fn counters_of(devs: &[Device]) -> Res<Vec<exanest_dma::NetCounters>> {
    Ok(devs
        .iter()
        .map(|d| d.net_counters())
        .collect::<Result<_, _>>()?)
}

/// The timeouts the engines counted since `before` ([`counters_of`]).
fn timeouts_since(devs: &[Device], before: &[exanest_dma::NetCounters]) -> Res<u64> {
    let mut n = 0;
    for (d, a) in devs.iter().zip(before) {
        n += grew(a.timeouts, d.net_counters()?.timeouts);
    }
    Ok(n)
}

/// From each sender's time (µs) for `size` bytes: the aggregate (MB/s: all the bytes over the
/// slowest), Jain's index over their throughputs, the slowest.
fn shares(us: &[f64], size: usize) -> (f64, f64, f64) {
    let slowest = us.iter().copied().fold(0.0, f64::max);
    let rates: Vec<f64> = us.iter().map(|t| size as f64 / t).collect();
    let sum: f64 = rates.iter().sum();
    let jain = sum * sum / (rates.len() as f64 * rates.iter().map(|r| r * r).sum::<f64>());
    ((us.len() * size) as f64 / slowest, jain, slowest)
}

/// One put of `size` bytes from each queue at once, to `to` at `k * size` for sender `k`: one
/// thread each, started together, asleep until its completion. Each one's time, µs.
fn incast_round(
    queues: &mut [Queue],
    srcs: &[(Buf, u32)],
    to: &Remote,
    size: usize,
) -> Res<Vec<f64>> {
    let start = std::sync::Barrier::new(queues.len());
    let to = *to;
    let times: Vec<Result<f64, String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = queues
            .iter_mut()
            .zip(srcs)
            .enumerate()
            .map(|(k, (q, (src, _)))| {
                let (addr, start) = (src.addr(), &start);
                sc.spawn(move || -> Result<f64, String> {
                    let mut c = [QueueCompletion::default(); 1];
                    start.wait();
                    let t = Instant::now();
                    q.put(addr, size as u32, &to, (k * size) as u64, k as u64)
                        .map_err(|e| e.to_string())?;
                    while q.poll(&mut c) == 0 {
                        q.wait(Some(Duration::from_secs(30)))
                            .map_err(|e| e.to_string())?;
                    }
                    if c[0].status != 0 || c[0].bytes as usize != size {
                        return Err(format!(
                            "sender {k}: status {} bytes {}",
                            c[0].status, c[0].bytes
                        ));
                    }
                    Ok(t.elapsed().as_secs_f64() * 1e6)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a sender panicked".into())))
            .collect()
    });
    Ok(times.into_iter().collect::<Result<Vec<f64>, _>>()?)
}

/// `puts` puts of 64 B back to back, each into a page the receiver never touched.
pub(crate) fn net_small_cold(puts: usize) -> Res<()> {
    let (n0, n1) = (Device::open(0)?, Device::open(1)?);
    let mut q = n0.create_queue(4, 4)?;
    let (src, hs) = pinned(&n0, 4096, exanest_dma::Access::Read, 9)?;
    let r = n1.register_remote(Buf::new(puts * 4096, false)?, Mode::OnDemand)?;
    let to = r.target();
    let tmo0 = n0.net_counters()?.timeouts;
    let mut c = [QueueCompletion::default(); 1];
    let mut t = Vec::with_capacity(puts);
    for i in 0..puts {
        let t0 = Instant::now();
        q.put(src.addr(), 64, &to, (i * 4096) as u64, i as u64)?;
        poll_one(&mut q, &mut c)?;
        t.push(t0.elapsed().as_secs_f64() * 1e6);
        if c[0].status != 0 {
            return Err(format!("put {i}: status {}", c[0].status).into());
        }
    }
    let faults = n1.counters()?.faults_resolved;
    let max = t.iter().copied().fold(0.0, f64::max);
    let (p50, p99) = p50_p99(&mut t);
    drop(r);
    n0.deregister(hs)?;
    println!(
        "{{\"bench\":\"net-small-cold\",\"puts\":{puts},\"p50_us\":{p50:.2},\"p99_us\":{p99:.2},\"max_us\":{max:.2},\"receiver_faults\":{faults},\"timeouts\":{}}}",
        grew(tmo0, n0.net_counters()?.timeouts)
    );
    Ok(())
}

/// Both engines' loss injection, and node 0's reordering (register map 2.8: that share of
/// its packets held back up to [`HOLD_US`]), put back to none when dropped.
struct Loss;

/// How long node 0 holds a packet back at most, us: two of the link's round trips.
const HOLD_US: u32 = 4;

impl Loss {
    fn set(drop_ppm: u32, reorder_ppm: u32) -> Res<Self> {
        for dev in 0..2 {
            std::fs::write(
                format!("/sys/kernel/debug/exanest-dma{dev}/link"),
                format!("drop_ppm {drop_ppm}\n"),
            )?;
        }
        if reorder_ppm != 0 {
            std::fs::write(
                "/sys/kernel/debug/exanest-dma0/link",
                format!("reorder_ppm {reorder_ppm} reorder_us {HOLD_US}\n"),
            )?;
        }
        Ok(Loss)
    }
}

impl Drop for Loss {
    fn drop(&mut self) {
        for dev in 0..2 {
            let _ = std::fs::write(
                format!("/sys/kernel/debug/exanest-dma{dev}/link"),
                "drop_ppm 0\n",
            );
        }
        let _ = std::fs::write("/sys/kernel/debug/exanest-dma0/link", "reorder_ppm 0\n");
    }
}

/// Warm put throughput of `size` bytes with 0, 0.1 % and 1 % of the packets dropped on both
/// engines (medians of `reps`), the payload sent again and the timeouts, per loss rate; then
/// `small` 64-byte puts one at a time at that loss rate: their p50, p99 and worst latency and
/// the timeouts among them. Then the throughput again at 0.1 % and 1 % loss with 1 % of node
/// 0's packets held back (Transport v2's target: resent within 1.5 x the loss rate).
pub(crate) fn net_loss(reps: usize, size: usize, small: usize) -> Res<()> {
    let (n0, n1) = (Device::open(0)?, Device::open(1)?);
    let mut q = n0.create_queue(4, 4)?;
    let (src, hs) = pinned(&n0, size, exanest_dma::Access::Read, 11)?;
    let r = n1.register_remote(vec![0u8; size], Mode::Pin)?;
    let to = r.target();
    for (ppm, reorder) in [
        (0u32, 0u32),
        (1000, 0),
        (10000, 0),
        (1000, 10000),
        (10000, 10000),
    ] {
        let _loss = Loss::set(ppm, reorder)?;
        let p0 = n0.net_counters()?;
        let mut t = Vec::with_capacity(reps);
        for _ in 0..reps {
            t.push(one(&mut q, true, src.addr(), size, &to)?);
        }
        let p1 = n0.net_counters()?;
        let (re, tmo, dr) = (
            grew(p0.retransmitted_bytes, p1.retransmitted_bytes),
            grew(p0.timeouts, p1.timeouts),
            grew(p0.injected_drops, p1.injected_drops),
        );
        let (p50, _) = p50_p99(&mut t);
        println!(
            "{{\"bench\":\"net-loss\",\"drop_ppm\":{ppm},\"reorder_ppm\":{reorder},\"hold_us\":{HOLD_US},\"size\":{size},\"reps\":{reps},\"p50_us\":{p50:.1},\"mb_per_s\":{:.1},\"retransmitted_share\":{:.4},\"timeouts\":{tmo},\"sender_drops\":{dr}}}",
            size as f64 / p50,
            re as f64 / (size * reps) as f64
        );
        if reorder != 0 {
            continue;
        }
        let p0 = n0.net_counters()?;
        let mut t = Vec::with_capacity(small);
        for _ in 0..small {
            t.push(one(&mut q, true, src.addr(), 64, &to)?);
        }
        let p1 = n0.net_counters()?;
        let (tmo, dr) = (
            grew(p0.timeouts, p1.timeouts),
            grew(p0.injected_drops, p1.injected_drops),
        );
        let worst = t.iter().copied().fold(0.0, f64::max);
        let (p50, p99) = p50_p99(&mut t);
        println!(
            "{{\"bench\":\"net-loss-small\",\"drop_ppm\":{ppm},\"size\":64,\"count\":{small},\"p50_us\":{p50:.1},\"p99_us\":{p99:.1},\"worst_us\":{worst:.1},\"timeouts\":{tmo},\"sender_drops\":{dr}}}"
        );
    }
    let ok = r.into_inner()? == src.slice();
    n0.deregister(hs)?;
    if !ok {
        return Err("net-loss: the receiver's data differs".into());
    }
    Ok(())
}

/// 64-byte mailbox messages from node 0 to a mailbox on node 1: `count` one at a time (send
/// to completion; send to the reader having it), then `count` kept 8 deep.
pub(crate) fn net_mailbox(count: usize) -> Res<()> {
    let (n0, n1) = (Device::open(0)?, Device::open(1)?);
    let (mut qa, mut qb) = (n0.create_queue(5, 5)?, n1.create_queue(4, 4)?);
    qb.create_mailbox(6)?;
    let bi = n1.info()?;
    let (src, hs) = pinned(&n0, 4096, exanest_dma::Access::Read, 13)?;
    let mut c = [QueueCompletion::default(); 1];
    let (mut done_us, mut seen_us) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for i in 0..count {
        let t0 = Instant::now();
        qa.send(src.addr(), 64, bi.node, bi.endpoint, i as u64)?;
        poll_one(&mut qa, &mut c)?;
        done_us.push(t0.elapsed().as_secs_f64() * 1e6);
        if c[0].status != 0 {
            return Err(format!("message {i}: status {}", c[0].status).into());
        }
        while qb.recv().is_none() {
            if t0.elapsed().as_secs() > 10 {
                return Err(format!("message {i} never reached the mailbox").into());
            }
        }
        seen_us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    let t0 = Instant::now();
    let (mut sent, mut completed, mut read) = (0, 0, 0);
    while read < count {
        while sent < count && sent - completed < 8 {
            qa.send(src.addr(), 64, bi.node, bi.endpoint, sent as u64)?;
            sent += 1;
        }
        let n = qa.poll(&mut c);
        if n > 0 && c[0].status != 0 {
            return Err(format!("message: status {}", c[0].status).into());
        }
        completed += n;
        while qb.recv().is_some() {
            read += 1;
        }
        if t0.elapsed().as_secs() > 60 {
            return Err(format!("{read} of {count} messages read in 60 s").into());
        }
    }
    let rate = count as f64 / t0.elapsed().as_secs_f64();
    let (d50, d99) = p50_p99(&mut done_us);
    let (s50, _) = p50_p99(&mut seen_us);
    n0.deregister(hs)?;
    println!(
        "{{\"bench\":\"net-mailbox\",\"count\":{count},\"done_p50_us\":{d50:.2},\"done_p99_us\":{d99:.2},\"read_p50_us\":{s50:.2},\"msgs_per_s\":{rate:.0}}}"
    );
    Ok(())
}

/// The next message of `q`'s mailbox, within 10 s: busy polling its ring, or (`sleep`) asleep
/// in the driver until one comes.
fn next_message(q: &mut Queue, sleep: bool) -> Res<Message> {
    if sleep {
        return Ok(q.recv_wait(Some(Duration::from_secs(10)))?);
    }
    let t0 = Instant::now();
    let mut spins = 0u32;
    loop {
        if let Some(m) = q.recv() {
            return Ok(m);
        }
        spins = spins.wrapping_add(1);
        if spins % 4096 == 0 && t0.elapsed().as_secs() >= 10 {
            return Err("no message in 10 s".into());
        }
        std::hint::spin_loop();
    }
}

/// The completion of the one message `q` has in flight: busy polled, or slept for.
fn message_sent(q: &mut Queue, sleep: bool) -> Res<()> {
    let mut c = [QueueCompletion::default(); 1];
    if sleep {
        while q.poll(&mut c) == 0 {
            q.wait(Some(Duration::from_secs(10)))?;
        }
    } else {
        poll_one(q, &mut c)?;
    }
    match c[0].status {
        0 => Ok(()),
        s => Err(format!("a message ended with status {s}").into()),
    }
}

/// 8-byte ping-pong through the mailbox: a thread on node 1 answers each message that a thread
/// on node 0 sends, `count` round trips with both busy polling their rings, then `count` with
/// both asleep until a message comes. Each thread opens its own file, so each has its own
/// context, as two processes would. Round trip p50, p99, the worst and the mean
/// (CLOCK_MONOTONIC).
pub(crate) fn net_pingpong(count: usize) -> Res<()> {
    for sleep in [false, true] {
        let (tx, rx) = std::sync::mpsc::channel::<(u32, u32)>();
        let answerer = std::thread::spawn(move || {
            let run = || -> Res<()> {
                let n1 = Device::open(1)?;
                let mut q = n1.create_queue(4, 4)?;
                q.create_mailbox(4)?;
                let (src, hs) = pinned(&n1, 4096, exanest_dma::Access::Read, 17)?;
                let i = n1.info()?;
                tx.send((i.node, i.endpoint))?;
                for k in 0..count {
                    let m = next_message(&mut q, sleep)?;
                    q.send(src.addr(), 8, m.node, m.endpoint, k as u64)?;
                    message_sent(&mut q, sleep)?;
                }
                n1.deregister(hs)?;
                Ok(())
            };
            run().map_err(|e| e.to_string())
        });
        let n0 = Device::open(0)?;
        let mut q = n0.create_queue(4, 4)?;
        q.create_mailbox(4)?;
        let (src, hs) = pinned(&n0, 4096, exanest_dma::Access::Read, 19)?;
        let (node, endpoint) = rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| "the answering thread did not start")?;
        let mut rtt = Vec::with_capacity(count);
        for k in 0..count {
            let t0 = Instant::now();
            q.send(src.addr(), 8, node, endpoint, k as u64)?;
            next_message(&mut q, sleep)?;
            rtt.push(t0.elapsed().as_secs_f64() * 1e6);
            message_sent(&mut q, sleep)?;
        }
        answerer
            .join()
            .map_err(|_| "the answering thread panicked")??;
        n0.deregister(hs)?;
        let worst = rtt.iter().copied().fold(0.0, f64::max);
        let mean = rtt.iter().sum::<f64>() / rtt.len().max(1) as f64;
        let (p50, p99) = p50_p99(&mut rtt);
        let mode = if sleep { "sleep" } else { "poll" };
        println!(
            "{{\"bench\":\"net-pingpong\",\"mode\":\"{mode}\",\"count\":{count},\"rtt_p50_us\":{p50:.2},\"rtt_p99_us\":{p99:.2},\"rtt_max_us\":{worst:.2},\"rtt_mean_us\":{mean:.2}}}"
        );
    }
    Ok(())
}

/// `net-many`: `n` processes on node 0, each putting `size` bytes at a time to its own process
/// on node 1 (`n` of 1 and 8), each process on its own context. Every receiver registers fresh
/// memory on demand: the first put of each sender is cold (every page faults at its
/// receiver), the ones after it for `ms` milliseconds are warm. All senders start together and
/// sleep for their completions ([`Queue::wait`]). Prints per `n`: the cold round's aggregate
/// (all the bytes over the slowest sender's time) and Jain's index over the senders, the warm
/// phase's likewise, node 0's timeouts and bytes resent; each receiver checks its bytes.
pub(crate) fn net_many(pairs: &[usize], size: usize, ms: u64) -> Res<()> {
    use std::io::{Read, Write};
    let n0 = Device::open(0)?;
    let mut one = None;
    for &n in pairs {
        // The receivers: each hands its target over, then waits for the end to check its bytes.
        let (mut tgt_r, tgt_w) = pipe()?;
        let (end_r, mut end_w) = pipe()?;
        let mut rpids = Vec::new();
        for k in 0..n {
            let (mut tw, mut er) = (tgt_w.try_clone()?, end_r.try_clone()?);
            rpids.push(spawn(move || {
                let dev = Device::open(1)?;
                let r = cold_inbox(&dev, size, false)?;
                let mut msg = [0u8; 4 + Remote::BYTES];
                msg[..4].copy_from_slice(&(k as u32).to_le_bytes());
                msg[4..].copy_from_slice(&r.target().to_bytes());
                tw.write_all(&msg)?;
                er.read_exact(&mut [0u8; 1])?;
                let mut want = Buf::new(size, false)?;
                want.fill(40 + k as u8);
                if r.into_inner()?.slice() != want.slice() {
                    return Err(format!("net-many receiver {k}: the data differs").into());
                }
                Ok(())
            })?);
        }
        drop((tgt_w, end_r));
        let mut targets = vec![None; n];
        for _ in 0..n {
            let mut msg = [0u8; 4 + Remote::BYTES];
            tgt_r.read_exact(&mut msg)?;
            let k = u32::from_le_bytes(msg[..4].try_into()?) as usize;
            *targets.get_mut(k).ok_or("a receiver's index")? = Remote::from_bytes(&msg[4..]);
        }
        // The senders.
        let targets: Vec<Remote> = targets
            .into_iter()
            .collect::<Option<_>>()
            .ok_or("a receiver's target")?;
        let sender = |k: usize, gang: &mut Gang| -> Res<()> {
            let dev = Device::open(0)?;
            let mut q = dev.create_queue(4, 4)?;
            let (src, hs) = pinned(&dev, size, exanest_dma::Access::Read, 40 + k as u8)?;
            let to = targets[k];
            gang.start()?;
            let cold = one_with(&mut q, true, src.addr(), size, &to, true)?;
            let t0 = Instant::now();
            let mut bytes = 0;
            while t0.elapsed() < Duration::from_millis(ms) {
                one_with(&mut q, true, src.addr(), size, &to, true)?;
                bytes += size;
            }
            let warm = t0.elapsed().as_secs_f64() * 1e6;
            gang.report(&format!("{cold} {bytes} {warm}"))?;
            dev.deregister(hs)?;
            Ok(())
        };
        let mut c0 = None;
        let sent = together(n, sender, || {
            c0 = Some(n0.net_counters()?);
            Ok(())
        });
        let c1 = n0.net_counters()?;
        end_w.write_all(&vec![0u8; n])?;
        let received = rpids.into_iter().try_for_each(reap);
        let (lines, _) = sent?;
        received?;
        let c0 = c0.ok_or("no counters before the start")?;
        let (mut cold, mut warm_rates, mut warm_bytes, mut warm_slowest) =
            (Vec::new(), Vec::new(), 0u64, 0.0f64);
        for l in &lines {
            let f: Vec<f64> = l
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect();
            let [c, b, t] = f[..] else {
                return Err(format!("net-many: a sender's result '{l}'").into());
            };
            cold.push(c);
            warm_rates.push(b / t);
            warm_bytes += b as u64;
            warm_slowest = warm_slowest.max(t);
        }
        let (cold_agg, cold_jain, _) = shares(&cold, size);
        let warm_agg = warm_bytes as f64 / warm_slowest;
        let sum: f64 = warm_rates.iter().sum();
        let warm_jain = sum * sum / (n as f64 * warm_rates.iter().map(|r| r * r).sum::<f64>());
        let (one_cold, one_warm) = *one.get_or_insert((cold_agg, warm_agg));
        let resent = grew(c0.retransmitted_bytes, c1.retransmitted_bytes);
        println!(
            "{{\"bench\":\"net-many\",\"clock\":\"CLOCK_MONOTONIC\",\"pairs\":{n},\"size\":{size},\"cold_aggregate_mb_per_s\":{cold_agg:.1},\"cold_jain\":{cold_jain:.4},\"cold_vs_one\":{:.3},\"warm_aggregate_mb_per_s\":{warm_agg:.1},\"warm_jain\":{warm_jain:.4},\"warm_vs_one\":{:.3},\"warm_bytes\":{warm_bytes},\"timeouts\":{},\"retransmitted_bytes\":{resent},\"verified\":true}}",
            cold_agg / one_cold,
            warm_agg / one_warm,
            grew(c0.timeouts, c1.timeouts)
        );
    }
    Ok(())
}
