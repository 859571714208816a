// SPDX-License-Identifier: GPL-2.0

//! Which branch recorder the CPU says it has.
//!
//! Pure code: CPUID leaves (and the few capability MSR values the caller read) go in, a
//! description comes out. No kernel dependency, so it is unit-tested on the host
//! (`tools/lbr-core`) and shared with the decoder. Whether the recorder can actually be switched
//! on is a separate, hardware question answered by the module's probe (`probe.rs`), which uses the
//! [`Recorder::switch`] described here.
//!
//! The Intel model table follows the kernel's `intel_pmu_init()` (arch/x86/events/intel/core.c),
//! which picks `intel_pmu_lbr_init_{core,nhm,atom,slm,snb,hsw,knl,skl}()`
//! (arch/x86/events/intel/lbr.c) by family/model; depths and MSR bases are those functions'.

use core::fmt;

/// The four registers one `cpuid` instruction returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuidRegs {
    /// EAX.
    pub eax: u32,
    /// EBX.
    pub ebx: u32,
    /// ECX.
    pub ecx: u32,
    /// EDX.
    pub edx: u32,
}

/// IA32_DEBUGCTL's BTS bits (SDM vol. 3B "IA32_DEBUGCTL MSR").
pub mod debugctl {
    /// TR: branch trace messages on.
    pub const TR: u64 = 1 << 6;
    /// BTS: store them in the BTS buffer.
    pub const BTS: u64 = 1 << 7;
    /// BTINT: interrupt when the buffer is full (clear: circular).
    pub const BTINT: u64 = 1 << 8;
    /// BTS_OFF_OS: skip branches at CPL 0.
    pub const BTS_OFF_OS: u64 = 1 << 9;
    /// BTS_OFF_USR: skip branches at CPL > 0.
    pub const BTS_OFF_USR: u64 = 1 << 10;
}

/// A source of CPUID values: the `cpuid` instruction in the module, a table in tests.
pub trait Cpuid {
    /// Executes `cpuid` with EAX = `leaf`, ECX = `subleaf`.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidRegs;
}

/// MSR numbers (arch/x86/include/asm/msr-index.h).
pub mod msr {
    /// IA32_DEBUGCTL.
    pub const DEBUGCTL: u32 = 0x1d9;
    /// IA32_PERF_CAPABILITIES (bits 5:0: LBR format), present when CPUID.1:ECX.PDCM.
    pub const PERF_CAPABILITIES: u32 = 0x345;
    /// IA32_MISC_ENABLE (bit 11: BTS unavailable).
    pub const MISC_ENABLE: u32 = 0x1a0;
    /// IA32_DS_AREA: the linear address of the debug store (BTS, PEBS).
    pub const DS_AREA: u32 = 0x600;
    /// MSR_LBR_SELECT.
    pub const LBR_SELECT: u32 = 0x1c8;
    /// MSR_LBR_TOS.
    pub const LBR_TOS: u32 = 0x1c9;
    /// MSR_LBR_CORE_FROM / _TO (Core2, Atom, Silvermont).
    pub const LBR_CORE_FROM: u32 = 0x40;
    /// See [`LBR_CORE_FROM`].
    pub const LBR_CORE_TO: u32 = 0x60;
    /// MSR_LBR_NHM_FROM / _TO (Nehalem and later).
    pub const LBR_NHM_FROM: u32 = 0x680;
    /// See [`LBR_NHM_FROM`].
    pub const LBR_NHM_TO: u32 = 0x6c0;
    /// MSR_LBR_INFO_0 (Skylake and later).
    pub const LBR_INFO_0: u32 = 0xdc0;
    /// MSR_ARCH_LBR_CTL.
    pub const ARCH_LBR_CTL: u32 = 0x14ce;
    /// MSR_ARCH_LBR_DEPTH.
    pub const ARCH_LBR_DEPTH: u32 = 0x14cf;
    /// MSR_ARCH_LBR_FROM_0.
    pub const ARCH_LBR_FROM_0: u32 = 0x1500;
    /// MSR_ARCH_LBR_TO_0.
    pub const ARCH_LBR_TO_0: u32 = 0x1600;
    /// MSR_ARCH_LBR_INFO_0.
    pub const ARCH_LBR_INFO_0: u32 = 0x1200;
    /// MSR_AMD_DBG_EXTN_CFG (bit 6: LBRV2EN).
    pub const AMD_DBG_EXTN_CFG: u32 = 0xc000_010f;
    /// MSR_AMD_SAMP_BR_FROM: LbrExtV2 FROM(n) = base + 2n, TO(n) = base + 2n + 1.
    pub const AMD_SAMP_BR_FROM: u32 = 0xc001_0300;
    /// MSR_IA32_LASTBRANCHFROMIP (the single LastBranch record).
    pub const LAST_BRANCH_FROM_IP: u32 = 0x1db;
    /// MSR_IA32_LASTBRANCHTOIP.
    pub const LAST_BRANCH_TO_IP: u32 = 0x1dc;
    /// MSR_AMD64_LBR_SELECT (LbrExtV2's filter).
    pub const AMD_LBR_SELECT: u32 = 0xc000_010e;
    /// MSR_IA32_LASTINTFROMIP: Intel MSR_LER_FROM_LIP / IA32_LER_FROM_IP, AMD LastIntFromIP
    /// (the last exception record's source).
    pub const LER_FROM: u32 = 0x1dd;
    /// MSR_IA32_LASTINTTOIP: Intel MSR_LER_TO_LIP / IA32_LER_TO_IP, AMD LastIntToIP.
    pub const LER_TO: u32 = 0x1de;
}

