# SPDX-License-Identifier: GPL-2.0
"""Warnings: the snapshot of a WARN's #UD, printed inside the warning's own report.

A WARN_ON() is a ud2 (x86): the #UD stub captures it, and the kernel reports it from the #UD
handler (report_bug(), __warn()) and goes on. lbr-dump prints that snapshot between the report's
`WARNING:` line and its `---[ end trace` (Documentation/lbr-dump/design.rst "What a warning
shows"), where syzbot's report and pstore keep it: for WARN_ON(), WARN() with a message (a ud1 of
its own), WARN_ON_ONCE() (nothing for a hit the kernel does not report), in process context, in
hard interrupt context and with interrupts off, and with panic_on_warn before the panic. Each
printed snapshot equals the emulator's record stack at the freeze of that #UD, and its newest
record is the #UD itself, from the warning's ud2 (or ud1) into the stub. A storm of warnings,
then an oops with more warnings between its exception and its printing: each warning the kernel
reports carries one bounded snapshot, and the oops's snapshot is still printed whole (the ring
and, with the branch trace store, the pool of buffers keep it).
"""

import json
import re

from harness import (ARM, CRASH, LKDTM, MODULE_KO, SYSFS, boot, decode, kernel_lines, snapshot_heads, symbols,
                     tail)
from records import Freezes, emulated, freeze_records, heads, printed_records, snapshot_in

# The test kernel's emulated recorder: Intel legacy LBR, format 5 (32 records with LBR_INFO).
EMU = "model=skylake"
CPU = "Skylake-Client"
REPORT_START = re.compile(r"^(?:\[\s*\d+\.\d+\]\s)?WARNING: .*$", re.M)
END_TRACE = "---[ end trace"


def reports(con):
    """The warning reports of a console: for each `WARNING:` line, the text from it to the next
    `---[ end trace` (the kernel's own end marker, print_oops_end_marker())."""
    out = []
    for m in REPORT_START.finditer(con):
        end = con.find(END_TRACE, m.end())
        assert end >= 0, "a warning report has no end marker:\n" + con[m.start():m.start() + 3000]
        out.append(con[m.start():end])
    return out


def assert_is_the_ud(head, printed, site):
    """The snapshot is a complete #UD capture whose newest record is the #UD itself: from the
    faulting instruction (the header's rip, in function `site`: a name or a tuple of names) into
    lbr-dump's #UD stub."""
    assert " vector=6 (#UD) " in head and "state=complete" in head, head
    rip = int(re.search(r" rip=0x([0-9a-f]+) ", head)[1], 16)
    assert printed, "no record lines: " + head
    assert printed[0]["from"] == rip and re.match(r"lbr_dump_stub_6\+0x0/", printed[0]["to_sym"]), (rip, printed[0])
    sites = (site,) if isinstance(site, str) else site
    assert any(printed[0]["from_sym"].startswith(s + "+") for s in sites), \
        f"the #UD is at {printed[0]['from_sym']}, not in {sites}"


def warn_run(name, script, timeout=240, **kw):
    return boot(finish=False, name=f"warn-{name}", cpu=CPU, accel="tcg", emulate=EMU, timeout=timeout,
                script=script, **kw)


def test_warning_and_warning_message_print_their_snapshot_in_the_report(r):
    # lkdtm WARNING (WARN_ON(): a ud2 in lkdtm_WARNING) and WARNING_MESSAGE (WARN() with a
    # message: a ud1 of the WARN_trap static call, inline at the call site in built-in code),
    # in process context: each report holds its #UD's snapshot, equal to the ground truth,
    # between the WARNING line and the end marker; nothing of lbr-dump's outside them.
    res = warn_run("lkdtm", ARM + f"echo WARNING > {LKDTM}\necho WARNING_MESSAGE > {LKDTM}\n"
                   f"echo captures=$(cat {SYSFS}/captures)\n")
    con = res.console
    assert "lbr_dump: armed" in con, tail(con)
    reps = reports(con)
    assert len(reps) == 2, f"{len(reps)} warning reports:\n" + tail(con)
    freezes = Freezes(res.emu_events())
    for rep, site in zip(reps, ("lkdtm_WARNING", ("lkdtm_WARNING_MESSAGE", "__WARN_trap"))):
        head, block, printed = snapshot_in(rep)
        assert_is_the_ud(head, printed, site)
        freezes.match(head, printed)
    # Every snapshot printed is a warning's.
    assert len(heads(con)) == 2, heads(con)
    assert re.search(r"captures=2\b", con), re.findall(r"captures=\d+", con)


