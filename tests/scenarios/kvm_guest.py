# SPDX-License-Identifier: GPL-2.0
"""KVM guests (issue 12 item 5): lbr-dump says where a guest's records come from, and a crash in a
guest is captured and read back by lbr-decode from the console log.

Each test body runs on a platform:
  - `test_*` (in `make test`): QEMU TCG, the branch-record emulator presenting a KVM guest
    (`hypervisor=kvm`: KVM's CPUID signature; model=skylake for what KVM gives an Intel guest,
    legacy LBR format 5, or model=amd for the single record AMD's LBRV gives): the emulator's
    ground truth is compared too;
  - `kvm_*` (in `make test-kvm`, tests/run.py --kvm): this host's KVM, with the -cpu that gives the
    guest branch records (scripts/kvmhost.py: `host,pmu=on,lbr-fmt=<KVM's format>` on Intel,
    `host` on AMD). There is no emulator under KVM, so the oracle is what needs none: lbr-decode's
    straight-line check (no pair of consecutive records with a taken branch between them, in the
    vmlinux/.ko instructions) and the structural facts (the snapshot is there, complete, holds
    as many records as the recorder is deep, and its newest record is the crash's own entry).
Expected values come from the platform (the emulator's model, or the host's LBR format and
depth as KVM and perf report them), the crashes and the kernel's own symbols, never from
lbr-dump's output. The remaining tests here need no VM: the reasons `make test-kvm` gives for not
running, and its skip line on this machine.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import kvmhost
from harness import CRASH, LKDTM, MODULE, SYSFS, assert_clean, boot, decode, kernel_lines, snapshot_heads, symbols, tail
from records import assert_equals_freeze, printed_records
from vm import REPO, kernel_dir

PANIC = 256
STOPS = {2: "lbr_dump_stop_nmi", 248: "lbr_dump_stop_ipi"}


@dataclasses.dataclass(frozen=True)
class Platform:
    """Where a test body runs: the VM's accelerator and CPU, and what lbr-dump must find there."""

    name: str
    accel: str
    cpu: str
    emulate: str | None  # lbr-emu arguments (TCG only)
    vendor: str  # "intel" or "amd"
    flavour: str  # the snapshot header's flavour=
    fmt: int  # the snapshot header's format=
    depth: int  # records per snapshot

    def vm(self) -> dict:
        return {"accel": self.accel, "cpu": self.cpu, "emulate": self.emulate}

    @property
    def emulated(self) -> bool:
        return self.emulate is not None


EMULATED_INTEL = Platform("emu-intel", "tcg", "Skylake-Client", "model=skylake,hypervisor=kvm", "intel",
                          "intel-lbr", 5, 32)
EMULATED_AMD = Platform("emu-amd", "tcg", "EPYC-Genoa", "model=amd,hypervisor=kvm", "amd", "amd-lbr", 0, 1)


def host_kvm() -> Platform:
    """This host's KVM (`make test-kvm` runs the kvm_* functions only where this is a guest with
    branch records; called directly elsewhere, it fails with the reason)."""
    g = kvmhost.host()
    assert isinstance(g, kvmhost.Guest), f"KVM cannot run a guest with branch records here: {g.reason}"
    return Platform(f"kvm-{g.vendor}", "kvm", g.cpu, None, g.vendor, g.flavour, g.fmt, g.depth)


# What lbr-dump must say in a KVM guest (src/hypervisor.rs; Documentation/lbr-dump/design.rst "KVM guests"): the probe's line
# (and /sys/kernel/lbr_dump/facility) ends with the short note, the armed line with the long one.
PROBE_NOTE = {"intel": "; KVM guest: virtual LBR, a host perf event the host can take back",
              "amd": "; KVM guest: AMD LBRV, the single record"}
ARMED_NOTE = {"intel": "; records from KVM's virtual LBR, backed by a host perf event: if the host takes the "
                       "LBR back, records read as zero (state=zeroed) or start over",
              "amd": "; records from AMD LBRV under KVM: the single last-branch record, kept with the "
                     "guest's state"}
RECORDER = {"intel": "Intel LBR (", "amd": "LastBranch record (1 entry)"}


def probe_line(console: str) -> str:
    """The probe's one line (`lbr_dump: <vendor> family ...`), without the prefix."""
    lines = [l for l in kernel_lines(console, "lbr_dump: ") if re.match(r"lbr_dump: \S+ family 0x", l)]
    assert len(lines) == 1, f"want the probe's one line, got {lines}"
    return lines[0][len("lbr_dump: "):]


