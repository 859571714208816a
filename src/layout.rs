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
//! 0x030   4     flavour code (facility::Flavour::code)
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
//! 0x098   4     filter MSR (LBR_SELECT), 0: none; when set, it is the MSR list's last entry, so
//!               each snapshot's last value is the filter as the capture found it
//! 0x09c   4     branch filter lbr-dump records with (the `filter` parameter, facility::Filter's
//!               code: 0 all, 1 functions, 2 calls)
//! 0x0a0   8     filter value lbr-dump writes when arming
//! 0x0a8   4     last exception record's FROM MSR (Intel LER, AMD LastIntFromIP), 0: none; when
//!               set, the MSR list holds it and the TO MSR right after the records' values
//!               (Encoding::values of them), so each snapshot holds the pair there
//! 0x0ac   4     last exception record's TO MSR (0 exactly when the FROM MSR is 0)
//! 0x0b0   4     BTS buffers per CPU (the pool); 0: no branch trace store
//! 0x0b4   4     BTS record size in bytes (BTS_RECORD_SIZE; 0 without BTS)
//! 0x0b8   8     bytes per BTS buffer, a whole number of records (0 without BTS)
//! 0x0c0   4     offset of the BTS buffer table (0 without BTS)
//! 0x0c4   4     BTS rings stored: bit 0 kernel, bit 1 user (BTS_RING_*)
//! 0x0c8   ...   zero up to HEADER_SIZE
//!
//! BTS buffer table (at its offset, 64-byte aligned, after the MSR list): for each CPU, one
//! entry per pool buffer, CPU 0's first (entry of `cpu`, `slot`: cpu * pool + slot):
//! 0x00    8     virtual address of the buffer (linear: what bts_buffer_base holds)
//! 0x08    8     physical address (the buffer is physically contiguous)
//! 0x10    8     owner: the sequence number of the snapshot whose history the buffer keeps; 0
//!               while it is the one recording, or never used
//! 0x18    8     reserved, zero
//!
//! CPU block (at cpu_offset + cpu * cpu_block_size):
//! 0x00    8     count: snapshots taken on this CPU (the next goes to slot count % ring)
//! 0x08    4     busy: non-zero while a capture runs (a fault inside the capture is not captured)
//! 0x0c    4     reserved
//! 0x10    4     BTS: the pool slot of the buffer recording now
//! 0x14    4     reserved
//! 0x18    8     BTS: address of this CPU's first BTS table entry (for the stubs)
//! 0x20    32    reserved, zero
//! 0x40    64    BTS: this CPU's debug store (DS) save area, what IA32_DS_AREA points at
//!               (SDM vol. 3B "64-Bit Format of the DS Save Area"): buffer base, index,
//!               absolute maximum, interrupt threshold, then the PEBS fields (zero, unused)
//! 0x80    ...   ring of snapshots
//!
//! Snapshot (SNAP_HEADER_SIZE + 8 * nr_values bytes):
//! 0x00    8     sequence number (0: never written); order within the CPU's ring
//! 0x08    4     vector: the exception vector; VECTOR_PANIC (0x100) for a capture at panic
//!               entry, VECTOR_NMI / VECTOR_REBOOT for a CPU stopped in a panic
//! 0x0c    4     state (SNAP_*)
//! 0x10    8     error code (0 for vectors without one)
//! 0x18    8     RIP of the exception frame
//! 0x20    8     CR2 at entry
//! 0x28    8     control MSR value at entry
//! 0x30    8     control MSR value after the capture, before restoring it
//! 0x38    8     address of the hardware exception frame (RIP slot), identifies the oops' one
//! 0x40    8     RSP of the exception frame (the interrupted stack pointer)
//! 0x48    8     checksum (FNV-1a 64 of the snapshot with this field zero; 0: not sealed)
//! 0x50    8     BTS: IA32_DS_AREA as the capture read it (0 without BTS)
//! 0x58    8     BTS: bts_index as the capture found it (the next record's address)
//! 0x60    4     BTS: the pool slot of the buffer this capture kept
//! 0x64    4     BTS state (SNAP_BTS_*)
//! 0x68    8     BTS: bts_buffer_base as the capture found it
//! 0x70    ...   nr_values u64 raw MSR values
//! ```
//!
//! The entry stubs read their configuration from `struct capture_config` ([`cfg`]; the module's
//! `ffi::CaptureConfig`, whose field offsets the compiler checks against these).
//!
//! This file is the one definition of every offset shared with the assembly: Kbuild generates
//! the stubs' `layout.h` from it (asm/layout.awk: each `pub const NAME: usize = NUMBER;` of the
//! modules below becomes `LBR_<MODULE>_<NAME>`, each top-level one `LBR_<NAME>`), so the numbers
//! below must stay plain literals.

