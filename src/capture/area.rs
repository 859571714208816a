// SPDX-License-Identifier: GPL-2.0

//! The snapshot area: its pages, the self-describing header and the MSR list a capture reads
//! (the format is src/layout.rs).

use super::*;

/// The snapshot area: physically contiguous zeroed pages (layout.rs describes the format).
// INVARIANT: `base` is the start of `1 << order` pages from `lbr_dump_alloc_pages(order)`, at
// least `geometry.area_size()` bytes, owned by this value.
pub(crate) struct Area {
    pub(super) base: *mut u8,
    pub(super) order: u32,
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

    pub(super) fn put(&self, off: usize, bytes: &[u8]) {
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

/// Fills the area's self-describing header and MSR list (layout.rs), then its checksum. `ler`:
/// the last exception record's MSRs, where the capture reads them (after the records);
/// `branches`: the branch filter recording uses.
#[allow(
    clippy::too_many_arguments,
    reason = "the header's inputs, each one field or more"
)]
pub(super) fn write_header(
    area: &Area,
    values: &ArmValues,
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
        (hdr::CTL_MSR, values.switch.msr),
        (hdr::FILTER_MSR, values.filter.map_or(0, |(m, _)| m)),
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
        &values.filter.map_or(0, |(_, v)| v).to_le_bytes(),
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

#[kunit_tests(lbr_dump_area)]
mod tests {
    use kernel::prelude::*;

    /// An area too large for the page allocator (the most CPUs and snapshots a header may
    /// announce, Arch LBR at depth 64) fails with ENOMEM and a message of ours, without the page
    /// allocator's warning (kunit.py checks the log has none).
    #[test]
    fn area_too_large_fails_cleanly() {
        let layout = crate::record::Encoding::IntelArch { depth: 64 };
        let g = crate::layout::Geometry {
            nr_cpus: crate::layout::MAX_CPUS,
            ring: crate::layout::MAX_RING,
            nr_values: layout.values(),
            bts_pool: 0,
            bts_size: 0,
        };
        assert!(matches!(super::Area::new(g, layout), Err(e) if e == ENOMEM));
    }
}