def test_warn_on_once_prints_its_first_hit_only(r):
    # A WARN_ON_ONCE() hit twice: the kernel reports the first hit; lbr-dump prints that hit's
    # snapshot in the report and nothing for the second, which it captured all the same
    # (captures reads 2). A memory dump after both: the second hit's snapshot, never printed,
    # is in the area as captured, and no snapshot there reads as damaged (a capture into a
    # slot that held a printed, sealed snapshot).
    res = warn_run("once", ARM + f"insmod {CRASH} crash=warn_once\necho captures=$(cat {SYSFS}/captures)\n"
                   "echo warn-once-done\nsleep 600\n", dump_after="warn-once-done")
    con = res.console
    reps = reports(con)
    assert len(reps) == 1, f"{len(reps)} warning reports:\n" + tail(con)
    head, block, printed = snapshot_in(reps[0])
    assert_is_the_ud(head, printed, "lbr_crash_warn_once")
    freezes = Freezes(res.emu_events())
    first = freezes.match(head, printed)
    assert len(heads(con)) == 1, heads(con)
    assert re.search(r"captures=2\b", con), re.findall(r"captures=\d+", con)
    # The dump: both hits' snapshots on that CPU, the second (seq + 1) as the emulator froze it.
    code, out, err = decode(*symbols(), res.dump)
    assert code == 0, err
    damaged = [w for w in json.loads(out)["warnings"] if "checksum mismatch" in w]
    assert not damaged, damaged
    cpu, seq = (int(x) for x in re.search(r" cpu=(\d+) seq=(\d+) ", head).groups())
    snaps = {s["seq"]: s for s in json.loads(out)["snapshots"] if s["cpu"] == cpu}
    assert seq + 1 in snaps, f"the second hit's snapshot (seq {seq + 1}) is not in the dump: {sorted(snaps)}"
    second = snaps[seq + 1]
    got = [(int(x["from"]["addr"], 16), int(x["to"]["addr"], 16)) for x in second["records"]]
    later = [e for e in res.emu_events()[res.emu_events().index(first) + 1:]
             if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == cpu]
    assert later, "no freeze after the first hit's"
    want = [(t["from"], t["to"]) for t in freeze_records(later[0], freezes.flavour, freezes.fmt)]
    assert got == want, f"the second hit's snapshot in the dump is not its freeze: {got[:3]} / {want[:3]}"


def test_warnings_in_interrupt_context_and_with_interrupts_off(r):
    # A WARN_ON() in an hrtimer's expiry (hard interrupt context) and one with interrupts off in
    # process context: each report holds its #UD's snapshot, equal to the ground truth.
    res = warn_run("irq", ARM + f"insmod {CRASH} crash=warn_irq && rmmod lbr_crash\n"
                   f"insmod {CRASH} crash=warn_irqs_off && rmmod lbr_crash\n")
    con = res.console
    assert "warn_irq: hardirq=1" in con and "warn_irqs_off: irqs_off=1" in con, tail(con)
    reps = reports(con)
    assert len(reps) == 2, f"{len(reps)} warning reports:\n" + tail(con)
    freezes = Freezes(res.emu_events())
    for rep in reps:
        head, block, printed = snapshot_in(rep)
        assert_is_the_ud(head, printed, "lbr_crash_warn")
        freezes.match(head, printed)
    # The interrupt's: its records reach back into the timer's expiry.
    _, _, printed = snapshot_in(reps[0])
    assert any(p["to_sym"].startswith("lbr_crash_warn_timer+") or p["from_sym"].startswith("lbr_crash_warn_timer+")
               for p in printed), [p["from_sym"] for p in printed[:8]]


