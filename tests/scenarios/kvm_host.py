# SPDX-License-Identifier: GPL-2.0
"""lbr-dump on a KVM host: no host branch record reaches a guest that KVM gives the LBR (vLBR),
and no such guest writes the host's recorder (src/capture/cpu.rs `lend`; Documentation/lbr-dump/design.rst "KVM hosts").

QEMU's TCG has no VMX: KVM itself cannot run here. What KVM does to the host's LBR is played by
lbr_crash crash=vlbr (tests/modules/lbr_crash): it schedules a guest LBR event with KVM's own
attributes on CPU 1 through perf's intel_pmu_lbr_add() and intel_pmu_lbr_del(), as perf does when
a vCPU thread with vLBR runs there, and reads and writes the LBR MSRs as the guest could while
the event is in (KVM passes them through then). The expected values come from the emulator's
recorder as those MSR reads see it, never from lbr-dump's output."""

import re

from harness import CRASH, CRASH_PARAMS, LKDTM, MODULE, SYM, SYSFS, boot, kernel_lines, tail

LBR = 1


def steps(con):
    """{step: (debugctl, kernel records, forged records)} of the `vlbr:` lines (CPU 1)."""
    return {s: (int(d, 16), int(k), int(f)) for s, d, k, f in re.findall(
        r"lbr_crash: vlbr: (.+?): cpu=1 debugctl=(0x[0-9a-f]+) kernel=(\d+) forged=(\d+)", con)}


def test_a_guest_given_the_lbr_sees_no_host_record(r):
    # Armed on 2 vCPUs with the emulated Skylake. A host LBR event (a perf user's) changes
    # nothing, nor does a user's event with KVM's attributes (only KVM's is a kernel counter). Once the guest's event is in on CPU 1: recording is off there and no record holds
    # a kernel address (the guest would read the host's KASLR layout); the guest's forged
    # records stay the guest's while it holds the LBR, and neither a capture on CPU 1 (a WARN's
    # #UD) nor a #DB there (a single-step) switches host recording back on. When the event goes,
    # the forged records are gone and recording is back on.
    vm = boot(name="kvm-host-vlbr", cpu="Skylake-Client", accel="tcg", emulate="model=skylake", smp=2,
              timeout=300, script=f"""
{SYM}insmod {MODULE} enable=1
insmod {CRASH} crash=vlbr target=0x$(sym intel_pmu_lbr_add) fini=0x$(sym intel_pmu_lbr_del)
c0=$(cat {SYSFS}/captures)
taskset -c 1 sh -c 'echo WARNING > {LKDTM}'
echo captured-while-lent=$(( $(cat {SYSFS}/captures) - c0 ))
taskset -c 1 lbr-singlestep || true
echo 1 > {CRASH_PARAMS}/look
rmmod lbr_crash
echo 0 > {SYSFS}/enabled
""")
    con = vm.console
    s = steps(con)
    assert list(s) == ["armed", "host event added", "user event added", "lent", "forged", "look", "given back"], \
        "\n".join(kernel_lines(con, "lbr_crash")) or tail(con)
    ctl, kernel, _ = s["armed"]
    assert ctl & LBR and kernel > 0, f"CPU 1 not recording before: {s['armed']}"
    ctl, kernel, _ = s["host event added"]
    assert ctl & LBR and kernel > 0, f"a host LBR event took the recorder: {s['host event added']}"
    # A user's perf_event_open() with KVM's attributes is not a guest: it must not switch the
    # host's recording off (nor wipe the records) while the user's task runs.
    ctl, kernel, _ = s["user event added"]
    assert ctl & LBR and kernel > 0, f"a user's event made lbr-dump step aside: {s['user event added']}"
    ctl, kernel, forged = s["lent"]
    assert not ctl & LBR, f"host recording on while a guest holds the LBR: DEBUGCTL {ctl:#x}"
    assert kernel == 0, f"the guest reads {kernel} records with host kernel addresses"
    assert s["forged"][2] == 4, f"the stand-in's forged records did not stick: {s['forged']}"
    # The capture on CPU 1 ran (the stub saw the #UD) but did not re-arm; nor did the #DB stub.
    assert "captured-while-lent=1" in con, re.findall(r"captured-while-lent=\S+", con)
    ctl, _, _ = s["look"]
    assert not ctl & LBR, f"host recording switched back on while lent: DEBUGCTL {ctl:#x}"
    ctl, _, forged = s["given back"]
    assert ctl & LBR and forged == 0, f"after the guest gave the LBR back: {s['given back']}"
