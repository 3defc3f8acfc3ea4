// SPDX-License-Identifier: GPL-2.0-only

//! The user-level queue (register map 2.1, ABI 3), as the process uses it: copies posted and
//! completed with no system call. The process's send and completion rings are its own memory,
//! pinned here as two pin regions the queue holds and mapped at their addresses in its IOMMU
//! domain; the engine reads descriptors and writes completions through the context's function,
//! in the process's address space only. The process maps the context's doorbell page (its VF's
//! BAR, nothing else of the engine) and rings it itself. The queue's state is queue.rs.
//!
//! - **Creation** (`EXANEST_DMA_IOC_QUEUE_CREATE`): once per file. The queue shares the
//!   context's channels with COPY's kernel queue (register map 2.2; before, it takes channels
//!   1 to N-1 and COPY STARTs channel 0).
//! - **Moving** (2.2): while it is idle, the queue's context may go to another process
//!   (contexts.rs). Its doorbell is parked and zapped first; it is mapped again only by its
//!   fault handler, under `Process::doorbell_lock`, while the queue holds a context, so a
//!   doorbell mapping never outlives the queue's hold on the context it rings. The next access
//!   faults a context back and the queue goes on where it stopped (2.1: the queue keeps its
//!   context until the file is closed).
//! - **Faults** of queue transfers come as the channel's interrupt, like those of START: the
//!   fault thread resolves the address in the process's registered regions (fault.rs) and
//!   RESUMEs, or NACKs with the errno, which the completion reports.
//! - **Waiting** (`EXANEST_DMA_IOC_QUEUE_WAIT`): the process arms the CQ event itself; the
//!   interrupt counts events under `inner`, and the wait looks at the completion in the
//!   process's CQ between two looks at the count, so no event is lost.

use crate::error::{CtxError, CtxResult};
use crate::exanest_core::{
    abi::{self, Range},
    regs as map,
};
use crate::ffi;
use crate::hw::Context;
use crate::process::channel::MAX_CH;
use crate::process::queue::{DoorbellState, QueueState, UserQueue};
use crate::process::Process;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    bindings,
    mm::virt::{flags as vm, VmaNew},
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    uaccess::UserSlice,
};

/// The next doorbell's mmap offset, in pages: unique among the files of every engine, so that
/// zapping one file's doorbell through the device inode's mapping zaps no other.
static NEXT_DOORBELL: AtomicU64 = AtomicU64::new(1);

impl Process {
    /// EXANEST_DMA_IOC_QUEUE_CREATE, with the process holding a context (device.rs).
    pub(crate) fn queue_create(&self, req: &abi::Queue) -> CtxResult<abi::Queue> {
        self.check_caller()?;
        let v = abi::check_queue(req, &self.limits())?;
        let channels = self.engine.channels().min(MAX_CH as u32);
        let ctx = {
            let mut g = self.inner.lock();
            if g.dead {
                return Err(ENODEV.into());
            }
            if g.queue.exists() {
                return Err(EEXIST.into());
            }
            let ctx = g.hw().ok_or(CtxError::Lost)?;
            let split = ctx.kq().is_none();
            if !ctx.has_queue() || (split && channels < 2) {
                return Err(EOPNOTSUPP.into());
            }
            // COPY STARTs channels by registers before register map 2.2: the queue takes
            // channels 1 to N-1 and COPY keeps channel 0 (EBUSY while a copy runs on the
            // others). COPY's kernel queue (2.2) shares every channel with it.
            if split {
                g.chans.sched.set_channels(1).map_err(|_| EBUSY)?;
            }
            g.queue = QueueState::Creating;
            ctx
        };
        let all = (1u32 << channels) - 1;
        let mask = if ctx.kq().is_none() { all & !1 } else { all };
        let res = self.queue_enable(&ctx, &v, mask);
        let mut g = self.inner.lock();
        match res {
            Ok(q) if !g.dead => {
                g.queue = QueueState::Ready(q);
                let pgoff = NEXT_DOORBELL.fetch_add(1, Ordering::Relaxed);
                self.doorbell_off.store(pgoff, Ordering::Relaxed);
                self.doorbell.set(
                    ctx.doorbell()
                        .map_or(DoorbellState::None, DoorbellState::At),
                );
                Ok(abi::Queue {
                    context: ctx.index(),
                    channels: mask,
                    doorbell_offset: pgoff << PAGE_SHIFT,
                    ..*req
                })
            }
            r => {
                g.queue = QueueState::None;
                // Back to every channel, which no copy can be using beyond: cannot fail.
                let _ = g.chans.sched.set_channels(channels);
                let handles = r.as_ref().map(|q| (q.sq_handle, q.cq_handle));
                drop(g);
                if let Ok((s, c)) = handles {
                    self.queue_drop_rings(&[s, c]);
                }
                Err(r.err().unwrap_or(ENODEV).into())
            }
        }
    }

