/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Exception entry stubs: freeze the branch recorder at the first instructions of a kernel-mode
 * exception, copy its records into this CPU's snapshot ring, restore the recorder and jump on to
 * the kernel's original handler with every register and the stack as the CPU left them.
 *
 * The IDT gates of the hooked vectors point here only while lbr-dump is armed (src/idt.rs). The
 * rules these stubs follow are those of ../shared/reference/entry-hazards.md:
 *  - no compiled code is called and %gs is never used: the CPU is found with `lsl` of the
 *    CPUNODE segment (asm/cpu.S), the snapshot area through lbr_dump_capture, which the Rust side
 *    fills before any gate points here and does not change while one does;
 *  - on the path a crash takes (kernel mode), no taken branch of ours comes before the WRMSR
 *    that freezes the recorder: every conditional jump before it is laid out so that it falls
 *    through for a crash, so the newest record is the exception itself;
 *  - user-mode exceptions (CS.RPL != 0) go straight on touching only the original-handler slot;
 *    so does a #PF on a user address with the saved RFLAGS.AC set (a fault inside a user-access
 *    region: copy_from_user and friends). Without SMAP, AC is never set and such faults are
 *    captured (README: cost);
 *  - #DF runs on its IST stack and its saved CS:RIP is architecturally undefined: it is always
 *    captured, the CS test is not made;
 *  - a capture that faults, or a nested exception during a capture, finds this CPU's busy flag
 *    set and does not capture (the test falls through in the usual case);
 *  - the control MSR is re-read after the capture: if it is not the frozen value we wrote,
 *    another owner (a perf NMI) changed it, the snapshot is marked torn and the value is left.
 *
 * Stack at entry, as the CPU pushed it (E = 8 for vectors with an error code, else 0):
 *   E+32 SS, E+24 RSP, E+16 RFLAGS, E+8 CS, E+0 RIP, [0 error code]
 * Every register is live (the original handler must see them as they are), so each one used is
 * pushed and popped. Interrupts are off (interrupt gates), so this CPU cannot be migrated.
 */
#include <linux/linkage.h>
#include <asm/asm.h>
#include <asm/nospec-branch.h>
#include <asm/processor-flags.h>
#include <asm/segment.h>
#include <asm/smap.h>
#include <asm/unwind_hints.h>

#include "layout.h"

/*
 * struct capture_config (src/capture.rs CaptureConfig): written by Rust while no gate points
 * here, read-only for the stubs.
 */
#define CFG_CPU0	0x00	/* address of CPU 0's block in the snapshot area */
#define CFG_BLOCK_SIZE	0x08	/* bytes per CPU block */
#define CFG_NR_CPUS	0x10	/* CPU blocks; a CPU number >= this is not captured */
#define CFG_RING_MASK	0x18	/* snapshots per CPU - 1 (a power of two) */
#define CFG_SNAP_SIZE	0x20	/* bytes per snapshot */
#define CFG_MSRS	0x28	/* address of the u32 MSR list */
#define CFG_NR_VALUES	0x30	/* entries in the MSR list (>= 1) */
#define CFG_CTL_MSR	0x38	/* the recorder's control MSR */
#define CFG_MASK	0x40	/* its enable bit(s): cleared to freeze */
#define CFG_ARMED	0x48	/* the value lbr-dump wrote when arming (re-arm target) */
#define CFG_SEQ		0x50	/* last sequence number handed out (lock xadd) */
#define CFG_SIZE	0x58

	.data
	.balign 64
SYM_DATA_START(lbr_dump_capture)
	.fill	CFG_SIZE / 8, 8, 0
SYM_DATA_END(lbr_dump_capture)

/* The original handler of each vector, saved from the IDT before a gate is pointed here. */
	.balign 64
SYM_DATA_START(lbr_dump_orig)
	.fill	32, 8, 0
SYM_DATA_END(lbr_dump_orig)

/*
 * Stack offsets once the kernel-mode path has pushed everything (see the pushes below):
 *   0 r10, 8 r9, 16 r8, 24 rdi, 32 rsi, 40 control MSR value at entry, 48 rdx, 56 rcx, 64 rax,
 *   72 the CPU's frame.
 */
#define S_ENTRY		40
#define S_FRAME		72

	.text
.macro LBR_STUB vec:req err:req
SYM_CODE_START(lbr_dump_stub_\vec)
	UNWIND_HINT_IRET_ENTRY offset=\err*8
	ENDBR
.if \vec != 8
	testb	$3, \err*8+8(%rsp)		/* CS.RPL: user mode? */
	jnz	.Lgo_on_\vec			/* yes: straight on (not taken for kernel mode) */
.endif
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	ASM_CLAC				/* AC may be set inside a user-access region */
	cld					/* DF may be set (memmove) */
