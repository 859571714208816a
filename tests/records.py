# SPDX-License-Identifier: GPL-2.0
"""Branch-record field layouts, written for the tests from the Intel SDM and the AMD APM.

Independent of the emulator (tools/lbr-emu) and of lbr-dump (src/record.rs): the tests decode the
emulator's raw ground truth and the guest's raw MSR reads with this, and compare with what
lbr-dump printed, so that no shared mistake can pass."""

import re

MASK64 = (1 << 64) - 1


def sext(v, bits):
    """Sign-extends the low `bits` bits of v to 64 bits."""
    v &= (1 << bits) - 1
    return (v - (1 << bits)) & MASK64 if v >> (bits - 1) else v


# Arch LBR BR_TYPE (IA32_LBR_x_INFO[59:56], SDM "Branch Type Encodings") by the names lbr-dump
# prints (`type=`); 0110B-1111B are reserved or OTHER_BRANCH: "other".
ARCH_BR_TYPES = {0: "jcc", 1: "ind_jmp", 2: "jmp", 3: "ind_call", 4: "call", 5: "ret"}
# decode_slot's value for an entry that holds no branch but does not end the records.
NOT_A_BRANCH = "not-a-branch"


def decode_slot(flavour, fmt, f, t, inf):
    """One record from its raw FROM/TO/INFO MSR values: a dict with from, to and the flags the
    format has (mispred, in_tx, abort, spec, cycles, type), None for an empty entry, or
    NOT_A_BRANCH (LbrExtV2's erratum-1452 entries)."""
    if flavour == "legacy":
        if fmt == 0:
            # SDM LBR_FMT 000000B, "32-bit record format" (Core Solo/Duo): FROM in 31:0, TO in
            # 63:32 of one MSR. Only the emulator's own test (emulator.py) reads it: lbr-dump
            # refuses format 0 (a 32-bit address cannot be a 64-bit kernel one), so no test
            # compares lbr-dump's records with this. Sign extension recovers the -2 GiB kernel
            # text mapping, which the emulator's test runs in.
            r = {"from": sext(f, 32), "to": sext(f >> 32, 32)}
        elif fmt in (1, 2):
            r = {"from": f, "to": t}
        elif fmt == 3:
            r = {"from": sext(f, 63), "to": t, "mispred": f >> 63}
        elif fmt == 4:
            # SDM "LBR Stack" (format 000100B): bit 63 MISPRED, 62 IN_TX, 61 TSX_ABORT, address
            # in 60:0. The emulated CPUs have no TSX: the flags are 0 (the kernel's lbr.c: branch
            # captures leave bits 62:61 off on parts without TSX) and not reported.
            r = {"from": sext(f, 61), "to": t, "mispred": f >> 63}
        elif fmt == 5:
            r = {"from": f, "to": t, "mispred": inf >> 63, "in_tx": inf >> 62 & 1, "abort": inf >> 61 & 1,
                 "cycles": inf & 0xFFFF}
        elif fmt == 6:
            r = {"from": sext(f, 63), "to": sext(t, 48), "mispred": f >> 63, "cycles": t >> 48}
        elif fmt == 7:
            r = {"from": f, "to": t, "mispred": inf >> 63, "cycles": inf & 0xFFFF}
        else:
            raise ValueError(fmt)
        return r if r["from"] or r["to"] else None
    if flavour == "arch":
        # SDM vol. 3B, "Last Branch Records" (Architectural LBR): IA32_LBR_x_FROM_IP == 0 marks an
        # invalid record, and the stack is newest-first from entry 0. IA32_LBR_x_INFO: bit 63
        # MISPRED, 62 IN_TSX, 61 TSX_ABORT, 60 CYC_CNT_VALID (15:0 CYC_CNT counts only when set),
        # 59:56 BR_TYPE.
        if f == 0:
            return None  # FROM == 0 ends the valid records
        r = {"from": f, "to": t, "mispred": inf >> 63, "in_tx": inf >> 62 & 1, "abort": inf >> 61 & 1,
             "type": ARCH_BR_TYPES.get(inf >> 56 & 0xF, "other")}
        if inf >> 60 & 1:
            r["cycles"] = inf & 0xFFFF
        return r
    if flavour == "amd-v2":
        # AMD APM vol. 2, "Last Branch Stack Extension" (LbrExtV2): FROM[63] mispredict, the
        # addresses sign-extended from bit 57 (58-bit linear addresses); TO[63] valid, TO[62]
        # speculative. valid = spec = 0: no branch recorded. Revision guide for family 19h,
        # erratum 1452: TO[61] set marks an entry that is not a branch (the kernel's amd/lbr.c
        # discards it); the entries after it are still records.
        if not t >> 63 and not t >> 62 & 1:
            return None  # valid = 0, spec = 0: empty
        if t >> 61 & 1:
            return NOT_A_BRANCH
        return {"from": sext(f, 58), "to": sext(t, 58), "mispred": f >> 63, "spec": t >> 62 & 1}
    return {"from": f, "to": t} if f or t else None


