/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-high: kernel-mode page faults on user addresses above 2^47 (5-level paging), for the
 * hardening scenario. Static, no libc (-nostdlib).
 * Maps PAGES pages at 2^52 (MAP_FIXED_NOREPLACE: only 5-level paging has user addresses there),
 * then read()s /dev/zero into each: every read faults in copy_to_user on a user address whose
 * bit 47 is set, with RFLAGS.AC set under SMAP. Exits 0 when every read filled its page, 2 when
 * the kernel would not map above 2^47 (no LA57), 1 on any other failure.
 */
#define PAGES	4
#define HIGH	(1 << 52)

	.section .rodata
zero:	.asciz	"/dev/zero"

	.text
	.globl	_start
_start:
	/* mmap(HIGH, PAGES * 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED_NOREPLACE, -1, 0) */
	movl	$9, %eax
	movabsq	$HIGH, %rdi
	movl	$PAGES * 4096, %esi
	movl	$3, %edx
	movl	$0x100022, %r10d
	movq	$-1, %r8
	xorl	%r9d, %r9d
	syscall
	movabsq	$HIGH, %rdi
	cmpq	%rdi, %rax
	jne	.Lno_la57
	movq	%rax, %rbx			/* rbx = the mapping */

	/* open("/dev/zero", O_RDONLY) */
	movl	$2, %eax
	leaq	zero(%rip), %rdi
	xorl	%esi, %esi
	syscall
	testl	%eax, %eax
	js	.Lfail
	movl	%eax, %r13d			/* r13 = fd */

	movl	$PAGES, %r12d
1:	xorl	%eax, %eax			/* read(fd, page, 4096) */
	movl	%r13d, %edi
	movq	%rbx, %rsi
	movl	$4096, %edx
	syscall
	cmpq	$4096, %rax
	jne	.Lfail
	addq	$4096, %rbx
	decl	%r12d
	jnz	1b

	xorl	%edi, %edi
	jmp	.Lexit
.Lno_la57:
	movl	$2, %edi
	jmp	.Lexit
.Lfail:
	movl	$1, %edi
.Lexit:
	movl	$60, %eax
	syscall
