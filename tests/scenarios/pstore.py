# SPDX-License-Identifier: GPL-2.0
"""pstore end to end: branch records read back after the machine rebooted, from
/sys/fs/pstore/dmesg-ramoops-N, as users read them.

One VM boots twice (harness.pstore, scripts/vm.py boots=2): the first boot, ramoops configured
on the command line, crashes with lbr-dump armed under the emulator and panics (panic=-1
resets the VM at once: QEMU's system reset keeps guest RAM); the second boot finds the dump in
pstore and saves /sys/fs/pstore, byte for byte, to a virtio disk. lbr-decode reads the files,
and its records are compared with the emulator's ground truth of the first boot (its record
stack at the freeze: tests/records.py). What a ramoops record of a given size holds (README
"Reading snapshots from pstore") is derived from fs/pstore: pstore_dump() fills a record with
the newest text of the log that fits (kmsg_dump_get_buffer, `<level>[time] text` lines) after
an `Oops#1 Part1` line; with deflate compression a record holds up to (record_size - 12) *
100 / 60 bytes of text (platform.c allocate_buf_for_compression: the compressed size is
assumed at most 60%), without it record_size - 12 (the persistent RAM zone's header) less the
24-byte ramoops header that ramoops_pstore_write() adds, and cuts from the newest text.
"""

import json
import re

from harness import ARM, CRASH, LKDTM, MODULE_KO, decode, kernel_lines, pstore, symbols, tail
from vm import emu_boot_starts
from records import (assert_decoded_equals_freeze, assert_equals_freeze, emulated, freeze_records,
                     printed_records)

MODEL = "skylake"
# A crash through a corrupted function pointer (tests/modules/lbr_crash), oops=panic: the oops is
# dumped to pstore (KMSG_DUMP_OOPS, Oops#1), then the panic (KMSG_DUMP_PANIC, Panic#2), each in a
# ramoops zone of its own; the panic resets the VM.
JUMP = ARM + f"insmod {CRASH} crash=jump\nsleep 600\n"

# README's budget for one snapshot as pstore stores it: a header line, 32 record lines and an end
# line, each with kmsg_dump's `<3>[ssss.uuuuuu] ` prefix (17 bytes while the uptime is below
# 100000 s). Real output of the test kernel: record lines of 119 to 167 bytes (averages 142 to
# 167), headers of 168 to 176, end lines of 44, 4752 to 5546 bytes in all; the budget allows 200
# bytes per record line.
LINE_BUDGET = 200
SNAPSHOT_BUDGET = 200 + 32 * LINE_BUDGET + 60


def deflate_capacity(record_size, header="Panic#2 Part1\n"):
    """Bytes of log text a ramoops record of `record_size` holds with deflate compression
    (fs/pstore/platform.c: bufsize = record_size - 12, the text buffer bufsize * 100 / 60, less
    the Part header and kmsg_dump_get_buffer's terminating byte)."""
    return (record_size - 12) * 100 // 60 - len(header) - 1


def run(name, script, record_size, compress=True, smp=1, append="oops=panic", bounded=False):
    """A crash under the emulated Skylake in the first boot, read back in the second: (run,
    {file name: text})."""
    res, files = pstore(f"pstore-{name}", script, record_size, compress=compress, smp=smp,
                        append=append, cpu="Skylake-Client", accel="tcg", emulate=f"model={MODEL}",
                        timeout=600, bounded=bounded)
    first, second = res.boots
    # The environment is what the test claims: ramoops registered on the memory and record size
    # asked for, in both boots, with the compression asked for; pstore dumps oopses.
    want = (f"pstore-test: ramoops mem_address=268435456 mem_size=1048576 record_size={record_size} "
            f"max_reason=2 compress={'deflate' if compress else '(null)'}")
    for n, con in ((1, first), (2, second)):
        assert want in con, f"boot {n}: ramoops is not configured as asked ({want}):\n" + \
            "\n".join(l for l in con.splitlines() if "pstore" in l or "ramoops" in l)
        assert kernel_lines(con, "ramoops: using 0x100000@0x10000000, ecc: 0"), f"boot {n}: no ramoops:\n" + tail(con)
        assert kernel_lines(con, "pstore: Registered ramoops as persistent store backend"), f"boot {n}: pstore has no ramoops"
    assert bool(kernel_lines(first, "pstore: Using crash dump compression: deflate")) == compress, \
        "pstore's compression is not what was asked:\n" + "\n".join(kernel_lines(first, "pstore:"))
    # One VM, reset warm: the emulator saw two boots (power-on and the panic's reboot), and
    # lbr-dump armed in the first only.
    boots = emu_boot_starts(res.emu_events())
    assert len(boots) == 2, f"the emulator saw {len(boots)} boot(s), not 2 (log {res.emu_log})"
    assert kernel_lines(first, "lbr_dump: armed") and not kernel_lines(second, "lbr_dump: armed")
    assert "Kernel panic - not syncing" in first, "the first boot did not panic:\n" + tail(first)
    texts = {k: v.decode() for k, v in files.items()}
    # Each record is the first boot's own log text: its lines, timestamps and all, are lines of
    # the first boot's console (and none of the second's, whose kernel wrote none of them).
    for k, text in texts.items():
        lines = [l for l in text.splitlines()[1:] if "lbr_dump: " in l]
        assert lines, f"{k} holds no lbr_dump line:\n{text[-2000:]}"
        for l in lines[:-1]:  # (the last may be cut by ramoops' header, without compression)
            line = re.sub(r"^<\d+>", "", l)
            assert line in first and line not in second, f"{k}: not a line of the first boot's console: {l}"
    return res, texts


