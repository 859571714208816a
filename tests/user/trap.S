/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-trap: one user-mode exception, chosen by the first letter of argv[1], for the hardening
 * scenario (user-mode exceptions of each kind go through the stubs' user path). Static, no libc.
 *   d  #DE (division by zero)     u  #UD (ud2)     g  #GP (hlt at CPL 3)
 *   s  a load through a non-canonical %rsp (#SS on hardware; QEMU's TCG raises #GP)
 * The kernel kills the process with a signal; without an argument or with another letter it
 * exits 2.
 */
	.text
	.globl	_start
_start:
	cmpq	$2, (%rsp)			/* argc */
	jb	.Lusage
	movq	16(%rsp), %rax			/* argv[1] */
	movzbl	(%rax), %eax
	cmpb	$'d', %al
	je	.Lde
	cmpb	$'u', %al
	je	.Lud
	cmpb	$'g', %al
	je	.Lgp
	cmpb	$'s', %al
	je	.Lss
.Lusage:
	movl	$2, %edi
	movl	$60, %eax			/* exit(2) */
	syscall
.Lde:
	xorl	%ecx, %ecx
	movl	$1, %eax
	cltd
	idivl	%ecx
.Lud:
	ud2
.Lgp:
	hlt
.Lss:
	movabsq	$0x8000000000000000, %rsp
	movq	(%rsp), %rax
	ud2
