# SPDX-License-Identifier: GPL-2.0
"""The branch-record emulator (tools/lbr-emu) seen from inside the guest.

tests/modules/lbr_check programs the recorder straight from the manuals, runs a known branch
sequence (seq.S) with recording on, freezes, and prints every MSR it reads. Each test checks the
records two ways: decoded here (from the SDM/APM field layouts, independently of both the
emulator and lbr-dump), they must be the known sequence, newest first, with no record for the
not-taken branch; and every value the guest read must be the value the emulator's ground-truth
log says it returned.
"""

import re
import time

from harness import CHECK, assert_clean, boot, kernel_lines
from records import NOT_A_BRANCH, decode_slot, freeze_records

# seq.S, newest first: ret r3 -> a3, call c3 -> leaf, jz j2 -> t2, jmp j1 -> t1.
SEQUENCE = [("r3", "a3", "ret"), ("c3", "leaf", "call"), ("j2", "t2", "jcc"), ("j1", "t1", "jmp")]
def guest_view(console):
    labels = {m[0]: int(m[1], 16) for m in re.findall(r"lbr_check: label (\w+) ([0-9a-f]+)", console)}
    reads = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"lbr_check: rdmsr (0x[0-9a-f]+) (0x[0-9a-f]+|0)", console)]
    assert labels and reads, "lbr_check printed nothing:\n" + "\n".join(kernel_lines(console, "lbr_check"))
    return labels, reads


def check_against_log(reads, events):
    """Every value the guest read equals what the emulator logged for that read, in order."""
    rd = [(int(e["msr"], 16), int(e["value"], 16)) for e in events if e["event"] == "rdmsr"]
    i = 0
    for msr, value in reads:
        while i < len(rd) and rd[i][0] != msr:
            i += 1
        assert i < len(rd), f"the emulator logged no read of MSR {msr:#x} (guest read {value:#x})"
        assert rd[i][1] == value, f"MSR {msr:#x}: guest read {value:#x}, emulator logged {rd[i][1]:#x}"
        i += 1


def decode(flavour, fmt, reads, depth, bases):
    """Records newest first as (from, to, flags dict), decoded with tests/records.py from the MSR
    values the guest read (each MSR's last read: all reads happen while frozen)."""
    val = dict(reads)
    if flavour == "legacy":
        frm, to, info = bases
        tos = val[0x1c9]
        slots = [((tos - i) % depth) for i in range(depth)]
        raw = [(val[frm + s], val.get(to + s, 0), val.get(info + s, 0) if info else 0) for s in slots]
    elif flavour == "arch":
        raw = [(val[0x1500 + i], val[0x1600 + i], val[0x1200 + i]) for i in range(depth)]
    elif flavour == "amd-v2":
        raw = [(val[0xC0010300 + 2 * i], val[0xC0010301 + 2 * i], 0) for i in range(depth)]
    else:
        raw = [(val[0x1db], val[0x1dc], 0)]
    out = []
    for f, t, inf in raw:
        r = decode_slot(flavour, fmt, f, t, inf)
        if r is NOT_A_BRANCH:
            continue
        if r is None:
            if flavour in ("arch", "amd-v2"):
                break  # the first empty entry ends the valid records
            continue
        flags = {k: v for k, v in r.items() if k not in ("from", "to")}
        out.append((r["from"], r["to"], flags))
    return out


# Which records carry the mispredict flag is the emulator's documented choice (indirect
# branches and returns): checked to prove the flag lands in the manual's bit.
MISPRED = {"ret": 1, "call": 0, "jcc": 0, "jmp": 0}


