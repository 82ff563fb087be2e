// lmboot entry for armv7a (AArch32, ARM state). cortex-a-rt's vector table starts the image; its
// reset entry jumps here (`_start`). Every core runs this code: core 0 from the firmware (the Pi 2
// firmware, or QEMU's loader, with r2 = device tree or ATAGs; U-Boot's `go` with r0 = argc,
// r1 = argv), the others when the worker pool starts them (the BCM2836 mailbox, the H3's CPU
// configuration block).
//
// In order: interrupts masked; from HYP (the Pi firmware enters non-secure HYP) down to SVC with
// the counters and FP/SIMD left to PL1; on core 0, caches cleaned and off if a boot loader left
// them on;
// ACTLR.SMP on (coherent caches between cores, before any cache is on); FP/SIMD on; the identity
// map and caches on (`mmu_on`); VBAR at cortex-a-rt's vector table. Then core 0 hands over to
// cortex-a-rt's `_default_start` (the stacks of every mode from `_stack_top`, BSS cleared, data,
// `kmain`), and the other cores set their own mode stacks and call `lmboot_secondary(core)`.
// No Rust code runs before the MMU is on: the kernel is built without strict alignment.

.equ MODE_SVC, 0x13
.equ MODE_HYP, 0x1a
.equ MODE_MASK, 0x1f

.section .text.boot, "ax"
.arm
.global _start
_start:
    cpsid   aif
    mov     r8, r2                      // device tree candidate (firmware's r2)
    mrc     p15, 0, r9, c0, c0, 5       // MPIDR
    and     r9, r9, #0xff               // core number (Aff0)
    mrs     r4, cpsr
    and     r4, r4, #MODE_MASK
    mov     r6, r4                      // the entry mode, for core 0's report
    cmp     r4, #MODE_HYP
    bne     1f
    // HYP -> SVC: PL1 may read the physical counter and program its timer; CNTVOFF = 0; nothing
    // trapped to HYP (HCR, HSTR, HCPTR); VPIDR / VMPIDR mirror the real ids (PL1 reads MIDR / MPIDR through them).
    mrc     p15, 4, r5, c14, c1, 0      // CNTHCTL
    orr     r5, r5, #3                  // PL1PCTEN | PL1PCEN
    mcr     p15, 4, r5, c14, c1, 0
    mov     r5, #0
    mcrr    p15, 4, r5, r5, c14         // CNTVOFF
    mcr     p15, 4, r5, c1, c1, 0       // HCR
    mcr     p15, 4, r5, c1, c1, 3       // HSTR: no CP15 register trapped
    ldr     r5, =0x33ff                 // HCPTR: RES1 bits, CP10/CP11 not trapped
    mcr     p15, 4, r5, c1, c1, 2
    mrc     p15, 0, r5, c0, c0, 0
    mcr     p15, 4, r5, c0, c0, 0       // VPIDR
    mrc     p15, 0, r5, c0, c0, 5
    mcr     p15, 4, r5, c0, c0, 5       // VMPIDR
    mov     r5, #(MODE_SVC | 0xc0)      // SVC, IRQ and FIQ masked
    msr     spsr_hyp, r5
    adr     r5, 1f
    msr     elr_hyp, r5
    eret
1:  cps     #MODE_SVC
    // Core 0 takes over from a boot loader that may have left its caches on; the other cores
    // come out of reset with their caches off and their L1 invalidated (the H3's CPU configuration
    // block is told to; the Pi firmware parks them so), and must not clean the shared L2 by
    // set/way under a running core 0.
    cmp     r9, #0
    bleq    caches_off
    mrc     p15, 0, r5, c1, c0, 1       // ACTLR
    orr     r5, r5, #(1 << 6)           // SMP: take part in coherency (ignored where not allowed)
    mcr     p15, 0, r5, c1, c0, 1
    isb
    // FP/SIMD: CP10/CP11 full access, FPEXC.EN; round to nearest, no flush-to-zero (as on the PC).
    mrc     p15, 0, r5, c1, c0, 2
    orr     r5, r5, #(0xf << 20)
    mcr     p15, 0, r5, c1, c0, 2
    isb
    mov     r5, #0x40000000
    vmsr    fpexc, r5
    mov     r5, #0
    vmsr    fpscr, r5
    bl      mmu_on
    cmp     r9, #0
    bne     2f
    // Core 0: keep the device tree address for kmain, then cortex-a-rt's start.
    ldr     r5, =LMBOOT_BOOT_DTB
    str     r8, [r5]
    ldr     r5, =LMBOOT_ENTRY_MODE
    str     r6, [r5]
    b       _default_start
2:  // Another core: its mode stacks in its slot of .stacks, then Rust.
    ldr     r0, =__stacks_start
    ldr     r1, =STACK_SIZE
    add     r2, r9, #1
    mla     r0, r1, r2, r0              // top of this core's slot
    ldr     r1, =EXCEPTION_STACK
    cps     #0x1b                       // UND
    mov     sp, r0
    sub     r0, r0, r1
    cps     #MODE_SVC
    mov     sp, r0
    sub     r0, r0, r1
    cps     #0x17                       // ABT
    mov     sp, r0
    sub     r0, r0, r1
    cps     #0x12                       // IRQ
    mov     sp, r0
    sub     r0, r0, r1
    cps     #0x11                       // FIQ
    mov     sp, r0
    sub     r0, r0, r1
    cps     #0x1f                       // SYS: the kernel's mode, as cortex-a-rt runs kmain
    mov     sp, r0
    mov     r0, r9
    bl      lmboot_secondary
