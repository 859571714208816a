// SPDX-License-Identifier: GPL-2.0
/*
 * C glue: the few things lbr-dump needs that Rust cannot express, because they are C macros or
 * static inline functions that bindgen does not turn into anything callable:
 *  - windows: read-only vmap() aliases of the IDT page and of the stubs' configuration page,
 *    made writable for a few stores: pfn_to_page(), PAGE_KERNEL_RO, the PTE bits, set_pte()
 *    and local_irq_save() are macros or inlines;
 *  - the environment checks: boot_cpu_has(), cpu_feature_enabled(), xen_pv_domain() and
 *    cc_platform_has() are macros or inlines over feature words;
 *  - stop_machine(), under which gates change: <linux/stop_machine.h> is not among the Rust
 *    bindings' headers (and it is an inline without SMP);
 *  - virt_to_phys() and on_each_cpu() are static inlines;
 *  - static calls (the stubs' way on to the kernel's handlers) are defined and updated by macros;
 *  - struct syscore and register_syscore() (resume on the boot CPU, shutdown) take C structures;
 *  - BTS: ftrace callbacks (struct ftrace_ops) at perf's reserve_ds_buffers() and where CPUs
 *    stop for good;
 *  - the panic path: struct ftrace_ops and the ftrace direct calls that put the panic path's
 *    trampolines at the entry of panic(), vpanic(), crash_kexec() and panic_reset(), and the
 *    panic notifier chain (a C variable);
 *  - warnings: kretprobes at show_regs(), report_bug() and report_bug_entry() (struct
 *    kretprobe).
 * Every function here is declared for Rust in src/ffi.rs, and nowhere else.
 */
#include <linux/bug.h>
#include <linux/cc_platform.h>
#include <linux/error-injection.h>
#include <linux/kprobes.h>
#include <linux/ftrace.h>
#include <linux/kallsyms.h>
#include <linux/kdebug.h>
#include <linux/panic.h>
#include <linux/panic_notifier.h>
#include <linux/perf_event.h>
#include <linux/pgtable.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/task_stack.h>
#include <linux/sizes.h>
#include <linux/smp.h>
#include <linux/static_call.h>
#include <linux/stop_machine.h>
#include <linux/syscore_ops.h>
#include <linux/vmalloc.h>
#include <trace/events/error_report.h>
#include <asm/cpufeature.h>
#include <asm/desc.h>
#include <asm/fred.h>
#include <asm/gsseg.h>
#include <asm/idtentry.h>
#include <asm/msr.h>
#include <asm/set_memory.h>
#include <asm/text-patching.h>
#include <asm/irq_vectors.h>
#include <asm/trapnr.h>
#include <asm/nmi.h>
#include <xen/xen.h>

#include "glue.h"

/*
 * The IDT's address (the kernel's idt_table, read-only after boot: idt.c set_memory_ro; the IDTR
 * points at a read-only alias in the cpu_entry_area), or 0 if the IDTR does not hold a whole,
 * page-aligned IDT of 256 gates (one page).
 */
unsigned long lbr_dump_idt_address(void)
{
	struct desc_ptr idtr;

	store_idt(&idtr);
	if (idtr.size != IDT_ENTRIES * sizeof(gate_desc) - 1 || idtr.address & ~PAGE_MASK)
		return 0;
	return idtr.address;
}

/*
 * A window onto one page: a read-only vmap() alias whose PTE is made writable only while
 * lbr_dump_window_write() runs, on one CPU with interrupts off, and read-only again with an
 * INVLPG on that CPU before interrupts come back. No other CPU uses the window (another CPU
 * could at most hold a writable translation filled speculatively during those stores, which
 * nothing of lbr-dump's would write through). So lbr-dump keeps no
 * writable view of the IDT or of its stubs' configuration, but for the few stores that change
 * them. The stop trampoline (asm/stubs.S LBR_GATE_WINDOW) does the same with a window of its
 * own, from the PTE values here. struct lbr_dump_window is declared above, and for Rust in
 * src/ffi.rs (struct Window).
 */
/* Maps a window onto the page that holds `target` (a kernel address). 0 or -errno. */
int lbr_dump_window_map(struct lbr_dump_window *w, unsigned long target)
{
	struct page *page = pfn_to_page(slow_virt_to_phys((void *)target) >> PAGE_SHIFT);
	unsigned int level;
	pte_t *pte;

	w->va = vmap(&page, 1, VM_MAP, PAGE_KERNEL_RO);
	if (!w->va)
		return -ENOMEM;
	pte = lookup_address((unsigned long)w->va, &level);
	if (!pte || level != PG_LEVEL_4K || !pte_present(*pte) || pte_write(*pte) ||
	    pte_pfn(*pte) != page_to_pfn(page)) {
		vunmap(w->va);
		w->va = NULL;
		return -EFAULT;
	}
	w->pte = (u64 *)pte;
	w->ro = pte_val(*pte);
	w->rw = w->ro | _PAGE_RW | _PAGE_DIRTY;
	return 0;
}

void lbr_dump_window_unmap(struct lbr_dump_window *w)
{
	if (w->va)
		vunmap(w->va);
	w->va = NULL;
}

/*
 * The stubs' configuration page (asm/stubs.S lbr_dump_capture), once its window is mapped: in
 * a module, in .data..ro_after_init, which the module loader makes read-only after init; built
 * in, in .data (see asm/stubs.S), made read-only here as idt.c does with the IDT.
 */
void lbr_dump_config_protect(void *page)
{
#ifndef MODULE
	set_memory_ro((unsigned long)page, 1);
#endif
}

/* One writer at a time, on any window: the CPU that closes a window must be the one that wrote. */
static DEFINE_RAW_SPINLOCK(lbr_dump_window_lock);

/*
 * Calls fn(va, data) with interrupts off while the window is writable on this CPU. Not from
 * NMI context; from stop_machine()'s callback it is: no CPU held there holds the lock.
 */
void lbr_dump_window_write(const struct lbr_dump_window *w,
			   void (*fn)(void *va, void *data), void *data)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&lbr_dump_window_lock, flags);
	set_pte((pte_t *)w->pte, __pte(w->rw));
	asm volatile("invlpg (%0)" : : "r" (w->va) : "memory");
	fn(w->va, data);
	set_pte((pte_t *)w->pte, __pte(w->ro));
	asm volatile("invlpg (%0)" : : "r" (w->va) : "memory");
	raw_spin_unlock_irqrestore(&lbr_dump_window_lock, flags);
}

/*
 * Whether `addr` lies in the kernel's function `name` (by kallsyms, sprint_symbol()'s
 * "name+0xoffset/0xsize"), or in the part of it GCC moves out as "name.cold" (its unlikely
 * paths: Debian's 7.3 has __warn()'s whole report, and check_panic_on_warn()'s panic() calls,
 * there): for the printers, which run in the panic path (kallsyms' lookup takes no lock; a
 * module's symbols are read under RCU, as %pS does).
 */
/* Whether kallsyms' `sym` ("name+0xoff/0xsize") names the function `name` or its .cold part. */
static bool lbr_dump_sym_is(const char *sym, const char *name)
{
	size_t n = strlen(name);

	if (strncmp(sym, name, n))
		return false;
	if (!strncmp(sym + n, ".cold+", 6))
		return true;
	return sym[n] == '+';
}

bool lbr_dump_in_function(unsigned long addr, const char *name)
{
	char sym[KSYM_SYMBOL_LEN];

	sprint_symbol(sym, addr);
	return lbr_dump_sym_is(sym, name);
}

/*
 * The kernel's IRET to user mode, entry_64.S native_irq_return_iret (SYM_L_GLOBAL, not
 * exported): a #GP, #NP or #SS with that RIP in kernel mode is a return to user mode that faulted
 * (a user's bad segment state: error_entry's bad-IRET fixup makes it the user's fault), and a #DF
 * there on the espfix64 stack is the same fault promoted (exc_double_fault): the stubs do not
 * capture them (asm/stubs.S LBR_STUB, LBR_CFG_IRET). 0 if it cannot be found; the caller says so.
 */
#ifdef MODULE
/*
 * A module finds it by name from asm_load_gs_index (exported, defined right after
 * common_interrupt_return in entry_64.S): walking back symbol by symbol through the kernel's
 * symbols (sprint_symbol(): "name+0xoffset/0xsize"). The result must be an IRETQ (48 cf).
 */
static bool lbr_dump_symbol(unsigned long addr, char *name, unsigned long *off)
{
	char *plus, *slash;

	sprint_symbol(name, addr);
	plus = strrchr(name, '+');
	slash = plus ? strchr(plus, '/') : NULL;
	if (!slash || strchr(slash, ' '))	/* no symbol, or a module's ("... [mod]") */
		return false;
	*slash = '\0';
	*plus = '\0';
	return !kstrtoul(plus + 1, 16, off);
}

unsigned long lbr_dump_iret_address(void)
{
	char name[KSYM_SYMBOL_LEN];
	unsigned long addr = (unsigned long)asm_load_gs_index, off;
	int i;

	for (i = 0; i < 64 && lbr_dump_symbol(addr, name, &off); i++) {
		if (!strcmp(name, "native_irq_return_iret")) {
			const u8 *insn = (const u8 *)(addr - off);

			return insn[0] == 0x48 && insn[1] == 0xcf ? (unsigned long)insn : 0;
		}
		addr -= off + 1;	/* the last byte of the symbol before */
	}
	return 0;
}
#else
unsigned long lbr_dump_iret_address(void)
{
	return (unsigned long)native_irq_return_iret;
}
#endif

