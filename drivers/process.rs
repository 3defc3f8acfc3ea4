// SPDX-License-Identifier: GPL-2.0-only

//! A process's use of one engine (binder's word for it): its IOMMU domain, registered regions,
//! copies and counters, from open to release. Its state is private to this folder; what it
//! does lives in the children, one concept per file: registration (region.rs), copies
//! (channel.rs, transfer.rs), the fault thread's work and the resolver (resolve.rs, over the
//! mechanism in fault/), the user-level queue (queue.rs, userq.rs), remote keys (remote.rs),
//! the mailbox (mailbox.rs), taking and giving up a context (bind.rs), counters (stats.rs).
//!
//! # Lock order
//!
//! The order for the whole driver, written here only. Locks are taken top to bottom, never the
//! other way; a lock may be skipped.
//!
//! 1. `Instance::state` (device.rs): which process holds each context of the engine instance,
//!    and whether the device is gone.
//! 2. [`Process::inner`]: regions, pinned pages, notifiers, the channels and their counters,
//!    the user-level queue.
//! 3. [`Process::doorbell_lock`]: the doorbell page's state against its mappings (userq.rs).
//!    The doorbell's fault handler takes it under the mmap lock (or the VMA's lock) and maps the
//!    page under it, which may allocate page tables, so reclaim may run under it.
//! 4. [`Process::map`]: the domain and the on-demand mirror. The MMU notifier callback takes it
//!    (odp.rs), from reclaim among other places, so nothing under it allocates with reclaim.
//! 5. `Engine::net_win` (engine.rs): a leaf spinlock around the network tables' register
//!    windows (remote.rs); nothing is taken under it.
//!
//! No driver lock is held across a fault-in (HMM or pinning), which takes the mmap lock and may
//! sleep as long as the mm's fault handler wants; what was looked up before it is looked up
//! again after it. The MMU notifier of a region is removed (which waits for its callbacks) with
//! neither `inner` nor `map` held, and so is the fault thread stopped (which waits for its work
//! to give up). A doorbell fault that must wait for a context drops the mmap lock before it
//! takes `Instance::state`; a doorbell's mappings are zapped (which calls the mm's notifiers)
//! under `Instance::state` alone. The interrupt thread takes `Instance::state` only to find the owner, then
//! releases it before taking `inner`; when it serves a fault inline it takes `inner` and `map`
//! as the fault thread does, and the mmap lock only with a trylock. The IOMMU fault handler
//! takes no lock ([`Process::claims`] is lock-free).

pub(crate) mod batch;
pub(crate) mod bind;
pub(crate) mod channel;
pub(crate) mod mailbox;
pub(crate) mod queue;
pub(crate) mod region;
pub(crate) mod remote;
pub(crate) mod resolve;
pub(crate) mod stats;
pub(crate) mod transfer;
pub(crate) mod userq;

use crate::exanest_core::{
    abi,
    ahead::Ahead,
    fault::{ClaimTable, FaultQueue},
    region::RegionTable,
    sched::Entry,
    stamps::Resolutions,
};
use crate::fault::{handler::FaultSink, log::FaultLog, Faults};
use crate::ffi::{self, FaultThread};
use crate::hw::net::MboxState;
use crate::hw::{Context, Engine, Hw};
use crate::mm::iommu::{Domain, Reports};
use crate::mm::odp::{MapState, Notifier};
use crate::mm::pinned::PageMap;
use crate::process::channel::{Channels, MAX_CH, MAX_INFLIGHT};
use crate::process::queue::{Doorbell, DoorbellState, QueueState};
use core::mem::MaybeUninit;
use core::sync::atomic::Ordering;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};
use kernel::{
    bindings,
    mm::Mm,
    prelude::*,
    sync::aref::ARef,
    sync::{new_mutex, poll::PollCondVarBox, Arc, Mutex},
    time::{
        hrtimer::{
            HasHrTimer, HrTimer, HrTimerCallback, HrTimerCallbackContext, HrTimerRestart,
            RelativeMode, UnsafeHrTimerPointer,
        },
        Delta, Monotonic,
    },
};

