// SPDX-License-Identifier: GPL-2.0

//! Pointing IDT gates at the entry stubs, and back.
//!
//! There is one IDT, shared by every CPU (each CPU's IDTR points at a read-only alias of it in
//! its cpu_entry_area), so one store per gate hooks every CPU at once, and CPU hotplug, resume
//! and KVM's host-IDTR reload keep the hook. The IDT is read-only after boot; it is written
//! through a window onto its page (src/window.rs: a read-only vmap() alias that is writable only
//! for the stores that change gates, on the CPU that makes them). Only the first 8 bytes of a gate
//! change (offset bits 15:0 and 31:16): the stub and the original handler must share offset bits
//! 63:32, which is checked.
//!
//! A CPU delivering an exception reads the gate in parts: QEMU's TCG with three 4-byte loads
//! (target/i386/tcg/seg_helper.c do_interrupt64), and the SDM promises no single read. A gate
//! changed between those reads sends the CPU to the low half of one address with the high half
//! of the other: into the middle of some function (CI saw a user-mode #PF land in
//! facility::signature, another in an int3-filled gap of the kernel's text). So gates change
//! only inside stop_machine() ([`with_cpus_held`]): every other CPU spins with interrupts off in
//! its stopper and takes no exception meanwhile, but for these, during the few stores: an NMI
//! (which matters for the NMI gate, switched only with `nmi_freeze`), a fault inside an NMI
//! handler (perf's user call chains can take a #PF), a #DB from a hardware breakpoint in the
//! stopper's loop. The stop trampoline's switch of the NMI and REBOOT_VECTOR gates at a panic
//! stores while the other CPUs run, through a second window of its own that it opens and closes
//! itself (asm/stubs.S LBR_GATE_WINDOW). When stop_machine returns, no
//! CPU is inside a stub: an NMI on a held CPU runs on top of its stopper, which reports done
//! only after it.

use core::ptr;

use kernel::{
    ffi::{c_int, c_void},
    prelude::*,
};

use crate::{ffi, window::PageWindow};

/// Gate type of a 64-bit interrupt gate.
const GATE_INTERRUPT: u64 = 0xe;

/// The handler address held in a gate's two quadwords.
fn gate_offset(q0: u64, q1: u64) -> u64 {
    (q0 & 0xffff) | ((q0 >> 48) << 16) | ((q1 & 0xffff_ffff) << 32)
}

/// The low quadword of a gate, with its offset bits 31:0 replaced by those of `target`.
fn retarget(q0: u64, target: u64) -> u64 {
    (q0 & 0x0000_ffff_ffff_0000) | (target & 0xffff) | (((target >> 16) & 0xffff) << 48)
}

/// Runs `f` on one CPU (the first online one's stopper thread) with interrupts off, while every
/// other online CPU spins with interrupts off (stop_machine); the caller sleeps until it is
/// done. Fails only if stop_machine does (it cannot with CPUs online).
///
/// # Safety
///
/// `f` runs on another CPU, in atomic context: it must not sleep, and everything it touches
/// (raw pointers included) must be valid from any CPU until this returns.
unsafe fn with_cpus_held<F: FnMut()>(mut f: F) -> Result {
    /// # Safety
    ///
    /// `data` must be the `&mut F` that [`with_cpus_held`] passes, alive for the call.
    unsafe extern "C" fn call<F: FnMut()>(data: *mut c_void) -> c_int {
        // SAFETY: the caller's `&mut F`, alive and used by nothing else until stop_machine
        // returns (the caller is blocked in it; its completion orders the closure's writes
        // before the caller's next reads).
        let f = unsafe { &mut *data.cast::<F>() };
        f();
        0
    }
    // SAFETY: `call::<F>` gets back `&mut f`, which outlives stop_machine (it returns only after
    // the callback has run); the caller vouches for what `f` does.
    let r = unsafe { ffi::lbr_dump_stop_machine(call::<F>, ptr::from_mut(&mut f).cast()) };
    if r == 0 {
        Ok(())
    } else {
        Err(Error::from_errno(r))
    }
}

