// SPDX-License-Identifier: GPL-2.0

//! The branch trace store history in lbr-decode's outputs: from a log (the module's `bts`
//! lines, written here by hand in its format) and from an ELF dump (the fixture area with
//! BTS, src/fixture.rs); loops folded in text and compact, every record in JSON.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const HEAD: &str = "lbr_dump: v1 cpu=0 seq=3 vector=14 (#PF) error=0x2 rip=0xffffffff81000010 cr2=0x0 flavour=intel-lbr format=5 records=1 state=complete nest=0";
const R0: &str = "lbr_dump: #0 0xffffffff81000010 -> 0xffffffffc0001000 cycles=3 | do_bug+0x10/0x20 -> lbr_dump_stub_14+0x0/0x200 [lbr_dump]";
const END: &str = "lbr_dump: end cpu=0 seq=3";

/// A BTS record line: `#index`, from 0xffffffff8100_nnn0 to 0xffffffff8200_nnn0, where nnn is
/// `n` in three hex digits.
fn bts(index: usize, n: u32) -> String {
    format!(
        "lbr_dump: bts #{index} 0xffffffff8100{n:03x}0 -> 0xffffffff8200{n:03x}0 | f{n}+0x0/0x10 -> g{n}+0x0/0x10"
    )
}

/// A log whose snapshot's BTS history is `history` (newest first: each the `n` of [`bts`]),
/// the buffer holding `total` records.
fn log(history: &[u32], total: usize) -> String {
    let mut lines = vec![
        HEAD.to_string(),
        R0.to_string(),
        format!(
            "lbr_dump: bts cpu=0 seq=3 records={total} shown={} wrapped=yes buffer=0xffff888001000000 size=1048576 state=kept",
            history.len()
        ),
    ];
    lines.extend(history.iter().enumerate().map(|(i, &n)| bts(i, n)));
    lines.push(END.to_string());
    lines.join("\n") + "\n"
}

/// Newest first: 1, 2, then (10 11 12) 100 times, then 3, 4: a loop of period 3 between
/// other records (304 records).
fn looping() -> Vec<u32> {
    let mut h = vec![1, 2];
    for _ in 0..100 {
        h.extend([10, 11, 12]);
    }
    h.extend([3, 4]);
    h
}

struct Temp(PathBuf);

impl Temp {
    fn new(name: &str, bytes: &[u8]) -> Temp {
        let dir = std::env::temp_dir().join(format!("lbr-decode-bts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        Temp(path)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn decode(input: &Temp, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lbr-decode"))
        .args(args)
        .args(["--color", "never"])
        .arg(&input.0)
        .output()
        .expect("lbr-decode runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No warning but the one of any run without ELF files.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with("lbr-decode: warning: no --vmlinux:")),
        "{stderr}"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The BTS rows and fold lines of a text or compact output, in order: `bts #N` (compact's
/// `[bts #0N]` too), or a loop's count line as it is.
fn bts_rows(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim_start)
        .filter_map(|l| {
            if l.starts_with("...") {
                return Some(l.to_string());
            }
            let rest = l.strip_prefix("bts #").or(l.strip_prefix("[bts #"))?;
            let n: u32 = rest.split([' ', ']']).next()?.parse().ok()?;
            Some(format!("bts #{n}"))
        })
        .collect()
}

#[test]
fn a_loop_is_folded_in_text_and_compact() {
    let input = Temp::new("loop.log", log(&looping(), 5000).as_bytes());
    let text = decode(&input, &["--format", "text"]);
    let fold = "... the 3 records above repeated 100 times in all (bts #2-#301)";
    assert_eq!(
        bts_rows(&text),
        ["bts #0", "bts #1", "bts #2", "bts #3", "bts #4", fold, "bts #302", "bts #303"],
        "{text}"
    );
    assert!(
        text.contains("bts: branch trace store, 5000 records (the buffer wrapped), buffer 0xffff888001000000, 1048576 bytes; the log shows the newest 304 (a memory dump holds all 5000)"),
        "{text}"
    );
    // The copy shown is the loop's newest: f10 -> g10, f11, f12.
    let copy: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("bts #2 ") || l.trim_start().starts_with("bts #4 "))
        .collect();
    assert!(
        copy[0].contains("f10+0x0/0x10") && copy[1].contains("f12+0x0/0x10"),
        "{copy:?}"
    );
    // Oldest first in compact: the loop's oldest copy, then the count.
    let compact = decode(&input, &["--format", "compact"]);
    assert_eq!(
        bts_rows(&compact),
        ["bts #303", "bts #302", "bts #301", "bts #300", "bts #299", fold, "bts #1", "bts #0"],
        "{compact}"
    );
    // --raw: every record.
    let raw = decode(&input, &["--format", "text", "--raw"]);
    let rows = bts_rows(&raw);
    assert_eq!(rows.len(), 304);
    assert!(rows
        .iter()
        .enumerate()
        .all(|(i, r)| *r == format!("bts #{i}")));
}

#[test]
fn json_keeps_every_record() {
    let input = Temp::new("json.log", log(&looping(), 5000).as_bytes());
    let v: Value = serde_json::from_str(&decode(&input, &["--format", "json"])).unwrap();
    assert_eq!(v["minor_version"], 10);
    let b = &v["snapshots"][0]["bts"];
    assert_eq!(b["state"], "kept");
    assert_eq!(b["wrapped"], true);
    assert_eq!(b["total"], 5000);
    assert_eq!(b["shown"], 304);
    assert_eq!(b["buffer"], "0xffff888001000000");
    assert_eq!(b["size"], 1048576);
    assert!(b.get("phys").is_none(), "a log does not say");
    let recs = b["records"].as_array().unwrap();
    assert_eq!(recs.len(), 304);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["index"], i);
    }
    assert_eq!(recs[5]["from"]["addr"], "0xffffffff810000a0");
    assert_eq!(recs[5]["from"]["symbol"], "f10+0x0/0x10");
    assert_eq!(recs[301]["to"]["addr"], "0xffffffff820000c0");
    assert_eq!(recs[303]["from"]["addr"], "0xffffffff81000040");
    // The LBR record is the snapshot's records, as before.
    assert_eq!(v["snapshots"][0]["records"].as_array().unwrap().len(), 1);
}

