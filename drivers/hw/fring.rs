// SPDX-License-Identifier: GPL-2.0-only

//! The fault record ring of a context (register map 2.11): where the engine writes every fault
//! of the context's channels before it raises their interrupt, so that the driver learns a
//! fault from memory instead of six to nine register reads (Documentation/pldma-registers.rst,
//! "Fault records (2.11)"). The bookkeeping (which records are complete, which are stale, when
//! to free them) is the core's `frec`, tested on the host; context.rs writes the registers.
//!
//! The ring is coherent memory of the PF, which the engine writes as the PF (the kernel's DMA
//! space, as the kernel queue's rings), one 4 KiB page per context. Its reader's state is
//! under the ring's spinlock, a leaf lock, taken by whichever thread looks at the context's
//! faults (the interrupt thread, the fault thread).

use crate::exanest_core::frec::{self, FaultRecord, RecordWords, RingReader, WORDS};
use kernel::{
    device::{Bound, Device},
    dma::Coherent,
    new_spinlock,
    prelude::*,
    sync::{
        barrier::{dma_mb, Read},
        SpinLock,
    },
};

/// One context's fault record ring.
#[pin_data]
pub(crate) struct FaultRing {
    /// The records.
    ring: Coherent<[u64]>,
    /// The reader.
    #[pin]
    st: SpinLock<RingReader>,
}

impl FaultRing {
    /// A fault record ring that `dev` (the PF) reaches, if the engine has them (`has`).
    pub(crate) fn for_context(has: bool, dev: &Device<Bound>) -> Result<Option<Pin<KBox<Self>>>> {
        if !has {
            return Ok(None);
        }
        let ring = Coherent::<u64>::zeroed_slice(dev, frec::RECORDS as usize * WORDS, GFP_KERNEL)?;
        Ok(Some(KBox::pin_init(
            try_pin_init!(FaultRing {
                ring,
                st <- new_spinlock!(RingReader::new(), "FaultRing::st"),
            }? Error),
            GFP_KERNEL,
        )?))
    }

    /// The ring's address for the engine (FREC_BASE).
    pub(crate) fn base(&self) -> u64 {
        self.ring.dma_address()
    }

    /// The ring's words from `word` on, as a pointer.
    fn at(&self, word: usize) -> *mut u64 {
        // `word` is below the ring's length (its callers index one record).
        self.ring.as_mut_ptr().cast::<u64>().wrapping_add(word)
    }

    /// The engine's ring is about to be enabled (its indices to 0): the records of before go
    /// (a stale stamp would read as complete), and reading starts at index 0. The caller
    /// enables it next, with the engine not writing it (disabled by QUIESCE or RESET).
    pub(crate) fn enabling(&self) {
        let mut st = self.st.lock();
        for w in 0..frec::RECORDS as usize * WORDS {
            // SAFETY: `w` is within the ring; the engine does not write it while the ring is
            // disabled, which it is until the caller enables it.
            unsafe { core::ptr::write_volatile(self.at(w), 0) };
        }
        st.set_enabled();
    }

    /// The engine stopped the ring (QUIESCE, RESET): nothing is read from it until
    /// [`FaultRing::enabling`].
    pub(crate) fn stopped(&self) {
        self.st.lock().stopped();
    }

    /// Read the records the engine completed into `st`. Returns the FREC_HEAD to write, if
    /// one is due.
    fn drain(&self, st: &mut RingReader) -> Option<u32> {
        while let Some((slot, stamp)) = st.next() {
            let first = slot * WORDS;
            // SAFETY: `first + WORDS - 1` is within the ring (a slot below its records); the
            // engine writes a record's stamp last and the record not again before FREC_HEAD
            // moves past it, which the reader does only after reading it.
            let last = unsafe { core::ptr::read_volatile(self.at(first + WORDS - 1)) };
            let seen = FaultRecord::stamp_of_last_word(u64::from_le(last));
            if seen != stamp {
                break;
            }
            // The record's other words after its stamp (the engine wrote them first).
            dma_mb(Read);
            let mut w: RecordWords = [0; WORDS];
            for (i, x) in w.iter_mut().enumerate() {
                // SAFETY: as above: a word of the complete record at `slot`.
                *x = u64::from_le(unsafe { core::ptr::read_volatile(self.at(first + i)) });
            }
            st.offer(seen, &FaultRecord::decode_words(&w));
        }
        st.due_head()
    }

    /// `f` on the reader, after reading what the engine wrote; `free` writes FREC_HEAD when it
    /// is due (after the lock).
    fn drained<R>(&self, free: impl FnOnce(u32), f: impl FnOnce(&mut RingReader) -> R) -> R {
        self.drained_unless(|_| None, free, f)
    }

    /// [`FaultRing::drained`], unless `first` on the reader, under the same hold of its lock,
    /// already gives what is asked (the ring is then not read).
    fn drained_unless<R>(
        &self,
        first: impl FnOnce(&mut RingReader) -> Option<R>,
        free: impl FnOnce(u32),
        f: impl FnOnce(&mut RingReader) -> R,
    ) -> R {
        let mut st = self.st.lock();
        if let Some(r) = first(&mut st) {
            return r;
        }
        let head = self.drain(&mut st);
        let r = f(&mut st);
        drop(st);
        if let Some(h) = head {
            free(h);
        }
        r
    }

    /// Whether channel `c` has a record of a fault not taken yet ([`FaultRing::drained`]).
    pub(crate) fn recorded(&self, c: u32, free: impl FnOnce(u32)) -> bool {
        self.drained(free, |st| st.has(c))
    }

    /// The channels below `channels` with a record of a fault not taken yet, as a mask
    /// ([`FaultRing::drained`]): memory reads only, for a server polling for the next fault.
    pub(crate) fn recorded_mask(&self, channels: u32, free: impl FnOnce(u32)) -> u32 {
        self.drained(free, |st| {
            (0..channels.min(32))
                .filter(|&c| st.has(c))
                .fold(0, |m, c| m | 1 << c)
        })
    }

    /// Take channel `c`'s newest record of a fault not taken yet ([`FaultRing::drained`]). A
    /// record read in already (by a poll's [`FaultRing::recorded_mask`], just before) is taken
    /// without reading the ring again: its channel, stalled on that fault until it is
    /// answered, has no newer one to record; the records read meanwhile are read by the next
    /// look, which frees them (20 instructions of the polled fault's path).
    pub(crate) fn take(&self, c: u32, free: impl FnOnce(u32)) -> Option<FaultRecord> {
        self.drained_unless(|st| st.take(c).map(Some), free, |st| st.take(c))
    }

    /// Channel `c`'s fault numbered `seq` was taken through its registers: a record of it is
    /// stale.
    pub(crate) fn taken_by_registers(&self, c: u32, seq: u8) {
        self.st.lock().taken_by_registers(c, seq);
    }
}