pub(crate) use crate::fault::{CLAIMS, FAULT_QUEUE, GONE_CLAIMS, MAX_REGIONS};
/// Touch-ahead window of regions registered without one: adaptive (1 page, doubling on
/// sequential faults up to 511), chosen from the evaluation's sweep (Documentation/evaluation.rst):
/// as few faults as a large window on streams, as little memory as a small one on sparse access.
pub(crate) const DEFAULT_WINDOW: u64 = abi::WINDOW_ADAPTIVE as u64;

/// Transfers a process maps ahead of at once: as many as an incast of 8 senders brings.
const AHEAD_JOBS: usize = 8;
/// Resolutions of the SMMU's reports a process keeps for the engine's reports of the same
/// faults: as many as the channels that can fault at once.
use crate::fault::log::RESOLUTIONS;

/// A hold of [`Process::inner`], passed on where one section of it takes a fault and plans
/// its resolution (process/batch.rs, `serve_channels`).
pub(crate) type InnerGuard<'a> = kernel::sync::MutexGuard<'a, Inner>;

/// What [`Process::inner`] protects.
pub(crate) struct Inner {
    /// Torn down (release or unbind): every call fails with ENODEV.
    dead: bool,
    /// Pinned pages of pin-mode regions.
    pages: PageMap,
    /// Registered regions.
    /// On the heap (7.5 KiB): built in [`fill_regions`], never in a frame the allocator runs
    /// below.
    regions: KBox<RegionTable<MAX_REGIONS>>,
    /// The MMU notifier of each prefault or on-demand region, by handle.
    notifiers: KVec<(u32, Arc<Notifier>)>,
    /// Copies and the channels they run on. On the heap (5 KiB): in place it put the process's
    /// other fields, `map` and the fault path's atomics, past the first 4 KiB, where each
    /// address takes two instructions, computed ahead and spilled (the lone fault's path 18
    /// instructions longer, `make profile`).
    chans: KBox<Channels>,
    /// The engine context the process holds, with its domain attached to the context's
    /// function, and when it got it (monotonic ns); `None` while it holds none (contexts.rs).
    bound: Option<(Arc<Context>, u64)>,
    /// The user-level queue (queue.rs, userq.rs).
    queue: QueueState,
    /// The rkeys of regions with remote access: (region handle, key table entry) (remote.rs).
    rkeys: KVec<(u32, u32)>,
    /// The faults of the held context's channels, of every origin (fault/machine.rs).
    engine_faults: Faults,
    /// The mailbox (mailbox.rs).
    mbox: Option<MboxState>,
    /// What the fault thread maps ahead of resumed transfers (the core's `ahead`, resolve.rs).
    ahead: Ahead<AHEAD_JOBS>,
    /// The fault thread's resolutions of the SMMU's reports, until the engine's report of the
    /// same fault takes them into its record (fault/log.rs).
    resolutions: Resolutions<RESOLUTIONS>,
    /// The ranges of the last [`GONE_CLAIMS`] faulting (not pinned) regions deregistered, the
    /// next to replace at `gone_next`: the IOMMU fault handler still claims their faults. The
    /// SMMU's event thread may handle a report after the engine's interrupt served the fault
    /// and the copy ended and its region went (it is off the fault's path: resolve.rs); the
    /// report is then stale, not a fault on memory nobody registered, which the SMMU driver
    /// would log as unhandled. A claimed report whose region is gone resolves to nothing.
    gone: [(u64, u64); GONE_CLAIMS],
    gone_next: usize,
}

/// The notifier of region `h` among `notifiers` (`Inner::notifiers`, borrowed apart from the
/// region table where a resolution updates a region meanwhile).
fn notifier_in(notifiers: &[(u32, Arc<Notifier>)], h: u32) -> Option<&Arc<Notifier>> {
    notifiers.iter().find(|(x, _)| *x == h).map(|(_, n)| n)
}

