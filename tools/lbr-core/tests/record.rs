// SPDX-License-Identifier: GPL-2.0

//! Record decoding against values written out by hand from the SDM (vol. 3B 18.4.8, LBR formats)
//! and the APM (LbrExtV2). Each raw value's comment derives it; nothing here is computed by the
//! code under test.

use lbr_core::facility::{LbrFormat, LegacyLbr, Recorder};
use lbr_core::record::*;

const K1: u64 = 0xffff_ffff_8100_0010; // a kernel address
const K2: u64 = 0xffff_ffff_8100_0020;

fn legacy(format: u8, depth: u8, info: bool, tsx: bool) -> Encoding {
    Encoding::IntelLegacy {
        format,
        depth,
        info,
        tsx,
    }
}

fn all(l: Encoding, v: &[u64]) -> Vec<Branch> {
    records(l, v).expect("enough values").collect()
}

#[test]
fn format5_uses_tos_and_info() {
    // depth 4, TOS = 1: newest is entry 1, then 0, 3, 2.
    // INFO1 = bit 63 (mispredict) | cycles 5. INFO0 = bit 62 (in_tx) | bit 61 (abort) | cycles 0x100.
    let v = [
        1, // TOS
        0x10,
        K1,
        0x30,
        0x40, // FROM 0..3
        0x11,
        K2,
        0x31,
        0x41, // TO 0..3
        0x6000_0000_0000_0100,
        0x8000_0000_0000_0005,
        0,
        0, // INFO 0..3
    ];
    let r = all(legacy(5, 4, true, true), &v);
    assert_eq!(r.len(), 4);
    assert_eq!(
        (r[0].from, r[0].to, r[0].mispred, r[0].cycles),
        (K1, K2, Some(true), Some(5))
    );
    assert_eq!((r[0].in_tx, r[0].abort), (Some(false), Some(false)));
    assert_eq!(
        (r[1].from, r[1].in_tx, r[1].abort, r[1].cycles),
        (0x10, Some(true), Some(true), Some(0x100))
    );
    assert_eq!((r[2].from, r[3].from), (0x40, 0x30));
    assert_eq!(r[0].branch_type, None); // legacy LBR has no branch type
}

#[test]
fn unwritten_entries_end_the_list() {
    // TOS = 0 and only entry 0 written: entries 3, 2, 1 are zero.
    let v = [0, K1, 0, 0, 0, K2, 0, 0, 0];
    let r = all(legacy(2, 4, false, false), &v);
    assert_eq!(
        r,
        vec![Branch {
            from: K1,
            to: K2,
            ..Branch::default()
        }]
    );
}

#[test]
fn format3_mispredict_in_from_bit_63() {
    // Kernel FROM with mispredict: the address's own bit 63 is replaced by the flag; bit 62 (1)
    // is sign-extended back. Kernel FROM without mispredict: 0x7fff_ffff_8100_0010.
    // A user FROM with mispredict: 0x8000_0000_0040_1000.
    let v = [
        2,
        0x7fff_ffff_8100_0010,
        0x8000_0000_0040_1000,
        0xffff_ffff_8100_0010,
        0,
        K2,
        0x40_2000,
        K2,
        0,
    ];
    let r = all(legacy(3, 4, false, false), &v);
    assert_eq!((r[0].from, r[0].mispred), (K1, Some(true)));
    assert_eq!(
        (r[1].from, r[1].to, r[1].mispred),
        (0x40_1000, 0x40_2000, Some(true))
    );
    assert_eq!((r[2].from, r[2].mispred), (K1, Some(false)));
}

#[test]
fn format4_tsx_flags_or_sign_extension() {
    // With TSX: 0x9fff_ffff_8100_0010 = mispredict (63), in_tx 0 (62), abort 0 (61), address
    // bits 60:0 sign-extended from bit 60. 0x7fff_ffff_8100_0010 = no flags... but bits 62:61 set
    // mean in_tx and abort on a TSX part.
    let v = [
        1,
        0x7fff_ffff_8100_0010,
        0x9fff_ffff_8100_0010,
        0,
        0,
        K2,
        K2,
        0,
        0,
    ];
    let r = all(legacy(4, 4, false, true), &v);
    assert_eq!(
        (r[0].from, r[0].mispred, r[0].in_tx, r[0].abort),
        (K1, Some(true), Some(false), Some(false))
    );
    assert_eq!(
        (r[1].from, r[1].mispred, r[1].in_tx, r[1].abort),
        (K1, Some(false), Some(true), Some(true))
    );
    // Without TSX the same 0x7fff... is a plain kernel address without mispredict.
    let r = all(legacy(4, 4, false, false), &v);
    assert_eq!(
        (r[1].from, r[1].mispred, r[1].in_tx),
        (K1, Some(false), None)
    );
}

#[test]
fn format6_cycles_in_to() {
    // TO = cycles 7 in bits 63:48 over the 48-bit address 0xffff_8100_0020 (bit 47 set).
    let v = [
        0,
        0xffff_ffff_8100_0010,
        0,
        0,
        0,
        0x0007_ffff_8100_0020,
        0,
        0,
        0,
    ];
    let r = all(legacy(6, 4, false, false), &v);
    assert_eq!(
        (r[0].from, r[0].to, r[0].cycles, r[0].mispred),
        (K1, K2, Some(7), Some(true))
    );
}

