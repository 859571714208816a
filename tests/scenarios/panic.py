# SPDX-License-Identifier: GPL-2.0
"""Crashes without an exception (panic(), sysrq-c) and every CPU at the crash, under the emulator.

lbr-dump's panic trampoline freezes the recorder at the entry of panic()/vpanic() (an ftrace
direct call, asm/stubs.S), and the panic switches the NMI and REBOOT_VECTOR gates to the stop
stubs, which capture each other CPU as vpanic() stops it. The panic notifier prints them all
(Documentation/lbr-dump/design.rst "Panics"). As in capture_emulated.py, the expected records are the emulator's record stack
at the freeze each capture made (its `freeze` event on that CPU), decoded from the manuals by
tests/records.py; the printed records must equal them record for record.
"""

import json
import re
import subprocess

import stackframes
from harness import (ARM, CRASH, CRASH_PARAMS, LKDTM, MODULE, MODULE_KO, REPO, SYSFS, assert_clean, boot, decode,
                     kdump, kernel_lines, symbols, tail)
from records import assert_decoded_equals_freeze, assert_equals_freeze, emulated, freeze_records, printed_records

MODEL = "skylake"
PANIC, NMI, REBOOT = 256, 2, 248
TRACEFS = "/sys/kernel/tracing"


def snapshots(console):
    """Every printed snapshot, in order: dicts of the header's fields (cpu, seq, vector, state,
    nest) with `records` (records.printed_records of its lines) and the header `line`."""
    out = []
    for head in kernel_lines(console, "lbr_dump: v2 "):
        m = re.match(r"lbr_dump: v2 cpu=(\d+) seq=(\d+) vector=(\d+) \((\S+)\) .* state=(\S+)(?: nest=(\d+))?$", head)
        if not m:
            continue
        block = console[console.index(head):]
        block = block[:block.index("lbr_dump: end ")]
        out.append({"cpu": int(m[1]), "seq": int(m[2]), "vector": int(m[3]), "name": m[4], "state": m[5],
                    "nest": None if m[6] is None else int(m[6]), "line": head,
                    "records": printed_records(block)})
    return out


def nones(console):
    """{cpu: reason} of the `none:` lines."""
    return {int(m[1]): m[2] for m in (re.match(r"lbr_dump: v2 cpu=(\d+) none: (.*)$", l)
                                      for l in kernel_lines(console, "lbr_dump: v2 ")) if m}


def equals_ground_truth(res, snap):
    """The snapshot's records equal the emulator's freeze on its CPU (records.py)."""
    assert snap["records"], f"the snapshot has no record lines: {snap['line']}"
    assert_equals_freeze(res.emu_events(), snap["line"], snap["records"])


def own_records(snap, entry):
    """Records of the capture's own branches: from or into `entry`, the code that took the
    snapshot. (Older records may hold lbr-dump's exception stubs passing an earlier user-mode
    fault on: those are what the CPU was doing, not the capture.)"""
    return [p for p in snap["records"] if in_function(p["from_sym"], entry) or in_function(p["to_sym"], entry)]


def in_function(sym, name):
    """`sym` (a %pS) is in function `name`, or in its call-depth-tracking padding (__pfx_)."""
    return sym.startswith(f"{name}+") or sym.startswith(f"__pfx_{name}+")


def check_panic_snapshot(res, snap, caller):
    """The panicking CPU's snapshot: taken at panic() entry, complete, equal to the ground truth;
    #0 is the one branch of lbr-dump's own (the call from panic()'s or vpanic()'s fentry site into
    the trampoline), #1 is `caller` calling panic()."""
    assert snap["vector"] == PANIC and snap["name"] == "panic", snap["line"]
    assert snap["state"] == "complete" and snap["nest"] == 0, snap["line"]
    equals_ground_truth(res, snap)
    r = snap["records"]
    assert r[0]["to_sym"].startswith("lbr_dump_panic_entry+0x0/"), r[0]
    assert in_function(r[0]["from_sym"], "panic") or in_function(r[0]["from_sym"], "vpanic"), r[0]
    own = own_records(snap, "lbr_dump_panic_entry")
    assert len(own) == 1, f"lbr-dump's own records: {own}"
    assert in_function(r[1]["from_sym"], caller), f"#1 is not {caller} calling panic(): {r[1]}"
    assert in_function(r[1]["to_sym"], "panic") or in_function(r[1]["to_sym"], "vpanic"), r[1]
    # The header's rip is where panic() was called from, i.e. the call's return address.
    rip = int(re.search(r"rip=0x([0-9a-f]+)", snap["line"])[1], 16)
    assert 0 < rip - r[1]["from"] <= 16, f"rip {rip:#x} is not after the call at {r[1]['from']:#x}"


def interrupted(records):
    """An interrupt was delivered between panic()'s first instruction and the trampoline's
    freeze: its return (`iret`) is among the two newest records, and the caller's call was
    pushed out by its handler's branches (Documentation/lbr-dump/design.rst "What a panic shows")."""
    return any(p["from_sym"].startswith("native_irq_return_iret") for p in records[:2])


ATTEMPTS = 3


def panic_run(name, script, smp=1, append="", arm_args="", **kw):
    """Boots an emulated Skylake with lbr-dump armed, runs `script`, expects a panic; returns
    the run and the printed snapshots. A run in which an interrupt reached the panicking CPU
    before the freeze is run again, at most ATTEMPTS times in all: under TCG that happens far
    more often than on hardware, because TCG delivers a pending interrupt at a block boundary,
    and the first blocks of panic() and of the trampoline are translated (slowly) at the panic.
    Such a run is still checked as far as it goes (its records equal the ground truth)."""
    for attempt in range(1, ATTEMPTS + 1):
        tag = "" if attempt == 1 else f"-again{attempt}"
        res = boot(finish=False, name=f"panic-{name}{tag}", cpu="Skylake-Client", accel="tcg",
                   emulate=f"model={MODEL}", timeout=300, smp=smp, append=append,
                   script=ARM.rstrip("\n") + arm_args + "\n" + script, **kw)
        con = res.console
        assert "lbr_dump: armed" in con and "panic path on" in con, \
            "lbr_dump did not arm its panic path:\n" + "\n".join(kernel_lines(con, "lbr_dump"))
        assert "Kernel panic - not syncing" in con, "no panic:\n" + tail(con)
        snaps = snapshots(con)
        panics = [s for s in snaps if s["vector"] == PANIC]
        if not (panics and interrupted(panics[0]["records"])) or attempt == ATTEMPTS:
            return res, snaps
        equals_ground_truth(res, panics[0])
        print(f"NOTE panic-{name}: an interrupt reached panic() before the freeze; running again", flush=True)
    raise AssertionError("unreachable")


