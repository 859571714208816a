// SPDX-License-Identifier: GPL-2.0

//! The panic path: the stop gates prepared, the panic and stop trampolines attached (ftrace
//! direct calls), `nmi_freeze`'s NMI watch, and their detaching.

use super::*;

/// What the panic path does while armed: which trampolines are attached (each detached first
/// when disarming; one the kernel refused was reported with its reason).
#[derive(Clone, Copy, Default)]
pub(crate) struct PanicPath {
    /// asm/stubs.S `lbr_dump_panic_entry` at panic(), vpanic(): the panicking CPU is captured.
    pub(crate) panic: bool,
    /// `lbr_dump_kexec_entry` is at crash_kexec(), and `lbr_dump_reset_entry` at panic_reset()
    /// to give back the claim of a crash_kexec() that returns; or the kernel has no
    /// crash_kexec(). An oops that goes to kdump is captured there and switches BTS off before
    /// machine_kexec().
    pub(crate) kexec: bool,
    /// asm/stubs.S `lbr_dump_stop_entry` at native_stop_other_cpus(), nmi_shootdown_cpus(): the
    /// stop gates are switched there, and the other CPUs are captured as they stop.
    pub(crate) stop: bool,
}

/// The attached trampolines; detached on drop (see [`detach_panic_path`]).
#[derive(Default)]
pub(super) struct Trampolines {
    pub(super) attached: PanicPath,
    /// The report trampoline's ftrace filter holds functions, or the trampoline is attached
    /// to them (src/capture/report.rs).
    pub(super) reports: bool,
    /// Kprobes of lbr-dump's are at report functions' entry (src/capture/report.rs).
    pub(super) kprobes: bool,
}

impl Drop for Trampolines {
    fn drop(&mut self) {
        detach_panic_path(self);
    }
}

/// glue.c's NMI handler (`nmi_freeze`: it thaws what the watch stub freezes); unregistered on
/// drop, after the NMI gate is the kernel's again (`Armed`'s field order).
pub(super) struct NmiHandler(());

impl NmiHandler {
    fn register() -> Result<Self> {
        // SAFETY: registers glue.c's NMI handler; unregistered on drop.
        let r = unsafe { ffi::lbr_dump_nmi_handler(true) };
        if r != 0 {
            pr_err!(
                "refusing to arm: nmi_freeze: cannot register an NMI handler ({:?})\n",
                Error::from_errno(r)
            );
            return Err(Error::from_errno(r));
        }
        Ok(NmiHandler(()))
    }
}

impl Drop for NmiHandler {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; unregistering waits for running handlers.
        unsafe { ffi::lbr_dump_nmi_handler(false) };
    }
}

/// The panic path: prepares the stop gates, then attaches the panic and stop trampolines. A
/// kernel that refuses them leaves lbr-dump armed for exceptions, with a line that says what is
/// missing.
pub(super) fn attach_panic_path(armed: &mut Armed, nmi_freeze: bool) -> Result {
    let Some(entry) = armed.entry.as_mut() else {
        return Ok(());
    };
    let (stop, nmi_refusal) = entry.prepare_stop();
    let save = armed.stop_save.base as u64;
    // The trampolines, the only readers of these fields, are not attached yet (they are
    // attached below and detached before the configuration is written again).
    configure_panic_path(save, stop.window, stop.gates);
    let mut kexec = false;
    // SAFETY: `kexec` is valid for writes; sleeps (ftrace), under the state lock.
    let r = unsafe { ffi::lbr_dump_panic_attach(&mut kexec) };
    if r == 0 {
        armed.panic.attached.panic = true;
        armed.panic.attached.kexec = kexec;
        if !kexec {
            pr_warn!(
                "panic path: cannot attach to crash_kexec() and panic_reset(): an oops that goes to kdump is captured by its exception alone\n"
            );
        }
    } else {
        pr_warn!(
            "panic path: cannot attach to panic() and vpanic() ({:?}): panics without an exception are not captured{}\n",
            Error::from_errno(r),
            match r {
                -19 => " (the kernel has no DYNAMIC_FTRACE_WITH_DIRECT_CALLS)",
                -16 => " (another ftrace direct call is attached to one of them)",
                _ => "",
            }
        );
        if nmi_freeze {
            pr_err!("refusing to arm: nmi_freeze needs the panic path\n");
            return Err(ENODEV);
        }
        return Ok(());
    }
    if nmi_freeze {
        freeze_at_nmi(armed, nmi_refusal)?;
    }
    // SAFETY: as above.
    let r = unsafe { ffi::lbr_dump_stop_attach() };
    if r == 0 {
        armed.panic.attached.stop = true;
    } else {
        pr_warn!(
            "panic path: cannot attach to the functions that stop the other CPUs ({:?}): only the panicking CPU is captured\n",
            Error::from_errno(r)
        );
    }
    Ok(())
}

