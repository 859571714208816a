# SPDX-License-Identifier: GPL-2.0
"""lbr_dump's Rust KUnit suite, run in a VM; every KTAP test case counts as one test.

KUnit runs a module's suites when the module goes live, so the module must load: on plain QEMU
TCG that takes force=1 (the suite does not need a working recorder)."""

from harness import MODULE, assert_clean, boot, ktap_cases


def test_kunit_suite(r):
    vm = boot(name="kunit", cpu="Skylake-Client", accel="tcg", smp=2,
              script=f"insmod {MODULE} force=1\nrmmod lbr_dump\n")
    cases = ktap_cases(vm.console, "lbr_dump")
    assert cases, "no KTAP output for suite lbr_dump"
    for name, ok, diag in cases:
        r.record(f"kunit: lbr_dump.{name}", ok, diag)
    # No case may make the kernel warn (area_too_large_fails_cleanly: the page allocator's
    # warning for an order it cannot serve).
    assert_clean(vm.console)
