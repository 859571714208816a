// SPDX-License-Identifier: GPL-2.0
/*
 * lbr_check: guest side of the branch-record emulator's tests (tools/lbr-emu).
 *
 * Programs the recorder directly from the manuals (not through lbr_dump, whose code it must not
 * share), runs a test, and prints every MSR value it reads, so that the host can compare them
 * with the known branch sequence and with the emulator's ground-truth log. Written in C because
 * it is a test fixture: the branch sequence must be exact assembly (seq.S) and the rest is a
 * few MSR accesses.
 *
 *   insmod lbr_check.ko flavour=legacy depth=32 from=0x680 to=0x6c0 info=0xdc0 [filter=kernel]
 *   insmod lbr_check.ko flavour=arch depth=32
 *   insmod lbr_check.ko flavour=amd-v2 depth=16
 *   insmod lbr_check.ko flavour=amd-single
 *   insmod lbr_check.ko flavour=bts [records=N] [filter=kernel|user]
 * test=sequence (default) records seq.S's known sequence; test=user records for `ms`
 * milliseconds while user space runs (filter=kernel must then drop every user branch).
 * flavour=bts: Intel's Branch Trace Store into a buffer of `records` 24-byte records (circular:
 * DEBUGCTL.BTINT clear, the interrupt threshold past the maximum, SDM vol. 3B 17.4.9.3), the
 * 64-bit DS save area set up by hand (17.4.9.1); filter=kernel sets BTS_OFF_USR, filter=user
 * BTS_OFF_OS; it prints the DS fields and every record of the buffer.
 * The module prints its results at load; unload it before loading it again.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/vmalloc.h>
#include <asm/msr.h>

#include "seq.h"

/* MSR numbers are the kernel's (asm/msr-index.h). */

static char *flavour = "legacy";
module_param(flavour, charp, 0);
static char *test = "sequence";
module_param(test, charp, 0);
static char *filter = "all";
module_param(filter, charp, 0);
static uint depth = 32;
module_param(depth, uint, 0);
static uint from = 0x680, to = 0x6c0, info;
module_param(from, uint, 0);
module_param(to, uint, 0);
module_param(info, uint, 0);
static uint ms = 200;
module_param(ms, uint, 0);
/* MSR_LBR_SELECT exists (the kernel's lbr.c: not on Core 2 and Bonnell, which have no lbr_sel_map). */
static bool select = true;
module_param(select, bool, 0);
/* flavour=bts: records in the BTS buffer. */
static uint records = 64;
module_param(records, uint, 0);

static const char *const label_names[] = { "nt", "j1", "t1", "j2", "t2", "c3", "leaf", "r3", "a3" };

static u64 show(u32 msr)
{
	u64 v;

	rdmsrq(msr, v);
	pr_info("rdmsr %#x %#llx\n", msr, v);
	return v;
}

/* The BTS fields of the 64-bit DS buffer management area (SDM 17.4.9.1), in their order. */
struct ds_bts {
	u64 base, index, max, threshold;
};

static int bts_check(void)
{
	u64 ctl, area, on, *buf;
	struct ds_bts *ds;
	unsigned long flags;
	uint i;

	if (!records)
		return -EINVAL;
	ds = kzalloc_obj(*ds, GFP_KERNEL);
	buf = vzalloc(records * 24);
	if (!ds || !buf) {
		kfree(ds);
		vfree(buf);
		return -ENOMEM;
	}
	ds->base = ds->index = (u64)buf;
	ds->max = ds->base + records * 24;
	ds->threshold = ds->max + 1;	/* past the maximum: no interrupt */
	pr_info("bts buffer %px records %u\n", buf, records);
	/* One CPU sets DS_AREA, runs, switches BTS off and restores DS_AREA: the buffer goes after. */
	migrate_disable();
	area = show(MSR_IA32_DS_AREA);
	wrmsrq(MSR_IA32_DS_AREA, (u64)ds);
	show(MSR_IA32_DS_AREA);
	rdmsrq(MSR_IA32_DEBUGCTLMSR, ctl);
	on = ctl | DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS;
	if (!strcmp(filter, "kernel"))
		on |= DEBUGCTLMSR_BTS_OFF_USR;
	else if (!strcmp(filter, "user"))
		on |= DEBUGCTLMSR_BTS_OFF_OS;
	for (i = 0; i < ARRAY_SIZE(label_names); i++)
		pr_info("label %s %px\n", label_names[i],
			(char *)lbr_check_sequence + lbr_check_offsets[i]);
	if (!strcmp(test, "sequence")) {
		local_irq_save(flags);
		lbr_check_sequence(MSR_IA32_DEBUGCTLMSR, on, ctl);
		local_irq_restore(flags);
	} else {
		wrmsrq(MSR_IA32_DEBUGCTLMSR, on);
		msleep(ms);
		wrmsrq(MSR_IA32_DEBUGCTLMSR, ctl);
	}
	wrmsrq(MSR_IA32_DS_AREA, area);
	migrate_enable();
	pr_info("bts ds base %#llx index %#llx max %#llx threshold %#llx\n",
		ds->base, ds->index, ds->max, ds->threshold);
	for (i = 0; i < records; i++)
		pr_info("bts record %u %#llx %#llx %#llx\n", i,
			buf[3 * i], buf[3 * i + 1], buf[3 * i + 2]);
	pr_info("done\n");
	kfree(ds);
	vfree(buf);
	return 0;
}

