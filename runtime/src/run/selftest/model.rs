//! The model check: the file read from the card (whole, or its first and last N MiB with
//! `model_digest = N`), its CRC-32 against `model_crc32`.

use super::{Findings, RunError};
use crate::card::Direct;
use crate::config::Config;
use crate::console::Out;
use crate::platform::Platform;
use core::fmt::Write;
use drivers::block::WriteBlocks;
use inference::Storage;

/// Bytes read from the card per call while digesting the model.
const CHUNK: usize = 1 << 20;

/// The model check: the file's CRC-32 against `model_crc32`. A mismatch is an error (printed
/// with the report line first); no `model_crc32` is a skip.
pub(super) fn check<D: WriteBlocks + Send, P: Platform + ?Sized>(
    cfg: &Config,
    direct: &Direct<D>,
    (platform, found): (&P, &mut Findings),
    out: &mut Out<'_>,
) -> Result<(), RunError> {
    let Some(want) = cfg.model_crc32 else {
        let _ = writeln!(
            out,
            "selftest: model skip: lmboot.txt has no model_crc32 (cargo xtask image writes it)"
        );
        found.verdicts.push(("model", "skip"));
        return Ok(());
    };
    let mut buf = inference::oom::filled(CHUNK, 0u8, "the model check's buffer")
        .map_err(RunError::OutOfMemory)?;
    let mut crc = crc32fast::Hasher::new();
    let t0 = platform.now_ns();
    let mut read = 0u64;
    for r in report::digest_ranges(direct.len(), cfg.model_digest) {
        let mut at = r.start;
        while at < r.end {
            let n = (r.end - at).min(CHUNK as u64) as usize;
            direct
                .read_at(at, &mut buf[..n])
                .map_err(|e| RunError::SelfTest(alloc::format!("model: {e}")))?;
            crc.update(&buf[..n]);
            at += n as u64;
        }
        read += r.end - r.start;
    }
    let ns = (platform.now_ns() - t0).max(1);
    let rate = read * 1000 / ns;
    found.field("read", rate);
    let span = match read == direct.len() {
        true => "whole",
        false => "its first and last MiBs (model_digest)",
    };
    let got = crc.finalize();
    if got != want {
        found.verdicts.push(("model", "fail"));
        let _ = writeln!(out, "{}", found.line(platform));
        return Err(RunError::SelfTest(alloc::format!(
            "model FAILED: {}'s CRC-32 ({span}) is {got:08x}, but lmboot.txt's model_crc32 says {want:08x}: the file on the card is not the file written to it (write the card again with cargo xtask image, or try another card)",
            cfg.model
        )));
    }
    let _ = writeln!(
        out,
        "selftest: model ok: {} MiB read from the card ({span}) in {} ms ({rate} MB/s), CRC-32 {got:08x} as written",
        read >> 20,
        ns / 1_000_000
    );
    found.verdicts.push(("model", "ok"));
    Ok(())
}