/// "LBRDUMP\0".
pub const MAGIC: [u8; 8] = *b"LBRDUMP\0";
/// Layout version; bumped on any incompatible change (3: the last exception record; 4: the
/// branch filter; 5: the branch trace store).
pub const VERSION: u32 = 5;
/// Size of the area header; CPU blocks start at a page boundary after it.
pub const HEADER_SIZE: usize = 0x100;
/// Size of a CPU block's header.
pub const CPU_HEADER_SIZE: usize = 0x80;
/// Size of a snapshot's header.
pub const SNAP_HEADER_SIZE: usize = 0x70;
/// Bytes per BTS record: from, to, flags (SDM "64-Bit Format of the DS Save Area").
pub const BTS_RECORD_SIZE: usize = 24;
/// Bytes per entry of the BTS buffer table.
pub const BTS_ENTRY_SIZE: usize = 0x20;

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
    pub const FILTER_MSR: usize = 0x98;
    pub const BRANCH_FILTER: usize = 0x9c;
    pub const FILTER_ARMED: usize = 0xa0;
    pub const LER_FROM_MSR: usize = 0xa8;
    pub const LER_TO_MSR: usize = 0xac;
    pub const BTS_POOL: usize = 0xb0;
    pub const BTS_RECORD_SIZE: usize = 0xb4;
    pub const BTS_BUFFER_SIZE: usize = 0xb8;
    pub const BTS_TABLE: usize = 0xc0;
    pub const BTS_RINGS: usize = 0xc4;
}

/// BTS buffer table entry field offsets.
pub mod bts {
    #![allow(missing_docs)]
    pub const VIRT: usize = 0x00;
    pub const PHYS: usize = 0x08;
    pub const OWNER: usize = 0x10;
}

/// The DS save area's BTS fields (SDM vol. 3B "64-Bit Format of the DS Save Area").
pub mod ds {
    #![allow(missing_docs)]
    pub const BTS_BASE: usize = 0x00;
    pub const BTS_INDEX: usize = 0x08;
    pub const BTS_MAX: usize = 0x10;
    pub const BTS_THRESHOLD: usize = 0x18;
    pub const SIZE: usize = 0x40;
}

/// CPU block header field offsets.
pub mod cpu {
    #![allow(missing_docs)]
    pub const COUNT: usize = 0x00;
    pub const BUSY: usize = 0x08;
    pub const BTS_CUR: usize = 0x10;
    pub const BTS_TABLE: usize = 0x18;
    /// u32: KVM guest LBR events scheduled on this CPU now (vLBR: the guest holds the LBR;
    /// 0xffffffff while the CPU is being disarmed). The stubs neither re-arm nor thaw while it is
    /// not 0, and a capture then is marked [`super::SNAP_LENT`].
    pub const LENT: usize = 0x20;
    pub const DS: usize = 0x40;
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
    pub const DS_AREA: usize = 0x50;
    pub const BTS_INDEX: usize = 0x58;
    pub const BTS_SLOT: usize = 0x60;
    pub const BTS_STATE: usize = 0x64;
    pub const BTS_BASE: usize = 0x68;
    pub const VALUES: usize = 0x70;
}

