// SPDX-License-Identifier: GPL-2.0

//! The CPUs the emulator can present, and what the guest must see in CPUID for each.
//!
//! Intel legacy LBR has no CPUID enumeration of its own: software picks the depth and the MSR
//! bases from the family/model (the kernel: `intel_pmu_init()` in arch/x86/events/intel/core.c
//! calling `intel_pmu_lbr_init_*()` in lbr.c) and reads the record format from
//! IA32_PERF_CAPABILITIES[5:0], which exists when CPUID.1:ECX.PDCM is set. So a legacy choice is a
//! real (family/model, depth, MSR bases, format) set, and the emulator rewrites CPUID leaf 1 to
//! that family/model and sets PDCM. Arch LBR is enumerated by CPUID.(7,0):EDX[19] and leaf 0x1C;
//! AMD LbrExtV2 by CPUID 0x80000022. The vendor string is QEMU's: run Intel choices with an Intel
//! `-cpu` model and AMD choices with an AMD one (the emulator checks and says so).
//!
//! Branch Trace Store: every Intel model of the table has it, as the parts do (Core 2 and
//! Bonnell onwards: CPUID.1:EDX.DS, ECX.DTES64 and ECX.DS-CPL, IA32_MISC_ENABLE bit 11 clear);
//! `bts=off` presents an Intel model without a debug store. AMD parts have none (DS clear).
//! See [`crate::bts`].

/// IA32_DEBUGCTL and the MSRs every flavour shares.
pub const MSR_DEBUGCTL: u32 = 0x1d9;
pub const MSR_PERF_CAPABILITIES: u32 = 0x345;
/// Intel LER / AMD LastException record (same numbers).
pub const MSR_LER_FROM: u32 = 0x1dd;
pub const MSR_LER_TO: u32 = 0x1de;
/// Intel legacy.
pub const MSR_LBR_SELECT: u32 = 0x1c8;
pub const MSR_LBR_TOS: u32 = 0x1c9;
/// Intel Arch LBR.
pub const MSR_ARCH_LBR_CTL: u32 = 0x14ce;
pub const MSR_ARCH_LBR_DEPTH: u32 = 0x14cf;
pub const MSR_ARCH_LBR_FROM_0: u32 = 0x1500;
pub const MSR_ARCH_LBR_TO_0: u32 = 0x1600;
pub const MSR_ARCH_LBR_INFO_0: u32 = 0x1200;
/// AMD.
pub const MSR_AMD_LASTBRANCH_FROM: u32 = 0x1db;
pub const MSR_AMD_LASTBRANCH_TO: u32 = 0x1dc;
pub const MSR_AMD_LBR_SELECT: u32 = 0xc000_010e;
pub const MSR_AMD_DBG_EXTN_CFG: u32 = 0xc000_010f;
pub const MSR_AMD_LBR_FROM_0: u32 = 0xc001_0300;

/// Which recorder a model has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Model-specific LBR: `depth` entries at FROM/TO bases, optional LBR_INFO base, a format.
    Legacy {
        depth: usize,
        from: u32,
        to: u32,
        info: Option<u32>,
        format: u8,
        /// The model has MSR_LBR_SELECT (0x1c8). Core 2 and Bonnell/Saltwell Atom do not: the
        /// kernel's intel_pmu_lbr_init_core() and _atom() set no lbr_sel_map, and an access
        /// raises #GP (here: `would-fault`).
        select: bool,
    },
    /// Architectural LBR, up to `depth` entries (the largest depth CPUID 0x1C offers).
    /// `timed`: CPUID.(0x1C,0):ECX[1] "timed LBRs", so that records carry a valid cycle count
    /// (IA32_LBR_x_INFO.CYC_CNT_VALID); without it every record's CYC_CNT_VALID is clear.
    Arch { depth: usize, timed: bool },
    /// AMD LbrExtV2 (Zen 4): 16 entries. `erratum1452`: every Nth recorded branch is preceded by
    /// an erroneous entry, marked by TO[61] (the kernel's amd/lbr.c: "if reserved = 1 then an
    /// erroneous branch was recorded (see Erratum 1452)", and it discards the entry; AMD family
    /// 19h revision guide, erratum 1452); None: no such entries.
    AmdV2 {
        depth: usize,
        erratum1452: Option<u32>,
    },
    /// The single LastBranch/LastException record pair every AMD64 CPU has.
    AmdSingle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Intel,
    Amd,
}

