/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-badiret: a return to user mode whose IRET faults, in kernel mode, for the page-table
 * isolation scenario (tests/scenarios/pti.py). rt_sigreturn with a hand-made frame asks for an SS
 * selector beyond the GDT's limit (uc_flags UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS, so the
 * kernel keeps it: arch/x86/kernel/signal_64.c restore_sigcontext); the kernel's IRETQ to user
 * mode then raises #GP in kernel mode, and with PTI it does so after SWITCH_TO_USER_CR3: a
 * kernel-mode exception under the user page tables (arch/x86/entry/entry_64.S, error_entry's
 * bad-IRET fixup turns it into a #GP of the user process: SIGSEGV). What the x86 selftests'
 * sigreturn test does. Static, no libc (-nostdlib).
 *
 * The frame at %rsp when `syscall` runs is struct rt_sigframe without its pretcode:
 * struct ucontext (uc_flags 0, uc_link 8, uc_stack 16..40, uc_mcontext = struct sigcontext at
 * 40: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp at 160, rip 168, eflags 176, cs 184, gs
 * 186, fs 188, ss 190, err, trapno, oldmask, cr2, fpstate 224 (0: no FPU state), reserved;
 * uc_sigmask at 296), then siginfo. 512 bytes, zeroed, is room for it.
 */
#define UC_FLAGS	0x6		/* UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS */
#define USER_CS		0x33		/* __USER_CS */
#define BAD_SS		0xfff3		/* GDT index 8190, RPL 3: beyond the GDT's limit */

	.bss
	.balign	16
frame:	.skip	512
	.skip	4096
stack_top:

	.text
	.globl	_start
_start:
	leaq	frame(%rip), %rsp
	movq	$UC_FLAGS, 0(%rsp)
	leaq	stack_top(%rip), %rax
	movq	%rax, 160(%rsp)			/* rsp after the return */
	leaq	.Lnever(%rip), %rax
	movq	%rax, 168(%rsp)			/* rip */
	movq	$0x202, 176(%rsp)		/* eflags: IF */
	movw	$USER_CS, 184(%rsp)
	movw	$BAD_SS, 190(%rsp)
	movl	$15, %eax			/* rt_sigreturn */
	syscall
.Lnever:
	/* Reached only if the return did not fault: exit(3). */
	movl	$60, %eax
	movl	$3, %edi
	syscall
