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
//! (an interrupt right after it, or a fault fetching at its target). An unconditional branch
//! (whose target may be its own fall-through: `jmp .+5`, or sync_core()'s `iretq` to the next
//! instruction) stores a fall-through no block starts at, so that entering its target always
//! counts as taken; a conditional jump to its own fall-through is not recorded (taken or not, it
//! goes to the same place). The instrumentation itself is in `translate`.
//!
//! `rdmsr`/`wrmsr` of an emulated MSR are emulated whole, and `cpuid` and `rdmsr` of
//! IA32_MISC_ENABLE are rewritten after QEMU ran them (`msr`).
//!
//! Branch Trace Store: at each taken branch, interrupt or exception while DEBUGCTL.TR and .BTS
//! are set, the record is stored in guest memory ([`crate::bts::store`] through [`GuestMem`],
//! QEMU's `qemu_plugin_read/write_memory_vaddr` in this vCPU's context). The DS area's BTS
//! fields are read at every record, not cached: software may swap the buffer with plain stores
//! to the save area (no MSR write), and a plugin sees no store it has not instrumented; the cost
//! of the read is measured in the README ("Branch Trace Store"). With `bts_recent=N` each vCPU
//! also keeps its newest N stored records ([`crate::bts::Recent`], in the recorder; kept across
//! a system reset, being the emulator's and not the hardware's), logged with every BTS freeze.
//!
//! With `cost=on`, every instruction also adds 1, inline, to a per-vCPU counter, and each
//! interrupt or exception delivery starts an entry measurement ([`crate::cost`]), logged as an
//! `entry` event. Guest markers: `cpuid` with EAX = MARKER_LEAF logs a `marker` event with ECX,
//! so that a guest can bracket a workload in the log (tests/user/marker.S).
//!
//! With `stall=VCPU:ARM:RELEASE` ([`crate::stall`]), markers also arm and release the stall of
//! one vCPU at a freeze: every freeze tells the stall, and the callbacks that can freeze (an
//! emulated `wrmsr`, a #DB delivery) hold the vCPU, if it is due, once they have let go of the
//! emulator's locks ([`Emu::stall_hold`]).
//!
//! With `save=PATH` the emulator's state is written at QEMU's exit, if quiescent, and with
//! `load=PATH` it is read at install ([`crate::state`]; [`Emu::save`], [`restore`]).
//!
//! Every line of the log is an [`Event`], written by [`Emu::log`].

mod msr;
mod translate;

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::offset_of;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::api::*;
use crate::args::{parse_args, Config};
use crate::bts::{self, BtsTally, Fields};
use crate::classify::{Branch, Kind};
use crate::cost::Entry;
use crate::event::{BtsPosition, EntryEnd, Event};
use crate::model::{Model, MSR_DEBUGCTL};
use crate::recorder::Switch;
use crate::stall::{self, Stall};
use crate::state::{self, Counters, State};
use crate::vcpu::{Cpu, Fixup};

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
    /// A `cpuid` or `rdmsr` at the end of a block waits for its result to be rewritten.
    fixup_pending: u64,
    /// `cost=on`: instructions executed (added one by one, inline).
    cost_insns: u64,
}

/// `cpuid` leaf that logs a marker (ASCII "LBMK"); QEMU answers it as any leaf above its range.
pub const MARKER_LEAF: u32 = 0x4c42_4d4b;

/// The registers the MSR and CPUID emulation reads and writes.
#[derive(Clone, Copy)]
struct Regs {
    rax: Reg,
    rbx: Reg,
    rcx: Reg,
    rdx: Reg,
}

/// Guest memory as the vCPU whose callback is running sees it.
struct GuestMem;

impl bts::Memory for GuestMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        read_mem_into(addr, buf)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> bool {
        write_mem(addr, data)
    }
}

