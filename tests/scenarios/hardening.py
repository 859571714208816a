# SPDX-License-Identifier: GPL-2.0
"""Defects of the capture path a kernel reviewer finds, one scenario each (the harness's own
checks are in selftest.py).

Each test was first run against the code it was written for and failed there (the commit that
adds it says how); the expected values come from the kernel (its IDT read by lbr_crash, its oops
text, /proc), from an independent disassembler (LLVM's, on the host) and from the emulator's
ground truth, never from lbr_dump's own output."""

import re
import subprocess

from harness import CFG, CRASH, IDT, LKDTM, MODULE, SYSFS, assert_clean, boot, kernel_lines, snapshot_heads, tail
from records import assert_equals_freeze, printed_records
from vm import REPO


def gates(console, tag):
    """{vector: handler} printed by lbr_crash crash=idt between '==tag==' and the next '=='."""
    part = console.split(f"=={tag}==")[1]
    return dict(re.findall(r"lbr_crash: gate (\d+) ([0-9a-f]{16})", part.split("==")[0]))


def headers(console):
    return [dict(re.findall(r"(\w+)=(\S+)", l)) | {"line": l} for l in snapshot_heads(console)]


def test_concurrent_writers_arm_once(r):
    # kernfs serializes writes per open file: six shell writers (each `echo` opens the file) race
    # on `enabled` while faults happen on both CPUs. Each arming must hook the gates once; at the
    # end the IDT is the kernel's, the machine alive, the log clean.
    vm = boot(name="hard-writers", cpu="EPYC-Genoa,-smap", accel="tcg", smp=2, timeout=600, script=f"""
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {MODULE} force=1
for w in 1 2 3 4 5 6; do
  (i=0; while [ $i -lt 30 ]; do echo $((w % 2)) > {SYSFS}/enabled; ls /sys >/dev/null; i=$((i+1)); done) &
done
wait
echo writers-done enabled=$(cat {SYSFS}/enabled)
echo 1 > {SYSFS}/enabled
dd if=/dev/zero of=/dev/null bs=64k count=16 2>/dev/null
echo 0 > {SYSFS}/enabled
echo ==after== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
rmmod lbr_dump
echo ==unloaded== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
""")
    assert "writers-done" in vm.console
    kernel = gates(vm.console, "kernel")
    assert gates(vm.console, "after") == kernel, "IDT after the racing writers differs from the kernel's"
    assert gates(vm.console, "unloaded") == kernel
    assert_clean(vm.console)


def disassemble(hexbytes: str) -> list[str]:
    """AT&T lines of LLVM's disassembly of the bytes (hex string), from the build root's llvm-mc."""
    text = " ".join(f"0x{hexbytes[i:i + 2]}" for i in range(0, len(hexbytes), 2))
    p = subprocess.run(["bash", "-c", 'source scripts/common.sh; in_root llvm-mc --disassemble '
                        '-triple=x86_64-unknown-linux-gnu'], cwd=REPO, input=text, text=True,
                       capture_output=True)
    assert p.returncode == 0, p.stderr
    return [l.strip() for l in p.stdout.splitlines() if l.strip() and not l.strip().startswith(".text")]


