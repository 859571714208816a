// SPDX-License-Identifier: GPL-2.0

//! Synthetic inputs for the tests, the benchmarks and the fuzzers' seeds: a snapshot area as
//! the module writes it (its header through src/area.rs's writer), and an ELF core file around
//! physical memory. Reading is src/area.rs and the `object` crate.

use lbr_core::area::{checksum, AreaHeader, BtsHeader};
use lbr_core::facility::Filter;
use lbr_core::layout::{
    bts, cpu, hdr, snap, Geometry, BTS_RECORD_SIZE, BTS_RING_KERNEL, HEADER_SIZE, SNAP_BTS_FOREIGN,
    SNAP_BTS_KEPT, SNAP_BTS_WRAPPED,
};
use lbr_core::record::Encoding;

/// What the ring of a fixture area holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slots {
    /// Nothing captured yet.
    Empty,
    /// One snapshot, in slot 1.
    OneSnapshot,
}

/// One CPU's area for Intel LBR format 5 at `depth` entries and `ring` snapshots per CPU, with
/// the last exception record (MSRs 0x1dd, 0x1de) and LBR_SELECT as the filter MSR (armed value
/// 2), whose header claims `claimed_cpus` CPUs (1 for a valid area; anything else tests the
/// validation).
/// With [`Slots::OneSnapshot`], slot 1 holds snapshot seq 3 of a #PF with TOS 1 and entry 1 the
/// branch 0xffffffff81000010 -> 0xffffffffc0000000, the last exception record
/// 0xffffffff81000004 -> 0xffffffff81000008 and the filter value 2 (needs `ring` >= 2).
pub fn area(depth: u32, ring: usize, claimed_cpus: u32, slots: Slots) -> Vec<u8> {
    let mut a = area_with(depth, ring, claimed_cpus, slots, 0);
    seal_header(&mut a);
    a
}

/// Recomputes the header's checksum.
pub fn seal_header(a: &mut [u8]) {
    let sum = checksum(&a[..HEADER_SIZE], hdr::CHECKSUM);
    a[hdr::CHECKSUM..hdr::CHECKSUM + 8].copy_from_slice(&sum.to_le_bytes());
}

/// [`area`] with a pool of `bts_pool` BTS buffers of [`BTS_SIZE`] bytes (0: none), the
/// header not sealed.
fn area_with(depth: u32, ring: usize, claimed_cpus: u32, slots: Slots, bts_pool: usize) -> Vec<u8> {
    let nr_values = 1 + 3 * depth as usize + 2 + 1;
    let g = Geometry {
        nr_cpus: 1,
        ring,
        nr_values,
        bts_pool,
        bts_size: if bts_pool > 0 { BTS_SIZE } else { 0 },
    };
    let mut a = vec![0u8; g.area_size()];
    // The header as the module writes it (src/area.rs), for Intel LBR format 5 with LBR_INFO
    // (flavour 1, format 5, layout flags 1); the MSR list left zero.
    AreaHeader {
        geometry: g,
        layout: Encoding::from_codes(1, 5, depth, 1).expect("format 5 at this depth"),
        area_size: g.area_size(),
        anchor_addr: 0xffff_ffff_8200_0000,
        anchor_name: "_printk",
        text_base: 0,
        module_name: "lbr_dump",
        ctl_msr: 0,
        ctl_armed: 0,
        filter: Some((0x1c8, 2)),
        ler: Some((0x1dd, 0x1de)),
        branches: Filter::All,
        bts: (bts_pool > 0).then_some(BtsHeader {
            pool: bts_pool,
            buffer_size: BTS_SIZE,
            rings: BTS_RING_KERNEL,
        }),
    }
    .write(&mut a[..], &[]);
    let mut put = |off: usize, v: &[u8]| a[off..off + v.len()].copy_from_slice(v);
    // A header that claims other than its one CPU (unsealed: `area` seals it again).
    put(hdr::NR_CPUS, &claimed_cpus.to_le_bytes());
    if slots == Slots::OneSnapshot {
        let d = depth as usize;
        put(g.cpu_block(0) + cpu::COUNT, &1u64.to_le_bytes());
        let s = g.snapshot(0, 1);
        put(s + snap::SEQ, &3u64.to_le_bytes());
        put(s + snap::VECTOR, &14u32.to_le_bytes());
        put(s + snap::VALUES, &1u64.to_le_bytes()); // TOS
        put(
            s + snap::VALUES + 8 * 2,
            &0xffff_ffff_8100_0010u64.to_le_bytes(),
        ); // FROM[1]
        put(
            s + snap::VALUES + 8 * (2 + d),
            &0xffff_ffff_c000_0000u64.to_le_bytes(),
        ); // TO[1]
        let ler = s + snap::VALUES + 8 * (1 + 3 * d);
        put(ler, &0xffff_ffff_8100_0004u64.to_le_bytes()); // LER FROM
        put(ler + 8, &0xffff_ffff_8100_0008u64.to_le_bytes()); // LER TO
        put(s + snap::VALUES + 8 * (nr_values - 1), &2u64.to_le_bytes()); // LBR_SELECT
    }
    if bts_pool > 0 {
        for slot in 0..bts_pool {
            let e = g.bts_entry(0, slot);
            put(e + bts::VIRT, &bts_virt(slot).to_le_bytes());
            put(e + bts::PHYS, &bts_phys(slot).to_le_bytes());
        }
    }
    a
}

