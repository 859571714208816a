// SPDX-License-Identifier: GPL-2.0

//! The snapshot area's format, read and written: the one code that knows what the header and a
//! snapshot hold. The offsets are layout.rs's (the stubs' generated header comes from there);
//! this module reads and writes through a small memory-access trait, [`Memory`]: byte slices in
//! the decoder and its test fixtures, volatile loads of the live area in the module (the
//! capture stubs of other CPUs may be writing it). Pure code, shared with the decoder.
//!
//! The module writes the header once when arming ([`AreaHeader::write`]), the stubs write the
//! snapshots, the oops printer reads them ([`Shape::snapshot`]) and seals the one it prints
//! ([`seal`]); the decoder parses the header of an area found in a dump ([`AreaHeader::parse`])
//! and reads the snapshots the same way.

use crate::facility::Filter;
use crate::layout::*;
use crate::record::Encoding;
use crate::report::State;

/// Reads of an area's bytes, little-endian. Offsets come from a [`Geometry`]; a slice panics
/// on one past its end, the module's area is as large as its geometry says.
pub trait Memory {
    /// The byte at `off`.
    fn u8_at(&self, off: usize) -> u8;
    /// The u32 at `off`.
    fn u32_at(&self, off: usize) -> u32;
    /// The u64 at `off` (the module reads an aligned one with one load).
    fn u64_at(&self, off: usize) -> u64;
}

/// Writes of an area's bytes.
pub trait MemoryMut: Memory {
    /// Stores `bytes` at `off`.
    fn put(&mut self, off: usize, bytes: &[u8]);
}

impl Memory for [u8] {
    fn u8_at(&self, off: usize) -> u8 {
        self[off]
    }

    fn u32_at(&self, off: usize) -> u32 {
        le32(self, off)
    }

    fn u64_at(&self, off: usize) -> u64 {
        le64(self, off)
    }
}

impl MemoryMut for [u8] {
    fn put(&mut self, off: usize, bytes: &[u8]) {
        self[off..off + bytes.len()].copy_from_slice(bytes);
    }
}

/// The state a snapshot is reported with, from its SNAP_* bits, the control value at entry, the
/// value lbr-dump writes when arming (the area header's) and, for recorders with a filter MSR,
/// `filter`: (value found by the capture, value lbr-dump writes). Torn and was-off as the stub
/// marked them; otherwise complete if both values were lbr-dump's own, foreign if either was
/// another owner's.
pub fn snapshot_state(
    bits: u32,
    ctl_entry: u64,
    ctl_armed: u64,
    filter: Option<(u64, u64)>,
) -> State {
    if bits & SNAP_LENT != 0 {
        State::Lent
    } else if bits & SNAP_TORN != 0 {
        State::Torn
    } else if bits & SNAP_NMI_ENTRY != 0 {
        State::NmiEntry
    } else if bits & SNAP_WAS_OFF != 0 {
        State::WasOff
    } else if ctl_entry != ctl_armed || filter.is_some_and(|(seen, armed)| seen != armed) {
        State::Foreign
    } else {
        State::Complete
    }
}

/// 64-bit FNV-1a over `data`, treating the 8 bytes at `skip` as zero (the checksum field).
pub fn checksum(data: &[u8], skip: usize) -> u64 {
    checksum_bytes(data.iter().copied(), skip)
}

/// [`checksum`] over bytes as they are read one by one (the module reads the live area with
/// volatile loads: other CPUs' stubs may write it).
pub fn checksum_bytes(data: impl Iterator<Item = u8>, skip: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, b) in data.enumerate() {
        let b = if (skip..skip + 8).contains(&i) { 0 } else { b };
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Why bytes are not a usable snapshot area (read back from a crash dump).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AreaError {
    /// Fewer bytes than the header, or than the size it announces.
    Short {
        /// Bytes needed.
        need: usize,
        /// Bytes there.
        have: usize,
    },
    /// No magic at the start.
    Magic,
    /// A layout version this code does not read.
    Version(u32),
    /// The header's checksum does not match its contents.
    Checksum {
        /// As stored.
        stored: u64,
        /// As computed.
        computed: u64,
    },
    /// A field is out of range or disagrees with the geometry the others imply.
    Field(&'static str),
}

impl core::fmt::Display for AreaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Short { need, have } => write!(f, "cut short: {need} bytes needed, {have} there"),
            Self::Magic => write!(f, "no LBRDUMP magic"),
            Self::Version(v) => write!(f, "layout version {v}, this reader knows {VERSION}"),
            Self::Checksum { stored, computed } => write!(
                f,
                "header checksum {stored:#018x} does not match its contents ({computed:#018x})"
            ),
            Self::Field(what) => write!(f, "impossible header field: {what}"),
        }
    }
}

fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn le64(b: &[u8], off: usize) -> u64 {
    u64::from(le32(b, off)) | u64::from(le32(b, off + 4)) << 32
}

/// A NUL-padded name field as text (up to its first NUL; `None` if not UTF-8).
fn name(b: &[u8]) -> Option<&str> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    core::str::from_utf8(&b[..end]).ok()
}

/// A validated area header: every offset and size in it is consistent with [`Geometry`], so
/// reading a snapshot of it cannot go out of bounds of `area_size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AreaHeader<'a> {
    /// CPU slots, snapshots per CPU, values per snapshot.
    pub geometry: Geometry,
    /// How the values decode.
    pub layout: Encoding,
    /// Area size in bytes.
    pub area_size: usize,
    /// Runtime address of the anchor symbol.
    pub anchor_addr: u64,
    /// The anchor symbol's name.
    pub anchor_name: &'a str,
    /// The module's core text address (0: built in).
    pub text_base: u64,
    /// The module's name.
    pub module_name: &'a str,
    /// The control MSR.
    pub ctl_msr: u32,
    /// The value written to the control MSR to record.
    pub ctl_armed: u64,
    /// The filter MSR (LBR_SELECT) and the value written to it to record; its value at each
    /// capture is the snapshot's last raw value.
    pub filter: Option<(u32, u64)>,
    /// The last exception record's MSRs (FROM, TO), when the recorder has one; their values at
    /// each capture follow the records' values.
    pub ler: Option<(u32, u32)>,
    /// Which branches were recorded (`filter`): with any but
    /// [`Filter::All`], consecutive records are not straight-line code apart.
    pub branches: Filter,
    /// The branch trace store, when armed with it.
    pub bts: Option<BtsHeader>,
}

/// The area header's BTS fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtsHeader {
    /// Buffers per CPU.
    pub pool: usize,
    /// Bytes per buffer, a whole number of [`BTS_RECORD_SIZE`] records.
    pub buffer_size: usize,
    /// BTS_RING_* bits: which rings' branches were stored.
    pub rings: u32,
}

/// One entry of the BTS buffer table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtsEntry {
    /// The buffer's virtual (linear) address.
    pub virt: u64,
    /// Its physical address.
    pub phys: u64,
    /// Sequence number of the snapshot whose history it keeps; 0 while recording or unused.
    pub owner: u64,
}

/// A snapshot's BTS fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtsSnap {
    /// IA32_DS_AREA as the capture read it.
    pub ds_area: u64,
    /// bts_index as found: the address the next record would have gone to.
    pub index: u64,
    /// The pool slot of the buffer kept.
    pub slot: u32,
    /// SNAP_BTS_* bits.
    pub state: u32,
    /// bts_buffer_base as found.
    pub base: u64,
}

/// Why a kept BTS buffer's position cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BtsError {
    /// bts_index is not within the buffer, or not a whole number of records from its base.
    Index,
    /// The buffer is smaller than one record.
    Size,
}

impl core::fmt::Display for BtsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Index => write!(
                f,
                "the BTS index is not a record boundary inside the buffer"
            ),
            Self::Size => write!(f, "the BTS buffer is smaller than one record"),
        }
    }
}

/// The records of a kept BTS buffer of `size` bytes at `base` whose next record would have gone
/// to `index`, as byte ranges within the buffer, oldest first: `[base, index)` if it never
/// wrapped, else `[index, end)` then `[base, index)` (the hardware wraps to the base as soon as
/// a whole record no longer fits: the SDM's circular mode with BTINT clear). Empty ranges are
/// `0..0`.
pub fn bts_runs(
    size: usize,
    base: u64,
    index: u64,
    wrapped: bool,
) -> Result<[core::ops::Range<usize>; 2], BtsError> {
    let end = size / BTS_RECORD_SIZE * BTS_RECORD_SIZE;
    if end == 0 {
        return Err(BtsError::Size);
    }
    let off = index.checked_sub(base).ok_or(BtsError::Index)?;
    if off > end as u64 || off % BTS_RECORD_SIZE as u64 != 0 {
        return Err(BtsError::Index);
    }
    let off = off as usize;
    Ok(if wrapped {
        [off..end, 0..off]
    } else {
        [0..off, 0..0]
    })
}

