# SPDX-License-Identifier: GPL-2.0
"""FRED (Flexible Return and Event Delivery): the test kernel (CONFIG_X86_FRED=y) under Bochs,
whose wildcat_lake CPU model has FRED, which QEMU TCG does not emulate (scripts/vm.py BochsVm).

Every Bochs run must have FRED active on every CPU before a test's own assertions count:
harness.boot(bochs=True) reads it from the guest (scripts/vm.py FRED_CHECK: the `fred` flag of
each CPU in /proc/cpuinfo and FRED's entry code in /proc/kallsyms; the flag alone is not enough,
a kernel without CONFIG_X86_FRED shows it too; 7.3 prints no FRED line in its log). Bochs has
no LBR stack and no BTS (only DEBUGCTL and one LASTBRANCHFROM/TO pair), and its CPUID shows no
recorder lbr_dump knows, only the single last-branch pair, which force=1 arms with (records
empty: Bochs has no such MSRs; scripts/bochs-msrs.def gives the model a DEBUGCTL whose LBR bit
does not stay on and a pair that reads 0). Bochs runs with ignore_bad_msrs=0: every other MSR
the model lacks raises #GP, as on a real part. Bochs is built from the source in the
repository (third_party/bochs/, scripts/bochs.sh)."""

import re
import subprocess

from harness import (CFG, CRASH, LKDTM, MODULE, REPO, SYM, SYSFS, assert_clean, boot, cpus_brought_up,
                     fred_state, kernel_dir, kernel_lines, snapshot_heads, tail)
from vm import FRED_CHECK, bochs_boot_sector, bochs_dir


def unavailable(test: str):
    """None: every test here can run wherever the suite does. Builds Bochs (from
    third_party/bochs/, in the repository) and the boot sector for the Bochs tests, once, before
    tests/run.py's workers fork; where that fails, each Bochs test fails with the reason in its
    boot(), none is skipped."""
    if test.startswith("test_bochs_"):
        try:
            bochs_dir()
            bochs_boot_sector()
        except RuntimeError:
            pass
    return None


def assert_fred_kernel():
    """The kernel under test is built with FRED (scripts/kconfig/test-kernel.config)."""
    config = (kernel_dir("module") / ".config").read_text()
    assert "CONFIG_X86_FRED=y" in config.splitlines(), "the test kernel is built without CONFIG_X86_FRED"


def test_bochs_guest_runs_fred_on_every_cpu(r):
    """The test kernel boots under Bochs with FRED active on both CPUs (boot() checks it;
    asserted here again, with the CPUs the kernel brought up) and runs its user space to the
    end through FRED's entry points: system calls, interrupts, and tests/user/faults.S's page
    faults from user mode and from the kernel inside a user access (resolved, and fixed up
    with -EFAULT), which it checks itself."""
    assert_fred_kernel()
    vm = boot(bochs=True, name="fred-boot", smp=2, timeout=240,
              script='lbr-faults && echo "fred-test: faults ok" > /dev/kmsg\n')
    assert cpus_brought_up(vm.console) == 2, tail(vm.console)
    assert fred_state(vm.console) == (2, 2, True), re.findall(r"lbr-dump-vm: cpus=.*$", vm.console, re.M)
    assert "fred-test: faults ok" in vm.console, tail(vm.console)
    assert_clean(vm.console)


def test_bochs_guest_without_fred_is_failed(r):
    """boot(bochs=True) fails a run whose guest does not run FRED, before any assertion of the
    test: here the same kernel and CPU with FRED turned off on the command line (fred=off, the
    kernel then clears the flag and runs the IDT)."""
    try:
        boot(bochs=True, name="fred-off", timeout=240, append="fred=off")
    except AssertionError as e:
        msg = str(e)
    else:
        raise AssertionError("boot() passed a Bochs run with fred=off")
    assert msg.startswith("the guest does not run FRED on every CPU"), msg
    assert "0 of 1 CPU(s) have the fred flag, the kernel has FRED's entry code" in msg, msg


def test_bochs_msrs_the_model_lacks_fault_as_on_hardware(r):
    """Bochs, by default, reads an MSR its CPU model lacks as 0 and drops writes to it; the
    runs set ignore_bad_msrs=0, so that such an access raises #GP as a real part's would, and
    name the few MSRs the model lacks but lbr-dump's runs need (scripts/bochs-msrs.def). Here
    AMD's DE_CFG (0xc0011029), which an Intel part lacks: 10 rdmsr_safe() and 10 wrmsr_safe() all
    fail, and the unchecked read is the kernel's "unchecked MSR access error" (lbr_crash
    crash=fixed_gp, lbr_dump not loaded)."""
    vm = boot(bochs=True, name="fred-msrs", timeout=240, allow_would_fault=True,
              script=f"insmod {CRASH} crash=fixed_gp rounds=10 msr=0xc0011029; rmmod lbr_crash\n")
    con = vm.console
    m = re.search(r"lbr_crash: fixed_gp: msr=(\d+) ac=(\d+)", con)
    assert m and m[1] == "20", kernel_lines(con, "lbr_crash") or tail(con)
    assert "unchecked MSR access error: RDMSR from 0xc0011029" in con, tail(con)


def test_bochs_markers_are_whole_and_in_order(r):
    """The harness's own check, where it once failed: the /init markers it reads (`lbr-dump-vm:
    done`, the script ran to its end) are printed whole, after everything the script made the
    kernel log. 7.3's 8250 console prints the log from a printer thread, later than it was
    logged, and Bochs's UART sends at its line rate: a marker the shell wrote to its tty went
    out before the kernel's lines still pending, and could be cut in two by one of them (CI:
    `lb[    1.556876] lbr_crash: ...` then `r-dump-vm: done`, and a run that had finished was
    reported as ended early). Here the script ends with 200 kernel log lines, logged faster than
    the UART sends them (tests/initramfs/init writes its markers to the kernel log)."""
    vm = boot(bochs=True, name="fred-markers", timeout=240,
              script='for i in $(seq 200); do echo "fred-test: burst $i" > /dev/kmsg; done\n')
    con = vm.console
    burst = list(re.finditer(r"fred-test: burst (\d+)$", con, re.M))
    assert [int(m[1]) for m in burst] == list(range(1, 201)), tail(con)
    done = list(re.finditer(r"^(\[\s*\d+\.\d+\] )?lbr-dump-vm: done$", con, re.M))
    assert len(done) == 1, f"the end marker is not a whole line of its own:\n{tail(con)}"
    assert done[0].start() > burst[-1].end(), (
        "the end marker was printed before the kernel's lines the script logged:\n"
        + con[max(0, done[0].start() - 300):done[0].end() + 300])


def test_qemu_runs_the_same_kernel_without_fred(r):
    """Under QEMU TCG, which does not emulate FRED, the same kernel runs with the IDT (as
    Debian's kernel does on CPUs without FRED): no CPU has the flag. Every other scenario relies
    on this."""
    assert_fred_kernel()
    vm = boot(name="fred-qemu", cpu="Skylake-Client", accel="tcg", smp=2, script=FRED_CHECK)
    assert fred_state(vm.console) == (2, 0, True), re.findall(r"lbr-dump-vm: cpus=.*$", vm.console, re.M)
    assert_clean(vm.console)


# Loads lbr_dump with ARGS; a failure's message goes to the kernel log, in order with its lines.
INSMOD = (f"insmod {MODULE} {{args}} 2>/tmp/err || "
          'echo "fred-test: insmod failed: $(cat /tmp/err)" > /dev/kmsg')