/// `struct capture_config`: what the entry stubs read and never write. It fills the first bytes
/// of a page of its own (asm/stubs.S `lbr_dump_capture`, in `.data..ro_after_init`), with the MSR
/// list at [`cfg::MSR_LIST`]: read-only once the module's (or the kernel's) init is done, and
/// written only through a window that is writable for the few stores that change it (src/glue.c
/// `lbr_dump_window_write`), while no gate points at a stub. What the stubs write is in
/// [`live`].
pub mod cfg {
    /// Address of CPU 0's block in the snapshot area.
    pub const CPU0: usize = 0x00;
    /// Bytes per CPU block.
    pub const BLOCK_SIZE: usize = 0x08;
    /// CPU blocks; a CPU number at or above this is not captured.
    pub const NR_CPUS: usize = 0x10;
    /// Snapshots per CPU minus one (a power of two minus one).
    pub const RING_MASK: usize = 0x18;
    /// Bytes per snapshot.
    pub const SNAP_SIZE: usize = 0x20;
    /// Address of the u32 MSR list (this page's, at `MSR_LIST`).
    pub const MSRS: usize = 0x28;
    /// Entries in the MSR list (at least 1, at most `MSR_MAX`).
    pub const NR_VALUES: usize = 0x30;
    /// The recorder's control MSR.
    pub const CTL_MSR: usize = 0x38;
    /// Its enable bit(s): cleared to freeze.
    pub const MASK: usize = 0x40;
    /// The value lbr-dump wrote when arming (the re-arm target).
    pub const ARMED: usize = 0x48;
    /// Address of the PTE of the stop switch's window onto the IDT (0: no window).
    pub const GATE_PTE: usize = 0x50;
    /// Address of that window (its page), for INVLPG.
    pub const GATE_WINDOW: usize = 0x58;
    /// Address of the stop stubs' register save areas ([`super::stop`], one per CPU).
    pub const STOP_SAVE: usize = 0x60;
    /// The NMI gate's low quadword in the stop switch's window (0: the gate cannot be hooked).
    pub const NMI_GATE: usize = 0x68;
    /// That quadword pointing at the NMI stop stub, written by the stop trampoline.
    pub const NMI_HOOK: usize = 0x70;
    /// The REBOOT_VECTOR gate's low quadword in the window (0: cannot be hooked).
    pub const IPI_GATE: usize = 0x78;
    /// That quadword pointing at the REBOOT_VECTOR stop stub.
    pub const IPI_HOOK: usize = 0x80;
    /// BTS buffers per CPU (0: no BTS, the capture leaves the debug store alone).
    pub const BTS_POOL: usize = 0x88;
    /// Address of CPU 0's first entry in the BTS buffer table.
    pub const BTS_TABLE: usize = 0x90;
    /// Bytes per BTS buffer (a whole number of records).
    pub const BTS_SIZE: usize = 0x98;
    /// The control bit(s) a #DB delivery clears (the LBR switch): the re-arm target is ARMED
    /// with only these cleared; `MASK` also holds BTS's bits (TR, BTS), which #DB leaves.
    pub const REARM_MASK: usize = 0xa0;
    /// Address of the kernel's IRET to user mode (entry_64.S `native_irq_return_iret`; 0: not
    /// found): a #GP, #NP or #SS there, and espfix64's #DF, are a user's bad return that the
    /// kernel fixes up, not a crash, and not captured.
    pub const IRET: usize = 0xa8;
    /// The window's PTE while the stop trampoline switches the gates: writable.
    pub const GATE_PTE_RW: usize = 0xb0;
    /// The window's PTE otherwise: read-only.
    pub const GATE_PTE_RO: usize = 0xb8;
    /// Size of the structure.
    pub const SIZE: usize = 0xc0;
    /// Offset of the MSR list in the page.
    pub const MSR_LIST: usize = 0x100;
    /// Entries the MSR list has room for.
    pub const MSR_MAX: usize = (PAGE - MSR_LIST) / 4;
    /// The page the configuration and the MSR list fill.
    pub const PAGE: usize = 0x1000;
}

/// `struct capture_live` (asm/stubs.S `lbr_dump_live`): the counters the stubs write.
pub mod live {
    /// The last sequence number handed out (a locked add in every capture).
    pub const SEQ: usize = 0x00;
    /// 0 until a panic is captured, then the capturing CPU's number plus one (the panic
    /// trampoline claims it with a locked compare-and-exchange: one panic capture per arming).
    pub const PANIC_CPU: usize = 0x08;
    /// Set to 1 (xchg) by the first CPU whose stop trampoline switches the stop gates after a
    /// panic was claimed, 2 when it is done: only it opens and closes the stop switch's window;
    /// another waits for 2 (bounded).
    pub const GATES_SWITCHED: usize = 0x10;
    /// Size of the structure.
    pub const SIZE: usize = 0x18;
}

