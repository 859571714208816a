// SPDX-License-Identifier: GPL-2.0

//! What lbr-decode prints, as serializable models: the snapshots found, each record's two ends
//! symbolized, and the warnings. Serialized with serde they are the `--format json` output
//! (schema version [`VERSION`].[`MINOR_VERSION`], see the README); the text and annotate
//! renderers ([`crate::render`]) print the same models.
//!
//! [`Output::build`] symbolizes every record through a [`Symbolizer`], groups the records of
//! one branch through a mitigation thunk ([`fold`]), and then makes the source paths relative
//! to the directory each image's paths share ([`Output::source_roots`]), as
//! scripts/decode_stacktrace.sh prints them.

use std::collections::BTreeMap;

use serde::Serialize;

use lbr_core::facility::Filter;
use lbr_core::report::{vector_name, Kind, State};

use crate::snapshot::{Bts, BtsState, Record, Snapshot};
use crate::straight::{Reason, Verdict};
use crate::symbolize::{Place, Symbolizer};

pub mod fold;
use fold::Via;

/// The JSON output's schema version.
pub const VERSION: u32 = 1;

/// Fields added within [`VERSION`] (1: [`SnapshotOut::kind`]; 2: frames' `function_source`,
/// [`RecordOut::group`] and [`SnapshotOut::groups`]; 3: [`RecordOut::straight_line`] and
/// [`SnapshotOut::straight_line`]; 4: [`SnapshotOut::last_exception`]; 5:
/// [`SnapshotOut::filter`]; 6: [`SnapshotOut::bts`]; 7: [`GroupOut::return_thunk`]; 8:
/// [`Output::kept`]).
pub const MINOR_VERSION: u32 = 10;

/// One branch record, both ends symbolized.
#[derive(Serialize)]
pub struct RecordOut {
    /// The record's index as printed (`#N`).
    pub index: u32,
    /// Input line of the record (for --format annotate).
    #[serde(skip)]
    pub line: usize,
    /// The branch instruction (or the interrupted one, for an exception).
    pub from: Place,
    /// The branch target.
    pub to: Place,
    /// Mispredicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mispred: Option<bool>,
    /// Inside a TSX transaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_tx: Option<bool>,
    /// A TSX abort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort: Option<bool>,
    /// AMD: the branch was speculative.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<bool>,
    /// Cycles since the previous record (when the format counts them and the count is valid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u16>,
    /// Branch type (Arch LBR).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_type: Option<&'static str>,
    /// The [`GroupOut::id`] of the thunk group this record belongs to (schema 1.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// The straight-line check ([`crate::straight`]) of the path from the next (older)
    /// record's `to` to this record's `from`; absent on the oldest record (schema 1.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub straight_line: Option<StraightOut>,
}

/// The last exception record (Intel LER, AMD LastException), both ends symbolized: the last
/// branch the CPU took before the most recent exception or interrupt it took while recording.
#[derive(Serialize)]
pub struct LastExceptionOut {
    /// Input line of its `ler` line (for --format annotate; 0 for dumps).
    #[serde(skip)]
    pub line: usize,
    /// The branch's source.
    pub from: Place,
    /// The branch's target.
    pub to: Place,
}

/// What the straight-line check says of the path into one record.
#[derive(Clone, Debug, Serialize)]
pub struct StraightOut {
    /// "ok", "violated" or "unchecked".
    pub status: &'static str,
    /// Unchecked: why ("cross-image", "outside-text", "no-vmlinux", "too-far", "patched-code",
    /// "undecodable", "filtered"); violated: "branch-before-from" or "from-inside-instruction".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Violated: the offending instruction (its runtime address and symbol).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Place>,
    /// Violated: its mnemonic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mnemonic: Option<String>,
}