/* Why lbr-dump cannot run here, or NULL. See Documentation/admin-guide/lbr-dump.rst "Refusals". */
const char *lbr_dump_environment_refusal(void)
{
#ifdef MODULE
	/* Built in, the stubs are entry text, mapped under the user CR3 (asm/stubs.S). */
	if (boot_cpu_has(X86_FEATURE_PTI))
		return
			"page-table isolation is active: a module's code is not mapped under the user CR3 that exceptions from user mode arrive with; build lbr-dump into the kernel (CONFIG_LBR_DUMP=y), whose stubs are entry text, or boot with pti=off";
#endif
	if (xen_pv_domain())
		return "Xen PV guest: the hypervisor owns the IDT";
	if (cc_platform_has(CC_ATTR_GUEST_STATE_ENCRYPT))
		return "SEV-ES/SNP guest: RDMSR at exception entry would raise #VC";
	if (cpu_feature_enabled(X86_FEATURE_TDX_GUEST))
		return "TDX guest: RDMSR at exception entry would raise #VE";
	return NULL;
}

/* Whether events are delivered with FRED (src/fred.rs), not through the IDT. */
bool lbr_dump_fred_active(void)
{
	return cpu_feature_enabled(X86_FEATURE_FRED);
}

#ifdef CONFIG_X86_FRED
unsigned long lbr_dump_fred_page(void)
{
	return (unsigned long)lbr_dump_fred_user;
}

/*
 * The low bits of the IA32_FRED_CONFIG value the kernel writes on every CPU
 * (cpu_init_fred_exceptions(), arch/x86/kernel/fred.c): its redzone and interrupt stack level.
 */
unsigned long lbr_dump_fred_config_low(void)
{
	return FRED_CONFIG_REDZONE | FRED_CONFIG_INT_STKLVL(0);
}

#ifdef MODULE
/*
 * The FRED entry page's ways on to the kernel's entry points (asm/stubs.S LBR_FRED_GO_ON): static
 * calls that arming points at asm_fred_entrypoint_user and asm_fred_entrypoint_kernel (its
 * +256), found in IA32_FRED_CONFIG and checked by name: their trampolines become direct
 * `jmp rel32`s (those entry points have no ENDBR: only a direct jump may reach them).
 */
DEFINE_STATIC_CALL_NULL(lbr_dump_fred_user, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_fred_kernel, lbr_dump_entry);

int lbr_dump_fred_set_kernel_page(unsigned long page)
{
	char name[KSYM_SYMBOL_LEN];
	unsigned long off;

	if (!cpu_feature_enabled(X86_FEATURE_FRED))
		return -ENODEV;
	if (!lbr_dump_symbol(page, name, &off) || off || strcmp(name, "asm_fred_entrypoint_user"))
		return -EXDEV;
	static_call_update(lbr_dump_fred_user, (void (*)(void))page);
	static_call_update(lbr_dump_fred_kernel, (void (*)(void))(page + 256));
	return 0;
}
#else
/* Built in, the page jumps straight to the kernel's entry points: it must be theirs. */
int lbr_dump_fred_set_kernel_page(unsigned long page)
{
	if (!cpu_feature_enabled(X86_FEATURE_FRED))
		return -ENODEV;
	return page == (unsigned long)asm_fred_entrypoint_user ? 0 : -EXDEV;
}
#endif
#else
unsigned long lbr_dump_fred_page(void)
{
	return 0;
}

unsigned long lbr_dump_fred_config_low(void)
{
	return 0;
}

int lbr_dump_fred_set_kernel_page(unsigned long page)
{
	return -ENODEV;
}
#endif

/*
 * stop_machine(fn, data, NULL): fn runs on one CPU while every other online CPU spins in its
 * stopper thread with interrupts off (an inline without SMP). lbr-dump switches IDT gates only
 * there (src/idt.rs): a CPU reads a gate in parts, so no CPU may take an exception while one
 * changes.
 */
int lbr_dump_stop_machine(int (*fn)(void *data), void *data)
{
	return stop_machine(fn, data, NULL);
}

/* on_each_cpu(), a static inline. */
void lbr_dump_on_each_cpu(void (*func)(void *info), void *info, bool wait)
{
	on_each_cpu(func, info, wait);
}

/* wrmsrq_safe() (an inline): a write on this CPU whose #GP comes back as -EIO. */
int lbr_dump_wrmsr_safe(u32 msr, u64 value)
{
	return wrmsrq_safe(msr, value);
}

/* rdmsrq_safe() (an inline): a read on this CPU whose #GP comes back as -EIO. */
int lbr_dump_rdmsr_safe(u32 msr, u64 *value)
{
	return rdmsrq_safe(msr, value);
}

/*
 * Keeps the module loaded for good: a CPU may still enter its code (src/fred.rs). False if it
 * cannot: the module is being unloaded (try_module_get() fails once rmmod has begun, where
 * __module_get() would count a reference that no longer stops the unload).
 */
bool lbr_dump_pin(void)
{
#ifdef MODULE
	return try_module_get(THIS_MODULE);
#else
	return true;
#endif
}

/* virt_to_phys() (an inline) of a direct-map address: where a dump reader finds a BTS buffer. */
unsigned long lbr_dump_virt_to_phys(void *addr)
{
	return virt_to_phys(addr);
}

/*
 * Whether page-table isolation is on (BTS refuses it: Documentation/lbr-dump/design.rst "Branch
 * trace store").
 */
bool lbr_dump_pti_active(void)
{
	return boot_cpu_has(X86_FEATURE_PTI);
}

/*
 * __get_free_pages() is a macro (allocation tagging): zeroed, physically contiguous pages. No
 * warning on failure (a large order for many CPUs): the caller says what it could not allocate.
 */
unsigned long lbr_dump_alloc_pages(unsigned int order)
{
	if (order > MAX_PAGE_ORDER)
		return 0;
	return __get_free_pages(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN, order);
}

#ifdef MODULE
/*
 * The stubs' way on to the kernel's handlers (asm/stubs.S `jmp __SCT__lbr_dump_orig_<vector>`):
 * one static call per hookable vector. static_call_update() points it at the handler lbr-dump
 * read from the IDT, before the gate points at the stub: the trampoline becomes a direct
 * `jmp rel32` to the handler, and so does the stub's own jump where objtool recorded it as a
 * static-call site (IBT builds). No stub has an indirect branch or loads the handler's address.
 * The type is that of the kernel's asm_exc_* entry points (idtentry.h), not called from C.
 */
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_0, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_1, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_2, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_3, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_6, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_8, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_11, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_12, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_13, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_14, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_17, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_21, lbr_dump_entry);
DEFINE_STATIC_CALL_NULL(lbr_dump_orig_248, lbr_dump_entry);

