#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (or reuse) the test kernel. Usage: scripts/kernel.sh [module|builtin|nocet]
#   module   linux-source-7.3 + scripts/kconfig/test-kernel.config; lbr_dump.ko is built against it
#   builtin  the same kernel with lbr_dump built in through the in-tree overlay (scripts/overlay.sh),
#            for boot-parameter tests
#   nocet    the module kernel without CONFIG_X86_CET (scripts/kconfig/nocet.config): no #CP gate
# Prints the build directory (O=) on stdout: it holds arch/x86/boot/bzImage, vmlinux and
# Module.symvers. The build directory is keyed by the kernel source version, the fragment, the
# build root and this script; an existing one is brought up to date by make (incremental), so the
# built-in variant recompiles only lbr_dump when only our sources changed. A new key's directory
# starts as a copy of the variant's newest build, which make then brings up to date (below); a
# built-in variant with none starts from the module variant's build, whose configuration differs
# only in CONFIG_LBR_DUMP, so it compiles lbr_dump, the Rust crates and what depends on that one
# symbol, not the kernel (a fresh machine: about 3 minutes instead of 10-15).
#
# Every variant builds from one source tree, linux-source with the overlay in drivers/lbr_dump
# (the module and nocet variants do not enable it): kbuild records the source path in every
# object's command, so only variants of one tree can share objects.
source "$(dirname "$0")/common.sh"

VARIANT=${1:-module}
case "$VARIANT" in module|builtin|nocet) ;; *) die "usage: $0 [module|builtin|nocet]" ;; esac
"$REPO/scripts/toolchain.sh" >/dev/null
# (Here, not in toolchain.sh: that script is part of the root's key.)
used "$BUILD_ROOT"
prune root

KVER=$(awk '$2 ~ /^linux-source-/ { sub(/.*=/, "", $2); print $2 }' "$REPO/scripts/packages.txt")
FRAGMENT="$REPO/scripts/kconfig/test-kernel.config"
# The variant's fragments, in order (a later line about a symbol overrides an earlier one).
fragments=("$FRAGMENT")
[ "$VARIANT" = module ] || fragments+=("$REPO/scripts/kconfig/$VARIANT.config")
inputs=("${fragments[@]}" "$REPO/scripts/kernel.sh")
KEY=$( { echo "$KVER $TOOLCHAIN_KEY"; cat "${inputs[@]}"; } | sha256sum | cut -c1-16)
SRC="$CACHE/linux-$KVER"             # the source, shared by every key (and scripts/debian.sh)
KSRC=$SRC/linux                      # the tree every variant builds
OUT="$CACHE/kbuild-$VARIANT-$KEY"
JOBS=$(( $(nproc) + 1 ))

exec 8>"$CACHE/kernel-$VARIANT.lock"
flock 8

# The source tree is unpacked and overlaid under the module variant's lock (scripts/debian.sh
# unpacks it under the same lock). The two variants that read the overlay hold that lock through
# their builds: the module variant's, whose lock it is, and the built-in variant's, which builds
# it, so that no run of another checkout sharing the cache rewrites it under them. (The nocet
# variant's build may see it change: its configuration reads drivers/lbr_dump/Kconfig, which
# scripts/overlay.sh replaces by a rename, never in place.) Locks are taken in one order, the
# variant's own and then the module variant's.
source_tree() {
	if [ ! -e "$SRC/.complete" ]; then
		log "unpacking linux-source $KVER"
		rm -rf "$SRC" && mkdir -p "$SRC"
		tar -C "$SRC" -xf "$BUILD_ROOT/usr/src/linux-source-7.3.tar.xz"
		mv "$SRC/linux-source-7.3" "$KSRC"
		touch "$SRC/.complete"
	fi
	# Until 2026-11 the built-in variant built a hard-linked copy of its own, under its own lock
	# (which this variant holds).
	[ "$VARIANT" != builtin ] || rm -rf "$SRC/linux-builtin" "$SRC/.builtin-complete"
	[ "$VARIANT" = nocet ] || "$REPO/scripts/overlay.sh" "$KSRC"
}
if [ "$VARIANT" = module ]; then
	source_tree
else
	exec 9>"$CACHE/kernel-module.lock"
	flock 9
	source_tree
	[ "$VARIANT" = builtin ] || exec 9>&-