impl<'a> AreaHeader<'a> {
    /// Reads and validates the header at the start of `b` (at least [`HEADER_SIZE`] bytes; the
    /// rest of the area need not be there).
    pub fn parse(b: &'a [u8]) -> Result<Self, AreaError> {
        if b.len() < HEADER_SIZE {
            return Err(AreaError::Short {
                need: HEADER_SIZE,
                have: b.len(),
            });
        }
        if b[..8] != MAGIC {
            return Err(AreaError::Magic);
        }
        let version = le32(b, hdr::VERSION);
        if version != VERSION {
            return Err(AreaError::Version(version));
        }
        let stored = le64(b, hdr::CHECKSUM);
        let computed = checksum(&b[..HEADER_SIZE], hdr::CHECKSUM);
        if stored != computed {
            return Err(AreaError::Checksum { stored, computed });
        }
        let field = |ok: bool, what| {
            if ok {
                Ok(())
            } else {
                Err(AreaError::Field(what))
            }
        };
        field(
            le32(b, hdr::HEADER_SIZE) as usize == HEADER_SIZE,
            "header size",
        )?;
        let g = Geometry {
            nr_cpus: le32(b, hdr::NR_CPUS) as usize,
            ring: le32(b, hdr::RING) as usize,
            nr_values: le32(b, hdr::NR_VALUES) as usize,
            bts_pool: 0,
            bts_size: 0,
        };
        field((1..=MAX_CPUS).contains(&g.nr_cpus), "CPU count")?;
        field((1..=MAX_RING).contains(&g.ring), "ring size")?;
        let layout = Encoding::from_codes(
            le32(b, hdr::FLAVOUR),
            le32(b, hdr::FORMAT),
            le32(b, hdr::DEPTH),
            le32(b, hdr::LAYOUT_FLAGS),
        )
        .ok_or(AreaError::Field("flavour, format, depth or layout flags"))?;
        let filter = match le32(b, hdr::FILTER_MSR) {
            0 => None,
            m => Some((m, le64(b, hdr::FILTER_ARMED))),
        };
        let ler = match (le32(b, hdr::LER_FROM_MSR), le32(b, hdr::LER_TO_MSR)) {
            (0, 0) => None,
            (0, _) | (_, 0) => return Err(AreaError::Field("last exception record MSRs")),
            pair => Some(pair),
        };
        field(
            layout.values() + 2 * usize::from(ler.is_some()) + usize::from(filter.is_some())
                == g.nr_values,
            "value count",
        )?;
        let bts = match le32(b, hdr::BTS_POOL) as usize {
            0 => {
                field(
                    le32(b, hdr::BTS_RECORD_SIZE) == 0
                        && le64(b, hdr::BTS_BUFFER_SIZE) == 0
                        && le32(b, hdr::BTS_TABLE) == 0
                        && le32(b, hdr::BTS_RINGS) == 0,
                    "BTS fields without a BTS pool",
                )?;
                None
            }
            pool => {
                field((2..=MAX_BTS_POOL).contains(&pool), "BTS pool size")?;
                field(
                    le32(b, hdr::BTS_RECORD_SIZE) as usize == BTS_RECORD_SIZE,
                    "BTS record size",
                )?;
                let size = le64(b, hdr::BTS_BUFFER_SIZE);
                field(
                    (BTS_RECORD_SIZE as u64..=MAX_BTS_SIZE as u64).contains(&size)
                        && size % BTS_RECORD_SIZE as u64 == 0,
                    "BTS buffer size",
                )?;
                let rings = le32(b, hdr::BTS_RINGS);
                field(
                    rings != 0 && rings & !(BTS_RING_KERNEL | BTS_RING_USER) == 0,
                    "BTS rings",
                )?;
                Some(BtsHeader {
                    pool,
                    buffer_size: size as usize,
                    rings,
                })
            }
        };
        let g = Geometry {
            bts_pool: bts.map_or(0, |t| t.pool),
            bts_size: bts.map_or(0, |t| t.buffer_size),
            ..g
        };
        if bts.is_some() {
            field(
                le32(b, hdr::BTS_TABLE) as usize == g.bts_table(),
                "BTS table offset",
            )?;
        }
        field(
            le32(b, hdr::SNAP_SIZE) as usize == g.snap_size(),
            "snapshot size",
        )?;
        field(
            le32(b, hdr::MSR_LIST) as usize == g.msr_list(),
            "MSR list offset",
        )?;
        field(
            le32(b, hdr::CPU_OFFSET) as usize == g.cpu_offset(),
            "CPU block offset",
        )?;
        field(
            le32(b, hdr::CPU_BLOCK_SIZE) as usize == g.cpu_block_size(),
            "CPU block size",
        )?;
        let area_size = le64(b, hdr::AREA_SIZE);
        field(area_size == g.area_size() as u64, "area size")?;
        Ok(Self {
            geometry: g,
            layout,
            area_size: area_size as usize,
            anchor_addr: le64(b, hdr::ANCHOR_ADDR),
            anchor_name: name(&b[hdr::ANCHOR_NAME..hdr::ANCHOR_NAME + 32])
                .ok_or(AreaError::Field("anchor name"))?,
            text_base: le64(b, hdr::TEXT_BASE),
            module_name: name(&b[hdr::MODULE_NAME..hdr::MODULE_NAME + 16])
                .ok_or(AreaError::Field("module name"))?,
            ctl_msr: le32(b, hdr::CTL_MSR),
            ctl_armed: le64(b, hdr::CTL_ARMED),
            filter,
            ler,
            branches: *Filter::ALL
                .get(le32(b, hdr::BRANCH_FILTER) as usize)
                .ok_or(AreaError::Field("branch filter"))?,
            bts,
        })
    }

