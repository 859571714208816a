# SPDX-License-Identifier: GPL-2.0
"""What the scenarios in tests/scenarios/ use: booting a VM, reading its console, KTAP.

A scenario is a `test_*(r)` function: it boots one VM (`boot(...)`), then asserts on the console
with plain `assert` (a failed assert fails that test, with its message). `r` collects extra
results for tests that report more than one (KUnit: one per test case).
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

# tests/run.py, the runner, puts tests/ and scripts/ on the module path (the one place that does).
from vm import (FRED_LINE, GUEST_GUARDS, REPO, RESTORED_LINE, TARGET, BochsVm, Result, Vm, kernel_cmdline,
                kernel_dir, prepare_initramfs, scenario_cpio, sh)

# Paths and commands inside the test VM, one definition for every scenario.
# syzkaller pkg/report/linux.go, linuxSymbolizeRe, verbatim: every line's first match is
# symbolized (file:line appended, computed for pc-1; inlined frames become extra lines), and the
# symbolized report is searched for the guilty file.
SYZ_SYMBOLIZE = re.compile(r"(?:\[\<(?:[0-9a-f]+)\>\])?[ \t]+(?:[0-9]+:)?([a-zA-Z0-9_.]+)\+0x([0-9a-f]+)/0x([0-9a-f]+)")
# What report parsers (syzkaller's, KernelCI's) take for the start or type of a kernel report.
OOPS_KEYWORDS = ("BUG:", "WARNING:", "INFO:", "Call Trace", "Backtrace:", "Kernel panic",
                 "general protection fault", "invalid opcode:", "int3:", "panic:", " ? ")

MODULE_KO = "/lib/lbr-dump/lbr_dump.ko"
# What a scenario loads: with print_all=1 every printed snapshot has all its records and a panic
# prints every CPU's (what most scenarios compare with the emulator's ground truth); the default,
# bounded output (print_records, print_all) has its own scenarios (output.py, pstore.py), which
# load MODULE_KO. boot() gives the built-in driver the same with lbr_dump.print_all=1 on the
# command line (ignored by a kernel without it built in), unless bounded=True.
MODULE = f"{MODULE_KO} print_all=1"
CRASH = "/lib/lbr-dump/lbr_crash.ko"
CHECK = "/lib/lbr-dump/lbr_check.ko"
LKDTM = "/sys/kernel/debug/provoke-crash/DIRECT"
SYSFS = "/sys/kernel/lbr_dump"
CRASH_PARAMS = "/sys/module/lbr_crash/parameters"
# Loads lbr_dump armed, with no other parameter.
ARM = f"insmod {MODULE} enable=1\n"
# lbr_crash crash=idt prints the handler of every gate lbr_dump hooks (compare before/after).
IDT = f"insmod {CRASH} crash=idt && rmmod lbr_crash"
# Sets $cfg to the address of the stubs' configuration (lbr_crash's capture_cfg=).
CFG = "cfg=$(grep -w lbr_dump_capture /proc/kallsyms | cut -d' ' -f1)\n"
# Defines the shell function `sym NAME`: the address of kernel symbol NAME, in hex without 0x.
SYM = "sym() { grep -w \"$1\" /proc/kallsyms | cut -d' ' -f1; }\n"
# What the guest kernel prints when page-table isolation is on.
PTI_ON = "Kernel/User page tables isolation: enabled"

# Where scripts/module.sh builds lbr_crash.ko on the host (its objects, for the decoder's symbols).
CRASH_BUILD = REPO / "out" / "lbr_crash"


@functools.cache
def decoder() -> str:
    """lbr-decode, built in release mode."""
    sh("cargo", "build", "--quiet", "--release", "-p", "lbr-decode", capture=False)
    return str(TARGET / "release" / "lbr-decode")


def decode(*args, fmt: str = "json") -> tuple[int, str, str]:
    """Runs lbr-decode; (exit code, stdout, stderr)."""
    p = subprocess.run([decoder(), "--format", fmt, "--color", "never", *map(str, args)],
                       cwd=REPO, text=True, capture_output=True)
    return p.returncode, p.stdout, p.stderr


def symbols() -> list:
    """--vmlinux and --modules arguments for the module kernel and the modules in the VM."""
    return ["-k", kernel_dir("module") / "vmlinux", "-m", REPO / "out" / "module", "-m", CRASH_BUILD]


def in_root(*cmd, stdin: str = "") -> str:
    """Runs `cmd` in the build root (scripts/common.sh in_root, as QEMU runs); its stdout."""
    p = subprocess.run(["bash", "-c", 'source scripts/common.sh; in_root "$@"', "_", *map(str, cmd)],
                       cwd=REPO, input=stdin, text=True, capture_output=True)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))} failed ({p.returncode}): {p.stderr}"
    return p.stdout


MIB = 1 << 20


def kdump(name: str, crash: str, append: str = "", capture_script: str = "",
          root_files: tuple[str, ...] = (), disk_mib: int = 640, arm: str = "",
          **kw) -> tuple[Result, Path]:
    """kdump, as fleets collect crash dumps: boots a guest (lbr-dump armed) that loads a capture
    kernel with kexec_file_load (tests/user/kexec.S), then runs `crash`; the panic boots the
    capture kernel, which writes /proc/vmcore to a virtio disk. The disk starts out holding the
    capture kernel and its initramfs (the test initramfs plus a scenario that saves the vmcore),
    which the first kernel reads back to load them. Returns the run and the disk (the vmcore at
    its start), once the capture kernel said it saved it.
    Then the capture kernel runs `capture_script` (shell), with `root_files` (paths of files in
    the build root, such as a program and its shared libraries) at the same paths in its
    initramfs; the disk is `disk_mib` MiB (the default leaves room for the vmcore of 512 MiB of
    memory). `arm`: more lbr_dump parameters for its insmod."""
    run_dir = REPO / "out" / "vm" / name
    disk, read_back = next_kernel_disk(run_dir, """