/// Hooked gates. Dropping it restores every original gate, with every other CPU held, so no CPU
/// can still be inside a stub but one in an NMI.
pub(crate) struct Hooks {
    /// The window onto the IDT page through which gates are read, and written with the other
    /// CPUs held.
    idt: PageWindow,
    /// The stop trampoline's window onto the IDT page (asm/stubs.S LBR_GATE_WINDOW), used by
    /// the CPU that claimed a panic and nothing else.
    gate_window: PageWindow,
    /// (vector, original low quadword) of every hooked gate.
    hooked: KVec<(usize, u64)>,
    /// Gates prepared for the stop trampoline ([`Hooks::prepare_stop`]), which switches them
    /// only once a panic has started; restored if they were switched.
    stop: KVec<StopGate>,
}

/// A gate the stop trampoline points at a stop stub (asm/stubs.S): where to write, and what.
#[derive(Clone, Copy)]
pub(crate) struct StopGate {
    /// The vector.
    vector: usize,
    /// The gate's low quadword in the stop trampoline's window.
    pub(crate) slot: *mut u64,
    /// The low quadword that points the gate at the stop stub.
    pub(crate) hook: u64,
    /// The kernel's low quadword.
    orig: u64,
    /// The kernel's handler.
    handler: u64,
}

// SAFETY: besides the windows (Send and Sync), `Hooks` holds addresses within the stop
// trampoline's window (`StopGate::slot`), valid on every CPU, which it never writes through.
unsafe impl Send for Hooks {}
// SAFETY: as above; shared references to `Hooks` write gates only through `PageWindow::write`.
unsafe impl Sync for Hooks {}

/// Why a gate cannot be hooked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GateRefusal {
    /// stop_machine() failed: the gates cannot be switched with the other CPUs held.
    NotHeld,
    /// The kernel installed no handler: the gate is not present, or still holds the early boot
    /// handler (a kernel without CONFIG_X86_CET has no #CP handler). Skipped, not an error.
    Absent,
    /// The gate already points at one of lbr-dump's stubs: hooking it would save a stub as the
    /// "original" handler, and every exception of that vector would then loop in the stub.
    Ours,
    /// The gate is present but not a 64-bit interrupt gate.
    NotInterruptGate,
    /// Stub and handler differ in offset bits 63:32 (the gate is switched with one 8-byte store).
    FarAway,
    /// The vector has no stub.
    NoStub,
    /// Memory for the plan ran out.
    NoMemory,
    /// The gate changed between reading and hooking it.
    Changed,
    /// No window onto the IDT could be mapped.
    NoWindow,
    /// Built in, the stub goes on to the kernel's own entry point (asm/stubs.S LBR_GO_ON), and
    /// the gate holds another handler.
    NotKernelHandler,
    /// FRED delivers the vector, and what was asked has only an IDT stub (the NMI watch).
    Fred,
}

impl GateRefusal {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::Absent => {
                "the kernel installed no handler for it (the gate is not present or still holds the early boot handler)"
            }
            Self::Ours => "its gate already points at an lbr-dump stub",
            Self::NotInterruptGate => "its gate is not a present interrupt gate",
            Self::FarAway => "its stub and the kernel's handler do not share offset bits 63:32",
            Self::NoStub => "it has no stub",
            Self::NoMemory => "out of memory",
            Self::Changed => "its gate changed while lbr-dump was hooking it",
            Self::NoWindow => "no window onto the IDT page could be mapped",
            Self::NotHeld => "stop_machine() failed, and gates change only with the other CPUs held",
            Self::NotKernelHandler => {
                "its gate does not hold the kernel's own entry point (asm_exc_*), where built-in lbr-dump's stub goes on"
            }
            Self::Fred => "FRED delivers it, and the NMI watch is an IDT stub (not supported with FRED)",
        }
    }

    /// The refusal for `lbr_dump_set_handler`'s error code `err` (glue.c).
    fn of_set_handler(err: i32) -> Self {
        if err == -(kernel::bindings::EXDEV as i32) {
            Self::NotKernelHandler
        } else {
            Self::NoStub
        }
    }
}

