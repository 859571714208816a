// SPDX-License-Identifier: GPL-2.0

//! Branch Trace Store ownership: lbr-dump's debug store against perf's (perf takes it for good),
//! BTS off where CPUs stop, at shutdown and at suspend, and the per-CPU buffer pools.

use super::*;

/// Set by [`shutdown`] and [`perf_takes_ds`], cleared when arming: BTS is off on every CPU for
/// good (a CPU coming online again, or a resume, leaves it off).
pub(super) static BTS_GONE: AtomicBool = AtomicBool::new(false);

/// glue.c's BTS callbacks ([`perf_takes_ds`] at perf's reserve_ds_buffers(), [`stopping`] where
/// CPUs stop for good); unregistered on drop, once BTS is off on every CPU (`cpu_offline`).
pub(super) struct PerfWatch(());

impl PerfWatch {
    /// Registers the callbacks: perf reserving the debug store from then on is seen, and every
    /// CPU that stops for good switches BTS off.
    pub(super) fn register() -> Result<Self> {
        let mut what: *const kernel::ffi::c_char = ptr::null();
        // SAFETY: `perf_takes_ds` and `stopping` are valid for the module's lifetime and read
        // `RECORDING`, published before; unregistered on drop. Sleeps (ftrace), under the state
        // lock.
        let r = unsafe { ffi::lbr_dump_bts_watch(perf_takes_ds, stopping, &mut what) };
        if r != 0 {
            // SAFETY: glue.c set `what` to a static NUL-terminated string.
            let what = unsafe { CStr::from_char_ptr(what) };
            pr_err!(
                "refusing to arm: bts: cannot trace {what} ({:?}), where BTS must be switched off\n",
                Error::from_errno(r)
            );
            return Err(ENODEV);
        }
        Ok(PerfWatch(()))
    }
}

impl Drop for PerfWatch {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; waits for running callbacks.
        unsafe { ffi::lbr_dump_bts_unwatch() };
    }
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
pub(super) unsafe extern "C" fn perf_takes_ds() {
    if BTS_GONE.swap(true, Ordering::SeqCst) {
        return;
    }
    rearm_without_bts();
    if recording().is_some() {
        pr_warn!("perf is reserving the debug store: BTS is switched off on every CPU for good; the LBR records on\n");
        // SAFETY: `bts_off_ipi` is a valid IPI callback that ignores its argument; process
        // context, interrupts on. Waits: perf writes IA32_DS_AREA only after this returns.
        unsafe { ffi::lbr_dump_on_each_cpu(bts_off_ipi, ptr::null_mut(), true) };
    }
}

/// BTS off on this CPU and its debug store given back (interrupts off: an IPI callback, a
/// syscore callback, or `cpu_offline`'s smp_call_function_single()).
pub(super) fn bts_off_here(s: &Recording) {
    let cpu = CpuId::current().as_u32();
    let Some(ds) = s.ds(cpu) else { return };
    let c = &s.values;
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
pub(super) unsafe extern "C" fn stopping() {
    if let Some(s) = recording().filter(|s| s.ds.is_some()) {
        let m = s.values.switch.msr;
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
pub(super) unsafe extern "C" fn bts_off_ipi(_info: *mut c_void) {
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
pub(super) unsafe extern "C" fn shutdown() {
    if recording().is_some_and(|s| s.ds.is_some()) {
        BTS_GONE.store(true, Ordering::SeqCst);
        rearm_without_bts();
        // SAFETY: `bts_off_ipi` is a valid IPI callback that ignores its argument; process
        // context, interrupts on. on_each_cpu() runs it on this CPU before it returns.
        unsafe { ffi::lbr_dump_on_each_cpu(bts_off_ipi, ptr::null_mut(), false) };
    }
}

/// Why BTS is refused under page-table isolation (Documentation/admin-guide/lbr-dump.rst): the
/// processor writes each BTS record through the page tables in use at the branch, and the
/// kernel's entry and exit code takes branches at CPL 0 under the user CR3, where lbr-dump's
/// buffers are not mapped (perf keeps its BTS buffers in the cpu_entry_area for this reason);
/// bts_user=0 does not lift this, since BTS_OFF_USR skips only branches at CPL > 0 (SDM vol. 3B,
/// "CPL-Qualified Branch Trace Store").
pub(super) const BTS_PTI_REFUSAL: &str =
    "bts: page-table isolation is active (records written under the user CR3; bts_user=0 does not lift this): boot with pti=off or load without bts";

/// The BTS buffers of every CPU's pool: `BTS_POOL` per CPU, CPU 0's first.
pub(super) struct BtsBuffers {
    /// Held for their drop: the stubs and the printer reach them through the area's table.
    pub(super) _pages: KVec<Pages>,
}

impl BtsBuffers {
    /// Allocates the pools and describes them in `area` (its table, and each CPU block's debug
    /// store, pointed at the CPU's first buffer), before any stub or CPU can use them.
    pub(super) fn new(area: &Area, b: &BtsOptions) -> Result<Self> {
        let g = area.geometry();
        let mut w = area;
        let mut pages = KVec::with_capacity(g.nr_cpus * BTS_POOL, GFP_KERNEL)?;
        for cpu in 0..g.nr_cpus {
            for slot in 0..BTS_POOL {
                let p = Pages::new(b.size)?;
                let virt = p.base as u64;
                // SAFETY: a direct-map address from the page allocator.
                let phys = unsafe { ffi::lbr_dump_virt_to_phys(p.base.cast()) } as u64;
                pages.push(p, GFP_KERNEL)?;
                let e = g.bts_entry(cpu, slot);
                w.put(e + layout::bts::VIRT, &virt.to_le_bytes());
                w.put(e + layout::bts::PHYS, &phys.to_le_bytes());
            }
            let block = g.cpu_block(cpu);
            let first = g.bts_entry(cpu, 0);
            w.put(
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
                w.put(ds + off, &v.to_le_bytes());
            }
        }
        Ok(BtsBuffers { _pages: pages })
    }
}
