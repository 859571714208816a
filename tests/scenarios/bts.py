# SPDX-License-Identifier: GPL-2.0
"""The branch trace store (BTS) beside the LBR: `bts=` arming, the debug store's ownership,
refusals, disarming, and captures compared with what the emulator stored.

The guest is an emulated Skylake (tools/lbr-emu: legacy LBR format 5 and BTS with DS-CPL). What
a CPU's IA32_DS_AREA and IA32_DEBUGCTL hold is read by tests/modules/lbr_crash (crash=msrs),
not by lbr_dump; another owner of the debug store is played by lbr_crash crash=ds_owner (perf's
way: IA32_DS_AREA pointed at its own debug store)."""

import json
import re

from harness import (CFG, CRASH, LKDTM, MODULE, PTI_ON, SYM, SYSFS, assert_clean, boot, decode, in_root, kdump,
                     kernel_lines, kexec, symbols)
from vm import kernel_dir

EMU = "model=skylake"
# IA32_DEBUGCTL: LBR (bit 0), TR (6), BTS (7), BTINT (8), BTS_OFF_OS (9), BTS_OFF_USR (10).
LBR, TR, BTS, BTINT, OFF_OS, OFF_USR = 1, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10


def msrs(console, tag):
    """{cpu: (ds_area, debugctl)} from the `msrs:` lines between `==tag==` and the next `==`."""
    part = console.split(f"=={tag}==", 1)[1].split("==", 1)[0]
    return {int(c): (int(d, 16), int(g, 16))
            for c, d, g in re.findall(r"lbr_crash: msrs: cpu=(\d+) ds_area=(0x[0-9a-f]+) debugctl=(0x[0-9a-f]+)", part)}


MSRS = f"insmod {CRASH} crash=msrs && rmmod lbr_crash"


def test_arming_takes_the_debug_store_and_disarming_gives_it_back(r):
    # 2 vCPUs. Before arming: no debug store, no BTS. Armed with bts=1024 (kernel branches): each
    # CPU's IA32_DS_AREA points at its own debug store, DEBUGCTL has LBR, TR, BTS and
    # BTS_OFF_USR, and BTINT and BTS_OFF_OS clear (circular, kernel stored). Disarmed: both
    # MSRs as before on every CPU. Two load/arm/disarm/arm/unload cycles of 2 CPUs x 4 x 1 MiB
    # leave the free memory where it was (a leak of one arming's buffers would be 8 MiB: each
    # cycle arms twice, so a leak shows as 32 MiB).
    vm = boot(name="bts-disarm", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=600, script=f"""
echo ==before== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
insmod {MODULE} bts=1024 enable=1
echo ==armed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
echo 0 > {SYSFS}/enabled
echo ==disarmed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
rmmod lbr_dump
grep MemAvailable /proc/meminfo | sed 's/^/mem-start /'
i=0
while [ $i -lt 2 ]; do
  insmod {MODULE} bts=1024 enable=1 && echo 0 > {SYSFS}/enabled && echo 1 > {SYSFS}/enabled && rmmod lbr_dump
  i=$((i+1))
done
grep MemAvailable /proc/meminfo | sed 's/^/mem-end /'
echo ==unloaded== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
""")
    con = vm.console
    before, armed, disarmed, unloaded = (msrs(con, t) for t in ("before", "armed", "disarmed", "unloaded"))
    assert sorted(before) == [0, 1], f"msrs of {sorted(before)} CPUs, not 2"
    assert all(ds == 0 and ctl & (TR | BTS) == 0 for ds, ctl in before.values()), before
    lines = kernel_lines(con, "lbr_dump: armed")
    assert len(lines) == 5 and all("branch trace store: 4 buffers of 1024 KiB (43690 records) per CPU (8 MiB for 2 CPUs), kernel branches"
                                   in l for l in lines), lines[:1]
    dss = set()
    for cpu, (ds, ctl) in armed.items():
        assert ds >> 63 and ds not in dss, f"CPU {cpu}: IA32_DS_AREA {ds:#x} is not a debug store of its own"
        dss.add(ds)
        on, off = LBR | TR | BTS | OFF_USR, BTINT | OFF_OS
        assert ctl & on == on and ctl & off == 0, f"CPU {cpu}: DEBUGCTL {ctl:#x} armed"
    assert disarmed == before and unloaded == before, f"after disarming {disarmed}, unloading {unloaded}, before {before}"
    start = int(re.search(r"mem-start MemAvailable:\s+(\d+) kB", con)[1])
    end = int(re.search(r"mem-end MemAvailable:\s+(\d+) kB", con)[1])
    assert start - end < 3 * 1024, f"MemAvailable {start} kB before two cycles, {end} kB after"
    assert_clean(con)


def test_another_owners_debug_store_refuses_arming(r):
    # lbr_crash plays perf with a debug store of its own on every CPU: arming with bts= is
    # refused with the reason and the value found, and changes nothing (IA32_DS_AREA stays the
    # other owner's, as lbr_crash finds when it gives it back); once it is given back, arming
    # works.
    vm = boot(name="bts-owner", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=300, script=f"""
insmod {CRASH} crash=ds_owner
insmod {MODULE} bts=4 enable=1 || echo refused=$?
rmmod lbr_crash
echo ==after== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
insmod {MODULE} bts=4 enable=1 && echo armed-now
""")
    con = vm.console
    assert "refused=" in con, "arming with another owner's debug store was not refused"
    owner = int(re.search(r"lbr_crash's debug store \(CPU 0: ([0-9a-f]+)\)", con)[1], 16)
    why = kernel_lines(con, "lbr_dump: CPU 0: IA32_DS_AREA is")
    assert why and f"IA32_DS_AREA is {owner:#x}: another owner has the debug store" in why[0], why
    assert "lbr_crash: ds_owner: IA32_DS_AREA given back" in con
    assert all(ds == 0 for ds, _ in msrs(con, "after").values()), "the debug store was not left to its owner"
    assert "armed-now" in con and "branch trace store" in kernel_lines(con, "lbr_dump: armed")[0]
    assert_clean(con)