def test_bochs_lbr_dump_without_force_is_refused_by_the_probe(r):
    """Bochs's wildcat_lake has no branch recorder in its CPUID (no Arch LBR, a model without
    legacy LBR), only the single last-branch pair (DEBUGCTL.LBR, MSRs 0x1db and 0x1dc): without
    force=1 the load is refused with one line that says so and -ENODEV, and the machine runs
    on; with force=1 (every other Bochs test) lbr_dump arms with that pair (src/probe.rs
    `SinglePair`)."""
    vm = boot(bochs=True, name="fred-refused", timeout=240, script=f"""
echo "fred-test: load" > /dev/kmsg
{INSMOD.format(args="enable=1")}
echo "fred-test: still running: $(ls {SYSFS} 2>&1)" > /dev/kmsg
""")
    con = vm.console
    part = con[con.index("fred-test: load"):]
    # (busybox insmod tries finit_module() and, when that fails, init_module(): a refused load
    # runs the module's init twice, each attempt with the same single line)
    lines = [l for l in kernel_lines(part, "lbr_dump: ") if "taints kernel" not in l]
    assert 1 <= len(lines) <= 2 and len(set(lines)) == 1 and lines[0].endswith(
        "CPUID describes no branch recorder lbr-dump supports (force=1 uses the single last-branch "
        "pair: DEBUGCTL.LBR, MSRs 0x1db and 0x1dc): no usable branch recorder"), (lines, tail(part))
    assert re.search(r"fred-test: insmod failed: insmod: can't insert '\S*lbr_dump\.ko': "
                     r"No such device$", part, re.M), part
    assert "refusing to arm" not in part, part
    assert re.search(r"fred-test: still running: .*No such file or directory", part), part
    assert_clean(con)


# ---- lbr-dump's FRED backend (src/fred.rs, asm/stubs.S lbr_dump_fred_*) ----
#
# The DEBUGCTL.LBR of bochs-msrs.def does not stay on and its one record pair reads 0: the records are empty and
# each snapshot says `was-off`; what these test is the FRED path itself (delivery, filtering,
# pass-through, the snapshot's vector, RIP, error code and CR2, restore). The records are the QEMU
# emulator tests' (the same capture code).

ARM = f"insmod {MODULE} force=1 enable=1\n"
SHOW = f"insmod {CRASH} crash=fred; rmmod lbr_crash\n"


def pages(console: str, marker: str) -> dict[int, tuple[int, str]]:
    """Each CPU's IA32_FRED_CONFIG and its page's symbol, as `crash=fred` printed them after the
    line `marker` (and before the next marker)."""
    part = console[console.index(marker) + len(marker):]
    nxt = part.find("fred-test: ")
    part = part if nxt < 0 else part[:nxt]
    return {int(m[1]): (int(m[2], 16), m[3]) for m in
            re.finditer(r"lbr_crash: fred: cpu=(\d+) config=(0x[0-9a-f]+) page=(\S+(?: \[\w+\])?)", part)}


def test_bochs_arming_points_every_cpu_at_lbr_dumps_page_and_back(r):
    """Armed at load and again through sysfs, every CPU's IA32_FRED_CONFIG holds lbr-dump's page
    with the kernel's low bits (redzone, stack level); a CPU taken offline and brought back
    while armed gets it again (its bring-up wrote the kernel's); disarmed and after unload,
    every CPU holds exactly the value the kernel wrote. Meanwhile user-mode faults, a
    single-step, #DE/#UD/#GP/#SS in user mode, kernel-mode user-access faults, system calls and
    interrupts (each CPU's timer, and IPIs, counted in /proc/interrupts) all run, and nothing is
    captured; the report functions ftrace cannot trace are left unhooked, said in one line. (The test's own lines go through /dev/kmsg: on Bochs's console, shell output and
    kernel lines interleave.)"""
    vm = boot(bochs=True, name="fred-arm", smp=2, timeout=400, script=f"""
irqs() {{ grep -E '^ *(LOC|RES|CAL|TLB):' /proc/interrupts | while read n a b rest; do echo "fred-test: irq $1 $n $a $b" >/dev/kmsg; done; }}
echo fred-test: before >/dev/kmsg; {SHOW}{ARM}
echo fred-test: armed >/dev/kmsg; {SHOW}
irqs armed
lbr-faults; echo fred-test: faults=$? >/dev/kmsg
lbr-singlestep || echo fred-test: singlestep=$? >/dev/kmsg
for t in d u g s; do lbr-trap $t || true; done
i=0; while [ $i -lt 200 ]; do i=$((i+1)); cat /proc/self/stat >/dev/null; done
irqs done
echo fred-test: captures=$(cat {SYSFS}/captures) >/dev/kmsg
echo 0 > /sys/devices/system/cpu/cpu1/online
echo 1 > /sys/devices/system/cpu/cpu1/online
echo fred-test: replugged >/dev/kmsg; {SHOW}
echo 0 > {SYSFS}/enabled
echo fred-test: disarmed >/dev/kmsg; {SHOW}
echo 1 > {SYSFS}/enabled
echo fred-test: rearmed >/dev/kmsg; {SHOW}
rmmod lbr_dump
echo fred-test: unloaded >/dev/kmsg; {SHOW}
""")
    con = vm.console
    before = pages(con, "fred-test: before")
    assert sorted(before) == [0, 1], tail(con)
    kernel = before[0][0]
    assert all(v == (kernel, before[0][1]) for v in before.values()), before
    assert before[0][1].startswith("asm_fred_entrypoint_user"), before
    for when in ("armed", "replugged", "rearmed"):
        now = pages(con, f"fred-test: {when}")
        assert sorted(now) == [0, 1], (when, now, tail(con))
        for cpu, (config, page) in now.items():
            assert page == "lbr_dump_fred_user [lbr_dump]", (when, cpu, page)
            assert config & 0xfff == kernel & 0xfff and config & ~0xfff != kernel & ~0xfff, (when, cpu, hex(config))
    for when in ("disarmed", "unloaded"):
        assert pages(con, f"fred-test: {when}") == before, (when, pages(con, f"fred-test: {when}"))
    assert "fred-test: faults=0" in con, tail(con)
    assert "fred-test: singlestep=133" in con, tail(con)     # SIGTRAP after the #DB
    for sig in ("divide error", "invalid opcode", "general protection", "stack segment"):
        assert re.search(rf"traps: lbr-trap\[\d+\] trap {sig}|traps: lbr-trap\[\d+\] {sig}", con), (sig, tail(con))
    assert "fred-test: captures=0" in con, tail(con)
    # FRED delivers #BP as a software exception, which lbr-dump's page does not capture: the
    # report functions without ftrace's entry (UBSAN's handlers) get no int3, and arming says so.
    assert re.search(r"lbr_dump: reports: not hooked: .*__ubsan_handle_out_of_bounds \(FRED: no int3 hook\)", con), \
        kernel_lines(con, "lbr_dump: reports")
    assert not kernel_lines(con, "lbr_dump: reports: hooked by int3"), kernel_lines(con, "lbr_dump: reports")
    # The interrupts ran while armed: both CPUs' timers, and IPIs between them.
    irq = {(when, name): (int(a), int(b)) for when, name, a, b in
           re.findall(r"fred-test: irq (armed|done) (\w+): (\d+) (\d+)", con)}
    assert ("armed", "LOC") in irq and ("done", "LOC") in irq, tail(con)
    assert all(d > a for a, d in zip(irq["armed", "LOC"], irq["done", "LOC"])), irq
    ipis = {when: sum(sum(v) for (w, n), v in irq.items() if w == when and n != "LOC") for when in ("armed", "done")}
    assert ipis["done"] > ipis["armed"], irq
    assert not snapshot_heads(con), snapshot_heads(con)
    # force=1 recorded with the single last-branch pair, which this Intel CPU has as the P6
    # family's MSR_LASTBRANCHFROMIP/TOIP: no line of lbr-dump's names it AMD's.
    assert "lbr_dump: unloaded (LastBranch record)" in con, kernel_lines(con, "lbr_dump: ")
    assert not [l for l in kernel_lines(con, "lbr_dump: ") if "AMD" in l], kernel_lines(con, "lbr_dump: ")
    # (The user-mode traps print "general protection fault", which assert_clean flags.)
    bad = [l for l in con.splitlines() if re.search(r"Oops:|BUG:|Kernel panic|WARNING: CPU:|Call Trace", l)]
    assert not bad, bad


