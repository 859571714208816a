// SPDX-License-Identifier: GPL-2.0

//! The straight-line check between consecutive records, against the kernel's instructions.
//!
//! Between two consecutive records the CPU ran straight-line code: from the older record's `to`
//! up to the newer record's `from`, no branch was taken (a taken one would be a record between
//! them). [`KernelText::check`] walks that path instruction by instruction in vmlinux (decoded
//! with `iced-x86`) and says whether it can be: every instruction before `from` must let control
//! fall through (a conditional branch not taken does; a jmp, call, ret, iret, int3, ud2, ...
//! does not), and `from` must be reached exactly on an instruction boundary, within
//! [`BOUND`] bytes. An exception or interrupt can be taken at any instruction: its `from` is the
//! interrupted instruction, which is still reached straight.
//!
//! The file's bytes are not the running kernel's: the kernel patches its text at boot and
//! later. Each patching mechanism whose sites vmlinux lists is modelled, so that no patched site
//! makes a false violation:
//!
//! - alternatives (`.altinstructions`, 14-byte `struct alt_instr`: s32 relative offsets of the
//!   site and of its replacement in `.altinstr_replacement`, the site's and the replacement's
//!   lengths): the site runs one of its variants (the original, or a replacement padded with
//!   NOPs; ALTERNATIVE_2 nests two entries at one site). The path may cross the site when some
//!   variant runs through it straight, and may end in it when some variant reaches `from` on an
//!   instruction boundary straight; otherwise the pair is unchecked, never violated (the
//!   variant that ran is not known). Paravirt calls are alternatives in this kernel too.
//! - static keys (`__jump_table`, 16-byte `struct jump_entry`: s32 relative code offset), the
//!   `__fentry__` call sites (`__mcount_loc`, `__patchable_function_entries`: absolute
//!   addresses) and static call sites (`.static_call_sites`, 8-byte `struct static_call_site`:
//!   s32 relative address): a jmp or call of the same length as a NOP in either state. When it
//!   was a branch at run time the branch was taken and recorded, so a path that goes on past the
//!   site went through it as a NOP: it is stepped over.
//! - retpoline sites (`.retpoline_sites`, s32 relative): `call/jmp __x86_indirect_thunk_r11` is
//!   rewritten to `call/jmp *%r11` padded with NOPs, or `lfence; call *%r11`: still a branch,
//!   but possibly at a later offset in the site, so a `from` inside the site is accepted.
//! - return sites (`.return_sites`): `jmp __x86_return_thunk` becomes `ret; int3...` or a jmp
//!   to another thunk: a branch at the site's own address either way, which the file already
//!   says. Call depth tracking (`.call_sites`) changes calls' targets, not that they are calls.
//! - static call trampolines (`.static_call.text`, between `__static_call_text_start` and
//!   `_end`): their bytes are rewritten to a jmp to the current target or a ret, so a path
//!   into one is unchecked unless `from` is where it enters.
//! - IBT: a poisoned `endbr64` is a NOP of the same length either way (`.ibt_endbr_seal`).
//! - call depth tracking and call padding: a call may land in the padding before a function
//!   (`__pfx_`), which the file fills with one-byte NOPs: every byte is an instruction boundary,
//!   so whatever accounting code runs there, the path through it is straight.
//! - not modelled: FineIBT (clang kCFI kernels rewrite the `__cfi_` preambles and the callers'
//!   hash checks; a gcc-built kernel, as tested here, has neither) and code patched by kprobes,
//!   BPF or livepatch (a kprobe's int3 is an exception, recorded as such).
//!
//! Module .ko files are read the same way ([`load_module`]), their tables through their
//! relocations; a module's path is walked in one text section (the two ends in one section).
//!
//! What cannot be decided is unchecked, with a reason: an end outside the known text (user
//! space, unknown code, a module whose .ko was not given or whose section base is unknown, the
//! two ends in different images or sections), no vmlinux, undecodable bytes, `from` farther than [`BOUND`] or a site none of whose
//! variants explains the path. The check assumes the recorder kept every taken branch: under
//! lbr-dump's `filter=functions` or `calls` conditional branches (and, for `calls`, jumps) are
//! not recorded and the check flags paths that are fine.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};
use object::{Object, ObjectSection, ObjectSymbol};

/// How far (bytes) the path from `to` is walked before the pair is unchecked.
pub const BOUND: u64 = 4096;

