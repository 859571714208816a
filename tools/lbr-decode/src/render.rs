// SPDX-License-Identifier: GPL-2.0

//! The three ways to print an [`Output`]: `--format text` ([`write_text`]: one aligned table per
//! snapshot), `--format annotate` ([`write_annotated`]: the input logs with each record line
//! followed by its source locations, the way scripts/decode_stacktrace.sh annotates stack
//! traces) and `--format json` ([`write_json`]).

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;

use crate::log;
use crate::output::{Output, Place, RecordOut, SnapshotOut};
use crate::symbols::Frame;

/// How [`write_text`] marks up its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Plain text.
    Plain,
    /// ANSI escape sequences: snapshot headers bold, record flags and source lines dim.
    Ansi,
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
/// locations), followed by an empty line.
pub fn write_text(w: &mut impl Write, out: &Output, style: Style) -> Result<()> {
    let sgr = Sgr::of(style);
    for s in &out.snapshots {
        write_header(w, s, &sgr)?;
        write_records(w, &s.records, &sgr)?;
        writeln!(w)?;
    }
    Ok(())
}

/// A snapshot's header line: where it is, the exception, and how the capture went.
fn write_header(w: &mut impl Write, s: &SnapshotOut, sgr: &Sgr) -> Result<()> {
    let Sgr { bold, reset, .. } = sgr;
    writeln!(
        w,
        "{bold}{}:{}: cpu {} seq {}: {} (vector {}) error {} rip {} cr2 {}{reset}  [{} format {}, {} records, {}{}]{}",
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
        if s.complete { "" } else { ", cut" },
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

/// One line per record, the from and to columns as wide as their longest entry.
fn write_records(w: &mut impl Write, records: &[RecordOut], sgr: &Sgr) -> Result<()> {
    let Sgr { dim, reset, .. } = sgr;
    let wf = records
        .iter()
        .map(|r| label(&r.from).len())
        .max()
        .unwrap_or(0);
    let wt = records
        .iter()
        .map(|r| label(&r.to).len())
        .max()
        .unwrap_or(0);
    for r in records {
        writeln!(
            w,
            "  #{:<3} {:<wf$} -> {:<wt$}  {dim}{}{}{reset}",
            r.index,
            label(&r.from),
            label(&r.to),
            flags(r),
            sources(r).map(|s| format!("  {s}")).unwrap_or_default(),
        )?;
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
    flags.join(" ")
}

/// `from -> to` source locations of a record, if either end has any.
fn sources(r: &RecordOut) -> Option<String> {
    let src = [frames_text(&r.from.frames), frames_text(&r.to.frames)];
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

/// (source, line) -> the source locations of the record printed there.
fn annotations(out: &Output) -> HashMap<(&str, usize), String> {
    let mut by_line = HashMap::new();
    for s in &out.snapshots {
        for r in &s.records {
            if let Some(a) = sources(r) {
                by_line.insert((s.source.as_str(), r.line), a);
            }
        }
    }
    by_line
}

/// A line printing one of lbr-dump's records.
fn is_record_line(line: &str) -> bool {
    log::payload(line).is_some_and(|p| p.starts_with("lbr_dump: #"))
}