    /// Zero the CQ, pin and map both rings, enable the queue on `ctx`.
    fn queue_enable(
        &self,
        ctx: &Context,
        v: &abi::ValidQueue,
        mask: u32,
    ) -> Result<KBox<UserQueue>> {
        // Phase 0 everywhere: no entry looks new before the engine writes it.
        let mut w =
            UserSlice::new(UserPtr::from_addr(v.cq.start as usize), v.cq.len() as usize).writer();
        let zeros = [0u8; 256];
        while !w.is_empty() {
            w.write_slice(&zeros[..w.len().min(zeros.len())])?;
        }
        let reg = |r: &Range, access| abi::Reg {
            addr: r.start,
            length: r.len(),
            access,
            mode: abi::MODE_PIN,
            ..Default::default()
        };
        let sq_handle = self.register(&reg(&v.sq, abi::ACCESS_READ))?;
        let cq_handle = match self.register(&reg(&v.cq, abi::ACCESS_WRITE)) {
            Ok(h) => h,
            Err(e) => {
                self.queue_drop_rings(&[sq_handle]);
                return Err(e);
            }
        };
        let Some(cfg) = map::q_cfg::encode(v.sq_log2, v.cq_log2, mask as u8) else {
            self.queue_drop_rings(&[sq_handle, cq_handle]);
            return Err(EINVAL);
        };
        let q = UserQueue::new((sq_handle, cq_handle), v, cfg, mask);
        let q = match KBox::new(q, GFP_KERNEL) {
            Ok(q) => q,
            Err(e) => {
                self.queue_drop_rings(&[sq_handle, cq_handle]);
                return Err(e.into());
            }
        };
        let mut g = self.inner.lock();
        // Held from here: a DEREG of a guessed handle in between made this fail (ENOENT).
        let held = g.regions.hold(sq_handle).and_then(|()| {
            g.regions
                .hold(cq_handle)
                .inspect_err(|_| g.regions.release(sq_handle))
        });
        if let Err(e) = held {
            drop(g);
            self.queue_drop_rings(&[sq_handle, cq_handle]);
            return Err(Error::from(e));
        }
        let res = (|| {
            if g.dead {
                return Err(ENODEV);
            }
            let st = ctx.queue_enable(v.sq.start, v.cq.start, cfg)?;
            if !st.enabled || st.error {
                return Err(EIO);
            }
            Ok(())
        })();
        if let Err(e) = res {
            g.regions.release(sq_handle);
            g.regions.release(cq_handle);
            drop(g);
            self.queue_drop_rings(&[sq_handle, cq_handle]);
            return Err(e);
        }
        Ok(q)
    }

    /// Deregister ring regions the queue does not (or no longer) hold.
    fn queue_drop_rings(&self, handles: &[u32]) {
        for &handle in handles {
            self.drop_unreported(handle);
        }
    }

