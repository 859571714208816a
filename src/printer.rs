// SPDX-License-Identifier: GPL-2.0

//! The oops printer: a die notifier that prints, for the oopsing CPU, the snapshot of the
//! outermost exception of the current nest, newest record first, in the line format of
//! report.rs, with the kernel's `%pS` symbols.
//!
//! Which snapshot belongs to the oops: the one whose hardware frame is the oops' `pt_regs` (the
//! stub records the address of the frame's RIP slot; `&regs->ip` is the same slot). If that
//! exception interrupted the handler of an earlier one still on the same stack (IBT: a #CP whose
//! handler BUG()s, raising a nested #UD), the earlier one is printed: an older snapshot of this
//! CPU is live when the newer exception's interrupted stack pointer lies below its frame, within
//! one stack, and its frame still holds the RIP it recorded. Nothing else is printed as this
//! crash's: without a matching snapshot, one line says so.
//!
//! Runs in the oops path with IRQs off: no allocation, no sleeping, no panics (all indexing is
//! checked and falls back to printing less).

use core::fmt::{self, Write};
use core::mem::offset_of;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::{
    bindings,
    ffi::{c_int, c_ulong, c_void},
    prelude::*,
};

use crate::capture::Armed;
use crate::ffi;
use crate::layout::{self, snap};
use crate::record;
use crate::report::{Header, RecordLine};

/// The armed state the notifier reads; set after arming, cleared before disarming.
pub(crate) static ARMED: AtomicPtr<Armed> = AtomicPtr::new(ptr::null_mut());

/// Largest distance between a nested exception's stack pointer and the outer frame that can be
/// on one stack (the kernel's stacks are at most 16 KiB + guard; IST stacks are smaller).
const STACK_SPAN: u64 = 32 * 1024;

/// A small line buffer with a NUL terminator, formatted without allocation.
pub(crate) struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    pub(crate) fn new() -> Self {
        Line {
            buf: [0; 256],
            len: 0,
        }
    }

    pub(crate) fn as_ptr(&mut self) -> *const u8 {
        let n = self.len.min(self.buf.len() - 1);
        self.buf[n] = 0;
        self.buf.as_ptr()
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - 1 - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// One snapshot in the area.
#[derive(Clone, Copy)]
struct Snap {
    base: *const u8,
}

impl Snap {
    fn u64(&self, off: usize) -> u64 {
        // SAFETY: `base` points at a snapshot inside the live area; `off` is a header offset.
        unsafe { ptr::read_volatile(self.base.add(off).cast::<u64>()) }
    }

    fn u32(&self, off: usize) -> u32 {
        // SAFETY: as above.
        unsafe { ptr::read_volatile(self.base.add(off).cast::<u32>()) }
    }
}

fn snapshots(a: &Armed, cpu: usize) -> impl Iterator<Item = Snap> + '_ {
    let g = a.area.geometry;
    (0..g.ring).map(move |slot| Snap {
        base: a.area.at(g.snapshot(cpu, slot)),
    })
}

/// The newest snapshot of this CPU older than `seq` (any sequence if `seq` is `None`) that
/// satisfies `f`.
fn newest(a: &Armed, cpu: usize, below: u64, f: impl Fn(Snap) -> bool) -> Option<Snap> {
    snapshots(a, cpu)
        .filter(|s| s.u64(snap::SEQ) != 0 && s.u64(snap::SEQ) < below && f(*s))
        .max_by_key(|s| s.u64(snap::SEQ))
}

/// Is `outer` still being handled when `inner` was taken (see the module documentation)?
fn encloses(outer: Snap, inner: Snap) -> bool {
    let frame = outer.u64(snap::FRAME);
    let sp = inner.u64(snap::RSP);
    if !(sp < frame && frame - sp < STACK_SPAN) {
        return false;
    }
    let mut rip = 0u64;
    // SAFETY: reads 8 bytes at a kernel address that may be gone; copy_from_kernel_nofault
    // handles faults and writes into the local.
    let r = unsafe {
        bindings::copy_from_kernel_nofault(
            ptr::addr_of_mut!(rip).cast(),
            frame as *const c_void,
            8,
        )
    };
    r == 0 && rip == outer.u64(snap::RIP)
}

fn print_raw(line: &mut Line) {
    // SAFETY: a NUL-terminated format with one `%s` and a NUL-terminated argument.
    unsafe { bindings::_printk(c"\x013lbr_dump: %s\n".as_ptr().cast(), line.as_ptr()) };
}

