// SPDX-License-Identifier: GPL-2.0

//! Finding lbr-dump's snapshots in kernel log text.
//!
//! The lines themselves are parsed by the module's own code (`lbr_core::report::parse`), so
//! printer and reader cannot drift. This file only finds them: a line may carry any prefix
//! (printk timestamps, `<N>` levels, syslog or journal prefixes, CI decorations), end in CRLF, be
//! cut by a console, and come from several CPUs and several crashes in one file.
//!
//! A log may also start or end inside a snapshot: a pstore dmesg record
//! (`/sys/fs/pstore/dmesg-ramoops-N`, headed `Oops#1 Part1`, lines in kmsg_dump's syslog format
//! `<N>[time] text`) holds only the newest text of the log that fits its size, and a console log
//! may be cut. Either way a warning names the records missing: a snapshot whose end line is not
//! in the log is a [`Snapshot`] with `complete` false (its records are decoded and printed), and
//! the records of one whose header is not in the log a [`Fragment`], which this library returns
//! but the command line does not print yet (the header holds the recorder and exception they
//! belong to): only the warning.
//!
//! [`LogParser`] reads the lines one by one, keeping the snapshot open between them;
//! [`parse_log`] runs it over a text. Each problem it finds is a [`LogWarning`], whose
//! `Display` is the text lbr-decode prints.

use std::ops::RangeInclusive;

use lbr_core::record::Branch;
use lbr_core::report::{parse, Line, PREFIX};

use crate::bts::{parse_line, BtsLine};
use crate::snapshot::{Bts, BtsState, LastException, Record, Snapshot};

/// Records of a snapshot whose header line is not in the log: the log starts inside the
/// snapshot. A pstore dmesg record (`/sys/fs/pstore/dmesg-*`) holds the newest text of the log
/// that fits its size (fs/pstore/platform.c pstore_dump: kmsg_dump_get_buffer fills the record
/// from the end of the log), so a record too small for the whole snapshot loses its header and
/// newest records (`#0` first), and keeps the older ones and the end line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// The CPU and sequence number of the snapshot, from its end line; `None` when that is not
    /// in the log either.
    pub end: Option<(u32, u64)>,
    /// The records found, in log order.
    pub records: Vec<Record>,
    /// BTS record lines found (`bts #N`), without the `bts` line that says whose they are.
    pub bts_records: usize,
    /// Input line number of its first line (1-based).
    pub line: usize,
}

impl Fragment {
    /// The records not in the log: from `#0` to the first kept one, and any gaps between kept
    /// ones. How many the snapshot had after the last kept one is not known without its header
    /// (none, when its end line follows).
    pub fn missing(&self) -> Vec<RangeInclusive<u32>> {
        let last = self.records.iter().map(|r| r.index + 1).max().unwrap_or(0);
        missing(&self.records, last)
    }
}

/// An oops for which lbr-dump said no snapshot belongs to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoSnapshot {
    /// The CPU that oopsed.
    pub cpu: u32,
    /// Why there is no snapshot, as printed.
    pub reason: String,
    /// Input line number (1-based).
    pub line: usize,
}

/// What a log holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The snapshots, in log order.
    pub snapshots: Vec<Snapshot>,
    /// Records of snapshots whose header is not in the log (each also a warning).
    pub fragments: Vec<Fragment>,
    /// The oopses lbr-dump had no snapshot for.
    pub none: Vec<NoSnapshot>,
    /// What lbr-dump kept in its snapshot area without printing it (`kept:` lines: the
    /// records past `print_records`, other CPUs' snapshots at a panic), as printed.
    pub kept: Vec<NoSnapshot>,
    /// Problems with the input, each naming its line.
    pub warnings: Vec<LogWarning>,
}

/// The header line pstore writes at the start of each dmesg record (fs/pstore/platform.c
/// pstore_dump: `"%s#%d Part%u\n"` with the kmsg dump reason, the dump's count since boot and
/// the part: Part1 is the newest text of the log, Part2 the text before it, and so on; ramoops
/// and pstore/blk keep Part1 only, efi-pstore keeps every part as its own file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PstoreHeader {
    /// Why the log was dumped: `Oops`, `Panic`, `Emergency`, ... (kmsg_dump_reason_str).
    pub reason: String,
    /// The dump's number (`Oops#1`: the first dump since that boot).
    pub count: u32,
    /// The part (1: the end of the log).
    pub part: u32,
}

/// The pstore header of a log that is a pstore dmesg record (its first line), if it is one.
pub fn pstore_header(text: &str) -> Option<PstoreHeader> {
    let first = text.split('\n').next()?.trim_end_matches('\r');
    let (reason, rest) = first.split_once('#')?;
    let (count, part) = rest.split_once(" Part")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if reason.is_empty()
        || !reason.bytes().all(|b| b.is_ascii_alphabetic())
        || !digits(count)
        || !digits(part)
    {
        return None;
    }
    Some(PstoreHeader {
        reason: reason.to_string(),
        count: count.parse().ok()?,
        part: part.parse().ok()?,
    })
}

/// The part of a line from lbr-dump's prefix on, if it has one.
pub fn payload(line: &str) -> Option<&str> {
    let line = line.trim_end_matches(['\r', '\n']);
    line.find(PREFIX).map(|i| &line[i..])
}

/// The indices below `count` that no record in `records` has, as ranges.
fn missing(records: &[Record], count: u32) -> Vec<RangeInclusive<u32>> {
    let mut have: Vec<u32> = records
        .iter()
        .map(|r| r.index)
        .filter(|&i| i < count)
        .collect();
    have.sort_unstable();
    have.dedup();
    let mut out = Vec::new();
    let mut next = 0;
    for i in have.into_iter().chain([count]) {
        if i > next {
            out.push(next..=i - 1);
        }
        next = i + 1;
    }
    out
}

