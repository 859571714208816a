// SPDX-License-Identifier: GPL-2.0

//! The one writer of the stubs' configuration (asm/stubs.S `lbr_dump_capture`, read-only but
//! through its window: src/window.rs).

use super::*;

/// TR|BTS cleared from the stubs' re-arm target (`cfg::ARMED`), so that a #DB re-arm or a
/// capture's re-arm switches the LBR alone back on (BTS is gone for good).
pub(super) fn rearm_without_bts() {
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

/// FRED: the hardware exceptions the entry page's ring-0 stub captures (`cfg::FRED_VECTORS`, bit
/// N: vector N), written before any CPU's IA32_FRED_CONFIG points at the page (src/fred.rs), and
/// not changed while one does.
pub(super) fn configure_fred(vectors: u64) {
    // SAFETY: an aligned u64 of the stubs' configuration; no CPU's IA32_FRED_CONFIG points at
    // the page yet (this is written before `Entry::arm`), so no stub reads it.
    unsafe {
        window::write_config(|page| {
            ptr::addr_of_mut!((*page).cfg.fred_vectors).write_volatile(vectors);
        })
    };
}

/// The stubs' configuration (asm/stubs.S reads it through `lbr_dump_capture`), with the MSR list
/// they read, written through the configuration page's window.
pub(super) fn configure_stubs(
    armed: &Armed,
    values: &ArmValues,
    armed_value: u64,
    msrs: &[u32],
) -> Result {
    if msrs.len() > MAX_MSRS {
        return Err(EINVAL);
    }
    let g = &armed.area.geometry();
    // SAFETY: no preconditions; process context.
    let iret = unsafe { ffi::lbr_dump_iret_address() } as u64;
    if iret == 0 {
        pr_warn!(
            "cannot find native_irq_return_iret: a user's faulting IRET is captured like a crash\n"
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
        ctl_msr: u64::from(values.switch.msr),
        mask: values.freeze_mask(),
        rearm_mask: values.switch.mask,
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
            let ips = ptr::addr_of_mut!((*page).report_ips).cast::<u64>();
            for i in 0..layout::cfg::REPORT_SLOTS {
                ips.add(i).write_volatile(0);
            }
        })
    };
    // SAFETY: the stubs' counters (they change them with locked instructions); none runs now.
    unsafe {
        AtomicU64::from_ptr(ptr::addr_of_mut!(ffi::lbr_dump_live.seq)).store(0, Ordering::SeqCst);
        AtomicU64::from_ptr(ptr::addr_of_mut!(ffi::lbr_dump_live.gates_switched))
            .store(0, Ordering::SeqCst);
        AtomicU64::from_ptr(ptr::addr_of_mut!(ffi::lbr_dump_live.given_back))
            .store(0, Ordering::SeqCst);
    }
    Ok(())
}

/// The #BP stub's table of report int3s: for each kprobe of lbr-dump's at a report function's
/// entry, the address after its int3 (at most `REPORT_SLOTS`; the rest stay 0).
pub(super) fn configure_report_ips(ips: &[u64]) {
    // SAFETY: called before `hook_gates`: no gate points at a stub (see `configure_stubs`);
    // the stores stay within the table (`take`).
    unsafe {
        window::write_config(|page| {
            let table = ptr::addr_of_mut!((*page).report_ips).cast::<u64>();
            for (i, &ip) in ips.iter().take(layout::cfg::REPORT_SLOTS).enumerate() {
                table.add(i).write_volatile(ip);
            }
        })
    };
}

