# SPDX-License-Identifier: GPL-2.0
"""Reports that are calls: the snapshot of a report function's entry, printed inside the report.

UBSAN, KFENCE's reports from kfree(), KASAN, the hardened list checks and refcount_t's saturation
do not oops: the check calls a report function, which prints a report and returns. lbr-dump
freezes the recorder at that function's entry with one record of its own (the int3 of a kprobe
into its #BP stub, or, for a glob of names, the call of its report trampoline, an ftrace direct
call: the `reports` parameter), and the snapshot is printed inside the report
(Documentation/lbr-dump/admin-guide.rst "Reports"). Each printed snapshot equals the emulator's
record stack at that freeze and leaves the report's title and lines as report parsers read them;
its newest record leaves the report function's entry, and the one before it is the call of the
report function at the check that fired.
"""

import json
import re

from harness import (ARM, CRASH, LKDTM, MODULE, MODULE_KO, OOPS_KEYWORDS, SYZ_SYMBOLIZE, SYSFS, boot, decode,
                     kernel_lines, symbols, tail)
from records import Freezes, emulated, freeze_records, heads, snapshot_in

# The test kernel's emulated recorder: Intel legacy LBR, format 5 (32 records with LBR_INFO).
EMU = "model=skylake"
CPU = "Skylake-Client"

UBSAN_START = re.compile(r"^(?:\[\s*\d+\.\d+\]\s)?UBSAN: .*$", re.M)
KFENCE_START = re.compile(r"^(?:\[\s*\d+\.\d+\]\s)?BUG: KFENCE: .*$", re.M)
END_TRACE = "---[ end trace"
KFENCE_END = "=" * 60


def assert_parsers_read_the_kernels_report(rep, title):
    """The report still reads as the kernel's to report parsers: its first line is the kernel's
    title line (syzkaller and KernelCI take the report's title from it), and no line of
    lbr-dump's inside it holds an oops keyword (a report start to a parser) or a symbol that
    syzkaller's symbolizer would rewrite."""
    first = rep.splitlines()[0]
    assert re.search(title, first), (title, first)
    ours = kernel_lines(rep, "lbr_dump: ")
    assert ours, "no line of lbr-dump's in the report"
    bad = [(k, ln) for ln in ours for k in OOPS_KEYWORDS if k in ln]
    assert not bad, bad[:3]
    hit = [ln for ln in ours if SYZ_SYMBOLIZE.search(ln)]
    assert not hit, hit[:3]


def report_run(name, script, timeout=240, **kw):
    return boot(finish=False, name=f"reports-{name}", cpu=CPU, accel="tcg", emulate=EMU, timeout=timeout,
                script=script, **kw)


def blocks(con, start, end):
    """Each report of a console: from its first line to its end line."""
    out = []
    for m in start.finditer(con):
        e = con.find(end, m.end())
        assert e >= 0, "a report has no end line:\n" + con[m.start():m.start() + 3000]
        out.append(con[m.start():e])
    return out


# Where the report hook is, past the function's first address: ENDBR (4 bytes) for an int3 in a
# function ftrace cannot trace and for the direct call (its call is the ftrace site); ENDBR and
# the ftrace site's 5-byte nop for an int3 in a function ftrace can trace.
PAST_ENDBR, PAST_FENTRY = 0x4, 0x9


def assert_is_the_entry(head, printed, function, caller, via, at=PAST_ENDBR):
    """The snapshot is a complete report capture whose newest record goes from `function`'s
    entry (`at` bytes into it: the header's error) into lbr-dump's `via` (the #BP stub for an
    int3, the report trampoline for a direct call), and whose next is the call of `function` in
    `caller`."""
    assert " vector=257 (report) " in head and "state=complete" in head, head
    error = int(re.search(r" error=0x([0-9a-f]+) ", head)[1], 16)
    assert len(printed) > 1, "fewer than two record lines: " + head
    first, second = printed[0], printed[1]
    assert first["from"] == error and re.match(rf"{function}\+{at:#x}/", first["from_sym"]), (hex(error), first)
    assert re.match(rf"{via}\+0x0/", first["to_sym"]), first
    assert re.match(rf"{function}\+0x0/", second["to_sym"]), second
    assert re.match(rf"{caller}\+0x[0-9a-f]+/", second["from_sym"]), second


