//! The board this kernel was built for, as constants generated from `boards/<name>.toml` by
//! `build.rs`, of the kinds `lmboot-boards` defines (one definition for the schema and the
//! kernel); a device the board lacks is `None`. Pure data: `platform/` acts on it, and `arch/` reads the
//! memory map, core count and the firmware methods (the board schema accepts only the target
//! architecture's methods for `core_start` and `exit`).
#![allow(dead_code)]

pub use boards::{
    BlockKind, CacheMaintenance, CoreStart, Exit, IrqController, MemKind, RamFrom, Region,
    SdhciHost, UartKind, Vector,
};

include!(concat!(env!("OUT_DIR"), "/board.rs"));
