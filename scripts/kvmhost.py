# SPDX-License-Identifier: GPL-2.0
"""The host's KVM as lbr-dump's tests need it: can /dev/kvm run the test guest, and with which
QEMU -cpu does that guest get branch records? Used by `make test-kvm` (tests/run.py --kvm) and
by scripts/vm.py's accel=auto.

What a KVM guest gets (Linux 7.3, arch/x86/kvm; see src/hypervisor.rs for the guest's side):
  - Intel: legacy LBR, lent from the host through a host perf event, only when the host has
    legacy LBR with call-stack support and neither Arch LBR nor the mediated PMU
    (vmx.c vmx_get_perf_capabilities()), kvm.enable_pmu is on, the guest's CPUID model is the
    host's and its PERF_CAPABILITIES.LBR_FMT the one KVM offers (pmu_intel.c intel_pmu_refresh(),
    vmx_set_msr()): QEMU `-cpu host,pmu=on,lbr-fmt=<that format>`; QEMU refuses another format.
    The format KVM offers is IA32_PERF_CAPABILITIES among its feature MSRs (KVM_GET_MSRS on
    /dev/kvm itself: kvm_caps.supported_perf_cap), which is what QEMU compares lbr-fmt with; it
    is 0 when KVM gives guests no LBR.
  - AMD: the single LastBranch record through LBRV (svm.c), when the CPU has LBRV and
    kvm_amd.lbrv is on: `-cpu host`. Never LbrExtV2.

`gather()` reads the facts, `decide()` turns them into a `Guest` (how to run one) or a `Skip`
(why not, in one line); `decide()` is pure, so each reason is tested on made-up facts
(tests/scenarios/kvm_guest.py). Environment overrides, for those tests: LBR_DUMP_KVM_DEV (the
device, default /dev/kvm) and LBR_DUMP_KVM_ROOT (where proc/ and sys/ are, default /).
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import grp
import os
import struct
from pathlib import Path

KVM_GET_API_VERSION = 0xAE00
KVM_CREATE_VM = 0xAE01
KVM_CREATE_VCPU = 0xAE41
KVM_GET_MSRS = 0xC008AE88  # _IOWR(KVMIO, 0x88, struct kvm_msrs): 8-byte header
MSR_IA32_PERF_CAPABILITIES = 0x345
LBR_FMT = 0x3F
VENDOR_MODULES = ("kvm_intel", "kvm_amd")


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the host says. `error`: why the device cannot create a VM with a vCPU (None: it
    can). `vendor_module`: the loaded KVM backend (kvm_intel, kvm_amd, or another such as
    kvm_pvm; None if none is loaded). `params`: module parameters, as "module.name" -> text.
    `kvm_lbr_fmt`: PERF_CAPABILITIES.LBR_FMT that KVM offers guests (None: unreadable, with
    `kvm_lbr_error`); `host_lbr_fmt`: the host's own, from /dev/cpu/0/msr (None: unreadable);
    `lbr_depth`: the host perf's LBR depth (/sys/bus/event_source/devices/cpu/caps/branches)."""

    device: str
    error: str | None
    vendor_module: str | None
    vendor: str
    flags: frozenset = frozenset()
    params: dict = dataclasses.field(default_factory=dict)
    kvm_lbr_fmt: int | None = None
    kvm_lbr_error: str | None = None
    host_lbr_fmt: int | None = None
    lbr_depth: int | None = None


@dataclasses.dataclass(frozen=True)
class Guest:
    """How to run a KVM guest with branch records, and what lbr-dump must find there."""

    cpu: str  # QEMU -cpu
    vendor: str  # "intel" or "amd"
    flavour: str  # the snapshot header's flavour=
    fmt: int  # the snapshot header's format=
    depth: int  # records per snapshot


@dataclasses.dataclass(frozen=True)
class Skip:
    """Why the host cannot run a KVM guest with branch records."""

    reason: str


