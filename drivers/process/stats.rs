// SPDX-License-Identifier: GPL-2.0-only

//! Counters (EXANEST_DMA_IOC_COUNTERS), per-region statistics, latency histograms, and their
//! debugfs views: `exanest-dmaN/stats` (the owning process) and `exanest-dmaN/engine` (what
//! the engine's registers say about it).

use crate::exanest_core::abi::{self, Mode};
use crate::hw::Engine;
use crate::process::Process;
use core::fmt::{Formatter, Result as FmtResult};
use core::sync::atomic::Ordering;
use kernel::prelude::*;

impl Process {
    /// EXANEST_DMA_IOC_COUNTERS: the channels' counters and what is mapped now.
    pub(crate) fn counters(&self) -> abi::Counters {
        let g = self.inner.lock();
        let m = self.map.lock();
        let mut c = g.chans.counters;
        c.regions = g.regions.len() as u64;
        c.pages_mapped = g.pages.pinned() + m.mirror.len();
        c.pages_pinned = g.pages.pinned();
        c.invalidations = m.invalidations;
        c.huge_mappings = m.mirror.blocks();
        c.evicted_pages = m.budget.evicted().0;
        c.iommu_faults = self.iommu_faults.load(Ordering::Relaxed);
        c
    }

    /// EXANEST_DMA_IOC_BUDGET: set the translation budget (evicting at once what is over it)
    /// and report what it did. EINVAL for a malformed request, E2BIG above the module's
    /// `max_budget_pages`, EPERM from another process than the opener, ENODEV once the device
    /// is gone.
    pub(crate) fn budget(&self, req: &abi::Budget) -> Result<abi::Budget> {
        self.check_caller()?;
        let max = crate::module_parameters::max_budget_pages.value();
        let new = abi::check_budget(req, max)?;
        let mut inner = self.inner.lock();
        if inner.dead {
            return Err(ENODEV);
        }
        let mut g = self.map.lock();
        let ms = &mut *g;
        let before = ms.budget.evicted().0;
        if let Some(p) = new {
            if p < ms.budget.limit() {
                // What was planned ahead for the larger budget is not mapped into the smaller.
                inner.ahead.clear();
            }
            ms.budget.set_limit(p);
            if let Some(dom) = ms.domain.as_ref() {
                ms.budget.enforce(&mut ms.mirror, &**dom);
            }
        }
        let out = abi::Budget {
            pages: ms.budget.limit(),
            evicted_pages: ms.budget.evicted().0,
            evictions: ms.budget.evicted().1,
            mapped_pages: ms.mirror.len(),
            reserved: [0; 2],
        };
        let victim = ms.budget.last_victim();
        drop(g);
        self.queue_evicted(&mut inner, out.evicted_pages - before, victim);
        Ok(out)
    }

    /// EXANEST_DMA_IOC_LATENCY: ENODEV once the device is gone.
    pub(crate) fn latency(&self) -> Result<abi::Latency> {
        let g = self.inner.lock();
        if g.dead {
            return Err(ENODEV);
        }
        Ok(g.chans.latency)
    }

    /// EXANEST_DMA_IOC_REGION_STATS: EINVAL for a malformed request, ENOENT for an unknown
    /// handle, ENODEV once the device is gone.
    pub(crate) fn region_stats(&self, req: &abi::RegionStats) -> Result<abi::RegionStats> {
        let handle = abi::check_region_stats(req)?;
        let g = self.inner.lock();
        if g.dead {
            return Err(ENODEV);
        }
        let r = g.regions.get(handle).ok_or(ENOENT)?;
        Ok(abi::RegionStats {
            handle,
            mode: r.mode,
            faults: r.faults,
            pages_resolved: r.pages_resolved,
            reserved: [0; 2],
        })
    }

    /// The debugfs view of the process: counters, regions, the latency histograms.
    pub(crate) fn write_stats(&self, f: &mut Formatter<'_>) -> FmtResult {
        let (c, lat) = (self.counters(), self.inner.lock().chans.latency);
        writeln!(f, "{c}")?;
        let g = self.inner.lock();
        for r in g.regions.iter() {
            writeln!(
                f,
                "region {} mode {} {:#x}-{:#x} access {} window {} faults {} pages-resolved {}",
                r.handle,
                ModeName(r.mode),
                r.range.start,
                r.range.end,
                r.access,
                r.window,
                r.faults,
                r.pages_resolved
            )?;
        }
        let ctx = g.hw();
        if let Some(kq) = ctx.as_ref().and_then(|c| c.kq()) {
            let (posted, completed) = kq.indices();
            writeln!(f, "kernel queue posted {posted} completed {completed}")?;
        }
        if let crate::process::queue::QueueState::Ready(q) = &g.queue {
            writeln!(
                f,
                "queue channels {:#x} cq {:#x} entries {} events {} error {} moves {} {}",
                q.mask,
                q.cq.start,
                1u32 << q.cq_log2,
                q.events,
                q.error.map_or(0, |e| e.0),
                q.moves,
                if q.parked.is_some() {
                    "parked"
                } else {
                    "running"
                }
            )?;
        }
        drop(g);
        write_latency(f, &lat)
    }
}

/// A region's mode as the CLI and the docs name it.
struct ModeName(u32);

impl core::fmt::Display for ModeName {
    fn fmt(&self, f: &mut Formatter<'_>) -> FmtResult {
        match Mode::from_raw(self.0) {
            Some(m) => write!(f, "{m}"),
            None => write!(f, "mode-{}", self.0),
        }
    }
}