def freeze_records(event, flavour, fmt):
    """The decoded records of an emulator `freeze` event, newest first, empty entries dropped."""
    out = []
    for s in event["records"]:
        r = decode_slot(flavour, fmt, int(s["from"], 16), int(s["to"], 16), int(s["info"], 16))
        if r is not None and r is not NOT_A_BRANCH:
            out.append(r)
    return out


def decode_ler(flavour, fmt, f, t):
    """The last exception record (Intel LER, AMD LastException: the last branch before the most
    recent exception or interrupt) as (from, to) from its raw FROM/TO MSR values, as the tests
    read the manuals; None when the recorder keeps none while lbr-dump records, or it holds
    nothing (both 0)."""
    if flavour == "amd-v2":
        # AMD APM vol. 2, 13.1.1 "Control-Transfer Recording MSRs": LastIntFromIP/ToIP are loaded
        # from LastBranchFromIP/ToIP by the recording DebugCtl.LBR enables; lbr-dump (like the
        # kernel's amd/lbr.c) switches LbrExtV2 on with DBG_EXTN_CFG.LBRV2EN alone.
        return None
    if not f and not t:
        return None
    if flavour == "legacy":
        # SDM vol. 4: MSR_LER_FROM_LIP / TO_LIP hold linear addresses; no flag is defined. Where
        # the format keeps flags in the LBR stack's FROM (3 and 6: bit 63; 4: bits 63:61, which
        # the hardware leaves clear without TSX, in MSR_LER_FROM_LIP too as Xen's vmx.c found,
        # errata HSM182/BDM127) or TO (6: bits 63:48 cycles; 4: bits 63:61 of MSR_LER_TO_LIP
        # unreliable, Broadwell erratum BDF93), the address is the sign-extended rest.
        if fmt in (3, 6):
            f = sext(f, 63)
        if fmt == 4:
            f, t = sext(f, 61), sext(t, 61)
        if fmt == 6:
            t = sext(t, 48)
    return f, t


PRINTED_LER = re.compile(r"lbr_dump: ler 0x([0-9a-f]{16}) -> 0x([0-9a-f]{16}) \| from=(\S+(?: \[\w+\])?) to=(\S+(?: \[\w+\])?)")


def printed_lers(text):
    """lbr-dump's last exception record lines (Documentation/lbr-dump/formats.rst "What an oops shows") in `text`: dicts
    with from, to and the two symbols."""
    return [{"from": int(m[1], 16), "to": int(m[2], 16), "from_sym": m[3], "to_sym": m[4]}
            for m in PRINTED_LER.finditer(text)]


PRINTED = re.compile(r"lbr_dump: #(\d+) 0x([0-9a-f]+) -> 0x([0-9a-f]+)((?: [a-z_]+(?:=\w+)?)*) \| from=(\S+(?: \[\w+\])?) to=(\S+(?: \[\w+\])?)")


def printed_records(text):
    """lbr-dump's record lines (Documentation/lbr-dump/formats.rst "What an oops shows"), in order: dicts with from, to,
    the flags printed, and the two symbols."""
    out = []
    for m in PRINTED.finditer(text):
        r = {"index": int(m[1]), "from": int(m[2], 16), "to": int(m[3], 16), "from_sym": m[5], "to_sym": m[6]}
        for tok in m[4].split():
            k, _, v = tok.partition("=")
            r[k] = (int(v) if v.isdigit() else v) if v else 1
        out.append(r)
    return out


# The emulator's flavour names (its `start` event: tools/lbr-emu) and lbr-dump's (`flavour=` in a
# snapshot's header, "flavour" in lbr-decode's JSON: src/facility.rs Flavour), spelled apart on
# purpose and checked against each other by every comparison with the ground truth.
FLAVOURS = {"legacy": "intel-lbr", "arch": "intel-arch-lbr", "amd-v2": "amd-lbr-v2", "amd-single": "amd-lbr"}


