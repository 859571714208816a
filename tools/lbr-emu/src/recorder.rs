// SPDX-License-Identifier: GPL-2.0

//! One vCPU's branch recorder: its MSRs, what a taken branch does to them, and how each flavour
//! and format encodes a record. Written from the Intel SDM vol. 3B ch. 18 ("Last Branch, Call
//! Stack, Interrupt, and Exception Recording") and the AMD APM vol. 2 sec. 13.1 ("Software
//! Debug") / the LbrExtV2 description, independently of lbr-dump's own decoder.
//!
//! Choices where the manuals leave room (documented in the README too):
//! - The ring of a branch is the ring it ends in (LBR_SELECT "CPL_EQ_0 / CPL_NEQ_0: do not
//!   capture branches ending in ring 0 / ring > 0"); the same rule is used for Arch LBR's OS/USR
//!   and AMD's LBR_SELECT. Ring is taken from the address: the upper canonical half is ring 0
//!   (true of Linux guests, which is what this emulator is for).
//! - Mispredicted: indirect jumps, indirect calls and returns are reported mispredicted, direct
//!   branches predicted, so that both values of the flag appear in every run.
//! - Cycles: the number of instructions in the translation blocks entered since the previous
//!   recorded branch, saturated at 0xffff (formats 5-7 and Arch LBR), as an elapsed-time stand-in.
//! - TSX is not emulated: IN_TX and ABORT are always 0. Call-stack mode (LBR_SELECT[9], Arch
//!   CTL[3]) is stored but not emulated: records are kept as a plain ring.
//! - A plugin cannot make an instruction fault: accesses to MSRs that would #GP on the real part
//!   (an Arch LBR entry past the depth, an unsupported depth) read 0 / are ignored and are
//!   logged as "would-fault".
//!
//! Intel's Branch Trace Store shares DEBUGCTL with legacy LBR; its MSR (IA32_DS_AREA), switch
//! (DEBUGCTL.TR and .BTS), ring filter and per-period figures are here, the record writing in
//! [`crate::bts`].

use crate::bts::{self, Fields, Issue, Outcome, MSR_DS_AREA};
use crate::classify::{Branch, Kind};
use crate::model::*;

/// Raw MSR values of one record slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub from: u64,
    pub to: u64,
    pub info: u64,
}

/// Legacy LBR_SELECT (and AMD LBR_SELECT) suppress bit for a kind: 2 JCC, 3 NEAR_REL_CALL,
/// 4 NEAR_IND_CALL, 5 NEAR_RET, 6 NEAR_IND_JMP, 7 NEAR_REL_JMP, 8 FAR_BRANCH.
fn select_bit(kind: Kind) -> u32 {
    match kind {
        Kind::Jcc => 2,
        Kind::CallRel => 3,
        Kind::CallInd => 4,
        Kind::Ret => 5,
        Kind::JmpInd => 6,
        Kind::JmpRel => 7,
        Kind::Far => 8,
    }
}

/// Arch LBR CTL enable bit for a kind: 16 JCC, 17 NEAR_REL_JMP, 18 NEAR_IND_JMP,
/// 19 NEAR_REL_CALL, 20 NEAR_IND_CALL, 21 NEAR_RET, 22 OTHER_BRANCH.
fn arch_enable_bit(kind: Kind) -> u32 {
    match kind {
        Kind::Jcc => 16,
        Kind::JmpRel => 17,
        Kind::JmpInd => 18,
        Kind::CallRel => 19,
        Kind::CallInd => 20,
        Kind::Ret => 21,
        Kind::Far => 22,
    }
}

/// Arch LBR INFO.BR_TYPE: 0 COND, 1 NEAR_IND_JMP, 2 NEAR_REL_JMP, 3 NEAR_IND_CALL,
/// 4 NEAR_REL_CALL, 5 NEAR_RET, 1xxx OTHER_BRANCH.
pub fn arch_br_type(kind: Kind) -> u64 {
    match kind {
        Kind::Jcc => 0,
        Kind::JmpInd => 1,
        Kind::JmpRel => 2,
        Kind::CallInd => 3,
        Kind::CallRel => 4,
        Kind::Ret => 5,
        Kind::Far => 8,
    }
}

const fn low_bits(n: u32) -> u64 {
    (1u64 << n) - 1
}

/// Encodes a record in legacy format `format` (IA32_PERF_CAPABILITIES[5:0]).
pub fn encode_legacy(format: u8, b: &Branch) -> Slot {
    let m = b.mispredicted() as u64;
    match format {
        // LBR_FORMAT_32: one MSR, FROM in [31:0] and TO in [63:32].
        0 => Slot {
            from: (b.from & 0xffff_ffff) | (b.to << 32),
            to: 0,
            info: 0,
        },
        // LIP / EIP: 64-bit addresses, no flags.
        1 | 2 => Slot {
            from: b.from,
            to: b.to,
            info: 0,
        },
        // EIP_FLAGS: FROM[63] mispredict, address in [62:0].
        3 => Slot {
            from: (b.from & low_bits(63)) | m << 63,
            to: b.to,
            info: 0,
        },
        // EIP_FLAGS2: FROM[63] mispredict, [62] IN_TX, [61] ABORT, address in [60:0]. No
        // emulated CPU has TSX (TCG implements none; CPUID.7 HLE/RTM read 0), so IN_TX and ABORT
        // are 0. On TSX-less parts "for HW updates (branch captures) bits 61:62 are always OFF
        // and are not part of the sign extension" (the kernel's lbr.c, above
        // lbr_from_signext_quirk_needed(); only values software wrote with WRMSR have them as
        // sign extension): a reader must take the address from bits 60:0.
        4 => Slot {
            from: (b.from & low_bits(61)) | m << 63,
            to: b.to,
            info: 0,
        },
        // INFO / INFO2: addresses whole; LBR_INFO[63] mispredict, [62] IN_TX, [61] ABORT
        // (INFO2: no TSX bits), [15:0] cycles.
        5 | 7 => Slot {
            from: b.from,
            to: b.to,
            info: m << 63 | b.cycles16(),
        },
        // TIME: FROM as EIP_FLAGS; TO[63:48] cycles, address in [47:0].
        6 => Slot {
            from: (b.from & low_bits(63)) | m << 63,
            to: (b.to & low_bits(48)) | b.cycles16() << 48,
            info: m << 63 | b.cycles16(),
        },
        _ => unreachable!("format checked at configuration"),
    }
}

/// Encodes an Arch LBR record: FROM/TO whole; INFO[63] mispredict, [60] CYC_CNT_VALID,
/// [59:56] BR_TYPE, [15:0] CYC_CNT. Without timed LBRs (CPUID.(0x1C,0):ECX[1] clear)
/// CYC_CNT_VALID is clear and CYC_CNT reads 0.
pub fn encode_arch(b: &Branch, timed: bool) -> Slot {
    let cycles = if timed { 1 << 60 | b.cycles16() } else { 0 };
    Slot {
        from: b.from,
        to: b.to,
        info: (b.mispredicted() as u64) << 63 | arch_br_type(b.kind) << 56 | cycles,
    }
}

