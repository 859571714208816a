// SPDX-License-Identifier: GPL-2.0

//! The lines lbr-dump prints in an oops, and their parser. Pure code: the module prints with
//! [`Header`] and [`RecordLine`] (appending the `%pS` symbols through printk), the decoder reads
//! the same lines back with [`parse`], so printer and reader cannot drift.
//!
//! Format, version 2 (stable: fields are only ever added at the end of a line):
//! ```text
//! lbr_dump: v2 cpu=C seq=S vector=V (#NAME) error=0xE rip=0xR cr2=0xA flavour=F format=N records=K state=STATE nest=D filter=B
//! lbr_dump: #I 0xFROM -> 0xTO [mispred] [in_tx] [abort] [spec] [cycles=N] [type=T] | from=FROM_SYM to=TO_SYM
//! lbr_dump: ler 0xFROM -> 0xTO | from=FROM_SYM to=TO_SYM
//! lbr_dump: end cpu=C seq=S [rewritten]
//! lbr_dump: v2 cpu=C none: REASON
//! lbr_dump: v2 cpu=C kept: WHAT
//! ```
//! Version 1 differs only in its symbols, `| FROM_SYM -> TO_SYM`, and its `v1`; [`parse`] reads
//! both. Version 2 puts no symbol after whitespace: tools that symbolize or blame every
//! `name+0xN/0xN` that follows a blank in a report (syzkaller's Linux reporter,
//! `linuxSymbolizeRe` in pkg/report/linux.go, and its guilty-file search) leave its lines
//! alone, and the raw addresses, which are all a reader needs, come first.
//! Records come newest first (#0 is the exception itself when recording was on). The `ler` line,
//! after the records, is the last exception record (Intel LER, AMD LastException:
//! [`crate::facility::Recorder::last_exception`]), the last branch the CPU took before the most
//! recent exception or interrupt it took while recording, whether or not that branch is still
//! among the records; printed only where the recorder has one and it holds a branch. `STATE` is
//! `complete`, `torn` (another owner changed the recorder's control MSR during the capture),
//! `was-off` (recording was off at entry: the records predate this exception), `foreign` (see
//! [`State::Foreign`]), `nmi-entry` (a panic from an NMI handler with `nmi_freeze`: the records
//! stop at that NMI's delivery) or `zeroed` (recording was on but every record read as zero:
//! taken away, see [`State::Zeroed`]). `nest=0` is the
//! exception that oopsed; when it interrupted the handling of earlier exceptions on the same
//! stack (IBT: a #CP whose handler BUG()s), their snapshots follow with `nest=1`, `nest=2`, ...
//! (a line without `nest=` is from an older lbr-dump: read it as 0). `filter=` names the branch
//! filter the records were taken with (the `filter` parameter, [`Filter`]) when it is not `all`:
//! then conditional branches and relative jumps (`functions`), and indirect jumps too (`calls`),
//! are not among the records, so the code between two consecutive records is not straight-line.
//! The reader takes a line without it as `all`, and ignores a `key=value` field after `state=`
//! that it does not know (a later lbr-dump's). The symbols are
//! the kernel's `%pS` (`func+0xoff/0xsize [module]`), absent when not printed by the kernel.
//!
//! A panic prints, from the panic notifier: the panicking CPU's snapshot taken at the entry of
//! panic() (`vector=256 (panic)`, `rip` = where panic() was called from, `nest=0`; #0 is the
//! call into lbr-dump's trampoline, #1 the call of panic()), unless the panic follows an oops of
//! the same task, whose snapshot is already printed (a `none:` line says so); then every other
//! CPU's, taken as the panic stopped it (`vector=2 (NMI)` or `vector=248 (REBOOT_VECTOR)`, `rip`
//! = where that CPU was, no `nest=`; #0 is that interrupt), or a `none:` line for that CPU.
//!
//! Bounded by default (`print_records`, `print_all`; Documentation/lbr-dump/formats.rst): a
//! snapshot prints its newest `print_records` records (`records=` counts the lines printed),
//! then after its `end` line a `kept:` line names the records left out
//! (`kept: seq=S records #A-#B are not printed, ...`); at a panic every other CPU gets one
//! `kept:` line instead of its snapshot (`kept: seq=S vector=V (NAME) rip=0xR records=K
//! state=STATE | at=SYM`, the symbol after `|` as in record lines) if the stop IPI stopped it
//! (a CPU stopped by the NMI prints its snapshot), and a last `kept:` line of the panicking CPU
//! says where those snapshots are. Everything stays in the snapshot area for crash-dump readers.

