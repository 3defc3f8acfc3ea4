// SPDX-License-Identifier: GPL-2.0-only

//! One engine instance, as both front-ends (exanest_main.rs) set it up: its number, its misc
//! device `/dev/exanest-dmaN`, its contexts and the process holding each, its debugfs files,
//! its interrupt, and unbind. An open file gets a context when one is free, else when it next
//! submits a copy (contexts.rs). Lock
//! order: process.rs.

pub(crate) mod resident;

use crate::contexts::Contexts;
use crate::error::CtxError;
use crate::exanest_core::regs::net;
use crate::fault::{handler::exanest_iommu_fault, log::FaultLog};
use crate::ffi;
use crate::hw::fring::FaultRing;
use crate::hw::kqueue::KernelQueue;
use crate::hw::link;
use crate::hw::{Context, Engine, Feature, Hw};
use crate::instno::InstanceNo;
use crate::ioctl::{Reply, Request};
use crate::mm::iommu::Reports;
use crate::process::stats;
use crate::process::Process;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::{
    bindings, debugfs,
    device::{Bound, Device},
    fs::File,
    irq,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::VmaNew,
    prelude::*,
    sync::aref::ARef,
    sync::{
        new_condvar, new_mutex, poll::PollTable, Arc, ArcBorrow, CondVar, CondVarTimeoutResult,
        Mutex,
    },
    types::ForeignOwnable,
    workqueue::{self, new_work, Work},
};

/// What `Instance::state` protects.
struct InstanceState {
    /// The contexts, the processes, who holds which (contexts.rs).
    ctxs: Contexts,
    /// The device is gone (unbound): no new opens.
    dead: bool,
}

/// One engine instance: its hardware, its contexts and the processes using them.
#[pin_data]
pub(crate) struct Instance {
    engine: Arc<Engine>,
    /// The fault log of the engine's processes (fault/log.rs).
    log: Arc<FaultLog>,
    /// Contexts, processes and liveness ([`InstanceState`]); first in the lock order
    /// (process.rs).
    #[pin]
    state: Mutex<InstanceState>,
    /// Notified when a context may have become free (a process closed); waiters for one also
    /// look again every few milliseconds, since a holder going idle notifies nobody.
    #[pin]
    freed: CondVar,
    /// Endpoints the engine wants resident (resident.rs), and the work that makes them so.
    wanted: [AtomicU32; net::EP_WANTED_WORDS],
    #[pin]
    work: Work<Instance>,
}

/// How often a process waiting for a context looks again, in ms.
const WAIT_POLL_MS: u32 = 2;
/// How often a copy may find its process's context taken between the grant and the
/// submission before it gives up with EAGAIN.
const ACQUIRE_TRIES: usize = 64;

impl Instance {
    /// Open the engine for the current process; it gets a context if one is free (else when it
    /// submits its first copy). ENODEV once the device is gone.
    fn open(&self) -> Result<Arc<Process>> {
        let mut st = self.state.lock();
        if st.dead {
            return Err(ENODEV);
        }
        let reports = Reports {
            late_handler: crate::module_parameters::fault_handler_late.value(),
            iommu_events: crate::module_parameters::smmu_fault_events.value(),
        };
        let max_mib = crate::module_parameters::max_registered_mib.value();
        let max_bytes = max_mib.saturating_mul(1 << 20);
        let any = st.ctxs.any().ok_or(ENODEV)?.dev().clone();
        let p = Process::new(
            self.engine.clone(),
            self.log.clone(),
            &any,
            Some(exanest_iommu_fault::<Process>),
            reports,
            max_bytes,
            crate::module_parameters::budget_pages.value(),
        )?;
        st.ctxs.add(&p)?;
        Ok(p)
    }

    /// The live process holding endpoint `ep` (resident.rs).
    pub(crate) fn process_of(&self, ep: u32) -> Option<Arc<Process>> {
        let st = self.state.lock();
        let p = st.ctxs.procs().iter().find(|p| p.endpoint() == ep)?;
        (!st.dead).then(|| p.clone())
    }

    /// `p` is about to submit a copy: wait until it holds a context (contexts.rs). EINTR
    /// (restarted) on a signal, ENODEV once the device is gone.
    pub(crate) fn acquire(&self, p: &Arc<Process>) -> Result {
        let mut st = self.state.lock();
        loop {
            if st.dead {
                return Err(ENODEV);
            }
            if st.ctxs.acquire(p)? {
                return Ok(());
            }
            let t = kernel::time::msecs_to_jiffies(WAIT_POLL_MS);
            if let CondVarTimeoutResult::Signal { .. } =
                self.freed.wait_interruptible_timeout(&mut st, t)
            {
                st.ctxs.leave_queue(p);
                return Err(ERESTARTSYS);
            }
        }
    }

