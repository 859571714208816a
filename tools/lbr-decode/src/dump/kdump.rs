// SPDX-License-Identifier: GPL-2.0

//! makedumpfile's kdump-compressed dumps (`makedumpfile -c/-l/-p/-z`, the default vmcore of
//! Debian's kdump-tools and of RHEL/Fedora kdump) and its flattened form (`-F`, a stream written
//! to a pipe, as over ssh). Read from makedumpfile's own description of the format: the file
//! IMPLEMENTATION ("The kdump-compressed format", "The flattened format") and the structures in
//! diskdump_mod.h (`struct disk_dump_header`, `struct kdump_sub_header`, `page_desc_t`,
//! `DUMP_DH_COMPRESSED_*`) and makedumpfile.h (`struct makedumpfile_header`,
//! `struct makedumpfile_data_header`) of makedumpfile 1.7.
//!
//! A kdump-compressed file is a main header (block 0), a sub header (`sub_hdr_size` blocks), two
//! bitmaps of one bit per page frame (`bitmap_blocks` blocks together: the 1st says which frames
//! exist, the 2nd which were dumped), then one 24-byte page descriptor per dumped frame in frame
//! order (offset, size and compression of its data), then the pages' data. A frame's descriptor
//! is found by counting the 2nd bitmap's bits before it. A flattened file is a 4096-byte header
//! and then records of (offset, size, bytes) in big-endian that place the bytes of the
//! kdump-compressed (or ELF) file at their offsets, ending with the record (-1, -1); a later
//! record overrides an earlier one (makedumpfile rewrites its sub header at the end).

use std::borrow::Cow;
use std::collections::BTreeMap;

use anyhow::{bail, Result};

use super::Bytes;

#[cfg(any(test, feature = "fixture"))]
pub mod writer;

/// The main header's signature (diskdump_mod.h `KDUMP_SIGNATURE`).
pub const KDUMP_SIGNATURE: &[u8; 8] = b"KDUMP   ";
/// The old diskdump facility's signature: another format.
const DISKDUMP_SIGNATURE: &[u8; 8] = b"DISKDUMP";
/// The flattened format's signature (makedumpfile.h `MAKEDUMPFILE_SIGNATURE`, padded to 16).
pub const FLAT_SIGNATURE: &[u8; 16] = b"makedumpfile\0\0\0\0";
/// Size of the flattened format's header (`MAX_SIZE_MDF_HEADER`).
const FLAT_HEADER_SIZE: usize = 4096;

/// The only page size read: x86-64's (the kdump-compressed block size is the page size).
pub const PAGE: usize = 4096;
/// `sizeof(struct disk_dump_header)` on x86-64.
const HEADER_SIZE: usize = 464;
/// `sizeof(page_desc_t)`.
const DESC_SIZE: usize = 24;

/// `page_desc_t.flags` and `disk_dump_header.status` bits (diskdump_mod.h).
pub mod flags {
    /// zlib (`compress2`, with the zlib header).
    pub const ZLIB: u32 = 0x1;
    /// LZO1X-1 (`lzo1x_1_compress`).
    pub const LZO: u32 = 0x2;
    /// Snappy, raw format.
    pub const SNAPPY: u32 = 0x4;
    /// Header status only: makedumpfile ran out of space; missing pages have descriptor offset 0.
    pub const INCOMPLETE: u32 = 0x8;
    /// Header status only: unused vmemmap pages left out.
    pub const EXCLUDED_VMEMMAP: u32 = 0x10;
    /// zstd, one frame.
    pub const ZSTD: u32 = 0x20;
    /// Every page compression.
    pub const COMPRESSIONS: u32 = ZLIB | LZO | SNAPPY | ZSTD;
}

/// Field offsets of `struct disk_dump_header` on x86-64 (diskdump_mod.h).
mod dh {
    pub const VERSION: usize = 8;
    pub const UTSNAME: usize = 12;
    pub const UTS_FIELD: usize = 65;
    pub const MACHINE: usize = UTSNAME + 4 * UTS_FIELD;
    pub const STATUS: usize = 424;
    pub const BLOCK_SIZE: usize = 428;
    pub const SUB_HDR_SIZE: usize = 432;
    pub const BITMAP_BLOCKS: usize = 436;
    pub const MAX_MAPNR: usize = 440;
}

/// Field offsets of `struct kdump_sub_header` on x86-64 (diskdump_mod.h).
mod kh {
    pub const SPLIT: usize = 12;
    pub const MAX_MAPNR_64: usize = 96;
    pub const SIZE_V6: usize = 104;
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Bytes `start..start + len` of the original file are at `at` in the flattened file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    len: u64,
    at: usize,
}

/// The bytes of a kdump-compressed file: the file itself, or the flattened file's records.
enum Container {
    Plain(Bytes),
    /// Extents keyed by their start in the original file, not overlapping.
    Flat {
        bytes: Bytes,
        extents: BTreeMap<u64, Extent>,
        len: u64,
    },
}

impl Container {
    /// Length of the (original) file.
    fn len(&self) -> u64 {
        match self {
            Container::Plain(b) => b.len() as u64,
            Container::Flat { len, .. } => *len,
        }
    }

