// SPDX-License-Identifier: GPL-2.0

//! The QEMU side: instrumentation, MSR and CPUID emulation, the ground-truth log.
//!
//! Taken-branch detection (the pattern of QEMU's contrib/plugins/cflow.c), all inline except on
//! a taken branch: the last instruction of every translation block stores, inline, its own
//! address, its fall-through address and its branch kind into this vCPU's scoreboard entry; every
//! block has a conditional callback that fires only when the block entered is not the previous
//! block's fall-through, i.e. when the previous block ended in a taken branch. Interrupts and
//! exceptions arrive through the discontinuity callback (from the interrupted or faulting
//! instruction to the handler), which also settles a branch whose target block never started
//! (an interrupt right after it, or a fault fetching at its target). A direct branch whose target
//! is its own fall-through (`jmp .+2`) is invisible to this scheme and is not recorded.
//!
//! `rdmsr`/`wrmsr` of an emulated MSR are emulated whole: a callback before the instruction does
//! the access on the emulated recorder, writes RAX/RDX for a read, and resumes after the
//! instruction (`qemu_plugin_set_pc`). `cpuid` runs in QEMU and is rewritten afterwards, from a
//! callback on the next instruction (or, when `cpuid` ends its block, on entry to the next
//! block).
//!
//! With `cost=on`, every instruction also adds 1, inline, to a per-vCPU counter, and each
//! interrupt or exception delivery starts an entry measurement: the instructions up to the first
//! jump, direct or indirect, 1 MiB or more away from the handler (an entry stub going on to the
//! kernel's handler; see `FAR`) with the `rdmsr`/`wrmsr` executed before it, and the instructions up to the far return (`iret`) of
//! the handler, logged as an `entry` event. Guest markers: `cpuid`
//! with EAX = MARKER_LEAF logs a `marker` event with ECX, so that a guest can bracket a workload
//! in the log (tests/user/marker.S).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Value};

use crate::api::*;
use crate::args::parse_args;
use crate::classify::{classify, Insn as InsnKind, Kind};
use crate::model::{Flavour, Model, Vendor};
use crate::recorder::{Access, Branch, Recorder, Switch};

#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION;

/// Per-vCPU scoreboard entry: written by inline ops and read by the callbacks of that vCPU only.
#[repr(C)]
struct Sb {
    /// Fall-through address of the last block's last instruction.
    ft: u64,
    /// Address of the last block's last instruction.
    last_pc: u64,
    /// Its branch kind code (0: not a branch, or already accounted for).
    last_kind: u64,
    /// Instructions in the blocks entered so far.
    insns: u64,
    /// `insns` when the previous branch was recorded.
    insns_at_record: u64,
    /// A `cpuid` at the end of a block waits for its result to be rewritten.
    cpuid_pending: u64,
    /// `cost=on`: instructions executed (added one by one, inline).
    cost_insns: u64,
}

/// `cpuid` leaf that logs a marker (ASCII "LBMK"); QEMU answers it as any leaf above its range.
pub const MARKER_LEAF: u32 = 0x4c42_4d4b;
/// An entry measurement that has seen this many instructions without returning ends.
const ENTRY_LIMIT: u64 = 200_000;

/// A jump (direct or indirect) to a target at least this far from the handler's first
/// instruction leaves the handler's code: an entry stub going on to another piece of code (a
/// hooking module's stub jumping to the kernel's handler). Jumps within a stub are short.
const FAR: u64 = 1 << 20;

/// `cost=on`: an interrupt or exception delivery being measured.
struct Entry {
    from: u64,
    to: u64,
    /// `cost_insns` at the delivery.
    start: u64,
    /// Before the first jump away from the handler (see [`FAR`]): instructions (with the jump)
    /// and its target.
    first_jmp: Option<(u64, u64)>,
    rdmsr: u64,
    wrmsr: u64,
}

fn field(offset: usize) -> U64 {
    U64 {
        score: emu().sb.0,
        offset,
    }
}

struct Regs {
    rax: *mut Register,
    rbx: *mut Register,
    rcx: *mut Register,
    rdx: *mut Register,
}

struct Cpu {
    rec: Recorder,
    regs: Option<Regs>,
    /// (leaf, subleaf) of a `cpuid` that has not been rewritten yet.
    cpuid: Option<(u32, u32)>,
    /// Highest basic / extended CPUID leaf QEMU itself answers.
    orig_max: [Option<u32>; 2],
    /// The IDT base of the last `lidt` (for recognising #DB delivery).
    idt: Option<u64>,
    /// `cost=on`: the delivery being measured.
    entry: Option<Entry>,
}

