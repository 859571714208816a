// SPDX-License-Identifier: GPL-2.0

//! The oops printer: a die notifier that prints the snapshot of the exception that oopsed,
//! newest record first, in the line format of report.rs, with the kernel's `%pS` symbols; then,
//! if that exception interrupted the handling of earlier ones on the same stack (IBT: a #CP
//! whose handler BUG()s, raising a nested #UD), their snapshots, each labelled with its nesting
//! level (`nest=0` for the oopsing one, then 1, 2, ...).
//!
//! Which snapshot belongs to the oops: the one whose hardware frame is the oops' `pt_regs` (the
//! stub records the address of the frame's RIP slot; `&regs->ip` is the same slot) and whose
//! saved RIP is `regs->ip`, searched in every CPU's ring: #GP, BUG's #UD and #DE re-enable
//! interrupts before die(), and every 7.3 kernel is preemptible, so the task may be printing on
//! another CPU than the one that captured, where an older snapshot of the same stack slot may
//! lie (a WARN just before a BUG). Each snapshot is chosen consistently: its sequence number is
//! read again after its fields and must not have changed. Its records are then read in place as
//! they are printed, and the sequence number (and a kept BTS buffer's owner) once more after
//! them: if captures on its CPU took the slot (the ring wrapped during the printing) or the
//! buffer meanwhile, the `end` line says `rewritten` and the snapshot is not sealed for dump
//! readers. An older snapshot encloses a newer one when the newer exception's interrupted stack
//! pointer lies below the older frame, within one stack, and that frame still holds the RIP it
//! recorded. Nothing else is printed as this crash's: without a matching snapshot, one line
//! says so.
//!
//! The panic printer: a panic notifier (vpanic() runs the chain after it has stopped the other
//! CPUs and before kmsg_dump(), so the lines reach pstore) prints the panicking CPU's snapshot
//! from the entry of panic(), then each other CPU's snapshot taken as the panic stopped it, by
//! default bounded: each snapshot's newest `print_records` records, and one `kept:` line for a
//! CPU that the stop IPI stopped (one stopped by the NMI, which had interrupts off, is printed:
//! a hard lockup's loop); report.rs describes the lines. "Other" is every CPU but the one that
//! runs the notifiers, whichever CPU's panic() entry was captured (a panic handed to another
//! CPU). A `kept:` line's record count is read in place too, and the sequence number again after
//! it: if the slot was taken meanwhile, a `none:` line says so instead. A panic that follows an
//! oops of the same task (panic_on_oops, an oops in interrupt context) prints no second snapshot
//! of the panicking CPU: the oops printed its exception's. Nor does `panic_on_warn`'s panic
//! (panic() called by check_panic_on_warn() called by __warn()): the warning's report printed
//! its #UD's snapshot, and this one's records are that report's printing; one `none:` line
//! says so, whatever `print_all` says. With kdump loaded, vpanic() boots the capture kernel
//! before the notifiers: the snapshots are then read from the vmcore.
//!
//! The warning printer: a warning's report (__warn(), from the #UD handler) prints the snapshot
//! of its #UD after the registers and the call trace, as an oops does: src/glue.c's kretprobe at
//! show_regs() called from __warn() hands over the #UD's `pt_regs` when show_regs() returns,
//! matched as the oops' are, and only that snapshot is printed, bounded as every one is. When the kernel goes on from a warning
//! (report_bug() says so: a kretprobe), its capture is given back (src/capture/warn.rs), so that
//! a storm of warnings does not push a crash's snapshot out of the ring.
//!
//! All of them run in the oops path with IRQs off (a warning's printer in any context the
//! warning was in): no allocation, no sleeping, no panics (indexing is checked or noted
//! `// PANIC:`, and falls back to printing less).

use core::fmt::{self, Write};
use core::mem::offset_of;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use kernel::{
    bindings,
    ffi::{c_int, c_uint, c_ulong, c_void},
    prelude::*,
};

use crate::area::{self, Memory, SnapshotView};
use crate::capture::{Area, Armed};
use crate::ffi;
use crate::layout::{self, snap, VECTOR_UD as UD};
use crate::live::Live;
use crate::record;
use crate::report::{EndLine, Header, Kind, LerLine, RecordLine};

/// The armed state the notifiers read: published while armed (control.rs `Active`).
pub(crate) static ARMED: Live<Armed> = Live::new();

/// The task the die notifier last printed an oops for, and the stubs' sequence counter then: a
/// panic of the same task whose capture at panic() entry is the next one (or the next but the
/// one at a crash_kexec() that returned in between) follows that oops (panic_on_oops, an oops in
/// interrupt context), and the oops' exception snapshot is not printed again. (The counter
/// guards against a new task at a dead one's address.)
static OOPS_TASK: AtomicPtr<bindings::task_struct> = AtomicPtr::new(ptr::null_mut());
static OOPS_SEQ: AtomicU64 = AtomicU64::new(0);

/// The records each printed snapshot shows (`print_records`; `u32::MAX` for all) and whether a
/// panic prints every other CPU's snapshot (`print_all`); set at load.
static PRINT_RECORDS: AtomicU32 = AtomicU32::new(16);
static PRINT_ALL: AtomicBool = AtomicBool::new(false);

/// Sets what the printers print (the `print_records` and `print_all` parameters).
pub(crate) fn set_limits(records: u32, all: bool) {
    let records = if records == 0 || all {
        u32::MAX
    } else {
        records
    };
    PRINT_RECORDS.store(records, Ordering::Relaxed);
    PRINT_ALL.store(all, Ordering::Relaxed);
}

/// The stubs' sequence counter: snapshots taken since arming, on every CPU.
fn captures() -> u64 {
    // SAFETY: one aligned u64 of the stubs' counters, advanced by them with a locked add.
    unsafe { ptr::addr_of!(ffi::lbr_dump_live.seq).read_volatile() }
}

