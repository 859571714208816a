# SPDX-License-Identifier: GPL-2.0
"""lbr-decode end to end: a crash under the emulator, decoded from the serial log and from a
memory dump of the same guest (QMP dump-guest-memory), checked against each other, against the
kernel's own %pS symbols and against the emulator's ground truth; then the bad inputs a user
meets (the wrong vmlinux, a truncated dump, an ELF file that is not a dump, a log without
snapshots).
"""

import functools
import json
import re
import struct
import subprocess
import tempfile
from pathlib import Path

from harness import CRASH, CRASH_BUILD, MODULE, boot, decode, in_root, kdump, symbols, tail
from records import assert_decoded_equals_freeze, decode_ler, emulated, freeze_records
from vm import REPO, kernel_dir


@functools.cache
def crashed():
    """One crash (a call through a corrupted pointer), its console log and memory dump."""
    res = boot(finish=False, name="decode-crash", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
             timeout=300, dump_after="---[ end trace",
             script=f"insmod {MODULE} enable=1\nsh -c 'insmod {CRASH} crash=jump' || true\nsleep 600\n")
    assert "lbr_dump: v2 " in res.console, "no snapshot printed:\n" + tail(res.console)
    assert res.dump is not None, "no memory dump was made:\n" + tail(res.console)
    return res


def place(p):
    return (p["addr"], p["symbol"])


def test_log_decodes_with_source_lines(r):
    res = crashed()
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["version"] == 1
    assert doc["warnings"] == [], doc["warnings"]
    assert doc["kaslr_offset"], "no KASLR offset recovered"
    [s] = doc["snapshots"]
    assert s["vector"] == 14 and s["complete"], s
    recs = s["records"]
    assert len(recs) == 32, len(recs)
    # Every symbol is recomputed from the ELF files (no "printed" means it equals the kernel's
    # %pS); vmlinux addresses get source lines from DWARF.
    for rec in recs:
        for p in (rec["from"], rec["to"]):
            assert "printed" not in p, p
    kernel = [p for rec in recs for p in (rec["from"], rec["to"]) if p.get("image") == "vmlinux"]
    assert kernel and all(p["frames"] and p["frames"][0]["file"] for p in kernel), kernel
    # Line 0 (code the compiler made up) gives a file without a line; most have one.
    with_line = [p for p in kernel if p["frames"][0]["line"]]
    assert len(with_line) >= 0.8 * len(kernel), [p for p in kernel if p not in with_line]
    caller = [rec for rec in recs[1:6] if rec["from"]["symbol"].startswith("lbr_crash_jump+")]
    assert caller and caller[0]["from"]["image"] == "lbr_crash", recs[:6]
    assert any(f["file"].endswith("lbr_crash.c") for f in caller[0]["from"]["frames"]), caller[0]
    # The branch to lbr_crash_jump() is in init text (lbr_crash_init is __init), whose section
    # offsets coincide with core text's: its source line must be that branch's line in the source
    # (the dispatch through the table of crash types), not a line of whatever core-text function
    # has the same offset.
    src = (REPO / "tests" / "modules" / "lbr_crash" / "lbr_crash.c").read_text().splitlines()
    call_line = 1 + next(i for i, l in enumerate(src) if l.strip() == "return t->fn();")
    # (The dispatch is an indirect branch: the record from init_module enters the retpoline thunk,
    # whose two hops end at lbr_crash_jump+0x0, or it lands there itself where the kernel patched
    # the thunk out. An interrupt taken at that first instruction adds a newer record into it,
    # from the interrupt's iret: the branch is the record from init_module nearest to the newest
    # record into lbr_crash_jump+0x0 and at most two records older.)
    into = [n for n, rec in enumerate(recs[:16]) if (rec["to"]["symbol"] or "").startswith("lbr_crash_jump+0x0/")]
    init_call = [recs[m] for n in into for m in range(n, min(n + 3, len(recs)))
                 if (recs[m]["from"]["symbol"] or "").startswith("init_module+")]
    assert init_call, recs[:16]
    frames = init_call[0]["from"]["frames"]
    assert frames and frames[-1]["file"].endswith("lbr_crash.c") and frames[-1]["line"] == call_line, \
        f"the call in init text is placed at {frames}, the source has it at lbr_crash.c:{call_line}"
    # The annotated log keeps every input line and adds source locations after record lines.
    code, out, err = decode(*symbols(), res.log, fmt="annotate")
    assert code == 0, err
    assert res.log.read_text(errors="replace").count("\n") <= out.count("\n")
    assert "lbr_crash.c:" in out


