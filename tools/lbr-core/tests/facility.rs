// SPDX-License-Identifier: GPL-2.0

//! Identification from CPUID values of real CPUs. The register values are written out by hand
//! from the CPUs' documented signatures (Intel SDM vol. 2 CPUID, AMD APM vol. 3 appendix E) and
//! the expected depths/MSRs from the kernel's arch/x86/events/intel/lbr.c.

mod common;

use common::{arch_lbr, cpu, regs, Table, AMD, INTEL};
use lbr_core::facility::*;

const PDCM: u32 = 1 << 15; // CPUID.1:ECX
const DS: u32 = 1 << 21; // CPUID.1:EDX

/// Skylake client (i7-6700K): CPUID.1:EAX = 0x000506e3, family 6 model 0x5e stepping 3.
fn skylake() -> Table {
    cpu(INTEL, 0x16, &[((1, 0), regs(0x0005_06e3, 0, PDCM, DS))])
}

#[test]
fn skylake_is_legacy_lbr_32_deep_with_info() {
    let f = identify(&skylake(), Some(0x33c5)); // PERF_CAPABILITIES of a Skylake: format 5
    assert_eq!(
        f.signature,
        Signature {
            vendor: Vendor::Intel,
            family: 6,
            model: 0x5e,
            stepping: 3
        }
    );
    assert!(f.pdcm && f.ds);
    let Some(Recorder::IntelLegacy(l)) = f.recorder else {
        panic!("{:?}", f.recorder)
    };
    assert_eq!(
        (l.depth, l.from, l.to, l.info),
        (32, 0x680, 0x6c0, Some(0xdc0))
    );
    assert_eq!(l.format, Some(LbrFormat::Info));
    assert_eq!(
        f.recorder.unwrap().switch(),
        Switch {
            msr: 0x1d9,
            mask: 1,
            name: "DEBUGCTL.LBR"
        }
    );
    assert_eq!(
        f.recorder.unwrap().to_string(),
        "Intel LBR (Skylake), 32 entries, format 5 (INFO), FROM 0x680 TO 0x6c0 INFO 0xdc0"
    );
}

#[test]
fn format_needs_pdcm() {
    // Same CPU without PDCM (as plain QEMU TCG presents it): the format cannot be known.
    let t = cpu(INTEL, 0x16, &[((1, 0), regs(0x0005_06e3, 0, 0, 0))]);
    let f = identify(&t, Some(5));
    assert!(!f.pdcm);
    let Some(Recorder::IntelLegacy(l)) = f.recorder else {
        panic!()
    };
    assert_eq!(l.format, None);
}

#[test]
fn core2_penryn_uses_core_msrs_4_deep() {
    // Core 2 Duo E8400: 0x00010676: family 6, extended model 1, model 7 -> 0x17, stepping 6.
    let t = cpu(INTEL, 0xd, &[((1, 0), regs(0x0001_0676, 0, PDCM, DS))]);
    let f = identify(&t, Some(0));
    assert_eq!(f.signature.model, 0x17);
    let Some(Recorder::IntelLegacy(l)) = f.recorder else {
        panic!()
    };
    assert_eq!((l.depth, l.from, l.to, l.info), (4, 0x40, 0x60, None));
    assert_eq!(l.format, Some(LbrFormat::Bits32));
}

#[test]
fn nehalem_haswell_goldmont_plus() {
    // i7-920 0x000106a5 (model 0x1a), i7-4770 0x000306c3 (0x3c), Goldmont Plus 0x000706a1 (0x7a).
    for (eax, model, depth, info, caps, format) in [
        (0x0001_06a5, 0x1a, 16, None, 3, LbrFormat::EipFlags),
        (0x0003_06c3, 0x3c, 16, None, 4, LbrFormat::EipFlags2),
        (0x0007_06a1, 0x7a, 32, Some(0xdc0), 6, LbrFormat::Time),
    ] {
        let t = cpu(INTEL, 0xb, &[((1, 0), regs(eax, 0, PDCM, 0))]);
        let f = identify(&t, Some(caps));
        assert_eq!(f.signature.model, model);
        let Some(Recorder::IntelLegacy(l)) = f.recorder else {
            panic!()
        };
        assert_eq!(
            (l.depth, l.from, l.info, l.format),
            (depth, 0x680, info, Some(format))
        );
    }
}

