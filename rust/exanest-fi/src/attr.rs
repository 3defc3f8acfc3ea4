// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! What the provider offers, and whether an application's hints accept it: `fi_getinfo`'s
//! decision, in plain Rust (the host tests run it), apart from the C structures (`info.rs`).
//!
//! The rules are fi_getinfo(3)'s: a hint left zero accepts anything; capabilities asked for must
//! be offered; the modes the provider requires must be ones the application supports; sizes and
//! orders asked for must be within the offer. What comes back is the offer, narrowed to the
//! capabilities asked for (plus the secondary ones the provider always has).

use crate::sys;

/// `FI_VERSION(major, minor)`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// The libfabric API the provider is written against (Debian bookworm's 1.17). libfabric
/// skips a provider that declares an older one than the application asks for.
pub const API_VERSION: u32 = fi_version(1, 17);
/// This provider's own version.
pub const PROV_VERSION: u32 = fi_version(0, 1);
/// The provider's and the fabric's name.
pub const NAME: &str = "exanest";
/// `FI_TAG_GENERIC`: every tag bit may be used for matching.
pub const TAG_GENERIC: u64 = 0xAAAA_AAAA_AAAA_AAAA;
/// The address of an endpoint: its engine's network node and its endpoint on that node, two
/// little-endian u32 (`FI_FORMAT_UNSPEC`, 8 bytes).
pub const ADDR_LEN: usize = 8;
/// An endpoint not yet chosen (`fi_getinfo`'s source address: the node alone).
pub const ANY_ENDPOINT: u32 = u32::MAX;

const fn b(x: u32) -> u64 {
    x as u64
}

/// The environment variable that narrows the domains listed to the devices it names,
/// comma-separated (like the verbs provider's `FI_VERBS_DEVICE_NAME`): a process that must use
/// one engine of several, an MPI rank of an `mpirun` with one `-x` per application context.
pub const DEVICE_VAR: &str = "FI_EXANEST_DEVICE_NAME";

/// Whether device `name` (`exanest-dma<N>`) is listed, given [`DEVICE_VAR`]'s value (unset or
/// empty: every device).
pub fn device_allowed(name: &str, only: Option<&str>) -> bool {
    match only.map(str::trim) {
        None | Some("") => true,
        Some(list) => list.split(',').any(|d| d.trim() == name),
    }
}

/// The primary capabilities (fi_getinfo(3)): the ones an application asks for by name.
pub const PRIMARY: u64 =
    b(sys::FI_MSG) | b(sys::FI_TAGGED) | sys::FI_RMA as u64 | sys::FI_ATOMIC as u64;
/// The modifiers of the primary capabilities (a primary one without any means all of them).
pub const MODIFIERS: u64 = sys::FI_SEND as u64
    | sys::FI_RECV as u64
    | sys::FI_READ as u64
    | sys::FI_WRITE as u64
    | sys::FI_REMOTE_READ as u64
    | sys::FI_REMOTE_WRITE as u64;
/// One-sided operations (`FI_RMA` and its modifiers): the engine's put and get.
pub const RMA: u64 = sys::FI_RMA as u64
    | sys::FI_READ as u64
    | sys::FI_WRITE as u64
    | sys::FI_REMOTE_READ as u64
    | sys::FI_REMOTE_WRITE as u64;
/// The registration modes `FI_RMA` requires of the application: virtual addresses as the
/// remote addresses, the provider's keys (the engine's rkeys), memory allocated before it is
/// registered. Nothing else (no `FI_MR_LOCAL`): sends and receives need no registration.
pub const RMA_MR_MODE: i32 =
    (sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY | sys::FI_MR_ALLOCATED) as i32;

/// Whether an application's `mr_mode` hint accepts [`RMA_MR_MODE`]: unspecified, the old
/// `FI_MR_BASIC` (the same three modes), or all three bits.
fn mr_mode_allows_rma(mr_mode: i32) -> bool {
    mr_mode == 0
        || mr_mode == sys::fi_mr_mode_FI_MR_BASIC as i32
        || mr_mode & RMA_MR_MODE == RMA_MR_MODE
}

/// Secondary capabilities the provider has whether asked or not.
pub const SECONDARY: u64 = sys::FI_LOCAL_COMM as u64 | sys::FI_REMOTE_COMM as u64;

