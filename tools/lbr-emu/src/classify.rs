// SPDX-License-Identifier: GPL-2.0

//! Classifies x86-64 instructions from their bytes: which of them are branches (and of which
//! kind, for the recorders' type filters and Arch LBR's branch type), and which ones the emulator
//! has to act on (`cpuid`, `rdmsr`, `wrmsr`, `lidt`).
//!
//! QEMU has already found the instruction boundaries: the bytes given here are exactly one
//! instruction. Only the legacy prefixes, REX and the opcode (plus ModRM.reg for group 5 and
//! `0f 01`) matter, so this is a table lookup, not a decoder. Opcode maps: Intel SDM vol. 2,
//! appendix A; AMD APM vol. 3, appendix A.
//!
//! A branch of one of these kinds, once taken, is a [`Branch`]: what the recorders
//! (`crate::recorder`) and the BTS store (`crate::bts`) record.

/// What an instruction is to the emulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insn {
    Branch(Kind),
    Cpuid,
    Rdmsr,
    Wrmsr,
    /// `lidt m`: the emulator follows the IDT base to recognise #DB delivery.
    Lidt,
    Other,
}

/// Branch kinds, as the recorders' filters distinguish them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Conditional jump (Jcc, LOOPcc, JrCXZ).
    Jcc = 1,
    /// Near relative jump.
    JmpRel = 2,
    /// Near indirect jump.
    JmpInd = 3,
    /// Near relative call.
    CallRel = 4,
    /// Near indirect call.
    CallInd = 5,
    /// Near return.
    Ret = 6,
    /// Far transfers: far jmp/call/ret, IRET, SYSCALL/SYSRET, SYSENTER/SYSEXIT, and (recorded
    /// from the discontinuity callback) interrupts and exceptions.
    Far = 7,
}

impl Kind {
    /// The code stored in the per-vCPU scoreboard (0 = no branch).
    pub fn code(self) -> u64 {
        self as u64
    }

    pub fn from_code(code: u64) -> Option<Kind> {
        Some(match code {
            1 => Kind::Jcc,
            2 => Kind::JmpRel,
            3 => Kind::JmpInd,
            4 => Kind::CallRel,
            5 => Kind::CallInd,
            6 => Kind::Ret,
            7 => Kind::Far,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Jcc => "jcc",
            Kind::JmpRel => "jmp",
            Kind::JmpInd => "jmp_ind",
            Kind::CallRel => "call",
            Kind::CallInd => "call_ind",
            Kind::Ret => "ret",
            Kind::Far => "far",
        }
    }
}

/// Classifies one instruction (64-bit mode; in 16/32-bit code 0x40..0x4f are INC/DEC, which QEMU
/// hands over as one-byte instructions and which then classify as `Other`, as they should).
pub fn classify(bytes: &[u8]) -> Insn {
    let mut i = 0;
    // Legacy prefixes (group 1-4), then at most one REX.
    while i < bytes.len()
        && matches!(
            bytes[i],
            0x66 | 0x67 | 0xf0 | 0xf2 | 0xf3 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65
        )
    {
        i += 1;
    }
    if i + 1 < bytes.len() && (0x40..=0x4f).contains(&bytes[i]) {
        i += 1;
    }
    let Some(&op) = bytes.get(i) else {
        return Insn::Other;
    };
    let modrm = bytes.get(i + 1).copied();
    let reg = |m: Option<u8>| m.map(|m| (m >> 3) & 7);
    match op {
        0x70..=0x7f | 0xe0..=0xe3 => Insn::Branch(Kind::Jcc),
        0xeb | 0xe9 => Insn::Branch(Kind::JmpRel),
        0xe8 => Insn::Branch(Kind::CallRel),
        0xc3 | 0xc2 => Insn::Branch(Kind::Ret),
        0xcb | 0xca | 0xcf | 0xea | 0x9a => Insn::Branch(Kind::Far),
        0xff => match reg(modrm) {
            Some(2) => Insn::Branch(Kind::CallInd),
            Some(4) => Insn::Branch(Kind::JmpInd),
            Some(3) | Some(5) => Insn::Branch(Kind::Far),
            _ => Insn::Other,
        },
        0x0f => {
            let Some(&op2) = bytes.get(i + 1) else {
                return Insn::Other;
            };
            let modrm = bytes.get(i + 2).copied();
            match op2 {
                0x80..=0x8f => Insn::Branch(Kind::Jcc),
                0x05 | 0x07 | 0x34 | 0x35 => Insn::Branch(Kind::Far),
                0xa2 => Insn::Cpuid,
                0x32 => Insn::Rdmsr,
                0x30 => Insn::Wrmsr,
                // 0f 01 /3 with a memory operand is LIDT (mod == 3 encodes SVM instructions).
                0x01 if modrm.is_some_and(|m| m >> 6 != 3) && reg(modrm) == Some(3) => Insn::Lidt,
                _ => Insn::Other,
            }
        }
        _ => Insn::Other,
    }
}

/// One taken branch as the emulator saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branch {
    pub from: u64,
    pub to: u64,
    pub kind: Kind,
    pub cycles: u64,
}

