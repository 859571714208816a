// SPDX-License-Identifier: GPL-2.0

//! The arming plan: what arming is asked for (the vectors, the rings, the filter, BTS) and the
//! MSR values it writes to switch each recorder on, freeze it and tell its own value from
//! another owner's. Pure code, shared with the host: `tools/lbr-core` tests the values against
//! the manuals; capture/ carries them out.

use crate::facility::{debugctl, msr, select, Filter, Recorder, Switch};
use crate::layout;
use crate::report::{REARM_ONLY, VECTORS as HOOKABLE};

/// A set of hookable vectors, as a bit mask (bit N: vector N).
// INVARIANT: only bits of `HOOKABLE` vectors are set, and at least one captured vector's.
#[derive(Clone, Copy)]
pub struct Vectors(u32);

impl Vectors {
    /// Every hookable vector.
    pub const ALL: u32 = {
        let mut m = 0;
        let mut i = 0;
        while i < HOOKABLE.len() {
            m |= 1 << HOOKABLE[i].0;
            i += 1;
        }
        m
    };

    /// The set `mask` names; `None` if it names a vector that cannot be hooked or no vector
    /// that is captured (#DB alone captures nothing).
    pub fn new(mask: u32) -> Option<Self> {
        (mask & !Self::ALL == 0 && mask & !(1 << REARM_ONLY) != 0).then_some(Vectors(mask))
    }

    /// Every hookable vector, as a set.
    pub fn all() -> Self {
        Vectors(Self::ALL)
    }

    /// The vectors of the set, in order; `out` holds them, the count is returned.
    pub fn list(self, out: &mut [usize; HOOKABLE.len()]) -> usize {
        let mut n = 0;
        for &(v, _) in &HOOKABLE {
            if self.0 & (1 << v) != 0 {
                // PANIC: none, at most HOOKABLE.len() vectors are set.
                out[n] = v as usize;
                n += 1;
            }
        }
        n
    }
}

// The `vectors` parameter's documented default (lbr_dump.rs, README) is this value.
const _: () = assert!(Vectors::ALL == 0x227943);

impl core::fmt::Display for Vectors {
    /// As the `vectors` attribute and the arming message show them: `0(#DE) 6(#UD) ...`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut sep = "";
        for &(v, name) in &HOOKABLE {
            if self.0 & (1 << v) != 0 {
                let what = if v == REARM_ONLY { ", re-arm only" } else { "" };
                write!(f, "{sep}{v}({name}{what})")?;
                sep = " ";
            }
        }
        Ok(())
    }
}

/// What arming is asked for (the module parameters).
#[derive(Clone, Copy)]
pub struct Options {
    /// Which rings' branches are recorded (`all_rings`).
    pub rings: Rings,
    /// Which branches are recorded (`filter`): one the recorder can apply (the load refuses the
    /// others, lbr_dump.rs `prepare`; the options do not change after it).
    pub filter: Filter,
    /// The vectors to hook.
    pub vectors: Vectors,
    /// Freeze the recorder at every kernel-mode NMI's entry until lbr-dump's NMI handler
    /// (`nmi_freeze`; asm/stubs.S lbr_dump_nmi_watch).
    pub nmi_freeze: bool,
    /// The branch trace store beside the LBR (`bts`, `bts_user`, `bts_print`), if asked for.
    pub bts: Option<BtsOptions>,
}

/// What the `bts` parameters ask for (checked at load, lbr_dump.rs `prepare`).
#[derive(Clone, Copy)]
pub struct BtsOptions {
    /// Bytes per buffer: a power of two from 4 KiB to 4 MiB (one page allocation).
    pub size: usize,
    /// Store user-mode branches too (`bts_user`).
    pub user: bool,
    /// Records the oops prints, newest first (`bts_print`).
    pub print: u32,
}

/// BTS buffers per CPU: the one recording and three kept by the newest captures (a WARN, then an
/// oops that panics: its exception and its panic() entry are two captures); a capture reuses the
/// oldest kept one. Fixed-up kernel faults that are captured (an rdmsr_safe() #GP, a nofault
/// read) take one too.
pub const BTS_POOL: usize = 4;

impl BtsOptions {
    /// Records a buffer holds.
    pub fn records(&self) -> usize {
        self.size / layout::BTS_RECORD_SIZE
    }