/// Bytes per BTS buffer of [`bts_area`]: 10 records.
pub const BTS_SIZE: usize = 240;
/// BTS buffers per CPU of [`bts_area`].
pub const BTS_POOL: usize = 4;

/// The virtual address of [`bts_area`]'s BTS buffer `slot`.
pub fn bts_virt(slot: usize) -> u64 {
    0xffff_8880_0200_0000 + 0x1000 * slot as u64
}

/// The physical address of [`bts_area`]'s BTS buffer `slot`.
pub fn bts_phys(slot: usize) -> u64 {
    0x4_0000 + 0x1000 * slot as u64
}

/// The branch [`bts_area`] writes into record slot `j` of buffer `slot`: from
/// 0xffffffff81000000 + 0x10000 * slot + 0x10 * j to 0xffffffff82000000 + the same.
pub fn bts_branch(slot: usize, j: usize) -> (u64, u64) {
    let off = 0x1_0000 * slot as u64 + 0x10 * j as u64;
    (0xffff_ffff_8100_0000 + off, 0xffff_ffff_8200_0000 + off)
}

/// One CPU's area with the branch trace store (Intel LBR format 5, depth 4, a ring of 4
/// snapshots, a pool of [`BTS_POOL`] buffers of [`BTS_SIZE`] bytes: 10 records), and the
/// buffers' memory as (physical address, bytes). Each snapshot has one LBR record (TOS 1,
/// entry 1: 0xffffffff81000010 -> 0xffffffffc0000000); the BTS buffers' records are
/// [`bts_branch`] (flags 0x10, the predicted bit, in every other one):
/// - slot 0, seq 1: kept buffer 0, not wrapped, bts_index 4 records past its base (records 0-3
///   written);
/// - slot 1, seq 2: kept buffer 1, wrapped, bts_index 3 records past its base (all 10 written);
/// - slot 2, seq 3: kept buffer 2, whose table entry's owner is now 7 (reused);
/// - slot 3, seq 4: foreign, IA32_DS_AREA 0xfffffe0000004000;
///
/// buffer 3 is recording (owner 0, empty).
pub fn bts_area() -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
    let mut a = area_with(4, 4, 1, Slots::Empty, BTS_POOL);
    let nr_values = 1 + 3 * 4 + 2 + 1;
    let g = Geometry {
        nr_cpus: 1,
        ring: 4,
        nr_values,
        bts_pool: BTS_POOL,
        bts_size: BTS_SIZE,
    };
    let mut put = |off: usize, v: u64| a[off..off + 8].copy_from_slice(&v.to_le_bytes());
    put(g.cpu_block(0) + cpu::COUNT, 4);
    put(g.cpu_block(0) + cpu::BTS_CUR, 3);
    // (ring slot = seq - 1, kept buffer, state, records written, index in records, owner)
    let kept = [
        (0usize, SNAP_BTS_KEPT, 4usize, 4u64, 1u64),
        (1, SNAP_BTS_KEPT | SNAP_BTS_WRAPPED, 10, 3, 2),
        (2, SNAP_BTS_KEPT, 2, 1, 7),
    ];
    let mut buffers: Vec<(u64, Vec<u8>)> = (0..BTS_POOL)
        .map(|k| (bts_phys(k), vec![0u8; BTS_SIZE]))
        .collect();
    for slot in 0..4 {
        let s = g.snapshot(0, slot);
        put(s + snap::SEQ, slot as u64 + 1);
        put(s + snap::VECTOR, 14);
        put(s + snap::VALUES, 1); // TOS
        put(s + snap::VALUES + 8 * 2, 0xffff_ffff_8100_0010); // FROM[1]
        put(s + snap::VALUES + 8 * (2 + 4), 0xffff_ffff_c000_0000); // TO[1]
        put(s + snap::VALUES + 8 * (nr_values - 1), 2); // LBR_SELECT
    }
    for &(k, state, written, index, owner) in &kept {
        let s = g.snapshot(0, k);
        put(s + snap::DS_AREA, 0xffff_8880_0777_0040);
        put(
            s + snap::BTS_INDEX,
            bts_virt(k) + index * BTS_RECORD_SIZE as u64,
        );
        put(s + snap::BTS_SLOT, (state as u64) << 32 | k as u64);
        put(s + snap::BTS_BASE, bts_virt(k));
        put(g.bts_entry(0, k) + bts::OWNER, owner);
        for j in 0..written {
            let (from, to) = bts_branch(k, j);
            let r = &mut buffers[k].1[j * BTS_RECORD_SIZE..(j + 1) * BTS_RECORD_SIZE];
            r[..8].copy_from_slice(&from.to_le_bytes());
            r[8..16].copy_from_slice(&to.to_le_bytes());
            r[16..].copy_from_slice(&(0x10 * (j as u64 % 2)).to_le_bytes());
        }
    }
    let s = g.snapshot(0, 3);
    put(s + snap::DS_AREA, 0xffff_fe00_0000_4000);
    put(s + snap::BTS_SLOT, (SNAP_BTS_FOREIGN as u64) << 32);
    seal_header(&mut a);
    (a, buffers)
}

