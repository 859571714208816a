# SPDX-License-Identifier: GPL-2.0
"""The module identifies the CPU's branch recorder, refuses when it cannot be switched on, and
loads and unloads cleanly where it can.

Expected CPU identities come from QEMU's CPU models (Skylake-Client: family 6 model 94;
EPYC-Genoa: family 0x19 model 0x11) and from the emulator's model definitions, never from the
module's own output."""

from harness import MODULE, assert_clean, boot, kernel_lines

INSMOD = f"""
if insmod {MODULE}; then echo "insmod: ok"; else echo "insmod: failed"; fi
"""


def one_line_per_attempt(lines):
    """busybox insmod tries finit_module() and, when that fails, init_module(): a refused load
    runs the module's init twice. Each attempt must print the same single line."""
    assert 1 <= len(lines) <= 2 and len(set(lines)) == 1, f"want one line per load attempt, got {lines}"
    return lines[0]


def test_plain_tcg_intel_refuses(r):
    # QEMU TCG presents a Skylake by CPUID but drops writes to DEBUGCTL: no usable recorder.
    vm = boot(name="refuse-intel", cpu="Skylake-Client", accel="tcg", script=INSMOD)
    line = one_line_per_attempt(kernel_lines(vm.console, "lbr_dump: Intel"))
    assert line.startswith("lbr_dump: Intel family 0x6 model 0x5e"), line
    assert "Intel LBR (Skylake), 32 entries" in line, line
    assert "DEBUGCTL.LBR does not stay on" in line, line
    assert line.endswith(": no usable branch recorder"), line
    assert "No such device" in vm.console, "insmod must fail with -ENODEV"
    assert "insmod: failed" in vm.console
    assert_clean(vm.console)


def test_plain_tcg_amd_refuses(r):
    vm = boot(name="refuse-amd", cpu="EPYC-Genoa", accel="tcg", script=INSMOD)
    line = one_line_per_attempt(kernel_lines(vm.console, "lbr_dump: AMD"))
    assert line.startswith("lbr_dump: AMD family 0x19 model 0x11"), line
    assert line.endswith(": no usable branch recorder"), line
    assert "No such device" in vm.console
    assert_clean(vm.console)


def test_faulting_msrs_refuse(r):
    # fail_msr makes the module see a #GP on that MSR, as under a hypervisor without LBR
    # pass-through (QEMU cannot make an instruction fault): here DEBUGCTL, the AMD single
    # record's switch. force=1 must not override a faulting MSR.
    vm = boot(name="refuse-fault", cpu="EPYC-Genoa", accel="tcg",
              script=f"insmod {MODULE} force=1 fail_msr=0x1d9 || echo insmod-failed\n")
    line = one_line_per_attempt(kernel_lines(vm.console, "lbr_dump: AMD"))
    assert "LastBranch record (1 entry): reading MSR 0x1d9 faults" in line, line
    assert line.endswith(": no usable branch recorder"), line
    assert "No such device" in vm.console and "insmod-failed" in vm.console
    assert_clean(vm.console)
