//! llama.cpp counted the way lmboot is: its `llama-simple`, built static for aarch64 Linux with
//! Debian's cross compiler from the source vendored in the `llama-cpp-python` sdist (pip downloads
//! it into the cache; nothing of it enters the repository), run as the init of Debian bookworm's
//! arm64 Linux kernel on QEMU's virt board with `-icount shift=0 -smp 1`, the same board, CPU
//! models and instruction counter as lmboot's bench. The rv64gcv build ([`RVV`]) is the same for
//! riscv64 Linux: compiled by Debian's clang 19 against the riscv64 cross toolchain's libraries
//! (bookworm's riscv64 cross gcc 12 has no RVV intrinsics), run as the init of Debian trixie's
//! riscv64 kernel (bookworm has no riscv64 port) on QEMU's riscv64 virt board at VLEN 256. That
//! guest's clock runs ahead of its instructions for a while after init starts: a 60 M-instruction
//! loop timed there reads 117 M to 225 M until about 2.1 s of guest time, then 60.07 M. The
//! model's load (1.6 s on SmolLM2) spans that, and a run whose init first waits until 4 s reads
//! the same prompt and eval times (547.23 ms; 468.94 ms against 468.89 ms). Under `-icount shift=0` the guest's clock
//! advances 1 ns per instruction, so llama.cpp's own timings (`llama_perf_context_print`: prompt
//! eval time over its tokens, eval time over its runs) are instruction counts. They include what
//! the guest kernel runs meanwhile: its timer ticks (250 Hz; a loop of 60 M instructions timed
//! this way reads 60.1 M) and the page faults of first touches. Builds, the kernel and the
//! measured runs (each with its QEMU command line) stay in the cache (`cache_dir()/llamacpp`).

use crate::{cache_dir, workspace_root};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The sdist that vendors llama.cpp (also the source of `--only mca`'s loops).
const SDIST: &str = "llama-cpp-python==0.3.36";
const SDIST_FILE: &str = "llama_cpp_python-0.3.36.tar.gz";
/// The llama.cpp tree inside the sdist.
const TREE: &str = "llama_cpp_python-0.3.36/vendor/llama.cpp";
/// The sdist's changelog, which names the llama.cpp commit it vendors.
const CHANGELOG: &str = "llama_cpp_python-0.3.36/CHANGELOG.md";

/// The instruction set of a build (and so its compiler, kernel and QEMU).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Isa {
    Aarch64,
    Riscv64,
}

impl Isa {
    /// The QEMU system emulator.
    pub fn qemu(self) -> &'static str {
        match self {
            Isa::Aarch64 => "qemu-system-aarch64",
            Isa::Riscv64 => "qemu-system-riscv64",
        }
    }
}

/// One build of llama.cpp and the QEMU CPU model it runs on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Build {
    pub isa: Isa,
    /// QEMU's `-cpu`.
    pub cpu: &'static str,
    /// `-march`: `GGML_CPU_ARM_ARCH` on aarch64; on riscv64 what the `GGML_RV*` options of
    /// [`cmake_args`] make.
    pub arch: &'static str,
    /// lmboot's kernel set on that CPU in the bench.
    pub kernels: &'static str,
}

/// Plain NEON on a Cortex-A53, NEON with SDOT on a Cortex-A76 (as lmboot's `neon` and
/// `neon-dotprod` rows).
pub const BUILDS: [Build; 2] = [
    Build {
        isa: Isa::Aarch64,
        cpu: "cortex-a53",
        arch: "armv8-a",
        kernels: "neon",
    },
    Build {
        isa: Isa::Aarch64,
        cpu: "cortex-a76",
        arch: "armv8.2-a+dotprod",
        kernels: "neon-dotprod",
    },
];

/// RVV 1.0 at VLEN 256 (as lmboot's `rvv` row on that CPU): rv64gcv, ggml's RVV code on and its
/// optional extensions (Zfh, Zvfh, Zicbop, Zihintpause) off. Measured on the default model only.
pub const RVV: Build = Build {
    isa: Isa::Riscv64,
    cpu: "rv64,v=true,vlen=256,elen=64",
    arch: "rv64gcv",
    kernels: "rvv",
};

/// The builds measured on the default model: [`BUILDS`] and [`RVV`].
pub const DEFAULT_BUILDS: [Build; 3] = [BUILDS[0], BUILDS[1], RVV];

