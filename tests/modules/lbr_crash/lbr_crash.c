// SPDX-License-Identifier: GPL-2.0
/*
 * lbr_crash: crash the kernel in ways lkdtm does not, for lbr-dump's capture tests.
 *
 *   insmod lbr_crash.ko crash=de      division by zero (#DE)
 *   insmod lbr_crash.ko crash=gp      dereference of a non-canonical pointer (#GP)
 *   insmod lbr_crash.ko crash=jump    call through a corrupted function pointer into unmapped
 *                                     kernel memory: RIP is "nowhere" (#PF on the fetch), and
 *                                     only the branch records name the caller
 *   insmod lbr_crash.ko crash=owner   play another owner of the branch recorder: set
 *                                     DEBUGCTL.FREEZE_LBRS_ON_PMI (bit 11, as perf does) on top
 *                                     of what lbr_dump armed, then crash as crash=gp does
 *   insmod lbr_crash.ko crash=select  the same with LBR_SELECT: also suppress conditional
 *                                     branches (LBR_SELECT.JCC, bit 2), DEBUGCTL untouched
 *   insmod lbr_crash.ko crash=torn capture_cfg=ADDR
 *                                     change the recorder's control MSR during a capture, as a
 *                                     perf NMI could: a hardware data breakpoint on the snapshot
 *                                     slot the next capture writes (ADDR: lbr_dump_capture, from
 *                                     /proc/kallsyms), whose #DB re-arms the frozen recorder in
 *                                     lbr_dump's #DB stub; then crash as crash=gp does
 *   insmod lbr_crash.ko crash=idt     no crash: print the handler address of every gate lbr_dump
 *                                     hooks, read from the IDT the CPU uses (IDTR), so that a
 *                                     test can compare the IDT with the kernel's without
 *                                     relying on lbr_dump; unload it afterwards
 *   insmod lbr_crash.ko crash=migrate (2+ CPUs) the crashing task moves to another CPU between
 *                                     the exception and the oops: on CPU 0 a survived #PF
 *                                     (fixed up) is captured first, from the same function and
 *                                     stack depth as the crash, so its snapshot has the crash's
 *                                     frame address; then on CPU 1 a #GP, whose DIE_GPF notifier
 *                                     (IRQs on) has the task moved back to CPU 0, where the
 *                                     oops is printed
 *   insmod lbr_crash.ko crash=retake  no crash: play a perf session that takes the recorder over
 *                                     while lbr_dump is armed: on every CPU, set
 *                                     DEBUGCTL.FREEZE_LBRS_ON_PMI on top of what is there and
 *                                     print the value; unload it afterwards
 *   insmod lbr_crash.ko crash=nested  a #GP whose handling hits BUG() (a DIE_GPF notifier): the
 *                                     oops is a #UD nested in the #GP's handler, on its stack
 *   insmod lbr_crash.ko crash=watch capture_cfg=ADDR group=N
 *                                     no crash: hardware data breakpoints (read/write, on every
 *                                     CPU) on group N (0-7) of the words lbr_dump's entry stubs
 *                                     read: the capture configuration at ADDR, the first and last
 *                                     MSR of the capture list, this CPU's block count and busy
 *                                     flag, its BTS pool slot and BTS table pointer;
 *                                     then kernel-mode #PF and #GP that are fixed up. The
 *                                     breakpoints stay while the module is loaded (the test runs
 *                                     user-mode faults and single-steps too); rmmod removes them
 *                                     and prints how often they fired
 *   insmod lbr_crash.ko crash=exec_user_ac
 *                                     jump to a user page with RFLAGS.AC set: a kernel-mode
 *                                     instruction fetch from a user address (#PF, I/D bit), a
 *                                     crash even inside a user-access region
 *   insmod lbr_crash.ko crash=text text=ADDR[,ADDR...]
 *                                     no crash: print the live bytes of the functions at the
 *                                     given addresses (their size from the kernel's symbols)
 *   insmod lbr_crash.ko crash=panic_thread cpu=N
 *                                     panic() from a kernel thread bound to CPU N
 *   insmod lbr_crash.ko crash=stack_protector
 *                                     overrun a local array: the stack protector's check in
 *                                     lbr_crash_stack_protector() calls __stack_chk_fail(),
 *                                     which panics (lkdtm CORRUPT_STACK does not trip it in a
 *                                     clang build of 7.3: the compiler drops its memset call)
 *   insmod lbr_crash.ko crash=fred_other
 *                                     no crash: another owner of FRED's entry: every CPU's
 *                                     IA32_FRED_CONFIG points at a page of this module that jumps
 *                                     on to the kernel's entry points; rmmod puts the kernel's
 *                                     value back
 *   insmod lbr_crash.ko crash=stop_late [late_ms=20] [late_at_print=1]
 *                                     (2+ CPUs) sysrq-c on CPU 0 while CPU 1 is in an NMI handler
 *                                     of this module until late_ms after the panic notifiers run
 *                                     (sent it before the panic): its stop NMI is latched, taken
 *                                     only after vpanic() stopped waiting for it; with
 *                                     late_at_print=1, only once lbr_dump's printer, past its
 *                                     wait, tests whether CPU 1 is online (a kprobe)
 *   insmod lbr_crash.ko crash=stop_stalled
 *                                     (2 CPUs, under lbr-emu's stall=1:5301:5302) sysrq-c on
 *                                     CPU 0 while CPU 1 spins with interrupts on; the emulator
 *                                     holds CPU 1 at its next freeze (the REBOOT_VECTOR stop
 *                                     capture) until this module's panic notifier, after
 *                                     vpanic()'s one-second wait and its stop NMI
 *   insmod lbr_crash.ko crash=nmi_lockup
 *                                     no crash yet: play perf's hard-lockup watchdog, an NMI
 *                                     handler (registered now, so before one lbr_dump registers
 *                                     when armed later) that panics (nmi_panic) on a CPU stuck in
 *                                     lbr_crash_stuck(); `echo 1 > /sys/module/lbr_crash/
 *                                     parameters/stuck` then spins there with interrupts off
 *                                     until an NMI arrives (the harness sends one through QMP)
 *   insmod lbr_crash.ko crash=stop_all
 *                                     (2+ CPUs) every CPU but 0 spins in a known loop: odd CPUs
 *                                     with interrupts on and preemption off (lbr_crash_spin_on:
 *                                     no other task runs there), even ones with
 *                                     interrupts off (lbr_crash_spin_off: only an NMI stops it);
 *                                     once all spin, a kernel thread on CPU 0 triggers sysrq-c
 *                                     (handle_sysrq('c'): what `echo c > /proc/sysrq-trigger`
 *                                     runs); with irqs_off=1 every one of them spins with
 *                                     interrupts off
 *   insmod lbr_crash.ko crash=gates
 *                                     no crash: a kernel thread per CPU reads the gates lbr_dump
 *                                     hooks, over and over, the way QEMU's TCG delivers an
 *                                     exception (target/i386/tcg/seg_helper.c do_interrupt64:
 *                                     three 4-byte loads per gate; the SDM does not promise
 *                                     more), and checks each address so read: the kernel's
 *                                     handler (as read at load) or the start of lbr_dump's stub
 *                                     for that vector; anything else is a gate seen half
 *                                     switched, where a CPU taking that exception would have
 *                                     jumped. rmmod stops them and prints the counts
 *   insmod lbr_crash.ko crash=msrs   no crash: print IA32_DS_AREA and IA32_DEBUGCTL of every CPU
 *                                     (`msrs: cpu=N ds_area=0x.. debugctl=0x..`); unload it
 *   insmod lbr_crash.ko crash=ds_owner
 *                                     no crash: play perf owning the debug store: on every CPU,
 *                                     point IA32_DS_AREA at a debug store of this module's with a
 *                                     64-record BTS buffer (BTS itself left as it is); rmmod puts
 *                                     back the values it found where its own is still in place
 *   insmod lbr_crash.ko crash=ds_take
 *                                     the same while lbr_dump records BTS (perf taking the debug
 *                                     store over), then crash as crash=gp does
 *   insmod lbr_crash.ko crash=perf_reserve target=ADDR
 *                                     no crash: play perf reserving the debug store for its first
 *                                     hardware event: call reserve_ds_buffers() (ADDR, from
 *                                     /proc/kallsyms; with a PMU that has a debug store, as the
 *                                     emulated Skylake's, it points every CPU's IA32_DS_AREA at
 *                                     perf's; without, it returns at once; QEMU TCG has no IBT
 *                                     to object to the indirect call), then take the debug store
 *                                     as crash=ds_owner does; rmmod prints the MSRs as crash=msrs does,
 *                                     then how many BTS records were stored in this module's
 *                                     buffers meanwhile
 *   insmod lbr_crash.ko crash=perf_mid_arm target=ADDR
 *                                     no crash: the same as crash=perf_reserve, but at the worst
 *                                     moment of lbr_dump arming CPU 1: ftrace callbacks at
 *                                     rdmsrq_safe_on_cpu(), wrmsrq_safe_on_cpu() and
 *                                     smp_call_function_single() wait in CPU 1's hotplug thread
 *                                     (cpuhp/1) for its read of IA32_DS_AREA, then hold it (IRQs
 *                                     on, up to 20 s) at its next call of any of them while a
 *                                     thread on CPU 0 does what crash=perf_reserve does: perf's
 *                                     IPIs reach CPU 1 between lbr_dump's look at IA32_DS_AREA
 *                                     and whatever it does next. Load it before arming; rmmod as
 *                                     crash=perf_reserve
 *   insmod lbr_crash.ko crash=perf_prepare target=ADDR fini=ADDR
 *   insmod lbr_crash.ko crash=perf_tail text=DS0,DS1,...
 *                                     no crash: play a perf reservation that had passed the
 *                                     entry of reserve_ds_buffers() before lbr_dump watched it.
 *                                     perf_prepare (before arming) calls reserve_ds_buffers()
 *                                     (target), prints each CPU's IA32_DS_AREA (perf's debug
 *                                     store: `perf_prepare: cpu=N ds_area=0x..`), then calls
 *                                     fini_debug_store_on_cpu() (fini) for every CPU: perf's debug
 *                                     store allocated, IA32_DS_AREA 0. perf_tail (while armed)
 *                                     does the rest of the reservation as the compiled
 *                                     reserve_ds_buffers() does (init_debug_store_on_cpu() is
 *                                     inlined there): wrmsrq_on_cpu(cpu, MSR_IA32_DS_AREA, DSn)
 *                                     for every CPU, then waits 100 ms and prints for every CPU
 *                                     IA32_DS_AREA, DEBUGCTL and how many BTS records perf's
 *                                     buffer received (`perf_tail: cpu=N ds_area=.. debugctl=..
 *                                     stored=K`)
 *   insmod lbr_crash.ko crash=irqs_off_wait
 *                                     (2+ CPUs) no crash: what stop_machine() does, plainly: a
 *                                     kernel thread on CPU 1 waits with interrupts off for a
 *                                     thread on CPU 0, which lets it go after msleep(3000). CPU 1
 *                                     gives up after giveup= seconds (default 60; counted in TSC
 *                                     cycles, not in jiffies: a guest whose timekeeping runs on
 *                                     jiffies, and whose CPUs all have interrupts off, has no
 *                                     jiffies). The load returns when both threads are done.
 *                                     Prints `irqs_off_wait: CPU 1 released after N ms` or
 *                                     `irqs_off_wait: CPU 1 gave up after N ms: CPU 0 never got
 *                                     to let it go`
 *   insmod lbr_crash.ko crash=nmi_lost target=ADDR handler=ADDR
 *                                     (2+ CPUs; lbr_dump armed with nmi_freeze=1 and bts=) no
 *                                     crash: play an NMI that never reaches lbr_dump's NMI
 *                                     handler (late microcode loading's rendezvous, an emergency
 *                                     handler), then perf taking the debug store, then an
 *                                     ordinary NMI. From CPU 0: lbr_dump's NMI handler is
 *                                     unregistered (by its name), sysrq-l sends CPU 1 an NMI
 *                                     (its entry freezes the recorder, nothing thaws it), the
 *                                     handler is registered again (handler: lbr_dump_nmi, from
 *                                     /proc/kallsyms, under lbr_dump's name); then what
 *                                     crash=perf_reserve does (target: reserve_ds_buffers); then
 *                                     sysrq-l again, whose NMI on CPU 1 reaches the handler's
 *                                     thaw. Prints CPU 1's DEBUGCTL after each step
 *                                     (`nmi_lost: <step>: cpu=1 debugctl=0x..`). rmmod does what
 *                                     perf_reserve's does and unregisters the handler it
 *                                     registered (lbr_crash's memory) unless lbr_dump's disarming
 *                                     did (from then on lbr_dump has no NMI handler; unregistering
 *                                     a name not there does nothing)
 *   insmod lbr_crash.ko crash=vlbr target=ADDR fini=ADDR
 *                                     (2+ CPUs, the emulated Skylake: 32 LBR entries at 0x680/
 *                                     0x6c0; a CPU without architectural perfmon, so that perf
 *                                     has no LBR and the functions return at once) no crash:
 *                                     play KVM lending CPU 1's LBR to a guest (vLBR). On CPU 1
 *                                     with interrupts off, as perf schedules events: a host LBR
 *                                     event (exclude_host clear) through perf's
 *                                     intel_pmu_lbr_add() (target) and intel_pmu_lbr_del()
 *                                     (fini), a user's event with KVM's attributes (not a kernel
 *                                     counter), then a guest's (KVM's attributes: exclude_host,
 *                                     INTEL_FIXED_VLBR_EVENT, owner TASK_TOMBSTONE) through
 *                                     intel_pmu_lbr_add(), which
 *                                     stays until rmmod; then what the guest could do: read the
 *                                     records, and forge FROM/TO 0-3 (0xffffffff8badf00d). After
 *                                     each step prints `vlbr: <step>: cpu=1 debugctl=0x..
 *                                     kernel=N forged=N` (records with a kernel address, records
 *                                     equal to the forged one); `echo 1 >
 *                                     /sys/module/lbr_crash/parameters/look` prints it again
 *                                     (step `look`); rmmod gives the guest's event back through
 *                                     intel_pmu_lbr_del() and prints step `given back`
 *   insmod lbr_crash.ko crash=lbr_addrs lbr_from=MSR lbr_to=MSR lbr_depth=N
 *                                     no crash: on every CPU, read the N records' FROM and TO
 *                                     MSRs (entry i at MSR + i) and sort each address (bits 47:0,
 *                                     sign-extended) into zero, user (below TASK_SIZE_MAX), this
 *                                     kernel's (a symbol of vmlinux or a module holds it) or
 *                                     foreign (any other: in a KVM guest, a host address);
 *                                     prints `lbr_addrs: cpu=N zero=Z user=U kernel=K foreign=F`
 *                                     and each foreign one (`lbr_addrs: foreign 0x..`)
 *   insmod lbr_crash.ko crash=write capture_cfg=ADDR [vmaps=ADDR[,ADDR...]]
 *                                     no crash: play an attacker with a kernel write primitive
 *                                     (__put_kernel_nofault(): a store that faults comes back as
 *                                     an error, not an oops) against what lbr_dump's stubs trust:
 *                                     the IDT gates the configuration at ADDR names for the panic
 *                                     path's stop switch (NMI, REBOOT_VECTOR) and the words that
 *                                     steer the stubs' MSR accesses (the control MSR, its armed
 *                                     value, its re-arm mask, the first MSR of the capture list),
 *                                     and the first word of each vmaps= address (the vmap()
 *                                     areas lbr_dump mapped, from /proc/vmallocinfo).
 *                                     Each store writes back the value it read, so a store that
 *                                     lands changes nothing; prints `write: NAME ADDR VALUE =
 *                                     RESULT` (0: it landed; -14: it faulted) for each
 *   insmod lbr_crash.ko crash=kexec_return target=ADDR cpu=N
 *                                     no crash: crash_kexec(NULL) on CPU N with no crash kernel
 *                                     loaded, as a BPF program's call (a destructive kfunc) or
 *                                     the UV NMI button's: it returns. target is crash_kexec
 *                                     (not exported: from /proc/kallsyms), checked by name; the
 *                                     load fails with -EBUSY if kexec_crash_loaded(). Prints
 *                                     `kexec_return: crash_kexec(NULL) returned on CPU N, no
 *                                     crash kernel loaded`; with race=1 (N not 0), a panic
 *                                     races it: CPU N is held at __crash_kexec()'s entry (a
 *                                     kprobe) until a kernel thread on CPU 0, started once CPU N
 *                                     is held, has passed panic()'s and vpanic()'s entry on
 *                                     sysrq-c (handle_sysrq('c')); CPU 0 is held in turn just
 *                                     before vpanic()'s panic_try_start() (a kprobe on
 *                                     panic_try_force_cpu(), called right before it) until
 *                                     crash_kexec() returned on CPU N, past panic_reset(): the
 *                                     panic is CPU 0's. rmmod removes the kprobes. The call
 *                                     through target is indirect: crash_kexec()'s ENDBR is
 *                                     sealed at boot on IBT hardware (a #CP there); QEMU TCG
 *                                     has no IBT to object
 *   insmod lbr_crash.ko crash=fixed_gp rounds=N [msr=MSR]
 *                                     no crash: kernel-mode #GPs the kernel fixes up: N times
 *                                     (default 1) rdmsr_safe() and wrmsr_safe(0) of an MSR that
 *                                     faults (default 0x8ff, an x2APIC register no APIC has,
 *                                     which QEMU's TCG faults on too: what a KVM guest's MSR
 *                                     access reaches),
 *                                     then once the unchecked rdmsrq() of it (ex_handler_msr()
 *                                     warns once and goes on) and, with AC set (stac), a load through a
 *                                     non-canonical pointer with an exception-table fixup: a
 *                                     kernel bug inside a user-access region, which lbr_dump
 *                                     captures. Prints `fixed_gp: msr=N ac=N` (the #GPs each
 *                                     part took)
 *   insmod lbr_crash.ko crash=fred_filter cpu=N filter=M
 *                                     no crash: play a hypervisor that filters CPU N's accesses
 *                                     to IA32_FRED_CONFIG from now on, under Bochs built with
 *                                     scripts/bochs-fred-filter.patch: M=1 a WRMSR of it changes
 *                                     nothing, 2 it raises #GP, 3 a RDMSR and a WRMSR of it
 *                                     raise #GP, 0 no filter (a WRMSR of MSR 0x400000f0 on CPU
 *                                     N; -ENODEV where it faults: a CPU without the patch).
 *                                     Prints `fred_filter: cpu=N filter=M`, read back; unload it
 *   insmod lbr_crash.ko crash=fixed_pf cpu=N rounds=K
 *                                     no crash: K kernel-mode #PFs the kernel fixes up on CPU N
 *                                     (an exception-table read of an unmapped kernel address,
 *                                     which lbr_dump captures while armed: a kernel bug the
 *                                     kernel survives). Prints `fixed_pf: cpu=N faults=K`
 *   insmod lbr_crash.ko crash=nmi_offline cpu=N rounds=K
 *                                     no crash: K NMIs, 100 ms apart, to CPU N, which must be
 *                                     offline, as late microcode loading sends them
 *                                     (kick_offline_cpus(): through the CPU's IA32_FRED_CONFIG
 *                                     with FRED). Prints `nmi_offline: cpu=N sent=K`, if the
 *                                     machine is still there
 *   insmod lbr_crash.ko crash=free_watch capture_cfg=ADDR
 *                                     no crash: note the memory lbr_dump's stubs write as the
 *                                     configuration at ADDR names it now (CPU 0's snapshot
 *                                     block, the stop stubs' save areas) and, until rmmod,
 *                                     print `free_watch: freed NAME ADDR` whenever free_pages()
 *                                     frees pages that hold one (a kprobe); rmmod prints
 *                                     `free_watch: removed, N frees`
 *   insmod lbr_crash.ko crash=warn_once
 *                                     no crash: a WARN_ON_ONCE() hit twice (lbr_crash_warn_once()):
 *                                     the kernel reports the first hit only. Prints
 *                                     `warn_once: 2 hits`
 *   insmod lbr_crash.ko crash=warn_irq
 *                                     no crash: a WARN_ON() (lbr_crash_warn()) in hard interrupt
 *                                     context, an hrtimer's expiry. Prints `warn_irq: hardirq=1`
 *   insmod lbr_crash.ko crash=warn_irqs_off
 *                                     no crash: a WARN_ON() (lbr_crash_warn()) with interrupts
 *                                     off in process context. Prints `warn_irqs_off: irqs_off=1`
 *   insmod lbr_crash.ko crash=kfence_corrupt
 *                                     no crash: with KFENCE sampling on, kmalloc() until an
 *                                     object comes from KFENCE's pool, write its canary (the
 *                                     byte past it, or before it when it ends its page) and
 *                                     free it (lbr_crash_kfence_free()): KFENCE reports the
 *                                     corruption from kfree(), by a call of
 *                                     kfence_report_error(), without an exception. Prints
 *                                     `kfence_corrupt: object=yes` (`no`: none in 10 s)
 *   insmod lbr_crash.ko crash=warn_storm rounds=N
 *                                     a warning storm, then an oops: N times a WARN_ON() and a
 *                                     WARN_ON_ONCE() (lbr_crash_warn(), lbr_crash_warn_once(): the
 *                                     kernel reports N + 1 of them), then the #GP of crash=gp,
 *                                     whose oops (a DIE_OOPS notifier of a priority above
 *                                     lbr_dump's) runs the same 2N warnings again on the oopsing
 *                                     CPU before lbr_dump prints it (N reported). Prints
 *                                     `warn_storm: N rounds, oops next`
 * The crash happens in lbr_crash_<name>(), noinline, so the records can be checked against
 * its symbol. Loading without a valid crash= fails with -EINVAL and prints the crash types:
 * LBR_CRASH_TYPES below, which `modinfo lbr_crash.ko` shows too.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/crash_core.h>
#include <linux/delay.h>
#include <linux/ftrace.h>
#include <linux/hrtimer.h>
#include <linux/hw_breakpoint.h>
#include <linux/kallsyms.h>
#include <linux/kdebug.h>
#include <linux/kfence.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/math64.h>
#include <linux/mman.h>
#include <linux/module.h>
#include <linux/objtool.h>
#include <linux/panic_notifier.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/static_call.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <linux/perf_event.h>
#include <linux/string.h>
#include <linux/sysrq.h>
#include <linux/timekeeping.h>
#include <asm/apic.h>
#include <asm/asm.h>
#include <asm/desc.h>
#include <asm/ibt.h>
#include <asm/msr.h>
#include <asm/nmi.h>
#include <asm/nospec-branch.h>
#include <asm/smap.h>
#include <asm/sync_core.h>
#include <asm/tsc.h>

#include "lbr_crash.h"

static char *crash = "";
module_param(crash, charp, 0);
static unsigned long capture_cfg;
module_param(capture_cfg, ulong, 0);
static int group;
module_param(group, int, 0);
static unsigned long target;
module_param(target, ulong, 0);
static unsigned long fini;
module_param(fini, ulong, 0);
static int cpu;
module_param(cpu, int, 0);
static unsigned long text[32];
static int nr_text;
module_param_array(text, ulong, &nr_text, 0);
static int rounds = 1;
module_param(rounds, int, 0);
static unsigned int msr = 0x8ff;
module_param(msr, uint, 0);
static unsigned long vmaps[8];
static int nr_vmaps;
module_param_array(vmaps, ulong, &nr_vmaps, 0);
static int giveup = 60;
module_param(giveup, int, 0);
static unsigned long handler;
module_param(handler, ulong, 0);
static unsigned int lbr_from, lbr_to, lbr_depth;
module_param(lbr_from, uint, 0);
module_param(lbr_to, uint, 0);
module_param(lbr_depth, uint, 0);
static bool irqs_off;
module_param(irqs_off, bool, 0);
static unsigned int filter;	/* crash=fred_filter */
module_param(filter, uint, 0);
static unsigned int late_ms = 20;	/* crash=stop_late: CPU 1's NMI after the notifiers */
module_param(late_ms, uint, 0);
static bool late_at_print;	/* crash=stop_late: CPU 1 let go as lbr_dump prints it */
module_param(late_at_print, bool, 0);
static char *at = "#1 ";	/* crash=print_rewrite: the line of lbr_dump's it acts at */
module_param(at, charp, 0);
static bool race;	/* crash=kexec_return: a panic on CPU 0 races the call */
module_param(race, bool, 0);