/// The straight-line check's counts over a snapshot's record pairs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StraightSummary {
    /// Pairs found consistent.
    pub ok: usize,
    /// Pairs that cannot be (the newer records' indices are in [`Self::violations`]).
    pub violated: usize,
    /// Pairs not decided.
    pub unchecked: usize,
    /// Unchecked pairs by reason.
    pub unchecked_reasons: BTreeMap<&'static str, usize>,
    /// The index of the newer record of each violated pair.
    pub violations: Vec<u32>,
}

/// A `kept:` line of a log: records or snapshots lbr-dump kept in its area in memory and did not
/// print (past `print_records`; the other CPUs' snapshots of a panic). A kdump vmcore holds them,
/// which lbr-decode reads.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct KeptOut {
    /// The log.
    pub source: String,
    /// Its line (1-based).
    pub line: usize,
    /// The CPU whose records they are.
    pub cpu: u32,
    /// What the line says, after `kept: `.
    pub text: String,
}

/// Records that are one branch through a mitigation thunk (see [`fold`]).
#[derive(Serialize)]
pub struct GroupOut {
    /// Its number in the snapshot, from 0 (the newest group).
    pub id: u32,
    /// "return", "indirect-call", "indirect-jump" or "indirect" (a call or a jump).
    pub kind: &'static str,
    /// The thunk (`its_return_thunk`, `__x86_indirect_thunk_r11`, ...).
    pub thunk: String,
    /// The return thunk an indirect thunk returned through (`its_return_thunk`), when it did:
    /// retpolines of kernels whose `RET` is a return thunk's jump, such as Debian's 7.3 (schema
    /// 1.7).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_thunk: Option<String>,
    /// The records' indices, newest first: the branch goes from the last one's `from` to the
    /// first one's `to`.
    pub records: Vec<u32>,
    /// What kind of branch it is.
    #[serde(skip)]
    pub via: Via,
    /// Its records' positions in [`SnapshotOut::records`]: `start..end`.
    #[serde(skip)]
    pub span: std::ops::Range<usize>,
}

/// One snapshot: the exception it was taken at, and its records.
#[derive(Serialize)]
pub struct SnapshotOut {
    /// The input it was found in: a log's name, or a dump's name `@` the area's physical address.
    pub source: String,
    /// Input line of the snapshot's header (0 for dumps).
    pub line: usize,
    /// The CPU that took the exception.
    pub cpu: u32,
    /// The CPU's snapshot sequence number.
    pub seq: u64,
    /// The exception vector.
    pub vector: u32,
    /// The vector's mnemonic (`#PF`, ...).
    pub vector_name: &'static str,
    /// "exception", "panic" (the entry of panic()) or "stop" (a CPU as a panic stopped it);
    /// schema 1.1.
    pub kind: &'static str,
    /// The exception's error code, hex.
    pub error: String,
    /// The faulting instruction pointer, hex.
    pub rip: String,
    /// CR2 (the faulting address of a #PF), hex.
    pub cr2: String,
    /// The recorder's flavour (`intel-lbr`, ...).
    pub flavour: String,
    /// The recorder's record format.
    pub format: u32,
    /// How the capture went: complete, torn, was-off, foreign, nmi-entry or zeroed.
    pub state: &'static str,
    /// 0: the oopsing exception; N: the exception it interrupted N levels out (absent when the
    /// log does not say, and for dumps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nest: Option<u32>,
    /// The branch filter the records were taken with: "all", "functions" or "calls" (schema
    /// 1.5).
    pub filter: &'static str,
    /// All announced records were found.
    pub complete: bool,
    /// The printer found the snapshot's slot or kept BTS buffer taken by a newer capture once it
    /// had printed it
    /// (its end line says `rewritten`): the records may mix two snapshots (schema 1.9; absent
    /// when false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rewritten: bool,
    /// The records.
    pub records: Vec<RecordOut>,
    /// The records that are one branch through a mitigation thunk (schema 1.2).
    pub groups: Vec<GroupOut>,
    /// The straight-line check over the snapshot's record pairs (schema 1.3).
    pub straight_line: StraightSummary,
    /// The last exception record, where the recorder has one and it held a branch (schema 1.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exception: Option<LastExceptionOut>,
    /// The branch trace store's history, when lbr-dump recorded with BTS (schema 1.6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bts: Option<BtsOut>,
}

