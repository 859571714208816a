// SPDX-License-Identifier: GPL-2.0

//! The snapshot model: what the readers find, whatever the input. [`crate::log`] reads it
//! from the lines the oops printed, [`crate::dump`] from the snapshot areas of a memory dump;
//! [`crate::output`] symbolizes it. A [`Snapshot`] holds its LBR [`Record`]s, its
//! [`LastException`] record and, when lbr-dump recorded with BTS, its [`Bts`] history.
//!
//! This module depends on no other of the crate's: the readers depend on it, not on each
//! other.

use lbr_core::facility::Filter;
use lbr_core::record::Branch;
use lbr_core::report::State;

/// One record as printed, with the kernel's symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The record's index as printed (`#N`).
    pub index: u32,
    /// The branch, as the module's own parser reads it.
    pub branch: Branch,
    /// The kernel's `%pS` symbol of the source address, if printed.
    pub from_sym: Option<String>,
    /// The kernel's `%pS` symbol of the target address, if printed.
    pub to_sym: Option<String>,
    /// Input line number (1-based).
    pub line: usize,
}

/// A snapshot's last exception record (its `ler` line; in a dump, the area's LER values): the
/// last branch the CPU took before the most recent exception or interrupt it took while
/// recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastException {
    /// The branch's source.
    pub from: u64,
    /// The branch's target.
    pub to: u64,
    /// The kernel's `%pS` symbol of the source address, if printed.
    pub from_sym: Option<String>,
    /// The kernel's `%pS` symbol of the target address, if printed.
    pub to_sym: Option<String>,
    /// Input line number (1-based; 0 for dumps).
    pub line: usize,
}

/// One printed snapshot (a crash, or an oops with no snapshot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The CPU that took the exception.
    pub cpu: u32,
    /// The CPU's snapshot sequence number.
    pub seq: u64,
    /// The exception vector.
    pub vector: u32,
    /// The exception's error code.
    pub error: u64,
    /// The faulting instruction pointer.
    pub rip: u64,
    /// CR2 (the faulting address of a #PF).
    pub cr2: u64,
    /// The recorder's flavour (`intel-lbr`, ...).
    pub flavour: String,
    /// The recorder's record format.
    pub format: u32,
    /// How the capture went.
    pub state: State,
    /// 0: the exception that oopsed; N: the one it interrupted, N levels out (the printer's
    /// `nest=`); `None` when not printed (an older lbr-dump, or a dump).
    pub nest: Option<u32>,
    /// The branch filter the records were taken with (the header's `filter=`; absent: all).
    pub filter: Filter,
    /// Records the header announced.
    pub announced: u32,
    /// The records found.
    pub records: Vec<Record>,
    /// The last exception record, where the recorder has one and it held a branch.
    pub ler: Option<LastException>,
    /// The branch trace store's history, when lbr-dump recorded with BTS (its `bts` lines; in
    /// a dump, the kept buffer).
    pub bts: Option<Bts>,
    /// The end line was seen.
    pub complete: bool,
    /// The end line says `rewritten`: a newer capture on the CPU took the slot or the kept BTS
    /// buffer while lbr-dump printed it, so the printed records may mix two snapshots.
    pub rewritten: bool,
    /// Input line number of the header.
    pub line: usize,
}

/// What became of a snapshot's BTS buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BtsState {
    /// The capture kept the buffer; its records are [`Bts::records`].
    Kept {
        /// Records the buffer holds (all of them, whether printed or not).
        total: u64,
        /// The buffer had filled and wrapped: every record slot is history.
        wrapped: bool,
        /// The buffer's virtual address.
        buffer: u64,
        /// Its size in bytes.
        size: u64,
        /// Its physical address (dumps).
        phys: Option<u64>,
        /// Record lines the module printed (logs: `shown=`).
        shown: Option<u32>,
    },
    /// IA32_DS_AREA was not lbr-dump's debug store at the capture: another owner (perf) had
    /// taken it, and no buffer was kept.
    Foreign {
        /// IA32_DS_AREA as the capture read it.
        ds_area: u64,
    },
    /// The buffer was kept, but the pool came round to it again: its table entry's owner is
    /// no longer this snapshot (0: it is recording again).
    Reused {
        /// The owner the table names now.
        owner: u64,
    },
    /// The snapshot's BTS fields do not describe its buffer (why, in words).
    Inconsistent {
        /// What does not agree.
        reason: String,
    },
    /// Dumps: the kept buffer cannot be read (not in the dump).
    Unreadable {
        /// Why.
        reason: String,
    },
    /// Dumps: the capture neither kept a buffer nor found another owner's debug store.
    NotKept,
}

impl BtsState {
    /// Its name in the JSON output.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Kept { .. } => "kept",
            Self::Foreign { .. } => "foreign",
            Self::Reused { .. } => "reused",
            Self::Inconsistent { .. } => "inconsistent",
            Self::Unreadable { .. } => "unreadable",
            Self::NotKept => "not-kept",
        }
    }
}

/// A snapshot's BTS history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bts {
    /// What became of the buffer.
    pub state: BtsState,
    /// The records, newest first (`#0` the newest): from a log, the lines printed; from a dump,
    /// every record of the kept buffer. Only the branch's `from` and `to` are set (the module
    /// does not report BTS's predicted flag).
    pub records: Vec<Record>,
    /// Input line of the `bts` head line (0 for dumps).
    pub line: usize,
}