def test_no_indirect_branch_in_live_stubs(r):
    # After arming, the live bytes of every stub (read back by lbr_crash, disassembled on the
    # host by LLVM) contain no indirect jump or call, on any path; every jump out of a stub lands
    # on the kernel's original handler of that vector (read from the IDT before arming), directly
    # or through a direct-jump trampoline. (The FRED page's trampolines, unset with the IDT, are
    # fred.py's.)
    vm = boot(name="hard-text", cpu="EPYC-Genoa", accel="tcg", script=f"""
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {MODULE} force=1 enable=1
pat=' (lbr_dump_stub_[0-9]+|lbr_dump_rearm_1|__SCT__lbr_dump_orig_[0-9]+)([[:space:]]|$)'
addrs=$(grep -E "$pat" /proc/kallsyms | cut -d' ' -f1 | sed 's/^/0x/' | tr '\\n' ',' | sed 's/,$//')
grep -E "$pat" /proc/kallsyms | sed 's/^/sym /'
insmod {CRASH} crash=text text=$addrs && rmmod lbr_crash
""")
    syms = {int(a, 16): n for a, n in re.findall(r"^sym ([0-9a-f]+) \w (\S+)", vm.console, re.M)}
    # Nine hookable vectors' stubs, and #BP's for the report functions' int3s.
    assert len([n for n in syms.values() if n.startswith("lbr_dump_stub_")]) == 10, syms
    code: dict[int, str] = {}
    for m in re.finditer(r"lbr_crash: text 0x([0-9a-f]+)\+(\d+) (\d+) ([0-9a-f]+)", vm.console):
        base = int(m[1], 16)
        code[base] = code.get(base, "") + m[4]
    assert set(code) == set(syms), f"bytes of {len(code)} of {len(syms)} functions read back"
    kernel = {int(v): int(a, 16) for v, a in gates(vm.console, "kernel").items()}
    for addr, name in sorted(syms.items()):
        # A trampoline is 8 bytes (jmp rel32 + ud1): kallsyms sizes the last one up to the next
        # symbol, so only its own bytes are read.
        lines = disassemble(code[addr][:16] if name.startswith("__SCT__") else code[addr])
        indirect = [l for l in lines if re.match(r"(jmp|call)q?\s+\*", l)]
        assert not indirect, f"{name}: indirect branches in the live code: {indirect}"
    # Every trampoline is one direct jump to a kernel handler of a hooked vector.
    tramps = {a: n for a, n in syms.items() if n.startswith("__SCT__")}
    assert tramps, "no static-call trampolines: how does a stub reach the kernel's handler?"
    for addr, name in tramps.items():
        b = bytes.fromhex(code[addr])
        assert b[0] == 0xE9, f"{name}: not a jmp rel32: {code[addr][:16]}"
        target = (addr + 5 + int.from_bytes(b[1:5], "little", signed=True)) & (2**64 - 1)
        assert target in kernel.values(), f"{name} jumps to {target:#x}, not to a kernel handler {kernel}"


def test_data_breakpoints_on_stub_data_survive(r):
    # Hardware data breakpoints (perf mem:, kgdb) on every word the stubs read, four at a time;
    # meanwhile kernel-mode #PF and #GP (fixed up), user-mode #PF, #DE, #UD, #GP and #SS, and a
    # user single-step (#DB). A #DB stub that loads lbr_dump's data before the kernel clears DR7
    # re-enters itself forever.
    traps = "; ".join(f"(lbr-trap {t} || true)" for t in "dugs")
    groups = "".join(f"""
insmod {CRASH} crash=watch capture_cfg=0x$cfg group={g}
lbr-faults; lbr-singlestep || true; {traps}; ls -R /sys/kernel >/dev/null
rmmod lbr_crash
echo group-{g}-survived
""" for g in range(8))
    vm = boot(name="hard-watch", cpu="EPYC-Genoa,-smap", accel="tcg", smp=2, timeout=600,
              script=f"insmod {MODULE} force=1 enable=1\n" + CFG + groups)
    for g in range(8):
        assert f"group-{g}-survived" in vm.console, tail(vm.console)
    assert len(kernel_lines(vm.console, "lbr_crash: watch: kernel #PF and #GP survived")) == 8
    hits = [int(h) for h in re.findall(r"watch: removed, (\d+) breakpoint hits", vm.console)]
    assert len(hits) == 8 and all(h > 0 for h in hits), f"breakpoints did not fire: {hits}"
    # The user-mode exceptions happened (the shell reports each killed child).
    for sig in ("Floating point exception", "Illegal instruction", "Segmentation fault"):
        assert sig in vm.console, f"no user-mode exception killed by {sig!r}:\n" + tail(vm.console)
    bad = [l for l in vm.console.splitlines() if re.search(r"Oops:|BUG:|Kernel panic|WARNING: CPU:", l)]
    assert not bad, bad