/// A snapshot's branch trace store history ([`Bts`]), its records symbolized. Which fields are
/// there depends on `state`.
#[derive(Serialize)]
pub struct BtsOut {
    /// Input line of its `bts` line (0 for dumps).
    #[serde(skip)]
    pub line: usize,
    /// "kept" (the records follow), "foreign" (another owner's debug store was in place: none
    /// kept), "reused" (a later capture took the buffer), "inconsistent" (the snapshot's BTS
    /// fields do not describe its buffer), "unreadable" (dumps: the buffer is not in the dump),
    /// "not-kept" (dumps: the capture kept no buffer).
    pub state: &'static str,
    /// Inconsistent, unreadable: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Kept: the buffer had wrapped (every slot is history).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrapped: Option<bool>,
    /// Kept: records the buffer holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Kept, logs: record lines the module printed (the newest `shown` of `total`); `records`
    /// holds those found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shown: Option<u32>,
    /// Kept: the buffer's virtual address, hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer: Option<String>,
    /// Kept, dumps: its physical address, hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phys: Option<String>,
    /// Kept: its size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Foreign: IA32_DS_AREA as the capture found it, hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_area: Option<String>,
    /// Reused: the sequence number of the snapshot that owns the buffer now (0: recording).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<u64>,
    /// The records, newest first (`index` 0 the newest): every one (never folded).
    pub records: Vec<RecordOut>,
}

/// Symbol disagreements reported one by one per BTS history, before the rest are counted.
const BTS_SYMBOL_WARNINGS: usize = 10;

impl BtsOut {
    /// `b`, found in `source`, with its records symbolized (each address once: a history is
    /// mostly loops); problems go to `warnings`.
    pub fn symbolized<'a>(
        source: &str,
        b: &'a Bts,
        symbolizer: &Symbolizer,
        warnings: &mut Vec<String>,
    ) -> BtsOut {
        let mut out = BtsOut {
            line: b.line,
            state: b.state.name(),
            reason: None,
            wrapped: None,
            total: None,
            shown: None,
            buffer: None,
            phys: None,
            size: None,
            ds_area: None,
            owner: None,
            records: Vec::new(),
        };
        match &b.state {
            BtsState::Kept {
                total,
                wrapped,
                buffer,
                size,
                phys,
                shown,
            } => {
                out.total = Some(*total);
                out.wrapped = Some(*wrapped);
                out.buffer = Some(format!("{buffer:#x}"));
                out.size = Some(*size);
                out.phys = phys.map(|p| format!("{p:#x}"));
                out.shown = *shown;
            }
            BtsState::Foreign { ds_area } => out.ds_area = Some(format!("{ds_area:#x}")),
            BtsState::Reused { owner } => out.owner = Some(*owner),
            BtsState::Inconsistent { reason } | BtsState::Unreadable { reason } => {
                out.reason = Some(reason.clone())
            }
            BtsState::NotKept => {}
        }
        let mut cache: std::collections::HashMap<(u64, Option<&str>), Place> =
            std::collections::HashMap::new();
        let mut mine = Vec::new();
        for r in &b.records {
            let what = |end: &str| format!("{source}:{}: bts #{} {end}", r.line, r.index);
            let mut place = |addr: u64, printed: Option<&'a str>, end: &str| {
                cache
                    .entry((addr, printed))
                    .or_insert_with(|| symbolizer.place(addr, printed, &what(end), &mut mine))
                    .clone()
            };
            let from = place(r.branch.from, r.from_sym.as_deref(), "from");
            let to = place(r.branch.to, r.to_sym.as_deref(), "to");
            out.records
                .push(RecordOut::branch(r.index, r.line, from, to));
        }
        let more = mine.len().saturating_sub(BTS_SYMBOL_WARNINGS);
        warnings.extend(mine.into_iter().take(BTS_SYMBOL_WARNINGS));
        if more > 0 {
            warnings.push(format!(
                "{source}:{}: {more} more BTS record ends whose printed symbol disagrees with the ELF files",
                b.line
            ));
        }
        out
    }
}