/// Which branches are recorded (the `filter` parameter), mapped onto each flavour's hardware
/// filter. Every filter keeps far branches (exceptions, interrupts, syscalls, iret): a snapshot's
/// newest record is the exception's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Filter {
    /// Every taken branch (the default).
    All,
    /// No conditional branches and no relative jumps: calls, returns, indirect jumps and far
    /// branches, a function-level history that reaches several times further back.
    Functions,
    /// Calls and returns only (and far branches).
    Calls,
}

/// LBR_SELECT bits (Intel legacy, SDM "Filtering of Last Branch Records"; AMD LbrExtV2's
/// LBR_SELECT uses the same bits 0-8, the kernel's amd/lbr.c): a set bit suppresses what it
/// names.
pub mod select {
    /// CPL_EQ_0: branches that end in ring 0.
    pub const KERNEL: u64 = 1 << 0;
    /// CPL_NEQ_0: branches that end in ring > 0.
    pub const USER: u64 = 1 << 1;
    /// JCC: conditional branches.
    pub const JCC: u64 = 1 << 2;
    /// NEAR_REL_CALL.
    pub const REL_CALL: u64 = 1 << 3;
    /// NEAR_IND_CALL.
    pub const IND_CALL: u64 = 1 << 4;
    /// NEAR_RET.
    pub const RET: u64 = 1 << 5;
    /// NEAR_IND_JMP.
    pub const IND_JMP: u64 = 1 << 6;
    /// NEAR_REL_JMP.
    pub const REL_JMP: u64 = 1 << 7;
    /// FAR_BRANCH.
    pub const FAR: u64 = 1 << 8;
}

/// IA32_LBR_CTL branch-type enables (Arch LBR, SDM "IA32_LBR_CTL"): a set bit records what it
/// names.
pub mod arch_ctl {
    /// JCC.
    pub const JCC: u64 = 1 << 16;
    /// NEAR_REL_JMP.
    pub const REL_JMP: u64 = 1 << 17;
    /// NEAR_IND_JMP.
    pub const IND_JMP: u64 = 1 << 18;
    /// NEAR_REL_CALL.
    pub const REL_CALL: u64 = 1 << 19;
    /// NEAR_IND_CALL.
    pub const IND_CALL: u64 = 1 << 20;
    /// NEAR_RET.
    pub const RET: u64 = 1 << 21;
    /// OTHER_BRANCH (far branches, exceptions, interrupts).
    pub const OTHER: u64 = 1 << 22;
}

impl Filter {
    /// Every filter, in the order the parameter's help names them: `ALL[f as usize] == f`.
    pub const ALL: [Filter; 3] = [Filter::All, Filter::Functions, Filter::Calls];

