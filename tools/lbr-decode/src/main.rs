// SPDX-License-Identifier: GPL-2.0

//! lbr-decode: finds lbr-dump's branch-record snapshots in kernel logs (serial consoles, dmesg,
//! journalctl -k, pstore) and in ELF memory dumps (kdump vmcore, QEMU dump-guest-memory), and
//! prints them symbolized against vmlinux and module .ko files.
//!
//! ```text
//! lbr-decode [--vmlinux PATH] [--modules PATH]... [--format text|json|annotate] [LOG|DUMP]...
//! ```

use lbr_decode::{dump, log, symbols};

use std::collections::HashMap;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use serde::Serialize;

use log::{parse_log, Parsed, Snapshot};
use symbols::{parse_printed, Frame, Image};

#[derive(Parser)]
#[command(
    version,
    about = "Decode lbr-dump branch records from kernel logs, symbolized"
)]
struct Cli {
    /// Kernel logs or ELF memory dumps to read ("-" or none: standard input, a log).
    inputs: Vec<PathBuf>,
    /// The kernel's vmlinux (with DWARF for source lines; without, symbols only).
    #[arg(short = 'k', long)]
    vmlinux: Option<PathBuf>,
    /// Module .ko files, or directories searched for them (repeatable).
    #[arg(short = 'm', long = "modules")]
    modules: Vec<PathBuf>,
    /// Output: aligned text, JSON (schema version 1, see README), or the input annotated in place.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Colour the text output.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Annotate,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

/// Where an address is, once symbolized.
#[derive(Clone, Debug, Default, Serialize)]
struct Place {
    addr: String,
    /// `name+0xoff/0xsize [module]`, recomputed from the ELF files when given, else as printed.
    symbol: Option<String>,
    /// The ELF image the address was found in ("vmlinux" or a module name).
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<String>,
    /// As the kernel printed it, when it differs from the recomputed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    printed: Option<String>,
    /// Innermost first.
    frames: Vec<Frame>,
}

#[derive(Serialize)]
struct RecordOut {
    index: u32,
    /// Input line of the record (for --format annotate).
    #[serde(skip)]
    line: usize,
    from: Place,
    to: Place,
    #[serde(skip_serializing_if = "Option::is_none")]
    mispred: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    in_tx: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    abort: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cycles: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    branch_type: Option<&'static str>,
}

#[derive(Serialize)]
struct SnapshotOut {
    source: String,
    line: usize,
    cpu: u32,
    seq: u64,
    vector: u32,
    vector_name: &'static str,
    /// "exception", "panic" (the entry of panic()) or "stop" (a CPU as a panic stopped it);
    /// schema 1.1.
    kind: &'static str,
    error: String,
    rip: String,
    cr2: String,
    flavour: String,
    format: u32,
    state: &'static str,
    /// 0: the oopsing exception; N: the exception it interrupted N levels out (absent when the
    /// log does not say, and for dumps).
    #[serde(skip_serializing_if = "Option::is_none")]
    nest: Option<u32>,
    complete: bool,
    records: Vec<RecordOut>,
}

#[derive(Serialize)]
struct Output {
    version: u32,
    /// Fields added within `version` (1: `kind`).
    minor_version: u32,
    /// Per image, the directory its source paths are relative to.
    source_roots: std::collections::BTreeMap<String, String>,
    kaslr_offset: Option<String>,
    snapshots: Vec<SnapshotOut>,
    warnings: Vec<String>,
}

/// The ELF images and the runtime-to-link mapping recovered from the log.
struct Symbolizer {
    vmlinux: Option<Image>,
    modules: HashMap<String, Image>,
    kaslr: Option<u64>,
    /// (module, section index) -> load address of that section.
    bases: HashMap<(String, usize), u64>,
}

impl Symbolizer {
    fn load(cli: &Cli, warnings: &mut Vec<String>) -> Result<Symbolizer> {
        let vmlinux = cli
            .vmlinux
            .as_deref()
            .map(|p| Image::load(p, false))
            .transpose()?;
        if let Some(v) = &vmlinux {
            if !v.has_dwarf {
                warnings.push(format!(
                    "{}: no debug info (DWARF): symbols from its symbol table, no source lines",
                    v.path.display()
                ));
            }
        } else {
            warnings
                .push("no --vmlinux: symbols are the kernel's as printed, no source lines".into());
        }
        let mut modules = HashMap::new();
        for p in &cli.modules {
            let files: Vec<PathBuf> = if p.is_dir() {
                let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                    .with_context(|| format!("{}: cannot list", p.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|f| f.extension().is_some_and(|x| x == "ko"))
                    .collect();
                v.sort();
                v
            } else {
                vec![p.clone()]
            };
            for f in files {
                let img = Image::load(&f, true)?;
                modules.insert(img.name.clone(), img);
            }
        }
        Ok(Symbolizer {
            vmlinux,
            modules,
            kaslr: None,
            bases: HashMap::new(),
        })
    }

    /// Recovers the KASLR offset and module section bases from the printed symbols; every
    /// disagreement is a warning (a vmlinux or module that does not match the log).
    fn calibrate(&mut self, snaps: &[(String, Snapshot)], warnings: &mut Vec<String>) {
        let mut votes: HashMap<u64, usize> = HashMap::new();
        let mut kernel_symbols = 0;
        for (_, s) in snaps {
            for r in &s.records {
                for (addr, sym) in [(r.branch.from, &r.from_sym), (r.branch.to, &r.to_sym)] {
                    let Some(p) = sym.as_deref().and_then(parse_printed) else {
                        continue;
                    };
                    match p.module {
                        None => {
                            kernel_symbols += 1;
                            if let Some(sym) = self.vmlinux.as_ref().and_then(|v| v.by_name(p.name))
                            {
                                *votes
                                    .entry(addr.wrapping_sub(sym.addr + p.offset))
                                    .or_default() += 1;
                            }
                        }
                        Some(m) => {
                            if let Some(sym) = self.modules.get(m).and_then(|i| i.by_name(p.name)) {
                                if let Some(sec) = sym.section {
                                    self.bases
                                        .entry((m.to_string(), sec.0))
                                        .or_insert(addr.wrapping_sub(sym.addr + p.offset));
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut v: Vec<(u64, usize)> = votes.into_iter().collect();
        v.sort_by_key(|&(off, n)| (std::cmp::Reverse(n), off));
        if let Some(&(off, n)) = v.first() {
            self.kaslr = Some(off);
            let other: usize = v[1..].iter().map(|&(_, n)| n).sum();
            if other > 0 {
                warnings.push(format!(
                    "the printed symbols disagree about the KASLR offset ({n} say {off:#x}, {other} say otherwise): is this the crashed kernel's vmlinux?"
                ));
            }
        } else if self.vmlinux.is_some() && kernel_symbols > 0 {
            warnings.push("no printed kernel symbol matched vmlinux: cannot find the KASLR offset (wrong vmlinux?)".into());
        }
    }

    /// The KASLR offset from each dump area's anchor symbol, and the module's text sections from
    /// its text base. Disagreement with the log's offset (or between dumps) is a warning.
    fn calibrate_dump(&mut self, areas: &[dump::Area], warnings: &mut Vec<String>) {
        for a in areas {
            let (addr, name) = &a.anchor;
            match self.vmlinux.as_ref().map(|v| (v, v.by_name(name))) {
                Some((_, Some(s))) => {
                    let off = addr.wrapping_sub(s.addr);
                    match self.kaslr {
                        Some(k) if k != off => warnings.push(format!(
                            "dump area at {:#x}: anchor {name} gives KASLR offset {off:#x}, the other inputs {k:#x}: are the inputs from one boot, and is this its vmlinux?",
                            a.paddr
                        )),
                        _ => self.kaslr = Some(off),
                    }
                }
                Some((v, None)) => warnings.push(format!(
                    "{}: no symbol {name} (the dump's KASLR anchor): not this kernel's vmlinux?",
                    v.path.display()
                )),
                None => {}
            }
            let (module, base) = &a.module;
            if *base == 0 {
                continue; // built in: its code is in vmlinux
            }
            match self.modules.get(module) {
                Some(img) => {
                    for &(sec, off) in &img.text_layout {
                        self.bases
                            .entry((module.clone(), sec.0))
                            .or_insert(base + off);
                    }
                }
                None => warnings.push(format!(
                    "the dump's snapshots name module {module} (text at {base:#x}): give its .ko with --modules to symbolize its addresses"
                )),
            }
        }
    }

    /// The module whose known sections contain `addr` (addresses without a printed symbol).
    fn module_of(&self, addr: u64) -> Option<&str> {
        self.bases.iter().find_map(|((m, sec), base)| {
            let img = self.modules.get(m)?;
            img.containing(addr.wrapping_sub(*base), Some(object::SectionIndex(*sec)))
                .map(|_| img.name.as_str())
        })
    }

    fn place(
        &self,
        addr: u64,
        printed: Option<&str>,
        what: &str,
        warnings: &mut Vec<String>,
    ) -> Place {
        let mut place = Place {
            addr: format!("{addr:#018x}"),
            // `%pS` of an address in no symbol is the bare address: not a symbol.
            symbol: printed.filter(|p| !p.starts_with("0x")).map(str::to_string),
            ..Place::default()
        };
        let pp = printed.and_then(parse_printed);
        // A module address: its section's base, from any symbol of that module in the log.
        let module = match &pp {
            Some(p) => p.module,
            None => self.module_of(addr),
        };
        let computed = match module {
            Some(m) => self.modules.get(m).and_then(|img| {
                self.bases
                    .iter()
                    .filter(|((mm, _), _)| mm == m)
                    .find_map(|((_, sec), base)| {
                        let link = addr.wrapping_sub(*base);
                        img.containing(link, Some(object::SectionIndex(*sec)))
                            .map(|s| {
                                (
                                    format!("{}+{:#x}/{:#x} [{m}]", s.name, link - s.addr, s.size),
                                    img.frames(Some(object::SectionIndex(*sec)), link),
                                    m.to_string(),
                                )
                            })
                    })
            }),
            None => match (&self.vmlinux, self.kaslr) {
                (Some(v), Some(k)) => {
                    let link = addr.wrapping_sub(k);
                    v.containing(link, None).map(|s| {
                        (
                            format!("{}+{:#x}/{:#x}", s.name, link - s.addr, s.size),
                            v.frames(None, link),
                            "vmlinux".to_string(),
                        )
                    })
                }
                _ => None,
            },
        };
        if let Some((sym, frames, image)) = computed {
            place.image = Some(image);
            if let Some(p) = printed {
                if !same_symbol(p, &sym) {
                    warnings.push(format!("{what}: printed {p}, but the ELF files say {sym}: wrong vmlinux or module?"));
                    place.printed = Some(p.to_string());
                }
            }
            place.symbol = Some(sym);
            place.frames = frames;
        }
        place
    }
}

/// `%pS` names a symbol by any of its aliases (`__pi_` copies, for example): equal when offset and
/// size agree and one name ends with the other.
fn same_symbol(a: &str, b: &str) -> bool {
    match (parse_printed(a), parse_printed(b)) {
        (Some(x), Some(y)) => {
            x.offset == y.offset
                && x.size == y.size
                && x.module == y.module
                && (x.name.ends_with(y.name) || y.name.ends_with(x.name))
        }
        _ => a == b,
    }
}

enum Input {
    Log(String),
    Dump(dump::Dump),
}

fn read_input(path: &PathBuf) -> Result<Input> {
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
    } else {
        let mut f = std::fs::File::open(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let mut magic = [0u8; 4];
        let n = f
            .read(&mut magic)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        if n == 4 && &magic == b"\x7fELF" {
            return Ok(Input::Dump(dump::Dump::open(path)?));
        }
        bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    }
    if bytes.starts_with(b"\x7fELF") {
        bail!("standard input is an ELF file: give memory dumps as file arguments (they are mapped, not read)");
    }
    // Logs may hold stray binary bytes (a console's noise): decode lossily, never fail on them.
    Ok(Input::Log(String::from_utf8_lossy(&bytes).into_owned()))
}

fn frames_text(frames: &[Frame]) -> String {
    frames
        .iter()
        .filter_map(|f| Some(format!("{}:{}", f.file.as_deref()?, f.line?)))
        .collect::<Vec<_>>()
        .join(" < ")
}

/// A progress bar on stderr for scanning a dump of `size` bytes: drawn only on a terminal, and
/// only for dumps large enough to take a noticeable time (reading from disk, 1 GiB and up).
fn scan_progress(name: &str, size: u64) -> indicatif::ProgressBar {
    if size < 1 << 30 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(size);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_message(format!("scanning {name}"));
    bar
}

fn run(cli: Cli) -> Result<bool> {
    let inputs = if cli.inputs.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        cli.inputs.clone()
    };
    let mut warnings = Vec::new();
    let mut texts = Vec::new();
    let mut snaps: Vec<(String, Snapshot)> = Vec::new();
    let mut areas = Vec::new();
    for path in &inputs {
        let name = path.display().to_string();
        let text = match read_input(path)? {
            Input::Log(text) => text,
            Input::Dump(d) => {
                let mut w = Vec::new();
                let bar = scan_progress(&name, d.memory_size());
                let found = d.areas_with(&mut w, &mut |n| bar.set_position(n));
                bar.finish_and_clear();
                warnings.extend(w.into_iter().map(|w| format!("{name}: {w}")));
                if found.is_empty() {
                    warnings.push(format!(
                        "{name}: no lbr-dump area in {} bytes of memory (was lbr-dump armed? a dump filtered to exclude module or free pages?)",
                        d.memory_size()
                    ));
                }
                for a in found {
                    let src = format!("{name}@{:#x}", a.paddr);
                    snaps.extend(a.snapshots.iter().cloned().map(|s| (src.clone(), s)));
                    areas.push(a);
                }
                continue;
            }
        };
        let Parsed {
            snapshots,
            none,
            warnings: w,
        } = parse_log(&text);
        warnings.extend(w.into_iter().map(|w| format!("{name}: {w}")));
        for n in none {
            warnings.push(format!(
                "{name}: line {}: cpu {}: no snapshot for that oops: {}",
                n.line, n.cpu, n.reason
            ));
        }
        snaps.extend(snapshots.into_iter().map(|s| (name.clone(), s)));
        texts.push((name, text));
    }
    let mut sym = Symbolizer::load(&cli, &mut warnings)?;
    sym.calibrate(&snaps, &mut warnings);
    sym.calibrate_dump(&areas, &mut warnings);

    let mut out = Output {
        version: 1,
        minor_version: 1,
        source_roots: Default::default(),
        kaslr_offset: sym.kaslr.map(|k| format!("{k:#x}")),
        snapshots: Vec::new(),
        warnings: Vec::new(),
    };
    for (src, s) in &snaps {
        let records = s
            .records
            .iter()
            .map(|r| {
                let b = &r.branch;
                RecordOut {
                    index: r.index,
                    line: r.line,
                    from: sym.place(
                        b.from,
                        r.from_sym.as_deref(),
                        &format!("{src}:{}: #{} from", r.line, r.index),
                        &mut warnings,
                    ),
                    to: sym.place(
                        b.to,
                        r.to_sym.as_deref(),
                        &format!("{src}:{}: #{} to", r.line, r.index),
                        &mut warnings,
                    ),
                    mispred: b.mispred,
                    in_tx: b.in_tx,
                    abort: b.abort,
                    spec: b.spec,
                    cycles: b.cycles,
                    branch_type: b.branch_type.map(|t| t.name()),
                }
            })
            .collect();
        out.snapshots.push(SnapshotOut {
            source: src.clone(),
            line: s.line,
            cpu: s.cpu,
            seq: s.seq,
            vector: s.vector,
            vector_name: lbr_core::report::vector_name(s.vector),
            kind: lbr_core::report::Kind::of(s.vector).name(),
            error: format!("{:#x}", s.error),
            rip: format!("{:#x}", s.rip),
            cr2: format!("{:#x}", s.cr2),
            flavour: s.flavour.clone(),
            format: s.format,
            state: match s.state {
                lbr_core::report::State::Complete => "complete",
                lbr_core::report::State::Torn => "torn",
                lbr_core::report::State::WasOff => "was-off",
                lbr_core::report::State::Foreign => "foreign",
                lbr_core::report::State::NmiEntry => "nmi-entry",
            },
            nest: s.nest,
            complete: s.complete,
            records,
        });
    }
    out.warnings = warnings;
    strip_common_source_dir(&mut out);

    let stdout = std::io::stdout();
    let color = match cli.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let mut w = stdout.lock();
    match cli.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut w, &out)?;
            writeln!(w)?;
        }
        Format::Text => write_text(&mut w, &out, color)?,
        Format::Annotate => write_annotated(&mut w, &texts, &out)?,
    }
    if cli.format != Format::Json {
        for warning in &out.warnings {
            eprintln!("lbr-decode: warning: {warning}");
        }
    }
    if out.snapshots.is_empty() {
        eprintln!("lbr-decode: no lbr-dump snapshot in the input");
        return Ok(false);
    }
    Ok(true)
}

/// Source paths relative to the directory all of one image's paths share (the kernel tree the
/// vmlinux was built in, a module's source directory), as scripts/decode_stacktrace.sh prints them.
/// A module's DWARF also names the kernel headers it inlined, in the kernel tree: those are made
/// relative to that tree (recognised by its `include/` or `arch/` directory), under the key
/// `kernel-tree`, and the module's own files relative to what they share.
fn strip_common_source_dir(out: &mut Output) {
    let mut images: Vec<String> = Vec::new();
    for r in out.snapshots.iter().flat_map(|s| s.records.iter()) {
        for p in [&r.from, &r.to] {
            if let Some(i) = &p.image {
                if !images.contains(i) {
                    images.push(i.clone());
                }
            }
        }
    }
    for image in images {
        let files: Vec<String> = out
            .snapshots
            .iter()
            .flat_map(|s| s.records.iter())
            .flat_map(|r| [&r.from, &r.to])
            .filter(|p| p.image.as_deref() == Some(image.as_str()))
            .flat_map(|p| p.frames.iter())
            .filter_map(|f| f.file.clone())
            .filter(|f| f.starts_with('/'))
            .collect();
        // The kernel tree, if some files are in one and others are not.
        let mut trees = std::collections::BTreeMap::<&str, usize>::new();
        for t in files.iter().filter_map(|f| kernel_tree(f)) {
            *trees.entry(t).or_default() += 1;
        }
        let tree = trees
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(t, _)| t.to_string())
            .filter(|t| t.matches('/').count() >= 2)
            .filter(|t| files.iter().any(|f| !f.starts_with(t.as_str())));
        let own: Vec<&String> = files
            .iter()
            .filter(|f| tree.as_ref().is_none_or(|t| !f.starts_with(t.as_str())))
            .collect();
        let mut roots = Vec::new();
        if let Some(prefix) = common_dir(&own) {
            roots.push((image.clone(), prefix));
        }
        if let Some(t) = tree {
            roots.push(("kernel-tree".to_string(), t));
        }
        // The longer root first: a kernel tree may lie inside the module's directory.
        roots.sort_by_key(|(_, r)| std::cmp::Reverse(r.len()));
        for (_, root) in &roots {
            for f in out
                .snapshots
                .iter_mut()
                .flat_map(|s| s.records.iter_mut())
                .flat_map(|r| [&mut r.from, &mut r.to])
                .filter(|p| p.image.as_deref() == Some(image.as_str()))
                .flat_map(|p| p.frames.iter_mut())
            {
                if let Some(rel) = f
                    .file
                    .as_deref()
                    .and_then(|x| x.strip_prefix(root.as_str()))
                {
                    f.file = Some(rel.to_string());
                }
            }
        }
        for (key, root) in roots {
            out.source_roots.entry(key).or_insert(root);
        }
    }
}

/// The kernel tree an absolute path is in: the part before its first `/include/` or `/arch/`.
fn kernel_tree(path: &str) -> Option<&str> {
    ["/include/", "/arch/"]
        .iter()
        .filter_map(|m| path.find(m))
        .min()
        .map(|i| &path[..i + 1])
}

/// The deepest directory (with its trailing `/`) all `files` are in, if it is below the root's
/// children (a shared `/` or `/home/` says nothing).
fn common_dir(files: &[&String]) -> Option<String> {
    let first = files.first()?;
    let mut prefix = first[..first.rfind('/').unwrap_or(0) + 1].to_string();
    for f in files {
        while !f.starts_with(prefix.as_str()) {
            let cut = prefix[..prefix.len() - 1].rfind('/').map_or(0, |i| i + 1);
            prefix.truncate(cut);
        }
    }
    (prefix.matches('/').count() >= 2).then_some(prefix)
}

fn write_text(w: &mut impl Write, out: &Output, color: bool) -> Result<()> {
    let (bold, dim, reset) = if color {
        ("\x1b[1m", "\x1b[2m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    for s in &out.snapshots {
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
            match s.nest {
                Some(0) => "  (the oopsing exception)".to_string(),
                Some(n) => format!("  (interrupted by the exception above: nest {n})"),
                None => String::new(),
            }
        )?;
        let name = |p: &Place| p.symbol.clone().unwrap_or_else(|| p.addr.clone());
        let wf = s
            .records
            .iter()
            .map(|r| name(&r.from).len())
            .max()
            .unwrap_or(0);
        let wt = s
            .records
            .iter()
            .map(|r| name(&r.to).len())
            .max()
            .unwrap_or(0);
        for r in &s.records {
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
            let src = [frames_text(&r.from.frames), frames_text(&r.to.frames)];
            writeln!(
                w,
                "  #{:<3} {:<wf$} -> {:<wt$}  {dim}{}{}{reset}",
                r.index,
                name(&r.from),
                name(&r.to),
                flags.join(" "),
                if src.iter().any(|s| !s.is_empty()) {
                    format!("  {} -> {}", src[0], src[1])
                } else {
                    String::new()
                },
            )?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// The input with each record line followed by its source locations, the way
/// scripts/decode_stacktrace.sh annotates stack traces.
fn write_annotated(w: &mut impl Write, texts: &[(String, String)], out: &Output) -> Result<()> {
    let mut by_line: HashMap<(&str, usize), String> = HashMap::new();
    for s in &out.snapshots {
        for r in &s.records {
            let src = [frames_text(&r.from.frames), frames_text(&r.to.frames)];
            if src.iter().any(|s| !s.is_empty()) {
                by_line.insert(
                    (s.source.as_str(), r.line),
                    format!("{} -> {}", src[0], src[1]),
                );
            }
        }
    }
    for (name, text) in texts {
        for (n, line) in text.split('\n').enumerate() {
            let line = line.trim_end_matches('\r');
            match by_line.get(&(name.as_str(), n + 1)) {
                Some(a) if log::payload(line).is_some_and(|p| p.starts_with("lbr_dump: #")) => {
                    writeln!(w, "{line} ({a})")?
                }
                _ => writeln!(w, "{line}")?,
            }
        }
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("lbr-decode: error: {e:#}");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_tree_and_common_dir() {
        let h = "/root/.cache/linux/arch/x86/include/asm/msr.h";
        assert_eq!(kernel_tree(h), Some("/root/.cache/linux/"));
        assert_eq!(
            kernel_tree("/src/linux/include/linux/list.h"),
            Some("/src/linux/")
        );
        assert_eq!(kernel_tree("/work/m/lbr_crash.c"), None);
        let own = ["/work/m/a/x.c".to_string(), "/work/m/b/y.c".to_string()];
        assert_eq!(
            common_dir(&own.iter().collect::<Vec<_>>()),
            Some("/work/m/".to_string())
        );
        let apart = ["/work/x.c".to_string(), "/root/y.c".to_string()];
        assert_eq!(common_dir(&apart.iter().collect::<Vec<_>>()), None);
    }
}