def test_dump_agrees_with_log_and_ground_truth(r):
    res = crashed()
    _, out, err = decode(*symbols(), res.log)
    [logged] = json.loads(out)["snapshots"]
    dumped = dump_agrees_with_log(res.dump, logged)
    # Given the log too, the dump's records get every module's symbols from it.
    code, out, err = decode(*symbols(), res.dump, res.log)
    assert code == 0, err
    both = json.loads(out)
    from_dump = [s for s in both["snapshots"] if "@0x" in s["source"] and s["seq"] == logged["seq"]]
    assert [[place(x["from"]), place(x["to"])] for x in from_dump[0]["records"]] == \
        [[place(x["from"]), place(x["to"])] for x in logged["records"]]
    # And both equal the emulator's record stack at the freeze.
    assert_decoded_equals_freeze(res.emu_events(), dumped)

def test_last_exception_record_from_log_and_dump(r):
    """The last exception record (Intel LER) of the crash, read back by lbr-decode from the
    console log and from the memory dump of the same guest: the same addresses, symbolized, and
    equal to the emulator's LER at the stub's freeze (decoded as the tests read the manuals);
    the text output gives it its own line, marked."""
    res = crashed()
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    [logged] = json.loads(out)["snapshots"]
    assert "last_exception" in logged, sorted(logged)
    ler = logged["last_exception"]
    dumped = dump_agrees_with_log(res.dump, logged)
    assert "last_exception" in dumped, "lbr-decode read no last exception record from the dump"
    both = lambda l: (l["from"]["addr"], l["to"]["addr"])  # noqa: E731
    assert both(dumped["last_exception"]) == both(ler), (dumped["last_exception"], ler)
    # With every branch recorded and #0 the exception, the branch before it is #1 (an interrupt
    # in between would be #1 too, its iret): symbolized the same, and as the kernel printed it
    # (no "printed"); the dump alone symbolizes what it can (vmlinux, lbr_dump).
    rec1 = logged["records"][1]
    for end in ("from", "to"):
        assert place(ler[end]) == place(rec1[end]) and "printed" not in ler[end], (end, ler, rec1)
        if ler[end].get("image") in (None, "vmlinux", "lbr_dump"):
            assert place(dumped["last_exception"][end]) == place(ler[end]), (end, dumped["last_exception"], ler)
    events = res.emu_events()
    flavour, fmt = emulated(events)
    newest = (int(logged["records"][0]["from"]["addr"], 16), int(logged["records"][0]["to"]["addr"], 16))
    freezes = [e for e in events if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == logged["cpu"]]
    freezes = [e for e in freezes if (freeze_records(e, flavour, fmt) or [{}])[0].get("from") == newest[0]
               and freeze_records(e, flavour, fmt)[0]["to"] == newest[1]]
    assert freezes, "no freeze with the snapshot's newest record"
    want = decode_ler(flavour, fmt, *(int(v, 16) for v in freezes[-1]["ler"]))
    assert want and tuple(int(a, 16) for a in both(ler)) == want, (both(ler), want, freezes[-1]["ler"])
    code, text, err = decode(*symbols(), res.log, fmt="text")
    assert code == 0, err
    lines = [l for l in text.splitlines() if l.split()[:1] == ["ler"]]
    assert len(lines) == 1 and "(last exception record)" in lines[0] and (ler["from"]["symbol"] or "?") in lines[0], lines


