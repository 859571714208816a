// SPDX-License-Identifier: GPL-2.0

//! Finding lbr-dump's snapshot areas in memory dumps: ELF (kdump's `/proc/vmcore`, makedumpfile's
//! ELF output, QEMU's `dump-guest-memory`) and makedumpfile's kdump-compressed dumps, plain or
//! flattened ([`kdump`]); the format is told by the file's magic. No kernel debug info is
//! needed: the area is physically contiguous and page-aligned, starts with a magic and describes
//! itself (src/layout.rs, read with the module's own code). An ELF dump's PT_LOAD segments map
//! physical addresses (`p_paddr`) to file offsets, a kdump-compressed dump's bitmap and page
//! descriptors page frames to (compressed) page data; every page in the dump is checked for the
//! magic at its start.

use std::borrow::Cow;
use std::path::Path;

use anyhow::{bail, Context, Result};
use lbr_core::area::{snapshot_state, AreaHeader};
use lbr_core::layout::{HEADER_SIZE, MAGIC};
use lbr_core::record::{last_exception, records};
use memmap2::Mmap;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

use crate::snapshot::{LastException, Record, Snapshot};

pub mod kdump;
use kdump::{Kdump, Kind};

const PAGE: u64 = 4096;

/// One PT_LOAD segment: physical memory present in the file.
#[derive(Clone, Copy, Debug)]
struct Segment {
    paddr: u64,
    offset: usize,
    size: usize,
}

/// The dump's bytes: mapped from a file, or owned (tests, fuzzing).
pub(crate) enum Bytes {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A memory dump.
pub struct Dump {
    memory: Memory,
}

/// Where a dump keeps its memory.
enum Memory {
    /// An ELF core file's PT_LOAD segments.
    Elf { map: Bytes, segments: Vec<Segment> },
    /// A kdump-compressed dump's pages.
    Kdump(Kdump),
}

/// One snapshot area found in a dump.
pub struct Area {
    /// Physical address of the area.
    pub paddr: u64,
    /// Runtime address of the anchor symbol and its name (the KASLR offset's source).
    pub anchor: (u64, String),
    /// The module's name and core text address (0: built in).
    pub module: (String, u64),
    /// The snapshots it holds, oldest first per CPU.
    pub snapshots: Vec<Snapshot>,
}

/// Whether a file starting with `head` (its first 16 bytes or more) is a memory dump lbr-decode
/// reads: ELF, kdump-compressed or flattened.
pub fn is_dump(head: &[u8]) -> bool {
    kdump::kind(head).is_some()
}

/// Damaged pages reported one by one before the rest are only counted.
const PAGE_WARNINGS: usize = 10;

impl Dump {
    /// Maps `path` and reads its headers. Errors name what is wrong: not a dump format, not a
    /// core file, another architecture, memory beyond the end of the file (a truncated dump).
    pub fn open(path: &Path) -> Result<Dump> {
        let file = std::fs::File::open(path)
            .with_context(|| format!("{}: cannot open", path.display()))?;
        // SAFETY: the dump is mapped read-only; a file changed under us gives wrong bytes (every
        // field read from it is validated), not undefined behaviour in safe code that copies out
        // of the mapping.
        let map = unsafe { Mmap::map(&file) }
            .with_context(|| format!("{}: cannot map", path.display()))?;
        Self::parse(Bytes::Map(map), &path.display().to_string())
    }

    /// A dump held in memory; `name` is used in error messages.
    pub fn from_vec(bytes: Vec<u8>, name: &str) -> Result<Dump> {
        Self::parse(Bytes::Owned(bytes), name)
    }

    fn parse(map: Bytes, name: &str) -> Result<Dump> {
        let memory = match kdump::kind(&map) {
            Some(Kind::Elf) => Self::parse_elf(map, name)?,
            Some(Kind::Kdump) => Memory::Kdump(Kdump::parse(map, name)?),
            Some(Kind::Flat) => Memory::Kdump(Kdump::parse_flat(map, name)?),
            None => bail!(
                "{name}: not a memory dump lbr-decode reads (ELF, makedumpfile kdump-compressed or flattened): it starts with {:02x?}",
                &map[..map.len().min(16)]
            ),
        };
        Ok(Dump { memory })
    }

