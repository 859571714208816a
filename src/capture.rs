// SPDX-License-Identifier: GPL-2.0

//! Arming lbr-dump: the snapshot area, the stubs' configuration, recording on every CPU, the
//! hooked gates, the panic path and the printers, in that order; disarming undoes them in
//! reverse.
//!
//! The panic path (README "What a panic shows"): the panic trampoline (asm/stubs.S) is attached
//! to the entry of panic(), vpanic() and crash_kexec() as an ftrace direct call and captures the
//! panicking CPU; the stop trampoline, at the entry of the functions that stop the other CPUs,
//! switches the NMI and REBOOT_VECTOR gates to the stop stubs, whose static calls and gate values
//! are prepared here (text patching cannot happen in a panic). Those gates are the kernel's until
//! a panic stops the other CPUs: no cost for the NMIs and IPIs of a running system.
//!
//! Re-arm policy (README "Recording"): recording is switched on by a CPU-hotplug callback on
//! every CPU that is online or comes online later (a dynamic AP state, after perf's online
//! callback, which clears LBR), and on the boot CPU at resume from suspend (syscore resume: the
//! boot CPU never goes through hotplug, and its MSRs come back from a reset). #DB clears the
//! enable bit by itself; a capture whose entry value is lbr-dump's armed value with only the
//! enable bit cleared re-arms (asm/stubs.S). Another owner's value (perf) is never overwritten:
//! a capture restores it as found, and disarming or a CPU going offline puts the pre-arm value
//! back only where lbr-dump's own value is still in place.
//!
//! Every MSR a capture reads, and every one arming writes, is first accessed with the
//! exception-safe accessors on each CPU as it is armed: a model without one (Core 2 and Bonnell
//! have no LBR_SELECT) or a hypervisor that faults it refuses arming with a one-line reason,
//! instead of a #GP in the hotplug thread or inside a stub.
//!
//! Serialization: arming and disarming run under the module's state lock (control.rs). The
//! hotplug callbacks do not take it (arming holds it while the hotplug core runs them): the
//! hotplug core serializes them against `__cpuhp_setup_state()` / `__cpuhp_remove_state()`, and
//! each touches only its own CPU's atomics. The resume callback runs on one CPU with IRQs off.

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use kernel::{
    bindings,
    ffi::{c_int, c_uint, c_void},
    prelude::*,
};

use kernel::cpu::CpuId;

use crate::facility::{debugctl, msr, select, Filter, Recorder, Switch};
use crate::ffi;
use crate::idt::Hooks;
use crate::layout::{self, hdr, Geometry};
use crate::probe::{read_msr, write_msr, write_msr_here};
use crate::record::{self, Encoding, Tsx, MAX_VALUES};
use crate::window;

use crate::report::{vector_name, REARM_ONLY, VECTORS as HOOKABLE};

/// A set of hookable vectors, as a bit mask (bit N: vector N).
// INVARIANT: only bits of `HOOKABLE` vectors are set, and at least one captured vector's.
#[derive(Clone, Copy)]
pub(crate) struct Vectors(u32);

impl Vectors {
    /// Every hookable vector.
    pub(crate) const ALL: u32 = {
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
    pub(crate) fn new(mask: u32) -> Option<Self> {
        (mask & !Self::ALL == 0 && mask & !(1 << REARM_ONLY) != 0).then_some(Vectors(mask))
    }

    /// Every hookable vector, as a set.
    pub(crate) fn all() -> Self {
        Vectors(Self::ALL)
    }

    /// The set without vector `v` (may break the invariant: pass it through [`Vectors::new`]).
    fn without(self, v: usize) -> Self {
        Vectors(self.0 & !(1 << v))
    }

    /// The vectors of the set, in order; `out` holds them, the count is returned.
    fn list(self, out: &mut [usize; HOOKABLE.len()]) -> usize {
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
pub(crate) struct Options {
    /// Which rings' branches are recorded (`all_rings`).
    pub(crate) rings: Rings,
    /// Which branches are recorded (`filter`): one the recorder can apply (the load refuses the
    /// others, lbr_dump.rs `prepare`; the options do not change after it).
    pub(crate) filter: Filter,
    /// The vectors to hook.
    pub(crate) vectors: Vectors,
    /// Freeze the recorder at every kernel-mode NMI's entry until lbr-dump's NMI handler
    /// (`nmi_freeze`; asm/stubs.S lbr_dump_nmi_watch).
    pub(crate) nmi_freeze: bool,
    /// The branch trace store beside the LBR (`bts`, `bts_user`, `bts_print`), if asked for.
    pub(crate) bts: Option<BtsOptions>,
}

/// What the `bts` parameters ask for (checked at load, lbr_dump.rs `prepare`).
#[derive(Clone, Copy)]
pub(crate) struct BtsOptions {
    /// Bytes per buffer: a power of two from 4 KiB to 4 MiB (one page allocation).
    pub(crate) size: usize,
    /// Store user-mode branches too (`bts_user`).
    pub(crate) user: bool,
    /// Records the oops prints, newest first (`bts_print`).
    pub(crate) print: u32,
}

/// BTS buffers per CPU: the one recording and three kept by the newest captures (a WARN, then an
/// oops that panics: its exception and its panic() entry are two captures); a capture reuses the
/// oldest kept one. Fixed-up kernel faults that are captured (an rdmsr_safe() #GP, a nofault
/// read) take one too.
pub(crate) const BTS_POOL: usize = 4;

impl BtsOptions {
    /// Records a buffer holds.
    pub(crate) fn records(&self) -> usize {
        self.size / layout::BTS_RECORD_SIZE
    }

    /// Bytes per buffer the hardware uses: whole records (the absolute maximum's offset).
    pub(crate) fn used(&self) -> usize {
        self.records() * layout::BTS_RECORD_SIZE
    }
}

/// Snapshots kept per CPU (a power of two).
const RING: usize = 4;
/// Exported symbol whose runtime address the area records (the decoder's KASLR anchor).
const ANCHOR: &CStr = c"_printk";

/// Which rings' branches are recorded (parameter `all_rings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rings {
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
pub(crate) struct Control {
    /// The control MSR and its enable mask.
    pub(crate) switch: Switch,
    /// A filter MSR written when arming (LBR_SELECT), with its armed value.
    filter: Option<(u32, u64)>,
    /// Arch LBR: ARCH_LBR_CTL's armed value is written whole (not OR-ed into the old one).
    whole: Option<u64>,
    /// BTS: the DEBUGCTL bits it sets beside the LBR switch (TR, BTS, and BTS_OFF_USR for
    /// kernel-only); 0 without BTS. The control MSR is DEBUGCTL (legacy LBR only).
    bts: u64,
}

impl Control {
    /// The arming writes for a recorder that records the branches of `rings` that `branches`
    /// keeps. The caller checked that the recorder can apply `branches`
    /// ([`Filter::unsupported_by`]).
    pub(crate) fn new(recorder: &Recorder, rings: Rings, branches: Filter) -> Self {
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
        Control {
            switch: sw,
            filter,
            whole,
            bts: 0,
        }
    }

    /// The same with the branch trace store on (the caller checked that the recorder is legacy
    /// LBR, whose switch is DEBUGCTL.LBR): TR and BTS, BTINT clear (circular), and BTS_OFF_USR
    /// unless `user`.
    pub(crate) fn with_bts(self, user: bool) -> Self {
        let off = if user { 0 } else { debugctl::BTS_OFF_USR };
        Control {
            bts: debugctl::TR | debugctl::BTS | off,
            ..self
        }
    }

    /// The control value once armed, given the value before.
    fn armed(&self, before: u64) -> u64 {
        match self.bts {
            0 => self.whole.unwrap_or(before | self.switch.mask),
            bits => {
                let clear = debugctl::BTINT | debugctl::BTS_OFF_OS | debugctl::BTS_OFF_USR;
                (before & !clear) | self.switch.mask | bits
            }
        }
    }

    /// The bits a capture clears to freeze: the LBR switch, and TR and BTS with BTS.
    pub(crate) fn freeze_mask(&self) -> u64 {
        self.switch.mask | (self.bts & (debugctl::TR | debugctl::BTS))
    }

    /// Whether arming filters by ring (LBR_SELECT, or ARCH_LBR_CTL's OS/USR bits); the AMD
    /// single record and models without LBR_SELECT record every ring.
    pub(crate) fn filters_rings(&self) -> bool {
        self.filter.is_some() || self.whole.is_some()
    }
}

/// `wrmsr` on this CPU, for the resume callback (IRQs off: the `_on_cpu` accessors would IPI).
/// Only for the recorder MSRs that were written safely on every CPU when arming.
fn wrmsr_here(msr: u32, v: u64) {
    // SAFETY: writes a branch-recorder MSR that arming wrote without fault on this CPU model; it
    // changes only what is recorded, no memory the compiler knows of.
    unsafe {
        core::arch::asm!("wrmsr", in("ecx") msr, in("eax") v as u32, in("edx") (v >> 32) as u32,
                         options(nostack, nomem))
    };
}

/// `rdmsr` on this CPU, for the resume and shutdown callbacks (IRQs off). Only for MSRs arming
/// read safely on every CPU.
fn rdmsr_here(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reads an MSR that arming read without fault on this CPU model; no memory access.
    unsafe {
        core::arch::asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nostack, nomem))
    };
    u64::from(hi) << 32 | u64::from(lo)
}

/// What the hotplug and resume callbacks need (they get only a CPU number, or nothing).
struct Saved {
    control: Control,
    /// The control value lbr-dump writes (the same on every CPU: the boot CPU's value before
    /// arming with the enable bits set; Arch LBR: a whole value).
    armed: u64,
    /// Every MSR a capture reads, checked on each CPU before recording goes on there.
    msrs: KVec<u32>,
    /// (control, filter, DS_AREA) before lbr-dump armed each CPU, by CPU number.
    before: KVec<[AtomicU64; 3]>,
    /// BTS: (address of CPU 0's debug store, bytes between CPUs' debug stores): what
    /// IA32_DS_AREA gets on each CPU.
    ds: Option<(u64, u64)>,
    /// Set while arming runs the online callback on every CPU: another owner's debug store then
    /// refuses arming; on a CPU that comes online later, it only keeps BTS off there.
    arming: AtomicBool,
    /// Intel legacy LBR: what [`lend`] needs to keep KVM guests and lbr-dump apart.
    vlbr: Option<Vlbr>,
}

/// Lending the LBR to KVM guests (Intel legacy LBR, the one kind KVM gives guests: see
/// [`lend`]).
struct Vlbr {
    /// (address of CPU 0's block in the snapshot area, bytes between CPU blocks): each block's
    /// `layout::cpu::LENT` counts the guest LBR events scheduled on that CPU, and the stubs read
    /// it.
    blocks: (u64, u64),
    /// The record MSRs (FROM, TO, INFO of every entry), zeroed when a guest gets the LBR and
    /// when it gives it back.
    records: KVec<u32>,
}

impl Vlbr {
    /// `layout::cpu::LENT` of a CPU that is not armed: not yet (every CPU's, before the
    /// callbacks are registered), or not any more (`cpu_offline`): nothing to give back there.
    /// Arming a CPU sets 0 (`Saved::armed_here`).
    const OFF: u32 = u32::MAX;

