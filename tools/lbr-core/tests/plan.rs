// SPDX-License-Identifier: GPL-2.0

//! The arming plan's MSR values, per recorder, against the manuals' bit definitions written out
//! by hand here (Intel SDM vol. 3B 18.4 and 18.1 Architectural LBR; AMD APM vol. 2 13.1.1;
//! ../shared/reference/hardware.md): DEBUGCTL 0x1D9 bit 0 LBR, 6 TR, 7 BTS, 8 BTINT,
//! 9 BTS_OFF_OS, 10 BTS_OFF_USR; LBR_SELECT bits *suppress* (0 kernel, 1 user, 2 JCC, 6
//! NEAR_IND_JMP, 7 NEAR_REL_JMP); ARCH_LBR_CTL 0x14CE bit 0 LBREn, 1 OS, 2 USR, 16..22 *enable*
//! JCC, REL_JMP, IND_JMP, REL_CALL, IND_CALL, RET, OTHER.

mod common;

use common::arch_lbr;
use lbr_core::facility::{Filter, LbrFormat, LegacyLbr, Recorder};
use lbr_core::plan::{ArmValues, Rings, Vectors};

fn skylake(select: Option<u32>) -> Recorder {
    Recorder::IntelLegacy(LegacyLbr {
        generation: "Skylake",
        depth: 32,
        from: 0x680,
        to: 0x6c0,
        info: Some(0xdc0),
        select,
        format: Some(LbrFormat::Info),
    })
}

fn arch() -> Recorder {
    Recorder::IntelArch(arch_lbr(0xff))
}

#[test]
fn legacy_lbr_sets_debugctl_lbr_and_suppresses_user_branches() {
    let v = ArmValues::new(&skylake(Some(0x1c8)), Rings::Kernel, Filter::All);
    assert_eq!(v.switch.msr, 0x1d9);
    // Bit 0 OR-ed into what was there (FREEZE_LBRS_ON_PMI, bit 11, kept).
    assert_eq!(v.armed(0x800), 0x801);
    assert_eq!(v.filter, Some((0x1c8, 1 << 1)));
    assert_eq!(v.freeze_mask(), 1);
    assert!(v.filters_rings());
    // Every ring: nothing suppressed by ring.
    let v = ArmValues::new(&skylake(Some(0x1c8)), Rings::All, Filter::All);
    assert_eq!(v.filter, Some((0x1c8, 0)));
    // Functions: conditional and near relative jumps suppressed too.
    let v = ArmValues::new(&skylake(Some(0x1c8)), Rings::Kernel, Filter::Functions);
    assert_eq!(v.filter, Some((0x1c8, 1 << 1 | 1 << 2 | 1 << 7)));
    // Calls: the near indirect jumps as well.
    let v = ArmValues::new(&skylake(Some(0x1c8)), Rings::Kernel, Filter::Calls);
    assert_eq!(v.filter, Some((0x1c8, 1 << 1 | 1 << 2 | 1 << 6 | 1 << 7)));
}

#[test]
fn core2_without_lbr_select_records_every_ring() {
    let v = ArmValues::new(&skylake(None), Rings::Kernel, Filter::All);
    assert_eq!(v.filter, None);
    assert!(!v.filters_rings());
    assert_eq!(v.armed(0), 1);
}

#[test]
fn bts_sets_tr_and_bts_clears_btint_and_the_ring_filters() {
    let v = ArmValues::new(&skylake(Some(0x1c8)), Rings::Kernel, Filter::All).with_bts(false);
    // Before: BTINT (8) and BTS_OFF_OS (9) set by someone, bit 11 kept.
    let before = 1 << 8 | 1 << 9 | 1 << 11;
    assert_eq!(v.armed(before), 1 << 11 | 1 | 1 << 6 | 1 << 7 | 1 << 10);
    assert_eq!(v.freeze_mask(), 1 | 1 << 6 | 1 << 7);
    // bts_user: user branches stored too (BTS_OFF_USR clear).
    let v = ArmValues::new(&skylake(Some(0x1c8)), Rings::Kernel, Filter::All).with_bts(true);
    assert_eq!(v.armed(1 << 10), 1 | 1 << 6 | 1 << 7);
}

#[test]
fn arch_lbr_writes_its_control_whole() {
    let v = ArmValues::new(&arch(), Rings::Kernel, Filter::All);
    assert_eq!(v.switch.msr, 0x14ce);
    // LBREn | OS and every branch type (bits 16..22); the value before does not matter.
    let all_types = 0x7f << 16;
    assert_eq!(v.armed(0xdead_0000), 1 | 1 << 1 | all_types);
    assert_eq!(v.armed(0), 1 | 1 << 1 | all_types);
    assert_eq!(v.freeze_mask(), 1);
    assert!(v.filters_rings());
    let v = ArmValues::new(&arch(), Rings::All, Filter::All);
    assert_eq!(v.armed(0), 1 | 1 << 1 | 1 << 2 | all_types);
    // Calls: REL_CALL, IND_CALL, RET, OTHER (bits 19..22) only.
    let v = ArmValues::new(&arch(), Rings::Kernel, Filter::Calls);
    assert_eq!(v.armed(0), 1 | 1 << 1 | 0xf << 19);
}

#[test]
fn amd_lbr_v2_filters_with_its_own_lbr_select() {
    let v = ArmValues::new(
        &Recorder::AmdLbrV2 { depth: 16 },
        Rings::Kernel,
        Filter::All,
    );
    // AMD_DBG_EXTN_CFG bit 6 LBRV2EN switches it on; LBR_SELECT at 0xc000010e.
    assert_eq!(v.switch.msr, 0xc000_010f);
    assert_eq!(v.armed(0), 1 << 6);
    assert_eq!(v.filter, Some((0xc000_010e, 1 << 1)));
    let v = ArmValues::new(&Recorder::AmdSingle, Rings::Kernel, Filter::All);
    assert_eq!(v.filter, None);
    assert!(!v.filters_rings());
}

#[test]
fn vector_sets_need_a_captured_hookable_vector() {
    // #DE, #UD, #GP, #PF: all hookable.
    let m = 1 << 0 | 1 << 6 | 1 << 13 | 1 << 14;
    assert_eq!(
        Vectors::new(m).unwrap().to_string(),
        "0(#DE) 6(#UD) 13(#GP) 14(#PF)"
    );
    // #DB alone only re-arms: nothing would be captured.
    assert!(Vectors::new(1 << 1).is_none());
    assert!(Vectors::new(0).is_none());
    // Vector 31 is reserved: no stub, not hookable.
    assert!(Vectors::new(1 << 0 | 1 << 31).is_none());
    assert_eq!(
        Vectors::all().to_string(),
        Vectors::new(Vectors::ALL).unwrap().to_string()
    );
}
