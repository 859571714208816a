// SPDX-License-Identifier: GPL-2.0

//! Finding a usable branch recorder: CPUID says what the CPU claims, then the control MSR is
//! switched on and read back with exception-safe accesses. A recorder whose switch faults (a
//! hypervisor without LBR pass-through) or does not stay on (plain QEMU TCG drops the write)
//! counts as absent: lbr-dump refuses to arm rather than print records that are always zero.
//! In a virtual machine the probe also names the hypervisor and, under KVM, where the records
//! come from (`hypervisor.rs`): its line and its refusals say so.

use core::fmt;

use kernel::{cpu::CpuId, prelude::*};

use crate::facility::{self, msr, Bts, Cpuid, CpuidRegs, Facility, Recorder, Switch};
use crate::ffi;
use crate::record::{self, Tsx};

use crate::hypervisor::{self, Hypervisor, Short};

/// The `cpuid` instruction of the CPU this runs on.
pub(crate) struct CpuidInsn;

impl Cpuid for CpuidInsn {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidRegs {
        let (eax, ecx, edx): (u32, u32, u32);
        let rbx: u64;
        // SAFETY: `cpuid` only writes EAX, EBX, ECX and EDX. LLVM reserves RBX, so it is saved in
        // a scratch register around the instruction and swapped back; no memory or stack is used.
        unsafe {
            core::arch::asm!(
                "mov {saved}, rbx",
                "cpuid",
                "xchg {saved}, rbx",
                saved = out(reg) rbx,
                inout("eax") leaf => eax,
                inout("ecx") subleaf => ecx,
                out("edx") edx,
                options(nostack, preserves_flags, nomem),
            );
        }
        CpuidRegs {
            eax,
            ebx: rbx as u32,
            ecx,
            edx,
        }
    }
}

/// An MSR access that faulted (or could not be made): which MSR, and the kernel's error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MsrError {
    msr: u32,
    write: Option<u64>,
    errno: i32,
}

impl MsrError {
    /// Whether the access could not be made because the CPU is not online (the cross-CPU
    /// accessors' -ENXIO, from smp_call_function_single()).
    pub(crate) fn cpu_offline(&self) -> bool {
        self.errno == -(kernel::bindings::ENXIO as i32)
    }
}

impl fmt::Display for MsrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.write {
            Some(v) => write!(f, "writing {v:#x} to MSR {:#x}", self.msr)?,
            None => write!(f, "reading MSR {:#x}", self.msr)?,
        }
        match self.errno {
            -5 => f.write_str(" faults"), // -EIO: the exception-table fixup ran (#GP)
            e => write!(f, " fails ({e})"),
        }
    }
}

/// The `fail_msr` fault-injection parameter: an access to this MSR reports -EIO (a #GP), as
/// under a hypervisor that does not pass the recorder through. QEMU cannot make an instruction
/// fault, so this is how the fault path is tested.
fn injected_fault(msr: u32, write: Option<u64>) -> Result<(), MsrError> {
    match crate::module_parameters::fail_msr.value() {
        m if m != 0 && m == msr => Err(MsrError {
            msr,
            write,
            errno: -5,
        }),
        _ => Ok(()),
    }
}

/// Reads `msr` on `cpu`; a #GP comes back as an error instead of an oops.
pub(crate) fn read_msr(cpu: CpuId, msr: u32) -> Result<u64, MsrError> {
    injected_fault(msr, None)?;
    let mut v = 0u64;
    // SAFETY: `rdmsrq_safe_on_cpu` takes any CPU number and MSR number (faults are caught by its
    // exception-table entry) and writes one u64 through `q`, which points to a live local.
    let r = unsafe { ffi::rdmsrq_safe_on_cpu(cpu.as_u32(), msr, &mut v) };
    match r {
        0 => Ok(v),
        errno => Err(MsrError {
            msr,
            write: None,
            errno,
        }),
    }
}

/// Writes `value` to `msr` on this CPU (the caller keeps it there: interrupts off); a #GP comes
/// back as an error.
pub(crate) fn write_msr_here(msr: u32, value: u64) -> Result<(), MsrError> {
    injected_fault(msr, Some(value))?;
    // SAFETY: glue.c's `wrmsrq_safe()` takes any MSR number and value; a fault is caught by its
    // exception-table entry. Which MSRs may be written is the caller's concern, as in
    // `write_msr`.
    match unsafe { ffi::lbr_dump_wrmsr_safe(msr, value) } {
        0 => Ok(()),
        errno => Err(MsrError {
            msr,
            write: Some(value),
            errno,
        }),
    }
}

