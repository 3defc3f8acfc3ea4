// SPDX-License-Identifier: GPL-2.0-only

//! The network port's side of the engine (register map 2.3, 2.4): its endpoint and remote key
//! tables, written through one selection window (`Engine::net_win`), its counters and link
//! state, the endpoints wanted by ops that found no context, and a context's mailbox ring.
//! What a process does with them is remote.rs, resident.rs and mailbox.rs.

use crate::exanest_core::{abi, regs::net};
use crate::hw::netregs as nr;
use crate::hw::{Context, Engine};
use kernel::{io::register::Array, prelude::*};

/// The endpoint of a process that has none: the engine has no port, or every endpoint is held.
pub(crate) const NO_ENDPOINT: u32 = u32::MAX;

/// A process's mailbox ring (mailbox.rs, `Inner::mbox` in process.rs): where it is, and its indices while the process holds
/// no context (the engine's otherwise).
pub(crate) struct MboxState {
    /// The ring's first byte, and log2 of its slots.
    pub(crate) base: u64,
    pub(crate) log2: u32,
    /// MBOX_HEAD and MBOX_TAIL as the context had them when it was taken.
    pub(crate) head: u32,
    pub(crate) tail: u32,
}

/// The port's counters by index (`net::CNT_*`), as debugfs names them.
const COUNTER_NAMES: [&str; net::COUNTERS] = [
    "tx_packets",
    "rx_packets",
    "rx_dropped",
    "rx_bad_crc",
    "nacks_sent",
    "nacks_received",
    "resumes_sent",
    "resumes_received",
    "retransmitted_bytes",
    "timeouts",
    "duplicates",
    "injected_drops",
    "injected_corruptions",
    "error_nacks",
    "placed_bytes",
    "probes",
    "mbox_placed",
    "rnr_sent",
    "key_fails",
    "quarantined",
];

/// The port's congestion counters by index (2.7, `net::CC_*`), as debugfs names them.
const CC_NAMES: [&str; net::CC_COUNTERS] = [
    "ingress_drops",
    "ce_marked",
    "ece_received",
    "window_cuts",
    "tail_probes",
    "queue_peak_bytes",
];

impl Engine {
    /// A free entry of the remote key table, or `None` when every one is held.
    pub(crate) fn rkey_alloc(&self) -> Option<u32> {
        self.rkeys.alloc(net::MAX_RKEYS)
    }

    /// Entry `idx` of the remote key table is free again (revoked first).
    pub(crate) fn rkey_free(&self, idx: u32) {
        self.rkeys.free(idx);
    }

