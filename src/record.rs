// SPDX-License-Identifier: GPL-2.0

//! Branch records: which MSRs the capture reads, and how their raw values decode.
//!
//! Pure code shared by the module (oops printer) and the decoder (`tools/lbr-decode`). The
//! capture stubs read a flat list of MSRs into a snapshot ([`capture_list`] builds it when the
//! feature is armed); [`Records`] turns the raw values back into branches, newest first. The
//! rules are the SDM's (vol. 3B, "Last Branch Recording") and the APM's (LbrExtV2), as the kernel
//! applies them in arch/x86/events/intel/lbr.c and amd/lbr.c.

use crate::facility::{msr, Flavour, LbrFormat, Recorder};

/// The most MSR values one snapshot holds: Arch LBR at depth 64 with FROM, TO and INFO.
pub const MAX_VALUES: usize = 3 * 64 + 1;

/// How a recorder's MSR values encode its branches: what the decoder needs to know about the
/// recorder that produced a snapshot (named apart from the snapshot area's `layout` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Intel model-specific LBR: values are TOS, FROM\[0..depth\], TO\[0..depth\], then
    /// INFO\[0..depth\] when `info`.
    IntelLegacy {
        /// LBR format (PERF_CAPABILITIES\[5:0\]).
        format: u8,
        /// Number of entries (a power of two).
        depth: u8,
        /// LBR_INFO MSRs are captured (formats 5 and 7).
        info: bool,
        /// The CPU has TSX: format 4's FROM bits 62:61 are in_tx/abort, not sign extension.
        tsx: bool,
    },
    /// Intel Arch LBR: FROM\[0..depth\], TO\[0..depth\], INFO\[0..depth\]; entry 0 newest.
    IntelArch {
        /// Number of entries.
        depth: u8,
    },
    /// AMD LbrExtV2: FROM\[0\], TO\[0\], FROM\[1\], ...; entry 0 newest.
    AmdLbrV2 {
        /// Number of entries.
        depth: u8,
    },
    /// AMD single record: LastBranchFromIP, LastBranchToIP.
    AmdSingle,
}

impl Encoding {
    /// The flavour of the recorder that produced the values.
    pub fn flavour(&self) -> Flavour {
        match self {
            Self::IntelLegacy { .. } => Flavour::IntelLbr,
            Self::IntelArch { .. } => Flavour::IntelArchLbr,
            Self::AmdLbrV2 { .. } => Flavour::AmdLbrV2,
            Self::AmdSingle => Flavour::AmdLbr,
        }
    }

    /// The encoding the dump header describes (flavour code, format, depth, flags: the inverse of
    /// [`Flavour::code`] and [`Encoding::codes`]); `None` for values no recorder has (a corrupt
    /// or foreign header).
    pub fn from_codes(flavour: u32, format: u32, depth: u32, flags: u32) -> Option<Self> {
        let depth = u8::try_from(depth).ok()?;
        let l = match Flavour::from_code(flavour)? {
            Flavour::IntelLbr => Self::IntelLegacy {
                // Formats 1-7: lbr-dump captures no other (see [`Unsupported`]).
                format: u8::try_from(format).ok().filter(|f| (1..=7).contains(f))?,
                depth,
                info: flags & LAYOUT_INFO != 0,
                tsx: flags & LAYOUT_TSX != 0,
            },
            Flavour::IntelArchLbr => Self::IntelArch { depth },
            Flavour::AmdLbrV2 => Self::AmdLbrV2 { depth },
            Flavour::AmdLbr => Self::AmdSingle,
        };
        (l.values() <= MAX_VALUES && l.depth() > 0).then_some(l)
    }

    /// (format, flags) for the dump header, the inverse of [`Encoding::from_codes`].
    pub fn codes(&self) -> (u32, u32) {
        match *self {
            Self::IntelLegacy {
                format, info, tsx, ..
            } => (
                u32::from(format),
                if info { LAYOUT_INFO } else { 0 } | if tsx { LAYOUT_TSX } else { 0 },
            ),
            _ => (0, 0),
        }
    }

    /// Number of records the layout holds.
    pub fn depth(&self) -> usize {
        match *self {
            Self::IntelLegacy { depth, .. }
            | Self::IntelArch { depth }
            | Self::AmdLbrV2 { depth } => depth as usize,
            Self::AmdSingle => 1,
        }
    }

