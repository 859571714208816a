// SPDX-License-Identifier: GPL-2.0

//! The part of QEMU's TCG plugin API (version 7, QEMU 11.1) that lbr-emu uses, declared by hand.
//!
//! No binding crate covers v7 (the published `qemu-plugin` crate stops at v5, which QEMU 11.1
//! refuses) and Debian ships no plugin header in its binary packages. Every declaration here was
//! checked against `include/plugins/qemu-plugin.h` of the v7 API: the version history in the
//! header ("version 7: add userdata to all plugin callbacks"), the registration functions for
//! vCPU-init, TB-translation, discontinuity and atexit callbacks taking a trailing `void
//! *userdata` and their callbacks receiving it instead of a leading plugin id; `read_register` /
//! `write_register` returning `bool` (v6); `qemu_plugin_read_memory_vaddr` /
//! `qemu_plugin_write_memory_vaddr` (v5; `bool`, a `GByteArray`, vCPU context only);
//! `qemu_plugin_reg_descriptor` with `is_readonly`;
//! `qemu_plugin_set_pc` (v6, only from callbacks registered with QEMU_PLUGIN_CB_RW_REGS_PC; it
//! does not return). The version QEMU reports is checked at install time (`plugin.rs`).
//!
//! glib types (GArray, GByteArray) are declared with the two fields plugins may read.
//!
//! The raw functions stay private to this module (`sys`); the plugin calls the safe wrappers
//! below them, which hold the API's `unsafe` blocks and their justifications: handles whose
//! lifetime is that of the callback they come from ([`TbHandle`], [`InsnHandle`]), register
//! handles ([`Reg`]), scoreboard fields checked against the entry's size ([`Scoreboard::field`]).
//! Only [`set_pc`] stays `unsafe` to call: it leaves the caller's frame without unwinding it.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::marker::PhantomData;
use std::ptr::null_mut;

pub const QEMU_PLUGIN_VERSION: c_int = 7;

pub type PluginId = u64;

#[repr(C)]
pub struct QemuInfo {
    pub target_name: *const c_char,
    pub version_min: c_int,
    pub version_cur: c_int,
    pub system_emulation: bool,
    pub smp_vcpus: c_int,
    pub max_vcpus: c_int,
}

#[repr(C)]
pub struct Tb {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct Insn {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct RawScoreboard {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct Register {
    _opaque: [u8; 0],
}

/// `qemu_plugin_u64`: one u64 member of every vCPU's scoreboard entry. Made only by
/// [`Scoreboard::field`], which checks the offset: QEMU's inline operations write there.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct U64 {
    score: *mut RawScoreboard,
    offset: usize,
}

#[repr(C)]
pub struct RegDescriptor {
    pub handle: *mut Register,
    pub name: *const c_char,
    pub feature: *const c_char,
    pub is_readonly: bool,
}

#[repr(C)]
pub struct GArray {
    pub data: *mut c_char,
    pub len: c_uint,
}

#[repr(C)]
pub struct GByteArray {
    pub data: *mut u8,
    pub len: c_uint,
}

// enum qemu_plugin_cb_flags
pub const CB_NO_REGS: c_int = 0;
pub const CB_R_REGS: c_int = 1;
pub const CB_RW_REGS: c_int = 2;
pub const CB_RW_REGS_PC: c_int = 3;
// enum qemu_plugin_mem_rw
pub const MEM_R: c_int = 1;
// enum qemu_plugin_cond
pub const COND_NE: c_int = 3;
// enum qemu_plugin_op
pub const INLINE_ADD_U64: c_int = 0;
pub const INLINE_STORE_U64: c_int = 1;
// enum qemu_plugin_discon_type
pub const DISCON_INTERRUPT: c_int = 1;
pub const DISCON_EXCEPTION: c_int = 2;
pub const DISCON_ALL: c_int = -1;
// enum qemu_plugin_mem_value_type
pub const MEM_VALUE_U64: c_int = 3;

#[repr(C)]
pub struct MemValue {
    pub kind: c_int,
    pub data: [u64; 2],
}

pub type VcpuUdataCb = extern "C" fn(vcpu: c_uint, userdata: *mut c_void);
pub type TbTransCb = extern "C" fn(tb: *mut Tb, userdata: *mut c_void);
pub type UdataCb = extern "C" fn(userdata: *mut c_void);
pub type DisconCb =
    extern "C" fn(vcpu: c_uint, kind: c_int, from_pc: u64, to_pc: u64, userdata: *mut c_void);
pub type MemCb = extern "C" fn(vcpu: c_uint, info: u32, vaddr: u64, userdata: *mut c_void);

/// The raw declarations (every one `unsafe` to call); used only by the wrappers below.
mod sys {
    use super::*;

