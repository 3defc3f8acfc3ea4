// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `forget [BYTES]`: safe code, `mem::forget` included, never leaves the engine writing memory
//! that Rust has handed back.
//!
//! A copy into memory nobody touched is started and its `Pending` forgotten; the destination
//! region, which owns its buffer, is dropped at once. This program's allocator poisons every
//! freed block of 1 MiB or more and keeps it (a quarantine): once the engine is done, the
//! poison must be whole. Then a forgotten copy's destination is read (the region waits for the
//! copy first), and a forgotten region's buffer must never be freed.
use exanest_dma::{Device, Errno, Error, Mode};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

const POISON: u8 = 0xa5;
const BIG: usize = 1 << 20;
const KEPT: usize = 16;

/// Frees small blocks; poisons big ones and keeps them (address, size) in `QUARANTINE`.
struct Quarantine;

static QUARANTINE: [(AtomicUsize, AtomicUsize); KEPT] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; KEPT];

// SAFETY: Every block comes from `System` with the caller's layout; a big block is kept, never
// handed out again, which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for Quarantine {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: The caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if layout.size() < BIG {
            // SAFETY: `p` came from `System.alloc` with `layout`.
            return unsafe { System.dealloc(p, layout) };
        }
        // SAFETY: The block is the caller's to give back, `layout.size()` bytes at `p`; it is
        // never handed out again, so nothing else writes it but a stray DMA.
        unsafe { p.write_bytes(POISON, layout.size()) };
        for (a, n) in &QUARANTINE {
            if a.compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                n.store(layout.size(), Ordering::Release);
                return;
            }
        }
        // The quarantine is full: the block stays allocated, unrecorded.
    }
}

#[global_allocator]
static ALLOC: Quarantine = Quarantine;

/// Bytes of the quarantined blocks that are no longer poison, and the blocks kept.
fn damaged() -> (usize, usize) {
    let (mut bad, mut kept) = (0, 0);
    for (a, n) in &QUARANTINE {
        let (p, len) = (a.load(Ordering::Acquire), n.load(Ordering::Acquire));
        if p == 0 {
            continue;
        }
        kept += 1;
        // SAFETY: A block the allocator keeps for ever; read volatile, as a DMA may have
        // written it behind the compiler's back.
        bad += (0..len)
            .filter(|&i| unsafe { (p as *const u8).add(i).read_volatile() } != POISON)
            .count();
    }
    (bad, kept)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let size: usize = std::env::args()
        .nth(1)
        .map_or(Ok(32 << 20), |s| s.parse())?;
    let dev = Device::open(0)?;
    let src = dev.register(vec![7u8; size], Mode::Pin)?;

    // 1. The pending copy forgotten, the destination dropped with the copy in flight.
    let mut dst = dev.register_mut(vec![0u8; size], Mode::OnDemand)?;
    let pending = dev.copy(&src, 0, &mut dst, 0, size)?;
    let cookie = pending.cookie();
    std::mem::forget(pending);
    drop(dst);
    // However the copy ended, the driver has it no more: the drop collected it.
    let gone = dev.wait_completion(cookie, None);
    let (bad, kept) = damaged();
    println!(
        "forget: a copy of {size} bytes forgotten, its destination dropped: the wait after the \
         drop {}, {kept} freed block(s) in quarantine, {bad} poisoned byte(s) overwritten",
        match gone {
            Err(Error::Abi(Errno::NoEnt)) => "found it collected (ENOENT)".to_string(),
            r => format!("returned {r:?}"),
        }
    );
    let first = bad == 0 && kept >= 1 && gone == Err(Error::Abi(Errno::NoEnt));

    // 2. A forgotten copy's destination, read: the region waits for the copy first.
    let mut dst = dev.register_mut(vec![0u8; size], Mode::OnDemand)?;
    std::mem::forget(dev.copy(&src, 0, &mut dst, 0, size)?);
    let second = dst.as_slice() == src.as_slice();
    println!(
        "forget: a forgotten copy's destination read back: {}",
        if second {
            "the copy's bytes"
        } else {
            "NOT the copy's bytes"
        }
    );
    drop(dst);

    // 3. A forgotten region: its buffer is leaked, never freed while the engine may use it.
    let before = damaged().1;
    let mut dst = dev.register_mut(vec![0u8; size], Mode::OnDemand)?;
    std::mem::forget(dev.copy(&src, 0, &mut dst, 0, size)?);
    std::mem::forget(dst);
    let third = damaged().1 == before;
    println!(
        "forget: a forgotten region's buffer {}",
        if third { "was not freed" } else { "WAS FREED" }
    );

    let ok = first && second && third;
    println!(
        "forget: {}",
        if ok {
            "nothing written after the drop"
        } else {
            "the engine wrote memory that Rust had handed back"
        }
    );
    std::process::exit(if ok { 0 } else { 1 });
}
