// SPDX-License-Identifier: GPL-2.0-only

//! The network port's link settings (register map 2.3, Documentation/network.rst): debugfs
//! `exanest-dmaN/link` lists the first retransmission timeout, the timeouts in a row before an
//! op fails, and the loss and corruption injected into sent packets, one `name value` line
//! each; root writes `name value` pairs to change them (`echo drop_ppm 10000 > link`). The
//! tests and the benchmarks under loss use it. The parsing is the core's
//! (`net::parse_tunables`); nothing is written unless the whole input parses (EINVAL), and an
//! engine without a port has nothing to set (EOPNOTSUPP).

use crate::exanest_core::{abi, regs::net};
use crate::hw::Engine;
use core::fmt;
use kernel::{prelude::*, sync::Arc, uaccess::UserSliceReader};

/// What a write to `link` may hold: a few pairs.
const MAX_INPUT: usize = 128;

/// debugfs `link`, read.
pub(crate) fn link_fmt(e: &Arc<Engine>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if e.node == abi::NO_NODE {
        return writeln!(f, "no network port");
    }
    for (name, reg, _) in net::TUNABLES {
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
    let n = r.len();
    if n > MAX_INPUT {
        return Err(EINVAL);
    }
    r.read_slice(&mut buf[..n])?;
    if e.node == abi::NO_NODE {
        return Err(EOPNOTSUPP);
    }
    let mut set = [(0, 0); 4];
    let k = net::parse_tunables(&buf[..n], &mut set).ok_or(EINVAL)?;
    for &(reg, v) in &set[..k] {
        e.regs.write::<u32, usize>(reg, v)?;
    }
    Ok(())
}