def test_another_owner_taking_the_debug_store_is_reported(r):
    # Armed with BTS, then another owner points IA32_DS_AREA at its own debug store (perf
    # starting a BTS or PEBS session) and the kernel crashes (#GP): the snapshot's BTS line says
    # the debug store was foreign, with the value found, and keeps nothing.
    vm = boot(finish=False, name="bts-taken", cpu="Skylake-Client", accel="tcg", emulate=EMU, timeout=300,
              script=f"insmod {MODULE} bts=4 enable=1\ninsmod {CRASH} crash=ds_take\n")
    con = vm.console
    owner = int(re.search(r"lbr_crash's debug store \(CPU 0: ([0-9a-f]+)\)", con)[1], 16)
    heads = kernel_lines(con, "lbr_dump: bts cpu=0")
    assert heads and heads[-1].endswith(f"state=foreign ds_area={owner:#018x}"), heads
    assert not kernel_lines(con, "lbr_dump: bts #"), "records printed from a foreign debug store"


def assert_perf_kept_its_store(con):
    """After lbr_crash crash=perf_reserve or perf_mid_arm (perf reserving the debug store, then
    lbr_crash taking it as perf does) and its rmmod (`==taken==`), then a disarm
    (`==disarmed==`): lbr-dump said once that BTS is off; at the rmmod, every CPU had
    lbr_crash's debug store in IA32_DS_AREA and DEBUGCTL with the LBR and without TR|BTS, and no
    BTS record had landed in lbr_crash's buffers; disarming left what lbr_crash had found and
    given back (perf's debug store, or 0)."""
    assert "lbr_crash: perf_reserve: reserve_ds_buffers() called" in con, "\n".join(kernel_lines(con, "lbr_crash"))
    warn = kernel_lines(con, "lbr_dump: perf is reserving the debug store")
    assert len(warn) == 1 and "BTS is switched off on every CPU" in warn[0], warn
    owner = int(re.search(r"lbr_crash's debug store \(CPU 0: ([0-9a-f]+)\)", con)[1], 16)
    taken = msrs(con, "taken")
    assert sorted(taken) == [0, 1], taken
    for cpu, (ds, ctl) in taken.items():
        assert ds >> 63 and ds >= owner, f"CPU {cpu}: IA32_DS_AREA {ds:#x} is not lbr_crash's (its CPU 0 store: {owner:#x})"
        assert ctl & (TR | BTS) == 0 and ctl & LBR, f"CPU {cpu}: DEBUGCTL {ctl:#x} after perf reserved the debug store"
    stored = re.search(r"lbr_crash: ds_owner: IA32_DS_AREA given back, (\d+) BTS records were stored", con)
    assert stored and stored[1] == "0", f"BTS stored into the other owner's buffers: {stored and stored[0]}"
    found = {int(c): int(v, 16) for c, v in re.findall(r"lbr_crash: ds_owner: cpu=(\d+) found ds_area=(0x[0-9a-f]+)", con)}
    assert sorted(found) == [0, 1], found
    for cpu, (ds, ctl) in msrs(con, "disarmed").items():
        assert ds == found[cpu] and ctl & (LBR | TR | BTS) == 0, f"CPU {cpu} after disarming: {ds:#x} {ctl:#x}"


def test_bts_needs_the_panic_trampoline_at_crash_kexec(r):
    # An oops that goes to kdump calls crash_kexec() from oops_end() before any panic(), and
    # reaches machine_kexec() without a panic() entry: only the panic trampoline at crash_kexec()
    # switches BTS off there (its first branch under the kexec page tables would store a record
    # into lbr-dump's unmapped buffer: a triple fault). The kernel's fault injection
    # (fail_function) makes that attach fail: arming with bts= is refused with the reason and
    # nothing armed; without the injection the same module arms with BTS; without bts= it arms
    # and says what is missing.
    vm = boot(name="bts-no-kexec", cpu="Skylake-Client", accel="tcg", emulate=EMU, timeout=300, script=f"""
F=/sys/kernel/debug/fail_function
inject() {{
	echo lbr_dump_filter_crash_kexec > $F/inject
	printf '%#x\\n' -22 > $F/lbr_dump_filter_crash_kexec/retval
	echo 100 > $F/probability; echo -1 > $F/times; echo 0 > $F/verbose
}}
insmod {MODULE} bts=4
inject
echo 1 > {SYSFS}/enabled || echo "==refused $?=="
echo "==enabled $(cat {SYSFS}/enabled)=="
echo '!lbr_dump_filter_crash_kexec' > $F/inject
echo 1 > {SYSFS}/enabled
echo "==enabled $(cat {SYSFS}/enabled)=="
rmmod lbr_dump
insmod {MODULE}
inject
echo 1 > {SYSFS}/enabled
echo "==enabled $(cat {SYSFS}/enabled)=="
echo '!lbr_dump_filter_crash_kexec' > $F/inject
rmmod lbr_dump
""")
    con = vm.console
    assert "==refused 1==" in con and con.count("==enabled 0==") == 1, "\n".join(kernel_lines(con, "lbr_dump"))
    assert con.count("==enabled 1==") == 2, con
    warn = kernel_lines(con, "lbr_dump: panic path: cannot attach to crash_kexec()")
    assert len(warn) == 2, "\n".join(kernel_lines(con, "lbr_dump"))
    refusal = kernel_lines(con, "lbr_dump: refusing to arm: bts:")
    assert len(refusal) == 1 and "panic path is not complete" in refusal[0], refusal
    armed = kernel_lines(con, "lbr_dump: armed:")
    assert len(armed) == 2, armed
    assert "panic path on, " in armed[0] and "branch trace store" in armed[0], armed[0]
    assert "panic path on (not at crash_kexec())" in armed[1], armed[1]
    assert_clean(con)


