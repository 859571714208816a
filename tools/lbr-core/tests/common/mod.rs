// SPDX-License-Identifier: GPL-2.0

//! CPUs as tables of CPUID leaves, for the identification tests (facility.rs, kvm.rs).

#![allow(dead_code)] // each test crate uses part of it

use lbr_core::facility::{ArchLbr, Cpuid, CpuidRegs};
use std::collections::HashMap;

/// A CPU as a table of CPUID leaves; absent leaves read as zero, like a real CPU past its maximum.
pub struct Table(pub HashMap<(u32, u32), CpuidRegs>);

impl Cpuid for Table {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidRegs {
        self.0.get(&(leaf, subleaf)).copied().unwrap_or_default()
    }
}

pub const INTEL: (u32, u32, u32) = (0x756e_6547, 0x4965_6e69, 0x6c65_746e); // "Genu" "ineI" "ntel"
pub const AMD: (u32, u32, u32) = (0x6874_7541, 0x6974_6e65, 0x444d_4163); // "Auth" "enti" "cAMD"

pub fn regs(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuidRegs {
    CpuidRegs { eax, ebx, ecx, edx }
}

/// A CPU of `vendor` (EBX, EDX, ECX of leaf 0) whose maximum basic leaf is `max`, with `leaves`.
pub fn cpu(vendor: (u32, u32, u32), max: u32, leaves: &[((u32, u32), CpuidRegs)]) -> Table {
    let mut t = HashMap::new();
    t.insert((0, 0), regs(max, vendor.0, vendor.2, vendor.1));
    for (k, v) in leaves {
        t.insert(*k, *v);
    }
    Table(t)
}

/// Arch LBR with every capability and the depths of `depths` (CPUID 0x1C EAX[7:0]).
pub fn arch_lbr(depths: u8) -> ArchLbr {
    ArchLbr {
        depths,
        cpl_filter: true,
        branch_filter: true,
        call_stack: true,
        mispredict: true,
        timed: true,
        branch_type: true,
    }
}
