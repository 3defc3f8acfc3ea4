// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Exact timings of fault service (Documentation/design.rst, "Fault timings").
//!
//! Every engine fault the driver answers leaves one [`Record`]: the time of each [`Step`] it
//! went through, in nanoseconds of one monotonic clock (the driver's stamp clock: the counter
//! that the kernel's monotonic clock reads, scaled), 0 for a
//! step it did not take. An engine keeps its last records in a [`Log`] (a ring), and
//! [`write_summary`] gives exact percentiles (nearest rank: p50, p90, p99 and the maximum)
//! of every [`Stage`] over them, with no buckets.
//!
//! A fault reaches the driver twice: the SMMU reports the access ([`Step::Smmu`]) and the
//! engine interrupts for the channel in fault-wait ([`Step::Irq`]), in either order. The fault
//! thread then takes it ([`Step::Thread`]: from whichever report it saw first), faults the
//! pages in (`hmm_range_fault`, [`Step::FaultIn`] to [`Step::FaultedIn`]), maps them
//! ([`Step::Mapped`]; `iommu_map` includes the IOTLB's `iotlb_sync_map`, and a new SMMUv3
//! entry needs no invalidation) and answers ([`Step::Answered`]: RESUME or NACK written).

use core::fmt::{self, Write};

/// The steps of one fault's service, in the order the fault thread takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Step {
    /// The IOMMU fault handler recorded the page (the SMMU's report).
    Smmu = 0,
    /// The engine's interrupt saw the channel in fault-wait.
    Irq,
    /// The fault thread began to serve it.
    Thread,
    /// `hmm_range_fault` was called.
    FaultIn,
    /// `hmm_range_fault` returned.
    FaultedIn,
    /// The pages were mapped in the IOMMU domain.
    Mapped,
    /// RESUME or NACK was written.
    Answered,
}

/// Steps a record stamps.
pub const STEPS: usize = 7;

/// What a fault's transfer was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Not recorded.
    #[default]
    None = 0,
    /// A copy (COPY, or the kernel queue).
    Copy,
    /// A transfer of the user-level queue.
    Queue,
    /// A receiver fault of a remote op.
    NetRx,
}

/// One fault's service.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// When each [`Step`] happened (ns); 0: not taken.
    pub at: [u64; STEPS],
    /// The transfer.
    pub kind: Kind,
    /// Whether the engine wrote.
    pub write: bool,
    /// The errno of a NACK, 0 for a RESUME.
    pub errno: u16,
    /// Pages newly mapped for the fault.
    pub pages: u32,
    /// Whether the interrupt thread that saw the engine's report answered the fault itself
    /// (without waking the fault thread).
    pub inline: bool,
    /// Faults resolved by the one fault-in that resolved this one (batched resolution; 0 or 1:
    /// alone).
    pub batch: u8,
}

impl Record {
    /// Stamp `step` at `now`, unless it is stamped already at an earlier time (a step is
    /// stamped the first time it happens: a fault taken twice began when it was first taken).
    pub fn stamp(&mut self, step: Step, now: u64) {
        let t = &mut self.at[step as usize];
        if *t == 0 || now < *t {
            *t = now;
        }
    }

    /// Stamp `step` at `now`, whatever it was (a step retried is stamped when it last ended).
    pub fn set(&mut self, step: Step, now: u64) {
        self.at[step as usize] = now;
    }

    /// The time of `step`, if taken.
    pub fn at(&self, step: Step) -> Option<u64> {
        Some(self.at[step as usize]).filter(|&t| t != 0)
    }

