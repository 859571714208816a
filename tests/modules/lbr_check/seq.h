/* SPDX-License-Identifier: GPL-2.0 */
/* What seq.S defines for main.c. */
#ifndef LBR_CHECK_SEQ_H
#define LBR_CHECK_SEQ_H

#include <linux/types.h>

void lbr_check_sequence(u32 msr, u64 on, u64 off);
/* Offsets of seq.S's labels from lbr_check_sequence, in this order (see seq.S). */
extern const u64 lbr_check_offsets[];

#endif /* LBR_CHECK_SEQ_H */