def test_bochs_a_users_single_step_is_re_armed_by_the_debug_notifier(r):
    """Under FRED a user-mode #DB enters at the page's ring-3 entry, one jump to the kernel's:
    no stub of lbr-dump's sees it, and its delivery clears the LBR switch. Any user can do it
    (its own `popf` with TF set), on every CPU in turn. lbr-dump's debug notifier re-arms from
    the kernel's #DB handler (src/capture/debug.rs). Bochs's DEBUGCTL keeps no bit, so each #DB
    finds the switch cleared and the notifier writes the armed value back: `rearms` counts one
    per #DB. Here, as uid 65534, lbr-singlestep twice on each CPU: the count goes 0, 2, 4, and
    each run ended in SIGTRAP after its #DB."""
    vm = boot(bochs=True, name="fred-rearm", smp=2, timeout=400, script=ARM + f"""
step() {{ s=0; taskset -c $1 lbr-nobody /bin/lbr-singlestep || s=$?; echo "fred-test: step cpu=$1 status=$s" > /dev/kmsg; }}
echo "fred-test: rearms=$(cat {SYSFS}/rearms) nobody=$(lbr-nobody /bin/busybox id -u)" > /dev/kmsg
step 0; step 0
echo "fred-test: rearms=$(cat {SYSFS}/rearms)" > /dev/kmsg
step 1; step 1
echo "fred-test: rearms=$(cat {SYSFS}/rearms)" > /dev/kmsg
""")
    con = vm.console
    assert "lbr_dump: armed" in con, kernel_lines(con, "lbr_dump: ") or tail(con)
    assert re.search(r"fred-test: rearms=0 nobody=65534$", con, re.M), tail(con)
    steps = re.findall(r"fred-test: step cpu=(\d) status=(\d+)$", con, re.M)
    assert steps == [("0", "133"), ("0", "133"), ("1", "133"), ("1", "133")], steps
    counts = [int(c) for c in re.findall(r"fred-test: rearms=(\d+)", con)]
    assert counts == [0, 2, 4], f"rearms before, after CPU 0's two #DBs, after CPU 1's: {counts}"
    assert not snapshot_heads(con), snapshot_heads(con)


def crash(name: str, trigger: str, resolve: str):
    """Arms, records the address of `resolve` (a kernel symbol), runs `trigger`; returns the
    console, the snapshot's header fields and that address."""
    vm = boot(bochs=True, name=f"fred-{name}", smp=1, timeout=300, finish=False,
              script=SYM + ARM + f"echo fred-test: sym=$(sym {resolve}) >/dev/kmsg\n" + trigger)
    con = vm.console
    heads = snapshot_heads(con)
    assert len(heads) == 1, heads or tail(con)
    head = dict(re.findall(r"(\w+)=(\S+)", heads[0]))
    addr = int(re.search(r"fred-test: sym=([0-9a-f]+)", con)[1], 16)
    return con, head, addr


def oops_rip(con: str) -> tuple[str, int]:
    m = re.search(r"RIP: 0010:(\w+)\+0x([0-9a-f]+)/", con)
    assert m, tail(con)
    return m[1], int(m[2], 16)


def test_bochs_lkdtm_exception_is_captured_with_its_vector_and_rip(r):
    """lkdtm EXCEPTION (a NULL store) oopses; the FRED ring-0 stub captured it: the snapshot's
    vector is the oops's (Bochs reports #GP for this store, QEMU #PF), its RIP the oops's, in
    lkdtm_EXCEPTION, its error code the oops's, and the state `was-off` (the DEBUGCTL.LBR of
    scripts/bochs-msrs.def does not stay on)."""
    con, head, addr = crash("exception", f"echo EXCEPTION > {LKDTM}\n", "lkdtm_EXCEPTION")
    sym, off = oops_rip(con)
    assert sym == "lkdtm_EXCEPTION", sym
    assert int(head["rip"], 16) == addr + off, (head, hex(addr))
    oops = re.search(r"Oops: (general protection fault|.*page fault|.*)", con)[1]
    vector = 13 if "general protection" in oops else 14
    assert head["vector"] == str(vector), (head, oops)
    if vector == 14:
        # The oops's error code and faulting address (FRED's event data, CR2 with the IDT).
        code = re.search(r"#PF: error_code\(0x([0-9a-f]+)\)", con)
        where = re.search(r"BUG: kernel NULL pointer dereference, address: ([0-9a-f]+)", con)
        assert code and where, tail(con)
        assert int(head["error"], 16) == int(code[1], 16), (head, code[0])
        assert int(head["cr2"], 16) == int(where[1], 16) == 0, (head, where[0])
    else:
        code = re.search(r"Oops: general protection fault.*?: ([0-9a-f]{4}) \[#1\]", con)
        assert code, tail(con)
        assert int(head["error"], 16) == int(code[1], 16), (head, code[0])
    assert head["state"] == "was-off" and head["records"] == "0", head


def test_bochs_lkdtm_bug_is_captured_as_ud(r):
    """lkdtm BUG (ud2) is #UD, vector 6, at the oops's RIP in lkdtm_BUG, error code 0."""
    con, head, addr = crash("bug", f"echo BUG > {LKDTM}\n", "lkdtm_BUG")
    sym, off = oops_rip(con)
    assert sym == "lkdtm_BUG", sym
    assert (head["vector"], head["error"]) == ("6", "0x0"), head
    assert int(head["rip"], 16) == addr + off, (head, hex(addr))


def test_bochs_corrupted_pointer_jump_is_captured_with_cr2_from_the_event_data(r):
    """lbr_crash crash=jump calls through a corrupted pointer to an unmapped address: a #PF
    instruction fetch, vector 14, whose RIP and CR2 (FRED's event data) are that address and
    whose error code has the instruction-fetch bit (0x10)."""
    vm = boot(bochs=True, name="fred-jump", smp=1, timeout=300, finish=False,
              script=ARM + f"insmod {CRASH} crash=jump\n")
    con = vm.console
    heads = snapshot_heads(con)
    assert len(heads) == 1, heads or tail(con)
    head = dict(re.findall(r"(\w+)=(\S+)", heads[0]))
    assert head["vector"] == "14", head
    assert head["rip"] == head["cr2"], head
    assert int(head["error"], 16) & 0x10, head
    m = re.search(r"BUG: unable to handle page fault for address: ([0-9a-f]+)", con)
    assert m and int(m[1], 16) == int(head["cr2"], 16), (m and m[0], head)


def test_bochs_sysrq_c_captures_the_panic_and_stops_the_other_cpu(r):
    """sysrq-c on 2 CPUs: the panicking CPU's snapshot at panic() (vector 256), and the other
    CPU's, idle with interrupts on, taken by REBOOT_VECTOR (248) through the FRED ring-0
    entry's stop path (asm/stubs.S .Lfred_event; the NMI's is the next test's)."""
    vm = boot(bochs=True, name="fred-sysrq", smp=2, timeout=300, finish=False,
              script=ARM + "echo c > /proc/sysrq-trigger\n")
    con = vm.console
    heads = [dict(re.findall(r"(\w+)=(\S+)", h)) for h in snapshot_heads(con)]
    assert len(heads) == 2, heads or tail(con)
    panic = [h for h in heads if h["vector"] == "256"]
    stop = [h for h in heads if h["vector"] == "248"]
    assert len(panic) == 1 and len(stop) == 1, heads
    assert panic[0]["cpu"] != stop[0]["cpu"], heads