def run_sequence(name, model, cpu, insmod, flavour, fmt, depth, bases=None):
    vm = boot(name=f"emu-{name}", cpu=cpu, accel="tcg", emulate=f"model={model}" + (f",format={fmt}" if fmt is not None and name.startswith("fmt") else ""),
              script=f"insmod {CHECK} {insmod}\n")
    labels, reads = guest_view(vm.console)
    events = vm.emu_events()
    assert events and events[0]["event"] == "start", f"no emulator log at {vm.emu_log}"
    check_against_log(reads, events)
    recs = decode(flavour, fmt, reads, depth, bases)
    want = [(labels[a], labels[b], k) for a, b, k in SEQUENCE]
    n = 1 if flavour == "amd-single" else len(want)
    got = [(f, t) for f, t, _ in recs[:n]]
    assert got == [(f, t) for f, t, _ in want[:n]], (
        "records (newest first) are not the known sequence:\n"
        + "\n".join(f"  got {f:#x} -> {t:#x}" for f, t in got)
        + "\n" + "\n".join(f"  want {f:#x} -> {t:#x} ({k})" for f, t, k in want[:n]))
    assert all(f != labels["nt"] for f, _, _ in recs), "the not-taken branch left a record"
    for (_, _, flags), (_, _, kind) in zip(recs[:n], want[:n]):
        if "mispred" in flags:
            assert flags["mispred"] == MISPRED[kind], f"{kind}: mispredict flag {flags}"
        if "type" in flags:
            # Arch LBR BR_TYPE (SDM: 0 JCC, 2 NEAR_REL_JMP, 4 NEAR_REL_CALL, 5 NEAR_RET), named
            # as records.ARCH_BR_TYPES names them: the sequence's kinds are those names.
            assert flags["type"] == kind, f"{kind}: branch type {flags}"
        for bit in ("in_tx", "abort"):
            assert flags.get(bit, 0) == 0, f"{kind}: {bit} set without TSX: {flags}"
    # The freeze the sequence ends with is in the log, with the same newest record.
    freezes = [e for e in events if e["event"] == "freeze" and e["cause"] == "wrmsr"]
    assert freezes, "the emulator logged no freeze"
    assert_clean(vm.console)
    return vm


LEGACY = {  # model: (format, depth, FROM, TO, INFO) as the kernel's lbr.c sets them up
    "core2": (1, 4, 0x40, 0x60, 0),  # and no LBR_SELECT (intel_pmu_lbr_init_core: no lbr_sel_map)
    "nehalem": (3, 16, 0x680, 0x6C0, 0),
    "haswell": (4, 16, 0x680, 0x6C0, 0),
    "skylake": (5, 32, 0x680, 0x6C0, 0xDC0),
    "goldmont-plus": (6, 32, 0x680, 0x6C0, 0xDC0),
}


def legacy_case(model, fmt=None):
    dfmt, depth, frm, to, info = LEGACY[model]
    fmt = dfmt if fmt is None else fmt
    name = model if fmt == dfmt else f"fmt{fmt}-{model}"
    select = "" if model not in ("core2", "atom") else " select=0"
    run_sequence(name, model, "Skylake-Client",
                 f"flavour=legacy depth={depth} from={frm:#x} to={to:#x} info={info:#x}{select}",
                 "legacy", fmt, depth, (frm, to, info))


def test_legacy_core2_format1(r):
    legacy_case("core2")


def test_legacy_nehalem_format3(r):
    legacy_case("nehalem")


def test_legacy_haswell_format4(r):
    legacy_case("haswell")


def test_legacy_skylake_format5(r):
    legacy_case("skylake")


def test_legacy_goldmont_plus_format6(r):
    legacy_case("goldmont-plus")


def test_legacy_format0(r):
    legacy_case("skylake", 0)


def test_legacy_format2(r):
    legacy_case("skylake", 2)


def test_legacy_format7(r):
    legacy_case("skylake", 7)


def test_arch_lbr(r):
    run_sequence("arch", "sapphirerapids", "Skylake-Client", "flavour=arch depth=32", "arch", None, 32)


def test_amd_lbr_v2(r):
    run_sequence("amd-v2", "zen4", "EPYC-Genoa", "flavour=amd-v2 depth=16", "amd-v2", None, 16)


def test_amd_single_record(r):
    run_sequence("amd-single", "amd", "EPYC-Genoa", "flavour=amd-single", "amd-single", None, 1)


