// SPDX-License-Identifier: GPL-2.0

//! MSR and CPUID emulation: the callbacks that read and write the guest's registers.
//!
//! `rdmsr`/`wrmsr` of an emulated MSR are emulated whole: a callback before the instruction does
//! the access on the emulated recorder, writes RAX/RDX for a read, and resumes after the
//! instruction (`qemu_plugin_set_pc`). `cpuid`, and `rdmsr` of IA32_MISC_ENABLE (whose other
//! bits are QEMU's), run in QEMU and are rewritten afterwards, from a callback on the next
//! instruction (or, when the instruction ends its block, on entry to the next block). A `cpuid`
//! of [`MARKER_LEAF`] logs a marker instead.

use std::ffi::{c_uint, c_void};
use std::sync::atomic::Ordering::Relaxed;

use super::{emu, outs, sb, Cpu, Emu, Fixup, Regs, MARKER_LEAF};
use crate::api::{find_registers, set_pc};
use crate::bts::MSR_MISC_ENABLE;
use crate::event::Event;
use crate::model::Vendor;
use crate::recorder::{Access, MsrOp};

/// The vCPU starts: finds the registers the emulation uses; after `load=`, gives its
/// scoreboard entry the instructions since its last recorded branch.
pub(super) extern "C" fn on_vcpu_init(vcpu: c_uint, _: *mut c_void) {
    let e = emu();
    let i = vcpu as usize;
    if i >= e.cpus.len() {
        outs(&format!("vCPU {vcpu} beyond max_vcpus: not emulated"));
        return;
    }
    if e.since_record[i] != 0 {
        // SAFETY: a callback on vCPU `vcpu`, which QEMU calls once its scoreboard entry exists
        // (zeroed) and before it runs any guest code.
        unsafe { sb(vcpu) }.insns = e.since_record[i];
    }
    e.started[i].store(true, Relaxed);
    let [rax, rbx, rcx, rdx] = find_registers([&b"rax"[..], b"rbx", b"rcx", b"rdx"]);
    let (Some(rax), Some(rbx), Some(rcx), Some(rdx)) = (rax, rbx, rcx, rdx) else {
        outs("vCPU has no rax/rbx/rcx/rdx registers: not an x86-64 target? MSRs and CPUID are not emulated");
        return;
    };
    let _ = e.regs[i].set(Regs { rax, rbx, rcx, rdx });
}

pub(super) extern "C" fn on_rdmsr(vcpu: c_uint, next: *mut c_void) {
    msr_access(vcpu, next as u64, MsrOp::Read, false)
}

/// `rdmsr` that ends its block.
pub(super) extern "C" fn on_rdmsr_last(vcpu: c_uint, next: *mut c_void) {
    msr_access(vcpu, next as u64, MsrOp::Read, true)
}

pub(super) extern "C" fn on_wrmsr(vcpu: c_uint, next: *mut c_void) {
    msr_access(vcpu, next as u64, MsrOp::Write, false)
}

/// Before `rdmsr`/`wrmsr`: emulate the access if the MSR is ours, then resume after it, at
/// `next`. `last`: the instruction ends its block.
fn msr_access(vcpu: c_uint, next: u64, op: MsrOp, last: bool) {
    // (the instruction is 2 bytes; the log names the next one)
    if emulate_msr(vcpu, next, op, last) {
        // A write that froze may stall the vCPU (`stall=`), the emulator's locks let go.
        emu().stall_hold(vcpu, next);
        resume_at(vcpu, next);
    }
}

