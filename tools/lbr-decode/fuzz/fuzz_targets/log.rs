// SPDX-License-Identifier: GPL-2.0

//! The log scanner and the line parser: any bytes, decoded as the command decodes them.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = lbr_decode::log::parse_log(&text);
    let lines = text.split('\n').count();
    for s in &parsed.snapshots {
        assert!(s.records.len() <= 4096, "more records than lines");
        let bts = s.bts.as_ref().map_or(0, |b| b.records.len());
        assert!(s.records.len() + bts < lines, "more records than lines");
    }
});
