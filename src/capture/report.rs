// SPDX-License-Identifier: GPL-2.0

//! Reports that are calls: the report trampoline (asm/stubs.S `lbr_dump_report_hook`) attached
//! to the entry of the kernel's report functions the `reports` parameter names
//! (src/reports.rs), and a report's provisional capture made permanent once printed.
//!
//! KASAN, KFENCE's reports from kfree(), UBSAN and the hardened list checks do not oops: their
//! check calls a report function, which prints the report and returns. At that function's
//! entry lbr-dump freezes the recorder with one own record, after the call of the report
//! function at the check that fired: with the IDT, an int3 (a kprobe past ENDBR and past the
//! ftrace site) that the #BP stub captures; under FRED, for a glob of names and for what kprobes
//! refuse, the report trampoline as an ftrace direct call, all names in one ftrace_ops (src/glue.c
//! says why). A name of `default` that this kernel lacks or cannot hook is left out with one
//! line; a name the user gave that cannot be hooked refuses arming, with the reason.
//!
//! The capture is provisional (asm/stubs.S): it does not advance its CPU's count, so the next
//! capture on that CPU takes the same slot. When the report's snapshot is printed inside the
//! report (src/printer.rs `print_report`), [`Armed::keep_report`] advances the count past it.
//! A report the kernel suppresses is never printed: a storm of them cycles through one slot.

use kernel::{ffi::c_ulong, str::CStr};

use super::*;

impl Armed {
    /// Makes the report capture `seq`, the snapshot at area offset `off` in `cpu`'s ring,
    /// permanent, if it is still in the CPU's next slot: its provisional mark goes, and the
    /// CPU's count goes past it. Returns whether it did. Called before the snapshot is printed
    /// (and sealed).
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
            // Not provisional any more (before the printer seals it), then past the count.
            area.store_u32(
                off + layout::snap::STATE,
                s.state & !layout::SNAP_PROVISIONAL,
            );
            area.store_u64(block + layout::cpu::COUNT, count + 1);
        }
        busy.store(0, Ordering::Release);
        kept
    }
}

/// What [`prepare_reports`] did, for [`attach_reports`] to finish and say.
pub(super) struct ReportPlan {
    /// Names in the report trampoline's ftrace filter.
    direct: KVec<u8>,
    /// Names that got an int3 (a kprobe), and how many; the addresses after their int3s.
    int3: KVec<u8>,
    nr_int3: usize,
    ips: [u64; ffi::REPORT_KPROBES],
    /// Names of `default` this kernel cannot hook, with the reason.
    left: KVec<u8>,
    /// Whether the user named any function (then a failure to attach refuses arming).
    user: bool,
}

impl ReportPlan {
    /// Whether the #BP gate must point at its stub.
    pub(super) fn needs_int3(&self) -> bool {
        self.nr_int3 > 0
    }

    /// Writes the #BP stub's table (after `configure_stubs`, which empties it, and before
    /// `hook_gates`).
    pub(super) fn configure_ips(&self) {
        configure_report_ips(&self.ips[..self.nr_int3]);
    }
}

/// Appends `name` (and `note`) to a comma list.
fn add(list: &mut KVec<u8>, name: &str, note: &str) -> Result {
    if !list.is_empty() {
        list.extend_from_slice(b", ", GFP_KERNEL)?;
    }
    list.extend_from_slice(name.as_bytes(), GFP_KERNEL)?;
    list.extend_from_slice(note.as_bytes(), GFP_KERNEL)?;
    Ok(())
}

/// Why a kprobe could not be placed, as a note after the name.
fn kprobe_refusal(errno: c_int) -> &'static str {
    match errno {
        -2 => " (not in this kernel)",
        -28 => " (more than 32 int3s)",
        -11 => " (kprobes are disarmed: debugfs kprobes/enabled)",
        -19 => " (no kprobes)",
        _ => " (kprobes refuse it)",
    }
}

