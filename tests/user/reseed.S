/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-reseed: reseed the kernel's random number generator now, from its input pool
 * (ioctl(RNDRESEEDCRNG) on /dev/urandom, drivers/char/random.c). A guest restored from a
 * snapshot (scripts/vm.py) resumes with the generator state of the snapshot, the same in every
 * restore; its /init writes fresh bytes from the host to /dev/urandom (mixed into the input
 * pool, not used until the next reseed) and then runs this, so that each restored run draws
 * other random numbers. Exits with 0, or with the failed system call's errno. Needs
 * CAP_SYS_ADMIN. Static, no libc (-nostdlib).
 */
#define SYS_exit	60
#define SYS_open	2
#define SYS_ioctl	16
#define O_WRONLY	1
#define RNDRESEEDCRNG	0x5207			/* _IO('R', 0x07) */

	.text
	.globl	_start
_start:
	movl	$SYS_open, %eax
	leaq	urandom(%rip), %rdi
	movl	$O_WRONLY, %esi
	xorl	%edx, %edx
	syscall					/* rax = fd, or -errno */
	testq	%rax, %rax
	js	.Lfail
	movq	%rax, %rdi			/* rdi = fd */
	movl	$SYS_ioctl, %eax
	movl	$RNDRESEEDCRNG, %esi
	xorl	%edx, %edx
	syscall					/* rax = 0, or -errno */
.Lfail:
	movq	%rax, %rdi
	negq	%rdi				/* exit status: errno (0 on success) */
	movl	$SYS_exit, %eax
	syscall

	.section .rodata
urandom:
	.asciz	"/dev/urandom"