/// The panic path's fields: the stop stubs' save areas (`save`), the stop switch's window (its
/// address, and its PTE's address, writable and read-only values: idt.rs `gate_window`) and the
/// two stop gates (their address in the window and the value that hooks them; 0: that gate
/// cannot be hooked); the panic claim reset. Called before the trampolines are attached.
pub(super) fn configure_panic_path(
    save: u64,
    (window, (pte, rw, ro)): (u64, (u64, u64, u64)),
    gates: [(u64, u64); 2],
) {
    // SAFETY: the trampolines, the only readers of these fields but `lbr_dump_rearm_here`, are
    // not attached (the caller's contract); `lbr_dump_rearm_here` reads `stop_save` only, whole
    // (0 until this store: it then skips its NMI-watch test; the save areas are allocated
    // before); single aligned stores within the page.
    unsafe {
        ptr::addr_of_mut!(ffi::lbr_dump_live.panic_cpu).write_volatile(0);
        window::write_config(|page| {
            let c = ptr::addr_of_mut!((*page).cfg);
            ptr::addr_of_mut!((*c).stop_save).write_volatile(save);
            ptr::addr_of_mut!((*c).gate_window).write_volatile(window);
            ptr::addr_of_mut!((*c).gate_pte_rw).write_volatile(rw);
            ptr::addr_of_mut!((*c).gate_pte_ro).write_volatile(ro);
            ptr::addr_of_mut!((*c).gate_pte).write_volatile(pte);
            ptr::addr_of_mut!((*c).nmi_gate).write_volatile(gates[0].0);
            ptr::addr_of_mut!((*c).nmi_hook).write_volatile(gates[0].1);
            ptr::addr_of_mut!((*c).ipi_gate).write_volatile(gates[1].0);
            ptr::addr_of_mut!((*c).ipi_hook).write_volatile(gates[1].1);
        });
    }
}

/// Trampolines that ftrace could not detach made inert: they stay attached and read the
/// configuration while they run.
pub(super) fn make_trampolines_inert() {
    // SAFETY: fields of the stubs' configuration; the trampolines read them with plain loads (an
    // aligned 8-byte store is seen whole). No CPU has a block any more (nr_cpus 0: the
    // trampolines write nothing per CPU), the panic counts as claimed, not at crash_kexec() (the
    // panic trampolines only freeze and put the recorder back, the reset trampoline gives
    // nothing back) and no gate is known (the stop trampoline writes nothing, and opens no
    // window: gate_pte 0). The exception stubs do not run: their gates are restored next.
    unsafe {
        ptr::addr_of_mut!(ffi::lbr_dump_live.panic_cpu)
            .write_volatile(!(1 << layout::live::KEXEC_CLAIM_BIT));
        window::write_config(|page| {
            let c = ptr::addr_of_mut!((*page).cfg);
            ptr::addr_of_mut!((*c).nr_cpus).write_volatile(0);
            ptr::addr_of_mut!((*c).nmi_gate).write_volatile(0);
            ptr::addr_of_mut!((*c).ipi_gate).write_volatile(0);
            ptr::addr_of_mut!((*c).gate_pte).write_volatile(0);
        });
    }
}

/// FRED: lbr-dump's entry page left in a CPU's IA32_FRED_CONFIG when disarming
/// ([`crate::fred::kept`]): that CPU reads the configuration at every kernel-mode event, now and
/// until reboot, made inert.
pub(super) fn make_fred_page_inert() {
    // SAFETY: aligned u64s of the stubs' configuration, which the page's ring-0 entry reads with
    // single 8-byte loads (each store is seen whole). No hardware exception is captured any more
    // (fred_vectors 0: the entry goes straight on to the kernel's, before the freeze), and no CPU
    // has a block (nr_cpus 0: a kernel-mode #DB's re-arm and the stop body, behind the stop
    // flag, write no MSR and no memory). A CPU already past these loads finishes with what it
    // read, in memory that stays (`StubMemory`).
    unsafe {
        window::write_config(|page| {
            let c = ptr::addr_of_mut!((*page).cfg);
            ptr::addr_of_mut!((*c).fred_vectors).write_volatile(0);
            ptr::addr_of_mut!((*c).nr_cpus).write_volatile(0);
        })
    };
}
