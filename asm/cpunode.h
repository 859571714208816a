/* SPDX-License-Identifier: GPL-2.0 */
/*
 * LBR_THIS_CPU reg: \reg = this CPU's number, found without %gs, the way GET_PERCPU_BASE in
 * arch/x86/entry/calling.h and the vDSO's getcpu do: the limit of the per-CPU CPUNODE segment
 * descriptor in this CPU's GDT holds (node << VDSO_CPUNODE_BITS) | cpu, and `lsl` reads it
 * without touching memory through a segment. Uses \reg and flags (lsl sets ZF, andq the rest);
 * no other register, no memory. One definition for the entry stubs (asm/stubs.S) and the
 * C-callable lbr_dump_cpu_number() that KUnit checks it with (asm/cpu.S). Needs <asm/segment.h>.
 */
.macro LBR_THIS_CPU reg:req
	movq	$__CPUNODE_SEG, \reg
	lsl	\reg, \reg			/* \reg = (node << 12) | cpu */
	andq	$VDSO_CPUNODE_MASK, \reg
.endm