use core::fmt;

use crate::facility::Filter;
use crate::record::{Branch, BranchType};

/// The prefix of every line (the module's `pr_fmt`).
pub const PREFIX: &str = "lbr_dump: ";

/// The vectors lbr-dump can hook, with their names: the one list (the module's `vectors`
/// parameter, its messages and attributes, the printed lines and the decoder derive from it;
/// asm/stubs.S and src/glue.c have one stub and one static call for each, which the module's
/// KUnit suite checks against it). All but #DB are captured; #DB is only re-armed.
pub const VECTORS: [(u32, &str); 10] = [
    (0, "#DE"),
    (1, "#DB"),
    (6, "#UD"),
    (8, "#DF"),
    (11, "#NP"),
    (12, "#SS"),
    (13, "#GP"),
    (14, "#PF"),
    (17, "#AC"),
    (21, "#CP"),
];

/// #DB: hooked to re-arm the recorder, never captured.
pub const REARM_ONLY: u32 = 1;

/// The snapshots that are not an exception's, with their names: a capture at the entry of
/// panic(), one at the entry of a report function, and a CPU stopped in a panic by an NMI or by
/// the stop IPI (layout.rs VECTOR_*).
pub const KINDS: [(u32, &str); 4] = [
    (crate::layout::VECTOR_PANIC, "panic"),
    (crate::layout::VECTOR_REPORT, "report"),
    (crate::layout::VECTOR_NMI, "NMI"),
    (crate::layout::VECTOR_REBOOT, "REBOOT_VECTOR"),
];

/// What a snapshot was taken at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A kernel-mode exception (an entry stub).
    Exception,
    /// The entry of panic() or vpanic() (the panic trampoline).
    Panic,
    /// The entry of a report function (the report trampoline: the `reports` parameter).
    Report,
    /// Another CPU, as a panic stopped it (NMI or REBOOT_VECTOR).
    Stop,
}

impl Kind {
    /// The kind of a snapshot with this `vector`.
    pub fn of(vector: u32) -> Self {
        match vector {
            crate::layout::VECTOR_PANIC => Kind::Panic,
            crate::layout::VECTOR_REPORT => Kind::Report,
            crate::layout::VECTOR_NMI | crate::layout::VECTOR_REBOOT => Kind::Stop,
            _ => Kind::Exception,
        }
    }

    /// Its name in the decoder's JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Exception => "exception",
            Kind::Panic => "panic",
            Kind::Report => "report",
            Kind::Stop => "stop",
        }
    }
}

/// The name of a snapshot's vector: a hookable exception's (`#PF`), a kind's (`panic`, `NMI`,
/// `REBOOT_VECTOR`), `#??` for any other.
pub fn vector_name(v: u32) -> &'static str {
    let mut i = 0;
    while i < VECTORS.len() {
        if VECTORS[i].0 == v {
            return VECTORS[i].1;
        }
        i += 1;
    }
    let mut i = 0;
    while i < KINDS.len() {
        if KINDS[i].0 == v {
            return KINDS[i].1;
        }
        i += 1;
    }
    "#??"
}

