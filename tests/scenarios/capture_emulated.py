# SPDX-License-Identifier: GPL-2.0
"""Crashes under the branch-record emulator: what lbr-dump prints equals the ground truth.

Each crash runs in its own VM with the emulator presenting a recorder: Intel legacy LBR (formats
1 to 6: core2, atom, nehalem, haswell, skylake, goldmont-plus), Intel Arch LBR (sapphirerapids, at
depths 8, 32 and 64), AMD LbrExtV2 (zen4) or the AMD single record (amd). lbr-dump is loaded
normally (no force=1: the emulated recorder passes its probe), and names the recorder the
emulator presents (records.assert_same_recorder). The expected records are the emulator's record
stack at the freeze the entry stub made (its `freeze` event), decoded with tests/records.py from
the manuals; the printed records must equal them record for record, and the newest must be the
exception itself (no record of the stub's own branches). The last exception record line, where
the recorder keeps one, must equal the emulator's LER at that freeze, read from the LER MSRs.
And lbr-decode's straight-line check (issue 12 item 6), run on the console log with the test
kernel's vmlinux and modules, flags no pair of consecutive records of the printed snapshot when
the recorder was lbr-dump's (state=complete).
"""

import json
import re
import subprocess

from harness import ARM, CFG, CRASH, LKDTM, MODULE, REPO, SYSFS, boot, decode, kernel_lines, snapshot_heads, symbols, tail
from records import (assert_equals_freeze, assert_ler_equals_freeze, assert_same_recorder, emulated,
                     freeze_records, printed_lers, printed_records, sext)


CRASHES = {  # name: (guest command, vector)
    "EXCEPTION": (f"echo EXCEPTION > {LKDTM}", 14),
    "ACCESS_NULL": (f"echo ACCESS_NULL > {LKDTM}", 14),
    "ACCESS_USERSPACE": (f"echo ACCESS_USERSPACE > {LKDTM}", 14),
    "EXEC_NULL": (f"echo EXEC_NULL > {LKDTM}", 14),
    "BUG": (f"echo BUG > {LKDTM}", 6),
    "EXHAUST_STACK": (f"echo EXHAUST_STACK > {LKDTM}", 8),
    "gp": (f"insmod {CRASH} crash=gp", 13),
    "de": (f"insmod {CRASH} crash=de", 0),
    "jump": (f"insmod {CRASH} crash=jump", 14),
    "owner": (f"insmod {CRASH} crash=owner", 13),
    "select": (f"insmod {CRASH} crash=select", 13),
    "migrate": (f"insmod {CRASH} crash=migrate", 13),
    "jmp_next": (f"insmod {CRASH} crash=jmp_next", 13),
    "iret_next": (f"insmod {CRASH} crash=iret_next", 13),
}
# Emulator model: (QEMU CPU model, the format lbr-dump prints: legacy LBR's, else 0).
MODELS = {"core2": ("Skylake-Client", 1), "atom": ("Skylake-Client", 2), "nehalem": ("Skylake-Client", 3),
          "haswell": ("Skylake-Client", 4), "skylake": ("Skylake-Client", 5), "goldmont-plus": ("Skylake-Client", 6),
          "sapphirerapids": ("Skylake-Client", 0), "zen4": ("EPYC-Genoa", 0), "amd": ("EPYC-Genoa", 0)}


def crash(model, name, before="", tag="", state="complete", smp=1, depth=None, option=None, fmt=None,
          args="", after="", pin=None, **kw):
    """One crash under the emulator presenting `model` (`depth`: Arch LBR depth; `option`: another
    emulator option, e.g. "timed=off"; `fmt`: the legacy format lbr-dump must print when `option`
    overrides the model's; `args`: more lbr_dump parameters; `after`: guest commands after the
    crash's, e.g. to keep the guest up for a memory dump; `pin`: the CPU the crash runs on)."""
    cmd, vector = CRASHES[name]
    if pin is not None:
        cmd = f"taskset -c {pin} {cmd}"
    qemu_cpu, model_fmt = MODELS[model]
    fmt = model_fmt if fmt is None else fmt
    emulate = f"model={model}" + (f",depth={depth}" if depth else "") + (f",{option}" if option else "")
    tag = (f"-{depth}" if depth else "") + ("-" + option.replace("=", "") if option else "") + tag
    res = boot(finish=False, name=f"emu-crash-{model}-{name.lower()}{tag}", cpu=qemu_cpu, accel="tcg",
               emulate=emulate, timeout=240, smp=smp,
               script=ARM.rstrip("\n") + (f" {args}" if args else "") + "\n" + before + f"sh -c '{cmd}' || true\n"
               + after,
               **kw)
    con = res.console
    start = res.emu_events()[0]
    assert depth is None or start["depth"] == depth, f"the emulator presents depth {start['depth']}, not {depth}"
    assert "lbr_dump: armed" in con, "lbr_dump did not arm:\n" + "\n".join(kernel_lines(con, "lbr_dump"))
    heads = snapshot_heads(con)
    assert heads, f"no snapshot printed (VM {'timed out' if res.timed_out else 'ended'}):\n" + tail(con)
    head = heads[-1]
    assert f" vector={vector} " in head, head
    assert f"state={state}" in head, head
    assert f"format={fmt} " in head, head
    # The records of the last snapshot printed (its lines up to its end line).
    block = con[con.rindex(head):]
    block = block[:block.index("lbr_dump: end ")]
    printed = printed_records(block)
    assert printed, "the snapshot has no record lines:\n" + block
    # Ground truth: the freeze whose newest record is the printed newest one, the last such.
    freeze = assert_equals_freeze(res.emu_events(), head, printed)
    assert_ler_equals_freeze(res.emu_events(), freeze, block)
    if state == "complete":
        # (Another owner's filtering, state=foreign, may make pairs violated: see the owner tests.)
        assert_straight_line(res, head)
    # The newest record is the exception itself: into the stub, from the faulting instruction.
    assert re.match(rf"lbr_dump_stub_{vector}\+0x0/", printed[0]["to_sym"]), printed[0]
    if vector != 8:
        rip = int(re.search(r"rip=0x([0-9a-f]+)", head)[1], 16)
        assert printed[0]["from"] == rip, f"newest record from {printed[0]['from']:#x}, fault at {rip:#x}"
    return res, printed