/// The latency histograms, one line each: `name <bound:count ... p50 <x p99 <y`.
fn write_latency(f: &mut Formatter<'_>, lat: &abi::Latency) -> FmtResult {
    for (name, h) in [
        ("resolve-latency-us", &lat.total),
        ("queue-us", &lat.queue),
        ("fault-in-us", &lat.fault_in),
        ("map-us", &lat.map),
        ("handler-us", &lat.handler),
    ] {
        write!(f, "{name}")?;
        for (i, n) in h.buckets.iter().enumerate() {
            if *n != 0 {
                write!(f, " <{}:{}", 2u64 << i, n)?;
            }
        }
        writeln!(
            f,
            "\n{name} p50 <{} p99 <{}",
            h.percentile(50).unwrap_or(0),
            h.percentile(99).unwrap_or(0)
        )?;
    }
    Ok(())
}

/// debugfs `exanest-dmaN/engine`: one JSON line with what the engine's registers say (the
/// evaluation reads the modelled bandwidth and latency from it).
pub(crate) fn write_engine(name: &CStr, e: &Engine, f: &mut Formatter<'_>) -> FmtResult {
    write!(
        f,
        "{{\"engine\": \"{}\", \"version\": \"{}.{}\", \"contexts\": {}, \"sriov\": {}, \"channels\": {}, \"max_transfer\": {}",
        name.to_str().unwrap_or("?"),
        e.version().major().get(),
        e.version().minor().get(),
        e.contexts(),
        e.sriov(),
        e.channels(),
        e.max_len()
    )?;
    if let Some((bw, lat)) = e.timing() {
        write!(f, ", \"bandwidth_mbps\": {bw}, \"latency_ns\": {lat}")?;
    }
    e.write_net(f)?;
    writeln!(f, "}}")
}

#[kunit_tests(exanest_dma_stats)]
mod tests {
    use super::*;

    /// A `core::fmt::Write` into a fixed buffer, for checking formatted output.
    struct Buf {
        b: [u8; 512],
        n: usize,
    }

    impl core::fmt::Write for Buf {
        fn write_str(&mut self, s: &str) -> FmtResult {
            let end = self.n + s.len();
            if end > self.b.len() {
                return Err(core::fmt::Error);
            }
            self.b[self.n..end].copy_from_slice(s.as_bytes());
            self.n = end;
            Ok(())
        }
    }

    impl Buf {
        fn new() -> Self {
            Buf { b: [0; 512], n: 0 }
        }
        fn has(&self, s: &str) -> bool {
            self.b[..self.n].windows(s.len()).any(|w| w == s.as_bytes())
        }
    }

    /// Formats `v` with `Display`.
    fn fmt(v: impl core::fmt::Display) -> Buf {
        let mut b = Buf::new();
        core::fmt::Write::write_fmt(&mut b, format_args!("{v}")).unwrap();
        b
    }

    /// The counters line debugfs and the CLI print, field by field.
    #[test]
    fn counters_line() {
        let c = abi::Counters {
            copies: 3,
            copy_errors: 1,
            faults: 7,
            retransmissions: 5,
            huge_mappings: 2,
            evicted_pages: 9,
            ..Default::default()
        };
        let b = fmt(c);
        assert!(b.has("copies 3 errors 1 bytes 0 "));
        assert!(b.has(" faults 7 "));
        assert!(b.has(" retransmissions 5 "));
        assert!(b.has(" huge-mappings 2 "));
        assert!(b.b[..b.n].ends_with(b"evicted-pages 9"));
    }

    /// Region modes print with the names the CLI and abi.rst use.
    #[test]
    fn mode_names() {
        assert!(fmt(ModeName(abi::MODE_PIN)).has("pin"));
        assert!(fmt(ModeName(abi::MODE_PREFAULT)).has("prefault"));
        assert!(fmt(ModeName(abi::MODE_ON_DEMAND)).has("on-demand"));
        assert!(fmt(ModeName(7)).has("mode-7"));
    }

    /// The latency histograms: buckets as `<bound:count`, then the percentiles.
    #[test]
    fn latency_lines() {
        let mut lat = abi::Latency::default();
        lat.queue.record(3);
        lat.queue.record(3);
        lat.map.record(100);
        struct L(abi::Latency);
        impl core::fmt::Display for L {
            fn fmt(&self, f: &mut Formatter<'_>) -> FmtResult {
                write_latency(f, &self.0)
            }
        }
        let b = fmt(L(lat));
        assert!(b.has("queue-us <4:2\n"));
        assert!(b.has("queue-us p50 <4 p99 <4\n"));
        assert!(b.has("map-us <128:1\n"));
        assert!(b.has("handler-us\nhandler-us p50 <0 p99 <0\n"));
    }

    /// Counters of the channel state machine add up as copies end.
    #[test]
    fn copy_counters_accumulate() {
        use crate::exanest_core::abi::{Range, ValidCopy};
        use crate::exanest_core::regs::Error as ChError;
        use crate::hw::fake::FakeHw;
        use crate::hw::Hw;
        use crate::process::channel::Channels;
        let hw = FakeHw::new(2).unwrap();
        let mut ch = Channels::new(2);
        let r = |a, l| Range::new(a, l, 1 << 48).unwrap();
        for (i, len) in [(0u64, 0x1000u64), (1, 0x2000)] {
            let v = ValidCopy {
                src: r(0x10_0000 * (i + 1), len),
                dst: r(0x80_0000 * (i + 1), len),
            };
            let (_, s) = ch.submit(v, 1, 2).unwrap();
            ch.start(&*hw, s.unwrap(), &mut |_| ());
        }
        hw.complete(0);
        hw.fail(1, ChError::NoMaster);
        ch.interrupt(&*hw, hw.take_irq_status(), &mut |_| ());
        let c = ch.counters;
        assert_eq!((c.copies, c.copy_errors, c.bytes), (1, 1, 0x1000));
    }
}