.if \vec == 14
	/*
	 * A fault on a user address with the saved RFLAGS.AC set is a user-access fault that the
	 * kernel fixes up: not a crash, not captured. Both tests are combined without a branch, so
	 * that the one jump below is taken only in that case.
	 */
	movq	%cr2, %rax
	shrq	$47, %rax			/* ZF: CR2 in the lower (user) half */
	setz	%cl
	testl	$X86_EFLAGS_AC, 24+\err*8+16(%rsp)	/* saved RFLAGS.AC */
	setnz	%dl
	andb	%dl, %cl
	jnz	.Lpass_\vec
.endif
	/* Freeze: entry = rdmsr(ctl); wrmsr(ctl, entry & ~mask). No taken branch before this. */
	movl	lbr_dump_capture+CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value at entry */
	pushq	%rax				/* S_ENTRY */
	movq	lbr_dump_capture+CFG_MASK(%rip), %rdx
	notq	%rdx
	andq	%rdx, %rax			/* rax = frozen value */
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr					/* recording stops here */

	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10

	/* This CPU's block, found without %gs (see asm/cpu.S). */
	movq	$__CPUNODE_SEG, %r9
	lsl	%r9, %r9
	andq	$VDSO_CPUNODE_MASK, %r9
	cmpq	lbr_dump_capture+CFG_NR_CPUS(%rip), %r9
	jae	.Lunfreeze_\vec
	imulq	lbr_dump_capture+CFG_BLOCK_SIZE(%rip), %r9
	addq	lbr_dump_capture+CFG_CPU0(%rip), %r9	/* r9 = CPU block */
	cmpl	$0, LBR_CPU_BUSY(%r9)
	jne	.Lunfreeze_\vec			/* nested in a capture: no capture */
	movl	$1, LBR_CPU_BUSY(%r9)

	/* rsi = snapshot slot count % ring; invalidated (seq 0) until it is complete. */
	movq	LBR_CPU_COUNT(%r9), %rsi
	andq	lbr_dump_capture+CFG_RING_MASK(%rip), %rsi
	imulq	lbr_dump_capture+CFG_SNAP_SIZE(%rip), %rsi
	leaq	LBR_CPU_HEADER_SIZE(%r9,%rsi), %rsi
	movq	$0, LBR_SNAP_SEQ(%rsi)
	movl	$\vec, LBR_SNAP_VECTOR(%rsi)
.if \err
	movq	S_FRAME(%rsp), %rax
.else
	xorl	%eax, %eax
.endif
	movq	%rax, LBR_SNAP_ERROR(%rsi)
	leaq	S_FRAME+\err*8(%rsp), %rax
	movq	%rax, LBR_SNAP_FRAME(%rsi)
	movq	S_FRAME+\err*8(%rsp), %rax
	movq	%rax, LBR_SNAP_RIP(%rsi)
	movq	S_FRAME+\err*8+24(%rsp), %rax
	movq	%rax, LBR_SNAP_RSP(%rsi)
	movq	%cr2, %rax
	movq	%rax, LBR_SNAP_CR2(%rsi)
	movq	S_ENTRY(%rsp), %rax
	movq	%rax, LBR_SNAP_CTL_ENTRY(%rsi)

	/* The records: values[i] = rdmsr(msrs[i]) for the flat list Rust built when arming. */
	movq	lbr_dump_capture+CFG_MSRS(%rip), %rdi
	movq	lbr_dump_capture+CFG_NR_VALUES(%rip), %r8
	leaq	LBR_SNAP_VALUES(%rsi), %r10
.Lread_\vec:
	movl	(%rdi), %ecx
	rdmsr
	movl	%eax, (%r10)
	movl	%edx, 4(%r10)
	addq	$4, %rdi
	addq	$8, %r10
	decq	%r8
	jnz	.Lread_\vec

	/* Did anyone change the control MSR under us? rax = after, r8 = frozen value we wrote. */
	movl	lbr_dump_capture+CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax
	movq	%rax, LBR_SNAP_CTL_AFTER(%rsi)
	movq	lbr_dump_capture+CFG_MASK(%rip), %rdx
	notq	%rdx
	movq	S_ENTRY(%rsp), %r8
	andq	%rdx, %r8			/* r8 = frozen value */
	movl	$(LBR_SNAP_COMPLETE | LBR_SNAP_TORN), %edi
	cmpq	%r8, %rax
	jne	.Lstate_\vec			/* torn: leave the other owner's value */

	/*
	 * Restore the entry value; but if it is lbr-dump's armed value with only the enable bit
	 * cleared (#DB clears it, so does a resume), re-arm: write the armed value (README: re-arm
	 * policy). rdx still holds ~mask.
	 */
	movq	S_ENTRY(%rsp), %rax
	movq	lbr_dump_capture+CFG_ARMED(%rip), %r10
	andq	%r10, %rdx			/* rdx = armed & ~mask */
	cmpq	%rdx, %rax
	cmoveq	%r10, %rax
	movl	$LBR_SNAP_COMPLETE, %edi
	movq	S_ENTRY(%rsp), %rdx
	testq	lbr_dump_capture+CFG_MASK(%rip), %rdx
	movl	$(LBR_SNAP_COMPLETE | LBR_SNAP_WAS_OFF), %edx
	cmovzl	%edx, %edi			/* recording was off at entry */
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr
.Lstate_\vec:
	movl	%edi, LBR_SNAP_STATE(%rsi)
	/* Publish: the sequence number is written last; then the CPU's count, then not busy. */
	movl	$1, %eax
	lock xaddq %rax, lbr_dump_capture+CFG_SEQ(%rip)
	incq	%rax
	movq	%rax, LBR_SNAP_SEQ(%rsi)
	incq	LBR_CPU_COUNT(%r9)
	movl	$0, LBR_CPU_BUSY(%r9)
	jmp	.Lpop_\vec

