/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What src/glue.c shares with the rest of lbr-dump, in C: the functions it defines for Rust
 * (declared for Rust in src/ffi.rs, which is the other side of each line here), the Rust
 * functions it calls, and the symbols of asm/stubs.S and of the kernel it takes the address of.
 * Included by src/glue.c only.
 */
#ifndef LBR_DUMP_GLUE_H
#define LBR_DUMP_GLUE_H

#include <linux/notifier.h>
#include <linux/ptrace.h>
#include <linux/types.h>

/* A window onto one page (src/glue.c lbr_dump_window_map(); src/ffi.rs Window). */
struct lbr_dump_window {
	void *va;		/* the window: the page's read-only alias */
	u64 *pte;		/* its PTE in the kernel's page tables */
	u64 ro;			/* the PTE's value: read-only (as vmap() made it) */
	u64 rw;			/* and writable (RW and Dirty set) */
};

/* The most report kprobes (src/layout.rs cfg::REPORT_SLOTS; src/ffi.rs checks they agree). */
#define LBR_DUMP_REPORT_KPROBES	32
/* The detector lbr_dump_report_watch() passes for UBSAN (past enum error_detector's values). */
#define LBR_DUMP_DETECTOR_UBSAN	0x100

/* src/glue.c, called from Rust only (src/ffi.rs). */
unsigned long lbr_dump_idt_address(void);
int lbr_dump_window_map(struct lbr_dump_window *w, unsigned long target);
void lbr_dump_config_protect(void *page);
void lbr_dump_window_unmap(struct lbr_dump_window *w);
void lbr_dump_window_write(const struct lbr_dump_window *w,
			   void (*fn)(void *va, void *data), void *data);
const char *lbr_dump_environment_refusal(void);
bool lbr_dump_fred_active(void);
int lbr_dump_fred_set_kernel_page(unsigned long page);
unsigned long lbr_dump_fred_page(void);
unsigned long lbr_dump_fred_config_low(void);
int lbr_dump_stop_machine(int (*fn)(void *data), void *data);
unsigned long lbr_dump_virt_to_phys(void *addr);
bool lbr_dump_pti_active(void);
unsigned long lbr_dump_alloc_pages(unsigned int order);
int lbr_dump_set_handler(unsigned int vector, unsigned long handler);
void lbr_dump_syscore_register(void (*resume)(void), void (*shutdown)(void),
			       void (*suspend)(void));
void lbr_dump_on_each_cpu(void (*func)(void *info), void *info, bool wait);
int lbr_dump_wrmsr_safe(u32 msr, u64 value);
int lbr_dump_rdmsr_safe(u32 msr, u64 *value);
bool lbr_dump_pin(void);
void lbr_dump_syscore_unregister(void);
int lbr_dump_bts_watch(void (*perf)(void), void (*stop)(void), const char **what);
void lbr_dump_bts_unwatch(void);
int lbr_dump_vlbr_watch(void (*lend)(bool lent));
void lbr_dump_vlbr_unwatch(void);
int lbr_dump_panic_attach(bool *kexec);
unsigned long lbr_dump_iret_address(void);
bool lbr_dump_in_function(unsigned long addr, const char *name);
bool lbr_dump_in_report(unsigned long addr);
bool lbr_dump_same_function(unsigned long a, unsigned long b);
bool lbr_dump_frame_on_stack(unsigned long frame, unsigned long sp);
int lbr_dump_panic_detach(void);
int lbr_dump_stop_attach(void);
int lbr_dump_stop_detach(void);
int lbr_dump_nmi_handler(bool on);
void lbr_dump_panic_notifier(struct notifier_block *nb, bool on);
int lbr_dump_die_chain_watch(void);
void lbr_dump_die_chain_unwatch(void);
unsigned int lbr_dump_warn_watch(void (*print)(struct pt_regs *regs),
				 void (*done)(struct pt_regs *regs));
void lbr_dump_warn_unwatch(void);
int lbr_dump_report_filter(const char *name, size_t len);
int lbr_dump_report_attach(void);
int lbr_dump_report_detach(void);
int lbr_dump_report_kprobe(const char *name, size_t len, unsigned long *ip);
void lbr_dump_report_unkprobe(void);
bool lbr_dump_list_checks_always_called(void);
unsigned int lbr_dump_ubsan_config(void);
unsigned int lbr_dump_report_watch(void (*print)(unsigned int detector, unsigned long id));
void lbr_dump_report_unwatch(void);
const char *lbr_dump_reports_text(void);
int lbr_dump_sysfs_create(const char *facility);
void lbr_dump_sysfs_remove(void);
int lbr_dump_boot_choice(void);

/* Rust functions src/glue.c calls (#[no_mangle] extern "C"). */
void lbr_dump_rearm_after_db(void);		/* src/capture/debug.rs */
int lbr_dump_set_enabled(bool on);		/* src/control.rs */
bool lbr_dump_is_enabled(void);			/* src/control.rs */
u64 lbr_dump_captures(void);			/* src/control.rs */
u64 lbr_dump_rearms(void);			/* src/control.rs */
int lbr_dump_show_vectors(char *buf);		/* src/control.rs: at most PAGE_SIZE bytes */
int lbr_dump_filter_set(const char *val);	/* src/control.rs: 0 or -EINVAL, and says why */
int lbr_dump_filter_get(char *buf);		/* src/control.rs: the name and a newline */
int lbr_dump_reports_check(const char *val);	/* src/control.rs: 0 or -EINVAL, and says why */

/*
 * asm/stubs.S. Code, not called from C: the type is that of the kernel's entry points
 * (idtentry.h). lbr_dump_entry is only the type of the static calls' targets.
 */
void lbr_dump_entry(void);
void lbr_dump_fred_user(void);		/* the FRED entry page, 4 KiB-aligned */
void lbr_dump_panic_entry(void);	/* the panic path's trampolines */
void lbr_dump_kexec_entry(void);
void lbr_dump_reset_entry(void);
void lbr_dump_stop_entry(void);
void lbr_dump_report_hook(void);	/* the report trampoline */
void lbr_dump_nmi_thaw(void);

/* The kernel's IRET (arch/x86/entry/entry_64.S; declared in traps.c, in no header). */
extern unsigned char native_irq_return_iret[];

#endif /* LBR_DUMP_GLUE_H */