# A busy user-space loop on the only CPU while lbr_check records (test=user), until USER_DONE
# kills it. The kernel's messages go to the log only meanwhile (dmesg -n 1), and USER_DONE prints
# them afterwards: 7.3's serial console is an nbcon console whose printer thread would otherwise
# compete with the loop for the CPU while lbr_check's own lines are printed. A CI run (of 2f4e9b6)
# saw the printer take all 50 ms of a recording: not one user-mode branch.
USER_LOOP = "dmesg -n 1\n(while :; do :; done) &\nLOOP=$!\nsleep 0.05\n"
# The records are read back with dmesg while the console level still keeps the kernel's own
# messages off the console: a kernel message printed at level 7 in the middle of dmesg's output
# (a user write, which the console does not reprint) cut a record line in two once (CI, stop 30).
USER_DONE = "kill $LOOP\nwait\ndmesg | grep lbr_check:\ndmesg -n 7\n"


def test_kernel_only_filter_drops_user_branches(r):
    # A user-space loop runs while lbr_check records for 300 ms with LBR_SELECT suppressing
    # branches that end in ring > 0. The emulator's counts at the freeze say how many user
    # branches happened (the control: without them the test would prove nothing) and how many
    # were recorded; the guest's own records must all end in the kernel.
    vm = boot(name="emu-user-kernel", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
              script=USER_LOOP + f"insmod {CHECK} flavour=legacy test=user ms=300 filter=kernel "
              "depth=32 from=0x680 to=0x6c0 info=0xdc0\n" + USER_DONE)
    _, reads = guest_view(vm.console)
    events = vm.emu_events()
    check_against_log(reads, events)
    recs = decode("legacy", 5, reads, 32, (0x680, 0x6C0, 0xDC0))
    assert len(recs) == 32 and all(t for _, t, _ in recs), f"fewer than 32 records in 300 ms: {recs}"
    user = [(f, t) for f, t, _ in recs if t >> 63 == 0]
    assert not user, f"LBR_SELECT kernel-only kept branches ending in user space: {user[:4]}"
    freeze = [e for e in events if e["event"] == "freeze"][-1]
    c = freeze["counts"]
    assert c["seen_user"] > 1000, f"the user loop did not run while recording: {c}"
    assert c["recorded_user"] == 0, f"the emulator recorded user branches under the filter: {c}"


def test_cost_against_plain_tcg(r):
    """A benchmark, not an assertion on time: boot plus the sequence scenario, under the emulator
    and on plain TCG, in the same run; the ratio is reported."""
    script = f"insmod {CHECK} flavour=legacy depth=32 from=0x680 to=0x6c0 info=0xdc0 || true\n"
    times = {}
    for name, emulate in (("plain", None), ("emulated", "model=skylake")):
        t = time.monotonic()
        boot(name=f"emu-cost-{name}", cpu="Skylake-Client", accel="tcg", emulate=emulate, script=script)
        times[name] = time.monotonic() - t
    ratio = times["emulated"] / times["plain"]
    print(f"BENCH emulator cost: boot + sequence {times['emulated']:.1f}s under lbr-emu vs "
          f"{times['plain']:.1f}s plain TCG: ratio {ratio:.2f}", flush=True)