def test_ubsan_report_prints_the_snapshot_of_its_handler_entry(r):
    # lkdtm ARRAY_BOUNDS: an out-of-bounds index that UBSAN_BOUNDS checks, reported by
    # __ubsan_handle_out_of_bounds(). 7.3 builds lib/ without ftrace's entry, so the handler
    # gets an int3 (a kprobe that stays one) that lbr-dump's #BP stub captures. The report
    # holds one snapshot, inside it before its stack, equal to the ground truth: the int3, from
    # the handler's entry into the #BP stub, then the handler's call in lkdtm_ARRAY_BOUNDS. The
    # report's own lines are as the kernel prints them: its stack begins dump_stack_lvl,
    # ubsan_epilogue, __ubsan_handle_out_of_bounds, lkdtm_ARRAY_BOUNDS (the print point, a
    # kprobe at dump_stack(), adds no frame; a kretprobe there showed its trampoline in
    # ubsan_epilogue's place). A second hit at the same place, which UBSAN does not report,
    # prints nothing.
    res = report_run("ubsan", ARM + f"echo ARRAY_BOUNDS > {LKDTM}\necho ARRAY_BOUNDS > {LKDTM}\n"
                     f"echo captures=$(cat {SYSFS}/captures)\n")
    con = res.console
    assert "lbr_dump: armed" in con, tail(con)
    assert re.search(r"lbr_dump: reports: hooked by int3 \(vector 3 hooked for them\): .*"
                     r"__ubsan_handle_out_of_bounds", con), tail(con)
    reps = blocks(con, UBSAN_START, END_TRACE)
    assert len(reps) == 1, f"{len(reps)} UBSAN reports:\n" + tail(con)
    rep = reps[0]
    assert_parsers_read_the_kernels_report(rep, r"UBSAN: array-index-out-of-bounds in .*lkdtm/bugs\.c")
    head, block, printed = snapshot_in(rep)
    assert_is_the_entry(head, printed, "__ubsan_handle_out_of_bounds", "lkdtm_ARRAY_BOUNDS", "lbr_dump_stub_3")
    Freezes(res.emu_events()).match(head, printed)
    assert rep.index(head) < rep.index("Call Trace:"), rep
    frames = re.findall(r"^(?:\[\s*\d+\.\d+\]\s)?\s+(\S+)\+0x", rep[rep.index("<TASK>"):], re.M)
    assert frames[:4] == ["dump_stack_lvl", "ubsan_epilogue", "__ubsan_handle_out_of_bounds",
                          "lkdtm_ARRAY_BOUNDS"], frames
    assert len(heads(con)) == 1, heads(con)
    assert re.search(r"captures=2\b", con), re.findall(r"captures=\d+", con)


def test_list_corruption_warning_prints_the_check_entry_snapshot(r):
    # lkdtm CORRUPT_LIST_ADD with CONFIG_LIST_HARDENED: __list_add_valid_or_report() (notrace
    # under clang: an int3) finds the corruption and WARNs from inside. The warning's #UD
    # snapshot would be the report's own printing (mem_dump_obj()); the WARNING report prints
    # the check's entry snapshot instead, equal to the ground truth, whose records end with the
    # call of the check in lkdtm_CORRUPT_LIST_ADD. The #UD's capture, taken while the report's
    # was still provisional, did not take its slot.
    res = report_run("list", ARM + f"echo CORRUPT_LIST_ADD > {LKDTM}\necho captures=$(cat {SYSFS}/captures)\n")
    con = res.console
    start = re.search(r"^(?:\[\s*\d+\.\d+\]\s)?WARNING: .*__list_add_valid_or_report.*$", con, re.M)
    assert start, "no list corruption warning:\n" + tail(con)
    rep = con[start.start():con.index(END_TRACE, start.end())]
    assert_parsers_read_the_kernels_report(rep, r"WARNING: lib/list_debug\.c:\d+ at __list_add_valid_or_report")
    head, block, printed = snapshot_in(rep)
    assert_is_the_entry(head, printed, "__list_add_valid_or_report", "lkdtm_CORRUPT_LIST_ADD", "lbr_dump_stub_3")
    Freezes(res.emu_events()).match(head, printed)
    assert len(heads(con)) == 1, heads(con)
    assert re.search(r"captures=2\b", con), re.findall(r"captures=\d+", con)