def test_perf_reserving_the_debug_store_switches_bts_off(r):
    # Armed with BTS on 2 vCPUs, then perf reserves the debug store for its first hardware event
    # (played by lbr_crash crash=perf_reserve: perf's own reserve_ds_buffers() called, then
    # IA32_DS_AREA pointed at a debug store of lbr_crash's on every CPU, as its
    # init_debug_store_on_cpu() does). lbr-dump must switch TR and BTS off on every CPU first and
    # give its debug store back (else BTS stores into perf's buffer, and into freed memory once
    # perf releases it): no BTS record lands in lbr_crash's buffers while the CPUs run, DEBUGCTL
    # keeps the LBR, a #DB re-arm (single-step) brings the LBR back without BTS (lbr_crash prints
    # both MSRs as it gives its debug store back), and disarming switches the LBR off.
    vm = boot(name="bts-perf", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=300, script=f"""
insmod {MODULE} bts=4 enable=1
addr=$(grep -w reserve_ds_buffers /proc/kallsyms | cut -d' ' -f1)
insmod {CRASH} crash=perf_reserve target=0x$addr
(while :; do :; done) & ls -R /sys >/dev/null; lbr-singlestep || true; ls -R /sys >/dev/null
kill %1
echo ==taken== >/dev/kmsg; rmmod lbr_crash; echo == >/dev/kmsg
echo 0 > {SYSFS}/enabled
echo ==disarmed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
""")
    con = vm.console
    assert_perf_kept_its_store(con)
    events = vm.emu_events()
    for cpu in (0, 1):
        bts = [e for e in events if e["event"] == "switch" and e.get("recorder") == "bts" and e["cpu"] == cpu]
        assert bts and not bts[-1]["on"], f"CPU {cpu}: BTS on at the end: {bts[-1:]}"
    assert_clean(con)


def test_a_thaw_after_a_lost_nmi_never_switches_bts_back_on(r):
    # nmi_freeze=1 with BTS: an NMI whose entry froze the recorder but that never reached
    # lbr-dump's NMI handler (late microcode loading's rendezvous, an emergency handler) left the
    # value to thaw to with TR|BTS. Perf then takes the debug store (BTS gone for good), and the
    # next NMI's thaw must not switch BTS back on under perf's IA32_DS_AREA (a fault storm on
    # real hardware). Played by lbr_crash crash=nmi_lost on CPU 1 (see lbr_crash.c): no BTS
    # record lands in the other owner's buffers and DEBUGCTL has the LBR alone after the thaw.
    vm = boot(name="bts-nmi-lost", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=300, script=f"""
{SYM}insmod {MODULE} bts=4 nmi_freeze=1 enable=1
insmod {CRASH} crash=nmi_lost target=0x$(sym reserve_ds_buffers) handler=0x$(sym lbr_dump_nmi)
ls -R /sys >/dev/null
echo ==taken== >/dev/kmsg; rmmod lbr_crash; echo == >/dev/kmsg
echo 0 > {SYSFS}/enabled
echo ==disarmed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
""")
    con = vm.console
    steps = dict(re.findall(r"lbr_crash: nmi_lost: (.+?): cpu=1 debugctl=(0x[0-9a-f]+)", con))
    assert len(steps) == 4, "\n".join(kernel_lines(con, "lbr_crash"))
    before = int(steps["before"], 16)
    assert before & (LBR | TR | BTS) == LBR | TR | BTS, f"CPU 1 not armed with BTS: {before:#x}"
    # The stand-in did what it claims: the NMI's entry froze CPU 1, and nothing thawed it.
    lost = int(steps["after an NMI that did not reach lbr_dump's handler"], 16)
    assert lost & (LBR | TR | BTS) == 0, f"CPU 1 not frozen by the lost NMI: {lost:#x}"
    thawed = int(steps["after an NMI that reached lbr_dump's handler"], 16)
    assert thawed & LBR and thawed & (TR | BTS) == 0, f"CPU 1 after the thaw: DEBUGCTL {thawed:#x}"
    assert_perf_kept_its_store(con)
    # sysrq-l prints CPU 1's NMI backtrace (a Call Trace): only warnings and oopses count.
    assert con.count("NMI backtrace for cpu 1") == 2, "\n".join(kernel_lines(con, "NMI backtrace"))
    bad = [l for l in con.splitlines() if re.search(r"WARNING: CPU:|\[ cut here \]|BUG:|Oops:|general protection", l)]
    assert not bad, bad


