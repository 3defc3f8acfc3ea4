// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! exanest-bench: the measurements behind Documentation/evaluation.rst. Runs in the guest and
//! prints one JSON object per measurement on stdout (`{"bench":…, …}`); tests/eval/report.py
//! turns runs of them into the report. Times are the guest's CLOCK_MONOTONIC: under QEMU with
//! `-icount` they are emulated time, repeatable from run to run.
//!
//! ```text
//! exanest-bench latency      [--modes pin,prefault,on-demand] [--reps N]
//! exanest-bench first-touch  [--size BYTES]
//! exanest-bench register     [--max BYTES]
//! exanest-bench touch-ahead  [--size BYTES]
//! exanest-bench memory       [--size BYTES]
//! exanest-bench cpu-fault    [--pages N]
//! exanest-bench fault-service [--size BYTES] [--reps N]
//! exanest-bench churn        [--total BYTES]
//! exanest-bench storm        [--size BYTES]
//! exanest-bench memlock      [--job BYTES]
//! exanest-bench thp          [--size BYTES] [--secs S]
//! exanest-bench memcg        [--limit BYTES]
//! exanest-bench processes    [--size BYTES] [--ms MS]
//! exanest-bench fairness     [--reps N]
//! exanest-bench queue        [--reps N] [--ms MS]
//! exanest-bench eviction     [--size BYTES] [--passes N]
//! exanest-bench queue-move   [--reps N]   (the driver loaded with contexts=1)
//! exanest-bench open         [--reps N]
//! exanest-bench net|net-cold|net-small-cold|net-many|net-loss|net-mailbox|net-pingpong|net-incast
//! exanest-bench all          [--quick]
//! ```

use exanest_dma::{Access, Device, Error, Mode, QueueCompletion};

mod netbench;
mod scale;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const MODES: [Mode; 3] = Mode::ALL;

/// A fresh anonymous mapping that nothing has touched (the allocator would reuse pages).
struct Buf {
    ptr: *mut u8,
    len: usize,
}

impl Buf {
    fn new(len: usize, thp: bool) -> Res<Self> {
        // SAFETY: A private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err("mmap failed".into());
        }
        let advice = if thp {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: `p` is our mapping of `len` bytes.
        unsafe { libc::madvise(p, len, advice) };
        Ok(Buf { ptr: p.cast(), len })
    }

    fn addr(&self) -> u64 {
        self.ptr as u64
    }

    fn fill(&mut self, seed: u8) {
        // SAFETY: Our mapping of `len` bytes; no copy is pending.
        let s = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) };
        for (i, b) in s.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
    }

    fn slice(&self) -> &[u8] {
        // SAFETY: Our mapping; no copy is pending.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: Our mapping.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// SAFETY: The mapping is ours alone (private, anonymous), stays at `ptr` for `len` bytes while
// the `Buf` lives, moves included, and goes (munmap) only when it is dropped.
unsafe impl Send for Buf {}
// SAFETY: As for `Send`: the mapping never moves and lives until the value is dropped.
unsafe impl exanest_dma::Buffer for Buf {
    fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}
// SAFETY: As for `Buffer`; the mapping is writable.
unsafe impl exanest_dma::BufferMut for Buf {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

fn copy(dev: &Device, src: u64, dst: u64, len: usize) -> Res<()> {
    // SAFETY: The callers pass ranges inside registered buffers they do not touch meanwhile.
    let c = unsafe { dev.copy_raw(src, dst, len as u64)? };
    dev.wait_cookie(c, None)?;
    Ok(())
}

fn register(dev: &Device, b: &Buf, access: Access, mode: Mode, window: Option<u32>) -> Res<u32> {
    // SAFETY: The buffer outlives the region (callers deregister before dropping it).
    Ok(unsafe { dev.register_raw_window(b.addr(), b.len as u64, access, mode, window)? })
}

/// What a process pays to start and stop using the engine: open(2) of the device (the
/// process's state, its fault thread and IOMMU domain) and close(2) (their teardown), p50 and
/// p99 of `reps` of each, CLOCK_MONOTONIC.
fn open_close(reps: usize) -> Res<()> {
    let (mut open, mut close) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        let t0 = Instant::now();
        let dev = Device::open(0)?;
        open.push(us(t0));
        let t1 = Instant::now();
        drop(dev);
        close.push(us(t1));
    }
    let (o50, o99) = p50_p99(&mut open);
    let (c50, c99) = p50_p99(&mut close);
    println!(
        "{{\"bench\":\"open\",\"clock\":\"CLOCK_MONOTONIC\",\"reps\":{reps},\"open_p50_us\":{o50:.1},\"open_p99_us\":{o99:.1},\"close_p50_us\":{c50:.1},\"close_p99_us\":{c99:.1}}}"
    );
    Ok(())
}

/// Latency of one copy with warm mappings, per size and mode; throughput of 64 MiB copies.
fn latency(dev: &Device, modes: &[Mode], reps: usize, max: usize) -> Res<()> {
    for &mode in modes {
        let mut src = Buf::new(max, false)?;
        let dst = Buf::new(max, false)?;
        src.fill(1);
        let hs = register(dev, &src, Access::Read, mode, None)?;
        let hd = register(dev, &dst, Access::Write, mode, None)?;
        copy(dev, src.addr(), dst.addr(), max)?; // warm: every page mapped
        let mut size = 64;
        while size <= max {
            let mut t = Vec::new();
            for _ in 0..reps {
                let t0 = Instant::now();
                copy(dev, src.addr(), dst.addr(), size)?;
                t.push(us(t0));
            }
            t.sort_by(f64::total_cmp);
            let med = t[t.len() / 2];
            println!(
                "{{\"bench\":\"latency\",\"mode\":\"{}\",\"size\":{size},\"us\":{med:.3},\"mbps\":{:.1}}}",
                mode,
                size as f64 / med
            );
            size *= 4;
        }
        dev.deregister(hs)?;
        dev.deregister(hd)?;
    }
    Ok(())
}

/// CPU time so far: this process (user, system) and the whole machine's system time (which
/// includes the driver's fault workers), in microseconds.
fn cpu_times() -> (f64, f64, f64) {
    // SAFETY: `ru` is written by getrusage.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: A valid rusage to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    // /proc/stat "cpu" line: user nice system idle iowait irq softirq, in USER_HZ (1/100 s).
    let sys = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let f: Vec<f64> = s
                .lines()
                .next()?
                .split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse().ok())
                .collect();
            Some((f.get(2)? + f.get(5)? + f.get(6)?) * 1e4)
        })
        .unwrap_or(0.0);
    (tv(ru.ru_utime), tv(ru.ru_stime), sys)
}

/// This process's CPU time so far, user and system, ns (CLOCK_PROCESS_CPUTIME_ID: the
/// scheduler's exact run time, not the tick-sampled getrusage).
fn self_cpu_ns() -> u64 {
    cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock_ns(clk: libc::clockid_t) -> u64 {
    // SAFETY: `ts` is written by clock_gettime.
    let mut ts: libc::timespec = unsafe { core::mem::zeroed() };
    // SAFETY: A valid timespec to fill.
    if unsafe { libc::clock_gettime(clk, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The driver's threads' CPU time so far, ns: every fault thread (`exanest-fault/<id>`) and
/// interrupt thread (`irq/<n>-exanest_dma`) alive, each by its own CPU clock (the scheduler's
/// exact run time; `clock_getcpuclockid`). Without IRQ time accounting (the evaluation kernel
/// has none), hard interrupt time counts to whichever thread it interrupted.
fn driver_cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.contains("exanest") && !c.starts_with("exanest-bench"))
        })
        .map(|pid| {
            let mut clk: libc::clockid_t = 0;
            // SAFETY: `clk` is a valid out pointer.
            if unsafe { libc::clock_getcpuclockid(pid, &mut clk) } != 0 {
                return 0;
            }
            cpu_clock_ns(clk)
        })
        .sum()
}

