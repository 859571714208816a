// SPDX-License-Identifier: GPL-2.0

//! Golden tests: lbr-decode's text (folded and `--raw`), compact, annotate and JSON outputs over
//! the real-crash logs of
//! tests/fixtures/ (crashes of the test VM under the emulator), compared with the files in
//! tests/golden/. Without ELF files the symbols are the kernel's as printed, so the outputs do
//! not depend on a kernel build.
//!
//! When an output changes on purpose, regenerate them all and review the diff:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test -p lbr-decode --test golden
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: &[&str] = &["skylake-lkdtm-exception.log", "skylake-nested-gp-bug.log"];
/// (lbr-decode's arguments, the golden file's extension).
const FORMATS: &[(&[&str], &str)] = &[
    (&["--format", "text"], "txt"),
    (&["--format", "text", "--raw"], "raw.txt"),
    (&["--format", "compact"], "compact"),
    (&["--format", "compact", "--raw"], "raw.compact"),
    (&["--format", "annotate"], "annotated"),
    (&["--format", "json"], "json"),
];

fn dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(sub)
}

/// lbr-decode's standard output for one fixture, run from the fixtures directory so that the
/// source names in the output are the bare file names.
fn decode(fixture: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lbr-decode"))
        .args(args)
        .args(["--color", "never", fixture])
        .current_dir(dir("fixtures"))
        .output()
        .expect("lbr-decode runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{fixture} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn outputs_equal_the_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut differ = Vec::new();
    for fixture in FIXTURES {
        for (args, ext) in FORMATS {
            let got = decode(fixture, args);
            let path = dir("golden").join(format!("{}.{ext}", fixture.trim_end_matches(".log")));
            if update {
                std::fs::write(&path, &got).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 makes it)", path.display()));
            if got != want {
                let line = got.lines().zip(want.lines()).position(|(g, w)| g != w);
                differ.push(format!(
                    "{} differs (first at line {:?})",
                    path.display(),
                    line.map(|l| l + 1)
                ));
            }
        }
    }
    assert!(differ.is_empty(), "{differ:#?}\nif the change is intended: UPDATE_GOLDEN=1 cargo test -p lbr-decode --test golden");
}

#[test]
fn nested_snapshots_keep_their_labels() {
    // The real nested crash: the #UD that oopsed (nest 0), then the #GP it interrupted (nest 1).
    let json: serde_json::Value =
        serde_json::from_str(&decode("skylake-nested-gp-bug.log", &["--format", "json"])).unwrap();
    let snaps = json["snapshots"].as_array().unwrap();
    let got: Vec<_> = snaps
        .iter()
        .map(|s| (s["vector"].as_u64(), s["nest"].as_u64()))
        .collect();
    assert_eq!(got, [(Some(6), Some(0)), (Some(13), Some(1))]);
    assert!(decode("skylake-nested-gp-bug.log", &["--format", "text"])
        .contains("(interrupted by the exception above: nest 1)"));
}