/// What the check says of one pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Straight-line code leads from `to` to `from`.
    Ok,
    /// It cannot: the instruction that breaks the path.
    Violated(Violation),
    /// Undecided, and why.
    Unchecked(Reason),
}

/// Why a pair's path cannot be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Link address of the offending instruction.
    pub addr: u64,
    /// Its mnemonic (`call`, `jmp`, `ret`, ...).
    pub mnemonic: String,
    /// What is wrong with it.
    pub kind: ViolationKind,
}

/// How a [`Violation`]'s instruction breaks the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    /// It transfers control (a taken branch, or an exception) before `from`.
    Transfer,
    /// `from` is inside it: not on an instruction boundary.
    Misaligned,
}

impl ViolationKind {
    /// As the JSON output names it.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::Transfer => "branch-before-from",
            ViolationKind::Misaligned => "from-inside-instruction",
        }
    }
}

/// Why a pair is unchecked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// No vmlinux was given, or the KASLR offset is unknown.
    NoVmlinux,
    /// The two ends are in different images (or a module's different sections).
    CrossImage,
    /// An end is outside the known text (user space, unknown code).
    OutsideText,
    /// `from` was not reached within [`BOUND`] bytes.
    TooFar,
    /// The path crosses runtime-patched code that no modelled variant explains.
    Patched,
    /// Bytes on the path do not decode.
    Undecodable,
    /// The records were taken with a branch filter (`filter=functions` or `calls`): branches of
    /// the kinds it leaves out may have been taken between them, so no path is straight-line.
    Filtered,
}

impl Reason {
    /// As the JSON and text outputs name it.
    pub fn name(self) -> &'static str {
        match self {
            Reason::NoVmlinux => "no-vmlinux",
            Reason::CrossImage => "cross-image",
            Reason::OutsideText => "outside-text",
            Reason::TooFar => "too-far",
            Reason::Patched => "patched-code",
            Reason::Undecodable => "undecodable",
            Reason::Filtered => "filtered",
        }
    }
}

/// An alternatives site (overlapping `alt_instr` entries merged): its range and the bytes of
/// each variant, each as long as the range.
#[derive(Clone, Debug, Default)]
pub struct AltSite {
    /// Length of the site in bytes.
    pub len: u64,
    /// The original bytes first, then each replacement laid over them.
    pub variants: Vec<Vec<u8>>,
}

/// The runtime-patched places of the text, by link address.
#[derive(Clone, Debug, Default)]
pub struct Sites {
    /// Alternatives, by start address.
    pub alts: BTreeMap<u64, AltSite>,
    /// Sites that are a branch or a NOP of the same length (static keys, fentry calls, static
    /// call sites).
    pub toggles: std::collections::BTreeSet<u64>,
    /// Retpoline sites.
    pub retpolines: std::collections::BTreeSet<u64>,
    /// Static call trampolines.
    pub trampolines: Option<std::ops::Range<u64>>,
}

/// vmlinux's executable bytes and patch sites.
pub struct KernelText {
    /// (link address, bytes) of each executable section.
    segments: Vec<(u64, Vec<u8>)>,
    sites: Sites,
}

impl KernelText {
    /// Text `segments` (link address, bytes) with `sites` (for tests and for [`Self::load`]).
    pub fn new(segments: Vec<(u64, Vec<u8>)>, sites: Sites) -> KernelText {
        KernelText { segments, sites }
    }

    /// vmlinux's executable sections and the patch sites its tables list.
    pub fn load(path: &Path) -> Result<KernelText> {
        let data =
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let file = object::File::parse(&*data)
            .with_context(|| format!("{}: not an ELF file", path.display()))?;
        let mut segments = Vec::new();
        for s in file.sections() {
            if s.kind() == object::SectionKind::Text {
                if let Ok(d) = s.data() {
                    if !d.is_empty() {
                        segments.push((s.address(), d.to_vec()));
                    }
                }
            }
        }
        let mem = Memory { file: &file };
        let sites = read_sites(&mem, &segments);
        Ok(KernelText { segments, sites })
    }

    /// Up to 15 bytes of text at link address `addr`.
    fn bytes_at(&self, addr: u64) -> Option<&[u8]> {
        self.segments.iter().find_map(|(base, d)| {
            let off = usize::try_from(addr.checked_sub(*base)?).ok()?;
            (off < d.len()).then(|| &d[off..(off + 15).min(d.len())])
        })
    }