def decoded_snapshot(res, head, *inputs):
    """lbr-decode's JSON of the snapshot whose header line is `head`, read from the run's console
    log (or from `inputs`, such as its memory dump) with the test kernel's vmlinux and modules."""
    code, out, err = decode(*symbols(), *(inputs or [res.log]))
    assert code == 0, f"lbr-decode failed ({code}): {err}"
    m = re.search(r" cpu=(\d+) seq=(\d+) ", head)
    snaps = [s for s in json.loads(out)["snapshots"] if (s["cpu"], s["seq"]) == (int(m[1]), int(m[2]))]
    assert snaps, f"lbr-decode found no snapshot cpu={m[1]} seq={m[2]} in {inputs or res.log}"
    return snaps[-1]


def assert_straight_line(res, head):
    """The straight-line check flags no pair of the printed snapshot `head` (a violated pair
    would mean records that straight-line code in the binary cannot connect: a torn capture, a
    mis-decoded record, a recorder someone else reprogrammed). Returns the decoded snapshot."""
    s = decoded_snapshot(res, head)
    violated = [(x["index"], x["straight_line"]) for x in s["records"]
                if x.get("straight_line", {}).get("status") == "violated"]
    assert s["straight_line"]["violated"] == 0 and not violated, \
        f"straight-line check: {s['straight_line']}; violated pairs (newer record's index, verdict): {violated}"
    return s


def check(model, names, depth=None, **kw):
    for name in names:
        res, _ = crash(model, name, depth=depth, **kw)
        assert "[#2]" not in res.console, f"{name}: a second oops:\n" + tail(res.console)
    return res


def test_skylake_format5_every_crash(r):
    check("skylake", [n for n in CRASHES if n not in ("jump", "owner", "select", "migrate")])


def test_nehalem_format3(r):
    check("nehalem", ["EXCEPTION", "BUG", "gp"])


def test_haswell_format4(r):
    check("haswell", ["EXEC_NULL", "de", "ACCESS_NULL"])


def test_goldmont_plus_format6(r):
    check("goldmont-plus", ["EXCEPTION", "ACCESS_USERSPACE", "EXHAUST_STACK"])


def test_arch_lbr_depth8(r):
    check("sapphirerapids", ["EXCEPTION", "jump"], depth=8)


def test_arch_lbr_depth32(r):
    check("sapphirerapids", ["EXCEPTION", "BUG", "jump"], depth=32)


def test_arch_lbr_depth64(r):
    check("sapphirerapids", ["BUG", "jump"], depth=64)


def test_zen4_lbr_v2(r):
    check("zen4", ["EXCEPTION", "BUG", "jump"])


def test_amd_single_record(r):
    check("amd", ["EXCEPTION", "BUG", "jump"])


def test_last_exception_record_every_flavour(r):
    # The last exception record (Intel LER, AMD LastException: the last branch before the most
    # recent exception or interrupt) is printed on its own line where the recorder keeps one, and
    # equals the emulator's LER at the stub's freeze, read from the LER MSRs (crash(),
    # records.assert_ler_equals_freeze): Intel legacy format 4 (MSR_LER_FROM_LIP without TSX
    # leaves bits 62:61 clear: a reader that does not sign-extend prints another address), Arch
    # LBR, and the AMD single record, where it is one more branch than the one record holds;
    # LbrExtV2 keeps none (LBRV2EN does not drive the LastInt pair): no line, no LER MSR read.
    for model in ("haswell", "sapphirerapids", "amd", "zen4"):
        res, printed = crash(model, "EXCEPTION", tag="-ler")
        head = snapshot_heads(res.console)[-1]
        block = res.console[res.console.rindex(head):]
        lers = printed_lers(block[:block.index("lbr_dump: end ")])
        if model == "zen4":
            assert lers == [], lers
            continue
        assert len(lers) == 1, f"{model}: no last exception record printed:\n{block[:3000]}"
        ler = lers[0]
        # It is the branch that led to the faulting instruction: from its target the CPU ran
        # straight on to the fault (lkdtm_EXCEPTION: the call into it).
        rip = printed[0]["from"]
        assert ler["to"] <= rip < ler["to"] + 4096, f"{model}: {ler}, fault at {rip:#x}"
        if model == "haswell":
            # The value lbr-dump read (the emulator's rdmsr event) is not the address printed.
            raw = [int(e["value"], 16) for e in res.emu_events() if e["event"] == "rdmsr" and int(e["msr"], 16) == 0x1DD]
            assert raw and raw[-1] >> 61 & 3 == 0 and sext(raw[-1], 61) == ler["from"] and ler["from"] >> 61 & 3 == 3, \
                f"the format-4 LER FROM read {raw[-1:]} does not test the sign extension (printed {ler['from']:#x})"
        if model == "amd":
            # The one record is the exception; the last exception record is the branch before.
            assert len(printed) == 1 and ler["to"] != printed[0]["to"], (ler, printed)


def test_legacy_format7_info2(r):
    # Format 7 (LBR_FORMAT_INFO2: format 5's LBR_INFO without IN_TX/TSX_ABORT; the kernel's
    # lbr.c since commit 1ac7fd8159a8, "v5 modulo TSX") on the MSR layout of the parts that
    # report LBR_INFO formats (32 entries, FROM 0x680, TO 0x6c0, INFO 0xdc0). No model in the
    # emulator's table reports it by default: none of the parts whose format we could confirm
    # from the SDM and the kernel has it, so the format is set with format=7.
    check("goldmont-plus", ["EXCEPTION", "BUG", "jump"], option="format=7", fmt=7)


