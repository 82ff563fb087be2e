//! The SD host controllers' registers, named once: for their drivers ([`crate::sdhci`],
//! [`crate::sunxi_mmc`], which re-export them as their `regs`) and for the error messages of
//! [`super::SdError`], which name the bits a controller reported. Constants only.

pub mod sdhci;
pub mod sdhost;
pub mod sunxi;
