// SPDX-License-Identifier: GPL-2.0

//! Arming lbr-dump: the snapshot area, the stubs' configuration, recording on every CPU, the
//! hooked gates, the panic path and the printers, in that order; disarming undoes them in
//! reverse.
//!
//! The panic path (Documentation/lbr-dump/design.rst "What a panic shows"): the panic trampolines (asm/stubs.S) are attached
//! to the entry of panic(), vpanic() and crash_kexec() as ftrace direct calls and capture the
//! panicking CPU (a crash_kexec() that returns gives its claim back at panic_reset(), where
//! another trampoline is attached); the stop trampoline, at the entry of the functions that stop
//! the other CPUs, switches the NMI and REBOOT_VECTOR gates to the stop stubs, whose static calls and gate values
//! are prepared here (text patching cannot happen in a panic). Those gates are the kernel's until
//! a panic stops the other CPUs: no cost for the NMIs and IPIs of a running system.
//!
//! Re-arm policy (Documentation/lbr-dump/design.rst "Recording"): recording is switched on by a CPU-hotplug callback on
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
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use kernel::{
    bindings,
    ffi::{c_int, c_uint, c_void},
    prelude::*,
};

use kernel::cpu::CpuId;

use crate::area::{AreaHeader, BtsHeader, Memory, MemoryMut, SnapshotView};
use crate::entry::{self, ArmRefusal, Entry};
use crate::facility::{debugctl, msr, Filter, Recorder};
use crate::ffi;
use crate::layout::{self, Geometry};
use crate::live::{Live, Published};
use crate::plan::{ArmValues, BtsOptions, Options, Vectors, BTS_POOL};
use crate::probe::{read_msr, write_msr, write_msr_here};
use crate::record::{self, Encoding, Tsx, MAX_VALUES};
use crate::window;

use crate::report::{vector_name, VECTORS as HOOKABLE};

mod area;
mod bts;
mod cpu;
mod debug;
mod panic;
mod report;
mod stubcfg;
mod warn;

pub(crate) use self::{area::*, debug::rearms, panic::*};
use self::{bts::*, cpu::*, debug::*, stubcfg::*};

/// Snapshots kept per CPU (a power of two).
const RING: usize = 4;
/// Exported symbol whose runtime address the area records (the decoder's KASLR anchor).
const ANCHOR: &str = "_printk";

/// What the hotplug and resume callbacks need (they get only a CPU number, or nothing).
struct Recording {
    values: ArmValues,
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
    /// (address of CPU 0's block in the snapshot area, bytes between CPU blocks): each block's
    /// `layout::cpu::LENT` is [`Vlbr::OFF`] where lbr-dump is not armed (not yet, or not any
    /// more: nothing of lbr-dump's re-arms there), else the count of KVM guest LBR events
    /// scheduled on that CPU (Intel legacy LBR, [`lend`]; 0 for every other recorder); the
    /// stubs read it.
    blocks: (u64, u64),
    /// Intel legacy LBR: what [`lend`] needs to keep KVM guests and lbr-dump apart.
    vlbr: Option<Vlbr>,
}

/// Lending the LBR to KVM guests (Intel legacy LBR, the one kind KVM gives guests: see
/// [`lend`]).
struct Vlbr {
    /// The record MSRs (FROM, TO, INFO of every entry), zeroed when a guest gets the LBR and
    /// when it gives it back.
    records: KVec<u32>,
}

