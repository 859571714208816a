// SPDX-License-Identifier: GPL-2.0

//! Recording back on after a #DB that no stub re-armed: lbr-dump's callback at the head of the
//! die chain (or, where ftrace cannot put it there, a debug notifier).
//!
//! Delivery of #DB clears the LBR switch (DEBUGCTL.LBR; Arch LBR: LBREn). With the IDT and #DB
//! among the chosen vectors, `lbr_dump_rearm_1` (asm/stubs.S) puts it back in any mode. With
//! FRED, a user-mode #DB enters at the page's ring-3 entry, one jump to the kernel and nothing
//! else; and #DB need not be chosen. Without more, any user could switch recording off on every
//! CPU in turn: a single-step of its own (`popf` with TF set), a watchpoint of its own
//! (`perf_event_open()` with `PERF_TYPE_BREAKPOINT` where `perf_event_paranoid` allows it, or
//! ptrace's on a child of its own). The kernel's #DB handler calls the die chain with
//! `DIE_DEBUG` for every user-mode #DB, and for every kernel-mode one with a cause in DR6 after
//! it saved and cleared DR7 (`local_db_save()`), in both entry modes, on the CPU of the #DB with
//! interrupts off (arch/x86/kernel/traps.c `exc_debug_user()`, `exc_debug_kernel()`). The
//! chain's first notifier is perf's breakpoint handler (priority `INT_MAX`, registered at boot),
//! which ends the chain (`NOTIFY_STOP`) for a #DB it takes whole, a watchpoint's: so lbr-dump's
//! ftrace callback at that notifier's entry (src/glue.c `lbr_dump_die_chain_watch`) re-arms for
//! every `DIE_DEBUG` ([`lbr_dump_rearm_after_db`]: asm/stubs.S `lbr_dump_rearm_here`, the stubs'
//! own rule). Where ftrace cannot trace that function, a die notifier of priority `INT_MAX`
//! ([`on_debug`]) does it instead, after perf's and kprobes' (which never ends the chain on
//! x86), before those of lower priority (uprobes' ends the chain for its own single-steps), and
//! says what it misses. Either runs only in the die chain, for the die events (#DB, INT3, an
//! oops, ...), and does nothing but for `DIE_DEBUG`: the user-mode entry and the stubs cost what
//! they did.

use super::*;

/// Times [`lbr_dump_rearm_after_db`] switched recording back on, since the module was loaded (all CPUs).
static REARMS: AtomicU64 = AtomicU64::new(0);

/// Set while the stubs' configuration and the snapshot area that [`lbr_dump_rearm_after_db`]
/// reads are in place ([`DebugWatch`]'s lifetime): a callback that ftrace could not remove (the
/// module is then pinned) finds it clear and reads nothing.
static WATCHING: AtomicBool = AtomicBool::new(false);

/// The `rearms` attribute.
pub(crate) fn rearms() -> u64 {
    REARMS.load(Ordering::Relaxed)
}

/// On this CPU, after a #DB: lbr-dump's armed value back if the #DB cleared its switch. Called
/// from [`on_debug`], and from src/glue.c's callback at the die chain's head (`DIE_DEBUG`).
#[no_mangle]
pub(crate) extern "C" fn lbr_dump_rearm_after_db() {
    if !WATCHING.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: `WATCHING` is set only while the stubs' configuration is written and the snapshot
    // area it points at is allocated (`DebugWatch` clears it, then waits for every caller,
    // before either goes); reads and writes this CPU's control MSR, which arming accessed
    // safely on every CPU.
    if unsafe { ffi::lbr_dump_rearm_here() } {
        REARMS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The debug notifier (where the die-chain callback cannot be placed).
///
/// # Safety
///
/// Called only by the die notifier chain, with the arguments it passes.
unsafe extern "C" fn on_debug(
    _nb: *mut bindings::notifier_block,
    val: kernel::ffi::c_ulong,
    _data: *mut c_void,
) -> c_int {
    if val == ffi::DIE_DEBUG {
        lbr_dump_rearm_after_db();
    }
    ffi::NOTIFY_DONE
}

/// What re-arms after a #DB: the callback at the die chain's head, which sees every `DIE_DEBUG`,
/// or, where ftrace cannot put it there, the debug notifier (which then misses the #DBs perf's
/// breakpoint handler ends the chain for). One of them, so that each #DB re-arms (and counts in
/// `rearms`) once. Removed on drop (before the stubs' configuration is cleared and the area
/// freed: `Armed`'s field order).
pub(super) enum DebugWatch {
    /// src/glue.c's callback at hw_breakpoint_exceptions_notify().
    Chain,
    /// The debug notifier, registered.
    Notifier(KBox<bindings::notifier_block>),
}

// SAFETY: the notifier block is only touched by register/unregister, which serialize on the die
// chain's lock; its `next` pointer belongs to that chain.
unsafe impl Send for DebugWatch {}
// SAFETY: `&DebugWatch` gives no access to the block.
unsafe impl Sync for DebugWatch {}

impl DebugWatch {
    /// Registers the callback at the die chain's head or, failing that, the notifier. Called once
    /// the stubs' configuration is written. A kernel that takes neither refuses arming.
    pub(super) fn register() -> Result<Self> {
        WATCHING.store(true, Ordering::Release);
        // SAFETY: no preconditions; the callback calls `lbr_dump_rearm_after_db`, valid for the
        // module's lifetime; unregistered in drop (or the module pinned).
        let r = unsafe { ffi::lbr_dump_die_chain_watch() };
        if r == 0 {
            return Ok(DebugWatch::Chain);
        }
        pr_warn!(
            "cannot trace hw_breakpoint_exceptions_notify() ({:?}): a #DB that perf's breakpoint handler takes whole (a watchpoint's) leaves recording off on its CPU until the next capture\n",
            Error::from_errno(r)
        );
        let mut nb = KBox::new(
            bindings::notifier_block {
                notifier_call: Some(on_debug),
                next: ptr::null_mut(),
                priority: i32::MAX,
            },
            GFP_KERNEL,
        )
        .inspect_err(|_| WATCHING.store(false, Ordering::Release))?;
        // SAFETY: `nb` lives in a box that outlives the registration (unregistered in drop).
        let r = unsafe { ffi::register_die_notifier(&mut *nb) };
        if r != 0 {
            WATCHING.store(false, Ordering::Release);
            pr_err!(
                "refusing to arm: cannot register the #DB notifier ({:?})\n",
                Error::from_errno(r)
            );
            return Err(Error::from_errno(r));
        }
        Ok(DebugWatch::Notifier(nb))
    }
}

impl Drop for DebugWatch {
    fn drop(&mut self) {
        // First: a caller from here on reads nothing; the unregistering below waits for those
        // already past the test (ftrace and the die chain synchronize with every CPU).
        WATCHING.store(false, Ordering::Release);
        match self {
            // SAFETY: registered in `register`; waits until no CPU is in the callback.
            DebugWatch::Chain => unsafe { ffi::lbr_dump_die_chain_unwatch() },
            // SAFETY: registered in `register`; unregistering waits for running callbacks (RCU).
            DebugWatch::Notifier(nb) => unsafe {
                ffi::unregister_die_notifier(&mut **nb);
            },
        }
    }
}