    /// mmap of the doorbell page: one page at the queue's doorbell offset, shared, by the
    /// process that opened the file (EPERM otherwise), once its queue exists (ENXIO before, and
    /// after the device is gone). Not inherited by fork.
    ///
    /// Nothing is mapped yet: the doorbell's fault maps the page of the context the queue runs
    /// on ([`Process::doorbell_fault`]). The mappings are zapped when the context is taken
    /// (the next access faults it back) and when the device goes (a later access gets SIGBUS).
    pub(crate) fn mmap_doorbell(
        &self,
        vma: &VmaNew,
        ops: &'static kernel::bindings::vm_operations_struct,
    ) -> Result {
        self.check_caller()?;
        // SAFETY: `vma` is the VMA of this mmap call, alive and set up under the mmap lock
        // the caller holds; `vm_pgoff` is plain data set before `f_op->mmap` is called.
        let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff } as u64;
        // Under the mmap lock: no `inner` here (lock order, process.rs).
        if self.doorbell.get() == DoorbellState::None {
            return Err(ENXIO);
        }
        if vma.end() - vma.start() != PAGE_SIZE
            || pgoff != self.doorbell_off.load(Ordering::Relaxed)
            || vma.flags() & vm::SHARED == 0
        {
            return Err(EINVAL);
        }
        self.doorbell_map
            .store(ffi::vma_mapping(vma), Ordering::Release);
        vma.try_clear_mayexec()?;
        vma.set_dontcopy();
        vma.set_dontexpand();
        vma.set_dontdump();
        vma.set_io();
        ffi::map_doorbell(vma, ops);
        Ok(())
    }

    /// The doorbell page's fault, under the fault's mmap or VMA lock (so no `inner`): map the
    /// page of the context the queue runs on. EAGAIN when the queue has no context (the C shim
    /// then waits for one with [`Process::doorbell_wait`], without the lock, and has the access
    /// retried); ENXIO when the queue or the device is gone (SIGBUS).
    pub(crate) fn doorbell_fault(&self, vmf: *mut bindings::vm_fault) -> Result {
        let _g = self.doorbell_lock.lock();
        match self.doorbell.get() {
            DoorbellState::None => Err(ENXIO),
            DoorbellState::Parked => Err(EAGAIN),
            // SAFETY: `vmf` is the fault being handled, its VMA the doorbell's (the shim's
            // contract), and `doorbell_lock` keeps `phys` the page of the context the queue
            // holds until the mapping is in place.
            DoorbellState::At(phys) => unsafe { ffi::insert_doorbell(vmf, phys) },
        }
    }

    /// contexts.rs is about to take the process's context (idle, as far as the driver knows),
    /// with `Instance::state` held and not `inner`: stop the doorbell, so that nothing rings it
    /// while the engine is asked whether the queue may move. The next access faults.
    pub(crate) fn doorbell_park(&self) {
        {
            let _g = self.doorbell_lock.lock();
            if !matches!(self.doorbell.get(), DoorbellState::At(_)) {
                return;
            }
            self.doorbell.set(DoorbellState::Parked);
        }
        self.zap_doorbell();
    }

    /// The queue runs on `ctx` (again): the doorbell's next fault maps its page.
    pub(crate) fn doorbell_open(&self, ctx: &Context) {
        let _g = self.doorbell_lock.lock();
        if self.doorbell.get() == DoorbellState::Parked {
            self.doorbell.set(
                ctx.doorbell()
                    .map_or(DoorbellState::None, DoorbellState::At),
            );
        }
    }

    /// contexts.rs takes `ctx` from the process, whose doorbell is parked: stop the queue
    /// where it is, if the engine says it may move (nothing in flight, nothing posted and not
    /// taken). Returns whether the context may go; if not, the caller opens the doorbell again.
    pub(crate) fn queue_leave(&self, inner: &mut crate::process::Inner, ctx: &Context) -> bool {
        let QueueState::Ready(q) = &mut inner.queue else {
            return !inner.queue.exists();
        };
        if !ctx.can_move_queue() {
            return false;
        }
        // An error the interrupt has not told yet: the reset that follows clears it.
        if let Ok((st, addr)) = ctx.queue_status() {
            if st.error && q.error.is_none() {
                q.error = Some((u32::from(st.code.field()), addr));
                q.events += 1;
            }
        }
        match ctx.queue_park() {
            Ok(Some(idx)) => {
                q.parked = Some(idx);
                q.moves += 1;
                true
            }
            _ => false,
        }
    }

    /// The process got context `ctx` (contexts.rs, with `inner` held and the domain attached):
    /// its parked queue runs there again, where it stopped, and the doorbell maps its page.
    pub(crate) fn queue_return(&self, inner: &mut crate::process::Inner, ctx: &Context) {
        let QueueState::Ready(q) = &mut inner.queue else {
            return;
        };
        if let Some(idx) = q.parked.take() {
            if q.error.is_none() {
                match ctx.queue_restore(q.sq, q.cq.start, q.cfg, &idx) {
                    Ok(st) if st.enabled && !st.error => {}
                    r => {
                        let code = r.map_or(0, |st| u32::from(st.code.field()));
                        q.error = Some((code, 0));
                        q.events += 1;
                        self.done.notify_all();
                    }
                }
            }
            let (pages, addr) = core::mem::take(&mut q.evicted);
            if pages != 0 && q.error.is_none() {
                // A lost event (CQ full) stays counted in BUDGET and COUNTERS.
                let _ = ctx.post_event(abi::EVENT_EVICTED, pages, addr);
            }
        }
        self.doorbell_open(ctx);
    }

    /// EXANEST_DMA_IOC_QUEUE_WAIT: until the completion of index `cq_head` is in the CQ, the
    /// queue stopped on an error, or the timeout (ETIMEDOUT). ENOENT without a queue.
    pub(crate) fn queue_wait(&self, req: &abi::QueueWait) -> Result<abi::QueueWait> {
        self.check_caller()?;
        abi::check_queue_wait(req)?;
        let mut jiffies = Process::timeout_jiffies(req.timeout_ns);
        loop {
            let (seen, cq, log2) = {
                let mut g = self.inner.lock();
                if g.dead {
                    return Err(ENODEV);
                }
                let QueueState::Ready(q) = &mut g.queue else {
                    return Err(ENOENT);
                };
                // What poll() reported is consumed: it is readable again at the next event.
                q.acked = q.events;
                if let Some((error, error_addr)) = q.error {
                    return Ok(abi::QueueWait {
                        error,
                        error_addr,
                        ..*req
                    });
                }
                (q.events, q.cq, q.cq_log2)
            };
            // The entry's flags word, in the process's own CQ (pinned: no fault-in, and no
            // driver lock held in case the process unmapped it: EFAULT).
            let slot = u64::from(req.cq_head & ((1u32 << log2) - 1));
            let at = cq.start + slot * map::Cqe::SIZE as u64 + map::Cqe::FLAGS_OFF as u64;
            let flags: u32 = UserSlice::new(UserPtr::from_addr(at as usize), 4)
                .reader()
                .read()?;
            if (flags & map::Cqe::PHASE != 0) == map::cq_phase(req.cq_head, log2) {
                return Ok(*req);
            }
            let mut g = self.inner.lock();
            match &g.queue {
                QueueState::Ready(q) if q.events == seen && !g.dead => {}
                // An event, an error or teardown since the look: look again.
                _ => continue,
            }
            self.sleep_done(&mut g, &mut jiffies)?;
        }
    }

    /// The device is going (unbind, after teardown): zap the doorbell's mappings, which would
    /// otherwise point at a VF that SR-IOV disabling removes. Called with no driver lock held,
    /// while the file is open (the instance still lists the process).
    pub(crate) fn zap_doorbell(&self) {
        let mapping = self.doorbell_map.load(Ordering::Acquire);
        let off = self.doorbell_off.load(Ordering::Relaxed);
        if !mapping.is_null() && off != 0 {
            // SAFETY: `mapping` is the device inode's address space, recorded by `mmap` of this
            // file, which is still open (unbind runs before its release), so the inode lives.
            unsafe { ffi::zap(mapping, off << PAGE_SHIFT) };
        }
    }

    /// The translation budget evicted `pages` pages, the last run at `addr`: tell the process
    /// on its queue's CQ (the upcall), if it has one. Called with `inner` held.
    pub(crate) fn queue_evicted(&self, inner: &mut crate::process::Inner, pages: u64, addr: u64) {
        if pages == 0 || inner.dead {
            return;
        }
        let ctx = inner.hw();
        let QueueState::Ready(q) = &mut inner.queue else {
            return;
        };
        match ctx {
            // A lost event (CQ full) stays counted in BUDGET and COUNTERS.
            Some(ctx) if q.parked.is_none() => {
                let _ = ctx.post_event(abi::EVENT_EVICTED, pages, addr);
            }
            // Posted when the queue has a context again.
            _ => q.evicted = (q.evicted.0.saturating_add(pages), addr),
        }
    }
}