def test_panic_on_warn_prints_the_warning_snapshot_before_the_panic(r):
    # panic_on_warn=1 (syzbot's setting): __warn() panics before its end marker. The #UD's
    # snapshot is printed in the report, before `Kernel panic`, equal to the ground truth; the
    # panic's own snapshot (its records are the printing of the warning) is named in one line
    # instead of being printed.
    res = warn_run("panic", ARM + f"echo 1 > /proc/sys/kernel/panic_on_warn\necho WARNING > {LKDTM}\n")
    con = res.console
    start = REPORT_START.search(con)
    assert start, "no warning report:\n" + tail(con)
    panic = con.find("Kernel panic - not syncing", start.end())
    assert panic > 0, "no panic after the warning:\n" + tail(con)
    rep = con[start.start():panic]
    head, block, printed = snapshot_in(rep)
    assert_is_the_ud(head, printed, "lkdtm_WARNING")
    Freezes(res.emu_events()).match(head, printed)
    after = con[panic:]
    assert not [h for h in heads(after) if " vector=256 " in h], \
        "the panic's own snapshot was printed:\n" + "\n".join(heads(after))
    lines = [l for l in kernel_lines(after, "lbr_dump: v2 ") if " none: " in l]
    assert any("panic_on_warn" in l and "warning" in l for l in lines), \
        "no line names the panic as the warning's:\n" + "\n".join(kernel_lines(after, "lbr_dump"))


def storm(name, arm, rounds=6, bts_print=0, **kw):
    """lbr_crash crash=warn_storm rounds=`rounds`: 2 x `rounds` warnings (a WARN_ON() and a
    WARN_ON_ONCE() each round), then a #GP, and as many warnings again on the oopsing CPU
    between the #GP and lbr-dump's printing of it (a die notifier above lbr-dump's). The
    default, bounded output (print_records=16; with BTS, `bts_print` BTS records too). Checks
    each report's snapshot and the oops's; returns the run and the oops's header."""
    res = warn_run(name, arm + f"insmod {CRASH} crash=warn_storm rounds={rounds} || true\n"
                   f"echo captures=$(cat {SYSFS}/captures)\n", timeout=400, **kw)
    con = res.console
    assert f"warn_storm: {rounds} rounds, oops next" in con, tail(con)
    reps = reports(con)
    # Reported: every WARN_ON() (2 x rounds) and the WARN_ON_ONCE()'s first hit.
    assert len(reps) == 2 * rounds + 1, f"{len(reps)} warning reports, not {2 * rounds + 1}:\n" + tail(con)
    freezes = Freezes(res.emu_events())
    for rep in reps:
        head, block, printed = snapshot_in(rep)
        assert_is_the_ud(head, printed, ("lbr_crash_warn", "lbr_crash_warn_once"))
        # Bounded: 16 records, the rest named in one line (and the BTS head and records); no
        # more lines of lbr-dump's than that per report.
        assert len(printed) == 16 and "records=16 " in head, head
        lines = kernel_lines(rep, "lbr_dump: ")
        bound = 16 + 4 + (1 + bts_print if bts_print else 0)
        assert len(lines) <= bound, f"{len(lines)} lines of lbr-dump's in one warning's report, more than {bound}"
        assert re.search(r"lbr_dump: v2 cpu=\d+ kept: seq=\d+ records #16-#31 ", rep), rep[:3000]
        freezes.match(head, printed, bounded=True)
    # The oops: its #GP snapshot, whole (not rewritten: no capture took its slot while it was
    # printed), its newest 16 records equal to its freeze.
    oops = [h for h in heads(con) if " vector=13 " in h]
    assert oops, "the oops's #GP snapshot was not printed:\n" + "\n".join(kernel_lines(con, "lbr_dump: v2"))
    head = oops[0]
    assert "state=complete" in head and "nest=0" in head, head
    block = con[con.index(head):]
    end = re.search(r"lbr_dump: end cpu=\d+ seq=\d+(.*)", block)
    assert end and "rewritten" not in end[1], end and end[0]
    printed = printed_records(block[:end.start()])
    assert len(printed) == 16 and re.match(r"lbr_dump_stub_13\+0x0/", printed[0]["to_sym"]), printed[:1]
    freezes.match(head, printed, bounded=True)
    # Every snapshot printed: one per report, and the oops's.
    assert len(heads(con)) == len(reps) + 1, "\n".join(heads(con))
    return res, head


