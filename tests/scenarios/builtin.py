# SPDX-License-Identifier: GPL-2.0
"""lbr_dump built into the kernel (scripts/overlay.sh, CONFIG_LBR_DUMP=y) probes at its
initcall. Under plain QEMU TCG that is the refusal, once, and the boot goes on."""

import re

from harness import CFG, CRASH, MODULE_KO, SYSFS, assert_clean, boot, kernel_lines


def test_builtin_probes_at_boot(r):
    vm = boot(name="builtin", kernel="builtin", cpu="Skylake-Client", accel="tcg",
              script=f"test ! -e {MODULE_KO}")
    lines = kernel_lines(vm.console, "lbr_dump:")
    assert len(lines) == 1, f"want one line from the initcall, got {lines}"
    assert lines[0].startswith("lbr_dump: Intel family 0x6 model 0x5e"), lines[0]
    assert lines[0].endswith(": no usable branch recorder"), lines[0]
    # The initcall ran before user space: its line comes before /init's first line.
    assert vm.console.index(lines[0]) < vm.console.index("lbr-dump-vm: up"), "initcall order"
    assert_clean(vm.console)


def test_boot_parameter_arms(r):
    # Plain TCG has no recorder: lbr_dump.force=1 lets the built-in driver arm anyway.
    vm = boot(name="builtin-on", kernel="builtin", cpu="EPYC-Genoa", accel="tcg",
              append="lbr_dump=on lbr_dump.force=1",
              script=f"echo enabled=$(cat {SYSFS}/enabled)")
    assert kernel_lines(vm.console, "lbr_dump: armed"), "lbr_dump=on did not arm at boot"
    assert "enabled=1" in vm.console
    assert_clean(vm.console)


def test_boot_parameter_off_does_not_arm(r):
    vm = boot(name="builtin-off", kernel="builtin", cpu="EPYC-Genoa", accel="tcg",
              append="lbr_dump=off lbr_dump.force=1",
              script=f"echo enabled=$(cat {SYSFS}/enabled)")
    assert not kernel_lines(vm.console, "lbr_dump: armed"), "lbr_dump=off armed"
    assert "enabled=0" in vm.console
    assert_clean(vm.console)


def test_boot_parameter_selects_vectors(r):
    vm = boot(name="builtin-vectors", kernel="builtin", cpu="EPYC-Genoa", accel="tcg",
              append="lbr_dump=on lbr_dump.force=1 lbr_dump.vectors=0x4000",
              script=f"echo vectors=[$(cat {SYSFS}/vectors)]")
    armed = kernel_lines(vm.console, "lbr_dump: armed")
    assert armed and "vectors 14(#PF)," in armed[0], f"lbr_dump.vectors=0x4000 not applied: {armed}"
    assert "vectors=[14(#PF)]" in vm.console
    assert_clean(vm.console)


def test_built_in_stub_settings_are_read_only(r):
    # Built in, the stubs' configuration is a page of .data (not .data..ro_after_init, which
    # page-table isolation may map for user mode) that the first arming makes read-only: the
    # write primitive of lbr_crash crash=write (hardening.py's test, here for the built-in
    # driver armed at boot) lands nowhere.
    vm = boot(name="builtin-write", kernel="builtin", cpu="EPYC-Genoa", accel="tcg",
              append="lbr_dump=on lbr_dump.force=1",
              script=CFG + f"insmod {CRASH} crash=write capture_cfg=0x$cfg && rmmod lbr_crash\n")
    assert kernel_lines(vm.console, "lbr_dump: armed"), "lbr_dump=on did not arm at boot"
    assert "lbr_crash: write: done" in vm.console, kernel_lines(vm.console, "lbr_crash")
    writes = re.findall(r"lbr_crash: write: (\w+) (0x[0-9a-f]+) \S+ = (-?\d+)", vm.console)
    assert {w[0] for w in writes} == {"nmi_gate", "ipi_gate", "ctl_msr", "armed", "rearm_mask", "msr_list"}, writes
    landed = [(k, a) for k, a, rc in writes if rc != "-14"]
    assert not landed, f"stores through a write primitive landed: {landed}"
