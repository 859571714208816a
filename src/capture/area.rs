// SPDX-License-Identifier: GPL-2.0

//! The snapshot area: its pages, the self-describing header and the MSR list a capture reads
//! (the format is src/layout.rs).

use core::mem::ManuallyDrop;
use core::ops::Deref;

use super::*;

/// The snapshot area: physically contiguous zeroed pages (src/area.rs reads and writes the
/// format, src/layout.rs has its offsets).
// INVARIANT: `base` is the start of `1 << order` pages from `lbr_dump_alloc_pages(order)`, at
// least `header.area_size` bytes, owned by this value.
pub(crate) struct Area {
    base: *mut u8,
    order: u32,
    /// The header as written when arming: what the module reads its snapshots with (never the
    /// live header's bytes, which a stray write could change).
    pub(crate) header: AreaHeader<'static>,
}

// SAFETY: the area is plain memory owned by this value; concurrent writers are the stubs, which
// the snapshot protocol (busy flag, sequence written last) orders, and every access to it goes
// through volatile loads and stores (the `Memory` impls), never a Rust reference to its bytes.
unsafe impl Send for Area {}
// SAFETY: as above.
unsafe impl Sync for Area {}

impl Area {
    /// Allocates an area for `header` and writes the header and the MSR list `msrs` into it.
    pub(crate) fn new(header: AreaHeader<'static>, msrs: &[u32]) -> Result<Self> {
        let size = header.geometry.area_size();
        let order = (size.div_ceil(bindings::PAGE_SIZE))
            .next_power_of_two()
            .trailing_zeros();
        // SAFETY: no preconditions; 0 means failure (no warning: the caller says what failed).
        let base = unsafe { ffi::lbr_dump_alloc_pages(order) } as *mut u8;
        if base.is_null() {
            return Err(ENOMEM);
        }
        let area = Area {
            base,
            order,
            header,
        };
        header.write(&mut &area, msrs);
        Ok(area)
    }

    /// The area's geometry.
    pub(crate) fn geometry(&self) -> Geometry {
        self.header.geometry
    }

    /// Address of byte `off` of the area (`off` below the area size).
    pub(crate) fn at(&self, off: usize) -> *mut u8 {
        debug_assert!(off < self.header.area_size);
        // SAFETY: `off` is within the allocation (offsets come from `geometry`).
        unsafe { self.base.add(off) }
    }

    /// Stores the little-endian u64 `v` at `off` (8-byte aligned) with one volatile store: a
    /// reader on another CPU, or a dump taken at any instant, sees the old value or the new.
    pub(crate) fn store_u64(&self, off: usize, v: u64) {
        // SAFETY: within the allocation; every u64 field of the layout is 8-byte aligned from
        // the page-aligned base; plain memory no Rust reference covers.
        unsafe { ptr::write_volatile(self.at(off).cast::<u64>(), v.to_le()) };
    }

    /// As [`Area::store_u64`], for a u32 field (4-byte aligned).
    pub(crate) fn store_u32(&self, off: usize, v: u32) {
        // SAFETY: as in `store_u64`, for a 4-byte-aligned u32 field.
        unsafe { ptr::write_volatile(self.at(off).cast::<u32>(), v.to_le()) };
    }

    /// The snapshot in `slot` of `cpu`, read with volatile loads.
    pub(crate) fn snapshot(&self, cpu: usize, slot: usize) -> SnapshotView<'_, Area> {
        self.header.shape().snapshot(self, cpu, slot)
    }
}

impl Memory for Area {
    /// The byte at `off`, read with a volatile load (stubs on other CPUs may be writing).
    fn u8_at(&self, off: usize) -> u8 {
        // SAFETY: within the allocation; a volatile load of plain memory.
        unsafe { ptr::read_volatile(self.at(off)) }
    }

    /// The little-endian u32 at `off` (4-byte aligned), read with one volatile load.
    fn u32_at(&self, off: usize) -> u32 {
        // SAFETY: within the allocation; every u32 field of the layout is 4-byte aligned from
        // the page-aligned base.
        u32::from_le(unsafe { ptr::read_volatile(self.at(off).cast::<u32>()) })
    }

    /// The little-endian u64 at `off` (8-byte aligned), read with one volatile load.
    fn u64_at(&self, off: usize) -> u64 {
        // SAFETY: within the allocation; every u64 field of the layout is 8-byte aligned from
        // the page-aligned base.
        u64::from_le(unsafe { ptr::read_volatile(self.at(off).cast::<u64>()) })
    }
}

// Writes go through a shared reference: the area's bytes are never a Rust reference, only
// volatile accesses through `base`, so writing them through `&Area` aliases nothing.
impl Memory for &Area {
    fn u8_at(&self, off: usize) -> u8 {
        (**self).u8_at(off)
    }

    fn u32_at(&self, off: usize) -> u32 {
        (**self).u32_at(off)
    }

    fn u64_at(&self, off: usize) -> u64 {
        (**self).u64_at(off)
    }
}