/// One CPU the emulator can present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    pub name: &'static str,
    pub vendor: Vendor,
    /// Family 6 model number written into CPUID leaf 1 (Intel), or None to keep QEMU's.
    pub model: Option<u8>,
    pub flavour: Flavour,
    pub bts: Bts,
}

/// The Branch Trace Store a model has (SDM vol. 3B 17.4.5 "Branch Trace Store (BTS)", 17.4.9
/// "BTS and DS Save Area").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bts {
    /// No debug store: CPUID.1:EDX.DS clear, so IA32_DS_AREA and DEBUGCTL's BTS bits do not
    /// exist (an access is `would-fault`).
    None,
    /// BTS with the 64-bit DS save area (CPUID.1:ECX.DTES64) and CPL qualification
    /// (CPUID.1:ECX.DS-CPL: BTS_OFF_OS/BTS_OFF_USR). `predicted`: records carry the "branch
    /// predicted" bit, which 17.4.9.1 says "is not supported by Intel Core microarchitecture or
    /// Intel Atom microarchitecture" (here: `core2` and `atom`).
    Store { predicted: bool },
}

/// CPUID.1:EDX[21] DS, CPUID.1:ECX[2] DTES64, CPUID.1:ECX[4] DS-CPL.
const CPUID1_EDX_DS: u32 = 1 << 21;
const CPUID1_ECX_DTES64: u32 = 1 << 2;
const CPUID1_ECX_DS_CPL: u32 = 1 << 4;

/// The MSRs of a legacy-LBR generation (the kernel's `intel_pmu_lbr_init_*()`).
#[derive(Clone, Copy)]
enum Msrs {
    /// FROM/TO at 0x40/0x60, no LBR_INFO, no LBR_SELECT (Core 2, Bonnell: no `lbr_sel_map`).
    CoreNoSelect,
    /// FROM/TO at 0x40/0x60 with LBR_SELECT (Silvermont).
    Core,
    /// FROM/TO at 0x680/0x6c0 with LBR_SELECT (Nehalem to Broadwell).
    Nehalem,
    /// As `Nehalem`, and LBR_INFO at 0xdc0 (Skylake and later, Goldmont).
    Skylake,
}

const fn legacy(name: &'static str, model: u8, depth: usize, msrs: Msrs, format: u8) -> Model {
    let (from, to) = match msrs {
        Msrs::CoreNoSelect | Msrs::Core => (0x40, 0x60),
        Msrs::Nehalem | Msrs::Skylake => (0x680, 0x6c0),
    };
    Model {
        name,
        vendor: Vendor::Intel,
        model: Some(model),
        flavour: Flavour::Legacy {
            depth,
            from,
            to,
            info: match msrs {
                Msrs::Skylake => Some(0xdc0),
                _ => None,
            },
            format,
            select: !matches!(msrs, Msrs::CoreNoSelect),
        },
        bts: Bts::Store { predicted: true },
    }
}

impl Model {
    /// The model's BTS records without the "branch predicted" bit (Intel Core and Intel Atom
    /// microarchitectures, SDM 17.4.9.1).
    const fn bts_unpredicted(mut self) -> Model {
        self.bts = Bts::Store { predicted: false };
        self
    }
}