echo "kdump: capture kernel up, vmcore $(stat -c %s /proc/vmcore) bytes"
dd if=/proc/vmcore of=/dev/vda bs=1M conv=fsync 2>/dev/null
echo "kdump: vmcore saved"
""" + capture_script, root_files, disk_mib)
    # The capture kernel's command line: the harness's (the guards every kernel it boots needs),
    # on one CPU, with the options kdump's own tools give a capture kernel.
    cmdline = kernel_cmdline("off", False, "nr_cpus=1 irqpoll reset_devices")
    script = f"""insmod {MODULE} enable=1 {arm}
{read_back}
lbr-kexec /tmp/bzImage /tmp/initrd "{cmdline}"
echo "kdump: capture kernel loaded"
{crash}
sleep 600
"""
    res = boot(finish=False, name=name, timeout=600, append=f"crashkernel=192M {append}".strip(),
               script=script, qemu_args=["-drive", f"file={disk},format=raw,if=none,id=d0",
                                         "-device", "virtio-blk-pci,drive=d0"], **kw)
    con = res.console
    assert "kdump: capture kernel loaded" in con, "kexec_file_load failed:\n" + tail(con)
    assert "kdump: vmcore saved" in con, "the capture kernel did not save the vmcore:\n" + tail(con)
    return res, disk


def next_kernel_disk(run_dir: Path, script: str, root_files: tuple[str, ...] = (),
                     disk_mib: int = 640) -> tuple[Path, str]:
    """A virtio disk image for a kexec'd kernel (kdump's capture kernel, or `kexec -e`'s next):
    the module test kernel's bzImage and an initramfs (the test initramfs with `script` as its
    scenario, and `root_files`), `disk_mib` MiB in all. Returns the image and the guest shell
    lines that read them back to /tmp/bzImage and /tmp/initrd."""
    bz = (kernel_dir("module") / "arch/x86/boot/bzImage").read_bytes()
    initrd = prepare_initramfs("module").read_bytes() + scenario_cpio(run_dir / "capture.d", script)
    if root_files:
        initrd += root_files_cpio(run_dir / "capture-files.d", root_files)
    kmb, imb = -(-len(bz) // MIB), -(-len(initrd) // MIB)
    disk = run_dir / "disk.img"
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(disk, "wb") as f:
        f.write(bz.ljust(kmb * MIB, b"\0") + initrd)
        f.truncate(max(disk_mib * MIB, f.tell()))
    return disk, (f"dd if=/dev/vda bs=1M count={kmb} 2>/dev/null | head -c {len(bz)} > /tmp/bzImage\n"
                  f"dd if=/dev/vda bs=1M skip={kmb} count={imb} 2>/dev/null | head -c {len(initrd)} > /tmp/initrd")


def kexec(name: str, before: str, next_script: str, arm: str = "", **kw) -> Result:
    """`kexec -e` with lbr-dump armed: boots a guest that arms lbr-dump (`arm`: more insmod
    parameters), runs `before`, then loads the module test kernel as the next kernel and boots it
    at once (tests/user/kexec.S: kexec_file_load, reboot(LINUX_REBOOT_CMD_KEXEC)); the next
    kernel runs `next_script`. Returns the run once the next kernel's script ran to its end."""
    run_dir = REPO / "out" / "vm" / name
    disk, read_back = next_kernel_disk(run_dir, 'echo "kexec: next kernel up"\n' + next_script, disk_mib=64)
    cmdline = kernel_cmdline("off", False, "")  # the harness's, as the first kernel's
    script = f"""insmod {MODULE} enable=1 {arm}
{before}
{read_back}
echo "kexec: booting the next kernel"
lbr-kexec /tmp/bzImage /tmp/initrd "{cmdline}" exec
echo "kexec: exec failed: $?"
"""
    res = boot(name=name, timeout=600, script=script,
               qemu_args=["-drive", f"file={disk},format=raw,if=none,id=d0", "-device", "virtio-blk-pci,drive=d0"],
               **kw)
    con = res.console
    assert "kexec: booting the next kernel" in con and "kexec: next kernel up" in con, (
        "the next kernel did not come up:\n" + tail(con))
    return res