def test_legacy_format0_is_refused_with_its_reason(r):
    # Format 0 (SDM IA32_PERF_CAPABILITIES.LBR_FMT 000000B, "32-bit record format": one MSR per
    # entry, FROM in bits 31:0 and TO in 63:32, the layout of Core Solo/Duo, which have no 64-bit
    # mode) cannot hold a 64-bit kernel address: lbr-dump refuses it at load, with the reason, and
    # the machine runs on. The emulator presents it (format=0) and must have been asked for it.
    res = boot(name="emu-format0-refused", cpu="Skylake-Client", accel="tcg", emulate="model=skylake,format=0",
               timeout=180, script=f"insmod {MODULE} enable=1 || echo insmod=$?\necho still-running\n")
    start = res.emu_events()[0]
    assert (start["flavour"], start["format"]) == ("legacy", 0), start
    con = res.console
    m = re.search(r"insmod=(\d+)", con)
    assert m and m[1] != "0", "insmod of lbr_dump did not fail:\n" + tail(con)
    lines = kernel_lines(con, "lbr_dump")
    assert any("LBR format 0 keeps only the low 32 bits of each address" in ln
               and "no 64-bit kernel address fits" in ln for ln in lines), "\n".join(lines)
    assert "No such device" in con, tail(con)
    assert "lbr_dump: armed" not in con
    assert "still-running" in con


def test_arch_lbr_without_timed_lbr(r):
    # CPUID.(0x1C,0):ECX[1] clear (timed=off): every record's IA32_LBR_x_INFO.CYC_CNT_VALID is
    # clear (SDM, Architectural LBR "IA32_LBR_x_INFO"), so no record may print cycles; the records
    # still equal the ground truth. The emulator must really present an untimed model.
    for name in ("EXCEPTION", "jump"):
        res, printed = crash("sapphirerapids", name, option="timed=off")
        start = res.emu_events()[0]
        assert start["timed"] is False, start
        assert not any("cycles" in p for p in printed), printed[:3]


def test_zen4_erratum1452_entries_are_skipped(r):
    # LbrExtV2 entries with TO[61] set are erroneous (erratum 1452; amd/lbr.c discards them). The
    # emulator inserts one before every 3rd branch (erratum1452=3); the ground truth's freeze must
    # hold such entries (else this proves nothing), and the printed records equal the freeze's
    # branches without them, in order.
    for name in ("EXCEPTION", "jump"):
        res, printed = crash("zen4", name, option="erratum1452=3")
        start = res.emu_events()[0]
        assert start["erratum1452"] == 3, start
        stub = [e for e in res.emu_events() if e["event"] == "freeze" and e["cause"] == "wrmsr"][-1]
        bogus = [s for s in stub["records"] if int(s["to"], 16) >> 61 & 1]
        assert bogus, "the stub's freeze holds no erratum-1452 entry: " + str(stub["records"][:4])
        # crash() compared the printed records with the freeze's branches; none is a bogus one.
        pairs = {(sext(int(b["from"], 16), 58), sext(int(b["to"], 16), 58)) for b in bogus}
        assert not pairs & {(p["from"], p["to"]) for p in printed}, "an erratum-1452 entry was printed"


# The emulator's branch kinds (tools/lbr-emu classify.rs, its freeze counts' "seen_kind" and
# "recorded_kind") each filter drops; far branches are kept by all (the exception's own record).
FILTER_DROPS = {"functions": {"jcc", "jmp"}, "calls": {"jcc", "jmp", "jmp_ind"}}


def filtered(model, filt, name="EXCEPTION"):
    """A crash with lbr_dump's filter=`filt`: the printed records equal the stub's freeze
    (crash()), and the emulator's counts by kind at that freeze say that branches of the kinds the
    filter drops happened while recording (else the test would prove nothing) and none of them was
    recorded, while the kinds it keeps were."""
    res, printed = crash(model, name, args=f"filter={filt}", tag=f"-{filt}")
    armed = kernel_lines(res.console, "lbr_dump: armed")
    assert armed and f"filter={filt}:" in armed[0], armed
    stub = [e for e in res.emu_events() if e["event"] == "freeze" and e["cause"] == "wrmsr"][-1]
    seen, recorded = stub["counts"]["seen_kind"], stub["counts"]["recorded_kind"]
    for kind in FILTER_DROPS[filt]:
        assert recorded[kind] == 0, f"filter={filt}: {recorded[kind]} {kind} branches recorded: {stub['counts']}"
    assert seen["jcc"] > 0 and seen["jmp"] > 0, f"no conditional branch or jump while recording: {seen}"
    for kind in ("call", "ret", "far"):
        assert recorded[kind] > 0, f"filter={filt} recorded no {kind}: {recorded}"
    return res, printed


def test_straight_line_check_knows_the_filter(r):
    # With filter=functions the records skip conditional branches and relative jumps, so
    # consecutive records are not straight-line code apart: the header line says filter=, the
    # area's header records it (read back from a memory dump of the guest), and lbr-decode
    # reports every pair unchecked, "filtered", none violated (crash() checks that). Without a
    # filter the same crash's pairs are checked: most in vmlinux come out ok.
    res, printed = crash("skylake", "EXCEPTION", args="filter=functions", tag="-functions-straight",
                         after="sleep 600\n", dump_after="---[ end trace")
    head = snapshot_heads(res.console)[-1]
    assert head.endswith(" filter=functions"), head
    assert len(printed) > 2, printed
    for s in (decoded_snapshot(res, head), decoded_snapshot(res, head, res.dump)):
        assert s["filter"] == "functions", (s["source"], s["filter"])
        pairs = [x["straight_line"] for x in s["records"][:-1]]
        assert pairs and all((p["status"], p.get("reason")) == ("unchecked", "filtered") for p in pairs), \
            (s["source"], pairs[:3])
        assert s["straight_line"]["unchecked_reasons"] == {"filtered": len(pairs)}, s["straight_line"]
    res, printed = crash("skylake", "EXCEPTION", tag="-straight")
    head = snapshot_heads(res.console)[-1]
    assert " filter=" not in head, head
    s = assert_straight_line(res, head)
    assert s["filter"] == "all" and s["straight_line"]["ok"] >= 10, s["straight_line"]
    assert "filtered" not in s["straight_line"]["unchecked_reasons"], s["straight_line"]