def test_refcount_saturation_warning_prints_the_entry_snapshot(r):
    # lkdtm REFCOUNT_INC_OVERFLOW: refcount_inc() past REFCOUNT_MAX calls
    # refcount_warn_saturate() (in `default`), which saturates the count and WARNs once. The
    # WARNING report prints the function's entry snapshot in place of the #UD's (whose records
    # would be the switch inside it), equal to the ground truth, ending with its call in
    # lkdtm_REFCOUNT_INC_OVERFLOW (refcount_inc() is inline). The next increment calls it again:
    # its WARN_ONCE() prints nothing, and neither does lbr-dump.
    res = report_run("refcount", ARM + f"echo REFCOUNT_INC_OVERFLOW > {LKDTM}\n"
                     f"echo captures=$(cat {SYSFS}/captures)\n")
    con = res.console
    assert re.search(r"lbr_dump: reports: hooked by int3 \(vector 3 hooked for them\): .*refcount_warn_saturate",
                     con), tail(con)
    start = re.search(r"^(?:\[\s*\d+\.\d+\]\s)?WARNING: .*refcount_warn_saturate.*$", con, re.M)
    assert start, "no refcount warning:\n" + tail(con)
    assert len(re.findall(r"WARNING: .*refcount_warn_saturate", con)) == 1, tail(con)
    rep = con[start.start():con.index(END_TRACE, start.end())]
    assert_parsers_read_the_kernels_report(rep, r"WARNING: lib/refcount\.c:\d+ at refcount_warn_saturate")
    head, block, printed = snapshot_in(rep)
    assert_is_the_entry(head, printed, "refcount_warn_saturate", "lkdtm_REFCOUNT_INC_OVERFLOW", "lbr_dump_stub_3")
    Freezes(res.emu_events()).match(head, printed)
    assert len(heads(con)) == 1, heads(con)


def test_kfence_fault_report_prints_the_snapshot_of_its_fault(r):
    # lkdtm KFENCE_READ_AFTER_FREE with KFENCE sampling switched on at run time: the read of a
    # freed KFENCE object faults, and KFENCE reports it from the #PF handler. The report holds
    # one snapshot, before its closing line: the #PF's (the stub's capture at the fault), whose
    # CR2 is the address KFENCE reports, equal to the ground truth, whose newest record is the
    # fault itself, from lkdtm_KFENCE_READ_AFTER_FREE into the #PF stub. kfence_report_error()
    # is hooked too (an int3 captures its entry), but the fault's snapshot is the one printed.
    res = report_run("kfence", "echo 1 > /sys/module/kfence/parameters/sample_interval\n" + ARM +
                     f"echo KFENCE_READ_AFTER_FREE > {LKDTM}\necho kfence-done\n", timeout=300)
    con = res.console
    assert "kfence-done" in con, tail(con)
    assert re.search(r"lbr_dump: reports: hooked by int3 \(vector 3 hooked for them\): .*kfence_report_error",
                     con), tail(con)
    reps = blocks(con, KFENCE_START, KFENCE_END)
    assert len(reps) == 1, f"{len(reps)} KFENCE reports:\n" + tail(con)
    rep = reps[0]
    assert_parsers_read_the_kernels_report(rep, r"BUG: KFENCE: use-after-free read in lkdtm_KFENCE_READ_AFTER_FREE")
    head, block, printed = snapshot_in(rep)
    # (The report hashes the address it names; the printer chose the #PF snapshot whose CR2 is
    # the address the tracepoint passed, over the trampoline's newer capture.)
    assert " vector=14 (#PF) " in head and "state=complete" in head, head
    assert re.match(r"lkdtm_KFENCE_READ_AFTER_FREE\+", printed[0]["from_sym"]), printed[0]
    assert re.match(r"lbr_dump_stub_14\+0x0/", printed[0]["to_sym"]), printed[0]
    Freezes(res.emu_events()).match(head, printed)
    assert len(heads(con)) == 1, heads(con)