/*
 * void lbr_crash_exec_user_ac(unsigned long addr), for crash=exec_user_ac: sets RFLAGS.AC (as
 * inside a user-access region) and jumps to the user address in %rdi, so that the instruction
 * fetch faults in kernel mode (#PF with the I/D bit; SMEP) while AC is set. The fault is a crash,
 * not a user access the kernel fixes up: lbr_dump must capture it. Never returns. objtool is told
 * to leave it alone: an indirect jump to user memory with AC set is what it exists to refuse.
 */
asm(".pushsection .text, \"ax\"\n"
	".type lbr_crash_exec_user_ac, @function\n"
	"lbr_crash_exec_user_ac:\n"
	ASM_ENDBR
	"	stac\n"
	ANNOTATE_RETPOLINE_SAFE "\n"
	"	jmp *%rdi\n"
	".size lbr_crash_exec_user_ac, . - lbr_crash_exec_user_ac\n"
	".popsection\n");
STACK_FRAME_NON_STANDARD(lbr_crash_exec_user_ac);

/* Read with READ_ONCE() so the compiler cannot see through them. */
static unsigned long divisor;
static unsigned long bad_pointer = 0xdead000000000000UL;	/* non-canonical */
/* An unmapped address in the kernel half, below the direct map. */
static unsigned long nowhere = 0xffff800000001000UL;

static noinline int lbr_crash_de(void)
{
	return 1000 / READ_ONCE(divisor);
}

static noinline int lbr_crash_gp(void)
{
	return READ_ONCE(*(int *)READ_ONCE(bad_pointer));
}

static noinline int lbr_crash_owner(void)
{
	u64 debugctl;

	rdmsrq(MSR_IA32_DEBUGCTLMSR, debugctl);
	wrmsrq(MSR_IA32_DEBUGCTLMSR, debugctl | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI);
	pr_info("DEBUGCTL %#llx -> %#llx\n", debugctl, debugctl | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI);
	return lbr_crash_gp();
}

static noinline int lbr_crash_jump(void)
{
	unsigned long target = READ_ONCE(nowhere);
	int (*fn)(void) = (int (*)(void))target;

	return fn();
}

/*
 * A jmp whose target is the next instruction (e9 00000000, as Linux's early_xen_iret_patch in
 * entry_64.S, run on every return to kernel mode by a CONFIG_XEN_PV kernel not on Xen), then
 * the #GP of crash=gp. The jmp is taken, and the hardware records it like any other.
 */
static noinline int lbr_crash_jmp_next(void)
{
	asm volatile(".byte 0xe9\n\t.long 0");
	return lbr_crash_gp();
}

/*
 * sync_core(), as the kernel runs it on every CPU at every text patch: on a CPU without
 * SERIALIZE (QEMU's Skylake-Client), iret_to_self(), an `iretq` to the instruction after it; then
 * the #GP of crash=gp. The iretq is a far branch, taken, and the hardware records it.
 */
static noinline int lbr_crash_iret_next(void)
{
	sync_core();
	return lbr_crash_gp();
}

static noinline int lbr_crash_select(void)
{
	u64 select;

	rdmsrq(MSR_LBR_SELECT, select);
	wrmsrq(MSR_LBR_SELECT, select | BIT_ULL(2));
	pr_info("LBR_SELECT %#llx -> %#llx\n", select, select | BIT_ULL(2));
	return lbr_crash_gp();
}

static atomic_t hits = ATOMIC_INIT(0);

static void lbr_crash_hit(struct perf_event *bp, struct perf_sample_data *data,
			  struct pt_regs *regs)
{
	u64 debugctl;

	if (atomic_inc_return(&hits) > 1 || strcmp(crash, "torn"))
		return;
	pr_info("data breakpoint hit at %pS\n", (void *)instruction_pointer(regs));
	/*
	 * crash=torn: play another owner of the recorder that switches recording on while a
	 * capture has it frozen (as a perf NMI could): the capture must notice and say torn.
	 */
	rdmsrq(MSR_IA32_DEBUGCTLMSR, debugctl);
	wrmsrq(MSR_IA32_DEBUGCTLMSR, debugctl | DEBUGCTLMSR_LBR);
}

static noinline int lbr_crash_torn(void)
{
	/*
	 * struct capture_config (src/layout.rs `cfg`): CPU 0's block at 0x00, block size at 0x08,
	 * ring mask at 0x18, snapshot size at 0x20. A CPU block: count at 0x00, snapshots from 0x80
	 * (layout v5, src/layout.rs; written out here so that this test module shares no code with
	 * lbr_dump). The next capture on this CPU writes slot count & mask first at its sequence
	 * number (offset 0), before it reads the records.
	 */
	const u64 *cfg = (const u64 *)capture_cfg;
	struct perf_event * __percpu *bp;
	struct perf_event_attr attr;
	unsigned long block, slot;

	if (!capture_cfg)
		return -EINVAL;
	migrate_disable();	/* the crash must come on the CPU whose slot is watched */
	block = cfg[0] + smp_processor_id() * cfg[1];
	slot = block + 0x80 + (*(u64 *)block & cfg[3]) * cfg[4];
	hw_breakpoint_init(&attr);
	attr.bp_addr = slot;
	attr.bp_len = HW_BREAKPOINT_LEN_8;
	attr.bp_type = HW_BREAKPOINT_W;
	bp = register_wide_hw_breakpoint(&attr, lbr_crash_hit, NULL);
	if (IS_ERR_PCPU(bp)) {
		migrate_enable();
		return PTR_ERR_PCPU(bp);
	}
	pr_info("watching snapshot slot %#lx\n", slot);
	return lbr_crash_gp();
}

