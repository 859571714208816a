/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-nobody PROGRAM [ARGS...]: runs PROGRAM as an unprivileged user (uid and gid 65534, no
 * supplementary groups, every capability gone with root's ids), for the tests of what any user
 * can do (tests/scenarios/capture_emulated.py, fred.py). Exits 2 if the ids cannot be set or
 * did not take, 3 without PROGRAM or if it cannot be executed. Static, no libc.
 */
#define NOBODY	65534

	.text
	.globl	_start
_start:
	movq	%rsp, %rbx			/* argc, argv[], NULL, envp[] */
	movl	$116, %eax			/* setgroups(0, NULL) */
	xorl	%edi, %edi
	xorl	%esi, %esi
	syscall
	testq	%rax, %rax
	jnz	.Lids
	movl	$119, %eax			/* setresgid(NOBODY, NOBODY, NOBODY) */
	movl	$NOBODY, %edi
	movl	%edi, %esi
	movl	%edi, %edx
	syscall
	testq	%rax, %rax
	jnz	.Lids
	movl	$117, %eax			/* setresuid(NOBODY, NOBODY, NOBODY) */
	movl	$NOBODY, %edi
	movl	%edi, %esi
	movl	%edi, %edx
	syscall
	testq	%rax, %rax
	jnz	.Lids
	movl	$102, %eax			/* getuid() */
	syscall
	cmpq	$NOBODY, %rax
	jne	.Lids
	movl	$107, %eax			/* geteuid() */
	syscall
	cmpq	$NOBODY, %rax
	jne	.Lids
	cmpq	$2, (%rbx)			/* argc */
	jb	.Lexec
	movq	16(%rbx), %rdi			/* execve(argv[1], &argv[1], envp) */
	leaq	16(%rbx), %rsi
	movq	(%rbx), %rdx
	leaq	16(%rbx,%rdx,8), %rdx		/* envp: after argv[argc] */
	movl	$59, %eax
	syscall
.Lexec:
	movl	$3, %edi
	jmp	.Lexit
.Lids:
	movl	$2, %edi
.Lexit:
	movl	$60, %eax			/* exit */
	syscall