def test_filter_functions_and_calls_legacy_lbr(r):
    for filt in ("functions", "calls"):
        filtered("skylake", filt)


def test_filter_functions_and_calls_arch_lbr(r):
    for filt in ("functions", "calls"):
        filtered("sapphirerapids", filt)


def test_filter_functions_and_calls_amd_lbr_v2(r):
    for filt in ("functions", "calls"):
        filtered("zen4", filt)


def test_filter_refused_without_a_branch_filter(r):
    # Core 2 (no LBR_SELECT) and the AMD single record have no branch-type filter: lbr_dump
    # refuses filter= at load with the reason, and the machine runs on. A bad name is refused by
    # the parameter itself (insmod: Invalid argument), changing nothing.
    for model, cpu, why in (("core2", "Skylake-Client", "this model has no LBR_SELECT"),
                            ("amd", "EPYC-Genoa", "the single LastBranch record has no filter")):
        res = boot(name=f"emu-filter-refused-{model}", cpu=cpu, accel="tcg", emulate=f"model={model}", timeout=180,
                   script=f"insmod {MODULE} enable=1 filter=calls || echo insmod=$?\n"
                          f"insmod {MODULE} enable=1 filter=jumps || echo bad=$?\necho still-running\n")
        con = res.console
        assert re.search(r"insmod=[1-9]", con), tail(con)
        lines = kernel_lines(con, "lbr_dump")
        assert any(f"filter=calls: {why}" in ln for ln in lines), "\n".join(lines)
        assert re.search(r"bad=[1-9]", con), tail(con)
        assert any("filter=jumps: not a filter (all, functions or calls)" in ln for ln in lines), "\n".join(lines)
        assert "lbr_dump: armed" not in con and "still-running" in con


def test_corrupted_pointer_names_the_caller(r):
    # lbr_crash_jump() calls through a pointer to unmapped kernel memory: the oops' RIP is that
    # address, in no symbol; the records name the function that made the call (through the
    # retpoline thunk: lbr_crash_jump -> thunk -> ... -> ret to the bad address).
    res, printed = crash("skylake", "jump")
    rip = kernel_lines(res.console, "RIP: 0010:")
    assert rip and "lbr_crash_jump" not in rip[0], rip
    assert printed[0]["from"] == 0xFFFF800000001000, printed[0]
    assert printed[1]["to"] == 0xFFFF800000001000, printed[1]
    callers = [p for p in printed[1:6] if p["from_sym"].startswith("lbr_crash_jump+")]
    assert callers, "no record names lbr_crash_jump:\n" + "\n".join(str(p) for p in printed[:6])


def test_jump_to_the_next_instruction_is_recorded(r):
    # A `jmp` whose target is the next instruction (e9 00000000: Linux's early_xen_iret_patch,
    # run on every return to kernel mode by a CONFIG_XEN_PV kernel not on Xen, as Debian's) is
    # taken, and the hardware records it (SDM vol. 3B 18.1). crash=jmp_next runs one, then a #GP.
    # crash() checks that the records equal the emulator's freeze and that the straight-line
    # check, which reads the jmp in lbr_crash.ko, connects every pair: without the jmp's record
    # the pair across it is violated (seen in CI on Debian's kernel, when an interrupt returned
    # among the records). Here: one record from the jmp, whose bytes in lbr_crash.ko are
    # e9 00 00 00 00, to the instruction after it.
    res, printed = crash("skylake", "jmp_next")
    jmps = [p for p in printed if p["from_sym"].startswith("lbr_crash_jmp_next+") and p["to"] == p["from"] + 5]
    assert len(jmps) == 1, "no record of the jmp to the next instruction:\n" + "\n".join(str(p) for p in printed[:6])
    off = int(re.match(r"lbr_crash_jmp_next\+0x([0-9a-f]+)/", jmps[0]["from_sym"])[1], 16)
    insns = lbr_crash_insns("lbr_crash_jmp_next")
    assert insns.get(off) == "e9 00 00 00 00", f"lbr_crash_jmp_next+{off:#x} is not jmp .+5 in lbr_crash.ko: {insns}"


def lbr_crash_insns(function):
    """{offset in `function` of lbr_crash.ko: its bytes as objdump shows them ("e9 00 00 00 00")}."""
    dis = subprocess.run(["objdump", "-d", f"--disassemble={function}", str(REPO / "out/lbr_crash/lbr_crash.ko")],
                         capture_output=True, text=True, check=True).stdout
    start = int(re.search(rf"^([0-9a-f]+) <{function}>:", dis, re.M)[1], 16)
    return {int(a, 16) - start: b for a, b in re.findall(r"^\s*([0-9a-f]+):\s+([0-9a-f ]+?)\s*\t", dis, re.M)}