    /// What reading its snapshots takes.
    pub fn shape(&self) -> Shape {
        Shape {
            geometry: self.geometry,
            layout: self.layout,
            filter: self.filter.is_some(),
            ler: self.ler.is_some(),
            bts: self.bts.is_some(),
        }
    }

    /// Writes this header, the MSR list `msrs` (which MSR each value of a snapshot comes from)
    /// and then the header's checksum into `area`, which is `area_size` bytes. The inverse of
    /// [`AreaHeader::parse`]; the module writes the header of its area with it when arming.
    pub fn write<M: MemoryMut + ?Sized>(&self, area: &mut M, msrs: &[u32]) {
        let g = self.geometry;
        let layout = self.layout;
        let (format, flags) = layout.codes();
        area.put(hdr::MAGIC, &MAGIC);
        area.put(hdr::VERSION, &VERSION.to_le_bytes());
        area.put(hdr::HEADER_SIZE, &(HEADER_SIZE as u32).to_le_bytes());
        area.put(hdr::AREA_SIZE, &(self.area_size as u64).to_le_bytes());
        let bts = self.bts;
        for (off, v) in [
            (hdr::NR_CPUS, g.nr_cpus as u32),
            (hdr::RING, g.ring as u32),
            (hdr::SNAP_SIZE, g.snap_size() as u32),
            (hdr::NR_VALUES, g.nr_values as u32),
            (hdr::FLAVOUR, layout.flavour().code()),
            (hdr::FORMAT, format),
            (hdr::DEPTH, layout.depth() as u32),
            (hdr::LAYOUT_FLAGS, flags),
            (hdr::MSR_LIST, g.msr_list() as u32),
            (hdr::CPU_OFFSET, g.cpu_offset() as u32),
            (hdr::CPU_BLOCK_SIZE, g.cpu_block_size() as u32),
            (hdr::CTL_MSR, self.ctl_msr),
            (hdr::FILTER_MSR, self.filter.map_or(0, |(m, _)| m)),
            (hdr::LER_FROM_MSR, self.ler.map_or(0, |(from, _)| from)),
            (hdr::LER_TO_MSR, self.ler.map_or(0, |(_, to)| to)),
            (hdr::BRANCH_FILTER, self.branches as u32),
            (hdr::BTS_POOL, bts.map_or(0, |b| b.pool as u32)),
            (
                hdr::BTS_RECORD_SIZE,
                bts.map_or(0, |_| BTS_RECORD_SIZE as u32),
            ),
            (hdr::BTS_TABLE, bts.map_or(0, |_| g.bts_table() as u32)),
            (hdr::BTS_RINGS, bts.map_or(0, |b| b.rings)),
        ] {
            area.put(off, &v.to_le_bytes());
        }
        area.put(
            hdr::FILTER_ARMED,
            &self.filter.map_or(0, |(_, v)| v).to_le_bytes(),
        );
        area.put(
            hdr::BTS_BUFFER_SIZE,
            &(bts.map_or(0, |b| b.buffer_size) as u64).to_le_bytes(),
        );
        area.put(hdr::ANCHOR_ADDR, &self.anchor_addr.to_le_bytes());
        put_name::<32, M>(area, hdr::ANCHOR_NAME, self.anchor_name);
        area.put(hdr::TEXT_BASE, &self.text_base.to_le_bytes());
        put_name::<16, M>(area, hdr::MODULE_NAME, self.module_name);
        for (i, m) in msrs.iter().enumerate() {
            area.put(g.msr_list() + 4 * i, &m.to_le_bytes());
        }
        area.put(hdr::CTL_ARMED, &self.ctl_armed.to_le_bytes());
        seal_header(area);
    }