struct SendPtr<T>(*mut T);
// SAFETY: the scoreboard is owned by QEMU for the plugin's lifetime; each vCPU touches only its
// own entry, from its own thread.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}
// SAFETY: register handles are opaque numbers QEMU hands out; they are only used from the vCPU
// thread that owns the Cpu, under its mutex.
unsafe impl Send for Cpu {}

struct Emu {
    model: Model,
    cpus: Vec<Mutex<Cpu>>,
    sb: SendPtr<Scoreboard>,
    log: Option<Mutex<BufWriter<File>>>,
    trace: bool,
    cost: bool,
    vendor_warned: AtomicU64,
    seen: AtomicU64,
    recorded: AtomicU64,
    events: AtomicU64,
}

static EMU: OnceLock<Emu> = OnceLock::new();

fn emu() -> &'static Emu {
    EMU.get().expect("lbr-emu used before qemu_plugin_install")
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn outs(msg: &str) {
    let s = CString::new(format!("lbr-emu: {msg}\n")).unwrap_or_default();
    // SAFETY: a valid NUL-terminated string; QEMU copies it.
    unsafe { qemu_plugin_outs(s.as_ptr()) };
}

impl Emu {
    fn log(&self, mut v: Value, flush: bool) {
        let Some(log) = &self.log else { return };
        let mut w = log.lock().unwrap_or_else(|e| e.into_inner());
        v["seq"] = json!(self.events.fetch_add(1, Relaxed));
        let _ = serde_json::to_writer(&mut *w, &v);
        let _ = w.write_all(b"\n");
        if flush {
            let _ = w.flush();
        }
    }

    fn cpu(&self, vcpu: c_uint) -> std::sync::MutexGuard<'_, Cpu> {
        self.cpus[vcpu as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn freeze_event(&self, vcpu: c_uint, rec: &Recorder, cause: &str, pc: u64) {
        let records: Vec<Value> = rec
            .stack()
            .iter()
            .map(|s| json!({"from": hex(s.from), "to": hex(s.to), "info": hex(s.info)}))
            .collect();
        let (lf, lt) = rec.ler();
        let c = rec.counts;
        self.log(
            json!({"event": "freeze", "cpu": vcpu, "cause": cause, "pc": hex(pc),
                   "tos": rec.tos(), "records": records, "ler": [hex(lf), hex(lt)],
                   "counts": {"seen": c.seen, "seen_user": c.seen_user, "recorded": c.recorded,
                              "recorded_user": c.recorded_user}}),
            true,
        );
    }

    /// Ends the entry measurement of `vcpu` (if one runs): `end` says how; `now` is the
    /// instruction count, which is the total when it returned, to `back`.
    fn end_entry(&self, vcpu: c_uint, cpu: &mut Cpu, now: u64, end: &str, back: u64) {
        let Some(en) = cpu.entry.take() else { return };
        let (insns, next) = match en.first_jmp {
            Some((n, next)) => (json!(n), json!(hex(next))),
            None => (Value::Null, Value::Null),
        };
        let (total, back) = if end == "return" {
            (json!(now - en.start), json!(hex(back)))
        } else {
            (Value::Null, Value::Null)
        };
        self.log(
            json!({"event": "entry", "cpu": vcpu, "from": hex(en.from), "to": hex(en.to),
                   "insns": insns, "next": next, "rdmsr": en.rdmsr, "wrmsr": en.wrmsr,
                   "total": total, "back": back, "end": end}),
            false,
        );
    }

    fn switched(&self, vcpu: c_uint, rec: &Recorder, sw: Switch, cause: &str, pc: u64) {
        if sw.was_on == sw.now_on {
            return;
        }
        self.log(
            json!({"event": "switch", "cpu": vcpu, "on": sw.now_on, "cause": cause, "pc": hex(pc),
                   "msr": hex(rec.switch_msr() as u64)}),
            true,
        );
        if sw.was_on {
            self.freeze_event(vcpu, rec, cause, pc);
        }
    }
}

/// This vCPU's scoreboard entry.
///
/// # Safety
/// Call only from a callback running on vCPU `vcpu`.
unsafe fn sb(vcpu: c_uint) -> &'static mut Sb {
    // SAFETY: QEMU sized the scoreboard for every vCPU and keeps it alive; the entry is only
    // touched by this vCPU's thread (inline ops and its callbacks), per the caller's contract.
    unsafe { &mut *(qemu_plugin_scoreboard_find(emu().sb.0, vcpu) as *mut Sb) }
}