    extern "C" {
        pub(super) fn qemu_plugin_register_vcpu_init_cb(
            id: PluginId,
            cb: VcpuUdataCb,
            userdata: *mut c_void,
        );
        pub(super) fn qemu_plugin_register_vcpu_tb_trans_cb(
            id: PluginId,
            cb: TbTransCb,
            userdata: *mut c_void,
        );
        pub(super) fn qemu_plugin_register_vcpu_discon_cb(
            id: PluginId,
            kind: c_int,
            cb: DisconCb,
            userdata: *mut c_void,
        );
        pub(super) fn qemu_plugin_register_atexit_cb(
            id: PluginId,
            cb: UdataCb,
            userdata: *mut c_void,
        );

        pub(super) fn qemu_plugin_register_vcpu_tb_exec_cb(
            tb: *mut Tb,
            cb: VcpuUdataCb,
            flags: c_int,
            userdata: *mut c_void,
        );
        pub(super) fn qemu_plugin_register_vcpu_tb_exec_cond_cb(
            tb: *mut Tb,
            cb: VcpuUdataCb,
            flags: c_int,
            cond: c_int,
            entry: U64,
            imm: u64,
            userdata: *mut c_void,
        );
        pub(super) fn qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb: *mut Tb,
            op: c_int,
            entry: U64,
            imm: u64,
        );
        pub(super) fn qemu_plugin_register_vcpu_insn_exec_cb(
            insn: *mut Insn,
            cb: VcpuUdataCb,
            flags: c_int,
            userdata: *mut c_void,
        );
        pub(super) fn qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
            insn: *mut Insn,
            op: c_int,
            entry: U64,
            imm: u64,
        );
        pub(super) fn qemu_plugin_register_vcpu_mem_cb(
            insn: *mut Insn,
            cb: MemCb,
            flags: c_int,
            rw: c_int,
            userdata: *mut c_void,
        );

        pub(super) fn qemu_plugin_tb_n_insns(tb: *const Tb) -> usize;
        pub(super) fn qemu_plugin_tb_vaddr(tb: *const Tb) -> u64;
        pub(super) fn qemu_plugin_tb_get_insn(tb: *const Tb, idx: usize) -> *mut Insn;
        pub(super) fn qemu_plugin_insn_data(
            insn: *const Insn,
            dest: *mut c_void,
            len: usize,
        ) -> usize;
        pub(super) fn qemu_plugin_insn_size(insn: *const Insn) -> usize;
        pub(super) fn qemu_plugin_insn_vaddr(insn: *const Insn) -> u64;
        pub(super) fn qemu_plugin_mem_size_shift(info: u32) -> c_uint;
        pub(super) fn qemu_plugin_mem_get_value(info: u32) -> MemValue;

        pub(super) fn qemu_plugin_scoreboard_new(element_size: usize) -> *mut RawScoreboard;
        pub(super) fn qemu_plugin_u64_get(entry: U64, vcpu_index: c_uint) -> u64;
        pub(super) fn qemu_plugin_scoreboard_find(
            score: *mut RawScoreboard,
            vcpu: c_uint,
        ) -> *mut c_void;

        pub(super) fn qemu_plugin_get_registers() -> *mut GArray;
        pub(super) fn qemu_plugin_read_register(
            handle: *mut Register,
            buf: *mut GByteArray,
        ) -> bool;
        pub(super) fn qemu_plugin_write_register(
            handle: *mut Register,
            buf: *mut GByteArray,
        ) -> bool;
        pub(super) fn qemu_plugin_set_pc(vaddr: u64) -> !;
        pub(super) fn qemu_plugin_read_memory_vaddr(
            addr: u64,
            data: *mut GByteArray,
            len: usize,
        ) -> bool;
        pub(super) fn qemu_plugin_write_memory_vaddr(addr: u64, data: *mut GByteArray) -> bool;
        pub(super) fn qemu_plugin_outs(string: *const c_char);