def emulated(events):
    """(flavour, format) of the recorder the emulator presented (its `start` event), in the
    emulator's names; format is None except for Intel legacy LBR."""
    start = events[0] if events else {}
    assert start.get("event") == "start", "the emulator's log does not begin with its start event"
    assert start["flavour"] in FLAVOURS, f"the emulator presents a flavour the tests do not know: {start}"
    return start["flavour"], start.get("format")


def assert_same_recorder(events, printed_flavour, printed_format=None):
    """lbr-dump describes the recorder the emulator presented: the same flavour (by name, through
    FLAVOURS) and, for Intel legacy LBR, the same format."""
    flavour, fmt = emulated(events)
    assert printed_flavour == FLAVOURS[flavour], (
        f"lbr-dump says flavour={printed_flavour}, the emulator presents {flavour} ({FLAVOURS[flavour]})")
    if printed_format is not None and fmt is not None:
        assert int(printed_format) == fmt, f"lbr-dump says format={printed_format}, the emulator presents {fmt}"


def show(v):
    return f"{v:#x}" if isinstance(v, int) else repr(v)


def assert_equals_freeze(events, head, printed, count=None):
    """The printed records (printed_records) of the snapshot whose header line is `head` equal the
    emulator's record stack at the freeze on its CPU whose newest record is the printed newest one
    (the last such `freeze` event), decoded as the recorder the emulator presented. Returns that
    freeze event. With `count`, the printed ones are that many, the stack's newest."""
    assert printed, "the snapshot has no record lines"
    m = re.search(r" cpu=(\d+) .* flavour=(\S+) format=(\d+) ", head)
    assert m, f"not a snapshot header: {head}"
    cpu = int(m[1])
    assert_same_recorder(events, m[2], m[3])
    flavour, fmt = emulated(events)
    newest = (printed[0]["from"], printed[0]["to"])
    freezes = [e for e in events if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == cpu]
    truth = [(e, t) for e, t in ((e, freeze_records(e, flavour, fmt)) for e in freezes)
             if t and (t[0]["from"], t[0]["to"]) == newest]
    assert truth, (f"cpu {cpu}: no freeze in the emulator's log has the printed newest record "
                   f"{newest[0]:#x} -> {newest[1]:#x}")
    freeze, want = truth[-1]
    if count is not None:  # bounded output: the newest `count` of them
        assert len(printed) == count and len(want) > count, (cpu, len(printed), len(want))
        want = want[:count]
    assert len(printed) == len(want), f"cpu {cpu}: printed {len(printed)} records, the recorder held {len(want)}"
    for p, w in zip(printed, want):
        for k, v in w.items():
            got = p.get(k, 0)
            assert got == v, f"cpu {cpu} record #{p['index']}: {k} printed {show(got)}, ground truth {show(v)}\n  {p}\n  {w}"
        extra = set(p) - set(w) - {"index", "from_sym", "to_sym"}
        assert not extra, f"cpu {cpu} record #{p['index']}: printed {sorted(extra)}, which the record does not hold\n  {p}\n  {w}"
    return freeze


LER_MSRS = (0x1DD, 0x1DE)  # MSR_LER_FROM_LIP / TO_LIP, IA32_LER_FROM_IP / TO_IP, LastIntFromIP / ToIP


def assert_ler_equals_freeze(events, freeze, block):
    """The last exception record line of a printed snapshot (`block`: its lines) equals the
    emulator's LER at `freeze` (the freeze assert_equals_freeze matched), decoded as the tests
    read the manuals, and lbr-dump read it from the LER MSRs after that freeze; where the
    recorder keeps none, no line is printed and lbr-dump never read those MSRs. Returns the
    printed record (None when there is none)."""
    flavour, fmt = emulated(events)
    lines = printed_lers(block)
    assert len(lines) <= 1, f"more than one last exception record line: {lines}"
    reads = [e for e in events[events.index(freeze):] if e["event"] == "rdmsr" and e["cpu"] == freeze["cpu"]
             and int(e["msr"], 16) in LER_MSRS]
    want = decode_ler(flavour, fmt, int(freeze["ler"][0], 16), int(freeze["ler"][1], 16))
    if flavour == "amd-v2":
        assert not lines, f"{flavour} keeps no last exception record, lbr-dump printed one: {lines}"
        assert not [e for e in events if e["event"] == "rdmsr" and int(e["msr"], 16) in LER_MSRS], \
            "lbr-dump read the LER MSRs of a recorder that keeps none"
        return None
    if want is None:
        assert not lines, f"the recorder's LER held nothing, lbr-dump printed {lines}"
        return None
    assert lines, f"no last exception record printed; the emulator's LER was {freeze['ler']}"
    got = (lines[0]["from"], lines[0]["to"])
    assert got == want, (f"last exception record printed {got[0]:#x} -> {got[1]:#x}, ground truth "
                         f"{want[0]:#x} -> {want[1]:#x} (raw {freeze['ler']})")
    assert [int(e["msr"], 16) for e in reads[:2]] == list(LER_MSRS) and \
        [e["value"] for e in reads[:2]] == freeze["ler"], \
        f"lbr-dump did not read the LER MSRs after the freeze: {reads[:2]}"
    return lines[0]


