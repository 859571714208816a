// SPDX-License-Identifier: GPL-2.0

//! lbr-decode: finds lbr-dump's branch-record snapshots in kernel logs (serial consoles, dmesg,
//! journalctl -k, pstore) and in memory dumps (ELF: kdump vmcore, QEMU dump-guest-memory;
//! makedumpfile's kdump-compressed and flattened formats), and
//! prints them symbolized against vmlinux and module .ko files.
//!
//! ```text
//! lbr-decode [--vmlinux PATH] [--modules PATH]... [--format text|compact|json|annotate] [--raw] [LOG|DUMP]...
//! ```
//!
//! The command line over the library (lib.rs): it reads the inputs, hands their snapshots to the
//! library to symbolize ([`Symbolizer`], [`Output`]) and print ([`render`]), and turns the
//! outcome into the exit status: 0 when snapshots were decoded, 1 when the input holds none, 2 on
//! an error.

use std::io::{IsTerminal, Read, Stdout};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};

use lbr_decode::dump::{self, Area};
use lbr_decode::log::{parse_log, Parsed};
use lbr_decode::output::{KeptOut, Output};
use lbr_decode::render::{self, LogText, Records, Style};
use lbr_decode::snapshot::Snapshot;
use lbr_decode::symbolize::Symbolizer;