def check_stopped(res, snaps, cpus, loops=None):
    """Each CPU in `cpus` has one snapshot taken as the panic stopped it, equal to its ground
    truth, its newest record the stop interrupt (into the stop stub); with `loops`
    {cpu: (vector, [functions])}, that vector and every record within those functions (the
    loop the CPU was in) or the kernel's return thunks, past the handling of an interrupt that
    was running when the stop came (its IRET back into the loop)."""
    for cpu in cpus:
        mine = [s for s in snaps if s["cpu"] == cpu and s["vector"] in (NMI, REBOOT)]
        assert len(mine) == 1, f"cpu {cpu}: {len(mine)} stop snapshots printed:\n" + \
            "\n".join(s["line"] for s in snaps)
        s = mine[0]
        assert s["nest"] is None and s["state"] == "complete", s["line"]
        equals_ground_truth(res, s)
        stub = "lbr_dump_stop_nmi" if s["vector"] == NMI else "lbr_dump_stop_ipi"
        assert s["records"][0]["to_sym"].startswith(f"{stub}+0x0/"), s["records"][0]
        own = own_records(s, stub)
        assert len(own) == 1, f"cpu {cpu}: lbr-dump's own records: {own}"
        rip = int(re.search(r"rip=0x([0-9a-f]+)", s["line"])[1], 16)
        assert s["records"][0]["from"] == rip, f"cpu {cpu}: newest record from {s['records'][0]['from']:#x}, rip {rip:#x}"
        if loops and cpu in loops:
            vector, funcs = loops[cpu]
            assert s["vector"] == vector, f"cpu {cpu} stopped by vector {s['vector']}, expected {vector}"
            ok = funcs + ["its_return_thunk", "__x86_return_thunk", "srso_return_thunk"]
            in_loop = lambda sym: any(in_function(sym, f) for f in ok)  # noqa: E731
            assert in_loop(s["records"][0]["from_sym"]), f"cpu {cpu}: stopped outside its loop: {s['records'][0]}"
            # An interrupt the CPU handled while it spun (a timer tick, the stop pending behind
            # it or a few turns of the loop before the stop): its IRET back into the loop, and
            # everything older up to its delivery from the loop, is the kernel's interrupt
            # handling, not the loop. (Seen in CI: a tick, one turn of the loop, then the stop.)
            records, handled, loop = s["records"][1:], 0, []
            while records:
                p = records.pop(0)
                if in_function(p["from_sym"], "native_irq_return_iret") and in_loop(p["to_sym"]):
                    entry = next((i for i, q in enumerate(records) if in_loop(q["from_sym"])
                                  and q["to_sym"].startswith("asm_") and "+0x0/" in q["to_sym"]), None)
                    handled += 1
                    records = records[entry + 1:] if entry is not None else []
                    continue
                loop.append(p)
            for p in loop:
                for sym in (p["from_sym"], p["to_sym"]):
                    assert in_loop(sym), f"cpu {cpu}: record outside its loop: {p}"
            # The loop itself is among the records, unless an interrupt's handling filled them.
            assert any(in_function(p["from_sym"], funcs[0]) for p in s["records"]) or (handled and not loop), s["records"]


def test_sysrq_c(r):
    # What users' CI does. 2 vCPUs: the other CPU is stopped by the stop IPI and printed too.
    res, snaps = panic_run("sysrq-c", "echo c > /proc/sysrq-trigger\n", smp=2)
    assert "Kernel panic - not syncing: sysrq triggered crash" in res.console
    panics = [s for s in snaps if s["vector"] == PANIC]
    assert len(panics) == 1, "\n".join(s["line"] for s in snaps)
    check_panic_snapshot(res, panics[0], "sysrq_handle_crash")
    other = 1 - panics[0]["cpu"]
    check_stopped(res, snaps, [other])
    # Printed by the panic notifier, after vpanic()'s message (and before its reboot).
    assert res.console.index("Kernel panic - not syncing") < res.console.index(panics[0]["line"])


def test_lkdtm_panic(r):
    res, snaps = panic_run("lkdtm-panic", f"echo PANIC > {LKDTM}\n")
    [s] = [s for s in snaps if s["vector"] == PANIC]
    check_panic_snapshot(res, s, "lkdtm_PANIC")


def test_stack_protector(r):
    # A stack-protector failure: lbr_crash_stack_protector() overruns a local array, its epilogue
    # finds the canary changed and calls __stack_chk_fail, which calls panic(): #1 is that call,
    # and a record before it is the corrupted function calling __stack_chk_fail. (lkdtm
    # CORRUPT_STACK cannot be used: in the clang build of 7.3 the compiler drops the call that
    # corrupts the stack, and it returns without a panic.)
    res, snaps = panic_run("stack-protector", f"insmod {CRASH} crash=stack_protector\n")
    assert "stack-protector: Kernel stack is corrupted in" in res.console, tail(res.console)
    [s] = [s for s in snaps if s["vector"] == PANIC]
    check_panic_snapshot(res, s, "__stack_chk_fail")
    callers = [p for p in s["records"][2:8] if in_function(p["from_sym"], "lbr_crash_stack_protector")
               and in_function(p["to_sym"], "__stack_chk_fail")]
    assert callers, "no record of lbr_crash_stack_protector calling __stack_chk_fail:\n" + \
        "\n".join(str(p) for p in s["records"][:8])


def test_panic_in_kernel_thread_on_cpu2_of_4(r):
    res, snaps = panic_run("kthread-cpu2", f"insmod {CRASH} crash=panic_thread cpu=2\nsleep 60\n", smp=4)
    [s] = [s for s in snaps if s["vector"] == PANIC]
    assert s["cpu"] == 2, s["line"]
    check_panic_snapshot(res, s, "lbr_crash_panic_here")
    check_stopped(res, snaps, [0, 1, 3])


def stop_all(name, append=""):
    # 4 vCPUs: CPUs 1 and 3 spin with interrupts on (stopped by REBOOT_VECTOR), CPU 2 with
    # interrupts off (stopped by the NMI vpanic() sends a second later); CPU 0 runs sysrq-c.
    res, snaps = panic_run(name, f"insmod {CRASH} crash=stop_all\nsleep 60\n", smp=4, append=append)
    assert "stop_all: 3 CPUs spinning, sysrq-c on CPU 0" in res.console, tail(res.console)
    [s] = [s for s in snaps if s["vector"] == PANIC]
    assert s["cpu"] == 0, s["line"]
    check_panic_snapshot(res, s, "sysrq_handle_crash")
    loop_on = ["lbr_crash_spin_on", "lbr_crash_spin_step"]
    loop_off = ["lbr_crash_spin_off", "lbr_crash_spin_step"]
    check_stopped(res, snaps, [1, 2, 3], {1: (REBOOT, loop_on), 2: (NMI, loop_off), 3: (REBOOT, loop_on)})
    assert "Shutting down cpus with NMI" in res.console
    return res