def test_bochs_stop_nmi_captures_where_the_cpu_spun_with_interrupts_off(r):
    """2 CPUs, lbr_crash crash=stop_all irqs_off=1: CPU 1 spins with interrupts off, so
    REBOOT_VECTOR cannot stop it and the NMI a second later does; CPU 0 runs sysrq-c. The NMI
    arrives through the FRED ring-0 entry and falls into its stop body (asm/stubs.S .Lfred_nmi;
    REBOOT_VECTOR's, .Lfred_event, is test_bochs_sysrq_c_...'s): CPU 1's snapshot has vector 2,
    and its RIP, the frame's, is inside lbr_crash_spin_off or lbr_crash_spin_step (nothing else
    runs there with interrupts off), whose ranges come from lbr_crash.ko's symbol table and the
    step's address the module printed."""
    vm = boot(bochs=True, name="fred-stop-nmi", smp=2, timeout=300, finish=False,
              script=ARM + f"insmod {CRASH} crash=stop_all irqs_off=1\nsleep 60\n")
    con = vm.console
    assert "stop_all: CPU 1 spins with interrupts off" in con, tail(con)
    assert "stop_all: 1 CPUs spinning, sysrq-c on CPU 0" in con, tail(con)
    heads = {int(h["cpu"]): h for h in (dict(re.findall(r"(\w+)=(\S+)", l)) for l in snapshot_heads(con))}
    assert sorted(heads) == [0, 1], heads or tail(con)
    assert [heads[c]["vector"] for c in (0, 1)] == ["256", "2"], heads
    assert all(h["state"] == "was-off" for h in heads.values()), heads
    nm = subprocess.run(["bash", "-c", "source scripts/common.sh; in_root llvm-nm -S --defined-only "
                         "out/lbr_crash/lbr_crash.ko"], cwd=REPO, capture_output=True, text=True, check=True)
    syms = {m[3]: (int(m[1], 16), int(m[2], 16))
            for m in re.finditer(r"^([0-9a-f]+) ([0-9a-f]+) [tT] (\S+)$", nm.stdout, re.M)}
    step = int(re.search(r"stop_all: lbr_crash_spin_step at ([0-9a-f]+)", con)[1], 16)
    off = int(heads[1]["rip"], 16) - step + syms["lbr_crash_spin_step"][0]
    inside = [f for f in ("lbr_crash_spin_off", "lbr_crash_spin_step")
              if syms[f][0] <= off < syms[f][0] + syms[f][1]]
    assert inside, f"CPU 1 stopped at .text+{off:#x}, outside its loop: " + \
        str({f: (hex(a), hex(n)) for f, (a, n) in syms.items() if "spin" in f})
    assert "Shutting down cpus with NMI" in con, tail(con)


def fred_path_to_the_freeze(insns, frame):
    """Walks lbr_dump_fred_kernel's disassembly `insns` ([(address, instruction, relocation)])
    from its
    first instruction for an event whose delivered frame holds the bytes `frame` (offset from
    RSP at delivery: value), once a panic has claimed the stop (the stop flag compares equal).
    A `cmpb $imm, off(%rsp)` before the first push is decided by the frame and the `cmpq` of the
    stop flag by the panic; every other conditional branch is not taken (the capture's way: no
    breakpoint armed, CPU in range, not captured before). Returns the instructions up to and
    including the first WRMSR (the freeze) or the jmp that leaves the page (on to the kernel's
    entry), and the taken branches on the way."""
    at = {a: k for k, (a, _, _) in enumerate(insns)}
    k, path, taken, flags, pushed = 0, [], [], None, False
    while k < len(insns) and len(path) < 400:
        _, insn, reloc = insns[k]
        path.append(insn + (f" <{reloc}>" if reloc else ""))
        if insn.startswith("wrmsr"):
            return path, taken
        if insn.startswith("push"):
            pushed = True
        m = re.match(r"cmpb\s+\$(-?0x[0-9a-f]+), 0x([0-9a-f]+)\(%rsp\)$", insn)
        if m and not pushed:
            flags = frame[int(m[2], 16)] == int(m[1], 16) & 0xff  # objdump signs a byte
        elif re.match(r"cmpq\s+\$0x2, \(%rip\)", insn) and reloc.startswith("lbr_dump_live+"):
            flags = True  # LBR_LIVE_GATES_SWITCHED
        elif not insn.startswith(("je", "jne")):
            flags = None
        b = re.match(r"(j[a-z]+|call|ret)\S*\s*(?:0x([0-9a-f]+))?", insn)
        if b and b[1] != "jmp" and b[1] not in ("call", "ret"):
            go = (flags if b[1] == "je" else None if flags is None else not flags) \
                if b[1] in ("je", "jne") else False
            if go:
                taken.append(insn)
                assert int(b[2], 16) in at, f"a branch out of the page's kernel entry: {insn}"
                k = at[int(b[2], 16)]
                continue
        elif b:
            taken.append(insn)
            if b[1] != "jmp" or not b[2]:
                break
            if reloc:
                return path, taken  # to a symbol: out of the page
            k = at[int(b[2], 16)]
            continue
        k += 1
    raise AssertionError(f"neither a WRMSR nor a jmp on; taken {taken}; path {path[-12:]}")


def module_disassembly() -> dict[str, list[tuple[int, str, str]]]:
    """lbr_dump.ko (the module built against the FRED kernel), disassembled: each symbol's
    instructions as (address, instruction, relocation of the instruction, or "")."""
    ko = REPO / "out" / "module" / "lbr_dump.ko"
    subprocess.run(["scripts/module.sh"], cwd=REPO, check=True, capture_output=True)
    p = subprocess.run(["bash", "-c", f"source scripts/common.sh; in_root llvm-objdump -dr --no-show-raw-insn {ko}"],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    funcs: dict[str, list[tuple[int, str, str]]] = {}
    cur = None
    for line in p.stdout.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\S+)>:$", line)
        if m:
            cur = m[1]
            funcs[cur] = []
        elif cur and (m := re.match(r"^\s+[0-9a-f]+:\s+R_X86_64_\S+\s+(\S+)$", line)):
            a, i, _ = funcs[cur][-1]
            funcs[cur][-1] = (a, i, m[1])  # the relocation of the instruction before
        elif cur and (m := re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)):
            funcs[cur].append((int(m[1], 16), m[2].strip(), ""))
    return funcs