/// The table. Depths and bases are the kernel's `intel_pmu_lbr_init_*()` for these models
/// (core: 4 @ 0x40/0x60; atom, slm: 8 @ 0x40/0x60; nhm, snb, hsw: 16 @ 0x680/0x6c0; skl: 32 @
/// 0x680/0x6c0 with LBR_INFO at 0xdc0); model numbers are asm/intel-family.h. The formats are
/// what these parts report; `format=N` overrides it to exercise every format (0-7) on any model.
pub const MODELS: &[Model] = &[
    legacy("core2", 0x17, 4, Msrs::CoreNoSelect, 1).bts_unpredicted(),
    legacy("atom", 0x1c, 8, Msrs::CoreNoSelect, 2).bts_unpredicted(),
    legacy("silvermont", 0x37, 8, Msrs::Core, 3),
    legacy("nehalem", 0x1e, 16, Msrs::Nehalem, 3),
    legacy("sandybridge", 0x2a, 16, Msrs::Nehalem, 3),
    legacy("haswell", 0x3c, 16, Msrs::Nehalem, 4),
    legacy("broadwell", 0x3d, 16, Msrs::Nehalem, 4),
    legacy("skylake", 0x5e, 32, Msrs::Skylake, 5),
    legacy("icelake", 0x7e, 32, Msrs::Skylake, 5),
    legacy("goldmont", 0x5c, 32, Msrs::Skylake, 6),
    legacy("goldmont-plus", 0x7a, 32, Msrs::Skylake, 6),
    Model {
        name: "sapphirerapids",
        vendor: Vendor::Intel,
        model: Some(0x8f),
        flavour: Flavour::Arch {
            depth: 32,
            timed: true,
        },
        bts: Bts::Store { predicted: true },
    },
    Model {
        name: "zen4",
        vendor: Vendor::Amd,
        model: None,
        flavour: Flavour::AmdV2 {
            depth: 16,
            erratum1452: None,
        },
        bts: Bts::None,
    },
    Model {
        name: "amd",
        vendor: Vendor::Amd,
        model: None,
        flavour: Flavour::AmdSingle,
        bts: Bts::None,
    },
];

pub fn find(name: &str) -> Option<Model> {
    MODELS.iter().copied().find(|m| m.name == name)
}

impl Model {
    /// The model with its legacy format replaced (`format=N`).
    pub fn with_format(mut self, format: u8) -> Result<Model, String> {
        match &mut self.flavour {
            Flavour::Legacy { format: f, .. } if format <= 7 => *f = format,
            Flavour::Legacy { .. } => return Err(format!("format={format}: LBR formats are 0-7")),
            _ => {
                return Err(format!(
                    "format= applies to Intel legacy LBR models, not {}",
                    self.name
                ))
            }
        }
        Ok(self)
    }

    /// The model with another Arch LBR depth (`depth=N`, a multiple of 8 up to 64).
    pub fn with_depth(mut self, depth: usize) -> Result<Model, String> {
        match &mut self.flavour {
            Flavour::Arch { depth: d, .. } if depth % 8 == 0 && (8..=64).contains(&depth) => {
                *d = depth
            }
            Flavour::Arch { .. } => {
                return Err(format!("depth={depth}: Arch LBR depths are 8, 16, ... 64"))
            }
            _ => {
                return Err(format!(
                    "depth= applies to Arch LBR models, not {}: their depth is the model's",
                    self.name
                ))
            }
        }
        Ok(self)
    }

    /// The Arch LBR model without timed LBRs (`timed=off`).
    pub fn with_timed(mut self, on: bool) -> Result<Model, String> {
        match &mut self.flavour {
            Flavour::Arch { timed, .. } => *timed = on,
            _ => {
                return Err(format!(
                    "timed= applies to Arch LBR models, not {}",
                    self.name
                ))
            }
        }
        Ok(self)
    }

    /// The LbrExtV2 model with erratum-1452 entries before every `n`th branch (`erratum1452=N`).
    pub fn with_erratum1452(mut self, n: usize) -> Result<Model, String> {
        match &mut self.flavour {
            Flavour::AmdV2 { erratum1452, .. } if n >= 1 => {
                *erratum1452 = Some(u32::try_from(n).unwrap_or(u32::MAX))
            }
            Flavour::AmdV2 { .. } => return Err("erratum1452=0: N is 1 or more".to_string()),
            _ => {
                return Err(format!(
                    "erratum1452= applies to AMD LbrExtV2 models, not {}",
                    self.name
                ))
            }
        }
        Ok(self)
    }

    /// The model with its Branch Trace Store taken away (`bts=off`), or kept (`bts=on`).
    pub fn with_bts(mut self, on: bool) -> Result<Model, String> {
        match (self.vendor, on) {
            (Vendor::Amd, true) => {
                return Err(format!(
                    "bts=on: {} is an AMD model, and AMD parts have no Branch Trace Store",
                    self.name
                ))
            }
            (_, false) => self.bts = Bts::None,
            (Vendor::Intel, true) => {}
        }
        Ok(self)
    }

    /// Does the model have BTS (and so IA32_DS_AREA)?
    pub fn has_bts(&self) -> bool {
        matches!(self.bts, Bts::Store { .. })
    }