/// First touch: register never-touched buffers and copy them once; the time includes the
/// registration, and every fault for the on-demand mode. Also the CPU time it cost.
fn first_touch(dev: &Device, size: usize) -> Res<()> {
    for mode in MODES {
        let mut src = Buf::new(size, false)?;
        let dst = Buf::new(size, false)?;
        src.fill(2);
        let c0 = dev.counters()?;
        let (u0, s0, k0) = cpu_times();
        let drv0 = driver_cpu_ns();
        // `make profile BENCH=first-touch` times the on-demand mode's.
        let prof = matches!(mode, Mode::OnDemand);
        let t0 = Instant::now();
        if prof {
            prof_mark();
        }
        let hs = register(dev, &src, Access::Read, mode, None)?;
        let hd = register(dev, &dst, Access::Write, mode, None)?;
        let treg = us(t0);
        copy(dev, src.addr(), dst.addr(), size)?;
        if prof {
            prof_mark();
        }
        let total = us(t0);
        let drv = driver_cpu_ns().saturating_sub(drv0) as f64 / 1e3;
        let (u1, s1, k1) = cpu_times();
        let c1 = dev.counters()?;
        let ok = src.slice() == dst.slice();
        dev.deregister(hs)?;
        dev.deregister(hd)?;
        // Kernel time outside this process: the fault workers and interrupt handling
        // (/proc/stat has 10 ms resolution).
        let other = ((k1 - k0) - (s1 - s0)).max(0.0);
        println!(
            "{{\"bench\":\"first-touch\",\"mode\":\"{}\",\"size\":{size},\"register_us\":{treg:.1},\"total_us\":{total:.1},\"faults\":{},\"ok\":{ok},\"user_us\":{:.0},\"sys_us\":{:.0},\"other_kernel_us\":{other:.0},\"driver_threads_cpu_us\":{drv:.0}}}",
            mode,
            c1.faults - c0.faults,
            u1 - u0,
            s1 - s0
        );
    }
    Ok(())
}

/// Buffer churn, the thesis's workload: every message of `size` bytes goes from a buffer the
/// application has just written and never registered (a fresh mapping each time, as messages
/// from malloc'd memory are), registered, copied to a long-lived destination, deregistered.
/// `total` bytes per mode. Prints, per mode: the time per message from registration to
/// deregistration, the throughput, and the CPU it took (this process's user and system time,
/// and the rest of the machine's kernel time, which holds the fault thread: /proc/stat, 10 ms
/// steps) as a share of the wall time, with the faults and pages pinned per message.
fn churn(dev: &Device, size: usize, total: usize) -> Res<()> {
    let n = (total / size).max(1);
    for mode in MODES {
        let dst = Buf::new(size, false)?;
        let hd = register(dev, &dst, Access::Write, mode, None)?;
        // Warm: the destination is long-lived and mapped.
        let mut first = Buf::new(size, false)?;
        first.fill(1);
        let h = register(dev, &first, Access::Read, mode, None)?;
        copy(dev, first.addr(), dst.addr(), size)?;
        dev.deregister(h)?;
        // The messages, written by the application before the clock starts.
        let mut bufs = Vec::with_capacity(n);
        for i in 0..n {
            let mut b = Buf::new(size, false)?;
            b.fill(i as u8);
            bufs.push(b);
        }
        let c0 = dev.counters()?;
        let (u0, s0, k0) = cpu_times();
        let (me0, drv0) = (self_cpu_ns(), driver_cpu_ns());
        let t0 = Instant::now();
        for b in &bufs {
            let h = register(dev, b, Access::Read, mode, None)?;
            copy(dev, b.addr(), dst.addr(), size)?;
            dev.deregister(h)?;
        }
        let wall = us(t0);
        let (me, drv) = (
            (self_cpu_ns() - me0) as f64 / 1e3,
            (driver_cpu_ns().saturating_sub(drv0)) as f64 / 1e3,
        );
        let (u1, s1, k1) = cpu_times();
        let c1 = dev.counters()?;
        let ok = bufs.last().is_none_or(|b| b.slice() == dst.slice());
        dev.deregister(hd)?;
        let other = ((k1 - k0) - (s1 - s0)).max(0.0);
        println!(
            "{{\"bench\":\"churn\",\"mode\":\"{mode}\",\"size\":{size},\"messages\":{n},\"us_per_message\":{:.2},\"mb_per_s\":{:.1},\"cpu_pct\":{:.1},\"process_cpu_us\":{me:.0},\"driver_threads_cpu_us\":{drv:.0},\"user_us\":{:.0},\"sys_us\":{:.0},\"other_kernel_us\":{other:.0},\"faults_per_message\":{:.1},\"ok\":{ok}}}",
            wall / n as f64,
            (size * n) as f64 / wall,
            100.0 * (me + drv) / wall,
            u1 - u0,
            s1 - s0,
            (c1.faults - c0.faults) as f64 / n as f64,
        );
    }
    Ok(())
}

/// Registration cost against region size, when 1 MiB of the region is then used, and the
/// deregistration's.
fn register_cost(dev: &Device, max: usize) -> Res<()> {
    let mut size = 1 << 20;
    while size <= max {
        for mode in MODES {
            let buf = Buf::new(size, false)?;
            let dst = Buf::new(1 << 20, false)?;
            let hd = register(dev, &dst, Access::Write, Mode::Pin, None)?;
            let t0 = Instant::now();
            let hs = match register(dev, &buf, Access::Read, mode, None) {
                Ok(h) => h,
                Err(e) => {
                    println!(
                        "{{\"bench\":\"register\",\"mode\":\"{}\",\"size\":{size},\"error\":\"{e}\"}}",
                        mode
                    );
                    dev.deregister(hd)?;
                    continue;
                }
            };
            let treg = us(t0);
            copy(dev, buf.addr(), dst.addr(), 1 << 20)?;
            let total = us(t0);
            let c = dev.counters()?;
            let t1 = Instant::now();
            dev.deregister(hs)?;
            let tdereg = us(t1);
            // The 1 MiB destination is pinned in every mode: count the region's pages only.
            println!(
                "{{\"bench\":\"register\",\"mode\":\"{}\",\"size\":{size},\"register_us\":{treg:.1},\"with_use_us\":{total:.1},\"deregister_us\":{tdereg:.1},\"pinned_pages\":{}}}",
                mode,
                c.pages_pinned.saturating_sub(256)
            );
            dev.deregister(hd)?;
        }
        size *= 4;
    }
    Ok(())
}