    fn parse_elf(map: Bytes, name: &str) -> Result<Memory> {
        let data: &[u8] = &map;
        let hdr = elf::FileHeader64::<Endianness>::parse(data)
            .with_context(|| format!("{}: not a 64-bit ELF file", name))?;
        let e = hdr.endian().context("ELF endianness")?;
        if hdr.e_machine(e) != elf::EM_X86_64 {
            bail!(
                "{}: a memory dump of machine {} (ELF e_machine), not x86-64",
                name,
                hdr.e_machine(e)
            );
        }
        if hdr.e_type(e) != elf::ET_CORE {
            bail!(
                "{}: an ELF file of type {}, not a core file (a memory dump has type ET_CORE)",
                name,
                hdr.e_type(e)
            );
        }
        let phdrs = hdr
            .program_headers(e, data)
            .with_context(|| format!("{}: program headers cut short or corrupt", name))?;
        let mut segments = Vec::new();
        for (i, p) in phdrs.iter().enumerate() {
            if p.p_type(e) != elf::PT_LOAD || p.p_filesz(e) == 0 {
                continue;
            }
            let (off, size) = (p.p_offset(e), p.p_filesz(e));
            if off
                .checked_add(size)
                .is_none_or(|end| end > data.len() as u64)
            {
                bail!(
                    "{}: segment {i} (physical {:#x}, {size} bytes at file offset {off:#x}) ends past the end of the file ({} bytes): the dump is truncated",
                    name,
                    p.p_paddr(e),
                    data.len()
                );
            }
            segments.push(Segment {
                paddr: p.p_paddr(e),
                offset: off as usize,
                size: size as usize,
            });
        }
        if segments.is_empty() {
            bail!("{}: a core file without memory (no PT_LOAD segment)", name);
        }
        segments.sort_by_key(|s| s.paddr);
        Ok(Memory::Elf { map, segments })
    }

    /// Total bytes of memory in the dump.
    pub fn memory_size(&self) -> u64 {
        match &self.memory {
            Memory::Elf { segments, .. } => segments.iter().map(|s| s.size as u64).sum(),
            Memory::Kdump(k) => k.memory_size(),
        }
    }

    /// `len` bytes of physical memory at `paddr`; the error says why some are not in the dump.
    fn read_phys(&self, paddr: u64, len: usize) -> std::result::Result<Cow<'_, [u8]>, String> {
        match &self.memory {
            Memory::Elf { map, segments } => read_elf(map, segments, paddr, len).ok_or_else(|| {
                format!(
                    "some of physical {paddr:#x}..{:#x} is in no segment",
                    paddr + len as u64
                )
            }),
            Memory::Kdump(k) => {
                let mut dec = kdump::Decoders::default();
                let mut page = Box::new([0u8; kdump::PAGE]);
                let mut v = Vec::with_capacity(len);
                while v.len() < len {
                    let a = paddr + v.len() as u64;
                    k.page(a / PAGE, &mut page, &mut dec)?;
                    let from = (a % PAGE) as usize;
                    let n = (kdump::PAGE - from).min(len - v.len());
                    v.extend_from_slice(&page[from..from + n]);
                }
                Ok(Cow::Owned(v))
            }
        }
    }

    /// Physical addresses of every page that starts with the magic.
    pub fn candidates(&self) -> Vec<u64> {
        self.candidates_with(&mut Vec::new(), &mut |_| {})
    }