#[test]
fn a_history_without_repetition_is_not_folded() {
    let history: Vec<u32> = (0..100).collect();
    let input = Temp::new("plain.log", log(&history, 100).as_bytes());
    let text = decode(&input, &["--format", "text"]);
    let rows = bts_rows(&text);
    assert_eq!(rows.len(), 100, "{text}");
    assert!(rows.iter().all(|r| !r.starts_with("...")));
    assert!(
        text.contains("bts: branch trace store, 100 records (the buffer wrapped), buffer 0xffff888001000000, 1048576 bytes\n"),
        "{text}"
    );
}

/// The dump fixture: every record of each kept buffer, the reused and foreign snapshots said
/// so, in text and JSON.
#[test]
fn dump_histories_in_text_and_json() {
    let (area, buffers) = lbr_decode::fixture::bts_area();
    let mut segments: Vec<(u64, &[u8])> = vec![(0x10_0000, &area)];
    segments.extend(buffers.iter().map(|(p, b)| (*p, b.as_slice())));
    let input = Temp::new("bts.elf", &lbr_decode::fixture::core(62, &segments));
    let text = decode(&input, &["--format", "text"]);
    for want in [
        "  bts: branch trace store, 4 records, buffer 0xffff888002000000 (physical 0x40000), 240 bytes\n",
        "  bts: branch trace store, 10 records (the buffer wrapped), buffer 0xffff888002001000 (physical 0x41000), 240 bytes\n",
        "  bts: history lost: the buffer was reused by a later capture (seq 7)\n",
        "  bts: no history kept: another owner's debug store was in place (IA32_DS_AREA 0xfffffe0000004000)\n",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
    // Newest first: seq 2's ten records, the index at record 3 of the wrapped buffer.
    let seq2 = text.split("seq 2").nth(1).unwrap();
    let rows: Vec<&str> = seq2
        .lines()
        .filter(|l| l.trim_start().starts_with("bts #"))
        .take(10)
        .collect();
    let from: Vec<&str> = rows
        .iter()
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(
        from,
        [
            "0xffffffff81010020",
            "0xffffffff81010010",
            "0xffffffff81010000",
            "0xffffffff81010090",
            "0xffffffff81010080",
            "0xffffffff81010070",
            "0xffffffff81010060",
            "0xffffffff81010050",
            "0xffffffff81010040",
            "0xffffffff81010030"
        ]
    );
    let v: Value = serde_json::from_str(&decode(&input, &["--format", "json"])).unwrap();
    let s = v["snapshots"].as_array().unwrap();
    assert_eq!(s[1]["bts"]["state"], "kept");
    assert_eq!(s[1]["bts"]["phys"], "0x41000");
    assert_eq!(s[1]["bts"]["total"], 10);
    assert!(
        s[1]["bts"].get("shown").is_none(),
        "a dump shows every record"
    );
    assert_eq!(
        s[1]["bts"]["records"][3]["from"]["addr"],
        "0xffffffff81010090"
    );
    assert_eq!(s[2]["bts"]["state"], "reused");
    assert_eq!(s[2]["bts"]["owner"], 7);
    assert_eq!(s[3]["bts"]["state"], "foreign");
    assert_eq!(s[3]["bts"]["ds_area"], "0xfffffe0000004000");
}