def test_perf_reserving_while_a_cpu_arms_keeps_perfs_debug_store(r):
    # The race of the test above at its worst moment: lbr-dump arming CPU 1 has looked at its
    # IA32_DS_AREA (0: free) when perf's IPIs come, first lbr-dump's own ftrace callback at
    # reserve_ds_buffers() (BTS off everywhere), then perf's write of IA32_DS_AREA (played by
    # lbr_crash crash=perf_mid_arm: it holds CPU 1's hotplug thread at its next MSR call or
    # cross-CPU call after that read, interrupts on, while a thread on CPU 0 does what
    # crash=perf_reserve does). What lbr-dump does next must not put its debug store over the
    # other owner's, nor switch BTS on: both CPUs keep lbr_crash's debug store and no BTS record
    # lands in it; disarming gives back what lbr_crash found and leaves no BTS on.
    vm = boot(name="bts-perf-mid", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=300, script=f"""
insmod {MODULE} bts=4
addr=$(grep -w reserve_ds_buffers /proc/kallsyms | cut -d' ' -f1)
insmod {CRASH} crash=perf_mid_arm target=0x$addr
echo 1 > {SYSFS}/enabled; echo "enable exit $?"
(while :; do :; done) & LOOP=$!; ls -R /sys >/dev/null; kill $LOOP; wait
echo ==taken== >/dev/kmsg; rmmod lbr_crash; echo == >/dev/kmsg
echo 0 > {SYSFS}/enabled
echo ==disarmed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
""")
    con = vm.console
    held = kernel_lines(con, "lbr_crash: perf_mid_arm: CPU 1 read IA32_DS_AREA for arming")
    assert len(held) == 1 and "perf had reserved and taken the debug store" in held[0], \
        "\n".join(kernel_lines(con, "lbr_crash"))
    assert_perf_kept_its_store(con)
    # CPU 0 was armed with BTS before perf came (on, then off); CPU 1 never had BTS on.
    events = vm.emu_events()
    bts = {cpu: [e["on"] for e in events if e["event"] == "switch" and e.get("recorder") == "bts" and e["cpu"] == cpu]
           for cpu in (0, 1)}
    assert True in bts[0] and not bts[0][-1], f"CPU 0: BTS switches {bts[0]}"
    assert True not in bts[1], f"CPU 1: BTS switched on under perf's debug store: {bts[1]}"
    assert_clean(con)


def test_perf_reservation_begun_before_arming_switches_bts_off(r):
    # A perf reservation that had passed the entry of reserve_ds_buffers() before lbr-dump
    # watched it (it allocates the buffers first, then points each CPU's IA32_DS_AREA at its
    # debug store with wrmsrq_on_cpu(), init_debug_store_on_cpu() inlined). Played by lbr_crash:
    # perf_prepare before arming (perf's debug store allocated, IA32_DS_AREA still 0),
    # perf_tail while armed (the wrmsrq_on_cpu() calls, with perf_prepare's debug stores). BTS must be off on every CPU before perf's debug store is
    # in place: perf's BTS buffers receive no record, and DEBUGCTL keeps the LBR alone.
    vm = boot(name="bts-perf-tail", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=300, script=f"""
{SYM}insmod {CRASH} crash=perf_prepare target=0x$(sym reserve_ds_buffers) fini=0x$(sym fini_debug_store_on_cpu) && rmmod lbr_crash
insmod {MODULE} bts=4 enable=1
echo ==armed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
ds=$(dmesg | sed -n 's/.*lbr_crash: perf_prepare: cpu=[0-9]* ds_area=\\(0x[0-9a-f]*\\).*/\\1/p' | tr '\\n' ',')
insmod {CRASH} crash=perf_tail text=${{ds%,}} && rmmod lbr_crash
echo 0 > {SYSFS}/enabled
echo ==disarmed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
""")
    con = vm.console
    assert "lbr_crash: perf_prepare: reserve_ds_buffers() and fini_debug_store_on_cpu() called" in con, \
        "\n".join(kernel_lines(con, "lbr_crash"))
    armed = msrs(con, "armed")
    assert sorted(armed) == [0, 1] and all(ctl & (TR | BTS) == TR | BTS for _, ctl in armed.values()), armed
    perf = {int(c): int(d, 16) for c, d in re.findall(r"lbr_crash: perf_prepare: cpu=(\d+) ds_area=(0x[0-9a-f]+)", con)}
    assert sorted(perf) == [0, 1] and all(perf.values()), f"perf's debug stores: {perf}"
    tail = {int(c): (int(d, 16), int(g, 16), int(n)) for c, d, g, n in re.findall(
        r"lbr_crash: perf_tail: cpu=(\d+) ds_area=(0x[0-9a-f]+) debugctl=(0x[0-9a-f]+) stored=(\d+)", con)}
    assert sorted(tail) == [0, 1], tail
    for cpu, (ds, ctl, stored) in tail.items():
        assert ds == perf[cpu], f"CPU {cpu}: IA32_DS_AREA {ds:#x} is not perf's ({perf[cpu]:#x})"
        assert ctl & LBR and not ctl & (TR | BTS), f"CPU {cpu}: DEBUGCTL {ctl:#x} under perf's debug store"
        assert stored == 0, f"CPU {cpu}: {stored} BTS records stored into perf's buffer"
    warn = kernel_lines(con, "lbr_dump: perf is reserving the debug store")
    assert len(warn) == 1, warn
    for cpu, (ds, ctl) in msrs(con, "disarmed").items():
        assert ds == tail[cpu][0] and ctl & (LBR | TR | BTS) == 0, f"CPU {cpu} after disarming: {ds:#x} {ctl:#x}"
    assert_clean(con)