def test_trace_agrees_with_the_record_stack(r):
    # With trace=on the emulator also logs every taken branch it saw while recording was on. At
    # each freeze, the record stack (decoded here from the manuals) must be the newest recorded
    # branches of that trace, newest first: two views of the same history, kept by different
    # code paths of the emulator (the stack by the recorder model, the trace by the dispatcher).
    vm = boot(name="emu-trace", cpu="Skylake-Client", accel="tcg", emulate="model=skylake,trace=on",
              script=f"insmod {CHECK} flavour=legacy depth=32 from=0x680 to=0x6c0 info=0xdc0\n")
    events = vm.emu_events()
    freezes = [i for i, e in enumerate(events) if e["event"] == "freeze"]
    assert freezes, "the emulator logged no freeze"
    checked = 0
    for i in freezes:
        stack = [(x["from"], x["to"]) for x in freeze_records(events[i], "legacy", 5)]
        cpu = events[i]["cpu"]
        # The trace restarts with each switch-on: take this recording period's branches.
        start = max((j for j in range(i) if events[j]["event"] == "switch" and events[j]["on"]
                     and events[j]["cpu"] == cpu), default=0)
        trace = [(int(e["from"], 16), int(e["to"], 16)) for e in events[start:i]
                 if e["event"] == "branch" and e["recorded"] and e["cpu"] == cpu]
        newest = trace[::-1][:32]
        assert len(trace) >= 4, f"freeze {events[i]['seq']}: only {len(trace)} traced branches"
        assert stack[:len(newest)] == newest, (
            f"freeze {events[i]['seq']}: the record stack is not the trace's newest branches\n"
            f"  stack {[(hex(f), hex(t)) for f, t in stack[:4]]}\n  trace {[(hex(f), hex(t)) for f, t in newest[:4]]}")
        checked += 1
    assert checked


# Branch Trace Store (SDM vol. 3B 17.4.5, 17.4.9): lbr_check flavour=bts sets up the 64-bit DS
# save area by hand, a circular buffer of `records` 24-byte records, stores the branches with
# DEBUGCTL.TR|BTS and prints the DS fields and every record. Decoded here from the SDM's layout:
# from, to, and bit 4 of the third quadword "branch predicted".
BTS_PREDICTED = 1 << 4


def bts_runs(console):
    """Each lbr_check flavour=bts run in the console, in order: its labels, the DS area the guest
    read back, the DS fields after the run and the buffer's records (from, to, flags)."""
    runs = []
    for part in console.split("lbr_check: done")[:-1]:
        m = re.search(r"lbr_check: bts buffer ([0-9a-f]+) records (\d+)", part)
        ds = re.search(r"lbr_check: bts ds base (\S+) index (\S+) max (\S+) threshold (\S+)", part)
        assert m and ds, "lbr_check printed no BTS run:\n" + "\n".join(kernel_lines(part, "lbr_check"))
        # Whole lines only: a console message from another context can cut a line short (the
        # serial console's nbcon takeover prints it, then the cut record again in full).
        recs = sorted({(int(i), int(f, 16), int(t, 16), int(fl, 16)) for i, f, t, fl in
                       re.findall(r"lbr_check: bts record (\d+) (0x[0-9a-f]+|0) (0x[0-9a-f]+|0) (0x[0-9a-f]+|0)$",
                                  part, re.M)})
        assert [i for i, *_ in recs] == list(range(int(m[2]))), f"records printed: {recs}"
        labels, reads = guest_view(part)
        runs.append({"labels": labels, "reads": reads, "buffer": int(m[1], 16),
                     "ds": dict(zip(("base", "index", "max", "threshold"), (int(v, 16) for v in ds.groups()))),
                     "records": [r[1:] for r in recs]})
    return runs


def bts_freezes(events):
    """The emulator's freezes that stopped BTS, in order."""
    return [e for e in events if e["event"] == "freeze" and e["bts"] is not None]


def assert_no_bts_trouble(events):
    bad = [e for e in events if e["event"] in ("would-fault", "bts-misprogrammed", "bts-full", "would-interrupt")]
    assert not bad, f"the emulated BTS met trouble: {bad[:5]}"