    /// debugfs `engine`'s network part (stats.rs): `, "node": N, "link": B, "net": {...}`,
    /// nothing without a port (a counter that cannot be read, the device gone, reads 0).
    pub(crate) fn write_net(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.node == abi::NO_NODE {
            return Ok(());
        }
        let link = self.link().unwrap_or(false);
        write!(
            f,
            ", \"node\": {}, \"link\": {link}, \"net\": {{",
            self.node
        )?;
        for (i, name) in COUNTER_NAMES.iter().enumerate() {
            let v = self.net_counter(i).unwrap_or(0);
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}\"{name}\": {v}")?;
        }
        // 2.7's congestion counters (an older engine reads 0 at their offsets).
        write!(f, "}}, \"cc\": {{")?;
        for (i, name) in CC_NAMES.iter().enumerate() {
            let v = nr::NET_CC::try_at(i)
                .and_then(|at| self.regs.read(at).ok())
                .map_or(0, |r| r.value().get());
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}\"{name}\": {v}")?;
        }
        write!(f, "}}")
    }

    /// EXANEST_DMA_IOC_NET_COUNTERS: the port's counters. EOPNOTSUPP without a port, ENODEV
    /// once the device is gone.
    pub(crate) fn net_counters(&self) -> Result<abi::NetCounters> {
        if self.node == abi::NO_NODE {
            return Err(EOPNOTSUPP);
        }
        let mut c = abi::NetCounters {
            node: self.node,
            link: self.link()?.into(),
            ..Default::default()
        };
        for i in 0..net::COUNTERS {
            c.set(i, self.net_counter(i)?.into());
        }
        Ok(c)
    }

    /// Whether the port has a peer.
    fn link(&self) -> Result<bool> {
        let v = self.regs.read(nr::NET_NODE).map_err(|_| ENODEV)?;
        Ok(v.link())
    }

    /// Counter `i` of the port (`net::CNT_*`).
    fn net_counter(&self, i: usize) -> Result<u32> {
        let at = nr::NET_CNT::try_at(i).ok_or(EINVAL)?;
        Ok(self.regs.read(at).map_err(|_| ENODEV)?.value().get())
    }

    /// An endpoint for a new process (open, with no context and no mailbox yet), or
    /// [`NO_ENDPOINT`].
    pub(crate) fn endpoint_alloc(&self) -> u32 {
        if self.node == abi::NO_NODE {
            return NO_ENDPOINT;
        }
        let ep = self.endpoints.alloc(net::MAX_EPS).unwrap_or(NO_ENDPOINT);
        // An MMIO write fails only for an offset past the BAR, which probe checked.
        let _ = self.ep_set(ep, None, false);
        ep
    }

    /// The process holding `ep` is gone: no context for it, and the id is free again.
    pub(crate) fn endpoint_free(&self, ep: u32) {
        if ep != NO_ENDPOINT {
            // Closed (not OPEN): the engine ends what the old process left unfinished, so
            // nothing of it reaches the next holder of the id. An MMIO write fails only for
            // an offset past the BAR, which probe checked.
            let _ = self.ep_write(ep, nr::NET_EP_CTX::zeroed());
            self.endpoints.free(ep);
        }
    }

    /// Open endpoint `ep` holds context `ctx` now, or none; `mbox`: its process has a
    /// mailbox (2.5: only then may a MAILBOX, which needs no key, wake it).
    pub(crate) fn ep_set(&self, ep: u32, ctx: Option<u32>, mbox: bool) -> Result {
        let v = nr::NET_EP_CTX::zeroed().with_open(true).with_mbox(mbox);
        let v = match ctx {
            Some(c) => v.try_with_ctx(c)?.with_resident(true),
            None => v,
        };
        self.ep_write(ep, v)
    }

    /// Write endpoint `ep`'s entry.
    fn ep_write(&self, ep: u32, v: nr::NET_EP_CTX) -> Result {
        if ep == NO_ENDPOINT {
            return Ok(());
        }
        let _win = self.net_win.lock();
        self.regs
            .write((), nr::NET_EP_SEL::zeroed().with_value(ep))?;
        self.regs.write((), v)
    }

    /// 2.5: key failures from node `src` since it was last released.
    pub(crate) fn keyfails(&self, src: u32) -> Result<u32> {
        let _win = self.net_win.lock();
        self.regs
            .write((), nr::NET_SRC_SEL::zeroed().with_value(src))?;
        Ok(self.regs.read(nr::NET_SRC_KEYFAILS)?.value().get())
    }

    /// 2.5: the quarantined nodes, bit n for node n.
    pub(crate) fn quarantined(&self) -> Result<u64> {
        let lo = self.regs.read(nr::NET_QUARANTINE_LO)?.value().get();
        let hi = self.regs.read(nr::NET_QUARANTINE_HI)?.value().get();
        Ok(u64::from(hi) << 32 | u64::from(lo))
    }

    /// 2.5: release the nodes of `mask` from quarantine (their failures are forgotten).
    pub(crate) fn release_nodes(&self, mask: u64) -> Result {
        self.regs
            .write((), nr::NET_QUARANTINE_LO::zeroed().with_value(mask as u32))?;
        self.regs.write(
            (),
            nr::NET_QUARANTINE_HI::zeroed().with_value((mask >> 32) as u32),
        )
    }

    /// Commit entry `idx` of the key table (`ctrl` not VALID revokes it). `node`, for a key
    /// `bound` to it in `ctrl`, is written only then (2.9: an older engine has no such
    /// register; the caller refused it one).
    pub(crate) fn rkey_write(
        &self,
        idx: u32,
        key: u64,
        ep: u32,
        (base, len): (u64, u64),
        node: u32,
        ctrl: nr::NET_RKEY_CTRL,
    ) -> Result {
        let _win = self.net_win.lock();
        let r = &self.regs;
        r.write((), nr::NET_RKEY_SEL::zeroed().with_value(idx))?;
        r.write((), nr::NET_RKEY_KEY_LO::zeroed().with_value(key as u32))?;
        r.write(
            (),
            nr::NET_RKEY_KEY_HI::zeroed().with_value((key >> 32) as u32),
        )?;
        r.write((), nr::NET_RKEY_BASE_LO::zeroed().with_value(base as u32))?;
        r.write(
            (),
            nr::NET_RKEY_BASE_HI::zeroed().with_value((base >> 32) as u32),
        )?;
        r.write((), nr::NET_RKEY_LEN_LO::zeroed().with_value(len as u32))?;
        r.write(
            (),
            nr::NET_RKEY_LEN_HI::zeroed().with_value((len >> 32) as u32),
        )?;
        r.write((), nr::NET_RKEY_EP::zeroed().with_value(ep))?;
        if ctrl.bound() {
            r.write((), nr::NET_RKEY_NODE::zeroed().with_value(node))?;
        }
        // The commit: the engine takes the whole entry from here on.
        r.write((), ctrl)
    }
}

