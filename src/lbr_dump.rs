// SPDX-License-Identifier: GPL-2.0

//! lbr-dump: freeze the CPU's last-branch records at the first instruction of a kernel exception
//! and print them in the oops.
//!
//! This crate root only declares the parts and the module's life cycle:
//! - pure code, shared with the host tools: [`facility`] (what CPUID says the recorder is),
//!   [`record`] (decoding records), [`layout`] (the snapshot area), [`report`] (printed lines);
//! - [`probe`]: whether that recorder can really be switched on;
//! - [`capture`]: arming (area, recording on every CPU, gates), [`idt`]: the gates,
//!   [`printer`]: the die and panic notifiers and the warning hooks;
//! - [`ffi`]: every C function declared by hand; `glue.c`: what Rust cannot express;
//! - `asm/`: code that must not be compiled Rust (CPU lookup without `%gs`, entry stubs).

use core::fmt::Write;

use kernel::{cpu::CpuId, new_mutex, prelude::*, sync::Mutex};

pub mod area;
mod capture;
mod control;
mod entry;
pub mod facility;
mod ffi;
mod fred;
pub mod hypervisor;
mod idt;
pub mod layout;
mod live;
pub mod plan;
mod printer;
mod probe;
pub mod record;
pub mod report;
pub mod reports;
mod window;

module! {
    type: LbrDump,
    name: "lbr_dump",
    authors: ["lbr-dump developers"],
    description: "Freeze and print last-branch records at kernel exceptions",
    license: "GPL",
    params: {
        enable: bool {
            default: false,
            description: "Arm at load: hook the exception vectors and record branches",
        },
        force: bool {
            default: false,
            description: "Testing only: arm even if the recorder's switch does not stay on \
                          (plain QEMU TCG); the capture path runs, the records read as zero",
        },
        fail_msr: u32 {
            default: 0,
            description: "Testing only: treat every access to this MSR as faulting (#GP), to \
                          exercise the refusal of a hypervisor without LBR pass-through",
        },
        all_rings: bool {
            default: false,
            description: "Record user-mode branches too (default: kernel only)",
        },
        nmi_freeze: bool {
            default: false,
            description: "Freeze the recorder at every kernel-mode NMI's entry until lbr-dump's \
                          NMI handler, so that a panic from an NMI handler (perf's hard-lockup \
                          watchdog) shows what the CPU did before the NMI; 2 RDMSR and 2 WRMSR \
                          per kernel-mode NMI",
        },
        bts: u32 {
            default: 0,
            description: "Branch trace store beside the LBR (Intel legacy LBR models): KiB per \
                          BTS buffer, a power of two from 4 to 4096, a pool of 4 buffers per \
                          CPU; 0 (default): off",
        },
        bts_user: bool {
            default: false,
            description: "With bts: store user-mode branches too (default: kernel only)",
        },
        bts_print: u32 {
            default: 32,
            description: "With bts: BTS records each oops prints, newest first (all of them stay \
                          in memory for crash dumps)",
        },
        print_records: u32 {
            default: 16,
            description: "Records each snapshot an oops, warning or panic prints, newest first; \
                          0: all. The rest stay in the snapshot area for crash dumps \
                          (lbr-decode), and a line says so",
        },
        print_all: bool {
            default: false,
            description: "Print every record of every snapshot, and at a panic every other \
                          CPU's whole snapshot (default: one line per other CPU; the snapshots \
                          stay in the snapshot area)",
        },
        vectors: u32 {
            default: crate::plan::Vectors::ALL,
            description: "Hooked exception vectors, a bit mask (bit N: vector N) of 0 #DE, \
                          1 #DB (re-arm only), 6 #UD, 8 #DF, 11 #NP, 12 #SS, 13 #GP, 14 #PF, \
                          17 #AC, 21 #CP; default 0x227943, all of them",
        },
    },
}

/// The module object: lbr-dump's state behind its one lock. Pinned, so the state's address can
/// be given to the sysfs callbacks (control.rs) for as long as the object lives; its drop
/// removes the attributes, withdraws the address and disarms.
#[pin_data(PinnedDrop)]
pub(crate) struct LbrDump {
    #[pin]
    pub(crate) state: Mutex<control::Controls>,
}

fn text_base(module: &'static ThisModule) -> u64 {
    let m = module.as_ptr();
    if m.is_null() {
        return 0; // built in
    }
    // SAFETY: `m` is this module, alive while its code runs.
    unsafe { (*m).mem[kernel::bindings::mod_mem_type_MOD_TEXT as usize].base as u64 }
}

/// Whether to arm at load: the `enable` parameter for a module; for the built-in driver,
/// `lbr_dump=on|off` on the command line, else the Kconfig default (`lbr_dump.enable=1` works too).
fn arm_at_init() -> bool {
    if module_parameters::enable.value() {
        return true;
    }
    // SAFETY: reads a value set during command-line parsing; no preconditions.
    match unsafe { ffi::lbr_dump_boot_choice() } {
        1 => true,
        0 => false,
        _ => cfg!(CONFIG_LBR_DUMP_DEFAULT_ON),
    }
}

