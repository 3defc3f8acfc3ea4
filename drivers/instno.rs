// SPDX-License-Identifier: GPL-2.0-only

//! Instance numbers: engine N is `/dev/exanest-dmaN`, with the debugfs directory of that name.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

/// Device names: the misc API wants `'static` names. Sixteen engines per host (a QFDB has four
/// FPGAs; `make evaluate`'s incast boots nine on one hub); a seventeenth fails its probe with
/// ENOSPC.
const NAMES: [&CStr; 16] = [
    c"exanest-dma0",
    c"exanest-dma1",
    c"exanest-dma2",
    c"exanest-dma3",
    c"exanest-dma4",
    c"exanest-dma5",
    c"exanest-dma6",
    c"exanest-dma7",
    c"exanest-dma8",
    c"exanest-dma9",
    c"exanest-dma10",
    c"exanest-dma11",
    c"exanest-dma12",
    c"exanest-dma13",
    c"exanest-dma14",
    c"exanest-dma15",
];

/// Instance numbers in use (bit n = /dev/exanest-dmaN).
static INSTANCES: AtomicU32 = AtomicU32::new(0);

/// A claimed instance number, given back on drop.
pub(crate) struct InstanceNo(u32);

impl InstanceNo {
    /// The lowest free number; ENOSPC when all are taken.
    pub(crate) fn claim() -> Result<Self> {
        loop {
            let used = INSTANCES.load(Ordering::Acquire);
            let n = (!used).trailing_zeros();
            if n as usize >= NAMES.len() {
                return Err(ENOSPC);
            }
            if INSTANCES
                .compare_exchange(used, used | (1 << n), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(InstanceNo(n));
            }
        }
    }
}

impl Drop for InstanceNo {
    fn drop(&mut self) {
        INSTANCES.fetch_and(!(1 << self.0), Ordering::AcqRel);
    }
}

impl InstanceNo {
    /// The instance's name, `exanest-dmaN`.
    pub(crate) fn name(&self) -> &'static CStr {
        NAMES[self.0 as usize]
    }
}
