#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the test VM's base initramfs: static busybox from the build root, tests/initramfs/init,
# the user-mode test programs of tests/user/ (/bin/lbr-NAME), and the given kernel modules in
# /lib/lbr-dump/. Usage: scripts/initramfs.sh OUT.cpio [MODULE.ko...]
# scripts/vm.py appends a second archive with the scenario's /scenario.sh (the kernel unpacks
# concatenated archives in order).
source "$(dirname "$0")/common.sh"

out=$1
shift
stage="$out.d"
rm -rf "$stage"
mkdir -p "$stage"/{bin,proc,sys,dev,tmp,lib/lbr-dump}
cp "$BUILD_ROOT/usr/bin/busybox" "$stage/bin/busybox"
install -m 0755 "$REPO/tests/initramfs/init" "$stage/init"
for ko in "$@"; do cp "$ko" "$stage/lib/lbr-dump/"; done
# User-mode test programs (tests/user/*.S: static, no libc), as /bin/lbr-NAME.
for src in "$REPO"/tests/user/*.S; do
	name=$(basename "$src" .S)
	in_root clang -nostdlib -static -Wl,--build-id=none -o "$stage/bin/lbr-$name" "$src"
done
in_root sh -c 'cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0' _ "$stage" >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