/*
 * crash=migrate. One function for the survived fault and the crash, so that both exception
 * frames are at the same stack address: `crash` false reads an unmapped kernel address with an
 * exception-table fixup (#PF, survived), true dereferences a non-canonical pointer (#GP).
 */
static noinline int lbr_crash_same_frame(bool crash)
{
	int v = 0;

	if (!crash) {
		__get_kernel_nofault(&v, (int *)READ_ONCE(nowhere), int, fixed);
		return v;
fixed:
		return -EFAULT;
	}
	return READ_ONCE(*(int *)READ_ONCE(bad_pointer));
}

static struct task_struct *migrating;

static void lbr_crash_move_back(struct work_struct *w)
{
	set_cpus_allowed_ptr(migrating, cpumask_of(0));
}
static DECLARE_WORK(move_back, lbr_crash_move_back);

/*
 * DIE_GPF for the crash (IRQs on, before die()): have another CPU move this task to CPU 0 and
 * wait until the scheduler wants this CPU back (the migration stopper is runnable here); the
 * notifier chain's rcu_read_unlock() then lets it run, and the task continues into die() on CPU 0.
 */
static int lbr_crash_on_gpf(struct notifier_block *nb, unsigned long val, void *data)
{
	u64 start, spins;

	if (val != DIE_GPF || current != migrating || raw_smp_processor_id() != 1)
		return NOTIFY_DONE;
	queue_work_on(cpumask_any_but(cpu_online_mask, 1), system_wq, &move_back);
	/* At most 2 s by the clock (a stopped clock: 2^32 rounds). */
	start = ktime_get_mono_fast_ns();
	for (spins = 0; spins < U32_MAX && !need_resched() &&
	     ktime_get_mono_fast_ns() - start < 2 * NSEC_PER_SEC; spins++)
		cpu_relax();
	pr_info("migrating: need_resched=%d after %llu us\n", need_resched(),
		(ktime_get_mono_fast_ns() - start) / NSEC_PER_USEC);
	return NOTIFY_DONE;
}
static struct notifier_block gpf_nb = { .notifier_call = lbr_crash_on_gpf, .priority = 100 };

static int lbr_crash_migrate(void)
{
	int r;

	if (num_online_cpus() < 2)
		return -ENODEV;
	/* The older snapshot, planted on CPU 0 at the crash's frame address. */
	r = set_cpus_allowed_ptr(current, cpumask_of(0));
	if (r)
		return r;
	r = lbr_crash_same_frame(false);
	pr_info("planted: fixed-up fault on CPU %d returned %d\n", raw_smp_processor_id(), r);
	r = set_cpus_allowed_ptr(current, cpumask_of(1));
	if (r)
		return r;
	migrating = current;
	r = register_die_notifier(&gpf_nb);
	if (r)
		return r;
	pr_info("crashing on CPU %d\n", raw_smp_processor_id());
	return lbr_crash_same_frame(true);
}

static void lbr_crash_retake_here(void *unused)
{
	u64 debugctl;

	rdmsrq(MSR_IA32_DEBUGCTLMSR, debugctl);
	wrmsrq(MSR_IA32_DEBUGCTLMSR, debugctl | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI);
}

static int lbr_crash_retake(void)
{
	on_each_cpu(lbr_crash_retake_here, NULL, 1);
	pr_info("retake: DEBUGCTL |= FREEZE_LBRS_ON_PMI on %u CPUs\n", num_online_cpus());
	return 0;
}

/* crash=nested: BUG() inside the handling of our own #GP. */
static int lbr_crash_bug_in_gpf(struct notifier_block *nb, unsigned long val, void *data)
{
	if (val == DIE_GPF && current == migrating)
		BUG();
	return NOTIFY_DONE;
}
static struct notifier_block nested_nb = { .notifier_call = lbr_crash_bug_in_gpf };

static int lbr_crash_nested(void)
{
	int r;

	migrating = current;
	r = register_die_notifier(&nested_nb);
	if (r)
		return r;
	return lbr_crash_gp();
}

/*
 * A kernel-mode #GP that the kernel fixes up without a word: a read through a non-canonical
 * pointer with a plain exception-table entry (QEMU TCG reads unknown MSRs as 0, so rdmsr_safe()
 * does not fault there). Returns 0 if it faulted.
 */
static noinline int lbr_crash_gp_fixed(void)
{
	int faulted = 1, v;

	asm volatile("1:	movl (%[p]), %[v]\n"
		     "	movl $0, %[f]\n"
		     "2:\n"
		     _ASM_EXTABLE(1b, 2b)
		     : [v] "=r" (v), [f] "+r" (faulted)
		     : [p] "r" (READ_ONCE(bad_pointer)));
	return faulted ? 0 : -EIO;
}

static struct perf_event * __percpu *watch_bp[4];

static void lbr_crash_unwatch(void)
{
	int i;

	for (i = 0; i < 4; i++) {
		if (watch_bp[i])
			unregister_wide_hw_breakpoint(watch_bp[i]);
		watch_bp[i] = NULL;
	}
}

static int lbr_crash_watch_faults(void);

static int lbr_crash_watch(void)
{
	int r = lbr_crash_watch_faults();

	if (r) {
		pr_info("watch: failed (%d)\n", r);
		lbr_crash_unwatch();	/* the handler must not outlive the module */
	}
	return r;
}

static int lbr_crash_watch_faults(void)
{
	const u64 *cfg = (const u64 *)capture_cfg;
	unsigned long words[32];
	struct perf_event_attr attr;
	unsigned long block;
	int n = 0, i, v;

	if (!capture_cfg || group < 0 || group > 7)
		return -EINVAL;
	/* struct capture_config: 24 words (src/layout.rs `cfg`); cfg[5] is the MSR list. */
	for (i = 0; i < 24; i++)
		words[n++] = capture_cfg + 8 * i;
	words[n++] = cfg[5];				/* first MSR of the list */
	words[n++] = cfg[5] + 4 * (cfg[6] - 1);		/* last */
	block = cfg[0] + raw_smp_processor_id() * cfg[1];
	words[n++] = block;		/* count */
	words[n++] = block + 8;		/* busy */
	words[n++] = block + 0x10;	/* BTS: pool slot recording now */
	words[n++] = block + 0x18;	/* BTS: this CPU's first table entry */
	/*
	 * Group N: words N, N + 8, N + 16, N + 24, so that each group holds a word every capture
	 * reads (the first eight configuration words), whatever else it holds (words read only at
	 * a panic or with BTS).
	 */
	for (i = 0; i < 4 && group + 8 * i < n; i++) {
		hw_breakpoint_init(&attr);
		attr.bp_addr = words[group + 8 * i] & ~7UL;
		attr.bp_len = HW_BREAKPOINT_LEN_8;
		attr.bp_type = HW_BREAKPOINT_RW;
		watch_bp[i] = register_wide_hw_breakpoint(&attr, lbr_crash_hit, NULL);
		if (IS_ERR_PCPU(watch_bp[i])) {
			v = PTR_ERR_PCPU(watch_bp[i]);
			watch_bp[i] = NULL;
			return v;
		}
		pr_info("watching %#lx\n", words[group + 8 * i]);
	}
	/* Kernel-mode exceptions that the kernel fixes up: captured, survived. */
	for (i = 0; i < 3; i++) {
		if (lbr_crash_same_frame(false) != -EFAULT)	/* #PF */
			return -EFAULT;
		if (lbr_crash_gp_fixed())		/* #GP, fixed up */
			return -ENXIO;
	}
	pr_info("watch: kernel #PF and #GP survived, %d breakpoint hits\n", atomic_read(&hits));
	return 0;
}

/*
 * crash=write: struct capture_config (src/layout.rs `cfg`, written out here as for crash=torn):
 * the MSR list's address at 0x28, the control MSR at 0x38, its armed value at 0x48, the NMI
 * gate's address at 0x68, the REBOOT_VECTOR gate's at 0x78, the re-arm mask at 0xa0.
 */
static int lbr_crash_write_back(const char *name, unsigned long addr, size_t size)
{
	u64 v = 0;
	int r = 0;

	if (!addr) {
		pr_info("write: %s none\n", name);
		return 0;
	}
	if (copy_from_kernel_nofault(&v, (void *)addr, size)) {
		pr_info("write: %s %#lx unreadable\n", name, addr);
		return 0;
	}
	pagefault_disable();
	if (size == 8)
		__put_kernel_nofault((void *)addr, &v, u64, fault);
	else
		__put_kernel_nofault((void *)addr, &v, u32, fault);
	goto done;
fault:
	r = -EFAULT;
done:
	pagefault_enable();
	pr_info("write: %s %#lx %#llx = %d\n", name, addr, v, r);
	return r;
}

static int lbr_crash_write(void)
{
	const u64 *cfg = (const u64 *)capture_cfg;
	int i;

	if (!capture_cfg)
		return -EINVAL;
	lbr_crash_write_back("nmi_gate", cfg[0x68 / 8], 8);
	lbr_crash_write_back("ipi_gate", cfg[0x78 / 8], 8);
	lbr_crash_write_back("ctl_msr", capture_cfg + 0x38, 8);
	lbr_crash_write_back("armed", capture_cfg + 0x48, 8);
	lbr_crash_write_back("rearm_mask", capture_cfg + 0xa0, 8);
	lbr_crash_write_back("msr_list", cfg[0x28 / 8], 4);
	for (i = 0; i < nr_vmaps; i++)
		lbr_crash_write_back("vmap", vmaps[i], 8);
	pr_info("write: done\n");
	return 0;
}

/* crash=fixed_gp */
static noinline int lbr_crash_gp_ac(void)
{
	int faulted = 1, v;

	asm volatile(ASM_STAC "\n"
		     "1:	movl (%[p]), %[v]\n"
		     "	movl $0, %[f]\n"
		     "2:	" ASM_CLAC "\n"
		     _ASM_EXTABLE(1b, 2b)
		     : [v] "=r" (v), [f] "+r" (faulted)
		     : [p] "r" (READ_ONCE(bad_pointer)));
	return faulted;
}

static int lbr_crash_fixed_gp(void)
{
	int faults = 0, ac = 0, i;
	u64 v;

	for (i = 0; i < rounds; i++) {
		faults += rdmsrq_safe(msr, &v) == -EIO;
		faults += wrmsrq_safe(msr, 0) == -EIO;
	}
	rdmsrq(msr, v);		/* unchecked: warns once, reads 0 */
	ac += lbr_crash_gp_ac();
	pr_info("fixed_gp: msr=%d ac=%d\n", faults, ac);
	return 0;
}

/* crash=exec_user_ac: a user page, then a jump to it with AC set (user_ac.S). */
static int lbr_crash_exec(void)
{
	unsigned long addr = vm_mmap(NULL, 0, PAGE_SIZE, PROT_READ | PROT_EXEC,
				     MAP_ANONYMOUS | MAP_PRIVATE, 0);

	if (IS_ERR_VALUE(addr))
		return addr;
	pr_info("jumping to user address %#lx with AC set\n", addr);
	lbr_crash_exec_user_ac(addr);
	return 0;
}

/* crash=text: the live bytes of functions, one line each, for a disassembler on the host. */
static int lbr_crash_text(void)
{
	char sym[KSYM_SYMBOL_LEN], *slash;
	unsigned long size, off;
	int i;

	for (i = 0; i < nr_text; i++) {
		sprint_symbol(sym, text[i]);
		slash = strrchr(sym, '/');
		if (!slash || kstrtoul(slash + 1, 0, &size)) {
			/* "name+0x0/0x1e0 [mod]": the size is after the slash, up to a space. */
			char *end = slash ? strchr(slash, ' ') : NULL;

			if (end)
				*end = 0;
			if (!slash || kstrtoul(slash + 1, 0, &size))
				return -EINVAL;
		}
		size = min(size, 1024UL);	/* the last symbol of a section "ends" at the next */
		for (off = 0; off < size; off += 64)
			pr_info("text %#lx+%lu %lu %*phN\n", text[i], off, size,
				(int)min(size - off, 64UL), (void *)(text[i] + off));
	}
	return 0;
}

/* crash=stack_protector: 64 bytes into a 16-byte array, through a call clang cannot drop. */
static noinline void lbr_crash_overrun(char *buf, size_t n)
{
	memset(buf, 0xff, n);
	barrier_data(buf);
}

static noinline int lbr_crash_stack_protector(void)
{
	char buf[16];
	size_t n = 64;

	OPTIMIZER_HIDE_VAR(n);
	lbr_crash_overrun(buf, n);
	barrier_data(buf);
	return buf[0];
}

/* crash=panic_thread: panic() in a kernel thread bound to CPU `cpu`. */
static noinline int lbr_crash_panic_here(void *unused)
{
	panic("lbr_crash: panic in a kernel thread on CPU %d", raw_smp_processor_id());
	return 0;
}

static int lbr_crash_panic_thread(void)
{
	struct task_struct *t;

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	t = kthread_run_on_cpu(lbr_crash_panic_here, NULL, cpu, "lbr_crash/%u");
	return PTR_ERR_OR_ZERO(t);
}

/*
 * crash=stop_all: the loops the other CPUs are in when the panic stops them. Each iteration
 * calls a noinline step, so the records are that call and its return, over and over.
 */
static atomic_t spinning = ATOMIC_INIT(0);
static unsigned long spin_count[NR_CPUS];

static noinline void lbr_crash_spin_step(unsigned long *n)
{
	WRITE_ONCE(*n, *n + 1);
}

static noinline int lbr_crash_spin_on(void *unused)
{
	unsigned long *n = &spin_count[raw_smp_processor_id()];

	preempt_disable();	/* nothing but interrupts runs here until the stop */
	atomic_inc(&spinning);
	for (;;)
		lbr_crash_spin_step(n);
	return 0;
}

/*
 * Set by the sysrq thread just before it panics: the interrupts-off spinners turn them off, and
 * count themselves in spinning_off once they have.
 */
static atomic_t spin_go = ATOMIC_INIT(0);
static atomic_t spin_off_wanted = ATOMIC_INIT(0);
static atomic_t spinning_off = ATOMIC_INIT(0);

static noinline int lbr_crash_spin_off(void *unused)
{
	unsigned long *n = &spin_count[raw_smp_processor_id()];

	preempt_disable();
	atomic_inc(&spinning);
	/*
	 * Interrupts stay on until the sysrq thread is about to panic: a CPU spinning with them off
	 * hangs any CPU that waits for it in a cross-call (a TLB flush after the module's init text
	 * is freed, seen on a loaded host), and the panic never comes.
	 */
	while (!atomic_read(&spin_go))
		lbr_crash_spin_step(n);
	local_irq_disable();
	atomic_inc(&spinning_off);
	for (;;)
		lbr_crash_spin_step(n);
	return 0;
}

static int lbr_crash_sysrq_c(void *unused)
{
	unsigned long ms;

	while (atomic_read(&spinning) < num_online_cpus() - 1)
		usleep_range(1000, 2000);	/* CPU 0 stays free for the threads still to be created */
	/* Nothing else runs on CPU 0 from here: no cross-call of its waits for the spinners. */
	preempt_disable();
	atomic_set(&spin_go, 1);
	/* Every interrupts-off spinner has turned them off (a vCPU may be slow to run: 5 s at most). */
	for (ms = 0; atomic_read(&spinning_off) < atomic_read(&spin_off_wanted) && ms < 5000; ms++)
		mdelay(1);
	mdelay(20);	/* every loop has filled its recorder, interrupts off where asked */
	pr_info("stop_all: %d CPUs spinning, sysrq-c on CPU %d\n", atomic_read(&spinning),
		raw_smp_processor_id());
	handle_sysrq('c');
	return 0;
}

