// SPDX-License-Identifier: GPL-2.0

//! One vCPU's emulator state, apart from its scoreboard entry (the plugin's `Sb`, written by
//! inline operations) and its register handles (QEMU's, found again by every QEMU process):
//! the recorder, what the emulator learned from the guest (the IDT base of its last `lidt`,
//! the highest CPUID leaves QEMU answers) and what is in progress (a `cpuid` or `rdmsr` result
//! to rewrite, a `cost=on` entry measurement, a BTS period's cost).
//!
//! For `save=` and `load=` ([`crate::state`]): [`Cpu::learned`] is what a fresh emulator lacks,
//! [`Cpu::restored`] a fresh vCPU given it, and [`Cpu::unquiescent`] says why a fresh one would
//! not go on exactly as this one (nothing, when it would).

use crate::bts::{self, BtsTally};
use crate::cost::Entry;
use crate::model::Model;
use crate::recorder::Recorder;
use crate::state::Learned;

/// An instruction QEMU executes whose result the emulator rewrites afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixup {
    /// `cpuid` of (leaf, subleaf).
    Cpuid(u32, u32),
    /// `rdmsr` of IA32_MISC_ENABLE (its BTS and PEBS availability bits).
    MiscEnable,
}

#[derive(Clone, Debug, PartialEq, Eq)]
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

    /// What this vCPU learned that a fresh emulator lacks, with `since_record` (from the
    /// scoreboard: instructions in the blocks entered since the last recorded branch).
    pub fn learned(&self, since_record: u64) -> Learned {
        Learned {
            idt: self.idt,
            orig_max: self.orig_max,
            linear_bits: self.rec.linear_bits(),
            since_record,
            recent: self.rec.recent.records().copied().collect(),
            recent_total: self.rec.recent.total(),
        }
    }

    /// A fresh vCPU given what `l` says was learned (`load=`): at power-on otherwise. An error
    /// if `l` cannot come from a vCPU of this model and `bts_recent`.
    pub fn restored(model: Model, bts_recent: usize, l: &Learned) -> Result<Cpu, String> {
        let recent = bts::Recent::restored(bts_recent, l.recent.clone(), l.recent_total)
            .ok_or_else(|| {
                format!(
                    "{} bts_recent records ({} stored in all) do not fit bts_recent={bts_recent}",
                    l.recent.len(),
                    l.recent_total
                )
            })?;
        let rec = Recorder::restored(model, l.linear_bits, recent)
            .ok_or_else(|| format!("linear-address width {} is not 32-64", l.linear_bits))?;
        Ok(Cpu {
            rec,
            orig_max: l.orig_max,
            idt: l.idt,
            ..Cpu::new(model, bts_recent)
        })
    }

    /// Why a fresh vCPU given this one's learned state ([`Cpu::restored`]) would not behave
    /// from now on exactly as this one: empty when this vCPU is quiescent. It is when it equals
    /// that fresh vCPU: the recorder at power-on (nothing enabled, no records, TOS 0, LER and
    /// the DS area zero, no BTS figures or issue), no result waiting to be rewritten, no entry
    /// measurement, no BTS period's cost. Every field is compared (the destructuring names
    /// them all, so that a field added later must be considered here).
    pub fn unquiescent(&self, model: Model, bts_recent: usize) -> Vec<String> {
        let fresh = match Cpu::restored(model, bts_recent, &self.learned(0)) {
            Ok(c) => c,
            Err(e) => return vec![e],
        };
        let Cpu {
            rec,
            fixup,
            // Learned: saved, and equal to the fresh vCPU's by construction.
            orig_max: _,
            idt: _,
            entry,
            bts_tally,
            bts_insns_at_on,
        } = self;
        let mut why = Vec::new();
        if rec.on() {
            why.push(format!("LBR recording is on (MSR {:#x})", rec.switch_msr()));
        }
        if rec.bts_on() {
            why.push("BTS is on (DEBUGCTL.TR and .BTS)".to_string());
        }
        why.extend(
            rec.differences(&fresh.rec)
                .into_iter()
                .map(|d| format!("recorder: {d} is not at its power-on value")),
        );
        match fixup {
            Some(Fixup::Cpuid(leaf, sub)) => why.push(format!(
                "the result of cpuid {leaf:#x}/{sub:#x} waits to be rewritten"
            )),
            Some(Fixup::MiscEnable) => {
                why.push("the result of rdmsr IA32_MISC_ENABLE waits to be rewritten".into())
            }
            None => {}
        }
        if entry.is_some() {
            why.push("a cost=on entry measurement is in progress".into());
        }
        if *bts_tally != fresh.bts_tally || *bts_insns_at_on != fresh.bts_insns_at_on {
            why.push("a BTS period's cost tally is not at its power-on value".into());
        }
        why
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Branch, Kind};
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

    #[test]
    fn enabled_recorders_records_fixups_and_entries_are_not_quiescent() {
        let m = find("skylake").unwrap();
        let mut c = Cpu::new(m, 0);
        c.idt = Some(0xffff_fe00_0000_0000);
        c.orig_max = [Some(0xd), None];
        c.rec.set_linear_bits(0x3930);
        assert_eq!(c.unquiescent(m, 0), Vec::<String>::new());

        let mut on = c.clone();
        on.rec.wrmsr(MSR_DEBUGCTL, 1);
        let why = on.unquiescent(m, 0);
        assert!(
            why.contains(&"LBR recording is on (MSR 0x1d9)".to_string()),
            "{why:?}"
        );

        let mut records = on.clone();
        records.rec.branch(&Branch {
            from: 0xffff_ffff_8100_0000,
            to: 0xffff_ffff_8100_0040,
            kind: Kind::JmpRel,
            cycles: 1,
        });
        records.rec.wrmsr(MSR_DEBUGCTL, 0);
        let why = records.unquiescent(m, 0);
        for d in ["records", "TOS", "newest branch (LER's source)"] {
            let r = format!("recorder: {d} is not at its power-on value");
            assert!(why.contains(&r), "{d}: {why:?}");
        }
        assert!(!why.iter().any(|w| w.contains("is on")), "{why:?}");

        let mut fixup = c.clone();
        fixup.fixup = Some(Fixup::Cpuid(0x8000_0008, 0));
        assert_eq!(
            fixup.unquiescent(m, 0),
            ["the result of cpuid 0x80000008/0x0 waits to be rewritten"]
        );
        fixup.fixup = Some(Fixup::MiscEnable);
        assert_eq!(
            fixup.unquiescent(m, 0),
            ["the result of rdmsr IA32_MISC_ENABLE waits to be rewritten"]
        );

        let mut entry = c.clone();
        entry.entry = Some(Entry::start(1, 2, 3));
        assert_eq!(
            entry.unquiescent(m, 0),
            ["a cost=on entry measurement is in progress"]
        );

        let mut ds = c.clone();
        ds.rec.wrmsr(crate::bts::MSR_DS_AREA, 0xffff_fe00_0000_1000);
        assert_eq!(
            ds.unquiescent(m, 0),
            ["recorder: IA32_DS_AREA is not at its power-on value"]
        );
    }

    #[test]
    fn a_restored_vcpu_has_what_was_learned_and_nothing_else() {
        let m = find("sapphirerapids").unwrap();
        let mut c = Cpu::new(m, 2);
        c.idt = Some(0xffff_fe00_0000_0000);
        c.orig_max = [Some(0x1f), Some(0x8000_0021)];
        c.rec.set_linear_bits(0x3930);
        for i in 0..3 {
            c.rec.recent.push(bts::Stored {
                from: i,
                to: i + 1,
                flags: 0x10,
            });
        }
        let l = c.learned(77);
        assert_eq!(l.since_record, 77);
        assert_eq!((l.recent.len(), l.recent_total), (2, 3));
        assert_eq!(Cpu::restored(m, 2, &l), Ok(c.clone()));
        assert_ne!(Cpu::restored(m, 2, &l).unwrap(), Cpu::new(m, 2));
        assert!(Cpu::restored(m, 1, &l)
            .unwrap_err()
            .contains("do not fit bts_recent=1"));
        let bad = Learned {
            linear_bits: 99,
            ..l
        };
        assert!(Cpu::restored(m, 2, &bad).unwrap_err().contains("99"));
    }
}