def test_iret_to_the_next_instruction_is_recorded(r):
    # sync_core() on a CPU without SERIALIZE (QEMU's Skylake-Client, as many parts) is
    # iret_to_self(): an `iretq` whose target is the instruction after it, run on every CPU at
    # every text patch (static keys, kprobes, module alternatives). It is a far branch, taken,
    # recorded by the hardware; crash=iret_next runs one, then a #GP. crash() checks the records
    # against the emulator's freeze and the straight-line check, which reads the iretq in
    # lbr_crash.ko: without its record the pair across it is violated. Here: one record from
    # the iretq (48 cf) to the instruction after it.
    res, printed = crash("skylake", "iret_next")
    insns = lbr_crash_insns("lbr_crash_iret_next")
    irets = [o for o, b in insns.items() if b == "48 cf"]
    assert len(irets) == 1, f"not one iretq in lbr_crash_iret_next: {insns}"
    ours = [p for p in printed if p["from_sym"].startswith("lbr_crash_iret_next+")
            and int(re.match(r"lbr_crash_iret_next\+0x([0-9a-f]+)/", p["from_sym"])[1], 16) == irets[0]]
    assert len(ours) == 1 and ours[0]["to"] == ours[0]["from"] + 2, \
        "no record of the iretq to the next instruction:\n" + "\n".join(str(p) for p in printed[:8])


def test_snapshot_rewritten_while_printed_says_so(r):
    # The printer reads a snapshot's records in place as it prints them. lbr_crash
    # crash=print_rewrite oopses with a #GP and, once lbr-dump has printed the header and record
    # #0, takes 4 kernel #GPs that the kernel fixes up on the same CPU, each captured into the
    # CPU's next slot: a CPU's ring holds 4 (src/capture/mod.rs RING), so the fourth takes the
    # slot being printed. The end line must say `rewritten`; the records above are the oops's
    # #0-#1, then the fourth fixed #GP's from #2 on (the emulator's freezes say which: no reader
    # could tell from the lines); lbr-decode marks the snapshot and warns.
    res = boot(finish=False, name="emu-print-rewrite", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
               timeout=240, script=ARM + f"sh -c 'insmod {CRASH} crash=print_rewrite rounds=4' || true\n")
    con = res.console
    assert "lbr_dump: armed" in con, "lbr_dump did not arm:\n" + "\n".join(kernel_lines(con, "lbr_dump"))
    assert 'lbr_crash: print_rewrite: 4 fixed #GPs at lbr_dump\'s line "#1 "' in con, tail(con)
    heads = [h for h in snapshot_heads(con) if " vector=13 " in h]
    assert len(heads) == 1, f"not one #GP snapshot printed:\n{heads}\n" + tail(con)
    head = heads[0]
    block = con[con.index(head):]
    end = re.search(r"lbr_dump: end cpu=(\d+) seq=(\d+)( rewritten)?$", block, re.M)
    assert end, "no end line:\n" + block[:3000]
    cpu = int(end[1])
    assert end[3], f"the end line does not say rewritten: {end[0]}"
    printed = printed_records(block[:end.start()])
    assert len(printed) == 32, len(printed)  # print_all, as every test boots
    events = res.emu_events()
    # The recorder the emulator presented is the one lbr-dump printed (Skylake's LBR, format 5).
    m = re.search(r" flavour=(\S+) format=(\d+) ", head)
    assert_same_recorder(events, m[1], m[2])
    flavour, fmt = emulated(events)
    stacks = [freeze_records(e, flavour, fmt) for e in events
              if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == cpu]
    same = lambda p, w: all(p.get(k, 0) == v for k, v in w.items())
    oops = [i for i, t in enumerate(stacks) if len(t) > 2 and same(printed[0], t[0]) and same(printed[1], t[1])]
    assert oops, "no freeze has the printed #0 and #1"
    i = oops[-1]
    assert len(stacks) >= i + 5, f"{len(stacks) - i - 1} captures after the oops's, not 4"
    last = stacks[i + 4]
    assert all(same(p, w) for p, w in zip(printed[2:], last[2:])), "records #2 on are not the fourth fixed #GP's"
    assert not all(same(p, w) for p, w in zip(printed[2:], stacks[i][2:])), "records #2 on are the oops's"
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    doc = json.loads(out)
    [s] = [s for s in doc["snapshots"] if s["vector"] == 13]
    assert s["rewritten"] is True, s.get("rewritten")
    assert any(f"was rewritten while lbr-dump printed it (a newer capture on CPU {cpu} took its slot or its BTS buffer)" in w
               for w in doc["warnings"]), doc["warnings"]


def test_bts_buffer_reused_while_printed_says_so(r):
    # As above, with BTS (bts=1024): crash=print_rewrite takes 3 captured #GPs just before
    # lbr-dump prints the oops's `bts` line, after the printer found the buffer still the
    # snapshot's. A CPU's BTS pool holds 4 buffers, one recording, so the third puts the oops's
    # kept buffer back into recording while its record lines are printed; its slot stays (the
    # ring holds 4): the LBR records printed are all the oops's (the emulator's freeze), and the
    # end line says `rewritten`.
    res = boot(finish=False, name="emu-print-rewrite-bts", cpu="Skylake-Client", accel="tcg",
               emulate="model=skylake", timeout=240,
               script=f"insmod {MODULE} bts=1024 bts_print=8 enable=1\n"
                      f"sh -c 'insmod {CRASH} crash=print_rewrite rounds=3 at=bts' || true\n")
    con = res.console
    assert "lbr_dump: armed" in con, "lbr_dump did not arm:\n" + "\n".join(kernel_lines(con, "lbr_dump"))
    assert 'lbr_crash: print_rewrite: 3 fixed #GPs at lbr_dump\'s line "bts"' in con, tail(con)
    heads = [h for h in snapshot_heads(con) if " vector=13 " in h]
    assert len(heads) == 1, f"not one #GP snapshot printed:\n{heads}\n" + tail(con)
    block = con[con.index(heads[0]):]
    end = re.search(r"lbr_dump: end cpu=(\d+) seq=(\d+)( rewritten)?$", block, re.M)
    assert end, "no end line:\n" + block[:3000]
    block = block[:end.start()]
    assert re.search(r"lbr_dump: bts cpu=\d+ seq=\d+ records=\d+ shown=8 .* state=kept", block), block[-3000:]
    assert len(re.findall(r"lbr_dump: bts #\d+ ", block)) == 8, block[-3000:]
    assert_equals_freeze(res.emu_events(), heads[0], printed_records(block))
    assert end[3], f"the end line does not say rewritten: {end[0]}"