impl Engine {
    /// Whether NET_IRQ says endpoints are wanted (false without a port).
    pub(crate) fn eps_wanted(&self) -> bool {
        self.node != crate::exanest_core::abi::NO_NODE
            && self.regs.read(nr::NET_IRQ).is_ok_and(|v| v.ep_wanted())
    }

    /// If endpoints are wanted, clear NET_IRQ (before reading the bitmap, so that a bit set
    /// after it raises the interrupt again) and hand each word of the bitmap to `word`.
    /// Returns whether there were any.
    pub(crate) fn take_wanted(&self, mut word: impl FnMut(usize, u32)) -> bool {
        if !self.eps_wanted() {
            return false;
        }
        // An MMIO write fails only for an offset past the BAR, which probe checked.
        let _ = self
            .regs
            .write((), nr::NET_IRQ::zeroed().with_ep_wanted(true));
        for w in 0..net::EP_WANTED_WORDS {
            let bits = nr::NET_EP_WANTED::try_at(w)
                .and_then(|at| self.regs.read(at).ok())
                .map_or(0, |v| v.value().get());
            word(w, bits);
        }
        true
    }
}

impl Context {
    /// Enable the mailbox ring of 2^`log2` slots at `base` on this context: EIO when the
    /// engine refuses it.
    pub(crate) fn mbox_enable(&self, base: u64, log2: u32) -> Result {
        let c = self.index as usize;
        let r = &self.engine.regs;
        r.write(
            nr::MBOX_BASE_LO::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_BASE_LO::zeroed().with_value(base as u32),
        )?;
        r.write(
            nr::MBOX_BASE_HI::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_BASE_HI::zeroed().with_value((base >> 32) as u32),
        )?;
        r.write(
            nr::MBOX_CFG::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_CFG::zeroed()
                .try_with_log2(log2)?
                .with_enable(true),
        )?;
        let cfg = r.read(nr::MBOX_CFG::try_at(c).ok_or(EINVAL)?)?;
        if !cfg.enable() {
            return Err(EIO);
        }
        Ok(())
    }

    /// The ring's indices (HEAD, TAIL), before the context is taken from its process.
    pub(crate) fn mbox_save(&self) -> Result<(u32, u32)> {
        let c = self.index as usize;
        let r = &self.engine.regs;
        let head = r.read(nr::MBOX_HEAD::try_at(c).ok_or(EINVAL)?)?;
        let tail = r.read(nr::MBOX_TAIL::try_at(c).ok_or(EINVAL)?)?;
        Ok((head.value().get(), tail.value().get()))
    }

    /// 2.6: the messages the ring holds that its reader has not taken (TAIL - HEAD); when there
    /// are none, the mailbox event is armed, so that the next message raises CTX_IRQ MBOX (one
    /// placed since the look raises it at once).
    pub(crate) fn mbox_pending_or_arm(&self) -> Result<u32> {
        let (head, tail) = self.mbox_save()?;
        let pending = tail.wrapping_sub(head);
        if pending == 0 {
            let c = self.index as usize;
            self.engine.regs.write(
                nr::MBOX_ARM::try_at(c).ok_or(EINVAL)?,
                nr::MBOX_ARM::zeroed().with_once(true),
            )?;
        }
        Ok(pending)
    }

    /// Give this context the ring of `m` where it was: TAIL while the mailbox is disabled (as
    /// QUIESCE left it), enable, then HEAD, which RESUMEs the messages a full ring refused.
    pub(crate) fn mbox_restore(&self, m: &MboxState) -> Result {
        let c = self.index as usize;
        let r = &self.engine.regs;
        r.write(
            nr::MBOX_TAIL::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_TAIL::zeroed().with_value(m.tail),
        )?;
        self.mbox_enable(m.base, m.log2)?;
        r.write(
            nr::MBOX_HEAD::try_at(c).ok_or(EINVAL)?,
            nr::MBOX_HEAD::zeroed().with_value(m.head),
        )
    }
}