def root_files_cpio(work: Path, paths: tuple[str, ...]) -> bytes:
    """A cpio archive (newc) of files of the build root at their paths (symbolic links followed),
    to append to an initramfs; made in directory `work`."""
    sh("rm", "-rf", str(work))
    work.mkdir(parents=True)
    out = work.parent / (work.name + ".cpio")
    sh("bash", "-c", 'source scripts/common.sh; in_root sh -c \''
       'w=$1; shift; for p; do mkdir -p "$w/stage$(dirname "$p")" && cp -L "$p" "$w/stage$p"; done; '
       'cd "$w/stage" && find . | cpio -o -H newc --quiet -R 0:0\' _ "$1" "${@:3}" > "$2"',
       "_", str(work), str(out), *paths)
    return out.read_bytes()


# Ramoops' memory: reserved from the kernel's use (memmap=SIZE$ADDR, an E820 reserved range,
# which KASLR's choice of the kernel's physical address avoids too:
# arch/x86/boot/compressed/kaslr.c mem_avoid_memmap) at an address the test VM's 512 MiB hold
# and neither QEMU's -kernel/-initrd loading (the initrd goes to the top of RAM) nor the firmware
# touch, so what the first kernel wrote there is there after the warm reset.
RAMOOPS_ADDR = 0x10000000
RAMOOPS_SIZE = MIB