static int lbr_crash_stop_all(void)
{
	struct task_struct *t;
	unsigned int c;

	if (num_online_cpus() < 2 || !cpu_online(0))
		return -EINVAL;
	/* Where the loops are, for a test without records (Bochs): the loops' text is around it. */
	pr_info("stop_all: lbr_crash_spin_step at %px\n", lbr_crash_spin_step);
	/*
	 * The sysrq thread first: once a CPU spins with preemption off, a kthreadd queued there
	 * never runs again, and a thread created after it may never start (seen under Bochs).
	 */
	t = kthread_run_on_cpu(lbr_crash_sysrq_c, NULL, 0, "lbr_sysrq/%u");
	if (IS_ERR(t))
		return PTR_ERR(t);
	for_each_online_cpu(c) {
		if (c == 0)
			continue;
		bool on = c % 2 && !irqs_off;

		if (!on)
			atomic_inc(&spin_off_wanted);
		t = kthread_run_on_cpu(on ? lbr_crash_spin_on : lbr_crash_spin_off, NULL, c,
				       "lbr_spin/%u");
		if (IS_ERR(t))
			return PTR_ERR(t);
		pr_info("stop_all: CPU %u spins with interrupts %s\n", c, on ? "on" : "off");
	}
	return 0;
}

/*
 * crash=stop_late: CPU 1 takes the panic's stop NMI only after the kernel stopped waiting for it.
 * CPU 1 is in an NMI handler of this module (an NMI sent to it before the panic) until the panic
 * notifiers run: the REBOOT_VECTOR IPI finds interrupts blocked, the stop NMI is latched, and
 * vpanic() goes on after its waits (1 s, then 10 ms). This module's panic notifier, which runs
 * before lbr-dump's (a higher priority), says whether CPU 1 is still online and lets it go
 * late_ms later (20 ms by default): its stop NMI is then taken while lbr-dump's printer waits for
 * it; with a late_ms past the printer's wait, after the printer gave up on it; with
 * late_at_print=1, when the printer tests its online bit (lbr_crash_late_test_pre() below).
 */
static atomic_t late_armed = ATOMIC_INIT(0);
static atomic_t late_in_nmi = ATOMIC_INIT(0);
static atomic_t late_notified = ATOMIC_INIT(0);
static atomic_t late_go = ATOMIC_INIT(0);
static atomic_t late_present_tested = ATOMIC_INIT(0);

static int lbr_crash_late_nmi(unsigned int type, struct pt_regs *regs)
{
	u64 start, spins;

	if (raw_smp_processor_id() != 1 || !atomic_xchg(&late_armed, 0))
		return NMI_DONE;
	atomic_set(&late_in_nmi, 1);
	/*
	 * At most 20 s: a panic that never reaches the notifiers must not hang CPU 1 for ever. By
	 * the clock (NMI-safe), not by counting udelay()s: those are only as long as this CPU's
	 * delay-loop calibration makes them. A clock that stands still (clocksource=jiffies, whose
	 * ticks stop when the panicking CPU turns interrupts off) ends it at 2^32 rounds instead.
	 */
	start = ktime_get_mono_fast_ns();
	for (spins = 0; !atomic_read(&late_notified) && spins < U32_MAX &&
	     ktime_get_mono_fast_ns() - start < 20 * NSEC_PER_SEC; spins++)
		cpu_relax();
	start = ktime_get_mono_fast_ns();
	if (late_at_print) {
		/* Let go by lbr_crash_late_test_pre(), below; at most 20 s, as above. */
		for (spins = 0; !atomic_read(&late_go) && spins < U32_MAX &&
		     ktime_get_mono_fast_ns() - start < 20 * NSEC_PER_SEC; spins++)
			cpu_relax();
		return NMI_HANDLED;
	}
	for (spins = 0; spins < U32_MAX &&
	     ktime_get_mono_fast_ns() - start < (u64)late_ms * NSEC_PER_MSEC; spins++)
		cpu_relax();
	return NMI_HANDLED;
}

/*
 * crash=stop_late late_at_print=1: CPU 1 is let go while lbr-dump's panic printer looks at it,
 * after the printer's wait for stopping CPUs gave up on it. A kprobe on the helper through
 * which lbr_dump's Rust code tests a cpumask bit (rust_helper_cpumask_test_cpu(cpu, mask)):
 * after the panic notifiers began, at the first test of CPU 1's online bit that follows a test
 * of its present bit (the printer's loop over the other CPUs tests the present bit, then
 * prints the CPU; its wait before tests online bits only). There it lets CPU 1 go and waits
 * until CPU 1 is offline (at most 5 s): CPU 1 leaves the NMI handler above, takes its latched
 * stop NMI (lbr_dump's stop stub captures it), and stop_this_cpu() takes it offline. The test
 * then reads the bit as clear: CPU 1 captured and went offline at the printer's online test.
 */
static int lbr_crash_late_test_pre(struct kprobe *p, struct pt_regs *regs)
{
	const struct cpumask *mask = (const struct cpumask *)regs->si;
	u64 start = ktime_get_mono_fast_ns();

	if ((int)regs->di != 1 || !atomic_read(&late_notified))
		return 0;
	if (mask == cpu_present_mask) {
		atomic_set(&late_present_tested, 1);
		return 0;
	}
	if (mask != cpu_online_mask || !atomic_read(&late_present_tested) ||
	    atomic_xchg(&late_go, 1))
		return 0;
	while (cpu_online(1) && ktime_get_mono_fast_ns() - start < 5 * NSEC_PER_SEC)
		cpu_relax();
	pr_emerg("stop_late: CPU 1 let go at lbr_dump's test of its online bit, %s %llu us later\n",
		 cpu_online(1) ? "still online" : "offline",
		 div_u64(ktime_get_mono_fast_ns() - start, NSEC_PER_USEC));
	return 0;
}
NOKPROBE_SYMBOL(lbr_crash_late_test_pre);

static struct kprobe late_test_kp = {
	.symbol_name = "rust_helper_cpumask_test_cpu",
	.pre_handler = lbr_crash_late_test_pre,
};

static int lbr_crash_late_notify(struct notifier_block *nb, unsigned long val, void *data)
{
	pr_emerg("stop_late: at the panic notifiers CPU 1 is %s\n",
		 cpu_online(1) ? "still online, its stop NMI not taken" : "offline");
	atomic_set(&late_notified, 1);
	return NOTIFY_DONE;
}

static struct notifier_block lbr_crash_late_nb = {
	.notifier_call = lbr_crash_late_notify,
	.priority = 1,	/* before lbr-dump's printer (0) */
};

static int lbr_crash_late_sysrq_c(void *unused)
{
	unsigned long ms;

	atomic_set(&late_armed, 1);
	__apic_send_IPI_mask(cpumask_of(1), NMI_VECTOR);
	for (ms = 0; !atomic_read(&late_in_nmi) && ms < 5000; ms++)
		mdelay(1);
	if (!atomic_read(&late_in_nmi)) {
		atomic_set(&late_armed, 0);	/* no later NMI of CPU 1 is held for it */
		pr_info("stop_late: CPU 1 did not take the NMI\n");
		return 0;
	}
	pr_info("stop_late: CPU 1 is in lbr_crash's NMI handler, sysrq-c on CPU %d\n",
		raw_smp_processor_id());
	/*
	 * With interrupts off, as vpanic() runs, from panic() on: nothing on this CPU may wait for
	 * CPU 1 before the stop. With them on, an interrupt held off by lbr-dump's capture at
	 * panic() entry was taken between panic() and vpanic(), and what then ran here waited in
	 * csd_lock_wait() for CPU 1 until its NMI handler gave up after 20 s (seen in CI: the
	 * emulator counted 84 million branches between the two; CPU 1 then took the stop normally).
	 */
	local_irq_disable();
	handle_sysrq('c');
	return 0;
}

static int lbr_crash_stop_late(void)
{
	struct task_struct *t;
	int r;

	if (!cpu_online(1))
		return -ENODEV;
	if (late_at_print) {
		r = register_kprobe(&late_test_kp);
		if (r) {
			pr_err("stop_late: no kprobe on %s: %d\n", late_test_kp.symbol_name, r);
			return r;
		}
	}
	r = register_nmi_handler(NMI_LOCAL, lbr_crash_late_nmi, 0, "lbr_crash");
	if (r)
		goto out_kprobe;
	atomic_notifier_chain_register(&panic_notifier_list, &lbr_crash_late_nb);
	t = kthread_run_on_cpu(lbr_crash_late_sysrq_c, NULL, 0, "lbr_sysrq/%u");
	if (IS_ERR(t)) {
		atomic_notifier_chain_unregister(&panic_notifier_list, &lbr_crash_late_nb);
		unregister_nmi_handler(NMI_LOCAL, "lbr_crash");
		r = PTR_ERR(t);
		goto out_kprobe;
	}
	return 0;
out_kprobe:
	if (late_at_print)
		unregister_kprobe(&late_test_kp);
	return r;
}

/*
 * crash=stop_stalled: CPU 1's REBOOT_VECTOR stop capture outlasts vpanic()'s wait for it, so
 * that the stop NMI vpanic() sends a second later arrives inside that capture. On its own the
 * guest cannot make a capture that long: the emulator does it (lbr-emu's `stall=1:5301:5302`,
 * tools/lbr-emu/src/stall.rs). CPU 1 spins with interrupts on (lbr_crash_spin_on); CPU 0 marks
 * STALL_ARM in the emulator's log, so that CPU 1's next freeze, the first instruction of the
 * stop capture the REBOOT_VECTOR IPI starts, holds that vCPU; then sysrq-c. The IPI's second
 * runs out with CPU 1 still online, vpanic() sends it the stop NMI (which stays pending on the
 * held vCPU), waits its 10 ms and goes on to the panic notifiers. This module's, which runs
 * before lbr-dump's printer, says whether CPU 1 is still online, marks STALL_RELEASE (CPU 1 goes
 * on, its stop NMI is taken at once, inside the capture) and waits for CPU 1 to go offline (at
 * most 5 s), so that the printer finds CPU 1 stopped, one way or the other.
 */
#define STALL_ARM	5301
#define STALL_RELEASE	5302

/* A marker in lbr-emu's log (tools/lbr-emu README: `cpuid` with EAX "LBMK", ECX the value). */
static void lbr_crash_marker(u32 value)
{
	u32 eax = 0x4c424d4b, ebx, ecx = value, edx;

	asm volatile("cpuid" : "+a" (eax), "=b" (ebx), "+c" (ecx), "=d" (edx) :: "memory");
}

static int lbr_crash_stalled_notify(struct notifier_block *nb, unsigned long val, void *data)
{
	u64 start, spins;

	pr_emerg("stop_stalled: at the panic notifiers CPU 1 is %s\n",
		 cpu_online(1) ? "still online" : "offline");
	lbr_crash_marker(STALL_RELEASE);
	/* By the clock, NMI-safe; 2^32 rounds if it stands still (see lbr_crash_late_nmi). */
	start = ktime_get_mono_fast_ns();
	for (spins = 0; cpu_online(1) && spins < U32_MAX &&
	     ktime_get_mono_fast_ns() - start < 5 * NSEC_PER_SEC; spins++)
		cpu_relax();
	pr_emerg("stop_stalled: released, CPU 1 %s\n",
		 cpu_online(1) ? "still online after 5 s" : "went offline");
	return NOTIFY_DONE;
}

static struct notifier_block lbr_crash_stalled_nb = {
	.notifier_call = lbr_crash_stalled_notify,
	.priority = 1,	/* before lbr-dump's printer (0) */
};

static int lbr_crash_stalled_sysrq_c(void *unused)
{
	unsigned long ms;

	for (ms = 0; !atomic_read(&spinning) && ms < 5000; ms++)
		usleep_range(1000, 2000);
	if (!atomic_read(&spinning)) {
		pr_info("stop_stalled: CPU 1 does not spin\n");
		return 0;
	}
	preempt_disable();
	mdelay(20);	/* the loop has filled CPU 1's recorder */
	pr_info("stop_stalled: CPU 1 spins with interrupts on, sysrq-c on CPU %d\n",
		raw_smp_processor_id());
	lbr_crash_marker(STALL_ARM);
	handle_sysrq('c');
	return 0;
}

static int lbr_crash_stop_stalled(void)
{
	struct task_struct *t;

	if (num_online_cpus() != 2 || !cpu_online(0) || !cpu_online(1))
		return -EINVAL;
	atomic_notifier_chain_register(&panic_notifier_list, &lbr_crash_stalled_nb);
	t = kthread_run_on_cpu(lbr_crash_stalled_sysrq_c, NULL, 0, "lbr_sysrq/%u");
	if (IS_ERR(t)) {
		atomic_notifier_chain_unregister(&panic_notifier_list, &lbr_crash_stalled_nb);
		return PTR_ERR(t);
	}
	t = kthread_run_on_cpu(lbr_crash_spin_on, NULL, 1, "lbr_spin/%u");
	return PTR_ERR_OR_ZERO(t);
}

/* crash=nmi_lockup */
static int stuck_cpu = -1;

static int lbr_crash_nmi(unsigned int type, struct pt_regs *regs)
{
	if (READ_ONCE(stuck_cpu) == raw_smp_processor_id())
		nmi_panic(regs, "lbr_crash: hard LOCKUP (an NMI handler found this CPU stuck)");
	return NMI_DONE;
}

static noinline void lbr_crash_stuck(void)
{
	/* Printed first: with interrupts off, the console would not get the line. */
	pr_info("nmi_lockup: CPU %d stuck with interrupts off\n", raw_smp_processor_id());
	msleep(100);
	local_irq_disable();
	WRITE_ONCE(stuck_cpu, raw_smp_processor_id());
	for (;;)
		lbr_crash_spin_step(&spin_count[raw_smp_processor_id()]);
}

static int lbr_crash_set_stuck(const char *val, const struct kernel_param *kp)
{
	if (strcmp(crash, "nmi_lockup"))
		return -EINVAL;
	lbr_crash_stuck();
	return 0;
}

static const struct kernel_param_ops stuck_ops = { .set = lbr_crash_set_stuck };
module_param_cb(stuck, &stuck_ops, NULL, 0200);

static int lbr_crash_nmi_lockup(void)
{
	return register_nmi_handler(NMI_LOCAL, lbr_crash_nmi, 0, "lbr_crash");
}

static int lbr_crash_idt(void)
{
	static const int vectors[] = { 0, 1, 2, 3, 6, 8, 11, 12, 13, 14, 17, 21, 248 };
	struct desc_ptr idtr;
	gate_desc *idt;
	int i;

	store_idt(&idtr);
	idt = (gate_desc *)idtr.address;
	for (i = 0; i < ARRAY_SIZE(vectors); i++)
		pr_info("gate %d %016lx %ps\n", vectors[i], gate_offset(&idt[vectors[i]]),
			(void *)gate_offset(&idt[vectors[i]]));
	return 0;
}