    /// [`Dump::candidates`], telling `progress` how many bytes of memory were scanned every
    /// 64 MiB and at the end; pages that cannot be read (damaged compressed data) go to
    /// `warnings`.
    fn candidates_with(
        &self,
        warnings: &mut Vec<String>,
        progress: &mut dyn FnMut(u64),
    ) -> Vec<u64> {
        const REPORT_PAGES: u64 = (64 << 20) / PAGE;
        let mut out = Vec::new();
        let (mut done, mut pages) = (0u64, 0u64);
        match &self.memory {
            Memory::Elf { map, segments } => {
                for s in segments {
                    let first = s.paddr.next_multiple_of(PAGE);
                    let mut off = (first - s.paddr) as usize;
                    let bytes = &map[s.offset..s.offset + s.size];
                    while off + MAGIC.len() <= bytes.len() {
                        if bytes[off..off + MAGIC.len()] == MAGIC {
                            out.push(s.paddr + off as u64);
                        }
                        off += PAGE as usize;
                        pages += 1;
                        if pages % REPORT_PAGES == 0 {
                            progress(done + off as u64);
                        }
                    }
                    done += s.size as u64;
                }
            }
            Memory::Kdump(k) => {
                if k.incomplete() {
                    warnings.push("makedumpfile marked the dump incomplete (it ran out of space): the pages it did not write are missing".to_string());
                }
                let mut bad = 0usize;
                k.for_each_page(
                    &mut |pfn, page| {
                        if page[..MAGIC.len()] == MAGIC {
                            out.push(pfn * PAGE);
                        }
                        pages += 1;
                        if pages % REPORT_PAGES == 0 {
                            progress(pages * PAGE);
                        }
                    },
                    &mut |e| {
                        bad += 1;
                        if bad <= PAGE_WARNINGS {
                            warnings.push(format!("{e}; the page is not scanned"));
                        }
                    },
                );
                if bad > PAGE_WARNINGS {
                    warnings.push(format!(
                        "{} more pages could not be read and were not scanned",
                        bad - PAGE_WARNINGS
                    ));
                }
                done = k.memory_size();
            }
        }
        progress(done);
        // A kdump vmcore maps the kernel image's physical pages twice (its text segment and the
        // System RAM segment around it): one physical page is one candidate.
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every valid area in the dump. A page with the magic whose header does not validate (a
    /// stale copy, another version, damage) is reported in `warnings` and skipped.
    pub fn areas(&self, warnings: &mut Vec<String>) -> Vec<Area> {
        self.areas_with(warnings, &mut |_| {})
    }

    /// [`Dump::areas`], telling `progress` how many bytes of memory were scanned (of
    /// [`Dump::memory_size`]) as the scan goes.
    pub fn areas_with(
        &self,
        warnings: &mut Vec<String>,
        progress: &mut dyn FnMut(u64),
    ) -> Vec<Area> {
        let mut out = Vec::new();
        for paddr in self.candidates_with(warnings, progress) {
            let head = match self.read_phys(paddr, HEADER_SIZE) {
                Ok(head) => head,
                Err(e) => {
                    warnings.push(format!("physical {paddr:#x}: magic, but the header is cut off by the end of the dump's memory ({e})"));
                    continue;
                }
            };
            let h = match AreaHeader::parse(&head) {
                Ok(h) => h,
                Err(e) => {
                    warnings.push(format!(
                        "physical {paddr:#x}: magic, but not a usable area: {e}"
                    ));
                    continue;
                }
            };
            let bytes = match self.read_phys(paddr, h.area_size) {
                Ok(bytes) => bytes,
                Err(e) => {
                    warnings.push(format!(
                        "physical {paddr:#x}: the area's {} bytes are not all in the dump (a filtered or truncated dump?): {e}",
                        h.area_size
                    ));
                    continue;
                }
            };
            let h = AreaHeader::parse(&bytes).expect("validated above");
            out.push(Area {
                paddr,
                anchor: (h.anchor_addr, h.anchor_name.to_string()),
                module: (h.module_name.to_string(), h.text_base),
                snapshots: snapshots(&h, &bytes, paddr, &|a, n| self.read_phys(a, n), warnings),
            });
        }
        out
    }
}

/// `len` bytes of physical memory at `paddr` in an ELF dump's segments, borrowed when one
/// segment holds them, copied when they span adjacent segments; `None` if some byte is not in
/// the dump.
fn read_elf<'a>(
    map: &'a [u8],
    segments: &[Segment],
    paddr: u64,
    len: usize,
) -> Option<Cow<'a, [u8]>> {
    let find = |a: u64| {
        segments
            .iter()
            .find(|s| a >= s.paddr && a - s.paddr < s.size as u64)
    };
    let s = find(paddr)?;
    let at = s.offset + (paddr - s.paddr) as usize;
    let here = s.size - (paddr - s.paddr) as usize;
    if here >= len {
        return Some(Cow::Borrowed(&map[at..at + len]));
    }
    let mut v = map[at..at + here].to_vec();
    while v.len() < len {
        let a = paddr + v.len() as u64;
        let s = find(a)?;
        let at = s.offset + (a - s.paddr) as usize;
        let n = (s.size - (a - s.paddr) as usize).min(len - v.len());
        v.extend_from_slice(&map[at..at + n]);
    }
    Some(Cow::Owned(v))
}

