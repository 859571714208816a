// SPDX-License-Identifier: GPL-2.0

//! The printed line format: lines as the kernel prints them (with printk decorations and `%pS`
//! symbols written out by hand) parse, and what the module formats parses back to itself.

use lbr_core::facility::Filter;
use lbr_core::record::{Branch, BranchType};
use lbr_core::report::*;

#[test]
fn parses_kernel_lines_with_decorations() {
    let h = "[   12.345678] lbr_dump: v1 cpu=1 seq=7 vector=14 (#PF) error=0x2 rip=0xffffffffc0001234 cr2=0x0 flavour=intel-lbr format=5 records=32 state=complete\r\n";
    let Some(Line::Header(h)) = parse(h) else {
        panic!()
    };
    assert_eq!(
        (h.cpu, h.seq, h.vector, h.error, h.rip, h.cr2),
        (1, 7, 14, 2, 0xffff_ffff_c000_1234, 0)
    );
    assert_eq!(
        (h.flavour, h.format, h.records, h.state),
        ("intel-lbr", 5, 32, State::Complete)
    );

    let r = "<4>Nov 22 10:00:00 host kernel: lbr_dump: #0 0xffffffffc0001230 -> 0xffffffff81a00000 mispred cycles=3 | crash_me+0x10/0x40 [lbr_check] -> asm_exc_page_fault+0x0/0x30";
    let Some(Line::Record {
        record,
        from_sym,
        to_sym,
    }) = parse(r)
    else {
        panic!()
    };
    assert_eq!(record.index, 0);
    assert_eq!(
        (record.branch.from, record.branch.to),
        (0xffff_ffff_c000_1230, 0xffff_ffff_81a0_0000)
    );
    assert_eq!(
        (record.branch.mispred, record.branch.cycles),
        (Some(true), Some(3))
    );
    assert_eq!(from_sym, Some("crash_me+0x10/0x40 [lbr_check]"));
    assert_eq!(to_sym, Some("asm_exc_page_fault+0x0/0x30"));

    assert_eq!(
        parse("lbr_dump: end cpu=1 seq=7"),
        Some(Line::End(EndLine {
            cpu: 1,
            seq: 7,
            rewritten: false
        }))
    );
    // A snapshot whose slot a newer capture took while it was printed; a later field ignored.
    assert_eq!(
        parse("lbr_dump: end cpu=1 seq=7 rewritten later=1"),
        Some(Line::End(EndLine {
            cpu: 1,
            seq: 7,
            rewritten: true
        }))
    );
    for (cpu, seq, rewritten, text) in [
        (1, 7, false, "end cpu=1 seq=7"),
        (3, 12, true, "end cpu=3 seq=12 rewritten"),
    ] {
        let e = EndLine {
            cpu,
            seq,
            rewritten,
        };
        assert_eq!(e.to_string(), text);
        assert_eq!(parse(&format!("lbr_dump: {e}")), Some(Line::End(e)));
    }
    assert_eq!(
        parse("lbr_dump: v1 cpu=0 none: no snapshot of this exception"),
        Some(Line::None {
            cpu: 0,
            reason: "no snapshot of this exception"
        })
    );
}

/// The `kept:` lines of bounded output (print_records, print_all): what is left out, and a
/// stopped CPU's one line, read whole with its symbol; never a header.
#[test]
fn parses_kept_lines() {
    assert_eq!(
        parse("[    7.3] lbr_dump: v2 cpu=0 kept: seq=1 records #16-#31 are not printed, only kept in memory"),
        Some(Line::Kept {
            cpu: 0,
            text: "seq=1 records #16-#31 are not printed, only kept in memory"
        })
    );
    assert_eq!(
        parse("lbr_dump: v2 cpu=3 kept: seq=4 vector=248 (REBOOT_VECTOR) rip=0xffffffff81234567 records=32 state=complete | at=default_idle+0x1f/0x30"),
        Some(Line::Kept {
            cpu: 3,
            text: "seq=4 vector=248 (REBOOT_VECTOR) rip=0xffffffff81234567 records=32 state=complete | at=default_idle+0x1f/0x30"
        })
    );
}

