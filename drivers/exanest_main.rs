// SPDX-License-Identifier: GPL-2.0-only

//! ExaNeSt DMA: virtual-address DMA for the ExaNeSt PLDMA engine.
//!
//! One misc device per engine instance (`/dev/exanest-dmaN`). Each open file gets one of the
//! engine's contexts: the driver attaches a paging IOMMU domain whose IOVAs are that process's
//! virtual addresses to the function the context's DMA is issued as (its SR-IOV virtual
//! function), and the engine copies between registered regions by virtual address, faulting
//! pages in on demand. Documentation/design.rst has the map of the files and the fault path.
//!
//! This file is the crate root: the module and its two front-ends (PCI, devicetree). The rest,
//! one concept per file, each using only those listed before it:
//!
//! | file | concept |
//! |------|---------|
//! | `exanest_core` | the `no_std` decision logic, shared with the host tests |
//! | [`ffi`] | the C shim, declared from its header by bindgen |
//! | [`instno`] | instance numbers: `/dev/exanest-dmaN` |
//! | [`error`] | the one errno mapping |
//! | [`regs`] | the register map (`register!`) |
//! | [`netregs`] | the network port's registers (2.3) |
//! | [`kqueue`] | a context's kernel queue (2.2): the COPY ioctl's descriptors and completions |
//! | [`engine`] | the engine, and a context's operations behind the [`engine::Hw`] trait |
//! | [`link`] | the network port's link settings (debugfs `link`) |
//! | [`ctxqueue`] | a context's queue registers: the user-level queue's and the kernel queue's |
//! | [`sriov`] | the contexts' functions: SR-IOV virtual functions |
//! | [`iommu`] | the per-process IOMMU domain |
//! | [`pinned`] | pin mode: pinned pages and their mappings |
//! | [`mirror`] | the on-demand mirror: pages mapped without pinning |
//! | [`budget`] | the translation budget: evicting the least recently faulted runs |
//! | [`odp`] | MMU notifiers, HMM fault-in |
//! | [`channel`] | the channel state machine |
//! | [`queue`] | the user-level queue's state: events, errors, faults of its channels |
//! | [`process`] | per-process state; **the lock order** |
//! | [`transfer`] | copies: submit, interrupt, wait, poll |
//! | [`handler`] | the IOMMU fault handler: claim, record, kick |
//! | [`fault`] | the fault path: queue → fault thread → resolver → resume/NACK |
//! | [`region`] | registration and modes |
//! | [`userq`] | the user-level queue: create, doorbell mmap, wait, its faults |
//! | [`remote`] | remote access: endpoints, remote keys, receiver faults |
//! | [`mailbox`] | the mailbox: a receive ring for other nodes' messages |
//! | [`stats`] | counters and debugfs |
//! | [`ioctl`] | ioctl dispatch |
//! | [`contexts`] | contexts shared by more processes than there are: binding, taking idle ones |
//! | [`device`] | an engine instance: misc device, interrupt, unbind |
//! | [`resident`] | endpoints made resident when an op wants them |

use kernel::{device::Core, irq, of, pci, platform, prelude::*};

mod contexts;
mod device;
mod error;
/// The `no_std` core crate rust/exanest-core, compiled into the module.
mod exanest_core;
mod fault;
mod ffi;
mod hw;
mod instno;
mod ioctl;
mod mm;
mod process;

use device::{EngineDevices, IrqHandler};
use exanest_core::regs as map;
use hw::engine::{Engine, Regs, BAR0_SIZE};
use hw::ofctx::OfContexts;
use hw::sriov::Functions;
use kernel::{device::Device, sync::aref::ARef};

struct ExanestDriver;

/// Per bound device. Fields drop in declaration order: the interrupt first, then the misc
/// device, then the references to the virtual functions (unbind disabled them once no process
/// held a context), then the interrupt vectors.
#[pin_data]
struct ExanestData<'bound> {
    #[pin]
    irq: irq::ThreadedRegistration<'bound, IrqHandler>,
    #[pin]
    devices: EngineDevices,
    funcs: Option<Functions>,
    vecs: pci::IrqVectorRegistration<'bound>,
}

