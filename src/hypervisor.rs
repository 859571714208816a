// SPDX-License-Identifier: GPL-2.0

//! Whether lbr-dump runs in a virtual machine, whose, and so where its records come from.
//!
//! Pure code, like `facility.rs`: CPUID values go in, a description comes out; unit-tested on the
//! host (`tools/lbr-core/tests/hypervisor.rs`). The module's probe (`probe.rs`) prints it.
//!
//! A guest's branch recorder is whatever its hypervisor makes of the MSRs. Under KVM (Linux 7.3):
//! - Intel: KVM gives a guest legacy LBR only when the host has legacy LBR (not Arch LBR, not the
//!   mediated PMU; arch/x86/kvm/vmx/vmx.c `vmx_get_perf_capabilities()`), the guest's CPUID model
//!   is the host's and its PERF_CAPABILITIES.LBR_FMT the host's (`intel_pmu_refresh()`,
//!   `cpuid_model_is_consistent()`; QEMU: `-cpu host,pmu=on,lbr-fmt=<the host's format>`).
//!   Otherwise a guest's write of DEBUGCTL.LBR is dropped (`vmx_get_supported_debugctl()`).
//!   The records are the host's LBR, lent to the guest through a host perf event (vLBR:
//!   `intel_pmu_create_guest_lbr_event()` in arch/x86/kvm/vmx/pmu_intel.c). A host perf event of
//!   higher priority (cpu-pinned, e.g. `perf record -b -a` on the host) takes the LBR back; while
//!   it has it, KVM intercepts the guest's LBR MSRs and its reads return 0
//!   (`intel_pmu_handle_lbr_msrs_access()`, `vmx_passthrough_lbr_msrs()`), while the guest's
//!   DEBUGCTL.LBR still reads set. A capture then finds recording on and every record zero: the
//!   snapshot says `state=zeroed` (report.rs). KVM never exposes Arch LBR (CPUID.(7,0):EDX[19]) to
//!   guests.
//! - AMD: KVM virtualises only the single LastBranch record pair, through LBRV (the VMCB holds
//!   the guest's DEBUGCTL and records; arch/x86/kvm/svm/svm.c `svm_update_lbrv()`), when the host
//!   has LBRV and `kvm_amd.lbrv` is on; not LbrExtV2 (CPUID 0x80000022 EAX[1] is never given).
//!   Without LBRV the guest's DEBUGCTL writes are dropped.

use core::fmt;

use crate::facility::{Cpuid, Recorder, Vendor};

/// KVM's signature in EBX, ECX, EDX of its base leaf (include/uapi/asm/kvm_para.h).
pub const KVM_SIGNATURE: [u8; 12] = *b"KVMKVMKVM\0\0\0";

/// The first hypervisor CPUID leaf, and one past the last base the kernel searches (the kernel's
/// `for_each_possible_cpuid_base_hypervisor()`: every 0x100 from 0x40000000 up to 0x40010000;
/// KVM sits above 0x40000000 when it also presents Hyper-V's leaves there).
pub const HYPERVISOR_BASE: u32 = 0x4000_0000;
const HYPERVISOR_END: u32 = 0x4001_0000;

/// Who runs the CPU lbr-dump sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hypervisor {
    /// CPUID.1:ECX[31] is clear: bare metal (or a hypervisor that hides itself, which CPUID
    /// cannot tell).
    None,
    /// KVM: its signature at one of the hypervisor bases (the kernel's `kvm_cpuid_base()`).
    Kvm,
    /// Another hypervisor: the signature of leaf 0x40000000 (zero bytes if it sets none).
    Other([u8; 12]),
}

fn signature_of(ebx: u32, ecx: u32, edx: u32) -> [u8; 12] {
    let mut s = [0u8; 12];
    s[0..4].copy_from_slice(&ebx.to_le_bytes());
    s[4..8].copy_from_slice(&ecx.to_le_bytes());
    s[8..12].copy_from_slice(&edx.to_le_bytes());
    s
}

/// Reads the hypervisor bit and leaves, as the kernel does (arch/x86/kernel/kvm.c `kvm_detect()`
/// through `cpuid_base_hypervisor(KVM_SIGNATURE, 0)`).
pub fn detect(c: &impl Cpuid) -> Hypervisor {
    if c.cpuid(0, 0).eax < 1 || c.cpuid(1, 0).ecx & (1 << 31) == 0 {
        return Hypervisor::None;
    }
    let mut base = HYPERVISOR_BASE;
    while base < HYPERVISOR_END {
        let r = c.cpuid(base, 0);
        if signature_of(r.ebx, r.ecx, r.edx) == KVM_SIGNATURE {
            return Hypervisor::Kvm;
        }
        base += 0x100;
    }
    let r = c.cpuid(HYPERVISOR_BASE, 0);
    Hypervisor::Other(signature_of(r.ebx, r.ecx, r.edx))
}