    /// Number of raw values a snapshot holds.
    pub fn values(&self) -> usize {
        let d = self.depth();
        match *self {
            Self::IntelLegacy { info, .. } => 1 + if info { 3 * d } else { 2 * d },
            Self::IntelArch { .. } => 3 * d,
            Self::AmdLbrV2 { .. } => 2 * d,
            Self::AmdSingle => 2,
        }
    }
}

/// Header flag: LBR_INFO values follow FROM and TO.
pub const LAYOUT_INFO: u32 = 1 << 0;
/// Header flag: the CPU has TSX (format 4 flags are real).
pub const LAYOUT_TSX: u32 = 1 << 1;

/// Whether the CPU has transactional memory (CPUID.7.0:EBX HLE or RTM; the kernel's
/// `lbr_has_tsx`): legacy format 4's FROM bits 62:61 are then IN_TX and ABORT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tsx {
    /// No TSX: the bits are sign extension.
    Absent,
    /// TSX: the bits are flags.
    Present,
}

/// Why a recorder's records cannot be captured and decoded: the one-line reason the module gives
/// with -ENODEV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// CPUID.1:ECX.PDCM is clear: IA32_PERF_CAPABILITIES, which names the record format, does
    /// not exist.
    NoFormat,
    /// Format 0, LBR_FORMAT_32: one MSR per entry with the low 32 bits of each address.
    Format32,
    /// A format number the SDM does not define (8..=63).
    UnknownFormat(u8),
    /// A legacy depth that is not a power of two (the TOS arithmetic needs one).
    Depth(u8),
    /// CPUID offers no depth (Arch LBR leaf 0x1C, AMD leaf 0x80000022 report 0 entries).
    NoDepth,
}

impl core::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoFormat => f.write_str(
                "the LBR record format is unknown: CPUID.1:ECX.PDCM is clear, so \
                 IA32_PERF_CAPABILITIES, which holds it, does not exist",
            ),
            // SDM vol. 3B, IA32_PERF_CAPABILITIES.LBR_FMT 000000B "32-bit record format", the
            // MSR_LASTBRANCH_x layout of Core Solo and Core Duo: FROM in 31:0, TO in 63:32.
            Self::Format32 => f.write_str(
                "LBR format 0 keeps only the low 32 bits of each address (FROM in bits 31:0 and \
                 TO in 63:32 of one MSR, SDM IA32_PERF_CAPABILITIES.LBR_FMT 000000B): no 64-bit \
                 kernel address fits",
            ),
            Self::UnknownFormat(n) => write!(
                f,
                "LBR format {n} (IA32_PERF_CAPABILITIES[5:0]) is not one the SDM defines (0-7)"
            ),
            Self::Depth(d) => write!(f, "an LBR depth of {d} is not a power of two"),
            Self::NoDepth => f.write_str("CPUID offers no record depth (0 entries)"),
        }
    }
}

/// The encoding for a recorder, or why lbr-dump cannot capture its records.
pub fn encoding(recorder: &Recorder, tsx: Tsx) -> Result<Encoding, Unsupported> {
    Ok(match recorder {
        Recorder::IntelLegacy(l) => {
            let format = l.format.ok_or(Unsupported::NoFormat)?;
            match format {
                LbrFormat::Bits32 => return Err(Unsupported::Format32),
                LbrFormat::Unknown(n) => return Err(Unsupported::UnknownFormat(n)),
                _ => {}
            }
            if !l.depth.is_power_of_two() {
                return Err(Unsupported::Depth(l.depth));
            }
            Encoding::IntelLegacy {
                format: format.number(),
                depth: l.depth,
                info: l.info.is_some() && matches!(format, LbrFormat::Info | LbrFormat::Info2),
                tsx: tsx == Tsx::Present,
            }
        }
        // A depth of 0 (CPUID says no depth is supported) records nothing: no layout, so that
        // arming never builds an empty MSR list.
        Recorder::IntelArch(_) if recorder.depth() == 0 => return Err(Unsupported::NoDepth),
        Recorder::IntelArch(_) => Encoding::IntelArch {
            depth: recorder.depth(),
        },
        Recorder::AmdLbrV2 { depth: 0 } => return Err(Unsupported::NoDepth),
        Recorder::AmdLbrV2 { depth } => Encoding::AmdLbrV2 { depth: *depth },
        Recorder::AmdSingle => Encoding::AmdSingle,
    })
}

