#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""`make test`: every lbr-dump test, one summary.

Stages, in order (a failed build fails the tests that need it, and the run goes on):
  1. host: `cargo test` over the workspace (each Rust test counts), `cargo fmt --check`,
     `cargo clippy -D warnings`, rustfmt --check of the module's own Rust files, the cache
     pruning of scripts/common.sh;
  2. builds: the test kernel, both variants; lbr_dump.ko from clean, with no warning, and with
     the kernel's CLIPPY=1, with no lint;
  3. VM scenarios: every `test_*` function of tests/scenarios/*.py (KUnit suites report one
     result per KTAP test case); the tests for which a file's `unavailable(test)` gives a
     reason are one SKIP line with the reason, counted as skipped (no file gives one today:
     fred.py's prepares Bochs there).
Prints PASS/FAIL lines, then the time each stage took and whether the run was fresh (the cache
had no build root: it made every build) or warm, then `N passed, N failed`; exits 1 on any
failure.

--kvm runs, instead of all that, the `kvm_*` functions of tests/scenarios/kvm_guest.py (the same
test bodies that its `test_*` functions run under the emulator in `make test`) in VMs under this
host's KVM, with the -cpu that gives the guest branch records (scripts/kvmhost.py). Where KVM
cannot run such a guest, it prints one SKIP line with the reason, counts those tests as skipped,
ends `0 passed, 0 failed, N skipped` and exits 0.

    python3 tests/run.py [--host-only] [-k SUBSTRING]... [-j N] [--fuzz-seconds N] [--no-bench]
    python3 tests/run.py --kvm      # `make test-kvm`: the KVM guest scenarios, on this host's KVM

VM scenarios run one per CPU at a time (-j N to change), each file's tests as separate jobs
except files that share a VM run between tests. --host-only runs stage 1 (and the fuzzers) alone (`make test-host`); -k narrows the VM scenarios
(and skips fuzzing and benchmarks). Nothing is reported for a stage or test that did not run.
After the host tests, lbr-decode's fuzz targets run for --fuzz-seconds each (scripts/fuzz.sh; a
crash fails); after the scenarios, scripts/bench.sh prints BENCH report lines (not counted).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import importlib.util
import io
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The one place the module path is set: scenarios import harness and records (tests/), and
# harness imports vm (scripts/).
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

import harness  # noqa: E402


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, **kw)


def host_tests(r: harness.Results) -> None:
    p = run(["cargo", "test", "--workspace", "--no-fail-fast"])
    Path(REPO / "out").mkdir(exist_ok=True)
    (REPO / "out" / "cargo-test.log").write_text(p.stdout)
    # libtest prints one "test NAME ... ok|FAILED" line per test.
    seen = 0
    for m in re.finditer(r"^test (\S+) \.\.\. (ok|FAILED|ignored)$", p.stdout, re.M):
        name, status = m.groups()
        if status == "ignored":
            r.fail(f"cargo: {name}", "ignored tests are not allowed")
        else:
            r.record(f"cargo: {name}", status == "ok", "see out/cargo-test.log")
        seen += 1
    if p.returncode != 0 and seen == 0:
        r.fail("cargo test", "did not build, see out/cargo-test.log:\n" + p.stdout[-3000:])
    elif p.returncode != 0 and "FAILED" not in p.stdout:
        r.fail("cargo test", f"exit {p.returncode}, see out/cargo-test.log")
    fmt = run(["cargo", "fmt", "--all", "--", "--check"])
    r.record("cargo fmt --check", fmt.returncode == 0, fmt.stdout[-2000:])
    clippy = run(["cargo", "clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"])
    r.record("cargo clippy -D warnings", clippy.returncode == 0, clippy.stdout[-3000:])
    # The module's own Rust files, which cargo does not reach (the shared ones are lbr-core's,
    # checked above): rustfmt with the kernel's settings (its .rustfmt.toml: edition 2021, Unix
    # newlines, the defaults otherwise).
    kernel_rs = [str(p.relative_to(REPO)) for p in sorted((REPO / "src").rglob("*.rs"))
                 if p.name not in shared_sources()]
    rfmt = run(["rustfmt", "--check", "--edition", "2021", "--config", "newline_style=Unix", *kernel_rs])
    r.record(f"rustfmt --check, kernel settings: {len(kernel_rs)} module files", rfmt.returncode == 0 and
             len(kernel_rs) >= 8, rfmt.stdout[-2000:])


def shared_sources() -> set[str]:
    """The src/ files lbr-core compiles too (its #[path] modules)."""
    lib = (REPO / "tools/lbr-core/src/lib.rs").read_text()
    return {Path(p).name for p in re.findall(r'#\[path = "([^"]+)"\]', lib)}


def script_tests(r: harness.Results) -> None:
    """The cache pruning of scripts/common.sh, on a scratch cache: entries of one kind unused for
    more than LBR_DUMP_PRUNE_DAYS go, except the two most recently used; other kinds stay."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        cache = Path(d)
        now = time.time()
        ages = {"kbuild-x-a": 0, "kbuild-x-b": 30, "kbuild-x-c": 20, "kbuild-x-d": 40,
                "kbuild-x-e": 15, "kbuild-x-g": 10, "kbuild-y-f": 40}
        for name, days in ages.items():
            (cache / name).mkdir()
            (cache / name / ".last-used").touch()
            os.utime(cache / name / ".last-used", (now - days * 86400, now - days * 86400))
        p = subprocess.run(["bash", "-c", "source scripts/common.sh; prune kbuild-x"], cwd=REPO, text=True,
                           capture_output=True, env=dict(os.environ, LBR_DUMP_CACHE=d, LBR_DUMP_PRUNE_DAYS="14"))
        left = sorted(e.name for e in cache.iterdir())
        # Newest first: a (0 days), g (10), e (15), c (20), b (30), d (40). a and g are the two
        # newest; e, c, b and d are older than 14 days; kbuild-y is another kind.
        want = ["kbuild-x-a", "kbuild-x-g", "kbuild-y-f"]
        r.record("scripts: cache pruning keeps recent entries and the two newest", p.returncode == 0 and left == want,
                 f"exit {p.returncode}, left {left}, want {want}\n{p.stderr}")

    # scripts/exception-sites.py reads an instruction as the stubs' LBR_INSN_AT_RIP does: the
    # bytes past the page are zero, so a WRMSR whose 0F ends a page is no WRMSR there, nor an
    # FXRSTOR (with AC) whose ModRM is on the next page; a DS or REX prefix is skipped.
    spec = importlib.util.spec_from_file_location("exception_sites", REPO / "scripts" / "exception-sites.py")
    es = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(es)
    cases = [(b"\x0f\x30\x90\x90", False, {"msr"}), (b"\x0f", False, set()), (b"\x3e\x0f\x30", False, {"msr"}),
             (b"\x3e\x0f", False, set()), (b"\x0f\x01\xc6", False, {"msr"}), (b"\x48\x8e\xd8", False, {"segment load"}),
             (b"\xf2\x0f\x00\xe8", False, {"segment load"}), (b"\x48\x0f\xae\x0f", True, {"xrstor"}),
             (b"\x48\x0f\xae", True, set()), (b"\x0f\xae\x0f", False, set()), (b"\x0f\xae\xe8", True, set())]
    bad = [(b.hex(), ac, want, es.kinds(b, ac)) for b, ac, want in cases if es.kinds(b, ac) != want]
    r.record("scripts: exception-sites.py recognises instructions as the stubs do", not bad, f"(bytes, AC, want, got): {bad}")

    # The closing lines repeat each failed test with its reason's first line: CI shows a long
    # log's start and end only, and a failure cut from its middle must still be named there.
    t = harness.Results()
    with contextlib.redirect_stdout(io.StringIO()):
        t.record("a: one", True)
        t.record("b: two", False, "VM timed out after 604s\nconsole tail:\n...")
        t.fail("c: three", "")
        t.skip(["d: four"], "no Bochs")
    got = t.summary().splitlines()
    want = ["FAILED b: two: VM timed out after 604s", "FAILED c: three", "1 passed, 2 failed, 1 skipped"]
    r.record("scripts: the closing lines name every failed test", got == want, f"got {got}, want {want}")


def builds(r: harness.Results) -> bool:
    ok = True
    for variant in ("module", "builtin"):
        t = time.monotonic()
        p = run(["scripts/kernel.sh", variant])
        good = p.returncode == 0
        r.record(f"build: {variant} kernel ({time.monotonic() - t:.0f}s)", good, p.stdout[-3000:])
        ok &= good
    if not ok:
        return False
    # The kernel's checkpatch.pl --strict from the kernel source just built (scripts/checkpatch.py):
    # no error or warning in src/, asm/ and tests/modules/ but scripts/checkpatch-exceptions; and
    # it refuses a file with one (an extern in a .c file), so a run that checked nothing fails.
    p = run(["scripts/checkpatch.py"])
    probe = REPO / "out" / "checkpatch-probe.c"
    probe.parent.mkdir(exist_ok=True)
    probe.write_text("// SPDX-License-Identifier: GPL-2.0\nextern int lbr_dump_probe;\n")
    q = run(["scripts/checkpatch.py", str(probe.relative_to(REPO))])
    r.record("checkpatch --strict: no error or warning in src/, asm/, tests/modules/ but the listed exceptions",
             p.returncode == 0 and q.returncode == 1 and "WARNING:AVOID_EXTERNS" in q.stdout,
             p.stdout[-3000:] + "\n(the probe with an extern:)\n" + q.stdout[-1000:])
    # Three module builds from clean, each mostly one compiler process, run side by side: the
    # ordinary one (every compiler and objtool message is in its log), the kernel's CLIPPY=1
    # one, and one against Debian's GCC-built kernel.
    kdir = run(["scripts/kernel.sh", "module"]).stdout.strip().splitlines()[-1]
    run(["bash", "-c", 'source scripts/common.sh; in_root make -C "$1" M="$REPO" '
         'MO="$REPO/out/module" LLVM=1 ARCH=x86_64 clean', "_", kdir])
    t = time.monotonic()
    tree = run(["scripts/debian.sh"])
    debian_ok = tree.returncode == 0
    r.record(f"build: Debian's kernel's module tree, GCC 14 and rustc 1.85.1 ({time.monotonic() - t:.0f}s)",
             debian_ok, tree.stdout[-3000:])
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        plain = pool.submit(run, ["scripts/module.sh"])
        # The kernel's CLIPPY=1 build (clippy-driver with the kernel's lint flags, rust/Makefile's
        # rust_common_flags), in a directory of its own; V=1 shows that clippy-driver ran.
        clippy = pool.submit(run, [
            "bash", "-c", 'source scripts/common.sh; rm -rf "$REPO/out/module-clippy"; mkdir -p "$REPO/out/module-clippy"; '
            'in_root make -C "$1" M="$REPO" MO="$REPO/out/module-clippy" LLVM=1 ARCH=x86_64 CLIPPY=1 V=1 modules',
            "_", kdir])
        # A GCC-built kernel someone else configured: Debian's own 7.3 (scripts/debian.sh), built
        # with the README's command (make KDIR=... and the kernel's compilers).
        gcc = pool.submit(run, [
            "bash", "-c", 'source scripts/common.sh; rm -rf "$REPO/out/module-gcc"; '
            'in_root make -C "$REPO" KDIR="$1" MO="$REPO/out/module-gcc" "${@:2}"',
            "_", tree.stdout.strip().splitlines()[-1] if debian_ok else "/nonexistent",
            *run(["scripts/debian.sh", "--env"]).stdout.split()]) if debian_ok else None
    p = plain.result()
    log = REPO / "out" / "module" / "build.log"
    text = log.read_text() if log.exists() else p.stdout
    warnings = [l for l in text.splitlines() if re.search(r"warning|error", l, re.I)]
    built = p.returncode == 0 and (REPO / "out/module/lbr_dump.ko").exists()
    compiled = re.search(r"RUSTC \[M\].*lbr_dump\.o", text) and re.search(r"AS \[M\].*cpu\.o", text)
    r.record("build: lbr_dump.ko from clean, no warnings (rustc, clang, objtool, modpost)",
             built and bool(compiled) and not warnings,
             "\n".join(warnings[:20]) or ("not compiled from clean" if not compiled else text[-2000:]))
    p = clippy.result()
    (REPO / "out" / "module-clippy.log").write_text(p.stdout)
    lints = [l for l in p.stdout.splitlines() if re.match(r"(warning|error)(\[|:)", l)]
    ran = re.search(r"clippy-driver .*src/lbr_dump\.rs", p.stdout)
    r.record("build: lbr_dump.ko with CLIPPY=1, no lint", p.returncode == 0 and bool(ran) and not lints,
             "\n".join(lints[:30]) or ("clippy-driver did not compile src/lbr_dump.rs" if not ran else p.stdout[-2000:])
             + "\n(see out/module-clippy.log)")
    if gcc is not None:
        p = gcc.result()
        (REPO / "out" / "module-gcc.log").write_text(p.stdout)
        warnings = [l for l in p.stdout.splitlines() if re.search(r"warning|error", l, re.I)]
        compiled = re.search(r"CC \[M\].*glue\.o", p.stdout) and re.search(r"RUSTC \[M\].*lbr_dump\.o", p.stdout)
        r.record("build: lbr_dump.ko against Debian's GCC-built kernel (make KDIR=), from clean, no warnings "
                 "(rustc, gcc, objtool, modpost)",
                 p.returncode == 0 and bool(compiled) and (REPO / "out/module-gcc/lbr_dump.ko").exists()
                 and not warnings,
                 "\n".join(warnings[:20]) or p.stdout[-2000:] + "\n(see out/module-gcc.log)")
    return built


def fuzz(r: harness.Results, seconds: int) -> None:
    """lbr-decode's fuzz targets, each for a bounded time (scripts/fuzz.sh); a crash fails."""
    p = run(["scripts/fuzz.sh", str(seconds)])
    lines = [l for l in p.stdout.splitlines() if l.startswith("fuzz ")]
    for l in lines:
        name, _, rest = l.partition(": ")
        r.record(f"{name}: {rest}", rest.startswith("ok"), l)
    if not lines:
        r.fail("fuzz", "scripts/fuzz.sh ran no target:\n" + p.stdout[-3000:])


def benchmarks() -> None:
    """Reports, not tests: BENCH lines with ratios against baselines (scripts/bench.sh)."""
    p = run(["scripts/bench.sh"])
    for l in p.stdout.splitlines():
        if l.startswith("BENCH"):
            print(l, flush=True)
    if p.returncode != 0:
        print(f"BENCH scripts/bench.sh failed (exit {p.returncode}); see its output:\n{p.stdout[-2000:]}", flush=True)


def shares_a_vm_run(path: Path) -> bool:
    """A scenario file whose tests share one VM run (a functools.cache in the file) runs as one
    job: as separate jobs, two workers would boot the same-named VM at once (vm.py refuses the
    second; seen in CI when dumps.py came without being listed here by hand)."""
    return "@functools.cache" in path.read_text()


def load_scenario(path: Path):
    spec = importlib.util.spec_from_file_location(f"scenario_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Buffered(harness.Results):
    """Results of one job in a worker process, handed back to the parent to print."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, bool, str]] = []

    def record(self, name: str, ok: bool, detail: str = "") -> None:
        self.lines.append((name, ok, detail))

    def fail(self, name: str, detail: str) -> None:
        self.lines.append((name, False, detail))


def run_job(path: Path, names: list[str]) -> list[tuple[str, bool, str]]:
    """Runs some test functions of one scenario file (in a worker process)."""
    r = Buffered()
    try:
        mod = load_scenario(path)
    except Exception:  # a broken scenario file fails its tests, it does not stop the run
        return [(f"{path.stem}: {n.split('_', 1)[1]}", False, traceback.format_exc()) for n in names]
    for name in names:
        full = f"{path.stem}: {name.split('_', 1)[1]}"
        t = time.monotonic()
        try:
            getattr(mod, name)(r)
            r.record(f"{full} ({time.monotonic() - t:.0f}s)", True)
        except AssertionError as e:
            r.fail(f"{full} ({time.monotonic() - t:.0f}s)", str(e) or traceback.format_exc())
        except Exception:  # a broken scenario is a failed test, not a crash of the run
            r.fail(f"{full} ({time.monotonic() - t:.0f}s)", traceback.format_exc())
    return r.lines


def scenarios(r: harness.Results, only: list[str], jobs: int, stages: Stages | None = None) -> None:
    """Every test_* of tests/scenarios/*.py, `jobs` VMs at a time (each QEMU TCG vCPU is one
    host thread). What the VMs need (kernels, initramfs, the emulator plugin) is prepared here
    first, so that the workers, forked from this process, find it ready and never build."""
    import vm
    t = time.monotonic()

    def prepare(kernel: str) -> None:
        vm.kernel_dir(kernel)
        vm.prepare_initramfs(kernel)
    # Side by side, each mostly one make that finds its tree up to date; the built-in variant's
    # initramfs takes the test modules built against the module variant, so it comes after it.
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(prepare, ("module", "nocet", "debian")))
    prepare("builtin")
    vm.build_emulator()
    # Snapshots (scripts/vm.py Snapshot) of machines no run has restored for 3 days go: each
    # change of a kernel or of the emulator makes a new set, about 50 MB each.
    run(["bash", "-c", "source scripts/common.sh; LBR_DUMP_PRUNE_DAYS=3 prune snap"])
    # And their lock files (snap.locks/KEY), once no entry of that key is left and the lock was
    # not taken for as long.
    cache = vm.snapshot_cache()
    for lock in (cache / "snap.locks").glob("*"):
        if not any(cache.glob(f"snap-{lock.name}*")) and time.time() - lock.stat().st_mtime > 3 * 86400:
            lock.unlink(missing_ok=True)
    work = []
    for path in sorted((REPO / "tests" / "scenarios").glob("*.py")):
        mod = load_scenario(path)
        names = [n for n in sorted(dir(mod)) if n.startswith("test_")
                 and (not only or any(s in f"{path.stem}: {n[5:]}" for s in only))]
        # A file whose tests need what this machine may lack says so (`unavailable(test)`: the
        # reason, or None; it also prepares what they need, here, before the workers fork).
        if hasattr(mod, "unavailable"):
            reasons = {n: mod.unavailable(n) for n in names}
            for reason in sorted({w for w in reasons.values() if w}):
                r.skip([f"{path.stem}: {n[5:]}" for n in names if reasons[n] == reason], reason)
            names = [n for n in names if not reasons[n]]
        if shares_a_vm_run(path):
            work += [(path, names)] if names else []
        else:
            work += [(path, [n]) for n in names]
    # Longest first, by the durations of earlier runs on this machine (a job never seen counts as
    # long), so that no long job starts while the other worker is running out of work.
    times = load_times()
    work.sort(key=lambda w: -sum(times.get(f"{w[0].stem}: {n[5:]}", 120) for n in w[1]))
    if stages:
        stages.spent.append(("VM preparation (kernel variants, initramfs, emulator, Bochs)", time.monotonic() - t))
        t = time.monotonic()
    ctx = multiprocessing.get_context("fork")
    ran: dict[str, int] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(run_job, path, names) for path, names in work]
        for f in concurrent.futures.as_completed(futures):
            for name, ok, detail in f.result():
                r.record(name, ok, detail)
                if m := re.match(r"^(.*) \((\d+)s\)$", name):
                    times[m[1]] = ran[m[1]] = int(m[2])
    save_times(times)
    if stages:
        stages.slowest = sorted(ran.items(), key=lambda t: -t[1])[:10]
        stages.vm_seconds = sum(ran.values())
    if stages:
        stages.spent.append(("VM scenarios", time.monotonic() - t))


def times_file() -> Path:
    """Where the suite keeps its tests' last durations: the build cache (scripts/common.sh)."""
    return cache_dir() / "test-times.json"


def cache_dir() -> Path:
    """The build cache (scripts/common.sh's $CACHE)."""
    import vm
    return vm.snapshot_cache()


def cache_entries() -> set[str]:
    """The cache's keyed entries (build root, kernel builds, Debian's tree, Bochs, cargo-fuzz...):
    its directories; a name holds its inputs' key, so a new name is a part this run made."""
    try:
        return {e.name for e in cache_dir().iterdir() if e.is_dir() and not e.name.endswith(".tmp")}
    except OSError:
        return set()


class Stages:
    """How long each stage of the run took, and which cache entries it made: CI's output says
    whether the run was fresh (made the expensive parts) or warm, and where its time went."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.before = cache_entries()
        self.spent: list[tuple[str, float]] = []
        self.slowest: list[tuple[str, int]] = []
        self.vm_seconds = 0

    def timed(self, name: str, f, *args):
        t = time.monotonic()
        try:
            return f(*args)
        finally:
            self.spent.append((name, time.monotonic() - t))

    def report(self) -> None:
        made = sorted(e for e in cache_entries() - self.before if not e.startswith("snap-"))
        snaps = len([e for e in cache_entries() - self.before if e.startswith("snap-")])
        if snaps:
            made.append(f"{snaps} VM snapshot(s)")
        total = time.monotonic() - self.t0
        print("\n[lbr-dump] time by stage: " + ", ".join(f"{n} {s:.0f}s" for n, s in self.spent)
              + f"; {total:.0f}s in all")
        if self.slowest:
            print(f"[lbr-dump] VM scenario jobs took {self.vm_seconds}s in all; the slowest ten: "
                  + ", ".join(f"{n} {s}s" for n, s in self.slowest))
        if not any(e.startswith("root-") for e in self.before):
            kind = "fresh: the cache had no build root, this run made everything"
        elif made:
            kind = "partly warm: this run made what the cache lacked"
        else:
            kind = "warm: every cache entry was there, brought up to date incrementally"
        print(f"[lbr-dump] {kind} ({cache_dir()}" + (f"; made: {', '.join(made)})" if made else ")"))


def load_times() -> dict[str, int]:
    try:
        return {k: int(v) for k, v in json.loads(times_file().read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def save_times(times: dict[str, int]) -> None:
    try:
        times_file().parent.mkdir(parents=True, exist_ok=True)
        tmp = times_file().with_suffix(".tmp")
        tmp.write_text(json.dumps(times, indent=0, sort_keys=True))
        tmp.replace(times_file())
    except OSError as e:
        print(f"[lbr-dump] test durations not saved ({e}): the next run orders its jobs by file", flush=True)


def kvm_scenarios(r: harness.Results) -> None:
    """`make test-kvm`: the kvm_* functions of tests/scenarios/kvm_guest.py, one VM at a time,
    under this host's KVM; or one SKIP line saying why this host cannot run them."""
    import kvmhost
    path = REPO / "tests" / "scenarios" / "kvm_guest.py"
    names = [n for n in sorted(dir(load_scenario(path))) if n.startswith("kvm_")]
    verdict = kvmhost.host()
    if isinstance(verdict, kvmhost.Skip):
        r.skip([f"{path.stem}: {n[4:]}" for n in names], f"KVM cannot run a guest with branch records here: {verdict.reason}")
        return
    print(f"[lbr-dump] KVM guest: -accel kvm -cpu {verdict.cpu} ({verdict.flavour} format {verdict.fmt}, "
          f"{verdict.depth} records)", flush=True)
    for name, ok, detail in run_job(path, names):
        r.record(name, ok, detail)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host-only", action="store_true", help="only the host tests (stage 1)")
    ap.add_argument("-k", action="append", default=[], help="VM scenarios: only names containing this")
    ap.add_argument("--fuzz-seconds", type=int, default=30, help="per fuzz target (0: no fuzzing)")
    ap.add_argument("--no-bench", action="store_true", help="skip the benchmark reports")
    ap.add_argument("--kvm", action="store_true", help="only the KVM guest scenarios, under this host's KVM")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                    help="VMs at a time (default: one per CPU)")
    a = ap.parse_args()
    # One id for this run's jobs, wherever they run: a snapshot boot that fails is not tried
    # again by the others in the same run (scripts/vm.py Snapshot.get).
    os.environ.setdefault("LBR_DUMP_RUN_ID", f"{os.getpid()}-{time.time_ns()}")
    r = harness.Results()
    t = time.monotonic()
    stages = Stages()
    if a.kvm:
        kvm_scenarios(r)
        print(f"\n[lbr-dump] tests took {time.monotonic() - t:.0f}s")
        print(r.summary())
        return 0 if r.failed == 0 else 1
    stages.timed("host tests", host_tests, r)
    stages.timed("script tests", script_tests, r)
    if a.fuzz_seconds > 0 and not a.k:
        stages.timed("fuzzing", fuzz, r, a.fuzz_seconds)
    if not a.host_only:
        if stages.timed("kernel and module builds", builds, r):
            scenarios(r, a.k, a.jobs, stages)
            if not a.no_bench and not a.k:
                stages.timed("benchmarks", benchmarks)
        else:
            r.fail("scenarios", "not run: a build failed")
    stages.report()
    print(f"\n[lbr-dump] tests took {time.monotonic() - t:.0f}s")
    print(r.summary())
    return 0 if r.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
