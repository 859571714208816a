// SPDX-License-Identifier: GPL-2.0
/*
 * lbr_crash: crash the kernel in ways lkdtm does not, for lbr-dump's capture tests.
 *
 *   insmod lbr_crash.ko crash=de      division by zero (#DE)
 *   insmod lbr_crash.ko crash=gp      dereference of a non-canonical pointer (#GP)
 *   insmod lbr_crash.ko crash=jump    call through a corrupted function pointer into unmapped
 *                                     kernel memory: RIP is "nowhere" (#PF on the fetch), and
 *                                     only the branch records name the caller
 *   insmod lbr_crash.ko crash=owner   play another owner of the branch recorder: set
 *                                     DEBUGCTL.FREEZE_LBRS_ON_PMI (bit 11, as perf does) on top
 *                                     of what lbr_dump armed, then crash as crash=gp does
 *   insmod lbr_crash.ko crash=select  the same with LBR_SELECT: also suppress conditional
 *                                     branches (LBR_SELECT.JCC, bit 2), DEBUGCTL untouched
 *   insmod lbr_crash.ko crash=torn capture_cfg=ADDR
 *                                     change the recorder's control MSR during a capture, as a
 *                                     perf NMI could: a hardware data breakpoint on the snapshot
 *                                     slot the next capture writes (ADDR: lbr_dump_capture, from
 *                                     /proc/kallsyms), whose #DB re-arms the frozen recorder in
 *                                     lbr_dump's #DB stub; then crash as crash=gp does
 *   insmod lbr_crash.ko crash=idt     no crash: print the handler address of every gate lbr_dump
 *                                     hooks, read from the IDT the CPU uses (IDTR), so that a
 *                                     test can compare the IDT with the kernel's without
 *                                     relying on lbr_dump; unload it afterwards
 * The crash happens in lbr_crash_<name>(), noinline, so the records can be checked against
 * its symbol. Loading without a valid crash= fails with -EINVAL.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hw_breakpoint.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/string.h>
#include <asm/desc.h>
#include <asm/msr.h>

static char *crash = "";
module_param(crash, charp, 0);
static unsigned long capture_cfg;
module_param(capture_cfg, ulong, 0);

/* Volatile so the compiler cannot see through them. */
static volatile unsigned long divisor;
static volatile unsigned long bad_pointer = 0xdead000000000000UL;	/* non-canonical */
/* An unmapped address in the kernel half, below the direct map. */
static volatile unsigned long nowhere = 0xffff800000001000UL;

static noinline int lbr_crash_de(void)
{
	return 1000 / divisor;
}

static noinline int lbr_crash_gp(void)
{
	return *(volatile int *)bad_pointer;
}

static noinline int lbr_crash_owner(void)
{
	u64 debugctl;

	rdmsrq(MSR_IA32_DEBUGCTLMSR, debugctl);
	wrmsrq(MSR_IA32_DEBUGCTLMSR, debugctl | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI);
	pr_info("DEBUGCTL %#llx -> %#llx\n", debugctl, debugctl | DEBUGCTLMSR_FREEZE_LBRS_ON_PMI);
	return lbr_crash_gp();
}

static noinline int lbr_crash_jump(void)
{
	int (*fn)(void) = (int (*)(void))nowhere;

	return fn();
}

static noinline int lbr_crash_select(void)
{
	u64 select;

	rdmsrq(MSR_LBR_SELECT, select);
	wrmsrq(MSR_LBR_SELECT, select | BIT_ULL(2));
	pr_info("LBR_SELECT %#llx -> %#llx\n", select, select | BIT_ULL(2));
	return lbr_crash_gp();
}

static void lbr_crash_hit(struct perf_event *bp, struct perf_sample_data *data,
			  struct pt_regs *regs)
{
	pr_info("data breakpoint hit at %pS\n", (void *)instruction_pointer(regs));
}

static noinline int lbr_crash_torn(void)
{
	/*
	 * struct capture_config (asm/stubs.S): CPU 0's block at 0x00, block size at 0x08, ring
	 * mask at 0x18, snapshot size at 0x20. A CPU block: count at 0x00, snapshots from 0x40
	 * (asm/layout.h). The next capture on this CPU writes slot count & mask first at its
	 * sequence number (offset 0), before it reads the records.
	 */
	const u64 *cfg = (const u64 *)capture_cfg;
	struct perf_event * __percpu *bp;
	struct perf_event_attr attr;
	unsigned long block, slot;

	if (!capture_cfg)
		return -EINVAL;
	migrate_disable();	/* the crash must come on the CPU whose slot is watched */
	block = cfg[0] + smp_processor_id() * cfg[1];
	slot = block + 0x40 + (*(u64 *)block & cfg[3]) * cfg[4];
	hw_breakpoint_init(&attr);
	attr.bp_addr = slot;
	attr.bp_len = HW_BREAKPOINT_LEN_8;
	attr.bp_type = HW_BREAKPOINT_W;
	bp = register_wide_hw_breakpoint(&attr, lbr_crash_hit, NULL);
	if (IS_ERR((void __force *)bp)) {
		migrate_enable();
		return PTR_ERR((void __force *)bp);
	}
	pr_info("watching snapshot slot %#lx\n", slot);
	return lbr_crash_gp();
}

static int lbr_crash_idt(void)
{
	static const int vectors[] = { 0, 1, 6, 8, 11, 12, 13, 14, 17, 21 };
	struct desc_ptr idtr;
	gate_desc *idt;
	int i;

	store_idt(&idtr);
	idt = (gate_desc *)idtr.address;
	for (i = 0; i < ARRAY_SIZE(vectors); i++)
		pr_info("gate %d %016lx %ps\n", vectors[i], gate_offset(&idt[vectors[i]]),
			(void *)gate_offset(&idt[vectors[i]]));
	return 0;
}

static void __exit lbr_crash_exit(void)
{
}

static int __init lbr_crash_init(void)
{
	pr_info("crash=%s\n", crash);
	if (!strcmp(crash, "idt"))
		return lbr_crash_idt();
	if (!strcmp(crash, "de"))
		return lbr_crash_de();
	if (!strcmp(crash, "gp"))
		return lbr_crash_gp();
	if (!strcmp(crash, "owner"))
		return lbr_crash_owner();
	if (!strcmp(crash, "jump"))
		return lbr_crash_jump();
	if (!strcmp(crash, "select"))
		return lbr_crash_select();
	if (!strcmp(crash, "torn"))
		return lbr_crash_torn();
	return -EINVAL;
}

module_init(lbr_crash_init);
module_exit(lbr_crash_exit);
MODULE_DESCRIPTION("Crashes for lbr-dump's capture tests");
MODULE_LICENSE("GPL");