def dump_agrees_with_log(dump, logged):
    """Decodes `dump` alone and checks that it holds the snapshot `logged` (decoded from the
    console log) with the same header fields and records; returns the dump's snapshot."""
    code, out, err = decode(*symbols(), dump)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["warnings"] == [], doc["warnings"]
    same = [s for s in doc["snapshots"] if (s["cpu"], s["seq"]) == (logged["cpu"], logged["seq"])]
    assert len(same) == 1, f"the dump has no snapshot cpu={logged['cpu']} seq={logged['seq']}: {doc['snapshots']}"
    dumped = same[0]
    assert dumped["complete"], "the printed snapshot is not sealed in the dump"
    for k in ("vector", "error", "rip", "cr2", "flavour", "format", "state"):
        assert dumped[k] == logged[k], (k, dumped[k], logged[k])
    assert len(dumped["records"]) == len(logged["records"])
    for d, l in zip(dumped["records"], logged["records"]):
        # Same addresses and flags. Without any printed text, the dump alone locates vmlinux
        # (KASLR from its anchor) and lbr_dump (its text base), not other modules.
        for k in ("from", "to"):
            assert d[k]["addr"] == l[k]["addr"], (k, d, l)
            if l[k].get("image") in (None, "vmlinux", "lbr_dump"):
                assert place(d[k]) == place(l[k]), (k, d[k], l[k])
            else:
                assert d[k]["symbol"] is None, (k, d[k], l[k])
        # The log prints a flag only when set; absent there means false.
        assert bool(d.get("mispred")) == bool(l.get("mispred")), (d, l)
        assert d.get("cycles") == l.get("cycles"), (d, l)
    return dumped


def test_kdump_vmcore_agrees_with_log(r):
    # kdump (harness.kdump) of an oops with oops=panic: oops_end() boots the capture kernel
    # directly; lbr-decode reads the vmcore like QEMU's dump.
    res, disk = kdump("decode-kdump", f"sh -c 'insmod {CRASH} crash=jump' || true",
                      append="oops=panic", cpu="Skylake-Client", accel="tcg", emulate="model=skylake")
    assert "lbr_dump: v2 " in res.console, "no snapshot printed:\n" + tail(res.console)
    _, out, err = decode(*symbols(), res.log)
    [logged] = json.loads(out)["snapshots"]
    dump_agrees_with_log(disk, logged)


def test_wrong_vmlinux_is_flagged(r):
    res = crashed()
    code, out, err = decode("-k", kernel_dir("builtin") / "vmlinux", res.log, fmt="text")
    assert "wrong vmlinux" in err or "is this the crashed kernel's vmlinux" in err, err


def test_bad_inputs_get_clear_errors(r):
    res = crashed()
    cut = res.dump.parent / "memory-cut.elf"
    with open(res.dump, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(64 << 20))
    try:
        code, _, err = decode(cut)
        assert code != 0 and "truncated" in err, (code, err)
    finally:
        cut.unlink()
    vmlinux = kernel_dir("module") / "vmlinux"
    code, _, err = decode(vmlinux)
    assert code != 0 and "not a core file" in err, (code, err)
    empty = res.dump.parent / "no-snapshots.log"
    empty.write_text("[    0.000000] Linux version 7.3.4\n\x00\xff garbage\n")
    code, _, err = decode(empty)
    assert code != 0 and "no lbr-dump snapshot" in err, (code, err)
    assert "panicked" not in err


# An outside oracle for symbolization (issue 13, item 4): every address of the crash symbolized
# again by LLVM's llvm-symbolizer (the build root's, run there through scripts/common.sh in_root),
# on the same vmlinux and .ko files. It shares no code with lbr-decode: its own DWARF reader
# (LLVM's, not the addr2line crate), its own relocation of the modules' DWARF (LLVM applies the
# relocations of a relocatable object itself, with the section addresses GNU objcopy set), and
# the addresses it is given are computed here from the ELF symbol tables (read below, not through
# the object crate) and the symbols the kernel printed (%pS, which lbr-decode's JSON repeats
# when it recomputed the same: "printed" absent), not from lbr-decode's image lookup.

def elf_text_symbols(path: Path) -> tuple[dict[int, str], dict[str, list[tuple[int, int]]]]:
    """An ELF64 (little-endian) file's executable sections {index: name} and its named symbols in
    them {name: [(section index, value)]}, read with struct from the section headers and .symtab."""
    data = path.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    # (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, ...)
    shdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table: int, off: int) -> str:
        start = shdrs[table][4] + off
        return data[start:data.index(b"\0", start)].decode()

    text = {i: string(shstrndx, h[0]) for i, h in enumerate(shdrs) if h[2] & 0x4}  # SHF_EXECINSTR
    syms: dict[str, list[tuple[int, int]]] = {}
    for h in (h for h in shdrs if h[1] == 2):  # SHT_SYMTAB
        for st_name, info, _, shndx, value, _ in struct.iter_unpack("<IBBHQQ", data[h[4]:h[4] + h[5]]):
            if st_name and shndx in text and info & 0xf in (0, 2):  # STT_NOTYPE, STT_FUNC
                syms.setdefault(string(h[6], st_name), []).append((shndx, value))
    return text, syms