#[test]
fn bonnell_erratum_has_no_lbr() {
    // Atom Bonnell model 0x1c stepping 2: the kernel disables LBR (erratum); stepping 10 is fine.
    let early = cpu(INTEL, 0xa, &[((1, 0), regs(0x0001_06c2, 0, 0, 0))]);
    assert_eq!(identify(&early, None).recorder, None);
    let late = cpu(INTEL, 0xa, &[((1, 0), regs(0x0001_06ca, 0, 0, 0))]);
    assert_eq!(identify(&late, None).recorder.map(|r| r.depth()), Some(8));
}

#[test]
fn unknown_intel_model_has_no_legacy_lbr() {
    // Pentium 4 (family 0xf) and a family 6 model the kernel does not list (0x01, Pentium Pro).
    for eax in [0x0000_0f29, 0x0000_0611] {
        let t = cpu(INTEL, 2, &[((1, 0), regs(eax, 0, 0, 0))]);
        assert_eq!(identify(&t, None).recorder, None);
    }
}

#[test]
fn sapphire_rapids_has_arch_lbr() {
    // 0x000806f8: family 6 model 0x8f. CPUID.(7,0):EDX[19] arch LBR; leaf 0x1c: depths 8..32
    // (EAX[7:0] = 0x0f), deep C-state reset and LIP (EAX[31:30]), all filters (EBX[2:0]), INFO
    // mispredict, timed and branch type (ECX[2:0]).
    let t = cpu(
        INTEL,
        0x20,
        &[
            ((1, 0), regs(0x0008_06f8, 0, PDCM, DS)),
            ((7, 0), regs(0, 0, 0, 1 << 19)),
            ((0x1c, 0), regs(0xc000_000f, 0x7, 0x7, 0)),
        ],
    );
    let r = identify(&t, Some(0x33c5)).recorder.unwrap();
    let Recorder::IntelArch(a) = r else {
        panic!("{r:?}")
    };
    assert_eq!(a.depths, 0x0f);
    assert_eq!(r.depth(), 32);
    assert!(
        a.cpl_filter && a.branch_filter && a.call_stack && a.mispredict && a.timed && a.branch_type
    );
    assert_eq!(
        r.switch(),
        Switch {
            msr: 0x14ce,
            mask: 1,
            name: "ARCH_LBR_CTL.LBREn"
        }
    );
    assert_eq!(r.first_record_msr(), 0x1500);
}

#[test]
fn arch_lbr_needs_leaf_0x1c() {
    // The arch-LBR bit with a maximum leaf below 0x1c is not trusted; model 0x8f is not a
    // legacy-LBR model either.
    let t = cpu(
        INTEL,
        0x1b,
        &[
            ((1, 0), regs(0x0008_06f8, 0, 0, 0)),
            ((7, 0), regs(0, 0, 0, 1 << 19)),
        ],
    );
    assert_eq!(identify(&t, None).recorder, None);
}

#[test]
fn zen4_has_lbr_v2_16_deep() {
    // Ryzen 9 7950X: CPUID.1:EAX = 0x00a60f12: base family 0xf + extended 0xa = 0x19, model 0x61.
    // 0x80000022: EAX[1] LbrExtV2, EBX[9:4] = 16 entries, EBX[3:0] = 6 core counters.
    let t = cpu(
        AMD,
        0x10,
        &[
            ((1, 0), regs(0x00a6_0f12, 0, 0, 0)),
            ((0x8000_0000, 0), regs(0x8000_0028, 0, 0, 0)),
            ((0x8000_0022, 0), regs(0x7, 0x106, 0, 0)),
        ],
    );
    let f = identify(&t, None);
    assert_eq!(
        f.signature,
        Signature {
            vendor: Vendor::Amd,
            family: 0x19,
            model: 0x61,
            stepping: 2
        }
    );
    let r = f.recorder.unwrap();
    assert_eq!(r, Recorder::AmdLbrV2 { depth: 16 });
    assert_eq!(
        r.switch(),
        Switch {
            msr: 0xc000_010f,
            mask: 0x40,
            name: "DBG_EXTN_CFG.LBRV2EN"
        }
    );
    assert_eq!(r.first_record_msr(), 0xc001_0300);
    assert!(!f.pdcm && !f.ds); // Intel-only bits are not read on AMD
}

#[test]
fn zen3_has_the_single_record() {
    // Ryzen 5 5600X: 0x00a20f10 -> family 0x19 model 0x21; max extended leaf 0x80000020.
    let t = cpu(
        AMD,
        0x10,
        &[
            ((1, 0), regs(0x00a2_0f10, 0, 0, 0)),
            ((0x8000_0000, 0), regs(0x8000_0020, 0, 0, 0)),
        ],
    );
    let r = identify(&t, None).recorder.unwrap();
    assert_eq!(r, Recorder::AmdSingle);
    assert_eq!(
        (r.switch().msr, r.first_record_msr(), r.depth()),
        (0x1d9, 0x1db, 1)
    );
}