    /// `len` bytes at `off` of the original file, `None` if some are not in it.
    fn get(&self, off: u64, len: usize) -> Option<Cow<'_, [u8]>> {
        match self {
            Container::Plain(b) => {
                let end = off.checked_add(len as u64)?;
                (end <= b.len() as u64).then(|| Cow::Borrowed(&b[off as usize..end as usize]))
            }
            Container::Flat { bytes, extents, .. } => {
                let piece = |o: u64| -> Option<&[u8]> {
                    let (&start, e) = extents.range(..=o).next_back()?;
                    let skip = o - start;
                    (skip < e.len).then(|| &bytes[e.at + skip as usize..e.at + e.len as usize])
                };
                let first = piece(off)?;
                if first.len() >= len {
                    return Some(Cow::Borrowed(&first[..len]));
                }
                // Grown from the records' bytes, not reserved from `len` (a header's size): a
                // gap ends the read before more is held than the flattened file has.
                let mut v = Vec::with_capacity(len.min(bytes.len()));
                while v.len() < len {
                    let p = piece(off + v.len() as u64)?;
                    let n = p.len().min(len - v.len());
                    v.extend_from_slice(&p[..n]);
                }
                Some(Cow::Owned(v))
            }
        }
    }
}

/// Reads the flattened file's records into extents; errors name the record and its file offset.
fn flat_extents(b: &[u8], name: &str) -> Result<(BTreeMap<u64, Extent>, u64)> {
    if b.len() < FLAT_HEADER_SIZE {
        bail!(
            "{name}: a makedumpfile flattened file of {} bytes, shorter than its {FLAT_HEADER_SIZE}-byte header: the dump is truncated",
            b.len()
        );
    }
    let be = |off: usize| i64::from_be_bytes(b[off..off + 8].try_into().expect("8 bytes"));
    let (ty, version) = (be(16), be(24));
    if (ty, version) != (1, 1) {
        bail!("{name}: a makedumpfile flattened file of type {ty} version {version}; lbr-decode reads type 1 version 1");
    }
    let mut extents = BTreeMap::new();
    let mut len = 0u64;
    let mut pos = FLAT_HEADER_SIZE;
    loop {
        if pos + 16 > b.len() {
            bail!(
                "{name}: the flattened file ends at byte {} inside or before a record header, without the end record (offset -1, size -1): the dump is truncated",
                b.len()
            );
        }
        let (off, size) = (be(pos), be(pos + 8));
        if (off, size) == (-1, -1) {
            if pos + 16 != b.len() {
                bail!(
                    "{name}: {} bytes after the flattened file's end record at file offset {pos:#x} (two streams joined?)",
                    b.len() - pos - 16
                );
            }
            break;
        }
        if off < 0 || size <= 0 || off.checked_add(size).is_none() {
            bail!("{name}: flattened record at file offset {pos:#x}: offset {off}, size {size}: not a valid record");
        }
        let data = pos + 16;
        if (size as u64) > (b.len() - data) as u64 {
            bail!(
                "{name}: flattened record at file offset {pos:#x} ({size} bytes for offset {off:#x}) ends past the end of the file ({} bytes): the dump is truncated",
                b.len()
            );
        }
        insert_overriding(
            &mut extents,
            off as u64,
            Extent {
                len: size as u64,
                at: data,
            },
        );
        len = len.max((off + size) as u64);
        pos = data + size as usize;
    }
    Ok((extents, len))
}

/// Adds `new` at `start`, trimming or removing what it overlaps (a later record wins).
fn insert_overriding(map: &mut BTreeMap<u64, Extent>, start: u64, new: Extent) {
    let end = start + new.len;
    let before = map
        .range(..start)
        .next_back()
        .filter(|(&s, e)| s + e.len > start)
        .map(|(&s, _)| s);
    let inside: Vec<u64> = map.range(start..end).map(|(&s, _)| s).collect();
    for s in before.into_iter().chain(inside) {
        let e = map.remove(&s).expect("listed above");
        if s < start {
            map.insert(
                s,
                Extent {
                    len: start - s,
                    at: e.at,
                },
            );
        }
        if s + e.len > end {
            map.insert(
                end,
                Extent {
                    len: s + e.len - end,
                    at: e.at + (end - s) as usize,
                },
            );
        }
    }
    map.insert(start, new);
}

/// A page's descriptor (`page_desc_t`).
#[derive(Clone, Copy, Debug)]
struct Desc {
    offset: u64,
    size: usize,
    flags: u32,
}

/// A kdump-compressed dump.
pub struct Kdump {
    file: Container,
    /// `disk_dump_header.status`.
    status: u32,
    /// The 2nd bitmap (dumped frames), one bit per frame below `max_mapnr`, as 64-bit words.
    dumped: Vec<u64>,
    /// Dumped frames before each word of `dumped` (the descriptor index of its first bit).
    before: Vec<u64>,
    /// Number of dumped frames.
    nr_dumped: u64,
    /// File offset of the first page descriptor.
    desc_base: u64,
}

/// The page decompressors, kept across pages.
pub struct Decoders {
    zlib: flate2::Decompress,
    zstd: ruzstd::decoding::FrameDecoder,
    snappy: snap::raw::Decoder,
}