def llvm_frames(obj: Path, addrs: list[int], functions: str) -> list[list[tuple]]:
    """llvm-symbolizer --inlining's frames (function, file, line), innermost first, for each of
    `addrs` in `obj`; [] where it knows nothing. `functions`: "short", DWARF's DW_AT_name only;
    "linkage" (its default), DWARF's linkage names, demangled, and the outermost frame named
    from the ELF symbol table."""
    out = in_root("llvm-symbolizer", "--inlining", "--output-style=JSON", f"--obj={obj}",
                  f"--functions={functions}", stdin="".join(f"{a:#x}\n" for a in addrs))
    answers = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert [int(a["Address"], 16) for a in answers] == addrs, (addrs, out)
    res = []
    for a in answers:
        frames = [(f["FunctionName"] or None, f["FileName"] or None, f["Line"] or None) for f in a["Symbol"]]
        res.append([] if frames == [(None, None, None)] else frames)
    return res


def test_symbols_agree_with_llvm_symbolizer(r):
    """Every address of a crash's records, symbolized by lbr-decode and by llvm-symbolizer on the
    same vmlinux and modules (see the oracle above): the same frames, inlined ones included, in
    the same order, each with the same function, file and line. Line 0 (no line) is lbr-decode's
    null. Files: lbr-decode prints them relative to the source root of their image
    (`source_roots`), llvm-symbolizer absolute: one of the roots plus lbr-decode's path must be
    llvm-symbolizer's. Functions are DWARF's: the name llvm-symbolizer gives with
    --functions=short (DW_AT_name) or with its default --functions=linkage (the linkage name,
    demangled, as lbr-decode prints Rust's), except that the latter names the outermost frame
    from the symbol table (the alias init_module of lbr_crash_init); lbr-decode's
    function_source is "dwarf" there. Where DWARF names no function (assembly: the stubs, the
    thunks), the function must be the one llvm-symbolizer names from the symbol table, or an
    alias of it (a symbol at the same address, such as the %pS name
    __pi___x86_indirect_thunk_r11 of __x86_indirect_thunk_r11), with function_source "symtab".
    An address in no image (the corrupted pointer) has no frames in either."""
    res = crashed()
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    doc = json.loads(out)
    [snap] = doc["snapshots"]
    places = [p for rec in snap["records"] for p in (rec["from"], rec["to"])]
    assert all("printed" not in p for p in places), "a symbol differs from the kernel's %pS"
    roots = list(doc["source_roots"].values())
    args = symbols()
    vmlinux = Path(args[1])
    kos = {ko.stem.replace("-", "_"): ko for d in args[3::2] for ko in Path(d).glob("*.ko")}

    def split(sym: str) -> tuple[str, int, str | None]:
        """`name+0xoff/0xsize [module]` -> (name, off, module)."""
        s, _, module = sym.partition(" [")
        name, _, rest = s.rpartition("+")
        return name, int(rest.split("/")[0], 16), module.rstrip("]") or None

    # The KASLR offset: runtime address minus link address of every vmlinux %pS symbol.
    _, ksyms = elf_text_symbols(vmlinux)
    offsets = set()
    for p in places:
        if p["symbol"] and split(p["symbol"])[2] is None:
            name, off, _ = split(p["symbol"])
            if len(ksyms.get(name, ())) == 1:
                offsets.add(int(p["addr"], 16) - ksyms[name][0][1] - off)
    assert len(offsets) == 1, f"the vmlinux symbols give KASLR offsets {sorted(map(hex, offsets))}"
    [kaslr] = offsets
    assert doc["kaslr_offset"] == hex(kaslr), (doc["kaslr_offset"], hex(kaslr))

    # Per object file, the address each place has there: vmlinux's link address; a module's
    # symbol's section offset plus the address that section got in a copy whose executable
    # sections objcopy placed apart (all start at 0 in a .ko, where .text and .init.text offsets
    # coincide).
    with tempfile.TemporaryDirectory(dir=REPO / "out", prefix="llvm-oracle-") as tmp:
        objs: dict[str, tuple[Path, dict]] = {"vmlinux": (vmlinux, ksyms)}
        bases: dict[str, dict[int, int]] = {}
        query: list[tuple[str, int]] = []  # per place: (object, address in it)
        for p in places:
            name, off, module = split(p["symbol"]) if p["symbol"] else (None, 0, None)
            if module is None:  # vmlinux, or no symbol: looked up in vmlinux (where it is not)
                query.append(("vmlinux", int(p["addr"], 16) - kaslr))
                continue
            if module not in objs:
                assert module in kos, f"no .ko for module {module} in {args[3::2]}"
                text, syms = elf_text_symbols(kos[module])
                assert len(set(text.values())) == len(text), f"{kos[module]}: duplicate section names {text}"
                bases[module] = {i: (k + 1) << 32 for k, i in enumerate(sorted(text))}
                copy = Path(tmp) / kos[module].name
                in_root("objcopy", *(a for i, n in text.items()
                                     for a in ("--change-section-address", f"{n}={bases[module][i]:#x}")),
                        kos[module], copy)
                objs[module] = (copy, syms)
            found = objs[module][1].get(name, [])
            assert len(found) == 1, f"{p['symbol']}: {len(found)} symbols {name} in {kos[module]}"
            [(sec, value)] = found
            query.append((module, bases[module][sec] + value + off))
        # llvm-symbolizer's frames for each place, with short and with linkage names.
        short: dict[tuple[str, int], list] = {}
        linkage: dict[tuple[str, int], list] = {}
        for obj, (path, _) in objs.items():
            addrs = sorted({a for o, a in query if o == obj})
            for table, kind in ((short, "short"), (linkage, "linkage")):
                table.update(zip(((obj, a) for a in addrs), llvm_frames(path, addrs, kind)))

    def aliases(obj: str, a: str, b: str) -> bool:
        """`a` and `b` are symbols at the same address of `obj`."""
        syms = objs[obj][1]
        return bool(set(syms.get(a, ())) & set(syms.get(b, ())))

    mismatches: dict[str, list[str]] = {}

    def mismatch(kind: str, p: dict, what: str) -> None:
        line = f"{p['addr']} ({p['symbol']}): {what}"
        if line not in mismatches.setdefault(kind, []):  # once per address
            mismatches[kind].append(line)

    frames_checked = 0
    for p, q in zip(places, query):
        ours = [(f["function"], f["file"], f["line"]) for f in p["frames"]]
        sources = [f.get("function_source") for f in p["frames"]]
        theirs = short[q]
        if len(ours) != len(theirs) or len(linkage[q]) != len(theirs):
            mismatch("frames", p, f"lbr-decode {ours}, llvm-symbolizer {theirs} / {linkage[q]}")
            continue
        for i, ((fn, file, line), (lfn, lfile, lline)) in enumerate(zip(ours, theirs)):
            frames_checked += 1
            named = linkage[q][i][0]
            at = f"frame {i}: lbr-decode {(fn, file, line)}, llvm-symbolizer {(lfn, lfile, lline)}" + \
                (f" (linkage: {named})" if named != lfn else "")
            if file != lfile and not (file and lfile and any(lfile == root + file for root in roots)):
                mismatch("file", p, at)
            if line != lline:
                mismatch("line", p, at)
            if lfn is not None:
                if fn not in (lfn, named) or sources[i] != "dwarf":
                    mismatch("function", p, f"{at}, function_source {sources[i]!r}")
            elif named is None:
                if fn is not None:
                    mismatch("function", p, at)
            elif fn != named and not (fn and aliases(q[0], fn, named)) or sources[i] != "symtab":
                # No DWARF function (assembly): the symbol table's, as llvm-symbolizer names it,
                # and lbr-decode says where its name came from.
                mismatch("function where DWARF has none", p, f"frame {i}: lbr-decode {fn!r} "
                         f"(function_source {sources[i]!r}), llvm-symbolizer {named!r} (from the symbol table)")
    checked = f"{len(places)} places ({len(set(query))} addresses), {frames_checked} frames compared"
    assert frames_checked >= len(places) // 2, f"too few frames: {checked}"
    assert not mismatches, f"lbr-decode and llvm-symbolizer disagree ({checked}):\n" + "\n".join(
        f"{kind} ({len(ms)}):\n  " + "\n  ".join(ms) for kind, ms in mismatches.items())


