# SPDX-License-Identifier: GPL-2.0
"""The harness's own checks: what boot() asserts of every run (the vCPUs the guest brought up,
a hang reported with where its CPUs were), and the guest settings that keep its boots from
deadlocking (tsc=nowatchdog) and its CPUs' delays true (setcpuid=constant_tsc). Product
behaviour is tested in the other scenario files."""

import re
import shutil

from harness import CRASH, MODULE, boot, kernel_lines, tail


def test_every_vcpu_is_brought_up(r):
    # boot() fails any run whose guest brought up fewer CPUs than it was given; this one also
    # reads the kernel's own view after boot.
    vm = boot(name="hard-smp4", cpu="EPYC-Genoa", accel="tcg", smp=4,
              script="echo online=$(cat /sys/devices/system/cpu/online)\n")
    assert "online=0-3" in vm.console, re.findall(r"online=\S*", vm.console)


def test_a_cpu_waiting_with_interrupts_off_is_let_go(r):
    """The harness's guests cannot deadlock in kernel 7.3's clocksource watchdog. Its check of
    another CPU's TSC (watchdog_check_skew()) sends that CPU an IPI and waits for it with
    interrupts off, and gives up by ktime_get_raw_fast_ns(), which counts jiffies while
    timekeeping runs on jiffies (at boot, until the switch to tsc-early). A CPU that waits with
    interrupts off for the watchdog's CPU, as stop_machine() makes every CPU do (the switch to
    tsc-early is one), then never takes the IPI, no CPU ticks, and neither wait ends: a guest hung
    at ~2 s of boot in CI, vCPU 0 in watchdog_check_skew(), vCPU 1 in multi_cpu_stop() (found by
    scripts/vm.py's hang report, 1 boot in 36 six at a time here). The harness boots with
    tsc=nowatchdog. This plays it after boot, where it happens every time: timekeeping kept on
    jiffies (clocksource=jiffies, allowed with this kernel's periodic tick), CPU 1 waits with
    interrupts off for 3 s of CPU 0's sleeping (lbr_crash crash=irqs_off_wait), long enough for
    the watchdog's check of CPU 1 (every other 0.5 s round)."""
    vm = boot(name="hard-irqs-off-wait", cpu="Skylake-Client", accel="tcg", smp=2,
              append="clocksource=jiffies",
              script="echo cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)\n"
                     f"insmod {CRASH} crash=irqs_off_wait\n")
    assert "cs=jiffies" in vm.console, re.findall(r"cs=\S*", vm.console)
    lines = kernel_lines(vm.console, "lbr_crash: irqs_off_wait:")
    assert len(lines) == 1, tail(vm.console)
    m = re.search(r"CPU 1 released after (\d+) ms", lines[0])
    assert m is not None, lines[0]
    # The release comes after CPU 0's msleep(3000): a wait the watchdog held would have given up.
    assert int(m[1]) >= 3000, lines[0]


def test_every_cpu_delays_by_the_boot_cpus_calibration(r):
    """Every vCPU's udelay() is as long as vCPU 0's: one delay-loop calibration for all. QEMU TCG
    does not offer the invariant TSC (CPUID 0x80000007 EDX[8]), so the kernel does not mark the
    TSC constant, and each CPU it brings up calibrates its own delay loop against jiffies
    (init/calibrate.c calibrate_delay_direct()); under a loaded host that went to 1/20 of the
    boot CPU's, and every udelay() and mdelay() on that CPU was 20 times short: a 20 s bound of
    lbr_crash's ran out in 1 s (seen in CI), and a panic on such a CPU waits 50 ms, not vpanic()'s
    second, for the others to stop. The harness boots with setcpuid=constant_tsc (QEMU's TSC is
    the host's, constant), so the others take the boot CPU's TSC-based value
    (arch/x86/kernel/tsc.c calibrate_delay_is_known()); boot() checks it of every run from the
    console. Here the kernel's own per-CPU value, BogoMIPS in /proc/cpuinfo, of 3 vCPUs."""
    vm = boot(name="hard-delay-calibration", cpu="Skylake-Client", accel="tcg", smp=3,
              script="grep -E '^bogomips' /proc/cpuinfo\n")
    bogo = re.findall(r"^bogomips\s*: (\d+\.\d+)", vm.console.replace("\r", ""), re.M)
    assert len(bogo) == 3, tail(vm.console)
    assert len(set(bogo)) == 1, f"each vCPU's delay loop has its own calibration: BogoMIPS {bogo}"


def test_a_hung_guest_is_failed_with_where_its_cpus_are(r):
    """A VM that times out fails in boot() with the hang report of scripts/vm.py: each vCPU's
    RIP named in vmlinux, interrupt flag and halt state, sampled twice, and QEMU's threads. The
    hang is the one above with the TSC watchdog back on (tsc=watchdog after the harness's
    tsc=nowatchdog; the last one counts): CPU 1 waits with interrupts off (giving up only after
    600 s) and the VM is killed at 25 s. The report must find vCPU 0 in the watchdog's wait for
    CPU 1, interrupts off, which also shows the kernel's deadlock itself; and CPU 1 with
    interrupts off, outside vmlinux (in lbr_crash)."""
    try:
        boot(name="hard-hang-report", cpu="Skylake-Client", accel="tcg", smp=2, timeout=25,
             append="clocksource=jiffies tsc=watchdog",
             script=f"insmod {CRASH} crash=irqs_off_wait giveup=600\n")
    except AssertionError as e:
        msg = str(e)
    else:
        raise AssertionError("the guest did not hang: the TSC watchdog was not on, or did not wait for CPU 1")
    assert msg.startswith("VM timed out after") and "the guest hung" in msg, msg
    # (its own lines may not reach the console: the printer thread does not run after the hang)
    assert "lbr_crash: " in msg, f"the guest hung before lbr_crash was loaded:\n{msg}"
    samples = re.findall(r"^sample (\d): vCPU (\d) RIP 0x[0-9a-f]+ (\S*) CPL (\d) interrupts (on|off)",
                         msg, re.M)
    assert {(n, c) for n, c, *_ in samples} == {("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")}, msg
    assert all(cpl == "0" and irqs == "off" for *_, cpl, irqs in samples), msg
    assert any(w.startswith("watchdog_check_skew+") for _, c, w, *_ in samples if c == "0"), msg
    assert all(w == "?" for _, c, w, *_ in samples if c == "1"), msg
    if shutil.which("gdb"):
        assert re.search(r"^Thread \d+ CPU 0/TCG: ", msg, re.M) and re.search(r"^Thread \d+ CPU 1/TCG: ", msg, re.M), msg
    else:
        assert "no gdb on this machine" in msg, msg