    /// The parameter's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Functions => "functions",
            Self::Calls => "calls",
        }
    }

    /// The filter a parameter value names (a trailing newline, as `echo` writes, is accepted).
    pub fn from_name(s: &str) -> Option<Filter> {
        let s = s.strip_suffix('\n').unwrap_or(s);
        Self::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The LBR_SELECT bits that suppress the branches this filter leaves out.
    pub fn select_bits(self) -> u64 {
        match self {
            Self::All => 0,
            Self::Functions => select::JCC | select::REL_JMP,
            Self::Calls => select::JCC | select::REL_JMP | select::IND_JMP,
        }
    }

    /// The IA32_LBR_CTL branch-type bits that record the branches this filter keeps.
    pub fn arch_type_bits(self) -> u64 {
        use arch_ctl::*;
        let calls = REL_CALL | IND_CALL | RET | OTHER;
        match self {
            Self::All => JCC | REL_JMP | IND_JMP | calls,
            Self::Functions => IND_JMP | calls,
            Self::Calls => calls,
        }
    }

    /// Why `recorder` cannot apply this filter, if it cannot: only [`Filter::All`] works without
    /// a branch-type filter.
    pub fn unsupported_by(self, recorder: &Recorder) -> Option<&'static str> {
        if self == Self::All {
            return None;
        }
        match recorder {
            Recorder::IntelLegacy(l) if l.select.is_none() => Some(
                "this model has no LBR_SELECT (Core 2 and Bonnell/Saltwell Atom; the kernel's \
                 intel_pmu_lbr_init_core/_atom): it records every branch",
            ),
            Recorder::IntelArch(a) if !a.branch_filter => {
                Some("CPUID.(0x1C,0):EBX[1] says this Arch LBR has no branch-type filtering")
            }
            Recorder::AmdSingle => Some(
                "the single LastBranch record has no filter: it holds the last branch, \
                 whatever its type",
            ),
            _ => None,
        }
    }
}

/// The recorder flavours lbr-dump knows: the one definition of their codes (the dump header,
/// layout.rs offset 0x030), their names in printed lines and JSON (`flavour=`), and their titles
/// in messages. The emulator and tests/records.py spell them their own way on purpose; the tests
/// check those spellings against these names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Intel model-specific LBR.
    IntelLbr = 1,
    /// Intel Architectural LBR.
    IntelArchLbr = 2,
    /// AMD LbrExtV2 (Zen 4 and later).
    AmdLbrV2 = 3,
    /// The single LastBranchFromIP/ToIP pair (MSRs 0x1db and 0x1dc): every AMD64 CPU's, and
    /// an Intel CPU's with `force=1` (the P6 family's pair). Titled without a vendor; its line
    /// and JSON name stays `amd-lbr`, the format's name since v1.
    AmdLbr = 4,
}

impl Flavour {
    /// Every flavour, in code order.
    pub const ALL: [Flavour; 4] = [
        Self::IntelLbr,
        Self::IntelArchLbr,
        Self::AmdLbrV2,
        Self::AmdLbr,
    ];

    /// The code in the dump header.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The flavour with `code`, if any.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.code() == code)
    }

    /// The name in printed lines and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Self::IntelLbr => "intel-lbr",
            Self::IntelArchLbr => "intel-arch-lbr",
            Self::AmdLbrV2 => "amd-lbr-v2",
            Self::AmdLbr => "amd-lbr",
        }
    }

    /// The title in messages ("Intel Arch LBR").
    pub const fn title(self) -> &'static str {
        match self {
            Self::IntelLbr => "Intel LBR",
            Self::IntelArchLbr => "Intel Arch LBR",
            Self::AmdLbrV2 => "AMD LbrExtV2",
            Self::AmdLbr => "LastBranch record",
        }
    }
}

/// CPU vendor from CPUID leaf 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// "GenuineIntel".
    Intel,
    /// "AuthenticAMD".
    Amd,
    /// "HygonGenuine" (Zen derived; no LBR support in the kernel's perf).
    Hygon,
    /// Anything else, with its 12-byte vendor string.
    Other([u8; 12]),
}

/// Vendor and the display family/model/stepping of CPUID leaf 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The vendor.
    pub vendor: Vendor,
    /// Display family (base family plus extended family when base is 0xf).
    pub family: u32,
    /// Display model (extended model prepended for families 6 and 0xf).
    pub model: u32,
    /// Stepping.
    pub stepping: u32,
}

/// LBR record formats of IA32_PERF_CAPABILITIES[5:0] (kernel: `LBR_FORMAT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbrFormat {
    /// 0: one MSR per entry, from in bits 31:0 and to in 63:32.
    Bits32,
    /// 1: linear addresses.
    Lip,
    /// 2: effective addresses.
    Eip,
    /// 3: effective addresses, FROM bit 63 mispredict.
    EipFlags,
    /// 4: FROM bits 63/62/61 mispredict/in_tx/abort.
    EipFlags2,
    /// 5: flags and cycles in LBR_INFO.
    Info,
    /// 6: FROM flags as format 3, TO bits 63:48 cycles.
    Time,
    /// 7: LBR_INFO without the TSX bits.
    Info2,
    /// A value the SDM does not define (8..=63).
    Unknown(u8),
}

