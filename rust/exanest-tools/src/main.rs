// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! exanest-cli: register buffers, copy them with the engine, verify, print counters.
//!
//! ```text
//! exanest-cli [-d N] info
//! exanest-cli [-d N] copy [--size BYTES] [--count N] [--src-offset B] [--dst-offset B]
//!                         [--mode pin|prefault|on-demand] [--window PAGES] [--advise]
//!                         [--budget PAGES] [--no-verify]
//! exanest-cli [-d N] counters
//! ```

use exanest_dma::{Access, Device, Mode};
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "usage: exanest-cli [-d N] info | counters | copy [--size BYTES] [--count N] \
[--src-offset B] [--dst-offset B] [--mode pin|prefault|on-demand] [--window PAGES] [--advise] \
[--budget PAGES] [--no-verify]";

struct CopyArgs {
    size: usize,
    count: usize,
    src_off: usize,
    dst_off: usize,
    mode: Mode,
    window: Option<u32>,
    advise: bool,
    budget: Option<u64>,
    verify: bool,
}

fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1 << 10),
        Some('m' | 'M') => (&s[..s.len() - 1], 1 << 20),
        Some('g' | 'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("bad size '{s}'"))
}

fn parse_copy(args: &[String]) -> Result<CopyArgs, String> {
    let mut a = CopyArgs {
        size: 1 << 20,
        count: 1,
        src_off: 0,
        dst_off: 0,
        mode: Mode::Pin,
        window: None,
        advise: false,
        budget: None,
        verify: true,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--size" => a.size = parse_size(val()?)?,
            "--count" => a.count = parse_size(val()?)?,
            "--src-offset" => a.src_off = parse_size(val()?)?,
            "--dst-offset" => a.dst_off = parse_size(val()?)?,
            "--mode" => {
                let m = val()?;
                a.mode = m.parse().map_err(|e| format!("'{m}': {e}"))?;
            }
            "--window" => {
                let w = parse_size(val()?)?;
                a.window = Some(u32::try_from(w).map_err(|_| format!("bad window {w}"))?);
            }
            "--advise" => a.advise = true,
            "--budget" => a.budget = Some(parse_size(val()?)? as u64),
            "--no-verify" => a.verify = false,
            f => return Err(format!("unknown option '{f}'")),
        }
    }
    if a.size == 0 || a.count == 0 {
        return Err("size and count must be positive".into());
    }
    Ok(a)
}

fn copy(dev: &Device, a: &CopyArgs) -> Result<bool, Box<dyn std::error::Error>> {
    let src: Vec<u8> = (0..a.src_off + a.size)
        .map(|i| (i * 131 % 253) as u8)
        .collect();
    let mut dst = vec![0u8; a.dst_off + a.size];
    let (s_addr, s_len) = (src.as_ptr() as u64, src.len() as u64);
    let (d_addr, d_len) = (dst.as_mut_ptr() as u64, dst.len() as u64);
    if let Some(p) = a.budget {
        dev.budget(Some(p))?;
    }
    let c0 = dev.counters()?;
    // SAFETY: Both buffers outlive their regions (deregistered below, before they are
    // dropped), and nothing touches `dst` while a copy may write it.
    let (hs, hd) = unsafe {
        (
            dev.register_raw_window(s_addr, s_len, Access::Read, a.mode, a.window)?,
            dev.register_raw_window(d_addr, d_len, Access::Write, a.mode, a.window)?,
        )
    };
    if a.advise {
        dev.advise(s_addr, s_len, false)?;
        dev.advise(d_addr, d_len, true)?;
    }
    let t0 = Instant::now();
    let mut bytes = 0;
    for _ in 0..a.count {
        // SAFETY: Inside the registered buffers; waited for before `dst` is read.
        let cookie = unsafe {
            dev.copy_raw(
                s_addr + a.src_off as u64,
                d_addr + a.dst_off as u64,
                a.size as u64,
            )?
        };
        bytes += dev.wait_cookie(cookie, None)?;
    }
    let dt = t0.elapsed();
    let c1 = dev.counters()?;
    dev.deregister(hs)?;
    dev.deregister(hd)?;
    let ok = !a.verify || dst[a.dst_off..] == src[a.src_off..];
    println!(
        "copied {} x {} bytes ({}): {} bytes in {:.1} us, {:.1} MB/s, data {}",
        a.count,
        a.size,
        a.mode,
        bytes,
        dt.as_secs_f64() * 1e6,
        bytes as f64 / dt.as_secs_f64() / 1e6,
        if !a.verify {
            "not checked"
        } else if ok {
            "verified"
        } else {
            "DIFFERS"
        }
    );
    println!(
        "faults {} (iommu {}), pages resolved {} (touch-ahead {}), pinned {}, invalidations {}",
        c1.faults - c0.faults,
        c1.iommu_faults - c0.iommu_faults,
        c1.pages_resolved - c0.pages_resolved,
        c1.touch_ahead_pages - c0.touch_ahead_pages,
        c1.pages_pinned,
        c1.invalidations - c0.invalidations
    );
    if a.budget.is_some() {
        let b = dev.budget(None)?;
        println!(
            "budget {} pages: evicted {} pages in {} evictions, {} mapped",
            b.pages, b.evicted_pages, b.evictions, b.mapped_pages
        );
    }
    Ok(ok)
}

fn run(args: &[String]) -> Result<bool, Box<dyn std::error::Error>> {
    let (index, rest) = match args {
        [d, n, rest @ ..] if d == "-d" => (
            n.parse::<u32>().map_err(|_| format!("bad device '{n}'"))?,
            rest,
        ),
        rest => (0, rest),
    };
    let Some((cmd, opts)) = rest.split_first() else {
        return Err(USAGE.into());
    };
    let dev = Device::open(index).map_err(|e| format!("/dev/exanest-dma{index}: {e}"))?;
    match cmd.as_str() {
        "info" => {
            let i = dev.info()?;
            println!("device          /dev/exanest-dma{index}");
            println!("abi version     {}", i.abi_version);
            println!(
                "engine version  {}.{}",
                i.hw_version >> 16,
                i.hw_version & 0xffff
            );
            println!("context         {} of {}", i.context, i.contexts);
            println!("channels        {}", i.channels);
            let modes: Vec<_> = Mode::ALL
                .iter()
                .filter(|m| i.modes & (1 << m.raw()) != 0)
                .map(|m| m.name())
                .collect();
            println!("modes           {} ({:#x})", modes.join(" "), i.modes);
            println!("max transfer    {} bytes", i.max_transfer);
            println!("max regions     {}", i.max_regions);
            println!("max in flight   {}", i.max_inflight);
            Ok(true)
        }
        "copy" => copy(&dev, &parse_copy(opts)?),
        "counters" => {
            println!("{}", dev.counters()?);
            Ok(true)
        }
        _ => Err(USAGE.into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("exanest-cli: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("17"), Ok(17));
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn copy_options() {
        let v = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let a = parse_copy(&v(
            "--size 1M --count 3 --src-offset 1 --mode on-demand --no-verify",
        ))
        .unwrap();
        assert_eq!(
            (a.size, a.count, a.src_off, a.mode, a.verify),
            (1 << 20, 3, 1, Mode::OnDemand, false)
        );
        assert!(parse_copy(&v("--size 0")).is_err());
        assert!(parse_copy(&v("--mode lazy")).is_err());
        for m in Mode::ALL {
            let a = parse_copy(&v(&format!("--mode {m}"))).unwrap();
            assert_eq!(a.mode, m);
        }
        assert!(parse_copy(&v("--bogus")).is_err());
        assert!(parse_copy(&v("--size")).is_err());
    }
}
