# SPDX-License-Identifier: GPL-2.0
"""lbr-dump's crash output against the machinery that reads crash logs, with those tools' own
code where it can run here, their own expressions otherwise: syzkaller's Linux report
symbolizer, the kernel's scripts/decode_stacktrace.sh, and the oops keywords report parsers key
on. Real output: an oops with records, the last exception record and BTS lines, then a panic
on 2 CPUs (the panicking CPU's snapshot and the stopped CPU's)."""

import functools
import json
import re
import tempfile
from pathlib import Path

from harness import LKDTM, MODULE_KO, OOPS_KEYWORDS, SYZ_SYMBOLIZE, boot, decode, in_root, kernel_lines, symbols, tail
from vm import REPO, kernel_dir

@functools.cache
def crashed():
    """lkdtm EXCEPTION (an oops on CPU 0, whose snapshot has records, a last exception record
    and BTS records), then sysrq-c on CPU 1 (a panic: CPU 1's snapshot and CPU 0's `kept:`
    line), with the default, bounded output (print_records=16: each snapshot's `kept:` line)."""
    res = boot(finish=False, name="output-crash", cpu="Skylake-Client", accel="tcg",
               emulate="model=skylake", smp=2, timeout=300, bounded=True,
               script=f"insmod {MODULE_KO} bts=4 bts_print=8 enable=1\n"
                      f"taskset -c 0 sh -c 'echo EXCEPTION > {LKDTM}' || true\n"
                      "taskset -c 1 sh -c 'echo c > /proc/sysrq-trigger'\n")
    con = res.console
    ours = kernel_lines(con, "lbr_dump: ")
    kinds = {k for l in ours for k in ("#", "ler ", "bts #", "bts cpu=", "end ", "v2 cpu=0 kept: seq=",
                                       "v2 cpu=1 kept: the") if l.startswith("lbr_dump: " + k)}
    assert kinds == {"#", "ler ", "bts #", "bts cpu=", "end ", "v2 cpu=0 kept: seq=", "v2 cpu=1 kept: the"}, \
        f"not every kind of line was printed: {kinds}\n" + tail(con)
    assert "Kernel panic - not syncing" in con and len(re.findall(r"lbr_dump: end ", con)) >= 2, tail(con)
    return res


def snapshot_lines(console: str) -> list[str]:
    """lbr-dump's lines from the first snapshot on (the load and arming lines before it are
    not crash output)."""
    ours = kernel_lines(console, "lbr_dump: ")
    first = next(i for i, l in enumerate(ours) if re.match(r"lbr_dump: v\d+ cpu=", l))
    return ours[first:]


def test_syzkaller_symbolizes_none_of_our_lines(r):
    """syzkaller's symbolizer rewrites the first `name+0xN/0xN` after whitespace in a line, and
    its guilty-file search then reads the file it appended: in no line of ours may one
    match (the symbols follow `from=` and `to=`)."""
    lines = snapshot_lines(crashed().console)
    hit = [l for l in lines if SYZ_SYMBOLIZE.search(l)]
    assert not hit, f"{len(hit)} of {len(lines)} lines would be symbolized by syzkaller:\n" + "\n".join(hit[:5])
    # (The expression does find the kernel's own call trace: it is the one syzkaller uses.)
    assert any(SYZ_SYMBOLIZE.search(l) for l in crashed().console.splitlines() if "lbr_dump" not in l)


def test_no_line_of_ours_reads_as_a_kernel_report(r):
    lines = snapshot_lines(crashed().console)
    bad = [(k, l) for l in lines for k in OOPS_KEYWORDS if k in l]
    assert not bad, bad[:5]