/* crash=fred: each CPU's IA32_FRED_CONFIG (where events enter with FRED), symbolized. */
static void lbr_crash_fred_here(void *unused)
{
	u64 config;

	if (rdmsrq_safe(MSR_IA32_FRED_CONFIG, &config)) {
		pr_info("fred: cpu=%d unreadable\n", smp_processor_id());
		return;
	}
	pr_info("fred: cpu=%d config=%#llx page=%ps\n", smp_processor_id(), config,
		(void *)(unsigned long)(config & ~0xfffULL));
}

static int lbr_crash_fred(void)
{
	int c;

	for_each_online_cpu(c)
		smp_call_function_single(c, lbr_crash_fred_here, NULL, 1);
	return 0;
}

/*
 * crash=fred_set: CPU cpu='s IA32_FRED_CONFIG := target=, what another owner of FRED's entry
 * (or a kernel that rewrote it) would leave. Only the low bits (redzone, stack level) may
 * change: an entry page other than the one in place would send that CPU's events elsewhere.
 */
static void lbr_crash_fred_set_here(void *ret)
{
	u64 config;

	if (rdmsrq_safe(MSR_IA32_FRED_CONFIG, &config)) {
		*(int *)ret = -ENODEV;
		return;
	}
	if ((config ^ target) & ~0xfffULL) {
		*(int *)ret = -EINVAL;
		return;
	}
	*(int *)ret = wrmsrq_safe(MSR_IA32_FRED_CONFIG, target);
	pr_info("fred_set: cpu=%d config=%#llx -> %#lx = %d\n", smp_processor_id(), config, target,
		*(int *)ret);
}

static int lbr_crash_fred_set(void)
{
	int ret = -ENODEV;

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	smp_call_function_single(cpu, lbr_crash_fred_set_here, &ret, 1);
	if (ret == -EINVAL)
		pr_err("fred_set: %#lx would change CPU %d's entry page, not only its low bits\n",
		       target, cpu);
	return ret;
}

/*
 * crash=fred_other: another owner of FRED's entry, as a tool that hooks it as lbr-dump does:
 * every CPU's IA32_FRED_CONFIG points at this module's entry page (its low bits kept), whose +0
 * and +256 jump on to the kernel's entry points (through static calls set to them, as lbr-dump's
 * page in a module: those entry points have no ENDBR, only a direct jump may reach them). rmmod
 * writes the kernel's value back where this module's is still in place.
 */
#ifdef CONFIG_X86_FRED
DEFINE_STATIC_CALL_NULL(lbr_crash_fred_user, lbr_crash_fred_none);
DEFINE_STATIC_CALL_NULL(lbr_crash_fred_kernel, lbr_crash_fred_none);

asm(".pushsection .text, \"ax\"\n"
	".balign 4096\n"
	".type lbr_crash_fred_page, @function\n"
	"lbr_crash_fred_page:\n"
	"	jmp __SCT__lbr_crash_fred_user\n"
	"	.org lbr_crash_fred_page + 256, 0xcc\n"
	"	jmp __SCT__lbr_crash_fred_kernel\n"
	".size lbr_crash_fred_page, . - lbr_crash_fred_page\n"
	".popsection\n");
STACK_FRAME_NON_STANDARD(lbr_crash_fred_page);
ANNOTATE_NOENDBR_SYM(lbr_crash_fred_page);

static u64 fred_kernel_config;
static bool fred_other_armed;

static void lbr_crash_fred_other_here(void *ret)
{
	u64 config, ours;

	if (rdmsrq_safe(MSR_IA32_FRED_CONFIG, &config) || config != fred_kernel_config) {
		*(int *)ret = -EBUSY;
		return;
	}
	ours = (unsigned long)lbr_crash_fred_page | (config & 0xfffULL);
	wrmsrq(MSR_IA32_FRED_CONFIG, ours);
	pr_info("fred_other: cpu=%d config=%#llx -> %#llx\n", smp_processor_id(), config, ours);
}

static void lbr_crash_fred_other_back_here(void *unused)
{
	u64 config;

	if (!rdmsrq_safe(MSR_IA32_FRED_CONFIG, &config) &&
	    (config & ~0xfffULL) == (unsigned long)lbr_crash_fred_page) {
		wrmsrq(MSR_IA32_FRED_CONFIG, fred_kernel_config);
		pr_info("fred_other: cpu=%d config=%#llx -> %#llx\n", smp_processor_id(), config,
			fred_kernel_config);
	}
}

static int lbr_crash_fred_other(void)
{
	unsigned long page;
	int c, ret = 0;

	if (!cpu_feature_enabled(X86_FEATURE_FRED) || rdmsrq_safe(MSR_IA32_FRED_CONFIG, &fred_kernel_config))
		return -ENODEV;
	page = fred_kernel_config & ~0xfffUL;
	static_call_update(lbr_crash_fred_user, (void (*)(void))page);
	static_call_update(lbr_crash_fred_kernel, (void (*)(void))(page + 256));
	fred_other_armed = true;
	cpus_read_lock();	/* every CPU online now, and no other */
	for_each_online_cpu(c) {
		smp_call_function_single(c, lbr_crash_fred_other_here, &ret, 1);
		if (ret)
			break;
	}
	if (ret) {
		on_each_cpu(lbr_crash_fred_other_back_here, NULL, 1);
		fred_other_armed = false;
	}
	cpus_read_unlock();
	return ret;
}

static void lbr_crash_fred_other_stop(void)
{
	if (fred_other_armed)
		on_each_cpu(lbr_crash_fred_other_back_here, NULL, 1);
}
#else
static int lbr_crash_fred_other(void)
{
	return -ENODEV;
}

static void lbr_crash_fred_other_stop(void)
{
}
#endif

/*
 * crash=fred_filter: Bochs's test filter on IA32_FRED_CONFIG (scripts/bochs-fred-filter.patch),
 * set on CPU cpu= by a WRMSR there, as a hypervisor would start filtering that CPU's accesses.
 */
#define LBR_CRASH_FRED_FILTER	0x400000f0

static void lbr_crash_fred_filter_here(void *ret)
{
	int *err = ret;
	u64 now;

	*err = wrmsrq_safe(LBR_CRASH_FRED_FILTER, filter) ?:
	       rdmsrq_safe(LBR_CRASH_FRED_FILTER, &now);
	if (*err)
		pr_err("fred_filter: cpu=%d: no filter here (%d): a Bochs without scripts/bochs-fred-filter.patch?\n",
		       smp_processor_id(), *err);
	else
		pr_info("fred_filter: cpu=%d filter=%llu\n", smp_processor_id(), now);
}

static int lbr_crash_fred_filter(void)
{
	int ret = -ENODEV;

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu) || filter > 3)
		return -EINVAL;
	smp_call_function_single(cpu, lbr_crash_fred_filter_here, &ret, 1);
	return ret ? -ENODEV : 0;
}

/* crash=fixed_pf: rounds= #PFs on CPU cpu=, each fixed up by the exception table. */
static noinline void lbr_crash_fixed_pf_here(void *faults)
{
	int i, v;

	for (i = 0; i < rounds; i++) {
		__get_kernel_nofault(&v, (int *)READ_ONCE(nowhere), int, fixed);
		continue;
fixed:
		(*(int *)faults)++;
	}
}

static int lbr_crash_fixed_pf(void)
{
	int faults = 0;

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	smp_call_function_single(cpu, lbr_crash_fixed_pf_here, &faults, 1);
	pr_info("fixed_pf: cpu=%d faults=%d\n", cpu, faults);
	return 0;
}

/*
 * crash=nmi_offline: NMIs to the offline CPU cpu=, as late microcode loading sends them to
 * offline CPUs (arch/x86/kernel/cpu/microcode/core.c kick_offline_cpus(); the kernel's NMI entry
 * returns at once on an offline CPU, arch/x86/kernel/nmi.c). With FRED the NMI enters at the
 * page in that CPU's IA32_FRED_CONFIG: one that is gone is a triple fault.
 */
static int lbr_crash_nmi_offline(void)
{
	int i;

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_present(cpu) || cpu_online(cpu))
		return -EINVAL;
	for (i = 0; i < rounds; i++) {
		apic->send_IPI(cpu, NMI_VECTOR);
		mdelay(100);
	}
	pr_info("nmi_offline: cpu=%d sent=%d\n", cpu, rounds);
	return 0;
}

/*
 * crash=free_watch: whether free_pages() frees what lbr_dump's stubs write, as the
 * configuration at capture_cfg= names it at load (struct capture_config, src/layout.rs `cfg`:
 * CPU 0's block at 0x00, the stop stubs' save areas at 0x60; written out here so that this
 * module shares no code with lbr_dump).
 */
static const struct {
	const char *name;
	unsigned int off;
} free_watched[] = { { "cpu0_block", 0x00 }, { "stop_save", 0x60 } };
static unsigned long free_watch_at[ARRAY_SIZE(free_watched)];
static atomic_t free_watch_frees = ATOMIC_INIT(0);
static bool free_watch_on;

static int lbr_crash_free_watch_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long addr = regs->di, end = addr + (PAGE_SIZE << (unsigned int)regs->si);
	int i;

	for (i = 0; i < ARRAY_SIZE(free_watched); i++) {
		if (free_watch_at[i] && free_watch_at[i] >= addr && free_watch_at[i] < end) {
			atomic_inc(&free_watch_frees);
			pr_info("free_watch: freed %s %#lx (pages %#lx, order %lu)\n", free_watched[i].name,
				free_watch_at[i], addr, regs->si);
		}
	}
	return 0;
}

static struct kprobe free_watch_probe = {
	.symbol_name = "free_pages",
	.pre_handler = lbr_crash_free_watch_pre,
};

static int lbr_crash_free_watch(void)
{
	const u64 *cfg = (const u64 *)capture_cfg;
	int i, ret;

	if (!capture_cfg)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(free_watched); i++) {
		free_watch_at[i] = cfg[free_watched[i].off / 8];
		pr_info("free_watch: %s %#lx\n", free_watched[i].name, free_watch_at[i]);
	}
	ret = register_kprobe(&free_watch_probe);
	free_watch_on = !ret;
	return ret;
}

/* crash=msrs, ds_owner, ds_take */
static void lbr_crash_msrs_here(void *unused)
{
	u64 ds, debugctl;

	rdmsrq(MSR_IA32_DS_AREA, ds);
	rdmsrq(MSR_IA32_DEBUGCTLMSR, debugctl);
	pr_info("msrs: cpu=%d ds_area=%#llx debugctl=%#llx\n", smp_processor_id(), ds, debugctl);
}

static int lbr_crash_msrs(void)
{
	int c;

	/* One CPU at a time, in order, so that the lines come out sorted. */
	for_each_online_cpu(c)
		smp_call_function_single(c, lbr_crash_msrs_here, NULL, 1);
	return 0;
}

/* A 64-bit DS save area (SDM vol. 3B "64-Bit Format of the DS Save Area") and its buffer. */
struct lbr_crash_ds {
	u64 bts_base, bts_index, bts_max, bts_threshold, pebs[4];
	u64 buffer[64 * 3];
} __aligned(64);
static struct lbr_crash_ds *ds_mine;
static u64 ds_found[NR_CPUS];
static bool ds_taken;

static void lbr_crash_ds_take_here(void *unused)
{
	struct lbr_crash_ds *d = &ds_mine[smp_processor_id()];

	rdmsrq(MSR_IA32_DS_AREA, ds_found[smp_processor_id()]);
	d->bts_base = d->bts_index = (u64)d->buffer;
	d->bts_max = (u64)d->buffer + sizeof(d->buffer);
	d->bts_threshold = d->bts_max + 24;
	wrmsrq(MSR_IA32_DS_AREA, (u64)d);
}

static atomic64_t ds_stored = ATOMIC64_INIT(0);

static void lbr_crash_ds_give_back_here(void *unused)
{
	struct lbr_crash_ds *d = &ds_mine[smp_processor_id()];
	u64 ds;

	atomic64_add((d->bts_index - d->bts_base) / 24 + (d->buffer[ARRAY_SIZE(d->buffer) - 3] ? 64 : 0),
		     &ds_stored);
	rdmsrq(MSR_IA32_DS_AREA, ds);
	if (ds == (u64)&ds_mine[smp_processor_id()])
		wrmsrq(MSR_IA32_DS_AREA, ds_found[smp_processor_id()]);
}

static int lbr_crash_ds_owner(void)
{
	int c;

	ds_mine = kcalloc(nr_cpu_ids, sizeof(*ds_mine), GFP_KERNEL);
	if (!ds_mine)
		return -ENOMEM;
	on_each_cpu(lbr_crash_ds_take_here, NULL, 1);
	ds_taken = true;
	for_each_online_cpu(c)
		pr_info("ds_owner: cpu=%d found ds_area=%#llx\n", c, ds_found[c]);
	pr_info("ds_owner: IA32_DS_AREA on %u CPUs points at lbr_crash's debug store (CPU 0: %px)\n",
		num_online_cpus(), &ds_mine[0]);
	return 0;
}

static int lbr_crash_perf_reserve(void)
{
	if (!target)
		return -EINVAL;
	((void (*)(void))target)();	/* reserve_ds_buffers() */
	pr_info("perf_reserve: reserve_ds_buffers() called\n");
	return lbr_crash_ds_owner();
}

/*
 * crash=perf_mid_arm. mid_phase: 0 until cpuhp/1 calls rdmsrq_safe_on_cpu(1, IA32_DS_AREA),
 * 1 until its next call of a hooked function, 2 while that call waits for perf, 3 after.
 */
static atomic_t mid_phase = ATOMIC_INIT(0);
static atomic_t mid_perf_done = ATOMIC_INIT(0);
static DECLARE_COMPLETION(mid_go);
static struct task_struct *mid_thread;
static bool mid_hooked;

static bool notrace lbr_crash_mid_context(void)
{
	return in_task() && !strcmp(current->comm, "cpuhp/1");
}

/* The hooked call after the read: perf reserves and takes the debug store on CPU 0 meanwhile. */
static void notrace lbr_crash_mid_hold(unsigned long ip)
{
	u64 until = ktime_get_mono_fast_ns() + 20 * NSEC_PER_SEC;

	if (atomic_cmpxchg(&mid_phase, 1, 2) != 1)
		return;
	complete(&mid_go);
	/*
	 * Interrupts on: perf's IPIs are taken here. cpuhp/1 is bound to CPU 1, and nothing the
	 * thread on CPU 0 does waits for CPU 1 to schedule (the timeout bounds it anyway).
	 */
	while (!atomic_read(&mid_perf_done) && ktime_get_mono_fast_ns() < until)
		cpu_relax();
	atomic_set(&mid_phase, 3);
	pr_info("perf_mid_arm: CPU 1 read IA32_DS_AREA for arming; at its next call (%ps) perf %s\n",
		(void *)ip, atomic_read(&mid_perf_done) ? "had reserved and taken the debug store"
							 : "did not finish within 20 s");
}