/* Points vector's trampoline at handler; -EINVAL for a vector without one. */
int lbr_dump_set_handler(unsigned int vector, unsigned long handler)
{
	void (*h)(void) = (void (*)(void))handler;

	switch (vector) {
	case 0:
		static_call_update(lbr_dump_orig_0, h);
		break;
	case 1:
		static_call_update(lbr_dump_orig_1, h);
		break;
	case 2:
		static_call_update(lbr_dump_orig_2, h);
		break;
	case 3:
		static_call_update(lbr_dump_orig_3, h);
		break;
	case 6:
		static_call_update(lbr_dump_orig_6, h);
		break;
	case 8:
		static_call_update(lbr_dump_orig_8, h);
		break;
	case 11:
		static_call_update(lbr_dump_orig_11, h);
		break;
	case 12:
		static_call_update(lbr_dump_orig_12, h);
		break;
	case 13:
		static_call_update(lbr_dump_orig_13, h);
		break;
	case 14:
		static_call_update(lbr_dump_orig_14, h);
		break;
	case 17:
		static_call_update(lbr_dump_orig_17, h);
		break;
	case 21:
		static_call_update(lbr_dump_orig_21, h);
		break;
	case 248:
		static_call_update(lbr_dump_orig_248, h);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}
#else
/*
 * Built in, each stub jumps straight to the kernel's own entry point (asm/stubs.S LBR_GO_ON:
 * entry text, mapped under the user CR3 with page-table isolation), so the gate must hold
 * exactly that handler: 0 if it does, -EXDEV if the gate holds another (then lbr-dump does not
 * hook it), -EINVAL for a vector without a stub.
 */
int lbr_dump_set_handler(unsigned int vector, unsigned long handler)
{
	unsigned long kernel;

	switch (vector) {
	case X86_TRAP_DE:
		kernel = (unsigned long)asm_exc_divide_error;
		break;
	case X86_TRAP_DB:
		kernel = (unsigned long)asm_exc_debug;
		break;
	case X86_TRAP_NMI:
		kernel = (unsigned long)asm_exc_nmi;
		break;
	case X86_TRAP_BP:
		kernel = (unsigned long)asm_exc_int3;
		break;
	case X86_TRAP_UD:
		kernel = (unsigned long)asm_exc_invalid_op;
		break;
	case X86_TRAP_DF:
		kernel = (unsigned long)asm_exc_double_fault;
		break;
	case X86_TRAP_NP:
		kernel = (unsigned long)asm_exc_segment_not_present;
		break;
	case X86_TRAP_SS:
		kernel = (unsigned long)asm_exc_stack_segment;
		break;
	case X86_TRAP_GP:
		kernel = (unsigned long)asm_exc_general_protection;
		break;
	case X86_TRAP_PF:
		kernel = (unsigned long)asm_exc_page_fault;
		break;
	case X86_TRAP_AC:
		kernel = (unsigned long)asm_exc_alignment_check;
		break;
#ifdef CONFIG_X86_CET
	case X86_TRAP_CP:
		kernel = (unsigned long)asm_exc_control_protection;
		break;
#endif
	case REBOOT_VECTOR:
		kernel = (unsigned long)asm_sysvec_reboot;
		break;
	default:
		return -EINVAL;
	}
	return handler == kernel ? 0 : -EXDEV;
}
#endif

/*
 * Resume from suspend: syscore resume runs on the boot CPU alone, IRQs off, before the other
 * CPUs come back through CPU hotplug; the boot CPU never goes through hotplug, so this is where
 * its recorder is switched back on (src/capture/cpu.rs `resume`). One registration at a time.
 */
static void (*lbr_dump_resume_fn)(void);
static void (*lbr_dump_shutdown_fn)(void);
static void (*lbr_dump_suspend_fn)(void);

static int lbr_dump_syscore_suspend(void *data)
{
	lbr_dump_suspend_fn();
	return 0;
}

static void lbr_dump_syscore_resume(void *data)
{
	lbr_dump_resume_fn();
}

/*
 * Shutdown (reboot, and kexec -e: kernel_kexec() calls syscore_shutdown() in process context
 * with every CPU still online; on x86 machine_shutdown() only stops them afterwards): BTS goes
 * off on every CPU before the next kernel's page tables, which do not map lbr-dump's debug store
 * (src/capture/bts.rs `shutdown`). Suspend (and kexec with preserve_context) switches it off on the
 * boot CPU; resume switches it back on.
 */
static void lbr_dump_syscore_shutdown(void *data)
{
	lbr_dump_shutdown_fn();
}

static const struct syscore_ops lbr_dump_syscore_ops = {
	.suspend = lbr_dump_syscore_suspend,
	.resume = lbr_dump_syscore_resume,
	.shutdown = lbr_dump_syscore_shutdown,
};

static struct syscore lbr_dump_syscore = { .ops = &lbr_dump_syscore_ops };

void lbr_dump_syscore_register(void (*resume)(void), void (*shutdown)(void), void (*suspend)(void))
{
	lbr_dump_resume_fn = resume;
	lbr_dump_shutdown_fn = shutdown;
	lbr_dump_suspend_fn = suspend;
	register_syscore(&lbr_dump_syscore);
}

void lbr_dump_syscore_unregister(void)
{
	unregister_syscore(&lbr_dump_syscore);
}

/*
 * BTS and perf: perf points IA32_DS_AREA at its own debug store on every CPU when it reserves
 * the PMU for its first hardware event (x86_reserve_hardware() -> reserve_ds_buffers(), process
 * context, under pmc_reserve_mutex), and frees that store's BTS buffer at release without
 * clearing IA32_DS_AREA (release_ds_buffer() clears .ds before fini_debug_store_on_cpu() reads
 * it). lbr-dump's TR|BTS must be off on every CPU before that: an ftrace callback at the entry of
 * reserve_ds_buffers() (not exported: by name) calls `fn` first (src/capture/bts.rs
 * `perf_takes_ds`). Returns 0 or -errno (-EINVAL: a function is not there or cannot be traced).
 * Serialized by lbr-dump's state lock.
 */
static void (*lbr_dump_perf_fn)(void);

/* Called by the ops' own trampoline (a module ops is DYNAMIC): preemptible, no recursion guard. */
static notrace void lbr_dump_perf_callback(unsigned long ip, unsigned long parent_ip,
					   struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	lbr_dump_perf_fn();
}

static struct ftrace_ops lbr_dump_perf_ops = { .func = lbr_dump_perf_callback };

/*
 * A reservation already past the entry of reserve_ds_buffers() when the callback above was
 * registered is caught where it writes IA32_DS_AREA: wrmsrq_on_cpu(cpu, MSR_IA32_DS_AREA, ds)
 * (ds.c init_debug_store_on_cpu(), which clang inlines into reserve_ds_buffers(); exported, so
 * traced by name). `fn` is called there before the first non-zero write, where interrupts are
 * on (reserve_ds_buffers(): process context); intel_pmu_cpu_starting() reaches it with
 * interrupts off on a CPU coming online, where `fn` (which waits for IPIs) is not called: perf's
 * debug store exists then only if perf reserved it before, and `fn` ran then (or arming found
 * perf's store and refused). tests/scenarios/bts.py
 * perf_reservation_begun_before_arming_switches_bts_off.
 */
static notrace void lbr_dump_ds_write_callback(unsigned long ip, unsigned long parent_ip,
					       struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	/* int wrmsrq_on_cpu(unsigned int cpu, u32 msr_no, u64 q) */
	if (fregs && (u32)ftrace_regs_get_argument(fregs, 1) == MSR_IA32_DS_AREA &&
	    ftrace_regs_get_argument(fregs, 2) && !irqs_disabled())
		lbr_dump_perf_fn();
}

static struct ftrace_ops lbr_dump_ds_write_ops = { .func = lbr_dump_ds_write_callback };

/*
 * And where a CPU stops for good (stop_this_cpu(): reboot, kexec -e, a panic's REBOOT_VECTOR
 * stop; crash_nmi_callback(): kdump's and emergency reboots' NMI shootdown, after the kernel's
 * NMI entry), a second callback calls `stop` (IRQ or NMI context), which switches BTS off on
 * that CPU: whatever the stop stubs skipped (a hardware breakpoint armed, DR7 set) or a perf NMI
 * wrote back. Neither function is exported: by name.
 */
static void (*lbr_dump_stopping_fn)(void);

static notrace void lbr_dump_stopping_callback(unsigned long ip, unsigned long parent_ip,
					       struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	lbr_dump_stopping_fn();
}

static struct ftrace_ops lbr_dump_stopping_ops = { .func = lbr_dump_stopping_callback };

/*
 * Registers the three callbacks. Returns 0, or -errno with *what naming the function that cannot be
 * traced (-EINVAL: not there or not traceable), and nothing registered.
 */
int lbr_dump_bts_watch(void (*perf)(void), void (*stop)(void), const char **what)
{
	unsigned char reserve[] = "reserve_ds_buffers";
	unsigned char ds_write[] = "wrmsrq_on_cpu";
	unsigned char stop_cpu[] = "stop_this_cpu";
	unsigned char nmi[] = "crash_nmi_callback";
	int failed = 0;
	int ret;

	lbr_dump_perf_fn = perf;
	lbr_dump_stopping_fn = stop;
	*what = "reserve_ds_buffers()";
	ret = ftrace_set_filter(&lbr_dump_perf_ops, reserve, sizeof(reserve) - 1, 1);
	if (ret)
		goto free;
	*what = "wrmsrq_on_cpu()";
	ret = ftrace_set_filter(&lbr_dump_ds_write_ops, ds_write, sizeof(ds_write) - 1, 1);
	if (ret)
		goto free;
	*what = "stop_this_cpu()";
	ret = ftrace_set_filter(&lbr_dump_stopping_ops, stop_cpu, sizeof(stop_cpu) - 1, 1);
	if (ret)
		goto free;
	*what = "crash_nmi_callback()";
	ret = ftrace_set_filter(&lbr_dump_stopping_ops, nmi, sizeof(nmi) - 1, 0);
	if (ret)
		goto free;
	*what = "the callbacks";
	ret = register_ftrace_function(&lbr_dump_perf_ops);
	if (ret)
		goto free;
	ret = register_ftrace_function(&lbr_dump_ds_write_ops);
	if (ret)
		goto perf;
	ret = register_ftrace_function(&lbr_dump_stopping_ops);
	if (!ret)
		return 0;
	failed = unregister_ftrace_function(&lbr_dump_ds_write_ops);
perf:
	failed |= unregister_ftrace_function(&lbr_dump_perf_ops);
	if (failed) {
		/* As in lbr_dump_bts_unwatch(): a callback may stay; pinned, filters kept. */
		__module_get(THIS_MODULE);
		return ret;
	}
free:
	ftrace_free_filter(&lbr_dump_perf_ops);
	ftrace_free_filter(&lbr_dump_ds_write_ops);
	ftrace_free_filter(&lbr_dump_stopping_ops);
	return ret;
}

/*
 * Undoes lbr_dump_bts_watch(); ftrace waits until no CPU can still be in a callback. An
 * unregister that fails (ftrace shut down after an ftrace bug) may leave a callback in place:
 * the module is pinned then, and the filters are kept.
 */
void lbr_dump_bts_unwatch(void)
{
	int a = unregister_ftrace_function(&lbr_dump_stopping_ops);
	int b = unregister_ftrace_function(&lbr_dump_ds_write_ops);
	int c = unregister_ftrace_function(&lbr_dump_perf_ops);

	if (a || b || c) {
		__module_get(THIS_MODULE);
		return;
	}
	ftrace_free_filter(&lbr_dump_perf_ops);
	ftrace_free_filter(&lbr_dump_ds_write_ops);
	ftrace_free_filter(&lbr_dump_stopping_ops);
}

/*
 * KVM's virtual LBR (Intel, legacy LBR): while a vCPU's guest LBR event is scheduled on a CPU
 * (arch/x86/kvm/vmx/pmu_intel.c intel_pmu_create_guest_lbr_event(): exclude_host, config
 * INTEL_FIXED_VLBR_EVENT), KVM lets the guest read and write the LBR MSRs of that CPU
 * (vmx_passthrough_lbr_msrs(), intel_pmu_handle_lbr_msrs_access(): only while the event is
 * ACTIVE), and perf keeps host recording off there (events/intel/lbr.c vlbr_exclude_host()).
 * Perf schedules that event in and out on the CPU through intel_pmu_lbr_add() and
 * intel_pmu_lbr_del() (IRQs off, PMU disabled, called from intel_pmu_add_event()/_del_event();
 * not exported: by name), whose entries call `lend` (src/capture/cpu.rs `lend`): true when a guest
 * LBR event comes in, false when it goes. Other LBR events (perf's own users) are ignored.
 * Returns 0 or -errno (-EINVAL: a function is not there or cannot be traced), nothing
 * registered then. Serialized by lbr-dump's state lock.
 */
static void (*lbr_dump_lend_fn)(bool lent);

/*
 * A guest LBR event: KVM's attributes, and a kernel counter (perf_event_create_kernel_counter():
 * owner TASK_TOMBSTONE, kernel/events/core.c is_kernel_event()), which no user's perf_event_open()
 * of the same raw event is: that one must not make lbr-dump step aside.
 */
static bool lbr_dump_is_guest_lbr(struct ftrace_regs *fregs)
{
	/* void intel_pmu_lbr_add(struct perf_event *event), and _del */
	struct perf_event *event =
		fregs ? (struct perf_event *)ftrace_regs_get_argument(fregs, 0) : NULL;

	return event && READ_ONCE(event->owner) == (void *)-1L && event->attr.exclude_host &&
	       (event->attr.config & INTEL_ARCH_EVENT_MASK) == INTEL_FIXED_VLBR_EVENT;
}

static notrace void lbr_dump_vlbr_add_callback(unsigned long ip, unsigned long parent_ip,
					       struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	if (lbr_dump_is_guest_lbr(fregs))
		lbr_dump_lend_fn(true);
}

static notrace void lbr_dump_vlbr_del_callback(unsigned long ip, unsigned long parent_ip,
					       struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	if (lbr_dump_is_guest_lbr(fregs))
		lbr_dump_lend_fn(false);
}

/*
 * No FTRACE_OPS_FL_RECURSION: that flag asks ftrace for its recursion guard, which would drop a
 * call made while another guarded ftrace callback runs on this CPU in the same context (a
 * missed guest event would leave the host's records to the guest). The callbacks call nothing
 * ftrace traces.
 */
static struct ftrace_ops lbr_dump_vlbr_add_ops = {
	.func = lbr_dump_vlbr_add_callback,
};

static struct ftrace_ops lbr_dump_vlbr_del_ops = {
	.func = lbr_dump_vlbr_del_callback,
};

int lbr_dump_vlbr_watch(void (*lend)(bool lent))
{
	unsigned char add[] = "intel_pmu_lbr_add";
	unsigned char del[] = "intel_pmu_lbr_del";
	int ret;

	lbr_dump_lend_fn = lend;
	ret = ftrace_set_filter(&lbr_dump_vlbr_add_ops, add, sizeof(add) - 1, 1);
	if (!ret)
		ret = ftrace_set_filter(&lbr_dump_vlbr_del_ops, del, sizeof(del) - 1, 1);
	/* The leaving side first: a guest event seen coming in is always seen going. */
	if (!ret)
		ret = register_ftrace_function(&lbr_dump_vlbr_del_ops);
	if (!ret) {
		ret = register_ftrace_function(&lbr_dump_vlbr_add_ops);
		if (!ret)
			return 0;
		if (unregister_ftrace_function(&lbr_dump_vlbr_del_ops)) {
			/* A callback may stay: pinned, filters kept. */
			__module_get(THIS_MODULE);
			return ret;
		}
	}
	ftrace_free_filter(&lbr_dump_vlbr_add_ops);
	ftrace_free_filter(&lbr_dump_vlbr_del_ops);
	return ret;
}

/* Undoes lbr_dump_vlbr_watch(); as lbr_dump_bts_unwatch(), a failure pins the module. */
void lbr_dump_vlbr_unwatch(void)
{
	int a = unregister_ftrace_function(&lbr_dump_vlbr_add_ops);
	int d = unregister_ftrace_function(&lbr_dump_vlbr_del_ops);

	if (a || d) {
		__module_get(THIS_MODULE);
		return;
	}
	ftrace_free_filter(&lbr_dump_vlbr_add_ops);
	ftrace_free_filter(&lbr_dump_vlbr_del_ops);
}

/*
 * The die chain's first notifier. #DB delivery clears the LBR switch, and the kernel's #DB
 * handler calls the die chain with DIE_DEBUG (src/capture/debug.rs); but perf's breakpoint
 * handler, which the kernel registers at boot with the highest priority
 * (kernel/events/hw_breakpoint.c hw_breakpoint_exceptions_nb, INT_MAX: a notifier of lbr-dump's,
 * of the same priority, would come after it), ends the chain (NOTIFY_STOP) for a #DB it takes
 * whole: a user's own watchpoint's
 * (perf_event_open() PERF_TYPE_BREAKPOINT on a user address), or a DR6 trap bit of a slot with
 * no breakpoint (arch/x86/kernel/hw_breakpoint.c hw_breakpoint_handler()). So a callback at the
 * entry of that notifier, hw_breakpoint_exceptions_notify(), re-arms for every DIE_DEBUG before
 * anything can end the chain (lbr_dump_rearm_after_db(), src/capture/debug.rs): on the CPU of
 * the #DB, interrupts off. The chain runs for the die events only (#DB, INT3, an oops, ...),
 * each of which the callback tests for DIE_DEBUG: no other path pays. Returns 0 or -errno
 * (-EINVAL: the function is not there or cannot be traced); nothing registered then.
 * Serialized by lbr-dump's state lock.
 */
static notrace void lbr_dump_die_chain_callback(unsigned long ip, unsigned long parent_ip,
						struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	/* hw_breakpoint_exceptions_notify(struct notifier_block *, unsigned long val, void *) */
	if (fregs && ftrace_regs_get_argument(fregs, 1) == DIE_DEBUG)
		lbr_dump_rearm_after_db();
}
NOKPROBE_SYMBOL(lbr_dump_die_chain_callback);

/*
 * No FTRACE_OPS_FL_RECURSION: that flag asks ftrace for its recursion guard, which would drop
 * a call made while another guarded ftrace callback runs on this CPU in the same context.
 * Nothing the callback calls is traced (Rust and asm get no fentry).
 */
static struct ftrace_ops lbr_dump_die_chain_ops = {
	.func = lbr_dump_die_chain_callback,
};

int lbr_dump_die_chain_watch(void)
{
	unsigned char notify[] = "hw_breakpoint_exceptions_notify";
	int ret;

	ret = ftrace_set_filter(&lbr_dump_die_chain_ops, notify, sizeof(notify) - 1, 1);
	if (!ret)
		ret = register_ftrace_function(&lbr_dump_die_chain_ops);
	if (ret)
		ftrace_free_filter(&lbr_dump_die_chain_ops);
	return ret;
}

/* Undoes lbr_dump_die_chain_watch(); as lbr_dump_bts_unwatch(), a failure pins the module. */
void lbr_dump_die_chain_unwatch(void)
{
	if (unregister_ftrace_function(&lbr_dump_die_chain_ops)) {
		__module_get(THIS_MODULE);
		return;
	}
	ftrace_free_filter(&lbr_dump_die_chain_ops);
}

/*
 * Warnings (Documentation/lbr-dump/design.rst "What a warning shows"). A WARN is a ud2, a ud1 for
 * WARN() with a message (x86-64 7.3: the WARN_trap static call): the #UD stub captures it, and
 * the kernel's #UD handler reports it, handle_bug() -> report_bug() or report_bug_entry() ->
 * __warn(), which prints the WARNING line, the message, the modules, then show_regs() with the
 * #UD's registers (registers, call trace), and then the end marker (panic_on_warn panics just
 * before it), and goes on after the ud2. Kretprobes, registered while armed (src/printer.rs
 * WarnWatch), none of them on a path that does not warn or show registers:
 *  - at show_regs(), when __warn() is the caller (the return address at its entry, by kallsyms;
 *    sysrq, NMI backtraces and oopses call it too, and get no instance): its return hands the
 *    #UD's registers, kept from its entry, to `print` (src/printer.rs). The snapshot is printed
 *    inside the report after the registers and the call trace, where an oops prints its own
 *    (the die chain comes after show_regs() in __die_body()): the youngest text of the report,
 *    the part of the log pstore keeps;
 *  - at report_bug() and report_bug_entry(): when one returns BUG_TRAP_TYPE_WARN (a warning
 *    the kernel goes on from, reported or not: a WARN_ON_ONCE()'s later hits too; never a
 *    BUG(), which oopses), `done` (src/printer.rs, src/capture/warn.rs) gives the capture's
 *    ring slot and BTS buffer back, on this CPU with interrupts off. lib/bug.c is built
 *    without ftrace's fentry: a kprobe (an int3 at its entry, which the kernel optimizes into a
 *    jump, and a return-address swap) is the way to its return.
 * A kprobe that cannot be placed is left out and the others stay: the result has bit 0 set for
 * show_regs(), bit 1 for report_bug(), bit 2 for report_bug_entry() (a kernel without format
 * arguments has none). Serialized by lbr-dump's state lock.
 */
static void (*lbr_dump_warn_print_fn)(struct pt_regs *regs);
static void (*lbr_dump_warn_done_fn)(struct pt_regs *regs);

/* void show_regs(struct pt_regs *regs): an instance only for __warn()'s call. */
static int lbr_dump_show_regs_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	/* At the entry, the return address is on top of the stack; the call is the byte before. */
	unsigned long caller = regs_get_kernel_stack_nth(regs, 0);

	if (!lbr_dump_in_function(caller - 1, "__warn"))
		return 1;
	*(struct pt_regs **)ri->data = (struct pt_regs *)regs_get_kernel_argument(regs, 0);
	return 0;
}
NOKPROBE_SYMBOL(lbr_dump_show_regs_entry);

