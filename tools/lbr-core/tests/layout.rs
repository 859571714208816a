// SPDX-License-Identifier: GPL-2.0

//! The snapshot area layout: its geometry, and the `#define`s the capture assembly gets from it
//! (Kbuild generates asm's layout.h from src/layout.rs with asm/layout.awk; this runs the same
//! generator and checks every value it emits against the Rust constant).

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
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::process::Command::new("awk")
        .args([
            "-f",
            &format!("{root}/asm/layout.awk"),
            &format!("{root}/src/layout.rs"),
        ])
        .output()
        .expect("awk runs");
    assert!(out.status.success(), "asm/layout.awk failed");
    let h = String::from_utf8(out.stdout).unwrap();
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
        ("LBR_CFG_CPU0", cfg::CPU0),
        ("LBR_CFG_BLOCK_SIZE", cfg::BLOCK_SIZE),
        ("LBR_CFG_NR_CPUS", cfg::NR_CPUS),
        ("LBR_CFG_RING_MASK", cfg::RING_MASK),
        ("LBR_CFG_SNAP_SIZE", cfg::SNAP_SIZE),
        ("LBR_CFG_MSRS", cfg::MSRS),
        ("LBR_CFG_NR_VALUES", cfg::NR_VALUES),
        ("LBR_CFG_CTL_MSR", cfg::CTL_MSR),
        ("LBR_CFG_MASK", cfg::MASK),
        ("LBR_CFG_ARMED", cfg::ARMED),
        ("LBR_CFG_SEQ", cfg::SEQ),
        ("LBR_CFG_PANIC_CPU", cfg::PANIC_CPU),
        ("LBR_CFG_STOP_SAVE", cfg::STOP_SAVE),
        ("LBR_CFG_NMI_GATE", cfg::NMI_GATE),
        ("LBR_CFG_NMI_HOOK", cfg::NMI_HOOK),
        ("LBR_CFG_IPI_GATE", cfg::IPI_GATE),
        ("LBR_CFG_IPI_HOOK", cfg::IPI_HOOK),
        ("LBR_CFG_SIZE", cfg::SIZE),
        ("LBR_STOP_CPU_SIZE", stop::CPU_SIZE),
        ("LBR_STOP_NMI", stop::NMI),
        ("LBR_STOP_IPI", stop::IPI),
        ("LBR_STOP_DONE", stop::DONE),
        ("LBR_STOP_RAX", stop::RAX),
        ("LBR_STOP_RCX", stop::RCX),
        ("LBR_STOP_RDX", stop::RDX),
        ("LBR_STOP_RSI", stop::RSI),
        ("LBR_STOP_RDI", stop::RDI),
        ("LBR_STOP_R8", stop::R8),
        ("LBR_STOP_R9", stop::R9),
        ("LBR_STOP_R10", stop::R10),
        ("LBR_STOP_R11", stop::R11),
        ("LBR_STOP_ENTRY", stop::ENTRY),
        ("LBR_VECTOR_PANIC", VECTOR_PANIC as usize),
        ("LBR_VECTOR_NMI", VECTOR_NMI as usize),
        ("LBR_VECTOR_REBOOT", VECTOR_REBOOT as usize),
    ];
    for (name, v) in want {
        assert_eq!(defs.get(name), Some(&v), "{name} in asm/layout.h");
    }
}

