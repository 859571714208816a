// SPDX-License-Identifier: GPL-2.0

//! The four ways to print an [`Output`]: `--format text` ([`write_text`]: one aligned table per
//! snapshot, newest record first), `--format compact` ([`write_compact`]: oldest first, in
//! retsnoop's LBR style, inlined frames on continuation lines), `--format annotate`
//! ([`write_annotated`]: the input logs with each record line followed by its source locations,
//! the way scripts/decode_stacktrace.sh annotates stack traces) and `--format json`
//! ([`write_json`]). Text and compact print the records of one branch through a mitigation
//! thunk ([`crate::output::fold`]) as one line, marked, unless asked for the [`Records::Raw`].
//! A snapshot's branch trace store history follows its LBR records, marked `bts`; text and
//! compact fold its loops ([`crate::bts::fold_loops`]: one copy and a line with the count),
//! unless asked for the raw records.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;

use crate::bts::{fold_loops, Piece};
use crate::log;
use crate::output::{BtsOut, GroupOut, Output, RecordOut, SnapshotOut};
use crate::symbolize::Place;
use crate::symbols::Frame;

/// How [`write_text`] marks up its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Plain text.
    Plain,
    /// ANSI escape sequences: snapshot headers bold, record flags and source lines dim.
    Ansi,
}

/// Whether [`write_text`] and [`write_compact`] fold thunk groups and BTS loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Records {
    /// A branch through a mitigation thunk on one line, a loop of BTS records once with its
    /// count (`--format text`, `compact`).
    Folded,
    /// Every record on its own line (`--raw`).
    Raw,
}

/// A log as read, for [`write_annotated`].
pub struct LogText {
    /// The input's name, as the snapshots found in it name their source
    /// ([`SnapshotOut::source`]).
    pub name: String,
    /// The whole text.
    pub text: String,
}

/// The escape sequences of a [`Style`].
struct Sgr {
    bold: &'static str,
    dim: &'static str,
    reset: &'static str,
}

impl Sgr {
    fn of(style: Style) -> Sgr {
        let (bold, dim, reset) = match style {
            Style::Ansi => ("\x1b[1m", "\x1b[2m", "\x1b[0m"),
            Style::Plain => ("", "", ""),
        };
        Sgr { bold, dim, reset }
    }
}

/// `out` as pretty-printed JSON, with a final newline.
pub fn write_json(w: &mut impl Write, out: &Output) -> Result<()> {
    serde_json::to_writer_pretty(&mut *w, out)?;
    writeln!(w)?;
    Ok(())
}

/// Each snapshot as a header line and one aligned line per record (symbols, flags, source
/// locations), or per thunk group unless `records` is [`Records::Raw`], followed by an empty
/// line.
pub fn write_text(w: &mut impl Write, out: &Output, style: Style, records: Records) -> Result<()> {
    let sgr = Sgr::of(style);
    for s in &out.snapshots {
        write_header(w, s, &sgr)?;
        let mut rows = rows(s, records);
        rows.extend(ler_row(s));
        write_rows(w, &rows, &sgr)?;
        if s.records.len() > 1 {
            writeln!(w, "  {}", straight_summary(s))?;
        }
        if let Some(b) = &s.bts {
            writeln!(w, "  {}", bts_head(b))?;
            write_rows(w, &bts_rows(b, records, false), &sgr)?;
        }
        writeln!(w)?;
    }
    write_kept(w, out)
}

/// The logs' `kept:` lines, after the snapshots: what lbr-dump did not print, with where each
/// line is (text and compact).
fn write_kept(w: &mut impl Write, out: &Output) -> Result<()> {
    if out.kept.is_empty() {
        return Ok(());
    }
    if out.dump_read {
        // The dump holds the area: what these lines name was decoded from it, above.
        writeln!(
            w,
            "not in the log, kept in lbr-dump's area in memory (read from the dump, above):"
        )?;
    } else {
        writeln!(w, "not in the log, kept in lbr-dump's area in memory:")?;
    }
    for k in &out.kept {
        writeln!(w, "  {}:{}: cpu {}: {}", k.source, k.line, k.cpu, k.text)?;
    }
    writeln!(w)?;
    Ok(())
}