fn read_reg(h: *mut Register) -> u64 {
    // SAFETY: `h` is a handle from qemu_plugin_get_registers(); called from a callback with
    // register access; the array is ours and freed here.
    unsafe {
        let buf = g_byte_array_new();
        let ok = qemu_plugin_read_register(h, buf);
        let mut v = [0u8; 8];
        if ok {
            let n = ((*buf).len as usize).min(8);
            std::ptr::copy_nonoverlapping((*buf).data, v.as_mut_ptr(), n);
        }
        g_byte_array_free(buf, 1);
        u64::from_le_bytes(v)
    }
}

fn write_reg(h: *mut Register, v: u64) {
    // SAFETY: as read_reg; 8 bytes is the size of the 64-bit general registers.
    unsafe {
        let buf = g_byte_array_new();
        g_byte_array_set_size(buf, 8);
        std::ptr::copy_nonoverlapping(v.to_le_bytes().as_ptr(), (*buf).data, 8);
        qemu_plugin_write_register(h, buf);
        g_byte_array_free(buf, 1);
    }
}

fn read_mem(addr: u64, len: usize) -> Option<Vec<u8>> {
    // SAFETY: called from a vCPU callback; the array is ours and freed here.
    unsafe {
        let buf = g_byte_array_new();
        let ok = qemu_plugin_read_memory_vaddr(addr, buf, len);
        let out = (ok && (*buf).len as usize >= len)
            .then(|| std::slice::from_raw_parts((*buf).data, len).to_vec());
        g_byte_array_free(buf, 1);
        out
    }
}

/// Records a taken branch on vCPU `vcpu`.
fn take_branch(vcpu: c_uint, s: &mut Sb, from: u64, to: u64, kind: Kind, event: bool) {
    let e = emu();
    let b = Branch {
        from,
        to,
        kind,
        cycles: s.insns - s.insns_at_record,
    };
    let mut cpu = e.cpu(vcpu);
    if !cpu.rec.on() {
        return;
    }
    e.seen.fetch_add(1, Relaxed);
    let recorded = if event {
        cpu.rec.event(&b)
    } else {
        cpu.rec.branch(&b)
    };
    if recorded {
        s.insns_at_record = s.insns;
        e.recorded.fetch_add(1, Relaxed);
    }
    if e.trace {
        e.log(
            json!({"event": "branch", "cpu": vcpu, "from": hex(from), "to": hex(to),
                   "kind": kind.name(), "recorded": recorded}),
            false,
        );
    }
}

/// Where an x86 CPU starts after a reset (CS base 0xffff0000, IP 0xfff0).
const RESET_VECTOR: u64 = 0xffff_fff0;

/// The boot CPU executes the reset vector: a system reset (power-on, reboot, or the wakeup from
/// ACPI S3, which QEMU's PC machines implement as a reset). Every vCPU's recorder returns to its
/// power-on state, as the hardware's MSRs do (the application processors wait for their SIPI).
extern "C" fn on_reset(vcpu: c_uint, _: *mut c_void) {
    let e = emu();
    for cpu in &e.cpus {
        let mut cpu = cpu.lock().unwrap_or_else(|e| e.into_inner());
        cpu.rec = Recorder::new(e.model);
        cpu.idt = None;
        cpu.entry = None;
    }
    e.log(json!({"event": "reset", "cpu": vcpu}), true);
}

/// Entry to a block that is not the previous block's fall-through.
extern "C" fn on_block(vcpu: c_uint, userdata: *mut c_void) {
    let to = userdata as u64;
    // SAFETY: a callback on vCPU `vcpu`.
    let s = unsafe { sb(vcpu) };
    let e = emu();
    if e.cost {
        let mut cpu = e.cpu(vcpu);
        if let Some(en) = cpu.entry.as_mut() {
            let n = s.cost_insns - en.start;
            let jump = s.last_kind == Kind::JmpInd.code() || s.last_kind == Kind::JmpRel.code();
            if en.first_jmp.is_none() && jump && to.abs_diff(en.to) >= FAR {
                en.first_jmp = Some((n, to));
            } else if s.last_kind == Kind::Far.code() {
                // The handler's far return (a nested delivery would have ended this first).
                e.end_entry(vcpu, &mut cpu, s.cost_insns, "return", to);
            } else if n > ENTRY_LIMIT {
                e.end_entry(vcpu, &mut cpu, s.cost_insns, "limit", 0);
            }
        }
    }
    if let Some(kind) = Kind::from_code(s.last_kind) {
        let from = s.last_pc;
        take_branch(vcpu, s, from, to, kind, false);
    }
    s.last_kind = 0;
    s.ft = to;
}

