#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build an out-of-tree module against the pinned test kernel, inside the build root.
# Usage: scripts/module.sh [DIR [VARIANT]]   DIR defaults to the repository (lbr_dump.ko); the
# test modules are in tests/modules/NAME. VARIANT is the kernel to build against (scripts/kernel.sh;
# default module; `debian`: Debian's own kernel, with GCC 14 as Debian built it, scripts/debian.sh). Objects go to out/module (lbr_dump) or out/NAME, with -VARIANT appended for
# another kernel than the module one; the build log to build.log there (the tests read it for
# warnings). Prints the path of the .ko.
source "$(dirname "$0")/common.sh"

VARIANT=${2:-module}
if [ "$VARIANT" = debian ]; then
	KDIR=$("$REPO/scripts/debian.sh")
	read -ra VARS <<<"$("$REPO/scripts/debian.sh" --env)"
else
	KDIR=$("$REPO/scripts/kernel.sh" "$VARIANT")
	VARS=(LLVM=1 ARCH=x86_64)
fi
M=$(cd "${1:-$REPO}" && pwd)
if [ "$M" = "$REPO" ]; then MO="$REPO/out/module" NAME=lbr_dump; else NAME=${M##*/} MO="$REPO/out/$NAME"; fi
[ "$VARIANT" = module ] || MO="$MO-$VARIANT"
mkdir -p "$MO"
in_root make -C "$KDIR" M="$M" MO="$MO" "${VARS[@]}" modules >"$MO/build.log" 2>&1 || {
	cat "$MO/build.log" >&2
	die "module build failed: $M"
}
echo "$MO/$NAME.ko"