static int lbr_dump_show_regs_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	unsigned long flags;

	local_irq_save(flags);
	lbr_dump_warn_print_fn(*(struct pt_regs **)ri->data);
	local_irq_restore(flags);
	return 0;
}
NOKPROBE_SYMBOL(lbr_dump_show_regs_return);

/* report_bug(unsigned long bugaddr, struct pt_regs *regs), report_bug_entry(bug, regs) */
static int lbr_dump_report_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(struct pt_regs **)ri->data = (struct pt_regs *)regs_get_kernel_argument(regs, 1);
	return 0;
}
NOKPROBE_SYMBOL(lbr_dump_report_entry);

static int lbr_dump_report_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	unsigned long flags;

	/* enum bug_trap_type: an int, in eax (the upper half of rax is not part of it). */
	if ((int)regs_return_value(regs) != BUG_TRAP_TYPE_WARN)
		return 0;
	local_irq_save(flags);
	lbr_dump_warn_done_fn(*(struct pt_regs **)ri->data);
	local_irq_restore(flags);
	return 0;
}
NOKPROBE_SYMBOL(lbr_dump_report_return);

static struct kretprobe lbr_dump_warn_probes[] = {
	{
		.kp.symbol_name = "show_regs",
		.entry_handler = lbr_dump_show_regs_entry,
		.handler = lbr_dump_show_regs_return,
		.data_size = sizeof(struct pt_regs *),
	},
	{
		.kp.symbol_name = "report_bug",
		.entry_handler = lbr_dump_report_entry,
		.handler = lbr_dump_report_return,
		.data_size = sizeof(struct pt_regs *),
	},
	{
		.kp.symbol_name = "report_bug_entry",
		.entry_handler = lbr_dump_report_entry,
		.handler = lbr_dump_report_return,
		.data_size = sizeof(struct pt_regs *),
	},
};