def test_decode_stacktrace_leaves_our_lines_alone(r):
    """The kernel's scripts/decode_stacktrace.sh (run from the test kernel's source, against its
    vmlinux and the modules) annotates the last symbol of a line: it annotates none of ours (a
    symbol after `to=` is no symbol to it); the one change it makes is to drop the brackets of
    a module name that ends a line (`[lbr_dump]` becomes `lbr_dump`), and lbr-decode reads its
    output as it reads the log."""
    res = crashed()
    kdir = kernel_dir("module")
    src = (kdir / "source").resolve()      # the O= build's link to its source tree
    out = in_root("bash", src / "scripts/decode_stacktrace.sh", kdir / "vmlinux", src, REPO / "out" / "module",
                  stdin=res.log.read_text(errors="replace"))
    before = snapshot_lines(res.console)
    after = snapshot_lines(out)
    assert len(before) == len(after), (len(before), len(after))
    unbracket = lambda l: re.sub(r" \[(\w+)\]$", r" \1", l)
    changed = [(a, b) for a, b in zip(before, after) if a != b and b != unbracket(a)]
    assert not changed, changed[:5]
    # decode_stacktrace.sh did annotate: the kernel's call trace gained source lines.
    assert re.search(r"\(\S+\.[ch]:\d+\)", out), "decode_stacktrace.sh annotated nothing"
    code, want, err = decode(*symbols(), res.log)
    assert code == 0, err
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "console.log"
        log.write_text(out)
        code, got, err = decode(*symbols(), log)
    assert code == 0, err
    # (`line`: decode_stacktrace.sh writes more lines, a disassembly for each Code: line)
    strip = lambda j: [{k: v for k, v in s.items() if k not in ("source", "line")} for s in json.loads(j)["snapshots"]]
    assert strip(got) == strip(want)


def as_v1(log: str) -> str:
    """`log` as lbr-dump printed it before line format v2 (Documentation/lbr-dump/formats.rst):
    `v1` instead of `v2`, and the symbols of a record, ler or bts line as `| FROM_SYM -> TO_SYM`
    instead of `| from=FROM_SYM to=TO_SYM`."""
    log = re.sub(r"(lbr_dump: )v2 ", r"\1v1 ", log)
    return re.sub(r"(lbr_dump: .*) \| from=(.*?) to=(.*)$", r"\1 | \2 -> \3", log, flags=re.M)


def test_decode_stacktrace_annotated_v1_log_decodes_as_printed(r):
    """Logs of lbr-dump before line format v2 are in users' archives, many annotated by the
    kernel's scripts/decode_stacktrace.sh: it rewrites the last symbol of a line, a v1 record
    line's `to` symbol, as `name (file:line) module`, without the offset. The crash's log as v1
    printed it, annotated by the script: lbr-decode with vmlinux and the modules reads the same
    snapshots from it as from the v1 log (no "printed X, but the ELF files say Y" for a symbol
    the script rewrote: the name is what it compares). The one loss: the script drops offsets,
    so a module none of whose symbols keeps one (lbr_dump: its stubs are only ever a `to`)
    cannot be placed; its addresses keep the script's text, and a warning names the module."""
    res = crashed()
    v1 = as_v1(res.log.read_text(errors="replace"))
    assert re.search(r"lbr_dump: v1 cpu=", v1) and re.search(r"lbr_dump: #1 .* \| \S+.* -> \S+", v1), \
        "no v1 snapshot made of the log"
    kdir = kernel_dir("module")
    src = (kdir / "source").resolve()
    out = in_root("bash", src / "scripts/decode_stacktrace.sh", kdir / "vmlinux", src, REPO / "out" / "module",
                  stdin=v1)
    annotated = [l for l in kernel_lines(out, "lbr_dump: ") if re.search(r" -> \S+ \(\S+:\d+.*\)", l)]
    assert len(annotated) >= 16, "decode_stacktrace.sh annotated few v1 record lines:\n" + "\n".join(annotated)
    assert any(re.search(r" -> lbr_dump_stub_14 \(\S+:\d+\) lbr_dump$", l) for l in annotated), \
        "no module symbol annotated:\n" + "\n".join(annotated[:5])
    docs = []
    with tempfile.TemporaryDirectory() as d:
        for text in (v1, out):
            log = Path(d) / "console.log"
            log.write_text(text)
            code, got, err = decode(*symbols(), log)
            assert code == 0, err
            docs.append(json.loads(got))
    strip = lambda doc: [{k: v for k, v in s.items() if k not in ("source", "line")} for s in doc["snapshots"]]
    differ = []

    def walk(a, b):  # the places (dicts with an addr and a symbol) that differ
        if isinstance(a, dict) and "addr" in a and "symbol" in a:
            if a != b:
                differ.append((a, b))
        elif isinstance(a, dict):
            assert isinstance(b, dict) and a.keys() == b.keys(), (a, b)
            for k in a:
                walk(a[k], b[k])
        elif isinstance(a, list):
            assert isinstance(b, list) and len(a) == len(b), (a, b)
            for x, y in zip(a, b):
                walk(x, y)
        else:
            assert a == b, (a, b)
    assert docs[0]["snapshots"]
    walk(strip(docs[0]), strip(docs[1]))
    lost = set()
    for a, b in differ:
        m = re.fullmatch(r"(\w+) \(\S+:[\d?]+\) (\w+)", b["symbol"] or "")
        assert m and a["image"] == m[2] and a["symbol"].startswith(m[1] + "+") and b["addr"] == a["addr"] \
            and "image" not in b, f"a place differs other than by a module symbol the script rewrote: {a} {b}"
        lost.add(m[2])
    assert lost == {"lbr_dump"}, lost
    said = [f"module lbr_dump: its symbols in the log are annotated by decode_stacktrace.sh, which drops their "
            "offsets, and none is printed with one: its addresses keep the script's text (decode the log from "
            "before the script)"]
    assert docs[1]["warnings"] == docs[0]["warnings"] + said, docs[1]["warnings"]