/// The line that heads a snapshot's BTS history in text and compact: what became of the
/// buffer and, when kept, how many records it holds.
fn bts_head(b: &BtsOut) -> String {
    let field = |f: &Option<String>| f.clone().unwrap_or_default();
    match b.state {
        "kept" => {
            let total = b.total.unwrap_or(0);
            let mut line = format!(
                "bts: branch trace store, {total} records{}, buffer {}",
                if b.wrapped == Some(true) {
                    " (the buffer wrapped)"
                } else {
                    ""
                },
                field(&b.buffer),
            );
            if let Some(p) = &b.phys {
                line += &format!(" (physical {p})");
            }
            line += &format!(", {} bytes", b.size.unwrap_or(0));
            if let Some(shown) = b.shown {
                if u64::from(shown) < total {
                    line += &format!(
                        "; the log shows the newest {shown} (a memory dump holds all {total})"
                    );
                }
                if b.records.len() < shown as usize {
                    line += &format!(", {} of them found", b.records.len());
                }
            }
            line
        }
        "foreign" => format!(
            "bts: no history kept: another owner's debug store was in place (IA32_DS_AREA {})",
            field(&b.ds_area)
        ),
        "reused" => match b.owner {
            Some(0) | None => {
                "bts: history lost: a later capture's pool reuse put the buffer back to recording"
                    .to_string()
            }
            Some(o) => {
                format!("bts: history lost: the buffer was reused by a later capture (seq {o})")
            }
        },
        "inconsistent" => format!("bts: inconsistent, not read: {}", field(&b.reason)),
        "unreadable" => format!("bts: not read: {}", field(&b.reason)),
        _ => "bts: no history kept by this capture".to_string(),
    }
}

/// The lines of a BTS history, newest first (`oldest_first`: reversed), a loop's repetitions
/// folded into one copy followed by a line with the count unless `records` is
/// [`Records::Raw`].
fn bts_rows(b: &BtsOut, records: Records, oldest_first: bool) -> Vec<Row<'_>> {
    let mut recs: Vec<&RecordOut> = b.records.iter().collect();
    if oldest_first {
        recs.reverse();
    }
    fn row<'a>(r: &&'a RecordOut) -> Row<'a> {
        Row {
            label: format!("bts #{}", r.index),
            compact_label: format!("[bts #{:02}]", r.index),
            from: &r.from,
            to: &r.to,
            flags: String::new(),
            note: None,
            after: None,
        }
    }
    if records == Records::Raw {
        return recs.iter().map(row).collect();
    }
    let keys: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r.from.addr.as_str(), r.to.addr.as_str()))
        .collect();
    let mut rows = Vec::new();
    for piece in fold_loops(&keys) {
        match piece {
            Piece::One(i) => rows.push(row(&recs[i])),
            Piece::Loop {
                start,
                period,
                repeats,
            } => {
                rows.extend(recs[start..start + period].iter().map(row));
                let (first, last) = (recs[start].index, recs[start + period * repeats - 1].index);
                let above = if period == 1 {
                    "the record above".to_string()
                } else {
                    format!("the {period} records above")
                };
                rows.last_mut().expect("period >= 1").after = Some(format!(
                    "... {above} repeated {repeats} times in all (bts #{}-#{})",
                    first.min(last),
                    first.max(last)
                ));
            }
        }
    }
    rows
}
/// One line of the text and compact outputs: a record, or a thunk group's records.
struct Row<'a> {
    /// `#N`, or for a group `#OLDEST-#NEWEST`.
    label: String,
    /// Retsnoop's `[#NN]`, or for a group `[#OLDEST-#NEWEST]`.
    compact_label: String,
    /// Where the branch is from: the record's, or the group's oldest record's, source.
    from: &'a Place,
    /// Its target: the record's, or the group's newest record's.
    to: &'a Place,
    /// The record's flags, or the group's (see [`group_flags`]).
    flags: String,
    /// For a group: what it is and which records it folds.
    note: Option<String>,
    /// A line printed after it (a folded loop's count).
    after: Option<String>,
}