#[derive(Parser)]
#[command(
    version,
    about = "Decode lbr-dump branch records from kernel logs, symbolized"
)]
struct Cli {
    /// Kernel logs or memory dumps (ELF, makedumpfile kdump-compressed or flattened) to read
    /// ("-" or none: standard input, a log).
    inputs: Vec<PathBuf>,
    /// The kernel's vmlinux (with DWARF for source lines; without, symbols only).
    #[arg(short = 'k', long)]
    vmlinux: Option<PathBuf>,
    /// Module .ko files, or directories searched for them (repeatable).
    #[arg(short = 'm', long = "modules")]
    modules: Vec<PathBuf>,
    /// Output: aligned text (newest first), compact (oldest first, retsnoop's style, inlined
    /// frames on their own lines), JSON (schema version 1, see README), or the input annotated
    /// in place.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Text and compact: every record on its own line, mitigation-thunk hops too (by default a
    /// branch through a return or retpoline thunk is one line, marked, naming its records), and
    /// every BTS record (by default a loop's repetitions are one copy and a line with the count).
    #[arg(long)]
    raw: bool,
    /// Colour the text output.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Compact,
    Json,
    Annotate,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

impl Cli {
    /// The inputs to read: standard input when none are given.
    fn input_paths(&self) -> Vec<PathBuf> {
        if self.inputs.is_empty() {
            vec![PathBuf::from("-")]
        } else {
            self.inputs.clone()
        }
    }
}

/// How a run ended without an error.
enum Outcome {
    /// Snapshots were found and printed.
    Decoded,
    /// The input holds no snapshot.
    NoSnapshot,
}

fn main() {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(Outcome::Decoded) => {}
        Ok(Outcome::NoSnapshot) => std::process::exit(1),
        Err(e) => {
            eprintln!("lbr-decode: error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(cli: &Cli) -> Result<Outcome> {
    let mut warnings = Vec::new();
    let inputs = read_inputs(&cli.input_paths(), &mut warnings)?;
    let symbolizer = calibrated_symbolizer(cli, &inputs, &mut warnings)?;
    let mut out = Output::build(&inputs.snapshots, &symbolizer, warnings);
    out.kept = inputs.kept;
    out.dump_read = !inputs.areas.is_empty();
    print_output(cli, &inputs.logs, &out)?;
    if cli.format != Format::Json {
        print_warnings(&out.warnings);
    }
    Ok(outcome(&out))
}

/// Everything the inputs hold.
#[derive(Default)]
struct Inputs {
    /// The logs, for `--format annotate`.
    logs: Vec<LogText>,
    /// Every snapshot, with the name of its source (a log, or a dump's area).
    snapshots: Vec<(String, Snapshot)>,
    /// The dumps' snapshot areas (their KASLR anchors and module text bases).
    areas: Vec<Area>,
    /// The logs' `kept:` lines: what lbr-dump did not print.
    kept: Vec<KeptOut>,
}

/// Reads each input and finds its snapshots; problems with the inputs go to `warnings`.
fn read_inputs(paths: &[PathBuf], warnings: &mut Vec<String>) -> Result<Inputs> {
    let mut inputs = Inputs::default();
    for path in paths {
        let name = path.display().to_string();
        match read_input(path)? {
            Input::Log(text) => inputs.add_log(name, text, warnings),
            Input::Dump(d) => inputs.add_dump(&name, &d, warnings),
        }
    }
    Ok(inputs)
}

impl Inputs {
    /// The snapshots printed in log `name`, each oops without one a warning.
    fn add_log(&mut self, name: String, text: String, warnings: &mut Vec<String>) {
        // A fragment (records of a snapshot whose header is not in the log) is a warning, which
        // says which records are missing.
        let Parsed {
            snapshots,
            none,
            kept,
            warnings: w,
            ..
        } = parse_log(&text);
        self.kept.extend(kept.into_iter().map(|k| KeptOut {
            source: name.clone(),
            line: k.line,
            cpu: k.cpu,
            text: k.reason,
        }));
        warnings.extend(w.into_iter().map(|w| format!("{name}: {w}")));
        for n in none {
            warnings.push(format!(
                "{name}: line {}: cpu {}: no snapshot for that oops: {}",
                n.line, n.cpu, n.reason
            ));
        }
        self.snapshots
            .extend(snapshots.into_iter().map(|s| (name.clone(), s)));
        self.logs.push(LogText { name, text });
    }

    /// The snapshot areas in dump `name` (with a progress bar on a terminal), named
    /// `name@physical address`; a dump without one is a warning.
    fn add_dump(&mut self, name: &str, d: &dump::Dump, warnings: &mut Vec<String>) {
        let mut w = Vec::new();
        let bar = scan_progress(name, d.memory_size());
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
            self.snapshots
                .extend(a.snapshots.iter().cloned().map(|s| (src.clone(), s)));
            self.areas.push(a);
        }
    }
}

/// One input, read.
enum Input {
    /// A kernel log's text.
    Log(String),
    /// A memory dump, mapped.
    Dump(dump::Dump),
}

/// Reads `path` ("-": standard input): a file starting with a dump format's magic (ELF,
/// kdump-compressed, flattened) is a memory dump, anything else a log.
fn read_input(path: &Path) -> Result<Input> {
    let bytes = if path.as_os_str() == "-" {
        read_stdin()?
    } else {
        if is_dump(path)? {
            return Ok(Input::Dump(dump::Dump::open(path)?));
        }
        std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?
    };
    if dump::is_dump(&bytes) {
        bail!("standard input is a memory dump: give memory dumps as file arguments (they are mapped, not read)");
    }
    // Logs may hold stray binary bytes (a console's noise): decode lossily, never fail on them.
    Ok(Input::Log(String::from_utf8_lossy(&bytes).into_owned()))
}

fn read_stdin() -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .context("reading standard input")?;
    Ok(bytes)
}

/// Whether the file starts with a memory dump format's magic.
fn is_dump(path: &Path) -> Result<bool> {
    let f =
        std::fs::File::open(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let mut magic = Vec::with_capacity(16);
    f.take(16)
        .read_to_end(&mut magic)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(dump::is_dump(&magic))
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

/// The ELF files of the command line, mapped to the runtime addresses of the inputs.
fn calibrated_symbolizer(
    cli: &Cli,
    inputs: &Inputs,
    warnings: &mut Vec<String>,
) -> Result<Symbolizer> {
    let mut symbolizer = Symbolizer::load(cli.vmlinux.as_deref(), &cli.modules, warnings)?;
    symbolizer.calibrate(inputs.snapshots.iter().map(|(_, s)| s), warnings);
    symbolizer.calibrate_dump(&inputs.areas, warnings);
    Ok(symbolizer)
}

/// `out` on standard output, in the format asked for.
fn print_output(cli: &Cli, logs: &[LogText], out: &Output) -> Result<()> {
    let stdout = std::io::stdout();
    let style = text_style(cli.color, &stdout);
    let mut w = stdout.lock();
    let records = if cli.raw {
        Records::Raw
    } else {
        Records::Folded
    };
    match cli.format {
        Format::Json => render::write_json(&mut w, out),
        Format::Text => render::write_text(&mut w, out, style, records),
        Format::Compact => render::write_compact(&mut w, out, style, records),
        Format::Annotate => render::write_annotated(&mut w, logs, out),
    }
}

/// `--color`: auto colours a terminal, unless NO_COLOR is set.
fn text_style(color: Color, stdout: &Stdout) -> Style {
    let ansi = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    if ansi {
        Style::Ansi
    } else {
        Style::Plain
    }
}

/// The warnings on standard error (the JSON output holds them instead).
fn print_warnings(warnings: &[String]) {
    for warning in warnings {
        eprintln!("lbr-decode: warning: {warning}");
    }
}

/// Whether any snapshot was found (saying so on standard error when not).
fn outcome(out: &Output) -> Outcome {
    if out.snapshots.is_empty() {
        eprintln!("lbr-decode: no lbr-dump snapshot in the input");
        return Outcome::NoSnapshot;
    }
    Outcome::Decoded
}