    /// Run a call: one that needs a context (COPY, QUEUE_CREATE, MBOX_CREATE, a REG with a
    /// remote right) gets one first, and again when it was taken from the process in between
    /// (it was idle then). A process that may not make the call does not wait for, or take, a
    /// context: the call refuses it (EPERM, as every call does).
    fn call(&self, p: &Arc<Process>, req: &Request) -> Result<Reply> {
        let wants = req.needs_context() && p.check_caller().is_ok();
        for _ in 0..ACQUIRE_TRIES {
            if wants {
                self.acquire(p)?;
            }
            match req.execute(p) {
                Err(CtxError::Lost) => continue,
                Err(CtxError::Failed(e)) => return Err(e),
                Ok(r) => return Ok(r),
            }
        }
        Err(EAGAIN)
    }

    /// The file is closed (last reference): tear the process down and free its context.
    fn release(&self, p: &Process) {
        let notifiers = {
            let mut st = self.state.lock();
            let n = p.teardown(ECANCELED);
            st.ctxs.remove(p);
            n
        };
        self.freed.notify_all();
        // Without `Instance::state`: the fault thread gives up a fault-in in progress and
        // exits, then the notifiers go (removal waits for invalidation callbacks).
        p.stop_faults();
        drop(notifiers);
    }

    /// The device is going away: stop DMA and take the domain away from every process still
    /// using it; its file then fails every call with ENODEV until it is closed.
    pub(crate) fn unbind(&self) {
        let mut owners = KVec::new();
        let mut notifiers = KVec::new();
        {
            let mut st = self.state.lock();
            st.dead = true;
            for p in st.ctxs.procs() {
                let n = p.teardown(ENODEV);
                // Without memory the process stays torn down; only the order of the later
                // steps for it is lost (its notifiers go when its file closes).
                let _ = notifiers.push(n, GFP_KERNEL);
                let _ = owners.push(p.clone(), GFP_KERNEL);
            }
            for p in owners.iter() {
                st.ctxs.remove(p);
            }
            self.engine.reset();
        }
        self.freed.notify_all();
        for p in owners.iter() {
            p.zap_doorbell();
            p.stop_faults();
        }
        drop(notifiers);
        drop(owners);
    }

    /// Take the interrupt status of the contexts in `summary`, raised at `at` (the fault path's
    /// stamp clock; 0 if unknown), and hand it to their holders. A context that nobody holds
    /// is quiesced.
    fn dispatch(&self, summary: u64, at: u64) {
        let mut rest = summary;
        while rest != 0 {
            let c = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            // The status is taken under `state`, so it goes to the process that held the context
            // when it was raised, and not to one that takes it after.
            let (owner, ctx, pending) = {
                let st = self.state.lock();
                let Some((ctx, holder)) = st.ctxs.slot(c) else {
                    continue;
                };
                let pending = ctx.take_irq_status();
                if holder.is_none() {
                    st.ctxs.quiesce(c);
                }
                (holder.cloned(), ctx.clone(), pending)
            };
            if let Some(p) = owner {
                if pending != 0 {
                    p.on_interrupt(&ctx, pending, at);
                }
            }
        }
    }
}

/// debugfs `exanest-dmaN/stats`: for each process, a `context N` line (`context none` while it
/// holds none), then its counters, regions and latencies; last, `iommu_refused N`, how often
/// the IOMMU had no translation context for a process's domain (contexts.rs).
fn stats_fmt(inst: &Arc<Instance>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let mut procs = KVec::new();
    let refused = {
        let st = inst.state.lock();
        for p in st.ctxs.procs() {
            procs
                .push(p.clone(), GFP_KERNEL)
                .map_err(|_| core::fmt::Error)?;
        }
        st.ctxs.iommu_refused()
    };
    if procs.is_empty() {
        writeln!(f, "idle")?;
        return writeln!(f, "iommu_refused {refused}");
    }
    for p in procs.iter() {
        match p.context_index() {
            Some(c) => writeln!(f, "context {c}")?,
            None => writeln!(f, "context none")?,
        }
        p.write_stats(f)?;
    }
    writeln!(f, "iommu_refused {refused}")
}

/// The misc device of one engine, with the instance that `open` hands to new files.
#[pin_data]
struct MiscHolder {
    #[pin]
    reg: MiscDeviceRegistration<OpenFile>,
    inst: Arc<Instance>,
}

