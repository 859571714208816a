#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Make the pinned build root: a Debian trixie system made with debootstrap, holding the exact
# package versions of scripts/packages.txt (LLVM/clang 19, rustc + rust-src 1.97.1, bindgen
# 0.71.1, linux-source-7.3, QEMU 11.1.3 with TCG plugins, busybox). It is made once per key
# (hash of packages.txt and this script) under $LBR_DUMP_CACHE and reused while the key holds.
# Idempotent; prints the root's path on stdout. Needs root (debootstrap, chroot, mounts).
#
# The Debian mirror is the one the host's apt already uses (override: LBR_DUMP_MIRROR).
source "$(dirname "$0")/common.sh"

if [ -e "$BUILD_ROOT/.complete" ]; then
	echo "$BUILD_ROOT"
	exit 0
fi
[ "$(id -u)" = 0 ] || die "making the build root needs root (debootstrap and chroot)"

host_mirror() {
	local m
	m=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\?[[:space:]]*$/\1/p' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
	[ -n "$m" ] || m=$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\/debian\)\/\?[[:space:]].*/\2/p' \
		/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1)
	echo "$m"
}
MIRROR=${LBR_DUMP_MIRROR:-$(host_mirror)}
[ -n "$MIRROR" ] || die "no Debian mirror found in the host's apt sources; set LBR_DUMP_MIRROR"

exec 9>"$CACHE/root.lock"
flock 9
[ -e "$BUILD_ROOT/.complete" ] && { echo "$BUILD_ROOT"; exit 0; }

if ! command -v debootstrap >/dev/null; then
	log "installing debootstrap on the host"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

TMP="$BUILD_ROOT.tmp"
rm -rf "$TMP"
log "debootstrap trixie into $TMP (mirror $MIRROR)"
debootstrap --variant=minbase trixie "$TMP" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
	die "debootstrap failed, see $CACHE/debootstrap.log"

rm -f "$TMP/etc/apt/sources.list"
cat >"$TMP/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb deb-src
URIs: $MIRROR
Suites: trixie trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC

# Install by suite; recommends are left out so the root holds only the pins and their
# dependencies. `PKG=VERSION` is exact: the toolchain (compilers, bindgen, kernel source, QEMU,
# busybox), which the kernel builds are keyed by; a version the mirror no longer has stops here.
# `PKG>=VERSION` is a floor: base packages that Debian replaces in place with point and security
# updates (the mirror keeps only the newest): the pinned version when the mirror still has it,
# else the mirror's newer one, said in a warning and recorded in the root's .versions.
available() { # PKG: the versions of binary package PKG on the mirror (not its source's)
	in_root apt-cache madison "$1" |
		awk -F'|' -v p="$1" '{ gsub(/ /, "", $1); gsub(/ /, "", $2) } $1 == p && $3 ~ /Packages$/ { print $2 }'
}
resolve() { # SUITE: the apt arguments for that suite's lines
	local suite=$1 spec pkg want avail
	while read -r s spec; do
		[ "$s" = "$suite" ] || continue
		if [[ $spec == *">="* ]]; then
			pkg=${spec%%>=*} want=${spec#*>=}
			avail=$(available "$pkg")
			if grep -qxF -- "$want" <<<"$avail"; then
				echo "$pkg=$want"
			else
				log "warning: $pkg $want is no longer on the mirror (replaced by a Debian update); installing $(head -n1 <<<"$avail"): update scripts/packages.txt"
				echo "$pkg"
			fi
		else
			pkg=${spec%%=*} want=${spec#*=}
			avail=$(available "$pkg")
			grep -qxF -- "$want" <<<"$avail" ||
				die "$pkg $want is no longer on the mirror: update its pin in scripts/packages.txt (a toolchain change: the kernels are rebuilt)"
			echo "$spec"
		fi
	done < <(grep -v '^[[:space:]]*\(#\|$\)' "$REPO/scripts/packages.txt")
}
FINAL=$BUILD_ROOT
BUILD_ROOT=$TMP
touch "$TMP/.complete" # lets in_root use the unfinished root; removed again on failure below
trap 'rm -f "$TMP/.complete"' ERR
export LBR_DUMP_ROOT_ENV="DEBIAN_FRONTEND=noninteractive"
log "installing pinned packages"
in_root apt-get update -qq
trixie=$(resolve trixie)
backports=$(resolve trixie-backports)
# shellcheck disable=SC2086
in_root apt-get install -y -qq --no-install-recommends $trixie >"$CACHE/apt.log" 2>&1 ||
	die "apt-get install failed, see $CACHE/apt.log"
# shellcheck disable=SC2086
in_root apt-get install -y -qq --no-install-recommends -t trixie-backports $backports >>"$CACHE/apt.log" 2>&1 ||
	die "apt-get install (backports) failed, see $CACHE/apt.log"
in_root apt-get clean
rm -f "$TMP/.complete"
trap - ERR

# Confirm the pins took: exact pins at exactly their version, floors at least at theirs.
while read -r suite spec; do
	case "$suite" in ''|'#'*) continue ;; esac
	if [[ $spec == *">="* ]]; then
		pkg=${spec%%>=*} want=${spec#*>=}
	else
		pkg=${spec%%=*} want=${spec#*=}
	fi
	have=$(chroot "$TMP" dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
	if [[ $spec == *">="* ]]; then
		[ -n "$have" ] && dpkg --compare-versions "$have" ge "$want" ||
			die "$pkg: installed '$have', pinned at least '$want'"
	else
		[ "$have" = "$want" ] || die "$pkg: installed '$have', pinned '$want'"
	fi
	echo "$pkg $have" >>"$TMP/.versions"
done <"$REPO/scripts/packages.txt"

touch "$TMP/.complete"
mv "$TMP" "$FINAL"
log "build root ready: $FINAL"
echo "$FINAL"