    fn new(l: &crate::facility::LegacyLbr, blocks: (u64, u64)) -> Result<Self> {
        let mut records = KVec::with_capacity(3 * l.depth as usize, GFP_KERNEL)?;
        for i in 0..u32::from(l.depth) {
            records.push(l.from + i, GFP_KERNEL)?;
            records.push(l.to + i, GFP_KERNEL)?;
            if let Some(info) = l.info {
                records.push(info + i, GFP_KERNEL)?;
            }
        }
        Ok(Vlbr { blocks, records })
    }

    /// The guest LBR event count of `cpu`, in its block.
    fn lent(&self, cpu: u32) -> &AtomicU32 {
        let (cpu0, stride) = self.blocks;
        let addr = cpu0 + stride * u64::from(cpu) + layout::cpu::LENT as u64;
        // SAFETY: `cpu` is below the area's CPU count (the callers' CPU numbers come from
        // `CpuId`, below nr_cpu_ids, for which the area has blocks); an aligned u32 of the area,
        // which lives as long as the `Saved` that holds this; the stubs only read it.
        unsafe { AtomicU32::from_ptr(addr as *mut u32) }
    }

    fn wipe(&self) {
        for &m in self.records.iter() {
            wrmsr_here(m, 0);
        }
    }
}

/// KVM lends this CPU's LBR to a guest, or takes it back: glue.c's ftrace callbacks at the entry
/// of intel_pmu_lbr_add() (`lent`) and intel_pmu_lbr_del() (not `lent`) for a vCPU's guest LBR
/// event, on this CPU with interrupts off. While that event is scheduled here, KVM passes the
/// LBR MSRs through to the guest (reads and writes) and restores the host's DEBUGCTL after every
/// VM exit: the host's records and recording must be gone before the guest runs. So on the first
/// such event the recorder is switched off and every record zeroed (KVM reads DEBUGCTL for that
/// restore before each VM entry, after this; perf then puts the guest's own records back); on
/// the last one leaving, the guest's records (forged ones too) are zeroed, lbr-dump's filter is
/// written again and recording goes back on. In between, the stubs neither re-arm nor thaw on
/// this CPU (`layout::cpu::LENT`), and a capture here says `lent`. A CPU not armed (yet, or any
/// more) is `Vlbr::OFF`: a guest event coming there has the records wiped and recording switched
/// off all the same, one leaving switches nothing on; arming sets 0 in the same interrupts-off
/// step as its write of the control MSR ([`lbr_on_here`], [`arm_here`]), in this CPU's hotplug
/// thread, where no vCPU's event is scheduled.
///
/// # Safety
///
/// Called only by glue.c's ftrace callback at intel_pmu_lbr_add()/_del(): on the CPU whose LBR
/// is lent or given back, with interrupts off, while the callback is registered.
unsafe extern "C" fn lend(lent: bool) {
    let Some(s) = recording() else { return };
    let Some(v) = s.vlbr.as_ref() else { return };
    let cpu = CpuId::current().as_u32();
    if cpu as usize >= s.before.len() {
        return;
    }
    let count = v.lent(cpu);
    let c = &s.control;
    let n = count.load(Ordering::Relaxed);
    if lent {
        // The count first: an NMI from here on neither thaws nor re-arms. A CPU being disarmed
        // (`Vlbr::OFF`, `cpu_offline` runs) is not counted, but its records go all the same.
        if n != Vlbr::OFF {
            count.store(n + 1, Ordering::Relaxed);
        }
        if n == 0 || n == Vlbr::OFF {
            wrmsr_here(c.switch.msr, rdmsr_here(c.switch.msr) & !c.switch.mask);
            v.wipe();
        }
    } else {
        match n {
            0 | Vlbr::OFF => {}
            1 => {
                // The count first: an NMI thaw from here on may switch recording on, as this does.
                count.store(0, Ordering::Relaxed);
                v.wipe();
                if let Some((m, val)) = c.filter {
                    wrmsr_here(m, val);
                }
                wrmsr_here(c.switch.msr, rdmsr_here(c.switch.msr) | c.switch.mask);
            }
            _ => {
                count.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl Saved {
    /// This CPU is armed: from now on [`lend`] gives its LBR to a KVM guest and back (interrupts
    /// off, right after the control MSR's armed write).
    fn armed_here(&self) {
        if let Some(v) = self.vlbr.as_ref() {
            let cpu = CpuId::current().as_u32();
            if (cpu as usize) < self.before.len() {
                v.lent(cpu).store(0, Ordering::Relaxed);
            }
        }
    }

    /// The debug store of `cpu` (with BTS).
    fn ds(&self, cpu: u32) -> Option<u64> {
        self.ds.map(|(cpu0, stride)| cpu0 + stride * u64::from(cpu))
    }
}

/// Why a CPU could not be armed.
enum ArmCpuError {
    /// An MSR access faulted.
    Msr(crate::probe::MsrError),
    /// BTS: IA32_DS_AREA already points at another owner's debug store.
    DsTaken(u64),
    /// `smp_call_function_single()` could not run the debug store's switch-over on the CPU.
    Call(c_int),
}

impl From<crate::probe::MsrError> for ArmCpuError {
    fn from(e: crate::probe::MsrError) -> Self {
        Self::Msr(e)
    }
}

impl core::fmt::Display for ArmCpuError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Msr(e) => e.fmt(f),
            Self::DsTaken(v) => write!(
                f,
                "IA32_DS_AREA is {v:#x}: another owner has the debug store (perf points it at \
                 its own for any hardware event, the NMI watchdog among them, and never gives it \
                 back: boot with nmi_watchdog=0 and run no perf hardware event before arming, or \
                 load without bts)"
            ),
            Self::Call(e) => write!(
                f,
                "cannot run BTS's arming on this CPU: smp_call_function_single() gave {e}"
            ),
        }
    }
}

/// The recording state the callbacks use; set while the hotplug state and the resume callback
/// are registered.
static RECORDING: AtomicPtr<Saved> = AtomicPtr::new(ptr::null_mut());

/// The recording state, if armed.
fn recording() -> Option<&'static Saved> {
    // SAFETY: `RECORDING` points at the `Saved` owned by the live `Armed`; it is cleared after
    // the hotplug state and the resume callback are removed, which wait for running callbacks,
    // and before the `Saved` is freed.
    unsafe { RECORDING.load(Ordering::Acquire).as_ref() }
}

/// CPU coming online (and every online CPU at arming; runs on that CPU): check every MSR the
/// captures will touch, save the values, switch recording on. An MSR that faults stops the CPU's
/// arming with an error (arming then fails and says which).
///
/// # Safety
///
/// Called only by the CPU hotplug core, for the state lbr-dump registered, on `cpu`.
unsafe extern "C" fn cpu_online(cpu: c_uint) -> i32 {
    let Some(s) = recording() else { return 0 };
    match arm_cpu(s, CpuId::from_u32(cpu)) {
        Ok(()) => 0,
        Err(e) => {
            pr_err!("CPU {cpu}: {}: not arming\n", format_args!("{e}"));
            EIO.to_errno()
        }
    }
}

fn arm_cpu(s: &Saved, cpu: Option<CpuId>) -> Result<(), ArmCpuError> {
    let Some(cpu) = cpu else { return Ok(()) };
    let Some(slot) = s.before.get(cpu.as_u32() as usize) else {
        return Ok(());
    };
    for &m in s.msrs.iter() {
        read_msr(cpu, m)?;
    }
    let c = &s.control;
    let ctl = read_msr(cpu, c.switch.msr)?;
    // BTS: the debug store is lbr-dump's only if nobody else's is in place. A first look (and
    // the check that the MSR does not fault): at arming, another owner's debug store refuses
    // before anything is written, unless perf took it during this arming (`BTS_GONE`: then
    // the LBR records alone). `arm_here` looks again, and decides.
    let armed = s.armed;
    let ds = s.ds(cpu.as_u32());
    if let Some(ds) = ds {
        // 0, or this area's own value (left by an earlier arming of it: 0 before), is free.
        let now = read_msr(cpu, msr::DS_AREA)?;
        if now != 0
            && now != ds
            && s.arming.load(Ordering::Relaxed)
            && !BTS_GONE.load(Ordering::SeqCst)
        {
            return Err(ArmCpuError::DsTaken(now));
        }
    }
    slot[0].store(ctl, Ordering::Relaxed);
    if let Some((m, v)) = c.filter {
        slot[1].store(read_msr(cpu, m)?, Ordering::Relaxed);
        write_msr(cpu, m, v)?;
    }
    let Some(ds) = ds else {
        lbr_on(s, cpu, armed)?;
        return Ok(());
    };
    // Last, so that a failure above leaves no debug store behind, and in one step with
    // interrupts off on the CPU itself: perf's IPIs (`perf_takes_ds`, then its own write of
    // IA32_DS_AREA) come before it or after it, never between its look at IA32_DS_AREA and
    // its write (tests/scenarios/bts.py perf_reserving_while_a_cpu_arms_keeps_perfs_debug_store).
    let mut here = ArmHere {
        s,
        ds,
        armed,
        found: None,
    };
    // SAFETY: `arm_here` is a valid callback for an `ArmHere`, and `here` lives until the call
    // returns (wait). It runs on `cpu` with interrupts off; it reads only IA32_DS_AREA, which
    // this function read without fault on `cpu` above, and writes with fault checks (but for
    // putting back a value of IA32_DS_AREA it has just read).
    let r = unsafe {
        ffi::smp_call_function_single(
            cpu.as_u32() as c_int,
            arm_here,
            ptr::addr_of_mut!(here).cast(),
            true,
        )
    };
    let why = match (r, here.found) {
        (0, Some(Ok(BtsArming::On | BtsArming::Gone))) => return Ok(()),
        (0, Some(Ok(BtsArming::Taken(now)))) => ArmCpuError::DsTaken(now),
        (0, Some(Err(e))) => ArmCpuError::Msr(e),
        (r, _) => ArmCpuError::Call(r),
    };
    // Neither the debug store nor the switch was left written: on failure, the filter goes back.
    let put_filter_back = |why| {
        if let Some((m, _)) = c.filter {
            let _ = write_msr(cpu, m, slot[1].load(Ordering::Relaxed));
        }
        Err(why)
    };
    if s.arming.load(Ordering::Relaxed) {
        return put_filter_back(why);
    }
    // A CPU coming online later whose debug store perf set up meanwhile
    // (intel_pmu_cpu_starting): it records LBR only; failing would keep it offline.
    pr_warn!(
        "CPU {}: {}: BTS stays off on this CPU\n",
        cpu.as_u32(),
        format_args!("{why}")
    );
    match lbr_on(s, cpu, armed & !(debugctl::TR | debugctl::BTS)) {
        Ok(()) => Ok(()),
        Err(e) => put_filter_back(e),
    }
}

/// [`lbr_on_here`]'s inputs and result.
struct LbrOn<'a> {
    s: &'a Saved,
    value: u64,
    r: Option<Result<(), crate::probe::MsrError>>,
}

