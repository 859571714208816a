// SPDX-License-Identifier: GPL-2.0

//! The enable controls: module parameters at load, /sys/kernel/lbr_dump/enabled at run time
//! (the attribute itself is in glue.c, which calls the two functions exported here).
//!
//! One `Control` exists while the module is loaded. Writes to `enabled` are serialized by
//! kernfs (one attribute), and the attribute is created after the `Control` is published and
//! removed before it is torn down, so `set_enabled` never runs concurrently with itself or
//! with load/unload.

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::{ffi::c_int, prelude::*};

use crate::capture::{self, Armed, Vectors};
use crate::printer::{self, Notifier};
use crate::probe::Found;

/// lbr-dump's state between load and unload.
pub(crate) struct Control {
    pub(crate) found: Found,
    kernel_only: bool,
    pub(crate) vectors: Vectors,
    text_base: u64,
    /// While armed: the oops printer (dropped first), then the armed state.
    armed: Option<(Notifier, KBox<Armed>)>,
}

static CONTROL: AtomicPtr<Control> = AtomicPtr::new(ptr::null_mut());

impl Control {
    pub(crate) fn new(found: Found, kernel_only: bool, vectors: Vectors, text_base: u64) -> Self {
        Control {
            found,
            kernel_only,
            vectors,
            text_base,
            armed: None,
        }
    }

    /// Arms or disarms; a no-op if already in that state.
    pub(crate) fn set(&mut self, on: bool) -> Result {
        match (on, self.armed.is_some()) {
            (true, false) => {
                let armed = capture::arm(
                    &self.found.recorder,
                    self.kernel_only,
                    self.vectors,
                    self.text_base,
                )?;
                printer::ARMED.store(&*armed as *const Armed as *mut Armed, Ordering::Release);
                let notifier = match Notifier::register() {
                    Ok(n) => n,
                    Err(e) => {
                        printer::ARMED.store(ptr::null_mut(), Ordering::Release);
                        return Err(e);
                    }
                };
                pr_info!(
                    "armed: vectors {}, recording {}\n",
                    format_args!("{}", self.vectors),
                    if self.kernel_only { "kernel branches" } else { "all rings" }
                );
                self.armed = Some((notifier, armed));
            }
            (false, true) => {
                if let Some((notifier, armed)) = self.armed.take() {
                    drop(notifier);
                    printer::ARMED.store(ptr::null_mut(), Ordering::Release);
                    drop(armed);
                }
                pr_info!("disarmed\n");
            }
            _ => {}
        }
        Ok(())
    }

    /// Publishes `self` for the sysfs callbacks.
    ///
    /// # Safety
    ///
    /// `self` must stay at this address until [`Control::unpublish`] is called.
    pub(crate) unsafe fn publish(&mut self) {
        CONTROL.store(self, Ordering::Release);
    }

    /// Withdraws `self` from the sysfs callbacks (after the attributes are removed).
    pub(crate) fn unpublish(&mut self) {
        CONTROL.store(ptr::null_mut(), Ordering::Release);
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.set(false);
    }
}

/// Called by glue.c's `enabled` store with a validated value.
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_set_enabled(on: bool) -> c_int {
    // SAFETY: published while the attribute exists; stores are serialized by kernfs.
    match unsafe { CONTROL.load(Ordering::Acquire).as_mut() } {
        Some(c) => match c.set(on) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        },
        None => ENODEV.to_errno(),
    }
}

/// Called by glue.c's `enabled` show.
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_is_enabled() -> bool {
    // SAFETY: as above; reading `armed` races only with a store, which kernfs serializes
    // against other stores, not shows: the answer is the state before or after that store.
    unsafe { CONTROL.load(Ordering::Acquire).as_ref() }.is_some_and(|c| c.armed.is_some())
}

/// Called by glue.c's `captures` show: the stubs' sequence counter, i.e. the number of snapshots
/// taken since lbr-dump was last armed (arming resets it with the rest of the configuration).
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_captures() -> u64 {
    // SAFETY: reads one aligned u64 of the stubs' configuration; the stubs update it with a
    // locked add, so the read sees a value that was current at some point.
    unsafe { ptr::addr_of!(crate::ffi::lbr_dump_capture.seq).read_volatile() }
}
