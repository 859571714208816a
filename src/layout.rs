// SPDX-License-Identifier: GPL-2.0

//! The snapshot area: lbr-dump's in-memory format, written by the capture stubs and read back by
//! the oops printer and, from crash dumps, by the decoder. Pure code, shared with the decoder.
//!
//! The area is one physically contiguous, page-aligned allocation, so a dump reader finds it by
//! scanning physical memory for the magic at page boundaries. It describes itself: everything
//! needed to decode and symbolize it is in its header, no kernel debug info is needed. All
//! fields are little-endian.
//!
//! ```text
//! offset  size  area header (HEADER_SIZE bytes)
//! 0x000   8     magic "LBRDUMP\0"
//! 0x008   4     version (VERSION)
//! 0x00c   4     header size
//! 0x010   8     area size in bytes
//! 0x018   8     checksum of the header (FNV-1a 64 with this field zero)
//! 0x020   4     nr_cpus: CPU slots (CPU numbers 0..nr_cpus)
//! 0x024   4     ring: snapshots per CPU
//! 0x028   4     snapshot size in bytes
//! 0x02c   4     nr_values: raw MSR values per snapshot
//! 0x030   4     flavour code (record::Layout::flavour_code)
//! 0x034   4     LBR format (Intel LBR), else 0
//! 0x038   4     depth
//! 0x03c   4     layout flags (record::LAYOUT_*)
//! 0x040   8     runtime address of the anchor symbol (KASLR: minus its vmlinux address)
//! 0x048   32    anchor symbol name, NUL-padded
//! 0x068   8     lbr_dump's text base (its core text in memory)
//! 0x070   16    module name, NUL-padded
//! 0x080   4     offset of the MSR list (nr_values u32s: which MSR each value came from)
//! 0x084   4     offset of CPU 0's block
//! 0x088   4     CPU block size: CPU_HEADER_SIZE + ring * snapshot size
//! 0x08c   4     control MSR (whose value the snapshots record at entry and after capture)
//! 0x090   8     control value lbr-dump writes to record (armed)
//! 0x098   ...   zero up to HEADER_SIZE
//!
//! CPU block (at cpu_offset + cpu * cpu_block_size):
//! 0x00    8     count: snapshots taken on this CPU (the next goes to slot count % ring)
//! 0x08    4     busy: non-zero while a capture runs (a fault inside the capture is not captured)
//! 0x0c    4     reserved
//! 0x10    48    reserved, zero
//! 0x40    ...   ring of snapshots
//!
//! Snapshot (SNAP_HEADER_SIZE + 8 * nr_values bytes):
//! 0x00    8     sequence number (0: never written); order within the CPU's ring
//! 0x08    4     vector
//! 0x0c    4     state (SNAP_*)
//! 0x10    8     error code (0 for vectors without one)
//! 0x18    8     RIP of the exception frame
//! 0x20    8     CR2 at entry
//! 0x28    8     control MSR value at entry
//! 0x30    8     control MSR value after the capture, before restoring it
//! 0x38    8     address of the hardware exception frame (RIP slot), identifies the oops' one
//! 0x40    8     RSP of the exception frame (the interrupted stack pointer)
//! 0x48    8     checksum (FNV-1a 64 of the snapshot with this field zero; 0: not sealed)
//! 0x50    ...   nr_values u64 raw MSR values
//! ```
//! The same offsets are defined for the assembly in asm/layout.h; a host test checks they agree.

/// "LBRDUMP\0".
pub const MAGIC: [u8; 8] = *b"LBRDUMP\0";
/// Layout version; bumped on any incompatible change.
pub const VERSION: u32 = 1;
/// Size of the area header; CPU blocks start at a page boundary after it.
pub const HEADER_SIZE: usize = 0x100;
/// Size of a CPU block's header.
pub const CPU_HEADER_SIZE: usize = 0x40;
/// Size of a snapshot's header.
pub const SNAP_HEADER_SIZE: usize = 0x50;