/// Writes the control value `value` on `cpu`, and marks it armed for [`lend`] in the same
/// interrupts-off step there.
fn lbr_on(s: &Saved, cpu: CpuId, value: u64) -> Result<(), ArmCpuError> {
    let mut a = LbrOn { s, value, r: None };
    // SAFETY: `lbr_on_here` is a valid callback for an `LbrOn`, which lives until the call
    // returns (wait); it runs on `cpu` with interrupts off and writes the control MSR with a
    // fault check.
    let r = unsafe {
        ffi::smp_call_function_single(
            cpu.as_u32() as c_int,
            lbr_on_here,
            ptr::addr_of_mut!(a).cast(),
            true,
        )
    };
    match (r, a.r) {
        (0, Some(r)) => r.map_err(ArmCpuError::from),
        (r, _) => Err(ArmCpuError::Call(r)),
    }
}
/// # Safety
///
/// An IPI callback of `lbr_on`: `info` is the `LbrOn` it passes, alive until the call returns.
unsafe extern "C" fn lbr_on_here(info: *mut c_void) {
    // SAFETY: `lbr_on` passes a live `LbrOn` and waits for this call; nothing else uses it.
    let a = unsafe { &mut *info.cast::<LbrOn<'_>>() };
    let r = write_msr_here(a.s.control.switch.msr, a.value);
    if r.is_ok() {
        a.s.armed_here();
    }
    a.r = Some(r);
}

/// What [`arm_here`] found on the CPU it armed.
#[derive(Clone, Copy)]
enum BtsArming {
    /// lbr-dump's debug store in place, the recorder switched on with TR|BTS.
    On,
    /// Perf had reserved the debug store (`BTS_GONE`): recording switched on without TR|BTS,
    /// IA32_DS_AREA left alone.
    Gone,
    /// IA32_DS_AREA was another owner's: nothing written.
    Taken(u64),
}

/// [`arm_here`]'s inputs and result.
struct ArmHere<'a> {
    s: &'a Saved,
    /// This CPU's debug store.
    ds: u64,
    /// The control value to write (with TR|BTS).
    armed: u64,
    /// What it did; an MSR write that faulted leaves both MSRs as they were.
    found: Option<Result<BtsArming, crate::probe::MsrError>>,
}

