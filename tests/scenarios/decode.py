# SPDX-License-Identifier: GPL-2.0
"""lbr-decode end to end: a crash under the emulator, decoded from the serial log and from a
memory dump of the same guest (QMP dump-guest-memory), checked against each other, against the
kernel's own %pS symbols and against the emulator's ground truth; then the bad inputs a user
meets (the wrong vmlinux, a truncated dump, an ELF file that is not a dump, a log without
snapshots).
"""

import functools
import json

from harness import CRASH, MODULE, boot, decode, kdump, symbols, tail
from records import assert_decoded_equals_freeze
from vm import REPO, kernel_dir


@functools.cache
def crashed():
    """One crash (a call through a corrupted pointer), its console log and memory dump."""
    res = boot(finish=False, name="decode-crash", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
             timeout=300, dump_after="---[ end trace",
             script=f"insmod {MODULE} enable=1\nsh -c 'insmod {CRASH} crash=jump' || true\nsleep 600\n")
    assert "lbr_dump: v1 " in res.console, "no snapshot printed:\n" + tail(res.console)
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
    # The call of lbr_crash_jump() is in init text (lbr_crash_init is __init), whose section
    # offsets coincide with core text's: its source line must be that call's line in the source,
    # not a line of whatever core-text function has the same offset.
    src = (REPO / "tests" / "modules" / "lbr_crash" / "lbr_crash.c").read_text().splitlines()
    call_line = 1 + next(i for i, l in enumerate(src) if l.strip() == "return lbr_crash_jump();")
    # (The call is the newest record into lbr_crash_jump+0x0 from init_module: an interrupt taken
    # at that first instruction adds a newer record into it, from the interrupt's iret.)
    init_call = [rec for rec in recs[1:16] if (rec["to"]["symbol"] or "").startswith("lbr_crash_jump+0x0/")
                 and (rec["from"]["symbol"] or "").startswith("init_module+")]
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
    assert "lbr_dump: v1 " in res.console, "no snapshot printed:\n" + tail(res.console)
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