def test_fred_stubs_take_no_branch_before_the_freeze(r):
    """Static, on the module built against the FRED kernel: the ring-3 entry is one direct jmp;
    from the ring-0 entry, a captured exception (a #GP) reaches the WRMSR that freezes with no
    taken branch of lbr-dump's, and the stop NMI and REBOOT_VECTOR of a claimed panic with one
    (the dispatch's: a single entry serves every event, and the exception's way is the
    fall-through); no FRED code has an indirect jump or call."""
    funcs = module_disassembly()
    user = [i for _, i, _ in funcs["lbr_dump_fred_user"] if not i.startswith("int3")]
    assert len(user) == 1 and re.match(r"jmp\s+[0-9a-f]+", user[0]), user
    kernel = funcs["lbr_dump_fred_kernel"]
    # The frame's event type (bits 51:48 of the SS slot, byte 46) and vector (byte 44).
    exc, exc_taken = fred_path_to_the_freeze(kernel, {46: 3, 44: 13})
    assert exc[-1].startswith("wrmsr") and any(i.startswith("rdmsr") for i in exc), exc
    assert not exc_taken, f"a taken branch before a #GP's freeze: {exc_taken}"
    for what, frame in (("the stop NMI", {46: 2, 44: 2}), ("REBOOT_VECTOR", {46: 0, 44: 0xf8})):
        path, taken = fred_path_to_the_freeze(kernel, frame)
        assert len(taken) == 1 and re.match(r"j(e|ne)\s", taken[0]), f"{what}: taken before the freeze: {taken}"
        assert path[-1].startswith("wrmsr") and any(i.startswith("rdmsr") for i in path), (what, path)
        print(f"FRED cost: {what} of a claimed panic, {len(path)} instructions to the freeze, one taken branch")
    # Any other kernel-mode event (a timer interrupt) goes on with no data load but the frame's.
    timer, taken = fred_path_to_the_freeze(kernel, {46: 0, 44: 0xec})
    assert re.match(r"jmp.*<__SCT__lbr_dump_fred_kernel-0x4>$", timer[-1]), timer
    assert not [i for i in timer if "(%rip)" in i], f"a data load for a timer interrupt: {timer}"
    print(f"FRED cost: a timer interrupt, {len(timer) - 1} instructions before the jmp on, "
          f"{len(taken) - 1} taken")
    for name in ("lbr_dump_fred_user", "lbr_dump_fred_kernel"):
        indirect = [i for _, i, _ in funcs[name] if re.match(r"(jmp|call)q?\s+\*", i)]
        assert not indirect, (name, indirect)
    assert not [n for n in funcs if n.startswith("lbr_dump_stop_fred")], "separate FRED stop stubs"
    print(f"FRED cost: ring-3 entry {len(user)} instruction; ring-0 entry to the freeze "
          f"{len(exc)} instructions for a captured exception")


def stop_nmi_return(insns, ret):
    """The return that drops a stop NMI in a stop NMI body (`insns`, its function's
    disassembly; `ret` the returning instruction's mnemonic): the one `ret` instruction, and the
    two code addresses the frame's RIP is compared with before it, [first, last]."""
    at = [k for k, (_, i, _) in enumerate(insns) if i.split()[0] == ret]
    assert len(at) == 1, f"not one {ret}: {[insns[k] for k in at]}"
    before = range(at[0] - 8, at[0])
    leas = [(k, re.match(r"leaq\s+(-?0x[0-9a-f]+)\(%rip\), %rax", insns[k][1])) for k in before]
    leas = [(k, m) for k, m in leas if m]
    bounds = [insns[k + 1][0] + int(m[1], 16) for k, m in leas]
    assert len(bounds) == 2, insns[at[0] - 8:at[0] + 1]
    jumps = [insns[k][1].split()[0] for k in range(leas[0][0], at[0]) if insns[k][1].startswith("j")]
    assert jumps == ["jb", "ja"], jumps  # below the first, above the last: on to the kernel
    assert re.match(r"movq\s+-0x8\(%rsp\), %rax$", insns[at[0] - 1][1]), insns[at[0] - 1]  # rax back
    return bounds


def test_stop_nmi_returns_only_into_the_reboot_vector_stop(r):
    """Static, on the module built against the FRED kernel: the stop NMI that lbr-dump's NMI
    stop body drops, returning with IRETQ (IDT: lbr_dump_stop_nmi) or ERETS (FRED: the page's
    NMI body), is one whose frame's RIP is within the REBOOT_VECTOR stop body, from its first
    instruction (IDT: the one after ENDBR) to its last (the jmp on to the kernel's handler).
    The IDT case runs in panic.py (a_stop_capture_the_stop_nmi_arrives_in_is_finished); FRED's
    cannot (the stall is the QEMU plugin's, FRED Bochs's)."""
    funcs = module_disassembly()
    ipi = [x for x in funcs["lbr_dump_stop_ipi"] if not x[1].startswith(("int3", "nop"))]
    assert ipi[0][1] == "endbr64" and ipi[-1][1].startswith("jmp"), (ipi[0], ipi[-1])
    assert stop_nmi_return(funcs["lbr_dump_stop_nmi"], "iretq") == [ipi[1][0], ipi[-1][0]]
    # FRED: both stop bodies begin with the one store below RSP (LBR_STOP_BODY), REBOOT_VECTOR's
    # first, and the NMI's dispatch, a compare of the stop flag, begins right after the
    # REBOOT_VECTOR body's last instruction.
    page = funcs["lbr_dump_fred_kernel"]
    bodies = [k for k, (_, i, _) in enumerate(page) if re.match(r"movq\s+%rax, -0x8\(%rsp\)$", i)]
    assert len(bodies) == 2, bodies
    flags = [k for k, (_, i, reloc) in enumerate(page) if re.match(r"cmpq\s+\$0x2, \(%rip\)", i)
             and reloc.startswith("lbr_dump_live+") and k < bodies[1]]
    last = page[flags[-1] - 1]
    assert last[1].startswith("jmp"), last
    assert stop_nmi_return(page, "erets") == [page[bodies[0]][0], last[0]]
    # Nothing else in lbr-dump's code returns from an interrupt or event.
    others = [(n, i) for n, insns in funcs.items() for _, i, _ in insns
              if i.split()[0] in ("iretq", "erets", "eretu") and n not in ("lbr_dump_stop_nmi", "lbr_dump_fred_kernel")]
    assert not others, others


# What `crash=fred` printed for CPU `cpu` last, in the guest (its IA32_FRED_CONFIG, in hex).
CONFIG_OF = ("$(dmesg | sed -n 's/.*lbr_crash: fred: cpu={cpu} config=\\(0x[0-9a-f]*\\).*/\\1/p' "
             "| tail -1)")


def test_bochs_arming_is_refused_while_a_cpu_holds_another_value(r):
    """A CPU whose IA32_FRED_CONFIG is not the value the kernel wrote (another owner's, here
    the kernel's page with a larger redzone on CPU 1: lbr_crash crash=fred_set) makes arming
    fail with one line naming the CPU and both values, and the reason; CPU 0, pointed at
    lbr-dump's page before CPU 1's refusal, holds the kernel's value again and CPU 1 the other
    owner's: nothing changed. With CPU 1's value the kernel's again, arming succeeds. Arming is
    tried from each CPU (insmod pinned with taskset): the kernel's value is the kernel's whichever
    CPU arms, not the one the arming CPU holds (which named CPU 0, holding the kernel's value, as
    the odd one out when insmod ran on CPU 1)."""
    vm = boot(bochs=True, name="fred-changed", smp=2, timeout=400, script=f"""
echo fred-test: before >/dev/kmsg; {SHOW}
k={CONFIG_OF.format(cpu=1)}
insmod {CRASH} crash=fred_set cpu=1 target=$(printf 0x%x $(( (k & ~0x1c0) | 0x80 ))); rmmod lbr_crash
echo fred-test: changed >/dev/kmsg; {SHOW}
taskset -c 0 {INSMOD.format(args="force=1 enable=1")}
taskset -c 1 {INSMOD.format(args="force=1 enable=1")}
echo fred-test: refused enabled=$(cat {SYSFS}/enabled 2>&1) >/dev/kmsg; {SHOW}
insmod {CRASH} crash=fred_set cpu=1 target=$k; rmmod lbr_crash
{INSMOD.format(args="force=1 enable=1")}
echo fred-test: armed >/dev/kmsg; {SHOW}
""")
    con = vm.console
    before = pages(con, "fred-test: before")
    kernel, ksym = before[1]
    assert before[0] == before[1] and kernel & 0x1c0 == 0x40, before
    changed = pages(con, "fred-test: changed")
    other = (kernel & ~0x1c0) | 0x80
    assert changed == {0: (kernel, ksym), 1: (other, ksym)}, changed
    part = con[con.index("fred-test: changed"):con.index("fred-test: refused")]
    lines = kernel_lines(part, "lbr_dump: ")
    want = f"lbr_dump: refusing to arm: FRED: CPU 1's IA32_FRED_CONFIG is {other:#x}, not the kernel's {kernel:#x}"
    # Two attempts (taskset -c 0, -c 1), each refused.
    assert part.count("fred-test: insmod failed") == 2, tail(con)
    # Each attempt is refused twice: busybox insmod loads again when the first load fails
    # (finit_module, then init_module).
    named = [l for l in lines if "IA32_FRED_CONFIG is" in l]
    assert len(named) == 4 and all(l.endswith(want) for l in named), (want, named)
    assert any("a CPU's IA32_FRED_CONFIG does not hold the value the kernel wrote" in l for l in lines), lines
    assert pages(con, "fred-test: refused") == changed, pages(con, "fred-test: refused")
    armed = pages(con, "fred-test: armed")
    assert sorted(armed) == [0, 1] and all(p == "lbr_dump_fred_user [lbr_dump]" for _, p in armed.values()), armed
    assert "fred-test: insmod failed" not in con[con.index("fred-test: refused"):], tail(con)
    assert_clean(con)


