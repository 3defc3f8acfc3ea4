// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The evaluation's workloads at scale (issue 23's "evaluation v2"): many processes faulting
//! at once, the default `RLIMIT_MEMLOCK` of an unprivileged user, and transparent huge pages
//! against pinning while khugepaged runs. Times are CLOCK_MONOTONIC in the guest (`Instant`),
//! emulated time under `make evaluate`'s `-icount`; the fault service's stages are the
//! driver's `ktime_get_ns` stamps (its fault log, Documentation/design.rst "Fault timings").
//!
//! - `storm`: 1, 4 and 16 processes, each on its own context, each copying between fresh
//!   on-demand regions with no touch-ahead (every page faults), all started at once: the fault
//!   service's percentiles over every fault of every process, and the faults served per second,
//!   against one process;
//! - `memlock`: a child that drops to user `nobody` with `RLIMIT_MEMLOCK` at 8 MiB (the
//!   default of most distributions): the largest region each mode registers, then a job that
//!   streams a 1 GiB buffer through the engine in each mode; pinning cannot register it, so it
//!   also runs the way a pinning user must, 4 MiB at a time;
//! - `thp`: a region faulted in with small pages, registered and copied, then offered to
//!   khugepaged (`MADV_HUGEPAGE`, scanning sped up): its share in huge pages over time, the
//!   IOMMU's 2 MiB blocks, and the copy's throughput before and after, pinned and on demand.

use super::{copy, fault_log, pipe, reap, spawn, together, us, Buf, Gang, Res, FAULT_LOG};
use exanest_dma::{Access, Device, Mode};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Register `len` bytes at `addr` in `mode` (the default window).
///
/// # Safety
///
/// `[addr, addr + len)` must stay mapped until the region is deregistered.
unsafe fn register_at(dev: &Device, addr: u64, len: usize, access: Access, mode: Mode) -> Res<u32> {
    // SAFETY: The caller keeps the range mapped while the region lives.
    Ok(unsafe { dev.register_raw_window(addr, len as u64, access, mode, None)? })
}

/// Copy `len` bytes from `src` into `dst` (`chunk` bytes long) one chunk at a time.
fn stream(dev: &Device, src: u64, len: usize, dst: u64, chunk: usize) -> Res<()> {
    let mut off = 0;
    while off < len {
        copy(dev, src + off as u64, dst, chunk.min(len - off))?;
        off += chunk;
    }
    Ok(())
}

/// Write every page of `b` (one store per 64 bytes would not be faster under emulation: the
/// stores are what costs). The application's data, before any clock starts.
fn touch(b: &mut Buf, seed: u8) {
    let mut off = 0;
    while off < b.len {
        // SAFETY: Inside our mapping; no copy is pending.
        unsafe {
            b.ptr
                .add(off)
                .write_bytes(seed.wrapping_add((off >> 12) as u8), 4096)
        };
        off += 4096;
    }
}

