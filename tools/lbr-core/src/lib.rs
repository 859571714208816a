// SPDX-License-Identifier: GPL-2.0

//! The module's pure code, compiled for the host.
//!
//! These files live in the module's `src/` and are compiled into `lbr_dump.ko` by Kbuild; this
//! crate includes the very same files so that they are unit-tested with `cargo test` and shared
//! with the user-space decoder. They use `core` only.

#![no_std]

#[path = "../../../src/area.rs"]
pub mod area;
#[path = "../../../src/facility.rs"]
pub mod facility;
#[path = "../../../src/hypervisor.rs"]
pub mod hypervisor;
#[path = "../../../src/layout.rs"]
pub mod layout;
#[path = "../../../src/plan.rs"]
pub mod plan;
#[path = "../../../src/record.rs"]
pub mod record;
#[path = "../../../src/report.rs"]
pub mod report;
#[path = "../../../src/reports.rs"]
pub mod reports;