3:  wfe
    b       3b

// Data cache and MMU off, the data caches cleaned and invalidated to the point of coherency by
// set/way (every level CLIDR lists), the instruction cache and branch predictor invalidated. A
// boot loader may leave its caches on (U-Boot's `go` does unless told `dcache off`); after a reset
// they are off and the clean finds nothing dirty. Uses r0-r5, r7, r10-r12 (not r6, r8, r9).
caches_off:
    mrc     p15, 0, r0, c1, c0, 0       // SCTLR
    bic     r0, r0, #(1 << 2)           // C
    mcr     p15, 0, r0, c1, c0, 0
    isb
    mrc     p15, 1, r0, c0, c0, 1       // CLIDR
    ands    r3, r0, #0x07000000         // LoC
    mov     r3, r3, lsr #23             // LoC * 2
    beq     6f
    mov     r10, #0                     // level * 2
1:  add     r2, r10, r10, lsr #1        // level * 3
    mov     r1, r0, lsr r2
    and     r1, r1, #7                  // this level's cache type
    cmp     r1, #2
    blt     5f                          // no data cache here
    mcr     p15, 2, r10, c0, c0, 0      // CSSELR: this level, data
    isb
    mrc     p15, 1, r1, c0, c0, 0       // CCSIDR
    and     r2, r1, #7
    add     r2, r2, #4                  // log2(line bytes)
    ldr     r4, =0x3ff
    ands    r4, r4, r1, lsr #3          // ways - 1
    clz     r5, r4                      // way shift
    ldr     r7, =0x7fff
    ands    r7, r7, r1, lsr #13         // sets - 1
2:  mov     r12, r4                     // way
3:  orr     r11, r10, r12, lsl r5
    orr     r11, r11, r7, lsl r2
    mcr     p15, 0, r11, c7, c14, 2     // DCCISW
    subs    r12, r12, #1
    bge     3b
    subs    r7, r7, #1
    bge     2b
5:  add     r10, r10, #2
    cmp     r3, r10
    bgt     1b
6:  mov     r10, #0
    mcr     p15, 2, r10, c0, c0, 0      // CSSELR back to level 1
    dsb     sy
    mrc     p15, 0, r0, c1, c0, 0
    bic     r0, r0, #(1 << 0)           // M
    bic     r0, r0, #(1 << 12)          // I
    mcr     p15, 0, r0, c1, c0, 0
    mov     r0, #0
    mcr     p15, 0, r0, c7, c5, 0       // ICIALLU
    mcr     p15, 0, r0, c7, c5, 6       // BPIALL
    mcr     p15, 0, r0, c8, c7, 0       // TLBIALL
    dsb     sy
    isb
    bx      lr

// The identity map from LMBOOT_PAGE_TABLE (1 MiB sections built at compile time, RAM added by
// core 0 before the other cores start), caches and branch prediction on, no alignment faults,
// VBAR at the vector table. Uses r0-r1.
mmu_on:
    ldr     r0, =LMBOOT_PAGE_TABLE
    orr     r0, r0, #0x4a               // TTBR0: walks inner/outer write-back write-allocate, shareable
    mcr     p15, 0, r0, c2, c0, 0       // TTBR0
    mov     r0, #0
    mcr     p15, 0, r0, c2, c0, 2       // TTBCR: TTBR0 for all 4 GiB, short descriptors
    mov     r0, #1
    mcr     p15, 0, r0, c3, c0, 0       // DACR: domain 0 client (permissions checked)
    mov     r0, #0
    mcr     p15, 0, r0, c8, c7, 0       // TLBIALL
    mcr     p15, 0, r0, c7, c5, 0       // ICIALLU
    dsb     sy
    isb
    mrc     p15, 0, r0, c1, c0, 0
    orr     r0, r0, #(1 << 0)           // M
    orr     r0, r0, #(1 << 2)           // C
    orr     r0, r0, #(1 << 11)          // Z: branch prediction
    orr     r0, r0, #(1 << 12)          // I
    bic     r0, r0, #(1 << 1)           // A: no alignment faults
    bic     r0, r0, #(1 << 13)          // V: vectors at VBAR, not 0xffff0000
    bic     r0, r0, #(1 << 28)          // TRE off: TEX/C/B as written
    bic     r0, r0, #(1 << 29)          // AFE off: AP[0] is a permission bit
    bic     r0, r0, #(1 << 30)          // TE: exceptions in ARM state
    mcr     p15, 0, r0, c1, c0, 0
    isb
    ldr     r0, =_vector_table
    mcr     p15, 0, r0, c12, c0, 0      // VBAR
    isb
    bx      lr