/// `nmi_freeze`: lbr-dump's NMI handler first (it thaws what the watch stub freezes), then the
/// NMI gate to the watch stub (its static call was prepared with the stop gates). A gate that
/// cannot be hooked refuses arming: the parameter asked for it.
pub(super) fn freeze_at_nmi(armed: &mut Armed, refusal: Option<entry::Refusal>) -> Result {
    if let Some(why) = refusal {
        pr_err!(
            "refusing to arm: nmi_freeze: vector 2 (NMI): {}\n",
            why.reason()
        );
        return Err(ENODEV);
    }
    armed.nmi_handler = Some(NmiHandler::register()?);
    let Some(entry) = armed.entry.as_mut() else {
        return Err(ENODEV);
    };
    entry.watch_nmi().map_err(|why| {
        pr_err!(
            "refusing to arm: nmi_freeze: vector 2 (NMI): {}\n",
            why.reason()
        );
        ENODEV
    })
}

/// Detaches the report trampoline and the panic path's trampolines. If ftrace cannot (it was
/// shut down after an ftrace bug: the call sites stay patched), glue.c pinned the module, and
/// the trampolines are made inert: no CPU has a block (the report trampoline only freezes and
/// puts the recorder back), the panic is marked claimed (the panic trampoline likewise) and the
/// gate addresses cleared (the stop trampoline writes nothing), since the IDT alias and the save
/// areas go away with the rest of the armed state.
pub(super) fn detach_panic_path(t: &mut Trampolines) {
    let mut failed = false;
    if t.kprobes {
        // SAFETY: placed in `report::prepare_reports`; the #BP gate still points at its stub,
        // which passes every other int3 on, until the entry is dropped after this.
        unsafe { ffi::lbr_dump_report_unkprobe() };
        t.kprobes = false;
    }
    if t.reports {
        // SAFETY: filtered in `report::prepare_reports`, attached in `report::attach_reports`.
        failed |= unsafe { ffi::lbr_dump_report_detach() } != 0;
        t.reports = false;
    }
    let path = &mut t.attached;
    if path.stop {
        // SAFETY: attached in `attach_panic_path`.
        failed |= unsafe { ffi::lbr_dump_stop_detach() } != 0;
        path.stop = false;
    }
    if path.panic {
        // SAFETY: attached in `attach_panic_path`.
        failed |= unsafe { ffi::lbr_dump_panic_detach() } != 0;
        path.panic = false;
    }
    if failed {
        pr_err!("panic path: ftrace cannot detach the trampolines: they stay, inert; arming refused until reboot\n");
        DETACH_FAILED.store(true, Ordering::Relaxed);
        make_trampolines_inert();
    }
}

/// Set when ftrace could not detach the panic path's trampolines: they stay attached, and
/// arming again would write the configuration they read while they run. Arming is refused.
pub(super) static DETACH_FAILED: AtomicBool = AtomicBool::new(false);