/// Largest distance between a nested exception's stack pointer and the outer frame that can be
/// on one stack (the kernel's stacks are at most 16 KiB + guard; IST stacks are smaller).
const STACK_SPAN: u64 = 32 * 1024;

/// A small line buffer with a NUL terminator, formatted without allocation.
pub(crate) struct LineBuf {
    buf: [u8; 256],
    len: usize,
}

impl LineBuf {
    pub(crate) fn new() -> Self {
        LineBuf {
            buf: [0; 256],
            len: 0,
        }
    }

    /// Empties the buffer for the next line (one buffer per function: printing runs on
    /// exception stacks of 8 KiB).
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// The text so far.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        // PANIC: none, `len` never exceeds `buf.len() - 1` (write_str).
        &self.buf[..self.len]
    }

    pub(crate) fn as_ptr(&mut self) -> *const u8 {
        let n = self.len.min(self.buf.len() - 1);
        self.buf[n] = 0;
        self.buf.as_ptr()
    }
}

impl Write for LineBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - 1 - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// The most enclosing snapshots printed after the oopsing one.
const MAX_NEST: u32 = 4;

/// A snapshot as src/area.rs reads it from the live area.
type Snap<'a> = SnapshotView<'a, Area>;

/// Reads the snapshot in `slot` of `cpu`; `None` if never written, or being rewritten (by a
/// capture on another CPU) while it was read (its sequence number changed across the read).
fn read(a: &Armed, cpu: usize, slot: usize) -> Option<Snap<'_>> {
    let s = a.area.snapshot(cpu, slot);
    (s.seq != 0 && a.area.u64_at(s.off + snap::SEQ) == s.seq).then_some(s)
}