    /// The first report of the fault: the earlier of the SMMU's and the engine's.
    pub fn reported(&self) -> Option<u64> {
        match (self.at(Step::Smmu), self.at(Step::Irq)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Take the resolution steps of `other` (the SMMU's report of the same page, resolved by
    /// the fault thread before the engine's report was served): each step keeps the earlier.
    pub fn merge_resolution(&mut self, other: &Record) {
        for s in [
            Step::Smmu,
            Step::Thread,
            Step::FaultIn,
            Step::FaultedIn,
            Step::Mapped,
        ] {
            if let Some(t) = other.at(s) {
                self.stamp(s, t);
            }
        }
        self.pages = self.pages.saturating_add(other.pages);
    }

    /// How long `stage` took, ns: `None` when the fault did not go through it.
    pub fn stage(&self, stage: Stage) -> Option<u64> {
        let end = self.at(Step::Answered)?;
        // The path's steps in order, each stage from the last step taken before it.
        let chain = [
            self.reported(),
            self.at(Step::Thread),
            self.at(Step::FaultIn),
            self.at(Step::FaultedIn),
            self.at(Step::Mapped),
            Some(end),
        ];
        let from_last = |i: usize| {
            let t = chain[i]?;
            let prev = chain[..i].iter().rev().flatten().next()?;
            Some(t.saturating_sub(*prev))
        };
        match stage {
            Stage::Report => {
                let (s, i) = (self.at(Step::Smmu)?, self.at(Step::Irq)?);
                i.checked_sub(s)
            }
            Stage::Wake => from_last(1),
            Stage::Lookup => from_last(2),
            Stage::FaultIn => from_last(3),
            Stage::Map => from_last(4),
            Stage::Answer => from_last(5),
            Stage::Total => Some(end.saturating_sub(self.reported()?)),
            Stage::FromIrq => end.checked_sub(self.at(Step::Irq)?),
        }
    }
}

/// A span of the fault path whose duration the summary gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The SMMU's report to the engine's interrupt, for faults where the SMMU reported first.
    Report,
    /// The first report to its server (the fault thread, or the interrupt thread serving it
    /// inline) taking the fault.
    Wake,
    /// The thread taking it to `hmm_range_fault`: region lookup, plan, locks.
    Lookup,
    /// `hmm_range_fault`.
    FaultIn,
    /// The IOMMU map (IOTLB included).
    Map,
    /// From the last step before it (mapped, or taken for a page mapped already) to RESUME or
    /// NACK written.
    Answer,
    /// The first report to RESUME or NACK written: the whole service.
    Total,
    /// The engine's interrupt to RESUME or NACK written: a device fault as the CPU's page
    /// fault is measured, from the device's own report (issue 23's measure).
    FromIrq,
}

impl Stage {
    /// Every stage, in the summary's order.
    pub const ALL: [Stage; 8] = [
        Stage::Report,
        Stage::Wake,
        Stage::Lookup,
        Stage::FaultIn,
        Stage::Map,
        Stage::Answer,
        Stage::Total,
        Stage::FromIrq,
    ];

    /// The stage's name in the summary.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Report => "report",
            Stage::Wake => "wake",
            Stage::Lookup => "lookup",
            Stage::FaultIn => "fault_in",
            Stage::Map => "map",
            Stage::Answer => "answer",
            Stage::Total => "total",
            Stage::FromIrq => "from_irq",
        }
    }
}

/// Exact percentiles of a set of durations (ns), nearest rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Percentiles {
    /// Samples.
    pub n: usize,
    /// The median.
    pub p50: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// The 99th percentile.
    pub p99: u64,
    /// The largest.
    pub max: u64,
}

impl Percentiles {
    /// The percentiles of `v`, which this sorts; `None` when it is empty.
    pub fn of(v: &mut [u64]) -> Option<Self> {
        v.sort_unstable();
        let n = v.len();
        // Nearest rank: the smallest sample with at least p % of the samples at or below it.
        let rank = |p: usize| v[(n * p).div_ceil(100).max(1) - 1];
        (n > 0).then(|| Percentiles {
            n,
            p50: rank(50),
            p90: rank(90),
            p99: rank(99),
            max: v[n - 1],
        })
    }
}

/// The last records of an engine, in a ring over the storage `B` (its length is the ring's).
#[derive(Debug)]
pub struct Log<B> {
    buf: B,
    /// Where the next record goes.
    next: usize,
    /// Records kept (at most the storage's length).
    len: usize,
    /// Records pushed since the last clear, including those overwritten.
    total: u64,
}

impl<B: core::ops::DerefMut<Target = [Record]>> Log<B> {
    /// An empty log over `buf`.
    pub fn new(buf: B) -> Self {
        Log {
            buf,
            next: 0,
            len: 0,
            total: 0,
        }
    }

    /// Keep `r`, overwriting the oldest record when the ring is full.
    pub fn push(&mut self, r: &Record) {
        let cap = self.buf.len();
        let Some(slot) = self.buf.get_mut(self.next) else {
            return;
        };
        *slot = *r;
        self.next += 1;
        if self.next == cap {
            self.next = 0;
        }
        if self.len < cap {
            self.len += 1;
        }
        self.total += 1;
    }