impl Inner {
    /// Tell the IOMMU fault handler which ranges it may claim faults in: those of the regions
    /// the resolver serves (not pinned). Called under `inner` after every change of `regions`.
    pub(crate) fn publish_claims(&self, claims: &ClaimTable<CLAIMS>) {
        let live = self
            .regions
            .iter()
            .filter(|r| r.mode != abi::MODE_PIN)
            .map(|r| (r.range.start, r.range.end));
        let gone = self.gone.iter().copied().filter(|&(s, e)| s < e);
        claims.publish(Iterator::chain(live, gone));
    }

    /// Region range `r` (of a region that faults) was deregistered: its faults stay claimed a
    /// while ([`Inner::gone`]).
    pub(crate) fn gone(&mut self, r: &abi::Range) {
        self.gone[self.gone_next] = (r.start, r.end);
        self.gone_next = (self.gone_next + 1) % GONE_CLAIMS;
    }

    /// The notifier of region `h`, borrowed.
    fn notifier_of(&self, h: u32) -> Option<&Arc<Notifier>> {
        notifier_in(&self.notifiers, h)
    }

    /// Whether region `h` is registered with notifier `n` (no reference taken).
    pub(crate) fn has_notifier(&self, h: u32, n: &Arc<Notifier>) -> bool {
        self.notifier_of(h).is_some_and(|m| Arc::ptr_eq(m, n))
    }

    /// The notifier of region `h`.
    pub(crate) fn notifier(&self, h: u32) -> Option<Arc<Notifier>> {
        self.notifier_of(h).cloned()
    }

    /// The context the process holds, as the [`Hw`] its channels drive.
    pub(crate) fn hw(&self) -> Option<Arc<Context>> {
        self.bound.as_ref().map(|(c, _)| c.clone())
    }

    /// Whether the process may give its context up, as far as the driver knows: no copy queued
    /// or running (so none waits on a fault either), and no user-level queue being created nor
    /// one that cannot move (register map 2.1). Whether a queue is idle is the engine's to say
    /// (contexts.rs asks it before it takes the context).
    pub(crate) fn idle(&self) -> bool {
        let movable = self.bound.as_ref().is_none_or(|(c, _)| c.can_move_queue());
        // Remote keys and a mailbox need no context: an op or a message for the endpoint makes
        // it resident again (resident.rs), and the mailbox's indices go with it (contexts.rs).
        self.dead
            || (self.chans.sched.in_flight() == 0
                && self.queue.may_move(movable)
                && !self.engine_faults.in_service())
    }

    /// The channels, and what gives back the regions of a copy that ends: the callback that
    /// the channel state machine calls for each copy it ends.
    pub(crate) fn chans_releasing(&mut self) -> (&mut Channels, impl FnMut(&Entry) + '_) {
        let Inner { regions, chans, .. } = self;
        (chans, move |e: &Entry| {
            regions.release(e.src_handle);
            regions.release(e.dst_handle);
        })
    }
}