/// Everything lbr-decode prints: the JSON document, and what the other formats render.
#[derive(Serialize)]
pub struct Output {
    /// [`VERSION`].
    pub version: u32,
    /// Fields added within `version` (1: `kind`; 2: `function_source`, `group`, `groups`;
    /// 3: `straight_line`; 4: `last_exception`; 5: `filter`; 6: `bts`; 7: a group's
    /// `return_thunk`; 8: `kept`).
    pub minor_version: u32,
    /// Per image, the directory its source paths are relative to.
    pub source_roots: BTreeMap<String, String>,
    /// The KASLR offset recovered from the inputs, hex.
    pub kaslr_offset: Option<String>,
    /// The snapshots, in input order.
    pub snapshots: Vec<SnapshotOut>,
    /// What the logs say lbr-dump kept in memory without printing it (schema 1.8): their
    /// `kept:` lines, in input order.
    pub kept: Vec<KeptOut>,
    /// Whether a memory dump was among the inputs: then what the `kept:` lines name was read
    /// from it (its snapshots are among [`Output::snapshots`]).
    #[serde(skip)]
    pub dump_read: bool,
    /// Problems with the inputs and ELF files, for the user.
    pub warnings: Vec<String>,
}

impl Output {
    /// The output for `snapshots` (each with the name of the input it came from), symbolized by
    /// `symbolizer`. `warnings` are the ones so far; symbolizing adds its own after them.
    pub fn build(
        snapshots: &[(String, Snapshot)],
        symbolizer: &Symbolizer,
        mut warnings: Vec<String>,
    ) -> Output {
        let kaslr_offset = symbolizer.kaslr_offset().map(|k| format!("{k:#x}"));
        let snapshots = snapshots
            .iter()
            .map(|(source, s)| SnapshotOut::symbolized(source, s, symbolizer, &mut warnings))
            .collect();
        // A warning about an input as a whole, met at every snapshot, is said once.
        let mut seen = std::collections::HashSet::new();
        warnings.retain(|w| seen.insert(w.clone()));
        let mut out = Output {
            version: VERSION,
            minor_version: MINOR_VERSION,
            source_roots: BTreeMap::new(),
            kaslr_offset,
            snapshots,
            kept: Vec::new(),
            dump_read: false,
            warnings,
        };
        out.strip_common_source_dir();
        out
    }

    /// Every place of every record, and of each last exception record, in order (from, then
    /// to).
    fn places(&self) -> impl Iterator<Item = &Place> {
        self.snapshots.iter().flat_map(|s| {
            s.records
                .iter()
                .chain(s.bts.iter().flat_map(|b| b.records.iter()))
                .flat_map(|r| [&r.from, &r.to])
                .chain(s.last_exception.iter().flat_map(|l| [&l.from, &l.to]))
        })
    }

    /// The images the places were found in, in order of first appearance.
    fn images(&self) -> Vec<String> {
        let mut images: Vec<String> = Vec::new();
        for i in self.places().filter_map(|p| p.image.as_ref()) {
            if !images.contains(i) {
                images.push(i.clone());
            }
        }
        images
    }

    /// The absolute source paths of `image`'s frames.
    fn absolute_files(&self, image: &str) -> Vec<String> {
        self.places()
            .filter(|p| p.image.as_deref() == Some(image))
            .flat_map(|p| p.frames.iter())
            .filter_map(|f| f.file.clone())
            .filter(|f| f.starts_with('/'))
            .collect()
    }

