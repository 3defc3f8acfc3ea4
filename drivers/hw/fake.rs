// SPDX-License-Identifier: GPL-2.0-only

//! A fake engine for KUnit: the second implementation of [`Hw`], so the channel state machine
//! (channel.rs) runs without QEMU. It keeps each channel's state as the register map describes
//! it (Documentation/pldma-registers.rst: commands valid only in some states, NACK ends in
//! ERROR/ABORTED), and the test plays the data path: [`FakeHw::complete`], [`FakeHw::fault`],
//! [`FakeHw::fail`]. Interrupts are only latched; a test "loses" one by not delivering it.
//!
//! And a fake IOMMU page table for the on-demand mirror's tests (mirror.rs): [`FakeTable`].

use crate::exanest_core::{
    faultsm::Source,
    regs::{Error as ChError, FaultCause, State},
};
use crate::hw::{ChannelReport, Command, EngineFault, FaultReport, Hw};
use crate::mm::iommu::IoPageTable;
use core::cell::{Cell, RefCell, RefMut};
use kernel::{
    new_spinlock,
    page::PAGE_SIZE,
    prelude::*,
    sync::{Arc, SpinLock},
};

/// Channels of the fake.
const N: usize = 4;

/// One fake channel.
#[derive(Clone, Copy)]
struct Chan {
    rep: ChannelReport,
    len: u32,
    src: u64,
    /// Its ORIGIN.
    source: Source,
}

/// What the fake's lock protects.
pub(crate) struct FakeState {
    ch: [Chan; N],
    irq: u32,
    /// START, RESUME and NACK commands accepted.
    pub(crate) starts: u32,
    pub(crate) resumes: u32,
    pub(crate) nacks: u32,
    /// Commands the state of their channel did not allow.
    pub(crate) rejected: u32,
    /// The status each channel's last NACK carried.
    pub(crate) nack_status: [i32; N],
    /// RESUMEs to accept without acting on them (lost on the way).
    pub(crate) lose_resumes: u32,
    /// Make START fail as a removed device does.
    pub(crate) gone: bool,
}

/// The fake engine.
#[pin_data]
pub(crate) struct FakeHw {
    channels: u32,
    #[pin]
    st: SpinLock<FakeState>,
}

