/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-kexec KERNEL INITRD CMDLINE: load a kdump capture kernel with kexec_file_load(2)
 * (KEXEC_FILE_ON_CRASH), for the kdump tests (tests/harness.py kdump); busybox has no kexec.
 * Exits 0 when loaded, else with the negated errno (e.g. 22 for EINVAL). Static, no libc.
 * lbr-kexec KERNEL INITRD CMDLINE exec: load it as the next kernel (flags 0) and boot it now,
 * reboot(2) with LINUX_REBOOT_CMD_KEXEC, as `kexec -e` does (no return unless it fails).
 *
 * Stack at _start (the ELF entry): argc, argv[0], argv[1], argv[2], argv[3], argv[4], ...
 */
#define SYS_open		2
#define SYS_exit		60
#define SYS_kexec_file_load	320
#define SYS_reboot		169
#define KEXEC_FILE_ON_CRASH	2
#define LINUX_REBOOT_MAGIC1	0xfee1dead
#define LINUX_REBOOT_MAGIC2	672274793
#define LINUX_REBOOT_CMD_KEXEC	0x45584543

	.text
	.globl	_start
_start:
	movq	(%rsp), %rbx			/* rbx = argc: 4 loads for a crash, 5 boots now */
	cmpq	$4, %rbx
	je	.Lopen
	cmpq	$5, %rbx
	jne	.Lusage
.Lopen:
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
	movq	%r12, %rdi
	movq	%r13, %rsi
	movl	$KEXEC_FILE_ON_CRASH, %r8d
	xorl	%eax, %eax
	cmpq	$5, %rbx
	cmovel	%eax, %r8d			/* exec: flags 0, the next kernel */
	movl	$SYS_kexec_file_load, %eax	/* (kernel fd, initrd fd, len, cmdline, flags) */
	syscall
	testq	%rax, %rax
	jnz	.Lexit
	cmpq	$5, %rbx
	jne	.Lexit
	movl	$SYS_reboot, %eax		/* (magic1, magic2, LINUX_REBOOT_CMD_KEXEC, NULL) */
	movl	$LINUX_REBOOT_MAGIC1, %edi
	movl	$LINUX_REBOOT_MAGIC2, %esi
	movl	$LINUX_REBOOT_CMD_KEXEC, %edx
	xorl	%r10d, %r10d
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