/// Area header field offsets.
pub mod hdr {
    #![allow(missing_docs)]
    pub const MAGIC: usize = 0x00;
    pub const VERSION: usize = 0x08;
    pub const HEADER_SIZE: usize = 0x0c;
    pub const AREA_SIZE: usize = 0x10;
    pub const CHECKSUM: usize = 0x18;
    pub const NR_CPUS: usize = 0x20;
    pub const RING: usize = 0x24;
    pub const SNAP_SIZE: usize = 0x28;
    pub const NR_VALUES: usize = 0x2c;
    pub const FLAVOUR: usize = 0x30;
    pub const FORMAT: usize = 0x34;
    pub const DEPTH: usize = 0x38;
    pub const LAYOUT_FLAGS: usize = 0x3c;
    pub const ANCHOR_ADDR: usize = 0x40;
    pub const ANCHOR_NAME: usize = 0x48;
    pub const TEXT_BASE: usize = 0x68;
    pub const MODULE_NAME: usize = 0x70;
    pub const MSR_LIST: usize = 0x80;
    pub const CPU_OFFSET: usize = 0x84;
    pub const CPU_BLOCK_SIZE: usize = 0x88;
    pub const CTL_MSR: usize = 0x8c;
    pub const CTL_ARMED: usize = 0x90;
}

/// CPU block header field offsets.
pub mod cpu {
    #![allow(missing_docs)]
    pub const COUNT: usize = 0x00;
    pub const BUSY: usize = 0x08;
}

/// Snapshot field offsets.
pub mod snap {
    #![allow(missing_docs)]
    pub const SEQ: usize = 0x00;
    pub const VECTOR: usize = 0x08;
    pub const STATE: usize = 0x0c;
    pub const ERROR: usize = 0x10;
    pub const RIP: usize = 0x18;
    pub const CR2: usize = 0x20;
    pub const CTL_ENTRY: usize = 0x28;
    pub const CTL_AFTER: usize = 0x30;
    pub const FRAME: usize = 0x38;
    pub const RSP: usize = 0x40;
    pub const CHECKSUM: usize = 0x48;
    pub const VALUES: usize = 0x50;
}

/// Snapshot state: the capture ran to its end.
pub const SNAP_COMPLETE: u32 = 1 << 0;
/// Snapshot state: the control MSR changed under the capture (another owner, e.g. a perf NMI);
/// its value was left as that owner set it.
pub const SNAP_TORN: u32 = 1 << 1;
/// Snapshot state: recording was off at entry (the records are older than this exception).
pub const SNAP_WAS_OFF: u32 = 1 << 2;

/// 64-bit FNV-1a over `data`, treating the 8 bytes at `skip` as zero (the checksum field).
pub fn checksum(data: &[u8], skip: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, &b) in data.iter().enumerate() {
        let b = if (skip..skip + 8).contains(&i) { 0 } else { b };
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Geometry of an area, derived from its parameters; used to allocate and to validate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// CPU slots.
    pub nr_cpus: usize,
    /// Snapshots per CPU.
    pub ring: usize,
    /// Raw values per snapshot.
    pub nr_values: usize,
}

impl Geometry {
    /// Bytes per snapshot (8-byte aligned).
    pub fn snap_size(&self) -> usize {
        SNAP_HEADER_SIZE + 8 * self.nr_values
    }

    /// Offset of the MSR list.
    pub fn msr_list(&self) -> usize {
        HEADER_SIZE
    }

    /// Offset of CPU 0's block: after the MSR list, 64-byte aligned.
    pub fn cpu_offset(&self) -> usize {
        (self.msr_list() + 4 * self.nr_values).next_multiple_of(64)
    }

    /// Bytes per CPU block (64-byte aligned, so blocks do not share cache lines).
    pub fn cpu_block_size(&self) -> usize {
        (CPU_HEADER_SIZE + self.ring * self.snap_size()).next_multiple_of(64)
    }

    /// Offset of a CPU's block.
    pub fn cpu_block(&self, cpu: usize) -> usize {
        self.cpu_offset() + cpu * self.cpu_block_size()
    }

    /// Offset of a snapshot.
    pub fn snapshot(&self, cpu: usize, slot: usize) -> usize {
        self.cpu_block(cpu) + CPU_HEADER_SIZE + slot * self.snap_size()
    }

    /// Total size in bytes, rounded up to whole pages.
    pub fn area_size(&self) -> usize {
        self.cpu_block(self.nr_cpus).next_multiple_of(4096)
    }
}