def pstore_files(texts):
    """{reason: (file name, text)} of the dmesg records, by their pstore header (Oops, Panic)."""
    out = {}
    for name, text in texts.items():
        m = re.match(r"(\w+)#(\d+) Part(\d+)\n", text)
        assert name.startswith("dmesg-ramoops-") and m, f"{name}: not a pstore dmesg record: {text[:80]!r}"
        assert m[3] == "1", f"{name}: ramoops keeps Part1 only, this is Part{m[3]}"
        out[m[1]] = (name, text)
    return out


def decoded(res, text, name):
    """lbr-decode's JSON for one pstore file (written out as it came from the guest)."""
    path = res.log.parent / name
    path.write_text(text)
    code, out, err = decode(*symbols(), path)
    return code, json.loads(out) if out else None, err


def snapshot_bytes(text, cpu, seq):
    """Bytes of the snapshot cpu/seq in a pstore record, from its header line to its end line."""
    start = text.index(f"lbr_dump: v2 cpu={cpu} seq={seq} ")
    start = text.rindex("\n", 0, start) + 1
    end = text.index("\n", text.index(f"lbr_dump: end cpu={cpu} seq={seq}")) + 1
    return end - start


def test_whole_snapshot_read_back_after_reboot(r):
    # ramoops' default record size, 4096, deflate (CONFIG_PSTORE_COMPRESS): it holds a whole
    # 32-record snapshot, and the oops record's snapshot equals the first boot's ground truth.
    res, texts = run("whole", JUMP, 4096)
    files = pstore_files(texts)
    assert set(files) == {"Oops", "Panic"}, f"pstore holds {sorted(texts)}: {[t[:14] for t in texts.values()]}"
    events = res.emu_events(boot=1)
    for reason in ("Oops", "Panic"):
        name, text = files[reason]
        code, doc, err = decoded(res, text, name)
        assert code == 0, f"{name}: lbr-decode exit {code}: {err}"
        assert doc["warnings"] == [] or all("no snapshot for that oops" in w for w in doc["warnings"]), doc["warnings"]
        [s] = doc["snapshots"]
        assert (s["cpu"], s["seq"], s["vector"], s["complete"]) == (0, 1, 14, True), s
        assert len(s["records"]) == 32, len(s["records"])
        assert_decoded_equals_freeze(events, s)
        # The decoded records are the first boot's printed ones (the console's copy).
        [head] = [l for l in kernel_lines(res.boots[0], "lbr_dump: v2 cpu=0 seq=1 ")]
        printed = printed_records(res.boots[0][res.boots[0].index(head):])[:32]
        assert [(int(x["from"]["addr"], 16), int(x["to"]["addr"], 16)) for x in s["records"]] == \
            [(p["from"], p["to"]) for p in printed]
        assert len(text) <= (4096 - 12) * 100 // 60, f"{name}: {len(text)} bytes, more than a 4096-byte record holds"
        assert snapshot_bytes(text, 0, 1) <= SNAPSHOT_BUDGET, snapshot_bytes(text, 0, 1)
    # The panic that followed the oops says so in its record too.
    assert "lbr_dump: v2 cpu=0 none: this panic follows the oops" in files["Panic"][1]


def truth(events, cpu, newest):
    """The emulator's record stack at the last freeze on `cpu` whose newest record is `newest`
    (from, to), decoded by records.py."""
    flavour, fmt = emulated(events)
    stacks = [freeze_records(e, flavour, fmt) for e in events
              if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == cpu]
    stacks = [t for t in stacks if t and (t[0]["from"], t[0]["to"]) == newest]
    assert stacks, f"cpu {cpu}: no freeze has the newest record {newest[0]:#x} -> {newest[1]:#x}"
    return stacks[-1]


