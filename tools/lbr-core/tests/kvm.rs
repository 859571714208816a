// SPDX-License-Identifier: GPL-2.0

//! Guests: the hypervisor lbr-dump names from CPUID (src/hypervisor.rs), what it says the records
//! are under KVM, and the `zeroed` state of a capture whose records were taken away
//! (src/report.rs). The CPUID values are written out by hand: the hypervisor bit is CPUID.1:ECX[31]
//! (SDM vol. 2 CPUID, "Not Used" there, set by every hypervisor; the kernel's
//! X86_FEATURE_HYPERVISOR), KVM's signature "KVMKVMKVM\0\0\0" in EBX, ECX, EDX of its base leaf
//! (include/uapi/asm/kvm_para.h), QEMU TCG's "TCGTCGTCGTCG" and Hyper-V's "Microsoft Hv".

mod common;

use common::{regs, Table, AMD, INTEL};
use lbr_core::facility::*;
use lbr_core::hypervisor::*;
use lbr_core::report::{self, Header, Line, State};

const HYPERVISOR: u32 = 1 << 31; // CPUID.1:ECX
const PDCM: u32 = 1 << 15; // CPUID.1:ECX

/// EBX, ECX, EDX of a 12-byte signature.
fn sig(s: &[u8; 12]) -> (u32, u32, u32) {
    let w = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
    (w(0), w(4), w(8))
}

/// A CPU of `vendor` with leaf 1 EAX/ECX as given and hypervisor leaves `hv`: (leaf, max leaf in
/// EAX, signature).
fn cpu(vendor: (u32, u32, u32), eax1: u32, ecx1: u32, hv: &[(u32, u32, &[u8; 12])]) -> Table {
    let mut leaves = vec![((1, 0), regs(eax1, 0, ecx1, 0))];
    for &(leaf, max, s) in hv {
        let (b, c, d) = sig(s);
        leaves.push(((leaf, 0), regs(max, b, c, d)));
    }
    common::cpu(vendor, 0x16, &leaves)
}

const SKYLAKE: u32 = 0x0005_06e3; // family 6 model 0x5e stepping 3
const GENOA: u32 = 0x00a1_0f11; // family 0x19 model 0x11 stepping 1
const KVM: &[u8; 12] = b"KVMKVMKVM\0\0\0";

#[test]
fn kvm_is_found_at_its_base_leaf() {
    let c = cpu(
        INTEL,
        SKYLAKE,
        HYPERVISOR | PDCM,
        &[(0x4000_0000, 0x4000_0001, KVM)],
    );
    assert_eq!(detect(&c), Hypervisor::Kvm);
}

#[test]
fn kvm_behind_hyper_v_leaves_is_found_higher_up() {
    // KVM with Hyper-V enlightenments: Hyper-V's leaves at 0x40000000, KVM's at 0x40000100.
    let c = cpu(
        INTEL,
        SKYLAKE,
        HYPERVISOR,
        &[
            (0x4000_0000, 0x4000_000b, b"Microsoft Hv"),
            (0x4000_0100, 0x4000_0101, KVM),
        ],
    );
    assert_eq!(detect(&c), Hypervisor::Kvm);
}

#[test]
fn no_hypervisor_bit_is_bare_metal_whatever_the_leaves_say() {
    // The kernel looks at hypervisor leaves only with X86_FEATURE_HYPERVISOR (kvm_detect()).
    let c = cpu(INTEL, SKYLAKE, PDCM, &[(0x4000_0000, 0x4000_0001, KVM)]);
    assert_eq!(detect(&c), Hypervisor::None);
}

#[test]
fn other_hypervisors_are_named_by_their_signature() {
    let tcg = cpu(
        INTEL,
        SKYLAKE,
        HYPERVISOR,
        &[(0x4000_0000, 0x4000_0010, b"TCGTCGTCGTCG")],
    );
    assert_eq!(detect(&tcg), Hypervisor::Other(*b"TCGTCGTCGTCG"));
    let rec = Recorder::AmdSingle;
    let b = detect(&tcg).backing(&rec).unwrap();
    assert_eq!(Short(b).to_string(), "hypervisor \"TCGTCGTCGTCG\"");
    assert_eq!(
        b.to_string(),
        "records as hypervisor \"TCGTCGTCGTCG\" presents them"
    );
    // A hypervisor bit without leaves: an empty signature; odd bytes shown as '?'.
    let none = cpu(AMD, GENOA, HYPERVISOR, &[]);
    assert_eq!(detect(&none), Hypervisor::Other([0; 12]));
    assert_eq!(
        Short(detect(&none).backing(&rec).unwrap()).to_string(),
        "hypervisor \"\""
    );
    let odd = cpu(
        AMD,
        GENOA,
        HYPERVISOR,
        &[(0x4000_0000, 0x4000_0001, b"ab\x01\xffcd\0\0ef\0\0")],
    );
    assert_eq!(
        Short(detect(&odd).backing(&rec).unwrap()).to_string(),
        "hypervisor \"ab??cd??ef\""
    );
}