/// An area written field by field at the offsets the layout documents (as capture.rs does):
/// 2 CPUs, ring 4, Intel LBR format 5 at depth 4 (TOS + 3 * 4 values), the last exception
/// record (LER FROM and TO, the 14th and 15th values) and LBR_SELECT as the filter MSR (its
/// value the 16th).
fn area() -> Vec<u8> {
    let g = Geometry {
        nr_cpus: 2,
        ring: 4,
        nr_values: 16,
    };
    let mut a = vec![0u8; g.area_size()];
    let put32 =
        |a: &mut Vec<u8>, off: usize, v: u32| a[off..off + 4].copy_from_slice(&v.to_le_bytes());
    let put64 =
        |a: &mut Vec<u8>, off: usize, v: u64| a[off..off + 8].copy_from_slice(&v.to_le_bytes());
    a[..8].copy_from_slice(b"LBRDUMP\0");
    put32(&mut a, 0x08, 4);
    put32(&mut a, 0x0c, 0x100);
    put64(&mut a, 0x10, g.area_size() as u64);
    put32(&mut a, 0x20, 2);
    put32(&mut a, 0x24, 4);
    put32(&mut a, 0x28, 0x50 + 16 * 8);
    put32(&mut a, 0x2c, 16);
    put32(&mut a, 0x30, 1); // Intel LBR
    put32(&mut a, 0x34, 5);
    put32(&mut a, 0x38, 4);
    put32(&mut a, 0x3c, 1); // LBR_INFO captured
    put64(&mut a, 0x40, 0xffff_ffff_9100_1230);
    a[0x48..0x48 + 7].copy_from_slice(b"_printk");
    put64(&mut a, 0x68, 0xffff_ffff_c040_0000);
    a[0x70..0x78].copy_from_slice(b"lbr_dump");
    put32(&mut a, 0x80, 0x100);
    put32(&mut a, 0x84, g.cpu_offset() as u32);
    put32(&mut a, 0x88, g.cpu_block_size() as u32);
    put32(&mut a, 0x8c, 0x1d9);
    put64(&mut a, 0x90, 1);
    put32(&mut a, 0x98, 0x1c8); // LBR_SELECT
    put32(&mut a, 0x9c, 1); // filter=functions
    put64(&mut a, 0xa0, 2); // kernel only
    put32(&mut a, 0xa8, 0x1dd); // LER FROM
    put32(&mut a, 0xac, 0x1de); // LER TO
    for i in 0..13 {
        put32(&mut a, 0x100 + 4 * i, 0x680 + i as u32);
    }
    put32(&mut a, 0x100 + 4 * 13, 0x1dd);
    put32(&mut a, 0x100 + 4 * 14, 0x1de);
    put32(&mut a, 0x100 + 4 * 15, 0x1c8);
    let sum = checksum(&a[..0x100], 0x18);
    put64(&mut a, 0x18, sum);
    // CPU 1, slot 1: a sealed snapshot of a #PF with TOS = 2.
    put64(&mut a, g.cpu_block(1), 2);
    let s = g.snapshot(1, 1);
    put64(&mut a, s, 42);
    put32(&mut a, s + 0x08, 14);
    put32(&mut a, s + 0x0c, 1);
    put64(&mut a, s + 0x18, 0xffff_ffff_8153_7fe9);
    put64(&mut a, s + 0x50, 2);
    put64(&mut a, s + 0x50 + 8 * 3, 0xffff_ffff_8153_7fe9);
    put64(&mut a, s + 0x50 + 8 * 13, 0xffff_ffff_8153_7fd0); // LER FROM
    put64(&mut a, s + 0x50 + 8 * 14, 0xffff_ffff_8153_7fe0); // LER TO
    put64(&mut a, s + 0x50 + 8 * 15, 6); // LBR_SELECT as another owner left it
    let sum = checksum(&a[s..s + g.snap_size()], 0x48);
    put64(&mut a, s + 0x48, sum);
    a
}

#[test]
fn area_reads_back() {
    let a = area();
    let h = AreaHeader::parse(&a).unwrap();
    assert_eq!(h.geometry.nr_cpus, 2);
    assert_eq!(h.area_size, a.len());
    assert_eq!(
        h.layout,
        lbr_core::record::Encoding::IntelLegacy {
            format: 5,
            depth: 4,
            info: true,
            tsx: false
        }
    );
    assert_eq!(
        (h.anchor_name, h.anchor_addr),
        ("_printk", 0xffff_ffff_9100_1230)
    );
    assert_eq!(
        (h.module_name, h.text_base),
        ("lbr_dump", 0xffff_ffff_c040_0000)
    );
    assert_eq!(h.msr(&a, 12), 0x68c);
    assert_eq!(h.filter, Some((0x1c8, 2)));
    assert_eq!(h.ler, Some((0x1dd, 0x1de)));
    assert_eq!(h.branches, lbr_core::facility::Filter::Functions);
    assert_eq!((h.msr(&a, 13), h.msr(&a, 14)), (0x1dd, 0x1de));
    assert_eq!((h.count(&a, 0), h.count(&a, 1)), (0, 2));
    let s = h.snapshot(&a, 1, 1);
    assert_eq!((s.seq, s.vector, s.rip), (42, 14, 0xffff_ffff_8153_7fe9));
    assert_eq!(s.sealed, Some(true));
    assert_eq!((s.value(0), s.value(3)), (2, 0xffff_ffff_8153_7fe9));
    assert_eq!(s.filter, Some(6));
    assert_eq!(s.ler, Some((0xffff_ffff_8153_7fd0, 0xffff_ffff_8153_7fe0)));
    assert_eq!(h.snapshot(&a, 0, 0).sealed, None);
}

