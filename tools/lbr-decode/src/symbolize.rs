// SPDX-License-Identifier: GPL-2.0

//! Runtime addresses to symbols and source lines: the [`Symbolizer`] holds the ELF images
//! (vmlinux, module .ko files) and the runtime-to-link mapping recovered from the inputs (the
//! KASLR offset, each module section's load address), and turns an address into a [`Place`].
//!
//! The mapping comes from the `%pS` symbols the kernel printed next to each record
//! ([`Symbolizer::calibrate`]) and from the anchors of memory dumps' snapshot areas
//! ([`Symbolizer::calibrate_dump`]). Every disagreement between the inputs and the ELF files is a
//! warning: a vmlinux or module that is not the crashed kernel's.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use object::SectionIndex;
use serde::Serialize;

use crate::dump::Area;
use crate::snapshot::Snapshot;
use crate::straight::{self, KernelText, Reason, Verdict};
use crate::symbols::{parse_annotated, parse_printed, Annotated, Frame, Image, ImageKind, Printed};

/// Where an address is, once symbolized: what [`Symbolizer::place`] makes of it, as the
/// output ([`crate::output`]) prints it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Place {
    /// The runtime address, `0x` and 16 hex digits.
    pub addr: String,
    /// `name+0xoff/0xsize [module]`, recomputed from the ELF files when given, else as printed.
    pub symbol: Option<String>,
    /// The ELF image the address was found in ("vmlinux" or a module name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// As the kernel printed it, when it differs from the recomputed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printed: Option<String>,
    /// Source locations, innermost first.
    pub frames: Vec<Frame>,
}

/// The ELF images and the runtime-to-link mapping recovered from the inputs.
pub struct Symbolizer {
    vmlinux: Option<Image>,
    modules: HashMap<String, Image>,
    kaslr: Option<u64>,
    /// (module, section index) -> load address of that section.
    bases: HashMap<(String, usize), u64>,
    /// vmlinux's text and patch sites, for the straight-line check.
    text: Option<KernelText>,
    /// Each module's text sections (by section index) and patch sites, likewise.
    module_text: HashMap<String, BTreeMap<usize, KernelText>>,
}

/// An address found in an ELF image.
struct Located {
    /// `name+0xoff/0xsize [module]`.
    symbol: String,
    frames: Vec<Frame>,
    /// "vmlinux" or the module's name.
    image: String,
}

impl Symbolizer {
    /// Loads `vmlinux` (if given) and the `modules`: .ko files, or directories whose .ko files
    /// are loaded (in name order). Without a vmlinux, or without its DWARF, a warning says what
    /// is missing from the output.
    pub fn load(
        vmlinux: Option<&Path>,
        modules: &[PathBuf],
        warnings: &mut Vec<String>,
    ) -> Result<Symbolizer> {
        let text = vmlinux.map(KernelText::load).transpose()?;
        let vmlinux = load_vmlinux(vmlinux, warnings)?;
        let modules = load_modules(modules)?;
        let module_text = modules
            .iter()
            .map(|(name, img)| Ok((name.clone(), straight::load_module(&img.path)?)))
            .collect::<Result<_>>()?;
        Ok(Symbolizer {
            vmlinux,
            modules,
            kaslr: None,
            bases: HashMap::new(),
            text,
            module_text,
        })
    }

    /// The KASLR offset (runtime minus link address of the kernel's text), once calibrated.
    pub fn kaslr_offset(&self) -> Option<u64> {
        self.kaslr
    }