impl MiscHolder {
    fn new(name: &'static CStr, inst: Arc<Instance>) -> impl PinInit<Self, Error> {
        try_pin_init!(MiscHolder {
            reg <- MiscDeviceRegistration::register(MiscDeviceOptions { name }),
            inst,
        }? Error)
    }
}

/// One open file of `/dev/exanest-dmaN`: the process's state, and the instance whose owner
/// slot it holds until release.
pub(crate) struct OpenFile {
    inst: Arc<Instance>,
    process: Arc<Process>,
}

#[vtable]
impl MiscDevice for OpenFile {
    type Ptr = Arc<OpenFile>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Arc<OpenFile>> {
        // SAFETY: Every `MiscDeviceRegistration<OpenFile>` is the `reg` field of a `MiscHolder`
        // (the only place one is created), and `open` runs under misc_mtx while it is
        // registered, so the holder is alive.
        let holder = unsafe { &*kernel::container_of!(core::ptr::from_ref(misc), MiscHolder, reg) };
        let process = holder.inst.open()?;
        let file = Arc::new(
            OpenFile {
                inst: holder.inst.clone(),
                process: process.clone(),
            },
            GFP_KERNEL,
        );
        Ok(file.inspect_err(|_| holder.inst.release(&process))?)
    }

    fn release(f: Arc<OpenFile>, _file: &File) {
        f.inst.release(&f.process);
    }

    fn ioctl(this: ArcBorrow<'_, OpenFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        // The argument is read once; the call then runs on what was read (ioctl.rs).
        let req = Request::read(cmd, arg)?;
        let reply = this.inst.call(&this.process, &req)?;
        reply.write(&this.process, cmd, arg)
    }

    fn mmap(this: ArcBorrow<'_, OpenFile>, _file: &File, vma: &VmaNew) -> Result {
        this.process.mmap_doorbell(vma, doorbell_ops())
    }

    fn poll(this: ArcBorrow<'_, OpenFile>, file: &File, table: PollTable<'_>) -> u32 {
        this.process.poll_mask(file, table)
    }
}

/// The doorbell's `vm_ops->fault` (its VMA set up by `ffi::map_doorbell`), under the fault's
/// lock (mmap or VMA lock). The doorbell page is mapped at fault time, never at mmap: its
/// context can be taken from the process while it is idle (contexts.rs), which zaps the
/// mapping, and the next access faults it back (userq.rs). When the queue has no context,
/// waiting for one must not hold the fault's lock: taking a context takes the driver's locks,
/// under which pinning takes the mmap lock. So the lock is dropped (the file pinned
/// meanwhile), the wait runs, and the access is retried; its result shows at the retry: the
/// page, SIGBUS, or (on a signal) the signal first.
///
/// # Safety
///
/// `vmf` is the fault being handled, in a doorbell VMA, whose file is an open exanest file
/// (its private data the `Arc<OpenFile>` that `open` stored).
unsafe extern "C" fn doorbell_fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
    // SAFETY: Per the contract `vmf` is the fault being handled.
    let file = unsafe { ffi::raw::exanest_shim_vmf_file(vmf) };
    // SAFETY: Per the contract: the VMA holds the file, so the `Arc<OpenFile>` lives.
    let p: ArcBorrow<'_, OpenFile> = unsafe { <Arc<OpenFile>>::borrow((*file).private_data) };
    // SAFETY: `vmf` is valid for the call (the contract).
    let flags = unsafe { (*vmf).flags };
    match p.process.doorbell_fault(vmf) {
        Ok(()) => bindings::vm_fault_reason_VM_FAULT_NOPAGE,
        Err(e) if e == ENOMEM => bindings::vm_fault_reason_VM_FAULT_OOM,
        // A user access may retry; anything else (no GUP reaches a VM_IO page) may not.
        Err(e)
            if e == EAGAIN
                && flags & bindings::fault_flag_FAULT_FLAG_ALLOW_RETRY != 0
                && flags & bindings::fault_flag_FAULT_FLAG_RETRY_NOWAIT == 0 =>
        {
            // SAFETY: `file` is live (the VMA holds it); the reference keeps it, and with it
            // `p`, once the fault's lock (and so the VMA) is let go below.
            unsafe { bindings::get_file(file) };
            // SAFETY: `vmf` is the fault being handled, which may retry (checked above): its
            // lock is released here, as VM_FAULT_RETRY tells the caller.
            unsafe { ffi::raw::exanest_shim_release_fault_lock(vmf) };
            // The retried fault shows the outcome (a context, SIGBUS, or a signal).
            let _ = p.inst.acquire(&p.process);
            // SAFETY: The reference taken above; `p` is not used after it.
            unsafe { bindings::fput(file) };
            bindings::vm_fault_reason_VM_FAULT_RETRY
        }
        Err(_) => bindings::vm_fault_reason_VM_FAULT_SIGBUS,
    }
}