/// The last step of arming a CPU with BTS, on that CPU with interrupts off
/// (`smp_call_function_single`): the check of `BTS_GONE` and IA32_DS_AREA, the write of the
/// debug store and of the control MSR. `perf_takes_ds` sets `BTS_GONE` before it sends its IPIs,
/// and perf writes IA32_DS_AREA only after they ran: either this sees the flag, or its IPI comes
/// after this and finds lbr-dump's debug store to give back.
///
/// # Safety
///
/// An IPI callback of `arm_cpu`: `info` is the `ArmHere` it passes, alive until the call
/// returns.
unsafe extern "C" fn arm_here(info: *mut c_void) {
    // SAFETY: `arm_cpu` passes a live `ArmHere` and waits for this call; nothing else uses it
    // meanwhile.
    let a = unsafe { &mut *info.cast::<ArmHere<'_>>() };
    let ctl = a.s.control.switch.msr;
    if BTS_GONE.load(Ordering::SeqCst) {
        let r = write_msr_here(ctl, a.armed & !(debugctl::TR | debugctl::BTS));
        if r.is_ok() {
            a.s.armed_here();
        }
        a.found = Some(r.map(|()| BtsArming::Gone));
        return;
    }
    let now = rdmsr_here(msr::DS_AREA);
    if now != 0 && now != a.ds {
        a.found = Some(Ok(BtsArming::Taken(now)));
        return;
    }
    // 0 before (this area's own value is left only where a disarm could not put 0 back).
    if let Some(slot) = a.s.before.get(CpuId::current().as_u32() as usize) {
        slot[2].store(0, Ordering::Relaxed);
    }
    let r = write_msr_here(msr::DS_AREA, a.ds).and_then(|()| {
        write_msr_here(ctl, a.armed).inspect_err(|_| {
            // Back to the value read above (0, or this store's own): canonical, it cannot fault.
            wrmsr_here(msr::DS_AREA, now)
        })
    });
    if r.is_ok() {
        a.s.armed_here();
    }
    a.found = Some(r.map(|()| BtsArming::On));
}

/// CPU going offline (and every CPU at disarming; runs on that CPU): put back what was there
/// before arming, where lbr-dump's own value is still in place. A value another owner wrote
/// since (a perf session) is left alone.
///
/// # Safety
///
/// Called only by the CPU hotplug core, for the state lbr-dump registered, on `cpu`.
unsafe extern "C" fn cpu_offline(cpu: c_uint) -> i32 {
    let Some(s) = recording() else { return 0 };
    let Some(id) = CpuId::from_u32(cpu) else {
        return 0;
    };
    let Some(slot) = s.before.get(cpu as usize) else {
        return 0;
    };
    if let Some(v) = s.vlbr.as_ref() {
        // First: a guest LBR event scheduled here from now on must not switch recording back on
        // when it leaves (`lend`), and the stubs no longer re-arm here.
        v.lent(cpu).store(Vlbr::OFF, Ordering::Relaxed);
    }
    let c = &s.control;
    if let Ok(now) = read_msr(id, c.switch.msr) {
        let before = slot[0].load(Ordering::Relaxed);
        // Also lbr-dump's value frozen whole (an NMI watch window), and its value without TR|BTS
        // (a CPU where BTS stayed off, or was switched off by a panic or at shutdown).
        let bts_off = s.armed & !(debugctl::TR | debugctl::BTS);
        let frozen = (now == s.armed & !c.freeze_mask()).then_some(before);
        let ours_without_bts = c
            .switch
            .restore(now, bts_off, before)
            .filter(|_| s.ds.is_some());
        if let Some(v) = c
            .switch
            .restore(now, s.armed, before)
            .or(frozen)
            .or(ours_without_bts)
        {
            let _ = write_msr(id, c.switch.msr, v);
        }
    }
    if let Some((m, ours)) = c.filter {
        if read_msr(id, m) == Ok(ours) {
            let _ = write_msr(id, m, slot[1].load(Ordering::Relaxed));
        }
    }
    // BTS is off again (above) unless another owner switched it on: the debug store goes back
    // only where it is still lbr-dump's.
    if s.ds(cpu).is_some() {
        // BTS off whoever owns the debug store now: a DEBUGCTL value another owner changed (left
        // above) still has lbr-dump's TR and BTS, which must not outlive its buffers. Then the
        // debug store back where it is lbr-dump's, in one step with interrupts off on the CPU
        // (an IPI of perf's writing IA32_DS_AREA comes before or after it, not between).
        // SAFETY: `bts_off_ipi` is a valid callback that ignores its argument; it touches only
        // the control MSR and IA32_DS_AREA, which arming read without fault on this CPU.
        let _ = unsafe {
            ffi::smp_call_function_single(cpu as c_int, bts_off_ipi, ptr::null_mut(), true)
        };
    }
    0
}

/// Set by [`shutdown`] and [`perf_takes_ds`], cleared when arming: BTS is off on every CPU for
/// good (a CPU coming online again, or a resume, leaves it off).
static BTS_GONE: AtomicBool = AtomicBool::new(false);

/// TR|BTS cleared from the stubs' re-arm target (`cfg::ARMED`), so that a #DB re-arm or a
/// capture's re-arm switches the LBR alone back on (BTS is gone for good).
fn rearm_without_bts() {
    // SAFETY: `armed` is an aligned u64 of the stubs' configuration, which the stubs read with
    // single 8-byte loads; the store is one atomic read-modify-write of it. While gates may
    // point at the stubs, every write to it is atomic; `configure_stubs` writes it plainly
    // before any gate does, and `arm` orders that write before its check of `BTS_GONE` with a
    // full fence (the window's lock is one too).
    unsafe {
        window::write_config(|page| {
            let armed = AtomicU64::from_ptr(ptr::addr_of_mut!((*page).cfg.armed));
            armed.fetch_and(!(debugctl::TR | debugctl::BTS), Ordering::SeqCst);
        })
    };
}

/// Perf is reserving the debug store for its first hardware event (glue.c's ftrace callbacks at
/// the entry of reserve_ds_buffers(), and at wrmsrq_on_cpu() writing a debug store into
/// IA32_DS_AREA with interrupts on, for a reservation already under way when the callbacks were
/// registered): process context, interrupts on (preemptible unless another ftrace user traces
/// the same function), perf's pmc_reserve_mutex held; after the first call, the others return
/// at once. Perf calls reserve_ds_buffers() whether or not its PMU has a debug store (it returns
/// at once without one): BTS goes off either way. Before perf points IA32_DS_AREA at its own
/// debug store on every CPU (wrmsrq_on_cpu(), later in the same function), BTS goes off for good
/// on every CPU and lbr-dump's debug store is given back: otherwise TR|BTS would store into
/// perf's BTS buffer, and after perf releases it, into freed memory. The LBR records on; later
/// captures find perf's debug store and say `state=foreign`.
///
/// # Safety
///
/// Called only by glue.c's ftrace callbacks, in process context, while they are registered.
unsafe extern "C" fn perf_takes_ds() {
    if BTS_GONE.swap(true, Ordering::SeqCst) {
        return;
    }
    rearm_without_bts();
    if recording().is_some() {
        pr_warn!("perf is reserving the debug store (a hardware perf event): BTS is switched off on every CPU for good; the LBR records on\n");
        // SAFETY: `bts_off_ipi` is a valid IPI callback that ignores its argument; process
        // context, interrupts on. Waits: perf writes IA32_DS_AREA only after this returns.
        unsafe { ffi::lbr_dump_on_each_cpu(bts_off_ipi, ptr::null_mut(), true) };
    }
}

/// BTS off on this CPU and its debug store given back (interrupts off: an IPI callback, a
/// syscore callback, or `cpu_offline`'s smp_call_function_single()).
fn bts_off_here(s: &Saved) {
    let cpu = CpuId::current().as_u32();
    let Some(ds) = s.ds(cpu) else { return };
    let c = &s.control;
    wrmsr_here(
        c.switch.msr,
        rdmsr_here(c.switch.msr) & !(debugctl::TR | debugctl::BTS),
    );
    if rdmsr_here(msr::DS_AREA) == ds {
        let before = s
            .before
            .get(cpu as usize)
            .map_or(0, |b| b[2].load(Ordering::Relaxed));
        wrmsr_here(msr::DS_AREA, before);
    }
}

/// A CPU stopping for good (glue.c's ftrace callback at the entry of stop_this_cpu() and
/// crash_nmi_callback(): IRQ or NMI context, this CPU only): TR and BTS off, the LBR and the
/// debug store left as they are. After a panic the stop stubs did it already, unless they
/// skipped (a hardware breakpoint armed) or a perf NMI wrote the value back; at reboot and
/// `kexec -e`, [`shutdown`] did.
///
/// # Safety
///
/// Called only by glue.c's ftrace callback, on the CPU that stops, while it is registered.
unsafe extern "C" fn stopping() {
    if let Some(s) = recording().filter(|s| s.ds.is_some()) {
        let m = s.control.switch.msr;
        let v = rdmsr_here(m);
        if v & (debugctl::TR | debugctl::BTS) != 0 {
            wrmsr_here(m, v & !(debugctl::TR | debugctl::BTS));
        }
    }
}

/// IPI callback of [`shutdown`] and [`perf_takes_ds`].
///
/// # Safety
///
/// An IPI callback (interrupts off); `_info` is not used.
unsafe extern "C" fn bts_off_ipi(_info: *mut c_void) {
    if let Some(s) = recording() {
        bts_off_here(s);
    }
}

/// Shutdown (syscore: reboot, kexec -e; process context, interrupts on, every CPU still online:
/// on x86, kernel_kexec() and kernel_restart() stop the other CPUs only afterwards, with no
/// hotplug teardown): BTS off on every CPU, before the next kernel's page tables, which do not
/// map lbr-dump's buffers, and which must not start with TR|BTS set. This CPU at once; the
/// others by an IPI not waited for (a CPU wedged with interrupts off must not hang the reboot),
/// and at the latest where they stop (`stopping`, at stop_this_cpu(), reached through the
/// REBOOT_VECTOR or its NMI fallback). (After a panic, the panic entry and the stop stubs do it.)
///
/// # Safety
///
/// Called only by the syscore shutdown callback glue.c registers, while it is registered.
unsafe extern "C" fn shutdown() {
    if recording().is_some_and(|s| s.ds.is_some()) {
        BTS_GONE.store(true, Ordering::SeqCst);
        rearm_without_bts();
        // SAFETY: `bts_off_ipi` is a valid IPI callback that ignores its argument; process
        // context, interrupts on. on_each_cpu() runs it on this CPU before it returns.
        unsafe { ffi::lbr_dump_on_each_cpu(bts_off_ipi, ptr::null_mut(), false) };
    }
}

/// Suspend (syscore: the boot CPU alone, interrupts off; also kexec with preserve_context): BTS
/// off; resume switches it back on.
///
/// # Safety
///
/// Called only by the syscore suspend callback glue.c registers, while it is registered.
unsafe extern "C" fn suspend() {
    if let Some(s) = recording() {
        bts_off_here(s);
    }
}

/// Resume from suspend (syscore: the boot CPU, IRQs off, other CPUs still offline): the CPU's
/// MSRs came back from a reset; switch recording back on as arming did. The value saved before
/// arming is kept (it is what disarming restores).
///
/// # Safety
///
/// Called only by the syscore resume callback glue.c registers, while it is registered.
unsafe extern "C" fn resume() {
    let Some(s) = recording() else { return };
    if let Some((m, v)) = s.control.filter {
        wrmsr_here(m, v);
    }
    // BTS: the debug store first (the reset cleared IA32_DS_AREA; BTS must not run without it),
    // unless perf restored its own meanwhile (perf_restore_debug_store() runs before syscore
    // resume): then BTS stays off.
    let mut armed = s.armed;
    if let Some(ds) = s.ds(CpuId::current().as_u32()) {
        match rdmsr_here(msr::DS_AREA) {
            _ if BTS_GONE.load(Ordering::SeqCst) => armed &= !(debugctl::TR | debugctl::BTS),
            0 => wrmsr_here(msr::DS_AREA, ds),
            now if now == ds => {}
            now => {
                pr_warn!("resume: IA32_DS_AREA is {now:#x}, another owner's: BTS stays off on the boot CPU\n");
                armed &= !(debugctl::TR | debugctl::BTS);
            }
        }
    }
    wrmsr_here(s.control.switch.msr, armed);
}

/// The snapshot area: physically contiguous zeroed pages (layout.rs describes the format).
// INVARIANT: `base` is the start of `1 << order` pages from `lbr_dump_alloc_pages(order)`, at
// least `geometry.area_size()` bytes, owned by this value.
pub(crate) struct Area {
    base: *mut u8,
    order: u32,
    pub(crate) geometry: Geometry,
    pub(crate) layout: Encoding,
}

// SAFETY: the area is plain memory owned by this value; concurrent writers are the stubs, which
// the snapshot protocol (busy flag, sequence written last) orders, and every read of it goes
// through volatile loads (`u64_at`, `byte`), never a Rust reference to its bytes.
unsafe impl Send for Area {}
// SAFETY: as above.
unsafe impl Sync for Area {}

impl Area {
    pub(crate) fn new(geometry: Geometry, layout: Encoding) -> Result<Self> {
        let size = geometry.area_size();
        let order = (size.div_ceil(bindings::PAGE_SIZE))
            .next_power_of_two()
            .trailing_zeros();
        // SAFETY: no preconditions; 0 means failure (no warning: the caller says what failed).
        let base = unsafe { ffi::lbr_dump_alloc_pages(order) } as *mut u8;
        if base.is_null() {
            return Err(ENOMEM);
        }
        Ok(Area {
            base,
            order,
            geometry,
            layout,
        })
    }

    /// Address of byte `off` of the area (`off` below the area size).
    pub(crate) fn at(&self, off: usize) -> *mut u8 {
        debug_assert!(off < self.geometry.area_size());
        // SAFETY: `off` is within the allocation (offsets come from `geometry`).
        unsafe { self.base.add(off) }
    }

    fn put(&self, off: usize, bytes: &[u8]) {
        // SAFETY: header writes within the allocation, before any stub can see the area.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), self.at(off), bytes.len()) };
    }

    /// The byte at `off`, read with a volatile load (stubs on other CPUs may be writing).
    pub(crate) fn byte(&self, off: usize) -> u8 {
        // SAFETY: within the allocation; a volatile load of plain memory.
        unsafe { ptr::read_volatile(self.at(off)) }
    }

    /// The little-endian u64 at `off` (8-byte aligned), read with one volatile load.
    pub(crate) fn u64_at(&self, off: usize) -> u64 {
        // SAFETY: within the allocation; every u64 field of the layout is 8-byte aligned from
        // the page-aligned base.
        u64::from_le(unsafe { ptr::read_volatile(self.at(off).cast::<u64>()) })
    }

    /// The control value lbr-dump writes when arming, as the header records it.
    pub(crate) fn ctl_armed(&self) -> u64 {
        self.u64_at(hdr::CTL_ARMED)
    }

    /// The filter value a capture found, with the one lbr-dump writes when arming, for a
    /// snapshot at `snap` (None: the recorder has no filter MSR).
    pub(crate) fn filter(&self, snap: usize) -> Option<(u64, u64)> {
        let m = u32::from_le_bytes([0, 1, 2, 3].map(|i| self.byte(hdr::FILTER_MSR + i)));
        (m != 0).then(|| {
            (
                self.u64_at(snap + layout::snap::VALUES + 8 * (self.geometry.nr_values - 1)),
                self.u64_at(hdr::FILTER_ARMED),
            )
        })
    }

    /// The branch filter recording uses, as the header records it.
    pub(crate) fn branches(&self) -> Filter {
        let code = u32::from_le_bytes([0, 1, 2, 3].map(|i| self.byte(hdr::BRANCH_FILTER + i)));
        // The header was written from a `Filter` (write_header): its code is one of ALL's.
        Filter::ALL
            .get(code as usize)
            .copied()
            .unwrap_or(Filter::All)
    }

    /// The last exception record's raw FROM and TO values in the snapshot at `snap` (None: the
    /// recorder has none), after the records' values (layout.rs).
    pub(crate) fn ler(&self, snap: usize) -> Option<(u64, u64)> {
        let m = u32::from_le_bytes([0, 1, 2, 3].map(|i| self.byte(hdr::LER_FROM_MSR + i)));
        let at = snap + layout::snap::VALUES + 8 * self.layout.values();
        (m != 0).then(|| (self.u64_at(at), self.u64_at(at + 8)))
    }

    /// The layout checksum of `len` bytes at `off`, skipping the field at `off + skip`, read
    /// with volatile loads.
    pub(crate) fn checksum(&self, off: usize, len: usize, skip: usize) -> u64 {
        layout::checksum_bytes((off..off + len).map(|i| self.byte(i)), skip)
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: `base` came from `lbr_dump_alloc_pages(order)` (type invariant) and no stub
        // can reach it any more (the gates were restored and every CPU synchronized before the
        // area is dropped).
        unsafe { bindings::free_pages(self.base as usize, self.order) };
    }
}

/// Everything that exists while lbr-dump is armed. Dropping it disarms, in reverse order.
pub(crate) struct Armed {
    /// The panic path's trampolines (detached first when disarming).
    panic: PanicPath,
    /// glue.c's NMI handler is registered (`nmi_freeze`).
    nmi_handler: bool,
    hooks: Option<Hooks>,
    hp_state: i32,
    resume: bool,
    saved: Option<KBox<Saved>>,
    pub(crate) area: Area,
    /// The stop stubs' register save areas (layout.rs `stop`), not part of the dump.
    stop_save: Option<Pages>,
    /// The BTS buffers (the area's table describes them), freed after recording is off.
    bts: Option<BtsBuffers>,
    /// BTS records an oops prints (`bts_print`; 0 without BTS).
    pub(crate) bts_print: u32,
    /// glue.c's BTS callbacks are registered (perf's reserve_ds_buffers(), CPUs stopping).
    perf_watch: bool,
    /// glue.c's callbacks at perf's LBR event scheduling are registered (Intel legacy LBR: a
    /// KVM guest may be lent the LBR, [`lend`]).
    vlbr_watch: bool,
    /// The vectors whose gates point at stubs.
    pub(crate) hooked: Vectors,
}

/// Why BTS refuses page-table isolation (README "Branch trace store").
const BTS_PTI_REFUSAL: &str = "bts: page-table isolation is active: the processor writes each BTS record through the page tables in use at the branch, and the kernel's entry and exit code takes branches at CPL 0 under the user CR3, where lbr-dump's buffers are not mapped (perf keeps its BTS buffers in the cpu_entry_area for this reason); bts_user=0 does not lift this, since BTS_OFF_USR skips only branches at CPL > 0 (SDM vol. 3B, \"CPL-Qualified Branch Trace Store\"); boot with pti=off or load without bts";

/// The BTS buffers of every CPU's pool: `BTS_POOL` per CPU, CPU 0's first.
struct BtsBuffers {
    /// Held for their drop: the stubs and the printer reach them through the area's table.
    _pages: KVec<Pages>,
}

impl BtsBuffers {
    /// Allocates the pools and describes them in `area` (its table, and each CPU block's debug
    /// store, pointed at the CPU's first buffer), before any stub or CPU can use them.
    fn new(area: &Area, b: &BtsOptions) -> Result<Self> {
        let g = area.geometry;
        let mut pages = KVec::with_capacity(g.nr_cpus * BTS_POOL, GFP_KERNEL)?;
        for cpu in 0..g.nr_cpus {
            for slot in 0..BTS_POOL {
                let p = Pages::new(b.size)?;
                let virt = p.base as u64;
                // SAFETY: a direct-map address from the page allocator.
                let phys = unsafe { ffi::lbr_dump_virt_to_phys(p.base.cast()) } as u64;
                pages.push(p, GFP_KERNEL)?;
                let e = g.bts_entry(cpu, slot);
                area.put(e + layout::bts::VIRT, &virt.to_le_bytes());
                area.put(e + layout::bts::PHYS, &phys.to_le_bytes());
            }
            let block = g.cpu_block(cpu);
            let first = g.bts_entry(cpu, 0);
            area.put(
                block + layout::cpu::BTS_TABLE,
                &(area.at(first) as u64).to_le_bytes(),
            );
            // PANIC: none, the pool of this CPU was pushed above.
            let base = pages[cpu * BTS_POOL].base as u64;
            let max = base + b.used() as u64;
            let ds = block + layout::cpu::DS;
            for (off, v) in [
                (layout::ds::BTS_BASE, base),
                (layout::ds::BTS_INDEX, base),
                (layout::ds::BTS_MAX, max),
                // Past the maximum: no interrupt (the SDM's note on circular buffers).
                (
                    layout::ds::BTS_THRESHOLD,
                    max + layout::BTS_RECORD_SIZE as u64,
                ),
            ] {
                area.put(ds + off, &v.to_le_bytes());
            }
        }
        Ok(BtsBuffers { _pages: pages })
    }
}

/// What the panic path does while armed: which trampolines are attached (each detached first
/// when disarming; one the kernel refused was reported with its reason).
#[derive(Clone, Copy, Default)]
pub(crate) struct PanicPath {
    /// asm/stubs.S `lbr_dump_panic_entry` at panic(), vpanic(), crash_kexec(): the panicking
    /// CPU is captured.
    pub(crate) panic: bool,
    /// The panic trampoline is at crash_kexec() too (or the kernel has no crash_kexec()): an
    /// oops that goes to kdump is captured there and switches BTS off before machine_kexec().
    pub(crate) kexec: bool,
    /// asm/stubs.S `lbr_dump_stop_entry` at native_stop_other_cpus(), nmi_shootdown_cpus(): the
    /// stop gates are switched there, and the other CPUs are captured as they stop.
    pub(crate) stop: bool,
}

/// Zeroed, physically contiguous pages that no stub can reach once dropped (freed after the
/// gates are restored).
// INVARIANT: `base` is the start of `1 << order` pages from `lbr_dump_alloc_pages(order)`.
struct Pages {
    base: *mut u8,
    order: u32,
}

// SAFETY: plain memory owned by this value; the only writers are the stop stubs, each on its own
// CPU's part.
unsafe impl Send for Pages {}
// SAFETY: as above; Rust never reads or writes the pages through `&Pages`.
unsafe impl Sync for Pages {}

impl Pages {
    fn new(bytes: usize) -> Result<Self> {
        let order = bytes
            .div_ceil(bindings::PAGE_SIZE)
            .next_power_of_two()
            .trailing_zeros();
        // SAFETY: no preconditions; 0 means failure.
        let base = unsafe { ffi::lbr_dump_alloc_pages(order) } as *mut u8;
        if base.is_null() {
            return Err(ENOMEM);
        }
        Ok(Pages { base, order })
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: from `lbr_dump_alloc_pages(order)` (type invariant), no longer reachable.
        unsafe { bindings::free_pages(self.base as usize, self.order) };
    }
}

impl Armed {
    /// Whether the panic path is all there: both trampolines, and both stop gates prepared.
    fn panic_complete(&self) -> bool {
        // SAFETY: a field of the stubs' configuration, written by `attach_panic_path` while no
        // trampoline was attached; read here under the state lock.
        let (nmi, ipi) = unsafe {
            let c = ptr::addr_of!(ffi::lbr_dump_capture.cfg);
            (
                ptr::addr_of!((*c).nmi_gate).read_volatile(),
                ptr::addr_of!((*c).ipi_gate).read_volatile(),
            )
        };
        self.panic.panic && self.panic.kexec && self.panic.stop && nmi != 0 && ipi != 0
    }

    /// Which of the panic path's trampolines are attached.
    pub(crate) fn panic_path(&self) -> PanicPath {
        self.panic
    }

    /// How recording was switched on.
    pub(crate) fn control(&self) -> Option<&Control> {
        self.saved.as_deref().map(|s| &s.control)
    }
}

/// Whether the system lets lbr-dump arm at all: ftrace gave back the panic path's call sites, and
/// the environment is one whose exception entry lbr-dump knows (glue.c).
fn may_arm() -> Result {
    if DETACH_FAILED.load(Ordering::Relaxed) {
        pr_err!("refusing to arm: ftrace could not detach the panic path's trampolines when disarming (see above); reboot to arm again\n");
        return Err(EBUSY);
    }
    // SAFETY: no preconditions; the result is NULL or a static string.
    let why = unsafe { ffi::lbr_dump_environment_refusal() };
    if !why.is_null() {
        // SAFETY: a static NUL-terminated string from glue.c.
        pr_err!("refusing to arm: {}\n", unsafe { CStr::from_char_ptr(why) });
        return Err(ENODEV);
    }
    Ok(())
}

impl Saved {
    /// The callbacks' state for `nr_cpus` CPUs: how recording is switched on, the armed control
    /// value and the MSRs a capture reads.
    fn new(
        control: Control,
        armed: u64,
        msrs: &[u32],
        nr_cpus: usize,
        ds: Option<(u64, u64)>,
        vlbr: Option<Vlbr>,
    ) -> Result<KBox<Saved>> {
        let mut list = KVec::with_capacity(msrs.len(), GFP_KERNEL)?;
        for &m in msrs {
            list.push(m, GFP_KERNEL)?;
        }
        let mut before = KVec::with_capacity(nr_cpus, GFP_KERNEL)?;
        for _ in 0..nr_cpus {
            before.push(
                [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
                GFP_KERNEL,
            )?;
        }
        Ok(KBox::new(
            Saved {
                control,
                armed,
                msrs: list,
                before,
                ds,
                arming: AtomicBool::new(true),
                vlbr,
            },
            GFP_KERNEL,
        )?)
    }
}

/// Arms lbr-dump for `recorder`. `text_base` is the module's text address (for the dump header).
/// The caller holds the state lock (control.rs).
pub(crate) fn arm(
    recorder: &Recorder,
    options: Options,
    text_base: u64,
) -> Result<KBox<Armed>, Error> {
    let Options {
        rings,
        filter,
        vectors,
        nmi_freeze,
        bts,
    } = options;
    may_arm()?;
    // Before any callback that writes the configuration is registered (perf_takes_ds).
    window::map_config().inspect_err(|e| {
        pr_err!("refusing to arm: cannot map a window onto the stubs' configuration page ({e:?})\n")
    })?;
    // SAFETY: no preconditions.
    if bts.is_some() && unsafe { ffi::lbr_dump_pti_active() } {
        pr_err!("refusing to arm: {}\n", BTS_PTI_REFUSAL);
        return Err(ENODEV);
    }
    // TSX is not enumerated yet: format 4's IN_TX/ABORT (FROM bits 62:61) are not reported, as
    // the kernel reads them as off on parts without TSX (lbr_from_signext_quirk_rd()); the
    // address is bits 60:0 either way. The probe refused unsupported recorders already (`force`
    // skips only its switch check), so this names the reason again for a forced arm.
    let layout = record::layout(recorder, Tsx::Absent).map_err(|why| {
        pr_err!("refusing to arm: {}\n", format_args!("{why}"));
        ENODEV
    })?;
    let control = Control::new(recorder, rings, filter);
    let control = match bts {
        Some(b) => control.with_bts(b.user),
        None => control,
    };
    let (msrs, n) = capture_msrs(recorder, &layout, &control);
    if n == 0 {
        pr_err!("refusing to arm: the recorder has no records to capture\n");
        return Err(ENODEV);
    }
    let nr_cpus = kernel::cpu::nr_cpu_ids() as usize;
    let geometry = Geometry {
        nr_cpus,
        ring: RING,
        nr_values: n,
        bts_pool: bts.map_or(0, |_| BTS_POOL),
        bts_size: bts.map_or(0, |b| b.used()),
    };
    let area = Area::new(geometry, layout).inspect_err(|_| {
        pr_err!(
            "refusing to arm: cannot allocate the snapshot area: {} KiB of contiguous memory for \
             {} CPUs, {} snapshots each of {} bytes\n",
            geometry.area_size() / 1024,
            geometry.nr_cpus,
            geometry.ring,
            geometry.snap_size()
        )
    })?;
    let armed_value = control.armed(rdmsr_on_this_cpu(control.switch.msr)?);
    write_header(
        &area,
        &control,
        armed_value,
        &msrs[..n],
        recorder.last_exception(),
        filter,
        text_base,
        bts,
    );
    let bts_buffers = match bts {
        Some(b) => Some(BtsBuffers::new(&area, &b).inspect_err(|_| {
            pr_err!(
                "refusing to arm: cannot allocate the BTS buffers: {} of {} KiB for each of {} CPUs\n",
                BTS_POOL,
                b.size / 1024,
                nr_cpus
            )
        })?),
        None => None,
    };
    let ds = bts.map(|_| {
        let g = &area.geometry;
        (
            area.at(g.cpu_block(0) + layout::cpu::DS) as u64,
            g.cpu_block_size() as u64,
        )
    });
    let vlbr = match recorder {
        Recorder::IntelLegacy(l) => {
            let g = &area.geometry;
            Some(Vlbr::new(
                l,
                (area.at(g.cpu_block(0)) as u64, g.cpu_block_size() as u64),
            )?)
        }
        _ => None,
    };
    let saved = Saved::new(control, armed_value, &msrs[..n], nr_cpus, ds, vlbr)?;
    let stop_save = Pages::new(nr_cpus * layout::stop::CPU_SIZE).inspect_err(|_| {
        pr_err!("refusing to arm: cannot allocate the stop stubs' save areas\n")
    })?;
    let mut armed = KBox::new(
        Armed {
            panic: PanicPath::default(),
            nmi_handler: false,
            hooks: None,
            hp_state: 0,
            resume: false,
            saved: Some(saved),
            area,
            stop_save: Some(stop_save),
            bts: bts_buffers,
            bts_print: bts.map_or(0, |b| b.print),
            perf_watch: false,
            vlbr_watch: false,
            hooked: vectors,
        },
        GFP_KERNEL,
    )?;
    // From here on, dropping `armed` undoes whatever was done.
    BTS_GONE.store(false, Ordering::SeqCst);
    if bts.is_some() {
        // Before BTS goes on anywhere: perf reserving the debug store from then on is seen, and
        // every CPU that stops for good switches BTS off.
        let mut what: *const kernel::ffi::c_char = ptr::null();
        // SAFETY: `perf_takes_ds` and `stopping` are valid for the module's lifetime;
        // unregistered in `Armed::drop`. Sleeps (ftrace), under the state lock.
        let r = unsafe { ffi::lbr_dump_bts_watch(perf_takes_ds, stopping, &mut what) };
        if r != 0 {
            // SAFETY: glue.c set `what` to a static NUL-terminated string.
            let what = unsafe { CStr::from_char_ptr(what) };
            pr_err!(
                "refusing to arm: bts: cannot trace {what} ({:?}): BTS needs it switched off where perf takes the debug store over (reserve_ds_buffers(), wrmsrq_on_cpu()) and where a CPU stops for good (stop_this_cpu(), crash_nmi_callback())\n",
                Error::from_errno(r)
            );
            return Err(ENODEV);
        }
        armed.perf_watch = true;
    }
    if let Some(v) = armed.saved.as_ref().and_then(|s| s.vlbr.as_ref()) {
        // No CPU is armed yet (`Vlbr::OFF`): `lend` switches nothing on before `arm_cpu` has.
        for cpu in 0..nr_cpus as u32 {
            v.lent(cpu).store(Vlbr::OFF, Ordering::Relaxed);
        }
        // Before recording goes on anywhere: every guest LBR event scheduled from then on is
        // seen (`lend`).
        // SAFETY: `lend` is valid for the module's lifetime; unregistered in `Armed::drop`.
        // Sleeps (ftrace), under the state lock.
        let r = unsafe { ffi::lbr_dump_vlbr_watch(lend) };
        if r == 0 {
            armed.vlbr_watch = true;
        } else if cfg!(CONFIG_KVM_INTEL) {
            pr_err!(
                "refusing to arm: cannot trace intel_pmu_lbr_add()/_del() ({:?}): a KVM guest given the LBR (vLBR) would read and write the host's records\n",
                Error::from_errno(r)
            );
            return Err(ENODEV);
        }
    }
    start_recording(&mut armed)?;
    configure_stubs(&armed, &control, armed_value, &msrs[..n])?;
    // The plain store of the re-arm target above before the check below (x86 may otherwise
    // let the load pass the store): either the check sees `perf_takes_ds`'s flag, or its
    // fetch_and comes after the store.
    core::sync::atomic::fence(Ordering::SeqCst);
    if BTS_GONE.load(Ordering::SeqCst) {
        // Perf reserved the debug store while arming: the re-arm target written just now had
        // TR|BTS.
        rearm_without_bts();
    }
    hook_gates(&mut armed, vectors)?;
    attach_panic_path(&mut armed, nmi_freeze)?;
    if bts.is_some() && !armed.panic_complete() {
        // The panic path is what switches BTS off before kdump's kexec (the panic entry and the
        // stop stubs, asm/stubs.S LBR_BTS_OFF): without all of it, a crash kernel could start
        // with another CPU's TR|BTS on and lbr-dump's debug store unmapped.
        pr_err!("refusing to arm: bts: the panic path is not complete (see above), and it is what switches BTS off before a crash kernel starts\n");
        return Err(ENODEV);
    }
    Ok(armed)
}

/// The panic path: prepares the stop gates, then attaches the panic and stop trampolines. A
/// kernel that refuses them leaves lbr-dump armed for exceptions, with a line that says what is
/// missing.
fn attach_panic_path(armed: &mut Armed, nmi_freeze: bool) -> Result {
    let Some(hooks) = armed.hooks.as_mut() else {
        return Ok(());
    };
    let mut cfg_gates = [(0u64, 0u64); 2];
    let mut nmi_refusal = None;
    for (i, r) in hooks.prepare_stop().into_iter().enumerate() {
        match r {
            // PANIC: none, `i < 2`.
            Ok(g) => cfg_gates[i] = (g.slot as u64, g.hook),
            Err(why) => {
                if i == 0 {
                    nmi_refusal = Some(why);
                }
                let v = [crate::idt::NMI_VECTOR, crate::idt::REBOOT_VECTOR][i];
                pr_warn!(
                    "panic path: vector {v} ({}) will not be captured: {}\n",
                    vector_name(v as u32),
                    why.reason()
                )
            }
        }
    }
    let save = armed.stop_save.as_ref().map_or(0, |p| p.base as u64);
    let (window, (pte, rw, ro)) = hooks.gate_window();
    // SAFETY: the trampolines, the only readers of these fields, are not attached yet (they are
    // attached below and detached before the configuration is written again).
    unsafe {
        ptr::addr_of_mut!(ffi::lbr_dump_live.panic_cpu).write_volatile(0);
        window::write_config(|page| {
            let c = ptr::addr_of_mut!((*page).cfg);
            ptr::addr_of_mut!((*c).stop_save).write_volatile(save);
            ptr::addr_of_mut!((*c).gate_window).write_volatile(window);
            ptr::addr_of_mut!((*c).gate_pte_rw).write_volatile(rw);
            ptr::addr_of_mut!((*c).gate_pte_ro).write_volatile(ro);
            ptr::addr_of_mut!((*c).gate_pte).write_volatile(pte);
            ptr::addr_of_mut!((*c).nmi_gate).write_volatile(cfg_gates[0].0);
            ptr::addr_of_mut!((*c).nmi_hook).write_volatile(cfg_gates[0].1);
            ptr::addr_of_mut!((*c).ipi_gate).write_volatile(cfg_gates[1].0);
            ptr::addr_of_mut!((*c).ipi_hook).write_volatile(cfg_gates[1].1);
        });
    }
    let mut kexec = false;
    // SAFETY: `kexec` is valid for writes; sleeps (ftrace), under the state lock.
    let r = unsafe { ffi::lbr_dump_panic_attach(&mut kexec) };
    if r == 0 {
        armed.panic.panic = true;
        armed.panic.kexec = kexec;
        if !kexec {
            pr_warn!(
                "panic path: cannot attach to crash_kexec(): an oops that goes to kdump is captured by its exception alone\n"
            );
        }
    } else {
        pr_warn!(
            "panic path: cannot attach to panic() and vpanic() ({:?}): panics without an exception are not captured{}\n",
            Error::from_errno(r),
            match r {
                -19 => " (the kernel has no DYNAMIC_FTRACE_WITH_DIRECT_CALLS)",
                -16 => " (another ftrace direct call is attached to one of them)",
                _ => "",
            }
        );
        if nmi_freeze {
            pr_err!("refusing to arm: nmi_freeze needs the panic path\n");
            return Err(ENODEV);
        }
        return Ok(());
    }
    if nmi_freeze {
        freeze_at_nmi(armed, nmi_refusal)?;
    }
    // SAFETY: as above.
    let r = unsafe { ffi::lbr_dump_stop_attach() };
    if r == 0 {
        armed.panic.stop = true;
    } else {
        pr_warn!(
            "panic path: cannot attach to the functions that stop the other CPUs ({:?}): only the panicking CPU is captured\n",
            Error::from_errno(r)
        );
    }
    Ok(())
}

/// `nmi_freeze`: lbr-dump's NMI handler first (it thaws what the watch stub freezes), then the
/// NMI gate to the watch stub (its static call was prepared with the stop gates). A gate that
/// cannot be hooked refuses arming: the parameter asked for it.
fn freeze_at_nmi(armed: &mut Armed, refusal: Option<crate::idt::GateRefusal>) -> Result {
    if let Some(why) = refusal {
        pr_err!(
            "refusing to arm: nmi_freeze: vector 2 (NMI): {}\n",
            why.reason()
        );
        return Err(ENODEV);
    }
    // SAFETY: registers glue.c's NMI handler; undone in `Armed::drop` after the gate is restored.
    let r = unsafe { ffi::lbr_dump_nmi_handler(true) };
    if r != 0 {
        pr_err!(
            "refusing to arm: nmi_freeze: cannot register an NMI handler ({:?})\n",
            Error::from_errno(r)
        );
        return Err(Error::from_errno(r));
    }
    armed.nmi_handler = true;
    let Some(hooks) = armed.hooks.as_mut() else {
        return Err(ENODEV);
    };
    hooks.hook_nmi_watch().map_err(|why| {
        pr_err!(
            "refusing to arm: nmi_freeze: vector 2 (NMI): {}\n",
            why.reason()
        );
        ENODEV
    })
}

/// Detaches the panic path's trampolines. If ftrace cannot (it was shut down after an ftrace
/// bug: the call sites stay patched), glue.c pinned the module, and the trampolines are made
/// inert: the panic is marked claimed (the panic trampoline only freezes and puts the recorder
/// back) and the gate addresses cleared (the stop trampoline writes nothing), since the IDT alias
/// and the save areas go away with the rest of the armed state.
fn detach_panic_path(path: &mut PanicPath) {
    let mut failed = false;
    if path.stop {
        // SAFETY: attached in `attach_panic_path`.
        failed |= unsafe { ffi::lbr_dump_stop_detach() } != 0;
        path.stop = false;
    }
    if path.panic {
        // SAFETY: attached in `attach_panic_path`.
        failed |= unsafe { ffi::lbr_dump_panic_detach() } != 0;
        path.panic = false;
    }
    if failed {
        pr_err!("panic path: ftrace cannot detach lbr-dump's trampolines: they stay, inert, the module stays loaded and cannot be armed again\n");
        DETACH_FAILED.store(true, Ordering::Relaxed);
        // SAFETY: fields of the stubs' configuration; the trampolines read them with plain loads
        // (an aligned 8-byte store is seen whole). No CPU has a block any more (nr_cpus 0: the
        // trampolines write nothing per CPU), the panic counts as claimed (the panic trampoline
        // only freezes and puts the recorder back) and no gate is known (the stop trampoline
        // writes nothing). The exception stubs do not run: their gates are restored next.
        unsafe {
            ptr::addr_of_mut!(ffi::lbr_dump_live.panic_cpu).write_volatile(u64::MAX);
            window::write_config(|page| {
                let c = ptr::addr_of_mut!((*page).cfg);
                ptr::addr_of_mut!((*c).nr_cpus).write_volatile(0);
                ptr::addr_of_mut!((*c).nmi_gate).write_volatile(0);
                ptr::addr_of_mut!((*c).ipi_gate).write_volatile(0);
                ptr::addr_of_mut!((*c).gate_pte).write_volatile(0);
            });
        }
    }
}

/// Set when ftrace could not detach the panic path's trampolines: they stay attached, and
/// arming again would write the configuration they read while they run. Arming is refused.
static DETACH_FAILED: AtomicBool = AtomicBool::new(false);

/// The most MSRs a capture reads: the records, the last exception record's two, the filter MSR.
const MAX_MSRS: usize = MAX_VALUES + 3;
const _: () = assert!(
    MAX_MSRS <= layout::cfg::MSR_MAX,
    "the stubs' configuration page has no room for the MSR list"
);

/// The MSRs each capture reads: the records, then the last exception record's FROM and TO where
/// the recorder has one, then the filter MSR (LBR_SELECT), whose value tells whether another
/// owner changed the filtering (layout.rs).
fn capture_msrs(
    recorder: &Recorder,
    layout: &Encoding,
    control: &Control,
) -> ([u32; MAX_MSRS], usize) {
    let mut msrs = [0u32; MAX_MSRS];
    let mut n = record::capture_list(recorder, layout, &mut msrs);
    let ler = recorder.last_exception();
    let extra = [
        ler.map(|(from, _)| from),
        ler.map(|(_, to)| to),
        control.filter.map(|(m, _)| m),
    ];
    for m in extra.into_iter().flatten() {
        // PANIC: none: capture_list fills at most MAX_VALUES entries, the array has three more.
        msrs[n] = m;
        n += 1;
    }
    (msrs, n)
}

/// Fills the area's self-describing header and MSR list (layout.rs), then its checksum. `ler`:
/// the last exception record's MSRs, where the capture reads them (after the records);
/// `branches`: the branch filter recording uses.
#[allow(
    clippy::too_many_arguments,
    reason = "the header's inputs, each one field or more"
)]
fn write_header(
    area: &Area,
    control: &Control,
    armed_value: u64,
    msrs: &[u32],
    ler: Option<(u32, u32)>,
    branches: Filter,
    text_base: u64,
    bts: Option<BtsOptions>,
) {
    let g = area.geometry;
    let layout = area.layout;
    let (format, flags) = layout.codes();
    area.put(hdr::MAGIC, &layout::MAGIC);
    area.put(hdr::VERSION, &layout::VERSION.to_le_bytes());
    area.put(
        hdr::HEADER_SIZE,
        &(layout::HEADER_SIZE as u32).to_le_bytes(),
    );
    area.put(hdr::AREA_SIZE, &(g.area_size() as u64).to_le_bytes());
    for (off, v) in [
        (hdr::NR_CPUS, g.nr_cpus as u32),
        (hdr::RING, g.ring as u32),
        (hdr::SNAP_SIZE, g.snap_size() as u32),
        (hdr::NR_VALUES, g.nr_values as u32),
        (hdr::FLAVOUR, layout.flavour().code()),
        (hdr::FORMAT, format),
        (hdr::DEPTH, layout.depth() as u32),
        (hdr::LAYOUT_FLAGS, flags),
        (hdr::MSR_LIST, g.msr_list() as u32),
        (hdr::CPU_OFFSET, g.cpu_offset() as u32),
        (hdr::CPU_BLOCK_SIZE, g.cpu_block_size() as u32),
        (hdr::CTL_MSR, control.switch.msr),
        (hdr::FILTER_MSR, control.filter.map_or(0, |(m, _)| m)),
        (hdr::LER_FROM_MSR, ler.map_or(0, |(from, _)| from)),
        (hdr::LER_TO_MSR, ler.map_or(0, |(_, to)| to)),
        (hdr::BRANCH_FILTER, branches as u32),
        (hdr::BTS_POOL, g.bts_pool as u32),
        (
            hdr::BTS_RECORD_SIZE,
            bts.map_or(0, |_| layout::BTS_RECORD_SIZE as u32),
        ),
        (hdr::BTS_TABLE, bts.map_or(0, |_| g.bts_table() as u32)),
        (
            hdr::BTS_RINGS,
            bts.map_or(0, |b| {
                layout::BTS_RING_KERNEL | if b.user { layout::BTS_RING_USER } else { 0 }
            }),
        ),
    ] {
        area.put(off, &v.to_le_bytes());
    }
    area.put(
        hdr::FILTER_ARMED,
        &control.filter.map_or(0, |(_, v)| v).to_le_bytes(),
    );
    area.put(hdr::BTS_BUFFER_SIZE, &(g.bts_size as u64).to_le_bytes());
    area.put(
        hdr::ANCHOR_ADDR,
        &(bindings::_printk as *const () as usize as u64).to_le_bytes(),
    );
    area.put(hdr::ANCHOR_NAME, ANCHOR.to_bytes());
    area.put(hdr::TEXT_BASE, &text_base.to_le_bytes());
    area.put(hdr::MODULE_NAME, b"lbr_dump");
    for (i, m) in msrs.iter().enumerate() {
        area.put(g.msr_list() + 4 * i, &m.to_le_bytes());
    }
    area.put(hdr::CTL_ARMED, &armed_value.to_le_bytes());
    let checksum = area.checksum(0, layout::HEADER_SIZE, hdr::CHECKSUM);
    area.put(hdr::CHECKSUM, &checksum.to_le_bytes());
}

