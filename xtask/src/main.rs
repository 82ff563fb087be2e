//! `cargo xtask <command>`: the one entry point for fetching, building, testing (and, as the boot
//! issues land, imaging, running and benchmarking) lmboot.

use std::process::{exit, Command};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  demo            the main job: install what is needed, build the kernel and a card image, boot QEMU
                  with the serial line on this terminal and chat with the default model
                  [--board B] [--model FILE|NAME] [generation flags]; Ctrl-D ends the chat,
                  Ctrl-A X quits QEMU
  setup           install what building and testing need (rustup targets, QEMU 10, FAT tools)
  fetch-model     download a model into the cache and verify its sha256; prints its path
                  [NAME] (default smollm2-135m), or --list: the names, sizes and whether cached
  check-targets   build the no_std crates for aarch64-unknown-none and riscv64gc-unknown-none-elf
  test            everything CI runs: check-targets, fetch-model, cargo test --workspace, cargo doc
                  --workspace --no-deps with rustdoc warnings denied
  image           build a card image: --board B [--model FILE|NAME] [--out FILE] [generation flags]
  qemu            build, image and boot in QEMU: --board B [--model FILE|NAME] [--mem SIZE] [--smp N] [--cpu MODEL] [--icount]
  ring            N virt boards in a ring over their second UARTs (one model split across them): --boards N
                  [--model FILE|NAME] [--mem SIZE] [--smp N] [--prompt P] [-n N] [--set key=value]
                  [generation flags: --prompt TEXT -n N --temp T --top-k K --top-p P --min-p M
                   --repeat-penalty R --seed S --ctx N --cache SIZE --no-special --set KEY=VALUE (any lmboot.txt line)
                   speculative decoding: --lookup N --self-draft L --draft FILE|NAME (written to the
                   card as /draft.gguf) --draft-vocab N|auto|all --draft-max K
                   --speculate auto|off|K
                   --selftest full: the first-boot checks and the lmboot-report: line]
                  prints the UART on stdout and exits with the kernel's status
  bench           instruction counts per token in QEMU (-icount) for each kernel set, 1 and 4 cores;
                  writes results/bench.md and results/bench.svg [-n N] [--board B];
                  page-cache bytes per token against cache size (resident-prefix, read-ahead, LRU):
                  results/pagecache.md and .svg; guest time per token with read-ahead off and on
                  (64 MiB of RAM, -icount, card unthrottled and at 25 MB/s): results/readahead.md
                  instructions per prompt token with the prompt in batches of 1, 8 and 32, and bytes
                  per prompt token at 64 MiB: results/batches.md
                  estimated cycles per weight block of the hot loops with llvm-mca (cortex-a53,
                  cortex-a55, sifive-x280) beside llama.cpp's loops: results/mca.md (needs LLVM 19;
                  only with --only mca); instructions per token of Gemma-3-270M and
                  Qwen2.5-Coder-0.5B (NEON, SDOT, RVV 256; 1 and 4 cores) and llama.cpp's beside
                  them (static aarch64 llama-simple under Debian's Linux in the same QEMU, built
                  and measured once into the cache): results/models.md; that comparison alone,
                  with SmolLM2 too (also on RVV 256 beside llama.cpp's static rv64gcv build
                  under Debian trixie's riscv64 Linux), with --only llamacpp: results/llamacpp.md
                  the SD bus per host and mode (simulators: time per 256 KiB page, register
                  accesses per MB, the driver's instructions per MB by callgrind) and raspi3b's
                  PIO instructions per MB under -icount: results/card.md
                  the self-test's time on a Zero 2 W (raspi3b under -icount, one core, at an
                  assumed clock, IPC and card rate): results/selftest.md
                  speculative decoding on a Pi Zero 2 W's and a Pi 4's clock through the page cache
                  (lmboot-host --board-sim; fetches Qwen2.5-Coder-1.5B and -0.5B; only with --only
                  speculative): results/speculative.md
                  the XTheadVector set's instructions per token beside RVV 1.0's at VLEN 128
                  (xuantie-qemu user mode, -cpu c906fdv / c908v, the insncount plugin) and the
                  Milk-V Duo's predicted time per token (only with --only xtheadvector):
                  results/xtheadvector.md
                  [--only instructions|batches|cache|readahead|mca|models|llamacpp|card|selftest|speculative|xtheadvector]
  fidelity        the error budget: mean KL from the float64 reference on every golden case with
                  each approximation made exact in turn (lmboot-host --exact): results/fidelity.md
  fuzz            run each fuzz target (gguf, fat, tokenizer, config, ring, fdt, promptcache,
                  sdregs, chat, json) with cargo-fuzz on nightly [--seconds N] [--target T];
                  prints executions per target; crashes are saved under fuzz/regressions/
  docs            write docs/card.md's table of lmboot.txt keys from runtime/src/config.rs's KEYS
                  (a test fails until it is run after a key changes)
  house           the house rules, measured: non-test functions over 120 lines, import cycles
                  inside a crate, imports up the layers through a re-export, imports against a
                  crate's documented layers, files outside the kernel sets naming Q5_1; exits 1
                  if one is broken
  report          decode a board's first-boot report: LOG (a saved serial log holding the
                  lmboot-report: line) -> each field, the failed checks and what to check, and
                  the measured card and kernel rates beside the board-sim's assumptions
  bench-host      PC runner speed on the default model (or --model): prefill and generation tok/s
                  at 1 thread and all threads, llama.cpp's 1-thread figures beside them [--threads N] [-n N]
                  [--pread] [--batch B] [--model FILE|NAME]

