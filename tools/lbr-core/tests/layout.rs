// SPDX-License-Identifier: GPL-2.0

//! The snapshot area layout: its geometry, and agreement between the Rust constants and the
//! `#define`s the capture assembly uses (asm/layout.h).

use lbr_core::layout::*;
use std::collections::HashMap;

#[test]
fn geometry_is_aligned_and_disjoint() {
    let g = Geometry {
        nr_cpus: 4,
        ring: 4,
        nr_values: 97,
    };
    assert_eq!(g.snap_size(), 0x50 + 97 * 8);
    assert_eq!(g.cpu_offset() % 64, 0);
    assert!(g.cpu_offset() >= HEADER_SIZE + 4 * 97);
    assert_eq!(g.cpu_block_size() % 64, 0);
    assert!(g.snapshot(0, 3) + g.snap_size() <= g.cpu_block(1));
    assert_eq!(g.area_size() % 4096, 0);
    assert!(g.snapshot(3, 3) + g.snap_size() <= g.area_size());
}

#[test]
fn checksum_skips_its_own_field() {
    let mut a = [7u8; 64];
    let c = checksum(&a, 8);
    a[8..16].copy_from_slice(&c.to_le_bytes());
    assert_eq!(checksum(&a, 8), c);
    a[20] ^= 1;
    assert_ne!(checksum(&a, 8), c);
    // FNV-1a 64 of the empty input is the offset basis.
    assert_eq!(checksum(&[], 0), 0xcbf2_9ce4_8422_2325);
}

#[test]
fn assembly_offsets_match() {
    let h = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../asm/layout.h"))
        .unwrap();
    let defs: HashMap<&str, usize> = h
        .lines()
        .filter_map(|l| {
            let mut t = l.split_whitespace();
            (t.next()? == "#define").then_some(())?;
            let name = t.next()?;
            let v = t.next()?;
            Some((name, usize::from_str_radix(v.strip_prefix("0x")?, 16).ok()?))
        })
        .collect();
    let want = [
        ("LBR_CPU_COUNT", cpu::COUNT),
        ("LBR_CPU_BUSY", cpu::BUSY),
        ("LBR_CPU_HEADER_SIZE", CPU_HEADER_SIZE),
        ("LBR_SNAP_SEQ", snap::SEQ),
        ("LBR_SNAP_VECTOR", snap::VECTOR),
        ("LBR_SNAP_STATE", snap::STATE),
        ("LBR_SNAP_ERROR", snap::ERROR),
        ("LBR_SNAP_RIP", snap::RIP),
        ("LBR_SNAP_CR2", snap::CR2),
        ("LBR_SNAP_CTL_ENTRY", snap::CTL_ENTRY),
        ("LBR_SNAP_CTL_AFTER", snap::CTL_AFTER),
        ("LBR_SNAP_FRAME", snap::FRAME),
        ("LBR_SNAP_RSP", snap::RSP),
        ("LBR_SNAP_VALUES", snap::VALUES),
        ("LBR_SNAP_COMPLETE", SNAP_COMPLETE as usize),
        ("LBR_SNAP_TORN", SNAP_TORN as usize),
        ("LBR_SNAP_WAS_OFF", SNAP_WAS_OFF as usize),
    ];
    for (name, v) in want {
        assert_eq!(defs.get(name), Some(&v), "{name} in asm/layout.h");
    }
}