#[test]
fn a_kvm_guest_names_where_its_records_come_from() {
    // Intel under KVM with -cpu host,pmu=on,lbr-fmt=5: the host's model, PDCM, legacy LBR.
    let intel = cpu(
        INTEL,
        SKYLAKE,
        HYPERVISOR | PDCM,
        &[(0x4000_0000, 0x4000_0001, KVM)],
    );
    let f = identify(&intel, Some(5));
    let rec = f.recorder.expect("legacy LBR");
    assert!(matches!(rec, Recorder::IntelLegacy(_)));
    let b = detect(&intel).backing(&rec).unwrap();
    assert_eq!(b, Backing::KvmVirtualLbr);
    assert_eq!(
        Short(b).to_string(),
        "KVM guest: virtual LBR, a host perf event the host can take back"
    );
    assert!(b.to_string().contains("host perf event"), "{b}");
    assert!(b.to_string().contains("state=zeroed"), "{b}");

    // AMD under KVM: no LbrExtV2 leaf (KVM never sets CPUID 0x80000022 EAX[1]): the single
    // record, through LBRV.
    let amd = cpu(AMD, GENOA, HYPERVISOR, &[(0x4000_0000, 0x4000_0001, KVM)]);
    let rec = identify(&amd, None).recorder.expect("the single record");
    assert_eq!(rec, Recorder::AmdSingle);
    let b = detect(&amd).backing(&rec).unwrap();
    assert_eq!(b, Backing::KvmLbrv);
    assert_eq!(
        Short(b).to_string(),
        "KVM guest: AMD LBRV, the single record"
    );

    // A recorder KVM does not give guests, under a KVM signature, is not called KVM's.
    let arch = Recorder::AmdLbrV2 { depth: 16 };
    assert_eq!(Hypervisor::Kvm.backing(&arch), Some(Backing::KvmOther));
    // Bare metal: nothing to say.
    assert_eq!(Hypervisor::None.backing(&rec), None);
}

#[test]
fn refusals_in_a_kvm_guest_say_what_kvm_needs() {
    let intel = Hypervisor::Kvm
        .refusal_hint(Vendor::Intel)
        .unwrap()
        .to_string();
    assert!(intel.contains("-cpu host,pmu=on,lbr-fmt="), "{intel}");
    assert!(
        intel.contains("not Arch LBR") && intel.contains("mediated PMU"),
        "{intel}"
    );
    let amd = Hypervisor::Kvm
        .refusal_hint(Vendor::Amd)
        .unwrap()
        .to_string();
    assert!(
        amd.contains("LBRV") && amd.contains("kvm_amd.lbrv=1"),
        "{amd}"
    );
    let tcg = Hypervisor::Other(*b"TCGTCGTCGTCG")
        .refusal_hint(Vendor::Intel)
        .unwrap();
    assert_eq!(tcg.to_string(), "guest of hypervisor \"TCGTCGTCGTCG\"");
    assert_eq!(Hypervisor::None.refusal_hint(Vendor::Intel), None);
}

#[test]
fn the_short_forms_leave_room_in_the_facility_line() {
    // The probe's line is also /sys/kernel/lbr_dump/facility, kept in 255 bytes (glue.c,
    // printer.rs LineBuf). A legacy-LBR line as printed under the emulator is about 150 bytes
    // (a Skylake's, 'switches on'), and KVM guests have only legacy LBR or the single record:
    // the KVM note must fit beside it.
    for b in [Backing::KvmVirtualLbr, Backing::KvmLbrv, Backing::KvmOther] {
        assert!(Short(b).to_string().len() <= 64, "{}", Short(b));
    }
}

#[test]
fn zeroed_is_a_capture_with_recording_on_and_no_record() {
    assert_eq!(State::Complete.with_records(0), State::Zeroed);
    assert_eq!(State::Foreign.with_records(0), State::Zeroed);
    assert_eq!(State::Complete.with_records(1), State::Complete);
    assert_eq!(State::Foreign.with_records(32), State::Foreign);
    // States that already say why records may be missing stay.
    for s in [State::WasOff, State::Torn, State::NmiEntry] {
        assert_eq!(s.with_records(0), s);
    }
}

#[test]
fn zeroed_prints_and_parses_back() {
    let h = Header {
        cpu: 0,
        seq: 3,
        vector: 14,
        error: 0,
        rip: 0xffff_ffff_8100_0000,
        cr2: 0,
        flavour: "intel-lbr",
        format: 5,
        records: 0,
        state: State::Zeroed,
        nest: Some(0),
        filter: lbr_core::facility::Filter::All,
    };
    let line = format!("{}{h}", report::PREFIX);
    assert!(line.contains(" records=0 state=zeroed nest=0"), "{line}");
    let Some(Line::Header(back)) = report::parse(&line) else {
        panic!("{line}")
    };
    assert_eq!(back, h);
}
