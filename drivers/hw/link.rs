// SPDX-License-Identifier: GPL-2.0-only

//! The network port's link settings (register map 2.3, Documentation/network.rst): debugfs
//! `exanest-dmaN/link` lists the first retransmission timeout, the timeouts in a row before an
//! op fails, and the loss and corruption injected into sent packets, one `name value` line
//! each; root writes `name value` pairs to change them (`echo drop_ppm 10000 > link`). The
//! tests and the benchmarks under loss use it. The parsing is the core's
//! (`net::parse_tunables`); nothing is written unless the whole input parses (EINVAL), and an
//! engine without a port has nothing to set (EOPNOTSUPP).
//!
//! Register map 2.8: `reorder_ppm` and `reorder_us` hold back that share of the sent packets,
//! each for up to that long, so that later ones overtake them (an engine of an older map does
//! not list them, and a write of them is EOPNOTSUPP).
//!
//! Register map 2.5: `key_fail_limit` is the key failures one source node may have within a
//! second before the engine quarantines it (0: never), and debugfs `exanest-dmaN/quarantine`
//! lists the nodes with key failures, `node N key_failures F`, with ` quarantined` for those
//! whose ops the engine drops; root writes `release N` or `release all` to take a node's ops
//! again (its failures are forgotten). The parsing is the core's (`net::parse_release`).

use crate::exanest_core::{abi, regs::net};
use crate::hw::Engine;
use core::fmt;
use kernel::{prelude::*, sync::Arc, uaccess::UserSliceReader};

/// What a write to `link` may hold: a few pairs.
const MAX_INPUT: usize = 128;

/// What was written to a debugfs file of the port, read into `buf`: EINVAL past
/// [`MAX_INPUT`], EOPNOTSUPP for an engine without a port.
fn read_input<'a>(
    e: &Engine,
    r: &mut UserSliceReader,
    buf: &'a mut [u8; MAX_INPUT],
) -> Result<&'a [u8]> {
    let n = r.len();
    if n > MAX_INPUT {
        return Err(EINVAL);
    }
    r.read_slice(&mut buf[..n])?;
    if e.node == abi::NO_NODE {
        return Err(EOPNOTSUPP);
    }
    Ok(&buf[..n])
}

/// debugfs `link`, read.
pub(crate) fn link_fmt(e: &Arc<Engine>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if e.node == abi::NO_NODE {
        return writeln!(f, "no network port");
    }
    let minor = e.version.minor().get();
    for (name, reg, _) in net::TUNABLES {
        if net::tunable_since(reg) > minor {
            continue; // the engine's map has no such register
        }
        match e.regs.read::<u32, usize>(reg) {
            Ok(v) => writeln!(f, "{name} {v}")?,
            Err(_) => writeln!(f, "{name} ?")?,
        }
    }
    Ok(())
}

/// debugfs `link`, written.
pub(crate) fn link_write(e: &Arc<Engine>, r: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; MAX_INPUT];
    let input = read_input(e, r, &mut buf)?;
    let mut set = [(0, 0); net::TUNABLES.len()];
    let k = net::parse_tunables(input, &mut set).ok_or(EINVAL)?;
    let minor = e.version.minor().get();
    if set[..k]
        .iter()
        .any(|&(reg, _)| net::tunable_since(reg) > minor)
    {
        return Err(EOPNOTSUPP);
    }
    for &(reg, v) in &set[..k] {
        e.regs.write::<u32, usize>(reg, v)?;
    }
    Ok(())
}

/// debugfs `quarantine`, read: the nodes with key failures, and which are quarantined.
pub(crate) fn quarantine_fmt(e: &Arc<Engine>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if e.node == abi::NO_NODE {
        return writeln!(f, "no network port");
    }
    let Ok(q) = e.quarantined() else {
        return writeln!(f, "?");
    };
    let mut any = false;
    for n in 0..net::MAX_NODES as u32 {
        let fails = e.keyfails(n).unwrap_or(0);
        let held = q & (1 << n) != 0;
        if fails != 0 || held {
            let tag = if held { " quarantined" } else { "" };
            writeln!(f, "node {n} key_failures {fails}{tag}")?;
            any = true;
        }
    }
    if !any {
        writeln!(f, "none")?;
    }
    Ok(())
}

/// debugfs `quarantine`, written: `release N` or `release all` (EINVAL for anything else,
/// EOPNOTSUPP without a port).
pub(crate) fn quarantine_write(e: &Arc<Engine>, r: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; MAX_INPUT];
    let mask = net::parse_release(read_input(e, r, &mut buf)?).ok_or(EINVAL)?;
    e.release_nodes(mask)
}