/// `b`'s name in tables and charts: its `-march`, and the vector length on riscv64.
pub fn label(b: Build) -> String {
    match b.isa {
        Isa::Aarch64 => format!("llama.cpp {}", b.arch),
        Isa::Riscv64 => format!("llama.cpp {} VLEN 256", b.arch),
    }
}

/// Debian trixie's riscv64 Linux kernel package (bookworm has no riscv64 port), its version and
/// the kernel's file in `/boot`.
const RV_KERNEL: (&str, &str, &str) = (
    "linux-image-6.12.117+deb13-riscv64",
    "6.12.117-1",
    "vmlinux-6.12.117+deb13-riscv64",
);

/// The guest's RAM: the model twice (the initramfs's copy and llama.cpp's, read without mmap)
/// with room to spare.
const MEM: &str = "3G";

/// What one run printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Prompt tokens (llama.cpp's tokenizer, BOS included where the model adds one).
    pub prompt_tokens: u64,
    /// Instructions over the prompt's pass, per prompt token.
    pub per_prompt_token: u64,
    /// Decode runs after the prompt (generated tokens fed back: n - 1).
    pub runs: u64,
    /// Instructions per decode run.
    pub per_generated_token: u64,
    /// The generated text after the prompt.
    pub text: String,
}

fn dir() -> PathBuf {
    cache_dir().join("llamacpp")
}

/// The llama.cpp commit the sdist vendors, from its changelog (`ggml-org/llama.cpp@…`).
pub fn version() -> Result<String, String> {
    let d = dir();
    let log = d.join(CHANGELOG);
    if !log.exists() {
        unpack(&d, CHANGELOG, "")?;
    }
    let text = fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let commit = text
        .lines()
        .find_map(|l| l.split("update llama.cpp to ").nth(1))
        .map(|s| s.trim().to_string())
        .ok_or("no llama.cpp commit in the sdist's changelog")?;
    Ok(format!("{commit} (vendored in {SDIST})"))
}

/// The llama.cpp tree, with `examples/simple/simple.cpp` set to one thread and no mmap: the
/// example takes neither from its command line, and ggml's default is 4 threads, which on one
/// core would spin against each other; without mmap the model is read in while loading instead
/// of faulted in page by page during the prompt.
fn source() -> Result<PathBuf, String> {
    let root = unpack(&dir(), TREE, "examples/simple/simple.cpp")?;
    let file = root.join("examples/simple/simple.cpp");
    let text = fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    if text.contains("n_threads = 1;") {
        return Ok(root);
    }
    let patched = patch(&text)?;
    fs::write(&file, patched).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(root)
}

/// [`source`]'s two edits of `simple.cpp`.
fn patch(text: &str) -> Result<String, String> {
    let edits = [
        (
            "    model_params.n_gpu_layers = ngl;\n",
            "    model_params.load_mode = LLAMA_LOAD_MODE_NONE;\n",
        ),
        (
            "    ctx_params.no_perf = false;\n",
            "    ctx_params.n_threads = 1;\n    ctx_params.n_threads_batch = 1;\n",
        ),
    ];
    let mut out = text.to_string();
    for (anchor, add) in edits {
        if !out.contains(anchor) {
            return Err(format!("simple.cpp: no {anchor:?} to patch after"));
        }
        out = out.replacen(anchor, &format!("{anchor}{add}"), 1);
    }
    Ok(out)
}

/// `member` of the sdist (a path under its top directory) unpacked into `dir`, downloading the
/// sdist first if needed; `probe` (under `member`) tells whether it is unpacked already.
pub(crate) fn unpack(dir: &Path, member: &str, probe: &str) -> Result<PathBuf, String> {
    let root = dir.join(member);
    if root.join(probe).exists() {
        return Ok(root);
    }
    let sdist = dir.join(SDIST_FILE);
    if !sdist.exists() {
        eprintln!("xtask: downloading {SDIST} (llama.cpp's source) with pip");
        // Only this package from source; its build tools as wheels (pip prepares its metadata).
        let mut c = Command::new(crate::python());
        c.args(["-m", "pip", "download", "--no-deps", "--no-binary"])
            .args(["llama-cpp-python", "-d"])
            .arg(dir)
            .arg(SDIST);
        run(c, &format!("pip download {SDIST}"))?;
    }
    let mut c = Command::new("tar");
    c.arg("-xzf").arg(&sdist).arg("-C").arg(dir).arg(member);
    run(c, &format!("unpacking {}", sdist.display()))?;
    Ok(root)
}

