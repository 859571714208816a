// SPDX-License-Identifier: GPL-2.0

//! A writer of makedumpfile's kdump-compressed and flattened formats, for the tests, the
//! benchmark and the fuzzers' seeds. It lays a file out as makedumpfile.c does
//! (write_kdump_header, the bitmaps on block boundaries, write_kdump_pages_cyclic: one
//! descriptor per dumped frame, the shared zero page `pd_zero` first, a page stored raw when
//! compression does not make it smaller; write_start_flat_header and write_buffer's flattened
//! records, the sub header rewritten at the end as update_sub_header does). Writing only:
//! reading is [`super::Kdump`], and the compressions are the crates' encoders.

use std::io::Write;

use super::{flags, PAGE};

/// A page compression (`makedumpfile -c`, `-l`, `-p`, `-z`) or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Pages stored raw.
    None,
    /// `-c`.
    Zlib,
    /// `-l`.
    Lzo,
    /// `-p`.
    Snappy,
    /// `-z`.
    Zstd,
}

impl Compression {
    /// Every compression.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Zlib,
        Compression::Lzo,
        Compression::Snappy,
        Compression::Zstd,
    ];

    fn flag(self) -> u32 {
        match self {
            Compression::None => 0,
            Compression::Zlib => flags::ZLIB,
            Compression::Lzo => flags::LZO,
            Compression::Snappy => flags::SNAPPY,
            Compression::Zstd => flags::ZSTD,
        }
    }

    /// `page` compressed.
    pub fn compress(self, page: &[u8]) -> Vec<u8> {
        match self {
            Compression::None => page.to_vec(),
            Compression::Zlib => {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(page).expect("writing to a Vec");
                e.finish().expect("writing to a Vec")
            }
            Compression::Lzo => lzo1x::compress(page, lzo1x::CompressLevel::new(1)),
            Compression::Snappy => snap::raw::Encoder::new()
                .compress_vec(page)
                .expect("a page is not too large for snappy"),
            Compression::Zstd => {
                ruzstd::encoding::compress_to_vec(page, ruzstd::encoding::CompressionLevel::Fastest)
            }
        }
    }
}

/// Header fields of [`kdump`]'s output, as offsets, for tests that damage them.
pub mod at {
    /// `disk_dump_header.utsname.machine`.
    pub const MACHINE: usize = super::super::dh::MACHINE;
    /// `disk_dump_header.status`.
    pub const STATUS: usize = super::super::dh::STATUS;
    /// `disk_dump_header.block_size`.
    pub const BLOCK_SIZE: usize = super::super::dh::BLOCK_SIZE;
    /// `kdump_sub_header.split` (in block 1).
    pub const SPLIT: usize = super::super::PAGE + super::super::kh::SPLIT;
}

/// Where [`kdump`] put things.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// File offset of the first page descriptor.
    pub descs: usize,
    /// File offset of each dumped page's data, in frame order (the zero page's for zero pages).
    pub data: Vec<usize>,
}

/// A kdump-compressed file of `max_mapnr` page frames holding `pages` (frame number and 4096
/// bytes, rising), compressed with `c`; zero pages share one zero page (dump level 1 and up).
pub fn kdump(pages: &[(u64, &[u8])], max_mapnr: u64, c: Compression) -> Vec<u8> {
    kdump_layout(pages, max_mapnr, c).0
}