/// Recording on, on every CPU now and later (hotplug), and on the boot CPU at resume.
fn start_recording(armed: &mut Armed) -> Result {
    let saved_ptr = armed.saved.as_deref().map_or(ptr::null(), ptr::from_ref);
    RECORDING.store(saved_ptr.cast_mut(), Ordering::Release);
    // SAFETY: the name is a static string; the callbacks are valid for the module's lifetime
    // and the state is removed in `Armed::drop`.
    let st = unsafe {
        bindings::__cpuhp_setup_state(
            bindings::cpuhp_state_CPUHP_AP_ONLINE_DYN,
            c"lbr_dump:online".as_char_ptr(),
            true,
            Some(cpu_online),
            Some(cpu_offline),
            false,
        )
    };
    if st < 0 {
        pr_err!("refusing to arm: a CPU could not be armed ({st})\n");
        return Err(Error::from_errno(st));
    }
    armed.hp_state = st;
    if let Some(saved) = armed.saved.as_deref() {
        // Every online CPU is armed: a CPU coming online from now on is a hotplug.
        saved.arming.store(false, Ordering::Relaxed);
    }
    // SAFETY: `resume` and `shutdown` are valid for the module's lifetime; unregistered in
    // `Armed::drop`.
    unsafe { ffi::lbr_dump_syscore_register(resume, shutdown, suspend) };
    armed.resume = true;
    Ok(())
}