    /// Whether straight-line code leads from link address `to` (the older record's target) to
    /// link address `from` (the newer record's source).
    pub fn check(&self, to: u64, from: u64) -> Verdict {
        let mut pos = to;
        loop {
            if pos == from {
                return Verdict::Ok;
            }
            if pos.wrapping_sub(to) >= BOUND {
                return Verdict::Unchecked(Reason::TooFar);
            }
            if self
                .sites
                .trampolines
                .as_ref()
                .is_some_and(|t| t.contains(&pos))
            {
                return Verdict::Unchecked(Reason::Patched);
            }
            if let Some((&start, site)) = self.sites.alts.range(..=pos).next_back() {
                if pos < start + site.len {
                    match through_alternative(start, site, pos, from) {
                        AltWalk::Reached => return Verdict::Ok,
                        AltWalk::Through => {
                            pos = start + site.len;
                            continue;
                        }
                        AltWalk::No => return Verdict::Unchecked(Reason::Patched),
                    }
                }
            }
            let Some(bytes) = self.bytes_at(pos) else {
                return Verdict::Unchecked(Reason::OutsideText);
            };
            let Some(insn) = decode(bytes, pos) else {
                return Verdict::Unchecked(Reason::Undecodable);
            };
            let next = pos + insn.len() as u64;
            if (pos + 1..next).contains(&from) {
                if self.sites.retpolines.contains(&pos) {
                    return Verdict::Ok; // the rewritten branch may sit later in the site
                }
                return Verdict::Violated(Violation {
                    addr: pos,
                    mnemonic: mnemonic(&insn),
                    kind: ViolationKind::Misaligned,
                });
            }
            if !falls_through(&insn) && !self.sites.toggles.contains(&pos) {
                return Verdict::Violated(Violation {
                    addr: pos,
                    mnemonic: mnemonic(&insn),
                    kind: ViolationKind::Transfer,
                });
            }
            pos = next;
        }
    }
}

/// A module's text, one [`KernelText`] per executable section (addresses are section offsets),
/// with the patch sites its tables list. A module is relocatable: each table entry's field is
/// a relocation against a symbol (`R_X86_64_PC32` for the relative ones, `R_X86_64_64` for
/// `__mcount_loc`), so the site is the symbol's section and its value plus the addend (S + A:
/// P plus the stored S + A - P), whatever the field's bytes hold before loading.
pub fn load_module(path: &Path) -> Result<BTreeMap<usize, KernelText>> {
    let data = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{}: not an ELF file", path.display()))?;
    // Every relocated table field: (table name, offset in it) -> (section, offset).
    let mut fields: BTreeMap<(&str, u64), (usize, u64)> = BTreeMap::new();
    let tables = [
        ".altinstructions",
        ".retpoline_sites",
        "__jump_table",
        ".static_call_sites",
        "__mcount_loc",
        "__patchable_function_entries",
    ];
    for name in tables {
        let Some(t) = file.section_by_name(name) else {
            continue;
        };
        for (off, r) in t.relocations() {
            let object::RelocationTarget::Symbol(i) = r.target() else {
                continue;
            };
            let Ok(sym) = file.symbol_by_index(i) else {
                continue;
            };
            let Some(sec) = sym.section_index() else {
                continue;
            };
            let at = sym.address().wrapping_add_signed(r.addend());
            fields.insert((name, off), (sec.0, at));
        }
    }
    let bytes_of = |sec: usize| -> Option<Vec<u8>> {
        let s = file.section_by_index(object::SectionIndex(sec)).ok()?;
        s.data().ok().map(<[u8]>::to_vec)
    };
    let mut out = BTreeMap::new();
    for s in file.sections() {
        if s.kind() != object::SectionKind::Text {
            continue;
        }
        let Ok(code) = s.data() else { continue };
        let sec = s.index().0;
        let segments = vec![(0, code.to_vec())];
        let here = |name: &str, stride: u64, field: u64| -> Vec<u64> {
            fields
                .range((name, 0)..=(name, u64::MAX))
                .filter(|((_, off), (at_sec, _))| off % stride == field && *at_sec == sec)
                .map(|(_, &(_, at))| at)
                .collect()
        };
        let mut sites = Sites::default();
        sites.toggles.extend(here("__jump_table", 16, 0));
        sites.toggles.extend(here(".static_call_sites", 8, 0));
        sites.toggles.extend(here("__mcount_loc", 8, 0));
        sites
            .toggles
            .extend(here("__patchable_function_entries", 8, 0));
        sites.retpolines.extend(here(".retpoline_sites", 4, 0));
        let alt_table = file
            .section_by_name(".altinstructions")
            .and_then(|t| t.data().ok());
        let mut entries = Vec::new();
        for ((_, off), &(site_sec, site)) in fields
            .range((".altinstructions", 0)..=(".altinstructions", u64::MAX))
            .filter(|((_, off), (at_sec, _))| off % ALT_INSTR == 0 && *at_sec == sec)
        {
            let lens = alt_table.and_then(|t| t.get(*off as usize + 12..*off as usize + 14));
            let repl = fields.get(&(".altinstructions", off + 4));
            let (Some(lens), Some(&(repl_sec, repl))) = (lens, repl) else {
                continue;
            };
            let (len, rlen) = (u64::from(lens[0]), u64::from(lens[1]));
            let bytes = bytes_of(repl_sec)
                .and_then(|b| {
                    b.get(repl as usize..(repl + rlen) as usize)
                        .map(<[u8]>::to_vec)
                })
                .unwrap_or_default();
            if len > 0 && site_sec == sec {
                entries.push((site, len, bytes));
            }
        }
        sites.alts = alt_sites(entries, &segments);
        out.insert(sec, KernelText { segments, sites });
    }
    Ok(out)
}