def test_bochs_arming_is_refused_where_another_page_takes_fred_entry(r):
    """Another owner of FRED's entry (lbr_crash crash=fred_other: every CPU's IA32_FRED_CONFIG
    points at that module's page, which jumps on to the kernel's entry points, as lbr-dump's
    does): arming fails with the reason (the entry page is not the kernel's
    asm_fred_entrypoint_user) and writes no CPU's IA32_FRED_CONFIG, which the other owner finds
    still its own when it goes; then lbr-dump arms."""
    vm = boot(bochs=True, name="fred-other", smp=2, timeout=400, script=f"""
echo fred-test: before >/dev/kmsg; {SHOW}
insmod {CRASH} crash=fred_other
echo fred-test: other >/dev/kmsg
{INSMOD.format(args="force=1 enable=1")}
echo fred-test: refused >/dev/kmsg
rmmod lbr_crash
echo fred-test: other-gone >/dev/kmsg; {SHOW}
{INSMOD.format(args="force=1 enable=1")}
echo fred-test: armed >/dev/kmsg; {SHOW}
""")
    con = vm.console
    before = pages(con, "fred-test: before")
    assert sorted(before) == [0, 1] and before[0] == before[1], before
    kernel = before[0][0]
    moves = re.findall(r"lbr_crash: fred_other: cpu=(\d) config=(0x[0-9a-f]+) -> (0x[0-9a-f]+)", con)
    taken = {int(c): int(to, 16) for c, frm, to in moves if int(frm, 16) == kernel}
    given = {int(c): int(frm, 16) for c, frm, to in moves if int(to, 16) == kernel}
    assert sorted(taken) == [0, 1] and all(v & 0xfff == kernel & 0xfff and v != kernel for v in taken.values()), moves
    # lbr-dump refused, and left every CPU as the other owner had it.
    assert given == taken, (taken, given)
    part = con[con.index("fred-test: other"):con.index("fred-test: refused")]
    lines = kernel_lines(part, "lbr_dump: ")
    assert any("refusing to arm: FRED: IA32_FRED_CONFIG does not point at the kernel's entry page "
               "(asm_fred_entrypoint_user)" in l for l in lines), lines
    assert "fred-test: insmod failed" in part, tail(con)
    assert pages(con, "fred-test: other-gone") == before, pages(con, "fred-test: other-gone")
    armed = pages(con, "fred-test: armed")
    assert sorted(armed) == [0, 1] and all(p == "lbr_dump_fred_user [lbr_dump]" for _, p in armed.values()), armed
    assert "fred-test: insmod failed" not in con[con.index("fred-test: refused"):], tail(con)
    assert_clean(con)


def test_bochs_suspend_and_resume_keep_every_cpu_at_lbr_dumps_page(r):
    """Suspend to RAM while armed, on 2 CPUs. Bochs's ACPI enters S3 by resetting the machine,
    and its BIOS goes to the kernel's wake-up vector: the boot CPU comes back from a reset, its
    IA32_FRED_CONFIG rewritten by the kernel (restore_processor_state():
    cpu_init_fred_exceptions()), and CPU 1 comes back through hotplug. Afterwards both enter at
    lbr-dump's page again (the resume callback, src/fred.rs resume_this_cpu, and the hotplug
    callback), and a crash on CPU 0 is captured."""
    vm = boot(bochs=True, name="fred-resume", smp=2, timeout=400, finish=False, script=f"""
{ARM}echo fred-test: armed >/dev/kmsg; {SHOW}
echo mem > /sys/power/state; echo fred-test: resumed=$? >/dev/kmsg; {SHOW}
taskset -c 0 insmod {CRASH} crash=jump
""")
    con = vm.console
    bochs_log = (vm.log.parent / "bochs.log").read_text(errors="replace")
    assert "ACPI control: suspend to ram" in bochs_log, "Bochs did not enter S3"
    assert "PM: suspend entry (deep)" in con and "PM: suspend exit" in con, tail(con)
    assert "fred-test: resumed=0" in con, tail(con)
    for when in ("armed", "resumed=0"):
        now = pages(con, f"fred-test: {when}")
        assert sorted(now) == [0, 1] and all(p == "lbr_dump_fred_user [lbr_dump]" for _, p in now.values()), (when, now)
    heads = [dict(re.findall(r"(\w+)=(\S+)", h)) for h in snapshot_heads(con)]
    assert len(heads) == 1 and heads[0]["vector"] == "14" and heads[0]["cpu"] == "0", heads or tail(con)


def test_bochs_built_in_armed_at_boot_enters_at_lbr_dumps_page(r):
    """The built-in driver, booted with lbr_dump=on lbr_dump.force=1, arms at its initcall with
    FRED: both CPUs enter at its page (built in, the page jumps straight to the kernel's entry
    points; src/glue.c checks the kernel's page by address), and a crash is captured."""
    vm = boot(bochs=True, kernel="builtin", name="fred-builtin", smp=2, timeout=300, finish=False,
              append="lbr_dump=on lbr_dump.force=1",
              script=f"echo fred-test: boot >/dev/kmsg; {SHOW}insmod {CRASH} crash=jump\n")
    con = vm.console
    assert kernel_lines(con, "lbr_dump: armed"), kernel_lines(con, "lbr_dump")
    now = pages(con, "fred-test: boot")
    assert sorted(now) == [0, 1] and all(p == "lbr_dump_fred_user" for _, p in now.values()), now
    heads = [dict(re.findall(r"(\w+)=(\S+)", h)) for h in snapshot_heads(con)]
    assert len(heads) == 1 and heads[0]["vector"] == "14", heads or tail(con)
    assert heads[0]["rip"] == heads[0]["cr2"], heads


def test_bochs_faulting_returns_and_segment_loads_of_a_user_are_not_captured(r):
    """What any user can make the kernel do at will, with FRED: returns to user mode whose ERETU
    faults (a bad SS, a not-present CS or SS, a bad CS: #GP, #NP, #SS in kernel mode at the
    ERETU, which the kernel hands back as signals), an XRSTOR of a bad signal frame with AC set,
    a DS reload (MOV to DS) and a GS reload at a context switch (LKGS) fixed up by loading 0
    (lbr-iretfault, as uid 65534), the thousands of user-mode page faults of it and of a shell
    loop (cminflt, field 11 of the shell's /proc/PID/stat: its waited-for children's), and 1000
    user single-steps (lbr-singlestep, each a #DB in user mode, then SIGTRAP): none is captured,
    and the next crash is the next capture."""
    iretfault_run("fred-iretfault", fred=True)


def test_bochs_fred_off_the_idt_leaves_a_users_lkgs_fault_alone(r):
    """The same on the same CPU booted with fred=off: the IDT, but LKGS stays (FRED depends on
    LKGS, not the reverse: arch/x86/kernel/cpu/cpuid-deps.c), so load_gs_index() still loads
    the user's GS selector with LKGS (arch/x86/include/asm/gsseg.h), and a not-present LDT
    entry makes it fault in kernel mode at will: the IDT's #NP stub must leave LKGS's fault
    alone as it does a MOV to GS (QEMU has no LKGS: hardening.py's gs kind runs MOV GS)."""
    iretfault_run("fred-off-iretfault", fred=False)