/// The newest snapshot of any CPU with a sequence number below `below` that satisfies `f`.
/// (Plain loops: iterator adapters over closures make symbol names longer than objtool takes.)
#[inline(never)]
fn newest(a: &Armed, below: u64, f: impl Fn(&Snap<'_>) -> bool) -> Option<Snap<'_>> {
    let g = a.area.geometry();
    let mut best: Option<Snap<'_>> = None;
    for cpu in 0..g.nr_cpus {
        for slot in 0..g.ring {
            let Some(s) = read(a, cpu, slot) else {
                continue;
            };
            if s.seq < below && best.is_none_or(|b| s.seq > b.seq) && f(&s) {
                best = Some(s);
            }
        }
    }
    best
}

/// The newest snapshot in `cpu`'s own ring that satisfies `f` (a CPU's captures go to its own
/// ring): the panic printer reads each ring once, not every ring once per CPU.
/// `None` for a CPU beyond the area's (its captures find no slot).
#[inline(never)]
fn newest_on(a: &Armed, cpu: usize, f: impl Fn(&Snap<'_>) -> bool) -> Option<Snap<'_>> {
    let g = a.area.geometry();
    if cpu >= g.nr_cpus {
        return None;
    }
    let mut best: Option<Snap<'_>> = None;
    for slot in 0..g.ring {
        let Some(s) = read(a, cpu, slot) else {
            continue;
        };
        if best.is_none_or(|b| s.seq > b.seq) && f(&s) {
            best = Some(s);
        }
    }
    best
}

/// Seals `s` for crash-dump readers (its checksum over the snapshot as read), unless its CPU
/// rewrote the slot since it was read: that content was not the one printed.
fn seal(a: &Armed, s: &Snap<'_>) {
    if a.area.u64_at(s.off + snap::SEQ) == s.seq {
        area::seal(&mut &*a.area, &a.area.geometry(), s.off);
    }
}

/// Is `outer` still being handled when `inner` was taken (see the module documentation)?
fn encloses(outer: &Snap<'_>, inner: &Snap<'_>) -> bool {
    let (frame, sp) = (outer.frame, inner.rsp);
    if !(sp < frame && frame - sp < STACK_SPAN) {
        return false;
    }
    let mut rip = 0u64;
    // SAFETY: reads 8 bytes at a kernel address that may be gone; copy_from_kernel_nofault
    // handles faults and writes into the local.
    let r = unsafe {
        bindings::copy_from_kernel_nofault(ptr::addr_of_mut!(rip).cast(), frame as *const c_void, 8)
    };
    r == 0 && rip == outer.rip
}

fn print_raw(line: &mut LineBuf) {
    // SAFETY: a NUL-terminated format with one `%s` and a NUL-terminated argument.
    unsafe { bindings::_printk(c"\x013lbr_dump: %s\n".as_char_ptr().cast(), line.as_ptr()) };
}

/// Prints `line` followed by `from` and `to` symbolized (`| from=%pS to=%pS`, no symbol after
/// whitespace: report.rs): a record, LER or BTS line.
fn print_branch(line: &mut LineBuf, from: u64, to: u64) {
    // SAFETY: NUL-terminated format; `%s` gets a NUL-terminated buffer, the two `%pS` get
    // addresses, which printk symbolizes without dereferencing them.
    unsafe {
        bindings::_printk(
            c"\x013lbr_dump: %s | from=%pS to=%pS\n"
                .as_char_ptr()
                .cast(),
            line.as_ptr(),
            from as *const c_void,
            to as *const c_void,
        )
    };
}

/// Prints the snapshots that belong to the oops with `regs`.
#[inline(never)]
fn print_for(a: &Armed, regs: *const bindings::pt_regs) {
    // SAFETY: reads a segment limit; callable anywhere.
    let cpu = unsafe { ffi::lbr_dump_cpu_number() };
    let frame = regs as u64 + offset_of!(bindings::pt_regs, ip) as u64;
    // SAFETY: the die chain's `regs` is the oopsing exception's register frame.
    let ip = unsafe { (*regs).ip } as u64;
    let Some(mut s) = newest(a, u64::MAX, |s| s.frame == frame && s.rip == ip) else {
        return none(
            cpu as usize,
            "no snapshot of this exception (vector not hooked, nested in a capture, or not an exception)",
        );
    };
    print_snapshot(a, &s, Some(0));
    for nest in 1..=MAX_NEST {
        s = match newest(a, s.seq, |o| encloses(o, &s)) {
            Some(outer) => outer,
            None => break,
        };
        print_snapshot(a, &s, Some(nest));
    }
}

/// The #CP vector: `ibt=warn`'s warning for an indirect branch to a missing ENDBR
/// (arch/x86/kernel/cet.c do_kernel_cp_fault() calls __warn() itself).
const CP: u32 = 21;

/// Prints the snapshot of the warning whose #UD frame is `regs`, inside its report (when
/// __warn()'s call of show_regs() returns: after the registers and the call trace, before the
/// end marker and panic_on_warn's panic): the snapshot whose hardware frame is `regs` and whose saved RIP is `regs->ip`,
/// in every CPU's ring (the report may run on another CPU than the one that captured:
/// handle_bug() enables interrupts where the warning had them), as for an oops, but only that
/// one: a warning prints at most one snapshot, bounded as every printed snapshot is. A
/// snapshot already sealed was printed before (an earlier warning at the same place and stack
/// depth of this task): if that is the newest match, this #UD was not captured, and one line
/// says so. A warning inside a report function hooked by `reports` (the list checks'
/// CHECK_DATA_CORRUPTION(): its records are the report's printing) prints that report
/// function's entry snapshot instead, which it makes permanent.
#[inline(never)]
fn print_warning(a: &Armed, regs: *const bindings::pt_regs) {
    // SAFETY: reads a segment limit; callable anywhere.
    let cpu = unsafe { ffi::lbr_dump_cpu_number() } as usize;
    let frame = regs as u64 + offset_of!(bindings::pt_regs, ip) as u64;
    // SAFETY: __warn()'s `regs` is the #UD's register frame, on the stack of its handler.
    let ip = unsafe { (*regs).ip } as u64;
    // A warning inside a hooked report function (the list checks' CHECK_DATA_CORRUPTION(), a
    // WARN_ON() of KASAN's): the report function's entry snapshot is the one that shows how the
    // code got to the check; the #UD's records are the report's own printing.
    // SAFETY: kallsyms lookups, safe where a warning is reported.
    let inside =
        |r: &Snap<'_>| unsafe { ffi::lbr_dump_same_function(r.error as c_ulong, ip as c_ulong) };
    if let Some(r) = active_report(a).filter(|r| r.sealed() != Some(true) && inside(r)) {
        if r.cpu == cpu {
            // SAFETY: glue.c calls the warning printer with interrupts off, on this CPU.
            unsafe { a.keep_report(r.cpu, r.off, r.seq) };
        }
        print_snapshot(a, &r, Some(0));
        return;
    }
    let vector = |v| v == UD || v == CP;
    match newest(a, u64::MAX, |s| vector(s.vector) && s.frame == frame && s.rip == ip) {
        // A seal that does not verify is a stale one (a printer's, written after this capture
        // claimed the slot): not this snapshot's.
        Some(s) if s.sealed() != Some(true) => print_snapshot(a, &s, Some(0)),
        Some(s) => none(
            cpu,
            format_args!(
                "no snapshot of this warning's exception (nested in a capture): the newest at its frame and RIP, seq={}, was printed with an earlier warning",
                s.seq
            ),
        ),
        None => none(
            cpu,
            "no snapshot of this warning's exception (#UD or #CP not hooked, or nested in a capture)",
        ),
    }
}

/// Whether the capture `s` is still active on this stack: its frame lies on this stack above
/// this stack pointer (src/glue.c `lbr_dump_frame_on_stack`: never a read that could fault),
/// and the word there is still its RIP (the function it entered, or the exception it took, has
/// not returned).
fn active(s: &Snap<'_>) -> bool {
    let here = 0u8;
    let sp = ptr::addr_of!(here) as u64;
    // SAFETY: page-table and stack-bound lookups only.
    if !unsafe { ffi::lbr_dump_frame_on_stack(s.frame as c_ulong, sp as c_ulong) } {
        return false;
    }
    let mut word = 0u64;
    // SAFETY: reads 8 bytes of this stack; copy_from_kernel_nofault handles faults and writes
    // into the local.
    let r = unsafe {
        bindings::copy_from_kernel_nofault(
            ptr::addr_of_mut!(word).cast(),
            s.frame as *const c_void,
            8,
        )
    };
    r == 0 && word == s.rip
}

/// The newest report function's entry capture, in every CPU's ring, still active on this stack:
/// the report running here.
#[inline(never)]
fn active_report(a: &Armed) -> Option<Snap<'_>> {
    newest(a, u64::MAX, |s| {
        s.vector == layout::VECTOR_REPORT && active(s)
    })
}

/// The #PF vector: KFENCE reports a fault in its pool from the #PF handler.
const KFENCE_PF: u32 = 14;

/// Prints the snapshot of the report being printed (src/glue.c's print points: its detector,
/// and for KASAN and KFENCE the reported address `id`), inside it: the newest snapshot, in every
/// CPU's ring, of a capture that is still active on this stack (its frame between this stack
/// pointer and [`STACK_SPAN`] above it, and the word there still its RIP): the report
/// trampoline's capture at the report function's entry, or for KFENCE a #PF's whose CR2 is
/// the reported address (KFENCE reports a fault in its pool from the #PF handler). Printed, the
/// report trampoline's provisional capture becomes permanent. A sealed one was printed before
/// (an earlier report from the same place and stack depth): this report was not captured, and
/// one line says so, as for warnings.
#[inline(never)]
fn print_report(a: &Armed, detector: u32, id: u64) {
    // SAFETY: reads a segment limit; callable anywhere.
    let cpu = unsafe { ffi::lbr_dump_cpu_number() } as usize;
    let pf = if detector == ffi::DETECTOR_KFENCE {
        newest(a, u64::MAX, |s| {
            s.vector == KFENCE_PF && s.cr2 == id && active(s)
        })
    } else {
        None
    };
    match pf.or_else(|| active_report(a)) {
        Some(s) if s.sealed() != Some(true) => {
            if s.vector == layout::VECTOR_REPORT && s.cpu == cpu {
                // SAFETY: glue.c calls the print points with interrupts off, on this CPU.
                unsafe { a.keep_report(s.cpu, s.off, s.seq) };
            }
            print_snapshot(a, &s, Some(0));
        }
        Some(s) => none(
            cpu,
            format_args!(
                "no snapshot of this report (nested in a capture): the newest at its frame, seq={}, was printed with an earlier report",
                s.seq
            ),
        ),
        None => none(
            cpu,
            "no snapshot of this report (its report function is not hooked: see the reports parameter; or nested in a capture)",
        ),
    }
}

/// Whether the panic snapshot `s` is a report's `panic_on_warn` (or `kernel.warn_limit`):
/// panic() called from check_panic_on_warn() (the snapshot's RIP is the return address there;
/// its byte before, the call), which __warn() or a report function called (src/glue.c
/// `lbr_dump_in_report`): the return address at the snapshot's RSP,
/// the caller's stack pointer after panic() returns (check_panic_on_warn() keeps no frame of its
/// own), or one of the next words (a compiler that gives it one).
fn from_warning(s: &Snap<'_>) -> bool {
    let within = |addr: u64, name: &CStr| {
        // SAFETY: a NUL-terminated static name; kallsyms' lookup is safe in the panic path.
        unsafe { ffi::lbr_dump_in_function(addr.wrapping_sub(1) as c_ulong, name.as_char_ptr()) }
    };
    if !within(s.rip, c"check_panic_on_warn") {
        return false;
    }
    (0..4u64).any(|i| {
        let mut word = 0u64;
        // SAFETY: reads 8 bytes of the panicking task's stack, which may be gone;
        // copy_from_kernel_nofault handles faults and writes into the local.
        let r = unsafe {
            bindings::copy_from_kernel_nofault(
                ptr::addr_of_mut!(word).cast(),
                (s.rsp + 8 * i) as *const c_void,
                8,
            )
        };
        // SAFETY: kallsyms' lookup is safe in the panic path.
        r == 0
            && (within(word, c"__warn")
                || unsafe { ffi::lbr_dump_in_report(word.wrapping_sub(1) as c_ulong) })
    })
}

/// Prints what a panic has: the panicking CPU's snapshot, then the other CPUs'. Each step is a
/// function of its own that holds at most one snapshot: this runs on the stack of the panic,
/// which can be the 8 KiB NMI stack (see [`print_snapshot`]).
///
/// `this`, the CPU that runs the panic notifiers, is the one vpanic() let go on
/// (panic_try_start()); `panic_cpu`, the one whose panic() entry the trampoline claimed, is
/// another when the panic moved between the two: handed to another CPU (`panic_force_cpu=`),
/// lost to another CPU's panic at the same time, or a task that moved between crash_kexec()
/// and panic() (an oops with panic_on_oops). That CPU was stopped as the others were, and is
/// printed as they are; this one was not.
fn print_panic(a: &Armed) {
    // SAFETY: reads a segment limit; callable anywhere.
    let this = unsafe { ffi::lbr_dump_cpu_number() } as usize;
    // SAFETY: one aligned u64 of the stubs' counters, written by the panic trampolines with a
    // locked cmpxchg (and given back to 0 by the reset trampoline, likewise).
    let claim = unsafe { ptr::addr_of!(ffi::lbr_dump_live.panic_cpu).read_volatile() };
    let panic_cpu = (claim & !(1 << layout::live::KEXEC_CLAIM_BIT))
        .checked_sub(1)
        .map_or(this, |cpu| cpu as usize);
    print_panicking(a, this, panic_cpu, claim != 0);
    wait_for_stops(a, this);
    let mut kept = 0;
    for cpu in 0..a.area.geometry().nr_cpus {
        // SAFETY: `__cpu_present_mask` is the kernel's; `cpumask_test_cpu` reads one bit.
        let present = unsafe {
            bindings::cpumask_test_cpu(cpu as i32, ptr::addr_of_mut!(bindings::__cpu_present_mask))
        };
        if cpu != this && present && print_stopped(a, cpu, this, panic_cpu) {
            kept += 1;
        }
    }
    if kept > 0 {
        print_kept_total(this, kept);
    }
}

/// How long the panic printer waits, in all, for the stop captures of CPUs that are still online
/// (microseconds): on hardware a stop NMI arrives in microseconds; under emulation a vCPU may
/// not run for tens of milliseconds.
const STOP_WAIT_US: u32 = 100_000;

/// A CPU still online has not stopped yet: stop_this_cpu() takes it out of the online mask
/// after the stop stub's capture. vpanic() waits 10 ms for the stop NMI and goes on without it,
/// and the NMI may still be on its way to a CPU that was slow to take it. Waits until every CPU
/// but `this` (the one that runs the panic) either has a stop capture or is offline, at most
/// [`STOP_WAIT_US`] for all of them together. A CPU that stays online without a capture (its
/// capture found it busy; halted by kdump's NMI with `crash_kexec_post_notifiers`, which keeps
/// it online; spinning in an NMI that blocks the stop NMI) costs the whole wait, once.
#[inline(never)]
fn wait_for_stops(a: &Armed, this: usize) {
    let mut left = STOP_WAIT_US;
    let mut from = 0;
    loop {
        // The first CPU (from the last one found pending on) still to stop. The online bit is
        // read before the snapshot: a CPU that captures and goes offline between the two reads
        // is then seen captured (or, at the next round, offline), never as neither.
        let pending = (from..a.area.geometry().nr_cpus)
            .find(|&cpu| cpu != this && online(cpu) && stop_snapshot(a, cpu).is_none());
        let Some(cpu) = pending else { return };
        if left == 0 {
            return;
        }
        from = cpu;
        // SAFETY: a busy wait of 100 us, callable with interrupts off.
        unsafe { bindings::__udelay(100) };
        left = left.saturating_sub(100);
    }
}

/// The newest stop snapshot of `cpu`.
fn stop_snapshot(a: &Armed, cpu: usize) -> Option<Snap<'_>> {
    newest_on(a, cpu, |s| s.cpu == cpu && Kind::of(s.vector) == Kind::Stop)
}

/// Whether `cpu` is in the kernel's online mask.
fn online(cpu: usize) -> bool {
    // SAFETY: `__cpu_online_mask` is the kernel's; `cpumask_test_cpu` reads one bit.
    unsafe {
        bindings::cpumask_test_cpu(cpu as i32, ptr::addr_of_mut!(bindings::__cpu_online_mask))
    }
}

/// The panicking CPU's snapshot (the panic trampoline's), or why there is none; `this` is the
/// CPU running the notifier, `claimed` whether the trampoline claimed the panic.
#[inline(never)]
fn print_panicking(a: &Armed, this: usize, panic_cpu: usize, claimed: bool) {
    // SAFETY: `current` of this CPU, a task that lives while it runs this code.
    let me = unsafe { bindings::get_current() };
    // SAFETY: one aligned u64 of the stubs' counters, written by the reset trampoline.
    let given_back = unsafe { ptr::addr_of!(ffi::lbr_dump_live.given_back).read_volatile() };
    // Not a capture at a crash_kexec() that returned (numbered up to `given_back`): that call
    // did not crash, and its claim was given back.
    let snap = newest_on(a, panic_cpu, |s| {
        s.cpu == panic_cpu && Kind::of(s.vector) == Kind::Panic && s.seq > given_back
    });
    // The panic follows this task's oops if no capture came between them but the panic's own,
    // and one at crash_kexec() given back right after the oops (oops_end() calls crash_kexec()
    // before panic(): without a crash kernel it returns); or if oops_end() called panic()
    // (panic_on_oops, an oops in interrupt context): its snapshot's RIP, the return address,
    // is there (its byte before: the call may be oops_end()'s last instruction). Between the
    // two, oops_end()'s summary of the registers may take fixed-up faults (its `Code:` line
    // at an unmapped RIP), each a capture.
    let oops_seq = OOPS_SEQ.load(Ordering::Relaxed);
    let since = if given_back == oops_seq.wrapping_add(1) {
        given_back
    } else {
        oops_seq
    };
    let from_oops_end = |rip: u64| {
        // SAFETY: a NUL-terminated static name; kallsyms' lookup is safe in the panic path.
        unsafe {
            ffi::lbr_dump_in_function(rip.wrapping_sub(1) as c_ulong, c"oops_end".as_char_ptr())
        }
    };
    let after_oops = OOPS_TASK.load(Ordering::Acquire) == me
        && snap.is_none_or(|s| s.seq.wrapping_sub(since) <= 1 || from_oops_end(s.rip));
    match snap {
        _ if after_oops => none(
            this,
            "this panic follows the oops printed above; its exception snapshot is there",
        ),
        // Its records are the printing of the warning's report; the one that matters, the
        // #UD's, is in that report.
        Some(s) if from_warning(&s) => none(
            this,
            format_args!(
                "this panic is panic_on_warn's (or kernel.warn_limit's) for the report above (a warning's, UBSAN's, KASAN's or KFENCE's), which has its snapshot (or says why there is none); this panic's own snapshot seq={}, the printing of that report, is only kept in memory",
                s.seq
            ),
        ),
        Some(s) => print_snapshot(a, &s, Some(0)),
        None if !claimed => none(
            this,
            "no snapshot of this panic (lbr-dump's trampoline did not run at panic() entry)",
        ),
        None => none(
            panic_cpu,
            "no snapshot of this panic (the capture found this CPU busy in another capture)",
        ),
    }
}

/// Another CPU as the panic stopped it: its snapshot, or a `kept:` line (then `true`), or why
/// there is none; `this` runs the panic, `panic_cpu` claimed its panic() entry (see
/// [`print_panic`]).
#[inline(never)]
fn print_stopped(a: &Armed, cpu: usize, this: usize, panic_cpu: usize) -> bool {
    // The online bit before the snapshot: a CPU takes its stop capture before stop_this_cpu()
    // takes it offline, so one seen offline has its capture (if it took one) by the time the
    // snapshot is read, and one seen online that captures meanwhile is printed with it. (Read
    // the other way round, a CPU that captured and went offline between the two reads would
    // be said to have stopped without a capture, and its snapshot left out.)
    let running = online(cpu);
    match stop_snapshot(a, cpu) {
        // A CPU that did not answer the stop IPI, stopped by the NMI a second later (it had
        // interrupts off: a hard lockup's CPU, a deadlock), is printed as the panicking one is:
        // its records are the loop it was stuck in, which no other line shows.
        Some(s) if PRINT_ALL.load(Ordering::Relaxed) || s.vector == layout::VECTOR_NMI => {
            print_snapshot(a, &s, None);
            false
        }
        Some(s) => print_kept(a, &s),
        // Still online after wait_for_stops(): it has not reached stop_this_cpu(), so no stop
        // interrupt has been taken yet (its capture would come first). Said so: it was not
        // stopped without a capture, it had not stopped at all.
        None if running => {
            none(
                cpu,
                format_args!(
                    "still running when printed: it had not taken its stop interrupt (held off, or an NMI it was in blocked it) within the kernel's wait and lbr-dump's {} ms; a capture it makes later is only in memory",
                    STOP_WAIT_US / 1000
                ),
            );
            false
        }
        // The CPU that claimed the panic capture but does not run the panic: vpanic() takes one
        // that hands its panic to another (panic_force_cpu=) offline before the stop, and no
        // stop interrupt is sent to it.
        None if cpu == panic_cpu => {
            none(
                cpu,
                format_args!(
                    "offline without a stop capture: it entered panic() first and handed the panic to CPU {this} (panic_force_cpu=), going offline before the stop; or its stop interrupt was skipped by lbr-dump's stub"
                ),
            );
            false
        }
        None => {
            none(
                cpu,
                "stopped or offline without a capture (offline before the panic, its stop interrupt skipped by lbr-dump's stub: a data breakpoint armed, user page tables, a capture running; or its stop gates could not be hooked)",
            );
            false
        }
    }
}

/// The line after the `kept:` lines of a panic: where the `kept` snapshots are.
#[inline(never)]
fn print_kept_total(this: usize, kept: usize) {
    let mut l = LineBuf::new();
    let (s, cpus, are, them) = if kept == 1 {
        ("", "CPU", "is", "it")
    } else {
        ("s", "CPUs", "are", "them")
    };
    let _ = write!(
        l,
        "v2 cpu={this} kept: the snapshot{s} of the {kept} other {cpus} above {are} not printed, only kept in memory (a kdump vmcore holds {them}: lbr-decode; print_all=1 prints {them})"
    );
    print_raw(&mut l);
}

/// Prints one `kept:` line for a stopped CPU whose snapshot is not printed: what stopped it,
/// where it was (`at=%pS`, no symbol after whitespace) and how many records are kept; seals the
/// snapshot for crash-dump readers as printing it would. Returns whether it printed that line:
/// if a capture on the CPU took the slot while its records were counted (its sequence number,
/// read again after them, changed), the count and state may be the new capture's and the
/// snapshot is no longer in memory, and one `none:` line says so instead.
#[inline(never)]
fn print_kept(a: &Armed, s: &Snap<'_>) -> bool {
    let count =
        record::records(a.area.header.layout, &SnapValues::of(a, s)).map_or(0, |r| r.count());
    let state = state_of(a, s, count);
    if a.area.u64_at(s.off + snap::SEQ) != s.seq {
        none(
            s.cpu,
            format_args!(
                "its stop snapshot seq={} was rewritten while it was read (a newer capture on this CPU took its slot): not kept",
                s.seq
            ),
        );
        return false;
    }
    let mut l = LineBuf::new();
    let _ = write!(
        l,
        "v2 cpu={} kept: seq={} vector={} ({}) rip={:#x} records={} state={}",
        s.cpu,
        s.seq,
        s.vector,
        crate::report::vector_name(s.vector),
        s.rip,
        count,
        state.name()
    );
    // SAFETY: NUL-terminated format; `%s` gets a NUL-terminated buffer, `%pS` an address,
    // which printk symbolizes without dereferencing it.
    unsafe {
        bindings::_printk(
            c"\x013lbr_dump: %s | at=%pS\n".as_char_ptr().cast(),
            l.as_ptr(),
            s.rip as *const c_void,
        )
    };
    seal(a, s);
    true
}

/// Prints a `none:` line for `cpu`.
#[inline(never)]
fn none(cpu: usize, reason: impl core::fmt::Display) {
    let mut l = LineBuf::new();
    let _ = write!(l, "v2 cpu={cpu} none: {reason}");
    print_raw(&mut l);
}

/// The snapshot's BTS history, when armed with BTS: a head line, then the newest `bts_print`
/// records of the buffer the capture kept, newest first (all of them stay in memory: lbr-decode
/// reads them from a dump). Nothing if the capture found another owner's debug store (said so),
/// or if a later capture reused the buffer (said so). Returns whether its kept buffer went back
/// to recording while the lines were printed (its table entry's owner changed: a newer capture
/// on the CPU swapped it into the debug store), so that they may mix two histories.
#[inline(never)]
fn print_bts(a: &Armed, s: &Snap<'_>, l: &mut LineBuf) -> bool {
    let g = a.area.geometry();
    let Some(b) = s.bts else {
        return false;
    };
    let (slot, state) = (b.slot as usize, b.state);
    l.clear();
    let _ = write!(l, "bts cpu={} seq={} ", s.cpu, s.seq);
    if state & layout::SNAP_BTS_FOREIGN != 0 {
        let _ = write!(l, "state=foreign ds_area={:#018x}", b.ds_area);
        print_raw(l);
        return false;
    }
    if state & layout::SNAP_BTS_KEPT == 0 {
        return false;
    }
    let Some(entry) = a.area.header.shape().bts_entry(&*a.area, s.cpu, slot) else {
        return false;
    };
    let (virt, owner) = (entry.virt, entry.owner);
    if owner != s.seq {
        let _ = write!(l, "state=reused owner={owner}");
        print_raw(l);
        return false;
    }
    let wrapped = state & layout::SNAP_BTS_WRAPPED != 0;
    let (base, index) = (b.base, b.index);
    let runs = match area::bts_runs(g.bts_size, base, index, wrapped) {
        Ok(r) if base == virt => r,
        _ => {
            let _ = write!(
                l,
                "state=inconsistent base={base:#x} index={index:#x} buffer={virt:#x}"
            );
            print_raw(l);
            return false;
        }
    };
    let total = (runs[0].len() + runs[1].len()) / layout::BTS_RECORD_SIZE;
    let shown = total.min(a.bts_print as usize);
    let _ = write!(
        l,
        "records={total} shown={shown} wrapped={} buffer={virt:#x} size={} state=kept",
        if wrapped { "yes" } else { "no" },
        g.bts_size
    );
    print_raw(l);
    // Newest first: the second run backwards, then the first.
    let mut i = 0;
    for run in [&runs[1], &runs[0]] {
        let mut off = run.end;
        while off > run.start && i < shown {
            off -= layout::BTS_RECORD_SIZE;
            // SAFETY: `virt` is a BTS buffer of this arming (the area's table, checked against
            // the snapshot's base), alive while `a` is; `off` is a record inside its used size
            // (`bts_runs`); a kept buffer is no longer written by the hardware.
            let (from, to) = unsafe {
                let r = (virt as usize + off) as *const u64;
                (ptr::read_volatile(r), ptr::read_volatile(r.add(1)))
            };
            l.clear();
            let _ = write!(l, "bts #{i} {from:#018x} -> {to:#018x}");
            print_branch(l, from, to);
            i += 1;
        }
    }
    a.area
        .header
        .shape()
        .bts_entry(&*a.area, s.cpu, slot)
        .is_none_or(|e| e.owner != s.seq)
}

/// A snapshot's record values read in place from the area, one at a time as the records are
/// decoded: a copy would put up to `MAX_VALUES` u64s (1.5 KiB) on the stack of a printer that
/// can run on an 8 KiB exception stack (a panic in an NMI handler: perf's hard-lockup watchdog).
/// A capture that rewrites the slot meanwhile fails the seal, as it would after a copy.
struct SnapValues<'s, 'a> {
    snap: &'s Snap<'a>,
    /// The area's values per snapshot (its geometry).
    len: usize,
}

impl<'s, 'a> SnapValues<'s, 'a> {
    fn of(a: &Armed, snap: &'s Snap<'a>) -> Self {
        let len = a.area.geometry().nr_values;
        SnapValues { snap, len }
    }
}

impl record::Values for SnapValues<'_, '_> {
    fn len(&self) -> usize {
        self.len
    }

    fn at(&self, i: usize) -> u64 {
        // Never past the slot's values, whatever the caller asks (record::records() asks only
        // below `len`).
        if i < self.len {
            self.snap.value(i)
        } else {
            0
        }
    }
}

/// The snapshot's state as printed, for `records` records in all.
fn state_of(a: &Armed, s: &Snap<'_>, records: usize) -> crate::report::State {
    let header = &a.area.header;
    area::snapshot_state(
        s.state,
        s.ctl_entry,
        header.ctl_armed,
        s.filter.zip(header.filter.map(|(_, armed)| armed)),
    )
    .with_records(records)
}

#[inline(never)]
fn print_snapshot(a: &Armed, s: &Snap<'_>, nest: Option<u32>) {
    let header = &a.area.header;
    let layout = header.layout;
    let values = SnapValues::of(a, s);
    let total = record::records(layout, &values).map_or(0, |r| r.count());
    let count = total.min(PRINT_RECORDS.load(Ordering::Relaxed) as usize);
    let (format, _) = layout.codes();
    let h = Header {
        cpu: s.cpu as u32,
        seq: s.seq,
        vector: s.vector,
        error: s.error,
        rip: s.rip,
        cr2: s.cr2,
        flavour: layout.flavour().name(),
        format,
        records: count as u32,
        state: state_of(a, s, total),
        nest,
        filter: header.branches,
    };
    let mut l = LineBuf::new();
    let _ = write!(l, "{h}");
    print_raw(&mut l);
    if let Some(records) = record::records(layout, &values) {
        for (i, b) in records.take(count).enumerate() {
            l.clear();
            let _ = write!(
                l,
                "{}",
                RecordLine {
                    index: i as u32,
                    branch: b
                }
            );
            print_branch(&mut l, b.from, b.to);
        }
    }
    if let Some(ler) = s
        .ler
        .and_then(|(f, t)| record::last_exception(layout, f, t))
    {
        l.clear();
        let _ = write!(
            l,
            "{}",
            LerLine {
                from: ler.from,
                to: ler.to
            }
        );
        print_branch(&mut l, ler.from, ler.to);
    }
    let bts_reused = print_bts(a, s, &mut l);
    // Read in place, one value at a time: a capture that took the slot meanwhile (its CPU's
    // ring wrapped) cleared or replaced the sequence number first, so the end line can say so.
    let rewritten = bts_reused || a.area.u64_at(s.off + snap::SEQ) != s.seq;
    l.clear();
    let _ = write!(
        l,
        "{}",
        EndLine {
            cpu: s.cpu as u32,
            seq: s.seq,
            rewritten
        }
    );
    print_raw(&mut l);
    // (Rewritten: the records not printed are no longer this snapshot's, nowhere.)
    if count < total && !rewritten {
        l.clear();
        let _ = write!(
            l,
            "v2 cpu={} kept: seq={} records #{}-#{} are not printed, only kept in memory (a kdump vmcore holds them: lbr-decode; print_records=0 prints them)",
            s.cpu,
            s.seq,
            count,
            total - 1
        );
        print_raw(&mut l);
    }
    // Seal it for crash-dump readers: the checksum covers the snapshot as printed (if its CPU
    // rewrote it meanwhile, the seal fails, and the dump reader says so).
    seal(a, s);
}

/// The die notifier.
///
/// # Safety
///
/// Called only by the die notifier chain, with the arguments it passes.
unsafe extern "C" fn on_die(
    _nb: *mut bindings::notifier_block,
    val: c_ulong,
    data: *mut c_void,
) -> c_int {
    if val != ffi::DIE_OOPS || data.is_null() {
        return ffi::NOTIFY_DONE;
    }
    // SAFETY: the die chain passes a `struct die_args` for DIE_OOPS.
    let args = unsafe { &*data.cast::<ffi::DieArgs>() };
    // SAFETY: a notifier, unregistered before the armed state it reads is dropped.
    if let Some(a) = unsafe { ARMED.get() } {
        print_for(a, args.regs);
        OOPS_SEQ.store(captures(), Ordering::Relaxed);
        // SAFETY: `current` of this CPU; only its address is kept, for comparison.
        OOPS_TASK.store(unsafe { bindings::get_current() }, Ordering::Release);
    }
    ffi::NOTIFY_DONE
}

/// The panic notifier.
///
/// # Safety
///
/// Called only by the panic notifier chain, with the arguments it passes.
unsafe extern "C" fn on_panic(
    _nb: *mut bindings::notifier_block,
    _val: c_ulong,
    _data: *mut c_void,
) -> c_int {
    // SAFETY: as in `on_die`.
    if let Some(a) = unsafe { ARMED.get() } {
        print_panic(a);
    }
    ffi::NOTIFY_DONE
}

/// A warning's report has printed its registers (src/glue.c's kretprobe at show_regs() called
/// from __warn(), at its return): its #UD's snapshot next.
///
/// # Safety
///
/// Called only by that kretprobe, with show_regs()'s argument, while it is registered.
unsafe extern "C" fn on_warning(regs: *mut bindings::pt_regs) {
    // SAFETY: a callback unregistered before the armed state it reads is dropped.
    if let Some(a) = unsafe { ARMED.get() } {
        print_warning(a, regs);
    }
}

/// The kernel goes on from a warning (src/glue.c's kretprobe at report_bug()'s return, which
/// said `BUG_TRAP_TYPE_WARN`): its capture is given back (src/capture/warn.rs).
///
/// # Safety
///
/// Called only by that kretprobe, with report_bug()'s `regs` argument, interrupts off, while it
/// is registered.
unsafe extern "C" fn on_warning_done(regs: *mut bindings::pt_regs) {
    // SAFETY: as in `on_warning`.
    if let Some(a) = unsafe { ARMED.get() } {
        // SAFETY: interrupts are off and `regs` is the #UD's frame (this function's contract).
        unsafe { a.give_back_warning(regs) };
    }
}

/// A report is about to print its end (src/glue.c's print points): its snapshot next.
///
/// # Safety
///
/// Called only by those print points, interrupts off, while they are registered.
unsafe extern "C" fn on_report(detector: c_uint, id: c_ulong) {
    // SAFETY: a callback unregistered before the armed state it reads is dropped.
    if let Some(a) = unsafe { ARMED.get() } {
        print_report(a, detector, id as u64);
    }
}

/// glue.c's report print points (`on_report`); removed on drop.
struct ReportWatch;

impl ReportWatch {
    /// Registers them; one that cannot be placed is left out, and a line says what that costs.
    fn register() -> Self {
        // SAFETY: `on_report` only reads the armed state through `ARMED`; unregistered in drop.
        let gaps = unsafe { ffi::lbr_dump_report_watch(on_report) };
        if gaps & 1 != 0 {
            pr_warn!("cannot register at the error_report_end tracepoint: KASAN's and KFENCE's reports do not print their snapshots (they stay in memory)\n");
        }
        if gaps & 2 != 0 {
            pr_warn!("cannot put a kprobe at dump_stack(): UBSAN's reports do not print their snapshots (they stay in memory)\n");
        }
        ReportWatch
    }
}

impl Drop for ReportWatch {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; waits until no CPU is in a handler.
        unsafe { ffi::lbr_dump_report_unwatch() };
    }
}

/// glue.c's warning hooks (`on_warning`, `on_warning_done`); removed on drop.
struct WarnWatch;

impl WarnWatch {
    /// Registers the hooks; one that cannot be placed is left out, and a line says what that
    /// costs.
    fn register() -> Self {
        // SAFETY: the hooks are valid for the module's lifetime and read `ARMED` only through
        // `Live::get`; unregistered in drop (or the module pinned).
        let gaps = unsafe { ffi::lbr_dump_warn_watch(on_warning, on_warning_done) };
        if gaps & 1 != 0 {
            pr_warn!("cannot put a kretprobe at show_regs(): a warning's report does not print its #UD's snapshot (it stays in memory)\n");
        }
        if gaps & 6 != 0 {
            pr_warn!(
                "cannot put a kretprobe at {}: a warning's capture there keeps its ring slot and BTS buffer, so that a storm of such warnings can push a crash's snapshot out\n",
                match gaps & 6 {
                    2 => "report_bug()",
                    4 => "report_bug_entry() (WARN() with a message)",
                    _ => "report_bug() and report_bug_entry()",
                }
            );
        }
        WarnWatch
    }
}

impl Drop for WarnWatch {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; waits until no CPU is in a hook.
        unsafe { ffi::lbr_dump_warn_unwatch() };
    }
}