static void notrace lbr_crash_mid_read(unsigned long ip, unsigned long parent_ip,
				       struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	if (!lbr_crash_mid_context())
		return;
	if (atomic_read(&mid_phase) == 1) {
		lbr_crash_mid_hold(ip);
		return;
	}
	/* rdmsrq_safe_on_cpu(unsigned int cpu, u32 msr_no, u64 *q) */
	if ((unsigned int)ftrace_regs_get_argument(fregs, 0) == 1 &&
	    (u32)ftrace_regs_get_argument(fregs, 1) == MSR_IA32_DS_AREA)
		atomic_cmpxchg(&mid_phase, 0, 1);
}

static void notrace lbr_crash_mid_next(unsigned long ip, unsigned long parent_ip,
				       struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	if (lbr_crash_mid_context())
		lbr_crash_mid_hold(ip);
}

static struct ftrace_ops mid_read_ops = { .func = lbr_crash_mid_read };
static struct ftrace_ops mid_next_ops = { .func = lbr_crash_mid_next };

static int lbr_crash_mid_perf(void *unused)
{
	while (!kthread_should_stop()) {
		if (!wait_for_completion_timeout(&mid_go, HZ / 10))
			continue;
		lbr_crash_perf_reserve();
		atomic_set(&mid_perf_done, 1);
		break;
	}
	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ / 10);
	return 0;
}

static int lbr_crash_perf_mid_arm(void)
{
	unsigned char rd[] = "rdmsrq_safe_on_cpu", wr[] = "wrmsrq_safe_on_cpu",
		      call[] = "smp_call_function_single";
	int r;

	if (!target)
		return -EINVAL;
	r = ftrace_set_filter(&mid_read_ops, rd, strlen(rd), 1);
	if (!r)
		r = ftrace_set_filter(&mid_next_ops, wr, strlen(wr), 1);
	if (!r)
		r = ftrace_set_filter(&mid_next_ops, call, strlen(call), 0);
	if (r)
		goto free;
	mid_thread = kthread_create(lbr_crash_mid_perf, NULL, "lbr_crash_perf");
	if (IS_ERR(mid_thread)) {
		r = PTR_ERR(mid_thread);
		mid_thread = NULL;
		goto free;
	}
	kthread_bind(mid_thread, 0);
	wake_up_process(mid_thread);
	r = register_ftrace_function(&mid_read_ops);
	if (r)
		goto stop;
	r = register_ftrace_function(&mid_next_ops);
	if (r) {
		unregister_ftrace_function(&mid_read_ops);
		goto stop;
	}
	mid_hooked = true;
	pr_info("perf_mid_arm: waiting for CPU 1 to be armed\n");
	return 0;
stop:
	kthread_stop(mid_thread);
	mid_thread = NULL;
free:
	ftrace_free_filter(&mid_read_ops);
	ftrace_free_filter(&mid_next_ops);
	return r;
}

static void lbr_crash_perf_mid_arm_stop(void)
{
	if (mid_hooked) {
		unregister_ftrace_function(&mid_next_ops);
		unregister_ftrace_function(&mid_read_ops);
		ftrace_free_filter(&mid_read_ops);
		ftrace_free_filter(&mid_next_ops);
	}
	if (mid_thread)
		kthread_stop(mid_thread);
}

/* crash=perf_prepare, perf_tail */
static int lbr_crash_perf_prepare(void)
{
	int c;

	if (!target || !fini)
		return -EINVAL;
	((void (*)(void))target)();		/* reserve_ds_buffers() */
	for_each_online_cpu(c) {
		u64 ds;

		rdmsrq_on_cpu(c, MSR_IA32_DS_AREA, &ds);
		pr_info("perf_prepare: cpu=%d ds_area=%#llx\n", c, ds);
		((void (*)(int))fini)(c);	/* fini_debug_store_on_cpu() */
	}
	pr_info("perf_prepare: reserve_ds_buffers() and fini_debug_store_on_cpu() called\n");
	return 0;
}

static u64 tail_ds[NR_CPUS];

static void lbr_crash_perf_tail_look(void *unused)
{
	int c = smp_processor_id();
	u64 ds, debugctl, *fields, stored = 0;

	rdmsrq(MSR_IA32_DS_AREA, ds);
	rdmsrq(MSR_IA32_DEBUGCTLMSR, debugctl);
	/* The 64-bit DS save area: BTS buffer base, index, absolute maximum, threshold. */
	fields = (u64 *)ds;
	if (ds && ds == tail_ds[c]) {
		u64 *first = (u64 *)fields[0];

		stored = (fields[1] - fields[0]) / 24;
		if (first && (first[0] || first[1]) && !stored)
			stored = 1;	/* wrapped back to the base: at least one */
	}
	pr_info("perf_tail: cpu=%d ds_area=%#llx debugctl=%#llx stored=%llu\n", c, ds, debugctl,
		stored);
}

/* crash=irqs_off_wait */
static atomic_t irqs_off_waiting, irqs_off_release;
static DECLARE_COMPLETION(irqs_off_waited);
static DECLARE_COMPLETION(irqs_off_released);

static int lbr_crash_irqs_off_waiter(void *unused)
{
	u64 start, limit = (u64)tsc_khz * 1000 * giveup, waited;
	bool released;

	local_irq_disable();
	start = rdtsc_ordered();
	atomic_set(&irqs_off_waiting, 1);
	while (!(released = atomic_read(&irqs_off_release)) && rdtsc_ordered() - start < limit)
		cpu_relax();
	waited = rdtsc_ordered() - start;
	local_irq_enable();
	waited = div64_u64(waited, tsc_khz);
	if (released)
		pr_info("irqs_off_wait: CPU %d released after %llu ms\n", raw_smp_processor_id(), waited);
	else
		pr_info("irqs_off_wait: CPU %d gave up after %llu ms: CPU 0 never got to let it go\n",
			raw_smp_processor_id(), waited);
	complete(&irqs_off_waited);
	return 0;
}

static int lbr_crash_irqs_off_releaser(void *unused)
{
	while (!atomic_read(&irqs_off_waiting))
		usleep_range(1000, 2000);
	msleep(3000);
	atomic_set(&irqs_off_release, 1);
	complete(&irqs_off_released);
	return 0;
}

static int lbr_crash_irqs_off_wait(void)
{
	struct task_struct *releaser, *waiter;

	if (num_online_cpus() < 2 || !cpu_online(0) || !cpu_online(1) || !tsc_khz || giveup <= 0)
		return -EINVAL;
	/* Both made before either runs: no thread of this module outlives a failed load. */
	releaser = kthread_create_on_cpu(lbr_crash_irqs_off_releaser, NULL, 0, "lbr_release/%u");
	if (IS_ERR(releaser))
		return PTR_ERR(releaser);
	waiter = kthread_create_on_cpu(lbr_crash_irqs_off_waiter, NULL, 1, "lbr_wait/%u");
	if (IS_ERR(waiter)) {
		kthread_stop(releaser);		/* never woken: its function does not run */
		return PTR_ERR(waiter);
	}
	wake_up_process(releaser);
	wake_up_process(waiter);
	/* Both end before the load does (the releaser too, after a give-up): none outlives it. */
	wait_for_completion(&irqs_off_waited);
	wait_for_completion(&irqs_off_released);
	return 0;
}

static int lbr_crash_perf_tail(void)
{
	int c;

	for_each_online_cpu(c) {
		if (c >= nr_text || !text[c])
			return -EINVAL;
		tail_ds[c] = text[c];
	}
	/* ds.c init_debug_store_on_cpu(), inlined into reserve_ds_buffers() */
	for_each_online_cpu(c)
		wrmsrq_on_cpu(c, MSR_IA32_DS_AREA, tail_ds[c]);
	msleep(100);
	for_each_online_cpu(c)
		smp_call_function_single(c, lbr_crash_perf_tail_look, NULL, 1);
	return 0;
}

static noinline int lbr_crash_ds_take(void)
{
	int r = lbr_crash_ds_owner();

	if (r)
		return r;
	return lbr_crash_gp();
}

/* crash=nmi_lost */
static struct nmiaction nmi_lost_action;
static bool nmi_lost_registered;

static void lbr_crash_nmi_lost_look(const char *step)
{
	u64 debugctl = 0;

	rdmsrq_on_cpu(1, MSR_IA32_DEBUGCTLMSR, &debugctl);
	pr_info("nmi_lost: %s: cpu=1 debugctl=%#llx\n", step, debugctl);
}

static int lbr_crash_nmi_lost(void)
{
	int r;

	if (!target || !handler || num_online_cpus() < 2 || !cpu_online(1))
		return -EINVAL;
	migrate_disable();
	if (smp_processor_id() == 1) {
		/* sysrq-l sends its NMIs to every CPU but this one: run on another. */
		migrate_enable();
		set_cpus_allowed_ptr(current, cpumask_of(0));
		migrate_disable();
	}
	lbr_crash_nmi_lost_look("before");
	/* The lost NMI: lbr_dump's handler is not there when it comes. */
	unregister_nmi_handler(NMI_LOCAL, "lbr_dump");
	handle_sysrq('l');
	lbr_crash_nmi_lost_look("after an NMI that did not reach lbr_dump's handler");
	/* lbr_dump's handler back (register_nmi_handler() is a macro with a static action). */
	INIT_LIST_HEAD(&nmi_lost_action.list);
	nmi_lost_action.handler = (nmi_handler_t)handler;
	nmi_lost_action.name = "lbr_dump";
	r = __register_nmi_handler(NMI_LOCAL, &nmi_lost_action);
	if (r) {
		migrate_enable();
		return r;
	}
	nmi_lost_registered = true;
	r = lbr_crash_perf_reserve();
	if (!r) {
		lbr_crash_nmi_lost_look("after perf reserved the debug store");
		handle_sysrq('l');
		msleep(100);
		lbr_crash_nmi_lost_look("after an NMI that reached lbr_dump's handler");
	}
	migrate_enable();
	return r;
}

/* crash=vlbr */
#define VLBR_DEPTH	32
#define VLBR_FORGED	0xffffffff8badf00dULL
static struct perf_event *vlbr_guest;
static const char *vlbr_step;

static void lbr_crash_vlbr_look_here(void *unused)
{
	u64 debugctl, from, to;
	int i, kernel = 0, forged = 0;

	rdmsrq(MSR_IA32_DEBUGCTLMSR, debugctl);
	for (i = 0; i < VLBR_DEPTH; i++) {
		rdmsrq(MSR_LBR_NHM_FROM + i, from);
		rdmsrq(MSR_LBR_NHM_TO + i, to);
		/* Format 5 (LBR_INFO): FROM and TO are sign-extended addresses. */
		kernel += (from >> 47 & 1) || (to >> 47 & 1);
		forged += from == VLBR_FORGED || to == VLBR_FORGED;
	}
	pr_info("vlbr: %s: cpu=%d debugctl=%#llx kernel=%d forged=%d\n", vlbr_step,
		smp_processor_id(), debugctl, kernel, forged);
}

static void lbr_crash_vlbr_look(const char *step)
{
	vlbr_step = step;
	smp_call_function_single(1, lbr_crash_vlbr_look_here, NULL, 1);
}

static void lbr_crash_vlbr_add_here(void *event)
{
	((void (*)(struct perf_event *))target)(event);	/* intel_pmu_lbr_add() */
}

static void lbr_crash_vlbr_del_here(void *event)
{
	((void (*)(struct perf_event *))fini)(event);	/* intel_pmu_lbr_del() */
}

static void lbr_crash_vlbr_forge_here(void *unused)
{
	int i;

	for (i = 0; i < 4; i++) {
		wrmsrq(MSR_LBR_NHM_FROM + i, VLBR_FORGED);
		wrmsrq(MSR_LBR_NHM_TO + i, VLBR_FORGED);
	}
}

/*
 * guest: KVM's guest LBR event; else a host user's event with the same attributes (exclude_host
 * included), which a user's perf_event_open() can ask for: only KVM's is a kernel counter.
 */
static struct perf_event *lbr_crash_vlbr_event(bool guest, bool exclude_host)
{
	struct perf_event *e = kzalloc(sizeof(*e), GFP_KERNEL);

	if (!e)
		return NULL;
	/* perf_event_create_kernel_counter(): owner TASK_TOMBSTONE; perf_event_open(): the task. */
	e->owner = guest ? (void *)-1L : current;
	/* intel_pmu_create_guest_lbr_event()'s attributes (arch/x86/kvm/vmx/pmu_intel.c). */
	e->attr.type = PERF_TYPE_RAW;
	e->attr.config = INTEL_FIXED_VLBR_EVENT;
	e->attr.sample_type = PERF_SAMPLE_BRANCH_STACK;
	e->attr.pinned = 1;
	e->attr.exclude_host = exclude_host;
	e->attr.branch_sample_type = PERF_SAMPLE_BRANCH_CALL_STACK | PERF_SAMPLE_BRANCH_USER;
	return e;
}

static int lbr_crash_vlbr(void)
{
	struct perf_event *host, *user;

	if (!target || !fini || !cpu_online(1))
		return -EINVAL;
	/* With an architectural PMU, perf would really take these events: not a stand-in. */
	if (boot_cpu_has(X86_FEATURE_ARCH_PERFMON))
		return -ENODEV;
	host = lbr_crash_vlbr_event(false, false);
	user = lbr_crash_vlbr_event(false, true);
	vlbr_guest = lbr_crash_vlbr_event(true, true);
	if (!host || !user || !vlbr_guest) {
		kfree(host);
		kfree(user);
		kfree(vlbr_guest);
		vlbr_guest = NULL;
		return -ENOMEM;
	}
	lbr_crash_vlbr_look("armed");
	smp_call_function_single(1, lbr_crash_vlbr_add_here, host, 1);
	lbr_crash_vlbr_look("host event added");
	smp_call_function_single(1, lbr_crash_vlbr_del_here, host, 1);
	kfree(host);
	smp_call_function_single(1, lbr_crash_vlbr_add_here, user, 1);
	lbr_crash_vlbr_look("user event added");
	smp_call_function_single(1, lbr_crash_vlbr_del_here, user, 1);
	kfree(user);
	smp_call_function_single(1, lbr_crash_vlbr_add_here, vlbr_guest, 1);
	lbr_crash_vlbr_look("lent");
	smp_call_function_single(1, lbr_crash_vlbr_forge_here, NULL, 1);
	lbr_crash_vlbr_look("forged");
	return 0;
}

static void lbr_crash_vlbr_stop(void)
{
	if (!vlbr_guest)
		return;
	smp_call_function_single(1, lbr_crash_vlbr_del_here, vlbr_guest, 1);
	lbr_crash_vlbr_look("given back");
	kfree(vlbr_guest);
}

static int lbr_crash_set_look(const char *val, const struct kernel_param *kp)
{
	if (!vlbr_guest)
		return -EINVAL;
	lbr_crash_vlbr_look("look");
	return 0;
}

static const struct kernel_param_ops look_ops = { .set = lbr_crash_set_look };
module_param_cb(look, &look_ops, NULL, 0200);