# 1000 user single-steps (FRED's user entry only: the IDT's #DB stub is the QEMU tests').
STEPS = """i=0; n=0; while [ $i -lt 1000 ]; do i=$((i+1)); s=0; lbr-singlestep || s=$?; if [ $s = 133 ]; then n=$((n+1)); fi; done 2>/dev/null
echo fred-test: single-steps=$n >/dev/kmsg
"""


def iretfault_run(name: str, fred: bool):
    vm = boot(bochs=True, name=name, smp=1, timeout=900, finish=False, fred=fred,
              append="" if fred else "fred=off", script=f"""
echo "fred-test: cpuflags $(grep -m1 '^flags' /proc/cpuinfo | tr ' \\t' '\\n\\n' | grep -x -e smap -e xsave | paste -sd' ')" >/dev/kmsg
{ARM}echo fred-test: captures-armed=$(cat {SYSFS}/captures) >/dev/kmsg
f0=$(cut -d' ' -f11 /proc/$$/stat)
lbr-iretfault > /tmp/out; echo "fred-test: exit=$? $(cat /tmp/out)" >/dev/kmsg
i=0; while [ $i -lt 100 ]; do i=$((i+1)); cat /proc/self/stat >/dev/null; done
{STEPS if fred else ""}f1=$(cut -d' ' -f11 /proc/$$/stat)
echo fred-test: captures-after=$(cat {SYSFS}/captures) minflt=$((f1-f0)) >/dev/kmsg
insmod {CRASH} crash=gp
""")
    con = vm.console
    flags = re.search(r"fred-test: cpuflags (.*)", con)
    assert flags and set(flags[1].split()) == {"smap", "xsave"}, flags and flags[0]
    m = re.search(r"fred-test: exit=(\d+) lbr-iretfault: uid=(\d+) gp=(\d+) np=(\d+) ss=(\d+) df=(\d+) "
                  r"fx=(\d+) sg=(\d+) gs=(\d+)", con)
    assert m and m[1] == "0" and m[2] != "0", re.findall(r"fred-test: exit=.*", con) or tail(con)
    assert m.groups()[2:] == ("10000",) * 6 + ("1000",), m[0]
    armed = int(re.search(r"fred-test: captures-armed=(\d+)", con)[1])
    after = re.search(r"fred-test: captures-after=(\d+) minflt=(\d+)", con)
    assert after and int(after[1]) == armed, (armed, after and after[0])
    assert int(after[2]) > 5000, f"only {after[2]} user page faults"
    # 1000 user single-steps, each a #DB in user mode that ended its process with SIGTRAP.
    assert not fred or "fred-test: single-steps=1000" in con, re.findall(r"fred-test: single-steps=\d+", con) or tail(con)
    heads = [dict(re.findall(r"(\w+)=(\S+)", h)) for h in snapshot_heads(con)]
    assert len(heads) == 1 and heads[0]["vector"] == "13", heads or tail(con)
    assert int(heads[0]["seq"]) == armed + 1, heads


def test_bochs_data_breakpoints_on_stub_data_survive(r):
    """Kernel-mode #DB with FRED: hardware data breakpoints on every word the stubs read, four
    at a time (lbr_crash crash=watch), while kernel-mode #PF and #GP (fixed up), user-mode #PF,
    #DE, #UD, #GP, #SS and a user single-step run; each breakpoint hit is a #DB in kernel mode
    through lbr-dump's ring-0 entry (its re-arm, asm/stubs.S LBR_REARM) that must load nothing
    of lbr-dump's while DR7 is set, or it re-enters itself forever."""
    traps = "; ".join(f"(lbr-trap {t} || true)" for t in "dugs")
    groups = "".join(f"""
insmod {CRASH} crash=watch capture_cfg=0x$cfg group={g}
lbr-faults; lbr-singlestep || true; {traps}
rmmod lbr_crash
echo fred-test: group-{g}-survived >/dev/kmsg
""" for g in range(8))
    vm = boot(bochs=True, name="fred-watch", smp=1, timeout=900, script=ARM + CFG + groups)
    con = vm.console
    for g in range(8):
        assert f"fred-test: group-{g}-survived" in con, tail(con)
    assert len(kernel_lines(con, "lbr_crash: watch: kernel #PF and #GP survived")) == 8, tail(con)
    hits = [int(h) for h in re.findall(r"watch: removed, (\d+) breakpoint hits", con)]
    assert len(hits) == 8 and all(h > 0 for h in hits), f"breakpoints did not fire: {hits}"
    bad = [l for l in con.splitlines() if re.search(r"Oops:|BUG:|Kernel panic|WARNING: CPU:", l)]
    assert not bad, bad


# ---- A CPU that disarming cannot put back (scripts/bochs-fred-filter.patch) ----
#
# lbr_crash crash=fred_filter plays a hypervisor that filters one CPU's IA32_FRED_CONFIG from
# then on: Bochs drops the WRMSR (filter=1), raises #GP for it (2), or for the RDMSR too (3).
# Disarming then cannot give that CPU the kernel's value back: it still delivers its events
# through lbr-dump's page, and whatever that page's stubs read and write must outlive the
# module's disarming. The oracles are the guest's own: each CPU's IA32_FRED_CONFIG (crash=fred),
# free_pages() of what the stubs' configuration named while armed (crash=free_watch), the
# capture counter around kernel #PFs on that CPU (crash=fixed_pf), the module still loaded, an
# NMI to an offline CPU (crash=nmi_offline); Bochs's log shows the filter at work.

def filtered(vm, cpu: int, access: str, what: str) -> list[str]:
    """Bochs's log lines where the test filter acted on an `access` (RDMSR, WRMSR) of CPU
    `cpu`'s IA32_FRED_CONFIG, with outcome `what` (dropped, #GP)."""
    log = (vm.log.parent / "bochs.log").read_text(errors="replace")
    return [l for l in log.splitlines()
            if re.search(rf"\[CPU{cpu}\s*\] {access}: IA32_FRED_CONFIG: .*{re.escape(what)} \(lbr-dump's test filter\)", l)]


def after(con: str, marker: str) -> str:
    return con[con.index(marker):]


# (Armed from CPU 0, which holds the kernel's value: arming from a CPU at lbr-dump's page is
# refused anyway, the page in its IA32_FRED_CONFIG not being the kernel's.)
REFUSED_TWICE = (f"taskset -c 0 sh -c 'echo 1 > {SYSFS}/enabled' 2>/tmp/err || echo \"fred-test: rearm failed: $(cat /tmp/err)\" >/dev/kmsg\n"
                 f"echo fred-test: rearm enabled=$(cat {SYSFS}/enabled) >/dev/kmsg\n"
                 f"rmmod lbr_dump 2>/tmp/err || echo \"fred-test: rmmod failed: $(cat /tmp/err)\" >/dev/kmsg\n"
                 "echo fred-test: loaded=$(test -d /sys/module/lbr_dump && echo yes || echo no) >/dev/kmsg\n")


def assert_kept(con: str, since: str):
    """After the marker `since`: arming again was refused with one line that names the reason
    (reboot to arm again), lbr_dump stayed loaded (rmmod refused), and nothing oopsed."""
    part = after(con, since)
    assert "fred-test: rearm failed" in part and "fred-test: rearm enabled=0" in part, tail(part)
    refusal = [l for l in kernel_lines(part, "lbr_dump: refusing to arm") if "FRED" in l]
    assert len(refusal) == 1 and "reboot" in refusal[0], kernel_lines(part, "lbr_dump: ")
    assert "fred-test: rmmod failed" in part and "fred-test: loaded=yes" in part, tail(part)
    assert_clean(con)