    /// DEBUGCTL bits of the BTS facility that this model does not have: a write setting one is
    /// a #GP (reserved bits). Intel without a debug store keeps TR (bit 6: branch trace
    /// messages on the system bus, nothing the guest sees); AMD's DebugCtl has bits 6-10
    /// reserved (APM vol. 2, "Debug-Control MSR (DebugCtl)": bits 63:6 reserved).
    pub fn missing_debugctl_bts_bits(&self) -> u64 {
        use crate::bts::{BTINT, BTS, BTS_OFF_OS, BTS_OFF_USR, TR};
        match (self.bts, self.vendor) {
            (Bts::Store { .. }, _) => 0,
            (Bts::None, Vendor::Intel) => BTS | BTINT | BTS_OFF_OS | BTS_OFF_USR,
            (Bts::None, Vendor::Amd) => TR | BTS | BTINT | BTS_OFF_OS | BTS_OFF_USR,
        }
    }

    /// IA32_MISC_ENABLE as the guest reads it, from QEMU's value `v`: on Intel models, bit 11
    /// (BTS unavailable) says whether the model has BTS and bit 12 (PEBS unavailable) is set, as
    /// PEBS is not emulated (QEMU leaves both clear). None: not rewritten (AMD).
    pub fn misc_enable(&self, v: u64) -> Option<u64> {
        use crate::bts::{MISC_BTS_UNAVAILABLE, MISC_PEBS_UNAVAILABLE};
        if self.vendor != Vendor::Intel {
            return None;
        }
        let v = v | MISC_PEBS_UNAVAILABLE;
        Some(match self.bts {
            Bts::Store { .. } => v & !MISC_BTS_UNAVAILABLE,
            Bts::None => v | MISC_BTS_UNAVAILABLE,
        })
    }

    /// IA32_PERF_CAPABILITIES as the guest reads it, if the model has it.
    pub fn perf_capabilities(&self) -> Option<u64> {
        match self.flavour {
            Flavour::Legacy { format, .. } => Some(format as u64),
            // The kernel treats format 0x3f as "Arch LBR" (lbr.c).
            Flavour::Arch { .. } => Some(0x3f),
            _ => None,
        }
    }

    /// The highest basic (or extended, for 0x8000_0000) CPUID leaf the model needs.
    fn needs_leaf(&self, base: u32) -> Option<u32> {
        match (self.flavour, base) {
            (Flavour::Arch { .. }, 0) => Some(0x1c),
            (Flavour::AmdV2 { .. }, 0x8000_0000) => Some(0x8000_0022),
            _ => None,
        }
    }

    /// Rewrites the result of `cpuid` (leaf, subleaf) as this model answers it. `orig_max` is
    /// the highest leaf of the same range QEMU answered before the emulator raised it (leaves
    /// between the two are answered with zeros, not with QEMU's copy of its highest leaf).
    pub fn cpuid(
        &self,
        leaf: u32,
        subleaf: u32,
        regs: [u32; 4],
        orig_max: Option<u32>,
    ) -> [u32; 4] {
        let [mut a, mut b, mut c, mut d] = regs;
        let base = leaf & 0x8000_0000;
        if let (Some(need), Some(orig)) = (self.needs_leaf(base), orig_max) {
            if leaf > orig && leaf < need {
                return [0; 4];
            }
        }
        match (leaf, self.flavour) {
            (0, _) | (0x8000_0000, _) => {
                if let Some(need) = self.needs_leaf(base) {
                    a = a.max(need);
                }
            }
            (1, _) => {
                if let Some(model) = self.model {
                    // Family 6: EAX = ext model[19:16] family[11:8] model[7:4] stepping[3:0].
                    // Stepping 1, but Bonnell (0x1c) at stepping 10: below it, an erratum makes
                    // the kernel (and lbr-dump) leave LBR off.
                    let stepping = if model == 0x1c { 10 } else { 1 };
                    a = (((model as u32) >> 4) << 16)
                        | (6 << 8)
                        | (((model as u32) & 0xf) << 4)
                        | stepping;
                }
                if self.perf_capabilities().is_some() {
                    c |= 1 << 15; // PDCM
                }
                if self.has_bts() {
                    d |= CPUID1_EDX_DS;
                    c |= CPUID1_ECX_DTES64 | CPUID1_ECX_DS_CPL;
                } else {
                    d &= !CPUID1_EDX_DS;
                    c &= !(CPUID1_ECX_DTES64 | CPUID1_ECX_DS_CPL);
                }
            }
            (7, Flavour::Arch { .. }) if subleaf == 0 => d |= 1 << 19,
            (0x1c, Flavour::Arch { depth, timed }) => {
                // EAX[7:0]: depth n*8 supported for bit n-1; EBX: CPL filter, branch filter,
                // call-stack mode; ECX: mispredict bit [0], timed LBR [1], branch type [2].
                a = (1u32 << (depth / 8)) - 1;
                b = 0b111;
                c = if timed { 0b111 } else { 0b101 };
                d = 0;
            }
            (0x8000_0022, Flavour::AmdV2 { depth, .. }) => {
                a |= 1 << 1; // LbrExtV2
                b = (b & !(0x3f << 4)) | ((depth as u32) << 4);
            }
            _ => {}
        }
        [a, b, c, d]
    }
}