/// The stubs' configuration (asm/stubs.S reads it through `lbr_dump_capture`), with the MSR list
/// they read, written through the configuration page's window.
fn configure_stubs(armed: &Armed, control: &Control, armed_value: u64, msrs: &[u32]) -> Result {
    if msrs.len() > MAX_MSRS {
        return Err(EINVAL);
    }
    let g = &armed.area.geometry;
    // SAFETY: no preconditions; process context.
    let iret = unsafe { ffi::lbr_dump_iret_address() } as u64;
    if iret == 0 {
        pr_warn!(
            "cannot find the kernel's IRET to user mode (native_irq_return_iret): a user's faulting return is captured like a crash\n"
        );
    }
    let cfg = ffi::CaptureConfig {
        cpu0: armed.area.at(g.cpu_offset()) as u64,
        block_size: g.cpu_block_size() as u64,
        nr_cpus: g.nr_cpus as u64,
        ring_mask: (RING - 1) as u64,
        snap_size: g.snap_size() as u64,
        // The list in the configuration's own page (read-only), not the area's copy.
        // SAFETY: takes the address of a static of asm/stubs.S, reading nothing.
        msrs: unsafe { ptr::addr_of!(ffi::lbr_dump_capture.msrs) } as u64,
        nr_values: msrs.len() as u64,
        ctl_msr: u64::from(control.switch.msr),
        mask: control.freeze_mask(),
        rearm_mask: control.switch.mask,
        bts_pool: g.bts_pool as u64,
        bts_table: if g.bts_pool > 0 {
            armed.area.at(g.bts_table()) as u64
        } else {
            0
        },
        bts_size: g.bts_size as u64,
        armed: armed_value,
        iret,
        // The panic path's fields are set by `attach_panic_path`, after the gates.
        ..Default::default()
    };
    // SAFETY: no gate points at a stub and no trampoline is attached (only `hook_gates` and
    // `attach_panic_path` below do that, and disarming restored every gate, detached the
    // trampolines and synchronized every CPU before), so nothing reads the configuration while
    // it is written; the stores stay within the page (`msrs.len() <= MAX_MSRS <= MSR_MAX`).
    unsafe {
        window::write_config(|page| {
            ptr::addr_of_mut!((*page).cfg).write_volatile(cfg);
            let list = ptr::addr_of_mut!((*page).msrs).cast::<u32>();
            for (i, &m) in msrs.iter().enumerate() {
                list.add(i).write_volatile(m);
            }
        })
    };
    // SAFETY: the stubs' counters (they change them with locked instructions); none runs now.
    unsafe {
        AtomicU64::from_ptr(ptr::addr_of_mut!(ffi::lbr_dump_live.seq)).store(0, Ordering::SeqCst);
        AtomicU64::from_ptr(ptr::addr_of_mut!(ffi::lbr_dump_live.gates_switched))
            .store(0, Ordering::SeqCst);
    }
    Ok(())
}

