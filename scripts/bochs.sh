#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (or reuse) Bochs, the FRED CPU of the FRED tests (tests/scenarios/fred.py): QEMU TCG does
# not emulate FRED; Bochs 3.1 does, with its `wildcat_lake` CPU model, when configured with
# --enable-fred (Debian's bochs package is not: it cannot serve). Usage: scripts/bochs.sh
# Prints the directory that holds bin/bochs and the BIOS images (BIOS-bochs-latest,
# VGABIOS-lgpl-latest.bin) on stdout.
#
# The source is the upstream tarball in third_party/bochs/ (its README: where it comes from, its
# licence), checked against the sha256 below; LBR_DUMP_BOCHS_TARBALL names another Bochs source
# tarball (one top directory holding bochs/) to build instead, unchecked. It is built in the
# build root (its g++) into $CACHE/bochs-KEY, keyed by the tarball's sha256, the configure line,
# this script and the patches it applies (scripts/bochs-*.patch: a fix to Bochs and a test
# device, each with its reason). Nothing is fetched: a missing or altered tarball is an error.
source "$(dirname "$0")/common.sh"

VENDORED="$REPO/third_party/bochs/bochs-3.1-783b58fd6.tar.xz"
VENDORED_SHA=85d89f902b0b77b60cd7a467fe03d5a5d3a0a06e0bb0750d671de60b5a26c994
TARBALL=${LBR_DUMP_BOCHS_TARBALL:-$VENDORED}
[ -r "$TARBALL" ] || die "no Bochs source: cannot read $TARBALL"
TARBALL=$(realpath "$TARBALL")
TAR_SHA=$(sha256sum "$TARBALL" | cut -d' ' -f1)
if [ -z "${LBR_DUMP_BOCHS_TARBALL:-}" ] && [ "$TAR_SHA" != "$VENDORED_SHA" ]; then
	die "$TARBALL has sha256 $TAR_SHA, not $VENDORED_SHA (third_party/bochs/README.md)"
fi

# The configure line with which this source boots Linux 7.3 with FRED on (tests/scenarios/fred.py):
# 64-bit, SMP, the Wildcat Lake model's features (FRED, CET, AVX, ...), no GUI, no plugins, no
# debugger.
CONFIGURE=(--with-nogui --without-x11 --without-x --disable-plugins --disable-debugger
	--disable-docbook --enable-x86-64 --enable-smp --enable-cpu-level=6
	--enable-all-optimizations --enable-avx --enable-fred --enable-cet --enable-protection-keys
	--enable-uintr --enable-vmx=2 --enable-pci --enable-fpu --enable-repeat-speedups
	--enable-a20-pin --enable-cdrom)
CFLAGS="-O2 -fno-strict-aliasing"

"$REPO/scripts/toolchain.sh" >/dev/null
# Patches applied to the source (each says what and why): a fix, and the tests' filter on
# IA32_FRED_CONFIG.
PATCHES=("$REPO/scripts/bochs-lkgs.patch" "$REPO/scripts/bochs-fred-filter.patch")
KEY=$( { echo "$TAR_SHA $CFLAGS ${CONFIGURE[*]}"; cat "$REPO/scripts/bochs.sh" "${PATCHES[@]}"; } |
	sha256sum | cut -c1-16)
OUT="$CACHE/bochs-$KEY"

exec 8>"$CACHE/bochs.lock"
flock 8

if [ ! -e "$OUT/.complete" ]; then
	log "building Bochs from $(basename "$TARBALL") into $OUT"
	start=$(date +%s)
	rm -rf "$OUT" && mkdir -p "$OUT/src" "$OUT/bin"
	tar -C "$OUT/src" --strip-components=1 -xf "$TARBALL"
	[ -x "$OUT/src/bochs/configure" ] || die "$TARBALL holds no bochs/configure"
	for p in "${PATCHES[@]}"; do
		patch -d "$OUT/src" -p1 --quiet --forward <"$p" || die "$p does not apply to $TARBALL"
	done
	in_root sh -c 'cd "$1/src/bochs" && shift && CFLAGS="$0" CXXFLAGS="$0" ./configure "$@"' \
		"$CFLAGS" "$OUT" "${CONFIGURE[@]}" >"$OUT/build.log" 2>&1 ||
		{ tail -n 30 "$OUT/build.log" >&2; die "Bochs configure failed, full log: $OUT/build.log"; }
	in_root make -C "$OUT/src/bochs" -j"$(nproc)" bochs >>"$OUT/build.log" 2>&1 ||
		{ tail -n 30 "$OUT/build.log" >&2; die "Bochs build failed, full log: $OUT/build.log"; }
	cp "$OUT/src/bochs/bochs" "$OUT/bin/bochs"
	cp "$OUT/src/bochs/bios/BIOS-bochs-latest" "$OUT/src/bochs/bios/VGABIOS-lgpl/VGABIOS-lgpl-latest.bin" "$OUT/"
	echo "$TAR_SHA" >"$OUT/.tarball-sha256"
	# The objects are not needed once bin/bochs is out (about 100 MB).
	rm -rf "$OUT/src"
	touch "$OUT/.complete"
	log "Bochs built in $(($(date +%s) - start)) s"
fi
used "$OUT"
prune bochs
echo "$OUT"
