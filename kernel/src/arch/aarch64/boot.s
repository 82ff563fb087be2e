// lmboot entry for aarch64. Runs with the MMU off: no Rust code before `mmu_on` returns.
// x0 = device tree address (virt; the Pi firmware's armstub8.S passes its dtb_ptr32, 0 without a
// .dtb on the card), kept in x19 for lmboot_main. Core number = MPIDR_EL1.Aff0, read here at the
// entry level, kept in x20.
.section .text.boot, "ax"
.global _start
_start:
    mov     x19, x0                     // keep the DTB address
    mrs     x20, mpidr_el1
    and     x20, x20, #0xff             // core number
    mrs     x2, CurrentEL
    lsr     x2, x2, #2
    cmp     x2, #3
    b.ne    1f
    // EL3 -> EL2: lower levels AArch64 and non-secure, HVC on, no FP/SIMD traps.
    mov     x3, #0x5b1                  // SCR_EL3: RW | HCE | SMD | RES1 | NS
    msr     scr_el3, x3
    msr     cptr_el3, xzr
    mov     x3, #0x3c9                  // EL2h, DAIF masked
    msr     spsr_el3, x3
    adr     x3, 1f
    msr     elr_el3, x3
    eret
1:  mrs     x2, CurrentEL
    lsr     x2, x2, #2
    cmp     x2, #2
    b.ne    2f
    // EL2 -> EL1: EL1 is AArch64, counters and timers accessible, no FP/SIMD traps.
    mov     x3, #(1 << 31)              // HCR_EL2.RW
    msr     hcr_el2, x3
    mov     x3, #0x33ff
    msr     cptr_el2, x3
    mrs     x3, cnthctl_el2
    orr     x3, x3, #3                  // EL1PCTEN | EL1PCEN
    msr     cnthctl_el2, x3
    msr     cntvoff_el2, xzr
    // EL1 reads of MIDR_EL1 / MPIDR_EL1 return VPIDR_EL2 / VMPIDR_EL2, whose reset values are
    // UNKNOWN: mirror the real ones, as the firmware's armstub8.S and Linux's el2_setup.h
    // (__init_el2_nvhe_idregs) do. The core ids, the spin lock's owner and the workers rest on it.
    mrs     x3, midr_el1
    msr     vpidr_el2, x3
    mrs     x3, mpidr_el1
    msr     vmpidr_el2, x3
    ldr     x3, =0x30d00800             // SCTLR_EL1 RES1 bits, MMU and caches off
    msr     sctlr_el1, x3
    mov     x3, #0x3c5                  // EL1h, DAIF masked
    msr     spsr_el2, x3
    adr     x3, 2f
    msr     elr_el2, x3
    eret
2:  // EL1. FP/SIMD on before anything may use it.
    mov     x3, #(3 << 20)              // CPACR_EL1.FPEN
    msr     cpacr_el1, x3
    isb
    msr     fpcr, xzr                   // round to nearest even, no flush-to-zero: as on the PC
    // This core's stack: the top of its STACK_SIZE slot.
    ldr     x3, =__stacks_start
    ldr     x4, =STACK_SIZE
    add     x5, x20, #1
    madd    x3, x4, x5, x3
    mov     sp, x3
    cbnz    x20, 5f
    // Core 0: clear BSS.
    ldr     x3, =__bss_start
    ldr     x4, =__bss_end
3:  cmp     x3, x4
    b.hs    4f
    str     xzr, [x3], #8
    b       3b
4:  bl      mmu_on
    mov     x0, x19
    mov     x1, x20
    bl      lmboot_main
    b       6f
5:  // Secondary cores (started by the worker pool).
    bl      mmu_on
    mov     x0, x20
    bl      lmboot_secondary
6:  wfe
    b       6b

// Identity map from LMBOOT_PAGE_TABLE (built at compile time; level-1 entries that point to a
// level-2 table hold its offset from the table base, fixed up here), caches on, vectors installed.
.global mmu_on
mmu_on:
    adrp    x0, LMBOOT_PAGE_TABLE
    add     x0, x0, :lo12:LMBOOT_PAGE_TABLE
    adrp    x1, LMBOOT_TABLES_FIXED
    add     x1, x1, :lo12:LMBOOT_TABLES_FIXED
    ldr     w2, [x1]
    cbnz    w2, 2f
    mov     x3, #0