/// One open file of an engine, and the process that opened it.
#[pin_data]
pub(crate) struct Process {
    /// The engine (the context the process holds, if any, is [`Inner::bound`]).
    engine: Arc<Engine>,
    /// The engine's fault log, which the fault thread records each fault it answers in.
    log: Arc<FaultLog>,
    /// The address space of the process that opened the engine (mmgrab'd for identity checks),
    /// with the VMA its fault path found last.
    mm: ffi::FaultMm,
    /// The endpoint other nodes address the process by, `hw::net::NO_ENDPOINT` if none
    /// (remote.rs); given back at teardown.
    endpoint: u32,
    /// One past the highest address the engine can reach (the domain's aperture).
    va_end: u64,
    /// Most bytes the process may have registered (module parameter `max_registered_mib`).
    max_bytes: u64,
    /// Regions, pinned pages, notifiers, channels ([`Inner`]).
    #[pin]
    inner: Mutex<Inner>,
    /// The domain and the on-demand mirror ([`MapState`]): the lock the MMU notifier takes.
    #[pin]
    map: Mutex<MapState>,
    /// Notified whenever a copy ends, and at teardown; `wait` and `poll` wait on it. Boxed: the
    /// box is freed an RCU grace period after the process (kvfree_rcu), which poll's waiters
    /// need, instead of the process's drop waiting for one (PollCondVar's synchronize_rcu cost
    /// every close 14 ms under the test kernel, `exanest-bench open`).
    done: PollCondVarBox,
    /// Filled by the IOMMU fault handler, drained by the fault worker.
    faults: FaultQueue<FAULT_QUEUE>,
    /// Channels an interrupt saw in fault-wait and nothing else (transfer.rs
    /// `on_interrupt`), handed to the fault thread without `inner`, which notes them in
    /// [`Inner::engine_faults`]; and when each was seen (ns, 0: none).
    irq_faults: AtomicU32,
    irq_at: [AtomicU64; MAX_CH],
    /// Whether a server of the process's faults is at work: its fault thread, or the engine's
    /// interrupt thread serving them inline (resolve.rs, [`Process::serve`]). Not a lock: it
    /// is taken with a swap and never waited for; whoever finds it taken leaves its faults to
    /// the server at work, which looks for more before it stops.
    serving: AtomicBool,
    /// The fault thread's kick for an IOMMU report, deferred by [`SMMU_KICK_DELAY`]: an
    /// engine report of the same fault normally comes first and is served inline with the
    /// report, and the thread then is not woken for nothing. Armed only by the IOMMU fault
    /// handler ([`FaultSink::kick`]), so only while the domain is attached; cancelled by
    /// [`Process::stop_faults`], after teardown detached it.
    #[pin]
    kick_later: HrTimer<Process>,
    /// Whether `kick_later` is armed: the handler arms it once, not again at every report,
    /// which would push a stream of reports' kick back for as long as the stream lasts.
    kick_armed: AtomicBool,
    /// Faults the IOMMU fault handler was called for.
    iommu_faults: AtomicU64,
    /// Where the doorbell of the process's user-level queue leads: read by mmap, which runs
    /// under the mmap lock and so may not take `inner` (teardown unpins pages, which takes the
    /// mmap lock, under `inner`).
    doorbell: Doorbell,
    /// The mmap offset of the doorbell page, unique to the file's queue (so that zapping it
    /// touches no other file's doorbell in the device inode's mapping), 0 before the queue.
    doorbell_off: AtomicU64,
    /// The address space the doorbell was mapped through (the device inode's), for zapping it
    /// at unbind; null until mapped.
    doorbell_map: AtomicPtr<bindings::address_space>,
    /// Held while `doorbell` changes away from a context's page and while the doorbell's fault
    /// maps that page, so that no mapping of a context's page outlives the queue's hold on it
    /// (userq.rs).
    #[pin]
    doorbell_lock: Mutex<()>,
    /// The ranges the IOMMU fault handler claims faults in ([`Inner::publish_claims`]).
    claims: ClaimTable<CLAIMS>,
    /// The fault thread, which runs the fault worker (fault.rs). Last: started once every
    /// other field is in place, it is stopped by teardown (and by drop, if `new` failed).
    thread: FaultThread,
}

/// Write an empty region table into `b`. Not inlined: its frame holds the table while it is
/// built (7.5 KiB), and it calls nothing but `memcpy` (tests/lint/stack_frames.py).
#[inline(never)]
fn fill_regions(b: KBox<MaybeUninit<RegionTable<MAX_REGIONS>>>) -> KBox<RegionTable<MAX_REGIONS>> {
    b.write(RegionTable::new())
}