def test_thunk_hops_fold_into_their_branch(r):
    """Issue 13 item 3 on the real crash: the test kernel has retpolines and ITS return thunks,
    so lbr_crash_jump's call through the corrupted pointer took three records (into
    __x86_indirect_thunk_r11, the retpoline's call to itself, its ret to the bad address), as
    did lbr_crash_init's branch to lbr_crash_jump through the table of crash types, and every
    return through its_return_thunk two. Found here from the kernel's own %pS symbols of each
    record, not from lbr-decode's grouping: the JSON keeps all 32 records and groups exactly
    those; the fault's own record (#0) is in no group. Whether an indirect branch calls or jumps
    (a tail call) is objdump's reading of the instruction at its record's address in the .ko.
    The text output prints each group as one marked line and --raw every record; the compact
    view is oldest first with the group on one line."""
    res = crashed()
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    [snap] = json.loads(out)["snapshots"]
    recs = snap["records"]
    assert len(recs) == 32 and [rec["index"] for rec in recs] == list(range(32)), recs
    sym = lambda p: p["symbol"] or ""  # noqa: E731
    thunk = lambda p, t: sym(p).removeprefix("__pi_").startswith(t + "+")  # noqa: E731

    # The groups as the kernel's symbols show them: (first index, last index), newest first.
    expected = []
    i = 0
    while i < len(recs):
        rec = recs[i]
        if thunk(rec["from"], "its_return_thunk") and i + 1 < len(recs) \
                and sym(recs[i + 1]["to"]).startswith("its_return_thunk+0x0/"):
            expected.append(("return", "its_return_thunk", [i, i + 1]))
            i += 2
        elif thunk(rec["from"], "__x86_indirect_thunk_r11") and i + 2 < len(recs) \
                and thunk(recs[i + 1]["from"], "__x86_indirect_thunk_r11") \
                and sym(recs[i + 2]["to"]).removeprefix("__pi_").startswith("__x86_indirect_thunk_r11+0x0/"):
            expected.append(("indirect", "__x86_indirect_thunk_r11", [i, i + 1, i + 2]))
            i += 3
        else:
            i += 1
    kinds = [k for k, _, _ in expected]
    assert "indirect" in kinds and "return" in kinds, f"the crash has no thunk hops to fold: {expected}"
    # lbr_crash_jump's branch through the retpoline: from its record into the thunk (`first`)
    # to the thunk's ret to the bad address (`last`), where #0 faulted.
    call_rec = next(recs[e[2][-1]] for e in expected
                    if e[0] == "indirect" and sym(recs[e[2][-1]]["from"]).startswith("lbr_crash_jump+"))
    first, last = call_rec["index"], call_rec["index"] - 2
    assert recs[0]["from"]["addr"] == recs[last]["to"]["addr"], "the call's target is not where #0 faulted"

    ko = CRASH_BUILD / "lbr_crash.ko"
    text, ko_syms = elf_text_symbols(ko)

    def kind(rec: dict) -> str:
        """The kind of indirect branch whose record `rec` (from lbr_crash) entered the thunk:
        objdump (GNU binutils, in the build root) on the instruction there."""
        assert sym(rec["from"]).endswith(" [lbr_crash]"), rec
        name, _, rest = sym(rec["from"]).partition(" [")[0].rpartition("+")
        off = int(rest.split("/")[0], 16)
        [(sec, value)] = ko_syms[name]
        dis = in_root("objdump", "-d", "-j", text[sec], f"--start-address={value + off:#x}",
                      f"--stop-address={value + off + 16:#x}", ko)
        # "ADDR:\tBYTES\tINSN" lines; objdump may print a segment prefix (cs) as its own line.
        words = [w for l in dis.splitlines() if re.match(r"\s*[0-9a-f]+:\t", l) and l.count("\t") >= 2
                 for w in l.split("\t")[2].split()]
        words = [w for w in words if w not in ("cs", "ds")]
        assert words and words[0] in ("jmp", "call"), dis
        return {"jmp": "indirect-jump", "call": "indirect-call"}[words[0]]

    want_kind = kind(call_rec)
    got = [(g["kind"], g["thunk"], g["records"]) for g in snap["groups"]]
    want = [(kind(recs[idx[-1]]) if k == "indirect" else k, t, idx) for k, t, idx in expected]
    assert got == want, f"groups {got}, expected from the printed symbols {want}"
    for g in snap["groups"]:
        assert all(recs[i].get("group") == g["id"] for i in g["records"]), g
    assert sum(1 for rec in recs if "group" in rec) == sum(len(g["records"]) for g in snap["groups"])
    assert "group" not in recs[0], recs[0]

    # Text: one marked line per group, no line of a thunk's own hop; --raw: all 32 records.
    _, text_out, _ = decode(*symbols(), res.log, fmt="text")
    _, raw_out, _ = decode(*symbols(), "--raw", res.log, fmt="text")
    lines = [l for l in text_out.splitlines() if l.startswith("  #")]
    raw = [l for l in raw_out.splitlines() if l.startswith("  #")]
    assert len(raw) == 32, raw_out
    assert len(lines) == 32 - sum(len(g["records"]) - 1 for g in snap["groups"]), text_out
    marker = f"({want_kind.replace('-', ' ')} via __x86_indirect_thunk_r11, records #{first},#{first - 1},#{last})"
    jumps = [l for l in lines if marker in l]
    assert len(jumps) == 1 and f"#{first}-#{last}" in jumps[0] and "lbr_crash_jump+" in jumps[0] \
        and "0xffff800000001000" in jumps[0], text_out
    assert not any("_thunk_r11+0x6/" in l for l in lines), text_out
    assert any("_thunk_r11+0x6/" in l for l in raw), raw_out

    # Compact: oldest first, the group on one line, source locations in parentheses.
    _, compact, _ = decode(*symbols(), res.log, fmt="compact")
    starts = [l for l in compact.splitlines() if l.startswith("[#")]
    # Oldest first: the first line holds #31 (alone, or grouped with #30 when
    # the oldest two records are one return through a thunk), the last #0.
    assert re.match(r"\[#31[\]-]", starts[0]) and starts[-1].startswith("[#00]"), compact
    [line] = [l for l in starts if l.startswith(f"[#{first:02}-#{last:02}]")]
    assert "lbr_crash_jump+" in line and "(lbr_crash.c:" in line and "0xffff800000001000" in line, line