def pstore(name: str, script: str, record_size: int, compress: bool = True, append: str = "",
           **kw) -> tuple[Result, dict[str, bytes]]:
    """pstore across a warm reboot, as users read oopses after the fact: one VM boots twice
    (scripts/vm.py boots=2). ramoops is configured on the command line with the whole of its
    memory for dmesg records of `record_size` bytes (fs/pstore/ram.c: mem_size minus the console,
    ftrace and pmsg zones, here 0, is cut into record_size zones; one zone per kmsg dump, only
    its Part1), oopses and panics dumped (max_reason=2, KMSG_DUMP_OOPS), deflate compression
    (pstore.compress, fs/pstore/platform.c) unless `compress` is False. The first boot, finding
    no dmesg record in pstore, runs `script` (which should crash the kernel: panic=-1 then
    resets the VM at once); the second boot finds the records and writes /sys/fs/pstore as a
    tar archive to a virtio disk (byte-exact, unlike the console). Returns the run and the
    files, by name (dmesg-ramoops-N, ...)."""
    import tarfile
    run_dir = REPO / "out" / "vm" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    disk = run_dir / "pstore.img"
    with open(disk, "wb") as f:
        f.truncate(16 * MIB)
    params = (f"memmap={RAMOOPS_SIZE}${RAMOOPS_ADDR:#x} ramoops.mem_address={RAMOOPS_ADDR:#x} "
              f"ramoops.mem_size={RAMOOPS_SIZE} ramoops.record_size={record_size} "
              "ramoops.console_size=0 ramoops.ftrace_size=0 ramoops.pmsg_size=0 "
              f"ramoops.max_reason=2 pstore.compress={'deflate' if compress else 'none'}")
    guest = f"""mount -t pstore pstore /sys/fs/pstore
cd /sys/module/ramoops/parameters
echo "pstore-test: ramoops mem_address=$(cat mem_address) mem_size=$(cat mem_size) record_size=$(cat record_size) max_reason=$(cat max_reason) compress=$(cat /sys/module/pstore/parameters/compress)"
cd /
if ls /sys/fs/pstore | grep -q '^dmesg-ramoops-'; then
  echo "pstore-test: boot 2, pstore holds: $(ls /sys/fs/pstore | tr '\n' ' ')"
  tar -cf /dev/vda -C /sys/fs/pstore .
  sync
  echo "pstore-test: saved"
else
  echo "pstore-test: boot 1, pstore empty"
{script}
fi
"""
    res = boot(finish=False, name=name, boots=2, append=f"{params} {append}".strip(), script=guest,
               qemu_args=["-drive", f"file={disk},format=raw,if=none,id=d0",
                          "-device", "virtio-blk-pci,drive=d0"], **kw)
    boots = res.boots
    assert len(boots) == 2, (f"the VM booted {len(boots)} time(s), not twice (log {res.log}):\n"
                             + tail(res.console))
    assert "pstore-test: boot 1, pstore empty" in boots[0], "the first boot did not run the crash:\n" + tail(boots[0])
    assert "pstore-test: saved" in boots[1], (
        "the second boot found no dmesg record in pstore, or did not save it:\n" + tail(boots[1]))
    assert "lbr-dump-vm: done" in boots[1], "the second boot did not finish:\n" + tail(boots[1])
    files = {}
    with tarfile.open(disk) as t:
        for m in t.getmembers():
            if m.isfile():
                files[Path(m.name).name] = t.extractfile(m).read()
    return res, files


class Results:
    """PASS/FAIL/SKIP lines as they happen, and the counts."""

    def __init__(self) -> None:
        self.passed = 0
        self.skipped = 0
        self.failures: list[tuple[str, str]] = []

    @property
    def failed(self) -> int:
        return len(self.failures)

    def record(self, name: str, ok: bool, detail: str = "") -> None:
        if ok:
            self.passed += 1
            print(f"PASS {name}", flush=True)
        else:
            self.fail(name, detail)

    def fail(self, name: str, detail: str) -> None:
        self.failures.append((name, next(iter(detail.strip().splitlines()), "")))
        print(f"FAIL {name}", flush=True)
        for line in detail.rstrip().splitlines():
            print(f"     {line}", flush=True)

    def skip(self, names: list[str], reason: str) -> None:
        """Tests not run because the environment cannot run them: one SKIP line for all of them,
        with the reason; each counts as skipped, never as passed."""
        self.skipped += len(names)
        print(f"SKIP {len(names)} test(s) ({', '.join(names)}): {reason}", flush=True)

    def summary(self) -> str:
        """The closing lines: each failed test again with the first line of its reason (a log
        cut to its start and end still names them all), then `N passed, N failed`, and
        `, N skipped` when tests were skipped."""
        failed = "".join(f"FAILED {name}" + (f": {why}" if why else "") + "\n" for name, why in self.failures)
        return failed + f"{self.passed} passed, {self.failed} failed" + (
            f", {self.skipped} skipped" if self.skipped else "")