def test_kernel_without_cet_arms_with_default_vectors(r):
    # Without CONFIG_X86_CET the kernel installs no #CP handler: gate 21 keeps the early boot
    # handler (in init text, freed after boot). The default set arms without it and says so;
    # every gate hooked is restored.
    vm = boot(name="hard-nocet", kernel="nocet", cpu="EPYC-Genoa", accel="tcg", script=f"""
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {MODULE} force=1 enable=1 && echo armed-ok
echo "vectors=[$(cat {SYSFS}/vectors)]"
rmmod lbr_dump
echo ==unloaded== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
""")
    assert "armed-ok" in vm.console, "\n".join(kernel_lines(vm.console, "lbr_dump"))
    assert re.search(r"lbr_crash: gate 21 [0-9a-f]{16} early_idt_handler_array", vm.console), \
        "this kernel has a #CP handler: the test proves nothing"
    armed = kernel_lines(vm.console, "lbr_dump: armed")
    assert armed and "21(#CP)" not in armed[0], armed
    assert any("21(#CP)" in l and "no handler" in l for l in kernel_lines(vm.console, "lbr_dump: skipping")), \
        kernel_lines(vm.console, "lbr_dump")
    assert "21(#CP)" not in re.search(r"vectors=\[(.*)\]", vm.console)[1]
    assert gates(vm.console, "unloaded") == gates(vm.console, "kernel")
    assert_clean(vm.console)


def test_user_access_above_47_bits_is_not_captured(r):
    # 5-level paging: user addresses go up to 2^56. copy_to_user faults on them (AC set, SMAP) are
    # user accesses, not crashes. The guest must really have LA57 and map above 2^47.
    vm = boot(name="hard-la57", cpu="EPYC-Genoa,+la57", accel="tcg", script=f"""
grep -qw la57 /proc/cpuinfo && echo cpu-has-la57
insmod {MODULE} force=1 enable=1
lbr-high; echo high-exit=$?
echo captures=$(cat {SYSFS}/captures)
""")
    assert "cpu-has-la57" in vm.console, "the guest CPU has no LA57: this test would prove nothing"
    assert "high-exit=0" in vm.console, "the guest could not fault on user pages above 2^47:\n" + tail(vm.console)
    assert "captures=0" in vm.console, re.findall(r"captures=\d+", vm.console)


def test_instruction_fetch_from_user_with_ac_is_captured(r):
    # A kernel jump into user memory with RFLAGS.AC set is a crash (SMEP), not a user access: the
    # stub must capture it although CR2 is a user address and AC is set.
    vm = boot(name="hard-exec-ac", cpu="EPYC-Genoa", accel="tcg",
              script=f"insmod {MODULE} force=1 enable=1\nsh -c 'insmod {CRASH} crash=exec_user_ac' || true\n")
    assert "lbr_crash: jumping to user address" in vm.console, tail(vm.console)
    oops = re.search(r"Oops: .*?---\[ end trace", vm.console, re.S)
    assert oops, "no oops:\n" + tail(vm.console)
    hs = headers(oops[0])
    assert hs and hs[0].get("vector") == "14", f"no #PF snapshot in the oops: {kernel_lines(oops[0], 'lbr_dump')}"
    assert int(hs[0]["error"], 16) & 0x10, f"not an instruction fetch: {hs[0]['line']}"