/// Encodes an AMD LbrExtV2 record: FROM[63] mispredict with the address sign-extended in
/// [62:0]; TO[63] valid, [62] speculative (0: retired), address in [60:0] (bit 61 stays clear: the
/// kernel discards entries with it set, erratum 1452).
pub fn encode_amd_v2(b: &Branch) -> Slot {
    Slot {
        from: (b.from & low_bits(63)) | (b.mispredicted() as u64) << 63,
        to: (b.to & low_bits(61)) | 1 << 63,
        info: 0,
    }
}

/// An LbrExtV2 entry of erratum 1452 (`erratum1452=N`): valid, with TO[61] set, which marks it
/// as an erroneous branch that software discards. Its addresses are the next branch's own with
/// the low bits scrambled, so that a reader that kept it would print a record the ground truth's
/// branches do not have.
pub fn encode_amd_v2_erratum(b: &Branch) -> Slot {
    let bogus = Branch {
        from: b.from ^ 0x5a5,
        to: b.to ^ 0xa5a,
        ..*b
    };
    let mut s = encode_amd_v2(&bogus);
    s.to |= 1 << 61;
    s
}

/// Branches seen and recorded since recording was last switched on (for the ground truth: a
/// filter test needs to know that branches it must drop did happen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub seen: u64,
    pub seen_user: u64,
    pub recorded: u64,
    pub recorded_user: u64,
    /// Seen and recorded by kind, indexed by [`Kind::code`] (0 unused): what a branch-type filter
    /// test needs without a trace of every branch.
    pub seen_kind: [u64; 8],
    pub recorded_kind: [u64; 8],
}

/// What a WRMSR did to the recording switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    pub was_on: bool,
    pub now_on: bool,
}

/// Which way an MSR access goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsrOp {
    /// `rdmsr`.
    Read,
    /// `wrmsr`.
    Write,
}

/// Outcome of an MSR access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Not an MSR this recorder emulates: let QEMU handle it.
    NotOurs,
    /// Read value, or write done; `Switch` tells recording state changes.
    Done(u64, Switch),
    /// The real part would raise #GP; the emulator cannot, so it reads 0 / ignores the write.
    WouldFault,
}

/// One vCPU's recorder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorder {
    pub model: Model,
    debugctl: u64,
    lbr_select: u64,
    tos: usize,
    slots: Vec<Slot>,
    ler: (u64, u64),
    arch_ctl: u64,
    arch_depth: usize,
    amd_cfg: u64,
    amd_select: u64,
    /// AMD single record (LastBranchFromIP/ToIP).
    last: (u64, u64),
    /// The newest branch recorded (for LER / LastException).
    newest: Option<Branch>,
    pub counts: Counts,
    /// IA32_DS_AREA (models with BTS).
    ds_area: u64,
    /// The linear-address width (CPUID.80000008H:EAX[15:8], as the guest last read it; 48
    /// until then): WRMSR of a non-canonical IA32_DS_AREA is a #GP.
    linear_bits: u32,
    /// BTS figures since TR and BTS were last switched on.
    pub bts: bts::Stats,
    /// The last BTS issue reported (its kind, the DS area, base and maximum): the same issue in
    /// the same configuration is reported once, not at every branch.
    bts_issue: Option<(Issue, u64, u64, u64)>,
    /// `bts_recent=N`: the newest records stored, across periods (off unless set).
    pub recent: bts::Recent,
}

/// A BTS store as the plugin logs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtsStore {
    pub outcome: Outcome,
    /// The outcome's issue, if it is not the one reported last (see `Recorder::bts_issue`).
    pub report: Option<Issue>,
}

impl Recorder {
    pub fn new(model: Model) -> Recorder {
        let depth = match model.flavour {
            Flavour::Legacy { depth, .. }
            | Flavour::Arch { depth, .. }
            | Flavour::AmdV2 { depth, .. } => depth,
            Flavour::AmdSingle => 0,
        };
        Recorder {
            model,
            debugctl: 0,
            lbr_select: 0,
            tos: 0,
            slots: vec![Slot::default(); depth],
            ler: (0, 0),
            arch_ctl: 0,
            arch_depth: depth,
            amd_cfg: 0,
            amd_select: 0,
            last: (0, 0),
            newest: None,
            counts: Counts::default(),
            ds_area: 0,
            linear_bits: 48,
            bts: bts::Stats::default(),
            bts_issue: None,
            recent: bts::Recent::default(),
        }
    }

    /// Are branch trace messages stored (DEBUGCTL.TR and .BTS set, on a model with BTS)? The ring
    /// filter (BTS_OFF_OS/USR) applies per branch ([`Self::bts_record`]).
    pub fn bts_on(&self) -> bool {
        self.model.has_bts() && self.debugctl & (bts::TR | bts::BTS) == bts::TR | bts::BTS
    }

    /// IA32_DS_AREA.
    pub fn ds_area(&self) -> u64 {
        self.ds_area
    }

    /// DEBUGCTL.BTINT.
    pub fn btint(&self) -> bool {
        self.debugctl & bts::BTINT != 0
    }

    /// The guest read CPUID.80000008H:EAX: the linear-address width is bits 15:8.
    pub fn set_linear_bits(&mut self, eax: u32) {
        let n = (eax >> 8) & 0xff;
        if (32..=64).contains(&n) {
            self.linear_bits = n;
        }
    }

    fn canonical(&self, v: u64) -> bool {
        let sh = 64 - self.linear_bits;
        (((v << sh) as i64) >> sh) as u64 == v
    }

    /// The linear-address width the guest last read from CPUID.80000008H (48 until then).
    pub fn linear_bits(&self) -> u32 {
        self.linear_bits
    }

    /// A restored vCPU's recorder (`load=`): at power-on, with what the emulator had learned
    /// when the state was saved: the linear-address width the guest read (`linear_bits`, 32 to
    /// 64) and the `bts_recent=N` ring. None if `linear_bits` cannot be one.
    pub fn restored(model: Model, linear_bits: u32, recent: bts::Recent) -> Option<Recorder> {
        if !(32..=64).contains(&linear_bits) {
            return None;
        }
        Some(Recorder {
            linear_bits,
            recent,
            ..Recorder::new(model)
        })
    }

