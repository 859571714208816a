// SPDX-License-Identifier: GPL-2.0

//! lbr-emu: a QEMU TCG plugin that gives the guest CPU branch-record hardware (Intel
//! model-specific LBR in every format, Intel Architectural LBR, AMD LbrExtV2 and the AMD single
//! record, and Intel's Branch Trace Store into guest memory) and logs the ground truth (switch
//! transitions, MSR reads, the record stack and the BTS buffer position at every freeze,
//! optionally every taken branch) as JSON lines. See the README.
//!
//! The pure parts (instruction classes, models and CPUID, the recorder and its encodings,
//! arguments, the log's events, the cost probe's measurement, a vCPU's state and its saved
//! form) are unit-tested on the host; `plugin` and `api` (QEMU's plugin API and its safe
//! wrappers) exist only in the plugin build.

pub mod args;
pub mod bts;
pub mod classify;
pub mod cost;
pub mod event;
pub mod model;
pub mod recorder;
pub mod stall;
pub mod state;
pub mod vcpu;

#[cfg(not(test))]
mod api;
#[cfg(not(test))]
mod plugin;