impl Default for Decoders {
    fn default() -> Self {
        let mut zstd = ruzstd::decoding::FrameDecoder::new();
        // A page's frame needs a window of a page (zstd sizes it to the input); the default
        // limit, 128 MiB, would let a damaged frame header reserve that much per page.
        zstd.set_max_window_size(1 << 20);
        Decoders {
            zlib: flate2::Decompress::new(true),
            zstd,
            snappy: snap::raw::Decoder::new(),
        }
    }
}

/// What is at the start of a dump file, by its magic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// ELF (`\x7fELF`).
    Elf,
    /// makedumpfile's kdump-compressed format (`KDUMP   `), or the old diskdump's
    /// (`DISKDUMP`, refused by name).
    Kdump,
    /// makedumpfile's flattened format (`makedumpfile\0\0\0\0`).
    Flat,
}

/// The dump format `head` (the file's first 16 bytes or more) starts, if any.
pub fn kind(head: &[u8]) -> Option<Kind> {
    if head.starts_with(b"\x7fELF") {
        Some(Kind::Elf)
    } else if head.starts_with(KDUMP_SIGNATURE) || head.starts_with(DISKDUMP_SIGNATURE) {
        Some(Kind::Kdump)
    } else if head.starts_with(FLAT_SIGNATURE) {
        Some(Kind::Flat)
    } else {
        None
    }
}

impl Kdump {
    /// A kdump-compressed file.
    pub(crate) fn parse(bytes: Bytes, name: &str) -> Result<Kdump> {
        Self::parse_container(Container::Plain(bytes), name)
    }

    /// A flattened file holding a kdump-compressed one.
    pub(crate) fn parse_flat(bytes: Bytes, name: &str) -> Result<Kdump> {
        let (extents, len) = flat_extents(&bytes, name)?;
        let file = Container::Flat {
            bytes,
            extents,
            len,
        };
        let head = file.get(0, 8);
        match head.as_deref().and_then(kind) {
            Some(Kind::Kdump) => Self::parse_container(file, name),
            Some(Kind::Elf) => bail!(
                "{name}: a flattened ELF dump (makedumpfile -E -F): lbr-decode reads flattened kdump-compressed dumps; `makedumpfile -R FILE < {name}` rearranges it into an ELF file it reads"
            ),
            _ => bail!(
                "{name}: a makedumpfile flattened file whose offset 0 holds {}, neither a kdump-compressed nor an ELF header",
                match head {
                    Some(h) => format!("{:02x?}", &h[..]),
                    None => "no data".to_string(),
                }
            ),
        }
    }

    fn parse_container(file: Container, name: &str) -> Result<Kdump> {
        let what = |f: &Container| {
            if matches!(f, Container::Flat { .. }) {
                "flattened kdump-compressed dump"
            } else {
                "kdump-compressed dump"
            }
        };
        let Some(h) = file.get(0, HEADER_SIZE) else {
            bail!(
                "{name}: a {} of {} bytes, shorter than its {HEADER_SIZE}-byte main header (disk_dump_header): the dump is truncated",
                what(&file),
                file.len()
            );
        };
        if h[..8] == *DISKDUMP_SIGNATURE {
            bail!("{name}: an old diskdump file (signature DISKDUMP), not makedumpfile's kdump-compressed format");
        }
        if h[..8] != *KDUMP_SIGNATURE {
            bail!("{name}: no kdump-compressed signature (\"KDUMP   \") at offset 0");
        }
        let version = u32_at(&h, dh::VERSION) as i32;
        let machine = {
            let m = &h[dh::MACHINE..dh::MACHINE + dh::UTS_FIELD];
            String::from_utf8_lossy(&m[..m.iter().position(|&c| c == 0).unwrap_or(m.len())])
                .into_owned()
        };
        if machine != "x86_64" {
            bail!("{name}: a memory dump of machine {machine:?} (disk_dump_header utsname), not x86_64");
        }
        let status = u32_at(&h, dh::STATUS);
        let block_size = u32_at(&h, dh::BLOCK_SIZE) as i32;
        if block_size != PAGE as i32 {
            bail!(
                "{name}: block size {block_size} (disk_dump_header), not x86-64's page size {PAGE}"
            );
        }
        let sub_hdr_size = u32_at(&h, dh::SUB_HDR_SIZE) as i32;
        let bitmap_blocks = u32_at(&h, dh::BITMAP_BLOCKS) as u64;
        if !(1..=1 << 20).contains(&sub_hdr_size)
            || bitmap_blocks == 0
            || !bitmap_blocks.is_multiple_of(2)
        {
            bail!("{name}: disk_dump_header of {sub_hdr_size} sub header blocks and {bitmap_blocks} bitmap blocks: not a kdump-compressed header makedumpfile writes");
        }
        let Some(sub) = file.get(PAGE as u64, kh::SIZE_V6) else {
            bail!(
                "{name}: the {} of {} bytes ends inside its sub header (kdump_sub_header): the dump is truncated",
                what(&file),
                file.len()
            );
        };
        if version >= 2 && u32_at(&sub, kh::SPLIT) != 0 {
            bail!("{name}: one part of a split dump (makedumpfile --split): join the parts with makedumpfile --reassemble first");
        }
        let max_mapnr = if version >= 6 {
            u64_at(&sub, kh::MAX_MAPNR_64)
        } else {
            u32_at(&h, dh::MAX_MAPNR) as u64
        };
        let half = bitmap_blocks / 2 * PAGE as u64;
        if max_mapnr.div_ceil(8) > half {
            bail!("{name}: {max_mapnr} page frames (max_mapnr), more than its bitmaps of {half} bytes each hold");
        }
        let bitmap2 = (1 + sub_hdr_size as u64) * PAGE as u64 + half;
        let Some(bits) = file.get(bitmap2, max_mapnr.div_ceil(8) as usize) else {
            bail!(
                "{name}: the {} of {} bytes ends inside its bitmaps (offset {bitmap2:#x}, {} bytes): the dump is truncated",
                what(&file),
                file.len(),
                max_mapnr.div_ceil(8)
            );
        };
        let mut dumped: Vec<u64> = bits
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect();
        if max_mapnr % 64 != 0 {
            if let Some(last) = dumped.last_mut() {
                *last &= (1u64 << (max_mapnr % 64)) - 1;
            }
        }
        let mut before = Vec::with_capacity(dumped.len());
        let mut nr_dumped = 0u64;
        for w in &dumped {
            before.push(nr_dumped);
            nr_dumped += w.count_ones() as u64;
        }
        let desc_base = (1 + sub_hdr_size as u64 + bitmap_blocks) * PAGE as u64;
        let k = Kdump {
            file,
            status,
            dumped,
            before,
            nr_dumped,
            desc_base,
        };
        if !k.incomplete() {
            k.check_descriptors(name, what(&k.file))?;
        }
        Ok(k)
    }