/// Everything that exists while lbr-dump is armed. Dropping it disarms, in reverse order.
pub(crate) struct Armed {
    // The teardown: the trampolines first (ftrace waits until no CPU is inside them), then the
    // gates (and every CPU out of the stubs), both in `Armed::drop`; then the fields' drop
    // order: the callbacks, recording off on every CPU (the hotplug state's removal), and the
    // memory last (kept if a CPU still enters at lbr-dump's FRED page: `StubMemory`).
    /// The panic path's trampolines (detached first when disarming).
    panic: Trampolines,
    /// The hooked gates.
    entry: Option<Entry>,
    /// The #DB notifier and breakpoint callback that re-arm (they read the stubs'
    /// configuration and the area; gone before recording goes off).
    debug: Option<DebugWatch>,
    /// glue.c's NMI handler (`nmi_freeze`), unregistered once the NMI gate is the kernel's.
    nmi_handler: Option<NmiHandler>,
    /// The resume, suspend and shutdown callbacks.
    syscore: Option<Syscore>,
    /// The CPU-hotplug state: removing it runs `cpu_offline` on every online CPU, which
    /// switches recording off.
    hotplug: Option<Hotplug>,
    /// glue.c's BTS callbacks (perf's reserve_ds_buffers(), CPUs stopping).
    perf_watch: Option<PerfWatch>,
    /// glue.c's callbacks at perf's LBR event scheduling (Intel legacy LBR: a KVM guest may be
    /// lent the LBR, [`lend`]).
    vlbr_watch: Option<VlbrWatch>,
    /// The callbacks' state, published to them (every callback above is gone when it drops).
    recording: Published<Recording>,
    /// The stop stubs' register save areas (layout.rs `stop`), not part of the dump.
    stop_save: StubMemory<Pages>,
    /// The BTS buffers (the area's table describes them), held for their drop: freed after
    /// recording is off.
    _bts: StubMemory<Option<BtsBuffers>>,
    pub(crate) area: StubMemory<Area>,
    /// BTS records an oops prints (`bts_print`; 0 without BTS).
    pub(crate) bts_print: u32,
    /// The vectors whose gates point at stubs.
    pub(crate) hooked: Vectors,
}

impl Drop for Armed {
    fn drop(&mut self) {
        // The trampolines, then the entry (the fields' comment above); whether the entry leaves
        // a CPU at lbr-dump's FRED page decides what the rest may free.
        detach_panic_path(&mut self.panic);
        self.entry = None;
        if crate::fred::kept() {
            // A CPU still enters at lbr-dump's FRED page, and reads the configuration at each
            // kernel-mode event: nothing is captured or re-armed there any more, and the memory
            // the configuration names stays (`StubMemory`) for a CPU already past its loads.
            make_fred_page_inert();
        }
    }
}

impl Armed {
    /// Whether the panic path is all there: both trampolines, and both stop gates prepared.
    fn panic_complete(&self) -> bool {
        let p = self.panic.attached;
        p.panic && p.kexec && p.stop && self.entry.as_ref().is_some_and(Entry::stops_captured)
    }

    /// Which of the panic path's trampolines are attached.
    pub(crate) fn panic_path(&self) -> PanicPath {
        self.panic.attached
    }

    /// How recording was switched on.
    pub(crate) fn arm_values(&self) -> &ArmValues {
        &self.recording.values
    }
}

/// Whether a failed teardown left lbr-dump's code in use until reboot (trampolines ftrace could
/// not detach, a CPU that still enters at the FRED page): the module must stay loaded, even if
/// its init fails.
pub(crate) fn left_in_use() -> bool {
    DETACH_FAILED.load(Ordering::Relaxed) || crate::fred::kept()
}

