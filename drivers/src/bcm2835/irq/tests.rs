//! The GPU interrupt path against plain register files.

use super::*;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

struct Ram(Vec<u32>);

impl Regs for Ram {
    fn read32(&mut self, off: usize) -> u32 {
        self.0[off / 4]
    }

    fn write32(&mut self, off: usize, v: u32) {
        self.0[off / 4] = v;
    }
}

fn irqs(core: usize) -> GpuIrqs<Ram> {
    GpuIrqs::from_regs(
        Ram(vec![0; ARMCTRL_BLOCK_SIZE / 4]),
        Ram(vec![0; LOCAL_BLOCK_SIZE / 4]),
        core,
    )
}

#[test]
fn the_aux_interrupt_is_enabled_and_routed_to_the_core() {
    for core in 0..4 {
        let mut g = irqs(core);
        g.enable(AUX_IRQ).unwrap();
        assert_eq!(g.armctrl.0[ENABLE[0] / 4], 1 << 29);
        assert_eq!(g.armctrl.0[DISABLE[0] / 4], 1 << 29, "disabled first");
        assert_eq!(g.armctrl.0[ENABLE[1] / 4], 0);
        assert_eq!(g.local.0[GPU_INT_ROUTING / 4], core as u32);
    }
    let mut g = irqs(0);
    g.enable(57).unwrap();
    assert_eq!(g.armctrl.0[ENABLE[1] / 4], 1 << 25, "bank 2");
}

#[test]
fn pending_needs_the_cores_gpu_source_and_the_bit() {
    let mut g = irqs(2);
    g.enable(AUX_IRQ).unwrap();
    assert!(!g.pending(AUX_IRQ));
    g.armctrl.0[PENDING[0] / 4] = 1 << 29;
    assert!(!g.pending(AUX_IRQ), "not routed to this core's source yet");
    g.local.0[(CORE_IRQ_SOURCE + 8) / 4] = SOURCE_GPU;
    assert!(g.pending(AUX_IRQ));
    assert!(!g.pending(28));
    g.local.0[(CORE_IRQ_SOURCE + 8) / 4] = 1 << 1; // a timer, not the GPU
    assert!(!g.pending(AUX_IRQ));
}

#[test]
fn bad_interrupts_and_cores_are_refused_by_name() {
    let e = irqs(0).enable(64).unwrap_err();
    assert_eq!(e, BadGpuIrq::Irq(64));
    assert!(e.to_string().contains("64"));
    let mut g = irqs(4);
    assert_eq!(g.enable(AUX_IRQ), Err(BadGpuIrq::Core(4)));
    assert!(!g.pending(AUX_IRQ));
    assert!(g.armctrl.0.iter().chain(&g.local.0).all(|&w| w == 0));
}