/// Touch-ahead sweep: faults per MiB and time, sequential and strided, THP on and off, for
/// fixed windows, the adaptive one, and the default (no window asked: adaptive, with map-ahead;
/// printed as window -1).
fn touch_ahead(dev: &Device, size: usize) -> Res<()> {
    for thp in [false, true] {
        for pattern in ["sequential", "strided"] {
            let windows = [0u32, 1, 4, 16, 64, 256, 511, u32::MAX].map(Some);
            for window in windows.into_iter().chain([None]) {
                let mut src = Buf::new(size, thp)?;
                let dst = Buf::new(size, thp)?;
                src.fill(3);
                let hs = register(dev, &src, Access::Read, Mode::OnDemand, window)?;
                let hd = register(dev, &dst, Access::Write, Mode::OnDemand, window)?;
                let c0 = dev.counters()?;
                let t0 = Instant::now();
                if pattern == "sequential" {
                    copy(dev, src.addr(), dst.addr(), size)?;
                } else {
                    // 4 KiB every 64 KiB: the access pattern a touch-ahead window can waste.
                    let mut off = 0;
                    while off < size {
                        copy(dev, src.addr() + off as u64, dst.addr() + off as u64, 4096)?;
                        off += 64 << 10;
                    }
                }
                let t = us(t0);
                let c1 = dev.counters()?;
                dev.deregister(hs)?;
                dev.deregister(hd)?;
                let mib = size as f64 / (1 << 20) as f64;
                let window = window.map_or(-1, i64::from);
                println!(
                    "{{\"bench\":\"touch-ahead\",\"thp\":{thp},\"pattern\":\"{pattern}\",\"window\":{window},\"us\":{t:.1},\"faults_per_mib\":{:.2},\"pages_mapped\":{}}}",
                    (c1.faults - c0.faults) as f64 / mib,
                    c1.pages_resolved - c0.pages_resolved
                );
            }
        }
    }
    Ok(())
}

/// Eviction overhead: the same copy of `size` bytes between on-demand regions, `passes` times
/// over, with no budget to speak of and with budgets below the working set (the pages the copy
/// touches are evicted and fault again on the next pass). Each budget on a fresh file.
fn eviction(size: usize, passes: usize) -> Res<()> {
    let pages = (2 * size / 4096) as u64;
    for budget in [0u64, pages, pages / 2, 256] {
        let dev = Device::open(0)?;
        if budget != 0 {
            dev.budget(Some(budget))?;
        }
        let mut src = Buf::new(size, false)?;
        let dst = Buf::new(size, false)?;
        src.fill(6);
        let hs = register(&dev, &src, Access::Read, Mode::OnDemand, None)?;
        let hd = register(&dev, &dst, Access::Write, Mode::OnDemand, None)?;
        let c0 = dev.counters()?;
        let t0 = Instant::now();
        copy(&dev, src.addr(), dst.addr(), size)?;
        let first = us(t0);
        let t1 = Instant::now();
        for _ in 1..passes {
            copy(&dev, src.addr(), dst.addr(), size)?;
        }
        let steady = us(t1) / (passes.max(2) - 1) as f64;
        let c1 = dev.counters()?;
        let b = dev.budget(None)?;
        dev.deregister(hs)?;
        dev.deregister(hd)?;
        println!(
            "{{\"bench\":\"eviction\",\"clock\":\"CLOCK_MONOTONIC\",\"size\":{size},\"working_set_pages\":{pages},\"budget\":{},\"passes\":{passes},\"first_us\":{first:.1},\"pass_us\":{steady:.1},\"faults\":{},\"evicted_pages\":{},\"evictions\":{}}}",
            b.pages,
            c1.faults - c0.faults,
            b.evicted_pages,
            b.evictions
        );
    }
    Ok(())
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |p| p * 4)
}

/// Memory footprint of a sparse workload: a large region of which 1/64 is used.
fn memory(dev: &Device, size: usize) -> Res<()> {
    for mode in MODES {
        let src = Buf::new(size, false)?;
        let dst = Buf::new(64 << 10, false)?;
        let hd = register(dev, &dst, Access::Write, Mode::Pin, None)?;
        let r0 = rss_kib();
        let hs = register(dev, &src, Access::Read, mode, None)?;
        let mut off = 0;
        while off < size {
            copy(dev, src.addr() + off as u64, dst.addr(), 4096)?;
            off += 256 << 10;
        }
        let r1 = rss_kib();
        let c = dev.counters()?;
        println!(
            "{{\"bench\":\"memory\",\"mode\":\"{}\",\"size\":{size},\"rss_kib\":{},\"pinned_kib\":{},\"mapped_kib\":{}}}",
            mode,
            r1.saturating_sub(r0),
            c.pages_pinned.saturating_sub(16) * 4,
            c.pages_mapped.saturating_sub(16) * 4
        );
        dev.deregister(hs)?;
        dev.deregister(hd)?;
    }
    Ok(())
}

/// The CPU's own page fault on the same kind of page, for comparison with the device's.
fn cpu_fault(pages: usize) -> Res<()> {
    let b = Buf::new(pages * 4096, false)?;
    let t0 = Instant::now();
    prof_mark();
    for i in 0..pages {
        // SAFETY: Inside our mapping.
        unsafe { b.ptr.add(i * 4096).write_volatile(1) };
    }
    prof_mark();
    let t = us(t0);
    // Then each fault of as many fresh pages timed alone (CLOCK_MONOTONIC around the write,
    // less the median of the clock read's own cost), for its percentiles: the device fault's
    // p99 set against the CPU fault's own.
    let clock = || cpu_clock_ns(libc::CLOCK_MONOTONIC);
    let mut empty: Vec<u64> = (0..1024)
        .map(|_| {
            let a = clock();
            clock().saturating_sub(a)
        })
        .collect();
    empty.sort_unstable();
    let timer = empty[empty.len() / 2];
    let b2 = Buf::new(pages * 4096, false)?;
    let mut each = Vec::with_capacity(pages);
    for i in 0..pages {
        let a = clock();
        // SAFETY: Inside our mapping.
        unsafe { b2.ptr.add(i * 4096).write_volatile(1) };
        each.push(clock().saturating_sub(a).saturating_sub(timer) as f64 / 1000.0);
    }
    let (p50, p99) = p50_p99(&mut each);
    println!(
        "{{\"bench\":\"cpu-fault\",\"clock\":\"CLOCK_MONOTONIC\",\"pages\":{pages},\"us_per_fault\":{:.3},\"timed_p50_us\":{:.3},\"timed_p90_us\":{:.3},\"timed_p99_us\":{:.3},\"timed_max_us\":{:.3},\"timer_ns\":{timer}}}",
        t / pages as f64,
        p50,
        percentile(&each, 90),
        p99,
        each[each.len() - 1]
    );
    Ok(())
}

/// The engine's fault log (debugfs, Documentation/design.rst "Fault timings").
const FAULT_LOG: &str = "/sys/kernel/debug/exanest-dma0/faults";

/// Send `on`, `off` or `clear` to the engine's fault log.
fn fault_log(cmd: &str) -> Res<()> {
    std::fs::write(FAULT_LOG, cmd).map_err(|e| format!("{FAULT_LOG}: {cmd}: {e}"))?;
    Ok(())
}

/// With EXANEST_PROF set, mark the start or end of a span this bench times for `make profile`
/// (scripts/profile.sh): HINT #100, which its TCG plugin (tests/qemu-model/insprof.c) watches
/// for, a NOP anywhere else (the unallocated hint space).
fn prof_mark() {
    #[cfg(target_arch = "aarch64")]
    if std::env::var_os("EXANEST_PROF").is_some() {
        // SAFETY: An unallocated HINT executes as a NOP: it reads and writes no register or
        // memory.
        unsafe { core::arch::asm!("hint #100", options(nomem, nostack, preserves_flags)) };
    }
}

