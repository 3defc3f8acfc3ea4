// SPDX-License-Identifier: GPL-2.0-only

//! One engine instance, as both front-ends (exanest_main.rs) set it up: its number, its misc
//! device `/dev/exanest-dmaN` and the process that has it open, its debugfs files, its
//! interrupt, and unbind. Lock order: process.rs.

use crate::engine::{Engine, Hw, Regs};
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

/// What `Instance::state` protects.
struct InstanceState {
    /// The process that has the engine open.
    owner: Option<Arc<Process>>,
    /// The device is gone (unbound): no new opens.
    dead: bool,
}

/// One engine instance: its hardware and who owns it.
#[pin_data]
pub(crate) struct Instance {
    engine: Arc<Engine>,
    /// Owner and liveness ([`InstanceState`]); first in the lock order (process.rs).
    #[pin]
    state: Mutex<InstanceState>,
}

impl Instance {
    /// Open the engine for the current process: EBUSY if another file has it, ENODEV once the
    /// device is gone.
    fn open(&self) -> Result<Arc<Process>> {
        let mut st = self.state.lock();
        if st.dead {
            return Err(ENODEV);
        }
        if st.owner.is_some() {
            return Err(EBUSY);
        }
        let late = crate::module_parameters::fault_handler_late.value();
        let max_mib = crate::module_parameters::max_registered_mib.value();
        let max_bytes = max_mib.saturating_mul(1 << 20);
        let p = Process::new(
            self.engine.clone(),
            Some(exanest_iommu_fault),
            late,
            max_bytes,
        )?;
        st.owner = Some(p.clone());
        Ok(p)
    }

    /// The file is closed (last reference): tear the process down and free the engine.
    fn release(&self, p: &Process) {
        let notifiers = {
            let mut st = self.state.lock();
            let n = p.teardown(ECANCELED);
            if st.owner.as_ref().is_some_and(|o| core::ptr::eq(&**o, p)) {
                st.owner = None;
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
        let (owner, notifiers) = {
            let mut st = self.state.lock();
            st.dead = true;
            let owner = st.owner.take();
            let notifiers = owner.as_ref().map(|p| p.teardown(ENODEV));
            self.engine.reset();
            (owner, notifiers)
        };
        if let Some(p) = owner.as_ref() {
            p.stop_faults();
        }
        drop(notifiers);
        drop(owner);
    }

    /// Hand an interrupt to the owning process.
    fn dispatch(&self, pending: u32) {
        let owner = self.state.lock().owner.clone();
        if let Some(p) = owner {
            p.on_interrupt(pending);
        }
    }
}

/// debugfs `exanest-dmaN/stats`: the owning process's counters, regions and latencies.
fn stats_fmt(inst: &Arc<Instance>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let owner = inst.state.lock().owner.clone();
    match owner {
        Some(p) => p.write_stats(f),
        None => writeln!(f, "idle"),
    }
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
    /// Probe the engine behind `regs` and give it a number, a misc device and debugfs files.
    pub(crate) fn new(
        regs: Regs,
        dev: &Device<Bound>,
    ) -> Result<(impl PinInit<Self, Error>, Arc<Instance>)> {
        let no = InstanceNo::claim()?;
        let engine = Arc::new(Engine::probe(regs, dev.into())?, GFP_KERNEL)?;
        let name = NAMES[no.0 as usize];
        dev_info!(
            dev,
            "PLDMA v{}.{}, {} channels, /dev/{}\n",
            engine.version.major().get(),
            engine.version.minor().get(),
            engine.channels,
            name.to_str().unwrap_or("?")
        );
        let inst_engine = engine.clone();
        let inst = Arc::pin_init(
            pin_init!(Instance {
                engine: inst_engine,
                state <- new_mutex!(InstanceState { owner: None, dead: false }, "Instance::state"),
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
        if self.inst.engine.irq_pending() {
            // IRQF_ONESHOT keeps the line masked until the thread has acknowledged it.
            irq::ThreadedIrqReturn::WakeThread
        } else {
            irq::ThreadedIrqReturn::None
        }
    }

    fn handle_threaded(&self) -> irq::IrqReturn {
        let pending = self.inst.engine.take_irq_status();
        if pending == 0 {
            return irq::IrqReturn::None;
        }
        self.inst.dispatch(pending);
        irq::IrqReturn::Handled
    }
}
