//! The SD host controllers' registers, named once: for their drivers ([`crate::sdhci`],
//! [`crate::sunxi_mmc`], which re-export them as their `regs`) and for the error messages of
//! [`super::SdError`], which name the bits a controller reported; the register-level simulators of
//! the tests model their hosts with these names too. Constants only.

pub mod sdhci;
pub mod sdhost;
pub mod sunxi;