/// `#0-#3, #7` for a list of ranges.
pub fn ranges_text(ranges: &[RangeInclusive<u32>]) -> String {
    ranges
        .iter()
        .map(|r| {
            if r.start() == r.end() {
                format!("#{}", r.start())
            } else {
                format!("#{}-#{}", r.start(), r.end())
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `no record missing`, or `records #0-#3, #7 missing`.
fn lost_text(missing: &[RangeInclusive<u32>]) -> String {
    if missing.is_empty() {
        "no record missing".to_string()
    } else {
        format!("records {} missing", ranges_text(missing))
    }
}

/// What follows the last line of a snapshot whose end line is not in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutBy {
    /// Nothing: the log ends inside the snapshot.
    LogEnd,
    /// Another snapshot's header line.
    NextSnapshot,
}

/// A problem with a log, each naming its input line (1-based). Its `Display` is the warning's
/// text, as lbr-decode prints it (after the input's name) and puts it in the JSON output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogWarning {
    /// A snapshot line (header, record, `ler`, `end` or `bts` line) that does not parse: it
    /// was damaged or cut by a console.
    Damaged {
        /// Input line.
        line: usize,
        /// The line from lbr-dump's prefix on.
        text: String,
    },
    /// A snapshot whose end line is not in the log: the log is cut.
    NoEnd {
        /// Input line of the snapshot's header.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
        /// What follows its last line.
        cut_by: CutBy,
        /// The records found.
        kept: usize,
        /// The records its header announced.
        announced: u32,
        /// The announced records not found.
        missing: Vec<RangeInclusive<u32>>,
        /// The log is a pstore record (the warning then says why it may be cut).
        pstore: bool,
    },
    /// A complete snapshot with other records than its header announced.
    RecordCount {
        /// Input line of the snapshot's header.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
        /// The records its header announced.
        announced: u32,
        /// The records found.
        found: usize,
        /// The announced records not found.
        missing: Vec<RangeInclusive<u32>>,
    },
    /// A kept BTS history with other record lines than its `bts` line announced (`shown=`).
    BtsRecordCount {
        /// Input line of the `bts` line.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
        /// The record lines announced.
        shown: u32,
        /// The record lines found.
        found: usize,
        /// The announced record lines not found.
        missing: Vec<RangeInclusive<u32>>,
    },
    /// Records of a snapshot whose header line is not in the log (a [`Fragment`]): the log
    /// starts inside it.
    Fragment {
        /// Input line of its first line.
        line: usize,
        /// The snapshot's CPU and sequence number, from its end line, if that is in the log.
        end: Option<(u32, u64)>,
        /// The records found.
        kept: usize,
        /// The indices of the first and the last record found, in log order (none found:
        /// `None`).
        span: Option<RangeInclusive<u32>>,
        /// The records not found ([`Fragment::missing`]).
        missing: Vec<RangeInclusive<u32>>,
        /// BTS record lines found, without their `bts` line.
        bts_records: usize,
        /// The log is a pstore record (the warning then says why it may be cut).
        pstore: bool,
    },
    /// A second `ler` line in a snapshot: the first is kept.
    SecondLer {
        /// Input line of the second one.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
        /// Input line of the first one.
        first: usize,
    },
    /// An end line that says `rewritten`: a newer capture on the snapshot's CPU took its slot or
    /// its kept BTS buffer while lbr-dump printed it.
    Rewritten {
        /// Input line of the end line.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
    },
    /// The end line of another snapshot than the one open.
    EndInside {
        /// Input line of the end line.
        line: usize,
        /// The end line's CPU.
        cpu: u32,
        /// The end line's sequence number.
        seq: u64,
        /// The CPU and sequence number of the snapshot open.
        inside: (u32, u64),
    },
    /// A second `bts` line for a snapshot: the first is kept, this one and its record lines
    /// are not used.
    SecondBts {
        /// Input line of the second one.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
        /// Input line of the first one.
        first: usize,
    },
    /// A `bts` line of another snapshot than the one open: not used.
    BtsInside {
        /// Input line of the `bts` line.
        line: usize,
        /// The `bts` line's CPU.
        cpu: u32,
        /// The `bts` line's sequence number.
        seq: u64,
        /// The CPU and sequence number of the snapshot open.
        inside: (u32, u64),
    },
    /// A `bts` line with no snapshot open (its header line is not in the log): not used.
    BtsWithoutSnapshot {
        /// Input line of the `bts` line.
        line: usize,
        /// The `bts` line's CPU.
        cpu: u32,
        /// The `bts` line's sequence number.
        seq: u64,
    },
    /// BTS record lines after a `bts` line that says no records were kept: not used.
    BtsRecordsNotKept {
        /// Input line of the first record line.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
        /// The state the `bts` line names ([`BtsState::name`]).
        state: &'static str,
    },
    /// BTS record lines in a snapshot without its `bts` line (cut or damaged): not used.
    BtsRecordsWithoutHead {
        /// Input line of the first record line.
        line: usize,
        /// The snapshot's CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
    },
}

impl LogWarning {
    /// The input line it names (1-based).
    pub fn line(&self) -> usize {
        match self {
            Self::Damaged { line, .. }
            | Self::NoEnd { line, .. }
            | Self::RecordCount { line, .. }
            | Self::BtsRecordCount { line, .. }
            | Self::Fragment { line, .. }
            | Self::SecondLer { line, .. }
            | Self::EndInside { line, .. }
            | Self::Rewritten { line, .. }
            | Self::SecondBts { line, .. }
            | Self::BtsInside { line, .. }
            | Self::BtsWithoutSnapshot { line, .. }
            | Self::BtsRecordsNotKept { line, .. }
            | Self::BtsRecordsWithoutHead { line, .. } => *line,
        }
    }
}

impl std::fmt::Display for LogWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Damaged { line, text } => {
                write!(f, "line {line}: damaged or cut snapshot line: {text:?}")
            }
            Self::NoEnd {
                line,
                cpu,
                seq,
                cut_by,
                kept,
                announced,
                missing,
                pstore,
            } => {
                let how = match cut_by {
                    CutBy::LogEnd => "the log ends inside it",
                    CutBy::NextSnapshot => "another snapshot's line follows",
                };
                write!(
                    f,
                    "line {line}: snapshot cpu={cpu} seq={seq} has no end line: the log is cut, {how} (kept {kept} of {announced} records; {}){}",
                    lost_text(missing),
                    pstore_note(*pstore && *cut_by == CutBy::LogEnd)
                )
            }
            Self::RecordCount {
                line,
                cpu,
                seq,
                announced,
                found,
                missing,
            } => {
                write!(
                    f,
                    "line {line}: snapshot cpu={cpu} seq={seq} announced {announced} records, {found} were found"
                )?;
                if !missing.is_empty() {
                    write!(f, " (records {} missing)", ranges_text(missing))?;
                }
                Ok(())
            }
            Self::BtsRecordCount {
                line,
                cpu,
                seq,
                shown,
                found,
                missing,
            } => {
                write!(
                    f,
                    "line {line}: the BTS history of snapshot cpu={cpu} seq={seq} announced {shown} record lines, {found} were found"
                )?;
                if !missing.is_empty() {
                    write!(f, " (BTS records {} missing)", ranges_text(missing))?;
                }
                Ok(())
            }
            Self::Fragment {
                line,
                end,
                kept,
                span,
                missing,
                bts_records,
                pstore,
            } => {
                match end {
                    Some((cpu, seq)) => write!(
                        f,
                        "line {line}: snapshot cpu={cpu} seq={seq} is cut: the log starts inside it (its header line is not in the log): "
                    )?,
                    None => write!(
                        f,
                        "line {line}: record lines of a snapshot whose header and end lines are not in the log (cpu and seq unknown): "
                    )?,
                }
                match span {
                    None => write!(f, "none of its records is in the log")?,
                    Some(span) => write!(
                        f,
                        "{}, {kept} kept ({})",
                        lost_text(missing),
                        ranges_text(std::slice::from_ref(span))
                    )?,
                }
                if *bts_records > 0 {
                    write!(
                        f,
                        "; {bts_records} BTS record lines, not used (their bts line is not in the log)"
                    )?;
                }
                write!(f, "{}", pstore_note(*pstore))
            }
            Self::SecondLer {
                line,
                cpu,
                seq,
                first,
            } => write!(
                f,
                "line {line}: a second last exception record line in snapshot cpu={cpu} seq={seq} (the first, line {first}, is kept)"
            ),
            Self::Rewritten { line, cpu, seq } => write!(
                f,
                "line {line}: snapshot cpu={cpu} seq={seq} was rewritten while lbr-dump printed it (a newer capture on CPU {cpu} took its slot or its BTS buffer): its records may mix two snapshots"
            ),
            Self::EndInside {
                line,
                cpu,
                seq,
                inside: (in_cpu, in_seq),
            } => write!(
                f,
                "line {line}: end of cpu={cpu} seq={seq} inside snapshot cpu={in_cpu} seq={in_seq}"
            ),
            Self::SecondBts {
                line,
                cpu,
                seq,
                first,
            } => write!(
                f,
                "line {line}: a second BTS line for snapshot cpu={cpu} seq={seq} (the first, line {first}, is kept; this one and its record lines are not used)"
            ),
            Self::BtsInside {
                line,
                cpu,
                seq,
                inside: (in_cpu, in_seq),
            } => write!(
                f,
                "line {line}: the BTS history of cpu={cpu} seq={seq} inside snapshot cpu={in_cpu} seq={in_seq}: not used"
            ),
            Self::BtsWithoutSnapshot { line, cpu, seq } => write!(
                f,
                "line {line}: the BTS history of cpu={cpu} seq={seq}, whose snapshot's header line is not in the log: not used"
            ),
            Self::BtsRecordsNotKept {
                line,
                cpu,
                seq,
                state,
            } => write!(
                f,
                "line {line}: BTS record lines after the BTS line of snapshot cpu={cpu} seq={seq} that says state={state}: not used"
            ),
            Self::BtsRecordsWithoutHead { line, cpu, seq } => write!(
                f,
                "line {line}: BTS record lines in snapshot cpu={cpu} seq={seq} without its BTS line (cut or damaged?): not used"
            ),
        }
    }
}

