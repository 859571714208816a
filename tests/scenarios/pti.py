# SPDX-License-Identifier: GPL-2.0
"""Page-table isolation (issue 12 item 4).

With PTI, exceptions from user mode arrive under the user CR3, where only entry text and the
cpu_entry_area are mapped. The loadable module's stubs are module text: it refuses to arm, and
the refusal says to build lbr-dump in. Built in, the stubs are entry text and go on straight to
the kernel's asm_exc_* entry points (asm/stubs.S LBR_ENTRY_TEXT, LBR_GO_ON); a kernel-mode entry
under the user CR3 (an IRET fault) is passed on, and the #DB re-arm switches to the kernel page
tables and back (LBR_KERNEL_CR3). A wrong step here is not a failed assertion but a guest that
triple-faults or hangs on its first user-mode exception.

Each test first asserts that PTI is really on in the guest (the kernel's own line), so a test
that claims PTI did not run without it.
"""

import importlib.util
import re
from pathlib import Path

from harness import LKDTM, MODULE, PTI_ON, boot, kernel_lines, snapshot_heads, tail
from records import assert_equals_freeze, printed_records

# panic.py's checks of a panic's snapshots (the panicking CPU's and each stopped CPU's).
_spec = importlib.util.spec_from_file_location("scenario_panic_checks", Path(__file__).with_name("panic.py"))
panic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(panic)

ROUNDS = 60  # lbr-faults and lbr-singlestep runs before the crash


def assert_pti(console):
    assert PTI_ON in console, "page-table isolation is not on in the guest:\n" + "\n".join(
        kernel_lines(console, "Kernel/User page tables isolation"))


def test_module_refuses_and_says_to_build_it_in(r):
    res = boot(name="pti-module-refused", cpu="Skylake-Client", accel="tcg", emulate="model=skylake", pti="on",
               timeout=180, script=f"insmod {MODULE} enable=1 || echo insmod=$?\nlbr-faults && echo still-running\n")
    con = res.console
    assert_pti(con)
    m = re.search(r"insmod=(\d+)", con)
    assert m and m[1] != "0", "insmod of lbr_dump did not fail under PTI:\n" + tail(con)
    lines = kernel_lines(con, "lbr_dump")
    assert any("page-table isolation is active" in ln and "CONFIG_LBR_DUMP=y" in ln for ln in lines), \
        "the refusal does not say to build lbr-dump in:\n" + "\n".join(lines)
    assert "lbr_dump: armed" not in con
    assert "still-running" in con, "the machine did not run on after the refusal:\n" + tail(con)


