// SPDX-License-Identifier: GPL-2.0

//! lbr-dump: freeze the CPU's last-branch records at the first instruction of a kernel exception
//! and print them in the oops.
//!
//! This crate root only declares the parts and the module's life cycle:
//! - pure code, shared with the host tools: [`facility`] (what CPUID says the recorder is),
//!   [`record`] (decoding records), [`layout`] (the snapshot area), [`report`] (printed lines);
//! - [`probe`]: whether that recorder can really be switched on;
//! - [`capture`]: arming (area, recording on every CPU, gates), [`idt`]: the gates,
//!   [`printer`]: the die notifier;
//! - [`ffi`]: every C function declared by hand; `glue.c`: what Rust cannot express;
//! - `asm/`: code that must not be compiled Rust (CPU lookup without `%gs`, entry stubs).

use core::fmt::Write;

use kernel::{cpu::CpuId, prelude::*};

mod capture;
mod control;
pub mod facility;
mod ffi;
mod idt;
pub mod layout;
mod printer;
mod probe;
pub mod record;
pub mod report;

module! {
    type: LbrDump,
    name: "lbr_dump",
    authors: ["lbr-dump developers"],
    description: "Freeze and print last-branch records at kernel exceptions",
    license: "GPL",
    params: {
        enable: bool {
            default: false,
            description: "Arm at load: hook the exception vectors and record branches",
        },
        force: bool {
            default: false,
            description: "Testing only: arm even if the recorder's switch does not stay on \
                          (plain QEMU TCG); the capture path runs, the records read as zero",
        },
        fail_msr: u32 {
            default: 0,
            description: "Testing only: treat every access to this MSR as faulting (#GP), to \
                          exercise the refusal of a hypervisor without LBR pass-through",
        },
        all_rings: bool {
            default: false,
            description: "Record user-mode branches too (default: kernel only)",
        },
        vectors: u32 {
            default: crate::capture::Vectors::ALL,
            description: "Hooked exception vectors, a bit mask (bit N: vector N) of 0 #DE, \
                          1 #DB (re-arm only), 6 #UD, 8 #DF, 11 #NP, 12 #SS, 13 #GP, 14 #PF, \
                          17 #AC, 21 #CP; default 0x227943, all of them",
        },
    },
}

struct LbrDump {
    control: Pin<KBox<control::Control>>,
}

fn text_base(module: &'static ThisModule) -> u64 {
    let m = module.as_ptr();
    if m.is_null() {
        return 0; // built in
    }
    // SAFETY: `m` is this module, alive while its code runs.
    unsafe { (*m).mem[kernel::bindings::mod_mem_type_MOD_TEXT as usize].base as u64 }
}

/// Whether to arm at load: the `enable` parameter for a module; for the built-in driver,
/// `lbr_dump=on|off` on the command line, else the Kconfig default (`lbr_dump.enable=1` works too).
fn arm_at_init() -> bool {
    if module_parameters::enable.value() {
        return true;
    }
    // SAFETY: reads a value set during command-line parsing; no preconditions.
    match unsafe { ffi::lbr_dump_boot_choice() } {
        1 => true,
        0 => false,
        _ => cfg!(CONFIG_LBR_DUMP_DEFAULT_ON),
    }
}

impl kernel::Module for LbrDump {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let mask = module_parameters::vectors.value();
        let Some(vectors) = capture::Vectors::new(mask) else {
            pr_err!(
                "vectors={:#x}: not a set of hookable vectors (bit N: vector N; hookable: {} = {:#x}; #DB alone captures nothing)\n",
                mask,
                format_args!("{}", capture::Vectors::all()),
                capture::Vectors::ALL
            );
            return Err(EINVAL);
        };
        let found = match probe::probe(CpuId::current()) {
            Ok(found) => {
                pr_info!("{}\n", format_args!("{found}"));
                found
            }
            Err(refusal) => match refusal.forceable() {
                Some(found) if module_parameters::force.value() => {
                    pr_warn!("{} (forced: records will be empty)\n", format_args!("{refusal}"));
                    found
                }
                _ => {
                    pr_err!("{}\n", format_args!("{refusal}"));
                    return Err(ENODEV);
                }
            },
        };
        let mut line = printer::Line::new();
        let _ = write!(line, "{found}");
        let kernel_only = !module_parameters::all_rings.value();
        let mut control = KBox::pin(
            control::Control::new(found, kernel_only, vectors, text_base(module)),
            GFP_KERNEL,
        )?;
        if arm_at_init() {
            control.as_mut().get_mut().set(true)?;
        }
        // SAFETY: the control is pinned in a box that lives until `drop`, which unpublishes it.
        unsafe { control.as_mut().get_mut().publish() };
        let mut vectors = printer::Line::new();
        let _ = write!(vectors, "{}", control.vectors);
        // SAFETY: two NUL-terminated buffers, copied by the callee.
        let r = unsafe { ffi::lbr_dump_sysfs_create(line.as_ptr().cast(), vectors.as_ptr().cast()) };
        if r != 0 {
            control.as_mut().get_mut().unpublish();
            return Err(Error::from_errno(r));
        }
        Ok(LbrDump { control })
    }
}

impl Drop for LbrDump {
    fn drop(&mut self) {
        // SAFETY: created in `init`; removal waits for running attribute callbacks.
        unsafe { ffi::lbr_dump_sysfs_remove() };
        let c = self.control.as_mut().get_mut();
        c.unpublish();
        let _ = c.set(false);
        pr_info!("unloaded ({})\n", c.found.recorder.flavour());
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
