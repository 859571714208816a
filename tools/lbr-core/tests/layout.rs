// SPDX-License-Identifier: GPL-2.0

//! The snapshot area layout: its geometry, and the `#define`s the capture assembly gets from it
//! (Kbuild generates asm's layout.h from src/layout.rs with asm/layout.awk; this runs the same
//! generator and checks every value it emits against the Rust constant).

use lbr_core::area::*;
use lbr_core::layout::*;
use std::collections::HashMap;

#[test]
fn geometry_is_aligned_and_disjoint() {
    let g = Geometry {
        nr_cpus: 4,
        ring: 4,
        nr_values: 97,
        bts_pool: 0,
        bts_size: 0,
    };
    assert_eq!(g.snap_size(), 0x70 + 97 * 8);
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
            let n = match v.strip_prefix("0x") {
                Some(hex) => usize::from_str_radix(hex, 16),
                None => v.parse(),
            };
            Some((name, n.ok()?))
        })
        .collect();
    let want = [
        ("LBR_CPU_COUNT", cpu::COUNT),
        ("LBR_CPU_BUSY", cpu::BUSY),
        ("LBR_CPU_LENT", cpu::LENT),
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
        ("LBR_SNAP_LENT", SNAP_LENT as usize),
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
        ("LBR_CFG_GATE_PTE", cfg::GATE_PTE),
        ("LBR_CFG_GATE_WINDOW", cfg::GATE_WINDOW),
        ("LBR_CFG_STOP_SAVE", cfg::STOP_SAVE),
        ("LBR_CFG_NMI_GATE", cfg::NMI_GATE),
        ("LBR_CFG_NMI_HOOK", cfg::NMI_HOOK),
        ("LBR_CFG_IPI_GATE", cfg::IPI_GATE),
        ("LBR_CFG_IPI_HOOK", cfg::IPI_HOOK),
        ("LBR_CFG_IRET", cfg::IRET),
        ("LBR_CFG_GATE_PTE_RW", cfg::GATE_PTE_RW),
        ("LBR_CFG_GATE_PTE_RO", cfg::GATE_PTE_RO),
        ("LBR_CFG_SIZE", cfg::SIZE),
        ("LBR_CFG_MSR_LIST", cfg::MSR_LIST),
        ("LBR_CFG_PAGE", cfg::PAGE),
        ("LBR_LIVE_SEQ", live::SEQ),
        ("LBR_LIVE_PANIC_CPU", live::PANIC_CPU),
        ("LBR_LIVE_GATES_SWITCHED", live::GATES_SWITCHED),
        ("LBR_LIVE_GIVEN_BACK", live::GIVEN_BACK),
        ("LBR_LIVE_KEXEC_CLAIM_BIT", live::KEXEC_CLAIM_BIT as usize),
        ("LBR_LIVE_SIZE", live::SIZE),
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

/// An area written field by field at the offsets the layout documents (as src/capture/area.rs does):
/// 2 CPUs, ring 4, Intel LBR format 5 at depth 4 (TOS + 3 * 4 values), the last exception
/// record (LER FROM and TO, the 14th and 15th values) and LBR_SELECT as the filter MSR (its
/// value the 16th).
fn area() -> Vec<u8> {
    let g = Geometry {
        nr_cpus: 2,
        ring: 4,
        nr_values: 16,
        bts_pool: 0,
        bts_size: 0,
    };
    let mut a = vec![0u8; g.area_size()];
    let put32 =
        |a: &mut Vec<u8>, off: usize, v: u32| a[off..off + 4].copy_from_slice(&v.to_le_bytes());
    let put64 =
        |a: &mut Vec<u8>, off: usize, v: u64| a[off..off + 8].copy_from_slice(&v.to_le_bytes());
    a[..8].copy_from_slice(b"LBRDUMP\0");
    put32(&mut a, 0x08, 5);
    put32(&mut a, 0x0c, 0x100);
    put64(&mut a, 0x10, g.area_size() as u64);
    put32(&mut a, 0x20, 2);
    put32(&mut a, 0x24, 4);
    put32(&mut a, 0x28, 0x70 + 16 * 8);
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
    put64(&mut a, s + 0x70, 2);
    put64(&mut a, s + 0x70 + 8 * 3, 0xffff_ffff_8153_7fe9);
    put64(&mut a, s + 0x70 + 8 * 13, 0xffff_ffff_8153_7fd0); // LER FROM
    put64(&mut a, s + 0x70 + 8 * 14, 0xffff_ffff_8153_7fe0); // LER TO
    put64(&mut a, s + 0x70 + 8 * 15, 6); // LBR_SELECT as another owner left it
    let sum = checksum(&a[s..s + g.snap_size()], 0x48);
    put64(&mut a, s + 0x48, sum);
    a
}

/// The header writer the module arms with is the inverse of the reader: the header of the
/// hand-written area above, parsed and written again into zeroed memory with its MSR list,
/// gives back exactly the hand-written bytes (header, MSR list, checksum), and a snapshot seal
/// written through the writer side matches the hand-computed one.
#[test]
fn header_writer_reproduces_the_hand_written_header() {
    let a = area();
    let h = AreaHeader::parse(&a).unwrap();
    let msrs: Vec<u32> = (0..h.geometry.nr_values).map(|i| h.msr(&a, i)).collect();
    let mut b = vec![0u8; a.len()];
    h.write(&mut b[..], &msrs);
    let end = h.geometry.msr_list() + 4 * msrs.len();
    assert_eq!(b[..end], a[..end]);
    assert!(b[end..].iter().all(|&x| x == 0));
    let g = h.geometry;
    let s = g.snapshot(1, 1);
    b[s..s + g.snap_size()].copy_from_slice(&a[s..s + g.snap_size()]);
    b[s + 0x48..s + 0x50].fill(0);
    seal(&mut b[..], &g, s);
    assert_eq!(b[s..s + g.snap_size()], a[s..s + g.snap_size()]);
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
    assert_eq!(s.sealed(), Some(true));
    assert_eq!((s.value(0), s.value(3)), (2, 0xffff_ffff_8153_7fe9));
    assert_eq!(s.filter, Some(6));
    assert_eq!(s.ler, Some((0xffff_ffff_8153_7fd0, 0xffff_ffff_8153_7fe0)));
    assert_eq!(h.snapshot(&a, 0, 0).sealed(), None);
}

#[test]
fn damaged_snapshot_is_not_sealed() {
    let mut a = area();
    let g = AreaHeader::parse(&a).unwrap().geometry;
    a[g.snapshot(1, 1) + 0x50 + 8] ^= 0x10;
    let h = AreaHeader::parse(&a).unwrap();
    assert_eq!(h.snapshot(&a, 1, 1).sealed(), Some(false));
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
    // Versions 2 (no last exception record), 3 (no branch filter) and 4 (no branch trace
    // store) are refused by name, whatever they hold.
    for v in [2, 3, 4] {
        let mut a = area();
        a[0x08] = v as u8;
        assert_eq!(AreaHeader::parse(&a), Err(AreaError::Version(v)));
    }
    assert_eq!(
        AreaError::Version(3).to_string(),
        "layout version 3, this reader knows 5"
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
    // Lent to a KVM guest: whatever else the stub saw (recording off, a guest's filter, a
    // control value that changed), the records are not the host's.
    assert_eq!(
        snapshot_state(
            SNAP_COMPLETE | SNAP_LENT | SNAP_WAS_OFF,
            0x800,
            armed,
            Some((6, 2))
        ),
        State::Lent
    );
    assert_eq!(
        snapshot_state(SNAP_COMPLETE | SNAP_LENT | SNAP_TORN, 0x1, armed, None),
        State::Lent
    );
}

/// [`area`] with the branch trace store: a pool of 2 buffers of 10 records per CPU, the table
/// after the MSR list, CPU 1's buffer 1 kept by the snapshot in slot 1 (seq 42), found with
/// bts_index 3 records past its base.
fn bts_area() -> Vec<u8> {
    let plain = area();
    let g = Geometry {
        nr_cpus: 2,
        ring: 4,
        nr_values: 16,
        bts_pool: 2,
        bts_size: 240,
    };
    let put32 =
        |a: &mut Vec<u8>, off: usize, v: u32| a[off..off + 4].copy_from_slice(&v.to_le_bytes());
    let put64 =
        |a: &mut Vec<u8>, off: usize, v: u64| a[off..off + 8].copy_from_slice(&v.to_le_bytes());
    // The table: 2 CPUs * 2 buffers * 32 bytes at 0x140 (the MSR list's 16 entries end at
    // 0x140); CPU blocks from 0x1c0.
    assert_eq!((g.bts_table(), g.cpu_offset()), (0x140, 0x1c0));
    let mut a = vec![0u8; g.area_size()];
    a[..0x140].copy_from_slice(&plain[..0x140]);
    put64(&mut a, 0x10, g.area_size() as u64);
    put32(&mut a, 0x84, 0x1c0);
    put32(&mut a, 0xb0, 2);
    put32(&mut a, 0xb4, 24);
    put64(&mut a, 0xb8, 240);
    put32(&mut a, 0xc0, 0x140);
    put32(&mut a, 0xc4, 1); // kernel branches only
    for cpu in 0..2u64 {
        for slot in 0..2u64 {
            let e = 0x140 + 0x20 * (2 * cpu + slot) as usize;
            put64(&mut a, e, 0xffff_8880_0100_0000 + 0x1000 * (2 * cpu + slot));
            put64(&mut a, e + 8, 0x0100_0000 + 0x1000 * (2 * cpu + slot));
        }
    }
    put64(&mut a, 0x140 + 0x20 * 3 + 0x10, 42); // CPU 1, buffer 1: kept by seq 42
    let sum = checksum(&a[..0x100], 0x18);
    put64(&mut a, 0x18, sum);
    let cpu1 = 0x1c0 + g.cpu_block_size();
    put64(&mut a, cpu1, 2);
    put32(&mut a, cpu1 + 0x10, 0); // recording into buffer 0 again
    let s = cpu1 + 0x80 + g.snap_size();
    put64(&mut a, s, 42);
    put32(&mut a, s + 0x08, 14);
    put32(&mut a, s + 0x0c, 1);
    put64(&mut a, s + 0x50, (cpu1 + 0x40) as u64); // DS_AREA (an area-relative stand-in)
    put64(&mut a, s + 0x58, 0xffff_8880_0100_3000 + 3 * 24);
    put32(&mut a, s + 0x60, 1);
    put32(&mut a, s + 0x64, 1); // kept, not wrapped
    put64(&mut a, s + 0x68, 0xffff_8880_0100_3000);
    a
}

#[test]
fn bts_area_reads_back() {
    let a = bts_area();
    let h = AreaHeader::parse(&a).unwrap();
    assert_eq!(
        h.bts,
        Some(lbr_core::area::BtsHeader {
            pool: 2,
            buffer_size: 240,
            rings: 1
        })
    );
    assert_eq!(h.area_size, a.len());
    let e = h.bts_entry(&a, 1, 1).unwrap();
    assert_eq!(
        (e.virt, e.phys, e.owner),
        (0xffff_8880_0100_3000, 0x0100_3000, 42)
    );
    assert_eq!(h.bts_entry(&a, 1, 0).unwrap().owner, 0);
    assert_eq!(h.bts_entry(&a, 1, 2), None, "slot outside the pool");
    assert_eq!(h.bts_entry(&a, 2, 0), None, "CPU outside the area");
    let s = h.snapshot(&a, 1, 1);
    assert_eq!(s.seq, 42);
    let b = s.bts.unwrap();
    assert_eq!(
        (b.slot, b.state, b.base, b.index),
        (1, 1, 0xffff_8880_0100_3000, 0xffff_8880_0100_3000 + 72)
    );
    // Without BTS, snapshots have no BTS fields and no table.
    let plain = area();
    let h = AreaHeader::parse(&plain).unwrap();
    assert_eq!(h.bts, None);
    assert_eq!(h.snapshot(&plain, 1, 1).bts, None);
    assert_eq!(h.bts_entry(&plain, 0, 0), None);
}

#[test]
fn bad_bts_headers_are_refused() {
    for (off, v, what) in [
        (0xb0, 1u64, "BTS pool size"), // no spare buffer
        (0xb0, 17, "BTS pool size"),
        (0xb4, 16, "BTS record size"),
        (0xb8, 250, "BTS buffer size"), // not whole records
        (0xb8, 0, "BTS buffer size"),
        (0xc4, 0, "BTS rings"),
        (0xc4, 4, "BTS rings"),
        (0xc0, 0x100, "BTS table offset"),
    ] {
        let mut a = bts_area();
        let n = if off == 0xb8 { 8 } else { 4 };
        a[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
        let sum = checksum(&a[..0x100], 0x18);
        a[0x18..0x20].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(
            AreaHeader::parse(&a),
            Err(AreaError::Field(what)),
            "{off:#x} = {v}"
        );
    }
    // BTS fields set in an area without a pool.
    let mut a = area();
    a[0xc4] = 1;
    let sum = checksum(&a[..0x100], 0x18);
    a[0x18..0x20].copy_from_slice(&sum.to_le_bytes());
    assert_eq!(
        AreaHeader::parse(&a),
        Err(AreaError::Field("BTS fields without a BTS pool"))
    );
}

#[test]
fn bts_runs_follow_the_circular_buffer() {
    use lbr_core::area::{bts_runs, BtsError};
    let base = 0xffff_8880_0100_0000;
    // 10 records (240 bytes), the next to go to record 3.
    assert_eq!(bts_runs(240, base, base + 72, false), Ok([0..72, 0..0]));
    // Wrapped: the oldest is record 3 (overwritten last time round), then back to the base.
    assert_eq!(bts_runs(240, base, base + 72, true), Ok([72..240, 0..72]));
    // Index at the end (the wrap to the base not yet made) or at the base.
    assert_eq!(bts_runs(240, base, base + 240, false), Ok([0..240, 0..0]));
    assert_eq!(bts_runs(240, base, base, true), Ok([0..240, 0..0]));
    assert_eq!(bts_runs(240, base, base, false), Ok([0..0, 0..0]));
    // A size that is not whole records: the hardware never writes the tail.
    assert_eq!(bts_runs(250, base, base + 24, true), Ok([24..240, 0..24]));
    assert_eq!(bts_runs(240, base, base + 73, false), Err(BtsError::Index));
    assert_eq!(bts_runs(240, base, base + 264, false), Err(BtsError::Index));
    assert_eq!(bts_runs(240, base, base - 24, false), Err(BtsError::Index));
    assert_eq!(bts_runs(20, base, base, false), Err(BtsError::Size));
}