/// One domain's offer: an engine context with a network port (Documentation/libfabric.rst).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// `fi_domain_attr.name`: the device node's name, `exanest-dma<N>`.
    pub domain: String,
    /// The engine's network node id.
    pub node: u32,
    /// Capabilities.
    pub caps: u64,
    /// Message ordering (transmit and receive).
    pub msg_order: u64,
    /// Completion ordering.
    pub comp_order: u64,
    /// `fi_inject` and `fi_tinject`'s largest message.
    pub inject_size: usize,
    /// Operations a transmit (receive) context holds.
    pub tx_size: usize,
    /// Receives posted at once.
    pub rx_size: usize,
    /// Largest message.
    pub max_msg_size: usize,
    /// Remote CQ data's bytes.
    pub cq_data_size: usize,
    /// Memory registrations per domain.
    pub mr_cnt: usize,
    /// Endpoints per domain.
    pub ep_cnt: usize,
}

impl Offer {
    /// The offer of the engine context behind `/dev/<domain>`, on network node `node`, which
    /// registers at most `max_regions` regions per process.
    pub fn new(domain: String, node: u32, max_regions: u32) -> Self {
        Offer {
            domain,
            node,
            caps: b(sys::FI_MSG)
                | b(sys::FI_TAGGED)
                | sys::FI_SEND as u64
                | sys::FI_RECV as u64
                | sys::FI_DIRECTED_RECV as u64
                | RMA
                | SECONDARY,
            msg_order: b(sys::FI_ORDER_SAS),
            comp_order: b(sys::FI_ORDER_NONE),
            // fi_inject copies into a staging slot at once: the eager limit.
            inject_size: crate::proto::EAGER_MAX,
            tx_size: 256,
            rx_size: 256,
            max_msg_size: u32::MAX as usize,
            cq_data_size: 8,
            mr_cnt: max_regions as usize,
            ep_cnt: 1,
        }
    }
}

/// One side's hints (`fi_tx_attr` or `fi_rx_attr`), zero where the application left them so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SideHints {
    /// Capabilities.
    pub caps: u64,
    /// Modes supported.
    pub mode: u64,
    /// Default flags of the side's operations (`FI_COMPLETION`, ...), returned as given.
    pub op_flags: u64,
    /// Message ordering required.
    pub msg_order: u64,
    /// Completion ordering required.
    pub comp_order: u64,
    /// Inject size required (transmit side).
    pub inject_size: usize,
    /// Queue size required.
    pub size: usize,
    /// Scatter-gather entries required.
    pub iov_limit: usize,
}

/// An application's hints (`fi_getinfo`'s `hints`), in the terms the decision needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    /// Capabilities asked for.
    pub caps: u64,
    /// Modes the application supports.
    pub mode: u64,
    /// `FI_FORMAT_UNSPEC` (0) or a format.
    pub addr_format: u32,
    /// `FI_EP_UNSPEC` (0) or a type.
    pub ep_type: u32,
    /// Largest message needed.
    pub max_msg_size: usize,
    /// Transmit contexts per endpoint.
    pub tx_ctx_cnt: usize,
    /// Receive contexts per endpoint.
    pub rx_ctx_cnt: usize,
    /// The fabric's name, if given.
    pub fabric_name: Option<String>,
    /// The domain's name, if given.
    pub domain_name: Option<String>,
    /// `fi_domain_attr.mr_mode`: the registration modes the application supports.
    pub mr_mode: i32,
    /// `fi_domain_attr.cq_data_size` needed.
    pub cq_data_size: usize,
    /// `fi_domain_attr.data_progress` and `control_progress` (`FI_PROGRESS_UNSPEC` = 0).
    pub progress: [u32; 2],
    /// Transmit side.
    pub tx: SideHints,
    /// Receive side.
    pub rx: SideHints,
}

/// Why an offer does not fit (FI_LOG_LEVEL=info prints it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// Capabilities not offered.
    Caps(u64),
    /// Not an `FI_EP_RDM` endpoint.
    EpType,
    /// Another address format.
    AddrFormat,
    /// Another fabric or domain name.
    Name,
    /// An order, size or count beyond the offer.
    Limit(&'static str),
    /// Automatic progress asked for.
    Progress,
}