/// The stub of vector `v`, if it has one.
fn stub(v: usize) -> Option<u64> {
    // PANIC: none, `get` is checked.
    // SAFETY: `lbr_dump_stubs` is an immutable table of 32 entries in asm/stubs.S.
    let table = unsafe { &*ptr::addr_of!(ffi::lbr_dump_stubs) };
    table.get(v).copied().filter(|&s| s != 0)
}

/// The stop stubs (asm/stubs.S), by vector: NMI and REBOOT_VECTOR.
fn stop_stubs() -> [(usize, u64); 2] {
    [
        (NMI_VECTOR, ffi::lbr_dump_stop_nmi as *const () as u64),
        (REBOOT_VECTOR, ffi::lbr_dump_stop_ipi as *const () as u64),
    ]
}

/// Is `handler` one of the stubs that may sit in the NMI or REBOOT_VECTOR gate?
fn is_stop_stub(handler: u64) -> bool {
    stop_stubs().iter().any(|&(_, s)| s == handler)
        || handler == ffi::lbr_dump_nmi_watch as *const () as u64
}

/// arch/x86/include/asm/irq_vectors.h NMI_VECTOR.
pub(crate) const NMI_VECTOR: usize = 0x02;
/// arch/x86/include/asm/irq_vectors.h REBOOT_VECTOR: the IPI smp_send_stop() sends first.
pub(crate) const REBOOT_VECTOR: usize = 0xf8;

/// Is `handler` one of lbr-dump's stubs?
fn is_stub(handler: u64) -> bool {
    (0..32).any(|v| stub(v) == Some(handler)) || is_stop_stub(handler)
}

/// The kernel's early boot handlers (`early_idt_handler_array`, in init text that is freed after
/// boot) as (first, stride): every exception gate starts with one (idt.c `idt_setup_early_handler`)
/// and keeps it unless the kernel installs a handler; vectors 30 and 31 never get one. `None` if
/// gates 30 and 31 do not look like two consecutive early handlers.
fn early_handlers(idt: *const u64) -> Option<(u64, u64)> {
    // SAFETY: `idt` maps the whole IDT page: 256 gates of two u64.
    let gate = |v: usize| unsafe {
        gate_offset(
            ptr::read_volatile(idt.add(2 * v)),
            ptr::read_volatile(idt.add(2 * v + 1)),
        )
    };
    let (g30, g31) = (gate(30), gate(31));
    let stride = g31.wrapping_sub(g30);
    (1..=32)
        .contains(&stride)
        .then(|| (g31 - 31 * stride, stride))
}

/// What hooking asked for: the vectors hooked, and those skipped with the reason.
pub(crate) struct Plan {
    /// (vector, gate low quadword, original handler, stub) of each gate to hook.
    hook: KVec<(usize, u64, u64, u64)>,
    /// Vectors skipped because the kernel has no gate for them.
    pub(crate) skipped: KVec<usize>,
}