kernel::pci_device_table!(
    PCI_TABLE,
    <ExanestDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::XILINX, map::PCI_DEVICE_ID as u32),
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
            let mut engine = Engine::probe(Regs::Pci(bar), pdev.as_ref())?;
            let limit = module_parameters::contexts.value();
            if limit != 0 {
                engine.limit_contexts(limit);
            }
            // Context n is virtual function n; an engine without SR-IOV has one context, the
            // function itself.
            let mut own = KVec::new();
            let funcs = if engine.sriov() {
                Some(Functions::enable(pdev, engine.contexts()).inspect_err(|e| {
                    dev_err!(
                        pdev.as_ref(),
                        "cannot enable {} contexts: {:?}\n",
                        engine.contexts(),
                        e
                    )
                })?)
            } else {
                own.push(ARef::<Device>::from(pdev.as_ref()), GFP_KERNEL)?;
                None
            };
            let ctx_devs = funcs.as_ref().map_or(&own[..], |f| f.devices());
            // Doorbell pages (user-level queues) exist only as VF BARs.
            let doorbells = funcs.as_ref().map_or(&[][..], |f| f.doorbells());
            let (devices, handler) =
                EngineDevices::new(engine, ctx_devs, doorbells, pdev.as_ref())?;
            Ok(try_pin_init!(ExanestData {
                funcs,
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
                devices <- devices,
            }? Error))
        })
    }

    fn unbind<'bound>(_pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        this.devices.unbind();
        // No process holds a context any more: the VFs can go.
        if let Some(f) = this.funcs.as_ref() {
            f.disable();
        }
    }
}

/// The devicetree front-end, for the engine on the QFDB (Zynq UltraScale+, behind its MMU-500).
/// Binding: Documentation/devicetree/bindings/dma/exanest,pldma.yaml.
struct ExanestPlatformDriver;

/// Per bound platform device. Fields drop in declaration order: the interrupt first, then the
/// misc device, then the contexts' devices (unbind detached every process's domain from them).
#[pin_data]
struct ExanestPlatformData<'bound> {
    #[pin]
    irq: irq::ThreadedRegistration<'bound, IrqHandler>,
    #[pin]
    devices: EngineDevices,
    ctxs: OfContexts,
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
                .io_request_by_name(c"engine")
                .or_else(|| pdev.io_request_by_index(0))
                .ok_or(ENODEV)?
                .iomap_sized::<BAR0_SIZE>()?
                .into_devres()?;
            let mut engine = Engine::probe(Regs::Platform(mem), pdev.as_ref())?;
            let limit = module_parameters::contexts.value();
            if limit != 0 {
                engine.limit_contexts(limit);
            }
            // Context n is the device of the child node context@n, with its own StreamID (the
            // AXI ID scheme of Documentation/qfdb.rst), as it is VF n on PCI.
            let ctxs = OfContexts::enable(pdev, engine.contexts())?;
            if (ctxs.devices().len() as u32) < engine.contexts() {
                engine.limit_contexts(ctxs.devices().len() as u32);
            }
            let (devices, handler) =
                EngineDevices::new(engine, ctxs.devices(), ctxs.doorbells(), pdev.as_ref())?;
            Ok(try_pin_init!(ExanestPlatformData {
                ctxs,
                // SAFETY: The registration is a pinned field, never leaked.
                irq <- unsafe {
                    pdev.request_threaded_irq_by_index(
                        irq::Flags::SHARED | irq::Flags::ONESHOT,
                        0,
                        c"exanest_dma",
                        Ok::<_, Error>(handler),
                    )
                },
                devices <- devices,
            }? Error))
        })
    }

    fn unbind<'bound>(_pdev: &'bound platform::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // Every process's domain leaves its context's device; the devices go when the data
        // drops.
        this.devices.unbind();
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
    params: {
        max_registered_mib: u64 {
            default: 65536,
            description: "Most memory one process may register, in MiB, all regions and modes together (REG beyond it: ENOSPC)",
        },
        contexts: u32 {
            default: 0,
            description: "Contexts to use on each engine (0: every one the engine has); more processes than contexts share them",
        },
        budget_pages: u64 {
            default: 1048576,
            description: "Translation budget of each process, in pages: the most pages its prefault and on-demand regions keep mapped in the IOMMU (the least recently faulted go first); EXANEST_DMA_IOC_BUDGET changes it",
        },
        max_budget_pages: u64 {
            default: 4194304,
            description: "Largest translation budget a process may set with EXANEST_DMA_IOC_BUDGET, in pages (above it: E2BIG)",
        },
        fault_stamps: bool {
            default: true,
            description: "Keep the exact timings of every fault each engine answers, for debugfs exanest-dmaN/faults (which also turns them on and off)",
        },
        fault_handler_late: bool {
            default: false,
            description: "Install the IOMMU fault handler after attaching each process's domain (tests that the SMMU driver looks it up at fault time)",
        },
        smmu_fault_events: bool {
            default: false,
            description: "Have the SMMU record the faults of the processes' domains too (events, which the fault handler gets), where it can stop: the engine reports every fault it raises itself",
        },
    },
}
