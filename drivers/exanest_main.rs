// SPDX-License-Identifier: GPL-2.0-only

//! ExaNeSt DMA: virtual-address DMA for the ExaNeSt PLDMA engine.
//!
//! One misc device per engine instance (`/dev/exanest-dmaN`). A process opens it and owns the
//! instance: the driver attaches a paging IOMMU domain whose IOVAs are that process's virtual
//! addresses, and the engine copies between registered regions by virtual address.
//!
//! Lock order (whole module): `Engine::state` → `Session::inner` (engine.rs, session.rs).
//!
//! Files: engine.rs (registers, interrupt), session.rs (open file, ioctls), iommu.rs (domain,
//! pinned pages). The decision logic is the `no_std` crate rust/exanest-core, whose files are
//! compiled in here as modules.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    debugfs,
    device::Core,
    fs::File,
    irq,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    of, pci, platform,
    prelude::*,
    sync::{Arc, ArcBorrow},
};

// The no_std core crate, shared with the host tests. Its items are `pub` for the host crate's
// API; here they are private modules, so some are unused or unreachable.
#[path = "../rust/exanest-core/src/abi.rs"]
#[allow(dead_code, unreachable_pub)]
mod abi;
#[path = "../rust/exanest-core/src/fault.rs"]
#[allow(dead_code, unreachable_pub)]
mod fault;
#[path = "../rust/exanest-core/src/region.rs"]
#[allow(dead_code, unreachable_pub)]
mod region;
#[path = "../rust/exanest-core/src/regs.rs"]
#[allow(dead_code, unreachable_pub)]
mod regs;
#[path = "../rust/exanest-core/src/sched.rs"]
#[allow(dead_code, unreachable_pub)]
mod sched;

mod engine;
mod hwregs;
mod iommu;
mod odp;
mod session;

use engine::{Engine, IrqHandler, Regs, BAR0_SIZE};
use session::Session;

// The C shim (exanest_shim.c). Kernel structs are passed by pointer only.
#[allow(improper_ctypes)]
extern "C" {
    fn exanest_shim_add_poll(misc: *mut kernel::bindings::miscdevice);
}

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

/// debugfs `exanest-dmaN/stats`: the owning session's counters, regions and latencies.
fn stats_fmt(engine: &Arc<Engine>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let owner = engine.state.lock().owner.clone();
    match owner {
        Some(s) => s.write_stats(f),
        None => writeln!(f, "idle"),
    }
}

/// The misc device of one engine, with the engine that `open` hands to new sessions.
#[pin_data]
struct MiscHolder {
    #[pin]
    reg: MiscDeviceRegistration<Session>,
    engine: Arc<Engine>,
}

impl MiscHolder {
    fn new(name: &'static CStr, engine: Arc<Engine>) -> impl PinInit<Self, Error> {
        try_pin_init!(MiscHolder {
            reg <- MiscDeviceRegistration::register(MiscDeviceOptions { name })
                .pin_chain(|reg| {
                    // SAFETY: `reg` is a registered misc device; the shim only swaps its file
                    // operations for a copy with `.poll`.
                    unsafe { exanest_shim_add_poll(reg.as_raw()) };
                    Ok(())
                }),
            engine,
        }? Error)
    }
}

#[vtable]
impl MiscDevice for Session {
    type Ptr = Arc<Session>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Arc<Session>> {
        // SAFETY: Every `MiscDeviceRegistration<Session>` is the `reg` field of a `MiscHolder`
        // (the only place one is created), and `open` runs under misc_mtx while it is
        // registered, so the holder is alive.
        let holder = unsafe { &*kernel::container_of!(core::ptr::from_ref(misc), MiscHolder, reg) };
        Session::open(holder.engine.clone())
    }

    fn release(session: Arc<Session>, _file: &File) {
        session.shutdown(ECANCELED);
    }

    fn ioctl(this: ArcBorrow<'_, Session>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        Session::ioctl(this, cmd, arg)
    }
}

/// The engine behind a bound device, its instance number and its device name.
fn new_engine(
    regs: Regs,
    dev: &kernel::device::Device<kernel::device::Bound>,
) -> Result<(InstanceNo, Arc<Engine>, &'static CStr)> {
    let no = InstanceNo::claim()?;
    let engine = Arc::pin_init(Engine::new(regs, dev.into(), no.0)?, GFP_KERNEL)?;
    let name = NAMES[no.0 as usize];
    dev_info!(
        dev,
        "PLDMA v{}.{}, {} channels, /dev/{}\n",
        engine.hw_version >> 16,
        engine.hw_version & 0xffff,
        engine.channels,
        name.to_str().unwrap_or("?")
    );
    Ok((no, engine, name))
}

/// What both front-ends keep for an engine besides its interrupt: the misc device and the
/// debugfs view.
#[pin_data]
struct EngineDevices {
    #[pin]
    misc: MiscHolder,
    #[pin]
    stats: debugfs::File<Arc<Engine>>,
    _debugfs: debugfs::Dir,
    engine: Arc<Engine>,
    _no: InstanceNo,
}

