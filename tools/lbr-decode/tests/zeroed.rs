// SPDX-License-Identifier: GPL-2.0

//! A snapshot whose records were taken away (`state=zeroed`: recording was on, every record read
//! 0, as in a KVM guest whose host took the LBR back; Documentation/lbr-dump/design.rst "KVM guests") reads back from a log
//! with its state and no records, in JSON and text, beside an ordinary snapshot.

use std::process::Command;

/// A log written by hand in the module's format (src/report.rs): a zeroed #PF snapshot, then a
/// complete one with one record.
const LOG: &str = "\
[    5.000000] lbr_dump: v1 cpu=0 seq=4 vector=14 (#PF) error=0x2 rip=0xffffffff81234567 cr2=0x0 flavour=intel-lbr format=5 records=0 state=zeroed nest=0
[    5.000001] lbr_dump: end cpu=0 seq=4
[    6.000000] lbr_dump: v1 cpu=1 seq=5 vector=6 (#UD) error=0x0 rip=0xffffffff81000010 cr2=0x0 flavour=intel-lbr format=5 records=1 state=complete nest=0
[    6.000001] lbr_dump: #0 0xffffffff81000010 -> 0xffffffffc0001000 cycles=3 | do_bug+0x10/0x20 -> lbr_dump_stub_6+0x0/0x200 [lbr_dump]
[    6.000002] lbr_dump: end cpu=1 seq=5
";

fn decode(args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!("lbr-decode-zeroed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("zeroed.log");
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
fn zeroed_snapshot_reads_back_with_its_state() {
    let doc: serde_json::Value = serde_json::from_str(&decode(&["--format", "json"])).unwrap();
    let snaps = doc["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2);
    assert_eq!(snaps[0]["state"], "zeroed");
    assert_eq!(snaps[0]["records"].as_array().unwrap().len(), 0);
    assert_eq!(snaps[0]["complete"], true);
    assert_eq!(snaps[1]["state"], "complete");
    assert_eq!(snaps[1]["records"].as_array().unwrap().len(), 1);
    let text = decode(&["--format", "text"]);
    assert!(
        text.contains("[intel-lbr format 5, 0 records, zeroed]"),
        "{text}"
    );
    assert!(
        text.contains("[intel-lbr format 5, 1 records, complete]"),
        "{text}"
    );
}