def test_warning_storm_keeps_the_oops_snapshot(r):
    # 12 warnings before the oops and 12 (6 reported) between its #GP and its printing, on one
    # CPU whose ring holds 4 snapshots: the oops's snapshot is still there when it is printed.
    storm("storm", f"insmod {MODULE_KO} enable=1\n")


def test_warning_storm_keeps_the_oops_bts_buffer(r):
    # The same with the branch trace store (a pool of 4 buffers per CPU): the buffer the #GP's
    # capture kept is still its own when the oops prints it (not reused by the warnings').
    res, head = storm("storm-bts", f"insmod {MODULE_KO} bts=4 enable=1\n", bts_print=32)
    cpu, seq = re.search(r" cpu=(\d+) seq=(\d+) ", head).groups()
    bts = [l for l in kernel_lines(res.console, f"lbr_dump: bts cpu={cpu} seq={seq} ")]
    assert bts and " state=kept" in bts[0], bts or kernel_lines(res.console, "lbr_dump: bts cpu")


def test_warning_hooks_are_there_only_while_armed(r):
    # Armed, show_regs(), report_bug() and report_bug_entry() carry lbr-dump's kretprobes
    # (debugfs' kprobes/list, `r`); disarmed, none of them, and a warning prints nothing of
    # lbr-dump's; armed again, all of them (registered a second time), and a warning's report
    # holds its snapshot, equal to the ground truth.
    show = "echo ==$1==; grep -E 'show_regs|report_bug' /sys/kernel/debug/kprobes/list || true; echo =="
    res = warn_run("hooks", f"show() {{ {show}; }}\n" + ARM + "show armed\n"
                   f"echo 0 > {SYSFS}/enabled\nshow disarmed\necho WARNING > {LKDTM}\necho ==warned==\n"
                   f"echo 1 > {SYSFS}/enabled\nshow rearmed\necho WARNING > {LKDTM}\n")
    con = res.console
    part = lambda tag: con.split(f"=={tag}==")[1].split("==")[0]  # noqa: E731
    for tag in ("armed", "rearmed"):
        p = part(tag)
        for fn in ("show_regs", "report_bug", "report_bug_entry"):
            assert re.search(rf" r +{fn}\+", p), f"no kretprobe at {fn}() while {tag}:\n{p}"
    p = part("disarmed")
    assert "show_regs" not in p and "report_bug" not in p, p
    reps = reports(con)
    assert len(reps) == 2, f"{len(reps)} warning reports:\n" + tail(con)
    assert con.index("==warned==") > con.index(reps[0]), "the first warning came after the marker"
    assert not kernel_lines(reps[0], "lbr_dump: "), "lbr-dump printed in a warning while disarmed:\n" + reps[0]
    head, block, printed = snapshot_in(reps[1])
    assert_is_the_ud(head, printed, "lkdtm_WARNING")
    Freezes(res.emu_events()).match(head, printed)
