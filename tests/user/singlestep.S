/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-singlestep: a user process that single-steps itself, for the re-arm test
 * (tests/scenarios/capture_emulated.py). Setting RFLAGS.TF makes the CPU raise #DB after the next
 * instruction, which is what a ptrace single-step does to a traced process; #DB delivery clears
 * the branch recorder's switch. No signal handler: the first #DB ends the process with SIGTRAP
 * ("Trace/breakpoint trap"), after the kernel took the #DB. Static, no libc (-nostdlib).
 */
	.text
	.globl	_start
_start:
	pushfq
	orq	$0x100, (%rsp)		/* RFLAGS.TF */
	popfq				/* TF takes effect after the next instruction */
	nop				/* #DB after this one */
	nop
	movl	$60, %eax		/* exit(0): reached only if no #DB came */
	xorl	%edi, %edi
	syscall
