// SPDX-License-Identifier: GPL-2.0

//! Intel Branch Trace Store (BTS): what the hardware does with the debug store (DS) save area
//! and the BTS buffer in memory at each taken branch, written from the Intel SDM vol. 3B
//! independently of lbr-dump. Section numbers are those of the SDM editions that put "Debug,
//! Branch Profile, TSC, and Resource Monitoring Features" in chapter 17 (earlier editions: 16 or
//! 18; the titles are stable):
//! - 17.4.1 "IA32_DEBUGCTL MSR": TR (bit 6) enables branch trace messages, BTS (bit 7) stores
//!   them in the BTS buffer, BTINT (bit 8) "when set, the BTS facilities generate an interrupt
//!   when the BTS buffer is full. When clear, BTMs are logged to the BTS buffer in a circular
//!   fashion", BTS_OFF_OS (bit 9) "BTS or BTM is skipped if CPL is 0", BTS_OFF_USR (bit 10)
//!   "skipped if CPL is greater than 0".
//! - 17.4.5 "Branch Trace Store (BTS)" and 17.4.9 "BTS and DS Save Area": CPUID.1:EDX[21] (DS)
//!   says the DS mechanism exists; IA32_DS_AREA (0x600) holds the linear address of the DS
//!   buffer management area; BTS availability is IA32_MISC_ENABLE bit 11 clear.
//! - 17.4.9.1 "64-Bit Format of the DS Save Area" (CPUID.1:ECX[2], DTES64): the management area
//!   is quadwords, BTS buffer base at 0x0, BTS index at 0x8, BTS absolute maximum at 0x10, BTS
//!   interrupt threshold at 0x18 (then the PEBS fields, not emulated); a branch record is 24
//!   bytes: last branch from (0x0), last branch to (0x8), and a quadword at 0x10 whose bit 4 says
//!   whether the branch was predicted ("the branch predicted bit is not supported by Intel Core
//!   microarchitecture or Intel Atom microarchitecture"). "The 64-bit record formats for BTS and
//!   PEBS apply to DS save area for all operating modes."
//! - 17.4.9 field definitions: the buffer base "should point to a natural doubleword boundary";
//!   the index is "the linear address of the first byte of the next BTS record to be written
//!   to"; the absolute maximum is "the linear address of the next byte past the end of the BTS
//!   buffer"; the interrupt threshold is "the linear address of the BTS record on which an
//!   interrupt is to be generated".
//! - 17.4.9.2 "Setting Up the DS Save Area": the pages must stay present ("the operating system
//!   cannot do lazy page-table entry propagation for these pages"); "the base of the buffer must
//!   be aligned on a doubleword boundary".
//! - 17.4.9.3 "Setting Up the BTS Buffer", notes: "If the buffer size is set to less than the
//!   minimum allowable value (i.e. BTS absolute maximum < 1 + size of BTS record), the results of
//!   BTS is undefined"; "In order to prevent generating an interrupt, when working with circular
//!   BTS buffer, SW need to set BTS interrupt threshold to a value greater than BTS absolute
//!   maximum ... It's not enough to clear the BTINT flag itself only."
//! - 17.4.9.4 "Setting Up CPL-Qualified BTS" (CPUID.1:ECX[4], DS-CPL), table "CPL-Qualified
//!   Branch Trace Store Encodings": TR=1 BTS=1 with BTS_OFF_OS=BTS_OFF_USR=1 "generate BTMs but
//!   do not store BTMs".
//!
//! Choices where the SDM leaves room (also in the README):
//! - The ring a branch is filtered by is the ring it is taken in (the CPL while the branch, or
//!   the interrupted instruction, executes), taken from the `from` address (upper canonical half:
//!   ring 0). The kernel's BTS drain (intel_pmu_drain_bts_buffer() in arch/x86/events/intel/ds.c)
//!   says "BTS leaks kernel addresses in branches across the cpl boundary, such as traps or
//!   system calls" under exclude_kernel (BTS_OFF_OS): a trap or system call taken in user mode is
//!   stored, with its kernel target. (The LBR filters use the ring the branch ends in: the SDM's
//!   LBR_SELECT wording.)
//! - The index wraps as soon as the record just written leaves no room for a whole next one
//!   before the absolute maximum (`index + 24 > maximum`): with the usual maximum, base + n * 24,
//!   bts_index reads base right after the n-th record; with the SDM's "multiple of the record
//!   size plus 1", the same. A record is never written across the maximum.
//! - The interrupt is due when the index reaches or passes the threshold (the kernel's 2008 ds.c:
//!   "interrupt occurs when write pointer passes interrupt pointer"), whatever BTINT says (the
//!   SDM's note above). The emulator cannot raise the PMI: it logs `would-interrupt`.
//! - With BTINT set and no room left (index + 24 > maximum), the buffer is full: the SDM says
//!   only that the interrupt comes "when the BTS buffer is full"; records are dropped (and
//!   counted) until software makes room.
//! - Misprogramming the SDM calls undefined or "must not": an absolute maximum that leaves no
//!   room for one record: nothing is written; an index outside [base, maximum]: the index is
//!   taken back to the base first (BTINT clear) or nothing is written (BTINT set). A DS area or
//!   buffer base that is not doubleword-aligned, or an index that is not a whole number of
//!   records from the base, is used as given. Each is reported (`bts-misprogrammed`).
//! - A DS area or record the vCPU cannot translate (not mapped) is a fault the real part would
//!   take at an arbitrary instruction; the emulator cannot raise it: it reports `would-fault`
//!   and writes nothing.