/// `storm`: `n` processes at once (see the module's description), each copying `size` bytes.
pub(super) fn storm(size: usize) -> Res<()> {
    let mut one = 0.0;
    for n in [1usize, 4, 16] {
        let child = |_k, gang: &mut Gang| -> Res<()> {
            let dev = Device::open(0)?;
            let mut src = Buf::new(size, false)?;
            let dst = Buf::new(size, false)?;
            touch(&mut src, 7);
            // SAFETY: Both buffers outlive their regions (deregistered below).
            let (hs, hd) = unsafe {
                (
                    dev.register_raw_window(
                        src.addr(),
                        size as u64,
                        Access::Read,
                        Mode::OnDemand,
                        Some(0),
                    )?,
                    dev.register_raw_window(
                        dst.addr(),
                        size as u64,
                        Access::Write,
                        Mode::OnDemand,
                        Some(0),
                    )?,
                )
            };
            let c0 = dev.counters()?;
            gang.start()?;
            let t0 = Instant::now();
            copy(&dev, src.addr(), dst.addr(), size)?;
            let t = us(t0);
            let c1 = dev.counters()?;
            if src.slice() != dst.slice() {
                return Err("the copy's data differs".into());
            }
            gang.report(&format!("{t} {}", c1.faults_resolved - c0.faults_resolved))?;
            dev.deregister(hs)?;
            dev.deregister(hd)?;
            Ok(())
        };
        let (lines, wall) = together(n, child, || {
            fault_log("on")?;
            fault_log("clear")
        })?;
        let log = std::fs::read_to_string(FAULT_LOG)?;
        let (mut faults, mut per) = (0u64, Vec::new());
        for l in &lines {
            let mut f = l.split_whitespace();
            let t: f64 = f.next().ok_or("result")?.parse()?;
            let k: u64 = f.next().ok_or("result")?.parse()?;
            faults += k;
            per.push(t / k.max(1) as f64);
        }
        per.sort_by(f64::total_cmp);
        let rate = faults as f64 / wall * 1e6;
        if n == 1 {
            one = rate;
        }
        println!(
            "{{\"bench\":\"storm\",\"clock\":\"CLOCK_MONOTONIC, ktime_get_ns\",\"processes\":{n},\"size\":{size},\"faults\":{faults},\"wall_us\":{wall:.0},\"faults_per_s\":{rate:.0},\"rate_vs_one\":{:.3},\"copy_us_per_fault_p50\":{:.2},\"copy_us_per_fault_max\":{:.2},\"log\":{}}}",
            rate / one,
            per[per.len() / 2],
            per[per.len() - 1],
            log.trim()
        );
    }
    Ok(())
}

/// `RLIMIT_MEMLOCK` of the child, in bytes.
const MEMLOCK: usize = 8 << 20;
/// The unprivileged user the child becomes (`nobody`).
const NOBODY: libc::uid_t = 65534;

/// Drop to `nobody` with `RLIMIT_MEMLOCK` at [`MEMLOCK`]: no `CAP_IPC_LOCK` any more.
fn unprivileged() -> Res<()> {
    let lim = libc::rlimit {
        rlim_cur: MEMLOCK as libc::rlim_t,
        rlim_max: MEMLOCK as libc::rlim_t,
    };
    // SAFETY: Plain system calls on this process, with valid arguments.
    let ok = unsafe {
        libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) == 0
            && libc::setgroups(0, std::ptr::null()) == 0
            && libc::setgid(NOBODY) == 0
            && libc::setuid(NOBODY) == 0
    };
    // SAFETY: As above.
    if !ok || unsafe { libc::geteuid() } == 0 {
        return Err(format!(
            "cannot drop to uid {NOBODY}: {}",
            std::io::Error::last_os_error()
        )
        .into());
    }
    Ok(())
}

/// The largest region `mode` can register, by doubling from 64 KiB up to `max`, then halving
/// the step between the last success and the first failure down to 64 KiB. With the error
/// of the first failure, if any.
fn largest(dev: &Device, mode: Mode, max: usize) -> Res<(usize, Option<String>)> {
    let try_size = |size: usize| -> Res<Option<String>> {
        let b = Buf::new(size, false)?;
        // SAFETY: `b` outlives the region, deregistered at once.
        match unsafe { register_at(dev, b.addr(), size, Access::Write, mode) } {
            Ok(h) => {
                dev.deregister(h)?;
                Ok(None)
            }
            Err(e) => Ok(Some(e.to_string().replace('"', "'"))),
        }
    };
    let (mut ok, mut size, mut err) = (0, 64 << 10, None);
    while size <= max {
        match try_size(size)? {
            None => ok = size,
            Some(e) => {
                err = Some(e);
                break;
            }
        }
        size *= 2;
    }
    if err.is_some() {
        let mut step = (size - ok) / 2;
        while step >= 64 << 10 {
            if try_size(ok + step)?.is_none() {
                ok += step;
            }
            step /= 2;
        }
    }
    Ok((ok, err))
}