impl MemoryMut for &Area {
    /// Stores `bytes` at `off` with volatile stores: the header and BTS table before any stub
    /// can see the area, a snapshot's seal (the oops printer) while stubs may write others.
    fn put(&mut self, off: usize, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            // SAFETY: within the allocation (offsets come from the geometry); a volatile store
            // to plain memory no Rust reference covers.
            unsafe { ptr::write_volatile(self.at(off + i), b) };
        }
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

/// Memory the stubs write, which their configuration names while armed (the snapshot area, the
/// stop stubs' save areas, the BTS buffers): freed when dropped, unless disarming left a CPU
/// entering at lbr-dump's FRED page ([`crate::fred::kept`]), whose stubs may still be writing
/// it: then it stays allocated until reboot.
pub(crate) struct StubMemory<T>(ManuallyDrop<T>);

impl<T> StubMemory<T> {
    pub(crate) fn new(memory: T) -> Self {
        StubMemory(ManuallyDrop::new(memory))
    }
}

impl<T> Deref for StubMemory<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Drop for StubMemory<T> {
    fn drop(&mut self) {
        if crate::fred::kept() {
            return;
        }
        // SAFETY: dropped once, here, and not used after (this is its owner's drop).
        unsafe { ManuallyDrop::drop(&mut self.0) };
    }
}

/// Zeroed, physically contiguous pages that no stub can reach once dropped (freed after the
/// gates are restored).
// INVARIANT: `base` is the start of `1 << order` pages from `lbr_dump_alloc_pages(order)`.
pub(super) struct Pages {
    pub(super) base: *mut u8,
    pub(super) order: u32,
}

// SAFETY: plain memory owned by this value; the only writers are the stop stubs, each on its own
// CPU's part.
unsafe impl Send for Pages {}
// SAFETY: as above; Rust never reads or writes the pages through `&Pages`.
unsafe impl Sync for Pages {}

impl Pages {
    pub(super) fn new(bytes: usize) -> Result<Self> {
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

/// The most MSRs a capture reads: the records, the last exception record's two, the filter MSR.
pub(super) const MAX_MSRS: usize = MAX_VALUES + 3;
const _: () = assert!(
    MAX_MSRS <= layout::cfg::MSR_MAX,
    "the stubs' configuration page has no room for the MSR list"
);

/// The MSRs each capture reads: the records, then the last exception record's FROM and TO where
/// the recorder has one, then the filter MSR (LBR_SELECT), whose value tells whether another
/// owner changed the filtering (layout.rs).
pub(super) fn capture_msrs(
    recorder: &Recorder,
    layout: &Encoding,
    values: &ArmValues,
) -> ([u32; MAX_MSRS], usize) {
    let mut msrs = [0u32; MAX_MSRS];
    let mut n = record::capture_list(recorder, layout, &mut msrs);
    let ler = recorder.last_exception();
    let extra = [
        ler.map(|(from, _)| from),
        ler.map(|(_, to)| to),
        values.filter.map(|(m, _)| m),
    ];
    for m in extra.into_iter().flatten() {
        // PANIC: none: capture_list fills at most MAX_VALUES entries, the array has three more.
        msrs[n] = m;
        n += 1;
    }
    (msrs, n)
}

/// The area's self-describing header (src/area.rs writes it): `ler`, the last exception
/// record's MSRs, where the capture reads them (after the records); `branches`, the branch
/// filter recording uses.
#[allow(
    clippy::too_many_arguments,
    reason = "the header's inputs, each one field or more"
)]
pub(super) fn header(
    geometry: Geometry,
    layout: Encoding,
    values: &ArmValues,
    armed_value: u64,
    ler: Option<(u32, u32)>,
    branches: Filter,
    text_base: u64,
    bts: Option<BtsOptions>,
) -> AreaHeader<'static> {
    AreaHeader {
        geometry,
        layout,
        area_size: geometry.area_size(),
        anchor_addr: bindings::_printk as *const () as usize as u64,
        anchor_name: ANCHOR,
        text_base,
        module_name: "lbr_dump",
        ctl_msr: values.switch.msr,
        ctl_armed: armed_value,
        filter: values.filter,
        ler,
        branches,
        bts: bts.map(|b| BtsHeader {
            pool: geometry.bts_pool,
            buffer_size: geometry.bts_size,
            rings: layout::BTS_RING_KERNEL | if b.user { layout::BTS_RING_USER } else { 0 },
        }),
    }
}

#[kunit_tests(lbr_dump_area)]
mod tests {
    use kernel::prelude::*;

    /// An area too large for the page allocator (the most CPUs and snapshots a header may
    /// announce, Arch LBR at depth 64) fails with ENOMEM and a message of ours, without the page
    /// allocator's warning (kunit.py checks the log has none).
    #[test]
    fn area_too_large_fails_cleanly() {
        let layout = crate::record::Encoding::IntelArch { depth: 64 };
        let geometry = crate::layout::Geometry {
            nr_cpus: crate::layout::MAX_CPUS,
            ring: crate::layout::MAX_RING,
            nr_values: layout.values(),
            bts_pool: 0,
            bts_size: 0,
        };
        let header = crate::area::AreaHeader {
            geometry,
            layout,
            area_size: geometry.area_size(),
            anchor_addr: 0,
            anchor_name: "_printk",
            text_base: 0,
            module_name: "lbr_dump",
            ctl_msr: 0x14ce,
            ctl_armed: 1,
            filter: None,
            ler: None,
            branches: crate::facility::Filter::All,
            bts: None,
        };
        assert!(matches!(super::Area::new(header, &[]), Err(e) if e == ENOMEM));
    }
}