/// Fills `out` with the MSRs to read, in snapshot order; returns how many. `out` must hold
/// [`Encoding::values`] entries.
pub fn capture_list(recorder: &Recorder, layout: &Encoding, out: &mut [u32]) -> usize {
    let d = layout.depth() as u32;
    let mut n = 0;
    let mut push = |m: u32| {
        out[n] = m;
        n += 1;
    };
    match (recorder, layout) {
        (Recorder::IntelLegacy(l), Encoding::IntelLegacy { info, .. }) => {
            push(msr::LBR_TOS);
            (0..d).for_each(|i| push(l.from + i));
            (0..d).for_each(|i| push(l.to + i));
            if let (true, Some(base)) = (*info, l.info) {
                (0..d).for_each(|i| push(base + i));
            }
        }
        (_, Encoding::IntelArch { .. }) => {
            (0..d).for_each(|i| push(msr::ARCH_LBR_FROM_0 + i));
            (0..d).for_each(|i| push(msr::ARCH_LBR_TO_0 + i));
            (0..d).for_each(|i| push(msr::ARCH_LBR_INFO_0 + i));
        }
        (_, Encoding::AmdLbrV2 { .. }) => (0..d).for_each(|i| {
            push(msr::AMD_SAMP_BR_FROM + 2 * i);
            push(msr::AMD_SAMP_BR_FROM + 2 * i + 1);
        }),
        (_, Encoding::AmdSingle) => {
            push(msr::LAST_BRANCH_FROM_IP);
            push(msr::LAST_BRANCH_TO_IP);
        }
        _ => {}
    }
    n
}

/// Arch LBR branch types (INFO\[59:56\]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchType {
    /// Conditional jump.
    Jcc,
    /// Near indirect jump.
    IndJmp,
    /// Near relative jump.
    RelJmp,
    /// Near indirect call.
    IndCall,
    /// Near relative call.
    RelCall,
    /// Near return.
    Ret,
    /// Other (far branches, exceptions, interrupts), or a reserved code.
    Other(u8),
}

impl BranchType {
    fn from_code(c: u8) -> Self {
        match c {
            0 => Self::Jcc,
            1 => Self::IndJmp,
            2 => Self::RelJmp,
            3 => Self::IndCall,
            4 => Self::RelCall,
            5 => Self::Ret,
            c => Self::Other(c),
        }
    }

    /// Name in printed lines.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Jcc => "jcc",
            Self::IndJmp => "ind_jmp",
            Self::RelJmp => "jmp",
            Self::IndCall => "ind_call",
            Self::RelCall => "call",
            Self::Ret => "ret",
            Self::Other(_) => "other",
        }
    }

    /// Parses [`BranchType::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "jcc" => Self::Jcc,
            "ind_jmp" => Self::IndJmp,
            "jmp" => Self::RelJmp,
            "ind_call" => Self::IndCall,
            "call" => Self::RelCall,
            "ret" => Self::Ret,
            "other" => Self::Other(15),
            _ => return None,
        })
    }
}

/// One decoded branch. Flags the format does not have are `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Branch {
    /// Address of the branch instruction (or the interrupted one, for an exception).
    pub from: u64,
    /// Branch target.
    pub to: u64,
    /// Mispredicted.
    pub mispred: Option<bool>,
    /// Inside a TSX transaction.
    pub in_tx: Option<bool>,
    /// A TSX abort.
    pub abort: Option<bool>,
    /// Cycles since the previous record (when the format counts them and the count is valid).
    pub cycles: Option<u16>,
    /// Branch type (Arch LBR with CPUID.1C:ECX\[2\]).
    pub branch_type: Option<BranchType>,
    /// AMD: the branch was speculative (TO bit 62).
    pub spec: Option<bool>,
}

/// Sign-extends the low `bits` bits.
pub fn sign_extend(v: u64, bits: u32) -> u64 {
    let s = 64 - bits;
    (((v << s) as i64) >> s) as u64
}