    /// Source paths relative to the directory all of one image's paths share (the kernel tree
    /// the vmlinux was built in, a module's source directory), as scripts/decode_stacktrace.sh
    /// prints them. A module's DWARF also names the kernel headers it inlined, in the kernel
    /// tree: those are made relative to that tree (recognised by its `include/` or `arch/`
    /// directory), under the key `kernel-tree`, and the module's own files relative to what
    /// they share.
    fn strip_common_source_dir(&mut self) {
        for image in self.images() {
            let roots = source_roots(&image, &self.absolute_files(&image));
            for (_, root) in &roots {
                self.strip_prefix(&image, root);
            }
            for (key, root) in roots {
                self.source_roots.entry(key).or_insert(root);
            }
        }
    }

    /// Removes `root` from the start of `image`'s source paths that have it.
    fn strip_prefix(&mut self, image: &str, root: &str) {
        for f in self
            .snapshots
            .iter_mut()
            .flat_map(|s| {
                s.records
                    .iter_mut()
                    .chain(s.bts.iter_mut().flat_map(|b| b.records.iter_mut()))
                    .flat_map(|r| [&mut r.from, &mut r.to])
                    .chain(
                        s.last_exception
                            .iter_mut()
                            .flat_map(|l| [&mut l.from, &mut l.to]),
                    )
            })
            .filter(|p| p.image.as_deref() == Some(image))
            .flat_map(|p| p.frames.iter_mut())
        {
            if let Some(rel) = f.file.as_deref().and_then(|x| x.strip_prefix(root)) {
                f.file = Some(rel.to_string());
            }
        }
    }
}

impl SnapshotOut {
    /// `s`, found in `source`, with its records symbolized; problems go to `warnings`.
    pub fn symbolized(
        source: &str,
        s: &Snapshot,
        symbolizer: &Symbolizer,
        warnings: &mut Vec<String>,
    ) -> SnapshotOut {
        let mut records: Vec<RecordOut> = s
            .records
            .iter()
            .map(|r| RecordOut::symbolized(source, r, symbolizer, warnings))
            .collect();
        let groups = group_records(&mut records, |at| {
            let b = &s.records[at];
            symbolizer.code(b.branch.from, b.from_sym.as_deref(), 8)
        });
        let straight_line = check_straight(s, &mut records, symbolizer);
        let last_exception = s.ler.as_ref().map(|l| {
            let what = |end: &str| format!("{source}:{}: ler {end}", l.line);
            LastExceptionOut {
                line: l.line,
                from: symbolizer.place(l.from, l.from_sym.as_deref(), &what("from"), warnings),
                to: symbolizer.place(l.to, l.to_sym.as_deref(), &what("to"), warnings),
            }
        });
        SnapshotOut {
            source: source.to_string(),
            line: s.line,
            cpu: s.cpu,
            seq: s.seq,
            vector: s.vector,
            vector_name: vector_name(s.vector),
            kind: Kind::of(s.vector).name(),
            error: format!("{:#x}", s.error),
            rip: format!("{:#x}", s.rip),
            cr2: format!("{:#x}", s.cr2),
            flavour: s.flavour.clone(),
            format: s.format,
            state: state_name(s.state),
            nest: s.nest,
            filter: s.filter.name(),
            complete: s.complete,
            rewritten: s.rewritten,
            records,
            groups,
            straight_line,
            last_exception,
            bts: s
                .bts
                .as_ref()
                .map(|b| BtsOut::symbolized(source, b, symbolizer, warnings)),
        }
    }
}

