// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! DMA into a freshly allocated, never-touched buffer: nothing pinned, faults resolved on demand.
use exanest_dma::{Device, Mode};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let size: usize = std::env::args()
        .nth(1)
        .map_or(Ok(16 << 20), |s| s.parse())?;
    let dev = Device::open(0)?;
    let src = vec![b'x'; size];
    // Zeroed by the allocator's fresh mmap: the pages do not exist until the engine writes.
    let dst = vec![0u8; size];
    let s = dev.register(src, Mode::OnDemand)?;
    let mut d = dev.register_mut(dst, Mode::OnDemand)?;
    dev.copy(&s, 0, &mut d, 0, size)?.wait()?;
    let c = dev.counters()?;
    let same = d.as_slice() == s.as_slice();
    println!(
        "copied {size} bytes on demand: {} faults resolved, {} pages pinned, data {}",
        c.faults_resolved,
        c.pages_pinned,
        if same { "verified" } else { "DIFFERS" }
    );
    drop((s, d));
    std::process::exit(if same { 0 } else { 1 });
}
