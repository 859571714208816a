#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build lbr_dump.ko against the pinned test kernel, inside the build root, out of tree.
# Usage: scripts/module.sh
# Objects go to out/module; the build log to out/module/build.log (the tests read it for warnings).
# Prints the path of lbr_dump.ko.
source "$(dirname "$0")/common.sh"

KDIR=$("$REPO/scripts/kernel.sh" module)
MO="$REPO/out/module"
mkdir -p "$MO"
in_root make -C "$KDIR" M="$REPO" MO="$MO" LLVM=1 ARCH=x86_64 modules >"$MO/build.log" 2>&1 || {
	cat "$MO/build.log" >&2
	die "module build failed"
}
echo "$MO/lbr_dump.ko"
