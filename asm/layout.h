/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Offsets of the snapshot area for the capture stubs. The layout is defined and documented in
 * src/layout.rs; tools/lbr-core/tests/layout.rs checks that every value here equals it.
 * Hexadecimal, one per line, so that the check can read them.
 */
#ifndef LBR_DUMP_LAYOUT_H
#define LBR_DUMP_LAYOUT_H

/* CPU block header */
#define LBR_CPU_COUNT		0x00
#define LBR_CPU_BUSY		0x08
#define LBR_CPU_HEADER_SIZE	0x40

/* Snapshot */
#define LBR_SNAP_SEQ		0x00
#define LBR_SNAP_VECTOR		0x08
#define LBR_SNAP_STATE		0x0c
#define LBR_SNAP_ERROR		0x10
#define LBR_SNAP_RIP		0x18
#define LBR_SNAP_CR2		0x20
#define LBR_SNAP_CTL_ENTRY	0x28
#define LBR_SNAP_CTL_AFTER	0x30
#define LBR_SNAP_FRAME		0x38
#define LBR_SNAP_RSP		0x40
#define LBR_SNAP_VALUES		0x50

/* Snapshot state bits */
#define LBR_SNAP_COMPLETE	0x1
#define LBR_SNAP_TORN		0x2
#define LBR_SNAP_WAS_OFF	0x4

#endif /* LBR_DUMP_LAYOUT_H */
