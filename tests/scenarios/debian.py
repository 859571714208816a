# SPDX-License-Identifier: GPL-2.0
"""lbr-dump on a kernel we did not build: Debian's own 7.3 kernel (issue 26).

scripts/debian.sh downloads Debian's linux-binary/linux-headers 7.3.4+deb13-amd64 packages
(checked against the mirror's package index) and prepares a module tree from the pristine
linux-source-7.3 with Debian's configuration, GCC 14 and Debian's rustc 1.85.1; lbr_dump.ko and
the test modules are built against it (scripts/module.sh DIR debian) and loaded, unsigned, into
Debian's unmodified vmlinuz under QEMU TCG with the branch-record emulator. The expected records
are the emulator's freeze, as everywhere (tests/records.py).

Each test first asserts that the guest runs Debian's kernel as Debian built it (its release, its
compiler, its packaging line) and that the module is the one built for it (vermagic accepted: the
kernel's taint lines for an out-of-tree, unsigned module). Debian's kernel has no lkdtm: the
crashes come from lbr_crash.
"""

import importlib.util
import json
import re
import subprocess
from pathlib import Path

from harness import CRASH, MODULE, PTI_ON, REPO, boot, decode, kernel_lines, tail
from records import assert_equals_freeze, printed_records

# panic.py's checks of a panic's snapshots (the panicking CPU's and each stopped CPU's).
_spec = importlib.util.spec_from_file_location("scenario_panic_checks", Path(__file__).with_name("panic.py"))
panic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(panic)

RELEASE = "7.3.4+deb13-amd64"
SHOW = "uname -r | sed 's/^/release=/'\ncat /proc/version\n"


def assert_debian(con):
    """The guest ran Debian's kernel, built by Debian with GCC 14, and took our module."""
    assert f"release={RELEASE}" in con, "not Debian's kernel:\n" + tail(con)
    version = next((ln for ln in con.splitlines() if ln.startswith("Linux version ")), "")
    assert "(debian-kernel@lists.debian.org)" in version and "x86_64-linux-gnu-gcc-14" in version \
        and "Debian 7.3.4-1~bpo13+1" in version, f"not the kernel Debian built: {version!r}"
    # Vermagic matched (else "disagrees about version of symbol" or "version magic" refusals),
    # and the kernel says what it thinks of a module it did not build.
    assert "lbr_dump: loading out-of-tree module taints kernel." in con, tail(con)
    assert "lbr_dump: module verification failed: signature and/or required key missing" in con, tail(con)
    assert "version magic" not in con and "Unknown symbol" not in con, tail(con)


