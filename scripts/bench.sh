#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# lbr-decode benchmarks against baselines on the same inputs in the same run; prints BENCH lines
# with ratios (reports, never assertions).
#
#   scripts/bench.sh [CRASH_LOG]
#
# 1. Scanning a 1 GiB memory dump for snapshot areas vs a plain memchr::memmem scan of it.
# 2. Symbolizing 10,000 kernel text addresses (function, source line, inlined frames) vs binutils
#    `addr2line -f -i` and vs LLVM's `llvm-symbolizer --inlining` (the faster peer; both from the
#    build root) on the same vmlinux and addresses.
# 3. Annotating a crash log with 32 records vs the kernel's scripts/decode_stacktrace.sh on the
#    same log (CRASH_LOG; default: the fixture of a real crash, which needs the vmlinux it came
#    from, so the default uses a fresh crash log of the current test kernel when one exists).
# 4. Reading a kdump-compressed dump of 1 GiB of memory (makedumpfile -c -d 0, every page zlib
#    compressed, made here from the ELF vmcore of tests/scenarios/dumps.py's 1 GiB guest) vs
#    makedumpfile reading the same file: rewriting it with its pages uncompressed, which
#    decompresses every page as lbr-decode does (makedumpfile cannot convert a kdump-compressed
#    file to ELF: "'-E' option is disable, because ... is kdump compressed format").
source "$(dirname "$0")/common.sh"

KDIR=$("$REPO/scripts/kernel.sh" module)
VMLINUX="$KDIR/vmlinux"
OUT="$REPO/out/bench"
mkdir -p "$OUT"
cargo build --quiet --release -p lbr-decode --example bench --bin lbr-decode
BENCH="$TARGET/release/examples/bench"
DECODE="$TARGET/release/lbr-decode"

"$BENCH" scan "$OUT"

# 10,000 addresses inside kernel functions (System.map text symbols, deterministic choice).
python3 - "$KDIR/System.map" "$OUT/addresses" <<'PY'
import random, sys
syms = [int(l.split()[0], 16) for l in open(sys.argv[1]) if l.split()[1] in "tT"]
syms.sort()
r = random.Random(1)
with open(sys.argv[2], "w") as f:
    for _ in range(10000):
        i = r.randrange(len(syms) - 1)
        a, b = syms[i], syms[i + 1]
        f.write(f"{a + r.randrange(max(1, b - a)):x}\n")
PY
now() { date +%s.%N; }
t0=$(now); "$BENCH" symbolize "$VMLINUX" "$OUT/addresses" >"$OUT/ours.txt"; t1=$(now)
in_root addr2line -f -i -e "$VMLINUX" <"$OUT/addresses" >"$OUT/addr2line.txt"; t2=$(now)
sed 's/^/0x/' "$OUT/addresses" >"$OUT/addresses-0x"  # llvm-symbolizer reads hex with its 0x
t3=$(now); in_root llvm-symbolizer --inlining --obj="$VMLINUX" <"$OUT/addresses-0x" >"$OUT/llvm-symbolizer.txt"; t4=$(now)
python3 -c "
ours, base, llvm = $t1 - $t0, $t2 - $t1, $t4 - $t3
print(f'BENCH symbolize 10000 addresses: lbr-decode {ours:.2f} s, binutils addr2line -f -i {base:.2f} s, ratio {ours / base:.3f}')
print(f'BENCH symbolize 10000 addresses: lbr-decode {ours:.2f} s, llvm-symbolizer --inlining {llvm:.2f} s, ratio {ours / llvm:.3f}')"

LOG=${1:-}
if [ -z "$LOG" ]; then
	LOG=$(ls -t "$REPO"/out/vm/decode-crash/console.log 2>/dev/null | head -1)
fi
if [ -n "$LOG" ] && [ -f "$LOG" ]; then
	t0=$(now); "$DECODE" --format annotate -k "$VMLINUX" -m "$REPO/out/module" -m "$REPO/out/lbr_crash" "$LOG" >"$OUT/annotated-ours.txt" 2>/dev/null; t1=$(now)
	SRC=$(readlink -f "$KDIR/source" 2>/dev/null || true)
	in_root bash "$SRC/scripts/decode_stacktrace.sh" "$VMLINUX" "$SRC" "$REPO/out/module" <"$LOG" >"$OUT/annotated-decode_stacktrace.txt" 2>&1; t2=$(now)
	python3 -c "
ours, base = $t1 - $t0, $t2 - $t1
print(f'BENCH annotate a 32-record crash log: lbr-decode {ours:.2f} s, scripts/decode_stacktrace.sh {base:.2f} s, ratio {ours / base:.3f}')"
else
	echo "BENCH annotate: skipped, no crash log (run the decode scenario first, or pass one)" >&2
fi

VMCORE="$REPO/out/vm/dumps-kdump/disk.img"
if [ -f "$VMCORE" ]; then
	rm -f "$OUT/bench.kdump"
	in_root makedumpfile --message-level 4 -c -d 0 "$VMCORE" "$OUT/bench.kdump" >&2
	read -r ours memory found warnings < <("$BENCH" dump "$OUT/bench.kdump")
	# makedumpfile's best of 3, timed inside the build root (not its namespace setup).
	base=$(in_root sh -c 'best=; for i in 1 2 3; do rm -f "$2"; s=$(date +%s.%N)
		makedumpfile --message-level 4 -d 0 "$1" "$2" >&2 || exit 1
		t=$(echo "$(date +%s.%N) - $s" | bc); if [ -z "$best" ] || [ "$(echo "$t < $best" | bc)" = 1 ]; then best=$t; fi
		done; rm -f "$2"; echo "$best"' _ "$OUT/bench.kdump" "$OUT/bench-rewritten.kdump")
	python3 -c "
ours, base, mem, size = $ours, $base, $memory, $(stat -c %s "$OUT/bench.kdump")
print(f'BENCH kdump-compressed dump of {mem / 2**30:.2f} GiB of memory (makedumpfile -c -d 0 of the dumps scenario vmcore, {size / 2**20:.0f} MiB): lbr-decode finds {$found} area(s) in {ours:.2f} s ({mem / ours / 1e9:.2f} GB/s), makedumpfile reading it (rewrite uncompressed) {base:.2f} s, ratio {ours / base:.3f}')"
	rm -f "$OUT/bench.kdump"
else
	echo "BENCH kdump: skipped, no vmcore (run the dumps scenario first)" >&2
fi