/// `memlock` (see the module's description): `job` bytes streamed 4 MiB at a time.
pub(super) fn memlock(job: usize) -> Res<()> {
    let (mut res_r, res_w) = pipe()?;
    let mut out = res_w;
    // The parent's copy of the write end goes with the closure when `spawn` returns.
    let pid = spawn(move || {
        let dev = Device::open(0)?;
        unprivileged()?;
        let chunk = 4 << 20;
        let mut src = Buf::new(job, false)?;
        touch(&mut src, 9);
        let dst = Buf::new(chunk, false)?;
        let mut lines = String::new();
        for mode in Mode::ALL {
            let (big, err) = largest(&dev, mode, job)?;
            let t0 = Instant::now();
            // SAFETY: `dst` and `src` outlive the regions, deregistered below.
            let hd = unsafe { register_at(&dev, dst.addr(), chunk, Access::Write, mode)? };
            // SAFETY: As above.
            let (result, t) =
                match unsafe { register_at(&dev, src.addr(), job, Access::Read, mode) } {
                    Ok(hs) => {
                        stream(&dev, src.addr(), job, dst.addr(), chunk)?;
                        dev.deregister(hs)?;
                        ("ok".to_string(), us(t0))
                    }
                    Err(e) => (format!("register failed: {e}").replace('"', "'"), us(t0)),
                };
            dev.deregister(hd)?;
            let c = dev.counters()?;
            lines += &format!(
                "{{\"bench\":\"memlock\",\"mode\":\"{mode}\",\"uid\":{NOBODY},\"limit\":{MEMLOCK},\"largest\":{big},\"largest_error\":\"{}\",\"job\":{job},\"result\":\"{result}\",\"job_us\":{t:.0},\"job_mb_per_s\":{:.1},\"pages_pinned_after\":{}}}\n",
                err.unwrap_or_default(),
                if result == "ok" { job as f64 / t } else { 0.0 },
                c.pages_pinned
            );
        }
        // What a pinning user must do instead: pin, copy and unpin one chunk at a time (the
        // destination pinned too: 2 x 4 MiB = the limit).
        let t0 = Instant::now();
        // SAFETY: As above.
        let hd = unsafe { register_at(&dev, dst.addr(), chunk, Access::Write, Mode::Pin)? };
        let mut off = 0;
        while off < job {
            let n = chunk.min(job - off);
            // SAFETY: As above.
            let hs =
                unsafe { register_at(&dev, src.addr() + off as u64, n, Access::Read, Mode::Pin)? };
            copy(&dev, src.addr() + off as u64, dst.addr(), n)?;
            dev.deregister(hs)?;
            off += chunk;
        }
        dev.deregister(hd)?;
        let t = us(t0);
        lines += &format!(
            "{{\"bench\":\"memlock\",\"mode\":\"pin, 4 MiB at a time\",\"uid\":{NOBODY},\"limit\":{MEMLOCK},\"job\":{job},\"result\":\"ok\",\"job_us\":{t:.0},\"job_mb_per_s\":{:.1}}}\n",
            job as f64 / t
        );
        out.write_all(lines.as_bytes())?;
        Ok(())
    })?;
    let mut text = String::new();
    res_r.read_to_string(&mut text)?;
    reap(pid)?;
    print!("{text}");
    Ok(())
}

/// This process's memory in transparent huge pages (`AnonHugePages`, KiB).
fn anon_huge_kib() -> u64 {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("AnonHugePages:")
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
        })
        .unwrap_or(0)
}

const KHUGEPAGED: &str = "/sys/kernel/mm/transparent_hugepage/khugepaged";

