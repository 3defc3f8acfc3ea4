// SPDX-License-Identifier: GPL-2.0-only

//! The IOMMU fault handler: the first step of the fault path (fault.rs has the rest). Called by
//! arm-smmu-v3 (with this project's patch) from its event thread, or by arm-smmu from hard-IRQ
//! context: it allocates nothing and takes no lock. It claims faults in the regions the resolver
//! serves (a lock-free lookup, the process's claims), records their page in the process's
//! preallocated [`FaultQueue`] and asks for it to be served ([`FaultSink::kick`]: the process
//! wakes its fault thread only if no engine report takes the page first); it refuses the
//! others, which the SMMU driver then logs.

use crate::exanest_core::fault::{ClaimTable, FaultQueue};
use crate::fault::{CLAIMS, FAULT_QUEUE};
use crate::ffi;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    bindings,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
};

/// What the IOMMU fault handler records into: a process's claims, its fault queue and its
/// fault thread (process.rs implements it).
pub(crate) trait FaultSink {
    /// The ranges whose faults the resolver serves.
    fn claims(&self) -> &ClaimTable<CLAIMS>;
    /// Where the handler records the faulting pages.
    fn queue(&self) -> &FaultQueue<FAULT_QUEUE>;
    /// How many faults the handler was called for.
    fn count(&self) -> &AtomicU64;
    /// Have the recorded faults served: the process arms a short timer that wakes its fault
    /// thread if they are still queued then (process.rs). Safe in hard-IRQ context.
    fn kick(&self);
}

/// The IOMMU fault handler: record and kick the worker. May run in hard-IRQ context
/// (arm-smmu, `dev` NULL) or in the SMMUv3 event thread; allocates nothing, takes no lock.
/// Returns 0 when the page lies in a region the driver resolves faults for, else -ENOSYS
/// ("not handled"), so that the SMMU driver logs the fault (the lookup is lock-free:
/// the process's claims).
///
/// # Safety
///
/// `token` is the `S` given to `Domain::attach` with this handler (process.rs); the domain,
/// and so this handler, is gone before it is freed.
pub(crate) unsafe extern "C" fn exanest_iommu_fault<S: FaultSink>(
    _domain: *mut bindings::iommu_domain,
    _dev: *mut bindings::device,
    iova: usize,
    flags: i32,
    token: *mut core::ffi::c_void,
) -> i32 {
    // SAFETY: Per the contract `token` points to a live `S`.
    let sink = unsafe { &*token.cast::<S>() };
    let write = flags as u32 & bindings::IOMMU_FAULT_WRITE != 0;
    claim_fault(
        sink.claims(),
        sink.queue(),
        sink.count(),
        iova as u64,
        write,
        || sink.kick(),
    )
}

/// The handler's decision: record a fault inside a region the resolver serves (0), refuse one
/// outside every such region (-ENOSYS, nothing recorded). When the table is being rewritten
/// the whole time, the fault is taken: the worker and the engine's report then decide.
pub(crate) fn claim_fault(
    claims: &ClaimTable<CLAIMS>,
    queue: &FaultQueue<FAULT_QUEUE>,
    count: &AtomicU64,
    iova: u64,
    write: bool,
    kick: impl FnOnce(),
) -> i32 {
    let page = iova & !(PAGE_SIZE as u64 - 1);
    if claims.claims(page, PAGE_SIZE as u64) == Some(false) {
        return ENOSYS.to_errno();
    }
    record_fault(queue, count, iova, write, kick);
    0
}

/// The part of the IOMMU fault handler that must be safe in hard-IRQ context: count, record
/// (deduplicated, no allocation), and kick the worker.
pub(crate) fn record_fault(
    queue: &FaultQueue<FAULT_QUEUE>,
    count: &AtomicU64,
    iova: u64,
    write: bool,
    kick: impl FnOnce(),
) {
    count.fetch_add(1, Ordering::Relaxed);
    queue.push_at(iova, write, PAGE_SHIFT as u32, ffi::stamp_ns());
    // Even when the push was a duplicate or overflowed: a kick of a queued worker is free,
    // and after an overflow the worker must look at every channel.
    kick();
}

#[kunit_tests(exanest_dma_handler)]
mod tests {
    use super::*;
    use kernel::sync::{Arc, ArcBorrow, Completion};
    use kernel::workqueue::{self, impl_has_work, new_work, Work, WorkItem};