/// One copy of `size` bytes between fresh on-demand regions with no touch-ahead (window 0):
/// every page faults. Returns the copy's time (us) and the faults answered.
fn faulting_copy(dev: &Device, size: usize) -> Res<(f64, u64)> {
    let mut src = Buf::new(size, false)?;
    let dst = Buf::new(size, false)?;
    src.fill(4);
    let hs = register(dev, &src, Access::Read, Mode::OnDemand, Some(0))?;
    let hd = register(dev, &dst, Access::Write, Mode::OnDemand, Some(0))?;
    let c0 = dev.counters()?;
    let t0 = Instant::now();
    prof_mark();
    copy(dev, src.addr(), dst.addr(), size)?;
    prof_mark();
    let t = us(t0);
    let c1 = dev.counters()?;
    dev.deregister(hs)?;
    dev.deregister(hd)?;
    Ok((t, c1.faults_resolved - c0.faults_resolved))
}

/// Device fault service time: exact per-stage percentiles from the engine's fault log over a
/// copy where every page faults (window 0), the copy's time per fault, and what keeping the
/// log costs: the same copy with the log off and on, alternately, `reps` times each (the
/// median of each pair's ratio).
fn fault_service(dev: &Device, size: usize, reps: usize) -> Res<()> {
    let (mut off, mut on, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    // The driver's threads' CPU time per fault, log off and on, and their ratio per pair.
    let (mut cpu_off, mut cpu_on, mut cpu_ratio) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        // Off then on, then on then off (ABBA): what the order does cancels out.
        let order = if rep % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let (mut pair, mut cpu) = ([0.0; 2], [0.0; 2]);
        for stamps in order {
            fault_log(if stamps { "on" } else { "off" })?;
            let drv0 = driver_cpu_ns();
            let (t, n) = faulting_copy(dev, size)?;
            pair[usize::from(stamps)] = t / n.max(1) as f64;
            cpu[usize::from(stamps)] =
                driver_cpu_ns().saturating_sub(drv0) as f64 / 1e3 / n.max(1) as f64;
        }
        off.push(pair[0]);
        on.push(pair[1]);
        ratio.push(pair[1] / pair[0]);
        cpu_off.push(cpu[0]);
        cpu_on.push(cpu[1]);
        cpu_ratio.push(cpu[1] / cpu[0]);
    }
    fault_log("on")?;
    fault_log("clear")?;
    let (t, n) = faulting_copy(dev, size)?;
    let log = std::fs::read_to_string(FAULT_LOG)?;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (p_off, p_on, cost) = (median(&mut off), median(&mut on), median(&mut ratio));
    let (c_off, c_on, c_cost) = (
        median(&mut cpu_off),
        median(&mut cpu_on),
        median(&mut cpu_ratio),
    );
    println!(
        "{{\"bench\":\"fault-service\",\"faults\":{n},\"bytes_per_fault\":{:.1},\"us_per_fault\":{:.2},\"us_per_fault_stamps_off\":{p_off:.3},\"us_per_fault_stamps_on\":{p_on:.3},\"stamps_cost_pct\":{:.2},\"driver_cpu_us_per_fault_stamps_off\":{c_off:.3},\"driver_cpu_us_per_fault_stamps_on\":{c_on:.3},\"stamps_cpu_cost_pct\":{:.2},\"reps\":{reps},\"log\":{}}}",
        size as f64 / n.max(1) as f64,
        t / n.max(1) as f64,
        (cost - 1.0) * 100.0,
        (c_cost - 1.0) * 100.0,
        log.trim()
    );
    Ok(())
}

/// The cgroup's `oom_kill` count (`memory.events`): how many of its processes the OOM killer
/// ended.
fn oom_kills(cg: &str) -> u64 {
    std::fs::read_to_string(format!("{cg}/memory.events"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("oom_kill ").and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Under a memory cgroup limit of `limit` bytes, register a region of twice that size and use
/// 1/64 of it: pinning must charge the whole region and fails; on-demand keeps working. Each
/// mode runs in a child process (the OOM killer may end it), which opens the engine itself. A
/// child killed by a signal is reported as OOM-killed only when the cgroup's `memory.events`
/// counted an `oom_kill` for it.
fn memcg(limit: usize) -> Res<()> {
    let cg = "/sys/fs/cgroup/exanest-bench";
    let _ = std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
    let _ = std::fs::create_dir(cg);
    std::fs::write(format!("{cg}/memory.max"), limit.to_string())?;
    std::fs::write(format!("{cg}/memory.swap.max"), "0").ok();
    for mode in MODES {
        let kills = oom_kills(cg);
        // SAFETY: The child only runs the code below and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = (|| -> Res<i32> {
                std::fs::write(format!("{cg}/cgroup.procs"), std::process::id().to_string())?;
                let dev = Device::open(0)?;
                let size = 2 * limit;
                let src = Buf::new(size, false)?;
                let dst = Buf::new(64 << 10, false)?;
                let hd = register(&dev, &dst, Access::Write, Mode::OnDemand, None)?;
                let hs = match register(&dev, &src, Access::Read, mode, None) {
                    Ok(h) => h,
                    Err(e) => {
                        println!(
                            "{{\"bench\":\"memcg\",\"mode\":\"{}\",\"limit\":{limit},\"size\":{size},\"result\":\"register failed: {e}\"}}",
                            mode
                        );
                        return Ok(1);
                    }
                };
                let mut off = 0;
                while off < size {
                    copy(&dev, src.addr() + off as u64, dst.addr(), 4096)?;
                    off += 256 << 10;
                }
                println!(
                    "{{\"bench\":\"memcg\",\"mode\":\"{}\",\"limit\":{limit},\"size\":{size},\"result\":\"ok\"}}",
                    mode
                );
                dev.deregister(hs)?;
                dev.deregister(hd)?;
                Ok(0)
            })()
            .unwrap_or(2);
            // SAFETY: Leave the child without running the parent's atexit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: `pid` is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if libc::WIFSIGNALED(status) {
            let oom = oom_kills(cg).saturating_sub(kills);
            let why = if oom > 0 {
                "the OOM killer: memory.events oom_kill +".to_string() + &oom.to_string()
            } else {
                "not the OOM killer: memory.events oom_kill unchanged".to_string()
            };
            println!(
                "{{\"bench\":\"memcg\",\"mode\":\"{}\",\"limit\":{limit},\"size\":{},\"result\":\"killed by signal {} ({why})\"}}",
                mode,
                2 * limit,
                libc::WTERMSIG(status)
            );
        }
    }
    let _ = std::fs::remove_dir(cg);
    Ok(())
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.windows(2)
        .find(|w| w[0] == name)
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(default)
}

/// Fork a child that runs `f` and exits with its status (0: it returned `Ok`).
fn spawn(f: impl FnOnce() -> Res<()>) -> Res<libc::pid_t> {
    // SAFETY: The benchmark is single-threaded; the child only runs `f` and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err("fork failed".into());
    }
    if pid == 0 {
        let code = match f() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("exanest-bench child: {e}");
                1
            }
        };
        // SAFETY: Ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// Wait for a child: error unless it exited with status 0.
fn reap(pid: libc::pid_t) -> Res<()> {
    let mut st = 0;
    // SAFETY: `st` is a valid out pointer; `pid` is our child.
    if unsafe { libc::waitpid(pid, &mut st, 0) } != pid || st != 0 {
        return Err(format!("child {pid}: status {st:#x}").into());
    }
    Ok(())
}

/// A pipe: (read end, write end).
fn pipe() -> Res<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err("pipe failed".into());
    }
    // SAFETY: Both descriptors are fresh and owned by nobody else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// What a child of [`together`] is given: [`Gang::start`] once it has set up, then