    /// The BTS table entry of `cpu`'s pool buffer `slot` (`None` without BTS or for a slot
    /// outside the pool); `area` is the whole area.
    pub fn bts_entry(&self, area: &[u8], cpu: usize, slot: usize) -> Option<BtsEntry> {
        self.shape().bts_entry(area, cpu, slot)
    }

    /// The MSR each value of a snapshot came from; `area` is the whole area.
    pub fn msr(&self, area: &[u8], i: usize) -> u32 {
        area.u32_at(self.geometry.msr_list() + 4 * i)
    }

    /// Snapshots taken on `cpu` so far, less the warnings' captures given back (the next goes
    /// to slot `count % ring`).
    pub fn count(&self, area: &[u8], cpu: usize) -> u64 {
        area.u64_at(self.geometry.cpu_block(cpu) + cpu::COUNT)
    }

    /// The snapshot in `slot` of `cpu`. `area` must hold the whole area (`area_size` bytes);
    /// `cpu` and `slot` must be below the geometry's counts (panics otherwise).
    pub fn snapshot<'b>(&self, area: &'b [u8], cpu: usize, slot: usize) -> SnapshotView<'b> {
        self.shape().snapshot(area, cpu, slot)
    }
}

/// Writes `name` NUL-padded into the `N`-byte field at `off` (cut to `N - 1` bytes).
fn put_name<const N: usize, M: MemoryMut + ?Sized>(area: &mut M, off: usize, name: &str) {
    let mut field = [0u8; N];
    let n = name.len().min(N - 1);
    field[..n].copy_from_slice(&name.as_bytes()[..n]);
    area.put(off, &field);
}

/// Recomputes and stores the header's checksum.
pub fn seal_header<M: MemoryMut + ?Sized>(area: &mut M) {
    let sum = checksum_bytes((0..HEADER_SIZE).map(|i| area.u8_at(i)), hdr::CHECKSUM);
    area.put(hdr::CHECKSUM, &sum.to_le_bytes());
}

/// Seals the snapshot at offset `off` for crash-dump readers: stores the checksum of its
/// `snap_size` bytes as they are now (if its CPU rewrites it, the seal fails and the reader
/// says so).
pub fn seal<M: MemoryMut + ?Sized>(area: &mut M, geometry: &Geometry, off: usize) {
    let sum = checksum_bytes(
        (off..off + geometry.snap_size()).map(|i| area.u8_at(i)),
        snap::CHECKSUM,
    );
    area.put(off + snap::CHECKSUM, &sum.to_le_bytes());
}

/// What reading an area's snapshots takes: its geometry and encoding, and which of the
/// optional parts its snapshots have. From a parsed header ([`AreaHeader::shape`]), or in the
/// module from what it armed with (never from the live header, which a stray write could
/// change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// CPU slots, snapshots per CPU, values per snapshot, BTS pool.
    pub geometry: Geometry,
    /// How the values decode.
    pub layout: Encoding,
    /// The last value is the filter MSR's.
    pub filter: bool,
    /// The last exception record's FROM and TO follow the records' values.
    pub ler: bool,
    /// The snapshots have BTS fields, the area a BTS table.
    pub bts: bool,
}