def test_single_step_does_not_stop_recording(r):
    # A user process single-steps itself (RFLAGS.TF, what ptrace single-step does): the #DB's
    # delivery clears DEBUGCTL.LBR; lbr-dump's #DB stub re-arms it (README: re-arm policy), so a
    # later crash has live records (state=complete, checked against the ground truth in crash()),
    # not stale ones (was-off).
    res, printed = crash("skylake", "EXCEPTION", before="lbr-singlestep || true\n", tag="-after-single-step")
    assert "Trace/breakpoint trap" in res.console, "the single-step did not trap:\n" + tail(res.console)
    events = res.emu_events()
    db = [i for i, e in enumerate(events) if e["event"] == "switch" and e["cause"] == "#DB" and not e["on"]]
    assert db, "the emulator saw no #DB clear the switch"
    # Back on before the crash froze it, by the module (the crash's own stub would re-arm only
    # after its capture, and its snapshot would say was-off).
    crash_freeze = max(i for i, e in enumerate(events) if e["event"] == "freeze")
    rearmed = [e for e in events[db[0]:crash_freeze] if e["event"] == "switch" and e["on"]]
    assert rearmed and int(rearmed[0]["pc"], 16) >= 0xFFFFFFFFC0000000, \
        f"nothing in module space switched recording back on between the #DB and the crash: {rearmed[:1]}"


def users_debug_exceptions(tag, rearms, args=""):
    """As uid 65534 on vCPU 1 of 2: lbr-singlestep (one #DB), then lbr-watch (5 watchpoint hits,
    each a #DB with DR7 set), then a kernel #GP on the same CPU. The snapshot is complete and
    equals the emulator's freeze (crash()), and after every #DB the emulator saw, lbr-dump's
    code switched recording back on before anything else switched it; `rearms` (the re-arms
    of the kernel's #DB handling, not the stub's) reads `rearms`."""
    before = ("echo nobody=$(lbr-nobody /bin/busybox id -u):$(lbr-nobody /bin/busybox id -g)\n"
              "s=0; taskset -c 1 lbr-nobody /bin/lbr-singlestep || s=$?; echo singlestep=$s\n"
              "s=0; taskset -c 1 lbr-nobody /bin/lbr-watch || s=$?; echo watch-hits=$s\n"
              f"echo rearms=$(cat {SYSFS}/rearms)\n")
    res, printed = crash("skylake", "gp", before=before, smp=2, pin=1, tag=tag, args=args)
    con = res.console
    assert re.search(r"^nobody=65534:65534\r?$", con, re.M), "lbr-nobody does not run as 65534:\n" + tail(con)
    assert re.search(r"^singlestep=133\r?$", con, re.M), "the single-step did not end in SIGTRAP:\n" + tail(con)
    assert re.search(r"^watch-hits=5\r?$", con, re.M), "the watchpoint did not trap 5 times:\n" + tail(con)
    head = snapshot_heads(con)[-1]
    assert " cpu=1 " in head, f"the crash was not captured on CPU 1: {head}"
    events = res.emu_events()
    freeze = max(i for i, e in enumerate(events) if e["event"] == "freeze")
    switches = [(i, e) for i, e in enumerate(events[:freeze]) if e["event"] == "switch" and e["cpu"] == 1]
    offs = [k for k, (_, e) in enumerate(switches) if e["cause"] == "#DB" and not e["on"]]
    assert len(offs) >= 6, f"the emulator saw {len(offs)} #DBs clear the switch on CPU 1, not 6"
    for k in offs:
        nxt = switches[k + 1][1] if k + 1 < len(switches) else None
        assert nxt and nxt["on"] and int(nxt["pc"], 16) >= 0xFFFFFFFFC0000000, \
            f"after the #DB at {switches[k][1]['pc']}, recording was not switched back on by lbr-dump: {nxt}"
    m = re.search(r"^rearms=(\d+)\r?$", con, re.M)
    assert m and int(m[1]) == rearms, f"rearms after a single-step and 5 watchpoint hits: {m and m[1]}, not {rearms}"


def test_a_users_single_step_and_watchpoint_do_not_stop_recording(r):
    # Any user can make its CPU take #DBs, whose delivery clears DEBUGCTL.LBR: its own single-step
    # (popf with TF) and its own hardware watchpoint (perf_event_open() PERF_TYPE_BREAKPOINT on
    # its own memory, allowed unprivileged at the test kernel's perf_event_paranoid). With #DB
    # among the vectors (the default), lbr_dump_rearm_1 re-arms each, with DR7 turned off around
    # its loads when a breakpoint is armed: `rearms` stays 0. Before, with DR7 set it loaded
    # nothing and re-armed nothing: the watchpoint left the CPU recording nothing, and the
    # snapshot said was-off.
    users_debug_exceptions("-after-user-debug", rearms=0)


def test_without_the_db_stub_the_kernels_db_handling_re_arms(r):
    # As above with #DB not among the vectors (vectors= all but 1: as under FRED, no stub sees a
    # user-mode #DB): the kernel's #DB handling re-arms, through lbr-dump's die-chain callback
    # (the watchpoint's #DBs, which perf's breakpoint handler ends the chain for) and its debug
    # notifier: `rearms` counts all 6.
    users_debug_exceptions("-after-user-debug-nodb", rearms=6, args="vectors=0x227941")


