// SPDX-License-Identifier: GPL-2.0

//! Arming lbr-dump: the snapshot area, the stubs' configuration, recording on every CPU, the
//! hooked gates and the oops printer, in that order; disarming undoes them in reverse.
//!
//! Re-arm policy (README "Recording"): recording is switched on by a CPU-hotplug callback on
//! every CPU that is online or comes online later (a dynamic AP state, after perf's online
//! callback, which clears LBR). #DB clears the enable bit by itself; a capture whose entry value
//! is lbr-dump's armed value with only the enable bit cleared re-arms (asm/stubs.S). Another
//! owner's value (perf) is never overwritten by a capture: it is restored as found.

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use kernel::{bindings, ffi::c_uint, prelude::*};

use crate::facility::{msr, Recorder};
use crate::ffi;
use crate::idt::Hooks;
use crate::layout::{self, hdr, Geometry};
use crate::record::{self, Layout, MAX_VALUES};

/// The exception vectors lbr-dump can hook, with their names: #DE #UD #DF #NP #SS #GP #PF #AC
/// #CP are captured; #DB is only re-armed (its delivery clears the recorder's switch;
/// asm/stubs.S). The `vectors` parameter selects among them (default: all).
pub(crate) const HOOKABLE: [(usize, &str); 10] = [
    (0, "#DE"),
    (1, "#DB, re-arm only"),
    (6, "#UD"),
    (8, "#DF"),
    (11, "#NP"),
    (12, "#SS"),
    (13, "#GP"),
    (14, "#PF"),
    (17, "#AC"),
    (21, "#CP"),
];

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
        (mask & !Self::ALL == 0 && mask & !(1 << 1) != 0).then_some(Vectors(mask))
    }

    /// Every hookable vector, as a set.
    pub(crate) fn all() -> Self {
        Vectors(Self::ALL)
    }

    /// The vectors of the set, in order; `out` holds them, the count is returned.
    fn list(self, out: &mut [usize; HOOKABLE.len()]) -> usize {
        let mut n = 0;
        for &(v, _) in &HOOKABLE {
            if self.0 & (1 << v) != 0 {
                out[n] = v;
                n += 1;
            }
        }
        n
    }
}

impl core::fmt::Display for Vectors {
    /// As the `vectors` attribute and the arming message show them: `0(#DE) 6(#UD) ...`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut sep = "";
        for &(v, name) in &HOOKABLE {
            if self.0 & (1 << v) != 0 {
                write!(f, "{sep}{v}({name})")?;
                sep = " ";
            }
        }
        Ok(())
    }
}
/// Snapshots kept per CPU (a power of two).
const RING: usize = 4;
/// Exported symbol whose runtime address the area records (the decoder's KASLR anchor).
const ANCHOR: &CStr = c"_printk";

/// How the recorder is switched on: the MSR writes of arming, per flavour.
#[derive(Clone, Copy)]
pub(crate) struct Control {
    /// The control MSR and its enable mask.
    pub(crate) ctl_msr: u32,
    pub(crate) mask: u64,
    /// A filter MSR written when arming (LBR_SELECT), with its armed value.
    filter: Option<(u32, u64)>,
    /// Arch LBR: ARCH_LBR_CTL's armed value is written whole (not OR-ed into the old one).
    whole: Option<u64>,
}

impl Control {
    /// The arming writes for a recorder; `kernel_only` filters out branches ending in ring 3.
    pub(crate) fn new(recorder: &Recorder, kernel_only: bool) -> Self {
        let sw = recorder.switch();
        let (filter, whole) = match recorder {
            // LBR_SELECT bit 1 suppresses branches that end in ring > 0.
            Recorder::IntelLegacy(_) => (Some((msr::LBR_SELECT, if kernel_only { 2 } else { 0 })), None),
            Recorder::AmdLbrV2 { .. } => (Some((0xc000_010e, if kernel_only { 2 } else { 0 })), None),
            // LBREn | OS | USR (unless kernel-only) | every branch type (bits 16..22).
            Recorder::IntelArch(_) => (None, Some(0x3 | if kernel_only { 0 } else { 4 } | 0x7f << 16)),
            Recorder::AmdSingle => (None, None),
        };
        Control {
            ctl_msr: sw.msr,
            mask: sw.mask,
            filter,
            whole,
        }
    }

