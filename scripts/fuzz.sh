#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Runs lbr-decode's coverage-guided fuzz targets (tools/lbr-decode/fuzz) for a bounded time each.
#
#   scripts/fuzz.sh [SECONDS] [TARGET]...     (default: 60 s, every target)
#
# cargo-fuzz (libFuzzer) with the machine's stable rustc: `--sanitizer none` needs no nightly
# flag (coverage instrumentation is stable); the readers are safe Rust, so what a fuzzer finds is
# a panic or an abort, which libFuzzer reports as a crash. cargo-fuzz is installed once into the
# cache, keyed by its version. Seeds are in fuzz/seeds/TARGET; the working corpus and any crash
# input go to out/fuzz/TARGET. Prints one "fuzz TARGET: ok|CRASH ..." line per target; exit 1 on a
# crash.
source "$(dirname "$0")/common.sh"

SECONDS_EACH=${1:-60}
shift || true
FUZZ_VERSION=0.13.2
TOOL="$CACHE/cargo-fuzz-$FUZZ_VERSION"
if [ ! -x "$TOOL/bin/cargo-fuzz" ]; then
	log "installing cargo-fuzz $FUZZ_VERSION into $TOOL"
	cargo install --quiet --locked --version "$FUZZ_VERSION" --root "$TOOL.tmp" cargo-fuzz >&2
	rm -rf "$TOOL" && mv "$TOOL.tmp" "$TOOL"
fi
export PATH="$TOOL/bin:$PATH"

cd "$REPO/tools/lbr-decode"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || mapfile -t TARGETS < <(cargo fuzz list)
# Build products outside the repository, so that a fresh clone (CI) reuses them.
TARGET_DIR="$CACHE/fuzz-target"
cargo fuzz build --sanitizer none -O --target-dir "$TARGET_DIR" >&2
# One target per CPU at a time (each is one libFuzzer process on one core, for its full time);
# the lines come out in the targets' order.
fuzz_one() {
	local t=$1 work="$REPO/out/fuzz/$1" runs
	mkdir -p "$work/corpus" "$work/artifacts"
	cp -n fuzz/seeds/"$t"/* "$work/corpus/" 2>/dev/null || true
	if cargo fuzz run --sanitizer none -O --target-dir "$TARGET_DIR" "$t" "$work/corpus" -- \
		-max_total_time="$SECONDS_EACH" -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
		>"$work/fuzz.log" 2>&1; then
		runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$')
		echo "fuzz $t: ok, ${runs:-?} inputs in ${SECONDS_EACH}s, corpus $(ls "$work/corpus" | wc -l)" >"$work/result"
	else
		echo "fuzz $t: CRASH, see $work/fuzz.log and $work/artifacts/" >"$work/result"
	fi
}
for t in "${TARGETS[@]}"; do
	rm -f "$REPO/out/fuzz/$t/result"
	while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
	fuzz_one "$t" &
done
wait
status=0
for t in "${TARGETS[@]}"; do
	line=$(cat "$REPO/out/fuzz/$t/result" 2>/dev/null || echo "fuzz $t: CRASH, no result (see $REPO/out/fuzz/$t/fuzz.log)")
	echo "$line"
	case "$line" in *": ok,"*) ;; *) status=1 ;; esac
done
exit $status