.Lunfreeze_\vec:
	/* No capture (CPU out of range, or nested): put the control value back as it was. */
	movl	lbr_dump_capture+CFG_CTL_MSR(%rip), %ecx
	movq	S_ENTRY(%rsp), %rax
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr
.Lpop_\vec:
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	addq	$8, %rsp			/* S_ENTRY */
.Lpass_\vec:
	popq	%rdx
	popq	%rcx
	popq	%rax
.Lgo_on_\vec:
	/* Every register and the frame are as the CPU left them: on to the kernel's handler. */
	ANNOTATE_RETPOLINE_SAFE
	jmp	*lbr_dump_orig+\vec*8(%rip)
SYM_CODE_END(lbr_dump_stub_\vec)
_ASM_NOKPROBE(lbr_dump_stub_\vec)
.endm

/*
 * #DB (vector 1): not captured (it is not a crash), only re-armed. Delivery of #DB clears the
 * recorder's enable bit (DEBUGCTL.LBR; Arch LBR: LBREn): a ptrace single-step, a hardware
 * breakpoint or a kprobe would otherwise leave recording off until the next capture. If the
 * control MSR holds lbr-dump's armed value with only the enable bit cleared, write the armed value
 * back; any other value (another owner's, or recording still on) is left alone. Any mode, kernel
 * or user: the test needs no segment or stack of the interrupted context.
 *
 * Stack at entry (IST stack in kernel and user mode): SS, RSP, RFLAGS, CS, RIP; no error code.
 * Every register is live: rax, rcx and rdx (RDMSR/WRMSR) are pushed and popped.
 */
SYM_CODE_START(lbr_dump_rearm_1)
	UNWIND_HINT_IRET_ENTRY
	ENDBR
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	movl	lbr_dump_capture+CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value now */
	movq	lbr_dump_capture+CFG_MASK(%rip), %rdx
	notq	%rdx
	andq	lbr_dump_capture+CFG_ARMED(%rip), %rdx	/* rdx = armed & ~mask */
	cmpq	%rdx, %rax
	jne	.Lrearm_done			/* not ours with the switch cleared: leave it */
	movq	lbr_dump_capture+CFG_ARMED(%rip), %rax
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr					/* recording on again */
.Lrearm_done:
	popq	%rdx
	popq	%rcx
	popq	%rax
	ANNOTATE_RETPOLINE_SAFE
	jmp	*lbr_dump_orig+1*8(%rip)
SYM_CODE_END(lbr_dump_rearm_1)
_ASM_NOKPROBE(lbr_dump_rearm_1)

/* The hooked vectors and whether the CPU pushes an error code. */
LBR_STUB 0 0		/* #DE */
LBR_STUB 6 0		/* #UD */
LBR_STUB 8 1		/* #DF (IST) */
LBR_STUB 11 1		/* #NP */
LBR_STUB 12 1		/* #SS */
LBR_STUB 13 1		/* #GP */
LBR_STUB 14 1		/* #PF */
LBR_STUB 17 1		/* #AC */
LBR_STUB 21 1		/* #CP */

/* Stub address by vector (0: not hookable), for src/idt.rs; vector 1 only re-arms. */
	.section .rodata
	.balign 8
SYM_DATA_START(lbr_dump_stubs)
	.quad lbr_dump_stub_0, lbr_dump_rearm_1, 0, 0, 0, 0, lbr_dump_stub_6, 0
	.quad lbr_dump_stub_8, 0, 0, lbr_dump_stub_11, lbr_dump_stub_12, lbr_dump_stub_13
	.quad lbr_dump_stub_14, 0, 0, lbr_dump_stub_17, 0, 0, 0, lbr_dump_stub_21
	.fill 10, 8, 0
SYM_DATA_END(lbr_dump_stubs)