/// Writes `value` to `msr` on `cpu`; a #GP comes back as an error.
pub(crate) fn write_msr(cpu: CpuId, msr: u32, value: u64) -> Result<(), MsrError> {
    injected_fault(msr, Some(value))?;
    // SAFETY: `wrmsrq_safe_on_cpu` takes any CPU number, MSR number and value; faults are caught
    // by its exception-table entry. Which MSRs may be written is the caller's concern: lbr-dump
    // writes only the branch-recorder control MSRs it identified, and restores them.
    let r = unsafe { ffi::wrmsrq_safe_on_cpu(cpu.as_u32(), msr, value) };
    match r {
        0 => Ok(()),
        errno => Err(MsrError {
            msr,
            write: Some(value),
            errno,
        }),
    }
}

/// A recorder that was shown to work.
pub(crate) struct Found {
    pub(crate) facility: Facility,
    pub(crate) recorder: Recorder,
    pub(crate) bts: Bts,
    /// The switch was already on when probed: another owner (perf) records with it.
    pub(crate) in_use: bool,
    /// Who runs this CPU: the records of a guest are what its hypervisor makes of the MSRs.
    pub(crate) hypervisor: Hypervisor,
}

/// Why there is no usable recorder, and under which hypervisor (which says what it takes there).
#[derive(Clone, Copy)]
pub(crate) struct Refusal {
    why: Why,
    hypervisor: Hypervisor,
}

/// Why there is no usable recorder.
#[derive(Clone, Copy)]
enum Why {
    /// CPUID describes none.
    NoRecorder(Facility),
    /// CPUID describes none, but the single last-branch pair answers (DEBUGCTL.LBR with MSRs
    /// 0x1db and 0x1dc: the one-record LBR of the P6 family and of AMD, [`Recorder::AmdSingle`]'s
    /// MSRs): what `force` may use (the Bochs FRED runs, where scripts/bochs-msrs.def gives the
    /// model that pair and no LBR stack).
    SinglePair(Facility),
    /// PDCM says PERF_CAPABILITIES exists, but reading it fails.
    Capabilities(Facility, MsrError),
    /// An access to the switch or the records failed.
    Access(Facility, Recorder, MsrError),
    /// The recorder works, but lbr-dump cannot capture its records (format 0, no PDCM, ...).
    Unsupported(Facility, Recorder, record::Unsupported),
    /// The switch was written on and reads back off.
    DoesNotStick {
        facility: Facility,
        recorder: Recorder,
        wrote: u64,
        read: u64,
    },
}

/// Identifies the recorder from CPUID and checks on `cpu` that it can be switched on, leaving
/// the control MSR as it was.
#[allow(
    clippy::result_large_err,
    reason = "once per load; the refusal carries what was found"
)]
pub(crate) fn probe(cpu: CpuId) -> Result<Found, Refusal> {
    let hypervisor = hypervisor::detect(&CpuidInsn);
    probe_recorder(cpu, hypervisor).map_err(|why| Refusal { why, hypervisor })
}

#[allow(clippy::result_large_err, reason = "once per load")]
fn probe_recorder(cpu: CpuId, hypervisor: Hypervisor) -> Result<Found, Why> {
    let mut facility = facility::identify(&CpuidInsn, None);
    if facility.pdcm {
        let caps =
            read_msr(cpu, msr::PERF_CAPABILITIES).map_err(|e| Why::Capabilities(facility, e))?;
        facility = facility::identify(&CpuidInsn, Some(caps));
    }
    let bts = match facility.ds {
        true => facility::bts(true, read_msr(cpu, msr::MISC_ENABLE).ok()),
        false => Bts::Absent,
    };
    let Some(recorder) = facility.recorder else {
        let single = Recorder::AmdSingle;
        let answers = read_msr(cpu, single.switch().msr).is_ok()
            && read_msr(cpu, single.first_record_msr()).is_ok();
        return Err(match answers {
            true => Why::SinglePair(facility),
            false => Why::NoRecorder(facility),
        });
    };
    let access = |e| Why::Access(facility, recorder, e);
    let Switch { msr, mask, .. } = recorder.switch();

    let old = read_msr(cpu, msr).map_err(access)?;
    let in_use = old & mask != 0;
    if !in_use {
        let wrote = old | mask;
        write_msr(cpu, msr, wrote).map_err(access)?;
        let read = read_msr(cpu, msr);
        // Restore before judging, so that no outcome leaves recording switched on.
        let restored = write_msr(cpu, msr, old);
        let read = read.map_err(access)?;
        restored.map_err(access)?;
        if read & mask == 0 {
            return Err(Why::DoesNotStick {
                facility,
                recorder,
                wrote,
                read,
            });
        }
    }
    read_msr(cpu, recorder.first_record_msr()).map_err(access)?;
    record::encoding(&recorder, Tsx::Absent)
        .map_err(|why| Why::Unsupported(facility, recorder, why))?;
    Ok(Found {
        facility,
        recorder,
        bts,
        in_use,
        hypervisor,
    })
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sw = self.recorder.switch();
        write!(
            f,
            "{}: {}; {} {}; {}",
            self.facility.signature,
            self.recorder,
            sw.name,
            if self.in_use {
                "already on (another owner, e.g. perf, is recording)"
            } else {
                "switches on"
            },
            self.bts
        )?;
        if let Some(b) = self.hypervisor.backing(&self.recorder) {
            write!(f, "; {}", Short(b))?;
        }
        Ok(())
    }
}

