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
 *   insmod lbr_crash.ko crash=idt     no crash: print the handler address of every gate lbr_dump
 *                                     hooks, read from the IDT the CPU uses (IDTR), so that a
 *                                     test can compare the IDT with the kernel's without
 *                                     relying on lbr_dump; unload it afterwards
 * The crash happens in lbr_crash_<name>(), noinline, so the records can be checked against
 * its symbol. Loading without a valid crash= fails with -EINVAL.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/string.h>
#include <asm/desc.h>
#include <asm/msr.h>

static char *crash = "";
module_param(crash, charp, 0);

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
	return -EINVAL;
}

module_init(lbr_crash_init);
module_exit(lbr_crash_exit);
MODULE_DESCRIPTION("Crashes for lbr-dump's capture tests");
MODULE_LICENSE("GPL");