    /// The IOMMU fault handler's recording path, called from hard-IRQ context (as arm-smmu
    /// calls it on the QFDB): it allocates nothing and takes no sleeping lock (lockdep and
    /// DEBUG_ATOMIC_SLEEP would report it), and the worker it queues from there runs.
    #[test]
    fn fault_handler_records_from_hard_irq() {
        #[pin_data]
        struct Ctx {
            q: FaultQueue<FAULT_QUEUE>,
            n: AtomicU64,
            #[pin]
            ran: Completion,
            #[pin]
            work: Work<Ctx>,
        }
        impl_has_work! { impl HasWork<Self> for Ctx { self.work } }
        impl WorkItem for Ctx {
            type Pointer = Arc<Ctx>;
            fn run(this: Arc<Ctx>) {
                this.ran.complete_all();
            }
        }
        /// # Safety
        ///
        /// `arg` points to a live `Ctx` in an `Arc`.
        unsafe extern "C" fn in_irq(arg: *mut core::ffi::c_void) {
            // SAFETY: `arg` is the `Ctx` below, alive until `call_in_hardirq` returned.
            let ctx = unsafe { ArcBorrow::<Ctx>::from_raw(arg.cast()) };
            let kick = || {
                // Already queued: that run sees this fault too.
                let _ = workqueue::system_highpri().enqueue(Arc::<Ctx>::from(ctx));
            };
            record_fault(&ctx.q, &ctx.n, 0x7f12_3456_7abc, true, kick);
            record_fault(&ctx.q, &ctx.n, 0x7f12_3456_7000, false, || {});
            record_fault(&ctx.q, &ctx.n, 0x7f12_3456_9000, false, || {});
        }
        let ctx = Arc::pin_init(
            pin_init!(Ctx {
                q: FaultQueue::new(),
                n: AtomicU64::new(0),
                ran <- Completion::new(),
                work <- new_work!("test"),
            }),
            GFP_KERNEL,
        )
        .unwrap();
        let arg = core::ptr::from_ref::<Ctx>(&ctx).cast_mut().cast();
        // SAFETY: `ctx` outlives the call, which waits for the irq_work to finish.
        let hard = unsafe { ffi::call_in_hardirq(in_irq, arg) };
        assert!(hard);
        ctx.ran.wait_for_completion();
        assert_eq!(ctx.n.load(Ordering::Relaxed), 3);
        // The read of the page already queued for a write is a duplicate.
        assert_eq!(ctx.q.len(), 2);
        let f = ctx.q.pop().unwrap();
        assert_eq!((f.page, f.write), (0x7f12_3456_7000, true));
        assert_eq!(ctx.q.pop().map(|f| f.page), Some(0x7f12_3456_9000));
    }

    /// The handler claims faults in the pages of the regions it was told about (a region may
    /// start mid-page) and refuses the others with -ENOSYS, recording nothing, so that the SMMU
    /// driver logs them.
    #[test]
    fn faults_outside_regions_are_not_claimed() {
        let claims = ClaimTable::<CLAIMS>::new();
        let q = FaultQueue::<FAULT_QUEUE>::new();
        let n = AtomicU64::new(0);
        let mut kicks = 0;
        assert_eq!(
            claim_fault(&claims, &q, &n, 0x10_0000, false, || kicks += 1),
            ENOSYS.to_errno()
        );
        claims.publish([(0x10_0800, 0x10_2000)]);
        assert_eq!(
            claim_fault(&claims, &q, &n, 0x10_0000, false, || kicks += 1),
            0
        );
        assert_eq!(
            claim_fault(&claims, &q, &n, 0x10_1fff, true, || kicks += 1),
            0
        );
        assert_eq!(
            claim_fault(&claims, &q, &n, 0x10_2000, true, || kicks += 1),
            ENOSYS.to_errno()
        );
        assert_eq!((kicks, q.len(), n.load(Ordering::Relaxed)), (2, 2, 2));
    }

    /// Past FAULT_QUEUE distinct pages the queue overflows: the worker then scans channels.
    #[test]
    fn fault_queue_overflow_is_reported() {
        let q = FaultQueue::<FAULT_QUEUE>::new();
        let n = AtomicU64::new(0);
        let mut kicks = 0;
        for i in 0..=FAULT_QUEUE as u64 {
            record_fault(&q, &n, 0x10_0000 + (i << PAGE_SHIFT), false, || kicks += 1);
        }
        assert_eq!(kicks, FAULT_QUEUE + 1);
        assert_eq!(q.len(), FAULT_QUEUE);
        assert!(q.take_overflow());
        assert!(!q.take_overflow());
    }
}