/// Bits of LBR_INFO (legacy formats 5 and 7) and Arch LBR INFO (SDM vol. 3B "Last Branch
/// Recording": IA32_LBR_x_INFO).
mod info_bit {
    /// Mispredicted.
    pub(super) const MISPRED: u32 = 63;
    /// Inside a TSX transaction.
    pub(super) const IN_TX: u32 = 62;
    /// A TSX abort.
    pub(super) const ABORT: u32 = 61;
    /// Arch LBR: CYC_CNT is valid.
    pub(super) const CYC_CNT_VALID: u32 = 60;
    /// Arch LBR: BR_TYPE, bits 59:56.
    pub(super) const BR_TYPE_SHIFT: u32 = 56;
    pub(super) const BR_TYPE_MASK: u64 = 0xf;
}

/// Flag bits in a legacy FROM MSR (formats 3, 4 and 6; SDM "LBR stack" formats) and in an
/// LbrExtV2 FROM / TO (APM vol. 2 "Last Branch Stack Extension", kernel amd/lbr.c).
mod from_bit {
    /// Mispredicted (legacy formats 3, 4, 6; LbrExtV2 FROM).
    pub(super) const MISPRED: u32 = 63;
    /// Format 4 with TSX: inside a transaction.
    pub(super) const IN_TX: u32 = 62;
    /// Format 4 with TSX: an abort.
    pub(super) const ABORT: u32 = 61;
}

/// LbrExtV2 TO flag bits.
mod amd_to_bit {
    /// The entry is valid.
    pub(super) const VALID: u32 = 63;
    /// The branch was speculative.
    pub(super) const SPEC: u32 = 62;
    /// Erratum 1452: set on an entry that is not a branch.
    pub(super) const NOT_A_BRANCH: u32 = 61;
}

/// Format 6: cycles in TO bits 63:48.
const TIME_CYCLES_SHIFT: u32 = 48;
/// Format 4: the address is FROM bits 60:0, sign-extended (bits 62:61 are TSX flags or, without
/// TSX, sign extension: the kernel's lbr_from_signext_quirk).
const FORMAT4_ADDR_BITS: u32 = 61;

const fn bit(v: u64, n: u32) -> bool {
    v >> n & 1 != 0
}

/// A snapshot's raw values as [`records`] reads them, one at a time: a slice (the decoder), or
/// a view of the live area that the kernel's printer reads in place, so that printing from a
/// 8 KiB exception stack (a panic in an NMI handler) needs no copy of up to [`MAX_VALUES`].
pub trait Values {
    /// How many values there are.
    fn len(&self) -> usize;
    /// Value `i`; `i < len()`.
    fn at(&self, i: usize) -> u64;
    /// No values at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Values for [u64] {
    fn len(&self) -> usize {
        <[u64]>::len(self)
    }
    fn at(&self, i: usize) -> u64 {
        // PANIC: none for `i < len()`, the trait's contract.
        self[i]
    }
}

impl<const N: usize> Values for [u64; N] {
    fn len(&self) -> usize {
        N
    }
    fn at(&self, i: usize) -> u64 {
        // PANIC: none for `i < N`, the trait's contract.
        self[i]
    }
}

/// The branches of one snapshot, newest first.
pub struct Records<'a, V: Values + ?Sized = [u64]> {
    decode: Decode,
    depth: usize,
    values: &'a V,
    next: usize,
}

/// How [`Records`] reads its values: an [`Encoding`] with what it needs computed once.
#[derive(Clone, Copy)]
enum Decode {
    /// Intel legacy LBR, with its format's capabilities; `info`: LBR_INFO values follow TO.
    Legacy { caps: LegacyCaps, info: bool },
    /// Intel Arch LBR.
    Arch,
    /// AMD LbrExtV2.
    AmdV2,
    /// AMD single record.
    AmdSingle,
}

/// Decodes raw snapshot values. Returns `None` if `values` is shorter than the layout needs.
pub fn records<V: Values + ?Sized>(layout: Encoding, values: &V) -> Option<Records<'_, V>> {
    let decode = match layout {
        Encoding::IntelLegacy {
            format, info, tsx, ..
        } => Decode::Legacy {
            caps: LegacyCaps::of(format, tsx, info),
            info,
        },
        Encoding::IntelArch { .. } => Decode::Arch,
        Encoding::AmdLbrV2 { .. } => Decode::AmdV2,
        Encoding::AmdSingle => Decode::AmdSingle,
    };
    (values.len() >= layout.values()).then_some(Records {
        decode,
        depth: layout.depth(),
        values,
        next: 0,
    })
}