    /// Bytes per buffer the hardware uses: whole records (the absolute maximum's offset).
    pub fn used(&self) -> usize {
        self.records() * layout::BTS_RECORD_SIZE
    }
}

/// Which rings' branches are recorded (parameter `all_rings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rings {
    /// Branches that end in the kernel only (the default).
    Kernel,
    /// Branches of every ring.
    All,
}

/// ARCH_LBR_CTL: LBREn (bit 0), OS (1), USR (2); the branch types (bits 16..22) are the
/// filter's ([`Filter::arch_type_bits`]).
const ARCH_CTL_LBREN: u64 = 1 << 0;
const ARCH_CTL_OS: u64 = 1 << 1;
const ARCH_CTL_USR: u64 = 1 << 2;

/// How the recorder is switched on: the MSR writes of arming, per flavour.
#[derive(Clone, Copy)]
pub struct ArmValues {
    /// The control MSR and its enable mask.
    pub switch: Switch,
    /// A filter MSR written when arming (LBR_SELECT), with its armed value.
    pub filter: Option<(u32, u64)>,
    /// Arch LBR: ARCH_LBR_CTL's armed value is written whole (not OR-ed into the old one).
    pub whole: Option<u64>,
    /// BTS: the DEBUGCTL bits it sets beside the LBR switch (TR, BTS, and BTS_OFF_USR for
    /// kernel-only); 0 without BTS. The control MSR is DEBUGCTL (legacy LBR only).
    pub bts: u64,
}

impl ArmValues {
    /// The arming writes for a recorder that records the branches of `rings` that `branches`
    /// keeps. The caller checked that the recorder can apply `branches`
    /// ([`Filter::unsupported_by`]).
    pub fn new(recorder: &Recorder, rings: Rings, branches: Filter) -> Self {
        let sw = recorder.switch();
        let kernel_only = rings == Rings::Kernel;
        // LBR_SELECT (Intel legacy, AMD LbrExtV2) suppresses what a set bit names.
        let ring = if kernel_only { select::USER } else { 0 };
        let select = ring | branches.select_bits();
        let (filter, whole) = match recorder {
            // Core 2 and Bonnell have no LBR_SELECT (then branches of every ring are recorded).
            Recorder::IntelLegacy(l) => (l.select.map(|m| (m, select)), None),
            Recorder::AmdLbrV2 { .. } => (Some((msr::AMD_LBR_SELECT, select)), None),
            Recorder::IntelArch(_) => {
                let usr = if kernel_only { 0 } else { ARCH_CTL_USR };
                let types = branches.arch_type_bits();
                (None, Some(ARCH_CTL_LBREN | ARCH_CTL_OS | usr | types))
            }
            Recorder::AmdSingle => (None, None),
        };
        ArmValues {
            switch: sw,
            filter,
            whole,
            bts: 0,
        }
    }

    /// The same with the branch trace store on (the caller checked that the recorder is legacy
    /// LBR, whose switch is DEBUGCTL.LBR): TR and BTS, BTINT clear (circular), and BTS_OFF_USR
    /// unless `user`.
    pub fn with_bts(self, user: bool) -> Self {
        let off = if user { 0 } else { debugctl::BTS_OFF_USR };
        ArmValues {
            bts: debugctl::TR | debugctl::BTS | off,
            ..self
        }
    }

    /// The control value once armed, given the value before.
    pub fn armed(&self, before: u64) -> u64 {
        match self.bts {
            0 => self.whole.unwrap_or(before | self.switch.mask),
            bits => {
                let clear = debugctl::BTINT | debugctl::BTS_OFF_OS | debugctl::BTS_OFF_USR;
                (before & !clear) | self.switch.mask | bits
            }
        }
    }

    /// The bits a capture clears to freeze: the LBR switch, and TR and BTS with BTS.
    pub fn freeze_mask(&self) -> u64 {
        self.switch.mask | (self.bts & (debugctl::TR | debugctl::BTS))
    }

    /// Whether arming filters by ring (LBR_SELECT, or ARCH_LBR_CTL's OS/USR bits); the AMD
    /// single record and models without LBR_SELECT record every ring.
    pub fn filters_rings(&self) -> bool {
        self.filter.is_some() || self.whole.is_some()
    }
}