static bool lbr_dump_warn_probed[ARRAY_SIZE(lbr_dump_warn_probes)];

unsigned int lbr_dump_warn_watch(void (*print)(struct pt_regs *regs),
				 void (*done)(struct pt_regs *regs))
{
	unsigned int gaps = 0;
	int i;

	lbr_dump_warn_print_fn = print;
	lbr_dump_warn_done_fn = done;
	for (i = 0; i < ARRAY_SIZE(lbr_dump_warn_probes); i++) {
		struct kretprobe *rp = &lbr_dump_warn_probes[i];

		/* Found by name: no address (not one left from a former arming). */
		rp->kp.addr = NULL;
		rp->kp.flags = 0;
		/*
		 * One instance per task inside the function: a report runs preemptible where the
		 * warning was, so a storm over many tasks can hold more than the default
		 * max(10, 2 * CPUs); a return without an instance is missed (no give-back).
		 */
		rp->maxactive = 64 + 4 * num_possible_cpus();
		lbr_dump_warn_probed[i] = !register_kretprobe(rp);
		if (!lbr_dump_warn_probed[i])
			gaps |= 1 << i;
	}
	return gaps;
}

/* Undoes lbr_dump_warn_watch(), waiting until no CPU is in a handler. */
void lbr_dump_warn_unwatch(void)
{
	struct kretprobe *rps[ARRAY_SIZE(lbr_dump_warn_probes)];
	int i, n = 0;

	for (i = 0; i < ARRAY_SIZE(lbr_dump_warn_probes); i++) {
		if (lbr_dump_warn_probed[i])
			rps[n++] = &lbr_dump_warn_probes[i];
		lbr_dump_warn_probed[i] = false;
	}
	/* All at once: one RCU grace period for them, not one each (a disarm's cost). */
	if (n)
		unregister_kretprobes(rps, n);
}

/*
 * The panic trampoline (asm/stubs.S lbr_dump_panic_entry) at the entry of panic() and vpanic(),
 * and its twin lbr_dump_kexec_entry at crash_kexec()'s, as ftrace direct calls: the fentry call
 * site of each becomes a call of its trampoline (one taken branch before the freeze) while
 * lbr-dump is armed, and a 5-byte NOP again when it disarms: nothing is attached, and nothing
 * costs, while disarmed. A claim taken at crash_kexec() is given back at panic_reset(), which
 * crash_kexec() calls when it returns (no crash kernel loaded): the reset trampoline
 * (lbr_dump_reset_entry) is attached there first, and crash_kexec() is left out without it.
 * Returns 0 or -errno (-ENODEV: the kernel has no DYNAMIC_FTRACE_WITH_DIRECT_CALLS; -EBUSY:
 * another direct call is attached to panic() or vpanic()). Serialized by lbr-dump's state lock.
 */
static struct ftrace_ops lbr_dump_panic_ops;
static struct ftrace_ops lbr_dump_kexec_ops;
static struct ftrace_ops lbr_dump_reset_ops;
static bool lbr_dump_kexec_attached, lbr_dump_reset_attached;

/*
 * crash_kexec() (not exported: by name) into the kexec trampoline's filter: 0 or -errno
 * (-EINVAL: ftrace cannot trace a function of that name, e.g. inlined or notrace). Its own
 * function so that tests can make it fail (fail_function,
 * Documentation/fault-injection/fault-injection.rst).
 */
static noinline __noclone int lbr_dump_filter_crash_kexec(struct ftrace_ops *ops)
{
	unsigned char crash_kexec[] = "crash_kexec";

	return ftrace_set_filter(ops, crash_kexec, sizeof(crash_kexec) - 1, 0);
}
ALLOW_ERROR_INJECTION(lbr_dump_filter_crash_kexec, ERRNO);

/*
 * A detach that fails (ftrace was shut down after an ftrace bug: the call sites stay patched)
 * must not let the trampoline's code go away: the module is pinned, and the caller stops the
 * trampoline from doing anything (src/capture/panic.rs).
 */
static int lbr_dump_detach(struct ftrace_ops *ops, unsigned long tramp)
{
	int ret = unregister_ftrace_direct(ops, tramp, true);

	if (ret)
		__module_get(THIS_MODULE);
	return ret;
}

/*
 * The reset trampoline at panic_reset(), then the kexec trampoline at crash_kexec(): 0 or
 * -errno, with crash_kexec() not attached. (panic_reset()'s trampoline stays only if ftrace
 * cannot detach it: lbr_dump_panic_detach() tries again and reports it.)
 */
static int lbr_dump_kexec_attach(void)
{
	unsigned long reset = (unsigned long)panic_reset;
	int ret;

	ret = ftrace_set_filter_ips(&lbr_dump_reset_ops, &reset, 1, 0, 1);
	if (ret)
		return ret;
	ret = register_ftrace_direct(&lbr_dump_reset_ops, (unsigned long)lbr_dump_reset_entry);
	if (ret) {
		ftrace_free_filter(&lbr_dump_reset_ops);
		return ret;
	}
	lbr_dump_reset_attached = true;
	ret = lbr_dump_filter_crash_kexec(&lbr_dump_kexec_ops);
	if (!ret)
		ret = register_ftrace_direct(&lbr_dump_kexec_ops,
					     (unsigned long)lbr_dump_kexec_entry);
	if (!ret) {
		lbr_dump_kexec_attached = true;
		return 0;
	}
	ftrace_free_filter(&lbr_dump_kexec_ops);
	if (!lbr_dump_detach(&lbr_dump_reset_ops, (unsigned long)lbr_dump_reset_entry)) {
		lbr_dump_reset_attached = false;
		ftrace_free_filter(&lbr_dump_reset_ops);
	}
	return ret;
}

/*
 * *kexec says whether crash_kexec() is attached too (true also where the kernel has no
 * CRASH_DUMP, hence no crash_kexec()), when the attach succeeds. An oops that must end in a
 * panic (panic_on_oops, in interrupt, the idle task or init) calls crash_kexec() from oops_end()
 * before panic(), and with kdump loaded it never returns: the other CPUs are stopped by kdump's
 * NMI shootdown without a panic() entry, and the panicking CPU reaches machine_kexec() without
 * the trampoline's LBR_BTS_OFF (src/capture/mod.rs refuses BTS without it).
 */
