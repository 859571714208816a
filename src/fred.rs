// SPDX-License-Identifier: GPL-2.0

//! The FRED entry backend: every CPU's IA32_FRED_CONFIG pointed at lbr-dump's entry page, and
//! back.
//!
//! With FRED (Flexible Return and Event Delivery) active, the kernel delivers every event
//! through the entry page whose address is in each CPU's IA32_FRED_CONFIG
//! (`cpu_init_fred_exceptions()`, arch/x86/kernel/fred.c: `asm_fred_entrypoint_user` with the
//! redzone and interrupt stack level in the low bits), and the IDT is invalid. Arming writes, on
//! each CPU, the same value with lbr-dump's page (asm/stubs.S `lbr_dump_fred_user`: ring-3 events
//! jump straight on; its +256, `lbr_dump_fred_kernel`: ring-0 events are tested and captured as
//! the IDT stubs capture them), from a CPU-hotplug callback, so that a CPU coming online later
//! (whose bring-up rewrites the kernel's value) and the boot CPU after resume (which rewrites it
//! too: [`resume_this_cpu`]) get it as well; disarming writes the kernel's value back on every
//! CPU where lbr-dump's is still in place. The page's jumps to the kernel's entry points are
//! direct: in a module, static calls that arming points at them (src/glue.c).
//!
//! The MSR is per CPU and written on that CPU, by that CPU: no other CPU's delivery can see half
//! of a change (unlike an IDT gate), and a CPU is never inside the page while its own hotplug
//! callback runs, so once every CPU has written the kernel's value back no CPU is left inside
//! the page.
//!
//! A CPU where the kernel's value cannot be written back (the WRMSR faults or does not stay, as
//! under a hypervisor that filters it; or the MSR cannot be read, which counts as lbr-dump's
//! value still there) keeps entering at the page, offline too: an offline CPU still takes NMIs
//! through it (late microcode loading sends them). Disarming then leaves the page for good
//! ([`kept`]): the module stays loaded, capture/ makes the stubs' configuration inert and keeps
//! the memory they reach, and arming is refused until reboot (Documentation/lbr-dump/design.rst
//! "FRED").

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kernel::{bindings, cpu::CpuId, prelude::*};

use crate::ffi;
use crate::probe::{read_msr, write_msr, write_msr_here};

/// IA32_FRED_CONFIG (arch/x86/include/asm/msr-index.h MSR_IA32_FRED_CONFIG).
pub(crate) const FRED_CONFIG: u32 = 0x1d4;

/// Bits 11:0 of IA32_FRED_CONFIG: the redzone, the interrupt stack level (and reserved bits);
/// the rest is the entry page.
const LOW: u64 = 0xfff;

/// The kernel's IA32_FRED_CONFIG value, and lbr-dump's (the same low bits, lbr-dump's page):
/// what the hotplug and resume callbacks write. Set before the callbacks are registered, while
/// no callback runs (the state lock). Disarming clears OURS only: every user reads OURS first
/// and does nothing while it is 0; KERNEL keeps the last armed value.
static KERNEL: AtomicU64 = AtomicU64::new(0);
static OURS: AtomicU64 = AtomicU64::new(0);
/// Set while arming runs the online callback on every online CPU: a CPU whose value is not the
/// kernel's then refuses arming; later, it only stays out (and says so).
static ARMING: AtomicBool = AtomicBool::new(false);
/// Set from the start of disarming: nothing points a CPU at the page any more (a resume
/// meanwhile leaves the kernel's value), while `cpu_offline` still recognises lbr-dump's.
static DISARMING: AtomicBool = AtomicBool::new(false);
/// Set, until reboot, when disarming left a CPU at the page: see [`kept`].
static KEPT: AtomicBool = AtomicBool::new(false);

/// The CPUs that may hold lbr-dump's value, bit N for CPU N: set before lbr-dump's value is
/// written on a CPU (or found there), cleared once that CPU was read holding another value. A
/// CPU whose MSR cannot be read stays set: its value counts as lbr-dump's. Cleared whole when
/// arming starts (no CPU holds lbr-dump's value then: arming is refused while one may, [`kept`]).
/// Each bit is changed by the CPU's own callbacks or, with the callbacks removed, by disarming.
static HELD: [AtomicU64; HELD_WORDS] = [const { AtomicU64::new(0) }; HELD_WORDS];
const HELD_WORDS: usize = (bindings::NR_CPUS as usize).div_ceil(64);