/// One instruction at `ip`, if the bytes hold a whole valid one.
pub(crate) fn decode(bytes: &[u8], ip: u64) -> Option<Instruction> {
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let insn = d.decode();
    (!insn.is_invalid()).then_some(insn)
}

/// Control goes on to the next instruction (a conditional branch may: when not taken).
fn falls_through(insn: &Instruction) -> bool {
    matches!(
        insn.flow_control(),
        FlowControl::Next | FlowControl::ConditionalBranch | FlowControl::XbeginXabortXend
    )
}

fn mnemonic(insn: &Instruction) -> String {
    format!("{:?}", insn.mnemonic()).to_lowercase()
}

/// How a path fares in an alternatives site.
enum AltWalk {
    /// Some variant reaches `from`, in the site, straight.
    Reached,
    /// Some variant runs straight through to the site's end.
    Through,
    /// No variant explains the path.
    No,
}

/// The path from `pos` (in the site at `start`) to `from`, in the site's variants.
fn through_alternative(start: u64, site: &AltSite, pos: u64, from: u64) -> AltWalk {
    let end = start + site.len;
    let (goal, reached) = if (pos..end).contains(&from) {
        (from - start, AltWalk::Reached)
    } else {
        (site.len, AltWalk::Through)
    };
    let ok = site
        .variants
        .iter()
        .any(|v| straight_in(v, start, pos - start, goal));
    if ok {
        reached
    } else {
        AltWalk::No
    }
}

/// Whether the code `bytes` (at link address `base`) runs straight from offset `at` to exactly
/// offset `goal`.
fn straight_in(bytes: &[u8], base: u64, mut at: u64, goal: u64) -> bool {
    while at < goal {
        let rest = &bytes[at as usize..];
        let Some(insn) = decode(&rest[..rest.len().min(15)], base + at) else {
            return false;
        };
        if !falls_through(&insn) {
            return false;
        }
        at += insn.len() as u64;
    }
    at == goal
}

/// vmlinux's allocated sections' bytes by link address.
struct Memory<'a, 'd> {
    file: &'a object::File<'d>,
}

impl Memory<'_, '_> {
    /// `len` bytes at link address `addr`, if a section with file bytes holds them all.
    fn read(&self, addr: u64, len: u64) -> Option<&[u8]> {
        self.file.sections().find_map(|s| {
            let off = addr.checked_sub(s.address())?;
            if s.address() == 0 || off + len > s.size() {
                return None;
            }
            let d = s.data().ok()?;
            d.get(off as usize..(off + len) as usize)
        })
    }

    /// The range between two symbols (`__start_x`, `__stop_x`).
    fn between(&self, start: &str, stop: &str) -> Option<(u64, u64)> {
        let (mut a, mut b) = (None, None);
        for s in self.file.symbols() {
            match s.name() {
                Ok(n) if n == start => a = Some(s.address()),
                Ok(n) if n == stop => b = Some(s.address()),
                _ => {}
            }
        }
        Some((a?, b?)).filter(|(a, b)| a <= b)
    }