/// The stop stubs' register save areas (not part of the dump): `CPU_SIZE` bytes per CPU, at
/// `cfg::STOP_SAVE + cpu * CPU_SIZE`, zeroed when arming. The NMI and the REBOOT_VECTOR stub each
/// have their own half, because an NMI may arrive inside the REBOOT_VECTOR stub; neither can
/// nest in itself (NMIs are blocked until the next IRET and the stub takes no exception;
/// REBOOT_VECTOR runs with interrupts off). `DONE` is set by the first stop capture on the CPU:
/// one per arming (a panic is final), so that later NMIs do not push it out of the ring. With
/// `nmi_freeze`, the NMI watch stub keeps the control value it froze in `WATCH` (0: not frozen
/// by it), for lbr-dump's NMI handler to thaw, and borrows the NMI half's RCX, RDX, RSI slots.
pub mod stop {
    #![allow(missing_docs)]
    pub const CPU_SIZE: usize = 0x100;
    pub const NMI: usize = 0x00;
    pub const IPI: usize = 0x80;
    pub const WATCH: usize = 0xf0;
    pub const DONE: usize = 0xf8;
    pub const RAX: usize = 0x00;
    pub const RCX: usize = 0x08;
    pub const RDX: usize = 0x10;
    pub const RSI: usize = 0x18;
    pub const RDI: usize = 0x20;
    pub const R8: usize = 0x28;
    pub const R9: usize = 0x30;
    pub const R10: usize = 0x38;
    pub const R11: usize = 0x40;
    pub const ENTRY: usize = 0x48;
}

/// The snapshot `vector` of a capture at the entry of panic() or vpanic() (no exception: a value
/// no IDT vector has).
pub const VECTOR_PANIC: u32 = 0x100;
/// The snapshot `vector` of a CPU stopped by an NMI (the NMI vector).
pub const VECTOR_NMI: u32 = 0x2;
/// The snapshot `vector` of a CPU stopped by the stop IPI (REBOOT_VECTOR).
pub const VECTOR_REBOOT: u32 = 0xf8;

/// Snapshot state: the capture ran to its end.
pub const SNAP_COMPLETE: u32 = 0x1;
/// Snapshot state: the control MSR changed under the capture (another owner, e.g. a perf NMI);
/// its value was left as that owner set it.
pub const SNAP_TORN: u32 = 0x2;
/// Snapshot state: recording was off at entry (the records are older than this exception).
pub const SNAP_WAS_OFF: u32 = 0x4;
/// Snapshot state: a panic() called from an NMI handler, with the recorder frozen at that NMI's
/// entry (`nmi_freeze`): the records end with the NMI's delivery, from where the CPU was.
pub const SNAP_NMI_ENTRY: u32 = 0x8;
/// Snapshot state: the LBR was lent to a KVM guest on this CPU (vLBR): host recording was off
/// and the records, if any, are the guest's.
pub const SNAP_LENT: u32 = 0x10;

/// BTS state: the capture kept this CPU's BTS buffer (its owner is this snapshot) and swapped a
/// spare one into the debug store before recording went on.
pub const SNAP_BTS_KEPT: u32 = 0x1;
/// BTS state: the kept buffer had filled and wrapped at least once (its last record slot was
/// written): every record in it is history, the oldest at bts_index.
pub const SNAP_BTS_WRAPPED: u32 = 0x2;
/// BTS state: IA32_DS_AREA was not this CPU's debug store (another owner, perf, took it): no
/// buffer kept, the debug store left as found.
pub const SNAP_BTS_FOREIGN: u32 = 0x4;

