// SPDX-License-Identifier: GPL-2.0

//! A warning's capture given back, so that a warning storm cannot push a crash's snapshot out.
//!
//! Each CPU keeps its snapshots in a ring of [`RING`] slots: a capture takes slot `count % ring`
//! of its CPU block and advances `count`, so the oldest snapshot goes first, whatever it was.
//! With the branch trace store, each capture also keeps the buffer that was recording (its
//! history) and puts the pool's next buffer into the debug store, the one the oldest kept
//! snapshot owned. A warning is a #UD the stub captures like a crash's; the kernel reports it
//! and goes on. Without more, four warnings on a CPU between a crash's exception and its
//! printing (the oops handler sleeps, a WARN_ON() fires in an interrupt or in the oops path
//! itself) would take the crash's slot and its BTS buffer, and a WARN_ON_ONCE() in a hot path,
//! which the kernel reports once, would keep doing so silently.
//!
//! So when the kernel's report_bug() returns that a #UD was a warning (reported or not; never a
//! BUG(), whose oops comes next), its capture is given back: the slot becomes the CPU's next
//! again (`count` goes back by one) and its BTS buffer goes back to recording, so the next
//! capture on that CPU takes them again. A storm of warnings then cycles through one slot and
//! one buffer, and the other snapshots of the ring, a crash's among them, stay. The warning's
//! snapshot stays in memory until that next capture (its report printed it already). With
//! `panic_on_warn`, __warn() panics before report_bug() returns: nothing is given back, and a
//! kdump vmcore holds the warning's snapshot beside the panic's.
//!
//! Given back only while nothing else was captured on the CPU since: the snapshot must be the
//! newest of its CPU (the slot before `count`) and the CPU's BTS buffer the one after the
//! buffer it kept; a warning whose report moved to another CPU keeps its slot, as any capture.

use super::*;
use crate::layout::VECTOR_UD as UD;

impl Armed {
    /// Gives back the capture of the warning whose #UD frame is `regs` (src/glue.c's kretprobe
    /// at report_bug()'s return, `BUG_TRAP_TYPE_WARN`): its ring slot and, with BTS, its kept
    /// buffer, if that capture is the newest on this CPU. Returns whether it did.
    ///
    /// # Safety
    ///
    /// Interrupts are off (nothing but an NMI can capture on this CPU meanwhile), and `regs` is
    /// the register frame of the #UD being handled (report_bug()'s argument).
    pub(crate) unsafe fn give_back_warning(&self, regs: *const bindings::pt_regs) -> bool {
        let area = &*self.area;
        let g = area.geometry();
        // SAFETY: reads a segment limit; callable anywhere.
        let cpu = unsafe { ffi::lbr_dump_cpu_number() } as usize;
        if cpu >= g.nr_cpus || g.ring == 0 {
            return false;
        }
        let block = g.cpu_block(cpu);
        // SAFETY: the CPU block's busy word, a 4-byte-aligned u32 of the area, alive while
        // `self` is; only this CPU's stubs and this function write it.
        let busy = unsafe { AtomicU32::from_ptr(area.at(block + layout::cpu::BUSY).cast()) };
        // Held as a capture holds it: an NMI's capture on this CPU from here on is skipped, as
        // one nested in a capture is. One that came before has finished (an NMI runs to its
        // end). Set already: this runs inside a capture's NMI (nothing to give back then).
        if busy.swap(1, Ordering::Acquire) != 0 {
            return false;
        }
        let frame = regs as u64 + core::mem::offset_of!(bindings::pt_regs, ip) as u64;
        // SAFETY: the caller's `regs` is the #UD's frame, on the stack of the code handling it.
        let ip = unsafe { (*regs).ip } as u64;
        let given = self.give_back_held(cpu, block, frame, ip);
        busy.store(0, Ordering::Release);
        given
    }

    /// [`Armed::give_back_warning`] with this CPU's busy word held, for the #UD whose hardware
    /// frame's RIP slot is at `frame` and holds `ip`.
    fn give_back_held(&self, cpu: usize, block: usize, frame: u64, ip: u64) -> bool {
        let area = &*self.area;
        let g = area.geometry();
        let count = area.u64_at(block + layout::cpu::COUNT);
        if count == 0 {
            return false;
        }
        // PANIC: none, `g.ring` is not 0 (checked by the caller).
        let slot = ((count - 1) % g.ring as u64) as usize;
        let s = area.snapshot(cpu, slot);
        if s.seq == 0 || s.vector != UD || s.frame != frame || s.rip != ip {
            return false;
        }
        if let Some(b) = s.bts {
            if b.state & layout::SNAP_BTS_KEPT != 0 {
                self.give_back_bts(cpu, block, b.slot as usize, s.seq);
            }
        }
        area.store_u64(block + layout::cpu::COUNT, count - 1);
        true
    }

    /// The buffer the warning's capture kept (pool slot `kept`, owned by snapshot `seq`) goes
    /// back to being the CPU's recording one, if the buffer recording now is the one the capture
    /// swapped in after it. The debug store is left as it is: the two table entries trade their
    /// buffers (the one recording now becomes slot `kept`'s, the warning's becomes the next
    /// one's, free), and slot `kept` is the CPU's current one again, so the next capture keeps
    /// the buffer recording now and swaps in the warning's, not the oldest kept one.
    fn give_back_bts(&self, cpu: usize, block: usize, kept: usize, seq: u64) {
        let area = &*self.area;
        let g = area.geometry();
        let shape = area.header.shape();
        let cur = area.u32_at(block + layout::cpu::BTS_CUR) as usize;
        if g.bts_pool < 2 || cur != (kept + 1) % g.bts_pool {
            return;
        }
        let (Some(k), Some(c)) = (
            shape.bts_entry(area, cpu, kept),
            shape.bts_entry(area, cpu, cur),
        ) else {
            return;
        };
        if k.owner != seq || c.owner != 0 {
            return;
        }
        let (ek, ec) = (g.bts_entry(cpu, kept), g.bts_entry(cpu, cur));
        // The warning's snapshot first no longer owns its buffer (a printer reading it says
        // `reused`), then the buffers trade places, each field in one store (a dump taken in
        // between holds whole addresses).
        area.store_u64(ek + layout::bts::OWNER, 0);
        area.store_u64(ek + layout::bts::VIRT, c.virt);
        area.store_u64(ek + layout::bts::PHYS, c.phys);
        area.store_u64(ec + layout::bts::VIRT, k.virt);
        area.store_u64(ec + layout::bts::PHYS, k.phys);
        area.store_u32(block + layout::cpu::BTS_CUR, kept as u32);
    }
}
