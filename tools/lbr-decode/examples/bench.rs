// SPDX-License-Identifier: GPL-2.0

//! Benchmarks (not tests: they report, they do not assert), each against a baseline run on the
//! same input in the same process, reported as a ratio.
//!
//! ```text
//! cargo run --release -p lbr-decode --example bench -- scan DIR [GIB]
//! cargo run --release -p lbr-decode --example bench -- symbolize VMLINUX ADDRESSES_FILE
//! ```
//!
//! `scan` writes a GIB-sized ELF core (default 1) into DIR, with one snapshot area near its end,
//! and times finding it (`Dump::open` + `areas`) against a plain `memchr::memmem` search of the
//! same mapping for the same magic. `symbolize` times function+offset and source lines with
//! inlined frames for every address in the file (hex, one per line) through `symbols::Image`;
//! the baselines (binutils `addr2line -f -i`, scripts/decode_stacktrace.sh) are run on the same
//! addresses by scripts/bench.sh, which prints all ratios.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use lbr_core::layout::{checksum, hdr, Geometry, HEADER_SIZE, MAGIC};
use lbr_decode::dump::Dump;
use lbr_decode::symbols::Image;

fn best<T>(n: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut out = None;
    let mut best = f64::MAX;
    for _ in 0..n {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (best, out.unwrap())
}

/// A valid one-CPU area (Intel LBR format 5, depth 32).
fn area() -> Vec<u8> {
    let g = Geometry {
        nr_cpus: 1,
        ring: 4,
        nr_values: 97,
    };
    let mut a = vec![0u8; g.area_size()];
    let mut put = |off: usize, v: &[u8]| a[off..off + v.len()].copy_from_slice(v);
    put(hdr::MAGIC, &MAGIC);
    put(hdr::VERSION, &1u32.to_le_bytes());
    put(hdr::HEADER_SIZE, &(HEADER_SIZE as u32).to_le_bytes());
    put(hdr::AREA_SIZE, &(g.area_size() as u64).to_le_bytes());
    for (off, v) in [
        (hdr::NR_CPUS, 1),
        (hdr::RING, 4),
        (hdr::SNAP_SIZE, g.snap_size() as u32),
        (hdr::NR_VALUES, 97),
        (hdr::FLAVOUR, 1),
        (hdr::FORMAT, 5),
        (hdr::DEPTH, 32),
        (hdr::LAYOUT_FLAGS, 1),
        (hdr::MSR_LIST, g.msr_list() as u32),
        (hdr::CPU_OFFSET, g.cpu_offset() as u32),
        (hdr::CPU_BLOCK_SIZE, g.cpu_block_size() as u32),
    ] {
        put(off, &v.to_le_bytes());
    }
    put(hdr::ANCHOR_NAME, b"_printk");
    let sum = checksum(&a[..HEADER_SIZE], hdr::CHECKSUM);
    a[hdr::CHECKSUM..hdr::CHECKSUM + 8].copy_from_slice(&sum.to_le_bytes());
    a
}

fn scan(dir: &Path, gib: u64) -> anyhow::Result<()> {
    let size = gib << 30;
    let path = dir.join("bench-dump.elf");
    {
        // ELF64 core header and one PT_LOAD at file offset 4096 (fixture writing only).
        let mut h = vec![0u8; 4096];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[6] = 1;
        h[16..18].copy_from_slice(&4u16.to_le_bytes());
        h[18..20].copy_from_slice(&62u16.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        h[32..40].copy_from_slice(&64u64.to_le_bytes());
        h[52..54].copy_from_slice(&64u16.to_le_bytes());
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&1u16.to_le_bytes());
        let p = 64;
        h[p..p + 4].copy_from_slice(&1u32.to_le_bytes());
        h[p + 8..p + 16].copy_from_slice(&4096u64.to_le_bytes());
        h[p + 32..p + 40].copy_from_slice(&size.to_le_bytes());
        h[p + 40..p + 48].copy_from_slice(&size.to_le_bytes());
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        f.write_all(&h)?;
        // Memory that is not zero (zero pages would be cheaper than real ones to read).
        let mut chunk = vec![0u8; 1 << 20];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for b in chunk.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes());
        }
        let a = area();
        for i in 0..size >> 20 {
            if i == (size >> 20) - 1 {
                chunk[..a.len()].copy_from_slice(&a);
            }
            f.write_all(&chunk)?;
        }
    }
    // Warm the page cache, then time both over the same mapping.
    let _ = std::fs::read(&path)?;
    let (t_scan, found) = best(3, || {
        let d = Dump::open(&path).expect("the benchmark dump opens");
        let mut w = Vec::new();
        d.areas(&mut w).len()
    });
    let file = std::fs::File::open(&path)?;
    // SAFETY: read-only mapping of a file this process just wrote and nobody changes.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let (t_memchr, hits) = best(3, || memchr::memmem::find_iter(&map, &MAGIC).count());
    std::fs::remove_file(&path)?;
    let gbs = |t: f64| size as f64 / t / 1e9;
    println!(
        "BENCH dump scan: {gib} GiB, lbr-decode {:.1} ms ({:.1} GB/s, {found} area), memchr::memmem {:.1} ms ({:.1} GB/s, {hits} hit), ratio {:.2}",
        t_scan * 1e3,
        gbs(t_scan),
        t_memchr * 1e3,
        gbs(t_memchr),
        t_scan / t_memchr
    );
    Ok(())
}

fn symbolize(vmlinux: &Path, addrs: &Path) -> anyhow::Result<()> {
    let addrs: Vec<u64> = std::fs::read_to_string(addrs)?
        .lines()
        .filter_map(|l| u64::from_str_radix(l.trim().trim_start_matches("0x"), 16).ok())
        .collect();
    let t = Instant::now();
    let img = Image::load(vmlinux, false)?;
    let mut lines = 0usize;
    for &a in &addrs {
        let _ = img.containing(a, None);
        lines += img.frames(a).len();
    }
    println!(
        "lbr-decode: {} addresses, {lines} frames, {:.3} s",
        addrs.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["scan", dir] => scan(Path::new(dir), 1),
        ["scan", dir, gib] => scan(Path::new(dir), gib.parse()?),
        ["symbolize", vmlinux, addrs] => symbolize(Path::new(vmlinux), Path::new(addrs)),
        _ => anyhow::bail!("usage: bench scan DIR [GIB] | bench symbolize VMLINUX ADDRESSES"),
    }
}