def boot(finish: bool = True, allow_would_fault: bool = False, bochs: bool = False, fred: bool = True,
         bounded: bool = False, **kw) -> Result:
    """Boots a VM (see scripts/vm.py Vm for the arguments): the one way a scenario runs a guest.
    With `bochs`, under Bochs, the FRED CPU (scripts/vm.py BochsVm and its arguments). A run
    that Vm.restorable() allows starts from a snapshot instead of a boot (scripts/vm.py
    Snapshot), and is checked the same.

    Before a test's own assertions count, the run must be what the test claims:
      - the guest brought up every vCPU it was given (`smp: Brought up ... N CPUs`, the first
        kernel's line when a capture kernel boots after it), so a "4 vCPU" test ran on 4;
      - every kernel the run booted (a kexec'd or capture kernel too) had the command-line
        options that keep a TCG guest from hanging by itself (scripts/vm.py GUEST_GUARDS);
      - each of them delays by one calibration on every CPU (the BogoMIPS it prints for all
        CPUs are the boot CPU's times their number), so a wait is as long on any CPU;
      - under the branch-record emulator, the emulator presented the model asked for, and no
        `would-fault` event occurred: lbr-dump touched no MSR the emulated CPU lacks (a real part
        would #GP there), unless `allow_would_fault`;
      - with `finish` (default), the guest's script ran to its end; a scenario that crashes the
        guest on purpose passes finish=False and checks the console itself;
      - a run restored from a snapshot (scripts/vm.py Snapshot; the checks above hold for it
        through its snapshot's boot console and ground truth, which begin its own) took its
        payload and a fresh random seed, its clock went on from the snapshot's, and under the
        emulator the plugin restored the state the boot saved (check_restored());
      - the VM did not time out (each ends by itself): a hung guest fails here, with what its
        vCPUs and QEMU's threads were doing (scripts/vm.py hang_report(); under Bochs
        hang_report_bochs(): each CPU's state once, where Bochs was stopped);
      - under Bochs, every CPU the guest brought up runs FRED (the kernel has FRED's entry code
        and each CPU the `fred` flag in /proc/cpuinfo: scripts/vm.py FRED_CHECK): a FRED test
        ran with FRED; with fred=False (a run booted with `fred=off`), none does, in a kernel
        that has FRED (the IDT on a CPU that has FRED and LKGS); and no MSR the model lacks was accessed unchecked (Bochs raises #GP for
        them: scripts/bochs-msrs.def), unless `allow_would_fault`.
    """
    if not bounded:
        kw["append"] = f"lbr_dump.print_all=1 {kw.get('append', '')}".strip()
    vm = BochsVm(**kw) if bochs else Vm(**kw)
    r = vm.run()
    # Every scenario's VM ends by itself (its script's end, a reboot, a crash with panic=-1) or
    # at the console text it waits for (dump_after): a run that timed out hung or never got
    # there, and what the test would check next would only mislead.
    what = "never printed what the run waits for" if vm.dump_after else "hung"
    assert not r.timed_out, (
        f"VM timed out after {r.seconds:.0f}s (log {r.log}): the guest {what}{silent_since(r.console)}.\n"
        f"What it was doing ({vm.HANG}):\n"
        f"{r.hang or '(no report: see the harness output)'}\n"
        + first_problem(r.console) + "console tail:\n" + tail(r.console, 15))
    up = cpus_brought_up(r.console)
    assert up is not None, (
        f"the guest never reported the CPUs it brought up (log {r.log}):\n" + tail(r.console))
    assert up == vm.smp, (
        f"the guest brought up {up} CPU(s), the VM was given {vm.smp} (log {r.log}): a test that "
        f"claims {vm.smp} vCPUs must run on {vm.smp}")
    # Every kernel of the run (a kexec'd or kdump capture kernel too) ran with the settings that
    # keep a guest from hanging by itself (scripts/vm.py GUEST_GUARDS): a hang there would fail
    # the test for the harness's reason, or pass it by luck.
    cmdlines = re.findall(r"^\[\s*\d+\.\d+\] Command line: (.*)$", r.console, re.M)
    assert cmdlines, f"the console never showed the kernel's command line (log {r.log}):\n" + tail(r.console)
    for line in cmdlines:
        missing = [g for g in GUEST_GUARDS if g not in line.split()]
        assert not missing, (
            f"a kernel of this run booted without {' '.join(missing)} (log {r.log}): {line}")
    # Every CPU's udelay() is as long as CPU 0's (GUEST_GUARDS setcpuid=constant_tsc): what
    # vpanic(), lbr-dump's printer and lbr_crash wait by. For each kernel of the run, the sum
    # the kernel prints of its CPUs' delay calibrations is its number of CPUs times the boot CPU's.
    for n, cal in enumerate(delay_calibrations(r.console)):
        assert cal is not None, (
            f"kernel {n + 1} of this run printed no delay calibration and CPU count (`Calibrating "
            f"delay ... BogoMIPS`, then `smpboot: Total of N processors activated`; log {r.log})")
        one, (cpus, bogosum) = cal
        assert abs(bogosum - cpus * one) <= 0.01 * (cpus + 1), (
            f"a kernel of this run calibrated its CPUs' delay loops each on its own: {cpus} CPUs "
            f"make {bogosum:.2f} BogoMIPS, the boot CPU {one:.2f} (kernel {n + 1} of the run, log "
            f"{r.log}): a udelay() on another CPU is not as long as on CPU 0")
    if bochs:
        assert fred_state(r.console) is not None, (
            f"the guest never said whether its CPUs run FRED (log {r.log}):\n" + first_problem(r.console)
            + tail(r.console))
        state = fred_state(r.console)
        assert state == (vm.smp, vm.smp if fred else 0, True), (
            f"the guest does not run {'FRED on every' if fred else 'the IDT on every'} CPU under "
            f"Bochs's {vm.cpu} model: {state[1]} of {state[0]} CPU(s) have the fred flag, the "
            f"kernel {'has' if state[2] else 'lacks'} FRED's entry code (CONFIG_X86_FRED) (log {r.log})")
        # Bochs runs with ignore_bad_msrs=0 (scripts/bochs-msrs.def): an MSR its model lacks
        # raises #GP, as on a real part. One accessed without the _safe accessors is the
        # kernel's "unchecked MSR access error": what the emulator calls would-fault.
        unchecked = re.findall(r"unchecked MSR access error: .*", r.console)
        assert allow_would_fault or not unchecked, (
            f"the guest touched MSRs Bochs's {vm.cpu} model does not have, unchecked (a #GP on "
            f"real hardware): {unchecked[:5]} (log {r.log})")
    if vm.emulate is not None:
        want = dict(a.split("=", 1) for a in vm.emulate.split(",") if "=" in a).get("model")
        start = next((e for e in r.emu_events() if e["event"] == "start"), None)
        assert start is not None and start["model"] == want, (
            f"the emulator did not present model {want}: its log starts {start} (log {r.emu_log})")
    if vm.emulate is not None and not allow_would_fault:
        faults = [e for e in r.emu_events() if e["event"] == "would-fault"]
        assert not faults, (
            f"the guest touched MSRs the emulated CPU does not have (a #GP on real hardware): "
            f"{faults[:5]} (log {r.emu_log})")
    if r.restored is not None:
        check_restored(r, vm)
    if finish:
        assert r.finished, (
            f"VM ended early after {r.seconds:.0f}s "
            f"(log {r.log}); " + first_problem(r.console) + "console tail:\n" + tail(r.console)
        )
    return r