/// A snapshot's lines, newest first: each record, or each thunk group as one line.
fn rows(s: &SnapshotOut, records: Records) -> Vec<Row<'_>> {
    let mut rows = Vec::new();
    let mut at = 0;
    while at < s.records.len() {
        let r = &s.records[at];
        let group = r
            .group
            .filter(|_| records == Records::Folded)
            .and_then(|id| s.groups.iter().find(|g| g.id == id))
            .filter(|g| g.span.start == at);
        match group {
            Some(g) => {
                rows.push(group_row(&s.records[g.span.clone()], g));
                at = g.span.end;
            }
            None => {
                rows.push(Row {
                    label: format!("#{}", r.index),
                    compact_label: format!("[#{:02}]", r.index),
                    from: &r.from,
                    to: &r.to,
                    flags: flags(r),
                    note: None,
                    after: None,
                });
                at += 1;
            }
        }
    }
    rows
}

/// The line of a snapshot's last exception record, after its records (newest first in the
/// text output, oldest first in the compact one: it is neither, but the last branch before the
/// most recent exception or interrupt, whichever record that is).
fn ler_row(s: &SnapshotOut) -> Option<Row<'_>> {
    s.last_exception.as_ref().map(|l| Row {
        label: "ler".to_string(),
        compact_label: "[ler]".to_string(),
        from: &l.from,
        to: &l.to,
        flags: String::new(),
        note: Some("(last exception record)".to_string()),
        after: None,
    })
}

/// The line of group `g`, whose records (newest first) are `recs`.
fn group_row<'a>(recs: &'a [RecordOut], g: &GroupOut) -> Row<'a> {
    let (newest, oldest) = (&recs[0], &recs[recs.len() - 1]);
    let list: Vec<String> = recs.iter().rev().map(|r| format!("#{}", r.index)).collect();
    Row {
        label: format!("#{}-#{}", oldest.index, newest.index),
        compact_label: format!("[#{:02}-#{:02}]", oldest.index, newest.index),
        from: &oldest.from,
        to: &newest.to,
        flags: group_flags(recs),
        note: Some(format!(
            "({} via {}{}, records {})",
            g.via.describe(),
            g.thunk,
            g.return_thunk
                .as_ref()
                .map_or(String::new(), |t| format!(" and {t}")),
            list.join(",")
        )),
        after: None,
    }
}

/// A group's flags: each of mispred, in_tx, abort and spec when any of its records has it,
/// and the cycles of all its records added up (when each has a count): the time from the
/// record before the group to the branch's target. The branch types are the thunk's own.
fn group_flags(recs: &[RecordOut]) -> String {
    let any = |f: fn(&RecordOut) -> Option<bool>| recs.iter().any(|r| f(r) == Some(true));
    let mut flags = Vec::new();
    for (set, name) in [
        (any(|r| r.mispred), "mispred"),
        (any(|r| r.in_tx), "in_tx"),
        (any(|r| r.abort), "abort"),
        (any(|r| r.spec), "spec"),
        (recs.iter().any(violated), NOT_STRAIGHT),
    ] {
        if set {
            flags.push(name.to_string());
        }
    }
    let cycles: Option<u32> = recs.iter().map(|r| r.cycles.map(u32::from)).sum();
    if let Some(c) = cycles {
        flags.push(format!("cycles={c}"));
    }
    flags.join(" ")
}