impl Hooks {
    /// Reads the gates of `vectors` and decides, changing nothing: a vector whose gate is absent
    /// is skipped; any other problem refuses the whole set (vector, reason).
    pub(crate) fn plan(vectors: &[usize]) -> Result<(Self, Plan), (usize, GateRefusal)> {
        // SAFETY: no preconditions; 0 means no whole, page-aligned IDT.
        let idt = unsafe { ffi::lbr_dump_idt_address() } as usize;
        if idt == 0 {
            return Err((0, GateRefusal::NoWindow));
        }
        let window = || PageWindow::map(idt).map_err(|_| (0, GateRefusal::NoWindow));
        let hooks = Hooks {
            idt: window()?,
            gate_window: window()?,
            hooked: KVec::new(),
            stop: KVec::new(),
        };
        let mut plan = Plan {
            hook: KVec::new(),
            skipped: KVec::new(),
        };
        let alias = hooks.gates();
        let early = early_handlers(alias);
        for &v in vectors {
            if v >= 32 {
                return Err((v, GateRefusal::NoStub));
            }
            // SAFETY: the window maps the whole IDT page: 256 gates of two u64, and `v < 32`.
            let (q0, q1) = unsafe {
                (
                    ptr::read_volatile(alias.add(2 * v)),
                    ptr::read_volatile(alias.add(2 * v + 1)),
                )
            };
            let orig = gate_offset(q0, q1);
            let is_early =
                early.is_some_and(|(first, stride)| (first..first + 32 * stride).contains(&orig));
            if q0 & (1 << 47) == 0 || is_early {
                plan.skipped
                    .push(v, GFP_KERNEL)
                    .map_err(|_| (v, GateRefusal::NoMemory))?;
                continue;
            }
            // After the absent test: built in without CONFIG_X86_CET, #CP has neither a gate nor
            // a stub (asm/stubs.S), and is skipped like the module's.
            let stub = stub(v).ok_or((v, GateRefusal::NoStub))?;
            if (q0 >> 40) & 0xf != GATE_INTERRUPT {
                return Err((v, GateRefusal::NotInterruptGate));
            }
            if is_stub(orig) {
                return Err((v, GateRefusal::Ours));
            }
            if orig >> 32 != stub >> 32 {
                return Err((v, GateRefusal::FarAway));
            }
            plan.hook
                .push((v, q0, orig, stub), GFP_KERNEL)
                .map_err(|_| (v, GateRefusal::NoMemory))?;
        }
        Ok((hooks, plan))
    }

    /// Points the planned gates at their stubs, all at once with every other CPU held
    /// ([`with_cpus_held`]). The caller must have filled the stubs' configuration first; every
    /// vector's static call is pointed at its original handler before. If a gate changed since
    /// the plan was read, none is hooked and that vector is named.
    pub(crate) fn hook(&mut self, plan: &Plan) -> Result<(), (usize, GateRefusal)> {
        self.hooked
            .reserve(plan.hook.len(), GFP_KERNEL)
            .map_err(|_| (0, GateRefusal::NoMemory))?;
        for &(v, _, orig, _) in plan.hook.iter() {
            // SAFETY: a vector with a stub has a static call (glue.c; built in, a check only);
            // text patching, may sleep.
            let err = unsafe { ffi::lbr_dump_set_handler(v as u32, orig as usize) };
            if err != 0 {
                return Err((v, GateRefusal::of_set_handler(err)));
            }
        }
        let (idt, alias) = (&self.idt, self.gates());
        let mut changed = None;
        // SAFETY: the closure only reads gates through the window, valid on every CPU, and
        // stores them through it while it is writable; it reads the plan, which outlives the
        // call.
        unsafe {
            with_cpus_held(|| {
                for &(v, q0, _, _) in plan.hook.iter() {
                    // SAFETY: the window maps the IDT page and `v < 32`.
                    if ptr::read_volatile(alias.add(2 * v)) != q0 {
                        changed = Some(v);
                        return;
                    }
                }
                idt.write(|va| {
                    for &(v, q0, _, stub) in plan.hook.iter() {
                        // SAFETY: one aligned 8-byte store into the IDT page through the
                        // window, writable now, while the other CPUs are held; the stub's way
                        // on (the static call) already leads to the original handler.
                        ptr::write_volatile(va.cast::<u64>().add(2 * v), retarget(q0, stub));
                    }
                })
            })
        }
        .map_err(|_| (0, GateRefusal::NotHeld))?;
        if let Some(v) = changed {
            return Err((v, GateRefusal::Changed));
        }
        for &(v, q0, _, _) in plan.hook.iter() {
            // Cannot fail: the capacity was reserved above.
            let _ = self.hooked.push((v, q0), GFP_ATOMIC);
        }
        Ok(())
    }
}