/// Marks (`true`) or clears CPU `cpu` in [`HELD`].
fn set_held(cpu: u32, on: bool) {
    let (word, bit) = ((cpu / 64) as usize, 1u64 << (cpu % 64));
    if let Some(w) = HELD.get(word) {
        if on {
            w.fetch_or(bit, Ordering::SeqCst);
        } else {
            w.fetch_and(!bit, Ordering::SeqCst);
        }
    }
}

/// Whether CPU `cpu` may hold lbr-dump's value ([`HELD`]).
fn held(cpu: u32) -> bool {
    HELD.get((cpu / 64) as usize)
        .is_some_and(|w| w.load(Ordering::SeqCst) & 1 << (cpu % 64) != 0)
}

/// Whether disarming left a CPU entering at lbr-dump's page (its IA32_FRED_CONFIG could not be
/// given the kernel's value back, or could not be read): the page stays, and with it the module
/// (pinned), the stubs' configuration, which capture/ makes inert, and the memory it names,
/// which capture/ does not free; arming is refused until reboot, since it would rewrite the
/// configuration that CPU reads.
pub(crate) fn kept() -> bool {
    KEPT.load(Ordering::SeqCst)
}

/// IA32_FRED_CONFIG on this CPU (callbacks run on the CPU they are for, some with interrupts
/// off: no cross-CPU call).
fn read_here() -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: reads an MSR on this CPU with the exception-safe accessor into a live local.
    (unsafe { ffi::lbr_dump_rdmsr_safe(FRED_CONFIG, &mut v) } == 0).then_some(v)
}

/// Whether the kernel delivers events with FRED (then the IDT is not used).
pub(crate) fn active() -> bool {
    // SAFETY: no preconditions.
    unsafe { ffi::lbr_dump_fred_active() }
}

/// Why the FRED backend cannot arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FredRefusal {
    /// IA32_FRED_CONFIG cannot be read on the arming CPU.
    Unreadable,
    /// Its entry page is not the kernel's `asm_fred_entrypoint_user`.
    NotKernelPage,
    /// A CPU's IA32_FRED_CONFIG does not hold the value the kernel wrote (another owner's page,
    /// other low bits).
    Changed,
    /// The static calls to the kernel's entry points cannot be set.
    StaticCall,
    /// The CPU-hotplug state cannot be registered.
    Hotplug,
}

impl FredRefusal {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::Unreadable => "FRED: IA32_FRED_CONFIG cannot be read",
            Self::NotKernelPage => {
                "FRED: IA32_FRED_CONFIG does not point at the kernel's entry page (asm_fred_entrypoint_user)"
            }
            Self::Changed => {
                "FRED: a CPU's IA32_FRED_CONFIG does not hold the value the kernel wrote (see above)"
            }
            Self::StaticCall => "FRED: the jumps to the kernel's entry points cannot be set",
            Self::Hotplug => "FRED: the CPU-hotplug state cannot be registered",
        }
    }
}

/// Every CPU's IA32_FRED_CONFIG pointed at lbr-dump's entry page. Dropping it writes the
/// kernel's value back on every CPU (the hotplug state's removal runs [`cpu_offline`] on each,
/// then [`release`] tries once more where it did not stay), or leaves the page for good
/// ([`kept`]).
pub(crate) struct FredHooks {
    state: bindings::cpuhp_state,
}