def test_two_runs_restored_from_one_snapshot_are_independent(r):
    """Runs that start from one snapshot (scripts/vm.py Snapshot) share nothing but it: what
    the first run did in the guest (a file, lbr_dump loaded, a marker in the emulator's log) is
    not in the second, and each draws its own random numbers (the guest's generator is reseeded
    from the host at each restore: without it both would print the same UUID)."""
    script = ("echo uuid=$(cat /proc/sys/kernel/random/uuid)\n"
              "echo before=$(ls /tmp | tr '\\n' ,)$(grep -c lbr_dump /proc/modules || true)\n"
              f"insmod {MODULE} && touch /tmp/first-was-here && lbr-marker 4711\n")
    runs = [boot(name=f"restore-twice-{n}", cpu="Skylake-Client", smp=2, emulate="model=skylake", script=script)
            for n in (1, 2)]
    assert all(v.restored is not None for v in runs) and runs[0].restored == runs[1].restored, (
        f"the runs were not restored from one snapshot: {[v.restored for v in runs]}")
    uuids = [re.findall(r"^uuid=(\S+)", v.console, re.M) for v in runs]
    assert all(len(u) == 1 for u in uuids) and uuids[0] != uuids[1], f"UUIDs drawn: {uuids}"
    for v in runs:
        # Each run starts with an empty /tmp and lbr_dump not loaded, and marks once.
        assert re.search(r"^before=0$", v.console, re.M), tail(v.console)
        marks = [e for e in v.emu_events() if e["event"] == "marker" and e["value"] == 4711]
        assert len(marks) == 1, f"marker 4711 logged {len(marks)} time(s) in {v.emu_log}"
    assert runs[0].seed != runs[1].seed


def test_a_snapshot_qemu_cannot_load_is_made_again(r):
    """A snapshot whose saved state QEMU cannot load (a cache entry damaged on the disk, or
    saved by another QEMU) would fail every run restoring it, in this run of the suite and the
    next: the run that finds it so fails, saying so, and removes it, and the next run wanting it
    makes it again. Here the state file of this test's own machine (512 MiB is every other
    test's: 448 MiB is this one's alone) is cut to half its length."""
    script = "echo ran\n"
    first = boot(name="restore-unloadable-1", cpu="Skylake-Client", memory="448M", script=script)
    snap = first.restored
    assert snap is not None and (snap / ".complete").exists(), f"not restored: {snap}"
    state = snap / "state"
    size = state.stat().st_size
    with open(state, "r+b") as f:
        f.truncate(size // 2)
    try:
        boot(name="restore-unloadable-2", cpu="Skylake-Client", memory="448M", script=script)
    except AssertionError as e:
        msg = str(e)
    else:
        raise AssertionError("a run restored from a state cut in half passed")
    assert "QEMU could not load the snapshot" in msg and "removed from the cache" in msg, msg
    assert "\nran\n" not in msg, msg
    assert not snap.exists(), f"{snap} is still in the cache"
    again = boot(name="restore-unloadable-3", cpu="Skylake-Client", memory="448M", script=script)
    assert again.restored == snap and (snap / ".complete").exists(), again.restored
    # (A state is not byte for byte the same from boot to boot: compared with the cut one.)
    assert (snap / "state").stat().st_size > size // 2, "the snapshot was not made again"
    assert "\nran\n" in again.console


def test_a_payload_altered_on_its_way_fails_the_run(r):
    """A restored run takes what is under test from its payload disk (scripts/vm.py
    payload_disk()); a payload that reached the guest other than it was written must fail the
    run, not run what it happens to hold. Here one byte of the archive's last file (a test
    program, so that cpio itself unpacks it without complaint) is changed on the disk after the
    harness wrote it: /init finds the SHA-256 wrong, says so and reboots, and boot() fails."""
    import vm
    write = vm.payload_disk

    def altered(path, kernel, script, seed):
        size, digest = write(path, kernel, script, seed)
        with open(path, "r+b") as f:
            f.seek(2 * vm.PAYLOAD_AT + size - 600)  # in the last file's data, before the trailer
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0x40]))
        return size, digest
    vm.payload_disk = altered
    try:
        boot(name="restore-altered", cpu="Skylake-Client", script="echo ran\n")
    except AssertionError as e:
        msg = str(e)
    else:
        raise AssertionError("a run with an altered payload passed")
    finally:
        vm.payload_disk = write
    assert "never said it took its payload" in msg and "lbr-dump-vm: restored: payload sha256" in msg, msg
    assert "\nran\n" not in msg, msg