/// What is open while the lines of a log are read.
enum Open {
    /// A snapshot whose header was seen.
    Snapshot(Box<Snapshot>),
    /// Record lines with no header before them.
    Fragment(Fragment),
}

/// The note that ends a warning about a snapshot cut in a log that is a pstore record
/// (`pstore`), if it is one.
fn pstore_note(pstore: bool) -> &'static str {
    if pstore {
        " (a pstore record holds only the newest text of the log that fits its size: see Documentation/lbr-dump/formats.rst \"How much a crash prints\" for record sizes that hold whole snapshots)"
    } else {
        ""
    }
}

/// Reads the lines of a log, in order, into what the log holds ([`Parsed`]). Between lines it
/// keeps the snapshot open (its header seen, its end line not yet) or the fragment (record
/// lines with no header before them); a header, an end line or the log's end closes it.
/// [`parse_log`] runs it over a whole text.
pub struct LogParser {
    /// The log is a pstore dmesg record ([`pstore_header`]): warnings about snapshots cut by
    /// the log's ends say why that happens.
    pstore: bool,
    /// The snapshot or fragment open.
    open: Option<Open>,
    /// BTS record lines that follow a `bts` line not used (another snapshot's, a second one)
    /// are not used either, without a warning each.
    bts_skip: bool,
    /// What was read so far.
    out: Parsed,
}

impl LogParser {
    /// A parser for a log; `pstore`: the log is a pstore dmesg record.
    pub fn new(pstore: bool) -> Self {
        LogParser {
            pstore,
            open: None,
            bts_skip: false,
            out: Parsed::default(),
        }
    }

    /// Reads line `n` (1-based) of the log: `raw` as it is in the log, with any prefix and CR.
    pub fn line(&mut self, n: usize, raw: &str) {
        let Some(p) = payload(raw) else { return };
        if p[PREFIX.len()..].starts_with("bts ") {
            self.bts_line(p, n);
            return;
        }
        match parse(p) {
            Some(Line::Header(h)) => {
                self.bts_skip = false;
                self.close(CutBy::NextSnapshot);
                self.open = Some(Open::Snapshot(Box::new(Snapshot {
                    cpu: h.cpu,
                    seq: h.seq,
                    vector: h.vector,
                    error: h.error,
                    rip: h.rip,
                    cr2: h.cr2,
                    flavour: h.flavour.to_string(),
                    format: h.format,
                    state: h.state,
                    nest: h.nest,
                    filter: h.filter,
                    announced: h.records,
                    records: Vec::new(),
                    ler: None,
                    bts: None,
                    complete: false,
                    rewritten: false,
                    line: n,
                })));
            }
            Some(Line::Record {
                record,
                from_sym,
                to_sym,
            }) => self.record(Record {
                index: record.index,
                branch: record.branch,
                from_sym: from_sym.map(str::to_string),
                to_sym: to_sym.map(str::to_string),
                line: n,
            }),
            Some(Line::Ler {
                ler,
                from_sym,
                to_sym,
            }) => self.ler(LastException {
                from: ler.from,
                to: ler.to,
                from_sym: from_sym.map(str::to_string),
                to_sym: to_sym.map(str::to_string),
                line: n,
            }),
            Some(Line::End(e)) => self.end(n, e.cpu, e.seq, e.rewritten),
            Some(Line::None { cpu, reason }) => self.out.none.push(NoSnapshot {
                cpu,
                reason: reason.to_string(),
                line: n,
            }),
            Some(Line::Kept { cpu, text }) => self.out.kept.push(NoSnapshot {
                cpu,
                reason: text.to_string(),
                line: n,
            }),
            None => {
                // Other lbr_dump messages (the load line, "armed") are not snapshot lines; a
                // snapshot line that does not parse was damaged or cut.
                let rest = &p[PREFIX.len()..];
                if lbr_core::report::strip_version(rest).is_some()
                    || rest.starts_with('#')
                    || rest.starts_with("ler ")
                    || rest.starts_with("end ")
                {
                    self.damaged(n, p);
                }
            }
        }
    }