/// BTS rings stored (area header `BTS_RINGS`): kernel-mode branches.
pub const BTS_RING_KERNEL: u32 = 0x1;
/// BTS rings stored: user-mode branches.
pub const BTS_RING_USER: u32 = 0x2;

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
) -> crate::report::State {
    use crate::report::State;
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

/// Geometry of an area, derived from its parameters; used to allocate and to validate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// CPU slots.
    pub nr_cpus: usize,
    /// Snapshots per CPU.
    pub ring: usize,
    /// Raw values per snapshot.
    pub nr_values: usize,
    /// BTS buffers per CPU (0: no BTS).
    pub bts_pool: usize,
    /// Bytes per BTS buffer (0 without BTS).
    pub bts_size: usize,
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

    /// Offset of the BTS buffer table: after the MSR list, 64-byte aligned.
    pub fn bts_table(&self) -> usize {
        (self.msr_list() + 4 * self.nr_values).next_multiple_of(64)
    }

    /// Offset of the BTS table entry of `cpu`'s pool buffer `slot`.
    pub fn bts_entry(&self, cpu: usize, slot: usize) -> usize {
        self.bts_table() + (cpu * self.bts_pool + slot) * BTS_ENTRY_SIZE
    }

    /// Offset of CPU 0's block: after the BTS table (none without BTS), 64-byte aligned.
    pub fn cpu_offset(&self) -> usize {
        self.bts_entry(self.nr_cpus, 0).next_multiple_of(64)
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

/// The most CPU slots a header may announce (the kernel's NR_CPUS limit).
pub const MAX_CPUS: usize = 8192;
/// The most snapshots per CPU a header may announce.
pub const MAX_RING: usize = 64;
/// The most BTS buffers per CPU a header may announce.
pub const MAX_BTS_POOL: usize = 16;
/// The largest BTS buffer a header may announce (the module allocates at most 4 MiB).
pub const MAX_BTS_SIZE: usize = 1 << 30;

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
    pub layout: crate::record::Encoding,
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
    /// [`crate::facility::Filter::All`], consecutive records
    /// are not straight-line code apart.
    pub branches: crate::facility::Filter,
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
        let layout = crate::record::Encoding::from_codes(
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
            branches: *crate::facility::Filter::ALL
                .get(le32(b, hdr::BRANCH_FILTER) as usize)
                .ok_or(AreaError::Field("branch filter"))?,
            bts,
        })
    }

    /// The BTS table entry of `cpu`'s pool buffer `slot` (`None` without BTS or for a slot
    /// outside the pool); `area` is the whole area.
    pub fn bts_entry(&self, area: &[u8], cpu: usize, slot: usize) -> Option<BtsEntry> {
        let g = self.geometry;
        (self.bts.is_some() && slot < g.bts_pool && cpu < g.nr_cpus).then(|| {
            let e = g.bts_entry(cpu, slot);
            BtsEntry {
                virt: le64(area, e + bts::VIRT),
                phys: le64(area, e + bts::PHYS),
                owner: le64(area, e + bts::OWNER),
            }
        })
    }

    /// The MSR each value of a snapshot came from; `area` is the whole area.
    pub fn msr(&self, area: &[u8], i: usize) -> u32 {
        le32(area, self.geometry.msr_list() + 4 * i)
    }

    /// Snapshots taken on `cpu` so far (the next goes to slot `count % ring`).
    pub fn count(&self, area: &[u8], cpu: usize) -> u64 {
        le64(area, self.geometry.cpu_block(cpu) + cpu::COUNT)
    }

    /// The snapshot in `slot` of `cpu`. `area` must hold the whole area (`area_size` bytes);
    /// `cpu` and `slot` must be below the geometry's counts (panics otherwise).
    pub fn snapshot(&self, area: &'a [u8], cpu: usize, slot: usize) -> SnapshotView<'a> {
        let off = self.geometry.snapshot(cpu, slot);
        let b = &area[off..off + self.geometry.snap_size()];
        let stored = le64(b, snap::CHECKSUM);
        SnapshotView {
            seq: le64(b, snap::SEQ),
            vector: le32(b, snap::VECTOR),
            state: le32(b, snap::STATE),
            error: le64(b, snap::ERROR),
            rip: le64(b, snap::RIP),
            cr2: le64(b, snap::CR2),
            ctl_entry: le64(b, snap::CTL_ENTRY),
            ctl_after: le64(b, snap::CTL_AFTER),
            rsp: le64(b, snap::RSP),
            filter: self
                .filter
                .map(|_| le64(b, snap::VALUES + 8 * (self.geometry.nr_values - 1))),
            bts: self.bts.map(|_| BtsSnap {
                ds_area: le64(b, snap::DS_AREA),
                index: le64(b, snap::BTS_INDEX),
                slot: le32(b, snap::BTS_SLOT),
                state: le32(b, snap::BTS_STATE),
                base: le64(b, snap::BTS_BASE),
            }),
            ler: self.ler.map(|_| {
                let at = snap::VALUES + 8 * self.layout.values();
                (le64(b, at), le64(b, at + 8))
            }),
            sealed: match stored {
                0 => None,
                s => Some(s == checksum(b, snap::CHECKSUM)),
            },
            raw: &b[snap::VALUES..],
        }
    }
}

/// One snapshot as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotView<'a> {
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
    /// Interrupted stack pointer.
    pub rsp: u64,
    /// The filter MSR's value at the capture (when the header names a filter MSR).
    pub filter: Option<u64>,
    /// The BTS fields (when the area has BTS).
    pub bts: Option<BtsSnap>,
    /// The last exception record's raw FROM and TO values at the capture (when the header names
    /// its MSRs; [`crate::record::last_exception`] decodes them).
    pub ler: Option<(u64, u64)>,
    /// `None`: not sealed (the oops printer seals the snapshot it prints); else whether the
    /// checksum matches.
    pub sealed: Option<bool>,
    /// The raw values, little-endian u64s.
    pub raw: &'a [u8],
}

impl SnapshotView<'_> {
    /// Raw value `i`.
    pub fn value(&self, i: usize) -> u64 {
        le64(self.raw, 8 * i)
    }
}