#[test]
fn damaged_snapshot_is_not_sealed() {
    let mut a = area();
    let g = AreaHeader::parse(&a).unwrap().geometry;
    a[g.snapshot(1, 1) + 0x50 + 8] ^= 0x10;
    let h = AreaHeader::parse(&a).unwrap();
    assert_eq!(h.snapshot(&a, 1, 1).sealed, Some(false));
}

#[test]
fn bad_headers_are_refused() {
    assert_eq!(
        AreaHeader::parse(&area()[..0x80]),
        Err(AreaError::Short {
            need: 0x100,
            have: 0x80
        })
    );
    let mut a = area();
    a[0] = b'X';
    assert_eq!(AreaHeader::parse(&a), Err(AreaError::Magic));
    let mut a = area();
    a[0x08] = 1;
    assert_eq!(AreaHeader::parse(&a), Err(AreaError::Version(1)));
    // Versions 2 (no last exception record) and 3 (no branch filter) are refused by name,
    // whatever they hold.
    for v in [2, 3] {
        let mut a = area();
        a[0x08] = v as u8;
        assert_eq!(AreaHeader::parse(&a), Err(AreaError::Version(v)));
    }
    assert_eq!(
        AreaError::Version(3).to_string(),
        "layout version 3, this reader knows 4"
    );
    let mut a = area();
    a[0x20] = 3; // CPU count changed without the checksum
    assert!(matches!(
        AreaHeader::parse(&a),
        Err(AreaError::Checksum { .. })
    ));
    // Absurd counts with a valid checksum: refused by the geometry checks.
    for (off, v, what) in [
        (0x20, 0u32, "CPU count"),
        (0x20, 100_000, "CPU count"),
        (0x24, 1_000, "ring size"),
        (0x2c, 15, "value count"),
        (0x98, 0, "value count"), // no filter MSR, but room for its value
        (0xa8, 0, "last exception record MSRs"), // a TO MSR without a FROM MSR
        (0xac, 0, "last exception record MSRs"),
        (0x9c, 3, "branch filter"), // no filter has code 3
        (0x30, 9, "flavour, format, depth or layout flags"),
        (0x88, 64, "CPU block size"),
    ] {
        let mut a = area();
        a[off..off + 4].copy_from_slice(&v.to_le_bytes());
        let sum = checksum(&a[..0x100], 0x18);
        a[0x18..0x20].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(
            AreaHeader::parse(&a),
            Err(AreaError::Field(what)),
            "{off:#x} = {v}"
        );
    }
}

#[test]
fn snapshot_states() {
    use lbr_core::report::State;
    let armed = 0x801; // DEBUGCTL.LBR | FREEZE_LBRS_ON_PMI, say
    assert_eq!(
        snapshot_state(SNAP_COMPLETE, armed, armed, None),
        State::Complete
    );
    assert_eq!(
        snapshot_state(SNAP_COMPLETE, 0x1, armed, None),
        State::Foreign
    );
    // LBR_SELECT: lbr-dump wrote 2 (kernel only); as found, and changed by another owner.
    assert_eq!(
        snapshot_state(SNAP_COMPLETE, armed, armed, Some((2, 2))),
        State::Complete
    );
    assert_eq!(
        snapshot_state(SNAP_COMPLETE, armed, armed, Some((6, 2))),
        State::Foreign
    );
    assert_eq!(
        snapshot_state(SNAP_COMPLETE | SNAP_WAS_OFF, 0x800, armed, Some((6, 2))),
        State::WasOff
    );
    assert_eq!(
        snapshot_state(SNAP_COMPLETE | SNAP_TORN, 0x1, armed, None),
        State::Torn
    );
    assert_eq!(
        snapshot_state(SNAP_COMPLETE | SNAP_TORN | SNAP_WAS_OFF, 0, armed, None),
        State::Torn
    );
}
