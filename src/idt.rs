// SPDX-License-Identifier: GPL-2.0

//! Pointing IDT gates at the entry stubs, and back.
//!
//! There is one IDT, shared by every CPU (each CPU's IDTR points at a read-only alias of it in
//! its cpu_entry_area), so one store per gate hooks every CPU at once, and CPU hotplug, resume
//! and KVM's host-IDTR reload keep the hook. The IDT is read-only after boot; it is written
//! through a writable vmap() alias of its page (src/glue.c). Only the first 8 bytes of a gate
//! change (offset bits 15:0 and 31:16), with one aligned 8-byte store, so a CPU taking the
//! exception at that moment sees either the old or the new gate, never a mix: the stub and the
//! original handler must therefore share offset bits 63:32, which is checked.

use core::ptr;

use kernel::{ffi::c_void, prelude::*};

use crate::ffi;

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

/// Hooked gates. Dropping it restores every original gate and waits until no CPU can still be
/// inside a stub.
pub(crate) struct Hooks {
    /// Writable alias of gate 0 (two u64 per gate).
    alias: *mut u64,
    /// (vector, original low quadword) of every hooked gate.
    hooked: KVec<(usize, u64)>,
}

// SAFETY: `Hooks` only holds the address of a vmap() alias that is valid on every CPU, and is
// mutated only through `&mut self` / `Drop`.
unsafe impl Send for Hooks {}
// SAFETY: shared references to `Hooks` give no access to the alias.
unsafe impl Sync for Hooks {}

impl Hooks {
    /// Points the gates of `vectors` at their stubs. The caller must have filled the stubs'
    /// configuration first; each original handler is saved in `lbr_dump_orig` before its gate
    /// changes.
    pub(crate) fn hook(vectors: &[usize]) -> Result<Self, &'static str> {
        // SAFETY: `lbr_dump_idt_alias` has no preconditions; NULL means failure.
        let alias = unsafe { ffi::lbr_dump_idt_alias() }.cast::<u64>();
        if alias.is_null() {
            return Err("cannot map a writable alias of the IDT");
        }
        let mut hooks = Hooks {
            alias,
            hooked: KVec::new(),
        };
        // Check every vector before changing any gate.
        let mut plan = KVec::new();
        for &v in vectors {
            // SAFETY: `lbr_dump_stubs` is an immutable table of 32 entries in asm/stubs.S.
            let stub = unsafe { ptr::addr_of!(ffi::lbr_dump_stubs).cast::<u64>().add(v % 32).read() };
            if v >= 32 || stub == 0 {
                return Err("a requested vector has no stub");
            }
            // SAFETY: the alias maps the whole IDT page: 256 gates of two u64.
            let (q0, q1) = unsafe {
                (
                    ptr::read_volatile(alias.add(2 * v)),
                    ptr::read_volatile(alias.add(2 * v + 1)),
                )
            };
            if q0 & (1 << 47) == 0 || (q0 >> 40) & 0xf != GATE_INTERRUPT {
                return Err("an IDT gate to hook is not a present interrupt gate");
            }
            let orig = gate_offset(q0, q1);
            if orig >> 32 != stub >> 32 {
                return Err("a stub and its original handler do not share offset bits 63:32");
            }
            plan.push((v, q0, orig, stub), GFP_KERNEL)
                .map_err(|_| "out of memory")?;
            hooks
                .hooked
                .reserve(1, GFP_KERNEL)
                .map_err(|_| "out of memory")?;
        }
        for &(v, q0, orig, stub) in plan.iter() {
            // SAFETY: `lbr_dump_orig` has 32 entries and `v < 32`; no gate points at the stub
            // that reads this slot yet, so the write cannot race a reader.
            unsafe { ptr::addr_of_mut!(ffi::lbr_dump_orig).cast::<u64>().add(v).write_volatile(orig) };
            // SAFETY: one aligned 8-byte store into the IDT page through its writable alias: the
            // gate switches atomically from the original handler to the stub.
            unsafe { ptr::write_volatile(alias.add(2 * v), retarget(q0, stub)) };
            // Cannot fail: the capacity was reserved above.
            let _ = hooks.hooked.push((v, q0), GFP_ATOMIC);
        }
        Ok(hooks)
    }
}

/// Does nothing: run on every CPU with IRQs off, its completion proves that no CPU is still
/// inside a stub (the stubs run with IRQs off).
unsafe extern "C" fn sync(_info: *mut c_void) {}

impl Drop for Hooks {
    fn drop(&mut self) {
        for &(v, q0) in self.hooked.iter() {
            // SAFETY: restores the exact original low quadword of a gate we changed, with one
            // aligned 8-byte store through the alias (valid until unaliased below).
            unsafe { ptr::write_volatile(self.alias.add(2 * v), q0) };
        }
        // SAFETY: `sync` is a valid IPI callback that ignores its argument.
        unsafe { ffi::lbr_dump_on_each_cpu(sync, ptr::null_mut()) };
        // SAFETY: `alias` came from `lbr_dump_idt_alias` and is not used after this.
        unsafe { ffi::lbr_dump_idt_unalias(self.alias.cast()) };
    }
}