int lbr_dump_panic_attach(bool *kexec)
{
	unsigned long ips[] = { (unsigned long)panic, (unsigned long)vpanic };
	int ret;

	ret = ftrace_set_filter_ips(&lbr_dump_panic_ops, ips, ARRAY_SIZE(ips), 0, 1);
	if (ret)
		return ret;
	ret = register_ftrace_direct(&lbr_dump_panic_ops, (unsigned long)lbr_dump_panic_entry);
	if (ret) {
		ftrace_free_filter(&lbr_dump_panic_ops);
		return ret;
	}
	if (IS_ENABLED(CONFIG_CRASH_DUMP))
		lbr_dump_kexec_attach();
	*kexec = !IS_ENABLED(CONFIG_CRASH_DUMP) || lbr_dump_kexec_attached;
	return 0;
}

/*
 * Undoes lbr_dump_panic_attach(), crash_kexec()'s trampoline before panic_reset()'s (a claim
 * taken at crash_kexec() can be given back while one can be taken); ftrace waits until no CPU
 * can still be in a trampoline. Nonzero if one of them could not be detached.
 */
int lbr_dump_panic_detach(void)
{
	int ret = 0;

	if (lbr_dump_kexec_attached) {
		ret |= lbr_dump_detach(&lbr_dump_kexec_ops, (unsigned long)lbr_dump_kexec_entry);
		lbr_dump_kexec_attached = false;
	}
	if (lbr_dump_reset_attached) {
		ret |= lbr_dump_detach(&lbr_dump_reset_ops, (unsigned long)lbr_dump_reset_entry);
		lbr_dump_reset_attached = false;
	}
	ret |= lbr_dump_detach(&lbr_dump_panic_ops, (unsigned long)lbr_dump_panic_entry);
	return ret;
}

/*
 * The stop trampoline (asm/stubs.S lbr_dump_stop_entry) at the entry of native_stop_other_cpus()
 * and nmi_shootdown_cpus() (neither exported: by name), where the panicking CPU stops the others:
 * it switches the NMI and REBOOT_VECTOR gates to the stop stubs then. Returns 0, or -errno if
 * neither function can be traced (-ENOENT then: the kernel inlined them or has no such function).
 */
static struct ftrace_ops lbr_dump_stop_ops;

int lbr_dump_stop_attach(void)
{
	unsigned char stop[] = "native_stop_other_cpus";
	unsigned char shootdown[] = "nmi_shootdown_cpus";
	int found = 0, ret;

	found += !ftrace_set_filter(&lbr_dump_stop_ops, stop, sizeof(stop) - 1, 1);
	found += !ftrace_set_filter(&lbr_dump_stop_ops, shootdown, sizeof(shootdown) - 1, 0);
	if (found < 2)
		pr_warn("lbr_dump: panic path: %s cannot be traced: CPUs stopped through it are not captured\n",
			found ? "one of native_stop_other_cpus() and nmi_shootdown_cpus()"
			      : "neither of native_stop_other_cpus() and nmi_shootdown_cpus()");
	if (!found) {
		ftrace_free_filter(&lbr_dump_stop_ops);
		return -ENOENT;
	}
	ret = register_ftrace_direct(&lbr_dump_stop_ops, (unsigned long)lbr_dump_stop_entry);
	if (ret)
		ftrace_free_filter(&lbr_dump_stop_ops);
	return ret;
}

int lbr_dump_stop_detach(void)
{
	return lbr_dump_detach(&lbr_dump_stop_ops, (unsigned long)lbr_dump_stop_entry);
}

/*
 * Reports that are calls (Documentation/lbr-dump/admin-guide.rst "Reports"): the report
 * trampoline (asm/stubs.S lbr_dump_report_hook) at the entry of the report functions the
 * `reports` parameter names, all in one ftrace_ops: a module's ftrace_ops is dynamic, and each
 * costs two RCU-tasks grace periods when it is unregistered, at every disarming. Attached while
 * armed, detached when disarming: nothing is attached, and nothing costs, while disarmed.
 * Serialized by lbr-dump's state lock.
 */
static struct ftrace_ops lbr_dump_report_ops;
static bool lbr_dump_report_filtered, lbr_dump_report_attached;

/*
 * Adds the functions `name` matches (`len` bytes, an ftrace filter pattern) to the report
 * trampoline's filter: 0 or -errno (-EINVAL: nothing of that name ftrace can trace, such as a
 * function this kernel lacks, inlined, or built without fentry).
 */
int lbr_dump_report_filter(const char *name, size_t len)
{
	unsigned char pattern[256];
	int ret;

	if (lbr_dump_report_attached || len >= sizeof(pattern))
		return -EINVAL;
	memcpy(pattern, name, len);
	pattern[len] = '\0';
	ret = ftrace_set_filter(&lbr_dump_report_ops, pattern, len, 0);
	if (!ret)
		lbr_dump_report_filtered = true;
	return ret;
}

/*
 * Attaches the trampoline to every function filtered: 0 or -errno (-ENOENT: none filtered;
 * -EBUSY: another direct call is attached to one of them; -ENODEV: no
 * DYNAMIC_FTRACE_WITH_DIRECT_CALLS). On failure the filter is emptied.
 */
int lbr_dump_report_attach(void)
{
	int ret = -ENOENT;

	if (lbr_dump_report_filtered)
		ret = register_ftrace_direct(&lbr_dump_report_ops,
					     (unsigned long)lbr_dump_report_hook);
	if (ret) {
		ftrace_free_filter(&lbr_dump_report_ops);
		lbr_dump_report_filtered = false;
		return ret;
	}
	lbr_dump_report_attached = true;
	return 0;
}

/*
 * Undoes lbr_dump_report_attach(), or empties the filter of a plan that was not attached;
 * nonzero if ftrace could not detach it (pinned).
 */
int lbr_dump_report_detach(void)
{
	int ret = 0;

	if (lbr_dump_report_attached)
		ret = lbr_dump_detach(&lbr_dump_report_ops, (unsigned long)lbr_dump_report_hook);
	else if (lbr_dump_report_filtered)
		ftrace_free_filter(&lbr_dump_report_ops);
	lbr_dump_report_attached = false;
	lbr_dump_report_filtered = false;
	return ret;
}

/*
 * The report functions' int3s (IDT only: FRED delivers #BP as a software exception, which
 * lbr-dump's FRED entry does not capture): a kprobe at each one's entry, an int3 after ENDBR, or
 * after the ftrace site (fentry's 5-byte nop) of a function ftrace can trace, that lbr-dump's
 * #BP stub captures (asm/stubs.S lbr_dump_stub_3) when its address is in the configuration's
 * table, and passes on to the kernel, whose kprobe handler runs these empty handlers and goes
 * on. Nothing branches between the entry and the int3 (the fentry nop is a nop while nothing
 * traces the function), so the records are those of the entry. Not a kprobe on the ftrace site
 * itself: that is a call through ftrace, and arming and disarming it costs ftrace's text
 * updates and grace periods at every arming. The post handler keeps the kprobe an int3: an
 * optimized kprobe is a jump, which the #BP stub never sees. Placed while armed, before gate 3
 * points at the stub, and removed before it is restored.
 *
 * Each name takes one kprobe, two for a traceable function: the first, registered disabled
 * (nothing is written), only finds the entry and whether it is an ftrace site; it stays
 * registered until lbr_dump_report_unkprobe() so that all go in one grace period.
 */
static struct kprobe lbr_dump_report_kprobes[2 * LBR_DUMP_REPORT_KPROBES];
static char lbr_dump_report_kprobe_names[LBR_DUMP_REPORT_KPROBES][KSYM_NAME_LEN];
static unsigned int lbr_dump_report_nr_kprobes, lbr_dump_report_nr_names;

static int lbr_dump_report_kprobe_pre(struct kprobe *kp, struct pt_regs *regs)
{
	return 0;
}
NOKPROBE_SYMBOL(lbr_dump_report_kprobe_pre);

static void lbr_dump_report_kprobe_post(struct kprobe *kp, struct pt_regs *regs,
					unsigned long flags)
{
}
NOKPROBE_SYMBOL(lbr_dump_report_kprobe_post);

/* Unregisters lbr_dump_report_kprobes[first, end), all in one grace period. */
static void lbr_dump_unregister_kprobes(unsigned int first, unsigned int end)
{
	struct kprobe *kps[2 * LBR_DUMP_REPORT_KPROBES];
	unsigned int i;

	for (i = first; i < end; i++)
		kps[i - first] = &lbr_dump_report_kprobes[i];
	if (end > first)
		unregister_kprobes(kps, end - first);
}

/*
 * Places a kprobe at the entry of `name` (`len` bytes, a function name), past its ftrace site if
 * it has one: 0 and *ip = the address after its int3, or -errno (-ENOENT: no such symbol;
 * -EINVAL: kprobes refuse it, such as a NOKPROBE function; -EAGAIN: kprobes are disarmed;
 * -ENOSPC: LBR_DUMP_REPORT_KPROBES placed already; -ENODEV: no CONFIG_KPROBES). (Kprobes
 * disarmed later through debugfs take the int3s away: no capture.)
 */
