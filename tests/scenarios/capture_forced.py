# SPDX-License-Identifier: GPL-2.0
"""The capture path on plain QEMU TCG, armed with force=1.

Plain TCG has no usable recorder (its MSR writes are dropped), so the records are empty, but
everything else runs for real: the IDT gates point at the entry stubs, every exception of the
system goes through them, the stubs take snapshots, the die notifier finds the snapshot that
belongs to each oops, sysfs switches the hooks, and unloading restores the kernel's IDT. Checks of
the records themselves need the branch-record emulator (tests/scenarios/emulator.py).

EPYC-Genoa is used because its recorder (the AMD single record) has no format to probe; it has
SMAP. Expected values come from the crashes themselves (vector, error code of the fault kind),
from the kernel's own oops text, and from the IDT as read by tests/modules/lbr_crash, never from
lbr_dump's output."""

import re

from harness import CRASH, IDT, LKDTM, MODULE, SYSFS, assert_clean, boot, kernel_lines, snapshot_heads

ARM = f"insmod {MODULE} force=1 enable=1\n"


def headers(console):
    return [dict(re.findall(r"(\w+)=(\S+)", l)) | {"line": l}
            for l in snapshot_heads(console)]


def oops_blocks(console):
    """The kernel's oops reports, each from its 'Oops:' line to its end-of-trace line."""
    return re.findall(r"Oops: .*?---\[ end trace [0-9a-f]+ \]---", console, re.S)


def test_each_oops_prints_its_own_snapshot(r):
    crashes = [
        ("lkdtm EXCEPTION", f"echo EXCEPTION > {LKDTM}", "14", lambda h: h["cr2"] == "0x0" and h["error"] == "0x2"),
        ("lkdtm ACCESS_NULL", f"echo ACCESS_NULL > {LKDTM}", "14", lambda h: h["cr2"] == "0x0" and h["error"] == "0x0"),
        ("lkdtm EXEC_NULL", f"echo EXEC_NULL > {LKDTM}", "14", lambda h: h["rip"] == "0x0" and h["error"] == "0x10"),
        ("lkdtm BUG", f"echo BUG > {LKDTM}", "6", lambda h: h["error"] == "0x0"),
        ("#DE", f"insmod {CRASH} crash=de", "0", lambda h: True),
        ("#GP", f"insmod {CRASH} crash=gp", "13", lambda h: h["error"] == "0x0"),
        ("corrupted pointer", f"insmod {CRASH} crash=jump", "14",
         lambda h: h["rip"] == "0xffff800000001000" and h["cr2"] == "0xffff800000001000"),
    ]
    # One boot per crash: after an oops the killed task may hold locks, so later crashes in the
    # same boot would test the kernel's recovery rather than lbr-dump.
    for name, cmd, vector, check in crashes:
        vm = boot(name=f"forced-{vector}-{name.split()[-1].lower()}", cpu="EPYC-Genoa", accel="tcg",
                  script=ARM + f"sh -c '{cmd}' || true\n")
        blocks = oops_blocks(vm.console)
        assert len(blocks) == 1, f"{name}: {len(blocks)} oopses"
        hs = headers(blocks[0])
        assert len(hs) == 1, f"{name}: want one snapshot header in its oops, got {hs}"
        h = hs[0]
        assert h["vector"] == vector, f"{name}: {h['line']}"
        assert check(h), f"{name}: {h['line']}"
        assert h["state"] == "was-off" and h["records"] == "0", h["line"]  # plain TCG: no recorder
        assert f"lbr_dump: end cpu={h['cpu']} seq={h['seq']}" in blocks[0], f"{name}: no end line"


def test_double_fault_is_captured(r):
    # lkdtm EXHAUST_STACK overflows the stack into the guard page: #DF on its IST stack, then
    # panic, so the guest does not finish its script.
    res = boot(finish=False, name="forced-df", cpu="EPYC-Genoa", accel="tcg", timeout=120,
             script=ARM + f"echo EXHAUST_STACK > {LKDTM}\n")
    hs = headers(res.console)
    reset = res.log.parent / "qemu-reset.log"
    assert hs and hs[-1]["vector"] == "8", (
        f"no #DF snapshot printed (VM {'timed out' if res.timed_out else f'exited {res.exit_code}'} "
        f"after {res.seconds:.0f}s; CPU resets in {reset}):\n"
        + "\n".join(res.console.splitlines()[-40:])
        + ("\nlast CPU reset:\n" + "\n".join(reset.read_text().splitlines()[:12]) if reset.exists() else ""))