    /// Every page descriptor is in the file and so is its data, with a known compression: a
    /// complete dump that fails this is truncated or damaged.
    fn check_descriptors(&self, name: &str, what: &str) -> Result<()> {
        let end = self.desc_base + self.nr_dumped * DESC_SIZE as u64;
        if end > self.file.len() {
            bail!(
                "{name}: the {what}'s {} page descriptors end at offset {end:#x}, past the end of its {} bytes: the dump is truncated",
                self.nr_dumped,
                self.file.len()
            );
        }
        for pfn in self.dumped_frames() {
            if let Err(e) = self.desc(pfn) {
                bail!("{name}: {e}");
            }
        }
        Ok(())
    }

    /// Whether makedumpfile marked the dump incomplete (it ran out of space).
    pub fn incomplete(&self) -> bool {
        self.status & flags::INCOMPLETE != 0
    }

    /// Bytes of memory in the dump (dumped frames, including zero pages).
    pub fn memory_size(&self) -> u64 {
        self.nr_dumped * PAGE as u64
    }

    /// Whether frame `pfn` was dumped (2nd bitmap).
    fn is_dumped(&self, pfn: u64) -> bool {
        let w = (pfn / 64) as usize;
        w < self.dumped.len() && self.dumped[w] >> (pfn % 64) & 1 != 0
    }

