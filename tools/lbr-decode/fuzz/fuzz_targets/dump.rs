// SPDX-License-Identifier: GPL-2.0

//! The dump scanner: any bytes as a memory dump (ELF seeds, one with a BTS area and its buffers;
//! the kdump target has the kdump-compressed ones), then every area found in it, with each
//! snapshot's BTS history.

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
