// SPDX-License-Identifier: GPL-2.0

//! The enable controls: module parameters at load, /sys/kernel/lbr_dump/enabled at run time
//! (the attributes are in glue.c, which calls the functions exported here).
//!
//! Every change of lbr-dump's state (arming at load, the `enabled` attribute, disarming at
//! unload) happens on [`Controls`] under one lock, the `Mutex<Controls>` of the pinned module object
//! (lbr_dump.rs). kernfs serializes writes per open file, not per attribute, so two writers of
//! `enabled` do run concurrently: the lock, not kernfs, keeps them from arming twice. Nothing
//! here hands out a `&mut Controls` but the lock's guard.

use core::fmt::Write;
use core::pin::Pin;
use core::ptr;
use core::sync::atomic::{AtomicU8, Ordering};

use kernel::{
    ffi::{c_char, c_int},
    prelude::*,
    sync::Mutex,
};

use crate::capture::{self, Armed, PanicPath};
use crate::facility::Filter;
use crate::live::{Live, Published};
use crate::plan::{self, Options, Rings, Vectors};
use crate::printer::{self, Notifier};
use crate::probe::Found;

/// lbr-dump's state between load and unload, behind the module's lock.
pub(crate) struct Controls {
    pub(crate) found: Found,
    /// What arming is asked for (the `all_rings`, `vectors` and `nmi_freeze` parameters).
    pub(crate) options: Options,
    text_base: u64,
    /// While armed: the oops printer and the armed state it reads.
    armed: Option<Active>,
}

/// Armed, with the oops printer on. Dropped in field order: the notifiers first (unregistering
/// waits for running ones), then the armed state they read.
struct Active {
    _printer: Notifier,
    armed: Published<Armed>,
}

impl Controls {
    pub(crate) fn new(found: Found, options: Options, text_base: u64) -> Self {
        Controls {
            found,
            options,
            text_base,
            armed: None,
        }
    }

    /// Arms or disarms; a no-op if already in that state.
    pub(crate) fn set_enabled(&mut self, on: bool) -> Result {
        match (on, self.armed.is_some()) {
            (true, false) => {
                let armed = capture::arm(&self.found.recorder, self.options, self.text_base)?;
                // SAFETY: the notifiers, the only readers of `printer::ARMED`, are unregistered
                // before this drops (`Active`'s field order; on error, they were not registered).
                let armed = unsafe { Published::new(&printer::ARMED, armed) };
                let printer = Notifier::register()?;
                let unfiltered = !armed.arm_values().filters_rings();
                let backing = self.found.hypervisor.backing(&self.found.recorder);
                pr_info!(
                    "armed: vectors {}, recording {} ({}), panic path {}{}{}{}{}\n",
                    format_args!("{}", armed.hooked),
                    match (self.options.rings, unfiltered) {
                        (_, true) => "all rings (this model has no filter MSR)",
                        (Rings::Kernel, false) => "kernel branches",
                        (Rings::All, false) => "all rings",
                    },
                    match self.options.filter {
                        Filter::All => "all branches",
                        Filter::Functions => "filter=functions: calls, returns, indirect jumps",
                        Filter::Calls => "filter=calls: calls and returns",
                    },
                    match armed.panic_path() {
                        PanicPath { panic: false, .. } => "off",
                        PanicPath {
                            stop: true,
                            kexec: true,
                            ..
                        } => "on",
                        PanicPath {
                            stop: false,
                            kexec: true,
                            ..
                        } => "on (the panicking CPU only)",
                        PanicPath {
                            stop: true,
                            kexec: false,
                            ..
                        } => "on (not at crash_kexec())",
                        PanicPath {
                            stop: false,
                            kexec: false,
                            ..
                        } => {
                            "on (the panicking CPU only, not at crash_kexec())"
                        }
                    },
                    if self.options.nmi_freeze {
                        ", frozen at every kernel-mode NMI (nmi_freeze)"
                    } else {
                        ""
                    },
                    format_args!("{}", Opt(self.options.bts.map(BtsArmed))),
                    // A guest: where its records come from (probe.rs, hypervisor.rs).
                    if backing.is_some() { "; " } else { "" },
                    format_args!("{}", Opt(backing))
                );
                self.armed = Some(Active {
                    _printer: printer,
                    armed,
                });
            }
            (false, true) => {
                self.armed = None;
                pr_info!("disarmed\n");
            }
            _ => {}
        }
        Ok(())
    }

    /// The vectors whose gates point at stubs while armed, else the chosen set.
    fn shown_vectors(&self) -> Vectors {
        self.armed
            .as_ref()
            .map_or(self.options.vectors, |a| a.armed.hooked)
    }
}

/// The arming message's BTS part.
struct BtsArmed(plan::BtsOptions);

impl core::fmt::Display for BtsArmed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let total = plan::BTS_POOL * self.0.size * kernel::cpu::nr_cpu_ids() as usize;
        // MiB where it is a whole number of them, else KiB (buffer sizes are whole KiB).
        let (total, unit) = if total % (1 << 20) == 0 {
            (total >> 20, "MiB")
        } else {
            (total >> 10, "KiB")
        };
        write!(
            f,
            ", branch trace store: {} buffers of {} KiB ({} records) per CPU ({} {} for {} CPUs), {}",
            plan::BTS_POOL,
            self.0.size / 1024,
            self.0.records(),
            total,
            unit,
            kernel::cpu::nr_cpu_ids(),
            if self.0.user { "all rings" } else { "kernel branches" }
        )
    }
}

/// Displays the value if there is one, else nothing.
struct Opt<T>(Option<T>);

impl<T: core::fmt::Display> core::fmt::Display for Opt<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => Ok(()),
        }
    }
}