impl LbrFormat {
    /// Decodes PERF_CAPABILITIES[5:0].
    pub fn from_perf_capabilities(caps: u64) -> Self {
        match (caps & 0x3f) as u8 {
            0 => Self::Bits32,
            1 => Self::Lip,
            2 => Self::Eip,
            3 => Self::EipFlags,
            4 => Self::EipFlags2,
            5 => Self::Info,
            6 => Self::Time,
            7 => Self::Info2,
            n => Self::Unknown(n),
        }
    }

    /// The numeric format.
    pub fn number(self) -> u8 {
        match self {
            Self::Bits32 => 0,
            Self::Lip => 1,
            Self::Eip => 2,
            Self::EipFlags => 3,
            Self::EipFlags2 => 4,
            Self::Info => 5,
            Self::Time => 6,
            Self::Info2 => 7,
            Self::Unknown(n) => n,
        }
    }

    /// The kernel's name for the format.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bits32 => "32",
            Self::Lip => "LIP",
            Self::Eip => "EIP",
            Self::EipFlags => "EIP_FLAGS",
            Self::EipFlags2 => "EIP_FLAGS2",
            Self::Info => "INFO",
            Self::Time => "TIME",
            Self::Info2 => "INFO2",
            Self::Unknown(_) => "unknown",
        }
    }
}

/// Intel model-specific LBR: one row of the kernel's `intel_pmu_lbr_init_*()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyLbr {
    /// The kernel's name for the init function's family of models ("Skylake", ...).
    pub generation: &'static str,
    /// Number of entries.
    pub depth: u8,
    /// FROM_0 MSR.
    pub from: u32,
    /// TO_0 MSR.
    pub to: u32,
    /// LBR_INFO_0 MSR, where the model has it.
    pub info: Option<u32>,
    /// MSR_LBR_SELECT, where the model has it: the kernel's `intel_pmu_lbr_init_core()` and
    /// `_atom()` set no `lbr_sel_map` (Core 2, Bonnell/Saltwell Atom have none; an access #GPs).
    pub select: Option<u32>,
    /// The record format; `None` when CPUID.1:ECX.PDCM is clear and PERF_CAPABILITIES does not
    /// exist (the kernel then assumes format 0).
    pub format: Option<LbrFormat>,
}

/// Intel Architectural LBR, from CPUID leaf 0x1C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchLbr {
    /// Bit n set: depth 8 * (n + 1) is supported.
    pub depths: u8,
    /// CPL filtering (EBX[0]).
    pub cpl_filter: bool,
    /// Branch-type filtering (EBX[1]).
    pub branch_filter: bool,
    /// Call-stack mode (EBX[2]).
    pub call_stack: bool,
    /// Mispredict bit in INFO (ECX[0]).
    pub mispredict: bool,
    /// Cycle counts in INFO (ECX[1]).
    pub timed: bool,
    /// Branch type in INFO (ECX[2]).
    pub branch_type: bool,
}

impl ArchLbr {
    /// The deepest supported depth (the kernel's `fls(depth_mask) * 8`).
    pub fn max_depth(&self) -> u8 {
        (8 - self.depths.leading_zeros() as u8) * 8
    }
}

/// A branch recorder, as CPUID describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorder {
    /// Intel model-specific LBR.
    IntelLegacy(LegacyLbr),
    /// Intel Architectural LBR.
    IntelArch(ArchLbr),
    /// AMD LbrExtV2 (Zen 4 and later), with its depth.
    AmdLbrV2 {
        /// Number of entries (CPUID 0x80000022 EBX[9:4]).
        depth: u8,
    },
    /// The single LastBranchFromIP/ToIP pair under DEBUGCTL.LBR (AMD's; with `force=1`, an
    /// Intel CPU's, the P6 family's pair).
    AmdSingle,
}

/// The MSR bit that switches a recorder on and off (and so freezes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    /// The control MSR.
    pub msr: u32,
    /// The enable bit's mask.
    pub mask: u64,
    /// The name of MSR and bit for messages.
    pub name: &'static str,
}

