// SPDX-License-Identifier: GPL-2.0

//! Mitigation-thunk hops grouped with the branch they belong to. On a kernel with retpolines,
//! return thunks or ITS, one branch of the source often takes several records: a function
//! returns by jumping to `its_return_thunk`, whose `ret` is the return (two records); an
//! indirect call goes to `__x86_indirect_thunk_r11`, which calls its own next instruction and
//! returns from there to the target (three records). [`groups`] finds those records so that the
//! renderers can print them as one branch, from the first record's source to the last one's
//! target.
//!
//! The thunks are those of arch/x86/lib/retpoline.S (Linux 7.3), by the names kallsyms gives
//! them (`__pi_` aliases included):
//!
//! - return thunks: `its_return_thunk`, `__x86_return_thunk`, `retbleed_return_thunk`,
//!   `call_depth_return_thunk` (its RSB-stuffing calls are its own hops), `srso_return_thunk`
//!   (which calls `srso_safe_ret`, whose `ret` returns) and `srso_alias_return_thunk` (calls
//!   `srso_alias_safe_ret`);
//! - indirect-branch thunks, one per register: `__x86_indirect_thunk_REG` (a retpoline: a call
//!   to its own next instruction, then a `ret` to the target; or `lfence; jmp *REG`; or
//!   `jmp *REG`), `__x86_indirect_its_thunk_REG` (`jmp *REG`; entered at
//!   `__x86_indirect_paranoid_thunk_REG` under FineIBT's paranoid mode),
//!   `__x86_indirect_call_thunk_REG` and `__x86_indirect_jump_thunk_REG` (call depth tracking:
//!   a retpoline after the depth accounting). `..._array` names the `rax` one.
//!
//! A group is: one record that enters a thunk at its first instruction from outside it, then
//! records that leave from inside the thunk, consecutive in the snapshot, each but the last
//! landing inside it again, and the last landing outside it: that record's target is the
//! branch's target, shown whatever it is (an address in no symbol, such as a corrupted
//! function pointer, included). Nothing else is folded: a thunk entered and never left (the
//! snapshot ends, or an exception was taken inside it: the exception's record lands in an
//! exception or interrupt entry, see [`is_exception_entry`], or has branch type `other`), a gap
//! in the record numbers, or a record from outside the thunk in between, leave every record on
//! its own.

use super::RecordOut;
use crate::symbols::parse_printed;

/// What a thunk does for the branch that enters it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A return thunk: the function returns by jumping to it.
    Return,
    /// An indirect call or jump through a register; which one, when known: the recorder said
    /// the branch into the thunk was a call or a jump (Arch LBR), or the thunk is one that only
    /// calls or only jumps (call depth tracking).
    Indirect(Option<Transfer>),
}

/// An indirect branch's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// `call *REG`.
    Call,
    /// `jmp *REG` (tail calls).
    Jump,
}

impl Via {
    /// The name in the JSON output's `groups`.
    pub fn name(self) -> &'static str {
        match self {
            Via::Return => "return",
            Via::Indirect(None) => "indirect",
            Via::Indirect(Some(Transfer::Call)) => "indirect-call",
            Via::Indirect(Some(Transfer::Jump)) => "indirect-jump",
        }
    }

    /// How the text outputs describe the branch.
    pub fn describe(self) -> &'static str {
        match self {
            Via::Return => "return",
            Via::Indirect(None) => "indirect branch",
            Via::Indirect(Some(Transfer::Call)) => "indirect call",
            Via::Indirect(Some(Transfer::Jump)) => "indirect jump",
        }
    }
}