def test_default_output_prints_the_cpu_the_nmi_stopped(r):
    """lbr-dump's default, bounded output, crash=stop_all on 3 vCPUs: CPU 1 spins with
    interrupts on and answers the stop IPI: one `kept:` line (REBOOT_VECTOR, where it was, 32
    records, complete), no snapshot; CPU 2 spins with interrupts off, so only the NMI a second
    later stops it, as a hard lockup's CPU: its snapshot is printed, its 16 newest records equal
    to the ground truth and in its loop, as are the panicking CPU's 16."""
    res = boot(finish=False, bounded=True, name="panic-default-stop", cpu="Skylake-Client", accel="tcg",
               emulate=f"model={MODEL}", timeout=300, smp=3,
               script=f"insmod {MODULE_KO} enable=1\ninsmod {CRASH} crash=stop_all\nsleep 60\n")
    con = res.console
    assert "stop_all: 2 CPUs spinning, sysrq-c on CPU 0" in con, tail(con)
    snaps = snapshots(con)
    assert sorted((s["cpu"], s["vector"]) for s in snaps) == [(0, PANIC), (2, NMI)], [s["line"] for s in snaps]
    for s in snaps:
        assert_equals_freeze(res.emu_events(), s["line"], s["records"], count=16)
        assert f"lbr_dump: v2 cpu={s['cpu']} kept: seq={s['seq']} records #16-#31 are not printed" in con
    [stuck] = [s for s in snaps if s["vector"] == NMI]
    loop = ("lbr_crash_spin_off", "lbr_crash_spin_step", "its_return_thunk", "__x86_return_thunk")
    assert all(any(in_function(p["from_sym"], f) for f in loop) for p in stuck["records"][:1]), stuck["records"][0]
    kept = re.findall(r"lbr_dump: v2 cpu=1 kept: seq=\d+ vector=248 \(REBOOT_VECTOR\) rip=0x[0-9a-f]+ "
                      r"records=32 state=complete \| at=\S+", con)
    assert len(kept) == 1, kernel_lines(con, "lbr_dump: v2 ")
    assert "lbr_dump: v2 cpu=0 kept: the snapshot of the 1 other CPU above is not printed" in con, tail(con)


# crash=stop_late holds CPU 1 in an NMI handler through the panic. The serial console is an nbcon
# console in 7.3, printed by its kthread pr/ttyS0: an NMI that catches that kthread on CPU 1 in
# the middle of a record holds the console's ownership there. That is the likely reading of a CI
# run whose console ended at lbr_dump's load, with no line of lbr_crash's, the panic's or
# lbr-dump's, while the emulator's log went as a passing run's. The kthread is kept on CPU 0,
# where the panicking CPU takes the console over as usual.
PRINTER_ON_CPU0 = "taskset -p 1 $(pidof pr/ttyS0)\n"


def test_a_stop_nmi_taken_after_vpanics_waits_is_printed(r):
    """crash=stop_late on 2 vCPUs: CPU 1 is inside an NMI handler (lbr_crash's) through the
    whole of vpanic()'s stop (the REBOOT_VECTOR IPI and its second, the stop NMI and its 10 ms),
    so its stop NMI is latched and taken only when lbr_crash's panic notifier lets it go, 20 ms
    later, while lbr-dump's printer (the next notifier) waits for CPUs still online. Its NMI
    snapshot is printed, its 16 newest records equal to the ground truth, as are the panicking
    CPU's. (Before 664da08 the printer did not wait, and CPU 1 was reported not captured.)"""
    res = boot(finish=False, bounded=True, name="panic-stop-late", cpu="Skylake-Client", accel="tcg",
               emulate=f"model={MODEL}", timeout=300, smp=2,
               script=f"{PRINTER_ON_CPU0}insmod {MODULE_KO} enable=1\ninsmod {CRASH} crash=stop_late\nsleep 60\n")
    con = res.console
    assert re.search(r"^pid \d+'s new affinity mask: 1$", con, re.M), tail(con)
    assert "stop_late: CPU 1 is in lbr_crash's NMI handler, sysrq-c on CPU 0" in con, tail(con)
    # What the test is about: the kernel gave up waiting with CPU 1 still running.
    assert "stop_late: at the panic notifiers CPU 1 is still online, its stop NMI not taken" in con, tail(con)
    snaps = snapshots(con)
    assert sorted((s["cpu"], s["vector"]) for s in snaps) == [(0, PANIC), (1, NMI)], \
        [s["line"] for s in snaps] or kernel_lines(con, "lbr_dump: v2 ")
    for s in snaps:
        assert_equals_freeze(res.emu_events(), s["line"], s["records"], count=16)


def test_a_cpu_not_stopped_when_printed_is_said_to_be_running(r):
    """crash=stop_late late_ms=2000 on 3 vCPUs, CPU 2 taken offline first: CPU 1 holds its stop
    NMI off for 2 s after the panic notifiers, past lbr-dump's wait for it. Its `none:` line says
    that it had not stopped when printed; CPU 2's, that it was offline or stopped without a
    capture. (Before, every CPU without a stop capture got the second reason, and a CPU still
    running was said to be offline or to have had no stop interrupt at lbr-dump's stub.)"""
    res = boot(finish=False, bounded=True, name="panic-stop-later", cpu="Skylake-Client", accel="tcg",
               emulate=f"model={MODEL}", timeout=300, smp=3, script=f"""
echo 0 > /sys/devices/system/cpu/cpu2/online
echo online=$(cat /sys/devices/system/cpu/online)
{PRINTER_ON_CPU0}insmod {MODULE_KO} enable=1
insmod {CRASH} crash=stop_late late_ms=2000
sleep 60
""")
    con = res.console
    assert "online=0-1\n" in con.replace("\r", ""), tail(con)
    assert re.search(r"^pid \d+'s new affinity mask: 1$", con, re.M), tail(con)
    assert "stop_late: CPU 1 is in lbr_crash's NMI handler, sysrq-c on CPU 0" in con, tail(con)
    assert "stop_late: at the panic notifiers CPU 1 is still online, its stop NMI not taken" in con, tail(con)
    snaps = snapshots(con)
    assert [(s["cpu"], s["vector"]) for s in snaps] == [(0, PANIC)], [s["line"] for s in snaps]
    assert_equals_freeze(res.emu_events(), snaps[0]["line"], snaps[0]["records"], count=16)
    why = nones(con)
    assert sorted(why) == [1, 2], kernel_lines(con, "lbr_dump: v2 ")
    assert why[1].startswith("still running when printed: it had not taken its stop interrupt"), why[1]
    assert why[2].startswith("stopped or offline without a capture (offline before the panic"), why[2]