impl FredHooks {
    /// Points every online CPU, and every CPU that comes online, at lbr-dump's page. The
    /// stubs' configuration is written already (their vectors, `configure_fred`).
    pub(crate) fn arm() -> Result<Self, FredRefusal> {
        let held = read_msr(CpuId::current(), FRED_CONFIG).map_err(|_| FredRefusal::Unreadable)?;
        let page = held & !LOW;
        // SAFETY: no preconditions; `page` is only compared and, in a module, becomes the
        // target of the static calls' direct jumps (and its +256) once it was found to be the
        // kernel's FRED entry page.
        match unsafe { ffi::lbr_dump_fred_set_kernel_page(page as kernel::ffi::c_ulong) } {
            0 => {}
            e if e == -(bindings::EXDEV as i32) => return Err(FredRefusal::NotKernelPage),
            _ => return Err(FredRefusal::StaticCall),
        }
        // The kernel's value is the one cpu_init_fred_exceptions() writes on every CPU: its
        // page (checked above) with the low bits of its headers, not this CPU's value, which
        // another owner may have changed (every CPU holding the kernel's would then be refused
        // as the odd one out).
        // SAFETY: no preconditions.
        let kernel = page | unsafe { ffi::lbr_dump_fred_config_low() } as u64;
        // SAFETY: no preconditions.
        let ours = unsafe { ffi::lbr_dump_fred_page() } as u64;
        if ours == 0 || ours & LOW != 0 {
            // Not built with CONFIG_X86_FRED, or the page is not aligned (asm/stubs.S aligns it).
            return Err(FredRefusal::StaticCall);
        }
        DISARMING.store(false, Ordering::Relaxed);
        for w in HELD.iter() {
            w.store(0, Ordering::SeqCst);
        }
        KERNEL.store(kernel, Ordering::Relaxed);
        OURS.store(ours | (kernel & LOW), Ordering::Relaxed);
        ARMING.store(true, Ordering::Relaxed);
        // SAFETY: the name is a static string; the callbacks are valid for the module's lifetime
        // and read only the atomics set above; removed on drop.
        let st = unsafe {
            bindings::__cpuhp_setup_state(
                bindings::cpuhp_state_CPUHP_AP_ONLINE_DYN,
                c"lbr_dump:fred".as_char_ptr(),
                true,
                Some(cpu_online),
                Some(cpu_offline),
                false,
            )
        };
        ARMING.store(false, Ordering::Relaxed);
        if st < 0 {
            // The CPUs armed before the refusal were given the kernel's value back (the
            // hotplug core ran `cpu_offline` on each): as when disarming, unless one is left.
            DISARMING.store(true, Ordering::Relaxed);
            release("after arming was refused");
            return Err(if st == -(bindings::EBUSY as i32) {
                FredRefusal::Changed
            } else {
                FredRefusal::Hotplug
            });
        }
        Ok(FredHooks {
            state: st as bindings::cpuhp_state,
        })
    }
}

impl Drop for FredHooks {
    fn drop(&mut self) {
        DISARMING.store(true, Ordering::Relaxed);
        // SAFETY: the dynamic state `arm` registered; runs `cpu_offline` on every online CPU
        // (on that CPU) and waits for running callbacks.
        unsafe { bindings::__cpuhp_remove_state(self.state, true) };
        release("after disarming");
    }
}

/// Why a CPU is left entering at lbr-dump's page.
enum Left {
    /// Its IA32_FRED_CONFIG still holds lbr-dump's value after one more write of the kernel's.
    Holds,
    /// Its IA32_FRED_CONFIG cannot be read: taken as holding lbr-dump's value.
    Unreadable,
    /// It went offline holding lbr-dump's value (or unreadable): no write reaches it, and it
    /// still takes NMIs through the page.
    Offline,
}

/// Once no callback runs (the hotplug state removed, or never registered): every CPU that may
/// still hold lbr-dump's value ([`HELD`]) gets one more write of the kernel's, from here, and is
/// read back. If one is left entering at the page (`when`: after what), the page stays for good
/// ([`kept`]): the module is pinned, or, if it is being unloaded (rmmod, which cannot be refused
/// and would free the page), this stops here with the reason rather than crash later at a freed
/// address.
fn release(when: &str) {
    let (kernel, ours) = (KERNEL.load(Ordering::Relaxed), OURS.load(Ordering::Relaxed));
    let mut left = 0;
    for cpu in (0..kernel::cpu::nr_cpu_ids()).filter(|&c| held(c)) {
        let Some(id) = CpuId::from_u32(cpu) else {
            continue;
        };
        let read = || match read_msr(id, FRED_CONFIG) {
            Ok(v) if v != ours => None,
            Ok(_) => Some(Left::Holds),
            // rdmsrq_safe_on_cpu(): -ENXIO, the CPU is not online.
            Err(e) if e.cpu_offline() => Some(Left::Offline),
            Err(_) => Some(Left::Unreadable),
        };
        let (why, wrote) = match read() {
            None => (None, true),
            Some(Left::Offline) => (Some(Left::Offline), false),
            Some(_) => {
                let wrote = write_msr(id, FRED_CONFIG, kernel).is_ok();
                (read(), wrote)
            }
        };
        let Some(why) = why else {
            set_held(cpu, false);
            continue;
        };
        left += 1;
        pr_err!(
            "FRED: CPU {cpu} still enters at lbr-dump's page {when}: {}\n",
            match (why, wrote) {
                (Left::Holds, true) => "the kernel's IA32_FRED_CONFIG written back does not stay",
                (Left::Holds, false) => "writing the kernel's IA32_FRED_CONFIG back faults",
                (Left::Unreadable, _) => "its IA32_FRED_CONFIG cannot be read, taken as lbr-dump's",
                (Left::Offline, _) =>
                    "it went offline so, and takes NMIs there (late microcode loading sends them)",
            }
        );
    }
    if left == 0 {
        OURS.store(0, Ordering::Relaxed);
        return;
    }
    // SAFETY: no preconditions.
    if !unsafe { ffi::lbr_dump_pin() } {
        // The module is being unloaded: it cannot stay, and its page is about to be freed while
        // these CPUs deliver events through it.
        panic!(
            "lbr_dump: FRED: {left} CPU(s) still enter at lbr-dump's page while the module unloads"
        );
    }
    KEPT.store(true, Ordering::SeqCst);
    pr_err!(
        "FRED: the page stays for {left} CPU(s), inert, with the memory its stubs reach: the module stays loaded and arming is refused until reboot\n"
    );
}