/// What loading decides before the module object exists: the vector set and the recorder.
fn prepare(module: &'static ThisModule) -> Result<control::Controls> {
    printer::set_limits(
        module_parameters::print_records.value(),
        module_parameters::print_all.value(),
    );
    let mask = module_parameters::vectors.value();
    let Some(vectors) = plan::Vectors::new(mask) else {
        pr_err!(
            "vectors={:#x}: not a set of hookable vectors (bit N: vector N; hookable: {} = {:#x}; #DB alone captures nothing)\n",
            mask,
            format_args!("{}", plan::Vectors::all()),
            plan::Vectors::ALL
        );
        return Err(EINVAL);
    };
    let found = match probe::probe(CpuId::current()) {
        Ok(found) => {
            pr_info!("{}\n", format_args!("{found}"));
            found
        }
        Err(refusal) => match refusal.forceable() {
            Some(found) if module_parameters::force.value() => {
                pr_warn!(
                    "{} (forced: records will be empty)\n",
                    format_args!("{refusal}")
                );
                found
            }
            _ => {
                pr_err!("{}\n", format_args!("{refusal}"));
                return Err(ENODEV);
            }
        },
    };
    let filter = control::filter();
    if let Some(why) = filter.unsupported_by(&found.recorder) {
        pr_err!("filter={}: {why}; load with filter=all\n", filter.name());
        return Err(ENODEV);
    }
    let bts = bts_options(&found)?;
    let options = plan::Options {
        rings: if module_parameters::all_rings.value() {
            plan::Rings::All
        } else {
            plan::Rings::Kernel
        },
        filter,
        vectors,
        nmi_freeze: module_parameters::nmi_freeze.value(),
        bts,
    };
    Ok(control::Controls::new(found, options, text_base(module)))
}

/// The `bts` parameters, checked against what the probe found: `None` for `bts=0`.
fn bts_options(found: &probe::Found) -> Result<Option<plan::BtsOptions>> {
    let kib = module_parameters::bts.value();
    if kib == 0 {
        return Ok(None);
    }
    if !(4..=4096).contains(&kib) || !kib.is_power_of_two() {
        pr_err!(
            "bts={kib}: not a buffer size: KiB per BTS buffer, a power of two from 4 to 4096\n"
        );
        return Err(EINVAL);
    }
    if found.bts != facility::Bts::Available {
        pr_err!("bts={kib}: {} on this CPU\n", format_args!("{}", found.bts));
        return Err(ENODEV);
    }
    if !matches!(found.recorder, facility::Recorder::IntelLegacy(_)) {
        pr_err!(
            "bts={kib}: this recorder's switch is not DEBUGCTL.LBR ({}): one WRMSR must freeze both\n",
            found.recorder.switch().name
        );
        return Err(ENODEV);
    }
    let user = module_parameters::bts_user.value();
    if !user && !found.facility.ds_cpl {
        pr_err!("bts={kib}: this CPU cannot store kernel branches only (no DS-CPL in CPUID): load with bts_user=1\n");
        return Err(ENODEV);
    }
    Ok(Some(plan::BtsOptions {
        size: kib as usize * 1024,
        user,
        print: module_parameters::bts_print.value(),
    }))
}

/// Once the object is in place: arm if asked, publish the state, create the attributes. An error
/// drops the object (PinnedDrop undoes what was done), unless the teardown of a failed arming
/// left lbr-dump's code in use (`capture::left_in_use`): a module whose init fails is freed
/// whatever pinned it, so it then loads disarmed instead, and says so.
fn start(this: Pin<&mut LbrDump>) -> Result {
    let this = this.into_ref();
    let mut facility = printer::LineBuf::new();
    {
        let mut state = this.state.lock();
        let _ = write!(facility, "{}", state.found);
        if arm_at_init() {
            if let Err(e) = state.set_enabled(true) {
                if !capture::left_in_use() {
                    return Err(e);
                }
                pr_err!("arming at load failed ({e:?}) and its teardown left lbr-dump's code in use (see above): loaded disarmed, and it stays until reboot\n");
            }
        }
    }
    control::publish(this);
    // SAFETY: a NUL-terminated buffer, copied by the callee.
    let r = unsafe { ffi::lbr_dump_sysfs_create(facility.as_ptr().cast()) };
    if r != 0 {
        if !capture::left_in_use() {
            return Err(Error::from_errno(r));
        }
        pr_err!("cannot create /sys/kernel/lbr_dump ({:?}): loaded without it, as lbr-dump's code is still in use until reboot\n", Error::from_errno(r));
    }
    Ok(())
}

impl kernel::InPlaceModule for LbrDump {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        let state = prepare(module);
        try_pin_init!(Self {
            state <- new_mutex!(state?, "lbr_dump::state"),
        })
        .pin_chain(start)
    }
}

#[pinned_drop]
impl PinnedDrop for LbrDump {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: no preconditions (a no-op if the attributes were never created); removal waits
        // for running attribute callbacks, so none uses the state after this.
        unsafe { ffi::lbr_dump_sysfs_remove() };
        control::withdraw(self.as_ref());
        let mut state = self.state.lock();
        let _ = state.set_enabled(false);
        // Disarmed: nothing writes the stubs' configuration any more.
        window::unmap_config();
        pr_info!("unloaded ({})\n", state.found.recorder.flavour().title());
    }
}