def test_a_cpu_stopping_as_it_is_printed_is_printed(r):
    """crash=stop_late late_at_print=1 on 2 vCPUs: CPU 1 holds its stop NMI off past lbr-dump's
    wait for it, and is let go only when the printer, after that wait, tests whether CPU 1 is
    online (a kprobe of lbr_crash's, which waits until CPU 1 has taken its stop NMI and gone
    offline). A CPU captures before it goes offline: its NMI snapshot is printed, equal to the
    ground truth, and no `none:` line says it stopped without one. (The printer read the
    snapshot before the online bit, found no capture yet, then the CPU offline, and said so.)"""
    res = boot(finish=False, bounded=True, name="panic-stop-at-print", cpu="Skylake-Client", accel="tcg",
               emulate=f"model={MODEL}", timeout=300, smp=2,
               script=f"{PRINTER_ON_CPU0}insmod {MODULE_KO} enable=1\n"
                      f"insmod {CRASH} crash=stop_late late_at_print=1\nsleep 60\n")
    con = res.console
    assert "stop_late: CPU 1 is in lbr_crash's NMI handler, sysrq-c on CPU 0" in con, tail(con)
    assert "stop_late: at the panic notifiers CPU 1 is still online, its stop NMI not taken" in con, tail(con)
    assert re.search(r"stop_late: CPU 1 let go at lbr_dump's test of its online bit, offline \d+ us later", con), \
        tail(con)
    assert 1 not in nones(con), kernel_lines(con, "lbr_dump: v2 ")
    snaps = snapshots(con)
    assert sorted((s["cpu"], s["vector"]) for s in snaps) == [(0, PANIC), (1, NMI)], \
        [s["line"] for s in snaps] or kernel_lines(con, "lbr_dump: v2 ")
    for s in snaps:
        assert_equals_freeze(res.emu_events(), s["line"], s["records"], count=16)


def test_a_panic_handed_to_another_cpu_is_printed_there(r):
    """panic_force_cpu=0 on 2 vCPUs, crash=panic_thread on CPU 1: panic() on CPU 1, where the
    trampoline captures it, hands the panic to CPU 0 (an IPI) and takes CPU 1 offline; CPU 0
    calls panic() again (claimed: no second capture) and runs the notifiers. The printer prints
    CPU 1's panic snapshot, equal to the ground truth, and for CPU 1 why it has no stop
    snapshot; nothing for CPU 0, the CPU that runs the panic. (The printer skipped the CPU that
    claimed the capture, not its own, and said its own CPU was still running.)"""
    res, snaps = panic_run("force-cpu", f"insmod {CRASH} crash=panic_thread cpu=1\nsleep 60\n", smp=2,
                           append="panic_force_cpu=0")
    con = res.console
    assert "panic: Redirecting from CPU 1 to CPU 0 for crash kernel." in con, tail(con)
    [s] = [s for s in snaps if s["vector"] == PANIC]
    assert s["cpu"] == 1, s["line"]
    check_panic_snapshot(res, s, "lbr_crash_panic_here")
    assert [(x["cpu"], x["vector"]) for x in snaps] == [(1, PANIC)], [x["line"] for x in snaps]
    why = nones(con)
    assert sorted(why) == [1], kernel_lines(con, "lbr_dump: v2 ")
    assert why[1].startswith("offline without a stop capture: it entered panic() first and handed the panic "
                             "to CPU 0 (panic_force_cpu=)"), why[1]


# lbr_crash crash=stop_stalled's markers, which arm and release the emulator's stall of CPU 1.
STALL_ARM, STALL_RELEASE = 5301, 5302


def containing(kallsyms, addr):
    """The name of the symbol of `kallsyms` ({name: address}) that `addr` is in: the nearest one
    at or below it (the listed symbols are lbr-dump's entry code, laid out next to each other)."""
    below = [(a, n) for n, a in kallsyms.items() if a <= addr]
    return max(below)[1] if below else None


def test_a_stop_capture_the_stop_nmi_arrives_in_is_finished(r):
    """crash=stop_stalled on 2 vCPUs, under the emulator's stall=1:5301:5302: CPU 1 spins with
    interrupts on and takes the REBOOT_VECTOR stop, and the emulator holds that vCPU at its stop
    capture's freeze until lbr_crash's panic notifier, past vpanic()'s one-second wait: vpanic()
    sends it the stop NMI, which is pending when CPU 1 goes on and is taken inside the capture
    (the emulator sees it delivered from lbr_dump_stop_ipi). The NMI stop stub goes back to the
    capture (asm/stubs.S LBR_STOP_BODY), which completes before the REBOOT_VECTOR handler stops
    the CPU: CPU 1's snapshot is REBOOT_VECTOR's, complete, equal to the emulator's freeze, in
    its loop, and the NMI returned to where it came from. (Before, the NMI went on to the
    kernel's stop handler and CPU 1 stopped with the capture cut short after its freeze.)"""
    res = boot(finish=False, name="panic-stop-stalled", cpu="Skylake-Client", accel="tcg",
               emulate=f"model={MODEL},cost=on,stall=1:{STALL_ARM}:{STALL_RELEASE}", timeout=300, smp=2,
               script=f"""{PRINTER_ON_CPU0}{ARM}grep ' lbr_dump_' /proc/kallsyms
insmod {CRASH} crash=stop_stalled
sleep 60
""")
    con = res.console
    assert "stop_stalled: CPU 1 spins with interrupts on, sysrq-c on CPU 0" in con, tail(con)
    syms = {m[2]: int(m[1], 16) for m in re.finditer(r"^([0-9a-f]{16}) [tT] (lbr_dump_\w+)\s+\[lbr_dump\]", con, re.M)}
    assert "lbr_dump_stop_ipi" in syms and "lbr_dump_stop_nmi" in syms, sorted(syms)
    ev = res.emu_events()
    # The conditions, from the emulator: CPU 1 held at a freeze in the REBOOT_VECTOR stop stub
    # until the notifier's marker; from the console: still running when vpanic() gave up
    # waiting for it and sent the NMI.
    [stall] = [e for e in ev if e["event"] == "stall"]
    [end] = [e for e in ev if e["event"] == "stall-end"]
    where = containing(syms, int(stall["pc"], 16))
    assert stall["cpu"] == 1 and where == "lbr_dump_stop_ipi", (stall, where)
    assert end["cpu"] == 1 and end["end"] == "marker", end
    assert "Shutting down cpus with NMI" in con, tail(con)
    assert "stop_stalled: at the panic notifiers CPU 1 is still online" in con, tail(con)
    assert "stop_stalled: released, CPU 1 went offline" in con, tail(con)
    # What the emulator saw of CPU 1 after the stall: its MSR reads (the capture's), and the
    # NMI delivered to the NMI stop stub from inside the REBOOT_VECTOR one.
    after = [e for e in ev if e["seq"] > end["seq"] and e.get("cpu") == 1]
    reads = [e for e in after if e["event"] == "rdmsr"]
    nmis = [e for e in after if e["event"] == "entry" and int(e["to"], 16) == syms["lbr_dump_stop_nmi"]]
    snaps = snapshots(con)
    mine = [s["line"] for s in snaps if s["cpu"] == 1]
    assert mine, (f"cpu 1 has no snapshot: {nones(con).get(1)!r}; the emulator saw {len(reads)} MSR reads on "
                  f"CPU 1 after its stall at {where}+{int(stall['pc'], 16) - syms[where]:#x}")
    loop_on = ["lbr_crash_spin_on", "lbr_crash_spin_step"]
    check_stopped(res, snaps, [1], {1: (REBOOT, loop_on)})
    assert len(nmis) == 1, nmis
    nmi = nmis[0]
    assert containing(syms, int(nmi["from"], 16)) == "lbr_dump_stop_ipi", nmi
    assert nmi["end"] == "return" and nmi["back"] == nmi["from"], nmi
    assert (nmi["rdmsr"], nmi["wrmsr"]) == (0, 0), nmi
    print(f"NOTE stop NMI inside the REBOOT_VECTOR capture: returned to it after {nmi['total']} instructions; "
          f"the stall lasted {end['ms']} ms", flush=True)