/// The start of an ELF64 little-endian core file for `machine` (62: x86-64) with one PT_LOAD
/// per (physical address, size), padded to where the first segment's bytes go; the segments
/// follow one another, each at a page-aligned file offset (write them in order, padding each to
/// a page).
pub fn core_header(machine: u16, segments: &[(u64, u64)]) -> Vec<u8> {
    let mut f = vec![0u8; 64 + 56 * segments.len()];
    f[..4].copy_from_slice(b"\x7fELF");
    f[4] = 2; // ELFCLASS64
    f[5] = 1; // little-endian
    f[6] = 1; // EV_CURRENT
    f[16..18].copy_from_slice(&4u16.to_le_bytes()); // ET_CORE
    f[18..20].copy_from_slice(&machine.to_le_bytes());
    f[20..24].copy_from_slice(&1u32.to_le_bytes());
    f[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    f[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    f[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    f[56..58].copy_from_slice(&(segments.len() as u16).to_le_bytes());
    let mut offset = (f.len() as u64).next_multiple_of(4096);
    for (i, &(paddr, size)) in segments.iter().enumerate() {
        let p = 64 + 56 * i;
        f[p..p + 4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        f[p + 8..p + 16].copy_from_slice(&offset.to_le_bytes());
        f[p + 24..p + 32].copy_from_slice(&paddr.to_le_bytes());
        f[p + 32..p + 40].copy_from_slice(&size.to_le_bytes());
        f[p + 40..p + 48].copy_from_slice(&size.to_le_bytes());
        offset = (offset + size).next_multiple_of(4096);
    }
    f.resize(f.len().next_multiple_of(4096), 0);
    f
}

/// A whole core file: [`core_header`] and each segment's bytes.
pub fn core(machine: u16, segments: &[(u64, &[u8])]) -> Vec<u8> {
    let sizes: Vec<(u64, u64)> = segments.iter().map(|(p, d)| (*p, d.len() as u64)).collect();
    let mut f = core_header(machine, &sizes);
    for (_, data) in segments {
        f.extend_from_slice(data);
        f.resize(f.len().next_multiple_of(4096), 0);
    }
    f
}