/// What `fi_getinfo` returns for an offer that fits: the capabilities, the endpoint's and each
/// side's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    /// `fi_info.caps`.
    pub caps: u64,
    /// `fi_tx_attr.caps`.
    pub tx_caps: u64,
    /// `fi_rx_attr.caps`.
    pub rx_caps: u64,
    /// `fi_tx_attr.op_flags`: the hints' (fi_getinfo(3) returns them).
    pub tx_op_flags: u64,
    /// `fi_rx_attr.op_flags`: the hints'.
    pub rx_op_flags: u64,
    /// `fi_domain_attr.mr_mode`: [`RMA_MR_MODE`] with `FI_RMA`, none without.
    pub mr_mode: i32,
}

/// The capabilities of one side (transmit or receive): those of `caps` that make sense there.
fn side_caps(caps: u64, tx: bool) -> u64 {
    let not = if tx {
        sys::FI_RECV as u64
            | sys::FI_REMOTE_READ as u64
            | sys::FI_REMOTE_WRITE as u64
            | sys::FI_DIRECTED_RECV as u64
    } else {
        sys::FI_SEND as u64 | sys::FI_READ as u64 | sys::FI_WRITE as u64
    };
    caps & !not
}

/// `caps` with its primary capabilities' modifiers spelled out: a primary capability given
/// without any modifier means all of them.
fn with_modifiers(caps: u64, offered: u64) -> u64 {
    if caps & PRIMARY == 0 || caps & MODIFIERS != 0 {
        return caps;
    }
    // The modifiers of the primary capabilities asked for: sends and receives of messages,
    // reads and writes of one-sided operations.
    let mut m = 0;
    if caps & (sys::FI_MSG as u64 | sys::FI_TAGGED as u64) != 0 {
        m |= sys::FI_SEND as u64 | sys::FI_RECV as u64;
    }
    if caps & (sys::FI_RMA as u64 | sys::FI_ATOMIC as u64) != 0 {
        m |= sys::FI_READ as u64
            | sys::FI_WRITE as u64
            | sys::FI_REMOTE_READ as u64
            | sys::FI_REMOTE_WRITE as u64;
    }
    caps | (offered & m)
}

impl Offer {
    /// Whether `hints` (None: no hints) accept this offer, and what `fi_getinfo` returns if so.
    pub fn fit(&self, hints: Option<&Hints>) -> Result<Fit, Mismatch> {
        let Some(h) = hints else {
            return Ok(Fit {
                caps: self.caps,
                tx_caps: side_caps(self.caps, true),
                rx_caps: side_caps(self.caps, false),
                tx_op_flags: 0,
                rx_op_flags: 0,
                mr_mode: RMA_MR_MODE,
            });
        };
        let want = with_modifiers(h.caps, self.caps);
        if want & !self.caps != 0 {
            return Err(Mismatch::Caps(want & !self.caps));
        }
        let rma_ok = mr_mode_allows_rma(h.mr_mode);
        if want & RMA != 0 && !rma_ok {
            return Err(Mismatch::Limit("mr_mode"));
        }
        // Everything offered, when the hints name no capability: without FI_RMA if their
        // registration modes exclude it.
        let offered = if rma_ok { self.caps } else { self.caps & !RMA };
        if h.ep_type != 0 && h.ep_type != sys::fi_ep_type_FI_EP_RDM as u32 {
            return Err(Mismatch::EpType);
        }
        if h.addr_format != 0 {
            return Err(Mismatch::AddrFormat);
        }
        if h.fabric_name.as_deref().is_some_and(|n| n != NAME)
            || h.domain_name.as_deref().is_some_and(|n| n != self.domain)
        {
            return Err(Mismatch::Name);
        }
        if h.max_msg_size > self.max_msg_size {
            return Err(Mismatch::Limit("max_msg_size"));
        }
        if h.tx_ctx_cnt > 1 || h.rx_ctx_cnt > 1 {
            return Err(Mismatch::Limit("tx_ctx_cnt/rx_ctx_cnt"));
        }
        if h.cq_data_size > self.cq_data_size {
            return Err(Mismatch::Limit("cq_data_size"));
        }
        // Progress is manual: the application's calls drive it (fi_cq_read, ...).
        if h.progress
            .contains(&(sys::fi_progress_FI_PROGRESS_AUTO as u32))
        {
            return Err(Mismatch::Progress);
        }
        for (side, size) in [(&h.tx, self.tx_size), (&h.rx, self.rx_size)] {
            if side.msg_order & !self.msg_order != 0 {
                return Err(Mismatch::Limit("msg_order"));
            }
            if side.comp_order & !self.comp_order != 0 {
                return Err(Mismatch::Limit("comp_order"));
            }
            if side.size > size {
                return Err(Mismatch::Limit("size"));
            }
            if side.iov_limit > 1 {
                return Err(Mismatch::Limit("iov_limit"));
            }
            if side.caps & !self.caps != 0 {
                return Err(Mismatch::Caps(side.caps & !self.caps));
            }
        }
        if h.tx.inject_size > self.inject_size {
            return Err(Mismatch::Limit("inject_size"));
        }
        let caps = if want == 0 {
            offered
        } else {
            want | (self.caps & SECONDARY)
        };
        let side = |s: &SideHints, tx: bool| {
            if s.caps != 0 {
                with_modifiers(s.caps, self.caps)
            } else {
                side_caps(caps, tx)
            }
        };
        Ok(Fit {
            caps,
            tx_caps: side(&h.tx, true),
            rx_caps: side(&h.rx, false),
            tx_op_flags: h.tx.op_flags,
            rx_op_flags: h.rx.op_flags,
            mr_mode: if caps & sys::FI_RMA as u64 != 0 {
                RMA_MR_MODE
            } else {
                0
            },
        })
    }
}