impl Branch {
    pub fn mispredicted(&self) -> bool {
        matches!(self.kind, Kind::JmpInd | Kind::CallInd | Kind::Ret)
    }
    pub(crate) fn ends_in_kernel(&self) -> bool {
        self.to >> 63 == 1
    }
    pub(crate) fn cycles16(&self) -> u64 {
        self.cycles.min(0xffff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Encodings as objdump shows them for the kernel's own code.
    #[test]
    fn branches() {
        let cases: &[(&[u8], Insn)] = &[
            (&[0x74, 0x05], Insn::Branch(Kind::Jcc)),             // je
            (&[0x0f, 0x85, 1, 0, 0, 0], Insn::Branch(Kind::Jcc)), // jne rel32
            (&[0xe3, 0x02], Insn::Branch(Kind::Jcc)),             // jrcxz
            (&[0xeb, 0xfe], Insn::Branch(Kind::JmpRel)),          // jmp rel8
            (&[0xe9, 0, 0, 0, 0], Insn::Branch(Kind::JmpRel)),    // jmp rel32
            (&[0xe8, 0, 0, 0, 0], Insn::Branch(Kind::CallRel)),   // call rel32
            (&[0xff, 0xd0], Insn::Branch(Kind::CallInd)),         // call *%rax
            (&[0x41, 0xff, 0xd3], Insn::Branch(Kind::CallInd)),   // call *%r11
            (&[0xff, 0xe0], Insn::Branch(Kind::JmpInd)),          // jmp *%rax
            (&[0x3e, 0xff, 0xe0], Insn::Branch(Kind::JmpInd)),    // notrack jmp *%rax
            (&[0xff, 0x24, 0xc5, 0, 0, 0, 0], Insn::Branch(Kind::JmpInd)), // jmp *(,%rax,8)
            (&[0xc3], Insn::Branch(Kind::Ret)),                   // ret
            (&[0xf3, 0xc3], Insn::Branch(Kind::Ret)),             // rep ret
            (&[0xc2, 8, 0], Insn::Branch(Kind::Ret)),             // ret $8
            (&[0x48, 0xcf], Insn::Branch(Kind::Far)),             // iretq
            (&[0x0f, 0x05], Insn::Branch(Kind::Far)),             // syscall
            (&[0x48, 0x0f, 0x07], Insn::Branch(Kind::Far)),       // sysretq
            (&[0x48, 0xcb], Insn::Branch(Kind::Far)),             // lretq
            (&[0xff, 0x1c, 0x24], Insn::Branch(Kind::Far)),       // lcall *(%rsp)
        ];
        for (bytes, want) in cases {
            assert_eq!(classify(bytes), *want, "{bytes:02x?}");
        }
    }

    #[test]
    fn non_branches() {
        let cases: &[(&[u8], Insn)] = &[
            (&[0x0f, 0xa2], Insn::Cpuid),
            (&[0x0f, 0x32], Insn::Rdmsr),
            (&[0x0f, 0x30], Insn::Wrmsr),
            (&[0x0f, 0x01, 0x18], Insn::Lidt), // lidt (%rax)
            (&[0x0f, 0x01, 0x1d, 0, 0, 0, 0], Insn::Lidt), // lidt rip-relative
            (&[0x0f, 0x01, 0xd8], Insn::Other), // vmrun (mod == 3)
            (&[0x0f, 0x01, 0x10], Insn::Other), // lgdt
            (&[0xff, 0xc0], Insn::Other),      // inc %eax
            (&[0xff, 0x30], Insn::Other),      // push (%rax)
            (&[0xcc], Insn::Other),            // int3: an exception, seen as a discontinuity
            (&[0x0f, 0x0b], Insn::Other),      // ud2: likewise
            (&[0xf3, 0x48, 0xa5], Insn::Other), // rep movsq
            (&[0x90], Insn::Other),
            (&[0xf3, 0x0f, 0x1e, 0xfa], Insn::Other), // endbr64
        ];
        for (bytes, want) in cases {
            assert_eq!(classify(bytes), *want, "{bytes:02x?}");
        }
    }

    #[test]
    fn kind_codes_round_trip() {
        for k in [
            Kind::Jcc,
            Kind::JmpRel,
            Kind::JmpInd,
            Kind::CallRel,
            Kind::CallInd,
            Kind::Ret,
            Kind::Far,
        ] {
            assert_eq!(Kind::from_code(k.code()), Some(k));
        }
        assert_eq!(Kind::from_code(0), None);
    }
}