/// A hypervisor the emulator presents to the guest (`hypervisor=kvm`), so that the guest kernel
/// and lbr-dump see a KVM guest (the kernel's `kvm_detect()`: CPUID.1:ECX[31] and KVM's signature
/// at leaf 0x40000000, include/uapi/asm/kvm_para.h) while the emulator still provides the
/// records and their ground truth. Leaf 0x40000001 (KVM's paravirtual features) reads 0: there
/// is no KVM behind the signature, so the guest must use none of its interfaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hypervisor {
    Kvm,
}

impl Hypervisor {
    /// Rewrites the result of `cpuid` (leaf) as a KVM guest sees it.
    pub fn cpuid(self, leaf: u32, regs: [u32; 4]) -> [u32; 4] {
        let [a, b, c, d] = regs;
        let w = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        const SIG: &[u8; 12] = b"KVMKVMKVM\0\0\0";
        match (self, leaf) {
            (_, 1) => [a, b, c | 1 << 31, d],
            (Hypervisor::Kvm, 0x4000_0000) => {
                [0x4000_0001, w(&SIG[0..4]), w(&SIG[4..8]), w(&SIG[8..12])]
            }
            (Hypervisor::Kvm, 0x4000_0001) => [0; 4],
            _ => regs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_unique_and_found() {
        for m in MODELS {
            assert_eq!(find(m.name), Some(*m));
        }
        assert_eq!(find("pentium"), None);
    }

    #[test]
    fn kvm_signature() {
        let kvm = Hypervisor::Kvm;
        // The hypervisor bit, and nothing else of leaf 1.
        assert_eq!(
            kvm.cpuid(1, [0x506e3, 7, 0x1234, 9]),
            [0x506e3, 7, 0x8000_1234, 9]
        );
        // "KVMKVMKVM\0\0\0" in EBX, ECX, EDX (little-endian words), the highest leaf 0x40000001.
        assert_eq!(
            kvm.cpuid(0x4000_0000, [0x4000_0010, 1, 2, 3]),
            [0x4000_0001, 0x4b4d_564b, 0x564b_4d56, 0x4d]
        );
        assert_eq!(kvm.cpuid(0x4000_0001, [1, 2, 3, 4]), [0; 4]);
        assert_eq!(kvm.cpuid(0x4000_0010, [1, 2, 3, 4]), [1, 2, 3, 4]);
        assert_eq!(kvm.cpuid(7, [1, 2, 3, 4]), [1, 2, 3, 4]);
    }

    #[test]
    fn skylake_cpuid_leaf1() {
        let m = find("skylake").unwrap();
        // Skylake client is family 6 model 0x5e: EAX 0x000506e1 with stepping 1.
        let [a, _, c, d] = m.cpuid(1, 0, [0x000506e3, 0, 0x1220, 0x10], Some(0xd));
        assert_eq!(a, 0x0005_06e1);
        // PDCM (15), and the debug store: DTES64 (ECX 2), DS-CPL (ECX 4), DS (EDX 21).
        assert_eq!(c, 0x1220 | 0x8000 | 0x4 | 0x10);
        assert_eq!(d, 0x10 | 0x20_0000);
        assert_eq!(m.perf_capabilities(), Some(5));
    }

    #[test]
    fn bts_models() {
        // Every Intel model has BTS; the AMD ones have no debug store.
        for m in MODELS {
            assert_eq!(m.has_bts(), m.vendor == Vendor::Intel, "{}", m.name);
        }
        let predicted = |n| match find(n).unwrap().bts {
            Bts::Store { predicted } => predicted,
            Bts::None => panic!("{n} has BTS"),
        };
        assert!(!predicted("core2") && !predicted("atom"));
        assert!(predicted("silvermont") && predicted("skylake") && predicted("sapphirerapids"));
        // bts=off: DS, DTES64 and DS-CPL read clear even if QEMU set them; MISC_ENABLE says
        // BTS unavailable.
        let off = find("skylake").unwrap().with_bts(false).unwrap();
        assert_eq!(
            off.cpuid(1, 0, [0x506e3, 0, 0x14, 0x20_0000], None)[2..],
            [0x8000, 0]
        );
        assert_eq!(off.misc_enable(1), Some(1 | 0x1800));
        assert!(find("zen4").unwrap().with_bts(true).is_err());
        assert!(find("zen4").unwrap().with_bts(false).is_ok());
        // IA32_MISC_ENABLE: bit 11 clear (BTS available), bit 12 set (PEBS unavailable), the rest
        // QEMU's (fast strings, bit 0; MWAIT, bit 18); AMD: not rewritten.
        let sky = find("skylake").unwrap();
        assert_eq!(sky.misc_enable(0x4_0801), Some(0x4_1001));
        assert_eq!(find("amd").unwrap().misc_enable(1), None);
        // DEBUGCTL bits 6-10: all there with BTS; Intel without keeps TR; AMD has none.
        assert_eq!(sky.missing_debugctl_bts_bits(), 0);
        assert_eq!(off.missing_debugctl_bts_bits(), 0x780);
        assert_eq!(find("zen4").unwrap().missing_debugctl_bts_bits(), 0x7c0);
    }

    #[test]
    fn arch_lbr_cpuid() {
        let m = find("sapphirerapids").unwrap();
        assert_eq!(m.cpuid(0, 0, [0xd, 1, 2, 3], Some(0xd)), [0x1c, 1, 2, 3]);
        // Leaves QEMU did not have read as zeros, not as a copy of its highest leaf.
        assert_eq!(m.cpuid(0x14, 0, [9, 9, 9, 9], Some(0xd)), [0; 4]);
        assert_eq!(m.cpuid(7, 0, [0, 0, 0, 0x10], Some(0xd))[3], 0x10 | 0x80000);
        assert_eq!(m.cpuid(7, 1, [0, 0, 0, 0], Some(0xd))[3], 0);
        // Depth 32: bits 0..3 (8, 16, 24, 32).
        assert_eq!(m.cpuid(0x1c, 0, [0; 4], Some(0xd)), [0xf, 7, 7, 0]);
        assert_eq!(
            m.with_depth(64).unwrap().cpuid(0x1c, 0, [0; 4], Some(0xd))[0],
            0xff
        );
        assert!(m.with_depth(12).is_err());
        assert_eq!(m.perf_capabilities(), Some(0x3f));
        // timed=off clears ECX[1] only.
        let untimed = m.with_timed(false).unwrap();
        assert_eq!(untimed.cpuid(0x1c, 0, [0; 4], Some(0xd)), [0xf, 7, 5, 0]);
        assert!(find("zen4").unwrap().with_timed(false).is_err());
    }

    #[test]
    fn zen4_cpuid() {
        let m = find("zen4").unwrap();
        assert_eq!(
            m.cpuid(0x8000_0000, 0, [0x8000_0021, 1, 2, 3], Some(0x8000_0021))[0],
            0x8000_0022
        );
        // Stack size 16 in EBX[9:4], LbrExtV2 in EAX[1].
        assert_eq!(
            m.cpuid(0x8000_0022, 0, [0x1, 0x3f0, 0, 0], Some(0x8000_0021)),
            [0x3, 0x100, 0, 0]
        );
        assert_eq!(
            m.cpuid(1, 0, [0xa10f11, 0, 0, 0], None),
            [0xa10f11, 0, 0, 0]
        );
        assert!(m.with_format(3).is_err());
        assert_eq!(
            m.with_erratum1452(5).unwrap().flavour,
            Flavour::AmdV2 {
                depth: 16,
                erratum1452: Some(5)
            }
        );
        assert!(m.with_erratum1452(0).is_err());
        assert!(find("skylake").unwrap().with_erratum1452(3).is_err());
    }
}
