// SPDX-License-Identifier: GPL-2.0

//! One vCPU's emulator state, apart from its scoreboard entry (the plugin's `Sb`, written by
//! inline operations) and its register handles (QEMU's, found again by every QEMU process):
//! the recorder, what the emulator learned from the guest (the IDT base of its last `lidt`,
//! the highest CPUID leaves QEMU answers) and what is in progress (a `cpuid` or `rdmsr` result
//! to rewrite, a `cost=on` entry measurement, a BTS period's cost).

use crate::bts::{self, BtsTally};
use crate::cost::Entry;
use crate::model::Model;
use crate::recorder::Recorder;

/// An instruction QEMU executes whose result the emulator rewrites afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixup {
    /// `cpuid` of (leaf, subleaf).
    Cpuid(u32, u32),
    /// `rdmsr` of IA32_MISC_ENABLE (its BTS and PEBS availability bits).
    MiscEnable,
}

#[derive(Clone, Debug)]
pub struct Cpu {
    pub rec: Recorder,
    /// The instruction waiting for its result to be rewritten.
    pub fixup: Option<Fixup>,
    /// Highest basic / extended CPUID leaf QEMU itself answers.
    pub orig_max: [Option<u32>; 2],
    /// The IDT base of the last `lidt` (for recognising #DB delivery).
    pub idt: Option<u64>,
    /// `cost=on`: the delivery being measured.
    pub entry: Option<Entry>,
    /// BTS: this recording period's cost, and the instruction count when it began.
    pub bts_tally: BtsTally,
    pub bts_insns_at_on: u64,
}

impl Cpu {
    /// A vCPU at power-on; `bts_recent`: the newest stored BTS records it keeps (0: none).
    pub fn new(model: Model, bts_recent: usize) -> Cpu {
        let mut rec = Recorder::new(model);
        rec.recent = bts::Recent::new(bts_recent);
        Cpu {
            rec,
            fixup: None,
            orig_max: [None; 2],
            idt: None,
            entry: None,
            bts_tally: BtsTally::default(),
            bts_insns_at_on: 0,
        }
    }

    /// A system reset: the recorder back at power-on, as the hardware's MSRs, and the IDT base
    /// with it; kept: what QEMU's CPUID answers (`orig_max`) and the `bts_recent` ring, which
    /// is the emulator's, not the hardware's.
    pub fn reset(&mut self, model: Model) {
        let orig_max = self.orig_max;
        let recent = std::mem::take(&mut self.rec.recent);
        *self = Cpu {
            orig_max,
            ..Cpu::new(model, 0)
        };
        self.rec.recent = recent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{find, MSR_DEBUGCTL};

    #[test]
    fn a_reset_keeps_what_qemu_answers_and_the_recent_ring() {
        let m = find("skylake").unwrap();
        let mut c = Cpu::new(m, 4);
        c.orig_max = [Some(0xd), Some(0x8000_0008)];
        c.idt = Some(0xffff_fe00_0000_0000);
        c.rec.recent.push(bts::Stored {
            from: 1,
            to: 2,
            flags: 0,
        });
        c.rec.wrmsr(MSR_DEBUGCTL, 1);
        c.reset(m);
        assert_eq!(c.orig_max, [Some(0xd), Some(0x8000_0008)]);
        assert_eq!((c.idt, c.rec.on()), (None, false));
        assert_eq!(c.rec.recent.total(), 1);
    }
}
