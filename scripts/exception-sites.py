#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Exception-table sites whose instruction straddles a page, in kernel modules and vmlinux.

lbr-dump's entry stubs recognise the #GP, #NP and #SS that the kernel fixes up by the
instruction at the saved RIP (asm/stubs.S LBR_INSN_AT_RIP: RDMSR, WRMSR, WRMSRNS, segment
loads, a user signal frame's FXRSTOR/XRSTOR), reading its first 4 bytes but never past RIP's
page: the bytes on the next page read as zero. This lists, for each ELF file given, every
exception-table entry (`__ex_table`: its first field points at the instruction that may fault)
whose instruction straddles a page where the kernel runs it, and whether the stubs' reading
then takes it for another instruction than it is (`affected`: a fixed-up fault there is
captured, as a crash would be).

Where an instruction lies in its page:
  - a module (ET_REL .ko): the loader puts its executable sections that are not `.init*` one
    after the other, in the file's order, each at its own alignment (kernel/module/main.c
    layout_sections(), module_get_offset_and_type(); `.exit*` is core text with
    CONFIG_MODULE_UNLOAD), into one page-aligned allocation (execmem_alloc(): PAGE_ALIGN'ed
    sizes from vmalloc or the ROX cache, mm/execmem.c); `.init*` text the same way into
    another. The entry's relocation (R_X86_64_PC32 against a section symbol, usually) gives the
    section and offset.
  - vmlinux (ET_EXEC): its link address; KASLR moves the kernel by a multiple of 2 MiB
    (CONFIG_PHYSICAL_ALIGN), which keeps the offset in the page. The entry's field is resolved:
    the instruction is the field's address plus its value.

Instruction lengths come from the build root's llvm-objdump (scripts/common.sh in_root), asked
only about the sites in a page's last 15 bytes (the only ones that can straddle).