fi

kmake() { in_root make -C "$KSRC" O="$OUT" LLVM=1 ARCH=x86_64 "$@"; }

# The newest finished build of this variant from the same source tree (its O= Makefile includes
# $KSRC's), other than $OUT: a new key's build starts as a copy of it.
seed() {
	local d t best="" newest=0
	for d in "$CACHE/kbuild-$VARIANT"-*; do
		[ "$d" != "$OUT" ] && [ "${d%.tmp}" = "$d" ] && [ -e "$d/.config-complete" ] && [ -e "$d/arch/x86/boot/bzImage" ] || continue
		grep -qxF "include $KSRC/Makefile" "$d/Makefile" 2>/dev/null || continue
		if [ -e "$d/.last-used" ]; then t=$(stat -c %Y "$d/.last-used"); else t=$(stat -c %Y "$d"); fi
		[ "$t" -gt "$newest" ] && newest=$t best=$d
	done
	echo "$best"
}

if [ ! -e "$OUT/.config-complete" ]; then
	rm -rf "$OUT"
	# A changed fragment (or this script) makes a new key. Instead of building it from nothing
	# (10-15 minutes), start from a copy of the newest build of the variant: the configuration
	# below is made from scratch all the same (tinyconfig does not read the old .config), and the
	# copy keeps the old include/config/auto.conf, so make's syncconfig sees which symbols
	# changed and kbuild's fixdep rebuilds only the objects that depend on them (and those whose
	# command line names the old directory: the Rust crates, objtool). The seed is not touched:
	# the variant's lock (above) keeps any other build out of it while it is copied.
	from=$(seed)
	if [ -z "$from" ] && [ "$VARIANT" = builtin ]; then
		# No built-in build of this tree yet: the module variant's, brought up to date first (the
		# module lock let go meanwhile: that run takes it), then copied under the module lock, so
		# that no build of it runs during the copy; this checkout's overlay put back after it.
		exec 9>&-
		from=$("$REPO/scripts/kernel.sh" module | tail -n 1)
		exec 9>"$CACHE/kernel-module.lock"
		flock 9
		"$REPO/scripts/overlay.sh" "$KSRC"
	fi
	if [ -n "$from" ]; then
		log "configuring $VARIANT kernel in $OUT, starting from a copy of $from"
		rm -rf "$OUT.tmp"
		cp -a --reflink=auto "$from" "$OUT.tmp"
		rm -f "$OUT.tmp/.config-complete" "$OUT.tmp/.last-used"
		echo "$from" >"$OUT.tmp/.seeded-from"
		mv "$OUT.tmp" "$OUT"
	else
		log "configuring $VARIANT kernel in $OUT"
		mkdir -p "$OUT"
	fi
	kmake -s tinyconfig >/dev/null
	in_root "$KSRC/scripts/kconfig/merge_config.sh" -m -O "$OUT" "$OUT/.config" "${fragments[@]}" >"$OUT/merge.log" 2>&1
	kmake -s olddefconfig >/dev/null
	# Refuse a configuration that silently differs from the fragments (the last line about a
	# symbol is what it must be).
	bad=0
	declare -A want=()
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) want[${line%%=*}]=$line ;;
		"# CONFIG_"*" is not set") sym=${line#\# }; want[${sym%% *}]=$line ;;
		esac
	done < <(cat "${fragments[@]}")
	for sym in "${!want[@]}"; do
		line=${want[$sym]}
		case "$line" in
		CONFIG_*) grep -qxF "$line" "$OUT/.config" || { log "fragment line not in .config: $line"; bad=1; } ;;
		*) grep -q "^$sym=" "$OUT/.config" && { log "fragment wants $sym off, .config has it on"; bad=1; } ;;
		esac
	done
	[ $bad = 0 ] || die "kernel configuration does not match the fragment (see $OUT/.config, $OUT/merge.log)"
	touch "$OUT/.config-complete"
fi

used "$OUT"
used "$SRC"
log "building $VARIANT kernel in $OUT (incremental when warm)"
kmake -j"$JOBS" bzImage modules >"$OUT/build.log" 2>&1 || {
	tail -n 40 "$OUT/build.log" >&2
	die "kernel build failed, full log: $OUT/build.log"
}
prune "kbuild-$VARIANT"
prune linux
echo "$OUT"