    /// Forget every record.
    pub fn clear(&mut self) {
        self.next = 0;
        self.len = 0;
        self.total = 0;
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records pushed since the last clear.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The records kept, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Record> {
        let cap = self.buf.len().max(1);
        let first = (self.next + cap - self.len) % cap;
        (0..self.len).map(move |i| &self.buf[(first + i) % cap])
    }

    /// The records kept, oldest first, into `out` (cleared first; at most its capacity).
    pub fn copy_to(&self, out: &mut [Record]) -> usize {
        let mut n = 0;
        for (o, r) in out.iter_mut().zip(self.iter()) {
            *o = *r;
            n += 1;
        }
        n
    }
}

/// The percentiles of `stage` over `records`, sorting in `scratch` (at least as long; a
/// shorter one takes the last records that fit).
pub fn percentiles(records: &[Record], stage: Stage, scratch: &mut [u64]) -> Option<Percentiles> {
    percentiles_of(records, stage, scratch, |_| true)
}

/// [`percentiles`] over the records `keep` keeps.
fn percentiles_of(
    records: &[Record],
    stage: Stage,
    scratch: &mut [u64],
    keep: impl Fn(&Record) -> bool,
) -> Option<Percentiles> {
    let skip = records.len().saturating_sub(scratch.len());
    let mut n = 0;
    for d in records[skip..]
        .iter()
        .filter(|r| keep(r))
        .filter_map(|r| r.stage(stage))
    {
        scratch[n] = d;
        n += 1;
    }
    Percentiles::of(&mut scratch[..n])
}

/// The stages of `stages` with a sample among the records `keep` keeps, as the members of a
/// JSON object: `"name": {"n", "p50", "p90", "p99", "max"}`.
fn write_stages(
    f: &mut impl Write,
    records: &[Record],
    stages: &[Stage],
    scratch: &mut [u64],
    keep: impl Fn(&Record) -> bool,
) -> fmt::Result {
    let mut sep = "";
    for &s in stages {
        if let Some(p) = percentiles_of(records, s, scratch, &keep) {
            write!(
                f,
                "{sep}\"{}\": {{\"n\": {}, \"p50\": {}, \"p90\": {}, \"p99\": {}, \"max\": {}}}",
                s.name(),
                p.n,
                p.p50,
                p.p90,
                p.p99,
                p.max
            )?;
            sep = ", ";
        }
    }
    Ok(())
}

/// The summary of `records` (of `total` pushed since the log was cleared; `on`: whether
/// records are being kept) and `record_ns` (what keeping one record costs, measured by the
/// caller), as one JSON object: `{"stamps": on, "record_ns": ns, "faults": total, "kept": n,
/// "nacks": n, "inline": n, "batched": n, "pages": mapped, "stages": {"total": {"n", "p50",
/// "p90", "p99", "max"}, ...}, "by_access": {"read": {...}, "write": {...}}}` (`inline`:
/// records of faults answered in the interrupt thread; `batched`: of faults resolved together
/// with others; `by_access`: the whole path, *from_irq* and *fault_in* of the faults where the
/// engine read, and of those where it wrote: a device's read finds a page the CPU wrote, a
/// write mostly a fresh one, which costs what a CPU fault costs), durations in ns, a stage
/// with no sample left out.
pub fn write_summary(
    f: &mut impl Write,
    records: &[Record],
    total: u64,
    on: bool,
    record_ns: u64,
    scratch: &mut [u64],
) -> fmt::Result {
    let nacks = records.iter().filter(|r| r.errno != 0).count();
    let inline = records.iter().filter(|r| r.inline).count();
    let batched = records.iter().filter(|r| r.batch > 1).count();
    let pages: u64 = records.iter().map(|r| u64::from(r.pages)).sum();
    write!(
        f,
        "{{\"stamps\": {on}, \"record_ns\": {record_ns}, \"faults\": {total}, \"kept\": {}, \"nacks\": {nacks}, \"inline\": {inline}, \"batched\": {batched}, \"pages\": {pages}, \"stages\": {{",
        records.len()
    )?;
    write_stages(f, records, &Stage::ALL, scratch, |_| true)?;
    let by = [Stage::Total, Stage::FromIrq, Stage::FaultIn];
    write!(f, "}}, \"by_access\": {{\"read\": {{")?;
    write_stages(f, records, &by, scratch, |r| !r.write)?;
    write!(f, "}}, \"write\": {{")?;
    write_stages(f, records, &by, scratch, |r| r.write)?;
    writeln!(f, "}}}}}}")
}

/// What a write to the log's debugfs file asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Keep records from now on.
    On,
    /// Stop keeping records (and stamping what only they need).
    Off,
    /// Forget the records kept.
    Clear,
}