--model takes a GGUF file or a model name (cargo xtask fetch-model --list), fetched if needed.
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("demo") => report(demo(&args[1..])),
        Some("setup") => setup(),
        Some("fetch-model") => fetch_model(&args[1..]),
        Some("check-targets") => check_targets(),
        Some("test") => test(&args[1..]),
        Some("bench-host") => bench_host(&args[1..]),
        Some("bench") => report(bench(&args[1..])),
        Some("fidelity") => report(xtask::fidelity::run().map(|md| {
            println!("{md}");
            eprintln!("xtask: wrote results/fidelity.md");
            0
        })),
        Some("fuzz") => report(fuzz(&args[1..])),
        Some("house") => report(house()),
        Some("docs") => report(xtask::docs::write_key_table().map(|changed| {
            let what = if changed { "rewrote" } else { "unchanged:" };
            println!("xtask: docs: {what} docs/card.md");
            0
        })),
        Some("image") => report(image(&args[1..]).map(|_| 0)),
        Some("qemu") => report(qemu(&args[1..])),
        Some("ring") => report(ring(&args[1..])),
        Some("report") => report(decode_report(&args[1..])),
        Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            0
        }
        Some(other) => {
            eprintln!("xtask: unknown command {other:?}\n\n{USAGE}");
            2
        }
        None => {
            eprint!("{USAGE}");
            2
        }
    };
    exit(code);
}

/// `cargo xtask report LOG`.
fn decode_report(args: &[String]) -> Result<i32, String> {
    let [path] = args else {
        return Err("usage: cargo xtask report LOG (a saved serial log)".into());
    };
    let text = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let out = xtask::report::decode(&String::from_utf8_lossy(&text))?;
    print!("{out}");
    Ok(i32::from(out.contains("FAILED ")))
}

const BARE_METAL_TARGETS: [&str; 3] = [
    "aarch64-unknown-none",
    "riscv64gc-unknown-none-elf",
    "armv7a-none-eabi",
];
/// Linux targets for running kernel tests and the PC runner under qemu-user.
const USER_TARGETS: [&str; 3] = [
    "aarch64-unknown-linux-gnu",
    "riscv64gc-unknown-linux-gnu",
    "armv7-unknown-linux-gnueabihf",
];
/// Debian packages besides QEMU: the cross linker for the qemu-user targets, the Pi firmware.
const EXTRA_PACKAGES: [&str; 7] = [
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "gcc-riscv64-linux-gnu",
    "libc6-dev-riscv64-cross",
    "gcc-arm-linux-gnueabihf",
    "libc6-dev-armhf-cross",
    "raspi-firmware",
];

/// Install what building and testing need on a fresh machine (idempotent).
fn setup() -> i32 {
    let mut c = Command::new("rustup");
    c.args(["target", "add"])
        .args(BARE_METAL_TARGETS)
        .args(USER_TARGETS);
    if !run(c) {
        return 1;
    }
    let mut c = Command::new("rustup");
    c.args(["component", "add", "llvm-tools"]);
    if !run(c) {
        return 1;
    }
    // QEMU 10 (system and user mode), the FAT tools, the cross linker and the Pi firmware.
    let mut c = Command::new("bash");
    c.arg(xtask::workspace_root().join("xtask/scripts/install-qemu.sh"))
        .arg(xtask::cache_dir())
        .args(EXTRA_PACKAGES);
    if !run(c) {
        eprintln!("xtask: installing QEMU failed");
        return 1;
    }
    // The device trees for the Pi cards (Debian's raspi-firmware has none).
    if let Err(e) = xtask::dtb::ensure() {
        eprintln!("xtask: {e}");
        return 1;
    }
    // U-Boot for the Allwinner boards' cards (Debian's u-boot-sunxi, armhf).
    if let Err(e) = xtask::uboot::ensure() {
        eprintln!("xtask: {e}");
        return 1;
    }
    // T-Head's qemu-riscv64 (PyPI xuantie-qemu) for the XTheadVector kernel tests.
    if let Err(e) = xtask::xuantie::ensure() {
        eprintln!("xtask: {e}");
        return 1;
    }
    0
}

/// `cargo xtask fetch-model [NAME]` (default: the default model) or `--list`; prints the path.
fn fetch_model(args: &[String]) -> i32 {
    match args {
        [] => print_path(model_or_report("fetch-model")),
        [flag] if flag == "--list" => {
            list_models();
            0
        }
        [name] if !name.starts_with('-') => print_path(
            xtask::ensure_named_model(name)
                .map_err(|e| eprintln!("xtask: fetch-model: {e}"))
                .ok(),
        ),
        _ => {
            eprintln!("xtask: usage: cargo xtask fetch-model [NAME | --list]");
            2
        }
    }
}

fn print_path(p: Option<std::path::PathBuf>) -> i32 {
    match p {
        Some(p) => {
            println!("{}", p.display());
            0
        }
        None => 1,
    }
}

