// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! Decision logic of the ExaNeSt DMA driver that needs no kernel: register encoding now, and the
//! fault queue, touch-ahead planner and retransmission state machine as they arrive.
//!
//! The crate is `no_std` with no dependencies, so the kernel module can include this file with
//! `#[path = "…"] mod` while `cargo test` runs the same code on the host.

#![no_std]
#![forbid(unsafe_code)]

pub mod abi;
pub mod ahead;
pub mod batch;
pub mod budget;
pub mod ctxpool;
pub mod fault;
pub mod faultsm;
pub mod frec;
pub mod idmap;
pub mod kqueue;
pub mod netop;
pub mod netrx;
pub mod packet;
pub mod region;
pub mod regs;
pub mod sched;
pub mod stamps;

#[cfg(test)]
mod testrng;
