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
//! 0x00    8     count: snapshots taken on this CPU, less the warnings' given back (the next
//!               goes to slot count % ring)
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
//!               entry, VECTOR_REPORT (0x101) at a report function's entry (its error code:
//!               where the capture's own record leaves it), VECTOR_NMI / VECTOR_REBOOT for a CPU
//!               stopped in a panic
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
    /// FRED: the hardware exceptions the FRED entry page's kernel stub captures (bit N: vector
    /// N); the chosen vectors. 0 with the IDT.
    pub const FRED_VECTORS: usize = 0xc0;
    /// Size of the structure.
    pub const SIZE: usize = 0xc8;
    /// Offset of the MSR list in the page.
    pub const MSR_LIST: usize = 0x100;
    /// Entries the MSR list has room for.
    pub const MSR_MAX: usize = (REPORT_IPS - MSR_LIST) / 4;
    /// Offset of the report int3 table in the page: for each report function whose entry has
    /// an int3 of lbr-dump's (a kprobe), the address after that int3, which the #BP stub
    /// compares the saved RIP with (0: an unused slot). Written while no gate points at a
    /// stub.
    pub const REPORT_IPS: usize = 0xf00;
    /// Entries of that table.
    pub const REPORT_SLOTS: usize = 32;
    /// The page the configuration and the MSR list fill.
    pub const PAGE: usize = 0x1000;
}

/// `struct capture_live` (asm/stubs.S `lbr_dump_live`): the counters the stubs write.
pub mod live {
    /// The last sequence number handed out (a locked add in every capture).
    pub const SEQ: usize = 0x00;
    /// 0 until a panic is captured, then the capturing CPU's number plus one (the panic
    /// trampoline claims it with a locked compare-and-exchange: one panic capture per arming),
    /// with bit [`KEXEC_CLAIM_BIT`] set if it was claimed at crash_kexec(). Such a claim is
    /// given back (0 again) at panic_reset(), where a crash_kexec() that returns ends.
    pub const PANIC_CPU: usize = 0x08;
    /// Set to 1 (xchg) by the first CPU whose stop trampoline switches the stop gates after a
    /// panic was claimed, 2 when it is done: only it opens and closes the stop switch's window;
    /// another waits for 2 (bounded).
    pub const GATES_SWITCHED: usize = 0x10;
    /// The sequence counter ([`SEQ`]) as it was when a claim taken at crash_kexec() was last
    /// given back, 0 if none was: panic snapshots numbered up to it are of a crash_kexec() that
    /// returned; a later claim's capture is numbered after it.
    pub const GIVEN_BACK: usize = 0x18;
    /// Size of the structure.
    pub const SIZE: usize = 0x20;
    /// The bit of [`PANIC_CPU`] that marks a claim taken at crash_kexec().
    pub const KEXEC_CLAIM_BIT: u32 = 63;
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
/// The snapshot `vector` of a capture at the entry of one of the kernel's report functions
/// (the `reports` parameter: kasan_report(), the UBSAN handlers, ...); its `error` field holds
/// where the capture's own record leaves the function (its int3, past ENDBR and any ftrace
/// site; or its call of the report trampoline, past ENDBR).
pub const VECTOR_REPORT: u32 = 0x101;
/// The snapshot `vector` of a warning's capture: #UD (a ud2, or the ud1 of WARN() with a
/// message; a CFI failure with `cfi=warn`).
pub const VECTOR_UD: u32 = 0x6;
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
/// Snapshot state: a report function's capture not kept yet (its slot is still its CPU's next:
/// the next report's capture there takes it, any other capture keeps it and takes the next).
pub const SNAP_PROVISIONAL: u32 = 0x20;

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

/// The most CPU slots a header may announce (the kernel's NR_CPUS limit).
pub const MAX_CPUS: usize = 8192;
/// The most snapshots per CPU a header may announce.
pub const MAX_RING: usize = 64;
/// The most BTS buffers per CPU a header may announce.
pub const MAX_BTS_POOL: usize = 16;
/// The largest BTS buffer a header may announce (the module allocates at most 4 MiB).
pub const MAX_BTS_SIZE: usize = 1 << 30;