/// The registry: name, size, whether the cache holds it, what it is.
fn list_models() {
    for m in xtask::MODELS {
        let state = if m.is_cached() {
            "cached"
        } else {
            "not fetched"
        };
        println!(
            "{:<20} {:>7.1} MB  {:<12} {}",
            m.name,
            m.bytes as f64 / 1e6,
            state,
            m.about
        );
    }
}

/// The default model ([`xtask::ensure_model`]); if it cannot be had, says so after `xtask: {what}: `.
fn model_or_report(what: &str) -> Option<std::path::PathBuf> {
    xtask::ensure_model()
        .map_err(|e| eprintln!("xtask: {what}: {e}"))
        .ok()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(xtask::workspace_root());
    c
}

fn run(mut c: Command) -> bool {
    eprintln!("xtask: running {c:?}");
    match c.status() {
        Ok(s) => s.success(),
        Err(e) => {
            eprintln!("xtask: {e}");
            false
        }
    }
}

/// The no_std crates must build for the bare-metal targets: nothing std leaks into the core.
fn check_targets() -> i32 {
    for target in BARE_METAL_TARGETS {
        let mut c = cargo();
        c.args([
            "build",
            "--release",
            "-p",
            "inference",
            "-p",
            "drivers",
            "-p",
            "runtime",
            "-p",
            "ring",
            "--lib",
            "--target",
            target,
        ]);
        if !run(c) {
            eprintln!("xtask: the no_std crates do not build for {target}");
            return 1;
        }
    }
    0
}

/// The docs build with rustdoc's warnings denied: a broken intra-doc link, a public item's doc
/// linking to a private one, a redundant link target fail the run. About 10 s once the
/// dependencies are checked; the first time it checks them too (about two minutes on two cores).
///
/// `--workspace` as the other host steps take it: the kernel is there as its host stub (its
/// modules are `cfg(target_os = "none")`), as for `cargo test` and `cargo clippy --workspace`,
/// so its board code's docs are not checked here; `cargo doc -p kernel --no-deps --target T`
/// with the same flags checks them for each of [`BARE_METAL_TARGETS`] (they pass; left out for
/// the time: up to two minutes more per target the first time).
fn docs() -> bool {
    let mut c = cargo();
    c.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    let ok = run(c);
    if !ok {
        eprintln!(
            "xtask: test: the docs do not build with rustdoc's warnings denied \
             (`RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps`): see above"
        );
    }
    ok
}

/// Models besides the default one that `cargo xtask test` needs.
const TEST_MODELS: [&str; 2] = ["gemma-3-270m", "qwen2.5-coder-0.5b"];

fn test(extra: &[String]) -> i32 {
    let mut phases = Phases::default();
    if phases.time("setup", setup) != 0 || phases.time("bare-metal builds", check_targets) != 0 {
        return 1;
    }
    let Some(model) = phases.time("models", fetch_test_models) else {
        return 1;
    };
    let test = |what: &[String]| {
        let mut c = cargo();
        c.args(["test", "--no-fail-fast"])
            .args(what)
            .env("LMBOOT_MODEL", &model);
        run_tests(c)
    };
    let mut ok = true;
    let mut totals = [0u64; 3];
    let mut add = |(o, t): (bool, [u64; 3])| {
        ok &= o;
        (0..3).for_each(|i| totals[i] += t[i]);
    };
    if !extra.is_empty() {
        // Arguments filter one run of the whole workspace (and skip the cross runs).
        let mut what = vec!["--workspace".to_string()];
        what.extend_from_slice(extra);
        add(phases.time("tests (filtered)", || test(&what)));
    } else {
        for (phase, what) in test_phases() {
            add(phases.time(phase, || test(&what)));
        }
        // The SIMD kernels against their scalar twins, and the KL rule on a SIMD build, under
        // qemu-user on the CPUs they are chosen for.
        add((phases.time("rustdoc, warnings denied", docs), [0; 3]));
        add(phases.time("cross kernel harnesses (qemu-user)", || cross_tests(&model)));
    }
    // One closing line over every test binary, so the total is not lost among per-binary summaries.
    println!(
        "lmboot: {} passed, {} failed, {} skipped",
        totals[0], totals[1], totals[2]
    );
    println!("{}", phases.table());
    if ok && totals[1] == 0 {
        0
    } else {
        1
    }
}

/// The default model's path, after fetching every model the tests use (the golden cases' and
/// the boots'), once here rather than by test threads at the same time; `None` (reported) if
/// one cannot be had.
fn fetch_test_models() -> Option<std::path::PathBuf> {
    let model = model_or_report("test: cannot get the model")?;
    for name in TEST_MODELS {
        if let Err(e) = xtask::ensure_named_model(name) {
            eprintln!("xtask: test: cannot get the model {name}: {e}");
            return None;
        }
    }
    Some(model)
}