/// Interrupts and exceptions.
extern "C" fn on_discon(vcpu: c_uint, kind: c_int, from: u64, to: u64, _: *mut c_void) {
    // SAFETY: a callback on vCPU `vcpu`.
    let s = unsafe { sb(vcpu) };
    // A branch whose target block never started: the event's `from` is its target.
    if let Some(k) = Kind::from_code(s.last_kind) {
        if from != s.ft && from != s.last_pc {
            let last = s.last_pc;
            take_branch(vcpu, s, last, from, k, false);
        }
    }
    s.last_kind = 0;
    s.ft = to;
    // Host calls are not guest control flow; QEMU also reports events that leave the PC where
    // it was (from == to, seen at the first instruction of a block): no branch happened.
    if (kind != DISCON_INTERRUPT && kind != DISCON_EXCEPTION) || from == to {
        return;
    }
    let e = emu();
    if e.cost {
        let mut cpu = e.cpu(vcpu);
        e.end_entry(vcpu, &mut cpu, s.cost_insns, "nested", 0);
        cpu.entry = Some(Entry {
            from,
            to,
            start: s.cost_insns,
            first_jmp: None,
            rdmsr: 0,
            wrmsr: 0,
        });
    }
    // QEMU 11.1's x86 target reports exceptions as well as interrupts with DISCON_INTERRUPT
    // (seen: #PF and #DB), so the kind cannot tell a #DB: its handler does (gate 1).
    if is_debug_exception(vcpu, to) {
        let mut cpu = e.cpu(vcpu);
        let sw = cpu.rec.debug_exception();
        e.switched(vcpu, &cpu.rec, sw, "#DB", from);
        return;
    }
    take_branch(vcpu, s, from, to, Kind::Far, true);
}

/// Is an exception delivered to `to` a #DB? Compares with gate 1 of the IDT last loaded.
fn is_debug_exception(vcpu: c_uint, to: u64) -> bool {
    let idt = {
        let cpu = emu().cpu(vcpu);
        if !cpu.rec.on() {
            return false;
        }
        cpu.idt
    };
    let Some(g) = idt.and_then(|idt| read_mem(idt + 16, 16)) else {
        return false;
    };
    // Gate: offset[15:0] at 0, offset[31:16] at 6, offset[63:32] at 8.
    let off = u16::from_le_bytes([g[0], g[1]]) as u64
        | (u16::from_le_bytes([g[6], g[7]]) as u64) << 16
        | (u32::from_le_bytes([g[8], g[9], g[10], g[11]]) as u64) << 32;
    off == to
}

extern "C" fn on_lidt(vcpu: c_uint, info: u32, _vaddr: u64, _: *mut c_void) {
    // SAFETY: `info` is the handle QEMU passed to this memory callback.
    let (shift, v) = unsafe {
        (
            qemu_plugin_mem_size_shift(info),
            qemu_plugin_mem_get_value(info),
        )
    };
    // LIDT in 64-bit mode loads the 2-byte limit, then the 8-byte base.
    if shift == 3 && v.kind == MEM_VALUE_U64 {
        emu().cpu(vcpu).idt = Some(v.data[0]);
    }
}