/// Does the access on the emulated recorder; false if the MSR is not one it emulates (QEMU
/// then executes the instruction, and the result of a `rdmsr` of IA32_MISC_ENABLE is rewritten
/// after it). `pc` is the next instruction's address.
fn emulate_msr(vcpu: c_uint, pc: u64, op: MsrOp, last: bool) -> bool {
    let e = emu();
    let Some(regs) = e.regs(vcpu) else {
        return false;
    };
    let mut cpu = e.cpu(vcpu);
    let msr = regs.rcx.read() as u32;
    if let Some(en) = cpu.entry.as_mut() {
        en.msr_access(op);
    }
    if op == MsrOp::Read && msr == MSR_MISC_ENABLE && e.model.misc_enable(0).is_some() {
        cpu.fixup = Some(Fixup::MiscEnable);
        if last {
            // SAFETY: a callback on vCPU `vcpu`.
            unsafe { sb(vcpu) }.fixup_pending = 1;
        }
        return false;
    }
    let access = match op {
        MsrOp::Write => wrmsr(e, vcpu, &mut cpu, regs, msr, pc),
        MsrOp::Read => rdmsr(e, vcpu, &cpu, regs, msr),
    };
    match access {
        Access::NotOurs => false,
        Access::Done(..) => true,
        Access::WouldFault => {
            would_fault(e, vcpu, regs, msr, op);
            true
        }
    }
}

/// `wrmsr` of EDX:EAX to `msr`, logged if it took effect, with the switch it made.
fn wrmsr(e: &Emu, vcpu: c_uint, cpu: &mut Cpu, regs: Regs, msr: u32, pc: u64) -> Access {
    let v = (regs.rdx.read() << 32) | (regs.rax.read() & 0xffff_ffff);
    let bts_was_on = cpu.rec.bts_on();
    let a = cpu.rec.wrmsr(msr, v);
    if let Access::Done(_, sw) = a {
        e.log(Event::Wrmsr {
            cpu: vcpu,
            msr,
            value: v,
        });
        // SAFETY: a callback on vCPU `vcpu`; the reference does not outlive the statement.
        let insns = unsafe { sb(vcpu) }.cost_insns;
        e.switched(vcpu, cpu, sw, bts_was_on, "wrmsr", pc, insns);
    }
    a
}

/// `rdmsr` of `msr` into EDX:EAX, logged.
fn rdmsr(e: &Emu, vcpu: c_uint, cpu: &Cpu, regs: Regs, msr: u32) -> Access {
    let a = cpu.rec.rdmsr(msr);
    if let Access::Done(v, _) = a {
        regs.rax.write(v & 0xffff_ffff);
        regs.rdx.write(v >> 32);
        e.log(Event::Rdmsr {
            cpu: vcpu,
            msr,
            value: v,
        });
    }
    a
}

/// An access the real part would refuse with #GP, which cannot be raised from here: a read
/// gives 0, a write is ignored; logged.
fn would_fault(e: &Emu, vcpu: c_uint, regs: Regs, msr: u32, op: MsrOp) {
    if op == MsrOp::Read {
        regs.rax.write(0);
        regs.rdx.write(0);
    }
    e.log(Event::WouldFault {
        cpu: vcpu,
        msr,
        write: op == MsrOp::Write,
    });
}

/// Resumes vCPU `vcpu` at `pc`, after the emulated instruction, which is not a branch.
fn resume_at(vcpu: c_uint, pc: u64) -> ! {
    // SAFETY: a callback on vCPU `vcpu`.
    let s = unsafe { sb(vcpu) };
    s.ft = pc;
    s.last_kind = 0;
    // SAFETY: on_rdmsr/on_wrmsr are registered with CB_RW_REGS_PC; no value with a destructor
    // is live in this frame or the callers' (the lock and log guards were dropped with
    // emulate_msr's frame), so leaving them by QEMU's longjmp skips nothing.
    unsafe { set_pc(pc) }
}

/// Before `cpuid`: note the leaf. `last` (userdata) says the instruction ends its block.
pub(super) extern "C" fn on_cpuid(vcpu: c_uint, last: *mut c_void) {
    let Some(regs) = emu().regs(vcpu) else {
        return;
    };
    let mut cpu = emu().cpu(vcpu);
    let (leaf, sub) = (regs.rax.read() as u32, regs.rcx.read() as u32);
    if leaf == MARKER_LEAF {
        drop(cpu);
        emu().log(Event::Marker {
            cpu: vcpu,
            value: sub,
        });
        if let Some(st) = &emu().stall {
            st.marker(sub);
        }
        return;
    }
    cpu.fixup = Some(Fixup::Cpuid(leaf, sub));
    if !last.is_null() {
        // SAFETY: a callback on vCPU `vcpu`.
        unsafe { sb(vcpu) }.fixup_pending = 1;
    }
}

