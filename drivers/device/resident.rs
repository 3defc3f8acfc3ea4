// SPDX-License-Identifier: GPL-2.0-only

//! Endpoints made resident on demand (register map 2.4, Documentation/network.rst): a process
//! with remote regions need not hold a context. An op that arrives for its endpoint while it
//! holds none is NACKed NOT_READY by the engine, which sets the endpoint's bit in NET_EP_WANTED
//! and raises NET_IRQ. The interrupt thread clears NET_IRQ and collects the bits
//! ([`Instance::take_wanted`]); this work item then gets each wanted endpoint's process a
//! context, as a copy of its own would (device.rs, contexts.rs: it may wait for an idle one),
//! and binding the context writes NET_EP_CTX RESIDENT, on which the engine RESUMEs the ops it
//! NACKed. It runs on the long-running system workqueue: waiting for a context must not hold
//! the interrupt thread, which the holders' own completions go through.

use crate::device::Instance;
use core::sync::atomic::Ordering;
use kernel::{
    bindings,
    sync::Arc,
    workqueue::{impl_has_work, Work, WorkItem},
};

impl_has_work! {
    impl HasWork<Self> for Instance { self.work }
}

impl Instance {
    /// From the interrupt thread: if endpoints are wanted, clear NET_IRQ (before reading the
    /// bitmap, so that a bit set after it raises the interrupt again) and note them for the
    /// work item. Returns whether there were any.
    pub(crate) fn take_wanted(&self) -> bool {
        self.engine.take_wanted(|w, bits| {
            if let Some(slot) = self.wanted.get(w) {
                slot.fetch_or(bits, Ordering::AcqRel);
            }
        })
    }

    /// Cancel the work, waiting for it if it runs (device.rs, once the interrupt that queues
    /// it is gone: nothing of the module runs after the device).
    pub(crate) fn cancel_wanted(&self) {
        // SAFETY: `self.work` is an initialised work item, pinned in the `Arc` that holds this
        // instance for as long as `self` is borrowed; cancel_work_sync accepts one whether
        // queued, running or idle.
        unsafe { bindings::cancel_work_sync(Work::raw_get(&self.work)) };
    }
}

impl WorkItem for Instance {
    type Pointer = Arc<Instance>;

    fn run(this: Arc<Instance>) {
        for (w, slot) in this.wanted.iter().enumerate() {
            let mut bits = slot.swap(0, Ordering::AcqRel);
            while bits != 0 {
                let ep = (w * 32) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                // The process holding the endpoint, if it is still there; it gets a context as
                // for a copy of its own (ENODEV once the device is gone: nothing to do).
                if let Some(p) = this.process_of(ep) {
                    // Its error (ENODEV: the device is gone; ERESTARTSYS cannot come from a
                    // work item) leaves nothing to do.
                    let _ = this.acquire(&p);
                }
            }
        }
    }
}
