# SPDX-License-Identifier: GPL-2.0
"""What the scenarios in tests/scenarios/ use: booting a VM, reading its console, KTAP.

A scenario is a `test_*(r)` function: it boots one VM (`boot(...)`), then asserts on the console
with plain `assert` (a failed assert fails that test, with its message). `r` collects extra
results for tests that report more than one (KUnit: one per test case).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from vm import Result, Vm  # noqa: E402

MODULE = "/lib/lbr-dump/lbr_dump.ko"


class Results:
    """PASS/FAIL lines as they happen, and the counts."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def record(self, name: str, ok: bool, detail: str = "") -> None:
        if ok:
            self.passed += 1
            print(f"PASS {name}", flush=True)
        else:
            self.fail(name, detail)

    def fail(self, name: str, detail: str) -> None:
        self.failed += 1
        print(f"FAIL {name}", flush=True)
        for line in detail.rstrip().splitlines():
            print(f"     {line}", flush=True)


def boot(**kw) -> Result:
    """Boots a VM (see scripts/vm.py Vm for the arguments) and checks that the guest's script
    ran to its end: a VM that did not finish fails the test with the console's tail."""
    r = Vm(**kw).run()
    assert r.finished, (
        f"VM {'timed out' if r.timed_out else 'ended early'} after {r.seconds:.0f}s "
        f"(log {r.log}); console tail:\n" + tail(r.console)
    )
    return r


def tail(text: str, n: int = 40) -> str:
    return "\n".join(text.splitlines()[-n:])


def kernel_lines(console: str, prefix: str) -> list[str]:
    """Console lines that carry a kernel message starting with `prefix` (printk timestamp
    stripped)."""
    out = []
    for line in console.splitlines():
        m = re.match(r"^(?:\[\s*\d+\.\d+\]\s)?(.*)$", line)
        if m and m.group(1).startswith(prefix):
            out.append(m.group(1))
    return out


def assert_clean(console: str) -> None:
    """No WARN(), BUG, oops or panic report in the log. (Plain "WARNING:" also begins some
    mitigation notices, such as SRSO's on AMD models: those are not kernel warnings.)"""
    bad = [l for l in console.splitlines()
           if re.search(r"WARNING: CPU:|\[ cut here \]|BUG:|Oops:|Call Trace:|"
                        r"general protection fault|Kernel panic", l)]
    assert not bad, "kernel log has warnings or oopses:\n" + "\n".join(bad[:20])


def ktap_cases(console: str, suite: str) -> list[tuple[str, bool, str]]:
    """The KTAP results of one KUnit suite: (case name, ok, diagnostic lines).

    KUnit prints a suite as `KTAP version 1` / `# Subtest: SUITE` / `1..N` with indented
    `ok N name` / `not ok N name` lines and `# ...` diagnostics, then the suite's own result.
    """
    lines = [re.sub(r"^\[\s*\d+\.\d+\]\s", "", l) for l in console.splitlines()]
    cases: list[tuple[str, bool, str]] = []
    inside = False
    diag: list[str] = []
    for line in lines:
        if re.match(rf"^\s*# Subtest: {re.escape(suite)}$", line):
            inside = True
            continue
        if not inside:
            continue
        m = re.match(r"^\s+(not ok|ok) \d+ (\S+)(.*)$", line)
        if m:
            skipped = "# SKIP" in m.group(3)
            cases.append((m.group(2), m.group(1) == "ok" and not skipped,
                          "\n".join(diag) + ("\nskipped" if skipped else "")))
            diag = []
            continue
        if re.match(rf"^(not ok|ok) \d+ {re.escape(suite)}\b", line):
            break  # the suite's own result line ends it
        if line.strip().startswith("#"):
            diag.append(line.strip())
    return cases
