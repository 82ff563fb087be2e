//! A QEMU TCG plugin that counts the guest instructions executed and writes the total to the
//! file named by `LMBOOT_INSNS` (else stderr) when the guest exits: `qemu-riscv64 -plugin
//! libinsncount.so PROGRAM`. It serves T-Head's user-mode `xuantie-qemu` (QEMU 6.0.94), where
//! `-icount` does not exist and `rdinstret` reads the host's clock: `cargo xtask bench --only
//! xtheadvector` counts the forward pass's instructions per token with it.
//!
//! Written against QEMU's plugin API (`include/qemu/qemu-plugin.h`, API version 1, which QEMU
//! 6.x loads): at translation each block gets a callback on execution that adds its instruction
//! count. The counter is global (the runs it serves use one guest thread for the forward pass,
//! and an atomic keeps other threads' counts right).

use core::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// The API version this plugin is built against (QEMU refuses a plugin outside its range).
#[no_mangle]
pub static qemu_plugin_version: c_int = 1;

static COUNT: AtomicU64 = AtomicU64::new(0);

type PluginId = u64;
/// `struct qemu_plugin_tb *`, opaque.
type Tb = *mut c_void;

/// `QEMU_PLUGIN_CB_NO_REGS`.
const CB_NO_REGS: c_int = 0;

extern "C" {
    fn qemu_plugin_register_vcpu_tb_trans_cb(id: PluginId, cb: extern "C" fn(PluginId, Tb));
    fn qemu_plugin_tb_n_insns(tb: Tb) -> usize;
    fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: Tb,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_register_atexit_cb(
        id: PluginId,
        cb: extern "C" fn(PluginId, *mut c_void),
        userdata: *mut c_void,
    );
}

/// A block executed: its instruction count travels as the callback's user data.
extern "C" fn exec(_vcpu: u32, n: *mut c_void) {
    COUNT.fetch_add(n as u64, Ordering::Relaxed);
}

/// A block translated: count it each time it runs.
extern "C" fn trans(_id: PluginId, tb: Tb) {
    // SAFETY: `tb` is the block QEMU is translating, valid during this callback.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        qemu_plugin_register_vcpu_tb_exec_cb(tb, exec, CB_NO_REGS, n as *mut c_void);
    }
}

extern "C" fn at_exit(_id: PluginId, _p: *mut c_void) {
    let n = COUNT.load(Ordering::Relaxed);
    match std::env::var_os("LMBOOT_INSNS") {
        Some(path) => {
            if let Err(e) = std::fs::write(&path, format!("{n}\n")) {
                eprintln!("insncount: {}: {e}", path.to_string_lossy());
            }
        }
        None => eprintln!("insncount: {n} instructions"),
    }
}

/// # Safety
/// Called by QEMU once, with the plugin's id.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: PluginId,
    _info: *const c_void,
    _argc: c_int,
    _argv: *const *const c_char,
) -> c_int {
    // SAFETY: QEMU's registration calls, with this plugin's id and callbacks that live as long
    // as the library.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
        qemu_plugin_register_atexit_cb(id, at_exit, core::ptr::null_mut());
    }
    0
}