def test_kfence_corruption_at_free_prints_the_entry_snapshot_int3_and_direct_call(r):
    # KFENCE finds an object's canary written when the object is freed (lbr_crash
    # crash=kfence_corrupt), and reports it from kfree() by calling kfence_report_error(), which
    # ftrace traces. Twice in one machine: with `default`, an int3 past its ftrace site that the
    # #BP stub captures; then, reloaded with a glob of it, lbr-dump's report trampoline as an
    # ftrace direct call at its entry. Each report holds one snapshot before its closing line,
    # equal to the ground truth: the int3's delivery or the trampoline's call, from
    # kfence_report_error()'s entry, then the call of kfence_report_error() in KFENCE's free
    # path (the report names lbr_crash_kfence_corrupt(): the free is a tail call).
    corrupt = (f"insmod {CRASH} crash=kfence_corrupt\nrmmod lbr_crash\n")
    res = report_run("kfence-free", "echo 1 > /sys/module/kfence/parameters/sample_interval\n" + ARM + corrupt +
                     f"rmmod lbr_dump\ninsmod {MODULE} enable=1 'reports=kfence_report_e*'\n" + corrupt +
                     "echo kfence-done\n", timeout=400)
    con = res.console
    assert con.count("kfence_corrupt: object=yes") == 2 and "kfence-done" in con, tail(con)
    assert re.search(r"lbr_dump: reports: hooked by int3 \(vector 3 hooked for them\): .*kfence_report_error",
                     con), tail(con)
    assert "lbr_dump: reports: hooked by direct call: kfence_report_e*" in con, tail(con)
    reps = blocks(con, KFENCE_START, KFENCE_END)
    assert len(reps) == 2, f"{len(reps)} KFENCE reports:\n" + tail(con)
    freezes = Freezes(res.emu_events())
    title = r"BUG: KFENCE: memory corruption in lbr_crash_kfence_(corrupt|free)\+"
    for rep, via, at in zip(reps, ("lbr_dump_stub_3", "lbr_dump_report_hook"), (PAST_FENTRY, PAST_ENDBR)):
        assert_parsers_read_the_kernels_report(rep, title)
        head, block, printed = snapshot_in(rep)
        assert_is_the_entry(head, printed, "kfence_report_error", r"[a-z_]*(kfence|canary)[a-z_.]*", via, at)
        freezes.match(head, printed)
    assert len(heads(con)) == 2, heads(con)


def test_a_storm_of_reports_never_printed_keeps_one_slot_per_cpu(r):
    # reports= names a function of the user's choice (lkdtm_do_action, which every lkdtm write
    # calls, and no report prints): 150 calls, more than a CPU's ring of 64 holds, each a
    # capture of its entry. None is printed, so none becomes permanent: each takes its CPU's
    # next slot again, and a memory dump after the storm holds at most one report snapshot per
    # CPU, the newest of them all among them, equal to the emulator's last freeze on its CPU.
    res = report_run("storm", f"insmod {MODULE_KO} enable=1 reports=lkdtm_do_action\n"
                     f"for i in $(seq 150); do echo REPORT_STACK > {LKDTM}; done 2>/dev/null\n"
                     f"echo captures=$(cat {SYSFS}/captures)\necho cpus=$(nproc)\necho storm-done\nsleep 600\n",
                     dump_after="storm-done", timeout=400)
    con = res.console
    assert "lbr_dump: reports: hooked by int3 (vector 3 hooked for them): lkdtm_do_action" in con, tail(con)
    assert re.search(r"captures=150\b", con), re.findall(r"captures=\d+", con)
    cpus = int(re.search(r"^cpus=(\d+)\s*$", con, re.M)[1])
    code, out, err = decode(*symbols(), res.dump)
    assert code == 0, err
    snaps = [s for s in json.loads(out)["snapshots"] if s["kind"] == "report"]
    assert 1 <= len(snaps) <= cpus, [(s["cpu"], s["seq"]) for s in snaps]
    newest = max(snaps, key=lambda s: s["seq"])
    assert newest["seq"] == 150, [(s["cpu"], s["seq"]) for s in snaps]
    assert newest["records"][1]["to"]["symbol"].startswith("lkdtm_do_action+0x0"), newest["records"][:2]
    events = res.emu_events()
    last = [e for e in events if e["event"] == "freeze" and e["cause"] == "wrmsr" and e["cpu"] == newest["cpu"]][-1]
    flavour, fmt = emulated(events)
    want = [(t["from"], t["to"]) for t in freeze_records(last, flavour, fmt)]
    got = [(int(x["from"]["addr"], 16), int(x["to"]["addr"], 16)) for x in newest["records"]]
    assert got == want, f"the newest report snapshot is not the last freeze: {got[:3]} / {want[:3]}"