    /// The parts of this recorder that differ from `other`'s, named for a message. Every field
    /// is compared: the destructuring names them all, so that a field added later must be
    /// named here too (a saved state is refused unless the recorder is at power-on).
    pub fn differences(&self, other: &Recorder) -> Vec<&'static str> {
        let Recorder {
            model,
            debugctl,
            lbr_select,
            tos,
            slots,
            ler,
            arch_ctl,
            arch_depth,
            amd_cfg,
            amd_select,
            last,
            newest,
            counts,
            ds_area,
            linear_bits,
            bts,
            bts_issue,
            recent,
        } = self;
        [
            (*model != other.model, "model"),
            (*debugctl != other.debugctl, "DEBUGCTL"),
            (*lbr_select != other.lbr_select, "LBR_SELECT"),
            (*tos != other.tos, "TOS"),
            (*slots != other.slots, "records"),
            (*ler != other.ler, "LER"),
            (*arch_ctl != other.arch_ctl, "ARCH_LBR_CTL"),
            (*arch_depth != other.arch_depth, "ARCH_LBR_DEPTH"),
            (*amd_cfg != other.amd_cfg, "DBG_EXTN_CFG"),
            (*amd_select != other.amd_select, "AMD LBR_SELECT"),
            (*last != other.last, "LastBranchFromIP/ToIP"),
            (*newest != other.newest, "newest branch (LER's source)"),
            (*counts != other.counts, "branch counts"),
            (*ds_area != other.ds_area, "IA32_DS_AREA"),
            (*linear_bits != other.linear_bits, "linear-address width"),
            (*bts != other.bts, "BTS period figures"),
            (*bts_issue != other.bts_issue, "BTS issue reported"),
            (*recent != other.recent, "bts_recent records"),
        ]
        .into_iter()
        .filter_map(|(differs, name)| differs.then_some(name))
        .collect()
    }

    /// BTS stores the record of a branch taken at CPL 0 unless BTS_OFF_OS, and at CPL > 0 unless
    /// BTS_OFF_USR (SDM 17.4.9.4); the CPL is the one the branch is taken in (see `crate::bts`).
    fn bts_allows(&self, b: &Branch) -> bool {
        let off = if b.from >> 63 == 1 {
            bts::BTS_OFF_OS
        } else {
            bts::BTS_OFF_USR
        };
        self.debugctl & off == 0
    }

    /// A taken branch (or an exception or interrupt) while BTS may be on: stores its record in
    /// the BTS buffer through `mem`, if BTS is on and the ring filter lets it. None: not stored
    /// (off, or filtered out).
    pub fn bts_record(&mut self, mem: &mut impl bts::Memory, b: &Branch) -> Option<BtsStore> {
        if !self.bts_on() {
            return None;
        }
        self.bts.seen += 1;
        if !self.bts_allows(b) {
            return None;
        }
        let predicted = matches!(self.model.bts, Bts::Store { predicted: true });
        let o = bts::store(mem, self.ds_area, b, self.btint(), predicted);
        match o.at {
            Some(_) => {
                self.bts.stored += 1;
                self.recent.push(bts::Stored {
                    from: b.from,
                    to: b.to,
                    flags: bts::flags(b, predicted),
                });
            }
            None => self.bts.dropped += 1,
        }
        self.bts.wraps += o.wrapped as u64;
        let report = o.issue.filter(|&i| {
            let f = o.fields.unwrap_or_default();
            let key = (i, self.ds_area, f.base, f.max);
            let new = self.bts_issue != Some(key);
            self.bts_issue = Some(key);
            new
        });
        if o.issue.is_none() {
            self.bts_issue = None;
        }
        Some(BtsStore { outcome: o, report })
    }

    /// BTS was just switched on: a new period begins at the index the DS area has now.
    pub fn bts_started(&mut self, mem: &mut impl bts::Memory) {
        self.bts = bts::Stats {
            index_at_on: Fields::read(mem, self.ds_area).map(|f| f.index),
            ..bts::Stats::default()
        };
        self.bts_issue = None;
    }

    /// Is recording on?
    pub fn on(&self) -> bool {
        match self.model.flavour {
            Flavour::Legacy { .. } | Flavour::AmdSingle => self.debugctl & 1 != 0,
            Flavour::Arch { .. } => self.arch_ctl & 1 != 0,
            Flavour::AmdV2 { .. } => self.amd_cfg & (1 << 6) != 0,
        }
    }

    /// The MSR that holds the switch (for the log).
    pub fn switch_msr(&self) -> u32 {
        match self.model.flavour {
            Flavour::Legacy { .. } | Flavour::AmdSingle => MSR_DEBUGCTL,
            Flavour::Arch { .. } => MSR_ARCH_LBR_CTL,
            Flavour::AmdV2 { .. } => MSR_AMD_DBG_EXTN_CFG,
        }
    }

    /// Would this branch be recorded under the current filters?
    fn passes(&self, b: &Branch) -> bool {
        let kernel = b.ends_in_kernel();
        match self.model.flavour {
            Flavour::Legacy { .. } | Flavour::AmdV2 { .. } => {
                let sel = match self.model.flavour {
                    Flavour::AmdV2 { .. } => self.amd_select,
                    _ => self.lbr_select,
                };
                let ring_bit = if kernel { 0 } else { 1 };
                sel & (1 << ring_bit) == 0 && sel & (1 << select_bit(b.kind)) == 0
            }
            Flavour::Arch { .. } => {
                let ring_ok = if kernel {
                    self.arch_ctl & 2 != 0
                } else {
                    self.arch_ctl & 4 != 0
                };
                ring_ok && self.arch_ctl & (1 << arch_enable_bit(b.kind)) != 0
            }
            Flavour::AmdSingle => true,
        }
    }

    /// A taken branch retired. Returns whether it was recorded.
    pub fn branch(&mut self, b: &Branch) -> bool {
        if !self.on() {
            return false;
        }
        let user = !b.ends_in_kernel() as u64;
        self.counts.seen += 1;
        self.counts.seen_user += user;
        self.counts.seen_kind[b.kind.code() as usize] += 1;
        if !self.passes(b) {
            return false;
        }
        self.counts.recorded += 1;
        self.counts.recorded_user += user;
        self.counts.recorded_kind[b.kind.code() as usize] += 1;
        match self.model.flavour {
            Flavour::Legacy { depth, format, .. } => {
                self.tos = (self.tos + 1) % depth;
                self.slots[self.tos] = encode_legacy(format, b);
            }
            Flavour::Arch { timed, .. } => {
                // Entry 0 is the newest: shift the valid entries down by one.
                let d = self.arch_depth;
                self.slots[..d].rotate_right(1);
                self.slots[0] = encode_arch(b, timed);
            }
            Flavour::AmdV2 { erratum1452, .. } => {
                if erratum1452.is_some_and(|n| self.counts.recorded % u64::from(n) == 0) {
                    self.slots.rotate_right(1);
                    self.slots[0] = encode_amd_v2_erratum(b);
                }
                self.slots.rotate_right(1);
                self.slots[0] = encode_amd_v2(b);
            }
            Flavour::AmdSingle => self.last = (b.from, b.to),
        }
        self.newest = Some(*b);
        true
    }

    /// An exception or interrupt is delivered (recorded as a far branch): the Last Exception
    /// Record (Intel LER, AMD LastException) first takes the newest branch before it, where the
    /// recorder keeps one ([`Recorder::keeps_ler`]).
    pub fn event(&mut self, b: &Branch) -> bool {
        if self.on() && self.keeps_ler() {
            if let Some(n) = self.newest {
                self.ler = (self.ler_from(n.from), n.to);
            }
        }
        self.branch(b)
    }

    /// Whether an event updates the last exception record while recording. Not on LbrExtV2:
    /// the APM (vol. 2, 13.1.1, "Control-Transfer Recording MSRs") has LastIntFromIP/ToIP
    /// loaded from LastBranchFromIP/ToIP by the recording DebugCtl.LBR switches on; LBRV2EN
    /// switches the LBR stack on (the kernel's amd/lbr.c sets it alone), and the emulator
    /// models no DebugCtl.LBR recording on LbrExtV2 models (LastBranchFromIP reads 0 there).
    fn keeps_ler(&self) -> bool {
        !matches!(self.model.flavour, Flavour::AmdV2 { .. })
    }

    /// MSR_LER_FROM_LIP's value for a branch from `from`. Legacy format 4 (no TSX emulated):
    /// bits 62:61 clear, as branch captures leave the stack's FROM on parts without TSX (Xen's
    /// vmx.c lbr_tsx_fixup_check(): "Experimentally, MSR_LER_FROM_LIP (1DDH) is similarly
    /// impacted" by errata HSM182/BDM127), bit 63 the address's own. Otherwise the address:
    /// the SDM describes the LER MSRs as linear addresses, with no flags.
    fn ler_from(&self, from: u64) -> u64 {
        match self.model.flavour {
            Flavour::Legacy { format: 4, .. } => from & !(0b11 << 61),
            _ => from,
        }
    }

    /// #DB delivery: the processor clears DEBUGCTL.LBR (Intel legacy, AMD; Arch LBR: LBREn).
    /// LbrExtV2 is left running (the APM names DebugCtl.LBR only). Returns the switch change.
    pub fn debug_exception(&mut self) -> Switch {
        let was_on = self.on();
        match self.model.flavour {
            Flavour::Legacy { .. } | Flavour::AmdSingle => self.debugctl &= !1,
            Flavour::Arch { .. } => self.arch_ctl &= !1,
            Flavour::AmdV2 { .. } => {}
        }
        Switch {
            was_on,
            now_on: self.on(),
        }
    }

    fn done(&self, v: u64, was_on: bool) -> Access {
        Access::Done(
            v,
            Switch {
                was_on,
                now_on: self.on(),
            },
        )
    }

    /// Slot index and field (0 from, 1 to, 2 info) of a record MSR.
    fn record_msr(&self, msr: u32) -> Option<(usize, u8)> {
        let idx = |base: u32, n: usize, stride: u32| {
            msr.checked_sub(base)
                .filter(|off| off % stride == 0 && ((off / stride) as usize) < n)
                .map(|off| (off / stride) as usize)
        };
        match self.model.flavour {
            Flavour::Legacy {
                depth,
                from,
                to,
                info,
                ..
            } => idx(from, depth, 1)
                .map(|i| (i, 0))
                .or_else(|| idx(to, depth, 1).map(|i| (i, 1)))
                .or_else(|| info.and_then(|b| idx(b, depth, 1)).map(|i| (i, 2))),
            Flavour::Arch { depth, .. } => idx(MSR_ARCH_LBR_FROM_0, depth, 1)
                .map(|i| (i, 0))
                .or_else(|| idx(MSR_ARCH_LBR_TO_0, depth, 1).map(|i| (i, 1)))
                .or_else(|| idx(MSR_ARCH_LBR_INFO_0, depth, 1).map(|i| (i, 2))),
            Flavour::AmdV2 { depth, .. } => idx(MSR_AMD_LBR_FROM_0, depth, 2)
                .map(|i| (i, 0))
                .or_else(|| idx(MSR_AMD_LBR_FROM_0 + 1, depth, 2).map(|i| (i, 1))),
            Flavour::AmdSingle => None,
        }
    }

    pub fn rdmsr(&self, msr: u32) -> Access {
        let on = self.on();
        let v = match (msr, self.model.flavour) {
            (MSR_DEBUGCTL, _) => self.debugctl,
            (MSR_PERF_CAPABILITIES, _) => match self.model.perf_capabilities() {
                Some(v) => v,
                None => return Access::NotOurs,
            },
            (MSR_LER_FROM, _) => self.ler.0,
            (MSR_LER_TO, _) => self.ler.1,
            (MSR_DS_AREA, _) if self.model.has_bts() => self.ds_area,
            (MSR_DS_AREA, _) => return Access::WouldFault,
            (MSR_LBR_SELECT, Flavour::Legacy { select: false, .. }) => return Access::WouldFault,
            (MSR_LBR_SELECT, Flavour::Legacy { .. }) => self.lbr_select,
            (MSR_LBR_TOS, Flavour::Legacy { .. }) => self.tos as u64,
            (MSR_ARCH_LBR_CTL, Flavour::Arch { .. }) => self.arch_ctl,
            (MSR_ARCH_LBR_DEPTH, Flavour::Arch { .. }) => self.arch_depth as u64,
            (MSR_AMD_LBR_SELECT, Flavour::AmdV2 { .. }) => self.amd_select,
            (MSR_AMD_DBG_EXTN_CFG, Flavour::AmdV2 { .. }) => self.amd_cfg,
            (MSR_AMD_LASTBRANCH_FROM, _) if self.model.vendor == Vendor::Amd => self.last.0,
            (MSR_AMD_LASTBRANCH_TO, _) if self.model.vendor == Vendor::Amd => self.last.1,
            _ => match self.record_msr(msr) {
                Some((i, f)) => {
                    if let Flavour::Arch { .. } = self.model.flavour {
                        if i >= self.arch_depth {
                            return Access::WouldFault;
                        }
                    }
                    let s = self.slots[i];
                    [s.from, s.to, s.info][f as usize]
                }
                None => return Access::NotOurs,
            },
        };
        self.done(v, on)
    }

    pub fn wrmsr(&mut self, msr: u32, v: u64) -> Access {
        let was_on = self.on();
        match (msr, self.model.flavour) {
            (MSR_DEBUGCTL, _) if v & self.model.missing_debugctl_bts_bits() != 0 => {
                return Access::WouldFault
            }
            (MSR_DEBUGCTL, _) => self.debugctl = v,
            // A non-canonical address is a #GP (KVM's intel_pmu_set_msr() checks the same).
            (MSR_DS_AREA, _) if self.model.has_bts() && self.canonical(v) => self.ds_area = v,
            (MSR_DS_AREA, _) => return Access::WouldFault,
            (MSR_PERF_CAPABILITIES, _) if self.model.perf_capabilities().is_some() => {
                return Access::WouldFault
            }
            (MSR_LER_FROM, _) => self.ler.0 = v,
            (MSR_LER_TO, _) => self.ler.1 = v,
            (MSR_LBR_SELECT, Flavour::Legacy { select: false, .. }) => return Access::WouldFault,
            (MSR_LBR_SELECT, Flavour::Legacy { .. }) => self.lbr_select = v & 0x3ff,
            (MSR_LBR_TOS, Flavour::Legacy { depth, .. }) => self.tos = (v as usize) % depth,
            (MSR_ARCH_LBR_CTL, Flavour::Arch { .. }) => self.arch_ctl = v,
            (MSR_ARCH_LBR_DEPTH, Flavour::Arch { depth, .. }) => {
                let d = v as usize;
                if d == 0 || d % 8 != 0 || d > depth {
                    return Access::WouldFault;
                }
                // A write of the depth clears every record.
                self.arch_depth = d;
                self.slots.iter_mut().for_each(|s| *s = Slot::default());
                self.newest = None;
            }
            (MSR_AMD_LBR_SELECT, Flavour::AmdV2 { .. }) => self.amd_select = v & 0x1ff,
            (MSR_AMD_DBG_EXTN_CFG, Flavour::AmdV2 { .. }) => self.amd_cfg = v,
            (MSR_AMD_LASTBRANCH_FROM | MSR_AMD_LASTBRANCH_TO, _)
                if self.model.vendor == Vendor::Amd =>
            {
                return Access::WouldFault
            }
            _ => match self.record_msr(msr) {
                Some((i, f)) => {
                    if let Flavour::Arch { .. } = self.model.flavour {
                        if i >= self.arch_depth {
                            return Access::WouldFault;
                        }
                    }
                    let s = &mut self.slots[i];
                    *[&mut s.from, &mut s.to, &mut s.info][f as usize] = v;
                }
                None => return Access::NotOurs,
            },
        }
        if !was_on && self.on() {
            self.counts = Counts::default();
        }
        self.done(v, was_on)
    }

    /// The record stack as software reads it, newest first: (index, raw slot). For the single
    /// AMD record, one entry; LER is reported separately.
    pub fn stack(&self) -> Vec<Slot> {
        match self.model.flavour {
            Flavour::Legacy { depth, .. } => (0..depth)
                .map(|i| self.slots[(self.tos + depth - i) % depth])
                .collect(),
            Flavour::Arch { .. } => self.slots[..self.arch_depth].to_vec(),
            Flavour::AmdV2 { .. } => self.slots.clone(),
            Flavour::AmdSingle => vec![Slot {
                from: self.last.0,
                to: self.last.1,
                info: 0,
            }],
        }
    }

    pub fn ler(&self) -> (u64, u64) {
        self.ler
    }

    pub fn tos(&self) -> usize {
        self.tos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K_FROM: u64 = 0xffff_ffff_8100_1234; // a kernel text address
    const K_TO: u64 = 0xffff_ffff_8100_5678;
    const U_FROM: u64 = 0x0000_5555_5555_1000; // a user address

    fn br(from: u64, to: u64, kind: Kind, cycles: u64) -> Branch {
        Branch {
            from,
            to,
            kind,
            cycles,
        }
    }

    // Expected values worked out by hand from the SDM's format descriptions.
    #[test]
    fn legacy_formats_by_hand() {
        let ret = br(K_FROM, K_TO, Kind::Ret, 0x12345); // mispredicted, cycles saturate
        let jmp = br(K_FROM, K_TO, Kind::JmpRel, 7); // predicted
                                                     // 0: FROM low half | TO low half << 32.
        assert_eq!(encode_legacy(0, &jmp).from, 0x8100_5678_8100_1234);
        // 1, 2: plain.
        assert_eq!(
            encode_legacy(1, &ret),
            Slot {
                from: K_FROM,
                to: K_TO,
                info: 0
            }
        );
        // 3: bit 63 is the flag, bits 62:0 the sign-extended address.
        assert_eq!(encode_legacy(3, &ret).from, 0xffff_ffff_8100_1234);
        assert_eq!(encode_legacy(3, &jmp).from, 0x7fff_ffff_8100_1234);
        // 4 without TSX: bit 63 mispredict, bits 62:61 (IN_TX, ABORT) clear as branch captures
        // leave them (kernel lbr.c), bits 60:0 address.
        assert_eq!(encode_legacy(4, &ret).from, 0x9fff_ffff_8100_1234);
        assert_eq!(encode_legacy(4, &jmp).from, 0x1fff_ffff_8100_1234);
        let user = Branch {
            from: 0x40_1000,
            ..jmp
        };
        assert_eq!(encode_legacy(4, &user).from, 0x0000_0000_0040_1000);
        // 5: LBR_INFO bit 63 mispredict, 15:0 cycles (saturated).
        assert_eq!(
            encode_legacy(5, &ret),
            Slot {
                from: K_FROM,
                to: K_TO,
                info: 0x8000_0000_0000_ffff
            }
        );
        assert_eq!(encode_legacy(5, &jmp).info, 7);
        // 6: TO[63:48] cycles, [47:0] address.
        assert_eq!(encode_legacy(6, &jmp).to, 0x0007_ffff_8100_5678);
        assert_eq!(encode_legacy(6, &ret).from, 0xffff_ffff_8100_1234);
        // 7: as 5.
        assert_eq!(encode_legacy(7, &ret).info, 0x8000_0000_0000_ffff);
        // A user address: bit 63 clear, so formats 3/4 keep the upper bits zero.
        assert_eq!(
            encode_legacy(4, &br(U_FROM, U_FROM, Kind::JmpRel, 0)).from,
            U_FROM
        );
    }

    #[test]
    fn untimed_arch_records_have_no_valid_cycle_count() {
        // SDM IA32_LBR_x_INFO: CYC_CNT_VALID [60] clear, CYC_CNT [15:0] then meaningless (0
        // here); the other fields as with timed LBRs.
        let call = br(K_FROM, K_TO, Kind::CallInd, 3);
        assert_eq!(encode_arch(&call, false).info, 0x8300_0000_0000_0000);
    }

    #[test]
    fn erratum1452_entries_precede_every_nth_branch() {
        let m = find("zen4").unwrap().with_erratum1452(2).unwrap();
        let mut r = Recorder::new(m);
        on(&mut r);
        for i in 0..3u64 {
            r.branch(&br(K_FROM + i, K_TO + i, Kind::JmpRel, 0));
        }
        // Branches 1 and 3 are recorded plainly, branch 2 after an erroneous entry: newest
        // first, branch 3, branch 2, the erratum entry (TO[61] set, valid), branch 1.
        let s = r.stack();
        let to61 = |x: &Slot| x.to >> 61 & 1;
        assert_eq!(s[0].from & 0xff, 0x34 + 2);
        assert_eq!((s[1].from & 0xff, to61(&s[1])), (0x34 + 1, 0));
        assert_eq!((to61(&s[2]), s[2].to >> 63), (1, 1));
        assert_ne!(s[2].from, s[1].from);
        assert_eq!((s[3].from & 0xff, to61(&s[3])), (0x34, 0));
        assert_eq!(s[4].to, 0, "nothing older");
    }

    #[test]
    fn arch_and_amd_by_hand() {
        let call = br(K_FROM, K_TO, Kind::CallInd, 3);
        // INFO: 63 mispredict, 60 cycle count valid, 59:56 type 3 (NEAR_IND_CALL), cycles 3.
        assert_eq!(encode_arch(&call, true).info, 0x9300_0000_0000_0003);
        assert_eq!(
            encode_arch(&br(K_FROM, K_TO, Kind::Far, 0), true).info >> 56 & 0xf,
            8
        );
        // AMD: FROM 63 mispredict + sign-extended address in 62:0; TO 63 valid, 62 spec = 0,
        // bits 60:0 the address (bit 61 clear).
        let s = encode_amd_v2(&call);
        assert_eq!(s.from, 0xffff_ffff_8100_1234);
        assert_eq!(s.to, 0x9fff_ffff_8100_5678);
        let s = encode_amd_v2(&br(K_FROM, K_TO, Kind::JmpRel, 0));
        assert_eq!(s.from, 0x7fff_ffff_8100_1234);
    }

    fn on(r: &mut Recorder) {
        let (msr, v) = match r.model.flavour {
            Flavour::Legacy { .. } | Flavour::AmdSingle => (MSR_DEBUGCTL, 1),
            Flavour::Arch { .. } => (MSR_ARCH_LBR_CTL, 0x7f_0007),
            Flavour::AmdV2 { .. } => (MSR_AMD_DBG_EXTN_CFG, 1 << 6),
        };
        assert!(matches!(
            r.wrmsr(msr, v),
            Access::Done(
                _,
                Switch {
                    was_on: false,
                    now_on: true
                }
            )
        ));
    }

    #[test]
    fn legacy_tos_rotation_and_msrs() {
        let mut r = Recorder::new(crate::model::find("haswell").unwrap());
        assert!(!r.branch(&br(1, 2, Kind::Jcc, 0)), "off: nothing recorded");
        on(&mut r);
        for i in 0..18u64 {
            assert!(r.branch(&br(K_FROM + i, K_TO + i, Kind::JmpRel, 0)));
        }
        // 18 records in 16 slots: TOS = 18 % 16 = 2, slot 2 newest.
        assert_eq!(r.rdmsr(MSR_LBR_TOS), r.done(2, true));
        assert_eq!(r.rdmsr(0x6c0 + 2), r.done(K_TO + 17, true));
        assert_eq!(r.stack()[0].to, K_TO + 17);
        assert_eq!(r.stack()[15].to, K_TO + 2);
        assert_eq!(r.rdmsr(0x6c0 + 16), Access::NotOurs);
        // Switching off freezes.
        assert!(matches!(
            r.wrmsr(MSR_DEBUGCTL, 0),
            Access::Done(
                _,
                Switch {
                    was_on: true,
                    now_on: false
                }
            )
        ));
        assert!(!r.branch(&br(1, 2, Kind::Jcc, 0)));
        assert_eq!(r.stack()[0].to, K_TO + 17);
    }

    #[test]
    fn legacy_select_filters() {
        let mut r = Recorder::new(crate::model::find("skylake").unwrap());
        on(&mut r);
        r.wrmsr(MSR_LBR_SELECT, 0x2); // CPL_NEQ_0: drop branches ending in user space
        assert!(!r.branch(&br(K_FROM, U_FROM, Kind::Far, 0)));
        assert!(r.branch(&br(U_FROM, K_TO, Kind::Far, 0)));
        assert_eq!(
            r.counts,
            Counts {
                seen: 2,
                seen_user: 1,
                recorded: 1,
                recorded_user: 0,
                seen_kind: [0, 0, 0, 0, 0, 0, 0, 2],
                recorded_kind: [0, 0, 0, 0, 0, 0, 0, 1],
            }
        );
        r.wrmsr(MSR_LBR_SELECT, 1 << 2); // JCC suppressed
        assert!(!r.branch(&br(K_FROM, K_TO, Kind::Jcc, 0)));
        assert!(r.branch(&br(K_FROM, K_TO, Kind::Ret, 0)));
        // By kind: Jcc (code 1) seen, not recorded; Ret (6) both.
        assert_eq!((r.counts.seen_kind[1], r.counts.recorded_kind[1]), (1, 0));
        assert_eq!((r.counts.seen_kind[6], r.counts.recorded_kind[6]), (1, 1));
    }

    #[test]
    fn core2_and_bonnell_have_no_lbr_select() {
        // intel_pmu_lbr_init_core() / _atom(): no lbr_sel_map; the MSR does not exist there.
        for name in ["core2", "atom"] {
            let mut r = Recorder::new(crate::model::find(name).unwrap());
            assert!(
                matches!(r.rdmsr(MSR_LBR_SELECT), Access::WouldFault),
                "{name}"
            );
            assert!(
                matches!(r.wrmsr(MSR_LBR_SELECT, 2), Access::WouldFault),
                "{name}"
            );
            assert!(matches!(r.rdmsr(MSR_DEBUGCTL), Access::Done(..)), "{name}");
        }
        let mut r = Recorder::new(crate::model::find("silvermont").unwrap());
        assert!(matches!(r.wrmsr(MSR_LBR_SELECT, 2), Access::Done(..)));
    }

    #[test]
    fn arch_newest_first_depth_clear_and_filters() {
        let mut r = Recorder::new(crate::model::find("sapphirerapids").unwrap());
        on(&mut r);
        r.branch(&br(K_FROM, K_TO, Kind::Jcc, 0));
        r.branch(&br(K_FROM + 1, K_TO + 1, Kind::Ret, 0));
        assert_eq!(r.rdmsr(MSR_ARCH_LBR_FROM_0), r.done(K_FROM + 1, true));
        assert_eq!(r.rdmsr(MSR_ARCH_LBR_FROM_0 + 1), r.done(K_FROM, true));
        // Depth 8: entries past it would #GP; a depth write clears.
        assert!(matches!(r.wrmsr(MSR_ARCH_LBR_DEPTH, 8), Access::Done(..)));
        assert_eq!(r.rdmsr(MSR_ARCH_LBR_FROM_0), r.done(0, true));
        assert_eq!(r.rdmsr(MSR_ARCH_LBR_FROM_0 + 8), Access::WouldFault);
        assert_eq!(r.wrmsr(MSR_ARCH_LBR_DEPTH, 12), Access::WouldFault);
        // OS only: user-ending branches dropped; RET type disabled: returns dropped.
        r.wrmsr(MSR_ARCH_LBR_CTL, 0x1 | 0x2 | (0x5f << 16));
        assert!(!r.branch(&br(K_FROM, U_FROM, Kind::Far, 0)));
        assert!(!r.branch(&br(K_FROM, K_TO, Kind::Ret, 0)));
        assert!(r.branch(&br(K_FROM, K_TO, Kind::CallRel, 0)));
        // #DB clears LBREn.
        assert_eq!(
            r.debug_exception(),
            Switch {
                was_on: true,
                now_on: false
            }
        );
    }

    #[test]
    fn amd_single_and_last_exception() {
        let mut r = Recorder::new(crate::model::find("amd").unwrap());
        on(&mut r);
        r.branch(&br(K_FROM, K_TO, Kind::CallRel, 0));
        r.event(&br(K_TO + 4, 0xffff_ffff_8200_0000, Kind::Far, 0));
        assert_eq!(r.rdmsr(MSR_AMD_LASTBRANCH_FROM), r.done(K_TO + 4, true));
        assert_eq!(r.rdmsr(MSR_LER_FROM), r.done(K_FROM, true));
        assert_eq!(r.rdmsr(MSR_LER_TO), r.done(K_TO, true));
        assert_eq!(
            r.debug_exception(),
            Switch {
                was_on: true,
                now_on: false
            }
        );
    }

    #[test]
    fn ds_area_and_debugctl_bts_bits() {
        let mut r = Recorder::new(find("skylake").unwrap());
        assert!(matches!(
            r.wrmsr(MSR_DS_AREA, 0xffff_8880_0100_0000),
            Access::Done(..)
        ));
        assert_eq!(r.rdmsr(MSR_DS_AREA), r.done(0xffff_8880_0100_0000, false));
        // Non-canonical with 48-bit linear addresses: #GP; canonical with 57 (CPUID
        // 0x80000008 EAX[15:8] = 57, as on an LA57 part).
        assert_eq!(
            r.wrmsr(MSR_DS_AREA, 0xff00_0000_0000_0000),
            Access::WouldFault
        );
        r.set_linear_bits(0x3930);
        assert!(matches!(
            r.wrmsr(MSR_DS_AREA, 0xff00_0000_0000_0000),
            Access::Done(..)
        ));
        assert_eq!(
            r.wrmsr(MSR_DS_AREA, 0x8000_0000_0000_0000),
            Access::WouldFault
        );
        assert!(matches!(r.wrmsr(MSR_DEBUGCTL, 0x7c1), Access::Done(..)));
        assert!(r.bts_on() && r.on());
        // No debug store: IA32_DS_AREA does not exist; DEBUGCTL's BTS bits are reserved (AMD:
        // TR too).
        let mut amd = Recorder::new(find("zen4").unwrap());
        assert_eq!(amd.rdmsr(MSR_DS_AREA), Access::WouldFault);
        assert_eq!(amd.wrmsr(MSR_DS_AREA, 0), Access::WouldFault);
        assert_eq!(amd.wrmsr(MSR_DEBUGCTL, bts::TR), Access::WouldFault);
        assert!(matches!(amd.wrmsr(MSR_DEBUGCTL, 1), Access::Done(..)));
        let mut off = Recorder::new(find("skylake").unwrap().with_bts(false).unwrap());
        assert_eq!(
            off.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS),
            Access::WouldFault
        );
        assert!(matches!(off.wrmsr(MSR_DEBUGCTL, bts::TR), Access::Done(..)));
        assert!(!off.bts_on());
    }

    #[test]
    fn bts_needs_tr_and_bts_and_filters_by_the_ring_taken_in() {
        use crate::bts::tests::{setup, AREA, BUF};
        let mut m = setup(8);
        let mut r = Recorder::new(find("skylake").unwrap());
        r.wrmsr(MSR_DS_AREA, AREA);
        let kernel = br(K_FROM, K_TO, Kind::JmpRel, 0);
        let syscall = br(U_FROM, K_TO, Kind::Far, 0); // taken in ring 3, ends in ring 0
        let sysret = br(K_FROM, U_FROM, Kind::Far, 0);
        let stored = |r: &mut Recorder, m: &mut _, b| r.bts_record(m, b).map(|s| s.outcome.at);
        // TR alone: branch trace messages, nothing stored.
        r.wrmsr(MSR_DEBUGCTL, bts::TR);
        assert_eq!(stored(&mut r, &mut m, &kernel), None);
        r.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS);
        r.bts_started(&mut m);
        assert_eq!(r.bts.index_at_on, Some(BUF));
        assert_eq!(stored(&mut r, &mut m, &kernel), Some(Some(BUF)));
        // BTS_OFF_USR (the module's kernel-only mode): a system call from user mode is not
        // stored; the return to user mode, taken at CPL 0, is.
        r.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS | bts::BTS_OFF_USR);
        assert_eq!(stored(&mut r, &mut m, &syscall), None);
        assert_eq!(stored(&mut r, &mut m, &sysret), Some(Some(BUF + 24)));
        r.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS | bts::BTS_OFF_OS);
        assert_eq!(stored(&mut r, &mut m, &sysret), None);
        assert_eq!(stored(&mut r, &mut m, &syscall), Some(Some(BUF + 48)));
        // Both: "generate BTMs but do not store BTMs".
        r.wrmsr(
            MSR_DEBUGCTL,
            bts::TR | bts::BTS | bts::BTS_OFF_OS | bts::BTS_OFF_USR,
        );
        assert_eq!(stored(&mut r, &mut m, &syscall), None);
        assert_eq!(stored(&mut r, &mut m, &kernel), None);
        assert_eq!(
            r.bts,
            bts::Stats {
                seen: 7,
                stored: 3,
                wraps: 0,
                dropped: 0,
                index_at_on: Some(BUF)
            }
        );
        // LBR is independent: DEBUGCTL.LBR alone records no BTS; both in one write.
        r.wrmsr(MSR_DEBUGCTL, 1);
        assert!(r.on() && !r.bts_on());
        assert_eq!(stored(&mut r, &mut m, &kernel), None);
        r.wrmsr(MSR_DEBUGCTL, 1 | bts::TR | bts::BTS);
        assert!(r.branch(&kernel));
        assert_eq!(stored(&mut r, &mut m, &kernel), Some(Some(BUF + 72)));
        // #DB clears DEBUGCTL.LBR only.
        r.debug_exception();
        assert!(!r.on() && r.bts_on());
    }

    #[test]
    fn bts_issues_are_reported_once_per_configuration() {
        use crate::bts::tests::{setup, AREA};
        let mut m = setup(2);
        let mut r = Recorder::new(find("skylake").unwrap());
        r.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS);
        let b = br(K_FROM, K_TO, Kind::Jcc, 0);
        // DS_AREA still 0: unmapped.
        let s: Vec<_> = (0..3).map(|_| r.bts_record(&mut m, &b).unwrap()).collect();
        assert_eq!(s[0].report, Some(Issue::ReadFault(0)));
        assert_eq!((s[1].report, s[2].report), (None, None));
        assert_eq!(s[2].outcome.issue, Some(Issue::ReadFault(0)));
        assert_eq!(r.bts.dropped, 3);
        r.wrmsr(MSR_DS_AREA, AREA);
        let s = r.bts_record(&mut m, &b).unwrap();
        assert_eq!((s.report, s.outcome.issue), (None, None));
        // Misaligned index: reported once though the index moves on.
        let base = m.q(AREA);
        m.set_q(AREA + 8, base + 4);
        let s: Vec<_> = (0..3).map(|_| r.bts_record(&mut m, &b).unwrap()).collect();
        assert_eq!(s[0].report, Some(Issue::IndexOffRecord));
        assert_eq!(s[1].report, None);
        // At base + 4, no room after it in two records: back to the base; then base, base + 24,
        // and back again.
        assert_eq!(
            s.iter()
                .map(|s| s.outcome.at.unwrap() - base)
                .collect::<Vec<_>>(),
            [4, 0, 24]
        );
        assert_eq!(r.bts.wraps, 2);
    }

    #[test]
    fn bts_recent_keeps_the_newest_stored_across_wraps_and_periods() {
        use crate::bts::tests::{setup, AREA, BUF};
        use crate::bts::{Recent, Stored, RECORD_SIZE};
        const SPARE: u64 = 0xffff_8880_0300_0000;
        let mut m = setup(3);
        m.map(SPARE, 2 * RECORD_SIZE);
        let mut r = Recorder::new(find("skylake").unwrap());
        r.recent = Recent::new(5);
        r.wrmsr(MSR_DS_AREA, AREA);
        // Kernel branches b(0), b(1), ...; jmp (predicted: flags 0x10) but every third a ret
        // (mispredicted: flags 0), by the emulator's convention.
        let b = |i: u64| {
            let kind = if i % 3 == 2 { Kind::Ret } else { Kind::JmpRel };
            br(K_FROM + 0x100 * i, K_TO + 0x100 * i, kind, 0)
        };
        let want = |i: u64| Stored {
            from: K_FROM + 0x100 * i,
            to: K_TO + 0x100 * i,
            flags: if i % 3 == 2 { 0 } else { 0x10 },
        };
        let stored = |r: &mut Recorder, m: &mut _, x: &Branch| {
            r.bts_record(m, x).and_then(|s| s.outcome.at).is_some()
        };
        // Period 1: four records in a 3-record circular buffer (it wraps), and a system call
        // filtered out by BTS_OFF_USR in between.
        r.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS);
        r.bts_started(&mut m);
        for i in 0..2 {
            assert!(stored(&mut r, &mut m, &b(i)));
        }
        r.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS | bts::BTS_OFF_USR);
        assert!(!stored(&mut r, &mut m, &br(U_FROM, K_TO, Kind::Far, 0)));
        for i in 2..4 {
            assert!(stored(&mut r, &mut m, &b(i)));
        }
        assert_eq!((r.bts.stored, r.bts.wraps), (4, 1));
        assert_eq!(r.recent.total(), 4);
        assert_eq!(
            r.recent.records().copied().collect::<Vec<_>>(),
            (0..4).map(want).collect::<Vec<_>>()
        );
        // Freeze; a 2-record spare buffer swapped in by plain stores to the DS area, BTINT set
        // (it fills and drops); period 2.
        r.wrmsr(MSR_DEBUGCTL, 0);
        m.set_q(AREA, SPARE);
        m.set_q(AREA + 8, SPARE);
        m.set_q(AREA + 16, SPARE + 2 * RECORD_SIZE);
        r.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS | bts::BTINT);
        r.bts_started(&mut m);
        assert!(stored(&mut r, &mut m, &b(4)));
        assert!(stored(&mut r, &mut m, &b(5)));
        assert!(!stored(&mut r, &mut m, &b(6)), "full: dropped");
        assert_eq!((r.bts.stored, r.bts.dropped), (2, 1));
        // The newest five stored, oldest first, across both periods; six stored in all.
        let kept: Vec<_> = r.recent.records().copied().collect();
        assert_eq!(kept, (1..6).map(want).collect::<Vec<_>>());
        assert_eq!(r.recent.total(), 6);
        // What the ring holds is what was written: the spare buffer holds the newest two, the
        // old one (index at BUF + 24 after the wrap) b(3), b(1), b(2) in its slots.
        let mem = |m: &mut crate::bts::tests::FakeMem, at: u64| Stored {
            from: m.q(at),
            to: m.q(at + 8),
            flags: m.q(at + 16),
        };
        assert_eq!(
            [mem(&mut m, SPARE), mem(&mut m, SPARE + 24)],
            [kept[3], kept[4]]
        );
        assert_eq!(
            [
                mem(&mut m, BUF + 24),
                mem(&mut m, BUF + 48),
                mem(&mut m, BUF)
            ],
            [kept[0], kept[1], kept[2]]
        );
        // Off (the default): nothing kept, nothing counted.
        let mut off = Recorder::new(find("skylake").unwrap());
        let mut m = setup(3);
        off.wrmsr(MSR_DS_AREA, AREA);
        off.wrmsr(MSR_DEBUGCTL, bts::TR | bts::BTS);
        assert!(stored(&mut off, &mut m, &b(0)));
        assert!(!off.recent.on());
        assert_eq!((off.recent.records().len(), off.recent.total()), (0, 0));
    }

    #[test]
    fn last_exception_record_by_flavour() {
        let ler_of = |model: &str| {
            let mut r = Recorder::new(find(model).unwrap());
            on(&mut r);
            r.branch(&br(K_FROM, K_TO, Kind::CallRel, 0));
            r.event(&br(K_TO + 4, 0xffff_ffff_8200_0000, Kind::Far, 0));
            (r.rdmsr(MSR_LER_FROM), r.rdmsr(MSR_LER_TO), r)
        };
        // Format 4: FROM bits 62:61 clear, bit 63 the address's (0xffff... -> 0x9fff...).
        let (from, to, r) = ler_of("haswell");
        assert_eq!(
            (from, to),
            (r.done(0x9fff_ffff_8100_1234, true), r.done(K_TO, true))
        );
        // Formats 3, 5, 6 and Arch LBR: the addresses.
        for model in ["nehalem", "skylake", "goldmont-plus", "sapphirerapids"] {
            let (from, to, r) = ler_of(model);
            assert_eq!(
                (from, to),
                (r.done(K_FROM, true), r.done(K_TO, true)),
                "{model}"
            );
        }
        // LbrExtV2 on LBRV2EN alone: the pair keeps its value (0 since reset).
        let (from, to, r) = ler_of("zen4");
        assert_eq!((from, to), (r.done(0, true), r.done(0, true)));
    }

    #[test]
    fn amd_v2_msr_pairs() {
        let mut r = Recorder::new(crate::model::find("zen4").unwrap());
        on(&mut r);
        r.branch(&br(K_FROM, K_TO, Kind::JmpRel, 0));
        assert_eq!(
            r.rdmsr(MSR_AMD_LBR_FROM_0),
            r.done(0x7fff_ffff_8100_1234, true)
        );
        assert_eq!(
            r.rdmsr(MSR_AMD_LBR_FROM_0 + 1),
            r.done(0x9fff_ffff_8100_5678, true)
        );
        assert_eq!(
            r.rdmsr(MSR_AMD_LBR_FROM_0 + 3),
            r.done(0, true),
            "entry 1 empty: valid = 0"
        );
        assert_eq!(r.rdmsr(MSR_AMD_LBR_FROM_0 + 32), Access::NotOurs);
        // LbrExtV2 keeps running through #DB (choice, see debug_exception).
        assert_eq!(
            r.debug_exception(),
            Switch {
                was_on: true,
                now_on: true
            }
        );
    }
}