/// Prints the snapshot that belongs to the oops with `regs` on this CPU.
fn print_for(a: &Armed, regs: *const bindings::pt_regs) {
    // SAFETY: reads a segment limit; callable anywhere.
    let cpu = unsafe { ffi::lbr_dump_cpu_number() } as usize;
    let frame = regs as u64 + offset_of!(bindings::pt_regs, ip) as u64;
    let mut l = Line::new();
    if cpu >= a.area.geometry.nr_cpus {
        let _ = write!(l, "v1 cpu={cpu} none: CPU number beyond the snapshot area");
        return print_raw(&mut l);
    }
    let Some(mut s) = newest(a, cpu, u64::MAX, |s| s.u64(snap::FRAME) == frame) else {
        let _ = write!(
            l,
            "v1 cpu={cpu} none: no snapshot of this exception (vector not hooked, nested in a capture, or not an exception)"
        );
        return print_raw(&mut l);
    };
    while let Some(outer) = newest(a, cpu, s.u64(snap::SEQ), |o| encloses(o, s)) {
        s = outer;
    }
    print_snapshot(a, cpu, s);
}

fn print_snapshot(a: &Armed, cpu: usize, s: Snap) {
    let layout = a.area.layout;
    let n = layout.values().min(record::MAX_VALUES);
    let mut values = [0u64; record::MAX_VALUES];
    for (i, v) in values[..n].iter_mut().enumerate() {
        *v = s.u64(snap::VALUES + 8 * i);
    }
    let state = s.u32(snap::STATE);
    let records = record::records(layout, &values[..n]);
    let count = records.map_or(0, |r| r.count());
    let (format, _) = layout.codes();
    let h = Header {
        cpu: cpu as u32,
        seq: s.u64(snap::SEQ),
        vector: s.u32(snap::VECTOR),
        error: s.u64(snap::ERROR),
        rip: s.u64(snap::RIP),
        cr2: s.u64(snap::CR2),
        flavour: layout.flavour_name(),
        format,
        records: count as u32,
        state: layout::snapshot_state(
            state,
            s.u64(snap::CTL_ENTRY),
            a.area.ctl_armed(),
            a.area.filter(s.base as usize - a.area.at(0) as usize),
        ),
    };
    let mut l = Line::new();
    let _ = write!(l, "{h}");
    print_raw(&mut l);
    if let Some(records) = record::records(layout, &values[..n]) {
        for (i, b) in records.enumerate() {
            let mut l = Line::new();
            let _ = write!(
                l,
                "{}",
                RecordLine {
                    index: i as u32,
                    branch: b
                }
            );
            // SAFETY: NUL-terminated format; `%s` gets a NUL-terminated buffer, the two `%pS`
            // get addresses, which printk symbolizes without dereferencing them.
            unsafe {
                bindings::_printk(
                    c"\x013lbr_dump: %s | %pS -> %pS\n".as_ptr().cast(),
                    l.as_ptr(),
                    b.from as *const c_void,
                    b.to as *const c_void,
                )
            };
        }
    }
    let mut l = Line::new();
    let _ = write!(l, "end cpu={cpu} seq={}", h.seq);
    print_raw(&mut l);
    // Seal it for crash-dump readers: the checksum covers the snapshot as printed.
    let size = a.area.geometry.snap_size();
    let off = s.base as usize - a.area.at(0) as usize;
    let sum = layout::checksum(a.area.bytes(off, size), snap::CHECKSUM);
    // SAFETY: the snapshot's checksum field, inside the area; this CPU is in the oops path.
    unsafe { ptr::write_volatile(s.base.add(snap::CHECKSUM).cast::<u64>().cast_mut(), sum) };
}

/// The die notifier.
unsafe extern "C" fn on_die(_nb: *mut bindings::notifier_block, val: c_ulong, data: *mut c_void) -> c_int {
    if val != ffi::DIE_OOPS || data.is_null() {
        return ffi::NOTIFY_DONE;
    }
    // SAFETY: the die chain passes a `struct die_args` for DIE_OOPS.
    let args = unsafe { &*data.cast::<ffi::DieArgs>() };
    // SAFETY: `ARMED` is set only while the pointee lives (cleared before it is dropped, and the
    // notifier is unregistered first).
    if let Some(a) = unsafe { ARMED.load(Ordering::Acquire).as_ref() } {
        print_for(a, args.regs);
    }
    ffi::NOTIFY_DONE
}

/// The registered die notifier; unregistered on drop.
pub(crate) struct Notifier {
    nb: KBox<bindings::notifier_block>,
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
        // SAFETY: `nb` lives in a box that outlives the registration (unregistered in drop).
        let r = unsafe { ffi::register_die_notifier(&mut *nb) };
        if r != 0 {
            return Err(Error::from_errno(r));
        }
        Ok(Notifier { nb })
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        // SAFETY: registered in `register`.
        unsafe { ffi::unregister_die_notifier(&mut *self.nb) };
    }
}
