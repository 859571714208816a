// SPDX-License-Identifier: GPL-2.0

//! Windows: read-only aliases of a page that lbr-dump makes writable only for the stores that
//! change it (src/glue.c `lbr_dump_window_write`): the IDT page, whose gates point at the stubs
//! while armed, and the stubs' configuration page (asm/stubs.S `lbr_dump_capture`, read-only once
//! init is done). lbr-dump keeps no standing writable view of either: a kernel write primitive
//! finds nothing to write through that steers the stubs (issue 22; Documentation/lbr-dump/design.rst "How capture works").

use core::{
    ptr,
    sync::atomic::{AtomicPtr, Ordering},
};

use kernel::{ffi::c_void, prelude::*};

use crate::ffi;

/// A mapped window.
///
/// INVARIANT: `w` was filled by a successful `lbr_dump_window_map` and is unmapped only by
/// `Drop`: `w.va` is a read-only alias of one page, valid on every CPU, and `w.pte` its PTE.
pub(crate) struct PageWindow {
    w: ffi::Window,
}

// SAFETY: the window is a kernel mapping valid on every CPU; writes through it go through
// `lbr_dump_window_write`, which serializes them with a lock.
unsafe impl Send for PageWindow {}
// SAFETY: as above; `&PageWindow` only reads through the read-only alias or writes under the lock.
unsafe impl Sync for PageWindow {}

impl PageWindow {
    /// Maps a window onto the page that holds `target`, a kernel address.
    pub(crate) fn map(target: usize) -> Result<Self> {
        let mut w = ffi::Window {
            va: ptr::null_mut(),
            pte: ptr::null_mut(),
            ro: 0,
            rw: 0,
        };
        // SAFETY: `w` is valid for writes; `target` is a mapped kernel address (the caller's
        // IDT or static), which `lbr_dump_window_map` only translates.
        let r = unsafe { ffi::lbr_dump_window_map(&mut w, target) };
        if r != 0 {
            return Err(Error::from_errno(r));
        }
        // INVARIANT: mapped by `lbr_dump_window_map`, which returned 0.
        Ok(Self { w })
    }

    /// The window's address (its page's first byte): readable at any time, writable only inside
    /// [`PageWindow::write`].
    pub(crate) fn va(&self) -> *mut u8 {
        self.w.va.cast()
    }

    /// What the stop trampoline needs to open and close the window itself: the PTE's address,
    /// its writable and its read-only value.
    pub(crate) fn pte(&self) -> (u64, u64, u64) {
        (self.w.pte as u64, self.w.rw, self.w.ro)
    }

    /// Runs `f(va)` on this CPU with interrupts off while the page is writable through `va`
    /// ([`PageWindow::va`]); it is read-only again when this returns.
    ///
    /// # Safety
    ///
    /// `f` must not sleep, must not write outside the page, and every store it makes must be one
    /// that the page's readers (the CPU delivering an exception through the IDT, the stubs) can
    /// see at any instant.
    pub(crate) unsafe fn write<F: FnMut(*mut u8)>(&self, mut f: F) {
        /// # Safety
        ///
        /// `data` must be the `&mut F` that [`PageWindow::write`] passes, alive for the call.
        unsafe extern "C" fn call<F: FnMut(*mut u8)>(va: *mut c_void, data: *mut c_void) {
            // SAFETY: the caller's `&mut F`, alive and used by nothing else during the call.
            let f = unsafe { &mut *data.cast::<F>() };
            f(va.cast());
        }
        // SAFETY: `self.w` is mapped (type invariant); `call::<F>` gets back `&mut f`, which
        // outlives the call; the caller vouches for what `f` does.
        unsafe { ffi::lbr_dump_window_write(&self.w, call::<F>, ptr::from_mut(&mut f).cast()) };
    }
}

impl Drop for PageWindow {
    fn drop(&mut self) {
        // SAFETY: mapped (type invariant) and not used after this.
        unsafe { ffi::lbr_dump_window_unmap(&mut self.w) };
    }
}

/// The window onto the stubs' configuration page, once mapped: by the first arming (process
/// context), kept until the module is unloaded ([`unmap_config`]).
static CONFIG: AtomicPtr<PageWindow> = AtomicPtr::new(ptr::null_mut());

/// Maps the configuration's window unless it is mapped. Process context; callers are serialized
/// (the state lock).
pub(crate) fn map_config() -> Result {
    if !CONFIG.load(Ordering::Acquire).is_null() {
        return Ok(());
    }
    let w = PageWindow::map(ptr::addr_of!(ffi::lbr_dump_capture) as usize)?;
    let w = KBox::new(w, GFP_KERNEL)?;
    CONFIG.store(KBox::into_raw(w), Ordering::Release);
    // SAFETY: the configuration's page (asm/stubs.S aligns it and fills it alone), written from
    // now on only through the window.
    unsafe { ffi::lbr_dump_config_protect(ptr::addr_of_mut!(ffi::lbr_dump_capture).cast()) };
    Ok(())
}

/// Unmaps the configuration's window: at unload, once disarmed (no callback of lbr-dump's is
/// registered any more, so none can be writing the configuration).
pub(crate) fn unmap_config() {
    let w = CONFIG.swap(ptr::null_mut(), Ordering::AcqRel);
    if !w.is_null() {
        // SAFETY: from `KBox::into_raw` in `map_config`, and no longer reachable through CONFIG.
        drop(unsafe { KBox::from_raw(w) });
    }
}

/// Runs `f` with the stubs' configuration page writable through the pointer it gets, on this CPU
/// with interrupts off. Does nothing (and says so) if the window is not mapped: nothing was
/// armed, so there is nothing the stubs read.
///
/// # Safety
///
/// As for [`PageWindow::write`]: `f` must not sleep, and every store it makes must be one that
/// the stubs can see at any instant (a whole, aligned u64 or u32, or any store while no gate
/// points at a stub and no trampoline is attached).
pub(crate) unsafe fn write_config<F: FnMut(*mut ffi::ConfigPage)>(mut f: F) {
    // SAFETY: CONFIG holds a mapped window from `map_config` until `unmap_config`, which runs
    // only once nothing can call this any more.
    let Some(w) = (unsafe { CONFIG.load(Ordering::Acquire).as_ref() }) else {
        pr_err!("the stubs' configuration window is not mapped: not written\n");
        return;
    };
    let offset = ptr::addr_of!(ffi::lbr_dump_capture) as usize & (crate::layout::cfg::PAGE - 1);
    // SAFETY: the caller's contract; the configuration fills its page (offset 0: asm/stubs.S
    // aligns it), so the pointer is the window's view of it.
    unsafe { w.write(|va| f(va.wrapping_add(offset).cast())) };
}