/// [`Gang::report`] with its result, before its teardown.
struct Gang {
    ready: Option<std::fs::File>,
    go: std::fs::File,
    results: std::fs::File,
    /// Read once the result is written: the parent writes a byte per child once it has every
    /// result, so that no child's teardown runs while another still measures.
    hold: std::fs::File,
    reported: bool,
}

impl Gang {
    /// Set up: returns when every child has set up (and the parent said go).
    fn start(&mut self) -> Res<()> {
        use std::io::{Read, Write};
        if let Some(mut w) = self.ready.take() {
            w.write_all(b"r")?;
        }
        self.go.read_exact(&mut [0u8; 1])?;
        Ok(())
    }

    /// The child's line of the result; returns once every child has reported (its teardown,
    /// after it, is not timed, and runs while no other child measures).
    fn report(&mut self, line: &str) -> Res<()> {
        use std::io::{Read, Write};
        self.results.write_all(format!("{line}\n").as_bytes())?;
        self.reported = true;
        // A byte, or an error if the parent is gone: either way the measuring is over.
        let _ = self.hold.read(&mut [0u8; 1]);
        Ok(())
    }
}

/// Run `child(k, gang)` in `n` child processes (`k` = 0..n) at once: each sets up, calls
/// [`Gang::start`], which returns when every child has set up and `before_go` has run in the
/// parent, then reports its line. Returns the children's lines (in the order they came) and
/// the time from the start to the last line, us (CLOCK_MONOTONIC; the children's teardown,
/// closing the engine, is not in it, nor does it run before every child has reported: under
/// `-icount` QEMU runs the vCPUs round-robin in one thread, and a process woken on one vCPU
/// waited for the other to finish the teardown of the processes that had ended first, 5-15
/// ms at the end of a run of 8). An error if any child failed.
fn together(
    n: usize,
    child: impl Fn(usize, &mut Gang) -> Res<()>,
    before_go: impl FnOnce() -> Res<()>,
) -> Res<(Vec<String>, f64)> {
    use std::io::{BufRead, Read, Write};
    let (mut ready_r, ready_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let (mut res_r, res_w) = pipe()?;
    let (hold_r, mut hold_w) = pipe()?;
    let mut pids = Vec::new();
    for k in 0..n {
        let mut gang = Gang {
            ready: Some(ready_w.try_clone()?),
            go: go_r.try_clone()?,
            results: res_w.try_clone()?,
            hold: hold_r.try_clone()?,
            reported: false,
        };
        let child = &child;
        pids.push(spawn(move || {
            let res = child(k, &mut gang);
            // Every child holds every pipe's ends (fork): one that failed before it was ready
            // says so, or the parent would wait for it; one that failed before it reported
            // says so too (a line of its own), or the parent would wait for its result.
            if let (Err(_), Some(mut w)) = (&res, gang.ready.take()) {
                let _ = w.write_all(b"e");
            }
            if res.is_err() && !gang.reported {
                let _ = gang.results.write_all(b"!\n");
            }
            res
        })?);
    }
    drop((ready_w, go_r, res_w, hold_r));
    let mut go_w = go_w;
    // Whatever fails, every child that waits is told to go (each holds the write end of `go`
    // too, so it would never see its end) and every child is reaped before it is reported.
    let mut ready = vec![0u8; n];
    let mut ran = ready_r
        .read_exact(&mut ready)
        .map_err(Into::into)
        .and_then(|()| {
            if ready.contains(&b'e') {
                Err("a process failed to set up".into())
            } else {
                before_go()
            }
        });
    let t0 = Instant::now();
    let mut lines = Vec::new();
    let mut wall = 0.0;
    let go = go_w.write_all(&vec![0u8; n]);
    if ran.is_ok() {
        // Until the last result, not until the children are gone: their teardown (closing
        // the engine) is not part of what they measured.
        let mut results = std::io::BufReader::new(&mut res_r);
        ran = go.map_err(Into::into).and_then(|()| {
            while lines.len() < n {
                let mut l = String::new();
                if results.read_line(&mut l)? == 0 {
                    break;
                }
                lines.push(l.trim_end().to_string());
            }
            wall = us(t0);
            Ok(())
        });
    }
    // Every child that reported waits for its byte before its teardown, whatever failed.
    let _ = hold_w.write_all(&vec![0u8; n]);
    let reaped = pids.into_iter().try_for_each(reap);
    ran?;
    reaped?;
    if lines.len() != n || lines.iter().any(|l| l == "!") {
        return Err(format!("{} results from {n} processes", lines.len()).into());
    }
    Ok((lines, wall))
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one gets everything.
fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 {
        return 0.0;
    }
    s * s / (x.len() as f64 * q)
}

/// 1, 2, 4, 8 and 16 processes at once, each on its own context (or sharing them), each
/// copying `size` bytes at a time for `ms` milliseconds, with COPY + WAIT (`path` ioctl) or on
/// its user-level queue (`path` queue): the aggregate throughput, each process's, and Jain's
/// index over them.
fn processes(size: usize, ms: u64) -> Res<()> {
    for (path, n) in ["ioctl", "queue"]
        .into_iter()
        .flat_map(|p| [1usize, 2, 4, 8, 16].map(|n| (p, n)))
    {
        let child = |_k, gang: &mut Gang| -> Res<()> {
            let dev = Device::open(0)?;
            let mut src = Buf::new(size, false)?;
            let dst = Buf::new(size, false)?;
            src.fill(3);
            register(&dev, &src, Access::Read, Mode::Pin, None)?;
            register(&dev, &dst, Access::Write, Mode::Pin, None)?;
            let mut q = match path {
                "queue" => Some(dev.create_queue(4, 4)?),
                _ => None,
            };
            // One copy to completion: COPY + WAIT, or posted on the queue and waited for
            // asleep (QUEUE_WAIT: a process spinning on its ring would take a CPU from the
            // others).
            let mut one = || -> Res<()> {
                let Some(q) = q.as_mut() else {
                    return copy(&dev, src.addr(), dst.addr(), size);
                };
                let mut c = [QueueCompletion::default(); 1];
                // SAFETY: Both ranges are the pinned regions above; nothing reads `dst` while
                // the copy is outstanding.
                unsafe { q.post(src.addr(), dst.addr(), size as u32, 1)? };
                while q.poll(&mut c) == 0 {
                    q.wait(Some(std::time::Duration::from_secs(10)))?;
                }
                if c[0].status != 0 {
                    return Err(format!("queue copy: status {}", c[0].status).into());
                }
                Ok(())
            };
            one()?;
            gang.start()?;
            let t0 = Instant::now();
            let mut bytes = 0u64;
            while t0.elapsed().as_millis() < u128::from(ms) {
                one()?;
                bytes += size as u64;
            }
            gang.report(&format!("{bytes} {}", us(t0)))
        };
        let (lines, wall) = together(n, child, || Ok(()))?;
        let mut total = 0u64;
        let mut each = Vec::new();
        for l in &lines {
            let mut f = l.split_whitespace();
            let bytes: u64 = f.next().ok_or("result")?.parse()?;
            let el: f64 = f.next().ok_or("result")?.parse()?;
            total += bytes;
            each.push(bytes as f64 / el);
        }
        let list: Vec<String> = each.iter().map(|v| format!("{v:.1}")).collect();
        println!(
            "{{\"bench\":\"processes\",\"path\":\"{path}\",\"processes\":{n},\"size\":{size},\"aggregate_mbps\":{:.1},\"jain\":{:.4},\"per_process_mbps\":[{}]}}",
            total as f64 / wall,
            jain(&each),
            list.join(",")
        );
    }
    Ok(())
}

/// Latencies in µs of `reps` 64 B copies: (p50, p99).
fn small_copies(reps: usize) -> Res<(f64, f64)> {
    let dev = Device::open(0)?;
    let mut src = Buf::new(4096, false)?;
    let dst = Buf::new(4096, false)?;
    src.fill(4);
    register(&dev, &src, Access::Read, Mode::Pin, None)?;
    register(&dev, &dst, Access::Write, Mode::Pin, None)?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        copy(&dev, src.addr(), dst.addr(), 64)?;
        t.push(us(t0));
    }
    t.sort_by(f64::total_cmp);
    Ok((t[t.len() / 2], t[t.len() * 99 / 100]))
}