def test_every_cpu_stopped_in_its_loop(r):
    stop_all("stop-all")


def test_nmis_before_the_stop_are_not_taken_for_it(r):
    # panic_sys_info=all_bt: vpanic() sends every CPU an NMI backtrace after printing and before
    # it stops them. Those NMIs are not the stop: each CPU's snapshot is still the one its stop
    # interrupt took (REBOOT_VECTOR for CPUs 1 and 3), in its loop. (The first version switched
    # the gates at panic() entry, and this backtrace NMI was taken for CPU 1's and 3's stop.)
    res = stop_all("stop-all-backtrace", append="panic_sys_info=all_bt")
    assert "NMI backtrace for cpu 1" in res.console, "no NMI backtrace before the stop"


def nmi_load_ran_clean(con):
    """The 20 sysrq-l rounds on 4 vCPUs ran (3 other CPUs' NMI backtraces each), and nothing
    warned or oopsed before the panic."""
    assert con.count("NMI backtrace for cpu") >= 20 * 3, "the NMI load did not run:\n" + tail(con)
    before = con[:con.index("Kernel panic")]
    bad = [l for l in before.splitlines() if re.search(r"WARNING: CPU:|BUG:|Oops:|general protection", l)]
    assert not bad, bad


def lockup(name, what, detected, append):
    """lkdtm `what` on 2 CPUs with the watchdog on; the run, its snapshots, the stuck CPU (from the
    watchdog's report, which must match `detected`) and the panic snapshot."""
    res, snaps = panic_run(name, f"echo {what} > {LKDTM}\n", smp=2, watchdog=True, append=append)
    m = re.search(detected, res.console)
    assert m, "the watchdog did not detect the lockup:\n" + tail(res.console)
    [p] = [s for s in snaps if s["vector"] == PANIC]
    return res, snaps, int(m[1]), p


def test_hard_lockup_shows_the_loop(r):
    # lkdtm HARDLOCKUP spins with interrupts off. The test kernel's hard-lockup detector is the
    # buddy one (TCG has no PMU for the perf NMI watchdog): another CPU's watchdog timer finds
    # the CPU stuck and panics (nmi_watchdog=panic). vpanic()'s stop IPI cannot reach the stuck
    # CPU; the NMI a second later does, through lbr-dump's NMI stop stub: its newest record is
    # that NMI, from inside the loop, and every other record is the loop itself.
    res, snaps, stuck, p = lockup("hard-lockup", "HARDLOCKUP", r"Watchdog detected hard LOCKUP on cpu (\d+)",
                                  "nmi_watchdog=panic watchdog_thresh=4")
    assert p["cpu"] != stuck, p["line"]
    equals_ground_truth(res, p)
    check_stopped(res, snaps, [stuck], {stuck: (NMI, ["lkdtm_HARDLOCKUP"])})


def test_soft_lockup(r):
    # lkdtm SOFTLOCKUP spins with preemption off and interrupts on. The soft-lockup detector is
    # the stuck CPU's own watchdog timer interrupt, which panics (softlockup_panic=1): the
    # panicking CPU's snapshot is that interrupt's path to panic() (#1: watchdog_timer_fn calling
    # it), equal to the ground truth; the loop itself is in the kernel's register dump (RIP) of
    # the soft-lockup report, not in the 32 records. The other CPU is captured as it is stopped.
    res, snaps, stuck, p = lockup("soft-lockup", "SOFTLOCKUP", r"BUG: soft lockup - CPU#(\d+) stuck",
                                  "softlockup_panic=1 watchdog_thresh=4")
    assert p["cpu"] == stuck, p["line"]
    check_panic_snapshot(res, p, "watchdog_timer_fn")
    check_stopped(res, snaps, [1 - stuck])


def test_panic_on_oops_prints_the_exception_once(r):
    # oops=panic: the oops prints its #PF snapshot (nest=0); the panic that follows prints no
    # second snapshot of that CPU (a none: line says why), and the other CPU's stop snapshot.
    res, snaps = panic_run("panic-on-oops", f"echo EXCEPTION > {LKDTM}\n", smp=2, append="oops=panic")
    exc = [s for s in snaps if s["vector"] == 14]
    assert len(exc) == 1 and exc[0]["nest"] == 0, "\n".join(s["line"] for s in snaps)
    assert not [s for s in snaps if s["vector"] == PANIC], "a panic snapshot was printed after the oops"
    why = nones(res.console)
    assert "follows the oops printed above" in why.get(exc[0]["cpu"], ""), why
    check_stopped(res, snaps, [1 - exc[0]["cpu"]])


# lbr_crash crash=kexec_return: crash_kexec(NULL) on CPU 1 with no crash kernel loaded, which
# returns (as a BPF program's call, a destructive kfunc, or the UV NMI button's does); the guest's
# addresses of crash_kexec() and of the stop stubs for the emulator's log.
KEXEC_RETURN = f"""grep -wE 'crash_kexec|lbr_dump_stop_ipi|lbr_dump_stop_nmi' /proc/kallsyms
insmod {CRASH} crash=kexec_return cpu=1 target=0x$(grep -w crash_kexec /proc/kallsyms | cut -d' ' -f1)
"""


def kexec_returned(res):
    """The run's crash_kexec() returned on CPU 1 with no crash kernel loaded, after lbr-dump
    captured its entry (the emulator froze CPU 1's recorder with the call from crash_kexec()'s
    first instructions into lbr-dump as the newest record). Returns the guest's kallsyms
    addresses {name: address} of crash_kexec and the stop stubs."""
    con = res.console
    # Armed with the whole panic path: at crash_kexec() and panic_reset(), and the stop trampoline.
    assert re.search(r"lbr_dump: armed: .*, panic path on(?! \()", con), "\n".join(kernel_lines(con, "lbr_dump"))
    assert "kexec_return: crash_kexec(NULL) returned on CPU 1, no crash kernel loaded" in con, tail(con)
    syms = {m[2]: int(m[1], 16) for m in re.finditer(r"^([0-9a-f]{16}) [tT] (\w+)\s", con, re.M)}
    assert {"crash_kexec", "lbr_dump_stop_ipi", "lbr_dump_stop_nmi"} <= set(syms), syms
    events = res.emu_events()
    flavour, fmt = emulated(events)
    at_entry = [e for e in events if e["event"] == "freeze" and e["cpu"] == 1
                and (t := freeze_records(e, flavour, fmt)) and 0 <= t[0]["from"] - syms["crash_kexec"] < 16]
    assert at_entry, "the emulator saw no capture on CPU 1 at crash_kexec() entry"
    return syms


