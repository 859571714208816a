// SPDX-License-Identifier: GPL-2.0

//! Recording on each CPU: the MSR checks and writes of arming, CPU hotplug (online, offline),
//! syscore suspend and resume, and a KVM guest's loan of the LBR (vLBR).

use super::*;

/// `wrmsr` on this CPU, for the resume callback (IRQs off: the `_on_cpu` accessors would IPI).
/// Only for the recorder MSRs that were written safely on every CPU when arming.
pub(super) fn wrmsr_here(msr: u32, v: u64) {
    // SAFETY: writes a branch-recorder MSR that arming wrote without fault on this CPU model; it
    // changes only what is recorded, no memory the compiler knows of.
    unsafe {
        core::arch::asm!("wrmsr", in("ecx") msr, in("eax") v as u32, in("edx") (v >> 32) as u32,
                         options(nostack, nomem))
    };
}

/// `rdmsr` on this CPU, for the resume and shutdown callbacks (IRQs off). Only for MSRs arming
/// read safely on every CPU.
pub(super) fn rdmsr_here(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reads an MSR that arming read without fault on this CPU model; no memory access.
    unsafe {
        core::arch::asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nostack, nomem))
    };
    u64::from(hi) << 32 | u64::from(lo)
}

impl Vlbr {
    /// `layout::cpu::LENT` of a CPU that is not armed, whatever the recorder: not yet (every
    /// CPU's, before the callbacks are registered), or not any more (`cpu_offline`): nothing
    /// re-arms there, and there is nothing to give back. Arming a CPU sets 0
    /// (`Recording::armed_here`).
    pub(super) const OFF: u32 = u32::MAX;

    pub(super) fn new(l: &crate::facility::LegacyLbr) -> Result<Self> {
        let mut records = KVec::with_capacity(3 * l.depth as usize, GFP_KERNEL)?;
        for i in 0..u32::from(l.depth) {
            records.push(l.from + i, GFP_KERNEL)?;
            records.push(l.to + i, GFP_KERNEL)?;
            if let Some(info) = l.info {
                records.push(info + i, GFP_KERNEL)?;
            }
        }
        Ok(Vlbr { records })
    }

    pub(super) fn wipe(&self) {
        for &m in self.records.iter() {
            wrmsr_here(m, 0);
        }
    }
}

impl Recording {
    /// `layout::cpu::LENT` of `cpu`, in its block: [`Vlbr::OFF`], or the guest LBR event count.
    pub(super) fn lent(&self, cpu: u32) -> &AtomicU32 {
        let (cpu0, stride) = self.blocks;
        let addr = cpu0 + stride * u64::from(cpu) + layout::cpu::LENT as u64;
        // SAFETY: `cpu` is below the area's CPU count (the callers' CPU numbers come from
        // `CpuId`, below nr_cpu_ids, for which the area has blocks); an aligned u32 of the area,
        // which lives as long as the `Recording` that holds this; the stubs only read it.
        unsafe { AtomicU32::from_ptr(addr as *mut u32) }
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
pub(super) unsafe extern "C" fn lend(lent: bool) {
    let Some(s) = recording() else { return };
    let Some(v) = s.vlbr.as_ref() else { return };
    let cpu = CpuId::current().as_u32();
    if cpu as usize >= s.before.len() {
        return;
    }
    let count = s.lent(cpu);
    let c = &s.values;
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

impl Recording {
    /// This CPU is armed: from now on the stubs and the #DB callbacks re-arm here, and [`lend`]
    /// gives its LBR to a KVM guest and back (interrupts off, right after the control MSR's
    /// armed write).
    pub(super) fn armed_here(&self) {
        let cpu = CpuId::current().as_u32();
        if (cpu as usize) < self.before.len() {
            self.lent(cpu).store(0, Ordering::Relaxed);
        }
    }

    /// The debug store of `cpu` (with BTS).
    pub(super) fn ds(&self, cpu: u32) -> Option<u64> {
        self.ds.map(|(cpu0, stride)| cpu0 + stride * u64::from(cpu))
    }
}

/// Why a CPU could not be armed.
pub(super) enum ArmCpuError {
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
                "IA32_DS_AREA is {v:#x}: another owner has the debug store (perf's: boot with \
                 nmi_watchdog=0, or load without bts)"
            ),
            Self::Call(e) => write!(
                f,
                "cannot run BTS's arming on this CPU: smp_call_function_single() gave {e}"
            ),
        }
    }
}

