// SPDX-License-Identifier: GPL-2.0

//! lbr-decode as a library, for the command (`main.rs`), the fuzz targets (`fuzz/`) and the
//! benchmarks. From input to output:
//!
//! - [`snapshot`] is the model both readers produce: a snapshot, its records, its last
//!   exception record and its branch trace store history;
//! - [`log`] finds the snapshots printed in kernel logs, [`dump`] the snapshot areas in memory
//!   dumps (ELF, or makedumpfile's kdump-compressed format read by its child [`dump::kdump`]);
//!   [`bts`] reads a snapshot's branch trace store history from either;
//! - [`symbols`] reads vmlinux and module .ko files (symbol tables, DWARF), and
//!   [`symbolize::Symbolizer`] maps the inputs' runtime addresses onto them;
//! - [`output::Output`] is what is printed: the snapshots symbolized (its serde form is the JSON
//!   output), which [`render`] prints as text or as the annotated logs;
//! - [`straight`] checks that straight-line code in vmlinux leads from each record to the next.
//!
//! With the `fixture` feature (the tests and examples have it; a default build does not),
//! `fixture` writes snapshot areas and ELF core files, and `dump::kdump::writer`
//! kdump-compressed and flattened files: test data.

#![warn(missing_docs)]

pub mod bts;
pub mod dump;
#[cfg(any(test, feature = "fixture"))]
pub mod fixture;
pub mod log;
pub mod output;
pub mod render;
pub mod snapshot;
pub mod straight;
pub mod symbolize;
pub mod symbols;