def sizes(console: str, start: str, end: str | None) -> tuple[int, int, int, int]:
    """(lines, bytes) of lbr-dump's lines between the first line holding `start` and the next
    holding `end` (None: the log's end: a panic reboots before its end line), as the console
    shows them (timestamp included, newline counted), and of its BTS lines among them."""
    lines = console.splitlines()
    a = next(i for i, l in enumerate(lines) if start in l)
    b = next((i for i in range(a, len(lines)) if end is not None and end in lines[i]), len(lines) - 1)
    ours = [l for l in lines[a:b + 1] if "lbr_dump: " in l]
    bts = [l for l in ours if "lbr_dump: bts " in l]
    return len(ours), sum(len(l) + 1 for l in ours), len(bts), sum(len(l) + 1 for l in bts)


def bench_line(what: str, s: tuple[int, int, int, int]) -> str:
    lines, size, bts_lines, bts_size = s
    return (f"BENCH output size, {what}: {lines} lines, {size} bytes of lbr-dump's "
            f"({bts_lines} lines, {bts_size} bytes of them BTS with bts_print=8; without BTS "
            f"{lines - bts_lines} lines, {size - bts_size} bytes)")


def test_output_size_per_crash(r):
    """What lbr-dump prints per crash by default (Documentation/lbr-dump/formats.rst "How much a
    crash prints"), counted on real output: an oops on 1 CPU and a panic on 2 (crashed()), and a
    panic on 8 vCPUs (the harness checks that 8 were brought up); each with BTS (bts=4 bts_print=8) and, from the same
    output, without its BTS lines. Reported, and one bound asserted: a panic prints at most
    print_records + 4 + N lines besides BTS's on N CPUs (the panicking CPU's header, records,
    ler, end and `kept:` lines, one `kept:` line per other CPU and a last one), 28 on 8."""
    con = crashed().console
    oops = sizes(con, "Oops: ", "---[ end trace")
    panic2 = sizes(con, "Kernel panic - not syncing", None)
    res = boot(finish=False, name="output-panic8", cpu="Skylake-Client", accel="tcg", emulate="model=skylake",
               smp=8, timeout=400, bounded=True, script=f"insmod {MODULE_KO} bts=4 bts_print=8 enable=1\n"
                                          "echo c > /proc/sysrq-trigger\n")
    panic8 = sizes(res.console, "Kernel panic - not syncing", None)
    assert oops[0] and panic2[0] and panic8[0] > panic2[0], (oops, panic2, panic8)
    # The bound: print_records (16) + 4 + 8 lines besides BTS's; the other 7 CPUs one line each.
    lines, _, bts_lines, _ = panic8
    assert lines - bts_lines <= 16 + 4 + 8, (lines, bts_lines)
    assert len(re.findall(r"lbr_dump: v2 cpu=\d kept: seq=\d+ vector=", res.console)) == 7, tail(res.console)
    for what, s in (("oops, 1 CPU", oops), ("panic (sysrq-c), 2 CPUs", panic2), ("panic (sysrq-c), 8 CPUs", panic8)):
        print(bench_line(what, s), flush=True)