def test_reserve_ds_buffers_writes_through_wrmsrq_on_cpu(r):
    # What perf_reservation_begun_before_arming_switches_bts_off plays (and lbr-dump's callback
    # at wrmsrq_on_cpu() relies on) is what the test kernel's compiled reserve_ds_buffers() does:
    # it writes IA32_DS_AREA (0x600) through wrmsrq_on_cpu(), directly (clang inlines
    # init_debug_store_on_cpu()) or through init_debug_store_on_cpu(), which calls it.
    vmlinux = kernel_dir("module") / "vmlinux"
    syms = sorted((int(a, 16), n) for a, t, n in (l.split()[:3] for l in
                  (kernel_dir("module") / "System.map").read_text().splitlines()) if t in "tT")

    def body(name):
        i = next(i for i, (_, n) in enumerate(syms) if n == name)
        end = next(a for a, _ in syms[i + 1:] if a > syms[i][0])
        return in_root("objdump", "-d", "--no-show-raw-insn", f"--start-address={syms[i][0]:#x}",
                       f"--stop-address={end:#x}", vmlinux)

    calls = re.findall(r"call\s+[0-9a-f]+ <(\w+)>", body("reserve_ds_buffers"))
    assert "wrmsrq_on_cpu" in calls or "init_debug_store_on_cpu" in calls, \
        f"reserve_ds_buffers() calls neither wrmsrq_on_cpu() nor init_debug_store_on_cpu(): {sorted(set(calls))}"
    # The function that calls wrmsrq_on_cpu() names the MSR: reserve_ds_buffers() when clang
    # inlines init_debug_store_on_cpu() (as it did before UBSAN_BOUNDS), that one otherwise.
    writer = "reserve_ds_buffers"
    if "init_debug_store_on_cpu" in calls:
        writer = "init_debug_store_on_cpu"
        init = body(writer)
        assert re.search(r"(call|jmp)\s+[0-9a-f]+ <wrmsrq_on_cpu>", init), init
    assert "$0x600" in body(writer), f"{writer}() names no MSR 0x600 (IA32_DS_AREA)"


def test_cpu_hotplug_while_armed_with_bts(r):
    # 2 vCPUs armed with BTS. CPU 1 offline: gone from the MSR listing; online again: its
    # IA32_DS_AREA is lbr-dump's debug store again (the same as at arming) and DEBUGCTL has TR
    # and BTS. Then another owner (lbr_crash crash=ds_owner, playing perf) points every CPU's
    # IA32_DS_AREA at its own debug store; CPU 1 offline leaves that alone and switches BTS off;
    # online again, CPU 1 records the LBR without BTS and says why in one line, and the other
    # owner's debug store is still in place. Disarming: DEBUGCTL without LBR, TR and BTS.
    vm = boot(name="bts-hotplug", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=300, script=f"""
insmod {MODULE} bts=4 enable=1
echo ==armed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
echo 0 > /sys/devices/system/cpu/cpu1/online
echo ==offline== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
echo 1 > /sys/devices/system/cpu/cpu1/online
echo ==online== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
insmod {CRASH} crash=ds_owner
echo 0 > /sys/devices/system/cpu/cpu1/online
echo 1 > /sys/devices/system/cpu/cpu1/online
echo ==owner== >/dev/kmsg; rmmod lbr_crash; echo == >/dev/kmsg
echo 0 > {SYSFS}/enabled
echo ==disarmed== >/dev/kmsg; {MSRS}; echo == >/dev/kmsg
""")
    con = vm.console
    armed, offline, online, owner_msrs = (msrs(con, t) for t in ("armed", "offline", "online", "owner"))
    assert sorted(armed) == [0, 1] and sorted(offline) == [0] and sorted(online) == [0, 1], (armed, offline, online)
    ds1, ctl1 = armed[1]
    assert ds1 >> 63 and ctl1 & (TR | BTS | LBR) == TR | BTS | LBR, f"CPU 1 armed: {ds1:#x} {ctl1:#x}"
    assert online[1] == armed[1], f"CPU 1 online again: {online[1][0]:#x} {online[1][1]:#x}, armed: {ds1:#x} {ctl1:#x}"
    owner = int(re.search(r"lbr_crash's debug store \(CPU 0: ([0-9a-f]+)\)", con)[1], 16)
    ds, ctl = owner_msrs[1]
    assert ds >= owner and ds != ds1, f"CPU 1: IA32_DS_AREA {ds:#x} is not lbr_crash's"
    assert ctl & LBR and not ctl & (TR | BTS), f"CPU 1: DEBUGCTL {ctl:#x} under another owner's debug store"
    why = kernel_lines(con, "lbr_dump: CPU 1: IA32_DS_AREA is")
    assert len(why) == 1 and f"IA32_DS_AREA is {ds:#x}: another owner has the debug store" in why[0] \
        and why[0].endswith("BTS stays off on this CPU"), why
    for cpu, (ds, ctl) in msrs(con, "disarmed").items():
        assert ctl & (LBR | TR | BTS) == 0, f"CPU {cpu} after disarming: DEBUGCTL {ctl:#x}"
    assert_clean(con)


def test_page_table_isolation_refuses_bts(r):
    # Built in, pti=on: BTS is refused with the reason (the hardware writes the buffer through
    # the page tables of the moment, and the entry code branches at CPL 0 under the user CR3), and
    # bts_user=0 (the default) is said not to lift it. Nothing is armed.
    vm = boot(name="bts-pti", kernel="builtin", cpu="Skylake-Client", accel="tcg", emulate=EMU, pti="on",
              append="lbr_dump=on lbr_dump.bts=4", timeout=300, script="echo booted\n")
    con = vm.console
    assert PTI_ON in con, "page-table isolation is not on in the guest"
    why = kernel_lines(con, "lbr_dump: refusing to arm: bts: page-table isolation is active")
    assert why and "under the user CR3" in why[0] and "bts_user=0 does not lift this" in why[0], why
    assert not kernel_lines(con, "lbr_dump: armed"), "armed with BTS under page-table isolation"


