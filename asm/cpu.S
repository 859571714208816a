/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPU identification without %gs.
 *
 * The entry stubs must find this CPU's capture buffer before they may trust GS (a #GP on the
 * IRET to user space arrives in kernel mode with the user's GS base: the error_entry cases of
 * arch/x86/entry/entry_64.S). They do it the way GET_PERCPU_BASE in
 * arch/x86/entry/calling.h and the vDSO's getcpu do: the limit of the per-CPU CPUNODE segment
 * descriptor in this CPU's GDT holds (node << VDSO_CPUNODE_BITS) | cpu, and `lsl` reads it
 * without touching memory through a segment.
 *
 * lbr_dump_cpu_number() wraps that sequence as a C-callable function so that the Rust KUnit
 * suite can check it against the kernel's own CPU number. The stubs inline the same macro
 * (LBR_THIS_CPU, asm/cpunode.h) rather than call this function.
 */
#include <linux/linkage.h>
#include <asm/segment.h>

#include "cpunode.h"

	.text
/*
 * unsigned int lbr_dump_cpu_number(void)
 * Called from Rust (src/ffi.rs) with preemption in any state: the answer is the CPU this
 * instruction sequence ran on, as for raw_smp_processor_id().
 */
SYM_FUNC_START(lbr_dump_cpu_number)
	LBR_THIS_CPU %rax
	RET
SYM_FUNC_END(lbr_dump_cpu_number)