impl Hooks {
    /// Prepares the stop gates (NMI and REBOOT_VECTOR) for the stop trampoline, changing no
    /// gate: each is checked as a hooked gate is, and its static call (the stop stub's way on) is
    /// pointed at the kernel's handler now, since a panic cannot patch text. Returns each gate
    /// that can be switched, and for each that cannot, the reason (the panic path then captures
    /// no CPU through that gate).
    pub(crate) fn prepare_stop(&mut self) -> [Result<StopGate, GateRefusal>; 2] {
        let alias = self.gates();
        stop_stubs().map(|(v, stub)| {
            // SAFETY: the window maps the whole IDT page: 256 gates of two u64, and `v < 256`.
            let (q0, q1) = unsafe {
                (
                    ptr::read_volatile(alias.add(2 * v)),
                    ptr::read_volatile(alias.add(2 * v + 1)),
                )
            };
            let orig = gate_offset(q0, q1);
            if q0 & (1 << 47) == 0 {
                return Err(GateRefusal::Absent);
            }
            if (q0 >> 40) & 0xf != GATE_INTERRUPT {
                return Err(GateRefusal::NotInterruptGate);
            }
            if is_stub(orig) {
                return Err(GateRefusal::Ours);
            }
            if orig >> 32 != stub >> 32 {
                return Err(GateRefusal::FarAway);
            }
            self.stop
                .reserve(1, GFP_KERNEL)
                .map_err(|_| GateRefusal::NoMemory)?;
            // SAFETY: vectors 2 and 248 have static calls (glue.c; built in, a check only); text
            // patching, may sleep.
            let err = unsafe { ffi::lbr_dump_set_handler(v as u32, orig as usize) };
            if err != 0 {
                return Err(GateRefusal::of_set_handler(err));
            }
            let gate = StopGate {
                vector: v,
                // SAFETY: within the stop trampoline's window onto the IDT page, `v < 256`.
                slot: unsafe { self.gate_window.va().cast::<u64>().add(2 * v) },
                hook: retarget(q0, stub),
                orig: q0,
                handler: orig,
            };
            // Cannot fail: reserved above.
            let _ = self.stop.push(gate, GFP_ATOMIC);
            Ok(gate)
        })
    }
}

impl Hooks {
    /// Points the NMI gate at the NMI watch stub (`nmi_freeze`, asm/stubs.S lbr_dump_nmi_watch),
    /// after [`Hooks::prepare_stop`] prepared the NMI gate (its static call leads to the kernel's
    /// handler; dropping `self` restores the gate). A panic's stop later switches it to the stop
    /// stub.
    pub(crate) fn hook_nmi_watch(&mut self) -> Result<(), GateRefusal> {
        let g = self
            .stop
            .iter()
            .find(|g| g.vector == NMI_VECTOR)
            .copied()
            .ok_or(GateRefusal::NotInterruptGate)?;
        let watch = ffi::lbr_dump_nmi_watch as *const () as u64;
        if g.handler >> 32 != watch >> 32 {
            return Err(GateRefusal::FarAway);
        }
        let (idt, alias) = (&self.idt, self.gates());
        let mut changed = false;
        // SAFETY: the closure reads one gate through the window, valid on every CPU, and stores
        // it through the window while it is writable.
        unsafe {
            with_cpus_held(|| {
                // SAFETY: the NMI gate's low quadword in the window. If it is still the
                // kernel's, one aligned 8-byte store, with every other CPU held (an NMI arriving
                // there is the exposure the module doc names), switches it to the watch stub,
                // whose way on leads to the kernel's handler.
                if ptr::read_volatile(alias.add(2 * NMI_VECTOR)) == g.orig {
                    idt.write(|va| {
                        ptr::write_volatile(
                            va.cast::<u64>().add(2 * NMI_VECTOR),
                            retarget(g.orig, watch),
                        )
                    });
                } else {
                    changed = true;
                }
            })
        }
        .map_err(|_| GateRefusal::NotHeld)?;
        if changed {
            return Err(GateRefusal::Changed);
        }
        Ok(())
    }
}