/// 64 B copies alone, then beside a process streaming 64 MiB copies (on its own context): the
/// small copies' p50 and p99 both times, and the data path's quantum in µs (the most a small
/// copy should wait behind the stream, with round-robin arbitration).
fn fairness(reps: usize) -> Res<()> {
    use std::io::{Read, Write};
    let (alone50, alone99) = small_copies(reps)?;
    let (mut ready_r, ready_w) = pipe()?;
    let (stop_r, mut stop_w) = pipe()?;
    let mut rw = ready_w.try_clone()?;
    let mut sr = stop_r.try_clone()?;
    let stream = spawn(move || {
        let size = 64 << 20;
        let dev = Device::open(0)?;
        let mut src = Buf::new(size, false)?;
        let dst = Buf::new(size, false)?;
        src.fill(5);
        register(&dev, &src, Access::Read, Mode::Pin, None)?;
        register(&dev, &dst, Access::Write, Mode::Pin, None)?;
        // SAFETY: `sr` is ours; non-blocking so the loop can poll it.
        unsafe {
            libc::fcntl(
                std::os::fd::AsRawFd::as_raw_fd(&sr),
                libc::F_SETFL,
                libc::O_NONBLOCK,
            )
        };
        rw.write_all(b"r")?;
        let mut b = [0u8; 1];
        while sr.read(&mut b).is_err() {
            copy(&dev, src.addr(), dst.addr(), size)?;
        }
        Ok(())
    })?;
    drop((ready_w, stop_r));
    let mut b = [0u8; 1];
    ready_r.read_exact(&mut b)?;
    let res = small_copies(reps);
    stop_w.write_all(b"s")?;
    reap(stream)?;
    let (busy50, busy99) = res?;
    let engine =
        std::fs::read_to_string("/sys/kernel/debug/exanest-dma0/engine").unwrap_or_default();
    let bw: f64 = engine
        .split("\"bandwidth_mbps\": ")
        .nth(1)
        .and_then(|s| s.split([',', '}']).next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0.0);
    let quantum = if bw > 0.0 { 65536.0 / bw } else { 0.0 };
    println!(
        "{{\"bench\":\"fairness\",\"reps\":{reps},\"alone_p50_us\":{alone50:.2},\"alone_p99_us\":{alone99:.2},\"beside_stream_p50_us\":{busy50:.2},\"beside_stream_p99_us\":{busy99:.2},\"quantum_us\":{quantum:.2}}}"
    );
    Ok(())
}

/// Busy-poll `q` until one completion arrives (error after 10 s without one).
fn poll_one(q: &mut exanest_dma::Queue, c: &mut [QueueCompletion]) -> Res<usize> {
    let t0 = Instant::now();
    let mut spins = 0u32;
    loop {
        let n = q.poll(c);
        if n > 0 {
            return Ok(n);
        }
        spins = spins.wrapping_add(1);
        if spins % 4096 == 0 && t0.elapsed().as_secs() >= 10 {
            return Err("no completion in 10 s".into());
        }
        std::hint::spin_loop();
    }
}