int lbr_dump_report_kprobe(const char *name, size_t len, unsigned long *ip)
{
	unsigned int first = lbr_dump_report_nr_kprobes, n = first;
	struct kprobe *kp;
	u8 op;
	int ret;

	if (!IS_ENABLED(CONFIG_KPROBES))
		return -ENODEV;
	if (lbr_dump_report_nr_names == LBR_DUMP_REPORT_KPROBES)
		return -ENOSPC;
	if (len >= KSYM_NAME_LEN)
		return -ENOENT;
	memcpy(lbr_dump_report_kprobe_names[lbr_dump_report_nr_names], name, len);
	lbr_dump_report_kprobe_names[lbr_dump_report_nr_names][len] = '\0';
	kp = &lbr_dump_report_kprobes[n];
	memset(kp, 0, sizeof(*kp));
	kp->symbol_name = lbr_dump_report_kprobe_names[lbr_dump_report_nr_names];
	kp->pre_handler = lbr_dump_report_kprobe_pre;
	kp->post_handler = lbr_dump_report_kprobe_post;
	kp->flags = KPROBE_FLAG_DISABLED;
	ret = register_kprobe(kp);
	if (ret)
		return ret;
	if (kp->flags & KPROBE_FLAG_FTRACE) {
		/* The disabled one at the ftrace site stays until lbr_dump_report_unkprobe(). */
		n++;
		kp = &lbr_dump_report_kprobes[n];
		memset(kp, 0, sizeof(*kp));
		kp->addr = lbr_dump_report_kprobes[n - 1].addr + MCOUNT_INSN_SIZE;
		kp->pre_handler = lbr_dump_report_kprobe_pre;
		kp->post_handler = lbr_dump_report_kprobe_post;
		ret = register_kprobe(kp);
		if (ret) {
			lbr_dump_unregister_kprobes(first, n);
			return ret;
		}
	} else {
		ret = enable_kprobe(kp);
		if (ret) {
			unregister_kprobe(kp);
			return ret;
		}
	}
	/* Registered but not armed: kprobes are disarmed (debugfs kprobes/enabled 0). */
	if (copy_from_kernel_nofault(&op, kp->addr, 1) || op != INT3_INSN_OPCODE) {
		lbr_dump_unregister_kprobes(first, n + 1);
		return -EAGAIN;
	}
	*ip = (unsigned long)kp->addr + INT3_INSN_SIZE;
	lbr_dump_report_nr_kprobes = n + 1;
	lbr_dump_report_nr_names++;
	return 0;
}

/*
 * Whether the kernel calls the list checks' report functions at every list operation
 * (CONFIG_DEBUG_LIST: include/linux/list.h skips the inline check and calls them): an int3
 * there would cost every list_add() and list_del() a #BP and a capture.
 */
bool lbr_dump_list_checks_always_called(void)
{
	return IS_ENABLED(CONFIG_DEBUG_LIST);
}

/*
 * The kernel's UBSAN options, as bits of src/reports.rs `ubsan` (which handlers anything in this
 * kernel calls).
 */
unsigned int lbr_dump_ubsan_config(void)
{
	return (IS_ENABLED(CONFIG_UBSAN_TRAP) ? BIT(0) : 0) |
	       (IS_ENABLED(CONFIG_UBSAN_ALIGNMENT) ? BIT(1) : 0) |
	       (IS_ENABLED(CONFIG_UBSAN_BOUNDS) ? BIT(2) : 0) |
	       (IS_ENABLED(CONFIG_UBSAN_SHIFT) ? BIT(3) : 0) |
	       (IS_ENABLED(CONFIG_UBSAN_DIV_ZERO) ? BIT(4) : 0) |
	       (IS_ENABLED(CONFIG_UBSAN_BOOL) ? BIT(5) : 0) |
	       (IS_ENABLED(CONFIG_UBSAN_ENUM) ? BIT(6) : 0) |
	       (IS_ENABLED(CONFIG_UBSAN_INTEGER_WRAP) ? BIT(7) : 0);
}

/* Removes every kprobe lbr_dump_report_kprobe() placed, all at once (one RCU grace period). */
void lbr_dump_report_unkprobe(void)
{
	lbr_dump_unregister_kprobes(0, lbr_dump_report_nr_kprobes);
	lbr_dump_report_nr_kprobes = 0;
	lbr_dump_report_nr_names = 0;
}

/*
 * Where a report's snapshot is printed, inside the report (src/printer.rs print_report):
 *  - KASAN and KFENCE: their error_report_end tracepoint, which each fires just before the
 *    report's closing line of '=' (mm/kasan/report.c end_report(), mm/kfence/report.c);
 *  - UBSAN: the entry of its ubsan_epilogue()'s dump_stack() (lib/ubsan.c), after the
 *    report's lines and before its stack and `---[ end trace`, by a kprobe that prints only
 *    when the caller is ubsan_epilogue() or a __ubsan_handle_*() it is inlined into.
 * `print` gets the detector (enum error_detector, or LBR_DUMP_DETECTOR_UBSAN) and the
 * tracepoint's id (the address KASAN or KFENCE reports; 0 for UBSAN). The result has bit 0 set
 * if the tracepoint cannot be registered, bit 1 for the kprobe.
 */
static void (*lbr_dump_report_print_fn)(unsigned int detector, unsigned long id);

static void lbr_dump_error_report_end(void *data, enum error_detector detector,
				      unsigned long id)
{
	unsigned long flags;

	if (detector != ERROR_DETECTOR_KASAN && detector != ERROR_DETECTOR_KFENCE)
		return;
	local_irq_save(flags);
	lbr_dump_report_print_fn(detector, id);
	local_irq_restore(flags);
}

/*
 * Whether the 8 bytes at `frame` may be read as a frame of the stack `sp` is on (the printer's
 * test that a capture is still active, src/printer.rs `active`), without a fault: on the
 * task's stack, both inside it; on another stack (IRQ, exception), `frame` within 32 KiB above
 * `sp` and mapped (a vmalloc'ed stack has unmapped guard pages around it). A fault there would
 * be a capture of its own on this CPU.
 */
bool lbr_dump_frame_on_stack(unsigned long frame, unsigned long sp)
{
	unsigned long top = (unsigned long)task_stack_page(current) + THREAD_SIZE;

	if (frame <= sp || frame - sp >= SZ_32K)
		return false;
	if (object_is_on_stack((void *)sp))
		return frame + 8 <= top;
	if (is_vmalloc_addr((void *)frame))
		return vmalloc_to_page((void *)frame) != NULL;
	return virt_addr_valid((void *)frame);
}

/* The start of the function `addr` lies in (`addr` less its offset, by kallsyms), 0 if none. */
static unsigned long lbr_dump_function_start(unsigned long addr)
{
	char sym[KSYM_SYMBOL_LEN];
	unsigned long off;
	char *plus;

	sprint_symbol(sym, addr);
	plus = strchr(sym, '+');
	if (!plus || sscanf(plus, "+%lx", &off) != 1)
		return 0;
	return addr - off;
}

/* Whether `a` and `b` lie in the same function, by kallsyms; callable where a warning is. */
bool lbr_dump_same_function(unsigned long a, unsigned long b)
{
	unsigned long start = lbr_dump_function_start(a);

	return start && start == lbr_dump_function_start(b);
}

/*
 * Whether `addr` lies in a function that calls check_panic_on_warn() or dump_stack() for a
 * report: __ubsan_handle_*() or ubsan_epilogue() (UBSAN), end_report() (KASAN),
 * kfence_report_error() (KFENCE); by kallsyms, callable in the panic path.
 */
bool lbr_dump_in_report(unsigned long addr)
{
	char sym[KSYM_SYMBOL_LEN];

	sprint_symbol(sym, addr);
	return !strncmp(sym, "__ubsan_handle_", 15) || lbr_dump_sym_is(sym, "ubsan_epilogue") ||
	       lbr_dump_sym_is(sym, "end_report") || lbr_dump_sym_is(sym, "kfence_report_error");
}

/*
 * dump_stack() (a kprobe, not a kretprobe: a return address swapped for the kretprobe
 * trampoline would add a line to the call trace that dump_stack() prints): when UBSAN's report
 * calls it, the snapshot is printed just before the report's stack.
 */
static int lbr_dump_dump_stack_pre(struct kprobe *kp, struct pt_regs *regs)
{
	/* At the entry, the return address is on top of the stack; the call is the byte before. */
	unsigned long caller = regs_get_kernel_stack_nth(regs, 0);
	char sym[KSYM_SYMBOL_LEN];
	unsigned long flags;

	sprint_symbol(sym, caller - 1);
	if (strncmp(sym, "__ubsan_handle_", 15) && !lbr_dump_sym_is(sym, "ubsan_epilogue"))
		return 0;
	local_irq_save(flags);
	lbr_dump_report_print_fn(LBR_DUMP_DETECTOR_UBSAN, 0);
	local_irq_restore(flags);
	return 0;
}
NOKPROBE_SYMBOL(lbr_dump_dump_stack_pre);

/*
 * A post handler keeps the kprobe an int3: an optimized kprobe (a jump) costs an RCU-tasks
 * grace period to place and to remove, at every arming and disarming.
 */
static void lbr_dump_dump_stack_post(struct kprobe *kp, struct pt_regs *regs,
				     unsigned long flags)
{
}
NOKPROBE_SYMBOL(lbr_dump_dump_stack_post);

static struct kprobe lbr_dump_dump_stack_probe = {
	.symbol_name = "dump_stack",
	.pre_handler = lbr_dump_dump_stack_pre,
	.post_handler = lbr_dump_dump_stack_post,
};

static bool lbr_dump_report_traced, lbr_dump_dump_stack_probed;