/// A snapshot's header line: where it is, the exception, and how the capture went.
fn write_header(w: &mut impl Write, s: &SnapshotOut, sgr: &Sgr) -> Result<()> {
    let Sgr { bold, reset, .. } = sgr;
    writeln!(
        w,
        "{bold}{}:{}: cpu {} seq {}: {} (vector {}) error {} rip {} cr2 {}{reset}  [{} format {}, {} records, {}{}{}]{}",
        s.source,
        s.line,
        s.cpu,
        s.seq,
        s.vector_name,
        s.vector,
        s.error,
        s.rip,
        s.cr2,
        s.flavour,
        s.format,
        s.records.len(),
        s.state,
        match (s.complete, s.rewritten) {
            (_, true) => ", rewritten while printed: may mix two snapshots",
            (true, false) => "",
            (false, false) => ", cut",
        },
        if s.filter == "all" {
            String::new()
        } else {
            format!(", filter={}", s.filter)
        },
        nest_note(s.nest),
    )?;
    Ok(())
}

/// What a snapshot's nesting level says, for its header.
fn nest_note(nest: Option<u32>) -> String {
    match nest {
        Some(0) => "  (the oopsing exception)".to_string(),
        Some(n) => format!("  (interrupted by the exception above: nest {n})"),
        None => String::new(),
    }
}

/// One line per row, the label, from and to columns as wide as their longest entry (the label
/// at least 4 wide: `#31 `), then a group's note, the flags and the source locations.
fn write_rows(w: &mut impl Write, rows: &[Row], sgr: &Sgr) -> Result<()> {
    let Sgr { dim, reset, .. } = sgr;
    let width = |f: &dyn Fn(&Row) -> usize| rows.iter().map(f).max().unwrap_or(0);
    let wl = width(&|r| r.label.len()).max(4);
    let wf = width(&|r| label(r.from).len());
    let wt = width(&|r| label(r.to).len());
    for r in rows {
        writeln!(
            w,
            "  {:<wl$} {:<wf$} -> {:<wt$}  {}{dim}{}{}{reset}",
            r.label,
            label(r.from),
            label(r.to),
            r.note.as_ref().map(|n| format!("{n} ")).unwrap_or_default(),
            r.flags,
            sources(r.from, r.to)
                .map(|s| format!("  {s}"))
                .unwrap_or_default(),
        )?;
        if let Some(a) = &r.after {
            writeln!(w, "  {a}")?;
        }
    }
    Ok(())
}

/// Each snapshot as its header line and then, oldest first, one line per record (or thunk
/// group, unless `records` is [`Records::Raw`]) in retsnoop's LBR style:
/// `[#NN] from+0xoff (file:line)  ->  to+0xoff (file:line)`, each end's source the outermost
/// frame's (`function @ file:line` when the function is not the symbol's), its inlined frames
/// on continuation lines (`. function (file:line)`, outer to inner), followed by an empty line.
pub fn write_compact(
    w: &mut impl Write,
    out: &Output,
    style: Style,
    records: Records,
) -> Result<()> {
    let sgr = Sgr::of(style);
    for s in &out.snapshots {
        write_header(w, s, &sgr)?;
        let mut rows = rows(s, records);
        rows.reverse();
        rows.extend(ler_row(s));
        write_compact_rows(w, &rows, &sgr)?;
        if let Some(b) = &s.bts {
            writeln!(w, "{}", bts_head(b))?;
            write_compact_rows(w, &bts_rows(b, records, true), &sgr)?;
        }
        writeln!(w)?;
    }
    write_kept(w, out)
}

/// One end of a compact line and its continuation lines: (symbol column, source column).
fn compact_end(p: &Place) -> Vec<(String, String)> {
    let symbol = p.symbol.as_deref().map(without_size);
    let mut lines = vec![(
        symbol.clone().unwrap_or_else(|| p.addr.clone()),
        String::new(),
    )];
    let Some((outer, inlined)) = p.frames.split_last() else {
        return lines;
    };
    let name = symbol.as_deref().and_then(|s| s.split('+').next());
    let at = match outer.function.as_deref() {
        Some(f) if Some(f) != name => format!("{f} @ "),
        _ => String::new(),
    };
    lines[0].1 = format!("({at}{})", location(outer));
    for f in inlined.iter().rev() {
        lines.push((
            format!(". {}", f.function.as_deref().unwrap_or("??")),
            format!("({})", location(f)),
        ));
    }
    lines
}

