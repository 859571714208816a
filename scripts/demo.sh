#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: the main job as far as it exists. Builds the pinned environment, the test kernel
# and lbr_dump.ko (first run: the kernel build takes a while; later runs reuse the cache), boots
# the test VM under QEMU, loads the module and shows what it reports.
#
# Until the branch-record emulator lands (tools/lbr-emu), the VM is plain QEMU TCG, which has no
# usable branch recorder: the module prints what CPUID describes and refuses with -ENODEV.
source "$(dirname "$0")/common.sh"

log "building and booting (console: out/vm/demo/console.log)"
python3 "$REPO/scripts/vm.py" --name demo --cpu Skylake-Client --accel tcg --script "
insmod /lib/lbr-dump/lbr_dump.ko || echo \"insmod: exit \$? (see the lbr_dump line above)\"
" >/dev/null || die "the VM did not finish; see $REPO/out/vm/demo/console.log"
echo
echo "What lbr_dump reported in the VM:"
grep -E 'lbr_dump|insmod' "$REPO/out/vm/demo/console.log"
