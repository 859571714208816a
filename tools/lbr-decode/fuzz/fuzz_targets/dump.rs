// SPDX-License-Identifier: GPL-2.0

//! The dump scanner: any bytes as a memory dump (ELF seeds; the kdump target has the
//! kdump-compressed ones), then every area found in it.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = lbr_decode::dump::Dump::from_vec(data.to_vec(), "fuzz") {
        let mut warnings = Vec::new();
        for a in d.areas(&mut warnings) {
            for s in &a.snapshots {
                assert!(s.records.len() <= 64);
            }
        }
    }
});