/// After `cpuid` or `rdmsr` (on the next instruction, or entering the next block): rewrite its
/// result if it is one the emulator rewrites.
pub(super) extern "C" fn on_fixup(vcpu: c_uint, _: *mut c_void) {
    // SAFETY: a callback on vCPU `vcpu`.
    unsafe { sb(vcpu) }.fixup_pending = 0;
    let e = emu();
    let Some(regs) = e.regs(vcpu) else {
        return;
    };
    let mut cpu = e.cpu(vcpu);
    match cpu.fixup.take() {
        Some(Fixup::Cpuid(leaf, sub)) => cpuid_done(e, &mut cpu, regs, leaf, sub),
        Some(Fixup::MiscEnable) => misc_enable_done(e, vcpu, regs),
        None => {}
    }
}

/// IA32_MISC_ENABLE as QEMU read it into EDX:EAX, with the model's BTS and PEBS availability
/// bits; logged as an `rdmsr`.
fn misc_enable_done(e: &Emu, vcpu: c_uint, regs: Regs) {
    let v = (regs.rdx.read() << 32) | (regs.rax.read() & 0xffff_ffff);
    let Some(new) = e.model.misc_enable(v) else {
        return;
    };
    if new != v {
        regs.rax.write(new & 0xffff_ffff);
        regs.rdx.write(new >> 32);
    }
    e.log(Event::Rdmsr {
        cpu: vcpu,
        msr: MSR_MISC_ENABLE,
        value: new,
    });
}

/// `cpuid` of (`leaf`, `sub`) as QEMU answered it in the registers: rewritten as the model
/// answers it.
fn cpuid_done(e: &Emu, cpu: &mut Cpu, regs: Regs, leaf: u32, sub: u32) {
    let hs = [regs.rax, regs.rbx, regs.rcx, regs.rdx];
    let old: [u32; 4] = hs.map(|h| h.read() as u32);
    let range = (leaf >> 31) as usize;
    if leaf == 0 || leaf == 0x8000_0000 {
        cpu.orig_max[range].get_or_insert(old[0]);
    }
    if leaf == 0 {
        check_vendor(e, old);
    }
    let mut new = e.model.cpuid(leaf, sub, old, cpu.orig_max[range]);
    if let Some(h) = e.hypervisor {
        new = h.cpuid(leaf, new);
    }
    for i in 0..4 {
        if new[i] != old[i] {
            hs[i].write(new[i] as u64);
        }
    }
    if leaf == 0x8000_0008 {
        cpu.rec.set_linear_bits(new[0]);
    }
}

/// Leaf 0 answered `regs` (EAX, EBX, ECX, EDX): warns once if its vendor is not the model's,
/// since the guest's drivers will then not look for the emulated recorder.
fn check_vendor(e: &Emu, regs: [u32; 4]) {
    let mut vendor = Vec::new();
    for r in [regs[1], regs[3], regs[2]] {
        vendor.extend_from_slice(&r.to_le_bytes());
    }
    let want: &[u8] = match e.model.vendor {
        Vendor::Intel => b"GenuineIntel",
        Vendor::Amd => b"AuthenticAMD",
    };
    if vendor != want && e.vendor_warned.swap(1, Relaxed) == 0 {
        let msg = format!(
            "model={} needs a {} -cpu model, but this vCPU says {:?}: the guest will not see the emulated recorder",
            e.model.name,
            String::from_utf8_lossy(want),
            String::from_utf8_lossy(&vendor)
        );
        outs(&msg);
        e.log(Event::Error { message: msg });
    }
}
