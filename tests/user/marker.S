/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-marker N: leave marker N (decimal, 0 without an argument) in the branch-record emulator's
 * log: `cpuid` with EAX = 0x4c424d4b ("LBMK", tools/lbr-emu MARKER_LEAF) and ECX = N makes
 * lbr-emu log {"event": "marker", "value": N}. Outside the emulator it is a harmless `cpuid`.
 * Static, no libc (-nostdlib).
 *
 * Stack at _start (the ELF entry): argc, argv[0], argv[1], ...
 */
	.text
	.globl	_start
_start:
	xorl	%ecx, %ecx			/* ecx = N */
	cmpq	$2, (%rsp)
	jb	.Lmark				/* no argument: 0 */
	movq	16(%rsp), %rsi			/* argv[1] */
.Ldigit:
	movzbl	(%rsi), %eax
	subl	$'0', %eax
	cmpl	$9, %eax
	ja	.Lmark				/* not a digit (or the NUL): done */
	imull	$10, %ecx, %ecx
	addl	%eax, %ecx
	incq	%rsi
	jmp	.Ldigit
.Lmark:
	movl	$0x4c424d4b, %eax
	cpuid
	movl	$60, %eax			/* exit(0) */
	xorl	%edi, %edi
	syscall
