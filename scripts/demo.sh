#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: the main job, on a kernel we did not build. Makes the pinned build root, prepares
# Debian's own 7.3 kernel (scripts/debian.sh: its unmodified vmlinuz, and the Rust metadata its
# headers package lacks, rebuilt from the same source with Debian's config, GCC 14 and rustc
# 1.85.1: no kernel build), builds lbr_dump.ko, the crash module and the branch-record emulator,
# boots Debian's kernel under QEMU TCG with the emulator presenting a Skylake with LBR
# (tools/lbr-emu), arms lbr_dump, crashes the kernel through a corrupted function pointer
# (tests/modules/lbr_crash crash=jump: RIP lands in unmapped memory, in no function) and shows
# the oops with the branch records lbr_dump printed, newest first: they name the function that
# made the bad call, which the oops alone cannot. Then lbr-decode (tools/lbr-decode) reads them
# back from the console log and symbolizes them against Debian's vmlinux with DWARF (its -dbg
# package, `scripts/debian.sh --dbg`) and the modules, with source lines.
source "$(dirname "$0")/common.sh"

log "preparing Debian's kernel, building, booting (console: out/vm/demo/console.log)"
python3 "$REPO/scripts/vm.py" --name demo --kernel debian --cpu Skylake-Client --accel tcg --emulate model=skylake \
	--script "
insmod /lib/lbr-dump/lbr_dump.ko enable=1
sh -c 'insmod /lib/lbr-dump/lbr_crash.ko crash=jump' || true
" >/dev/null || die "the VM did not finish; see $REPO/out/vm/demo/console.log"
echo
echo "lbr_dump at load:"
grep -E 'lbr_dump: (Intel|AMD|armed)' "$REPO/out/vm/demo/console.log" | sed 's/^\[[ 0-9.]*\] /  /'
echo
echo "The oops, as the VM printed it (lbr_dump's records, newest first, near its end):"
sed -n '/Oops:/,/end trace/p' "$REPO/out/vm/demo/console.log" |
	grep -E 'Oops:|RIP: 0010|Call Trace|lbr_dump|end trace' | sed 's/^\[[ 0-9.]*\] /  /' | head -60
echo
echo "The same records decoded from the console log by lbr-decode (source lines from DWARF):"
cargo build --quiet --release -p lbr-decode --manifest-path "$REPO/Cargo.toml"
VMLINUX=$("$REPO/scripts/debian.sh" --dbg)
"$TARGET/release/lbr-decode" --color never -k "$VMLINUX" -m "$REPO/out/module-debian" \
	-m "$REPO/out/lbr_crash-debian" "$REPO/out/vm/demo/console.log" | head -40