        // glib, from the QEMU process.
        pub(super) fn g_byte_array_new() -> *mut GByteArray;
        pub(super) fn g_byte_array_set_size(array: *mut GByteArray, len: c_uint)
            -> *mut GByteArray;
        pub(super) fn g_byte_array_free(array: *mut GByteArray, free_segment: c_int) -> *mut u8;
        pub(super) fn g_array_free(array: *mut GArray, free_segment: c_int) -> *mut c_char;
    }
}

/// Prints `msg` as is on QEMU's plugin output.
pub fn outs(msg: &str) {
    let s = CString::new(msg).unwrap_or_default();
    // SAFETY: a valid NUL-terminated string; QEMU copies it.
    unsafe { sys::qemu_plugin_outs(s.as_ptr()) };
}

/// What QEMU tells the plugin at install time, copied out of its `qemu_info_t` and `argv`.
pub struct Install {
    pub target: String,
    pub version_min: c_int,
    pub version_cur: c_int,
    pub system_emulation: bool,
    pub smp_vcpus: c_int,
    pub max_vcpus: c_int,
    pub args: Vec<String>,
}

impl Install {
    /// # Safety
    /// The arguments of `qemu_plugin_install` as QEMU passes them: a valid `info`, and `argc`
    /// NUL-terminated strings in `argv`.
    pub unsafe fn read(info: *const QemuInfo, argc: c_int, argv: *const *const c_char) -> Install {
        // SAFETY: per this function's contract.
        let info = unsafe { &*info };
        // SAFETY: per this function's contract (`target_name` is a C string).
        let target = unsafe { CStr::from_ptr(info.target_name) };
        let args = (0..argc as usize)
            .map(|i| {
                // SAFETY: per this function's contract, `i` < `argc`.
                unsafe { CStr::from_ptr(*argv.add(i)) }
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        Install {
            target: target.to_string_lossy().into_owned(),
            version_min: info.version_min,
            version_cur: info.version_cur,
            system_emulation: info.system_emulation,
            smp_vcpus: info.smp_vcpus,
            max_vcpus: info.max_vcpus,
            args,
        }
    }
}

// The registrations of plugin-wide callbacks (from `qemu_plugin_install`). Every callback is a
// function of the type v7 declares for it and gets a null userdata, which none reads.

pub fn register_vcpu_init_cb(id: PluginId, cb: VcpuUdataCb) {
    // SAFETY: see above; QEMU looks `id` up (it is the one QEMU passed to install).
    unsafe { sys::qemu_plugin_register_vcpu_init_cb(id, cb, null_mut()) }
}

pub fn register_vcpu_tb_trans_cb(id: PluginId, cb: TbTransCb) {
    // SAFETY: see above.
    unsafe { sys::qemu_plugin_register_vcpu_tb_trans_cb(id, cb, null_mut()) }
}

pub fn register_vcpu_discon_cb(id: PluginId, kind: c_int, cb: DisconCb) {
    // SAFETY: see above.
    unsafe { sys::qemu_plugin_register_vcpu_discon_cb(id, kind, cb, null_mut()) }
}

pub fn register_atexit_cb(id: PluginId, cb: UdataCb) {
    // SAFETY: see above.
    unsafe { sys::qemu_plugin_register_atexit_cb(id, cb, null_mut()) }
}

/// A scoreboard of `T`: one zeroed entry per vCPU, which QEMU keeps for the plugin's lifetime
/// (it is never freed here).
pub struct Scoreboard<T> {
    raw: *mut RawScoreboard,
    _entry: PhantomData<T>,
}

// SAFETY: the handle is an address QEMU keeps valid for the plugin's lifetime, made to be used
// from every vCPU thread; an entry is only dereferenced by its own vCPU (see `entry`).
unsafe impl<T> Send for Scoreboard<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Scoreboard<T> {}

impl<T> Scoreboard<T> {
    pub fn alloc() -> Scoreboard<T> {
        // SAFETY: a plain allocation of zeroed entries of `size_of::<T>()` bytes.
        let raw = unsafe { sys::qemu_plugin_scoreboard_new(std::mem::size_of::<T>()) };
        Scoreboard {
            raw,
            _entry: PhantomData,
        }
    }

    /// The u64 at `offset` (from `offset_of!`) in every entry, for inline operations.
    pub fn field(&self, offset: usize) -> U64 {
        assert!(
            offset % 8 == 0 && offset + 8 <= std::mem::size_of::<T>(),
            "scoreboard field at {offset} is not a u64 of the entry"
        );
        U64 {
            score: self.raw,
            offset,
        }
    }

    /// The u64 at `offset` of vCPU `vcpu`'s entry, read from any thread (QEMU's
    /// `qemu_plugin_u64_get`, as QEMU's own plugins read their counts at exit): what the vCPU
    /// last stored once it no longer runs, a value of the moment otherwise. `vcpu` must have
    /// started (its entry exists).
    pub fn get(&self, offset: usize, vcpu: c_uint) -> u64 {
        // SAFETY: a checked field of a live scoreboard; QEMU reads the entry.
        unsafe { sys::qemu_plugin_u64_get(self.field(offset), vcpu) }
    }

    /// vCPU `vcpu`'s entry. Dereferencing it is the caller's business: only vCPU `vcpu`'s thread
    /// may, because that vCPU's inline operations write it.
    pub fn entry(&self, vcpu: c_uint) -> *mut T {
        // SAFETY: a lookup in a live scoreboard; nothing is dereferenced here.
        unsafe { sys::qemu_plugin_scoreboard_find(self.raw, vcpu) as *mut T }
    }
}

/// A translation block, valid during the translation callback that received it (`'a`).
#[derive(Clone, Copy)]
pub struct TbHandle<'a> {
    raw: *mut Tb,
    _cb: PhantomData<&'a Tb>,
}

/// An instruction of a [`TbHandle`], valid as long as the block.
#[derive(Clone, Copy)]
pub struct InsnHandle<'a> {
    raw: *mut Insn,
    _cb: PhantomData<&'a Insn>,
}