    /// What the log holds, once every line is read: a snapshot or fragment still open is cut
    /// by the log's end.
    pub fn finish(mut self) -> Parsed {
        self.close(CutBy::LogEnd);
        self.out
    }

    fn warn(&mut self, w: LogWarning) {
        self.out.warnings.push(w);
    }

    /// Snapshot line `p` at line `n` does not parse.
    fn damaged(&mut self, n: usize, p: &str) {
        self.warn(LogWarning::Damaged {
            line: n,
            text: p.to_string(),
        });
    }

    /// A record line: the open snapshot's or fragment's, or the first of a fragment.
    fn record(&mut self, r: Record) {
        match &mut self.open {
            Some(Open::Snapshot(s)) => s.records.push(r),
            Some(Open::Fragment(f)) => f.records.push(r),
            None => {
                self.open = Some(Open::Fragment(Fragment {
                    end: None,
                    line: r.line,
                    records: vec![r],
                    bts_records: 0,
                }))
            }
        }
    }

    /// A `ler` line: the open snapshot's, unless it has one.
    fn ler(&mut self, l: LastException) {
        match &mut self.open {
            Some(Open::Snapshot(s)) if s.ler.is_none() => s.ler = Some(l),
            Some(Open::Snapshot(s)) => {
                let w = LogWarning::SecondLer {
                    line: l.line,
                    cpu: s.cpu,
                    seq: s.seq,
                    first: s.ler.as_ref().map_or(0, |l| l.line),
                };
                self.warn(w);
            }
            // In a fragment (its header lost), like its records, it is not printed.
            Some(Open::Fragment(_)) | None => {}
        }
    }

    /// The end line of snapshot `cpu`, `seq`, at line `n`: closes what is open.
    fn end(&mut self, n: usize, cpu: u32, seq: u64, rewritten: bool) {
        if self.open.is_some() {
            self.bts_skip = false;
        }
        if rewritten {
            self.warn(LogWarning::Rewritten { line: n, cpu, seq });
        }
        match self.open.take() {
            Some(Open::Snapshot(mut s)) if s.cpu == cpu && s.seq == seq => {
                s.complete = true;
                s.rewritten = rewritten;
                self.close_snapshot(*s, CutBy::NextSnapshot);
            }
            Some(Open::Snapshot(s)) => {
                self.warn(LogWarning::EndInside {
                    line: n,
                    cpu,
                    seq,
                    inside: (s.cpu, s.seq),
                });
                self.close_snapshot(*s, CutBy::NextSnapshot);
            }
            Some(Open::Fragment(mut f)) => {
                f.end = Some((cpu, seq));
                self.close_fragment(f);
            }
            None => self.close_fragment(Fragment {
                end: Some((cpu, seq)),
                records: Vec::new(),
                bts_records: 0,
                line: n,
            }),
        }
    }

    /// Closes what is open, if anything; `cut_by`: what follows it, for a snapshot without
    /// its end line.
    fn close(&mut self, cut_by: CutBy) {
        match self.open.take() {
            Some(Open::Snapshot(s)) => self.close_snapshot(*s, cut_by),
            Some(Open::Fragment(f)) => self.close_fragment(f),
            None => {}
        }
    }

    /// Adds `s` to the snapshots, with a warning if its end line is not in the log (`cut_by`
    /// follows its last line) or records announced are not.
    fn close_snapshot(&mut self, s: Snapshot, cut_by: CutBy) {
        let gone = missing(&s.records, s.announced);
        if !s.complete {
            self.warn(LogWarning::NoEnd {
                line: s.line,
                cpu: s.cpu,
                seq: s.seq,
                cut_by,
                kept: s.records.len(),
                announced: s.announced,
                missing: gone,
                pstore: self.pstore,
            });
        } else if s.records.len() != s.announced as usize || !gone.is_empty() {
            self.warn(LogWarning::RecordCount {
                line: s.line,
                cpu: s.cpu,
                seq: s.seq,
                announced: s.announced,
                found: s.records.len(),
                missing: gone,
            });
        }
        if let Some(Bts {
            state: BtsState::Kept {
                shown: Some(shown), ..
            },
            records,
            line,
        }) = &s.bts
        {
            let gone = missing(records, *shown);
            if records.len() != *shown as usize || !gone.is_empty() {
                self.warn(LogWarning::BtsRecordCount {
                    line: *line,
                    cpu: s.cpu,
                    seq: s.seq,
                    shown: *shown,
                    found: records.len(),
                    missing: gone,
                });
            }
        }
        self.out.snapshots.push(s);
    }

    /// Adds `f` to the fragments, with its warning.
    fn close_fragment(&mut self, f: Fragment) {
        let span = match (f.records.first(), f.records.last()) {
            (Some(first), Some(last)) => Some(first.index..=last.index),
            _ => None,
        };
        self.warn(LogWarning::Fragment {
            line: f.line,
            end: f.end,
            kept: f.records.len(),
            span,
            missing: f.missing(),
            bts_records: f.bts_records,
            pstore: self.pstore,
        });
        self.out.fragments.push(f);
    }

    /// One `bts` line (`p`, at line `n`): a head line goes to the open snapshot if it is that
    /// snapshot's (same cpu and seq, the first one), its record lines after it; anything else
    /// is a warning naming the line, and the record lines after a head line not used are
    /// skipped. Record lines with no snapshot open start a fragment (the log starts inside
    /// the BTS history), counted.
    fn bts_line(&mut self, p: &str, n: usize) {
        match parse_line(&p[PREFIX.len()..]) {
            None => self.damaged(n, p),
            Some(BtsLine::Head { cpu, seq, state }) => self.bts_head(n, cpu, seq, state),
            Some(BtsLine::Record {
                index,
                from,
                to,
                from_sym,
                to_sym,
            }) => {
                if self.bts_skip {
                    return;
                }
                self.bts_record(Record {
                    index,
                    branch: Branch {
                        from,
                        to,
                        ..Branch::default()
                    },
                    from_sym: from_sym.map(str::to_string),
                    to_sym: to_sym.map(str::to_string),
                    line: n,
                });
            }
        }
    }