impl Hooks {
    /// The IDT's gates (two u64 each) through the window: readable at any time.
    fn gates(&self) -> *const u64 {
        self.idt.va().cast_const().cast()
    }

    /// Whether both stop gates were prepared ([`Hooks::prepare_stop`]).
    pub(crate) fn stop_gates_prepared(&self) -> bool {
        self.stop.len() == 2
    }

    /// The stop trampoline's window: its address and its PTE's (address, writable value,
    /// read-only value), for the stubs' configuration.
    pub(crate) fn gate_window(&self) -> (u64, (u64, u64, u64)) {
        (self.gate_window.va() as u64, self.gate_window.pte())
    }

    /// Puts back every gate lbr-dump changed: the hooked ones, and the stop gates if the NMI
    /// watch or a panic switched them. Plain stores through the window: the caller holds the
    /// other CPUs.
    fn restore(&self) {
        let alias = self.gates();
        // SAFETY: every store is one aligned 8-byte store of a gate's original low quadword, in
        // the IDT page (vectors below 256), through the window while it is writable.
        unsafe {
            self.idt.write(|va| {
                let va = va.cast::<u64>();
                for g in self.stop.iter() {
                    if ptr::read_volatile(alias.add(2 * g.vector)) != g.orig {
                        ptr::write_volatile(va.add(2 * g.vector), g.orig);
                    }
                }
                for &(v, q0) in self.hooked.iter() {
                    ptr::write_volatile(va.add(2 * v), q0);
                }
            })
        };
    }

    /// Whether any gate holds something of lbr-dump's.
    fn changed_any(&self) -> bool {
        let alias = self.gates();
        // SAFETY: reads the stop gates' low quadwords through the window (vectors below 256).
        !self.hooked.is_empty()
            || self
                .stop
                .iter()
                .any(|g| unsafe { ptr::read_volatile(alias.add(2 * g.vector)) } != g.orig)
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        // With every other CPU held. When stop_machine returns, every CPU has been through its
        // stopper with interrupts off since the gates changed back (an NMI on a held CPU runs
        // on top of its stopper), so none is still inside a stub.
        if self.changed_any() {
            // SAFETY: `restore` stores through the window, valid on every CPU until dropped
            // after this, and neither sleeps nor allocates.
            if unsafe { with_cpus_held(|| self.restore()) }.is_err() {
                pr_err!(
                    "stop_machine() failed: restoring the IDT gates with the other CPUs running\n"
                );
                self.restore();
            }
        }
        // The windows are unmapped when the fields drop.
    }
}

#[kunit_tests(lbr_dump_idt)]
mod tests {

    /// Every vector of the one list (report.rs VECTORS) has a stub in asm/stubs.S and no other
    /// vector has: the assembly's table agrees with the list.
    #[test]
    fn stub_table_matches_the_vector_list() {
        // SAFETY: `lbr_dump_stubs` is an immutable table of 32 entries in asm/stubs.S.
        let table = unsafe { &*core::ptr::addr_of!(crate::ffi::lbr_dump_stubs) };
        for (v, &stub) in table.iter().enumerate() {
            // #BP (3) has a stub for the report functions' int3s, and is no choosable vector.
            let listed = crate::report::VECTORS.iter().any(|&(l, _)| l as usize == v) || v == 3;
            let has_stub = stub != 0;
            assert_eq!(has_stub, listed);
        }
    }
}