impl Refusal {
    /// The recorder CPUID describes when its switch merely did not stay on (plain QEMU TCG):
    /// the only refusal the `force` parameter may override.
    pub(crate) fn forceable(&self) -> Option<Found> {
        match self.why {
            Why::SinglePair(facility) => Some(Found {
                facility,
                recorder: Recorder::AmdSingle,
                bts: Bts::Absent,
                in_use: false,
                hypervisor: self.hypervisor,
            }),
            Why::DoesNotStick {
                facility, recorder, ..
            } => Some(Found {
                facility,
                recorder,
                bts: Bts::Absent,
                in_use: false,
                hypervisor: self.hypervisor,
            }),
            _ => None,
        }
    }
}

impl Why {
    fn facility(&self) -> &Facility {
        match self {
            Self::NoRecorder(fac)
            | Self::SinglePair(fac)
            | Self::Capabilities(fac, _)
            | Self::Access(fac, _, _)
            | Self::Unsupported(fac, _, _)
            | Self::DoesNotStick { facility: fac, .. } => fac,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.why)?;
        let vendor = self.why.facility().signature.vendor;
        if let Some(hint) = self.hypervisor.refusal_hint(vendor) {
            write!(f, "; {hint}")?;
        }
        f.write_str(": no usable branch recorder")
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRecorder(fac) => write!(
                f,
                "{}: CPUID describes no branch recorder lbr-dump supports",
                fac.signature
            ),
            Self::SinglePair(fac) => write!(
                f,
                "{}: CPUID describes no branch recorder lbr-dump supports (force=1 uses the single \
                 last-branch pair: DEBUGCTL.LBR, MSRs 0x1db and 0x1dc)",
                fac.signature
            ),
            Self::Capabilities(fac, e) => write!(
                f,
                "{}: CPUID.1:ECX.PDCM is set but {e} (IA32_PERF_CAPABILITIES)",
                fac.signature
            ),
            Self::Access(fac, rec, e) => write!(
                f,
                "{}: {rec}: {e} (a hypervisor without branch-record pass-through?)",
                fac.signature
            ),
            Self::Unsupported(fac, rec, why) => write!(f, "{}: {rec}: {why}", fac.signature),
            Self::DoesNotStick {
                facility,
                recorder,
                wrote,
                read,
            } => {
                let sw = recorder.switch();
                write!(
                    f,
                    "{}: {recorder}: {} does not stay on (MSR {:#x} reads {read:#x} after \
                     writing {wrote:#x}; an emulator or hypervisor that drops the write?)",
                    facility.signature, sw.name, sw.msr
                )
            }
        }
    }
}

#[kunit_tests(lbr_dump_probe)]
mod tests {
    use super::{read_msr, CpuidInsn};
    use crate::facility::{msr, Cpuid};
    use kernel::cpu::CpuId;

    /// The CPUID wrapper returns what the CPU says: leaf 0's vendor string is one of the
    /// printable vendor strings, and the maximum basic leaf is at least 1 on x86-64.
    #[test]
    fn cpuid_instruction_reads_vendor() {
        let l0 = CpuidInsn.cpuid(0, 0);
        assert!(l0.eax >= 1);
        for b in [l0.ebx, l0.edx, l0.ecx]
            .iter()
            .flat_map(|r| r.to_le_bytes())
        {
            assert!(b.is_ascii_graphic());
        }
    }

    /// An exception-safe read of an MSR every x86-64 CPU has (IA32_EFER: long mode active) works
    /// and returns its real value, proving the FFI declaration and error mapping.
    #[test]
    fn msr_read_is_real() {
        let efer = read_msr(CpuId::current(), 0xc000_0080).expect("EFER is readable");
        assert_ne!(
            efer & (1 << 10),
            0,
            "EFER.LMA must be set in a 64-bit kernel"
        );
        // DEBUGCTL exists on every x86-64 CPU and reads without fault.
        assert!(read_msr(CpuId::current(), msr::DEBUGCTL).is_ok());
    }
}