impl Process {
    /// The process state for the current task on `engine`, with a fresh paging domain suited
    /// to `dev` (one of the engine's functions) whose faults go to `handler` (fault.rs),
    /// reported as `reports` says (mm/iommu.rs), at most `max_bytes` registered,
    /// and a translation budget of `budget` pages. It holds no context yet: contexts.rs attaches the domain to one.
    pub(crate) fn new(
        engine: Arc<Engine>,
        log: Arc<FaultLog>,
        dev: &kernel::device::Device,
        handler: bindings::iommu_fault_handler_t,
        reports: Reports,
        max_bytes: u64,
        budget: u64,
    ) -> Result<Arc<Self>> {
        let task = kernel::current!();
        let mm: ARef<Mm> = ARef::from(&**task.mm().ok_or(EINVAL)?);
        // The IOMMU core does not check the aperture: user addresses above it must be refused.
        // Every SMMU stage-1 domain here has a 48-bit aperture; checked below.
        let va_end = 1u64 << 48;
        let pid = task.pid();
        let endpoint = engine.endpoint_alloc();
        let eng = engine.clone();
        let process = Self::alloc((engine, log), mm, va_end, max_bytes, budget, pid, endpoint)
            .inspect_err(|_| eng.endpoint_free(endpoint))?;
        let token = core::ptr::from_ref::<Process>(&process).cast_mut().cast();
        // SAFETY: The process outlives its domain, hence the handler's use of `token`: teardown
        // drops the domain, and a process is only freed after its teardown (release or unbind).
        let domain = unsafe { Domain::new(dev, handler, token, reports) }
            .and_then(|d| {
                if d.aperture_end() < va_end {
                    Err(ENODEV)
                } else {
                    Ok(d)
                }
            })
            // Never torn down: give the endpoint back here.
            .inspect_err(|_| process.engine.endpoint_free(process.endpoint))?;
        process.map.lock().domain = Some(domain);
        Ok(process)
    }

    /// The process, before its domain: its state in place, its fault thread started. Not
    /// inlined: its frame holds the state while it is built, and is gone before the caller
    /// goes deep into the IOMMU to allocate the domain (tests/lint/stack_frames.py).
    #[inline(never)]
    fn alloc(
        (engine, log): (Arc<Engine>, Arc<FaultLog>),
        mm: ARef<Mm>,
        va_end: u64,
        max_bytes: u64,
        budget: u64,
        pid: kernel::task::Pid,
        endpoint: u32,
    ) -> Result<Arc<Self>> {
        let channels = engine.channels();
        let pages = PageMap::new(mm.clone());
        let map_state = MapState::new(budget)?;
        let done = PollCondVarBox::new(c"Process::done", kernel::static_lock_class!())?;
        Arc::pin_init(
            try_pin_init!(&this in Process {
                engine,
                log,
                mm: ffi::FaultMm::new(mm),
                endpoint,
                va_end,
                max_bytes,
                inner <- new_mutex!(Inner {
                    dead: false,
                    pages,
                    regions: fill_regions(KBox::new_uninit(GFP_KERNEL)?),
                    notifiers: KVec::new(),
                    chans: KBox::new(Channels::new(channels), GFP_KERNEL)?,
                    bound: None,
                    queue: QueueState::None,
                    rkeys: KVec::new(),
                    engine_faults: Faults::new(),
                    mbox: None,
                    ahead: Ahead::new(),
                    resolutions: Resolutions::new(),
                    gone: [(0, 0); GONE_CLAIMS],
                    gone_next: 0,
                }, "Process::inner"),
                map <- new_mutex!(map_state, "Process::map"),
                done,
                faults: FaultQueue::new(),
                irq_faults: AtomicU32::new(0),
                serving: AtomicBool::new(false),
                kick_later <- HrTimer::new(),
                kick_armed: AtomicBool::new(false),
                irq_at: [const { AtomicU64::new(0) }; MAX_CH],
                iommu_faults: AtomicU64::new(0),
                doorbell: Doorbell::new(),
                doorbell_off: AtomicU64::new(0),
                doorbell_map: AtomicPtr::new(core::ptr::null_mut()),
                doorbell_lock <- new_mutex!((), "Process::doorbell_lock"),
                claims: ClaimTable::new(),
                // SAFETY: `this` is where the process is being initialised; the thread only uses
                // it when kicked, which needs a complete process (its domain, or a copy), and
                // is stopped before the process is freed (teardown, or this field's drop).
                thread: unsafe {
                    FaultThread::start(this.as_ptr().cast(), resolve::fault_work, pid)?
                },
            }? Error),
            GFP_KERNEL,
        )
    }