def check_restored(r: Result, vm) -> None:
    """What can differ in a run restored from a snapshot (scripts/vm.py Snapshot) from a booted
    one, checked as boot() checks a boot: the guest took this run's payload (its size and
    SHA-256, checked by /init before it unpacked it) and its seed, and its random number
    generator was reseeded (otherwise every restore draws the same numbers);
    its clock went on from the snapshot's (the kernel's clock resumes where it was saved: a
    jump would fire timers and watchdogs at once); under the emulator, the plugin restored the
    state the boot's plugin saved."""
    m = RESTORED_LINE.search(r.console)
    assert m is not None, (
        f"the restored guest never said it took its payload (snapshot {r.restored}, log {r.log}):\n"
        + first_problem(r.console) + tail(r.console))
    assert (int(m[1]), m[2]) == r.payload, (
        f"the restored guest unpacked a payload of {m[1]} bytes, SHA-256 {m[2]}; the harness gave "
        f"{r.payload} (log {r.log})")
    assert m[3] == r.seed[:16] and m[4] == "0", (
        f"the restored guest took seed {m[3]} (reseed status {m[4]}), the harness gave {r.seed[:16]} "
        f"(log {r.log})")
    # The snapshot boot's console (with what it printed after its mark, before the stop), then
    # the restored guest's.
    before = re.findall(r"^\[\s*(\d+\.\d+)\]", r.console[:r.boot_console], re.M)
    after = re.findall(r"^\[\s*(\d+\.\d+)\]", r.console[r.boot_console:], re.M)
    assert before and after, f"no kernel timestamps around the snapshot point (log {r.log})"
    jump = float(after[0]) - float(before[-1])
    assert 0 <= jump <= 30, (
        f"the restored guest's clock went from {before[-1]} s at the snapshot to {after[0]} s "
        f"(log {r.log}): it should go on from where it was saved")
    if vm.emulate is not None:
        events = r.emu_events()
        saved = [e for e in events if e["event"] == "saved"]
        restored = [e for e in events if e["event"] == "restored"]
        assert len(saved) == 1 and len(restored) == 1 and saved[0]["digest"] == restored[0]["digest"], (
            f"the emulator did not restore the state its boot saved: saved {saved}, restored "
            f"{restored} (log {r.emu_log})")


