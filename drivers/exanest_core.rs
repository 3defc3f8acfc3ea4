// SPDX-License-Identifier: GPL-2.0-only

//! The `no_std` core crate rust/exanest-core, compiled into the module: the decision logic that
//! `cargo test` runs on the host (validation of requests, region table, copy scheduler, fault
//! queue, touch-ahead and map-ahead planners and fault state machine, register encoding, the
//! context pool's policy). Its items are `pub` for the host crate's API; here some are unused.

#![allow(dead_code, unreachable_pub)]

#[path = "../rust/exanest-core/src/abi.rs"]
pub(crate) mod abi;
#[path = "../rust/exanest-core/src/ahead.rs"]
pub(crate) mod ahead;
#[path = "../rust/exanest-core/src/batch.rs"]
pub(crate) mod batch;
#[path = "../rust/exanest-core/src/budget.rs"]
pub(crate) mod budget;
#[path = "../rust/exanest-core/src/ctxpool.rs"]
pub(crate) mod ctxpool;
#[path = "../rust/exanest-core/src/fault.rs"]
pub(crate) mod fault;
#[path = "../rust/exanest-core/src/faultsm.rs"]
pub(crate) mod faultsm;
#[path = "../rust/exanest-core/src/frec.rs"]
pub(crate) mod frec;
#[path = "../rust/exanest-core/src/idmap.rs"]
pub(crate) mod idmap;
#[path = "../rust/exanest-core/src/kqueue.rs"]
pub(crate) mod kqueue;
#[path = "../rust/exanest-core/src/region.rs"]
pub(crate) mod region;
#[path = "../rust/exanest-core/src/regs.rs"]
pub(crate) mod regs;
#[path = "../rust/exanest-core/src/sched.rs"]
pub(crate) mod sched;
#[path = "../rust/exanest-core/src/stamps.rs"]
pub(crate) mod stamps;