use crate::classify::Branch;

/// IA32_DS_AREA.
pub const MSR_DS_AREA: u32 = 0x600;
/// IA32_MISC_ENABLE.
pub const MSR_MISC_ENABLE: u32 = 0x1a0;
/// IA32_MISC_ENABLE bit 11: BTS unavailable.
pub const MISC_BTS_UNAVAILABLE: u64 = 1 << 11;
/// IA32_MISC_ENABLE bit 12: PEBS unavailable (PEBS is never emulated).
pub const MISC_PEBS_UNAVAILABLE: u64 = 1 << 12;

/// IA32_DEBUGCTL bits of the BTS facility.
pub const TR: u64 = 1 << 6;
pub const BTS: u64 = 1 << 7;
pub const BTINT: u64 = 1 << 8;
pub const BTS_OFF_OS: u64 = 1 << 9;
pub const BTS_OFF_USR: u64 = 1 << 10;

/// Size of a 64-bit BTS record.
pub const RECORD_SIZE: u64 = 24;
/// The third quadword's "branch predicted" bit.
pub const PREDICTED: u64 = 1 << 4;

/// Guest memory as the vCPU sees it (linear addresses, its current page tables).
pub trait Memory {
    /// Fills `buf` from `addr`; false if some byte cannot be read (not mapped).
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool;
    /// Writes `data` at `addr`; false if some byte cannot be written (not mapped).
    fn write(&mut self, addr: u64, data: &[u8]) -> bool;
}

/// The BTS fields of the DS buffer management area (64-bit format).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    pub base: u64,
    pub index: u64,
    pub max: u64,
    pub threshold: u64,
}

impl Fields {
    /// Reads them from the DS area at `area`.
    pub fn read(mem: &mut impl Memory, area: u64) -> Option<Fields> {
        let mut b = [0u8; 32];
        if !mem.read(area, &mut b) {
            return None;
        }
        let q = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        Some(Fields {
            base: q(0),
            index: q(1),
            max: q(2),
            threshold: q(3),
        })
    }
}

/// The 24 bytes of the record of `b`. `predicted_bit`: the model has the "branch predicted" bit
/// (not Intel Core and Intel Atom microarchitectures); the emulator's convention for which
/// branches are mispredicted is the LBR one ([`Branch::mispredicted`]).
pub fn encode(b: &Branch, predicted_bit: bool) -> [u8; 24] {
    let flags = flags(b, predicted_bit);
    let mut r = [0u8; 24];
    r[..8].copy_from_slice(&b.from.to_le_bytes());
    r[8..16].copy_from_slice(&b.to.to_le_bytes());
    r[16..].copy_from_slice(&flags.to_le_bytes());
    r
}

/// The third quadword of the record of `b` (see [`encode`]).
pub fn flags(b: &Branch, predicted_bit: bool) -> u64 {
    if predicted_bit && !b.mispredicted() {
        PREDICTED
    } else {
        0
    }
}