    /// The index of the context the process holds.
    pub(crate) fn context_index(&self) -> Option<u32> {
        self.inner.lock().bound.as_ref().map(|(c, _)| c.index())
    }

    /// The process's domain.
    pub(crate) fn domain(&self) -> Option<Arc<Domain>> {
        self.map.lock().domain.clone()
    }

    /// What requests are checked against.
    pub(crate) fn limits(&self) -> abi::Limits {
        abi::Limits {
            va_end: self.va_end,
            max_transfer: u64::from(self.engine.max_len()),
            modes: (1 << abi::MODE_PIN) | (1 << abi::MODE_PREFAULT) | (1 << abi::MODE_ON_DEMAND),
            default_window: DEFAULT_WINDOW as u32,
        }
    }

    /// REG, DEREG, COPY, WAIT and ADVISE must come from the process that opened the engine
    /// (not a forked child holding the inherited file): EPERM.
    pub(crate) fn check_caller(&self) -> Result {
        let task = kernel::current!();
        match task.mm() {
            Some(mm) if core::ptr::eq(mm.as_raw(), self.mm.as_raw()) => Ok(()),
            _ => Err(EPERM),
        }
    }

    /// EXANEST_DMA_IOC_INFO: ENODEV once the device is gone.
    pub(crate) fn info(&self) -> Result<abi::Info> {
        let context = {
            let g = self.inner.lock();
            if g.dead {
                return Err(ENODEV);
            }
            g.bound.as_ref().map_or(abi::NO_CONTEXT, |(c, _)| c.index())
        };
        Ok(abi::Info {
            abi_version: abi::ABI_VERSION,
            hw_version: self.engine.version().into_raw(),
            channels: self.engine.channels(),
            modes: self.limits().modes,
            max_transfer: u64::from(self.engine.max_len()),
            max_regions: MAX_REGIONS as u32,
            max_inflight: MAX_INFLIGHT as u32,
            context,
            contexts: self.engine.contexts(),
            node: self.engine.node(),
            endpoint: self.endpoint,
            reserved: [0; 2],
        })
    }

    /// Wake the fault worker (any context, hard IRQ included). A kick while it runs makes it
    /// run again.
    pub(crate) fn kick(&self) {
        self.thread.kick();
    }

    /// Stop the fault thread: a fault-in in progress gives up (EINTR), and this waits for it.
    /// After teardown, with no driver lock held. The deferred kick goes first: teardown
    /// detached the domain, so the handler no longer arms it.
    pub(crate) fn stop_faults(&self) {
        // `HrTimer` is `repr(C)` with the C `hrtimer` (in an `Opaque`, `repr(transparent)`) as
        // its first field, so the cast is the C timer. `hrtimer_cancel` waits for a callback
        // in progress; none starts after it, as nothing arms the timer any more.
        // SAFETY: `self` is live, so this is its `kick_later`, initialised with it (above).
        let timer = unsafe { <Process as HasHrTimer<Process>>::raw_get_timer(self) };
        // SAFETY: `timer` is this live process's initialised timer, a C `hrtimer` (above).
        unsafe { bindings::hrtimer_cancel(timer.cast_mut().cast()) };
        self.thread.stop();
    }