#[test]
fn format0_and_unknown_formats_have_no_layout() {
    // Format 0 holds 32-bit addresses (SDM LBR_FMT 000000B): lbr-dump refuses it, and a dump
    // header claiming it is foreign. 8..=63 are not defined.
    let r = |format| {
        Recorder::IntelLegacy(LegacyLbr {
            generation: "Core",
            depth: 4,
            from: 0x40,
            to: 0x60,
            info: None,
            select: None,
            format,
        })
    };
    assert_eq!(
        encoding(&r(Some(LbrFormat::Bits32)), Tsx::Absent),
        Err(Unsupported::Format32)
    );
    assert_eq!(
        encoding(&r(Some(LbrFormat::Unknown(9))), Tsx::Absent),
        Err(Unsupported::UnknownFormat(9))
    );
    assert_eq!(encoding(&r(None), Tsx::Absent), Err(Unsupported::NoFormat));
    assert!(encoding(&r(Some(LbrFormat::Lip)), Tsx::Absent).is_ok());
    assert_eq!(Encoding::from_codes(1, 0, 4, 0), None);
    assert!(Encoding::from_codes(1, 1, 4, 0).is_some());
    assert!(Unsupported::Format32
        .to_string()
        .contains("no 64-bit kernel address fits"));
}

#[test]
fn format7_info_without_tsx() {
    let v = [0, K1, 0, K2, 0, 0x8000_0000_0000_0009, 0];
    let r = all(legacy(7, 2, true, true), &v);
    assert_eq!(
        (r[0].mispred, r[0].cycles, r[0].in_tx, r[0].abort),
        (Some(true), Some(9), None, None)
    );
}

#[test]
fn arch_lbr_entry0_newest_from_zero_ends() {
    // INFO0 = mispredict (63) | CYC_CNT_VALID (60) | BR_TYPE 4 near relative call (59:56) | 0x21.
    // INFO1 = cycle count not valid, BR_TYPE 5 (ret), count bits must be ignored.
    let info0 = (1 << 63) | (1 << 60) | (4 << 56) | 0x21;
    let info1 = (5 << 56) | 0x55;
    let v = [K1, K2, 0, K2, K1, 0, info0, info1, 0];
    let r = all(Encoding::IntelArch { depth: 3 }, &v);
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].from, r[0].to, r[0].mispred, r[0].cycles),
        (K1, K2, Some(true), Some(0x21))
    );
    assert_eq!(r[0].branch_type, Some(BranchType::RelCall));
    assert_eq!(
        (r[1].from, r[1].cycles, r[1].branch_type),
        (K2, None, Some(BranchType::Ret))
    );
}

#[test]
fn amd_lbr_v2_valid_spec_and_erratum() {
    // Entry 0: FROM 0x8000_0000_0040_1000 = mispredict | user address; TO bit 63 valid.
    // Entry 1: TO bit 61 set: erratum 1452, not a branch, skipped.
    // Entry 2: kernel addresses in the 58-bit field (0x03ff_ffff_8100_0010: bit 57 set), TO valid
    //          and speculative (bits 63, 62).
    // Entry 3: valid = spec = 0: empty, ends the list.
    let v = [
        0x8000_0000_0040_1000,
        0x8000_0000_0040_2000,
        0x1234,
        0xa000_0000_0000_5678,
        0x03ff_ffff_8100_0010,
        0xc3ff_ffff_8100_0020,
        K1,
        0x0000_0000_0000_1000,
    ];
    let r = all(Encoding::AmdLbrV2 { depth: 4 }, &v);
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].from, r[0].to, r[0].mispred, r[0].spec),
        (0x40_1000, 0x40_2000, Some(true), Some(false))
    );
    assert_eq!(
        (r[1].from, r[1].to, r[1].mispred, r[1].spec),
        (K1, K2, Some(false), Some(true))
    );
}

#[test]
fn amd_single_record() {
    assert_eq!(
        all(Encoding::AmdSingle, &[K1, K2]),
        vec![Branch {
            from: K1,
            to: K2,
            ..Branch::default()
        }]
    );
    assert_eq!(all(Encoding::AmdSingle, &[0, 0]), vec![]);
}

#[test]
fn too_few_values_is_refused() {
    assert!(records(legacy(5, 32, true, false), &[0; 96]).is_none());
    assert!(records(legacy(5, 32, true, false), &[0; 97]).is_some());
}

#[test]
fn sign_extension() {
    assert_eq!(
        sign_extend(0x0000_8000_0000_0000, 48),
        0xffff_8000_0000_0000
    );
    assert_eq!(
        sign_extend(0x0000_7fff_ffff_ffff, 48),
        0x0000_7fff_ffff_ffff
    );
    assert_eq!(sign_extend(0x7fff_ffff_ffff_ffff, 63), u64::MAX);
}