/// Where a guest's records come from: what the probe's and the armed line say (`None` on bare
/// metal: the records are the CPU's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Intel legacy LBR under KVM: KVM's virtual LBR, a host perf event the host can take back
    /// (records then read 0: `state=zeroed`).
    KvmVirtualLbr,
    /// The AMD single record under KVM: LBRV, the record saved and restored with the guest's
    /// state by the hardware.
    KvmLbrv,
    /// A KVM signature with a recorder 7.3's KVM does not virtualise (Arch LBR, LbrExtV2): an
    /// emulator or a KVM lbr-dump does not know.
    KvmOther,
    /// Another hypervisor, by its signature.
    Other([u8; 12]),
}

impl Hypervisor {
    /// Where the records of `recorder` come from under this hypervisor.
    pub fn backing(self, recorder: &Recorder) -> Option<Backing> {
        match (self, recorder) {
            (Hypervisor::None, _) => None,
            (Hypervisor::Kvm, Recorder::IntelLegacy(_)) => Some(Backing::KvmVirtualLbr),
            (Hypervisor::Kvm, Recorder::AmdSingle) => Some(Backing::KvmLbrv),
            (Hypervisor::Kvm, _) => Some(Backing::KvmOther),
            (Hypervisor::Other(s), _) => Some(Backing::Other(s)),
        }
    }

    /// What to add to a refusal of a recorder of `vendor`'s CPU under this hypervisor: the
    /// conditions under which KVM gives a guest a recorder (or the hypervisor's name).
    pub fn refusal_hint(self, vendor: Vendor) -> Option<RefusalHint> {
        match (self, vendor) {
            (Hypervisor::None, _) => None,
            (Hypervisor::Kvm, Vendor::Intel) => Some(RefusalHint::KvmIntel),
            (Hypervisor::Kvm, Vendor::Amd) => Some(RefusalHint::KvmAmd),
            (Hypervisor::Kvm, _) => Some(RefusalHint::KvmOther),
            (Hypervisor::Other(s), _) => Some(RefusalHint::Other(s)),
        }
    }
}

/// A hypervisor's 12-byte signature, printable (other bytes as `?`, trailing NULs dropped).
struct Sig([u8; 12]);

impl fmt::Display for Sig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        for &b in &self.0[..end] {
            let c = if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            };
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// The short form, for the probe's line (also /sys/kernel/lbr_dump/facility, 255 bytes at most).
pub struct Short(pub Backing);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Backing::KvmVirtualLbr => {
                f.write_str("KVM guest: virtual LBR, a host perf event the host can take back")
            }
            Backing::KvmLbrv => f.write_str("KVM guest: AMD LBRV, the single record"),
            Backing::KvmOther => f.write_str("KVM guest: a recorder KVM does not virtualise"),
            Backing::Other(s) => write!(f, "hypervisor \"{}\"", Sig(s)),
        }
    }
}

/// The long form, for the armed line.
impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Backing::KvmVirtualLbr => f.write_str(
                "records from KVM's virtual LBR, backed by a host perf event: if the host takes \
                 the LBR back, records read as zero (state=zeroed) or start over",
            ),
            Backing::KvmLbrv => f.write_str(
                "records from AMD LBRV under KVM: the single last-branch record, kept with the \
                 guest's state",
            ),
            Backing::KvmOther => f.write_str(
                "records as the hypervisor presents them (KVM virtualises only legacy LBR and \
                 the AMD single record)",
            ),
            Backing::Other(s) => write!(f, "records as hypervisor \"{}\" presents them", Sig(s)),
        }
    }
}

/// What a refusal adds under a hypervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalHint {
    /// KVM on Intel: the conditions for a guest's LBR.
    KvmIntel,
    /// KVM on AMD: LBRV.
    KvmAmd,
    /// KVM on another vendor's CPU.
    KvmOther,
    /// Another hypervisor.
    Other([u8; 12]),
}

impl fmt::Display for RefusalHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RefusalHint::KvmIntel => f.write_str(
                "KVM guest: KVM gives a guest LBR only on an Intel host with legacy LBR (not \
                 Arch LBR, not the mediated PMU), with -cpu host,pmu=on,lbr-fmt=<the host's \
                 format>",
            ),
            RefusalHint::KvmAmd => f.write_str(
                "KVM guest: KVM gives a guest only the single record, through LBRV (the host's \
                 CPU must have it, kvm_amd.lbrv=1)",
            ),
            RefusalHint::KvmOther => f.write_str("KVM guest"),
            RefusalHint::Other(s) => write!(f, "guest of hypervisor \"{}\"", Sig(s)),
        }
    }
}