def fred_state(console: str) -> tuple[int, int, bool] | None:
    """What the guest said of FRED (scripts/vm.py FRED_CHECK, the first time): its CPUs, how
    many have the `fred` flag, whether the kernel has FRED's entry code; None if it never said.
    FRED is active on a CPU that has the flag under a kernel with the entry code."""
    m = FRED_LINE.search(console)
    return (int(m[1]), int(m[2]), m[3] != "0") if m else None


def cpus_brought_up(console: str) -> int | None:
    """How many CPUs the (first) kernel of a run brought up, from `smp: Brought up N node(s), M
    CPU(s)`; None if it never said."""
    m = re.search(r"smp: Brought up \d+ nodes?, (\d+) CPUs?", console)
    return int(m[1]) if m else None


def delay_calibrations(console: str) -> list[tuple[float, tuple[int, float]] | None]:
    """For each kernel of a run (from its `Command line:` to the next kernel's): the boot CPU's
    BogoMIPS (`Calibrating delay ... N BogoMIPS`) and `smpboot: Total of M processors activated
    (S BogoMIPS)`, as (N, (M, S)); None for a kernel that printed either not at all.
    init/calibrate.c prints BogoMIPS as lpj / (500000 / HZ) with two decimals truncated, so the
    sum of M equal values is within (M - 1) * 0.01 of M times one for an HZ that divides 5000
    (100, 250, 1000: every kernel the tests boot has 250); another HZ would need a wider bound."""
    starts = [m.start() for m in re.finditer(r"^\[\s*\d+\.\d+\] Command line: ", console, re.M)]
    out: list[tuple[float, tuple[int, float]] | None] = []
    for i, start in enumerate(starts):
        part = console[start:starts[i + 1] if i + 1 < len(starts) else len(console)]
        one = re.search(r"Calibrating delay .*?(\d+\.\d+) BogoMIPS", part)
        total = re.search(r"Total of (\d+) processors activated \((\d+\.\d+) BogoMIPS\)", part)
        out.append((float(one[1]), (int(total[1]), float(total[2]))) if one and total else None)
    return out


def silent_since(console: str) -> str:
    """`; its console's last kernel line was at T s`, from the last timestamped line."""
    stamps = re.findall(r"^\[\s*(\d+\.\d+)\]", console, re.M)
    return f"; its console's last kernel line was at {stamps[-1]} s" if stamps else ""


def tail(text: str, n: int = 40) -> str:
    return "\n".join(text.splitlines()[-n:])


PROBLEM = re.compile(r"BUG:|Oops:|general protection fault|kernel BUG at|Kernel panic|WARNING: CPU:|"
                     r"double fault|stack guard page|Kernel stack overflow")


def first_problem(console: str, before: int = 8, after: int = 60) -> str:
    """The first kernel problem report of a console (a tail shows only the last of a cascade,
    and CI keeps no log): the lines before it (what the guest was doing) and the report."""
    lines = console.splitlines()
    i = next((i for i, l in enumerate(lines) if PROBLEM.search(l)), None)
    if i is None:
        return ""
    return ("first problem report (console line %d):\n" % (i + 1)
            + "\n".join(lines[max(0, i - before):i + after]) + "\n")


def kernel_lines(console: str, prefix: str) -> list[str]:
    """Console lines that carry a kernel message starting with `prefix` (printk timestamp
    stripped)."""
    out = []
    for line in console.splitlines():
        m = re.match(r"^(?:\[\s*\d+\.\d+\]\s)?(.*)$", line)
        if m and m.group(1).startswith(prefix):
            out.append(m.group(1))
    return out


def snapshot_heads(console: str) -> list[str]:
    """The header lines of the snapshots lbr-dump printed (`lbr_dump: v2 cpu=C seq=S ...`), not
    its `none:` lines (a CPU or an oops without a snapshot; a panic that follows an oops)."""
    return [l for l in kernel_lines(console, "lbr_dump: v2 ") if " none: " not in l]


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