/// Before `rdmsr`/`wrmsr`: emulate the access if the MSR is ours, then resume after it.
fn msr_access(vcpu: c_uint, next: u64, write: bool) {
    let e = emu();
    let (resume, pc) = {
        let mut cpu = e.cpu(vcpu);
        let Some(regs) = &cpu.regs else { return };
        let (rax, rcx, rdx) = (regs.rax, regs.rcx, regs.rdx);
        let msr = read_reg(rcx) as u32;
        let pc = next; // (the instruction is 2 bytes; the log names the next one)
        if let Some(en) = cpu.entry.as_mut().filter(|en| en.first_jmp.is_none()) {
            *if write { &mut en.wrmsr } else { &mut en.rdmsr } += 1;
        }
        let access = if write {
            let v = (read_reg(rdx) << 32) | (read_reg(rax) & 0xffff_ffff);
            let a = cpu.rec.wrmsr(msr, v);
            if let Access::Done(_, sw) = a {
                e.log(
                    json!({"event": "wrmsr", "cpu": vcpu, "msr": hex(msr as u64), "value": hex(v)}),
                    false,
                );
                e.switched(vcpu, &cpu.rec, sw, "wrmsr", pc);
            }
            a
        } else {
            let a = cpu.rec.rdmsr(msr);
            if let Access::Done(v, _) = a {
                write_reg(rax, v & 0xffff_ffff);
                write_reg(rdx, v >> 32);
                e.log(
                    json!({"event": "rdmsr", "cpu": vcpu, "msr": hex(msr as u64), "value": hex(v)}),
                    true,
                );
            }
            a
        };
        match access {
            Access::NotOurs => (false, pc),
            Access::Done(..) => (true, pc),
            Access::WouldFault => {
                if !write {
                    write_reg(rax, 0);
                    write_reg(rdx, 0);
                }
                e.log(
                    json!({"event": "would-fault", "cpu": vcpu, "msr": hex(msr as u64),
                           "op": if write { "wrmsr" } else { "rdmsr" }}),
                    true,
                );
                (true, pc)
            }
        }
    };
    if resume {
        // SAFETY: a callback on vCPU `vcpu`.
        let s = unsafe { sb(vcpu) };
        s.ft = pc;
        s.last_kind = 0;
        // SAFETY: registered with QEMU_PLUGIN_CB_RW_REGS_PC; no value with a destructor is live
        // in this frame (the lock and log guards were dropped above), so leaving it by
        // QEMU's longjmp skips nothing.
        unsafe { qemu_plugin_set_pc(pc) }
    }
}

extern "C" fn on_rdmsr(vcpu: c_uint, next: *mut c_void) {
    msr_access(vcpu, next as u64, false)
}

extern "C" fn on_wrmsr(vcpu: c_uint, next: *mut c_void) {
    msr_access(vcpu, next as u64, true)
}

/// Before `cpuid`: note the leaf. `last` (userdata) says the instruction ends its block.
extern "C" fn on_cpuid(vcpu: c_uint, last: *mut c_void) {
    let mut cpu = emu().cpu(vcpu);
    let Some(regs) = &cpu.regs else { return };
    let (leaf, sub) = (read_reg(regs.rax) as u32, read_reg(regs.rcx) as u32);
    if leaf == MARKER_LEAF {
        drop(cpu);
        emu().log(json!({"event": "marker", "cpu": vcpu, "value": sub}), true);
        return;
    }
    cpu.cpuid = Some((leaf, sub));
    if !last.is_null() {
        // SAFETY: a callback on vCPU `vcpu`.
        unsafe { sb(vcpu) }.cpuid_pending = 1;
    }
}

/// After `cpuid` (on the next instruction, or entering the next block): rewrite its result.
extern "C" fn on_cpuid_done(vcpu: c_uint, _: *mut c_void) {
    // SAFETY: a callback on vCPU `vcpu`.
    unsafe { sb(vcpu) }.cpuid_pending = 0;
    let e = emu();
    let mut cpu = e.cpu(vcpu);
    let Some((leaf, sub)) = cpu.cpuid.take() else {
        return;
    };
    let Some(regs) = &cpu.regs else { return };
    let hs = [regs.rax, regs.rbx, regs.rcx, regs.rdx];
    let old: [u32; 4] = hs.map(|h| read_reg(h) as u32);
    let range = (leaf >> 31) as usize;
    if leaf == 0 || leaf == 0x8000_0000 {
        cpu.orig_max[range].get_or_insert(old[0]);
    }
    if leaf == 0 {
        let mut vendor = Vec::new();
        for r in [old[1], old[3], old[2]] {
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
            e.log(json!({"event": "error", "message": msg}), true);
        }
    }
    let new = e.model.cpuid(leaf, sub, old, cpu.orig_max[range]);
    for i in 0..4 {
        if new[i] != old[i] {
            write_reg(hs[i], new[i] as u64);
        }
    }
}