    /// Dumped frames, rising.
    fn dumped_frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.dumped.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros() as u64;
                    w &= w - 1;
                    i as u64 * 64 + b
                })
            })
        })
    }

    /// The descriptor of dumped frame `pfn`, checked; the error says what is wrong with it.
    fn desc(&self, pfn: u64) -> std::result::Result<Desc, String> {
        let w = (pfn / 64) as usize;
        let index =
            self.before[w] + (self.dumped[w] & ((1u64 << (pfn % 64)) - 1)).count_ones() as u64;
        let at = self.desc_base + index * DESC_SIZE as u64;
        let Some(d) = self.file.get(at, DESC_SIZE) else {
            return Err(format!(
                "page frame {pfn:#x}: its descriptor (file offset {at:#x}) is not in the file (the dump is incomplete or truncated)"
            ));
        };
        let desc = Desc {
            offset: u64_at(&d, 0),
            size: u32_at(&d, 8) as usize,
            flags: u32_at(&d, 12),
        };
        let compressions = desc.flags & flags::COMPRESSIONS;
        if desc.offset == 0 {
            return Err(format!(
                "page frame {pfn:#x}: its descriptor has no data (offset 0: not written, the dump is incomplete)"
            ));
        }
        if desc.flags & !flags::COMPRESSIONS != 0 || compressions.count_ones() > 1 {
            return Err(format!(
                "page frame {pfn:#x}: descriptor at file offset {at:#x} has flags {:#x}, not one of makedumpfile's page compressions",
                desc.flags
            ));
        }
        if desc.size == 0 || desc.size > PAGE || (compressions == 0 && desc.size != PAGE) {
            return Err(format!(
                "page frame {pfn:#x}: descriptor at file offset {at:#x} gives {} bytes of data with flags {:#x}: not a page makedumpfile writes",
                desc.size, desc.flags
            ));
        }
        if desc
            .offset
            .checked_add(desc.size as u64)
            .is_none_or(|end| end > self.file.len())
        {
            return Err(format!(
                "page frame {pfn:#x}: its {} bytes of data at file offset {:#x} end past the end of the file ({} bytes): the dump is truncated",
                desc.size,
                desc.offset,
                self.file.len()
            ));
        }
        Ok(desc)
    }

    /// The page at frame `pfn`, decompressed into `out`; the error says why it cannot be had.
    pub fn page(
        &self,
        pfn: u64,
        out: &mut [u8; PAGE],
        dec: &mut Decoders,
    ) -> std::result::Result<(), String> {
        if !self.is_dumped(pfn) {
            return Err(format!(
                "physical {:#x} is not in the dump (left out by makedumpfile's filter, or not memory)",
                pfn * PAGE as u64
            ));
        }
        let d = self.desc(pfn)?;
        let data = self
            .file
            .get(d.offset, d.size)
            .ok_or_else(|| format!("page frame {pfn:#x}: its data is not in the file"))?;
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            format!(
                "page frame {pfn:#x}: {what} data at file offset {:#x} ({} bytes) does not decompress to a page: {e}",
                d.offset, d.size
            )
        };
        match d.flags {
            0 => out.copy_from_slice(&data),
            flags::ZLIB => {
                dec.zlib.reset(true);
                match dec
                    .zlib
                    .decompress(&data, out, flate2::FlushDecompress::Finish)
                {
                    Ok(flate2::Status::StreamEnd) if dec.zlib.total_out() == PAGE as u64 => {}
                    Ok(s) => {
                        return Err(bad(
                            "zlib",
                            &format!("{s:?} after {} bytes", dec.zlib.total_out()),
                        ))
                    }
                    Err(e) => return Err(bad("zlib", &e)),
                }
            }
            flags::LZO => lzo1x::decompress(&data, out).map_err(|e| bad("LZO", &e))?,
            flags::SNAPPY => match snap::raw::decompress_len(&data) {
                Ok(PAGE) => {
                    dec.snappy
                        .decompress(&data, out)
                        .map_err(|e| bad("snappy", &e))?;
                }
                Ok(n) => return Err(bad("snappy", &format!("it holds {n} bytes"))),
                Err(e) => return Err(bad("snappy", &e)),
            },
            flags::ZSTD => match dec.zstd.decode_all(&data, out) {
                Ok(PAGE) => {}
                Ok(n) => return Err(bad("zstd", &format!("it holds {n} bytes"))),
                Err(e) => return Err(bad("zstd", &e)),
            },
            _ => unreachable!("desc() admits one compression flag"),
        }
        Ok(())
    }

    /// Dumped frames with their page's first bytes, for the scan: `visit(pfn, page)` for each
    /// page that can be read, `bad(message)` for each that cannot (damaged data).
    pub fn for_each_page(
        &self,
        visit: &mut dyn FnMut(u64, &[u8; PAGE]),
        bad: &mut dyn FnMut(String),
    ) {
        let mut dec = Decoders::default();
        let mut page = Box::new([0u8; PAGE]);
        for pfn in self.dumped_frames() {
            match self.page(pfn, &mut page, &mut dec) {
                Ok(()) => visit(pfn, &page),
                Err(e) => bad(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::writer::{self, Compression};
    use super::*;
    use crate::dump::Dump;
    use crate::fixture::{self, Slots};

    /// Memory as a guest's: noise pages that compress, zero pages, and a snapshot area of two
    /// pages or more (ring 16) at frame 0x103 among them. Frames 0..0x200; (frame, bytes) of the pages
    /// dumped: every frame but 0x100..0x102 and the frames listed in `left_out`.
    fn memory(left_out: &[u64]) -> (Vec<u8>, Vec<u64>) {
        let area = fixture::area(32, 16, 1, Slots::OneSnapshot);
        assert!(area.len() > PAGE, "the area spans more than a page");
        let mut mem = vec![0u8; 0x200 * PAGE];
        let mut x = 1u32;
        for (i, b) in mem.iter_mut().enumerate() {
            // Text-like bytes in the first half of every other page; the rest zero.
            if (i / PAGE) % 2 == 1 && i % PAGE < PAGE / 2 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *b = b"lbr-dump kernel memory "[(x >> 16) as usize % 23];
            }
        }
        mem[0x103 * PAGE..0x103 * PAGE + area.len()].copy_from_slice(&area);
        let dumped = (0..0x200)
            .filter(|p| !(0x100..0x103).contains(p) && !left_out.contains(p))
            .collect();
        (mem, dumped)
    }

    fn kdump_of(mem: &[u8], dumped: &[u64], c: Compression) -> Vec<u8> {
        let pages: Vec<(u64, &[u8])> = dumped
            .iter()
            .map(|&p| (p, &mem[p as usize * PAGE..(p as usize + 1) * PAGE]))
            .collect();
        writer::kdump(&pages, 0x200, c)
    }

    fn open(bytes: Vec<u8>) -> Result<Dump> {
        Dump::from_vec(bytes, "test.kdump")
    }

    fn err(bytes: Vec<u8>) -> String {
        format!("{:#}", open(bytes).err().expect("refused"))
    }

    /// The one snapshot of the fixture area, as the ELF reader finds it in the same memory.
    fn from_elf(mem: &[u8]) -> Vec<crate::snapshot::Snapshot> {
        let d = Dump::from_vec(fixture::core(62, &[(0, mem)]), "test.elf").unwrap();
        let mut w = Vec::new();
        let a = d.areas(&mut w);
        assert_eq!(w, Vec::<String>::new());
        assert_eq!(a.len(), 1);
        a.into_iter().next().unwrap().snapshots
    }

    #[test]
    fn every_compression_reads_as_the_elf_dump_of_the_same_memory() {
        let (mem, dumped) = memory(&[]);
        let want = from_elf(&mem);
        assert_eq!(want.len(), 1);
        for c in Compression::ALL {
            let file = kdump_of(&mem, &dumped, c);
            let d = open(file.clone()).unwrap_or_else(|e| panic!("{c:?}: {e:#}"));
            assert_eq!(d.memory_size(), dumped.len() as u64 * PAGE as u64, "{c:?}");
            let mut w = Vec::new();
            let areas = d.areas(&mut w);
            assert_eq!(w, Vec::<String>::new(), "{c:?}");
            assert_eq!(areas.len(), 1, "{c:?}");
            assert_eq!(areas[0].paddr, 0x103000, "{c:?}");
            assert_eq!(areas[0].anchor.1, "_printk");
            assert_eq!(
                format!("{:?}", areas[0].snapshots),
                format!("{want:?}"),
                "{c:?}"
            );
            // The pages really were compressed (the writer falls back to raw only for pages that
            // do not shrink): the file is smaller than its raw pages.
            if c != Compression::None {
                assert!(
                    file.len() < dumped.len() * PAGE / 2,
                    "{c:?}: {} bytes",
                    file.len()
                );
            }
            // Flattened, in small records, the sub header rewritten at the end.
            let d = open(writer::flatten(&file, 1000)).unwrap_or_else(|e| panic!("{c:?}: {e:#}"));
            let areas = d.areas(&mut w);
            assert_eq!(w, Vec::<String>::new(), "{c:?} flattened");
            assert_eq!(
                format!("{:?}", areas[0].snapshots),
                format!("{want:?}"),
                "{c:?} flattened"
            );
        }
    }

    #[test]
    fn an_area_with_a_page_left_out_is_reported_not_read() {
        let (mem, dumped) = memory(&[0x104]);
        let d = open(kdump_of(&mem, &dumped, Compression::Zlib)).unwrap();
        let mut w = Vec::new();
        assert!(d.areas(&mut w).is_empty());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("physical 0x103000: the area's")
                && w[0].contains("physical 0x104000 is not in the dump"),
            "{w:?}"
        );
    }

    #[test]
    fn a_damaged_page_is_a_warning_and_the_rest_is_scanned() {
        let (mem, dumped) = memory(&[]);
        let pages: Vec<(u64, &[u8])> = dumped
            .iter()
            .map(|&p| (p, &mem[p as usize * PAGE..(p as usize + 1) * PAGE]))
            .collect();
        let (mut file, layout) = writer::kdump_layout(&pages, 0x200, Compression::Zlib);
        // Frame 1 (text-like, compressed): its zlib stream's first bytes overwritten.
        let at = layout.data[1];
        file[at..at + 4].copy_from_slice(&[0xff; 4]);
        let d = open(file).unwrap();
        let mut w = Vec::new();
        let areas = d.areas(&mut w);
        assert_eq!(areas.len(), 1);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("page frame 0x1: zlib data at file offset"),
            "{w:?}"
        );
    }

    #[test]
    fn truncated_files_are_refused_saying_so() {
        let (mem, dumped) = memory(&[]);
        for c in [Compression::None, Compression::Lzo] {
            let file = kdump_of(&mem, &dumped, c);
            // Cut in the main header, the sub header, the bitmaps, the descriptors, the data.
            for cut in [
                100,
                PAGE + 50,
                2 * PAGE + 10,
                4 * PAGE + 100,
                file.len() - 1,
            ] {
                let e = err(file[..cut].to_vec());
                assert!(e.contains("truncated"), "{c:?} cut at {cut}: {e}");
                assert!(e.starts_with("test.kdump: "), "{e}");
            }
            let flat = writer::flatten(&file, 4096);
            for cut in [4000, 4096 + 8, flat.len() / 2, flat.len() - 1] {
                let e = err(flat[..cut].to_vec());
                assert!(e.contains("truncated"), "{c:?} flattened cut at {cut}: {e}");
            }
        }
    }

    #[test]
    fn foreign_files_are_refused_saying_what_they_are() {
        let (mem, dumped) = memory(&[]);
        let file = kdump_of(&mem, &dumped, Compression::Zlib);
        let with = |off: usize, v: &[u8]| {
            let mut f = file.clone();
            f[off..off + v.len()].copy_from_slice(v);
            f
        };
        let cases: [(Vec<u8>, &str); 7] = [
            (with(0, b"DISKDUMP"), "old diskdump file"),
            (
                with(writer::at::MACHINE, b"aarch64\0"),
                "machine \"aarch64\"",
            ),
            (
                with(writer::at::BLOCK_SIZE, &65536u32.to_le_bytes()),
                "block size 65536",
            ),
            (with(writer::at::SPLIT, &1u32.to_le_bytes()), "split dump"),
            // A descriptor with a compression flag makedumpfile does not have.
            (with(4 * PAGE + 12, &0x40u32.to_le_bytes()), "flags 0x40"),
            (b"\x7fELF\x02\x01".to_vec(), "not a 64-bit ELF"),
            (
                b"MDMP\x93\xa7\0\0 a minidump".to_vec(),
                "not a memory dump lbr-decode reads",
            ),
        ];
        for (bytes, want) in cases {
            let e = err(bytes);
            assert!(e.contains(want), "want {want:?} in: {e}");
        }
        // A flattened ELF dump is named, with the way to read it.
        let elf = fixture::core(62, &[(0, &mem[..PAGE])]);
        let e = err(writer::flatten(&elf, 4096));
        assert!(
            e.contains("flattened ELF dump") && e.contains("makedumpfile -R"),
            "{e}"
        );
        // Bad flattened records.
        let mut flat = writer::flatten(&file, 4096);
        flat[16..24].copy_from_slice(&2i64.to_be_bytes());
        assert!(err(flat).contains("type 2 version 1"));
        let mut flat = writer::flatten(&file, 4096);
        flat[4096 + 8..4096 + 16].copy_from_slice(&(-5i64).to_be_bytes());
        assert!(err(flat).contains("size -5: not a valid record"));
        let mut flat = writer::flatten(&file, 4096);
        flat.extend_from_slice(b"more");
        assert!(err(flat).contains("4 bytes after the flattened file's end record"));
    }

    #[test]
    fn an_incomplete_dump_reads_what_was_written() {
        // makedumpfile ran out of space after frame 0x150: the descriptors after it read as zero.
        let (mem, dumped) = memory(&[]);
        let pages: Vec<(u64, &[u8])> = dumped
            .iter()
            .map(|&p| (p, &mem[p as usize * PAGE..(p as usize + 1) * PAGE]))
            .collect();
        let (mut file, layout) = writer::kdump_layout(&pages, 0x200, Compression::Snappy);
        let n = dumped.iter().position(|&p| p == 0x150).unwrap();
        let cut = layout.descs + n * DESC_SIZE;
        file[cut..layout.descs + dumped.len() * DESC_SIZE].fill(0);
        // Refused while the header does not say the dump is incomplete.
        let e = err(file.clone());
        assert!(
            e.contains("page frame 0x150") && e.contains("offset 0"),
            "{e}"
        );
        let status = u32_at(&file, writer::at::STATUS) | flags::INCOMPLETE;
        file[writer::at::STATUS..writer::at::STATUS + 4].copy_from_slice(&status.to_le_bytes());
        let d = open(file).unwrap();
        let mut w = Vec::new();
        let areas = d.areas(&mut w);
        assert_eq!(areas.len(), 1, "the area, at 0x103, was written");
        assert!(w[0].contains("marked the dump incomplete"), "{w:?}");
        assert!(w[1].contains("page frame 0x150"), "{w:?}");
    }

    /// [`fixture::bts_area`]'s memory as whole pages: (frame, page) of its BTS buffers (frames
    /// 0x40-0x43) and of the area (frame 0x100), rising; and the same as ELF segments.
    #[allow(clippy::type_complexity)]
    fn bts_memory() -> (Vec<(u64, Vec<u8>)>, Vec<(u64, Vec<u8>)>) {
        let (area, buffers) = fixture::bts_area();
        let mut segments = buffers;
        segments.push((0x10_0000, area));
        let pages = segments
            .iter()
            .map(|(phys, bytes)| {
                assert!(bytes.len() <= PAGE);
                let mut page = bytes.clone();
                page.resize(PAGE, 0);
                (phys / PAGE as u64, page)
            })
            .collect();
        (pages, segments)
    }

    /// The BTS buffers a kdump-compressed dump holds are read as from an ELF dump; a buffer's
    /// frame left out makes that snapshot's history unreadable, with a warning.
    #[test]
    fn bts_histories_read_as_from_the_elf_dump() {
        let (pages, segments) = bts_memory();
        let segs: Vec<(u64, &[u8])> = segments.iter().map(|(p, b)| (*p, b.as_slice())).collect();
        let elf = Dump::from_vec(fixture::core(62, &segs), "test.elf").unwrap();
        let mut w = Vec::new();
        let want = elf.areas(&mut w).remove(0).snapshots;
        assert_eq!(w, Vec::<String>::new());
        assert_eq!(
            want[1].bts.as_ref().map(|b| b.records.len()),
            Some(10),
            "the wrapped buffer's records"
        );
        let all: Vec<(u64, &[u8])> = pages.iter().map(|(f, p)| (*f, p.as_slice())).collect();
        for c in Compression::ALL {
            let d = open(writer::kdump(&all, 0x200, c)).unwrap();
            let mut w = Vec::new();
            let areas = d.areas(&mut w);
            assert_eq!(w, Vec::<String>::new(), "{c:?}");
            assert_eq!(
                format!("{:?}", areas[0].snapshots),
                format!("{want:?}"),
                "{c:?}"
            );
        }
        // Frame 0x41 (buffer 1, seq 2's) not dumped.
        let some: Vec<(u64, &[u8])> = all.iter().copied().filter(|(f, _)| *f != 0x41).collect();
        let d = open(writer::kdump(&some, 0x200, Compression::Zlib)).unwrap();
        let mut w = Vec::new();
        let snaps = d.areas(&mut w).remove(0).snapshots;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("physical 0x100000: cpu 0 seq 2: BTS history not read: the kept buffer (physical 0x41000, 240 bytes) is not in the dump: "),
            "{w:?}"
        );
        assert_eq!(snaps[1].bts.as_ref().unwrap().state.name(), "unreadable");
        assert_eq!(
            format!("{:?}", snaps[0].bts),
            format!("{:?}", want[0].bts),
            "the other histories are read"
        );
    }

    /// The kdump fuzzer's seeds are these fixtures (one per compression, and one flattened), so
    /// that they follow the layout; `LBR_WRITE_SEEDS=1 cargo test` rewrites them.
    #[test]
    fn kdump_fuzz_seeds_are_current() {
        // A small memory: the area and three other pages, so that the fuzzer's inputs are short.
        let area = fixture::area(4, 2, 1, Slots::OneSnapshot);
        let mut text = vec![0u8; PAGE];
        for (i, b) in text.iter_mut().enumerate() {
            *b = b"lbr-dump kernel memory "[i * 7 % 23];
        }
        let zero = vec![0u8; PAGE];
        let pages: Vec<(u64, &[u8])> = vec![(1, &text), (2, &zero), (3, &area), (5, &text)];
        let mut seeds: Vec<(String, Vec<u8>)> = Compression::ALL
            .iter()
            .map(|&c| {
                (
                    format!("{c:?}.kdump").to_lowercase(),
                    writer::kdump(&pages, 8, c),
                )
            })
            .collect();
        let flat = writer::flatten(&writer::kdump(&pages, 8, Compression::Zlib), 3000);
        seeds.push(("zlib.flat".to_string(), flat));
        // An area with BTS, its buffers in other frames.
        let (bts, _) = bts_memory();
        let pages: Vec<(u64, &[u8])> = bts.iter().map(|(f, p)| (*f, p.as_slice())).collect();
        seeds.push((
            "bts.kdump".to_string(),
            writer::kdump(&pages, 0x101, Compression::Zlib),
        ));
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/kdump");
        for (name, want) in seeds {
            let path = format!("{dir}/{name}");
            if std::env::var_os("LBR_WRITE_SEEDS").is_some() {
                std::fs::create_dir_all(dir).unwrap();
                std::fs::write(&path, &want).unwrap();
            }
            let have = std::fs::read(&path).unwrap_or_default();
            assert!(
                have == want,
                "{path} is not the current fixture: LBR_WRITE_SEEDS=1 cargo test rewrites it"
            );
            let d = open(have).unwrap();
            assert_eq!(d.areas(&mut Vec::new()).len(), 1, "{name}");
        }
    }

    #[test]
    fn a_flat_range_beyond_its_records_is_absent_without_reserving_it() {
        // Review finding: a crafted flattened file (one 8-byte record at offset 0, one 8 TiB
        // further) made `get` reserve the whole asked length before finding the gap: an
        // allocation of terabytes and an abort. The range is simply not in the file.
        let far = 8 << 40;
        let mut extents = BTreeMap::new();
        extents.insert(0, Extent { len: 8, at: 0 });
        extents.insert(far, Extent { len: 8, at: 8 });
        let file = Container::Flat {
            bytes: Bytes::Owned(vec![0xab; 16]),
            extents,
            len: far + 8,
        };
        assert!(file.get(0, (far + 8) as usize).is_none());
        assert_eq!(file.get(0, 8).as_deref(), Some(&[0xab; 8][..]));
    }

    #[test]
    fn later_flat_records_override_earlier_ones() {
        let mut m = BTreeMap::new();
        insert_overriding(&mut m, 0, Extent { len: 100, at: 1000 });
        insert_overriding(&mut m, 200, Extent { len: 50, at: 2000 });
        // Overlaps the end of the first and the start of the second.
        insert_overriding(&mut m, 90, Extent { len: 120, at: 3000 });
        let got: Vec<(u64, Extent)> = m.into_iter().collect();
        assert_eq!(
            got,
            vec![
                (0, Extent { len: 90, at: 1000 }),
                (90, Extent { len: 120, at: 3000 }),
                (210, Extent { len: 40, at: 2010 }),
            ]
        );
        // Inside one: splits it in three.
        let mut m = BTreeMap::new();
        insert_overriding(&mut m, 0, Extent { len: 100, at: 0 });
        insert_overriding(&mut m, 10, Extent { len: 5, at: 500 });
        let got: Vec<(u64, Extent)> = m.into_iter().collect();
        assert_eq!(
            got,
            vec![
                (0, Extent { len: 10, at: 0 }),
                (10, Extent { len: 5, at: 500 }),
                (15, Extent { len: 85, at: 15 }),
            ]
        );
    }
}