struct Emu {
    model: Model,
    hypervisor: Option<crate::model::Hypervisor>,
    cpus: Vec<Mutex<Cpu>>,
    /// Each vCPU's registers, found when it starts (QEMU's handles, not state to save).
    regs: Vec<OnceLock<Regs>>,
    /// Each vCPU has started (its scoreboard entry exists).
    started: Vec<AtomicBool>,
    sb: Scoreboard<Sb>,
    /// `bts_recent=N`.
    bts_recent: usize,
    /// `save=PATH`, and the arguments a saved state records ([`crate::args::Config::shaping`]).
    save: Option<String>,
    shaping: Vec<String>,
    /// `load=`: each vCPU's instructions since its last recorded branch, for its scoreboard
    /// entry when it starts (0 without `load=`, as a zeroed entry has).
    since_record: Vec<u64>,
    log: Option<Mutex<BufWriter<File>>>,
    trace: bool,
    cost: bool,
    /// `stall=`: the vCPU to stall at a freeze, and when.
    stall: Option<Stall>,
    vendor_warned: AtomicU64,
    seen: AtomicU64,
    recorded: AtomicU64,
    bts_stored: AtomicU64,
    events: AtomicU64,
}

static EMU: OnceLock<Emu> = OnceLock::new();

fn emu() -> &'static Emu {
    EMU.get().expect("lbr-emu used before qemu_plugin_install")
}

/// Prints `msg` on QEMU's plugin output, as lbr-emu's.
fn outs(msg: &str) {
    crate::api::outs(&format!("lbr-emu: {msg}\n"));
}

impl Emu {
    /// Appends `ev` to the log (if there is one), numbered.
    fn log(&self, ev: Event) {
        let Some(log) = &self.log else { return };
        let mut w = log.lock().unwrap_or_else(|e| e.into_inner());
        let v = ev.to_json(self.events.fetch_add(1, Relaxed));
        let _ = serde_json::to_writer(&mut *w, &v);
        let _ = w.write_all(b"\n");
        if ev.flush() {
            let _ = w.flush();
        }
    }

