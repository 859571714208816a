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


def decode_slot(flavour, fmt, f, t, inf):
    """One record from its raw FROM/TO/INFO MSR values: a dict with from, to and the flags the
    format has (mispred, in_tx, abort, cycles, type), or None for an empty entry."""
    if flavour == "legacy":
        if fmt == 0:
            r = {"from": sext(f, 32), "to": sext(f >> 32, 32)}
        elif fmt in (1, 2):
            r = {"from": f, "to": t}
        elif fmt == 3:
            r = {"from": sext(f, 63), "to": t, "mispred": f >> 63}
        elif fmt == 4:
            # SDM: bit 62 IN_TX, 61 TSX_ABORT, address in 60:0. The emulated CPUs have no TSX;
            # there bits 62:61 read as sign extension, not flags (kernel: lbr_from_signext_quirk).
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
        if f == 0:
            return None  # FROM == 0 ends the valid records
        return {"from": f, "to": t, "mispred": inf >> 63, "cycles": inf & 0xFFFF, "type": inf >> 56 & 0xF}
    if flavour == "amd-v2":
        if not t >> 63 and not t >> 62 & 1:
            return None  # valid = 0, spec = 0: empty
        return {"from": sext(f, 58), "to": sext(t, 58), "mispred": f >> 63}
    return {"from": f, "to": t} if f or t else None


def freeze_records(event, flavour, fmt):
    """The decoded records of an emulator `freeze` event, newest first, empty entries dropped."""
    out = []
    for s in event["records"]:
        r = decode_slot(flavour, fmt, int(s["from"], 16), int(s["to"], 16), int(s["info"], 16))
        if r is not None:
            out.append(r)
    return out


PRINTED = re.compile(r"lbr_dump: #(\d+) 0x([0-9a-f]+) -> 0x([0-9a-f]+)((?: [a-z_]+(?:=\d+)?)*) \| (\S+(?: \[\w+\])?) -> (\S+(?: \[\w+\])?)")


def printed_records(text):
    """lbr-dump's record lines (README: "What an oops shows"), in order: dicts with from, to,
    the flags printed, and the two symbols."""
    out = []
    for m in PRINTED.finditer(text):
        r = {"index": int(m[1]), "from": int(m[2], 16), "to": int(m[3], 16), "from_sym": m[5], "to_sym": m[6]}
        for tok in m[4].split():
            k, _, v = tok.partition("=")
            r[k] = int(v) if v else 1
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


def assert_equals_freeze(events, head, printed):
    """The printed records (printed_records) of the snapshot whose header line is `head` equal the
    emulator's record stack at the freeze on its CPU whose newest record is the printed newest one
    (the last such `freeze` event), decoded as the recorder the emulator presented."""
    assert printed, "the snapshot has no record lines"
    m = re.search(r" cpu=(\d+) .* flavour=(\S+) format=(\d+) ", head)
    assert m, f"not a snapshot header: {head}"
    cpu = int(m[1])
    assert_same_recorder(events, m[2], m[3])
    flavour, fmt = emulated(events)
    newest = (printed[0]["from"], printed[0]["to"])
    freezes = [e for e in events if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == cpu]
    truth = [t for t in (freeze_records(e, flavour, fmt) for e in freezes)
             if t and (t[0]["from"], t[0]["to"]) == newest]
    assert truth, (f"cpu {cpu}: no freeze in the emulator's log has the printed newest record "
                   f"{newest[0]:#x} -> {newest[1]:#x}")
    want = truth[-1]
    assert len(printed) == len(want), f"cpu {cpu}: printed {len(printed)} records, the recorder held {len(want)}"
    for p, w in zip(printed, want):
        for k, v in w.items():
            got = p.get(k, 0)
            assert got == v, f"cpu {cpu} record #{p['index']}: {k} printed {got:#x}, ground truth {v:#x}\n  {p}\n  {w}"


def assert_decoded_equals_freeze(events, snap):
    """A snapshot as lbr-decode's JSON gives it (from a log or a dump) equals the emulator's record
    stack at the last freeze on its CPU whose newest record is the snapshot's newest: addresses,
    mispredict flags and cycle counts, record for record."""
    assert_same_recorder(events, snap["flavour"], snap["format"])
    flavour, fmt = emulated(events)
    got = [(int(x["from"]["addr"], 16), int(x["to"]["addr"], 16), int(x.get("mispred", False)),
            x.get("cycles")) for x in snap["records"]]
    assert got, f"cpu {snap['cpu']}: the snapshot has no records"
    truth = [freeze_records(e, flavour, fmt) for e in events
             if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == snap["cpu"]]
    truth = [t for t in truth if t and (t[0]["from"], t[0]["to"]) == got[0][:2]]
    assert truth, f"cpu {snap['cpu']}: no freeze in the emulator's log has the snapshot's newest record"
    want = [(t["from"], t["to"], t["mispred"], t["cycles"]) for t in truth[-1]]
    assert got == want, f"cpu {snap['cpu']}: decoded {got[:3]}..., ground truth {want[:3]}..."
