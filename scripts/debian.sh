#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Debian's own 7.3 kernel, unmodified, and a tree to build out-of-tree modules against it.
# Usage: scripts/debian.sh        prints the tree's directory (an O= build directory)
#        scripts/debian.sh --env  prints the make variables a module build against it needs
#        scripts/debian.sh --dbg  prints the path of Debian's vmlinux with DWARF (its -dbg
#                                 package, 1.2 GB: fetched only when asked, for lbr-decode)
#
# Debian builds linux-image-7.3.4+deb13-amd64 with CONFIG_RUST=y, GCC 14 and rustc 1.85.1, but its
# headers package ships no Rust metadata (rust/*.rmeta, libmacros.so), which an out-of-tree Rust
# module needs. This script rebuilds exactly that, and nothing else, from the same source:
#   - downloads (in the build root, from its Debian mirror) Debian's kernel image, its headers,
#     and the compiler Debian used: rustc 1.85.1 from trixie main (the root has backports' newer
#     one; the v0 mangling of the Rust symbols Debian's kernel exports depends on the rustc
#     version, so only 1.85.1 makes the same names), with its rust-src and standard library, and
#     pahole 1.30 (without it olddefconfig drops DEBUG_INFO_BTF and the options that need it,
#     which change struct layouts). Each .deb is checked against the SHA256 of the mirror's
#     signed package index (apt-cache show).
#   - configures an O= directory of linux-source-7.3 (the tree scripts/kernel.sh unpacks, with
#     lbr-dump's overlay in drivers/lbr_dump, which Debian's .config leaves off) with Debian's .config and LOCALVERSION=+deb13-amd64 (vermagic 7.3.4+deb13-amd64), and
#     refuses to go on if olddefconfig changes any line but the signing-key ones;
#   - runs modules_prepare (about 1.5 minutes on 2 cores: the Rust crates and their exports);
#   - adds Debian's Module.symvers and BTF vmlinux (for module BTF), and Debian's vmlinuz as
#     arch/x86/boot/bzImage, where the test harness looks for a kernel to boot.
# The entry is keyed by the package versions, the build root and this script.
source "$(dirname "$0")/common.sh"

DEB_KVER=7.3.4+deb13-amd64           # the kernel's release (uname -r)
DEB_VER=7.3.4-1~bpo13+1              # its packages' version (trixie-backports)
RUST_VER=1.85.1+dfsg1-1+deb13u1      # CONFIG_RUSTC_VERSION_TEXT of Debian's config
PAHOLE_VER=1.30-1
PACKAGES=(
	"linux-binary-$DEB_KVER=$DEB_VER"
	"linux-headers-$DEB_KVER=$DEB_VER"
	"rustc=$RUST_VER" "rust-src=$RUST_VER" "libstd-rust-1.85=$RUST_VER" "libstd-rust-dev=$RUST_VER"
	"pahole=$PAHOLE_VER"
)

KVER=$(awk '$2 ~ /^linux-source-/ { sub(/.*=/, "", $2); print $2 }' "$REPO/scripts/packages.txt")
SRC="$CACHE/linux-$KVER"             # the source tree scripts/kernel.sh builds, shared
KSRC=$SRC/linux
KEY=$( { echo "$KVER $ROOT_KEY ${PACKAGES[*]}"; cat "$REPO/scripts/debian.sh"; } | sha256sum | cut -c1-16)
DIR="$CACHE/debian-$KEY"
OUT="$DIR/build"
TOOLS="$DIR/tools"
JOBS=$(( $(nproc) + 1 ))

# The make variables of a build against this tree: Debian's compilers, its release string.
make_vars() {
	echo "ARCH=x86 LOCALVERSION=+deb13-amd64 CC=x86_64-linux-gnu-gcc-14 HOSTCC=gcc-14" \
		"RUSTC=$TOOLS/rustc RUSTDOC=$TOOLS/rustdoc BINDGEN=bindgen PAHOLE=$TOOLS/pahole"
}
case "${1:-}" in "" | --env | --dbg) ;; *) die "usage: $0 [--env | --dbg]" ;; esac
if [ "${1:-}" = --env ]; then
	make_vars
	exit 0
fi
"$REPO/scripts/toolchain.sh" >/dev/null

# fetch NAME=VERSION DIR: downloads that package into DIR (in the build root, from its mirror),
# checks it against the SHA256 of the mirror's signed package index, prints the file's path.
fetch() {
	local name=${1%%=*} want got file
	in_root sh -c 'cd "$1" && apt-get download "$2"' _ "$2" "$1" >>"$DIR/download.log" 2>&1 ||
		{ cat "$DIR/download.log" >&2; die "downloading $1 failed"; }
	want=$(in_root apt-cache show "$1" | awk '/^SHA256: / { print $2; exit }')
	file=$(ls "$2/${name}_"*.deb)
	got=$(sha256sum "$file" | cut -d' ' -f1)
	[ -n "$want" ] && [ "$want" = "$got" ] || die "$file: SHA256 $got, the package index says ${want:-nothing}"
	echo "$file"
}

exec 8>"$CACHE/debian.lock"
flock 8