def test_unprivileged_iret_faults_are_not_captured(r):
    # Any user can make the kernel take a kernel-mode #GP, #NP or #SS at will: a return to user
    # mode whose IRET faults, on the espfix64 stack a #DF, a #GP in a user-access region (XRSTOR
    # of a bad signal frame), and segment reloads with the user's selector that the kernel fixes
    # up (lbr-iretfault, as uid 65534: 10,000 of each of six kinds, and 1,000 GS reloads at a
    # context switch). They are the user's faults, which the kernel hands back as signals or
    # fixes up,
    # not crashes: none may cost a capture (~100 RDMSR), nor push a snapshot out of the ring.
    # A user who can open /dev/kvm makes the kernel's wrmsr_safe() take #GPs at will (a guest's
    # MSR writes): lbr_crash crash=fixed_gp plays them, 10,000 RDMSR and 10,000 WRMSR of an absent
    # MSR through the _safe accessors, and one unchecked RDMSR (ex_handler_msr() warns and goes
    # on); no capture either. What must still be captured: a #GP at another instruction with AC
    # set (fixed_gp's load through a wild pointer inside a user-access region: a kernel bug).
    # Before them a WARN is captured (lkdtm WARNING: a #UD the kernel survives); after them the
    # next captures are fixed_gp's AC one and a kernel-mode #GP that oopses (lbr_crash
    # crash=gp), printed with the sequence number two after the WARN's: nothing else was
    # captured in between. `captures` is root's alone.
    vm = boot(finish=False, name="hard-iretfault", cpu="EPYC-Genoa", accel="tcg", timeout=600, script=f"""
echo "cpuflags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' \\t' '\\n\\n' | grep -x -e smap -e xsave | paste -sd' ')"
insmod {MODULE} force=1 enable=1
echo captures-armed=$(cat {SYSFS}/captures)
echo WARNING > {LKDTM}
echo captures-warn=$(cat {SYSFS}/captures)
lbr-iretfault; echo iretfault-exit=$?
echo captures-after=$(cat {SYSFS}/captures)
echo captures-mode=$(stat -c %A {SYSFS}/captures)
insmod {CRASH} crash=fixed_gp rounds=10000; rmmod lbr_crash
echo captures-fixed=$(cat {SYSFS}/captures)
insmod {CRASH} crash=gp
""")
    con = vm.console
    # AC is set in user-access regions only with SMAP (stac/clac are alternatives), and the
    # signal frame is restored with XRSTOR only with XSAVE: the fx route needs both.
    assert set(re.search(r"cpuflags: (.*)", con)[1].split()) == {"smap", "xsave"}, re.findall(r"cpuflags: .*", con)
    m = re.search(r"lbr-iretfault: uid=(\d+) gp=(\d+) np=(\d+) ss=(\d+) df=(\d+) fx=(\d+) sg=(\d+) gs=(\d+)", con)
    assert m and "iretfault-exit=0" in con, "lbr-iretfault did not run:\n" + tail(con)
    assert m[1] != "0" and m.groups()[1:] == ("10000",) * 6 + ("1000",), m[0]
    fixed = re.search(r"lbr_crash: fixed_gp: msr=(\d+) ac=(\d+)", con)
    assert fixed and fixed.groups() == ("20000", "1"), kernel_lines(con, "lbr_crash: fixed_gp")
    assert "unchecked MSR access error: RDMSR from 0x8ff" in con, "the unchecked RDMSR did not fault"
    # The kernel took them in kernel mode: each was handed back through its fixup (espfix's #DF
    # included), as the signal counts show; the stubs saw every one.
    n = {k: int(v) for k, v in re.findall(r"captures-(armed|warn|after|fixed)=(\d+)", con)}
    assert n["warn"] == n["armed"] + 1, f"the WARN was not captured: {n}"
    assert n["after"] == n["warn"], f"{n['after'] - n['warn']} captures of a user's faulting returns"
    assert n["fixed"] == n["after"] + 1, f"fixed_gp: {n['fixed'] - n['after']} captures, want 1 (the AC one)"
    assert "captures-mode=-r--------" in con, re.findall(r"captures-mode=\S+", con)
    oops = re.search(r"Oops: .*?---\[ end trace", con, re.S)
    assert oops, "no oops:\n" + tail(con)
    hs = headers(oops[0])
    assert hs and hs[0].get("vector") == "13", f"no #GP snapshot in the oops: {kernel_lines(oops[0], 'lbr_dump')}"
    assert int(hs[0]["seq"]) == n["fixed"] + 1, f"the oops' snapshot is not the next capture: {hs[0]['line']}"