    fn cpu(&self, vcpu: c_uint) -> MutexGuard<'_, Cpu> {
        self.cpus[vcpu as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The registers of `vcpu`, once it has started and they were found.
    fn regs(&self, vcpu: c_uint) -> Option<Regs> {
        self.regs.get(vcpu as usize)?.get().copied()
    }

    /// The u64 at `offset` of every vCPU's scoreboard entry.
    fn field(&self, offset: usize) -> U64 {
        self.sb.field(offset)
    }

    /// A freeze on `vcpu`: the record stack, and the BTS buffer's position if BTS was on
    /// (`bts`), read from memory now; `insns` is the `cost=on` instruction count.
    fn freeze_event(
        &self,
        vcpu: c_uint,
        cpu: &Cpu,
        cause: &'static str,
        pc: u64,
        bts: bool,
        insns: u64,
    ) {
        let rec = &cpu.rec;
        let bts = bts.then(|| {
            Box::new(BtsPosition {
                area: rec.ds_area(),
                fields: Fields::read(&mut GuestMem, rec.ds_area()),
                stats: rec.bts,
                cost: self.cost.then(|| BtsTally {
                    insns: insns - cpu.bts_insns_at_on,
                    ..cpu.bts_tally
                }),
                recent: rec.recent.on().then(|| rec.recent.clone()),
            })
        });
        self.log(Event::Freeze {
            cpu: vcpu,
            cause,
            pc,
            tos: rec.tos(),
            records: rec.stack(),
            ler: rec.ler(),
            counts: rec.counts,
            bts,
        });
    }

    /// Ends the entry measurement of `vcpu` (if one runs) as `end` says.
    fn end_entry(&self, vcpu: c_uint, cpu: &mut Cpu, end: EntryEnd) {
        if let Some(en) = cpu.entry.take() {
            self.log(en.finish(vcpu, end));
        }
    }

    /// Logs what an MSR write or #DB (`cause` at `pc`) switched: the LBR (`sw`) and BTS
    /// (`bts_was_on` before, the recorder's state now); a freeze if either stopped. A BTS period
    /// that begins reads the index it begins at; `insns` is the `cost=on` instruction count.
    #[allow(clippy::too_many_arguments)]
    fn switched(
        &self,
        vcpu: c_uint,
        cpu: &mut Cpu,
        sw: Switch,
        bts_was_on: bool,
        cause: &'static str,
        pc: u64,
        insns: u64,
    ) {
        let bts_now_on = cpu.rec.bts_on();
        if sw.was_on != sw.now_on {
            self.log(Event::Switch {
                cpu: vcpu,
                on: sw.now_on,
                cause,
                pc,
                msr: cpu.rec.switch_msr(),
                bts: false,
            });
        }
        if bts_was_on != bts_now_on {
            self.log(Event::Switch {
                cpu: vcpu,
                on: bts_now_on,
                cause,
                pc,
                msr: MSR_DEBUGCTL,
                bts: true,
            });
            if bts_now_on {
                cpu.rec.bts_started(&mut GuestMem);
                cpu.bts_tally = BtsTally::default();
                cpu.bts_insns_at_on = insns;
            }
        }
        if (sw.was_on && !sw.now_on) || (bts_was_on && !bts_now_on) {
            self.freeze_event(vcpu, cpu, cause, pc, bts_was_on, insns);
            if let Some(st) = &self.stall {
                st.freeze(vcpu);
            }
        }
    }

    /// `stall=`: if vCPU `vcpu` froze and is due to stall, holds it here until the release;
    /// `pc` is where it goes on. Call with no lock of the emulator's held (the other vCPUs log
    /// and release meanwhile).
    fn stall_hold(&self, vcpu: c_uint, pc: u64) {
        let Some(st) = &self.stall else { return };
        let held = st.hold(vcpu, stall::LIMIT, || {
            self.log(Event::Stall { cpu: vcpu, pc });
        });
        if let Some((end, took)) = held {
            self.log(Event::StallEnd {
                cpu: vcpu,
                end: end.name(),
                ms: took.as_millis() as u64,
            });
        }
    }

    /// Stores the BTS record of `b` on `vcpu` if BTS is on and its filter lets it; logs what
    /// the store met. Returns whether a record was written.
    fn bts_store(&self, vcpu: c_uint, cpu: &mut Cpu, b: &Branch) -> bool {
        let Some(st) = cpu.rec.bts_record(&mut GuestMem, b) else {
            return false;
        };
        let o = st.outcome;
        cpu.bts_tally.add(&o);
        if let Some(issue) = st.report {
            self.log(Event::BtsIssue {
                cpu: vcpu,
                issue,
                area: cpu.rec.ds_area(),
                fields: o.fields,
            });
        }
        if let (true, Some(at), Some(f)) = (o.interrupt, o.at, o.fields) {
            self.log(Event::WouldInterrupt {
                cpu: vcpu,
                index: at + bts::RECORD_SIZE,
                threshold: f.threshold,
                btint: cpu.rec.btint(),
            });
        }
        if o.at.is_some() {
            self.bts_stored.fetch_add(1, Relaxed);
        }
        o.at.is_some()
    }

    /// `cost=on`: a block entered at `to` after a taken branch of kind code `kind` (0: none, or
    /// not one that ends a handler).
    fn cost_taken(&self, vcpu: c_uint, s: &Sb, to: u64, kind: u64) {
        let mut cpu = self.cpu(vcpu);
        let Some(en) = cpu.entry.as_mut() else { return };
        if let Some(end) = en.taken(s.cost_insns, kind, to) {
            self.end_entry(vcpu, &mut cpu, end);
        }
    }

    /// `cost=on`: an interrupt or exception delivery from `from` to `to` (which ends the one
    /// measured, if any).
    fn cost_delivery(&self, vcpu: c_uint, s: &Sb, from: u64, to: u64) {
        let mut cpu = self.cpu(vcpu);
        self.end_entry(vcpu, &mut cpu, EntryEnd::Nested);
        cpu.entry = Some(Entry::start(from, to, s.cost_insns));
    }

    /// `save=PATH`, at QEMU's exit: writes the state to `path` if it is quiescent and logs
    /// `saved`; otherwise writes nothing, and logs and prints every reason (`save-refused`).
    ///
    /// Of the scoreboard only `insns - insns_at_record` is saved (the next record's cycle
    /// count). The rest is dead at a quiescent point, so a restored vCPU starts with its entry
    /// zeroed: `last_kind` (with `ft` and `last_pc`), a branch whose target block has not run
    /// yet, is only ever recorded while a recorder is on, and a quiescent vCPU's are off (a
    /// zeroed entry has `last_kind` 0: nothing pending); `fixup_pending` calls `on_fixup`, which
    /// does nothing unless `Cpu::fixup` is set, and a quiescent vCPU's is not; `cost_insns` is
    /// read against an entry measurement's start (none in progress) or a BTS period's (reset
    /// when BTS goes on, off now).
    fn save(&self, path: &str) {
        let cpus: Vec<_> = self
            .cpus
            .iter()
            .map(|c| c.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let since: Vec<u64> = (0..cpus.len())
            .map(|i| {
                if !self.started[i].load(Relaxed) {
                    return self.since_record[i];
                }
                // QEMU runs the atexit callbacks at the process's exit: after a `quit` or a
                // guest shutdown, once qemu_cleanup()'s vm_shutdown() has stopped every vCPU,
                // so these are the values the vCPU last stored.
                let insns = self.sb.get(offset_of!(Sb, insns), i as c_uint);
                let at = self.sb.get(offset_of!(Sb, insns_at_record), i as c_uint);
                insns.wrapping_sub(at)
            })
            .collect();
        let with_sb: Vec<(&Cpu, u64)> = cpus.iter().map(|c| &**c).zip(since).collect();
        // The restored run's log goes on after this one's last two lines, `saved` and `exit`.
        let tail = if self.log.is_some() { 2 } else { 0 };
        let captured = state::capture(
            self.model,
            self.bts_recent,
            &with_sb,
            self.stall.as_ref(),
            self.shaping.clone(),
            Counters {
                events: self.events.load(Relaxed) + tail,
                seen: self.seen.load(Relaxed),
                recorded: self.recorded.load(Relaxed),
                bts_stored: self.bts_stored.load(Relaxed),
            },
            self.vendor_warned.load(Relaxed) != 0,
        );
        drop(with_sb);
        drop(cpus);
        let refused = match captured {
            Ok(st) => {
                let text = st.to_json();
                // Written whole or not at all: another QEMU must never load half a state.
                let tmp = format!("{path}.tmp");
                let written =
                    std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, path));
                match written {
                    Ok(()) => {
                        self.log(Event::Saved {
                            path: path.to_string(),
                            digest: state::digest(text.as_bytes()),
                        });
                        return;
                    }
                    Err(err) => vec![(None, format!("cannot write {path}: {err}"))],
                }
            }
            Err(refused) => refused,
        };
        for (cpu, reason) in refused {
            let on = cpu.map_or(String::new(), |c| format!("vCPU {c}: "));
            outs(&format!("save={path}: not saved: {on}{reason}"));
            self.log(Event::SaveRefused { cpu, reason });
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
    unsafe { &mut *emu().sb.entry(vcpu) }
}

/// What moved the vCPU to a new place.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// A branch instruction.
    Instruction,
    /// An interrupt or exception delivered (QEMU's discontinuity callback).
    Delivery,
}

/// Records a taken branch on vCPU `vcpu`: in the LBR and in the BTS buffer, each if on.
fn take_branch(vcpu: c_uint, s: &mut Sb, from: u64, to: u64, kind: Kind, cause: Cause) {
    let e = emu();
    let b = Branch {
        from,
        to,
        kind,
        cycles: s.insns - s.insns_at_record,
    };
    let mut cpu = e.cpu(vcpu);
    let (lbr, bts) = (cpu.rec.on(), cpu.rec.bts_on());
    if !lbr && !bts {
        return;
    }
    let mut recorded = false;
    if lbr {
        e.seen.fetch_add(1, Relaxed);
        recorded = match cause {
            Cause::Delivery => cpu.rec.event(&b),
            Cause::Instruction => cpu.rec.branch(&b),
        };
        if recorded {
            s.insns_at_record = s.insns;
            e.recorded.fetch_add(1, Relaxed);
        }
    }
    let stored = bts && e.bts_store(vcpu, &mut cpu, &b);
    if e.trace {
        e.log(Event::Branch {
            cpu: vcpu,
            from,
            to,
            kind,
            recorded,
            bts: stored,
            delivery: cause == Cause::Delivery,
        });
    }
}

/// Where an x86 CPU starts after a reset (CS base 0xffff0000, IP 0xfff0).
const RESET_VECTOR: u64 = 0xffff_fff0;

/// The boot CPU executes the reset vector: a system reset (power-on, reboot, or the wakeup from
/// ACPI S3, which QEMU's PC machines implement as a reset). Every vCPU's recorder returns to its
/// power-on state, as the hardware's MSRs do (the application processors wait for their SIPI).
/// The `bts_recent` ring is the emulator's, not the hardware's: it goes on.
extern "C" fn on_reset(vcpu: c_uint, _: *mut c_void) {
    let e = emu();
    for cpu in &e.cpus {
        cpu.lock().unwrap_or_else(|e| e.into_inner()).reset(e.model);
    }
    e.log(Event::Reset { cpu: vcpu });
}

/// Entry to a block that is not the previous block's fall-through.
extern "C" fn on_block(vcpu: c_uint, userdata: *mut c_void) {
    let to = userdata as u64;
    // SAFETY: a callback on vCPU `vcpu`.
    let s = unsafe { sb(vcpu) };
    let e = emu();
    if e.cost {
        // A branch to at most 15 bytes (one instruction's longest) past itself is taken as
        // one to its own fall-through (iret_to_self's `iretq` in sync_core()), not as the far
        // return that ends a handler. A far return that skips one short instruction would be
        // taken so too; nothing the cost report measures does that.
        let own = to.wrapping_sub(s.last_pc).wrapping_sub(1) < 15;
        e.cost_taken(vcpu, s, to, if own { 0 } else { s.last_kind });
    }
    if let Some(kind) = Kind::from_code(s.last_kind) {
        let from = s.last_pc;
        take_branch(vcpu, s, from, to, kind, Cause::Instruction);
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
            take_branch(vcpu, s, last, from, k, Cause::Instruction);
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
        e.cost_delivery(vcpu, s, from, to);
    }
    // QEMU 11.1's x86 target reports exceptions as well as interrupts with DISCON_INTERRUPT
    // (seen: #PF and #DB), so the kind cannot tell a #DB: its handler does (gate 1).
    if is_debug_exception(vcpu, to) {
        let mut cpu = e.cpu(vcpu);
        let bts_was_on = cpu.rec.bts_on();
        let sw = cpu.rec.debug_exception();
        e.switched(vcpu, &mut cpu, sw, bts_was_on, "#DB", from, s.cost_insns);
        // Only DEBUGCTL.LBR is cleared: a BTS that runs stores the delivery.
    }
    take_branch(vcpu, s, from, to, Kind::Far, Cause::Delivery);
    e.stall_hold(vcpu, to);
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
    let (shift, v) = (mem_size_shift(info), mem_get_value(info));
    // LIDT in 64-bit mode loads the 2-byte limit, then the 8-byte base.
    if shift == 3 && v.kind == MEM_VALUE_U64 {
        emu().cpu(vcpu).idt = Some(v.data[0]);
    }
}

extern "C" fn on_exit(_: *mut c_void) {
    let e = emu();
    if let Some(path) = &e.save {
        e.save(path);
    }
    e.log(Event::Exit {
        branches_seen: e.seen.load(Relaxed),
        recorded: e.recorded.load(Relaxed),
        bts_stored: e.bts_stored.load(Relaxed),
    });
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
    let info = unsafe { Install::read(info, argc, argv) };
    match install(id, &info) {
        Ok(()) => 0,
        Err(msg) => {
            outs(&msg);
            -1
        }
    }
}

/// A state loaded with `load=PATH`: the file's digest, the state and the vCPUs it gives.
struct Loaded {
    digest: String,
    state: State,
    cpus: Vec<Cpu>,
}

/// Reads the state saved in `path` for a plugin of `cfg` on `n` vCPUs (setting `stall` over if
/// it was): an error naming `load=PATH` if it cannot be read or was saved by another format
/// version, with other arguments or for another vCPU count.
fn restore(path: &str, cfg: &Config, n: usize, stall: Option<&Stall>) -> Result<Loaded, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("load={path}: {e}"))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| format!("load={path}: {e}"))?;
    let state = State::parse(text).map_err(|e| format!("load={path}: {e}"))?;
    let cpus = state
        .restore(&cfg.shaping, n, cfg.model, cfg.bts_recent, stall)
        .map_err(|e| format!("load={path}: {e}"))?;
    Ok(Loaded {
        digest: state::digest(&bytes),
        state,
        cpus,
    })
}