/* crash=lbr_addrs */
/* Whether a kernel symbol (vmlinux or a module) holds addr: sprint_symbol() names it. */
static bool lbr_crash_is_symbol(unsigned long a)
{
	char sym[KSYM_SYMBOL_LEN];

	sprint_symbol(sym, a);
	return strncmp(sym, "0x", 2) != 0;
}

static void lbr_crash_lbr_addrs_here(void *unused)
{
	int zero = 0, user = 0, kernel = 0, foreign = 0;
	unsigned int i, side;

	for (i = 0; i < lbr_depth; i++) {
		for (side = 0; side < 2; side++) {
			u64 v;
			unsigned long a;

			if (rdmsrq_safe((side ? lbr_to : lbr_from) + i, &v)) {
				pr_info("lbr_addrs: cpu=%d MSR %#x faults\n", smp_processor_id(),
					(side ? lbr_to : lbr_from) + i);
				return;
			}
			a = (unsigned long)((s64)(v << 16) >> 16);
			if (!a)
				zero++;
			else if (a < TASK_SIZE_MAX)
				user++;
			else if (lbr_crash_is_symbol(a))
				kernel++;
			else if (++foreign <= 8)
				pr_info("lbr_addrs: foreign %#lx\n", a);
		}
	}
	pr_info("lbr_addrs: cpu=%d zero=%d user=%d kernel=%d foreign=%d\n", smp_processor_id(), zero,
		user, kernel, foreign);
}

static int lbr_crash_lbr_addrs(void)
{
	int c;

	if (!lbr_depth || lbr_depth > 64 || !lbr_from || !lbr_to)
		return -EINVAL;
	for_each_online_cpu(c)
		smp_call_function_single(c, lbr_crash_lbr_addrs_here, NULL, 1);
	return 0;
}

/* crash=gates */
static const int gate_vectors[] = { 0, 1, 6, 8, 11, 12, 13, 14, 17, 21 };
static unsigned long gate_kernel[ARRAY_SIZE(gate_vectors)];
static struct task_struct *gate_threads[NR_CPUS];
static atomic64_t gate_reads, gate_changes, gate_torn;
static unsigned long gate_torn_addr;
static int gate_torn_vector = -1;

/* Whether addr is the kernel's handler of gate i or the start of lbr_dump's stub for it. */
static bool lbr_crash_gate_ok(int i, unsigned long addr)
{
	char want[32], sym[KSYM_SYMBOL_LEN];

	if (addr == gate_kernel[i])
		return true;
	if (gate_vectors[i] == 1)
		snprintf(want, sizeof(want), "lbr_dump_rearm_1+0x0/");
	else
		snprintf(want, sizeof(want), "lbr_dump_stub_%d+0x0/", gate_vectors[i]);
	sprint_symbol(sym, addr);
	return !strncmp(sym, want, strlen(want));
}

static int lbr_crash_gate_thread(void *data)
{
	unsigned long last[ARRAY_SIZE(gate_vectors)];
	struct desc_ptr idtr;
	const u32 *idt;
	unsigned long n = 0;
	int i;

	store_idt(&idtr);
	idt = (const u32 *)idtr.address;
	memcpy(last, gate_kernel, sizeof(last));
	while (!kthread_should_stop()) {
		for (i = 0; i < ARRAY_SIZE(gate_vectors); i++) {
			const u32 *g = idt + 4 * gate_vectors[i];
			unsigned long addr;
			u32 e1, e2, e3;

			/*
			 * Not preempted between the loads (as a delivery is not): a reader put
			 * off between them, by the very stopper that holds this CPU while gates
			 * change, would mix a gate before and after the change by itself.
			 */
			preempt_disable();
			e1 = READ_ONCE(g[0]);
			e2 = READ_ONCE(g[1]);
			e3 = READ_ONCE(g[2]);
			preempt_enable();
			addr = ((unsigned long)e3 << 32) | (e2 & 0xffff0000) | (e1 & 0xffff);

			if (addr == last[i])
				continue;
			last[i] = addr;
			atomic64_inc(&gate_changes);
			if (!lbr_crash_gate_ok(i, addr) && atomic64_inc_return(&gate_torn) == 1) {
				gate_torn_vector = gate_vectors[i];
				gate_torn_addr = addr;
			}
		}
		if (++n % 1024 == 0) {
			atomic64_add(1024, &gate_reads);
			/* A quiescent state for RCU-tasks too: arming waits for its grace periods. */
			cond_resched_tasks_rcu_qs();
		}
	}
	return 0;
}

static void lbr_crash_gates_stop(void);

static int lbr_crash_gates(void)
{
	struct desc_ptr idtr;
	gate_desc *idt;
	int i, c;

	store_idt(&idtr);
	idt = (gate_desc *)idtr.address;
	for (i = 0; i < ARRAY_SIZE(gate_vectors); i++)
		gate_kernel[i] = gate_offset(&idt[gate_vectors[i]]);
	for_each_online_cpu(c) {
		struct task_struct *t = kthread_create_on_cpu(lbr_crash_gate_thread, NULL, c, "lbr_gates/%u");

		if (IS_ERR(t)) {
			lbr_crash_gates_stop();
			return PTR_ERR(t);
		}
		gate_threads[c] = t;
		wake_up_process(t);
	}
	pr_info("gates: watching %zu gates on %u CPUs\n", ARRAY_SIZE(gate_vectors), num_online_cpus());
	return 0;
}

static void lbr_crash_gates_stop(void)
{
	int c;

	for_each_possible_cpu(c)
		if (gate_threads[c])
			kthread_stop(gate_threads[c]);
	pr_info("gates: %lld reads of every gate, %lld changes seen, %lld torn\n",
		atomic64_read(&gate_reads), atomic64_read(&gate_changes), atomic64_read(&gate_torn));
	if (gate_torn_vector >= 0)
		pr_info("gates: first torn: vector %d read as %016lx %pS\n", gate_torn_vector,
			gate_torn_addr, (void *)gate_torn_addr);
}

static void lbr_crash_race_unprobe(void);	/* crash=kexec_return race=1 */

static void __exit lbr_crash_exit(void)
{
	if (!strcmp(crash, "perf_mid_arm"))
		lbr_crash_perf_mid_arm_stop();	/* first: its thread may still take the debug store */
	if (ds_taken) {
		/* BTS is not ours to switch off: only the debug store goes back. */
		lbr_crash_msrs();	/* what the other owner left while this one had it */
		on_each_cpu(lbr_crash_ds_give_back_here, NULL, 1);
		pr_info("ds_owner: IA32_DS_AREA given back, %lld BTS records were stored in lbr_crash's buffers\n",
			atomic64_read(&ds_stored));
	}
	kfree(ds_mine);
	if (!strcmp(crash, "gates"))
		lbr_crash_gates_stop();
	lbr_crash_unwatch();
	if (!strcmp(crash, "nmi_lockup"))
		unregister_nmi_handler(NMI_LOCAL, "lbr_crash");
	if (!strcmp(crash, "fred_other"))
		lbr_crash_fred_other_stop();
	if (!strcmp(crash, "stop_late")) {
		atomic_notifier_chain_unregister(&panic_notifier_list, &lbr_crash_late_nb);
		unregister_nmi_handler(NMI_LOCAL, "lbr_crash");
		if (late_at_print)
			unregister_kprobe(&late_test_kp);
	}
	if (!strcmp(crash, "stop_stalled"))
		atomic_notifier_chain_unregister(&panic_notifier_list, &lbr_crash_stalled_nb);
	if (!strcmp(crash, "vlbr"))
		lbr_crash_vlbr_stop();
	/* Still listed (lbr_dump not disarmed; unregistering empties the list head). */
	if (nmi_lost_registered && !list_empty(&nmi_lost_action.list))
		unregister_nmi_handler(NMI_LOCAL, "lbr_dump");
	if (!strcmp(crash, "watch"))
		pr_info("watch: removed, %d breakpoint hits in all\n", atomic_read(&hits));
	lbr_crash_race_unprobe();
	if (free_watch_on) {
		unregister_kprobe(&free_watch_probe);
		pr_info("free_watch: removed, %d frees\n", atomic_read(&free_watch_frees));
	}
}

/*
 * crash=print_rewrite: the #GP of crash=gp, whose snapshot's slot (or kept BTS buffer) this
 * CPU's own captures take while lbr_dump prints it, as a storm of captures on the CPU that took
 * a snapshot would while the oopsing task prints on another. A die notifier that runs before
 * lbr_dump's arms a kprobe on _printk for this CPU; when lbr_dump is about to print its line
 * that starts with at= (default "#1 ": record #0 printed, #1 formatted), the probe takes
 * rounds= kernel #GPs that the kernel fixes up, each captured into the CPU's next slot and
 * BTS buffer: with rounds= the ring's size (4), the last takes the printed one's slot; with 3,
 * its BTS buffer goes back to recording (the pool holds 4, one of them recording).
 */
static struct task_struct *rewriting;
static atomic_t rewrite_cpu = ATOMIC_INIT(-1);

static int lbr_crash_rewrite_pre(struct kprobe *p, struct pt_regs *regs)
{
	static const char ours[] = "\0013lbr_dump: ";
	const char *fmt = (const char *)regs->di, *line = (const char *)regs->si;
	int i;

	/* _printk(fmt, line, ...): lbr_dump's formats all begin with `ours`, then the line. */
	if (atomic_read(&rewrite_cpu) != raw_smp_processor_id() ||
	    strncmp(fmt, ours, sizeof(ours) - 1) || strncmp(line, at, strlen(at)))
		return 0;
	atomic_set(&rewrite_cpu, -1);
	for (i = 0; i < rounds; i++)
		lbr_crash_gp_fixed();
	return 0;
}
NOKPROBE_SYMBOL(lbr_crash_rewrite_pre);

static struct kprobe rewrite_kp = { .symbol_name = "_printk", .pre_handler = lbr_crash_rewrite_pre };

static int lbr_crash_rewrite_on_oops(struct notifier_block *nb, unsigned long val, void *data)
{
	if (val == DIE_OOPS && current == rewriting)
		atomic_set(&rewrite_cpu, raw_smp_processor_id());
	return NOTIFY_DONE;
}
/* lbr_dump's die notifier has priority 0: this one runs first. */
static struct notifier_block rewrite_nb = { .notifier_call = lbr_crash_rewrite_on_oops, .priority = 1 };

static int lbr_crash_print_rewrite(void)
{
	int r;

	r = register_kprobe(&rewrite_kp);
	if (r)
		return r;
	r = register_die_notifier(&rewrite_nb);
	if (r) {
		unregister_kprobe(&rewrite_kp);
		return r;
	}
	rewriting = current;
	pr_info("print_rewrite: %d fixed #GPs at lbr_dump's line \"%s\"\n", rounds, at);
	r = lbr_crash_gp();
	/* (Not reached: the #GP oopses, and the oops ends this task.) */
	unregister_die_notifier(&rewrite_nb);
	unregister_kprobe(&rewrite_kp);
	return r;
}

/*
 * race=1: the stages of the race, in order (kexec_race_stage). CPU cpu= holds at
 * __crash_kexec()'s entry (RACE_HELD: it has taken lbr-dump's claim at crash_kexec() and the
 * kernel's panic_cpu) until CPU 0's panic has passed the panic trampoline at panic() and vpanic()
 * (RACE_PANIC: CPU 0 just before vpanic()'s panic_try_start()), and CPU 0 holds there until
 * crash_kexec() returned on CPU cpu=, past panic_reset() (RACE_RETURNED). Each wait is bounded
 * by the clock (5 s; NMI-safe, see lbr_crash_late_nmi). While CPU cpu= holds panic_cpu, printk()
 * drops CPU 0's messages (a non-panic CPU's): the lines that say how the race went are printed
 * once panic_cpu is given back, by CPU cpu= after crash_kexec() and by CPU 0 after its wait.
 */
enum { RACE_START, RACE_HELD, RACE_PANIC, RACE_RETURNED };
static atomic_t kexec_race_stage = ATOMIC_INIT(RACE_START);
static struct task_struct *kexec_race_thread;	/* the sysrq-c thread on CPU 0 */
static bool kexec_race_probed;
static bool kexec_race_let_go;	/* CPU cpu= held at __crash_kexec() until RACE_PANIC */

/* Waits (5 s at most) until the race has reached `stage`; whether it did. */
static bool lbr_crash_race_wait(int stage)
{
	u64 start = ktime_get_mono_fast_ns(), spins;

	for (spins = 0; atomic_read(&kexec_race_stage) < stage && spins < U32_MAX &&
	     ktime_get_mono_fast_ns() - start < 5 * NSEC_PER_SEC; spins++)
		cpu_relax();
	return atomic_read(&kexec_race_stage) >= stage;
}
NOKPROBE_SYMBOL(lbr_crash_race_wait);

static int lbr_crash_race_hold_pre(struct kprobe *p, struct pt_regs *regs)
{
	if (raw_smp_processor_id() != cpu ||
	    atomic_cmpxchg(&kexec_race_stage, RACE_START, RACE_HELD) != RACE_START)
		return 0;
	kexec_race_let_go = lbr_crash_race_wait(RACE_PANIC);
	return 0;
}
NOKPROBE_SYMBOL(lbr_crash_race_hold_pre);

static struct kprobe race_hold_kp = {
	.symbol_name = "__crash_kexec",
	.pre_handler = lbr_crash_race_hold_pre,
};

static int lbr_crash_race_panic_pre(struct kprobe *p, struct pt_regs *regs)
{
	if (current != kexec_race_thread ||
	    atomic_cmpxchg(&kexec_race_stage, RACE_HELD, RACE_PANIC) != RACE_HELD)
		return 0;
	if (lbr_crash_race_wait(RACE_RETURNED))
		pr_emerg("kexec_return: race: CPU %d held before vpanic()'s panic_try_start() until crash_kexec() returned on CPU %d\n",
			 raw_smp_processor_id(), cpu);
	else
		pr_emerg("kexec_return: race: crash_kexec() did not return on CPU %d in 5 s\n", cpu);
	return 0;
}
NOKPROBE_SYMBOL(lbr_crash_race_panic_pre);

/* Called by vpanic() right before its panic_try_start() (inlined there, so not probed itself). */
static struct kprobe race_panic_kp = {
	.symbol_name = "panic_try_force_cpu",
	.pre_handler = lbr_crash_race_panic_pre,
};

static int lbr_crash_race_sysrq_c(void *unused)
{
	unsigned long ms;

	for (ms = 0; atomic_read(&kexec_race_stage) < RACE_HELD && ms < 5000; ms++)
		usleep_range(1000, 2000);
	if (atomic_read(&kexec_race_stage) < RACE_HELD) {
		pr_info("kexec_return: race: CPU %d not held at __crash_kexec()\n", cpu);
		return 0;
	}
	handle_sysrq('c');
	return 0;
}

/*
 * crash=kexec_return: crash_kexec(NULL) (target=) on CPU cpu=, in a kworker bound there, with
 * preemption off as its callers have it (a BPF program runs with migration off, the UV NMI
 * handler and oops_end() with interrupts off). With no crash kernel loaded it claims the
 * kernel's panic_cpu, finds nothing to boot and gives the claim back (panic_reset()).
 */