/// khugepaged's settings, set for the measurement and put back when dropped.
struct Khugepaged(Vec<(&'static str, String)>);

impl Khugepaged {
    /// Scan every 10 ms, 64 huge pages' worth per pass.
    fn hurry() -> Res<Self> {
        let mut saved = Vec::new();
        for (k, v) in [
            ("scan_sleep_millisecs", "10"),
            ("alloc_sleep_millisecs", "10"),
            ("pages_to_scan", "32768"),
        ] {
            let p = format!("{KHUGEPAGED}/{k}");
            saved.push((k, std::fs::read_to_string(&p)?.trim().to_string()));
            std::fs::write(&p, v)?;
        }
        Ok(Khugepaged(saved))
    }

    fn full_scans() -> u64 {
        std::fs::read_to_string(format!("{KHUGEPAGED}/full_scans"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Khugepaged {
    fn drop(&mut self) {
        for (k, v) in &self.0 {
            let _ = std::fs::write(format!("{KHUGEPAGED}/{k}"), v);
        }
    }
}

/// `thp` (see the module's description) on a region of `size` bytes, watched for `secs`.
pub(super) fn thp(dev: &Device, size: usize, secs: u64) -> Res<()> {
    const HUGE: usize = 2 << 20;
    let chunk = 4 << 20;
    for mode in [Mode::Pin, Mode::OnDemand] {
        let mut buf = Buf::new(size + HUGE, false)?;
        touch(&mut buf, 5);
        let at = (buf.addr() + HUGE as u64 - 1) & !(HUGE as u64 - 1);
        let dst = Buf::new(chunk, false)?;
        // SAFETY: `buf` and `dst` outlive the regions, deregistered below.
        let hs = unsafe { register_at(dev, at, size, Access::Read, mode)? };
        // SAFETY: As above.
        let hd = unsafe { register_at(dev, dst.addr(), chunk, Access::Write, mode)? };
        stream(dev, at, size, dst.addr(), chunk)?;
        let c0 = dev.counters()?;
        let t0 = Instant::now();
        stream(dev, at, size, dst.addr(), chunk)?;
        let before = size as f64 / us(t0);
        let huge0 = anon_huge_kib();
        // Offer the region to khugepaged; sample its share in huge pages every 100 ms.
        let hurry = Khugepaged::hurry()?;
        let scans0 = Khugepaged::full_scans();
        // SAFETY: Advice on our own mapping.
        if unsafe { libc::madvise(at as *mut libc::c_void, size, libc::MADV_HUGEPAGE) } != 0 {
            return Err("madvise(MADV_HUGEPAGE) failed".into());
        }
        let t1 = Instant::now();
        let mut timeline = Vec::new();
        loop {
            let ms = t1.elapsed().as_millis() as u64;
            let pct = 100.0 * (anon_huge_kib() * 1024) as f64 / size as f64;
            timeline.push(format!("[{ms},{pct:.1}]"));
            if ms >= secs * 1000 || pct >= 100.0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let scans = Khugepaged::full_scans() - scans0;
        drop(hurry);
        let huge = anon_huge_kib();
        let c1 = dev.counters()?;
        let t2 = Instant::now();
        stream(dev, at, size, dst.addr(), chunk)?;
        let after_first = size as f64 / us(t2);
        let c2 = dev.counters()?;
        let t3 = Instant::now();
        stream(dev, at, size, dst.addr(), chunk)?;
        let after = size as f64 / us(t3);
        // The last pass left the region's last chunk in the destination.
        let last = size - size.min(chunk);
        // SAFETY: Inside our mapping (`at + size` is within it); no copy is pending.
        let tail =
            unsafe { std::slice::from_raw_parts((at as usize + last) as *const u8, size - last) };
        let ok = tail == &dst.slice()[..size - last];
        dev.deregister(hs)?;
        dev.deregister(hd)?;
        println!(
            "{{\"bench\":\"thp\",\"clock\":\"CLOCK_MONOTONIC\",\"mode\":\"{mode}\",\"size\":{size},\"huge_kib_before\":{huge0},\"huge_kib_after\":{huge},\"khugepaged_full_scans\":{scans},\"timeline_ms_pct\":[{}],\"mb_per_s_before\":{before:.1},\"mb_per_s_after_first\":{after_first:.1},\"mb_per_s_after\":{after:.1},\"faults_after\":{},\"blocks_2m_before\":{},\"blocks_2m_after\":{},\"pages_pinned\":{},\"ok\":{ok}}}",
            timeline.join(","),
            c2.faults - c1.faults,
            c0.huge_mappings,
            c2.huge_mappings,
            c1.pages_pinned
        );
    }
    Ok(())
}
