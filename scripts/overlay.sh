#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Place lbr-dump in a kernel source tree as drivers/lbr_dump (the in-tree build): our Kbuild
# becomes its Makefile, our Kconfig is sourced from drivers/Kconfig. Usage: scripts/overlay.sh KSRC
# Idempotent. Files are copied only when their content changed (so make rebuilds only what
# changed), and every file is replaced by a rename, never written in place: a build of the same
# tree that does not enable lbr_dump (scripts/kernel.sh's module and nocet variants) may be
# reading its Kconfig meanwhile, and sees the old file or the new one whole.
source "$(dirname "$0")/common.sh"

KSRC=${1:?usage: $0 KSRC}
dst="$KSRC/drivers/lbr_dump"
mkdir -p "$dst/src" "$dst/asm"

put() { # put SRC DST: copy when different
	cmp -s "$1" "$2" 2>/dev/null || { cp "$1" "$2.new" && mv -f "$2.new" "$2"; }
}
put "$REPO/Kbuild" "$dst/Makefile"
put "$REPO/Kconfig" "$dst/Kconfig"
for f in "$REPO"/src/*.rs "$REPO"/src/*/*.rs "$REPO"/src/*.c "$REPO"/src/*.h "$REPO"/asm/*.S "$REPO"/asm/*.h "$REPO"/asm/*.awk; do
	mkdir -p "$(dirname "$dst/${f#"$REPO"/}")"
	put "$f" "$dst/${f#"$REPO"/}"
done
# Files removed from the repository go from the tree too (a directory's files as well).
for f in "$dst"/src/* "$dst"/src/*/* "$dst"/asm/*; do
	[ -d "$f" ] && continue
	[ -e "$REPO/${f#"$dst"/}" ] || rm -f "$f"
done

add_line() { # add_line FILE LINE: append LINE unless present, replacing the file
	grep -qxF "$2" "$1" && return 0
	{ cat "$1"; echo "$2"; } >"$1.new" && mv -f "$1.new" "$1"
}
# drivers/Kconfig ends with "endmenu": insert the source line before it.
if ! grep -qxF 'source "drivers/lbr_dump/Kconfig"' "$KSRC/drivers/Kconfig"; then
	sed '$ i source "drivers/lbr_dump/Kconfig"' "$KSRC/drivers/Kconfig" >"$KSRC/drivers/Kconfig.new"
	mv -f "$KSRC/drivers/Kconfig.new" "$KSRC/drivers/Kconfig"
fi
add_line "$KSRC/drivers/Makefile" 'obj-$(CONFIG_LBR_DUMP) += lbr_dump/'