    /// A `bts` head line of snapshot `cpu`, `seq` at line `n`.
    fn bts_head(&mut self, n: usize, cpu: u32, seq: u64, state: BtsState) {
        self.bts_skip = true;
        let w = match &mut self.open {
            Some(Open::Snapshot(s)) if (s.cpu, s.seq) == (cpu, seq) => match &s.bts {
                None => {
                    s.bts = Some(Bts {
                        state,
                        records: Vec::new(),
                        line: n,
                    });
                    self.bts_skip = false;
                    return;
                }
                Some(first) => LogWarning::SecondBts {
                    line: n,
                    cpu,
                    seq,
                    first: first.line,
                },
            },
            Some(Open::Snapshot(s)) => LogWarning::BtsInside {
                line: n,
                cpu,
                seq,
                inside: (s.cpu, s.seq),
            },
            Some(Open::Fragment(_)) | None => LogWarning::BtsWithoutSnapshot { line: n, cpu, seq },
        };
        self.warn(w);
    }

    /// A BTS record line, not skipped.
    fn bts_record(&mut self, r: Record) {
        let w = match &mut self.open {
            Some(Open::Snapshot(s)) => match &mut s.bts {
                Some(b) if matches!(b.state, BtsState::Kept { .. }) => {
                    b.records.push(r);
                    return;
                }
                Some(b) => LogWarning::BtsRecordsNotKept {
                    line: r.line,
                    cpu: s.cpu,
                    seq: s.seq,
                    state: b.state.name(),
                },
                None => LogWarning::BtsRecordsWithoutHead {
                    line: r.line,
                    cpu: s.cpu,
                    seq: s.seq,
                },
            },
            Some(Open::Fragment(f)) => {
                f.bts_records += 1;
                return;
            }
            None => {
                self.open = Some(Open::Fragment(Fragment {
                    end: None,
                    records: Vec::new(),
                    bts_records: 1,
                    line: r.line,
                }));
                return;
            }
        };
        self.warn(w);
        self.bts_skip = true;
    }
}