def armed_line(console: str) -> str:
    lines = kernel_lines(console, "lbr_dump: armed: ")
    assert len(lines) == 1, "lbr_dump did not arm once:\n" + "\n".join(kernel_lines(console, "lbr_dump"))
    return lines[0]


def hypervisor_bit(console: str) -> None:
    """The guest runs under a hypervisor as the platform claims: CPUID.1:ECX[31] (the kernel's
    `hypervisor` flag in /proc/cpuinfo), printed by the test scripts as hypervisor-bit=N."""
    assert "hypervisor-bit=1" in console, "the guest's CPUID has no hypervisor bit:\n" + tail(console)


CPUINFO = "if grep -qw hypervisor /proc/cpuinfo; then echo hypervisor-bit=1; else echo hypervisor-bit=0; fi\n"


def probe_body(p: Platform) -> None:
    """lbr-dump's probe and armed lines in a KVM guest say where its records come from; the
    facility attribute holds the whole probe line."""
    res = boot(name=f"kvm-probe-{p.name}", **p.vm(), timeout=240,
               script=CPUINFO + f"insmod {MODULE} enable=1\n"
               f"echo facility=[$(cat {SYSFS}/facility)]\n"
               f"echo enabled=$(cat {SYSFS}/enabled)\n")
    con = res.console
    hypervisor_bit(con)
    line = probe_line(con)
    assert line.endswith(PROBE_NOTE[p.vendor]), line
    assert RECORDER[p.vendor] in line, line
    if p.vendor == "intel":
        assert f", format {p.fmt} (" in line and f", {p.depth} entries," in line, line
    # Not cut at the attribute's 255 bytes: the same line, whole.
    assert f"facility=[{line}]" in con, f"the facility attribute differs from the probe's line {line!r}"
    assert armed_line(con).endswith(ARMED_NOTE[p.vendor]), armed_line(con)
    assert "enabled=1" in con
    assert_clean(con)