/// Writes lbr-dump's value on this CPU if the kernel's is there. `Err(value)` if another value
/// is there (and not lbr-dump's).
fn point_here() -> Result<(), u64> {
    let (kernel, ours) = (KERNEL.load(Ordering::Relaxed), OURS.load(Ordering::Relaxed));
    if ours == 0 || DISARMING.load(Ordering::Relaxed) {
        return Ok(());
    }
    let cpu = CpuId::current().as_u32();
    match read_here() {
        Some(v) if v == kernel => {
            // Before the write: from then on this CPU may enter at the page.
            set_held(cpu, true);
            write_msr_here(FRED_CONFIG, ours).map_err(|_| v)
        }
        Some(v) if v == ours => {
            set_held(cpu, true);
            Ok(())
        }
        Some(v) => Err(v),
        None => Err(0),
    }
}

/// CPU coming online (and every online CPU at arming; runs on that CPU, after the kernel's
/// bring-up wrote its IA32_FRED_CONFIG).
///
/// # Safety
///
/// Called only by the CPU-hotplug core for the state [`FredHooks::arm`] registered.
unsafe extern "C" fn cpu_online(cpu: kernel::ffi::c_uint) -> kernel::ffi::c_int {
    match point_here() {
        Ok(()) => 0,
        Err(v) if ARMING.load(Ordering::Relaxed) => {
            pr_err!(
                "refusing to arm: FRED: CPU {cpu}'s IA32_FRED_CONFIG is {v:#x}, not the kernel's {:#x}\n",
                KERNEL.load(Ordering::Relaxed)
            );
            -(bindings::EBUSY as i32)
        }
        Err(v) => {
            pr_warn!(
                "FRED: CPU {cpu}'s IA32_FRED_CONFIG is {v:#x}, not the kernel's: it is not captured\n"
            );
            0
        }
    }
}

/// CPU going offline (and every online CPU when disarming; runs on that CPU): the kernel's
/// value back where lbr-dump's is in place, or may be (the MSR cannot be read), and read back.
/// A CPU left at the page (it then goes offline so) stays in [`HELD`], for disarming to find.
///
/// # Safety
///
/// As [`cpu_online`].
unsafe extern "C" fn cpu_offline(cpu: kernel::ffi::c_uint) -> kernel::ffi::c_int {
    let (kernel, ours) = (KERNEL.load(Ordering::Relaxed), OURS.load(Ordering::Relaxed));
    if ours == 0 || !held(cpu) {
        return 0;
    }
    let gone = |v: Option<u64>| v.is_some_and(|v| v != ours);
    if !gone(read_here()) {
        let wrote = write_msr_here(FRED_CONFIG, kernel);
        let now = read_here();
        if !gone(now) {
            match (wrote, now) {
                (Err(e), _) => pr_err!(
                    "FRED: CPU {cpu}: the kernel's IA32_FRED_CONFIG cannot be written back: {}\n",
                    format_args!("{e}")
                ),
                (Ok(()), Some(_)) => pr_err!(
                    "FRED: CPU {cpu}: the kernel's IA32_FRED_CONFIG written back does not stay\n"
                ),
                (Ok(()), None) => pr_err!(
                    "FRED: CPU {cpu}: IA32_FRED_CONFIG cannot be read: taken as lbr-dump's\n"
                ),
            }
            return 0;
        }
    }
    set_held(cpu, false);
    0
}

/// Resume from suspend (the boot CPU, IRQs off; src/capture/cpu.rs `resume`): the kernel wrote
/// its value back while restoring the CPU; lbr-dump's again, if armed.
pub(crate) fn resume_this_cpu() {
    if let Err(v) = point_here() {
        pr_warn!("FRED: resume: IA32_FRED_CONFIG is {v:#x}, not the kernel's: the boot CPU is not captured\n");
    }
}
