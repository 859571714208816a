// SPDX-License-Identifier: GPL-2.0

//! Finding lbr-dump's snapshots in kernel log text.
//!
//! The lines themselves are parsed by the module's own code (`lbr_core::report::parse`), so
//! printer and reader cannot drift. This file only finds them: a line may carry any prefix
//! (printk timestamps, `<N>` levels, syslog or journal prefixes, CI decorations), end in CRLF, be
//! cut by a console, and come from several CPUs and several crashes in one file.

use lbr_core::record::Branch;
use lbr_core::report::{parse, Line, State, PREFIX};

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
    /// Records the header announced.
    pub announced: u32,
    /// The records found.
    pub records: Vec<Record>,
    /// The end line was seen.
    pub complete: bool,
    /// Input line number of the header.
    pub line: usize,
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
    /// The oopses lbr-dump had no snapshot for.
    pub none: Vec<NoSnapshot>,
    /// Problems with the input, each naming its line.
    pub warnings: Vec<String>,
}

/// The part of a line from lbr-dump's prefix on, if it has one.
pub fn payload(line: &str) -> Option<&str> {
    let line = line.trim_end_matches(['\r', '\n']);
    line.find(PREFIX).map(|i| &line[i..])
}

/// Parses every lbr-dump line of a log.
pub fn parse_log(text: &str) -> Parsed {
    let mut out = Parsed::default();
    let mut open: Option<Snapshot> = None;
    let close = |s: Snapshot, out: &mut Parsed| {
        if !s.complete {
            out.warnings.push(format!(
                "line {}: snapshot cpu={} seq={} has no end line: the log is cut (kept {} of {} records)",
                s.line,
                s.cpu,
                s.seq,
                s.records.len(),
                s.announced
            ));
        } else if s.records.len() != s.announced as usize {
            out.warnings.push(format!(
                "line {}: snapshot cpu={} seq={} announced {} records, {} were found",
                s.line,
                s.cpu,
                s.seq,
                s.announced,
                s.records.len()
            ));
        }
        out.snapshots.push(s);
    };
    for (n, raw) in text.split('\n').enumerate() {
        let n = n + 1;
        let Some(p) = payload(raw) else { continue };
        match parse(p) {
            Some(Line::Header(h)) => {
                if let Some(s) = open.take() {
                    close(s, &mut out);
                }
                open = Some(Snapshot {
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
                    announced: h.records,
                    records: Vec::new(),
                    complete: false,
                    line: n,
                });
            }
            Some(Line::Record {
                record,
                from_sym,
                to_sym,
            }) => match &mut open {
                Some(s) => s.records.push(Record {
                    index: record.index,
                    branch: record.branch,
                    from_sym: from_sym.map(str::to_string),
                    to_sym: to_sym.map(str::to_string),
                    line: n,
                }),
                None => out
                    .warnings
                    .push(format!("line {n}: a record line outside any snapshot")),
            },
            Some(Line::End { cpu, seq }) => match open.take() {
                Some(mut s) if s.cpu == cpu && s.seq == seq => {
                    s.complete = true;
                    close(s, &mut out);
                }
                Some(s) => {
                    out.warnings.push(format!(
                        "line {n}: end of cpu={cpu} seq={seq} inside snapshot cpu={} seq={}",
                        s.cpu, s.seq
                    ));
                    close(s, &mut out);
                }
                None => out
                    .warnings
                    .push(format!("line {n}: an end line without its snapshot")),
            },
            Some(Line::None { cpu, reason }) => out.none.push(NoSnapshot {
                cpu,
                reason: reason.to_string(),
                line: n,
            }),
            None => {
                // Other lbr_dump messages (the load line, "armed") are not snapshot lines; a
                // snapshot line that does not parse was damaged or cut.
                let rest = &p[PREFIX.len()..];
                if rest.starts_with("v1 ") || rest.starts_with('#') || rest.starts_with("end ") {
                    out.warnings
                        .push(format!("line {n}: damaged or cut snapshot line: {p:?}"));
                }
            }
        }
    }
    if let Some(s) = open.take() {
        close(s, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "lbr_dump: v1 cpu=1 seq=7 vector=14 (#PF) error=0x2 rip=0xffffffff81537fe9 cr2=0x0 flavour=intel-lbr format=5 records=2 state=complete";
    const R0: &str = "lbr_dump: #0 0xffffffff81537fe9 -> 0xffffffffc0408be0 cycles=0 | lkdtm_EXCEPTION+0x9/0x20 -> lbr_dump_stub_14+0x0/0x1e0 [lbr_dump]";
    const R1: &str = "lbr_dump: #1 0xffffffff815a8eea -> 0xffffffff81537fe0 mispred cycles=2 | __x86_indirect_thunk_r11+0xa/0x20 -> lkdtm_EXCEPTION+0x0/0x20";
    const END: &str = "lbr_dump: end cpu=1 seq=7";

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
        assert_eq!(p.warnings, Vec::<String>::new());
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
        assert!(p.warnings[0].starts_with("line 3: damaged or cut snapshot line"));
        assert!(p.warnings[1].contains("has no end line"));
    }

    #[test]
    fn several_crashes_and_none_lines() {
        let log = format!("{HEAD}\n{R0}\n{R1}\n{END}\nlbr_dump: v1 cpu=0 none: no snapshot of this oops\n{}\n{R0}\n{R1}\nlbr_dump: end cpu=2 seq=9\n", HEAD.replace("cpu=1 seq=7", "cpu=2 seq=9"));
        let p = parse_log(&log);
        assert_eq!(p.warnings, Vec::<String>::new());
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
        assert_eq!(p.warnings, ["line 1: a record line outside any snapshot"]);
    }

    proptest::proptest! {
        /// Any bytes: no panic, and every warning names a line.
        #[test]
        fn any_text_is_survived(s in "(lbr_dump: (v1 |#|end )?)?[\\PC\\r\\n]{0,300}") {
            for w in parse_log(&s).warnings {
                proptest::prop_assert!(w.starts_with("line "), "{}", w);
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