/// Whether the system lets lbr-dump arm at all: ftrace gave back the panic path's call sites, and
/// the environment is one whose exception entry lbr-dump knows (glue.c).
fn may_arm() -> Result {
    if DETACH_FAILED.load(Ordering::Relaxed) {
        pr_err!("refusing to arm: ftrace could not detach the panic path's trampolines when disarming (see above); reboot to arm again\n");
        return Err(EBUSY);
    }
    if crate::fred::kept() {
        pr_err!("refusing to arm: FRED: a CPU still enters at lbr-dump's page, which reads the stubs' configuration, since disarming could not put it back (see above); reboot to arm again\n");
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

impl Recording {
    /// The callbacks' state for `nr_cpus` CPUs: how recording is switched on, the armed control
    /// value and the MSRs a capture reads.
    fn new(
        values: ArmValues,
        armed: u64,
        msrs: &[u32],
        nr_cpus: usize,
        ds: Option<(u64, u64)>,
        blocks: (u64, u64),
        vlbr: Option<Vlbr>,
    ) -> Result<KBox<Recording>> {
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
            Recording {
                values,
                armed,
                msrs: list,
                before,
                ds,
                arming: AtomicBool::new(true),
                blocks,
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
    let layout = record::encoding(recorder, Tsx::Absent).map_err(|why| {
        pr_err!("refusing to arm: {}\n", format_args!("{why}"));
        ENODEV
    })?;
    let values = ArmValues::new(recorder, rings, filter);
    let values = match bts {
        Some(b) => values.with_bts(b.user),
        None => values,
    };
    let (msrs, n) = capture_msrs(recorder, &layout, &values);
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
    let armed_value = values.armed(rdmsr_on_this_cpu(values.switch.msr)?);
    let header = header(
        geometry,
        layout,
        &values,
        armed_value,
        recorder.last_exception(),
        filter,
        text_base,
        bts,
    );
    let area = Area::new(header, &msrs[..n]).inspect_err(|_| {
        pr_err!(
            "refusing to arm: cannot allocate the snapshot area: {} KiB of contiguous memory for \
             {} CPUs, {} snapshots each of {} bytes\n",
            geometry.area_size() / 1024,
            geometry.nr_cpus,
            geometry.ring,
            geometry.snap_size()
        )
    })?;
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
        let g = &area.geometry();
        (
            area.at(g.cpu_block(0) + layout::cpu::DS) as u64,
            g.cpu_block_size() as u64,
        )
    });
    let blocks = {
        let g = &area.geometry();
        (area.at(g.cpu_block(0)) as u64, g.cpu_block_size() as u64)
    };
    let vlbr = match recorder {
        Recorder::IntelLegacy(l) => Some(Vlbr::new(l)?),
        _ => None,
    };
    let recording = Recording::new(values, armed_value, &msrs[..n], nr_cpus, ds, blocks, vlbr)?;
    let stop_save = Pages::new(nr_cpus * layout::stop::CPU_SIZE).inspect_err(|_| {
        pr_err!("refusing to arm: cannot allocate the stop stubs' save areas\n")
    })?;
    let mut armed = KBox::new(
        Armed {
            panic: Trampolines::default(),
            entry: None,
            debug: None,
            nmi_handler: None,
            syscore: None,
            hotplug: None,
            perf_watch: None,
            vlbr_watch: None,
            // SAFETY: the callbacks that read `RECORDING` are registered by the guards above,
            // which drop first.
            recording: unsafe { Published::new(&RECORDING, recording) },
            stop_save: StubMemory::new(stop_save),
            _bts: StubMemory::new(bts_buffers),
            area: StubMemory::new(area),
            bts_print: bts.map_or(0, |b| b.print),
            hooked: vectors,
        },
        GFP_KERNEL,
    )?;
    // From here on, dropping `armed` undoes whatever was done.
    // The report functions' kprobes and filter before recording goes on: placing a kprobe runs
    // tens of thousands of branches (its symbol's lookup, text patching), which with BTS on are
    // each a record in memory (an arming with `default` took 26 s instead of 17 on the emulator
    // with 2 CPUs and BTS, 2.4 s without). An int3 meanwhile goes to the kernel's handler: gate 3
    // is hooked only below, after the #BP stub's table is written.
    let reports = report::prepare_reports(&mut armed)?;
    BTS_GONE.store(false, Ordering::SeqCst);
    if bts.is_some() {
        // Before BTS goes on anywhere: perf reserving the debug store from then on is seen, and
        // every CPU that stops for good switches BTS off.
        armed.perf_watch = Some(PerfWatch::register()?);
    }
    // No CPU is armed yet (`Vlbr::OFF`): nothing re-arms and `lend` switches nothing on before
    // `arm_cpu` has.
    for cpu in 0..nr_cpus as u32 {
        armed
            .recording
            .lent(cpu)
            .store(Vlbr::OFF, Ordering::Relaxed);
    }
    if armed.recording.vlbr.is_some() {
        // Before recording goes on anywhere: every guest LBR event scheduled from then on is
        // seen (`lend`).
        armed.vlbr_watch = VlbrWatch::register()?;
    }
    start_recording(&mut armed)?;
    configure_stubs(&armed, &values, armed_value, &msrs[..n])?;
    reports.configure_ips();
    // The plain store of the re-arm target above before the check below (x86 may otherwise
    // let the load pass the store): either the check sees `perf_takes_ds`'s flag, or its
    // fetch_and comes after the store.
    core::sync::atomic::fence(Ordering::SeqCst);
    if BTS_GONE.load(Ordering::SeqCst) {
        // Perf reserved the debug store while arming: the re-arm target written just now had
        // TR|BTS.
        rearm_without_bts();
    }
    // Once the stubs' configuration is written: the re-arm reads it.
    armed.debug = Some(DebugWatch::register()?);
    hook_gates(&mut armed, vectors, reports.needs_int3())?;
    attach_panic_path(&mut armed, nmi_freeze)?;
    report::attach_reports(reports)?;
    if bts.is_some() && !armed.panic_complete() {
        // The panic path is what switches BTS off before kdump's kexec (the panic entry and the
        // stop stubs, asm/stubs.S LBR_BTS_OFF): without all of it, a crash kernel could start
        // with another CPU's TR|BTS on and lbr-dump's debug store unmapped.
        pr_err!("refusing to arm: bts: the panic path is not complete (see above): it switches BTS off for kdump\n");
        return Err(ENODEV);
    }
    Ok(armed)
}

/// The #BP vector, hooked only for the report functions' int3s.
const BP: usize = 3;

/// Points the gates of `vectors` (and #BP's, if `int3`) at their stubs, skipping (and saying
/// so) vectors the kernel has no gate for; refuses if that leaves no captured vector.
fn hook_gates(armed: &mut Armed, vectors: Vectors, int3: bool) -> Result {
    let mut chosen = [0; HOOKABLE.len()];
    let mut n = vectors.list(&mut chosen);
    let mut list = [0; HOOKABLE.len() + 1];
    for (to, &v) in list.iter_mut().zip(chosen.iter()) {
        *to = v;
    }
    if int3 {
        // The #BP stub, for the report kprobes' int3s (src/capture/report.rs); not one of the
        // chosen vectors (`vectors`, the `hooked` set), which it does not count in.
        list[n] = BP;
        n += 1;
    }
    let mask = |l: &[usize]| {
        l.iter()
            .filter(|&&v| v != BP)
            .fold(0u32, |m, &v| m | 1 << v)
    };
    if crate::fred::active() {
        // Before any CPU's IA32_FRED_CONFIG points at the page: the vectors it captures.
        configure_fred(u64::from(mask(&list[..n])));
    }
    let (entry, list) =
        Entry::arm(&list[..n], |l| Vectors::new(mask(l)).is_some()).map_err(|e| {
            match e {
                ArmRefusal::Vector(v, why) => {
                    let name = if v == BP {
                        "#BP, for the report functions' int3s"
                    } else {
                        vector_name(v as u32)
                    };
                    pr_err!("refusing to arm: vector {v} ({name}): {}\n", why.reason())
                }
                ArmRefusal::NotAccepted => {
                    pr_err!("refusing to arm: none of the chosen vectors has a gate to hook\n")
                }
                ArmRefusal::Fred(why) => pr_err!("refusing to arm: {}\n", why.reason()),
            }
            ENODEV
        })?;
    armed.entry = Some(entry);
    // A set `Vectors::new` accepted (the entry's `accept` above).
    armed.hooked = Vectors::new(mask(&list)).unwrap_or(vectors);
    Ok(())
}

fn rdmsr_on_this_cpu(m: u32) -> Result<u64> {
    read_msr(CpuId::current(), m).map_err(|e| {
        pr_err!("refusing to arm: {}\n", format_args!("{e}"));
        ENODEV
    })
}
