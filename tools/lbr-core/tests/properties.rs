// SPDX-License-Identifier: GPL-2.0

//! Property tests of the pure code: what the printer writes parses back to the same values
//! behind any log prefix; no input (a line, a dump header, raw record values) makes the readers
//! panic.

use lbr_core::area::{checksum, AreaHeader};
use lbr_core::facility::{Filter, Flavour};
use lbr_core::layout::{hdr, HEADER_SIZE, MAGIC};
use lbr_core::record::{records, Branch, BranchType, Encoding};
use lbr_core::report::{parse, Header, Line, RecordLine, State};
use proptest::prelude::*;

fn flag() -> impl Strategy<Value = Option<bool>> {
    // The printer writes a flag only when set; an unset one reads back as absent.
    prop_oneof![Just(None), Just(Some(true))]
}

fn branch() -> impl Strategy<Value = Branch> {
    let ty = prop_oneof![
        Just(None),
        Just(Some(BranchType::Jcc)),
        Just(Some(BranchType::IndJmp)),
        Just(Some(BranchType::RelJmp)),
        Just(Some(BranchType::IndCall)),
        Just(Some(BranchType::RelCall)),
        Just(Some(BranchType::Ret)),
        Just(Some(BranchType::Other(15))),
    ];
    (
        any::<u64>(),
        any::<u64>(),
        flag(),
        flag(),
        flag(),
        flag(),
        any::<Option<u16>>(),
        ty,
    )
        .prop_map(
            |(from, to, mispred, in_tx, abort, spec, cycles, branch_type)| Branch {
                from,
                to,
                mispred,
                in_tx,
                abort,
                spec,
                cycles,
                branch_type,
            },
        )
}

/// What precedes lbr-dump's prefix in real logs: timestamps, levels, syslog and CI decorations.
fn prefix() -> impl Strategy<Value = String> {
    "(\\[ *[0-9]{1,5}\\.[0-9]{6}\\] |<[0-7]>|[A-Z][a-z]{2} [0-9]{2} [0-9:]{8} [a-z]+ kernel: |[ -~]{0,20})"
}

proptest! {
    #[test]
    fn record_lines_round_trip(index in 0u32..64, b in branch(), pre in prefix(), cr in any::<bool>(),
                               syms in proptest::option::of(("[a-z_]{1,20}\\+0x[0-9a-f]{1,4}/0x[0-9a-f]{1,4}", "[a-z_]{1,20}\\+0x[0-9a-f]{1,4}/0x[0-9a-f]{1,4}( \\[[a-z_]+\\])?"))) {
        let r = RecordLine { index, branch: b };
        let tail = match &syms {
            Some((f, t)) => format!(" | {f} -> {t}"),
            None => String::new(),
        };
        let line = format!("{pre}lbr_dump: {r}{tail}{}", if cr { "\r" } else { "" });
        let want = Line::Record {
            record: r,
            from_sym: syms.as_ref().map(|s| s.0.as_str()),
            to_sym: syms.as_ref().map(|s| s.1.as_str()),
        };
        prop_assert_eq!(parse(&line), Some(want));
    }

    #[test]
    fn headers_round_trip(cpu in any::<u32>(), seq in any::<u64>(), vector in 0u32..32, error in any::<u64>(),
                          rip in any::<u64>(), cr2 in any::<u64>(), format in 0u32..8, records in 0u32..65,
                          state in prop_oneof![Just(State::Complete), Just(State::Torn), Just(State::WasOff), Just(State::Foreign)],
                          flavour in proptest::sample::select(Flavour::ALL.map(Flavour::name).to_vec()),
                          nest in proptest::option::of(0u32..8), pre in prefix(),
                          filter in proptest::sample::select(Filter::ALL.to_vec())) {
        let h = Header { cpu, seq, vector, error, rip, cr2, flavour, format, records, state, nest, filter };
        let line = format!("{pre}lbr_dump: {h}");
        prop_assert_eq!(parse(&line), Some(Line::Header(h)));
    }

    #[test]
    fn no_line_makes_the_parser_panic(s in "(lbr_dump: )?(v1 |#|end )?[ -~]{0,120}") {
        let _ = parse(&s);
    }

    #[test]
    fn no_header_makes_the_area_reader_panic(mut b in proptest::collection::vec(any::<u8>(), HEADER_SIZE..HEADER_SIZE + 4096),
                                             small in any::<bool>()) {
        // Past the magic and the checksum, so that the field checks are what is exercised.
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        if small {
            // Plausible counts, so that some headers get through to the geometry checks.
            for off in [hdr::NR_CPUS, hdr::RING, hdr::DEPTH, hdr::FLAVOUR, hdr::FORMAT] {
                b[off + 1..off + 4].fill(0);
                b[off] &= 7;
            }
        }
        let sum = checksum(&b[..HEADER_SIZE], hdr::CHECKSUM);
        b[hdr::CHECKSUM..hdr::CHECKSUM + 8].copy_from_slice(&sum.to_le_bytes());
        if let Ok(h) = AreaHeader::parse(&b) {
            // A header that validates describes an area of exactly area_size bytes.
            if b.len() >= h.area_size {
                for cpu in 0..h.geometry.nr_cpus {
                    for slot in 0..h.geometry.ring {
                        let s = h.snapshot(&b, cpu, slot);
                        let _ = (0..h.geometry.nr_values).map(|i| s.value(i)).sum::<u64>();
                    }
                }
            }
        }
    }

    #[test]
    fn no_values_make_the_decoder_panic(flavour in 0u32..6, format in 0u32..9, depth in 0u32..80, flags in 0u32..4,
                                        values in proptest::collection::vec(any::<u64>(), 0..260)) {
        if let Some(l) = Encoding::from_codes(flavour, format, depth, flags) {
            match records(l, &values[..]) {
                Some(r) => prop_assert!(r.count() <= l.depth()),
                None => prop_assert!(values.len() < l.values()),
            }
        }
    }
}