/// [`kdump`] and where it put things.
pub fn kdump_layout(pages: &[(u64, &[u8])], max_mapnr: u64, c: Compression) -> (Vec<u8>, Layout) {
    let bitmap_len = max_mapnr.div_ceil(8).div_ceil(PAGE as u64).max(1) as usize * PAGE;
    let bitmap_blocks = 2 * bitmap_len / PAGE;
    let mut f = vec![0u8; 2 * PAGE + 2 * bitmap_len];
    let put = |f: &mut Vec<u8>, off: usize, v: &[u8]| f[off..off + v.len()].copy_from_slice(v);
    put(&mut f, 0, super::KDUMP_SIGNATURE);
    put(&mut f, super::dh::VERSION, &6i32.to_le_bytes());
    put(&mut f, super::dh::UTSNAME, b"Linux");
    put(
        &mut f,
        super::dh::UTSNAME + 2 * super::dh::UTS_FIELD,
        b"7.3.4",
    );
    put(&mut f, super::dh::MACHINE, b"x86_64");
    put(&mut f, super::dh::STATUS, &c.flag().to_le_bytes());
    put(&mut f, super::dh::BLOCK_SIZE, &(PAGE as i32).to_le_bytes());
    put(&mut f, super::dh::SUB_HDR_SIZE, &1i32.to_le_bytes());
    put(
        &mut f,
        super::dh::BITMAP_BLOCKS,
        &(bitmap_blocks as u32).to_le_bytes(),
    );
    put(
        &mut f,
        super::dh::MAX_MAPNR,
        &(max_mapnr as u32).to_le_bytes(),
    );
    put(&mut f, 460, &1i32.to_le_bytes()); // nr_cpus
    put(&mut f, PAGE + 8, &31i32.to_le_bytes()); // dump_level
    put(
        &mut f,
        PAGE + super::kh::MAX_MAPNR_64,
        &max_mapnr.to_le_bytes(),
    );
    let (bitmap1, bitmap2) = (2 * PAGE, 2 * PAGE + bitmap_len);
    for pfn in 0..max_mapnr as usize {
        f[bitmap1 + pfn / 8] |= 1 << (pfn % 8);
    }
    for &(pfn, _) in pages {
        assert!(pfn < max_mapnr, "frame {pfn:#x} beyond max_mapnr");
        f[bitmap2 + pfn as usize / 8] |= 1 << (pfn % 8);
    }
    let descs = f.len();
    let mut data = descs + pages.len() * super::DESC_SIZE;
    let zero_page = data;
    f.resize(data + PAGE, 0);
    data += PAGE;
    let mut layout = Layout {
        descs,
        data: Vec::new(),
    };
    for (i, &(_, page)) in pages.iter().enumerate() {
        assert_eq!(page.len(), PAGE);
        let (offset, size, flag) = if page.iter().all(|&b| b == 0) {
            (zero_page, PAGE, 0)
        } else {
            let z = c.compress(page);
            let (bytes, flag) = if z.len() < PAGE {
                (z, c.flag())
            } else {
                (page.to_vec(), 0)
            };
            f.extend_from_slice(&bytes);
            let at = data;
            data += bytes.len();
            (at, bytes.len(), flag)
        };
        layout.data.push(offset);
        let d = descs + i * super::DESC_SIZE;
        put(&mut f, d, &(offset as u64).to_le_bytes());
        put(&mut f, d + 8, &(size as u32).to_le_bytes());
        put(&mut f, d + 12, &flag.to_le_bytes());
    }
    (f, layout)
}

/// `file` in the flattened format, as `makedumpfile -F` writes it to a pipe: the file in records
/// of at most `chunk` bytes, the sub header's block first written as zeros and rewritten last.
pub fn flatten(file: &[u8], chunk: usize) -> Vec<u8> {
    let mut out = vec![0u8; super::FLAT_HEADER_SIZE];
    out[..16].copy_from_slice(super::FLAT_SIGNATURE);
    out[16..24].copy_from_slice(&1i64.to_be_bytes());
    out[24..32].copy_from_slice(&1i64.to_be_bytes());
    let record = |out: &mut Vec<u8>, off: usize, bytes: &[u8]| {
        out.extend_from_slice(&(off as i64).to_be_bytes());
        out.extend_from_slice(&(bytes.len() as i64).to_be_bytes());
        out.extend_from_slice(bytes);
    };
    let sub = PAGE..(2 * PAGE).min(file.len());
    let mut off = 0;
    while off < file.len() {
        let end = (off + chunk).min(file.len());
        if sub.contains(&off) {
            record(&mut out, off, &vec![0u8; end - off]);
        } else {
            record(&mut out, off, &file[off..end]);
        }
        off = end;
    }
    if !sub.is_empty() {
        record(&mut out, sub.start, &file[sub.clone()]);
    }
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out
}