def test_another_owner_is_reported(r):
    # lbr_crash crash=owner rewrites DEBUGCTL while armed (adds FREEZE_LBRS_ON_PMI, as perf
    # would), then takes a #GP. The records are live and equal the ground truth, and the snapshot
    # says the recorder was not in lbr-dump's hands (state=foreign); the capture restores the
    # other owner's value, not lbr-dump's.
    res, printed = crash("skylake", "owner", state="foreign")
    # The other owner changed DEBUGCTL, not the filtering: the records are still straight-line
    # code apart.
    assert_straight_line(res, snapshot_heads(res.console)[-1])
    m = re.search(r"lbr_crash: DEBUGCTL (0x[0-9a-f]+) -> (0x[0-9a-f]+)", res.console)
    assert m, "lbr_crash did not rewrite DEBUGCTL:\n" + tail(res.console)
    theirs = int(m[2], 16)
    writes = [int(e["value"], 16) for e in res.emu_events() if e["event"] == "wrmsr" and int(e["msr"], 16) == 0x1D9]
    i = writes.index(theirs)
    assert writes[i + 1:i + 3] == [theirs & ~1, theirs], (
        f"after the other owner's {theirs:#x}: DEBUGCTL writes {[hex(w) for w in writes[i + 1:i + 3]]}, "
        f"want the freeze {theirs & ~1:#x} then the other owner's value restored")


def test_another_owners_filter_is_reported(r):
    # lbr_crash crash=select rewrites only LBR_SELECT while armed (conditional branches
    # suppressed too), then takes a #GP. DEBUGCTL is lbr-dump's own value, but the capture reads
    # LBR_SELECT too: the snapshot says foreign, and the records (filtered the other owner's way)
    # still equal the ground truth. Nothing of lbr-dump's writes LBR_SELECT after the other owner.
    res, printed = crash("skylake", "select", state="foreign")
    # Conditional branches were not recorded, unknown to lbr-decode: it flags the pairs that a
    # taken one connected (issue 12 item 6: "a recorder that another owner reprogrammed"), each
    # at an unconditional branch between them.
    s = decoded_snapshot(res, snapshot_heads(res.console)[-1])
    assert s["state"] == "foreign" and s["straight_line"]["violated"] > 0, s["straight_line"]
    m = re.search(r"lbr_crash: LBR_SELECT (0x[0-9a-f]+) -> (0x[0-9a-f]+)", res.console)
    assert m, "lbr_crash did not rewrite LBR_SELECT:\n" + tail(res.console)
    theirs = int(m[2], 16)
    events = res.emu_events()
    writes = [(i, e) for i, e in enumerate(events) if e["event"] == "wrmsr"]
    select = [(i, int(e["value"], 16)) for i, e in writes if int(e["msr"], 16) == 0x1C8]
    assert select and select[-1][1] == theirs, \
        f"LBR_SELECT writes {[hex(v) for _, v in select]}: the last is not the other owner's {theirs:#x}"
    debugctl = [int(e["value"], 16) for i, e in writes if int(e["msr"], 16) == 0x1D9 and i < select[-1][0]]
    assert debugctl and debugctl[-1] & 1, f"DEBUGCTL was not armed before the rewrite: {debugctl[-1:]}"


def test_control_changed_during_capture_is_torn(r):
    # lbr_crash crash=torn puts a data breakpoint on the snapshot slot the next capture writes,
    # then takes a #GP. The capture freezes the recorder, writes the slot: #DB, whose handler in
    # lbr_crash switches recording back on (as a perf NMI could), so the control MSR is not the
    # frozen value any more when the capture re-reads it. The snapshot must say torn, and the
    # capture must leave the value it found (recording on).
    script = ARM + CFG + \
        f"sh -c \"insmod {CRASH} crash=torn capture_cfg=0x$cfg\" || true\n"
    res = boot(finish=False, name="emu-crash-skylake-torn", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
             timeout=240, script=script)
    con = res.console
    assert "lbr_crash: watching snapshot slot" in con, "lbr_crash did not set the breakpoint:\n" + tail(con)
    assert "lbr_crash: data breakpoint hit at lbr_dump_stub_13" in con, \
        "the breakpoint did not fire inside the #GP capture:\n" + tail(con)
    heads = snapshot_heads(con)
    assert heads and " vector=13 " in heads[-1], "no #GP snapshot printed:\n" + tail(con)
    assert "state=torn" in heads[-1], heads[-1]
    # The capture left the control value it found: after the other owner switched recording on
    # inside the capture, nothing of lbr_dump's switched it off again. (Later #DBs from the
    # breakpoint, still armed, clear it by their delivery; with DR7 armed, the #DB stub leaves
    # that alone: Documentation/lbr-dump/design.rst "Speculation and debug registers".)
    switches = [e for e in res.emu_events() if e["event"] == "switch"]
    assert switches and (switches[-1]["on"] or switches[-1]["cause"] == "#DB"), \
        f"a write switched recording off after the torn capture: {switches[-3:]}"


def test_warning_then_crash_prints_the_crash(r):
    # lkdtm WARNING (a #UD in kernel mode, captured and survived), then a crash: the warning's
    # report prints its #UD's snapshot (tests/scenarios/warn.py checks those records), and the
    # oops prints the crash's own, whose records equal the ground truth at the crash's freeze
    # (checked in crash()): not the warning's again, and nothing else.
    res, printed = crash("skylake", "EXCEPTION", before=f"echo WARNING > {LKDTM}\n", tag="-after-warning")
    con = res.console
    warning = re.search(r"WARNING: .*lkdtm_WARNING", con)
    assert warning, "lkdtm WARNING did not warn:\n" + tail(con)
    heads = snapshot_heads(con)
    assert len(heads) == 2 and " vector=6 (#UD) " in heads[0] and " vector=14 (#PF) " in heads[1], (
        f"the warning's #UD in its report, then the crash's #PF: {heads}")
    end = con.index("---[ end trace", warning.end())
    assert warning.end() < con.index(heads[0]) < end < con.index(heads[1]), (
        "the warning's snapshot is not inside its report, or the crash's is")
    events = res.emu_events()
    stub_freezes = [e for e in events if e["event"] == "freeze" and e["cause"] == "wrmsr"]
    assert len(stub_freezes) >= 2, "the warning's #UD was not captured before the crash"