# Unpacked as scripts/kernel.sh does (under the module variant's lock, which guards it there).
if [ ! -e "$SRC/.complete" ]; then
	exec 9>"$CACHE/kernel-module.lock"
	flock 9
	if [ ! -e "$SRC/.complete" ]; then
		log "unpacking linux-source $KVER"
		rm -rf "$SRC" && mkdir -p "$SRC"
		tar -C "$SRC" -xf "$BUILD_ROOT/usr/src/linux-source-7.3.tar.xz"
		mv "$SRC/linux-source-7.3" "$KSRC"
		touch "$SRC/.complete"
	fi
	exec 9>&-
fi
used "$SRC"

if [ ! -e "$DIR/.complete" ]; then
	log "preparing Debian's $DEB_KVER kernel and a module tree for it in $DIR"
	rm -rf "$DIR" && mkdir -p "$DIR/debs" "$TOOLS/root" "$DIR/image" "$DIR/headers" "$OUT"
	for p in "${PACKAGES[@]}"; do
		file=$(fetch "$p" "$DIR/debs")
		case "${p%%=*}" in
		linux-binary-*) dpkg-deb -x "$file" "$DIR/image" ;;
		linux-headers-*) dpkg-deb -x "$file" "$DIR/headers" ;;
		*) dpkg-deb -x "$file" "$TOOLS/root" ;;
		esac
	done
	# rustc and pahole run from where they were unpacked; their libraries are beside them.
	for t in rustc rustdoc pahole; do
		cat >"$TOOLS/$t" <<-EOF
		#!/bin/sh
		LD_LIBRARY_PATH=$TOOLS/root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec $TOOLS/root/usr/bin/$t "\$@"
		EOF
		chmod +x "$TOOLS/$t"
	done
	want=$(grep '^CONFIG_RUSTC_VERSION_TEXT=' "$DIR/headers/usr/src/linux-headers-$DEB_KVER/.config" | cut -d'"' -f2)
	got=$(in_root "$TOOLS/rustc" --version)
	[ "$want" = "$got" ] || die "rustc says \"$got\", Debian's kernel was built with \"$want\""
	H="$DIR/headers/usr/src/linux-headers-$DEB_KVER"
	cp "$H/.config" "$OUT/.config"
	# shellcheck disable=SC2046
	in_root make -C "$KSRC" O="$OUT" $(make_vars) -s olddefconfig >"$DIR/config.log" 2>&1 ||
		{ cat "$DIR/config.log" >&2; die "olddefconfig failed"; }
	# The same configuration as Debian's, line for line, but for three kinds of line, none of
	# which changes what a module is built from: OPENSSL_SUPPORTS_ML_DSA, which says whether the
	# build host's OpenSSL can make ML-DSA keys (Debian's could; the build root's cannot), the
	# ML-DSA signing-key choices that depend on it, and LBR_DUMP, which the shared source tree
	# offers (scripts/kernel.sh puts lbr-dump's overlay in it) and Debian's configuration does
	# not set.
	ignore='^CONFIG_OPENSSL_SUPPORTS_ML_DSA=\|^# CONFIG_MODULE_SIG_KEY_TYPE_MLDSA_[0-9]* is not set$\|^# CONFIG_LBR_DUMP is not set$'
	if ! diff <(grep -v "$ignore" "$H/.config") <(grep -v "$ignore" "$OUT/.config") >"$DIR/config.diff"; then
		cat "$DIR/config.diff" >&2
		die "olddefconfig changed Debian's configuration (above): the module tree would not match its kernel"
	fi
	log "modules_prepare for Debian's configuration (GCC 14, rustc 1.85.1)"
	# shellcheck disable=SC2046
	in_root make -C "$KSRC" O="$OUT" $(make_vars) -j"$JOBS" modules_prepare >"$DIR/prepare.log" 2>&1 ||
		{ tail -n 40 "$DIR/prepare.log" >&2; die "modules_prepare failed, full log: $DIR/prepare.log"; }
	cp "$H/Module.symvers" "$H/vmlinux" "$OUT/"
	mkdir -p "$OUT/arch/x86/boot"
	cp "$DIR/image/usr/lib/modules/$DEB_KVER/vmlinuz" "$OUT/arch/x86/boot/bzImage"
	touch "$DIR/.complete"
fi

if [ "${1:-}" = --dbg ]; then
	if [ ! -e "$DIR/dbg/.complete" ]; then
		log "fetching Debian's vmlinux with DWARF (linux-image-$DEB_KVER-dbg)"
		rm -rf "$DIR/dbg" && mkdir -p "$DIR/dbg"
		file=$(fetch "linux-image-$DEB_KVER-dbg=$DEB_VER" "$DIR/dbg")
		# Only vmlinux (430 MB) of its 7.8 GB; the .deb goes once it is out.
		dpkg-deb --fsys-tarfile "$file" | tar -x -O "./usr/lib/debug/lib/modules/$DEB_KVER/vmlinux" >"$DIR/dbg/vmlinux"
		rm -f "$file"
		touch "$DIR/dbg/.complete"
	fi
	used "$DIR"
	echo "$DIR/dbg/vmlinux"
	exit 0
fi
used "$DIR"
prune debian
echo "$OUT"