/// `cargo test` runs of the whole suite, one a phase: the builds, the crates' own tests, the doc
/// tests, the integration tests on the PC (every crate's `tests/*.rs`), the QEMU boots
/// (`tests/tests/boot_*.rs`) and the fuzzers' regression and seed corpora (`fuzz_*.rs`). Each is a `--workspace` run, so that
/// every run unifies the crates' features alike and nothing is built twice.
fn test_phases() -> Vec<(&'static str, Vec<String>)> {
    // Every crate's integration tests: `CRATE/tests/NAME.rs`.
    let files = |dir: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let root = xtask::workspace_root();
    let mut names: Vec<String> = files(&root)
        .iter()
        .flat_map(|krate| files(&root.join(krate).join("tests")))
        .filter_map(|n| n.strip_suffix(".rs").map(String::from))
        .collect();
    names.sort();
    let all = |more: &[&str]| {
        let mut v = vec!["--workspace".to_string()];
        v.extend(more.iter().map(|m| m.to_string()));
        v
    };
    let pick = |keep: &dyn Fn(&str) -> bool| {
        let mut v = all(&[]);
        for n in names.iter().filter(|n| keep(n)) {
            v.extend(["--test".to_string(), n.clone()]);
        }
        v
    };
    vec![
        ("builds (the host's crates and tests)", all(&["--no-run"])),
        ("crates' unit tests", all(&["--lib", "--bins"])),
        ("doc tests", all(&["--doc"])),
        (
            "integration tests on the PC",
            pick(&|n| !n.starts_with("boot_") && !n.starts_with("fuzz_")),
        ),
        ("QEMU boots", pick(&|n| n.starts_with("boot_"))),
        (
            "fuzz regressions and seeds",
            pick(&|n| n.starts_with("fuzz_")),
        ),
    ]
}

/// Every [`cross_runs`] entry; (all passed, totals).
fn cross_tests(model: &std::path::Path) -> (bool, [u64; 3]) {
    let mut ok = true;
    let mut totals = [0u64; 3];
    for (what, args, cpu, cases) in cross_runs() {
        eprintln!("xtask: {what} (QEMU_CPU={cpu})");
        let mut c = cargo();
        c.args(args).env("QEMU_CPU", cpu).env("LMBOOT_MODEL", model);
        if let Some(runner) = xtask::xuantie::runner_for(cpu) {
            c.env("CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_RUNNER", runner);
        }
        if !cases.is_empty() {
            c.env("LMBOOT_GOLDEN_CASES", cases);
        }
        let (o, t) = run_tests(c);
        ok &= o;
        (0..3).for_each(|i| totals[i] += t[i]);
    }
    (ok, totals)
}