/// Snapshot state in a header line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Captured with recording on, control state restored.
    Complete,
    /// The control MSR changed under the capture.
    Torn,
    /// Recording was off at entry.
    WasOff,
    /// Captured at panic() entry in an NMI handler, the recorder frozen since that NMI's entry
    /// (`nmi_freeze`): the records are what the CPU did up to the NMI.
    NmiEntry,
    /// Recording was on, but with a control value lbr-dump did not write (another owner, such as
    /// perf, reprogrammed the recorder while armed); the records are live, the value was left.
    Foreign,
    /// Recording was on at entry (complete or foreign), yet not one record was there: every
    /// record MSR read as zero. A recorder that records holds at least the branch into the
    /// capture (the exception's delivery, the call into the panic trampoline), so its records
    /// were taken away: in a KVM guest, the host's perf took the LBR back from the guest's
    /// virtual LBR event, and KVM answers the guest's reads of the LBR MSRs with 0 while the
    /// guest's DEBUGCTL.LBR still reads set (hypervisor.rs).
    Zeroed,
    /// On a KVM host, the CPU's LBR was lent to a guest (vLBR) at the capture: host recording
    /// was off, and the records, if any, are the guest's, not the host's.
    Lent,
}

impl State {
    /// The name printed after `state=`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Torn => "torn",
            Self::WasOff => "was-off",
            Self::NmiEntry => "nmi-entry",
            Self::Foreign => "foreign",
            Self::Zeroed => "zeroed",
            Self::Lent => "lent",
        }
    }

    /// The state once the records are decoded: `Zeroed` for a capture with recording on
    /// (complete or foreign) that holds `records == 0`; any other state as it is (was-off and
    /// torn already say why records may be missing).
    pub fn with_records(self, records: usize) -> Self {
        match self {
            Self::Complete | Self::Foreign if records == 0 => Self::Zeroed,
            s => s,
        }
    }
}

/// The first line of a printed snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// CPU number.
    pub cpu: u32,
    /// Snapshot sequence number.
    pub seq: u64,
    /// Exception vector.
    pub vector: u32,
    /// Error code.
    pub error: u64,
    /// Faulting RIP.
    pub rip: u64,
    /// CR2.
    pub cr2: u64,
    /// Flavour name (facility::Flavour::name).
    pub flavour: &'a str,
    /// LBR format (Intel LBR), else 0.
    pub format: u32,
    /// Number of record lines that follow.
    pub records: u32,
    /// State.
    pub state: State,
    /// 0 for the exception that oopsed, N for the one it interrupted N levels out; `None` when
    /// not printed.
    pub nest: Option<u32>,
    /// The branch filter of the records (printed when not [`Filter::All`]).
    pub filter: Filter,
}

impl fmt::Display for Header<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "v2 cpu={} seq={} vector={} ({}) error={:#x} rip={:#x} cr2={:#x} flavour={} format={} records={} state={}",
            self.cpu,
            self.seq,
            self.vector,
            vector_name(self.vector),
            self.error,
            self.rip,
            self.cr2,
            self.flavour,
            self.format,
            self.records,
            self.state.name()
        )?;
        if let Some(n) = self.nest {
            write!(f, " nest={n}")?;
        }
        if self.filter != Filter::All {
            write!(f, " filter={}", self.filter.name())?;
        }
        Ok(())
    }
}

/// The part of a record line before the symbols: `#I 0xFROM -> 0xTO flags...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLine {
    /// Position, 0 = newest.
    pub index: u32,
    /// The branch.
    pub branch: Branch,
}

impl fmt::Display for RecordLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.branch;
        write!(f, "#{} {:#018x} -> {:#018x}", self.index, b.from, b.to)?;
        for (flag, name) in [
            (b.mispred, "mispred"),
            (b.in_tx, "in_tx"),
            (b.abort, "abort"),
            (b.spec, "spec"),
        ] {
            if flag == Some(true) {
                write!(f, " {name}")?;
            }
        }
        if let Some(c) = b.cycles {
            write!(f, " cycles={c}")?;
        }
        if let Some(t) = b.branch_type {
            write!(f, " type={}", t.name())?;
        }
        Ok(())
    }
}

/// The part of the last exception record's line before the symbols: `ler 0xFROM -> 0xTO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LerLine {
    /// Its source and target ([`crate::record::last_exception`]).
    pub from: u64,
    /// See [`LerLine::from`].
    pub to: u64,
}

