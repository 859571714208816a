/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-faults: a fixed set of page faults for the entry-cost report (tests/scenarios/cost.py).
 * Static, no libc (-nostdlib).
 *   1. PAGES user-mode #PF: a store to each of PAGES untouched pages of .bss;
 *   2. PAGES kernel-mode #PF inside a user-access region (the ordinary copy_to_user fault that
 *      the kernel resolves): read(/dev/zero) into each of PAGES other untouched pages;
 *   3. BAD kernel-mode #PF inside a user-access region that the kernel fixes up with -EFAULT:
 *      read(/dev/zero) into an unmapped user address.
 * Exits 0 if every read returned what it should, else 1.
 */
#define PAGES	16
#define BAD	4

	.bss
	.balign	4096
touch:	.skip	PAGES * 4096
filled:	.skip	PAGES * 4096

	.section .rodata
zero:	.asciz	"/dev/zero"

	.text
	.globl	_start
_start:
	/* 1. user-mode faults */
	leaq	touch(%rip), %rbx
	movl	$PAGES, %r12d
1:	movb	$1, (%rbx)
	addq	$4096, %rbx
	decl	%r12d
	jnz	1b

	/* open("/dev/zero", O_RDONLY) */
	movl	$2, %eax
	leaq	zero(%rip), %rdi
	xorl	%esi, %esi
	syscall
	testl	%eax, %eax
	js	.Lfail
	movl	%eax, %r13d			/* r13 = fd */

	/* 2. read(fd, page, 4096) into each untouched page: copy_to_user faults, resolved */
	leaq	filled(%rip), %rbx
	movl	$PAGES, %r12d
2:	xorl	%eax, %eax			/* read */
	movl	%r13d, %edi
	movq	%rbx, %rsi
	movl	$4096, %edx
	syscall
	cmpq	$4096, %rax
	jne	.Lfail
	addq	$4096, %rbx
	decl	%r12d
	jnz	2b

	/* 3. read(fd, 0x1000, 16): the copy faults on an unmapped user page, -EFAULT (-14) */
	movl	$BAD, %r12d
3:	xorl	%eax, %eax
	movl	%r13d, %edi
	movl	$0x1000, %esi
	movl	$16, %edx
	syscall
	cmpq	$-14, %rax
	jne	.Lfail
	decl	%r12d
	jnz	3b

	movl	$60, %eax			/* exit(0) */
	xorl	%edi, %edi
	syscall
.Lfail:
	movl	$60, %eax			/* exit(1) */
	movl	$1, %edi
	syscall