def test_core2_and_bonnell_without_lbr_select(r):
    # Core 2 and Bonnell Atom have no LBR_SELECT (the kernel's intel_pmu_lbr_init_core/_atom set
    # no lbr_sel_map): an access is a #GP on the real part, a would-fault in the emulator, which
    # boot() refuses. Arming and a crash touch only MSRs these models have; records equal the
    # ground truth (formats 1 and 2: Core 2 Penryn's 4 entries, Bonnell's 8, at MSRs 0x40/0x60),
    # for lkdtm EXCEPTION and BUG and the corrupted pointer.
    for model in ("core2", "atom"):
        check(model, ["EXCEPTION", "BUG", "jump"])


def test_crash_after_migration_prints_the_crashing_cpus_snapshot(r):
    # The #GP is taken on CPU 1; its DIE_GPF notifier (IRQs on, before die()) has the task moved to
    # CPU 0, where the oops is printed and where an older snapshot with the same frame address (a
    # fixed-up #PF from the same function) waits. The printed snapshot must be the #GP's, from
    # CPU 1's ring, equal to CPU 1's freeze (checked in crash()).
    res, printed = crash("skylake", "migrate", smp=2)
    con = res.console
    assert "lbr_crash: planted: fixed-up fault on CPU 0" in con, tail(con)
    assert "lbr_crash: crashing on CPU 1" in con, tail(con)
    m = re.search(r"lbr_crash: migrating: need_resched=(\d)", con)
    assert m and m[1] == "1", "the crashing task was not made to migrate:\n" + tail(con)
    oops_cpu = re.search(r"Oops: general protection fault.*?\n(?:\[[ .0-9]*\] )?CPU: (\d+)", con, re.S)
    assert oops_cpu and oops_cpu[1] == "0", "the oops was not printed on CPU 0: the test proves nothing"
    head = snapshot_heads(con)[-1]
    assert " cpu=1 " in head and " vector=13 " in head, head


def test_nested_exception_prints_the_oopsing_one_first(r):
    # A #GP whose handling hits BUG() (a DIE_GPF notifier of lbr_crash): the oops is the #UD.
    # Both were captured on the same stack; the printer shows the #UD's snapshot first (nest=0),
    # then the #GP's it interrupted (nest=1), each equal to its own freeze.
    res = boot(finish=False, name="emu-crash-skylake-nested", cpu="Skylake-Client", accel="tcg",
               emulate="model=skylake", timeout=240, script=ARM + f"sh -c 'insmod {CRASH} crash=nested' || true\n")
    con = res.console
    heads = snapshot_heads(con)
    assert len(heads) == 2, f"want two snapshots (the #UD, then the #GP it interrupted): {heads}\n" + tail(con)
    assert " vector=6 " in heads[0] and heads[0].endswith(" nest=0"), heads[0]
    assert " vector=13 " in heads[1] and heads[1].endswith(" nest=1"), heads[1]
    freezes = [e for e in res.emu_events() if e["event"] == "freeze" and e["cause"] == "wrmsr"]
    for head in heads:
        block = con[con.index(head):]
        block = block[:block.index("lbr_dump: end ")]
        printed = printed_records(block)
        truth = [freeze_records(e, "legacy", 5) for e in freezes]
        truth = [t for t in truth if t and (t[0]["from"], t[0]["to"]) == (printed[0]["from"], printed[0]["to"])]
        assert truth and len(truth[-1]) == len(printed), f"{head}: no matching freeze"
        for p, w in zip(printed, truth[-1]):
            assert all(p.get(k, 0) == v for k, v in w.items()), f"{head}: #{p['index']} {p} != {w}"


def test_resume_from_suspend_rearms_cpu0(r):
    # Suspend to RAM (ACPI S3) resets the CPUs (QEMU's PC machines wake through a reset; the
    # emulator resets its MSRs with them), and only the secondary CPUs go through hotplug. lbr_dump
    # must switch CPU 0's recording back on at resume: a crash afterwards has live records.
    res, printed = crash("skylake", "EXCEPTION", tag="-after-resume", smp=2, wake_on="PM: suspend entry",
                         before="echo mem > /sys/power/state && echo resumed\n")
    con = res.console
    assert "resumed" in con, "the guest did not suspend and resume:\n" + tail(con)
    events = res.emu_events()
    assert sum(e["event"] == "reset" for e in events) >= 2, "the emulator saw no reset at the wakeup"


def test_disarming_leaves_another_owners_value(r):
    # While armed, another owner (lbr_crash crash=retake, as a perf session would) rewrites
    # DEBUGCTL on every CPU. Disarming must not write lbr_dump's pre-arm values over it: each CPU's
    # last DEBUGCTL write is the other owner's value.
    res = boot(name="emu-retake", cpu="Skylake-Client", accel="tcg", emulate="model=skylake", smp=2,
               script=ARM + f"insmod {CRASH} crash=retake && rmmod lbr_crash\necho 0 > {SYSFS}/enabled\n"
               "echo disarmed\n")
    assert "lbr_crash: retake: DEBUGCTL |= FREEZE_LBRS_ON_PMI on 2 CPUs" in res.console, tail(res.console)
    assert "lbr_dump: disarmed" in res.console
    writes = [e for e in res.emu_events() if e["event"] == "wrmsr" and int(e["msr"], 16) == 0x1D9]
    for cpu in (0, 1):
        last = [int(e["value"], 16) for e in writes if e["cpu"] == cpu][-1]
        assert last & (1 << 11), f"CPU {cpu}: DEBUGCTL's last write {last:#x} is not the other owner's"