def _device_error(dev: str) -> str | None:
    """None if `dev` creates a VM and a vCPU; else why not."""
    if not os.path.exists(dev):
        return f"no {dev} (KVM is not loaded, or this machine has no hardware virtualisation)"
    try:
        fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
    except PermissionError:
        st = os.stat(dev)
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        return f"no permission to open {dev} (mode {st.st_mode & 0o777:o}, group {group}: run as root or join that group)"
    except OSError as e:
        return f"{dev} cannot be opened: {os.strerror(e.errno)}"
    try:
        version = fcntl.ioctl(fd, KVM_GET_API_VERSION)
        if version != 12:
            return f"{dev}: KVM_GET_API_VERSION says {version}, not 12"
        try:
            vm = fcntl.ioctl(fd, KVM_CREATE_VM, 0)
        except OSError as e:
            return f"{dev} cannot create a VM: {os.strerror(e.errno)} (VMX/SVM disabled in firmware or taken by another hypervisor?)"
        try:
            vcpu = fcntl.ioctl(vm, KVM_CREATE_VCPU, 0)
            os.close(vcpu)
        except OSError as e:
            return f"{dev} cannot create a vCPU: {os.strerror(e.errno)}"
        finally:
            os.close(vm)
    except OSError as e:
        return f"{dev}: {os.strerror(e.errno)}"
    finally:
        os.close(fd)
    return None


def _kvm_lbr_fmt(dev: str) -> tuple[int | None, str | None]:
    """PERF_CAPABILITIES.LBR_FMT among KVM's feature MSRs: (format, None) or (None, why not)."""
    try:
        fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return None, f"{dev}: {os.strerror(e.errno)}"
    try:
        buf = bytearray(struct.pack("<IIIIQ", 1, 0, MSR_IA32_PERF_CAPABILITIES, 0, 0))
        n = fcntl.ioctl(fd, KVM_GET_MSRS, buf)
        if n != 1:
            return None, f"KVM_GET_MSRS on {dev} read {n} of 1 MSR (IA32_PERF_CAPABILITIES is not among KVM's feature MSRs)"
        return struct.unpack_from("<Q", buf, 16)[0] & LBR_FMT, None
    except OSError as e:
        return None, f"KVM_GET_MSRS on {dev}: {os.strerror(e.errno)}"
    finally:
        os.close(fd)


def _host_lbr_fmt(root: Path) -> int | None:
    """The host's own IA32_PERF_CAPABILITIES.LBR_FMT through the msr driver, if readable."""
    try:
        fd = os.open(root / "dev/cpu/0/msr", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return struct.unpack("<Q", os.pread(fd, 8, MSR_IA32_PERF_CAPABILITIES))[0] & LBR_FMT
    except OSError:
        return None
    finally:
        os.close(fd)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def gather() -> Facts:
    dev = os.environ.get("LBR_DUMP_KVM_DEV", "/dev/kvm")
    root = Path(os.environ.get("LBR_DUMP_KVM_ROOT", "/"))
    error = _device_error(dev)
    modules = root / "sys/module"
    vendor_module = next((m for m in VENDOR_MODULES if (modules / m).is_dir()), None)
    if vendor_module is None and modules.is_dir():
        # Another KVM backend (kvm_pvm, ...): a kvm_* module other than kvm itself.
        others = sorted(p.name for p in modules.iterdir() if p.name.startswith("kvm_"))
        vendor_module = others[0] if others else None
    cpuinfo = _read(root / "proc/cpuinfo") or ""
    vendor = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("vendor_id")), "")
    flags = next((l.split(":", 1)[1].split() for l in cpuinfo.splitlines() if l.startswith("flags")), [])
    params = {}
    for module, name in (("kvm", "enable_pmu"), ("kvm_intel", "enable_mediated_pmu"), ("kvm_amd", "lbrv")):
        v = _read(modules / module / "parameters" / name)
        if v is not None:
            params[f"{module}.{name}"] = v
    kvm_fmt, kvm_err = (None, "not read: the device is unusable") if error else _kvm_lbr_fmt(dev)
    depth = _read(root / "sys/bus/event_source/devices/cpu/caps/branches")
    return Facts(device=dev, error=error, vendor_module=vendor_module, vendor=vendor,
                 flags=frozenset(flags), params=params, kvm_lbr_fmt=kvm_fmt, kvm_lbr_error=kvm_err,
                 host_lbr_fmt=_host_lbr_fmt(root), lbr_depth=int(depth) if depth and depth.isdigit() else None)


