// lmboot entry for riscv64, S-mode under OpenSBI: a0 = hart id, a1 = device tree.
// Bare mode (satp = 0): see boards/qemu-virt-riscv64.toml for why there is no page table.
.section .text.boot, "ax"
.global _start
_start:
    csrw    sie, zero
    csrw    sip, zero
    li      t0, (1 << 13) | (1 << 9)    // sstatus.FS and .VS = Initial: FP and vector on
    csrs    sstatus, t0
.option push
.option norelax
    la      gp, __global_pointer$
.option pop
    mv      tp, a0                      // tp = hart id for the rest of the kernel
    li      t3, {max_cores}
    bgeu    a0, t3, 9f                  // no stack for this hart: park it
    la      sp, __stacks_start
    li      t1, {stack_size}
    addi    t2, a0, 1
    mul     t1, t1, t2
    add     sp, sp, t1
    la      t0, __bss_start
    la      t1, __bss_end
1:  bgeu    t0, t1, 2f
    sd      zero, 0(t0)
    addi    t0, t0, 8
    j       1b
2:  la      t0, lmboot_trap_entry
    csrw    stvec, t0
    mv      t0, a0
    mv      a0, a1                      // device tree
    mv      a1, t0                      // hart id
    call    lmboot_main
9:  wfi
    j       9b

// Harts started with SBI HSM hart_start: a0 = hart id, a1 = opaque.
.global _secondary
_secondary:
    csrw    sie, zero
    li      t0, (1 << 13) | (1 << 9)
    csrs    sstatus, t0
.option push
.option norelax
    la      gp, __global_pointer$
.option pop
    mv      tp, a0
    li      t3, {max_cores}
    bgeu    a0, t3, 9b
    la      sp, __stacks_start
    li      t1, {stack_size}
    addi    t2, a0, 1
    mul     t1, t1, t2
    add     sp, sp, t1
    la      t0, lmboot_trap_entry
    csrw    stvec, t0
    call    lmboot_secondary
    j       9b

.balign 4
.global lmboot_trap_entry
lmboot_trap_entry:
    csrr    a0, scause
    csrr    a1, sepc
    csrr    a2, stval
    j       lmboot_trap
