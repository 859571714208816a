// SPDX-License-Identifier: GPL-2.0

//! lbr-dump: freeze the CPU's last-branch records at the first instruction of a kernel exception
//! and print them in the oops.
//!
//! This crate root only declares the parts and the module's life cycle:
//! - [`facility`] (pure, shared with the host tools): what CPUID says the recorder is;
//! - [`probe`]: whether that recorder can really be switched on;
//! - [`ffi`]: every C function declared by hand;
//! - `asm/`: code that must not be compiled Rust (CPU lookup without `%gs`, entry stubs).

use kernel::{cpu::CpuId, prelude::*};

pub mod facility;
mod ffi;
mod probe;

module! {
    type: LbrDump,
    name: "lbr_dump",
    authors: ["lbr-dump developers"],
    description: "Freeze and print last-branch records at kernel exceptions",
    license: "GPL",
}

struct LbrDump {
    found: probe::Found,
}

impl kernel::Module for LbrDump {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        match probe::probe(CpuId::current()) {
            Ok(found) => {
                pr_info!("{}\n", format_args!("{found}"));
                Ok(LbrDump { found })
            }
            Err(refusal) => {
                pr_err!("{}\n", format_args!("{refusal}"));
                Err(ENODEV)
            }
        }
    }
}

impl Drop for LbrDump {
    fn drop(&mut self) {
        pr_info!("unloaded ({})\n", self.found.recorder.flavour());
    }
}

#[kunit_tests(lbr_dump)]
mod tests {
    use super::*;
    use crate::facility::{msr, Cpuid};
    use crate::probe::{read_msr, CpuidInsn};

    /// The `%gs`-free CPU lookup that the entry stubs use (asm/cpu.S) agrees with the kernel's
    /// CPU number. The two reads of the kernel's number bracket ours, so a migration in between
    /// is detected and the check repeated.
    #[test]
    fn cpu_number_without_gs_matches_kernel() {
        let mut checked = 0;
        for _ in 0..1000 {
            let before = CpuId::current().as_u32();
            // SAFETY: `lbr_dump_cpu_number` (asm/cpu.S) reads a segment limit; no memory, no
            // arguments, callable in any context.
            let ours = unsafe { crate::ffi::lbr_dump_cpu_number() };
            let after = CpuId::current().as_u32();
            if before == after {
                assert_eq!(ours, before);
                checked += 1;
            }
        }
        assert!(checked > 0);
    }

    /// The CPUID wrapper returns what the CPU says: leaf 0's vendor string is one of the
    /// printable vendor strings, and the maximum basic leaf is at least 1 on x86-64.
    #[test]
    fn cpuid_instruction_reads_vendor() {
        let l0 = CpuidInsn.cpuid(0, 0);
        assert!(l0.eax >= 1);
        for b in [l0.ebx, l0.edx, l0.ecx].iter().flat_map(|r| r.to_le_bytes()) {
            assert!(b.is_ascii_graphic());
        }
    }

    /// An exception-safe read of an MSR every x86-64 CPU has (IA32_EFER: long mode active) works
    /// and returns its real value, proving the FFI declaration and error mapping.
    #[test]
    fn msr_read_is_real() {
        let efer = read_msr(CpuId::current(), 0xc000_0080).expect("EFER is readable");
        assert_ne!(efer & (1 << 10), 0, "EFER.LMA must be set in a 64-bit kernel");
        // DEBUGCTL exists on every x86-64 CPU and reads without fault.
        assert!(read_msr(CpuId::current(), msr::DEBUGCTL).is_ok());
    }
}