/// Run `c`; an error naming `what` if it cannot start or fails.
pub(crate) fn run(mut c: Command, what: &str) -> Result<(), String> {
    match c.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{what} failed ({s})")),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

/// Whether `tool --version` runs.
pub(crate) fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// CMake and Ninja: on PATH, or pip's wheels in a virtual environment in the cache.
fn build_tools() -> Result<PathBuf, String> {
    if have("cmake") && have("ninja") {
        return Ok(PathBuf::from("cmake"));
    }
    let venv = dir().join("tools");
    let cmake = venv.join("bin/cmake");
    if !cmake.exists() || !venv.join("bin/ninja").exists() {
        eprintln!(
            "xtask: installing cmake and ninja with pip into {}",
            venv.display()
        );
        let mut c = Command::new(crate::python());
        c.args(["-m", "venv"]).arg(&venv);
        run(c, "python -m venv")?;
        let mut c = Command::new(venv.join("bin/pip"));
        c.args(["install", "-q", "cmake", "ninja"]);
        run(c, "pip install cmake ninja")?;
    }
    Ok(cmake)
}

/// Debian's cross compilers for `isa`, installed on first use through the setup's script: the
/// aarch64 g++; for riscv64 clang 19 with the riscv64 g++'s libraries, linker and headers.
fn cross_compiler(isa: Isa) -> Result<(), String> {
    let tools: &[(&str, &str)] = match isa {
        Isa::Aarch64 => &[("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu")],
        Isa::Riscv64 => &[
            ("riscv64-linux-gnu-g++", "g++-riscv64-linux-gnu"),
            ("clang++-19", "clang-19"),
        ],
    };
    if tools.iter().all(|(t, _)| have(t)) {
        return Ok(());
    }
    let mut c = Command::new("bash");
    c.arg(workspace_root().join("xtask/scripts/install-qemu.sh"))
        .arg(cache_dir())
        .args(tools.iter().map(|(_, p)| p));
    let _ = c.status();
    match tools.iter().find(|(t, _)| !have(t)) {
        None => Ok(()),
        Some((t, p)) => Err(format!("{t} not found: install Debian's {p}")),
    }
}

/// CMake's configure arguments for `b` (after `-S SOURCE -B BUILD`). For riscv64: clang 19 for
/// riscv64 Linux, `-march=rv64gcv -mabi=lp64d` (ggml's default adds Zfh, Zvfh, Zicbop and
/// Zihintpause, which rv64gcv does not have). Its C is assembled by the GNU cross assembler: the
/// inline RVV assembly of ggml's `arch/riscv/quants.c` writes `vsetivli` without the tail and mask
/// policies, which GNU as defaults and clang's own assembler rejects. C++ keeps clang's
/// (bookworm's GNU as cannot take its exception tables' `.uleb128`s).
pub fn cmake_args(b: Build) -> Vec<String> {
    let (processor, cc, cxx, cross): (_, _, _, &[&str]) = match b.isa {
        Isa::Aarch64 => (
            "aarch64",
            "aarch64-linux-gnu-gcc",
            "aarch64-linux-gnu-g++",
            &[],
        ),
        Isa::Riscv64 => (
            "riscv64",
            "clang-19",
            "clang++-19",
            &[
                "-DCMAKE_C_COMPILER_TARGET=riscv64-linux-gnu",
                "-DCMAKE_CXX_COMPILER_TARGET=riscv64-linux-gnu",
                "-DCMAKE_C_FLAGS=-fno-integrated-as",
            ],
        ),
    };
    let arm_arch = format!("-DGGML_CPU_ARM_ARCH={}", b.arch);
    let isa: &[&str] = match b.isa {
        Isa::Aarch64 => &[&arm_arch],
        Isa::Riscv64 => &[
            "-DGGML_RVV=ON",
            "-DGGML_RV_ZFH=OFF",
            "-DGGML_RV_ZVFH=OFF",
            "-DGGML_RV_ZICBOP=OFF",
            "-DGGML_RV_ZIHINTPAUSE=OFF",
        ],
    };
    let mut v: Vec<String> = [
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_SYSTEM_NAME=Linux",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("-DCMAKE_SYSTEM_PROCESSOR={processor}"));
    v.push(format!("-DCMAKE_C_COMPILER={cc}"));
    v.push(format!("-DCMAKE_CXX_COMPILER={cxx}"));
    let shared = [
        "-DBUILD_SHARED_LIBS=OFF",
        "-DGGML_STATIC=ON",
        "-DGGML_NATIVE=OFF",
    ];
    let tail = [
        "-DGGML_OPENMP=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_TOOLS=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
        "-DLLAMA_BUILD_APP=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DCMAKE_EXE_LINKER_FLAGS=-static",
    ];
    let rest = cross.iter().chain(&shared).chain(isa).chain(&tail);
    v.extend(rest.map(|s| s.to_string()));
    v
}

/// The static `llama-simple` for `b`, built on first use (cmake, Ninja, 2 jobs).
pub fn build(b: Build) -> Result<PathBuf, String> {
    let out = dir().join(format!("build-{}", b.arch));
    let bin = out.join("bin/llama-simple");
    if bin.exists() {
        return Ok(bin);
    }
    let src = source()?;
    cross_compiler(b.isa)?;
    let cmake = build_tools()?;
    // Ninja from the same environment as cmake.
    let path = match cmake.parent() {
        Some(p) if !p.as_os_str().is_empty() => {
            let old = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![p.to_path_buf()];
            dirs.extend(std::env::split_paths(&old));
            std::env::join_paths(dirs).map_err(|e| e.to_string())?
        }
        _ => std::env::var_os("PATH").unwrap_or_default(),
    };
    eprintln!("xtask: building llama.cpp's llama-simple for {}", b.arch);
    let mut c = Command::new(&cmake);
    c.arg("-S")
        .arg(&src)
        .arg("-B")
        .arg(&out)
        .args(cmake_args(b))
        .env("PATH", &path);
    run(c, &format!("cmake (llama.cpp, {})", b.arch))?;
    let mut c = Command::new(&cmake);
    c.arg("--build")
        .arg(&out)
        .args(["--target", "llama-simple", "-j2"])
        .env("PATH", &path);
    run(c, &format!("building llama-simple ({})", b.arch))?;
    if !bin.exists() {
        return Err(format!("{}: not built", bin.display()));
    }
    Ok(bin)
}

/// The Linux kernel package for `isa`, its version, Debian suite and architecture, and the
/// kernel's file in `/boot`: for aarch64 Debian bookworm's arm64 kernel (the package the Pi device
/// trees come from), for riscv64 `RV_KERNEL`.
pub fn kernel_package(
    isa: Isa,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    String,
) {
    use crate::dtb::{PACKAGE, VERSION};
    match isa {
        Isa::Aarch64 => (
            PACKAGE,
            VERSION,
            "bookworm",
            "arm64",
            PACKAGE.replacen("linux-image-", "vmlinuz-", 1),
        ),
        Isa::Riscv64 => (
            RV_KERNEL.0,
            RV_KERNEL.1,
            "trixie",
            "riscv64",
            RV_KERNEL.2.to_string(),
        ),
    }
}

/// [`kernel_package`]'s kernel, fetched into the cache on first use.
pub fn kernel(isa: Isa) -> Result<PathBuf, String> {
    let (package, version, suite, arch, name) = kernel_package(isa);
    let out = dir().join("kernel").join(version);
    let file = out.join(&name);
    if file.exists() {
        return Ok(file);
    }
    eprintln!("xtask: fetching {name} from {package} {version} (Debian {suite}, {arch})");
    let mut c = Command::new("bash");
    c.arg(workspace_root().join("xtask/scripts/fetch-dtbs.sh"))
        .arg(cache_dir())
        .args([package, version, "boot"])
        .arg(&out)
        .arg(&name)
        .env("DEB_ARCH", arch)
        .env("DEB_SUITE", suite);
    run(c, &format!("fetching {name}"))?;
    Ok(file)
}

/// One entry of a `newc` cpio archive: name, mode (type and permissions), device (major, minor)
/// for device nodes, and the file whose bytes it holds.
struct Entry<'a> {
    name: &'a str,
    mode: u32,
    rdev: (u32, u32),
    file: Option<&'a Path>,
}

/// The header and padded name of one `newc` entry of `size` bytes.
fn cpio_header(ino: u32, e: &Entry<'_>, size: u64) -> Result<Vec<u8>, String> {
    let size = u32::try_from(size).map_err(|_| format!("{}: over 4 GiB for cpio", e.name))?;
    let namesize = e.name.len() + 1;
    let fields = [
        ino,
        e.mode,
        0,
        0,
        1,
        0,
        size,
        0,
        0,
        e.rdev.0,
        e.rdev.1,
        namesize as u32,
        0,
    ];
    let mut h = b"070701".to_vec();
    for f in fields {
        h.extend(format!("{f:08x}").bytes());
    }
    h.extend(e.name.bytes());
    h.push(0);
    h.resize(h.len().next_multiple_of(4), 0);
    Ok(h)
}

/// Write a `newc` cpio archive of `entries` (and its trailer) to `out`.
fn write_cpio(entries: &[Entry<'_>], out: &Path) -> Result<(), String> {
    let err = |e: io::Error| format!("{}: {e}", out.display());
    let mut w = BufWriter::new(fs::File::create(out).map_err(err)?);
    let mut written = 0u64;
    let trailer = Entry {
        name: "TRAILER!!!",
        mode: 0,
        rdev: (0, 0),
        file: None,
    };
    for (i, e) in entries.iter().chain([&trailer]).enumerate() {
        let size = match e.file {
            Some(f) => fs::metadata(f)
                .map_err(|x| format!("{}: {x}", f.display()))?
                .len(),
            None => 0,
        };
        let h = cpio_header(i as u32 + 1, e, size)?;
        w.write_all(&h).map_err(err)?;
        written += h.len() as u64;
        if let Some(f) = e.file {
            let mut r = fs::File::open(f).map_err(|x| format!("{}: {x}", f.display()))?;
            let n = io::copy(&mut r, &mut w).map_err(err)?;
            if n != size {
                return Err(format!("{}: changed while archived", f.display()));
            }
            written += n;
            let pad = written.next_multiple_of(4) - written;
            w.write_all(&[0; 3][..pad as usize]).map_err(err)?;
            written += pad;
        }
    }
    w.flush().map_err(err)
}

/// The initramfs: `/llama-simple` (the init), `/model.gguf` and `/dev/console`.
fn initramfs(bin: &Path, model: &Path, out: &Path) -> Result<(), String> {
    write_cpio(
        &[
            Entry {
                name: "dev",
                mode: 0o040755,
                rdev: (0, 0),
                file: None,
            },
            Entry {
                name: "dev/console",
                mode: 0o020600,
                rdev: (5, 1),
                file: None,
            },
            Entry {
                name: "llama-simple",
                mode: 0o100755,
                rdev: (0, 0),
                file: Some(bin),
            },
            Entry {
                name: "model.gguf",
                mode: 0o100644,
                rdev: (0, 0),
                file: Some(model),
            },
        ],
        out,
    )
}

/// The prompt of lmboot's bench.
pub const PROMPT: &str = "Once upon a time";

/// QEMU's arguments for one run of `b` (after the binary): virt, one core of its CPU,
/// `-icount shift=0`, Debian's kernel with the initramfs, whose init is
/// `llama-simple -m /model.gguf -n N PROMPT` (the kernel passes what follows `--` to init; the
/// panic when init exits reboots, which `-no-reboot` turns into QEMU's exit). On riscv64 QEMU's
/// OpenSBI (`-bios default`) starts the kernel, whose console is the virt board's 16550.
pub fn qemu_args(b: Build, kernel: &Path, initrd: &Path, n: usize) -> Vec<String> {
    let (bios, console): (&[&str], _) = match b.isa {
        Isa::Aarch64 => (&[], "ttyAMA0"),
        Isa::Riscv64 => (&["-bios", "default"], "ttyS0"),
    };
    let mut v: Vec<String> = ["-M", "virt", "-cpu", b.cpu]
        .iter()
        .chain(bios)
        .map(|s| s.to_string())
        .collect();
    v.extend(
        [
            "-accel",
            "tcg,thread=single",
            "-smp",
            "1",
            "-m",
            MEM,
            "-icount",
            "shift=0",
            "-nographic",
            "-monitor",
            "none",
            "-nic",
            "none",
            "-no-reboot",
            "-kernel",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v.push(kernel.display().to_string());
    v.push("-initrd".into());
    v.push(initrd.display().to_string());
    v.push("-append".into());
    v.push(format!(
        "console={console} quiet panic=-1 rdinit=/llama-simple -- -m /model.gguf -n {n} {PROMPT}"
    ));
    v
}

/// The milliseconds and count of llama.cpp's perf line starting with `key` (`prompt eval time`,
/// `eval time`): `… = 123.45 ms / 5 tokens (…)`.
fn perf(text: &str, key: &str) -> Option<(f64, u64)> {
    let line = text.lines().find(|l| {
        l.split_once(": ")
            .is_some_and(|(_, r)| r.trim_start().starts_with(key))
    })?;
    let (_, rest) = line.split_once(" = ")?;
    let (ms, rest) = rest.split_once(" ms /")?;
    let count = rest.split_whitespace().next()?.parse().ok()?;
    Some((ms.trim().parse().ok()?, count))
}

/// The figures in one run's console text.
pub fn parse(text: &str) -> Option<Figures> {
    let (p_ms, prompt_tokens) = perf(text, "prompt eval time")?;
    let (e_ms, runs) = perf(text, "eval time")?;
    let per = |ms: f64, n: u64| (ms * 1e6 / n.max(1) as f64).round() as u64;
    let generated = text
        .find(PROMPT)
        .map(|i| &text[i + PROMPT.len()..])
        .and_then(|t| t.lines().next())
        .unwrap_or("")
        .to_string();
    Some(Figures {
        prompt_tokens,
        per_prompt_token: per(p_ms, prompt_tokens),
        runs,
        per_generated_token: per(e_ms, runs),
        text: generated,
    })
}

/// The figures and command of a run's log in the cache: `$ COMMAND`, then the console text.
fn parse_log(log: &str) -> Option<(Figures, String)> {
    let (cmd, text) = log.split_once('\n')?;
    Some((parse(text)?, cmd.strip_prefix("$ ")?.to_string()))
}

/// The command line of `args` for the report.
pub fn shell_line(program: &str, args: &[String]) -> String {
    let quote = |a: &String| {
        if a.contains(' ') {
            format!("\"{a}\"")
        } else {
            a.clone()
        }
    };
    std::iter::once(program.to_string())
        .chain(args.iter().map(quote))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run llama.cpp's build `b` on `model` for `n` tokens (or read the figures of an earlier run
/// from the cache); the figures and the QEMU command that produced them.
pub fn measure(b: Build, model: &Path, n: usize) -> Result<(Figures, String), String> {
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let runs = dir().join("runs");
    fs::create_dir_all(&runs).map_err(|e| format!("{}: {e}", runs.display()))?;
    // The CPU as a file name (`rv64,v=true,…` without commas and equals signs).
    let cpu = b.cpu.replace([',', '='], "-");
    let log = runs.join(format!("{stem}-{cpu}-{}-n{n}.txt", b.arch));
    if let Some((f, cmd)) = fs::read_to_string(&log).ok().as_deref().and_then(parse_log) {
        return Ok((f, shown(&cmd)));
    }
    let bin = build(b)?;
    let kernel = kernel(b.isa)?;
    let initrd = dir().join(format!("initramfs-{}.cpio", b.arch));
    initramfs(&bin, model, &initrd)?;
    let args = qemu_args(b, &kernel, &initrd, n);
    let cmd = shell_line(b.isa.qemu(), &args);
    eprintln!("xtask: llama.cpp {} on {} ({stem})", b.arch, b.cpu);
    let out = Command::new(b.isa.qemu())
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("QEMU: {e}"));
    let _ = fs::remove_file(&initrd);
    let out = out?;
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let f = parse(&text).ok_or_else(|| {
        format!(
            "llama.cpp {} on {}: no perf lines (exit {:?}):\n{text}",
            b.arch,
            b.cpu,
            out.status.code()
        )
    })?;
    fs::write(&log, format!("$ {cmd}\n{text}")).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok((f, shown(&cmd)))
}

/// `cmd` as the results print it: the cache directory written `$LMBOOT_CACHE`, so that the
/// results name no path of the machine that measured them.
fn shown(cmd: &str) -> String {
    cmd.replace(&crate::cache_dir().display().to_string(), "$LMBOOT_CACHE")
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "Once upon a time, there was a\n\
        llama_perf_sampler_print:    sampling time =       0.31 ms /     4 runs   (    0.08 ms per token, 12903.23 tokens per second)\n\
        llama_perf_context_print:        load time =    1234.00 ms\n\
        llama_perf_context_print: prompt eval time =     500.50 ms /     5 tokens (  100.10 ms per token,     9.99 tokens per second)\n\
        llama_perf_context_print:        eval time =     360.00 ms /     3 runs   (  120.00 ms per token,     8.33 tokens per second)\n";

    #[test]
    fn parses_the_perf_lines() {
        let f = parse(RUN).unwrap();
        assert_eq!(f.prompt_tokens, 5);
        assert_eq!(f.per_prompt_token, 100_100_000);
        assert_eq!(f.runs, 3);
        assert_eq!(f.per_generated_token, 120_000_000);
        assert_eq!(f.text, ", there was a");
        assert!(parse("no perf here").is_none());
        // A cached log starts with the command, whose prompt is not the text.
        let log = format!("$ qemu -append \"rdinit=/llama-simple -- {PROMPT}\"\n{RUN}");
        let (f, cmd) = parse_log(&log).unwrap();
        assert_eq!(f.text, ", there was a");
        assert!(cmd.starts_with("qemu -append"));
    }

    #[test]
    fn cpio_entries_are_aligned() {
        let e = Entry {
            name: "dev/console",
            mode: 0o020600,
            rdev: (5, 1),
            file: None,
        };
        let h = cpio_header(2, &e, 0).unwrap();
        assert_eq!(h.len() % 4, 0);
        assert!(h.starts_with(b"070701"));
        assert_eq!(&h[6 + 8..6 + 16], b"00002180");
        assert!(cpio_header(1, &e, 1 << 32).is_err());
    }

    #[test]
    fn qemu_lines_per_isa() {
        let (k, i) = (Path::new("K"), Path::new("I"));
        let arm = shell_line(BUILDS[0].isa.qemu(), &qemu_args(BUILDS[0], k, i, 4));
        // The aarch64 line of the cached runs, unchanged.
        assert_eq!(
            arm,
            "qemu-system-aarch64 -M virt -cpu cortex-a53 -accel tcg,thread=single -smp 1 -m 3G \
             -icount shift=0 -nographic -monitor none -nic none -no-reboot -kernel K -initrd I \
             -append \"console=ttyAMA0 quiet panic=-1 rdinit=/llama-simple -- -m /model.gguf -n 4 \
             Once upon a time\""
        );
        let rv = shell_line(RVV.isa.qemu(), &qemu_args(RVV, k, i, 4));
        assert!(rv.starts_with(
            "qemu-system-riscv64 -M virt -cpu rv64,v=true,vlen=256,elen=64 -bios default -accel"
        ));
        assert!(rv.contains("\"console=ttyS0 quiet panic=-1 rdinit=/llama-simple --"));
        // The aarch64 builds' configure line, unchanged (their cached builds and runs stay valid).
        assert_eq!(
            cmake_args(BUILDS[1]).join(" "),
            "-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_SYSTEM_NAME=Linux \
             -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc \
             -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ -DBUILD_SHARED_LIBS=OFF -DGGML_STATIC=ON \
             -DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod -DGGML_OPENMP=OFF \
             -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
             -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_EXE_LINKER_FLAGS=-static"
        );
        assert_eq!(
            cmake_args(RVV).join(" "),
            "-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_SYSTEM_NAME=Linux \
             -DCMAKE_SYSTEM_PROCESSOR=riscv64 -DCMAKE_C_COMPILER=clang-19 \
             -DCMAKE_CXX_COMPILER=clang++-19 -DCMAKE_C_COMPILER_TARGET=riscv64-linux-gnu \
             -DCMAKE_CXX_COMPILER_TARGET=riscv64-linux-gnu -DCMAKE_C_FLAGS=-fno-integrated-as \
             -DBUILD_SHARED_LIBS=OFF -DGGML_STATIC=ON -DGGML_NATIVE=OFF -DGGML_RVV=ON \
             -DGGML_RV_ZFH=OFF -DGGML_RV_ZVFH=OFF -DGGML_RV_ZICBOP=OFF -DGGML_RV_ZIHINTPAUSE=OFF \
             -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
             -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
             -DCMAKE_EXE_LINKER_FLAGS=-static"
        );
    }

    #[test]
    fn patches_simple_cpp() {
        let src = "    model_params.n_gpu_layers = ngl;\n    ctx_params.no_perf = false;\n";
        let p = patch(src).unwrap();
        assert!(p.contains("LLAMA_LOAD_MODE_NONE;") && p.contains("n_threads_batch = 1;"));
        assert!(patch("int main() {}").is_err());
    }
}
