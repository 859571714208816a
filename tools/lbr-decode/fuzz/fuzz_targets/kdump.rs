// SPDX-License-Identifier: GPL-2.0

//! The kdump-compressed and flattened readers: any bytes as a dump (its format told by its
//! magic, like `lbr-decode FILE`), then every area found in it, every page decompressed. Seeds:
//! one dump per page compression and a flattened one (fuzz/seeds/kdump, written by
//! src/dump/kdump.rs's tests).

#![no_main]

use lbr_decode::snapshot::BtsState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = lbr_decode::dump::Dump::from_vec(data.to_vec(), "fuzz") {
        let mut warnings = Vec::new();
        for a in d.areas(&mut warnings) {
            for s in &a.snapshots {
                assert!(s.records.len() <= 64);
                // A kept BTS history: every record of the buffer, no more.
                if let Some(b) = &s.bts {
                    if let BtsState::Kept { total, size, .. } = b.state {
                        assert_eq!(b.records.len() as u64, total);
                        assert!(total * 24 <= size);
                    } else {
                        assert!(b.records.is_empty());
                    }
                }
            }
        }
    }
});