    /// The control value once armed, given the value before.
    fn armed(&self, before: u64) -> u64 {
        self.whole.unwrap_or(before | self.mask)
    }
}

/// `rdmsr` on this CPU. Only for MSRs the probe showed to be readable.
fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reads an MSR that the probe read without fault on this CPU model; no memory use.
    unsafe { core::arch::asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nostack, nomem)) };
    (hi as u64) << 32 | lo as u64
}

/// `wrmsr` on this CPU. Only for the recorder MSRs the probe showed to be writable.
fn wrmsr(msr: u32, v: u64) {
    // SAFETY: writes a branch-recorder MSR that the probe wrote without fault; it changes only
    // what is recorded, no memory the compiler knows of.
    unsafe {
        core::arch::asm!("wrmsr", in("ecx") msr, in("eax") v as u32, in("edx") (v >> 32) as u32,
                         options(nostack, nomem))
    };
}

/// What recording was on each CPU before lbr-dump armed it: (control, filter) per CPU number.
struct Saved {
    control: Control,
    before: KVec<[AtomicU64; 2]>,
}

/// The recording state the hotplug callbacks use (they get only a CPU number).
static RECORDING: AtomicPtr<Saved> = AtomicPtr::new(ptr::null_mut());

/// CPU coming online (and every online CPU at arming): save the values, switch recording on.
unsafe extern "C" fn cpu_online(cpu: c_uint) -> i32 {
    // SAFETY: set before the hotplug state is registered, cleared after it is removed.
    let Some(s) = (unsafe { RECORDING.load(Ordering::Acquire).as_ref() }) else { return 0 };
    let Some(slot) = s.before.get(cpu as usize) else { return 0 };
    let c = &s.control;
    let ctl = rdmsr(c.ctl_msr);
    slot[0].store(ctl, Ordering::Relaxed);
    if let Some((m, v)) = c.filter {
        slot[1].store(rdmsr(m), Ordering::Relaxed);
        wrmsr(m, v);
    }
    wrmsr(c.ctl_msr, c.armed(ctl));
    0
}

/// CPU going offline (and every CPU at disarming): put back what was there.
unsafe extern "C" fn cpu_offline(cpu: c_uint) -> i32 {
    // SAFETY: as in `cpu_online`.
    let Some(s) = (unsafe { RECORDING.load(Ordering::Acquire).as_ref() }) else { return 0 };
    let Some(slot) = s.before.get(cpu as usize) else { return 0 };
    let c = &s.control;
    wrmsr(c.ctl_msr, slot[0].load(Ordering::Relaxed));
    if let Some((m, _)) = c.filter {
        wrmsr(m, slot[1].load(Ordering::Relaxed));
    }
    0
}

/// The snapshot area: physically contiguous zeroed pages (layout.rs describes the format).
pub(crate) struct Area {
    base: *mut u8,
    order: u32,
    pub(crate) geometry: Geometry,
    pub(crate) layout: Layout,
}

// SAFETY: the area is plain memory owned by this value; concurrent writers are the stubs, which
// the snapshot protocol (busy flag, sequence written last) orders.
unsafe impl Send for Area {}
// SAFETY: as above.
unsafe impl Sync for Area {}

impl Area {
    fn new(geometry: Geometry, layout: Layout) -> Result<Self> {
        let size = geometry.area_size();
        let order = (size.div_ceil(bindings::PAGE_SIZE)).next_power_of_two().trailing_zeros();
        // SAFETY: no preconditions; 0 means failure.
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

    /// Address of byte `off` of the area.
    pub(crate) fn at(&self, off: usize) -> *mut u8 {
        debug_assert!(off < self.geometry.area_size());
        // SAFETY: `off` is within the allocation (offsets come from `geometry`).
        unsafe { self.base.add(off) }
    }

    fn put(&self, off: usize, bytes: &[u8]) {
        // SAFETY: header writes within the allocation, before any stub can see the area.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), self.at(off), bytes.len()) };
    }

    /// The little-endian u64 at `off`.
    fn u64_at(&self, off: usize) -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(self.bytes(off, 8));
        u64::from_le_bytes(v)
    }