// Registering per-block or per-instruction callbacks and inline operations: the callbacks have
// the types v7 declares; userdata is handed back to the callback as is, never dereferenced by
// QEMU; an inline operation's `U64` is a checked field of a live scoreboard (`Scoreboard::field`).
impl<'a> TbHandle<'a> {
    /// # Safety
    /// `raw` is the block QEMU passed to the translation callback that is running, and the
    /// handle does not outlive that callback.
    pub unsafe fn new(raw: *mut Tb) -> TbHandle<'a> {
        TbHandle {
            raw,
            _cb: PhantomData,
        }
    }

    pub fn n_insns(self) -> usize {
        // SAFETY: a live block (see `new`).
        unsafe { sys::qemu_plugin_tb_n_insns(self.raw) }
    }

    pub fn vaddr(self) -> u64 {
        // SAFETY: a live block.
        unsafe { sys::qemu_plugin_tb_vaddr(self.raw) }
    }

    /// Instruction `i` (< [`Self::n_insns`]).
    pub fn insn(self, i: usize) -> InsnHandle<'a> {
        assert!(i < self.n_insns(), "instruction {i} beyond the block");
        InsnHandle {
            // SAFETY: a live block, an index in range (QEMU returns NULL beyond it).
            raw: unsafe { sys::qemu_plugin_tb_get_insn(self.raw, i) },
            _cb: PhantomData,
        }
    }

    pub fn register_exec_cb(self, cb: VcpuUdataCb, flags: c_int, userdata: *mut c_void) {
        // SAFETY: a live block; see the comment above this `impl`.
        unsafe { sys::qemu_plugin_register_vcpu_tb_exec_cb(self.raw, cb, flags, userdata) }
    }

    /// `cb` runs when `entry` (this vCPU's) compares with `imm` as `cond` says.
    pub fn register_exec_cond_cb(
        self,
        cb: VcpuUdataCb,
        flags: c_int,
        cond: c_int,
        entry: U64,
        imm: u64,
        userdata: *mut c_void,
    ) {
        // SAFETY: a live block; see the comment above this `impl`.
        unsafe {
            sys::qemu_plugin_register_vcpu_tb_exec_cond_cb(
                self.raw, cb, flags, cond, entry, imm, userdata,
            )
        }
    }

    pub fn register_exec_inline_per_vcpu(self, op: c_int, entry: U64, imm: u64) {
        // SAFETY: a live block; see the comment above this `impl`.
        unsafe { sys::qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(self.raw, op, entry, imm) }
    }
}

