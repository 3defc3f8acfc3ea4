// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Copy a buffer with the engine: `copy [SIZE]`.
use exanest_dma::{Device, Mode};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let size: usize = std::env::args().nth(1).map_or(Ok(1 << 20), |s| s.parse())?;
    let dev = Device::open(0)?;
    let src: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    let s = dev.register(src, Mode::Pin)?;
    let mut d = dev.register_mut(vec![0u8; size], Mode::Pin)?;
    let bytes = dev.copy(&s, 0, &mut d, 0, size)?.wait()?;
    let same = d.as_slice() == s.as_slice();
    println!(
        "copied {bytes} bytes, data {}",
        if same { "verified" } else { "DIFFERS" }
    );
    drop((s, d));
    std::process::exit(if same { 0 } else { 1 });
}