/// The same lines in version 2, as the module prints them now: `| from=SYM to=SYM`, `v2`.
#[test]
fn parses_version_2_lines_as_version_1() {
    let v1 = [
        "[   12.345678] lbr_dump: v1 cpu=1 seq=7 vector=14 (#PF) error=0x2 rip=0xffffffffc0001234 cr2=0x0 flavour=intel-lbr format=5 records=32 state=complete nest=0",
        "lbr_dump: #0 0xffffffffc0001230 -> 0xffffffff81a00000 mispred cycles=3 | crash_me+0x10/0x40 [lbr_check] -> asm_exc_page_fault+0x0/0x30",
        "lbr_dump: #1 0xffffffff81000010 -> 0xffff800000001000 | __pi___x86_indirect_thunk_r11+0xa/0x20 -> 0xffff800000001000",
        "lbr_dump: ler 0xffffffff81000010 -> 0xffffffff81000020 | f+0x0/0x10 -> g+0x0/0x10 [m]",
        "lbr_dump: v1 cpu=0 none: no snapshot of this exception",
    ];
    let v2 = [
        "[   12.345678] lbr_dump: v2 cpu=1 seq=7 vector=14 (#PF) error=0x2 rip=0xffffffffc0001234 cr2=0x0 flavour=intel-lbr format=5 records=32 state=complete nest=0",
        "lbr_dump: #0 0xffffffffc0001230 -> 0xffffffff81a00000 mispred cycles=3 | from=crash_me+0x10/0x40 [lbr_check] to=asm_exc_page_fault+0x0/0x30",
        "lbr_dump: #1 0xffffffff81000010 -> 0xffff800000001000 | from=__pi___x86_indirect_thunk_r11+0xa/0x20 to=0xffff800000001000",
        "lbr_dump: ler 0xffffffff81000010 -> 0xffffffff81000020 | from=f+0x0/0x10 to=g+0x0/0x10 [m]",
        "lbr_dump: v2 cpu=0 none: no snapshot of this exception",
    ];
    for (a, b) in v1.iter().zip(v2) {
        assert!(parse(a).is_some(), "{a}");
        assert_eq!(parse(a), parse(b), "{b}");
    }
    let Some(Line::Record {
        from_sym, to_sym, ..
    }) = parse(v2[1])
    else {
        panic!()
    };
    assert_eq!(
        (from_sym, to_sym),
        (
            Some("crash_me+0x10/0x40 [lbr_check]"),
            Some("asm_exc_page_fault+0x0/0x30")
        )
    );
    // A symbol part cut inside it is no symbol part: the line is damaged.
    assert_eq!(
        parse("lbr_dump: #0 0xffffffffc0001230 -> 0xffffffff81a00000 | from=crash_me+0x10/0x40"),
        None
    );
}

/// What the module prints as a header is version 2.
#[test]
fn headers_are_printed_as_version_2() {
    let h = Header {
        cpu: 0,
        seq: 1,
        vector: 14,
        error: 0,
        rip: 1,
        cr2: 0,
        flavour: "intel-lbr",
        format: 5,
        records: 1,
        state: State::Complete,
        nest: Some(0),
        filter: Filter::All,
    };
    assert!(
        h.to_string().starts_with("v2 cpu=0 seq=1 vector=14 (#PF) "),
        "{h}"
    );
}

#[test]
fn rejects_other_lines() {
    for l in [
        "",
        "lbr_dump: Intel family 0x6 model 0x5e stepping 3: ...",
        "lbr_dump: #x 0x1 -> 0x2",
        "lbr_dump: #0 0x1 => 0x2",
        "lbr_dump: #0 0x1 -> 0x2 bogusflag",
        "lbr_dump: v1 cpu=0 seq=1 vector=14 (#PF) error=0x0 rip=0x1 cr2=0x0 flavour=x format=5 records=1 state=weird",
        "lbr_dump: v1 cpu=0 seq=1 vector=14",
        "something else entirely",
        // Cut by a console: inside the `to` address, and inside the symbol part.
        "lbr_dump: #1 0xffffffff815a8eea -> 0xfff",
        "lbr_dump: #1 0xffffffff815a8eea -> 0xffffffff81537fe0 mispred | __x86_indirect_thunk_r1",
    ] {
        assert_eq!(parse(l), None, "{l:?}");
    }
}

#[test]
fn what_the_module_prints_parses_back() {
    let b = Branch {
        from: 0xffff_ffff_8100_0010,
        to: 0x40_1000,
        mispred: Some(true),
        in_tx: Some(false),
        abort: Some(true),
        cycles: Some(65535),
        branch_type: Some(BranchType::IndCall),
        spec: None,
    };
    let line = format!(
        "{PREFIX}{}",
        RecordLine {
            index: 31,
            branch: b
        }
    );
    assert_eq!(line, "lbr_dump: #31 0xffffffff81000010 -> 0x0000000000401000 mispred abort cycles=65535 type=ind_call");
    let Some(Line::Record {
        record,
        from_sym: None,
        to_sym: None,
    }) = parse(&line)
    else {
        panic!("{line}")
    };
    // Flags that are clear are not printed: they read back as absent.
    assert_eq!(record.branch, Branch { in_tx: None, ..b });

    let h = Header {
        cpu: 3,
        seq: 99,
        vector: 21,
        error: 3,
        rip: 1,
        cr2: 2,
        flavour: "intel-arch-lbr",
        format: 0,
        records: 0,
        state: State::Torn,
        nest: None,
        filter: Filter::All,
    };
    let line = format!("{PREFIX}{h}");
    assert!(line.contains(" vector=21 (#CP) "), "{line}");
    assert_eq!(parse(&line), Some(Line::Header(h)));
    // The label of a nested snapshot: printed last on the line, read back.
    let nested = Header { nest: Some(1), ..h };
    let line = format!("{PREFIX}{nested}");
    assert!(line.ends_with(" state=torn nest=1"), "{line}");
    assert_eq!(parse(&line), Some(Line::Header(nested)));
    // A capture while a KVM guest held the LBR.
    let lent = Header {
        state: State::Lent,
        ..h
    };
    let line = format!("{PREFIX}{lent}");
    assert!(line.ends_with(" state=lent"), "{line}");
    assert_eq!(parse(&line), Some(Line::Header(lent)));
}