impl InsnHandle<'_> {
    /// Copies the instruction's bytes (as many as fit) into `dest`; returns how many.
    pub fn data(self, dest: &mut [u8]) -> usize {
        // SAFETY: a live instruction; QEMU writes at most `dest.len()` bytes.
        let n = unsafe {
            sys::qemu_plugin_insn_data(self.raw, dest.as_mut_ptr() as *mut c_void, dest.len())
        };
        n.min(dest.len())
    }

    pub fn vaddr(self) -> u64 {
        // SAFETY: a live instruction.
        unsafe { sys::qemu_plugin_insn_vaddr(self.raw) }
    }

    pub fn size(self) -> usize {
        // SAFETY: a live instruction.
        unsafe { sys::qemu_plugin_insn_size(self.raw) }
    }

    pub fn register_exec_cb(self, cb: VcpuUdataCb, flags: c_int, userdata: *mut c_void) {
        // SAFETY: a live instruction; see the comment above `impl TbHandle`.
        unsafe { sys::qemu_plugin_register_vcpu_insn_exec_cb(self.raw, cb, flags, userdata) }
    }

    pub fn register_exec_inline_per_vcpu(self, op: c_int, entry: U64, imm: u64) {
        // SAFETY: a live instruction; see the comment above `impl TbHandle`.
        unsafe {
            sys::qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(self.raw, op, entry, imm)
        }
    }

    pub fn register_mem_cb(self, cb: MemCb, flags: c_int, rw: c_int, userdata: *mut c_void) {
        // SAFETY: a live instruction; see the comment above `impl TbHandle`.
        unsafe { sys::qemu_plugin_register_vcpu_mem_cb(self.raw, cb, flags, rw, userdata) }
    }
}

/// The size of a memory access, as log2 of bytes (`info` from a memory callback).
pub fn mem_size_shift(info: u32) -> c_uint {
    // SAFETY: `info` is a value (bit fields), not an address.
    unsafe { sys::qemu_plugin_mem_size_shift(info) }
}

/// The value a memory access read or wrote (`info` from a memory callback).
pub fn mem_get_value(info: u32) -> MemValue {
    // SAFETY: as `mem_size_shift`; QEMU reads the value of the access under way.
    unsafe { sys::qemu_plugin_mem_get_value(info) }
}

/// A register of the vCPUs, from [`find_registers`]. Read and write it only from a vCPU
/// callback registered with register access (write access for `write`), as the API requires:
/// it names that register of the vCPU the callback runs on.
#[derive(Clone, Copy)]
pub struct Reg(*mut Register);

// SAFETY: register handles are opaque numbers QEMU hands out, never dereferenced here; which
// vCPU's register they reach depends on the callback that uses them, not on the thread that
// holds them.
unsafe impl Send for Reg {}
// SAFETY: a `Reg` has no interior mutability and is `Copy`: a shared one gives a thread
// nothing but a copy of the handle, which `Send` already allows.
unsafe impl Sync for Reg {}

/// The handles of the named registers (None for those the vCPU lacks). Call from a vCPU
/// initialisation callback, as the API requires.
pub fn find_registers<const N: usize>(names: [&[u8]; N]) -> [Option<Reg>; N] {
    let mut found = [None; N];
    // SAFETY: called in vCPU context as the API requires; the array is freed here, its strings
    // are QEMU's and only read.
    unsafe {
        let arr = sys::qemu_plugin_get_registers();
        if !arr.is_null() {
            let descs = std::slice::from_raw_parts(
                (*arr).data as *const RegDescriptor,
                (*arr).len as usize,
            );
            for d in descs {
                let name = CStr::from_ptr(d.name).to_bytes();
                if let Some(i) = names.iter().position(|n| *n == name) {
                    found[i] = Some(Reg(d.handle));
                }
            }
            sys::g_array_free(arr, 1);
        }
    }
    found
}