/// Parses every lbr-dump line of a log.
pub fn parse_log(text: &str) -> Parsed {
    let mut parser = LogParser::new(pstore_header(text).is_some());
    for (n, raw) in text.split('\n').enumerate() {
        parser.line(n + 1, raw);
    }
    parser.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warnings' texts.
    fn texts(warnings: &[LogWarning]) -> Vec<String> {
        warnings.iter().map(ToString::to_string).collect()
    }

    const HEAD: &str = "lbr_dump: v1 cpu=1 seq=7 vector=14 (#PF) error=0x2 rip=0xffffffff81537fe9 cr2=0x0 flavour=intel-lbr format=5 records=2 state=complete";
    const R0: &str = "lbr_dump: #0 0xffffffff81537fe9 -> 0xffffffffc0408be0 cycles=0 | lkdtm_EXCEPTION+0x9/0x20 -> lbr_dump_stub_14+0x0/0x1e0 [lbr_dump]";
    const R1: &str = "lbr_dump: #1 0xffffffff815a8eea -> 0xffffffff81537fe0 mispred cycles=2 | __x86_indirect_thunk_r11+0xa/0x20 -> lkdtm_EXCEPTION+0x0/0x20";
    const END: &str = "lbr_dump: end cpu=1 seq=7";

    #[test]
    fn a_snapshot_rewritten_while_printed_is_said() {
        let log = format!("{HEAD}\n{R0}\n{R1}\n{END} rewritten\n");
        let p = parse_log(&log);
        let [s] = &p.snapshots[..] else {
            panic!("{:?}", p.snapshots)
        };
        assert!(s.complete && s.rewritten && s.records.len() == 2);
        assert_eq!(
            texts(&p.warnings),
            ["line 4: snapshot cpu=1 seq=7 was rewritten while lbr-dump printed it (a newer capture on CPU 1 took its slot or its BTS buffer): its records may mix two snapshots"]
        );
        // Without the word: neither.
        let p = parse_log(&format!("{HEAD}\n{R0}\n{R1}\n{END}\n"));
        assert!(!p.snapshots[0].rewritten && p.warnings.is_empty());
    }

    #[test]
    fn prefixes_and_crlf() {
        let log = [
            format!("[   12.345678] {HEAD}\r"),
            format!("<4>[   12.345678] {R0}\r"),
            format!("Nov 23 09:12:01 host kernel: {R1}\r"),
            format!("2026-11-23T09:12:01Z ci | {END}\r"),
        ]
        .join("\n");
        let p = parse_log(&log);
        assert_eq!(texts(&p.warnings), Vec::<String>::new());
        assert_eq!(p.snapshots.len(), 1);
        let s = &p.snapshots[0];
        assert!(s.complete);
        assert_eq!((s.cpu, s.seq, s.vector), (1, 7, 14));
        assert_eq!(s.records.len(), 2);
        assert_eq!(s.records[1].branch.mispred, Some(true));
        assert_eq!(
            s.records[0].to_sym.as_deref(),
            Some("lbr_dump_stub_14+0x0/0x1e0 [lbr_dump]")
        );
    }

    /// The last exception record's line, after the records, belongs to its snapshot; a second
    /// one is a warning, a cut one is damaged.
    #[test]
    fn last_exception_record_is_read() {
        const LER: &str = "lbr_dump: ler 0xffffffff815a8eea -> 0xffffffff81537fe0 | __x86_indirect_thunk_r11+0xa/0x20 -> lkdtm_EXCEPTION+0x0/0x20";
        let p = parse_log(&format!("{HEAD}\n{R0}\n{R1}\n[ 1.5] {LER}\r\n{END}\n"));
        assert_eq!(texts(&p.warnings), Vec::<String>::new());
        let [s] = &p.snapshots[..] else {
            panic!("{p:?}")
        };
        assert!(s.complete && s.records.len() == 2);
        assert_eq!(
            s.ler,
            Some(LastException {
                from: 0xffff_ffff_815a_8eea,
                to: 0xffff_ffff_8153_7fe0,
                from_sym: Some("__x86_indirect_thunk_r11+0xa/0x20".into()),
                to_sym: Some("lkdtm_EXCEPTION+0x0/0x20".into()),
                line: 4,
            })
        );
        // None printed: none.
        assert_eq!(
            parse_log(&format!("{HEAD}\n{R0}\n{R1}\n{END}\n")).snapshots[0].ler,
            None
        );
        let p = parse_log(&format!("{HEAD}\n{R0}\n{R1}\n{LER}\n{LER}\n{END}\n"));
        assert_eq!(p.snapshots[0].ler.as_ref().map(|l| l.line), Some(4));
        assert_eq!(texts(&p.warnings), ["line 5: a second last exception record line in snapshot cpu=1 seq=7 (the first, line 4, is kept)"]);
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\nlbr_dump: ler 0xffffffff815a8eea -> 0xffff\n{END}\n"
        ));
        assert_eq!(p.snapshots[0].ler, None);
        assert!(
            p.warnings[0]
                .to_string()
                .starts_with("line 4: damaged or cut snapshot line"),
            "{:?}",
            p.warnings
        );
    }

    const BTS_HEAD: &str = "lbr_dump: bts cpu=1 seq=7 records=2048 shown=2 wrapped=yes buffer=0xffff888001000000 size=1048576 state=kept";
    const BTS0: &str = "lbr_dump: bts #0 0xffffffff8342f4e9 -> 0xffffffffc040e9f0 | lkdtm_EXCEPTION+0x9/0x20 -> lbr_dump_stub_14+0x0/0x200 [lbr_dump]";
    const BTS1: &str = "lbr_dump: bts #1 0xffffffff834c3f6a -> 0xffffffff8342f4e0 | __pi___x86_indirect_thunk_r11+0xa/0x20 -> lkdtm_EXCEPTION+0x0/0x20";

    /// The BTS lines after the records belong to their snapshot: the head line's state and
    /// counts, each record with its symbols and line.
    #[test]
    fn bts_history_is_read() {
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\n[ 1.5] {BTS_HEAD}\r\n{BTS0}\n{BTS1}\n{END}\n"
        ));
        assert_eq!(texts(&p.warnings), Vec::<String>::new());
        let [s] = &p.snapshots[..] else {
            panic!("{p:?}")
        };
        assert_eq!(s.records.len(), 2, "the LBR records are the records");
        let b = s.bts.as_ref().expect("a BTS history");
        assert_eq!(b.line, 4);
        assert_eq!(
            b.state,
            BtsState::Kept {
                total: 2048,
                wrapped: true,
                buffer: 0xffff_8880_0100_0000,
                size: 1_048_576,
                phys: None,
                shown: Some(2)
            }
        );
        assert_eq!(
            b.records
                .iter()
                .map(|r| (r.index, r.branch.from, r.branch.to, r.line))
                .collect::<Vec<_>>(),
            [
                (0, 0xffff_ffff_8342_f4e9, 0xffff_ffff_c040_e9f0, 5),
                (1, 0xffff_ffff_834c_3f6a, 0xffff_ffff_8342_f4e0, 6)
            ]
        );
        assert_eq!(
            b.records[0].to_sym.as_deref(),
            Some("lbr_dump_stub_14+0x0/0x200 [lbr_dump]")
        );
        // Without BTS lines: none.
        assert_eq!(
            parse_log(&format!("{HEAD}\n{R0}\n{R1}\n{END}\n")).snapshots[0].bts,
            None
        );
        // Another owner's debug store: the head line alone.
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\nlbr_dump: bts cpu=1 seq=7 state=foreign ds_area=0xfffffe0000001000\n{END}\n"
        ));
        assert_eq!(texts(&p.warnings), Vec::<String>::new());
        assert_eq!(
            p.snapshots[0].bts.as_ref().map(|b| &b.state),
            Some(&BtsState::Foreign {
                ds_area: 0xffff_fe00_0000_1000
            })
        );
    }

    /// A cut BTS line is damaged (named), and the history then lacks that record; a cut head
    /// line leaves its record lines without a head.
    #[test]
    fn cut_bts_lines_are_reported() {
        let cut = "lbr_dump: bts #1 0xffffffff834c3f6a -> 0xffffffff834";
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\n{BTS_HEAD}\n{BTS0}\n{cut}\n{END}\n"
        ));
        assert_eq!(
            texts(&p.warnings),
            [
                format!("line 6: damaged or cut snapshot line: {cut:?}"),
                "line 4: the BTS history of snapshot cpu=1 seq=7 announced 2 record lines, 1 were found (BTS records #1 missing)".to_string()
            ]
        );
        assert_eq!(p.snapshots[0].bts.as_ref().unwrap().records.len(), 1);
        assert!(p.snapshots[0].complete);
        let head = "lbr_dump: bts cpu=1 seq=7 records=2048 shown=2 wrapped=yes buffer=0xffff888001000000 size=10485";
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\n{head}\n{BTS0}\n{BTS1}\n{END}\n"
        ));
        assert_eq!(
            texts(&p.warnings),
            [
                format!("line 4: damaged or cut snapshot line: {head:?}"),
                "line 5: BTS record lines in snapshot cpu=1 seq=7 without its BTS line (cut or damaged?): not used".to_string()
            ]
        );
        assert_eq!(p.snapshots[0].bts, None);
        assert_eq!(p.snapshots[0].records.len(), 2);
    }

    /// BTS lines of a snapshot that is not the one open, or with none open, are not used, with
    /// one warning for the head line (none for each of its record lines).
    #[test]
    fn bts_lines_of_an_unknown_snapshot_are_not_used() {
        let other = BTS_HEAD.replace("seq=7", "seq=8");
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\n{other}\n{BTS0}\n{BTS1}\n{END}\n"
        ));
        assert_eq!(
            texts(&p.warnings),
            ["line 4: the BTS history of cpu=1 seq=8 inside snapshot cpu=1 seq=7: not used"]
        );
        assert_eq!(p.snapshots[0].bts, None);
        // A second head line for the same snapshot.
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\n{BTS_HEAD}\n{BTS0}\n{BTS1}\n{BTS_HEAD}\n{BTS0}\n{END}\n"
        ));
        assert_eq!(
            texts(&p.warnings),
            ["line 7: a second BTS line for snapshot cpu=1 seq=7 (the first, line 4, is kept; this one and its record lines are not used)"]
        );
        assert_eq!(p.snapshots[0].bts.as_ref().unwrap().records.len(), 2);
        // No snapshot open: after its end line, or a log that starts there.
        let p = parse_log(&format!("{HEAD}\n{R0}\n{R1}\n{END}\n{BTS_HEAD}\n{BTS0}\n"));
        assert_eq!(
            texts(&p.warnings),
            ["line 5: the BTS history of cpu=1 seq=7, whose snapshot's header line is not in the log: not used"]
        );
        assert_eq!(p.snapshots[0].bts, None);
        let p = parse_log(&format!("Oops#1 Part1\n{BTS0}\n{BTS1}\n{END}\n"));
        assert_eq!(p.fragments.len(), 1);
        assert_eq!(p.fragments[0].bts_records, 2);
        assert!(
            p.warnings[0].to_string().starts_with("line 2: snapshot cpu=1 seq=7 is cut: the log starts inside it (its header line is not in the log): none of its records is in the log; 2 BTS record lines, not used (their bts line is not in the log)"),
            "{:?}",
            p.warnings
        );
        // Record lines after a head line that says none were kept.
        let p = parse_log(&format!(
            "{HEAD}\n{R0}\n{R1}\nlbr_dump: bts cpu=1 seq=7 state=reused owner=9\n{BTS0}\n{BTS1}\n{END}\n"
        ));
        assert_eq!(
            texts(&p.warnings),
            ["line 5: BTS record lines after the BTS line of snapshot cpu=1 seq=7 that says state=reused: not used"]
        );
        assert_eq!(
            p.snapshots[0]
                .bts
                .as_ref()
                .map(|b| (&b.state, b.records.len())),
            Some((&BtsState::Reused { owner: 9 }, 0))
        );
    }

    #[test]
    fn nesting_labels_are_read() {
        // The oopsing exception's snapshot (nest=0), then the one it interrupted (nest=1); an
        // older module's header without the label reads as unlabelled.
        let outer = "lbr_dump: v1 cpu=1 seq=6 vector=13 (#GP) error=0x0 rip=0xffffffff81537fe0 cr2=0x0 flavour=intel-lbr format=5 records=0 state=complete nest=1";
        let log = [
            format!("{HEAD} nest=0"),
            R0.to_string(),
            R1.to_string(),
            END.to_string(),
            outer.to_string(),
            "lbr_dump: end cpu=1 seq=6".to_string(),
            HEAD.to_string(),
            END.to_string(),
        ]
        .join("\n");
        let p = parse_log(&log);
        let nests: Vec<_> = p.snapshots.iter().map(|s| (s.seq, s.nest)).collect();
        assert_eq!(nests, [(7, Some(0)), (6, Some(1)), (7, None)]);
    }

    #[test]
    fn cut_log_is_reported() {
        let log = format!("{HEAD}\n{R0}\nlbr_dump: #1 0xffffffff815a8eea -> 0xfff");
        let p = parse_log(&log);
        assert_eq!(p.snapshots.len(), 1);
        assert!(!p.snapshots[0].complete);
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(p.warnings[0]
            .to_string()
            .starts_with("line 3: damaged or cut snapshot line"));
        assert!(p.warnings[1].to_string().contains("has no end line"));
        assert!(
            matches!(
                &p.warnings[..],
                [
                    LogWarning::Damaged { line: 3, .. },
                    LogWarning::NoEnd {
                        line: 1,
                        cut_by: CutBy::LogEnd,
                        kept: 1,
                        announced: 2,
                        pstore: false,
                        ..
                    }
                ]
            ),
            "{:?}",
            p.warnings
        );
    }

    /// Bounded output (print_records, print_all): a snapshot that prints 2 of its records, then
    /// its `kept:` line, and a stopped CPU's `kept:` line at a panic: read as they are, no
    /// warning, and the printed records make a whole snapshot.
    #[test]
    fn kept_lines_are_no_damage() {
        let log = format!(
            "{}\n{R0}\n{R1}\n{END}\nlbr_dump: v2 cpu=1 kept: seq=7 records #2-#31 are not printed, only kept in memory\nlbr_dump: v2 cpu=0 kept: seq=8 vector=248 (REBOOT_VECTOR) rip=0xffffffff81234567 records=32 state=complete | at=default_idle+0x1f/0x30\n",
            HEAD.replace("v1 ", "v2 ")
        );
        let p = parse_log(&log);
        assert_eq!(texts(&p.warnings), Vec::<String>::new());
        assert_eq!(p.snapshots.len(), 1);
        assert_eq!(p.snapshots[0].records.len(), 2);
        assert_eq!(
            p.kept.iter().map(|k| (k.cpu, k.line)).collect::<Vec<_>>(),
            [(1, 5), (0, 6)]
        );
        assert!(p.kept[1].reason.ends_with("| at=default_idle+0x1f/0x30"));
    }

    #[test]
    fn several_crashes_and_none_lines() {
        let log = format!("{HEAD}\n{R0}\n{R1}\n{END}\nlbr_dump: v1 cpu=0 none: no snapshot of this oops\n{}\n{R0}\n{R1}\nlbr_dump: end cpu=2 seq=9\n", HEAD.replace("cpu=1 seq=7", "cpu=2 seq=9"));
        let p = parse_log(&log);
        assert_eq!(texts(&p.warnings), Vec::<String>::new());
        assert_eq!(
            p.snapshots
                .iter()
                .map(|s| (s.cpu, s.seq))
                .collect::<Vec<_>>(),
            [(1, 7), (2, 9)]
        );
        assert_eq!(p.none.len(), 1);
        assert_eq!(p.none[0].reason, "no snapshot of this oops");
    }

    #[test]
    fn garbage_is_ignored_and_orphans_reported() {
        let p = parse_log("\u{0}\u{1}binary junk\nlbr_dump: armed: vectors 14(#PF)\n");
        assert_eq!(p, Parsed::default());
        let p = parse_log(R0);
        assert_eq!(texts(&p.warnings), ["line 1: record lines of a snapshot whose header and end lines are not in the log (cpu and seq unknown): no record missing, 1 kept (#0)"]);
    }

    /// A log that starts inside a snapshot (its header and newest records gone): the records
    /// kept are given, and the warning names the ones missing.
    #[test]
    fn log_starting_inside_a_snapshot() {
        let r = |i: u32| R1.replacen("#1 ", &format!("#{i} "), 1);
        let log = format!(
            "Oops#1 Part1\n<3>[ 1.0] {}\n{}\n{}\n{END}\n",
            r(12),
            r(13),
            r(15)
        );
        let p = parse_log(&log);
        assert!(p.snapshots.is_empty());
        let [f] = &p.fragments[..] else {
            panic!("{p:?}")
        };
        assert_eq!(f.end, Some((1, 7)));
        assert_eq!(
            f.records.iter().map(|r| r.index).collect::<Vec<_>>(),
            [12, 13, 15]
        );
        assert_eq!(f.missing(), [0..=11, 14..=14]);
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(
            p.warnings[0].to_string().starts_with("line 2: snapshot cpu=1 seq=7 is cut: the log starts inside it (its header line is not in the log): records #0-#11, #14 missing, 3 kept (#12-#15) (a pstore record holds only"),
            "{}",
            p.warnings[0]
        );
        // Only the end line left: every record is gone.
        let p = parse_log(&format!("{END}\n"));
        assert_eq!(texts(&p.warnings), ["line 1: snapshot cpu=1 seq=7 is cut: the log starts inside it (its header line is not in the log): none of its records is in the log"]);
    }

    /// A log that ends inside a snapshot names the records after the last one kept.
    #[test]
    fn log_ending_inside_a_snapshot_names_the_missing() {
        let head = HEAD.replace("records=2", "records=32");
        let p = parse_log(&format!("{head}\n{R0}\n{R1}\n"));
        assert_eq!(texts(&p.warnings), ["line 1: snapshot cpu=1 seq=7 has no end line: the log is cut, the log ends inside it (kept 2 of 32 records; records #2-#31 missing)"]);
        // Cut by the next snapshot, and an end line with a record lost in between.
        let p = parse_log(&format!("{head}\n{R0}\n{HEAD}\n{R0}\n{END}\n"));
        assert_eq!(texts(&p.warnings), [
            "line 1: snapshot cpu=1 seq=7 has no end line: the log is cut, another snapshot's line follows (kept 1 of 32 records; records #1-#31 missing)",
            "line 3: snapshot cpu=1 seq=7 announced 2 records, 1 were found (records #1 missing)",
        ]);
    }

    #[test]
    fn pstore_headers() {
        assert_eq!(
            pstore_header("Panic#2 Part1\n<0>[    4.2] Kernel panic"),
            Some(PstoreHeader {
                reason: "Panic".into(),
                count: 2,
                part: 1
            })
        );
        assert_eq!(pstore_header("Oops#1 Part3\r\nx").map(|h| h.part), Some(3));
        for no in [
            "",
            "Oops#1 Part",
            "Oops#x Part1",
            "#1 Part1",
            "Oops#1 Part1 x",
            "[ 1.0] Oops#1 Part1",
        ] {
            assert_eq!(pstore_header(no), None, "{no:?}");
        }
    }

    /// Real ramoops records of the test VM (tests/scenarios/pstore.py, pstore.compress=none,
    /// ramoops.record_size=4096, a crash=jump oops under oops=panic): the Oops record starts
    /// inside the snapshot at record #4, the Panic record (the oops and the panic after it) at
    /// #13; both end with the ramoops header's 24 bytes cut from their newest text.
    #[test]
    fn real_ramoops_records_cut_at_the_head() {
        let oops = parse_log(include_str!(
            "../tests/fixtures/pstore/oops-4096-uncompressed"
        ));
        assert!(oops.snapshots.is_empty());
        let [f] = &oops.fragments[..] else {
            panic!("{oops:?}")
        };
        assert_eq!(f.end, Some((0, 1)));
        assert_eq!(f.missing(), [0..=3]);
        assert_eq!(f.records.len(), 28);
        assert_eq!(f.records[0].branch.from, 0xffffffffc04112da);
        assert!(oops.warnings[0].to_string().contains("cpu=0 seq=1 is cut: the log starts inside it (its header line is not in the log): records #0-#3 missing, 28 kept (#4-#31)"), "{:?}", oops.warnings);
        let panic = parse_log(include_str!(
            "../tests/fixtures/pstore/panic-4096-uncompressed"
        ));
        let [f] = &panic.fragments[..] else {
            panic!("{panic:?}")
        };
        assert_eq!(f.missing(), [0..=12]);
        // The none line is cut by the ramoops header; what is left still parses as one.
        assert_eq!(panic.none.len(), 1);
    }

    /// A whole snapshot in a real (decompressed) ramoops record: the record's header line and
    /// the `<N>` levels of kmsg_dump's syslog format are no obstacle.
    #[test]
    fn real_ramoops_record_holds_the_snapshot() {
        let text = include_str!("../tests/fixtures/pstore/oops-16384-deflate");
        assert_eq!(
            pstore_header(text).map(|h| (h.reason, h.count, h.part)),
            Some(("Oops".into(), 1, 1))
        );
        let p = parse_log(text);
        assert_eq!(texts(&p.warnings), Vec::<String>::new());
        let [s] = &p.snapshots[..] else {
            panic!("{p:?}")
        };
        assert!(s.complete && s.records.len() == 32 && s.announced == 32);
        assert_eq!((s.cpu, s.seq, s.vector, s.line), (0, 1, 14, 323));
    }

    proptest::proptest! {
        /// Any bytes: no panic, and every warning names a line.
        #[test]
        fn any_text_is_survived(s in "(lbr_dump: (v1 |#|end |bts |bts #)?)?[\\PC\\r\\n]{0,300}") {
            for w in parse_log(&s).warnings {
                let line = format!("line {}: ", w.line());
                proptest::prop_assert!(w.to_string().starts_with(&line), "{}", w);
            }
        }

        /// A snapshot survives any prefixes and noise lines between its lines.
        #[test]
        fn snapshot_survives_decorations(pre in proptest::collection::vec("[ -~]{0,30}", 4),
                                         noise in proptest::collection::vec("[ -~&&[^l]]{0,40}", 4)) {
            let lines = [HEAD, R0, R1, END];
            let log: String = lines
                .iter()
                .zip(&pre)
                .zip(&noise)
                .map(|((l, p), n)| format!("{n}\n{p}{l}\n"))
                .collect();
            let p = parse_log(&log);
            proptest::prop_assert_eq!(p.snapshots.len(), 1);
            proptest::prop_assert!(p.snapshots[0].complete);
            proptest::prop_assert_eq!(p.snapshots[0].records.len(), 2);
        }
    }
}