impl Switch {
    /// What to write back to the control MSR when lbr-dump lets a CPU go (disarming, CPU going
    /// offline), given the value `now` there, the value lbr-dump armed with and the one found
    /// before arming: the value before, if lbr-dump's own value is still in place (switched on,
    /// or with only the switch cleared: frozen by a capture or by #DB delivery); otherwise
    /// nothing (another owner, such as a perf session started since, wrote its own: leave it).
    pub fn restore(&self, now: u64, armed: u64, before: u64) -> Option<u64> {
        (now == armed || now == armed & !self.mask).then_some(before)
    }
}

impl Recorder {
    /// The switch that turns this recorder on and off.
    pub fn switch(&self) -> Switch {
        match self {
            Self::IntelLegacy(_) | Self::AmdSingle => Switch {
                msr: msr::DEBUGCTL,
                mask: 1,
                name: "DEBUGCTL.LBR",
            },
            Self::IntelArch(_) => Switch {
                msr: msr::ARCH_LBR_CTL,
                mask: 1,
                name: "ARCH_LBR_CTL.LBREn",
            },
            Self::AmdLbrV2 { .. } => Switch {
                msr: msr::AMD_DBG_EXTN_CFG,
                mask: 1 << 6,
                name: "DBG_EXTN_CFG.LBRV2EN",
            },
        }
    }

    /// The last exception record's MSRs (FROM, TO), where this recorder keeps one while
    /// lbr-dump records with it: the last branch taken before the most recent exception or
    /// interrupt.
    ///
    /// - Intel model-specific LBR: MSR_LER_FROM_LIP / MSR_LER_TO_LIP at 0x1DD / 0x1DE on every
    ///   model of [`INTEL_LBR_MODELS`] (SDM vol. 3B, "Last Exception Records": "Core 2 Duo, Core
    ///   i7 and Atom processors provide two MSRs ... a branch record for the last branch that
    ///   the processor took prior to an exception or interrupt being generated"; SDM vol. 4's
    ///   per-family MSR tables list them from Core 2 on, as Xen's vmx.c LBR lists do for every
    ///   family 6 generation; Pentium 4's are elsewhere, 0x1D7/0x1D8, and lbr-dump does not know
    ///   its LBR). Arming reads them on every CPU with the exception-safe accessor like every
    ///   captured MSR: a part without them refuses arming with the reason, it does not fault.
    /// - Intel Arch LBR: IA32_LER_FROM_IP / IA32_LER_TO_IP, architectural with Arch LBR (SDM
    ///   vol. 3B, "Last Branch Records": the LER MSRs are part of the Arch LBR state, XSAVE
    ///   component 15, the kernel's `struct arch_lbr_state` ler_from, ler_to, ler_info).
    ///   IA32_LER_INFO (0x1E0, the record's flags) is not captured: lbr-dump gives the last
    ///   exception record's two addresses.
    /// - AMD single record: LastIntFromIP / LastIntToIP (APM vol. 2, 13.1.1 "Control-Transfer
    ///   Recording MSRs"): with DebugCtl.LBR set, the processor copies LastBranchFromIP/ToIP
    ///   there when it takes an exception or interrupt, before recording the event itself.
    /// - AMD LbrExtV2: none. The LastInt pair belongs to the DebugCtl.LBR recording above;
    ///   lbr-dump switches LbrExtV2 on with DBG_EXTN_CFG.LBRV2EN alone (as the kernel's
    ///   amd/lbr.c does), which records the LBR stack and leaves that pair as it was.
    pub fn last_exception(&self) -> Option<(u32, u32)> {
        match self {
            Self::IntelLegacy(_) | Self::IntelArch(_) | Self::AmdSingle => {
                Some((msr::LER_FROM, msr::LER_TO))
            }
            Self::AmdLbrV2 { .. } => None,
        }
    }

    /// The first record MSR, read by the probe to check the records are readable.
    pub fn first_record_msr(&self) -> u32 {
        match self {
            Self::IntelLegacy(l) => l.from,
            Self::IntelArch(_) => msr::ARCH_LBR_FROM_0,
            Self::AmdLbrV2 { .. } => msr::AMD_SAMP_BR_FROM,
            Self::AmdSingle => msr::LAST_BRANCH_FROM_IP,
        }
    }

    /// Number of records.
    pub fn depth(&self) -> u8 {
        match self {
            Self::IntelLegacy(l) => l.depth,
            Self::IntelArch(a) => a.max_depth(),
            Self::AmdLbrV2 { depth } => *depth,
            Self::AmdSingle => 1,
        }
    }