/// The snapshots of area `area` (header `h`) at physical `paddr`; `read` reads other physical
/// memory (the BTS buffers the snapshots kept).
fn snapshots<'r>(
    h: &AreaHeader,
    area: &[u8],
    paddr: u64,
    read: &dyn Fn(u64, usize) -> std::result::Result<Cow<'r, [u8]>, String>,
    warnings: &mut Vec<String>,
) -> Vec<Snapshot> {
    let g = h.geometry;
    let mut out = Vec::new();
    for cpu in 0..g.nr_cpus {
        let mut cpu_snaps = Vec::new();
        for slot in 0..g.ring {
            let s = h.snapshot(area, cpu, slot);
            if s.seq == 0 {
                continue;
            }
            if s.sealed() == Some(false) {
                warnings.push(format!(
                    "physical {paddr:#x}: cpu {cpu} seq {}: checksum mismatch, the snapshot is damaged or was rewritten after it was printed",
                    s.seq
                ));
            }
            let values: Vec<u64> = (0..g.nr_values).map(|i| s.value(i)).collect();
            let recs: Vec<Record> = records(h.layout, &values[..])
                .expect("nr_values >= layout.values(), validated")
                .enumerate()
                .map(|(i, branch)| Record {
                    index: i as u32,
                    branch,
                    from_sym: None,
                    to_sym: None,
                    line: 0,
                })
                .collect();
            cpu_snaps.push(Snapshot {
                cpu: cpu as u32,
                seq: s.seq,
                vector: s.vector,
                error: s.error,
                rip: s.rip,
                cr2: s.cr2,
                flavour: h.layout.flavour().name().to_string(),
                format: h.layout.codes().0,
                state: snapshot_state(
                    s.state,
                    s.ctl_entry,
                    h.ctl_armed,
                    s.filter.zip(h.filter.map(|(_, armed)| armed)),
                )
                .with_records(recs.len()),
                nest: None,
                filter: h.branches,
                announced: recs.len() as u32,
                records: recs,
                ler: s
                    .ler
                    .and_then(|(from, to)| last_exception(h.layout, from, to))
                    .map(|b| LastException {
                        from: b.from,
                        to: b.to,
                        from_sym: None,
                        to_sym: None,
                        line: 0,
                    }),
                bts: crate::bts::from_area(
                    h,
                    area,
                    cpu,
                    &s,
                    read,
                    &format!("physical {paddr:#x}: cpu {cpu} seq {}", s.seq),
                    warnings,
                ),
                complete: s.sealed() != Some(false),
                rewritten: false,
                line: 0,
            });
        }
        cpu_snaps.sort_by_key(|s| s.seq);
        out.extend(cpu_snaps);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::core;

    fn area(claimed_cpus: u32) -> Vec<u8> {
        crate::fixture::area(4, 2, claimed_cpus, crate::fixture::Slots::OneSnapshot)
    }

    fn open(bytes: &[u8]) -> Result<Dump> {
        Dump::from_vec(bytes.to_vec(), "test.elf")
    }

    #[test]
    fn finds_an_area_split_across_segments() {
        let a = area(1);
        // Memory: 3 pages of noise, then the area from physical 0x103000, its first half page in
        // one segment and the rest in the next (adjacent physical memory, separate file ranges).
        assert_eq!(a.len(), 4096);
        let mut m1 = vec![0x5au8; 0x3000];
        m1.extend_from_slice(&a[..2048]);
        let d = open(&core(62, &[(0x100000, &m1), (0x103800, &a[2048..])])).unwrap();
        let mut w = Vec::new();
        let areas = d.areas(&mut w);
        assert_eq!(w, Vec::<String>::new());
        assert_eq!(areas.len(), 1);
        assert_eq!(areas[0].paddr, 0x103000);
        assert_eq!(
            areas[0].anchor,
            (0xffff_ffff_8200_0000, "_printk".to_string())
        );
        let [s] = &areas[0].snapshots[..] else {
            panic!("{} snapshots", areas[0].snapshots.len())
        };
        assert_eq!((s.cpu, s.seq, s.vector), (0, 3, 14));
        assert_eq!(s.records.len(), 1);
        assert_eq!(s.records[0].branch.from, 0xffff_ffff_8100_0010);
        assert_eq!(s.records[0].branch.to, 0xffff_ffff_c000_0000);
        // The last exception record, read from the values the header says are its MSRs'.
        assert_eq!(
            s.ler.as_ref().map(|l| (l.from, l.to, l.line)),
            Some((0xffff_ffff_8100_0004, 0xffff_ffff_8100_0008, 0))
        );
    }

    /// The branch filter the area's header names is each snapshot's (the straight-line check
    /// then knows its records are not straight-line code apart); a code no filter has makes the
    /// header unusable, with a warning.
    #[test]
    fn the_areas_branch_filter_is_read() {
        use lbr_core::area::checksum;
        use lbr_core::facility::Filter;
        use lbr_core::layout::hdr;
        let with = |code: u32| {
            let mut a = area(1);
            a[hdr::BRANCH_FILTER..hdr::BRANCH_FILTER + 4].copy_from_slice(&code.to_le_bytes());
            let sum = checksum(&a[..HEADER_SIZE], hdr::CHECKSUM);
            a[hdr::CHECKSUM..hdr::CHECKSUM + 8].copy_from_slice(&sum.to_le_bytes());
            let mut w = Vec::new();
            let areas = open(&core(62, &[(0, &a)])).unwrap().areas(&mut w);
            (areas.first().map(|a| a.snapshots[0].filter), w)
        };
        assert_eq!(with(0), (Some(Filter::All), vec![]));
        assert_eq!(with(1), (Some(Filter::Functions), vec![]));
        assert_eq!(with(2), (Some(Filter::Calls), vec![]));
        let (none, w) = with(3);
        assert_eq!(none, None);
        assert!(
            w[0].contains("impossible header field: branch filter"),
            "{w:?}"
        );
    }

    #[test]
    fn bad_dumps_are_refused_with_reasons() {
        let a = area(1);
        let err = |bytes: &[u8]| format!("{:#}", open(bytes).err().expect("refused"));
        assert!(
            err(&core(183, &[(0, &a)])).contains("machine 183"),
            "aarch64"
        );
        let mut cut = core(62, &[(0, &a)]);
        cut.truncate(cut.len() - 100);
        assert!(err(&cut).contains("truncated"));
        assert!(err(b"\x7fELF\x01\x01").contains("not a 64-bit ELF"));
        let mut exec = core(62, &[(0, &a)]);
        exec[16] = 2; // ET_EXEC
        assert!(err(&exec).contains("not a core file"));
    }

    #[test]
    fn another_owners_filter_makes_the_snapshot_foreign() {
        use lbr_core::area::{checksum, AreaHeader};
        use lbr_core::layout::snap;
        let mut a = area(1);
        let h = AreaHeader::parse(&a).unwrap();
        let g = h.geometry;
        let s = g.snapshot(0, 1);
        // LBR_SELECT found at 6 (conditional branches suppressed too); lbr-dump wrote 2.
        let last = s + snap::VALUES + 8 * (g.nr_values - 1);
        a[last..last + 8].copy_from_slice(&6u64.to_le_bytes());
        let sum = checksum(&a[s..s + g.snap_size()], snap::CHECKSUM);
        a[s + snap::CHECKSUM..s + snap::CHECKSUM + 8].copy_from_slice(&sum.to_le_bytes());
        let d = open(&core(62, &[(0, &a)])).unwrap();
        let areas = d.areas(&mut Vec::new());
        let [s] = &areas[0].snapshots[..] else {
            panic!("{} snapshots", areas[0].snapshots.len())
        };
        assert_eq!(s.state, lbr_core::report::State::Foreign);
        assert!(s.complete, "the checksum was updated");
        assert_eq!(s.records.len(), 1, "the filter value is not a record");
    }

    /// The dump fuzzer's seed is this fixture (an area and a page of other memory), so that it
    /// follows the layout; `LBR_WRITE_SEEDS=1 cargo test` rewrites it after a layout change.
    #[test]
    fn dump_fuzz_seed_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/dump/one-area.elf");
        let mut mem = area(1);
        mem.extend_from_slice(&[0x5a; 4096]);
        let want = core(62, &[(0x100000, &mem)]);
        if std::env::var_os("LBR_WRITE_SEEDS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read(path).unwrap();
        assert!(
            have == want,
            "{path} is not the current fixture: LBR_WRITE_SEEDS=1 cargo test rewrites it"
        );
        let d = open(&have).unwrap();
        assert_eq!(d.areas(&mut Vec::new()).len(), 1);
        // An area with BTS and its buffers.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/dump/bts-area.elf");
        let (a, buffers) = crate::fixture::bts_area();
        let mut segments: Vec<(u64, &[u8])> =
            buffers.iter().map(|(p, b)| (*p, b.as_slice())).collect();
        segments.push((0x10_0000, &a));
        let want = core(62, &segments);
        if std::env::var_os("LBR_WRITE_SEEDS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read(path).unwrap_or_default();
        assert!(
            have == want,
            "{path} is not the current fixture: LBR_WRITE_SEEDS=1 cargo test rewrites it"
        );
        let areas = open(&have).unwrap().areas(&mut Vec::new());
        assert!(areas[0].snapshots.iter().all(|s| s.bts.is_some()));
    }

    /// [`crate::fixture::bts_area`] at physical 0x100000 and its BTS buffers at their physical
    /// addresses, less buffer `omit`'s, as an ELF dump: its snapshots and the warnings.
    fn bts_snapshots(
        omit: Option<usize>,
        edit: impl Fn(&mut Vec<u8>),
    ) -> (Vec<Snapshot>, Vec<String>) {
        let (mut a, buffers) = crate::fixture::bts_area();
        edit(&mut a);
        let mut segments: Vec<(u64, &[u8])> = vec![(0x10_0000, &a)];
        for (k, (phys, bytes)) in buffers.iter().enumerate() {
            if Some(k) != omit {
                segments.push((*phys, bytes));
            }
        }
        let mut w = Vec::new();
        let mut areas = open(&core(62, &segments)).unwrap().areas(&mut w);
        assert_eq!(areas.len(), 1, "{w:?}");
        (areas.remove(0).snapshots, w)
    }

    fn froms(s: &Snapshot) -> Vec<u64> {
        let b = s.bts.as_ref().expect("BTS history");
        assert!(
            b.records
                .iter()
                .enumerate()
                .all(|(i, r)| r.index as usize == i),
            "numbered from 0"
        );
        b.records.iter().map(|r| r.branch.from).collect()
    }

    /// Kept buffers give every record, newest first: not wrapped, the records below the index;
    /// wrapped, those below the index and then those from the end of the buffer down to it.
    /// A buffer a later capture took, and another owner's debug store, are said so.
    #[test]
    fn bts_histories_are_read_newest_first() {
        use crate::snapshot::BtsState;
        let (snaps, w) = bts_snapshots(None, |_| {});
        assert_eq!(w, Vec::<String>::new());
        assert_eq!(
            snaps.iter().map(|s| s.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        // Buffer 0: records 0-3 written, the index at record 4.
        let b = snaps[0].bts.as_ref().unwrap();
        assert_eq!(
            b.state,
            BtsState::Kept {
                total: 4,
                wrapped: false,
                buffer: 0xffff_8880_0200_0000,
                size: 240,
                phys: Some(0x4_0000),
                shown: None
            }
        );
        assert_eq!(
            froms(&snaps[0]),
            [
                0xffff_ffff_8100_0030,
                0xffff_ffff_8100_0020,
                0xffff_ffff_8100_0010,
                0xffff_ffff_8100_0000
            ]
        );
        assert_eq!(b.records[0].branch.to, 0xffff_ffff_8200_0030);
        assert_eq!(b.records[3].branch.to, 0xffff_ffff_8200_0000);
        // The predicted bit (flags 0x10 in records 1 and 3) is not reported.
        assert!(b.records.iter().all(|r| r.branch.mispred.is_none()));
        // Buffer 1: wrapped, the index at record 3: 2, 1, 0, then 9 down to 3.
        let b = snaps[1].bts.as_ref().unwrap();
        assert_eq!(
            b.state,
            BtsState::Kept {
                total: 10,
                wrapped: true,
                buffer: 0xffff_8880_0200_1000,
                size: 240,
                phys: Some(0x4_1000),
                shown: None
            }
        );
        assert_eq!(
            froms(&snaps[1]),
            [
                0xffff_ffff_8101_0020,
                0xffff_ffff_8101_0010,
                0xffff_ffff_8101_0000,
                0xffff_ffff_8101_0090,
                0xffff_ffff_8101_0080,
                0xffff_ffff_8101_0070,
                0xffff_ffff_8101_0060,
                0xffff_ffff_8101_0050,
                0xffff_ffff_8101_0040,
                0xffff_ffff_8101_0030
            ]
        );
        assert_eq!(b.records[9].branch.to, 0xffff_ffff_8201_0030);
        // Buffer 2's table entry names seq 7 now.
        assert_eq!(
            snaps[2].bts,
            Some(crate::snapshot::Bts {
                state: BtsState::Reused { owner: 7 },
                records: vec![],
                line: 0
            })
        );
        assert_eq!(
            snaps[3].bts.as_ref().map(|b| &b.state),
            Some(&BtsState::Foreign {
                ds_area: 0xffff_fe00_0000_4000
            })
        );
        // The LBR records are there as without BTS.
        assert!(snaps.iter().all(|s| s.records.len() == 1));
        // An area without BTS: no BTS history.
        let a = area(1);
        let areas = open(&core(62, &[(0, &a)])).unwrap().areas(&mut Vec::new());
        assert_eq!(areas[0].snapshots[0].bts, None);
    }

    /// A kept buffer that is not in the dump: that snapshot's BTS history is unreadable, with a
    /// warning; the rest is read.
    #[test]
    fn a_bts_buffer_missing_from_the_dump_is_an_error_of_that_snapshot() {
        use crate::snapshot::BtsState;
        let (snaps, w) = bts_snapshots(Some(1), |_| {});
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("physical 0x100000: cpu 0 seq 2: BTS history not read: the kept buffer (physical 0x41000, 240 bytes) is not in the dump"),
            "{w:?}"
        );
        let b = snaps[1].bts.as_ref().unwrap();
        assert!(
            matches!(&b.state, BtsState::Unreadable { reason } if reason.contains("physical 0x41000")),
            "{b:?}"
        );
        assert!(b.records.is_empty());
        assert_eq!(snaps[1].records.len(), 1, "its LBR records are read");
        assert_eq!(
            froms(&snaps[0]).len(),
            4,
            "the other snapshots' histories are read"
        );
    }

    /// A snapshot whose BTS fields do not describe its buffer (base not the table's buffer,
    /// index not on a record, state bits that contradict) is inconsistent, with a warning.
    #[test]
    fn inconsistent_bts_fields_are_reported() {
        use crate::snapshot::BtsState;
        let g = AreaHeader::parse(&crate::fixture::bts_area().0)
            .unwrap()
            .geometry;
        let s0 = g.snapshot(0, 0);
        let put =
            |a: &mut Vec<u8>, off: usize, v: u64| a[off..off + 8].copy_from_slice(&v.to_le_bytes());
        for (edit, want) in [
            (
                (lbr_core::layout::snap::BTS_BASE, 0xffff_8880_0200_1000),
                "bts_buffer_base 0xffff888002001000 as found is not the kept buffer 0xffff888002000000 (pool slot 0)",
            ),
            (
                (lbr_core::layout::snap::BTS_INDEX, 0xffff_8880_0200_0005),
                "the BTS index is not a record boundary inside the buffer (base 0xffff888002000000, index 0xffff888002000005, 240 bytes)",
            ),
            (
                (lbr_core::layout::snap::BTS_SLOT, 5u64 << 32),
                "BTS state 0x5 says both kept and foreign",
            ),
            (
                (lbr_core::layout::snap::BTS_SLOT, 1u64 << 32 | 9),
                "kept buffer slot 9 is outside the pool of 4",
            ),
        ] {
            let (snaps, w) = bts_snapshots(None, |a| put(a, s0 + edit.0, edit.1));
            assert_eq!(
                snaps[0].bts.as_ref().map(|b| &b.state),
                Some(&BtsState::Inconsistent {
                    reason: want.to_string()
                })
            );
            assert_eq!(
                w,
                [format!(
                    "physical 0x100000: cpu 0 seq 1: BTS history inconsistent: {want}"
                )]
            );
            assert_eq!(froms(&snaps[1]).len(), 10, "the others are read");
        }
    }

    #[test]
    fn physical_memory_mapped_twice_is_one_area() {
        // As in a kdump vmcore: a segment for the kernel image overlaps the System RAM segment
        // that holds it; the area, in the overlap, is found once.
        let a = area(1);
        let mut ram = vec![0u8; 0x8000];
        ram[0x3000..0x3000 + a.len()].copy_from_slice(&a);
        let d = open(&core(
            62,
            &[(0x1ff000, &ram[0x2000..0x5000]), (0x1fd000, &ram)],
        ))
        .unwrap();
        let mut w = Vec::new();
        let areas = d.areas(&mut w);
        assert_eq!(w, Vec::<String>::new());
        assert_eq!(
            areas.len(),
            1,
            "found at {:x?}",
            areas.iter().map(|a| a.paddr).collect::<Vec<_>>()
        );
        assert_eq!(areas[0].paddr, 0x200000);
    }

    #[test]
    fn progress_reaches_the_memory_size() {
        // 200 MiB in two segments: reports every 64 MiB, rising, ending at the total.
        let big = vec![0u8; 100 << 20];
        let d = open(&core(62, &[(0, &big), (1 << 30, &big)])).unwrap();
        let mut seen = Vec::new();
        d.areas_with(&mut Vec::new(), &mut |n| seen.push(n));
        assert_eq!(seen.last(), Some(&(200 << 20)), "{seen:?}");
        assert!(seen.len() >= 4, "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    }

    #[test]
    fn absurd_header_is_skipped_with_a_warning() {
        let d = open(&core(62, &[(0, &area(1_000_000))])).unwrap();
        let mut w = Vec::new();
        assert!(d.areas(&mut w).is_empty());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("CPU count"), "{w:?}");
    }
}