def stop_stub_freezes(res, syms):
    """The emulator's freezes whose newest record is an interrupt's delivery into a stop stub."""
    events = res.emu_events()
    flavour, fmt = emulated(events)
    stubs = {syms["lbr_dump_stop_ipi"], syms["lbr_dump_stop_nmi"]}
    return [e for e in events if e["event"] == "freeze"
            and (t := freeze_records(e, flavour, fmt)) and t[0]["to"] in stubs]


def test_a_crash_kexec_that_returned_gives_the_panic_back(r):
    # crash_kexec() takes the one panic capture at its entry; returning (no crash kernel), it
    # gives it back as the kernel gives back its panic_cpu (panic_reset()). A later sysrq-c on
    # CPU 0 is then captured at panic() entry and printed as CPU 0's, and CPU 1 as the panic
    # stops it; crash_kexec()'s own capture stays in memory, not printed.
    res, snaps = panic_run("kexec-return", KEXEC_RETURN + "taskset -c 0 sh -c 'echo c > /proc/sysrq-trigger'\n",
                           smp=2)
    kexec_returned(res)
    assert "Kernel panic - not syncing: sysrq triggered crash" in res.console, tail(res.console)
    panics = [s for s in snaps if s["vector"] == PANIC]
    assert [s["cpu"] for s in panics] == [0], "\n".join(s["line"] for s in snaps)
    check_panic_snapshot(res, panics[0], "sysrq_handle_crash")
    check_stopped(res, snaps, [1])


def test_a_panic_racing_a_crash_kexec_that_returns_is_captured(r):
    # crash_kexec() on CPU 1 takes the one panic capture and the kernel's panic_cpu, and is held
    # at __crash_kexec() (lbr_crash race=1) while sysrq-c on CPU 0 passes panic()'s and vpanic()'s
    # entry; CPU 0 is held in turn before vpanic()'s panic_try_start() until crash_kexec() has
    # returned on CPU 1, giving panic_cpu back (panic_reset()). The panic then runs on CPU 0: its
    # snapshot is CPU 0's, taken at panic() entry, and CPU 1 is captured as the panic stops it.
    script = KEXEC_RETURN.replace("crash=kexec_return", "crash=kexec_return race=1")
    res, snaps = panic_run("kexec-race", script, smp=2)
    kexec_returned(res)
    con = res.console
    assert "kexec_return: race: CPU 1 held at __crash_kexec() until CPU 0's panic reached vpanic()" in con, tail(con)
    assert "kexec_return: race: CPU 0 held before vpanic()'s panic_try_start() until crash_kexec() returned on CPU 1" \
        in con, tail(con)
    assert "Kernel panic - not syncing: sysrq triggered crash" in con, tail(con)
    panics = [s for s in snaps if s["vector"] == PANIC]
    assert [s["cpu"] for s in panics] == [0], "\n".join(s["line"] for s in snaps) + "\n" + \
        "\n".join(kernel_lines(con, "lbr_dump"))
    check_panic_snapshot(res, panics[0], "sysrq_handle_crash")
    check_stopped(res, snaps, [1])


def test_a_reboot_after_a_crash_kexec_that_returned_captures_nothing(r):
    # After crash_kexec() returned, nothing is claimed: the reboot at the script's end stops
    # CPU 1 (native_stop_other_cpus()) through the kernel's gates, not lbr-dump's stop stubs.
    res = boot(name="panic-kexec-return-reboot", cpu="Skylake-Client", accel="tcg", emulate=f"model={MODEL}",
               smp=2, timeout=300, script=ARM + KEXEC_RETURN)
    syms = kexec_returned(res)
    assert "reboot: Restarting system" in res.console, tail(res.console)
    stops = stop_stub_freezes(res, syms)
    assert not stops, f"the reboot's stop interrupts were captured: {len(stops)} freezes in the stop stubs"


def test_disarmed_panic_path_is_detached(r):
    # While armed, panic() and vpanic() carry lbr-dump's panic trampoline, crash_kexec() its
    # kexec trampoline and panic_reset() its reset trampoline (where a crash_kexec() that
    # returns gives its claim back), native_stop_other_cpus() and nmi_shootdown_cpus() its stop
    # trampoline, as ftrace direct calls (tracefs' enabled_functions); disarmed, none does, and
    # the NMI and REBOOT_VECTOR gates are the kernel's throughout (capture_forced.py checks the
    # gates).
    res = boot(name="panic-detach", cpu="Skylake-Client", accel="tcg", emulate=f"model={MODEL}", script=f"""
mount -t tracefs none {TRACEFS}
{ARM}echo ==armed==; cat {TRACEFS}/enabled_functions; echo ==
echo 0 > {SYSFS}/enabled
echo ==disarmed==; cat {TRACEFS}/enabled_functions; echo ==
echo 1 > {SYSFS}/enabled
echo ==rearmed==; cat {TRACEFS}/enabled_functions; echo ==
""")
    part = lambda tag: res.console.split(f"=={tag}==")[1].split("==")[0]  # noqa: E731
    for tag in ("armed", "rearmed"):
        # Each traced function's line, then its direct call's.
        direct = lambda t: sorted(re.findall(  # noqa: E731
            rf"^(\w+) \(\d+\)[^\n]*\n\s*direct-->{t}\+0x0/", part(tag), re.M))
        assert direct("lbr_dump_panic_entry") == ["panic", "vpanic"], part(tag)
        assert direct("lbr_dump_kexec_entry") == ["crash_kexec"], part(tag)
        assert direct("lbr_dump_reset_entry") == ["panic_reset"], part(tag)
        assert direct("lbr_dump_stop_entry") == ["native_stop_other_cpus", "nmi_shootdown_cpus"], part(tag)
    assert "direct-->lbr_dump_" not in part("disarmed"), part("disarmed")
    assert_clean(res.console)


def test_nmis_while_armed_change_nothing(r):
    # 4 vCPUs, armed, under an NMI load (sysrq-l: an NMI backtrace on every CPU, 20 times) while
    # user programs fault: no NMI goes through lbr-dump's stubs (its gates are the kernel's until
    # a panic stops the CPUs: every stop snapshot comes after the panic's, none was taken during
    # the load), nothing warns; then a panic still captures every CPU. (Captures of kernel #PFs
    # the backtraces' copy_from_kernel_nofault() takes and fixes up may happen: those are
    # exceptions, captured by design.)
    res, snaps = panic_run("nmi-load", f"""
(for i in $(seq 100); do lbr-faults; done) >/dev/null 2>&1 &
for i in $(seq 20); do echo l > /proc/sysrq-trigger; done
wait
echo captures=$(cat {SYSFS}/captures)
echo c > /proc/sysrq-trigger
""", smp=4)
    con = res.console
    nmi_load_ran_clean(con)
    [s] = [s for s in snaps if s["vector"] == PANIC]
    check_panic_snapshot(res, s, "sysrq_handle_crash")
    check_stopped(res, snaps, [c for c in range(4) if c != s["cpu"]])
    stops = [t for t in snaps if t["vector"] in (NMI, REBOOT)]
    assert all(t["seq"] > s["seq"] for t in stops), [t["line"] for t in stops]