/// `file:line` of a frame (`??` for what it lacks).
fn location(f: &Frame) -> String {
    let line = f.line.map_or_else(|| "?".to_string(), |l| l.to_string());
    format!("{}:{line}", f.file.as_deref().unwrap_or("??"))
}

/// `name+0xoff/0xsize [module]` without its `/0xsize`, as retsnoop prints symbols.
fn without_size(symbol: &str) -> String {
    let (sym, module) = match symbol.split_once(" [") {
        Some((s, m)) => (s, Some(m)),
        None => (symbol, None),
    };
    let sym = sym.rsplit_once('/').map_or(sym, |(s, _)| s);
    match module {
        Some(m) => format!("{sym} [{m}"),
        None => sym.to_string(),
    }
}

/// `s` dim, padded with spaces to `width` (outside the escape sequences, so that trailing
/// spaces can be trimmed).
fn dimmed(s: &str, width: usize, sgr: &Sgr) -> String {
    let pad = " ".repeat(width.saturating_sub(s.len()));
    if s.is_empty() {
        return pad;
    }
    format!("{}{s}{}{pad}", sgr.dim, sgr.reset)
}

/// The compact lines of `rows`, the columns as wide as their longest entry.
fn write_compact_rows(w: &mut impl Write, rows: &[Row], sgr: &Sgr) -> Result<()> {
    let ends: Vec<_> = rows
        .iter()
        .map(|r| (compact_end(r.from), compact_end(r.to)))
        .collect();
    let all = |f: fn(&(String, String)) -> usize, from: bool| {
        ends.iter()
            .flat_map(|(a, b)| if from { a } else { b })
            .map(f)
            .max()
            .unwrap_or(0)
    };
    let wl = rows
        .iter()
        .map(|r| r.compact_label.len())
        .max()
        .unwrap_or(0);
    let (ws1, wc1) = (all(|e| e.0.len(), true), all(|e| e.1.len(), true));
    let (ws2, wc2) = (all(|e| e.0.len(), false), all(|e| e.1.len(), false));
    for (r, (from, to)) in rows.iter().zip(&ends) {
        for i in 0..from.len().max(to.len()) {
            let blank = (String::new(), String::new());
            let (s1, c1) = from.get(i).unwrap_or(&blank);
            let (s2, c2) = to.get(i).unwrap_or(&blank);
            let (label, arrow) = if i == 0 {
                (r.compact_label.as_str(), "->")
            } else {
                ("", "  ")
            };
            // The last column padded only where a group's note follows it.
            let (wc2, note) = match (i, &r.note) {
                (0, Some(n)) => (wc2, format!("  {n}")),
                _ => (0, String::new()),
            };
            let c1 = dimmed(c1, wc1, sgr);
            let c2 = dimmed(c2, wc2, sgr);
            let line = format!("{label:<wl$} {s1:<ws1$} {c1}  {arrow}  {s2:<ws2$} {c2}{note}");
            writeln!(w, "{}", line.trim_end())?;
        }
        if let Some(a) = &r.after {
            writeln!(w, "{a}")?;
        }
    }
    Ok(())
}

/// A place's symbol, or its address when it has none.
fn label(p: &Place) -> String {
    p.symbol.clone().unwrap_or_else(|| p.addr.clone())
}