#[test]
fn other_vendors_have_nothing() {
    // "KVMKVMKVM\0\0\0" is a hypervisor leaf, but as a vendor it stands for any unknown one.
    let t = cpu(
        (0x4b4d_564b, 0x564b_4d56, 0x0000_004d),
        1,
        &[((1, 0), regs(0x0005_06e3, 0, 0, 0))],
    );
    let f = identify(&t, None);
    assert!(matches!(f.signature.vendor, Vendor::Other(_)));
    assert_eq!(f.recorder, None);
    assert!(f
        .signature
        .to_string()
        .starts_with("KVMKVMKVM??? family 0x6 model 0x5e"));
}

#[test]
fn every_perf_capabilities_format_decodes() {
    let names = [
        "32",
        "LIP",
        "EIP",
        "EIP_FLAGS",
        "EIP_FLAGS2",
        "INFO",
        "TIME",
        "INFO2",
    ];
    for (n, name) in names.iter().enumerate() {
        // Higher PERF_CAPABILITIES bits (PEBS format etc.) must not leak into the LBR format.
        let f = LbrFormat::from_perf_capabilities(0xff00 | n as u64);
        assert_eq!((f.number(), f.name()), (n as u8, *name));
    }
    assert_eq!(
        LbrFormat::from_perf_capabilities(0x3f),
        LbrFormat::Unknown(63)
    );
}

#[test]
fn bts_availability() {
    assert_eq!(bts(false, Some(0)), Bts::Absent);
    assert_eq!(bts(true, None), Bts::Absent);
    assert_eq!(bts(true, Some(0x850089)), Bts::Available);
    assert_eq!(bts(true, Some(1 << 11)), Bts::Unavailable);
}

#[test]
fn filter_msr_only_where_the_kernel_has_an_lbr_sel_map() {
    // intel_pmu_lbr_init_core() and _atom() set no lbr_sel_map: Core 2 (0x17) and Bonnell (0x1c
    // stepping 10) have no LBR_SELECT; Silvermont (0x37), Nehalem (0x1a) and Skylake (0x5e) do.
    for (eax, select) in [
        (0x0001_0676, None),
        (0x0001_06ca, None),
        (0x0003_0678, Some(0x1c8)),
        (0x0001_06a5, Some(0x1c8)),
        (0x0005_06e3, Some(0x1c8)),
    ] {
        let t = cpu(INTEL, 0xd, &[((1, 0), regs(eax, 0, PDCM, 0))]);
        let Some(Recorder::IntelLegacy(l)) = identify(&t, Some(3)).recorder else {
            panic!("{eax:#x}")
        };
        assert_eq!(l.select, select, "{eax:#x}");
    }
}

#[test]
fn arch_lbr_without_a_supported_depth_is_no_recorder() {
    // CPUID.1C:EAX[7:0] = 0 (a broken hypervisor): no depth to record with. Taken as a recorder
    // of depth 0 it would make the capture read an empty MSR list (the stubs' loop counter then
    // wraps: 2^64 RDMSRs).
    let t = cpu(
        INTEL,
        0x20,
        &[
            ((1, 0), regs(0x0008_06f8, 0, PDCM, DS)),
            ((7, 0), regs(0, 0, 0, 1 << 19)),
            ((0x1c, 0), regs(0xc000_0000, 0x7, 0x7, 0)),
        ],
    );
    assert_eq!(identify(&t, None).recorder, None);
    // And a layout is never made for a depth-0 recorder, however it was obtained.
    let arch = Recorder::IntelArch(arch_lbr(0));
    assert_eq!(
        lbr_core::record::encoding(&arch, lbr_core::record::Tsx::Absent),
        Err(lbr_core::record::Unsupported::NoDepth)
    );
    assert_eq!(
        lbr_core::record::encoding(
            &Recorder::AmdLbrV2 { depth: 0 },
            lbr_core::record::Tsx::Absent
        ),
        Err(lbr_core::record::Unsupported::NoDepth)
    );
}