/// The straight-line check of each pair of consecutive records (newest first: from record
/// N+1's `to` to record N's `from`), set on record N; the counts. Records taken with a branch
/// filter are not straight-line code apart: each pair is unchecked, `filtered`.
fn check_straight(
    s: &Snapshot,
    records: &mut [RecordOut],
    symbolizer: &Symbolizer,
) -> StraightSummary {
    let mut sum = StraightSummary::default();
    for n in 0..records.len().saturating_sub(1) {
        let (to, from) = (s.records[n + 1].branch.to, s.records[n].branch.from);
        let verdict = if s.filter == Filter::All {
            symbolizer.straight(to, &records[n + 1].to, from, &records[n].from)
        } else {
            Verdict::Unchecked(Reason::Filtered)
        };
        let out = match verdict {
            Verdict::Ok => {
                sum.ok += 1;
                StraightOut {
                    status: "ok",
                    reason: None,
                    at: None,
                    mnemonic: None,
                }
            }
            Verdict::Unchecked(r) => {
                sum.unchecked += 1;
                *sum.unchecked_reasons.entry(r.name()).or_default() += 1;
                StraightOut {
                    status: "unchecked",
                    reason: Some(r.name()),
                    at: None,
                    mnemonic: None,
                }
            }
            Verdict::Violated(v) => {
                sum.violated += 1;
                sum.violations.push(records[n].index);
                StraightOut {
                    status: "violated",
                    reason: Some(v.kind.name()),
                    at: Some(Place {
                        frames: Vec::new(),
                        ..symbolizer.place(v.addr, None, "", &mut Vec::new())
                    }),
                    mnemonic: Some(v.mnemonic),
                }
            }
        };
        records[n].straight_line = Some(out);
    }
    sum
}

/// The thunk groups of `records`, each record of a group labelled with its id. An indirect
/// branch whose kind the recorder did not say is a call or a jump by the instruction that
/// entered the thunk, when `code(position of its record)` has its bytes.
fn group_records(
    records: &mut [RecordOut],
    code: impl Fn(usize) -> Option<Vec<u8>>,
) -> Vec<GroupOut> {
    (0..)
        .zip(fold::groups(records))
        .map(|(id, mut g)| {
            if g.via == Via::Indirect(None) {
                let entry = code(g.end - 1);
                g.via = Via::Indirect(entry.as_deref().and_then(fold::transfer_of));
            }
            for r in &mut records[g.start..g.end] {
                r.group = Some(id);
            }
            GroupOut {
                id,
                kind: g.via.name(),
                thunk: g.thunk,
                return_thunk: g.ret,
                records: records[g.start..g.end].iter().map(|r| r.index).collect(),
                via: g.via,
                span: g.start..g.end,
            }
        })
        .collect()
}

impl RecordOut {
    /// A record that is only a branch (BTS: no flags, cycles or type), before grouping.
    pub fn branch(index: u32, line: usize, from: Place, to: Place) -> Self {
        RecordOut {
            index,
            line,
            from,
            to,
            mispred: None,
            in_tx: None,
            abort: None,
            spec: None,
            cycles: None,
            branch_type: None,
            group: None,
            straight_line: None,
        }
    }

    /// `r`, found in `source`, with both ends symbolized; problems go to `warnings`, each
    /// naming the record's line and end.
    pub fn symbolized(
        source: &str,
        r: &Record,
        symbolizer: &Symbolizer,
        warnings: &mut Vec<String>,
    ) -> RecordOut {
        let b = &r.branch;
        let what = |end: &str| format!("{source}:{}: #{} {end}", r.line, r.index);
        RecordOut {
            index: r.index,
            line: r.line,
            from: symbolizer.place(b.from, r.from_sym.as_deref(), &what("from"), warnings),
            to: symbolizer.place(b.to, r.to_sym.as_deref(), &what("to"), warnings),
            mispred: b.mispred,
            in_tx: b.in_tx,
            abort: b.abort,
            spec: b.spec,
            cycles: b.cycles,
            branch_type: b.branch_type.map(|t| t.name()),
            group: None,
            straight_line: None,
        }
    }
}

/// A capture state as the JSON output names it.
fn state_name(state: State) -> &'static str {
    match state {
        State::Complete => "complete",
        State::Torn => "torn",
        State::WasOff => "was-off",
        State::Foreign => "foreign",
        State::NmiEntry => "nmi-entry",
        State::Zeroed => "zeroed",
        State::Lent => "lent",
    }
}