/// The doorbell VMA's operations: the fault only.
struct DoorbellOps(bindings::vm_operations_struct);

// SAFETY: The table is never written; the mm only reads it.
unsafe impl Sync for DoorbellOps {}

static DOORBELL_OPS: DoorbellOps = DoorbellOps(bindings::vm_operations_struct {
    fault: Some(doorbell_fault),
    // SAFETY: Every other member is an optional function pointer or a plain value, for which
    // all zeroes means none.
    ..unsafe { core::mem::zeroed() }
});

/// The doorbell VMA's operations, for `ffi::map_doorbell`.
pub(crate) fn doorbell_ops() -> &'static bindings::vm_operations_struct {
    &DOORBELL_OPS.0
}

/// What both front-ends keep for an engine besides its interrupt: the misc device and the
/// debugfs views.
#[pin_data(PinnedDrop)]
pub(crate) struct EngineDevices {
    #[pin]
    misc: MiscHolder,
    #[pin]
    stats: debugfs::File<Arc<Instance>>,
    #[pin]
    hw: debugfs::File<(&'static CStr, Arc<Engine>)>,
    #[pin]
    link: debugfs::File<Arc<Engine>>,
    #[pin]
    quarantine: debugfs::File<Arc<Engine>>,
    #[pin]
    faults: debugfs::File<Arc<FaultLog>>,
    _debugfs: debugfs::Dir,
    /// The instance, for unbind.
    inst: Arc<Instance>,
    _no: InstanceNo,
}

#[pinned_drop]
impl PinnedDrop for EngineDevices {
    fn drop(self: Pin<&mut Self>) {
        // The interrupt went first (the front-ends' data): nothing queues the work again.
        self.inst.cancel_wanted();
    }
}

/// debugfs `exanest-dmaN/engine`.
fn engine_fmt(
    v: &(&'static CStr, Arc<Engine>),
    f: &mut core::fmt::Formatter<'_>,
) -> core::fmt::Result {
    stats::write_engine(v.0, &v.1, f)
}

impl EngineDevices {
    /// The device is going: end every process's use of it (`Instance::unbind`).
    pub(crate) fn unbind(&self) {
        self.inst.unbind();
    }

    /// Give the probed `engine` a number, a misc device and debugfs files. Context n issues its
    /// DMA as `ctx_devs[n]`, and its doorbell page is at `doorbells[n]` (none beyond the list);
    /// the engine has as many contexts as `ctx_devs` has devices.
    pub(crate) fn new(
        engine: Engine,
        ctx_devs: &[ARef<Device>],
        doorbells: &[u64],
        dev: &Device<Bound>,
    ) -> Result<(impl PinInit<Self, Error>, IrqHandler)> {
        let no = InstanceNo::claim()?;
        let engine = Arc::new(engine, GFP_KERNEL)?;
        let name = no.name();
        let mut slots = KVec::with_capacity(ctx_devs.len(), GFP_KERNEL)?;
        // The kernel queue (2.2) takes COPY's transfers on PCI (the PF reaches its rings).
        let kq = engine.has(Feature::MovableQueue);
        // The fault record ring (2.11): the engine writes each fault there (the PF reaches it).
        let frec = engine.has(Feature::FaultRecords);
        for (i, d) in ctx_devs.iter().enumerate() {
            let q = KernelQueue::for_context(kq && i < doorbells.len(), dev)?;
            let fr = FaultRing::for_context(frec, dev)?;
            let ctx = Context::new(
                &engine,
                i as u32,
                d.clone(),
                doorbells.get(i).copied(),
                q,
                fr,
            );
            slots.push(Arc::new(ctx, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        dev_info!(
            dev,
            "PLDMA v{}.{}, {} contexts of {} channels, /dev/{}\n",
            engine.version().major().get(),
            engine.version().minor().get(),
            slots.len(),
            engine.channels(),
            name.to_str().unwrap_or("?")
        );
        let (inst_engine, ctxs) = (engine.clone(), Contexts::new(slots)?);
        let log = FaultLog::new(crate::module_parameters::fault_stamps.value())?;
        let inst_log = log.clone();
        let inst = Arc::pin_init(
            pin_init!(Instance {
                engine: inst_engine,
                log: inst_log,
                state <- new_mutex!(
                    InstanceState { ctxs, dead: false },
                    "Instance::state"
                ),
                freed <- new_condvar!("Instance::freed"),
                wanted: Default::default(),
                work <- new_work!("Instance::work"),
            }),
            GFP_KERNEL,
        )?;
        let dir = debugfs::Dir::new(name);
        let (ret, misc_inst, stats_inst) = (inst.clone(), inst.clone(), inst.clone());
        let init = try_pin_init!(EngineDevices {
            misc <- MiscHolder::new(name, misc_inst),
            stats <- dir.read_callback_file(c"stats", stats_inst, &stats_fmt),
            hw <- dir.read_callback_file(c"engine", (name, engine.clone()), &engine_fmt),
            link <- dir.read_write_callback_file(c"link", engine.clone(), &link::link_fmt, &link::link_write),
            quarantine <- dir.read_write_callback_file(
                c"quarantine",
                engine,
                &link::quarantine_fmt,
                &link::quarantine_write
            ),
            faults <- dir.read_write_callback_file(c"faults", log, &FaultLog::fmt, &FaultLog::write),
            _debugfs: dir,
            inst,
            _no: no,
        }? Error);
        Ok((
            init,
            IrqHandler {
                inst: ret,
                summary: AtomicU64::new(0),
                at: AtomicU64::new(0),
                net_skipped: AtomicU32::new(0),
            },
        ))
    }
}

/// The engine's wired interrupt: a level-triggered line, shared, with the work in the thread.
pub(crate) struct IrqHandler {
    inst: Arc<Instance>,
    /// The contexts the hard handler found raising the interrupt, for the thread.
    summary: AtomicU64,
    /// When the hard handler first found them (the fault path's stamp clock): a fault's
    /// service starts at its interrupt, as a CPU's page fault starts at its trap.
    at: AtomicU64,
    /// Runs of the thread in a row that left NET_IRQ unread because contexts raised the line.
    net_skipped: AtomicU32,
}

/// Runs of the interrupt thread in a row that may leave NET_IRQ unread while contexts keep the
/// line raised: about a millisecond of a fault storm (70,000 interrupts/s).
const NET_IRQ_SKIPS: u32 = 64;

impl irq::ThreadedHandler for IrqHandler {
    fn handle(&self) -> irq::ThreadedIrqReturn {
        let now = ffi::stamp_ns();
        let summary = self.inst.engine.irq_summary();
        if summary != 0 || self.inst.engine.eps_wanted() {
            // The line stays masked until the thread has run (IRQF_ONESHOT): the first
            // interrupt of a run is its time.
            let _ = self
                .at
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            self.summary.fetch_or(summary, Ordering::Release);
            // IRQF_ONESHOT keeps the line masked until the thread has acknowledged it.
            irq::ThreadedIrqReturn::WakeThread
        } else {
            irq::ThreadedIrqReturn::None
        }
    }

    fn handle_threaded(&self) -> irq::IrqReturn {
        ffi::prof_mark(ffi::Mark::Begin);
        let ret = self.handle_thread();
        ffi::prof_mark(ffi::Mark::Drop);
        ret
    }
}

impl IrqHandler {
    /// The interrupt thread's work ([`irq::ThreadedHandler::handle_threaded`]).
    fn handle_thread(&self) -> irq::IrqReturn {
        // What the hard handler read, not read again (an MMIO read per fault saved): the line
        // is level-triggered and stays masked until this returns, so a context that raised it
        // since (not in `summary`, its status still set) raises it again once unmasked.
        let at = self.at.swap(0, Ordering::Relaxed);
        let summary = self.summary.swap(0, Ordering::Acquire);
        // NET_IRQ (an MMIO read, 55-200 ns of a fault's path under -icount) only when no
        // context raised the line, or after NET_IRQ_SKIPS runs that did: the line is
        // level-triggered, so endpoints wanted keep it raised, and it comes again with no
        // context once this returns, unless contexts keep raising it (a fault storm), which
        // the bound is for.
        // One thread runs this (IRQF_ONESHOT): a plain load and store suffice.
        let skipped = self.net_skipped.load(Ordering::Relaxed);
        let skip = summary != 0 && skipped + 1 < NET_IRQ_SKIPS;
        self.net_skipped
            .store(if skip { skipped + 1 } else { 0 }, Ordering::Relaxed);
        let wanted = !skip && self.inst.take_wanted();
        if summary == 0 && !wanted {
            return irq::IrqReturn::None;
        }
        self.inst.dispatch(summary, at);
        if wanted {
            // Already queued: that run reads the endpoints wanted now too.
            let _ = workqueue::system_long().enqueue(self.inst.clone());
        }
        irq::IrqReturn::Handled
    }
}