/// A record as it was stored: the three quadwords written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    pub from: u64,
    pub to: u64,
    pub flags: u64,
}

/// The most `bts_recent=N` accepts: 1 Mi records (24 MiB of host memory per vCPU).
pub const RECENT_MAX: usize = 1 << 20;

/// `bts_recent=N`: the newest N records one vCPU stored, kept by the emulator (not in guest
/// memory) across recording periods and buffer swaps, and how many it stored in all since the
/// emulator started. Only records written to the buffer count: none dropped (a full buffer, an
/// issue) or filtered out by ring. The ground truth for what a guest's BTS buffer holds,
/// however often it wrapped or was swapped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recent {
    /// N (0: off).
    cap: usize,
    ring: std::collections::VecDeque<Stored>,
    total: u64,
}

impl Recent {
    /// A ring of the newest `cap` records (0: keeps nothing, counts nothing).
    pub fn new(cap: usize) -> Recent {
        Recent {
            cap,
            ..Recent::default()
        }
    }

    /// A ring of `cap` that holds `records` (oldest first) and counted `total` stores, as a
    /// saved state gave them (`load=`). None if they cannot be one: more records than `cap`, or
    /// than `total`.
    pub fn restored(cap: usize, records: Vec<Stored>, total: u64) -> Option<Recent> {
        if records.len() > cap || records.len() as u64 > total || (cap == 0 && total != 0) {
            return None;
        }
        Some(Recent {
            cap,
            ring: records.into(),
            total,
        })
    }

    /// Is it on (N > 0)?
    pub fn on(&self) -> bool {
        self.cap > 0
    }

    /// A record was stored.
    pub fn push(&mut self, r: Stored) {
        if self.cap == 0 {
            return;
        }
        if self.ring.len() == self.cap {
            self.ring.pop_front();
        }
        self.ring.push_back(r);
        self.total += 1;
    }

    /// The records kept, oldest first.
    pub fn records(&self) -> impl ExactSizeIterator<Item = &Stored> {
        self.ring.iter()
    }

    /// Records stored since the emulator started (kept or not).
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// Something the emulated BTS met while storing a record, reported in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issue {
    /// The DS area could not be read at this address: a fault on the real part.
    ReadFault(u64),
    /// The record or the index could not be written at this address: a fault on the real part.
    WriteFault(u64),
    /// IA32_DS_AREA is not doubleword-aligned (SDM 17.4.9.2: must be). Used as given.
    AreaMisaligned,
    /// The buffer base is not doubleword-aligned (SDM 17.4.9: should be). Used as given.
    BaseMisaligned,
    /// The absolute maximum leaves no room for one record after the base (SDM 17.4.9.3:
    /// undefined). Nothing is written.
    TooSmall,
    /// The index is outside [base, maximum]. BTINT clear: taken back to the base; BTINT set:
    /// nothing is written.
    IndexOutside,
    /// The index is not a whole number of records from the base. Used as given.
    IndexOffRecord,
    /// BTINT set and no room left before the maximum: the record is dropped.
    Full,
}

impl Issue {
    /// The log's name for it: `would-fault` for a fault, `bts-full`, or `bts-misprogrammed`.
    pub fn event(self) -> &'static str {
        match self {
            Issue::ReadFault(_) | Issue::WriteFault(_) => "would-fault",
            Issue::Full => "bts-full",
            _ => "bts-misprogrammed",
        }
    }

    /// A short name of the issue for the log's `reason` / `op`.
    pub fn name(self) -> &'static str {
        match self {
            Issue::ReadFault(_) => "ds-read",
            Issue::WriteFault(_) => "bts-write",
            Issue::AreaMisaligned => "ds-area-misaligned",
            Issue::BaseMisaligned => "base-misaligned",
            Issue::TooSmall => "maximum-too-small",
            Issue::IndexOutside => "index-outside-buffer",
            Issue::IndexOffRecord => "index-not-on-a-record",
            Issue::Full => "full",
        }
    }
}