def test_kdump_vmcore_has_every_cpu(r):
    # sysrq-c with a capture kernel loaded, 2 vCPUs: vpanic() boots the capture kernel before
    # the panic notifiers run, so nothing is printed; the vmcore holds the panicking CPU's
    # snapshot and the other CPU's, taken as kdump's NMI shootdown stopped it. lbr-decode reads
    # both from the vmcore, each equal to the emulator's ground truth on its CPU.
    for attempt in range(1, ATTEMPTS + 1):  # see panic_run
        res, disk = kdump("panic-kdump" + ("" if attempt == 1 else f"-again{attempt}"),
                          "echo c > /proc/sysrq-trigger", smp=2, cpu="Skylake-Client", accel="tcg",
                          emulate=f"model={MODEL}")
        assert "Kernel panic - not syncing: sysrq triggered crash" in res.console
        assert "lbr_dump: v2 " not in res.console, "printed before kdump: the notifiers ran first?"
        code, out, err = decode(*symbols(), disk)
        assert code == 0, err
        doc = json.loads(out)
        first = [s for s in doc["snapshots"] if s["kind"] == "panic"][:1]
        if not first or not any((x["from"]["symbol"] or "").startswith("native_irq_return_iret")
                                for x in first[0]["records"][:2]):
            break
        print("NOTE panic-kdump: an interrupt reached panic() before the freeze; running again", flush=True)
    assert doc["version"] == 1 and doc["minor_version"] >= 1 and doc["warnings"] == [], doc["warnings"]
    panics = [s for s in doc["snapshots"] if s["kind"] == "panic"]
    stops = [s for s in doc["snapshots"] if s["kind"] == "stop"]
    assert len(panics) == 1 and panics[0]["vector"] == PANIC and panics[0]["vector_name"] == "panic", panics
    assert [s["cpu"] for s in stops] == [1 - panics[0]["cpu"]], stops
    assert stops[0]["vector"] == NMI and stops[0]["vector_name"] == "NMI", stops[0]
    events = res.emu_events()
    for s in panics + stops:
        assert_decoded_equals_freeze(events, s)
    sym = lambda x: x["symbol"] or ""  # noqa: E731
    p = panics[0]["records"]
    assert sym(p[0]["to"]).startswith("lbr_dump_panic_entry+0x0/"), p[0]
    assert in_function(sym(p[1]["from"]), "sysrq_handle_crash"), p[1]
    assert sym(stops[0]["records"][0]["to"]).startswith("lbr_dump_stop_nmi+0x0/"), stops[0]["records"][0]


def test_kdump_after_panic_on_oops_has_every_cpu(r):
    # An oops with oops=panic and kdump loaded, 2 vCPUs: oops_end() goes to crash_kexec() before
    # any panic(). The oops prints its #PF snapshot (the die notifier runs first); lbr-dump's
    # trampoline at crash_kexec() entry (its claim marked as crash_kexec()'s) switches the stop
    # gates, so kdump's NMI shootdown captures the other CPU: the vmcore holds the #PF snapshot,
    # the one at crash_kexec() entry (kind panic, its #0 the call into the kexec trampoline, #1
    # oops_end calling crash_kexec) and the other CPU's NMI snapshot.
    res, disk = kdump("panic-kdump-oops", f"echo EXCEPTION > {LKDTM}", append="oops=panic", smp=2,
                      cpu="Skylake-Client", accel="tcg", emulate=f"model={MODEL}")
    printed = snapshots(res.console)
    assert [s["vector"] for s in printed] == [14], [s["line"] for s in printed]
    code, out, err = decode(*symbols(), disk)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["warnings"] == [], doc["warnings"]
    kinds = sorted((s["kind"], s["cpu"]) for s in doc["snapshots"])
    oops_cpu = printed[0]["cpu"]
    assert kinds == sorted([("exception", oops_cpu), ("panic", oops_cpu), ("stop", 1 - oops_cpu)]), kinds
    [p] = [s for s in doc["snapshots"] if s["kind"] == "panic"]
    sym = lambda x: x["symbol"] or ""  # noqa: E731
    assert in_function(sym(p["records"][0]["from"]), "crash_kexec"), p["records"][0]
    assert sym(p["records"][0]["to"]).startswith("lbr_dump_kexec_entry+0x0/"), p["records"][0]
    assert in_function(sym(p["records"][1]["from"]), "oops_end"), p["records"][1]
    [s] = [s for s in doc["snapshots"] if s["kind"] == "stop"]
    assert s["vector_name"] == "NMI" and sym(s["records"][0]["to"]).startswith("lbr_dump_stop_nmi+0x0/"), s


# The most stack the printers may use of their own frames. They run in the oopsing or panicking
# context: a panic in an NMI handler (perf's hard-lockup watchdog) prints on the 8 KiB NMI stack
# (EXCEPTION_STKSZ, arch/x86/include/asm/page_64_types.h), below the NMI entry, the handler,
# vpanic() and the notifier chain, and above printk with %pS (symbol_string() alone reserves
# 736 bytes; a console flushed from the panic CPU adds its driver). A quarter of it is ours.
PRINTER_STACK = 2048


