// SPDX-License-Identifier: GPL-2.0-only

//! The kernel queue of a context (register map 2.2): how the COPY ioctl's transfers reach an
//! engine that has one. The channel state machine (channel.rs) drives "channels"; here they
//! are the queue's slots. Starting slot `k` writes a descriptor whose `wr_id` is `k` in the
//! queue's send ring and rings its doorbell (a PF register); the engine runs it on any channel
//! of the context, as the context's VF, in the process's address space, and writes its
//! completion in the queue's completion ring. A slot reports its completion once it is there,
//! the fault-wait of the engine channel that runs it while it waits on a fault (that channel's
//! ORIGIN says KERNEL and the SQ index slot `k` was posted at, its WRID `k`), and busy
//! otherwise (engine.rs). The bookkeeping is the
//! core's `kqueue`, tested on the host.
//!
//! The rings are coherent memory of the PF: the engine reads and writes them as the PF, in the
//! kernel's DMA space, so nothing of them is in the process's address space. They are only
//! touched while the queue is quiet or by the context's holder, under the queue's spinlock, a
//! leaf lock.

use crate::exanest_core::{
    kqueue::{self as kq, Slot},
    regs::{self as map, Cqe, Error as ChError, QueueEntry},
};
use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    new_spinlock,
    prelude::*,
    sync::SpinLock,
};

/// The kernel queue's registers, which the context it belongs to implements (engine.rs).
pub(crate) trait KqRegs {
    /// Program the rings and `cfg` (a Q_CFG value), then enable: the engine's indices are 0.
    fn kq_enable(&self, sq: u64, cq: u64, cfg: u32) -> Result;
    /// Write KQ_SQ_TAIL: the doorbell.
    fn kq_doorbell(&self, tail: u32) -> Result;
    /// KQ_CQ_TAIL.
    fn kq_cq_tail(&self) -> Result<u32>;
    /// Write KQ_CQ_HEAD.
    fn kq_cq_head(&self, head: u32) -> Result;
    /// Whether the queue stopped on an error (KQ_STATUS.ERROR).
    fn kq_failed(&self) -> bool;
    /// The engine's channels, all of which the queue may use.
    fn kq_channels(&self) -> u32;
}

/// 64-bit words from one ring's start to the next's: rings are 4 KiB aligned.
const RING_STRIDE: usize = map::q_cfg::RING_ALIGN as usize / 8;

/// One context's kernel queue.
#[pin_data]
pub(crate) struct KernelQueue {
    /// The send ring, then 4 KiB further the completion ring.
    ring: Coherent<[u64]>,
    /// The slots and indices.
    #[pin]
    st: SpinLock<kq::KernelQueue>,
}

impl KernelQueue {
    /// A kernel queue whose rings `dev` (the PF) reaches.
    pub(crate) fn new(dev: &Device<Bound>) -> Result<impl PinInit<Self, Error>> {
        let ring = Coherent::<u64>::zeroed_slice(dev, 2 * RING_STRIDE, GFP_KERNEL)?;
        Ok(try_pin_init!(KernelQueue {
            ring,
            st <- new_spinlock!(kq::KernelQueue::new(), "KernelQueue::st"),
        }? Error))
    }

    /// The kernel queue of a context, if `has` (register map 2.2 on PCI; the DT front-end
    /// STARTs channels by registers), with rings `dev` (the PF) reaches.
    pub(crate) fn for_context(has: bool, dev: &Device<Bound>) -> Result<Option<Pin<KBox<Self>>>> {
        if !has {
            return Ok(None);
        }
        Ok(Some(KBox::pin_init(Self::new(dev)?, GFP_KERNEL)?))
    }

    /// The ring's words from `word` on, as a pointer.
    fn at(&self, word: usize) -> *mut u64 {
        // `word` is below the ring's length (its callers index one entry of one ring).
        self.ring.as_mut_ptr().cast::<u64>().wrapping_add(word)
    }

    /// Write entry `index` of the send ring.
    fn write_sqe(&self, index: u32, e: &QueueEntry) {
        let first = (index as usize % kq::SLOTS) * map::Sqe::SIZE / 8;
        for (i, w) in e.chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            // SAFETY: `first + i` is within the send ring (an entry of 4 words, the index
            // taken modulo its entries); the engine does not read this entry now: it is past
            // SQ_TAIL until the doorbell that follows, and its previous descriptor completed.
            unsafe { core::ptr::write_volatile(self.at(first + i), u64::from_le_bytes(b)) };
        }
    }

    /// Read entry `index` of the completion ring.
    fn read_cqe(&self, index: u32) -> Cqe {
        let first = RING_STRIDE + (index as usize % kq::SLOTS) * Cqe::SIZE / 8;
        let mut e: QueueEntry = [0; 32];
        for (i, w) in e.chunks_exact_mut(8).enumerate() {
            // SAFETY: `first + i` is within the completion ring; the engine wrote this entry
            // before it moved KQ_CQ_TAIL past it (read before, with the MMIO read's barrier),
            // and does not write it again until KQ_CQ_HEAD moves past it.
            let v = unsafe { core::ptr::read_volatile(self.at(first + i)) };
            w.copy_from_slice(&v.to_le_bytes());
        }
        Cqe::decode(&e)
    }

    /// Start slot `k` with a copy: enable the queue first if the engine stopped it.
    pub(crate) fn start(&self, r: &dyn KqRegs, k: u32, src: u64, dst: u64, len: u32) -> Result {
        let mut st = self.st.lock();
        if !st.enabled() {
            let mask = ((1u32 << r.kq_channels().min(8)) - 1) as u8;
            let cfg = map::q_cfg::encode(kq::LOG2, kq::LOG2, mask).ok_or(EINVAL)?;
            let base = self.ring.dma_address();
            r.kq_enable(base, base + (RING_STRIDE * 8) as u64, cfg)?;
            st.set_enabled();
        }
        let (index, e, tail) = st.post(k, src, dst, len).map_err(|_| EBUSY)?;
        self.write_sqe(index, &e);
        r.kq_doorbell(tail)
    }

    /// Slot `k`, once the completions the engine wrote are taken.
    pub(crate) fn slot(&self, r: &dyn KqRegs, k: u32) -> Slot {
        let mut st = self.st.lock();
        if st.enabled() && st.busy() {
            if let Ok(tail) = r.kq_cq_tail() {
                let mut head = None;
                while let Some(i) = st.next_completion(tail) {
                    head = Some(st.complete(&self.read_cqe(i)));
                }
                if let Some(h) = head {
                    // An MMIO write fails only for an offset past the BAR, which probe
                    // checked.
                    let _ = r.kq_cq_head(h);
                }
            }
            if st.busy() && r.kq_failed() {
                st.fail(ChError::NoMaster);
            }
        }
        st.slot(k)
    }

    /// The running slot posted at SQ index `sq_index` (modulo 2^16, as ORIGIN says), if
    /// exactly one is (the core's `slot_at`).
    pub(crate) fn slot_at(&self, sq_index: u32) -> Option<u32> {
        self.st.lock().slot_at(sq_index)
    }

    /// Descriptors posted and completions taken since the queue was last enabled.
    pub(crate) fn indices(&self) -> (u32, u32) {
        self.st.lock().indices()
    }

    /// The engine stopped the queue (QUIESCE, RESET): enabled again at the next start.
    pub(crate) fn reset(&self) {
        self.st.lock().reset();
    }
}