1:  ldr     x4, [x0, x3, lsl #3]
    and     x5, x4, #3
    cmp     x5, #3
    b.ne    3f
    add     x4, x4, x0
    str     x4, [x0, x3, lsl #3]
3:  add     x3, x3, #1
    cmp     x3, #512
    b.lo    1b
    mov     w2, #1
    str     w2, [x1]
    dsb     ish
2:  mov     x2, #0xff04                 // MAIR: attr0 device nGnRE, attr1 normal write-back
    msr     mair_el1, x2
    mrs     x3, id_aa64mmfr0_el1
    and     x3, x3, #7                  // PARange -> TCR.IPS
    lsl     x3, x3, #32
    ldr     x2, =0x803519               // T0SZ=25, inner/outer WB-WA walks, inner shareable, 4K, EPD1
    orr     x2, x2, x3
    msr     tcr_el1, x2
    msr     ttbr0_el1, x0
    dsb     ish
    isb
    tlbi    vmalle1
    dsb     ish
    isb
    mrs     x2, sctlr_el1
    orr     x2, x2, #(1 << 0)           // M
    orr     x2, x2, #(1 << 2)           // C
    orr     x2, x2, #(1 << 12)          // I
    bic     x2, x2, #(1 << 1)           // no alignment faults
    msr     sctlr_el1, x2
    isb
    adr     x2, exception_vectors
    msr     vbar_el1, x2
    isb
    ret

// Exception vectors: every entry but one reports its index with ESR, ELR and FAR to Rust, which
// prints them and stops. The exception: an IRQ taken from EL1 on SP_EL1 (entry 5, the kernel's
// own state: it runs EL1h), which `irq_entry` handles and returns from.
.macro VECTOR idx
    .balign 0x80
    mov     x0, #\idx
    mrs     x1, esr_el1
    mrs     x2, elr_el1
    mrs     x3, far_el1
    b       lmboot_trap
.endm

.section .text
.balign 0x800
.global exception_vectors
exception_vectors:
    VECTOR 0
    VECTOR 1
    VECTOR 2
    VECTOR 3
    VECTOR 4
    .balign 0x80
    b       irq_entry
    VECTOR 6
    VECTOR 7
    VECTOR 8
    VECTOR 9
    VECTOR 10
    VECTOR 11
    VECTOR 12
    VECTOR 13
    VECTOR 14
    VECTOR 15

// An IRQ from EL1 (the link's receive interrupt): save what the interrupted code may hold in
// registers a call may change (x0-x18, x29, x30; q0-q31, FPCR and FPSR, since the kernels are
// SIMD throughout and the handler may use SIMD registers too), and ELR/SPSR, on the interrupted
// stack (AAPCS64 has no red zone below sp); call `lmboot_irq`; restore; return where it was.
// IRQs stay masked inside (the CPU sets PSTATE.I on entry): no nesting.
// x0-x18, x29, x30, ELR, SPSR, FPCR, FPSR and a pad (208 bytes), then q0-q31 (512).
.equ IRQ_FRAME, 720
// The x-registers a call may change and every q-register, stored (`stp`) or loaded (`ldp`).
.macro IRQ_REGS op
    \op     x0, x1, [sp, #0]
    \op     x2, x3, [sp, #16]
    \op     x4, x5, [sp, #32]
    \op     x6, x7, [sp, #48]
    \op     x8, x9, [sp, #64]
    \op     x10, x11, [sp, #80]
    \op     x12, x13, [sp, #96]
    \op     x14, x15, [sp, #112]
    \op     x16, x17, [sp, #128]
    \op     x18, x29, [sp, #144]
    \op     q0, q1, [sp, #208]
    \op     q2, q3, [sp, #240]
    \op     q4, q5, [sp, #272]
    \op     q6, q7, [sp, #304]
    \op     q8, q9, [sp, #336]
    \op     q10, q11, [sp, #368]
    \op     q12, q13, [sp, #400]
    \op     q14, q15, [sp, #432]
    \op     q16, q17, [sp, #464]
    \op     q18, q19, [sp, #496]
    \op     q20, q21, [sp, #528]
    \op     q22, q23, [sp, #560]
    \op     q24, q25, [sp, #592]
    \op     q26, q27, [sp, #624]
    \op     q28, q29, [sp, #656]
    \op     q30, q31, [sp, #688]
.endm
irq_entry:
    sub     sp, sp, #IRQ_FRAME
    IRQ_REGS stp
    mrs     x0, elr_el1
    mrs     x1, spsr_el1
    stp     x30, x0, [sp, #160]
    mrs     x0, fpcr
    stp     x1, x0, [sp, #176]
    mrs     x0, fpsr
    str     x0, [sp, #192]
    bl      lmboot_irq
    ldr     x0, [sp, #192]
    msr     fpsr, x0
    ldp     x1, x0, [sp, #176]
    msr     fpcr, x0
    msr     spsr_el1, x1
    ldp     x30, x0, [sp, #160]
    msr     elr_el1, x0
    IRQ_REGS ldp
    add     sp, sp, #IRQ_FRAME
    eret