/// How long each phase of `cargo xtask test` took.
#[derive(Debug, Default)]
struct Phases(Vec<(&'static str, std::time::Duration)>);

impl Phases {
    /// Run `f` as the phase `name`.
    fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let t0 = std::time::Instant::now();
        let r = f();
        self.0.push((name, t0.elapsed()));
        r
    }

    /// `phase times: setup 1m 02s, ...; total 38m 10s`, one phase a line.
    fn table(&self) -> String {
        let mmss =
            |d: std::time::Duration| format!("{}m {:02}s", d.as_secs() / 60, d.as_secs() % 60);
        let mut s = String::from("phase times:\n");
        for (name, d) in &self.0 {
            s.push_str(&format!("  {:<40} {}\n", name, mmss(*d)));
        }
        let total: std::time::Duration = self.0.iter().map(|p| p.1).sum();
        s.push_str(&format!("  {:<40} {}", "total", mmss(total)));
        s
    }
}

/// Test runs for other architectures under qemu-user: (what, cargo arguments, QEMU_CPU, golden
/// cases). T-Head CPU models run under T-Head's qemu-riscv64 ([`xtask::xuantie::runner_for`]).
fn cross_runs() -> Vec<(&'static str, Vec<&'static str>, &'static str, &'static str)> {
    const A64: &str = "aarch64-unknown-linux-gnu";
    const RV: &str = "riscv64gc-unknown-linux-gnu";
    const A32: &str = "armv7-unknown-linux-gnueabihf";
    let a64 = cargo_test(A64, &["-p", "inference"]);
    let golden = cargo_test(A64, &["-p", "lmboot-tests", "--test", "golden_kl"]);
    let rv = cargo_test(RV, &["-p", "inference"]);
    let rv_golden = cargo_test(RV, &["-p", "lmboot-tests", "--test", "golden_kl"]);
    let a32 = cargo_test(A32, &["-p", "inference"]);
    let arm32 = cargo_test(A32, &["-p", "drivers", "-p", "runtime"]);
    let arm32_far = cargo_test(A32, &["-p", "lmboot-tests", "--test", "offsets_past_4g"]);
    vec![
        (
            "RVV kernels vs scalar, VLEN 128",
            rv.clone(),
            "rv64,v=true,vlen=128,elen=64",
            "",
        ),
        (
            "RVV kernels vs scalar, VLEN 256",
            rv.clone(),
            "rv64,v=true,vlen=256,elen=64",
            "",
        ),
        // The X280's VLEN: the Q6_K kernels and the Q8_0 quantizer take wider paths from 512 on.
        (
            "RVV kernels vs scalar, VLEN 512",
            rv.clone(),
            "rv64,v=true,vlen=512,elen=64",
            "",
        ),
        ("scalar fallback without V", rv.clone(), "rv64,v=false", ""),
        // T-Head's qemu-riscv64 (xuantie-qemu): XTheadVector, RVV 0.7.1 at VLEN 128.
        ("XTheadVector kernels vs scalar, C906", rv, "c906fdv", ""),
        (
            "teacher-forced KL on the RVV build",
            rv_golden,
            "rv64,v=true,vlen=256,elen=64",
            "",
        ),
        ("NEON kernels vs scalar", a64.clone(), "cortex-a53", ""),
        ("NEON+dotprod kernels vs scalar", a64, "cortex-a76", ""),
        (
            "AArch32 NEON kernels vs scalar, Cortex-A7",
            a32,
            "cortex-a7",
            "",
        ),
        (
            "teacher-forced KL on the NEON build",
            golden,
            "cortex-a53",
            "",
        ),
        (
            "32-bit offsets and sizes (drivers, runtime) under qemu-arm",
            arm32,
            "cortex-a7",
            "",
        ),
        (
            "32-bit: a model, a FAT volume and a page cache past 4 GiB under qemu-arm",
            arm32_far,
            "cortex-a7",
            "",
        ),
    ]
}

/// `cargo test --release` of `what` (packages, test binaries) for `target`.
fn cargo_test(target: &'static str, what: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec!["test", "--release", "--target", target];
    v.extend_from_slice(what);
    v
}

/// Run a `cargo test` command, echoing its output, and add up its "test result:" lines
/// (passed, failed, ignored).
fn run_tests(mut c: Command) -> (bool, [u64; 3]) {
    use std::io::{BufRead, BufReader};
    eprintln!("xtask: running {c:?}");
    let mut child = match c.stdout(std::process::Stdio::piped()).spawn() {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("xtask: {e}");
            return (false, [0; 3]);
        }
    };
    let mut totals = [0u64; 3];
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("{line}");
            if let Some(rest) = line.strip_prefix("test result: ") {
                for part in rest.split([';', '.']) {
                    let mut it = part.split_whitespace();
                    if let (Some(n), Some(what)) =
                        (it.next().and_then(|n| n.parse::<u64>().ok()), it.next())
                    {
                        match what {
                            "passed" => totals[0] += n,
                            "failed" => totals[1] += n,
                            "ignored" => totals[2] += n,
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    (ok, totals)
}

/// llama.cpp's speed on this kind of machine for the default model, 1 thread (`llama-bench -t 1
/// -p 128 -n 128`, the version vendored in llama-cpp-python 0.3.36; measured for the issue that
/// set lmboot-host's targets): pp128 and tg128 in tok/s.
const LLAMA_CPP_HOST: (&str, &str) = ("184-200", "81-89");

/// The PC runner's prefill and generation speed on the default model, greedy, one run each, at
/// 1 thread and at every core of this machine (`--threads N` for one count), with llama.cpp's
/// 1-thread figures beside them.
fn bench_host(extra: &[String]) -> i32 {
    let a = match host_bench_args(extra) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xtask: bench-host: {e}");
            return 1;
        }
    };
    let (model, threads, n, rest) = (&a.model, &a.threads, &a.n, &a.rest);
    // llama.cpp's figures are for the default model only.
    let theirs = if a.default_model {
        LLAMA_CPP_HOST
    } else {
        ("-", "-")
    };
    let mut c = cargo();
    c.args(["build", "--release", "--bin", "lmboot-host"]);
    if !run(c) {
        return 1;
    }
    let bin = xtask::workspace_root().join("target/release/lmboot-host");
    // A prompt of about 128 tokens for prefill, then generation from a short one.
    let long_prompt = "The history of computing is a story of machines that became smaller, cheaper and more capable. ".repeat(7);
    let cases = [
        ("prefill", long_prompt.as_str(), "1"),
        ("generation", "Once upon a time", n.as_str()),
    ];
    println!("| phase | tokens | tok/s | threads | llama.cpp, 1 thread |\n|---|---|---|---|---|");
    for &t in threads {
        for (phase, prompt, n) in cases {
            let args = ["--prompt", prompt, "-n", n, "--temp", "0", "--ctx", "512"];
            let t = t.to_string();
            let out = Command::new(&bin)
                .arg("--model")
                .arg(model)
                .args(args)
                .args(["--threads", &t])
                .args(rest)
                .output();
            let Some((tokens, rate)) = host_rate(out, phase) else {
                return 1;
            };
            let theirs = if phase == "prefill" {
                theirs.0
            } else {
                theirs.1
            };
            println!("| {phase} | {tokens} | {rate} | {t} | {theirs} |");
        }
    }
    0
}

/// `cargo xtask bench-host`'s arguments; the others go to `lmboot-host` as they are.
struct HostBenchArgs {
    model: std::path::PathBuf,
    /// Whether `model` is the default one (llama.cpp's figures are for it).
    default_model: bool,
    threads: Vec<usize>,
    n: String,
    rest: Vec<String>,
}

fn host_bench_args(extra: &[String]) -> Result<HostBenchArgs, String> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = vec![1, all];
    threads.dedup();
    let mut n = "128".to_string();
    let mut model = None;
    let mut rest = vec![];
    let mut it = extra.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--model" => model = Some(xtask::resolve_model(&value(&mut it, a, "a file or name")?)?),
            "--threads" => {
                let t = it.next().and_then(|t| t.parse().ok());
                threads = vec![t.unwrap_or(1)];
            }
            "-n" => n = it.next().cloned().unwrap_or(n),
            other => rest.push(other.to_string()),
        }
    }
    let default_model = model.as_ref().is_none_or(|m| *m == xtask::DEFAULT.path());
    let model = model.map_or_else(xtask::ensure_model, Ok)?;
    Ok(HostBenchArgs {
        model,
        default_model,
        threads,
        n,
        rest,
    })
}

