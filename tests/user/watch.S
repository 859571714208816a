/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-watch: a hardware watchpoint of a user's own, the way any user may set one at the default
 * perf_event_paranoid (2): perf_event_open() with PERF_TYPE_BREAKPOINT, a write breakpoint on 8
 * bytes of its own memory, user mode only (exclude_kernel, exclude_hv), counting. Then it writes
 * there HITS times (each write a user-mode #DB, with DR7 set, on the CPU it runs on) and exits
 * with the count perf read back: HITS if every write trapped. Exits 100 + errno if the event
 * cannot be opened, 99 if the count cannot be read. For the re-arm tests
 * (tests/scenarios/capture_emulated.py), run through lbr-nobody. Static, no libc.
 */
#define HITS			5
#define PERF_TYPE_BREAKPOINT	5
#define HW_BREAKPOINT_W		2
#define HW_BREAKPOINT_LEN_8	8
#define EXCLUDE_KERNEL_HV	((1 << 5) | (1 << 6))	/* perf_event_attr flag bits */

	.data
	.balign	8
watched:
	.quad	0
count:
	.quad	0
/* struct perf_event_attr, PERF_ATTR_SIZE_VER1 (72 bytes): the fields up to bp_len. */
attr:
	.long	PERF_TYPE_BREAKPOINT		/* 0 type */
	.long	72				/* 4 size */
	.quad	0				/* 8 config */
	.quad	0				/* 16 sample_period: counting */
	.quad	0				/* 24 sample_type */
	.quad	0				/* 32 read_format */
	.quad	EXCLUDE_KERNEL_HV		/* 40 flags */
	.long	0				/* 48 wakeup_events */
	.long	HW_BREAKPOINT_W			/* 52 bp_type */
	.quad	watched				/* 56 bp_addr */
	.quad	HW_BREAKPOINT_LEN_8		/* 64 bp_len */

	.text
	.globl	_start
_start:
	movl	$298, %eax			/* perf_event_open(&attr, 0, -1, -1, 0) */
	leaq	attr(%rip), %rdi
	xorl	%esi, %esi
	movq	$-1, %rdx
	movq	$-1, %r10
	xorl	%r8d, %r8d
	syscall
	testq	%rax, %rax
	js	.Lopen_failed
	movq	%rax, %rbx			/* the event's fd */
	movl	$HITS, %ecx
.Lwrite:
	movq	%rcx, watched(%rip)		/* a #DB after each */
	decl	%ecx
	jnz	.Lwrite
	xorl	%eax, %eax			/* read(fd, &count, 8) */
	movq	%rbx, %rdi
	leaq	count(%rip), %rsi
	movl	$8, %edx
	syscall
	cmpq	$8, %rax
	jne	.Lread_failed
	movq	count(%rip), %rdi
	jmp	.Lexit
.Lopen_failed:
	negq	%rax
	leaq	100(%rax), %rdi
	jmp	.Lexit
.Lread_failed:
	movl	$99, %edi
.Lexit:
	movl	$60, %eax			/* exit */
	syscall
