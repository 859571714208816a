# SPDX-License-Identifier: GPL-2.0
"""lbr_dump built into the kernel (scripts/overlay.sh, CONFIG_LBR_DUMP=y) probes at its
initcall. Under plain QEMU TCG that is the refusal, once, and the boot goes on."""

from harness import assert_clean, boot, kernel_lines


def test_builtin_probes_at_boot(r):
    vm = boot(name="builtin", kernel="builtin", cpu="Skylake-Client", accel="tcg",
              script="test ! -e /lib/lbr-dump/lbr_dump.ko")
    lines = kernel_lines(vm.console, "lbr_dump:")
    assert len(lines) == 1, f"want one line from the initcall, got {lines}"
    assert lines[0].startswith("lbr_dump: Intel family 0x6 model 0x5e"), lines[0]
    assert lines[0].endswith(": no usable branch recorder"), lines[0]
    # The initcall ran before user space: its line comes before /init's first line.
    assert vm.console.index(lines[0]) < vm.console.index("lbr-dump-vm: up"), "initcall order"
    assert_clean(vm.console)