def _off(v: str | None) -> bool:
    return v is not None and v.strip() in ("N", "n", "0")


def _on(v: str | None) -> bool:
    return v is not None and v.strip() in ("Y", "y", "1")


def decide(f: Facts) -> Guest | Skip:
    """A KVM guest with branch records on this host, or why there is none (one line)."""
    if f.error is not None:
        return Skip(f.error)
    if f.vendor_module not in VENDOR_MODULES:
        cpu = "the CPU shows neither VMX nor SVM here" if not f.flags & {"vmx", "svm"} else \
            "kvm_intel/kvm_amd are not loaded"
        if f.vendor_module is None:
            return Skip(f"{f.device} works but no kvm_intel or kvm_amd module is loaded ({cpu})")
        return Skip(f"{f.device} is KVM's {f.vendor_module} backend, not kvm_intel or kvm_amd ({cpu}): "
                    f"it cannot run the test kernel as an ordinary guest, and gives guests no branch records")
    if f.vendor == "GenuineIntel" and f.vendor_module == "kvm_intel":
        if _off(f.params.get("kvm.enable_pmu")):
            return Skip("kvm.enable_pmu is off: KVM gives guests no PMU, so no LBR")
        if "arch_lbr" in f.flags:
            return Skip("the host has Arch LBR: KVM gives guests no LBR there (no legacy LBR to lend, "
                        "and guest Arch LBR was never merged)")
        if _on(f.params.get("kvm_intel.enable_mediated_pmu")):
            return Skip("kvm_intel.enable_mediated_pmu is on: KVM gives guests no LBR with the mediated PMU")
        if f.kvm_lbr_fmt is None:
            return Skip(f"cannot read the LBR format KVM offers guests: {f.kvm_lbr_error}")
        if f.kvm_lbr_fmt == 0:
            host = "unreadable" if f.host_lbr_fmt is None else str(f.host_lbr_fmt)
            return Skip(f"KVM offers guests no LBR (LBR_FMT 0 in its IA32_PERF_CAPABILITIES; the host's own "
                        f"format: {host}): the host has no legacy LBR with call-stack support")
        if f.lbr_depth is None:
            return Skip("cannot read the host's LBR depth (/sys/bus/event_source/devices/cpu/caps/branches), "
                        "which the guest's must equal")
        return Guest(cpu=f"host,pmu=on,lbr-fmt={f.kvm_lbr_fmt}", vendor="intel", flavour="intel-lbr",
                     fmt=f.kvm_lbr_fmt, depth=f.lbr_depth)
    if f.vendor == "AuthenticAMD" and f.vendor_module == "kvm_amd":
        if "lbrv" not in f.flags:
            return Skip("the host CPU has no LBRV (no lbrv in /proc/cpuinfo): KVM cannot give guests the "
                        "last-branch record")
        if _off(f.params.get("kvm_amd.lbrv")):
            return Skip("kvm_amd.lbrv is off: KVM gives guests no last-branch record")
        return Guest(cpu="host", vendor="amd", flavour="amd-lbr", fmt=0, depth=1)
    return Skip(f"host CPU {f.vendor or 'of unknown vendor'} with {f.vendor_module}: KVM gives guests branch "
                f"records only on Intel (kvm_intel) and AMD (kvm_amd)")


@functools.cache
def host() -> Guest | Skip:
    """This host's verdict (read once per process)."""
    return decide(gather())


def runs_guests() -> bool:
    """Whether QEMU can run the test kernel under KVM here (scripts/vm.py accel=auto): the
    device creates a VM and a vCPU, and the backend is kvm_intel or kvm_amd (another backend,
    such as kvm_pvm, runs only guest kernels built for it)."""
    f = gather()
    return f.error is None and f.vendor_module in VENDOR_MODULES