def test_warning_is_survived_and_not_reported_as_a_crash(r):
    vm = boot(name="forced-warning", cpu="EPYC-Genoa", accel="tcg", script=ARM + f"""
echo WARNING > {LKDTM}
echo "after-warning captures=$(cat {SYSFS}/captures)"
sh -c 'echo EXCEPTION > {LKDTM}' || true
""")
    assert re.search(r"WARNING: .*lkdtm_WARNING", vm.console), "lkdtm WARNING did not warn"
    m = re.search(r"after-warning captures=(\d+)", vm.console)
    assert m and int(m[1]) >= 1, "the warning's #UD was not captured"
    # The warning's report prints its #UD's snapshot (tests/scenarios/warn.py); the oops prints
    # the crash's #PF, a newer snapshot, not the warning's.
    hs = headers(vm.console)
    assert [h["vector"] for h in hs] == ["6", "14"], f"the warning's #UD, then the crash's #PF: {hs}"
    assert int(hs[1]["seq"]) > int(hs[0]["seq"]), "the crash's snapshot must be newer than the warning's"


def gates(console, tag):
    """{vector: handler} printed by lbr_crash crash=idt between 'tag' markers."""
    part = console.split(f"=={tag}==")[1]
    return dict(re.findall(r"lbr_crash: gate (\d+) ([0-9a-f]{16})", part.split("==")[0]))




def test_sysfs_enable_disable_and_bad_input(r):
    # Bad writes: each must fail and leave lbr-dump armed. (An empty write cannot be made from a
    # shell: `printf ''` issues no write(); it is checked to leave the state alone.)
    bad = {"2": "printf 2", "on-newline-newline": "printf 'on\\n\\n'", "junk-4k": "cat /tmp/junk"}
    writes = "".join(
        f"if {cmd} > {SYSFS}/enabled; then echo {name}=write-ok; else echo {name}=write-refused; fi\n"
        f"echo state=$(cat {SYSFS}/enabled)\n" for name, cmd in bad.items())
    vm = boot(name="forced-sysfs", cpu="EPYC-Genoa", accel="tcg", script=f"""
head -c 4096 /dev/zero | tr '\\0' x > /tmp/junk
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {MODULE} force=1
echo loaded=$(cat {SYSFS}/enabled)
echo 1 > {SYSFS}/enabled
echo ==armed== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
echo state=$(cat {SYSFS}/enabled)
{writes}
printf '' > {SYSFS}/enabled
echo state=$(cat {SYSFS}/enabled)
echo 0 > {SYSFS}/enabled
echo ==disarmed== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
echo final=$(cat {SYSFS}/enabled)
cat {SYSFS}/vectors
rmmod lbr_dump
""")
    for name in bad:
        assert f"{name}=write-refused" in vm.console, f"bad write {name} was accepted"
    assert "loaded=0" in vm.console and "final=0" in vm.console
    assert vm.console.count("state=1") == 2 + len(bad), "bad writes must leave the state armed"
    kernel, armed, disarmed = gates(vm.console, "kernel"), gates(vm.console, "armed"), gates(vm.console, "disarmed")
    assert len(kernel) == 13
    assert disarmed == kernel, f"IDT after disarming differs from the kernel's: {disarmed} vs {kernel}"
    # The panic path's gates (NMI, REBOOT_VECTOR) are the kernel's while armed: only a panic
    # switches them (tests/scenarios/panic.py).
    assert all(armed[v] == kernel[v] for v in ("2", "248")), (armed, kernel)
    stubs = re.findall(r"lbr_crash: gate (\d+) [0-9a-f]{16} (\S+)", vm.console.split("==armed==")[1].split("==")[0])
    want = lambda v: "lbr_dump_rearm_1" if v == "1" else f"lbr_dump_stub_{v}"  # noqa: E731
    hooked = [(v, sym) for v, sym in stubs if v not in ("2", "248")]
    # The nine vectors and #BP, for the report functions' int3s (the reports parameter).
    assert all(sym == want(v) for v, sym in hooked) and len(hooked) == 11, stubs
    assert_clean(vm.console)