impl FakeHw {
    /// A fake with `channels` channels (at most 4), all idle.
    pub(crate) fn new(channels: u32) -> Result<Arc<Self>> {
        let idle = Chan {
            rep: ChannelReport {
                state: State::Idle,
                error: ChError::None,
                done_bytes: 0,
                fault_addr: 0,
                fault_write: false,
                fault_cause: FaultCause::Unknown(0),
            },
            len: 0,
            src: 0,
            source: Source::Start,
        };
        Arc::pin_init(
            pin_init!(FakeHw {
                channels: channels.min(N as u32),
                st <- new_spinlock!(FakeState {
                    ch: [idle; N],
                    irq: 0,
                    starts: 0,
                    resumes: 0,
                    nacks: 0,
                    rejected: 0,
                    nack_status: [0; N],
                    lose_resumes: 0,
                    gone: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Run `f` on the fake's state.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut FakeState) -> R) -> R {
        f(&mut self.st.lock())
    }

    /// Channel `n`'s state now.
    pub(crate) fn state(&self, n: u32) -> State {
        self.st.lock().ch[n as usize].rep.state
    }

    /// The source address channel `n` was last started with.
    pub(crate) fn started_src(&self, n: u32) -> u64 {
        self.st.lock().ch[n as usize].src
    }

    /// The busy transfer on `n` finishes; its interrupt is latched.
    pub(crate) fn complete(&self, n: u32) {
        let mut s = self.st.lock();
        let c = &mut s.ch[n as usize];
        if c.rep.state == State::Busy {
            c.rep.state = State::Done;
            c.rep.done_bytes = c.len;
            s.irq |= 1 << n;
        }
    }

    /// Start channel `n` with a transfer of 16 pages from 0 to 0x80_0000, as START does.
    pub(crate) fn start_busy(&self, n: u32) {
        assert_eq!(self.start(n, 0, 0x80_0000, 0x10000), Ok(()));
    }

    /// The ORIGIN channel `n` reports for its transfer from now on.
    pub(crate) fn set_source(&self, n: u32, source: Source) {
        self.st.lock().ch[n as usize].source = source;
    }

    /// A receiver fault of `src`'s op `opid` at `addr`, reported on idle channel `n`.
    pub(crate) fn net_rx_fault(&self, n: u32, addr: u64, src: u32, opid: u32) {
        let mut s = self.st.lock();
        let c = &mut s.ch[n as usize];
        if c.rep.state == State::Idle {
            c.rep.state = State::Fault;
            c.rep.fault_addr = addr;
            c.rep.fault_write = true;
            c.rep.fault_cause = FaultCause::Translation;
            c.source = Source::NetRx { src, opid };
            s.irq |= 1 << n;
        }
    }

    /// The busy transfer on `n` faults at `addr` after `done` bytes, and waits.
    pub(crate) fn page_fault(&self, n: u32, addr: u64, write: bool, done: u32, cause: FaultCause) {
        let mut s = self.st.lock();
        let c = &mut s.ch[n as usize];
        if c.rep.state == State::Busy {
            c.rep.state = State::Fault;
            c.rep.done_bytes = done;
            c.rep.fault_addr = addr;
            c.rep.fault_write = write;
            c.rep.fault_cause = cause;
            s.irq |= 1 << n;
        }
    }

    /// The busy transfer on `n` ends with an engine error.
    pub(crate) fn fail(&self, n: u32, error: ChError) {
        let mut s = self.st.lock();
        let c = &mut s.ch[n as usize];
        if c.rep.state == State::Busy {
            c.rep.state = State::Error;
            c.rep.error = error;
            s.irq |= 1 << n;
        }
    }
}

impl Hw for FakeHw {
    fn channels(&self) -> u32 {
        self.channels
    }

    fn start(&self, n: u32, src: u64, _dst: u64, len: u32) -> Result {
        let mut s = self.st.lock();
        if s.gone {
            return Err(ENODEV);
        }
        let c = &mut s.ch[n as usize];
        if matches!(c.rep.state, State::Busy | State::Fault) {
            s.rejected += 1;
            return Ok(());
        }
        c.rep.state = State::Busy;
        c.rep.error = ChError::None;
        c.rep.done_bytes = 0;
        c.len = len;
        c.src = src;
        c.source = Source::Start;
        s.starts += 1;
        Ok(())
    }

    fn fault(&self, n: u32) -> Result<Option<EngineFault>> {
        let c = self.report(n)?;
        let source = self.st.lock().ch[n as usize].source;
        Ok((c.state == State::Fault).then_some(EngineFault {
            report: FaultReport {
                fault_addr: c.fault_addr,
                fault_write: c.fault_write,
                fault_cause: c.fault_cause,
            },
            source,
            end: u64::MAX,
            seq: None,
        }))
    }

    // A receive's RESUME or NACK answers its sender and frees the channel; a transfer's
    // RESUME retransmits, its NACK ends it ABORTED.
    fn answer(&self, n: u32, cmd: Command, _seq: Option<u8>) -> Result {
        let mut s = self.st.lock();
        if s.gone {
            return Err(ENODEV);
        }
        if n >= self.channels {
            return Err(EINVAL);
        }
        let rx = matches!(s.ch[n as usize].source, Source::NetRx { .. });
        let st = s.ch[n as usize].rep.state;
        match cmd {
            Command::Resume if st == State::Fault && s.lose_resumes > 0 => s.lose_resumes -= 1,
            Command::Resume if st == State::Fault => {
                s.ch[n as usize].rep.state = if rx { State::Idle } else { State::Busy };
                s.resumes += 1;
            }
            Command::Nack { status } if matches!(st, State::Busy | State::Fault) => {
                s.nack_status[n as usize] = status;
                let c = &mut s.ch[n as usize];
                if rx {
                    c.rep.state = State::Idle;
                } else {
                    c.rep.state = State::Error;
                    c.rep.error = ChError::Aborted;
                    s.irq |= 1 << n;
                }
                s.nacks += 1;
            }
            _ => s.rejected += 1,
        }
        Ok(())
    }

    fn report(&self, n: u32) -> Result<ChannelReport> {
        if n >= self.channels {
            return Err(EINVAL);
        }
        Ok(self.st.lock().ch[n as usize].rep)
    }

    fn take_irq_status(&self) -> u32 {
        core::mem::take(&mut self.st.lock().irq)
    }

    fn reset(&self) {
        let mut s = self.st.lock();
        for c in s.ch.iter_mut() {
            c.rep.state = State::Idle;
        }
        s.irq = 0;
    }
}

/// A page table that maps nothing for real, refuses to map an IOVA twice (io-pgtable answers
/// EEXIST, with a WARN), and to unmap part of a 2 MiB block (io-pgtable no longer splits
/// them). Like io-pgtable, it maps a run shorter than a block as pages, which can be unmapped
/// one by one. It counts its calls, and keeps the physical address each page was mapped to.
pub(crate) struct FakeTable {
    mapped: RefCell<KVec<(u64, usize)>>,
    /// (IOVA, physical address) of each page mapped so far, the latest last.
    phys: RefCell<KVec<(u64, u64)>>,
    /// `map_size` and `map_array` calls so far.
    pub(crate) calls: Cell<u64>,
    /// `unmap` calls so far.
    pub(crate) unmaps: Cell<u64>,
}

impl FakeTable {
    /// A table that maps nothing yet.
    pub(crate) fn new() -> Self {
        FakeTable {
            mapped: RefCell::new(KVec::new()),
            phys: RefCell::new(KVec::new()),
            calls: Cell::new(0),
            unmaps: Cell::new(0),
        }
    }

    /// The physical address the page at `iova` was last mapped to.
    pub(crate) fn phys_of(&self, iova: u64) -> Option<u64> {
        let p = self.phys.borrow();
        p.iter().rev().find(|&&(a, _)| a == iova).map(|&(_, ph)| ph)
    }

    /// The mappings, if nothing of `[iova, end)` is mapped yet; else EEXIST.
    fn unmapped(&self, iova: u64, end: u64) -> Result<RefMut<'_, KVec<(u64, usize)>>> {
        let m = self.mapped.borrow_mut();
        if m.iter().any(|&(a, s)| a < end && iova < a + s as u64) {
            return Err(EEXIST);
        }
        Ok(m)
    }

    /// Pages mapped now.
    pub(crate) fn pages(&self) -> u64 {
        self.mapped
            .borrow()
            .iter()
            .map(|&(_, s)| (s / PAGE_SIZE) as u64)
            .sum()
    }
}

impl IoPageTable for FakeTable {
    fn map_size(&self, iova: u64, phys: u64, size: usize, _prot: u32, atomic: bool) -> Result {
        assert!(atomic, "the mirror maps under the notifier's lock");
        self.calls.set(self.calls.get() + 1);
        let end = iova + size as u64;
        let mut m = self.unmapped(iova, end)?;
        let block = 2 << 20;
        if size == block {
            m.push((iova, size), GFP_KERNEL)?;
        } else {
            assert!(size < block, "a run is shorter than a block");
            for a in (iova..end).step_by(PAGE_SIZE) {
                m.push((a, PAGE_SIZE), GFP_KERNEL)?;
            }
        }
        let mut p = self.phys.borrow_mut();
        for a in (iova..end).step_by(PAGE_SIZE) {
            p.push((a, phys + (a - iova)), GFP_KERNEL)?;
        }
        Ok(())
    }

    fn map_array(&self, iova: u64, phys: &[u64], _prot: u32, atomic: bool) -> Result {
        assert!(atomic, "the mirror maps under the notifier's lock");
        assert!(phys.iter().all(|&p| p % PAGE_SIZE as u64 == 0));
        self.calls.set(self.calls.get() + 1);
        let end = iova + (phys.len() * PAGE_SIZE) as u64;
        let mut m = self.unmapped(iova, end)?;
        let mut p = self.phys.borrow_mut();
        for (a, &ph) in (iova..end).step_by(PAGE_SIZE).zip(phys) {
            m.push((a, PAGE_SIZE), GFP_KERNEL)?;
            p.push((a, ph), GFP_KERNEL)?;
        }
        Ok(())
    }

    fn unmap(&self, iova: u64, size: usize) -> usize {
        self.unmaps.set(self.unmaps.get() + 1);
        let mut m = self.mapped.borrow_mut();
        let end = iova + size as u64;
        let inside = |e: &(u64, usize)| iova <= e.0 && e.0 + e.1 as u64 <= end;
        let cut = |e: &(u64, usize)| e.0 < end && iova < e.0 + e.1 as u64 && !inside(e);
        assert!(!m.iter().any(cut), "no block is unmapped in part");
        let before: usize = m.iter().map(|&(_, s)| s).sum();
        m.retain(|e| !inside(e));
        before - m.iter().map(|&(_, s)| s).sum::<usize>()
    }
}
