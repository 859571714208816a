#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: the main job as far as it exists. Builds the pinned environment, the test kernel
# and lbr_dump.ko (first run: the kernel build takes ~10 minutes; later runs reuse the cache),
# boots the test VM under QEMU, arms lbr_dump, crashes the kernel with lkdtm and shows what
# lbr_dump printed in the oops.
#
# Until the branch-record emulator lands (tools/lbr-emu), the VM is plain QEMU TCG, which has no
# usable branch recorder: lbr_dump is armed with force=1 (testing only), so the oops shows the
# snapshot that belongs to the crash (vector, error code, RIP, CR2) with zero records.
source "$(dirname "$0")/common.sh"

log "building and booting (console: out/vm/demo/console.log)"
python3 "$REPO/scripts/vm.py" --name demo --cpu EPYC-Genoa --accel tcg --script "
insmod /lib/lbr-dump/lbr_dump.ko force=1 enable=1
sh -c 'echo EXCEPTION > /sys/kernel/debug/provoke-crash/DIRECT' || true
" >/dev/null || die "the VM did not finish; see $REPO/out/vm/demo/console.log"
echo
echo "The oops, as the VM printed it (lbr_dump's lines are near its end):"
sed -n '/Oops:/,/end trace/p' "$REPO/out/vm/demo/console.log" | grep -E 'Oops:|RIP: 0010|lbr_dump|end trace'