static long lbr_crash_kexec_call(void *unused)
{
	long here;

	preempt_disable();
	here = raw_smp_processor_id();
	((void (*)(struct pt_regs *))target)(NULL);	/* crash_kexec(NULL) */
	if (race) {
		/* The panic on CPU 0 waits for this: the caller of work_on_cpu() would be too late. */
		pr_info("kexec_return: crash_kexec(NULL) returned on CPU %ld, %s\n", here,
			kexec_crash_loaded() ? "a crash kernel loaded meanwhile" : "no crash kernel loaded");
		pr_info("kexec_return: race: CPU %ld %s\n", here, kexec_race_let_go ?
			"held at __crash_kexec() until CPU 0's panic reached vpanic()" :
			"not held at __crash_kexec() until CPU 0's panic reached vpanic()");
		atomic_set(&kexec_race_stage, RACE_RETURNED);
	}
	preempt_enable();
	return here;
}

static void lbr_crash_race_unprobe(void)
{
	if (!kexec_race_probed)
		return;
	unregister_kprobe(&race_panic_kp);
	unregister_kprobe(&race_hold_kp);
	kexec_race_probed = false;
}

static int lbr_crash_race_start(void)
{
	struct task_struct *t;
	int r;

	if (cpu == 0 || !cpu_online(0))
		return -EINVAL;
	r = register_kprobe(&race_hold_kp);
	if (r) {
		pr_err("kexec_return: race: no kprobe on %s: %d\n", race_hold_kp.symbol_name, r);
		return r;
	}
	r = register_kprobe(&race_panic_kp);
	if (r) {
		pr_err("kexec_return: race: no kprobe on %s: %d\n", race_panic_kp.symbol_name, r);
		unregister_kprobe(&race_hold_kp);
		return r;
	}
	kexec_race_probed = true;
	t = kthread_create_on_cpu(lbr_crash_race_sysrq_c, NULL, 0, "lbr_sysrq/%u");
	if (IS_ERR(t)) {
		lbr_crash_race_unprobe();
		return PTR_ERR(t);
	}
	kexec_race_thread = t;
	wake_up_process(t);
	return 0;
}

static int lbr_crash_kexec_return(void)
{
	char sym[KSYM_SYMBOL_LEN];
	long here;

	if (!target || cpu < 0 || cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	sprint_symbol(sym, target);
	if (strncmp(sym, "crash_kexec+0x0/", strlen("crash_kexec+0x0/"))) {
		pr_err("kexec_return: target=%#lx is %s, not crash_kexec\n", target, sym);
		return -EINVAL;
	}
	if (kexec_crash_loaded()) {
		pr_err("kexec_return: a crash kernel is loaded: crash_kexec() would boot it\n");
		return -EBUSY;
	}
	if (race) {
		int r = lbr_crash_race_start();

		if (r)
			return r;
	}
	here = work_on_cpu(cpu, lbr_crash_kexec_call, NULL);
	if (!race)
		pr_info("kexec_return: crash_kexec(NULL) returned on CPU %ld, %s\n", here,
			kexec_crash_loaded() ? "a crash kernel loaded meanwhile" : "no crash kernel loaded");
	return 0;
}

/*
 * crash=warn_*: warnings. WARN_ON() is a ud2 (x86), reported by report_bug() and __warn() from
 * the #UD handler, which then goes on after the ud2; each site is a noinline function of its
 * own, so that a test can place the #UD by its symbol. The condition is read with READ_ONCE():
 * the compiler must keep the branch to the ud2.
 */
static int lbr_crash_warn_cond = 1;

static noinline void lbr_crash_warn(void)
{
	WARN_ON(READ_ONCE(lbr_crash_warn_cond));
}

static noinline void lbr_crash_warn_once(void)
{
	WARN_ON_ONCE(READ_ONCE(lbr_crash_warn_cond));
}

static int lbr_crash_warn_once_twice(void)
{
	lbr_crash_warn_once();
	lbr_crash_warn_once();
	pr_info("warn_once: 2 hits\n");
	return 0;
}

/* crash=warn_irq: the warning in an hrtimer's expiry, hard interrupt context. */
static struct hrtimer warn_timer;
static DECLARE_COMPLETION(warn_timer_done);
static int warn_timer_hardirq;

static enum hrtimer_restart lbr_crash_warn_timer(struct hrtimer *t)
{
	warn_timer_hardirq = in_hardirq();
	lbr_crash_warn();
	complete(&warn_timer_done);
	return HRTIMER_NORESTART;
}

static int lbr_crash_warn_irq(void)
{
	hrtimer_setup(&warn_timer, lbr_crash_warn_timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	hrtimer_start(&warn_timer, ms_to_ktime(1), HRTIMER_MODE_REL_HARD);
	wait_for_completion(&warn_timer_done);
	pr_info("warn_irq: hardirq=%d\n", warn_timer_hardirq);
	return 0;
}

/* crash=warn_irqs_off: the warning with interrupts off, in process context. */
static int lbr_crash_warn_irqs_off(void)
{
	unsigned long flags;
	int off;

	local_irq_save(flags);
	off = irqs_disabled();
	lbr_crash_warn();
	local_irq_restore(flags);
	pr_info("warn_irqs_off: irqs_off=%d\n", off);
	return 0;
}

/* crash=warn_storm: rounds= of both warnings, the oops, and as many again inside the oops. */
static struct task_struct *warn_storm_task;

static void lbr_crash_warn_rounds(void)
{
	int i;

	for (i = 0; i < rounds; i++) {
		lbr_crash_warn();
		lbr_crash_warn_once();
	}
}

static int lbr_crash_warn_in_oops(struct notifier_block *nb, unsigned long val, void *data)
{
	if (val == DIE_OOPS && current == warn_storm_task)
		lbr_crash_warn_rounds();
	return NOTIFY_DONE;
}
/* Above lbr_dump's printer (priority 0): the chain calls higher priorities first. */
static struct notifier_block warn_storm_nb = {
	.notifier_call = lbr_crash_warn_in_oops,
	.priority = 1,
};

static int lbr_crash_warn_storm(void)
{
	int r;

	lbr_crash_warn_rounds();
	warn_storm_task = current;
	r = register_die_notifier(&warn_storm_nb);
	if (r)
		return r;
	pr_info("warn_storm: %d rounds, oops next\n", rounds);
	return lbr_crash_gp();
}

/* crash=kfence_corrupt: the free that makes KFENCE check the canary. */
static noinline void lbr_crash_kfence_free(char *p)
{
	kfree(p);
}

static int lbr_crash_kfence_corrupt(void)
{
	unsigned long timeout = jiffies + 10 * HZ;
	char *p = NULL;

	while (time_before(jiffies, timeout)) {
		p = kmalloc(32, GFP_KERNEL);
		if (!p)
			return -ENOMEM;
		if (is_kfence_address(p))
			break;
		kfree(p);
		p = NULL;
		usleep_range(500, 1000);
	}
	pr_info("kfence_corrupt: object=%s\n", p ? "yes" : "no");
	if (!p)
		return 0;
	/* KFENCE puts the object at its page's start or end; the canary fills the rest. */
	if (offset_in_page(p))
		WRITE_ONCE(p[-1], 0x2a);
	else
		WRITE_ONCE(p[32], 0x2a);
	lbr_crash_kfence_free(p);
	return 0;
}

/*
 * The crash types, in one list: X(NAME, FUNCTION, HELP) is crash=NAME, done by FUNCTION (whose
 * return value is the load's) and described by HELP. The list makes both the table that
 * lbr_crash_init() looks NAME up in, in this order, and the crash parameter's description
 * (modinfo). The crashes whose 32 records tests read for pairs in vmlinux come first, jump
 * first (tests/scenarios/decode.py wants the printk of "crash=%s" among them): each name
 * compared before one adds its branches (its strcmp(), the loop's) to the newest records. New
 * names go at the end.
 */
#define LBR_CRASH_TYPES(X) \
	X(jump, lbr_crash_jump, "call through a corrupted pointer to unmapped memory (#PF)") \
	X(de, lbr_crash_de, "division by zero (#DE)") \
	X(gp, lbr_crash_gp, "load through a non-canonical pointer (#GP)") \
	X(owner, lbr_crash_owner, "add DEBUGCTL.FREEZE_LBRS_ON_PMI, then crash as gp") \
	X(idt, lbr_crash_idt, "no crash: print the gates lbr_dump hooks, read from the IDT") \
	X(fred, lbr_crash_fred, "no crash: print each CPU's IA32_FRED_CONFIG (FRED's entry page)") \
	X(fred_set, lbr_crash_fred_set, "no crash: CPU cpu='s IA32_FRED_CONFIG low bits := target='s") \
	X(select, lbr_crash_select, "suppress conditional branches (LBR_SELECT), crash as gp") \
	X(torn, lbr_crash_torn, "re-arm during a capture (capture_cfg=), then crash as gp") \
	X(migrate, lbr_crash_migrate, "a #GP on CPU 1 whose task moves to CPU 0 before the oops") \
	X(watch, lbr_crash_watch, "no crash: breakpoints on what the stubs read (capture_cfg=, group=)") \
	X(nested, lbr_crash_nested, "a #GP whose DIE_GPF notifier hits BUG()") \
	X(retake, lbr_crash_retake, "no crash: add DEBUGCTL.FREEZE_LBRS_ON_PMI on every CPU") \
	X(exec_user_ac, lbr_crash_exec, "jump to a user page with RFLAGS.AC set (#PF)") \
	X(text, lbr_crash_text, "no crash: print the live bytes of the functions at text=") \
	X(panic_thread, lbr_crash_panic_thread, "panic() in a kernel thread on CPU cpu=") \
	X(stack_protector, lbr_crash_stack_protector, "overrun a local array: __stack_chk_fail()") \
	X(stop_all, lbr_crash_stop_all, "sysrq-c while the other CPUs spin") \
	X(nmi_lockup, lbr_crash_nmi_lockup, "no crash yet: a hard-lockup NMI handler (stuck=)") \
	X(gates, lbr_crash_gates, "no crash: read the gates lbr_dump hooks until rmmod") \
	X(msrs, lbr_crash_msrs, "no crash: print IA32_DS_AREA and DEBUGCTL of every CPU") \
	X(ds_owner, lbr_crash_ds_owner, "no crash: point IA32_DS_AREA at a debug store of ours") \
	X(ds_take, lbr_crash_ds_take, "ds_owner while lbr_dump records BTS, then crash as gp") \
	X(perf_reserve, lbr_crash_perf_reserve, "no crash: reserve_ds_buffers(), then ds_owner") \
	X(perf_mid_arm, lbr_crash_perf_mid_arm, "no crash: perf_reserve while CPU 1 arms") \
	X(perf_prepare, lbr_crash_perf_prepare, "no crash: the start of perf's reservation") \
	X(perf_tail, lbr_crash_perf_tail, "no crash: the rest of perf's reservation (text=)") \
	X(irqs_off_wait, lbr_crash_irqs_off_wait, "no crash: CPU 1 waits, interrupts off") \
	X(nmi_lost, lbr_crash_nmi_lost, "no crash: a lost NMI, then perf_reserve") \
	X(vlbr, lbr_crash_vlbr, "no crash: lend CPU 1's LBR to a guest, as KVM does") \
	X(lbr_addrs, lbr_crash_lbr_addrs, "no crash: sort the records' addresses (lbr_from=, ...)") \
	X(write, lbr_crash_write, "no crash: write back what the stubs trust (capture_cfg=)") \
	X(fixed_gp, lbr_crash_fixed_gp, "no crash: #GPs the kernel fixes up (rounds=, msr=)") \
	X(stop_late, lbr_crash_stop_late, "sysrq-c while CPU 1 is in an NMI handler until the panic notifiers") \
	X(stop_stalled, lbr_crash_stop_stalled, "sysrq-c, lbr-emu holding CPU 1's stop capture") \
	X(fred_other, lbr_crash_fred_other, "no crash: every CPU's FRED entry through a page of ours") \
	X(jmp_next, lbr_crash_jmp_next, "a jmp to the next instruction (e9 00000000), then crash as gp") \
	X(print_rewrite, lbr_crash_print_rewrite, "crash as gp; rounds= fixed #GPs while lbr_dump prints it") \
	X(iret_next, lbr_crash_iret_next, "sync_core() (an iretq to the next instruction), then crash as gp") \
	X(fred_filter, lbr_crash_fred_filter, "no crash: Bochs's filter on CPU cpu='s IA32_FRED_CONFIG") \
	X(fixed_pf, lbr_crash_fixed_pf, "no crash: rounds= #PFs the kernel fixes up, on CPU cpu=") \
	X(nmi_offline, lbr_crash_nmi_offline, "no crash: rounds= NMIs to the offline CPU cpu=") \
	X(free_watch, lbr_crash_free_watch, "no crash: say when the stubs' memory is freed (capture_cfg=)") \
	X(kexec_return, lbr_crash_kexec_return, "no crash: crash_kexec(NULL) on CPU cpu= (target=) with no crash kernel; race=1: sysrq-c on CPU 0 meanwhile") \
	X(warn_once, lbr_crash_warn_once_twice, "no crash: a WARN_ON_ONCE() hit twice") \
	X(warn_irq, lbr_crash_warn_irq, "no crash: a WARN_ON() in hard interrupt context") \
	X(warn_irqs_off, lbr_crash_warn_irqs_off, "no crash: a WARN_ON() with interrupts off") \
	X(warn_storm, lbr_crash_warn_storm, "rounds= WARN_ON()s and WARN_ON_ONCE()s, then crash as gp and warn as many again in the oops") \
	X(kfence_corrupt, lbr_crash_kfence_corrupt, "no crash: free a KFENCE object whose canary was written")

struct lbr_crash_type {
	const char *name;
	int (*fn)(void);
	const char *help;
};

#define LBR_CRASH_TYPE(n, f, h) { .name = #n, .fn = f, .help = h },
static const struct lbr_crash_type lbr_crash_types[] __initconst = {
	LBR_CRASH_TYPES(LBR_CRASH_TYPE)
};

#define LBR_CRASH_DESC(name, fn, help) "\n  " #name ": " help
MODULE_PARM_DESC(crash, "what to do, one of:" LBR_CRASH_TYPES(LBR_CRASH_DESC));

static int __init lbr_crash_init(void)
{
	const struct lbr_crash_type *t;

	pr_info("crash=%s\n", crash);
	for (t = lbr_crash_types; t < lbr_crash_types + ARRAY_SIZE(lbr_crash_types); t++)
		if (!strcmp(crash, t->name))
			return t->fn();
	pr_err("unknown crash=\"%s\"; the crash types:\n", crash);
	for (t = lbr_crash_types; t < lbr_crash_types + ARRAY_SIZE(lbr_crash_types); t++)
		pr_err("  %s: %s\n", t->name, t->help);
	return -EINVAL;
}

module_init(lbr_crash_init);
module_exit(lbr_crash_exit);
MODULE_DESCRIPTION("Crashes for lbr-dump's capture tests");
MODULE_LICENSE("GPL");
