// SPDX-License-Identifier: GPL-2.0

//! Every function and symbol lbr-dump uses that the `kernel` crate does not wrap, declared by
//! hand here and nowhere else. Each declaration names the file that defines it; its signature
//! was copied from there (Linux 7.3), or from our own src/glue.c and asm/.

use kernel::bindings;
use kernel::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};

/// `struct die_args` (include/linux/kdebug.h), which bindgen does not generate.
#[repr(C)]
pub(crate) struct DieArgs {
    pub(crate) regs: *mut bindings::pt_regs,
    pub(crate) str_: *const c_char,
    pub(crate) err: c_long,
    pub(crate) trapnr: c_int,
    pub(crate) signr: c_int,
}

/// `DIE_OOPS` of `enum die_val` (arch/x86/include/asm/kdebug.h).
pub(crate) const DIE_OOPS: c_ulong = 1;
/// `DIE_DEBUG` of `enum die_val`: a #DB (arch/x86/kernel/traps.c `notify_debug()`).
pub(crate) const DIE_DEBUG: c_ulong = 3;
/// `NOTIFY_DONE` (include/linux/notifier.h).
pub(crate) const NOTIFY_DONE: c_int = 0;
/// glue.h LBR_DUMP_REPORT_KPROBES: the report kprobes glue.c has room for, one per slot of the
/// #BP stub's table.
pub(crate) const REPORT_KPROBES: usize = 32;
const _: () = assert!(REPORT_KPROBES == crate::layout::cfg::REPORT_SLOTS);
/// `ERROR_DETECTOR_KFENCE` of enum error_detector (include/trace/events/error_report.h), as
/// `lbr_dump_report_watch` passes it (KASAN's is 1, UBSAN's glue.h LBR_DUMP_DETECTOR_UBSAN).
pub(crate) const DETECTOR_KFENCE: c_uint = 0;

/// `struct capture_config` of asm/stubs.S: what the entry stubs read and never write. It begins
/// [`ConfigPage`], read-only once init is done, written only through a window (src/window.rs
/// `write_config`, another virtual address of the same page: hence `static mut`, read with
/// volatile loads) while no IDT gate points at a stub. Its offsets are [`crate::layout::cfg`], from which the stubs' header
/// is generated; the assertions below make the compiler hold this struct to them.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct CaptureConfig {
    pub(crate) cpu0: u64,
    pub(crate) block_size: u64,
    pub(crate) nr_cpus: u64,
    pub(crate) ring_mask: u64,
    pub(crate) snap_size: u64,
    pub(crate) msrs: u64,
    pub(crate) nr_values: u64,
    pub(crate) ctl_msr: u64,
    pub(crate) mask: u64,
    pub(crate) armed: u64,
    pub(crate) gate_pte: u64,
    pub(crate) gate_window: u64,
    pub(crate) stop_save: u64,
    pub(crate) nmi_gate: u64,
    pub(crate) nmi_hook: u64,
    pub(crate) ipi_gate: u64,
    pub(crate) ipi_hook: u64,
    pub(crate) bts_pool: u64,
    pub(crate) bts_table: u64,
    pub(crate) bts_size: u64,
    pub(crate) rearm_mask: u64,
    pub(crate) iret: u64,
    pub(crate) gate_pte_rw: u64,
    pub(crate) gate_pte_ro: u64,
    pub(crate) fred_vectors: u64,
}

/// The page asm/stubs.S `lbr_dump_capture` fills (in `.data..ro_after_init`): the
/// configuration, then the MSR list the stubs read (`cfg.msrs` points at it), then the #BP
/// stub's table of report int3 addresses.
#[repr(C, align(4096))]
pub(crate) struct ConfigPage {
    pub(crate) cfg: CaptureConfig,
    _pad: [u8; crate::layout::cfg::MSR_LIST - crate::layout::cfg::SIZE],
    pub(crate) msrs: [u32; crate::layout::cfg::MSR_MAX],
    pub(crate) report_ips: [u64; crate::layout::cfg::REPORT_SLOTS],
}