    /// The recorder's flavour.
    pub fn flavour(&self) -> Flavour {
        match self {
            Self::IntelLegacy(_) => Flavour::IntelLbr,
            Self::IntelArch(_) => Flavour::IntelArchLbr,
            Self::AmdLbrV2 { .. } => Flavour::AmdLbrV2,
            Self::AmdSingle => Flavour::AmdLbr,
        }
    }
}

/// Whether the CPU has BTS: CPUID.1:EDX.DS and IA32_MISC_ENABLE bit 11 (BTS unavailable) clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bts {
    /// CPUID.1:EDX.DS is clear (or not Intel).
    Absent,
    /// DS present and MISC_ENABLE says BTS is available.
    Available,
    /// DS present but MISC_ENABLE bit 11 says BTS is unavailable.
    Unavailable,
}

/// What CPUID says about the CPU's branch recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facility {
    /// Vendor and family/model/stepping.
    pub signature: Signature,
    /// The recorder lbr-dump would use, if CPUID describes one.
    pub recorder: Option<Recorder>,
    /// Whether CPUID.1:ECX.PDCM says IA32_PERF_CAPABILITIES exists (Intel).
    pub pdcm: bool,
    /// Whether CPUID.1:EDX.DS says a debug store (BTS/PEBS) exists (Intel).
    pub ds: bool,
    /// Whether CPUID.1:ECX.DS-CPL says BTS can be filtered by ring (DEBUGCTL BTS_OFF_OS/USR).
    pub ds_cpl: bool,
}

/// Reads vendor and signature.
pub fn signature(c: &impl Cpuid) -> Signature {
    let l0 = c.cpuid(0, 0);
    let mut v = [0u8; 12];
    v[0..4].copy_from_slice(&l0.ebx.to_le_bytes());
    v[4..8].copy_from_slice(&l0.edx.to_le_bytes());
    v[8..12].copy_from_slice(&l0.ecx.to_le_bytes());
    let vendor = match &v {
        b"GenuineIntel" => Vendor::Intel,
        b"AuthenticAMD" => Vendor::Amd,
        b"HygonGenuine" => Vendor::Hygon,
        _ => Vendor::Other(v),
    };
    let eax = if l0.eax >= 1 { c.cpuid(1, 0).eax } else { 0 };
    let base_family = (eax >> 8) & 0xf;
    let base_model = (eax >> 4) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((eax >> 20) & 0xff)
    } else {
        base_family
    };
    let model = if base_family == 6 || base_family == 0xf {
        (((eax >> 16) & 0xf) << 4) | base_model
    } else {
        base_model
    };
    Signature {
        vendor,
        family,
        model,
        stepping: eax & 0xf,
    }
}

