/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The functions lbr_crash.c defines in top-level asm() blocks (code C cannot express), declared
 * for the C that calls them or takes their address.
 */
#ifndef LBR_CRASH_H
#define LBR_CRASH_H

/* crash=exec_user_ac: sets RFLAGS.AC and jumps to the user address in %rdi. Never returns. */
void lbr_crash_exec_user_ac(unsigned long addr);

#ifdef CONFIG_X86_FRED
/* The FRED entry page of crash=fred_set (4 KiB-aligned), and its static calls' type. */
void lbr_crash_fred_page(void);
void lbr_crash_fred_none(void);
#endif

#endif /* LBR_CRASH_H */
