//! What a DMA engine needs of the platform: bus addresses and cache maintenance
//! ([`DmaMemory`]), shared by the SD host drivers ([`crate::sunxi_mmc`]'s IDMAC,
//! [`crate::sdhci`]'s ADMA2); [`NoDma`] is programmed I/O.

pub use crate::sunxi_mmc::{DmaMemory, NoDma, DMA_ALIGN};