extern "C" fn on_vcpu_init(vcpu: c_uint, _: *mut c_void) {
    let mut found: [*mut Register; 4] = [null_mut(); 4];
    // SAFETY: called in vCPU context as the API requires; the array is freed here, its strings
    // are QEMU's and only read.
    unsafe {
        let arr = qemu_plugin_get_registers();
        if !arr.is_null() {
            let descs = std::slice::from_raw_parts(
                (*arr).data as *const RegDescriptor,
                (*arr).len as usize,
            );
            for d in descs {
                let name = CStr::from_ptr(d.name).to_bytes();
                if let Some(i) = [&b"rax"[..], b"rbx", b"rcx", b"rdx"]
                    .iter()
                    .position(|n| *n == name)
                {
                    found[i] = d.handle;
                }
            }
            g_array_free(arr, 1);
        }
    }
    let e = emu();
    if found.iter().any(|h| h.is_null()) {
        outs("vCPU has no rax/rbx/rcx/rdx registers: not an x86-64 target? MSRs and CPUID are not emulated");
        return;
    }
    let Some(cpu) = e.cpus.get(vcpu as usize) else {
        outs(&format!("vCPU {vcpu} beyond max_vcpus: not emulated"));
        return;
    };
    let mut cpu = cpu.lock().unwrap_or_else(|e| e.into_inner());
    cpu.regs = Some(Regs {
        rax: found[0],
        rbx: found[1],
        rcx: found[2],
        rdx: found[3],
    });
}

extern "C" fn on_translate(tb: *mut Tb, _: *mut c_void) {
    let off_ft = std::mem::offset_of!(Sb, ft);
    let off_pc = std::mem::offset_of!(Sb, last_pc);
    let off_kind = std::mem::offset_of!(Sb, last_kind);
    // SAFETY: `tb` and its instruction handles are valid for the duration of this callback.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        let vaddr = qemu_plugin_tb_vaddr(tb);
        if vaddr == RESET_VECTOR {
            qemu_plugin_register_vcpu_tb_exec_cb(tb, on_reset, CB_NO_REGS, null_mut());
        }
        qemu_plugin_register_vcpu_tb_exec_cond_cb(
            tb,
            on_block,
            CB_NO_REGS,
            COND_NE,
            field(off_ft),
            vaddr,
            vaddr as *mut c_void,
        );
        qemu_plugin_register_vcpu_tb_exec_cond_cb(
            tb,
            on_cpuid_done,
            CB_RW_REGS,
            COND_NE,
            field(std::mem::offset_of!(Sb, cpuid_pending)),
            0,
            null_mut(),
        );
        qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb,
            INLINE_ADD_U64,
            field(std::mem::offset_of!(Sb, insns)),
            n as u64,
        );
        for i in 0..n {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            if emu().cost {
                qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
                    insn,
                    INLINE_ADD_U64,
                    field(std::mem::offset_of!(Sb, cost_insns)),
                    1,
                );
            }
            let mut bytes = [0u8; 16];
            let len = qemu_plugin_insn_data(insn, bytes.as_mut_ptr() as *mut c_void, bytes.len());
            let pc = qemu_plugin_insn_vaddr(insn);
            let next = pc + qemu_plugin_insn_size(insn) as u64;
            let last = i + 1 == n;
            let class = classify(&bytes[..len]);
            if i == 0 && !last {
                qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
                    insn,
                    INLINE_STORE_U64,
                    field(off_kind),
                    0,
                );
            }
            match class {
                InsnKind::Cpuid => {
                    qemu_plugin_register_vcpu_insn_exec_cb(
                        insn,
                        on_cpuid,
                        CB_R_REGS,
                        last as usize as *mut c_void,
                    );
                    if !last {
                        let after = qemu_plugin_tb_get_insn(tb, i + 1);
                        qemu_plugin_register_vcpu_insn_exec_cb(
                            after,
                            on_cpuid_done,
                            CB_RW_REGS,
                            null_mut(),
                        );
                    }
                }
                InsnKind::Rdmsr => qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    on_rdmsr,
                    CB_RW_REGS_PC,
                    next as *mut c_void,
                ),
                InsnKind::Wrmsr => qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    on_wrmsr,
                    CB_RW_REGS_PC,
                    next as *mut c_void,
                ),
                InsnKind::Lidt => {
                    qemu_plugin_register_vcpu_mem_cb(insn, on_lidt, CB_NO_REGS, MEM_R, null_mut())
                }
                _ => {}
            }
            if last {
                let kind = match class {
                    InsnKind::Branch(k) => k.code(),
                    _ => 0,
                };
                qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
                    insn,
                    INLINE_STORE_U64,
                    field(off_ft),
                    next,
                );
                qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
                    insn,
                    INLINE_STORE_U64,
                    field(off_pc),
                    pc,
                );
                qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
                    insn,
                    INLINE_STORE_U64,
                    field(off_kind),
                    kind,
                );
            }
        }
    }
}