static int __init lbr_check_init(void)
{
	bool kernel_only = !strcmp(filter, "kernel");
	u32 ctl;
	u64 old, on, off;
	unsigned long flags;
	uint i;

	if (!strcmp(flavour, "bts"))
		return bts_check();
	/* Switch MSR and the values for on and off; filters and depth first. */
	if (!strcmp(flavour, "legacy")) {
		ctl = MSR_IA32_DEBUGCTLMSR;
		/* LBR_SELECT bit 1 suppresses branches ending in ring > 0. */
		if (select)
			wrmsrq(MSR_LBR_SELECT, kernel_only ? 0x2 : 0);
		else if (kernel_only)
			return -EINVAL;	/* no filter on this model */
		rdmsrq(ctl, old);
		on = old | 1;
	} else if (!strcmp(flavour, "arch")) {
		ctl = MSR_ARCH_LBR_CTL;
		wrmsrq(MSR_ARCH_LBR_DEPTH, depth); /* also clears the records */
		old = 0;
		/* LBREn | OS | (USR unless kernel-only) | every branch-type enable (16..22). */
		on = 0x1 | 0x2 | (kernel_only ? 0 : 0x4) | (0x7fULL << 16);
	} else if (!strcmp(flavour, "amd-v2")) {
		ctl = MSR_AMD_DBG_EXTN_CFG;
		wrmsrq(MSR_AMD64_LBR_SELECT, kernel_only ? 0x2 : 0);
		rdmsrq(ctl, old);
		on = old | (1 << 6);
	} else if (!strcmp(flavour, "amd-single")) {
		ctl = MSR_IA32_DEBUGCTLMSR;
		rdmsrq(ctl, old);
		on = old | 1;
	} else {
		pr_err("unknown flavour %s\n", flavour);
		return -EINVAL;
	}
	off = old;

	for (i = 0; i < ARRAY_SIZE(label_names); i++)
		pr_info("label %s %px\n", label_names[i],
			(char *)lbr_check_sequence + lbr_check_offsets[i]);

	if (!strcmp(test, "sequence")) {
		local_irq_save(flags);
		lbr_check_sequence(ctl, on, off);
		local_irq_restore(flags);
	} else if (!strcmp(test, "user")) {
		wrmsrq(ctl, on);
		msleep(ms);
		wrmsrq(ctl, off);
	} else {
		pr_err("unknown test %s\n", test);
		return -EINVAL;
	}

	show(ctl);
	if (!strcmp(flavour, "legacy")) {
		show(MSR_LBR_TOS);
		for (i = 0; i < depth; i++) {
			show(from + i);
			show(to + i);
			if (info)
				show(info + i);
		}
	} else if (!strcmp(flavour, "arch")) {
		for (i = 0; i < depth; i++) {
			show(MSR_ARCH_LBR_FROM_0 + i);
			show(MSR_ARCH_LBR_TO_0 + i);
			show(MSR_ARCH_LBR_INFO_0 + i);
		}
	} else if (!strcmp(flavour, "amd-v2")) {
		for (i = 0; i < depth; i++) {
			show(MSR_AMD_SAMP_BR_FROM + 2 * i);
			show(MSR_AMD_SAMP_BR_FROM + 2 * i + 1);
		}
	} else {
		show(MSR_IA32_LASTBRANCHFROMIP);
		show(MSR_IA32_LASTBRANCHTOIP);
	}
	pr_info("done\n");
	return 0;
}

static void __exit lbr_check_exit(void)
{
}

module_init(lbr_check_init);
module_exit(lbr_check_exit);
MODULE_DESCRIPTION("Test fixture for lbr-dump's branch-record emulator");
MODULE_LICENSE("GPL");
