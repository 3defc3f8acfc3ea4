// SPDX-License-Identifier: GPL-2.0-only

//! The one errno mapping: every [`Errno`] the core's validation returns becomes the kernel
//! error that Documentation/abi.rst documents for it, so `?` works on core results.

use crate::exanest_core::abi::Errno;
use kernel::error::Error;
use kernel::prelude::*;

impl From<Errno> for Error {
    fn from(e: Errno) -> Error {
        // `code()` is the core's one errno table, shared with the user library.
        Error::from_errno(-e.code())
    }
}

/// An error of a call that needs the process to hold an engine context (COPY, QUEUE_CREATE,
/// MBOX_CREATE, a REG with a remote right).
#[derive(Debug)]
pub(crate) enum CtxError {
    /// The process holds no context: another process took it while it was idle, after
    /// device.rs got it one. Get one again and call again.
    Lost,
    /// The call failed.
    Failed(Error),
}

impl From<Error> for CtxError {
    fn from(e: Error) -> Self {
        CtxError::Failed(e)
    }
}

impl From<Errno> for CtxError {
    fn from(e: Errno) -> Self {
        CtxError::Failed(e.into())
    }
}

impl From<kernel::alloc::AllocError> for CtxError {
    fn from(e: kernel::alloc::AllocError) -> Self {
        CtxError::Failed(e.into())
    }
}

/// The result of a call that needs the process to hold an engine context.
pub(crate) type CtxResult<T = ()> = core::result::Result<T, CtxError>;

/// Errors of `hmm_range_fault`, as the errno a NACKed transfer reports (abi.rst, "Errors of
/// a copy"): no permission is EACCES, invalidations that kept racing with the fault (HMM's
/// retry budget ran out) EAGAIN, a fatal signal EINTR, anything else (no VMA, a PFN mapping,
/// a poisoned page) EFAULT.
pub(crate) fn hmm_errno(e: Error) -> Error {
    if e == EPERM {
        EACCES
    } else if e == EBUSY {
        EAGAIN
    } else if e == EINTR {
        EINTR
    } else {
        EFAULT
    }
}

#[kunit_tests(exanest_dma_error)]
mod tests {
    use super::*;

    /// Every ABI error maps to the errno Documentation/abi.rst promises, by number.
    #[test]
    fn errno_mapping_by_number() {
        let table = [
            (Errno::Inval, 22),
            (Errno::Overflow, 75),
            (Errno::Fault, 14),
            (Errno::Acces, 13),
            (Errno::NoEnt, 2),
            (Errno::NoSpc, 28),
            (Errno::Again, 11),
            (Errno::TooBig, 7),
            (Errno::OpNotSupp, 95),
            (Errno::Busy, 16),
        ];
        for (e, n) in table {
            assert_eq!(Error::from(e).to_errno(), -n);
        }
    }

    /// `?` on a core result returns the mapped kernel error.
    #[test]
    fn question_mark_converts() {
        fn f() -> Result<u32> {
            let r: core::result::Result<u32, Errno> = Err(Errno::NoSpc);
            Ok(r?)
        }
        assert_eq!(f(), Err(ENOSPC));
    }

    /// HMM's errors become the copy errnos abi.rst lists.
    #[test]
    fn hmm_errors() {
        assert_eq!(hmm_errno(EPERM), EACCES);
        assert_eq!(hmm_errno(EBUSY), EAGAIN);
        assert_eq!(hmm_errno(EINTR), EINTR);
        assert_eq!(hmm_errno(EFAULT), EFAULT);
        assert_eq!(hmm_errno(ENOMEM), EFAULT);
    }
}
