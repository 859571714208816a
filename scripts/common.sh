# SPDX-License-Identifier: GPL-2.0
# Shared settings for lbr-dump's scripts. Sourced, never run.
#
# Everything expensive (the build root, the kernel source, kernel builds) lives in one cache
# directory outside the repository: $LBR_DUMP_CACHE, default ~/.cache/lbr-dump. Each entry is
# named by a hash of its inputs, so a changed input makes a new entry and an unchanged one is reused.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${LBR_DUMP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lbr-dump}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

# Cargo's build directory: $CARGO_TARGET_DIR if set (.ci/run keeps it in the cache), else target/.
TARGET=$(cd "$REPO" && realpath -m "${CARGO_TARGET_DIR:-target}")

log() { printf '[lbr-dump] %s\n' "$*" >&2; }
die() { printf '[lbr-dump] error: %s\n' "$*" >&2; exit 1; }

# key FILE... : a short hash over the contents of the files (and of extra strings via `key_str`).
key() { cat "$@" | sha256sum | cut -c1-16; }

# Cache entries record their last use in .last-used (`used DIR`, at every run that uses them).
# `prune KIND` removes KIND-* entries unused for LBR_DUMP_PRUNE_DAYS days (default 14), always
# keeping the two most recently used, so that a machine switching between two checkouts does not
# rebuild; an entry in use was touched by this run and is never old enough to go.
used() { touch "$1/.last-used" 2>/dev/null || true; }
prune() {
	local kind=$1 days=${LBR_DUMP_PRUNE_DAYS:-14} now rank=0 t d
	now=$(date +%s)
	while read -r t d; do
		rank=$((rank + 1))
		[ "$rank" -gt 2 ] && [ $((now - t)) -ge $((days * 86400)) ] || continue
		log "pruning $d: unused for $(((now - t) / 86400)) days (LBR_DUMP_PRUNE_DAYS=$days)"
		rm -rf "$d"
	done < <(for d in "$CACHE/$kind"-*; do
		[ -d "$d" ] || continue
		if [ -e "$d/.last-used" ]; then t=$(stat -c %Y "$d/.last-used"); else t=$(stat -c %Y "$d"); fi
		echo "$t $d"
	done | sort -rn)
}

# The build root made by scripts/toolchain.sh. Its key covers the package pins and the script.
ROOT_KEY=$(key "$REPO/scripts/packages.txt" "$REPO/scripts/toolchain.sh")
# What the kernel builds depend on: the exactly pinned toolchain, not the base packages whose
# versions follow Debian's updates (scripts/packages.txt).
TOOLCHAIN_KEY=$(grep -E '^[a-z-]+ [^ >]+=' "$REPO/scripts/packages.txt" | sha256sum | cut -c1-16)
BUILD_ROOT="$CACHE/root-$ROOT_KEY"

# in_root CMD... : run CMD inside the build root, in a private mount and PID namespace, with the
# repository and the cache bind-mounted at the same paths as outside (so paths in build output
# are the same inside and out). When CMD exits or is killed, the namespace and every process in
# it (QEMU included) go away, and so do the mounts: nothing is left behind on the host.
in_root() {
	[ -e "$BUILD_ROOT/.complete" ] || die "build root $BUILD_ROOT missing: run scripts/toolchain.sh"
	unshare --mount --propagation private --pid --fork --kill-child -- \
		bash -c '
		set -e
		R=$1 REPO=$2 CACHE=$3 WD=$4; shift 4
		mount -t proc proc "$R/proc"
		mount --rbind /dev "$R/dev"
		mount --rbind /sys "$R/sys"
		mkdir -p "$R$CACHE" "$R$REPO"
		mount --bind "$CACHE" "$R$CACHE"
		mount --bind "$REPO" "$R$REPO"
		cd "$R$WD" 2>/dev/null && WD=$WD || WD=/
		exec chroot "$R" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			${LBR_DUMP_ROOT_ENV:-} /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$WD" "$@"
		' in_root "$BUILD_ROOT" "$REPO" "$CACHE" "$PWD" "$@"
}