/// The recording state the callbacks use: published while `Armed` lives, and its callbacks (the
/// hotplug state, the syscore callbacks, glue.c's BTS and LBR watches) are unregistered first.
pub(super) static RECORDING: Live<Recording> = Live::new();

/// The recording state, if armed. Called only from the callbacks `Armed`'s guards register
/// (and from arming, under the state lock, while `Armed` lives).
pub(super) fn recording() -> Option<&'static Recording> {
    // SAFETY: the callers are the callbacks unregistered before the `Recording` is freed
    // (`Armed`'s field order), and arming, which holds the `Armed` that owns it.
    unsafe { RECORDING.get() }
}

/// CPU coming online (and every online CPU at arming; runs on that CPU): check every MSR the
/// captures will touch, save the values, switch recording on. An MSR that faults stops the CPU's
/// arming with an error (arming then fails and says which).
///
/// # Safety
///
/// Called only by the CPU hotplug core, for the state lbr-dump registered, on `cpu`.
pub(super) unsafe extern "C" fn cpu_online(cpu: c_uint) -> i32 {
    let Some(s) = recording() else { return 0 };
    match arm_cpu(s, CpuId::from_u32(cpu)) {
        Ok(()) => 0,
        Err(e) => {
            pr_err!("CPU {cpu}: {}: not arming\n", format_args!("{e}"));
            EIO.to_errno()
        }
    }
}

pub(super) fn arm_cpu(s: &Recording, cpu: Option<CpuId>) -> Result<(), ArmCpuError> {
    let Some(cpu) = cpu else { return Ok(()) };
    let Some(slot) = s.before.get(cpu.as_u32() as usize) else {
        return Ok(());
    };
    for &m in s.msrs.iter() {
        read_msr(cpu, m)?;
    }
    let c = &s.values;
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
pub(super) struct LbrOn<'a> {
    pub(super) s: &'a Recording,
    pub(super) value: u64,
    pub(super) r: Option<Result<(), crate::probe::MsrError>>,
}