/// Kernel `intel_pmu_lbr_init_*()` rows: (generation, depth, from, to, info, select).
type Row = (&'static str, u8, u32, u32, Option<u32>, Option<u32>);
const SEL: Option<u32> = Some(msr::LBR_SELECT);
const CORE: Row = ("Core2", 4, msr::LBR_CORE_FROM, msr::LBR_CORE_TO, None, None);
const NHM: Row = ("Nehalem", 16, msr::LBR_NHM_FROM, msr::LBR_NHM_TO, None, SEL);
const ATOM: Row = ("Atom", 8, msr::LBR_CORE_FROM, msr::LBR_CORE_TO, None, None);
const SLM: Row = (
    "Silvermont",
    8,
    msr::LBR_CORE_FROM,
    msr::LBR_CORE_TO,
    None,
    SEL,
);
const SNB: Row = (
    "Sandy Bridge",
    16,
    msr::LBR_NHM_FROM,
    msr::LBR_NHM_TO,
    None,
    SEL,
);
const HSW: Row = ("Haswell", 16, msr::LBR_NHM_FROM, msr::LBR_NHM_TO, None, SEL);
const KNL: Row = (
    "Knights Landing",
    8,
    msr::LBR_NHM_FROM,
    msr::LBR_NHM_TO,
    None,
    SEL,
);
const SKL: Row = (
    "Skylake",
    32,
    msr::LBR_NHM_FROM,
    msr::LBR_NHM_TO,
    Some(msr::LBR_INFO_0),
    SEL,
);

/// Family 6 models with model-specific LBR, as `intel_pmu_init()` lists them (intel-family.h).
const INTEL_LBR_MODELS: &[(u32, Row)] = &[
    (0x0f, CORE), // CORE2_MEROM
    (0x16, CORE), // CORE2_MEROM_L
    (0x17, CORE), // CORE2_PENRYN
    (0x1d, CORE), // CORE2_DUNNINGTON
    (0x1e, NHM),  // NEHALEM
    (0x1a, NHM),  // NEHALEM_EP
    (0x2e, NHM),  // NEHALEM_EX
    (0x25, NHM),  // WESTMERE
    (0x2c, NHM),  // WESTMERE_EP
    (0x2f, NHM),  // WESTMERE_EX
    (0x1c, ATOM), // ATOM_BONNELL (steppings < 10 have LBR disabled by an erratum)
    (0x26, ATOM), // ATOM_BONNELL_MID
    (0x36, ATOM), // ATOM_SALTWELL
    (0x27, ATOM), // ATOM_SALTWELL_MID
    (0x35, ATOM), // ATOM_SALTWELL_TABLET
    (0x37, SLM),  // ATOM_SILVERMONT
    (0x4d, SLM),  // ATOM_SILVERMONT_D
    (0x4a, SLM),  // ATOM_SILVERMONT_MID
    (0x4c, SLM),  // ATOM_AIRMONT
    (0x75, SLM),  // ATOM_AIRMONT_NP
    (0x5a, SLM),  // ATOM_SILVERMONT_MID2
    (0x5c, SKL),  // ATOM_GOLDMONT
    (0x5f, SKL),  // ATOM_GOLDMONT_D
    (0x7a, SKL),  // ATOM_GOLDMONT_PLUS
    (0x86, SKL),  // ATOM_TREMONT_D
    (0x96, SKL),  // ATOM_TREMONT
    (0x9c, SKL),  // ATOM_TREMONT_L
    (0x2a, SNB),  // SANDYBRIDGE
    (0x2d, SNB),  // SANDYBRIDGE_X
    (0x3a, SNB),  // IVYBRIDGE
    (0x3e, SNB),  // IVYBRIDGE_X
    (0x3c, HSW),  // HASWELL
    (0x3f, HSW),  // HASWELL_X
    (0x45, HSW),  // HASWELL_L
    (0x46, HSW),  // HASWELL_G
    (0x3d, HSW),  // BROADWELL
    (0x56, HSW),  // BROADWELL_D
    (0x47, HSW),  // BROADWELL_G
    (0x4f, HSW),  // BROADWELL_X
    (0x57, KNL),  // XEON_PHI_KNL
    (0x85, KNL),  // XEON_PHI_KNM
    (0x55, SKL),  // SKYLAKE_X
    (0x4e, SKL),  // SKYLAKE_L
    (0x5e, SKL),  // SKYLAKE
    (0x8e, SKL),  // KABYLAKE_L
    (0x9e, SKL),  // KABYLAKE
    (0xa6, SKL),  // COMETLAKE_L
    (0xa5, SKL),  // COMETLAKE
    (0x6a, SKL),  // ICELAKE_X
    (0x6c, SKL),  // ICELAKE_D
    (0x7e, SKL),  // ICELAKE_L
    (0x7d, SKL),  // ICELAKE
    (0x8c, SKL),  // TIGERLAKE_L
    (0x8d, SKL),  // TIGERLAKE
    (0xa7, SKL),  // ROCKETLAKE
];

/// Identifies the CPU's branch recorder from CPUID. `perf_capabilities` is the value of
/// IA32_PERF_CAPABILITIES when the caller could read it (it exists only if CPUID.1:ECX.PDCM is
/// set; see [`Facility::pdcm`]): a two-step use is `identify(c, None)`, then, if `pdcm`,
/// read the MSR and call again.
pub fn identify(c: &impl Cpuid, perf_capabilities: Option<u64>) -> Facility {
    let signature = signature(c);
    let max_leaf = c.cpuid(0, 0).eax;
    let max_ext = c.cpuid(0x8000_0000, 0).eax;
    let l1 = if max_leaf >= 1 {
        c.cpuid(1, 0)
    } else {
        CpuidRegs::default()
    };
    let pdcm = signature.vendor == Vendor::Intel && l1.ecx & (1 << 15) != 0;
    let ds = signature.vendor == Vendor::Intel && l1.edx & (1 << 21) != 0;
    let recorder = match signature.vendor {
        Vendor::Intel => intel_recorder(c, &signature, max_leaf, pdcm, perf_capabilities),
        Vendor::Amd => {
            if max_ext >= 0x8000_0022 && c.cpuid(0x8000_0022, 0).eax & (1 << 1) != 0 {
                let depth = ((c.cpuid(0x8000_0022, 0).ebx >> 4) & 0x3f) as u8;
                Some(Recorder::AmdLbrV2 { depth })
            } else if signature.family >= 6 {
                // Every AMD64 CPU (family 0xf and later) has the single record pair.
                Some(Recorder::AmdSingle)
            } else {
                None
            }
        }
        Vendor::Hygon | Vendor::Other(_) => None,
    };
    Facility {
        signature,
        recorder,
        pdcm,
        ds,
        ds_cpl: ds && l1.ecx & (1 << 4) != 0,
    }
}

fn intel_recorder(
    c: &impl Cpuid,
    s: &Signature,
    max_leaf: u32,
    pdcm: bool,
    perf_capabilities: Option<u64>,
) -> Option<Recorder> {
    if max_leaf >= 0x1c && c.cpuid(7, 0).edx & (1 << 19) != 0 {
        let l = c.cpuid(0x1c, 0);
        if l.eax & 0xff == 0 {
            return None; // no supported depth: nothing to record with (never capture 0 MSRs)
        }
        return Some(Recorder::IntelArch(ArchLbr {
            depths: (l.eax & 0xff) as u8,
            cpl_filter: l.ebx & 1 != 0,
            branch_filter: l.ebx & 2 != 0,
            call_stack: l.ebx & 4 != 0,
            mispredict: l.ecx & 1 != 0,
            timed: l.ecx & 2 != 0,
            branch_type: l.ecx & 4 != 0,
        }));
    }
    if s.family != 6 {
        return None;
    }
    let (_, (generation, depth, from, to, info, select)) =
        *INTEL_LBR_MODELS.iter().find(|(m, _)| *m == s.model)?;
    if s.model == 0x1c && s.stepping < 10 {
        return None; // Bonnell erratum: the kernel disables LBR on these.
    }
    let format = match (pdcm, perf_capabilities) {
        (true, Some(caps)) => Some(LbrFormat::from_perf_capabilities(caps)),
        _ => None,
    };
    Some(Recorder::IntelLegacy(LegacyLbr {
        generation,
        depth,
        from,
        to,
        info,
        select,
        format,
    }))
}

/// Decodes BTS availability from CPUID's DS bit and IA32_MISC_ENABLE.
pub fn bts(ds: bool, misc_enable: Option<u64>) -> Bts {
    match (ds, misc_enable) {
        (false, _) | (true, None) => Bts::Absent,
        (true, Some(v)) if v & (1 << 11) != 0 => Bts::Unavailable,
        (true, Some(_)) => Bts::Available,
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.vendor {
            Vendor::Intel => f.write_str("Intel")?,
            Vendor::Amd => f.write_str("AMD")?,
            Vendor::Hygon => f.write_str("Hygon")?,
            Vendor::Other(v) => {
                for &b in v {
                    let c = if b.is_ascii_graphic() { b as char } else { '?' };
                    write!(f, "{c}")?;
                }
            }
        }
        write!(
            f,
            " family {:#x} model {:#x} stepping {}",
            self.family, self.model, self.stepping
        )
    }
}

impl fmt::Display for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::IntelLegacy(l) => {
                write!(
                    f,
                    "{} ({}), {} entries, ",
                    self.flavour().title(),
                    l.generation,
                    l.depth
                )?;
                match l.format {
                    Some(fmt) => write!(f, "format {} ({})", fmt.number(), fmt.name())?,
                    None => f.write_str("format unknown (no PDCM)")?,
                }
                write!(f, ", FROM {:#x} TO {:#x}", l.from, l.to)?;
                if let Some(info) = l.info {
                    write!(f, " INFO {info:#x}")?;
                }
                Ok(())
            }
            Self::IntelArch(a) => write!(
                f,
                "{}, {} entries (depths {:#04x}), cpl filter {}, branch filter {}, \
                 call stack {}, mispredict {}, cycles {}, branch type {}",
                self.flavour().title(),
                a.max_depth(),
                a.depths,
                yn(a.cpl_filter),
                yn(a.branch_filter),
                yn(a.call_stack),
                yn(a.mispredict),
                yn(a.timed),
                yn(a.branch_type)
            ),
            Self::AmdLbrV2 { depth } => write!(f, "{}, {depth} entries", self.flavour().title()),
            Self::AmdSingle => write!(f, "{} (1 entry)", self.flavour().title()),
        }
    }
}

impl fmt::Display for Bts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bts::Absent => "no BTS",
            Bts::Available => "BTS available",
            Bts::Unavailable => "BTS unavailable (MISC_ENABLE)",
        })
    }
}

fn yn(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