Usage: scripts/exception-sites.py [-v] FILE...   (kvm.ko kvm-intel.ko kvm-amd.ko, vmlinux, ...)
Prints one line per file (entries, those at instructions the stubs recognise, those close
enough to a page's end to straddle, those that do, and of them the affected), then one per
straddling site (-v: also the sites near a page's end that do not straddle). Exit status 0
(a report, not a check).
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

PAGE = 4096
MAX_INSN = 15
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
SHT_SYMTAB, SHT_RELA = 2, 4
R_X86_64_PC32, R_X86_64_PLT32 = 2, 4
ENTRY = 12  # struct exception_table_entry: int insn, fixup, data


class Elf:
    def __init__(self, path: Path):
        self.path = path
        self.b = b = path.read_bytes()
        if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
            raise SystemExit(f"{path}: not a 64-bit little-endian ELF file")
        self.type = struct.unpack_from("<H", b, 16)[0]
        shoff, = struct.unpack_from("<Q", b, 40)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 58)
        self.sections = []
        for i in range(shnum):
            name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", b, shoff + i * shentsize)
            self.sections.append(dict(name=name, type=typ, flags=flags, addr=addr, off=off, size=size,
                                      link=link, info=info, align=align))
        strtab = self.sections[shstrndx]
        for s in self.sections:
            s["name"] = self.cstr(strtab["off"] + s["name"])

    def cstr(self, off: int) -> str:
        return self.b[off:self.b.index(b"\0", off)].decode()

    def section(self, name: str):
        return next((s for s in self.sections if s["name"] == name), None)

    def data(self, s, off: int, n: int) -> bytes:
        return self.b[s["off"] + off:s["off"] + min(off + n, s["size"])]

    def symbols(self):
        sym = next(s for s in self.sections if s["type"] == SHT_SYMTAB)
        strs = self.sections[sym["link"]]
        out = []
        for off in range(sym["off"], sym["off"] + sym["size"], 24):
            name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", self.b, off)
            out.append((self.cstr(strs["off"] + name), shndx, value))
        return out


def module_layout(elf: Elf) -> dict[int, tuple[str, int]]:
    """{section index: (region, offset in it)} of a module's executable sections as the 7.3
    loader lays them out ("text" or "init-text", each region page-aligned)."""
    size = {"text": 0, "init-text": 0}
    out = {}
    for i, s in enumerate(elf.sections):
        if s["flags"] & (SHF_ALLOC | SHF_EXECINSTR) != SHF_ALLOC | SHF_EXECINSTR:
            continue
        region = "init-text" if s["name"].startswith(".init") else "text"
        align = s["align"] or 1
        off = (size[region] + align - 1) // align * align
        out[i] = (region, off)
        size[region] = off + s["size"]
    return out


def sites(elf: Elf):
    """(section index, offset in that section, where: a page offset's base) of every
    exception-table entry's instruction."""
    ex = elf.section("__ex_table")
    if ex is None:
        return []
    if elf.type == 1:  # ET_REL: the relocations of the entries' first fields
        ex_index = elf.sections.index(ex)
        rela = next((s for s in elf.sections if s["type"] == SHT_RELA and s["info"] == ex_index), None)
        syms = elf.symbols()
        out = []
        for off in range(rela["off"], rela["off"] + rela["size"], 24):
            r_off, r_info, addend = struct.unpack_from("<QQq", elf.b, off)
            if r_off % ENTRY or r_info & 0xffffffff not in (R_X86_64_PC32, R_X86_64_PLT32):
                continue
            _, shndx, value = syms[r_info >> 32]
            out.append((shndx, value + addend))
        return out
    out = []
    for off in range(0, ex["size"], ENTRY):
        rel, = struct.unpack_from("<i", elf.b, ex["off"] + off)
        addr = ex["addr"] + off + rel
        i = next((i for i, s in enumerate(elf.sections) if s["flags"] & SHF_EXECINSTR
                  and s["addr"] <= addr < s["addr"] + s["size"]), None)
        if i is not None:
            out.append((i, addr - elf.sections[i]["addr"]))
    return out


def kinds(b4: bytes, ac: bool) -> set[str]:
    """What the stubs' recognition (asm/stubs.S LBR_INSN_AT_RIP, LBR_SEG_LOAD_FAULT,
    LBR_GP_FIXED_UP) takes the 4 bytes `b4` for: "msr", "segment load", "xrstor" (a user
    signal frame's restore: only with RFLAGS.AC, `ac`)."""
    eax = int.from_bytes(b4.ljust(4, b"\0")[:4], "little")
    if 0x40 <= eax & 0xff < 0x50 or eax & 0xff == 0x3e:
        eax >>= 8
    out = set()
    if eax & 0xffffff == 0x000ff2 or eax & 0xff == 0x8e:
        out.add("segment load")
    modrm = eax >> 16 & 0xff
    if eax & 0xffff == 0xae0f and modrm & 0x18 == 0x08 and modrm & 0xc0 != 0xc0 and ac:
        out.add("xrstor")
    if eax & 0xffff in (0x300f, 0x320f) or eax & 0xffffff == 0xc6010f:
        out.add("msr")
    return out


def disassemble(elf: Elf, wanted: list[tuple[int, int]]) -> dict[tuple[int, int], tuple[int, str]]:
    """{(section, offset): (length, text)} of the instructions at `wanted`, from llvm-objdump."""
    if not wanted:
        return {}
    args = []
    for i, off in wanted:
        s = elf.sections[i]
        start = s["addr"] + off if elf.type != 1 else off
        args.append(f"{s['name']} {start:#x} {start + 1:#x}")
    script = ('f=$1; shift; for a in "$@"; do set -- $a; echo "@@ $1 $2"; '
              'llvm-objdump -d --no-print-imm-hex --section="$1" --start-address=$2 --stop-address=$3 "$f"; done')
    p = subprocess.run(["bash", "-c", 'source scripts/common.sh; in_root bash -c "$@"', "_", script, "_",
                        str(elf.path.resolve()), *args],
                       cwd=Path(__file__).resolve().parent.parent, text=True, capture_output=True)
    if p.returncode:
        raise SystemExit(f"llvm-objdump failed: {p.stderr}")
    out = {}
    key = None
    for line in p.stdout.splitlines():
        if line.startswith("@@ "):
            _, name, start = line.split()
            i = next(j for j, _ in wanted if elf.sections[j]["name"] == name
                     and (elf.sections[j]["addr"] if elf.type != 1 else 0) + _ == int(start, 16))
            key = (i, int(start, 16) - (elf.sections[i]["addr"] if elf.type != 1 else 0))
            continue
        m = re.match(r"\s*([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)\s*(.*)$", line)
        if m and key is not None and key not in out:
            out[key] = (len(m[2].split()), m[3].strip())
    return out


def report(path: Path) -> None:
    elf = Elf(path)
    layout = module_layout(elf) if elf.type == 1 else None
    found = []
    for i, off in sites(elf):
        s = elf.sections[i]
        if layout is not None:
            if i not in layout:
                continue
            region, base = layout[i]
        else:
            region, base = "vmlinux", s["addr"]
        page_off = (base + off) % PAGE
        if page_off > PAGE - MAX_INSN:
            found.append((i, off, region, page_off))
    insns = disassemble(elf, [(i, off) for i, off, _, _ in found])
    lines, near = [], []
    affected = 0
    for i, off, region, page_off in found:
        length, text = insns.get((i, off), (0, "?"))
        if page_off + length <= PAGE:
            if VERBOSE:
                near.append(f"  (not straddling: {elf.sections[i]['name']}+{off:#x}, {region} page offset "
                            f"{page_off:#x}, {length} bytes: {text})")
            continue
        full = elf.data(elf.sections[i], off, 4)
        cut = full[:PAGE - page_off]
        hit = any(kinds(full, ac) != kinds(cut, ac) for ac in (False, True))
        affected += hit
        lines.append(f"  {elf.sections[i]['name']}+{off:#x} ({region} page offset {page_off:#x}, "
                     f"{length} bytes): {text}: {'affected' if hit else 'not affected'}")
    every = sites(elf)
    known = sum(bool(kinds(elf.data(elf.sections[i], off, 4), True)) for i, off in every)
    print(f"{path.name}: {len(every)} exception-table entries ({known} at instructions the stubs "
          f"recognise), {len(found)} in a page's last {MAX_INSN - 1} bytes, {len(lines)} straddle a page, "
          f"{affected} affected")
    for line in lines + near:
        print(line)


VERBOSE = False


def main(argv: list[str]) -> int:
    global VERBOSE
    if argv[:1] == ["-v"]:
        VERBOSE, argv = True, argv[1:]
    if not argv:
        print("usage: scripts/exception-sites.py [-v] FILE...", file=sys.stderr)
        return 2
    for a in argv:
        report(Path(a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