def test_builtin_armed_under_pti_survives_user_faults_and_single_steps_then_captures(r):
    # The built-in kernel, booted with pti=on and lbr_dump=on under the emulator (legacy LBR
    # format 5). User programs fault thousands of times (lbr-faults: user-mode #PF, and
    # kernel-mode #PF inside user-access regions, resolved and fixed up), single-step
    # themselves (lbr-singlestep: one #DB from user mode each, which clears DEBUGCTL.LBR and must
    # be re-armed by the #DB stub under the user CR3), set a watchpoint and hit it 5 times
    # (lbr-watch: a user-mode #DB each with DR7 armed, re-armed by the stub with DR7 off around
    # its loads, under the user CR3 too) and make the kernel's IRET to user mode
    # fault (lbr-badiret: a kernel-mode #GP under the user CR3, which the stub must pass on
    # without touching lbr-dump's data). Then a kernel crash: its records equal the emulator's
    # freeze, and recording was on (the last #DB was re-armed).
    script = (
        # cminflt (/proc/PID/stat field 11): the page faults of the shell's waited-for children.
        "before=$(cut -d' ' -f11 /proc/$$/stat)\n"
        f"i=0; ok=0; segv=0; watch=0; while [ $i -lt {ROUNDS} ]; do\n"
        "  lbr-faults && ok=$((ok+1))\n"
        "  lbr-singlestep || true\n"
        "  w=0; lbr-watch || w=$?; [ $w = 5 ] && watch=$((watch+1))\n"
        "  st=0; lbr-badiret || st=$?; [ $st = 139 ] && segv=$((segv+1))\n"
        "  i=$((i+1))\n"
        "done 2>/dev/null\n"
        "after=$(cut -d' ' -f11 /proc/$$/stat)\n"
        "echo faults-ok=$ok minflt=$((after-before)) badiret-segv=$segv watch-ok=$watch\n"
        f"sh -c 'echo EXCEPTION > {LKDTM}' || true\n")
    res = boot(finish=False, name="pti-builtin-crash", kernel="builtin", cpu="Skylake-Client", accel="tcg",
               emulate="model=skylake", pti="on", append="lbr_dump=on", timeout=420, script=script)
    con = res.console
    assert_pti(con)
    assert kernel_lines(con, "lbr_dump: armed"), "lbr_dump=on did not arm under PTI:\n" + \
        "\n".join(kernel_lines(con, "lbr_dump"))
    m = re.search(r"faults-ok=(\d+) minflt=(\d+) badiret-segv=(\d+) watch-ok=(\d+)", con)
    assert m, "the user programs did not finish:\n" + tail(con)
    assert int(m[1]) == ROUNDS, f"lbr-faults failed in {ROUNDS - int(m[1])} of {ROUNDS} runs"
    assert int(m[2]) >= 2000, f"only {m[2]} page faults in the user programs"
    # Each lbr-badiret's return to user mode faulted in the kernel's IRET, under the user CR3,
    # and the kernel turned it into SIGSEGV (exit status 139): the stub passed it on.
    assert int(m[3]) == ROUNDS, f"lbr-badiret died of SIGSEGV in {m[3]} of {ROUNDS} runs"
    assert int(m[4]) == ROUNDS, f"lbr-watch's watchpoint trapped 5 times in {m[4]} of {ROUNDS} runs"
    events = res.emu_events()
    db = [i for i, e in enumerate(events) if e["event"] == "switch" and e["cause"] == "#DB" and not e["on"]]
    assert len(db) >= 6 * ROUNDS, \
        f"the emulator saw {len(db)} #DB clear recording, want >= {6 * ROUNDS} (a single-step, 5 hits a round)"
    # Every #DB's clear was followed by a switch back on (the re-arm) before the next #DB.
    for a, b in zip(db, db[1:] + [len(events)]):
        assert any(e["event"] == "switch" and e["on"] for e in events[a:b]), \
            f"recording not switched back on after the #DB at event {a}: {events[a]}"
    heads = snapshot_heads(con)
    assert heads, "no snapshot printed:\n" + tail(con)
    head = heads[-1]
    assert " vector=14 " in head and "state=complete" in head, head
    block = con[con.rindex(head):]
    block = block[:block.index("lbr_dump: end ")]
    printed = printed_records(block)
    assert_equals_freeze(events, head, printed)
    assert re.match(r"lbr_dump_stub_14\+0x0/", printed[0]["to_sym"]), printed[0]


def test_builtin_sysrq_c_under_pti_captures_both_cpus(r):
    # The users' CI case under PTI: the built-in kernel armed at boot, 2 vCPUs, sysrq-c. The
    # panicking CPU's snapshot (panic() entry) and the other CPU's, stopped by the stop IPI or NMI
    # through the stop stubs, which are entry text going on to asm_sysvec_reboot / asm_exc_nmi.
    # An interrupt reaching panic() before the freeze (TCG makes it common) is run again, as in
    # panic.py.
    for attempt in range(1, panic.ATTEMPTS + 1):
        res = boot(finish=False, name=f"pti-builtin-sysrq-c{'' if attempt == 1 else f'-again{attempt}'}",
                   kernel="builtin", cpu="Skylake-Client", accel="tcg", emulate="model=skylake", pti="on",
                   smp=2, append="lbr_dump=on", timeout=300, script="echo c > /proc/sysrq-trigger\n")
        con = res.console
        assert_pti(con)
        assert "lbr_dump: armed" in con and "panic path on" in con, "\n".join(kernel_lines(con, "lbr_dump"))
        assert "Kernel panic - not syncing: sysrq triggered crash" in con, tail(con)
        snaps = panic.snapshots(con)
        panics = [s for s in snaps if s["vector"] == panic.PANIC]
        assert len(panics) == 1, "\n".join(s["line"] for s in snaps)
        if not panic.interrupted(panics[0]["records"]) or attempt == panic.ATTEMPTS:
            break
    panic.check_panic_snapshot(res, panics[0], "sysrq_handle_crash")
    panic.check_stopped(res, snaps, [1 - panics[0]["cpu"]])