/// `struct capture_live` of asm/stubs.S: the counters the stubs write ([`crate::layout::live`]).
#[repr(C)]
pub(crate) struct CaptureLive {
    pub(crate) seq: u64,
    pub(crate) panic_cpu: u64,
    pub(crate) gates_switched: u64,
    pub(crate) given_back: u64,
}

const _: () = {
    use crate::layout::{cfg, live};
    use core::mem::{offset_of, size_of};
    assert!(offset_of!(CaptureConfig, cpu0) == cfg::CPU0);
    assert!(offset_of!(CaptureConfig, block_size) == cfg::BLOCK_SIZE);
    assert!(offset_of!(CaptureConfig, nr_cpus) == cfg::NR_CPUS);
    assert!(offset_of!(CaptureConfig, ring_mask) == cfg::RING_MASK);
    assert!(offset_of!(CaptureConfig, snap_size) == cfg::SNAP_SIZE);
    assert!(offset_of!(CaptureConfig, msrs) == cfg::MSRS);
    assert!(offset_of!(CaptureConfig, nr_values) == cfg::NR_VALUES);
    assert!(offset_of!(CaptureConfig, ctl_msr) == cfg::CTL_MSR);
    assert!(offset_of!(CaptureConfig, mask) == cfg::MASK);
    assert!(offset_of!(CaptureConfig, armed) == cfg::ARMED);
    assert!(offset_of!(CaptureConfig, gate_pte) == cfg::GATE_PTE);
    assert!(offset_of!(CaptureConfig, gate_window) == cfg::GATE_WINDOW);
    assert!(offset_of!(CaptureConfig, stop_save) == cfg::STOP_SAVE);
    assert!(offset_of!(CaptureConfig, nmi_gate) == cfg::NMI_GATE);
    assert!(offset_of!(CaptureConfig, nmi_hook) == cfg::NMI_HOOK);
    assert!(offset_of!(CaptureConfig, ipi_gate) == cfg::IPI_GATE);
    assert!(offset_of!(CaptureConfig, ipi_hook) == cfg::IPI_HOOK);
    assert!(offset_of!(CaptureConfig, bts_pool) == cfg::BTS_POOL);
    assert!(offset_of!(CaptureConfig, bts_table) == cfg::BTS_TABLE);
    assert!(offset_of!(CaptureConfig, bts_size) == cfg::BTS_SIZE);
    assert!(offset_of!(CaptureConfig, rearm_mask) == cfg::REARM_MASK);
    assert!(offset_of!(CaptureConfig, iret) == cfg::IRET);
    assert!(offset_of!(CaptureConfig, gate_pte_rw) == cfg::GATE_PTE_RW);
    assert!(offset_of!(CaptureConfig, gate_pte_ro) == cfg::GATE_PTE_RO);
    assert!(offset_of!(CaptureConfig, fred_vectors) == cfg::FRED_VECTORS);
    assert!(size_of::<CaptureConfig>() == cfg::SIZE);
    assert!(offset_of!(ConfigPage, msrs) == cfg::MSR_LIST);
    assert!(offset_of!(ConfigPage, report_ips) == cfg::REPORT_IPS);
    assert!(size_of::<ConfigPage>() == cfg::PAGE);
    assert!(offset_of!(CaptureLive, seq) == live::SEQ);
    assert!(offset_of!(CaptureLive, panic_cpu) == live::PANIC_CPU);
    assert!(offset_of!(CaptureLive, gates_switched) == live::GATES_SWITCHED);
    assert!(offset_of!(CaptureLive, given_back) == live::GIVEN_BACK);
    assert!(size_of::<CaptureLive>() == live::SIZE);
};

/// `struct lbr_dump_window` of src/glue.c: a read-only vmap() alias of one page (`va`) and its
/// PTE's address and two values (`lbr_dump_window_map`).
#[repr(C)]
pub(crate) struct Window {
    pub(crate) va: *mut c_void,
    pub(crate) pte: *mut u64,
    pub(crate) ro: u64,
    pub(crate) rw: u64,
}