    /// The control value lbr-dump writes when arming, as the header records it.
    pub(crate) fn ctl_armed(&self) -> u64 {
        self.u64_at(hdr::CTL_ARMED)
    }

    /// The filter value a capture found, with the one lbr-dump writes when arming, for a
    /// snapshot at `snap` (None: the recorder has no filter MSR).
    pub(crate) fn filter(&self, snap: usize) -> Option<(u64, u64)> {
        let mut m = [0u8; 4];
        m.copy_from_slice(self.bytes(hdr::FILTER_MSR, 4));
        (u32::from_le_bytes(m) != 0).then(|| {
            (
                self.u64_at(snap + layout::snap::VALUES + 8 * (self.geometry.nr_values - 1)),
                self.u64_at(hdr::FILTER_ARMED),
            )
        })
    }

    /// `len` bytes of the area at `off` (for checksums and header fields).
    pub(crate) fn bytes(&self, off: usize, len: usize) -> &[u8] {
        // SAFETY: within the allocation; the caller accepts that stubs may write concurrently
        // (the checksum of a snapshot is taken when its CPU is stopped in the oops path).
        unsafe { core::slice::from_raw_parts(self.at(off), len) }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: `base` came from `lbr_dump_alloc_pages(order)` and no stub can reach it any
        // more (the gates were restored and every CPU synchronized before the area is dropped).
        unsafe { bindings::free_pages(self.base as usize, self.order) };
    }
}

/// Everything that exists while lbr-dump is armed. Dropping it disarms, in reverse order.
pub(crate) struct Armed {
    hooks: Option<Hooks>,
    hp_state: i32,
    saved: Option<KBox<Saved>>,
    pub(crate) area: Area,
}