    /// Stop the engine's work for this process and give everything back: end copies, unmap and
    /// unpin every page, detach the domain. Idempotent. Called with `Instance::state` held.
    /// Returns the notifiers, which the caller drops (removing them) once it has released
    /// `Instance::state`, after [`Process::stop_faults`].
    pub(crate) fn teardown(&self, status: Error) -> KVec<(u32, Arc<Notifier>)> {
        let mut g = self.inner.lock();
        let inner = &mut *g;
        if inner.dead {
            return KVec::new();
        }
        inner.dead = true;
        self.doorbell.set(DoorbellState::None);
        // Other nodes first: the rkeys go, then the endpoint, before any page goes back.
        self.revoke_all(inner);
        self.engine.endpoint_free(self.endpoint);
        // Stop the context's channels first: no DMA may run once pages go back to the process;
        // then the context's function goes back to its default domain (device.rs frees the
        // context).
        if let Some((ctx, _)) = inner.bound.take() {
            ctx.reset();
            if let Some(d) = self.domain() {
                d.detach();
            }
        }
        inner.chans.abort_all(status.to_errno());
        inner.engine_faults.clear();
        inner.ahead.clear();
        // The claims stay: faults the engine raised before the reset are still the process's
        // until the domain is detached below (no handler call comes after that).
        inner.regions.drain(|_| {});
        let dom = {
            let mut m = self.map.lock();
            let ms = &mut *m;
            if let Some(dom) = ms.domain.as_ref() {
                ms.mirror.unmap_range(&**dom, 0, u64::MAX);
            }
            ms.budget.clear();
            ms.domain.take()
        };
        if let Some(dom) = dom {
            inner.pages.clear(&dom);
            // Detached and freed when the last user drops it, outside `map`.
            drop(dom);
        }
        self.done.notify_all();
        core::mem::take(&mut inner.notifiers)
    }
}

impl FaultSink for Process {
    fn claims(&self) -> &ClaimTable<CLAIMS> {
        &self.claims
    }

    fn queue(&self) -> &FaultQueue<FAULT_QUEUE> {
        &self.faults
    }

    fn count(&self) -> &AtomicU64 {
        &self.iommu_faults
    }

    /// An IOMMU report's kick: deferred ([`Process::kick_later`]), unless a server is at work,
    /// which looks at the queue before it stops.
    fn kick(&self) {
        // The report was queued before: with the server's fence after it stops, either it
        // sees the report or this sees it stopped.
        core::sync::atomic::fence(Ordering::SeqCst);
        if self.serving.load(Ordering::SeqCst) || self.kick_armed.swap(true, Ordering::SeqCst) {
            return;
        }
        // The process is pinned (it lives in an `Arc`) and outlives the timer: only the IOMMU
        // fault handler arms it, while the domain is attached, and `stop_faults` cancels it
        // after teardown detached the domain, before the process can be freed. The handle
        // would cancel the timer when dropped: it is forgotten, and the timer ends by itself.
        // SAFETY: Pinned, and the timer cancelled before the process is freed (above).
        let handle = unsafe { Pin::new_unchecked(self).start(SMMU_KICK_DELAY) };
        core::mem::forget(handle);
    }
}

/// How long an IOMMU report waits for the engine's report of the same fault before the fault
/// thread is woken for it. SMMU reports that no engine report follows (a GET's check of
/// its destination, a receiver's look-ahead) are resolved that much later. There are IOMMU
/// reports only where the IOMMU cannot stop them or `smmu_fault_events=1` (mm/iommu.rs).
pub(crate) const SMMU_KICK_DELAY: Delta = Delta::from_micros(50);

impl HrTimerCallback for Process {
    type Pointer<'a> = Pin<&'a Process>;

    /// The deferred kick: wake the fault thread if reports are still queued (no engine report
    /// came and took them).
    fn run(this: Pin<&Process>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        this.kick_armed.store(false, Ordering::SeqCst);
        if !this.faults.is_empty() && !this.serving.load(Ordering::SeqCst) {
            this.kick();
        }
        HrTimerRestart::NoRestart
    }
}

kernel::impl_has_hr_timer! {
    impl HasHrTimer<Process> for Process {
        mode: RelativeMode<Monotonic>, field: self.kick_later
    }
}