/// Tokens and tok/s from one `lmboot-host` run's `prompt:` (prefill) or `generation:` line.
fn host_rate(out: std::io::Result<std::process::Output>, phase: &str) -> Option<(String, String)> {
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            eprintln!(
                "xtask: lmboot-host failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            return None;
        }
        Err(e) => {
            eprintln!("xtask: running lmboot-host: {e}");
            return None;
        }
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let key = if phase == "prefill" {
        "prompt:"
    } else {
        "generation:"
    };
    let Some(line) = err.lines().find(|l| l.starts_with(key)) else {
        eprintln!("xtask: no {key} line in:\n{err}");
        return None;
    };
    // "prompt: N tokens in S s (R tok/s)..."
    let tokens = line.split_whitespace().nth(1).unwrap_or("?").to_string();
    let rate = line
        .split('(')
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("?")
        .to_string();
    Some((tokens, rate))
}

fn report(r: Result<i32, String>) -> i32 {
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e}");
            1
        }
    }
}

/// `--board B`, `--model FILE|NAME`, `--out FILE`, `--mem SIZE`, `--icount`, `--smp N` and the generation flags.
struct BootArgs {
    board: xtask::Board,
    model: std::path::PathBuf,
    out: Option<std::path::PathBuf>,
    mem: Option<String>,
    icount: bool,
    smp: Option<u32>,
    cpu: Option<String>,
    settings: xtask::Settings,
}

fn boot_args(args: &[String]) -> Result<BootArgs, String> {
    let (settings, rest) = xtask::Settings::parse(args)?;
    let mut board = None;
    let mut model = None;
    let mut out = None;
    let mut mem = None;
    let mut icount = false;
    let mut smp = None;
    let mut cpu = None;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--board" => board = Some(val()?),
            "--model" => model = Some(xtask::resolve_model(&val()?)?),
            "--out" => out = Some(std::path::PathBuf::from(val()?)),
            "--mem" => mem = Some(val()?),
            "--icount" => icount = true,
            "--smp" => smp = Some(val()?.parse().map_err(|_| "--smp needs a number")?),
            "--cpu" => cpu = Some(val()?),
            other => return Err(format!("unknown argument {other:?} (see cargo xtask help)")),
        }
    }
    let board = xtask::board(board.as_deref().unwrap_or("qemu-virt-aarch64"))?;
    let model = model.map_or_else(xtask::ensure_model, Ok)?;
    Ok(BootArgs {
        board,
        model,
        out,
        mem,
        icount,
        smp,
        cpu,
        settings,
    })
}

/// Build the kernel (for QEMU or for hardware) and write the card image; returns (kernel, image).
fn build_card(
    a: &BootArgs,
    for_qemu: bool,
) -> Result<(std::path::PathBuf, std::path::PathBuf), String> {
    eprintln!(
        "xtask: building the kernel for {}{}",
        a.board.name,
        if for_qemu { " (QEMU)" } else { "" }
    );
    let kernel = xtask::build_kernel(&a.board, for_qemu)?;
    let suffix = if for_qemu { "-qemu" } else { "" };
    let out = a.out.clone().unwrap_or_else(|| {
        xtask::workspace_root()
            .join("target")
            .join(format!("{}{suffix}.img", a.board.name))
    });
    xtask::card_image(&a.board, Some(&kernel), &a.settings, &a.model, &out)?;
    eprintln!("xtask: image {} ready", out.display());
    Ok((kernel, out))
}

/// `cargo xtask demo`: setup, model, kernel, card image with `mode = chat`, and QEMU with the UART
/// on this terminal (raw, Ctrl-C passed to the board).
fn demo(args: &[String]) -> Result<i32, String> {
    if setup() != 0 {
        return Err("setup failed".into());
    }
    let mut a = boot_args(args)?;
    no_qemu_machine(&a.board)?;
    // A chat: replies up to 256 tokens, a 2048-position context, and the prompt cache on (the image is this demo's own copy of the card).
    if !args.iter().any(|x| x == "-n") {
        a.settings.n = 256;
    }
    if !args.iter().any(|x| x == "--ctx") {
        a.settings.ctx = 2048;
    }
    // The sampling the model's card recommends, when the registry knows it (SmolLM2-135M at the
    // usual 0.7 answers "What is the capital of France?" with a made-up city first).
    let recommended = xtask::MODELS
        .iter()
        .find(|m| m.is_at(&a.model))
        .and_then(|m| m.sampling);
    let (temp, top_p) = recommended.unwrap_or(("0.7", "0.95"));
    if !args.iter().any(|x| x == "--temp") {
        a.settings.temp = temp.into();
    }
    if !args.iter().any(|x| x == "--top-p") {
        a.settings.top_p = top_p.into();
    }
    // Chat's repetition guard (the kernel's default in a chat, unless the model sets one).
    if !args.iter().any(|x| x == "--repeat-penalty") {
        a.settings.repeat_penalty = String::new();
    }
    a.settings.extra.insert(0, ("mode".into(), "chat".into()));
    a.settings
        .extra
        .insert(1, ("allow_write".into(), "true".into()));
    if a.out.is_none() {
        a.out = Some(
            xtask::workspace_root()
                .join("target")
                .join(format!("demo-{}.img", a.board.name)),
        );
    }
    let (kernel, img) = build_card(&a, true)?;
    let opts = xtask::QemuOpts {
        mem: a.mem.clone(),
        smp: a.smp,
        cpu: a.cpu.clone(),
        interactive: true,
        ..Default::default()
    };
    let c = xtask::qemu_command(&a.board, &kernel, &img, &opts);
    eprintln!(
        "xtask: booting {} in QEMU; the chat prompt appears once the model is loaded.",
        a.board.name
    );
    eprintln!("xtask: type a message and Enter; Ctrl-C stops a reply, /help lists commands, Ctrl-D ends, Ctrl-A X quits QEMU.\n");
    run_qemu(&a.board, c)
}