/// A record's flags, space-separated: mispred, in_tx, abort, spec, cycles=N, the branch type.
fn flags(r: &RecordOut) -> String {
    let mut flags = Vec::new();
    if r.mispred == Some(true) {
        flags.push("mispred".to_string());
    }
    for (f, n) in [(r.in_tx, "in_tx"), (r.abort, "abort"), (r.spec, "spec")] {
        if f == Some(true) {
            flags.push(n.to_string());
        }
    }
    if let Some(c) = r.cycles {
        flags.push(format!("cycles={c}"));
    }
    if let Some(t) = r.branch_type {
        flags.push(t.to_string());
    }
    if violated(r) {
        flags.push(NOT_STRAIGHT.to_string());
    }
    flags.join(" ")
}

/// The mark of a record that straight-line code cannot reach from the record before it.
const NOT_STRAIGHT: &str = "!NOT-STRAIGHT-LINE";

/// The straight-line check says the path into `r` cannot be.
fn violated(r: &RecordOut) -> bool {
    r.straight_line
        .as_ref()
        .is_some_and(|s| s.status == "violated")
}

/// The straight-line check's line for a snapshot: `straight-line check: N pairs ok, N violated
/// (#OLDER to #NEWER: MNEMONIC at SYMBOL before #NEWER's from, ...), N unchecked (REASON N, ...)`.
fn straight_summary(s: &SnapshotOut) -> String {
    let sum = &s.straight_line;
    let mut line = format!(
        "straight-line check: {} pairs ok, {} violated",
        sum.ok, sum.violated
    );
    let detail: Vec<String> = s
        .records
        .windows(2)
        .filter(|w| violated(&w[0]))
        .map(|w| {
            let (newer, older) = (&w[0], &w[1]);
            let v = newer.straight_line.as_ref().expect("violated");
            let at = v.at.as_ref().map(label).unwrap_or_default();
            let m = v.mnemonic.as_deref().unwrap_or("?");
            match v.reason {
                Some("from-inside-instruction") => format!(
                    "#{} to #{}: #{}'s from is inside {m} at {at}",
                    older.index, newer.index, newer.index
                ),
                _ => format!(
                    "#{} to #{}: {m} at {at} before #{}'s from",
                    older.index, newer.index, newer.index
                ),
            }
        })
        .collect();
    if !detail.is_empty() {
        line += &format!(" ({})", detail.join("; "));
    }
    line += &format!(", {} unchecked", sum.unchecked);
    if !sum.unchecked_reasons.is_empty() {
        let r: Vec<String> = sum
            .unchecked_reasons
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        line += &format!(" ({})", r.join(", "));
    }
    line
}

/// `from -> to` source locations of a branch, if either end has any.
fn sources(from: &Place, to: &Place) -> Option<String> {
    let src = [frames_text(&from.frames), frames_text(&to.frames)];
    src.iter()
        .any(|s| !s.is_empty())
        .then(|| format!("{} -> {}", src[0], src[1]))
}

/// The frames that have a source location, as `file:line`, innermost first, joined by ` < `.
pub fn frames_text(frames: &[Frame]) -> String {
    frames
        .iter()
        .filter_map(|f| Some(format!("{}:{}", f.file.as_deref()?, f.line?)))
        .collect::<Vec<_>>()
        .join(" < ")
}

/// The input logs with each record line followed by its source locations, the way
/// scripts/decode_stacktrace.sh annotates stack traces.
pub fn write_annotated(w: &mut impl Write, logs: &[LogText], out: &Output) -> Result<()> {
    let annotations = annotations(out);
    for input in logs {
        for (n, line) in input.text.split('\n').enumerate() {
            let line = line.trim_end_matches('\r');
            match annotations.get(&(input.name.as_str(), n + 1)) {
                Some(a) if is_record_line(line) => writeln!(w, "{line} ({a})")?,
                _ => writeln!(w, "{line}")?,
            }
        }
    }
    Ok(())
}

/// (source, line) -> the source locations of the record (or last exception record) printed
/// there.
fn annotations(out: &Output) -> HashMap<(&str, usize), String> {
    let mut by_line = HashMap::new();
    for s in &out.snapshots {
        let ler = s.last_exception.iter().map(|l| (l.line, &l.from, &l.to));
        for (line, from, to) in s
            .records
            .iter()
            .chain(s.bts.iter().flat_map(|b| b.records.iter()))
            .map(|r| (r.line, &r.from, &r.to))
            .chain(ler)
        {
            if let Some(a) = sources(from, to) {
                by_line.insert((s.source.as_str(), line), a);
            }
        }
    }
    by_line
}

