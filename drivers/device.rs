// SPDX-License-Identifier: GPL-2.0-only

//! One engine instance, as both front-ends (exanest_main.rs) set it up: its number, its misc
//! device `/dev/exanest-dmaN`, its contexts and the process holding each, its debugfs files,
//! its interrupt, and unbind. Every open file gets a free context (EBUSY when none is). Lock
//! order: process.rs.

use crate::engine::{Context, Engine, Hw};
use crate::ffi;
use crate::handler::exanest_iommu_fault;
use crate::process::Process;
use crate::stats;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    bindings, debugfs,
    device::{Bound, Device},
    fs::File,
    irq,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    sync::aref::ARef,
    sync::{new_mutex, poll::PollTable, Arc, ArcBorrow, Mutex},
    types::ForeignOwnable,
};

/// Device names: the misc API wants `'static` names.
const NAMES: [&CStr; 8] = [
    c"exanest-dma0",
    c"exanest-dma1",
    c"exanest-dma2",
    c"exanest-dma3",
    c"exanest-dma4",
    c"exanest-dma5",
    c"exanest-dma6",
    c"exanest-dma7",
];

/// Instance numbers in use (bit n = /dev/exanest-dmaN).
static INSTANCES: AtomicU32 = AtomicU32::new(0);

/// A claimed instance number, given back on drop.
struct InstanceNo(u32);

impl InstanceNo {
    /// The lowest free number; ENOSPC when all are taken.
    fn claim() -> Result<Self> {
        loop {
            let used = INSTANCES.load(Ordering::Acquire);
            let n = (!used).trailing_zeros();
            if n as usize >= NAMES.len() {
                return Err(ENOSPC);
            }
            if INSTANCES
                .compare_exchange(used, used | (1 << n), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(InstanceNo(n));
            }
        }
    }
}

impl Drop for InstanceNo {
    fn drop(&mut self) {
        INSTANCES.fetch_and(!(1 << self.0), Ordering::AcqRel);
    }
}

/// One context and the process holding it.
struct Slot {
    ctx: Arc<Context>,
    owner: Option<Arc<Process>>,
}

/// What `Instance::state` protects.
struct InstanceState {
    /// Context n and its holder.
    slots: KVec<Slot>,
    /// The device is gone (unbound): no new opens.
    dead: bool,
}

/// One engine instance: its hardware, its contexts and who holds each.
#[pin_data]
pub(crate) struct Instance {
    engine: Arc<Engine>,
    /// Holders and liveness ([`InstanceState`]); first in the lock order (process.rs).
    #[pin]
    state: Mutex<InstanceState>,
}

impl Instance {
    /// Open the engine for the current process on the lowest free context: EBUSY if every
    /// context is held, ENODEV once the device is gone.
    fn open(&self) -> Result<Arc<Process>> {
        let mut st = self.state.lock();
        if st.dead {
            return Err(ENODEV);
        }
        let slot = st
            .slots
            .iter_mut()
            .find(|s| s.owner.is_none())
            .ok_or(EBUSY)?;
        let late = crate::module_parameters::fault_handler_late.value();
        let max_mib = crate::module_parameters::max_registered_mib.value();
        let max_bytes = max_mib.saturating_mul(1 << 20);
        // The context may have been stopped with work of a process that is gone: it starts
        // clean (quiesce also clears its interrupt status).
        slot.ctx.reset();
        let p = Process::new(slot.ctx.clone(), Some(exanest_iommu_fault), late, max_bytes)?;
        slot.owner = Some(p.clone());
        Ok(p)
    }

    /// The file is closed (last reference): tear the process down and free its context.
    fn release(&self, p: &Process) {
        let notifiers = {
            let mut st = self.state.lock();
            let n = p.teardown(ECANCELED);
            for s in st.slots.iter_mut() {
                if s.owner.as_ref().is_some_and(|o| core::ptr::eq(&**o, p)) {
                    s.owner = None;
                }
            }
            n
        };
        // Without `Instance::state`: the fault thread gives up a fault-in in progress and
        // exits, then the notifiers go (removal waits for invalidation callbacks).
        p.stop_faults();
        drop(notifiers);
    }