def straight_line_pairs(recs):
    """(newer, older) record pairs with the straight-line check's result on the newer one."""
    return [(recs[n], recs[n + 1]) for n in range(len(recs) - 1)]


def test_straight_line_check_finds_the_crash_consistent(r):
    """Issue 12 item 6 on the real crash under the emulator: between consecutive records the
    CPU ran straight-line code, so lbr-decode's check against vmlinux's instructions (with the
    kernel's runtime patching of alternatives, retpolines, return thunks and fentry sites
    modelled) flags no pair; the pairs in kernel text are checked (ok), not all left
    unchecked; the oldest record has no pair. The text output says so in one line."""
    res = crashed()
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["version"], doc["minor_version"]) == (1, 10), doc["minor_version"]
    [s] = doc["snapshots"]
    recs = s["records"]
    assert len(recs) == 32
    assert "straight_line" not in recs[-1], recs[-1]
    statuses = [newer["straight_line"]["status"] for newer, _ in straight_line_pairs(recs)]
    violated = [(newer["index"], newer["straight_line"]) for newer, _ in straight_line_pairs(recs)
                if newer["straight_line"]["status"] == "violated"]
    assert violated == [], violated
    summary = s["straight_line"]
    assert summary["violated"] == 0 and summary["violations"] == [], summary
    assert (summary["ok"], summary["unchecked"]) == (statuses.count("ok"), statuses.count("unchecked")), summary
    # Pairs whose two ends are in one image (vmlinux, or one module's .ko, whose patch tables
    # are read through its relocations) are walked: most of this crash's are (strcmp, _printk,
    # the thunks, lbr_crash's init_module), and each comes out ok, or unchecked only where
    # its ends are in two sections of the module (init and core text).
    same_image = [newer for newer, older in straight_line_pairs(recs)
                  if newer["from"].get("image") and newer["from"].get("image") == older["to"].get("image")]
    assert len([p for p in same_image if p["from"]["image"] == "vmlinux"]) >= 10, same_image
    assert any(p["from"]["image"] == "lbr_crash" for p in same_image), same_image
    assert all(p["straight_line"]["status"] == "ok" or p["straight_line"].get("reason") == "cross-image"
               for p in same_image), [(p["index"], p["straight_line"]) for p in same_image]
    assert summary["ok"] >= 20, summary
    _, text, _ = decode(*symbols(), res.log, fmt="text")
    assert f"straight-line check: {summary['ok']} pairs ok, 0 violated, {summary['unchecked']} unchecked" in text, text
    assert "NOT-STRAIGHT-LINE" not in text