def function_at(vmlinux: Path, addr: int) -> str:
    """The function containing link-time address `addr` of `vmlinux`, by LLVM's symbolizer (the
    build root's): an outside oracle, not lbr-decode."""
    p = subprocess.run(["bash", "-c", 'source scripts/common.sh; in_root "$@"', "_", "llvm-symbolizer",
                        f"--obj={vmlinux}", "--functions=linkage", "--no-inlines", hex(addr)],
                       cwd=REPO, text=True, capture_output=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()[0]


def check_snapshot(p: Platform, res, snap: dict, head: str, stub: str) -> None:
    """One decoded snapshot (lbr-decode's JSON) against the platform: complete, flavour and format,
    `depth` records, the newest one into `stub` (the code that took it), no pair of records that
    straight-line code cannot join, and most pairs checked; under the emulator, the printed records
    equal its ground truth."""
    where = f"snapshot cpu {snap['cpu']} seq {snap['seq']} ({head})"
    if snap["state"] == "zeroed":
        raise AssertionError(f"{where}: recording was on but every record read 0: the host took the LBR "
                             f"back (a host perf session using LBR, e.g. perf record -b or --call-graph lbr?)")
    assert snap["state"] == "complete", where
    assert (snap["flavour"], snap["format"]) == (p.flavour, p.fmt), where
    recs = snap["records"]
    assert len(recs) == p.depth, f"{where}: {len(recs)} records, the recorder is {p.depth} deep"
    assert recs[0]["to"]["symbol"].startswith(f"{stub}+0x0/"), f"{where}: newest record {recs[0]}"
    sl = snap["straight_line"]
    assert sl["violated"] == 0 and sl["violations"] == [], \
        f"{where}: records no straight-line code can join: " + json.dumps([recs[i] for i in sl["violations"]])[:3000]
    assert sl["ok"] + sl["unchecked"] == p.depth - 1, sl
    assert sl["ok"] >= (p.depth - 1) // 2, f"{where}: only {sl['ok']} of {p.depth - 1} pairs checked: {sl}"
    if p.emulated:
        block = res.console[res.console.index(head):]
        block = block[:block.index("lbr_dump: end ")]
        assert_equals_freeze(res.emu_events(), head, printed_records(block))


def decoded(log: Path, syms: list) -> list[dict]:
    code, out, err = decode(*syms, log)
    assert code == 0, err
    doc = json.loads(out)
    assert not doc["warnings"], doc["warnings"]
    return doc


CRASHES = {  # name: (guest command, vector)
    "EXCEPTION": (f"echo EXCEPTION > {LKDTM}", 14),
    "BUG": (f"echo BUG > {LKDTM}", 6),
    "jump": (f"insmod {CRASH} crash=jump", 14),  # a call through a corrupted function pointer
}


def crash_body(p: Platform, name: str) -> None:
    """A kernel crash in a guest (the module, armed at load): its snapshot, read back by
    lbr-decode from the console log, checked as check_snapshot says; #0 comes from the fault."""
    cmd, vector = CRASHES[name]
    res = boot(finish=False, name=f"kvm-crash-{p.name}-{name.lower()}", **p.vm(), timeout=240,
               script=CPUINFO + f"insmod {MODULE} enable=1\nsh -c '{cmd}' || true\n")
    con = res.console
    hypervisor_bit(con)
    assert armed_line(con).endswith(ARMED_NOTE[p.vendor]), armed_line(con)
    heads = snapshot_heads(con)
    assert len(heads) == 1, f"want one snapshot, got {heads}:\n" + tail(con)
    assert f" vector={vector} " in heads[0], heads[0]
    [snap] = decoded(res.log, symbols())["snapshots"]
    check_snapshot(p, res, snap, heads[0], f"lbr_dump_stub_{vector}")
    # The newest record is the fault itself: from the faulting instruction.
    assert int(snap["records"][0]["from"]["addr"], 16) == int(snap["rip"], 16), snap["records"][0]


def sysrq_body(p: Platform) -> None:
    """The user's CI case: the built-in lbr-dump armed at boot (`lbr_dump=on`), 2 vCPUs, the
    kernel crashed with `echo c > /proc/sysrq-trigger`; lbr-decode reads the records back from the
    console log. sysrq-c calls panic() directly: the panicking CPU's snapshot is taken at panic()'s
    entry (#0 the call into lbr-dump's panic trampoline, from panic()/vpanic(); rip in
    sysrq_handle_crash, which called panic()), the other CPU's as the panic stops it (#0 the stop
    interrupt, from where it was). A run in which an interrupt reached the panicking CPU between
    the call into the trampoline and its freeze (#0 or #1 an IRET; Documentation/lbr-dump/design.rst "What a panic shows")
    is checked as far as it goes and run again, at most 3 times in all, as panic.py does: under
    TCG a pending interrupt is delivered at a block boundary, such as the trampoline's first."""
    for attempt in range(1, 4):
        tag = "" if attempt == 1 else f"-again{attempt}"
        res = boot(finish=False, name=f"kvm-sysrq-{p.name}{tag}", kernel="builtin", smp=2, **p.vm(), timeout=300,
                   append="lbr_dump=on", script=CPUINFO + "echo c > /proc/sysrq-trigger\n")
        con = res.console
        hypervisor_bit(con)
        assert armed_line(con).endswith(ARMED_NOTE[p.vendor]), armed_line(con)
        assert con.index("lbr_dump: armed: ") < con.index("lbr-dump-vm: up"), "not armed at boot"
        assert "Kernel panic - not syncing: sysrq triggered crash" in con, tail(con)
        heads = snapshot_heads(con)
        vmlinux = kernel_dir("builtin") / "vmlinux"
        doc = decoded(res.log, ["-k", vmlinux])
        snaps = doc["snapshots"]
        assert len(snaps) == len(heads) == 2, f"want the panicking CPU's and the stopped CPU's snapshots, got {heads}"
        panics = [(s, h) for s, h in zip(snaps, heads) if s["vector"] == PANIC]
        stops = [(s, h) for s, h in zip(snaps, heads) if s["vector"] in STOPS]
        assert len(panics) == 1 and len(stops) == 1, heads
        (ps, ph), (ss, sh) = panics[0], stops[0]
        assert ps["cpu"] != ss["cpu"], heads
        check_snapshot(p, res, ps, ph, "lbr_dump_panic_entry")
        iret = any(r["from"]["symbol"].startswith("native_irq_return_iret+") for r in ps["records"][:2])
        if not iret or attempt == 3:
            break
        print(f"NOTE kvm-sysrq-{p.name}: an interrupt reached panic() before the freeze; running again", flush=True)
    frm = ps["records"][0]["from"]["symbol"]
    assert frm.startswith(("panic+", "vpanic+")), ps["records"][0]
    kaslr = int(doc["kaslr_offset"], 16)
    # rip is the call's return address: after a call of a noreturn function it can lie past the
    # caller's DWARF range (only padding follows), so the call's own last byte is looked up.
    caller = function_at(vmlinux, int(ps["rip"], 16) - kaslr - 1)
    assert caller == "sysrq_handle_crash", f"panic() called from {caller}, not sysrq_handle_crash"
    check_snapshot(p, res, ss, sh, STOPS[ss["vector"]])
    assert int(ss["records"][0]["from"]["addr"], 16) == int(ss["rip"], 16), ss["records"][0]


# The LBR MSRs a guest reads its records from (FROM and TO of entry 0; entry i at + i): legacy
# Intel LBR since Nehalem (MSR_LBR_NHM_FROM/TO), AMD's single LastBranchFromIP/ToIP.
RECORD_MSRS = {"intel": (0x680, 0x6c0), "amd": (0x1db, 0x1dc)}


def no_host_address_body(p: Platform) -> None:
    """No host address is ever readable from the guest's LBR MSRs (Documentation/lbr-dump/design.rst "KVM hosts"): on 2
    vCPUs with lbr-dump armed in the guest, while the guest runs user and kernel work, every
    record address read from the LBR MSRs, 20 times over, is zero, a user address, or an address
    the guest's own kernel or modules have a symbol at (lbr_crash crash=lbr_addrs). A host
    kernel address (another KASLR base, another kernel) is none of these. On a KVM host the host's
    lbr-dump matters: run it armed there (the test says whether it was)."""
    frm, to = RECORD_MSRS[p.vendor]
    res = boot(name=f"kvm-no-host-address-{p.name}", **p.vm(), smp=2, timeout=600, script=CPUINFO + f"""
insmod {MODULE} enable=1
for i in $(seq 20); do
  ls -R /sys >/dev/null; cat /proc/interrupts >/dev/null
  insmod {CRASH} crash=lbr_addrs lbr_from={frm} lbr_to={to} lbr_depth={p.depth} && rmmod lbr_crash
done
""")
    con = res.console
    hypervisor_bit(con)
    armed_line(con)
    counts = [tuple(map(int, m)) for m in re.findall(
        r"lbr_crash: lbr_addrs: cpu=\d+ zero=(\d+) user=(\d+) kernel=(\d+) foreign=(\d+)", con)]
    assert len(counts) == 40, "\n".join(kernel_lines(con, "lbr_crash")) or tail(con)
    foreign = kernel_lines(con, "lbr_crash: lbr_addrs: foreign")
    assert not foreign and all(f == 0 for *_, f in counts), f"host addresses in the guest's LBR: {foreign[:8]}"
    assert sum(k for _, _, k, _ in counts) > 0, f"no record of the guest's own kernel was read: {counts[:4]}"


# make test: under the emulator presenting a KVM guest.

def test_probe_names_kvm_virtual_lbr(r):
    probe_body(EMULATED_INTEL)


def test_probe_names_amd_lbrv(r):
    probe_body(EMULATED_AMD)


def test_exception_in_a_kvm_guest(r):
    crash_body(EMULATED_INTEL, "EXCEPTION")


def test_corrupted_pointer_in_a_kvm_guest(r):
    crash_body(EMULATED_INTEL, "jump")


def test_amd_lbrv_guest_bug(r):
    crash_body(EMULATED_AMD, "BUG")


def test_builtin_sysrq_c_at_boot_in_a_kvm_guest(r):
    sysrq_body(EMULATED_INTEL)


def test_no_host_address_in_a_kvm_guests_lbr(r):
    no_host_address_body(EMULATED_INTEL)


def test_other_hypervisor_is_named(r):
    """Under plain QEMU TCG (no emulator: no usable recorder) the refusal names the hypervisor
    QEMU presents (its CPUID signature "TCGTCGTCGTCG"); under the emulator without hypervisor=kvm
    the probe line does, not KVM."""
    res = boot(name="kvm-other-tcg", cpu="Skylake-Client", accel="tcg",
               script=CPUINFO + f"insmod {MODULE} || echo insmod-failed\n")
    hypervisor_bit(res.console)
    lines = {l for l in kernel_lines(res.console, "lbr_dump: Intel family")}
    assert len(lines) == 1, lines
    [line] = lines
    assert line.endswith('; guest of hypervisor "TCGTCGTCGTCG": no usable branch recorder'), line
    assert "KVM" not in line and "insmod-failed" in res.console
    res = boot(name="kvm-other-emu", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
               script=f"insmod {MODULE} enable=1\n")
    line = probe_line(res.console)
    # The emulated Skylake has BTS (the emulator presents CPUID DS and MISC_ENABLE bit 11 clear).
    assert line.endswith('; BTS available; hypervisor "TCGTCGTCGTCG"') and "KVM" not in line, line
    assert armed_line(res.console).endswith('; records as hypervisor "TCGTCGTCGTCG" presents them'), \
        armed_line(res.console)


# make test-kvm (tests/run.py --kvm): the same bodies under this host's KVM.

def kvm_probe(r):
    probe_body(host_kvm())


def kvm_exception(r):
    crash_body(host_kvm(), "EXCEPTION")


def kvm_bug(r):
    crash_body(host_kvm(), "BUG")


def kvm_corrupted_pointer(r):
    crash_body(host_kvm(), "jump")


def kvm_builtin_sysrq_c_at_boot(r):
    sysrq_body(host_kvm())


def kvm_no_host_address(r):
    armed = Path("/sys/kernel/lbr_dump/enabled")
    print(f"NOTE kvm_no_host_address: lbr-dump on this host is "
          f"{'armed' if armed.exists() and armed.read_text().strip() == '1' else 'not armed'}", flush=True)
    no_host_address_body(host_kvm())


# No VM: why make test-kvm does not run, and its skip line.

def facts(**kw) -> kvmhost.Facts:
    """A host whose KVM works (kvm_intel, PMU on, legacy LBR format 5, 32 deep), changed by `kw`."""
    base = dict(device="/dev/kvm", error=None, vendor_module="kvm_intel", vendor="GenuineIntel",
                flags=frozenset({"vmx", "pdcm", "hypervisor"}), params={"kvm.enable_pmu": "Y"},
                kvm_lbr_fmt=5, host_lbr_fmt=5, lbr_depth=32)
    return kvmhost.Facts(**(base | kw))


def test_kvm_host_reasons(r):
    """scripts/kvmhost.py decide(): each host that cannot give a guest branch records is skipped
    with its own reason; one that can gets the -cpu KVM and QEMU need (the format KVM offers,
    in decimal as QEMU's lbr-fmt property takes it)."""
    d = kvmhost.decide
    assert d(facts()) == kvmhost.Guest("host,pmu=on,lbr-fmt=5", "intel", "intel-lbr", 5, 32)
    assert d(facts(kvm_lbr_fmt=6, host_lbr_fmt=6, lbr_depth=16)).cpu == "host,pmu=on,lbr-fmt=6"
    amd = dict(vendor="AuthenticAMD", vendor_module="kvm_amd", flags=frozenset({"svm", "lbrv"}),
               params={"kvm_amd.lbrv": "1"}, kvm_lbr_fmt=0, host_lbr_fmt=None, lbr_depth=None)
    assert d(facts(**amd)) == kvmhost.Guest("host", "amd", "amd-lbr", 0, 1)
    cases = [
        (facts(error="no /dev/kvm (x)"), "no /dev/kvm (x)"),
        (facts(vendor_module="kvm_pvm", flags=frozenset({"hypervisor"})),
         "KVM's kvm_pvm backend, not kvm_intel or kvm_amd (the CPU shows neither VMX nor SVM here)"),
        (facts(vendor_module=None), "no kvm_intel or kvm_amd module is loaded"),
        (facts(params={"kvm.enable_pmu": "N"}), "kvm.enable_pmu is off"),
        (facts(flags=frozenset({"vmx", "arch_lbr"})), "the host has Arch LBR"),
        (facts(params={"kvm.enable_pmu": "Y", "kvm_intel.enable_mediated_pmu": "Y"}), "mediated PMU"),
        (facts(kvm_lbr_fmt=0, host_lbr_fmt=5), "KVM offers guests no LBR (LBR_FMT 0 in its "
         "IA32_PERF_CAPABILITIES; the host's own format: 5)"),
        (facts(kvm_lbr_fmt=None, kvm_lbr_error="KVM_GET_MSRS on /dev/kvm: x"),
         "cannot read the LBR format KVM offers guests: KVM_GET_MSRS on /dev/kvm: x"),
        (facts(lbr_depth=None), "cannot read the host's LBR depth"),
        (facts(**(amd | {"flags": frozenset({"svm"})})), "the host CPU has no LBRV"),
        (facts(**(amd | {"params": {"kvm_amd.lbrv": "0"}})), "kvm_amd.lbrv is off"),
        (facts(vendor="HygonGenuine", vendor_module="kvm_amd"), "host CPU HygonGenuine with kvm_amd"),
    ]
    for f, want in cases:
        got = d(f)
        assert isinstance(got, kvmhost.Skip) and want in got.reason, (want, got)


def test_kvm_device_errors_are_named(r):
    """What _device_error says of a missing path, a file that is no KVM device, and a device the
    user may not open (another user's file of mode 600, opened by root without its capabilities
    to override file permissions: setpriv drops them)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        missing = f"{d}/kvm"
        assert kvmhost._device_error(missing).startswith(f"no {missing} ("), kvmhost._device_error(missing)
        plain = Path(d) / "plain"
        plain.write_bytes(b"")
        assert kvmhost._device_error(str(plain)) == f"{plain}: {os.strerror(25)}"  # ENOTTY
        plain.chmod(0o600)
        os.chown(plain, 65534, 65534)
        p = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-c",
                            f"import sys; sys.path.insert(0, {str(REPO / 'scripts')!r}); import kvmhost; "
                            f"print(kvmhost._device_error({str(plain)!r}))"], text=True, capture_output=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(f"no permission to open {plain} (mode 600, group "), p.stdout


def make_test_kvm(env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "test-kvm"], cwd=REPO, text=True,
                          capture_output=True, env=os.environ | (env or {}), timeout=600)


def test_make_test_kvm_skips_with_the_reason(r):
    """`make test-kvm` where KVM cannot run a guest with branch records: one SKIP line with the
    reason, every KVM test counted as skipped (none as passed), exit status 0. First with a device
    that does not exist (LBR_DUMP_KVM_DEV), then on this machine as it is, when it cannot run one:
    the reason is checked against what the machine has, read here apart from scripts/kvmhost.py."""
    n = len([f for f in globals() if f.startswith("kvm_")])
    p = make_test_kvm({"LBR_DUMP_KVM_DEV": "/nonexistent/kvm"})
    lines = p.stdout.splitlines()
    assert p.returncode == 0, p.stdout + p.stderr
    skips = [l for l in lines if l.startswith("SKIP ")]
    assert len(skips) == 1, lines
    assert f"SKIP {n} test(s) (kvm_guest: " in skips[0], skips[0]
    assert skips[0].endswith(": KVM cannot run a guest with branch records here: no /nonexistent/kvm (KVM "
                             "is not loaded, or this machine has no hardware virtualisation)"), skips[0]
    assert not [l for l in lines if l.startswith(("PASS", "FAIL"))], lines
    assert lines[-1] == f"0 passed, 0 failed, {n} skipped", lines[-1]

    modules = Path("/sys/module")
    vendor = [m for m in ("kvm_intel", "kvm_amd") if (modules / m).is_dir()]
    if not os.path.exists("/dev/kvm"):
        want = "no /dev/kvm ("
    elif not vendor:
        others = sorted(m.name for m in modules.iterdir() if m.name.startswith("kvm_"))
        want = f"/dev/kvm is KVM's {others[0]} backend" if others else "no kvm_intel or kvm_amd module is loaded"
    else:
        # A KVM that may run guests: make test-kvm would boot them (minutes); its reasons are
        # test_kvm_host_reasons's. Here only that the verdict is one of the two kinds.
        assert isinstance(kvmhost.host(), (kvmhost.Guest, kvmhost.Skip))
        print(f"NOTE this host has {vendor[0]}: make test-kvm runs its guests (not run from make test)", flush=True)
        return
    p = make_test_kvm()
    lines = p.stdout.splitlines()
    assert p.returncode == 0, p.stdout + p.stderr
    skips = [l for l in lines if l.startswith("SKIP ")]
    assert len(skips) == 1 and want in skips[0], (want, skips)
    assert lines[-1] == f"0 passed, 0 failed, {n} skipped", lines[-1]