def test_reports_parameter_refusals_and_disarm(r):
    # A bad list is refused by the parameter (insmod fails, nothing loaded); a name the user
    # gave that cannot be hooked refuses arming with the reason. Armed with `default`, no
    # direct call is attached (enabled_functions has no report function): kfence_report_error(), which ftrace
    # traces, is a kprobe past its ftrace site, ENDBR's 4 bytes and fentry's 5, and
    # __ubsan_handle_out_of_bounds(), which it does not, one past ENDBR; each stays an int3
    # (kprobes/list: `k`, not OPTIMIZED, not FTRACE), as UBSAN's print point at dump_stack()
    # does. Disarmed, nothing.
    script = (f"insmod {MODULE_KO} 'reports=default,*' || echo glob=$?\n"
              f"insmod {MODULE_KO} reports=none,kasan_report || echo none=$?\n"
              f"insmod {MODULE_KO} enable=1 reports=no_such_report_function || echo unknown=$?\n"
              f"insmod {MODULE_KO} enable=1 'reports=no_such_report_fu*' || echo noglob=$?\n"
              f"echo loaded=$(grep -c ^lbr_dump /proc/modules)\n"
              "mount -t tracefs none /sys/kernel/tracing 2>/dev/null || true\n"
              f"insmod {MODULE_KO} enable=1\n"
              "echo armed: $(grep -c kfence_report /sys/kernel/tracing/enabled_functions)\n"
              "echo ==probes==\n"
              "grep -E 'dump_stack|ubsan_handle|kfence_report_error' /sys/kernel/debug/kprobes/list\n"
              "echo ==\n"
              f"echo 0 > {SYSFS}/enabled\n"
              "echo disarmed: $(grep -c . /sys/kernel/tracing/enabled_functions)"
              " $(grep -cE 'dump_stack|ubsan_handle|kfence_report' /sys/kernel/debug/kprobes/list)\n")
    res = report_run("param", script)
    con = res.console
    lines = kernel_lines(con, "lbr_dump")
    assert re.search(r"glob=[1-9]", con) and any(
        "reports=default,*: *: a wildcard needs at least 4 characters before it" in ln for ln in lines), "\n".join(lines)
    assert re.search(r"none=[1-9]", con) and any("'none' with other names" in ln for ln in lines), "\n".join(lines)
    assert any("refusing to arm: reports: no_such_report_function (not in this kernel)" in ln
               for ln in lines), "\n".join(lines)
    assert any("refusing to arm: reports: no_such_report_fu* (a glob matching nothing ftrace can trace)" in ln
               for ln in lines), "\n".join(lines)
    assert re.search(r"unknown=[1-9]", con) and re.search(r"noglob=[1-9]", con), tail(con)
    assert re.search(r"^loaded=0\s*$", con, re.M), tail(con)
    assert re.search(r"^armed: 0\s*$", con, re.M), tail(con)
    # UBSAN handlers of sanitizers the test kernel lacks (scripts/kconfig/test-kernel.config has
    # bounds, bool and enum) are left out, with the option that would call them.
    left = next(ln for ln in lines if "lbr_dump: reports: not hooked:" in ln)
    for name, option in (("shift_out_of_bounds", "CONFIG_UBSAN_SHIFT"), ("add_overflow", "CONFIG_UBSAN_INTEGER_WRAP"),
                         ("type_mismatch_v1", "CONFIG_UBSAN_ALIGNMENT")):
        assert f"__ubsan_handle_{name} (no {option})" in left, left
    probes = con.split("==probes==")[1].split("==")[0]
    assert re.search(r" k +dump_stack\+0x", probes) and "OPTIMIZED" not in probes, probes
    assert re.search(r" k +__ubsan_handle_out_of_bounds\+0x4 ", probes), probes
    assert re.search(rf" k +kfence_report_error\+{PAST_FENTRY:#x} ", probes), probes
    # The kprobe registered disabled at the ftrace site, which only found it.
    assert re.search(r" k +kfence_report_error\+0x4 .*\[DISABLED\]", probes), probes
    assert "FTRACE]" not in probes.replace("[DISABLED][FTRACE]", ""), probes
    assert not re.search(r"ubsan_handle_(shift|add|type)", probes), probes
    assert re.search(r"^disarmed: 0 0\s*$", con, re.M), tail(con)
