// SPDX-License-Identifier: GPL-2.0

//! A panic printed with lbr-dump's default bounds (`print_records`, no `print_all`): the
//! panicking CPU's snapshot with its newest records, a `kept:` line for the rest of them, a
//! `kept:` line for another CPU's snapshot and the line that says where they are. lbr-decode
//! decodes the snapshot and lists every `kept:` line after it, with where it is, in text and
//! compact, and as `kept` in JSON: nothing lbr-dump did not print goes unmentioned.

use std::process::Command;

/// Lines in the module's format (src/printer.rs print_snapshot, print_kept, print_kept_total),
/// as a 2-CPU sysrq-c with `print_records=1` prints them.
const LOG: &str = "\
[    9.000000] Kernel panic - not syncing: sysrq triggered crash
[    9.000100] lbr_dump: v2 cpu=0 seq=3 vector=256 (panic) error=0x0 rip=0xffffffff81000020 cr2=0x0 flavour=intel-lbr format=5 records=1 state=complete nest=0
[    9.000101] lbr_dump: #0 0xffffffff81000010 -> 0xffffffffc0001000 cycles=3 | from=panic+0x10/0x20 to=lbr_dump_panic_entry+0x0/0x200 [lbr_dump]
[    9.000102] lbr_dump: end cpu=0 seq=3
[    9.000103] lbr_dump: v2 cpu=0 kept: seq=3 records #1-#31 are not printed, only kept in memory (a kdump vmcore holds them: lbr-decode; print_records=0 prints them)
[    9.000104] lbr_dump: v2 cpu=1 kept: seq=2 vector=248 (REBOOT_VECTOR) rip=0xffffffff81000100 records=32 state=complete | at=default_idle+0x10/0x20
[    9.000105] lbr_dump: v2 cpu=0 kept: the snapshot of the 1 other CPU above is not printed, only kept in memory (a kdump vmcore holds it: lbr-decode; print_all=1 prints it)
";

fn decode(args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!("lbr-decode-kept-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("panic.log");
    std::fs::write(&log, LOG).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lbr-decode"))
        .args(args)
        .args(["--color", "never"])
        .arg(&log)
        .output()
        .expect("lbr-decode runs");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn kept_lines_are_listed_after_the_snapshots() {
    let doc: serde_json::Value = serde_json::from_str(&decode(&["--format", "json"])).unwrap();
    assert_eq!(doc["snapshots"].as_array().unwrap().len(), 1);
    let kept = doc["kept"].as_array().unwrap();
    let got: Vec<(u64, u64, &str)> = kept
        .iter()
        .map(|k| {
            (
                k["line"].as_u64().unwrap(),
                k["cpu"].as_u64().unwrap(),
                k["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!((got[0].0, got[0].1), (5, 0));
    assert!(got[0].2.starts_with("seq=3 records #1-#31 are not printed"));
    assert_eq!((got[1].0, got[1].1), (6, 1));
    assert!(got[1]
        .2
        .starts_with("seq=2 vector=248 (REBOOT_VECTOR) rip=0xffffffff81000100 records=32"));
    assert_eq!((got[2].0, got[2].1), (7, 0));
    assert!(kept[0]["source"].as_str().unwrap().ends_with("panic.log"));
    for format in ["text", "compact"] {
        let text = decode(&["--format", format]);
        let at = text
            .find("not in the log, kept in lbr-dump's area in memory:")
            .unwrap_or_else(|| panic!("{format}: no kept list:\n{text}"));
        let list = &text[at..];
        assert!(
            list.contains("panic.log:5: cpu 0: seq=3 records #1-#31 are not printed")
                && list.contains("panic.log:6: cpu 1: seq=2 vector=248 (REBOOT_VECTOR)")
                && list.contains("panic.log:7: cpu 0: the snapshot of the 1 other CPU above"),
            "{format}:\n{text}"
        );
        // After the snapshot, not instead of it.
        assert!(
            text[..at].contains("lbr_dump_panic_entry"),
            "{format}:\n{text}"
        );
    }
}
