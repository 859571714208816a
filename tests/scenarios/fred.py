# SPDX-License-Identifier: GPL-2.0
"""FRED (Flexible Return and Event Delivery): the test kernel (CONFIG_X86_FRED=y) under Bochs,
whose wildcat_lake CPU model has FRED, which QEMU TCG does not emulate (scripts/vm.py BochsVm).

Every Bochs run must have FRED active on every CPU before a test's own assertions count:
harness.boot(bochs=True) reads it from the guest (scripts/vm.py FRED_CHECK: the `fred` flag of
each CPU in /proc/cpuinfo and FRED's entry code in /proc/kallsyms; the flag alone is not enough,
a kernel without CONFIG_X86_FRED shows it too; 7.3 prints no FRED line in its log). Bochs has
no LBR stack and no BTS (only DEBUGCTL and one LASTBRANCHFROM/TO pair), and its CPUID shows no
recorder lbr_dump knows: the probe refuses there, force=1 or not. Where Bochs's source
(../shared/vendor/) is missing, the Bochs tests are one SKIP line (unavailable(), read by
tests/run.py); the QEMU test runs all the same."""

import re

from harness import (MODULE, SYSFS, assert_clean, boot, cpus_brought_up, fred_state, kernel_dir,
                     kernel_lines, tail)
from vm import FRED_CHECK, BochsUnavailable, bochs_boot_sector, bochs_dir


def unavailable(test: str):
    """Why `test` cannot run here (a Bochs test without Bochs's source), or None; builds Bochs
    if need be."""
    if not test.startswith("test_bochs_"):
        return None
    try:
        bochs_dir()
        bochs_boot_sector()
    except BochsUnavailable as e:
        return f"no Bochs, the FRED CPU: {e}"
    return None


def assert_fred_kernel():
    """The kernel under test is built with FRED (scripts/kconfig/test-kernel.config)."""
    config = (kernel_dir("module") / ".config").read_text()
    assert "CONFIG_X86_FRED=y" in config.splitlines(), "the test kernel is built without CONFIG_X86_FRED"


def test_bochs_guest_runs_fred_on_every_cpu(r):
    """The test kernel boots under Bochs with FRED active on both CPUs (boot() checks it;
    asserted here again, with the CPUs the kernel brought up) and runs its user space to the
    end through FRED's entry points: system calls, interrupts, and tests/user/faults.S's page
    faults from user mode and from the kernel inside a user access (resolved, and fixed up
    with -EFAULT), which it checks itself."""
    assert_fred_kernel()
    vm = boot(bochs=True, name="fred-boot", smp=2, timeout=240,
              script='lbr-faults && echo "fred-test: faults ok" > /dev/kmsg\n')
    assert cpus_brought_up(vm.console) == 2, tail(vm.console)
    assert fred_state(vm.console) == (2, 2, True), re.findall(r"lbr-dump-vm: cpus=.*$", vm.console, re.M)
    assert "fred-test: faults ok" in vm.console, tail(vm.console)
    assert_clean(vm.console)


def test_bochs_guest_without_fred_is_failed(r):
    """boot(bochs=True) fails a run whose guest does not run FRED, before any assertion of the
    test: here the same kernel and CPU with FRED turned off on the command line (fred=off, the
    kernel then clears the flag and runs the IDT)."""
    try:
        boot(bochs=True, name="fred-off", timeout=240, append="fred=off")
    except AssertionError as e:
        msg = str(e)
    else:
        raise AssertionError("boot() passed a Bochs run with fred=off")
    assert msg.startswith("the guest does not run FRED on every CPU"), msg
    assert "0 of 1 CPU(s) have the fred flag, the kernel has FRED's entry code" in msg, msg


def test_qemu_runs_the_same_kernel_without_fred(r):
    """Under QEMU TCG, which does not emulate FRED, the same kernel runs with the IDT (as
    Debian's kernel does on CPUs without FRED): no CPU has the flag. Every other scenario relies
    on this."""
    assert_fred_kernel()
    vm = boot(name="fred-qemu", cpu="Skylake-Client", accel="tcg", smp=2, script=FRED_CHECK)
    assert fred_state(vm.console) == (2, 0, True), re.findall(r"lbr-dump-vm: cpus=.*$", vm.console, re.M)
    assert_clean(vm.console)


# Loads lbr_dump with ARGS; a failure's message goes to the kernel log, in order with its lines.
INSMOD = (f"insmod {MODULE} {{args}} 2>/tmp/err || "
          'echo "fred-test: insmod failed: $(cat /tmp/err)" > /dev/kmsg')


def test_bochs_lbr_dump_is_refused_under_fred(r):
    """Today's behaviour under FRED, where exceptions do not go through the IDT: lbr_dump does
    not arm, with one line saying why and -ENODEV, and the machine runs on. The line is the
    probe's: Bochs's wildcat_lake has no branch recorder in its CPUID (no Arch LBR, a model
    without legacy LBR), a refusal force=1 does not lift, so loading stops before arming, whose
    FRED refusal (src/glue.c, "FRED is active") cannot be reached here."""
    vm = boot(bochs=True, name="fred-refused", timeout=240, script=f"""
echo "fred-test: arm at load" > /dev/kmsg
{INSMOD.format(args="force=1 enable=1")}
echo "fred-test: load" > /dev/kmsg
{INSMOD.format(args="force=1")}
echo "fred-test: still running: $(ls {SYSFS} 2>&1)" > /dev/kmsg
""")
    con = vm.console
    parts = re.split(r"^.*fred-test: (?:arm at load|load)$", con, flags=re.M)
    assert len(parts) == 3, tail(con)
    for what, part in (("force=1 enable=1", parts[1]), ("force=1", parts[2])):
        # (busybox insmod tries finit_module() and, when that fails, init_module(): a refused
        # load runs the module's init twice, each attempt with the same single line)
        lines = [l for l in kernel_lines(part, "lbr_dump: ") if "taints kernel" not in l]
        assert 1 <= len(lines) <= 2 and len(set(lines)) == 1 and lines[0].endswith(
            "CPUID describes no branch recorder lbr-dump supports: no usable branch recorder"), (
            f"{what}: want one line per load attempt, got {lines}\n" + tail(part))
        assert re.search(r"fred-test: insmod failed: insmod: can't insert '\S*lbr_dump\.ko': "
                         r"No such device$", part, re.M), f"{what}:\n" + part
        assert "refusing to arm" not in part, f"{what}:\n" + part
    assert re.search(r"fred-test: still running: .*No such file or directory", parts[2]), parts[2]
    assert_clean(con)