/// One branch that took several records through a thunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// What kind of branch it is.
    pub via: Via,
    /// The thunk, by its own name (`__x86_indirect_thunk_r11`, without the `__pi_` prefix).
    pub thunk: String,
    /// The return thunk an indirect thunk's own return went through, when it did: a retpoline
    /// whose `RET` is a return thunk's jump (CONFIG_MITIGATION_RETHUNK; which thunk, and
    /// whether the jump stays, the kernel decides at boot: Debian's 7.3 on the emulated
    /// Skylake) ends in `jmp its_return_thunk`, whose `ret` lands on the branch's target.
    pub ret: Option<String>,
    /// Where its records are in the snapshot's record list (newest first, as there): the
    /// branch goes from the source of the record at `end - 1` to the target of the one at
    /// `start`.
    pub start: usize,
    /// One past its oldest record.
    pub end: usize,
}

/// A thunk as found by name: its family (the names that belong to the same thunk), whether
/// this name is where the thunk is entered, and the kind of branch through it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Thunk {
    family: String,
    entry: bool,
    via: Via,
}

/// The x86-64 registers, in GEN-for-each-reg.h's order.
const REGS: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

/// The thunk that symbol name `name` is in, if it is one.
fn thunk(name: &str) -> Option<Thunk> {
    let name = name.strip_prefix("__pi_").unwrap_or(name);
    let ret = |family: &str, entry: bool| Thunk {
        family: family.to_string(),
        entry,
        via: Via::Return,
    };
    match name {
        "its_return_thunk"
        | "__x86_return_thunk"
        | "retbleed_return_thunk"
        | "call_depth_return_thunk"
        | "srso_return_thunk"
        | "srso_alias_return_thunk" => return Some(ret(name, true)),
        "srso_safe_ret" => return Some(ret("srso_return_thunk", false)),
        "srso_alias_safe_ret" => return Some(ret("srso_alias_return_thunk", false)),
        _ => {}
    }
    // (prefix, family prefix, what the thunk does).
    let per_reg = [
        ("__x86_indirect_thunk_", "__x86_indirect_thunk_", None),
        (
            "__x86_indirect_its_thunk_",
            "__x86_indirect_its_thunk_",
            None,
        ),
        (
            "__x86_indirect_paranoid_thunk_",
            "__x86_indirect_its_thunk_",
            None,
        ),
        (
            "__x86_indirect_call_thunk_",
            "__x86_indirect_call_thunk_",
            Some(Transfer::Call),
        ),
        (
            "__x86_indirect_jump_thunk_",
            "__x86_indirect_jump_thunk_",
            Some(Transfer::Jump),
        ),
    ];
    per_reg.iter().find_map(|&(prefix, family, transfer)| {
        let reg = name.strip_prefix(prefix)?;
        let reg = if reg == "array" { "rax" } else { reg };
        REGS.contains(&reg).then(|| Thunk {
            family: format!("{family}{reg}"),
            entry: true,
            via: Via::Indirect(transfer),
        })
    })
}

/// What the instruction whose first bytes are `code` transfers to a thunk: a call, or a jump
/// (unconditional or conditional: tail calls), as iced-x86 decodes it (the straight-line check's
/// decoder), prefixes included (`cs`: retpolines are called as `cs call __x86_indirect_thunk_REG`
/// so that the kernel can patch them into a 6-byte `call *REG`). Recorders without branch types
/// say only where a branch went; the instruction says whether it called. Indirect calls and jumps
/// do not enter a thunk: none.
pub fn transfer_of(code: &[u8]) -> Option<Transfer> {
    use iced_x86::FlowControl;
    match crate::straight::decode(code, 0)?.flow_control() {
        FlowControl::Call => Some(Transfer::Call),
        FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => Some(Transfer::Jump),
        _ => None,
    }
}

/// The thunk a place's symbol is in, and the offset there.
fn thunk_at(symbol: Option<&str>) -> Option<(Thunk, u64)> {
    let p = parse_printed(symbol?)?;
    Some((thunk(p.name)?, p.offset))
}

