#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Boot the lbr-dump test VM once: build what it needs, run QEMU, capture the serial console.

Used by the test scenarios (tests/scenarios/*.py, through tests/harness.py) and by hand:

    scripts/vm.py --cpu Skylake-Client --smp 2 --script 'insmod /lib/lbr-dump/lbr_dump.ko'
    scripts/vm.py --emulate model=skylake ...     # run under the branch-record emulator plugin
    scripts/vm.py --bochs --smp 2 --script 'grep -m1 flags /proc/cpuinfo'   # under Bochs (FRED)

QEMU runs inside the pinned build root (scripts/common.sh in_root): its own PID namespace, so
killing the run (timeout, Ctrl-C, a crash of this script) leaves no QEMU behind. The console is
written to --log as it arrives and returned. A run ends when the guest reboots (the test /init
reboots after its script; panic=-1 reboots on panic; QEMU runs with -no-reboot) or on timeout.
With `boots=2` the guest may reboot once (a warm reset: QEMU's system reset keeps guest RAM, so
what the first kernel left in memory, such as a ramoops record, is there for the second), and
the run ends at the second reboot; each boot's console (and ground truth, under the emulator) is
kept apart.

BochsVm runs the same kernel and initramfs under Bochs (scripts/bochs.sh), whose CPU model
`wildcat_lake` has FRED, which QEMU TCG does not emulate; see BochsVm.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import fcntl
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "out"
# Cargo's build directory: $CARGO_TARGET_DIR if set (.ci/run keeps it in the cache), else target/.
TARGET = REPO / os.environ.get("CARGO_TARGET_DIR", "target")

# The kernel variants (scripts/kernel.sh VARIANT). The initramfs holds the test modules of
# tests/modules/, and lbr_dump.ko for the module variants (the built-in one has it in vmlinux),
# built against that variant's kernel.
VARIANTS = ("module", "builtin", "nocet", "debian")


def sh(*argv: str, capture: bool = True) -> str:
    """Runs one of the repository's scripts; its stdout (a path) is returned."""
    r = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE if capture else None, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed with exit code {r.returncode}")
    return r.stdout.strip() if capture else ""


def kvm_works() -> bool:
    """True when KVM can run the test kernel here: /dev/kvm creates a VM with a vCPU and the
    backend is kvm_intel or kvm_amd (scripts/kvmhost.py; not kvm_pvm, which creates VMs but runs
    only guest kernels built for it)."""
    import kvmhost
    return kvmhost.runs_guests()


@dataclasses.dataclass
class Result:
    """One VM run."""

    console: str
    timed_out: bool
    exit_code: int | None
    log: Path
    seconds: float
    command: list[str]
    emu_log: Path | None = None  # the emulator's ground truth (JSON lines), when it ran
    dump: Path | None = None  # the guest memory dump, when one was asked for and made
    # A timed-out run: what the VM was doing when it was killed (hang_report()); its files
    # (hang-*.txt) are in the run directory.
    hang: str | None = None
    # A restored run (Snapshot): the snapshot it started from, the seed and the payload (size,
    # SHA-256) it gave the guest, and where in `console` the snapshot boot's console ends.
    restored: Path | None = None
    seed: str | None = None
    payload: tuple[int, str] | None = None
    boot_console: int = 0

    def emu_events(self, boot: int | None = None) -> list[dict]:
        """The emulator's log, parsed (each line one JSON object; see tools/lbr-emu). With `boot`
        (1 for the first), only that boot's events, after its `start` event: a boot's events run
        from its system reset (the emulator's `reset` events, logged when the boot CPU executes
        the reset vector: at power-on, and at a reboot, where SeaBIOS, finding it has run
        before, resets once more: one boot starts after a run of `reset` events) to the next."""
        import json
        if self.emu_log is None or not self.emu_log.exists():
            return []
        events = [json.loads(l) for l in self.emu_log.read_text().splitlines() if l.strip()]
        if boot is None:
            return events
        starts = emu_boot_starts(events)
        if not 1 <= boot <= len(starts):
            raise ValueError(f"the emulator's log has {len(starts)} boot(s), not a boot {boot}")
        ends = starts[1:] + [len(events)]
        start = [e for e in events[:starts[0]] if e["event"] == "start"]
        return start + events[starts[boot - 1]:ends[boot - 1]]

    @property
    def boots(self) -> list[str]:
        """The console of each boot, in order: the log split before each kernel's first line
        (`[    0.000000] Linux version`; the firmware prints nothing on the serial port)."""
        starts = [m.start() for m in BANNER.finditer(self.console)]
        if not starts:
            return [self.console]
        cuts = [0] + starts[1:] + [len(self.console)]
        return [self.console[a:b] for a, b in zip(cuts, cuts[1:])]

    @property
    def finished(self) -> bool:
        """The guest's /init ran its script to the end (in the last boot)."""
        return "lbr-dump-vm: done" in self.boots[-1]


def emu_boot_starts(events: list[dict]) -> list[int]:
    """Where each boot's events start in an emulator log: the index of each run of `reset`
    events (a system reset; see Result.emu_events)."""
    return [i for i, e in enumerate(events)
            if e["event"] == "reset" and (i == 0 or events[i - 1]["event"] != "reset")]


# A kernel's first console line: where a boot's console output starts.
BANNER = re.compile(r"^\[\s*0\.000000\] Linux version ", re.M)


@dataclasses.dataclass
class Vm:
    """A VM configuration. `script` is a shell script run by the guest's /init (sh -e)."""

    name: str = "vm"
    kernel: str = "module"
    cpu: str = "Skylake-Client"
    smp: int = 1
    memory: str = "512M"
    pti: str = "off"
    append: str = ""
    script: str = ""
    emulate: str | None = None  # lbr-emu plugin arguments, e.g. "model=skylake"
    accel: str = "auto"  # auto (KVM if it works and no emulator), kvm, tcg
    timeout: float = 300.0
    qemu_args: list[str] = dataclasses.field(default_factory=list)
    # When the console first shows this text, dump the guest's memory (QMP dump-guest-memory,
    # an ELF core of guest-physical memory) to out/vm/NAME/memory.elf and end the VM.
    dump_after: str | None = None
    # Each time the console shows this text again, wake the guest from suspend to RAM (QMP
    # system_wakeup, as a wake event would), a second later.
    wake_on: str | None = None
    # The kernel's lockup detectors (soft and hard lockup watchdog). Off by default (`nowatchdog`):
    # under TCG with the emulator a busy vCPU can look locked up to them; the lockup scenarios
    # turn them on.
    watchdog: bool = False
    # When the console first shows this text, inject an NMI into the guest (QMP inject-nmi: on
    # x86, into every vCPU), a second later.
    nmi_on: str | None = None
    # How many times the guest boots in this run: 1 (a reboot ends the VM, QEMU's -no-reboot),
    # or 2: the first reboot (a panic with panic=-1, a reboot -f) is a warm system reset that
    # keeps guest RAM, and once the second kernel is up a reboot ends the VM again (QMP
    # set-action reboot=shutdown). The guest's script runs at each boot; it tells them apart
    # itself (for example by what the first left in pstore).
    boots: int = 1

    # What a hang report holds (harness.boot() says it when a run times out).
    HANG = "vCPUs sampled twice, a second apart; QEMU's threads"

    def run(self) -> Result:
        return run_locked(self.name, self.kernel, self._run)

    def restorable(self, accel: str) -> bool:
        """Whether this run starts from a snapshot (Snapshot) instead of a boot: a TCG run of a
        kernel that holds nothing under test (the module variants: what is under test comes in
        the payload), one boot, no devices of the scenario's own (a disk the kernel scanned at
        boot would be read stale), no suspend; and not with LBR_DUMP_VM_BOOT=1 (every run
        boots, to compare)."""
        return (accel == "tcg" and self.kernel in ("module", "nocet") and self.boots == 1
                and not self.qemu_args and self.wake_on is None
                and os.environ.get("LBR_DUMP_VM_BOOT", "") != "1")

    def machine(self, kdir: Path, accel: str, initrd: Path) -> list[str]:
        """The QEMU command's machine: what a snapshot is keyed by, and what its restores must
        give QEMU the same (a migration stream fits only the machine it came from)."""
        return [
            "qemu-system-x86_64", "-M", "q35", "-cpu", self.cpu, "-smp", str(self.smp),
            "-m", self.memory, "-accel", accel, "-display", "none", "-monitor", "none",
            "-serial", "stdio", "-kernel", str(kdir / "arch/x86/boot/bzImage"),
            "-initrd", str(initrd), "-append", kernel_cmdline(self.pti, self.watchdog, self.append),
        ]

    def _run(self, run_dir: Path) -> Result:
        kdir = kernel_dir(self.kernel)
        base = prepare_initramfs(self.kernel)
        accel = self.accel
        if accel == "auto":
            accel = "kvm" if self.emulate is None and kvm_works() else "tcg"
        if accel == "kvm" and self.emulate is not None:
            raise ValueError("the branch-record emulator is a TCG plugin: it cannot run with KVM")
        if self.boots not in (1, 2):
            raise ValueError(f"boots must be 1 or 2, not {self.boots}")
        snap = None
        if self.restorable(accel):
            snap = Snapshot.get(self, kdir, accel)
            if isinstance(snap, Result):  # the snapshot's boot failed: this run's failure
                return snap
            cmd = self.machine(kdir, accel, snap.dir / "initrd.cpio") + snap.devices(run_dir, self.script)
            cmd += ["-no-reboot", "-d", "cpu_reset", "-D", str(run_dir / "qemu-reset.log"),
                    "-incoming", f"file:{snap.dir / 'state'}"]
        else:
            initrd = run_dir / "initrd.cpio"
            initrd.write_bytes(base.read_bytes() + scenario_cpio(run_dir / "scenario.d", self.script))
            # -no-reboot is QEMU's `-action reboot=shutdown`; a VM that boots twice starts with
            # the default (reboot=reset) and switches to shutdown once its second kernel is up.
            reboot = ["-no-reboot"] if self.boots == 1 else ["-action", "reboot=reset"]
            cmd = self.machine(kdir, accel, initrd) + [
                *reboot,
                # CPU resets (the guest's final reboot, a triple fault) with the CPU state, so
                # that a VM that ends early can be told apart from one that rebooted as planned.
                "-d", "cpu_reset", "-D", str(run_dir / "qemu-reset.log"),
            ]
        emu_log = None
        if self.emulate is not None:
            plugin = build_emulator()
            args = self.emulate
            if "log=" not in args:
                emu_log = run_dir / "emu.jsonl"
                emu_log.unlink(missing_ok=True)
                # A restored run's own events go to emu-run.jsonl: emu.jsonl is then the
                # snapshot boot's events followed by them (Snapshot.joined()).
                args += f",log={run_dir / 'emu-run.jsonl' if snap else emu_log}"
            if snap:
                args += f",load={snap.dir / 'emu-state.json'}"
            cmd += ["-plugin", f"{plugin},{args}"]
        cmd += self.qemu_args
        # A second QMP socket of the harness's own, for the hang report of a run that times out.
        diag = run_dir / "diag.sock"
        diag.unlink(missing_ok=True)
        cmd += ["-qmp", f"unix:{diag},server=on,wait=off"]
        on_console = None
        dump = run_dir / "memory.elf"
        if self.dump_after is not None and self.wake_on is not None:
            raise ValueError("dump_after and wake_on cannot be combined")
        if self.wake_on is not None:
            sock = run_dir / "qmp.sock"
            sock.unlink(missing_ok=True)
            cmd += ["-qmp", f"unix:{sock},server=on,wait=off"]
            seen = [0]

            def on_console(text: str) -> bool:
                n = text.count(self.wake_on)
                if n > seen[0]:
                    seen[0] = n
                    # The guest prints the text before it reaches S3: retry until QEMU says it
                    # woke a suspended guest.
                    for _ in range(120):
                        time.sleep(0.5)
                        try:
                            qmp(sock, [("qmp_capabilities", {}), ("system_wakeup", {})])
                            break
                        except RuntimeError:
                            continue
                return False
        if self.nmi_on is not None:
            if on_console is not None:
                raise ValueError("nmi_on cannot be combined with dump_after or wake_on")
            sock = run_dir / "qmp.sock"
            sock.unlink(missing_ok=True)
            cmd += ["-qmp", f"unix:{sock},server=on,wait=off"]
            sent = [False]

            def on_console(text: str) -> bool:
                if not sent[0] and self.nmi_on in text:
                    sent[0] = True
                    time.sleep(1)
                    qmp(sock, [("qmp_capabilities", {}), ("inject-nmi", {})])
                return False
        if self.boots > 1:
            if on_console is not None or self.dump_after is not None:
                raise ValueError("boots=2 cannot be combined with dump_after, wake_on or nmi_on")
            sock = run_dir / "qmp.sock"
            sock.unlink(missing_ok=True)
            cmd += ["-qmp", f"unix:{sock},server=on,wait=off"]

            def on_console(text: str) -> bool:
                # The last boot's kernel is up (its first line printed): its reboot ends the VM.
                if len(BANNER.findall(text)) < self.boots:
                    return False
                qmp(sock, [("qmp_capabilities", {}), ("set-action", {"reboot": "shutdown"})])
                return True
        if self.dump_after is not None:
            dump.unlink(missing_ok=True)
            sock = run_dir / "qmp.sock"
            sock.unlink(missing_ok=True)
            cmd += ["-qmp", f"unix:{sock},server=on,wait=off"]

            def on_console(text: str) -> bool:
                if self.dump_after not in text:
                    return False
                qmp(sock, [("qmp_capabilities", {}),
                           ("dump-guest-memory", {"paging": False, "protocol": f"file:{dump}"}),
                           ("quit", {})])
                return True
        hang: list[str] = []

        def on_timeout(session: int) -> None:
            hang.append(hang_report(run_dir, diag, session, kdir / "vmlinux"))

        on_start = None
        if snap:
            go = run_dir / "go.sock"

            def on_start(stop) -> None:
                snap.go(diag, go, stop)
        r = run_qemu(cmd, run_dir / "console.log", self.timeout, on_console, on_timeout, on_start)
        r.hang = hang[0] if hang else None
        r.emu_log = emu_log
        if snap:
            snap.joined(r, run_dir)
        r.dump = dump if dump.exists() else None
        if self.boots > 1:
            # Each boot's console on its own too (console-1.log, ...), for reading by hand.
            for i, text in enumerate(r.boots, 1):
                (run_dir / f"console-{i}.log").write_text(text)
        return r


# The command-line options every kernel a test boots needs to not hang or panic by itself under
# TCG (kernel_cmdline() says why); tests/harness.py boot() checks each kernel of a run had them.
GUEST_GUARDS = ("tsc=nowatchdog", "no_timer_check", "setcpuid=constant_tsc")


def kernel_cmdline(pti: str, watchdog: bool, append: str, console: str = "ttyS0") -> str:
    """The test kernel's command line: the serial console, panic=-1 (a panic reboots, which
    ends the VM), `pti`, the lockup detectors off unless `watchdog`, then `append`."""
    # tsc=nowatchdog: no clocksource watchdog on the TSC. Kernel 7.3's watchdog checks another
    # CPU's TSC with interrupts off and times out by the timekeeping clock, jiffies until the
    # switch to tsc-early at boot; that switch is a stop_machine(), whose other CPU waits with
    # interrupts off too, and the two then wait for each other for ever (a boot hang, 1 in
    # ~40 boots of 2 vCPUs under load; tests/scenarios/selftest.py
    # test_a_cpu_waiting_with_interrupts_off_is_let_go plays it after boot).
    # no_timer_check: the kernel does not test at boot whether the IO-APIC's timer ticks
    # (arch/x86/kernel/apic/io_apic.c check_timer(): a few timer ticks within a delay loop).
    # Under TCG on a loaded host the vCPU's delay loop can outrun the ticks, and the boot ended
    # in "IO-APIC + timer doesn't work!" (a panic at 0.04 s; seen in a CI run with four guests on
    # two cores). QEMU's timer works; cloud images boot their VMs with the same option.
    # setcpuid=constant_tsc: every CPU delays by the boot CPU's calibration. TCG does not offer
    # the invariant TSC (CPUID 0x80000007 EDX[8]; `+invtsc` is refused), so the kernel leaves
    # X86_FEATURE_CONSTANT_TSC clear and each other CPU calibrates its own delay loop against
    # jiffies at bring-up (init/calibrate.c calibrate_delay_direct()). Under a loaded host that
    # came out at 1/20 of the boot CPU's TSC-based value, and that CPU's udelay()s were 20 times
    # short (in CI a 20 s bound of lbr_crash's ran out in 1 s; a panic there waits 50 ms, not
    # vpanic()'s second, for the others to stop). QEMU's TSC is the host's, constant; with the
    # flag the others take CPU 0's value (arch/x86/kernel/tsc.c calibrate_delay_is_known()).
    # The kernel taints itself for it (S, TAINT_CPU_OUT_OF_SPEC) and says so at boot; on an AMD
    # model it also prints "[Firmware Bug]: TSC doesn't count with P0 frequency!" (bsp_init_amd()
    # reads HWCR's TscFreqSel, which QEMU TCG leaves 0): this setting's, not a fault.
    nowatchdog = "" if watchdog else "nowatchdog "
    return f"console={console} panic=-1 pti={pti} {' '.join(GUEST_GUARDS)} {nowatchdog}{append}".strip()


def run_locked(name: str, kernel: str, run) -> Result:
    """`run(run directory)` for VM `name`, holding the run directory's lock."""
    if kernel not in VARIANTS:
        raise ValueError(f"kernel must be one of {VARIANTS}, not {kernel!r}")
    run_dir = OUT / "vm" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    # One VM per name at a time: two would share the run directory (console log, emulator
    # log, initramfs) and each read the other's ground truth.
    with open(run_dir / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"VM name {name!r} is in use by another running VM "
                               f"(its run directory {run_dir} would be shared): give this one another name")
        return run(run_dir)


def scenario_cpio(work: Path, script: str) -> bytes:
    """A cpio archive (newc) holding /scenario.sh with `script`, to append to an initramfs; made
    in directory `work`."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "scenario.sh").write_text(script + "\n")
    out = work / "scenario.cpio"
    sh("bash", "-c", 'source scripts/common.sh; in_root sh -c \'cd "$1" && echo scenario.sh '
       '| cpio -o -H newc --quiet -R 0:0\' _ "$1" > "$2"', "_", str(work), str(out))
    return out.read_bytes()


# --- Snapshots: boot once, restore many ------------------------------------------------------
#
# A run that Vm.restorable() allows starts from a snapshot of a guest that booted the same
# machine (kernel, command line, CPU model, vCPUs, memory, emulator arguments) up to the point
# where its /init waits for a scenario (tests/initramfs/init), saved with QEMU migration to a
# file, instead of booting: the boot's 2-10 s become a restore of well under a second. The
# snapshot's initramfs holds only busybox and /init; what is under test (lbr_dump.ko, the test
# modules and programs) and the scenario come in a payload on a virtio disk that is not part of
# the saved state, read once a line on the second serial port says go. The emulator plugin's
# state, which no QEMU snapshot holds, is saved by the plugin itself at the snapshot boot's end
# (its save=, refused unless nothing records) and loaded into the restore's fresh plugin
# (load=). Snapshots are cache entries (snap-KEY, KEY over every input of the boot), made on
# first use, and the boot's console and ground truth are kept with them: a restored run's
# console and emulator log are the boot's followed by the run's own, so what boot() checks of a
# boot holds for every restored run.

SNAPSHOT_FORMAT = 2
# The mark the snapshot boot's /init prints where it waits (tests/initramfs/init).
SNAPSHOT_POINT = "lbr-dump-vm: snapshot point"
# The payload disk: the payload's header sector at 1 MiB, its cpio archive at 2 MiB, past
# anything the kernel's partition scan reads at boot; the disk's size is fixed (the snapshot's
# device has it).
PAYLOAD_AT = 1 << 20
PAYLOAD_DISK = 64 << 20
RESTORED_LINE = re.compile(r"lbr-dump-vm: restored payload=(\d+) sha256=([0-9a-f]+) seed=([0-9a-f]+) "
                           r"reseed=(\d+)$", re.M)


def newc(files: list[tuple[str, int, bytes | None]]) -> bytes:
    """A cpio archive in the newc format (what the kernel unpacks as an initramfs, and busybox
    cpio reads) of (path, permissions, contents) entries, contents None for a directory; owner
    root, time 0, so that the same files make the same bytes."""
    out = bytearray()
    for ino, (name, perm, data) in enumerate(files + [("TRAILER!!!", 0, b"")], 1):
        trailer = name == "TRAILER!!!"
        mode = 0 if trailer else (0o040000 if data is None else 0o100000) | perm
        body = data or b""
        path = name.encode() + b"\0"
        fields = (0 if trailer else ino, mode, 0, 0, 2 if data is None else 1, 0, len(body), 0, 0, 0, 0,
                  len(path), 0)
        out += b"070701" + b"".join(b"%08X" % f for f in fields) + path
        out += bytes(-len(out) % 4) + body
        out += bytes(-len(out) % 4)
    return bytes(out)


def snapshot_initrd(kernel: str) -> bytes:
    """A snapshot boot's initramfs: busybox, /init and the mark that makes /init wait
    (/lbr-dump-vm.snapshot), from the variant's base initramfs (prepare_initramfs())."""
    stage = OUT / f"initramfs-{kernel}.cpio.d"
    dirs = ("bin", "dev", "lib", "lib/lbr-dump", "proc", "sys", "tmp")
    return newc([(d, 0o755, None) for d in dirs]
                + [("bin/busybox", 0o755, (stage / "bin/busybox").read_bytes()),
                   ("init", 0o755, (stage / "init").read_bytes()),
                   ("lbr-dump-vm.snapshot", 0o644, b"")])


def payload_disk(path: Path, kernel: str, script: str, seed: str) -> tuple[int, str]:
    """Writes a restored run's payload disk: /scenario.sh and the variant's modules and test
    programs (what its base initramfs has beyond snapshot_initrd()); returns the archive's size
    and SHA-256."""
    stage = OUT / f"initramfs-{kernel}.cpio.d"
    files = [("scenario.sh", 0o644, (script + "\n").encode())]
    files += [(f"lib/lbr-dump/{p.name}", 0o644, p.read_bytes()) for p in sorted((stage / "lib/lbr-dump").glob("*.ko"))]
    files += [(f"bin/{p.name}", 0o755, p.read_bytes()) for p in sorted((stage / "bin").glob("lbr-*"))]
    archive = newc(files)
    digest = sha256(archive)
    if 2 * PAYLOAD_AT + len(archive) > PAYLOAD_DISK:
        raise ValueError(f"the payload ({len(archive)} bytes) does not fit its disk")
    with open(path, "wb") as f:
        f.seek(PAYLOAD_AT)
        f.write(f"lbr-dump-payload 2 {len(archive)} {seed} {digest}\n".encode())
        f.seek(2 * PAYLOAD_AT)
        f.write(archive)
        f.truncate(PAYLOAD_DISK)
    return len(archive), digest


def sha256(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


@functools.cache
def file_sha256(path: Path) -> str:
    return sha256(path.read_bytes())


@functools.cache
def build_root_key() -> str:
    """The build root's cache entry and the versions of every package in it (its dpkg status):
    QEMU, its firmware and option ROMs (whose sizes a migration stream must fit) among them."""
    root = Path(sh("bash", "-c", 'source scripts/common.sh; echo "$BUILD_ROOT"'))
    return f"{root.name} {file_sha256(root / 'var/lib/dpkg/status')}"


@functools.cache
def emulator_source_key() -> str:
    """A hash of the emulator plugin's sources and the workspace's lock file: its build is not
    byte-for-byte the same in every checkout (source paths are in it), its sources are."""
    files = sorted(p for p in (REPO / "tools/lbr-emu").rglob("*") if p.is_file())
    return sha256(b"".join(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes()
                           for p in files + [REPO / "Cargo.lock"]))


@dataclasses.dataclass
class Snapshot:
    """A saved guest (see above): its cache directory holds `state` (QEMU's migration stream),
    initrd.cpio, console.log (the boot's console up to the snapshot point), for the emulator
    emu.jsonl (the boot's events) and emu-state.json (the plugin's save=), and key.json (what
    the key covers, for reading)."""

    dir: Path
    kernel: str
    emulate: bool
    seed: str = ""

    @staticmethod
    def get(vm: Vm, kdir: Path, accel: str) -> Snapshot | Result:
        """`vm`'s snapshot, made now if the cache has none (one maker per key at a time; a run
        wanting a snapshot being made waits for it). A failed snapshot boot is returned as its
        Result, which boot() fails as any failed boot."""
        initrd = snapshot_initrd(vm.kernel)
        emulate = ",".join(a for a in (vm.emulate or "").split(",") if a) or None
        desc = {
            "format": SNAPSHOT_FORMAT, "kernel": vm.kernel,
            "bzImage": file_sha256(kdir / "arch/x86/boot/bzImage"), "initrd": sha256(initrd),
            "machine": vm.machine(Path("KDIR"), accel, Path("INITRD")) + Snapshot.devices_for(Path("RUN")),
            "emulate": emulate, "emulator": emulator_source_key() if emulate else None,
            "root": build_root_key(),
        }
        import json
        key = sha256(json.dumps(desc, sort_keys=True).encode())[:16]
        cache = snapshot_cache()
        final = cache / f"snap-{key}"
        (cache / "snap.locks").mkdir(exist_ok=True)
        failed = final.with_name(final.name + ".failed")
        with open(cache / "snap.locks" / key, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (final / ".complete").exists():
                # A snapshot boot that failed in this same run of the suite is not tried again
                # by every test waiting for it: they fail at once with its console.
                mark = failed / "run-id"
                if mark.exists() and mark.read_text() == run_id():
                    console = (failed / "console.log").read_text()
                    return Result(console + f"\n[vm] this machine's snapshot boot failed earlier in this run"
                                  f" (console {failed / 'console.log'}); not tried again\n",
                                  False, 1, failed / "console.log", 0.0, [])
                made = Snapshot.make(vm, kdir, accel, initrd, desc, final)
                if isinstance(made, Result):
                    return made
            (final / ".last-used").touch()
        return Snapshot(final, vm.kernel, emulate is not None)

    def invalidate(self, why: str) -> str:
        """Removes this snapshot from the cache (QEMU could not load it: every run restoring it
        would fail the same way), so that the next run wanting it makes it again. Returns a line
        saying so."""
        key = self.dir.name.removeprefix("snap-")
        with open(self.dir.parent / "snap.locks" / key, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            (self.dir / ".complete").unlink(missing_ok=True)
            shutil.rmtree(self.dir, ignore_errors=True)
        return (f"\n[vm] QEMU could not load the snapshot {self.dir} ({why}): removed from the cache,"
                f" the next run wanting it makes it again\n")

    @staticmethod
    def devices_for(run_dir: Path, go: str | None = None) -> list[str]:
        """The devices a snapshot has beyond the machine: the second serial port (its backend
        `go`: none while the snapshot boots, a socket the harness writes the go line to in a
        restore) and the payload disk (run_dir/payload.img)."""
        return ["-chardev", go or "null,id=lbrgo", "-serial", "chardev:lbrgo",
                "-drive", f"file={run_dir / 'payload.img'},format=raw,if=none,id=lbrpayload",
                "-device", "virtio-blk-pci,drive=lbrpayload"]

    @staticmethod
    def make(vm: Vm, kdir: Path, accel: str, initrd: bytes, desc: dict, final: Path) -> Result | None:
        """Boots `vm`'s machine to the snapshot point and saves it into `final` (through a
        .tmp directory: a killed maker leaves no entry). None when made, else the boot's Result."""
        import json
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        (tmp / "initrd.cpio").write_bytes(initrd)
        with open(tmp / "payload.img", "wb") as f:
            f.truncate(PAYLOAD_DISK)
        qsock = tmp / "qmp.sock"
        cmd = vm.machine(kdir, accel, tmp / "initrd.cpio") + Snapshot.devices_for(tmp) + [
            "-no-reboot", "-qmp", f"unix:{qsock},server=on,wait=off"]
        if vm.emulate is not None:
            cmd += ["-plugin", f"{build_emulator()},{desc['emulate']},log={tmp / 'emu.jsonl'},"
                               f"save={tmp / 'emu-state.json'}"]
        saved: list[dict] = []

        def on_console(text: str) -> bool:
            if SNAPSHOT_POINT not in text:
                return False
            qmp(qsock, [("qmp_capabilities", {}), ("stop", {}),
                        ("migrate", {"uri": f"file:{tmp / 'state'}"})])
            deadline = time.monotonic() + 120
            while True:
                st = qmp(qsock, [("qmp_capabilities", {}), ("query-migrate", {})])
                if st.get("status") in ("completed", "failed", "cancelled"):
                    break
                if time.monotonic() > deadline:
                    st = {"status": f"still {st.get('status')} after 120 s"}
                    break
                time.sleep(0.05)
            saved.append(st)
            qmp(qsock, [("qmp_capabilities", {}), ("quit", {})])
            return True
        # (the console as it was at the stop: the guest may have printed past its mark)
        r = run_qemu(cmd, tmp / "console.log", vm.timeout, on_console)
        why = None
        if not saved or saved[0].get("status") != "completed":
            why = (f"the snapshot boot did not get to be saved: "
                   + (f"migration {saved[0]}" if saved else "no snapshot point"))
        elif vm.emulate is not None and not (tmp / "emu-state.json").exists():
            refused = [l for l in (tmp / "emu.jsonl").read_text().splitlines() if "save-refused" in l]
            why = f"the emulator did not save its state: {refused[:3]}"
        if why is not None:
            # Kept beside the entry (the next maker clears .tmp), marked with this run's id.
            failed = final.with_name(final.name + ".failed")
            shutil.rmtree(failed, ignore_errors=True)
            r.console += f"\n[vm] {why} (console kept in {failed / 'console.log'})\n"
            (tmp / "console.log").write_text(r.console)
            (tmp / "run-id").write_text(run_id())
            tmp.rename(failed)
            r.log = failed / "console.log"
            r.exit_code = r.exit_code if r.exit_code else 1
            return r
        (tmp / "console.log").write_text(r.console)
        (tmp / "key.json").write_text(json.dumps(desc, indent=1, sort_keys=True))
        (tmp / "payload.img").unlink()
        qsock.unlink(missing_ok=True)
        (tmp / ".complete").touch()
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        return None

    def devices(self, run_dir: Path, script: str) -> list[str]:
        """A restore's devices (devices_for()), its payload disk written with `script`."""
        self.seed = os.urandom(32).hex()
        self.payload = payload_disk(run_dir / "payload.img", self.kernel, script, self.seed)
        (run_dir / "emu-run.jsonl").unlink(missing_ok=True)
        go = run_dir / "go.sock"
        go.unlink(missing_ok=True)
        return self.devices_for(run_dir, f"socket,id=lbrgo,path={go},server=on,wait=off")

    def go(self, diag: Path, go: Path, stop) -> None:
        """A restore's start (run_qemu's on_start): once QEMU has loaded the snapshot (it then
        stays paused, as it was saved), lets the guest run, and sends it the go line. Gives up
        when `stop` (a threading.Event) is set: QEMU ended."""
        import socket
        deadline = time.monotonic() + 120
        while not stop.is_set():
            try:
                status = qmp(diag, [("qmp_capabilities", {}), ("query-status", {})], timeout=10)["status"]
            except (OSError, RuntimeError, ValueError):
                status = "not answering"
            if status == "paused":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"QEMU did not load the snapshot {self.dir} within 120 s: it is {status}")
            time.sleep(0.02)
        else:
            return
        qmp(diag, [("qmp_capabilities", {}), ("cont", {})])
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(go))
        self.sock.sendall(b"go\n")

    def joined(self, r: Result, run_dir: Path) -> None:
        """Makes a restored run's Result whole: its console is the snapshot boot's followed by
        its own, and so is its emulator log (the boot's events but its `exit`, then the run's
        but its `start`: the plugin's restored event numbers follow the boot's)."""
        import json
        if getattr(self, "sock", None) is not None:
            self.sock.close()
        load = LOAD_FAILED.search(r.console)
        if load is not None:
            r.restored = self.dir
            r.console += self.invalidate(load[0].strip())
            r.log.write_text(r.console)
            return
        boot = (self.dir / "console.log").read_text()
        r.console = boot + r.console
        r.log.write_text(r.console)
        r.restored, r.seed, r.payload, r.boot_console = self.dir, self.seed, self.payload, len(boot)
        if self.emulate and r.emu_log is not None:
            run = run_dir / "emu-run.jsonl"
            lines = [l for l in (self.dir / "emu.jsonl").read_text().splitlines()
                     if l.strip() and json.loads(l)["event"] != "exit"]
            if run.exists():
                lines += [l for l in run.read_text().splitlines() if l.strip() and json.loads(l)["event"] != "start"]
            r.emu_log.write_text("".join(l + "\n" for l in lines))


# QEMU's words when an -incoming migration stream cannot be loaded (migration/savevm.c,
# migration/migration.c).
LOAD_FAILED = re.compile(r"^qemu-system-\S+: (?:load of migration failed|.*error while loading state).*$", re.M)


@functools.cache
def run_id() -> str:
    """This run of the suite (tests/run.py sets LBR_DUMP_RUN_ID for its jobs), or of this
    process: what a failed snapshot boot is marked with."""
    return os.environ.get("LBR_DUMP_RUN_ID") or f"pid-{os.getpid()}"


def snapshot_cache() -> Path:
    """The build cache (scripts/common.sh's $CACHE), where snapshots are kept; tests/run.py
    reads it through here too."""
    cache = Path(os.environ.get("LBR_DUMP_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                 / "lbr-dump")
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def qmp(sock: Path, commands: list[tuple[str, dict]], timeout: float = 300):
    """Runs QMP commands in order on QEMU's socket, each to its answer (events are skipped); an
    error answer raises. The connection may end after "quit". Returns the last answer's value."""
    import json
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(sock))
    f = s.makefile("rwb")
    try:
        json.loads(f.readline())  # the greeting
        for name, args in commands:
            f.write(json.dumps({"execute": name, "arguments": args}).encode() + b"\n")
            f.flush()
            while True:
                line = f.readline()
                if not line:
                    if name == "quit":
                        return None
                    raise RuntimeError(f"QMP: connection closed during {name}")
                msg = json.loads(line)
                if "error" in msg:
                    raise RuntimeError(f"QMP {name}: {msg['error']}")
                if "return" in msg:
                    break
        return msg["return"]
    finally:
        f.close()
        s.close()


@functools.cache
def kernel_dir(kernel: str) -> Path:
    """The kernel build directory of a variant, brought up to date once per process; for
    `debian`, the module tree of Debian's own kernel, whose arch/x86/boot/bzImage is Debian's
    vmlinuz (scripts/debian.sh)."""
    if kernel == "debian":
        return Path(sh("scripts/debian.sh"))
    return Path(sh("scripts/kernel.sh", kernel))


@functools.cache
def prepare_initramfs(kernel: str) -> Path:
    """The base initramfs for a kernel variant, rebuilt from the current module build once per
    process."""
    against = "module" if kernel == "builtin" else kernel
    modules = [sh("scripts/module.sh", str(d), against) for d in sorted((REPO / "tests/modules").iterdir())]
    if kernel != "builtin":
        modules.append(sh("scripts/module.sh", str(REPO), kernel))
    return Path(sh("scripts/initramfs.sh", str(OUT / f"initramfs-{kernel}.cpio"), *modules))


@functools.cache
def build_emulator() -> Path:
    """Builds the lbr-emu plugin (host cargo) and returns its path."""
    sh("cargo", "build", "--quiet", "--release", "-p", "lbr-emu", capture=False)
    return TARGET / "release" / "liblbr_emu.so"


def run_qemu(cmd: list[str], log: Path, timeout: float, on_console=None, on_timeout=None,
             on_start=None) -> Result:
    """Runs QEMU in the build root, console to `log`, killing everything on timeout.
    `on_console(text so far)` is called as output arrives until it returns True; on timeout,
    `on_timeout(session id of the run's processes)` before they are killed. `on_start(stop)`
    runs in a thread of its own once QEMU is started (a restore's `cont`) and returns when the
    threading.Event `stop` is set at the run's end; what it raises ends the run and is raised
    here."""
    import threading
    wrapped = ["bash", "-c", 'source scripts/common.sh; in_root "$@"', "_", *cmd]
    start = time.monotonic()
    chunks: list[bytes] = []
    timed_out = False
    failed: list[BaseException] = []
    stop = threading.Event()
    starter_thread = None
    with open(log, "wb") as f:
        p = subprocess.Popen(wrapped, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        os.set_blocking(p.stdout.fileno(), False)
        if on_start is not None:
            def starter() -> None:
                try:
                    on_start(stop)
                except BaseException as e:  # noqa: B036 (handed to the caller)
                    failed.append(e)
            starter_thread = threading.Thread(target=starter, daemon=True)
            starter_thread.start()
        try:
            while True:
                data = p.stdout.read()
                if data:
                    chunks.append(data)
                    f.write(data)
                    f.flush()
                    if on_console is not None and on_console(b"".join(chunks).decode("utf-8", "replace")):
                        on_console = None
                elif p.poll() is not None:
                    break
                else:
                    time.sleep(0.05)
                if failed:
                    break
                if time.monotonic() - start > timeout:
                    try:
                        p.wait(timeout=2)  # one that is ending (a `quit` sent just now) ends
                        continue
                    except subprocess.TimeoutExpired:
                        pass
                    timed_out = True
                    if on_timeout is not None:
                        try:
                            on_timeout(p.pid)
                        except Exception as e:  # the report is a help, never the failure
                            print(f"hang report failed: {e!r}", file=sys.stderr, flush=True)
                    break
        finally:
            stop.set()
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            if starter_thread is not None:
                starter_thread.join(timeout=30)
            rest = p.stdout.read()
            if rest:
                chunks.append(rest)
                f.write(rest)
    if failed:
        raise failed[0]
    console = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return Result(console, timed_out, None if timed_out else p.returncode, log,
                  time.monotonic() - start, cmd)


# `info registers -a`: each vCPU's number, RIP, CPL and halt state, RFLAGS; the IDT's base.
CPU_HEAD = re.compile(r"^CPU#(\d+)$", re.M)
RIP = re.compile(r"RIP=([0-9a-f]{16})")
CPL_HLT = re.compile(r"CPL=(\d).*HLT=(\d)")
RFL = re.compile(r"RFL=([0-9a-f]+)")
IDT = re.compile(r"^IDT=\s*([0-9a-f]+)", re.M)


def hmp(sock: Path, command: str, timeout: float = 20) -> str:
    """One human monitor command through QMP (human-monitor-command); its output."""
    out = qmp(sock, [("qmp_capabilities", {}), ("human-monitor-command", {"command-line": command})],
              timeout)
    return out.replace("\r\n", "\n")


class Symbols:
    """vmlinux's text symbols (nm), to name a guest address once the KASLR offset is known."""

    def __init__(self, vmlinux: Path):
        out = subprocess.run(["nm", "-n", str(vmlinux)], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
        self.syms = [(int(a, 16), n) for a, t, n in
                     (l.split()[:3] for l in out.splitlines() if len(l.split()) >= 3)
                     if t in "tTwW"]
        self.addrs = [a for a, _ in self.syms]
        self.by_name = {n: a for a, n in self.syms}

    def name(self, addr: int) -> str:
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0 or addr - self.addrs[i] > 0x100000:
            return "?"
        a, n = self.syms[i]
        return f"{n}+{addr - a:#x}"


def kaslr_offset(sock: Path, regs: str, syms: Symbols) -> int | None:
    """The running kernel's KASLR offset: IDT gate 3 (#BP, a gate lbr-dump never takes) holds
    the run-time address of asm_exc_int3."""
    m = IDT.search(regs)
    want = syms.by_name.get("asm_exc_int3")
    if m is None or want is None:
        return None
    out = hmp(sock, f"x /2gx {int(m[1], 16) + 3 * 16:#x}")
    words = [int(w, 16) for w in re.findall(r":\s*0x([0-9a-f]+)\s+0x([0-9a-f]+)", out)[0]]
    lo, hi = words
    handler = (lo & 0xffff) | ((lo >> 32) & 0xffff0000) | (hi & 0xffffffff) << 32
    return handler - want


def hang_report(run_dir: Path, sock: Path, session: int, vmlinux: Path) -> str:
    """What a VM that timed out was doing, before it is killed: each vCPU's RIP (named in
    vmlinux), privilege level, interrupt flag and halt state, read twice a second apart (a vCPU whose RIP does
    not move is stuck there), and the QEMU threads' stacks (gdb), which show a vCPU thread
    blocked in QEMU or in the emulator plugin. Written to hang-registers.txt and
    hang-threads.txt in `run_dir`; the summary is returned."""
    lines = []
    try:
        syms = Symbols(vmlinux)
    except (OSError, subprocess.CalledProcessError) as e:
        syms = None
        lines.append(f"no symbols: {e}")
    samples = []
    for i in range(2):
        if i:
            time.sleep(1)
        try:
            samples.append(hmp(sock, "info registers -a"))
        except (OSError, RuntimeError, ValueError) as e:
            lines.append(f"QMP did not answer (QEMU's main loop is stuck?): {e!r}")
            break
    (run_dir / "hang-registers.txt").write_text("\n\n".join(samples))
    off = None
    if samples and syms is not None:
        try:
            off = kaslr_offset(sock, samples[0], syms)
        except (OSError, RuntimeError, ValueError, IndexError) as e:
            lines.append(f"no KASLR offset: {e!r}")
    for n, regs in enumerate(samples):
        for head, body in zip(CPU_HEAD.finditer(regs), re.split(r"^CPU#\d+$", regs, flags=re.M)[1:]):
            rip, st = RIP.search(body), CPL_HLT.search(body)
            if rip is None or st is None:
                continue
            addr = int(rip[1], 16)
            where = syms.name(addr - off) if (syms is not None and off is not None and st[1] == "0") else ""
            rfl = RFL.search(body)
            irqs = "" if rfl is None else (" interrupts on" if int(rfl[1], 16) & 0x200 else " interrupts off")
            lines.append(f"sample {n + 1}: vCPU {head[1]} RIP {addr:#x} {where} CPL {st[1]}{irqs}"
                         f"{' halted' if st[2] == '1' else ''}")
    try:
        lines += qemu_threads(run_dir, session)
    except (OSError, subprocess.SubprocessError) as e:
        lines.append(f"no QEMU thread stacks: {e!r}")
    return "\n".join(lines)


def qemu_threads(run_dir: Path, session: int) -> list[str]:
    """One line per thread of the run's QEMU (session `session`): its name and innermost frames,
    from gdb (all stacks in hang-threads.txt)."""
    lines = []
    pids = subprocess.run(["pgrep", "-s", str(session), "qemu-system"], stdout=subprocess.PIPE,
                          text=True).stdout.split()
    threads = ""
    if pids and shutil.which("gdb") is None:
        lines.append("no gdb on this machine: no QEMU thread stacks")
    elif pids:
        # QEMU runs in the build root: its libraries are those under its /proc/PID/root.
        threads = subprocess.run(["gdb", "-nx", "-batch", "-iex", f"set sysroot /proc/{pids[0]}/root",
                                  "-iex", "set auto-load safe-path /", "-p", pids[0], "-ex", "set pagination off",
                                  "-ex", "thread apply all bt 25"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=120).stdout
        (run_dir / "hang-threads.txt").write_text(threads)
        # The plugin's frames and the lock waits are what tell a deadlock from a busy guest.
        for t in re.split(r"\n(?=Thread )", threads):
            if not t.startswith("Thread "):
                continue
            head = t.splitlines()[0]
            frames = [l for l in t.splitlines()[1:] if l.startswith("#")]
            named = [re.sub(r"^#\d+\s+(0x[0-9a-f]+ in )?", "", f).split(" (")[0] for f in frames[:8]]
            name = re.search(r'"([^"]*)"', head)
            lines.append(f"{head.split(' (')[0]} {name[1] if name else ''}: " + " < ".join(named))
    else:
        lines.append("no QEMU process found for the thread stacks")
    return lines


# --- Bochs: the FRED CPU ---------------------------------------------------------------------
#
# QEMU TCG does not emulate FRED; Bochs 3.1 does (CPU model wildcat_lake), built by
# scripts/bochs.sh from the source in third_party/bochs/. Bochs has no -kernel: its BIOS boots a
# disk whose boot sector (scripts/bochs-boot.S) loads the kernel's real-mode part, its
# protected-mode part and the initramfs from the disk as a boot loader does (the 16-bit boot
# protocol of Documentation/arch/x86/boot.rst; linux_images() fills in the header), so no boot
# loader package is needed (GRUB would need grub-pc-bin, grub-common, xorriso and mtools in the
# build root).


def bochs_dir() -> Path:
    """The Bochs build (scripts/bochs.sh: bin/bochs and its BIOS images), built once per
    process; a failed build is not tried again by each test that wants it."""
    path, error = _bochs_build()
    if error is not None:
        raise RuntimeError(error)
    return path


@functools.cache
def _bochs_build() -> tuple[Path | None, str | None]:
    r = subprocess.run(["scripts/bochs.sh"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        tail = "\n".join(r.stderr.splitlines()[-5:])
        return None, f"scripts/bochs.sh failed with exit code {r.returncode}:\n{tail}"
    return Path(r.stdout.strip()), None


@functools.cache
def bochs_boot_sector() -> bytes:
    """scripts/bochs-boot.S assembled (clang and lld of the build root), once per process."""
    out = OUT / "bochs"
    out.mkdir(parents=True, exist_ok=True)
    base = out / f"boot-{os.getpid()}"  # a process's own files: scenario workers may build at once
    try:
        sh("bash", "-c", 'source scripts/common.sh; '
           'in_root clang --target=i386-unknown-none -m16 -c scripts/bochs-boot.S -o "$1.o" && '
           'in_root ld.lld -Ttext=0x7c00 -e _start --oformat=binary "$1.o" -o "$1.bin"', "_", str(base))
        return base.with_suffix(".bin").read_bytes()
    finally:
        base.with_suffix(".o").unlink(missing_ok=True)
        base.with_suffix(".bin").unlink(missing_ok=True)


# Where the kernel's real-mode part goes in guest memory (its segment's start; its heap and
# stack end at +HEAP_END, the command line follows), as scripts/bochs-boot.S has it; the
# protected-mode kernel goes to 1 MiB (its code32_start, the protocol's default for a bzImage).
MIB = 1 << 20
SETUP_ADDR = 0x20000
HEAP_END = 0xe000
# Where scripts/bochs-boot.S has its table of images to load: {sectors, LBA, address} each.
BOOT_LOADS = 0x180


def boot_disk(boot_sector: bytes, images: list[tuple[bytes, int]]) -> tuple[bytes, int]:
    """The Bochs test VM's disk: the boot sector with its table of `images` ((data, guest
    physical address) each) filled in, the images after it, whole sectors each, the disk made
    whole cylinders of 16 heads and 63 sectors. Returns the disk and its cylinders."""
    import struct
    table, body, lba = b"", b"", 1
    for data, addr in images:
        sectors = -(-len(data) // 512)
        table += struct.pack("<III", sectors, lba, addr)
        body += data.ljust(sectors * 512, b"\0")
        lba += sectors
    if len(boot_sector) != 512 or boot_sector[BOOT_LOADS:BOOT_LOADS + 48] != bytes(48) or len(table) > 36:
        raise ValueError("not scripts/bochs-boot.S's sector, or too many images")
    disk = boot_sector[:BOOT_LOADS] + table.ljust(48, b"\0") + boot_sector[BOOT_LOADS + 48:] + body
    cylinders = -(-len(disk) // (16 * 63 * 512))
    return disk.ljust(cylinders * 16 * 63 * 512, b"\0"), cylinders


def linux_images(bzimage: bytes, cmdline: str, initrd_addr: int, initrd_size: int) -> tuple[bytes, bytes]:
    """A bzImage cut for loading at SETUP_ADDR and 1 MiB, as the boot protocol's loader does
    (Documentation/arch/x86/boot.rst, "Sample boot configuration"): the real-mode part (the
    boot sector and setup sectors) with the loader's fields of its header filled in and the
    command line after its heap, and the protected-mode part."""
    import struct
    setup = bytearray(bzimage[:(bzimage[0x1f1] or 4) * 512 + 512])
    if setup[0x202:0x206] != b"HdrS" or struct.unpack_from("<H", setup, 0x206)[0] < 0x20c:
        raise ValueError("not a bzImage of boot protocol 2.12 or later")
    if struct.unpack_from("<I", setup, 0x214)[0] != 0x100000:
        raise ValueError("the bzImage's code32_start is not 1 MiB")
    if initrd_addr + initrd_size > struct.unpack_from("<I", setup, 0x22c)[0] + 1:
        raise ValueError("the initramfs is above the kernel's initrd_addr_max")
    if len(cmdline) >= struct.unpack_from("<I", setup, 0x238)[0] or len(setup) > HEAP_END - 0x200:
        raise ValueError("the command line or the setup code is too long")
    setup[0x210] = 0xff                                        # type_of_loader: undefined
    setup[0x211] |= 0x80                                       # loadflags: CAN_USE_HEAP
    struct.pack_into("<II", setup, 0x218, initrd_addr, initrd_size)  # ramdisk_image, _size
    struct.pack_into("<H", setup, 0x224, HEAP_END - 0x200)     # heap_end_ptr
    struct.pack_into("<I", setup, 0x228, SETUP_ADDR + HEAP_END)  # cmd_line_ptr
    low = bytes(setup).ljust(HEAP_END, b"\0") + cmdline.encode() + b"\0"
    return low, bzimage[len(setup):]


BOCHS_LOG_LIMIT = 256 * MIB
# Bochs's log: the reset of the whole machine (at power-on, and at each reboot of the guest).
BOCHS_RESET = re.compile(rb"bx_pc_system_c::Reset\((HARDWARE|SOFTWARE)\) called")
# Bochs's log: the guest entered ACPI S3, which Bochs does with a reset (iodev/acpi.cc).
BOCHS_S3 = re.compile(rb"ACPI control: suspend to ram")
# A guest script line that says whether the guest runs FRED: how many CPUs it has, how many
# have `fred` among their /proc/cpuinfo flags, and whether the kernel has FRED's entry code
# (asm_fred_entrypoint_user in /proc/kallsyms: CONFIG_X86_FRED). Both are needed: a kernel
# without CONFIG_X86_FRED runs the IDT but still shows the CPU's flag (seen under Bochs: the
# flag is cleared only by a FRED kernel that turns FRED off, with fred=off); 7.3 prints no FRED
# line in its log. harness.fred_state() reads the line.
FRED_CHECK = ('echo "lbr-dump-vm: cpus=$(grep -c ^processor /proc/cpuinfo) '
              'fred=$(grep ^flags /proc/cpuinfo | grep -cw fred) '
              'fred_entry=$(grep -cw asm_fred_entrypoint_user /proc/kallsyms)" > /dev/kmsg\n')
# (written to /dev/kmsg: a kernel log line, whole up to its end, which a shell's tty output
# interleaved with the kernel's is not always; tty output may still come before it on its line,
# the kernel's console printing being deferred)
FRED_LINE = re.compile(r"lbr-dump-vm: cpus=(\d+) fred=(\d+) fred_entry=(\d+)$", re.M)
# The guest's first lines under Bochs, before the scenario's script: where the kernel is (its
# KASLR offset, for the hang report), FRED_CHECK, and the file that has the test /init wait for
# the serial port to send everything before it reboots (Bochs's UART sends at its line rate,
# QEMU's at once: what the tty still held at the reset would be lost).
BOCHS_PROLOGUE = ('echo "lbr-dump-vm: _text $(grep -w _text /proc/kallsyms | cut -d" " -f1)" > /dev/kmsg\n'
                  + FRED_CHECK + ": > /lbr-dump-vm.drain\n")
TEXT_LINE = re.compile(r"lbr-dump-vm: _text ([0-9a-f]+)$", re.M)


@dataclasses.dataclass
class BochsVm:
    """A VM under Bochs, the FRED CPU: the same kernel variants, initramfs, command line and
    guest script as Vm, on Bochs's `cpu` model (wildcat_lake: FRED) with `smp` CPUs, the serial
    console to out/vm/NAME/console.log, Bochs's own log to bochs.log there. A run ends when the
    guest resets the machine (a reboot: the test /init's at its end, a panic's with panic=-1),
    when it powers off (Bochs then exits, with status 1), or at `timeout`; a run that times out
    gets a hang report (hang_report_bochs()). The guest's script runs after BOCHS_PROLOGUE's
    lines. Bochs has no LBR stack or BTS; it runs with ignore_bad_msrs=0 (an MSR the model lacks
    raises #GP, as on a real part) and scripts/bochs-msrs.def's MSRs: the kernel's few that the
    model lacks, and DEBUGCTL with one LASTBRANCHFROM/TO pair that record nothing. No QMP
    and no plugins: no emulator, memory dumps, wake-ups, NMIs or second boots here."""

    name: str = "bochs"
    kernel: str = "module"
    cpu: str = "wildcat_lake"
    smp: int = 1
    memory: str = "512M"
    pti: str = "off"
    append: str = ""
    script: str = ""
    timeout: float = 300.0
    watchdog: bool = False
    # What harness.boot() reads of a Vm, fixed here.
    emulate = None
    dump_after = None
    HANG = "each CPU's state where Bochs was stopped, once: it has no monitor to sample it twice"

    def run(self) -> Result:
        return run_locked(self.name, self.kernel, self._run)

    def _run(self, run_dir: Path) -> Result:
        bochs = bochs_dir()
        kdir = kernel_dir(self.kernel)
        initrd = (prepare_initramfs(self.kernel).read_bytes()
                  + scenario_cpio(run_dir / "scenario.d", BOCHS_PROLOGUE + self.script))
        mib = int(self.memory.removesuffix("M"))
        # The initramfs high, as GRUB puts it: below the top 16 MiB (the BIOS's ACPI tables are
        # at the top of RAM), away from where the kernel decompresses itself.
        initrd_addr = ((mib - 16) * MIB - len(initrd)) & ~(MIB - 1)
        low, high = linux_images((kdir / "arch/x86/boot/bzImage").read_bytes(),
                                 # 115200 baud: the kernel's console waits for the UART,
                                 # which Bochs runs at the line rate (9600 by default)
                                 kernel_cmdline(self.pti, self.watchdog, self.append, "ttyS0,115200"),
                                 initrd_addr, len(initrd))
        disk, cylinders = boot_disk(bochs_boot_sector(),
                                    [(low, SETUP_ADDR), (high, 0x100000), (initrd, initrd_addr)])
        (run_dir / "disk.img").write_bytes(disk)
        # Bochs locks its disk images with DISK.lock, which a killed Bochs leaves behind (the run
        # directory's own lock keeps any other VM out).
        (run_dir / "disk.img.lock").unlink(missing_ok=True)
        console = run_dir / "console.log"
        blog = run_dir / "bochs.log"
        console.unlink(missing_ok=True)
        blog.unlink(missing_ok=True)
        (run_dir / "bochsrc").write_text(f"""\
megs: {mib}
cpu: model={self.cpu}, count={self.smp}, reset_on_triple_fault=1, ips=100000000, ignore_bad_msrs=0, msrs="{REPO}/scripts/bochs-msrs.def"
romimage: file={bochs}/BIOS-bochs-latest
vgaromimage: file={bochs}/VGABIOS-lgpl-latest.bin
display_library: nogui
clock: sync=none, time0=utc
ata0-master: type=disk, path={run_dir}/disk.img, mode=flat, cylinders={cylinders}, heads=16, spt=63
boot: disk
port_e9_hack: enabled=1
com1: enabled=1, mode=file, dev={console}
log: {blog}
panic: action=fatal
error: action=report
info: action=report
debug: action=ignore
""")
        cmd = [str(bochs / "bin/bochs"), "-q", "-f", str(run_dir / "bochsrc")]
        hang: list[str] = []

        def on_timeout(session: int) -> None:
            hang.append(hang_report_bochs(run_dir, blog, console, session, kdir / "vmlinux"))

        r = run_bochs(cmd, console, blog, run_dir / "bochs.out", self.timeout, on_timeout)
        r.hang = hang[0] if hang else None
        if not r.console and not r.timed_out:
            raise RuntimeError(f"Bochs ended (status {r.exit_code}) before the guest wrote to its console; "
                               f"its output ({run_dir / 'bochs.out'}) ends:\n"
                               + "\n".join((run_dir / "bochs.out").read_text(errors="replace").splitlines()[-8:]))
        return r


def run_bochs(cmd: list[str], console: Path, blog: Path, out: Path, timeout: float, on_timeout) -> Result:
    """Runs Bochs in the build root until the guest resets the machine a second time (its
    reboot: Bochs, unlike QEMU, has no -no-reboot), Bochs exits (at the guest's power-off, or a
    panic of Bochs), or `timeout`; on timeout `on_timeout(session id)` runs before everything is
    killed. Bochs's own output goes to `out`. Bochs runs under `timeout`: a runner killed
    before its `finally` (SIGTERM, SIGKILL) would otherwise leave it rebooting the guest for
    ever in a session of its own, eating a core."""
    wrapped = ["bash", "-c", 'source scripts/common.sh; in_root "$@"', "_",
               "timeout", "-s", "KILL", str(int(timeout) + 120), *cmd]
    start = time.monotonic()
    timed_out = False
    with open(out, "wb") as f:
        p = subprocess.Popen(wrapped, cwd=REPO, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            seen = resets = 0
            while p.poll() is None and resets < 2:
                time.sleep(0.1)
                if blog.exists():  # read as it grows, whole lines
                    with open(blog, "rb") as b:
                        b.seek(seen)
                        chunk = b.read()
                    chunk = chunk[:chunk.rfind(b"\n") + 1]
                    seen += len(chunk)
                    # (Bochs's suspend to RAM is a reset too, which the BIOS turns into
                    # the guest's resume: not a reboot)
                    resets += len(BOCHS_RESET.findall(chunk)) - len(BOCHS_S3.findall(chunk))
                # A guest stuck in a loop that Bochs reports on every turn (a fault it cannot
                # deliver) fills the disk at about 25 MB/s: stopped as a hang.
                flood = seen > BOCHS_LOG_LIMIT
                if flood or time.monotonic() - start > timeout:
                    timed_out = True
                    if flood:
                        print(f"Bochs's log {blog} passed {BOCHS_LOG_LIMIT >> 20} MiB: stopped as hung",
                              file=sys.stderr, flush=True)
                    try:
                        on_timeout(p.pid)
                    except Exception as e:  # the report is a help, never the failure
                        print(f"hang report failed: {e!r}", file=sys.stderr, flush=True)
                    break
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    text = console.read_bytes().decode("utf-8", "replace").replace("\r\n", "\n") if console.exists() else ""
    # Ended at the guest's reboot: 0, as QEMU's exit status with -no-reboot.
    status = None if timed_out else 0 if resets >= 2 else p.returncode
    return Result(text, timed_out, status, console, time.monotonic() - start, cmd)


# Bochs's dump of a CPU's state (BX_CPU_C::debug(), logged as each CPU's lines at its exit).
BOCHS_CPU_LINE = re.compile(r"\[CPU(\d+)\s*\] (.*)$", re.M)


def hang_report_bochs(run_dir: Path, blog: Path, console: Path, session: int, vmlinux: Path) -> str:
    """What a Bochs VM that timed out was doing: Bochs has no monitor, but it logs each CPU's
    state when it exits, so Bochs is stopped (SIGINT: it panics, "SIGNAL 2 caught", and exits)
    and each CPU's RIP (named in vmlinux, the KASLR offset from the guest's `_text` line of
    BOCHS_PROLOGUE), privilege level, interrupt flag and activity state are read from its log.
    The CPU lines are also written to hang-registers.txt in `run_dir`; the summary is returned."""
    pids = subprocess.run(["pgrep", "-s", str(session), "-x", "bochs"], stdout=subprocess.PIPE,
                          text=True).stdout.split()
    if not pids:
        return "no Bochs process found to stop"
    start = blog.stat().st_size if blog.exists() else 0
    os.kill(int(pids[0]), signal.SIGINT)
    for _ in range(100):
        if subprocess.run(["kill", "-0", pids[0]], stderr=subprocess.DEVNULL).returncode != 0:
            break
        time.sleep(0.1)
    with open(blog, "rb") as b:
        b.seek(start)
        dump = b.read().decode("utf-8", "replace")
    cpus: dict[int, list[str]] = {}
    for m in BOCHS_CPU_LINE.finditer(dump):
        cpus.setdefault(int(m[1]), []).append(m[2])
    (run_dir / "hang-registers.txt").write_text(
        "\n\n".join(f"CPU {n}\n" + "\n".join(lines) for n, lines in sorted(cpus.items())))
    lines = []
    text = console.read_text(errors="replace") if console.exists() else ""
    syms = off = None
    m = TEXT_LINE.search(text)
    try:
        syms = Symbols(vmlinux)
        if m is not None and "_text" in syms.by_name:
            off = int(m[1], 16) - syms.by_name["_text"]
        else:
            lines.append("no KASLR offset: the guest did not get to print its _text")
    except (OSError, subprocess.CalledProcessError) as e:
        lines.append(f"no symbols: {e}")
    for n, body in sorted(cpus.items()):
        body = "\n".join(body)
        rip = re.search(r"\| RIP=([0-9a-f]+)", body)
        cs = re.search(r"\|  CS:[0-9a-f]{4}\( [0-9a-f]{4}\| \d\|  (\d)\)", body)
        fl = re.search(r"\| EFLAGS=[0-9a-f]+: (.*)$", body, re.M)
        state = re.search(r"CPU is in .* \(([^)]*)\)", body)
        if rip is None:
            continue
        addr = int(rip[1], 16)
        cpl = cs[1] if cs else "?"
        where = syms.name(addr - off) if (syms is not None and off is not None and cpl == "0") else ""
        irqs = "" if fl is None else (" interrupts on" if " IF " in f" {fl[1]} " else " interrupts off")
        lines.append(f"sample 1: vCPU {n} RIP {addr:#x} {where} CPL {cpl}{irqs}"
                     f"{' ' + state[1] if state and state[1] != 'active' else ''}")
    if not cpus:
        lines.append(f"Bochs logged no CPU state when stopped (see {blog})")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="manual", help="run directory name under out/vm/")
    ap.add_argument("--kernel", choices=VARIANTS, default="module")
    ap.add_argument("--cpu", help="QEMU -cpu model (default Skylake-Client), or Bochs's (wildcat_lake)")
    ap.add_argument("--smp", type=int, default=1)
    ap.add_argument("--pti", default="off", choices=("on", "off", "auto"))
    ap.add_argument("--append", default="", help="extra kernel command line")
    ap.add_argument("--script", default="", help="guest shell script (text)")
    ap.add_argument("--script-file", type=Path, help="guest shell script (file)")
    ap.add_argument("--emulate", help="run under the lbr-emu plugin with these plugin arguments")
    ap.add_argument("--accel", default="auto", choices=("auto", "kvm", "tcg"))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--qemu-arg", action="append", default=[], help="extra QEMU argument")
    ap.add_argument("--bochs", action="store_true",
                    help="run under Bochs (FRED; --cpu is then a Bochs model, default wildcat_lake)")
    a = ap.parse_args()
    script = a.script_file.read_text() if a.script_file else a.script
    if a.bochs:
        if a.emulate or a.qemu_arg or a.accel != "auto":
            ap.error("--emulate, --qemu-arg and --accel are QEMU's")
        vm = BochsVm(name=a.name, kernel=a.kernel, cpu=a.cpu or "wildcat_lake", smp=a.smp, pti=a.pti,
                     append=a.append, script=script, timeout=a.timeout)
    else:
        vm = Vm(name=a.name, kernel=a.kernel, cpu=a.cpu or "Skylake-Client", smp=a.smp, pti=a.pti,
                append=a.append, script=script, emulate=a.emulate, accel=a.accel, timeout=a.timeout,
                qemu_args=a.qemu_arg)
    r = vm.run()
    sys.stdout.write(r.console)
    print(f"\n[vm] {'timed out' if r.timed_out else 'exited'} after {r.seconds:.1f}s; "
          f"console log: {r.log}; command: {shlex.join(r.command)}", file=sys.stderr)
    if r.hang:
        print(f"[vm] what the VM was doing when it timed out:\n{r.hang}", file=sys.stderr)
    return 0 if r.finished else 1


if __name__ == "__main__":
    sys.exit(main())