/// Arms lbr-dump for `recorder`. `text_base` is the module's text address (for the dump header).
pub(crate) fn arm(
    recorder: &Recorder,
    kernel_only: bool,
    vectors: Vectors,
    text_base: u64,
) -> Result<KBox<Armed>, Error> {
    // SAFETY: no preconditions; the result is NULL or a static string.
    let why = unsafe { ffi::lbr_dump_environment_refusal() };
    if !why.is_null() {
        // SAFETY: a static NUL-terminated string from glue.c.
        pr_err!("refusing to arm: {}\n", unsafe { CStr::from_char_ptr(why) });
        return Err(ENODEV);
    }
    let Some(layout) = record::layout(recorder, false) else {
        pr_err!("refusing to arm: the LBR format is unknown or unsupported\n");
        return Err(ENODEV);
    };
    let control = Control::new(recorder, kernel_only);
    // The MSRs each capture reads: the records, then the filter MSR (LBR_SELECT), whose value
    // tells whether another owner changed the filtering (layout.rs).
    let mut msrs = [0u32; MAX_VALUES + 1];
    let mut n = record::capture_list(recorder, &layout, &mut msrs);
    if let Some((m, _)) = control.filter {
        msrs[n] = m;
        n += 1;
    }
    let nr_cpus = kernel::cpu::nr_cpu_ids() as usize;
    let geometry = Geometry {
        nr_cpus,
        ring: RING,
        nr_values: n,
    };
    let area = Area::new(geometry, layout)?;

    // Header.
    let (format, flags) = layout.codes();
    area.put(hdr::MAGIC, &layout::MAGIC);
    area.put(hdr::VERSION, &layout::VERSION.to_le_bytes());
    area.put(hdr::HEADER_SIZE, &(layout::HEADER_SIZE as u32).to_le_bytes());
    area.put(hdr::AREA_SIZE, &(geometry.area_size() as u64).to_le_bytes());
    for (off, v) in [
        (hdr::NR_CPUS, nr_cpus as u32),
        (hdr::RING, RING as u32),
        (hdr::SNAP_SIZE, geometry.snap_size() as u32),
        (hdr::NR_VALUES, n as u32),
        (hdr::FLAVOUR, layout.flavour_code()),
        (hdr::FORMAT, format),
        (hdr::DEPTH, layout.depth() as u32),
        (hdr::LAYOUT_FLAGS, flags),
        (hdr::MSR_LIST, geometry.msr_list() as u32),
        (hdr::CPU_OFFSET, geometry.cpu_offset() as u32),
        (hdr::CPU_BLOCK_SIZE, geometry.cpu_block_size() as u32),
        (hdr::CTL_MSR, control.ctl_msr),
        (hdr::FILTER_MSR, control.filter.map_or(0, |(m, _)| m)),
    ] {
        area.put(off, &v.to_le_bytes());
    }
    area.put(hdr::FILTER_ARMED, &control.filter.map_or(0, |(_, v)| v).to_le_bytes());
    area.put(hdr::ANCHOR_ADDR, &(bindings::_printk as *const () as usize as u64).to_le_bytes());
    area.put(hdr::ANCHOR_NAME, ANCHOR.to_bytes());
    area.put(hdr::TEXT_BASE, &text_base.to_le_bytes());
    area.put(hdr::MODULE_NAME, b"lbr_dump");
    for (i, m) in msrs[..n].iter().enumerate() {
        area.put(geometry.msr_list() + 4 * i, &m.to_le_bytes());
    }

    // Recording on, on every CPU now and later.
    let mut before = KVec::with_capacity(nr_cpus, GFP_KERNEL)?;
    for _ in 0..nr_cpus {
        before.push([AtomicU64::new(0), AtomicU64::new(0)], GFP_KERNEL)?;
    }
    let saved = KBox::new(Saved { control, before }, GFP_KERNEL)?;
    let armed_value = control.armed(rdmsr_on_this_cpu(control.ctl_msr));
    area.put(hdr::CTL_ARMED, &armed_value.to_le_bytes());
    let checksum = layout::checksum(area.bytes(0, layout::HEADER_SIZE), hdr::CHECKSUM);
    area.put(hdr::CHECKSUM, &checksum.to_le_bytes());

    let mut armed = KBox::new(
        Armed {
            hooks: None,
            hp_state: 0,
            saved: Some(saved),
            area,
        },
        GFP_KERNEL,
    )?;
    let saved_ptr = armed.saved.as_deref().map_or(ptr::null(), |s| s as *const Saved);
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
        return Err(Error::from_errno(st));
    }
    armed.hp_state = st;

    // The stubs' configuration, then the gates.
    let g = &armed.area.geometry;
    let cfg = ffi::CaptureConfig {
        cpu0: armed.area.at(g.cpu_offset()) as u64,
        block_size: g.cpu_block_size() as u64,
        nr_cpus: nr_cpus as u64,
        ring_mask: (RING - 1) as u64,
        snap_size: g.snap_size() as u64,
        msrs: armed.area.at(g.msr_list()) as u64,
        nr_values: n as u64,
        ctl_msr: control.ctl_msr as u64,
        mask: control.mask,
        armed: armed_value,
        seq: 0,
    };
    // SAFETY: no gate points at a stub (only `Hooks::hook` below does that), so nothing reads
    // the configuration while it is written.
    unsafe { ptr::addr_of_mut!(ffi::lbr_dump_capture).write_volatile(cfg) };
    let mut list = [0; HOOKABLE.len()];
    let n = vectors.list(&mut list);
    match Hooks::hook(&list[..n]) {
        Ok(h) => armed.hooks = Some(h),
        Err(why) => {
            pr_err!("refusing to arm: {}\n", why);
            return Err(ENODEV);
        }
    }
    Ok(armed)
}

fn rdmsr_on_this_cpu(m: u32) -> u64 {
    let mut v = 0;
    // SAFETY: exception-safe read into a local.
    unsafe { ffi::rdmsrq_safe_on_cpu(kernel::cpu::CpuId::current().as_u32(), m, &mut v) };
    v
}

impl Drop for Armed {
    fn drop(&mut self) {
        // Gates first (and wait for every CPU to leave the stubs), then recording, then memory.
        self.hooks = None;
        if self.hp_state > 0 {
            // SAFETY: removes the dynamic state registered in `arm`, running `cpu_offline` on
            // every online CPU.
            unsafe { bindings::__cpuhp_remove_state(self.hp_state as _, true) };
        }
        RECORDING.store(ptr::null_mut(), Ordering::Release);
        self.saved = None;
    }
}
