// SPDX-License-Identifier: GPL-2.0

//! A snapshot's branch trace store (BTS) history: what lbr-dump printed of it in a log (its
//! `bts` lines), or the whole buffer the capture kept, read from a memory dump; and the loop
//! folding of the text outputs.
//!
//! With BTS armed, a capture keeps the CPU's BTS buffer (the snapshot area's BTS buffer table
//! names it: virtual and physical address, owner) and swaps a spare one into the debug store
//! (src/layout.rs). The oops prints, after the snapshot's LBR records and its `ler` line:
//!
//! ```text
//! lbr_dump: bts cpu=C seq=S records=N shown=M wrapped=yes|no buffer=0xVIRT size=BYTES state=kept
//! lbr_dump: bts #I 0xFROM -> 0xTO | from=FROM_SYM to=TO_SYM     (M lines, newest first;
//!                                                                  v1: `| FROM_SYM -> TO_SYM`)
//! lbr_dump: bts cpu=C seq=S state=foreign ds_area=0xADDR       (another owner's debug store)
//! lbr_dump: bts cpu=C seq=S state=reused owner=SEQ             (a later capture took the buffer)
//! lbr_dump: bts cpu=C seq=S state=inconsistent base=0x.. index=0x.. buffer=0x..
//! ```
//!
//! A dump holds every record of a kept buffer: [`from_area`] reads them in the order
//! `lbr_core::area::bts_runs` gives, newest first.

use std::borrow::Cow;

use lbr_core::area::{bts_runs, AreaHeader, SnapshotView};
use lbr_core::layout::{BTS_RECORD_SIZE, SNAP_BTS_FOREIGN, SNAP_BTS_KEPT, SNAP_BTS_WRAPPED};
use lbr_core::record::Branch;

use crate::snapshot::{Bts, BtsState, Record};

/// One parsed `bts` line (the part after `lbr_dump: `).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BtsLine<'a> {
    /// The head line: the snapshot it belongs to and what became of its buffer.
    Head {
        /// CPU.
        cpu: u32,
        /// The snapshot's sequence number.
        seq: u64,
        /// The state as printed.
        state: BtsState,
    },
    /// One record line.
    Record {
        /// `#N`: 0 is the newest.
        index: u32,
        /// Source.
        from: u64,
        /// Target.
        to: u64,
        /// `%pS` of `from`, when printed.
        from_sym: Option<&'a str>,
        /// `%pS` of `to`, when printed.
        to_sym: Option<&'a str>,
    },
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(h, 16).ok()
        }
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    }
}

/// An address of a record line: `0x` and hex digits. When `whole` is false (the line ends
/// here, with no symbol part after it) exactly 16 digits, so that a line cut inside the address
/// is not read as a shorter one.
fn addr(s: &str, whole: bool) -> Option<u64> {
    let h = s.strip_prefix("0x")?;
    if h.is_empty() || h.len() > 16 || (!whole && h.len() != 16) {
        return None;
    }
    if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

/// Parses `rest`, a line's text after `lbr_dump: `, if it is a well-formed `bts` line. `None`
/// for any other line, and for a `bts` line that is damaged or cut (the caller tells those
/// apart by the `bts ` start).
pub fn parse_line(rest: &str) -> Option<BtsLine<'_>> {
    let r = rest.trim_end_matches(['\r', '\n']).strip_prefix("bts ")?;
    if let Some(r) = r.strip_prefix('#') {
        let (raw, syms) = match lbr_core::report::split_symbols(r)? {
            (raw, (Some(f), Some(t))) => {
                if f.is_empty() || t.is_empty() {
                    return None;
                }
                (raw, Some((f, t)))
            }
            (raw, _) => (raw, None),
        };
        let mut t = raw.split(' ');
        let index = t.next()?;
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let index: u32 = index.parse().ok()?;
        let whole = syms.is_some();
        let from = addr(t.next()?, whole)?;
        if t.next()? != "->" {
            return None;
        }
        let to = addr(t.next()?, whole)?;
        if t.next().is_some() {
            return None;
        }
        return Some(BtsLine::Record {
            index,
            from,
            to,
            from_sym: syms.map(|s| s.0),
            to_sym: syms.map(|s| s.1),
        });
    }
    let mut t = r.split(' ');
    let cpu = u32::try_from(num(t.next()?.strip_prefix("cpu=")?)?).ok()?;
    let seq = num(t.next()?.strip_prefix("seq=")?)?;
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for tok in t {
        fields.push(tok.split_once('=')?);
    }
    let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let n = |key: &str| get(key).and_then(num);
    let state = match get("state")? {
        "kept" => BtsState::Kept {
            total: n("records")?,
            shown: Some(u32::try_from(n("shown")?).ok()?),
            wrapped: match get("wrapped")? {
                "yes" => true,
                "no" => false,
                _ => return None,
            },
            buffer: n("buffer")?,
            size: n("size")?,
            phys: None,
        },
        "foreign" => BtsState::Foreign {
            ds_area: n("ds_area")?,
        },
        "reused" => BtsState::Reused {
            owner: n("owner")?,
        },
        "inconsistent" => BtsState::Inconsistent {
            reason: format!(
                "bts_buffer_base {:#x} and bts_index {:#x} do not describe the kept buffer {:#x} (as the module printed them)",
                n("base")?,
                n("index")?,
                n("buffer")?
            ),
        },
        _ => return None,
    };
    Some(BtsLine::Head { cpu, seq, state })
}