/// Whether a place is where an exception or interrupt is delivered: the first instruction of
/// one of the kernel's IDT entries (`asm_exc_*`, `asm_sysvec_*`, `asm_common_interrupt`, ... from
/// idtentry.h) or of lbr-dump's entry stubs, or any of the vector stubs that lead to them
/// (`irq_entries_start`, `spurious_entries_start`: one per vector inside the symbol). A record
/// from a thunk to one is an exception taken inside the thunk, not the thunk's branch. A record
/// into the middle of an IDT entry is not a delivery: a return through a return thunk to the
/// entry's call of its C handler (`asm_sysvec_apic_timer_interrupt+0x1a`) is a return.
pub fn is_exception_entry(symbol: Option<&str>) -> bool {
    let Some(p) = symbol.and_then(parse_printed) else {
        return false;
    };
    matches!(p.name, "irq_entries_start" | "spurious_entries_start")
        || (p.offset == 0 && (p.name.starts_with("asm_") || p.name.starts_with("lbr_dump_stub_")))
}

/// Longest run of hops inside one thunk that is still read as one branch (call_depth_return_thunk
/// stuffs the return stack buffer with 16 calls).
const MAX_HOPS: usize = 24;

/// The groups of `records` (one snapshot's, newest first), newest first.
pub fn groups(records: &[RecordOut]) -> Vec<Group> {
    let mut groups = Vec::new();
    // Oldest first: `at` is a record that may enter a thunk.
    let mut at = records.len();
    while at > 0 {
        at -= 1;
        if let Some(g) = group_entered_at(records, at) {
            at = g.start;
            groups.push(g);
        }
    }
    groups.reverse();
    groups
}

/// The group whose oldest record is `records[entry]`, if that record enters a thunk and the
/// records after it (newer: lower positions) leave it as described in the module's comment.
fn group_entered_at(records: &[RecordOut], entry: usize) -> Option<Group> {
    let first = &records[entry];
    let (thunk, offset) = thunk_at(first.to.symbol.as_deref())?;
    if !thunk.entry || offset != 0 || in_family(first.from.symbol.as_deref(), &thunk.family) {
        return None;
    }
    let mut prev = first;
    for hop in 1..=MAX_HOPS.min(entry) {
        let r = &records[entry - hop];
        if prev.index.checked_sub(1) != Some(r.index)
            || !in_family(r.from.symbol.as_deref(), &thunk.family)
            || r.branch_type == Some("other")
        {
            return None;
        }
        if !in_family(r.to.symbol.as_deref(), &thunk.family) {
            if is_exception_entry(r.to.symbol.as_deref()) {
                return None;
            }
            let via = match (thunk.via, first.branch_type) {
                (Via::Indirect(None), Some("call")) => Via::Indirect(Some(Transfer::Call)),
                (Via::Indirect(None), Some("jmp" | "jcc")) => Via::Indirect(Some(Transfer::Jump)),
                (via, _) => via,
            };
            let mut group = Group {
                via,
                thunk: thunk.family,
                ret: None,
                start: entry - hop,
                end: entry + 1,
            };
            // An indirect thunk whose return is a jump into a return thunk: the branch goes on
            // through that thunk, when the records leave it as a return thunk's do.
            if matches!(via, Via::Indirect(_)) {
                if let Some(ret) = group_entered_at(records, entry - hop) {
                    if ret.via == Via::Return && ret.ret.is_none() {
                        group.ret = Some(ret.thunk);
                        group.start = ret.start;
                    }
                }
            }
            return Some(group);
        }
        prev = r;
    }
    None
}