impl Command {
    /// `on`, `off` or `clear`, with surrounding whitespace; `None` for anything else.
    pub fn parse(input: &[u8]) -> Option<Self> {
        match input.trim_ascii() {
            b"on" => Some(Command::On),
            b"off" => Some(Command::Off),
            b"clear" => Some(Command::Clear),
            _ => None,
        }
    }
}

/// The resolutions of the SMMU's reports that the engine's report of the same fault has not
/// claimed yet, by page: page `vpn`'s in slot `vpn % N`, where a later page of the same slot
/// replaces it (no search on the fault path: the faults in service at once are a few
/// neighbouring pages, which take different slots).
#[derive(Clone, Copy, Debug)]
pub struct Resolutions<const N: usize> {
    slots: [Option<(u64, bool, Record)>; N],
}

impl<const N: usize> Default for Resolutions<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Resolutions<N> {
    /// None.
    pub const fn new() -> Self {
        Resolutions { slots: [None; N] }
    }

    /// Page `vpn` was resolved (`write`: for writing) from the SMMU's report, as `r` says.
    pub fn put(&mut self, vpn: u64, write: bool, r: &Record) {
        if let Some(s) = self.slots.get_mut(slot::<N>(vpn)) {
            *s = Some((vpn, write, *r));
        }
    }

    /// The resolution of page `vpn` for a fault of direction `write` (a write's serves a
    /// read), taken out.
    pub fn take(&mut self, vpn: u64, write: bool) -> Option<Record> {
        let s = self.slots.get_mut(slot::<N>(vpn))?;
        match *s {
            Some((v, w, r)) if v == vpn && (w || !write) => {
                *s = None;
                Some(r)
            }
            _ => None,
        }
    }
}