/// The BTS history of snapshot `s` of `cpu` in area `area` (its header `h`), reading the kept
/// buffer through `read` (physical address, length: the bytes, or why they are not in the
/// dump). `None` when the area has no BTS. An unreadable or inconsistent history is a state
/// with its reason, and a warning (starting with `what`, the snapshot's name); the snapshot's
/// other contents are not affected.
pub fn from_area<'r>(
    h: &AreaHeader,
    area: &[u8],
    cpu: usize,
    s: &SnapshotView,
    read: &dyn Fn(u64, usize) -> Result<Cow<'r, [u8]>, String>,
    what: &str,
    warnings: &mut Vec<String>,
) -> Option<Bts> {
    let hb = h.bts?;
    let b = s.bts?;
    let mut bts = Bts {
        state: BtsState::NotKept,
        records: Vec::new(),
        line: 0,
    };
    let kept = b.state & SNAP_BTS_KEPT != 0;
    let foreign = b.state & SNAP_BTS_FOREIGN != 0;
    let inconsistent = |reason: String, warnings: &mut Vec<String>| {
        warnings.push(format!("{what}: BTS history inconsistent: {reason}"));
        BtsState::Inconsistent { reason }
    };
    bts.state = match (kept, foreign) {
        (false, false) => BtsState::NotKept,
        (false, true) => BtsState::Foreign { ds_area: b.ds_area },
        (true, true) => inconsistent(
            format!("BTS state {:#x} says both kept and foreign", b.state),
            warnings,
        ),
        (true, false) => match h.bts_entry(area, cpu, b.slot as usize) {
            None => inconsistent(
                format!(
                    "kept buffer slot {} is outside the pool of {}",
                    b.slot, hb.pool
                ),
                warnings,
            ),
            Some(e) if e.owner != s.seq => BtsState::Reused { owner: e.owner },
            Some(e) if e.virt != b.base => inconsistent(
                format!(
                    "bts_buffer_base {:#x} as found is not the kept buffer {:#x} (pool slot {})",
                    b.base, e.virt, b.slot
                ),
                warnings,
            ),
            Some(e) => {
                let wrapped = b.state & SNAP_BTS_WRAPPED != 0;
                match bts_runs(hb.buffer_size, b.base, b.index, wrapped) {
                    Err(err) => inconsistent(
                        format!(
                            "{err} (base {:#x}, index {:#x}, {} bytes)",
                            b.base, b.index, hb.buffer_size
                        ),
                        warnings,
                    ),
                    Ok(runs) => match read(e.phys, hb.buffer_size) {
                        Err(err) => {
                            let reason = format!(
                                "the kept buffer (physical {:#x}, {} bytes) is not in the dump: {err}",
                                e.phys, hb.buffer_size
                            );
                            warnings.push(format!("{what}: BTS history not read: {reason}"));
                            BtsState::Unreadable { reason }
                        }
                        Ok(buf) => {
                            bts.records = newest_first(&buf, &runs);
                            BtsState::Kept {
                                total: bts.records.len() as u64,
                                wrapped,
                                buffer: e.virt,
                                size: hb.buffer_size as u64,
                                phys: Some(e.phys),
                                shown: None,
                            }
                        }
                    },
                }
            }
        },
    };
    Some(bts)
}

/// The records of `buf` in byte ranges `runs` (oldest first), newest first, numbered from 0.
fn newest_first(buf: &[u8], runs: &[std::ops::Range<usize>; 2]) -> Vec<Record> {
    let le = |off: usize| u64::from_le_bytes(buf[off..off + 8].try_into().expect("8 bytes"));
    let mut out = Vec::with_capacity((runs[0].len() + runs[1].len()) / BTS_RECORD_SIZE);
    for run in runs.iter().rev() {
        let mut off = run.end;
        while off > run.start {
            off -= BTS_RECORD_SIZE;
            out.push(Record {
                index: out.len() as u32,
                branch: Branch {
                    from: le(off),
                    to: le(off + 8),
                    ..Branch::default()
                },
                from_sym: None,
                to_sym: None,
                line: 0,
            });
        }
    }
    out
}