def test_bts_sequence_wraps_in_a_circular_buffer(r):
    # The guest sees the debug store (CPUID DS, DTES64, DS-CPL) and IA32_MISC_ENABLE saying BTS
    # available and PEBS not (the kernel's init_intel() sets its bts/pebs flags from it). seq.S's
    # four taken branches go into a 3-record buffer: the fourth overwrites the first, and the
    # index is one record past the base. With BTS_OFF_OS nothing of the (kernel) sequence is
    # stored.
    vm = boot(name="emu-bts-seq", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
              script="echo cpuflags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' \\t' '\\n\\n' | "
                     "grep -x -e dts -e dtes64 -e ds_cpl -e bts -e pebs)\n"
                     f"insmod {CHECK} flavour=bts records=3\nrmmod lbr_check\n"
                     f"insmod {CHECK} flavour=bts records=3 filter=user\n")
    flags = set(re.search(r"cpuflags: (.*)", vm.console)[1].split())
    assert flags == {"dts", "dtes64", "ds_cpl", "bts"}, f"the guest kernel's debug-store flags: {flags}"
    events = vm.emu_events()
    misc = [int(e["value"], 16) for e in events if e["event"] == "rdmsr" and e["msr"] == "0x1a0"]
    assert misc and all(v >> 11 & 1 == 0 and v >> 12 & 1 for v in misc), f"MISC_ENABLE reads {misc}"
    assert_no_bts_trouble(events)
    runs = bts_runs(vm.console)
    assert len(runs) == 2, f"{len(runs)} BTS runs"
    check_against_log(runs[0]["reads"] + runs[1]["reads"], events)
    for run in runs:
        # IA32_DS_AREA reads back as the guest wrote it (a kernel address, not 0).
        assert dict(run["reads"])[0x600] >> 63, f"DS_AREA read {run['reads']}"
    freezes = bts_freezes(events)
    assert len(freezes) == 2, f"{len(freezes)} BTS freezes in the log"

    run, fr = runs[0], freezes[0]
    base, lab = run["buffer"], run["labels"]
    # Oldest first: jmp j1 -> t1, jz j2 -> t2, call c3 -> leaf, ret r3 -> a3; the ret lands in
    # slot 0 after the wrap. Predicted bit: set for direct branches, clear for the return (the
    # emulator's documented mispredict convention, checked to land in the SDM's bit 4).
    want = [(lab["r3"], lab["a3"], 0), (lab["j2"], lab["t2"], BTS_PREDICTED),
            (lab["c3"], lab["leaf"], BTS_PREDICTED)]
    assert run["records"] == want, (
        "BTS buffer after the sequence:\n" + "\n".join(f"  {f:#x} -> {t:#x} {fl:#x}" for f, t, fl in run["records"])
        + "\nwant:\n" + "\n".join(f"  {f:#x} -> {t:#x} {fl:#x}" for f, t, fl in want))
    assert run["ds"] == {"base": base, "index": base + 24, "max": base + 72, "threshold": base + 73}, run["ds"]
    assert all(f != lab["nt"] for f, _, _ in run["records"]), "the not-taken branch left a record"
    b = fr["bts"]
    assert (b["seen"], b["stored"], b["wraps"], b["dropped"]) == (4, 4, 1, 0), b
    assert (int(b["base"], 16), int(b["index"], 16), int(b["index_at_on"], 16)) == (base, base + 24, base), b

    # BTS_OFF_OS: the kernel's branches are seen, none stored; the buffer stays empty.
    run, fr = runs[1], freezes[1]
    assert run["records"] == [(0, 0, 0)] * 3 and run["ds"]["index"] == run["buffer"], run
    assert (fr["bts"]["seen"], fr["bts"]["stored"]) == (4, 0), fr["bts"]
    assert_clean(vm.console)


