// SPDX-License-Identifier: GPL-2.0

//! The part of QEMU's TCG plugin API (version 7, QEMU 11.1) that lbr-emu uses, declared by hand.
//!
//! No binding crate covers v7 (the published `qemu-plugin` crate stops at v5, which QEMU 11.1
//! refuses) and Debian ships no plugin header in its binary packages. Every declaration here was
//! checked against `include/plugins/qemu-plugin.h` of the v7 API: the version history in the
//! header ("version 7: add userdata to all plugin callbacks"), the registration functions for
//! vCPU-init, TB-translation, discontinuity and atexit callbacks taking a trailing `void
//! *userdata` and their callbacks receiving it instead of a leading plugin id; `read_register` /
//! `write_register` returning `bool` (v6); `qemu_plugin_reg_descriptor` with `is_readonly`;
//! `qemu_plugin_set_pc` (v6, only from callbacks registered with QEMU_PLUGIN_CB_RW_REGS_PC; it
//! does not return). The version QEMU reports is checked at install time (`plugin.rs`).
//!
//! glib types (GArray, GByteArray) are declared with the two fields plugins may read.

use std::ffi::{c_char, c_int, c_uint, c_void};

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
pub struct Scoreboard {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct Register {
    _opaque: [u8; 0],
}

/// `qemu_plugin_u64`: one u64 member of every vCPU's scoreboard entry.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct U64 {
    pub score: *mut Scoreboard,
    pub offset: usize,
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

extern "C" {
    pub fn qemu_plugin_register_vcpu_init_cb(id: PluginId, cb: VcpuUdataCb, userdata: *mut c_void);
    pub fn qemu_plugin_register_vcpu_tb_trans_cb(
        id: PluginId,
        cb: TbTransCb,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_vcpu_discon_cb(
        id: PluginId,
        kind: c_int,
        cb: DisconCb,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_atexit_cb(id: PluginId, cb: UdataCb, userdata: *mut c_void);

    pub fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut Tb,
        cb: VcpuUdataCb,
        flags: c_int,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_vcpu_tb_exec_cond_cb(
        tb: *mut Tb,
        cb: VcpuUdataCb,
        flags: c_int,
        cond: c_int,
        entry: U64,
        imm: u64,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
        tb: *mut Tb,
        op: c_int,
        entry: U64,
        imm: u64,
    );
    pub fn qemu_plugin_register_vcpu_insn_exec_cb(
        insn: *mut Insn,
        cb: VcpuUdataCb,
        flags: c_int,
        userdata: *mut c_void,
    );
    pub fn qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
        insn: *mut Insn,
        op: c_int,
        entry: U64,
        imm: u64,
    );
    pub fn qemu_plugin_register_vcpu_mem_cb(
        insn: *mut Insn,
        cb: MemCb,
        flags: c_int,
        rw: c_int,
        userdata: *mut c_void,
    );

    pub fn qemu_plugin_tb_n_insns(tb: *const Tb) -> usize;
    pub fn qemu_plugin_tb_vaddr(tb: *const Tb) -> u64;
    pub fn qemu_plugin_tb_get_insn(tb: *const Tb, idx: usize) -> *mut Insn;
    pub fn qemu_plugin_insn_data(insn: *const Insn, dest: *mut c_void, len: usize) -> usize;
    pub fn qemu_plugin_insn_size(insn: *const Insn) -> usize;
    pub fn qemu_plugin_insn_vaddr(insn: *const Insn) -> u64;
    pub fn qemu_plugin_mem_size_shift(info: u32) -> c_uint;
    pub fn qemu_plugin_mem_get_value(info: u32) -> MemValue;

    pub fn qemu_plugin_scoreboard_new(element_size: usize) -> *mut Scoreboard;
    pub fn qemu_plugin_scoreboard_find(score: *mut Scoreboard, vcpu: c_uint) -> *mut c_void;

    pub fn qemu_plugin_get_registers() -> *mut GArray;
    pub fn qemu_plugin_read_register(handle: *mut Register, buf: *mut GByteArray) -> bool;
    pub fn qemu_plugin_write_register(handle: *mut Register, buf: *mut GByteArray) -> bool;
    pub fn qemu_plugin_set_pc(vaddr: u64) -> !;
    pub fn qemu_plugin_read_memory_vaddr(addr: u64, data: *mut GByteArray, len: usize) -> bool;
    pub fn qemu_plugin_outs(string: *const c_char);

    // glib, from the QEMU process.
    pub fn g_byte_array_new() -> *mut GByteArray;
    pub fn g_byte_array_set_size(array: *mut GByteArray, len: c_uint) -> *mut GByteArray;
    pub fn g_byte_array_free(array: *mut GByteArray, free_segment: c_int) -> *mut u8;
    pub fn g_array_free(array: *mut GArray, free_segment: c_int) -> *mut c_char;
}