/// The longest loop period folded.
pub const MAX_PERIOD: usize = 64;
/// The fewest repetitions folded.
pub const MIN_REPEATS: usize = 3;

/// One piece of a folded history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// One item, by position.
    One(usize),
    /// `repeats` consecutive copies of the `period` items from `start`: shown once.
    Loop {
        /// Position of the first copy's first item.
        start: usize,
        /// Items per copy.
        period: usize,
        /// Copies in all (at least [`MIN_REPEATS`]).
        repeats: usize,
    },
}

/// `items` with consecutive repetitions of one sequence (1 to [`MAX_PERIOD`] items, at least
/// [`MIN_REPEATS`] copies) as [`Piece::Loop`]s, in order. At each position the period whose
/// repetitions cover the most items wins (the shortest of equals); items no loop covers are
/// [`Piece::One`]s.
pub fn fold_loops<T: PartialEq>(items: &[T]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let mut best: Option<(usize, usize)> = None;
        for p in 1..=MAX_PERIOD.min((items.len() - i) / MIN_REPEATS) {
            // Items from i that repeat the one p before them, then whole copies.
            let mut same = 0;
            while i + p + same < items.len() && items[i + same] == items[i + p + same] {
                same += 1;
            }
            let repeats = 1 + same / p;
            if repeats >= MIN_REPEATS && best.is_none_or(|(bp, br)| repeats * p > bp * br) {
                best = Some((p, repeats));
            }
        }
        match best {
            Some((period, repeats)) => {
                out.push(Piece::Loop {
                    start: i,
                    period,
                    repeats,
                });
                i += period * repeats;
            }
            None => {
                out.push(Piece::One(i));
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_lines_parse() {
        assert_eq!(
            parse_line("bts cpu=0 seq=3 records=2048 shown=32 wrapped=yes buffer=0xffff888001000000 size=1048576 state=kept"),
            Some(BtsLine::Head {
                cpu: 0,
                seq: 3,
                state: BtsState::Kept {
                    total: 2048,
                    wrapped: true,
                    buffer: 0xffff_8880_0100_0000,
                    size: 1_048_576,
                    phys: None,
                    shown: Some(32)
                }
            })
        );
        assert_eq!(
            parse_line("bts cpu=1 seq=9 state=foreign ds_area=0xfffffe0000001000\r"),
            Some(BtsLine::Head {
                cpu: 1,
                seq: 9,
                state: BtsState::Foreign {
                    ds_area: 0xffff_fe00_0000_1000
                }
            })
        );
        assert_eq!(
            parse_line("bts cpu=1 seq=9 state=reused owner=12"),
            Some(BtsLine::Head {
                cpu: 1,
                seq: 9,
                state: BtsState::Reused { owner: 12 }
            })
        );
        let Some(BtsLine::Head {
            state: BtsState::Inconsistent { reason },
            ..
        }) = parse_line("bts cpu=1 seq=9 state=inconsistent base=0x10 index=0x28 buffer=0x20")
        else {
            panic!("inconsistent")
        };
        assert!(reason.contains("0x10") && reason.contains("0x28") && reason.contains("0x20"));
        // A field of a later lbr-dump is ignored.
        assert!(parse_line("bts cpu=0 seq=3 state=reused owner=4 extra=1").is_some());
        // Cut or damaged: no state, a cut state name, a missing field, a bad value.
        for bad in [
            "bts cpu=0 seq=3 records=2048 shown=32 wrapped=yes buffer=0xffff888001000000 size=1048576",
            "bts cpu=0 seq=3 records=2048 shown=32 wrapped=yes buffer=0xffff888001000000 size=1048576 state=ke",
            "bts cpu=0 seq=3 records=2048 wrapped=yes buffer=0xffff888001000000 size=1048576 state=kept",
            "bts cpu=0 seq=3 records=2048 shown=32 wrapped=maybe buffer=0x1 size=1 state=kept",
            "bts cpu=0 seq=3 state=foreign ds_area=0x",
            "bts cpu=0 seq=3 state=foreign ds_area=",
            "bts cpu=0 seq=",
            "bts cpu=0",
            "bts seq=3 cpu=0 state=reused owner=1",
            "bts cpu=0 seq=3 state=reused owner=1 junk",
        ] {
            assert_eq!(parse_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn record_lines_parse() {
        assert_eq!(
            parse_line("bts #1 0xffffffff834c3f6a -> 0xffffffff8342f4e0 | __pi___x86_indirect_thunk_r11+0xa/0x20 -> lkdtm_EXCEPTION+0x0/0x20"),
            Some(BtsLine::Record {
                index: 1,
                from: 0xffff_ffff_834c_3f6a,
                to: 0xffff_ffff_8342_f4e0,
                from_sym: Some("__pi___x86_indirect_thunk_r11+0xa/0x20"),
                to_sym: Some("lkdtm_EXCEPTION+0x0/0x20"),
            })
        );
        // User-space addresses, printed without leading zeros, are whole before the symbols.
        assert_eq!(
            parse_line("bts #7 0x401000 -> 0x401020 | 0x401000 -> 0x401020"),
            Some(BtsLine::Record {
                index: 7,
                from: 0x40_1000,
                to: 0x40_1020,
                from_sym: Some("0x401000"),
                to_sym: Some("0x401020"),
            })
        );
        // Cut before the symbols: whole 16-digit addresses only.
        assert_eq!(
            parse_line("bts #0 0xffffffff8342f4e9 -> 0xffffffffc040e9f0"),
            Some(BtsLine::Record {
                index: 0,
                from: 0xffff_ffff_8342_f4e9,
                to: 0xffff_ffff_c040_e9f0,
                from_sym: None,
                to_sym: None,
            })
        );
        for bad in [
            "bts #0 0xffffffff8342f4e9 -> 0xffffffffc040",
            "bts #0 0xffffffff8342f4e9 ->",
            "bts #0 0xffffffff8342f4e9",
            "bts #0 0xffffffff8342f4e9 -> 0xffffffffc040e9f0 | lkdtm_EXCEPTION+0x9/0x20",
            "bts #0 0xffffffff8342f4e9 -> 0xffffffffc040e9f0 | lkdtm_EXCEPTION+0x9/0x20 -> ",
            "bts # 0xffffffff8342f4e9 -> 0xffffffffc040e9f0",
            "bts #x 0xffffffff8342f4e9 -> 0xffffffffc040e9f0",
            "bts #0 0xffffffff8342f4e9 => 0xffffffffc040e9f0",
            "bts #0 0xffffffff8342f4e9 -> 0x1ffffffffc040e9f0 | a -> b",
            "bts #0 0xffffffff8342f4e9 -> 0xffffffffc040e9f0 mispred",
        ] {
            assert_eq!(parse_line(bad), None, "{bad}");
        }
        assert_eq!(
            parse_line("#0 0xffffffff8342f4e9 -> 0xffffffffc040e9f0"),
            None
        );
    }

    /// Expected pieces written by hand.
    #[test]
    fn loops_fold() {
        use Piece::*;
        // a b c, then (x y z) 100 times, then d e.
        let mut h: Vec<char> = "abc".chars().collect();
        for _ in 0..100 {
            h.extend("xyz".chars());
        }
        h.extend("de".chars());
        assert_eq!(
            fold_loops(&h),
            [
                One(0),
                One(1),
                One(2),
                Loop {
                    start: 3,
                    period: 3,
                    repeats: 100
                },
                One(303),
                One(304)
            ]
        );
        // Nothing repeats: nothing folded.
        let plain: Vec<u32> = (0..200).collect();
        assert_eq!(fold_loops(&plain), (0..200).map(One).collect::<Vec<_>>());
        // Twice is not a loop; three times is.
        assert_eq!(
            fold_loops(&['a', 'b', 'a', 'b']),
            [One(0), One(1), One(2), One(3)]
        );
        assert_eq!(
            fold_loops(&['a', 'b', 'a', 'b', 'a', 'b', 'a']),
            [
                Loop {
                    start: 0,
                    period: 2,
                    repeats: 3
                },
                One(6)
            ]
        );
        // One item repeated: period 1, not 2.
        assert_eq!(
            fold_loops(&['q'; 9]),
            [Loop {
                start: 0,
                period: 1,
                repeats: 9
            }]
        );
        // Period 64 is folded, 65 is not.
        let body = |n: u32| -> Vec<u32> { (0..3).flat_map(|_| 0..n).collect() };
        assert_eq!(
            fold_loops(&body(64)),
            [Loop {
                start: 0,
                period: 64,
                repeats: 3
            }]
        );
        assert_eq!(fold_loops(&body(65)).len(), 195);
        assert_eq!(fold_loops::<u8>(&[]), []);
    }
}