/// Before recording goes on: each name of the `reports` parameter gets a kprobe whose int3 the
/// #BP stub will capture (with the IDT: FRED delivers #BP as a software exception, which
/// lbr-dump's FRED entry does not capture; [`ReportPlan::configure_ips`] writes the #BP stub's
/// table before the gates are hooked); a glob, a name
/// under FRED and a name kprobes refuse go into the report trampoline's filter if ftrace can
/// trace them. A name of `default` that can be hooked neither way is left out, one line saying
/// so at [`attach_reports`]; a name the user gave refuses arming.
pub(super) fn prepare_reports(armed: &mut Armed) -> Result<ReportPlan> {
    let mut plan = ReportPlan {
        direct: KVec::new(),
        int3: KVec::new(),
        nr_int3: 0,
        ips: [0; ffi::REPORT_KPROBES],
        left: KVec::new(),
        user: false,
    };
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
    // SAFETY: no preconditions.
    let every_list_op = unsafe { ffi::lbr_dump_list_checks_always_called() };
    // SAFETY: no preconditions.
    let ubsan = unsafe { ffi::lbr_dump_ubsan_config() };
    for &(name, default) in list.names() {
        plan.user |= !default;
        if default && every_list_op && name.starts_with("__list_") {
            // An int3 or a call at every list operation: left out of `default`.
            let note = " (CONFIG_DEBUG_LIST calls it at every list operation)";
            add(&mut plan.left, name, note)?;
            continue;
        }
        if let Some(why) = crate::reports::uncalled(name, ubsan).filter(|_| default) {
            // Its sanitizer is not in this kernel: an int3 for nothing.
            add(&mut plan.left, name, " (")?;
            plan.left.extend_from_slice(why.as_bytes(), GFP_KERNEL)?;
            plan.left.extend_from_slice(b")", GFP_KERNEL)?;
            continue;
        }
        let note = if crate::fred::active() {
            " (FRED: no int3 hook)"
        } else if name.contains('*') {
            // Kprobes take exact names.
            " (a glob matching nothing ftrace can trace)"
        } else {
            let mut ip: c_ulong = 0;
            // SAFETY: `name` is `name.len()` bytes, `ip` is writable; sleeps, under the state
            // lock; removed by `detach_panic_path` (the `kprobes` flag, set below).
            let r =
                unsafe { ffi::lbr_dump_report_kprobe(name.as_ptr().cast(), name.len(), &mut ip) };
            if r == 0 {
                armed.panic.kprobes = true;
                plan.ips[plan.nr_int3] = ip as u64;
                plan.nr_int3 += 1;
                add(&mut plan.int3, name, "")?;
                continue;
            }
            kprobe_refusal(r)
        };
        // The direct call: under FRED, for globs, and for what kprobes refuse (a NOKPROBE
        // function ftrace traces). Not otherwise: its ftrace_ops costs two RCU-tasks grace
        // periods at every disarming, where the kprobes' removal costs one RCU grace period.
        // SAFETY: `name` is `name.len()` bytes; sleeps (ftrace), under the state lock.
        if unsafe { ffi::lbr_dump_report_filter(name.as_ptr().cast(), name.len()) } == 0 {
            // The filter is emptied, or the trampoline detached, by `detach_panic_path`.
            armed.panic.reports = true;
            add(&mut plan.direct, name, "")?;
            continue;
        }
        if !default {
            pr_err!("refusing to arm: reports: {name}{note}\n");
            return Err(ENODEV);
        }
        add(&mut plan.left, name, note)?;
    }
    Ok(plan)
}

/// After the gates are hooked (the #BP gate too if int3s were placed): attaches the report
/// trampoline to the functions filtered, as one ftrace direct call, and says in one line each
/// what is hooked and how, and what is not. A failed attachment refuses arming if the user
/// named any function.
pub(super) fn attach_reports(plan: ReportPlan) -> Result {
    if !plan.left.is_empty() {
        pr_info!("reports: not hooked: {}\n", text_of(&plan.left));
    }
    if plan.nr_int3 > 0 {
        pr_info!(
            "reports: hooked by int3 (vector 3 hooked for them): {}\n",
            text_of(&plan.int3)
        );
    }
    if plan.direct.is_empty() {
        return Ok(());
    }
    // SAFETY: sleeps (ftrace), under the state lock; detached by `detach_panic_path`.
    let r = unsafe { ffi::lbr_dump_report_attach() };
    if r == 0 {
        pr_info!(
            "reports: hooked by direct call: {}\n",
            text_of(&plan.direct)
        );
        return Ok(());
    }
    let why = match r {
        -16 => "another ftrace direct call is attached to one of them",
        -19 => "the kernel has no DYNAMIC_FTRACE_WITH_DIRECT_CALLS",
        _ => "ftrace refused the direct call",
    };
    if plan.user {
        pr_err!(
            "refusing to arm: reports: {}: {why}\n",
            text_of(&plan.direct)
        );
        return Err(ENODEV);
    }
    pr_warn!("reports: not hooked: {}: {why}\n", text_of(&plan.direct));
    Ok(())
}

/// A list's text (ASCII: names and fixed words).
fn text_of(l: &[u8]) -> &str {
    core::str::from_utf8(l).unwrap_or("")
}