def test_bts_circular_buffer_holds_the_newest_branches_with_interrupts(r):
    # BTS on for 50 ms (all rings) while a user-space loop runs on the only CPU: user branches,
    # kernel branches, and interrupts and exceptions as records (from the interrupted
    # instruction to the handler). With trace=on the emulator logs every branch it stored; the
    # 64-record buffer, read from the index on (oldest first), must be the newest 64 of them, and
    # the index and wrap count are what a circular buffer of 64 gives for that many records.
    vm = boot(name="emu-bts-user", cpu="Skylake-Client", accel="tcg", emulate="model=skylake,trace=on",
              script=USER_LOOP + f"insmod {CHECK} flavour=bts test=user ms=50 records=64\n" + USER_DONE)
    events = vm.emu_events()
    assert_no_bts_trouble(events)
    (run,) = bts_runs(vm.console)
    check_against_log(run["reads"], events)
    (fr,) = bts_freezes(events)
    cpu = fr["cpu"]
    start = max(i for i, e in enumerate(events[:events.index(fr)]) if e["event"] == "switch"
                and e["recorder"] == "bts" and e["on"] and e["cpu"] == cpu)
    period = [e for e in events[start:events.index(fr)] if e["event"] == "branch" and e["cpu"] == cpu]
    stored = [e for e in period if e["bts"]]
    n, base = len(stored), run["buffer"]
    assert n > 3 * 64, f"only {n} records in 50 ms: the buffer did not wrap several times"
    b = fr["bts"]
    assert (b["stored"], b["seen"]) == (n, len(period)), (b, n, len(period))
    assert (b["wraps"], int(b["index"], 16)) == (n // 64, base + n % 64 * 24), (b, n)
    assert run["ds"]["index"] == base + n % 64 * 24, run["ds"]
    k = n % 64
    oldest_first = run["records"][k:] + run["records"][:k]
    want = [(int(e["from"], 16), int(e["to"], 16),
             0 if e["kind"] in ("ret", "jmp_ind", "call_ind") else BTS_PREDICTED) for e in stored[-64:]]
    assert oldest_first == want, (
        "the buffer is not the newest 64 stored branches:\n"
        + "\n".join(f"  got {g[0]:#x}->{g[1]:#x} {g[2]:#x}  want {w[0]:#x}->{w[1]:#x} {w[2]:#x}"
                    for g, w in zip(oldest_first, want) if g != w)[:3000])
    # Every ring is stored: the period had user-mode branches; and interrupts or exceptions
    # (deliveries, in the emulator's trace) are stored as records from the interrupted
    # instruction to the handler, like branches.
    user = [e for e in stored if int(e["from"], 16) >> 63 == 0]
    deliveries = [e for e in period if e["delivery"]]
    assert user and deliveries, f"{len(user)} user-mode branches, {len(deliveries)} deliveries stored"
    assert all(e["bts"] and e["kind"] == "far" for e in deliveries), deliveries[:3]


def test_bts_recent_is_the_newest_stored_records(r):
    # bts_recent=256, no trace: the emulator keeps each vCPU's newest 256 stored BTS records
    # apart from guest memory and logs them with every freeze that stops BTS, oldest first, as
    # [from, to, flags]. Two periods in one boot: 50 ms of a user-space loop into a 64-record
    # circular buffer (it wraps several times), then seq.S's four branches into a new 3-record
    # buffer (a second DS area). Each buffer, read by the guest from the index on (oldest first),
    # must be the newest entries of its freeze's `recent`; the ring goes on across the periods.
    vm = boot(name="emu-bts-recent", cpu="Skylake-Client", accel="tcg", emulate="model=skylake,bts_recent=256",
              script=USER_LOOP + f"insmod {CHECK} flavour=bts test=user ms=50 records=64\n" + USER_DONE
              + f"rmmod lbr_check\ninsmod {CHECK} flavour=bts records=3\n")
    events = vm.emu_events()
    assert not [e for e in events if e["event"] == "branch"], "trace=off, yet branches were logged"
    assert_no_bts_trouble(events)
    runs = bts_runs(vm.console)
    assert len(runs) == 2, f"{len(runs)} BTS runs"
    check_against_log(runs[0]["reads"] + runs[1]["reads"], events)
    freezes = bts_freezes(events)
    assert len(freezes) == 2 and freezes[0]["cpu"] == freezes[1]["cpu"], \
        f"{len(freezes)} BTS freezes, on CPUs {[f['cpu'] for f in freezes]}"
    rings = []
    for run, fr in zip(runs, freezes):
        b = fr["bts"]
        assert isinstance(b.get("recent"), list) and isinstance(b.get("recent_total"), int), \
            f"bts_recent=256 but the freeze has recent={b.get('recent')!r:.80} recent_total={b.get('recent_total')!r}"
        ring = [tuple(int(v, 16) for v in rec) for rec in b["recent"]]
        assert all(len(rec) == 3 for rec in ring), b["recent"][:3]
        n, base, index = len(run["records"]), run["buffer"], run["ds"]["index"]
        assert b["wraps"] > 0 and b["dropped"] == 0, b
        k = (index - base) // 24
        assert index == base + 24 * k and 0 <= k < n, run["ds"]
        oldest_first = run["records"][k:] + run["records"][:k]
        assert len(ring) >= n and oldest_first == ring[-n:], (
            f"the {n}-record buffer is not the newest {n} of the emulator's {len(ring)} recent records:\n"
            + "\n".join(f"  got {g[0]:#x}->{g[1]:#x} {g[2]:#x}  want {w[0]:#x}->{w[1]:#x} {w[2]:#x}"
                        for g, w in zip(oldest_first, ring[-n:]) if g != w)[:3000])
        rings.append((ring, b["recent_total"], b["stored"]))
    (ring1, total1, stored1), (ring2, total2, stored2) = rings
    # Period 1 stored more than the ring holds (it keeps exactly the newest 256); BTS was on in
    # no other period before, so every record stored since QEMU started is this period's.
    assert stored1 > 256 and len(ring1) == 256 and total1 == stored1, (stored1, len(ring1), total1)
    # Period 2 stored seq.S's four branches; the ring went on: its 252 older entries are period
    # 1's newest, and the total counts both periods.
    assert stored2 == 4 and total2 == total1 + 4 and len(ring2) == 256, (stored2, total1, total2, len(ring2))
    assert ring2[:252] == ring1[-252:], "the ring did not carry period 1's records into period 2"
    lab = runs[1]["labels"]
    assert [(f, t) for f, t, _ in ring2[-4:]] == [(lab["j1"], lab["t1"]), (lab["j2"], lab["t2"]),
                                                  (lab["c3"], lab["leaf"]), (lab["r3"], lab["a3"])], ring2[-4:]
    assert_clean(vm.console)


def test_bts_cost_against_lbr(r):
    """A benchmark, not an assertion on time: the emulator's cost per branch in BTS mode (a
    record and the index written to guest memory, the DS fields read, at every branch) against
    LBR mode, as branches the emulator gets through in the same guest time (300 ms each, the
    same busy user-space loop on the only CPU), in the same VM run. The ratio is reported."""
    vm = boot(name="emu-bts-cost", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
              script="(while :; do :; done) &\nsleep 0.05\n"
              f"insmod {CHECK} flavour=legacy test=user ms=300 depth=32 from=0x680 to=0x6c0 info=0xdc0\n"
              f"rmmod lbr_check\ninsmod {CHECK} flavour=bts test=user ms=300 records=4096\n"
              "kill %1\n")
    events = vm.emu_events()
    assert_no_bts_trouble(events)
    lbr = [e for e in events if e["event"] == "freeze" and e["bts"] is None and e["cause"] == "wrmsr"][-1]
    (bts,) = bts_freezes(events)
    n_lbr, n_bts = lbr["counts"]["seen"], bts["bts"]["seen"]
    # The loop ran in both windows (user-mode branches), so neither window idled.
    assert lbr["counts"]["seen_user"] > n_lbr // 2 and n_bts > 10_000, (lbr["counts"], bts["bts"])
    assert bts["bts"]["stored"] == n_bts and bts["bts"]["wraps"] > 0, bts["bts"]
    print(f"BENCH emulator BTS cost: {n_bts} branches in 300 ms with BTS (every record written to "
          f"guest memory) vs {n_lbr} with LBR: {n_lbr / n_bts:.2f}x the time per branch, "
          f"{300e3 / n_bts:.2f} vs {300e3 / n_lbr:.2f} us per branch", flush=True)
