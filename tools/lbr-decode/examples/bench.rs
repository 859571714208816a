// SPDX-License-Identifier: GPL-2.0

//! Benchmarks (not tests: they report, they do not assert), each against a baseline run on the
//! same input in the same process, reported as a ratio.
//!
//! ```text
//! cargo run --release -p lbr-decode --example bench -- scan DIR [GIB]
//! cargo run --release -p lbr-decode --example bench -- symbolize VMLINUX ADDRESSES_FILE
//! cargo run --release -p lbr-decode --example bench -- dump FILE
//! ```
//!
//! `scan` writes a GIB-sized ELF core (default 1) into DIR, with one snapshot area near its end,
//! and times finding it (`Dump::open` + `areas`) against a plain `memchr::memmem` search of the
//! same mapping for the same magic. `symbolize` times function+offset and source lines with
//! inlined frames for every address in the file (hex, one per line) through `symbols::Image`;
//! the baselines (binutils `addr2line -f -i`, `llvm-symbolizer --inlining`,
//! scripts/decode_stacktrace.sh) are run on the same addresses by scripts/bench.sh, which
//! prints all ratios. `dump` times reading a dump file of any format lbr-decode reads
//! (`Dump::open` + `areas`, best of 3, the file in the page cache) and prints the seconds, the
//! bytes of memory read, the areas found and the warnings; scripts/bench.sh runs it on a
//! kdump-compressed dump and times makedumpfile reading the same file.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use lbr_core::layout::MAGIC;
use lbr_decode::dump::Dump;
use lbr_decode::fixture;
use lbr_decode::symbols::{Image, ImageKind};

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

fn scan(dir: &Path, gib: u64) -> anyhow::Result<()> {
    let size = gib << 30;
    let path = dir.join("bench-dump.elf");
    {
        let h = fixture::core_header(62, &[(0, size)]);
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
        let a = fixture::area(32, 4, 1, fixture::Slots::Empty);
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
    let img = Image::load(vmlinux, ImageKind::Vmlinux)?;
    let mut lines = 0usize;
    for &a in &addrs {
        let _ = img.containing(a, None);
        lines += img.frames(None, a).len();
    }
    println!(
        "lbr-decode: {} addresses, {lines} frames, {:.3} s",
        addrs.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn dump(path: &Path) -> anyhow::Result<()> {
    let _ = std::fs::read(path)?;
    let (t, (memory, found, warnings)) = best(3, || {
        let d = Dump::open(path).expect("the benchmark dump opens");
        let mut w = Vec::new();
        let found = d.areas(&mut w).len();
        (d.memory_size(), found, w.len())
    });
    println!("{t:.3} {memory} {found} {warnings}");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["scan", dir] => scan(Path::new(dir), 1),
        ["scan", dir, gib] => scan(Path::new(dir), gib.parse()?),
        ["symbolize", vmlinux, addrs] => symbolize(Path::new(vmlinux), Path::new(addrs)),
        ["dump", path] => dump(Path::new(path)),
        _ => anyhow::bail!(
            "usage: bench scan DIR [GIB] | bench symbolize VMLINUX ADDRESSES | bench dump FILE"
        ),
    }
}