impl<V: Values + ?Sized> Iterator for Records<'_, V> {
    type Item = Branch;

    fn next(&mut self) -> Option<Branch> {
        let d = self.depth;
        let v = self.values;
        loop {
            let i = self.next;
            if i >= d {
                return None;
            }
            self.next += 1;
            let b = match self.decode {
                Decode::Legacy { caps, info } => {
                    // Entry i (0 = newest) is (TOS - i) mod depth.
                    let n = (v.at(0) as usize).wrapping_sub(i) & (d - 1);
                    // PANIC: none: `records()` checked `v.len() >= layout.values()`, which is
                    // 1 + 2d (+ d with INFO), and `n < d`.
                    let (from, to) = (v.at(1 + n), v.at(1 + d + n));
                    let info = info.then(|| v.at(1 + 2 * d + n));
                    let b = caps.decode(from, to, info);
                    if b.from == 0 && b.to == 0 {
                        self.next = d; // never written: nothing older is valid either
                        return None;
                    }
                    b
                }
                Decode::Arch => {
                    // PANIC: none: `v.len() >= 3d` and `i < d`.
                    let (from, to, inf) = (v.at(i), v.at(d + i), v.at(2 * d + i));
                    if from == 0 {
                        self.next = d; // SDM: FROM == 0 ends the valid records
                        return None;
                    }
                    Branch {
                        from,
                        to,
                        mispred: Some(bit(inf, info_bit::MISPRED)),
                        in_tx: Some(bit(inf, info_bit::IN_TX)),
                        abort: Some(bit(inf, info_bit::ABORT)),
                        cycles: bit(inf, info_bit::CYC_CNT_VALID).then_some(inf as u16),
                        branch_type: Some(BranchType::from_code(
                            (inf >> info_bit::BR_TYPE_SHIFT & info_bit::BR_TYPE_MASK) as u8,
                        )),
                        spec: None,
                    }
                }
                Decode::AmdV2 => {
                    // PANIC: none: `v.len() >= 2d` and `i < d`.
                    let (from, to) = (v.at(2 * i), v.at(2 * i + 1));
                    let (valid, spec) = (bit(to, amd_to_bit::VALID), bit(to, amd_to_bit::SPEC));
                    if !valid && !spec {
                        self.next = d; // empty entry
                        return None;
                    }
                    if bit(to, amd_to_bit::NOT_A_BRANCH) {
                        continue; // erratum 1452: not a branch (amd/lbr.c discards these)
                    }
                    Branch {
                        from: sign_extend(from, 58),
                        to: sign_extend(to, 58),
                        mispred: Some(bit(from, from_bit::MISPRED)),
                        spec: Some(spec),
                        ..Branch::default()
                    }
                }
                Decode::AmdSingle => {
                    // PANIC: none: `v.len() >= 2`.
                    if v.at(0) == 0 && v.at(1) == 0 {
                        return None;
                    }
                    Branch {
                        from: v.at(0),
                        to: v.at(1),
                        ..Branch::default()
                    }
                }
            };
            return Some(b);
        }
    }
}