impl Shape {
    /// The BTS table entry of `cpu`'s pool buffer `slot` (`None` without BTS or for a slot
    /// outside the pool).
    pub fn bts_entry<M: Memory + ?Sized>(
        &self,
        area: &M,
        cpu: usize,
        slot: usize,
    ) -> Option<BtsEntry> {
        let g = self.geometry;
        (self.bts && slot < g.bts_pool && cpu < g.nr_cpus).then(|| {
            let e = g.bts_entry(cpu, slot);
            BtsEntry {
                virt: area.u64_at(e + bts::VIRT),
                phys: area.u64_at(e + bts::PHYS),
                owner: area.u64_at(e + bts::OWNER),
            }
        })
    }

    /// The snapshot in `slot` of `cpu`, its fields read once each. `cpu` and `slot` must be
    /// below the geometry's counts (a slice panics otherwise).
    pub fn snapshot<'b, M: Memory + ?Sized>(
        &self,
        area: &'b M,
        cpu: usize,
        slot: usize,
    ) -> SnapshotView<'b, M> {
        let off = self.geometry.snapshot(cpu, slot);
        let f = |field| area.u64_at(off + field);
        let values = off + snap::VALUES;
        SnapshotView {
            cpu,
            off,
            seq: f(snap::SEQ),
            vector: area.u32_at(off + snap::VECTOR),
            state: area.u32_at(off + snap::STATE),
            error: f(snap::ERROR),
            rip: f(snap::RIP),
            cr2: f(snap::CR2),
            ctl_entry: f(snap::CTL_ENTRY),
            ctl_after: f(snap::CTL_AFTER),
            frame: f(snap::FRAME),
            rsp: f(snap::RSP),
            filter: self
                .filter
                .then(|| area.u64_at(values + 8 * (self.geometry.nr_values - 1))),
            bts: self.bts.then(|| BtsSnap {
                ds_area: f(snap::DS_AREA),
                index: f(snap::BTS_INDEX),
                slot: area.u32_at(off + snap::BTS_SLOT),
                state: area.u32_at(off + snap::BTS_STATE),
                base: f(snap::BTS_BASE),
            }),
            ler: self.ler.then(|| {
                let at = values + 8 * self.layout.values();
                (area.u64_at(at), area.u64_at(at + 8))
            }),
            stored_checksum: f(snap::CHECKSUM),
            snap_size: self.geometry.snap_size(),
            area,
        }
    }
}

/// One snapshot as stored, read by [`Shape::snapshot`].
#[derive(Debug)]
pub struct SnapshotView<'a, M: Memory + ?Sized = [u8]> {
    /// The CPU whose ring holds it.
    pub cpu: usize,
    /// Its offset in the area.
    pub off: usize,
    /// Sequence number (0: never written).
    pub seq: u64,
    /// Exception vector.
    pub vector: u32,
    /// SNAP_* bits.
    pub state: u32,
    /// Error code.
    pub error: u64,
    /// RIP of the exception frame.
    pub rip: u64,
    /// CR2 at entry.
    pub cr2: u64,
    /// Control MSR at entry.
    pub ctl_entry: u64,
    /// Control MSR after the capture.
    pub ctl_after: u64,
    /// Address of the exception frame's RIP slot on the stack.
    pub frame: u64,
    /// Interrupted stack pointer.
    pub rsp: u64,
    /// The filter MSR's value at the capture (when the header names a filter MSR).
    pub filter: Option<u64>,
    /// The BTS fields (when the area has BTS).
    pub bts: Option<BtsSnap>,
    /// The last exception record's raw FROM and TO values at the capture (when the header names
    /// its MSRs; [`crate::record::last_exception`] decodes them).
    pub ler: Option<(u64, u64)>,
    stored_checksum: u64,
    snap_size: usize,
    area: &'a M,
}

impl<M: Memory + ?Sized> Clone for SnapshotView<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M: Memory + ?Sized> Copy for SnapshotView<'_, M> {}

impl<M: Memory + ?Sized> SnapshotView<'_, M> {
    /// Raw value `i`, read from the area now.
    pub fn value(&self, i: usize) -> u64 {
        self.area.u64_at(self.off + snap::VALUES + 8 * i)
    }

    /// `None`: not sealed (the oops printer seals the snapshot it prints); else whether the
    /// checksum matches the snapshot's bytes now.
    pub fn sealed(&self) -> Option<bool> {
        let computed = || {
            checksum_bytes(
                (self.off..self.off + self.snap_size).map(|i| self.area.u8_at(i)),
                snap::CHECKSUM,
            )
        };
        match self.stored_checksum {
            0 => None,
            s => Some(s == computed()),
        }
    }
}