/// The state the sysfs callbacks use.
static CONTROL: Live<Mutex<Controls>> = Live::new();

/// Makes `module`'s state the one the sysfs callbacks use.
pub(crate) fn publish(module: Pin<&crate::LbrDump>) {
    // SAFETY: `module` is pinned, so its drop runs before its memory can be reused, and that
    // drop removes the attributes (waiting for running callbacks) before anything else
    // (lbr_dump.rs).
    unsafe { CONTROL.publish(&module.get_ref().state) };
}

/// Undoes [`publish`] for `module` (if it is the published one).
pub(crate) fn withdraw(module: Pin<&crate::LbrDump>) {
    CONTROL.withdraw(&module.get_ref().state);
}

/// The published state. Called only from the attributes' callbacks.
fn control() -> Option<&'static Mutex<Controls>> {
    // SAFETY: the callers are the attributes' callbacks, removed before the module object is
    // dropped (`publish`).
    unsafe { CONTROL.get() }
}

/// The `filter` parameter's value (`Filter as u8`); glue.c's param ops set it (at load, or at
/// boot when built in) through [`lbr_dump_filter_set`].
static FILTER: AtomicU8 = AtomicU8::new(Filter::All as u8);

/// The `filter` parameter.
pub(crate) fn filter() -> Filter {
    let code = FILTER.load(Ordering::Relaxed);
    // Only `lbr_dump_filter_set` stores, and only a `Filter`'s code.
    Filter::ALL
        .get(usize::from(code))
        .copied()
        .unwrap_or(Filter::All)
}

/// Called by glue.c's `filter` param set with the value as given (NUL-terminated).
///
/// # Safety
///
/// `val` points at a NUL-terminated string, valid for the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn lbr_dump_filter_set(val: *const c_char) -> c_int {
    // SAFETY: the caller passes a NUL-terminated string (the kernel's parameter parser does).
    let given = unsafe { CStr::from_char_ptr(val) };
    let name = given.to_str().ok();
    match name.and_then(Filter::from_name) {
        Some(f) => {
            FILTER.store(f as u8, Ordering::Relaxed);
            0
        }
        None => {
            pr_err!(
                "filter={}: not a filter (all, functions or calls)\n",
                format_args!("{}", name.unwrap_or("(not UTF-8)").trim_end())
            );
            EINVAL.to_errno()
        }
    }
}

/// Called by glue.c's `filter` param get: writes the name and a newline into `buf` (a buffer of
/// PAGE_SIZE bytes), returns the length.
///
/// # Safety
///
/// `buf` is writable for PAGE_SIZE bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn lbr_dump_filter_get(buf: *mut c_char) -> c_int {
    let name = filter().name().as_bytes();
    // SAFETY: the caller's buffer holds PAGE_SIZE bytes; a filter name is under 16.
    unsafe {
        ptr::copy_nonoverlapping(name.as_ptr(), buf.cast::<u8>(), name.len());
        *buf.add(name.len()) = b'\n' as c_char;
    }
    (name.len() + 1) as c_int
}

/// Called by glue.c's `reports` param set with the value as given (NUL-terminated): 0 if
/// src/reports.rs takes it, or -EINVAL with a line that says why.
///
/// # Safety
///
/// `val` points at a NUL-terminated string, valid for the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn lbr_dump_reports_check(val: *const c_char) -> c_int {
    // SAFETY: the caller passes a NUL-terminated string (the kernel's parameter parser does).
    let given = unsafe { CStr::from_char_ptr(val) };
    let Ok(text) = given.to_str() else {
        pr_err!("reports: not UTF-8\n");
        return EINVAL.to_errno();
    };
    match crate::reports::parse(text) {
        Ok(_) => 0,
        Err(why) => {
            pr_err!("reports={}: {}\n", text.trim_end(), format_args!("{why}"));
            EINVAL.to_errno()
        }
    }
}

/// Called by glue.c's `enabled` store with a validated value.
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_set_enabled(on: bool) -> c_int {
    match control() {
        Some(c) => match c.lock().set_enabled(on) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        },
        None => ENODEV.to_errno(),
    }
}

/// Called by glue.c's `enabled` show.
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_is_enabled() -> bool {
    control().is_some_and(|c| c.lock().armed.is_some())
}

/// Called by glue.c's `vectors` show: writes the vectors and a newline into `buf` (a sysfs
/// buffer of PAGE_SIZE bytes), returns the length.
///
/// # Safety
///
/// `buf` must be a writable buffer of PAGE_SIZE bytes (sysfs's).
#[no_mangle]
pub(crate) unsafe extern "C" fn lbr_dump_show_vectors(buf: *mut c_char) -> c_int {
    let mut line = crate::printer::LineBuf::new();
    if let Some(c) = control() {
        let _ = write!(line, "{}", c.lock().shown_vectors());
    }
    let text = line.as_bytes();
    // SAFETY: `buf` is a sysfs show buffer of PAGE_SIZE bytes; `LineBuf` holds at most 255 bytes,
    // plus the newline.
    unsafe {
        ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = b'\n' as c_char;
    }
    (text.len() + 1) as c_int
}

/// Called by glue.c's `captures` show: the stubs' sequence counter, i.e. the number of snapshots
/// taken since lbr-dump was last armed (arming resets it with the rest of the configuration).
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_captures() -> u64 {
    // SAFETY: reads one aligned u64 of the stubs' counters; the stubs update it with a
    // locked add, so the read sees a value that was current at some point.
    unsafe { ptr::addr_of!(crate::ffi::lbr_dump_live.seq).read_volatile() }
}

/// Called by glue.c's `rearms` show: the times lbr-dump's debug notifier or breakpoint callback
/// switched recording back on after a #DB had cleared it, since the module was loaded.
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_rearms() -> u64 {
    capture::rearms()
}
