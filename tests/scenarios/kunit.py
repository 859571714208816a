# SPDX-License-Identifier: GPL-2.0
"""lbr_dump's Rust KUnit suites, run in a VM; every KTAP test case counts as one test.

Each suite sits beside the code it tests: lbr_dump_ffi (asm/cpu.S's CPU lookup, declared in
ffi.rs), lbr_dump_area (capture/area.rs), lbr_dump_idt (idt.rs), lbr_dump_probe (probe.rs).

KUnit runs a module's suites when the module goes live, so the module must load: on plain QEMU
TCG that takes force=1 (the suite does not need a working recorder)."""

from harness import MODULE, assert_clean, boot, ktap_cases

SUITES = ("lbr_dump_ffi", "lbr_dump_area", "lbr_dump_idt", "lbr_dump_probe")


def test_kunit_suite(r):
    vm = boot(name="kunit", cpu="Skylake-Client", accel="tcg", smp=2,
              script=f"insmod {MODULE} force=1\nrmmod lbr_dump\n")
    for suite in SUITES:
        cases = ktap_cases(vm.console, suite)
        assert cases, f"no KTAP output for suite {suite}"
        for name, ok, diag in cases:
            r.record(f"kunit: {suite}.{name}", ok, diag)
    # No case may make the kernel warn (area_too_large_fails_cleanly: the page allocator's
    # warning for an order it cannot serve).
    assert_clean(vm.console)