    /// The device is going away: stop DMA and take the domain away from any process still
    /// using it; its file then fails every call with ENODEV until it is closed.
    pub(crate) fn unbind(&self) {
        let mut owners = KVec::new();
        let mut notifiers = KVec::new();
        {
            let mut st = self.state.lock();
            st.dead = true;
            for s in st.slots.iter_mut() {
                if let Some(p) = s.owner.take() {
                    let n = p.teardown(ENODEV);
                    // Without memory the process stays torn down; only the order of the
                    // later steps for it is lost (its notifiers go when its file closes).
                    let _ = notifiers.push(n, GFP_KERNEL);
                    let _ = owners.push(p, GFP_KERNEL);
                }
            }
            self.engine.reset();
        }
        for p in owners.iter() {
            p.stop_faults();
        }
        drop(notifiers);
        drop(owners);
    }

    /// Take the interrupt status of the contexts in `summary` and hand it to their holders. A
    /// context that nobody holds is quiesced.
    fn dispatch(&self, summary: u64) {
        let mut rest = summary;
        while rest != 0 {
            let c = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            // The status is taken under `state`, so it goes to the process that held the context
            // when it was raised, and not to one that opens it after.
            let (owner, pending) = {
                let st = self.state.lock();
                let Some(s) = st.slots.get(c) else {
                    continue;
                };
                let pending = s.ctx.take_irq_status();
                if s.owner.is_none() {
                    s.ctx.reset();
                }
                (s.owner.clone(), pending)
            };
            if let Some(p) = owner {
                if pending != 0 {
                    p.on_interrupt(pending);
                }
            }
        }
    }
}

/// debugfs `exanest-dmaN/stats`: for each held context, a `context N` line, then its process's
/// counters, regions and latencies.
fn stats_fmt(inst: &Arc<Instance>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let mut held = KVec::new();
    for (i, s) in inst.state.lock().slots.iter().enumerate() {
        if let Some(p) = s.owner.as_ref() {
            held.push((i, p.clone()), GFP_KERNEL)
                .map_err(|_| core::fmt::Error)?;
        }
    }
    if held.is_empty() {
        return writeln!(f, "idle");
    }
    for (i, p) in held.iter() {
        writeln!(f, "context {i}")?;
        p.write_stats(f)?;
    }
    Ok(())
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
            reg <- MiscDeviceRegistration::register(MiscDeviceOptions { name })
                .pin_chain(|reg| {
                    // SAFETY: `reg` is registered, its `fops` are the abstraction's for
                    // `OpenFile`, whose files' private data `exanest_rust_poll` expects.
                    unsafe { ffi::add_poll(reg.as_raw()) };
                    Ok(())
                }),
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
        crate::ioctl::dispatch(this.process.as_arc_borrow(), cmd, arg)
    }
}

/// The poll file operation, called by the C shim's `.poll`.
///
/// # Safety
///
/// `file` is an open file of an exanest misc device (its private data is the `Arc<OpenFile>`
/// that `open` stored) and `pt` the poll table of the current poll call.
#[no_mangle]
pub(crate) unsafe extern "C" fn exanest_rust_poll(
    file: *mut bindings::file,
    pt: *mut bindings::poll_table_struct,
) -> bindings::__poll_t {
    // SAFETY: Per the contract, the private data is an `Arc<OpenFile>` from `into_foreign`,
    // alive until release, which cannot run while a poll call holds the file.
    let p: ArcBorrow<'_, OpenFile> = unsafe { <Arc<OpenFile>>::borrow((*file).private_data) };
    // SAFETY: `file` is a valid open file for the duration of the call (the contract).
    let f = unsafe { File::from_raw_file(file) };
    // SAFETY: `pt` is the poll table of this call (or NULL), valid for its duration.
    let table = unsafe { PollTable::from_raw(pt) };
    p.process.poll_mask(f, table)
}
ffi::check_callback!(ffi::raw::exanest_rust_poll, exanest_rust_poll);

