// SPDX-License-Identifier: GPL-2.0-only

//! The memory side of a process (cf. `ib_umem_odp`): the IOMMU domain its engine context
//! translates through ([`iommu`]), pin mode's pinned pages ([`pinned`]), the on-demand mirror of
//! what the domain maps without pinning ([`mirror`]) under a translation budget ([`budget`]),
//! and on-demand paging's MMU notifiers, HMM fault-in and mapping ([`odp`]).

pub(crate) mod budget;
pub(crate) mod iommu;
pub(crate) mod mirror;
pub(crate) mod odp;
pub(crate) mod pinned;