def test_record_too_small_names_the_missing_records(r):
    # 4096 bytes without compression: 4060 bytes of text, less than the log from the snapshot's
    # header on. pstore keeps the newest text, so the record starts inside the snapshot: the
    # decoder must say it is cut and which records are missing, and what is kept must be the
    # ground truth's records.
    res, texts = run("cut", JUMP, 4096, compress=False)
    files = pstore_files(texts)
    name, text = files["Oops"]
    first = res.boots[0]
    [head] = kernel_lines(first, "lbr_dump: v2 cpu=0 seq=1 ")
    printed = printed_records(first[first.index(head):])[:32]
    events = res.emu_events(boot=1)
    assert_equals_freeze(events, head, printed)  # the console's copy is whole and true
    want = truth(events, 0, (printed[0]["from"], printed[0]["to"]))
    assert len(want) == 32
    # What the record holds, read by the tests' own parser: the oldest records and the end line.
    assert "lbr_dump: v2 " not in text, "the record holds the snapshot's header: not cut"
    kept = printed_records(text)
    assert kept and "lbr_dump: end cpu=0 seq=1" in text, text[-600:]
    k = kept[0]["index"]
    assert k > 0 and [p["index"] for p in kept] == list(range(k, 32)), [p["index"] for p in kept]
    for p in kept:
        w = want[p["index"]]
        assert (p["from"], p["to"], p.get("mispred", 0), p.get("cycles")) == \
            (w["from"], w["to"], w.get("mispred", 0), w.get("cycles")), (p, w)
    code, doc, err = decoded(res, text, name)
    assert code == 1 and doc["snapshots"] == [], (code, doc["snapshots"])
    expect = (f"{name}: line {text[:text.index('lbr_dump: #')].count(chr(10)) + 1}: snapshot cpu=0 seq=1 is cut: "
              f"the log starts inside it (its header line is not in the log): records #0-#{k - 1} missing, "
              f"{32 - k} kept (#{k}-#31)")
    assert any(w.startswith(f"{res.log.parent / expect}") for w in doc["warnings"]), \
        f"want {expect!r}, got {doc['warnings']}"
    # The text output says the same on standard error.
    code, out, err = decode(*symbols(), res.log.parent / name, fmt="text")
    assert code == 1 and expect in err, err
    # And it is cut because of the size: the same log from the header on is longer than the
    # 4060 bytes an uncompressed 4096-byte record holds (its 12-byte header and 24-byte
    # "Oops#1 Part1" line aside); pstore's kmsg dump copies whole lines only, the newest that
    # fit, so the record is full to within one line (the next older one did not fit).
    room = 4096 - 12 - 24
    longest = max(len(line) + 1 for line in text.splitlines())
    assert room - longest < len(text) <= room, (len(text), longest)


def test_every_cpu_of_a_panic_in_one_record(r):
    # README: with deflate, a record of 4096 bytes per CPU (rounded up to a power of two) holds
    # every CPU's snapshot of a panic. 2 vCPUs, sysrq-c, 8192 bytes: both whole, equal to the
    # ground truth.
    res, texts = run("smp2", ARM + "echo c > /proc/sysrq-trigger\nsleep 600\n", 8192, smp=2, append="")
    files = pstore_files(texts)
    assert set(files) == {"Panic"}, sorted(files)
    name, text = files["Panic"]
    assert deflate_capacity(8192, "Panic#1 Part1\n") >= 2 * SNAPSHOT_BUDGET
    code, doc, err = decoded(res, text, name)
    assert code == 0, err
    assert doc["warnings"] == [], doc["warnings"]
    snaps = doc["snapshots"]
    assert sorted(s["cpu"] for s in snaps) == [0, 1], [(s["cpu"], s["vector"]) for s in snaps]
    events = res.emu_events(boot=1)
    for s in snaps:
        assert s["complete"] and len(s["records"]) == 32, (s["cpu"], len(s["records"]))
        assert_decoded_equals_freeze(events, s)
        assert snapshot_bytes(text, s["cpu"], s["seq"]) <= SNAPSHOT_BUDGET
    assert [s["vector"] for s in snaps][0] == 256, "the panicking CPU's snapshot comes first"


# lbr-dump's default output (print_records=16, print_all off), armed as users arm it.
ARM_DEFAULT = f"insmod {MODULE_KO} enable=1\n"