/// Run QEMU command `c` for `board` to the end; its exit status.
fn run_qemu(board: &xtask::Board, mut c: Command) -> Result<i32, String> {
    let status = c.status().map_err(|e| {
        format!(
            "running {}: {e} (run `cargo xtask setup`)",
            board.qemu_binary
        )
    })?;
    Ok(status.code().unwrap_or(1))
}

/// `cargo xtask image`: a card for real hardware (Raspberry Pi boards get the firmware, config.txt
/// and kernel8.img too).
/// A board QEMU has no machine for is refused, naming the board that stands in for it.
fn no_qemu_machine(b: &xtask::Board) -> Result<(), String> {
    match &b.stand_in {
        Some(s) if b.qemu_binary.is_empty() => Err(format!(
            "QEMU has no machine for {}: boot its stand-in, --board {s} (what it shows and what it cannot: boards/{s}.toml), or build its card with `cargo xtask image --board {}`",
            b.name, b.name
        )),
        _ => Ok(()),
    }
}

fn image(args: &[String]) -> Result<std::path::PathBuf, String> {
    let a = boot_args(args)?;
    Ok(build_card(&a, false)?.1)
}

fn qemu(args: &[String]) -> Result<i32, String> {
    if setup() != 0 {
        return Err("setup failed".into());
    }
    let a = boot_args(args)?;
    no_qemu_machine(&a.board)?;
    let (kernel, img) = build_card(&a, true)?;
    let opts = xtask::QemuOpts {
        mem: a.mem.clone(),
        smp: a.smp,
        cpu: a.cpu.clone(),
        icount: a.icount,
        ..Default::default()
    };
    let c = xtask::qemu_command(&a.board, &kernel, &img, &opts);
    eprintln!("xtask: {c:?}");
    run_qemu(&a.board, c)
}

/// `cargo xtask ring --boards N`: N virt boards, each with its own card (`ring = K/N`), wired in
/// a ring; the head's console here, then every hop's bytes and the link's throughput.
fn ring(args: &[String]) -> Result<i32, String> {
    if setup() != 0 {
        return Err("setup failed".into());
    }
    let mut boards = 3usize;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--boards" => boards = number(&mut it, a)?,
            _ => rest.push(a.clone()),
        }
    }
    if !(2..=8).contains(&boards) {
        return Err(format!("--boards {boards}: a ring has 2 to 8 boards"));
    }
    let a = boot_args(&rest)?;
    if a.board.name != "qemu-virt-aarch64" {
        return Err(
            "the QEMU ring runs on qemu-virt-aarch64 (its second PL011 is the link)".into(),
        );
    }
    let kernel = xtask::build_kernel(&a.board, true)?;
    let mut images = Vec::new();
    for k in 1..=boards {
        let mut s = a.settings.clone();
        s.extra.push(("ring".into(), format!("{k}/{boards}")));
        let img = xtask::workspace_root()
            .join("target")
            .join(format!("ring-{k}-of-{boards}.img"));
        xtask::card_image(&a.board, Some(&kernel), &s, &a.model, &img)?;
        images.push(img);
    }
    let spec = xtask::ring::RingSpec {
        images,
        opts: xtask::QemuOpts {
            mem: a.mem.clone(),
            smp: a.smp,
            cpu: a.cpu.clone(),
            ..Default::default()
        },
        echo: true,
        kill: None,
        limit: std::time::Duration::from_secs(24 * 3600),
    };
    let o = xtask::ring::run(&a.board, &kernel, &spec)?;
    for (k, c) in o.consoles.iter().enumerate().skip(1) {
        let path = xtask::workspace_root()
            .join("target")
            .join(format!("ring-{}-of-{boards}.log", k + 1));
        std::fs::write(&path, c).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("xtask: board {}'s console: {}", k + 1, path.display());
    }
    let total: u64 = o.hops.iter().sum();
    for (k, (b, p)) in o.hops.iter().zip(&o.peaks).enumerate() {
        eprintln!(
            "xtask: hop {} -> {}: {b} bytes, at most {p} in one second",
            k + 1,
            (k + 1) % boards + 1
        );
    }
    if o.seconds > 0.0 {
        eprintln!(
            "xtask: the links carried {total} bytes in {:.1} s ({:.0} KB/s over all hops)",
            o.seconds,
            total as f64 / o.seconds / 1000.0
        );
    }
    Ok(o.code)
}