/// A line printing one of lbr-dump's records, a last exception record or a BTS record.
fn is_record_line(line: &str) -> bool {
    log::payload(line).is_some_and(|p| {
        p.starts_with("lbr_dump: #")
            || p.starts_with("lbr_dump: ler ")
            || p.starts_with("lbr_dump: bts #")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::KeptOut;
    use crate::symbolize::Symbolizer;

    /// The `kept:` list says where what it names was read when a memory dump was among the
    /// inputs (its snapshots are then decoded above the list), and only then.
    #[test]
    fn kept_list_says_a_dump_was_read() {
        let sym = Symbolizer::load(None, &[], &mut Vec::new()).unwrap();
        let mut out = Output::build(&[], &sym, Vec::new());
        out.kept.push(KeptOut {
            source: "console.log".to_string(),
            line: 5,
            cpu: 1,
            text: "seq=2 vector=248 (REBOOT_VECTOR)".to_string(),
        });
        for (dump, head) in [
            (
                false,
                "not in the log, kept in lbr-dump's area in memory:\n",
            ),
            (
                true,
                "not in the log, kept in lbr-dump's area in memory (read from the dump, above):\n",
            ),
        ] {
            out.dump_read = dump;
            let mut w = Vec::new();
            write_kept(&mut w, &out).unwrap();
            let got = String::from_utf8(w).unwrap();
            assert!(got.starts_with(head), "{got}");
            assert!(
                got.contains("  console.log:5: cpu 1: seq=2 vector=248"),
                "{got}"
            );
        }
    }

    /// `--format annotate` annotates a BTS record line in place like a record line (the source
    /// locations here set by hand: no ELF files in this test).
    #[test]
    fn bts_record_lines_are_annotated() {
        let text = "\
lbr_dump: v1 cpu=0 seq=1 vector=14 (#PF) error=0x0 rip=0xffffffff81000040 cr2=0x0 flavour=intel-lbr format=5 records=1 state=complete nest=0
lbr_dump: #0 0xffffffff81000040 -> 0xffffffffc0000000 cycles=1
lbr_dump: bts cpu=0 seq=1 records=1 shown=1 wrapped=no buffer=0xffff888001000000 size=240 state=kept
[ 1.0] lbr_dump: bts #0 0xffffffff81000040 -> 0xffffffffc0000000
lbr_dump: end cpu=0 seq=1
";
        let p = log::parse_log(text);
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let sym = Symbolizer::load(None, &[], &mut Vec::new()).unwrap();
        let snaps: Vec<_> = p
            .snapshots
            .into_iter()
            .map(|s| ("t".to_string(), s))
            .collect();
        let mut out = Output::build(&snaps, &sym, Vec::new());
        let frame = |file: &str| Frame {
            function: None,
            function_source: None,
            file: Some(file.to_string()),
            line: Some(7),
        };
        let r = &mut out.snapshots[0].bts.as_mut().unwrap().records[0];
        r.from.frames = vec![frame("a.c")];
        r.to.frames = vec![frame("b.S")];
        let mut w = Vec::new();
        let logs = [LogText {
            name: "t".to_string(),
            text: text.to_string(),
        }];
        write_annotated(&mut w, &logs, &out).unwrap();
        let got = String::from_utf8(w).unwrap();
        assert_eq!(
            got.lines().nth(3),
            Some(
                "[ 1.0] lbr_dump: bts #0 0xffffffff81000040 -> 0xffffffffc0000000 (a.c:7 -> b.S:7)"
            )
        );
        // The other lines as they were.
        assert_eq!(got.lines().nth(2), text.lines().nth(2));
    }
}