/// Checks the host, reads the arguments, sets the emulator up and registers its callbacks.
fn install(id: PluginId, info: &Install) -> Result<(), String> {
    if info.version_cur < QEMU_PLUGIN_VERSION || info.version_min > QEMU_PLUGIN_VERSION {
        return Err(format!(
            "built for plugin API {QEMU_PLUGIN_VERSION}, but this QEMU offers {}..{}",
            info.version_min, info.version_cur
        ));
    }
    if info.target != "x86_64" || !info.system_emulation {
        return Err(format!(
            "needs qemu-system-x86_64 (system emulation), not {}",
            info.target
        ));
    }
    let cfg = parse_args(info.args.iter().map(String::as_str))?;
    let n = info.max_vcpus.max(info.smp_vcpus).max(1) as usize;
    if let Some(st) = cfg.stall.filter(|st| st.cpu as usize >= n) {
        return Err(format!("stall={}:..: this machine has {n} vCPUs", st.cpu));
    }
    let stall = cfg.stall.map(Stall::new);
    // Before the log is created: a state that cannot be loaded stops QEMU with nothing done.
    let loaded = match &cfg.load {
        Some(path) => Some(restore(path, &cfg, n, stall.as_ref())?),
        None => None,
    };
    let log = match &cfg.log {
        Some(p) => Some(Mutex::new(BufWriter::new(
            File::create(p).map_err(|e| format!("log={p}: {e}"))?,
        ))),
        None => None,
    };
    let (cpus, since_record, counters, vendor_warned) = match &loaded {
        Some(l) => (
            l.cpus.clone(),
            l.state.cpus.iter().map(|c| c.since_record).collect(),
            l.state.counters,
            l.state.vendor_warned,
        ),
        None => (
            vec![Cpu::new(cfg.model, cfg.bts_recent); n],
            vec![0; n],
            Counters::default(),
            false,
        ),
    };
    let e = Emu {
        model: cfg.model,
        hypervisor: cfg.hypervisor,
        cpus: cpus.into_iter().map(Mutex::new).collect(),
        regs: (0..n).map(|_| OnceLock::new()).collect(),
        started: (0..n).map(|_| AtomicBool::new(false)).collect(),
        sb: Scoreboard::alloc(),
        bts_recent: cfg.bts_recent,
        save: cfg.save.clone(),
        shaping: cfg.shaping.clone(),
        since_record,
        log,
        trace: cfg.trace,
        cost: cfg.cost,
        stall,
        vendor_warned: AtomicU64::new(vendor_warned as u64),
        seen: AtomicU64::new(counters.seen),
        recorded: AtomicU64::new(counters.recorded),
        bts_stored: AtomicU64::new(counters.bts_stored),
        events: AtomicU64::new(counters.events),
    };
    if EMU.set(e).is_err() {
        return Err("loaded twice".into());
    }
    emu().log(Event::Start {
        model: cfg.model,
        api: (info.version_min, info.version_cur),
        vcpus: n,
        trace: cfg.trace,
        cost: cfg.cost,
    });
    if let (Some(l), Some(path)) = (loaded, cfg.load) {
        emu().log(Event::Restored {
            path,
            digest: l.digest,
            counters,
        });
    }
    register_vcpu_init_cb(id, msr::on_vcpu_init);
    register_vcpu_tb_trans_cb(id, translate::on_translate);
    register_vcpu_discon_cb(id, DISCON_ALL, on_discon);
    register_atexit_cb(id, on_exit);
    Ok(())
}