impl fmt::Display for LerLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ler {:#018x} -> {:#018x}", self.from, self.to)
    }
}

/// A snapshot's last line: `end cpu=C seq=S`, then ` rewritten` if the printer found, once it
/// had printed the snapshot, that captures on its CPU took its slot (the sequence number
/// changed: the ring wrapped) or its kept BTS buffer (back to recording) meanwhile: the lines
/// above it may then mix two snapshots (the printer reads them in place, one at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndLine {
    /// CPU number.
    pub cpu: u32,
    /// Sequence number, as in the header.
    pub seq: u64,
    /// The slot, or the kept BTS buffer, was taken by a newer capture while it was printed.
    pub rewritten: bool,
}

impl fmt::Display for EndLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "end cpu={} seq={}", self.cpu, self.seq)?;
        if self.rewritten {
            f.write_str(" rewritten")?;
        }
        Ok(())
    }
}

/// One parsed line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A snapshot header.
    Header(Header<'a>),
    /// A record, with the kernel's symbols when present.
    Record {
        /// The record.
        record: RecordLine,
        /// `%pS` of `from`.
        from_sym: Option<&'a str>,
        /// `%pS` of `to`.
        to_sym: Option<&'a str>,
    },
    /// The snapshot's last exception record, with the kernel's symbols when present.
    Ler {
        /// The record.
        ler: LerLine,
        /// `%pS` of `from`.
        from_sym: Option<&'a str>,
        /// `%pS` of `to`.
        to_sym: Option<&'a str>,
    },
    /// The end of a snapshot.
    End(EndLine),
    /// No snapshot belongs to an oops.
    None {
        /// CPU number.
        cpu: u32,
        /// Why.
        reason: &'a str,
    },
    /// What is kept in the snapshot area but not printed (`print_records`, `print_all`).
    Kept {
        /// CPU number.
        cpu: u32,
        /// What, as printed (with the `| at=SYM` of a stopped CPU's line).
        text: &'a str,
    },
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// An address as the printer writes it: `0x` and exactly 16 digits, so that a line cut inside an
/// address is not read as a shorter one.
fn addr(s: &str) -> Option<u64> {
    let h = s.strip_prefix("0x")?;
    if h.len() != 16 {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

fn field<'a>(tok: Option<&'a str>, key: &str) -> Option<&'a str> {
    tok?.strip_prefix(key)?.strip_prefix('=')
}

/// The version label that begins a header or `none:` line: `v2 ` (printed), or `v1 ` (an older
/// lbr-dump's); the rest of `rest` after it.
pub fn strip_version(rest: &str) -> Option<&str> {
    rest.strip_prefix("v2 ")
        .or_else(|| rest.strip_prefix("v1 "))
}

/// Parses one line of lbr-dump output, version 2 or 1. Anything before [`PREFIX`] (timestamps,
/// syslog prefixes) is ignored; a line without it, or one that does not follow the format, gives
/// `None`.
pub fn parse(line: &str) -> Option<Line<'_>> {
    let at = line.find(PREFIX)?;
    let rest = line[at + PREFIX.len()..].trim_end_matches(['\r', '\n']);
    if let Some(r) = strip_version(rest) {
        let mut t = r.split(' ');
        let cpu = num(field(t.next(), "cpu")?)? as u32;
        let next = t.next()?;
        if next == "none:" {
            let reason = r.split_once("none: ")?.1;
            return Some(Line::None { cpu, reason });
        }
        if next == "kept:" {
            let text = r.split_once("kept: ")?.1;
            return Some(Line::Kept { cpu, text });
        }
        let seq = num(field(Some(next), "seq")?)?;
        let vector = num(field(t.next(), "vector")?)? as u32;
        t.next()?; // (#NAME)
        let error = num(field(t.next(), "error")?)?;
        let rip = num(field(t.next(), "rip")?)?;
        let cr2 = num(field(t.next(), "cr2")?)?;
        let flavour = field(t.next(), "flavour")?;
        let format = num(field(t.next(), "format")?)? as u32;
        let records = num(field(t.next(), "records")?)? as u32;
        let state = match field(t.next(), "state")? {
            "complete" => State::Complete,
            "torn" => State::Torn,
            "was-off" => State::WasOff,
            "nmi-entry" => State::NmiEntry,
            "foreign" => State::Foreign,
            "zeroed" => State::Zeroed,
            "lent" => State::Lent,
            _ => return None,
        };
        let (mut nest, mut filter) = (None, Filter::All);
        for tok in t {
            let (key, value) = tok.split_once('=')?;
            match key {
                "nest" => nest = Some(num(value)? as u32),
                // A name cut by a console is no filter's: the line is damaged.
                "filter" => filter = Filter::from_name(value)?,
                _ => {} // a field of a later lbr-dump
            }
        }
        return Some(Line::Header(Header {
            cpu,
            seq,
            vector,
            error,
            rip,
            cr2,
            flavour,
            format,
            records,
            state,
            nest,
            filter,
        }));
    }
    if let Some(r) = rest.strip_prefix("end ") {
        let mut t = r.split(' ');
        let cpu = num(field(t.next(), "cpu")?)? as u32;
        let seq = num(field(t.next(), "seq")?)?;
        // Then words of later versions: `rewritten`, or a field of a later lbr-dump.
        let rewritten = t.any(|w| w == "rewritten");
        return Some(Line::End(EndLine {
            cpu,
            seq,
            rewritten,
        }));
    }
    if let Some(r) = rest.strip_prefix("ler ") {
        let (raw, syms) = split_symbols(r)?;
        let mut t = raw.split(' ');
        let from = addr(t.next()?)?;
        if t.next()? != "->" {
            return None;
        }
        let to = addr(t.next()?)?;
        if t.next().is_some() {
            return None;
        }
        let (from_sym, to_sym) = syms;
        return Some(Line::Ler {
            ler: LerLine { from, to },
            from_sym,
            to_sym,
        });
    }
    let r = rest.strip_prefix('#')?;
    let (raw, (from_sym, to_sym)) = split_symbols(r)?;
    let mut t = raw.split(' ');
    let index = num(t.next()?)? as u32;
    let from = addr(t.next()?)?;
    if t.next()? != "->" {
        return None;
    }
    let to = addr(t.next()?)?;
    let mut b = Branch {
        from,
        to,
        ..Branch::default()
    };
    for tok in t {
        match tok {
            "mispred" => b.mispred = Some(true),
            "in_tx" => b.in_tx = Some(true),
            "abort" => b.abort = Some(true),
            "spec" => b.spec = Some(true),
            _ => {
                if let Some(c) = tok.strip_prefix("cycles=") {
                    b.cycles = Some(c.parse().ok()?);
                } else {
                    let ty = tok.strip_prefix("type=")?;
                    b.branch_type = Some(BranchType::from_name(ty)?);
                }
            }
        }
    }
    Some(Line::Record {
        record: RecordLine { index, branch: b },
        from_sym,
        to_sym,
    })
}

/// The `%pS` symbols of a line's two addresses, when printed.
pub type Symbols<'a> = (Option<&'a str>, Option<&'a str>);

/// The two parts of a record, `ler` or `bts` line: the raw part and the symbols after ` | `,
/// if printed: `from=FROM_SYM to=TO_SYM` (version 2) or `FROM_SYM -> TO_SYM` (version 1).
/// `None` if the symbol part is neither (a line cut inside it).
pub fn split_symbols(r: &str) -> Option<(&str, Symbols<'_>)> {
    match r.split_once(" | ") {
        Some((raw, syms)) => {
            let (f, t) = match syms.strip_prefix("from=") {
                Some(v2) => v2.split_once(" to=")?,
                None => syms.split_once(" -> ")?,
            };
            Some((raw, (Some(f), Some(t))))
        }
        None => Some((r, (None, None))),
    }
}
