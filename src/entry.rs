// SPDX-License-Identifier: GPL-2.0

//! The entry backend: how the CPU reaches the stubs, behind the few operations arming needs.
//!
//! Two backends: the IDT ([`crate::idt`]), one table shared by every CPU, whose gates of the
//! captured vectors point at the stubs while armed, and whose NMI and REBOOT_VECTOR gates the
//! panic's stop trampoline switches to the stop stubs; and FRED ([`crate::fred`]), where the
//! kernel delivers every event through one entry page per CPU's IA32_FRED_CONFIG, pointed at
//! lbr-dump's page while armed, whose ring-0 entry itself sends the NMI and REBOOT_VECTOR to the
//! stop stubs once the stop trampoline has run. capture/ calls only these operations.
//!
//! - [`Entry::arm`]: every captured vector enters its stub, on every CPU;
//! - [`Entry::prepare_stop`]: what the stop trampoline needs to send the NMI and REBOOT_VECTOR
//!   to the stop stubs once a panic is claimed (the stubs' configuration holds it);
//! - [`Entry::watch_nmi`]: every NMI enters the NMI watch stub (`nmi_freeze`);
//! - dropping an [`Entry`]: everything as the kernel had it, with no CPU left inside a stub
//!   (but one in an NMI, as for the IDT: src/idt.rs).
//!
//! (Per CPU, the IDT needs nothing: a CPU coming online or resuming loads the same table. FRED
//! keeps its own hotplug state, and [`crate::fred::resume_this_cpu`] runs at resume.)

use kernel::prelude::*;

use crate::fred::{self, FredHooks, FredRefusal};
use crate::idt::{GateRefusal, Hooks, NMI_VECTOR, REBOOT_VECTOR};
use crate::report::vector_name;

/// How the CPU reaches the stubs.
pub(crate) enum Entry {
    /// Through the IDT's gates.
    Idt(Hooks),
    /// Through FRED's entry page (held for its drop: every CPU's IA32_FRED_CONFIG back).
    Fred { _hooks: FredHooks },
}

/// Why the entry of a vector cannot be pointed at its stub.
pub(crate) type Refusal = GateRefusal;

/// Why [`Entry::arm`] refused.
pub(crate) enum ArmRefusal {
    /// A vector, and why its entry cannot be pointed at its stub.
    Vector(usize, Refusal),
    /// The vectors it would hook were not accepted.
    NotAccepted,
    /// FRED's entry page cannot be switched.
    Fred(FredRefusal),
}

/// What the panic path's stop switch needs (the stubs' configuration holds it): for the NMI and
/// REBOOT_VECTOR, the address to store at and the value (0, 0: that vector cannot be
/// switched), and the window to store through (its address, and its PTE's address, writable and
/// read-only values).
pub(crate) struct Stop {
    pub(crate) gates: [(u64, u64); 2],
    pub(crate) window: (u64, (u64, u64, u64)),
}

impl Entry {
    /// Points every vector of `vectors` at its stub on every CPU, skipping (and saying so) the
    /// vectors the kernel has no handler for; refuses, with the vector and the reason, if one
    /// cannot be hooked, and with `None`, changing nothing, if `accept` refuses the vectors that
    /// would be hooked. Returns the entry and those vectors.
    pub(crate) fn arm(
        vectors: &[usize],
        accept: impl Fn(&[usize]) -> bool,
    ) -> Result<(Self, KVec<usize>), ArmRefusal> {
        if fred::active() {
            // Every vector has an entry: the one page.
            let mut hooked = KVec::new();
            for &v in vectors {
                hooked
                    .push(v, GFP_KERNEL)
                    .map_err(|_| ArmRefusal::Vector(v, Refusal::NoMemory))?;
            }
            if !accept(&hooked) {
                return Err(ArmRefusal::NotAccepted);
            }
            let hooks = FredHooks::arm().map_err(ArmRefusal::Fred)?;
            return Ok((Self::Fred { _hooks: hooks }, hooked));
        }
        let (mut hooks, plan) =
            Hooks::plan(vectors).map_err(|(v, why)| ArmRefusal::Vector(v, why))?;
        for &v in plan.skipped.iter() {
            pr_info!(
                "skipping {v}({}): {}\n",
                vector_name(v as u32),
                Refusal::Absent.reason()
            );
        }
        let mut hooked = KVec::new();
        for &v in vectors {
            if !plan.skipped.contains(&v) {
                hooked
                    .push(v, GFP_KERNEL)
                    .map_err(|_| ArmRefusal::Vector(v, Refusal::NoMemory))?;
            }
        }
        if !accept(&hooked) {
            return Err(ArmRefusal::NotAccepted);
        }
        hooks
            .hook(&plan)
            .map_err(|(v, why)| ArmRefusal::Vector(v, why))?;
        Ok((Self::Idt(hooks), hooked))
    }

    /// Prepares the panic's stop switch, changing nothing yet. A vector that cannot be switched
    /// is said in one line (the panic path then captures no CPU through it); the NMI's reason,
    /// if any, is returned.
    pub(crate) fn prepare_stop(&mut self) -> (Stop, Option<Refusal>) {
        let hooks = match self {
            Self::Idt(hooks) => hooks,
            // The ring-0 entry sends the NMI and REBOOT_VECTOR to the stop stubs once the stop
            // trampoline has run (asm/stubs.S lbr_dump_fred_kernel): no gate, no window.
            Self::Fred { .. } => {
                let stop = Stop {
                    gates: [(0, 0); 2],
                    window: (0, (0, 0, 0)),
                };
                return (stop, Some(Refusal::Fred));
            }
        };
        let mut gates = [(0u64, 0u64); 2];
        let mut nmi_refusal = None;
        for (i, r) in hooks.prepare_stop().into_iter().enumerate() {
            match r {
                // PANIC: none, `i < 2`.
                Ok(g) => gates[i] = (g.slot as u64, g.hook),
                Err(why) => {
                    if i == 0 {
                        nmi_refusal = Some(why);
                    }
                    let v = [NMI_VECTOR, REBOOT_VECTOR][i];
                    pr_warn!(
                        "panic path: vector {v} ({}) will not be captured: {}\n",
                        vector_name(v as u32),
                        why.reason()
                    )
                }
            }
        }
        let window = hooks.gate_window();
        (Stop { gates, window }, nmi_refusal)
    }

    /// Sends every NMI to the NMI watch stub (`nmi_freeze`), after [`Entry::prepare_stop`].
    pub(crate) fn watch_nmi(&mut self) -> Result<(), Refusal> {
        match self {
            Self::Idt(hooks) => hooks.hook_nmi_watch(),
            Self::Fred { .. } => Err(Refusal::Fred),
        }
    }

    /// Whether a panic's stop captures the other CPUs through both the NMI and REBOOT_VECTOR
    /// (with the IDT: both stop gates were prepared).
    pub(crate) fn stops_captured(&self) -> bool {
        match self {
            Self::Idt(hooks) => hooks.stop_gates_prepared(),
            Self::Fred { .. } => true,
        }
    }
}
