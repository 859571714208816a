// SPDX-License-Identifier: GPL-2.0

//! Reports that are calls: the report trampoline (asm/stubs.S `lbr_dump_report_hook`) attached
//! to the entry of the kernel's report functions the `reports` parameter names
//! (src/reports.rs), and a report's provisional capture made permanent once printed.
//!
//! KASAN, KFENCE's reports from kfree(), UBSAN and the hardened list checks do not oops: their
//! check calls a report function, which prints the report and returns. The trampoline, an
//! ftrace direct call at that function's entry, freezes the recorder with one own record (its
//! call), after the call of the report function at the check that fired. All names share one
//! ftrace_ops (src/glue.c says why): a name of `default` that this kernel lacks or cannot trace
//! is left out with one line; a name the user gave that cannot be hooked refuses arming, with
//! the reason.
//!
//! The capture is provisional (asm/stubs.S): it does not advance its CPU's count, so the next
//! capture on that CPU takes the same slot. When the report's snapshot is printed inside the
//! report (src/printer.rs `print_report`), [`Armed::keep_report`] advances the count past it.
//! A report the kernel suppresses is never printed: a storm of them cycles through one slot.

use core::fmt::Write;

use kernel::str::CStr;

use super::*;
use crate::printer::LineBuf;

impl Armed {
    /// Makes the report capture `seq`, the snapshot at area offset `off` in `cpu`'s ring,
    /// permanent, if it is still in the CPU's next slot: the CPU's count goes past it. Returns
    /// whether it did.
    ///
    /// # Safety
    ///
    /// Interrupts are off and this runs on CPU `cpu` (nothing but an NMI can capture there
    /// meanwhile, and that one is kept out by the busy word).
    pub(crate) unsafe fn keep_report(&self, cpu: usize, off: usize, seq: u64) -> bool {
        let area = &*self.area;
        let g = area.geometry();
        if cpu >= g.nr_cpus || g.ring == 0 {
            return false;
        }
        let block = g.cpu_block(cpu);
        // SAFETY: the CPU block's busy word, a 4-byte-aligned u32 of the area, alive while
        // `self` is; only this CPU's stubs and the functions of this CPU write it.
        let busy = unsafe { AtomicU32::from_ptr(area.at(block + layout::cpu::BUSY).cast()) };
        if busy.swap(1, Ordering::Acquire) != 0 {
            return false;
        }
        let count = area.u64_at(block + layout::cpu::COUNT);
        // PANIC: none, `g.ring` is not 0 (checked above).
        let next = (count % g.ring as u64) as usize;
        let s = area.snapshot(cpu, next);
        let kept = s.off == off && s.seq == seq;
        if kept {
            area.store_u64(block + layout::cpu::COUNT, count + 1);
        }
        busy.store(0, Ordering::Release);
        kept
    }
}

/// Attaches the report trampoline to the functions of the `reports` parameter, as one ftrace
/// direct call. A name of `default` that ftrace cannot trace is left out, one line saying
/// which; a name the user gave refuses arming, as does a failed attachment if the user named
/// any function.
pub(super) fn attach_reports(armed: &mut Armed) -> Result {
    // SAFETY: glue.c's parameter text: NUL-terminated, set only at load or boot.
    let text = unsafe { CStr::from_char_ptr(ffi::lbr_dump_reports_text()) };
    let Ok(list) = text
        .to_str()
        .map_err(|_| ())
        .and_then(|t| crate::reports::parse(t).map_err(|_| ()))
    else {
        // Checked when set: not reached.
        pr_err!("refusing to arm: reports: the parameter does not parse\n");
        return Err(EINVAL);
    };
    if list.names().is_empty() {
        return Ok(());
    }
    let mut hooked = LineBuf::new();
    let mut left = LineBuf::new();
    let mut user = false;
    for &(name, default) in list.names() {
        // SAFETY: `name` is `name.len()` bytes; sleeps (ftrace), under the state lock.
        let r = unsafe { ffi::lbr_dump_report_filter(name.as_ptr().cast(), name.len()) };
        user |= !default;
        let line = if r == 0 { &mut hooked } else { &mut left };
        let sep = if line.as_bytes().is_empty() { "" } else { ", " };
        let _ = write!(line, "{sep}{name}");
        if r != 0 && !default {
            pr_err!(
                "refusing to arm: reports: {name}: nothing ftrace can trace has that name (not in this kernel, inlined, or built without fentry)\n"
            );
            // SAFETY: empties the filter set above (nothing is attached).
            unsafe { ffi::lbr_dump_report_detach() };
            return Err(ENODEV);
        }
    }
    if !left.as_bytes().is_empty() {
        pr_info!(
            "reports: not hooked (nothing ftrace can trace has that name here): {}\n",
            text_of(&left)
        );
    }
    if hooked.as_bytes().is_empty() {
        return Ok(());
    }
    // SAFETY: sleeps (ftrace), under the state lock; detached by `detach_panic_path`.
    let r = unsafe { ffi::lbr_dump_report_attach() };
    if r == 0 {
        armed.panic.reports = true;
        pr_info!("reports: hooked: {}\n", text_of(&hooked));
        return Ok(());
    }
    let why = match r {
        -16 => "another ftrace direct call is attached to one of them",
        -19 => "the kernel has no DYNAMIC_FTRACE_WITH_DIRECT_CALLS",
        _ => "ftrace refused the direct call",
    };
    if user {
        pr_err!("refusing to arm: reports: {}: {why}\n", text_of(&hooked));
        return Err(ENODEV);
    }
    pr_warn!("reports: none hooked: {}: {why}\n", text_of(&hooked));
    Ok(())
}

/// A line's text (ASCII: names and fixed words).
fn text_of(l: &LineBuf) -> &str {
    core::str::from_utf8(l.as_bytes()).unwrap_or("")
}
