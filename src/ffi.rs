// SPDX-License-Identifier: GPL-2.0

//! Every function lbr-dump calls that the `kernel` crate does not wrap, declared by hand here
//! and nowhere else. Each declaration names the file that defines it; its signature was copied
//! from there (Linux 7.3).

use kernel::ffi::{c_int, c_uint};

unsafe extern "C" {
    /// arch/x86/lib/msr-smp.c: `int rdmsrq_safe_on_cpu(unsigned int cpu, u32 msr_no, u64 *q)`.
    /// Reads an MSR on `cpu` (an IPI unless it is the current one) with an exception-table
    /// fixup: a #GP gives `-EIO`, an offline CPU `-ENXIO`, instead of an oops.
    pub(crate) fn rdmsrq_safe_on_cpu(cpu: c_uint, msr_no: u32, q: *mut u64) -> c_int;

    /// arch/x86/lib/msr-smp.c: `int wrmsrq_safe_on_cpu(unsigned int cpu, u32 msr_no, u64 q)`.
    pub(crate) fn wrmsrq_safe_on_cpu(cpu: c_uint, msr_no: u32, q: u64) -> c_int;

    /// asm/cpu.S: this CPU's number from the CPUNODE segment limit, without `%gs`.
    pub(crate) fn lbr_dump_cpu_number() -> c_uint;
}