/// Points the gates of `vectors` at their stubs, skipping (and saying so) vectors the kernel has
/// no gate for; refuses if that leaves no captured vector.
fn hook_gates(armed: &mut Armed, vectors: Vectors) -> Result {
    let mut list = [0; HOOKABLE.len()];
    let n = vectors.list(&mut list);
    let refuse = |(v, why): (usize, crate::idt::GateRefusal)| {
        pr_err!(
            "refusing to arm: vector {v} ({}): {}\n",
            vector_name(v as u32),
            why.reason()
        );
        ENODEV
    };
    let (mut hooks, plan) = Hooks::plan(&list[..n]).map_err(refuse)?;
    let mut hooked = vectors;
    for &v in plan.skipped.iter() {
        pr_info!(
            "skipping {v}({}): {}\n",
            vector_name(v as u32),
            crate::idt::GateRefusal::Absent.reason()
        );
        hooked = hooked.without(v);
    }
    let Some(hooked) = Vectors::new(hooked.0) else {
        pr_err!("refusing to arm: none of the chosen vectors has a gate to hook\n");
        return Err(ENODEV);
    };
    let r = hooks.hook(&plan);
    armed.hooks = Some(hooks);
    r.map_err(refuse)?;
    armed.hooked = hooked;
    Ok(())
}