/// The branch filter on the header line: printed after the nesting label when it is not `all`
/// (and not at all for `all`, as older lbr-dumps printed nothing), read back; the reader takes
/// no `filter=` as `all`, refuses a name that is no filter's (a console cut it), and ignores a
/// field it does not know.
#[test]
fn header_names_the_filter() {
    let head = "lbr_dump: v1 cpu=0 seq=1 vector=14 (#PF) error=0x0 rip=0xffffffff81000000 cr2=0x0 flavour=intel-lbr format=5 records=32 state=complete";
    let filter_of = |l: &str| match parse(l) {
        Some(Line::Header(h)) => Some((h.nest, h.filter)),
        _ => None,
    };
    assert_eq!(filter_of(head), Some((None, Filter::All)));
    assert_eq!(
        filter_of(&format!("{head} nest=0 filter=functions")),
        Some((Some(0), Filter::Functions))
    );
    assert_eq!(
        filter_of(&format!("{head} filter=calls\r\n")),
        Some((None, Filter::Calls))
    );
    assert_eq!(
        filter_of(&format!("{head} nest=1 later=field filter=calls")),
        Some((Some(1), Filter::Calls))
    );
    for bad in [
        format!("{head} filter=func"),
        format!("{head} filter="),
        format!("{head} nest=0 filter"),
        format!("{head} nest=x"),
    ] {
        assert_eq!(parse(&bad), None, "{bad}");
    }
    let h = Header {
        cpu: 1,
        seq: 2,
        vector: 13,
        error: 0,
        rip: 0xffff_ffff_8100_0000,
        cr2: 0,
        flavour: "intel-lbr",
        format: 5,
        records: 32,
        state: State::Complete,
        nest: Some(0),
        filter: Filter::Functions,
    };
    let line = format!("{PREFIX}{h}");
    assert!(
        line.ends_with(" state=complete nest=0 filter=functions"),
        "{line}"
    );
    assert_eq!(parse(&line), Some(Line::Header(h)));
    let all = Header {
        filter: Filter::All,
        ..h
    };
    assert!(format!("{all}").ends_with(" nest=0"), "{all}");
}

/// The last exception record's line: as the kernel prints it (written out by hand, `%pS`
/// symbols and printk decorations), as the module formats it, and its damaged forms.
#[test]
fn last_exception_line() {
    let l = "[    5.123456] lbr_dump: ler 0xffffffff815a8eea -> 0xffffffff81537fe0 | __x86_indirect_thunk_r11+0xa/0x20 -> lkdtm_EXCEPTION+0x0/0x20\r";
    assert_eq!(
        parse(l),
        Some(Line::Ler {
            ler: LerLine {
                from: 0xffff_ffff_815a_8eea,
                to: 0xffff_ffff_8153_7fe0
            },
            from_sym: Some("__x86_indirect_thunk_r11+0xa/0x20"),
            to_sym: Some("lkdtm_EXCEPTION+0x0/0x20"),
        })
    );
    let ler = LerLine {
        from: 0x40_1000,
        to: 0xffff_ffff_c040_0000,
    };
    let line = format!("{PREFIX}{ler}");
    assert_eq!(
        line,
        "lbr_dump: ler 0x0000000000401000 -> 0xffffffffc0400000"
    );
    assert_eq!(
        parse(&line),
        Some(Line::Ler {
            ler,
            from_sym: None,
            to_sym: None
        })
    );
    for bad in [
        "lbr_dump: ler 0x0000000000401000 -> 0xffffffffc04",
        "lbr_dump: ler 0x0000000000401000 => 0xffffffffc0400000",
        "lbr_dump: ler 0x0000000000401000 -> 0xffffffffc0400000 mispred",
        "lbr_dump: ler 0x0000000000401000 -> 0xffffffffc0400000 | foo+0x0/0x10",
        "lbr_dump: ler",
    ] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
}
