# SPDX-License-Identifier: GPL-2.0
#
# Generates the entry stubs' layout.h from src/layout.rs, the one definition of the snapshot area
# and of struct capture_config (Kbuild runs it; tools/lbr-core/tests/layout.rs checks its output
# against the Rust constants). Every `pub const NAME: TYPE = NUMBER;` whose value is a plain
# number becomes `#define LBR_NAME NUMBER`, or `LBR_MODULE_NAME` inside `pub mod MODULE {`.
BEGIN {
	print "/* SPDX-License-Identifier: GPL-2.0 */"
	print "/* Generated from src/layout.rs by asm/layout.awk: do not edit. */"
	print "#ifndef LBR_DUMP_LAYOUT_H"
	print "#define LBR_DUMP_LAYOUT_H"
	mod = ""
}
/^pub mod [a-z_]+ \{/ { mod = toupper($3) "_"; next }
/^\}/ { mod = ""; next }
/^ *pub const [A-Z0-9_]+: (usize|u32|u64) = (0x[0-9a-fA-F_]+|[0-9_]+);/ {
	name = $3; sub(/:$/, "", name)
	value = $6; sub(/;$/, "", value); gsub(/_/, "", value)
	printf "#define LBR_%s%s\t%s\n", mod, name, value
}
END { print "#endif /* LBR_DUMP_LAYOUT_H */" }