impl Reg {
    /// Its value (little-endian, up to 8 bytes; 0 if QEMU refuses the read).
    pub fn read(self) -> u64 {
        // SAFETY: a handle from qemu_plugin_get_registers(), used from a callback with register
        // access (see `Reg`); the array is ours and freed here.
        unsafe {
            let buf = sys::g_byte_array_new();
            let ok = sys::qemu_plugin_read_register(self.0, buf);
            let mut v = [0u8; 8];
            if ok {
                let n = ((*buf).len as usize).min(8);
                std::ptr::copy_nonoverlapping((*buf).data, v.as_mut_ptr(), n);
            }
            sys::g_byte_array_free(buf, 1);
            u64::from_le_bytes(v)
        }
    }

    /// Sets it to `v` (8 bytes: the size of the 64-bit general registers).
    pub fn write(self, v: u64) {
        // SAFETY: as `read`; the array is sized to the 8 bytes copied into it.
        unsafe {
            let buf = sys::g_byte_array_new();
            sys::g_byte_array_set_size(buf, 8);
            std::ptr::copy_nonoverlapping(v.to_le_bytes().as_ptr(), (*buf).data, 8);
            sys::qemu_plugin_write_register(self.0, buf);
            sys::g_byte_array_free(buf, 1);
        }
    }
}

/// `len` bytes of guest virtual memory at `addr` (None if they cannot be read). Call from a
/// vCPU callback: the address is translated by that vCPU.
pub fn read_mem(addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut v = vec![0; len];
    read_mem_into(addr, &mut v).then_some(v)
}

/// Fills `dest` from guest virtual memory at `addr`; false if it cannot be read. Call from a
/// vCPU callback: the address is translated by that vCPU (its page tables, as a debugger's
/// access: no fault is raised).
pub fn read_mem_into(addr: u64, dest: &mut [u8]) -> bool {
    if dest.is_empty() {
        return true;
    }
    // SAFETY: called from a vCPU callback; the array is ours and freed here, and read only up to
    // the length QEMU filled.
    unsafe {
        let buf = sys::g_byte_array_new();
        let ok = sys::qemu_plugin_read_memory_vaddr(addr, buf, dest.len())
            && (*buf).len as usize >= dest.len();
        if ok {
            std::ptr::copy_nonoverlapping((*buf).data, dest.as_mut_ptr(), dest.len());
        }
        sys::g_byte_array_free(buf, 1);
        ok
    }
}

/// Writes `data` to guest virtual memory at `addr`; false if it cannot be written (QEMU then
/// may have written a first part). Call from a vCPU callback: the address is translated by that
/// vCPU, as for [`read_mem_into`].
pub fn write_mem(addr: u64, data: &[u8]) -> bool {
    if data.is_empty() {
        return true;
    }
    // SAFETY: called from a vCPU callback; the array is ours, sized to the bytes copied into it,
    // and freed here.
    unsafe {
        let buf = sys::g_byte_array_new();
        sys::g_byte_array_set_size(buf, data.len() as c_uint);
        std::ptr::copy_nonoverlapping(data.as_ptr(), (*buf).data, data.len());
        let ok = sys::qemu_plugin_write_memory_vaddr(addr, buf);
        sys::g_byte_array_free(buf, 1);
        ok
    }
}

/// Resumes the vCPU at `pc`: does not return.
///
/// # Safety
/// Call only from a callback registered with `CB_RW_REGS_PC`, with no value that has a
/// destructor live in any frame between that callback and here (lock guards, buffers): QEMU
/// leaves them by `longjmp`, skipping those destructors.
pub unsafe fn set_pc(pc: u64) -> ! {
    // SAFETY: per this function's contract.
    unsafe { sys::qemu_plugin_set_pc(pc) }
}