def test_corrupted_record_fails_the_straight_line_check(r):
    """A record whose `from` was corrupted in the console log (set to another record's `from`
    in another kernel function, at a lower address than the older record's `to`: straight-line
    code only goes forward, so it cannot get there) is flagged: that pair, and only that pair,
    is violated, naming the branch instruction that ends the way; the text output marks the
    record and names the pair in the summary. The exit status stays 0 (a warning)."""
    res = crashed()
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    recs = json.loads(out)["snapshots"][0]["records"]
    fn = lambda p: (p["symbol"] or "").split("+")[0]  # noqa: E731
    addr = lambda p: int(p["addr"], 16)  # noqa: E731
    in_vmlinux = lambda p: p.get("image") == "vmlinux"  # noqa: E731
    choice = None
    for newer, older in straight_line_pairs(recs):
        # (Not in a mitigation thunk: those are alternatives the kernel rewrites at boot, where
        # a path that no variant explains is unchecked, not violated.)
        if newer["straight_line"]["status"] != "ok" or not (in_vmlinux(newer["from"]) and in_vmlinux(older["to"])) \
                or "thunk" in fn(older["to"]):
            continue
        donors = [d for d in recs if in_vmlinux(d["from"]) and fn(d["from"]) != fn(older["to"])
                  and addr(d["from"]) < addr(older["to"])]
        if donors:
            choice = (newer, older, donors[0])
            break
    assert choice, "no pair in vmlinux to corrupt"
    newer, older, donor = choice
    n = newer["index"]
    # The record's line: "lbr_dump: #N 0xFROM -> 0xTO ...": its FROM replaced.
    text = res.log.read_text(errors="replace")
    pattern = re.compile(rf"(lbr_dump: #{n} )0x([0-9a-f]{{16}})( -> )")
    assert len(pattern.findall(text)) == 1, f"record #{n}'s line not found once"
    assert pattern.search(text).group(2) == newer["from"]["addr"][2:]
    bad = pattern.sub(lambda m: m.group(1) + donor["from"]["addr"] + m.group(3), text)
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "corrupted.log"
        log.write_text(bad)
        code, out, err = decode(*symbols(), log)
        assert code == 0, err
        got = json.loads(out)["snapshots"][0]
        code, text_out, _ = decode(*symbols(), log, fmt="text")
        assert code == 0
        code, raw_out, _ = decode(*symbols(), "--raw", log, fmt="text")
        assert code == 0
    grecs = got["records"]
    assert grecs[n]["from"]["addr"] == donor["from"]["addr"], grecs[n]["from"]
    sl = grecs[n]["straight_line"]
    assert sl["status"] == "violated" and sl["reason"] == "branch-before-from", sl
    # The walk from the older record's `to` stops at a branch in that function, after `to`.
    assert sl["mnemonic"] in ("ret", "jmp", "call", "int3", "ud2", "iretq", "sysretq"), sl
    assert addr(older["to"]) <= addr(sl["at"]) < addr(older["to"]) + 4096, (sl, older["to"])
    assert got["straight_line"]["violations"] == [n], got["straight_line"]
    # Every other pair as before.
    before = [p["straight_line"]["status"] for p in recs[:-1]]
    after = [p["straight_line"]["status"] for p in grecs[:-1]]
    assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [n], (before, after)
    # Marked: the record's line (--raw), or the line of the thunk group it is in.
    marked = [l for l in raw_out.splitlines() if "NOT-STRAIGHT-LINE" in l]
    assert len(marked) == 1 and re.match(rf"\s*#{n}\s", marked[0]), marked
    marked = [l for l in text_out.splitlines() if "NOT-STRAIGHT-LINE" in l]
    span = re.match(r"\s*#(\d+)(?:-#(\d+))?\s", marked[0]) if len(marked) == 1 else None
    assert span and int(span.group(2) or span.group(1)) <= n <= int(span.group(1)), marked
    assert f"1 violated (#{n + 1} to #{n}: {sl['mnemonic']} at " in text_out, text_out