unsafe extern "C" {
    /// arch/x86/lib/msr-smp.c: `int rdmsrq_safe_on_cpu(unsigned int cpu, u32 msr_no, u64 *q)`.
    /// Reads an MSR on `cpu` (an IPI unless it is the current one) with an exception-table
    /// fixup: a #GP gives `-EIO`, an offline CPU `-ENXIO`, instead of an oops.
    pub(crate) fn rdmsrq_safe_on_cpu(cpu: c_uint, msr_no: u32, q: *mut u64) -> c_int;

    /// arch/x86/lib/msr-smp.c: `int wrmsrq_safe_on_cpu(unsigned int cpu, u32 msr_no, u64 q)`.
    pub(crate) fn wrmsrq_safe_on_cpu(cpu: c_uint, msr_no: u32, q: u64) -> c_int;

    /// kernel/smp.c: `int smp_call_function_single(int cpuid, smp_call_func_t func, void *info,
    /// bool wait)`. Runs `func(info)` on `cpuid` with interrupts off: on the current CPU
    /// directly (interrupts off around it, 0), else by an IPI (`-ENXIO` for an offline CPU).
    pub(crate) fn smp_call_function_single(
        cpuid: c_int,
        func: unsafe extern "C" fn(*mut c_void),
        info: *mut c_void,
        wait: bool,
    ) -> c_int;

    /// kernel/notifier.c: `int register_die_notifier(struct notifier_block *nb)`.
    pub(crate) fn register_die_notifier(nb: *mut bindings::notifier_block) -> c_int;

    /// kernel/notifier.c: `int unregister_die_notifier(struct notifier_block *nb)`.
    pub(crate) fn unregister_die_notifier(nb: *mut bindings::notifier_block) -> c_int;

    /// src/glue.c: the IDT's address (a whole, page-aligned one), or 0.
    pub(crate) fn lbr_dump_idt_address() -> c_ulong;

    /// src/glue.c: maps `w` as a read-only window onto the page holding `target`; 0 or -errno.
    pub(crate) fn lbr_dump_window_map(w: *mut Window, target: c_ulong) -> c_int;

    /// src/glue.c: makes the stubs' configuration page read-only (built in; a module's is, after
    /// init, in `.data..ro_after_init`).
    pub(crate) fn lbr_dump_config_protect(page: *mut c_void);

    /// src/glue.c: undoes [`lbr_dump_window_map`] (nothing if `w` is not mapped).
    pub(crate) fn lbr_dump_window_unmap(w: *mut Window);

    /// src/glue.c: calls `fn_(w.va, data)` with interrupts off on this CPU while the window is
    /// writable there; read-only again (and its TLB entry flushed) before it returns.
    pub(crate) fn lbr_dump_window_write(
        w: *const Window,
        fn_: unsafe extern "C" fn(*mut c_void, *mut c_void),
        data: *mut c_void,
    );

    /// src/glue.c: why lbr-dump cannot run in this environment (static string), or NULL.
    pub(crate) fn lbr_dump_environment_refusal() -> *const c_char;

    /// src/glue.c: `stop_machine(fn, data, NULL)`: `fn(data)` runs on one CPU while every other
    /// online CPU spins with interrupts off; returns what `fn` returned. Sleeps; takes the CPU
    /// hotplug lock.
    pub(crate) fn lbr_dump_stop_machine(
        fn_: unsafe extern "C" fn(*mut c_void) -> c_int,
        data: *mut c_void,
    ) -> c_int;

    /// src/glue.c: `virt_to_phys(addr)` of a direct-map address.
    pub(crate) fn lbr_dump_virt_to_phys(addr: *mut c_void) -> c_ulong;

    /// src/glue.c: whether page-table isolation is on (X86_FEATURE_PTI).
    pub(crate) fn lbr_dump_pti_active() -> bool;

    /// src/glue.c: `__get_free_pages(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN, order)`, 0 on
    /// failure or for an order above MAX_PAGE_ORDER.
    pub(crate) fn lbr_dump_alloc_pages(order: c_uint) -> c_ulong;

    /// src/glue.c: points the static call `lbr_dump_orig_<vector>`, where that vector's stub
    /// goes on, at `handler` (static_call_update(): text patching, may sleep); -EINVAL for a
    /// vector without a stub. Built in (no static calls: the stubs jump to the kernel's entry
    /// points), checks that `handler` is that entry point: -EXDEV if not.
    pub(crate) fn lbr_dump_set_handler(vector: c_uint, handler: c_ulong) -> c_int;

    /// src/glue.c: register_syscore() with `resume` (the boot CPU, IRQs off), `shutdown`
    /// (process context, every CPU online) and `suspend` (the boot CPU, IRQs off; returns 0)
    /// callbacks.
    pub(crate) fn lbr_dump_syscore_register(
        resume: unsafe extern "C" fn(),
        shutdown: unsafe extern "C" fn(),
        suspend: unsafe extern "C" fn(),
    );

    /// src/glue.c: `wrmsrq_safe(msr, value)` on this CPU: 0, or `-EIO` for a #GP.
    pub(crate) fn lbr_dump_wrmsr_safe(msr: u32, value: u64) -> c_int;

    /// src/glue.c: `on_each_cpu(func, info, wait)` (process context, interrupts on).
    pub(crate) fn lbr_dump_on_each_cpu(
        func: unsafe extern "C" fn(*mut c_void),
        info: *mut c_void,
        wait: bool,
    );

    /// src/glue.c: undoes [`lbr_dump_syscore_register`].
    pub(crate) fn lbr_dump_syscore_unregister();

    /// src/glue.c: ftrace callbacks that call `perf` at the entry of perf's
    /// `reserve_ds_buffers()` (process context, preemptible, interrupts on) and `stop` at the
    /// entry of `stop_this_cpu()` and `crash_nmi_callback()` (IRQ or NMI context). 0, or -errno
    /// with `*what` set to a static string naming the function that cannot be traced, and
    /// nothing registered.
    pub(crate) fn lbr_dump_bts_watch(
        perf: unsafe extern "C" fn(),
        stop: unsafe extern "C" fn(),
        what: *mut *const c_char,
    ) -> c_int;

    /// src/glue.c: ftrace callbacks at intel_pmu_lbr_add() and intel_pmu_lbr_del() that call
    /// `lend(true)` / `lend(false)` for a KVM guest's LBR event (vLBR), on the CPU it is scheduled
    /// on, interrupts off. 0 or -errno (nothing registered then). May sleep.
    pub(crate) fn lbr_dump_vlbr_watch(lend: unsafe extern "C" fn(bool)) -> c_int;

    /// src/glue.c: undoes [`lbr_dump_vlbr_watch`], waiting for running callbacks (a failure pins
    /// the module).
    pub(crate) fn lbr_dump_vlbr_unwatch();

    /// src/glue.c: undoes [`lbr_dump_bts_watch`], waiting for running callbacks (a failure pins
    /// the module: ftrace may still call into it).
    pub(crate) fn lbr_dump_bts_unwatch();

    /// src/glue.c: attaches the panic trampoline (asm/stubs.S `lbr_dump_panic_entry`) to the entry
    /// of panic() and vpanic() as an ftrace direct call, and `lbr_dump_kexec_entry` to
    /// crash_kexec()'s with `lbr_dump_reset_entry` to panic_reset()'s; 0 or -errno (panic() and
    /// vpanic()). On success `*kexec` says whether crash_kexec() is attached (true where the
    /// kernel has none). May sleep.
    pub(crate) fn lbr_dump_panic_attach(kexec: *mut bool) -> c_int;

    /// src/glue.c: the address of the kernel's IRET to user mode (entry_64.S
    /// `native_irq_return_iret`), or 0 if it cannot be found. May sleep (a module looks it up by
    /// name).
    pub(crate) fn lbr_dump_iret_address() -> c_ulong;

    /// src/glue.c: whether `addr` lies in the kernel function `name` (NUL-terminated) or in its
    /// `name.cold` part (GCC), by kallsyms; callable in the panic path.
    pub(crate) fn lbr_dump_in_function(addr: c_ulong, name: *const c_char) -> bool;

    /// src/glue.c: whether `addr` lies in a report function that calls check_panic_on_warn()
    /// (a UBSAN handler or ubsan_epilogue(), KASAN's end_report(), kfence_report_error());
    /// callable in the panic path.
    pub(crate) fn lbr_dump_in_report(addr: c_ulong) -> bool;

    /// src/glue.c: whether `a` and `b` lie in the same function, by kallsyms.
    pub(crate) fn lbr_dump_same_function(a: c_ulong, b: c_ulong) -> bool;

    /// src/glue.c: whether the 8 bytes at `frame` may be read as a frame above `sp` on the
    /// stack `sp` is on, without a fault.
    pub(crate) fn lbr_dump_frame_on_stack(frame: c_ulong, sp: c_ulong) -> bool;

    /// src/glue.c: undoes [`lbr_dump_panic_attach`], waiting until no CPU is in a trampoline;
    /// 0, or -errno when ftrace cannot detach one (the module is then pinned).
    pub(crate) fn lbr_dump_panic_detach() -> c_int;

    /// src/glue.c: attaches the stop trampoline (asm/stubs.S `lbr_dump_stop_entry`) to the entry
    /// of native_stop_other_cpus() and nmi_shootdown_cpus(); 0 or -errno. May sleep.
    pub(crate) fn lbr_dump_stop_attach() -> c_int;

    /// src/glue.c: undoes [`lbr_dump_stop_attach`], as [`lbr_dump_panic_detach`] does.
    pub(crate) fn lbr_dump_stop_detach() -> c_int;

    /// src/glue.c: registers (`on`) or unregisters `nb` on the panic notifier chain.
    pub(crate) fn lbr_dump_panic_notifier(nb: *mut bindings::notifier_block, on: bool);

    /// src/glue.c: creates /sys/kernel/lbr_dump with the given read-only text (copied).
    pub(crate) fn lbr_dump_sysfs_create(facility: *const c_char) -> c_int;

    /// src/glue.c: removes /sys/kernel/lbr_dump, waiting for running callbacks.
    pub(crate) fn lbr_dump_sysfs_remove();

    /// src/glue.c: `lbr_dump=on` (1), `lbr_dump=off` (0) on the command line, or -1.
    pub(crate) fn lbr_dump_boot_choice() -> c_int;

    /// src/glue.c: `rdmsrq_safe()` on this CPU: 0, or -EIO if the read faulted.
    pub(crate) fn lbr_dump_rdmsr_safe(msr: u32, value: *mut u64) -> c_int;

    /// src/glue.c: keeps the module loaded for good (built in: nothing to do); false if the
    /// module is being unloaded and cannot stay.
    pub(crate) fn lbr_dump_pin() -> bool;

    /// src/glue.c: whether the kernel delivers events with FRED (`X86_FEATURE_FRED`).
    pub(crate) fn lbr_dump_fred_active() -> bool;

    /// src/glue.c: checks that `page` is the kernel's FRED entry page (asm_fred_entrypoint_user)
    /// and, in a module, points the FRED page's static calls at it and its +256; 0, -EXDEV if it
    /// is another page, -ENODEV without FRED. May sleep (text patching).
    pub(crate) fn lbr_dump_fred_set_kernel_page(page: c_ulong) -> c_int;

    /// src/glue.c: the address of lbr-dump's FRED entry page (asm/stubs.S `lbr_dump_fred_user`,
    /// 4 KiB-aligned; its +256 is the ring-0 entry), 0 in a build without CONFIG_X86_FRED.
    pub(crate) fn lbr_dump_fred_page() -> c_ulong;

    /// src/glue.c: the low bits (redzone, interrupt stack level) of the IA32_FRED_CONFIG value
    /// the kernel writes on every CPU (`cpu_init_fred_exceptions()`), from its headers; 0 in a
    /// build without CONFIG_X86_FRED.
    pub(crate) fn lbr_dump_fred_config_low() -> c_ulong;

    /// asm/cpu.S: this CPU's number from the CPUNODE segment limit, without `%gs`.
    pub(crate) fn lbr_dump_cpu_number() -> c_uint;

    /// asm/stubs.S: the stubs' configuration page, read-only once init is done (written
    /// through a [`Window`] only).
    pub(crate) static mut lbr_dump_capture: ConfigPage;

    /// asm/stubs.S: the counters the stubs write.
    pub(crate) static mut lbr_dump_live: CaptureLive;

    /// asm/stubs.S: the stub of each hookable vector, 0 for the others.
    pub(crate) static lbr_dump_stubs: [u64; 32];

    /// src/glue.c: registers (`on`) or unregisters lbr-dump's NMI handler (NMI_LOCAL, after
    /// perf's), which calls asm/stubs.S `lbr_dump_nmi_thaw`; 0 or -errno.
    pub(crate) fn lbr_dump_nmi_handler(on: bool) -> c_int;

    /// asm/stubs.S: on this CPU, lbr-dump's armed value back in the control MSR if it holds it
    /// with only the switch a #DB clears cleared, lbr-dump is armed here and no KVM guest holds
    /// this CPU's LBR, and no capture or NMI watch is in progress here; true if it wrote. Only
    /// while the stubs' configuration and the snapshot area are in place; called directly
    /// (no ENDBR: never through a pointer).
    pub(crate) fn lbr_dump_rearm_here() -> bool;

    /// src/glue.c: an ftrace callback at the entry of hw_breakpoint_exceptions_notify(), the die
    /// chain's first notifier, that calls src/capture/debug.rs `lbr_dump_rearm_after_db` for
    /// every DIE_DEBUG; 0 or -errno, nothing registered then. May sleep.
    pub(crate) fn lbr_dump_die_chain_watch() -> c_int;

    /// src/glue.c: undoes [`lbr_dump_die_chain_watch`], waiting until no CPU is in the callback
    /// (if ftrace cannot remove it, the module is pinned and the callback stays).
    pub(crate) fn lbr_dump_die_chain_unwatch();

    /// src/glue.c: the warning hooks: a kretprobe at show_regs() that calls `print` with the
    /// #UD's registers when it returns to __warn(), and kretprobes at report_bug() and
    /// report_bug_entry() that call `done` with them, interrupts off, when one returns
    /// `BUG_TRAP_TYPE_WARN`. Each kretprobe that cannot be placed is left out: bit 0 of the
    /// result (show_regs()), bit 1 (report_bug()), bit 2 (report_bug_entry()). May sleep.
    pub(crate) fn lbr_dump_warn_watch(
        print: unsafe extern "C" fn(regs: *mut bindings::pt_regs),
        done: unsafe extern "C" fn(regs: *mut bindings::pt_regs),
    ) -> c_uint;

    /// src/glue.c: undoes [`lbr_dump_warn_watch`], waiting until no CPU is in a handler.
    pub(crate) fn lbr_dump_warn_unwatch();

    /// src/glue.c: adds the functions ftrace's filter pattern `name` (`len` bytes) matches to
    /// the report trampoline's filter; 0 or -errno (-EINVAL: nothing ftrace can trace has that
    /// name). May sleep.
    pub(crate) fn lbr_dump_report_filter(name: *const c_char, len: usize) -> c_int;

    /// src/glue.c: attaches the report trampoline (asm/stubs.S `lbr_dump_report_hook`) to every
    /// function filtered, as one ftrace direct call; 0 or -errno (-ENOENT none filtered, -EBUSY
    /// another direct call is attached to one of them, -ENODEV no direct calls). May sleep.
    pub(crate) fn lbr_dump_report_attach() -> c_int;

    /// src/glue.c: places a kprobe (an int3, never optimized) at the entry of the function
    /// `name` (`len` bytes), past ENDBR and past its ftrace site if it has one; 0 and `*ip` =
    /// the address after its int3, or -errno (-ENOENT no such symbol, -EINVAL kprobes refuse
    /// it, -EAGAIN kprobes disarmed, -ENOSPC [`REPORT_KPROBES`] placed, -ENODEV no kprobes).
    /// May sleep.
    pub(crate) fn lbr_dump_report_kprobe(
        name: *const c_char,
        len: usize,
        ip: *mut c_ulong,
    ) -> c_int;

    /// src/glue.c: removes every kprobe [`lbr_dump_report_kprobe`] placed, waiting until no CPU
    /// is in its handlers.
    pub(crate) fn lbr_dump_report_unkprobe();

    /// src/glue.c: the kernel's UBSAN options, as bits of `crate::reports::ubsan`.
    pub(crate) fn lbr_dump_ubsan_config() -> c_uint;

    /// src/glue.c: whether the list checks' report functions run at every list operation
    /// (CONFIG_DEBUG_LIST).
    pub(crate) fn lbr_dump_list_checks_always_called() -> bool;

    /// src/glue.c: undoes [`lbr_dump_report_attach`], waiting until no CPU is in the
    /// trampoline; nonzero when ftrace cannot detach one (the module is then pinned).
    pub(crate) fn lbr_dump_report_detach() -> c_int;

    /// src/glue.c: the report print points: `print(detector, id)` at the error_report_end
    /// tracepoint (KASAN, KFENCE: enum error_detector and the reported address) and when the
    /// dump_stack() of UBSAN's report is called (glue.h LBR_DUMP_DETECTOR_UBSAN, 0). Bit 0 of the result: the
    /// tracepoint cannot be registered; bit 1: the kprobe cannot be placed. May sleep.
    pub(crate) fn lbr_dump_report_watch(
        print: unsafe extern "C" fn(detector: c_uint, id: c_ulong),
    ) -> c_uint;

    /// src/glue.c: undoes [`lbr_dump_report_watch`], waiting until no CPU is in a handler.
    pub(crate) fn lbr_dump_report_unwatch();

    /// src/glue.c: the `reports` parameter's text (NUL-terminated, checked by
    /// `lbr_dump_reports_check` when set; changes only at load or boot).
    pub(crate) fn lbr_dump_reports_text() -> *const c_char;

    /// asm/stubs.S: the NMI watch stub of `nmi_freeze` (an IDT entry point).
    pub(crate) fn lbr_dump_nmi_watch();

    /// asm/stubs.S: the NMI stop stub (an IDT entry point, never called from Rust).
    pub(crate) fn lbr_dump_stop_nmi();

    /// asm/stubs.S: the REBOOT_VECTOR stop stub (an IDT entry point, never called from Rust).
    pub(crate) fn lbr_dump_stop_ipi();
}

#[kernel::prelude::kunit_tests(lbr_dump_ffi)]
mod tests {
    use kernel::cpu::CpuId;

    /// The `%gs`-free CPU lookup that the entry stubs use (asm/cpu.S) agrees with the kernel's
    /// CPU number. The two reads of the kernel's number bracket ours, so a migration in between
    /// is detected and the check repeated.
    #[test]
    fn cpu_number_without_gs_matches_kernel() {
        let mut checked = 0;
        for _ in 0..1000 {
            let before = CpuId::current().as_u32();
            // SAFETY: `lbr_dump_cpu_number` (asm/cpu.S) reads a segment limit; no memory, no
            // arguments, callable in any context.
            let ours = unsafe { super::lbr_dump_cpu_number() };
            let after = CpuId::current().as_u32();
            if before == after {
                assert_eq!(ours, before);
                checked += 1;
            }
        }
        assert!(checked > 0);
    }
}