def test_debian_kernel_crash_jump_prints_the_ground_truth(r):
    # A call through a corrupted pointer into unmapped memory, on Debian's GCC-built kernel with
    # retpolines and ITS return thunks: the call goes through __x86_indirect_thunk_rax, which
    # jumps to its_return_thunk, whose `ret` lands on the bad address. #0 is the #PF's delivery
    # into lbr-dump's stub, #1 the thunk's return to the bad address, #2 the retpoline into the
    # return thunk, and lbr_crash_jump's call into the retpoline a record or two before.
    res = boot(finish=False, name="debian-jump", kernel="debian", cpu="Skylake-Client", accel="tcg",
               emulate="model=skylake", pti="off", timeout=300,
               script=SHOW + f"insmod {MODULE} enable=1\ninsmod {CRASH} crash=jump\n")
    con = res.console
    assert_debian(con)
    assert "lbr_dump: armed" in con, "\n".join(kernel_lines(con, "lbr_dump"))
    assert "BUG: unable to handle page fault for address: ffff800000001000" in con, tail(con)
    [snap] = panic.snapshots(con)
    assert snap["vector"] == 14 and snap["state"] == "complete", snap["line"]
    recs = snap["records"]
    assert len(recs) == 32, snap["line"]
    assert_equals_freeze(res.emu_events(), snap["line"], recs)
    bad = 0xffff800000001000
    assert recs[0]["from"] == bad and recs[0]["to_sym"].startswith("lbr_dump_stub_14+0x0/"), recs[0]
    assert recs[1]["to"] == bad and recs[1]["from_sym"].startswith("its_return_thunk+"), recs[1]
    assert recs[2]["from_sym"].startswith("__pi___x86_indirect_thunk_rax+") \
        and recs[2]["to_sym"].startswith("its_return_thunk+0x0/"), recs[2]
    call = next((p for p in recs[3:6] if p["from_sym"].startswith("lbr_crash_jump+")), None)
    assert call and call["to_sym"].startswith("__pi___x86_indirect_thunk_rax+0x0/"), recs[:6]

    # lbr-decode with Debian's vmlinux with DWARF (its -dbg package) and the modules built for
    # it: the jump through the retpoline and its return thunk is one branch (#4-#1, a tail jump
    # in GCC's lbr_crash_jump), and the straight-line check walks Debian's GCC code with no
    # violation (the one pair it cannot check leaves the bad address).
    vmlinux = subprocess.run(["scripts/debian.sh", "--dbg"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.strip()
    code, out, err = decode("-k", vmlinux, "-m", REPO / "out/module-debian", "-m", REPO / "out/lbr_crash-debian",
                            res.log)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kaslr_offset"], "no KASLR offset found for Debian's vmlinux"
    [s] = doc["snapshots"]
    [g] = [g for g in s["groups"] if 1 in g["records"]]
    assert g["records"] == [1, 2, 3, 4] and g["thunk"] == "__x86_indirect_thunk_rax" \
        and g["return_thunk"] == "its_return_thunk" and g["kind"] == "indirect-jump", g
    line = s["straight_line"]
    assert line["violated"] == 0 and line["ok"] >= 28 and line["unchecked_reasons"] == {"outside-text": 1}, line
    frame = s["records"][4]["from"]["frames"][0]
    assert frame["function"] == "lbr_crash_jump" and frame["file"].endswith("lbr_crash.c"), frame


def test_debian_kernel_sysrq_c_captures_the_panic_and_the_other_cpu(r):
    # What users' CI does, on Debian's kernel with 2 vCPUs: the panic trampoline (an ftrace
    # direct call at panic()'s fentry site) and the stop stubs, as on the test kernel.
    res, snaps = panic.panic_run("debian-sysrq-c", SHOW + "echo c > /proc/sysrq-trigger\n", smp=2,
                                 kernel="debian")
    con = res.console
    assert_debian(con)
    assert "Kernel panic - not syncing: sysrq triggered crash" in con, tail(con)
    panics = [s for s in snaps if s["vector"] == panic.PANIC]
    assert len(panics) == 1, "\n".join(s["line"] for s in snaps)
    panic.check_panic_snapshot(res, panics[0], "sysrq_handle_crash")
    panic.check_stopped(res, snaps, [1 - panics[0]["cpu"]])


def test_debian_kernel_with_pti_refuses_the_module_and_runs_on(r):
    # QEMU's Skylake-Client reads as Meltdown-affected, so Debian's kernel turns PTI on there (as
    # on such hardware): the module's stubs are not entry text, and lbr-dump refuses to arm,
    # saying to build it in; the machine runs on.
    res = boot(name="debian-pti", kernel="debian", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
               pti="auto", timeout=300, script=SHOW + f"insmod {MODULE} enable=1 || echo insmod=$?\n"
               "echo still-running\n")
    con = res.console
    assert_debian(con)
    assert PTI_ON in con, "page-table isolation is not on in the guest:\n" + "\n".join(
        kernel_lines(con, "Kernel/User page tables isolation"))
    assert re.search(r"insmod=[1-9]", con), "insmod of lbr_dump did not fail under PTI:\n" + tail(con)
    lines = kernel_lines(con, "lbr_dump")
    assert any("page-table isolation is active" in ln and "CONFIG_LBR_DUMP=y" in ln for ln in lines), \
        "the refusal does not say to build lbr-dump in:\n" + "\n".join(lines)
    assert "lbr_dump: armed" not in con and "still-running" in con, tail(con)
    assert not printed_records(con)


def test_debian_kernel_warnings_print_their_snapshot_and_panic_on_warn(r):
    # Debian's GCC splits __warn() and check_panic_on_warn() into a hot part and a NAME.cold
    # part: show_regs() and the panic are called from the cold ones. A warning with interrupts
    # off: its report holds its #UD's snapshot, equal to the ground truth; then the same with
    # panic_on_warn=1: the snapshot in the report before the panic, and the panic's own
    # snapshot named in one line instead of printed.
    res = boot(finish=False, name="debian-warn", kernel="debian", cpu="Skylake-Client", accel="tcg",
               emulate="model=skylake", pti="off", timeout=300,
               script=SHOW + f"insmod {MODULE} enable=1\ninsmod {CRASH} crash=warn_irqs_off && rmmod lbr_crash\n"
               f"echo 1 > /proc/sys/kernel/panic_on_warn\ninsmod {CRASH} crash=warn_irqs_off\n")
    con = res.console
    assert_debian(con)
    starts = [m.start() for m in re.finditer(r"^(?:\[\s*\d+\.\d+\]\s)?WARNING: .*$", con, re.M)]
    assert len(starts) == 2, f"{len(starts)} warning reports:\n" + tail(con)
    panic_at = con.find("Kernel panic - not syncing", starts[1])
    assert panic_at > 0, "no panic after the second warning:\n" + tail(con)
    for start, end in ((starts[0], con.find("---[ end trace", starts[0])), (starts[1], panic_at)):
        rep = con[start:end]
        heads = [h for h in kernel_lines(rep, "lbr_dump: v2 ") if " vector=" in h]
        assert len(heads) == 1 and " vector=6 (#UD) " in heads[0], "the report has no #UD snapshot:\n" + rep[:3000]
        block = rep[rep.index(heads[0]):]
        recs = printed_records(block[:block.index("lbr_dump: end ")])
        assert recs and recs[0]["from_sym"].startswith("lbr_crash_warn+"), recs[:1]
        assert_equals_freeze(res.emu_events(), heads[0], recs)
    after = con[panic_at:]
    assert not [h for h in kernel_lines(after, "lbr_dump: v2 ") if " vector=256 " in h], \
        "the panic's own snapshot was printed:\n" + "\n".join(kernel_lines(after, "lbr_dump"))
    assert any("none: this panic is panic_on_warn's" in ln for ln in kernel_lines(after, "lbr_dump: v2 ")), \
        "\n".join(kernel_lines(after, "lbr_dump"))
