/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Exception entry stubs: freeze the branch recorder at the first instructions of a kernel-mode
 * exception, copy its records into this CPU's snapshot ring, restore the recorder and jump on to
 * the kernel's original handler with every register and the stack as the CPU left them.
 *
 * The IDT gates of the hooked vectors point here only while lbr-dump is armed (src/idt.rs). The
 * rules (Documentation/lbr-dump/design.rst "How capture works"):
 *  - no compiled code is called and the exception and stop stubs never use %gs (the
 *    trampolines called from C, on the kernel's GS, use it through CALL_DEPTH_ACCOUNT): the CPU
 *    is found with `lsl` of the CPUNODE segment (asm/cpu.S), the snapshot area through
 *    lbr_dump_capture, which the Rust side fills before any gate points here and does not change
 *    while one does;
 *  - on the path a crash takes (kernel mode), no taken branch of ours comes before the WRMSR
 *    that freezes the recorder: every conditional jump before it is laid out so that it falls
 *    through for a crash, so the newest record is the exception itself;
 *  - no indirect branch on any path: each stub goes on to the kernel's handler with a direct
 *    `jmp` (LBR_GO_ON). In a module, to its static call (lbr_dump_orig_<vector>, src/glue.c),
 *    which arming points at the handler read from the IDT (static_call_update()). With objtool's
 *    static-call sites (IBT builds record such a tail jump as a site) the `jmp` in the stub itself
 *    is patched to a direct `jmp rel32` to the handler; otherwise the trampoline is, and the
 *    stub's jump reaches it. Built in, to the kernel's asm_exc_* entry point itself.
 *    Stubs and trampolines are on the kprobe blacklist.
 *  - built in, the stubs are entry text, mapped under the user CR3 with page-table isolation:
 *    see LBR_ENTRY_TEXT and LBR_SKIP_IF_USER_CR3 below.
 *    The user-mode path (every user exception, all registers user-controlled, before the kernel's
 *    IBRS/untrain sequences) is `testb; jnz; jmp rel32` and, in a module, the trampoline's
 *    `jmp rel32`: nothing to train (#DF has no user-mode test: see below);
 *  - user-mode exceptions (CS.RPL != 0) go straight on without loading any data of ours; so does
 *    a #PF on a user address (CR2 bit 63 clear: any paging mode, 4- or 5-level) with the saved
 *    RFLAGS.AC set that is not an instruction fetch (a fault inside a user-access region:
 *    copy_from_user and friends). A kernel instruction fetch from a user address is a crash, AC
 *    or not. Without SMAP, AC is never set and user-access faults are captured (README: cost);
 *  - a #GP, #NP or #SS at the kernel's IRET to user mode, and the #DF espfix64 promotes such a
 *    fault to, go straight on (LBR_CFG_IRET): a user's bad return, which the kernel fixes up;
 *    so does a #GP, #NP or #SS at a MOV to a segment register whose error code names a
 *    selector (a segment load with a user's selector), and a #GP at RDMSR, WRMSR or WRMSRNS,
 *    or (with AC set) at a user signal frame's FXRSTOR or XRSTOR, which the kernel fixes up;
 *  - #DF runs on its IST stack and its saved CS:RIP is architecturally undefined: it is always
 *    captured but for espfix's, the CS test is not made;
 *  - #BP (gate 3 hooked only while kprobes of lbr-dump's sit at report functions' entry,
 *    src/capture/report.rs) is captured only at those int3s, by their address in a table
 *    compared without a branch; every other int3 (text patching, other kprobes) goes straight
 *    on;
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
#include <asm/msr-index.h>
#include <asm/nospec-branch.h>
#include <asm/pgtable_64_types.h>
#include <asm/processor-flags.h>
#include <asm/segment.h>
#include <asm/smap.h>
#include <asm/unwind_hints.h>

/* Generated from src/layout.rs (Kbuild): LBR_CFG_* (struct capture_config), LBR_CPU_*, LBR_SNAP_*. */
#include "layout.h"
#include "cpunode.h"

#ifdef CONFIG_X86_FRED
#include <asm/fred.h>				/* ERETS */
#endif
#ifndef MODULE
#include <asm/alternative.h>
#include <asm/cpufeatures.h>
#include <asm/page_types.h>
#endif

/*
 * Where the IDT's targets live. A module's text is not mapped while a user CR3 is loaded, so a
 * module refuses to arm under page-table isolation (src/glue.c). Built in, every stub a gate
 * points at is entry text: pti_clone_entry_text() maps .entry.text (__entry_text_start ..
 * __entry_text_end, include/asm-generic/vmlinux.lds.h ENTRY_TEXT) into the user page tables, and
 * each stub goes on straight to the kernel's own handler there (LBR_GO_ON), so the user-mode
 * path touches nothing else: no data of lbr-dump's, no trampoline. The functions called from C
 * (panic, kexec, reset, stop, thaw) stay ordinary text.
 */
#ifdef MODULE
#define LBR_ENTRY_TEXT	.text
#else
#define LBR_ENTRY_TEXT	.section .entry.text, "ax"
#endif

/*
 * LBR_GO_ON vec: on to the kernel's handler of \vec, every register and the frame as delivered.
 * Module: a direct jmp to the vector's static-call trampoline (src/glue.c), which arming points
 * at the handler read from the IDT; with objtool's static-call sites the jmp itself becomes a
 * direct jmp rel32 to the handler. Built in: a direct jmp to the kernel's entry point
 * (arch/x86/include/asm/idtentry.h), entry text like the stub; arming checks that the gate
 * holds exactly that handler (glue.c lbr_dump_set_handler). No data load, no indirect branch.
 */
.macro LBR_GO_ON vec:req
#ifdef MODULE
	jmp	__SCT__lbr_dump_orig_\vec
#else
.if \vec == 0
	jmp	asm_exc_divide_error
.elseif \vec == 1
	jmp	asm_exc_debug
.elseif \vec == 2
	jmp	asm_exc_nmi
.elseif \vec == 3
	jmp	asm_exc_int3
.elseif \vec == 6
	jmp	asm_exc_invalid_op
.elseif \vec == 8
	jmp	asm_exc_double_fault
.elseif \vec == 11
	jmp	asm_exc_segment_not_present
.elseif \vec == 12
	jmp	asm_exc_stack_segment
.elseif \vec == 13
	jmp	asm_exc_general_protection
.elseif \vec == 14
	jmp	asm_exc_page_fault
.elseif \vec == 17
	jmp	asm_exc_alignment_check
.elseif \vec == 21
	jmp	asm_exc_control_protection
.elseif \vec == 248
	jmp	asm_sysvec_reboot
.else
	.error "LBR_GO_ON: no kernel handler for this vector"
.endif
#endif
.endm

/*
 * LBR_FRED_GO_ON which: on to the kernel's FRED entry point for ring-3 (`user`) or ring-0
 * (`kernel`) events, every register and the frame as delivered. Module: a direct jmp to the
 * static call lbr_dump_fred_<which> (src/glue.c), which arming points at the kernel's entry
 * point read from IA32_FRED_CONFIG (asm_fred_entrypoint_user, or its +256); with objtool's
 * static-call sites the jmp itself becomes a direct jmp rel32 there. Built in: a direct jmp to
 * asm_fred_entrypoint_<which> (arch/x86/entry/entry_64_fred.S), which has no ENDBR: only a
 * direct jump may reach it. No data load, no indirect branch.
 */
.macro LBR_FRED_GO_ON which:req
#ifdef MODULE
	jmp	__SCT__lbr_dump_fred_\which
#else
	jmp	asm_fred_entrypoint_\which
#endif
.endm

/* The static-call trampoline of \vec is on a stub's path: no kprobe there (module only). */
.macro LBR_NOKPROBE_WAY_ON vec:req
#ifdef MODULE
_ASM_NOKPROBE(__SCT__lbr_dump_orig_\vec)
#endif
.endm

/*
 * Page-table isolation (built in only; a module refuses to arm under it). While the user page
 * tables are loaded, CR3 has PTI_USER_PGTABLE_BIT (arch/x86/entry/calling.h: PAGE_SHIFT) set
 * and lbr-dump's data is not mapped. That is so in user mode, and in kernel mode too in the few
 * instructions of the kernel's exit path after SWITCH_TO_USER_CR3 (an IRET that faults, an NMI or
 * a #DB there: entry-hazards.md).
 *
 * LBR_SKIP_IF_USER_CR3 label: goes to \label if page-table isolation is on and the user page
 * tables are loaded; falls through otherwise (always without PTI: rax is zeroed instead of read,
 * the kernel's alternatives patch in the CR3 read at boot where X86_FEATURE_PTI is set). No data
 * load, no taken branch in the usual case. The exception stubs use it on their kernel-mode path:
 * a kernel-mode exception under the user CR3 is, in a working kernel, an IRET fault the kernel
 * fixes up (#GP/#SS/#NP at native_irq_return_iret, or the espfix #DF it promotes): not a crash.
 * A real crash there (a bug in the entry code's user-CR3 window itself) is not captured either
 * (Documentation/lbr-dump/design.rst "Page-table isolation"). Clobbers rax and flags.
 */
.macro LBR_SKIP_IF_USER_CR3 label:req
#if !defined(MODULE) && defined(CONFIG_MITIGATION_PAGE_TABLE_ISOLATION)
	ALTERNATIVE "xorl %eax, %eax", "movq %cr3, %rax", X86_FEATURE_PTI
	btq	$PAGE_SHIFT, %rax		/* PTI_USER_PGTABLE_BIT */
	jc	\label
#endif
.endm

/*
 * LBR_KERNEL_CR3 / LBR_RESTORE_CR3: for the #DB re-arm stub, which must work in user mode too
 * (a single-stepped process), and which has no freeze to protect (branches are fine). With PTI
 * and the user page tables loaded, LBR_KERNEL_CR3 loads the kernel's, as the kernel's
 * SAVE_AND_SWITCH_TO_KERNEL_CR3 does (calling.h: ADJUST_KERNEL_CR3 clears
 * PTI_USER_PGTABLE_AND_PCID_MASK; NOFLUSH where CR4.PCIDE is set, bit 63 being reserved
 * without it), and pushes the CR3 found (else 0); LBR_RESTORE_CR3 pops it and, if not 0, loads
 * it back with NOFLUSH where PCIDE is set. That NOFLUSH is safe because asm_exc_debug runs next:
 * a TLB flush for the user address space queued meanwhile (by an NMI or #MC in this window, which
 * saw the kernel CR3 loaded here and so restored nothing) is still pending in
 * user_pcid_flush_mask, and the kernel takes it on its own way back, SWITCH_TO_USER_CR3 from
 * user mode or PARANOID_RESTORE_CR3 from kernel mode, before anything but entry text and the
 * cpu_entry_area runs under that CR3. Without PTI (the CR3 read is never patched in; a kernel
 * without CONFIG_MITIGATION_PAGE_TABLE_ISOLATION has none of these macros' code) or with the
 * kernel page tables loaded, no CR3 write. Clobber rax, rcx and flags.
 */
.macro LBR_PCID_NOFLUSH reg:req, tmp:req
	movq	%cr4, \tmp
	shrq	$X86_CR4_PCIDE_BIT, \tmp
	shlq	$63, \tmp			/* NOFLUSH (bit 63) iff CR4.PCIDE */
	orq	\tmp, \reg
.endm

.macro LBR_KERNEL_CR3
#if !defined(MODULE) && defined(CONFIG_MITIGATION_PAGE_TABLE_ISOLATION)
	ALTERNATIVE "xorl %eax, %eax", "movq %cr3, %rax", X86_FEATURE_PTI
	btq	$PAGE_SHIFT, %rax		/* PTI_USER_PGTABLE_BIT */
	jc	.Luser_cr3_\@
	xorl	%eax, %eax			/* kernel page tables (or no PTI): nothing to undo */
.Luser_cr3_\@:
	pushq	%rax				/* the user CR3 to load back, or 0 */
	testq	%rax, %rax
	jz	.Lkernel_cr3_\@
	andq	$(~((1 << PAGE_SHIFT) | (1 << X86_CR3_PTI_PCID_USER_BIT))), %rax
	LBR_PCID_NOFLUSH %rax, %rcx
	movq	%rax, %cr3			/* the kernel page tables */
.Lkernel_cr3_\@:
#endif
.endm

.macro LBR_RESTORE_CR3
#if !defined(MODULE) && defined(CONFIG_MITIGATION_PAGE_TABLE_ISOLATION)
	popq	%rax				/* the user CR3 to load back, or 0 */
	testq	%rax, %rax
	jz	.Lkept_cr3_\@
	LBR_PCID_NOFLUSH %rax, %rcx
	movq	%rax, %cr3
.Lkept_cr3_\@:
#endif
.endm

/* #PF error code bit 4 (arch/x86/include/asm/trap_pf.h X86_PF_INSTR): an instruction fetch. */
#define PF_INSTR	0x10
/* DR7's enable bits L0/G0..L3/G3: a hardware breakpoint is armed. */
#define DR7_ENABLED	0xff
/* DR7's bit 10, reserved and set (arch/x86/include/asm/debugreg.h DR7_FIXED_1): no breakpoint. */
#define DR7_FIXED_1	0x400

/*
 * struct capture_config (src/layout.rs `cfg`, the module's ffi::ConfigPage): what the stubs read
 * and never write, and the MSR list at LBR_CFG_MSR_LIST, alone in a page of .data..ro_after_init
 * (built in: see below). The page is read-only once the module's init is done (with
 * CONFIG_STRICT_MODULE_RWX, the default, and rodata=on); Rust writes it through a window that is writable only for its own stores
 * (src/glue.c lbr_dump_window_write), while no gate points here: a kernel write primitive cannot
 * steer what the stubs write into an MSR (ctl_msr, armed, the masks) or which MSRs they read.
 */
#ifdef MODULE
	.section .data..ro_after_init, "aw"
#else
	/*
	 * Built in, .data..ro_after_init is inside the kernel's read-only data, which page-table
	 * isolation may map into the user page tables (pti_clone_kernel_text()) with the kernel
	 * addresses this page holds; a page of .data instead, made read-only by
	 * lbr_dump_config_protect() (src/glue.c) when it is first written.
	 */
	.section .data..page_aligned, "aw"
#endif
	.balign LBR_CFG_PAGE
SYM_DATA_START(lbr_dump_capture)
	.fill	LBR_CFG_PAGE / 8, 8, 0
SYM_DATA_END(lbr_dump_capture)
	.balign LBR_CFG_PAGE

/* struct capture_live (src/layout.rs `live`): the counters the stubs write (locked adds). */
	.data
	.balign 64
SYM_DATA_START(lbr_dump_live)
	.fill	LBR_LIVE_SIZE / 8, 8, 0
SYM_DATA_END(lbr_dump_live)

/*
 * Stack offsets once the kernel-mode path has pushed everything (see the pushes below):
 *   0 r10, 8 r9, 16 r8, 24 rdi, 32 rsi, 40 control MSR value at entry, [#PF: 48 CR2 at entry],
 *   then rdx, rcx, rax, and the CPU's frame at S_FRAME + .Lcr2_<vector> (72, #PF: 80).
 */
#define S_ENTRY		40
#define S_FRAME		72


/*
 * LBR_STOP_AREA reg, fail: with \reg = this CPU's number, makes \reg = its save areas in the
 * stop stubs' pages (layout.rs `stop`); goes to \fail, \reg unchanged, if the CPU has none.
 * Uses only \reg and flags.
 */
.macro LBR_STOP_AREA reg:req, fail:req
	cmpq	lbr_dump_capture+LBR_CFG_NR_CPUS(%rip), \reg
	jae	\fail
	imulq	$LBR_STOP_CPU_SIZE, \reg, \reg
	addq	lbr_dump_capture+LBR_CFG_STOP_SAVE(%rip), \reg
.endm

/*
 * LBR_CPU_BLOCK reg, fail: \reg = this CPU's block in the snapshot area, found without %gs; goes
 * to \fail if the CPU has none. Uses only \reg and flags.
 */
.macro LBR_CPU_BLOCK reg:req, fail:req
	LBR_THIS_CPU \reg
	cmpq	lbr_dump_capture+LBR_CFG_NR_CPUS(%rip), \reg
	jae	\fail
	imulq	lbr_dump_capture+LBR_CFG_BLOCK_SIZE(%rip), \reg
	addq	lbr_dump_capture+LBR_CFG_CPU0(%rip), \reg
.endm

/*
 * LBR_CLAIM_SLOT fail, provisional: with r9 = this CPU's number, makes r9 = its block in the
 * snapshot area, marked busy, and rsi = the snapshot slot this capture fills (count % ring),
 * invalidated (seq 0) until it is complete, and unsealed (checksum 0: the seal of a snapshot
 * printed from this slot before, such as a warning's given back, is not this one's). Goes to
 * \fail, changing nothing, if the CPU has no block or a capture is running on it (a fault or a
 * nested exception inside a capture). Both tests fall through in the usual case.
 *
 * A report function's capture (\provisional 1, the report trampoline and the #BP stub) does not
 * advance the count (LBR_RECORD), so its slot stays the CPU's next, and is marked
 * LBR_SNAP_PROVISIONAL until the printer keeps it (src/capture/report.rs). Any other capture
 * (\provisional 0) that finds such a snapshot in the CPU's next slot keeps it, clearing its mark
 * and advancing the count past it first: the exception that follows a report (KASAN's #GP after its report, a
 * list check's WARN or BUG inside its report) does not take the report's snapshot. Uses only
 * r9, rsi, and with \provisional 0 rdi, r8 and flags.
 */
.macro LBR_CLAIM_SLOT fail:req provisional=0
	cmpq	lbr_dump_capture+LBR_CFG_NR_CPUS(%rip), %r9
	jae	\fail
	imulq	lbr_dump_capture+LBR_CFG_BLOCK_SIZE(%rip), %r9
	addq	lbr_dump_capture+LBR_CFG_CPU0(%rip), %r9	/* r9 = CPU block */
	cmpl	$0, LBR_CPU_BUSY(%r9)
	jne	\fail				/* nested in a capture: no capture */
	movl	$1, LBR_CPU_BUSY(%r9)
	movq	LBR_CPU_COUNT(%r9), %rsi
.if !\provisional
	movq	%rsi, %rdi
	andq	lbr_dump_capture+LBR_CFG_RING_MASK(%rip), %rdi
	imulq	lbr_dump_capture+LBR_CFG_SNAP_SIZE(%rip), %rdi
	leaq	LBR_CPU_HEADER_SIZE(%r9,%rdi), %rdi	/* rdi = the next slot */
	cmpq	$0, LBR_SNAP_SEQ(%rdi)
	je	.Lclaim_\@			/* never written */
	testl	$LBR_SNAP_PROVISIONAL, LBR_SNAP_STATE(%rdi)
	jz	.Lclaim_\@
	andl	$~LBR_SNAP_PROVISIONAL, LBR_SNAP_STATE(%rdi)	/* kept: no longer provisional */
	incq	%rsi				/* keep the report's capture */
	movq	%rsi, LBR_CPU_COUNT(%r9)
.Lclaim_\@:
.endif
	andq	lbr_dump_capture+LBR_CFG_RING_MASK(%rip), %rsi
	imulq	lbr_dump_capture+LBR_CFG_SNAP_SIZE(%rip), %rsi
	leaq	LBR_CPU_HEADER_SIZE(%r9,%rsi), %rsi
	movq	$0, LBR_SNAP_SEQ(%rsi)
	movq	$0, LBR_SNAP_CHECKSUM(%rsi)
.endm

/*
 * LBR_BTS_KEEP sfx: with BTS armed and the recorder frozen, keeps this CPU's BTS buffer for the
 * snapshot and swaps the next one of the pool into the debug store, so that recording goes on in
 * a spare buffer and a crash the system survives does not overwrite the history it captured (the
 * 2008 BTS design's "spare buffers swapped into the DS pointers"). rsi = the snapshot, r9 = the
 * CPU block. If IA32_DS_AREA is not this CPU's debug store (LBR_CPU_DS), another owner (perf)
 * took it: the snapshot says foreign, and the debug store is left as found. Otherwise the
 * snapshot gets bts_index and bts_buffer_base as found, the slot kept, and whether it wrapped:
 * the hardware writes a buffer's last record slot just before its index wraps to the base, and
 * that slot's `from` was cleared when the buffer was swapped in (a branch from address 0 does
 * not occur). The next slot (the oldest kept buffer: its snapshot's history is lost) then gets
 * its last slot cleared and goes into the debug store with plain stores: base, index = base,
 * absolute maximum = base + size, interrupt threshold past the maximum (no interrupt: the SDM's
 * note on circular buffers). No MSR but the DS_AREA read. The table entry's owner is set at
 * publication (LBR_RECORD), once the sequence number is known. Clobbers rax, rcx, rdx, rdi, r8,
 * r10 and flags.
 */
.if LBR_BTS_ENTRY_SIZE != 32
	.error "LBR_BTS_KEEP: the table entry size is not 1 << 5"
.endif
.macro LBR_BTS_KEEP sfx:req
	movl	$MSR_IA32_DS_AREA, %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = IA32_DS_AREA */
	movq	%rax, LBR_SNAP_DS_AREA(%rsi)
	leaq	LBR_CPU_DS(%r9), %rdi		/* rdi = this CPU's debug store */
	cmpq	%rdi, %rax
	jne	.Lbts_foreign_\sfx
	movq	LBR_DS_BTS_INDEX(%rdi), %rax
	movq	%rax, LBR_SNAP_BTS_INDEX(%rsi)
	movq	LBR_DS_BTS_BASE(%rdi), %rax
	movq	%rax, LBR_SNAP_BTS_BASE(%rsi)
	movl	LBR_CPU_BTS_CUR(%r9), %eax	/* the slot kept */
	movl	%eax, LBR_SNAP_BTS_SLOT(%rsi)
	movl	$LBR_SNAP_BTS_KEPT, %edx
	movq	LBR_DS_BTS_MAX(%rdi), %r8
	cmpq	$0, -LBR_BTS_RECORD_SIZE(%r8)	/* its last record slot's from */
	je	.Lbts_unwrapped_\sfx
	orl	$LBR_SNAP_BTS_WRAPPED, %edx
.Lbts_unwrapped_\sfx:
	movl	%edx, LBR_SNAP_BTS_STATE(%rsi)
	incl	%eax				/* the next slot, modulo the pool */
	xorl	%edx, %edx
	cmpl	lbr_dump_capture+LBR_CFG_BTS_POOL(%rip), %eax
	cmovael	%edx, %eax
	movl	%eax, LBR_CPU_BTS_CUR(%r9)
	shlq	$5, %rax			/* LBR_BTS_ENTRY_SIZE */
	addq	LBR_CPU_BTS_TABLE(%r9), %rax	/* rax = its table entry */
	movq	$0, LBR_BTS_OWNER(%rax)		/* recording, no snapshot's any more */
	movq	LBR_BTS_VIRT(%rax), %r8		/* r8 = its base */
	movq	lbr_dump_capture+LBR_CFG_BTS_SIZE(%rip), %r10
	addq	%r8, %r10			/* r10 = its absolute maximum */
	movq	$0, -LBR_BTS_RECORD_SIZE(%r10)	/* the wrap mark: its last slot's from */
	movq	%r8, LBR_DS_BTS_BASE(%rdi)
	movq	%r8, LBR_DS_BTS_INDEX(%rdi)
	movq	%r10, LBR_DS_BTS_MAX(%rdi)
	addq	$LBR_BTS_RECORD_SIZE, %r10
	movq	%r10, LBR_DS_BTS_THRESHOLD(%rdi)
	jmp	.Lbts_kept_\sfx
.Lbts_foreign_\sfx:
	movl	$LBR_SNAP_BTS_FOREIGN, LBR_SNAP_BTS_STATE(%rsi)
	xorl	%eax, %eax			/* nothing kept: no stale slot, index or base */
	movl	%eax, LBR_SNAP_BTS_SLOT(%rsi)
	movq	%rax, LBR_SNAP_BTS_INDEX(%rsi)
	movq	%rax, LBR_SNAP_BTS_BASE(%rsi)
.Lbts_kept_\sfx:
.endm

/*
 * LBR_BTS_OFF sfx: with BTS armed, switches it off on this CPU for good (TR and BTS cleared in
 * the control MSR, the LBR left as it is): after a panic comes kdump's kexec or a reboot, whose
 * page tables do not map lbr-dump's debug store and buffers (a BTS record stored there would
 * fault at any instruction), and the next kernel must not start with TR and BTS set. The panic
 * entry and the stop stubs end with it, after their capture. Without BTS, one compare. Clobbers
 * rax, rcx, rdx, r8 and flags.
 */
.macro LBR_BTS_OFF sfx:req
	cmpq	$0, lbr_dump_capture+LBR_CFG_BTS_POOL(%rip)
	je	.Lbts_off_done_\sfx
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value now */
	movq	lbr_dump_capture+LBR_CFG_REARM_MASK(%rip), %r8
	notq	%r8
	andq	lbr_dump_capture+LBR_CFG_MASK(%rip), %r8	/* r8 = TR|BTS */
	notq	%r8
	andq	%r8, %rax
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr
.Lbts_off_done_\sfx:
.endm

/*
 * LBR_RECORD entry, sfx: the rest of a capture, once the caller has filled the snapshot's header
 * fields. rsi = the snapshot, r9 = the CPU block (LBR_CLAIM_SLOT), \entry = a memory operand
 * holding the control MSR's value at entry (the recorder is frozen). Reads the MSR list into
 * the snapshot, re-reads the control MSR, restores (or re-arms) it unless another owner changed
 * it (re-arming it if \rearm, see below), publishes the snapshot (its state OR \state_or, a
 * register or immediate, if given) and clears busy. \sfx makes the labels unique. With
 * \provisional 1 (the report trampoline, the #BP stub) the capture keeps no BTS buffer (the
 * caller zeroed the snapshot's BTS fields), is marked LBR_SNAP_PROVISIONAL and does not advance
 * the CPU's count: the slot stays the CPU's next (LBR_CLAIM_SLOT says who takes it) until the
 * printer keeps it (src/capture/report.rs). Clobbers rax, rcx, rdx, rdi, r8, r10 and flags; keeps rsi, r9, r11
 * and the stack.
 */
.macro LBR_RECORD entry:req sfx:req rearm=1 state_or provisional=0
	movq	\entry, %rax
	movq	%rax, LBR_SNAP_CTL_ENTRY(%rsi)
	/*
	 * The records: values[i] = rdmsr(msrs[i]) for the flat list Rust built when arming, each MSR
	 * read safely on every CPU first (src/capture/cpu.rs); the list is never empty (checked again
	 * here: an empty list must not make `decq` wrap).
	 */
	movq	lbr_dump_capture+LBR_CFG_MSRS(%rip), %rdi
	movq	lbr_dump_capture+LBR_CFG_NR_VALUES(%rip), %r8
	leaq	LBR_SNAP_VALUES(%rsi), %r10
	testq	%r8, %r8
	jz	.Lread_done_\sfx
.Lread_\sfx:
	movl	(%rdi), %ecx
	rdmsr
	movl	%eax, (%r10)
	movl	%edx, 4(%r10)
	addq	$4, %rdi
	addq	$8, %r10
	decq	%r8
	jnz	.Lread_\sfx
.Lread_done_\sfx:
.if !\provisional
	cmpq	$0, lbr_dump_capture+LBR_CFG_BTS_POOL(%rip)
	je	.Lbts_done_\sfx			/* no BTS */
	LBR_BTS_KEEP \sfx
.Lbts_done_\sfx:
.endif

	/* Did anyone change the control MSR under us? rax = after, r8 = frozen value we wrote. */
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax
	movq	%rax, LBR_SNAP_CTL_AFTER(%rsi)
	movq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rdx
	notq	%rdx
	movq	\entry, %r8
	andq	%rdx, %r8			/* r8 = frozen value */
	movl	$(LBR_SNAP_COMPLETE | LBR_SNAP_TORN), %edi
	cmpq	%r8, %rax
	jne	.Lstate_\sfx			/* torn: leave the other owner's value */

	/*
	 * Restore the entry value; but with \rearm, if it is lbr-dump's armed value with only the
	 * LBR switch cleared (LBR_CFG_REARM_MASK: #DB delivery clears it and leaves BTS's bits),
	 * re-arm: write the armed value (README: re-arm policy), unless a KVM guest holds this
	 * CPU's LBR (LBR_CPU_LENT, src/capture/cpu.rs `lend`: the switch is off for the guest). (The
	 * stop stubs restore exactly what they found: a CPU stopped in a panic may have been inside
	 * a capture that froze the recorder.)
	 */
	movq	\entry, %rax
.if \rearm
	cmpl	$0, LBR_CPU_LENT(%r9)
	jne	.Lno_rearm_\sfx		/* a KVM guest holds the LBR here, or disarming */
	movq	lbr_dump_capture+LBR_CFG_REARM_MASK(%rip), %rdx
	notq	%rdx
	movq	lbr_dump_capture+LBR_CFG_ARMED(%rip), %r10
	andq	%r10, %rdx			/* rdx = armed & ~rearm mask */
	cmpq	%rdx, %rax
	cmoveq	%r10, %rax
.Lno_rearm_\sfx:
.endif
	movl	$LBR_SNAP_COMPLETE, %edi
	movq	\entry, %rdx
	testq	lbr_dump_capture+LBR_CFG_REARM_MASK(%rip), %rdx
	movl	$(LBR_SNAP_COMPLETE | LBR_SNAP_WAS_OFF), %edx
	cmovzl	%edx, %edi			/* the LBR switch was off at entry */
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr
.Lstate_\sfx:
	/* Lent to a KVM guest (LBR_CPU_LENT 1 .. 0xfffffffe; 0xffffffff: being disarmed). */
	movl	LBR_CPU_LENT(%r9), %eax
	decl	%eax
	cmpl	$0xfffffffd, %eax
	ja	.Lnot_lent_\sfx
	orl	$LBR_SNAP_LENT, %edi
.Lnot_lent_\sfx:
.ifnb \state_or
	orl	\state_or, %edi		/* more state bits from the caller */
.endif
.if \provisional
	orl	$LBR_SNAP_PROVISIONAL, %edi	/* until the printer keeps it */
.endif
	movl	%edi, LBR_SNAP_STATE(%rsi)
	/* Publish: the sequence number is written last; then the CPU's count, then not busy. */
	movl	$1, %eax
	lock xaddq %rax, lbr_dump_live+LBR_LIVE_SEQ(%rip)
	incq	%rax
	/* A kept BTS buffer belongs to this snapshot (its table entry's owner), before it is seen. */
	testl	$LBR_SNAP_BTS_KEPT, LBR_SNAP_BTS_STATE(%rsi)
	jz	.Lowner_done_\sfx
	movl	LBR_SNAP_BTS_SLOT(%rsi), %ecx
	shlq	$5, %rcx			/* LBR_BTS_ENTRY_SIZE */
	addq	LBR_CPU_BTS_TABLE(%r9), %rcx
	movq	%rax, LBR_BTS_OWNER(%rcx)
.Lowner_done_\sfx:
	movq	%rax, LBR_SNAP_SEQ(%rsi)
.if !\provisional
	incq	LBR_CPU_COUNT(%r9)
.endif
	movl	$0, LBR_CPU_BUSY(%r9)
.endm

/*
 * LBR_FREEZE save: freezes the recorder: reads the control MSR, keeps its value at entry in \save
 * (a memory operand, or `push`), writes it back with the enable bits of LBR_CFG_MASK cleared. No
 * branch, one data load before the RDMSR. Clobbers rax, rcx, rdx, flags.
 * LBR_PUT_BACK src: writes the entry value kept in \src back unchanged (no capture after all),
 * if the control MSR still holds the frozen value: as after a capture (LBR_RECORD), a value
 * another owner wrote since the freeze is left. Clobbers rax, rcx, rdx, flags.
 */
.macro LBR_FREEZE save:req
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value at entry */
.ifc \save,push
	pushq	%rax
.else
	movq	%rax, \save
.endif
	movq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rdx
	notq	%rdx
	andq	%rdx, %rax			/* rax = frozen value */
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr					/* recording stops here */
.endm

.macro LBR_PUT_BACK src:req
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value now */
	movq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rdx
	notq	%rdx
	andq	\src, %rdx			/* rdx = the frozen value written */
	cmpq	%rdx, %rax
	jne	.Lput_back_done\@		/* another owner (a perf NMI) changed it since: leave it */
	movq	\src, %rax
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr
.Lput_back_done\@:
.endm

/*
 * LBR_REARM done: after a #DB (whose delivery cleared the LBR switch), writes lbr-dump's armed
 * value back if the control MSR holds it with only the switch cleared and no KVM guest holds
 * this CPU's LBR (LBR_CPU_LENT); otherwise goes to \done, leaving the value. In a stub the
 * caller checked DR7 first (a data breakpoint on lbr-dump's data; lbr_dump_rearm_here says why
 * it need not). Clobbers rax, rcx, rdx and flags.
 */
.macro LBR_REARM done:req
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value now */
	movq	lbr_dump_capture+LBR_CFG_REARM_MASK(%rip), %rdx
	notq	%rdx
	andq	lbr_dump_capture+LBR_CFG_ARMED(%rip), %rdx	/* rdx = armed & ~rearm mask */
	cmpq	%rdx, %rax
	jne	\done			/* not ours with the switch cleared: leave it */
	LBR_CPU_BLOCK %rcx, \done
	cmpl	$0, LBR_CPU_LENT(%rcx)
	jne	\done			/* a KVM guest holds the LBR here, or disarming */
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	movq	lbr_dump_capture+LBR_CFG_ARMED(%rip), %rax
	movq	%rax, %rdx
	shrq	$32, %rdx
	wrmsr					/* recording on again */
.endm

/*
 * The #GP, #NP and #SS that any user can make the kernel take at will and that the kernel fixes
 * up, recognised by the instruction at the saved RIP (the IDT stubs, lbr_dump_stub_<11-13>,
 * before their freeze; FRED's ring-0 entry, lbr_dump_fred_kernel, after it).
 *
 * LBR_INSN_AT_RIP rip: eax = the instruction's first 4 bytes (after one DS or REX prefix: 3
 * bytes), from the saved RIP in \rip (a memory operand), read only where they cannot fault,
 * else zeros (lbr_dump_no_frame). RIP was fetched, so its page is mapped; it is read only when
 * it is kernel or module text (the top 2 GiB: canonical in any paging mode, and all of it is
 * kernel text or execmem, readable: x86 has no supervisor execute-only pages), and never past
 * its page (an instruction may end at the page's end): in a page's last 3 bytes, the page's
 * last dword is read and shifted down, the missing bytes zero. Chosen with cmov: no branch.
 * Clobbers rcx, rdx, flags.
 */
.macro LBR_INSN_AT_RIP rip:req
	movq	\rip, %rcx			/* saved RIP */
	leaq	lbr_dump_no_frame(%rip), %rax
	movq	%rcx, %rdx
	sarq	$31, %rdx
	cmpq	$-1, %rdx			/* RIP >= 0xffffffff80000000? */
	cmoveq	%rcx, %rax			/* rax = RIP, or the zeros */
	movq	%rax, %rdx
	orq	$0xfff, %rdx
	subq	$3, %rdx			/* rdx = the page's last dword */
	cmpq	%rdx, %rax
	cmovaq	%rdx, %rax			/* RIP in the page's last 3 bytes: that dword */
	subl	%eax, %ecx			/* cl = RIP - rax: 0, or 1-3 (the zeros: any) */
	shlb	$3, %cl
	movl	(%rax), %eax
	shrl	%cl, %eax			/* eax = bytes 0-3 */
	movzbl	%al, %ecx
	subl	$0x40, %ecx
	cmpl	$0x10, %ecx
	setb	%cl				/* a REX prefix (40-4f) */
	cmpb	$0x3e, %al
	sete	%ch				/* DS (ds wrmsr: msr.h wrmsrns() pads WRMSR with it) */
	orb	%ch, %cl
	movl	%eax, %edx
	shrl	$8, %edx
	testb	%cl, %cl
	cmovnzl	%edx, %eax			/* eax = the bytes after the prefix, if one */
.endm

/*
 * LBR_SEG_LOAD_FAULT err: dl nonzero and ZF clear if the instruction in eax (LBR_INSN_AT_RIP)
 * loads a segment register and the error code in \err (a memory operand) names a selector
 * (index or TI set; EXT and IDT clear): a descriptor load with a bad selector. Any user can
 * make the kernel do that at will, with the user's selector: loadsegment() and
 * load_gs_index() after modify_ldt() or set_thread_area(), fixed up by their exception-table
 * entries: not captured. The loads: a MOV to a segment register (8E /r), and LKGS (F2 0F 00
 * /6), with which load_gs_index() loads GS wherever the CPU has it (arch/x86/include/asm/
 * gsseg.h), FRED or not: fred=off leaves LKGS on (FRED depends on LKGS, not the reverse:
 * arch/x86/kernel/cpu/cpuid-deps.c). LKGS is recognised by F2 0F 00 alone, any ModRM: in a
 * page's last 3 bytes LBR_INSN_AT_RIP reads its ModRM as zero, and the kernel emits no other
 * F2-prefixed 0F 00 (LLDT, LTR are unprefixed). (LLDT, LTR, an IRET back to kernel mode with
 * a corrupted CS or SS are other instructions: captured.) No branch. Clobbers rcx, rdx, flags.
 */
.macro LBR_SEG_LOAD_FAULT err:req
	movl	%eax, %edx
	andl	$0x00ffffff, %edx
	cmpl	$0x00000ff2, %edx		/* f2 0f 00: LKGS (/6) */
	sete	%dl
	cmpb	$0x8e, %al			/* MOV Sreg, r/m16 */
	sete	%cl
	orb	%cl, %dl
	testb	$3, \err			/* EXT, IDT: not a selector */
	setz	%cl
	andb	%cl, %dl
	testl	$0xfffc, \err			/* selector index, TI */
	setnz	%cl
	andb	%cl, %dl			/* ZF clear: a segment load's selector fault */
.endm

/*
 * LBR_GP_FIXED_UP rflags: dh nonzero and ZF clear if the #GP at the instruction in eax
 * (LBR_INSN_AT_RIP) is one the kernel fixes up by the instruction alone: every RDMSR, WRMSR
 * and WRMSRNS of arch/x86/include/asm/msr.h's accessors has an exception-table entry
 * (ex_handler_msr() warns for the unchecked ones and goes on), and a KVM guest's MSR writes
 * reach wrmsr_safe() at will (SPEC_CTRL with a reserved bit). The few raw ones without an
 * entry (IBRS_ENTER/EXIT, write_ibpb, KVM's SPEC_CTRL switch in vmenter.h, Hyper-V's crash
 * path, SEV's #VC) oops there uncaptured: Documentation/lbr-dump/design.rst "How capture
 * works". FXRSTOR and XRSTOR (0F AE /1, /5, a memory operand) with the saved RFLAGS.AC (in
 * \rflags, a memory operand) set restore a user's signal frame inside a user-access region
 * (fxrstor_from_user_sigframe(), xrstor_from_user_sigframe(): a bad frame is the user's
 * SIGSEGV). Other instructions with AC set (a wild kernel pointer inside a
 * user_access_begin() region) are captured. No branch. Clobbers eax, rcx, dh, flags.
 */
.macro LBR_GP_FIXED_UP rflags:req
	movl	%eax, %ecx
	shrl	$16, %ecx			/* cl = the ModRM byte of 0F AE */
	movb	%cl, %dh
	andb	$0x18, %dh
	cmpb	$0x08, %dh			/* reg field 1 or 5 */
	sete	%dh
	andb	$0xc0, %cl
	cmpb	$0xc0, %cl			/* mod 3 is a register form (LFENCE: 0F AE E8) */
	setne	%cl
	andb	%cl, %dh
	cmpw	$0xae0f, %ax			/* 0F AE */
	sete	%cl
	andb	%cl, %dh
	testl	$X86_EFLAGS_AC, \rflags	/* saved RFLAGS.AC */
	setnz	%cl
	andb	%cl, %dh			/* dh = a user signal frame's restore */
	cmpw	$0x300f, %ax			/* WRMSR: 0F 30 */
	sete	%cl
	orb	%cl, %dh
	cmpw	$0x320f, %ax			/* RDMSR: 0F 32 */
	sete	%cl
	orb	%cl, %dh
	andl	$0xffffff, %eax
	cmpl	$0xc6010f, %eax			/* WRMSRNS: 0F 01 C6 */
	sete	%cl
	orb	%cl, %dh			/* ZF clear: fixed up by the kernel */
.endm

	LBR_ENTRY_TEXT
.macro LBR_STUB vec:req err:req
/* #PF keeps CR2 at entry on the stack: 8 more bytes between the pushes and the frame. */
.if \vec == 14
	.set	.Lcr2_\vec, 8
.else
	.set	.Lcr2_\vec, 0
.endif
SYM_CODE_START(lbr_dump_stub_\vec)
.if \vec == 3
	/* As the kernel's #BP entry: the saved RIP is after the int3, not a faulting insn. */
	UNWIND_HINT_IRET_ENTRY offset=\err*8 signal=0
.else
	UNWIND_HINT_IRET_ENTRY offset=\err*8
.endif
	ENDBR
.if \vec != 8
	testb	$3, \err*8+8(%rsp)		/* CS.RPL: user mode? */
	jnz	.Lgo_on_\vec			/* yes: straight on (not taken for kernel mode) */
.endif
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	/* Kernel mode under the user CR3 (PTI, built in): an IRET fault, straight on. */
	LBR_SKIP_IF_USER_CR3 .Lpass_\vec
	ASM_CLAC				/* AC may be set inside a user-access region */
	cld					/* DF may be set (memmove) */
.if \vec == 11 || \vec == 12 || \vec == 13
	/*
	 * The kernel's IRET to user mode faulted (LBR_CFG_IRET: native_irq_return_iret, and the
	 * frame it pops, at the saved RSP, returns to CS.RPL 3): a user's bad segment state, which
	 * error_entry's bad-IRET fixup hands back to the user as its own fault. Any user can do it
	 * at will (rt_sigreturn with a bad SS, a not-present LDT segment): not a crash, not
	 * captured. The same IRET returning to kernel mode (restore_regs_and_return_to_kernel) is
	 * a crash. The frame is read only when RIP is the IRET (cmov: no branch); otherwise a zero
	 * frame of ours. Taken only in that case. The stack now: 0 rdx, 8 rcx, 16 rax, 24 error
	 * code, 32 RIP, 40 CS, 48 RFLAGS, 56 RSP.
	 */
	movq	32(%rsp), %rcx			/* saved RIP */
	leaq	lbr_dump_no_frame(%rip), %rax
	cmpq	lbr_dump_capture+LBR_CFG_IRET(%rip), %rcx
	cmoveq	56(%rsp), %rax			/* the IRET's frame: RIP, CS, ... */
	testb	$3, 8(%rax)			/* its CS.RPL: a return to user mode? */
	jnz	.Lpass_\vec
	/*
	 * The kernel fixes up a segment load with a user's selector (any of the three vectors)
	 * and, for #GP, an MSR access or a user signal frame's restore: not captured (the macros
	 * above say why). Combined without a branch: taken only in those cases. The stack as
	 * above: 24 error code, 48 RFLAGS.
	 */
	LBR_INSN_AT_RIP 32(%rsp)
	LBR_SEG_LOAD_FAULT 24(%rsp)
.if \vec == 13
	LBR_GP_FIXED_UP 48(%rsp)
	orb	%dh, %dl			/* ZF clear: fixed up by the kernel */
.endif
	jnz	.Lpass_\vec
.elseif \vec == 8
	/*
	 * The same fault on the espfix64 stack (an IRET to a 16-bit user stack segment), which the
	 * CPU cannot deliver there and promotes to #DF: exc_double_fault turns it into the user's #GP
	 * when RIP is native_irq_return_iret and RSP is in espfix's P4D slot (ESPFIX_PGD_ENTRY,
	 * arch/x86/kernel/traps.c; its __KERNEL_CS test is implied by both). The tests are combined
	 * without a branch: the jump is taken only in that case. The stack now: 0 rdx, 8 rcx,
	 * 16 rax, 24 error code, 32 RIP, 40 CS, 48 RFLAGS, 56 RSP.
	 */
	movq	lbr_dump_capture+LBR_CFG_IRET(%rip), %rax
	cmpq	%rax, 32(%rsp)			/* saved RIP */
	sete	%cl
	movq	56(%rsp), %rax			/* saved RSP */
	sarq	$P4D_SHIFT, %rax
	cmpq	$ESPFIX_PGD_ENTRY, %rax
	sete	%dl
	andb	%dl, %cl			/* ZF clear: espfix's IRET fault */
	jnz	.Lpass_\vec
.elseif \vec == 3
	/*
	 * #BP: captured only at the int3 of a kprobe of lbr-dump's at a report function's entry
	 * (src/capture/report.rs: a report function ftrace cannot trace), whose address after the
	 * int3 (the saved RIP) is in the configuration's table (LBR_CFG_REPORT_IPS, unused slots 0,
	 * which no saved RIP is). Every other int3 (text patching, other kprobes, kgdb) goes
	 * straight on. The table is compared whole without a branch: the jump below is taken only
	 * when no slot matched. The stack now: 0 rdx, 8 rcx, 16 rax, 24 RIP, 32 CS, 40 RFLAGS,
	 * 48 RSP (no error code).
	 */
	movq	24(%rsp), %rax			/* saved RIP: after the int3 */
	xorl	%edx, %edx
	.set	.Lslot, 0
	.rept	LBR_CFG_REPORT_SLOTS
	cmpq	lbr_dump_capture+LBR_CFG_REPORT_IPS+8*.Lslot(%rip), %rax
	sete	%cl
	orb	%cl, %dl
	.set	.Lslot, .Lslot + 1
	.endr
	testb	%dl, %dl
	jz	.Lpass_\vec			/* no report int3 of ours: straight on */
.endif
.if \vec == 14
	/*
	 * A data access to a user address with the saved RFLAGS.AC set is a user-access fault that
	 * the kernel resolves or fixes up: not a crash, not captured. The three tests are combined
	 * without a branch, so that the one jump below is taken only in that case. The stack now:
	 * 0 rdx, 8 rcx, 16 rax, 24 error code, 32 RIP, 40 CS, 48 RFLAGS.
	 */
	movq	%cr2, %rax
	btq	$63, %rax			/* CF: CR2 in the upper (kernel) half, any paging mode */
	setnc	%cl				/* cl = user address */
	testl	$X86_EFLAGS_AC, 24+\err*8+16(%rsp)	/* saved RFLAGS.AC */
	setnz	%dl
	andb	%dl, %cl
	testl	$PF_INSTR, 24(%rsp)		/* error code: instruction fetch? */
	setz	%dl
	andb	%dl, %cl			/* ZF clear: user data access with AC set */
	jnz	.Lpass_\vec
	/*
	 * CR2 at entry (still in rax), written back before going on: exc_page_fault reads CR2
	 * after this stub, and a #DB inside the capture (a data breakpoint on lbr-dump's data) may
	 * change it (exc_debug does not preserve CR2 as the NMI path does).
	 */
	pushq	%rax
.endif
	/* Freeze. No taken branch before this. */
	LBR_FREEZE push				/* S_ENTRY */

	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10

	/* This CPU's block, found without %gs (see asm/cpu.S). */
	LBR_THIS_CPU %r9
	LBR_CLAIM_SLOT .Lunfreeze_\vec, provisional=(\vec == 3)
.if \vec == 3
	/*
	 * A report function's entry, as the report trampoline captures it (lbr_dump_report_hook,
	 * below): the int3 is its first instruction after ENDBR, so the interrupted RSP points at
	 * the return address into its caller (the check). Vector LBR_VECTOR_REPORT, error code the
	 * int3's address (the saved RIP less 1), frame the address of that return address, RIP the
	 * return address, RSP the caller's after the return; provisional, without a BTS buffer.
	 */
	movl	$LBR_VECTOR_REPORT, LBR_SNAP_VECTOR(%rsi)
	movq	S_FRAME(%rsp), %rax
	decq	%rax
	movq	%rax, LBR_SNAP_ERROR(%rsi)
	movq	S_FRAME+24(%rsp), %rax		/* interrupted RSP */
	movq	%rax, LBR_SNAP_FRAME(%rsi)
	leaq	8(%rax), %rcx
	movq	%rcx, LBR_SNAP_RSP(%rsi)
	movq	(%rax), %rax			/* the return address into the caller */
	movq	%rax, LBR_SNAP_RIP(%rsi)
	movq	%cr2, %rax
	movq	%rax, LBR_SNAP_CR2(%rsi)
	xorl	%eax, %eax
	movq	%rax, LBR_SNAP_DS_AREA(%rsi)
	movq	%rax, LBR_SNAP_BTS_INDEX(%rsi)
	movq	%rax, LBR_SNAP_BTS_BASE(%rsi)
	movl	%eax, LBR_SNAP_BTS_SLOT(%rsi)
	movl	%eax, LBR_SNAP_BTS_STATE(%rsi)
	LBR_RECORD S_ENTRY(%rsp), \vec, provisional=1
.else
	movl	$\vec, LBR_SNAP_VECTOR(%rsi)
.if \err
	movq	S_FRAME+.Lcr2_\vec(%rsp), %rax
.else
	xorl	%eax, %eax
.endif
	movq	%rax, LBR_SNAP_ERROR(%rsi)
	leaq	S_FRAME+.Lcr2_\vec+\err*8(%rsp), %rax
	movq	%rax, LBR_SNAP_FRAME(%rsi)
	movq	S_FRAME+.Lcr2_\vec+\err*8(%rsp), %rax
	movq	%rax, LBR_SNAP_RIP(%rsi)
	movq	S_FRAME+.Lcr2_\vec+\err*8+24(%rsp), %rax
	movq	%rax, LBR_SNAP_RSP(%rsi)
.if \vec == 14
	movq	48(%rsp), %rax			/* CR2 as saved at entry (see above) */
.else
	movq	%cr2, %rax
.endif
	movq	%rax, LBR_SNAP_CR2(%rsi)

	LBR_RECORD S_ENTRY(%rsp), \vec
.endif
	jmp	.Lpop_\vec

.Lunfreeze_\vec:
	/* No capture (CPU out of range, or nested): put the control value back as it was. */
	LBR_PUT_BACK S_ENTRY(%rsp)
.Lpop_\vec:
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	addq	$8, %rsp			/* S_ENTRY */
.if \vec == 14
	popq	%rax
	movq	%rax, %cr2			/* CR2 as at entry */
.endif
.Lpass_\vec:
	popq	%rdx
	popq	%rcx
	popq	%rax
.Lgo_on_\vec:
	/*
	 * Every register and the frame are as the CPU left them: on to the kernel's handler
	 * (LBR_GO_ON: a direct jmp rel32, here or in the module's trampoline; no data load).
	 */
	LBR_GO_ON \vec
SYM_CODE_END(lbr_dump_stub_\vec)
_ASM_NOKPROBE(lbr_dump_stub_\vec)
LBR_NOKPROBE_WAY_ON \vec
.endm

/*
 * #DB (vector 1): not captured (it is not a crash), only re-armed. Delivery of #DB clears the
 * recorder's enable bit (DEBUGCTL.LBR; Arch LBR: LBREn): a ptrace single-step, a hardware
 * breakpoint or a kprobe would otherwise leave recording off until the next capture. If the
 * control MSR holds lbr-dump's armed value with only the enable bit cleared, write the armed value
 * back; any other value (another owner's, or recording still on) is left alone, and so is a CPU
 * whose LBR a KVM guest holds (LBR_CPU_LENT, src/capture/cpu.rs `lend`). Any mode, kernel or user:
 * the test needs no segment or stack of the interrupted context.
 *
 * First, before any load of lbr-dump's data: if a hardware breakpoint is armed (DR7's enable
 * bits), DR7 is turned off around the re-arm and put back as found before going on, as the
 * kernel's handler does (local_db_save(), local_db_restore()): a data breakpoint on lbr-dump's
 * own data (perf mem:, kgdb) would fire on those loads and re-enter this stub on the same IST
 * stack (7.3 does not shift #DB's IST), forever. It must re-arm here even then: a kernel-mode
 * #DB that the kernel passes to no notifier (a 32-bit process's SYSENTER with TF set
 * single-steps the kernel's SYSENTER entry: exc_debug_kernel() drops DR_STEP for
 * is_sysenter_singlestep() and stops, DR6 empty) leaves nothing else to re-arm, and any user
 * may have a breakpoint armed (ptrace's on a child of its own). The two DR7 writes are only on
 * that path: without a breakpoint armed, the stub is what it was (the kernel's #DB handling
 * re-arms too, through lbr_dump_rearm_here; Documentation/lbr-dump/design.rst "Recording").
 *
 * Page-table isolation (built in): a #DB in user mode, or in the kernel's exit path after it
 * loaded the user CR3, finds lbr-dump's data unmapped: LBR_KERNEL_CR3 loads the kernel page
 * tables for the re-arm and LBR_RESTORE_CR3 puts the CR3 at entry back before going on.
 *
 * Stack at entry (IST stack in kernel and user mode): SS, RSP, RFLAGS, CS, RIP; no error code.
 * Every register is live: rax, rcx and rdx (DR7, RDMSR/WRMSR) are pushed and popped; with a
 * breakpoint armed, DR7 as found is pushed after them; built in with PTI, the user CR3 to load
 * back (or 0 under the kernel's) is pushed last.
 */
SYM_CODE_START(lbr_dump_rearm_1)
	UNWIND_HINT_IRET_ENTRY
	ENDBR
	pushq	%rax
	movq	%dr7, %rax
	testb	$DR7_ENABLED, %al
	jnz	.Lrearm_dr7			/* a breakpoint is armed (not taken without one) */
	pushq	%rcx
	pushq	%rdx
	LBR_KERNEL_CR3				/* built in, PTI: the user CR3 or 0 pushed, kernel's loaded */
	LBR_REARM .Lrearm_done
.Lrearm_done:
	LBR_RESTORE_CR3				/* built in: the CR3 at entry, popped */
	popq	%rdx
	popq	%rcx
	popq	%rax
	/* On to the kernel's #DB handler (LBR_GO_ON: a direct jump). */
	LBR_GO_ON 1
.Lrearm_dr7:
	/* rax = DR7 as found: no breakpoint while lbr-dump's data is loaded (see above). */
	pushq	%rcx
	pushq	%rdx
	pushq	%rax				/* DR7 as found */
	movl	$DR7_FIXED_1, %eax
	movq	%rax, %dr7			/* every breakpoint off */
	LBR_KERNEL_CR3
	LBR_REARM .Lrearm_dr7_done
.Lrearm_dr7_done:
	LBR_RESTORE_CR3
	popq	%rax
	movq	%rax, %dr7			/* DR7 back as found, for the kernel's handler */
	popq	%rdx
	popq	%rcx
	popq	%rax
	LBR_GO_ON 1
SYM_CODE_END(lbr_dump_rearm_1)
_ASM_NOKPROBE(lbr_dump_rearm_1)
LBR_NOKPROBE_WAY_ON 1

/* The hooked vectors and whether the CPU pushes an error code. */
LBR_STUB 0 0		/* #DE */
LBR_STUB 3 0		/* #BP: report functions' int3s only */
LBR_STUB 6 0		/* #UD */
LBR_STUB 8 1		/* #DF (IST) */
LBR_STUB 11 1		/* #NP */
LBR_STUB 12 1		/* #SS */
LBR_STUB 13 1		/* #GP */
LBR_STUB 14 1		/* #PF */
LBR_STUB 17 1		/* #AC */
#if defined(MODULE) || defined(CONFIG_X86_CET)
LBR_STUB 21 1		/* #CP (built in: the kernel has its handler only with CONFIG_X86_CET) */
#define LBR_STUB_21	lbr_dump_stub_21
#else
#define LBR_STUB_21	0
#endif

/*
 * A zero IRET frame (CS 0): what the #GP, #NP and #SS stubs test when RIP is not the IRET; and
 * the zero instruction bytes they test when RIP's cannot be read.
 */
	.section .rodata
	.balign 16
SYM_DATA_LOCAL(lbr_dump_no_frame, .quad 0, 0)

/* The functions called from C below are ordinary text. */
	.text

/*
 * Panic entry: lbr_dump_panic_entry is attached to the fentry call site of panic() and vpanic(),
 * lbr_dump_kexec_entry (the same code but for its claim, below) to crash_kexec()'s, as ftrace
 * direct calls (src/glue.c, only while armed), so the traced function's first instruction after
 * ENDBR is `call lbr_dump_panic_entry` (or _kexec_entry): one taken branch of lbr-dump's own,
 * the newest record, and the one before it is the call of panic() in its caller
 * (sysrq_handle_crash, __stack_chk_fail, check_panic_on_warn, ...). crash_kexec() is where an
 * oops that must panic goes first (oops_end()), and with kdump loaded it does not return. No
 * exception: the snapshot's vector is LBR_VECTOR_PANIC, its RIP the return address into
 * panic()'s caller, its frame the address of that return address. (If another ftrace user traces
 * panic() too, ftrace calls this through its list trampoline, and the records begin with
 * ftrace's branches.)
 *
 * One capture per arming: the first CPU to get here claims LBR_LIVE_PANIC_CPU with a locked
 * cmpxchg; panic() then vpanic(), a panic inside the panic, or another CPU's panic find it
 * claimed and only put the recorder back. The claim also lets lbr_dump_stop_entry (below) switch
 * the stop gates when the other CPUs are stopped. (Two CPUs panicking at once: the first here
 * claims, whichever panic_try_start() lets go on; function_graph on panic() would make the
 * return address at P_CALLER return_to_handler.) A claim taken at crash_kexec() has bit
 * LBR_LIVE_KEXEC_CLAIM_BIT set: crash_kexec() returns when no crash kernel is loaded (a BPF
 * program's call, the UV NMI button's, an oops before its panic()), and then gives the kernel's
 * claim back with panic_reset(), where lbr_dump_reset_entry (below) gives this one back.
 * Meanwhile another CPU's panic() can get here, find that claim and go on to vpanic()'s
 * panic_try_start(), which the kernel's claim given back lets it win: so panic() and vpanic() take
 * over a kexec claim of another CPU (a second locked cmpxchg, from the claim found), and the
 * panic that goes on is captured; the given-back claim's CPU, at its panic_reset(), then finds no
 * kexec claim and gives nothing back. If that crash_kexec() boots a crash kernel instead, its
 * NMI shootdown stops the CPU that took over (still in panic()), claimed either way. A panic
 * inside this CPU's own crash_kexec() keeps the kexec claim, as any panic inside the panic.
 *
 * A function called from C, on the panicking task's stack: every register is live (panic()'s
 * arguments, AL for its varargs), so each one used is pushed and popped, RFLAGS too (IRQs are off
 * during the capture, so the task cannot move to another CPU halfway; an interrupt between the
 * call and `cli` would add its branches). Stack after the pushes:
 *   0 r11, 8 r10, 16 r9, 24 r8, 32 rdi, 40 rsi, 48 control value at entry (P_ENTRY), 56 rdx,
 *   64 rcx, 72 rax, 80 RFLAGS, 88 return address into panic(), 96 return address into its caller.
 * With nmi_freeze, a panic() from an NMI handler (perf's hard-lockup watchdog) finds the recorder
 * frozen since that NMI's entry (lbr_dump_nmi_watch, not yet thawed): its records are kept as
 * they are (no own record then: the freeze came first) and the snapshot says nmi-entry.
 *
 * LBR_PANIC_ENTRY sym, sfx, kexec: the trampoline \sym (\sfx makes its labels unique); \kexec 1
 * marks its claim as crash_kexec()'s.
 */
#define P_ENTRY		48
#define P_CALLER	96

.macro LBR_PANIC_ENTRY sym:req, sfx:req, kexec:req
SYM_FUNC_START(\sym)
	ENDBR
	pushfq
	cli
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	LBR_FREEZE push				/* P_ENTRY; no taken branch before this */
	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	CALL_DEPTH_ACCOUNT			/* ftrace's call into here was not accounted */

	/* Claim the panic capture for this CPU (number + 1, and at crash_kexec() the kexec bit). */
	LBR_THIS_CPU %r9
	leaq	1(%r9), %rcx
.if \kexec
	btsq	$LBR_LIVE_KEXEC_CLAIM_BIT, %rcx
.endif
	xorl	%eax, %eax
	lock cmpxchgq %rcx, lbr_dump_live+LBR_LIVE_PANIC_CPU(%rip)
.if \kexec
	jne	.L\sfx\()_put_back		/* claimed before: captured once already */
.else
	je	.L\sfx\()_claimed
	/*
	 * Claimed before: rax = the claim found, rcx = this CPU's claim, rdx free (saved above).
	 * Taken at another CPU's crash_kexec() (kexec bit set, and not this CPU's number + 1 under
	 * it), it may still be given back at that CPU's panic_reset(), and then this panic would go
	 * on unclaimed: take it over, from the value found. If that value changed in the few
	 * instructions since (given back, or taken over by a third CPU's panic), put back and
	 * capture nothing, as before. Taken at panic() or vpanic(), or by this CPU's own
	 * crash_kexec() (a panic inside it): captured once already.
	 */
	movq	%rax, %rdx
	btrq	$LBR_LIVE_KEXEC_CLAIM_BIT, %rdx	/* CF = kexec bit, rdx = CPU number + 1 */
	jnc	.L\sfx\()_put_back
	cmpq	%rcx, %rdx
	je	.L\sfx\()_put_back
	lock cmpxchgq %rcx, lbr_dump_live+LBR_LIVE_PANIC_CPU(%rip)
	jne	.L\sfx\()_put_back
.L\sfx\()_claimed:
.endif

	/*
	 * r11 = SNAP_NMI_ENTRY if an NMI's entry froze the recorder on this CPU and it is still
	 * frozen with the value the watch stub wrote (see above): the value found here is the
	 * frozen form of the one it kept (nonzero). Anything else (no watch, thawed, re-armed by a
	 * capture inside the NMI handler, a stale value) is an ordinary capture.
	 */
	xorl	%r11d, %r11d
	cmpq	lbr_dump_capture+LBR_CFG_NR_CPUS(%rip), %r9
	jae	.L\sfx\()_slot
	imulq	$LBR_STOP_CPU_SIZE, %r9, %rax
	addq	lbr_dump_capture+LBR_CFG_STOP_SAVE(%rip), %rax
	movq	LBR_STOP_WATCH(%rax), %rax	/* the value the watch stub found, or 0 */
	testq	%rax, %rax
	jz	.L\sfx\()_slot
	movq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rdx
	notq	%rdx
	andq	%rdx, %rax			/* what it wrote */
	movl	$LBR_SNAP_NMI_ENTRY, %ecx
	cmpq	P_ENTRY(%rsp), %rax
	cmovel	%ecx, %r11d
.L\sfx\()_slot:
	LBR_CLAIM_SLOT .L\sfx\()_put_back	/* r9 = CPU block, rsi = snapshot */
	movl	$LBR_VECTOR_PANIC, LBR_SNAP_VECTOR(%rsi)
	movq	$0, LBR_SNAP_ERROR(%rsi)
	leaq	P_CALLER(%rsp), %rax
	movq	%rax, LBR_SNAP_FRAME(%rsi)
	movq	P_CALLER(%rsp), %rax
	movq	%rax, LBR_SNAP_RIP(%rsi)	/* where panic() was called from */
	leaq	P_CALLER+8(%rsp), %rax
	movq	%rax, LBR_SNAP_RSP(%rsi)	/* the caller's stack pointer after the return */
	movq	%cr2, %rax
	movq	%rax, LBR_SNAP_CR2(%rsi)
	LBR_RECORD P_ENTRY(%rsp), \sfx, state_or=%r11d
	jmp	.L\sfx\()_bts_off

.L\sfx\()_put_back:
	LBR_PUT_BACK P_ENTRY(%rsp)
.L\sfx\()_bts_off:
	LBR_BTS_OFF \sfx
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	addq	$8, %rsp			/* P_ENTRY */
	popq	%rdx
	popq	%rcx
	popq	%rax
	popfq
	RET
SYM_FUNC_END(\sym)
_ASM_NOKPROBE(\sym)
.endm

LBR_PANIC_ENTRY lbr_dump_panic_entry, panic, 0		/* panic(), vpanic() */
LBR_PANIC_ENTRY lbr_dump_kexec_entry, kexec, 1		/* crash_kexec() */

/*
 * Report entry: lbr_dump_report_hook is attached to the fentry call site of each report
 * function the `reports` parameter names (src/reports.rs: kasan_report(), kfence_report_error(),
 * the UBSAN handlers, the hardened list checks, by default), as ftrace direct calls
 * (src/glue.c lbr_dump_report_attach(), only while armed). Those functions are where the
 * kernel's checks that do not oops report what they found: the call into one is the check that
 * fired. Its first instruction after ENDBR is `call lbr_dump_report_hook`: one taken branch of
 * lbr-dump's own, the newest record, and the one before it is the call of the report function
 * at the check. No exception: the snapshot's vector is LBR_VECTOR_REPORT, its RIP the return
 * address into the report function's caller (the check site), its frame the address of that
 * return address (active while the report runs: the printer finds it there), its error code
 * the trampoline's call site in the report function (the return address into it less 5), which
 * names the function.
 *
 * The capture is provisional (LBR_CLAIM_SLOT and LBR_RECORD provisional=1): it keeps no BTS
 * buffer and does not advance the CPU's count, so that the next report capture on the CPU takes
 * the same slot again, and any other capture keeps it and takes the next. The printer keeps it
 * when it prints it inside the kernel's report (src/capture/report.rs); a report the kernel
 * suppresses (KASAN after its first without kasan_multi_shot, UBSAN at a location reported
 * before) is never printed, and a storm of them cycles through one slot.
 *
 * A function called from C, where every register is live (the report function's arguments),
 * so each one used is pushed and popped, RFLAGS too: IRQs are off during the capture, and
 * RFLAGS.AC, which KASAN's and UBSAN's reports may be entered with (objtool's uaccess-safe
 * list), comes back with it. Stack after the pushes (as the panic trampoline's):
 *   0 r11, 8 r10, 16 r9, 24 r8, 32 rdi, 40 rsi, 48 control value at entry (R_ENTRY), 56 rdx,
 *   64 rcx, 72 rax, 80 RFLAGS, 88 return address into the report function (R_FN), 96 return
 *   address into its caller (R_CALLER).
 * If another ftrace user traces the function too, ftrace calls this through its list
 * trampoline with the same stack, and the records begin with ftrace's branches.
 */
#define R_ENTRY		48
#define R_FN		88
#define R_CALLER	96

SYM_FUNC_START(lbr_dump_report_hook)
	ENDBR
	pushfq
	cli
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	LBR_FREEZE push				/* R_ENTRY; no taken branch before this */
	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	CALL_DEPTH_ACCOUNT			/* ftrace's call into here was not accounted */

	LBR_THIS_CPU %r9
	LBR_CLAIM_SLOT .Lreport_put_back, provisional=1	/* r9 = CPU block, rsi = snapshot */
	movl	$LBR_VECTOR_REPORT, LBR_SNAP_VECTOR(%rsi)
	movq	R_FN(%rsp), %rax
	subq	$5, %rax			/* the call of this trampoline */
	movq	%rax, LBR_SNAP_ERROR(%rsi)
	leaq	R_CALLER(%rsp), %rax
	movq	%rax, LBR_SNAP_FRAME(%rsi)
	movq	R_CALLER(%rsp), %rax
	movq	%rax, LBR_SNAP_RIP(%rsi)	/* where the report function was called from */
	leaq	R_CALLER+8(%rsp), %rax
	movq	%rax, LBR_SNAP_RSP(%rsi)	/* the caller's stack pointer after the return */
	movq	%cr2, %rax
	movq	%rax, LBR_SNAP_CR2(%rsi)
	/* No BTS buffer kept (see above): the BTS fields say so, as without BTS. */
	xorl	%eax, %eax
	movq	%rax, LBR_SNAP_DS_AREA(%rsi)
	movq	%rax, LBR_SNAP_BTS_INDEX(%rsi)
	movq	%rax, LBR_SNAP_BTS_BASE(%rsi)
	movl	%eax, LBR_SNAP_BTS_SLOT(%rsi)
	movl	%eax, LBR_SNAP_BTS_STATE(%rsi)
	LBR_RECORD R_ENTRY(%rsp), report, provisional=1
	jmp	.Lreport_done

.Lreport_put_back:
	LBR_PUT_BACK R_ENTRY(%rsp)
.Lreport_done:
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	addq	$8, %rsp			/* R_ENTRY */
	popq	%rdx
	popq	%rcx
	popq	%rax
	popfq
	RET
SYM_FUNC_END(lbr_dump_report_hook)
_ASM_NOKPROBE(lbr_dump_report_hook)

/*
 * Reset entry: lbr_dump_reset_entry is attached (ftrace direct call, only while armed, and
 * whenever lbr_dump_kexec_entry is) to panic_reset(), which gives the kernel's panic_cpu back;
 * its one caller in the kernel is crash_kexec(), after __crash_kexec() returned (no crash kernel
 * loaded, or kexec_lock held by another kexec user: kexec_load(), kexec_file_load(), a kexec
 * reboot, a crash-kernel resize or a hotplug update of its elfcorehdr). A claim taken at
 * crash_kexec() (LBR_LIVE_KEXEC_CLAIM_BIT) is given back with it, whichever CPU took it (as
 * panic_reset() resets panic_cpu: of two CPUs in crash_kexec() at once, the one that took
 * lbr-dump's claim may lose the kernel's and return without panic_reset()), so that a later
 * panic is captured and a later smp_send_stop() (a reboot) finds nothing claimed; a panic() on
 * another CPU that took it over meanwhile (above) holds a claim without the kexec bit, which
 * stays. LBR_LIVE_GIVEN_BACK gets the sequence counter as it was before the release: the
 * given-back capture (kept in the ring, kind panic) has a sequence number at most that (unless
 * another CPU was still taking it: two CPUs entering crash_kexec() at once), and any capture of
 * a later claim a greater one, so the panic printer tells them apart (src/printer.rs). A claim taken at panic() or vpanic(),
 * which do not return, is never given back.
 *
 * Captures nothing, and changes neither the recorder (its call and return are two records) nor
 * a claim of panic(). Called from C with every register live: rax, rcx, rdx and RFLAGS are saved.
 */
SYM_FUNC_START(lbr_dump_reset_entry)
	ENDBR
	pushfq
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	CALL_DEPTH_ACCOUNT			/* ftrace's call into here was not accounted */
	movq	lbr_dump_live+LBR_LIVE_PANIC_CPU(%rip), %rax
	btq	$LBR_LIVE_KEXEC_CLAIM_BIT, %rax
	jnc	.Lreset_done			/* nothing claimed, or claimed at panic() */
	/*
	 * The counter before the release: a claim taken once this release is seen gets a capture
	 * numbered after it. (No load passes the locked cmpxchg.) Nothing but a release changes a
	 * claim once taken, and the kernel's panic_cpu, still held by the caller, keeps a second
	 * panic_reset() out; the cmpxchg gives back the claim read, or nothing if it changed after
	 * all (a caller of panic_reset() that did not hold panic_cpu).
	 */
	movq	lbr_dump_live+LBR_LIVE_SEQ(%rip), %rdx
	xorl	%ecx, %ecx
	lock cmpxchgq %rcx, lbr_dump_live+LBR_LIVE_PANIC_CPU(%rip)
	jne	.Lreset_done
	movq	%rdx, lbr_dump_live+LBR_LIVE_GIVEN_BACK(%rip)
.Lreset_done:
	popq	%rdx
	popq	%rcx
	popq	%rax
	popfq
	RET
SYM_FUNC_END(lbr_dump_reset_entry)
_ASM_NOKPROBE(lbr_dump_reset_entry)

/*
 * LBR_SET_GATE gate, hook: stores the gate's low quadword prepared at arming (config field
 * `hook`: the stop stub's offset bits 31:0 with the selector, IST index, type, DPL and P
 * bits of the gate it replaces (idt.rs `retarget`); offset bits 63:32, in the
 * high quadword, are the handler's, checked at arming by idt.rs prepare_stop) at the address in
 * config field `gate` (in the stop switch's window onto the IDT page, writable now), unless that
 * address is 0 (the gate cannot be hooked). One aligned 8-byte store, while the other CPUs still
 * run: a CPU that reads the gate in parts (QEMU TCG does) and takes that vector at this instant,
 * before the panic's own stop interrupts are sent, can see half of each (src/idt.rs; README
 * "What a panic shows"). Clobbers rax, rdx and flags (lbr_dump_stop_entry saves them).
 */
.macro LBR_SET_GATE gate:req, hook:req
	movq	lbr_dump_capture+\gate(%rip), %rax
	testq	%rax, %rax
	jz	.Lset_gate_done_\@
	movq	lbr_dump_capture+\hook(%rip), %rdx
	movq	%rdx, (%rax)
.Lset_gate_done_\@:
.endm

/*
 * LBR_GATE_WINDOW pte: makes the stop switch's window onto the IDT page writable (\pte =
 * LBR_CFG_GATE_PTE_RW) or read-only again (LBR_CFG_GATE_PTE_RO): one store into its PTE (a
 * vmap() page of the kernel's page tables, src/glue.c lbr_dump_window_map), then INVLPG of the
 * window on this CPU, the only one that uses it (the first CPU to stop the others after a panic
 * was claimed: LBR_LIVE_GATES_SWITCHED). No standing writable view of the IDT exists: a
 * write primitive that knows the PTE's address can write the kernel's page tables anyway.
 * Nothing if the configuration has no window. Clobbers rax, rdx and flags.
 */
.macro LBR_GATE_WINDOW pte:req
	movq	lbr_dump_capture+LBR_CFG_GATE_PTE(%rip), %rax
	testq	%rax, %rax
	jz	.Lgate_window_done_\@
	movq	lbr_dump_capture+\pte(%rip), %rdx
	movq	%rdx, (%rax)
	movq	lbr_dump_capture+LBR_CFG_GATE_WINDOW(%rip), %rax
	invlpg	(%rax)
.Lgate_window_done_\@:
.endm

/*
 * Stop entry: lbr_dump_stop_entry is attached (ftrace direct call, only while armed) to
 * native_stop_other_cpus() and nmi_shootdown_cpus(), the two ways a panicking CPU stops the
 * others (smp_send_stop(); kdump's and crash_smp_send_stop()'s NMI shootdown). Once a panic or
 * a crash has been claimed (LBR_LIVE_PANIC_CPU, by lbr_dump_panic_entry or
 * lbr_dump_kexec_entry), it marks this CPU stopped (LBR_STOP_DONE: its own NMIs are no stop) and
 * points the NMI and REBOOT_VECTOR gates at the stop stubs below: one aligned 8-byte store each,
 * prepared at arming (0: that gate cannot be hooked), through a window onto the IDT page that is
 * writable only around these two stores. So the interrupts that stop the other CPUs are the first
 * to reach the stubs, not a perf NMI or the panic backtrace during vpanic()'s printing. On a
 * reboot (nothing claimed, or a claim of a crash_kexec() that returned given back) it does
 * nothing. Called from C with every register live: rax, rdx and RFLAGS are saved.
 */
SYM_FUNC_START(lbr_dump_stop_entry)
	ENDBR
	pushfq
	pushq	%rax
	pushq	%rdx
	CALL_DEPTH_ACCOUNT			/* ftrace's call into here was not accounted */
	cmpq	$0, lbr_dump_live+LBR_LIVE_PANIC_CPU(%rip)
	je	.Lstop_entry_done		/* no panic: a reboot */
	LBR_THIS_CPU %rax	/* this CPU, the one that stops the others */
	LBR_STOP_AREA %rax, .Lstop_entry_gates
	movq	$1, LBR_STOP_DONE(%rax)
.Lstop_entry_gates:
	/*
	 * One CPU switches the gates: two can get here (a panic's smp_send_stop() and another
	 * CPU's crash_smp_send_stop() from an oops into crash_kexec(); the kernel's own guards
	 * against a second caller come after the function's entry), and one must not close the
	 * window while the other stores through it.
	 */
	movl	$1, %eax
	xchgq	%rax, lbr_dump_live+LBR_LIVE_GATES_SWITCHED(%rip)
	testq	%rax, %rax
	jnz	.Lstop_entry_wait		/* switched, or being switched, by another CPU */
	LBR_GATE_WINDOW LBR_CFG_GATE_PTE_RW
	LBR_SET_GATE LBR_CFG_NMI_GATE, LBR_CFG_NMI_HOOK
	LBR_SET_GATE LBR_CFG_IPI_GATE, LBR_CFG_IPI_HOOK
	LBR_GATE_WINDOW LBR_CFG_GATE_PTE_RO
	movq	$2, lbr_dump_live+LBR_LIVE_GATES_SWITCHED(%rip)	/* done */
	jmp	.Lstop_entry_done
.Lstop_entry_wait:
	/*
	 * The other CPU's stores may not be done: wait for them, so that this CPU's stop
	 * interrupts find the stop stubs. Bounded (a million PAUSEs, well under a second): the
	 * other CPU may itself have been stopped halfway.
	 */
	movl	$1000000, %eax
.Lstop_entry_spin:
	cmpq	$2, lbr_dump_live+LBR_LIVE_GATES_SWITCHED(%rip)
	je	.Lstop_entry_done
	pause
	decl	%eax
	jnz	.Lstop_entry_spin
.Lstop_entry_done:
	popq	%rdx
	popq	%rax
	popfq
	RET
SYM_FUNC_END(lbr_dump_stop_entry)
_ASM_NOKPROBE(lbr_dump_stop_entry)

/*
 * Stop stubs: the NMI (vector 2) and REBOOT_VECTOR (0xf8) gates point here only once the
 * panicking CPU stops the others (lbr_dump_stop_entry above; disarmed, or before that, they are
 * the kernel's, and cost nothing). vpanic() stops the other CPUs with REBOOT_VECTOR, then with
 * an NMI those that did not answer within a second (interrupts off); kdump's shutdown uses NMIs.
 * The first of these to reach a CPU captures its records: the newest is that interrupt, from
 * where the CPU was, the rest is what it was doing. Later ones (LBR_STOP_DONE) go straight on,
 * so an NMI on a halted CPU cannot push the capture out of the ring. (An NMI of another kind
 * between the switch and the stop interrupt, a perf sample, is taken for the stop: microseconds
 * for a CPU with interrupts on, up to the second before the stop NMI for one with them off. A
 * CPU running a KVM guest on VMX takes these interrupts through KVM's VM-exit path, not the
 * IDT: it is not captured; on SVM they arrive here after the #VMEXIT.)
 *
 * The NMI arrives on its IST stack, and asm_exc_nmi's nested-NMI handling (entry_64.S) keeps
 * state below the hardware frame: at -8 the slot where it saves rdx, at -16 the "NMI executing"
 * flag and below it the "iret" and "outermost" frame copies, which a nested NMI reads or
 * rewrites. So this stub keeps the frame exactly as delivered and writes no stack memory but
 * -8(%rsp): the kernel's own first push goes there, and nothing reads it later (first_nmi
 * reloads rdx from it before NMIs can nest again). Every other register is saved in this CPU's
 * save area (layout.rs `stop`), not on the stack. It must take no exception (an IRET would
 * unblock NMIs on this stack): it checks DR7 before its first data load (a data breakpoint on
 * lbr-dump's data), touches only MSRs probed at arming and memory that is always mapped, and is
 * on the kprobe blacklist. (A machine check inside it is the one exposure left: its IRET unblocks
 * NMIs while the hardware frame is the only copy, as in the kernel's own first instructions, here
 * for the length of a capture.) REBOOT_VECTOR uses the same code with its own save area (an NMI
 * may arrive inside it).
 *
 * An NMI that does not capture (the skip path: as a rule because the REBOOT_VECTOR stub it
 * interrupted marked the CPU stopped) and whose frame's RIP is inside the REBOOT_VECTOR body
 * (\back) is dropped: the NMI body returns there (IRETQ; ERETS with FRED), the frame as
 * delivered. vpanic()'s stop NMI, sent to a CPU whose REBOOT_VECTOR capture outlasted the
 * second vpanic() waits, would otherwise stop the CPU from its handler (smp_stop_nmi_callback()
 * calls stop_this_cpu()) with that capture half done; returned to, the capture completes and goes
 * on to REBOOT_VECTOR's handler, which stops the CPU as the NMI's would have. Against entry_64.S's
 * nested-NMI rules: REBOOT_VECTOR is taken with interrupts on, never inside an NMI handler, so no
 * kernel NMI is in progress on this CPU and the hardware frame is the NMI stack's only state;
 * nothing below it was written but -8(%rsp); the IRETQ returns to kernel code on the interrupted
 * stack, as asm_exc_nmi's nested_nmi_out does, and unblocks NMIs: the next NMI starts afresh
 * (another stop NMI comes back the same way). The test follows the capture decision, so the
 * capture's way (its freeze first) is unchanged, and only a panic's stop reaches it (the gates are
 * the kernel's before). What the dropped NMI costs: Documentation/lbr-dump/design.rst "What a
 * panic shows".
 *
 * Any mode, user or kernel: the capture uses neither %gs nor the interrupted stack; but with
 * page-table isolation (built in) a CPU that takes the stop interrupt under the user CR3 (in user
 * mode, or in the kernel's exit path) is not captured: lbr-dump's data is not mapped there
 * (LBR_SKIP_IF_USER_CR3; Documentation/lbr-dump/design.rst "Page-table isolation"). No
 * clac/cld: nothing here depends on AC or DF (no user access, no string instruction), and the
 * kernel's handler clears both.
 * Stack at entry: SS, RSP, RFLAGS, CS, RIP (no error code). Every register is live.
 *
 * With FRED (\fred: the body inlined in lbr_dump_fred_kernel, below) the stack at entry is a
 * FRED frame, its error code slot first (0), then RIP: .Lstop_f_ is 8. There is no IST and no
 * nested-NMI state below the frame: an event nested on the same stack level starts below the
 * 64-byte redzone the kernel keeps (FRED_CONFIG_REDZONE, which arming keeps), so -8(%rsp) is
 * still ours; an NMI's ERETS is what unblocks NMIs, not a #MC's. The dispatch loads the stop
 * flag before the DR7 test: a data breakpoint there is a #DB, delivered on the higher of the
 * current stack level and #DB's (1): inside the NMI, its level 2, below the redzone; inside
 * REBOOT_VECTOR, level 1. Its own entry loads nothing of ours while DR7 is set, and its return
 * leaves NMIs blocked.
 */
.macro LBR_STOP_BODY vec:req half:req name:req fred:req back
/* With \fred, a FRED frame: the error code slot first, then RIP (below: LBR_FRED_*). */
.set	.Lstop_f_\name, \fred * 8
.ifb \back
	/* REBOOT_VECTOR's: its first instruction, where an NMI may return (see .Lstop_skip_) */
.Lstop_body_\name:
	ANNOTATE_NOENDBR			/* an address compared with, not a branch target */
.endif
	movq	%rax, -8(%rsp)			/* the one stack slot used (see above) */
	movq	%dr7, %rax
	testb	$DR7_ENABLED, %al
	jnz	.Lstop_skip_\name		/* a breakpoint is armed: load nothing of ours */
	LBR_SKIP_IF_USER_CR3 .Lstop_skip_\name	/* PTI, user page tables: not captured */
	LBR_THIS_CPU %rax	/* rax = this CPU's number, without %gs */
	LBR_STOP_AREA %rax, .Lstop_skip_\name	/* this CPU's save areas */
	cmpq	$0, LBR_STOP_DONE(%rax)
	jne	.Lstop_skip_\name		/* stopped and captured before: go on */
	movq	$1, LBR_STOP_DONE(%rax)
.if \half
	addq	$\half, %rax
.endif
	movq	%r11, LBR_STOP_R11(%rax)
	movq	%rax, %r11			/* r11 = this stub's save area, until the end */
	movq	-8(%rsp), %rax
	movq	%rax, LBR_STOP_RAX(%r11)
	movq	%rcx, LBR_STOP_RCX(%r11)
	movq	%rdx, LBR_STOP_RDX(%r11)
	LBR_FREEZE LBR_STOP_ENTRY(%r11)		/* no taken branch before this */
	movq	%rsi, LBR_STOP_RSI(%r11)
	movq	%rdi, LBR_STOP_RDI(%r11)
	movq	%r8, LBR_STOP_R8(%r11)
	movq	%r9, LBR_STOP_R9(%r11)
	movq	%r10, LBR_STOP_R10(%r11)

	LBR_THIS_CPU %r9
	LBR_CLAIM_SLOT .Lstop_put_back_\name	/* r9 = CPU block, rsi = snapshot */
	movl	$\vec, LBR_SNAP_VECTOR(%rsi)
	movq	$0, LBR_SNAP_ERROR(%rsi)
	leaq	.Lstop_f_\name(%rsp), %rax
	movq	%rax, LBR_SNAP_FRAME(%rsi)	/* the frame (its RIP), as delivered */
	movq	.Lstop_f_\name(%rsp), %rax
	movq	%rax, LBR_SNAP_RIP(%rsi)
	movq	.Lstop_f_\name+24(%rsp), %rax
	movq	%rax, LBR_SNAP_RSP(%rsi)
	movq	%cr2, %rax
	movq	%rax, LBR_SNAP_CR2(%rsi)
	LBR_RECORD LBR_STOP_ENTRY(%r11), stop_\name, rearm=0
	jmp	.Lstop_restore_\name

.Lstop_put_back_\name:
	LBR_PUT_BACK LBR_STOP_ENTRY(%r11)
.Lstop_restore_\name:
	LBR_BTS_OFF stop_\name
	movq	LBR_STOP_RAX(%r11), %rax
	movq	LBR_STOP_RCX(%r11), %rcx
	movq	LBR_STOP_RDX(%r11), %rdx
	movq	LBR_STOP_RSI(%r11), %rsi
	movq	LBR_STOP_RDI(%r11), %rdi
	movq	LBR_STOP_R8(%r11), %r8
	movq	LBR_STOP_R9(%r11), %r9
	movq	LBR_STOP_R10(%r11), %r10
	movq	LBR_STOP_R11(%r11), %r11
.if \fred
	LBR_FRED_GO_ON kernel
.else
	LBR_GO_ON \vec
.endif
.Lstop_skip_\name:
.ifnb \back
	/*
	 * The NMI's: if it interrupted the REBOOT_VECTOR body \back (anywhere from its first
	 * instruction, after ENDBR, to its last, the jump on), return there, the NMI dropped: that
	 * CPU is on its way to stop_this_cpu() through REBOOT_VECTOR's handler, and a capture
	 * there, which the NMI's handler would cut short (smp_stop_nmi_callback() stops the CPU),
	 * goes on to its end. The frame's RIP against two code addresses: no data load (a
	 * breakpoint may be armed, the user CR3 loaded), no stack memory but -8(%rsp), and the
	 * frame as delivered for the IRETQ (ERETS under FRED, the stack pointer at the error code)
	 * that unblocks NMIs, as the kernel's nested_nmi_out returns (see "Stop stubs" above). rax
	 * is scratch.
	 */
	leaq	.Lstop_body_\back(%rip), %rax
	cmpq	%rax, .Lstop_f_\name(%rsp)
	jb	.Lstop_go_on_\name
	leaq	.Lstop_body_last_\back(%rip), %rax
	cmpq	%rax, .Lstop_f_\name(%rsp)
	ja	.Lstop_go_on_\name
	movq	-8(%rsp), %rax
.if \fred
	ERETS					/* NMIs unblocked (the frame's NMI bit) */
.else
	iretq					/* NMIs unblocked */
.endif
.Lstop_go_on_\name:
.endif
	movq	-8(%rsp), %rax
	/* Every register and the frame as delivered: on to the kernel's handler (LBR_GO_ON). */
.ifb \back
	/* REBOOT_VECTOR's: its last instruction, where an NMI may return (see .Lstop_skip_) */
.Lstop_body_last_\name:
	ANNOTATE_NOENDBR			/* an address compared with, not a branch target */
.endif
.if \fred
	LBR_FRED_GO_ON kernel
.else
	LBR_GO_ON \vec
.endif
.endm

/*
 * The IDT's stop stubs, at their gates. (FRED's are inlined in lbr_dump_fred_kernel, on the
 * way of its dispatch that each takes: a jump to a separate stub would be one more taken branch
 * before the freeze.)
 */
.macro LBR_STOP_STUB vec:req half:req name:req back
SYM_CODE_START(lbr_dump_stop_\name)
	UNWIND_HINT_IRET_ENTRY
	ENDBR
	LBR_STOP_BODY \vec, \half, \name, 0, \back
SYM_CODE_END(lbr_dump_stop_\name)
_ASM_NOKPROBE(lbr_dump_stop_\name)
LBR_NOKPROBE_WAY_ON \vec
.endm

	LBR_ENTRY_TEXT
LBR_STOP_STUB 2 LBR_STOP_NMI nmi ipi		/* NMI (IST); back to lbr_dump_stop_ipi */
LBR_STOP_STUB 248 LBR_STOP_IPI ipi		/* REBOOT_VECTOR (0xf8) */

/*
 * NMI watch (the `nmi_freeze` parameter, off by default): while armed, the NMI gate points here
 * (until a panic's stop switches it to the stop stub). A kernel-mode NMI freezes the recorder at
 * its entry and goes on to the kernel's handler; lbr-dump's NMI handler (src/glue.c, registered
 * after perf's, so it runs after it) thaws it with lbr_dump_nmi_thaw below. So when an NMI
 * handler panics (perf's hard-lockup watchdog: the stuck CPU panics from its own perf NMI), the
 * panic trampoline finds the records as they were when the NMI arrived: the loop the CPU was
 * stuck in, not the NMI handler's branches. User-mode NMIs go straight on (no kernel lockup
 * there). Same stack discipline as the stop stubs (no stack memory but -8(%rsp), DR7 before any
 * data of ours, no exception); rcx, rdx and rsi are kept in this CPU's NMI save area (the stop
 * NMI stub's, which cannot run at the same time: same gate, NMIs blocked). The value it froze is
 * kept in LBR_STOP_WATCH only if recording was on (a nested NMI finds it off and keeps the
 * outer's), so the thaw restores the value of the outermost NMI.
 * Stack at entry: SS, RSP, RFLAGS, CS, RIP. Every register is live.
 */
SYM_CODE_START(lbr_dump_nmi_watch)
	UNWIND_HINT_IRET_ENTRY
	ENDBR
	testb	$3, 8(%rsp)			/* CS.RPL: user mode? */
	jnz	.Lwatch_go_on			/* yes: straight on */
	movq	%rax, -8(%rsp)			/* the one stack slot used (see the stop stubs) */
	movq	%dr7, %rax
	testb	$DR7_ENABLED, %al
	jnz	.Lwatch_skip			/* a breakpoint is armed: load nothing of ours */
	LBR_SKIP_IF_USER_CR3 .Lwatch_skip	/* PTI: the exit path's user CR3 (kernel mode) */
	LBR_THIS_CPU %rax
	LBR_STOP_AREA %rax, .Lwatch_skip
	movq	%rcx, LBR_STOP_NMI+LBR_STOP_RCX(%rax)
	movq	%rdx, LBR_STOP_NMI+LBR_STOP_RDX(%rax)
	movq	%rsi, LBR_STOP_NMI+LBR_STOP_RSI(%rax)
	movq	%rax, %rsi			/* rsi = this CPU's save areas */
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value at entry */
	movq	LBR_STOP_WATCH(%rsi), %rcx
	testq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rax
	cmovnzq	%rax, %rcx			/* recording on: this is the value to thaw to */
	movq	%rcx, LBR_STOP_WATCH(%rsi)
	movq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rdx
	notq	%rdx
	andq	%rdx, %rax			/* rax = frozen value */
	movq	%rax, %rdx
	shrq	$32, %rdx
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx	/* (rcx held the value to thaw to) */
	wrmsr					/* frozen until lbr_dump_nmi_thaw() */
	movq	LBR_STOP_NMI+LBR_STOP_RCX(%rsi), %rcx
	movq	LBR_STOP_NMI+LBR_STOP_RDX(%rsi), %rdx
	movq	LBR_STOP_NMI+LBR_STOP_RSI(%rsi), %rsi
.Lwatch_skip:
	movq	-8(%rsp), %rax
.Lwatch_go_on:
	/* Every register and the frame as delivered: on to the kernel's handler (LBR_GO_ON). */
	LBR_GO_ON 2
SYM_CODE_END(lbr_dump_nmi_watch)
_ASM_NOKPROBE(lbr_dump_nmi_watch)

	.text

/*
 * void lbr_dump_nmi_thaw(void): from lbr-dump's NMI handler (src/glue.c), in NMI context: if
 * lbr_dump_nmi_watch froze the recorder at this NMI's entry, put the value it found back, unless
 * another owner changed the control MSR since (then its value is left). Never an enable bit the
 * armed value (LBR_CFG_ARMED) no longer has: the value kept may be older than this NMI (an NMI
 * that froze the recorder never reached this handler: late microcode loading's rendezvous, an
 * emergency handler; the recorder stayed frozen, and a later NMI's entry keeps the older value),
 * and meanwhile TR|BTS may have been given up for good (perf took the debug store, src/capture/bts.rs
 * perf_takes_ds): switching them back on would store BTS records through another owner's
 * IA32_DS_AREA. Nor the LBR switch on a CPU whose LBR a KVM guest holds (LBR_CPU_LENT).
 * C-callable: clobbers rax, rcx, rdx, rsi, rdi, r8 and flags.
 */
SYM_FUNC_START(lbr_dump_nmi_thaw)
	LBR_THIS_CPU %rsi
	LBR_STOP_AREA %rsi, .Lthaw_done
	movq	LBR_STOP_WATCH(%rsi), %rdi	/* the value found at the NMI's entry, or 0 */
	testq	%rdi, %rdi
	jz	.Lthaw_done
	movq	$0, LBR_STOP_WATCH(%rsi)
	movq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rdx
	notq	%rdx
	orq	lbr_dump_capture+LBR_CFG_ARMED(%rip), %rdx
	andq	%rdx, %rdi			/* no enable bit the armed value lacks */
	LBR_CPU_BLOCK %r8, .Lthaw_lent_done
	cmpl	$0, LBR_CPU_LENT(%r8)
	je	.Lthaw_lent_done
	movq	lbr_dump_capture+LBR_CFG_REARM_MASK(%rip), %rdx
	notq	%rdx
	andq	%rdx, %rdi			/* lent to a KVM guest: never the LBR switch */
.Lthaw_lent_done:
	movl	lbr_dump_capture+LBR_CFG_CTL_MSR(%rip), %ecx
	rdmsr
	shlq	$32, %rdx
	orq	%rdx, %rax			/* rax = control value now */
	movq	lbr_dump_capture+LBR_CFG_MASK(%rip), %rdx
	notq	%rdx
	andq	%rdi, %rdx			/* rdx = the frozen value the stub wrote */
	cmpq	%rdx, %rax
	jne	.Lthaw_done			/* another owner's value now: leave it */
	movq	%rdi, %rax
	movq	%rdi, %rdx
	shrq	$32, %rdx
	wrmsr					/* recording on again */
.Lthaw_done:
	RET
SYM_FUNC_END(lbr_dump_nmi_thaw)
_ASM_NOKPROBE(lbr_dump_nmi_thaw)

/*
 * bool lbr_dump_rearm_here(void): from the kernel's #DB handling, through lbr-dump's debug
 * notifier (DIE_DEBUG) and its callback at the entry of the die chain's first notifier,
 * hw_breakpoint_exceptions_notify() (src/capture/debug.rs, src/glue.c), on the CPU that took
 * the #DB, interrupts off: the re-arm of lbr_dump_rearm_1 (LBR_REARM: lbr-dump's armed value
 * written back if the control MSR holds it with only the switch cleared, and lbr-dump is armed
 * on this CPU with no KVM guest holding its LBR). This is what puts recording back after a #DB
 * that no stub re-armed: every user-mode #DB under FRED (the page's ring-3 entry is one jump),
 * and every #DB where #DB is not among the chosen vectors. Returns true if it wrote.
 * No DR7 test: for a kernel-mode #DB the kernel saved and cleared DR7 before its notifiers
 * (exc_debug_kernel(): local_db_save()). For a user-mode #DB, DR7 still holds the user's
 * breakpoints, which are on user addresses (a breakpoint on a kernel address needs privilege);
 * a privileged data breakpoint on lbr-dump's data hit here is a kernel-mode #DB (IST stack, or
 * FRED's stack level 1), which lbr_dump_rearm_1 or the FRED page passes on with DR7 off and
 * the kernel handles after clearing DR7 (so its own notifiers load nothing that hits), then
 * returns here: one nested #DB per watched load, no loop. Nothing while this CPU is inside a
 * capture (its busy flag: a data breakpoint on the snapshot it writes) or inside an NMI that
 * nmi_freeze froze (LBR_STOP_WATCH): the capture restores the control value itself, the NMI's
 * thaw does, and a re-arm in between would record over what they keep.
 * C-callable: clobbers rax, rcx, rdx and flags.
 */
SYM_FUNC_START(lbr_dump_rearm_here)
	LBR_CPU_BLOCK %rcx, .Lrearm_here_left
	cmpl	$0, LBR_CPU_BUSY(%rcx)
	jne	.Lrearm_here_left		/* a #DB inside a capture here: it restores the value */
	cmpq	$0, lbr_dump_capture+LBR_CFG_STOP_SAVE(%rip)
	je	.Lrearm_here_no_watch		/* no save areas yet (arming): no NMI watch either */
	LBR_THIS_CPU %rcx
	LBR_STOP_AREA %rcx, .Lrearm_here_left
	cmpq	$0, LBR_STOP_WATCH(%rcx)
	jne	.Lrearm_here_left		/* inside an NMI frozen at entry: its thaw restores */
.Lrearm_here_no_watch:
	LBR_REARM .Lrearm_here_left
	movl	$1, %eax			/* re-armed */
	RET
.Lrearm_here_left:
	xorl	%eax, %eax			/* left as it was */
	RET
SYM_FUNC_END(lbr_dump_rearm_here)
_ASM_NOKPROBE(lbr_dump_rearm_here)

#ifdef CONFIG_X86_FRED
/*
 * FRED entry page. With FRED (Flexible Return and Event Delivery, on by default where the CPU
 * has it; the kernel then invalidates the IDT), every event enters at the page whose address is
 * in the CPU's IA32_FRED_CONFIG: ring-3 events at its base, ring-0 events at base + 256, with a
 * FRED frame on the stack (arch/x86/entry/entry_64_fred.S). While armed, src/fred.rs points
 * every CPU's IA32_FRED_CONFIG at this page instead of asm_fred_entrypoint_user's (the low bits,
 * the redzone and the interrupt stack level, kept), and back when disarming. So one page serves
 * every vector, every CPU:
 *  - ring 3 (lbr_dump_fred_user): a direct jmp to the kernel's user entry and nothing else: no
 *    data load, every register user-controlled, before the kernel's mitigations. Not captured
 *    (as the IDT stubs pass user-mode exceptions); nor re-armed here: a user-mode #DB clears
 *    the LBR switch, and the kernel's #DB handling re-arms through lbr-dump's debug notifier
 *    (lbr_dump_rearm_here; Documentation/lbr-dump/design.rst "Recording").
 *  - ring 0 (lbr_dump_fred_kernel): hardware exceptions of the captured vectors are captured as
 *    the IDT stubs capture them: the event type and vector are tested in the frame, laid out so
 *    that a crash falls through every test up to the freeze (no taken branch of ours before it);
 *    a kernel-mode #DB re-arms if #DB is chosen (as lbr_dump_rearm_1); once a panic has claimed the stop
 *    (LBR_LIVE_GATES_SWITCHED is 2: the stop trampoline has run), the NMI and REBOOT_VECTOR
 *    fall into the stop body (LBR_STOP_BODY), inlined after their tests, one taken branch
 *    after delivery; everything else (interrupts, NMIs, INT3, ...) goes straight on to the
 *    kernel's kernel entry after one to four compares of the frame and two taken branches.
 * FRED's frame at delivery (the stack pointer at the error code; FRED pushes one for every
 * event, 0 where the event has none), 64 bytes:
 *   0 error code, 8 RIP, 16 CS (+ stack level, WFE), 24 RFLAGS, 32 RSP,
 *   40 SS + event info (vector bits 39:32, type bits 51:48), 48 event data (#PF: the faulting
 *   address, which FRED kernels read instead of CR2; #DB: DR6), 56 reserved.
 * A ring-0 event delivered on the same stack level goes below a 64-byte redzone under RSP
 * (FRED_CONFIG_REDZONE), aligned down; #DB, NMI, #MC and #DF move up to stack levels 1, 2, 2 and
 * 3 (arch/x86/kernel/fred.c cpu_init_fred_rsps(); an event never lowers the level: a #DB inside
 * an NMI stays on level 2), and an NMI event blocks NMIs until its ERETS: either way the stack
 * below RSP is ours to push on. FRED and page-table isolation
 * never coexist (the kernel clears FRED when PTI is on, arch/x86/mm/pti.c): no CR3 to switch.
 * FRED entry points have no ENDBR (event delivery needs none): ANNOTATE_NOENDBR.
 */
#define LBR_FRED_ERR	0
#define LBR_FRED_RIP	8
#define LBR_FRED_FLAGS	24
#define LBR_FRED_RSP	32
#define LBR_FRED_VECTOR	44	/* the SS slot's bits 39:32 */
#define LBR_FRED_TYPE	46	/* its bits 55:48: the type in 51:48, 55:52 reserved (0) */
#define LBR_FRED_DATA	48
/* Event types (arch/x86/include/asm/fred.h EVENT_TYPE_*). */
#define LBR_FRED_EXTINT	0
#define LBR_FRED_NMI	2
#define LBR_FRED_HWEXC	3
/*
 * The hardware exceptions the page can capture: the hookable vectors but #DB (re-arm only), as
 * src/report.rs VECTORS lists them; LBR_CFG_FRED_VECTORS holds the chosen ones.
 */
#define LBR_FRED_CAPTURABLE	((1 << 0) | (1 << 6) | (1 << 8) | (1 << 11) | (1 << 12) | \
				 (1 << 13) | (1 << 14) | (1 << 17) | (1 << 21))
/* The kernel's REBOOT_VECTOR (arch/x86/include/asm/irq_vectors.h). */
#define LBR_FRED_REBOOT	0xf8

	LBR_ENTRY_TEXT
	.balign	4096
SYM_CODE_START_NOALIGN(lbr_dump_fred_user)
	UNWIND_HINT_END_OF_STACK
	ANNOTATE_NOENDBR
	LBR_FRED_GO_ON user
SYM_CODE_END(lbr_dump_fred_user)
_ASM_NOKPROBE(lbr_dump_fred_user)

	.org	lbr_dump_fred_user + 256, 0xcc
SYM_CODE_START_NOALIGN(lbr_dump_fred_kernel)
	UNWIND_HINT_IRET_ENTRY offset=8
	ANNOTATE_NOENDBR
	cmpb	$LBR_FRED_NMI, LBR_FRED_TYPE(%rsp)
	je	.Lfred_nmi			/* an NMI (not taken for a crash) */
	cmpb	$LBR_FRED_HWEXC, LBR_FRED_TYPE(%rsp)
	jne	.Lfred_event			/* not an exception (not taken for a crash) */
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	/*
	 * The stack now: 0 rdx, 8 rcx, 16 rax, 24 error code, 32 RIP, 40 CS, 48 RFLAGS, 56 RSP,
	 * 64 SS + event info (vector at 68), 72 event data: above the pushes, the same offsets as
	 * in the IDT stubs (which see an error code for these vectors).
	 */
	movzbl	24+LBR_FRED_VECTOR(%rsp), %eax	/* the vector */
	movl	$LBR_FRED_CAPTURABLE, %ecx
	btl	%eax, %ecx
	jnc	.Lfred_not_captured		/* #DB, or a vector never captured */
	btl	%eax, lbr_dump_capture+LBR_CFG_FRED_VECTORS(%rip)
	jnc	.Lfred_pass			/* not one of the chosen vectors */
	/*
	 * A #PF data access to a user address with the saved RFLAGS.AC set: a user-access fault
	 * (copy_from_user and friends) that the kernel resolves or fixes up, not captured (as
	 * lbr_dump_stub_14). The address is the event data. Combined without a branch.
	 */
	cmpl	$14, %eax
	sete	%cl
	btq	$63, 24+LBR_FRED_DATA(%rsp)	/* CF: the address is in the upper (kernel) half */
	setnc	%dl
	andb	%dl, %cl
	testl	$X86_EFLAGS_AC, 24+LBR_FRED_FLAGS(%rsp)
	setnz	%dl
	andb	%dl, %cl
	testl	$PF_INSTR, 24+LBR_FRED_ERR(%rsp)
	setz	%dl
	andb	%dl, %cl			/* ZF clear: a user-access fault */
	jnz	.Lfred_pass
	ASM_CLAC				/* AC may be set inside a user-access region */
	cld					/* DF may be set (memmove) */
	/* Freeze. No taken branch before this. */
	LBR_FREEZE push				/* 0: the control value at entry */
	/*
	 * The #GP, #NP and #SS the kernel fixes up and any user causes at will are not captured:
	 * a fault at ERETU (the user's bad return frame, fixed up by ex_handler_eretu; FRED's
	 * equivalent of the IDT stubs' IRET rule), and the IDT stubs' rules (LBR_SEG_LOAD_FAULT,
	 * LBR_GP_FIXED_UP: the same macros). Tested after the freeze (one stub for every vector:
	 * branches by vector would be taken before it); such a fault only puts the control value
	 * back. The stack now: 0 control value, 8 rdx, 16 rcx, 24 rax, 32 error code, 40 RIP,
	 * 48 CS, 56 RFLAGS, 64 RSP, 72 SS + event info.
	 */
	movzbl	8+24+LBR_FRED_VECTOR(%rsp), %eax
	subl	$11, %eax
	cmpl	$2, %eax
	ja	.Lfred_capture			/* not #NP, #SS or #GP */
	LBR_INSN_AT_RIP 40(%rsp)
	cmpl	$0xca010ff3, %eax		/* ERETU: f3 0f 01 ca */
	je	.Lfred_fixed_up
	LBR_SEG_LOAD_FAULT 32(%rsp)
	jnz	.Lfred_fixed_up
	cmpb	$13, 8+24+LBR_FRED_VECTOR(%rsp)
	jne	.Lfred_capture			/* the rest are #GP's */
	LBR_GP_FIXED_UP 56(%rsp)
	jnz	.Lfred_fixed_up
.Lfred_capture:
	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10
	/*
	 * The stack now: 0 r10, 8 r9, 16 r8, 24 rdi, 32 rsi, 40 control value at entry, 48 rdx,
	 * 56 rcx, 64 rax, then the frame at 72: 72 error code, 80 RIP, 104 RSP, 112 SS + event info,
	 * 120 event data.
	 */
	LBR_THIS_CPU %r9
	LBR_CLAIM_SLOT .Lfred_unfreeze
	movzbl	72+LBR_FRED_VECTOR(%rsp), %eax
	movl	%eax, LBR_SNAP_VECTOR(%rsi)
	movq	72+LBR_FRED_ERR(%rsp), %rax
	movq	%rax, LBR_SNAP_ERROR(%rsi)
	leaq	72+LBR_FRED_RIP(%rsp), %rax
	movq	%rax, LBR_SNAP_FRAME(%rsi)
	movq	72+LBR_FRED_RIP(%rsp), %rax
	movq	%rax, LBR_SNAP_RIP(%rsi)
	movq	72+LBR_FRED_RSP(%rsp), %rax
	movq	%rax, LBR_SNAP_RSP(%rsi)
	movq	%cr2, %rax
	cmpb	$14, 72+LBR_FRED_VECTOR(%rsp)
	cmoveq	72+LBR_FRED_DATA(%rsp), %rax	/* #PF: the event data (CR2 is not what FRED's handler reads) */
	movq	%rax, LBR_SNAP_CR2(%rsi)
	LBR_RECORD 40(%rsp), fred
	jmp	.Lfred_pop
.Lfred_unfreeze:
	/* No capture (CPU out of range, or nested): put the control value back as it was. */
	LBR_PUT_BACK 40(%rsp)
.Lfred_pop:
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	addq	$8, %rsp			/* the control value at entry */
	jmp	.Lfred_pass
.Lfred_fixed_up:
	/* Fixed up by the kernel: not captured, the control value put back. */
	LBR_PUT_BACK (%rsp)
	addq	$8, %rsp
	jmp	.Lfred_pass
.Lfred_not_captured:
	cmpl	$1, %eax
	jne	.Lfred_pass
	/*
	 * A kernel-mode #DB: if vector 1 is among the chosen ones (as the IDT hooks gate 1 only
	 * then), re-arm as lbr_dump_rearm_1 does (its delivery cleared the LBR switch), unless a
	 * hardware breakpoint is armed (a data breakpoint on lbr-dump's data would fire again here:
	 * load nothing of ours, not even the chosen set). Either way the kernel's #DB handler then
	 * re-arms through lbr-dump's debug notifier (lbr_dump_rearm_here), as with the IDT.
	 */
	movq	%dr7, %rax
	testb	$DR7_ENABLED, %al
	jnz	.Lfred_pass
	btl	$1, lbr_dump_capture+LBR_CFG_FRED_VECTORS(%rip)
	jnc	.Lfred_pass			/* #DB not chosen */
	LBR_REARM .Lfred_pass
.Lfred_pass:
	popq	%rdx
	popq	%rcx
	popq	%rax
.Lfred_go_on:
	/* Every register and the frame as delivered: on to the kernel's kernel entry. */
	LBR_FRED_GO_ON kernel
.Lfred_event:
	/*
	 * Neither an NMI nor a hardware exception. Once a panic has claimed the stop and its stop
	 * trampoline has run (LBR_LIVE_GATES_SWITCHED 2), the REBOOT_VECTOR that stops this CPU
	 * falls through to the stop body below (lbr_dump_stop_ipi's), and the NMI (.Lfred_nmi) to
	 * the one after it: each stop takes one taken branch of the page's before its freeze, the
	 * dispatch's je or jne above, which is then its snapshot's newest record. Until then, one
	 * data load per REBOOT_VECTOR (and per NMI), none for other events.
	 * The stack: the FRED frame as delivered (0 error code, 8 RIP, ...). Every register is live.
	 */
	UNWIND_HINT_IRET_ENTRY offset=8
	cmpb	$LBR_FRED_EXTINT, LBR_FRED_TYPE(%rsp)
	jne	.Lfred_go_on
	cmpb	$LBR_FRED_REBOOT, LBR_FRED_VECTOR(%rsp)
	jne	.Lfred_go_on
	cmpq	$2, lbr_dump_live+LBR_LIVE_GATES_SWITCHED(%rip)
	jne	.Lfred_go_on
	LBR_STOP_BODY 248, LBR_STOP_IPI, fred_ipi, 1	/* no taken branch before its freeze */
.Lfred_nmi:
	/* An NMI. The stack and registers as at .Lfred_event. */
	UNWIND_HINT_IRET_ENTRY offset=8
	cmpq	$2, lbr_dump_live+LBR_LIVE_GATES_SWITCHED(%rip)
	jne	.Lfred_go_on
	/* No taken branch before its freeze; an NMI inside the body above returns there. */
	LBR_STOP_BODY 2, LBR_STOP_NMI, fred_nmi, 1, fred_ipi
SYM_CODE_END(lbr_dump_fred_kernel)
_ASM_NOKPROBE(lbr_dump_fred_kernel)

#ifdef MODULE
/* The static-call trampolines on the page's way on: no kprobe there. */
_ASM_NOKPROBE(__SCT__lbr_dump_fred_user)
_ASM_NOKPROBE(__SCT__lbr_dump_fred_kernel)
#endif

#endif /* CONFIG_X86_FRED */

/* Stub address by vector (0: not hookable), for src/idt.rs; vector 1 only re-arms. */
	.section .rodata
	.balign 8
SYM_DATA_START(lbr_dump_stubs)
	.quad lbr_dump_stub_0, lbr_dump_rearm_1, 0, lbr_dump_stub_3, 0, 0, lbr_dump_stub_6, 0
	.quad lbr_dump_stub_8, 0, 0, lbr_dump_stub_11, lbr_dump_stub_12, lbr_dump_stub_13
	.quad lbr_dump_stub_14, 0, 0, lbr_dump_stub_17, 0, 0, 0, LBR_STUB_21
	.fill 10, 8, 0
SYM_DATA_END(lbr_dump_stubs)