def default_sizes(name, script, smp, append, reason, panic_line, rip, allowed=None):
    """A crash with ramoops' default record size (4096) and compression (deflate) and pstore's
    default kmsg_bytes, and lbr-dump's default output: the `reason` record (Oops, Panic) holds
    the kernel's own crash text (`panic_line`, with `rip` the registers from RIP to R15, the
    call trace) beside the crashing CPU's 16 newest records, which lbr-decode reads equal to the
    emulator's ground truth, and the `kept:` lines for what was not printed. Returns the
    record's text and lbr-decode's JSON of it. `allowed`: a text lbr-decode's warnings may hold
    (a `none:` line lbr-dump prints on purpose)."""
    res, texts = run(name, script, 4096, smp=smp, append=append, bounded=True)
    files = pstore_files(texts)
    assert reason in files, sorted(files)
    fname, text = files[reason]
    for want in (panic_line, "Call Trace:") + (("RIP: 0010:", "RAX: ", "R15: ") if rip else ()):
        assert want in text, f"{fname}: the kernel's {want!r} is not in the record:\n{text[:1500]}"
    code, doc, err = decoded(res, text, fname)
    if doc and allowed:
        doc["warnings"] = [w for w in doc["warnings"] if allowed not in w]
    if code != 0 or doc["warnings"]:
        # What tells the causes of a CPU without a stop capture apart: whether vpanic() needed
        # its stop NMI, and each CPU's last recorder event in the emulator (a freeze with no
        # switch back on: a capture that never finished; a switch on: no stop taken at all).
        nmi = "Shutting down cpus with NMI" in res.boots[0]
        last = {}
        for e in res.emu_events(boot=1):
            if e["event"] in ("freeze", "switch"):
                last[e["cpu"]] = f"{e['event']}{'' if 'on' not in e else ' on' if e['on'] else ' off'}" \
                                 f"@{e['seq']} pc={e.get('pc')}"
        raise AssertionError((code, doc["warnings"], err, f"stop NMI sent: {nmi}", f"emulator: {last}"))
    [s] = doc["snapshots"]
    assert s["complete"] and len(s["records"]) == 16, (s["cpu"], s["vector"], len(s["records"]))
    assert_decoded_equals_freeze(res.emu_events(boot=1), s, newest=16)
    assert f"lbr_dump: v2 cpu={s['cpu']} kept: seq={s['seq']} records #16-#31 are not printed" in text, text[-1500:]
    return text, doc


def test_default_sizes_keep_an_oopses_text_beside_its_records(r):
    """oops=panic, a crash on 1 CPU: the oops' record holds the Oops line, RIP and the call
    trace with the snapshot's 16 newest records."""
    default_sizes("default-oops", ARM_DEFAULT + f"insmod {CRASH} crash=jump\nsleep 600\n", 1,
                  "oops=panic", "Oops", "Oops: ", True)


def sysrq_default(n):
    text, doc = default_sizes(f"default-sysrq{n}", ARM_DEFAULT + "echo c > /proc/sysrq-trigger\nsleep 600\n", n, "",
                              "Panic", "Kernel panic - not syncing: sysrq triggered crash", False)
    assert doc["snapshots"][0]["vector"] == 256, doc["snapshots"][0]["vector"]
    cpu = doc["snapshots"][0]["cpu"]
    stopped = sorted(int(m) for m in re.findall(r"lbr_dump: v2 cpu=(\d+) kept: seq=\d+ vector=(?:2|248) ", text))
    assert stopped == [c for c in range(n) if c != cpu], (stopped, cpu)
    total = ("the snapshot of the 1 other CPU above is not printed" if n == 2 else
             f"the snapshots of the {n - 1} other CPUs above are not printed")
    assert f"lbr_dump: v2 cpu={cpu} kept: {total}" in text, text[-800:]


def test_default_sizes_keep_a_panics_text_with_2_cpus(r):
    """sysrq-c on 2 CPUs: the panic line and its call trace, the panicking CPU's 16 newest
    records, and the other CPU's one `kept:` line (what stopped it, where it was)."""
    sysrq_default(2)


def test_default_sizes_keep_a_panics_text_with_4_cpus(r):
    """The same on 4 CPUs: three `kept:` lines."""
    sysrq_default(4)


def test_default_sizes_keep_a_warnings_snapshot_with_panic_on_warn(r):
    """panic_on_warn=1 and lkdtm WARNING (syzbot's setting): the panic's record holds the end
    of the warning's report, with its #UD's 16 newest records printed there (after the report's
    registers and call trace, before Kernel panic), the panic's line, RIP and call trace, and the
    panic's own snapshot only named. (The report's beginning, its WARNING line, is older than
    what a 4096-byte record keeps: the panic prints the registers and a call trace again.)"""
    text, doc = default_sizes("default-panic-on-warn", ARM_DEFAULT + "echo 1 > /proc/sys/kernel/panic_on_warn\n"
                              f"echo WARNING > {LKDTM}\nsleep 600\n", 1, "", "Panic",
                              "Kernel panic - not syncing: kernel: panic_on_warn set", True,
                              allowed="no snapshot for that oops: this panic is panic_on_warn's")
    s = doc["snapshots"][0]
    assert s["vector"] == 6, f"the record's snapshot is vector {s['vector']}, not the warning's #UD"
    head = text.index(f"lbr_dump: v2 cpu={s['cpu']} seq={s['seq']} vector=6 ")
    assert head < text.index("Kernel panic - not syncing"), text[:3000]
    assert "this panic is panic_on_warn's" in text, text[-1500:]