extern "C" fn on_exit(_: *mut c_void) {
    let e = emu();
    e.log(
        json!({"event": "exit", "branches_seen": e.seen.load(Relaxed), "recorded": e.recorded.load(Relaxed)}),
        true,
    );
}

fn flavour_json(m: &Model) -> Value {
    match m.flavour {
        Flavour::Legacy {
            depth,
            from,
            to,
            info,
            format,
            ..
        } => json!({"flavour": "legacy", "depth": depth,
            "from": hex(from as u64), "to": hex(to as u64), "info": info.map(|i| hex(i as u64)), "format": format}),
        Flavour::Arch { depth } => json!({"flavour": "arch", "depth": depth}),
        Flavour::AmdV2 { depth } => json!({"flavour": "amd-v2", "depth": depth}),
        Flavour::AmdSingle => json!({"flavour": "amd-single", "depth": 1}),
    }
}

/// # Safety
/// Called by QEMU with a valid `info` and `argc` NUL-terminated strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: PluginId,
    info: *const QemuInfo,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    // SAFETY: per this function's contract.
    let info = unsafe { &*info };
    if info.version_cur < QEMU_PLUGIN_VERSION || info.version_min > QEMU_PLUGIN_VERSION {
        outs(&format!(
            "built for plugin API {QEMU_PLUGIN_VERSION}, but this QEMU offers {}..{}",
            info.version_min, info.version_cur
        ));
        return -1;
    }
    // SAFETY: per this function's contract.
    let target = unsafe { CStr::from_ptr(info.target_name) }.to_string_lossy();
    if target != "x86_64" || !info.system_emulation {
        outs(&format!(
            "needs qemu-system-x86_64 (system emulation), not {target}"
        ));
        return -1;
    }
    // SAFETY: per this function's contract.
    let args: Vec<String> = (0..argc as usize)
        .map(|i| {
            unsafe { CStr::from_ptr(*argv.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let cfg = match parse_args(args.iter().map(String::as_str)) {
        Ok(c) => c,
        Err(e) => {
            outs(&e);
            return -1;
        }
    };
    let log = match &cfg.log {
        Some(p) => match File::create(p) {
            Ok(f) => Some(Mutex::new(BufWriter::new(f))),
            Err(e) => {
                outs(&format!("log={p}: {e}"));
                return -1;
            }
        },
        None => None,
    };
    let n = info.max_vcpus.max(info.smp_vcpus).max(1) as usize;
    // SAFETY: plain allocation of n entries of Sb, zeroed by QEMU.
    let score = unsafe { qemu_plugin_scoreboard_new(std::mem::size_of::<Sb>()) };
    let cpus = (0..n)
        .map(|_| {
            Mutex::new(Cpu {
                rec: Recorder::new(cfg.model),
                regs: None,
                cpuid: None,
                orig_max: [None; 2],
                idt: None,
                entry: None,
            })
        })
        .collect();
    let e = Emu {
        model: cfg.model,
        cpus,
        sb: SendPtr(score),
        log,
        trace: cfg.trace,
        cost: cfg.cost,
        vendor_warned: AtomicU64::new(0),
        seen: AtomicU64::new(0),
        recorded: AtomicU64::new(0),
        events: AtomicU64::new(0),
    };
    if EMU.set(e).is_err() {
        outs("loaded twice");
        return -1;
    }
    let mut start = json!({"event": "start", "model": cfg.model.name, "api": [info.version_min, info.version_cur],
                           "vcpus": n, "trace": cfg.trace, "cost": cfg.cost});
    if let (Value::Object(s), Value::Object(f)) = (&mut start, flavour_json(&cfg.model)) {
        s.extend(f);
    }
    emu().log(start, true);
    // SAFETY: registration with callbacks of the declared v7 types.
    unsafe {
        qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init, null_mut());
        qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate, null_mut());
        qemu_plugin_register_vcpu_discon_cb(id, DISCON_ALL, on_discon, null_mut());
        qemu_plugin_register_atexit_cb(id, on_exit, null_mut());
    }
    0
}