impl EngineDevices {
    fn new(no: InstanceNo, engine: Arc<Engine>, name: &'static CStr) -> impl PinInit<Self, Error> {
        let misc_engine = engine.clone();
        let stats_engine = engine.clone();
        let dir = debugfs::Dir::new(name);
        try_pin_init!(EngineDevices {
            misc <- MiscHolder::new(name, misc_engine),
            stats <- dir.read_callback_file(c"stats", stats_engine, &stats_fmt),
            _debugfs: dir,
            engine,
            _no: no,
        }? Error)
    }
}

struct ExanestDriver;

/// Per bound device. Fields drop in declaration order: the interrupt first, then the misc
/// device, then the interrupt vectors.
#[pin_data]
struct ExanestData<'bound> {
    #[pin]
    irq: irq::ThreadedRegistration<'bound, IrqHandler>,
    #[pin]
    devices: EngineDevices,
    vecs: pci::IrqVectorRegistration<'bound>,
}

kernel::pci_device_table!(
    PCI_TABLE,
    <ExanestDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::XILINX, regs::PCI_DEVICE_ID as u32),
        ()
    )]
);

impl pci::Driver for ExanestDriver {
    type IdInfo = ();
    type Data<'bound> = ExanestData<'bound>;
    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            pdev.enable_device_mem()?;
            pdev.set_master();
            let bar = pdev
                .iomap_region_sized::<BAR0_SIZE>(0, c"exanest_dma")?
                .into_devres()?;
            let (no, engine, name) = new_engine(Regs::Pci(bar), pdev.as_ref())?;
            let handler = IrqHandler {
                engine: engine.clone(),
            };
            Ok(try_pin_init!(ExanestData {
                vecs: pdev.alloc_irq_vectors(1, 1, pci::IrqTypes::default().with(pci::IrqType::Intx))?,
                // SAFETY: `vecs` is initialised above, pinned with `self`, and dropped after
                // `irq` (declaration order); the registration is never leaked.
                irq <- unsafe {
                    irq::ThreadedRegistration::new(
                        (&*core::ptr::from_ref(vecs)).index(0)?.into(),
                        irq::Flags::SHARED | irq::Flags::ONESHOT,
                        c"exanest_dma",
                        Ok::<_, Error>(handler),
                    )
                },
                devices <- EngineDevices::new(no, engine, name),
            }? Error))
        })
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.devices.engine.unbind();
    }
}

/// The devicetree front-end, for the engine on the QFDB (Zynq UltraScale+, behind its MMU-500).
/// Binding: Documentation/devicetree/exanest,pldma.yaml.
struct ExanestPlatformDriver;

/// Per bound platform device; fields drop in declaration order.
#[pin_data]
struct ExanestPlatformData<'bound> {
    #[pin]
    irq: irq::ThreadedRegistration<'bound, IrqHandler>,
    #[pin]
    devices: EngineDevices,
}

kernel::of_device_table!(
    OF_TABLE,
    <ExanestPlatformDriver as platform::Driver>::IdInfo,
    [(of::DeviceId::new(c"exanest,pldma-1.0"), ())]
);

impl platform::Driver for ExanestPlatformDriver {
    type IdInfo = ();
    type Data<'bound> = ExanestPlatformData<'bound>;
    const OF_ID_TABLE: Option<of::IdTable<Self::IdInfo>> = Some(&OF_TABLE);

    fn probe<'bound>(
        pdev: &'bound platform::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            let mem = pdev
                .io_request_by_index(0)
                .ok_or(ENODEV)?
                .iomap_sized::<BAR0_SIZE>()?
                .into_devres()?;
            let (no, engine, name) = new_engine(Regs::Platform(mem), pdev.as_ref())?;
            let handler = IrqHandler {
                engine: engine.clone(),
            };
            Ok(try_pin_init!(ExanestPlatformData {
                // SAFETY: The registration is a pinned field, never leaked.
                irq <- unsafe {
                    pdev.request_threaded_irq_by_index(
                        irq::Flags::SHARED | irq::Flags::ONESHOT,
                        0,
                        c"exanest_dma",
                        Ok::<_, Error>(handler),
                    )
                },
                devices <- EngineDevices::new(no, engine, name),
            }? Error))
        })
    }

    fn unbind<'bound>(_pdev: &'bound platform::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.devices.engine.unbind();
    }
}

/// The module: both front-ends.
#[pin_data]
struct ExanestModule {
    #[pin]
    _pci: kernel::driver::Registration<pci::Adapter<ExanestDriver>>,
    #[pin]
    _platform: kernel::driver::Registration<platform::Adapter<ExanestPlatformDriver>>,
}

impl kernel::InPlaceModule for ExanestModule {
    fn init(module: &'static kernel::ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            _pci <- kernel::driver::Registration::new(c"exanest_dma", module),
            _platform <- kernel::driver::Registration::new(c"exanest_dma", module),
        })
    }
}

module! {
    type: ExanestModule,
    name: "exanest_dma",
    authors: ["ExaNeSt DMA developers"],
    description: "ExaNeSt PLDMA: virtual-address DMA with SMMU fault handling",
    license: "GPL v2",
}