/// Writes the control value `value` on `cpu`, and marks it armed for [`lend`] in the same
/// interrupts-off step there.
pub(super) fn lbr_on(s: &Recording, cpu: CpuId, value: u64) -> Result<(), ArmCpuError> {
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
pub(super) unsafe extern "C" fn lbr_on_here(info: *mut c_void) {
    // SAFETY: `lbr_on` passes a live `LbrOn` and waits for this call; nothing else uses it.
    let a = unsafe { &mut *info.cast::<LbrOn<'_>>() };
    let r = write_msr_here(a.s.values.switch.msr, a.value);
    if r.is_ok() {
        a.s.armed_here();
    }
    a.r = Some(r);
}

/// What [`arm_here`] found on the CPU it armed.
#[derive(Clone, Copy)]
pub(super) enum BtsArming {
    /// lbr-dump's debug store in place, the recorder switched on with TR|BTS.
    On,
    /// Perf had reserved the debug store (`BTS_GONE`): recording switched on without TR|BTS,
    /// IA32_DS_AREA left alone.
    Gone,
    /// IA32_DS_AREA was another owner's: nothing written.
    Taken(u64),
}

/// [`arm_here`]'s inputs and result.
pub(super) struct ArmHere<'a> {
    pub(super) s: &'a Recording,
    /// This CPU's debug store.
    pub(super) ds: u64,
    /// The control value to write (with TR|BTS).
    pub(super) armed: u64,
    /// What it did; an MSR write that faulted leaves both MSRs as they were.
    pub(super) found: Option<Result<BtsArming, crate::probe::MsrError>>,
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
pub(super) unsafe extern "C" fn arm_here(info: *mut c_void) {
    // SAFETY: `arm_cpu` passes a live `ArmHere` and waits for this call; nothing else uses it
    // meanwhile.
    let a = unsafe { &mut *info.cast::<ArmHere<'_>>() };
    let ctl = a.s.values.switch.msr;
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
pub(super) unsafe extern "C" fn cpu_offline(cpu: c_uint) -> i32 {
    let Some(s) = recording() else { return 0 };
    let Some(id) = CpuId::from_u32(cpu) else {
        return 0;
    };
    let Some(slot) = s.before.get(cpu as usize) else {
        return 0;
    };
    // First: nothing re-arms here from now on (the stubs, the #DB callbacks: a #DB on this CPU
    // after the value before arming is back, as a task's single-step until the CPU is gone,
    // would switch recording on again for good), and a guest LBR event scheduled here must not
    // switch recording back on when it leaves (`lend`).
    s.lent(cpu).store(Vlbr::OFF, Ordering::Relaxed);
    let c = &s.values;
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

/// Suspend (syscore: the boot CPU alone, interrupts off; also kexec with preserve_context): BTS
/// off; resume switches it back on.
///
/// # Safety
///
/// Called only by the syscore suspend callback glue.c registers, while it is registered.
pub(super) unsafe extern "C" fn suspend() {
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
pub(super) unsafe extern "C" fn resume() {
    let Some(s) = recording() else { return };
    // FRED: the kernel wrote its entry page back into IA32_FRED_CONFIG while restoring the CPU.
    if crate::fred::active() {
        crate::fred::resume_this_cpu();
    }
    if let Some((m, v)) = s.values.filter {
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
    wrmsr_here(s.values.switch.msr, armed);
}

/// Recording on, on every CPU now and later (hotplug), and on the boot CPU at resume.
pub(super) fn start_recording(armed: &mut Armed) -> Result {
    armed.hotplug = Some(Hotplug::setup()?);
    // Every online CPU is armed: a CPU coming online from now on is a hotplug.
    armed.recording.arming.store(false, Ordering::Relaxed);
    armed.syscore = Some(Syscore::register());
    Ok(())
}

/// The CPU-hotplug state whose callbacks arm every CPU that comes online ([`cpu_online`]) and
/// disarm every one that goes ([`cpu_offline`]); removed on drop, which runs `cpu_offline` on
/// every online CPU.
pub(super) struct Hotplug(bindings::cpuhp_state);

impl Hotplug {
    /// Registers the state; `cpu_online` runs on every online CPU before this returns.
    fn setup() -> Result<Self> {
        // SAFETY: the name is a static string; the callbacks are valid for the module's
        // lifetime and read `RECORDING`, published before; removed on drop.
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
        Ok(Hotplug(st as bindings::cpuhp_state))
    }
}

impl Drop for Hotplug {
    fn drop(&mut self) {
        // SAFETY: the dynamic state `setup` registered; runs `cpu_offline` on every online CPU
        // and waits for running callbacks.
        unsafe { bindings::__cpuhp_remove_state(self.0, true) };
    }
}

/// glue.c's syscore callbacks ([`resume`], [`shutdown`], [`suspend`]); unregistered on drop.
pub(super) struct Syscore(());

impl Syscore {
    fn register() -> Self {
        // SAFETY: the callbacks are valid for the module's lifetime and read `RECORDING`,
        // published before; unregistered on drop.
        unsafe { ffi::lbr_dump_syscore_register(resume, shutdown, suspend) };
        Syscore(())
    }
}

impl Drop for Syscore {
    fn drop(&mut self) {
        // SAFETY: registered in `register`.
        unsafe { ffi::lbr_dump_syscore_unregister() };
    }
}

/// glue.c's ftrace callbacks at perf's LBR event scheduling ([`lend`]); unregistered on drop,
/// once recording is off on every CPU (`cpu_offline`), which no guest event leaving switches
/// back on (`Vlbr::OFF`).
pub(super) struct VlbrWatch(());

impl VlbrWatch {
    /// Registers the callbacks. Without KVM_INTEL no guest is lent the LBR: a kernel that
    /// refuses them is then no reason to refuse arming (`None`).
    pub(super) fn register() -> Result<Option<Self>> {
        // SAFETY: `lend` is valid for the module's lifetime and reads `RECORDING`, published
        // before; unregistered on drop. Sleeps (ftrace), under the state lock.
        let r = unsafe { ffi::lbr_dump_vlbr_watch(lend) };
        if r == 0 {
            Ok(Some(VlbrWatch(())))
        } else if cfg!(CONFIG_KVM_INTEL) {
            pr_err!(
                "refusing to arm: cannot trace intel_pmu_lbr_add()/_del() ({:?}): a KVM guest would see host records\n",
                Error::from_errno(r)
            );
            Err(ENODEV)
        } else {
            Ok(None)
        }
    }
}

impl Drop for VlbrWatch {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; waits for running callbacks.
        unsafe { ffi::lbr_dump_vlbr_unwatch() };
    }
}