    /// A table's range: the section called `section` if there is one, else the symbols.
    fn table(&self, section: &str, start: &str, stop: &str) -> Option<(u64, u64)> {
        match self.file.section_by_name(section) {
            Some(s) if s.address() != 0 => Some((s.address(), s.address() + s.size())),
            _ => self.between(start, stop),
        }
    }

    /// The targets of a table of s32 offsets relative to each field (`stride` bytes per entry,
    /// the field at `field` in it).
    fn relative(&self, (a, b): (u64, u64), stride: u64, field: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut p = a;
        while p + stride <= b {
            if let Some(v) = self.read(p + field, 4) {
                let v = i32::from_le_bytes(v.try_into().expect("4 bytes"));
                out.push((p + field).wrapping_add_signed(v.into()));
            }
            p += stride;
        }
        out
    }

    /// A table of absolute u64 addresses.
    fn absolute(&self, (a, b): (u64, u64)) -> Vec<u64> {
        let mut out = Vec::new();
        let mut p = a;
        while p + 8 <= b {
            if let Some(v) = self.read(p, 8) {
                out.push(u64::from_le_bytes(v.try_into().expect("8 bytes")));
            }
            p += 8;
        }
        out
    }
}

/// The patch sites vmlinux's tables list (see the module's documentation).
fn read_sites(mem: &Memory, segments: &[(u64, Vec<u8>)]) -> Sites {
    let mut sites = Sites::default();
    let mut toggles = Vec::new();
    if let Some(r) = mem.table(
        "__jump_table",
        "__start___jump_table",
        "__stop___jump_table",
    ) {
        toggles.extend(mem.relative(r, 16, 0));
    }
    if let Some(r) = mem.table(
        ".static_call_sites",
        "__start_static_call_sites",
        "__stop_static_call_sites",
    ) {
        toggles.extend(mem.relative(r, 8, 0));
    }
    if let Some(r) = mem.table("__mcount_loc", "__start_mcount_loc", "__stop_mcount_loc") {
        toggles.extend(mem.absolute(r));
    }
    if let Some(r) = mem.table(
        "__patchable_function_entries",
        "__start___patchable_function_entries",
        "__stop___patchable_function_entries",
    ) {
        toggles.extend(mem.absolute(r));
    }
    sites.toggles = toggles.into_iter().collect();
    if let Some(r) = mem.table(
        ".retpoline_sites",
        "__retpoline_sites",
        "__retpoline_sites_end",
    ) {
        sites.retpolines = mem.relative(r, 4, 0).into_iter().collect();
    }
    sites.trampolines = mem
        .between("__static_call_text_start", "__static_call_text_end")
        .map(|(a, b)| a..b);
    if let Some(r) = mem.table(
        ".altinstructions",
        "__alt_instructions",
        "__alt_instructions_end",
    ) {
        sites.alts = alternatives(mem, r, segments);
    }
    sites
}

/// One `alt_instr`: its site, the site's length, the replacement's bytes.
type AltEntry = (u64, u64, Vec<u8>);

/// `struct alt_instr`'s size (packed: s32, s32, u32, u8, u8).
const ALT_INSTR: u64 = 14;

/// The alternatives sites of the `.altinstructions` table at `r`, overlapping entries merged.
fn alternatives(
    mem: &Memory,
    (a, b): (u64, u64),
    segments: &[(u64, Vec<u8>)],
) -> BTreeMap<u64, AltSite> {
    let mut entries: Vec<AltEntry> = Vec::new();
    let mut p = a;
    while p + ALT_INSTR <= b {
        if let Some(e) = mem.read(p, ALT_INSTR) {
            let rel = |at: usize| i32::from_le_bytes(e[at..at + 4].try_into().expect("4 bytes"));
            let site = p.wrapping_add_signed(rel(0).into());
            let repl = (p + 4).wrapping_add_signed(rel(4).into());
            let (len, rlen) = (u64::from(e[12]), u64::from(e[13]));
            let bytes = mem.read(repl, rlen).map(<[u8]>::to_vec).unwrap_or_default();
            if len > 0 {
                entries.push((site, len, bytes));
            }
        }
        p += ALT_INSTR;
    }
    alt_sites(entries, segments)
}