# --- Captures against the emulator's ground truth -------------------------------------------
# The emulator (option bts_recent=N) keeps, per vCPU and apart from guest memory, the last N BTS
# records it stored, and logs them with every freeze that stops BTS: the oracle for what a kept
# buffer holds.

HEAD = re.compile(r"lbr_dump: bts cpu=(\d+) seq=(\d+) records=(\d+) shown=(\d+) wrapped=(yes|no) "
                  r"buffer=(0x[0-9a-f]+) size=(\d+) state=kept")
LINE = re.compile(r"lbr_dump: bts #(\d+) (0x[0-9a-f]+) -> (0x[0-9a-f]+)")


def bts_block(console, cpu, seq):
    """The BTS head fields and the printed records (newest first) of snapshot cpu/seq."""
    m = next((m for m in HEAD.finditer(console) if (int(m[1]), int(m[2])) == (cpu, seq)), None)
    assert m, f"no BTS head line for cpu={cpu} seq={seq}:\n" + "\n".join(kernel_lines(console, "lbr_dump: bts cpu"))
    rest = console[m.end():]
    rest = rest[:rest.index("lbr_dump: end ")]
    recs = [(int(i), int(f, 16), int(t, 16)) for i, f, t in LINE.findall(rest)]
    assert [i for i, _, _ in recs] == list(range(len(recs))), "BTS record lines out of order"
    head = {"records": int(m[3]), "shown": int(m[4]), "wrapped": m[5] == "yes", "buffer": int(m[6], 16),
            "size": int(m[7])}
    return head, [(f, t) for _, f, t in recs]


def recent(freeze):
    """The emulator's newest stored BTS records at `freeze`, newest first, as (from, to)."""
    return [(int(r[0], 16), int(r[1], 16)) for r in reversed(freeze["bts"]["recent"])]


def assert_bts_equals_stored(events, console, cpu, seq, size_kib):
    """The snapshot's printed BTS records and counts are what the emulator stored into the buffer
    the capture kept: the freeze on `cpu` whose newest stored record is the printed newest one.
    Returns (head, printed, that freeze's newest-first records)."""
    head, printed = bts_block(console, cpu, seq)
    assert printed, f"cpu={cpu} seq={seq}: no BTS record printed"
    freezes = [e for e in events if e["event"] == "freeze" and e["cpu"] == cpu and e.get("bts")
               and e["bts"].get("recent")]
    match = [e for e in freezes if recent(e)[0] == printed[0]]
    assert match, (f"cpu {cpu}: no BTS freeze in the emulator's log has the printed newest record "
                   f"{printed[0][0]:#x} -> {printed[0][1]:#x}")
    fr = match[-1]
    stored = recent(fr)
    b = fr["bts"]
    capacity = size_kib * 1024 // 24
    base, index = int(b["base"], 16), int(b["index"], 16)
    # The kept buffer is the one in the debug store at the freeze: where it was, and how full.
    assert head["buffer"] == base and head["size"] == capacity * 24, (head, b)
    # Since arming (the period's start) it filled and wrapped, or it holds index - base.
    want = capacity if b["wraps"] > 0 else (index - base) // 24
    assert head["wrapped"] == (b["wraps"] > 0) and head["records"] == want, (head, b["wraps"], want)
    assert len(stored) >= head["shown"], f"the emulator kept {len(stored)} records, {head['shown']} printed"
    assert printed == stored[:head["shown"]], (
        f"cpu {cpu}: the printed BTS records are not the newest stored ones; first difference at #"
        f"{next(i for i, (p, s) in enumerate(zip(printed, stored)) if p != s)}")
    return head, printed, stored


def assert_dump_bts_equals_stored(vm, cpu, seq, head, printed, stored):
    """lbr-decode reads from the VM's memory dump every record of the buffer snapshot cpu/seq
    kept, newest first: all equal what the emulator stored, the newest `shown` what the log
    printed."""
    assert len(stored) >= head["records"], f"the emulator kept {len(stored)} records, the buffer holds {head['records']}"
    assert vm.dump is not None, "no memory dump was made"
    code, out, err = decode(*symbols(), vm.dump)
    assert code == 0, err
    snaps = [s for s in json.loads(out)["snapshots"] if s["cpu"] == cpu and s["seq"] == seq]
    assert snaps and snaps[0].get("bts"), f"lbr-decode found no BTS history for cpu={cpu} seq={seq} in the dump"
    b = snaps[0]["bts"]
    assert (b["state"], b["total"], b["wrapped"]) == ("kept", head["records"], head["wrapped"]), b | {"records": "..."}
    got = [(int(x["from"]["addr"], 16), int(x["to"]["addr"], 16)) for x in b["records"]]
    assert len(got) == head["records"], f"{len(got)} records read from the dump, the buffer holds {head['records']}"
    first = next((i for i, (g, w) in enumerate(zip(got, stored)) if g != w), None)
    assert first is None, f"record #{first} read from the dump is {got[first]}, the emulator stored {stored[first]}"
    assert got[:head["shown"]] == printed