/// What one store did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The fields as read before the store (None if the DS area could not be read).
    pub fields: Option<Fields>,
    /// Where the record was written (None: not written).
    pub at: Option<u64>,
    /// bts_index after the store (as written back to the DS area).
    pub index: u64,
    /// The index went back to the base after this record (circular buffer).
    pub wrapped: bool,
    /// The index reached or passed the interrupt threshold with this record.
    pub interrupt: bool,
    /// The first issue met, if any.
    pub issue: Option<Issue>,
}

/// Stores the record of `b` as the hardware does, the DS area being at `area` and BTINT as
/// `btint` says: reads the BTS fields, writes the record at bts_index, advances the index (back
/// to the base when the buffer is full and BTINT is clear) and writes it back.
pub fn store(
    mem: &mut impl Memory,
    area: u64,
    b: &Branch,
    btint: bool,
    predicted_bit: bool,
) -> Outcome {
    let mut out = Outcome {
        fields: None,
        at: None,
        index: 0,
        wrapped: false,
        interrupt: false,
        issue: None,
    };
    let note = |out: &mut Outcome, i: Issue| {
        out.issue.get_or_insert(i);
    };
    if area % 4 != 0 {
        note(&mut out, Issue::AreaMisaligned);
    }
    let Some(f) = Fields::read(mem, area) else {
        out.issue = Some(Issue::ReadFault(area));
        return out;
    };
    out.fields = Some(f);
    out.index = f.index;
    if f.base % 4 != 0 {
        note(&mut out, Issue::BaseMisaligned);
    }
    // The last address at which a whole record fits.
    let Some(last) = f.max.checked_sub(RECORD_SIZE).filter(|&l| l >= f.base) else {
        note(&mut out, Issue::TooSmall);
        return out;
    };
    let mut index = f.index;
    if index < f.base || index > f.max {
        note(&mut out, Issue::IndexOutside);
        if btint {
            return out;
        }
        index = f.base;
    } else if index > last {
        // No room left: the state a full non-circular buffer is left in, or one software set.
        if btint {
            note(&mut out, Issue::Full);
            return out;
        }
        index = f.base;
    } else if (index - f.base) % RECORD_SIZE != 0 {
        note(&mut out, Issue::IndexOffRecord);
    }
    if !mem.write(index, &encode(b, predicted_bit)) {
        out.issue = Some(Issue::WriteFault(index));
        return out;
    }
    out.at = Some(index);
    let next = index + RECORD_SIZE; // index <= last < max: no overflow
    out.interrupt = index < f.threshold && next >= f.threshold;
    let next = if next > last && !btint {
        out.wrapped = true;
        f.base
    } else {
        next
    };
    if !mem.write(area + 8, &next.to_le_bytes()) {
        out.issue = Some(Issue::WriteFault(area + 8));
        return out;
    }
    out.index = next;
    out
}

/// One recording period's BTS figures (since TR and BTS were last both switched on), for the
/// ground truth at a freeze: the branches seen, the records stored, how often the index went
/// back to the base, the records dropped (an issue, a full buffer), and the index when the
/// period began (None if the DS area could not be read then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub seen: u64,
    pub stored: u64,
    pub wraps: u64,
    pub dropped: u64,
    pub index_at_on: Option<u64>,
}

/// One BTS recording period's cost, with `cost=on` (the hook of issue 14 item 4's BTS cost
/// report): `insns`, guest instructions executed since TR and BTS were switched on (the plugin
/// sets it at the freeze from its instruction counter); and what the emulated hardware did for
/// the records: `reads` of the DS save area's BTS fields (one per branch stored or attempted),
/// `stores` to memory (the record, and bts_index written back) and the bytes they wrote.
/// Instructions per branch are `insns / records`, stores per branch `stores / records`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BtsTally {
    pub insns: u64,
    pub records: u64,
    pub reads: u64,
    pub stores: u64,
    pub bytes: u64,
}