unsigned int lbr_dump_report_watch(void (*print)(unsigned int detector, unsigned long id))
{
	unsigned int gaps = 0;

	lbr_dump_report_print_fn = print;
	lbr_dump_report_traced =
		!register_trace_error_report_end(lbr_dump_error_report_end, NULL);
	if (!lbr_dump_report_traced)
		gaps |= 1;
	lbr_dump_dump_stack_probe.addr = NULL;
	lbr_dump_dump_stack_probe.flags = 0;
	lbr_dump_dump_stack_probed = !register_kprobe(&lbr_dump_dump_stack_probe);
	if (!lbr_dump_dump_stack_probed)
		gaps |= 2;
	return gaps;
}

/* Undoes lbr_dump_report_watch(), waiting until no CPU is in a handler. */
void lbr_dump_report_unwatch(void)
{
	if (lbr_dump_dump_stack_probed)
		unregister_kprobe(&lbr_dump_dump_stack_probe);
	lbr_dump_dump_stack_probed = false;
	if (lbr_dump_report_traced) {
		unregister_trace_error_report_end(lbr_dump_error_report_end, NULL);
		tracepoint_synchronize_unregister();
	}
	lbr_dump_report_traced = false;
}

/*
 * nmi_freeze: lbr-dump's NMI handler thaws the recorder that the NMI watch stub froze at this
 * NMI's entry (asm/stubs.S). NMI_LOCAL handlers run in registration order, all of them for an
 * NMI that reaches them; this one is registered when arming, after perf's (registered at boot),
 * so a panic in perf's handler (the hard-lockup watchdog) still finds the recorder frozen. It
 * claims nothing (NMI_DONE). Some NMIs never reach the NMI_LOCAL handlers (late microcode
 * loading's rendezvous, an emergency handler at reboot or kdump, an offline CPU): recording then
 * stays frozen on that CPU until its next NMI that does (whose thaw restores the value kept), or
 * the next capture re-arms it (Documentation/admin-guide/lbr-dump.rst, nmi_freeze).
 * register_nmi_handler() is a macro.
 */
static int lbr_dump_nmi(unsigned int type, struct pt_regs *regs)
{
	lbr_dump_nmi_thaw();
	return NMI_DONE;
}
NOKPROBE_SYMBOL(lbr_dump_nmi);

int lbr_dump_nmi_handler(bool on)
{
	if (!on) {
		unregister_nmi_handler(NMI_LOCAL, "lbr_dump");
		return 0;
	}
	return register_nmi_handler(NMI_LOCAL, lbr_dump_nmi, 0, "lbr_dump");
}

/* Registers (on) or unregisters the panic notifier block (src/printer.rs). */
void lbr_dump_panic_notifier(struct notifier_block *nb, bool on)
{
	if (on)
		atomic_notifier_chain_register(&panic_notifier_list, nb);
	else
		atomic_notifier_chain_unregister(&panic_notifier_list, nb);
}

/*
 * sysfs: /sys/kernel/lbr_dump/. The kernel crate has no kobject or sysfs abstraction, so the
 * attributes live here and call into Rust (src/control.rs) for what they show and do.
 *   enabled   rw (root): "0" or "1", an optional trailing newline; anything else is -EINVAL
 *             and changes nothing
 *   facility  ro: the probe's one-line description
 *   vectors   ro: the hooked vectors (while armed), else the chosen set
 *   captures  ro (root): snapshots taken since the module was loaded (all CPUs)
 *   rearms    ro (root): times the kernel's #DB handling switched recording back on through
 *             lbr-dump's callbacks after a #DB had cleared it, since the module was loaded (all
 *             CPUs; the #DB stub's own re-arms, which come first, are not counted)
 * Writes to one attribute are serialized by kernfs; removal waits for running callbacks.
 */
#include <linux/kobject.h>
#include <linux/sysfs.h>

static struct kobject *lbr_dump_kobj;
static char lbr_dump_facility[256];

static ssize_t enabled_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%d\n", lbr_dump_is_enabled());
}

static ssize_t enabled_store(struct kobject *k, struct kobj_attribute *a, const char *buf,
			     size_t count)
{
	int ret;

	if (count == 2 && buf[1] != '\n')
		return -EINVAL;
	if (count < 1 || count > 2 || (buf[0] != '0' && buf[0] != '1'))
		return -EINVAL;
	ret = lbr_dump_set_enabled(buf[0] == '1');
	return ret ? ret : count;
}

static ssize_t facility_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%s\n", lbr_dump_facility);
}

static ssize_t vectors_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return lbr_dump_show_vectors(buf);
}

static ssize_t captures_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%llu\n", lbr_dump_captures());
}

static ssize_t rearms_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%llu\n", lbr_dump_rearms());
}

static struct kobj_attribute enabled_attr = __ATTR(enabled, 0644, enabled_show, enabled_store);
static struct kobj_attribute facility_attr = __ATTR_RO(facility);
static struct kobj_attribute vectors_attr = __ATTR_RO(vectors);
/* Root only: whether an action of a user's cost a capture is not that user's to learn. */
static struct kobj_attribute captures_attr = __ATTR(captures, 0400, captures_show, NULL);
static struct kobj_attribute rearms_attr = __ATTR(rearms, 0400, rearms_show, NULL);
static struct attribute *lbr_dump_attrs[] = {
	&enabled_attr.attr, &facility_attr.attr, &vectors_attr.attr, &captures_attr.attr,
	&rearms_attr.attr, NULL
};

static const struct attribute_group lbr_dump_group = { .attrs = lbr_dump_attrs };

int lbr_dump_sysfs_create(const char *facility)
{
	int ret;

	strscpy(lbr_dump_facility, facility);
	lbr_dump_kobj = kobject_create_and_add("lbr_dump", kernel_kobj);
	if (!lbr_dump_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(lbr_dump_kobj, &lbr_dump_group);
	if (ret) {
		kobject_put(lbr_dump_kobj);
		lbr_dump_kobj = NULL;
	}
	return ret;
}

void lbr_dump_sysfs_remove(void)
{
	if (!lbr_dump_kobj)
		return;
	kobject_put(lbr_dump_kobj);
	lbr_dump_kobj = NULL;
}

/*
 * The `filter` parameter (lbr_dump.filter= on the command line when built in): a name, which the
 * kernel crate's module! cannot take (integers and bools only). Parsing and the names are Rust's
 * (src/control.rs); this is only the kernel_param_ops around them. Read-only once loaded: it
 * applies when arming, so it is chosen at load or boot.
 */
static int lbr_dump_param_filter_set(const char *val, const struct kernel_param *kp)
{
	return lbr_dump_filter_set(val);
}

static int lbr_dump_param_filter_get(char *buf, const struct kernel_param *kp)
{
	return lbr_dump_filter_get(buf);
}

static const struct kernel_param_ops lbr_dump_filter_ops = {
	.set = lbr_dump_param_filter_set,
	.get = lbr_dump_param_filter_get,
};
module_param_cb(filter, &lbr_dump_filter_ops, NULL, 0444);
MODULE_PARM_DESC(filter,
		 "Which branches are recorded: all (default), functions (no conditional branches or relative jumps: calls, returns, indirect jumps), calls (calls and returns); far branches always. Refused where the recorder has no filter");

/*
 * The `reports` parameter (Documentation/lbr-dump/admin-guide.rst "Reports"): the report
 * functions that get the report trampoline when arming, a list of names. Parsing is Rust's
 * (src/reports.rs, through src/control.rs); this keeps the text, which is read when arming
 * (under lbr-dump's state lock). Read-only once loaded, as `filter`.
 */
static char lbr_dump_reports[256] = "default";

static int lbr_dump_param_reports_set(const char *val, const struct kernel_param *kp)
{
	int ret = lbr_dump_reports_check(val);

	if (!ret)
		strscpy(lbr_dump_reports, val);
	return ret;
}

static int lbr_dump_param_reports_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", lbr_dump_reports);
}

const char *lbr_dump_reports_text(void)
{
	return lbr_dump_reports;
}

static const struct kernel_param_ops lbr_dump_reports_ops = {
	.set = lbr_dump_param_reports_set,
	.get = lbr_dump_param_reports_get,
};
module_param_cb(reports, &lbr_dump_reports_ops, NULL, 0444);
MODULE_PARM_DESC(reports,
		 "The report functions whose entry freezes the recorder (KASAN, KFENCE, UBSAN, list checks): a comma list of function names or ftrace globs, 'default' for the kernel's report functions (the default), 'none' for none");

/*
 * lbr_dump=on|off on the kernel command line, for the built-in driver. The kernel crate has no
 * __setup(); this is the C macro. -1 means "not given" (Kconfig's LBR_DUMP_DEFAULT_ON decides).
 * A loadable module uses its `enable` parameter instead.
 */
#ifndef MODULE
static int lbr_dump_boot = -1;

static int __init lbr_dump_setup(char *s)
{
	if (!strcmp(s, "on"))
		lbr_dump_boot = 1;
	else if (!strcmp(s, "off"))
		lbr_dump_boot = 0;
	else
		pr_warn("lbr_dump: ignoring lbr_dump=%s (want on or off)\n", s);
	return 1;
}
__setup("lbr_dump=", lbr_dump_setup);

int lbr_dump_boot_choice(void)
{
	return lbr_dump_boot;
}
#else
int lbr_dump_boot_choice(void)
{
	return -1;
}
#endif