/// Batched resolution (issue 23): transfers started together on every channel of a queue (up
/// to 8), 4 KiB each from fresh source pages to fresh destination pages next to the others', in
/// on-demand regions with window 0, so every channel faults at once; `rounds` rounds. Against
/// the same transfers one at a time (each fault alone). Prints the time per fault of both
/// (CLOCK_MONOTONIC over the rounds / engine faults) and the faults the fault log counts as
/// resolved with others.
fn fault_batch(rounds: usize) -> Res<()> {
    let dev = Device::open(0)?; // a file of its own: one queue per file
    let mut q = match dev.create_queue(6, 6) {
        Ok(q) => q,
        Err(e @ (Error::Os(libc::ENOTTY) | Error::Abi(exanest_dma::Errno::OpNotSupp))) => {
            println!("{{\"bench\":\"fault-batch\",\"skipped\":\"{e}\"}}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let ch = q.channels().min(8) as usize;
    let mut c = [QueueCompletion::default(); 8];
    let mut run = |together: bool| -> Res<(f64, u64, i64, bool)> {
        let len = rounds * ch * 4096;
        let mut src = Buf::new(len, false)?;
        let dst = Buf::new(len, false)?;
        src.fill(12);
        let hs = register(&dev, &src, Access::Read, Mode::OnDemand, Some(0))?;
        let hd = register(&dev, &dst, Access::Write, Mode::OnDemand, Some(0))?;
        fault_log("clear")?;
        let k0 = dev.counters()?;
        let t0 = Instant::now();
        let mut failed = 0;
        for r in 0..rounds {
            let at = (r * ch * 4096) as u64;
            let batch = if together { ch } else { 1 };
            for first in (0..ch).step_by(batch) {
                for i in first..first + batch {
                    let off = at + (i * 4096) as u64;
                    // SAFETY: Both ranges lie in the regions above; nothing reads `dst`
                    // while a copy is outstanding.
                    unsafe { q.push(src.addr() + off, dst.addr() + off, 4096, i as u64)? };
                }
                q.ring();
                let mut got = 0;
                while got < batch {
                    let n = poll_one(&mut q, &mut c[..batch - got])?;
                    failed += c[..n].iter().filter(|c| c.status != 0).count();
                    got += n;
                }
            }
        }
        let t = us(t0);
        let faults = dev.counters()?.faults - k0.faults;
        let log = std::fs::read_to_string(FAULT_LOG)?;
        let batched = log
            .split("\"batched\": ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1);
        let ok = failed == 0 && src.slice() == dst.slice();
        dev.deregister(hs)?;
        dev.deregister(hd)?;
        Ok((t / faults.max(1) as f64, faults, batched, ok))
    };
    fault_log("on")?;
    let (alone, fa, ba, ok_a) = run(false)?;
    let (together, ft, bt, ok_t) = run(true)?;
    println!(
        "{{\"bench\":\"fault-batch\",\"clock\":\"CLOCK_MONOTONIC\",\"channels\":{ch},\"rounds\":{rounds},\"us_per_fault_alone\":{alone:.2},\"faults_alone\":{fa},\"batched_alone\":{ba},\"us_per_fault_together\":{together:.2},\"faults_together\":{ft},\"batched_together\":{bt},\"ok\":{}}}",
        ok_a && ok_t
    );
    Ok(())
}

/// p50 and p99 of `t` (sorted in place).
fn p50_p99(t: &mut [f64]) -> (f64, f64) {
    t.sort_by(f64::total_cmp);
    (percentile(t, 50), percentile(t, 99))
}

/// Percentile `p` of `sorted` (not empty): the element `p` % of the way in.
fn percentile(sorted: &[f64], p: usize) -> f64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// The user-level queue against the ioctls, on pinned memory: the latency of a 64 B copy from
/// post to completion (busy polling the CQ), p50 and p99 over `reps`, next to the same copy
/// with COPY + WAIT; then the message rate of 64 B copies for `ms` milliseconds with 1, 16 and
/// 64 copies kept outstanding (busy polling, each completion reposted at once). Times are
/// CLOCK_MONOTONIC (`Instant`). A driver or engine without queues prints a `skipped` line.
fn queue(reps: usize, ms: u64) -> Res<()> {
    const DEPTHS: [u32; 3] = [1, 16, 64];
    let dev = Device::open(0)?; // a file of its own: one queue per file, for its whole life
    let mut src = Buf::new(1 << 16, false)?;
    let dst = Buf::new(1 << 16, false)?;
    src.fill(6);
    register(&dev, &src, Access::Read, Mode::Pin, None)?;
    register(&dev, &dst, Access::Write, Mode::Pin, None)?;
    // The ioctl path first, before the file's context is given to the queue.
    copy(&dev, src.addr(), dst.addr(), 64)?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        copy(&dev, src.addr(), dst.addr(), 64)?;
        t.push(us(t0));
    }
    let (io50, io99) = p50_p99(&mut t);
    let mut q = match dev.create_queue(7, 7) {
        Ok(q) => q,
        Err(e @ (Error::Os(libc::ENOTTY) | Error::Abi(exanest_dma::Errno::OpNotSupp))) => {
            println!("{{\"bench\":\"queue\",\"skipped\":\"{e}\"}}");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let mut c = [QueueCompletion::default(); 64];
    let mut failed = 0u64;
    t.clear();
    for i in 0..=reps {
        let t0 = Instant::now();
        // SAFETY: Both ranges lie in the pinned regions above; nothing reads `dst` while a
        // copy is outstanding.
        unsafe { q.post(src.addr(), dst.addr(), 64, i as u64)? };
        poll_one(&mut q, &mut c[..1])?;
        if i > 0 {
            t.push(us(t0)); // the first copy warms the path
        }
        failed += u64::from(c[0].status != 0 || c[0].wr_id != i as u64);
    }
    let (q50, q99) = p50_p99(&mut t);
    let ok = failed == 0 && src.slice()[..64] == dst.slice()[..64];
    println!(
        "{{\"bench\":\"queue\",\"clock\":\"CLOCK_MONOTONIC\",\"size\":64,\"reps\":{reps},\"queue_p50_us\":{q50:.3},\"queue_p99_us\":{q99:.3},\"ioctl_p50_us\":{io50:.3},\"ioctl_p99_us\":{io99:.3},\"context\":{},\"channels\":{},\"ok\":{ok}}}",
        q.context(),
        q.channels()
    );
    for depth in DEPTHS {
        let depth = depth.min(q.capacity());
        let post = |q: &mut exanest_dma::Queue, id: u64| -> Res<()> {
            let slot = (id % u64::from(depth)) * 64;
            // SAFETY: As above: in the regions, `dst` not read meanwhile; each outstanding
            // copy has its own 64 B slot.
            unsafe { q.post(src.addr() + slot, dst.addr() + slot, 64, id)? };
            Ok(())
        };
        let mut id = 0u64;
        for _ in 0..depth {
            post(&mut q, id)?;
            id += 1;
        }
        let (mut done, mut failed) = (0u64, 0u64);
        let t0 = Instant::now();
        while t0.elapsed().as_millis() < u128::from(ms) {
            let n = poll_one(&mut q, &mut c)?;
            for x in &c[..n] {
                failed += u64::from(x.status != 0);
                post(&mut q, id)?;
                id += 1;
            }
            done += n as u64;
        }
        let el = t0.elapsed().as_secs_f64();
        while q.outstanding() > 0 {
            poll_one(&mut q, &mut c)?;
        }
        println!(
            "{{\"bench\":\"queue-rate\",\"clock\":\"CLOCK_MONOTONIC\",\"size\":64,\"depth\":{depth},\"copies\":{done},\"copies_per_s\":{:.0},\"ok\":{}}}",
            done as f64 / el,
            failed == 0
        );
    }
    Ok(())
}

/// The moves the driver made of user-level queues between contexts, from debugfs (`moves N` of
/// each queue line of every engine instance's `stats`); `None` without debugfs.
fn queue_moves() -> Option<u64> {
    let text = std::fs::read_to_string("/sys/kernel/debug/exanest-dma0/stats").ok()?;
    Some(
        text.lines()
            .filter(|l| l.starts_with("queue "))
            .filter_map(|l| l.split_whitespace().skip_while(|w| *w != "moves").nth(1))
            .filter_map(|n| n.parse::<u64>().ok())
            .sum(),
    )
}

/// What moving a user-level queue between contexts costs (register map 2.2), on an engine the
/// driver gives one context (module parameter `contexts=1`): two files of this process, each
/// with a queue, take turns. Each turn, after a pause longer than the holder's time slice (so
/// the other queue is idle and its context may go), one 64 B copy is posted and polled to its
/// completion: the doorbell faults, the context is taken from the other queue and the queue is
/// restored on it ("moved"); then a second copy on the same queue ("held"). p50 and p99 over
/// `reps` turns, CLOCK_MONOTONIC. With more than one context nothing moves: a `skipped` line.
fn queue_move(reps: usize) -> Res<()> {
    let devs = [Device::open(0)?, Device::open(0)?];
    let contexts = devs[0].info()?.contexts;
    if contexts != 1 {
        println!(
            "{{\"bench\":\"queue-move\",\"skipped\":\"{contexts} contexts: load the driver with contexts=1\"}}"
        );
        return Ok(());
    }
    let mut bufs = Vec::new();
    let mut queues = Vec::new();
    for d in &devs {
        let mut src = Buf::new(1 << 16, false)?;
        let dst = Buf::new(1 << 16, false)?;
        src.fill(9);
        register(d, &src, Access::Read, Mode::Pin, None)?;
        register(d, &dst, Access::Write, Mode::Pin, None)?;
        queues.push(d.create_queue(4, 4)?);
        bufs.push((src, dst));
    }
    let before = queue_moves();
    let pause = std::time::Duration::from_millis(12); // the slice is 10 ms (contexts.rs)
    let mut c = [QueueCompletion::default(); 1];
    let (mut moved, mut held) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    let mut failed = 0u64;
    for i in 0..=reps {
        let k = i % 2;
        std::thread::sleep(pause);
        for t in [&mut moved, &mut held] {
            let (src, dst) = &bufs[k];
            let t0 = Instant::now();
            // SAFETY: Both ranges lie in this file's pinned regions; nothing reads `dst` while
            // the copy is outstanding.
            unsafe { queues[k].post(src.addr(), dst.addr(), 64, i as u64)? };
            poll_one(&mut queues[k], &mut c)?;
            if i > 0 {
                t.push(us(t0)); // the first turn creates nothing to move from
            }
            failed += u64::from(c[0].status != 0 || c[0].wr_id != i as u64);
        }
    }
    let moves = queue_moves().zip(before).map(|(a, b)| a - b);
    let (m50, m99) = p50_p99(&mut moved);
    let (h50, h99) = p50_p99(&mut held);
    let ok = failed == 0 && bufs.iter().all(|(s, d)| s.slice()[..64] == d.slice()[..64]);
    println!(
        "{{\"bench\":\"queue-move\",\"clock\":\"CLOCK_MONOTONIC\",\"size\":64,\"reps\":{reps},\"moved_p50_us\":{m50:.3},\"moved_p99_us\":{m99:.3},\"held_p50_us\":{h50:.3},\"held_p99_us\":{h99:.3},\"moves\":{},\"ok\":{ok}}}",
        moves.map_or("null".to_string(), |m| m.to_string())
    );
    Ok(())
}

/// `--modes pin,on-demand`: the modes to measure (default all), by their names.
fn modes(args: &[String]) -> Res<Vec<Mode>> {
    match args.windows(2).find(|w| w[0] == "--modes") {
        None => Ok(MODES.to_vec()),
        Some(w) => w[1]
            .split(',')
            .map(|m| m.parse().map_err(|e| format!("--modes '{m}': {e}").into()))
            .collect(),
    }
}

fn run(args: &[String]) -> Res<()> {
    let quick0 = args.iter().any(|a| a == "--quick");
    match args.first().map(String::as_str) {
        Some("memcg") => return memcg(arg(args, "--limit", 64 << 20)),
        Some("processes") => {
            return processes(
                arg(args, "--size", 4 << 20),
                arg(args, "--ms", if quick0 { 20 } else { 200 }) as u64,
            )
        }
        Some("storm") => {
            return scale::storm(arg(
                args,
                "--size",
                if quick0 { 64 << 10 } else { 256 << 10 },
            ))
        }
        Some("memlock") => {
            return scale::memlock(arg(args, "--job", if quick0 { 16 << 20 } else { 1 << 30 }))
        }
        Some("fairness") => return fairness(arg(args, "--reps", if quick0 { 200 } else { 2000 })),
        Some("eviction") => {
            return eviction(
                arg(args, "--size", 4 << 20),
                arg(args, "--passes", if quick0 { 2 } else { 5 }),
            )
        }
        Some("queue-move") => {
            return queue_move(arg(args, "--reps", if quick0 { 20 } else { 200 }))
        }
        Some("open") => return open_close(arg(args, "--reps", if quick0 { 20 } else { 200 })),
        Some("net") => {
            let (reps, max) = if quick0 { (3, 1 << 20) } else { (5, 64 << 20) };
            return netbench::net(arg(args, "--reps", reps), arg(args, "--max", max));
        }
        Some("net-cold") => {
            return netbench::net_cold(arg(args, "--size", if quick0 { 1 << 20 } else { 8 << 20 }))
        }
        Some("net-loss") => {
            let (reps, size, small) = if quick0 {
                (2, 2 << 20, 200)
            } else {
                (3, 16 << 20, 2000)
            };
            return netbench::net_loss(
                arg(args, "--reps", reps),
                arg(args, "--size", size),
                arg(args, "--small", small),
            );
        }
        Some("net-mailbox") => {
            return netbench::net_mailbox(arg(args, "--count", if quick0 { 100 } else { 1000 }));
        }
        Some("net-pingpong") => {
            return netbench::net_pingpong(arg(args, "--count", if quick0 { 50 } else { 1000 }));
        }
        Some("net-incast") => {
            return netbench::net_incast(
                arg(args, "--senders", 8),
                arg(args, "--size", if quick0 { 1 << 20 } else { 4 << 20 }),
            )
        }
        Some("net-many") => {
            let (size, ms) = if quick0 {
                (256 << 10, 20)
            } else {
                (1 << 20, 200)
            };
            return netbench::net_many(
                &[1, 8],
                arg(args, "--size", size),
                arg(args, "--ms", ms) as u64,
            );
        }
        Some("net-small-cold") => {
            return netbench::net_small_cold(arg(args, "--puts", if quick0 { 64 } else { 512 }))
        }
        Some("queue") => {
            return queue(
                arg(args, "--reps", if quick0 { 200 } else { 2000 }),
                arg(args, "--ms", if quick0 { 20 } else { 200 }) as u64,
            )
        }
        _ => {}
    }
    let dev = Device::open(0)?;
    let quick = args.iter().any(|a| a == "--quick");
    let (reps, max, big) = if quick {
        (3, 1 << 20, 4 << 20)
    } else {
        (5, 64 << 20, 1 << 30)
    };
    match args.first().map(String::as_str) {
        Some("latency") => latency(&dev, &modes(args)?, arg(args, "--reps", reps), max),
        Some("first-touch") => first_touch(&dev, arg(args, "--size", 16 << 20)),
        Some("register") => register_cost(&dev, arg(args, "--max", big)),
        Some("touch-ahead") => touch_ahead(&dev, arg(args, "--size", if quick { 1 << 20 } else { 8 << 20 })),
        Some("memory") => memory(&dev, arg(args, "--size", if quick { 16 << 20 } else { 256 << 20 })),
        Some("cpu-fault") => cpu_fault(arg(args, "--pages", 4096)),
        Some("churn") => {
            for size in [64 << 10, 1 << 20] {
                churn(&dev, size, arg(args, "--total", 128 << 20))?;
            }
            Ok(())
        }
        Some("thp") => scale::thp(
            &dev,
            arg(args, "--size", if quick { 32 << 20 } else { 1 << 30 }),
            arg(args, "--secs", if quick { 1 } else { 10 }) as u64,
        ),
        Some("fault-service") => fault_service(&dev, arg(args, "--size", 4 << 20), arg(args, "--reps", 5)),
        Some("fault-batch") => fault_batch(arg(args, "--rounds", if quick { 8 } else { 64 })),
        Some("all") => {
            latency(&dev, &MODES, reps, max)?;
            first_touch(&dev, if quick { 1 << 20 } else { 16 << 20 })?;
            register_cost(&dev, big)?;
            touch_ahead(&dev, if quick { 1 << 20 } else { 8 << 20 })?;
            memory(&dev, if quick { 16 << 20 } else { 256 << 20 })?;
            cpu_fault(if quick { 512 } else { 4096 })?;
            fault_service(&dev, if quick { 1 << 20 } else { 4 << 20 }, if quick { 1 } else { 5 })?;
            fault_batch(if quick { 8 } else { 64 })?;
            for size in [64 << 10, 1 << 20] {
                churn(&dev, size, if quick { 4 << 20 } else { 128 << 20 })?;
            }
            drop(dev);
            open_close(if quick { 20 } else { 200 })?;
            memcg(if quick { 16 << 20 } else { 64 << 20 })?;
            processes(4 << 20, if quick { 20 } else { 200 })?;
            scale::storm(if quick { 64 << 10 } else { 256 << 10 })?;
            fairness(if quick { 200 } else { 2000 })?;
            eviction(if quick { 1 << 20 } else { 4 << 20 }, if quick { 2 } else { 5 })?;
            queue(if quick { 200 } else { 2000 }, if quick { 20 } else { 200 })
        }
        _ => Err("usage: exanest-bench latency|first-touch|register|touch-ahead|memory|cpu-fault|fault-service|fault-batch|churn|storm|memlock|thp|memcg|processes|fairness|eviction|queue|queue-move|open|net|net-cold|net-small-cold|net-many|net-loss|net-mailbox|net-pingpong|all [--quick]".into()),
    }
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("exanest-bench: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut t: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        assert_eq!(p50_p99(&mut t), (101.0, 199.0));
        assert_eq!(p50_p99(&mut [5.0]), (5.0, 5.0));
    }

    #[test]
    fn jain_index() {
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-9);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-9);
        assert!((jain(&[2.0, 1.0]) - 0.9).abs() < 1e-9);
    }

    #[test]
    fn mode_list() {
        let v = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(modes(&v("latency")).unwrap(), Mode::ALL);
        assert_eq!(
            modes(&v("latency --modes on-demand,pin")).unwrap(),
            [Mode::OnDemand, Mode::Pin]
        );
        assert!(modes(&v("latency --modes pin,lazy")).is_err());
    }
}