def assert_decoded_equals_freeze(events, snap, newest=None):
    """A snapshot as lbr-decode's JSON gives it (from a log or a dump) equals the emulator's record
    stack at the last freeze on its CPU whose newest record is the snapshot's newest: addresses,
    mispredict flags and cycle counts, record for record. With `newest`, the snapshot has that
    many records (bounded output) and they equal the stack's newest ones."""
    assert_same_recorder(events, snap["flavour"], snap["format"])
    flavour, fmt = emulated(events)
    got = [(int(x["from"]["addr"], 16), int(x["to"]["addr"], 16), int(x.get("mispred", False)),
            x.get("cycles")) for x in snap["records"]]
    assert got, f"cpu {snap['cpu']}: the snapshot has no records"
    truth = [freeze_records(e, flavour, fmt) for e in events
             if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == snap["cpu"]]
    truth = [t for t in truth if t and (t[0]["from"], t[0]["to"]) == got[0][:2]]
    assert truth, f"cpu {snap['cpu']}: no freeze in the emulator's log has the snapshot's newest record"
    want = [(t["from"], t["to"], t.get("mispred", 0), t.get("cycles")) for t in truth[-1]]
    if newest is not None:
        assert len(got) == newest and len(want) > newest, (len(got), len(want))
        want = want[:newest]
    assert got == want, f"cpu {snap['cpu']}: decoded {got[:3]}..., ground truth {want[:3]}..."


def heads(text):
    """The snapshot header lines of `text` (not its `none:` or `kept:` lines)."""
    from harness import snapshot_heads
    return [h for h in snapshot_heads(text) if " vector=" in h]


def snapshot_in(report):
    """The one snapshot lbr-dump printed in a report: (header line, its block up to
    its end line, the printed records)."""
    found = heads(report)
    assert len(found) == 1, f"{len(found)} snapshots in the report, not 1:\n{report[:4000]}"
    head = found[0]
    block = report[report.index(head):]
    assert "lbr_dump: end " in block, "the snapshot has no end line in the report:\n" + block[:4000]
    block = block[:block.index("lbr_dump: end ")]
    return head, block, printed_records(block)


class Freezes:
    """The emulator's freezes made by a stub (cause wrmsr), taken in order: each printed snapshot
    is matched with the first freeze not yet matched, on its CPU, whose record stack's newest
    records equal its printed ones (a storm's warnings at one site have the same newest record,
    and a bounded snapshot shows the newest `print_records` only)."""

    def __init__(self, events):
        self.events = events
        self.flavour, self.fmt = emulated(events)
        self.used = set()

    def match(self, head, printed, bounded=False):
        cpu = int(re.search(r" cpu=(\d+) ", head)[1])
        want = [(p["from"], p["to"], p.get("mispred", 0), p.get("cycles")) for p in printed]
        for i, e in enumerate(self.events):
            if i in self.used or e["event"] != "freeze" or e["cause"] != "wrmsr" or e["cpu"] != cpu:
                continue
            truth = [(t["from"], t["to"], t.get("mispred", 0), t.get("cycles"))
                     for t in freeze_records(e, self.flavour, self.fmt)]
            if (truth[:len(want)] if bounded else truth) == want:
                self.used.add(i)
                # Field by field, with the flags, as every ground-truth comparison does.
                assert_equals_freeze(self.events[:i + 1], head, printed,
                                     count=len(printed) if bounded and len(truth) > len(printed) else None)
                return e
        raise AssertionError(f"cpu {cpu}: no freeze of the emulator's (not matched before) holds the printed "
                             f"records of {head}:\n  " + "\n  ".join(map(str, want[:4])))
