#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Place lbr-dump in a kernel source tree as drivers/lbr_dump (the in-tree build): our Kbuild
# becomes its Makefile, our Kconfig is sourced from drivers/Kconfig. Usage: scripts/overlay.sh KSRC
# Idempotent. Files are copied only when their content changed (so make rebuilds only what
# changed), and edited kernel files are replaced, never written in place (the tree may share
# hard links with a pristine copy).
source "$(dirname "$0")/common.sh"

KSRC=${1:?usage: $0 KSRC}
dst="$KSRC/drivers/lbr_dump"
mkdir -p "$dst/src" "$dst/asm"

put() { # put SRC DST: copy when different
	cmp -s "$1" "$2" 2>/dev/null || { rm -f "$2"; cp "$1" "$2"; }
}
put "$REPO/Kbuild" "$dst/Makefile"
put "$REPO/Kconfig" "$dst/Kconfig"
for f in "$REPO"/src/*.rs "$REPO"/src/*/*.rs "$REPO"/src/*.c "$REPO"/asm/*.S "$REPO"/asm/*.h "$REPO"/asm/*.awk; do
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
	{ cat "$1"; echo "$2"; } >"$1.new" && rm -f "$1" && mv "$1.new" "$1"
}
# drivers/Kconfig ends with "endmenu": insert the source line before it.
if ! grep -qxF 'source "drivers/lbr_dump/Kconfig"' "$KSRC/drivers/Kconfig"; then
	sed '$ i source "drivers/lbr_dump/Kconfig"' "$KSRC/drivers/Kconfig" >"$KSRC/drivers/Kconfig.new"
	rm -f "$KSRC/drivers/Kconfig" && mv "$KSRC/drivers/Kconfig.new" "$KSRC/drivers/Kconfig"
fi
add_line "$KSRC/drivers/Makefile" 'obj-$(CONFIG_LBR_DUMP) += lbr_dump/'