/// The last exception record (Intel LER, AMD LastException; [`Recorder::last_exception`]) from
/// its FROM and TO values, as a [`Branch`] with the two addresses and no flags; `None` when both
/// are 0 (nothing recorded since the recorder was reset).
///
/// Intel legacy LBR: the SDM gives IA32_PERF_CAPABILITIES.LBR_FMT as "the format of the address
/// that is stored in the LBR stack" (vol. 3B, "LBR Stack and Intel 64 Processors") and describes
/// MSR_LER_FROM_LIP / TO_LIP only as the linear addresses of the last branch (vol. 4), so
/// lbr-dump reads no flag in them and takes the address out of whatever bits the format may use
/// for flags: FROM as a record's FROM, sign-extended above bit 62 for formats 3 and 6 (bit 63
/// the stack's mispredict flag), above bit 60 for format 4 (bits 62:61 TSX flags, or, on parts
/// without TSX, left clear by the hardware: Xen's vmx.c `lbr_tsx_fixup_check()` found
/// MSR_LER_FROM_LIP "similarly impacted" as the stack's FROM MSRs by Haswell erratum HSM182 and
/// Broadwell BDM127); TO sign-extended above bit 47 for format 6 (the stack's TO[63:48] hold
/// cycles) and above bit 60 for format 4 (Broadwell erratum BDF93: MSR_LER_TO_LIP bits 63:61 may
/// not equal bit 47, "software should sign extend the MSR"). A canonical address comes out of
/// each of these unchanged (for format 6 a 4-level one: Goldmont and Goldmont Plus have no
/// 5-level paging). Intel Arch LBR (IA32_LER_FROM_IP / TO_IP) and the AMD single record
/// (LastIntFromIP / ToIP): the addresses as they are, like their records'.
pub fn last_exception(layout: Encoding, from: u64, to: u64) -> Option<Branch> {
    if from == 0 && to == 0 {
        return None;
    }
    let (from, to) = match layout {
        Encoding::IntelLegacy {
            format, tsx, info, ..
        } => {
            let caps = LegacyCaps::of(format, tsx, info);
            let to_bits = match format {
                6 => TIME_CYCLES_SHIFT,
                4 => FORMAT4_ADDR_BITS,
                _ => 64,
            };
            (sign_extend(from, caps.from_bits), sign_extend(to, to_bits))
        }
        Encoding::IntelArch { .. } | Encoding::AmdLbrV2 { .. } | Encoding::AmdSingle => (from, to),
    };
    Some(Branch {
        from,
        to,
        ..Branch::default()
    })
}

/// What a legacy format's records hold, computed once per snapshot from the format number (the
/// kernel's `lbr_has_info`, `lbr_from_flags` and `lbr_to_cycles`, set by
/// `intel_pmu_lbr_init_*()`), so that decoding a record matches on no format number. SDM vol. 3B
/// "LBR Stack" (IA32_PERF_CAPABILITIES.LBR_FMT) and "Filtering of Last Branch Records".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LegacyCaps {
    /// FROM's address bits, sign-extended above: 63 with a mispredict bit (3, 6), 61 with the
    /// TSX bits (4), else 64.
    from_bits: u32,
    /// FROM bit 63 is the mispredict flag (3, 4, 6).
    from_mispred: bool,
    /// FROM bits 62:61 are IN_TX and ABORT (4 on a CPU with TSX).
    from_tsx: bool,
    /// TO bits 63:48 count cycles and TO's address is bits 47:0, sign-extended (6).
    to_cycles: bool,
    /// LBR_INFO was captured and holds mispredict and cycles (5, 7).
    info: bool,
    /// LBR_INFO bits 62:61 are IN_TX and ABORT (5; 7 has no TSX bits).
    info_tsx: bool,
}

impl LegacyCaps {
    fn of(format: u8, tsx: bool, info: bool) -> Self {
        let from_bits = match format {
            3 | 6 => 63,
            4 => FORMAT4_ADDR_BITS,
            _ => 64,
        };
        LegacyCaps {
            from_bits,
            from_mispred: matches!(format, 3 | 4 | 6),
            from_tsx: format == 4 && tsx,
            to_cycles: format == 6,
            info: info && matches!(format, 5 | 7),
            info_tsx: format == 5,
        }
    }

    /// Decodes one record's MSR values (`info`: its LBR_INFO value, when captured).
    fn decode(&self, from: u64, to: u64, info: Option<u64>) -> Branch {
        let mut b = Branch {
            from: sign_extend(from, self.from_bits),
            to,
            ..Branch::default()
        };
        if self.from_mispred {
            b.mispred = Some(bit(from, from_bit::MISPRED));
        }
        if self.from_tsx {
            b.in_tx = Some(bit(from, from_bit::IN_TX));
            b.abort = Some(bit(from, from_bit::ABORT));
        }
        if self.to_cycles {
            b.to = sign_extend(to, TIME_CYCLES_SHIFT);
            b.cycles = Some((to >> TIME_CYCLES_SHIFT) as u16);
        }
        if let (true, Some(inf)) = (self.info, info) {
            b.mispred = Some(bit(inf, info_bit::MISPRED));
            b.cycles = Some(inf as u16);
            if self.info_tsx {
                b.in_tx = Some(bit(inf, info_bit::IN_TX));
                b.abort = Some(bit(inf, info_bit::ABORT));
            }
        }
        b
    }
}