def test_printers_fit_an_exception_stack(r):
    """Static: the deepest chain of lbr_dump.ko's own frames from its die and panic notifiers
    (direct calls, tail jumps, and core::fmt's calls back into our Display and Write impls),
    measured from the disassembly, is at most PRINTER_STACK bytes. On 2453be0 the panic printer's
    chain was over 8 KiB (two 1.5 KiB copies of a snapshot's values among them), and a panic in an NMI
    handler double-faulted on the NMI stack's guard page (the nmi_lockup tests below)."""
    ko = REPO / "out" / "module" / "lbr_dump.ko"
    subprocess.run(["scripts/module.sh"], cwd=REPO, check=True, capture_output=True)
    p = subprocess.run(["bash", "-c", f"source scripts/common.sh; in_root llvm-objdump -dr --no-show-raw-insn {ko}"],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    funcs = stackframes.parse(p.stdout)
    for notifier in ("7printer6on_die", "7printer8on_panic"):
        [root] = [n for n in funcs if n.endswith(notifier) and not n.startswith("__pfx")]
        used, chain = stackframes.deepest(funcs, root)
        # The chain is real: it reaches the snapshot printer and formats a line.
        assert any("print_snapshot" in c for c in chain) and "core::fmt::write" in chain, chain
        print(f"BENCH printer stack: {notifier[8:]} uses at most {used} bytes of its own frames, "
              f"{used / PRINTER_STACK:.2f} of the {PRINTER_STACK}-byte budget: {' > '.join(chain)}")
        assert used <= PRINTER_STACK, f"{notifier[8:]}: {used} bytes: {' > '.join(chain)}"


def nmi_lockup(name, freeze):
    """A CPU stuck with interrupts off; an NMI (QMP inject-nmi) reaches an NMI handler that
    panics, as perf's hard-lockup watchdog does on bare metal (lbr_crash crash=nmi_lockup: its
    handler is registered before lbr-dump's, as perf's is). One vCPU, the emulator's cost probe on.
    Returns the run, the panic snapshot and the guest's kallsyms for lbr-dump."""
    res = boot(finish=False, name=f"panic-{name}", cpu="Skylake-Client", accel="tcg",
               emulate=f"model={MODEL},cost=on", timeout=300, nmi_on="nmi_lockup: CPU 0 stuck", script=f"""
insmod {CRASH} crash=nmi_lockup
insmod {MODULE} enable=1{' nmi_freeze=1' if freeze else ''}
grep ' lbr_dump_nmi_watch' /proc/kallsyms
echo 1 > {CRASH_PARAMS}/stuck
""")
    con = res.console
    assert "lbr_dump: armed" in con and "panic path on" in con, "\n".join(kernel_lines(con, "lbr_dump"))
    assert ("nmi_freeze" in con) == freeze, "\n".join(kernel_lines(con, "lbr_dump: armed"))
    assert "Kernel panic - not syncing: lbr_crash: hard LOCKUP" in con, tail(con)
    [s] = [s for s in snapshots(con) if s["vector"] == PANIC]
    return res, s


def test_nmi_freeze_shows_the_loop_a_perf_nmi_found(r):
    # nmi_freeze=1: the NMI's entry froze the recorder (lbr_dump_nmi_watch), the handler that
    # panicked ran with it frozen, and the panic snapshot (state=nmi-entry) is the loop: #0 the
    # NMI's delivery from inside it, every other record in it. The same crash without nmi_freeze
    # shows the NMI handler's branches instead (next test). BENCH: what the watch stub adds to an
    # NMI, counted by the emulator.
    res, s = nmi_lockup("nmi-freeze", True)
    assert s["state"] == "nmi-entry" and s["cpu"] == 0, s["line"]
    equals_ground_truth(res, s)
    r0 = s["records"][0]
    assert r0["to_sym"].startswith("lbr_dump_nmi_watch+0x0/"), r0
    loop = ["lbr_crash_stuck", "lbr_crash_spin_step", "its_return_thunk", "__x86_return_thunk"]
    assert any(in_function(r0["from_sym"], f) for f in loop), r0
    for p in s["records"][1:]:
        assert any(in_function(p["from_sym"], f) for f in loop) and any(in_function(p["to_sym"], f) for f in loop), \
            f"record outside the loop: {p}"
    watch = int(re.search(r"^([0-9a-f]{16}) [tT] lbr_dump_nmi_watch\s", res.console, re.M)[1], 16)
    entries = [e for e in res.emu_events() if e["event"] == "entry" and int(e["to"], 16) == watch]
    assert entries, "the emulator saw no NMI delivered to lbr_dump_nmi_watch"
    e = entries[-1]
    assert (e["rdmsr"], e["wrmsr"]) == (1, 1), e
    print(f"BENCH entry cost, nmi_freeze, kernel-mode NMI: the watch stub adds {e['insns']} instructions, "
          f"{e['rdmsr']} RDMSR, {e['wrmsr']} WRMSR before the kernel's handler (the thaw in lbr-dump's NMI "
          f"handler: 1 RDMSR, 1 WRMSR more)", flush=True)


def test_without_nmi_freeze_a_perf_nmi_panic_shows_the_handler(r):
    # The default: the NMI gate is the kernel's, and the panic snapshot taken at panic() entry
    # inside the NMI handler holds the handler's branches; the loop is not among them.
    res, s = nmi_lockup("nmi-no-freeze", False)
    check_panic_snapshot(res, s, "nmi_panic")
    assert not [p for p in s["records"] if in_function(p["from_sym"], "lbr_crash_stuck")], s["records"]


def test_nmi_freeze_thaws_after_every_nmi(r):
    # nmi_freeze=1, 4 vCPUs: 20 NMI backtraces (sysrq-l: an NMI on every other CPU, in kernel
    # mode), each frozen at entry by the watch stub and thawed by lbr-dump's NMI handler, with
    # no warning. Then sysrq-c: every CPU's snapshot is live (state=complete, equal to the ground
    # truth), so no NMI left a recorder frozen. (The pause before sysrq-c lets the console drain:
    # a UART interrupt taken at the trampoline's first instruction, before its `cli`, would be
    # the newest records; TCG delivers pending interrupts exactly there, at a block boundary.)
    res, snaps = panic_run("nmi-freeze-thaw", f"""
grep ' lbr_dump_nmi_watch' /proc/kallsyms
for i in $(seq 20); do echo l > /proc/sysrq-trigger; done
sleep 3
echo c > /proc/sysrq-trigger
""", smp=4, arm_args=" nmi_freeze=1")
    con = res.console
    nmi_load_ran_clean(con)
    watch = int(re.search(r"^([0-9a-f]{16}) [tT] lbr_dump_nmi_watch\s", con, re.M)[1], 16)
    frozen = [e for e in res.emu_events() if e["event"] == "freeze" and 0 <= int(e["pc"], 16) - watch < 0x200]
    assert len(frozen) >= 20 * 3, f"only {len(frozen)} freezes by the watch stub"
    [p] = [s for s in snaps if s["vector"] == PANIC]
    check_panic_snapshot(res, p, "sysrq_handle_crash")
    check_stopped(res, snaps, [c for c in range(4) if c != p["cpu"]])


def test_kdump_with_post_notifiers_prints_and_dumps(r):
    # crash_kexec_post_notifiers: vpanic() stops the other CPUs through crash_smp_send_stop()
    # (kdump's NMI shootdown), runs the notifiers (lbr-dump prints) and kmsg_dump(), then boots
    # the capture kernel. The log and the vmcore hold the same snapshots (the printed ones
    # sealed), and lbr-decode reads the new kinds from both.
    res, disk = kdump("panic-kdump-post", "echo c > /proc/sysrq-trigger", append="crash_kexec_post_notifiers",
                      smp=2, cpu="Skylake-Client", accel="tcg", emulate=f"model={MODEL}")
    printed = snapshots(res.console)
    assert sorted(s["vector"] for s in printed) == [NMI, PANIC], [s["line"] for s in printed]
    for s in printed:
        equals_ground_truth(res, s)
    code, out, err = decode(*symbols(), res.log)
    assert code == 0, err
    logged = {(s["cpu"], s["seq"]): s for s in json.loads(out)["snapshots"]}
    assert sorted(s["kind"] for s in logged.values()) == ["panic", "stop"], logged
    code, out, err = decode(*symbols(), disk)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["warnings"] == [], doc["warnings"]
    dumped = {(s["cpu"], s["seq"]): s for s in doc["snapshots"]}
    assert set(dumped) == set(logged), (sorted(dumped), sorted(logged))
    for k, d in dumped.items():
        l = logged[k]
        assert d["complete"] and (d["kind"], d["vector"], d["state"]) == (l["kind"], l["vector"], l["state"]), (d, l)
        assert [x["from"]["addr"] for x in d["records"]] == [x["from"]["addr"] for x in l["records"]]
        assert [x["to"]["addr"] for x in d["records"]] == [x["to"]["addr"] for x in l["records"]]