fn rdmsr_on_this_cpu(m: u32) -> Result<u64> {
    read_msr(CpuId::current(), m).map_err(|e| {
        pr_err!("refusing to arm: {}\n", format_args!("{e}"));
        ENODEV
    })
}

impl Drop for Armed {
    fn drop(&mut self) {
        // The trampolines first (ftrace waits until no CPU is inside them), then the gates
        // (and wait for every CPU to leave the stubs), then recording, then memory.
        detach_panic_path(&mut self.panic);
        self.hooks = None;
        if self.nmi_handler {
            // SAFETY: registered in `freeze_at_nmi`; the NMI gate is the kernel's again, and
            // unregistering waits for running handlers.
            unsafe { ffi::lbr_dump_nmi_handler(false) };
            self.nmi_handler = false;
        }
        if self.resume {
            // SAFETY: registered in `start_recording`.
            unsafe { ffi::lbr_dump_syscore_unregister() };
        }
        if self.hp_state > 0 {
            // SAFETY: removes the dynamic state registered in `start_recording`, running
            // `cpu_offline` on every online CPU.
            unsafe { bindings::__cpuhp_remove_state(self.hp_state as bindings::cpuhp_state, true) };
        }
        if self.perf_watch {
            // BTS is off on every CPU now (`cpu_offline`).
            // SAFETY: registered in `arm`; waits for running callbacks.
            unsafe { ffi::lbr_dump_bts_unwatch() };
            self.perf_watch = false;
        }
        if self.vlbr_watch {
            // Recording is off on every CPU now (`cpu_offline`), which no guest event leaving
            // switches back on (`Vlbr::OFF`).
            // SAFETY: registered in `arm`; waits for running callbacks.
            unsafe { ffi::lbr_dump_vlbr_unwatch() };
            self.vlbr_watch = false;
        }
        RECORDING.store(ptr::null_mut(), Ordering::Release);
        self.saved = None;
        self.stop_save = None;
        // Recording (BTS included) is off on every CPU and no stub runs: the buffers can go.
        self.bts = None;
    }
}
