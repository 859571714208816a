// SPDX-License-Identifier: GPL-2.0

//! lbr-decode's readers, as a library for the command (`main.rs`), the fuzz targets (`fuzz/`)
//! and the benchmarks.

pub mod dump;
#[doc(hidden)]
pub mod fixture;
pub mod log;
pub mod symbols;
