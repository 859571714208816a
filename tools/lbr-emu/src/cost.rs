// SPDX-License-Identifier: GPL-2.0

//! The cost probe (`cost=on`): what an interrupt or exception delivery costs, in guest
//! instructions, for the entry cost report (tests/scenarios/cost.py).
//!
//! The plugin counts every instruction, inline, in a per-vCPU counter, and each delivery starts
//! an [`Entry`] measurement: the instructions up to the first jump, direct or indirect, [`FAR`]
//! or more away from the handler (an entry stub going on to the kernel's handler) with the
//! `rdmsr`/`wrmsr` executed before it, and the instructions up to the far return (`iret`) of the
//! handler, logged as an `entry` event ([`Event::Entry`]). This module is the measurement; the
//! plugin feeds it the counter at each step.
//!
//! BTS mode ([`crate::bts::BtsTally`], beside the BTS store it counts): per BTS recording
//! period, the guest instructions executed and the memory traffic of the emulated BTS hardware,
//! logged in the `bts` object of each freeze, from which a report gives instructions and stores
//! per recorded branch.

use crate::classify::Kind;
use crate::event::{EntryEnd, Event};
use crate::recorder::MsrOp;

/// An entry measurement that has seen this many instructions without returning ends.
pub const ENTRY_LIMIT: u64 = 200_000;

/// A jump (direct or indirect) to a target at least this far from the handler's first
/// instruction leaves the handler's code: an entry stub going on to another piece of code (a
/// hooking module's stub jumping to the kernel's handler). Jumps within a stub are short.
pub const FAR: u64 = 1 << 20;

/// An interrupt or exception delivery being measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    from: u64,
    to: u64,
    /// The instruction count at the delivery.
    start: u64,
    /// Before the first jump away from the handler (see [`FAR`]): instructions (with the jump)
    /// and its target.
    first_jmp: Option<(u64, u64)>,
    rdmsr: u64,
    wrmsr: u64,
}

impl Entry {
    /// A delivery from `from` to the handler at `to`, the instruction count being `now`.
    pub fn start(from: u64, to: u64, now: u64) -> Entry {
        Entry {
            from,
            to,
            start: now,
            first_jmp: None,
            rdmsr: 0,
            wrmsr: 0,
        }
    }

    /// An emulated `rdmsr` or `wrmsr`: counted until the first far jump.
    pub fn msr_access(&mut self, op: MsrOp) {
        if self.first_jmp.is_none() {
            *match op {
                MsrOp::Write => &mut self.wrmsr,
                MsrOp::Read => &mut self.rdmsr,
            } += 1;
        }
    }

    /// A block at `to` was entered after a taken branch whose kind code is `last_kind` (0 if
    /// none), the instruction count being `now`: notes the first far jump, or says how the
    /// measurement ends (the handler's far return, or the limit).
    pub fn taken(&mut self, now: u64, last_kind: u64, to: u64) -> Option<EntryEnd> {
        let n = now - self.start;
        let jump = last_kind == Kind::JmpInd.code() || last_kind == Kind::JmpRel.code();
        if self.first_jmp.is_none() && jump && to.abs_diff(self.to) >= FAR {
            self.first_jmp = Some((n, to));
            None
        } else if last_kind == Kind::Far.code() {
            // The handler's far return (a nested delivery would have ended this first).
            Some(EntryEnd::Return { total: n, back: to })
        } else if n > ENTRY_LIMIT {
            Some(EntryEnd::Limit)
        } else {
            None
        }
    }

    /// The measurement on vCPU `cpu`, ended as `end` says, as the log's event.
    pub fn finish(self, cpu: u32, end: EntryEnd) -> Event {
        Event::Entry {
            cpu,
            from: self.from,
            to: self.to,
            first_jmp: self.first_jmp,
            rdmsr: self.rdmsr,
            wrmsr: self.wrmsr,
            end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDLER: u64 = 0xffff_ffff_a000_0000;
    const KERNEL: u64 = 0xffff_ffff_8100_0000;

    #[test]
    fn stub_then_kernel_then_return() {
        let mut e = Entry::start(0x401000, HANDLER, 100);
        e.msr_access(MsrOp::Read);
        // A short jump within the stub, then a call: neither leaves it.
        assert_eq!(e.taken(105, Kind::JmpRel.code(), HANDLER + 0x40), None);
        assert_eq!(e.taken(108, Kind::CallRel.code(), KERNEL), None);
        e.msr_access(MsrOp::Write);
        assert_eq!(e.taken(110, Kind::JmpInd.code(), KERNEL), None);
        // After the far jump, MSR accesses and jumps are not counted.
        e.msr_access(MsrOp::Write);
        assert_eq!(e.taken(120, Kind::JmpRel.code(), HANDLER), None);
        let end = e.taken(150, Kind::Far.code(), 0x401002);
        assert_eq!(
            end,
            Some(EntryEnd::Return {
                total: 50,
                back: 0x401002
            })
        );
        assert_eq!(
            e.finish(1, end.unwrap()),
            Event::Entry {
                cpu: 1,
                from: 0x401000,
                to: HANDLER,
                first_jmp: Some((10, KERNEL)),
                rdmsr: 1,
                wrmsr: 1,
                end: EntryEnd::Return {
                    total: 50,
                    back: 0x401002
                },
            }
        );
    }

    #[test]
    fn limit() {
        let mut e = Entry::start(0x401000, HANDLER, 0);
        assert_eq!(e.taken(ENTRY_LIMIT, Kind::Jcc.code(), HANDLER), None);
        assert_eq!(
            e.taken(ENTRY_LIMIT + 1, Kind::Jcc.code(), HANDLER),
            Some(EntryEnd::Limit)
        );
    }
}