/// The registered die and panic notifiers and the warning hooks; unregistered on drop.
pub(crate) struct Notifier {
    nb: KBox<bindings::notifier_block>,
    panic: KBox<bindings::notifier_block>,
    /// Dropped after `drop` has unregistered the notifiers (a field's drop follows its owner's).
    _warn: WarnWatch,
    _reports: ReportWatch,
}

// SAFETY: the notifier block is only touched by register/unregister, which serialize on the
// die chain's lock; its `next` pointer belongs to that chain.
unsafe impl Send for Notifier {}
// SAFETY: `&Notifier` gives no access to the block.
unsafe impl Sync for Notifier {}

impl Notifier {
    pub(crate) fn register() -> Result<Self> {
        let mut nb = KBox::new(
            bindings::notifier_block {
                notifier_call: Some(on_die),
                next: ptr::null_mut(),
                priority: 0,
            },
            GFP_KERNEL,
        )?;
        let mut panic = KBox::new(
            bindings::notifier_block {
                notifier_call: Some(on_panic),
                next: ptr::null_mut(),
                priority: 0,
            },
            GFP_KERNEL,
        )?;
        let warn = WarnWatch::register();
        let reports = ReportWatch::register();
        // SAFETY: `nb` lives in a box that outlives the registration (unregistered in drop).
        let r = unsafe { ffi::register_die_notifier(&mut *nb) };
        if r != 0 {
            return Err(Error::from_errno(r));
        }
        // SAFETY: as above; the atomic chain's registration cannot fail.
        unsafe { ffi::lbr_dump_panic_notifier(&mut *panic, true) };
        Ok(Notifier {
            nb,
            panic,
            _warn: warn,
            _reports: reports,
        })
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; unregistering waits for running callbacks (RCU).
        unsafe {
            ffi::lbr_dump_panic_notifier(&mut *self.panic, false);
            ffi::unregister_die_notifier(&mut *self.nb);
        }
    }
}
