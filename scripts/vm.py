#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Boot the lbr-dump test VM once: build what it needs, run QEMU, capture the serial console.

Used by the test scenarios (tests/scenarios/*.py, through tests/harness.py) and by hand:

    scripts/vm.py --cpu Skylake-Client --smp 2 --script 'insmod /lib/lbr-dump/lbr_dump.ko'
    scripts/vm.py --emulate model=skylake ...     # run under the branch-record emulator plugin

QEMU runs inside the pinned build root (scripts/common.sh in_root): its own PID namespace, so
killing the run (timeout, Ctrl-C, a crash of this script) leaves no QEMU behind. The console is
written to --log as it arrives and returned. A run ends when the guest reboots (the test /init
reboots after its script; panic=-1 reboots on panic; QEMU runs with -no-reboot) or on timeout.
With `boots=2` the guest may reboot once (a warm reset: QEMU's system reset keeps guest RAM, so
what the first kernel left in memory, such as a ramoops record, is there for the second), and
the run ends at the second reboot; each boot's console (and ground truth, under the emulator) is
kept apart.
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
VARIANTS = ("module", "builtin", "nocet")


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

    def run(self) -> Result:
        if self.kernel not in VARIANTS:
            raise ValueError(f"kernel must be one of {VARIANTS}, not {self.kernel!r}")
        run_dir = OUT / "vm" / self.name
        run_dir.mkdir(parents=True, exist_ok=True)
        # One VM per name at a time: two would share the run directory (console log, emulator
        # log, initramfs) and each read the other's ground truth.
        with open(run_dir / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RuntimeError(f"VM name {self.name!r} is in use by another running VM "
                                   f"(its run directory {run_dir} would be shared): give this one another name")
            return self._run(run_dir)

    def _run(self, run_dir: Path) -> Result:
        kdir = kernel_dir(self.kernel)
        base = prepare_initramfs(self.kernel)
        initrd = run_dir / "initrd.cpio"
        initrd.write_bytes(base.read_bytes() + scenario_cpio(run_dir / "scenario.d", self.script))

        accel = self.accel
        if accel == "auto":
            accel = "kvm" if self.emulate is None and kvm_works() else "tcg"
        if accel == "kvm" and self.emulate is not None:
            raise ValueError("the branch-record emulator is a TCG plugin: it cannot run with KVM")
        watchdog = "" if self.watchdog else "nowatchdog "
        # tsc=nowatchdog: no clocksource watchdog on the TSC. Kernel 7.3's watchdog checks another
        # CPU's TSC with interrupts off and times out by the timekeeping clock, jiffies until the
        # switch to tsc-early at boot; that switch is a stop_machine(), whose other CPU waits with
        # interrupts off too, and the two then wait for each other for ever (a boot hang, 1 in
        # ~40 boots of 2 vCPUs under load; tests/scenarios/hardening.py
        # test_a_cpu_waiting_with_interrupts_off_is_let_go plays it after boot).
        append = (f"console=ttyS0 panic=-1 pti={self.pti} tsc=nowatchdog {watchdog}{self.append}"
                  .strip())
        if self.boots not in (1, 2):
            raise ValueError(f"boots must be 1 or 2, not {self.boots}")
        # -no-reboot is QEMU's `-action reboot=shutdown`; a VM that boots twice starts with the
        # default (reboot=reset) and switches to shutdown once its second kernel is up.
        reboot = ["-no-reboot"] if self.boots == 1 else ["-action", "reboot=reset"]
        cmd = [
            "qemu-system-x86_64", "-M", "q35", "-cpu", self.cpu, "-smp", str(self.smp),
            "-m", self.memory, "-accel", accel, "-display", "none", "-monitor", "none",
            "-serial", "stdio", *reboot, "-kernel", str(kdir / "arch/x86/boot/bzImage"),
            "-initrd", str(initrd), "-append", append,
            # CPU resets (the guest's final reboot, a triple fault) with the CPU state, so that a
            # VM that ends early can be told apart from one that rebooted as planned.
            "-d", "cpu_reset", "-D", str(run_dir / "qemu-reset.log"),
        ]
        emu_log = None
        if self.emulate is not None:
            plugin = build_emulator()
            args = self.emulate
            if "log=" not in args:
                emu_log = run_dir / "emu.jsonl"
                emu_log.unlink(missing_ok=True)
                args += f",log={emu_log}"
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

        r = run_qemu(cmd, run_dir / "console.log", self.timeout, on_console, on_timeout)
        r.hang = hang[0] if hang else None
        r.emu_log = emu_log
        r.dump = dump if dump.exists() else None
        if self.boots > 1:
            # Each boot's console on its own too (console-1.log, ...), for reading by hand.
            for i, text in enumerate(r.boots, 1):
                (run_dir / f"console-{i}.log").write_text(text)
        return r


def scenario_cpio(work: Path, script: str) -> bytes:
    """A cpio archive (newc) holding /scenario.sh with `script`, to append to an initramfs; made
    in directory `work`."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "scenario.sh").write_text(script + "\n")
    out = work / "scenario.cpio"
    sh("bash", "-c", 'source scripts/common.sh; in_root sh -c \'cd "$1" && echo scenario.sh '
       '| cpio -o -H newc --quiet -R 0:0\' _ "$1" > "$2"', "_", str(work), str(out))
    return out.read_bytes()


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
    """The kernel build directory of a variant, brought up to date once per process."""
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


def run_qemu(cmd: list[str], log: Path, timeout: float, on_console=None, on_timeout=None) -> Result:
    """Runs QEMU in the build root, console to `log`, killing everything on timeout.
    `on_console(text so far)` is called as output arrives until it returns True; on timeout,
    `on_timeout(session id of the run's processes)` before they are killed."""
    wrapped = ["bash", "-c", 'source scripts/common.sh; in_root "$@"', "_", *cmd]
    start = time.monotonic()
    chunks: list[bytes] = []
    timed_out = False
    with open(log, "wb") as f:
        p = subprocess.Popen(wrapped, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        os.set_blocking(p.stdout.fileno(), False)
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
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rest = p.stdout.read()
            if rest:
                chunks.append(rest)
                f.write(rest)
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="manual", help="run directory name under out/vm/")
    ap.add_argument("--kernel", choices=VARIANTS, default="module")
    ap.add_argument("--cpu", default="Skylake-Client", help="QEMU -cpu model")
    ap.add_argument("--smp", type=int, default=1)
    ap.add_argument("--pti", default="off", choices=("on", "off", "auto"))
    ap.add_argument("--append", default="", help="extra kernel command line")
    ap.add_argument("--script", default="", help="guest shell script (text)")
    ap.add_argument("--script-file", type=Path, help="guest shell script (file)")
    ap.add_argument("--emulate", help="run under the lbr-emu plugin with these plugin arguments")
    ap.add_argument("--accel", default="auto", choices=("auto", "kvm", "tcg"))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--qemu-arg", action="append", default=[], help="extra QEMU argument")
    a = ap.parse_args()
    script = a.script_file.read_text() if a.script_file else a.script
    vm = Vm(name=a.name, kernel=a.kernel, cpu=a.cpu, smp=a.smp, pti=a.pti, append=a.append,
            script=script, emulate=a.emulate, accel=a.accel, timeout=a.timeout,
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
