# SPDX-License-Identifier: GPL-2.0
"""The branch trace store (BTS) beside the LBR: `bts=` arming, the debug store's ownership,
refusals, disarming, and captures compared with what the emulator stored.

The guest is an emulated Skylake (tools/lbr-emu: legacy LBR format 5 and BTS with DS-CPL). What
a CPU's IA32_DS_AREA and IA32_DEBUGCTL hold is read by tests/modules/lbr_crash (crash=msrs),
not by lbr_dump; another owner of the debug store is played by lbr_crash crash=ds_owner (perf's
way: IA32_DS_AREA pointed at its own debug store)."""

import re

from harness import CRASH, MODULE, assert_clean, boot, kernel_lines

EMU = "model=skylake"
# IA32_DEBUGCTL: LBR (bit 0), TR (6), BTS (7), BTINT (8), BTS_OFF_OS (9), BTS_OFF_USR (10).
LBR, TR, BTS, BTINT, OFF_OS, OFF_USR = 1, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10
PTI_ON = "Kernel/User page tables isolation: enabled"


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
    # MSRs as before on every CPU. Five load/arm/unload cycles of 2 CPUs x 3 x 1 MiB leave the
    # free memory where it was (a leak of one cycle's buffers would be 6 MiB).
    vm = boot(name="bts-disarm", cpu="Skylake-Client", accel="tcg", emulate=EMU, smp=2, timeout=600, script=f"""
echo ==before==; {MSRS}; echo ==
insmod {MODULE} bts=1024 enable=1
echo ==armed==; {MSRS}; echo ==
echo 0 > /sys/kernel/lbr_dump/enabled
echo ==disarmed==; {MSRS}; echo ==
rmmod lbr_dump
grep MemAvailable /proc/meminfo | sed 's/^/mem-start /'
i=0
while [ $i -lt 5 ]; do
  insmod {MODULE} bts=1024 enable=1 && echo 0 > /sys/kernel/lbr_dump/enabled && echo 1 > /sys/kernel/lbr_dump/enabled && rmmod lbr_dump
  i=$((i+1))
done
grep MemAvailable /proc/meminfo | sed 's/^/mem-end /'
echo ==unloaded==; {MSRS}; echo ==
""")
    con = vm.console
    before, armed, disarmed, unloaded = (msrs(con, t) for t in ("before", "armed", "disarmed", "unloaded"))
    assert sorted(before) == [0, 1], f"msrs of {sorted(before)} CPUs, not 2"
    assert all(ds == 0 and ctl & (TR | BTS) == 0 for ds, ctl in before.values()), before
    lines = kernel_lines(con, "lbr_dump: armed")
    assert len(lines) == 11 and all("branch trace store: 3 buffers of 1024 KiB (43690 records) per CPU, kernel branches"
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
    assert start - end < 3 * 1024, f"MemAvailable {start} kB before five cycles, {end} kB after"
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
echo ==after==; {MSRS}; echo ==
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