def test_bochs_a_cpu_disarming_cannot_put_back_keeps_what_its_page_reaches(r):
    """CPU 1's WRMSR of IA32_FRED_CONFIG is dropped (filter=1) from just after arming: disarming
    gives CPU 0 the kernel's value back, CPU 1 keeps lbr-dump's page. Then the memory the stubs'
    configuration named while armed (CPU 0's snapshot block, the stop stubs' save areas) is not
    freed, three kernel #PFs on CPU 1 that the kernel fixes up are not captured (the page goes
    straight on to the kernel's entry), arming again is refused until reboot (it would rewrite
    the configuration CPU 1 reads), and lbr_dump stays loaded."""
    vm = boot(bochs=True, name="fred-stuck", smp=2, timeout=500, script=f"""
{ARM}{CFG}echo fred-test: armed >/dev/kmsg; {SHOW}
insmod {CRASH} crash=fred_filter cpu=1 filter=1; rmmod lbr_crash
insmod {CRASH} crash=free_watch capture_cfg=0x$cfg
echo 0 > {SYSFS}/enabled; echo fred-test: disarmed enabled=$(cat {SYSFS}/enabled) >/dev/kmsg
rmmod lbr_crash
echo fred-test: watched >/dev/kmsg; {SHOW}
c0=$(cat {SYSFS}/captures)
insmod {CRASH} crash=fixed_pf cpu=1 rounds=3; rmmod lbr_crash
echo fred-test: captures before=$c0 after=$(cat {SYSFS}/captures) >/dev/kmsg
{REFUSED_TWICE}""")
    con = vm.console
    armed = pages(con, "fred-test: armed")
    assert sorted(armed) == [0, 1] and all(p == "lbr_dump_fred_user [lbr_dump]" for _, p in armed.values()), armed
    assert "fred_filter: cpu=1 filter=1" in con, kernel_lines(con, "lbr_crash") or tail(con)
    assert filtered(vm, 1, "WRMSR", "dropped"), "Bochs's filter dropped no WRMSR of CPU 1's IA32_FRED_CONFIG"
    # The injection took: CPU 0 holds the kernel's value again, CPU 1 still lbr-dump's page.
    now = pages(con, "fred-test: watched")
    assert now[0][1].startswith("asm_fred_entrypoint_user") and now[1] == armed[1], now
    assert "fred-test: disarmed enabled=0" in con, tail(con)
    watched = kernel_lines(con, "lbr_crash: free_watch: ")
    assert len([l for l in watched if re.search(r"free_watch: (cpu0_block|stop_save) 0x[0-9a-f]{16}$", l)]) == 2, watched
    assert not [l for l in watched if "freed" in l] and "lbr_crash: free_watch: removed, 0 frees" in watched, watched
    assert kernel_lines(con, "lbr_crash: fixed_pf: cpu=1 faults=3"), kernel_lines(con, "lbr_crash") or tail(con)
    m = re.search(r"fred-test: captures before=(\d+) after=(\d+)", con)
    assert m and m[1] == m[2], m and m[0]
    assert_kept(con, "fred-test: captures")


def test_bochs_a_cpu_offline_at_lbr_dumps_page_survives_an_nmi_after_disarming(r):
    """CPU 1's WRMSR of IA32_FRED_CONFIG raises #GP (filter=2); CPU 1 goes offline while armed,
    still at lbr-dump's page (its teardown cannot write the kernel's value back). An offline CPU
    still takes NMIs, through that page: late microcode loading sends them. After disarming,
    lbr_dump stays loaded (rmmod refused) and three NMIs to the offline CPU are taken, each
    through the page on to the kernel's entry (which returns at once on an offline CPU); arming
    again is refused until reboot."""
    vm = boot(bochs=True, name="fred-stuck-offline", smp=2, timeout=500, script=f"""
{ARM}echo fred-test: armed >/dev/kmsg; {SHOW}
insmod {CRASH} crash=fred_filter cpu=1 filter=2; rmmod lbr_crash
echo 0 > /sys/devices/system/cpu/cpu1/online
echo fred-test: offline=$(cat /sys/devices/system/cpu/cpu1/online) >/dev/kmsg
echo 0 > {SYSFS}/enabled; echo fred-test: disarmed enabled=$(cat {SYSFS}/enabled) >/dev/kmsg
rmmod lbr_dump 2>/tmp/err || echo "fred-test: first rmmod failed: $(cat /tmp/err)" >/dev/kmsg
insmod {CRASH} crash=nmi_offline cpu=1 rounds=3; rmmod lbr_crash
echo fred-test: survived >/dev/kmsg
{REFUSED_TWICE}""")
    con = vm.console
    armed = pages(con, "fred-test: armed")
    assert sorted(armed) == [0, 1] and all(p == "lbr_dump_fred_user [lbr_dump]" for _, p in armed.values()), armed
    assert "fred_filter: cpu=1 filter=2" in con, kernel_lines(con, "lbr_crash") or tail(con)
    assert "fred-test: offline=0" in con, tail(con)
    assert filtered(vm, 1, "WRMSR", "#GP"), "Bochs's filter faulted no WRMSR of CPU 1's IA32_FRED_CONFIG"
    assert "fred-test: disarmed enabled=0" in con, tail(con)
    assert "fred-test: first rmmod failed" in con, tail(con)
    assert "lbr_crash: nmi_offline: cpu=1 sent=3" in con and "fred-test: survived" in con, tail(con)
    assert_kept(con, "fred-test: survived")


def test_bochs_an_unreadable_ia32_fred_config_counts_as_lbr_dumps(r):
    """CPU 1's RDMSR and WRMSR of IA32_FRED_CONFIG raise #GP (filter=3) from just after arming:
    disarming cannot tell where CPU 1 enters, and takes it as lbr-dump's page (it is: lifting
    the filter afterwards shows it). The memory the stubs' configuration named while armed is
    not freed, lbr_dump stays loaded and arming again is refused until reboot."""
    vm = boot(bochs=True, name="fred-stuck-unreadable", smp=2, timeout=500, script=f"""
{ARM}{CFG}echo fred-test: armed >/dev/kmsg; {SHOW}
insmod {CRASH} crash=fred_filter cpu=1 filter=3; rmmod lbr_crash
insmod {CRASH} crash=free_watch capture_cfg=0x$cfg
echo 0 > {SYSFS}/enabled; echo fred-test: disarmed enabled=$(cat {SYSFS}/enabled) >/dev/kmsg
rmmod lbr_crash
insmod {CRASH} crash=fred_filter cpu=1 filter=0; rmmod lbr_crash
echo fred-test: lifted >/dev/kmsg; {SHOW}
{REFUSED_TWICE}""")
    con = vm.console
    armed = pages(con, "fred-test: armed")
    assert sorted(armed) == [0, 1] and all(p == "lbr_dump_fred_user [lbr_dump]" for _, p in armed.values()), armed
    assert "fred_filter: cpu=1 filter=3" in con, kernel_lines(con, "lbr_crash") or tail(con)
    assert filtered(vm, 1, "RDMSR", "#GP"), "Bochs's filter faulted no RDMSR of CPU 1's IA32_FRED_CONFIG"
    assert "fred-test: disarmed enabled=0" in con, tail(con)
    lifted = pages(con, "fred-test: lifted")
    assert lifted[0][1].startswith("asm_fred_entrypoint_user") and lifted[1] == armed[1], lifted
    watched = kernel_lines(con, "lbr_crash: free_watch: ")
    assert not [l for l in watched if "freed" in l] and "lbr_crash: free_watch: removed, 0 frees" in watched, watched
    assert_kept(con, "fred-test: lifted")
