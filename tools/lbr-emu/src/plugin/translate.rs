// SPDX-License-Identifier: GPL-2.0

//! Instrumentation of each translation block: per block, the taken-branch test and the
//! instruction count; per instruction, the `cost=on` counter, the hooks of the instructions the
//! emulator takes over (`cpuid`, `rdmsr`, `wrmsr`, `lidt`) and, on the block's last one, the
//! inline stores that describe the branch it may take. Callbacks and inline operations are
//! registered in the order QEMU runs them for one instruction.

use std::ffi::c_void;
use std::mem::offset_of;
use std::ptr::null_mut;

use super::msr::{on_cpuid, on_fixup, on_rdmsr, on_rdmsr_last, on_wrmsr};
use super::{emu, on_block, on_lidt, on_reset, Emu, Sb, RESET_VECTOR};
use crate::api::*;
use crate::classify::{classify, Insn as InsnKind, Kind};

pub(super) extern "C" fn on_translate(tb: *mut Tb, _: *mut c_void) {
    // SAFETY: `tb` is the block QEMU passed to this translation callback; the handle does not
    // leave this call.
    let tb = unsafe { TbHandle::new(tb) };
    let e = emu();
    instrument_block(e, tb);
    let n = tb.n_insns();
    for i in 0..n {
        instrument_insn(e, tb, i);
    }
}

/// On entry to the block: a system reset at the reset vector, the taken-branch test (this block
/// is not the last one's fall-through), the rewrite of a `cpuid` or `rdmsr` that ended the last
/// block, and the count of the block's instructions.
fn instrument_block(e: &Emu, tb: TbHandle<'_>) {
    let vaddr = tb.vaddr();
    if vaddr == RESET_VECTOR {
        tb.register_exec_cb(on_reset, CB_NO_REGS, null_mut());
    }
    tb.register_exec_cond_cb(
        on_block,
        CB_NO_REGS,
        COND_NE,
        e.field(offset_of!(Sb, ft)),
        vaddr,
        vaddr as *mut c_void,
    );
    tb.register_exec_cond_cb(
        on_fixup,
        CB_RW_REGS,
        COND_NE,
        e.field(offset_of!(Sb, fixup_pending)),
        0,
        null_mut(),
    );
    tb.register_exec_inline_per_vcpu(
        INLINE_ADD_U64,
        e.field(offset_of!(Sb, insns)),
        tb.n_insns() as u64,
    );
}

/// Instruction `i` of `tb`.
fn instrument_insn(e: &Emu, tb: TbHandle<'_>, i: usize) {
    let last = i + 1 == tb.n_insns(); // it ends the block
    let insn = tb.insn(i);
    if e.cost {
        insn.register_exec_inline_per_vcpu(INLINE_ADD_U64, e.field(offset_of!(Sb, cost_insns)), 1);
    }
    let mut bytes = [0u8; 16];
    let len = insn.data(&mut bytes);
    let pc = insn.vaddr();
    let next = pc + insn.size() as u64;
    let class = classify(&bytes[..len]);
    if i == 0 && !last {
        // A branch the last block ended with is accounted for once this one runs on.
        insn.register_exec_inline_per_vcpu(INLINE_STORE_U64, e.field(offset_of!(Sb, last_kind)), 0);
    }
    hook_emulated(tb, i, insn, class, next, last);
    if last {
        // An unconditional branch is taken even to its own fall-through (`jmp .+5`; sync_core()'s
        // iret_to_self, an `iretq` to the next instruction): the fall-through the next block
        // compares with is one no block starts at, so that entering `next` counts as well.
        let ft = match class {
            InsnKind::Branch(k) if k != Kind::Jcc => NO_BLOCK,
            _ => next,
        };
        store_block_end(e, insn, class, pc, ft);
    }
}

/// If `insn` (instruction `i` of `tb`, of `class`, followed by `next`) is one the emulator takes
/// over, registers its callbacks.
fn hook_emulated(
    tb: TbHandle<'_>,
    i: usize,
    insn: InsnHandle<'_>,
    class: InsnKind,
    next: u64,
    last: bool,
) {
    match class {
        InsnKind::Cpuid => {
            insn.register_exec_cb(on_cpuid, CB_R_REGS, last as usize as *mut c_void);
            if !last {
                tb.insn(i + 1)
                    .register_exec_cb(on_fixup, CB_RW_REGS, null_mut());
            }
        }
        // A `rdmsr` of IA32_MISC_ENABLE is executed by QEMU and rewritten after it.
        InsnKind::Rdmsr if last => {
            insn.register_exec_cb(on_rdmsr_last, CB_RW_REGS_PC, next as *mut c_void)
        }
        InsnKind::Rdmsr => {
            insn.register_exec_cb(on_rdmsr, CB_RW_REGS_PC, next as *mut c_void);
            tb.insn(i + 1)
                .register_exec_cb(on_fixup, CB_RW_REGS, null_mut());
        }
        InsnKind::Wrmsr => insn.register_exec_cb(on_wrmsr, CB_RW_REGS_PC, next as *mut c_void),
        InsnKind::Lidt => insn.register_mem_cb(on_lidt, CB_NO_REGS, MEM_R, null_mut()),
        _ => {}
    }
}

/// A fall-through no block starts at (not a canonical address in any paging mode).
const NO_BLOCK: u64 = 1 << 63;

/// The block's last instruction, at `pc` (`class`), stores inline the fall-through `next` the
/// next block compares its address with, its own address and its branch kind (0 if it is not a
/// branch), for `on_block`.
fn store_block_end(e: &Emu, insn: InsnHandle<'_>, class: InsnKind, pc: u64, next: u64) {
    let kind = match class {
        InsnKind::Branch(k) => k.code(),
        _ => 0,
    };
    insn.register_exec_inline_per_vcpu(INLINE_STORE_U64, e.field(offset_of!(Sb, ft)), next);
    insn.register_exec_inline_per_vcpu(INLINE_STORE_U64, e.field(offset_of!(Sb, last_pc)), pc);
    insn.register_exec_inline_per_vcpu(INLINE_STORE_U64, e.field(offset_of!(Sb, last_kind)), kind);
}