/// The roots to strip from one image's absolute source paths `files`, longer first (a kernel
/// tree may lie inside the module's directory): (key in `source_roots`, directory).
fn source_roots(image: &str, files: &[String]) -> Vec<(String, String)> {
    let tree = separate_kernel_tree(files);
    let own: Vec<&String> = files
        .iter()
        .filter(|f| tree.as_ref().is_none_or(|t| !f.starts_with(t.as_str())))
        .collect();
    let mut roots = Vec::new();
    if let Some(prefix) = common_dir(&own) {
        roots.push((image.to_string(), prefix));
    }
    if let Some(t) = tree {
        roots.push(("kernel-tree".to_string(), t));
    }
    roots.sort_by_key(|(_, r)| std::cmp::Reverse(r.len()));
    roots
}

/// The kernel tree most of `files` are in, if some files are in one and others are not.
fn separate_kernel_tree(files: &[String]) -> Option<String> {
    let mut trees = BTreeMap::<&str, usize>::new();
    for t in files.iter().filter_map(|f| kernel_tree(f)) {
        *trees.entry(t).or_default() += 1;
    }
    trees
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(t, _)| t.to_string())
        .filter(|t| t.matches('/').count() >= 2)
        .filter(|t| files.iter().any(|f| !f.starts_with(t.as_str())))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot whose header says `filter=functions` has every pair unchecked for that
    /// reason (its records are not straight-line code apart); the same records unfiltered are
    /// checked as usual (here, without ELF files: unchecked for want of a vmlinux, not filtered).
    #[test]
    fn a_filtered_snapshot_is_not_checked_for_straight_line() {
        let log = |filter: &str| {
            format!(
                "lbr_dump: v1 cpu=0 seq=1 vector=14 (#PF) error=0x0 rip=0xffffffff81000040 cr2=0x0 flavour=intel-lbr format=5 records=3 state=complete nest=0{filter}
lbr_dump: #0 0xffffffff81000040 -> 0xffffffffc0000000 cycles=1
lbr_dump: #1 0xffffffff81000010 -> 0xffffffff81000030 cycles=1
lbr_dump: #2 0xffffffff81000100 -> 0xffffffff81000000 cycles=1
lbr_dump: end cpu=0 seq=1
"
            )
        };
        let sym = Symbolizer::load(None, &[], &mut Vec::new()).unwrap();
        let out = |text: String| {
            let p = crate::log::parse_log(&text);
            assert!(p.warnings.is_empty(), "{:?}", p.warnings);
            let snaps: Vec<_> = p
                .snapshots
                .into_iter()
                .map(|s| ("t".to_string(), s))
                .collect();
            Output::build(&snaps, &sym, Vec::new())
        };
        let filtered = out(log(" filter=functions"));
        let s = &filtered.snapshots[0];
        assert_eq!(s.filter, "functions");
        assert_eq!((s.straight_line.ok, s.straight_line.violated), (0, 0));
        assert_eq!(
            s.straight_line.unchecked_reasons,
            BTreeMap::from([("filtered", 2)])
        );
        assert!(s.records[..2]
            .iter()
            .all(|r| r
                .straight_line
                .as_ref()
                .is_some_and(|v| (v.status, v.reason) == ("unchecked", Some("filtered")))));
        let all = out(log(""));
        let s = &all.snapshots[0];
        assert_eq!(s.filter, "all");
        assert!(!s.straight_line.unchecked_reasons.contains_key("filtered"));
        assert_eq!(s.straight_line.unchecked, 2);
    }

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

    #[test]
    fn a_modules_kernel_headers_are_relative_to_the_kernel_tree() {
        let files = [
            "/work/m/a.c",
            "/work/m/sub/b.c",
            "/src/linux/include/linux/list.h",
            "/src/linux/arch/x86/include/asm/msr.h",
        ]
        .map(String::from);
        assert_eq!(
            source_roots("m", &files),
            [
                ("kernel-tree".to_string(), "/src/linux/".to_string()),
                ("m".to_string(), "/work/m/".to_string())
            ]
        );
    }
}