/// Whether a place's symbol is in the thunk `family`.
fn in_family(symbol: Option<&str>, family: &str) -> bool {
    thunk_at(symbol).is_some_and(|(t, _)| t.family == family)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::Place;

    /// A record `#index from -> to` (symbols as %pS prints them, or bare addresses).
    fn rec(index: u32, from: &str, to: &str) -> RecordOut {
        let place = |s: &str| Place {
            addr: "0x0".into(),
            symbol: (!s.starts_with("0x")).then(|| s.to_string()),
            ..Place::default()
        };
        RecordOut::branch(index, 0, place(from), place(to))
    }

    /// Records numbered from 0 (newest) in the order given.
    fn snapshot(pairs: &[(&str, &str)]) -> Vec<RecordOut> {
        (0..).zip(pairs).map(|(i, (f, t))| rec(i, f, t)).collect()
    }

    /// The groups as (kind, thunk, first index, last index) of the records they span.
    fn found(records: &[RecordOut]) -> Vec<(&'static str, String, u32, u32)> {
        groups(records)
            .into_iter()
            .map(|g| {
                let idx = |i: usize| records[i].index;
                (g.via.name(), g.thunk, idx(g.end - 1), idx(g.start))
            })
            .collect()
    }

    #[test]
    fn a_retpoline_call_to_a_bad_address_is_one_branch_and_the_fault_stays_apart() {
        // README's demo crash: #3..#1 the call through the retpoline, #0 the fault at its target.
        let r = snapshot(&[
            (
                "0xffff800000001000",
                "lbr_dump_stub_14+0x0/0x200 [lbr_dump]",
            ),
            (
                "__pi___x86_indirect_thunk_r11+0xa/0x20",
                "0xffff800000001000",
            ),
            (
                "__pi___x86_indirect_thunk_r11+0x0/0x20",
                "__pi___x86_indirect_thunk_r11+0x6/0x20",
            ),
            (
                "lbr_crash_jump+0xc/0x20 [lbr_crash]",
                "__pi___x86_indirect_thunk_r11+0x0/0x20",
            ),
            (
                "init_module+0x2ca/0xff0 [lbr_crash]",
                "lbr_crash_jump+0x0/0x20 [lbr_crash]",
            ),
        ]);
        assert_eq!(
            found(&r),
            [("indirect", "__x86_indirect_thunk_r11".into(), 3, 1)]
        );
    }

    #[test]
    fn a_retpoline_that_returns_through_its_return_thunk_is_one_branch() {
        // Debian's GCC-built 7.3 (lbr_crash crash=jump, tests/scenarios/debian.py): the
        // retpoline's `ret` is `jmp its_return_thunk`, whose `ret` lands on the bad address.
        let r = snapshot(&[
            (
                "0xffff800000001000",
                "lbr_dump_stub_14+0x0/0x300 [lbr_dump]",
            ),
            ("its_return_thunk+0x0/0x10", "0xffff800000001000"),
            (
                "__pi___x86_indirect_thunk_rax+0xa/0x20",
                "its_return_thunk+0x0/0x10",
            ),
            (
                "__pi___x86_indirect_thunk_rax+0x0/0x20",
                "__pi___x86_indirect_thunk_rax+0x6/0x20",
            ),
            (
                "lbr_crash_jump+0x10/0x20 [lbr_crash]",
                "__pi___x86_indirect_thunk_rax+0x0/0x20",
            ),
            (
                "its_return_thunk+0x0/0x10",
                "lbr_crash_jump+0x0/0x20 [lbr_crash]",
            ),
            (
                "__pi___x86_indirect_thunk_rax+0xa/0x20",
                "its_return_thunk+0x0/0x10",
            ),
            (
                "__pi___x86_indirect_thunk_rax+0x0/0x20",
                "__pi___x86_indirect_thunk_rax+0x6/0x20",
            ),
            (
                "lbr_crash_init+0x41/0xff0 [lbr_crash]",
                "__pi___x86_indirect_thunk_rax+0x0/0x20",
            ),
        ]);
        assert_eq!(
            found(&r),
            [
                ("indirect", "__x86_indirect_thunk_rax".into(), 4, 1),
                ("indirect", "__x86_indirect_thunk_rax".into(), 8, 5)
            ]
        );
        let rets: Vec<_> = groups(&r).into_iter().map(|g| g.ret).collect();
        assert_eq!(
            rets,
            [
                Some("its_return_thunk".into()),
                Some("its_return_thunk".into())
            ]
        );
        // A retpoline whose return thunk then takes an exception (or whose records stop) is
        // the retpoline's branch alone, into the return thunk.
        let cut = &r[2..];
        assert_eq!(
            found(cut),
            [
                ("indirect", "__x86_indirect_thunk_rax".into(), 4, 2),
                ("indirect", "__x86_indirect_thunk_rax".into(), 8, 5)
            ]
        );
        assert_eq!(groups(cut)[0].ret, None);
    }

    #[test]
    fn returns_through_each_return_thunk() {
        for thunk in [
            "its_return_thunk",
            "__x86_return_thunk",
            "__pi___x86_return_thunk",
            "retbleed_return_thunk",
        ] {
            let r = snapshot(&[
                (&format!("{thunk}+0x0/0x10"), "caller+0x2f/0x80"),
                ("callee+0x19/0x30", &format!("{thunk}+0x0/0x10")),
            ]);
            let name = thunk.strip_prefix("__pi_").unwrap_or(thunk);
            assert_eq!(found(&r), [("return", name.to_string(), 1, 0)], "{thunk}");
        }
    }

    #[test]
    fn a_return_into_an_interrupt_entry_is_a_return() {
        // irqentry_exit() returning to asm_sysvec_apic_timer_interrupt's call of its C handler
        // (a timer tick in a CI crash): a return, not an interrupt delivered inside the thunk,
        // which lands at the entry's first instruction.
        let r = snapshot(&[
            (
                "its_return_thunk+0x0/0x10",
                "asm_sysvec_apic_timer_interrupt+0x1a/0x20",
            ),
            ("irqentry_exit+0x85/0x130", "its_return_thunk+0x0/0x10"),
        ]);
        assert_eq!(
            found(&r),
            [("return", "its_return_thunk".to_string(), 1, 0)]
        );
        assert!(is_exception_entry(Some(
            "asm_sysvec_apic_timer_interrupt+0x0/0x20"
        )));
        assert!(!is_exception_entry(Some(
            "asm_sysvec_apic_timer_interrupt+0x1a/0x20"
        )));
        assert!(is_exception_entry(Some("irq_entries_start+0x28/0x800")));
    }

    #[test]
    fn srso_returns_call_their_safe_ret() {
        for (thunk, safe) in [
            ("srso_return_thunk", "srso_safe_ret"),
            ("srso_alias_return_thunk", "srso_alias_safe_ret"),
        ] {
            let r = snapshot(&[
                (&format!("{safe}+0x4/0x10"), "caller+0x2f/0x80"),
                (&format!("{thunk}+0x0/0x10"), &format!("{safe}+0x0/0x10")),
                ("callee+0x19/0x30", &format!("{thunk}+0x0/0x10")),
            ]);
            assert_eq!(found(&r), [("return", thunk.to_string(), 2, 0)], "{thunk}");
        }
    }

    #[test]
    fn call_depth_return_thunk_with_its_return_stack_stuffing() {
        let mut pairs = vec![(
            "call_depth_return_thunk+0x9e/0xc0".to_string(),
            "caller+0x2f/0x80".to_string(),
        )];
        for k in (0..16).rev() {
            let at = 0x14 + 6 * k;
            pairs.push((
                format!("call_depth_return_thunk+{at:#x}/0xc0"),
                format!("call_depth_return_thunk+{:#x}/0xc0", at + 6),
            ));
        }
        pairs.push((
            "call_depth_return_thunk+0xd/0xc0".into(),
            "call_depth_return_thunk+0x14/0xc0".into(),
        ));
        pairs.push((
            "callee+0x19/0x30".into(),
            "call_depth_return_thunk+0x0/0xc0".into(),
        ));
        let refs: Vec<(&str, &str)> = pairs.iter().map(|(f, t)| (&**f, &**t)).collect();
        let r = snapshot(&refs);
        assert_eq!(
            found(&r),
            [("return", "call_depth_return_thunk".into(), 18, 0)]
        );
    }

    #[test]
    fn indirect_thunks_of_every_kind() {
        // (entered at, left from, kind, family): retpoline after call depth accounting, ITS
        // (also through FineIBT's paranoid entry), the array's first name, lfence variant.
        let cases = [
            (
                "__x86_indirect_call_thunk_rax+0x0/0x20",
                "__x86_indirect_call_thunk_rax+0x14/0x20",
                "indirect-call",
                "__x86_indirect_call_thunk_rax",
            ),
            (
                "__x86_indirect_jump_thunk_r8+0x0/0x20",
                "__x86_indirect_jump_thunk_r8+0xa/0x20",
                "indirect-jump",
                "__x86_indirect_jump_thunk_r8",
            ),
            (
                "__x86_indirect_its_thunk_rdi+0x0/0x40",
                "__x86_indirect_its_thunk_rdi+0x0/0x40",
                "indirect",
                "__x86_indirect_its_thunk_rdi",
            ),
            (
                "__x86_indirect_paranoid_thunk_rdi+0x0/0x2",
                "__x86_indirect_its_thunk_rdi+0x0/0x40",
                "indirect",
                "__x86_indirect_its_thunk_rdi",
            ),
            (
                "__x86_indirect_thunk_array+0x0/0x20",
                "__x86_indirect_thunk_array+0x3/0x20",
                "indirect",
                "__x86_indirect_thunk_rax",
            ),
        ];
        for (enter, leave, kind, family) in cases {
            let r = snapshot(&[(leave, "target+0x0/0x40"), ("caller+0x10/0x80", enter)]);
            assert_eq!(found(&r), [(kind, family.to_string(), 1, 0)], "{enter}");
        }
    }

    #[test]
    fn arch_lbr_branch_types_say_call_or_jump() {
        for (ty, kind) in [
            ("call", "indirect-call"),
            ("jmp", "indirect-jump"),
            ("ind_call", "indirect"),
        ] {
            let mut r = snapshot(&[
                ("__x86_indirect_thunk_r11+0x3/0x20", "target+0x0/0x40"),
                ("caller+0x10/0x80", "__x86_indirect_thunk_r11+0x0/0x20"),
            ]);
            r[1].branch_type = Some(ty);
            r[0].branch_type = Some("ind_jmp");
            assert_eq!(found(&r)[0].0, kind, "{ty}");
        }
    }

    #[test]
    fn what_is_not_a_thunk_hop_is_never_folded() {
        let thunk = "__x86_indirect_thunk_r11";
        let at = |off: u32| format!("{thunk}+{off:#x}/0x20");
        let cases: Vec<(&str, Vec<(String, String)>)> = vec![
            // An exception inside the thunk: it lands in an exception entry.
            (
                "fault inside",
                vec![
                    (at(6), "lbr_dump_stub_14+0x0/0x200 [lbr_dump]".into()),
                    (at(0), at(6)),
                    ("caller+0x10/0x80".into(), at(0)),
                ],
            ),
            (
                "interrupt inside",
                vec![
                    (at(6), "asm_sysvec_apic_timer_interrupt+0x0/0x20".into()),
                    (at(0), at(6)),
                    ("caller+0x10/0x80".into(), at(0)),
                ],
            ),
            // The snapshot ends inside the thunk.
            (
                "never left",
                vec![(at(0), at(6)), ("caller+0x10/0x80".into(), at(0))],
            ),
            // Entered in the middle: not a branch into the thunk.
            (
                "entered at +6",
                vec![
                    (at(0xa), "target+0x0/0x40".into()),
                    ("caller+0x10/0x80".into(), at(6)),
                ],
            ),
            // Left from another place than the thunk.
            (
                "other source",
                vec![
                    ("other+0x3/0x20".into(), "target+0x0/0x40".into()),
                    ("caller+0x10/0x80".into(), at(0)),
                ],
            ),
            // Another register's thunk.
            (
                "other thunk",
                vec![
                    (
                        "__x86_indirect_thunk_rax+0x3/0x20".into(),
                        "target+0x0/0x40".into(),
                    ),
                    ("caller+0x10/0x80".into(), at(0)),
                ],
            ),
            // Not a thunk at all (a name that only looks like one).
            (
                "lookalike",
                vec![
                    (
                        "__x86_indirect_thunk_xyz+0x3/0x20".into(),
                        "t+0x0/0x4".into(),
                    ),
                    (
                        "caller+0x10/0x80".into(),
                        "__x86_indirect_thunk_xyz+0x0/0x20".into(),
                    ),
                ],
            ),
            // Ordinary calls and returns.
            (
                "plain",
                vec![
                    ("callee+0x19/0x30".into(), "caller+0x2f/0x80".into()),
                    ("caller+0x2a/0x80".into(), "callee+0x0/0x30".into()),
                ],
            ),
        ];
        for (what, pairs) in cases {
            let refs: Vec<(&str, &str)> = pairs.iter().map(|(f, t)| (&**f, &**t)).collect();
            assert_eq!(found(&snapshot(&refs)), [], "{what}");
        }
        // A gap in the record numbers (a damaged line dropped a record).
        let mut r = snapshot(&[(&at(0xa), "target+0x0/0x40"), ("caller+0x10/0x80", &at(0))]);
        r[0].index = 5;
        r[1].index = 7;
        assert_eq!(found(&r), [], "gap");
        // Arch LBR: an exception's record has type other.
        let mut r = snapshot(&[(&at(6), "handler+0x0/0x40"), ("caller+0x10/0x80", &at(0))]);
        r[0].branch_type = Some("other");
        assert_eq!(found(&r), [], "type other");
    }

    #[test]
    fn instructions_that_enter_a_thunk() {
        // From objdump -d of the test kernel's lbr_crash.ko and vmlinux.
        assert_eq!(transfer_of(&[0x2e, 0xe9, 0, 0, 0, 0]), Some(Transfer::Jump));
        assert_eq!(transfer_of(&[0x2e, 0xe8, 0, 0, 0, 0]), Some(Transfer::Call));
        assert_eq!(transfer_of(&[0xe8, 0, 0, 0, 0]), Some(Transfer::Call));
        assert_eq!(transfer_of(&[0xeb, 0x10]), Some(Transfer::Jump));
        assert_eq!(transfer_of(&[0x0f, 0x85, 0, 0, 0, 0]), Some(Transfer::Jump));
        assert_eq!(transfer_of(&[0x75, 0x10]), Some(Transfer::Jump));
        // call *%r11, ret, nothing: not a branch to a thunk.
        assert_eq!(transfer_of(&[0x41, 0xff, 0xd3]), None);
        assert_eq!(transfer_of(&[0xc3]), None);
        assert_eq!(transfer_of(&[0x0f, 0x1f]), None);
        assert_eq!(transfer_of(&[]), None);
        assert_eq!(transfer_of(&[0x2e]), None);
    }

    #[test]
    fn consecutive_and_nested_looking_groups() {
        // Two returns in a row, each through its_return_thunk, and an indirect call between.
        let r = snapshot(&[
            ("its_return_thunk+0x0/0x10", "a+0x10/0x40"),
            ("b+0x20/0x30", "its_return_thunk+0x0/0x10"),
            ("its_return_thunk+0x0/0x10", "b+0x8/0x30"),
            ("c+0x9/0x10", "its_return_thunk+0x0/0x10"),
            ("__x86_indirect_thunk_rax+0xa/0x20", "c+0x0/0x10"),
            (
                "__x86_indirect_thunk_rax+0x0/0x20",
                "__x86_indirect_thunk_rax+0x6/0x20",
            ),
            ("b+0x3/0x30", "__x86_indirect_thunk_rax+0x0/0x20"),
        ]);
        assert_eq!(
            found(&r),
            [
                ("return", "its_return_thunk".into(), 1, 0),
                ("return", "its_return_thunk".into(), 3, 2),
                ("indirect", "__x86_indirect_thunk_rax".into(), 6, 4),
            ]
        );
    }
}
