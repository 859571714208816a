/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The boot sector of the Bochs test VM's disk (scripts/vm.py BochsVm): a minimal loader of the
 * Linux 16-bit boot protocol (Documentation/arch/x86/boot.rst), so that Bochs, which has no
 * -kernel, boots the test kernel without a boot loader package. Bochs's BIOS loads this sector
 * at 0:7c00 and jumps to it with the disk's number in %dl.
 *
 * The harness fills in `loads` (at LOADS, 0x180) and writes the images after this sector: each
 * entry is {sectors, first LBA, destination address}, all 32-bit, a zero entry ends the table.
 * Each image is read through a bounce buffer below 1 MiB (int 13h AH=42h, the BIOS's LBA read)
 * and moved to its destination (int 15h AH=87h, which reaches above 1 MiB): the kernel's
 * real-mode part with its header already filled in by the harness (at SETUP_SEG:0), the
 * protected-mode kernel (at 1 MiB) and the initramfs. Then it enters the real-mode setup code as
 * the protocol says: segments at SETUP_SEG, the stack at the top of its heap, a far jump to
 * SETUP_SEG+0x20:0. A failed BIOS call writes "E" and the call (0x13 or 0x15) to Bochs's port
 * 0xe9 (its stdout) and halts.
 */
#define SETUP_SEG	0x2000		/* the real-mode part at 0x20000 (vm.py SETUP_ADDR) */
#define HEAP_END	0xe000		/* vm.py HEAP_END */
#define BOUNCE_SEG	0x1000		/* the bounce buffer at 0x10000 */
#define CHUNK		64		/* sectors per read: 32 KiB */
#define LOADS		0x180

	.code16
	.text
	.globl	_start
_start:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movw	$0x7c00, %sp
	sti
	cld
	movb	%dl, drive
	movw	$loads, %bx
load:
	movl	(%bx), %ecx		/* sectors left of this image */
	testl	%ecx, %ecx
	jz	enter
	cmpl	$CHUNK, %ecx
	jbe	1f
	movl	$CHUNK, %ecx
1:	movw	%cx, dap_count
	movl	4(%bx), %eax
	movl	%eax, dap_lba
	movw	$dap, %si
	movb	drive, %dl
	movb	$0x42, %ah
	pushw	%bx
	int	$0x13
	popw	%bx
	movb	$0x13, %al
	jc	fail
	movl	8(%bx), %eax		/* the destination's base in the move's descriptor */
	movw	%ax, dst + 2
	shrl	$16, %eax
	movb	%al, dst + 4
	movb	%ah, dst + 7
	movw	dap_count, %cx
	shlw	$8, %cx			/* words */
	pushw	%ds
	popw	%es
	movw	$gdt, %si		/* %es:%si: the descriptors */
	movb	$0x87, %ah
	pushw	%bx
	int	$0x15
	popw	%bx
	movb	$0x15, %al
	jc	fail
	movzwl	dap_count, %eax
	subl	%eax, (%bx)
	addl	%eax, 4(%bx)
	shll	$9, %eax
	addl	%eax, 8(%bx)
	cmpl	$0, (%bx)
	jnz	load
	addw	$12, %bx
	jmp	load

enter:
	cli
	movw	$SETUP_SEG, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %fs
	movw	%ax, %gs
	movw	%ax, %ss
	movw	$HEAP_END, %sp
	ljmp	$SETUP_SEG + 0x20, $0

fail:
	movb	%al, %ah
	movb	$'E', %al
	outb	%al, $0xe9
	movb	%ah, %al
	outb	%al, $0xe9
2:	hlt
	jmp	2b

	.p2align 2
dap:	.byte	16, 0			/* int 13h AH=42h's disk address packet */
dap_count:
	.word	0
	.word	0, BOUNCE_SEG
dap_lba:
	.long	0, 0
gdt:	.fill	16, 1, 0		/* int 15h AH=87h's: null, GDT (the BIOS's) */
	.word	0xffff, 0		/* source: the bounce buffer */
	.byte	BOUNCE_SEG >> 12, 0x93, 0, 0
dst:	.word	0xffff, 0		/* destination: filled in per move */
	.byte	0, 0x93, 0, 0
	.fill	16, 1, 0		/* CS, SS (the BIOS's) */
drive:	.byte	0

	.org	LOADS
loads:	.fill	48, 1, 0		/* up to 3 images and the zero entry that ends them */
	.org	510
	.byte	0x55, 0xaa