#[test]
fn disarming_restores_only_its_own_value() {
    let sw = Switch {
        msr: 0x1d9,
        mask: 1,
        name: "DEBUGCTL.LBR",
    };
    let (before, armed) = (0x800, 0x801);
    // lbr-dump's value, on or frozen: the value before arming goes back.
    assert_eq!(sw.restore(armed, armed, before), Some(before));
    assert_eq!(sw.restore(armed & !1, armed, before), Some(before));
    // A perf session since wrote its own (FREEZE_LBRS_ON_PMI, LBR): left as it is.
    assert_eq!(sw.restore(0x1801, armed, before), None);
    assert_eq!(sw.restore(0, armed, before), None);
}

#[test]
fn flavours_have_one_code_and_one_name_each() {
    // The dump header's codes (layout.rs 0x030) are a format: they never change meaning.
    let codes: Vec<u32> = Flavour::ALL.iter().map(|f| f.code()).collect();
    assert_eq!(codes, [1, 2, 3, 4]);
    for f in Flavour::ALL {
        assert_eq!(Flavour::from_code(f.code()), Some(f));
        assert_eq!(
            Flavour::ALL
                .iter()
                .filter(|g| g.name() == f.name() || g.title() == f.title())
                .count(),
            1
        );
    }
    assert_eq!((Flavour::from_code(0), Flavour::from_code(5)), (None, None));
}

#[test]
fn a_recorder_and_its_encoding_are_the_same_flavour() {
    use lbr_core::record::{encoding, Tsx};
    let skylake = identify(&skylake(), Some(5)).recorder.unwrap();
    let all = [
        skylake,
        Recorder::IntelArch(arch_lbr(0x0f)),
        Recorder::AmdLbrV2 { depth: 16 },
        Recorder::AmdSingle,
    ];
    for r in all {
        let e = encoding(&r, Tsx::Absent).unwrap();
        assert_eq!(r.flavour(), e.flavour(), "{r}");
        assert!(r.to_string().starts_with(r.flavour().title()), "{r}");
    }
    assert_eq!(all.map(|r| r.flavour()), Flavour::ALL);
}

#[test]
fn filters_map_onto_each_flavours_hardware_filter() {
    use lbr_core::facility::Filter;
    // LBR_SELECT (SDM "Filtering of Last Branch Records", a set bit suppresses): 2 JCC,
    // 6 NEAR_IND_JMP, 7 NEAR_REL_JMP; 3-5 calls and returns and 8 FAR_BRANCH never suppressed.
    assert_eq!(Filter::All.select_bits(), 0);
    assert_eq!(Filter::Functions.select_bits(), 0b1000_0100);
    assert_eq!(Filter::Calls.select_bits(), 0b1100_0100);
    // IA32_LBR_CTL (a set bit records): 16 JCC, 17 NEAR_REL_JMP, 18 NEAR_IND_JMP,
    // 19 NEAR_REL_CALL, 20 NEAR_IND_CALL, 21 NEAR_RET, 22 OTHER_BRANCH.
    assert_eq!(Filter::All.arch_type_bits(), 0x7f_0000);
    assert_eq!(Filter::Functions.arch_type_bits(), 0x7c_0000);
    assert_eq!(Filter::Calls.arch_type_bits(), 0x78_0000);
    for f in Filter::ALL {
        assert_eq!(
            Filter::ALL[f as usize],
            f,
            "the module stores a filter as its code"
        );
        assert_eq!(Filter::from_name(f.name()), Some(f));
        assert_eq!(Filter::from_name(&format!("{}\n", f.name())), Some(f));
    }
    assert_eq!(Filter::from_name("jumps"), None);
    assert_eq!(Filter::from_name(""), None);
    assert_eq!(Filter::from_name("calls\n\n"), None);
}

#[test]
fn recorders_without_a_branch_filter_refuse_all_but_all() {
    use lbr_core::facility::Filter;
    let core2 = identify(
        &cpu(INTEL, 0xd, &[((1, 0), regs(0x0001_0676, 0, PDCM, DS))]),
        Some(1),
    )
    .recorder
    .unwrap();
    let skylake = identify(&skylake(), Some(5)).recorder.unwrap();
    let mut no_filter = arch_lbr(0x0f);
    no_filter.branch_filter = false;
    for (r, refused) in [
        (core2, true),
        (Recorder::AmdSingle, true),
        (Recorder::IntelArch(no_filter), true),
        (skylake, false),
        (Recorder::IntelArch(arch_lbr(0x0f)), false),
        (Recorder::AmdLbrV2 { depth: 16 }, false),
    ] {
        assert_eq!(Filter::All.unsupported_by(&r), None, "{r}");
        for f in [Filter::Functions, Filter::Calls] {
            assert_eq!(f.unsupported_by(&r).is_some(), refused, "{r} {f:?}");
        }
    }
}