    /// Recovers the KASLR offset and module section bases from the printed symbols; every
    /// disagreement is a warning (a vmlinux or module that does not match the log).
    pub fn calibrate<'a>(
        &mut self,
        snapshots: impl IntoIterator<Item = &'a Snapshot>,
        warnings: &mut Vec<String>,
    ) {
        let mut votes: HashMap<u64, usize> = HashMap::new();
        let mut kernel_symbols = 0;
        for (addr, p) in printed_symbols(snapshots) {
            match p.module {
                None => {
                    kernel_symbols += 1;
                    if let Some(offset) = self.kaslr_vote(addr, &p) {
                        *votes.entry(offset).or_default() += 1;
                    }
                }
                Some(m) => self.learn_module_base(addr, m, &p),
            }
        }
        self.elect_kaslr(votes, kernel_symbols, warnings);
    }

    /// The KASLR offset a printed kernel symbol at `addr` implies, if vmlinux has that symbol.
    fn kaslr_vote(&self, addr: u64, p: &Printed) -> Option<u64> {
        let sym = self.vmlinux.as_ref()?.by_name(p.name)?;
        Some(addr.wrapping_sub(sym.addr + p.offset))
    }

    /// The load address of the section of `module` that holds the printed symbol at `addr`, if
    /// the module's .ko has that symbol and the section's base is not known yet.
    fn learn_module_base(&mut self, addr: u64, module: &str, p: &Printed) {
        let Some(sym) = self.modules.get(module).and_then(|i| i.by_name(p.name)) else {
            return;
        };
        if let Some(sec) = sym.section {
            self.bases
                .entry((module.to_string(), sec.0))
                .or_insert(addr.wrapping_sub(sym.addr + p.offset));
        }
    }

    /// The KASLR offset most printed kernel symbols agree on (`votes`: offset -> symbols).
    fn elect_kaslr(
        &mut self,
        votes: HashMap<u64, usize>,
        kernel_symbols: usize,
        warnings: &mut Vec<String>,
    ) {
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
    pub fn calibrate_dump(&mut self, areas: &[Area], warnings: &mut Vec<String>) {
        for a in areas {
            self.calibrate_anchor(a, warnings);
            self.calibrate_module_text(a, warnings);
        }
    }

    /// The KASLR offset from the area's anchor (a kernel symbol and its runtime address).
    fn calibrate_anchor(&mut self, a: &Area, warnings: &mut Vec<String>) {
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
    }

    /// The load addresses of the capturing module's text sections, from its text base.
    fn calibrate_module_text(&mut self, a: &Area, warnings: &mut Vec<String>) {
        let (module, base) = &a.module;
        if *base == 0 {
            return; // built in: its code is in vmlinux
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

    /// The module whose known sections contain `addr` (addresses without a printed symbol).
    fn module_of(&self, addr: u64) -> Option<&str> {
        self.bases.iter().find_map(|((m, sec), base)| {
            let img = self.modules.get(m)?;
            img.containing(addr.wrapping_sub(*base), Some(SectionIndex(*sec)))
                .map(|_| img.name.as_str())
        })
    }

    /// Where runtime address `addr` is, with `printed` the symbol the kernel printed for it (if
    /// any). Without the ELF files to recompute it the symbol is the printed one; a recomputed
    /// symbol that differs from the printed one is a warning that starts with `what` (the
    /// record's position in the input).
    pub fn place(
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
        // A module address: its section's base, from any symbol of that module in the log.
        let annotated = printed.and_then(parse_annotated);
        let module = match (printed.and_then(parse_printed), &annotated) {
            (Some(p), _) => p.module,
            (None, Some(a)) if a.module.is_some() => a.module,
            _ => self.module_of(addr),
        };
        let located = match module {
            Some(m) => self.locate_in_module(addr, m),
            None => self.locate_in_vmlinux(addr),
        };
        if let Some(Located {
            symbol,
            frames,
            image,
        }) = located
        {
            place.image = Some(image);
            if let Some(p) = printed {
                // Annotated by decode_stacktrace.sh: only the name is left to compare.
                let same = match &annotated {
                    Some(a) => same_name(a, &symbol),
                    None => same_symbol(p, &symbol),
                };
                if !same {
                    warnings.push(format!("{what}: printed {p}, but the ELF files say {symbol}: wrong vmlinux or module?"));
                    place.printed = Some(p.to_string());
                }
            }
            place.symbol = Some(symbol);
            place.frames = frames;
        } else if let Some(m) = annotated.and_then(|a| a.module) {
            // The script dropped the offset: the module's base cannot come from this symbol.
            if self.modules.contains_key(m) && !self.bases.keys().any(|(name, _)| name == m) {
                warnings.push(format!(
                    "module {m}: its symbols in the log are annotated by decode_stacktrace.sh, \
                     which drops their offsets, and none is printed with one: its addresses \
                     keep the script's text (decode the log from before the script)"
                ));
            }
        }
        place
    }

    /// Up to `len` bytes of the code at runtime address `addr` (with `printed` the symbol the
    /// kernel printed for it), as the ELF file has them; `None` when no image holds it.
    pub fn code(&self, addr: u64, printed: Option<&str>, len: u64) -> Option<Vec<u8>> {
        let module = match printed.and_then(parse_printed) {
            Some(p) => p.module,
            None => self.module_of(addr),
        };
        match module {
            Some(m) => {
                let img = self.modules.get(m)?;
                self.bases
                    .iter()
                    .filter(|((name, _), _)| name == m)
                    .find_map(|((_, sec), base)| {
                        let link = addr.wrapping_sub(*base);
                        img.containing(link, Some(SectionIndex(*sec)))?;
                        img.code(Some(SectionIndex(*sec)), link, len)
                    })
            }
            None => {
                let v = self.vmlinux.as_ref()?;
                v.code(None, addr.wrapping_sub(self.kaslr?), len)
            }
        }
    }

    /// The straight-line check ([`crate::straight`]) of the path from runtime address `to`
    /// (the older record's target, found at `to_place`) to `from` (the newer record's source):
    /// walked in vmlinux, or in one module section, when both ends are there; a violation's
    /// address is a runtime one.
    pub fn straight(&self, to: u64, to_place: &Place, from: u64, from_place: &Place) -> Verdict {
        let (to_image, from_image) = (to_place.image.as_deref(), from_place.image.as_deref());
        let walk = |text: &KernelText, base: u64| match text
            .check(to.wrapping_sub(base), from.wrapping_sub(base))
        {
            Verdict::Violated(mut v) => {
                v.addr = v.addr.wrapping_add(base);
                Verdict::Violated(v)
            }
            v => v,
        };
        match (to_image, from_image) {
            (Some("vmlinux"), Some("vmlinux")) => match (&self.text, self.kaslr) {
                (Some(text), Some(k)) => walk(text, k),
                _ => Verdict::Unchecked(Reason::NoVmlinux),
            },
            (Some(a), Some(b)) if a == b => {
                match (self.module_section(to, a), self.module_section(from, a)) {
                    (Some((s, base)), Some((t, _))) if s == t => {
                        match self.module_text.get(a).and_then(|m| m.get(&s)) {
                            Some(text) => walk(text, base),
                            None => Verdict::Unchecked(Reason::OutsideText),
                        }
                    }
                    (Some(_), Some(_)) => Verdict::Unchecked(Reason::CrossImage),
                    _ => Verdict::Unchecked(Reason::OutsideText),
                }
            }
            (Some(_), Some(_)) => Verdict::Unchecked(Reason::CrossImage),
            _ if self.text.is_none() => Verdict::Unchecked(Reason::NoVmlinux),
            _ => Verdict::Unchecked(Reason::OutsideText),
        }
    }

    /// The section of `module` that holds runtime address `addr` (in a symbol), and its base.
    fn module_section(&self, addr: u64, module: &str) -> Option<(usize, u64)> {
        let img = self.modules.get(module)?;
        self.bases
            .iter()
            .filter(|((m, _), _)| m == module)
            .find_map(|((_, sec), base)| {
                img.containing(addr.wrapping_sub(*base), Some(SectionIndex(*sec)))
                    .map(|_| (*sec, *base))
            })
    }

    /// `addr` in one of `module`'s sections whose base is known.
    fn locate_in_module(&self, addr: u64, module: &str) -> Option<Located> {
        let img = self.modules.get(module)?;
        self.bases
            .iter()
            .filter(|((m, _), _)| m == module)
            .find_map(|((_, sec), base)| {
                let link = addr.wrapping_sub(*base);
                img.containing(link, Some(SectionIndex(*sec)))
                    .map(|s| Located {
                        symbol: format!("{}+{:#x}/{:#x} [{module}]", s.name, link - s.addr, s.size),
                        frames: img.frames(Some(SectionIndex(*sec)), link),
                        image: module.to_string(),
                    })
            })
    }

    /// `addr` in vmlinux, once the KASLR offset is known.
    fn locate_in_vmlinux(&self, addr: u64) -> Option<Located> {
        let (v, k) = (self.vmlinux.as_ref()?, self.kaslr?);
        let link = addr.wrapping_sub(k);
        v.containing(link, None).map(|s| Located {
            symbol: format!("{}+{:#x}/{:#x}", s.name, link - s.addr, s.size),
            frames: v.frames(None, link),
            image: "vmlinux".to_string(),
        })
    }
}

/// `%pS` names a symbol by any of its aliases (`__pi_` copies, for example): equal when offset and
/// size agree and one name ends with the other.
pub fn same_symbol(a: &str, b: &str) -> bool {
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

/// Whether a symbol annotated by decode_stacktrace.sh names the ELF files' `symbol`: the same
/// name (up to a prefix, as [`same_symbol`]) and module. A Rust symbol the script demangled
/// cannot be compared with its mangled name here: taken as the same.
fn same_name(a: &Annotated<'_>, symbol: &str) -> bool {
    parse_printed(symbol).is_some_and(|y| {
        y.module == a.module
            && (a.name.ends_with(y.name)
                || y.name.ends_with(a.name)
                || (y.name.starts_with("_R") && !a.name.starts_with("_R")))
    })
}

/// Every printed symbol that parses, with the runtime address it was printed for.
fn printed_symbols<'a>(
    snapshots: impl IntoIterator<Item = &'a Snapshot>,
) -> impl Iterator<Item = (u64, Printed<'a>)> {
    snapshots
        .into_iter()
        .flat_map(|s| s.records.iter())
        .flat_map(|r| [(r.branch.from, &r.from_sym), (r.branch.to, &r.to_sym)])
        .filter_map(|(addr, sym)| Some((addr, parse_printed(sym.as_deref()?)?)))
}

/// vmlinux, if given; a warning when it is not, or has no DWARF.
fn load_vmlinux(path: Option<&Path>, warnings: &mut Vec<String>) -> Result<Option<Image>> {
    let vmlinux = path
        .map(|p| Image::load(p, ImageKind::Vmlinux))
        .transpose()?;
    match &vmlinux {
        Some(v) if !v.has_dwarf => warnings.push(format!(
            "{}: no debug info (DWARF): symbols from its symbol table, no source lines",
            v.path.display()
        )),
        Some(_) => {}
        None => warnings
            .push("no --vmlinux: symbols are the kernel's as printed, no source lines".into()),
    }
    Ok(vmlinux)
}

/// The modules' images by module name (a later file of the same module replaces an earlier).
fn load_modules(paths: &[PathBuf]) -> Result<HashMap<String, Image>> {
    let mut modules = HashMap::new();
    for p in paths {
        for f in ko_files(p)? {
            let img = Image::load(&f, ImageKind::Module)?;
            modules.insert(img.name.clone(), img);
        }
    }
    Ok(modules)
}

/// A directory's .ko files in name order, or the file `path` itself.
fn ko_files(path: &Path) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("{}: cannot list", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.extension().is_some_and(|x| x == "ko"))
        .collect();
    files.sort();
    Ok(files)
}