/// Page `vpn`'s slot of `N` (any, for `N` 0: none is there).
fn slot<const N: usize>(vpn: u64) -> usize {
    if N == 0 {
        0
    } else {
        (vpn % N as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::{string::String, vec, vec::Vec};

    fn rec(steps: &[(Step, u64)]) -> Record {
        let mut r = Record::default();
        for &(s, t) in steps {
            r.stamp(s, t);
        }
        r
    }

    /// Nearest-rank percentiles, checked against their definition on small sets.
    #[test]
    fn exact_percentiles() {
        assert_eq!(Percentiles::of(&mut []), None);
        let p = Percentiles::of(&mut [7]).unwrap();
        assert_eq!((p.n, p.p50, p.p90, p.p99, p.max), (1, 7, 7, 7, 7));
        let mut v: Vec<u64> = (1..=100).rev().collect();
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50, 90, 99, 100));
        let mut v = vec![5, 1, 3, 2, 4];
        let p = Percentiles::of(&mut v).unwrap();
        // ceil(5 * 0.5) = 3rd, ceil(4.5) = 5th, ceil(4.95) = 5th.
        assert_eq!((p.p50, p.p90, p.p99, p.max), (3, 5, 5, 5));
        // Not a bucket's bound: 1001 and 1999 stay apart.
        let p = Percentiles::of(&mut [1001, 1999, 1001]).unwrap();
        assert_eq!((p.p50, p.max), (1001, 1999));
    }

    /// Stages run from the last step taken before them; the total from the first report.
    #[test]
    fn stages_of_a_full_path() {
        let r = rec(&[
            (Step::Irq, 1000),
            (Step::Smmu, 900),
            (Step::Thread, 1500),
            (Step::FaultIn, 1600),
            (Step::FaultedIn, 3600),
            (Step::Mapped, 4100),
            (Step::Answered, 4300),
        ]);
        let got: Vec<_> = Stage::ALL.iter().map(|&s| r.stage(s)).collect();
        assert_eq!(
            got,
            [
                Some(100),
                Some(600),
                Some(100),
                Some(2000),
                Some(500),
                Some(200),
                Some(3400),
                Some(3300)
            ]
        );
        // From the engine's interrupt, not the SMMU's earlier report.
        assert_eq!(r.stage(Stage::FromIrq), Some(4300 - 1000));
        assert_eq!(
            rec(&[(Step::Smmu, 5), (Step::Answered, 9)]).stage(Stage::FromIrq),
            None
        );
        // Stages add up to the total.
        let sum: u64 = Stage::ALL[1..6].iter().filter_map(|&s| r.stage(s)).sum();
        assert_eq!(sum, r.stage(Stage::Total).unwrap());
    }

    /// A fault whose page was mapped already (by another fault's window) has no fault-in and
    /// no map: its answer runs from the thread taking it; the engine reporting before the
    /// SMMU has no report stage.
    #[test]
    fn stages_of_a_page_mapped_already() {
        let r = rec(&[(Step::Irq, 10), (Step::Thread, 30), (Step::Answered, 45)]);
        assert_eq!(r.stage(Stage::Wake), Some(20));
        assert_eq!(r.stage(Stage::Lookup), None);
        assert_eq!(r.stage(Stage::FaultIn), None);
        assert_eq!(r.stage(Stage::Map), None);
        assert_eq!(r.stage(Stage::Answer), Some(15));
        assert_eq!(r.stage(Stage::Total), Some(35));
        let r = rec(&[(Step::Smmu, 50), (Step::Irq, 40), (Step::Answered, 60)]);
        assert_eq!(r.stage(Stage::Report), None, "the engine reported first");
        assert_eq!(r.stage(Stage::Total), Some(20));
        assert_eq!(
            rec(&[(Step::Irq, 1), (Step::Thread, 2)]).stage(Stage::Total),
            None,
            "not answered"
        );
    }

    /// The SMMU's report resolved first, then the engine's: one record, the earlier of each.
    #[test]
    fn merged_resolution() {
        let mut engine = rec(&[(Step::Irq, 200), (Step::Thread, 700), (Step::Answered, 800)]);
        let mut smmu = rec(&[
            (Step::Smmu, 100),
            (Step::Thread, 150),
            (Step::FaultIn, 160),
            (Step::FaultedIn, 400),
            (Step::Mapped, 500),
        ]);
        smmu.pages = 4;
        engine.merge_resolution(&smmu);
        assert_eq!(engine.at(Step::Thread), Some(150));
        assert_eq!(engine.reported(), Some(100));
        assert_eq!(engine.pages, 4);
        assert_eq!(engine.stage(Stage::Report), Some(100));
        assert_eq!(engine.stage(Stage::Wake), Some(50));
        assert_eq!(engine.stage(Stage::Answer), Some(300));
        assert_eq!(engine.stage(Stage::Total), Some(700));
        // `stamp` keeps the first time, `set` the last.
        engine.stamp(Step::Thread, 900);
        assert_eq!(engine.at(Step::Thread), Some(150));
        engine.set(Step::Thread, 900);
        assert_eq!(engine.at(Step::Thread), Some(900));
    }

    /// The ring keeps the newest records, oldest first, and counts what it overwrote.
    #[test]
    fn ring_keeps_the_newest() {
        let mut log = Log::new(vec![Record::default(); 3]);
        assert!(log.is_empty());
        for t in 1..=5u64 {
            log.push(&rec(&[(Step::Irq, t), (Step::Answered, t * 10)]));
        }
        assert_eq!((log.len(), log.total()), (3, 5));
        let firsts: Vec<_> = log.iter().map(|r| r.at(Step::Irq).unwrap()).collect();
        assert_eq!(firsts, [3, 4, 5]);
        // Totals 27, 36, 45; a scratch of 2 takes the newest two.
        let mut out = [Record::default(); 8];
        let n = log.copy_to(&mut out);
        assert_eq!(n, 3);
        let p = percentiles(&out[..n], Stage::Total, &mut [0; 8]).unwrap();
        assert_eq!((p.n, p.p50, p.max), (3, 36, 45));
        let p = percentiles(&out[..n], Stage::Total, &mut [0; 2]).unwrap();
        assert_eq!((p.n, p.p50, p.max), (2, 36, 45));
        assert_eq!(log.copy_to(&mut out[..2]), 2, "at most the room given");
        log.clear();
        assert_eq!((log.len(), log.total(), log.iter().count()), (0, 0, 0));
        let mut empty = Log::new(Vec::new());
        empty.push(&Record::default());
        assert!(empty.is_empty());
    }

    /// The summary is JSON with exact figures and leaves out stages with no sample.
    #[test]
    fn summary_json() {
        let mut s = String::new();
        write_summary(&mut s, &[], 0, true, 17, &mut [0; 4]).unwrap();
        assert_eq!(
            s,
            "{\"stamps\": true, \"record_ns\": 17, \"faults\": 0, \"kept\": 0, \"nacks\": 0, \"inline\": 0, \"batched\": 0, \"pages\": 0, \"stages\": {}, \"by_access\": {\"read\": {}, \"write\": {}}}\n"
        );
        let mut r = rec(&[
            (Step::Irq, 1000),
            (Step::Thread, 2500),
            (Step::Answered, 3001),
        ]);
        r.pages = 2;
        r.inline = true;
        r.batch = 3;
        let mut nack = r;
        nack.errno = 14;
        nack.inline = false;
        nack.batch = 1;
        // The engine wrote at the NACKed fault, and took a microsecond longer.
        nack.write = true;
        nack.at[Step::Answered as usize] += 1000;
        s.clear();
        write_summary(&mut s, &[r, nack], 5, false, 0, &mut [0; 4]).unwrap();
        assert_eq!(
            s,
            "{\"stamps\": false, \"record_ns\": 0, \"faults\": 5, \"kept\": 2, \"nacks\": 1, \"inline\": 1, \"batched\": 1, \"pages\": 4, \"stages\": {\
             \"wake\": {\"n\": 2, \"p50\": 1500, \"p90\": 1500, \"p99\": 1500, \"max\": 1500}, \
             \"answer\": {\"n\": 2, \"p50\": 501, \"p90\": 1501, \"p99\": 1501, \"max\": 1501}, \
             \"total\": {\"n\": 2, \"p50\": 2001, \"p90\": 3001, \"p99\": 3001, \"max\": 3001}, \
             \"from_irq\": {\"n\": 2, \"p50\": 2001, \"p90\": 3001, \"p99\": 3001, \"max\": 3001}}, \
             \"by_access\": {\"read\": {\
             \"total\": {\"n\": 1, \"p50\": 2001, \"p90\": 2001, \"p99\": 2001, \"max\": 2001}, \
             \"from_irq\": {\"n\": 1, \"p50\": 2001, \"p90\": 2001, \"p99\": 2001, \"max\": 2001}}, \
             \"write\": {\
             \"total\": {\"n\": 1, \"p50\": 3001, \"p90\": 3001, \"p99\": 3001, \"max\": 3001}, \
             \"from_irq\": {\"n\": 1, \"p50\": 3001, \"p90\": 3001, \"p99\": 3001, \"max\": 3001}}}}\n"
        );
    }

    /// The debugfs file's commands.
    #[test]
    fn commands() {
        assert_eq!(Command::parse(b"on\n"), Some(Command::On));
        assert_eq!(Command::parse(b" off"), Some(Command::Off));
        assert_eq!(Command::parse(b"clear\n"), Some(Command::Clear));
        for bad in [&b""[..], b"o", b"onn", b"clear all", b"ON"] {
            assert_eq!(Command::parse(bad), None, "{bad:?}");
        }
    }

    /// A resolution is claimed once, by its page; a write's serves a read, not the reverse;
    /// a later page of the same slot replaces it, one of another slot does not.
    #[test]
    fn resolutions_by_page() {
        let mut res = Resolutions::<2>::new();
        let r = |t| rec(&[(Step::Smmu, t)]);
        res.put(10, false, &r(1));
        assert_eq!(res.take(10, true), None, "a read's does not serve a write");
        assert_eq!(res.take(12, false), None, "same slot, another page");
        assert_eq!(res.take(10, false), Some(r(1)));
        assert_eq!(res.take(10, false), None, "taken once");
        res.put(20, true, &r(2));
        assert_eq!(res.take(20, false), Some(r(2)));
        res.put(1, false, &r(3));
        res.put(2, false, &r(4));
        res.put(2, false, &r(5));
        res.put(3, false, &r(6));
        assert_eq!(res.take(1, false), None, "page 3 took its slot");
        assert_eq!(res.take(2, false), Some(r(5)), "the same page's newest");
        assert_eq!(res.take(3, false), Some(r(6)));
        let mut none = Resolutions::<0>::new();
        none.put(1, false, &r(1));
        assert_eq!(none.take(1, false), None);
    }
}