/// The value after `flag` on the command line.
fn value(it: &mut std::slice::Iter<'_, String>, flag: &str, what: &str) -> Result<String, String> {
    it.next()
        .cloned()
        .ok_or_else(|| format!("{flag} needs {what}"))
}

/// The number after `flag` on the command line.
fn number<T: std::str::FromStr>(
    it: &mut std::slice::Iter<'_, String>,
    flag: &str,
) -> Result<T, String> {
    it.next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number"))
}

/// The parts of `cargo xtask bench` (`--only PART`); `mca`, `speculative` and `xtheadvector` run
/// only when asked for.
const BENCH_PARTS: [&str; 11] = [
    "instructions",
    "batches",
    "cache",
    "readahead",
    "mca",
    "models",
    "llamacpp",
    "card",
    "speculative",
    "xtheadvector",
    "selftest",
];

fn bench(args: &[String]) -> Result<i32, String> {
    let mut n = 8;
    let mut board: Option<String> = None;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-n" => n = number(&mut it, a)?,
            "--board" => board = Some(value(&mut it, a, "a board")?),
            "--only" => only = Some(value(&mut it, a, &BENCH_PARTS.join(", "))?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if let Some(o) = only.as_deref().filter(|o| !BENCH_PARTS.contains(o)) {
        return Err(format!("--only {o}: expected {}", BENCH_PARTS.join(", ")));
    }
    if only.as_deref() == Some("mca") {
        // Static analysis only: no QEMU, no model; the LLVM 19 tools are checked by the bench.
        println!("{}", xtask::mca::run()?);
        eprintln!("xtask: wrote results/mca.md");
        return Ok(0);
    }
    if only.as_deref() == Some("speculative") {
        // The PC runner on the boards' clocks: no QEMU; it fetches Qwen2.5-Coder-1.5B and -0.5B.
        println!("{}", xtask::specbench::run(n.max(48))?);
        eprintln!("xtask: wrote results/speculative.md");
        return Ok(0);
    }
    if setup() != 0 {
        return Err("setup failed".into());
    }
    if only.as_deref() == Some("xtheadvector") {
        // T-Head's emulator and the Duo's stand-in: only when asked for.
        println!("{}", xtask::duo::run()?);
        eprintln!("xtask: wrote results/xtheadvector.md");
        return Ok(0);
    }
    let want = |part: &str| only.as_deref().is_none_or(|o| o == part);
    // `models` measures llama.cpp too; `llamacpp` is its comparison alone.
    if only.as_deref() == Some("llamacpp") {
        println!("{}", xtask::bench::llama_cpp(n.min(4))?);
        eprintln!("xtask: wrote results/llamacpp.md");
        return Ok(0);
    }
    if want("instructions") {
        let md = xtask::bench::run(&xtask::bench::cases_for(board.as_deref()), n)?;
        println!("{md}");
        eprintln!("xtask: wrote results/bench.md and results/bench.svg");
    }
    if want("batches") {
        println!("{}", xtask::bench::batches(n.min(4))?);
        eprintln!("xtask: wrote results/batches.md");
    }
    if want("cache") {
        println!("{}", xtask::bench::cache_sweep(6)?);
        eprintln!("xtask: wrote results/pagecache.md and results/pagecache.svg");
    }
    if want("readahead") {
        println!("{}", xtask::bench::readahead(n)?);
        eprintln!("xtask: wrote results/readahead.md");
    }
    if want("models") {
        println!("{}", xtask::bench::models(n.min(4))?);
        eprintln!("xtask: wrote results/models.md");
    }
    if want("selftest") {
        println!("{}", xtask::selfbench::run()?);
        eprintln!("xtask: wrote results/selftest.md");
    }
    if want("card") {
        println!("{}", xtask::bench::card()?);
        eprintln!("xtask: wrote results/card.md");
    }
    Ok(0)
}

fn house() -> Result<i32, String> {
    let r = xtask::house::measure(&xtask::workspace_root())?;
    print!("{}", r.text());
    let broken = r.broken();
    for b in &broken {
        eprintln!("xtask: {b}");
    }
    Ok(i32::from(!broken.is_empty()))
}

fn fuzz(args: &[String]) -> Result<i32, String> {
    let mut seconds = 60;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => seconds = number(&mut it, a)?,
            "--target" => only = Some(value(&mut it, a, "a fuzz target")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if let Some(o) = only.as_deref() {
        if !xtask::fuzz::TARGETS.contains(&o) {
            return Err(format!(
                "no fuzz target {o:?}; the targets: {}",
                xtask::fuzz::TARGETS.join(", ")
            ));
        }
    }
    let mut failed = false;
    for t in xtask::fuzz::TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == **t))
    {
        eprintln!("xtask: fuzzing {t} for {seconds} s");
        match xtask::fuzz::run(t, seconds) {
            Ok(execs) => println!(
                "fuzz {t}: {execs} executions in {seconds} s ({} per s), no crash",
                execs / seconds.max(1)
            ),
            Err(e) => {
                eprintln!("xtask: {e}");
                failed = true;
            }
        }
    }
    Ok(i32::from(failed))
}