#[test]
fn skylake_capture_list() {
    let sk = Recorder::IntelLegacy(LegacyLbr {
        generation: "Skylake",
        depth: 32,
        from: 0x680,
        to: 0x6c0,
        info: Some(0xdc0),
        select: Some(0x1c8),
        format: Some(LbrFormat::Info),
    });
    let l = encoding(&sk, Tsx::Absent).unwrap();
    assert_eq!(l, legacy(5, 32, true, false));
    let mut msrs = [0u32; MAX_VALUES];
    let n = capture_list(&sk, &l, &mut msrs);
    assert_eq!(n, 97);
    assert_eq!(n, l.values());
    assert_eq!(
        (msrs[0], msrs[1], msrs[32], msrs[33], msrs[65], msrs[96]),
        (0x1c9, 0x680, 0x69f, 0x6c0, 0xdc0, 0xddf)
    );
}

#[test]
fn amd_v2_and_arch_capture_lists() {
    let mut msrs = [0u32; MAX_VALUES];
    let r = Recorder::AmdLbrV2 { depth: 16 };
    let n = capture_list(&r, &encoding(&r, Tsx::Absent).unwrap(), &mut msrs);
    assert_eq!(
        (n, msrs[0], msrs[1], msrs[2], msrs[31]),
        (32, 0xc001_0300, 0xc001_0301, 0xc001_0302, 0xc001_031f)
    );
}

#[test]
fn header_codes_round_trip_and_reject_garbage() {
    for l in [
        legacy(5, 32, true, false),
        legacy(4, 16, false, true),
        Encoding::IntelArch { depth: 32 },
        Encoding::AmdLbrV2 { depth: 16 },
        Encoding::AmdSingle,
    ] {
        let (format, flags) = l.codes();
        assert_eq!(
            Encoding::from_codes(l.flavour().code(), format, l.depth() as u32, flags),
            Some(l)
        );
    }
    assert_eq!(Encoding::from_codes(9, 0, 32, 0), None);
    assert_eq!(Encoding::from_codes(1, 8, 32, 0), None); // no format 8
    assert_eq!(Encoding::from_codes(2, 0, 100_000, 0), None); // absurd depth
    assert_eq!(Encoding::from_codes(2, 0, 0, 0), None);
}

/// The last exception record: which recorders have one (their MSRs), and its values decoded,
/// each raw value written out by hand.
#[test]
fn last_exception_record() {
    let legacy_lbr = Recorder::IntelLegacy(LegacyLbr {
        generation: "Haswell",
        depth: 16,
        from: 0x680,
        to: 0x6c0,
        info: None,
        select: Some(0x1c8),
        format: Some(LbrFormat::EipFlags2),
    });
    // MSR_LER_FROM_LIP / MSR_LER_TO_LIP, IA32_LER_FROM_IP / TO_IP, LastIntFromIP / ToIP: one
    // pair of numbers; LbrExtV2 keeps none while LBRV2EN alone records.
    assert_eq!(legacy_lbr.last_exception(), Some((0x1dd, 0x1de)));
    assert_eq!(Recorder::AmdSingle.last_exception(), Some((0x1dd, 0x1de)));
    assert_eq!(Recorder::AmdLbrV2 { depth: 16 }.last_exception(), None);

    let ler = |l, f, t| last_exception(l, f, t).map(|b| (b.from, b.to));
    // Never written: nothing.
    assert_eq!(ler(legacy(5, 32, true, false), 0, 0), None);
    // Format 4 without TSX: FROM bits 62:61 clear (as the hardware leaves the stack's FROM),
    // bit 63 the sign here: 0x9fff_ffff_8100_0010 is K1 from bits 60:0. TO with bits 63:61
    // unlike bit 47 (BDF93): 0x1fff_ffff_8100_0020 sign-extended from bit 60 is K2.
    assert_eq!(
        ler(
            legacy(4, 16, false, false),
            0x9fff_ffff_8100_0010,
            0x1fff_ffff_8100_0020
        ),
        Some((K1, K2))
    );
    // Format 3: bit 63 a flag, the address in 62:0: 0x7fff_ffff_8100_0010 is K1.
    assert_eq!(
        ler(legacy(3, 16, false, false), 0x7fff_ffff_8100_0010, K2),
        Some((K1, K2))
    );
    // Format 6: TO bits 63:48 not address: 0x0007_ffff_8100_0020 is K2.
    assert_eq!(
        ler(legacy(6, 32, false, false), K1, 0x0007_ffff_8100_0020),
        Some((K1, K2))
    );
    // Formats 1, 2, 5, 7, Arch LBR, the AMD single record: as they are (a user address, whose
    // bit 63 is clear, stays so).
    for l in [
        legacy(1, 4, false, false),
        legacy(5, 32, true, false),
        legacy(7, 32, true, false),
        Encoding::IntelArch { depth: 32 },
        Encoding::AmdSingle,
    ] {
        assert_eq!(ler(l, 0x40_1000, K2), Some((0x40_1000, K2)), "{l:?}");
    }
    // The flags of a record are not reported for it.
    assert_eq!(
        last_exception(legacy(5, 32, true, false), K1, K2),
        Some(Branch {
            from: K1,
            to: K2,
            ..Branch::default()
        })
    );
}