/// What both front-ends keep for an engine besides its interrupt: the misc device and the
/// debugfs views.
#[pin_data]
pub(crate) struct EngineDevices {
    #[pin]
    misc: MiscHolder,
    #[pin]
    stats: debugfs::File<Arc<Instance>>,
    #[pin]
    hw: debugfs::File<(&'static CStr, Arc<Engine>)>,
    _debugfs: debugfs::Dir,
    /// The instance, for unbind.
    pub(crate) inst: Arc<Instance>,
    _no: InstanceNo,
}

/// debugfs `exanest-dmaN/engine`.
fn engine_fmt(
    v: &(&'static CStr, Arc<Engine>),
    f: &mut core::fmt::Formatter<'_>,
) -> core::fmt::Result {
    stats::write_engine(v.0, &v.1, f)
}

impl EngineDevices {
    /// Give the probed `engine` a number, a misc device and debugfs files. Context n issues its
    /// DMA as `ctx_devs[n]`; the engine has as many contexts as that list has devices.
    pub(crate) fn new(
        engine: Engine,
        ctx_devs: &[ARef<Device>],
        dev: &Device<Bound>,
    ) -> Result<(impl PinInit<Self, Error>, Arc<Instance>)> {
        let no = InstanceNo::claim()?;
        let engine = Arc::new(engine, GFP_KERNEL)?;
        let name = NAMES[no.0 as usize];
        let mut slots = KVec::with_capacity(ctx_devs.len(), GFP_KERNEL)?;
        for (i, d) in ctx_devs.iter().enumerate() {
            let ctx = Context {
                engine: engine.clone(),
                index: i as u32,
                dev: d.clone(),
            };
            slots.push(
                Slot {
                    ctx: Arc::new(ctx, GFP_KERNEL)?,
                    owner: None,
                },
                GFP_KERNEL,
            )?;
        }
        dev_info!(
            dev,
            "PLDMA v{}.{}, {} contexts of {} channels, /dev/{}\n",
            engine.version.major().get(),
            engine.version.minor().get(),
            slots.len(),
            engine.channels,
            name.to_str().unwrap_or("?")
        );
        let inst_engine = engine.clone();
        let inst = Arc::pin_init(
            pin_init!(Instance {
                engine: inst_engine,
                state <- new_mutex!(InstanceState { slots, dead: false }, "Instance::state"),
            }),
            GFP_KERNEL,
        )?;
        let dir = debugfs::Dir::new(name);
        let (ret, misc_inst, stats_inst) = (inst.clone(), inst.clone(), inst.clone());
        let init = try_pin_init!(EngineDevices {
            misc <- MiscHolder::new(name, misc_inst),
            stats <- dir.read_callback_file(c"stats", stats_inst, &stats_fmt),
            hw <- dir.read_callback_file(c"engine", (name, engine), &engine_fmt),
            _debugfs: dir,
            inst,
            _no: no,
        }? Error);
        Ok((init, ret))
    }
}

/// The engine's wired interrupt: a level-triggered line, shared, with the work in the thread.
pub(crate) struct IrqHandler {
    pub(crate) inst: Arc<Instance>,
}

impl irq::ThreadedHandler for IrqHandler {
    fn handle(&self) -> irq::ThreadedIrqReturn {
        if self.inst.engine.irq_summary() != 0 {
            // IRQF_ONESHOT keeps the line masked until the thread has acknowledged it.
            irq::ThreadedIrqReturn::WakeThread
        } else {
            irq::ThreadedIrqReturn::None
        }
    }

    fn handle_threaded(&self) -> irq::IrqReturn {
        let summary = self.inst.engine.irq_summary();
        if summary == 0 {
            return irq::IrqReturn::None;
        }
        self.inst.dispatch(summary);
        irq::IrqReturn::Handled
    }
}