def test_user_and_uaccess_faults_are_not_captured_with_smap(r):
    # Every exec and first touch of a page is a user-mode #PF; dd's read() into a fresh buffer
    # faults inside copy_to_user (a kernel-mode #PF on a user address with AC set).
    workload = "dd if=/dev/zero of=/dev/null bs=1M count=8 2>/dev/null; ls -R /sys/kernel >/dev/null\n"
    vm = boot(name="forced-smap", cpu="EPYC-Genoa", accel="tcg", script=ARM + workload +
              f"echo captures=$(cat {SYSFS}/captures)\n")
    assert "captures=0" in vm.console, "user-mode or user-access faults were captured on an SMAP CPU"
    # Without SMAP the kernel never sets AC, so user-access faults are captured (README: cost).
    vm = boot(name="forced-nosmap", cpu="EPYC-Genoa,-smap", accel="tcg", script=ARM + workload +
              f"echo captures=$(cat {SYSFS}/captures)\n")
    m = re.search(r"captures=(\d+)", vm.console)
    assert m and int(m[1]) > 0, "without SMAP, user-access faults are expected to be captured"


def test_twenty_load_unload_cycles(r):
    vm = boot(name="forced-cycles", cpu="EPYC-Genoa", accel="tcg", smp=2, script=f"""
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
i=0
while [ $i -lt 20 ]; do
  insmod {MODULE} force=1 enable=1
  ls / >/dev/null
  rmmod lbr_dump
  i=$((i+1))
done
echo ==after== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
""")
    assert len(kernel_lines(vm.console, "lbr_dump: armed")) == 20
    assert len(kernel_lines(vm.console, "lbr_dump: unloaded")) == 20
    assert gates(vm.console, "after") == gates(vm.console, "kernel")
    assert_clean(vm.console)


def test_refuses_with_page_table_isolation(r):
    vm = boot(name="forced-pti", cpu="EPYC-Genoa", accel="tcg", pti="on",
              script=f"insmod {MODULE} force=1 enable=1 || echo insmod-failed\n")
    assert any("page-table isolation is active" in l and "pti=off" in l
               for l in kernel_lines(vm.console, "lbr_dump: refusing to arm")), vm.console[-2000:]
    assert "insmod-failed" in vm.console
    assert_clean(vm.console)


def test_stress_enable_disable_on_four_cpus(r):
    # 50 enable/disable cycles while every vCPU takes user-mode faults and, without SMAP,
    # kernel-mode user-access faults (which are captured): no warning, the kernel's IDT back.
    # (Each cycle attaches and detaches the panic path's ftrace direct calls, whose RCU-tasks
    # grace periods make a cycle take about two seconds under TCG: 1000 cycles no longer fit. The
    # race this once lost about one run in ten, a gate read half switched, is watched for
    # directly by gates_are_never_seen_half_switched: 50 cycles here, not 200; 100 took 225 s.)
    vm = boot(name="forced-stress", cpu="EPYC-Genoa,-smap", accel="tcg", smp=4, timeout=900, script=f"""
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {MODULE} force=1
for n in 1 2 3 4; do
  (while :; do dd if=/dev/zero of=/dev/null bs=64k count=16 2>/dev/null; ls /sys >/dev/null; done) &
done
i=0
while [ $i -lt 50 ]; do
  echo 1 > {SYSFS}/enabled
  echo 0 > {SYSFS}/enabled
  i=$((i+1))
done
echo cycles=$i
echo 1 > {SYSFS}/enabled
sleep 1
echo captures=$(cat {SYSFS}/captures)
echo 0 > {SYSFS}/enabled
kill $(jobs -p) 2>/dev/null; wait 2>/dev/null
echo ==after== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
rmmod lbr_dump
""")
    assert "cycles=50" in vm.console
    m = re.search(r"captures=(\d+)", vm.console)
    assert m and int(m[1]) > 0, "no capture while armed under load"
    assert gates(vm.console, "after") == gates(vm.console, "kernel"), "IDT not restored"
    assert len(kernel_lines(vm.console, "lbr_dump: armed")) == 51
    assert_clean(vm.console)


