/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A known branch sequence, recorded between two WRMSRs of the recorder's control MSR so that
 * nothing else (no compiler-generated branch, no tracepoint) lands in the records.
 *
 * void lbr_check_sequence(u32 msr, u64 on, u64 off)
 *   %edi = control MSR, %rsi = value that switches recording on, %rdx = value that switches it off
 *
 * Taken branches, oldest first (each label is the address a record must show; the offsets of
 * the labels are exported in lbr_check_offsets, so that no code relocation points at an
 * instruction without ENDBR, which objtool refuses under IBT):
 *   lbr_check_j1 -> lbr_check_t1         jmp
 *   lbr_check_j2 -> lbr_check_t2         jz, taken
 *   lbr_check_c3 -> lbr_check_leaf       call
 *   lbr_check_r3 -> lbr_check_a3         ret
 * and one not-taken conditional, lbr_check_nt, that must leave no record.
 */
#include <linux/linkage.h>
#include <asm/ibt.h>
#include <asm/nospec-branch.h>

	.text
SYM_FUNC_START(lbr_check_sequence)
	ENDBR				/* main.c takes this address (label base) */
	pushq	%rbx
	movq	%rdx, %rbx		/* rbx = off value, kept across the sequence */
	movl	%edi, %ecx
	movl	%esi, %eax
	movq	%rsi, %rdx
	shrq	$32, %rdx
	wrmsr				/* recording on */
	xorl	%eax, %eax		/* ZF = 1 */
lbr_check_nt:
	jnz	lbr_check_m		/* not taken */
lbr_check_j1:
	jmp	lbr_check_t1		/* taken */
lbr_check_m:
	nop				/* reachable only through lbr_check_nt */
lbr_check_t1:
	nop
lbr_check_j2:
	jz	lbr_check_t2		/* taken */
	nop
lbr_check_t2:
	nop
lbr_check_c3:
	call	lbr_check_leaf
lbr_check_a3:
	movl	%edi, %ecx
	movl	%ebx, %eax
	movq	%rbx, %rdx
	shrq	$32, %rdx
	wrmsr				/* recording off: the records are frozen */
	popq	%rbx
	RET
SYM_FUNC_END(lbr_check_sequence)

/* Called by the sequence; a bare RET so that the record is "ret -> lbr_check_a3" on any CPU
 * (the RET macro may become a jump to a return thunk, depending on mitigations). */
SYM_FUNC_START(lbr_check_leaf)
lbr_check_r3:
	ANNOTATE_UNRET_SAFE
	ret
	int3
SYM_FUNC_END(lbr_check_leaf)

	.section .rodata
SYM_DATA_START(lbr_check_offsets)
	.quad	lbr_check_nt - lbr_check_sequence
	.quad	lbr_check_j1 - lbr_check_sequence
	.quad	lbr_check_t1 - lbr_check_sequence
	.quad	lbr_check_j2 - lbr_check_sequence
	.quad	lbr_check_t2 - lbr_check_sequence
	.quad	lbr_check_c3 - lbr_check_sequence
	.quad	lbr_check_leaf - lbr_check_sequence
	.quad	lbr_check_r3 - lbr_check_sequence
	.quad	lbr_check_a3 - lbr_check_sequence
SYM_DATA_END(lbr_check_offsets)
