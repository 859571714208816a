/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lbr-iretfault: what any unprivileged user can do to make the kernel take a kernel-mode
 * exception at will: a return to user mode whose IRET faults (tests/scenarios/hardening.py). It
 * drops to uid and gid 65534 first (it fails, exit 1, if it is still root after that), installs
 * three LDT entries (modify_ldt) and handlers for SIGSEGV and SIGBUS, then asks for each of four
 * bad returns ROUNDS times with rt_sigreturn and a hand-made frame (uc_flags UC_SIGCONTEXT_SS |
 * UC_STRICT_RESTORE_SS, so that the kernel keeps the SS asked for; the x86 selftests' sigreturn
 * test does the same):
 *   gp  SS beyond the GDT's limit: #GP at the kernel's IRETQ (native_irq_return_iret);
 *   np  CS a not-present LDT code segment: #NP there;
 *   ss  SS a not-present LDT data segment: an LDT stack segment makes the kernel return through
 *       espfix64 (native_irq_return_ldt), whose stack is read-only: the #SS cannot be delivered
 *       there and becomes a #DF (without espfix64, a #SS at the IRETQ);
 *   df  SS a present 16-bit LDT data segment and CS beyond the GDT: espfix64 again, its #GP
 *       becomes a #DF;
 *   fx  a good return, but the frame's FPU state (fpstate, 64-byte aligned, XSAVE layout with
 *       both magics, FP and SSE, 576 bytes) has XSTATE_BV bit 63 set, which XCR0 never has: the
 *       kernel's XRSTOR of it (xrstor_from_user_sigframe()) faults with #GP in kernel mode
 *       inside a user-access region (AC set), and rt_sigreturn fails with SIGSEGV
 *       (arch/x86/kernel/fpu/signal.c). (A bad MXCSR would do on hardware, but QEMU's TCG does
 *       not check it.)
 * Then, ROUNDS times, a segment load the kernel makes with a user's selector: DS loaded with a
 * present LDT data segment (entry 3), then that entry made not present (modify_ldt), whose
 * refresh_ldt_segments() reloads DS: #NP in kernel mode, fixed up by loading 0 (loadsegment()'s
 * EX_TYPE_ZERO_REG); counted as `sg` when DS reads 0 after it.
 * Then GS_ROUNDS times the same with GS, which refresh_ldt_segments() leaves alone: GS loaded
 * with entry 3, the entry made not present, then a 1 ms nanosleep, whose context switch back to
 * this task reloads GS from the selector saved at the switch away (__switch_to(),
 * load_seg_legacy(): a selector above 3 is loaded with load_gs_index(): with FRED the LKGS
 * instruction, otherwise a MOV to GS between two SWAPGS, with the user's GS base in place):
 * #NP in kernel mode, fixed up by loading 0 (arch/x86/include/asm/gsseg.h, entry_64.S
 * asm_load_gs_index); counted as `gs` when GS reads 0 after it.
 * The kernel hands each fault back to the process (error_entry's bad-IRET fixup; espfix's #DF
 * turned into a #GP by exc_double_fault) as SIGSEGV or SIGBUS; the handler counts it and goes on
 * with the next round (it never returns: SA_NODEFER, so the signal is never blocked). Prints
 * `lbr-iretfault: uid=U gp=N np=N ss=N df=N fx=N sg=N gs=N` (signals handled per kind,
 * fixed-up reloads) and exits 0; exit 3 if
 * a bad return did not fault. Static, no libc (-nostdlib).
 *
 * The frame at %rsp when `syscall` runs is struct rt_sigframe without its pretcode (see
 * lbr-badiret): uc_flags at 0, sigcontext from 40 (rsp 160, rip 168, eflags 176, cs 184, ss 190,
 * fpstate 224: 0, no FPU state). 512 bytes, zeroed, is room for it.
 */
#define ROUNDS		10000
#define GS_ROUNDS	1000		/* each sleeps 1 ms */
#define UC_FLAGS	0x6		/* UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS */
#define USER_CS		0x33		/* __USER_CS */
#define USER_DS		0x2b		/* __USER_DS */
#define BAD_SEL		0xfff3		/* GDT index 8190, RPL 3: beyond the GDT's limit */
#define LDT_CODE_NP	0x07		/* LDT entry 0, RPL 3 */
#define LDT_DATA_NP	0x0f		/* LDT entry 1 */
#define LDT_DATA16	0x17		/* LDT entry 2 */
#define NOBODY		65534
#define SIGBUS		7
#define SIGSEGV		11
#define SA_FLAGS	0x44000000	/* SA_NODEFER | SA_RESTORER */
#define KINDS		5
#define FX		4		/* the kind with an FPU state */
#define LDT_DATA3	0x1f		/* LDT entry 3, RPL 3 */
#define XSTATE_SIZE	576		/* the legacy area and the XSAVE header */

	.section .rodata
	.balign	8
/* struct user_desc: entry_number, base_addr, limit, flags (bit 0 seg_32bit, 1-2 contents,
 * 3 read_exec_only, 4 limit_in_pages, 5 seg_not_present, 6 useable). */
ldt:	.long	0, 0, 0xfffff, 0x75	/* 32-bit code, 4 KiB pages, not present */
	.long	1, 0, 0xfffff, 0x71	/* 32-bit data, 4 KiB pages, not present */
	.long	2, 0, 0xffff, 0x40	/* 16-bit data, byte granular, present */
seg_on:	.long	3, 0, 0xfffff, 0x51	/* 32-bit data, 4 KiB pages, present */
seg_off: .long	3, 0, 0xfffff, 0x71	/* the same, not present */
/* struct timespec for nanosleep(): 1 ms */
nap:	.quad	0, 1000000
/* Per kind: the CS and SS the return asks for. */
kinds:	.short	USER_CS, BAD_SEL	/* gp */
	.short	LDT_CODE_NP, USER_DS	/* np */
	.short	USER_CS, LDT_DATA_NP	/* ss */
	.short	BAD_SEL, LDT_DATA16	/* df */
	.short	USER_CS, USER_DS	/* fx: with fpbuf as the FPU state */
names:	.ascii	" gp= np= ss= df= fx= sg= gs="
head:	.ascii	"lbr-iretfault: uid="
head_end:

	.data
	.balign	8
/* struct sigaction as the kernel takes it: handler, flags, restorer, mask. */
act:	.quad	handler, SA_FLAGS, restorer, 0

	.bss
	.balign	16
count:	.skip	(KINDS + 2) * 8		/* and the fixed-up DS and GS reloads */
kind:	.skip	8
uid:	.skip	8
round:	.skip	8
line:	.skip	128
frame:	.skip	512
	.skip	8192
sig_stack_top:				/* the rsp each bad return asks for: the handler runs here */
	.skip	8192
main_stack_top:
	.balign	64
fpbuf:	.skip	8192			/* the FPU state of kind fx (filled at start) */

	.text
	.globl	_start
_start:
	leaq	main_stack_top(%rip), %rsp
	/* setgroups(0, NULL), setgid(NOBODY), setuid(NOBODY); then the real and effective uid. */
	movl	$116, %eax
	xorl	%edi, %edi
	xorl	%esi, %esi
	syscall
	movl	$106, %eax
	movl	$NOBODY, %edi
	syscall
	movl	$105, %eax
	movl	$NOBODY, %edi
	syscall
	movl	$107, %eax			/* geteuid */
	syscall
	testl	%eax, %eax
	jz	.Lfail
	movl	$102, %eax			/* getuid */
	syscall
	testl	%eax, %eax
	jz	.Lfail
	movq	%rax, uid(%rip)			/* kept for the report (the bad returns zero the registers) */

	/* modify_ldt(1, &ldt[i], 16) for the three entries */
	xorl	%ebx, %ebx
1:	movl	$154, %eax
	movl	$1, %edi
	leaq	ldt(%rip), %rsi
	addq	%rbx, %rsi
	movl	$16, %edx
	syscall
	testl	%eax, %eax
	jnz	.Lfail
	addq	$16, %rbx
	cmpq	$48, %rbx
	jb	1b

	/* rt_sigaction(SIGSEGV, then SIGBUS, &act, NULL, 8) */
	movl	$SIGSEGV, %ebx
1:	movl	$13, %eax
	movl	%ebx, %edi
	leaq	act(%rip), %rsi
	xorl	%edx, %edx
	movl	$8, %r10d
	syscall
	testl	%eax, %eax
	jnz	.Lfail
	cmpl	$SIGBUS, %ebx
	movl	$SIGBUS, %ebx
	jne	1b

	/*
	 * Kind fx's FPU state: struct _fpx_sw_bytes in the legacy area's software-reserved bytes
	 * (464: magic1, extended_size, xfeatures, xstate_size), the XSAVE header (512: XSTATE_BV),
	 * magic2 right after the state.
	 */
	leaq	fpbuf(%rip), %rax
	movl	$0x46505853, 464(%rax)		/* FP_XSTATE_MAGIC1 */
	movl	$(XSTATE_SIZE + 4), 468(%rax)	/* extended_size: the state and magic2 */
	movq	$3, 472(%rax)			/* xfeatures: FP | SSE */
	movl	$XSTATE_SIZE, 480(%rax)		/* xstate_size */
	movabsq	$0x8000000000000003, %rcx
	movq	%rcx, 512(%rax)			/* XSTATE_BV: FP | SSE | bit 63 */
	movl	$0x46505845, XSTATE_SIZE(%rax)	/* FP_XSTATE_MAGIC2 */

	movq	$0, kind(%rip)
.Lkind:
	movq	$0, round(%rip)
.Lnext:					/* the handler comes back here, on any stack */
	leaq	main_stack_top(%rip), %rsp
	movq	round(%rip), %rax
	cmpq	$ROUNDS, %rax
	jae	.Lkind_done
	incq	round(%rip)
	leaq	frame(%rip), %rdi
	movl	$64, %ecx
	xorl	%eax, %eax
	rep stosq
	leaq	frame(%rip), %rsp
	movq	$UC_FLAGS, 0(%rsp)
	leaq	sig_stack_top(%rip), %rax
	movq	%rax, 160(%rsp)			/* rsp after the return */
	leaq	.Lnever(%rip), %rax
	movq	%rax, 168(%rsp)			/* rip */
	movq	$0x202, 176(%rsp)		/* eflags: IF */
	movq	kind(%rip), %rax
	leaq	kinds(%rip), %rcx
	movw	(%rcx,%rax,4), %dx
	movw	%dx, 184(%rsp)			/* cs */
	movw	2(%rcx,%rax,4), %dx
	movw	%dx, 190(%rsp)			/* ss */
	cmpq	$FX, %rax
	jne	1f
	leaq	fpbuf(%rip), %rax
	movq	%rax, 224(%rsp)			/* fpstate */
1:
	movl	$15, %eax			/* rt_sigreturn */
	syscall
.Lnever:
	/* Reached only if the return did not fault: exit(3). */
	movl	$60, %eax
	movl	$3, %edi
	syscall
.Lkind_done:
	incq	kind(%rip)
	cmpq	$KINDS, kind(%rip)
	jb	.Lkind

	/* The segment reloads (registers are ours again: no bad return since). */
	movl	$ROUNDS, %r12d
3:	leaq	seg_on(%rip), %rsi
	call	write_entry3
	movl	$LDT_DATA3, %eax
	movl	%eax, %ds
	leaq	seg_off(%rip), %rsi		/* DS reloaded, faults */
	call	write_entry3
	movl	%ds, %eax
	testl	%eax, %eax
	jnz	4f
	incq	count+KINDS*8(%rip)
4:	decl	%r12d
	jnz	3b

	/* The GS reloads, each at the context switch back from a nanosleep. */
	movl	$GS_ROUNDS, %r12d
5:	leaq	seg_on(%rip), %rsi
	call	write_entry3
	movl	$LDT_DATA3, %eax
	movl	%eax, %gs
	leaq	seg_off(%rip), %rsi		/* GS left as it is */
	call	write_entry3
	movl	$35, %eax			/* nanosleep(&nap, NULL): switched away and back */
	leaq	nap(%rip), %rdi
	xorl	%esi, %esi
	syscall
	testl	%eax, %eax
	jnz	.Lfail
	movl	%gs, %eax
	testl	%eax, %eax
	jnz	6f
	incq	count+(KINDS+1)*8(%rip)
6:	decl	%r12d
	jnz	5b

	/* The report line. */
	leaq	line(%rip), %rdi
	leaq	head(%rip), %rsi
	movl	$(head_end - head), %ecx
	rep movsb
	movq	uid(%rip), %rax
	call	put_number
	xorl	%ebx, %ebx
2:	leaq	names(%rip), %rsi
	leaq	(%rsi,%rbx,4), %rsi
	movl	$4, %ecx
	rep movsb
	leaq	count(%rip), %rax
	movq	(%rax,%rbx,8), %rax
	call	put_number
	incq	%rbx
	cmpq	$KINDS + 2, %rbx
	jb	2b
	movb	$10, (%rdi)
	incq	%rdi
	leaq	line(%rip), %rsi
	movq	%rdi, %rdx
	subq	%rsi, %rdx
	movl	$1, %eax			/* write(1, line, len) */
	movl	$1, %edi
	syscall
	movl	$60, %eax
	xorl	%edi, %edi
	syscall
.Lfail:
	movl	$60, %eax
	movl	$1, %edi
	syscall

/* write_entry3: modify_ldt(1, rsi, 16), LDT entry 3 as *rsi says (seg_on or seg_off); exit(1)
 * if it fails. Clobbers rax, rcx, rdx, rdi, r11. */
write_entry3:
	movl	$154, %eax
	movl	$1, %edi
	movl	$16, %edx
	syscall
	testl	%eax, %eax
	jnz	.Lfail
	ret

/* put_number: rax in decimal at rdi, rdi advanced past it. Clobbers rax, rcx, rdx, r8. */
put_number:
	movq	%rsp, %r8
	movl	$10, %ecx
3:	xorl	%edx, %edx
	divq	%rcx
	addb	$'0', %dl
	decq	%rsp
	movb	%dl, (%rsp)
	testq	%rax, %rax
	jnz	3b
4:	movb	(%rsp), %al
	movb	%al, (%rdi)
	incq	%rdi
	incq	%rsp
	cmpq	%r8, %rsp
	jb	4b
	ret

/* SIGSEGV and SIGBUS: count the fault of this kind, go on with the next round. */
handler:
	movq	kind(%rip), %rax
	leaq	count(%rip), %rcx
	incq	(%rcx,%rax,8)
	jmp	.Lnext

/* SA_RESTORER needs one; the handler never returns. */
restorer:
	movl	$60, %eax
	movl	$4, %edi
	syscall