/// An endpoint address as bytes (`ADDR_LEN`).
pub fn addr_bytes(node: u32, endpoint: u32) -> [u8; ADDR_LEN] {
    let mut a = [0; ADDR_LEN];
    a[..4].copy_from_slice(&node.to_le_bytes());
    a[4..].copy_from_slice(&endpoint.to_le_bytes());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> Offer {
        Offer::new("exanest-dma0".into(), 1, 4096)
    }

    /// What Open MPI 4.1.4's `mtl ofi` asks for (../shared/notes/libfabric-mpi.md).
    fn ompi_mtl() -> Hints {
        Hints {
            caps: sys::FI_TAGGED as u64
                | sys::FI_LOCAL_COMM as u64
                | sys::FI_REMOTE_COMM as u64
                | sys::FI_DIRECTED_RECV as u64,
            mode: sys::FI_CONTEXT as u64 | sys::FI_CONTEXT2 as u64,
            ep_type: sys::fi_ep_type_FI_EP_RDM as u32,
            cq_data_size: 4,
            tx: SideHints {
                msg_order: sys::FI_ORDER_SAS as u64,
                ..Default::default()
            },
            rx: SideHints {
                msg_order: sys::FI_ORDER_SAS as u64,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn no_hints_get_the_whole_offer() {
        let f = offer().fit(None).unwrap();
        assert_eq!(f.caps, offer().caps);
        assert_eq!(f.tx_caps & sys::FI_RECV as u64, 0);
        assert_eq!(f.rx_caps & sys::FI_SEND as u64, 0);
        assert_ne!(f.rx_caps & sys::FI_DIRECTED_RECV as u64, 0);
    }

    #[test]
    fn open_mpi_mtl_fits() {
        let f = offer().fit(Some(&ompi_mtl())).unwrap();
        assert_ne!(f.caps & sys::FI_TAGGED as u64, 0);
        // A primary capability without modifiers means both directions.
        assert_ne!(f.caps & sys::FI_SEND as u64, 0);
        assert_ne!(f.caps & sys::FI_RECV as u64, 0);
        // Not asked for: FI_MSG is not returned.
        assert_eq!(f.caps & sys::FI_MSG as u64, 0);
    }

    #[test]
    fn what_is_not_offered_does_not_fit() {
        let atomic = Hints {
            caps: sys::FI_ATOMIC as u64,
            ..Default::default()
        };
        assert!(matches!(offer().fit(Some(&atomic)), Err(Mismatch::Caps(_))));
        // FI_RMA needs the application to take its registration modes.
        let local = Hints {
            caps: sys::FI_RMA as u64,
            mr_mode: sys::FI_MR_LOCAL as i32,
            ..Default::default()
        };
        assert_eq!(offer().fit(Some(&local)), Err(Mismatch::Limit("mr_mode")));
        let msg_ep = Hints {
            ep_type: sys::fi_ep_type_FI_EP_MSG as u32,
            ..Default::default()
        };
        assert_eq!(offer().fit(Some(&msg_ep)), Err(Mismatch::EpType));
        let inet = Hints {
            addr_format: sys::FI_SOCKADDR_IN as u32,
            ..Default::default()
        };
        assert_eq!(offer().fit(Some(&inet)), Err(Mismatch::AddrFormat));
        let other = Hints {
            domain_name: Some("exanest-dma1".into()),
            ..Default::default()
        };
        assert_eq!(offer().fit(Some(&other)), Err(Mismatch::Name));
        let fab = Hints {
            fabric_name: Some("tcp".into()),
            ..Default::default()
        };
        assert_eq!(offer().fit(Some(&fab)), Err(Mismatch::Name));
        let auto = Hints {
            progress: [sys::fi_progress_FI_PROGRESS_AUTO as u32, 0],
            ..Default::default()
        };
        assert_eq!(offer().fit(Some(&auto)), Err(Mismatch::Progress));
        let mut big = ompi_mtl();
        big.tx.inject_size = crate::proto::EAGER_MAX + 1;
        assert_eq!(offer().fit(Some(&big)), Err(Mismatch::Limit("inject_size")));
        let mut order = ompi_mtl();
        order.rx.msg_order |= sys::FI_ORDER_RAW as u64;
        assert_eq!(offer().fit(Some(&order)), Err(Mismatch::Limit("msg_order")));
        let mut data = ompi_mtl();
        data.cq_data_size = 9;
        assert_eq!(
            offer().fit(Some(&data)),
            Err(Mismatch::Limit("cq_data_size"))
        );
    }

    #[test]
    fn rma_comes_with_its_registration_modes() {
        let rma = Hints {
            caps: sys::FI_RMA as u64,
            mr_mode: RMA_MR_MODE | sys::FI_MR_LOCAL as i32,
            ..Default::default()
        };
        let f = offer().fit(Some(&rma)).unwrap();
        assert_eq!(f.mr_mode, RMA_MR_MODE);
        assert_ne!(f.caps & sys::FI_WRITE as u64, 0);
        assert_ne!(f.rx_caps & sys::FI_REMOTE_WRITE as u64, 0);
        assert_eq!(f.tx_caps & sys::FI_REMOTE_WRITE as u64, 0);
        // Open MPI's tagged hints: no RMA asked, no registration mode returned.
        assert_eq!(offer().fit(Some(&ompi_mtl())).unwrap().mr_mode, 0);
        // No capability named, modes that exclude RMA's: everything else.
        let any = Hints {
            mr_mode: sys::FI_MR_LOCAL as i32,
            ..Default::default()
        };
        let f = offer().fit(Some(&any)).unwrap();
        assert_eq!((f.caps & RMA, f.mr_mode), (0, 0));
        assert_ne!(f.caps & sys::FI_TAGGED as u64, 0);
    }

    #[test]
    fn the_device_variable_narrows_the_domains() {
        assert!(device_allowed("exanest-dma1", None));
        assert!(device_allowed("exanest-dma1", Some("")));
        assert!(device_allowed("exanest-dma1", Some("exanest-dma1")));
        assert!(device_allowed(
            "exanest-dma1",
            Some("exanest-dma0, exanest-dma1")
        ));
        assert!(!device_allowed("exanest-dma1", Some("exanest-dma0")));
        assert!(!device_allowed("exanest-dma1", Some("exanest-dma10")));
    }

    #[test]
    fn names_and_sizes_within_the_offer_fit() {
        let h = Hints {
            fabric_name: Some(NAME.into()),
            domain_name: Some("exanest-dma0".into()),
            max_msg_size: 1 << 20,
            tx: SideHints {
                size: 256,
                inject_size: 64,
                iov_limit: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(offer().fit(Some(&h)).is_ok());
    }

    #[test]
    fn addresses_are_node_then_endpoint() {
        assert_eq!(
            addr_bytes(3, ANY_ENDPOINT),
            [3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
    }
}