def test_a_write_primitive_reaches_no_gate_and_no_stub_setting(r):
    # Anyone with a kernel write primitive (and a read one: the configuration's address is in
    # /proc/kallsyms) must not find, while lbr_dump is armed, a writable view of the IDT or a
    # writable word that steers the stubs' MSR accesses: the re-arm path would be a "set chosen
    # bits in any MSR" gadget. lbr_crash crash=write writes back, through __put_kernel_nofault(),
    # the value it reads from each: the NMI and REBOOT_VECTOR gates at the addresses the
    # configuration names for the panic path's stop switch, the control MSR, its armed value and
    # re-arm mask, the first MSR of the capture list, and the first word of every vmap() area
    # lbr_dump holds (/proc/vmallocinfo). Every store must fault (-14). The IDT
    # holds the gates it held before, and a crash afterwards is captured as the emulator's ground
    # truth says.
    vm = boot(finish=False, name="hard-write", cpu="Skylake-Client", accel="tcg", smp=2, timeout=300,
              emulate="model=skylake", script=f"""
insmod {MODULE} enable=1
{CFG}echo ==armed== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
echo 1 > /proc/sys/kernel/kptr_restrict  # vmallocinfo's addresses unhashed, for root
vmaps=$(grep -E '\\[lbr_dump\\]' /proc/vmallocinfo | grep -v 'module_alloc\\|execmem' | cut -d- -f1 | paste -sd,)
echo "vmallocinfo: $(grep -E '\\[lbr_dump\\]' /proc/vmallocinfo | paste -sd'|')"
insmod {CRASH} crash=write capture_cfg=0x$cfg vmaps=$vmaps; rmmod lbr_crash
echo ==written== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {CRASH} crash=gp
""")
    con = vm.console
    assert "lbr_crash: write: done" in con, "lbr_crash crash=write did not run:\n" + tail(con)
    writes = re.findall(r"lbr_crash: write: (\w+) (0x[0-9a-f]+) \S+ = (-?\d+)", con)
    named = {w[0] for w in writes}
    assert named >= {"nmi_gate", "ipi_gate", "ctl_msr", "armed", "rearm_mask", "msr_list"}, \
        kernel_lines(con, "lbr_crash: write")
    # Every vmap() area lbr_dump holds (its windows: two onto the IDT page, one onto the
    # configuration page) was tried as well.
    vmaps = re.findall(r"0x[0-9a-f]+-0x[0-9a-f]+\s+\d+ (\w+)\+\S+ \[lbr_dump\]", re.search(r"vmallocinfo: (.*)", con)[1])
    assert len(vmaps) >= 1 and sum(1 for w in writes if w[0] == "vmap") == len(vmaps), (vmaps, writes)
    landed = [(k, a) for k, a, rc in writes if rc != "-14"]
    assert not landed, f"stores through a write primitive landed: {landed}"
    assert gates(con, "written") == gates(con, "armed"), (gates(con, "armed"), gates(con, "written"))
    heads = snapshot_heads(con)
    assert heads and " vector=13 " in heads[-1], "no #GP snapshot printed:\n" + tail(con)
    assert_equals_freeze(vm.emu_events(), heads[-1], printed_records(con.split(heads[-1])[1]))


def test_stress_whole_life_cycle_on_four_cpus(r):
    # Everything at once on 4 vCPUs: racing enable/disable writers, CPU hotplug of CPUs 1-3,
    # user and kernel faults on every CPU, data breakpoints on the stubs' data, unload and reload.
    vm = boot(name="hard-stress", cpu="EPYC-Genoa,-smap", accel="tcg", smp=4, timeout=900, script=f"""
echo ==kernel== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
insmod {MODULE} force=1 enable=1
for n in 1 2 3 4; do (while :; do lbr-faults; ls /sys >/dev/null; done) & done
round=0
while [ $round -lt 4 ]; do
  {CFG.strip()}
  insmod {CRASH} crash=watch capture_cfg=0x$cfg group=$round
  writers=
  for w in 1 2 3; do (i=0; while [ $i -lt 20 ]; do echo $((w % 2)) > {SYSFS}/enabled; i=$((i+1)); done) & writers="$writers $!"; done
  for c in 1 2 3; do echo 0 > /sys/devices/system/cpu/cpu$c/online; done
  lbr-singlestep || true
  for c in 1 2 3; do echo 1 > /sys/devices/system/cpu/cpu$c/online; done
  wait $writers
  rmmod lbr_crash
  echo 0 > {SYSFS}/enabled
  echo ==disarmed-$round==; {IDT}; echo == >/dev/kmsg
  rmmod lbr_dump
  insmod {MODULE} force=1 enable=1
  round=$((round+1))
done
kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
rmmod lbr_dump
echo ==after== >/dev/kmsg; {IDT}; echo == >/dev/kmsg
echo online=$(cat /sys/devices/system/cpu/online)
""")
    kernel = gates(vm.console, "kernel")
    for i in range(4):
        assert gates(vm.console, f"disarmed-{i}") == kernel, f"round {i}: IDT after disarming is not the kernel's"
    assert gates(vm.console, "after") == kernel
    assert "online=0-3" in vm.console
    assert_clean(vm.console)