def test_exception_bts_records_are_the_newest_stored(r):
    # lkdtm EXCEPTION with bts=8 (341 records) and bts_print=400: every record of the kept
    # buffer is printed, newest first, and equals the emulator's; the newest is the exception
    # itself (the faulting instruction into the #PF stub: no record of lbr-dump's own).
    vm = boot(finish=False, name="bts-exception", cpu="Skylake-Client", accel="tcg", emulate=EMU + ",bts_recent=1024",
              timeout=300, script=f"insmod {MODULE} bts=8 bts_print=400 enable=1\n"
                                  f"echo EXCEPTION > {LKDTM}\n")
    con = vm.console
    m = re.search(r"lbr_dump: v2 cpu=(\d+) seq=(\d+) vector=14 .* rip=(0x[0-9a-f]+)", con)
    assert m, "no #PF snapshot printed"
    head, printed, _ = assert_bts_equals_stored(vm.emu_events(), con, int(m[1]), int(m[2]), 8)
    assert head["wrapped"] and head["records"] == 341 and head["shown"] == 341, head
    stub = int(re.search(r"#0 0x[0-9a-f]+ -> (0x[0-9a-f]+) \| from=\S+ to=lbr_dump_stub_14\+0x0/", con)[1], 16)
    assert printed[0] == (int(m[3], 16), stub), f"BTS #0 {printed[0]} is not the exception"
    assert not [e for e in vm.emu_events() if e["event"] in ("would-fault", "bts-misprogrammed", "bts-full")]


def test_corrupted_pointer_bts_names_the_caller(r):
    # lbr_crash crash=jump: a call through a corrupted pointer into unmapped kernel memory (RIP
    # is nowhere). The newest BTS record is the #PF on the fetch from that address, the one before
    # it the call that went there, from lbr_crash_jump. A QEMU memory dump after the oops: the
    # whole kept buffer (170 records) read from it equals what the emulator stored.
    vm = boot(finish=False, name="bts-jump", cpu="Skylake-Client", accel="tcg", emulate=EMU + ",bts_recent=256",
              timeout=300, dump_after="---[ end trace",
              script=f"insmod {MODULE} bts=4 enable=1\ninsmod {CRASH} crash=jump || true\nsleep 600\n")
    con = vm.console
    m = re.search(r"lbr_dump: v2 cpu=(\d+) seq=(\d+) vector=14 ", con)
    assert m, "no #PF snapshot printed"
    head, printed, stored = assert_bts_equals_stored(vm.emu_events(), con, int(m[1]), int(m[2]), 4)
    assert_dump_bts_equals_stored(vm, int(m[1]), int(m[2]), head, printed, stored)
    assert head["shown"] == 32, head
    assert printed[0][0] == 0xffff800000001000 and printed[1][1] == 0xffff800000001000, printed[:2]
    # Through the retpoline thunk: lbr_crash_jump -> thunk -> ... -> ret to the bad address.
    lines = kernel_lines(con, "lbr_dump: bts #")
    assert any(" | from=lbr_crash_jump+" in l for l in lines[1:6]), "no BTS record names lbr_crash_jump:\n" + "\n".join(lines[:6])


def test_sysrq_c_on_cpu1_two_cpus_1mib(r):
    # 2 vCPUs, bts=1024 (43,690 records per buffer), sysrq-c on CPU 1: the panicking CPU's
    # snapshot and the stopped CPU's each print their newest 32 BTS records, equal to what the
    # emulator stored on that CPU.
    vm = boot(finish=False, name="bts-sysrq", cpu="Skylake-Client", accel="tcg", emulate=EMU + ",bts_recent=256",
              smp=2, timeout=600, script=f"insmod {MODULE} bts=1024 enable=1\n"
                                         "taskset -c 1 sh -c 'echo c > /proc/sysrq-trigger'\n")
    con = vm.console
    events = vm.emu_events()
    panic = re.search(r"lbr_dump: v2 cpu=(\d+) seq=(\d+) vector=256 ", con)
    assert panic and panic[1] == "1", f"the panic was not captured on CPU 1: {kernel_lines(con, 'lbr_dump: v2')}"
    assert_bts_equals_stored(events, con, 1, int(panic[2]), 1024)
    stop = re.search(r"lbr_dump: v2 cpu=0 seq=(\d+) vector=(2|248) ", con)
    assert stop, f"CPU 0 was not captured as it stopped: {kernel_lines(con, 'lbr_dump: v2')}"
    assert_bts_equals_stored(events, con, 0, int(stop[1]), 1024)


def test_memory_dump_holds_the_whole_1mib_history_of_cpu1(r):
    # 2 vCPUs, bts=1024 (43,690 records per buffer): lkdtm EXCEPTION on CPU 1, then a QEMU
    # memory dump after the oops. The log prints the newest 32 BTS records; lbr-decode reads
    # every record of the buffer the capture kept from the dump (the snapshot area's table gives
    # its physical address), newest first: all of them equal what the emulator stored on CPU 1,
    # the newest 32 what the log printed.
    vm = boot(finish=False, name="bts-dump", cpu="Skylake-Client", accel="tcg", emulate=EMU + ",bts_recent=65536",
              smp=2, timeout=600, dump_after="---[ end trace",
              script=f"insmod {MODULE} bts=1024 enable=1\n"
                     f"taskset -c 1 sh -c 'echo EXCEPTION > {LKDTM}' || true\n"
                     "sleep 600\n")
    con = vm.console
    m = re.search(r"lbr_dump: v2 cpu=(\d+) seq=(\d+) vector=14 ", con)
    assert m and m[1] == "1", f"the #PF was not captured on CPU 1: {kernel_lines(con, 'lbr_dump: v2')}"
    seq = int(m[2])
    head, printed, stored = assert_bts_equals_stored(vm.emu_events(), con, 1, seq, 1024)
    assert_dump_bts_equals_stored(vm, 1, seq, head, printed, stored)


