/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-kexec KERNEL INITRD CMDLINE: load a kdump capture kernel with kexec_file_load(2)
 * (KEXEC_FILE_ON_CRASH), for the kdump test (tests/scenarios/decode.py); busybox has no kexec.
 * Exits 0 when loaded, else with the negated errno (e.g. 22 for EINVAL). Static, no libc.
 *
 * Stack at _start (the ELF entry): argc, argv[0], argv[1], argv[2], argv[3], ...
 */
#define SYS_open		2
#define SYS_exit		60
#define SYS_kexec_file_load	320
#define KEXEC_FILE_ON_CRASH	2

	.text
	.globl	_start
_start:
	cmpq	$4, (%rsp)
	jne	.Lusage
	movl	$SYS_open, %eax			/* open(KERNEL, O_RDONLY) */
	movq	16(%rsp), %rdi
	xorl	%esi, %esi
	syscall
	testq	%rax, %rax
	js	.Lexit
	movq	%rax, %r12			/* r12 = kernel fd */
	movl	$SYS_open, %eax			/* open(INITRD, O_RDONLY) */
	movq	24(%rsp), %rdi
	xorl	%esi, %esi
	syscall
	testq	%rax, %rax
	js	.Lexit
	movq	%rax, %r13			/* r13 = initrd fd */
	movq	32(%rsp), %r10			/* r10 = CMDLINE */
	movq	%r10, %rdx			/* rdx = its length with the NUL */
.Lstrlen:
	cmpb	$0, (%rdx)
	leaq	1(%rdx), %rdx
	jne	.Lstrlen
	subq	%r10, %rdx
	movl	$SYS_kexec_file_load, %eax	/* (kernel fd, initrd fd, len, cmdline, flags) */
	movq	%r12, %rdi
	movq	%r13, %rsi
	movl	$KEXEC_FILE_ON_CRASH, %r8d
	syscall
.Lexit:
	movq	%rax, %rdi			/* 0, or -errno: exit with errno */
	negq	%rdi
	movl	$SYS_exit, %eax
	syscall
.Lusage:
	movl	$SYS_exit, %eax
	movl	$100, %edi
	syscall