def test_gates_are_never_seen_half_switched(r):
    # Arming and disarming switch live IDT gates between the kernel's handler and a stub while
    # other CPUs take exceptions. A CPU reads a gate in parts (QEMU TCG: three 4-byte loads per
    # gate; the SDM promises no atomic read), so a gate changed under a delivery can send it to
    # a mix of both addresses: the low half of one with the high half of the other, code in the
    # middle of some function (seen in CI: a user-mode #PF that landed in lbr-dump's
    # facility::signature, and in an int3-filled gap of the kernel's text). lbr_crash crash=gates
    # reads every hooked gate that way on every CPU, as fast as it can, through 20 arm/disarm
    # cycles, and checks each address it assembles.
    vm = boot(name="forced-gates", cpu="EPYC-Genoa", accel="tcg", smp=4, timeout=900, script=f"""
insmod {MODULE} force=1
insmod {CRASH} crash=gates
i=0
while [ $i -lt 20 ]; do
  echo 1 > {SYSFS}/enabled
  echo 0 > {SYSFS}/enabled
  i=$((i+1))
done
echo cycles=$i
rmmod lbr_crash
rmmod lbr_dump
""")
    assert "cycles=20" in vm.console
    assert "lbr_crash: gates: watching 10 gates on 4 CPUs" in vm.console, "the watchers did not start"
    m = re.search(r"lbr_crash: gates: (\d+) reads of every gate, (\d+) changes seen, (\d+) torn", vm.console)
    assert m, "no result line from lbr_crash crash=gates"
    reads, changes, torn = map(int, m.groups())
    # Each cycle switches 10 gates to their stubs and back: a watcher that saw the gates change
    # fewer times than that did not watch the cycles.
    assert reads > 0 and changes >= 20 * 2 * 10, f"the watchers saw too little: {m[0]}"
    first = kernel_lines(vm.console, "lbr_crash: gates: first torn")
    assert torn == 0, f"gates read half switched {torn} times; {first}"
    assert_clean(vm.console)


def test_vector_set_is_configurable(r):
    # vectors= selects the hooked vectors (bit N: vector N): a mask with a vector that has no
    # stub (2, NMI) or with #DB alone is refused with a reason; vectors=0x4000 hooks #PF only,
    # and the other gates stay the kernel's (read from the IDT by lbr_crash, not by lbr_dump).
    vm = boot(name="forced-vectors", cpu="EPYC-Genoa", accel="tcg", script=f"""
if insmod {MODULE} force=1 vectors=0x4; then echo nmi=loaded; rmmod lbr_dump; else echo nmi=refused; fi
if insmod {MODULE} force=1 vectors=0x2; then echo db-only=loaded; rmmod lbr_dump; else echo db-only=refused; fi
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {MODULE} force=1 enable=1 vectors=0x4000
echo "vectors=[$(cat {SYSFS}/vectors)]"
echo ==armed== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
rmmod lbr_dump
echo ==unloaded== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
""")
    assert "nmi=refused" in vm.console and "db-only=refused" in vm.console, "a bad vectors= mask was accepted"
    assert "lbr_dump: vectors=0x4: not a set of hookable vectors" in vm.console, "no reason given for vectors=0x4"
    assert "vectors=[14(#PF)]" in vm.console, "the vectors attribute does not show the chosen set"
    kernel, armed, unloaded = gates(vm.console, "kernel"), gates(vm.console, "armed"), gates(vm.console, "unloaded")
    assert len(kernel) == 13
    # #PF, and #BP for the report functions' int3s (the reports parameter, not `vectors`).
    assert {v for v in kernel if armed[v] != kernel[v]} == {"3", "14"}, f"hooked: {armed} vs the kernel's {kernel}"
    assert unloaded == kernel, f"IDT after unloading differs from the kernel's: {unloaded} vs {kernel}"
    assert_clean(vm.console)