def test_kdump_with_bts_armed(r):
    # kdump, as fleets run it, with bts=64 on 2 vCPUs: sysrq-c, the capture kernel boots and saves
    # the vmcore. BTS must be off before kexec: the kexec code's page tables do not map lbr-dump's
    # debug store and buffers, and the capture kernel must not start with TR and BTS set (the
    # emulator reports a store it cannot make as would-fault, which boot() refuses). The
    # emulator's last BTS switch on each CPU is off. With kdump the panic kexecs before the
    # snapshots are printed: lbr-decode reads from the vmcore the whole kept history (2,730
    # records) of the panicking CPU and of the one the NMI shootdown stopped, each equal to what
    # the emulator stored on that CPU.
    res, disk = kdump("bts-kdump", "echo c > /proc/sysrq-trigger", arm="bts=64", smp=2, cpu="Skylake-Client",
                      accel="tcg", emulate=EMU + ",bts_recent=4096")
    events = res.emu_events()
    for cpu in (0, 1):
        last = [e for e in events if e["event"] == "switch" and e.get("recorder") == "bts" and e["cpu"] == cpu][-1:]
        assert last and not last[0]["on"], f"CPU {cpu}: BTS still on at the end: {last}"
    code, out, err = decode(*symbols(), disk)
    assert code == 0, err
    snaps = json.loads(out)["snapshots"]
    assert [s["vector"] for s in snaps if s["vector"] == 256] == [256], f"not one panic snapshot in the vmcore: {snaps}"
    # The panicking CPU's, and the other CPU's, stopped by the NMI shootdown.
    assert sorted(s["cpu"] for s in snaps) == [0, 1], [(s["cpu"], s["vector"]) for s in snaps]
    for p in snaps:
        b = p.get("bts")
        assert b, f"cpu {p['cpu']}: no BTS history in the vmcore"
        got = [(int(x["from"]["addr"], 16), int(x["to"]["addr"], 16)) for x in b["records"]]
        assert b["state"] == "kept" and got and len(got) == b["total"], b | {"records": len(got)}
        match = [e for e in events if e["event"] == "freeze" and e["cpu"] == p["cpu"] and e.get("bts")
                 and e["bts"].get("recent") and recent(e)[0] == got[0]]
        assert match, f"no BTS freeze on CPU {p['cpu']} has the vmcore's newest record {got[0][0]:#x} -> {got[0][1]:#x}"
        stored = recent(match[-1])
        wrapped = match[-1]["bts"]["wraps"] > 0
        assert b["wrapped"] == wrapped and (not wrapped or len(got) == 64 * 1024 // 24), (b["wrapped"], wrapped, len(got))
        first = next((i for i, (g, w) in enumerate(zip(got, stored)) if g != w), None)
        assert first is None, (f"cpu {p['cpu']}: record #{first} read from the vmcore is {got[first]}, the emulator "
                               f"stored {stored[first]}")


def test_kexec_e_switches_bts_off_on_every_cpu(r):
    # `kexec -e` (reboot(LINUX_REBOOT_CMD_KEXEC)) with bts=64 on 2 vCPUs, busy on both. x86 stops
    # the other CPU with an IPI after the syscore shutdown callbacks, without taking it offline
    # (no hotplug callback runs), and the next kernel's page tables do not map lbr-dump's debug
    # store: BTS must be off on every CPU before it (the emulator reports a store it cannot make
    # as would-fault, which boot() refuses). The emulator's last BTS switch on each CPU is off,
    # and the next kernel comes up on both CPUs and runs its script.
    res = kexec("bts-kexec", before="(while :; do :; done) & (while :; do ls /sys >/dev/null; done) &\nsleep 1",
                next_script="echo next-online=$(cat /sys/devices/system/cpu/online)\n", arm="bts=64",
                smp=2, cpu="Skylake-Client", accel="tcg", emulate=EMU)
    con = res.console
    armed = kernel_lines(con, "lbr_dump: armed")
    assert armed and "branch trace store" in armed[0], armed
    assert len(res.boots) == 2 and "next-online=0-1" in res.boots[1], "the next kernel did not bring both CPUs up"
    events = res.emu_events()
    for cpu in (0, 1):
        bts = [e for e in events if e["event"] == "switch" and e.get("recorder") == "bts" and e["cpu"] == cpu]
        assert bts and bts[0]["on"], f"CPU {cpu}: BTS was never switched on: {bts[:1]}"
        assert not bts[-1]["on"], f"CPU {cpu}: BTS still on when the next kernel started: {bts[-1]}"


def test_kdump_with_a_watchpoint_armed_switches_bts_off(r):
    # kdump with bts=64 on 2 vCPUs while hardware data breakpoints are armed on every CPU
    # (lbr_crash crash=watch, on words the stubs read): the NMI stop stub loads nothing of
    # lbr-dump's with DR7 set, so CPU 1, stopped by kdump's NMI shootdown, is not captured and
    # its stub does not switch BTS off. lbr-dump's callback at crash_nmi_callback() must: the
    # emulator's last BTS switch on each CPU is off, and no store would-fault.
    res, disk = kdump("bts-kdump-watch", CFG + f"insmod {CRASH} crash=watch capture_cfg=0x$cfg group=0\n"
                      "echo c > /proc/sysrq-trigger", arm="bts=64", smp=2, cpu="Skylake-Client",
                      accel="tcg", emulate=EMU)
    assert kernel_lines(res.console, "lbr_crash: watching"), "lbr_crash armed no breakpoint"
    events = res.emu_events()
    for cpu in (0, 1):
        bts = [e for e in events if e["event"] == "switch" and e.get("recorder") == "bts" and e["cpu"] == cpu]
        assert bts and bts[0]["on"], f"CPU {cpu}: BTS was never switched on: {bts[:1]}"
        assert not bts[-1]["on"], f"CPU {cpu}: BTS still on when the capture kernel started: {bts[-1]}"