/// The alternatives sites of `entries` in the text `segments`, overlapping entries merged.
fn alt_sites(mut entries: Vec<AltEntry>, segments: &[(u64, Vec<u8>)]) -> BTreeMap<u64, AltSite> {
    entries.sort_by_key(|e| (e.0, e.1));
    let original = |at: u64, len: u64| -> Option<Vec<u8>> {
        segments.iter().find_map(|(base, d)| {
            let off = usize::try_from(at.checked_sub(*base)?).ok()?;
            d.get(off..off + len as usize).map(<[u8]>::to_vec)
        })
    };
    // Merge overlapping entries into one site each: [start, end) and its entries.
    let mut groups: Vec<(u64, u64, Vec<AltEntry>)> = Vec::new();
    for e in entries {
        match groups.last_mut() {
            Some(g) if e.0 < g.1 => {
                g.1 = g.1.max(e.0 + e.1);
                g.2.push(e);
            }
            _ => groups.push((e.0, e.0 + e.1, vec![e])),
        }
    }
    let mut out = BTreeMap::new();
    for (start, end, es) in groups {
        let Some(orig) = original(start, end - start) else {
            continue;
        };
        let mut variants = vec![orig.clone()];
        for (site, len, repl) in es {
            // The replacement, padded with NOPs to the entry's length, over the original.
            let mut v = orig.clone();
            let off = (site - start) as usize;
            for i in 0..len as usize {
                v[off + i] = repl.get(i).copied().unwrap_or(0x90);
            }
            variants.push(v);
        }
        out.insert(
            start,
            AltSite {
                len: end - start,
                variants,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0xffff_ffff_8100_0000;

    /// `code` at BASE with `sites`.
    fn text(code: &[u8], sites: Sites) -> KernelText {
        KernelText::new(vec![(BASE, code.to_vec())], sites)
    }

    // mov %rdi,%rax (3) ; jne +2 (2) ; jmp +0 (2 bytes: eb 00) ; call rel32 (5) ; ret (1)
    const MOV: [u8; 3] = [0x48, 0x89, 0xf8];
    const JNE: [u8; 2] = [0x75, 0x02];
    const JMP: [u8; 2] = [0xeb, 0x00];
    const CALL: [u8; 5] = [0xe8, 0, 0, 0, 0];
    const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];
    const RET: u8 = 0xc3;

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn a_jcc_on_the_way_is_fine() {
        let t = text(&cat(&[&MOV, &JNE, &MOV, &[RET]]), Sites::default());
        assert_eq!(t.check(BASE, BASE + 8), Verdict::Ok);
        assert_eq!(t.check(BASE, BASE), Verdict::Ok);
        assert_eq!(t.check(BASE + 3, BASE + 5), Verdict::Ok);
    }

    #[test]
    fn a_jmp_or_call_on_the_way_is_a_violation() {
        let t = text(&cat(&[&MOV, &JMP, &MOV, &[RET]]), Sites::default());
        assert_eq!(
            t.check(BASE, BASE + 8),
            Verdict::Violated(Violation {
                addr: BASE + 3,
                mnemonic: "jmp".into(),
                kind: ViolationKind::Transfer
            })
        );
        // The jmp itself may be the newer record's from.
        assert_eq!(t.check(BASE, BASE + 3), Verdict::Ok);
        let t = text(&cat(&[&CALL, &MOV, &[RET]]), Sites::default());
        match t.check(BASE, BASE + 5) {
            Verdict::Violated(v) => assert_eq!((v.addr, v.mnemonic.as_str()), (BASE, "call")),
            v => panic!("{v:?}"),
        }
        // ret, ud2 and int3 end a path too.
        for stop in [&[RET][..], &[0x0f, 0x0b], &[0xcc]] {
            let t = text(&cat(&[&MOV, stop, &MOV]), Sites::default());
            assert!(
                matches!(t.check(BASE, BASE + 3 + stop.len() as u64), Verdict::Violated(v) if v.addr == BASE + 3),
                "{stop:x?}"
            );
        }
    }

    #[test]
    fn a_from_inside_an_instruction_is_a_violation() {
        let t = text(&cat(&[&MOV, &MOV, &[RET]]), Sites::default());
        assert_eq!(
            t.check(BASE, BASE + 4),
            Verdict::Violated(Violation {
                addr: BASE + 3,
                mnemonic: "mov".into(),
                kind: ViolationKind::Misaligned
            })
        );
    }

    #[test]
    fn a_from_before_to_or_beyond_the_text_is_not_reached() {
        let t = text(&cat(&[&MOV, &[RET]]), Sites::default());
        // Backwards: straight-line code never gets there; the ret stops the walk.
        assert!(matches!(t.check(BASE + 3, BASE), Verdict::Violated(v) if v.mnemonic == "ret"));
        // Outside the text: not checked.
        assert_eq!(
            t.check(BASE - 0x100, BASE),
            Verdict::Unchecked(Reason::OutsideText)
        );
        let t = text(&[0x90; 5000], Sites::default());
        assert_eq!(
            t.check(BASE, BASE + 4999),
            Verdict::Unchecked(Reason::TooFar)
        );
        assert_eq!(t.check(BASE, BASE + 4000), Verdict::Ok);
    }

    #[test]
    fn a_jump_label_or_fentry_site_may_have_been_a_nop() {
        // A static key's jmp (or an fentry call) at BASE+3: in the other state a NOP.
        for insn in [&JMP[..], &CALL] {
            let code = cat(&[&MOV, insn, &MOV, &[RET]]);
            let end = BASE + 3 + insn.len() as u64 + 3;
            let plain = text(&code, Sites::default());
            assert!(matches!(plain.check(BASE, end), Verdict::Violated(_)));
            let mut sites = Sites::default();
            sites.toggles.insert(BASE + 3);
            let t = text(&code, sites);
            assert_eq!(t.check(BASE, end), Verdict::Ok);
            assert_eq!(t.check(BASE, BASE + 3), Verdict::Ok);
            // Its length still counts: from inside it is a violation.
            assert!(
                matches!(t.check(BASE, BASE + 4), Verdict::Violated(v) if v.kind == ViolationKind::Misaligned)
            );
        }
    }

    #[test]
    fn alternatives_run_one_of_their_variants() {
        // Original: jmp +3 (2 bytes) + 3 bytes of nops... a site whose original jumps, with a
        // replacement of NOPs (static_cpu_has): crossing it is fine.
        let code = cat(&[&MOV, &NOP5, &MOV, &[RET]]);
        let mut orig = code.clone();
        orig[3..5].copy_from_slice(&JMP);
        let site = |variants: Vec<Vec<u8>>| {
            let mut s = Sites::default();
            s.alts.insert(BASE + 3, AltSite { len: 5, variants });
            s
        };
        let t = text(&orig, site(vec![orig[3..8].to_vec(), NOP5.to_vec()]));
        assert_eq!(t.check(BASE, BASE + 11), Verdict::Ok);
        // Only jumping variants: unchecked, not violated (which ran is not known).
        let t = text(&orig, site(vec![orig[3..8].to_vec(), CALL.to_vec()]));
        assert_eq!(
            t.check(BASE, BASE + 11),
            Verdict::Unchecked(Reason::Patched)
        );
        // Ending in the site: a variant must have an instruction boundary there.
        let t = text(&code, site(vec![NOP5.to_vec(), cat(&[&MOV, &JMP])]));
        assert_eq!(t.check(BASE, BASE + 6), Verdict::Ok);
        assert_eq!(t.check(BASE, BASE + 5), Verdict::Unchecked(Reason::Patched));
    }

    #[test]
    fn a_retpoline_site_may_branch_later_in_the_site() {
        // call __x86_indirect_thunk_r11, rewritten to lfence; call *%r11 (from at site + 3).
        let code = cat(&[&MOV, &CALL, &MOV]);
        let mut sites = Sites::default();
        sites.retpolines.insert(BASE + 3);
        let t = text(&code, sites);
        assert_eq!(t.check(BASE, BASE + 6), Verdict::Ok);
        // Past the site: it is a call whatever its form.
        assert!(matches!(t.check(BASE, BASE + 8), Verdict::Violated(v) if v.mnemonic == "call"));
        assert!(matches!(
            text(&code, Sites::default()).check(BASE, BASE + 6),
            Verdict::Violated(v) if v.kind == ViolationKind::Misaligned
        ));
    }

    #[test]
    fn static_call_trampolines_are_unchecked() {
        let code = cat(&[&MOV, &JMP, &MOV]);
        let sites = Sites {
            trampolines: Some(BASE + 3..BASE + 5),
            ..Sites::default()
        };
        let t = text(&code, sites);
        assert_eq!(t.check(BASE, BASE + 3), Verdict::Ok);
        assert_eq!(t.check(BASE, BASE + 5), Verdict::Unchecked(Reason::Patched));
    }
}
