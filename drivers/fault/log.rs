// SPDX-License-Identifier: GPL-2.0-only

//! An engine's fault log: the exact timings of the last [`RECORDS`] faults its processes'
//! fault threads answered (the core's `stamps`: one record per fault, a stamp per step), and
//! debugfs `exanest-dmaN/faults`, which gives their exact percentiles per stage and takes
//! `on`, `off` and `clear` (Documentation/design.rst, "Fault timings").
//!
//! The log's lock is a leaf: taken by a fault thread to push one record after the answer is
//! written (no other driver lock held), and by a debugfs read to copy the records out.

use crate::exanest_core::stamps::{self, Command, Log, Record, Resolutions, Step};
use crate::ffi;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    uaccess::UserSliceReader,
};

/// Records an engine keeps: the last 4096 faults (256 KiB).
pub(crate) const RECORDS: usize = 4096;

/// Longest command a write of debugfs `faults` takes.
const MAX_INPUT: usize = 16;

/// The SMMU reports' resolutions a process keeps for the engine's reports of the same faults
/// (`Process::resolutions`).
pub(crate) const RESOLUTIONS: usize = 8;

/// Rounds over which [`FaultLog::new`] times the log's own work.
const COST_ROUNDS: u64 = 1024;

/// An engine's fault log.
#[pin_data]
pub(crate) struct FaultLog {
    /// Whether records are kept (module parameter `fault_stamps`, then debugfs).
    on: AtomicBool,
    #[pin]
    log: Mutex<Log<KVVec<Record>>>,
    /// What keeping one fault's record costs, ns ([`FaultLog::measure`]).
    record_ns: AtomicU64,
}

impl FaultLog {
    /// An empty log, keeping records if `on`.
    pub(crate) fn new(on: bool) -> Result<Arc<Self>> {
        let buf = KVVec::from_elem(Record::default(), RECORDS, GFP_KERNEL)?;
        let this = Arc::pin_init(
            pin_init!(FaultLog {
                on: AtomicBool::new(on),
                log <- new_mutex!(Log::new(buf), "FaultLog::log"),
                record_ns: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )?;
        this.record_ns.store(this.measure(), Ordering::Relaxed);
        Ok(this)
    }

    /// What keeping one fault's record costs, ns: the work the fault path does only with the
    /// log on (the SMMU report's resolution kept, then taken back and merged into the
    /// engine's record of the fault, and the record pushed under the log's lock), timed over
    /// [`COST_ROUNDS`] rounds on the new log, which is then emptied. What the log costs a
    /// fault is this against the fault's service; an A/B of whole copies with the log off
    /// and on measures the scheduling it shifts as much as the log.
    fn measure(&self) -> u64 {
        let mut kept = Resolutions::<RESOLUTIONS>::new();
        let mut rec = Record::default();
        let t0 = ffi::stamp_ns();
        for i in 0..COST_ROUNDS {
            let mut resolution = Record::default();
            resolution.stamp(Step::FaultIn, t0 + i);
            kept.put(i, false, core::hint::black_box(&resolution));
            if let Some(r) = kept.take(i, false) {
                rec.merge_resolution(&r);
            }
            self.log.lock().push(core::hint::black_box(&rec));
        }
        let ns = ffi::stamp_ns().saturating_sub(t0) / COST_ROUNDS;
        self.log.lock().clear();
        ns
    }

    /// Whether records are kept: a fault thread stamps what only the log needs when they are.
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Keep `r`, the record of a fault answered (nothing when the log is off).
    pub(crate) fn push(&self, r: &Record) {
        if self.on() {
            self.log.lock().push(r);
        }
    }

    /// debugfs `faults`, read: the summary (`stamps::write_summary`). The records are copied
    /// out under the lock, and sorted after.
    pub(crate) fn fmt(this: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Ok(mut recs), Ok(mut scratch)) = (
            KVVec::from_elem(Record::default(), RECORDS, GFP_KERNEL),
            KVVec::from_elem(0u64, RECORDS, GFP_KERNEL),
        ) else {
            return writeln!(f, "{{\"error\": \"ENOMEM\"}}");
        };
        let (n, total) = {
            let log = this.log.lock();
            (log.copy_to(&mut recs), log.total())
        };
        let cost = this.record_ns.load(Ordering::Relaxed);
        stamps::write_summary(f, &recs[..n], total, this.on(), cost, &mut scratch)
    }

    /// debugfs `faults`, written: `on`, `off` or `clear` (EINVAL for anything else).
    pub(crate) fn write(this: &Arc<Self>, r: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; MAX_INPUT];
        let n = r.len();
        if n > MAX_INPUT {
            return Err(EINVAL);
        }
        r.read_slice(&mut buf[..n])?;
        match Command::parse(&buf[..n]).ok_or(EINVAL)? {
            Command::On => this.on.store(true, Ordering::Relaxed),
            Command::Off => this.on.store(false, Ordering::Relaxed),
            Command::Clear => this.log.lock().clear(),
        }
        Ok(())
    }
}