impl BtsTally {
    /// Counts what one store ([`store`]) did.
    pub fn add(&mut self, o: &Outcome) {
        self.reads += 1;
        if o.at.is_some() {
            self.records += 1;
            self.stores += 1;
            self.bytes += RECORD_SIZE;
            if !matches!(o.issue, Some(Issue::WriteFault(_))) {
                self.stores += 1;
                self.bytes += 8;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::classify::Kind;
    use std::collections::BTreeMap;

    /// Guest memory of 4 KiB pages, only those mapped readable.
    #[derive(Default)]
    pub(crate) struct FakeMem {
        pub pages: BTreeMap<u64, [u8; 4096]>,
        pub writes: u64,
    }

    impl FakeMem {
        pub fn map(&mut self, addr: u64, len: u64) {
            let mut p = addr & !0xfff;
            while p < addr + len {
                self.pages.entry(p).or_insert([0; 4096]);
                p += 4096;
            }
        }
        pub fn q(&mut self, addr: u64) -> u64 {
            let mut b = [0; 8];
            assert!(self.read(addr, &mut b));
            u64::from_le_bytes(b)
        }
        pub fn set_q(&mut self, addr: u64, v: u64) {
            assert!(self.write(addr, &v.to_le_bytes()));
        }
        fn mapped(&self, addr: u64, len: usize) -> bool {
            (0..len as u64).all(|i| self.pages.contains_key(&((addr + i) & !0xfff)))
        }
    }

    impl Memory for FakeMem {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
            if !self.mapped(addr, buf.len()) {
                return false;
            }
            for (i, b) in buf.iter_mut().enumerate() {
                let a = addr + i as u64;
                *b = self.pages[&(a & !0xfff)][(a & 0xfff) as usize];
            }
            true
        }
        fn write(&mut self, addr: u64, data: &[u8]) -> bool {
            if !self.mapped(addr, data.len()) {
                return false;
            }
            self.writes += 1;
            for (i, b) in data.iter().enumerate() {
                let a = addr + i as u64;
                self.pages.get_mut(&(a & !0xfff)).unwrap()[(a & 0xfff) as usize] = *b;
            }
            true
        }
    }

    pub(crate) const AREA: u64 = 0xffff_8880_0100_0000;
    pub(crate) const BUF: u64 = 0xffff_8880_0200_0000;

    /// A DS area at AREA whose buffer at BUF holds `n` records, index at the base, the threshold
    /// past the maximum (a circular buffer that interrupts nothing, as the SDM asks).
    pub(crate) fn setup(n: u64) -> FakeMem {
        let mut m = FakeMem::default();
        m.map(AREA, 4096);
        m.map(BUF, n * RECORD_SIZE);
        for (i, v) in [BUF, BUF, BUF + n * RECORD_SIZE, BUF + n * RECORD_SIZE + 1]
            .into_iter()
            .enumerate()
        {
            m.set_q(AREA + 8 * i as u64, v);
        }
        m
    }

    fn br(i: u64, kind: Kind) -> Branch {
        Branch {
            from: 0xffff_ffff_8100_0000 + 0x10 * i,
            to: 0xffff_ffff_8200_0000 + 0x10 * i,
            kind,
            cycles: 0,
        }
    }

    /// The record at `at`, read back: (from, to, flags).
    fn rec(m: &mut FakeMem, at: u64) -> (u64, u64, u64) {
        (m.q(at), m.q(at + 8), m.q(at + 16))
    }

    #[test]
    fn record_layout_by_hand() {
        // SDM figure "64-bit Branch Trace Record Format": from at 0, to at 8, bit 4 of the
        // quadword at 16 set for a predicted branch.
        let jmp = br(0, Kind::JmpRel);
        let r = encode(&jmp, true);
        assert_eq!(&r[..8], &0xffff_ffff_8100_0000u64.to_le_bytes());
        assert_eq!(&r[8..16], &0xffff_ffff_8200_0000u64.to_le_bytes());
        assert_eq!(&r[16..], &[0x10, 0, 0, 0, 0, 0, 0, 0]);
        // A return is mispredicted by the emulator's convention: bit 4 clear.
        assert_eq!(&encode(&br(0, Kind::Ret), true)[16..], &[0; 8]);
        // Intel Core / Atom microarchitectures have no predicted bit.
        assert_eq!(&encode(&jmp, false)[16..], &[0; 8]);
    }

    #[test]
    fn records_then_wrap() {
        let mut m = setup(3);
        let mut wrapped = vec![];
        for i in 0..4 {
            let o = store(&mut m, AREA, &br(i, Kind::JmpRel), false, true);
            assert_eq!(o.issue, None);
            wrapped.push(o.wrapped);
            assert_eq!(o.index, m.q(AREA + 8), "the index is written back");
        }
        // Records 0, 1, 2 fill the buffer; the index goes back to the base right after record 2
        // (it reached the maximum); record 3 overwrites record 0.
        assert_eq!(wrapped, [false, false, true, false]);
        assert_eq!(m.q(AREA + 8), BUF + RECORD_SIZE);
        assert_eq!(rec(&mut m, BUF).0, br(3, Kind::JmpRel).from);
        assert_eq!(
            rec(&mut m, BUF + 24),
            (br(1, Kind::JmpRel).from, br(1, Kind::JmpRel).to, 0x10)
        );
        assert_eq!(rec(&mut m, BUF + 48).1, br(2, Kind::JmpRel).to);
        // The other fields are never written.
        assert_eq!(m.q(AREA), BUF);
        assert_eq!(m.q(AREA + 16), BUF + 72);
        assert_eq!(m.q(AREA + 24), BUF + 73);
    }

    #[test]
    fn wrap_with_the_sdm_plus_one_maximum() {
        // "a multiple of the BTS record size plus 1": the same two records, then the base.
        let mut m = setup(2);
        m.set_q(AREA + 16, BUF + 2 * RECORD_SIZE + 1);
        let o: Vec<_> = (0..3)
            .map(|i| store(&mut m, AREA, &br(i, Kind::Jcc), false, true))
            .collect();
        assert_eq!(
            o.iter().map(|o| o.at).collect::<Vec<_>>(),
            [Some(BUF), Some(BUF + 24), Some(BUF)]
        );
        assert!(o[1].wrapped && !o[0].wrapped);
        assert!(m.q(BUF + 48) == 0, "nothing written at or past the maximum");
    }

    #[test]
    fn btint_stops_at_the_maximum_and_interrupts_at_the_threshold() {
        let mut m = setup(3);
        m.set_q(AREA + 24, BUF + 2 * RECORD_SIZE); // the interrupt on the third record's place
        let o: Vec<_> = (0..4)
            .map(|i| store(&mut m, AREA, &br(i, Kind::CallRel), true, true))
            .collect();
        assert_eq!(
            o.iter().map(|o| o.interrupt).collect::<Vec<_>>(),
            [false, true, false, false]
        );
        assert_eq!(o.iter().map(|o| o.wrapped).collect::<Vec<_>>(), [false; 4]);
        assert_eq!(o[2].at, Some(BUF + 48));
        assert_eq!(
            m.q(AREA + 8),
            BUF + 72,
            "full: the index stays at the maximum"
        );
        assert_eq!((o[3].at, o[3].issue), (None, Some(Issue::Full)));
        assert_eq!(
            rec(&mut m, BUF).0,
            br(0, Kind::CallRel).from,
            "not overwritten"
        );
    }

    #[test]
    fn a_threshold_inside_a_circular_buffer_still_interrupts() {
        // SDM 17.4.9.3's note: clearing BTINT is not enough; one interrupt per pass.
        let mut m = setup(2);
        m.set_q(AREA + 24, BUF + RECORD_SIZE);
        let n = (0..6)
            .filter(|&i| store(&mut m, AREA, &br(i, Kind::Jcc), false, true).interrupt)
            .count();
        assert_eq!(n, 3);
    }

    #[test]
    fn misprogramming() {
        let b = br(0, Kind::JmpRel);
        // Index beyond the maximum: back to the base (BTINT clear), nothing written (set).
        let mut m = setup(2);
        m.set_q(AREA + 8, BUF + 0x1000);
        let o = store(&mut m, AREA, &b, false, true);
        assert_eq!(
            (o.issue, o.at, o.index),
            (Some(Issue::IndexOutside), Some(BUF), BUF + 24)
        );
        m.set_q(AREA + 8, BUF - 24);
        let o = store(&mut m, AREA, &b, true, true);
        assert_eq!((o.issue, o.at), (Some(Issue::IndexOutside), None));
        assert_eq!(m.q(AREA + 8), BUF - 24, "unchanged");
        // A maximum with no room for one record: nothing written.
        let mut m = setup(2);
        m.set_q(AREA + 16, BUF + 23);
        let before = m.writes;
        let o = store(&mut m, AREA, &b, false, true);
        assert_eq!(
            (o.issue, o.at, m.writes),
            (Some(Issue::TooSmall), None, before)
        );
        // Misaligned base / area / index: used as given, reported.
        let mut m = setup(4);
        m.set_q(AREA, BUF + 2);
        m.set_q(AREA + 8, BUF + 2);
        let o = store(&mut m, AREA, &b, false, true);
        assert_eq!(
            (o.issue, o.at),
            (Some(Issue::BaseMisaligned), Some(BUF + 2))
        );
        let mut m = setup(4);
        m.set_q(AREA + 8, BUF + 8);
        let o = store(&mut m, AREA, &b, false, true);
        assert_eq!(
            (o.issue, o.at),
            (Some(Issue::IndexOffRecord), Some(BUF + 8))
        );
        let mut m = setup(4);
        m.map(AREA + 4096, 1);
        for i in 0..4 {
            let v = m.q(AREA + 8 * i);
            m.set_q(AREA + 2 + 8 * i, v);
        }
        let o = store(&mut m, AREA + 2, &b, false, true);
        assert_eq!((o.issue, o.at), (Some(Issue::AreaMisaligned), Some(BUF)));
        assert_eq!(m.q(AREA + 2 + 8), BUF + 24);
    }

    #[test]
    fn unmapped_area_and_buffer_fault() {
        let b = br(0, Kind::JmpRel);
        let mut m = setup(2);
        let o = store(&mut m, AREA + 0x10_0000, &b, false, true);
        assert_eq!(
            (o.issue, o.fields),
            (Some(Issue::ReadFault(AREA + 0x10_0000)), None)
        );
        // The buffer's second record would cross into an unmapped page.
        let mut m = setup(1);
        m.set_q(AREA, BUF + 4096 - 24);
        m.set_q(AREA + 8, BUF + 4096 - 24);
        m.set_q(AREA + 16, BUF + 4096 + 24);
        assert_eq!(
            store(&mut m, AREA, &b, false, true).at,
            Some(BUF + 4096 - 24)
        );
        let o = store(&mut m, AREA, &b, false, true);
        assert_eq!((o.issue, o.at), (Some(Issue::WriteFault(BUF + 4096)), None));
        assert_eq!(
            m.q(AREA + 8),
            BUF + 4096,
            "the index is not advanced past a faulting record"
        );
        assert_eq!(Issue::WriteFault(0).event(), "would-fault");
    }

    #[test]
    fn swapping_the_buffer_by_plain_stores_is_seen_at_the_next_record() {
        // The fields are read at every record, so a buffer swapped in by storing to the DS area
        // (no MSR write) takes the next record.
        const SPARE: u64 = 0xffff_8880_0300_0000;
        let mut m = setup(4);
        m.map(SPARE, 4 * RECORD_SIZE);
        store(&mut m, AREA, &br(0, Kind::JmpRel), false, true);
        m.set_q(AREA, SPARE);
        m.set_q(AREA + 8, SPARE);
        m.set_q(AREA + 16, SPARE + 4 * RECORD_SIZE);
        let o = store(&mut m, AREA, &br(1, Kind::JmpRel), false, true);
        assert_eq!(o.at, Some(SPARE));
        assert_eq!(
            rec(&mut m, BUF).0,
            br(0, Kind::JmpRel).from,
            "the old buffer is kept"
        );
        assert_eq!(m.q(BUF + 24), 0);
    }

    #[test]
    fn bts_tally() {
        let mut m = setup(2);
        let b = Branch {
            from: 0xffff_ffff_8100_0000,
            to: 0xffff_ffff_8100_0100,
            kind: Kind::Jcc,
            cycles: 0,
        };
        let mut t = BtsTally::default();
        for _ in 0..3 {
            let before = m.writes;
            let o = store(&mut m, AREA, &b, false, true);
            t.add(&o);
            assert_eq!(m.writes - before, 2, "one record and the index");
        }
        // A DS area that cannot be read: one read, nothing stored.
        t.add(&store(&mut m, 0x1000, &b, false, true));
        assert_eq!(
            t,
            BtsTally {
                insns: 0,
                records: 3,
                reads: 4,
                stores: 6,
                bytes: 3 * 32
            }
        );
    }
}
