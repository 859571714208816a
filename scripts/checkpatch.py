#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The kernel's scripts/checkpatch.pl --strict on lbr-dump's kernel-side files.

Runs the checkpatch.pl of the pinned kernel source (the linux-source package of the build root,
unpacked by scripts/kernel.sh), inside the build root, on the C, assembly, header and Kbuild files
of src/, asm/ and tests/modules/ (or on the FILEs given). Every ERROR and WARNING must be one of
scripts/checkpatch-exceptions (a file, a checkpatch type, how many, and why); CHECKs are counted,
not refused. Prints what is neither, and every exception that no longer matches as written;
exits 1 if there is any, 2 if checkpatch itself did not run.

Usage: scripts/checkpatch.py [FILE...]
"""

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXCEPTIONS = REPO / "scripts" / "checkpatch-exceptions"
LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<level>ERROR|WARNING|CHECK):(?P<type>[A-Z0-9_]+): (?P<msg>.*)$")


def files() -> list[str]:
    """The project's kernel-side sources checkpatch reads."""
    out = []
    for top in ("src", "asm", "tests/modules"):
        for p in sorted((REPO / top).rglob("*")):
            if p.suffix in (".c", ".h", ".S") or p.name in ("Kbuild", "Kconfig"):
                out.append(str(p.relative_to(REPO)))
    return ["Kbuild", "Kconfig"] + out


def exceptions() -> dict[tuple[str, str], int]:
    """scripts/checkpatch-exceptions: `FILE TYPE COUNT: reason` lines (# comments)."""
    want = {}
    for n, line in enumerate(EXCEPTIONS.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"(\S+) ([A-Z0-9_]+) (\d+): (.+)", line)
        if not m:
            sys.exit(f"{EXCEPTIONS}:{n}: not `FILE TYPE COUNT: reason`: {line}")
        want[(m[1], m[2])] = int(m[3])
    return want


def checkpatch(paths: list[str]) -> subprocess.CompletedProcess:
    script = ('source scripts/common.sh; '
              'KVER=$(awk \'$2 ~ /^linux-source-/ { sub(/.*=/, "", $2); print $2 }\' scripts/packages.txt); '
              'CP="$CACHE/linux-$KVER/linux/scripts/checkpatch.pl"; '
              '[ -e "$CP" ] || die "no $CP: scripts/kernel.sh unpacks the kernel source"; '
              'in_root perl "$CP" --strict --no-tree --terse --show-types --no-summary --color=never -f "$@"')
    return subprocess.run(["bash", "-c", script, "_", *paths], cwd=REPO, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def main() -> int:
    paths = sys.argv[1:] or files()
    p = checkpatch(paths)
    found = [m for m in map(LINE.match, p.stdout.splitlines()) if m]
    if p.returncode not in (0, 1) or (p.returncode == 1 and not found):
        sys.stderr.write(p.stderr + p.stdout)
        print(f"checkpatch.pl did not run (exit {p.returncode})")
        return 2
    checks = sum(1 for m in found if m["level"] == "CHECK")
    counted = Counter((m["file"], m["type"]) for m in found if m["level"] != "CHECK")
    allowed = exceptions() if not sys.argv[1:] else {}
    bad = 0
    for m in found:
        if m["level"] != "CHECK" and counted[(m["file"], m["type"])] != allowed.get((m["file"], m["type"])):
            print(m[0])
            bad += 1
    for (f, t), n in sorted(allowed.items()):
        if counted.get((f, t), 0) != n:
            print(f"scripts/checkpatch-exceptions: {f} {t} {n}: checkpatch found {counted.get((f, t), 0)}")
            bad += 1
    print(f"checkpatch --strict: {len(paths)} files, {sum(counted.values())} errors and warnings "
          f"({sum(allowed.values())} excepted), {checks} checks; {bad} refused")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
